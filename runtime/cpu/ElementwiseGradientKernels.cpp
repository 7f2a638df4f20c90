//===- ElementwiseGradientKernels.cpp - row-local backward kernels --------===//
//
// The vector-Jacobian products of softmax, rope, silu, gelu and slice: each
// output row or element depends on one row or element of the inputs, so no
// sum crosses rows (GradientKernels.cpp has the kernels whose sums do). All
// f32, dense and row-major; operands are the saved forward tensors and the
// incoming gradient, then the gradient written. Rows and elements go to the
// pool independently, so no result depends on the thread count. Elementwise
// math is f32 as the forward kernels compute it; softmax_grad's sums along
// its axis accumulate in f64.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/ScalarMath.h"
#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <limits>

namespace tailor::runtime::cpu {
namespace {

/// sum a[i] * b[i] in f64.
inline double dot(const float *a, const float *b, int64_t n) {
  double sum = 0;
  TAILOR_SIMD(reduction(+ : sum))
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(a[i]) * b[i];
  }
  return sum;
}

} // namespace

/// dx = y (dy - dot(dy, y)) for one row: the softmax VJP. dx may be dy.
TAILOR_VECTOR_CLONES void softmaxGradRow(const float *y, const float *dy,
                                         float *dx, int64_t n) {
  float c = static_cast<float>(dot(y, dy, n));
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = y[i] * (dy[i] - c);
  }
}

