//===- QuantizedLinearKernels.cu - dequantizing GEMMs on tensor cores -----===//
//
// `linear_quantized` (y = x W^T + bias, or y = x W with transpose_weight)
// and `dequantize` for the weight storages of runtime/quant
// (QuantizedWeight.h has the byte layouts; the launcher passes each
// section's byte offset in QuantWeight). The weight is never dequantized
// into global memory by the GEMM: every block dequantizes the tile of W it
// needs for one K-step into shared memory, once, and all its warps read it.
//
// Layout: x [M, K] and y [M, N] row-major (f32 or bf16 storage: the _f32 /
// _bf16 entry points for x, a flag for y and the bias); W[rows, cols] is
// the stored weight, with (N, K) = (rows, cols) forward and (cols, rows)
// with transpose_weight. Shared tiles hold bf16 pairs (u32 words) with the
// contraction dimension contiguous, [row][k] for x and [n][k] for W, rows
// padded from 16 to 20 words so the fragment reads of a warp (8 rows x 4
// words) hit 32 distinct banks.
//
// Precision: x and the dequantized weight are rounded to bf16 for
// mma.sync m16n8k16 with f32 accumulation; the bias add happens in f32.
// The weight values before that rounding are runtime/quant's formulas
// (dequantElement), so the result is the CPU kernel's up to bf16 rounding
// of the operands and the order of the f32 sums.
//
// Shape of the work: a block of 8 warps (256 threads) owns a 128 x 128
// tile of y and walks K in steps of 32. Warps are 2 (M) x 4 (N), each
// owning 64 x 32 of y: 4 x 4 mma tiles, 64 f32 accumulators per thread.
// Double buffering without cp.async: while the tensor cores work on step s
// from one shared buffer, every thread holds step s + 1's raw global data
// (16 x values, and 16 consecutive elements of one row of W in their stored
// form: 8 nf4 bytes, 32 bf16/fp16 bytes) in registers, then decodes them
// into the other buffer; one barrier per step. Each thread's 16 weight
// elements are a run along W's cols: forward that is 16 k of one n (two
// 16-byte shared stores); with transpose_weight 16 n of one k (16 2-byte
// stores, the transpose happens here once per block instead of in every
// warp's fragment loads). Runs that are not whole, aligned and in range
// (the edges of partial tiles, cols not a multiple of 16), and every run of
// the int8 and gptq schemes, go through dequantElement one element at a
// time: correct for any shape, fast where it matters (nf4, bf16, fp16 with
// cols % 16 == 0).
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

