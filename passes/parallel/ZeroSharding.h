//===- ZeroSharding.h - ZeRO-1/2: optimizer state in chunks -----*- C++ -*-===//
//
// The rewrite tailor-shard applies for `zero1`, `zero2`, `zero3` and
// `hybrid`: trainable parameters are grouped into flat buckets (tg.bucket),
// each rank keeps one chunk of every bucket's optimizer state (stage 2: and
// of its gradients; stage 3: and of the parameters themselves) and updates
// its chunk of the parameters.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_PARALLEL_ZEROSHARDING_H
#define TAILOR_PASSES_PARALLEL_ZEROSHARDING_H

#include "dialects/tg/TGOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace tailor::parallel {

struct ZeroOptions {
  /// 1: optimizer state in chunks; 2: gradients too (reduce-scattered per
  /// micro-batch in train_step); 3: parameters too (gathered before use).
  int stage = 1;
  /// Stage 3: gather the parameters again for backward rather than keep
  /// the forward's gather alive through the step.
  bool reshardAfterForward = true;
  /// Ranks a bucket is cut over, and which group they are.
  int64_t shards = 1;
  tg::CommGroup group = tg::CommGroup::World;
  /// Hybrid sharding: the buckets are cut over each node (`group` is
  /// Node) and the nodes hold replicas, whose chunk gradients are averaged
  /// over `replicas` ranks (one per node) before the update.
  int64_t replicas = 1;
  /// Most bytes of parameters one bucket (and so one collective) holds.
  int64_t bucketBytes = 25 * 1024 * 1024;
  /// Offload: frozen buckets live whole in host memory (`tg.bucket ...
  /// host`, one shard) and are copied to the device to be read.
  bool hostFrozen = false;
  /// Stage 3: leave the reads of the sharded parameters (and the frozen
  /// buckets) to `gatherShardedParams`, run after recomputation so the
  /// forward ops it replays in backward read backward's gathers.
  bool deferParamReads = false;
  std::string trainFunction = "train_step";
  std::string evalFunction = "eval_step";
  std::string optimizerFunction = "optimizer_step";
};

/// Elements a bucket member's offset and a chunk are rounded up to, so
/// every member and every rank's chunk starts 256-byte aligned for f32.
constexpr int64_t kZeroAlignElements = 64;

/// Rewrites the training step of `module` as `options` says; on failure
/// an error is emitted on the offending op.
mlir::LogicalResult shardOptimizerState(mlir::ModuleOp module,
                                        const ZeroOptions &options);

/// Stage 3 deferred (`deferParamReads`): the frozen parameters into
/// buckets of their own and every read of a sharded parameter through a
/// gather, as `shardOptimizerState` does at stage 3, on a module it has
/// sharded; `options` as it was given them.
mlir::LogicalResult gatherShardedParams(mlir::ModuleOp module,
                                        const ZeroOptions &options);

/// Offload of the frozen parameters (`options.hostFrozen`, one shard):
/// host buckets read through copies to the device.
mlir::LogicalResult offloadFrozenParams(mlir::ModuleOp module,
                                        const ZeroOptions &options);

/// Optimizer offload (OffloadOptimizer.cpp): AdamW's moments in host
/// memory and its update on the host, on host copies of each gradient and
/// parameter, copied back after.
mlir::LogicalResult offloadOptimizer(mlir::ModuleOp module,
                                     const ZeroOptions &options);

/// Activation offload (OffloadActivations.cpp): each saved activation of
/// the training step of at least `minBytes` copied to host memory after
/// its last forward reader and back before its first backward reader.
mlir::LogicalResult offloadActivations(mlir::ModuleOp module,
                                       const ZeroOptions &options,
                                       int64_t minBytes);

} // namespace tailor::parallel

#endif // TAILOR_PASSES_PARALLEL_ZEROSHARDING_H
