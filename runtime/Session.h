//===- Session.h - a plan bound to memory, ready to run ---------*- C++ -*-===//

#ifndef TAILOR_RUNTIME_SESSION_H
#define TAILOR_RUNTIME_SESSION_H

#include "runtime/Plan.h"

#include <cstdlib>
#include <memory>
#include <string>
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

  /// Runs every step in order; on failure says which step and why.
  std::string run();

  /// The bytes at buffer `index` (inside an arena).
  void *bufferData(uint32_t index) const;

  /// Bytes allocated per category (parameters, constants, activations,
  /// workspace, optimizer state, gradients).
  const uint64_t *allocatedBytes() const { return allocated; }

  const LoadedPlan &plan() const { return loaded; }

private:
  explicit Session(const LoadedPlan &plan) : loaded(plan) {}
  std::string bindParameters();

  struct PreparedLaunch {
    const KernelDef *kernel = nullptr;
    KernelCall call;
    std::string origin;
  };

  const LoadedPlan &loaded;
  std::vector<void *> arenas;
  uint64_t allocated[6] = {0, 0, 0, 0, 0, 0};
  std::unique_ptr<ThreadPool> pool;
  std::vector<PreparedLaunch> launches;
};

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_SESSION_H
