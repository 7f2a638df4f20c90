//===- ElementwiseGradientKernelsTest.cpp - row-local backward kernels ----===//
//
// Each backward kernel of runtime/cpu/ElementwiseGradientKernels.cpp is
// checked twice on small random tensors: against a plain double-precision
// loop written here (1e-4 relative plus a small absolute floor), and against
// central finite differences of its forward kernel from the table,
// L = sum(dy * forward(x)), in f32 with a step of 1e-2 (1e-2 relative, 1e-3
// absolute: the f32 forward and the O(h^2) truncation leave about 1e-4).
// Every launch runs on a 3-thread pool and on a 1-thread pool from the same
// starting outputs, and the two results must be the same bits; one test
// repeats that on shapes large enough that every kernel splits its work.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5;
constexpr double kPi = 3.14159265358979323846;

} // namespace

//===----------------------------------------------------------------------===//
// softmax_grad, rope_grad, silu_grad, gelu_grad
//===----------------------------------------------------------------------===//

TEST(ElementwiseGradientKernelsTest, SoftmaxGradAlongAnyAxis) {
  Buffer x = randomBuffer({3, 4, 5}, -3, 3, 27);
  Buffer dy = randomBuffer({3, 4, 5}, -1, 1, 28);
  for (int64_t axis : {2, 1, 0}) {
    std::vector<Attribute> attrs = {intAttr("axis", axis)};
    Buffer y(DType::F32, x.shape), dx(DType::F32, x.shape);
    ASSERT_EQ(runKernel("softmax", {&x, &y}, attrs, &pool1()), "");
    int64_t len = x.shape[axis], inner = 1;
    for (int64_t d = axis + 1; d < 3; ++d) {
      inner *= x.shape[d];
    }
    std::vector<double> want(x.numel());
    for (int64_t o = 0; o < x.numel() / (len * inner); ++o) {
      for (int64_t j = 0; j < inner; ++j) {
        double c = 0;
        for (int64_t l = 0; l < len; ++l) {
          int64_t at = (o * len + l) * inner + j;
          c += dy.at(at) * y.at(at);
        }
        for (int64_t l = 0; l < len; ++l) {
          int64_t at = (o * len + l) * inner + j;
          want[at] = y.at(at) * (dy.at(at) - c);
        }
      }
    }
    runGrad("softmax_grad", {&y, &dy, &dx}, 2, attrs);
    expectAllNear(dx, want, kRtol, kAtol, "softmax_grad");
    expectMatchesFd(dx, "softmax", {&x, &y}, 1, 0, dy, attrs);
  }
}

TEST(ElementwiseGradientKernelsTest, RopeGradIsTheTransposeForAnyTable) {
  int64_t b = 2, h = 3, t = 4, d = 8;
  Buffer dy = randomBuffer({b, h, t, d}, -1, 1, 29);
  Buffer x = randomBuffer({b, h, t, d}, -1, 1, 30);
  for (bool perBatch : {false, true}) {
    std::vector<int64_t> table =
        perBatch ? std::vector<int64_t>{b, t, d} : std::vector<int64_t>{t, d};
    // Random tables: the two halves (and pair members) differ.
    Buffer cosT = randomBuffer(table, -1, 1, 31 + perBatch);
    Buffer sinT = randomBuffer(table, -1, 1, 33 + perBatch);
    for (bool interleaved : {false, true}) {
      std::vector<Attribute> attrs = {intAttr("interleaved", interleaved)};
      // The transpose of the forward, written out by accumulating each
      // output's coefficients into the inputs it reads.
      std::vector<double> want(dy.numel(), 0.0);
      for (int64_t row = 0; row < b * h * t; ++row) {
        int64_t tab = ((perBatch ? row / (h * t) * t : 0) + row % t) * d;
        for (int64_t p = 0; p < d / 2; ++p) {
          int64_t i = interleaved ? 2 * p : p,
                  j = interleaved ? i + 1 : i + d / 2;
          double gi = dy.at(row * d + i), gj = dy.at(row * d + j);
          // y[i] = x[i] c[i] - x[j] s[i]; y[j] = x[j] c[j] + x[i] s[j].
          want[row * d + i] += gi * cosT.at(tab + i) + gj * sinT.at(tab + j);
          want[row * d + j] += -gi * sinT.at(tab + i) + gj * cosT.at(tab + j);
        }
      }
      Buffer dx(DType::F32, dy.shape), y(DType::F32, dy.shape);
      runGrad("rope_grad", {&dy, &cosT, &sinT, &dx}, 3, attrs);
      expectAllNear(dx, want, kRtol, kAtol, "rope_grad");
      expectMatchesFd(dx, "rope", {&x, &cosT, &sinT, &y}, 3, 0, dy, attrs);
    }
  }
}