namespace tl {
namespace qlinear {

/// quant::Scheme's numbering.
constexpr int kNf4 = 0;
constexpr int kInt8 = 1;
constexpr int kGptq = 2;
constexpr int kBf16 = 3;
constexpr int kFp16 = 4;

/// A quantized weight: its storage, shape and the byte offsets of its
/// sections (QuantizedWeight.h), which the launcher computes with
/// runtime/quant's own layout functions.
struct QuantWeight {
  const unsigned char *storage;
  long long rows, cols;
  int scheme;
  // nf4
  int blockShift;      // log2(block size)
  int doubleQuant;     // 0/1
  int nestedBlockSize; // block scales per nested absmax
  long long absmaxAt;  // f32[blocks] (plain) or u8 codes[blocks] (double)
  long long nestedAt;  // f32 nestedAbsmax (double quant; offset at 0)
  long long packedAt;  // u8 packed nibbles
  // int8
  long long scalesAt, codesAt, columnsAt, valuesAt, outlierColumns;
  // gptq
  int bits, groups;
  long long qzerosAt, gscalesAt, gIdxAt, zeroRowBytes;
};

/// The nf4 codebook and the signed dynamic map of double quantization
/// (256 entries), passed by value and staged in shared memory.
struct QuantTables {
  float code[16];
  float map[256];
};
constexpr int kTableFloats = 16 + 256;

/// The GEMM's activations and output.
struct GemmArgs {
  const void *x;
  void *y;
  const void *bias; // null, or N elements (f32, or bf16 with biasBf16)
  long long m, n, k;
  int transposeWeight, yBf16, biasBf16;
};

struct __align__(16) Words4 {
  u32 v[4];
};
struct __align__(16) Floats4 {
  float v[4];
};
struct __align__(8) Floats2 {
  float v[2];
};

TL_DEVICE bool aligned16(const void *p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

/// Loads of storage bytes at any alignment (sections after the int8 codes
/// and the nf4 packed codes start at arbitrary byte offsets).
TL_DEVICE u32 loadU32Bytes(const unsigned char *p) {
  return u32(p[0]) | (u32(p[1]) << 8) | (u32(p[2]) << 16) | (u32(p[3]) << 24);
}
TL_DEVICE u32 loadU16Bytes(const unsigned char *p) {
  return u32(p[0]) | (u32(p[1]) << 8);
}
/// A 4-byte-aligned f32 or word of the storage (f32 sections come first).
TL_DEVICE float loadF32(const unsigned char *p) {
  return *reinterpret_cast<const float *>(p);
}
TL_DEVICE u32 loadWord(const unsigned char *p) {
  return *reinterpret_cast<const u32 *>(p);
}

/// Copies the tables to shared memory (every thread calls it; a barrier
/// must follow before they are read).
TL_DEVICE void stageTables(const QuantTables &tables, float *shared) {
  for (int i = threadIdx.x; i < kTableFloats; i += blockDim.x) {
    shared[i] = i < 16 ? tables.code[i] : tables.map[i - 16];
  }
}

/// The double-quantization offset (the mean of the block scales).
TL_DEVICE float nf4Offset(const QuantWeight &w) {
  return w.doubleQuant ? loadF32(w.storage) : 0.0f;
}

/// The scale of nf4 block `block` (nf4BlockScales).
TL_DEVICE float nf4Scale(const QuantWeight &w, const float *map, float offset,
                         i64 block) {
  if (!w.doubleQuant) {
    return loadF32(w.storage + w.absmaxAt + 4 * block);
  }
  const float nested =
      loadF32(w.storage + w.nestedAt + 4 * (block / w.nestedBlockSize));
  return map[w.storage[w.absmaxAt + block]] * nested + offset;
}

/// bitsandbytes' 1/127 as a float (Int8.h).
TL_DEVICE float inverse127() { return 7.874015718698502e-3f; }

/// Field `index` of `bits` bits of a little-endian stream whose j-th int32
/// word is at words + 4 * j * stride (Gptq.cpp's readField).
TL_DEVICE u32 readField(const unsigned char *words, i64 stride, i64 index,
                        int bits) {
  const i64 bit = index * bits;
  const i64 word = bit >> 5;
  const int shift = int(bit & 31);
  u64 value = loadWord(words + 4 * word * stride);
  if (shift + bits > 32) {
    value |= u64(loadWord(words + 4 * (word + 1) * stride)) << 32;
  }
  return u32(value >> shift) & ((1u << bits) - 1u);
}

/// W[r, c] as runtime/quant's dequantizeTile computes it. `code` and `map`
/// are the staged tables (nf4 only), `offset` nf4Offset(w).
TL_DEVICE float dequantElement(const QuantWeight &w, const float *code,
                               const float *map, float offset, i64 r, i64 c) {
  const i64 flat = r * w.cols + c;
  switch (w.scheme) {
  case kNf4: {
    const u32 byte = w.storage[w.packedAt + (flat >> 1)];
    const u32 q = (flat & 1) ? (byte & 15u) : (byte >> 4);
    return code[q] * nf4Scale(w, map, offset, flat >> w.blockShift);
  }
  case kInt8: {
    const float scale = loadF32(w.storage + w.scalesAt + 4 * r);
    const int q = int(static_cast<signed char>(w.storage[w.codesAt + flat]));
    float value = (float(q) * scale) * inverse127();
    // Kept columns, ascending, then -1: their codes are 0 and their values
    // live in fp16.
    for (i64 j = 0; j < w.outlierColumns; ++j) {
      const int column =
          int(loadU32Bytes(w.storage + w.columnsAt + 4 * j));
      if (column < 0 || column > c) {
        break;
      }
      if (column == c) {
        value = halfToFloat(u16(
            loadU16Bytes(w.storage + w.valuesAt + 2 * (j * w.rows + r))));
        break;
      }
    }
    return value;
  }
  case kGptq: {
    const u32 q = readField(w.storage + 4 * r, w.rows, c, w.bits);
    int g = int(loadWord(w.storage + w.gIdxAt + 4 * c));
    // checkGptqStorage rejects such storage on the host; never read
    // outside the scales on the device either.
    g = g < 0 ? 0 : (g >= w.groups ? w.groups - 1 : g);
    const float scale = halfToFloat(
        u16(loadU16Bytes(w.storage + w.gscalesAt + 2 * (i64(g) * w.rows + r))));
    const int zero =
        int(readField(w.storage + w.qzerosAt + g * w.zeroRowBytes, 1, r,
                      w.bits)) +
        1;
    return scale * float(int(q) - zero);
  }
  case kBf16:
    return bitsFloat(u32(loadU16Bytes(w.storage + 2 * flat)) << 16);
  default:
    return halfToFloat(u16(loadU16Bytes(w.storage + 2 * flat)));
  }
}

//===----------------------------------------------------------------------===//
// linear_quantized
//===----------------------------------------------------------------------===//

constexpr int kThreads = 256;
constexpr int kTileM = 128;
constexpr int kTileN = 128;
constexpr int kTileK = 32;
/// u32 words per shared row: 16 bf16 pairs plus 4 words of padding.
constexpr int kRowWords = kTileK / 2 + 4;
constexpr int kTileWords = kTileM * kRowWords; // kTileN == kTileM
constexpr int kRun = 16;

/// Step s + 1's global data of one thread, held across step s's mmas.
struct Prefetch {
  u32 x[16];     // f32 bits, or 8 bf16 pairs
  u32 w[8];      // raw weight words of the run (nf4: up to 3, half: 8)
  u32 absmaxCode; // nf4: the block's absmax code (double quant)
  float scale;   // nf4: the nested absmax (double) or the absmax (plain)
  bool fast;     // whether w holds the run (else dequantElement at store)
};

/// The run of W this thread decodes in step kt: 16 consecutive cols of row
/// `r` from col `c`.
TL_DEVICE void weightRun(const GemmArgs &args, i64 n0, i64 k0, i64 &r,
                         i64 &c) {
  const int tid = threadIdx.x;
  if (!args.transposeWeight) {
    r = n0 + (tid >> 1);       // an output row n
    c = k0 + (tid & 1) * kRun; // 16 k
  } else {
    r = k0 + (tid & 31);        // a contraction row k
    c = n0 + (tid >> 5) * kRun; // 16 n
  }
}

template <typename X>
TL_DEVICE void loadX(const GemmArgs &args, i64 m0, i64 k0, bool vectorX,
                     Prefetch &p) {
  const int tid = threadIdx.x;
  const i64 row = m0 + (tid >> 1);
  const i64 k = k0 + (tid & 1) * kRun;
  const X *x = static_cast<const X *>(args.x);
  const bool whole = row < args.m && k + kRun <= args.k;
  if constexpr (sizeof(X) == 4) {
    if (whole && vectorX) {
      const Floats4 *src =
          reinterpret_cast<const Floats4 *>(x + row * args.k + k);
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const Floats4 f = src[v];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          p.x[4 * v + j] = floatBits(f.v[j]);
        }
      }
      return;
    }
#pragma unroll
    for (int j = 0; j < kRun; ++j) {
      p.x[j] = row < args.m && k + j < args.k
                   ? floatBits(load(x, row * args.k + k + j))
                   : 0u;
    }
  } else {
    if (whole && vectorX) {
      const Words4 *src = reinterpret_cast<const Words4 *>(x + row * args.k + k);
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        const Words4 words = src[v];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          p.x[4 * v + j] = words.v[j];
        }
      }
      return;
    }
#pragma unroll
    for (int j = 0; j < kRun / 2; ++j) {
      const i64 at = row * args.k + k + 2 * j;
      const u32 lo = row < args.m && k + 2 * j < args.k ? x[at].bits : 0u;
      const u32 hi = row < args.m && k + 2 * j + 1 < args.k ? x[at + 1].bits : 0u;
      p.x[j] = lo | (hi << 16);
    }
  }
}

