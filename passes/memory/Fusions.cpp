//===- Fusions.cpp - what planning folds into a neighbouring launch -------===//

#include "passes/memory/Fusions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace tailor::memory {

bool canAccumulateInPlace(Operation *op) {
  return llvm::isa_and_nonnull<tg::LinearWeightGradOp, tg::EmbeddingGradOp>(op);
}

namespace {

/// The operand a kernel may overwrite with its result: cross_entropy_grad's
/// logits (runtime/cpu/LossKernels.cpp and codegen/cuda/GradientKernels.cu
/// rewrite each element from the value they just read).
std::optional<unsigned> overwritableOperand(Operation *op) {
  if (llvm::isa<tg::CrossEntropyGradOp>(op)) {
    return 0;
  }
  return std::nullopt;
}

/// The value that owns `value`'s buffer: through reshapes (views) to the
/// op that made it.
Value storageOwner(Value value) {
  while (auto reshape = value.getDefiningOp<tg::ReshapeOp>()) {
    value = reshape.getInput();
  }
  return value;
}

/// True when `op` is the last reader of `owner`'s buffer (through every
/// view of it), which a kernel made as an activation: not an input, a
/// parameter, a constant or a function result.
bool lastReaderOfActivation(Value owner, Operation *op) {
  Operation *producer = owner.getDefiningOp();
  // A gathered ZeRO-3 bucket holds every member: never written over.
  if (!producer ||
      llvm::isa<tg::ParamRefOp, tg::StateRefOp, tg::DequantizeOp,
                arith::ConstantOp, tg::GatherBucketOp, tg::BucketMemberOp>(
          producer)) {
    return false;
  }
  SmallVector<Value> worklist{owner};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (auto reshape = llvm::dyn_cast<tg::ReshapeOp>(user)) {
        worklist.push_back(reshape.getResult());
        continue;
      }
      if (user == op) {
        continue;
      }
      if (user->getBlock() != op->getBlock() || !user->isBeforeInBlock(op) ||
          llvm::isa<func::ReturnOp>(user)) {
        return false;
      }
    }
  }
  return true;
}

} // namespace

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
  // Results written over an input that dies here.
  for (Operation &op : body) {
    std::optional<unsigned> operand = overwritableOperand(&op);
    if (!operand || op.getNumResults() != 1 ||
        op.getOperand(*operand).getType() != op.getResult(0).getType()) {
      continue;
    }
    if (lastReaderOfActivation(storageOwner(op.getOperand(*operand)), &op)) {
      fusions.resultOverOperand[&op] = *operand;
    }
  }
  return fusions;
}

} // namespace tailor::memory
