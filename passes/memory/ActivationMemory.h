//===- ActivationMemory.h - bytes of activations alive over a step -*- C++ -*-===//
//
// A pure analysis of one tg function in program order: which values become
// activation buffers (the results the planner gives fresh storage, by the
// same rules and fusions as tailor-lower-to-sched: views share their
// input's buffer, parameters, states, constants and inputs live elsewhere,
// gradients accumulated in place write into their state), how long each
// lives (its producer to its last reader, through views; outputs to the
// end), and the largest sum alive at any step. It never mutates IR, so a
// search (the recomputation budget, later `tailor explore`) can ask it as
// often as it likes.
//
// Two figures: the bytes alive at the worst step (each buffer rounded up to
// `alignment`), and the arena the planner's own allocator packs the same
// buffers into, which is what the plan will hold for this function. Kernel
// workspaces are an arena of their own and are not counted.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_MEMORY_ACTIVATIONMEMORY_H
#define TAILOR_PASSES_MEMORY_ACTIVATIONMEMORY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <vector>

namespace tailor::memory {

/// One activation buffer: bytes and inclusive live range in op positions.
struct ActivationBuffer {
  mlir::Value value;
  int64_t bytes = 0;
  int64_t first = 0;
  int64_t last = 0;
};

class ActivationMemory {
public:
  /// Analyzes `func` (a single-block tg function).
  explicit ActivationMemory(mlir::func::FuncOp func, int64_t alignment = 64);
  /// The MLIR analysis-manager constructor (`getAnalysis<ActivationMemory>`).
  explicit ActivationMemory(mlir::Operation *op)
      : ActivationMemory(llvm::cast<mlir::func::FuncOp>(op)) {}

  /// The largest sum of activation bytes alive at one step.
  int64_t peakBytes() const { return peak; }
  /// The arena the planner's allocator (passes/memory/ArenaPacking.h)
  /// packs these buffers into: what the plan's activation arena for this
  /// function will be, at least as large as peakBytes().
  int64_t arenaBytes() const { return arena; }
  /// The position (0-based op index) where the peak is reached.
  int64_t peakStep() const { return peakAt; }
  /// Every activation buffer, in the order their producers run.
  const std::vector<ActivationBuffer> &buffers() const { return all; }

private:
  std::vector<ActivationBuffer> all;
  int64_t peak = 0;
  int64_t arena = 0;
  int64_t peakAt = 0;
};

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_ACTIVATIONMEMORY_H
