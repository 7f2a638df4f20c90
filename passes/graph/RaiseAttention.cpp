//===- RaiseAttention.cpp - softmax(q k^T * s + mask) v -> tg.attention ---===//
//
// Matches from the output matmul backwards:
//   out    = matmul(probs, v)      (4-D, or 3-D on flattened heads [B*H, ..])
//   probs  = softmax(masked, axis = -1)
//   masked = sum of terms | where(C, sum, -inf) | where(C, -inf, sum)
//   terms  = scores, masks M, ALiBi A, at most one other bias X
//   scores = [c tanh(] matmul(q, k^T) * s [/ c)] | ... / s | matmul(q*a, k^T*b)
// The sum is read through adds, casts and a reshape from flattened heads
// (BLOOM's baddbmm(alibi, q, k^T) on [B*H, T, S]). M and C must be generated
// masks (tg.band_mask, what the importer makes of every mask an export
// computes from shapes, seen through casts, reshapes and broadcasts) or
// constants; they decide `causal` (a mask that hides exactly the keys after
// each query, with or without a sliding window) or no mask at all. A
// compile-time term whose every [b, h, t] row is c + slope_h * s (one slope
// per head) is ALiBi: `alibi_slopes` (the per-row constant c cancels in the
// softmax, so BLOOM's slope * s and MPT's slope * (s - S + 1) are one
// form). A padding mask joined with the causal one, Hugging Face's
// select(and(C, K), 0, -big) for an attention_mask input, is split: C gives
// `causal` and the bias is select(K, 0, -big) over the keys alone. Any other
// term (a constant that is neither mask nor ALiBi, a run-time bias) becomes
// the `bias` operand, reshaped to rank 4. Key/value heads repeated for grouped-query
// attention by reshape -> broadcast -> reshape are unrepeated: tg.attention
// reads them natively.
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

/// A term of the sum the softmax reads. `flat`: found below a reshape of
/// [B*H, T, S] to [B, H, T, S] (BLOOM's baddbmm on flattened heads), so
/// its leading dim counts B*H.
struct ScoreTerm {
  Value value;
  bool flat;
};

/// Flattens the sum feeding the softmax over scores `scores` = [B, H, T, S]
/// into its terms, through adds, casts and one reshape from flattened heads.
void collectTerms(Value v, bool flat, ArrayRef<int64_t> scores,
                  SmallVectorImpl<ScoreTerm> &terms) {
  v = skipCasts(v);
  if (auto add = v.getDefiningOp<tg::AddOp>()) {
    collectTerms(add.getLhs(), flat, scores, terms);
    collectTerms(add.getRhs(), flat, scores, terms);
    return;
  }
  if (auto reshape = v.getDefiningOp<tg::ReshapeOp>(); reshape && !flat) {
    ArrayRef<int64_t> in = shapeOf(reshape.getInput());
    if (in.size() == 3 && shapeOf(v) == scores &&
        in == ArrayRef<int64_t>{scores[0] * scores[1], scores[2], scores[3]}) {
      collectTerms(reshape.getInput(), true, scores, terms);
      return;
    }
  }
  terms.push_back({v, flat});
}

/// The shape of `term` read as [B, H, T, S]-broadcastable (rank 4), or
/// nothing: leading ones added, and a flat term's leading dim (1 or B*H)
/// split into two.
std::optional<SmallVector<int64_t>> shape4Of(ArrayRef<int64_t> shape,
                                             bool flat,
                                             ArrayRef<int64_t> scores) {
  size_t rank = flat ? 3 : 4;
  if (shape.size() > rank) {
    return std::nullopt;
  }
  SmallVector<int64_t> padded(rank - shape.size(), 1);
  padded.append(shape.begin(), shape.end());
  if (flat) {
    if (padded[0] != 1 && padded[0] != scores[0] * scores[1]) {
      return std::nullopt;
    }
    bool whole = padded[0] != 1;
    padded = {whole ? scores[0] : 1, whole ? scores[1] : 1, padded[1],
              padded[2]};
  }
  for (size_t i = 0; i < 4; ++i) {
    if (padded[i] != 1 && padded[i] != scores[i]) {
      return std::nullopt;
    }
  }
  return padded;
}

