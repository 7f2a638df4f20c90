//===- ReductionKernels.cpp - reduce_*, softmax, rms_norm, layer_norm -----===//
//
// Layout: a reduction sees x as [A, R, C] (outer kept, reduced, inner kept
// extents) once extent-1 dimensions are dropped and neighbours merged; that
// covers every single-axis and every contiguous multi-axis reduction. Rows
// (C = 1) reduce contiguous memory; columns (C > 1) accumulate whole rows of
// C into a block of accumulators, so both stream x once. Other axis sets
// take a generic odometer walk.
//
// Precision: f32 sums accumulate in f64 (torch's cascade sum is better than
// a running f32 sum; f64 is better than both at no cost for memory-bound
// loops); integer sums wrap in 64 bits; max propagates NaN. Softmax and the
// norms follow Hugging Face numerics in f32: softmax subtracts the row max,
// rms_norm is w * (x * rsqrt(mean(x^2) + eps)), layer_norm uses the two-pass
// variance.
//
// Floating-point sums and maxes only vectorize when the compiler may
// reorder them, which strict IEEE code forbids; TAILOR_SIMD grants that per
// loop (an OpenMP simd reduction), so the order is fixed by the code and
// the same for any thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/VectorMath.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace tailor::runtime::cpu {
namespace {

/// The accumulator for sums of T: f64 for floats, wrapping u64 for ints.
template <typename T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double,
                                  uint64_t>;

/// max that keeps a NaN once seen (torch.max semantics).
template <typename T> inline T maxNan(T acc, T v) {
  return ((v != v) | (v > acc)) ? v : acc;
}

template <typename T> constexpr T lowest() {
  if constexpr (std::is_floating_point_v<T>) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::lowest();
  }
}

template <typename Acc, typename T>
TAILOR_VECTOR_CLONES Acc sumRow(const T *x, int64_t n) {
  Acc sum = 0;
  TAILOR_SIMD(reduction(+ : sum))
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<Acc>(x[i]);
  }
  return sum;
}

/// The running max and a separate NaN flag, since a vector max reduction
/// does not carry NaN the way maxNan does.
template <typename T> TAILOR_VECTOR_CLONES T maxRow(const T *x, int64_t n) {
  T m = lowest<T>();
  int nan = 0;
  TAILOR_SIMD(reduction(max : m) reduction(| : nan))
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    m = v > m ? v : m;
    nan |= v != v;
  }
  if constexpr (std::is_floating_point_v<T>) {
    return nan ? std::numeric_limits<T>::quiet_NaN() : m;
  }
  return m;
}

/// Sum of (x - shift)^2 in T's precision (the norms' variance).
template <typename T>
TAILOR_VECTOR_CLONES T sumSquares(const T *x, int64_t n, T shift) {
  T sum = 0;
  TAILOR_SIMD(reduction(+ : sum))
  for (int64_t i = 0; i < n; ++i) {
    T d = x[i] - shift;
    sum += d * d;
  }
  return sum;
}

template <typename T>
TAILOR_VECTOR_CLONES void expShift(const T *x, T *y, int64_t n, T shift) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = vmath::exp(x[i] - shift);
  }
}

template <typename T>
TAILOR_VECTOR_CLONES void scaleRow(T *y, int64_t n, T factor) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] *= factor;
  }
}

//===----------------------------------------------------------------------===//
// reduce_sum, reduce_mean, reduce_max
//===----------------------------------------------------------------------===//

enum class Reduce { Sum, Mean, Max };

/// x's extents and which of them are reduced, before any merging.
struct ReduceShape {
  std::vector<int64_t> extents;
  std::vector<bool> reduced;
  int64_t count = 1; // elements reduced into each output
};

ReduceShape reduceShape(const KernelCall &call) {
  ReduceShape rs;
  rs.extents = call.operands[0].shape;
  rs.reduced.assign(rs.extents.size(), false);
  for (int64_t a : call.attributes.getInts("axes")) {
    rs.reduced[a] = true;
    rs.count *= rs.extents[a];
  }
  return rs;
}

template <Reduce Op> std::string checkReduce(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0,
                             {DType::F32, DType::F64, DType::I32, DType::I64});
      !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 1, 0); !e.empty()) {
    return e;
  }
  const Attribute *axes = call.attributes.find("axes");
  if (!axes || axes->kind != Attribute::Kind::Ints) {
    return "missing ints attribute 'axes'";
  }
  int64_t rank = call.operands[0].rank();
  for (size_t i = 0; i < axes->ints.size(); ++i) {
    int64_t a = axes->ints[i];
    if (a < 0 || a >= rank || (i && a <= axes->ints[i - 1])) {
      return "attribute 'axes' must be sorted distinct axes in [0, " +
             std::to_string(rank) + "), got " + shapeString(axes->ints);
    }
  }
  int64_t keepDims = 0;
  if (auto e = expectIntAttr(call, "keep_dims", 0, 1, false, 0, keepDims);
      !e.empty()) {
    return e;
  }
  ReduceShape rs = reduceShape(call);
  std::vector<int64_t> out;
  for (size_t d = 0; d < rs.extents.size(); ++d) {
    if (!rs.reduced[d]) {
      out.push_back(rs.extents[d]);
    } else if (keepDims) {
      out.push_back(1);
    }
  }
  if (auto e = expectShape(call, 1, out); !e.empty()) {
    return e;
  }
  if (Op == Reduce::Max && rs.count == 0 && call.operands[1].numel() > 0) {
    return "reduce_max over an empty axis";
  }
  return "";
}

