//===- CompressGradients.cpp - tailor-compress-gradients on DDP buckets ---===//
//
// Rewrites each DDP bucket's all-reduce into a compressed one.
//
// powersgd: PyTorch's PowerSGD communication hook (torch/distributed/
// algorithms/ddp_comm_hooks/powerSGD_hook.py), step for step: a plain
// all-reduce for the first `start-step` steps, then error feedback, the
// uncompressed all-reduce of what is not worth compressing, and P = M Q,
// all-reduce P, orthogonalize P, Q = M^T P, all-reduce Q, M = P Q^T.
//
// acp-sgd: ACP-SGD (Zhang, Shi and Li, "Evaluation and Optimization of
// Gradient Compression for Distributed Deep Learning", ICDCS 2023,
// Algorithm 1): PowerSGD's single power iteration split over two steps,
// each step computing and all-reducing one factor with the other reused
// from the step before. The variant built here, from step s = start + 1:
//   steps s, s + 2, ... (P steps): Q <- orth(Q); P = M Q; all-reduce P
//     (average); M = P Q^T;
//   steps s + 1, s + 3, ... (Q steps): P <- orth(P); Q = M^T P;
//     all-reduce Q (average); M = P Q^T;
// with M the gradient plus the error of the step before (error feedback
// as PowerSGD's: error = what the rank had minus M), Q's first values from
// tg.lowrank_init in step s, and gradients not worth compressing
// all-reduced as they are (as PowerSGD's). The reused factor is the
// previous step's all-reduced one, the same on every rank, so each rank
// orthogonalizes it alike and M = P Q^T is the average gradient projected
// onto its span. Orthogonalization uses epsilon 1e-8, so a zero column
// stays zero instead of NaN forever. Each step sends one factor, over the
// bucket's fused all-reduce.
//
// topk and signsgd: passes/parallel/SparseCompression.cpp (which names
// the variants) rewrites each bucket, after the same warm-up, into a
// compression of the bucket as one flat vector, an all-gather and an
// average; the residuals are `powersgd_error` states, as PowerSGD's, so
// checkpoints keep each rank's.
//
// Every phase stays in the program; `tg.steps` says in which steps each op
// runs (ACP-SGD's with period 2), so the plan (and its byte counts) holds
// them all and the runtime picks by the step input. A period on the step
// range rather than a run-time branch inside kernels: the collectives of
// the two steps differ in size, and the planner and the cost model must
// see which runs when to predict each step's bytes and time.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"
#include "passes/parallel/LowRankCompression.h"
#include "passes/parallel/SparseCompression.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace tailor::parallel {

#define GEN_PASS_DEF_COMPRESSGRADIENTSPASS
#include "passes/parallel/Passes.h.inc"

namespace {

using namespace mlir;

class CompressGradientsPass
    : public impl::CompressGradientsPassBase<CompressGradientsPass> {
public:
  using CompressGradientsPassBase::CompressGradientsPassBase;

  void runOnOperation() override;

private:
  LogicalResult checkOptions(ModuleOp module);
  LogicalResult checkParallel(ModuleOp module);
  void recordDecision(ModuleOp module);
  /// topk and signsgd: the bucket compressed as one flat vector
  /// (SparseCompression.cpp), averaged over `ranks`.
  LogicalResult rewriteSparse(ModuleOp module, tg::AllReduceStatesOp reduce,
                              int64_t ranks);
  LogicalResult rewriteBucket(ModuleOp module, func::FuncOp function,
                              tg::AllReduceStatesOp reduce);
  FailureOr<SmallVector<LowRankMember>> membersOf(ModuleOp module,
                                           func::FuncOp function,
                                           tg::AllReduceStatesOp reduce);
  /// Whether the hook compresses a gradient of `type` (_should_compress).
  bool worthCompressing(RankedTensorType type, int64_t &rows, int64_t &cols,
                        int64_t &r) const;
};

} // namespace

LogicalResult CompressGradientsPass::checkOptions(ModuleOp module) {
  if (method != "powersgd" && method != "acp-sgd" && method != "topk" &&
      method != "signsgd") {
    return module.emitError()
           << "tailor-compress-gradients: unknown gradient_compression '"
           << method << "' (powersgd, acp-sgd, topk, signsgd)";
  }
  if (method == "topk" && !(ratio > 0.0 && ratio <= 1.0)) {
    return module.emitError() << "tailor-compress-gradients: ratio must be "
                                 "in (0, 1], got "
                              << ratio;
  }
  if (method == "acp-sgd" && !warmStart) {
    return module.emitError()
           << "tailor-compress-gradients: acp-sgd reuses the previous step's "
              "factor by design; warm-start false applies to powersgd only";
  }
  if (rank < 1) {
    return module.emitError() << "tailor-compress-gradients: rank must be at "
                                 "least 1, got "
                              << rank;
  }
  if (startStep < 0) {
    return module.emitError() << "tailor-compress-gradients: start-step must "
                                 "not be negative, got "
                              << startStep;
  }
  if (minCompressionRate < 0) {
    return module.emitError() << "tailor-compress-gradients: "
                                 "min-compression-rate must not be negative, "
                                 "got "
                              << minCompressionRate;
  }
  return success();
}

