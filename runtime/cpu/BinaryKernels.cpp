//===- BinaryKernels.cpp - broadcasting arithmetic, compare, select -------===//
//
// Layout: inputs broadcast (NumPy rules) to the output's shape and are
// walked with a BroadcastPlan, whose innermost stride per input is 0 or 1;
// the inner loops are specialized on those strides, so `x + bias`, `x * s`
// and masked fills are contiguous loops the compiler vectorizes. The
// output's flat index range is split over the pool, so one long row and
// many short ones parallelize alike. Outputs may alias a same-shaped input.
// Precision: each op in the operands' own type; integer add, sub and mul
// wrap, integer division truncates toward zero.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/VectorMath.h"

#include <cmath>
#include <type_traits>

namespace tailor::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Binary and compare
//===----------------------------------------------------------------------===//

enum class Binary { Add, Sub, Mul, Div, Pow, Max, Min, Eq, Lt, Gt };

/// a^b for integers by squaring; negative exponents truncate toward zero
/// like 1 / a^-b (so only |a| = 1 survives).
template <typename T> inline T intPow(T a, T b) {
  if (b < 0) {
    return a == 1 ? T(1) : a == -1 ? (b % 2 ? T(-1) : T(1)) : T(0);
  }
  using U = std::make_unsigned_t<T>;
  U result = 1;
  U base = static_cast<U>(a);
  for (U e = static_cast<U>(b); e; e >>= 1) {
    if (e & 1) {
      result *= base;
    }
    base *= base;
  }
  return static_cast<T>(result);
}

/// Integer add, sub and mul wrap (as in PyTorch) instead of being UB.
template <Binary Op, typename T> inline T wrapping(T a, T b) {
  using U = std::make_unsigned_t<T>;
  U ua = static_cast<U>(a), ub = static_cast<U>(b);
  if constexpr (Op == Binary::Add) {
    return static_cast<T>(U(ua + ub));
  } else if constexpr (Op == Binary::Sub) {
    return static_cast<T>(U(ua - ub));
  } else {
    return static_cast<T>(U(ua * ub));
  }
}

template <Binary Op, typename T> inline auto applyBinary(T a, T b) {
  if constexpr ((Op == Binary::Add || Op == Binary::Sub || Op == Binary::Mul) &&
                std::is_integral_v<T>) {
    return wrapping<Op>(a, b);
  } else if constexpr (Op == Binary::Add) {
    return a + b;
  } else if constexpr (Op == Binary::Sub) {
    return a - b;
  } else if constexpr (Op == Binary::Mul) {
    return a * b;
  } else if constexpr (Op == Binary::Div) {
    if constexpr (std::is_integral_v<T>) {
      // Divisors were checked for zero; -1 is negated with wraparound so
      // INT_MIN / -1 does not trap.
      using U = std::make_unsigned_t<T>;
      return b == -1 ? static_cast<T>(U(0) - static_cast<U>(a)) : T(a / b);
    } else {
      return a / b;
    }
  } else if constexpr (Op == Binary::Pow) {
    if constexpr (std::is_integral_v<T>) {
      return intPow(a, b);
    } else {
      return std::pow(a, b);
    }
  } else if constexpr (Op == Binary::Max) {
    // NaN in either operand wins, as in torch.maximum.
    return a != a ? a : (a > b ? a : b);
  } else if constexpr (Op == Binary::Min) {
    return a != a ? a : (a < b ? a : b);
  } else if constexpr (Op == Binary::Eq) {
    return uint8_t(a == b);
  } else if constexpr (Op == Binary::Lt) {
    return uint8_t(a < b);
  } else {
    return uint8_t(a > b);
  }
}

