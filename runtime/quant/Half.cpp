//===- Half.cpp - float to bf16 and fp16, rounding to nearest even --------===//
//
// Integer arithmetic on the float's bits, so the result does not depend on
// the FPU's rounding mode or on F16C being present.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Half.h"

namespace tailor::quant {

namespace {

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

} // namespace

uint16_t floatToBf16(float value) {
  const uint32_t bits = bitsOf(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return 0xffff;
  }
  // Adding 0x7fff rounds up past halfway; the low kept bit breaks the tie
  // toward even. A carry into the exponent is the right result, up to inf.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

uint16_t floatToFp16(float value) {
  const uint32_t bits = bitsOf(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 (0x477ff000) is halfway between 65504, the largest half, and
  // 65536; the tie goes to the even neighbour, which overflows.
  if (magnitude >= 0x477ff000u) {
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (magnitude >= 0x38800000u) { // normal: 2^-14 and up
    // Round the 13 dropped bits to nearest even, then rebias 127 -> 15; a
    // mantissa carry lands in the exponent as it should.
    const uint32_t rounded = magnitude + 0x0fffu + ((magnitude >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded >> 13) - (112u << 10)));
  }
  // Subnormal: the count of 2^-24 units, m * 2^(e - 126) for the 24-bit
  // significand m, rounded to nearest even. From 2^-25 down it is zero.
  const int exponent = static_cast<int>(magnitude >> 23);
  const int shift = 126 - exponent;
  if (shift > 24) {
    return sign;
  }
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  uint32_t units = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (units & 1u))) {
    ++units;
  }
  return static_cast<uint16_t>(sign | units);
}

} // namespace tailor::quant
