//===- FusedKernelCorpus.h - fused programs the tests generate -*- C++ -*-===//
//
// One list, read twice: when the tests are built, FusedKernelsGenerate.cpp
// writes a kernel for each case (codegen/FusedKernelSource.cpp) into
// FusedTestKernels.cu, which CudaFusedKernelsTest.cpp compiles for the SIMT
// emulator and nvcc for the GPU; when they run, CudaFusedKernelsTest.cpp
// launches each case and compares it with the CPU fused_elementwise kernel.
// Input kinds follow from the shapes, as in a plan.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TEST_RUNTIME_CUDA_FUSEDKERNELCORPUS_H
#define TAILOR_TEST_RUNTIME_CUDA_FUSEDKERNELCORPUS_H

#include <cstdint>
#include <string_view>
#include <vector>

namespace tailor::runtime::cuda::testing {

struct FusedCase {
  const char *name;
  /// The launch's `program` and `outputs` attributes.
  const char *program;
  std::vector<int64_t> outputs;
  std::vector<std::vector<int64_t>> inputShapes;
  std::vector<int64_t> outputShape;
  /// Inputs are uniform in [lo, hi).
  float lo = -4.0f, hi = 4.0f;
};

inline const std::vector<FusedCase> &fusedCorpus() {
  static const std::vector<FusedCase> corpus = {
      // A logistic by hand: a unary chain with a constant.
      {"unary_chain",
       "neg(x0);exp(t0);add(t1,1);reciprocal(t2)",
       {3},
       {{1023}},
       {1023}},
      // Every unary op, one output each, over odd sizes.
      {"every_unary",
       "abs(x0);sqrt(t0);rsqrt(t0);log(t0);tanh(x0);sigmoid(x0);silu(x0);"
       "relu(x0);erf(x0);gelu(x0);gelu_tanh(x0);neg(x0);exp(x0)",
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
       {{7}},
       {7}},
      {"one_element", "sigmoid(x0);mul(t0,x0)", {1}, {{1}}, {1}},
      // Constants: negative, integral (written "7.0f"), tiny and huge.
      {"binary_constants",
       "mul(x0,0.5);sub(t0,-1.25);div(t1,x1);add(t2,3);div(t3,7);"
       "mul(t4,1e+30);mul(t5,1e-30)",
       {6},
       {{1023}, {1023}},
       {1023},
       0.5f,
       3.0f},
      // The activation gradients, three outputs, past one full grid pass.
      {"activation_grads",
       "silu_grad(x0,x1);gelu_grad(x0,x1);gelu_tanh_grad(x0,x1)",
       {0, 1, 2},
       {{100003}, {100003}},
       {100003}},
      // SwiGLU forward and backward: several outputs, an input read twice.
      {"swiglu", "silu(x0);mul(t0,x1)", {1}, {{4, 33}, {4, 33}}, {4, 33}},
      {"swiglu_grad",
       "silu(x0);mul(x2,x1);mul(x2,t0);silu_grad(x0,t1)",
       {2, 3},
       {{4, 33}, {4, 33}, {4, 33}},
       {4, 33}},
      // Repeating inputs: a scalar and a bias row against [M, N].
      {"scalar_and_bias",
       "mul(x0,x1);add(t0,x2)",
       {1},
       {{5, 37}, {}, {37}},
       {5, 37}},
      // A bias with leading 1s, and a larger odd period.
      {"bias_leading_ones",
       "sub(x0,x1);relu(t0)",
       {1},
       {{6, 1023}, {1, 1023}},
       {6, 1023}},
      // An rms_norm-like tail: x * rsqrt(x^2 + eps), eps a [1] input.
      {"rsqrt_eps",
       "mul(x0,x0);add(t0,x1);rsqrt(t1);mul(x0,t2)",
       {3},
       {{3, 7}, {1}},
       {3, 7},
       0.1f,
       2.0f},
      // For the aligned-versus-shifted and in-place tests (by name).
      {"unaligned",
       "silu(x0);mul(t0,x1);gelu_tanh_grad(x0,t1)",
       {1, 2},
       {{2, 123}, {2, 123}},
       {2, 123}},
      {"in_place_full", "add(x0,x1);silu(t0)", {1}, {{3, 67}, {3, 67}}, {3, 67}},
      {"in_place_repeating",
       "add(x0,x1);silu(t0)",
       {1},
       {{3, 67}, {67}},
       {3, 67}},
      // An input no instruction reads (its parameter goes unnamed).
      {"unread_input", "exp(x1)", {0}, {{1}, {7}}, {7}},
  };
  return corpus;
}

/// The case called `name` (the corpus has it).
inline const FusedCase &fusedCase(const char *name) {
  for (const FusedCase &c : fusedCorpus()) {
    if (std::string_view(c.name) == name) {
      return c;
    }
  }
  return fusedCorpus().front();
}

} // namespace tailor::runtime::cuda::testing

#endif // TAILOR_TEST_RUNTIME_CUDA_FUSEDKERNELCORPUS_H
