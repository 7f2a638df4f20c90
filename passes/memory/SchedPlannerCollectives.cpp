//===- SchedPlannerCollectives.cpp - state updates and collectives ---------===//

#include "passes/memory/SchedPlanner.h"

#include "dialects/tg/TGPartitionOps.h"
#include "dialects/tg/TGQuant.h"

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

/// Whether `a` and `b` are the same view of the same root.
static bool sameAccess(const Access &a, const Access &b) {
  return a.root == b.root && a.type == b.type && a.rankStride == b.rankStride &&
         a.rankPeriod == b.rankPeriod && a.byteOffset == b.byteOffset;
}

/// Folds the AdamW update `next` into `last`, the launch planned just
/// before it, when `last` is an AdamW update with the same attributes and
/// the same lr, step and grad_scale: an optimizer step's consecutive
/// updates become one adamw_multi launch (param, grad, exp_avg, exp_avg_sq
/// per parameter, then the scalars), which computes each parameter's
/// update exactly as adamw does (issue 20: one launch, not one per
/// trainable tensor). Returns false, leaving both alone, otherwise.
static bool joinAdamW(PlannedLaunch &last, PlannedLaunch &&next) {
  if (last.collective || last.copy || last.host != next.host ||
      (last.choice.kernel != "adamw" && last.choice.kernel != "adamw_multi") ||
      last.choice.attributes.getAttrs() != next.choice.attributes.getAttrs()) {
    return false;
  }
  size_t scalars = last.operands.size() - 3;
  for (size_t i = 0; i < 3; ++i) {
    if (!sameAccess(last.operands[scalars + i], next.operands[4 + i])) {
      return false;
    }
  }
  last.operands.insert(last.operands.begin() + scalars, next.operands.begin(),
                       next.operands.begin() + 4);
  last.choice.kernel = "adamw_multi";
  last.choice.arity = -1;
  last.origin = "tg.adamw_update (" +
                std::to_string(last.operands.size() / 4) + " parameters)";
  return true;
}

