//===- WireInt8.h - ZeRO++'s int8 blocks for weights on the wire -*- C++ -*-===//
//
// ZeRO++'s quantized weight gather (qwZ): before a ZeRO-3 all-gather each
// rank quantizes its f32 chunk symmetrically in blocks of kWireBlock
// elements, code = round(x / scale) in [-127, 127] with scale = absmax / 127
// per block (0 for an all-zero block), and sends the codes followed by the
// scales (f32, little-endian as in memory): int8WireBytes(chunk) bytes
// instead of 4 x chunk, 3.76x fewer. Every rank decodes every chunk, its
// own included, so the ranks compute with identical weights. The gradient
// half (qgZ) encodes each rank's share of a bucket as its own wire chunk,
// sends it with an all-to-all and sums the decoded chunks. Plain C++,
// shared by the compiler (sizes) and the runtime (the kernels).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_QUANT_WIREINT8_H
#define TAILOR_RUNTIME_QUANT_WIREINT8_H

#include <cstdint>

namespace tailor::quant {

/// Elements per block of one scale.
constexpr int64_t kWireBlock = 64;

/// Bytes of a chunk of `elements` (a multiple of kWireBlock) on the wire:
/// one int8 code per element, one f32 scale per block.
constexpr int64_t int8WireBytes(int64_t elements) {
  return elements + elements / kWireBlock * 4;
}

/// Encodes `elements` floats (a multiple of kWireBlock) into `wire`
/// (int8WireBytes(elements) bytes).
void encodeWireInt8(const float *values, int64_t elements, uint8_t *wire);

/// Decodes what encodeWireInt8 wrote back into `elements` floats.
void decodeWireInt8(const uint8_t *wire, int64_t elements, float *values);

/// Adds the decoded values of a wire chunk of `elements` floats to `sums`
/// (ZeRO++'s quantized gradient reduce-scatter, qgZ, which reduces every
/// rank's chunk for this rank without a float copy of each).
void accumulateWireInt8(const uint8_t *wire, int64_t elements, float *sums);

} // namespace tailor::quant

#endif // TAILOR_RUNTIME_QUANT_WIREINT8_H
