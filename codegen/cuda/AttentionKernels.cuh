//===- AttentionKernels.cuh - flash attention templates --------*- CUDA -*-===//
//
// Scaled dot-product attention with grouped KV heads (`attention`,
// `attention_grad` in runtime/cpu/README.md), FlashAttention-2 style: no
// T x S score matrix ever reaches global memory.
//
// Layout: q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], y and dout
// [B, Hq, T, Dv], row-major; query head h reads kv head h / (Hq / Hkv).
// With causal masking query row t sees keys s <= t + (S - T), and with a
// sliding window of W keys also only s > t + (S - T) - W, and with document
// masking (sample packing's positions [B, T]) only keys of the query's own
// example, s >= t + (S - T) - positions[b, t] (a negative position counts
// as 0 here; the CPU kernel refuses it); a row that sees no key gets zeros
// (forward) and zero gradients (backward), as on the CPU. The score of a
// visible key is (tg.attention's order, AttentionKeys.h)
//   x = scale * q.k, capped to c * tanh(x / c) with a softcap c,
//       + slope[h] * (s - t - (S - T)) with ALiBi, + bias[b, h, t, s] with
//       a bias operand (broadcast through zero strides);
// the backward multiplies dS by the cap's derivative 1 - (capped / c)^2
// (the additive terms are constants to q and k).
//
// Precision: q, k, v (and dout, and the probabilities P and dS) are rounded
// to a 16-bit format for the tensor cores (mma.sync m16n8k16, f32
// accumulation); scores, softmax statistics and every accumulator are f32.
// The format is a template parameter of every kernel (Bf16Format,
// HalfFormat): bf16 plans and fp32 plans compute in bf16; fp16 plans
// (mixed_precision: fp16, for GPUs without bf16 tensor cores) in IEEE half,
// which has 3 more mantissa bits but overflows at 65520: a dO of that size
// (or a dS past it) becomes inf, and the gradients inf or NaN, which is
// what the loss scaler needs to see to skip the step. Storage is f32 or
// bf16 (the _f32/_bf16 entry points, module attention; AttentionKernels.cu)
// with bf16 compute, or f32 with half compute (the _f32_fp16 entry points,
// module attention_fp16; AttentionFp16Kernels.cu, so bf16 plans do not
// embed them); the head dims are padded with zeros to a class HD in
// {32, 64, 96, 128} (the _d<HD> entry points), so any D, Dv up to 128
// works, at the cost of the class above it.
//
// Shape of the work: a block is 4 warps (128 threads) and owns 64 rows of
// one (batch, head): 16 rows per warp, which is the M of one mma, so each
// warp's softmax statistics stay in its registers (a row lives in the 4
// lanes of a quad and is reduced with two xor shuffles). Tiles of the
// operand that is walked over are staged in shared memory as 16-bit pairs
// (u32 words), rows padded by 4 words so the fragment reads (8 rows x 4
// words per load) hit 32 distinct banks. The mma's B operand wants
// k-consecutive pairs; where the staged tile is stored the other way round
// (V in P V, K in dS K, Q and dO in the key-major backward) a lane reads
// two 16-bit halves from the row-major tile, which costs a second shared
// load but keeps every tile in one layout and avoids a transposing store.
//
// Kernels (entry points tailor_<name>_d<HD>_<storage>[_fp16]):
//   attention:            one pass over key tiles with the online softmax
//                         (running max and sum per row), y = O / sum.
//   attention_grad_stats: the same pass; instead of y it stores per query
//                         row L = max + log(sum) (the logsumexp of the
//                         scaled scores) and Delta = rowsum(dO * O), the two
//                         row statistics the backward needs.
//   attention_grad_kv:    one block per 64 keys of a (batch, kv head,
//                         slice), where a slice is kvSplits-th of the kv
//                         head's group of query heads; walks those query
//                         heads and every query tile that sees its keys,
//                         recomputes P = exp(scale S - L) and
//                         dS = P (dP - Delta), and accumulates
//                         dV += P^T dO, dK += scale dS^T Q in registers.
//                         One slice writes dk, dv; several write f32
//                         partials to the workspace and
//                         attention_grad_kv_sum adds them in slice order:
//                         every element has one writer, no atomics,
//                         deterministic.
//   attention_grad_q:     one block per 64 query rows; walks the key tiles,
//                         recomputes P and dS the same way and accumulates
//                         dQ = scale dS K in registers.
//
// Why the key-major pass is split (GPU profile, TinyLlama-1.1B on an H200:
// attention_grad 6.6 ms per layer against 1.0 ms for the forward). With
// GQA one block per (64 keys, kv head) walks all `group` query heads: for
// TinyLlama (4 kv heads, group 8, 2048 keys) that is 32 x 4 = 128 blocks of
// 4 warps on 132 SMs -- one block per SM, 4 warps to hide every latency,
// each block 8 times the work of a query-major block, and causally the
// block of the first keys walks all 32 query tiles of 8 heads (256 steps)
// while the last walks 8: the pass lasts as long as its heaviest block.
// The options were
//   (a) atomics into f32 dk, dv: not deterministic, which tailor's backward
//       is (AttentionGradDeterministic);
//   (b) splitting the query-tile range of a block: same partials and sum as
//       (c), but with causal masking the work of a block depends on both
//       its keys and its query range, and slices of one head re-stage the
//       same K, V as (c) does;
//   (c) splitting the group's query heads into kvSplits slices, each block
//       writing f32 partial dk, dv and a small kernel adding the slices.
// (c) is taken: each slice does the unsplit kernel's work for fewer heads
// (no new masking logic), the sum is in a fixed order, and the slices are
// chosen by a rule of the shape alone (runtime/cuda/AttentionWorkspace.h:
// the smallest divisor of the group that reaches 1024 blocks) so the
// compiler sizes the workspace for it. TinyLlama gets 8 slices: 1024
// blocks of 1/8 the work, 4 resident per SM (127 registers at D64), and
// the partials cost 4 x 8 x 2048 x 128 floats = 33.5 MB written once and
// read once by the sum (~15 us at H200 bandwidth, against the pass's
// ~0.2 ms of tensor-core work at a realistic 150 TFLOP/s). Without GQA
// (Llama-7B: 32 x 32 = 1024 blocks already) nothing changes and no
// workspace is needed. The expected gain on TinyLlama: the kv pass was
// bounded by its heaviest block (256 tile steps at one block per SM); split,
// its 16384 tile steps spread over 132 SMs x 4 blocks (~31 per block slot)
// and the costliest blocks start first (see below), so about 4-6x faster
// for that pass, the exact figure for AttentionKernelBench to give.
//
// Cheaper wins, in all kernels: blocks are ordered costliest first (the
// last query tiles causally for the query-major kernels, the first key
// tiles for the key-major one; heads vary fastest), so the cheap blocks
// fill the tail of the grid; tiles whose every score is visible (all but
// the diagonal ones causally, with no window or document mask) skip the
// per-element visible() test; rows of bf16 (or f32) storage with D % 8 == 0
// are staged with 16-byte loads instead of 2-byte ones. Register counts
// at D64 stay at or under 128 (4 blocks per SM), the D128 key-major pass
// drops from 246 to 198.
// The statistics live in a caller-provided f32 buffer with `statsStride`
// floats between rows; the launcher points it at the workspace when that is
// big enough and otherwise at the first 8 bytes of each dq row (dq is not
// written until attention_grad_q, whose block reads the statistics of its
// own rows before its barrier and overwrites them only at the end).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_CUDA_ATTENTIONKERNELS_CUH
#define TAILOR_CODEGEN_CUDA_ATTENTIONKERNELS_CUH