LogicalResult SchedPlanner::planStateUpdate(ModuleOp module, Operation &op,
                                                const Fusions &fusions,
                                                PlannedEntry &entry,
                                                int64_t step) {
  MLIRContext *context = module.getContext();
  if (auto accumulate = llvm::dyn_cast<tg::AccumulateOp>(op)) {
    Operation *producer = accumulate.getValue().getDefiningOp();
    auto inPlace = fusions.accumulatedInPlace.find(producer);
    if (inPlace != fusions.accumulatedInPlace.end() &&
        inPlace->second == accumulate) {
      return success();
    }
    FailureOr<unsigned> target =
        stateRoot(module, &op, accumulate.getTargetAttr());
    if (failed(target) || failed(useAt(accumulate.getValue(), step))) {
      return op.emitError() << "cannot plan this accumulation";
    }
    entry.launches.push_back(launchOf(
        &op, "accumulate", 2,
        {accessOf(accumulate.getValue()), whole(*target)}));
    return success();
  }
  if (auto adamw = llvm::dyn_cast<tg::AdamWUpdateOp>(op)) {
    SmallVector<Access> operands;
    for (FlatSymbolRefAttr name : {adamw.getGradAttr(), adamw.getExpAvgAttr(),
                                   adamw.getExpAvgSqAttr()}) {
      FailureOr<unsigned> root = stateRoot(module, &op, name);
      if (failed(root)) {
        return failure();
      }
      operands.push_back(whole(*root));
    }
    FailureOr<Access> param = updatedParam(module, &op, adamw.getParamAttr());
    if (failed(param)) {
      return failure();
    }
    operands.insert(operands.begin(), *param);
    for (Value scalar : {adamw.getLr(), adamw.getStep(), adamw.getGradScale()}) {
      if (failed(useAt(scalar, step))) {
        return op.emitError() << "operand defined outside the planned function";
      }
      operands.push_back(accessOf(scalar));
    }
    PlannedLaunch launch = launchOf(&op, "adamw", 7, operands);
    if (op.hasAttr(tg::TGDialect::kHostAttrName) &&
        failed(runOnHost(launch))) {
      return failure();
    }
    launch.choice.attributes.set("beta1", f64AttrOf(context, adamw.getBeta1()));
    launch.choice.attributes.set("beta2", f64AttrOf(context, adamw.getBeta2()));
    launch.choice.attributes.set("epsilon",
                                 f64AttrOf(context, adamw.getEpsilon()));
    launch.choice.attributes.set("weight_decay",
                                 f64AttrOf(context, adamw.getWeightDecay()));
    launch.origin = "tg.adamw_update " + adamw.getParam().str();
    if (entry.launches.empty() ||
        !joinAdamW(entry.launches.back(), std::move(launch))) {
      entry.launches.push_back(std::move(launch));
    }
    return success();
  }
  auto sgd = llvm::cast<tg::SGDUpdateOp>(op);
  FailureOr<Access> param = updatedParam(module, &op, sgd.getParamAttr());
  FailureOr<unsigned> grad = stateRoot(module, &op, sgd.getGradAttr());
  // Without momentum the kernel neither reads nor writes its buffer
  // operand, and there is no buffer: the gradient stands in for it.
  FailureOr<unsigned> buffer =
      sgd.getMomentumBufferAttr()
          ? stateRoot(module, &op, sgd.getMomentumBufferAttr())
          : grad;
  if (failed(param) || failed(grad) || failed(buffer)) {
    return failure();
  }
  if (failed(useAt(sgd.getLr(), step)) ||
      failed(useAt(sgd.getGradScale(), step))) {
    return op.emitError() << "operand defined outside the planned function";
  }
  PlannedLaunch launch = launchOf(
      &op, "sgd", 5,
      {*param, whole(*grad), whole(*buffer), accessOf(sgd.getLr()),
       accessOf(sgd.getGradScale())});
  launch.choice.attributes.set("momentum",
                               f64AttrOf(context, sgd.getMomentum()));
  launch.choice.attributes.set("weight_decay",
                               f64AttrOf(context, sgd.getWeightDecay()));
  launch.choice.attributes.set("nesterov",
                               i64AttrOf(context, sgd.getNesterov() ? 1 : 0));
  launch.origin = "tg.sgd_update " + sgd.getParam().str();
  entry.launches.push_back(std::move(launch));
  return success();
}

/// The sched reduction of a tg collective.
static sched::Reduction schedReduction(tg::CommReduction reduction) {
  return reduction == tg::CommReduction::Avg ? sched::Reduction::Avg
                                             : sched::Reduction::Sum;
}

