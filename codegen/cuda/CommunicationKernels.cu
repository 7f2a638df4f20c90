//===- CommunicationKernels.cu - ZeRO++'s wire chunks ----------*- CUDA -*-===//
//
// Device code of runtime/cuda/CommunicationLaunchers.cpp, the CUDA side of
// the wire kernels in runtime/cpu/CompressionKernels.cpp: what ZeRO++'s
// quantized weight gathers (qwZ) and gradient reduce-scatters (qgZ) send.
// The format is runtime/quant/WireInt8.h's: a chunk of c f32 values (c a
// multiple of 64) becomes c int8 codes, then c / 64 f32 scales (little-
// endian, as in memory), c + c / 16 bytes; chunk r of a buffer of several
// starts at r (c + c / 16).
//
//   - quantize_wire_int8: one warp per block of 64 values, lane l taking
//     values l and l + 32: the block's absmax by warp shuffles (a maximum
//     is exact in any order), scale = absmax / 127 and its inverse by IEEE
//     division, code = round-half-even(x * inverse) clamped to [-127, 127]:
//     the very roundings of the CPU kernel, so both write the same bytes.
//   - dequantize_wire_int8: one thread per value, code times its block's
//     scale.
//   - dequantize_reduce_wire_int8: one thread per value of this rank's
//     chunk, summing the s received chunks' decoded values in rank order
//     (products and sums rounded apart, never contracted into an FMA, as
//     the CPU adds them), then dividing by s for an average.
//   - quantize_wire_int4, dequantize_reduce_wire_int4: the same for
//     runtime/quant/WireInt4.h's format (qgZ at 4 bits): scale = absmax /
//     7, codes in [-7, 7] two a byte (element 2j in the low nibble of byte
//     j), c / 2 code bytes then the c / 64 scales. The encoder's lane l
//     takes the pair 2l, 2l + 1 and writes byte l.
//
// Scales are read and written a byte at a time: a wire buffer is a u8
// tensor the planner may place at any byte, and a scale is 1/64 of the
// traffic. NaN inputs give unspecified codes, as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

