//===- CompressionKernelsTest.cpp - PowerSGD's kernels --------------------===//
//
// The kernels of runtime/cpu/CompressionKernels.cpp against plain double
// loops written here, at explicit tolerances: 1e-6 relative (plus 1e-7
// absolute) for the products and Gram-Schmidt, exact bits for the
// elementwise error feedback and Q's fixed first values (whose first
// entries were printed by Python's integers for the end-to-end test's
// PyTorch side, test/e2e/train_powersgd.py).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

namespace {

/// Row-major [rows, cols] matrix product in double: op(a) op(b).
std::vector<double> referenceProduct(const Buffer &a, bool ta, const Buffer &b,
                                     bool tb, int64_t m, int64_t k, int64_t n) {
  int64_t aCols = a.shape[1];
  int64_t bCols = b.shape[1];
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        double x = ta ? a.at(p * aCols + i) : a.at(i * aCols + p);
        double y = tb ? b.at(j * bCols + p) : b.at(p * bCols + j);
        sum += x * y;
      }
      c[static_cast<size_t>(i * n + j)] = sum;
    }
  }
  return c;
}

} // namespace

TEST(CompressionKernelsTest, ErrorFeedbackAddsKeepsAndStoresTheResidual) {
  // Reference: g' = g + e, e' = g' (the same f32 sum), then after the
  // "all-reduce" (g'' given) e'' = e' - g''. Sizes past one pool chunk.
  int64_t n = 3 * 32768 + 5;
  Buffer grad = randomBuffer({n}, -1, 1, 1);
  Buffer error = randomBuffer({n}, -0.1, 0.1, 2);
  std::vector<float> sum(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    sum[static_cast<size_t>(i)] =
        static_cast<float>(grad.at(i)) + static_cast<float>(error.at(i));
  }
  ASSERT_EQ(runKernel("error_feedback_add", {&error, &grad}), "");
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(static_cast<float>(grad.at(i)), sum[static_cast<size_t>(i)]);
    ASSERT_EQ(static_cast<float>(error.at(i)), sum[static_cast<size_t>(i)]);
  }
  Buffer reduced = randomBuffer({n}, -1, 1, 3);
  ASSERT_EQ(runKernel("error_feedback_store", {&reduced, &error}), "");
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(static_cast<float>(error.at(i)),
              sum[static_cast<size_t>(i)] - static_cast<float>(reduced.at(i)));
  }
  Buffer shorter = randomBuffer({n - 1}, -1, 1, 4);
  EXPECT_NE(checkKernel("error_feedback_add", {&error, &shorter}), "");
}

TEST(CompressionKernelsTest, LowRankInitIsTheDocumentedFunction) {
  // The formula in 64-bit integers, and values Python printed for k = 0..5
  // ((k * 2654435761 + 12345) % 2**32 >> 8) % 2001 - 1000) / 1000.
  Buffer q(DType::F32, {7, 3});
  ASSERT_EQ(runKernel("lowrank_init", {&q}), "");
  for (int64_t k = 0; k < q.numel(); ++k) {
    uint64_t u = (static_cast<uint64_t>(k) * 2654435761ull + 12345ull) %
                 (uint64_t(1) << 32);
    int64_t v = static_cast<int64_t>((u >> 8) % 2001);
    EXPECT_EQ(static_cast<float>(q.at(k)),
              static_cast<float>(v - 1000) / 1000.0f)
        << k;
    EXPECT_EQ(static_cast<float>(q.at(k)), cpu::lowRankInitValue(k));
  }
  const double printed[] = {-0.952, 0.756, -0.368, -0.66, 0.216, -0.908};
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(static_cast<float>(q.at(k)), static_cast<float>(printed[k])) << k;
  }
}