TEST(ElementwiseGradientKernelsTest, SiluAndGeluGrad) {
  Buffer x = randomBuffer({7, 9}, -4, 4, 35);
  Buffer dy = randomBuffer({7, 9}, -1, 1, 36);
  struct Case {
    const char *grad, *forward;
    std::vector<Attribute> attrs;
    std::function<double(double)> derivative;
  };
  const Case cases[] = {
      {"silu_grad",
       "silu",
       {},
       [](double v) {
         double s = 1 / (1 + std::exp(-v));
         return s + v * s * (1 - s);
       }},
      {"gelu_grad",
       "gelu",
       {stringAttr("approximate", "none")},
       [](double v) {
         return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
                v * std::exp(-v * v / 2) / std::sqrt(2 * kPi);
       }},
      {"gelu_grad",
       "gelu",
       {},
       [](double v) {
         return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
                v * std::exp(-v * v / 2) / std::sqrt(2 * kPi);
       }},
      {"gelu_grad",
       "gelu",
       {stringAttr("approximate", "tanh")},
       [](double v) {
         constexpr double kBeta = 0.7978845608028654, kKappa = 0.044715;
         double th = std::tanh(kBeta * (v + kKappa * v * v * v));
         return 0.5 * (1 + th) +
                0.5 * v * (1 - th * th) * kBeta * (1 + 3 * kKappa * v * v);
       }},
  };
  for (const Case &c : cases) {
    std::vector<double> want(x.numel());
    for (int64_t i = 0; i < x.numel(); ++i) {
      want[i] = dy.at(i) * c.derivative(x.at(i));
    }
    Buffer dx(DType::F32, x.shape), y(DType::F32, x.shape);
    runGrad(c.grad, {&x, &dy, &dx}, 2, c.attrs);
    expectAllNear(dx, want, kRtol, kAtol, c.grad);
    expectMatchesFd(dx, c.forward, {&x, &y}, 1, 0, dy, c.attrs);
  }
}

//===----------------------------------------------------------------------===//
// slice_grad (a linear map)
//===----------------------------------------------------------------------===//

TEST(ElementwiseGradientKernelsTest, SliceGradScattersIntoZeros) {
  Buffer x = randomBuffer({5, 7, 6}, -1, 1, 10);
  std::vector<int64_t> starts = {1, 0, 3}, steps = {2, 3, 1};
  std::vector<Attribute> attrs = {intsAttr("starts", starts),
                                  intsAttr("steps", steps)};
  Buffer dy = randomBuffer({2, 3, 3}, -1, 1, 11);
  Buffer dx = randomBuffer({5, 7, 6}, -9, 9, 12); // fully overwritten
  std::vector<double> want(x.numel(), 0.0);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t k = 0; k < 3; ++k) {
        int64_t at = ((1 + 2 * i) * 7 + 3 * j) * 6 + 3 + k;
        want[at] = dy.at((i * 3 + j) * 3 + k);
      }
    }
  }
  runGrad("slice_grad", {&dy, &dx}, 1, attrs);
  expectAllNear(dx, want, 0, 0, "slice_grad");
  Buffer y(DType::F32, {2, 3, 3});
  expectMatchesFd(dx, "slice", {&x, &y}, 1, 0, dy, attrs);
}

//===----------------------------------------------------------------------===//
// Threads and checks
//===----------------------------------------------------------------------===//

