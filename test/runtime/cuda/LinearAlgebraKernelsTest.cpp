//===- LinearAlgebraKernelsTest.cpp - CUDA GEMM launchers vs the CPU ------===//
//
// linear, matmul and linear_weight_grad (runtime/cuda/LinearAlgebraLaunchers
// .cpp) against the CPU kernels. These launchers only describe GEMMs, so
// what is tested is the GemmDesc they build: on the emulator the GEMM is a
// reference loop in double, on a GPU cuBLASLt. Covered: bias, transposed
// weights, 3-D inputs, batched and broadcast matmuls (the single-GEMM,
// strided-batch and per-run paths), accumulation, bf16 storage, the plan's
// bf16 compute for f32 inputs, empty contractions, and the checks.
//
// Tolerance: f32 against the CPU's sgemm differs by f32 rounding of sums of
// at most a few hundred O(1) terms; bf16 outputs by one bf16 rounding; bf16
// compute rounds the f32 inputs too.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/cuda/CudaTestUtil.h"

namespace tailor::runtime::cuda::testing {
namespace {

constexpr Tolerance kF32{2e-5, 1e-5};
constexpr Tolerance kBf16{3e-2, 1e-2};
// fp16 rounds to 11 significant bits, bf16 to 8: an eighth of bf16's.
constexpr Tolerance kFp16{3e-2 / 8, 1e-2 / 8};

HostTensor random(std::vector<int64_t> shape, uint64_t seed,
                  DType dtype = DType::F32) {
  HostTensor t = randomF32(std::move(shape), seed);
  return dtype == DType::F32 ? t : converted(t, dtype);
}

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, LinearF32) {
  // [M, K] x [N, K]^T, with and without bias.
  expectMatchesCpu(*backend, "linear",
                   {random({37, 29}, 1), random({23, 29}, 2),
                    HostTensor(DType::F32, {37, 23})},
                   {}, {2}, kF32);
  expectMatchesCpu(*backend, "linear",
                   {random({37, 29}, 3), random({23, 29}, 4), random({23}, 5),
                    HostTensor(DType::F32, {37, 23})},
                   {}, {3}, kF32);
}

TEST_F(CudaKernelTest, LinearF32ThreeDimensionalAndTransposedWeight) {
  expectMatchesCpu(*backend, "linear",
                   {random({2, 5, 33}, 6), random({33, 17}, 7),
                    random({17}, 8), HostTensor(DType::F32, {2, 5, 17})},
                   {intAttr("transpose_weight", 1)}, {3}, kF32);
  expectMatchesCpu(*backend, "linear",
                   {random({3, 4, 33}, 9), random({33, 19}, 10),
                    HostTensor(DType::F32, {3, 4, 19})},
                   {intAttr("transpose_weight", 1)}, {2}, kF32);
  expectMatchesCpu(*backend, "linear",
                   {random({3, 4, 33}, 11), random({19, 33}, 12),
                    HostTensor(DType::F32, {3, 4, 19})},
                   {intAttr("transpose_weight", 0)}, {2}, kF32);
}

TEST_F(CudaKernelTest, LinearEpilogueScalesAndAccumulates) {
  // The planner's folded scale (alpha) and addition (accumulate onto y),
  // f32 and with bf16 compute.
  for (bool bf16Compute : {false, true}) {
    backend->setHalfCompute(bf16Compute ? HalfCompute::BF16 : HalfCompute::None);
    expectMatchesCpu(*backend, "linear",
                     {random({37, 29}, 21), random({23, 29}, 22),
                      random({37, 23}, 23)},
                     {intAttr("accumulate", 1), floatAttr("alpha", 0.5)}, {2},
                     bf16Compute ? kBf16 : kF32);
    expectMatchesCpu(*backend, "linear",
                     {random({2, 5, 33}, 24), random({33, 17}, 25),
                      HostTensor(DType::F32, {2, 5, 17})},
                     {intAttr("transpose_weight", 1), floatAttr("alpha", -3)},
                     {2}, bf16Compute ? kBf16 : kF32);
  }
  backend->setHalfCompute(HalfCompute::None);
  // A residual the GEMM adds (cuBLASLt's C apart from D).
  expectMatchesCpu(*backend, "linear",
                   {random({2, 5, 33}, 27), random({17, 33}, 28),
                    random({2, 5, 17}, 29), HostTensor(DType::F32, {2, 5, 17})},
                   {intAttr("addend", 1), floatAttr("alpha", 0.5)}, {3}, kF32);
  // With nothing to contract, accumulating leaves y as it was.
  expectMatchesCpu(*backend, "linear",
                   {HostTensor(DType::F32, {4, 0}), HostTensor(DType::F32, {3, 0}),
                    random({4, 3}, 26)},
                   {intAttr("accumulate", 1)}, {2}, kF32);
}

TEST_F(CudaKernelTest, LinearBf16) {
  // bf16 in, bf16 out (bias bf16), and bf16 in, f32 out.
  expectMatchesCpu(*backend, "linear",
                   {random({2, 9, 40}, 13, DType::BF16),
                    random({24, 40}, 14, DType::BF16),
                    random({24}, 15, DType::BF16),
                    HostTensor(DType::BF16, {2, 9, 24})},
                   {}, {3}, kBf16);
  expectMatchesCpu(*backend, "linear",
                   {random({2, 9, 40}, 16, DType::BF16),
                    random({40, 24}, 17, DType::BF16), random({24}, 18),
                    HostTensor(DType::F32, {2, 9, 24})},
                   {intAttr("transpose_weight", 1)}, {3}, kBf16);
}

TEST_F(CudaKernelTest, LinearBf16ComputeOnF32) {
  backend->setHalfCompute(HalfCompute::BF16);
  expectMatchesCpu(*backend, "linear",
                   {random({21, 64}, 19), random({30, 64}, 20), random({30}, 21),
                    HostTensor(DType::F32, {21, 30})},
                   {}, {3}, kBf16);
  backend->setHalfCompute(HalfCompute::None);
}

TEST_F(CudaKernelTest, GemmsWithFp16ComputeOnF32) {
  // fp16 plans: f32 operands rounded to fp16 on the tensor cores (cuBLASLt's
  // FAST_16F), f32 sums and outputs; linear with its epilogue, matmul and
  // linear_weight_grad. The tolerance is one bf16 compute would miss.
  backend->setHalfCompute(HalfCompute::FP16);
  expectMatchesCpu(*backend, "linear",
                   {random({21, 64}, 40), random({30, 64}, 41), random({30}, 42),
                    HostTensor(DType::F32, {21, 30})},
                   {}, {3}, kFp16);
  expectMatchesCpu(*backend, "linear",
                   {random({37, 29}, 43), random({23, 29}, 44),
                    random({37, 23}, 45)},
                   {intAttr("accumulate", 1), floatAttr("alpha", 0.5)}, {2},
                   kFp16);
  expectMatchesCpu(*backend, "matmul",
                   {random({3, 17, 40}, 46), random({3, 40, 9}, 47),
                    HostTensor(DType::F32, {3, 17, 9})},
                   {}, {2}, kFp16);
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {random({2, 7, 24}, 48), random({2, 7, 33}, 49),
                    HostTensor(DType::F32, {24, 33})},
                   {}, {2}, kFp16);
  backend->setHalfCompute(HalfCompute::None);
}

