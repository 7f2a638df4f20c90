//===- Optimizer.cpp - accumulation, clipping, schedule and update --------===//
//
// Splits a differentiated function into the two entries a trainer drives:
// `train_step` (one micro-batch: forward, backward, gradients added into
// accumulators) and `optimizer_step` (everything that happens once per
// update). The learning-rate schedule is computed in the graph from the
// update count, so the plan alone says what every step does and a resumed
// run cannot drift from an uninterrupted one.
//
// fp16 loss scaling (`loss-scaling`): the gradients arrive multiplied by
// the run-time `loss_scale` S, and optimizer_step takes `inv_scale`, 1/S as
// GradScaler rounds it (runtime/train/LossScaler.h).
//
// Where a skipped step lives: in the update ops, not in the trainer.
// optimizer_step takes the norm of the scaled accumulators, whose squares
// are summed in double, and a scaled gradient holds an inf or NaN exactly
// when that norm is not finite (`norm * 0` is then NaN: tg.is_nan tells;
// the one other way, a finite norm past f32's range, needs gradients
// beyond 1e38 / sqrt(n), which S makes an overflow in all but name). The
// unscale joins the factor the update ops already multiply the
// accumulators by (averaging, clipping), and the norm is unscaled before
// clipping reads it, as GradScaler.unscale_ then clip_grad_norm_ do. On
// found_inf that factor becomes NaN, which every update kernel takes as
// "skip this step": it zeroes the accumulator and touches nothing else.
// Gating in the trainer would need optimizer_step split in two around the
// check (one more entry, and a host round trip between them); a predicate
// on the factor needs no new operand, so every pass that moves or groups
// update ops (adamw_multi) carries it unchanged.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>

namespace tailor::graph {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "passes/graph/Passes.h.inc"
} // namespace tailor::graph

using namespace mlir;
using namespace tailor;

namespace {

/// Arithmetic on f32 scalars (rank-0 tensors).
struct ScalarMath {
  OpBuilder &b;
  Location loc;
  RankedTensorType f32 = RankedTensorType::get({}, b.getF32Type());

  Value constant(double value) {
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(f32, b.getF32FloatAttr(static_cast<float>(value))));
  }
  template <typename OpTy> Value op(Value lhs, Value rhs) {
    return OpTy::create(b, loc, f32, lhs, rhs);
  }
  Value add(Value l, Value r) { return op<tg::AddOp>(l, r); }
  Value sub(Value l, Value r) { return op<tg::SubOp>(l, r); }
  Value mul(Value l, Value r) { return op<tg::MulOp>(l, r); }
  Value div(Value l, Value r) { return op<tg::DivOp>(l, r); }
  Value min(Value l, Value r) { return op<tg::MinOp>(l, r); }
  Value max(Value l, Value r) { return op<tg::MaxOp>(l, r); }
  Value select(Value cond, Value t, Value f) {
    return tg::SelectOp::create(b, loc, f32, cond, t, f);
  }
  Value isNan(Value x) {
    return tg::IsNanOp::create(b, loc,
                               RankedTensorType::get({}, b.getI1Type()), x);
  }
  Value less(Value l, Value r) {
    return tg::LtOp::create(b, loc, RankedTensorType::get({}, b.getI1Type()),
                            l, r);
  }
};

struct OptimizerPass : public graph::impl::OptimizerPassBase<OptimizerPass> {
  using OptimizerPassBase::OptimizerPassBase;
  void runOnOperation() override;

private:
  /// A trainable parameter and its gradient accumulator.
  struct Trained {
    tg::ParamOp param;
    tg::StateOp grad;
  };
  /// What optimizer_step computes before the updates.
  struct UpdateFactor {
    /// The (unscaled, averaged) gradient norm it reports.
    Value norm;
    /// The factor the updates multiply the accumulators by (averaging,
    /// clipping, 1/S; NaN to skip a step with inf/NaN gradients).
    Value scale;
    /// fp16 loss scaling: whether a gradient is inf or NaN (i1).
    Value foundInf;
  };

