//===- Fusions.cpp - what planning folds into a neighbouring launch -------===//

#include "passes/memory/Fusions.h"

#include "dialects/tg/TGPartitionOps.h"

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


/// True when `op` is the last reader of `owner`'s buffer (through every
/// view of it), which a kernel made as an activation: not an input, a
/// parameter, a constant or a function result.
bool lastReaderOfActivation(Value owner, Operation *op) {
  Operation *producer = owner.getDefiningOp();
  // A gathered ZeRO-3 bucket holds every member: never written over.
  if (!producer ||
      llvm::isa<tg::ParamRefOp, tg::StateRefOp, tg::DequantizeOp,
                arith::ConstantOp, tg::GatherBucketOp, tg::BucketMemberOp,
                tg::DequantizeGatheredOp, tg::GatherPartitionOp>(
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

//===----------------------------------------------------------------------===//
// GEMM epilogues
//===----------------------------------------------------------------------===//

/// GEMMs whose kernels (CPU and CUDA) take `alpha` and `accumulate`:
/// linear without a bias (the bias is the kernel's seed; cuBLASLt's bias
/// epilogue needs beta 0), dense or quantized, and linear_weight_grad.
bool isEpilogueGemm(Operation *op) {
  if (auto linear = llvm::dyn_cast_or_null<tg::LinearOp>(op)) {
    return !linear.getBias();
  }
  return llvm::isa_and_nonnull<tg::LinearWeightGradOp>(op);
}

/// A reader that applies a scale to what it reads: a GEMM's activation
/// operand (linear's x; either operand of linear_weight_grad).
bool readsScaled(OpOperand &use) {
  Operation *user = use.getOwner();
  if (llvm::isa<tg::LinearOp>(user)) {
    return isEpilogueGemm(user) && use.getOperandNumber() == 0;
  }
  return llvm::isa<tg::LinearWeightGradOp>(user);
}

/// Products by a scalar constant: applied by the GEMM that made the other
/// factor, or by every GEMM that reads the product.
void decideScaleFolds(Block &body, Fusions &fusions) {
  for (auto mul : body.getOps<tg::MulOp>()) {
    Value source;
    std::optional<double> factor;
    for (auto [x, c] : {std::pair(mul.getLhs(), mul.getRhs()),
                        std::pair(mul.getRhs(), mul.getLhs())}) {
      if ((factor = oneElementConstant(c))) {
        source = x;
        break;
      }
    }
    if (!factor || source.getType() != mul.getType() ||
        !getElementTypeOrSelf(mul.getType()).isF32()) {
      continue;
    }
    Operation *producer = source.getDefiningOp();
    if (isEpilogueGemm(producer) && source.hasOneUse()) {
      fusions.foldedScales[mul] = {source, /*intoProducer=*/true};
      fusions.gemmEpilogues[producer].alpha *= *factor;
      continue;
    }
    if (!mul->use_empty() && llvm::all_of(mul->getUses(), readsScaled)) {
      fusions.foldedScales[mul] = {source, /*intoProducer=*/false};
      for (OpOperand &use : mul->getUses()) {
        fusions.gemmEpilogues[use.getOwner()].alpha *= *factor;
      }
    }
  }
}

/// The GEMM whose product `made` is, alone or through a scale it applies,
/// when `made` has no reader but `add`.
Operation *gemmMaking(Value made, const Fusions &fusions) {
  if (!made.hasOneUse()) {
    return nullptr;
  }
  Operation *producer = made.getDefiningOp();
  auto scale = fusions.foldedScales.find(producer);
  if (scale != fusions.foldedScales.end() && scale->second.intoProducer) {
    producer = scale->second.source.getDefiningOp();
  }
  if (!isEpilogueGemm(producer) || fusions.accumulatedInPlace.contains(producer)) {
    return nullptr;
  }
  auto epilogue = fusions.gemmEpilogues.find(producer);
  if (epilogue != fusions.gemmEpilogues.end() &&
      (epilogue->second.into || epilogue->second.addend)) {
    return nullptr; // its output is spoken for
  }
  return producer;
}

/// True when `gemm` may add into the buffer holding `into` on behalf of
/// `add`: that buffer is an activation written before `gemm`, and every
/// other reader of its contents (through views, and through products whose
/// GEMM readers apply a scale) comes before `gemm`, which therefore does not
/// read it either; nothing else writes over it.
bool canAddInto(Value into, tg::AddOp add, Operation *gemm,
                const Fusions &fusions) {
  Value base = storageOwner(into);
  Operation *writer = base.getDefiningOp();
  if (!writer || writer->getBlock() != gemm->getBlock() ||
      !writer->isBeforeInBlock(gemm) ||
      llvm::isa<tg::ParamRefOp, tg::StateRefOp, tg::DequantizeOp,
                arith::ConstantOp, tg::GatherBucketOp, tg::BucketMemberOp,
                tg::DequantizeGatheredOp, tg::GatherPartitionOp>(
          writer)) {
    return false;
  }
  auto scale = fusions.foldedScales.find(writer);
  if (scale != fusions.foldedScales.end() && !scale->second.intoProducer) {
    return false; // a product with no buffer of its own
  }
  SmallVector<Value> worklist{base};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      auto userScale = fusions.foldedScales.find(user);
      if (llvm::isa<tg::ReshapeOp>(user) ||
          (userScale != fusions.foldedScales.end() &&
           !userScale->second.intoProducer)) {
        worklist.push_back(user->getResult(0));
        continue;
      }
      if (user == add.getOperation()) {
        continue;
      }
      auto over = fusions.resultOverOperand.find(user);
      bool writesOver = (over != fusions.resultOverOperand.end() &&
                         over->second == use.getOperandNumber()) ||
                        fusions.foldedAdds.lookup(user) == value;
      if (writesOver || user->getBlock() != gemm->getBlock() ||
          !user->isBeforeInBlock(gemm) || llvm::isa<func::ReturnOp>(user)) {
        return false;
      }
    }
  }
  return true;
}

/// The linear that starts the chain of GEMMs writing `made`'s buffer
/// (through folded sums, scales and GEMMs adding into it), when every value
/// on the way is read only by the next; null otherwise.
Operation *chainStart(Value made, const Fusions &fusions) {
  Value value = made;
  for (int hops = 0; hops < 64 && value.hasOneUse(); ++hops) {
    Operation *producer = value.getDefiningOp();
    if (auto add = fusions.foldedAdds.find(producer);
        add != fusions.foldedAdds.end()) {
      value = add->second;
      continue;
    }
    auto scale = fusions.foldedScales.find(producer);
    if (scale != fusions.foldedScales.end() && scale->second.intoProducer) {
      value = scale->second.source;
      continue;
    }
    auto epilogue = fusions.gemmEpilogues.find(producer);
    if (epilogue != fusions.gemmEpilogues.end() && epilogue->second.into) {
      value = epilogue->second.into;
      continue;
    }
    bool fresh = llvm::isa_and_nonnull<tg::LinearOp>(producer) &&
                 isEpilogueGemm(producer) &&
                 (epilogue == fusions.gemmEpilogues.end() ||
                  !epilogue->second.addend);
    return fresh ? producer : nullptr;
  }
  return nullptr;
}

/// A sum of a GEMM chain's result and a tensor that lives on (a residual):
/// the chain's first GEMM reads the tensor as its addend, which must exist
/// by then, and the sum is the chain's buffer.
bool foldResidual(tg::AddOp add, Value addend, Value made, Fusions &fusions) {
  Operation *start = chainStart(made, fusions);
  if (!start || start->getBlock() != add->getBlock()) {
    return false;
  }
  Operation *producer = addend.getDefiningOp();
  bool ready = producer ? producer->isBeforeInBlock(start)
                        : llvm::cast<BlockArgument>(addend).getOwner() ==
                              add->getBlock();
  // An addend an elementwise launch makes is better fused with the sum:
  // the GEMM would need it before that launch could end.
  bool fusable = producer && isFusableElementwise(producer) &&
                 !fusions.foldedAdds.contains(producer) &&
                 !fusions.foldedScales.contains(producer);
  if (!ready || fusable) {
    return false;
  }
  fusions.foldedAdds[add] = made;
  fusions.gemmEpilogues[start].addend = addend;
  return true;
}

/// Sums of a GEMM's product and a tensor read for the last time: the GEMM
/// adds into that tensor's buffer; else, of a GEMM chain's result and a
/// tensor that lives on: the chain starts from that tensor.
void decideAddFolds(Block &body, Fusions &fusions) {
  for (auto add : body.getOps<tg::AddOp>()) {
    Type type = add.getType();
    if (add.getLhs().getType() != type || add.getRhs().getType() != type ||
        !getElementTypeOrSelf(type).isF32()) {
      continue;
    }
    for (auto [into, made] : {std::pair(add.getLhs(), add.getRhs()),
                              std::pair(add.getRhs(), add.getLhs())}) {
      Operation *gemm = gemmMaking(made, fusions);
      if (gemm && canAddInto(into, add, gemm, fusions)) {
        fusions.foldedAdds[add] = into;
        fusions.gemmEpilogues[gemm].into = into;
        break;
      }
    }
    if (!fusions.foldedAdds.contains(add) &&
        !foldResidual(add, add.getLhs(), add.getRhs(), fusions)) {
      foldResidual(add, add.getRhs(), add.getLhs(), fusions);
    }
  }
}

} // namespace

