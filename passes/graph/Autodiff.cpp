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

} // namespace

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto func = module.lookupSymbol<func::FuncOp>(function);
  if (!func || func.isExternal() || !func.getBody().hasOneBlock()) {
    module.emitError() << "no single-block function @" << function
                       << " to differentiate";
    return signalPassFailure();
  }
  Block &body = func.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  Location loc = ret.getLoc();
  OpBuilder builder(ret);

  // --- Seeds: which results flow back, with which cotangent -------------
  SmallVector<std::pair<Value, Value>> seeds; // (result value, cotangent)
  unsigned originalArgs = body.getNumArguments();
  if (cotangents) {
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      if (!isFloatTensor(value.getType())) {
        continue;
      }
      BlockArgument cotangent = body.addArgument(value.getType(), loc);
      seeds.emplace_back(value, cotangent);
    }
  } else {
    if (ret.getNumOperands() == 0 ||
        !isFloatTensor(ret.getOperand(0).getType()) ||
        llvm::cast<RankedTensorType>(ret.getOperand(0).getType()).getRank() !=
            0) {
      func.emitError() << "@" << function
                       << " must return a scalar float loss first (run "
                          "tailor-add-loss), or differentiate with cotangents";
      return signalPassFailure();
    }
    Value loss = ret.getOperand(0);
    auto type = llvm::cast<RankedTensorType>(loss.getType());
    Value one = arith::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(type,
                               builder.getFloatAttr(type.getElementType(), 1.0)));
    seeds.emplace_back(loss, one);
  }

  // --- Forward: values that depend on something differentiable ----------
  DenseSet<Value> varied;
  llvm::MapVector<StringAttr, SmallVector<Value>> paramRefs;
  if (wrtInputs) {
    for (unsigned i = 0; i < originalArgs; ++i) {
      if (isFloatTensor(body.getArgument(i).getType())) {
        varied.insert(body.getArgument(i));
      }
    }
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    ops.push_back(&op);
    if (auto ref = llvm::dyn_cast<tg::ParamRefOp>(op)) {
      auto param = module.lookupSymbol<tg::ParamOp>(ref.getNameAttr());
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

  // --- Backward: values whose cotangent reaches a seed ----------------------
  DenseSet<Value> useful;
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

  // --- Reverse sweep -------------------------------------------------------
  DenseMap<Value, Value> grads;
  auto accumulate = [&](Value value, Value grad) {
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
  };
  for (auto &[value, cotangent] : seeds) {
    if (useful.contains(value)) {
      accumulate(value, cotangent);
    }
  }
  for (Operation *op : llvm::reverse(ops)) {
    if (llvm::isa<tg::ParamRefOp>(op) || !graph::hasGradientRule(op)) {
      continue;
    }
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(useful.contains(result) ? grads.lookup(result)
                                                    : Value());
      any |= static_cast<bool>(resultGrads.back());
    }
    if (!any) {
      continue;
    }
    SmallVector<bool> needed;
    for (Value operand : op->getOperands()) {
      needed.push_back(useful.contains(operand));
    }
    // The ops a rule creates inherit the primal's layer and module, so
    // plans, recomputation and sharding see backward work where it belongs.
    Operation *before = ret->getPrevNode();
    SmallVector<Value> operandGrads;
    if (failed(graph::emitGradient(builder, op, resultGrads, needed,
                                   operandGrads))) {
      return signalPassFailure();
    }
    for (Operation *created = before ? before->getNextNode() : &body.front();
         created && created != ret.getOperation();
         created = created->getNextNode()) {
      for (StringRef name : {tg::TGDialect::kLayerAttrName,
                             tg::TGDialect::kModuleAttrName}) {
        if (Attribute attr = op->getAttr(name); attr && !created->hasAttr(name)) {
          created->setAttr(name, attr);
        }
      }
    }
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
      if (grad) {
        accumulate(operand, grad);
      }
    }
  }

  // --- New results ----------------------------------------------------------
  SmallVector<Value> results(ret.getOperands());
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    resultAttrs.push_back(func.getResultAttrDict(i));
  }
  auto addResult = [&](Value value, ArrayRef<NamedAttribute> attrs) {
    results.push_back(value);
    resultAttrs.push_back(builder.getDictionaryAttr(attrs));
  };
  auto gradientOf = [&](ArrayRef<Value> values, RankedTensorType type) {
    Value sum;
    for (Value value : values) {
      Value grad = grads.lookup(value);
      if (grad) {
        sum = sum ? tg::AddOp::create(builder, loc, type, sum, grad).getResult()
                  : grad;
      }
    }
    return sum ? sum : graph::zerosOf(builder, loc, type);
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

  // --- Rewrite the signature -------------------------------------------------
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < originalArgs; ++i) {
    argAttrs.push_back(func.getArgAttrDict(i));
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
  func.setType(FunctionType::get(&getContext(), body.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);
}
