//===- SplitLayers.cpp - consecutive layers on different ranks ------------===//
//
// tailor-split-layers (Passes.td): the training step cut into pipeline
// stages, one nested module per stage, each planned as a rank's program.
//
// Stage `s` holds layers [first_layers[s], first_layers[s + 1]), chosen so
// the busiest stage's FLOPs are least (chooseBoundaries); the embedding
// goes with the first layer's stage, the final norm, the head and the loss
// with the last layer's. An op's stage is its layer's; an op
// without a layer takes the latest stage among its operands'. Ops that need
// nothing but the step's inputs, constants and parameters (rope tables,
// masks, transposed weights) are free: cloned into every stage that reads
// them, so no rank waits for another to compute them.
//
// Every stage but the last gets two entries: `pipeline_forward` runs the
// stage's forward ops for one micro-batch, keeps what it received in a slot
// of a `pipeline_input` state and sends what later stages read;
// `train_step` reads the slot back, runs the forward again and then the
// backward (GPipe's re-materialization: one tensor per micro-batch in
// flight is kept, not every activation of the stage). The last stage runs
// forward, loss and backward in one `train_step`, as a 1F1B schedule does.
// Receives come first in an entry and sends last, each in the order of the
// values in the unsplit step, so the two sides of a link always agree.
// The entries are built in SplitLayersEntry.cpp; LayerSplitter.h declares
// the class the two files share.
//
// With more ranks than stages (a multiple of them), every stage has
// `replicas` data-parallel replicas (Megatron's PP x DP). Ranks are
// stage-major: stage s runs on ranks s * replicas .. s * replicas +
// replicas - 1, so a stage's replicas are consecutive ranks (a node, when
// a node's devices hold one stage: the gradient all-reduce stays on the
// node's links, the smaller activations cross nodes), and replica j's
// pipeline is ranks j, j + replicas, .... Each stage's gradients are
// averaged over its replicas with DDP's buckets (GradientBuckets.h, group
// `replicas`); sends and receives name the peer stage and go to the peer
// of the same replica; the clipping norm is summed over one pipeline
// (group `stages`), equal on every replica since their gradients are.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/tg/TGOps.h"
#include "passes/parallel/GradientBuckets.h"
#include "passes/parallel/LayerSplitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace tailor::parallel {

#define GEN_PASS_DEF_SPLITLAYERSPASS
#include "passes/parallel/Passes.h.inc"

using namespace mlir;