#include "codegen/cuda/Device.cuh"

namespace tl {
namespace attn {

constexpr int kWarps = 4;
/// 4 warps, 128 threads: rows (queries, or keys in attention_grad_kv) a block
/// owns: 16 per warp.
constexpr int kBlockRows = 16 * kWarps;
/// Rows of the walked-over operand staged per step.
constexpr int kTileRows = 64;

/// Query heads an ALiBi launch may have (the slopes travel in Dims).
constexpr int kMaxAlibiHeads = 256;

/// The tensor cores' element format, a template parameter of every kernel:
/// how staged operands and the probabilities are rounded and packed into
/// u32 pairs, and the mma that multiplies them (Device.cuh).
struct Bf16Format {
  static constexpr bool kBf16 = true;
  static TL_DEVICE u32 pack(float lo, float hi) { return packBf16(lo, hi); }
  static TL_DEVICE void mma(float c[4], const u32 a[4], const u32 b[2]) {
    mmaBf16(c, a, b);
  }
};
/// IEEE half: 3 more mantissa bits than bf16, but finite only below 65520,
/// so an operand (or P, dS) beyond that becomes inf on the tensor cores.
struct HalfFormat {
  static constexpr bool kBf16 = false;
  static TL_DEVICE u32 pack(float lo, float hi) { return packHalf(lo, hi); }
  static TL_DEVICE void mma(float c[4], const u32 a[4], const u32 b[2]) {
    mmaHalf(c, a, b);
  }
};

/// Shapes and attributes, passed by value to every entry point.
struct Dims {
  int hq, hkv, t, s, d, dv;
  int causal;
  float scale;
  /// Floats between the statistics of consecutive query rows.
  long long statsStride;
  /// Keys in the sliding window (0: none; only with causal).
  int window;
  /// Soft cap of the scaled scores (0: none).
  float softcap;
  /// 1: `slopes` holds one ALiBi slope per query head.
  int alibi;
  /// Slices of each kv head's query-head group in attention_grad_kv (>= 1;
  /// runtime/cuda/AttentionWorkspace.h).
  int kvSplits;
  /// The additive bias in the storage type of q (null: none), and its
  /// element strides over [B, Hq, T, S] (0 on broadcast dims).
  const void *bias;
  long long biasStride[4];
  /// Document masking (sample packing): each query token's position within
  /// its example, i64 [B, T] (null: none); query t sees no key before
  /// t - positions[b, t] (a negative position counts as 0).
  const long long *positions;
  float slopes[kMaxAlibiHeads];
};

TL_DEVICE float negativeInfinity() { return bitsFloat(0xff800000u); }

/// u32 words per staged row of head-dim class HD: bf16 pairs plus 4 words
/// of padding against bank conflicts.
template <int HD> constexpr int kRowWords = HD / 2 + 4;

/// Whether rows of `cols` elements from `src` can be staged 8 columns at a
/// time with 16-byte loads: every row starts 16-byte aligned and whole
/// 8-column chunks cover it (a chunk is all data or all padding).
template <typename T>
TL_DEVICE bool vectorRows(const T *src, int cols) {
  return cols % 8 == 0 &&
         (reinterpret_cast<unsigned long long>(src) & 15ull) == 0;
}

/// The four staged words of the 8 columns at `src`: bf16 pairs are already
/// the staged words (one 16-byte load; bf16 storage computes in bf16 only);
/// f32 takes two and rounds to the format.
template <typename F> TL_DEVICE uint4 chunkWords(const bf16 *src) {
  static_assert(F::kBf16, "bf16 storage stages as bf16 words only");
  return *reinterpret_cast<const uint4 *>(src);
}
template <typename F> TL_DEVICE uint4 chunkWords(const float *src) {
  float4 lo = reinterpret_cast<const float4 *>(src)[0];
  float4 hi = reinterpret_cast<const float4 *>(src)[1];
  uint4 w;
  w.x = F::pack(lo.x, lo.y);
  w.y = F::pack(lo.z, lo.w);
  w.z = F::pack(hi.x, hi.y);
  w.w = F::pack(hi.z, hi.w);
  return w;
}

/// Stages rows [0, rows) of a row-major [*, cols] matrix starting at `src`
/// as bf16 pairs, zero beyond `valid` rows and `cols` columns (the padding
/// of partial tiles and of head dims below the class). Rows that allow it
/// (vectorRows) move 8 columns per thread and step, with 16-byte loads and
/// one 16-byte shared store (rows are 16-byte aligned: kRowWords is a
/// multiple of 4); the rest 2 columns per thread and step with scalar
/// loads. Both stage the same bits. (Issuing all of a thread's loads before
/// its stores, unrolled, costs the D64 kernels 5-35 registers and with them
/// a resident block per SM: not done without a GPU to measure it.)
template <typename F, typename T, int HD>
TL_DEVICE void stageRows(u32 *tile, const T *src, int rows, int valid,
                         int cols) {
  constexpr int w = kRowWords<HD>;
  if (vectorRows(src, cols)) {
    constexpr int chunks = HD / 8;
    for (int i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
      int r = i / chunks, c = 8 * (i % chunks);
      uint4 words;
      words.x = words.y = words.z = words.w = 0u;
      if (r < valid && c < cols) {
        words = chunkWords<F>(src + i64(r) * cols + c);
      }
      *reinterpret_cast<uint4 *>(tile + r * w + c / 2) = words;
    }
    return;
  }
  constexpr int pairs = HD / 2;
  for (int i = threadIdx.x; i < rows * pairs; i += blockDim.x) {
    int r = i / pairs, c = 2 * (i % pairs);
    float lo = 0.0f, hi = 0.0f;
    if (r < valid) {
      i64 base = i64(r) * cols + c;
      if (c < cols) {
        lo = load(src, base);
      }
      if (c + 1 < cols) {
        hi = load(src, base + 1);
      }
    }
    tile[r * w + i % pairs] = F::pack(lo, hi);
  }
}

/// The mma A fragment of rows [row0, row0 + 16) and columns
/// [16 ks, 16 ks + 16) of a staged tile.
template <int HD>
TL_DEVICE void loadA(u32 a[4], const u32 *tile, int row0, int ks) {
  constexpr int w = kRowWords<HD>;
  int g = (threadIdx.x % kWarpSize) / 4, t = threadIdx.x % 4;
  const u32 *p = tile + (row0 + g) * w + 8 * ks + t;
  a[0] = p[0];
  a[1] = p[8 * w];
  a[2] = p[4];
  a[3] = p[8 * w + 4];
}

/// The B fragment (K x N = 16 x 8) of B = X^T for a staged X: B[k][n] =
/// X[n0 + n][16 ks + k], so k-pairs are adjacent words.
template <int HD>
TL_DEVICE void loadBTransposed(u32 b[2], const u32 *tile, int n0, int ks) {
  constexpr int w = kRowWords<HD>;
  int g = (threadIdx.x % kWarpSize) / 4, t = threadIdx.x % 4;
  const u32 *p = tile + (n0 + g) * w + 8 * ks + t;
  b[0] = p[0];
  b[1] = p[4];
}

/// The B fragment of B = X itself: B[k][n] = X[k0 + k][8 jn + n], from two
/// rows' 16-bit halves.
template <int HD>
TL_DEVICE void loadB(u32 b[2], const u32 *tile, int k0, int jn) {
  constexpr int w = kRowWords<HD>;
  int g = (threadIdx.x % kWarpSize) / 4, t = threadIdx.x % 4;
  const u32 *p = tile + (k0 + 2 * t) * w + 4 * jn + g / 2;
  int shift = 16 * (g & 1);
  u32 r0 = (p[0] >> shift) & 0xffffu, r1 = (p[w] >> shift) & 0xffffu;
  u32 r8 = (p[8 * w] >> shift) & 0xffffu, r9 = (p[9 * w] >> shift) & 0xffffu;
  b[0] = r0 | (r1 << 16);
  b[1] = r8 | (r9 << 16);
}

/// Accumulator tiles j and j + 1 (16 x 16 as two 16 x 8) repacked as the A
/// fragment of the next product, rounded to the format.
template <typename F>
TL_DEVICE void packA(u32 a[4], const float c0[4], const float c1[4]) {
  a[0] = F::pack(c0[0], c0[1]);
  a[1] = F::pack(c0[2], c0[3]);
  a[2] = F::pack(c1[0], c1[1]);
  a[3] = F::pack(c1[2], c1[3]);
}

/// Sum and max over the 4 lanes of a quad (one accumulator row).
TL_DEVICE float quadSum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}
TL_DEVICE float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}

