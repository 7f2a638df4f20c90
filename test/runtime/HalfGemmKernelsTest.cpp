//===- HalfGemmKernelsTest.cpp - fp16 and bf16 GEMMs, skipped updates -----===//
//
// The `*_fp16` GEMM kernels (tailor-emulate-half) against a reference that
// rounds with the compiler's IEEE float -> _Float16 conversion and sums in
// double; roundToHalf against that conversion; roundToBf16 against torch's
// float -> bfloat16 conversion (a table of its bits) and a nearest-even
// reference over a sweep of bit patterns; the `*_bf16` GEMM kernels against
// a double reference on bf16-rounded operands; and the update kernels'
// skipped step (a non-finite grad_scale, fp16 loss scaling).
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include "runtime/cpu/HalfRounding.h"

#include <cstring>
#include <functional>
#include <limits>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

namespace {

/// A tensor of `shape` with every element `value`.
Buffer constant(std::vector<int64_t> shape, double value) {
  Buffer b(DType::F32, std::move(shape));
  for (int64_t i = 0; i < b.numel(); ++i) {
    b.set(i, value);
  }
  return b;
}

/// The reference rounding: an IEEE float to half conversion.
float half(double x) {
  return static_cast<float>(static_cast<_Float16>(static_cast<float>(x)));
}

TEST(HalfGemmKernelsTest, RoundToHalfMatchesConversion) {
  const float inf = std::numeric_limits<float>::infinity();
  // Ties to even at 1 + 2^-11 and in the subnormals (3 * 2^-25), the
  // largest half, the first value rounding to inf, the smallest subnormal.
  for (float x : {0.0f, -0.0f, 1.0f, 1.00048828125f, 1.00146484375f, 0.1f,
                  -3.14159f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e6f,
                  5.9604645e-08f, 8.9406967e-08f, 2.9802322e-08f, 1e-10f,
                  6.1035156e-05f, 6.0975552e-05f, inf, -inf}) {
    EXPECT_EQ(cpu::roundToHalf(x), half(x)) << x;
    EXPECT_EQ(std::signbit(cpu::roundToHalf(x)), std::signbit(half(x))) << x;
  }
  EXPECT_TRUE(std::isnan(cpu::roundToHalf(std::nanf(""))));
  // A sweep over the f32 range, every 4099th bit pattern.
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 4099) {
    uint32_t b = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &b, sizeof(x));
    float got = cpu::roundToHalf(x), want = half(x);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << b;
    } else {
      ASSERT_EQ(got, want) << b;
    }
  }
}

/// y[m, n] = half(sum_k half(x[m, k]) half(w[n, k])) + bias[n], in double.
std::vector<double> halfLinear(const Buffer &x, const Buffer &w,
                               const Buffer *bias, int64_t m, int64_t n,
                               int64_t k) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += double(half(x.at(i * k + p))) * double(half(w.at(j * k + p)));
      }
      y[i * n + j] = half(sum) + (bias ? bias->at(j) : 0.0);
    }
  }
  return y;
}

TEST(HalfGemmKernelsTest, LinearRoundsOperandsAndProduct) {
  int64_t m = 37, n = 19, k = 300;
  Buffer x = randomBuffer({m, k}, -3, 3, 1);
  Buffer w = randomBuffer({n, k}, -0.2, 0.2, 2);
  Buffer bias = randomBuffer({n}, -1, 1, 3);
  Buffer y(DType::F32, {m, n});
  Buffer workspace(DType::F32, {m * k + n * k + n + m * n});
  ASSERT_EQ(runKernel("linear_fp16", {&x, &w, &bias, &y, &workspace}), "");
  // The f32 sum may differ from the double one by a few f32 ulps, which
  // moves a half rounding by at most one half ulp (2^-11 relative).
  expectAllNear(y, halfLinear(x, w, &bias, m, n, k), 1e-3, 1e-3, "linear");
  // The result (less the bias) is a half value: rounded after the GEMM.
  for (int64_t i = 0; i < m * n; ++i) {
    float product = static_cast<float>(y.at(i) - bias.at(i % n));
    EXPECT_NEAR(product, half(product), 1e-5 * std::fabs(product) + 1e-6);
  }
  Buffer y32(DType::F32, {m, n});
  ASSERT_EQ(runKernel("linear", {&x, &w, &bias, &y32}), "");
  double diff = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    diff = std::max(diff, std::fabs(y.at(i) - y32.at(i)));
  }
  EXPECT_GT(diff, 0.0) << "fp16 must differ from the f32 kernel";
}

