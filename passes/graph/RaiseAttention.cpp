//===- RaiseAttention.cpp - softmax(q k^T * s + mask) v -> tg.attention ---===//
//
// Matches from the output matmul backwards:
//   out    = matmul(probs, v)
//   probs  = softmax(masked, axis = -1)
//   masked = scores + M | where(C, scores, -inf) | scores
//   scores = matmul(q, k^T) * s | matmul(q, k^T) / s | matmul(q*a, k^T*b)
// M and C must be generated masks (tg.band_mask, what the importer makes of
// every mask an export computes from shapes, seen through casts, reshapes and
// broadcasts) or constants; they decide `causal` (a mask that hides exactly
// the keys after each query) or no mask at all. Anything else (a padding mask
// computed from an attention_mask input, a sliding window) is left alone.
// Key/value heads repeated for grouped-query attention by reshape ->
// broadcast -> reshape are unrepeated: tg.attention reads them natively.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"
#include "passes/graph/RaiseUtils.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_RAISEATTENTIONPASS
#include "passes/graph/Passes.h.inc"

namespace {

enum class MaskKind { None, Causal, Other };

/// How a mask's values read: added to the scores (0 allowed, very negative
/// hidden), or a boolean that keeps (where(C, scores, -inf)) or hides
/// (masked_fill: where(C, -inf, scores)) the entries where it is true.
enum class MaskUse { Additive, Keep, Hide };

/// Classifies a constant mask over [..., T, S]: an allowed entry is 0 (or
/// true for a boolean keep-mask), a hidden one very negative (or false).
MaskKind classifyMaskAttr(DenseElementsAttr attr, int64_t t, int64_t s,
                          MaskUse use);

/// Looks through ops that keep a mask's last two axes (broadcast over heads,
/// reshapes of leading axes) and casts; a band mask is the same for every
/// leading index, so its values survive them.
Value maskSource(Value mask) {
  while (true) {
    mask = skipCasts(mask);
    Operation *op = mask.getDefiningOp();
    if (!op || !llvm::isa<tg::BroadcastOp, tg::ReshapeOp>(op)) {
      return mask;
    }
    ArrayRef<int64_t> in = shapeOf(op->getOperand(0)), out = shapeOf(mask);
    if (in.size() < 2 || out.size() < 2 || in.take_back(2) != out.take_back(2)) {
      return mask;
    }
    mask = op->getOperand(0);
  }
}

/// Whether `v` is a mask raise-attention can read: generated or constant.
bool isMaskSource(Value v) {
  Value source = maskSource(v);
  return source.getDefiningOp<tg::BandMaskOp>() ||
         matchPattern(source, m_Constant());
}

/// Classifies a generated band mask over scores [.., T, S]: which diagonals
/// d = j - i it allows must be exactly those of a causal mask (d <= S - T),
/// or all of them.
MaskKind classifyBand(tg::BandMaskOp band, int64_t t, int64_t s,
                      MaskUse use, int64_t &window) {
  ArrayRef<int64_t> shape = shapeOf(band.getResult());
  if (shape[shape.size() - 2] != t || shape.back() != s) {
    return MaskKind::Other;
  }
  auto allowed = [&](double v) -> std::optional<bool> {
    if (use == MaskUse::Keep) return v != 0.0;
    if (use == MaskUse::Hide) return v == 0.0;
    if (v == 0.0) return true;
    if (v <= -1e4) return false;
    return std::nullopt;
  };
  std::optional<bool> inside = allowed(band.getInside().convertToDouble());
  std::optional<bool> outside = allowed(band.getOutside().convertToDouble());
  if (!inside || !outside || (!*inside && !*outside)) {
    return MaskKind::Other;
  }
  if (*inside && *outside) {
    return MaskKind::None;
  }
  // The allowed diagonals as one interval [lo, hi] of [-(T-1), S-1].
  int64_t first = -(t - 1), last = s - 1;
  int64_t lower = band.getLowerDiagonal(), upper = band.getUpperDiagonal();
  int64_t lo, hi;
  if (*inside) {
    lo = std::max(lower, first);
    hi = std::min(upper, last);
  } else if (lower <= first) {
    lo = upper + 1;
    hi = last;
  } else if (upper >= last) {
    lo = first;
    hi = lower - 1;
  } else {
    return MaskKind::Other;
  }
  if (lo == first && hi == last) {
    return MaskKind::None;
  }
  if (hi != s - t || lo > hi) {
    return MaskKind::Other;
  }
  // Allowed from lo on: a sliding window of hi - lo + 1 keys, unless it
  // reaches the first key of the first query anyway.
  window = lo == first ? 0 : hi - lo + 1;
  return MaskKind::Causal;
}

/// Classifies a generated or constant mask; results for constants are cached
/// per (uniqued) attribute, since every layer of an export adds the same
/// mask.
MaskKind classifyMask(Value mask, int64_t t, int64_t s, MaskUse use,
                      llvm::DenseMap<std::pair<Attribute, MaskUse>, MaskKind> &cache,
                      int64_t &window) {
  if (auto band = maskSource(mask).getDefiningOp<tg::BandMaskOp>()) {
    return classifyBand(band, t, s, use, window);
  }
  DenseElementsAttr attr;
  if (!matchPattern(maskSource(mask), m_Constant(&attr))) {
    return MaskKind::Other;
  }
  auto [it, inserted] =
      cache.try_emplace(std::make_pair(Attribute(attr), use), MaskKind::Other);
  if (inserted) {
    it->second = classifyMaskAttr(attr, t, s, use);
  }
  return it->second;
}

MaskKind classifyMaskAttr(DenseElementsAttr attr, int64_t t, int64_t s,
                          MaskUse use) {
  ArrayRef<int64_t> shape = attr.getType().getShape();
  if (shape.size() < 2) {
    return MaskKind::Other;
  }
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if ((rows != t && rows != 1) || (cols != s && cols != 1)) {
    return MaskKind::Other;
  }
  // Masks are as large as T x S (4M entries at 2048 tokens) and every layer
  // reads the same one: read f32 and bool masks through their raw data.
  bool isF32 = attr.getElementType().isF32();
  // Raw f32 data is contiguous (one element when splat, read only at 0).
  const float *floats =
      isF32 ? reinterpret_cast<const float *>(attr.getRawData().data()) : nullptr;
  auto allowedAt = [&](int64_t flat) -> std::optional<bool> {
    if (use != MaskUse::Additive) {
      return attr.getValues<bool>()[flat] == (use == MaskUse::Keep);
    }
    double v = isF32 ? static_cast<double>(floats[flat])
                     : attr.getValues<APFloat>()[flat].convertToDouble();
    if (v == 0.0) return true;
    if (v <= -1e4) return false;
    return std::nullopt;
  };
  if (attr.isSplat()) {
    std::optional<bool> allowed = allowedAt(0);
    return allowed && *allowed ? MaskKind::None : MaskKind::Other;
  }
  if (rows != t || cols != s) {
    return MaskKind::Other;
  }
  int64_t matrices = attr.getNumElements() / (rows * cols);
  bool anyHidden = false;
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        std::optional<bool> allowed = allowedAt((m * rows + i) * cols + j);
        bool causalAllows = j <= i + (s - t);
        if (!allowed || *allowed != causalAllows) {
          return MaskKind::Other;
        }
        anyHidden |= !*allowed;
      }
    }
  }
  return anyHidden ? MaskKind::Causal : MaskKind::None;
}

