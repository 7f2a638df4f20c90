//===- QuantizeGathers.cpp - ZeRO++'s int8 weight gathers (qwZ) -----------===//
//
// tailor-quantize-gathers (Passes.td): ZeRO-3's gathers of float weights
// send int8 blocks (runtime/quant/WireInt8.h) and are decoded where the
// gather stood, so the weights every rank computes with are the decoded
// ones, the same on every rank.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGQuant.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tailor::parallel {

#define GEN_PASS_DEF_QUANTIZEGATHERSPASS
#include "passes/parallel/Passes.h.inc"

using namespace mlir;

namespace {

struct QuantizeGathersPass
    : public impl::QuantizeGathersPassBase<QuantizeGathersPass> {
  using QuantizeGathersPassBase::QuantizeGathersPassBase;

  void runOnOperation() override;
};

/// Whether `bucket`'s gathers can go int8 over the wire: sharded f32
/// parameters on the device, chunks of whole blocks.
bool quantizable(tg::BucketOp bucket) {
  return bucket.getElementType().isF32() && bucket.getShardedParams() &&
         !bucket.getHost() && bucket.getChunkElements() % tg::kWireBlock == 0;
}

/// `gather` sends int8; a tg.dequantize_gathered after it takes its uses.
void quantize(tg::GatherBucketOp gather, tg::BucketOp bucket) {
  OpBuilder builder(gather.getContext());
  Value floats = gather.getResult();
  auto floatType = floats.getType();
  int64_t chunk = bucket.getChunkElements();
  auto shards = static_cast<int64_t>(bucket.getShards());
  auto wireType = RankedTensorType::get(
      {shards * tg::int8WireBytes(chunk)},
      builder.getIntegerType(8, /*isSigned=*/false));
  gather.setWireAttr(builder.getStringAttr("int8"));
  floats.setType(wireType);
  builder.setInsertionPointAfter(gather);
  auto decoded = tg::DequantizeGatheredOp::create(
      builder, gather.getLoc(), floatType, floats,
      builder.getI64IntegerAttr(chunk), builder.getI64IntegerAttr(shards));
  if (Attribute layer = gather->getAttr(tg::TGDialect::kLayerAttrName)) {
    decoded->setAttr(tg::TGDialect::kLayerAttrName, layer);
  }
  floats.replaceAllUsesExcept(decoded.getResult(), decoded);
}

void QuantizeGathersPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (format != "int8") {
    module.emitError() << "tailor-quantize-gathers: format must be int8, got '"
                       << format << "'";
    return signalPassFailure();
  }
  SymbolTable symbols(module);
  SmallVector<std::pair<tg::GatherBucketOp, tg::BucketOp>> gathers;
  WalkResult walk = module.walk([&](tg::GatherBucketOp gather) {
    auto bucket = symbols.lookup<tg::BucketOp>(gather.getBucket());
    if (!bucket) {
      gather.emitError() << gather.getBucketAttr()
                         << " does not name a tg.bucket";
      return WalkResult::interrupt();
    }
    if (!gather.getWire() && quantizable(bucket)) {
      gathers.push_back({gather, bucket});
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted()) {
    return signalPassFailure();
  }
  for (auto [gather, bucket] : gathers) {
    quantize(gather, bucket);
  }
  // The decision, beside the sharding's (tg.parallel), for inspection.
  auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel");
  if (!gathers.empty() && parallel) {
    NamedAttrList entries(parallel);
    entries.set("quantized_gathers",
                StringAttr::get(module.getContext(), format));
    module->setAttr("tg.parallel",
                    entries.getDictionary(module.getContext()));
  }
}

} // namespace

} // namespace tailor::parallel