TEST(HalfGemmKernelsTest, LinearOverflowsToInfAndAccumulates) {
  int64_t m = 2, n = 3, k = 4;
  Buffer x = constant({m, k}, 200.0);
  Buffer w = constant({n, k}, 100.0);
  Buffer y = constant({m, n}, 1.0);
  Buffer workspace(DType::F32, {m * k + n * k + m * n});
  // 4 * 200 * 100 = 80000 > 65504: inf, as a half tensor core output is.
  ASSERT_EQ(runKernel("linear_fp16", {&x, &w, &y, &workspace},
                      {intAttr("accumulate", 1)}),
            "");
  for (int64_t i = 0; i < m * n; ++i) {
    EXPECT_TRUE(std::isinf(y.at(i)));
  }
  // alpha scales before the rounding; accumulate adds in f32 after it.
  Buffer small = constant({m, n}, 0.25);
  Buffer ones = constant({m, k}, 1.0);
  Buffer third = constant({n, k}, 1.0 / 3.0);
  ASSERT_EQ(runKernel("linear_fp16", {&ones, &third, &small, &workspace},
                      {intAttr("accumulate", 1), floatAttr("alpha", 0.5)}),
            "");
  double product = half(0.5 * 4 * double(half(1.0 / 3.0)));
  for (int64_t i = 0; i < m * n; ++i) {
    EXPECT_EQ(small.at(i),
              static_cast<float>(0.25f + static_cast<float>(product)));
  }
}

TEST(HalfGemmKernelsTest, WeightGradAndMatmul) {
  int64_t rows = 29, n = 7, k = 11;
  Buffer dy = randomBuffer({rows, n}, -2, 2, 4);
  Buffer x = randomBuffer({rows, k}, -2, 2, 5);
  Buffer dw = randomBuffer({n, k}, -1, 1, 6);
  std::vector<double> want = values(dw);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      double sum = 0;
      for (int64_t r = 0; r < rows; ++r) {
        sum += double(half(dy.at(r * n + i))) * double(half(x.at(r * k + j)));
      }
      want[i * k + j] += half(sum);
    }
  }
  Buffer workspace(DType::F32, {rows * n + rows * k + n * k});
  ASSERT_EQ(runKernel("linear_weight_grad_fp16", {&dy, &x, &dw, &workspace},
                      {intAttr("accumulate", 1)}),
            "");
  expectAllNear(dw, want, 1e-3, 1e-3, "linear_weight_grad_fp16");

  Buffer a = randomBuffer({2, 5, 6}, -2, 2, 7);
  Buffer b = randomBuffer({6, 4}, -2, 2, 8);
  Buffer y(DType::F32, {2, 5, 4});
  Buffer ws(DType::F32, {60 + 24 + 40});
  ASSERT_EQ(runKernel("matmul_fp16", {&a, &b, &y, &ws}), "");
  std::vector<double> ref(40);
  for (int64_t i = 0; i < 10; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < 6; ++p) {
        sum += double(half(a.at(i * 6 + p))) * double(half(b.at(p * 4 + j)));
      }
      ref[i * 4 + j] = half(sum);
    }
  }
  expectAllNear(y, ref, 1e-3, 1e-3, "matmul_fp16");
  // A workspace too small for the rounded operands is refused at load.
  Buffer tiny(DType::F32, {8});
  EXPECT_NE(checkKernel("matmul_fp16", {&a, &b, &y, &tiny}), "");
}

