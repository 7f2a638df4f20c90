//===- Autodiff.cpp - reverse-mode differentiation of a tg function -------===//
//
// Classic tape-free reverse mode over a single-block function: mark the
// values that depend on something differentiable (trainable parameters, or
// float inputs with wrt-inputs) and that reach a seeded result, then visit
// the marked ops in reverse order, applying each op's rule
// (GradientRules.cpp) and summing cotangents where a value has several
// uses. Every step is linear in the number of ops.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/GradientRules.h"
#include "passes/graph/Passes.h"

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

namespace tailor::graph {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/graph/Passes.h.inc"
} // namespace tailor::graph

using namespace mlir;
using namespace tailor;

namespace {

bool isFloatTensor(Type type) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  return tensor && llvm::isa<FloatType>(tensor.getElementType());
}

/// The name a function input or result goes by (`tg.name`, else inputN /
/// outputN, as the plan names them).
std::string argName(func::FuncOp func, unsigned index) {
  if (auto name = func.getArgAttrOfType<StringAttr>(index, "tg.name")) {
    return name.str();
  }
  return "input" + std::to_string(index);
}
std::string resultName(func::FuncOp func, unsigned index) {
  if (auto name = func.getResultAttrOfType<StringAttr>(index, "tg.name")) {
    return name.str();
  }
  return "output" + std::to_string(index);
}

struct AutodiffPass : public graph::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;
  void runOnOperation() override;
};

/// Differentiates one single-block function in place, in the steps the
/// file comment names: seed, mark forward, mark backward, sweep in
/// reverse, then return the gradients and rewrite the signature.
class Differentiator {
public:
  Differentiator(ModuleOp module, func::FuncOp func, StringRef function,
                 bool wrtInputs, bool cotangents, bool lossScale)
      : module(module), func(func), function(function), wrtInputs(wrtInputs),
        cotangents(cotangents), lossScale(lossScale),
        body(func.getBody().front()),
        ret(llvm::cast<func::ReturnOp>(body.getTerminator())),
        loc(ret.getLoc()), builder(ret), originalArgs(body.getNumArguments()) {}

  LogicalResult run() {
    if (failed(seedResults())) {
      return failure();
    }
    markVaried();
    markUseful();
    if (failed(sweepInReverse())) {
      return failure();
    }
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      resultAttrs.push_back(func.getResultAttrDict(i));
    }
    addGradientResults(results, resultAttrs);
    rewriteSignature(results, resultAttrs);
    return success();
  }

private:
  /// Which results flow back, with which cotangent: a block argument per
  /// float result with cotangents, else 1 for the scalar loss.
  LogicalResult seedResults();
  /// Marks the values that depend on something differentiable.
  void markVaried();
  /// Marks the varied values whose cotangent reaches a seed.
  void markUseful();
  /// Applies each op's rule in reverse order, summing cotangents.
  LogicalResult sweepInReverse();
  /// The rule of one op whose results have a cotangent.
  LogicalResult differentiate(Operation *op);
  /// Gives the ops created after `before` the primal's layer and module.
  void inheritPlacement(Operation *primal, Operation *before);
  /// Adds `grad` to the cotangent of `value`.
  void accumulate(Value value, Value grad);
  /// The sum of the cotangents of `values`, or zeros of `type`.
  Value gradientOf(ArrayRef<Value> values, RankedTensorType type);
  /// Appends the input (wrt-inputs) and trainable parameter gradients.
  void addGradientResults(SmallVectorImpl<Value> &results,
                          SmallVectorImpl<DictionaryAttr> &resultAttrs);
  /// Returns `results` and names the new cotangent arguments.
  void rewriteSignature(ArrayRef<Value> results,
                        ArrayRef<DictionaryAttr> resultAttrs);

  ModuleOp module;
  func::FuncOp func;
  StringRef function;
  bool wrtInputs, cotangents, lossScale;
  Block &body;
  func::ReturnOp ret;
  Location loc;
  OpBuilder builder;
  unsigned originalArgs;

  SmallVector<std::pair<Value, Value>> seeds; // (result value, cotangent)
  DenseSet<Value> varied;
  llvm::MapVector<StringAttr, SmallVector<Value>> paramRefs;
  SmallVector<Operation *> ops;
  DenseSet<Value> useful;
  DenseMap<Value, Value> grads;
};

} // namespace

