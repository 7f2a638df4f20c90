//===- QuantizeReductions.cpp - ZeRO++'s quantized gradient reduce-scatter ===//
//
// tailor-quantize-reductions (Passes.td): ZeRO's gradient reduce-scatters
// send int8 or int4 blocks (runtime/quant/Wire.h) through an all-to-all,
// and each rank reduces the chunks it receives in f32 (DeepSpeed ZeRO++'s
// qgZ). An all-to-all rather than a ring: a ring reduce-scatter would
// decode, add and encode again at every hop, compounding the rounding.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGQuant.h"

#include "mlir/IR/Builders.h"

namespace tailor::parallel {

#define GEN_PASS_DEF_QUANTIZEREDUCTIONSPASS
#include "passes/parallel/Passes.h.inc"

using namespace mlir;

namespace {

struct QuantizeReductionsPass
    : public impl::QuantizeReductionsPassBase<QuantizeReductionsPass> {
  using QuantizeReductionsPassBase::QuantizeReductionsPassBase;

  void runOnOperation() override;
};

/// Why `scatter` cannot be quantized on the wire ("" when it can): an f32
/// reduce-scatter whose chunks are whole blocks of 64 (ZeRO's buckets are
/// cut so), reducing by sum or average.
std::string unquantizable(tg::ReduceScatterOp scatter) {
  auto result = llvm::cast<RankedTensorType>(scatter.getResult().getType());
  if (!result.getElementType().isF32()) {
    return "its elements are not f32";
  }
  if (result.getDimSize(0) % tg::kWireBlock != 0) {
    return "its chunk of " + std::to_string(result.getDimSize(0)) +
           " elements is not whole blocks of " +
           std::to_string(tg::kWireBlock);
  }
  return "";
}

/// `scatter` becomes: its input encoded chunk by chunk, an all-to-all of
/// the wire chunks over its group, and the received chunks decoded and
/// reduced into what the reduce-scatter gave, all in `format`.
void quantize(tg::ReduceScatterOp scatter, tg::WireFormat format) {
  OpBuilder builder(scatter);
  Location loc = scatter.getLoc();
  int64_t chunk =
      llvm::cast<RankedTensorType>(scatter.getResult().getType()).getDimSize(0);
  auto shards = static_cast<int64_t>(scatter.getShards());
  auto wireType =
      RankedTensorType::get({shards * tg::wireBytes(format, chunk)},
                            builder.getIntegerType(8, /*isSigned=*/false));
  auto chunkAttr = builder.getI64IntegerAttr(chunk);
  auto shardsAttr = builder.getI64IntegerAttr(shards);
  auto formatAttr = builder.getStringAttr(tg::wireFormatName(format));
  auto encoded =
      tg::QuantizeChunksOp::create(builder, loc, wireType, scatter.getInput(),
                                   chunkAttr, shardsAttr, formatAttr);
  auto exchanged = tg::AllToAllOp::create(
      builder, loc, encoded.getResult(), scatter.getGroupAttr(), shardsAttr);
  auto reduced = tg::DequantizeReduceOp::create(
      builder, loc, scatter.getResult().getType(), exchanged.getResult(),
      scatter.getReductionAttr(), chunkAttr, shardsAttr, formatAttr);
  for (Operation *op : std::initializer_list<Operation *>{
           encoded.getOperation(), exchanged.getOperation(),
           reduced.getOperation()}) {
    if (Attribute layer = scatter->getAttr(tg::TGDialect::kLayerAttrName)) {
      op->setAttr(tg::TGDialect::kLayerAttrName, layer);
    }
  }
  scatter.getResult().replaceAllUsesWith(reduced.getResult());
  scatter.erase();
}

void QuantizeReductionsPass::runOnOperation() {
  ModuleOp module = getOperation();
  std::optional<tg::WireFormat> wire = tg::wireFormatNamed(format);
  if (!wire) {
    module.emitError() << "tailor-quantize-reductions: format must be "
                       << tg::kWireFormatNames << ", got '" << format
                       << "'";
    return signalPassFailure();
  }
  SmallVector<tg::ReduceScatterOp> scatters;
  WalkResult walk = module.walk([&](tg::ReduceScatterOp scatter) {
    if (std::string why = unquantizable(scatter); !why.empty()) {
      scatter.emitError() << "tailor-quantize-reductions: cannot send this "
                             "reduce-scatter as "
                          << format << ": " << why;
      return WalkResult::interrupt();
    }
    scatters.push_back(scatter);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted()) {
    return signalPassFailure();
  }
  if (scatters.empty()) {
    module.emitError() << "tailor-quantize-reductions: no gradient "
                          "reduce-scatter to quantize (it needs ZeRO-2 or "
                          "ZeRO-3's, from tailor-shard)";
    return signalPassFailure();
  }
  for (tg::ReduceScatterOp scatter : scatters) {
    quantize(scatter, *wire);
  }
  // The decision, beside the sharding's (tg.parallel), for inspection.
  if (auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel")) {
    NamedAttrList entries(parallel);
    entries.set("quantized_reductions",
                StringAttr::get(module.getContext(), format));
    module->setAttr("tg.parallel",
                    entries.getDictionary(module.getContext()));
  }
}

} // namespace

} // namespace tailor::parallel