/// The bf16 value nearest to finite `x` (ties to even), from the two
/// candidates around it compared in double: independent of the kernels'
/// add-and-clear.
float bf16Reference(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  uint32_t down = bits & 0xffff0000u, up = down + 0x10000u;
  float lo, hi;
  std::memcpy(&lo, &down, sizeof(lo));
  std::memcpy(&hi, &up, sizeof(hi));
  // Past the largest finite, `up` is inf: the midpoint is 2^128 - 2^111.
  double hiValue = std::isinf(hi) ? std::copysign(std::ldexp(1.0, 128), x)
                                  : double(hi);
  double dLo = std::fabs(double(x) - double(lo));
  double dHi = std::fabs(double(x) - hiValue);
  if (dLo < dHi || (dLo == dHi && (down & 0x10000u) == 0)) {
    return lo;
  }
  return hi;
}

/// `x` rounded to bf16 (the kernels' rounding), for the references below.
float bf16(double x) { return cpu::roundToBf16(static_cast<float>(x)); }

TEST(HalfGemmKernelsTest, RoundToBf16MatchesTorch) {
  // {f32 bits, torch's x.to(torch.bfloat16) bits} (torch 2.x on the CPU):
  // ties to even (1 + 2^-8 down, 1 + 3 * 2^-8 up), just above a tie,
  // overflow of the largest finite f32 to inf, subnormals (a tie at
  // 3 * 2^-134), the largest subnormal rounding to the smallest normal.
  static const uint32_t cases[][2] = {
      {0x00000000u, 0x0000u}, {0x80000000u, 0x8000u}, {0x3f800000u, 0x3f80u},
      {0x3f808000u, 0x3f80u}, {0x3f818000u, 0x3f82u}, {0x3f808008u, 0x3f81u},
      {0x4040c000u, 0x4041u}, {0x3dcccccdu, 0x3dcdu}, {0xc0490fd0u, 0xc049u},
      {0x477fe000u, 0x4780u}, {0x7f7f0000u, 0x7f7fu}, {0x7f7fffffu, 0x7f80u},
      {0xff7fffffu, 0xff80u}, {0x000116c2u, 0x0001u}, {0x00010000u, 0x0001u},
      {0x00018000u, 0x0002u}, {0x007fffffu, 0x0080u}, {0x00010075u, 0x0001u},
      {0x7f800000u, 0x7f80u}, {0xff800000u, 0xff80u}, {0x437f8000u, 0x4380u},
      {0x43804000u, 0x4380u}, {0x4380c000u, 0x4381u}, {0xc380c000u, 0xc381u}};
  for (const auto &c : cases) {
    float x, got;
    std::memcpy(&x, &c[0], sizeof(x));
    got = cpu::roundToBf16(x);
    uint32_t gotBits;
    std::memcpy(&gotBits, &got, sizeof(gotBits));
    EXPECT_EQ(gotBits, c[1] << 16) << std::hex << c[0];
  }
  // NaNs stay NaN, also one whose payload is only in the dropped bits
  // (truncation would make it inf).
  for (uint32_t nanBits : {0x7fc00000u, 0x7f800001u, 0xff800001u,
                           0x7fffffffu}) {
    float x;
    std::memcpy(&x, &nanBits, sizeof(x));
    EXPECT_TRUE(std::isnan(cpu::roundToBf16(x))) << std::hex << nanBits;
  }
  // A sweep over the f32 range, every 4099th bit pattern.
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 4099) {
    uint32_t b = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &b, sizeof(x));
    float got = cpu::roundToBf16(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(got)) << b;
    } else if (std::isinf(x)) {
      ASSERT_EQ(got, x) << b;
    } else {
      ASSERT_EQ(got, bf16Reference(x)) << b;
    }
  }
}

