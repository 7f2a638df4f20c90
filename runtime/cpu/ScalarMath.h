//===- ScalarMath.h - the per-element math of the elementwise kernels -*- C++ -*-===//
//
// One definition of each unary function and activation derivative, used by
// the elementwise kernels (ElementwiseKernels.cpp,
// ElementwiseGradientKernels.cpp) and by fused elementwise launches
// (FusedKernels.cpp), so a fused chain computes exactly what the chain of
// single kernels would. f32 goes through VectorMath.h (vectorizes), f64
// through libm.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_SCALARMATH_H
#define TAILOR_RUNTIME_CPU_SCALARMATH_H

#include "runtime/cpu/VectorMath.h"

#include <cmath>

namespace tailor::runtime::cpu {

enum class Unary {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Tanh,
  Sigmoid,
  Silu,
  Relu,
  Erf,
  Sin,
  Cos,
  GeluErf,
  GeluTanh
};

template <Unary Op, typename T> inline T applyUnary(T x) {
  if constexpr (Op == Unary::Neg) {
    return -x;
  } else if constexpr (Op == Unary::Abs) {
    return std::fabs(x);
  } else if constexpr (Op == Unary::Exp) {
    return vmath::exp(x);
  } else if constexpr (Op == Unary::Log) {
    return std::log(x);
  } else if constexpr (Op == Unary::Sqrt) {
    return std::sqrt(x);
  } else if constexpr (Op == Unary::Rsqrt) {
    return T(1) / std::sqrt(x);
  } else if constexpr (Op == Unary::Reciprocal) {
    return T(1) / x;
  } else if constexpr (Op == Unary::Tanh) {
    return vmath::tanh(x);
  } else if constexpr (Op == Unary::Sigmoid) {
    return vmath::sigmoid(x);
  } else if constexpr (Op == Unary::Silu) {
    return x * vmath::sigmoid(x);
  } else if constexpr (Op == Unary::Relu) {
    // NaN < 0 is false, so NaN passes through as in PyTorch.
    return x < T(0) ? T(0) : x;
  } else if constexpr (Op == Unary::Erf) {
    return vmath::erf(x);
  } else if constexpr (Op == Unary::Sin) {
    return std::sin(x);
  } else if constexpr (Op == Unary::Cos) {
    return std::cos(x);
  } else if constexpr (Op == Unary::GeluErf) {
    constexpr T kSqrtHalf = T(0.70710678118654752440);
    return T(0.5) * x * (T(1) + vmath::erf(x * kSqrtHalf));
  } else {
    // PyTorch's approximate='tanh' formula, term for term.
    constexpr T kBeta = T(0.7978845608028654); // sqrt(2 / pi)
    constexpr T kKappa = T(0.044715);
    T inner = kBeta * (x + kKappa * x * x * x);
    return T(0.5) * x * (T(1) + vmath::tanh(inner));
  }
}

// dx = dy f'(x) with f' the exact derivative of the forward's formula, in
// f32 through VectorMath.h like the forward (so it vectorizes).

enum class Activation { Silu, GeluErf, GeluTanh };

template <Activation Act> inline float derivative(float x) {
  if constexpr (Act == Activation::Silu) {
    float s = vmath::sigmoidf32(x);
    return s * (1.0f + x * (1.0f - s));
  } else if constexpr (Act == Activation::GeluErf) {
    // Phi(x) + x phi(x).
    constexpr float kSqrtHalf = 0.70710678118654752440f;
    constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
    return 0.5f * (1.0f + vmath::erff32(x * kSqrtHalf)) +
           x * kInvSqrt2Pi * vmath::expf32(-0.5f * x * x);
  } else {
    constexpr float kBeta = 0.7978845608028654f; // sqrt(2 / pi)
    constexpr float kKappa = 0.044715f;
    float th = vmath::tanhf32(kBeta * (x + kKappa * x * x * x));
    return 0.5f * (1.0f + th) +
           0.5f * x * (1.0f - th * th) * kBeta * (1.0f + 3.0f * kKappa * x * x);
  }
}

} // namespace tailor::runtime::cpu

#endif // TAILOR_RUNTIME_CPU_SCALARMATH_H
