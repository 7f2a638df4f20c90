//===- LowRankCompression.h - PowerSGD and ACP-SGD on a bucket -*- C++ -*-===//
//
// The rewrites tailor-compress-gradients (CompressGradients.cpp, whose file
// comment gives both algorithms) makes of a bucket for `powersgd` and
// `acp-sgd`; the sparse methods are in SparseCompression.h.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_PARALLEL_LOWRANKCOMPRESSION_H
#define TAILOR_PASSES_PARALLEL_LOWRANKCOMPRESSION_H

#include "dialects/tg/TGOps.h"

#include "mlir/IR/Builders.h"

namespace tailor::parallel {

/// One gradient of a bucket and what low-rank compression keeps for it.
struct LowRankMember {
  tg::StateOp grad;
  /// Error feedback's residual (null without error feedback).
  tg::StateOp error;
  /// The low-rank factors, [rows, r] and [cols, r] (null: not compressed,
  /// the gradient is all-reduced as it is).
  tg::StateOp p, q;
};

/// A bucket to compress: its members, uncompressed ones first (their
/// all-reduce is the bucket's prefix), the ranks that average them, and the
/// first step compressed (later steps too).
struct LowRankBucket {
  llvm::SmallVector<LowRankMember> members;
  tg::CommGroup group = tg::CommGroup::World;
  int64_t firstStep = 1;
  /// PowerSGD's warm start: Q's first values once, not every step.
  bool warmStart = true;
};

/// Runs `op` only in steps [first, last] (last -1: no end), as the
/// compressed phases of a bucket do (tg.steps).
void runInSteps(mlir::Operation *op, int64_t first, int64_t last);

/// PowerSGD's compressed step at the builder's insertion point: error
/// feedback, the plain all-reduce of what is not compressed, P = M Q,
/// all-reduce P, orthogonalize, Q = M^T P, all-reduce Q, M = P Q^T, and the
/// residual's store. ACP-SGD (`alternating`) computes and all-reduces one
/// factor a step instead, the other reused from the step before.
void emitLowRankCompression(mlir::OpBuilder &builder, mlir::Location loc,
                            const LowRankBucket &bucket, bool alternating);

} // namespace tailor::parallel

#endif // TAILOR_PASSES_PARALLEL_LOWRANKCOMPRESSION_H
