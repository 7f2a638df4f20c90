//===- ElementwiseMath.cuh - per-element math of the kernels -*- CUDA -*-===//
//
// One definition of each activation, its derivative and the reciprocal
// forms, shared by the hand-written kernels (ElementwiseKernels.cu,
// GradientKernels.cu) and the kernels tailor generates for fused
// elementwise groups (codegen/FusedKernelSource.cpp, compiled by NVRTC with
// this header given in memory), so a fused chain computes what the chain of
// single kernels computes.
//
// Precision: f32 throughout, through the precise CUDA library (expf, not
// __expf), with the CPU kernels' formulas term for term
// (runtime/cpu/ScalarMath.h), so the backends agree within a few f32 ulp.
// Like Device.cuh, no host headers: NVRTC compiles it as it is.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_CUDA_ELEMENTWISEMATH_CUH
#define TAILOR_CODEGEN_CUDA_ELEMENTWISEMATH_CUH

#include "codegen/cuda/Device.cuh"

namespace tl {
namespace math {

/// The CPU's overflow-free logistic: e = exp(-|x|) in (0, 1], then 1/(1+e)
/// or e/(1+e), so neither branch divides by a huge number or cancels.
TL_DEVICE float sigmoid(float x) {
  float e = expf(-fabsf(x));
  float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

TL_DEVICE float silu(float x) { return x * sigmoid(x); }

/// 1 / sqrt (two correctly rounded steps) as the CPU does, not rsqrtf.
TL_DEVICE float rsqrt(float x) { return 1.0f / sqrtf(x); }

TL_DEVICE float reciprocal(float x) { return 1.0f / x; }

/// NaN < 0 is false, so NaN passes through as in PyTorch.
TL_DEVICE float relu(float x) { return x < 0.0f ? 0.0f : x; }

/// gelu, the erf form.
TL_DEVICE float gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}

/// PyTorch's approximate='tanh' formula, term for term as the CPU kernel.
TL_DEVICE float geluTanh(float x) {
  const float kBeta = 0.7978845608028654f; // sqrt(2 / pi)
  const float kKappa = 0.044715f;
  float inner = kBeta * (x + kKappa * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

// The exact derivatives of the forward formulas above (the CPU kernel's),
// for silu_grad and gelu_grad: dx = dy f'(x).

TL_DEVICE float siluDerivative(float x) {
  float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

/// Phi(x) + x phi(x).
TL_DEVICE float geluDerivative(float x) {
  const float kSqrtHalf = 0.70710678118654752440f;
  const float kInvSqrt2Pi = 0.39894228040143267794f;
  return 0.5f * (1.0f + erff(x * kSqrtHalf)) +
         x * kInvSqrt2Pi * expf(-0.5f * x * x);
}

TL_DEVICE float geluTanhDerivative(float x) {
  const float kBeta = 0.7978845608028654f; // sqrt(2 / pi)
  const float kKappa = 0.044715f;
  float th = tanhf(kBeta * (x + kKappa * x * x * x));
  return 0.5f * (1.0f + th) +
         0.5f * x * (1.0f - th * th) * kBeta * (1.0f + 3.0f * kKappa * x * x);
}

TL_DEVICE float siluGrad(float x, float dy) { return dy * siluDerivative(x); }
TL_DEVICE float geluGrad(float x, float dy) { return dy * geluDerivative(x); }
TL_DEVICE float geluTanhGrad(float x, float dy) {
  return dy * geluTanhDerivative(x);
}

// The four operations of generated fused kernels, rounded to nearest as
// separate instructions: the compiler must not contract a product and a
// sum of two program instructions into one FMA, so a fused chain gives
// what the chain of single kernels gives, bit for bit.

#ifdef TAILOR_SIMT_EMULATOR
TL_DEVICE float add(float a, float b) { return a + b; }
TL_DEVICE float sub(float a, float b) { return a - b; }
TL_DEVICE float mul(float a, float b) { return a * b; }
TL_DEVICE float div(float a, float b) { return a / b; }
#else
TL_DEVICE float add(float a, float b) { return __fadd_rn(a, b); }
TL_DEVICE float sub(float a, float b) { return __fsub_rn(a, b); }
TL_DEVICE float mul(float a, float b) { return __fmul_rn(a, b); }
TL_DEVICE float div(float a, float b) { return __fdiv_rn(a, b); }
#endif

} // namespace math

//===----------------------------------------------------------------------===//
// Packs of four f32 for the generated kernels' vector loop: one 16-byte
// access per operand, when the kernel has found every pointer aligned.
//===----------------------------------------------------------------------===//

namespace fused {

struct alignas(16) Pack4 {
  float v[4];
};

TL_DEVICE bool aligned16(const void *p) {
  return (reinterpret_cast<u64>(p) & 15u) == 0;
}
/// Elements [4 j, 4 j + 4) of p.
TL_DEVICE Pack4 loadPack(const float *p, i64 j) {
  return reinterpret_cast<const Pack4 *>(p)[j];
}
TL_DEVICE void storePack(float *p, i64 j, const Pack4 &v) {
  reinterpret_cast<Pack4 *>(p)[j] = v;
}

} // namespace fused
} // namespace tl

#endif // TAILOR_CODEGEN_CUDA_ELEMENTWISEMATH_CUH
