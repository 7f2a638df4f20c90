//===- ElementwiseKernelsTest.cpp - CUDA elementwise kernels vs the CPU ---===//
//
// Every launcher of runtime/cuda/ElementwiseLaunchers.cpp against the CPU
// kernel of the same name: unary maps, gelu, is_nan, cast, binary ops with
// broadcasting (rows path, packed and not, and the strided walk),
// comparisons and select, on f32 at a few ulp, bf16 at bf16's precision, and
// integers exactly; plus odd sizes, empty and rank-0 tensors, misaligned
// pointers (the unpacked paths), the checks' messages, and integer division
// by zero reported in the device error record.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/cuda/CudaTestUtil.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

// Last: the emulator's CUDA keywords (__noinline__, ...) are macros that
// would rewrite the standard headers' attributes.
#include "codegen/cuda/ElementwiseKernels.cu"

namespace tailor::runtime::cuda::testing {
namespace {

constexpr Tolerance kF32{1e-6, 1e-6};
/// bf16 outputs against the CPU's f32 result: one rounding (2^-9 relative)
/// plus the f32 math.
constexpr Tolerance kBf16{1e-5, 8e-3};
constexpr Tolerance kExact{0, 0};

const char *const kUnary[] = {"neg",   "abs",        "exp",  "log",     "sqrt",
                              "rsqrt", "reciprocal", "tanh", "sigmoid", "silu",
                              "relu",  "erf",        "sin",  "cos"};

bool positiveOnly(const std::string &op) {
  return op == "log" || op == "sqrt" || op == "rsqrt";
}

HostTensor unaryInput(const std::string &op, std::vector<int64_t> shape,
                      uint64_t seed) {
  return positiveOnly(op) ? randomF32(std::move(shape), seed, 0.05f, 6.0f)
                          : randomF32(std::move(shape), seed, -6.0f, 6.0f);
}

HostTensor valuesF32(std::vector<int64_t> shape, std::vector<float> values) {
  HostTensor t(DType::F32, std::move(shape));
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}

HostTensor like(const HostTensor &t, DType dtype) {
  return HostTensor(dtype, t.shape);
}

float bf16Round(float f) {
  HostTensor t = valuesF32({1}, {f});
  return float(converted(t, DType::BF16).at(0));
}

//===----------------------------------------------------------------------===//
// Unary maps.
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, UnaryF32) {
  for (const char *op : kUnary) {
    SCOPED_TRACE(op);
    // 1021 is no multiple of the 4-wide packs: the tail slot runs too.
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{1021}, {3, 64}, {1}, {}, {5}}) {
      HostTensor x = unaryInput(op, shape, 7);
      expectMatchesCpu(*backend, op, {x, like(x, DType::F32)}, {}, {1}, kF32);
    }
  }
}

TEST_F(CudaKernelTest, UnaryBf16) {
  for (const char *op : kUnary) {
    SCOPED_TRACE(op);
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{517}, {2, 64}, {3}}) {
      HostTensor x = converted(unaryInput(op, shape, 11), DType::BF16);
      expectMatchesCpu(*backend, op, {x, like(x, DType::BF16)}, {}, {1}, kBf16);
    }
  }
}

TEST_F(CudaKernelTest, UnarySpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor x = valuesF32({12}, {0.0f, -0.0f, inf, -inf, nan, 90.0f, -90.0f,
                                  -104.5f, 1e-30f, -1e-30f, 30.0f, -30.0f});
  for (const char *op : kUnary) {
    SCOPED_TRACE(op);
    expectMatchesCpu(*backend, op, {x, like(x, DType::F32)}, {}, {1}, kF32);
  }
}

TEST_F(CudaKernelTest, UnaryInPlaceEmptyAndOddSizes) {
  for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 8, 9, 255, 257}) {
    SCOPED_TRACE(n);
    HostTensor x = randomF32({n}, 3);
    expectMatchesCpu(*backend, "silu", {x, like(x, DType::F32)}, {}, {1}, kF32);
    HostTensor xb = converted(x, DType::BF16);
    expectMatchesCpu(*backend, "exp", {xb, like(xb, DType::BF16)}, {}, {1},
                     kBf16);
  }
  // A [0, 4] tensor launches nothing and succeeds.
  HostTensor empty(DType::F32, {0, 4});
  expectMatchesCpu(*backend, "tanh", {empty, like(empty, DType::F32)}, {}, {1});
}

