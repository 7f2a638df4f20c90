//===- RaiseRope.cpp - x*cos + rotate_half(x)*sin -> tg.rope --------------===//

#include "passes/graph/Passes.h"
#include "passes/graph/RaiseUtils.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_RAISEROPEPASS
#include "passes/graph/Passes.h.inc"

namespace {

/// Whether `s` is x[..., begin:end] (unit steps, other dims whole).
bool isLastDimSlice(Value s, Value x, int64_t begin, int64_t end) {
  auto slice = s.getDefiningOp<tg::SliceOp>();
  if (!slice || slice.getInput() != x) {
    return false;
  }
  ArrayRef<int64_t> shape = shapeOf(x);
  size_t last = shape.size() - 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (slice.getSteps()[d] != 1) {
      return false;
    }
    int64_t b = d == last ? begin : 0, e = d == last ? end : shape[d];
    if (slice.getStarts()[d] != b || slice.getEnds()[d] != e) {
      return false;
    }
  }
  return true;
}

/// If `v` is rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2]), returns x.
Value rotateHalfInput(Value v) {
  auto concat = v.getDefiningOp<tg::ConcatOp>();
  if (!concat || concat.getInputs().size() != 2) {
    return nullptr;
  }
  auto neg = concat.getInputs()[0].getDefiningOp<tg::NegOp>();
  if (!neg) {
    return nullptr;
  }
  auto hi = neg.getInput().getDefiningOp<tg::SliceOp>();
  if (!hi) {
    return nullptr;
  }
  Value x = hi.getInput();
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t dim = shape.back();
  if (concat.getAxis() != static_cast<uint64_t>(rank - 1) || dim % 2 != 0 ||
      !isLastDimSlice(neg.getInput(), x, dim / 2, dim) ||
      !isLastDimSlice(concat.getInputs()[1], x, 0, dim / 2)) {
    return nullptr;
  }
  return x;
}

/// The shape tg.rope wants for a cos/sin table ([T, D] or [B, T, D]) given
/// its broadcast shape [B|1, 1, T, D] (or [B|1, T, D], or [T, D]).
std::optional<SmallVector<int64_t>> ropeTableShape(Value table,
                                                   ArrayRef<int64_t> input) {
  ArrayRef<int64_t> shape = shapeOf(table);
  int64_t b = input[0], t = input[2], d = input[3];
  int64_t batch;
  if (shape.size() == 4 && shape[1] == 1 && shape[2] == t && shape[3] == d) {
    batch = shape[0];
  } else if (shape.size() == 3 && shape[1] == t && shape[2] == d) {
    batch = shape[0];
  } else if (shape.size() == 2 && shape[0] == t && shape[1] == d) {
    batch = 1;
  } else {
    return std::nullopt;
  }
  if (batch == 1) {
    return SmallVector<int64_t>{t, d};
  }
  if (batch != b) {
    return std::nullopt;
  }
  return SmallVector<int64_t>{b, t, d};
}

Value reshapeTable(PatternRewriter &rewriter, Location loc, Value table,
                   ArrayRef<int64_t> shape) {
  if (shapeOf(table) == shape) {
    return table;
  }
  return tg::ReshapeOp::create(
      rewriter, loc,
      RankedTensorType::get(shape, getElementTypeOrSelf(table.getType())), table);
}

struct RaiseRope : OpRewritePattern<tg::AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tg::AddOp op,
                                PatternRewriter &rewriter) const override {
    auto a = op.getLhs().getDefiningOp<tg::MulOp>();
    auto b = op.getRhs().getDefiningOp<tg::MulOp>();
    if (!a || !b) {
      return rewriter.notifyMatchFailure(op, "not a sum of two products");
    }
    // One product is x * cos, the other rotate_half(x) * sin.
    for (auto [plain, rotated] : {std::pair(a, b), std::pair(b, a)}) {
      for (auto [r, sin] : {std::pair(rotated.getLhs(), rotated.getRhs()),
                            std::pair(rotated.getRhs(), rotated.getLhs())}) {
        Value x = rotateHalfInput(r);
        if (!x || shapeOf(x).size() != 4 || x.getType() != op.getType()) {
          continue;
        }
        Value cos;
        if (plain.getLhs() == x) cos = plain.getRhs();
        else if (plain.getRhs() == x) cos = plain.getLhs();
        if (!cos || getElementTypeOrSelf(cos.getType()) !=
                        getElementTypeOrSelf(x.getType())) {
          continue;
        }
        std::optional<SmallVector<int64_t>> cosShape = ropeTableShape(cos, shapeOf(x));
        std::optional<SmallVector<int64_t>> sinShape = ropeTableShape(sin, shapeOf(x));
        if (!cosShape || !sinShape || *cosShape != *sinShape ||
            cos.getType() != sin.getType()) {
          continue;
        }
        Value cosTable = reshapeTable(rewriter, op.getLoc(), cos, *cosShape);
        Value sinTable = reshapeTable(rewriter, op.getLoc(), sin, *sinShape);
        auto rope = tg::RopeOp::create(rewriter, op.getLoc(), op.getType(), x,
                                       cosTable, sinTable, /*interleaved=*/nullptr);
        // The rope belongs to the attention module of the projection it
        // rotates.
        if (std::optional<std::string> parent = nearestParentModule(x)) {
          annotate(rope, parent);
        }
        rewriter.replaceOp(op, rope.getResult());
        return success();
      }
    }
    return rewriter.notifyMatchFailure(op, "not x*cos + rotate_half(x)*sin");
  }
};

struct RaiseRopePass : impl::RaiseRopePassBase<RaiseRopePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseRope>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      signalPassFailure();
    }
  }
};

} // namespace
} // namespace tailor::graph