/// Key or value heads before repeat_kv: `source`, to be reshaped to `shape`
/// [B, Hkv, S, D] when it has another shape (the canonicalizer may have
/// merged the unsqueeze into an earlier reshape).
struct Unrepeated {
  Value source;
  SmallVector<int64_t> shape;
};

/// Undoes repeat_kv. `x`, seen as `shape` = [B, Hkv*n, S, D], is the
/// expansion reshape(X -> [B,Hkv,1,S,D]) -> broadcast to [B,Hkv,n,S,D]
/// (-> reshape), whatever X's own shape (repeat_interleave exports
/// unsqueeze + Tile, Hugging Face's repeat_kv expand + reshape).
std::optional<Unrepeated> unrepeatHeads(Value x, ArrayRef<int64_t> shape) {
  if (auto reshape = x.getDefiningOp<tg::ReshapeOp>()) {
    x = reshape.getInput();
  }
  auto broadcast = x.getDefiningOp<tg::BroadcastOp>();
  if (!broadcast || shape.size() != 4) {
    return std::nullopt;
  }
  ArrayRef<int64_t> narrow = shapeOf(broadcast.getInput());
  ArrayRef<int64_t> wide = shapeOf(broadcast.getResult());
  if (narrow.size() != 5 || wide.size() != 5 || narrow[2] != 1 ||
      narrow[0] != wide[0] || narrow[1] != wide[1] || narrow[3] != wide[3] ||
      narrow[4] != wide[4] || shape[0] != wide[0] ||
      shape[1] != wide[1] * wide[2] || shape[2] != wide[3] ||
      shape[3] != wide[4]) {
    return std::nullopt;
  }
  Value inner = broadcast.getInput();
  if (auto reshape = inner.getDefiningOp<tg::ReshapeOp>()) {
    inner = reshape.getInput();
  }
  return Unrepeated{inner, {wide[0], wide[1], wide[3], wide[4]}};
}