/// Whether query row t of batch b sees key s.
TL_DEVICE bool visible(const Dims &p, int b, int t, int s) {
  int diagonal = t + (p.s - p.t);
  bool seen = s < p.s && t < p.t && s >= 0 && (!p.causal || s <= diagonal) &&
              (p.window <= 0 || s > diagonal - p.window);
  if (!seen || !p.positions) {
    return seen;
  }
  long long position = p.positions[(long long)b * p.t + t];
  return (long long)s >= diagonal - (position < 0 ? 0 : position);
}

/// Whether every query row of [t0, t0 + rows) sees every key of
/// [n0, n0 + keys): all in range, no window and no document masking, and
/// with causal masking the first row sees the last key. The inner loops
/// then skip visible() (all tiles but the diagonal ones, causally).
TL_DEVICE bool allVisible(const Dims &p, int t0, int rows, int n0, int keys) {
  if (p.positions || p.window > 0 || t0 + rows > p.t || n0 + keys > p.s) {
    return false;
  }
  return !p.causal || n0 + keys - 1 <= t0 + (p.s - p.t);
}

/// The first key any of the query rows from t0 on sees (0 without a
/// window).
TL_DEVICE int keyBegin(const Dims &p, int t0) {
  if (p.window <= 0) {
    return 0;
  }
  int begin = t0 + 1 + (p.s - p.t) - p.window;
  return begin < 0 ? 0 : (begin > p.s ? p.s : begin);
}