TEST_F(CudaKernelTest, Gelu) {
  for (const char *approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    HostTensor x = randomF32({4, 130}, 5, -8.0f, 8.0f);
    // The tanh formula's cubic cancels near x = 0 in both kernels alike;
    // erf's polynomial differs from erff by a few ulp.
    expectMatchesCpu(*backend, "gelu", {x, like(x, DType::F32)},
                     {stringAttr("approximate", approximate)}, {1},
                     {2e-6, 2e-6});
    HostTensor xb = converted(x, DType::BF16);
    expectMatchesCpu(*backend, "gelu", {xb, like(xb, DType::BF16)},
                     {stringAttr("approximate", approximate)}, {1}, kBf16);
  }
  // Absent reads as exact GELU.
  HostTensor x = randomF32({77}, 6, -4.0f, 4.0f);
  expectMatchesCpu(*backend, "gelu", {x, like(x, DType::F32)}, {}, {1},
                   {2e-6, 2e-6});
  EXPECT_EQ(checkCuda("gelu", {x, like(x, DType::F32)},
                      {stringAttr("approximate", "sigmoid")}),
            "attribute 'approximate' must be the string 'none' or 'tanh'");
}

TEST_F(CudaKernelTest, IsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor x =
      valuesF32({3, 3}, {0.0f, nan, inf, -inf, -nan, 1.0f, 2.5f, nan, -0.0f});
  expectMatchesCpu(*backend, "is_nan", {x, like(x, DType::Bool)}, {}, {1},
                   kExact);
  HostTensor xb = converted(x, DType::BF16);
  expectMatchesCpu(*backend, "is_nan", {xb, like(xb, DType::Bool)}, {}, {1},
                   kExact);
  std::vector<HostTensor> out =
      runCuda(*backend, "is_nan", {x, like(x, DType::Bool)}, {});
  EXPECT_EQ(out[1].at(1), 1);
  EXPECT_EQ(out[1].at(2), 0);
}

//===----------------------------------------------------------------------===//
// Binary ops.
//===----------------------------------------------------------------------===//

const char *const kArith[] = {"add", "sub", "mul", "div", "pow", "max", "min"};

/// Shape pairs (a, b) and the output they broadcast to, covering the walk's
/// cases: one row with a tail, rows packed and not, a bias row, a per-row
/// column, scalars, short rows stacked in a block, and outer dimensions
/// with broadcasts (a head-broadcast mask, packed; alternating extent-1s).
struct BroadcastCase {
  std::vector<int64_t> a, b, y;
};
const BroadcastCase kCases[] = {
    {{5, 33}, {5, 33}, {5, 33}},             // same shape, unpacked rows
    {{1029}, {1029}, {1029}},                // flat with a tail
    {{6, 40}, {40}, {6, 40}},                // bias row
    {{6, 40}, {6, 1}, {6, 40}},              // per-row column
    {{40}, {6, 40}, {6, 40}},                // the broadcast one first
    {{7, 13}, {}, {7, 13}},                  // rank-0 scalar b
    {{}, {9}, {9}},                          // rank-0 scalar a
    {{}, {}, {}},                            // rank 0 throughout
    {{300, 3}, {3}, {300, 3}},               // short rows stacked in a block
    {{4, 1, 8}, {3, 1}, {4, 3, 8}},          // the strided walk
    {{2, 3, 4, 5}, {3, 1, 5}, {2, 3, 4, 5}}, // rank 4
    {{2, 1, 4, 1}, {1, 3, 1, 5}, {2, 3, 4, 5}},
    {{1, 1, 8}, {8}, {1, 1, 8}},                // extent-1 dims dropped
    {{2, 3, 4, 8}, {2, 1, 4, 8}, {2, 3, 4, 8}}, // packed outer walk
};

HostTensor operandF32(const std::string &op, std::vector<int64_t> shape,
                      uint64_t seed, bool second) {
  if (op == "pow") {
    return second ? randomF32(std::move(shape), seed, -2.5f, 2.5f)
                  : randomF32(std::move(shape), seed, 0.1f, 3.0f);
  }
  if (op == "div" && second) {
    return randomF32(std::move(shape), seed, 0.25f, 4.0f);
  }
  return randomF32(std::move(shape), seed, -4.0f, 4.0f);
}