  /// The multiplier of the peak learning rate after `k` updates (0-based),
  /// as transformers' get_{constant,linear,cosine}_schedule_with_warmup.
  Value scheduleFactor(ScalarMath &m, Value k);
  LogicalResult checkOptions(ModuleOp module);
  /// Turns `func` into train_step: its gradient results are accumulated
  /// into `.grad` states and dropped from its results.
  FailureOr<SmallVector<Trained>> buildTrainStep(ModuleOp module,
                                                 func::FuncOp func);
  /// The empty optimizer_step after `trainStep`: (step[, inv_scale]) ->
  /// (lr, grad_norm[, found_inf]).
  func::FuncOp declareOptimizerStep(OpBuilder &builder, func::FuncOp trainStep);
  UpdateFactor buildUpdateFactor(ScalarMath &m, Block *entry,
                                 ArrayRef<Trained> trained);
  /// One AdamW or SGD update per trained parameter, with its states.
  void buildUpdates(OpBuilder &builder, func::FuncOp trainStep, Block *entry,
                    ArrayRef<Trained> trained, Value lr, Value step,
                    Value scale);
};

} // namespace

LogicalResult OptimizerPass::checkOptions(ModuleOp module) {
  auto bad = [&](StringRef what) { return module.emitError() << what; };
  if (optimizer != "adamw" && optimizer != "sgd") {
    return bad("unknown optimizer '" + optimizer + "' (expected adamw or sgd)");
  }
  if (scheduler != "constant" && scheduler != "linear" && scheduler != "cosine") {
    return bad("unknown lr scheduler '" + scheduler +
               "' (expected constant, linear or cosine)");
  }
  if (!(learningRate >= 0.0) || !(weightDecay >= 0.0) || !(maxGradNorm >= 0.0) ||
      !(momentum >= 0.0) || !(epsilon > 0.0) || !(beta1 >= 0.0 && beta1 < 1.0) ||
      !(beta2 >= 0.0 && beta2 < 1.0)) {
    return bad("optimizer settings out of range (lr, weight decay, momentum "
               "and max grad norm >= 0; epsilon > 0; betas in [0, 1))");
  }
  if (warmupSteps < 0 || totalSteps < 1 || accumulationSteps < 1) {
    return bad("expected warmup-steps >= 0, total-steps >= 1 and "
               "accumulation-steps >= 1");
  }
  return success();
}

Value OptimizerPass::scheduleFactor(ScalarMath &m, Value k) {
  double warmup = static_cast<double>(warmupSteps);
  double total = static_cast<double>(totalSteps);
  Value decay;
  if (scheduler == "constant") {
    decay = m.constant(1.0);
  } else {
    if (scheduler == "linear") {
      Value remaining = m.div(m.sub(m.constant(total), k),
                              m.constant(std::max(1.0, total - warmup)));
      decay = m.max(m.constant(0.0), remaining);
    } else {
      Value progress = m.div(m.sub(k, m.constant(warmup)),
                             m.constant(std::max(1.0, total - warmup)));
      Value cosine = tg::CosOp::create(m.b, m.loc, m.f32,
                                       m.mul(m.constant(M_PI), progress));
      decay = m.max(m.constant(0.0),
                    m.mul(m.constant(0.5), m.add(m.constant(1.0), cosine)));
    }
  }
  if (warmupSteps == 0) {
    return decay;
  }
  Value ramp = m.div(k, m.constant(std::max(1.0, warmup)));
  return m.select(m.less(k, m.constant(warmup)), ramp, decay);
}

/// A state (accumulator, moment, buffer) of `param`, declared before
/// `anchor` (the train_step function, so every state precedes both entries).
static tg::StateOp makeState(OpBuilder &builder, func::FuncOp anchor,
                             tg::ParamOp param, tg::StateKind kind) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(anchor);
  std::string name =
      (param.getSymName() + "." + tg::stringifyStateKind(kind)).str();
  return tg::StateOp::create(builder, param.getLoc(), name,
                             param.getTensorType(), param.getSymName(), kind);
}

