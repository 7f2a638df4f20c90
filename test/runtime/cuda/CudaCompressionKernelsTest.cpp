//===- CudaCompressionKernelsTest.cpp - PowerSGD's kernels on CUDA --------===//
//
// error_feedback_add, error_feedback_store, lowrank_init, orthogonalize and
// lowrank_matmul (runtime/cuda/CompressionLaunchers.cpp) against the CPU
// kernels (runtime/cpu/CompressionKernels.cpp): the elementwise three bit
// for bit at sizes that do not fill a block; Gram-Schmidt to f32 rounding
// (its double sums run in another order) on factors of 1 to 4 columns and
// 1 to 1537 rows, with epsilon 0 and 1e-8, and its result orthonormal; the
// low-rank products in every transpose combination, a state of rank 3
// read as a matrix among them; EF-SignSGD's compressor (the sign bits bit
// for bit, gradients whose positions share bytes, with and without
// residuals; scales and residuals to f32 rounding, their L1 sums running
// in another order) and its average, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/CompressionKernels.cu"

#include "test/runtime/cuda/CudaTestUtil.h"

#include <cmath>

namespace tailor::runtime::cuda::testing {
namespace {

constexpr Tolerance kExact{0, 0};

TEST_F(CudaKernelTest, ErrorFeedbackMatchesCpu) {
  uint64_t seed = 1;
  for (int64_t n : {1, 7, 256, 1000, 4099}) {
    SCOPED_TRACE(std::to_string(n) + " elements");
    expectMatchesCpu(*backend, "error_feedback_add",
                     {randomF32({n}, seed), randomF32({n}, seed + 1)}, {},
                     {0, 1}, kExact);
    expectMatchesCpu(*backend, "error_feedback_store",
                     {randomF32({n}, seed + 2), randomF32({n}, seed + 3)}, {},
                     {1}, kExact);
    seed += 4;
  }
  // A state of rank 3 pairs with its flat residual of as many elements.
  expectMatchesCpu(*backend, "error_feedback_add",
                   {randomF32({60}, 91), randomF32({3, 4, 5}, 92)}, {}, {0, 1},
                   kExact);
}

TEST_F(CudaKernelTest, LowRankInitMatchesCpu) {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{1}, {17, 1}, {300, 4}, {2001, 3}}) {
    SCOPED_TRACE(std::to_string(shape[0]) + " rows");
    expectMatchesCpu(*backend, "lowrank_init", {randomF32(shape, shape[0])}, {},
                     {0}, kExact);
  }
}

/// The largest |Q^T Q - I| of a [rows, cols] factor.
double orthonormalityError(const HostTensor &q) {
  int64_t rows = q.shape[0], cols = q.shape[1];
  double worst = 0;
  for (int64_t i = 0; i < cols; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double dot = 0;
      for (int64_t r = 0; r < rows; ++r) {
        dot += q.at(r * cols + i) * q.at(r * cols + j);
      }
      worst = std::max(worst, std::fabs(dot - (i == j ? 1.0 : 0.0)));
    }
  }
  return worst;
}

TEST_F(CudaKernelTest, OrthogonalizeMatchesCpu) {
  uint64_t seed = 11;
  for (int64_t rows : {1, 5, 64, 1000, 1537}) {
    for (int64_t cols : {1, 2, 4}) {
      if (cols > rows) {
        continue;
      }
      for (double epsilon : {0.0, 1e-8}) {
        SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) +
                     ", epsilon " + std::to_string(epsilon));
        HostTensor factor = randomF32({rows, cols}, seed++);
        std::vector<Attribute> attributes = {floatAttr("epsilon", epsilon)};
        expectMatchesCpu(*backend, "orthogonalize", {factor}, attributes, {0},
                         Tolerance{2e-6, 2e-5});
        std::vector<HostTensor> got =
            runCuda(*backend, "orthogonalize", {factor}, attributes);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_LT(orthonormalityError(got[0]), 1e-5);
      }
    }
  }
}

