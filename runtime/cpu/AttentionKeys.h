//===- AttentionKeys.h - which keys a query sees, and score capping -*- C++ -*-===//
//
// tg.attention's masking, shared by the attention and attention_grad
// kernels: query row t of T sees keys [first(t), limit(t)) of S. Causal:
// limit(t) = t + 1 + (S - T) (clamped to [0, S]); a sliding window of W
// keys (with causal) also raises first(t) to limit(t) - W. Without causal
// every row sees all S keys. Both bounds grow with t, so a block of rows
// [t0, t1) needs keys [first(t0), limit(t1 - 1)) only.
//
// Document masking (packed sequences): with `positions` ([B, T] i64, each
// token's position within its example; operand number `positions`), row t
// of batch entry b also starts at its example's first token,
// first(t) >= t + (S - T) - positions[b, t]. Within an example that bound
// is constant and it jumps up at the next example, so it still grows with
// t for positions that restart at 0 and count up; blockFirst() takes the
// minimum over a block's rows all the same, so any positions are safe.
//
// A softcap c > 0 maps each scaled score s to c * tanh(s / c) before the
// softmax (Gemma-2's attention logit soft-capping); its derivative is
// 1 - (capped / c)^2.
//
// Then the score biases, added after the cap (AttentionOp's order): ALiBi
// adds slope[h] * (s - t - (S - T)) (zero on the causal diagonal), and an
// additive bias operand [b0, b1, b2, b3], each dim 1 or the scores' [B, Hq,
// T, S] dim, adds its broadcast element. Neither changes the gradients of
// q, k or v beyond the probabilities they shift. A bias that hides every
// key a row could see (-inf throughout: a padding mask over the pads of a
// left-padded sequence) leaves the row seeing none, as the causal mask
// does to a row before the first key: zeros and zero gradients, not NaN
// (the CUDA kernels do the same; PyTorch's math attention gives NaN, which
// Hugging Face's masks avoid by never hiding a whole row).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_ATTENTIONKEYS_H
#define TAILOR_RUNTIME_CPU_ATTENTIONKEYS_H

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace tailor::runtime::cpu {

struct AttentionKeys {
  bool causal = false;
  /// Keys in the sliding window (0: no window).
  int64_t window = 0;
  float softcap = 0;
  int64_t t = 0, s = 0;
  /// Document masking: the [B, T] positions of the whole call, and those of
  /// the batch entry atBatch() chose (both null without).
  const int64_t *allPositions = nullptr;
  const int64_t *positions = nullptr;

  /// The masking of batch entry `b` (its row of positions).
  AttentionKeys atBatch(int64_t b) const {
    AttentionKeys keys = *this;
    keys.positions = allPositions ? allPositions + b * t : nullptr;
    return keys;
  }
  int64_t limit(int64_t row) const {
    return causal ? std::clamp<int64_t>(row + 1 + s - t, 0, s) : s;
  }
  int64_t first(int64_t row) const {
    int64_t lo = window > 0 ? row + 1 + s - t - window : 0;
    if (positions) {
      // Clamped so a huge position cannot overflow: it means "from key 0".
      lo = std::max(lo, row + s - t - std::min(positions[row], row + s));
    }
    return std::clamp<int64_t>(lo, 0, limit(row));
  }
  /// The first key any of rows [row, row + rows) sees.
  int64_t blockFirst(int64_t row, int64_t rows) const {
    int64_t lo = first(row);
    for (int64_t r = 1; positions && r < rows; ++r) {
      lo = std::min(lo, first(row + r));
    }
    return lo;
  }
  /// ALiBi slopes, one per query head (empty: none).
  std::vector<float> slopes;
  /// The additive bias operand (null: none) and its element strides over
  /// [B, Hq, T, S] (0 on broadcast dims).
  const float *bias = nullptr;
  int64_t biasStride[4] = {0, 0, 0, 0};

  bool hasScoreBias() const { return !slopes.empty() || bias; }
  /// Adds the ALiBi and bias terms to the scores of query `row` of (batch
  /// bi, query head h) against keys [key0, key0 + n).
  void biasRow(float *scores, int64_t bi, int64_t h, int64_t row, int64_t key0,
               int64_t n) const {
    if (!slopes.empty()) {
      float slope = slopes[h];
      int64_t offset = key0 - row - (s - t);
      for (int64_t i = 0; i < n; ++i) {
        scores[i] += slope * static_cast<float>(offset + i);
      }
    }
    if (bias) {
      const float *b = bias + bi * biasStride[0] + h * biasStride[1] +
                       row * biasStride[2] + key0 * biasStride[3];
      for (int64_t i = 0; i < n; ++i) {
        scores[i] += b[i * biasStride[3]];
      }
    }
  }
  /// Caps `n` scores in place (nothing without a softcap).
  void capRow(float *row, int64_t n) const {
    if (softcap > 0) {
      for (int64_t i = 0; i < n; ++i) {
        row[i] = softcap * std::tanh(row[i] / softcap);
      }
    }
  }
};

/// Whether a launch carries the additive bias operand (attribute `bias`).
inline bool hasBiasOperand(const KernelCall &call) {
  return call.attributes.getInt("bias", 0) != 0;
}

/// The masking attributes of an attention launch: `causal` (0/1), `window`
/// (keys, >= 1, only with causal; absent or 0: none), `softcap` (> 0;
/// absent or 0: none), `scale`, `alibi_slopes` (floats, one per query
/// head) and `bias` (0/1: the bias operand follows v). `heads` is Hq.
inline std::string checkAttentionMasking(const KernelCall &call,
                                         int64_t heads) {
  int64_t causal = 0, window = 0, bias = 0;
  double scale = 0, softcap = 0;
  std::string error = firstError(
      {expectIntAttr(call, "causal", 0, 1, false, 0, causal),
       expectIntAttr(call, "window", 0, INT64_MAX, false, 0, window),
       expectIntAttr(call, "bias", 0, 1, false, 0, bias),
       expectFloatAttr(call, "softcap", false, 0, softcap),
       expectFloatAttr(call, "scale", false, 0, scale)});
  if (!error.empty()) {
    return error;
  }
  if (window > 0 && !causal) {
    return "attribute 'window' needs 'causal' (a sliding window is causal)";
  }
  if (!(softcap >= 0) || std::isinf(softcap)) {
    return "attribute 'softcap' must be a finite number >= 0";
  }
  if (const Attribute *slopes = call.attributes.find("alibi_slopes")) {
    if (slopes->kind != Attribute::Kind::Floats ||
        static_cast<int64_t>(slopes->floats.size()) != heads) {
      return "attribute 'alibi_slopes' must hold " + std::to_string(heads) +
             " floats, one per query head";
    }
    for (double slope : slopes->floats) {
      if (!std::isfinite(slope)) {
        return "attribute 'alibi_slopes' must hold finite numbers";
      }
    }
  }
  return "";
}

/// The operand number of a launch's positions (attribute `positions`), or
/// -1 without document masking.
inline int64_t attentionPositionsOperand(const KernelCall &call) {
  return call.attributes.getInt("positions", -1);
}

/// The document masking of a launch whose query is operand `query` and
/// whose inputs are operands [0, inputs): `positions` names an input
/// other than the query, key and value that is an i64 [B, T] tensor, and
/// needs `causal`.
inline std::string checkAttentionPositions(const KernelCall &call,
                                           size_t query, size_t inputs) {
  if (!call.attributes.find("positions")) {
    return "";
  }
  int64_t index = attentionPositionsOperand(call);
  if (index < static_cast<int64_t>(query + 3) ||
      index >= static_cast<int64_t>(inputs)) {
    return "attribute 'positions' is " + std::to_string(index) +
           ", expected an input operand after query, key and value";
  }
  if (call.attributes.getInt("causal", 0) == 0) {
    return "attribute 'positions' needs 'causal' (document masking is "
           "causal)";
  }
  const auto &q = call.operands[query].shape;
  return firstError(
      {expectDType(call, static_cast<size_t>(index), DType::I64),
       expectShape(call, static_cast<size_t>(index), {q[0], q[2]})});
}

/// Checks a launch's positions before it runs: none negative (a token
/// cannot come before its example's start); "" or the first offender.
inline std::string checkPositionValues(const KernelCall &call) {
  int64_t index = attentionPositionsOperand(call);
  if (index < 0) {
    return "";
  }
  const Tensor &positions = call.operands[static_cast<size_t>(index)];
  const int64_t *p = positions.as<int64_t>();
  for (int64_t i = 0, n = positions.numel(); i < n; ++i) {
    if (p[i] < 0) {
      int64_t t = positions.shape[1];
      return "positions[" + std::to_string(i / t) + ", " +
             std::to_string(i % t) + "] = " + std::to_string(p[i]) +
             " is negative";
    }
  }
  return "";
}

/// Checks the bias operand `index` (f32, rank 4, each dim 1 or the
/// scores' dim).
inline std::string checkBiasOperand(const KernelCall &call, size_t index,
                                    const std::vector<int64_t> &scores) {
  if (auto e = firstError({expectDType(call, index, DType::F32),
                           expectRank(call, index, 4)});
      !e.empty()) {
    return e;
  }
  const std::vector<int64_t> &b = call.operands[index].shape;
  for (size_t i = 0; i < 4; ++i) {
    if (b[i] != 1 && b[i] != scores[i]) {
      return "operand " + std::to_string(index) + " (bias) of shape " +
             shapeString(b) + " does not broadcast to the scores " +
             shapeString(scores);
    }
  }
  return "";
}

/// The masking and biases of a launch that checkAttentionMasking (and
/// checkAttentionPositions) accepted; `bias` is the bias operand or null.
inline AttentionKeys attentionKeys(const KernelCall &call, int64_t t,
                                   int64_t s, const Tensor *bias = nullptr) {
  AttentionKeys keys;
  keys.causal = call.attributes.getInt("causal", 0) != 0;
  keys.window = call.attributes.getInt("window", 0);
  keys.softcap = static_cast<float>(call.attributes.getFloat("softcap", 0));
  keys.t = t;
  keys.s = s;
  if (const Attribute *slopes = call.attributes.find("alibi_slopes")) {
    keys.slopes.assign(slopes->floats.begin(), slopes->floats.end());
  }
  if (bias) {
    keys.bias = bias->as<float>();
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      keys.biasStride[i] = bias->shape[i] == 1 ? 0 : stride;
      stride *= bias->shape[i];
    }
  }
  if (int64_t index = attentionPositionsOperand(call); index >= 0) {
    keys.allPositions =
        call.operands[static_cast<size_t>(index)].as<int64_t>();
  }
  return keys;
}

/// The n scores a row sees, in place, become exp(score - max); returns
/// 1 / their sum. A row whose every score is -inf (its bias hides every
/// key) sees none: zeros, and 0.
inline float expVisibleRow(float *row, int64_t n) {
  if (n <= 0) {
    return 0.0f;
  }
  float max = vmath::rowMax(row, n);
  if (max == -std::numeric_limits<float>::infinity()) {
    std::memset(row, 0, n * sizeof(float));
    return 0.0f;
  }
  return 1.0f / vmath::rowExpShiftSum(row, row, n, max);
}

} // namespace tailor::runtime::cpu

#endif // TAILOR_RUNTIME_CPU_ATTENTIONKEYS_H
