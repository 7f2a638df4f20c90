//===- WireInt4.h - ZeRO++'s int4 blocks for gradients on the wire -*- C++ -*-===//
//
// ZeRO++'s quantized gradient reduce-scatter (qgZ) at 4 bits, the width the
// ZeRO++ paper sends gradients at: each destination rank's f32 chunk is
// quantized symmetrically in blocks of kWireBlock (64) elements, code =
// round(x / scale) clamped to [-7, 7] with scale = absmax / 7 per block (0
// for an all-zero block). The chunk's codes come first, two a byte, element
// 2j in the low nibble of byte j and element 2j + 1 in the high nibble
// (4-bit two's complement; -8 is never written), then one f32 scale per
// block (little-endian as in memory): int4WireBytes(chunk) = chunk / 2 +
// chunk / 16 bytes, 36 a block against int8's 68 and f32's 256 (7.1x
// fewer than f32). The same block of 64 as the int8 wire (WireInt8.h), so
// a bucket cut for one is cut for the other; a format of its own file
// because the codes' layout differs (nibbles, not bytes), and Wire.h
// chooses between the two by name. Plain C++, shared by the compiler
// (sizes) and the runtime (the kernels).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_QUANT_WIREINT4_H
#define TAILOR_RUNTIME_QUANT_WIREINT4_H

#include "runtime/quant/WireInt8.h"

#include <cstdint>

namespace tailor::quant {

/// The largest int4 code: codes lie in [-kWireInt4Max, kWireInt4Max].
constexpr int kWireInt4Max = 7;

/// Bytes of a chunk of `elements` (a multiple of kWireBlock) on the wire:
/// half a byte per element, one f32 scale per block.
constexpr int64_t int4WireBytes(int64_t elements) {
  return elements / 2 + elements / kWireBlock * 4;
}

/// Encodes `elements` floats (a multiple of kWireBlock) into `wire`
/// (int4WireBytes(elements) bytes).
void encodeWireInt4(const float *values, int64_t elements, uint8_t *wire);

/// Decodes what encodeWireInt4 wrote back into `elements` floats.
void decodeWireInt4(const uint8_t *wire, int64_t elements, float *values);

/// Adds the decoded values of a wire chunk of `elements` floats to `sums`
/// (qgZ's reduction of every rank's chunk for this rank).
void accumulateWireInt4(const uint8_t *wire, int64_t elements, float *sums);

} // namespace tailor::quant

#endif // TAILOR_RUNTIME_QUANT_WIREINT4_H