template <typename X>
TL_DEVICE void storeX(const Prefetch &p, u32 *tile) {
  const int tid = threadIdx.x;
  u32 words[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if constexpr (sizeof(X) == 4) {
      words[j] = packBf16(bitsFloat(p.x[2 * j]), bitsFloat(p.x[2 * j + 1]));
    } else {
      words[j] = p.x[j];
    }
  }
  Words4 *dst = reinterpret_cast<Words4 *>(tile + (tid >> 1) * kRowWords +
                                           (tid & 1) * (kRun / 2));
  dst[0] = Words4{{words[0], words[1], words[2], words[3]}};
  dst[1] = Words4{{words[4], words[5], words[6], words[7]}};
}

/// Loads the stored form of this thread's run when it is whole (in range,
/// starting on a multiple of 16 elements of the flat weight) and the
/// scheme has a fast path.
template <int Scheme>
TL_DEVICE void loadW(const QuantWeight &w, i64 r, i64 c, bool vectorW,
                     Prefetch &p) {
  const i64 flat = r * w.cols + c;
  p.fast = (Scheme == kNf4 || Scheme == kBf16 || Scheme == kFp16) &&
           r < w.rows && c + kRun <= w.cols && (flat & (kRun - 1)) == 0;
  if (!p.fast) {
    return;
  }
  if constexpr (Scheme == kNf4) {
    // 8 bytes of nibbles at any byte alignment: the 2 or 3 aligned words
    // that hold them, shifted into place when decoded.
    const unsigned long long at = reinterpret_cast<unsigned long long>(
        w.storage + w.packedAt + (flat >> 1));
    const u32 *words = reinterpret_cast<const u32 *>(at & ~3ull);
    p.w[0] = words[0];
    p.w[1] = words[1];
    p.w[2] = (at & 3ull) ? words[2] : 0u;
    const i64 block = flat >> w.blockShift;
    if (w.doubleQuant) {
      p.absmaxCode = w.storage[w.absmaxAt + block];
      p.scale = loadF32(w.storage + w.nestedAt +
                        4 * (block / w.nestedBlockSize));
    } else {
      p.scale = loadF32(w.storage + w.absmaxAt + 4 * block);
    }
  } else if constexpr (Scheme == kBf16 || Scheme == kFp16) {
    if (vectorW) {
      const Words4 *src =
          reinterpret_cast<const Words4 *>(w.storage + 2 * flat);
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        const Words4 words = src[v];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          p.w[4 * v + j] = words.v[j];
        }
      }
    } else {
      const u32 *src = reinterpret_cast<const u32 *>(w.storage + 2 * flat);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        p.w[j] = src[j];
      }
    }
  }
}