TEST_F(CudaKernelTest, BinaryF32Broadcast) {
  for (const char *op : kArith) {
    for (const BroadcastCase &c : kCases) {
      SCOPED_TRACE(std::string(op) + " " + std::to_string(c.a.size()) + "/" +
                   std::to_string(c.b.size()) + " -> " +
                   std::to_string(HostTensor(DType::F32, c.y).numel()));
      HostTensor a = operandF32(op, c.a, 21, false);
      HostTensor b = operandF32(op, c.b, 22, true);
      HostTensor y(DType::F32, c.y);
      expectMatchesCpu(*backend, op, {a, b, y}, {}, {2}, kF32);
    }
  }
}

TEST_F(CudaKernelTest, BinaryBf16Broadcast) {
  for (const char *op : kArith) {
    for (const BroadcastCase &c : kCases) {
      SCOPED_TRACE(op);
      HostTensor a = converted(operandF32(op, c.a, 31, false), DType::BF16);
      HostTensor b = converted(operandF32(op, c.b, 32, true), DType::BF16);
      HostTensor y(DType::BF16, c.y);
      expectMatchesCpu(*backend, op, {a, b, y}, {}, {2}, kBf16);
    }
  }
  // A packed bias row: 8 bf16 to a pack, 64 columns.
  HostTensor a = converted(randomF32({5, 64}, 1), DType::BF16);
  HostTensor b = converted(randomF32({64}, 2), DType::BF16);
  expectMatchesCpu(*backend, "add", {a, b, HostTensor(DType::BF16, {5, 64})},
                   {}, {2}, kBf16);
}

TEST_F(CudaKernelTest, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  HostTensor a = valuesF32({6}, {nan, 1.0f, nan, -inf, 2.0f, -0.0f});
  HostTensor b = valuesF32({6}, {1.0f, nan, nan, 3.0f, inf, 0.0f});
  for (const char *op : {"max", "min", "add", "div", "pow"}) {
    SCOPED_TRACE(op);
    expectMatchesCpu(*backend, op, {a, b, like(a, DType::F32)}, {}, {2},
                     kExact);
  }
}

TEST_F(CudaKernelTest, IntegerArithmetic) {
  for (DType t : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(t));
    for (const BroadcastCase &c : kCases) {
      HostTensor a = randomInts(c.a, 41, -1000, 1000, t);
      // Nonzero divisors in [-9, 9].
      HostTensor b = randomInts(c.b, 42, 1, 10, t);
      HostTensor sign = randomInts(c.b, 43, 0, 2, t);
      for (int64_t i = 0; i < b.numel(); ++i) {
        if (t == DType::I32) {
          b.as<int32_t>()[i] *= sign.as<int32_t>()[i] ? -1 : 1;
        } else {
          b.as<int64_t>()[i] *= sign.as<int64_t>()[i] ? -1 : 1;
        }
      }
      for (const char *op : kArith) {
        SCOPED_TRACE(op);
        HostTensor y(t, c.y);
        expectMatchesCpu(*backend, op, {a, b, y}, {}, {2}, kExact);
      }
    }
  }
}

TEST_F(CudaKernelTest, IntegerEdgeCases) {
  const int32_t lo32 = std::numeric_limits<int32_t>::min();
  const int32_t hi32 = std::numeric_limits<int32_t>::max();
  HostTensor a(DType::I32, {6});
  HostTensor b(DType::I32, {6});
  int32_t av[] = {lo32, hi32, -7, 7, -7, 3};
  int32_t bv[] = {-1, 2, 2, -2, -2, 40};
  std::memcpy(a.data(), av, sizeof(av));
  std::memcpy(b.data(), bv, sizeof(bv));
  for (const char *op : kArith) {
    SCOPED_TRACE(op);
    expectMatchesCpu(*backend, op, {a, b, like(a, DType::I32)}, {}, {2},
                     kExact);
  }
  // Negative exponents: only |a| = 1 survives truncation.
  HostTensor base(DType::I64, {5});
  HostTensor exponent(DType::I64, {5});
  int64_t basev[] = {1, -1, -1, 2, -3};
  int64_t expv[] = {-5, -3, -4, -1, 63};
  std::memcpy(base.data(), basev, sizeof(basev));
  std::memcpy(exponent.data(), expv, sizeof(expv));
  expectMatchesCpu(*backend, "pow", {base, exponent, like(base, DType::I64)},
                   {}, {2}, kExact);
}