/// `u.source` with shape `u.shape` (a reshape when it differs).
Value materializeUnrepeated(PatternRewriter &rewriter, const Unrepeated &u) {
  if (shapeOf(u.source) == ArrayRef<int64_t>(u.shape)) {
    return u.source;
  }
  return tg::ReshapeOp::create(
      rewriter, u.source.getLoc(),
      RankedTensorType::get(u.shape, getElementTypeOrSelf(u.source.getType())),
      u.source);
}

/// How to get k [B, H, S, D] from the k^T operand of the scores matmul,
/// decided before anything is created.
struct KeyPlan {
  Value source;
  /// Permutation to apply to `source` (empty: none).
  SmallVector<int64_t> permutation;
  /// Shape to reshape `source` to (empty: none).
  SmallVector<int64_t> reshape;
  SmallVector<int64_t> shape;
};

/// The plan for a key found before repeat_kv.
KeyPlan planOf(const Unrepeated &u) {
  bool reshape = shapeOf(u.source) != ArrayRef<int64_t>(u.shape);
  return KeyPlan{u.source, {}, reshape ? u.shape : SmallVector<int64_t>(),
                 u.shape};
}

std::optional<KeyPlan> planKey(Value keyT) {
  ArrayRef<int64_t> kt = shapeOf(keyT);
  if (kt.size() != 4) {
    return std::nullopt;
  }
  // The dynamo exporter transposes k on flattened heads:
  // reshape(transpose(reshape(X -> [B*H, S, D]), [0, 2, 1]) -> [B, H, D, S]).
  if (auto outer = keyT.getDefiningOp<tg::ReshapeOp>()) {
    auto flat = outer.getInput().getDefiningOp<tg::TransposeOp>();
    auto inner = flat ? flat.getInput().getDefiningOp<tg::ReshapeOp>() : nullptr;
    if (inner && flat.getPermutation() == ArrayRef<int64_t>{0, 2, 1} &&
        shapeOf(inner.getResult()) ==
            ArrayRef<int64_t>{kt[0] * kt[1], kt[3], kt[2]}) {
      SmallVector<int64_t> shape{kt[0], kt[1], kt[3], kt[2]};
      Value x = inner.getInput();
      if (std::optional<Unrepeated> base = unrepeatHeads(x, shape)) {
        return planOf(*base);
      }
      if (shapeOf(x) == ArrayRef<int64_t>(shape)) {
        return KeyPlan{x, {}, {}, shape};
      }
      return KeyPlan{x, {}, shape, shape};
    }
  }
  // k^T = transpose(X, p): k = transpose(X, p with its last two entries
  // swapped). The canonicalizer often merged the head transpose
  // [0, 2, 1, 3] with k^T's [0, 1, 3, 2] into one [0, 2, 3, 1].
  auto transpose = keyT.getDefiningOp<tg::TransposeOp>();
  if (!transpose) {
    return std::nullopt;
  }
  SmallVector<int64_t> perm(transpose.getPermutation());
  std::swap(perm[2], perm[3]);
  Value x = transpose.getInput();
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    shape.push_back(shapeOf(x)[p]);
  }
  if (perm == ArrayRef<int64_t>{0, 1, 2, 3}) {
    if (std::optional<Unrepeated> base = unrepeatHeads(x, shape)) {
      return planOf(*base);
    }
    return KeyPlan{x, {}, {}, shape};
  }
  return KeyPlan{x, perm, {}, shape};
}

/// Splits off a splat factor: x * c (either order) -> (x, c).
std::pair<Value, double> splitScale(Value v) {
  if (auto mul = v.getDefiningOp<tg::MulOp>()) {
    if (std::optional<double> c = splatValue(mul.getRhs())) {
      return {mul.getLhs(), *c};
    }
    if (std::optional<double> c = splatValue(mul.getLhs())) {
      return {mul.getRhs(), *c};
    }
  }
  return {v, 1.0};
}