namespace {

//===----------------------------------------------------------------------===//
// softmax_grad
//===----------------------------------------------------------------------===//

// dx = y (dy - sum_axis(dy y)). Along the last axis one row per task; along
// another axis blocks of 256 columns of [len, inner] per task, so every
// pass streams contiguous rows (as the forward does). dx may alias dy.

std::string checkSoftmaxGrad(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  const std::vector<int64_t> &y = call.operands[0].shape;
  int64_t axis = 0;
  return firstError({expectAllF32(call), expectShape(call, 1, y),
                     expectShape(call, 2, y),
                     expectIntAttr(call, "axis", 0, call.operands[0].rank() - 1,
                                   true, 0, axis)});
}

constexpr int64_t kSoftmaxColumns = 256;

TAILOR_VECTOR_CLONES void softmaxGradColumns(const float *y, const float *dy,
                                             float *dx, int64_t len,
                                             int64_t inner, int64_t width) {
  double sum[kSoftmaxColumns] = {};
  for (int64_t l = 0; l < len; ++l) {
    for (int64_t j = 0; j < width; ++j) {
      sum[j] += static_cast<double>(dy[l * inner + j]) * y[l * inner + j];
    }
  }
  float c[kSoftmaxColumns];
  for (int64_t j = 0; j < width; ++j) {
    c[j] = static_cast<float>(sum[j]);
  }
  for (int64_t l = 0; l < len; ++l) {
    for (int64_t j = 0; j < width; ++j) {
      dx[l * inner + j] = y[l * inner + j] * (dy[l * inner + j] - c[j]);
    }
  }
}

std::string runSoftmaxGrad(const KernelCall &call) {
  const Tensor &ty = call.operands[0];
  const float *y = ty.as<float>(), *dy = call.operands[1].as<float>();
  float *dx = call.operands[2].as<float>();
  int64_t axis = call.attributes.getInt("axis", 0);
  int64_t outer = 1, len = ty.shape[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d) {
    outer *= ty.shape[d];
  }
  for (int64_t d = axis + 1; d < ty.rank(); ++d) {
    inner *= ty.shape[d];
  }
  if (len == 0) {
    return "";
  }
  if (inner == 1) {
    parallelFor(call, outer, std::max<int64_t>(1, kElementwiseGrain / len),
                [&](int64_t begin, int64_t end, int) {
                  for (int64_t r = begin; r < end; ++r) {
                    softmaxGradRow(y + r * len, dy + r * len, dx + r * len,
                                   len);
                  }
                });
    return "";
  }
  int64_t blocks = (inner + kSoftmaxColumns - 1) / kSoftmaxColumns;
  int64_t grain =
      std::max<int64_t>(1, kElementwiseGrain / (len * kSoftmaxColumns));
  parallelFor(call, outer * blocks, grain,
              [&](int64_t begin, int64_t end, int) {
                for (int64_t task = begin; task < end; ++task) {
                  int64_t o = task / blocks;
                  int64_t c0 = (task % blocks) * kSoftmaxColumns;
                  int64_t at = o * len * inner + c0;
                  softmaxGradColumns(y + at, dy + at, dx + at, len, inner,
                                     std::min(kSoftmaxColumns, inner - c0));
                }
              });
  return "";
}

//===----------------------------------------------------------------------===//
// rope_grad
//===----------------------------------------------------------------------===//

// The transpose of rope's per-row linear map. rope writes, for each pair
// (i, j) (j = i + D/2 rotate-half, j = i + 1 interleaved),
//   y[i] = x[i] c[i] - x[j] s[i],   y[j] = x[j] c[j] + x[i] s[j],
// so
//   dx[i] = dy[i] c[i] + dy[j] s[j],   dx[j] = dy[j] c[j] - dy[i] s[i],
// exact whatever the tables hold. dx may alias dy.

TAILOR_VECTOR_CLONES void ropeGradRow(const float *dy, const float *c,
                                      const float *s, float *dx, int64_t d,
                                      bool interleaved) {
  int64_t pairs = d / 2, step = interleaved ? 2 : 1;
  int64_t offset = interleaved ? 1 : pairs;
  TAILOR_IVDEP
  for (int64_t p = 0; p < pairs; ++p) {
    int64_t i = p * step, j = i + offset;
    float a = dy[i], b = dy[j];
    dx[i] = a * c[i] + b * s[j];
    dx[j] = b * c[j] - a * s[i];
  }
}

std::string checkRopeGrad(const KernelCall &call) {
  // The forward's operand roles, with dy in x's place and dx in y's.
  const KernelDef *rope = findCpuKernel("rope");
  return rope ? rope->check(call) : "the forward 'rope' kernel is missing";
}

std::string runRopeGrad(const KernelCall &call) {
  const Tensor &tdy = call.operands[0];
  int64_t b = tdy.shape[0], h = tdy.shape[1], t = tdy.shape[2];
  int64_t d = tdy.shape[3];
  if (d == 0) {
    return "";
  }
  const float *dy = tdy.as<float>();
  const float *cosT = call.operands[1].as<float>();
  const float *sinT = call.operands[2].as<float>();
  float *dx = call.operands[3].as<float>();
  bool perBatch = call.operands[1].rank() == 3;
  bool interleaved = call.attributes.getInt("interleaved", 0) != 0;
  parallelFor(call, b * h * t, std::max<int64_t>(1, kElementwiseGrain / d),
              [&](int64_t begin, int64_t end, int) {
                for (int64_t row = begin; row < end; ++row) {
                  int64_t ti = row % t, bi = row / (h * t);
                  int64_t table = ((perBatch ? bi * t : 0) + ti) * d;
                  ropeGradRow(dy + row * d, cosT + table, sinT + table,
                              dx + row * d, d, interleaved);
                }
              });
  return "";
}

//===----------------------------------------------------------------------===//
// silu_grad, gelu_grad
//===----------------------------------------------------------------------===//

// dx = dy f'(x) with f' the exact derivative of the forward's formula, in
// f32 through VectorMath.h like the forward (so it vectorizes). dx may
// alias dy or x.

template <Activation Act>
TAILOR_VECTOR_CLONES void activationGradLoop(const float *x, const float *dy,
                                             float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = dy[i] * derivative<Act>(x[i]);
  }
}

std::string checkActivationGrad(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  const std::vector<int64_t> &x = call.operands[0].shape;
  return firstError(
      {expectAllF32(call), expectShape(call, 1, x), expectShape(call, 2, x)});
}

std::string checkGeluGrad(const KernelCall &call) {
  if (auto e = checkActivationGrad(call); !e.empty()) {
    return e;
  }
  const Attribute *attr = call.attributes.find("approximate");
  if (attr && (attr->kind != Attribute::Kind::String ||
               (attr->s != "none" && attr->s != "tanh"))) {
    return "attribute 'approximate' must be the string 'none' or 'tanh'";
  }
  return "";
}

