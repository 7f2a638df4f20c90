//===- Offload.cpp - tensors in host memory, copied to be used ------------===//
//
// tailor-offload (Passes.td): frozen parameters into host buckets, read
// through copies to the device. The bucket machinery is ZeRO-3's
// (ZeroStage3.cpp): a host bucket is a frozen bucket of one shard whose
// gather is a copy. The optimizer's placement is OffloadOptimizer.cpp, the
// saved activations' OffloadActivations.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"
#include "passes/parallel/ZeroSharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tailor::parallel {

#define GEN_PASS_DEF_OFFLOADPASS
#include "passes/parallel/Passes.h.inc"

using namespace mlir;

namespace {

struct OffloadPass : public impl::OffloadPassBase<OffloadPass> {
  using OffloadPassBase::OffloadPassBase;

  void runOnOperation() override;
};

void OffloadPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (!params && !optimizer && !activations) {
    return;
  }
  if (bucketBytes < 1) {
    module.emitError() << "tailor-offload: bucket-bytes must be positive, got "
                       << static_cast<int64_t>(bucketBytes);
    return signalPassFailure();
  }
  ZeroOptions options;
  if (params && !module.lookupSymbol<func::FuncOp>(options.trainFunction)) {
    module.emitError() << "tailor-offload: no function @"
                       << options.trainFunction
                       << ": offload places a training step's tensors "
                          "(compile with a recipe)";
    return signalPassFailure();
  }
  for (tg::BucketOp bucket : module.getOps<tg::BucketOp>()) {
    if (params && bucket.getShardedParams()) {
      bucket.emitError() << "tailor-offload: parameters offloaded and "
                            "sharded (zero3 with offload_param) is not built "
                            "yet; use zero_stage 2 or below with offload";
      return signalPassFailure();
    }
  }
  options.hostFrozen = true;
  options.shards = 1;
  options.bucketBytes = bucketBytes;
  // The forward's copy dies with the forward; backward copies again.
  options.reshardAfterForward = true;
  if (params && failed(offloadFrozenParams(module, options))) {
    return signalPassFailure();
  }
  if (optimizer && failed(offloadOptimizer(module, options))) {
    return signalPassFailure();
  }
  if (activations &&
      failed(offloadActivations(module, options, activationMinBytes))) {
    signalPassFailure();
  }
}

} // namespace

} // namespace tailor::parallel