template <Reduce Op, typename T> inline T finish(SumAcc<T> sum, int64_t count) {
  if constexpr (Op == Reduce::Mean) {
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(sum / static_cast<double>(count));
    } else {
      // Truncates toward zero; an empty mean of ints reads 0.
      return count ? static_cast<T>(static_cast<int64_t>(sum) / count) : T(0);
    }
  } else {
    return static_cast<T>(sum);
  }
}

/// y[a, c] = reduce over b of x[a, b, c], for c in [c0, c0 + width).
template <Reduce Op, typename T>
TAILOR_VECTOR_CLONES void reduceColumns(const T *x, T *y, int64_t r,
                                        int64_t c, int64_t c0, int64_t width,
                                        int64_t count) {
  constexpr int64_t kBlock = 256;
  using Acc = std::conditional_t<Op == Reduce::Max, T, SumAcc<T>>;
  Acc acc[kBlock];
  for (int64_t j = 0; j < width; ++j) {
    acc[j] = Op == Reduce::Max ? Acc(lowest<T>()) : Acc(0);
  }
  for (int64_t b = 0; b < r; ++b) {
    const T *row = x + b * c + c0;
    for (int64_t j = 0; j < width; ++j) {
      if constexpr (Op == Reduce::Max) {
        acc[j] = maxNan(acc[j], row[j]);
      } else {
        acc[j] += static_cast<Acc>(row[j]);
      }
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    if constexpr (Op == Reduce::Max) {
      y[c0 + j] = acc[j];
    } else {
      y[c0 + j] = finish<Op, T>(acc[j], count);
    }
  }
}

template <Reduce Op, typename T> void runReduceTyped(const KernelCall &call) {
  const T *x = call.operands[0].as<T>();
  T *y = call.operands[1].as<T>();
  ReduceShape rs = reduceShape(call);
  // Merge neighbours of the same kind, dropping extent-1 dimensions.
  std::vector<int64_t> ext;
  std::vector<bool> red;
  for (size_t d = 0; d < rs.extents.size(); ++d) {
    if (rs.extents[d] == 1) {
      continue;
    }
    if (!ext.empty() && red.back() == rs.reduced[d]) {
      ext.back() *= rs.extents[d];
    } else {
      ext.push_back(rs.extents[d]);
      red.push_back(rs.reduced[d]);
    }
  }
  int64_t outputs = call.operands[1].numel();
  size_t reducedGroups = std::count(red.begin(), red.end(), true);
  if (reducedGroups <= 1) {
    // [A, R, C] with A or C possibly 1.
    int64_t a = 1, r = 1, c = 1;
    bool seenReduced = false;
    for (size_t g = 0; g < ext.size(); ++g) {
      if (red[g]) {
        r = ext[g];
        seenReduced = true;
      } else if (seenReduced) {
        c = ext[g];
      } else {
        a = ext[g];
      }
    }
    if (c == 1 && a == 1 && r >= 4 * kElementwiseGrain) {
      // One long row: fixed-size blocks reduce in parallel into partials,
      // combined in block order, so the result does not depend on the
      // thread count.
      using Acc = std::conditional_t<Op == Reduce::Max, T, SumAcc<T>>;
      int64_t blocks = (r + kElementwiseGrain - 1) / kElementwiseGrain;
      std::vector<Acc> partial(blocks);
      parallelFor(call, blocks, 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t k = begin; k < end; ++k) {
          int64_t off = k * kElementwiseGrain;
          int64_t len = std::min(kElementwiseGrain, r - off);
          if constexpr (Op == Reduce::Max) {
            partial[k] = maxRow(x + off, len);
          } else {
            partial[k] = sumRow<Acc>(x + off, len);
          }
        }
      });
      Acc acc = partial[0];
      for (int64_t k = 1; k < blocks; ++k) {
        if constexpr (Op == Reduce::Max) {
          acc = maxNan(acc, partial[k]);
        } else {
          acc += partial[k];
        }
      }
      if constexpr (Op == Reduce::Max) {
        y[0] = acc;
      } else {
        y[0] = finish<Op, T>(acc, rs.count);
      }
      return;
    }
    if (c == 1) {
      int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(r, 1));
      parallelFor(call, a, grain, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) {
          const T *row = x + i * r;
          if constexpr (Op == Reduce::Max) {
            y[i] = maxRow(row, r);
          } else {
            y[i] = finish<Op, T>(sumRow<SumAcc<T>>(row, r), rs.count);
          }
        }
      });
      return;
    }
    constexpr int64_t kBlock = 256;
    int64_t blocks = (c + kBlock - 1) / kBlock;
    int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (r * kBlock + 1));
    parallelFor(call, a * blocks, grain, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) {
        int64_t i = t / blocks, c0 = (t % blocks) * kBlock;
        reduceColumns<Op>(x + i * r * c, y + i * c, r, c, c0,
                          std::min(kBlock, c - c0), rs.count);
      }
    });
    return;
  }
  // Interleaved kept and reduced groups: walk each output's reduced
  // elements with an odometer. No lowering produces this for a hot op.
  int rank = static_cast<int>(ext.size());
  std::vector<int64_t> stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) {
    stride[d] = stride[d + 1] * ext[d + 1];
  }
  parallelFor(call, outputs, 64, [&](int64_t begin, int64_t end, int) {
    std::vector<int64_t> idx(rank);
    for (int64_t o = begin; o < end; ++o) {
      int64_t rest = o, base = 0;
      for (int d = rank - 1; d >= 0; --d) {
        if (!red[d]) {
          base += (rest % ext[d]) * stride[d];
          rest /= ext[d];
        }
      }
      using Acc = std::conditional_t<Op == Reduce::Max, T, SumAcc<T>>;
      Acc acc = Op == Reduce::Max ? Acc(lowest<T>()) : Acc(0);
      std::fill(idx.begin(), idx.end(), 0);
      for (int64_t k = 0; k < rs.count; ++k) {
        int64_t off = base;
        for (int d = 0; d < rank; ++d) {
          off += idx[d] * stride[d];
        }
        if constexpr (Op == Reduce::Max) {
          acc = maxNan(acc, x[off]);
        } else {
          acc += static_cast<Acc>(x[off]);
        }
        for (int d = rank - 1; d >= 0; --d) {
          if (red[d] && ++idx[d] < ext[d]) {
            break;
          }
          idx[d] = 0;
        }
      }
      if constexpr (Op == Reduce::Max) {
        y[o] = acc;
      } else {
        y[o] = finish<Op, T>(acc, rs.count);
      }
    }
  });
}