namespace split {

LogicalResult LayerSplitter::checkInput() {
  train = module.lookupSymbol<func::FuncOp>(kTrain);
  optimizer = module.lookupSymbol<func::FuncOp>(kOptimizer);
  if (!train || !optimizer) {
    return module.emitError() << "tailor-split-layers: no @train_step and "
                                 "@optimizer_step: layer split cuts a "
                                 "training step (compile with a recipe)";
  }
  if (module.lookupSymbol<func::FuncOp>("eval_step")) {
    return module.emitError()
           << "tailor-split-layers: validation (eval_step, val_set_size or "
              "--eval-data) with layer split is not built yet";
  }
  auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel");
  auto world = parallel ? parallel.getAs<IntegerAttr>("world_size") : nullptr;
  if ((world && world.getInt() > 1) || !module.getOps<tg::BucketOp>().empty()) {
    return module.emitError()
           << "tailor-split-layers: the step is already sharded; layer split "
              "with data parallelism (DDP, ZeRO) is not built yet";
  }
  if (!train.getBody().hasOneBlock() || train.getNumResults() != 1) {
    return train.emitError() << "tailor-split-layers: expected one block "
                                "returning the loss";
  }
  return success();
}

int64_t LayerSplitter::slotsOf(int64_t stage) const {
  if (stage == stages - 1) {
    return 0;
  }
  // 1F1B keeps at most (stages - stage) micro-batches in flight on a stage;
  // naive runs one micro-batch through every stage at a time.
  return schedule == "naive" ? 1 : std::min(stages - stage, microBatches);
}

bool LayerSplitter::inEntry(Operation *op, int64_t stage,
                            bool forwardOnly) const {
  auto it = map.stage.find(op);
  if (it == map.stage.end() || it->second != stage) {
    return false;
  }
  return !forwardOnly || !map.backwardOps.contains(op);
}

void LayerSplitter::crossings(
    int64_t stage, bool forwardOnly,
    SmallVector<std::pair<Value, int64_t>> &incoming,
    SmallVector<std::pair<Value, int64_t>> &outgoing) {
  llvm::SetVector<std::pair<Value, int64_t>> in, out;
  for (Operation &op : train.getBody().front().without_terminator()) {
    int64_t own = map.stage.lookup(&op);
    if (own < 0) {
      continue;
    }
    for (Value operand : op.getOperands()) {
      int64_t from = map.stageOf(operand);
      if (from < 0 || from == own) {
        continue;
      }
      // The forward entry receives every activation any op of the stage
      // reads (train_step reads them back from the slots in this order).
      bool received = forwardOnly ? !map.backward.contains(operand)
                                  : inEntry(&op, stage, false);
      if (own == stage && received) {
        in.insert({operand, from});
      }
      // What this stage sends: forward values from pipeline_forward (or,
      // on the last stage, which has none, never), gradients from
      // train_step.
      bool sentHere = map.backward.contains(operand) != forwardOnly;
      if (from == stage && sentHere) {
        out.insert({operand, own});
      }
    }
  }
  auto byPosition = [&](const std::pair<Value, int64_t> &a,
                        const std::pair<Value, int64_t> &b) {
    return map.positionOf(a.first) < map.positionOf(b.first);
  };
  incoming.assign(in.begin(), in.end());
  outgoing.assign(out.begin(), out.end());
  llvm::stable_sort(incoming, byPosition);
  llvm::stable_sort(outgoing, byPosition);
}

/// The stage's updates: those of the parameters whose gradients it
/// accumulates; the clipping norm over every stage's gradients (the sum of
/// the stages' squared norms, all-reduced over one replica's pipeline).
LogicalResult LayerSplitter::buildOptimizer(ModuleOp into, int64_t stage) {
  DenseSet<StringAttr> ownGrads;
  into.walk([&](tg::AccumulateOp op) {
    ownGrads.insert(op.getTargetAttr().getAttr());
  });
  builder.setInsertionPointToEnd(into.getBody());
  auto func = llvm::cast<func::FuncOp>(builder.clone(*optimizer));
  SmallVector<Operation *> foreign;
  func.walk([&](Operation *op) {
    if (llvm::isa<tg::AdamWUpdateOp, tg::SGDUpdateOp>(op)) {
      auto grad = op->getAttrOfType<FlatSymbolRefAttr>("grad");
      if (!ownGrads.contains(grad.getAttr())) {
        foreign.push_back(op);
      }
    }
  });
  for (Operation *op : foreign) {
    op->erase();
  }
  SmallVector<tg::GlobalNormOp> norms;
  func.walk([&](tg::GlobalNormOp op) { norms.push_back(op); });
  for (tg::GlobalNormOp norm : norms) {
    SmallVector<Value> own;
    for (Value input : norm.getInputs()) {
      auto ref = input.getDefiningOp<tg::StateRefOp>();
      if (!ref) {
        return norm.emitError() << "tailor-split-layers: a gradient norm "
                                   "over something else than gradients";
      }
      if (ownGrads.contains(ref.getNameAttr().getAttr())) {
        own.push_back(input);
      }
    }
    builder.setInsertionPoint(norm);
    Location loc = norm.getLoc();
    Type scalar = norm.getResult().getType();
    Value local = tg::GlobalNormOp::create(builder, loc, scalar, own);
    Value square = tg::MulOp::create(builder, loc, scalar, local, local);
    Value total = tg::AllReduceOp::create(builder, loc, square,
                                          tg::CommReduction::Sum,
                                          tg::CommGroup::Stages);
    norm.getResult().replaceAllUsesWith(
        tg::SqrtOp::create(builder, loc, scalar, total));
    norm.erase();
  }
  for (Operation &op : llvm::make_early_inc_range(
           llvm::reverse(func.getBody().front().getOperations()))) {
    if (isOpTriviallyDead(&op)) {
      op.erase();
    }
  }
  return success();
}

void LayerSplitter::copyDeclarations(ModuleOp into) {
  builder.setInsertionPointToEnd(into.getBody());
  for (Operation &op : module.getBody()->getOperations()) {
    if (llvm::isa<func::FuncOp, ModuleOp>(op)) {
      continue;
    }
    builder.clone(op);
  }
}

void LayerSplitter::eraseUnusedDeclarations(ModuleOp into) {
  // States name their parameter: erase until nothing more goes.
  bool erased = true;
  while (erased) {
    erased = false;
    for (Operation &op :
         llvm::make_early_inc_range(into.getBody()->getOperations())) {
      auto symbol = llvm::dyn_cast<SymbolOpInterface>(op);
      if (!llvm::isa<tg::ParamOp, tg::StateOp>(op) ||
          !SymbolTable::symbolKnownUseEmpty(symbol.getNameAttr(), into)) {
        continue;
      }
      op.erase();
      erased = true;
    }
  }
}

/// DDP over the stage's replicas: its gradients (only its own are left
/// declared) in buckets, each averaged at the start of the optimizer step.
void LayerSplitter::averageOverReplicas(ModuleOp into) {
  GradientBuckets buckets = bucketGradients(into, bucketBytes);
  if (!buckets.empty()) {
    insertGradientAllReduces(into.lookupSymbol<func::FuncOp>(kOptimizer),
                             buckets, tg::CommGroup::Replicas);
  }
}

/// What this stage's program is, for planning and the plan.
void LayerSplitter::recordStage(ModuleOp into, int64_t stage, int64_t slots) {
  int64_t last =
      stage + 1 < stages ? map.firstLayers[stage + 1] - 1 : map.layers - 1;
  auto i64 = [&](int64_t value) { return builder.getI64IntegerAttr(value); };
  into->setAttr(
      "tg.pipeline_stage",
      builder.getDictionaryAttr({
          builder.getNamedAttr("stage", i64(stage)),
          builder.getNamedAttr("stages", i64(stages)),
          builder.getNamedAttr("replicas", i64(replicas)),
          builder.getNamedAttr("first_layer", i64(map.firstLayers[stage])),
          builder.getNamedAttr("last_layer", i64(last)),
          builder.getNamedAttr("slots", i64(slots)),
          builder.getNamedAttr("micro_batches", i64(microBatches)),
          builder.getNamedAttr("schedule", builder.getStringAttr(schedule)),
      }));
  into->setAttr(
      "tg.parallel",
      builder.getDictionaryAttr({
          builder.getNamedAttr("strategy", builder.getStringAttr("pipeline")),
          builder.getNamedAttr("world_size", i64(stages * replicas)),
          builder.getNamedAttr("ranks_per_node", i64(stages * replicas)),
      }));
}

LogicalResult LayerSplitter::buildStage(int64_t stage) {
  builder.setInsertionPointToEnd(module.getBody());
  auto into = ModuleOp::create(builder, module.getLoc(),
                               "stage" + std::to_string(stage));
  stageModules.push_back(into);
  for (NamedAttribute attr : module->getAttrs()) {
    if (attr.getName() != SymbolTable::getSymbolAttrName()) {
      into->setAttr(attr.getName(), attr.getValue());
    }
  }
  copyDeclarations(into);
  int64_t slots = slotsOf(stage);
  if (slots > 0) {
    if (failed(buildStepFunction(into, stage, /*forwardOnly=*/true))) {
      return failure();
    }
  }
  FailureOr<func::FuncOp> step =
      buildStepFunction(into, stage, /*forwardOnly=*/false);
  if (failed(step) || failed(buildOptimizer(into, stage))) {
    return failure();
  }
  // One pipeline_input state per value received in forward, a slot per
  // micro-batch in flight.
  unsigned index = 0;
  builder.setInsertionPointToStart(into.getBody());
  if (auto forward = into.lookupSymbol<func::FuncOp>(kForward)) {
    forward.walk([&](tg::SlotWriteOp write) {
      auto type = llvm::cast<RankedTensorType>(write.getValue().getType());
      SmallVector<int64_t> shape{slots};
      llvm::append_range(shape, type.getShape());
      std::string name = "pipeline.input." + std::to_string(index++);
      tg::StateOp::create(
          builder, write.getLoc(), builder.getStringAttr(name),
          TypeAttr::get(RankedTensorType::get(shape, type.getElementType())),
          FlatSymbolRefAttr::get(builder.getContext(), name),
          tg::StateKindAttr::get(builder.getContext(),
                                 tg::StateKind::PipelineInput),
          UnitAttr());
    });
  }
  eraseUnusedDeclarations(into);
  if (replicas > 1) {
    averageOverReplicas(into);
  }
  recordStage(into, stage, slots);
  into.walk([&](tg::ParamRefOp ref) {
    auto param = into.lookupSymbol<tg::ParamOp>(ref.getNameAttr());
    if (param && param.getTrainable()) {
      trainableReaders[param.getSymNameAttr()].insert(stage);
    }
  });
  return success();
}

LogicalResult LayerSplitter::checkTiedTrainables() {
  for (auto &[name, readers] : trainableReaders) {
    if (readers.size() > 1) {
      return module.emitError()
             << "tailor-split-layers: trainable parameter @" << name.getValue()
             << " is read by stages " << readers[0] << " and " << readers[1]
             << " (tied weights); sharing a trained tensor between stages is "
                "not built yet (freeze it, or untie the embeddings)";
    }
  }
  return success();
}

LogicalResult LayerSplitter::run() {
  if (failed(checkInput())) {
    return failure();
  }
  FailureOr<SmallVector<double>> weights = stageWeightsOf(module, stages);
  if (failed(weights)) {
    return failure();
  }
  FailureOr<StageAssignment> assignment =
      StageAssignment::build(train, stages, *weights);
  if (failed(assignment)) {
    return failure();
  }
  map = std::move(*assignment);
  for (int64_t s = 0; s < stages; ++s) {
    if (failed(buildStage(s))) {
      return failure();
    }
  }
  if (failed(checkTiedTrainables())) {
    return failure();
  }
  // The outer module keeps the decision and the stages only.
  module->removeAttr("tg.parallel");
  for (Operation &op :
       llvm::make_early_inc_range(module.getBody()->getOperations())) {
    if (!llvm::isa<ModuleOp>(op)) {
      op.erase();
    }
  }
  SmallVector<NamedAttribute> decision = {
      builder.getNamedAttr("stages", builder.getI64IntegerAttr(stages)),
      builder.getNamedAttr("replicas", builder.getI64IntegerAttr(replicas)),
      builder.getNamedAttr("schedule", builder.getStringAttr(schedule)),
      builder.getNamedAttr("micro_batches",
                           builder.getI64IntegerAttr(microBatches)),
      builder.getNamedAttr("first_layers",
                           builder.getDenseI64ArrayAttr(map.firstLayers))};
  if (!weights->empty()) {
    decision.push_back(builder.getNamedAttr(
        "stage_weights", builder.getDenseF64ArrayAttr(*weights)));
  }
  module->setAttr("tg.pipeline", builder.getDictionaryAttr(decision));
  return success();
}

} // namespace split