/// The world size tailor-shard recorded (checkParallel has run).
static int64_t worldSize(ModuleOp module) {
  auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel");
  auto world = parallel ? parallel.getAs<IntegerAttr>("world_size")
                        : IntegerAttr();
  return world ? world.getInt() : 0;
}

/// Compression rewrites DDP's bucket all-reduces: it needs tailor-shard's
/// ddp over several ranks.
LogicalResult CompressGradientsPass::checkParallel(ModuleOp module) {
  auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel");
  if (!parallel) {
    return module.emitError() << "tailor-compress-gradients: the module is "
                                 "not data parallel (run tailor-shard first)";
  }
  auto strategy = parallel.getAs<StringAttr>("strategy");
  auto world = parallel.getAs<IntegerAttr>("world_size");
  if (strategy && strategy.getValue() != "ddp") {
    return module.emitError()
           << "tailor-compress-gradients: gradient compression with "
           << strategy << " sharding is not built yet (ddp only)";
  }
  if (world && world.getInt() < 2) {
    return module.emitError()
           << "tailor-compress-gradients: gradient compression needs several "
              "ranks (world size "
           << world.getInt() << " has no gradient all-reduce to compress)";
  }
  return success();
}

void CompressGradientsPass::recordDecision(ModuleOp module) {
  Builder b(module.getContext());
  SmallVector<NamedAttribute> decision = {
      b.getNamedAttr("method", b.getStringAttr(method)),
      b.getNamedAttr("start_step", b.getI64IntegerAttr(startStep)),
      b.getNamedAttr("error_feedback", b.getBoolAttr(errorFeedback))};
  if (method == "topk") {
    decision.push_back(b.getNamedAttr("ratio", b.getF64FloatAttr(ratio)));
  } else if (method != "signsgd") {
    decision.push_back(b.getNamedAttr("rank", b.getI64IntegerAttr(rank)));
    decision.push_back(b.getNamedAttr("warm_start", b.getBoolAttr(warmStart)));
    decision.push_back(b.getNamedAttr("min_compression_rate",
                                      b.getF64FloatAttr(minCompressionRate)));
  }
  module->setAttr(tg::TGDialect::kCompressionAttrName,
                  b.getDictionaryAttr(decision));
}

LogicalResult CompressGradientsPass::rewriteSparse(ModuleOp module,
                                                   tg::AllReduceStatesOp reduce,
                                                   int64_t ranks) {
  FailureOr<SparseBucket> bucket = sparseBucketOf(
      module, reduce, method, ranks, startStep + 1, errorFeedback);
  if (failed(bucket)) {
    return failure();
  }
  OpBuilder builder(reduce);
  builder.setInsertionPointAfter(reduce);
  if (method == "topk") {
    emitTopK(builder, reduce.getLoc(), *bucket,
             topkCount(ratio, bucketElements(*bucket)));
  } else {
    emitSignSGD(builder, reduce.getLoc(), *bucket);
  }
  return success();
}

bool CompressGradientsPass::worthCompressing(RankedTensorType type,
                                             int64_t &rows, int64_t &cols,
                                             int64_t &r) const {
  rows = type.getRank() == 0 ? 1 : type.getDimSize(0);
  cols = rows == 0 ? 0 : type.getNumElements() / rows;
  r = std::min({rows, cols, static_cast<int64_t>(rank)});
  return static_cast<double>((rows + cols) * r) * minCompressionRate <
         static_cast<double>(rows * cols);
}

