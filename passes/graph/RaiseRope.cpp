//===- RaiseRope.cpp - x*cos + rotate_half(x)*sin -> tg.rope --------------===//
//
// Two layouts, recognized by their dataflow:
//   rotate-half (Hugging Face): x * cos + cat(-x[D/2:], x[:D/2]) * sin;
//   interleaved pairs (Meta's reference Llama, GPT-J): with x1 = x[..., 0::2]
//   and x2 = x[..., 1::2], stack(x1 * c - x2 * s, x1 * s + x2 * c, -1),
//   where c and s hold one angle per pair; tg.rope's interleaved tables hold
//   it for both members, so the tables are widened (each column repeated).
//
//===----------------------------------------------------------------------===//

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

/// If `v` is x[..., first::2] over the last axis (every other dim whole),
/// returns x.
Value strideTwoSliceInput(Value v, int64_t first) {
  auto slice = v.getDefiningOp<tg::SliceOp>();
  if (!slice) {
    return nullptr;
  }
  ArrayRef<int64_t> shape = shapeOf(slice.getInput());
  size_t last = shape.size() - 1;
  if (shape.empty() || shape.back() % 2 != 0) {
    return nullptr;
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    bool lastAxis = d == last;
    if (slice.getStarts()[d] != (lastAxis ? first : 0) ||
        slice.getSteps()[d] != (lastAxis ? 2 : 1) ||
        shapeOf(slice.getResult())[d] != (lastAxis ? shape[d] / 2 : shape[d])) {
      return nullptr;
    }
  }
  return slice.getInput();
}

/// The two factors of a product, in either order, as (the one that is
/// `x`, the other); nulls if neither is.
std::pair<Value, Value> factorWith(Value product, Value x) {
  auto mul = product.getDefiningOp<tg::MulOp>();
  if (!mul) {
    return {nullptr, nullptr};
  }
  if (mul.getLhs() == x) {
    return {mul.getLhs(), mul.getRhs()};
  }
  if (mul.getRhs() == x) {
    return {mul.getRhs(), mul.getLhs()};
  }
  return {nullptr, nullptr};
}

/// `v` reshaped from [..., n] to [..., n, 1]: returns the [..., n] value.
Value unsqueezedLast(Value v) {
  auto reshape = v.getDefiningOp<tg::ReshapeOp>();
  if (!reshape) {
    return nullptr;
  }
  ArrayRef<int64_t> in = shapeOf(reshape.getInput()), out = shapeOf(v);
  if (out.size() != in.size() + 1 || out.back() != 1 ||
      out.drop_back() != in) {
    return nullptr;
  }
  return reshape.getInput();
}

/// A per-pair table [.., T, D/2] (broadcastable to x1) widened to the
/// [T, D] or [B, T, D] tg.rope reads: each column repeated for both
/// members of its pair. Null if the table's shape does not fit.
Value widenPairTable(PatternRewriter &rewriter, Location loc, Value table,
                     ArrayRef<int64_t> input) {
  ArrayRef<int64_t> shape = shapeOf(table);
  int64_t b = input[0], t = input[2], half = input[3] / 2;
  SmallVector<int64_t> lead;
  if (shape.size() == 4 && shape[1] == 1 && shape[2] == t && shape[3] == half &&
      (shape[0] == 1 || shape[0] == b)) {
    lead = shape[0] == 1 ? SmallVector<int64_t>{t} : SmallVector<int64_t>{b, t};
  } else if (shape.size() == 2 && shape[0] == t && shape[1] == half) {
    lead = {t};
  } else {
    return nullptr;
  }
  Type elem = getElementTypeOrSelf(table.getType());
  auto typeOf = [&](ArrayRef<int64_t> dims) {
    return RankedTensorType::get(dims, elem);
  };
  SmallVector<int64_t> narrow(lead), pairs(lead), wide(lead);
  narrow.append({half, 1});
  pairs.append({half, 2});
  wide.push_back(2 * half);
  Value column = tg::ReshapeOp::create(rewriter, loc, typeOf(narrow), table);
  Value both = tg::BroadcastOp::create(rewriter, loc, typeOf(pairs), column);
  return tg::ReshapeOp::create(rewriter, loc, typeOf(wide), both);
}