LogicalResult SchedPlanner::placeBuckets(ModuleOp module) {
  WalkResult walk = module.walk([&](tg::AllReduceStatesOp reduce) {
    for (Attribute name : reduce.getStates()) {
      if (failed(stateRoot(module, reduce,
                           llvm::cast<FlatSymbolRefAttr>(name)))) {
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult SchedPlanner::planAllReduce(ModuleOp module,
                                              tg::AllReduceStatesOp op,
                                              PlannedEntry &entry) {
  PlannedLaunch launch;
  launch.op = op;
  PlannedCollective collective;
  collective.kind = sched::CollectiveKind::AllReduce;
  collective.reduction = schedReduction(op.getReduction());
  collective.group = op.getGroup();
  collective.overlap = op->hasAttr(tg::TGDialect::kOverlapAttrName);
  launch.collective = collective;
  for (Attribute name : op.getStates()) {
    FailureOr<unsigned> root =
        stateRoot(module, op, llvm::cast<FlatSymbolRefAttr>(name));
    if (failed(root)) {
      return failure();
    }
    launch.operands.push_back(whole(*root));
  }
  launch.origin = "tg.all_reduce_states (" +
                  std::to_string(op.getStates().size()) + " gradients)";
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult SchedPlanner::placeShardBuckets(ModuleOp module) {
  for (tg::BucketOp bucket : module.getOps<tg::BucketOp>()) {
    // ZeRO-3 keeps one chunk; otherwise (an offloaded host bucket too:
    // one shard, every rank's own) the whole flat space.
    bool chunked = bucket.getShardedParams() && !bucket.getHost();
    MemRefType flatType =
        chunked ? memrefFor(bucket.getChunkType())
                : MemRefType::get({static_cast<int64_t>(bucket.getSize())},
                                  bucket.getElementType());
    Root flat = makeRoot(Home::Param, flatType);
    flat.bucket = bucket;
    flat.host = bucket.getHost();
    unsigned index = newRoot(std::move(flat));
    bucketRoots[bucket.getSymName()] = index;
    int64_t elementBytes = tg::byteSize(
        RankedTensorType::get({1}, bucket.getElementType()));
    for (auto [name, offset] :
         llvm::zip(bucket.getMembers(), bucket.getOffsets())) {
      FailureOr<unsigned> member =
          paramRoot(module, bucket, llvm::cast<FlatSymbolRefAttr>(name));
      if (failed(member)) {
        return failure();
      }
      Root &root = roots[*member];
      if (root.within) {
        return bucket.emitError() << name << " is in two buckets";
      }
      root.within = index;
      root.host = bucket.getHost();
      if (chunked) {
        // Its bytes are this rank's chunk, which all members share.
        root.type = flatType;
        root.bytes = storageBytes(flatType);
        root.shardOf = bucket;
        root.shardOffset = offset;
      } else {
        root.withinOffset = static_cast<uint64_t>(offset * elementBytes);
      }
    }
  }
  return success();
}

Access SchedPlanner::chunkOf(tg::BucketOp bucket) {
  RankedTensorType chunk = bucket.getChunkType();
  Access access{bucketRoots.lookup(bucket.getSymName()), memrefFor(chunk)};
  if (bucket.getShardedParams()) {
    return access; // the root is the chunk
  }
  access.rankStride = tg::byteSize(chunk);
  access.rankPeriod =
      bucket.getGroup() == tg::CommGroup::Node ? ranksPerNode : 0;
  return access;
}

FailureOr<Access> SchedPlanner::updatedParam(ModuleOp module,
                                                 Operation *update,
                                                 FlatSymbolRefAttr name) {
  if (auto bucket = symbols.lookupSymbolIn<tg::BucketOp>(module, name)) {
    return chunkOf(bucket);
  }
  FailureOr<unsigned> root =
      symbols.lookupSymbolIn<tg::StateOp>(module, name)
          ? stateRoot(module, update, name)
          : paramRoot(module, update, name);
  if (failed(root)) {
    return failure();
  }
  return whole(*root);
}

LogicalResult SchedPlanner::planValueCollective(
    Operation &op, Value input, Value result, PlannedCollective collective,
    PlannedEntry &entry, int64_t step) {
  if (failed(useAt(input, step))) {
    return op.emitError() << "operand defined outside the planned function";
  }
  Root root = makeRoot(Home::Activation, memrefFor(result.getType()));
  root.first = root.last = step;
  rootOf[result] = newRoot(std::move(root));
  PlannedLaunch launch;
  launch.op = &op;
  launch.origin = originOf(&op);
  collective.inPlace = false;
  collective.overlap = op.hasAttr(tg::TGDialect::kOverlapAttrName);
  launch.collective = collective;
  launch.operands = {accessOf(input), accessOf(result)};
  entry.launches.push_back(std::move(launch));
  return success();
}

/// A reducing collective of `kind` over `group`.
static PlannedCollective reducing(sched::CollectiveKind kind,
                                  tg::CommReduction reduction,
                                  tg::CommGroup group) {
  PlannedCollective collective;
  collective.kind = kind;
  collective.reduction = schedReduction(reduction);
  collective.group = group;
  return collective;
}

LogicalResult SchedPlanner::planShardOp(ModuleOp module, Operation &op,
                                            PlannedEntry &entry, int64_t step) {
  if (auto scatter = llvm::dyn_cast<tg::ReduceScatterOp>(op)) {
    return planValueCollective(
        op, scatter.getInput(), scatter.getResult(),
        reducing(sched::CollectiveKind::ReduceScatter,
                 scatter.getReduction(), scatter.getGroup()),
        entry, step);
  }
  if (auto reduce = llvm::dyn_cast<tg::AllReduceOp>(op)) {
    return planValueCollective(
        op, reduce.getInput(), reduce.getResult(),
        reducing(sched::CollectiveKind::AllReduce, reduce.getReduction(),
                 reduce.getGroup()),
        entry, step);
  }
  if (auto gather = llvm::dyn_cast<tg::AllGatherBucketOp>(op)) {
    auto bucket =
        symbols.lookupSymbolIn<tg::BucketOp>(module, gather.getBucketAttr());
    if (!bucket) {
      return op.emitError() << gather.getBucketAttr()
                            << " does not name a tg.bucket";
    }
    PlannedLaunch launch;
    launch.op = &op;
    launch.origin = originOf(&op);
    PlannedCollective collective;
    collective.kind = sched::CollectiveKind::AllGather;
    collective.group = bucket.getGroup();
    collective.inPlace = false;
    launch.collective = collective;
    Access chunk = chunkOf(bucket);
    launch.operands = {chunk, whole(chunk.root)};
    entry.launches.push_back(std::move(launch));
    return success();
  }
  if (auto gather = llvm::dyn_cast<tg::GatherBucketOp>(op)) {
    auto bucket =
        symbols.lookupSymbolIn<tg::BucketOp>(module, gather.getBucketAttr());
    if (!bucket || !bucket.getShardedParams()) {
      return op.emitError() << gather.getBucketAttr()
                            << " is not a tg.bucket of sharded parameters";
    }
    Root root = makeRoot(Home::Activation, memrefFor(gather.getType()));
    root.first = root.last = step;
    rootOf[gather.getResult()] = newRoot(std::move(root));
    PlannedLaunch launch;
    launch.op = &op;
    launch.origin = originOf(&op);
    if (bucket.getHost()) {
      // Offloaded: the whole bucket, copied to the device.
      PlannedCopy copy;
      copy.kind = sched::CopyKind::HostToDevice;
      copy.overlap = op.hasAttr(tg::TGDialect::kOverlapAttrName);
      launch.copy = copy;
      launch.operands = {whole(bucketRoots.lookup(bucket.getSymName())),
                         accessOf(gather.getResult())};
      entry.launches.push_back(std::move(launch));
      return success();
    }
    if (gather.getWire()) {
      return planWireGather(gather, bucket, entry, step);
    }
    PlannedCollective collective;
    collective.kind = sched::CollectiveKind::AllGather;
    collective.group = bucket.getGroup();
    collective.inPlace = false;
    collective.overlap = op.hasAttr(tg::TGDialect::kOverlapAttrName);
    launch.collective = collective;
    launch.operands = {chunkOf(bucket), accessOf(gather.getResult())};
    entry.launches.push_back(std::move(launch));
    return success();
  }
  if (auto decode = llvm::dyn_cast<tg::DequantizeGatheredOp>(op)) {
    return planDequantizeGathered(decode, entry, step);
  }
  if (auto encode = llvm::dyn_cast<tg::QuantizeChunksOp>(op)) {
    return planQuantizeChunks(encode, entry, step);
  }
  if (auto exchange = llvm::dyn_cast<tg::AllToAllOp>(op)) {
    PlannedCollective collective;
    collective.kind = sched::CollectiveKind::AllToAll;
    collective.group = exchange.getGroup();
    return planValueCollective(op, exchange.getInput(), exchange.getResult(),
                               collective, entry, step);
  }
  if (auto reduce = llvm::dyn_cast<tg::DequantizeReduceOp>(op)) {
    return planDequantizeReduce(reduce, entry, step);
  }
  if (auto member = llvm::dyn_cast<tg::BucketMemberOp>(op)) {
    // A view into the gathered bucket; it extends the gather's life.
    std::optional<unsigned> input = findRoot(member.getInput());
    if (!input) {
      return failure();
    }
    auto inputType = llvm::cast<RankedTensorType>(member.getInput().getType());
    rootOf[member.getResult()] = *input;
    viewOffsets[member.getResult()] =
        viewOffsets.lookup(member.getInput()) +
        static_cast<int64_t>(member.getOffset()) *
            tg::byteSize(RankedTensorType::get({1}, inputType.getElementType()));
    touch(member.getInput(), step);
    return success();
  }
  auto zero = llvm::cast<tg::ZeroStatesOp>(op);
  for (Attribute name : zero.getStates()) {
    FailureOr<unsigned> root =
        stateRoot(module, &op, llvm::cast<FlatSymbolRefAttr>(name));
    if (failed(root)) {
      return failure();
    }
    entry.launches.push_back(launchOf(&op, "zero", 1, {whole(*root)}));
  }
  return success();
}

LogicalResult SchedPlanner::runOnHost(PlannedLaunch &launch) {
  for (const Access &operand : launch.operands) {
    if (!roots[operand.root].host) {
      return launch.op->emitError()
             << "internal error: a host update reads an operand in device "
                "memory (every operand of a tg.host update must be a host "
                "state or a tg.to_host value)";
    }
  }
  if (launch.choice.workspaceBytes > 0) {
    return launch.op->emitError()
           << "internal error: a host launch cannot use the device workspace";
  }
  launch.host = true;
  return success();
}

LogicalResult SchedPlanner::planCopyState(ModuleOp module, tg::CopyStateOp op,
                                          PlannedEntry &entry) {
  // A bucket (ZeRO) is copied as the chunk its update writes.
  SmallVector<Access, 2> operands;
  for (FlatSymbolRefAttr name : {op.getSourceAttr(), op.getTargetAttr()}) {
    FailureOr<Access> access = updatedParam(module, op, name);
    if (failed(access)) {
      return failure();
    }
    operands.push_back(*access);
  }
  bool fromHost = roots[operands[0].root].host;
  if (fromHost == roots[operands[1].root].host) {
    return op.emitError() << "internal error: a copy within one memory";
  }
  PlannedLaunch launch;
  launch.op = op;
  launch.origin = originOf(op) + " " + op.getTarget().str();
  launch.operands.assign(operands.begin(), operands.end());
  PlannedCopy copy;
  copy.kind = fromHost ? sched::CopyKind::HostToDevice
                       : sched::CopyKind::DeviceToHost;
  copy.overlap = op->hasAttr(tg::TGDialect::kOverlapAttrName);
  launch.copy = copy;
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult SchedPlanner::planMove(Operation *op, bool toHost,
                                     PlannedEntry &entry, int64_t step) {
  Value input = op->getOperand(0), result = op->getResult(0);
  if (failed(useAt(input, step))) {
    return op->emitError() << "operand defined outside the planned function";
  }
  if (roots[*findRoot(input)].host == toHost) {
    return op->emitError() << "internal error: the value is already in "
                           << (toHost ? "host" : "device") << " memory";
  }
  Root root = makeRoot(Home::Activation, memrefFor(result.getType()));
  root.host = toHost;
  root.first = root.last = step;
  rootOf[result] = newRoot(std::move(root));
  PlannedLaunch launch;
  launch.op = op;
  launch.origin = originOf(op);
  launch.operands = {accessOf(input), accessOf(result)};
  PlannedCopy copy;
  copy.kind = toHost ? sched::CopyKind::DeviceToHost
                     : sched::CopyKind::HostToDevice;
  copy.overlap = op->hasAttr(tg::TGDialect::kOverlapAttrName);
  launch.copy = copy;
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult SchedPlanner::planWireGather(tg::GatherBucketOp gather,
                                           tg::BucketOp bucket,
                                           PlannedEntry &entry, int64_t step) {
  Operation *op = gather.getOperation();
  // This rank's chunk, encoded where the gather is issued (the compute
  // stream), into a staging buffer the gather reads.
  int64_t chunk = bucket.getChunkElements();
  auto wireChunk = RankedTensorType::get(
      {tg::int8WireBytes(chunk)},
      IntegerType::get(gather.getContext(), 8, IntegerType::Unsigned));
  Root staged = makeRoot(Home::Activation, memrefFor(wireChunk));
  staged.first = staged.last = step;
  unsigned stagedRoot = newRoot(std::move(staged));
  PlannedLaunch encode =
      launchOf(op, "quantize_wire_int8", 2, {chunkOf(bucket), whole(stagedRoot)});
  // A pass for the block maxima, one to scale and round (what the cost
  // model's elementwise rate prices); the chunk read twice.
  encode.flops = 3.0 * double(chunk);
  encode.bytes = 8.0 * double(chunk) + double(tg::int8WireBytes(chunk));
  encode.workCounted = true;
  entry.launches.push_back(std::move(encode));
  PlannedLaunch launch;
  launch.op = op;
  launch.origin = originOf(op);
  PlannedCollective collective;
  collective.kind = sched::CollectiveKind::AllGather;
  collective.group = bucket.getGroup();
  collective.inPlace = false;
  collective.overlap = op->hasAttr(tg::TGDialect::kOverlapAttrName);
  launch.collective = collective;
  launch.operands = {whole(stagedRoot), accessOf(gather.getResult())};
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult SchedPlanner::planDequantizeGathered(
    tg::DequantizeGatheredOp decode, PlannedEntry &entry, int64_t step) {
  if (failed(useAt(decode.getInput(), step))) {
    return decode.emitError() << "its input has no planned buffer";
  }
  Root root = makeRoot(Home::Activation, memrefFor(decode.getType()));
  root.first = root.last = step;
  rootOf[decode.getResult()] = newRoot(std::move(root));
  PlannedLaunch launch =
      launchOf(decode.getOperation(), "dequantize_wire_int8", 2,
               {accessOf(decode.getInput()), accessOf(decode.getResult())});
  launch.choice.attributes.set(
      "chunk", IntegerAttr::get(IntegerType::get(decode.getContext(), 64),
                                static_cast<int64_t>(decode.getChunk())));
  double elements = double(decode.getShards() * decode.getChunk());
  launch.flops = elements;
  launch.bytes = double(tg::int8WireBytes(static_cast<int64_t>(
                     decode.getChunk()))) *
                     double(decode.getShards()) +
                 4.0 * elements;
  launch.workCounted = true;
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult SchedPlanner::planQuantizeChunks(tg::QuantizeChunksOp encode,
                                               PlannedEntry &entry,
                                               int64_t step) {
  if (failed(useAt(encode.getInput(), step))) {
    return encode.emitError() << "its input has no planned buffer";
  }
  // The staging buffer of every rank's wire chunk, exactly their bytes;
  // it lives until the all-to-all has read it.
  Root staged = makeRoot(Home::Activation, memrefFor(encode.getType()));
  staged.first = staged.last = step;
  rootOf[encode.getResult()] = newRoot(std::move(staged));
  // The format's own kernel (quantize_wire_int8 or quantize_wire_int4);
  // the verifier has read the format's name.
  PlannedLaunch launch = launchOf(
      encode.getOperation(), ("quantize_wire_" + encode.getFormat()).str(), 2,
      {accessOf(encode.getInput()), accessOf(encode.getResult())});
  auto chunk = static_cast<int64_t>(encode.getChunk());
  tg::WireFormat format = *tg::wireFormatNamed(encode.getFormat());
  launch.choice.attributes.set(
      "chunk",
      IntegerAttr::get(IntegerType::get(encode.getContext(), 64), chunk));
  // As qwZ's encode: a pass for the block maxima, one to scale and round;
  // the wire chunks written once, in the format's bytes.
  double elements = double(chunk) * double(encode.getShards());
  launch.flops = 3.0 * elements;
  launch.bytes = 8.0 * elements + double(tg::wireBytes(format, chunk)) *
                                      double(encode.getShards());
  launch.workCounted = true;
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult SchedPlanner::planDequantizeReduce(tg::DequantizeReduceOp reduce,
                                                 PlannedEntry &entry,
                                                 int64_t step) {
  if (failed(useAt(reduce.getInput(), step))) {
    return reduce.emitError() << "its input has no planned buffer";
  }
  Root root = makeRoot(Home::Activation, memrefFor(reduce.getType()));
  root.first = root.last = step;
  rootOf[reduce.getResult()] = newRoot(std::move(root));
  PlannedLaunch launch = launchOf(
      reduce.getOperation(),
      ("dequantize_reduce_wire_" + reduce.getFormat()).str(), 2,
      {accessOf(reduce.getInput()), accessOf(reduce.getResult())});
  auto chunk = static_cast<int64_t>(reduce.getChunk());
  tg::WireFormat format = *tg::wireFormatNamed(reduce.getFormat());
  auto i64 = IntegerType::get(reduce.getContext(), 64);
  launch.choice.attributes.set("chunk", IntegerAttr::get(i64, chunk));
  launch.choice.attributes.set(
      "average",
      IntegerAttr::get(
          i64, reduce.getReduction() == tg::CommReduction::Avg ? 1 : 0));
  // A multiply-add per received element; the wire chunks read once, the
  // sums read and written per rank (in cache for a bucket's chunk).
  double shards = double(reduce.getShards());
  launch.flops = 2.0 * double(chunk) * shards;
  launch.bytes =
      double(tg::wireBytes(format, chunk)) * shards + 8.0 * double(chunk);
  launch.workCounted = true;
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult SchedPlanner::planPartitionOp(Operation &op, PlannedEntry &entry,
                                            int64_t step) {
  if (auto gather = llvm::dyn_cast<tg::GatherPartitionOp>(op)) {
    PlannedCollective collective;
    collective.kind = sched::CollectiveKind::AllGather;
    collective.group = tg::CommGroup::Node;
    if (static_cast<int64_t>(gather.getShards()) != ranksPerNode) {
      return op.emitError() << "tg.gather_partition over " << gather.getShards()
                            << " ranks, but a node has " << ranksPerNode;
    }
    return planValueCollective(op, gather.getInput(), gather.getResult(),
                               collective, entry, step);
  }
  auto part = llvm::cast<tg::SecondaryPartitionOp>(op);
  if (static_cast<int64_t>(part.getShards()) != ranksPerNode) {
    return op.emitError() << "tg.secondary_partition of " << part.getShards()
                          << " parts, but a node has " << ranksPerNode
                          << " ranks";
  }
  if (failed(useAt(part.getInput(), step))) {
    return op.emitError() << "its input has no planned buffer";
  }
  // The part this rank's position in the node owns: a rank view of the
  // gathered bucket (rank mod ranks-per-node), copied into a buffer of its
  // own that lives until the backward's gather reads it.
  Access source = accessOf(part.getInput());
  if (source.byteOffset != 0 || source.rankStride != 0) {
    return op.emitError() << "internal error: the gathered bucket is a view";
  }
  MemRefType partType = memrefFor(part.getType());
  source.type = partType;
  source.rankStride = static_cast<int64_t>(storageBytes(partType));
  source.rankPeriod = ranksPerNode;
  Root root = makeRoot(Home::Activation, partType);
  root.first = root.last = step;
  rootOf[part.getResult()] = newRoot(std::move(root));
  PlannedLaunch launch =
      launchOf(&op, "copy", 2, {source, accessOf(part.getResult())});
  launch.bytes = 2.0 * double(storageBytes(partType));
  launch.workCounted = true;
  entry.launches.push_back(std::move(launch));
  return success();
}