/// Decodes this thread's run (16 elements of W, as bf16 pairs) and stores
/// it into the shared W tile as [n][k].
template <int Scheme>
TL_DEVICE void storeW(const QuantWeight &w, const GemmArgs &args,
                      const Prefetch &p, i64 r, i64 c, const float *code,
                      const float *map, float offset, u32 *tile) {
  u32 pairs[8];
  bool decoded = false;
  if constexpr (Scheme == kNf4) {
    if (p.fast) {
      const float scale =
          w.doubleQuant ? map[p.absmaxCode] * p.scale + offset : p.scale;
      const int shift = int((reinterpret_cast<unsigned long long>(
                                 w.storage + w.packedAt) &
                             3ull) *
                            8);
      u32 lo = p.w[0], hi = p.w[1];
      if (shift) {
        lo = (p.w[0] >> shift) | (p.w[1] << (32 - shift));
        hi = (p.w[1] >> shift) | (p.w[2] << (32 - shift));
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const u32 byte = ((j < 4 ? lo : hi) >> (8 * (j & 3))) & 0xffu;
        // Element 2j is the high nibble.
        pairs[j] = packBf16(code[byte >> 4] * scale, code[byte & 15u] * scale);
      }
      decoded = true;
    }
  } else if constexpr (Scheme == kBf16) {
    if (p.fast) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        pairs[j] = p.w[j];
      }
      decoded = true;
    }
  } else if constexpr (Scheme == kFp16) {
    if (p.fast) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        pairs[j] = packBf16(halfToFloat(u16(p.w[j] & 0xffffu)),
                            halfToFloat(u16(p.w[j] >> 16)));
      }
      decoded = true;
    }
  }
  if (!decoded) {
    // Out of range elements are 0: beyond K they must not contribute, and
    // beyond N they are never stored.
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const i64 col = c + 2 * j + e;
        v[e] = r < w.rows && col < w.cols
                   ? dequantElement(w, code, map, offset, r, col)
                   : 0.0f;
      }
      pairs[j] = packBf16(v[0], v[1]);
    }
  }
  const int tid = threadIdx.x;
  if (!args.transposeWeight) {
    Words4 *dst = reinterpret_cast<Words4 *>(tile + (tid >> 1) * kRowWords +
                                             (tid & 1) * (kRun / 2));
    dst[0] = Words4{{pairs[0], pairs[1], pairs[2], pairs[3]}};
    dst[1] = Words4{{pairs[4], pairs[5], pairs[6], pairs[7]}};
  } else {
    // Element j is n = (tid >> 5) * 16 + j at k = tid & 31.
    u16 *halves = reinterpret_cast<u16 *>(tile);
    const int n = (tid >> 5) * kRun;
    const int k = tid & 31;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      halves[(n + 2 * j) * (2 * kRowWords) + k] = u16(pairs[j] & 0xffffu);
      halves[(n + 2 * j + 1) * (2 * kRowWords) + k] = u16(pairs[j] >> 16);
    }
  }
}

