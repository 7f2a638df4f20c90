//===- InsertLora.cpp - LoRA adapters on linear layers, or full FT --------===//
//
// Adapters follow PEFT exactly, so a trained adapter is a PEFT adapter:
// parameter names `<module>.lora_A.weight` / `.lora_B.weight`, A [r, in]
// kaiming-uniform(a = sqrt(5)), B [out, r] zeros, and the update
// `base(x) + B(A(dropout(x))) * scaling` in that order. The module records
// what it did in a `tg.adapter` dictionary that the plan writer turns into
// the plan's adapter description.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"

#include "passes/graph/ExportNames.h"
#include "passes/graph/PositionRows.h"

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace tailor::graph {
#define GEN_PASS_DEF_INSERTLORAPASS
#include "passes/graph/Passes.h.inc"
} // namespace tailor::graph

using namespace mlir;
using namespace tailor;

namespace {

/// Parses `0-3,6` into a set of layers; an empty spec means all.
FailureOr<std::set<int64_t>> parseLayers(StringRef spec, ModuleOp module) {
  std::set<int64_t> layers;
  SmallVector<StringRef> parts;
  spec.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    auto [first, last] = part.trim().split('-');
    int64_t lo = 0, hi = 0;
    if (first.getAsInteger(10, lo) ||
        (last.empty() ? (hi = lo, false) : last.getAsInteger(10, hi)) ||
        lo < 0 || hi < lo) {
      return module.emitError() << "bad layer range '" << part
                                << "' (expected N or N-M, e.g. 0-3,6)";
    }
    for (int64_t layer = lo; layer <= hi; ++layer) {
      layers.insert(layer);
    }
  }
  return layers;
}

/// True when a dotted path has `name` as one of its components (or is it).
bool hasComponent(StringRef path, StringRef name) {
  if (path == name || path.starts_with((name + ".").str()) ||
      path.ends_with(("." + name).str())) {
    return true;
  }
  return path.contains(("." + name + ".").str());
}

struct InsertLoraPass : public graph::impl::InsertLoraPassBase<InsertLoraPass> {
  using InsertLoraPassBase::InsertLoraPassBase;
  void runOnOperation() override;

private:
  LogicalResult makeTrainable(ModuleOp module, ArrayRef<std::string> names);
  /// The comma-separated `targets`, trimmed; fails when there are none or
  /// `variant` is unknown.
  FailureOr<SmallVector<std::string>> parseTargets(ModuleOp module);
  /// Fails unless rank > 0, alpha > 0 and dropout is in [0, 1).
  LogicalResult checkHyperparameters(ModuleOp module);
  /// Records what was done as the module's `tg.adapter` dictionary.
  void recordAdapter(ModuleOp module, ArrayRef<std::string> targetNames,
                     const std::set<int64_t> &layerSet,
                     ArrayRef<Attribute> modules);
  /// The linear layers of `func` that get an adapter.
  SmallVector<tg::LinearOp> chooseLinears(func::FuncOp func,
                                          ArrayRef<std::string> targetNames,
                                          const std::set<int64_t> &layerSet);
  /// Adds the dropout seed as an input of `func` of its own.
  Value addSeedInput(func::FuncOp func);
  /// Declares `linear`'s A and B parameters and adds
  /// `B(A(dropout(x))) * scaling` to its result.
  LogicalResult addAdapter(func::FuncOp func, tg::LinearOp linear, Value seed,
                           double scaling, int64_t &salt);
};

} // namespace

/// The modules (tg.module of the ops) that read a parameter through its
/// references `refs`, through views (reshape, transpose, dequantize); a
/// tied lm_head reading its embedding table is the tie's, not another
/// module's.
static llvm::SetVector<StringRef> readingModules(ArrayRef<Value> refs) {
  llvm::SetVector<StringRef> modules;
  SmallVector<Value> worklist(refs.begin(), refs.end());
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (llvm::isa<tg::ReshapeOp, tg::TransposeOp, tg::DequantizeOp>(user)) {
        worklist.push_back(user->getResult(0));
        continue;
      }
      auto path =
          user->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName);
      if (path && !user->hasAttr(tg::TGDialect::kTiedAttrName)) {
        modules.insert(path.getValue());
      }
    }
  }
  return modules;
}