template <Reduce Op> std::string runReduce(const KernelCall &call) {
  switch (call.operands[0].dtype) {
  case DType::F32:
    runReduceTyped<Op, float>(call);
    break;
  case DType::F64:
    runReduceTyped<Op, double>(call);
    break;
  case DType::I32:
    runReduceTyped<Op, int32_t>(call);
    break;
  default:
    runReduceTyped<Op, int64_t>(call);
    break;
  }
  return "";
}

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

std::string checkSoftmax(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::F64}); !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 1, 0); !e.empty()) {
    return e;
  }
  if (auto e = expectShape(call, 1, call.operands[0].shape); !e.empty()) {
    return e;
  }
  int64_t axis = 0;
  return expectIntAttr(call, "axis", 0, call.operands[0].rank() - 1, true, 0,
                       axis);
}

/// Softmax of one contiguous row: max, exp(x - max), scale by 1 / sum.
template <typename T> void softmaxRow(const T *x, T *y, int64_t n) {
  T m = maxRow(x, n);
  expShift(x, y, n, m);
  T sum = static_cast<T>(sumRow<T>(y, n));
  scaleRow(y, n, T(1) / sum);
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
    m[j] = lowest<T>();
    s[j] = 0;
  }
  for (int64_t l = 0; l < len; ++l) {
    for (int64_t j = 0; j < width; ++j) {
      m[j] = maxNan(m[j], x[l * inner + c0 + j]);
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
      for (int64_t o = begin; o < end; ++o) {
        softmaxRow(x + o * len, y + o * len, len);
      }
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
  float r = 1.0f / std::sqrt(sumSquares(x, d, 0.0f) / d + eps);
  for (int64_t i = 0; i < d; ++i) {
    y[i] = w[i] * (x[i] * r);
  }
}

TAILOR_VECTOR_CLONES void layerNormRow(const float *x, const float *w,
                                       const float *b, float *y, int64_t d,
                                       float eps) {
  float mean = static_cast<float>(sumRow<float>(x, d) / d);
  float rstd = 1.0f / std::sqrt(sumSquares(x, d, mean) / d + eps);
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

float maxRowF32(const float *x, int64_t n) { return maxRow(x, n); }

float expShiftSumF32(const float *x, float *y, int64_t n, float shift) {
  expShift(x, y, n, shift);
  return sumRow<float>(y, n);
}

void addReductionKernels(std::vector<KernelDef> &table) {
  table.push_back(
      {"reduce_sum", 2, checkReduce<Reduce::Sum>, runReduce<Reduce::Sum>});
  table.push_back(
      {"reduce_mean", 2, checkReduce<Reduce::Mean>, runReduce<Reduce::Mean>});
  table.push_back(
      {"reduce_max", 2, checkReduce<Reduce::Max>, runReduce<Reduce::Max>});
  table.push_back({"softmax", 2, checkSoftmax, runSoftmax});
  table.push_back({"rms_norm", 3, checkRmsNorm, runNorm<true>});
  table.push_back({"layer_norm", -1, checkLayerNorm, runNorm<false>});
}

} // namespace tailor::runtime::cpu