TEST_F(CudaKernelTest, IntegerDivisionByZeroIsReported) {
  // A run error on the CPU: the GPU writes 0 there and reports the zero
  // divisor (element 2 of b, which broadcasts over a's rows) in the device
  // error record; the other quotients are the CPU kernel's.
  for (DType dtype : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(dtype));
    HostTensor num = randomInts({3, 4}, 1, -50, 50, dtype);
    HostTensor den = converted(randomInts({4}, 2, 1, 9), dtype);
    if (dtype == DType::I32) {
      den.as<int32_t>()[2] = 0;
    } else {
      den.as<int64_t>()[2] = 0;
    }
    std::vector<HostTensor> out = {num, den, like(num, dtype)};
    runCudaForError(*backend, "div", out, {}, 14);
    for (int64_t i = 0; i < 12; ++i) {
      int64_t want =
          i % 4 == 2 ? 0 : int64_t(num.at(i)) / int64_t(den.at(i % 4));
      EXPECT_EQ(out[2].at(i), double(want)) << "element " << i;
    }
    DeviceErrorRecord want{tl::kDivByZero, 14, 0, 2, 0};
    expectDeviceError(*backend, "div", {num, den, like(num, dtype)}, {}, want);
    // The CPU kernel's message, with the element.
    std::string cpu = cpuRunError("div", {num, den, like(num, dtype)}, {});
    EXPECT_EQ(cpu, "integer division by zero");
    EXPECT_EQ(describeDeviceError(want), cpu + " (divisor element 2)");
  }
  // Float division by zero is IEEE's (infinities, NaN): nothing to report.
  std::vector<HostTensor> out = {randomF32({4}, 3), HostTensor(DType::F32, {4}),
                                 HostTensor(DType::F32, {4})};
  EXPECT_EQ(runCudaForError(*backend, "div", out, {}, 14).code, tl::kNoError);
}

