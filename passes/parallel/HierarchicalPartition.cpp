//===- HierarchicalPartition.cpp - ZeRO++'s hierarchical partitions (hpZ) -===//
//
// tailor-hierarchical-partition (Passes.td): after a ZeRO-3 bucket's
// forward gather over the world, each rank keeps the part of the bucket
// that its position in the node owns (tg.secondary_partition), and the
// backward's gather of the bucket becomes an all-gather of those parts
// within the node (tg.gather_partition): no byte of it crosses a node, at
// the cost of size / ranks-per-node elements per bucket kept from forward
// to backward.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGPartitionOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/MapVector.h"

namespace tailor::parallel {

#define GEN_PASS_DEF_HIERARCHICALPARTITIONPASS
#include "passes/parallel/Passes.h.inc"

using namespace mlir;

namespace {

struct HierarchicalPartitionPass
    : public impl::HierarchicalPartitionPassBase<HierarchicalPartitionPass> {
  using HierarchicalPartitionPassBase::HierarchicalPartitionPassBase;

  void runOnOperation() override;

private:
  LogicalResult checkSize(ModuleOp module);
  LogicalResult partition(func::FuncOp step);
};

/// The first op of `value`'s block that reads it, through tg.bucket_member
/// views too (the views themselves are not reads); null if none.
Operation *firstRead(Value value) {
  Operation *first = nullptr;
  for (Operation *user : value.getUsers()) {
    Operation *at = llvm::isa<tg::BucketMemberOp>(user)
                        ? firstRead(user->getResult(0))
                        : user;
    if (at && (!first || at->isBeforeInBlock(first))) {
      first = at;
    }
  }
  return first;
}

LogicalResult HierarchicalPartitionPass::checkSize(ModuleOp module) {
  auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel");
  auto strategy =
      parallel ? parallel.getAs<StringAttr>("strategy") : StringAttr();
  if (!strategy || strategy.getValue() != "zero3") {
    return module.emitError()
           << "tailor-hierarchical-partition: hpZ partitions ZeRO-3's "
              "gathered parameters, but the module's sharding (tg.parallel) "
              "is "
           << (strategy ? strategy.getValue() : StringRef("none"));
  }
  int64_t world = parallel.getAs<IntegerAttr>("world_size").getInt();
  auto perNode = parallel.getAs<IntegerAttr>("ranks_per_node");
  int64_t ranksPerNode = perNode ? perNode.getInt() : world;
  int64_t size = partitionSize;
  if (size < 1 || world % size != 0) {
    return module.emitError()
           << "tailor-hierarchical-partition: partition-size "
              "(zero_hpz_partition_size) "
           << size << " does not divide the world size " << world;
  }
  if (size != ranksPerNode) {
    return module.emitError()
           << "tailor-hierarchical-partition: partition-size "
              "(zero_hpz_partition_size) "
           << size << " must equal the ranks per node ("
           << ranksPerNode
           << "): the secondary partitions are gathered within a node";
  }
  return success();
}

LogicalResult HierarchicalPartitionPass::partition(func::FuncOp step) {
  SymbolTable symbols(step->getParentOfType<ModuleOp>());
  // Each device bucket of sharded parameters' gathers, in block order.
  llvm::MapVector<tg::BucketOp, SmallVector<tg::GatherBucketOp, 2>> gathers;
  for (auto gather : step.getBody().front().getOps<tg::GatherBucketOp>()) {
    auto bucket = symbols.lookup<tg::BucketOp>(gather.getBucket());
    if (!bucket) {
      return gather.emitError() << gather.getBucketAttr()
                                << " does not name a tg.bucket";
    }
    if (!bucket.getShardedParams() || bucket.getHost()) {
      continue;
    }
    if (gather.getWire()) {
      return gather.emitError()
             << "tailor-hierarchical-partition: this gather of "
             << gather.getBucketAttr()
             << " is quantized already; run before tailor-quantize-gathers, "
                "which then quantizes the forward's gather only";
    }
    gathers[bucket].push_back(gather);
  }
  for (auto &[bucket, pair] : gathers) {
    if (pair.size() == 1) {
      continue; // read in one pass only: nothing is gathered again
    }
    if (pair.size() != 2) {
      return pair[2].emitError()
             << "tailor-hierarchical-partition: expected a forward and a "
                "backward gather of "
             << pair[0].getBucketAttr() << ", got " << pair.size();
    }
    tg::GatherBucketOp forward = pair[0], backward = pair[1];
    Value full = forward.getResult();
    auto fullType = llvm::cast<RankedTensorType>(full.getType());
    auto partType = RankedTensorType::get(
        {fullType.getDimSize(0) / partitionSize}, fullType.getElementType());
    // Kept where compute first reads the bucket, so prefetching still
    // issues the next gather there, not right after this one.
    Operation *at = firstRead(full);
    OpBuilder builder(at ? at : forward->getNextNode());
    auto part = tg::SecondaryPartitionOp::create(
        builder, forward.getLoc(), partType, full,
        builder.getI64IntegerAttr(partitionSize));
    builder.setInsertionPoint(backward);
    auto regathered = tg::GatherPartitionOp::create(
        builder, backward.getLoc(), fullType, part.getResult(),
        backward.getBucketAttr(), builder.getI64IntegerAttr(partitionSize));
    for (auto [op, from] :
         {std::pair(part.getOperation(), forward.getOperation()),
          std::pair(regathered.getOperation(), backward.getOperation())}) {
      if (Attribute layer = from->getAttr(tg::TGDialect::kLayerAttrName)) {
        op->setAttr(tg::TGDialect::kLayerAttrName, layer);
      }
    }
    backward.getResult().replaceAllUsesWith(regathered.getResult());
    backward.erase();
  }
  return success();
}

void HierarchicalPartitionPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (partitionSize == 1) {
    return; // DeepSpeed's default: no secondary partition
  }
  if (failed(checkSize(module))) {
    return signalPassFailure();
  }
  // The decision, beside the sharding's, before anything is rewritten.
  auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel");
  NamedAttrList entries(parallel);
  entries.set("hpz_partition_size",
              IntegerAttr::get(IntegerType::get(module.getContext(), 64),
                               partitionSize));
  module->setAttr("tg.parallel",
                  entries.getDictionary(module.getContext()));
  auto step = module.lookupSymbol<func::FuncOp>(function);
  if (!step) {
    module.emitError() << "tailor-hierarchical-partition: no function @"
                       << function;
    return signalPassFailure();
  }
  if (failed(partition(step))) {
    signalPassFailure();
  }
}

} // namespace

} // namespace tailor::parallel
