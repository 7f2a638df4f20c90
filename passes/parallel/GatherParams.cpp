//===- GatherParams.cpp - ZeRO-3's parameter reads, after recomputation ---===//
//
// tailor-gather-params (Passes.td): the reads of sharded parameters that
// tailor-shard left (defer-param-reads), rewritten through gathers once
// recomputation has placed the forward ops it replays in backward. The
// rewriting is ZeRO-3's own (ZeroStage3.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"
#include "passes/parallel/ZeroSharding.h"

namespace tailor::parallel {

#define GEN_PASS_DEF_GATHERPARAMSPASS
#include "passes/parallel/Passes.h.inc"

using namespace mlir;

namespace {

struct GatherParamsPass
    : public impl::GatherParamsPassBase<GatherParamsPass> {
  using GatherParamsPassBase::GatherParamsPassBase;

  void runOnOperation() override;
};

void GatherParamsPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel");
  auto strategy = parallel ? parallel.getAs<StringAttr>("strategy") : nullptr;
  auto world = parallel ? parallel.getAs<IntegerAttr>("world_size") : nullptr;
  if (!strategy || strategy.getValue() != "zero3" || !world ||
      world.getInt() < 2) {
    return;
  }
  bool gathered = false;
  module.walk([&](tg::GatherBucketOp) { gathered = true; });
  if (gathered) {
    module.emitError() << "tailor-gather-params: the parameter reads are "
                          "gathered already (run tailor-shard with "
                          "defer-param-reads)";
    return signalPassFailure();
  }
  ZeroOptions options;
  options.stage = 3;
  options.shards = world.getInt();
  options.bucketBytes = bucketBytes;
  options.reshardAfterForward = reshardAfterForward;
  if (failed(gatherShardedParams(module, options))) {
    signalPassFailure();
  }
}

} // namespace

} // namespace tailor::parallel
