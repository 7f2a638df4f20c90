//===- DataMovementKernels.cu - copies, embedding, rope --------*- CUDA -*-===//
//
// Device code of runtime/cuda/DataMovementLaunchers.cpp. Kernels that only
// move bytes take elements as unsigned integers of their size (1, 2, 4, 8
// bytes, and 16-byte units for row copies whose pitches and pointers allow
// it), so there is one instantiation per size rather than per dtype and
// values pass through bit for bit, as in runtime/cpu/DataMovementKernels.cpp.
//
//   - gather: y (contiguous) = x read through per-dimension element strides.
//     transpose, slice and broadcast all reduce to it on the host, which
//     also merges dimensions that stay contiguous. When x's unit-stride
//     dimension is not y's innermost (a transpose proper), 32 x 32 tiles go
//     through shared memory so both the read and the write are coalesced;
//     otherwise one thread per element, with neighbouring threads reading
//     neighbouring (or equally strided) elements, in units of up to 16
//     bytes when x's runs are contiguous (the launcher widens them).
//   - copy_rows: a 2-D copy of `rows` runs between two pitches; concat and
//     split launch it once per piece.
//   - embedding: one block per token row, the row copied in the widest unit
//     its size allows.
//   - rope: one thread per rotated pair, f32 arithmetic on f32 or bf16.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

namespace tl::move {

/// Dimensions a gather keeps after the launcher merged its neighbours.
constexpr int kMaxRank = 8;
constexpr int kTile = 32;
constexpr int kTileRows = 8;

/// 16 bytes moved as one vector load and store.
struct alignas(16) U128 {
  u64 lo, hi;
};

/// y (contiguous, `extent` per dimension) = x at sum(index * stride).
struct Gather {
  int rank;
  long long extent[kMaxRank];
  long long stride[kMaxRank];
};

// One thread per y element. The index splits into coordinates with 32-bit
// division when y has fewer than 2^31 elements (every realistic launch; a
// 64-bit division costs several times more), offsets stay 64-bit.
template <typename U>
TL_DEVICE void gatherStrided(const U *x, U *y, long long total, Gather g) {
  if (total <= 0x7fffffffLL) {
    for (long long i = globalThread(); i < total; i += gridThreads()) {
      u32 rest = u32(i);
      long long offset = 0;
      for (int d = g.rank - 1; d >= 0; --d) {
        u32 e = u32(g.extent[d]);
        offset += (long long)(rest % e) * g.stride[d];
        rest /= e;
      }
      y[i] = x[offset];
    }
    return;
  }
  for (long long i = globalThread(); i < total; i += gridThreads()) {
    long long rest = i, offset = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      offset += (rest % g.extent[d]) * g.stride[d];
      rest /= g.extent[d];
    }
    y[i] = x[offset];
  }
}

/// A transpose proper: y [outer..., a, ..., c] where x walks `a` with unit
/// stride and `c` (y's innermost) with `colStride`; `outer` lists every
/// other dimension with its x and y strides.
struct Tiles {
  int rank;
  long long extent[kMaxRank];
  long long srcStride[kMaxRank];
  long long dstStride[kMaxRank];
  long long rowsA, cols, colStride, rowStride;
};

