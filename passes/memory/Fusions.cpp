//===- Fusions.cpp - what planning folds into a neighbouring launch -------===//

#include "passes/memory/Fusions.h"

using namespace mlir;

namespace tailor::memory {

bool canAccumulateInPlace(Operation *op) {
  return llvm::isa_and_nonnull<tg::LinearWeightGradOp, tg::EmbeddingGradOp>(op);
}

Fusions decideFusions(Block &body) {
  Fusions fusions;
  // Exporters that pre-transpose Linear weights leave `transpose(W)` feeding
  // tg.linear, and the backward pass of a linear layer multiplies by W
  // through `linear(dy, transpose(W))`; the linear kernel reads W as stored
  // instead (attribute `transpose_weight`), so no launch copies a weight.
  for (auto transpose : body.getOps<tg::TransposeOp>()) {
    bool swap2d = transpose.getPermutation() == ArrayRef<int64_t>{1, 0};
    bool onlyLinearWeights =
        !transpose->use_empty() &&
        llvm::all_of(transpose->getUses(), [](OpOperand &use) {
          return llvm::isa<tg::LinearOp>(use.getOwner()) &&
                 use.getOperandNumber() == 1;
        });
    if (swap2d && onlyLinearWeights) {
      fusions.foldedTransposes.insert(transpose);
    }
  }
  // Quantized weights read only by linear layers (directly or through a
  // folded transpose) are never dequantized whole: the linear kernel
  // dequantizes tiles of the stored weight.
  for (auto dequantize : body.getOps<tg::DequantizeOp>()) {
    bool onlyLinear = llvm::all_of(dequantize->getUses(), [&](OpOperand &use) {
      Operation *user = use.getOwner();
      if (fusions.foldedTransposes.contains(user)) {
        return true;
      }
      return llvm::isa<tg::LinearOp>(user) && use.getOperandNumber() == 1;
    });
    if (onlyLinear) {
      fusions.fusedDequantizes.insert(dequantize);
    }
  }
  // Weight and embedding gradients whose only use is an accumulation add
  // straight into the accumulator.
  for (auto accumulate : body.getOps<tg::AccumulateOp>()) {
    Operation *producer = accumulate.getValue().getDefiningOp();
    if (canAccumulateInPlace(producer) && accumulate.getValue().hasOneUse()) {
      fusions.accumulatedInPlace[producer] = accumulate;
    }
  }
  return fusions;
}

} // namespace tailor::memory
