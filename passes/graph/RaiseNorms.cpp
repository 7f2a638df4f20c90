//===- RaiseNorms.cpp - decomposed norms -> tg.rms_norm, tg.layer_norm ----===//
//
// RMSNorm (Llama, Mistral, Qwen2):
//   w * (x * r)   with r = 1/sqrt(mean(x^2, -1) + eps)
// where r is spelled reciprocal(sqrt(.)), rsqrt(.), or the whole is
// x / sqrt(.); x^2 is pow(x, 2) or x * x.
// LayerNorm (GPT-2 and Phi before opset 17):
//   d = x - mean(x, -1);  d / sqrt(mean(d^2, -1) + eps) * w + b
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"
#include "passes/graph/RaiseUtils.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_RAISENORMSPASS
#include "passes/graph/Passes.h.inc"

namespace {

/// Whether `v` is mean(y^2) over the last dim with keep_dims, for y == x.
bool isMeanOfSquare(Value v, Value x) {
  auto mean = skipCasts(v).getDefiningOp<tg::ReduceMeanOp>();
  int64_t rank = static_cast<int64_t>(shapeOf(x).size());
  if (!mean || !mean.getKeepDims() || mean.getAxes().size() != 1 ||
      mean.getAxes()[0] != rank - 1) {
    return false;
  }
  Value sq = mean.getInput();
  if (auto pow = sq.getDefiningOp<tg::PowOp>()) {
    return skipCasts(pow.getLhs()) == x && isSplat(pow.getRhs(), 2.0);
  }
  if (auto mul = sq.getDefiningOp<tg::MulOp>()) {
    return skipCasts(mul.getLhs()) == x && skipCasts(mul.getRhs()) == x;
  }
  return false;
}

/// If `v` is mean(x^2) + eps (either order), returns eps.
std::optional<double> meanSquarePlusEps(Value v, Value x) {
  auto add = v.getDefiningOp<tg::AddOp>();
  if (!add) {
    return std::nullopt;
  }
  for (auto [a, b] : {std::pair(add.getLhs(), add.getRhs()),
                      std::pair(add.getRhs(), add.getLhs())}) {
    std::optional<double> eps = splatValue(b);
    if (eps && isMeanOfSquare(a, x)) {
      return eps;
    }
  }
  return std::nullopt;
}

/// If `v` is sqrt(mean(x^2) + eps), returns eps.
std::optional<double> sqrtOfMeanSquarePlusEps(Value v, Value x) {
  auto sqrt = v.getDefiningOp<tg::SqrtOp>();
  return sqrt ? meanSquarePlusEps(sqrt.getInput(), x) : std::nullopt;
}

/// If `v` is rsqrt(mean(x^2) + eps) in some spelling, returns eps.
std::optional<double> inverseRms(Value v, Value x) {
  v = skipCasts(v);
  if (auto rcp = v.getDefiningOp<tg::ReciprocalOp>()) {
    return sqrtOfMeanSquarePlusEps(rcp.getInput(), x);
  }
  if (auto div = v.getDefiningOp<tg::DivOp>()) {
    if (isSplat(div.getLhs(), 1.0)) {
      return sqrtOfMeanSquarePlusEps(div.getRhs(), x);
    }
  }
  if (auto rsqrt = v.getDefiningOp<tg::RsqrtOp>()) {
    return meanSquarePlusEps(rsqrt.getInput(), x);
  }
  return std::nullopt;
}

/// If `v` is x normalized by its RMS, returns (x, eps).
std::optional<std::pair<Value, double>> normalizedByRms(Value v) {
  v = skipCasts(v);
  if (auto mul = v.getDefiningOp<tg::MulOp>()) {
    for (auto [x, r] : {std::pair(mul.getLhs(), mul.getRhs()),
                        std::pair(mul.getRhs(), mul.getLhs())}) {
      Value input = skipCasts(x);
      if (std::optional<double> eps = inverseRms(r, input)) {
        return std::pair(input, *eps);
      }
    }
  }
  if (auto div = v.getDefiningOp<tg::DivOp>()) {
    Value input = skipCasts(div.getLhs());
    if (std::optional<double> eps = sqrtOfMeanSquarePlusEps(div.getRhs(), input)) {
      return std::pair(input, *eps);
    }
  }
  return std::nullopt;
}

Value centered(Value v);

std::optional<std::string> normModulePath(tg::ParamRefOp weight, Operation *op) {
  std::optional<std::string> path = modulePathFromParamName(weight.getName());
  // TorchScript exports share identical initializers across modules (every
  // freshly initialized norm weight is all ones), so the scope of the node
  // is the more reliable name when there is one.
  if (std::optional<std::string> scoped = modulePathFromLoc(op->getLoc())) {
    return scoped;
  }
  return path;
}

/// w * normalized(x) -> rms_norm(x, w).
struct RaiseRMSNorm : OpRewritePattern<tg::MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tg::MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [w, n] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      tg::ParamRefOp weight = paramRefOf(w);
      if (!weight || shapeOf(w).size() != 1) {
        continue;
      }
      std::optional<std::pair<Value, double>> match = normalizedByRms(n);
      if (!match || shapeOf(match->first).back() != shapeOf(w)[0]) {
        continue;
      }
      Value x = match->first;
      // x - mean(x) normalized by its RMS is a LayerNorm; leave it to that
      // pattern.
      if (centered(x)) {
        continue;
      }
      // tg.rms_norm computes in its input's type; keep the export's casts
      // out (x and the result share the element type for fp32 exports).
      if (getElementTypeOrSelf(x.getType()) != getElementTypeOrSelf(op.getType()) ||
          getElementTypeOrSelf(w.getType()) != getElementTypeOrSelf(op.getType())) {
        continue;
      }
      auto norm = tg::RMSNormOp::create(rewriter, op.getLoc(), op.getType(), x,
                                        w, rewriter.getF64FloatAttr(match->second));
      annotate(norm, normModulePath(weight, op));
      rewriter.replaceOp(op, norm.getResult());
      return success();
    }
    return rewriter.notifyMatchFailure(op, "not weight * rms-normalized x");
  }
};