// Block (32, 8), tile 32 x 32: reads x along `a` (32 neighbouring elements
// per warp), writes y along `c`, the padding column keeping the transposed
// shared-memory reads free of bank conflicts for 4-byte elements.
template <typename U> TL_DEVICE void gatherTiled(const U *x, U *y, Tiles t) {
  __shared__ U tile[kTile][kTile + 1];
  const long long tilesA = (t.rowsA + kTile - 1) / kTile;
  const long long tilesC = (t.cols + kTile - 1) / kTile;
  long long outer = 1;
  for (int d = 0; d < t.rank; ++d) {
    outer *= t.extent[d];
  }
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (long long task = blockIdx.x; task < outer * tilesA * tilesC;
       task += gridDim.x) {
    long long tc = task % tilesC, rest = task / tilesC;
    long long ta = rest % tilesA;
    rest /= tilesA;
    long long src = 0, dst = 0;
    for (int d = t.rank - 1; d >= 0; --d) {
      long long i = rest % t.extent[d];
      rest /= t.extent[d];
      src += i * t.srcStride[d];
      dst += i * t.dstStride[d];
    }
    long long a0 = ta * kTile, c0 = tc * kTile;
    for (int j = ty; j < kTile; j += kTileRows) {
      long long a = a0 + tx, c = c0 + j;
      if (a < t.rowsA && c < t.cols) {
        tile[j][tx] = x[src + a + c * t.colStride];
      }
    }
    __syncthreads();
    for (int j = ty; j < kTile; j += kTileRows) {
      long long a = a0 + j, c = c0 + tx;
      if (a < t.rowsA && c < t.cols) {
        y[dst + a * t.rowStride + c] = tile[tx][j];
      }
    }
    __syncthreads();
  }
}

/// dst[r * dstPitch + i] = src[r * srcPitch + i] for r < rows, i < cols
/// (pitches and counts in units of U).
template <typename U>
TL_DEVICE void copyRows(const U *src, long long srcPitch, U *dst,
                        long long dstPitch, long long rows, long long cols) {
  for (long long i = globalThread(); i < rows * cols; i += gridThreads()) {
    long long r = i / cols, c = i % cols;
    dst[r * dstPitch + c] = src[r * srcPitch + c];
  }
}

// One block per id, its threads copying the table row in units of U. An id
// outside [0, vocab) writes a zero row: the kernel cannot report it, and
// the trainer validates ids on the host before they are uploaded, so this
// only keeps a bad id from reading outside the table.
template <typename I, typename U>
TL_DEVICE void embedding(const U *table, const I *ids, U *y, long long n,
                         long long vocab, long long units) {
  for (long long i = blockIdx.x; i < n; i += gridDim.x) {
    long long id = (long long)ids[i];
    U *out = y + i * units;
    if (id < 0 || id >= vocab) {
      for (long long k = threadIdx.x; k < units; k += blockDim.x) {
        out[k] = U();
      }
      continue;
    }
    const U *row = table + id * units;
    for (long long k = threadIdx.x; k < units; k += blockDim.x) {
      out[k] = row[k];
    }
  }
}

// x [B, H, T, D], cos/sin [T, D] or [B, T, D] (`perBatch`), y like x; one
// thread per output pair (i, j) = (k, k + D/2), or (2k, 2k + 1) when
// interleaved, computed from both inputs at once so y may alias x:
//   y[i] = x[i] cos[i] - x[j] sin[i],  y[j] = x[j] cos[j] + x[i] sin[j]
// in the order HF's apply_rotary_pos_emb multiplies.
template <typename T, typename C>
TL_DEVICE void rope(const T *x, const C *cosT, const C *sinT, T *y,
                    long long heads, long long tokens, long long d,
                    int perBatch, int interleaved, long long pairs) {
  const long long half = d / 2;
  for (long long p = globalThread(); p < pairs; p += gridThreads()) {
    long long row = p / half, k = p % half;
    long long ti = row % tokens, bi = row / (heads * tokens);
    long long table = ((perBatch ? bi * tokens : 0) + ti) * d;
    long long i = interleaved ? 2 * k : k;
    long long j = interleaved ? 2 * k + 1 : k + half;
    long long base = row * d;
    float a = load(x, base + i), b = load(x, base + j);
    store(y, base + i, a * load(cosT, table + i) - b * load(sinT, table + i));
    store(y, base + j, b * load(cosT, table + j) + a * load(sinT, table + j));
  }
}

} // namespace tl::move

