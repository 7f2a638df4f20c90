//===- SparseCompression.h - top-k and sign-SGD on one DDP bucket -*- C++ -*-===//
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

/// Elements of the flat vector the bucket's gradients make.
int64_t bucketElements(const SparseBucket &bucket);

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
