//===- ElementwiseKernels.cpp - unary math, gelu, is_nan, cast, band_mask -===//
//
// Layout: x and y dense and of one shape; y may alias x (in-place updates).
// Precision: f32 math in f32 through VectorMath.h (within a few ulp of
// libm, vectorized), f64 through libm. log, sin and cos call libm in both
// (scalar): they run on small tensors (rope tables, per-token losses).
//
// Each kernel is a template over the element type and the op, so the switch
// on op and dtype happens once per launch and each inner loop is a plain
// `for` over a contiguous chunk that the compiler vectorizes; chunks of the
// flat index range go to the pool.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/ScalarMath.h"
#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <type_traits>

namespace tailor::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

template <Unary Op, typename T>
TAILOR_VECTOR_CLONES void unaryLoop(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = applyUnary<Op>(x[i]);
  }
}

std::string checkUnary(const KernelCall &call) { return expectFloatMap(call); }

template <Unary Op, typename T> void runUnaryTyped(const KernelCall &call) {
  const T *x = call.operands[0].as<T>();
  T *y = call.operands[1].as<T>();
  constexpr bool cheap = Op == Unary::Neg || Op == Unary::Abs ||
                         Op == Unary::Relu || Op == Unary::Reciprocal ||
                         Op == Unary::Sqrt || Op == Unary::Rsqrt;
  parallelFor(call, call.operands[0].numel(),
              cheap ? kElementwiseGrain : kTranscendentalGrain,
              [&](int64_t begin, int64_t end, int) {
                unaryLoop<Op>(x + begin, y + begin, end - begin);
              });
}

template <Unary Op> std::string runUnary(const KernelCall &call) {
  if (call.operands[0].dtype == DType::F32) {
    runUnaryTyped<Op, float>(call);
  } else {
    runUnaryTyped<Op, double>(call);
  }
  return "";
}

std::string checkGelu(const KernelCall &call) {
  if (auto e = checkUnary(call); !e.empty()) {
    return e;
  }
  // Absent reads as PyTorch's default, exact GELU.
  const Attribute *attr = call.attributes.find("approximate");
  if (attr && (attr->kind != Attribute::Kind::String ||
               (attr->s != "none" && attr->s != "tanh"))) {
    return "attribute 'approximate' must be the string 'none' or 'tanh'";
  }
  return "";
}

std::string runGelu(const KernelCall &call) {
  if (call.attributes.getString("approximate", "none") == "tanh") {
    return runUnary<Unary::GeluTanh>(call);
  }
  return runUnary<Unary::GeluErf>(call);
}

template <typename T>
TAILOR_VECTOR_CLONES void isNanLoop(const T *x, uint8_t *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] != x[i];
  }
}

std::string checkIsNan(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::F64}); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 1, DType::Bool); !e.empty()) {
    return e;
  }
  return expectShape(call, 1, call.operands[0].shape);
}

std::string runIsNan(const KernelCall &call) {
  const Tensor &x = call.operands[0];
  uint8_t *y = call.operands[1].as<uint8_t>();
  parallelFor(call, x.numel(), kElementwiseGrain,
              [&](int64_t begin, int64_t end, int) {
                if (x.dtype == DType::F32) {
                  isNanLoop(x.as<float>() + begin, y + begin, end - begin);
                } else {
                  isNanLoop(x.as<double>() + begin, y + begin, end - begin);
                }
              });
  return "";
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

/// Bool is stored as one byte; this tag keeps it apart from a u8 number.
struct BoolTag {};

template <typename From, typename To> inline To convert(From x) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // Truncate toward zero; NaN reads 0 and out-of-range values saturate, so
    // the conversion is defined for every input.
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From hi = -lo; // 2^31 or 2^63, exact in both float types
    From c = x != x ? From(0) : x;
    c = c < lo ? lo : c;
    To t = c >= hi ? To(0) : static_cast<To>(c);
    return c >= hi ? std::numeric_limits<To>::max() : t;
  } else {
    return static_cast<To>(x);
  }
}