#define TL_GATHER_ENTRIES(U, SUFFIX)                                           \
  TL_GLOBAL void tailor_gather_strided_##SUFFIX(                               \
      const U *x, U *y, long long total, tl::move::Gather g) {                 \
    tl::move::gatherStrided<U>(x, y, total, g);                                \
  }                                                                            \
  TL_REGISTER(tailor_gather_strided_##SUFFIX)                                  \
  TL_GLOBAL void tailor_gather_tiled_##SUFFIX(const U *x, U *y,                \
                                              tl::move::Tiles t) {             \
    tl::move::gatherTiled<U>(x, y, t);                                         \
  }                                                                            \
  TL_REGISTER(tailor_gather_tiled_##SUFFIX)

TL_GATHER_ENTRIES(unsigned char, u8)
TL_GATHER_ENTRIES(tl::u16, u16)
TL_GATHER_ENTRIES(tl::u32, u32)
TL_GATHER_ENTRIES(tl::u64, u64)

// Contiguous runs of any dtype widen to 16-byte units when they can.
TL_GLOBAL void tailor_gather_strided_u128(const tl::move::U128 *x,
                                          tl::move::U128 *y, long long total,
                                          tl::move::Gather g) {
  tl::move::gatherStrided<tl::move::U128>(x, y, total, g);
}
TL_REGISTER(tailor_gather_strided_u128)

#define TL_COPY_ROWS_ENTRY(U, SUFFIX)                                          \
  TL_GLOBAL void tailor_copy_rows_##SUFFIX(const U *src, long long srcPitch,   \
                                           U *dst, long long dstPitch,         \
                                           long long rows, long long cols) {   \
    tl::move::copyRows<U>(src, srcPitch, dst, dstPitch, rows, cols);           \
  }                                                                            \
  TL_REGISTER(tailor_copy_rows_##SUFFIX)

TL_COPY_ROWS_ENTRY(unsigned char, u8)
TL_COPY_ROWS_ENTRY(tl::u16, u16)
TL_COPY_ROWS_ENTRY(tl::u32, u32)
TL_COPY_ROWS_ENTRY(tl::u64, u64)
TL_COPY_ROWS_ENTRY(tl::move::U128, u128)

// Suffixed with the ids' type, then the unit the rows move in.
#define TL_EMBEDDING_ENTRY(I, U, SUFFIX)                                       \
  TL_GLOBAL void tailor_embedding_##SUFFIX(const U *table, const I *ids, U *y, \
                                           long long n, long long vocab,       \
                                           long long units) {                  \
    tl::move::embedding<I, U>(table, ids, y, n, vocab, units);                 \
  }                                                                            \
  TL_REGISTER(tailor_embedding_##SUFFIX)

TL_EMBEDDING_ENTRY(int, tl::u16, i32_u16)
TL_EMBEDDING_ENTRY(int, tl::u32, i32_u32)
TL_EMBEDDING_ENTRY(int, tl::move::U128, i32_u128)
TL_EMBEDDING_ENTRY(long long, tl::u16, i64_u16)
TL_EMBEDDING_ENTRY(long long, tl::u32, i64_u32)
TL_EMBEDDING_ENTRY(long long, tl::move::U128, i64_u128)

// Suffixed with x's storage type, then the tables'.
#define TL_ROPE_ENTRY(T, C, SUFFIX)                                            \
  TL_GLOBAL void tailor_rope_##SUFFIX(                                         \
      const T *x, const C *cosT, const C *sinT, T *y, long long heads,         \
      long long tokens, long long d, int perBatch, int interleaved,            \
      long long pairs) {                                                       \
    tl::move::rope<T, C>(x, cosT, sinT, y, heads, tokens, d, perBatch,         \
                         interleaved, pairs);                                  \
  }                                                                            \
  TL_REGISTER(tailor_rope_##SUFFIX)

TL_ROPE_ENTRY(float, float, f32_f32)
TL_ROPE_ENTRY(float, tl::bf16, f32_bf16)
TL_ROPE_ENTRY(tl::bf16, float, bf16_f32)
TL_ROPE_ENTRY(tl::bf16, tl::bf16, bf16_bf16)

#undef TL_ROPE_ENTRY
#undef TL_EMBEDDING_ENTRY
#undef TL_COPY_ROWS_ENTRY
#undef TL_GATHER_ENTRIES