FailureOr<SmallVector<OptimizerPass::Trained>>
OptimizerPass::buildTrainStep(ModuleOp module, func::FuncOp func) {
  MLIRContext *context = &getContext();
  Block &body = func.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  OpBuilder builder(context);
  SmallVector<Trained> trained;
  SmallVector<Value> kept;
  SmallVector<DictionaryAttr> keptAttrs;
  // Names to symbols once: a scan of the module per lookup is quadratic.
  SymbolTable symbols(module);
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(index, "tg.grad_of");
    if (!of) {
      kept.push_back(value);
      keptAttrs.push_back(func.getResultAttrDict(index));
      continue;
    }
    auto param = symbols.lookup<tg::ParamOp>(of.getAttr());
    if (!param || !param.getTrainable()) {
      return func.emitError() << "result " << index << " is the gradient of "
                              << of << ", which is not a trainable parameter";
    }
    tg::StateOp grad = makeState(builder, func, param, tg::StateKind::Grad);
    builder.setInsertionPoint(ret);
    tg::AccumulateOp::create(builder, ret.getLoc(), grad.getSymName(), value);
    trained.push_back({param, grad});
  }
  if (trained.empty()) {
    return func.emitError()
           << "@" << function
           << " returns no gradients; run tailor-autodiff first, with at "
              "least one trainable parameter";
  }
  builder.setInsertionPoint(ret);
  func::ReturnOp::create(builder, ret.getLoc(), kept);
  ret.erase();
  func.setType(FunctionType::get(context, body.getArgumentTypes(),
                                 ValueRange(kept).getTypes()));
  func.setAllResultAttrs(keptAttrs);
  func.setSymName("train_step");
  return trained;
}

func::FuncOp OptimizerPass::declareOptimizerStep(OpBuilder &builder,
                                                 func::FuncOp trainStep) {
  MLIRContext *context = &getContext();
  builder.setInsertionPointAfter(trainStep);
  auto f32 = RankedTensorType::get({}, builder.getF32Type());
  auto i64 = RankedTensorType::get({}, builder.getI64Type());
  SmallVector<Type> argTypes = {i64}, resultTypes = {f32, f32};
  if (lossScaling) {
    argTypes.push_back(f32);
    resultTypes.push_back(f32);
  }
  auto update = func::FuncOp::create(
      builder, trainStep.getLoc(), "optimizer_step",
      FunctionType::get(context, argTypes, resultTypes));
  auto named = [&](StringRef name) {
    return builder.getNamedAttr("tg.name", builder.getStringAttr(name));
  };
  update.setArgAttrs(0, {named("step")});
  update.setResultAttrs(0, {named("lr")});
  update.setResultAttrs(1, {named("grad_norm")});
  if (lossScaling) {
    update.setArgAttrs(1, {named("inv_scale")});
    update.setResultAttrs(2, {named("found_inf")});
  }
  update.addEntryBlock();
  return update;
}

OptimizerPass::UpdateFactor
OptimizerPass::buildUpdateFactor(ScalarMath &m, Block *entry,
                                 ArrayRef<Trained> trained) {
  // The norm of the averaged gradients, and the factor that averages (and
  // clips) them inside the update, as torch.nn.utils.clip_grad_norm_.
  SmallVector<Value> grads;
  for (Trained t : trained) {
    grads.push_back(tg::StateRefOp::create(m.b, m.loc, t.grad.getType(),
                                           t.grad.getSymName()));
  }
  UpdateFactor f;
  f.norm = tg::GlobalNormOp::create(m.b, m.loc, m.f32, grads);
  // fp16: the norm of the scaled gradients says whether any is inf/NaN;
  // then both the norm and the update's factor are unscaled.
  Value unscale;
  if (lossScaling) {
    f.foundInf = m.isNan(m.mul(f.norm, m.constant(0.0)));
    unscale = entry->getArgument(1);
    f.norm = m.mul(f.norm, unscale);
  }
  double average = 1.0 / static_cast<double>(accumulationSteps);
  if (accumulationSteps > 1) {
    f.norm = m.mul(f.norm, m.constant(average));
  }
  f.scale = m.constant(average);
  if (maxGradNorm > 0.0) {
    Value coefficient = m.min(
        m.constant(1.0),
        m.div(m.constant(maxGradNorm), m.add(f.norm, m.constant(1e-6))));
    f.scale = accumulationSteps > 1 ? m.mul(coefficient, f.scale) : coefficient;
  }
  if (lossScaling) {
    f.scale = m.select(f.foundInf, m.constant(std::nan("")),
                       m.mul(f.scale, unscale));
  }
  return f;
}