template <typename From, typename To>
TAILOR_VECTOR_CLONES void castLoop(const void *src, void *dst, int64_t n) {
  using S = std::conditional_t<std::is_same_v<From, BoolTag>, uint8_t, From>;
  using D = std::conditional_t<std::is_same_v<To, BoolTag>, uint8_t, To>;
  const S *x = static_cast<const S *>(src);
  D *y = static_cast<D *>(dst);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, BoolTag>) {
      y[i] = x[i] != S(0);
    } else if constexpr (std::is_same_v<From, BoolTag>) {
      y[i] = x[i] != 0 ? D(1) : D(0);
    } else {
      y[i] = convert<From, To>(x[i]);
    }
  }
}

using CastFn = void (*)(const void *, void *, int64_t);

template <typename From> CastFn castTo(DType to) {
  switch (to) {
  case DType::F32:
    return castLoop<From, float>;
  case DType::F64:
    return castLoop<From, double>;
  case DType::I32:
    return castLoop<From, int32_t>;
  case DType::I64:
    return castLoop<From, int64_t>;
  default:
    return castLoop<From, BoolTag>;
  }
}

CastFn castFn(DType from, DType to) {
  switch (from) {
  case DType::F32:
    return castTo<float>(to);
  case DType::F64:
    return castTo<double>(to);
  case DType::I32:
    return castTo<int32_t>(to);
  case DType::I64:
    return castTo<int64_t>(to);
  default:
    return castTo<BoolTag>(to);
  }
}

std::string checkCast(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  for (size_t i : {0, 1}) {
    if (auto e = expectDTypeIn(
            call, i,
            {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool});
        !e.empty()) {
      return e;
    }
  }
  return expectShape(call, 1, call.operands[0].shape);
}

std::string runCast(const KernelCall &call) {
  const Tensor &x = call.operands[0];
  const Tensor &y = call.operands[1];
  CastFn fn = castFn(x.dtype, y.dtype);
  size_t xs = dtypeSize(x.dtype), ys = dtypeSize(y.dtype);
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(y.data);
  parallelFor(call, x.numel(), kElementwiseGrain,
              [&](int64_t begin, int64_t end, int) {
                fn(src + begin * xs, dst + begin * ys, end - begin);
              });
  return "";
}

//===----------------------------------------------------------------------===//
// Band mask
//===----------------------------------------------------------------------===//

// y [..., T, S]: element (..., i, j) is `inside` when lower <= j - i <= upper,
// `outside` elsewhere. A mask is generated from indices, never stored in a
// plan: each row is two fills (the band is one contiguous run of columns),
// and every leading index repeats the same T x S matrix.

std::string checkBandMask(const KernelCall &call) {
  int64_t lower = 0, upper = 0;
  double inside = 0, outside = 0;
  return firstError(
      {expectOperandCount(call, 1),
       expectDTypeIn(call, 0,
                     {DType::F32, DType::F64, DType::I32, DType::I64,
                      DType::Bool}),
       expectMinRank(call, 0, 2),
       expectIntAttr(call, "lower", INT64_MIN, INT64_MAX, true, 0, lower),
       expectIntAttr(call, "upper", lower, INT64_MAX, true, 0, upper),
       expectFloatAttr(call, "inside", true, 0, inside),
       expectFloatAttr(call, "outside", true, 0, outside)});
}

template <typename T>
void fillBandRows(T *y, int64_t rowBegin, int64_t rowEnd, int64_t rows,
                  int64_t cols, int64_t lower, int64_t upper, T inside,
                  T outside) {
  for (int64_t r = rowBegin; r < rowEnd; ++r) {
    int64_t i = r % rows;
    // Columns j with lower <= j - i <= upper, clamped to [0, cols).
    int64_t first = std::clamp<int64_t>(i + std::max<int64_t>(lower, -rows),
                                        0, cols);
    int64_t last = std::clamp<int64_t>(i + std::min<int64_t>(upper, cols) + 1,
                                       first, cols);
    T *row = y + r * cols;
    std::fill(row, row + first, outside);
    std::fill(row + first, row + last, inside);
    std::fill(row + last, row + cols, outside);
  }
}