/// One run of the innermost dimension; sa and sb are 0 or 1.
template <Binary Op, typename T, typename R>
TAILOR_VECTOR_CLONES void binaryLoop(const T *a, int64_t sa, const T *b,
                                     int64_t sb, R *y, int64_t n) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) {
      y[i] = applyBinary<Op>(a[i], b[i]);
    }
  } else if (sa) {
    const T bv = *b;
    for (int64_t i = 0; i < n; ++i) {
      y[i] = applyBinary<Op>(a[i], bv);
    }
  } else if (sb) {
    const T av = *a;
    for (int64_t i = 0; i < n; ++i) {
      y[i] = applyBinary<Op>(av, b[i]);
    }
  } else {
    const R v = applyBinary<Op>(*a, *b);
    for (int64_t i = 0; i < n; ++i) {
      y[i] = v;
    }
  }
}

constexpr bool isCompare(Binary op) {
  return op == Binary::Eq || op == Binary::Lt || op == Binary::Gt;
}

template <Binary Op> std::string checkBinary(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (isCompare(Op)) {
    if (auto e = expectDTypeIn(
            call, 0,
            {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool});
        !e.empty()) {
      return e;
    }
    if (auto e = expectDType(call, 2, DType::Bool); !e.empty()) {
      return e;
    }
  } else {
    if (auto e = expectDTypeIn(
            call, 0, {DType::F32, DType::F64, DType::I32, DType::I64});
        !e.empty()) {
      return e;
    }
    if (auto e = expectSameDType(call, 2, 0); !e.empty()) {
      return e;
    }
  }
  if (auto e = expectSameDType(call, 1, 0); !e.empty()) {
    return e;
  }
  const std::vector<int64_t> &out = call.operands[2].shape;
  if (auto e = expectBroadcastsTo(call, 0, out); !e.empty()) {
    return e;
  }
  return expectBroadcastsTo(call, 1, out);
}

template <Binary Op, typename T>
std::string runBinaryTyped(const KernelCall &call) {
  using R = std::conditional_t<isCompare(Op), uint8_t, T>;
  const Tensor &ta = call.operands[0];
  const Tensor &tb = call.operands[1];
  const Tensor &ty = call.operands[2];
  if constexpr (Op == Binary::Div && std::is_integral_v<T>) {
    const T *b = tb.as<T>();
    for (int64_t i = 0, n = tb.numel(); i < n; ++i) {
      if (b[i] == 0) {
        return "integer division by zero";
      }
    }
  }
  BroadcastPlan plan(ty.shape, {&ta.shape, &tb.shape});
  const T *a = ta.as<T>();
  const T *b = tb.as<T>();
  R *y = ty.as<R>();
  int64_t sa = plan.innerStride(0), sb = plan.innerStride(1);
  constexpr bool cheap = Op != Binary::Pow;
  parallelFor(
      call, ty.numel(), cheap ? kElementwiseGrain : kTranscendentalGrain,
      [&](int64_t begin, int64_t end, int) {
        plan.forEachRun(
            begin, end, [&](const auto &off, int64_t pos, int64_t len) {
              binaryLoop<Op>(a + off[0], sa, b + off[1], sb, y + pos, len);
            });
      });
  return "";
}

template <Binary Op> std::string runBinary(const KernelCall &call) {
  switch (call.operands[0].dtype) {
  case DType::F32:
    return runBinaryTyped<Op, float>(call);
  case DType::F64:
    return runBinaryTyped<Op, double>(call);
  case DType::I32:
    return runBinaryTyped<Op, int32_t>(call);
  case DType::I64:
    return runBinaryTyped<Op, int64_t>(call);
  default:
    if constexpr (isCompare(Op)) {
      return runBinaryTyped<Op, uint8_t>(call);
    }
    return "unsupported dtype";
  }
}

//===----------------------------------------------------------------------===//
// Select
//===----------------------------------------------------------------------===//

/// Moves elements as same-sized unsigned integers: select never looks at
/// values, so one instantiation per element size serves every dtype. The
/// inner strides (0 or 1 each) are template arguments so every combination,
/// e.g. a broadcast mask choosing between a scalar and a tensor, is a
/// contiguous loop.
template <typename T, int SC, int SA, int SB>
TAILOR_VECTOR_CLONES void selectLoop(const uint8_t *c, const T *a, const T *b,
                                     T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = c[i * SC] ? a[i * SA] : b[i * SB];
  }
}