/// One past the last query that sees any of the keys [n0, n0 + keys).
TL_DEVICE int queryEnd(const Dims &p, int n0, int keys) {
  if (p.window <= 0) {
    return p.t;
  }
  long long end = (long long)n0 + keys - (p.s - p.t) + p.window - 1;
  return end < 0 ? 0 : (end > p.t ? p.t : (int)end);
}

/// The score of query t, key s of (batch b, query head h) from the raw dot
/// product: scaled, capped, biased. `capGrad` (may be null) gets the cap's
/// derivative with respect to the scaled score.
template <typename T>
TL_DEVICE float scoreOf(const Dims &p, int b, int h, int t, int s, float dot,
                        float *capGrad) {
  float x = dot * p.scale;
  float grad = 1.0f;
  if (p.softcap > 0.0f) {
    x = p.softcap * tanhf(x / p.softcap);
    float c = x / p.softcap;
    grad = 1.0f - c * c;
  }
  if (capGrad) {
    *capGrad = grad;
  }
  if (p.alibi) {
    x += p.slopes[h] * float(s - t - (p.s - p.t));
  }
  if (p.bias) {
    i64 at = i64(b) * p.biasStride[0] + i64(h) * p.biasStride[1] +
             i64(t) * p.biasStride[2] + i64(s) * p.biasStride[3];
    x += load(static_cast<const T *>(p.bias), at);
  }
  return x;
}

/// Keys [0, end) any of the query rows [t0, t0 + rows) sees.
TL_DEVICE int keyEnd(const Dims &p, int t0, int rows) {
  if (!p.causal) {
    return p.s;
  }
  int end = t0 + rows + (p.s - p.t);
  return end < 0 ? 0 : (end > p.s ? p.s : end);
}

/// The first query row and the head of a query-major block. blockIdx.x
/// runs over the heads fastest, then over the query tiles, the costliest
/// first (with causal masking the last tiles see the most keys), so the
/// blocks dispatched last are the cheap ones.
TL_DEVICE void queryBlock(const Dims &p, int &t0, int &h) {
  int tiles = (p.t + kBlockRows - 1) / kBlockRows;
  int order = int(blockIdx.x / unsigned(p.hq));
  h = int(blockIdx.x % unsigned(p.hq));
  t0 = (p.causal ? tiles - 1 - order : order) * kBlockRows;
}

//===----------------------------------------------------------------------===//
// Forward (and the backward's statistics pass)
//===----------------------------------------------------------------------===//

// Shared memory: K and V tiles, kTileRows x kRowWords<HD> words each (Q is
// staged through the K tile once and then held as A fragments in
// registers). Per warp, registers hold Q (HD/4 words), the scores of one
// tile (32 floats) and O (HD/2 floats).
template <typename F, typename T, int HD, bool kStats>
TL_DEVICE void forward(const T *__restrict__ q, const T *__restrict__ k,
                       const T *__restrict__ v, T *__restrict__ y,
                       const T *__restrict__ dout, float *__restrict__ stats,
                       Dims p) {
  constexpr int w = kRowWords<HD>;
  constexpr int kSteps = HD / 16, outTiles = HD / 8, keyTiles = kTileRows / 8;
  u32 *kTile = dynamicShared<u32>();
  u32 *vTile = kTile + kTileRows * w;
  int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  int g = lane / 4, tq = lane % 4;
  int t0, h, b = blockIdx.z;
  queryBlock(p, t0, h);
  i64 bh = i64(b) * p.hq + h;
  i64 kvh = i64(b) * p.hkv + h / (p.hq / p.hkv);
  int rows = p.t - t0 < kBlockRows ? p.t - t0 : kBlockRows;

  stageRows<F, T, HD>(kTile, q + (bh * p.t + t0) * p.d, kBlockRows, rows, p.d);
  __syncthreads();
  u32 qa[kSteps][4];
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    loadA<HD>(qa[ks], kTile, 16 * warp, ks);
  }
  __syncthreads();

  // Rows rowA = t0 + 16 warp + g and rowA + 8 are this lane's.
  int rowA = t0 + 16 * warp + g;
  float o[outTiles][4];