std::string runBandMask(const KernelCall &call) {
  const Tensor &y = call.operands[0];
  int64_t cols = y.shape.back();
  int64_t rows = y.shape[y.shape.size() - 2];
  int64_t lower = call.attributes.getInt("lower", 0);
  int64_t upper = call.attributes.getInt("upper", 0);
  double inside = call.attributes.getFloat("inside", 0);
  double outside = call.attributes.getFloat("outside", 0);
  int64_t allRows = cols == 0 ? 0 : y.numel() / cols;
  auto fill = [&](auto *data, auto in, auto out) {
    parallelFor(call, allRows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(cols, 1)),
                [&](int64_t begin, int64_t end, int) {
                  fillBandRows(data, begin, end, rows, cols, lower, upper,
                               in, out);
                });
  };
  switch (y.dtype) {
  case DType::F32:
    fill(y.as<float>(), static_cast<float>(inside), static_cast<float>(outside));
    break;
  case DType::F64:
    fill(y.as<double>(), inside, outside);
    break;
  case DType::I32:
    fill(y.as<int32_t>(), static_cast<int32_t>(inside),
         static_cast<int32_t>(outside));
    break;
  case DType::I64:
    fill(y.as<int64_t>(), static_cast<int64_t>(inside),
         static_cast<int64_t>(outside));
    break;
  default:
    fill(y.as<uint8_t>(), static_cast<uint8_t>(inside != 0),
         static_cast<uint8_t>(outside != 0));
    break;
  }
  return "";
}

//===----------------------------------------------------------------------===//
// mod, sign (f32, f64, i32, i64)
//===----------------------------------------------------------------------===//
//
// mod follows ONNX Mod: with `fmod` the remainder has the dividend's sign
// (C's fmod and %), without it the divisor's (Python, NumPy's remainder,
// including NumPy's zero, which takes the divisor's sign). An integer
// divisor of 0 fails the launch (checked before anything is written); x % -1
// is 0 without the overflow INT_MIN % -1 would be.

template <typename T> inline T remainder(T a, T b, bool fmod) {
  if constexpr (std::is_integral_v<T>) {
    if (b == -1) {
      return 0;
    }
    T r = a % b;
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) {
      r += b;
    }
    return r;
  } else {
    T r = std::fmod(a, b);
    if (fmod) {
      return r;
    }
    if (r != 0) {
      if ((r < 0) != (b < 0)) {
        r += b;
      }
      return r;
    }
    return std::copysign(T(0), b);
  }
}

std::string checkMod(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  const Tensor &y = call.operands[2];
  return firstError(
      {expectDTypeIn(call, 0, {DType::F32, DType::F64, DType::I32, DType::I64}),
       expectSameDType(call, 1, 0), expectSameDType(call, 2, 0),
       expectBroadcastsTo(call, 0, y.shape),
       expectBroadcastsTo(call, 1, y.shape)});
}

template <typename T> std::string runModOf(const KernelCall &call) {
  const Tensor &a = call.operands[0], &b = call.operands[1],
               &y = call.operands[2];
  const T *pa = a.as<T>(), *pb = b.as<T>();
  if constexpr (std::is_integral_v<T>) {
    if (y.numel() > 0) {
      for (int64_t i = 0; i < b.numel(); ++i) {
        if (pb[i] == 0) {
          return "mod: integer division by zero (divisor element " +
                 std::to_string(i) + ")";
        }
      }
    }
  }
  bool fmod = call.attributes.getInt("fmod", 0) != 0;
  BroadcastPlan plan(y.shape, {&a.shape, &b.shape});
  T *py = y.as<T>();
  parallelFor(
      call, y.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end, int) {
        plan.forEachRun(
            begin, end, [&](const auto &off, int64_t pos, int64_t len) {
              int64_t sa = plan.innerStride(0), sb = plan.innerStride(1);
              for (int64_t i = 0; i < len; ++i) {
                py[pos + i] = remainder<T>(pa[off[0] + i * sa],
                                           pb[off[1] + i * sb], fmod);
              }
            });
      });
  return "";
}