namespace {

struct SplitLayersPass : public impl::SplitLayersPassBase<SplitLayersPass> {
  using SplitLayersPassBase::SplitLayersPassBase;

  void runOnOperation() override {
    if (stages < 2) {
      return;
    }
    if (schedule != "1f1b" && schedule != "naive") {
      getOperation().emitError() << "tailor-split-layers: unknown schedule '"
                                 << schedule << "' (expected 1f1b or naive)";
      return signalPassFailure();
    }
    if (worldSize < 0 || worldSize % stages != 0) {
      getOperation().emitError()
          << "tailor-split-layers: " << static_cast<int64_t>(worldSize)
          << " ranks do not divide into " << static_cast<int64_t>(stages)
          << " pipeline stages (the ranks must be a multiple of the stages: "
             "stages x data-parallel replicas)";
      return signalPassFailure();
    }
    if (microBatches < 1 || bucketBytes < 1) {
      getOperation().emitError() << "tailor-split-layers: micro-batches and "
                                    "bucket-bytes must be positive";
      return signalPassFailure();
    }
    int64_t replicas = worldSize == 0 ? 1 : worldSize / stages;
    split::LayerSplitter splitter(getOperation(), stages, replicas,
                                  microBatches, schedule, bucketBytes);
    if (failed(splitter.run())) {
      signalPassFailure();
    }
  }
};

} // namespace

} // namespace tailor::parallel
