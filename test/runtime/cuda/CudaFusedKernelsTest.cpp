//===- CudaFusedKernelsTest.cpp - generated fused kernels vs the CPU ------===//
//
// The kernels codegen/FusedKernelSource.cpp generates for fused_elementwise
// launches, run through the CUDA launcher (runtime/cuda/FusedLaunchers.cpp)
// against the CPU fused_elementwise kernel: unary chains, binaries with
// constants, the activation gradients, several outputs, Repeating inputs (a
// scalar, a bias row, leading 1s) and odd sizes (1, 7, 1023, 100003), f32
// at the elementwise tests' few ulp. The kernels come from
// FusedKernelCorpus.h, generated when the test is built
// (FusedKernelsGenerate.cpp); on a GPU nvcc builds them into the module
// "fused_test". Also the launcher's checks.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/cuda/CudaTestUtil.h"
#include "test/runtime/cuda/FusedKernelCorpus.h"

#include "runtime/cpu/FusedProgram.h"

#include <cmath>

// Last: the emulator's CUDA keywords are macros that would rewrite the
// standard headers' attributes. Generated in the build tree.
#include "test/runtime/cuda/FusedTestKernels.cu"

namespace tailor::runtime::cuda::testing {
namespace {

/// Every op computes as its single kernel does, through the same formulas
/// (ElementwiseMath.cuh; the CPU's ScalarMath.h), so a few f32 ulp: the
/// elementwise tests' tolerance, and the gradient tests' for programs with
/// a derivative (1 - tanh^2 near saturation magnifies tanh's last ulp).
constexpr Tolerance kF32{1e-6, 1e-6};
constexpr Tolerance kF32Gradient{1e-5, 1e-5};

std::vector<Attribute> fusedAttributes(const char *program,
                                       std::vector<int64_t> outputs) {
  return {stringAttr("program", program),
          intsAttr("outputs", std::move(outputs))};
}

/// The case's inputs (seeded by their position) then zeroed outputs.
std::vector<HostTensor> operandsOf(const FusedCase &c) {
  std::vector<HostTensor> operands;
  uint64_t seed = 11;
  for (const auto &shape : c.inputShapes) {
    operands.push_back(randomF32(shape, seed++, c.lo, c.hi));
  }
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    operands.emplace_back(DType::F32, c.outputShape);
  }
  return operands;
}

TEST_F(CudaKernelTest, FusedCorpusMatchesCpu) {
  for (const FusedCase &c : fusedCorpus()) {
    SCOPED_TRACE(c.name);
    std::vector<size_t> compared;
    for (size_t o = 0; o < c.outputs.size(); ++o) {
      compared.push_back(c.inputShapes.size() + o);
    }
    bool gradient = std::string(c.program).find("_grad") != std::string::npos;
    expectMatchesCpu(*backend, "fused_elementwise", operandsOf(c),
                     fusedAttributes(c.program, c.outputs), compared,
                     gradient ? kF32Gradient : kF32);
  }
}

TEST_F(CudaKernelTest, FusedOutputsAreWhatTheProgramSays) {
  // Independent of the CPU kernel: silu(x) * y at a few points.
  HostTensor x(DType::F32, {3}), y(DType::F32, {3});
  const float xs[] = {-2.0f, 0.0f, 3.0f}, ys[] = {1.5f, 4.0f, -0.5f};
  for (int i = 0; i < 3; ++i) {
    x.as<float>()[i] = xs[i];
    y.as<float>()[i] = ys[i];
  }
  std::vector<HostTensor> result = runCuda(
      *backend, "fused_elementwise", {x, y, HostTensor(DType::F32, {3})},
      fusedAttributes("silu(x0);mul(t0,x1)", {1}));
  ASSERT_EQ(result.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    double silu = xs[i] / (1.0 + std::exp(-double(xs[i])));
    EXPECT_NEAR(result[2].at(i), silu * ys[i], 1e-6) << "element " << i;
  }
}

TEST_F(CudaKernelTest, FusedEmptyOutputsLaunchNothing) {
  // The corpus has no kernel for this program: an empty launch must not
  // ask for one.
  expectMatchesCpu(
      *backend, "fused_elementwise",
      {HostTensor(DType::F32, {0, 4}), HostTensor(DType::F32, {0, 4})},
      fusedAttributes("tanh(x0)", {0}), {1}, kF32);
}

TEST_F(CudaKernelTest, FusedUnalignedOperandsTakeTheScalarLoop) {
  // All inputs Full, 246 elements: aligned, the vector loop does 4 * 61 of
  // them and the scalar loop the 2 left; shifted, the scalar loop does all.
  // Same bits.
  const FusedCase &c = fusedCase("unaligned");
  std::vector<Attribute> attributes = fusedAttributes(c.program, c.outputs);
  std::vector<HostTensor> operands = operandsOf(c);
  std::vector<HostTensor> aligned =
      runCuda(*backend, "fused_elementwise", operands, attributes);
  std::vector<HostTensor> shifted =
      runShifted(*backend, "fused_elementwise", operands, attributes,
                 /*shift=*/1);
  ASSERT_EQ(aligned.size(), 4u);
  expectSameBits(shifted[2], aligned[2]);
  expectSameBits(shifted[3], aligned[3]);
}

TEST_F(CudaKernelTest, FusedOutputMayOverwriteItsInput) {
  // The output in input 0's buffer: each element is read before it is
  // written, in both loops.
  for (const char *name : {"in_place_full", "in_place_repeating"}) {
    SCOPED_TRACE(name);
    const FusedCase &c = fusedCase(name);
    std::vector<Attribute> attributes = fusedAttributes(c.program, c.outputs);
    std::vector<HostTensor> operands = operandsOf(c);
    expectSameBits(
        runShifted(*backend, "fused_elementwise", operands, attributes, 0,
                   /*alias=*/{2, 0})[2],
        runCuda(*backend, "fused_elementwise", operands, attributes)[2]);
  }
}

TEST(CudaFusedKernelsChecks, RejectWhatTheKernelsCannotRun) {
  HostTensor x(DType::F32, {4, 8}), y(DType::F32, {4, 8});
  EXPECT_EQ(
      checkCuda("fused_elementwise", {x, y}, fusedAttributes("exp(x0)", {0})),
      "");
  // bf16 storage has no generated kernel yet.
  EXPECT_EQ(checkCuda("fused_elementwise", {converted(x, DType::BF16), y},
                      fusedAttributes("exp(x0)", {0})),
            "operand 0 must be f32: the CUDA backend generates fused kernels "
            "for f32 only");
  // Everything else is the CPU kernel's check, word for word.
  EXPECT_EQ(checkCuda("fused_elementwise", {x, y}, {}),
            "attribute 'program' must be a string");
  EXPECT_EQ(
      checkCuda("fused_elementwise", {x, y}, fusedAttributes("exp(x1)", {0})),
      "program clause 0 'exp(x1)' argument 'x1' names no input (the "
      "launch has 1)");
  EXPECT_EQ(checkCuda("fused_elementwise", {HostTensor(DType::F32, {3}), y},
                      fusedAttributes("exp(x0)", {0})),
            "input 0 [3] neither has the outputs' shape [4, 8] nor repeats "
            "along its leading dimensions");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