#pragma unroll
  for (int j = 0; j < outTiles; ++j) {
    o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  }
  float m[2] = {negativeInfinity(), negativeInfinity()};
  float l[2] = {0.0f, 0.0f}; // this lane's share of the row sums
  const T *kp = k + kvh * p.s * p.d;
  const T *vp = v + kvh * p.s * p.dv;
  int end = keyEnd(p, t0, kBlockRows);
  for (int n0 = keyBegin(p, t0); n0 < end; n0 += kTileRows) {
    int keys = end - n0 < kTileRows ? end - n0 : kTileRows;
    stageRows<F, T, HD>(kTile, kp + i64(n0) * p.d, kTileRows, keys, p.d);
    stageRows<F, T, HD>(vTile, vp + i64(n0) * p.dv, kTileRows, keys, p.dv);
    __syncthreads();

    float s[keyTiles][4];
#pragma unroll
    for (int j = 0; j < keyTiles; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks) {
        u32 bf[2];
        loadBTransposed<HD>(bf, kTile, 8 * j, ks);
        F::mma(s[j], qa[ks], bf);
      }
    }
    float mx[2] = {negativeInfinity(), negativeInfinity()};
    bool all = allVisible(p, t0, kBlockRows, n0, kTileRows);
#pragma unroll
    for (int j = 0; j < keyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int key = n0 + 8 * j + 2 * tq + (e & 1);
        int row = rowA + 8 * (e >> 1);
        float x = all || visible(p, b, row, key)
                      ? scoreOf<T>(p, b, h, row, key, s[j][e], nullptr)
                      : negativeInfinity();
        s[j][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    }
    float shift[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mNew = fmaxf(m[r], quadMax(mx[r]));
      // A row that has seen no key yet keeps max -inf; shifting by 0 then
      // turns its masked scores into exp(-inf) = 0 instead of NaN.
      shift[r] = mNew == negativeInfinity() ? 0.0f : mNew;
      float alpha = __expf(m[r] - shift[r]);
      m[r] = mNew;
      l[r] *= alpha;
#pragma unroll
      for (int j = 0; j < outTiles; ++j) {
        o[j][2 * r] *= alpha;
        o[j][2 * r + 1] *= alpha;
      }
    }
#pragma unroll
    for (int j = 0; j < keyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float e1 = __expf(s[j][e] - shift[e >> 1]);
        s[j][e] = e1;
        l[e >> 1] += e1;
      }
    }
