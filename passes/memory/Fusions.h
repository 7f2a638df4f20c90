//===- Fusions.h - what planning folds into a neighbouring launch -*- C++ -*-===//
//
// The decisions the planner takes before it lays anything out, shared by
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
//    takes the logits' bytes, so the vocabulary-wide tensor exists once;
//  - GEMM epilogues: a product by a scalar constant next to a GEMM becomes
//    the GEMM's alpha, and an addition of a GEMM's result to a tensor read
//    for the last time becomes the GEMM adding into that tensor's buffer
//    (BLAS's and cuBLASLt's beta = 1). LoRA's `base + s (x A^T) B^T` and the
//    sums of gradients that fan in to one activation then run as GEMMs
//    alone, with no elementwise launch and no buffer between them; a sum
//    whose other operand lives on (the residual stream) becomes an addend
//    the first GEMM of the chain reads (cuBLASLt's C apart from D);
//  - fusion groups (FusionGroups.cpp): chains of elementwise ops of one
//    shape run as one `fused_elementwise` launch (runtime/cpu/
//    FusedProgram.h) at the place of their last op; values inside a group
//    never become tensors.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_MEMORY_FUSIONS_H
#define TAILOR_PASSES_MEMORY_FUSIONS_H

#include "dialects/tg/TGOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>
#include <vector>

namespace tailor::memory {

/// What a GEMM (linear, linear_quantized, linear_weight_grad) does besides
/// its product: `result = alpha * product (+ into)`.
struct GemmEpilogue {
  double alpha = 1.0;
  /// When set, the GEMM adds its product into this value's buffer, which
  /// then holds the result.
  mlir::Value into;
  /// When set (linear only), the GEMM writes `alpha * product + addend` to
  /// a buffer of its own, reading this value (a residual) as it goes.
  mlir::Value addend;
};

/// A `tg.mul(x, c)` by a scalar constant c whose factor GEMMs apply.
struct ScaleFold {
  /// x, the operand that is not the constant.
  mlir::Value source;
  /// True when the GEMM that made x applies c (the product is a view of
  /// x's buffer); false when every reader of the product is a GEMM that
  /// applies c reading x.
  bool intoProducer = false;
};

/// Elementwise ops planned as one fused_elementwise launch, at the place of
/// the last member.
struct FusionGroup {
  /// In block order; each is one instruction of the program.
  llvm::SmallVector<mlir::Operation *> members;
  /// What the program reads (x0, x1, ...) and writes (member results read
  /// outside the group), in launch operand order.
  llvm::SmallVector<mlir::Value> inputs;
  llvm::SmallVector<mlir::Value> outputs;
  /// The launch's `program` and `outputs` attributes.
  std::string program;
  llvm::SmallVector<int64_t> outputInstructions;
};

struct Fusions {
  /// transpose(W) read only as linear weights: the kernel reads W as is.
  llvm::DenseSet<mlir::Operation *> foldedTransposes;
  /// Quantized weights read only by linear layers: dequantized per tile.
  llvm::DenseSet<mlir::Operation *> fusedDequantizes;
  /// Gradients whose only use is an accumulation: written into it.
  llvm::DenseMap<mlir::Operation *, tg::AccumulateOp> accumulatedInPlace;
  /// Ops whose (single) result reuses the buffer of this operand.
  llvm::DenseMap<mlir::Operation *, unsigned> resultOverOperand;
  /// Products by a scalar that GEMMs apply (no launch of their own).
  llvm::DenseMap<mlir::Operation *, ScaleFold> foldedScales;
  /// Additions a GEMM does by adding into the buffer of the given operand
  /// (no launch of their own; the sum is a view of that buffer).
  llvm::DenseMap<mlir::Operation *, mlir::Value> foldedAdds;
  /// GEMMs with a folded scale or addition.
  llvm::DenseMap<mlir::Operation *, GemmEpilogue> gemmEpilogues;

  /// Fusion groups of two or more ops, and the group of each member.
  std::vector<FusionGroup> groups;
  llvm::DenseMap<mlir::Operation *, unsigned> groupOf;

  /// The value a kernel reads for `operand`: x for a product by a scalar
  /// whose readers apply the factor, else `operand` itself.
  mlir::Value readValue(mlir::Value operand) const;
};

/// Kernels that can add their result into an accumulator instead of
/// writing a fresh buffer (attribute `accumulate`).
bool canAccumulateInPlace(mlir::Operation *op);

/// The value whose buffer `value` is: through reshapes (views) to the op
/// that made it.
mlir::Value storageOwner(mlir::Value value);

/// The value of a one-element float constant, in double (exact for every
/// float type tg has).
std::optional<double> oneElementConstant(mlir::Value value);

/// The fusions of one function body.
Fusions decideFusions(mlir::Block &body);

/// Whether `op` is an elementwise op a fusion group may take.
bool isFusableElementwise(mlir::Operation *op);

/// Groups the elementwise ops of `body` that the other fusions left as
/// launches (FusionGroups.cpp); decideFusions calls it last.
void decideFusionGroups(mlir::Block &body, Fusions &fusions);

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_FUSIONS_H