LogicalResult Differentiator::seedResults() {
  if (cotangents) {
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      if (!isFloatTensor(value.getType())) {
        continue;
      }
      BlockArgument cotangent = body.addArgument(value.getType(), loc);
      seeds.emplace_back(value, cotangent);
    }
    return success();
  }
  if (ret.getNumOperands() == 0 ||
      !isFloatTensor(ret.getOperand(0).getType()) ||
      llvm::cast<RankedTensorType>(ret.getOperand(0).getType()).getRank() !=
          0) {
    return func.emitError()
           << "@" << function
           << " must return a scalar float loss first (run "
              "tailor-add-loss), or differentiate with cotangents";
  }
  Value loss = ret.getOperand(0);
  auto type = llvm::cast<RankedTensorType>(loss.getType());
  if (lossScale) {
    // GradScaler's scaled loss: the backward starts from the scale S, so
    // every gradient is S times the loss's; the loss itself is unscaled.
    seeds.emplace_back(loss, body.addArgument(type, loc));
    return success();
  }
  Value one = arith::ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(type,
                             builder.getFloatAttr(type.getElementType(), 1.0)));
  seeds.emplace_back(loss, one);
  return success();
}

void Differentiator::markVaried() {
  SymbolTable symbols(module);
  if (wrtInputs) {
    for (unsigned i = 0; i < originalArgs; ++i) {
      if (isFloatTensor(body.getArgument(i).getType())) {
        varied.insert(body.getArgument(i));
      }
    }
  }
  for (Operation &op : body.without_terminator()) {
    ops.push_back(&op);
    if (auto ref = llvm::dyn_cast<tg::ParamRefOp>(op)) {
      auto param = symbols.lookup<tg::ParamOp>(ref.getName());
      if (param && param.getTrainable()) {
        varied.insert(ref.getResult());
        paramRefs[ref.getNameAttr().getAttr()].push_back(ref.getResult());
      }
      continue;
    }
    if (!graph::hasGradientRule(&op)) {
      continue;
    }
    bool anyVaried = llvm::any_of(op.getOperands(), [&](Value operand) {
      return varied.contains(operand);
    });
    if (anyVaried) {
      for (Value result : op.getResults()) {
        if (isFloatTensor(result.getType())) {
          varied.insert(result);
        }
      }
    }
  }
}

void Differentiator::markUseful() {
  for (auto &[value, cotangent] : seeds) {
    if (varied.contains(value)) {
      useful.insert(value);
    }
  }
  for (Operation *op : llvm::reverse(ops)) {
    if (!llvm::any_of(op->getResults(),
                      [&](Value r) { return useful.contains(r); })) {
      continue;
    }
    for (Value operand : op->getOperands()) {
      if (varied.contains(operand)) {
        useful.insert(operand);
      }
    }
  }
}

void Differentiator::accumulate(Value value, Value grad) {
  Value &slot = grads[value];
  if (!slot) {
    slot = grad;
    return;
  }
  auto sum = tg::AddOp::create(builder, loc, value.getType(), slot, grad);
  // A sum of cotangents is backward work of the layer that made `value`.
  if (Operation *primal = value.getDefiningOp()) {
    if (Attribute layer = primal->getAttr(tg::TGDialect::kLayerAttrName)) {
      sum->setAttr(tg::TGDialect::kLayerAttrName, layer);
    }
  }
  slot = sum;
}

LogicalResult Differentiator::sweepInReverse() {
  for (auto &[value, cotangent] : seeds) {
    if (useful.contains(value)) {
      accumulate(value, cotangent);
    }
  }
  for (Operation *op : llvm::reverse(ops)) {
    if (llvm::isa<tg::ParamRefOp>(op) || !graph::hasGradientRule(op)) {
      continue;
    }
    if (failed(differentiate(op))) {
      return failure();
    }
  }
  return success();
}

