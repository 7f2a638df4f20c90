//===- TGPartitionOps.cpp - verifiers of ZeRO++'s hpZ ops ----------------===//

#include "dialects/tg/TGPartitionOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace tailor::tg;

/// Checks that `part` is one of `shards` equal parts of the 1-D `whole`.
static LogicalResult expectPart(Operation *op, RankedTensorType part,
                                RankedTensorType whole, uint64_t shards) {
  if (shards == 0) {
    return op->emitOpError() << "expected shards >= 1, got 0";
  }
  if (whole.getRank() != 1 || part.getRank() != 1 ||
      whole.isDynamicDim(0) || part.isDynamicDim(0)) {
    return op->emitOpError() << "expected static 1-D tensors, got " << part
                             << " and " << whole;
  }
  if (part.getElementType() != whole.getElementType() ||
      whole.getDimSize(0) % static_cast<int64_t>(shards) != 0 ||
      part.getDimSize(0) * static_cast<int64_t>(shards) !=
          whole.getDimSize(0)) {
    return op->emitOpError()
           << "expected the part to be 1/" << shards << " of " << whole
           << ", got " << part;
  }
  return success();
}

LogicalResult SecondaryPartitionOp::verify() {
  return expectPart(*this, llvm::cast<RankedTensorType>(getType()),
                    llvm::cast<RankedTensorType>(getInput().getType()),
                    getShards());
}

LogicalResult GatherPartitionOp::verify() {
  return expectPart(*this, llvm::cast<RankedTensorType>(getInput().getType()),
                    llvm::cast<RankedTensorType>(getType()), getShards());
}

LogicalResult
GatherPartitionOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto bucket =
      symbols.lookupNearestSymbolFrom<BucketOp>(*this, getBucketAttr());
  if (!bucket) {
    return emitOpError() << getBucketAttr() << " does not name a tg.bucket";
  }
  if (!bucket.getShardedParams() || bucket.getHost()) {
    return emitOpError() << "expected a device bucket of sharded parameters, "
                            "got "
                         << getBucketAttr();
  }
  auto whole = RankedTensorType::get(
      {static_cast<int64_t>(bucket.getSize())}, bucket.getElementType());
  if (getType() != whole) {
    return emitOpError() << "expected " << whole << " (" << getBucketAttr()
                         << " flat), got " << getType();
  }
  if (bucket.getShards() % getShards() != 0) {
    return emitOpError() << "expected shards to divide " << getBucketAttr()
                         << "'s " << bucket.getShards() << ", got "
                         << getShards();
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/tg/TGPartitionOps.cpp.inc"
