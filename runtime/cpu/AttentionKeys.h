//===- AttentionKeys.h - which keys a query sees, and score capping -*- C++ -*-===//
//
// tg.attention's masking, shared by the attention and attention_grad
// kernels: query row t of T sees keys [first(t), limit(t)) of S. Causal:
// limit(t) = t + 1 + (S - T) (clamped to [0, S]); a sliding window of W
// keys (with causal) also raises first(t) to limit(t) - W. Without causal
// every row sees all S keys. Both bounds grow with t, so a block of rows
// [t0, t1) needs keys [first(t0), limit(t1 - 1)) only.
//
// A softcap c > 0 maps each scaled score s to c * tanh(s / c) before the
// softmax (Gemma-2's attention logit soft-capping); its derivative is
// 1 - (capped / c)^2.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_ATTENTIONKEYS_H
#define TAILOR_RUNTIME_CPU_ATTENTIONKEYS_H

#include "runtime/cpu/KernelTable.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace tailor::runtime::cpu {

struct AttentionKeys {
  bool causal = false;
  /// Keys in the sliding window (0: no window).
  int64_t window = 0;
  float softcap = 0;
  int64_t t = 0, s = 0;

  int64_t limit(int64_t row) const {
    return causal ? std::clamp<int64_t>(row + 1 + s - t, 0, s) : s;
  }
  int64_t first(int64_t row) const {
    return window > 0 ? std::clamp<int64_t>(row + 1 + s - t - window, 0, s)
                      : 0;
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

/// The masking attributes of an attention launch: `causal` (0/1), `window`
/// (keys, >= 1, only with causal; absent or 0: none), `softcap` (> 0;
/// absent or 0: none), and `scale`.
inline std::string checkAttentionMasking(const KernelCall &call) {
  int64_t causal = 0, window = 0;
  double scale = 0, softcap = 0;
  std::string error = firstError(
      {expectIntAttr(call, "causal", 0, 1, false, 0, causal),
       expectIntAttr(call, "window", 0, INT64_MAX, false, 0, window),
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
  return "";
}

/// The masking of a launch that checkAttentionMasking accepted.
inline AttentionKeys attentionKeys(const KernelCall &call, int64_t t,
                                   int64_t s) {
  AttentionKeys keys;
  keys.causal = call.attributes.getInt("causal", 0) != 0;
  keys.window = call.attributes.getInt("window", 0);
  keys.softcap = static_cast<float>(call.attributes.getFloat("softcap", 0));
  keys.t = t;
  keys.s = s;
  return keys;
}

} // namespace tailor::runtime::cpu

#endif // TAILOR_RUNTIME_CPU_ATTENTIONKEYS_H