std::string runMod(const KernelCall &call) {
  switch (call.operands[0].dtype) {
  case DType::F32:
    return runModOf<float>(call);
  case DType::F64:
    return runModOf<double>(call);
  case DType::I32:
    return runModOf<int32_t>(call);
  default:
    return runModOf<int64_t>(call);
  }
}

std::string checkSign(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  return firstError(
      {expectDTypeIn(call, 0, {DType::F32, DType::F64, DType::I32, DType::I64}),
       expectSameDType(call, 1, 0),
       expectShape(call, 1, call.operands[0].shape)});
}

/// -1, 0 or 1; NaN (which compares false both ways) stays NaN.
template <typename T> void signOf(const KernelCall &call) {
  const T *x = call.operands[0].as<T>();
  T *y = call.operands[1].as<T>();
  parallelFor(call, call.operands[0].numel(), kElementwiseGrain,
              [&](int64_t begin, int64_t end, int) {
                for (int64_t i = begin; i < end; ++i) {
                  T v = x[i];
                  y[i] = v > T(0) ? T(1) : v < T(0) ? T(-1) : v;
                }
              });
}

std::string runSign(const KernelCall &call) {
  switch (call.operands[0].dtype) {
  case DType::F32:
    signOf<float>(call);
    break;
  case DType::F64:
    signOf<double>(call);
    break;
  case DType::I32:
    signOf<int32_t>(call);
    break;
  default:
    signOf<int64_t>(call);
    break;
  }
  return "";
}

} // namespace

void addElementwiseKernels(std::vector<KernelDef> &table) {
  table.push_back({"neg", 2, checkUnary, runUnary<Unary::Neg>});
  table.push_back({"abs", 2, checkUnary, runUnary<Unary::Abs>});
  table.push_back({"exp", 2, checkUnary, runUnary<Unary::Exp>});
  table.push_back({"log", 2, checkUnary, runUnary<Unary::Log>});
  table.push_back({"sqrt", 2, checkUnary, runUnary<Unary::Sqrt>});
  table.push_back({"rsqrt", 2, checkUnary, runUnary<Unary::Rsqrt>});
  table.push_back({"reciprocal", 2, checkUnary, runUnary<Unary::Reciprocal>});
  table.push_back({"tanh", 2, checkUnary, runUnary<Unary::Tanh>});
  table.push_back({"sigmoid", 2, checkUnary, runUnary<Unary::Sigmoid>});
  table.push_back({"silu", 2, checkUnary, runUnary<Unary::Silu>});
  table.push_back({"relu", 2, checkUnary, runUnary<Unary::Relu>});
  table.push_back({"erf", 2, checkUnary, runUnary<Unary::Erf>});
  table.push_back({"sin", 2, checkUnary, runUnary<Unary::Sin>});
  table.push_back({"cos", 2, checkUnary, runUnary<Unary::Cos>});
  table.push_back({"gelu", 2, checkGelu, runGelu});
  table.push_back({"is_nan", 2, checkIsNan, runIsNan});
  table.push_back({"cast", 2, checkCast, runCast});
  table.push_back({"band_mask", 1, checkBandMask, runBandMask});
  table.push_back({"mod", 3, checkMod, runMod});
  table.push_back({"sign", 2, checkSign, runSign});
}

} // namespace tailor::runtime::cpu