/// y[m, n] = sum_k bf16(x[m, k]) bf16(w[n, k]) + base, in double (no
/// rounding of the product: f32 accumulation and output).
std::vector<double> bf16Linear(const Buffer &x, const Buffer &w, int64_t m,
                               int64_t n, int64_t k, double alpha,
                               const std::function<double(int64_t)> &base) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += double(bf16(x.at(i * k + p))) * double(bf16(w.at(j * k + p)));
      }
      y[i * n + j] = alpha * sum + base(i * n + j);
    }
  }
  return y;
}

TEST(HalfGemmKernelsTest, Bf16LinearRoundsOperandsNotProduct) {
  int64_t m = 37, n = 19, k = 300;
  Buffer x = randomBuffer({m, k}, -3, 3, 1);
  Buffer w = randomBuffer({n, k}, -0.2, 0.2, 2);
  Buffer bias = randomBuffer({n}, -1, 1, 3);
  Buffer y(DType::F32, {m, n});
  // The rounded x and w only: no product for bf16.
  Buffer workspace(DType::F32, {m * k + n * k});
  ASSERT_EQ(runKernel("linear_bf16", {&x, &w, &bias, &y, &workspace}), "");
  // f32 sums of 300 exact bf16 products (8-bit significands multiply
  // exactly in f32) against double: f32 rounding of the partial sums only.
  std::vector<double> want = bf16Linear(
      x, w, m, n, k, 1.0, [&](int64_t i) { return bias.at(i % n); });
  expectAllNear(y, want, 1e-4, 1e-4, "linear_bf16");
  // The f32 kernel differs by the operand rounding (up to 2^-9 relative
  // each, about 1e-2 on these sums), far above that tolerance; and the
  // product is not rounded to bf16.
  Buffer y32(DType::F32, {m, n});
  ASSERT_EQ(runKernel("linear", {&x, &w, &bias, &y32}), "");
  double diff = 0;
  int64_t unrounded = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    diff = std::max(diff, std::fabs(y.at(i) - y32.at(i)));
    float product = static_cast<float>(y.at(i));
    unrounded += cpu::roundToBf16(product) != product;
  }
  EXPECT_GT(diff, 1e-3) << "bf16 must differ from the f32 kernel";
  EXPECT_GT(unrounded, m * n / 2) << "a bf16 GEMM writes f32 sums";
  // Too small a workspace is refused when the session is created.
  Buffer tiny(DType::F32, {m * k});
  EXPECT_NE(checkKernel("linear_bf16", {&x, &w, &bias, &y, &tiny}), "");
}

