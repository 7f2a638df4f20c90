//===- ZeroRewriter.h - the ZeRO rewrite's state, shared by its files -*- C++ -*-===//
//
// Private to passes/parallel: ZeroSharding.cpp (buckets, stages 1 and 2,
// the update) and ZeroStage3.cpp (sharded parameters and their gathers)
// both implement ZeroRewriter.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_PARALLEL_ZEROREWRITER_H
#define TAILOR_PASSES_PARALLEL_ZEROREWRITER_H

#include "passes/parallel/ZeroSharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <vector>

namespace tailor::parallel::detail {

using namespace mlir;

/// One trainable parameter's part in the step.
struct Member {
  tg::ParamOp param;
  tg::StateOp grad;
  /// Its tg.adamw_update or tg.sgd_update in optimizer_step.
  Operation *update = nullptr;
  /// The update's other states (exp_avg, exp_avg_sq / momentum_buffer).
  SmallVector<tg::StateOp> moments;
  int64_t numel = 0;
  int64_t offset = 0;
  /// What a read of it in the bucket is: the parameter's tensor, or a
  /// quantized parameter's stored bytes (1-D ui8).
  RankedTensorType flatType;
};

struct Bucket {
  SmallVector<Member> members;
  int64_t size = 0;
  tg::BucketOp op;
  /// This rank's chunk of the members' gradients, then of each moment (in
  /// the members' moment order).
  tg::StateOp grad;
  SmallVector<tg::StateOp> moments;
};

class ZeroRewriter {
public:
  ZeroRewriter(ModuleOp module, const ZeroOptions &options)
      : module(module), options(options), builder(module.getContext()) {}

  LogicalResult run();
  /// Offload (`ZeroOptions::hostFrozen`): the frozen parameters the step
  /// reads go whole into host buckets (`offload.fN`), read through a
  /// gather (a copy to the device) before the forward's and again before
  /// the backward's reads; nothing else changes.
  LogicalResult offloadFrozen();
  /// Stage 3's reads, after `run` with `deferParamReads`: the trainable
  /// buckets are taken back from the module's tg.bucket ops.
  LogicalResult gatherDeferred();

private:
  LogicalResult collectMembers(SmallVectorImpl<Member> &members);
  void formBuckets(ArrayRef<Member> members);
  void declareBuckets();
  /// Stage 3: the frozen parameters the step reads (LoRA's base weights;
  /// quantized ones as their stored bytes), in buckets of their own that
  /// are only ever gathered.
  LogicalResult formFrozenBuckets();
  /// Lays a bucket's members out and sizes it.
  void layOut(Bucket &bucket) const;
  /// Packs `values` (one per member, in bucket order) flat with zero
  /// padding, reduce-scatters them and adds the chunk into the bucket's
  /// gradient accumulator, at the builder's insertion point.
  void reduceScatterInto(Bucket &bucket, ArrayRef<Value> values, Location loc);
  LogicalResult rewriteStageOne();
  LogicalResult rewriteStageTwo();
  LogicalResult rewriteGlobalNorms();
  /// Hybrid: averages each chunk accumulator over the nodes' replicas at
  /// the start of the optimizer step.
  void averageReplicas();
  void rewriteUpdates();
  /// Stage 3: the reads of members' values in `function`.
  LogicalResult rewriteParamReads(func::FuncOp function);
  /// Stage 3: one segment's reads of `bucket`'s members: a gather before
  /// the first of them and a view per member.
  void gatherForReads(Bucket &bucket, ArrayRef<Operation *> readers);
  LogicalResult eraseMemberStates();

  ModuleOp module;
  const ZeroOptions &options;
  OpBuilder builder;
  func::FuncOp train;
  func::FuncOp optimizer;
  std::vector<Bucket> buckets;
  std::vector<Bucket> frozenBuckets;
};

} // namespace tailor::parallel::detail

#endif // TAILOR_PASSES_PARALLEL_ZEROREWRITER_H