TEST_F(CudaKernelTest, LinearEmptyContraction) {
  // K = 0: y = 0 (over whatever it held).
  HostTensor y = random({4, 6}, 22);
  expectMatchesCpu(*backend, "linear",
                   {HostTensor(DType::F32, {4, 0}),
                    HostTensor(DType::F32, {6, 0}), y},
                   {}, {2}, kF32);
  // M = 0: nothing to do.
  expectMatchesCpu(*backend, "linear",
                   {HostTensor(DType::F32, {0, 5}), random({6, 5}, 23),
                    HostTensor(DType::F32, {0, 6})},
                   {}, {2}, kF32);
}

TEST_F(CudaKernelTest, LinearChecks) {
  EXPECT_EQ(checkCuda("linear",
                      {random({4, 8}, 1), random({6, 8}, 2, DType::BF16),
                       HostTensor(DType::F32, {4, 6})},
                      {}),
            "operand 1 must be f32 like operand 0, got bf16");
  EXPECT_EQ(checkCuda("linear",
                      {random({4, 8}, 1), random({6, 8}, 2),
                       HostTensor(DType::BF16, {4, 6})},
                      {}),
            "operand 2 must be f32, got bf16");
  EXPECT_EQ(checkCuda("linear",
                      {random({4, 8}, 1), random({6, 7}, 2),
                       HostTensor(DType::F32, {4, 6})},
                      {}),
            "weight [6, 7] does not match input [4, 8]: expected [N, 8]");
  EXPECT_EQ(checkCuda("linear",
                      {HostTensor(DType::F32, {4, 0}),
                       HostTensor(DType::F32, {6, 0}), random({6}, 3),
                       HostTensor(DType::F32, {4, 6})},
                      {}),
            "linear on the GPU needs K >= 1 when it has a bias");
  EXPECT_EQ(checkCuda("linear",
                      {random({4, 8}, 1), random({6, 8}, 2),
                       HostTensor(DType::F64, {6}),
                       HostTensor(DType::F32, {4, 6})},
                      {}),
            "operand 2 must be f32 like operand 3, got f64");
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, MatmulBatched) {
  // Equal batches: one strided GEMM.
  expectMatchesCpu(*backend, "matmul",
                   {random({2, 3, 7, 11}, 1), random({2, 3, 11, 5}, 2),
                    HostTensor(DType::F32, {2, 3, 7, 5})},
                   {}, {2}, kF32);
  // A shared b: one tall GEMM.
  expectMatchesCpu(*backend, "matmul",
                   {random({2, 3, 7, 11}, 3), random({11, 5}, 4),
                    HostTensor(DType::F32, {2, 3, 7, 5})},
                   {}, {2}, kF32);
  // A shared a: one strided GEMM with a's stride 0.
  expectMatchesCpu(*backend, "matmul",
                   {random({7, 11}, 5), random({4, 11, 5}, 6),
                    HostTensor(DType::F32, {4, 7, 5})},
                   {}, {2}, kF32);
  // Plain 2-D.
  expectMatchesCpu(*backend, "matmul",
                   {random({13, 9}, 7), random({9, 15}, 8),
                    HostTensor(DType::F32, {13, 15})},
                   {}, {2}, kF32);
}

