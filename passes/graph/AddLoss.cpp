//===- AddLoss.cpp - causal-LM cross-entropy on a forward graph -----------===//
//
// Hugging Face's causal-LM loss scores logits[:, :-1] against
// labels[:, 1:]. Shifting the labels instead (labels[:, 1:] followed by one
// ignored column) gives the same mean over counted tokens without copying
// the [B, T, V] logits, which are the largest activation of the step.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tailor::graph {
#define GEN_PASS_DEF_ADDLOSSPASS
#include "passes/graph/Passes.h.inc"
} // namespace tailor::graph

using namespace mlir;
using namespace tailor;

namespace {
struct AddLossPass : public graph::impl::AddLossPassBase<AddLossPass> {
  using AddLossPassBase::AddLossPassBase;
  void runOnOperation() override;
};
} // namespace

void AddLossPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto func = module.lookupSymbol<func::FuncOp>(function);
  if (!func || func.isExternal() || !func.getBody().hasOneBlock()) {
    module.emitError() << "no single-block function @" << function
                       << " to add a loss to";
    return signalPassFailure();
  }
  Block &body = func.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  auto logitsType = ret.getNumOperands()
                        ? llvm::dyn_cast<RankedTensorType>(
                              ret.getOperand(0).getType())
                        : RankedTensorType();
  if (!logitsType || logitsType.getRank() != 3 ||
      !logitsType.hasStaticShape() ||
      !llvm::isa<FloatType>(logitsType.getElementType())) {
    func.emitError() << "expected @" << function
                     << " to return logits [batch, seq, vocab] with static "
                        "shape first; compile with --batch and --seq";
    return signalPassFailure();
  }
  int64_t batch = logitsType.getDimSize(0), seq = logitsType.getDimSize(1),
          vocab = logitsType.getDimSize(2);
  if (seq < 2) {
    func.emitError() << "a causal-LM loss needs a sequence of at least 2 "
                        "tokens, got "
                     << seq;
    return signalPassFailure();
  }
  MLIRContext *context = &getContext();
  OpBuilder builder(ret);
  Location loc = ret.getLoc();
  Type i64 = builder.getI64Type();
  auto labelsType = RankedTensorType::get({batch, seq}, i64);
  BlockArgument labels = body.addArgument(labelsType, loc);

  // labels[:, 1:] then a column of ignore_index: label t + 1 for token t.
  auto nextType = RankedTensorType::get({batch, seq - 1}, i64);
  Value next = tg::SliceOp::create(
      builder, loc, nextType, labels, builder.getDenseI64ArrayAttr({0, 1}),
      builder.getDenseI64ArrayAttr({batch, seq}),
      builder.getDenseI64ArrayAttr({1, 1}));
  auto padType = RankedTensorType::get({batch, 1}, i64);
  Value pad = arith::ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(padType, builder.getI64IntegerAttr(ignoreIndex)));
  Value shifted = tg::ConcatOp::create(builder, loc, labelsType,
                                       ValueRange{next, pad},
                                       builder.getI64IntegerAttr(1));
  Value flatLabels = tg::ReshapeOp::create(
      builder, loc, RankedTensorType::get({batch * seq}, i64), shifted);
  Value flatLogits = tg::ReshapeOp::create(
      builder, loc,
      RankedTensorType::get({batch * seq, vocab}, logitsType.getElementType()),
      ret.getOperand(0));
  Value loss = tg::CrossEntropyOp::create(
      builder, loc, RankedTensorType::get({}, builder.getF32Type()), flatLogits,
      flatLabels, builder.getI64IntegerAttr(ignoreIndex),
      tg::LossReductionAttr::get(context, tg::LossReduction::Mean));

  SmallVector<Value> results = {loss};
  SmallVector<DictionaryAttr> resultAttrs = {builder.getDictionaryAttr(
      {builder.getNamedAttr("tg.name", builder.getStringAttr("loss"))})};
  if (keepLogits) {
    results.push_back(ret.getOperand(0));
    resultAttrs.push_back(func.getResultAttrDict(0));
  }
  func::ReturnOp::create(builder, loc, results);
  ret.erase();
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i + 1 < body.getNumArguments(); ++i) {
    argAttrs.push_back(func.getArgAttrDict(i));
  }
  argAttrs.push_back(builder.getDictionaryAttr(
      {builder.getNamedAttr("tg.name", builder.getStringAttr("labels"))}));
  func.setType(FunctionType::get(context, body.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);
}