struct RaiseAttention : OpRewritePattern<tg::MatmulOp> {
  /// `unraised` collects, per attention-like matmul (softmax(...) @ v) the
  /// pattern gave up on, why.
  RaiseAttention(MLIRContext *context,
                 llvm::DenseMap<Operation *, std::string> &unraised)
      : OpRewritePattern(context), unraised(unraised) {}
  llvm::DenseMap<Operation *, std::string> &unraised;
  /// Mask attribute -> kind (attributes are uniqued, so per-layer copies of
  /// one mask hit the cache).
  mutable llvm::DenseMap<std::pair<Attribute, MaskUse>, MaskKind> maskCache;
  /// Gives up on an attention-like matmul, remembering why.
  LogicalResult giveUp(tg::MatmulOp op, PatternRewriter &rewriter,
                       StringRef why) const {
    unraised[op] = why.str();
    return rewriter.notifyMatchFailure(op, why);
  }

  LogicalResult matchAndRewrite(tg::MatmulOp op,
                                PatternRewriter &rewriter) const override {
    Value probs = skipCasts(op.getLhs());
    // SDPA exports zero fully masked rows: where(is_nan(p), 0, p).
    if (auto select = probs.getDefiningOp<tg::SelectOp>()) {
      auto isNan = select.getCondition().getDefiningOp<tg::IsNanOp>();
      if (isNan && isNan.getInput() == select.getOnFalse() &&
          isSplat(select.getOnTrue(), 0.0)) {
        probs = skipCasts(select.getOnFalse());
      }
    }
    auto softmax = probs.getDefiningOp<tg::SoftmaxOp>();
    if (!softmax || shapeOf(op.getLhs()).size() != 4 ||
        softmax.getAxis() != 3) {
      return rewriter.notifyMatchFailure(op, "lhs is not a softmax over keys");
    }
    Value scores = skipCasts(softmax.getInput());
    std::optional<Value> mask;
    MaskUse use = MaskUse::Additive;
    if (auto add = scores.getDefiningOp<tg::AddOp>()) {
      // The generated or constant side is the mask.
      if (isMaskSource(add.getRhs())) {
        mask = add.getRhs();
        scores = add.getLhs();
      } else if (isMaskSource(add.getLhs())) {
        mask = add.getLhs();
        scores = add.getRhs();
      } else {
        return giveUp(op, rewriter, "mask is computed at run time");
      }
    } else if (auto select = scores.getDefiningOp<tg::SelectOp>()) {
      std::optional<double> keepFill = splatValue(select.getOnFalse());
      std::optional<double> hideFill = splatValue(select.getOnTrue());
      mask = select.getCondition();
      if (keepFill && *keepFill <= -1e4) {
        use = MaskUse::Keep;
        scores = select.getOnTrue();
      } else if (hideFill && *hideFill <= -1e4) {
        use = MaskUse::Hide;
        scores = select.getOnFalse();
      } else {
        return giveUp(op, rewriter, "select does not fill -inf");
      }
    }
    // Soft-capping (Gemma-2): tanh(scores / c) * c, before the mask.
    std::optional<double> softcap;
    {
      auto [capped, outer] = splitScale(scores);
      if (auto tanh = capped.getDefiningOp<tg::TanhOp>(); tanh && outer > 0) {
        Value inner = tanh.getInput();
        std::optional<double> cap;
        if (auto div = inner.getDefiningOp<tg::DivOp>()) {
          cap = splatValue(div.getRhs());
          inner = div.getLhs();
        } else if (auto [unscaled, c] = splitScale(inner); c != 1.0) {
          cap = 1.0 / c;
          inner = unscaled;
        }
        if (cap && std::fabs(*cap - outer) <= 1e-6 * outer) {
          softcap = outer;
          scores = inner;
        }
      }
    }
    // Scale on the scores.
    double scale = 1.0;
    if (auto div = scores.getDefiningOp<tg::DivOp>()) {
      std::optional<double> c = splatValue(div.getRhs());
      if (!c || *c == 0.0) {
        return giveUp(op, rewriter, "scores divided by a non-constant");
      }
      scale /= *c;
      scores = div.getLhs();
    } else {
      auto [unscaled, c] = splitScale(scores);
      scale *= c;
      scores = unscaled;
    }
    auto qk = scores.getDefiningOp<tg::MatmulOp>();
    if (!qk) {
      return giveUp(op, rewriter, "no q k^T product");
    }
    auto [query, qScale] = splitScale(qk.getLhs());
    auto [keyT, kScale] = splitScale(qk.getRhs());
    scale *= qScale * kScale;
    // Nothing is created until every check passed (a pattern that fails
    // must leave the IR untouched).
    std::optional<KeyPlan> keyPlan = planKey(keyT);
    if (!keyPlan) {
      return giveUp(op, rewriter, "k^T is not a transposed key");
    }
    SmallVector<int64_t> keyShape = keyPlan->shape;
    Value value = op.getRhs();
    std::optional<Unrepeated> valueBase = unrepeatHeads(value, shapeOf(value));
    SmallVector<int64_t> valueShape(valueBase ? ArrayRef<int64_t>(valueBase->shape)
                                              : shapeOf(value));
    ArrayRef<int64_t> q = shapeOf(query), k = keyShape, v = valueShape;
    if (q.size() != 4 || k.size() != 4 || v.size() != 4 || k[1] != v[1] ||
        q[1] % k[1] != 0) {
      return giveUp(op, rewriter, "unexpected head shapes");
    }
    int64_t window = 0;
    MaskKind kind = mask ? classifyMask(*mask, q[2], k[2], use, maskCache, window)
                         : MaskKind::None;
    if (kind == MaskKind::Other) {
      return giveUp(op, rewriter, "the mask is neither causal (with or without a sliding window) nor empty");
    }
    double defaultScale = 1.0 / std::sqrt(static_cast<double>(q[3]));
    FloatAttr scaleAttr;
    if (std::fabs(scale - defaultScale) > 1e-6 * defaultScale) {
      scaleAttr = rewriter.getF64FloatAttr(scale);
    }
    if (getElementTypeOrSelf(query.getType()) != getElementTypeOrSelf(op.getType())) {
      return giveUp(op, rewriter, "mixed precision attention");
    }
    Value key = keyPlan->source;
    Type keyElement = getElementTypeOrSelf(key.getType());
    if (!keyPlan->permutation.empty()) {
      key = tg::TransposeOp::create(
          rewriter, key.getLoc(), RankedTensorType::get(keyShape, keyElement),
          key, rewriter.getDenseI64ArrayAttr(keyPlan->permutation));
    } else if (!keyPlan->reshape.empty()) {
      key = tg::ReshapeOp::create(rewriter, key.getLoc(),
                                  RankedTensorType::get(keyShape, keyElement), key);
    }
    if (valueBase) {
      value = materializeUnrepeated(rewriter, *valueBase);
    }
    unraised.erase(op);
    auto attention = tg::AttentionOp::create(
        rewriter, op.getLoc(), op.getType(), query, key, value,
        kind == MaskKind::Causal ? rewriter.getUnitAttr() : nullptr, scaleAttr,
        window > 0 ? rewriter.getI64IntegerAttr(window) : nullptr,
        softcap ? rewriter.getF64FloatAttr(*softcap) : nullptr);
    // The scores matmul was exported inside the attention module itself.
    std::optional<std::string> path = modulePathFromLoc(qk.getLoc());
    if (!path) {
      path = nearestParentModule(query);
    }
    annotate(attention, path);
    rewriter.replaceOp(op, attention.getResult());
    return success();
  }
};