template <typename T>
void selectRun(const uint8_t *c, int64_t sc, const T *a, int64_t sa, const T *b,
               int64_t sb, T *y, int64_t n) {
  switch ((sc ? 4 : 0) | (sa ? 2 : 0) | (sb ? 1 : 0)) {
  case 0:
    return selectLoop<T, 0, 0, 0>(c, a, b, y, n);
  case 1:
    return selectLoop<T, 0, 0, 1>(c, a, b, y, n);
  case 2:
    return selectLoop<T, 0, 1, 0>(c, a, b, y, n);
  case 3:
    return selectLoop<T, 0, 1, 1>(c, a, b, y, n);
  case 4:
    return selectLoop<T, 1, 0, 0>(c, a, b, y, n);
  case 5:
    return selectLoop<T, 1, 0, 1>(c, a, b, y, n);
  case 6:
    return selectLoop<T, 1, 1, 0>(c, a, b, y, n);
  default:
    return selectLoop<T, 1, 1, 1>(c, a, b, y, n);
  }
}

std::string checkSelect(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 0, DType::Bool); !e.empty()) {
    return e;
  }
  for (size_t i : {2, 3}) {
    if (auto e = expectSameDType(call, i, 1); !e.empty()) {
      return e;
    }
  }
  for (size_t i : {0, 1, 2}) {
    if (auto e = expectBroadcastsTo(call, i, call.operands[3].shape);
        !e.empty()) {
      return e;
    }
  }
  return "";
}

template <typename T> void runSelectTyped(const KernelCall &call) {
  const Tensor &ty = call.operands[3];
  BroadcastPlan plan(ty.shape,
                     {&call.operands[0].shape, &call.operands[1].shape,
                      &call.operands[2].shape});
  const uint8_t *c = call.operands[0].as<uint8_t>();
  const T *a = call.operands[1].as<T>();
  const T *b = call.operands[2].as<T>();
  T *y = ty.as<T>();
  int64_t sc = plan.innerStride(0), sa = plan.innerStride(1),
          sb = plan.innerStride(2);
  parallelFor(call, ty.numel(), kElementwiseGrain,
              [&](int64_t begin, int64_t end, int) {
                plan.forEachRun(begin, end,
                                [&](const auto &off, int64_t pos, int64_t len) {
                                  selectRun(c + off[0], sc, a + off[1], sa,
                                            b + off[2], sb, y + pos, len);
                                });
              });
}

std::string runSelect(const KernelCall &call) {
  switch (dtypeSize(call.operands[3].dtype)) {
  case 1:
    runSelectTyped<uint8_t>(call);
    break;
  case 2:
    runSelectTyped<uint16_t>(call);
    break;
  case 4:
    runSelectTyped<uint32_t>(call);
    break;
  default:
    runSelectTyped<uint64_t>(call);
    break;
  }
  return "";
}

} // namespace

void addBinaryKernels(std::vector<KernelDef> &table) {
  table.push_back({"add", 3, checkBinary<Binary::Add>, runBinary<Binary::Add>});
  table.push_back({"sub", 3, checkBinary<Binary::Sub>, runBinary<Binary::Sub>});
  table.push_back({"mul", 3, checkBinary<Binary::Mul>, runBinary<Binary::Mul>});
  table.push_back({"div", 3, checkBinary<Binary::Div>, runBinary<Binary::Div>});
  table.push_back({"pow", 3, checkBinary<Binary::Pow>, runBinary<Binary::Pow>});
  table.push_back({"max", 3, checkBinary<Binary::Max>, runBinary<Binary::Max>});
  table.push_back({"min", 3, checkBinary<Binary::Min>, runBinary<Binary::Min>});
  table.push_back({"eq", 3, checkBinary<Binary::Eq>, runBinary<Binary::Eq>});
  table.push_back({"lt", 3, checkBinary<Binary::Lt>, runBinary<Binary::Lt>});
  table.push_back({"gt", 3, checkBinary<Binary::Gt>, runBinary<Binary::Gt>});
  table.push_back({"select", 4, checkSelect, runSelect});
}

} // namespace tailor::runtime::cpu
