//===- NormalizationKernels.cpp - softmax, rms_norm, layer_norm -----------===//
//
// Row-wise normalizations with Hugging Face numerics. softmax (f32, f64)
// subtracts the row max before exp and multiplies by 1 / sum; along a
// non-last axis it processes blocks of 256 columns so every pass streams
// contiguous rows. rms_norm and layer_norm are f32 and compute in f32 like
// HF's Llama/GPT code on f32 activations: rms_norm is
// w * (x * rsqrt(mean(x^2) + eps)), layer_norm uses the two-pass variance
// (x - mean)^2, the stable form. One row per task on the pool; rows are
// independent, so the result does not depend on the thread count. y may
// alias x.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/VectorMath.h"

#include <cmath>

namespace tailor::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

std::string checkSoftmax(const KernelCall &call) {
  if (auto e = expectFloatMap(call); !e.empty()) {
    return e;
  }
  int64_t axis = 0;
  return expectIntAttr(call, "axis", 0, call.operands[0].rank() - 1, true, 0,
                       axis);
}

/// Softmax of rows [begin, end) of length n: max, exp(x - max), then a
/// scale by 1 / sum.
template <typename T>
TAILOR_VECTOR_CLONES void softmaxRows(const T *x, T *y, int64_t begin,
                                      int64_t end, int64_t n) {
  for (int64_t r = begin; r < end; ++r) {
    const T *xr = x + r * n;
    T *yr = y + r * n;
    T inv = T(1) / vmath::rowExpShiftSum(xr, yr, n, vmath::rowMax(xr, n));
    for (int64_t i = 0; i < n; ++i) {
      yr[i] *= inv;
    }
  }
}

/// Softmax along the middle axis of [len, inner] for columns
/// [c0, c0 + width): the same three passes, a block of columns at a time.
template <typename T>
TAILOR_VECTOR_CLONES void softmaxColumns(const T *x, T *y, int64_t len,
                                         int64_t inner, int64_t c0,
                                         int64_t width) {
  constexpr int64_t kBlock = 256;
  T m[kBlock], s[kBlock];
  for (int64_t j = 0; j < width; ++j) {
    m[j] = vmath::lowest<T>();
    s[j] = 0;
  }
  for (int64_t l = 0; l < len; ++l) {
    for (int64_t j = 0; j < width; ++j) {
      m[j] = vmath::maxNan(m[j], x[l * inner + c0 + j]);
    }
  }
  for (int64_t l = 0; l < len; ++l) {
    for (int64_t j = 0; j < width; ++j) {
      T e = vmath::exp(x[l * inner + c0 + j] - m[j]);
      y[l * inner + c0 + j] = e;
      s[j] += e;
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    s[j] = T(1) / s[j];
  }
  for (int64_t l = 0; l < len; ++l) {
    for (int64_t j = 0; j < width; ++j) {
      y[l * inner + c0 + j] *= s[j];
    }
  }
}

template <typename T> void runSoftmaxTyped(const KernelCall &call) {
  const Tensor &tx = call.operands[0];
  const T *x = tx.as<T>();
  T *y = call.operands[1].as<T>();
  int64_t axis = call.attributes.getInt("axis", 0);
  int64_t outer = 1, len = tx.shape[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d) {
    outer *= tx.shape[d];
  }
  for (int64_t d = axis + 1; d < tx.rank(); ++d) {
    inner *= tx.shape[d];
  }
  if (len == 0) {
    return;
  }
  if (inner == 1) {
    int64_t grain = std::max<int64_t>(1, kTranscendentalGrain / len);
    parallelFor(call, outer, grain, [&](int64_t begin, int64_t end, int) {
      softmaxRows(x, y, begin, end, len);
    });
    return;
  }
  constexpr int64_t kBlock = 256;
  int64_t blocks = (inner + kBlock - 1) / kBlock;
  int64_t grain = std::max<int64_t>(1, kTranscendentalGrain / (len * kBlock));
  parallelFor(call, outer * blocks, grain,
              [&](int64_t begin, int64_t end, int) {
                for (int64_t t = begin; t < end; ++t) {
                  int64_t o = t / blocks, c0 = (t % blocks) * kBlock;
                  softmaxColumns(x + o * len * inner, y + o * len * inner, len,
                                 inner, c0, std::min(kBlock, inner - c0));
                }
              });
}

std::string runSoftmax(const KernelCall &call) {
  if (call.operands[0].dtype == DType::F32) {
    runSoftmaxTyped<float>(call);
  } else {
    runSoftmaxTyped<double>(call);
  }
  return "";
}

//===----------------------------------------------------------------------===//
// rms_norm, layer_norm
//===----------------------------------------------------------------------===//

/// x [..., D], w [D], optional bias [D] (when `maxOperands` is 4), y like x.
std::string checkNorm(const KernelCall &call, size_t maxOperands) {
  if (auto e = expectOperandCount(call, 3, maxOperands); !e.empty()) {
    return e;
  }
  size_t n = call.operands.size();
  for (size_t i = 0; i < n; ++i) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
  }
  if (auto e = expectMinRank(call, 0, 1); !e.empty()) {
    return e;
  }
  int64_t d = call.operands[0].shape.back();
  for (size_t i = 1; i + 1 < n; ++i) {
    if (auto e = expectShape(call, i, {d}); !e.empty()) {
      return e;
    }
  }
  if (auto e = expectShape(call, n - 1, call.operands[0].shape); !e.empty()) {
    return e;
  }
  double eps = 0;
  if (auto e = expectFloatAttr(call, "epsilon", true, 0, eps); !e.empty()) {
    return e;
  }
  if (!(eps >= 0)) {
    return "attribute 'epsilon' must be non-negative";
  }
  return "";
}