/// Every attention-like region left as matmul/softmax kernels: a warning at
/// the matmul, and an entry {module, reason} in the function's
/// `tg.unraised_attention` list, which lowering carries into the plan for
/// `tailor inspect`.
void reportUnraised(func::FuncOp func,
                    const llvm::DenseMap<Operation *, std::string> &unraised) {
  SmallVector<Attribute> entries;
  Builder b(func.getContext());
  func.walk([&](tg::MatmulOp matmul) {
    auto it = unraised.find(matmul);
    if (it == unraised.end()) {
      return;
    }
    std::string where = nearestParentModule(matmul.getLhs()).value_or("");
    if (where.empty()) {
      where = modulePathFromLoc(matmul.getLoc()).value_or("");
    }
    matmul->emitWarning() << "attention left as matmul and softmax kernels "
                             "(a T x S score tensor per head"
                          << (where.empty() ? "" : " in " + where)
                          << "): " << it->second;
    entries.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("module", b.getStringAttr(where)),
         b.getNamedAttr("reason", b.getStringAttr(it->second))}));
  });
  if (!entries.empty()) {
    func->setAttr(tg::TGDialect::kUnraisedAttentionAttrName,
                  b.getArrayAttr(entries));
  }
}

struct RaiseAttentionPass : impl::RaiseAttentionPassBase<RaiseAttentionPass> {
  void runOnOperation() override {
    llvm::DenseMap<Operation *, std::string> unraised;
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseAttention>(&getContext(), unraised);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      return signalPassFailure();
    }
    reportUnraised(getOperation(), unraised);
  }
};

} // namespace
} // namespace tailor::graph