/// Reads a compile-time score bias as ALiBi: per [B, H, T] row, values
/// c + slope_h * s with one slope per head (a per-row constant, slope 0,
/// is no bias at all under softmax). Returns Hq slopes, or nothing.
std::optional<SmallVector<double>> alibiSlopesOf(DenseElementsAttr attr,
                                                 ArrayRef<int64_t> shape4,
                                                 int64_t heads) {
  if (!llvm::isa<FloatType>(attr.getElementType())) {
    return std::nullopt;
  }
  SmallVector<double> values;
  for (const APFloat &v : attr.getValues<APFloat>()) {
    values.push_back(v.convertToDouble());
  }
  int64_t s = shape4[3], rows = s == 0 ? 0 : attr.getNumElements() / s;
  if (attr.isSplat()) {
    return SmallVector<double>(heads, 0.0);
  }
  SmallVector<std::optional<double>> perHead(shape4[1]);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = values.data() + r * s;
    double slope = s > 1 ? (row[s - 1] - row[0]) / static_cast<double>(s - 1)
                         : 0.0;
    for (int64_t j = 0; j < s; ++j) {
      double expected = row[0] + slope * static_cast<double>(j);
      if (!std::isfinite(row[j]) ||
          std::fabs(row[j] - expected) >
              1e-6 * (1.0 + std::fabs(row[0]) + std::fabs(expected))) {
        return std::nullopt;
      }
    }
    std::optional<double> &known = perHead[(r / shape4[2]) % shape4[1]];
    if (known && std::fabs(*known - slope) > 1e-6 * std::fabs(slope)) {
      return std::nullopt;
    }
    known = slope;
  }
  SmallVector<double> slopes;
  for (int64_t h = 0; h < heads; ++h) {
    slopes.push_back(perHead[shape4[1] == 1 ? 0 : h].value_or(0.0));
  }
  return slopes;
}

/// How to get an operand [B, H, N, D] from what the attention matmuls read:
/// `source`, transposed by `permutation` or reshaped to `reshape` (empty:
/// neither), decided before anything is created.
Value materialize(PatternRewriter &rewriter, const KeyPlan &plan) {
  Value x = plan.source;
  auto type =
      RankedTensorType::get(plan.shape, getElementTypeOrSelf(x.getType()));
  if (!plan.permutation.empty()) {
    return tg::TransposeOp::create(
        rewriter, x.getLoc(), type, x,
        rewriter.getDenseI64ArrayAttr(plan.permutation));
  }
  if (!plan.reshape.empty()) {
    return tg::ReshapeOp::create(rewriter, x.getLoc(), type, x);
  }
  return x;
}

/// A flattened-heads operand x [B*H, N, D] as [B, H, N, D]: the reshape's
/// source when x is one (before repeat_kv when that was repeated), else a
/// reshape of x.
std::optional<KeyPlan> planFlat(Value x, int64_t batch) {
  ArrayRef<int64_t> flat = shapeOf(x);
  if (flat.size() != 3 || batch <= 0 || flat[0] % batch != 0) {
    return std::nullopt;
  }
  SmallVector<int64_t> shape{batch, flat[0] / batch, flat[1], flat[2]};
  if (std::optional<Unrepeated> base = unrepeatHeads(x, shape)) {
    return planOf(*base);
  }
  if (auto reshape = x.getDefiningOp<tg::ReshapeOp>()) {
    if (shapeOf(reshape.getInput()) == ArrayRef<int64_t>(shape)) {
      return KeyPlan{reshape.getInput(), {}, {}, shape};
    }
  }
  return KeyPlan{x, {}, shape, shape};
}

/// How to get q, k, v [B, H, N, D] (decided, nothing created).
struct OperandPlans {
  std::optional<KeyPlan> query, key, value;
};