template <Activation Act>
std::string runActivationGrad(const KernelCall &call) {
  const float *x = call.operands[0].as<float>();
  const float *dy = call.operands[1].as<float>();
  float *dx = call.operands[2].as<float>();
  parallelFor(call, call.operands[0].numel(), kTranscendentalGrain,
              [&](int64_t begin, int64_t end, int) {
                activationGradLoop<Act>(x + begin, dy + begin, dx + begin,
                                        end - begin);
              });
  return "";
}

std::string runGeluGrad(const KernelCall &call) {
  if (call.attributes.getString("approximate", "none") == "tanh") {
    return runActivationGrad<Activation::GeluTanh>(call);
  }
  return runActivationGrad<Activation::GeluErf>(call);
}

//===----------------------------------------------------------------------===//
// slice_grad
//===----------------------------------------------------------------------===//

// dx = 0, then dx[starts + i steps] = dy[i]: a zero fill and a strided
// scatter by rows of dy's last dimension. Steps >= 1 make the targets
// distinct, so rows scatter in parallel.

std::string checkSliceGrad(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  const Tensor &dy = call.operands[0], &dx = call.operands[1];
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> starts, steps;
  if (auto e = firstError(
          {expectAllF32(call), expectRank(call, 0, dx.rank()),
           expectIntsAttr(call, "starts", dx.shape.size(), 0, kMax, starts),
           expectIntsAttr(call, "steps", dx.shape.size(), 1, kMax, steps)});
      !e.empty()) {
    return e;
  }
  for (size_t d = 0; d < dx.shape.size(); ++d) {
    int64_t n = dy.shape[d];
    // The last element written, start + (n - 1) step, must be inside dx;
    // the division form cannot overflow.
    if (n > 0 && (starts[d] >= dx.shape[d] ||
                  (n - 1) > (dx.shape[d] - 1 - starts[d]) / steps[d])) {
      return "slice of dimension " + std::to_string(d) + " (start " +
             std::to_string(starts[d]) + ", step " + std::to_string(steps[d]) +
             ", " + std::to_string(n) + " elements) writes past its extent " +
             std::to_string(dx.shape[d]);
    }
  }
  return "";
}

std::string runSliceGrad(const KernelCall &call) {
  const Tensor &tdy = call.operands[0], &tdx = call.operands[1];
  float *dx = tdx.as<float>();
  parallelZero(call, dx, tdx.numel());
  int64_t rank = tdy.rank(), total = tdy.numel();
  if (total == 0) {
    return "";
  }
  std::vector<int64_t> starts = call.attributes.getInts("starts");
  std::vector<int64_t> steps = call.attributes.getInts("steps");
  // Element strides of dx per step of each dy dimension.
  std::vector<int64_t> stride(rank);
  int64_t base = 0, extent = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    stride[i] = steps[i] * extent;
    base += starts[i] * extent;
    extent *= tdx.shape[i];
  }
  int64_t inner = rank ? tdy.shape[rank - 1] : 1;
  int64_t innerStride = rank ? stride[rank - 1] : 1;
  const float *dy = tdy.as<float>();
  parallelFor(call, total / inner,
              std::max<int64_t>(1, kElementwiseGrain / inner),
              [&](int64_t begin, int64_t end, int) {
                for (int64_t row = begin; row < end; ++row) {
                  int64_t at = base, rest = row;
                  for (int64_t i = rank - 2; i >= 0; --i) {
                    at += (rest % tdy.shape[i]) * stride[i];
                    rest /= tdy.shape[i];
                  }
                  const float *src = dy + row * inner;
                  for (int64_t j = 0; j < inner; ++j) {
                    dx[at + j * innerStride] = src[j];
                  }
                }
              });
  return "";
}

} // namespace

void addElementwiseGradientKernels(std::vector<KernelDef> &table) {
  table.push_back({"softmax_grad", 3, checkSoftmaxGrad, runSoftmaxGrad});
  table.push_back({"rope_grad", 4, checkRopeGrad, runRopeGrad});
  table.push_back({"silu_grad", 3, checkActivationGrad,
                   runActivationGrad<Activation::Silu>});
  table.push_back({"gelu_grad", 3, checkGeluGrad, runGeluGrad});
  table.push_back({"slice_grad", 2, checkSliceGrad, runSliceGrad});
}

} // namespace tailor::runtime::cpu