/// Full fine-tuning trains each parameter under its name. Exporters merge
/// initializers with identical contents (a freshly initialized model's
/// norm weights, all 1), and one merged tensor read by several modules
/// would train with the sum of their gradients and be saved under one
/// name: refuse it, naming the modules.
static LogicalResult refuseMergedParameters(ModuleOp module,
                                            ArrayRef<tg::ParamOp> trained) {
  llvm::StringMap<SmallVector<Value>> refs;
  module.walk([&](tg::ParamRefOp ref) {
    refs[ref.getName()].push_back(ref.getResult());
  });
  std::string merged;
  tg::ParamOp first;
  for (tg::ParamOp param : trained) {
    llvm::SetVector<StringRef> modules =
        readingModules(refs.lookup(param.getSymName()));
    if (modules.size() < 2) {
      continue;
    }
    first = first ? first : param;
    merged += "\n  @" + param.getSymName().str() + " read by";
    for (StringRef path : modules.getArrayRef().take_front(4)) {
      merged += " " + path.str();
    }
    if (modules.size() > 4) {
      merged += " and " + std::to_string(modules.size() - 4) + " more";
    }
  }
  if (merged.empty()) {
    return success();
  }
  return first.emitError()
         << "full fine-tuning would train each of these parameters as one "
            "tensor for all the modules that read it, with the sum of their "
            "gradients (the exporter merged initializers with identical "
            "contents):"
         << merged
         << "\nexport a model whose weights differ (a trained checkpoint, "
            "or perturb equal-valued weights before export), or fine-tune "
            "with LoRA";
}

LogicalResult InsertLoraPass::makeTrainable(ModuleOp module,
                                            ArrayRef<std::string> names) {
  bool all = names.size() == 1 && names.front() == "all";
  SmallVector<tg::ParamOp> trained;
  // Exports carry module buffers as initializers too; they are not weights
  // (rotary inverse frequencies, ALiBi slopes, integer masks).
  llvm::StringSet<> buffers = graph::positionOnlyParameters(module);
  for (tg::ParamOp param : module.getOps<tg::ParamOp>()) {
    bool isWeight =
        llvm::isa<FloatType>(param.getTensorType().getElementType()) &&
        !param.getSymName().ends_with("inv_freq") &&
        !buffers.contains(param.getSymName());
    bool selected =
        isWeight && (all || llvm::any_of(names, [&](const std::string &name) {
                       return hasComponent(param.getSymName(), name);
                     }));
    if (selected) {
      param.setTrainable(true);
      trained.push_back(param);
    }
  }
  if (trained.empty()) {
    return module.emitError() << "no parameter matches the full fine-tuning "
                                 "targets '"
                              << targets << "'";
  }
  return refuseMergedParameters(module, trained);
}

FailureOr<SmallVector<std::string>>
InsertLoraPass::parseTargets(ModuleOp module) {
  SmallVector<std::string> targetNames;
  for (StringRef target : llvm::split(StringRef(targets), ',')) {
    if (!target.trim().empty()) {
      targetNames.push_back(target.trim().str());
    }
  }
  if (targetNames.empty()) {
    return module.emitError()
           << "no targets given (e.g. targets=q_proj,v_proj)";
  }
  if (variant != "lora" && variant != "lora-fa" && variant != "full") {
    return module.emitError() << "unknown variant '" << variant
                              << "' (expected lora, lora-fa or full)";
  }
  return targetNames;
}

LogicalResult InsertLoraPass::checkHyperparameters(ModuleOp module) {
  if (rank <= 0 || !(alpha > 0.0) || !(dropout >= 0.0 && dropout < 1.0)) {
    return module.emitError()
           << "expected rank > 0, alpha > 0 and dropout in [0, 1), "
              "got rank="
           << rank << " alpha=" << alpha << " dropout=" << dropout;
  }
  return success();
}