/// y[m0:m0+128, n0:n0+128] of one block; see the file comment.
template <typename X, int Scheme>
TL_DEVICE void linearQuantized(const QuantWeight &w, const QuantTables &tables,
                               const GemmArgs &args, u32 *xTiles, u32 *wTiles,
                               float *staged) {
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int warpM = (warp >> 2) * 64, warpN = (warp & 3) * 32;
  const i64 m0 = i64(blockIdx.y) * kTileM, n0 = i64(blockIdx.x) * kTileN;

  stageTables(tables, staged);
  const float *code = staged;
  const float *map = staged + 16;
  const float offset = Scheme == kNf4 ? nf4Offset(w) : 0.0f;
  const bool vectorX = aligned16(args.x) && args.k % (16 / sizeof(X)) == 0;
  const bool vectorW = aligned16(w.storage);

  float acc[4][4][4];
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[mi][ni][e] = 0.0f;
      }
    }
  }

  const i64 steps = (args.k + kTileK - 1) / kTileK;
  Prefetch p = {};
  i64 r = 0, c = 0;
  weightRun(args, n0, 0, r, c);
  loadX<X>(args, m0, 0, vectorX, p);
  loadW<Scheme>(w, r, c, vectorW, p);
  __syncthreads(); // the staged tables
  storeX<X>(p, xTiles);
  storeW<Scheme>(w, args, p, r, c, code, map, offset, wTiles);
  __syncthreads();

  for (i64 s = 0; s < steps; ++s) {
    const int buffer = int(s & 1);
    const bool more = s + 1 < steps;
    if (more) {
      weightRun(args, n0, (s + 1) * kTileK, r, c);
      loadX<X>(args, m0, (s + 1) * kTileK, vectorX, p);
      loadW<Scheme>(w, r, c, vectorW, p);
    }
    const u32 *xs = xTiles + buffer * kTileWords;
    const u32 *ws = wTiles + buffer * kTileWords;
#pragma unroll
    for (int ks = 0; ks < kTileK / 16; ++ks) {
      u32 a[4][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const int at = (warpM + mi * 16 + g) * kRowWords + ks * 8 + t;
        a[mi][0] = xs[at];
        a[mi][1] = xs[at + 8 * kRowWords];
        a[mi][2] = xs[at + 4];
        a[mi][3] = xs[at + 8 * kRowWords + 4];
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int at = (warpN + ni * 8 + g) * kRowWords + ks * 8 + t;
        b[ni][0] = ws[at];
        b[ni][1] = ws[at + 4];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          mmaBf16(acc[mi][ni], a[mi], b[ni]);
        }
      }
    }
    if (more) {
      storeX<X>(p, xTiles + (buffer ^ 1) * kTileWords);
      storeW<Scheme>(w, args, p, r, c, code, map, offset,
                     wTiles + (buffer ^ 1) * kTileWords);
    }
    __syncthreads();
  }

  // Epilogue: c[0..1] are row g, cols 2t and 2t + 1; c[2..3] row g + 8.
  const bool pairAligned = args.n % 2 == 0 &&
                           (reinterpret_cast<unsigned long long>(args.y) &
                            (args.yBf16 ? 3ull : 7ull)) == 0;
