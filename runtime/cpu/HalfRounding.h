//===- HalfRounding.h - f32 values rounded to IEEE half or bf16 -*- C++ -*-===//
//
// What a 16-bit tensor core sees of an f32 value, kept in an f32:
//   fp16: the nearest IEEE binary16 (round to nearest, ties to even; +-inf
//         beyond 65504 + half an ulp, as a float to half conversion gives;
//         NaN stays NaN);
//   bf16: the nearest bfloat16 (the f32 with its mantissa rounded to 7
//         bits, ties to even; f32 subnormals round the same way, values
//         past bf16's largest finite overflow to inf; NaN becomes the quiet
//         NaN, as torch's float to bfloat16 conversion).
// The 16-bit GEMM kernels (`*_fp16`, `*_bf16`, tailor-emulate-half) round
// their operands while copying them into their workspace; fp16 ones also
// round their product before the epilogue (autocast's half GEMMs return
// half), bf16 ones write their f32 sums (CUDA's bf16Compute GEMMs with an
// f32 output). The kernels are templates over HalfFormat: the rounding is
// chosen once per launch, never per element.
//
// Branch-light bit arithmetic, so the loops vectorize: in half's normal
// range the f32 mantissa is rounded to 10 bits by adding 0xfff plus the
// lowest kept bit and clearing 13 bits (a carry into the exponent is the
// right result); below 2^-14 half's spacing is 2^-24, which is the f32
// spacing of values in [0.5, 1), so (|x| + 0.5) - 0.5 rounds there, ties to
// even, exactly. bf16 keeps f32's exponent, so one add-and-clear of 16 bits
// rounds every finite value (a carry into the exponent, or into inf past
// the largest finite, is the right result).
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

/// `x` rounded to the nearest bfloat16, as an f32 (NaN: the quiet NaN).
inline float roundToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    rounded = 0x7fc00000u;
  }
  float y;
  std::memcpy(&y, &rounded, sizeof(y));
  return y;
}

/// The 16-bit format a GEMM kernel emulates (tailor-emulate-half's
/// `format`, the kernel name's suffix).
enum class HalfFormat { Fp16, Bf16 };

/// The kernel-name suffix of `format`: "fp16" or "bf16".
constexpr const char *halfFormatName(HalfFormat format) {
  return format == HalfFormat::Fp16 ? "fp16" : "bf16";
}

/// `x` rounded to `Format`.
template <HalfFormat Format> inline float roundTo(float x) {
  if constexpr (Format == HalfFormat::Fp16) {
    return roundToHalf(x);
  } else {
    return roundToBf16(x);
  }
}

/// Whether a `Format` GEMM rounds its product before the epilogue: fp16
/// (autocast's half GEMMs return half), not bf16 (f32 accumulation and
/// output, as tailor's CUDA bf16 GEMMs).
template <HalfFormat Format>
constexpr bool kRoundsProduct = Format == HalfFormat::Fp16;

/// dst = src rounded to `Format`, on the call's pool (dst may be src).
template <HalfFormat Format>
void roundCopy(const KernelCall &call, const float *src, float *dst,
               int64_t n);

/// out[r, c] = (accumulate ? out[r, c] : 0) + half(product[r, c]) over a
/// rows x columns row-major block: an fp16 GEMM's epilogue.
void addRoundedProduct(const KernelCall &call, const float *product,
                       float *out, int64_t rows, int64_t columns,
                       bool accumulate);

} // namespace tailor::runtime::cpu

#endif // TAILOR_RUNTIME_CPU_HALFROUNDING_H