/// Plans q, k, v from the q k^T product's operands and the output
/// matmul's v, on flattened heads [B*H, N, D] where `flatScores` /
/// `flatOutput` say so; nothing (with `why`) when they do not fit.
std::optional<OperandPlans> planOperands(Value query, Value keyT, Value value,
                                         bool flatScores, bool flatOutput,
                                         int64_t batch, std::string &why) {
  OperandPlans plans;
  why = "unexpected head shapes";
  if (flatScores) {
    auto transpose = keyT.getDefiningOp<tg::TransposeOp>();
    if (!transpose ||
        transpose.getPermutation() != ArrayRef<int64_t>{0, 2, 1}) {
      why = "k^T is not a transposed key";
      return std::nullopt;
    }
    plans.query = planFlat(query, batch);
    plans.key = planFlat(transpose.getInput(), batch);
  } else {
    plans.query = KeyPlan{query, {}, {}, SmallVector<int64_t>(shapeOf(query))};
    plans.key = planKey(keyT);
    if (!plans.key) {
      why = "k^T is not a transposed key";
      return std::nullopt;
    }
  }
  if (flatOutput) {
    plans.value = planFlat(value, batch);
  } else if (std::optional<Unrepeated> base =
                 unrepeatHeads(value, shapeOf(value))) {
    plans.value = planOf(*base);
  } else {
    plans.value = KeyPlan{value, {}, {}, SmallVector<int64_t>(shapeOf(value))};
  }
  if (!plans.query || !plans.key || !plans.value) {
    return std::nullopt;
  }
  return plans;
}

/// The scores term peeled down to q k^T: softcap, then scale.
struct PeeledScores {
  tg::MatmulOp qk;
  double scale = 1.0;
  std::optional<double> softcap;
};

/// Peels `scores` = [c * tanh(] s * matmul(q * a, k^T * b) [/ c)]; fails
/// with the reason when no q k^T product is under it.
FailureOr<PeeledScores> peelScores(Value scores, std::string &why) {
  PeeledScores peeled;
  // Soft-capping (Gemma-2): tanh(scores / c) * c, before the mask.
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
      peeled.softcap = outer;
      scores = inner;
    }
  }
  if (auto div = scores.getDefiningOp<tg::DivOp>()) {
    std::optional<double> c = splatValue(div.getRhs());
    if (!c || *c == 0.0) {
      why = "scores divided by a non-constant";
      return failure();
    }
    peeled.scale /= *c;
    scores = div.getLhs();
  } else {
    auto [unscaled, c] = splitScale(scores);
    peeled.scale *= c;
    scores = unscaled;
  }
  peeled.qk = scores.getDefiningOp<tg::MatmulOp>();
  if (!peeled.qk) {
    why = "no q k^T product";
    return failure();
  }
  return peeled;
}

/// A padding mask over the keys, split off the causal mask it was joined
/// with: the additive term select(and(band, keep), allowed, hidden) becomes
/// `causal` plus the bias select(keep, allowed, hidden), made when the
/// pattern rewrites ([B, 1, 1, S] rather than [B, 1, T, S]).
struct KeyPadding {
  /// The term as exported (its type gives the bias's element type).
  Value term;
  /// i1, true for the keys every query may see; broadcasts as [B, 1, 1, S].
  Value keep;
  Value allowed, hidden;
};

/// What the terms added to the scores amount to.
struct ScoreBiases {
  MaskKind kind = MaskKind::None;
  int64_t window = 0;
  std::optional<SmallVector<double>> alibi;
  /// A bias operand to pass (a run-time or non-ALiBi compile-time term).
  std::optional<ScoreTerm> bias;
  /// Or a key padding split off the causal mask, which becomes the bias.
  std::optional<KeyPadding> padding;
  std::optional<ScoreTerm> scores;
};

/// The two sides of `and(a, b)`, spelled select(a, b, false) by the
/// importer, or nothing.
std::optional<std::pair<Value, Value>> splitAnd(Value v) {
  auto select = skipCasts(v).getDefiningOp<tg::SelectOp>();
  if (!select || !getElementTypeOrSelf(select.getType()).isInteger(1) ||
      !isSplat(select.getOnFalse(), 0.0)) {
    return std::nullopt;
  }
  return std::make_pair(select.getCondition(), select.getOnTrue());
}