#pragma unroll
  for (int ni = 0; ni < 4; ++ni) {
    const i64 col = n0 + warpN + ni * 8 + 2 * t;
    float bias[2] = {0.0f, 0.0f};
    if (args.bias) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (col + e < args.n) {
          bias[e] = args.biasBf16
                        ? load(static_cast<const bf16 *>(args.bias), col + e)
                        : load(static_cast<const float *>(args.bias), col + e);
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const i64 row = m0 + warpM + mi * 16 + g + 8 * h;
        if (row >= args.m || col >= args.n) {
          continue;
        }
        const float v0 = acc[mi][ni][2 * h] + bias[0];
        const float v1 = acc[mi][ni][2 * h + 1] + bias[1];
        const i64 at = row * args.n + col;
        if (args.yBf16) {
          bf16 *y = static_cast<bf16 *>(args.y);
          if (pairAligned) {
            *reinterpret_cast<u32 *>(y + at) = packBf16(v0, v1);
          } else {
            store(y, at, v0);
            if (col + 1 < args.n) {
              store(y, at + 1, v1);
            }
          }
        } else {
          float *y = static_cast<float *>(args.y);
          if (pairAligned) {
            *reinterpret_cast<Floats2 *>(y + at) = Floats2{{v0, v1}};
          } else {
            y[at] = v0;
            if (col + 1 < args.n) {
              y[at + 1] = v1;
            }
          }
        }
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// dequantize: the whole weight, one element per thread of a grid-stride
// loop (a reader other than a linear layer; not on any hot path).
//===----------------------------------------------------------------------===//

template <typename Y>
TL_DEVICE void dequantize(const QuantWeight &w, const QuantTables &tables,
                          Y *y, float *staged) {
  stageTables(tables, staged);
  __syncthreads();
  const float offset = w.scheme == kNf4 ? nf4Offset(w) : 0.0f;
  const i64 total = w.rows * w.cols;
  for (i64 i = globalThread(); i < total; i += gridThreads()) {
    const i64 r = i / w.cols;
    store(y, i, dequantElement(w, staged, staged + 16, offset, r, i - r * w.cols));
  }
}

} // namespace qlinear
} // namespace tl

//===----------------------------------------------------------------------===//
// Entry points: tailor_linear_quantized_<nf4|bf16|fp16|any>_<x storage>
// (`any` decodes int8 and gptq element by element), and
// tailor_dequantize_<y storage>. All GEMM variants run 256 threads on a
// grid of (ceil(N / 128), ceil(M / 128)) blocks with static shared memory.
//===----------------------------------------------------------------------===//

#define TL_QLINEAR_SHARED                                                      \
  __shared__ __align__(16) tl::u32 xTiles[2 * tl::qlinear::kTileWords];        \
  __shared__ __align__(16) tl::u32 wTiles[2 * tl::qlinear::kTileWords];        \
  __shared__ float staged[tl::qlinear::kTableFloats]

TL_GLOBAL void __launch_bounds__(tl::qlinear::kThreads)
    tailor_linear_quantized_nf4_f32(tl::qlinear::QuantWeight w,
                                    tl::qlinear::QuantTables tables,
                                    tl::qlinear::GemmArgs args) {
  TL_QLINEAR_SHARED;
  tl::qlinear::linearQuantized<float, tl::qlinear::kNf4>(w, tables, args,
                                                         xTiles, wTiles, staged);
}
TL_REGISTER(tailor_linear_quantized_nf4_f32)

TL_GLOBAL void __launch_bounds__(tl::qlinear::kThreads)
    tailor_linear_quantized_nf4_bf16(tl::qlinear::QuantWeight w,
                                     tl::qlinear::QuantTables tables,
                                     tl::qlinear::GemmArgs args) {
  TL_QLINEAR_SHARED;
  tl::qlinear::linearQuantized<tl::bf16, tl::qlinear::kNf4>(
      w, tables, args, xTiles, wTiles, staged);
}
TL_REGISTER(tailor_linear_quantized_nf4_bf16)

TL_GLOBAL void __launch_bounds__(tl::qlinear::kThreads)
    tailor_linear_quantized_bf16_f32(tl::qlinear::QuantWeight w,
                                     tl::qlinear::QuantTables tables,
                                     tl::qlinear::GemmArgs args) {
  TL_QLINEAR_SHARED;
  tl::qlinear::linearQuantized<float, tl::qlinear::kBf16>(
      w, tables, args, xTiles, wTiles, staged);
}
TL_REGISTER(tailor_linear_quantized_bf16_f32)

TL_GLOBAL void __launch_bounds__(tl::qlinear::kThreads)
    tailor_linear_quantized_bf16_bf16(tl::qlinear::QuantWeight w,
                                      tl::qlinear::QuantTables tables,
                                      tl::qlinear::GemmArgs args) {
  TL_QLINEAR_SHARED;
  tl::qlinear::linearQuantized<tl::bf16, tl::qlinear::kBf16>(
      w, tables, args, xTiles, wTiles, staged);
}
TL_REGISTER(tailor_linear_quantized_bf16_bf16)