void InsertLoraPass::recordAdapter(ModuleOp module,
                                   ArrayRef<std::string> targetNames,
                                   const std::set<int64_t> &layerSet,
                                   ArrayRef<Attribute> modules) {
  OpBuilder builder(module.getContext());
  SmallVector<Attribute> targetAttrs, layerAttrs;
  for (const std::string &name : targetNames) {
    targetAttrs.push_back(builder.getStringAttr(name));
  }
  for (int64_t layer : layerSet) {
    layerAttrs.push_back(builder.getI64IntegerAttr(layer));
  }
  module->setAttr(
      "tg.adapter",
      builder.getDictionaryAttr(
          {builder.getNamedAttr("variant", builder.getStringAttr(variant)),
           builder.getNamedAttr("r", builder.getI64IntegerAttr(rank)),
           builder.getNamedAttr("alpha", builder.getF64FloatAttr(alpha)),
           builder.getNamedAttr("dropout", builder.getF64FloatAttr(dropout)),
           builder.getNamedAttr("use_rslora", builder.getBoolAttr(rslora)),
           builder.getNamedAttr("target_modules",
                                builder.getArrayAttr(targetAttrs)),
           builder.getNamedAttr("layers", builder.getArrayAttr(layerAttrs)),
           builder.getNamedAttr("modules", builder.getArrayAttr(modules))}));
}

SmallVector<tg::LinearOp>
InsertLoraPass::chooseLinears(func::FuncOp func,
                              ArrayRef<std::string> targetNames,
                              const std::set<int64_t> &layerSet) {
  bool allLinear = llvm::is_contained(targetNames, "all-linear");
  SmallVector<tg::LinearOp> chosen;
  llvm::StringSet<> seenModules;
  func.walk([&](tg::LinearOp linear) {
    auto path = linear->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName);
    if (!path || linear->hasAttr(tg::TGDialect::kTiedAttrName)) {
      return;
    }
    StringRef name = path.getValue().rsplit('.').second;
    if (name.empty()) {
      name = path.getValue();
    }
    bool targeted = allLinear ? name != "lm_head"
                              : llvm::is_contained(targetNames, name.str());
    if (!targeted) {
      return;
    }
    auto layer = linear->getAttrOfType<IntegerAttr>(tg::TGDialect::kLayerAttrName);
    if (!layerSet.empty() && (!layer || !layerSet.count(layer.getInt()))) {
      return;
    }
    if (!seenModules.insert(path.getValue()).second) {
      linear.emitError() << "module " << path << " is applied twice; LoRA on a "
                            "shared module is not supported";
      return;
    }
    chosen.push_back(linear);
  });
  return chosen;
}

Value InsertLoraPass::addSeedInput(func::FuncOp func) {
  OpBuilder builder(func.getContext());
  Block &body = func.getBody().front();
  auto seedType = RankedTensorType::get({}, builder.getI64Type());
  Value seed = body.addArgument(seedType, func.getLoc());
  SmallVector<Type> inputs(body.getArgumentTypes());
  func.setType(FunctionType::get(func.getContext(), inputs,
                                 func.getFunctionType().getResults()));
  func.setArgAttrs(
      body.getNumArguments() - 1,
      {builder.getNamedAttr("tg.name", builder.getStringAttr("seed"))});
  return seed;
}