/// If `v` is x - mean(x, -1, keep), returns x.
Value centered(Value v) {
  auto sub = v.getDefiningOp<tg::SubOp>();
  if (!sub) {
    return nullptr;
  }
  auto mean = sub.getRhs().getDefiningOp<tg::ReduceMeanOp>();
  int64_t rank = static_cast<int64_t>(shapeOf(sub.getLhs()).size());
  if (!mean || mean.getInput() != sub.getLhs() || !mean.getKeepDims() ||
      mean.getAxes().size() != 1 || mean.getAxes()[0] != rank - 1) {
    return nullptr;
  }
  return sub.getLhs();
}

/// [w * (d / sqrt(mean(d^2) + eps))] (+ b) -> layer_norm(x, w, b).
struct RaiseLayerNorm : OpRewritePattern<tg::MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tg::MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [w, n] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      tg::ParamRefOp weight = paramRefOf(w);
      auto div = n.getDefiningOp<tg::DivOp>();
      if (!weight || shapeOf(w).size() != 1 || !div) {
        continue;
      }
      Value d = div.getLhs();
      Value x = centered(d);
      if (!x) {
        continue;
      }
      std::optional<double> eps = sqrtOfMeanSquarePlusEps(div.getRhs(), d);
      if (!eps || x.getType() != op.getType()) {
        continue;
      }
      Value bias = biasAddOf(op.getResult(), shapeOf(w)[0]);
      Operation *replaced =
          bias ? *op->getUsers().begin() : op.getOperation();
      rewriter.setInsertionPoint(replaced);
      auto norm = tg::LayerNormOp::create(rewriter, op.getLoc(), op.getType(), x,
                                          w, bias, rewriter.getF64FloatAttr(*eps));
      annotate(norm, normModulePath(weight, op));
      rewriter.replaceOp(replaced, norm.getResult());
      if (replaced != op.getOperation()) {
        rewriter.eraseOp(op);
      }
      return success();
    }
    return rewriter.notifyMatchFailure(op, "not a decomposed layer norm");
  }
};

/// Names norms the importer created directly (LayerNormalization,
/// RMSNormalization, SimplifiedLayerNormalization).
template <typename NormOp>
struct AnnotateNorm : OpRewritePattern<NormOp> {
  using OpRewritePattern<NormOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(NormOp op,
                                PatternRewriter &rewriter) const override {
    if (op->hasAttr(tg::TGDialect::kModuleAttrName)) {
      return failure();
    }
    tg::ParamRefOp weight = paramRefOf(op.getWeight());
    std::optional<std::string> path =
        weight ? normModulePath(weight, op) : modulePathFromLoc(op.getLoc());
    if (!path) {
      return failure();
    }
    rewriter.modifyOpInPlace(op, [&] { annotate(op, path); });
    return success();
  }
};

struct RaiseNormsPass : impl::RaiseNormsPassBase<RaiseNormsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseRMSNorm, RaiseLayerNorm, AnnotateNorm<tg::RMSNormOp>,
                 AnnotateNorm<tg::LayerNormOp>>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      signalPassFailure();
    }
  }
};

} // namespace
} // namespace tailor::graph