#pragma unroll
    for (int kk = 0; kk < kTileRows / 16; ++kk) {
      u32 pa[4];
      packA<F>(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int j = 0; j < outTiles; ++j) {
        u32 bf[2];
        loadB<HD>(bf, vTile, 16 * kk, j);
        F::mma(o[j], pa, bf);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = quadSum(l[r]);
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    int row = rowA + 8 * r;
    i64 base = (bh * p.t + row) * p.dv;
    float delta = 0.0f;
#pragma unroll
    for (int j = 0; j < outTiles; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        int col = 8 * j + 2 * tq + c;
        float value = o[j][2 * r + c] * inv;
        if (row < p.t && col < p.dv) {
          if constexpr (kStats) {
            delta += load(dout, base + col) * value;
          } else {
            store(y, base + col, value);
          }
        }
      }
    }
    if constexpr (kStats) {
      delta = quadSum(delta);
      if (row < p.t && tq == 0) {
        float *st = stats + (bh * p.t + row) * p.statsStride;
        st[0] = sum > 0.0f ? m[r] + logf(sum) : 0.0f;
        st[1] = delta;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// dK and dV: key-major
//===----------------------------------------------------------------------===//

/// gradKeyValue's last step: this lane's dK (scaled) and dV rows of keys
/// keyA and keyA + 8. One slice writes dk, dv; several write their f32
/// partials, dk's [B, Hkv, slices, S, D] then dv's [B, Hkv, slices, S, Dv],
/// which attention_grad_kv_sum adds up.
template <typename T, int HD>
TL_DEVICE void storeKeyValueGrads(const float (&dkAcc)[HD / 8][4],
                                  const float (&dvAcc)[HD / 8][4], int keyA,
                                  int slice, int slices, i64 kvh,
                                  T *__restrict__ dk, T *__restrict__ dv,
                                  float *__restrict__ partial, const Dims &p) {
  constexpr int outTiles = HD / 8;
  const int tq = threadIdx.x % kWarpSize % 4;
  i64 rowBase = kvh * p.s;
  float *pk = nullptr, *pv = nullptr;
  if (slices > 1) {
    i64 keyRows = i64(gridDim.z) * p.hkv * slices * p.s;
    rowBase = (kvh * slices + slice) * p.s;
    pk = partial;
    pv = partial + keyRows * p.d;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int key = keyA + 8 * r;
    if (key >= p.s) {
      continue;
    }
#pragma unroll
    for (int j = 0; j < outTiles; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        int col = 8 * j + 2 * tq + c;
        float gk = dkAcc[j][2 * r + c] * p.scale, gv = dvAcc[j][2 * r + c];
        if (col < p.d) {
          i64 at = (rowBase + key) * p.d + col;
          if (pk) {
            pk[at] = gk;
          } else {
            store(dk, at, gk);
          }
        }
        if (col < p.dv) {
          i64 at = (rowBase + key) * p.dv + col;
          if (pv) {
            pv[at] = gv;
          } else {
            store(dv, at, gv);
          }
        }
      }
    }
  }
}

// Shared memory: the block's K and V (kBlockRows rows each, read as A
// fragments), a query tile of Q and dO (kTileRows rows each), and L and
// Delta of the tile's rows. Each warp works on 16 queries at a time so only
// 2 x 2 score/dP accumulators are live next to dK and dV (HD/2 floats
// each).
template <typename F, typename T, int HD>
TL_DEVICE void gradKeyValue(const T *__restrict__ dout, const T *__restrict__ q,
                            const T *__restrict__ k, const T *__restrict__ v,
                            T *__restrict__ dk, T *__restrict__ dv,
                            float *__restrict__ partial,
                            const float *__restrict__ stats, Dims p) {
  constexpr int w = kRowWords<HD>;
  constexpr int kSteps = HD / 16, outTiles = HD / 8;
  u32 *kTile = dynamicShared<u32>();
  u32 *vTile = kTile + kBlockRows * w;
  u32 *qTile = vTile + kBlockRows * w;
  u32 *doTile = qTile + kTileRows * w;
  float *lTile = reinterpret_cast<float *>(doTile + kTileRows * w);
  float *deltaTile = lTile + kTileRows;
  int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  int g = lane / 4, tq = lane % 4;
  // blockIdx.x runs over the slices fastest, then the kv heads, then the
  // key tiles from the first: with causal masking the first keys are seen
  // by the most queries, so the costliest blocks are dispatched first.
  int slices = p.kvSplits > 1 ? p.kvSplits : 1;
  int slice = int(blockIdx.x % unsigned(slices));
  int rest = int(blockIdx.x / unsigned(slices));
  int hk = rest % p.hkv, n0 = rest / p.hkv * kBlockRows, b = blockIdx.z;
  i64 kvh = i64(b) * p.hkv + hk;
  int group = p.hq / p.hkv, perSlice = group / slices;
  int keys = p.s - n0 < kBlockRows ? p.s - n0 : kBlockRows;

  stageRows<F, T, HD>(kTile, k + (kvh * p.s + n0) * p.d, kBlockRows, keys, p.d);
  stageRows<F, T, HD>(vTile, v + (kvh * p.s + n0) * p.dv, kBlockRows, keys,
                      p.dv);

  float dkAcc[outTiles][4], dvAcc[outTiles][4];
#pragma unroll
  for (int j = 0; j < outTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dkAcc[j][e] = 0.0f;
      dvAcc[j][e] = 0.0f;
    }
  }
  // Keys keyA = n0 + 16 warp + g and keyA + 8 are this lane's.
  int keyA = n0 + 16 * warp + g;
  // The first query that sees key n0; earlier tiles see none of the block.
  int first = p.causal ? n0 - (p.s - p.t) : 0;
  first = first < 0 ? 0 : first - first % kTileRows;
  // One past the last query that sees the block's keys (a window ends it).
  int last = queryEnd(p, n0, keys);
  int headBegin = hk * group + slice * perSlice;
  for (int h = headBegin; h < headBegin + perSlice; ++h) {
    i64 bh = i64(b) * p.hq + h;
    for (int t0 = first; t0 < last; t0 += kTileRows) {
      int rows = p.t - t0 < kTileRows ? p.t - t0 : kTileRows;
      // The barrier ending the previous step (or, on the first step, the
      // K/V staging above) orders these stores after every read.
      __syncthreads();
      stageRows<F, T, HD>(qTile, q + (bh * p.t + t0) * p.d, kTileRows, rows,
                          p.d);
      stageRows<F, T, HD>(doTile, dout + (bh * p.t + t0) * p.dv, kTileRows,
                          rows, p.dv);
      for (int i = threadIdx.x; i < kTileRows; i += blockDim.x) {
        const float *st = stats + (bh * p.t + t0 + i) * p.statsStride;
        lTile[i] = i < rows ? st[0] : 0.0f;
        deltaTile[i] = i < rows ? st[1] : 0.0f;
      }
      __syncthreads();

      bool all = allVisible(p, t0, kTileRows, n0, kBlockRows);
      for (int c = 0; c < kTileRows / 16; ++c) {
        // S^T and dP^T for this warp's 16 keys x 16 queries.
        float sT[2][4], dpT[2][4];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            sT[j][e] = 0.0f;
            dpT[j][e] = 0.0f;
          }
        }
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks) {
          u32 ka[4], va[4];
          loadA<HD>(ka, kTile, 16 * warp, ks);
          loadA<HD>(va, vTile, 16 * warp, ks);
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            u32 bf[2];
            loadBTransposed<HD>(bf, qTile, 16 * c + 8 * j, ks);
            F::mma(sT[j], ka, bf);
            loadBTransposed<HD>(bf, doTile, 16 * c + 8 * j, ks);
            F::mma(dpT[j], va, bf);
          }
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int col = 16 * c + 8 * j + 2 * tq + (e & 1);
            int key = keyA + 8 * (e >> 1);
            float capGrad = 1.0f;
            float prob =
                all || visible(p, b, t0 + col, key)
                    ? __expf(scoreOf<T>(p, b, h, t0 + col, key, sT[j][e],
                                        &capGrad) -
                             lTile[col])
                    : 0.0f;
            sT[j][e] = prob;
            dpT[j][e] = prob * (dpT[j][e] - deltaTile[col]) * capGrad;
          }
        }
        u32 pa[4], dsa[4];
        packA<F>(pa, sT[0], sT[1]);
        packA<F>(dsa, dpT[0], dpT[1]);