LogicalResult InsertLoraPass::addAdapter(func::FuncOp func, tg::LinearOp linear,
                                         Value seed, double scaling,
                                         int64_t &salt) {
  MLIRContext *context = func.getContext();
  OpBuilder builder(context);
  auto path = linear->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName);
  auto weight = llvm::cast<RankedTensorType>(linear.getWeight().getType());
  auto output = llvm::cast<RankedTensorType>(linear.getType());
  Type element = builder.getF32Type();
  if (weight.getElementType() != element ||
      output.getElementType() != element) {
    return linear.emitError()
           << "LoRA adapters are f32 and need an f32 layer, got "
           << weight.getElementType();
  }
  int64_t out = weight.getDimSize(0), in = weight.getDimSize(1);
  std::string prefix = path.str();
  builder.setInsertionPoint(func);
  auto aType = RankedTensorType::get({rank, in}, element);
  auto bType = RankedTensorType::get({out, rank}, element);
  auto paramA = tg::ParamOp::create(
      builder, linear.getLoc(), prefix + ".lora_A.weight", aType,
      /*trainable=*/variant == "lora", /*location=*/Attribute(),
      tg::InitAttr::get(context, builder.getStringAttr("kaiming_uniform"),
                        builder.getF64FloatAttr(std::sqrt(5.0))),
      /*quant=*/DictionaryAttr());
  auto paramB = tg::ParamOp::create(
      builder, linear.getLoc(), prefix + ".lora_B.weight", bType,
      /*trainable=*/true, Attribute(),
      tg::InitAttr::get(context, builder.getStringAttr("zeros"),
                        builder.getF64FloatAttr(0.0)),
      /*quant=*/DictionaryAttr());

  // The update's ops carry the linear layer's layer and module.
  builder.setInsertionPointAfter(linear);
  Location loc = linear.getLoc();
  NamedAttrList tags;
  for (StringRef name :
       {tg::TGDialect::kLayerAttrName, tg::TGDialect::kModuleAttrName}) {
    if (Attribute attr = linear->getAttr(name)) {
      tags.set(name, attr);
    }
  }
  auto tag = [&](Operation *op) {
    for (NamedAttribute attr : tags) {
      op->setAttr(attr.getName(), attr.getValue());
    }
    return op->getResult(0);
  };
  Value x = linear.getInput();
  if (seed) {
    x = tag(tg::DropoutOp::create(builder, loc, x.getType(), x, seed,
                                  builder.getF64FloatAttr(dropout),
                                  builder.getI64IntegerAttr(salt++)));
  }
  Value a =
      tag(tg::ParamRefOp::create(builder, loc, aType, paramA.getSymName()));
  Value b =
      tag(tg::ParamRefOp::create(builder, loc, bType, paramB.getSymName()));
  SmallVector<int64_t> lowShape(output.getShape());
  lowShape.back() = rank;
  Value low = tag(tg::LinearOp::create(
      builder, loc, RankedTensorType::get(lowShape, element), x, a, Value()));
  Value up = tag(tg::LinearOp::create(builder, loc, output, low, b, Value()));
  Value scale = arith::ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(
          RankedTensorType::get({}, element),
          builder.getF32FloatAttr(static_cast<float>(scaling))));
  Value scaled = tag(tg::MulOp::create(builder, loc, output, up, scale));
  auto sum =
      tg::AddOp::create(builder, loc, output, linear.getResult(), scaled);
  tag(sum);
  linear.getResult().replaceAllUsesExcept(sum.getResult(), sum);
  return success();
}

void InsertLoraPass::runOnOperation() {
  ModuleOp module = getOperation();
  graph::recordExportNames(module);
  FailureOr<SmallVector<std::string>> targetNames = parseTargets(module);
  if (failed(targetNames)) {
    return signalPassFailure();
  }
  FailureOr<std::set<int64_t>> layerSet = parseLayers(layers, module);
  if (failed(layerSet)) {
    return signalPassFailure();
  }
  if (variant == "full") {
    if (failed(makeTrainable(module, *targetNames))) {
      return signalPassFailure();
    }
    recordAdapter(module, *targetNames, *layerSet, {});
    return;
  }
  if (failed(checkHyperparameters(module))) {
    return signalPassFailure();
  }
  auto func = module.lookupSymbol<func::FuncOp>(function);
  if (!func || func.isExternal()) {
    module.emitError() << "no function @" << function << " to adapt";
    return signalPassFailure();
  }
  SmallVector<tg::LinearOp> chosen =
      chooseLinears(func, *targetNames, *layerSet);
  if (chosen.empty()) {
    module.emitError() << "no linear layer matches targets '" << targets << "'"
                       << (layers.empty() ? "" : " in layers '" + layers + "'");
    return signalPassFailure();
  }
  Value seed = dropout > 0.0 ? addSeedInput(func) : Value();
  double scaling = rslora ? alpha / std::sqrt(static_cast<double>(rank))
                          : alpha / static_cast<double>(rank);
  SmallVector<Attribute> modules;
  int64_t salt = 0;
  for (tg::LinearOp linear : chosen) {
    if (failed(addAdapter(func, linear, seed, scaling, salt))) {
      return signalPassFailure();
    }
    modules.push_back(
        linear->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName));
  }
  recordAdapter(module, *targetNames, *layerSet, modules);
}
