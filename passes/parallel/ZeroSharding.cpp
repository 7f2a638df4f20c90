//===- ZeroSharding.cpp - ZeRO-1/2: optimizer state in chunks --------------===//
//
// DeepSpeed's ZeRO stages 1 and 2 as a rewrite of the one logical training
// step. Trainable parameters are grouped, in the order backward finishes
// their gradients, into buckets whose members lie flat in one space cut
// into one chunk per rank (tg.bucket). Per bucket:
//   - stage 1: optimizer_step packs the whole accumulated gradients flat,
//     reduce-scatters them (average) into the bucket's chunk accumulator
//     and zeroes them;
//   - stage 2: train_step packs each micro-batch's gradients flat as soon
//     as the bucket's last one exists and reduce-scatters them into the
//     chunk accumulator, so whole gradients never outlive the bucket;
//   - one update runs on this rank's chunk with chunk-sized moments, and
//     tg.all_gather_bucket gives every rank the updated parameters;
//   - stage 3 keeps no whole parameters at all (ZeroStage3.cpp): functions
//     read them from a tg.gather_bucket made right before their first read
//     (and again before backward), through tg.bucket_member views, and the
//     update writes the chunk, which nothing gathers afterwards.
// The gradient norm for clipping is the square root of the sum, over
// ranks, of each rank's chunk's squared norm. Hybrid sharding cuts the
// buckets over the ranks of each node and keeps one replica per node: the
// chunk gradients are then also averaged across nodes before the update.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/ZeroRewriter.h"

#include "dialects/tg/TGQuant.h"
#include "dialects/tg/TGShapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"

