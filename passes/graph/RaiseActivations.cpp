//===- RaiseActivations.cpp - SiLU and GELU forms -> tg.silu, tg.gelu -----===//
//
// Exports spell activations out: SiLU as x * sigmoid(x); exact GELU as
// 0.5 * x * (1 + erf(x / sqrt(2))); GPT-2's tanh GELU as
// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))). The products
// come in any association and operand order, so the patterns flatten a
// product tree into its factors before comparing.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"
#include "passes/graph/RaiseUtils.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_RAISEACTIVATIONSPASS
#include "passes/graph/Passes.h.inc"

namespace {

/// The factors of a product tree rooted at `root`; interior muls must have
/// a single use (so rewriting the root loses nothing) and result shape.
void collectFactors(Value value, bool isRoot, SmallVectorImpl<Value> &factors,
                    unsigned depth = 0) {
  auto mul = value.getDefiningOp<tg::MulOp>();
  if (mul && depth < 3 && (isRoot || mul->hasOneUse())) {
    collectFactors(mul.getLhs(), false, factors, depth + 1);
    collectFactors(mul.getRhs(), false, factors, depth + 1);
    return;
  }
  factors.push_back(value);
}

/// Removes the first factor satisfying `pred`; returns it (or null).
template <typename Pred>
Value takeFactor(SmallVectorImpl<Value> &factors, Pred pred) {
  for (auto it = factors.begin(); it != factors.end(); ++it) {
    if (pred(*it)) {
      Value v = *it;
      factors.erase(it);
      return v;
    }
  }
  return nullptr;
}

/// `1 + f(...)` (either order): returns the non-constant side.
Value onePlus(Value value) {
  auto add = value.getDefiningOp<tg::AddOp>();
  if (!add) {
    return nullptr;
  }
  if (isSplat(add.getLhs(), 1.0)) return add.getRhs();
  if (isSplat(add.getRhs(), 1.0)) return add.getLhs();
  return nullptr;
}

/// x * sigmoid(x) -> silu(x).
struct RaiseSilu : OpRewritePattern<tg::MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tg::MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [x, s] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      auto sigmoid = s.getDefiningOp<tg::SigmoidOp>();
      if (sigmoid && sigmoid.getInput() == x && x.getType() == op.getType()) {
        auto silu = tg::SiluOp::create(rewriter, op.getLoc(), op.getType(), x);
        annotate(silu, modulePathFromLoc(op.getLoc()));
        rewriter.replaceOp(op, silu.getResult());
        return success();
      }
    }
    return rewriter.notifyMatchFailure(op, "not x * sigmoid(x)");
  }
};

/// Whether `inner` is x / sqrt(2) or x * (1 / sqrt(2)).
bool isScaledBySqrtHalf(Value inner, Value x) {
  if (auto div = inner.getDefiningOp<tg::DivOp>()) {
    return div.getLhs() == x && isSplat(div.getRhs(), std::sqrt(2.0));
  }
  if (auto mul = inner.getDefiningOp<tg::MulOp>()) {
    return (mul.getLhs() == x && isSplat(mul.getRhs(), std::sqrt(0.5))) ||
           (mul.getRhs() == x && isSplat(mul.getLhs(), std::sqrt(0.5)));
  }
  return false;
}

/// Whether `inner` is sqrt(2/pi) * (x + 0.044715 * x^3), any order.
bool isTanhGeluArgument(Value inner, Value x) {
  SmallVector<Value> outer;
  collectFactors(inner, true, outer);
  if (!takeFactor(outer, [](Value v) { return isSplat(v, std::sqrt(2.0 / M_PI)); }) ||
      outer.size() != 1) {
    return false;
  }
  auto add = outer[0].getDefiningOp<tg::AddOp>();
  if (!add) {
    return false;
  }
  Value cubic = add.getLhs() == x ? add.getRhs()
                : add.getRhs() == x ? add.getLhs()
                                    : Value();
  if (!cubic) {
    return false;
  }
  SmallVector<Value> terms;
  collectFactors(cubic, true, terms);
  if (!takeFactor(terms, [](Value v) { return isSplat(v, 0.044715); })) {
    return false;
  }
  // x^3 as pow(x, 3) or x * x * x.
  if (terms.size() == 1) {
    auto pow = terms[0].getDefiningOp<tg::PowOp>();
    return pow && pow.getLhs() == x && isSplat(pow.getRhs(), 3.0);
  }
  return terms.size() == 3 && llvm::all_of(terms, [&](Value v) { return v == x; });
}

struct RaiseGelu : OpRewritePattern<tg::MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tg::MulOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> factors;
    collectFactors(op.getResult(), true, factors);
    if (factors.size() != 3 ||
        !takeFactor(factors, [](Value v) { return isSplat(v, 0.5); })) {
      return rewriter.notifyMatchFailure(op, "not 0.5 * x * (...)");
    }
    for (int pick = 0; pick < 2; ++pick) {
      Value x = factors[pick], bracket = factors[1 - pick];
      Value f = onePlus(bracket);
      if (!f || x.getType() != op.getType()) {
        continue;
      }
      std::optional<tg::GeluApproximation> kind;
      if (auto erf = f.getDefiningOp<tg::ErfOp>()) {
        if (isScaledBySqrtHalf(erf.getInput(), x)) {
          kind = tg::GeluApproximation::None;
        }
      } else if (auto tanh = f.getDefiningOp<tg::TanhOp>()) {
        if (isTanhGeluArgument(tanh.getInput(), x)) {
          kind = tg::GeluApproximation::Tanh;
        }
      }
      if (!kind) {
        continue;
      }
      auto gelu = tg::GeluOp::create(
          rewriter, op.getLoc(), op.getType(), x,
          tg::GeluApproximationAttr::get(rewriter.getContext(), *kind));
      annotate(gelu, modulePathFromLoc(op.getLoc()));
      rewriter.replaceOp(op, gelu.getResult());
      return success();
    }
    return rewriter.notifyMatchFailure(op, "no erf or tanh GELU bracket");
  }
};

struct RaiseActivationsPass
    : impl::RaiseActivationsPassBase<RaiseActivationsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // GELU first: its product trees would otherwise be half-consumed.
    patterns.add<RaiseGelu>(&getContext(), /*benefit=*/2);
    patterns.add<RaiseSilu>(&getContext(), /*benefit=*/1);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      signalPassFailure();
    }
  }
};

} // namespace
} // namespace tailor::graph
