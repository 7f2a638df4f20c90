//===- SparseCompression.cpp - top-k and sign-SGD on one DDP bucket ------===//
//
// What tailor-compress-gradients writes for `topk` and `signsgd` in place
// of a bucket's all-reduce, from its first compressed step on (tg.steps).
// Both read the bucket's gradients as one flat vector (each row-major, in
// bucket order) and communicate through the communicator's all-gather,
// since what each rank sends differs in its positions (top-k) or cannot be
// summed on the wire (sign bits).
//
// topk: Aji and Heafield, "Sparse Communication for Distributed Gradient
// Descent" (EMNLP 2017), with error feedback (their residual, added to the
// next step's gradient) and a fixed k = ceil(ratio * n) per bucket instead
// of their sampled threshold; this is also Lin et al.'s Deep Gradient
// Compression (ICLR 2018) without its momentum correction, local gradient
// clipping, momentum factor masking and warm-up of the ratio:
//   p = grad + residual; (values, indices) = the k entries of largest |p|
//   (ties: the lower position); residual = p with those entries zeroed;
//   all-gather values and indices (k each per rank);
//   grad = (1 / ranks) sum over ranks r and pairs j of values_r[j] at
//   indices_r[j] (zero elsewhere).
//
// signsgd: EF-SignSGD, Karimireddy, Rebjock, Stich and Jaggi, "Error
// Feedback Fixes SignSGD and other Gradient Compression Schemes" (ICML
// 2019), Algorithm 1's compressor C(p) = (||p||_1 / d) sign(p), applied
// to each gradient tensor of the bucket (d its size: one scale per tensor,
// C applied layer by layer, so a LoRA A and its B of different magnitudes
// keep their own), each rank compressing its own p
// and the ranks' decompressed vectors averaged (not a majority vote, and
// no second compression of the average):
//   p = grad + residual; scale_t = ||p_t||_1 / d_t per tensor t; signs =
//   sign(p) as bits over the bucket (uint8 holding 8, set for p < 0:
//   sign(0) = +1); residual = p - scale_t sign(p); all-gather signs
//   (ceil(n / 8) bytes per rank for the bucket's n entries) and scales (m
//   f32 per rank for m tensors); grad_t = (1 / ranks) sum_r scale_{r,t}
//   sign_r.
// The optimizer then steps with the averaged gradient, as for every
// method here (Algorithm 1's step size is the optimizer's learning rate).
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/SparseCompression.h"

#include "passes/parallel/LowRankCompression.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cmath>

namespace tailor::parallel {

using namespace mlir;

namespace {

/// Runs `op` in every step from `first`.
void runFrom(Operation *op, int64_t first) { runInSteps(op, first, -1); }

ArrayAttr namesOf(OpBuilder &builder, ArrayRef<tg::StateOp> states) {
  SmallVector<Attribute> names;
  for (tg::StateOp state : states) {
    names.push_back(FlatSymbolRefAttr::get(state.getSymNameAttr()));
  }
  return builder.getArrayAttr(names);
}

/// `input` all-gathered over the bucket's group: ranks times as long.
Value gathered(OpBuilder &builder, Location loc, const SparseBucket &bucket,
               Value input) {
  auto type = llvm::cast<RankedTensorType>(input.getType());
  auto result = RankedTensorType::get({type.getDimSize(0) * bucket.ranks},
                                      type.getElementType());
  auto gather =
      tg::AllGatherOp::create(builder, loc, result, input, bucket.group);
  runFrom(gather, bucket.firstStep);
  return gather.getResult();
}

} // namespace

FailureOr<SparseBucket> sparseBucketOf(ModuleOp module,
                                       tg::AllReduceStatesOp reduce,
                                       StringRef method, int64_t ranks,
                                       int64_t firstStep, bool errorFeedback) {
  if (reduce.getGroup() != tg::CommGroup::World) {
    return reduce.emitError() << "tailor-compress-gradients: " << method
                              << " over a group other than the world is not "
                                 "built yet";
  }
  if (ranks < 2) {
    return reduce.emitError() << "tailor-compress-gradients: " << method
                              << " averages over the world, whose size "
                                 "tg.parallel does not record";
  }
  SparseBucket bucket;
  bucket.group = reduce.getGroup();
  bucket.ranks = ranks;
  bucket.firstStep = firstStep;
  OpBuilder declare(module.getContext());
  declare.setInsertionPoint(reduce->getParentOfType<func::FuncOp>());
  for (Attribute name : reduce.getStates()) {
    auto grad =
        module.lookupSymbol<tg::StateOp>(llvm::cast<FlatSymbolRefAttr>(name));
    if (!grad || !grad.getTensorType().getElementType().isF32()) {
      return reduce.emitError() << "tailor-compress-gradients: " << name
                                << " is not an f32 gradient state";
    }
    bucket.grads.push_back(grad);
    if (errorFeedback) {
      bucket.residuals.push_back(tg::StateOp::create(
          declare, grad.getLoc(),
          (grad.getParameter() + ".powersgd_error").str(), grad.getType(),
          grad.getParameter(), tg::StateKind::PowerSGDError));
    }
  }
  return bucket;
}

int64_t topkCount(double ratio, int64_t n) {
  auto k = static_cast<int64_t>(std::ceil(ratio * double(n)));
  return std::clamp<int64_t>(k, 1, n);
}

int64_t bucketElements(const SparseBucket &bucket) {
  int64_t n = 0;
  for (tg::StateOp grad : bucket.grads) {
    n += grad.getTensorType().getNumElements();
  }
  return n;
}

void emitTopK(OpBuilder &builder, Location loc, const SparseBucket &bucket,
              int64_t k) {
  ArrayAttr residuals = bucket.residuals.empty()
                            ? ArrayAttr()
                            : namesOf(builder, bucket.residuals);
  auto compress = tg::TopKCompressOp::create(
      builder, loc, RankedTensorType::get({k}, builder.getF32Type()),
      RankedTensorType::get({k}, builder.getI32Type()),
      namesOf(builder, bucket.grads), residuals);
  runFrom(compress, bucket.firstStep);
  Value values = gathered(builder, loc, bucket, compress.getValues());
  Value indices = gathered(builder, loc, bucket, compress.getIndices());
  runFrom(tg::SparseAverageOp::create(
              builder, loc, values, indices, namesOf(builder, bucket.grads),
              builder.getF64FloatAttr(1.0 / double(bucket.ranks))),
          bucket.firstStep);
}

void emitSignSGD(OpBuilder &builder, Location loc, const SparseBucket &bucket) {
  ArrayAttr residuals = bucket.residuals.empty()
                            ? ArrayAttr()
                            : namesOf(builder, bucket.residuals);
  int64_t bytes = (bucketElements(bucket) + 7) / 8;
  auto compress = tg::SignCompressOp::create(
      builder, loc,
      RankedTensorType::get({bytes}, builder.getIntegerType(8, false)),
      RankedTensorType::get({static_cast<int64_t>(bucket.grads.size())},
                            builder.getF32Type()),
      namesOf(builder, bucket.grads), residuals);
  runFrom(compress, bucket.firstStep);
  Value signs = gathered(builder, loc, bucket, compress.getSigns());
  Value scales = gathered(builder, loc, bucket, compress.getScale());
  runFrom(tg::SignAverageOp::create(builder, loc, signs, scales,
                                    namesOf(builder, bucket.grads)),
          bucket.firstStep);
}

} // namespace tailor::parallel
