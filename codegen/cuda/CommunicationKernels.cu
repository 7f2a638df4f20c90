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
//     values 2l and 2l + 1: the block's absmax by warp shuffles (a maximum
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
//     j), c / 2 code bytes then the c / 64 scales.
//
// One template per kernel over the format (Int8, Int4: a code's bytes,
// how a lane stores its pair of codes, how a code is read back).
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

/// The code of `x` at `inverse` = 1 / scale, clamped to [-max, max].
TL_DEVICE int encode(float x, float inverse, int max) {
  const int code = __float2int_rn(__fmul_rn(x, inverse));
  return code < -max ? -max : (code > max ? max : code);
}

/// runtime/quant/WireInt8.h: a byte per code.
struct Int8 {
  static constexpr int kMax = 127;
  /// Bytes of the codes of `chunk` values.
  TL_DEVICE static i64 codeBytes(i64 chunk) { return chunk; }
  /// Writes the codes of values 2l and 2l + 1 of a block at `codes`.
  TL_DEVICE static void store(u8 *codes, int lane, int low, int high) {
    codes[2 * lane] = u8(low & 0xff);
    codes[2 * lane + 1] = u8(high & 0xff);
  }
  /// The code of value `j` of a chunk whose codes start at `codes`.
  TL_DEVICE static int code(const u8 *codes, i64 j) {
    return codes[j] < 128 ? int(codes[j]) : int(codes[j]) - 256;
  }
};

/// runtime/quant/WireInt4.h: two codes a byte, value 2j in the low nibble
/// of byte j.
struct Int4 {
  static constexpr int kMax = 7;
  TL_DEVICE static i64 codeBytes(i64 chunk) { return chunk / 2; }
  TL_DEVICE static void store(u8 *codes, int lane, int low, int high) {
    codes[lane] = u8((low & 0xf) | ((high & 0xf) << 4));
  }
  TL_DEVICE static int code(const u8 *codes, i64 j) {
    const u32 byte = codes[j / 2];
    const u32 nibble = (j & 1) ? (byte >> 4) & 0xfu : byte & 0xfu;
    return int(nibble & 0x7u) - int(nibble & 0x8u);
  }
};

/// Bytes of a wire chunk of `chunk` values in format F.
template <typename F> TL_DEVICE i64 chunkBytes(i64 chunk) {
  return F::codeBytes(chunk) + chunk / kBlock * 4;
}

/// The value of element `j` of the chunk of `chunk` values at `base`.
template <typename F> TL_DEVICE float decode(const u8 *base, i64 chunk, i64 j) {
  const float scale = loadScale(base + F::codeBytes(chunk) + (j / kBlock) * 4);
  return __fmul_rn(float(F::code(base, j)), scale);
}

/// values [blocks x 64] (chunks of `chunk` back to back) into `wire`, a
/// warp per block, lane l taking values 2l and 2l + 1.
template <typename F>
TL_DEVICE void quantize(const float *values, u8 *wire, i64 chunk, i64 blocks) {
  const i64 warps = gridThreads() / kWarpSize;
  const int lane = int(threadIdx.x % kWarpSize);
  const i64 perChunk = chunk / kBlock;
  // The loop bound is the same for every lane of a warp, so the shuffles
  // below always see the whole warp.
  for (i64 w = globalThread() / kWarpSize; w < blocks; w += warps) {
    const float *x = values + w * kBlock;
    const float low = x[2 * lane], high = x[2 * lane + 1];
    const float absmax = warpMax(fmaxf(fabsf(low), fabsf(high)));
    const float scale = absmax / float(F::kMax);
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    u8 *base = wire + (w / perChunk) * chunkBytes<F>(chunk);
    F::store(base + (w % perChunk) * F::codeBytes(kBlock), lane,
             encode(low, inverse, F::kMax), encode(high, inverse, F::kMax));
    if (lane == 0) {
      storeScale(base + F::codeBytes(chunk) + (w % perChunk) * 4, scale);
    }
  }
}

/// `total` values (chunks of `chunk`) decoded from `wire`.
template <typename F>
TL_DEVICE void dequantize(const u8 *wire, float *values, i64 chunk, i64 total) {
  for (i64 i = globalThread(); i < total; i += gridThreads()) {
    values[i] =
        decode<F>(wire + (i / chunk) * chunkBytes<F>(chunk), chunk, i % chunk);
  }
}

/// sums [chunk] = the `shards` wire chunks decoded and added in rank
/// order, divided by `shards` when `average`.
template <typename F>
TL_DEVICE void dequantizeReduce(const u8 *wire, float *sums, i64 chunk,
                                i64 shards, int average) {
  const i64 bytes = chunkBytes<F>(chunk);
  for (i64 j = globalThread(); j < chunk; j += gridThreads()) {
    float sum = 0.0f;
    for (i64 r = 0; r < shards; ++r) {
      sum = __fadd_rn(sum, decode<F>(wire + r * bytes, chunk, j));
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
  tl::wire::quantize<tl::wire::Int8>(values, wire, chunk, blocks);
}
TL_REGISTER(tailor_quantize_wire_int8)

TL_GLOBAL void tailor_dequantize_wire_int8(const unsigned char *wire,
                                           float *values, tl::i64 chunk,
                                           tl::i64 total) {
  tl::wire::dequantize<tl::wire::Int8>(wire, values, chunk, total);
}
TL_REGISTER(tailor_dequantize_wire_int8)

TL_GLOBAL void tailor_dequantize_reduce_wire_int8(const unsigned char *wire,
                                                  float *sums, tl::i64 chunk,
                                                  tl::i64 shards, int average) {
  tl::wire::dequantizeReduce<tl::wire::Int8>(wire, sums, chunk, shards,
                                             average);
}
TL_REGISTER(tailor_dequantize_reduce_wire_int8)

TL_GLOBAL void tailor_quantize_wire_int4(const float *values,
                                         unsigned char *wire, tl::i64 chunk,
                                         tl::i64 blocks) {
  tl::wire::quantize<tl::wire::Int4>(values, wire, chunk, blocks);
}
TL_REGISTER(tailor_quantize_wire_int4)

TL_GLOBAL void tailor_dequantize_reduce_wire_int4(const unsigned char *wire,
                                                  float *sums, tl::i64 chunk,
                                                  tl::i64 shards, int average) {
  tl::wire::dequantizeReduce<tl::wire::Int4>(wire, sums, chunk, shards,
                                             average);
}
TL_REGISTER(tailor_dequantize_reduce_wire_int4)
