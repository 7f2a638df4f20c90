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
#include "passes/parallel/SparseCompression.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace tailor::parallel {

#define GEN_PASS_DEF_COMPRESSGRADIENTSPASS
#include "passes/parallel/Passes.h.inc"

namespace {

using namespace mlir;

/// One gradient of a bucket and what compression keeps for it.
struct Member {
  tg::StateOp grad;
  /// Error feedback's residual (null without error feedback).
  tg::StateOp error;
  /// The low-rank factors, [rows, r] and [cols, r] (null: not compressed).
  tg::StateOp p, q;
};

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
  FailureOr<SmallVector<Member>> membersOf(ModuleOp module,
                                           func::FuncOp function,
                                           tg::AllReduceStatesOp reduce);
  void emitCompressed(OpBuilder &builder, Location loc,
                      ArrayRef<Member> members, tg::CommGroup group);
  void emitAlternating(OpBuilder &builder, Location loc,
                       ArrayRef<Member> members, tg::CommGroup group);
  /// The first and last of the compressed steps: error feedback and the
  /// uncompressed all-reduce (first), the error's store (last).
  void emitErrorFeedback(OpBuilder &builder, Location loc,
                         ArrayRef<Member> members);
  void emitPlainReduce(OpBuilder &builder, Location loc,
                       ArrayRef<Member> members, tg::CommGroup group);
  void emitErrorStore(OpBuilder &builder, Location loc,
                      ArrayRef<Member> members);
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
FailureOr<SmallVector<Member>>
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
  SmallVector<Member> plain, compressed;
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
    Member member{grad, {}, {}, {}};
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

/// Runs `op` only in steps [first, last] (last -1: no end).
static void runIn(Operation *op, int64_t first, int64_t last) {
  op->setAttr(tg::TGDialect::kStepsAttrName,
              DenseI64ArrayAttr::get(op->getContext(), {first, last}));
}

static FlatSymbolRefAttr ref(tg::StateOp state) {
  return FlatSymbolRefAttr::get(state.getSymNameAttr());
}

void CompressGradientsPass::emitErrorFeedback(OpBuilder &builder,
                                              Location loc,
                                              ArrayRef<Member> members) {
  // input_tensor.add_(error); input_tensor_cp = input_tensor.clone()
  for (const Member &m : members) {
    if (m.error) {
      runIn(tg::AddErrorFeedbackOp::create(builder, loc, ref(m.grad),
                                           ref(m.error)),
            startStep + 1, -1);
    }
  }
}

/// The tensors not worth compressing, averaged as they are.
void CompressGradientsPass::emitPlainReduce(OpBuilder &builder, Location loc,
                                            ArrayRef<Member> members,
                                            tg::CommGroup group) {
  SmallVector<Attribute> plain;
  for (const Member &m : members) {
    if (!m.p) {
      plain.push_back(ref(m.grad));
    }
  }
  if (!plain.empty()) {
    runIn(tg::AllReduceStatesOp::create(builder, loc,
                                        builder.getArrayAttr(plain),
                                        tg::CommReduction::Avg, group),
          startStep + 1, -1);
  }
}

void CompressGradientsPass::emitErrorStore(OpBuilder &builder, Location loc,
                                           ArrayRef<Member> members) {
  // error = input_tensor_cp - input_tensor
  for (const Member &m : members) {
    if (m.error) {
      runIn(tg::StoreErrorFeedbackOp::create(builder, loc, ref(m.error),
                                             ref(m.grad)),
            startStep + 1, -1);
    }
  }
}

/// The hook's compressed step, from step start + 1 on.
void CompressGradientsPass::emitCompressed(OpBuilder &builder, Location loc,
                                           ArrayRef<Member> members,
                                           tg::CommGroup group) {
  int64_t first = startStep + 1;
  auto from = [&](Operation *op) { runIn(op, first, -1); };
  SmallVector<Attribute> ps, qs;
  for (const Member &m : members) {
    if (m.p) {
      ps.push_back(ref(m.p));
      qs.push_back(ref(m.q));
    }
  }
  // (Nothing compressed: only the residual of the plain all-reduce.)
  if (!ps.empty()) {
    // Q: fixed first values (once with warm start, else every step),
    // orthogonalized; P = M Q, summed over ranks.
    for (const Member &m : members) {
      if (!m.p) {
        continue;
      }
      runIn(tg::LowRankInitOp::create(builder, loc, ref(m.q)), first,
            warmStart ? first : -1);
      from(tg::OrthogonalizeOp::create(builder, loc, ref(m.q),
                                       builder.getF64FloatAttr(0.0)));
      from(tg::LowRankMatmulOp::create(builder, loc, ref(m.grad), UnitAttr(),
                                       ref(m.q), UnitAttr(), ref(m.p)));
    }
    from(tg::AllReduceStatesOp::create(builder, loc, builder.getArrayAttr(ps),
                                       tg::CommReduction::Sum, group));
    // P orthogonalized; Q = M^T P, averaged over ranks.
    for (const Member &m : members) {
      if (!m.p) {
        continue;
      }
      from(tg::OrthogonalizeOp::create(builder, loc, ref(m.p),
                                       builder.getF64FloatAttr(0.0)));
      from(tg::LowRankMatmulOp::create(builder, loc, ref(m.grad),
                                       builder.getUnitAttr(), ref(m.p),
                                       UnitAttr(), ref(m.q)));
    }
    from(tg::AllReduceStatesOp::create(builder, loc, builder.getArrayAttr(qs),
                                       tg::CommReduction::Avg, group));
    // M = P Q^T.
    for (const Member &m : members) {
      if (m.p) {
        from(tg::LowRankMatmulOp::create(builder, loc, ref(m.p), UnitAttr(),
                                         ref(m.q), builder.getUnitAttr(),
                                         ref(m.grad)));
      }
    }
  }
}

/// ACP-SGD's two alternating steps (the file comment gives the variant).
void CompressGradientsPass::emitAlternating(OpBuilder &builder, Location loc,
                                            ArrayRef<Member> members,
                                            tg::CommGroup group) {
  int64_t first = startStep + 1;
  auto every2From = [](Operation *op, int64_t from) {
    op->setAttr(tg::TGDialect::kStepsAttrName,
                DenseI64ArrayAttr::get(op->getContext(), {from, -1, 2}));
  };
  auto epsilon = builder.getF64FloatAttr(1e-8);
  SmallVector<Attribute> ps, qs;
  for (const Member &m : members) {
    if (m.p) {
      ps.push_back(ref(m.p));
      qs.push_back(ref(m.q));
    }
  }
  if (ps.empty()) {
    return;
  }
  // Q's first values, once.
  for (const Member &m : members) {
    if (m.p) {
      runIn(tg::LowRankInitOp::create(builder, loc, ref(m.q)), first, first);
    }
  }
  // P steps: P = M orth(Q), averaged over ranks; M = P Q^T.
  for (const Member &m : members) {
    if (!m.p) {
      continue;
    }
    every2From(tg::OrthogonalizeOp::create(builder, loc, ref(m.q), epsilon),
               first);
    every2From(tg::LowRankMatmulOp::create(builder, loc, ref(m.grad),
                                           UnitAttr(), ref(m.q), UnitAttr(),
                                           ref(m.p)),
               first);
  }
  every2From(tg::AllReduceStatesOp::create(builder, loc,
                                           builder.getArrayAttr(ps),
                                           tg::CommReduction::Avg, group),
             first);
  // Q steps: Q = M^T orth(P), averaged over ranks; M = P Q^T.
  for (const Member &m : members) {
    if (!m.p) {
      continue;
    }
    every2From(tg::OrthogonalizeOp::create(builder, loc, ref(m.p), epsilon),
               first + 1);
    every2From(tg::LowRankMatmulOp::create(builder, loc, ref(m.grad),
                                           builder.getUnitAttr(), ref(m.p),
                                           UnitAttr(), ref(m.q)),
               first + 1);
  }
  every2From(tg::AllReduceStatesOp::create(builder, loc,
                                           builder.getArrayAttr(qs),
                                           tg::CommReduction::Avg, group),
             first + 1);
  // M = P Q^T, in both.
  for (const Member &m : members) {
    if (m.p) {
      runIn(tg::LowRankMatmulOp::create(builder, loc, ref(m.p), UnitAttr(),
                                        ref(m.q), builder.getUnitAttr(),
                                        ref(m.grad)),
            first, -1);
    }
  }
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
      runIn(reduce, 1, startStep);
    }
    return success();
  }
  FailureOr<SmallVector<Member>> members = membersOf(module, function, reduce);
  if (failed(members)) {
    return failure();
  }
  // The warm-up keeps the plain all-reduce, over the reordered bucket.
  SmallVector<Attribute> order;
  for (const Member &m : *members) {
    order.push_back(ref(m.grad));
  }
  OpBuilder builder(reduce);
  builder.setInsertionPointAfter(reduce);
  emitErrorFeedback(builder, reduce.getLoc(), *members);
  emitPlainReduce(builder, reduce.getLoc(), *members, reduce.getGroup());
  if (method == "acp-sgd") {
    emitAlternating(builder, reduce.getLoc(), *members, reduce.getGroup());
  } else {
    emitCompressed(builder, reduce.getLoc(), *members, reduce.getGroup());
  }
  emitErrorStore(builder, reduce.getLoc(), *members);
  if (startStep == 0) {
    reduce.erase();
    return success();
  }
  reduce.setStatesAttr(builder.getArrayAttr(order));
  runIn(reduce, 1, startStep);
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
