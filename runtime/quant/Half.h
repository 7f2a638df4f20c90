//===- Half.h - bf16 and fp16 conversions, PyTorch's roundings --*- C++ -*-===//
//
// The 16-bit float formats of bf16/fp16 weight storage and of model files:
// widening is exact; narrowing rounds to nearest, ties to even, as
// PyTorch's CPU `.to(torch.bfloat16)` and `.half()` do, so a weight stored
// here holds the bits PyTorch would have stored. Widening is inline: the
// GEMM kernels call it per element of every tile.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_QUANT_HALF_H
#define TAILOR_RUNTIME_QUANT_HALF_H

#include <cstdint>
#include <cstring>

namespace tailor::quant {

/// The float a bf16 holds (its bits are a float's upper half).
inline float bf16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

/// The float an IEEE binary16 holds: exact for every finite value,
/// subnormals included; infinities stay infinite and a NaN keeps its sign
/// and payload (shifted into the float's mantissa).
inline float fp16ToFloat(uint16_t bits) {
  // Move the 15 low bits into a float's place and rebias the exponent
  // (15 -> 127). The exponent extremes differ: all ones (inf, NaN) needs
  // 255, and a subnormal 0.m * 2^-14 is computed as 1.m * 2^-14 minus 2^-14,
  // both normal floats, so the subtraction is exact. All three are
  // computed and one selected, without branches, so tile loops vectorize.
  constexpr uint32_t kExpMask = 0x7c00u << 13;
  const uint32_t shifted = (bits & 0x7fffu) << 13;
  const uint32_t exp = shifted & kExpMask;
  const uint32_t normal = shifted + (112u << 23);
  const uint32_t special = shifted + (224u << 23);
  const uint32_t plusOne = shifted + (113u << 23);
  float subnormal;
  std::memcpy(&subnormal, &plusOne, sizeof(subnormal));
  subnormal -= 0x1p-14f;
  uint32_t subnormalBits;
  std::memcpy(&subnormalBits, &subnormal, sizeof(subnormalBits));
  const uint32_t isSpecial = 0u - static_cast<uint32_t>(exp == kExpMask);
  const uint32_t isSubnormal = 0u - static_cast<uint32_t>(exp == 0);
  uint32_t out = (normal & ~isSpecial) | (special & isSpecial);
  out = (out & ~isSubnormal) | (subnormalBits & isSubnormal);
  out |= static_cast<uint32_t>(bits & 0x8000u) << 16;
  float value;
  std::memcpy(&value, &out, sizeof(value));
  return value;
}

/// `value` rounded to bf16, to nearest with ties to even (finite values too
/// large for bf16 become infinite). A NaN becomes 0xffff, as PyTorch's
/// vectorized CPU conversion writes every NaN (its scalar path writes
/// 0x7fc0; both are quiet NaNs).
uint16_t floatToBf16(float value);

/// `value` rounded to IEEE binary16, to nearest with ties to even: values
/// from 65520 up become infinite, those below 2^-14 subnormal (2^-25 and
/// smaller, ties included, become zero). A NaN keeps its sign and top
/// payload bits and is made quiet (0x7e00 for the default NaN), as the x86
/// conversion instruction PyTorch uses does.
uint16_t floatToFp16(float value);

} // namespace tailor::quant

#endif // TAILOR_RUNTIME_QUANT_HALF_H