TL_GLOBAL void __launch_bounds__(tl::qlinear::kThreads)
    tailor_linear_quantized_fp16_f32(tl::qlinear::QuantWeight w,
                                     tl::qlinear::QuantTables tables,
                                     tl::qlinear::GemmArgs args) {
  TL_QLINEAR_SHARED;
  tl::qlinear::linearQuantized<float, tl::qlinear::kFp16>(
      w, tables, args, xTiles, wTiles, staged);
}
TL_REGISTER(tailor_linear_quantized_fp16_f32)

TL_GLOBAL void __launch_bounds__(tl::qlinear::kThreads)
    tailor_linear_quantized_fp16_bf16(tl::qlinear::QuantWeight w,
                                      tl::qlinear::QuantTables tables,
                                      tl::qlinear::GemmArgs args) {
  TL_QLINEAR_SHARED;
  tl::qlinear::linearQuantized<tl::bf16, tl::qlinear::kFp16>(
      w, tables, args, xTiles, wTiles, staged);
}
TL_REGISTER(tailor_linear_quantized_fp16_bf16)

TL_GLOBAL void __launch_bounds__(tl::qlinear::kThreads)
    tailor_linear_quantized_any_f32(tl::qlinear::QuantWeight w,
                                    tl::qlinear::QuantTables tables,
                                    tl::qlinear::GemmArgs args) {
  TL_QLINEAR_SHARED;
  tl::qlinear::linearQuantized<float, tl::qlinear::kInt8>(
      w, tables, args, xTiles, wTiles, staged);
}
TL_REGISTER(tailor_linear_quantized_any_f32)

TL_GLOBAL void __launch_bounds__(tl::qlinear::kThreads)
    tailor_linear_quantized_any_bf16(tl::qlinear::QuantWeight w,
                                     tl::qlinear::QuantTables tables,
                                     tl::qlinear::GemmArgs args) {
  TL_QLINEAR_SHARED;
  tl::qlinear::linearQuantized<tl::bf16, tl::qlinear::kInt8>(
      w, tables, args, xTiles, wTiles, staged);
}
TL_REGISTER(tailor_linear_quantized_any_bf16)

TL_GLOBAL void tailor_dequantize_f32(tl::qlinear::QuantWeight w,
                                     tl::qlinear::QuantTables tables,
                                     float *y) {
  __shared__ float staged[tl::qlinear::kTableFloats];
  tl::qlinear::dequantize(w, tables, y, staged);
}
TL_REGISTER(tailor_dequantize_f32)

TL_GLOBAL void tailor_dequantize_bf16(tl::qlinear::QuantWeight w,
                                      tl::qlinear::QuantTables tables,
                                      tl::bf16 *y) {
  __shared__ float staged[tl::qlinear::kTableFloats];
  tl::qlinear::dequantize(w, tables, y, staged);
}
TL_REGISTER(tailor_dequantize_bf16)

TL_GLOBAL void tailor_dequantize_fp16(tl::qlinear::QuantWeight w,
                                      tl::qlinear::QuantTables tables,
                                      tl::f16 *y) {
  __shared__ float staged[tl::qlinear::kTableFloats];
  tl::qlinear::dequantize(w, tables, y, staged);
}
TL_REGISTER(tailor_dequantize_fp16)

#undef TL_QLINEAR_SHARED

// x rounded to bf16 for linear_quantized's GEMM route (via_gemm; see
// runtime/cuda/QuantizedGemmWorkspace.h): a grid-stride copy.
TL_GLOBAL void tailor_round_to_bf16(const float *x, tl::bf16 *y, tl::i64 n) {
  for (tl::i64 i = tl::globalThread(); i < n; i += tl::gridThreads()) {
    y[i] = tl::toBf16(x[i]);
  }
}
TL_REGISTER(tailor_round_to_bf16)

// x rounded to fp16 for the GEMM route of fp16 plans (the same copy).
TL_GLOBAL void tailor_round_to_fp16(const float *x, tl::f16 *y, tl::i64 n) {
  for (tl::i64 i = tl::globalThread(); i < n; i += tl::gridThreads()) {
    y[i].bits = tl::floatToHalf(x[i]);
  }
}
TL_REGISTER(tailor_round_to_fp16)