TEST_F(CudaKernelTest, Comparisons) {
  for (const char *op : {"eq", "lt", "gt"}) {
    for (const BroadcastCase &c : kCases) {
      SCOPED_TRACE(op);
      // Small integers, so equal pairs are common in every dtype.
      HostTensor ai = randomInts(c.a, 51, -3, 4, DType::I64);
      HostTensor bi = randomInts(c.b, 52, -3, 4, DType::I64);
      for (DType t :
           {DType::F32, DType::BF16, DType::I32, DType::I64, DType::Bool}) {
        SCOPED_TRACE(dtypeName(t));
        HostTensor a = converted(ai, t);
        HostTensor b = converted(bi, t);
        if (t == DType::Bool) {
          a = converted(randomInts(c.a, 53, 0, 2, DType::I64), t);
          b = converted(randomInts(c.b, 54, 0, 2, DType::I64), t);
        }
        expectMatchesCpu(*backend, op, {a, b, HostTensor(DType::Bool, c.y)}, {},
                         {2}, kExact);
      }
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor a = valuesF32({4}, {nan, 1.0f, nan, -0.0f});
  HostTensor b = valuesF32({4}, {nan, nan, 1.0f, 0.0f});
  for (const char *op : {"eq", "lt", "gt"}) {
    expectMatchesCpu(*backend, op, {a, b, like(a, DType::Bool)}, {}, {2},
                     kExact);
  }
}

//===----------------------------------------------------------------------===//
// Select.
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, SelectBroadcast) {
  struct Case {
    std::vector<int64_t> c, a, b, y;
  };
  const Case cases[] = {
      {{5, 9}, {5, 9}, {5, 9}, {5, 9}},
      {{9}, {5, 9}, {}, {5, 9}},    // row mask, scalar fill
      {{5, 1}, {}, {5, 9}, {5, 9}}, // column mask
      {{}, {4, 3}, {4, 3}, {4, 3}}, // scalar condition
      {{2, 1, 4}, {3, 1}, {2, 3, 4}, {2, 3, 4}},
      {{1, 3, 1, 5}, {2, 1, 4, 5}, {5}, {2, 3, 4, 5}},
      {{}, {}, {}, {}},
  };
  for (const Case &c : cases) {
    HostTensor cond =
        converted(randomInts(c.c, 61, 0, 2, DType::I64), DType::Bool);
    HostTensor a = randomF32(c.a, 62);
    HostTensor b = randomF32(c.b, 63);
    for (DType t : {DType::F32, DType::BF16, DType::I64, DType::I32,
                    DType::Bool, DType::F64}) {
      SCOPED_TRACE(dtypeName(t));
      HostTensor at = converted(a, t);
      HostTensor bt = converted(b, t);
      if (t == DType::Bool) {
        at = converted(randomInts(c.a, 64, 0, 2, DType::I64), t);
        bt = converted(randomInts(c.b, 65, 0, 2, DType::I64), t);
      } else if (t == DType::I32 || t == DType::I64) {
        at = randomInts(c.a, 66, -100, 100, t);
        bt = randomInts(c.b, 67, -100, 100, t);
      }
      expectMatchesCpu(*backend, "select", {cond, at, bt, HostTensor(t, c.y)},
                       {}, {3}, kExact);
    }
  }
}

//===----------------------------------------------------------------------===//
// Cast.
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, CastAllDirections) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // NaN reads 0 as an integer and true as bool; out-of-range floats
  // saturate; truncation is toward zero. 13 elements: a tail after packs.
  HostTensor floats =
      valuesF32({13}, {nan, inf, -inf, 3e9f, -3e9f, 2.75f, -2.75f, -0.0f, 0.0f,
                       1.0f, 1e20f, -1e20f, 0.4f});
  HostTensor ints = randomInts({13}, 71, -5, 6, DType::I64);
  ints.as<int64_t>()[0] = int64_t(1) << 40; // wraps to i32, rounds to f32
  ints.as<int64_t>()[1] = -(int64_t(1) << 33) - 3;
  ints.as<int64_t>()[2] = 16777217; // not exact in f32
  HostTensor bools =
      converted(randomInts({13}, 72, 0, 2, DType::I64), DType::Bool);
  const DType types[] = {DType::F32, DType::BF16, DType::I32, DType::I64,
                         DType::Bool};
  // converted() goes through int64 exactly, so i32 gets its own values.
  HostTensor ints32 = randomInts({13}, 73, -100000, 100000, DType::I32);
  auto input = [&](DType from) {
    switch (from) {
    case DType::Bool:
      return bools;
    case DType::I64:
      return ints;
    case DType::I32:
      return ints32;
    default:
      return converted(floats, from);
    }
  };
  for (DType from : types) {
    for (DType to : types) {
      SCOPED_TRACE(std::string(dtypeName(from)) + " -> " + dtypeName(to));
      // bf16 results are compared with the CPU's f32 ones.
      Tolerance tol = to == DType::BF16 ? kBf16 : kExact;
      expectMatchesCpu(*backend, "cast", {input(from), HostTensor(to, {13})},
                       {}, {1}, tol);
    }
  }
}

TEST_F(CudaKernelTest, CastRoundsToBf16Exactly) {
  // Ties to even, both directions, NaN stays NaN, overflow to infinity.
  float aboveTie;
  uint32_t aboveTieBits = 0x3f808001u; // 1 + 2^-8 + 2^-23: rounds up
  std::memcpy(&aboveTie, &aboveTieBits, 4);
  HostTensor x = valuesF32({8}, {1.00390625f, // 1 + 2^-8: tie, rounds down
                                 1.01171875f, // 1 + 3 * 2^-8: tie, rounds up
                                 aboveTie, -1.00390625f, 3.4e38f,
                                 std::numeric_limits<float>::quiet_NaN(),
                                 1e-40f, 65504.0f});
  std::vector<HostTensor> out =
      runCuda(*backend, "cast", {x, like(x, DType::BF16)}, {});
  for (int64_t i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    float want = bf16Round(x.as<float>()[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(out[1].at(i)));
    } else {
      EXPECT_EQ(out[1].at(i), double(want));
    }
  }
  EXPECT_EQ(out[1].at(0), 1.0);
  EXPECT_EQ(out[1].at(1), 1.015625);
  EXPECT_EQ(out[1].at(2), 1.0078125);
  EXPECT_EQ(out[1].at(3), -1.0);
  EXPECT_TRUE(std::isinf(out[1].at(4)));
  // bf16 -> f32 is exact.
  HostTensor back =
      runCuda(*backend, "cast", {out[1], like(x, DType::F32)}, {})[1];
  for (int64_t i = 0; i < 8; ++i) {
    if (!std::isnan(out[1].at(i))) {
      EXPECT_EQ(back.at(i), out[1].at(i));
    }
  }
}