/// The bucket's gradients, uncompressed ones first (so their all-reduce is
/// the bucket's prefix, in place), with their new states declared.
FailureOr<SmallVector<LowRankMember>>
CompressGradientsPass::membersOf(ModuleOp module, func::FuncOp function,
                                 tg::AllReduceStatesOp reduce) {
  OpBuilder builder(module.getContext());
  builder.setInsertionPoint(function);
  auto declare = [&](tg::StateOp grad, RankedTensorType type,
                     tg::StateKind kind) {
    std::string name =
        (grad.getParameter() + "." + tg::stringifyStateKind(kind)).str();
    return tg::StateOp::create(builder, grad.getLoc(), name, type,
                               grad.getParameter(), kind);
  };
  SmallVector<LowRankMember> plain, compressed;
  for (Attribute name : reduce.getStates()) {
    auto grad =
        module.lookupSymbol<tg::StateOp>(llvm::cast<FlatSymbolRefAttr>(name));
    if (!grad) {
      reduce.emitError() << name << " does not name a tg.state";
      return failure();
    }
    RankedTensorType type = grad.getTensorType();
    if (!type.getElementType().isF32()) {
      reduce.emitError() << "tailor-compress-gradients: " << name << " holds "
                         << type.getElementType()
                         << " gradients; compression works on f32 ones";
      return failure();
    }
    LowRankMember member{grad, {}, {}, {}};
    if (errorFeedback) {
      member.error = declare(grad, type, tg::StateKind::PowerSGDError);
    }
    int64_t rows = 0, cols = 0, r = 0;
    if (!worthCompressing(type, rows, cols, r)) {
      plain.push_back(member);
      continue;
    }
    member.p =
        declare(grad, RankedTensorType::get({rows, r}, builder.getF32Type()),
                tg::StateKind::PowerSGDP);
    member.q =
        declare(grad, RankedTensorType::get({cols, r}, builder.getF32Type()),
                tg::StateKind::PowerSGDQ);
    compressed.push_back(member);
  }
  plain.append(compressed);
  return plain;
}

static FlatSymbolRefAttr ref(tg::StateOp state) {
  return FlatSymbolRefAttr::get(state.getSymNameAttr());
}

LogicalResult
CompressGradientsPass::rewriteBucket(ModuleOp module, func::FuncOp function,
                                     tg::AllReduceStatesOp reduce) {
  if (reduce.getReduction() != tg::CommReduction::Avg) {
    return reduce.emitError() << "tailor-compress-gradients: expected DDP's "
                                 "averaging all-reduce of a bucket";
  }
  if (reduce->hasAttr(tg::TGDialect::kOverlapAttrName)) {
    return reduce.emitError()
           << "tailor-compress-gradients: compressing an all-reduce that "
              "overlaps backward (overlap_comm) is not built yet";
  }
  if (reduce->hasAttr(tg::TGDialect::kStepsAttrName)) {
    return reduce.emitError() << "tailor-compress-gradients: this bucket's "
                                 "all-reduce is compressed already";
  }
  if (method == "topk" || method == "signsgd") {
    if (failed(rewriteSparse(module, reduce, worldSize(module)))) {
      return failure();
    }
    if (startStep == 0) {
      reduce.erase();
    } else {
      runInSteps(reduce, 1, startStep);
    }
    return success();
  }
  FailureOr<SmallVector<LowRankMember>> members =
      membersOf(module, function, reduce);
  if (failed(members)) {
    return failure();
  }
  // The warm-up keeps the plain all-reduce, over the reordered bucket.
  SmallVector<Attribute> order;
  for (const LowRankMember &m : *members) {
    order.push_back(ref(m.grad));
  }
  OpBuilder builder(reduce);
  builder.setInsertionPointAfter(reduce);
  LowRankBucket bucket{*members, reduce.getGroup(), startStep + 1, warmStart};
  emitLowRankCompression(builder, reduce.getLoc(), bucket,
                         /*alternating=*/method == "acp-sgd");
  if (startStep == 0) {
    reduce.erase();
    return success();
  }
  reduce.setStatesAttr(builder.getArrayAttr(order));
  runInSteps(reduce, 1, startStep);
  return success();
}

void CompressGradientsPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)) || failed(checkParallel(module))) {
    return signalPassFailure();
  }
  auto function = module.lookupSymbol<func::FuncOp>(this->function);
  if (!function) {
    module.emitError() << "tailor-compress-gradients: no function @"
                       << this->function
                       << ": compression needs the optimizer step";
    return signalPassFailure();
  }
  SmallVector<tg::AllReduceStatesOp> buckets(
      function.getOps<tg::AllReduceStatesOp>());
  if (buckets.empty()) {
    function.emitError() << "tailor-compress-gradients: no gradient bucket "
                            "all-reduce (tg.all_reduce_states) to compress";
    return signalPassFailure();
  }
  recordDecision(module);
  for (tg::AllReduceStatesOp reduce : buckets) {
    if (failed(rewriteBucket(module, function, reduce))) {
      return signalPassFailure();
    }
  }
}

} // namespace tailor::parallel
