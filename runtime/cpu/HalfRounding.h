//===- HalfRounding.h - f32 values rounded to IEEE half ---------*- C++ -*-===//
//
// What an fp16 tensor core sees of an f32 value: the nearest IEEE binary16
// (round to nearest, ties to even; +-inf beyond 65504 + half an ulp, as a
// float to half conversion gives; NaN stays NaN), kept in an f32. The fp16
// GEMM kernels (`*_fp16`, tailor-emulate-fp16) round their operands while
// copying them into their workspace and their product before the
// epilogue.
//
// Branch-light bit arithmetic, so the loops vectorize: in half's normal
// range the f32 mantissa is rounded to 10 bits by adding 0xfff plus the
// lowest kept bit and clearing 13 bits (a carry into the exponent is the
// right result); below 2^-14 half's spacing is 2^-24, which is the f32
// spacing of values in [0.5, 1), so (|x| + 0.5) - 0.5 rounds there, ties to
// even, exactly.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_HALFROUNDING_H
#define TAILOR_RUNTIME_CPU_HALFROUNDING_H

#include "runtime/cpu/Kernel.h"

#include <cstdint>
#include <cstring>

namespace tailor::runtime::cpu {

/// `x` rounded to the nearest IEEE half, as an f32.
inline float roundToHalf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  uint32_t sign = bits & 0x80000000u;
  uint32_t magnitude = bits & 0x7fffffffu;
  uint32_t rounded;
  if (magnitude >= 0x7f800000u) {
    rounded = magnitude; // inf, NaN
  } else if (magnitude < 0x38800000u) {
    // Below 2^-14: half's subnormals, spaced 2^-24.
    float a;
    std::memcpy(&a, &magnitude, sizeof(a));
    float r = (a + 0.5f) - 0.5f;
    std::memcpy(&rounded, &r, sizeof(rounded));
  } else {
    rounded = (magnitude + 0x0fffu + ((magnitude >> 13) & 1u)) & ~0x1fffu;
    if (rounded > 0x477fe000u) { // past 65504
      rounded = 0x7f800000u;
    }
  }
  uint32_t out = rounded | sign;
  float y;
  std::memcpy(&y, &out, sizeof(y));
  return y;
}

/// dst = src rounded to half, on the call's pool (dst may be src).
void roundToHalf(const KernelCall &call, const float *src, float *dst,
                 int64_t n);

/// out[r, c] = (accumulate ? out[r, c] : 0) + half(product[r, c]) over a
/// rows x columns row-major block: an fp16 GEMM's epilogue.
void addRoundedProduct(const KernelCall &call, const float *product,
                       float *out, int64_t rows, int64_t columns,
                       bool accumulate);

} // namespace tailor::runtime::cpu

#endif // TAILOR_RUNTIME_CPU_HALFROUNDING_H
