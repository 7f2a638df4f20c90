//===- WireInt8.cpp - ZeRO++'s int8 blocks for weights on the wire ---------===//

#include "runtime/quant/WireInt8.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tailor::quant {

void encodeWireInt8(const float *values, int64_t elements, uint8_t *wire) {
  int64_t blocks = elements / kWireBlock;
  uint8_t *scales = wire + elements;
  for (int64_t b = 0; b < blocks; ++b) {
    const float *x = values + b * kWireBlock;
    float absmax = 0;
    for (int64_t i = 0; i < kWireBlock; ++i) {
      absmax = std::max(absmax, std::fabs(x[i]));
    }
    float scale = absmax / 127.0f;
    float inverse = scale > 0 ? 1.0f / scale : 0.0f;
    for (int64_t i = 0; i < kWireBlock; ++i) {
      float code = std::nearbyint(x[i] * inverse);
      auto clamped = static_cast<int8_t>(std::clamp(code, -127.0f, 127.0f));
      std::memcpy(wire + b * kWireBlock + i, &clamped, 1);
    }
    std::memcpy(scales + b * 4, &scale, 4);
  }
}

namespace {

/// Calls put(index, value) for every decoded value of a wire chunk of
/// `elements` floats, in order.
template <typename Put>
void forEachDecoded(const uint8_t *wire, int64_t elements, Put put) {
  int64_t blocks = elements / kWireBlock;
  const uint8_t *scales = wire + elements;
  for (int64_t b = 0; b < blocks; ++b) {
    float scale;
    std::memcpy(&scale, scales + b * 4, 4);
    for (int64_t i = 0; i < kWireBlock; ++i) {
      int8_t code;
      std::memcpy(&code, wire + b * kWireBlock + i, 1);
      put(b * kWireBlock + i, static_cast<float>(code) * scale);
    }
  }
}

} // namespace

void decodeWireInt8(const uint8_t *wire, int64_t elements, float *values) {
  forEachDecoded(wire, elements,
                 [&](int64_t i, float value) { values[i] = value; });
}

void accumulateWireInt8(const uint8_t *wire, int64_t elements, float *sums) {
  forEachDecoded(wire, elements,
                 [&](int64_t i, float value) { sums[i] += value; });
}

} // namespace tailor::quant