Value storageOwner(Value value) {
  while (auto reshape = value.getDefiningOp<tg::ReshapeOp>()) {
    value = reshape.getInput();
  }
  return value;
}

std::optional<double> oneElementConstant(Value value) {
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseFPElementsAttr>(constant.getValue())
                        : DenseFPElementsAttr();
  if (!dense || dense.getNumElements() != 1) {
    return std::nullopt;
  }
  return (*dense.getValues<APFloat>().begin()).convertToDouble();
}

Value Fusions::readValue(Value operand) const {
  auto scale = foldedScales.find(operand.getDefiningOp());
  if (scale != foldedScales.end() && !scale->second.intoProducer) {
    return scale->second.source;
  }
  return operand;
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
  // Not for fp16 or bf16 GEMMs (tailor-emulate-half): they round their
  // operands as they copy them, from the whole weight.
  auto halfGemm = [](Operation *op) {
    return op->hasAttr(tg::TGDialect::kFp16AttrName) ||
           op->hasAttr(tg::TGDialect::kBf16AttrName);
  };
  for (auto dequantize : body.getOps<tg::DequantizeOp>()) {
    bool onlyLinear = llvm::all_of(dequantize->getUses(), [&](OpOperand &use) {
      Operation *user = use.getOwner();
      if (fusions.foldedTransposes.contains(user)) {
        return llvm::none_of(user->getUsers(), halfGemm);
      }
      return llvm::isa<tg::LinearOp>(user) && use.getOperandNumber() == 1 &&
             !halfGemm(user);
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
  decideScaleFolds(body, fusions);
  decideAddFolds(body, fusions);
  decideFusionGroups(body, fusions);
  return fusions;
}

} // namespace tailor::memory