#pragma unroll
        for (int j = 0; j < outTiles; ++j) {
          u32 bf[2];
          loadB<HD>(bf, doTile, 16 * c, j);
          F::mma(dvAcc[j], pa, bf);
          loadB<HD>(bf, qTile, 16 * c, j);
          F::mma(dkAcc[j], dsa, bf);
        }
      }
    }
  }

  storeKeyValueGrads<T, HD>(dkAcc, dvAcc, keyA, slice, slices, kvh, dk, dv,
                            partial, p);
}

/// dk and dv as the sums of attention_grad_kv's slices (p.kvSplits > 1), in
/// slice order: a grid-stride loop over dk's elements, then dv's.
template <typename T>
TL_DEVICE void sumKeyValueSlices(const float *__restrict__ partial,
                                 T *__restrict__ dk, T *__restrict__ dv,
                                 int batch, Dims p) {
  int slices = p.kvSplits;
  i64 kvRows = i64(batch) * p.hkv, keys = kvRows * p.s;
  i64 nk = keys * p.d, n = nk + keys * p.dv;
  const float *pv = partial + nk * slices;
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    bool isKey = i < nk;
    i64 j = isKey ? i : i - nk;
    int cols = isKey ? p.d : p.dv;
    i64 row = j / cols, col = j % cols;
    i64 kv = row / p.s, s = row % p.s;
    const float *src = (isKey ? partial : pv) +
                       ((kv * slices) * p.s + s) * cols + col;
    float sum = 0.0f;
    for (int slice = 0; slice < slices; ++slice) {
      sum += src[i64(slice) * p.s * cols];
    }
    if (isKey) {
      store(dk, j, sum);
    } else {
      store(dv, j, sum);
    }
  }
}

//===----------------------------------------------------------------------===//
// dQ: query-major
//===----------------------------------------------------------------------===//

// Shared memory: the block's Q and dO (kBlockRows rows each, read as A
// fragments) and a key tile of K and V. Registers: the scores and dP of one
// tile (32 floats each) and dQ (HD/2 floats).
template <typename F, typename T, int HD>
TL_DEVICE void gradQuery(const T *__restrict__ dout, const T *__restrict__ q,
                         const T *__restrict__ k, const T *__restrict__ v,
                         T *__restrict__ dq, const float *stats, Dims p) {
  constexpr int w = kRowWords<HD>;
  constexpr int kSteps = HD / 16, outTiles = HD / 8, keyTiles = kTileRows / 8;
  u32 *qTile = dynamicShared<u32>();
  u32 *doTile = qTile + kBlockRows * w;
  u32 *kTile = doTile + kBlockRows * w;
  u32 *vTile = kTile + kTileRows * w;
  int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  int g = lane / 4, tq = lane % 4;
  int t0, h, b = blockIdx.z;
  queryBlock(p, t0, h);
  i64 bh = i64(b) * p.hq + h;
  i64 kvh = i64(b) * p.hkv + h / (p.hq / p.hkv);
  int rows = p.t - t0 < kBlockRows ? p.t - t0 : kBlockRows;
  int rowA = t0 + 16 * warp + g;

  // The statistics may live in this block's own dq rows: read them all
  // before the barrier, overwrite them only at the end.
  float lse[2], delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int row = rowA + 8 * r;
    const float *st = stats + (bh * p.t + row) * p.statsStride;
    lse[r] = row < p.t ? st[0] : 0.0f;
    delta[r] = row < p.t ? st[1] : 0.0f;
  }
  stageRows<F, T, HD>(qTile, q + (bh * p.t + t0) * p.d, kBlockRows, rows, p.d);
  stageRows<F, T, HD>(doTile, dout + (bh * p.t + t0) * p.dv, kBlockRows, rows,
                      p.dv);
  __syncthreads();

  float dqAcc[outTiles][4];
#pragma unroll
  for (int j = 0; j < outTiles; ++j) {
    dqAcc[j][0] = dqAcc[j][1] = dqAcc[j][2] = dqAcc[j][3] = 0.0f;
  }
  const T *kp = k + kvh * p.s * p.d;
  const T *vp = v + kvh * p.s * p.dv;
  int end = keyEnd(p, t0, kBlockRows);
  for (int n0 = keyBegin(p, t0); n0 < end; n0 += kTileRows) {
    int keys = end - n0 < kTileRows ? end - n0 : kTileRows;
    stageRows<F, T, HD>(kTile, kp + i64(n0) * p.d, kTileRows, keys, p.d);
    stageRows<F, T, HD>(vTile, vp + i64(n0) * p.dv, kTileRows, keys, p.dv);
    __syncthreads();

    float s[keyTiles][4], dp[keyTiles][4];
#pragma unroll
    for (int j = 0; j < keyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = 0.0f;
        dp[j][e] = 0.0f;
      }
    }
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      u32 qa[4], da[4];
      loadA<HD>(qa, qTile, 16 * warp, ks);
      loadA<HD>(da, doTile, 16 * warp, ks);
