//===- Plan.h - a loaded, verified plan file --------------------*- C++ -*-===//
//
// Loading reads the whole file (plans hold no weights, so they are small),
// runs the flatbuffers Verifier, then checks what the format alone cannot
// promise: every buffer inside its arena, shapes that fit their sizes, known
// kernels with the right operand counts, parameter sources inside their
// files, a memory report that matches the arenas. After `load` succeeds,
// nothing that reads the plan needs to check an index again.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_PLAN_H
#define TAILOR_RUNTIME_PLAN_H

#include "runtime/cpu/Kernel.h"
#include "runtime/quant/QuantizedWeight.h"
#include "runtime/schema/plan_generated.h"

#include <memory>
#include <string>
#include <vector>

namespace tailor::runtime {

/// The plan format version (major * 100 + minor): the one the plan writer
/// (compiler/PlanWriter.cpp) produces, and this runtime reads any minor
/// version of its major version.
constexpr uint32_t kPlanVersion = 117;

/// The largest rank of a buffer in a plan.
constexpr int64_t kMaxPlanRank = 8;

struct LoadOptions {
  /// Check that every parameter's source file exists and is long enough.
  /// `tailor inspect` turns this off so it can show plans whose weights are
  /// elsewhere.
  bool checkSourceFiles = true;
  /// A layer split's plan holds one plan per pipeline stage (plan 1.10):
  /// load stage `stage`'s; with `stage` -1, the stage launch rank `rank`
  /// runs (rank / replicas, 1.13: stage-major ranks); refuse with how to
  /// run it when both are -1.
  int stage = -1;
  int rank = -1;
  /// The launch's world size (0: unknown): a layer split's plan launched on
  /// another is refused, naming both (its stages are loaded by rank, so
  /// the check cannot wait until the communicator starts).
  int worldSize = 0;
};

/// Stages of a layer split's plan file (the outer plan of 1.10), 0 when
/// `plan` is an ordinary one.
inline int pipelineStageCount(const tailor::plan::Plan &plan) {
  return plan.stages() ? static_cast<int>(plan.stages()->size()) : 0;
}

/// The storage spec a plan's Quantization table describes, or "" in `error`
/// set to what is wrong (unknown scheme, a spec checkSpec rejects).
bool quantSpecOf(const tailor::plan::Quantization &table,
                 quant::QuantSpec &spec, std::string &error);

/// The bytes of a plan's device image, decompressed when the plan stores
/// it compressed; "" or what is wrong (bad zlib data, wrong size).
std::string deviceCodeBytes(const tailor::plan::DeviceCode &code,
                            std::vector<uint8_t> &bytes);

/// Where `buffer` starts in its arena on rank `rank` of a world of
/// `worldSize`: `offset + (rank mod period) * rank_stride`, period 0 being
/// the world size.
uint64_t rankOffset(const tailor::plan::Buffer &buffer, int rank,
                    int worldSize);

/// A copy step's name in timelines and profiles: "copy_h2d", "copy_d2h",
/// "copy_d2d" or "copy_h2h".
const char *copyStepName(tailor::plan::CopyKind kind);

/// Whether a copy of `kind` moves bytes between host and device memory
/// (HostToDevice, DeviceToHost): the ones Session::bytesCopied counts.
bool crossesHostAndDevice(tailor::plan::CopyKind kind);

/// A launch's attributes as kernels read them.
Attributes decodeLaunchAttributes(const tailor::plan::Launch &launch);

/// Why a load failed, so the C API can tell a file it cannot read from a
/// plan it will not run.
enum class LoadFailure {
  /// Not a plan, truncated, damaged, of another version or inconsistent.
  InvalidPlan,
  /// A file cannot be opened or read: the plan file, or a parameter's
  /// weights file (missing, unreadable, or shorter than the plan reads).
  Io,
};

class LoadedPlan {
public:
  /// Reads and verifies the plan at `path`; on failure returns null and sets
  /// `error` (which names the file and the first problem) and, when given,
  /// `failure`.
  static std::unique_ptr<LoadedPlan> load(const std::string &path,
                                          const LoadOptions &options,
                                          std::string &error,
                                          LoadFailure *failure = nullptr);
  /// The same for a plan in memory (copied); relative weight paths resolve
  /// against `baseDir`.
  static std::unique_ptr<LoadedPlan>
  loadFromMemory(const void *data, size_t size, const std::string &baseDir,
                 const std::string &displayName, const LoadOptions &options,
                 std::string &error, LoadFailure *failure = nullptr);

  const plan::Plan &root() const { return *planRoot; }
  const std::string &name() const { return displayName; }
  /// Where a parameter source file lives: relative paths are taken from the
  /// plan's directory.
  std::string resolveSourcePath(const std::string &file) const;

  /// A buffer's element type and shape, as kernels see them.
  DType bufferDType(uint32_t buffer) const;
  std::vector<int64_t> bufferShape(uint32_t buffer) const;
  uint64_t bufferBytes(uint32_t buffer) const;
  /// A parameter's logical (unsharded) shape and element count: its
  /// shard's shape for a ZeRO-3 parameter (whose buffer is a chunk of a
  /// bucket, plan 1.7), its buffer's otherwise.
  std::vector<int64_t> parameterShape(const plan::Parameter &param) const;
  uint64_t parameterElements(const plan::Parameter &param) const;
  /// Where buffer `buffer` starts in its arena on rank `rank`: its offset,
  /// moved by the rank's position times its rank stride (plan 1.7).
  uint64_t bufferOffset(uint32_t buffer, int rank) const;

private:
  LoadedPlan() = default;
  /// Stage `options.stage` of a layer split's plan `outer`.
  static std::unique_ptr<LoadedPlan> loadStage(const LoadedPlan &outer,
                                               const LoadOptions &options,
                                               std::string &error,
                                               LoadFailure *failure);
  /// The plan alone: everything but its weights files.
  std::string verify() const;
  /// Every parameter's weights file exists and holds the bytes it reads
  /// (LoadOptions::checkSourceFiles).
  std::string verifySourceFiles() const;
  /// A CUDA plan's device code: readable images for the declared SMs, a
  /// cubin for the target, every entry point the launches need.
  std::string verifyDeviceCode() const;

  std::vector<uint8_t> storage;
  const plan::Plan *planRoot = nullptr;
  std::string baseDir;
  std::string displayName;
};

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_PLAN_H
