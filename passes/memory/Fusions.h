//===- Fusions.h - what planning folds into a neighbouring launch -*- C++ -*-===//
//
// Three decisions the planner takes before it lays anything out, shared by
// tailor-lower-to-sched and the activation-memory analysis (so the estimate
// a recomputation budget is checked against sees the same buffers the plan
// will hold):
//  - transpose(W) read only as linear weights: the kernel reads W as stored;
//  - quantized weights read only by linear layers: dequantized per tile
//    inside the GEMM, never whole;
//  - weight and embedding gradients whose only use is an accumulation:
//    written straight into the accumulator;
//  - kernels that may overwrite an input (their CPU and CUDA kernels read
//    each element before writing it) write their result into that input's
//    buffer when this op is the input's last reader: the logits' gradient
//    takes the logits' bytes, so the vocabulary-wide tensor exists once.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_MEMORY_FUSIONS_H
#define TAILOR_PASSES_MEMORY_FUSIONS_H

#include "dialects/tg/TGOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace tailor::memory {

struct Fusions {
  /// transpose(W) read only as linear weights: the kernel reads W as is.
  llvm::DenseSet<mlir::Operation *> foldedTransposes;
  /// Quantized weights read only by linear layers: dequantized per tile.
  llvm::DenseSet<mlir::Operation *> fusedDequantizes;
  /// Gradients whose only use is an accumulation: written into it.
  llvm::DenseMap<mlir::Operation *, tg::AccumulateOp> accumulatedInPlace;
  /// Ops whose (single) result reuses the buffer of this operand.
  llvm::DenseMap<mlir::Operation *, unsigned> resultOverOperand;
};

/// Kernels that can add their result into an accumulator instead of
/// writing a fresh buffer (attribute `accumulate`).
bool canAccumulateInPlace(mlir::Operation *op);

/// The fusions of one function body.
Fusions decideFusions(mlir::Block &body);

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_FUSIONS_H