/// Whether boolean `v` is a mask over the keys alone: broadcast to the
/// scores [B, H, T, S], it is the same for every head and query.
bool isKeyMask(Value v, ArrayRef<int64_t> scores) {
  std::optional<SmallVector<int64_t>> shape4 =
      shape4Of(shapeOf(v), false, scores);
  return getElementTypeOrSelf(v.getType()).isInteger(1) && shape4 &&
         (*shape4)[1] == 1 && (*shape4)[2] == 1 && (*shape4)[3] == scores[3];
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

  /// Sorts the terms of the sum under the softmax (scores [B, H, T, S]):
  /// masks (generated or constant), ALiBi (compile-time, affine in the key
  /// index), the q k^T scores, and at most one other bias. Fails with why.
  LogicalResult sortTerms(ArrayRef<ScoreTerm> terms, ArrayRef<int64_t> scores,
                          ScoreBiases &out, std::string &why) const {
    int64_t t = scores[2], s = scores[3];
    for (const ScoreTerm &term : terms) {
      if (isMaskSource(term.value)) {
        int64_t window = 0;
        MaskKind kind = classifyMask(term.value, t, s, MaskUse::Additive,
                                     maskCache, window);
        if (kind == MaskKind::None) {
          continue;
        }
        if (kind == MaskKind::Causal) {
          if (out.kind == MaskKind::Causal) {
            why = "two causal masks are added to the scores";
            return failure();
          }
          out.kind = kind;
          out.window = window;
          continue;
        }
      }
      DenseElementsAttr attr;
      std::optional<SmallVector<int64_t>> shape4 =
          shape4Of(shapeOf(term.value), term.flat, scores);
      if (!shape4) {
        why = "a term added to the scores does not broadcast to them";
        return failure();
      }
      if (!out.alibi &&
          matchPattern(skipCasts(term.value), m_Constant(&attr))) {
        if ((out.alibi = alibiSlopesOf(attr, *shape4, scores[1]))) {
          continue;
        }
      }
      if (!out.scores) {
        std::string ignored;
        if (succeeded(peelScores(term.value, ignored))) {
          out.scores = term;
          continue;
        }
      }
      if (out.bias || out.padding) {
        why = "several run-time biases are added to the scores";
        return failure();
      }
      if (!splitKeyPadding(term, scores, out)) {
        out.bias = term;
      }
    }
    if (!out.scores) {
      // Report why the most likely candidate (a lone term) failed.
      if (out.bias && terms.size() == 1) {
        (void)peelScores(out.bias->value, why);
      } else {
        why = "no q k^T product";
      }
      return failure();
    }
    return success();
  }

  /// Reads `term` as Hugging Face's mask of a padded batch: an additive
  /// select(and(C, K), 0, -big) with C a causal band mask and K a padding
  /// mask over the keys (what masking_utils makes of an attention_mask
  /// input). Records `causal` and the padding in `out` and returns true, or
  /// returns false with `out` untouched.
  bool splitKeyPadding(const ScoreTerm &term, ArrayRef<int64_t> scores,
                       ScoreBiases &out) const {
    auto select = skipCasts(term.value).getDefiningOp<tg::SelectOp>();
    if (term.flat || !select || out.kind == MaskKind::Causal ||
        !isSplat(select.getOnTrue(), 0.0)) {
      return false;
    }
    std::optional<double> hidden = splatValue(select.getOnFalse());
    std::optional<std::pair<Value, Value>> sides =
        splitAnd(select.getCondition());
    if (!hidden || *hidden > -1e4 || !sides) {
      return false;
    }
    for (auto [band, keep] : {*sides, std::make_pair(sides->second,
                                                     sides->first)}) {
      int64_t window = 0;
      if (isMaskSource(band) && isKeyMask(keep, scores) &&
          classifyMask(band, scores[2], scores[3], MaskUse::Keep, maskCache,
                       window) == MaskKind::Causal) {
        out.kind = MaskKind::Causal;
        out.window = window;
        out.padding = KeyPadding{select.getResult(), keep,
                                 select.getOnTrue(), select.getOnFalse()};
        return true;
      }
    }
    return false;
  }

  /// The padding's bias, select(keep, allowed, hidden), as rank 4.
  Value materializePadding(PatternRewriter &rewriter, const KeyPadding &padding,
                           ArrayRef<int64_t> scores) const {
    auto type = RankedTensorType::get(
        shapeOf(padding.keep), getElementTypeOrSelf(padding.term.getType()));
    Value bias = tg::SelectOp::create(rewriter, padding.term.getLoc(), type,
                                      padding.keep, padding.allowed,
                                      padding.hidden);
    return materializeBias(rewriter, ScoreTerm{bias, false}, scores);
  }

  /// The bias operand [.., .., .., S] as rank 4 (a reshape when it is not).
  Value materializeBias(PatternRewriter &rewriter, const ScoreTerm &term,
                        ArrayRef<int64_t> scores) const {
    SmallVector<int64_t> shape4 =
        *shape4Of(shapeOf(term.value), term.flat, scores);
    if (shapeOf(term.value) == ArrayRef<int64_t>(shape4)) {
      return term.value;
    }
    return tg::ReshapeOp::create(
        rewriter, term.value.getLoc(),
        RankedTensorType::get(shape4,
                              getElementTypeOrSelf(term.value.getType())),
        term.value);
  }

  LogicalResult matchAndRewrite(tg::MatmulOp op,
                                PatternRewriter &rewriter) const override {
    // 4-D [B, H, T, S] probabilities, or BLOOM's flattened heads: the 3-D
    // [B*H, T, S] reshape of them.
    Value probs = skipCasts(op.getLhs());
    bool flatOutput = false;
    if (auto reshape = probs.getDefiningOp<tg::ReshapeOp>();
        reshape && shapeOf(probs).size() == 3) {
      ArrayRef<int64_t> in = shapeOf(reshape.getInput());
      ArrayRef<int64_t> out = shapeOf(probs);
      if (in.size() == 4 && in[0] * in[1] == out[0] && in[2] == out[1] &&
          in[3] == out[2]) {
        probs = skipCasts(reshape.getInput());
        flatOutput = true;
      }
    }
    // SDPA exports zero fully masked rows: where(is_nan(p), 0, p).
    if (auto select = probs.getDefiningOp<tg::SelectOp>()) {
      auto isNan = select.getCondition().getDefiningOp<tg::IsNanOp>();
      if (isNan && isNan.getInput() == select.getOnFalse() &&
          isSplat(select.getOnTrue(), 0.0)) {
        probs = skipCasts(select.getOnFalse());
      }
    }
    auto softmax = probs.getDefiningOp<tg::SoftmaxOp>();
    if (!softmax || shapeOf(probs).size() != 4 || softmax.getAxis() != 3 ||
        (!flatOutput && shapeOf(op.getLhs()).size() != 4)) {
      return rewriter.notifyMatchFailure(op, "lhs is not a softmax over keys");
    }
    SmallVector<int64_t> scoreShape(shapeOf(probs));
    Value scores = skipCasts(softmax.getInput());
    ScoreBiases biases;
    if (auto select = scores.getDefiningOp<tg::SelectOp>()) {
      std::optional<double> keepFill = splatValue(select.getOnFalse());
      std::optional<double> hideFill = splatValue(select.getOnTrue());
      MaskUse use;
      if (keepFill && *keepFill <= -1e4) {
        use = MaskUse::Keep;
        scores = select.getOnTrue();
      } else if (hideFill && *hideFill <= -1e4) {
        use = MaskUse::Hide;
        scores = select.getOnFalse();
      } else {
        return giveUp(op, rewriter, "select does not fill -inf");
      }
      biases.kind = classifyMask(select.getCondition(), scoreShape[2],
                                 scoreShape[3], use, maskCache, biases.window);
      if (biases.kind == MaskKind::Other) {
        return giveUp(op, rewriter,
                      "the mask is neither causal (with or without a sliding "
                      "window) nor empty");
      }
    }
    SmallVector<ScoreTerm> terms;
    collectTerms(scores, false, scoreShape, terms);
    std::string why;
    if (failed(sortTerms(terms, scoreShape, biases, why))) {
      return giveUp(op, rewriter, why);
    }
    FailureOr<PeeledScores> peeled = peelScores(biases.scores->value, why);
    tg::MatmulOp qk = peeled->qk;
    auto [query, qScale] = splitScale(qk.getLhs());
    auto [keyT, kScale] = splitScale(qk.getRhs());
    double scale = peeled->scale * qScale * kScale;
    // Nothing is created until every check passed (a pattern that fails
    // must leave the IR untouched).
    bool flatScores = shapeOf(qk.getResult()).size() == 3;
    if (flatScores != biases.scores->flat) {
      return giveUp(op, rewriter, "unexpected head shapes");
    }
    std::optional<OperandPlans> plans = planOperands(
        query, keyT, op.getRhs(), flatScores, flatOutput, scoreShape[0], why);
    if (!plans) {
      return giveUp(op, rewriter, why);
    }
    std::optional<KeyPlan> &queryPlan = plans->query, &keyPlan = plans->key,
                           &valuePlan = plans->value;
    ArrayRef<int64_t> q = queryPlan->shape, k = keyPlan->shape,
                      v = valuePlan->shape;
    if (q.size() != 4 || k.size() != 4 || v.size() != 4 || k[1] != v[1] ||
        q[1] % k[1] != 0 || q[1] != scoreShape[1] || q[2] != scoreShape[2] ||
        k[2] != scoreShape[3]) {
      return giveUp(op, rewriter, "unexpected head shapes");
    }
    Type element = getElementTypeOrSelf(op.getType());
    if (getElementTypeOrSelf(query.getType()) != element ||
        (biases.bias &&
         getElementTypeOrSelf(biases.bias->value.getType()) != element) ||
        (biases.padding &&
         getElementTypeOrSelf(biases.padding->term.getType()) != element)) {
      return giveUp(op, rewriter, "mixed precision attention");
    }
    double defaultScale = 1.0 / std::sqrt(static_cast<double>(q[3]));
    FloatAttr scaleAttr;
    if (std::fabs(scale - defaultScale) > 1e-6 * defaultScale) {
      scaleAttr = rewriter.getF64FloatAttr(scale);
    }
    DenseF64ArrayAttr alibiAttr;
    if (biases.alibi && llvm::any_of(*biases.alibi,
                                     [](double m) { return m != 0.0; })) {
      alibiAttr = rewriter.getDenseF64ArrayAttr(*biases.alibi);
    }
    unraised.erase(op);
    Value bias;
    if (biases.bias) {
      bias = materializeBias(rewriter, *biases.bias, scoreShape);
    } else if (biases.padding) {
      bias = materializePadding(rewriter, *biases.padding, scoreShape);
    }
    auto resultType = RankedTensorType::get({q[0], q[1], q[2], v[3]}, element);
    auto attention = tg::AttentionOp::create(
        rewriter, op.getLoc(), resultType, materialize(rewriter, *queryPlan),
        materialize(rewriter, *keyPlan), materialize(rewriter, *valuePlan),
        bias,
        biases.kind == MaskKind::Causal ? rewriter.getUnitAttr() : nullptr,
        scaleAttr,
        biases.window > 0 ? rewriter.getI64IntegerAttr(biases.window) : nullptr,
        peeled->softcap ? rewriter.getF64FloatAttr(*peeled->softcap) : nullptr,
        alibiAttr);
    // The scores matmul was exported inside the attention module itself.
    std::optional<std::string> path = modulePathFromLoc(qk.getLoc());
    if (!path) {
      path = nearestParentModule(query);
    }
    annotate(attention, path);
    Value result = attention.getResult();
    if (flatOutput) {
      result =
          tg::ReshapeOp::create(rewriter, op.getLoc(), op.getType(), result);
    }
    rewriter.replaceOp(op, result);
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