TEST_F(CudaKernelTest, LowRankMatmulMatchesCpu) {
  // PowerSGD's three products on a gradient M [n, m] (here a state of
  // rank 3, [6, 5, 7], read as [6, 35]): P = M Q, Q = M^T P, M = P Q^T.
  const int64_t n = 6, m = 35, rank = 3;
  HostTensor grad = randomF32({6, 5, 7}, 21);
  HostTensor q = randomF32({m, rank}, 22);
  HostTensor p = randomF32({n, rank}, 23);
  Tolerance tolerance{1e-5, 1e-5};
  expectMatchesCpu(*backend, "lowrank_matmul",
                   {grad, q, HostTensor(DType::F32, {n, rank})}, {}, {2},
                   tolerance);
  expectMatchesCpu(*backend, "lowrank_matmul",
                   {grad, p, HostTensor(DType::F32, {m, rank})},
                   {intAttr("transpose_a", 1)}, {2}, tolerance);
  expectMatchesCpu(*backend, "lowrank_matmul",
                   {p, q, HostTensor(DType::F32, {6, 5, 7})},
                   {intAttr("transpose_b", 1)}, {2}, tolerance);
  expectMatchesCpu(*backend, "lowrank_matmul",
                   {randomF32({rank, n}, 24), randomF32({m, rank}, 25),
                    HostTensor(DType::F32, {n, m})},
                   {intAttr("transpose_a", 1), intAttr("transpose_b", 1)}, {2},
                   tolerance);
}

/// Gradients of `sizes` elements (odd sizes: positions share sign bytes),
/// a quarter of each entry negative, zeros among them.
std::vector<HostTensor> signGradients(const std::vector<int64_t> &sizes,
                                      uint64_t seed) {
  std::vector<HostTensor> grads;
  for (int64_t n : sizes) {
    HostTensor g = randomF32({n}, seed++, -0.5f, 1.5f);
    for (int64_t i = 0; i < n; i += 7) {
      g.as<float>()[i] = 0.0f;
    }
    grads.push_back(g);
  }
  return grads;
}

TEST_F(CudaKernelTest, SignCompressMatchesCpu) {
  const std::vector<std::vector<int64_t>> buckets = {
      {1}, {13}, {5, 3, 17}, {64, 1, 1000}, {9, 2048}};
  uint64_t seed = 61;
  for (const std::vector<int64_t> &sizes : buckets) {
    for (bool residual : {false, true}) {
      SCOPED_TRACE(std::to_string(sizes.size()) + " gradients, residual " +
                   std::to_string(residual));
      // grads..., [residuals...], then the signs and scales.
      std::vector<HostTensor> operands = signGradients(sizes, seed);
      seed += sizes.size();
      int64_t total = 0;
      for (int64_t n : sizes) {
        total += n;
      }
      for (size_t t = 0; residual && t < sizes.size(); ++t) {
        operands.push_back(randomF32({sizes[t]}, seed++, -0.1f, 0.1f));
      }
      operands.push_back(HostTensor(DType::U8, {(total + 7) / 8}));
      operands.push_back(HostTensor(DType::F32, {int64_t(sizes.size())}));
      std::vector<Attribute> attributes = {
          intAttr("members", int64_t(sizes.size()))};
      size_t out = operands.size() - 2;
      expectMatchesCpu(*backend, "sign_compress", operands, attributes, {out},
                       kExact);
      std::vector<size_t> close = {out + 1};
      for (size_t t = 0; residual && t < sizes.size(); ++t) {
        close.push_back(sizes.size() + t);
      }
      expectMatchesCpu(*backend, "sign_compress", operands, attributes, close,
                       Tolerance{1e-7, 1e-6});
    }
  }
}

TEST_F(CudaKernelTest, SignAverageMatchesCpu) {
  const std::vector<int64_t> sizes = {5, 3, 17, 1000};
  int64_t total = 5 + 3 + 17 + 1000;
  for (int64_t ranks : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    std::vector<HostTensor> operands = {
        converted(randomInts({ranks * ((total + 7) / 8)}, 71 + ranks, 0, 256),
                  DType::U8),
        randomF32({ranks * int64_t(sizes.size())}, 81 + ranks, 0.0f, 1.0f)};
    for (int64_t n : sizes) {
      operands.push_back(HostTensor(DType::F32, {n}));
    }
    std::vector<size_t> compared;
    for (size_t t = 0; t < sizes.size(); ++t) {
      compared.push_back(t + 2);
    }
    expectMatchesCpu(*backend, "sign_average", operands, {}, compared, kExact);
  }
}

// Tests that the CUDA launchers refuse what the CPU kernels refuse.
TEST(CudaCompressionChecks, RefuseWhatTheCpuRefuses) {
  EXPECT_NE(checkCuda("error_feedback_add",
                      {randomF32({4}, 1), randomF32({5}, 2)}, {}),
            "");
  EXPECT_NE(checkCuda("orthogonalize", {randomF32({2, 3}, 3)}, {}), "");
  EXPECT_NE(checkCuda("orthogonalize", {randomF32({3, 2}, 4)},
                      {floatAttr("epsilon", -1.0)}),
            "");
  EXPECT_NE(checkCuda("lowrank_matmul",
                      {randomF32({4, 3}, 5), randomF32({4, 2}, 6),
                       HostTensor(DType::F32, {4, 2})},
                      {}),
            "");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
