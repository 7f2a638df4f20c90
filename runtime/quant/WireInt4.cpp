//===- WireInt4.cpp - ZeRO++'s int4 blocks for gradients on the wire -------===//

#include "runtime/quant/WireInt4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tailor::quant {

void encodeWireInt4(const float *values, int64_t elements, uint8_t *wire) {
  int64_t blocks = elements / kWireBlock;
  uint8_t *scales = wire + elements / 2;
  const auto max = static_cast<float>(kWireInt4Max);
  for (int64_t b = 0; b < blocks; ++b) {
    const float *x = values + b * kWireBlock;
    float absmax = 0;
    for (int64_t i = 0; i < kWireBlock; ++i) {
      absmax = std::max(absmax, std::fabs(x[i]));
    }
    float scale = absmax / max;
    float inverse = scale > 0 ? 1.0f / scale : 0.0f;
    uint8_t *codes = wire + b * kWireBlock / 2;
    for (int64_t i = 0; i < kWireBlock; i += 2) {
      auto low = static_cast<int>(
          std::clamp(std::nearbyint(x[i] * inverse), -max, max));
      auto high = static_cast<int>(
          std::clamp(std::nearbyint(x[i + 1] * inverse), -max, max));
      codes[i / 2] = static_cast<uint8_t>((low & 0xF) | ((high & 0xF) << 4));
    }
    std::memcpy(scales + b * 4, &scale, 4);
  }
}

namespace {

/// The signed code in the low four bits of `nibble`.
int signExtend(unsigned nibble) {
  return static_cast<int>(nibble & 0x7) - static_cast<int>(nibble & 0x8);
}

/// Calls put(index, value) for every decoded value of a wire chunk of
/// `elements` floats, in order.
template <typename Put>
void forEachDecoded(const uint8_t *wire, int64_t elements, Put put) {
  int64_t blocks = elements / kWireBlock;
  const uint8_t *scales = wire + elements / 2;
  for (int64_t b = 0; b < blocks; ++b) {
    float scale;
    std::memcpy(&scale, scales + b * 4, 4);
    const uint8_t *codes = wire + b * kWireBlock / 2;
    for (int64_t i = 0; i < kWireBlock; i += 2) {
      unsigned byte = codes[i / 2];
      put(b * kWireBlock + i, static_cast<float>(signExtend(byte)) * scale);
      put(b * kWireBlock + i + 1,
          static_cast<float>(signExtend(byte >> 4)) * scale);
    }
  }
}

} // namespace

void decodeWireInt4(const uint8_t *wire, int64_t elements, float *values) {
  forEachDecoded(wire, elements,
                 [&](int64_t i, float value) { values[i] = value; });
}

void accumulateWireInt4(const uint8_t *wire, int64_t elements, float *sums) {
  forEachDecoded(wire, elements,
                 [&](int64_t i, float value) { sums[i] += value; });
}

} // namespace tailor::quant