//===----------------------------------------------------------------------===//
// Misaligned and aliased operands, which the harness's copies never give.
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, MisalignedOperandsTakeTheUnpackedPaths) {
  // Packed and unpacked paths must give the same bits.
  HostTensor x = randomF32({6, 40}, 81);
  HostTensor bias = randomF32({40}, 82);
  auto shifted = [&](const char *op, std::vector<HostTensor> operands) {
    return runShifted(*backend, op, std::move(operands), {}, 1);
  };
  for (const char *op : {"sigmoid", "gelu"}) {
    SCOPED_TRACE(op);
    expectSameBits(shifted(op, {x, like(x, DType::F32)})[1],
                   runCuda(*backend, op, {x, like(x, DType::F32)}, {})[1]);
  }
  expectSameBits(
      shifted("add", {x, bias, like(x, DType::F32)})[2],
      runCuda(*backend, "add", {x, bias, like(x, DType::F32)}, {})[2]);
  HostTensor xb = converted(x, DType::BF16);
  HostTensor bb = converted(bias, DType::BF16);
  expectSameBits(
      shifted("mul", {xb, bb, like(x, DType::BF16)})[2],
      runCuda(*backend, "mul", {xb, bb, like(x, DType::BF16)}, {})[2]);
  expectSameBits(shifted("cast", {x, like(x, DType::BF16)})[1],
                 converted(x, DType::BF16));
  expectSameBits(shifted("is_nan", {xb, like(x, DType::Bool)})[1],
                 HostTensor(DType::Bool, x.shape));
}

TEST_F(CudaKernelTest, OutputMayAliasAnInput) {
  HostTensor x = randomF32({5, 64}, 91);
  HostTensor bias = randomF32({64}, 92);
  // y is x's buffer: after the launch operand 0 reads as the result too.
  auto aliased = [&](const char *op, std::vector<HostTensor> operands,
                     std::pair<size_t, size_t> alias) {
    return runShifted(*backend, op, std::move(operands), {}, 0, alias);
  };
  expectSameBits(aliased("silu", {x, like(x, DType::F32)}, {1, 0})[1],
                 runCuda(*backend, "silu", {x, like(x, DType::F32)}, {})[1]);
  expectSameBits(
      aliased("add", {x, bias, like(x, DType::F32)}, {2, 0})[2],
      runCuda(*backend, "add", {x, bias, like(x, DType::F32)}, {})[2]);
  HostTensor cond = converted(randomInts({64}, 93, 0, 2), DType::Bool);
  expectSameBits(
      aliased("select", {cond, x, bias, like(x, DType::F32)}, {3, 1})[3],
      runCuda(*backend, "select", {cond, x, bias, like(x, DType::F32)}, {})[3]);
}

