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

#include "passes/parallel/GradientBuckets.h"
#include "passes/parallel/Passes.h"
#include "passes/parallel/ZeroSharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tailor::parallel {

#define GEN_PASS_DEF_SHARDPASS
#include "passes/parallel/Passes.h.inc"

namespace {

using namespace mlir;

class ShardPass : public impl::ShardPassBase<ShardPass> {
public:
  using ShardPassBase::ShardPassBase;

  void runOnOperation() override;

private:
  LogicalResult checkOptions(ModuleOp module);
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
  GradientBuckets buckets = bucketGradients(module, bucketBytes);
  if (buckets.empty()) {
    function.emitError() << "tailor-shard: nothing trains (no gradient "
                            "states) to average over ranks";
    return signalPassFailure();
  }
  insertGradientAllReduces(function, buckets, tg::CommGroup::World);
}

} // namespace tailor::parallel