TEST_F(CudaKernelTest, MatmulBroadcastBatches) {
  // b broadcast over the outer dim, a over the inner: no single stride
  // walks y's batch, so one GEMM per run.
  expectMatchesCpu(*backend, "matmul",
                   {random({1, 3, 6, 10}, 9), random({2, 1, 10, 4}, 10),
                    HostTensor(DType::F32, {2, 3, 6, 4})},
                   {}, {2}, kF32);
  expectMatchesCpu(*backend, "matmul",
                   {random({2, 3, 6, 10}, 11), random({3, 10, 4}, 12),
                    HostTensor(DType::F32, {2, 3, 6, 4})},
                   {}, {2}, kF32);
  expectMatchesCpu(*backend, "matmul",
                   {random({2, 1, 6, 10}, 13), random({2, 3, 10, 4}, 14),
                    HostTensor(DType::F32, {2, 3, 6, 4})},
                   {}, {2}, kF32);
}

TEST_F(CudaKernelTest, MatmulBf16AndEmpty) {
  expectMatchesCpu(*backend, "matmul",
                   {random({2, 4, 8, 16}, 15, DType::BF16),
                    random({2, 4, 16, 8}, 16, DType::BF16),
                    HostTensor(DType::BF16, {2, 4, 8, 8})},
                   {}, {2}, kBf16);
  expectMatchesCpu(*backend, "matmul",
                   {random({3, 8, 16}, 17, DType::BF16),
                    random({16, 8}, 18, DType::BF16),
                    HostTensor(DType::F32, {3, 8, 8})},
                   {}, {2}, kBf16);
  expectMatchesCpu(*backend, "matmul",
                   {HostTensor(DType::F32, {2, 3, 0}),
                    HostTensor(DType::F32, {2, 0, 4}), random({2, 3, 4}, 19)},
                   {}, {2}, kF32);
}