/// stack(x1 * c - x2 * s, x1 * s + x2 * c, -1) over x's even and odd
/// members (the concat of the two unsqueezed halves) -> tg.rope
/// {interleaved}, reshaped to the stack's [..., D/2, 2].
struct RaiseInterleavedRope : OpRewritePattern<tg::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tg::ConcatOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> shape = shapeOf(op.getResult());
    if (op.getInputs().size() != 2 || shape.size() != 5 || shape.back() != 2 ||
        op.getAxis() != 4) {
      return rewriter.notifyMatchFailure(op, "not a stack of two halves");
    }
    Value first = unsqueezedLast(op.getInputs()[0]);
    Value second = unsqueezedLast(op.getInputs()[1]);
    auto sub = first ? first.getDefiningOp<tg::SubOp>() : nullptr;
    auto add = second ? second.getDefiningOp<tg::AddOp>() : nullptr;
    if (!sub || !add) {
      return rewriter.notifyMatchFailure(op, "not (x1 c - x2 s, x1 s + x2 c)");
    }
    // x1 * c - x2 * s: find x1 and x2 as the stride-2 slices they are.
    auto ma = sub.getLhs().getDefiningOp<tg::MulOp>();
    auto mb = sub.getRhs().getDefiningOp<tg::MulOp>();
    if (!ma || !mb) {
      return rewriter.notifyMatchFailure(op, "not x1 * c - x2 * s");
    }
    for (Value x1 : {ma.getLhs(), ma.getRhs()}) {
      Value x = strideTwoSliceInput(x1, 0);
      if (!x || !fitsStack(x, op)) {
        continue;
      }
      Value cos = x1 == ma.getLhs() ? ma.getRhs() : ma.getLhs();
      for (Value x2 : {mb.getLhs(), mb.getRhs()}) {
        if (strideTwoSliceInput(x2, 1) != x) {
          continue;
        }
        Value sin = x2 == mb.getLhs() ? mb.getRhs() : mb.getLhs();
        // x1 * s + x2 * c, in either order of terms and factors.
        bool matches = false;
        for (auto [p, q] : {std::pair(add.getLhs(), add.getRhs()),
                            std::pair(add.getRhs(), add.getLhs())}) {
          auto [p1, ps] = factorWith(p, x1);
          auto [q2, qc] = factorWith(q, x2);
          matches |= p1 && q2 && ps == sin && qc == cos;
        }
        if (matches) {
          return rewrite(op, rewriter, x, cos, sin);
        }
      }
    }
    return rewriter.notifyMatchFailure(op, "not an interleaved rotation");
  }

  /// Whether x [B, H, T, D] is what the stack [B, H, T, D/2, 2] rotates.
  static bool fitsStack(Value x, tg::ConcatOp op) {
    ArrayRef<int64_t> in = shapeOf(x), out = shapeOf(op.getResult());
    return in.size() == 4 && in.take_front(3) == out.take_front(3) &&
           in[3] == 2 * out[3] &&
           getElementTypeOrSelf(x.getType()) ==
               getElementTypeOrSelf(op.getResult().getType());
  }

  LogicalResult rewrite(tg::ConcatOp op, PatternRewriter &rewriter, Value x,
                        Value cos, Value sin) const {
    ArrayRef<int64_t> input = shapeOf(x);
    if (shapeOf(cos) != shapeOf(sin) ||
        getElementTypeOrSelf(cos.getType()) != getElementTypeOrSelf(x.getType())) {
      return rewriter.notifyMatchFailure(op, "cos and sin tables differ");
    }
    Value cosTable = widenPairTable(rewriter, op.getLoc(), cos, input);
    if (!cosTable) {
      return rewriter.notifyMatchFailure(op, "unexpected rotary table shape");
    }
    Value sinTable = widenPairTable(rewriter, op.getLoc(), sin, input);
    auto rope = tg::RopeOp::create(rewriter, op.getLoc(), x.getType(), x,
                                   cosTable, sinTable, rewriter.getUnitAttr());
    if (std::optional<std::string> parent = nearestParentModule(x)) {
      annotate(rope, parent);
    }
    rewriter.replaceOpWithNewOp<tg::ReshapeOp>(op, op.getResult().getType(),
                                               rope);
    return success();
  }
};

struct RaiseRopePass : impl::RaiseRopePassBase<RaiseRopePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseRope, RaiseInterleavedRope>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      signalPassFailure();
    }
  }
};

} // namespace
} // namespace tailor::graph
