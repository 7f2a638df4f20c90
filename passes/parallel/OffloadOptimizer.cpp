//===- OffloadOptimizer.cpp - AdamW and its state on the host -------------===//
//
// tailor-offload's `optimizer` decision (ZeRO-Offload's placement): the
// AdamW moments live in host memory and the update runs on the host. Per
// step, `optimizer_step` becomes
//
//   1. (unchanged) the clipping norm and the learning rate, on the device;
//   2. every gradient copied into its host copy (`grad_host`) and every
//      parameter into its `master` state, then the scalars (lr, step,
//      clipping scale) into host memory;
//   3. the updates, on the host (`tg.host`), back to back so planning joins
//      them into one multi-tensor launch;
//   4. every updated master copied back into its parameter, and the device
//      gradient accumulators zeroed.
//
// Under ZeRO (DeepSpeed's ZeRO-Offload is stage 2 with this placement) an
// update names a tg.bucket and its chunk states: the host copies are then
// chunk-sized (this rank's share of the master weights and moments), the
// copies move this rank's chunk of the bucket, and the all-gathers of the
// updated buckets (stages 1 and 2) follow the copies back.
//
// The master is refreshed from the device each step rather than kept as
// the truth (as DeepSpeed keeps its fp32 master): a parameter written by
// anyone else (an adapter loaded, a checkpoint resumed, a caller's upload)
// is then never silently overwritten, at the cost of one more copy of the
// trainable parameters per step. Both host copies are transient in value,
// so checkpoints never save them.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/ZeroSharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace tailor::parallel {

using namespace mlir;

namespace {

/// A host state of `param` of `kind`, declared beside the parameter's
/// other states (made once).
tg::StateOp hostStateOf(SymbolTable &symbols, tg::StateOp like,
                        tg::StateKind kind) {
  std::string name =
      (like.getParameter() + "." + tg::stringifyStateKind(kind)).str();
  if (auto existing = symbols.lookup<tg::StateOp>(name)) {
    return existing;
  }
  OpBuilder builder(like);
  builder.setInsertionPointAfter(like);
  auto state = tg::StateOp::create(builder, like.getLoc(), name,
                                   like.getTensorType(), like.getParameter(),
                                   kind, /*host=*/true);
  symbols.insert(state);
  return state;
}

/// Refuses what optimizer offload does not place yet, naming it.
LogicalResult checkOffloadable(func::FuncOp optimizer) {
  WalkResult walk = optimizer.walk([&](tg::SGDUpdateOp sgd) {
    sgd.emitError() << "offload_optimizer: SGD on the host is not built "
                       "yet (AdamW is)";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

/// The all-gathers of the buckets the updates write (ZeRO-1/2), which
/// must read the parameters the masters are copied back into.
SmallVector<tg::AllGatherBucketOp>
gathersOfUpdated(func::FuncOp optimizer, ArrayRef<tg::AdamWUpdateOp> updates) {
  llvm::DenseSet<StringAttr> updated;
  for (tg::AdamWUpdateOp update : updates) {
    updated.insert(update.getParamAttr().getAttr());
  }
  SmallVector<tg::AllGatherBucketOp> gathers;
  optimizer.walk([&](tg::AllGatherBucketOp gather) {
    if (updated.contains(gather.getBucketAttr().getAttr())) {
      gathers.push_back(gather);
    }
  });
  return gathers;
}

} // namespace

LogicalResult offloadOptimizer(ModuleOp module, const ZeroOptions &options) {
  auto optimizer = module.lookupSymbol<func::FuncOp>(options.optimizerFunction);
  if (!optimizer) {
    return module.emitError() << "tailor-offload: no function @"
                              << options.optimizerFunction
                              << ": optimizer offload places a training "
                                 "step's optimizer (compile with a recipe)";
  }
  if (failed(checkOffloadable(optimizer))) {
    return failure();
  }
  SmallVector<tg::AdamWUpdateOp> updates;
  optimizer.walk([&](tg::AdamWUpdateOp op) { updates.push_back(op); });
  if (updates.empty()) {
    return success();
  }
  SmallVector<tg::AllGatherBucketOp> gathers =
      gathersOfUpdated(optimizer, updates);
  // Everything goes where the first update was: the norm, learning rate
  // and the scalars are computed before it.
  OpBuilder builder(updates.front());
  Location loc = updates.front().getLoc();
  llvm::MapVector<Value, Value> hostScalars;
  SmallVector<Attribute> deviceGrads;
  SmallVector<std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr>> copyBacks;
  // Names to symbols once: a scan of the module per lookup is quadratic.
  SymbolTable symbols(module);
  for (tg::AdamWUpdateOp update : updates) {
    auto grad = symbols.lookup<tg::StateOp>(update.getGrad());
    tg::StateOp gradHost = hostStateOf(symbols, grad, tg::StateKind::GradHost);
    tg::StateOp master = hostStateOf(symbols, grad, tg::StateKind::Master);
    for (FlatSymbolRefAttr moment :
         {update.getExpAvgAttr(), update.getExpAvgSqAttr()}) {
      symbols.lookup<tg::StateOp>(moment.getAttr()).setHost(true);
    }
    auto gradHostRef = FlatSymbolRefAttr::get(gradHost.getSymNameAttr());
    auto masterRef = FlatSymbolRefAttr::get(master.getSymNameAttr());
    tg::CopyStateOp::create(builder, loc, update.getGradAttr(), gradHostRef);
    tg::CopyStateOp::create(builder, loc, update.getParamAttr(), masterRef);
    deviceGrads.push_back(update.getGradAttr());
    copyBacks.emplace_back(masterRef, update.getParamAttr());
    for (Value scalar : {update.getLr(), update.getStep(), update.getGradScale()}) {
      hostScalars.try_emplace(scalar, Value());
    }
    update.setParamAttr(masterRef);
    update.setGradAttr(gradHostRef);
  }
  Operation *last = nullptr;
  for (auto &[device, host] : hostScalars) {
    host = tg::ToHostOp::create(builder, loc, device);
    last = host.getDefiningOp();
  }
  for (tg::AdamWUpdateOp update : updates) {
    update->setAttr(tg::TGDialect::kHostAttrName, builder.getUnitAttr());
    update.getLrMutable().assign(hostScalars.lookup(update.getLr()));
    update.getStepMutable().assign(hostScalars.lookup(update.getStep()));
    update.getGradScaleMutable().assign(
        hostScalars.lookup(update.getGradScale()));
    // Back to back after the copies, in their original order.
    update->moveAfter(last);
    last = update;
  }
  builder.setInsertionPointAfter(last);
  for (auto [master, param] : copyBacks) {
    last = tg::CopyStateOp::create(builder, loc, master, param);
  }
  for (tg::AllGatherBucketOp gather : gathers) {
    gather->moveAfter(last);
    last = gather;
  }
  builder.setInsertionPointAfter(last);
  tg::ZeroStatesOp::create(builder, loc, builder.getArrayAttr(deviceGrads));
  return success();
}

} // namespace tailor::parallel
