//===- Shard.cpp - tailor-shard: data parallelism over several ranks ------===//
//
// Records how the training step is split over ranks and rewrites it: with
// `ddp`, the gradients each rank accumulated are averaged over the world,
// bucket by bucket, before the optimizer reads them; with `zero1` and
// `zero2`, optimizer state (and gradients) are cut into one chunk per rank
// (ZeroSharding.cpp), with `zero3` the parameters too; `hybrid` cuts them
// as zero2 within each node and keeps one replica per node.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"
#include "passes/parallel/ZeroSharding.h"

#include "dialects/tg/TGShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tailor::parallel {

#define GEN_PASS_DEF_SHARDPASS
#include "passes/parallel/Passes.h.inc"

namespace {

using namespace mlir;

/// Gradient states grouped into the buckets one all-reduce each carries.
using Buckets = std::vector<std::vector<tg::StateOp>>;

class ShardPass : public impl::ShardPassBase<ShardPass> {
public:
  using ShardPassBase::ShardPassBase;

  void runOnOperation() override;

private:
  LogicalResult checkOptions(ModuleOp module);
  Buckets bucketGradients(ModuleOp module) const;
  void insertAllReduces(func::FuncOp function, const Buckets &buckets);
};

} // namespace

LogicalResult ShardPass::checkOptions(ModuleOp module) {
  if (worldSize < 1) {
    return module.emitError() << "tailor-shard: world-size must be at least "
                                 "1, got "
                              << worldSize;
  }
  int64_t perNode = ranksPerNode == 0 ? worldSize : ranksPerNode;
  if (perNode < 1 || worldSize % perNode != 0) {
    return module.emitError()
           << "tailor-shard: " << worldSize << " ranks do not split into "
           << "nodes of " << perNode;
  }
  if (strategy != "ddp" && strategy != "zero1" && strategy != "zero2" &&
      strategy != "zero3" && strategy != "hybrid") {
    return module.emitError() << "tailor-shard: unknown strategy '"
                              << strategy
                              << "' (ddp, zero1, zero2, zero3, hybrid)";
  }
  if (bucketBytes <= 0) {
    return module.emitError()
           << "tailor-shard: bucket-bytes must be positive, got "
           << bucketBytes;
  }
  return success();
}

/// Backward finishes the last layers' gradients first, so buckets are
/// filled from the last declared gradient back; a bucket holds one element
/// type and at most `bucketBytes` (a larger gradient is a bucket alone).
Buckets ShardPass::bucketGradients(ModuleOp module) const {
  std::vector<tg::StateOp> grads;
  for (tg::StateOp state : module.getOps<tg::StateOp>()) {
    if (state.getKind() == tg::StateKind::Grad) {
      grads.push_back(state);
    }
  }
  Buckets buckets;
  int64_t filled = 0;
  for (tg::StateOp state : llvm::reverse(grads)) {
    int64_t bytes = tg::byteSize(state.getTensorType());
    bool sameType =
        !buckets.empty() &&
        buckets.back().front().getTensorType().getElementType() ==
            state.getTensorType().getElementType();
    if (buckets.empty() || !sameType || filled + bytes > bucketBytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(state);
    filled += bytes;
  }
  return buckets;
}

void ShardPass::insertAllReduces(func::FuncOp function,
                                 const Buckets &buckets) {
  OpBuilder builder(function.getContext());
  builder.setInsertionPointToStart(&function.getBody().front());
  for (const std::vector<tg::StateOp> &bucket : buckets) {
    SmallVector<Attribute> names;
    for (tg::StateOp state : bucket) {
      names.push_back(FlatSymbolRefAttr::get(state.getSymNameAttr()));
    }
    tg::AllReduceStatesOp::create(builder, function.getLoc(),
                                  builder.getArrayAttr(names),
                                  tg::CommReduction::Avg, tg::CommGroup::World);
  }
}

void ShardPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module))) {
    return signalPassFailure();
  }
  Builder builder(module.getContext());
  int64_t perNode = ranksPerNode == 0 ? worldSize : ranksPerNode;
  module->setAttr(
      "tg.parallel",
      builder.getDictionaryAttr(
          {builder.getNamedAttr("world_size",
                                builder.getI64IntegerAttr(worldSize)),
           builder.getNamedAttr("ranks_per_node",
                                builder.getI64IntegerAttr(perNode)),
           builder.getNamedAttr("strategy", builder.getStringAttr(strategy))}));
  if (worldSize == 1) {
    return;
  }
  if (strategy != "ddp") {
    ZeroOptions options;
    options.stage = strategy == "zero1" ? 1 : strategy == "zero3" ? 3 : 2;
    options.reshardAfterForward = reshardAfterForward;
    options.shards = worldSize;
    if (strategy == "hybrid") {
      options.shards = perNode;
      options.group = tg::CommGroup::Node;
      options.replicas = worldSize / perNode;
    }
    options.bucketBytes = bucketBytes;
    options.optimizerFunction = this->function;
    options.deferParamReads = deferParamReads;
    if (failed(shardOptimizerState(module, options))) {
      signalPassFailure();
    }
    return;
  }
  auto function = module.lookupSymbol<func::FuncOp>(this->function);
  if (!function) {
    module.emitError() << "tailor-shard: no function @" << this->function
                       << ": data parallelism needs a training step "
                          "(compile with a recipe)";
    return signalPassFailure();
  }
  Buckets buckets = bucketGradients(module);
  if (buckets.empty()) {
    function.emitError() << "tailor-shard: nothing trains (no gradient "
                            "states) to average over ranks";
    return signalPassFailure();
  }
  insertAllReduces(function, buckets);
}

} // namespace tailor::parallel