TEST(ElementwiseGradientKernelsTest,
     ThreadCountDoesNotChangeBitsOnSplitShapes) {
  // Large enough that every kernel's rows or elements split over the pool
  // (runGrad compares 3 threads with 1).
  Buffer x = randomBuffer({512, 384}, -2, 2, 37);
  Buffer dy = randomBuffer({512, 384}, -1, 1, 38);
  Buffer dx(DType::F32, x.shape);
  runGrad("softmax_grad", {&x, &dy, &dx}, 2, {intAttr("axis", 1)});
  runGrad("softmax_grad", {&x, &dy, &dx}, 2, {intAttr("axis", 0)});
  runGrad("silu_grad", {&x, &dy, &dx}, 2);
  runGrad("gelu_grad", {&x, &dy, &dx}, 2);
  Buffer small = randomBuffer({256, 192}, -1, 1, 43),
         big(DType::F32, {512, 384});
  runGrad("slice_grad", {&small, &big}, 1,
          {intsAttr("starts", {1, 0}), intsAttr("steps", {2, 2})});
  Buffer r4 = randomBuffer({2, 4, 128, 96}, -1, 1, 44),
         r4dx(DType::F32, r4.shape);
  Buffer cosT = randomBuffer({128, 96}, -1, 1, 45);
  runGrad("rope_grad", {&r4, &cosT, &cosT, &r4dx}, 3,
          {intAttr("interleaved", 1)});
}

TEST(ElementwiseGradientKernelsTest, ChecksRejectMalformedLaunches) {
  Buffer f23(DType::F32, {2, 3}), f24(DType::F32, {2, 4}), f3(DType::F32, {3});
  Buffer d23(DType::F64, {2, 3}), f33(DType::F32, {3, 3});
  Buffer q(DType::F32, {1, 4, 8, 16});
  Buffer cosT(DType::F32, {8, 16}), badCos(DType::F32, {7, 16});
  struct Case {
    const char *kernel;
    std::vector<Buffer *> ops;
    std::vector<Attribute> attrs;
    const char *expected; // a substring of the message
  };
  const Case cases[] = {
      {"softmax_grad",
       {&f23, &f24, &f23},
       {intAttr("axis", 1)},
       "operand 1 must have shape [2, 3]"},
      {"softmax_grad",
       {&f23, &f23, &f23},
       {intAttr("axis", 2)},
       "attribute 'axis' is 2"},
      {"rope_grad",
       {&q, &badCos, &badCos, &q},
       {},
       "operand 1 must have shape [8, 16] or"},
      {"silu_grad", {&f23, &d23, &f23}, {}, "operand 1 must be f32"},
      {"gelu_grad", {&f23, &f23, &f24}, {}, "operand 2 must have shape [2, 3]"},
      {"gelu_grad",
       {&f23, &f23, &f23},
       {stringAttr("approximate", "fast")},
       "'none' or 'tanh'"},
      {"slice_grad",
       {&f23, &f3},
       {intsAttr("starts", {0}), intsAttr("steps", {1})},
       "operand 0 must have rank 1"},
      {"slice_grad",
       {&f23, &f33},
       {intsAttr("starts", {1, 1}), intsAttr("steps", {1, 1})},
       "writes past its extent 3"},
      {"slice_grad",
       {&f23, &f33},
       {intsAttr("starts", {0, 0}), intsAttr("steps", {1, 0})},
       "attribute 'steps' has entry 0"},
  };
  for (const Case &c : cases) {
    std::string message = checkKernel(c.kernel, c.ops, c.attrs);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << c.kernel << ": got '" << message << "', expected '" << c.expected
        << "'";
    ASSERT_FALSE(message.empty()) << c.kernel;
    EXPECT_TRUE(std::islower(static_cast<unsigned char>(message[0])))
        << message;
    EXPECT_NE(message.back(), '.') << message;
  }
  // Well-formed neighbours of the cases above pass.
  EXPECT_EQ(checkKernel("rope_grad", {&q, &cosT, &cosT, &q}), "");
  EXPECT_EQ(
      checkKernel("slice_grad", {&f23, &f33},
                  {intsAttr("starts", {1, 0}), intsAttr("steps", {1, 1})}),
      "");
}
