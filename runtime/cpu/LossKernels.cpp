//===- LossKernels.cpp - cross_entropy, its gradient, dropout -------------===//
//
// The kernels of a training step that compute the loss and its gradient,
// and dropout. All f32, dense and row-major like every CPU kernel.
//
// None of them depends on the thread count. Rows and elements are
// independent; cross_entropy's mean and sum are formed in double over the
// per-row losses, added in row order. dropout's mask is a counter-based
// hash of (seed, salt, flat index), so the backward launch recomputes the
// forward mask from the same operands instead of storing it.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/VectorMath.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tailor::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// cross_entropy, cross_entropy_grad
//===----------------------------------------------------------------------===//
//
// logits [N, V] f32, labels [N] i32/i64, then the loss (or dloss) and the
// workspace (or dlogits). The loss is rank 0 for reduction mean and sum and
// [N] for none. Each row is logsumexp(x) - x[label], the max subtracted
// before exp and the exp-sum accumulated in double, which is torch's
// log_softmax + nll_loss up to rounding. Rows labelled ignore_index give 0
// and are not counted; the mean divides by the counted rows, and is 0 when
// there are none (torch gives NaN there, which would poison a training run
// whose batch is all padding). The per-row losses go to the workspace and
// are summed there in row order, so the sum is the same for any pool.
//
// The gradient is (softmax(x) - onehot(label)) * dloss_n, times 1 / count
// for the mean. Each row's max and exp-sum are taken before the row is
// written, so dlogits may be the logits buffer itself.

enum class Reduction { Mean, Sum, None };

/// The `reduction` attribute; absent reads as torch's default, mean.
std::string getReduction(const KernelCall &call, Reduction &reduction) {
  const Attribute *attr = call.attributes.find("reduction");
  reduction = Reduction::Mean;
  if (!attr) {
    return "";
  }
  if (attr->kind == Attribute::Kind::String) {
    if (attr->s == "mean") {
      return "";
    }
    if (attr->s == "sum") {
      reduction = Reduction::Sum;
      return "";
    }
    if (attr->s == "none") {
      reduction = Reduction::None;
      return "";
    }
  }
  return "attribute 'reduction' must be the string 'mean', 'sum' or 'none'";
}

int64_t getIgnoreIndex(const KernelCall &call) {
  return call.attributes.getInt("ignore_index", -100);
}

/// Shared by both kernels: `grad` selects dloss/dlogits for operands 2 and 3.
std::string checkCrossEntropyCall(const KernelCall &call, bool grad) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 0, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectRank(call, 0, 2); !e.empty()) {
    return e;
  }
  int64_t n = call.operands[0].shape[0];
  if (auto e = expectDTypeIn(call, 1, {DType::I32, DType::I64}); !e.empty()) {
    return e;
  }
  if (auto e = expectShape(call, 1, {n}); !e.empty()) {
    return e;
  }
  Reduction reduction;
  if (auto e = getReduction(call, reduction); !e.empty()) {
    return e;
  }
  int64_t ignore = 0;
  if (auto e = expectIntAttr(
          call, "ignore_index", std::numeric_limits<int64_t>::min(),
          std::numeric_limits<int64_t>::max(), false, -100, ignore);
      !e.empty()) {
    return e;
  }
  for (size_t i : {2, 3}) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
  }
  std::vector<int64_t> lossShape;
  if (reduction == Reduction::None) {
    lossShape = {n};
  }
  if (auto e = expectShape(call, 2, lossShape); !e.empty()) {
    return e + (reduction == Reduction::None ? " (reduction 'none')"
                                             : " (reduction 'mean' or 'sum')");
  }
  if (grad) {
    return expectShape(call, 3, call.operands[0].shape);
  }
  return expectShape(call, 3, {n});
}

std::string checkCrossEntropy(const KernelCall &call) {
  return checkCrossEntropyCall(call, false);
}
std::string checkCrossEntropyGrad(const KernelCall &call) {
  return checkCrossEntropyCall(call, true);
}

int64_t labelAt(const Tensor &labels, int64_t row) {
  if (labels.dtype == DType::I32) {
    return labels.as<int32_t>()[row];
  }
  return labels.as<int64_t>()[row];
}