#pragma unroll
      for (int j = 0; j < keyTiles; ++j) {
        u32 bf[2];
        loadBTransposed<HD>(bf, kTile, 8 * j, ks);
        F::mma(s[j], qa, bf);
        loadBTransposed<HD>(bf, vTile, 8 * j, ks);
        F::mma(dp[j], da, bf);
      }
    }
    bool all = allVisible(p, t0, kBlockRows, n0, kTileRows);
#pragma unroll
    for (int j = 0; j < keyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int r = e >> 1;
        int key = n0 + 8 * j + 2 * tq + (e & 1);
        int row = rowA + 8 * r;
        float capGrad = 1.0f;
        float prob =
            all || visible(p, b, row, key)
                ? __expf(scoreOf<T>(p, b, h, row, key, s[j][e], &capGrad) -
                         lse[r])
                : 0.0f;
        dp[j][e] = prob * (dp[j][e] - delta[r]) * capGrad;
      }
    }
#pragma unroll
    for (int kk = 0; kk < kTileRows / 16; ++kk) {
      u32 dsa[4];
      packA<F>(dsa, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
      for (int j = 0; j < outTiles; ++j) {
        u32 bf[2];
        loadB<HD>(bf, kTile, 16 * kk, j);
        F::mma(dqAcc[j], dsa, bf);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int row = rowA + 8 * r;
    if (row >= p.t) {
      continue;
    }
#pragma unroll
    for (int j = 0; j < outTiles; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        int col = 8 * j + 2 * tq + c;
        if (col < p.d) {
          store(dq, (bh * p.t + row) * p.d + col,
                dqAcc[j][2 * r + c] * p.scale);
        }
      }
    }
  }
}

} // namespace attn
} // namespace tl

// Entry points: grid (ceil(T / 64) Hq, 1, B) for the query-major kernels
// and (ceil(S / 64) Hkv kvSplits, 1, B) for attention_grad_kv (the block
// orders: queryBlock, gradKeyValue); 128 threads; the dynamic shared memory
// the table in runtime/cuda/AttentionLaunchers.cpp gives.
// F is the tensor-core format (tl::attn::Bf16Format or HalfFormat).
#define TL_ATTENTION_ENTRY_POINTS(HD, SUFFIX, T, F)                            \
  TL_GLOBAL void tailor_attention_d##HD##_##SUFFIX(                            \
      const T *q, const T *k, const T *v, T *y, tl::attn::Dims p) {            \
    tl::attn::forward<F, T, HD, false>(q, k, v, y, nullptr, nullptr, p);       \
  }                                                                            \
  TL_REGISTER(tailor_attention_d##HD##_##SUFFIX)                               \
  TL_GLOBAL void tailor_attention_grad_stats_d##HD##_##SUFFIX(                 \
      const T *dout, const T *q, const T *k, const T *v, float *stats,         \
      tl::attn::Dims p) {                                                      \
    tl::attn::forward<F, T, HD, true>(q, k, v, nullptr, dout, stats, p);       \
  }                                                                            \
  TL_REGISTER(tailor_attention_grad_stats_d##HD##_##SUFFIX)                    \
  TL_GLOBAL void tailor_attention_grad_kv_d##HD##_##SUFFIX(                    \
      const T *dout, const T *q, const T *k, const T *v, T *dk, T *dv,         \
      float *partial, const float *stats, tl::attn::Dims p) {                  \
    tl::attn::gradKeyValue<F, T, HD>(dout, q, k, v, dk, dv, partial, stats,    \
                                     p);                                       \
  }                                                                            \
  TL_REGISTER(tailor_attention_grad_kv_d##HD##_##SUFFIX)                       \
  TL_GLOBAL void tailor_attention_grad_q_d##HD##_##SUFFIX(                     \
      const T *dout, const T *q, const T *k, const T *v, T *dq,                \
      const float *stats, tl::attn::Dims p) {                                  \
    tl::attn::gradQuery<F, T, HD>(dout, q, k, v, dq, stats, p);                \
  }                                                                            \
  TL_REGISTER(tailor_attention_grad_q_d##HD##_##SUFFIX)

// attention_grad_kv_sum: any grid (a grid-stride loop), any block size.
#define TL_ATTENTION_SUM_ENTRY_POINT(SUFFIX, T)                                \
  TL_GLOBAL void tailor_attention_grad_kv_sum_##SUFFIX(                        \
      const float *partial, T *dk, T *dv, int batch, tl::attn::Dims p) {       \
    tl::attn::sumKeyValueSlices<T>(partial, dk, dv, batch, p);                 \
  }                                                                            \
  TL_REGISTER(tailor_attention_grad_kv_sum_##SUFFIX)

#endif // TAILOR_CODEGEN_CUDA_ATTENTIONKERNELS_CUH