void OptimizerPass::buildUpdates(OpBuilder &builder, func::FuncOp trainStep,
                                 Block *entry, ArrayRef<Trained> trained,
                                 Value lr, Value step, Value scale) {
  Location loc = trainStep.getLoc();
  auto ref = [&](StringRef name) {
    return FlatSymbolRefAttr::get(&getContext(), name);
  };
  builder.setInsertionPointToEnd(entry);
  for (Trained t : trained) {
    if (optimizer == "adamw") {
      tg::StateOp expAvg =
          makeState(builder, trainStep, t.param, tg::StateKind::ExpAvg);
      tg::StateOp expAvgSq =
          makeState(builder, trainStep, t.param, tg::StateKind::ExpAvgSq);
      tg::AdamWUpdateOp::create(
          builder, loc, ref(t.param.getSymName()), ref(t.grad.getSymName()),
          ref(expAvg.getSymName()), ref(expAvgSq.getSymName()), lr, step,
          scale, builder.getF64FloatAttr(beta1), builder.getF64FloatAttr(beta2),
          builder.getF64FloatAttr(epsilon), builder.getF64FloatAttr(weightDecay));
      continue;
    }
    // Plain SGD keeps no buffer (nor does torch.optim.SGD).
    FlatSymbolRefAttr buffer;
    if (momentum != 0.0) {
      buffer = ref(makeState(builder, trainStep, t.param,
                             tg::StateKind::MomentumBuffer)
                       .getSymName());
    }
    tg::SGDUpdateOp::create(
        builder, loc, ref(t.param.getSymName()), ref(t.grad.getSymName()),
        buffer, lr, scale, builder.getF64FloatAttr(momentum),
        builder.getF64FloatAttr(weightDecay),
        nesterov ? builder.getUnitAttr() : UnitAttr());
  }
}

void OptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module))) {
    return signalPassFailure();
  }
  auto func = module.lookupSymbol<func::FuncOp>(function);
  if (!func || func.isExternal() || !func.getBody().hasOneBlock()) {
    module.emitError() << "no single-block function @" << function
                       << " to build a training step from";
    return signalPassFailure();
  }
  for (StringRef name : {"train_step", "optimizer_step"}) {
    if (name != function && module.lookupSymbol(name)) {
      module.emitError() << "the module already has a symbol @" << name;
      return signalPassFailure();
    }
  }
  // train_step: gradients go into accumulators.
  FailureOr<SmallVector<Trained>> trained = buildTrainStep(module, func);
  if (failed(trained)) {
    return signalPassFailure();
  }
  // optimizer_step: norm, clipping, schedule and one update per parameter.
  OpBuilder builder(&getContext());
  func::FuncOp update = declareOptimizerStep(builder, func);
  Block *entry = &update.getBody().front();
  builder.setInsertionPointToStart(entry);
  ScalarMath m{builder, func.getLoc()};
  Value step = entry->getArgument(0);
  UpdateFactor factor = buildUpdateFactor(m, entry, *trained);
  Value k = m.sub(tg::CastOp::create(builder, m.loc, m.f32, step),
                  m.constant(1.0));
  Value lr = m.mul(m.constant(learningRate), scheduleFactor(m, k));
  buildUpdates(builder, func, entry, *trained, lr, step, factor.scale);
  builder.setInsertionPointToEnd(entry);
  SmallVector<Value> results = {lr, factor.norm};
  if (lossScaling) {
    results.push_back(tg::CastOp::create(builder, m.loc, m.f32, factor.foundInf));
  }
  func::ReturnOp::create(builder, m.loc, results);
}