/// Counts the rows that are not ignored, or reports the first label outside
/// [0, v). A serial scan in row order, so the error names the same row for
/// any pool; it is N integer reads next to N * V exps.
std::string countLabels(const Tensor &labels, int64_t v, int64_t ignore,
                        int64_t &count) {
  count = 0;
  int64_t n = labels.numel();
  for (int64_t r = 0; r < n; ++r) {
    int64_t label = labelAt(labels, r);
    if (label == ignore) {
      continue;
    }
    if (label < 0 || label >= v) {
      return "label " + std::to_string(label) + " at row " + std::to_string(r) +
             " is out of range [0, " + std::to_string(v) + ")";
    }
    ++count;
  }
  return "";
}

/// The row's max and its exp-sum relative to it.
TAILOR_VECTOR_CLONES void rowMaxExpSum(const float *x, int64_t v, float &max,
                                       double &sum) {
  float m = vmath::rowMax(x, v);
  double s = 0;
  TAILOR_SIMD(reduction(+ : s))
  for (int64_t i = 0; i < v; ++i) {
    s += static_cast<double>(vmath::exp(x[i] - m));
  }
  max = m;
  sum = s;
}

float crossEntropyRow(const float *x, int64_t v, int64_t label) {
  float m;
  double s;
  rowMaxExpSum(x, v, m, s);
  return static_cast<float>(static_cast<double>(m) + std::log(s) -
                            static_cast<double>(x[label]));
}

/// d = (softmax(x) - onehot(label)) * scale; d may be x.
TAILOR_VECTOR_CLONES void crossEntropyGradRow(const float *x, float *d,
                                              int64_t v, int64_t label,
                                              float scale) {
  float m;
  double s;
  rowMaxExpSum(x, v, m, s);
  float xl = x[label];
  float inv = static_cast<float>(1.0 / s);
  TAILOR_IVDEP
  for (int64_t i = 0; i < v; ++i) {
    d[i] = vmath::exp(x[i] - m) * inv * scale;
  }
  d[label] = (vmath::exp(xl - m) * inv - 1.0f) * scale;
}

std::string runCrossEntropy(const KernelCall &call) {
  const Tensor &logits = call.operands[0];
  const Tensor &labels = call.operands[1];
  int64_t n = logits.shape[0], v = logits.shape[1];
  Reduction reduction;
  (void)getReduction(call, reduction);
  int64_t ignore = getIgnoreIndex(call);
  int64_t count = 0;
  if (auto e = countLabels(labels, v, ignore, count); !e.empty()) {
    return e;
  }
  const float *x = logits.as<float>();
  float *loss = call.operands[2].as<float>();
  float *rowLoss =
      reduction == Reduction::None ? loss : call.operands[3].as<float>();
  int64_t grain =
      std::max<int64_t>(1, kTranscendentalGrain / std::max<int64_t>(v, 1));
  parallelFor(call, n, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t label = labelAt(labels, r);
      rowLoss[r] =
          label == ignore ? 0.0f : crossEntropyRow(x + r * v, v, label);
    }
  });
  if (reduction == Reduction::None) {
    return "";
  }
  double sum = 0;
  for (int64_t r = 0; r < n; ++r) {
    sum += static_cast<double>(rowLoss[r]);
  }
  if (reduction == Reduction::Mean) {
    sum = count ? sum / static_cast<double>(count) : 0.0;
  }
  *loss = static_cast<float>(sum);
  return "";
}