//===----------------------------------------------------------------------===//
// Checks.
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, ChecksNameWhatIsWrong) {
  HostTensor f64(DType::F64, {4});
  HostTensor f32(DType::F32, {4});
  HostTensor bf16(DType::BF16, {4});
  HostTensor i32(DType::I32, {4});
  HostTensor boolean(DType::Bool, {4});
  EXPECT_EQ(checkCuda("exp", {f64, f64}, {}),
            "operand 0 must be f32 or bf16, got f64");
  EXPECT_EQ(checkCuda("exp", {f32, bf16}, {}),
            "operand 1 must be f32 like operand 0, got bf16");
  EXPECT_EQ(checkCuda("exp", {i32, i32}, {}),
            "operand 0 must be f32 or bf16, got i32");
  EXPECT_EQ(checkCuda("exp", {f32, HostTensor(DType::F32, {5})}, {}),
            "operand 1 must have shape [4], got [5]");
  EXPECT_EQ(checkCuda("exp", {f32}, {}), "expected 2 operands, got 1");
  EXPECT_EQ(checkCuda("is_nan", {f64, boolean}, {}),
            "operand 0 must be f32 or bf16, got f64");
  EXPECT_EQ(checkCuda("is_nan", {f32, f32}, {}),
            "operand 1 must be bool, got f32");
  EXPECT_EQ(checkCuda("add", {f64, f64, f64}, {}),
            "operand 0 must be f32, bf16, i32 or i64, got f64");
  EXPECT_EQ(checkCuda("add", {f32, bf16, f32}, {}),
            "operand 1 must be f32 like operand 0, got bf16");
  EXPECT_EQ(checkCuda("add", {f32, f32, bf16}, {}),
            "operand 2 must be f32 like operand 0, got bf16");
  EXPECT_EQ(checkCuda("add", {boolean, boolean, boolean}, {}),
            "operand 0 must be f32, bf16, i32 or i64, got bool");
  EXPECT_EQ(checkCuda("add", {f32, HostTensor(DType::F32, {3}), f32}, {}),
            "operand 1 of shape [3] does not broadcast to [4]");
  EXPECT_EQ(checkCuda("lt", {f64, f64, boolean}, {}),
            "operand 0 must be f32, bf16, i32, i64 or bool, got f64");
  EXPECT_EQ(checkCuda("eq", {f32, f32, f32}, {}),
            "operand 2 must be bool, got f32");
  EXPECT_EQ(checkCuda("select", {f32, f32, f32, f32}, {}),
            "operand 0 must be bool, got f32");
  EXPECT_EQ(checkCuda("select", {boolean, f32, bf16, f32}, {}),
            "operand 2 must be f32 like operand 1, got bf16");
  EXPECT_EQ(checkCuda("cast", {f64, f32}, {}),
            "operand 0 must be f32, bf16, i32, i64 or bool, got f64");
  EXPECT_EQ(checkCuda("cast", {f32, HostTensor(DType::U8, {4})}, {}),
            "operand 1 must be f32, bf16, i32, i64 or bool, got u8");
  // Every launcher of the family is registered with its entry points.
  for (const char *name :
       {"neg",  "abs",     "exp",  "log",  "sqrt", "rsqrt", "reciprocal",
        "tanh", "sigmoid", "silu", "relu", "erf",  "sin",   "cos",
        "gelu", "is_nan",  "cast", "add",  "sub",  "mul",   "div",
        "pow",  "max",     "min",  "eq",   "lt",   "gt",    "select"}) {
    const CudaKernelDef *def = findCudaKernel(name);
    ASSERT_NE(def, nullptr) << name;
    ASSERT_NE(def->functions, nullptr) << name;
    for (const char *const *f = def->functions; *f; ++f) {
      EXPECT_NE(tl::emu::findKernel(*f), nullptr) << *f;
    }
  }
}

// band_mask against the CPU kernel: a causal band, a sliding window, the
// complement form, leading dims repeating the matrix, every dtype (bf16
// compared as f32); and the checks.
TEST_F(CudaKernelTest, BandMask) {
  struct Case {
    int64_t lower, upper;
    double inside, outside;
  };
  // -2^20 is exact in bf16 too.
  const Case cases[] = {
      {-8, 0, 0.0, -1048576.0}, {-2, 0, 1.0, 0.0}, {1, 40, 0.0, 1.0}};
  for (DType dtype :
       {DType::F32, DType::BF16, DType::I32, DType::I64, DType::Bool}) {
    for (const Case &c : cases) {
      if (dtype == DType::Bool && c.outside < 0) {
        continue;
      }
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{9, 9}, {2, 3, 5, 300}}) {
        std::vector<Attribute> attrs = {
            intAttr("lower", c.lower), intAttr("upper", c.upper),
            floatAttr("inside", c.inside), floatAttr("outside", c.outside)};
        expectMatchesCpu(*backend, "band_mask", {HostTensor(dtype, shape)},
                         attrs, {0}, kExact);
      }
    }
  }
  std::vector<Attribute> reversed = {intAttr("lower", 1), intAttr("upper", 0),
                                     floatAttr("inside", 0),
                                     floatAttr("outside", 1)};
  EXPECT_NE(checkCuda("band_mask", {HostTensor(DType::F32, {4, 4})}, reversed),
            "");
  EXPECT_NE(checkCuda("band_mask", {HostTensor(DType::F64, {4, 4})}, {}), "");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