namespace tl::wire {

typedef unsigned char u8;

/// Values per block of one scale (runtime/quant/WireInt8.h's kWireBlock).
constexpr i64 kBlock = 64;

/// Bytes of a wire chunk of `chunk` values.
TL_DEVICE i64 chunkBytes(i64 chunk) { return chunk + chunk / kBlock * 4; }

TL_DEVICE float loadScale(const u8 *p) {
  u32 bits =
      u32(p[0]) | (u32(p[1]) << 8) | (u32(p[2]) << 16) | (u32(p[3]) << 24);
  return __uint_as_float(bits);
}

TL_DEVICE void storeScale(u8 *p, float scale) {
  u32 bits = __float_as_uint(scale);
  for (int b = 0; b < 4; ++b) {
    p[b] = u8((bits >> (8 * b)) & 0xffu);
  }
}

/// The int8 code of `x` at `inverse` = 1 / scale, as a byte.
TL_DEVICE u8 encode(float x, float inverse) {
  int code = __float2int_rn(__fmul_rn(x, inverse));
  code = code < -127 ? -127 : (code > 127 ? 127 : code);
  return u8(code & 0xff);
}

/// The value of code byte `code` at `scale`.
TL_DEVICE float decode(u8 code, float scale) {
  int value = code < 128 ? int(code) : int(code) - 256;
  return __fmul_rn(float(value), scale);
}

/// values [blocks x 64] (chunks of `chunk` back to back) into `wire`.
TL_DEVICE void quantizeInt8(const float *values, u8 *wire, i64 chunk,
                            i64 blocks) {
  const i64 warps = gridThreads() / kWarpSize;
  const int lane = int(threadIdx.x % kWarpSize);
  const i64 perChunk = chunk / kBlock;
  // The loop bound is the same for every lane of a warp, so the shuffles
  // below always see the whole warp.
  for (i64 w = globalThread() / kWarpSize; w < blocks; w += warps) {
    const float *x = values + w * kBlock;
    const float a = x[lane], b = x[lane + kWarpSize];
    const float absmax = warpMax(fmaxf(fabsf(a), fabsf(b)));
    const float scale = absmax / 127.0f;
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    u8 *base = wire + (w / perChunk) * chunkBytes(chunk);
    u8 *codes = base + (w % perChunk) * kBlock;
    codes[lane] = encode(a, inverse);
    codes[lane + kWarpSize] = encode(b, inverse);
    if (lane == 0) {
      storeScale(base + chunk + (w % perChunk) * 4, scale);
    }
  }
}

/// `total` values (chunks of `chunk`) decoded from `wire`.
TL_DEVICE void dequantizeInt8(const u8 *wire, float *values, i64 chunk,
                              i64 total) {
  for (i64 i = globalThread(); i < total; i += gridThreads()) {
    const i64 j = i % chunk;
    const u8 *base = wire + (i / chunk) * chunkBytes(chunk);
    values[i] = decode(base[j], loadScale(base + chunk + (j / kBlock) * 4));
  }
}

/// sums [chunk] = the `shards` wire chunks decoded and added in rank
/// order, divided by `shards` when `average`.
TL_DEVICE void dequantizeReduceInt8(const u8 *wire, float *sums, i64 chunk,
                                    i64 shards, int average) {
  const i64 bytes = chunkBytes(chunk);
  for (i64 j = globalThread(); j < chunk; j += gridThreads()) {
    const i64 scaleAt = chunk + (j / kBlock) * 4;
    float sum = 0.0f;
    for (i64 r = 0; r < shards; ++r) {
      const u8 *base = wire + r * bytes;
      sum = __fadd_rn(sum, decode(base[j], loadScale(base + scaleAt)));
    }
    sums[j] = average ? __fdiv_rn(sum, float(shards)) : sum;
  }
}

/// Bytes of an int4 wire chunk of `chunk` values.
TL_DEVICE i64 chunkBytesInt4(i64 chunk) {
  return chunk / 2 + chunk / kBlock * 4;
}

/// The int4 code of `x` at `inverse` = 1 / scale, in [-7, 7].
TL_DEVICE int encodeInt4(float x, float inverse) {
  const int code = __float2int_rn(__fmul_rn(x, inverse));
  return code < -7 ? -7 : (code > 7 ? 7 : code);
}

/// values [blocks x 64] (chunks of `chunk` back to back) into int4 `wire`.
TL_DEVICE void quantizeInt4(const float *values, u8 *wire, i64 chunk,
                            i64 blocks) {
  const i64 warps = gridThreads() / kWarpSize;
  const int lane = int(threadIdx.x % kWarpSize);
  const i64 perChunk = chunk / kBlock;
  // As quantizeInt8: the bound is the same for every lane of a warp.
  for (i64 w = globalThread() / kWarpSize; w < blocks; w += warps) {
    const float *x = values + w * kBlock;
    const float low = x[2 * lane], high = x[2 * lane + 1];
    const float absmax = warpMax(fmaxf(fabsf(low), fabsf(high)));
    const float scale = absmax / 7.0f;
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    u8 *base = wire + (w / perChunk) * chunkBytesInt4(chunk);
    u8 *codes = base + (w % perChunk) * (kBlock / 2);
    codes[lane] = u8((encodeInt4(low, inverse) & 0xf) |
                     ((encodeInt4(high, inverse) & 0xf) << 4));
    if (lane == 0) {
      storeScale(base + chunk / 2 + (w % perChunk) * 4, scale);
    }
  }
}

/// The value of element `j` of an int4 wire chunk at `base`.
TL_DEVICE float decodeInt4(const u8 *base, i64 chunk, i64 j) {
  const u32 byte = base[j / 2];
  const u32 nibble = (j & 1) ? (byte >> 4) & 0xfu : byte & 0xfu;
  const int code = int(nibble & 0x7u) - int(nibble & 0x8u);
  return __fmul_rn(float(code), loadScale(base + chunk / 2 + (j / kBlock) * 4));
}

/// As dequantizeReduceInt8, for int4 wire chunks.
TL_DEVICE void dequantizeReduceInt4(const u8 *wire, float *sums, i64 chunk,
                                    i64 shards, int average) {
  const i64 bytes = chunkBytesInt4(chunk);
  for (i64 j = globalThread(); j < chunk; j += gridThreads()) {
    float sum = 0.0f;
    for (i64 r = 0; r < shards; ++r) {
      sum = __fadd_rn(sum, decodeInt4(wire + r * bytes, chunk, j));
    }
    sums[j] = average ? __fdiv_rn(sum, float(shards)) : sum;
  }
}

} // namespace tl::wire

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

TL_GLOBAL void tailor_quantize_wire_int8(const float *values,
                                         unsigned char *wire, tl::i64 chunk,
                                         tl::i64 blocks) {
  tl::wire::quantizeInt8(values, wire, chunk, blocks);
}
TL_REGISTER(tailor_quantize_wire_int8)

TL_GLOBAL void tailor_dequantize_wire_int8(const unsigned char *wire,
                                           float *values, tl::i64 chunk,
                                           tl::i64 total) {
  tl::wire::dequantizeInt8(wire, values, chunk, total);
}
TL_REGISTER(tailor_dequantize_wire_int8)

TL_GLOBAL void tailor_dequantize_reduce_wire_int8(const unsigned char *wire,
                                                  float *sums, tl::i64 chunk,
                                                  tl::i64 shards, int average) {
  tl::wire::dequantizeReduceInt8(wire, sums, chunk, shards, average);
}
TL_REGISTER(tailor_dequantize_reduce_wire_int8)

TL_GLOBAL void tailor_quantize_wire_int4(const float *values,
                                         unsigned char *wire, tl::i64 chunk,
                                         tl::i64 blocks) {
  tl::wire::quantizeInt4(values, wire, chunk, blocks);
}
TL_REGISTER(tailor_quantize_wire_int4)

TL_GLOBAL void tailor_dequantize_reduce_wire_int4(const unsigned char *wire,
                                                  float *sums, tl::i64 chunk,
                                                  tl::i64 shards, int average) {
  tl::wire::dequantizeReduceInt4(wire, sums, chunk, shards, average);
}
TL_REGISTER(tailor_dequantize_reduce_wire_int4)
