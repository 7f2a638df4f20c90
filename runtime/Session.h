//===- Session.h - a plan bound to memory, ready to run ---------*- C++ -*-===//

#ifndef TAILOR_RUNTIME_SESSION_H
#define TAILOR_RUNTIME_SESSION_H

#include "runtime/Plan.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tailor::runtime {

/// Owns the arenas of one plan (exactly the sizes it names), the bound
/// parameters, and the prepared launches.
class Session {
public:
  /// Allocates arenas, copies constants, binds parameters from their files,
  /// and checks every launch with its kernel. Returns null and sets `error`
  /// (and `status`) on failure.
  static std::unique_ptr<Session> create(const LoadedPlan &plan, int threads,
                                         std::string &error, int &status);
  ~Session();

  /// Runs the steps of the first entry (an inference plan's whole program)
  /// in order; on failure says which step and why.
  std::string run();

  /// Index of the entry named `name` in the plan, or -1. A plan without
  /// entries has one, `forward`.
  int findEntry(std::string_view name) const;
  /// Runs the steps of entry `index` in order; returns "" or why it failed.
  std::string runEntry(uint32_t index);
  /// Number of entries (at least 1).
  uint32_t entryCount() const { return static_cast<uint32_t>(entries.size()); }

  /// The bytes at buffer `index` (inside an arena).
  void *bufferData(uint32_t index) const;

  /// Bytes allocated per category (parameters, constants, activations,
  /// workspace, optimizer state, gradients).
  const uint64_t *allocatedBytes() const { return allocated; }

  const LoadedPlan &plan() const { return loaded; }

private:
  explicit Session(const LoadedPlan &plan) : loaded(plan) {}
  std::string bindParameters();
  /// Fills parameters without a source as their Init says.
  std::string initializeParameters();

  struct PreparedLaunch {
    const KernelDef *kernel = nullptr;
    KernelCall call;
    std::string origin;
    uint32_t step = 0; // index in the plan's ops
  };
  struct EntryRange {
    std::string name;
    uint32_t first = 0;
    uint32_t count = 0;
  };

  const LoadedPlan &loaded;
  std::vector<void *> arenas;
  uint64_t allocated[6] = {0, 0, 0, 0, 0, 0};
  std::unique_ptr<ThreadPool> pool;
  std::vector<PreparedLaunch> launches;
  std::vector<EntryRange> entries;
  /// TAILOR_PROFILE=1: seconds and calls per kernel, printed to stderr when
  /// the session ends (the place to look before optimizing a kernel).
  bool profile = false;
  std::vector<double> profileSeconds;
  std::vector<uint64_t> profileCalls;
};

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_SESSION_H