std::string runCrossEntropyGrad(const KernelCall &call) {
  const Tensor &logits = call.operands[0];
  const Tensor &labels = call.operands[1];
  int64_t n = logits.shape[0], v = logits.shape[1];
  Reduction reduction;
  (void)getReduction(call, reduction);
  int64_t ignore = getIgnoreIndex(call);
  int64_t count = 0;
  if (auto e = countLabels(labels, v, ignore, count); !e.empty()) {
    return e;
  }
  const float *x = logits.as<float>();
  const float *dloss = call.operands[2].as<float>();
  float *dx = call.operands[3].as<float>();
  // The per-row factor for mean and sum; none reads dloss[r].
  float scale = dloss[0];
  if (reduction == Reduction::Mean && count > 0) {
    scale = static_cast<float>(static_cast<double>(dloss[0]) /
                               static_cast<double>(count));
  }
  int64_t grain =
      std::max<int64_t>(1, kTranscendentalGrain / std::max<int64_t>(v, 1));
  parallelFor(call, n, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t label = labelAt(labels, r);
      if (label == ignore) {
        std::fill(dx + r * v, dx + (r + 1) * v, 0.0f);
        continue;
      }
      float rowScale = reduction == Reduction::None ? dloss[r] : scale;
      crossEntropyGradRow(x + r * v, dx + r * v, v, label, rowScale);
    }
  });
  return "";
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//
//
// x, seed (rank-0 i64), y like x; attributes p in [0, 1) and salt. Element i
// is kept when its uniform draw u(seed, salt, i) is >= p, and then scaled by
// 1 / (1 - p); y = x * (keep ? scale : 0), so NaN and the sign of zero
// propagate as in torch's `input * mask / (1 - p)`. The draw is SplitMix64
// (Steele et al.) at counter i of a stream whose key mixes seed and salt:
// stateless, so any chunking of the index range gives the same mask and the
// backward pass gets it back by running this kernel on dy with the same seed
// and salt. u takes the top 53 bits, and u >= p is compared in integers as
// bits >= ceil(p * 2^53), exact because the scaling is a power of two. y may
// alias x; p == 0 copies.

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

/// SplitMix64's output function (Stafford's Mix13).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t dropoutKey(int64_t seed, int64_t salt) {
  return mix64(mix64(static_cast<uint64_t>(seed)) ^
               (static_cast<uint64_t>(salt) * kGoldenGamma + 1));
}

TAILOR_VECTOR_CLONES void dropoutLoop(const float *x, float *y, int64_t begin,
                                      int64_t end, uint64_t key,
                                      uint64_t threshold, float scale) {
  TAILOR_IVDEP
  for (int64_t i = begin; i < end; ++i) {
    uint64_t bits = mix64(key + static_cast<uint64_t>(i) * kGoldenGamma);
    y[i] = x[i] * ((bits >> 11) >= threshold ? scale : 0.0f);
  }
}

std::string checkDropout(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 0, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectScalar(call, 1, DType::I64); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 2, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectShape(call, 2, call.operands[0].shape); !e.empty()) {
    return e;
  }
  double p = 0;
  if (auto e = expectFloatInRange(call, "p", 0.0, 1.0, p); !e.empty()) {
    return e;
  }
  int64_t salt = 0;
  return expectIntAttr(call, "salt", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max(), false, 0, salt);
}

std::string runDropout(const KernelCall &call) {
  const Tensor &tx = call.operands[0];
  const float *x = tx.as<float>();
  float *y = call.operands[2].as<float>();
  double p = call.attributes.getFloat("p", 0);
  if (p == 0) {
    if (x != y) {
      std::memcpy(y, x, tx.bytes());
    }
    return "";
  }
  uint64_t key = dropoutKey(scalarOperand<int64_t>(call, 1),
                            call.attributes.getInt("salt", 0));
  auto threshold = static_cast<uint64_t>(std::ceil(std::ldexp(p, 53)));
  // torch's mask / (1 - p): the f32 division of 1 by f32(1 - p).
  float scale = 1.0f / static_cast<float>(1.0 - p);
  parallelFor(call, tx.numel(), kTranscendentalGrain,
              [&](int64_t begin, int64_t end, int) {
                dropoutLoop(x, y, begin, end, key, threshold, scale);
              });
  return "";
}

} // namespace

void addLossKernels(std::vector<KernelDef> &table) {
  table.push_back({"cross_entropy", 4, checkCrossEntropy, runCrossEntropy});
  table.push_back(
      {"cross_entropy_grad", 4, checkCrossEntropyGrad, runCrossEntropyGrad});
  table.push_back({"dropout", 3, checkDropout, runDropout});
}

} // namespace tailor::runtime::cpu