TEST(HalfGemmKernelsTest, Bf16EpiloguesWeightGradAndMatmul) {
  int64_t m = 5, n = 6, k = 70;
  Buffer x = randomBuffer({m, k}, -2, 2, 20);
  Buffer w = randomBuffer({k, n}, -2, 2, 21);
  Buffer y = randomBuffer({m, n}, -1, 1, 22);
  std::vector<double> before = values(y);
  Buffer workspace(DType::F32, {m * k + n * k});
  // transpose_weight (w stored [K, N]), alpha and accumulate: y += 0.5 x w.
  ASSERT_EQ(runKernel("linear_bf16", {&x, &w, &y, &workspace},
                      {intAttr("transpose_weight", 1),
                       intAttr("accumulate", 1), floatAttr("alpha", 0.5)}),
            "");
  std::vector<double> want(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += double(bf16(x.at(i * k + p))) * double(bf16(w.at(p * n + j)));
      }
      want[i * n + j] = before[i * n + j] + 0.5 * sum;
    }
  }
  expectAllNear(y, want, 1e-5, 1e-5, "linear_bf16 accumulate");

  int64_t rows = 29, gn = 7, gk = 11;
  Buffer dy = randomBuffer({rows, gn}, -2, 2, 23);
  Buffer gx = randomBuffer({rows, gk}, -2, 2, 24);
  Buffer dw = randomBuffer({gn, gk}, -1, 1, 25);
  std::vector<double> grad = values(dw);
  for (int64_t i = 0; i < gn; ++i) {
    for (int64_t j = 0; j < gk; ++j) {
      double sum = 0;
      for (int64_t r = 0; r < rows; ++r) {
        sum += double(bf16(dy.at(r * gn + i))) *
               double(bf16(gx.at(r * gk + j)));
      }
      grad[i * gk + j] += sum;
    }
  }
  Buffer gws(DType::F32, {rows * gn + rows * gk});
  ASSERT_EQ(runKernel("linear_weight_grad_bf16", {&dy, &gx, &dw, &gws},
                      {intAttr("accumulate", 1)}),
            "");
  expectAllNear(dw, grad, 1e-5, 1e-5, "linear_weight_grad_bf16");

  Buffer a = randomBuffer({2, 5, 6}, -2, 2, 26);
  Buffer b = randomBuffer({6, 4}, -2, 2, 27);
  Buffer out(DType::F32, {2, 5, 4});
  Buffer mws(DType::F32, {60 + 24});
  ASSERT_EQ(runKernel("matmul_bf16", {&a, &b, &out, &mws}), "");
  std::vector<double> ref(40);
  for (int64_t i = 0; i < 10; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < 6; ++p) {
        sum += double(bf16(a.at(i * 6 + p))) * double(bf16(b.at(p * 4 + j)));
      }
      ref[i * 4 + j] = sum;
    }
  }
  expectAllNear(out, ref, 1e-5, 1e-5, "matmul_bf16");
}

TEST(HalfGemmKernelsTest, NonFiniteGradScaleSkipsTheUpdate) {
  int64_t n = 1000;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Buffer param = randomBuffer({n}, -1, 1, 9);
  Buffer expAvg = randomBuffer({n}, -1, 1, 10);
  Buffer expAvgSq = randomBuffer({n}, 0, 1, 11);
  Buffer grad = randomBuffer({n}, -1, 1, 12);
  std::vector<double> p = values(param), m = values(expAvg),
                      v = values(expAvgSq);
  Buffer lr = scalar(DType::F32, 1e-3), step = scalar(DType::I64, 3);
  Buffer scale = scalar(DType::F32, nan);
  std::vector<Attribute> attrs = {floatAttr("beta1", 0.9),
                                  floatAttr("beta2", 0.999),
                                  floatAttr("epsilon", 1e-8),
                                  floatAttr("weight_decay", 0.1)};
  ASSERT_EQ(runKernel("adamw",
                      {&param, &grad, &expAvg, &expAvgSq, &lr, &step, &scale},
                      attrs),
            "");
  EXPECT_EQ(values(param), p);
  EXPECT_EQ(values(expAvg), m);
  EXPECT_EQ(values(expAvgSq), v);
  EXPECT_EQ(values(grad), std::vector<double>(n, 0.0));

  Buffer grad2 = randomBuffer({n}, -1, 1, 13);
  Buffer infScale = scalar(DType::F32, std::numeric_limits<double>::infinity());
  ASSERT_EQ(runKernel("adamw_multi",
                      {&param, &grad2, &expAvg, &expAvgSq, &lr, &step,
                       &infScale},
                      attrs),
            "");
  EXPECT_EQ(values(param), p);
  EXPECT_EQ(values(expAvg), m);
  EXPECT_EQ(values(grad2), std::vector<double>(n, 0.0));

  Buffer buf = randomBuffer({n}, -1, 1, 14);
  std::vector<double> b = values(buf);
  Buffer grad3 = randomBuffer({n}, -1, 1, 15);
  ASSERT_EQ(runKernel("sgd", {&param, &grad3, &buf, &lr, &scale},
                      {floatAttr("momentum", 0.9),
                       floatAttr("weight_decay", 0.0)}),
            "");
  EXPECT_EQ(values(param), p);
  EXPECT_EQ(values(buf), b);
  EXPECT_EQ(values(grad3), std::vector<double>(n, 0.0));
}

} // namespace