namespace tailor::parallel {

using namespace mlir;
using namespace detail;

namespace {

/// The attributes naming an update's parameter and states: everything
/// else about two updates must agree for one update to run on a bucket.
constexpr StringLiteral kSymbolAttrs[] = {"param", "grad", "exp_avg",
                                          "exp_avg_sq", "momentum_buffer"};

bool isSymbolAttr(StringRef name) {
  return llvm::is_contained(kSymbolAttrs, name);
}

/// Whether `a` and `b` are the same update but for what they update.
bool sameUpdate(Operation *a, Operation *b) {
  if (a->getName() != b->getName() || a->getOperands() != b->getOperands()) {
    return false;
  }
  for (NamedAttribute attr : a->getAttrs()) {
    if (!isSymbolAttr(attr.getName()) &&
        b->getAttr(attr.getName()) != attr.getValue()) {
      return false;
    }
  }
  return a->getAttrs().size() == b->getAttrs().size();
}

} // namespace


LogicalResult ZeroRewriter::collectMembers(SmallVectorImpl<Member> &members) {
  llvm::StringMap<Operation *> updates;
  optimizer.walk([&](Operation *op) {
    if (llvm::isa<tg::AdamWUpdateOp, tg::SGDUpdateOp>(op)) {
      updates[llvm::cast<FlatSymbolRefAttr>(op->getAttr("param")).getValue()] =
          op;
    }
  });
  // Names to symbols once: a scan of the module per lookup is quadratic.
  SymbolTable symbols(module);
  for (tg::StateOp state : module.getOps<tg::StateOp>()) {
    if (state.getKind() != tg::StateKind::Grad) {
      continue;
    }
    Member member;
    member.grad = state;
    member.param = symbols.lookup<tg::ParamOp>(state.getParameter());
    member.update = updates.lookup(state.getParameter());
    if (!member.param || !member.update) {
      return state.emitError()
             << "tailor-shard: zero" << options.stage << " needs an update of @"
             << state.getParameter() << " in @" << options.optimizerFunction;
    }
    if (llvm::cast<FlatSymbolRefAttr>(member.update->getAttr("grad"))
            .getValue() != state.getSymName()) {
      return member.update->emitError()
             << "tailor-shard: the update of @" << state.getParameter()
             << " does not read its gradient @" << state.getSymName();
    }
    for (StringRef kind : {"exp_avg", "exp_avg_sq", "momentum_buffer"}) {
      if (auto name = member.update->getAttrOfType<FlatSymbolRefAttr>(kind)) {
        member.moments.push_back(symbols.lookup<tg::StateOp>(name.getAttr()));
      }
    }
    member.numel = tg::numElements(state.getTensorType().getShape());
    member.flatType = member.param.getTensorType();
    members.push_back(member);
  }
  if (members.empty()) {
    return module.emitError() << "tailor-shard: nothing trains (no gradient "
                                 "states) to shard over ranks";
  }
  return success();
}

/// Buckets are filled from the last declared gradient back (backward
/// finishes the last layers first); a bucket holds one element type, one
/// kind of update with the same hyperparameters, and at most bucketBytes
/// (a larger parameter is a bucket alone). Members are laid out with their
/// offsets rounded up to kZeroAlignElements, and the space to a whole
/// number of aligned chunks.
void ZeroRewriter::formBuckets(ArrayRef<Member> members) {
  int64_t filled = 0;
  for (Member member : llvm::reverse(members)) {
    Type element = member.grad.getTensorType().getElementType();
    int64_t bytes = tg::byteSize(member.grad.getTensorType());
    bool fits = false;
    if (!buckets.empty()) {
      Member &first = buckets.back().members.front();
      fits = first.grad.getTensorType().getElementType() == element &&
             sameUpdate(first.update, member.update) &&
             filled + bytes <= options.bucketBytes;
    }
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().members.push_back(member);
    filled += bytes;
  }
  for (Bucket &bucket : buckets) {
    layOut(bucket);
  }
}

void ZeroRewriter::layOut(Bucket &bucket) const {
  int64_t end = 0;
  for (Member &member : bucket.members) {
    member.offset = llvm::alignTo(end, kZeroAlignElements);
    end = member.offset + member.numel;
  }
  int64_t chunk = llvm::alignTo(llvm::divideCeil(end, options.shards),
                                kZeroAlignElements);
  bucket.size = chunk * options.shards;
}

void ZeroRewriter::declareBuckets() {
  builder.setInsertionPoint(train ? train.getOperation()
                                  : optimizer.getOperation());
  for (auto [index, bucket] : llvm::enumerate(buckets)) {
    std::string name = "zero.b" + std::to_string(index);
    SmallVector<Attribute> members;
    SmallVector<int64_t> offsets;
    for (Member &member : bucket.members) {
      members.push_back(FlatSymbolRefAttr::get(member.param.getSymNameAttr()));
      offsets.push_back(member.offset);
    }
    Type element = bucket.members.front().grad.getTensorType().getElementType();
    Location loc = bucket.members.front().grad.getLoc();
    bucket.op = tg::BucketOp::create(
        builder, loc, name, builder.getArrayAttr(members), offsets,
        static_cast<uint64_t>(bucket.size), options.group,
        static_cast<uint64_t>(options.shards), element, options.stage >= 3);
    RankedTensorType chunk = bucket.op.getChunkType();
    bucket.grad = tg::StateOp::create(builder, loc, name + ".grad", chunk, name,
                                      tg::StateKind::Grad);
    for (tg::StateOp moment : bucket.members.front().moments) {
      bucket.moments.push_back(tg::StateOp::create(
          builder, loc,
          name + "." + tg::stringifyStateKind(moment.getKind()).str(), chunk,
          name, moment.getKind()));
    }
  }
}

void ZeroRewriter::reduceScatterInto(Bucket &bucket, ArrayRef<Value> values,
                                     Location loc) {
  Type element = bucket.op.getElementType();
  auto zeros = [&](int64_t count) -> Value {
    auto type = RankedTensorType::get({count}, element);
    return arith::ConstantOp::create(
        builder, loc, type,
        DenseElementsAttr::get(type, builder.getZeroAttr(element)));
  };
  SmallVector<Value> pieces;
  int64_t end = 0;
  for (auto [member, value] : llvm::zip(bucket.members, values)) {
    if (member.offset > end) {
      pieces.push_back(zeros(member.offset - end));
    }
    auto flatType = RankedTensorType::get({member.numel}, element);
    pieces.push_back(value.getType() == flatType
                         ? value
                         : tg::ReshapeOp::create(builder, loc, flatType, value)
                               .getResult());
    end = member.offset + member.numel;
  }
  if (bucket.size > end) {
    pieces.push_back(zeros(bucket.size - end));
  }
  Value flat = tg::ConcatOp::create(
      builder, loc, RankedTensorType::get({bucket.size}, element), pieces, 0);
  Value chunk = tg::ReduceScatterOp::create(
      builder, loc, bucket.op.getChunkType(), flat, tg::CommReduction::Avg,
      options.group, options.shards);
  tg::AccumulateOp::create(builder, loc, bucket.grad.getSymName(), chunk);
}

/// Stage 1: whole gradients accumulate over the micro-batches as with DDP;
/// optimizer_step starts by reduce-scattering each bucket into its chunk
/// accumulator and zeroing the whole ones.
LogicalResult ZeroRewriter::rewriteStageOne() {
  Block &body = optimizer.getBody().front();
  builder.setInsertionPointToStart(&body);
  for (Bucket &bucket : buckets) {
    Location loc = bucket.op.getLoc();
    SmallVector<Value> grads;
    SmallVector<Attribute> names;
    for (Member &member : bucket.members) {
      grads.push_back(tg::StateRefOp::create(builder, loc,
                                             member.grad.getTensorType(),
                                             member.grad.getSymName()));
      names.push_back(FlatSymbolRefAttr::get(member.grad.getSymNameAttr()));
    }
    reduceScatterInto(bucket, grads, loc);
    tg::ZeroStatesOp::create(builder, loc, builder.getArrayAttr(names));
  }
  return success();
}

/// Stage 2: each micro-batch's gradients of a bucket are reduce-scattered
/// right after the last of them is produced, instead of being accumulated
/// whole. Right after the producer, not where autodiff put the
/// accumulation (the end of the step): a collective keeps its place in
/// the schedule, so there every whole gradient of the step would be alive
/// at once (24.6 GiB of activations for a 7B full fine-tune).
LogicalResult ZeroRewriter::rewriteStageTwo() {
  if (!train) {
    return module.emitError() << "tailor-shard: zero2 needs @"
                              << options.trainFunction;
  }
  llvm::StringMap<tg::AccumulateOp> accumulates;
  WalkResult walk = train.walk([&](tg::AccumulateOp op) {
    if (!accumulates.try_emplace(op.getTarget(), op).second) {
      op.emitError() << "tailor-shard: zero2 expects one accumulation of @"
                     << op.getTarget() << " per micro-batch";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted()) {
    return failure();
  }
  Block &body = train.getBody().front();
  for (Bucket &bucket : buckets) {
    SmallVector<Value> values;
    Operation *last = nullptr;
    for (Member &member : bucket.members) {
      tg::AccumulateOp op = accumulates.lookup(member.grad.getSymName());
      if (!op || op->getBlock() != &body) {
        return member.grad.emitError()
               << "tailor-shard: zero2 needs the accumulation of @"
               << member.grad.getSymName() << " in @" << options.trainFunction;
      }
      values.push_back(op.getValue());
      Operation *producer = op.getValue().getDefiningOp();
      if (producer) {
        producer = body.findAncestorOpInBlock(*producer);
      }
      if (producer && (!last || last->isBeforeInBlock(producer))) {
        last = producer;
      }
    }
    if (last) {
      builder.setInsertionPointAfter(last);
    } else {
      builder.setInsertionPointToStart(&body);
    }
    reduceScatterInto(bucket, values, bucket.op.getLoc());
    for (Member &member : bucket.members) {
      accumulates.lookup(member.grad.getSymName()).erase();
    }
  }
  return success();
}

/// Every tg.global_norm of the optimizer step over the whole gradients
/// becomes: this rank's chunks' norm, squared, summed over the ranks, and
/// its square root.
LogicalResult ZeroRewriter::rewriteGlobalNorms() {
  llvm::DenseSet<StringRef> memberGrads;
  for (Bucket &bucket : buckets) {
    for (Member &member : bucket.members) {
      memberGrads.insert(member.grad.getSymName());
    }
  }
  SmallVector<tg::GlobalNormOp> norms;
  optimizer.walk([&](tg::GlobalNormOp op) { norms.push_back(op); });
  for (tg::GlobalNormOp norm : norms) {
    for (Value input : norm.getInputs()) {
      auto ref = input.getDefiningOp<tg::StateRefOp>();
      if (!ref || !memberGrads.contains(ref.getName())) {
        return norm.emitError() << "tailor-shard: a gradient norm over "
                                   "something else than the gradients cannot "
                                   "be sharded";
      }
    }
    if (norm.getInputs().size() != memberGrads.size()) {
      return norm.emitError() << "tailor-shard: a gradient norm over some of "
                                 "the gradients cannot be sharded";
    }
    builder.setInsertionPoint(norm);
    Location loc = norm.getLoc();
    SmallVector<Value> chunks;
    for (Bucket &bucket : buckets) {
      chunks.push_back(tg::StateRefOp::create(builder, loc,
                                              bucket.grad.getTensorType(),
                                              bucket.grad.getSymName()));
    }
    Type scalar = norm.getResult().getType();
    Value local = tg::GlobalNormOp::create(builder, loc, scalar, chunks);
    Value square = tg::MulOp::create(builder, loc, scalar, local, local);
    // The chunks of one shard group (a node, with replicas) are the whole.
    Value total = tg::AllReduceOp::create(builder, loc, square,
                                          tg::CommReduction::Sum, options.group);
    Value root = tg::SqrtOp::create(builder, loc, scalar, total);
    SmallVector<Operation *> refs;
    for (Value input : norm.getInputs()) {
      refs.push_back(input.getDefiningOp());
    }
    norm.getResult().replaceAllUsesWith(root);
    norm.erase();
    for (Operation *ref : refs) {
      if (ref->use_empty()) {
        ref->erase();
      }
    }
  }
  return success();
}

void ZeroRewriter::averageReplicas() {
  if (options.replicas <= 1) {
    return;
  }
  Block &body = optimizer.getBody().front();
  // After stage 1's reduce-scatters, which open the optimizer step.
  Operation *after = nullptr;
  for (Operation &op : body) {
    if (llvm::isa<tg::ZeroStatesOp>(op)) {
      after = &op;
    }
  }
  if (after) {
    builder.setInsertionPointAfter(after);
  } else {
    builder.setInsertionPointToStart(&body);
  }
  for (Bucket &bucket : buckets) {
    tg::AllReduceStatesOp::create(
        builder, bucket.op.getLoc(),
        builder.getArrayAttr(
            {FlatSymbolRefAttr::get(bucket.grad.getSymNameAttr())}),
        tg::CommReduction::Avg, tg::CommGroup::CrossNode);
  }
}

/// One update per bucket, on this rank's chunk, where the bucket's last
/// member was updated; then the chunks are gathered.
void ZeroRewriter::rewriteUpdates() {
  for (Bucket &bucket : buckets) {
    Operation *last = bucket.members.front().update;
    for (Member &member : bucket.members) {
      if (last->isBeforeInBlock(member.update)) {
        last = member.update;
      }
    }
    builder.setInsertionPointAfter(last);
    Operation *update = builder.clone(*last);
    update->setAttr("param", FlatSymbolRefAttr::get(bucket.op.getSymNameAttr()));
    update->setAttr("grad", FlatSymbolRefAttr::get(bucket.grad.getSymNameAttr()));
    for (tg::StateOp moment : bucket.moments) {
      update->setAttr(tg::stringifyStateKind(moment.getKind()),
                      FlatSymbolRefAttr::get(moment.getSymNameAttr()));
    }
    if (options.stage < 3) {
      tg::AllGatherBucketOp::create(builder, update->getLoc(),
                                    bucket.op.getSymName());
    }
    for (Member &member : bucket.members) {
      member.update->erase();
    }
  }
}

/// The members' moments (and, with stage 2, whole gradients) are now
/// unused; anything still naming them is an op this rewrite does not know.
LogicalResult ZeroRewriter::eraseMemberStates() {
  // Every symbol use in the module, found in one walk (a walk per state
  // would be quadratic in the parameters).
  DenseMap<StringAttr, Operation *> firstUser;
  if (std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(&module.getBodyRegion())) {
    for (const SymbolTable::SymbolUse &use : *uses) {
      firstUser.try_emplace(use.getSymbolRef().getRootReference(),
                            use.getUser());
    }
  }
  for (Bucket &bucket : buckets) {
    for (Member &member : bucket.members) {
      SmallVector<tg::StateOp> states(member.moments);
      if (options.stage >= 2) {
        states.push_back(member.grad);
      }
      for (tg::StateOp state : states) {
        if (Operation *user = firstUser.lookup(state.getSymNameAttr())) {
          return user->emitError()
                 << "tailor-shard: zero" << options.stage << " shards @"
                 << state.getSymName() << ", which this op still uses";
        }
        state.erase();
      }
    }
  }
  return success();
}

LogicalResult ZeroRewriter::run() {
  train = module.lookupSymbol<func::FuncOp>(options.trainFunction);
  optimizer = module.lookupSymbol<func::FuncOp>(options.optimizerFunction);
  if (!optimizer) {
    return module.emitError() << "tailor-shard: no function @"
                              << options.optimizerFunction
                              << ": sharding needs a training step (compile "
                                 "with a recipe)";
  }
  SmallVector<Member> members;
  if (failed(collectMembers(members))) {
    return failure();
  }
  formBuckets(members);
  declareBuckets();
  if (failed(options.stage >= 2 ? rewriteStageTwo() : rewriteStageOne())) {
    return failure();
  }
  averageReplicas();
  if (failed(rewriteGlobalNorms())) {
    return failure();
  }
  rewriteUpdates();
  if (options.stage >= 3 && !options.deferParamReads) {
    if (failed(formFrozenBuckets())) {
      return failure();
    }
    for (func::FuncOp function : {train, optimizer,
                                  module.lookupSymbol<func::FuncOp>(
                                      options.evalFunction)}) {
      if (function && failed(rewriteParamReads(function))) {
        return failure();
      }
    }
  }
  return eraseMemberStates();
}

LogicalResult shardOptimizerState(ModuleOp module, const ZeroOptions &options) {
  return ZeroRewriter(module, options).run();
}

} // namespace tailor::parallel