TEST(CompressionKernelsTest, OrthogonalizeIsGramSchmidtOnColumns) {
  // Reference: classical Gram-Schmidt in double, column by column as the
  // hook does (normalize, then remove the projection from later columns);
  // the result's columns are orthonormal.
  for (int64_t cols : {int64_t(1), int64_t(2), int64_t(4)}) {
    int64_t rows = 37;
    Buffer x = randomBuffer({rows, cols}, -1, 1, 10 + unsigned(cols));
    std::vector<double> want = values(x);
    for (int64_t i = 0; i < cols; ++i) {
      double norm = 0;
      for (int64_t r = 0; r < rows; ++r) {
        norm += want[r * cols + i] * want[r * cols + i];
      }
      norm = std::sqrt(norm);
      for (int64_t r = 0; r < rows; ++r) {
        want[r * cols + i] /= norm;
      }
      for (int64_t j = i + 1; j < cols; ++j) {
        double dot = 0;
        for (int64_t r = 0; r < rows; ++r) {
          dot += want[r * cols + i] * want[r * cols + j];
        }
        for (int64_t r = 0; r < rows; ++r) {
          want[r * cols + j] -= dot * want[r * cols + i];
        }
      }
    }
    ASSERT_EQ(runKernel("orthogonalize", {&x}), "");
    expectAllNear(x, want, 1e-5, 1e-6, "cols " + std::to_string(cols));
    for (int64_t i = 0; i < cols; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        double dot = 0;
        for (int64_t r = 0; r < rows; ++r) {
          dot += x.at(r * cols + i) * x.at(r * cols + j);
        }
        EXPECT_TRUE(near(dot, i == j ? 1.0 : 0.0, 0, 1e-5)) << i << "," << j;
      }
    }
  }
  Buffer wide(DType::F32, {2, 3});
  EXPECT_NE(checkKernel("orthogonalize", {&wide}), "");
  Buffer tall(DType::F32, {3, 2});
  EXPECT_NE(checkKernel("orthogonalize", {&tall}, {floatAttr("epsilon", -1)}),
            "");
}

TEST(CompressionKernelsTest, OrthogonalizeWithEpsilonKeepsAZeroColumnFinite) {
  // The hook's orthogonalization_epsilon: a zero column divided by 0 + eps
  // stays zero instead of becoming NaN.
  Buffer x = filled(DType::F32, {3, 1}, {0, 0, 0});
  ASSERT_EQ(runKernel("orthogonalize", {&x}, {floatAttr("epsilon", 1e-8)}), "");
  expectAllNear(x, {0, 0, 0}, 0, 0, "zero column");
}

TEST(CompressionKernelsTest, LowRankMatmulComputesEachPowerSgdProduct) {
  // P = M Q, Q = M^T P and M = P Q^T on a gradient of rank 3 (read as
  // [6, 4 * 5]), against double loops at 1e-6 relative.
  Buffer grad = randomBuffer({6, 4, 5}, -1, 1, 20);
  Buffer gradMatrix = grad;
  gradMatrix.shape = {6, 20};
  int64_t r = 2;
  Buffer q = randomBuffer({20, r}, -1, 1, 21);
  Buffer p(DType::F32, {6, r});
  ASSERT_EQ(runKernel("lowrank_matmul", {&grad, &q, &p}), "");
  expectAllNear(p, referenceProduct(gradMatrix, false, q, false, 6, 20, r),
                1e-6, 1e-7, "P = M Q");
  Buffer q2(DType::F32, {20, r});
  ASSERT_EQ(runKernel("lowrank_matmul", {&grad, &p, &q2},
                      {intAttr("transpose_a", 1)}),
            "");
  expectAllNear(q2, referenceProduct(gradMatrix, true, p, false, 20, 6, r),
                1e-6, 1e-7, "Q = M^T P");
  Buffer out(DType::F32, {6, 4, 5});
  ASSERT_EQ(
      runKernel("lowrank_matmul", {&p, &q2, &out}, {intAttr("transpose_b", 1)}),
      "");
  expectAllNear(out, referenceProduct(p, false, q2, true, 6, r, 20), 1e-6, 1e-7,
                "M = P Q^T");
  EXPECT_NE(checkKernel("lowrank_matmul", {&grad, &p, &q2}), "");
}