std::string checkRmsNorm(const KernelCall &call) { return checkNorm(call, 3); }
std::string checkLayerNorm(const KernelCall &call) {
  return checkNorm(call, 4);
}

TAILOR_VECTOR_CLONES void rmsNormRow(const float *x, const float *w, float *y,
                                     int64_t d, float eps) {
  float r = 1.0f / std::sqrt(vmath::rowSumSquares(x, d, 0.0f) / d + eps);
  for (int64_t i = 0; i < d; ++i) {
    y[i] = w[i] * (x[i] * r);
  }
}

TAILOR_VECTOR_CLONES void layerNormRow(const float *x, const float *w,
                                       const float *b, float *y, int64_t d,
                                       float eps) {
  float mean = vmath::rowSum<float>(x, d) / d;
  float rstd = 1.0f / std::sqrt(vmath::rowSumSquares(x, d, mean) / d + eps);
  if (b) {
    for (int64_t i = 0; i < d; ++i) {
      y[i] = (x[i] - mean) * rstd * w[i] + b[i];
    }
  } else {
    for (int64_t i = 0; i < d; ++i) {
      y[i] = (x[i] - mean) * rstd * w[i];
    }
  }
}

template <bool Rms> std::string runNorm(const KernelCall &call) {
  size_t n = call.operands.size();
  const Tensor &tx = call.operands[0];
  const float *x = tx.as<float>();
  const float *w = call.operands[1].as<float>();
  const float *b = !Rms && n == 4 ? call.operands[2].as<float>() : nullptr;
  float *y = call.operands[n - 1].as<float>();
  int64_t d = tx.shape.back();
  if (d == 0) {
    return "";
  }
  float eps = static_cast<float>(call.attributes.getFloat("epsilon", 0));
  int64_t rows = tx.numel() / d;
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / d);
  parallelFor(call, rows, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      if constexpr (Rms) {
        rmsNormRow(x + r * d, w, y + r * d, d, eps);
      } else {
        layerNormRow(x + r * d, w, b, y + r * d, d, eps);
      }
    }
  });
  return "";
}

} // namespace

void addNormalizationKernels(std::vector<KernelDef> &table) {
  table.push_back({"softmax", 2, checkSoftmax, runSoftmax});
  table.push_back({"rms_norm", 3, checkRmsNorm, runNorm<true>});
  table.push_back({"layer_norm", -1, checkLayerNorm, runNorm<false>});
}

} // namespace tailor::runtime::cpu