LogicalResult Differentiator::differentiate(Operation *op) {
  SmallVector<Value> resultGrads;
  bool any = false;
  for (Value result : op->getResults()) {
    resultGrads.push_back(useful.contains(result) ? grads.lookup(result)
                                                  : Value());
    any |= static_cast<bool>(resultGrads.back());
  }
  if (!any) {
    return success();
  }
  SmallVector<bool> needed;
  for (Value operand : op->getOperands()) {
    needed.push_back(useful.contains(operand));
  }
  Operation *before = ret->getPrevNode();
  SmallVector<Value> operandGrads;
  if (failed(graph::emitGradient(builder, op, resultGrads, needed,
                                 operandGrads))) {
    return failure();
  }
  inheritPlacement(op, before);
  for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
    if (grad) {
      accumulate(operand, grad);
    }
  }
  return success();
}

void Differentiator::inheritPlacement(Operation *primal, Operation *before) {
  // The ops a rule creates inherit the primal's layer and module, so
  // plans, recomputation and sharding see backward work where it belongs.
  for (Operation *created = before ? before->getNextNode() : &body.front();
       created && created != ret.getOperation();
       created = created->getNextNode()) {
    for (StringRef name :
         {tg::TGDialect::kLayerAttrName, tg::TGDialect::kModuleAttrName}) {
      if (Attribute attr = primal->getAttr(name);
          attr && !created->hasAttr(name)) {
        created->setAttr(name, attr);
      }
    }
  }
}

Value Differentiator::gradientOf(ArrayRef<Value> values,
                                 RankedTensorType type) {
  Value sum;
  for (Value value : values) {
    Value grad = grads.lookup(value);
    if (grad) {
      sum = sum ? tg::AddOp::create(builder, loc, type, sum, grad).getResult()
                : grad;
    }
  }
  return sum ? sum : graph::zerosOf(builder, loc, type);
}

void Differentiator::addGradientResults(
    SmallVectorImpl<Value> &results,
    SmallVectorImpl<DictionaryAttr> &resultAttrs) {
  auto addResult = [&](Value value, ArrayRef<NamedAttribute> attrs) {
    results.push_back(value);
    resultAttrs.push_back(builder.getDictionaryAttr(attrs));
  };
  if (wrtInputs) {
    for (unsigned i = 0; i < originalArgs; ++i) {
      BlockArgument arg = body.getArgument(i);
      if (!isFloatTensor(arg.getType())) {
        continue;
      }
      auto type = llvm::cast<RankedTensorType>(arg.getType());
      addResult(gradientOf({arg}, type),
                {builder.getNamedAttr(
                    "tg.name", builder.getStringAttr("grad." + argName(func, i)))});
    }
  }
  for (tg::ParamOp param : module.getOps<tg::ParamOp>()) {
    if (!param.getTrainable()) {
      continue;
    }
    auto it = paramRefs.find(param.getSymNameAttr());
    SmallVector<Value> refs;
    if (it != paramRefs.end()) {
      refs = it->second;
    }
    addResult(gradientOf(refs, param.getTensorType()),
              {builder.getNamedAttr(
                   "tg.name", builder.getStringAttr("grad." + param.getSymName())),
               builder.getNamedAttr("tg.grad_of",
                                    FlatSymbolRefAttr::get(param.getSymNameAttr()))});
  }
}

void Differentiator::rewriteSignature(ArrayRef<Value> results,
                                      ArrayRef<DictionaryAttr> resultAttrs) {
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < originalArgs; ++i) {
    argAttrs.push_back(func.getArgAttrDict(i));
  }
  if (lossScale) {
    argAttrs.push_back(builder.getDictionaryAttr({builder.getNamedAttr(
        "tg.name", builder.getStringAttr("loss_scale"))}));
  }
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    if (!cotangents || !isFloatTensor(value.getType())) {
      continue;
    }
    argAttrs.push_back(builder.getDictionaryAttr({builder.getNamedAttr(
        "tg.name", builder.getStringAttr("grad." + resultName(func, index)))}));
  }
  func::ReturnOp::create(builder, loc, results);
  ret.erase();
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto func = module.lookupSymbol<func::FuncOp>(function);
  if (!func || func.isExternal() || !func.getBody().hasOneBlock()) {
    module.emitError() << "no single-block function @" << function
                       << " to differentiate";
    return signalPassFailure();
  }
  if (lossScale && cotangents) {
    module.emitError() << "loss-scale seeds a loss; it cannot be combined "
                          "with cotangents";
    return signalPassFailure();
  }
  Differentiator differentiator(module, func, function, wrtInputs, cotangents,
                                lossScale);
  if (failed(differentiator.run())) {
    return signalPassFailure();
  }
}