TEST_F(CudaKernelTest, MatmulChecks) {
  EXPECT_EQ(checkCuda("matmul",
                      {HostTensor(DType::F64, {2, 3}),
                       HostTensor(DType::F64, {3, 4}),
                       HostTensor(DType::F64, {2, 4})},
                      {}),
            "operand 0 must be f32 or bf16, got f64");
  EXPECT_EQ(checkCuda("matmul",
                      {random({2, 3}, 1), random({4, 4}, 2),
                       HostTensor(DType::F32, {2, 4})},
                      {}),
            "contraction extents differ: a [2, 3], b [4, 4]");
}

//===----------------------------------------------------------------------===//
// linear_weight_grad
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, LinearWeightGradF32) {
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {random({2, 9, 13}, 1), random({2, 9, 21}, 2),
                    HostTensor(DType::F32, {13, 21})},
                   {}, {2}, kF32);
  // Accumulating onto what dw holds.
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {random({17, 13}, 3), random({17, 21}, 4),
                    random({13, 21}, 5)},
                   {intAttr("accumulate", 1)}, {2}, kF32);
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {random({17, 13}, 6), random({17, 21}, 7),
                    random({13, 21}, 8)},
                   {intAttr("accumulate", 0)}, {2}, kF32);
}

TEST_F(CudaKernelTest, LinearWeightGradScaled) {
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {random({17, 13}, 31), random({17, 21}, 32),
                    random({13, 21}, 33)},
                   {intAttr("accumulate", 1), floatAttr("alpha", 0.25)}, {2},
                   kF32);
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {random({2, 9, 13}, 34), random({2, 9, 21}, 35),
                    HostTensor(DType::F32, {13, 21})},
                   {floatAttr("alpha", 2)}, {2}, kF32);
}

TEST_F(CudaKernelTest, LinearWeightGradBf16IntoF32) {
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {random({3, 11, 16}, 9, DType::BF16),
                    random({3, 11, 24}, 10, DType::BF16),
                    HostTensor(DType::F32, {16, 24})},
                   {}, {2}, kBf16);
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {random({33, 16}, 11, DType::BF16),
                    random({33, 24}, 12, DType::BF16), random({16, 24}, 13)},
                   {intAttr("accumulate", 1)}, {2}, kBf16);
}

TEST_F(CudaKernelTest, LinearWeightGradEmptyRowsAndChecks) {
  // No rows: dw = 0, or unchanged when accumulating.
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {HostTensor(DType::F32, {0, 5}),
                    HostTensor(DType::F32, {0, 3}), random({5, 3}, 14)},
                   {}, {2}, kF32);
  expectMatchesCpu(*backend, "linear_weight_grad",
                   {HostTensor(DType::F32, {0, 5}),
                    HostTensor(DType::F32, {0, 3}), random({5, 3}, 15)},
                   {intAttr("accumulate", 1)}, {2}, kF32);
  EXPECT_EQ(checkCuda("linear_weight_grad",
                      {random({4, 5}, 1, DType::BF16),
                       random({4, 3}, 2, DType::BF16),
                       HostTensor(DType::BF16, {5, 3})},
                      {}),
            "operand 2 must be f32, got bf16");
  EXPECT_EQ(checkCuda("linear_weight_grad",
                      {random({4, 5}, 1), random({3, 3}, 2),
                       HostTensor(DType::F32, {5, 3})},
                      {}),
            "leading dimensions of dy [4, 5] and x [3, 3] differ");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
