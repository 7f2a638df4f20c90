//===- ZeroStage3.cpp - ZeRO-3: parameters kept as chunks, gathered to read --===//
//
// With stage 3 a rank keeps only its chunk of every parameter: trainable
// ones in the gradient buckets, frozen ones (LoRA's base weights; a
// quantized weight as its stored bytes) in buckets of their own. Each
// function reads a bucket's members through tg.bucket_member views of a
// tg.gather_bucket made right before its first read, and again for the
// reads from the loss gradient on (reshard-after-forward), so the
// forward's gather dies with the forward.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/ZeroRewriter.h"

#include "dialects/tg/TGQuant.h"
#include "dialects/tg/TGShapes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <array>
#include <optional>

namespace tailor::parallel::detail {

/// The transformer layer of the first op that reads each parameter in
/// `function` (tg.layer; absent where the reader carries none).
static llvm::StringMap<int64_t> readerLayers(func::FuncOp function) {
  llvm::StringMap<int64_t> layers;
  if (!function) {
    return layers;
  }
  auto note = [&](StringRef name, Operation *reader) {
    if (auto layer = reader->getAttrOfType<IntegerAttr>(
            tg::TGDialect::kLayerAttrName)) {
      layers.try_emplace(name, layer.getInt());
    }
  };
  function.walk([&](Operation *op) {
    if (auto ref = llvm::dyn_cast<tg::ParamRefOp>(op)) {
      for (Operation *user : ref->getUsers()) {
        note(ref.getName(), user);
      }
    } else if (auto dequantize = llvm::dyn_cast<tg::DequantizeOp>(op)) {
      note(dequantize.getName(), op);
    }
  });
  return layers;
}

LogicalResult ZeroRewriter::formFrozenBuckets() {
  llvm::DenseSet<StringRef> read;
  for (func::FuncOp function :
       {train, module.lookupSymbol<func::FuncOp>(options.evalFunction)}) {
    if (!function) {
      continue;
    }
    function.walk([&](Operation *op) {
      if (auto ref = llvm::dyn_cast<tg::ParamRefOp>(op)) {
        read.insert(ref.getName());
      } else if (auto dequantize = llvm::dyn_cast<tg::DequantizeOp>(op)) {
        read.insert(dequantize.getName());
      }
    });
  }
  // A bucket never spans two transformer layers, so a gather (or an
  // offload's copy) brings one layer's weights at most.
  llvm::StringMap<int64_t> layers = readerLayers(train);
  std::optional<int64_t> bucketLayer;
  int64_t filled = 0;
  for (tg::ParamOp param : module.getOps<tg::ParamOp>()) {
    if (param.getTrainable() || !read.contains(param.getSymName())) {
      continue;
    }
    Member member;
    member.param = param;
    member.flatType = param.getTensorType();
    if (DictionaryAttr quant = param.getQuantAttr()) {
      FailureOr<RankedTensorType> bytes = tg::quantizedStorageType(
          quant, [&] { return param.emitError() << "tailor-shard: "; });
      if (failed(bytes)) {
        return failure();
      }
      member.flatType = *bytes;
    }
    member.numel = tg::numElements(member.flatType.getShape());
    int64_t bytes = tg::byteSize(member.flatType);
    Type element = member.flatType.getElementType();
    std::optional<int64_t> layer;
    if (auto it = layers.find(param.getSymName()); it != layers.end()) {
      layer = it->second;
    }
    if (frozenBuckets.empty() ||
        frozenBuckets.back().members.front().flatType.getElementType() !=
            element ||
        filled + bytes > options.bucketBytes || layer != bucketLayer) {
      frozenBuckets.emplace_back();
      filled = 0;
      bucketLayer = layer;
    }
    frozenBuckets.back().members.push_back(member);
    filled += bytes;
  }
  builder.setInsertionPoint(train ? train.getOperation()
                                  : optimizer.getOperation());
  for (auto [index, bucket] : llvm::enumerate(frozenBuckets)) {
    layOut(bucket);
    SmallVector<Attribute> members;
    SmallVector<int64_t> offsets;
    for (Member &member : bucket.members) {
      members.push_back(FlatSymbolRefAttr::get(member.param.getSymNameAttr()));
      offsets.push_back(member.offset);
    }
    bucket.op = tg::BucketOp::create(
        builder, bucket.members.front().param.getLoc(),
        (options.hostFrozen ? "offload.f" : "zero.f") + std::to_string(index),
        builder.getArrayAttr(members), offsets,
        static_cast<uint64_t>(bucket.size), options.group,
        static_cast<uint64_t>(options.shards),
        bucket.members.front().flatType.getElementType(), true,
        options.hostFrozen);
  }
  return success();
}

void ZeroRewriter::gatherForReads(Bucket &bucket,
                                  ArrayRef<Operation *> readers) {
  Operation *first = readers.front();
  for (Operation *reader : readers) {
    if (reader->isBeforeInBlock(first)) {
      first = reader;
    }
  }
  builder.setInsertionPoint(first);
  Location loc = first->getLoc();
  Value flat = tg::GatherBucketOp::create(
      builder, loc,
      RankedTensorType::get({bucket.size}, bucket.op.getElementType()),
      bucket.op.getSymName(), /*wire=*/nullptr);
  llvm::StringMap<Value> views;
  for (Member &member : bucket.members) {
    views[member.param.getSymName()] = tg::BucketMemberOp::create(
        builder, loc, member.flatType, flat,
        static_cast<uint64_t>(member.offset));
  }
  for (Operation *reader : readers) {
    if (auto dequantize = llvm::dyn_cast<tg::DequantizeOp>(reader)) {
      dequantize.getStorageMutable().assign(views.lookup(dequantize.getName()));
      continue;
    }
    for (OpOperand &use : reader->getOpOperands()) {
      auto ref = use.get().getDefiningOp<tg::ParamRefOp>();
      if (ref && views.count(ref.getName())) {
        use.set(views.lookup(ref.getName()));
      }
    }
  }
}

/// The first of `uses`' owners in block order.
static Operation *firstOwner(ArrayRef<OpOperand *> uses) {
  Operation *first = uses.front()->getOwner();
  for (OpOperand *use : uses) {
    if (use->getOwner()->isBeforeInBlock(first)) {
      first = use->getOwner();
    }
  }
  return first;
}

/// Each tg.dequantize of `body` moves right before its first reader (the
/// quantize pass makes them at the top), and with `split` one read both
/// before and from `backward` on gets a clone for the later reads: a
/// gather (or an offload's copy) then serves each segment and dies with it.
static void placeDequantizes(Block &body, Operation *backward, bool split) {
  SmallVector<tg::DequantizeOp> dequantizes(body.getOps<tg::DequantizeOp>());
  for (tg::DequantizeOp dequantize : dequantizes) {
    SmallVector<OpOperand *> early, late;
    for (OpOperand &use : dequantize->getUses()) {
      Operation *user = body.findAncestorOpInBlock(*use.getOwner());
      bool isLate = split && backward && user &&
                    (user == backward || backward->isBeforeInBlock(user));
      if (!user) {
        continue; // not in this function's block: left where it is
      }
      (isLate ? late : early).push_back(&use);
    }
    if (early.empty() && late.empty()) {
      continue;
    }
    if (!early.empty() && !late.empty()) {
      Operation *at = body.findAncestorOpInBlock(*firstOwner(late));
      OpBuilder builder(at);
      Operation *clone = builder.clone(*dequantize);
      for (OpOperand *use : late) {
        use->set(clone->getResult(0));
      }
    }
    SmallVector<OpOperand *> &own = early.empty() ? late : early;
    dequantize->moveBefore(body.findAncestorOpInBlock(*firstOwner(own)));
  }
}

/// Reads from the loss gradient on are backward's; with
/// reshard-after-forward they get a gather of their own, so the forward's
/// dies with the forward.
LogicalResult ZeroRewriter::rewriteParamReads(func::FuncOp function) {
  Block &body = function.getBody().front();
  Operation *backward = nullptr;
  for (Operation &op : body) {
    if (llvm::isa<tg::CrossEntropyGradOp>(op)) {
      backward = &op;
      break;
    }
  }
  placeDequantizes(body, backward, options.reshardAfterForward);
  SmallVector<Bucket *> all;
  for (std::vector<Bucket> *list : {&buckets, &frozenBuckets}) {
    for (Bucket &bucket : *list) {
      all.push_back(&bucket);
    }
  }
  llvm::StringMap<unsigned> bucketOf;
  for (auto [index, bucket] : llvm::enumerate(all)) {
    for (Member &member : bucket->members) {
      bucketOf[member.param.getSymName()] = index;
    }
  }
  // Per bucket, the ops reading members in the forward and the backward
  // (param_ref users, and dequantizes of quantized members).
  std::vector<std::array<llvm::SetVector<Operation *>, 2>> reads(all.size());
  auto addRead = [&](unsigned bucket, Operation *reader) {
    bool late = options.reshardAfterForward && backward &&
                (reader == backward || backward->isBeforeInBlock(reader));
    reads[bucket][late ? 1 : 0].insert(reader);
  };
  SmallVector<tg::ParamRefOp> refs;
  for (Operation &op : body) {
    if (auto dequantize = llvm::dyn_cast<tg::DequantizeOp>(op)) {
      auto it = bucketOf.find(dequantize.getName());
      if (it != bucketOf.end()) {
        addRead(it->second, &op);
      }
      continue;
    }
    auto ref = llvm::dyn_cast<tg::ParamRefOp>(op);
    auto it = ref ? bucketOf.find(ref.getName()) : bucketOf.end();
    if (it == bucketOf.end()) {
      continue;
    }
    refs.push_back(ref);
    for (Operation *user : ref->getUsers()) {
      if (user->getBlock() != &body) {
        return user->emitError() << "tailor-shard: zero3 reads @"
                                 << ref.getName() << " inside a region";
      }
      addRead(it->second, user);
    }
  }
  for (auto [bucket, segments] : llvm::zip(all, reads)) {
    for (llvm::SetVector<Operation *> &readers : segments) {
      if (!readers.empty()) {
        gatherForReads(*bucket, readers.getArrayRef());
      }
    }
  }
  for (tg::ParamRefOp ref : refs) {
    ref.erase();
  }
  return success();
}

LogicalResult ZeroRewriter::gatherDeferred() {
  train = module.lookupSymbol<func::FuncOp>(options.trainFunction);
  optimizer = module.lookupSymbol<func::FuncOp>(options.optimizerFunction);
  for (tg::BucketOp op : module.getOps<tg::BucketOp>()) {
    if (!op.getShardedParams() || op.getHost()) {
      continue;
    }
    Bucket bucket;
    bucket.op = op;
    bucket.size = static_cast<int64_t>(op.getSize());
    for (auto [name, offset] : llvm::zip(op.getMembers(), op.getOffsets())) {
      Member member;
      member.param = module.lookupSymbol<tg::ParamOp>(
          llvm::cast<FlatSymbolRefAttr>(name).getAttr());
      if (!member.param) {
        return op.emitError() << name << " does not name a tg.param";
      }
      member.flatType = member.param.getTensorType();
      member.numel = tg::numElements(member.flatType.getShape());
      member.offset = offset;
      bucket.members.push_back(member);
    }
    buckets.push_back(std::move(bucket));
  }
  if (failed(formFrozenBuckets())) {
    return failure();
  }
  for (func::FuncOp function :
       {train, optimizer, module.lookupSymbol<func::FuncOp>(
                              options.evalFunction)}) {
    if (function && failed(rewriteParamReads(function))) {
      return failure();
    }
  }
  return success();
}

LogicalResult ZeroRewriter::offloadFrozen() {
  train = module.lookupSymbol<func::FuncOp>(options.trainFunction);
  optimizer = module.lookupSymbol<func::FuncOp>(options.optimizerFunction);
  if (failed(formFrozenBuckets())) {
    return failure();
  }
  for (func::FuncOp function :
       {train, module.lookupSymbol<func::FuncOp>(options.evalFunction)}) {
    if (function && failed(rewriteParamReads(function))) {
      return failure();
    }
  }
  return success();
}

} // namespace tailor::parallel::detail

namespace tailor::parallel {

mlir::LogicalResult gatherShardedParams(mlir::ModuleOp module,
                                        const ZeroOptions &options) {
  return detail::ZeroRewriter(module, options).gatherDeferred();
}

mlir::LogicalResult offloadFrozenParams(mlir::ModuleOp module,
                                        const ZeroOptions &options) {
  return detail::ZeroRewriter(module, options).offloadFrozen();
}

} // namespace tailor::parallel
