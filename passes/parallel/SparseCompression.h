//===- SparseCompression.h - top-k and sign-SGD on one DDP bucket -*- C++
//-*-===//
//
// The rewrites tailor-compress-gradients (CompressGradients.cpp) makes of a
// bucket for `topk` and `signsgd`; SparseCompression.cpp says which
// variants.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_PARALLEL_SPARSECOMPRESSION_H
#define TAILOR_PASSES_PARALLEL_SPARSECOMPRESSION_H

#include "dialects/tg/TGOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace tailor::parallel {

/// One bucket to compress: its gradients (f32 states), their residuals
/// (empty without error feedback), the ranks that average them, and the
/// first step compressed (later steps too).
struct SparseBucket {
  llvm::SmallVector<tg::StateOp> grads;
  llvm::SmallVector<tg::StateOp> residuals;
  tg::CommGroup group = tg::CommGroup::World;
  int64_t ranks = 1;
  int64_t firstStep = 1;
};

/// The bucket `reduce` all-reduces (DDP's, over the world of `ranks`),
/// compressed by `method` from `firstStep` on, with a residual state
/// (`powersgd_error`, declared before the function) per gradient when
/// `errorFeedback`; an error on `reduce` where it cannot be.
mlir::FailureOr<SparseBucket> sparseBucketOf(mlir::ModuleOp module,
                                             tg::AllReduceStatesOp reduce,
                                             llvm::StringRef method,
                                             int64_t ranks, int64_t firstStep,
                                             bool errorFeedback);

/// Elements of the flat vector the bucket's gradients make.
int64_t bucketElements(const SparseBucket &bucket);

/// Top-k's k for `ratio` of `n` entries: ceil(ratio n) in double, in
/// [1, n].
int64_t topkCount(double ratio, int64_t n);

/// Top-k with error feedback: each rank's k largest-magnitude entries,
/// gathered, scatter-added and averaged into every gradient.
void emitTopK(mlir::OpBuilder &builder, mlir::Location loc,
              const SparseBucket &bucket, int64_t k);

/// EF-SignSGD: each rank's signs (a bit each) and scale, gathered, and
/// every gradient the mean of the ranks' scaled signs.
void emitSignSGD(mlir::OpBuilder &builder, mlir::Location loc,
                 const SparseBucket &bucket);

} // namespace tailor::parallel

#endif // TAILOR_PASSES_PARALLEL_SPARSECOMPRESSION_H
