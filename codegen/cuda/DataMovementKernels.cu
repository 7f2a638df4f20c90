//===- DataMovementKernels.cu - copies, gathers, scatters ------*- CUDA -*-===//
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
//
// Kernels that read indices (embedding, the gathers and scatters) or divide
// by run-time integers (mod) report a bad value in the device's error record
// (DeviceError.cuh: `error`, and `site`, which the launcher passes for the
// record) and stay inside their tensors; the runtime turns the record into
// the run error the CPU kernel gives.
//   - rope: one thread per rotated pair, f32 arithmetic on f32 or bf16.
//   - gather_elements, gather_nd (bytes, by size), scatter_elements,
//     scatter_nd (bytes for reduction none, else typed), cumsum, mod and
//     sign: see their section below.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

namespace tl::move {

/// Dimensions a gather keeps after the launcher merged its neighbours.
constexpr int kMaxRank = 8;
constexpr int kTile = 32;
constexpr int kTileRows = 8;

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
// outside [0, vocab) is reported (kEmbeddingId, by its block's thread 0)
// and writes a zero row, so it never reads outside the table; the run then
// fails as the CPU kernel's does.
template <typename I, typename U>
TL_DEVICE void embedding(const U *table, const I *ids, U *y, long long n,
                         long long vocab, long long units, ErrorRecord *error,
                         int site) {
  for (long long i = blockIdx.x; i < n; i += gridDim.x) {
    long long id = (long long)ids[i];
    U *out = y + i * units;
    if (id < 0 || id >= vocab) {
      if (threadIdx.x == 0) {
        reportError(error, kEmbeddingId, site, id, i, vocab);
      }
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

//===----------------------------------------------------------------------===//
// gather_elements, scatter_elements, gather_nd, scatter_nd, cumsum, mod, sign
//===----------------------------------------------------------------------===//
//
// Indices are i32 or i64 (`indices64` says which: one uniform branch per
// load instead of twice the entry points) and may be negative. An index
// outside [-n, n) is reported in the error record (the value, its position
// in the indices, n), and a gather writes a zero element for it and a
// scatter skips the update, so no access leaves the tensors; the run then
// fails as the CPU kernel's does. Mod by an integer 0 is reported the same
// way (and gives 0). Scatters run one thread per
// output fiber (scatter_elements: the elements of one line along `axis`;
// scatter_nd: one element of the slice, every tuple in order), so repeated
// indices combine in the CPU kernels' order with no atomics, bit for bit.

/// Shapes of the element gather/scatter: `extent` is the indices' shape,
/// `dataStride`/`indexStride` the row-major strides of data and indices.
struct ElementIndex {
  int rank, axis;
  long long axisExtent;
  long long extent[kMaxRank];
  long long dataStride[kMaxRank];
  long long indexStride[kMaxRank];
};

/// Index tuples of gather_nd/scatter_nd (see runtime/cpu TupleLayout).
struct TupleIndex {
  long long batch, tuples, k, slice, batchStride;
  long long dims[kMaxRank];
};

TL_DEVICE long long loadIndex(const void *indices, int indices64, long long i) {
  return indices64 ? ((const long long *)indices)[i]
                   : (long long)((const int *)indices)[i];
}

/// `v` normalized into [0, n), or -1 when outside [-n, n).
TL_DEVICE long long normalizeIndex(long long v, long long n) {
  if (v < -n || v >= n) {
    return -1;
  }
  return v < 0 ? v + n : v;
}

enum Reduce { kNone, kAdd, kMul, kMax, kMin };

template <int R, typename T> TL_DEVICE T combine(T old, T update) {
  if (R == kAdd) {
    return old + update;
  } else if (R == kMul) {
    return old * update;
  } else if (R == kMax) {
    return old < update ? update : old;
  } else if (R == kMin) {
    return update < old ? update : old;
  }
  return update;
}

// Integers wrap as on the CPU (unsigned arithmetic).
template <> TL_DEVICE int combine<kAdd, int>(int a, int b) {
  return int(u32(a) + u32(b));
}
template <> TL_DEVICE int combine<kMul, int>(int a, int b) {
  return int(u32(a) * u32(b));
}
template <>
TL_DEVICE long long combine<kAdd, long long>(long long a, long long b) {
  return (long long)(u64(a) + u64(b));
}
template <>
TL_DEVICE long long combine<kMul, long long>(long long a, long long b) {
  return (long long)(u64(a) * u64(b));
}

// One thread per output element.
template <typename U>
TL_DEVICE void gatherElements(const U *x, const void *indices, int indices64,
                              U *y, long long total, ElementIndex s,
                              ErrorRecord *error, int site) {
  for (long long i = globalThread(); i < total; i += gridThreads()) {
    long long rest = i, offset = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      long long c = rest % s.extent[d];
      rest /= s.extent[d];
      if (d != s.axis) {
        offset += c * s.dataStride[d];
      }
    }
    long long raw = loadIndex(indices, indices64, i);
    long long v = normalizeIndex(raw, s.axisExtent);
    if (v < 0) {
      reportError(error, kGatherElementsIndex, site, raw, i, s.axisExtent);
      y[i] = U();
      continue;
    }
    y[i] = x[offset + v * s.dataStride[s.axis]];
  }
}

// One thread per line of the indices along `axis`, updates applied in order.
template <int R, typename T>
TL_DEVICE void scatterElements(T *y, const void *indices, int indices64,
                               const T *updates, long long lines,
                               ElementIndex s, ErrorRecord *error, int site) {
  for (long long line = globalThread(); line < lines; line += gridThreads()) {
    long long rest = line, dBase = 0, iBase = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      if (d == s.axis) {
        continue;
      }
      long long c = rest % s.extent[d];
      rest /= s.extent[d];
      dBase += c * s.dataStride[d];
      iBase += c * s.indexStride[d];
    }
    for (long long k = 0; k < s.extent[s.axis]; ++k) {
      long long at = iBase + k * s.indexStride[s.axis];
      long long raw = loadIndex(indices, indices64, at);
      long long v = normalizeIndex(raw, s.axisExtent);
      if (v < 0) {
        reportError(error, kScatterElementsIndex, site, raw, at, s.axisExtent);
        continue;
      }
      T &dst = y[dBase + v * s.dataStride[s.axis]];
      dst = combine<R, T>(dst, updates[at]);
    }
  }
}

/// The slice offset of tuple g within its batch, or -1 for a bad index,
/// which is reported as `code`.
TL_DEVICE long long tupleOffset(const void *indices, int indices64, long long g,
                                const TupleIndex &t, ErrorRecord *error,
                                int code, int site) {
  long long offset = 0;
  for (long long j = 0; j < t.k; ++j) {
    long long raw = loadIndex(indices, indices64, g * t.k + j);
    long long v = normalizeIndex(raw, t.dims[j]);
    if (v < 0) {
      reportError(error, code, site, raw, g * t.k + j, t.dims[j]);
      return -1;
    }
    offset = offset * t.dims[j] + v;
  }
  return offset;
}

// One thread per output element.
template <typename U>
TL_DEVICE void gatherND(const U *x, const void *indices, int indices64, U *y,
                        long long total, TupleIndex t, ErrorRecord *error,
                        int site) {
  for (long long i = globalThread(); i < total; i += gridThreads()) {
    long long g = i / t.slice, e = i % t.slice;
    long long offset =
        tupleOffset(indices, indices64, g, t, error, kGatherNdIndex, site);
    y[i] = offset < 0
               ? U()
               : x[(g / t.tuples) * t.batchStride + offset * t.slice + e];
  }
}

// One thread per slice element, every tuple in order.
template <int R, typename T>
TL_DEVICE void scatterND(T *y, const void *indices, int indices64,
                         const T *updates, TupleIndex t, ErrorRecord *error,
                         int site) {
  for (long long e = globalThread(); e < t.slice; e += gridThreads()) {
    for (long long g = 0; g < t.batch * t.tuples; ++g) {
      long long offset =
          tupleOffset(indices, indices64, g, t, error, kScatterNdIndex, site);
      if (offset >= 0) {
        T &dst = y[(g / t.tuples) * t.batchStride + offset * t.slice + e];
        dst = combine<R, T>(dst, updates[g * t.slice + e]);
      }
    }
  }
}

// x, y [outer, n, inner]: one thread per (outer, inner) fiber, neighbouring
// threads on neighbouring inner elements (coalesced), the scan in A (the
// CPU kernel's accumulator: T, unsigned for integers).
template <typename T, typename A>
TL_DEVICE void cumsum(const T *x, T *y, long long outer, long long n,
                      long long inner, int exclusive, int reverse) {
  for (long long f = globalThread(); f < outer * inner; f += gridThreads()) {
    long long o = f / inner, c = f % inner;
    A acc = A(0);
    for (long long s = 0; s < n; ++s) {
      long long i = reverse ? n - 1 - s : s;
      long long at = (o * n + i) * inner + c;
      A v = A(x[at]);
      if (exclusive) {
        y[at] = T(acc);
        acc += v;
      } else {
        acc += v;
        y[at] = T(acc);
      }
    }
  }
}

/// Element strides of mod's two inputs per output dimension (0 where they
/// broadcast).
struct Broadcast2 {
  int rank;
  long long extent[kMaxRank];
  long long aStride[kMaxRank];
  long long bStride[kMaxRank];
};

template <typename T> TL_DEVICE T remainder(T a, T b, int fmod) {
  if (b == T(-1)) {
    return T(0);
  }
  if (b == T(0)) {
    return T(0); // integer division by zero: mod() reports it
  }
  T r = a % b;
  if (!fmod && r != 0 && ((r < 0) != (b < 0))) {
    r += b;
  }
  return r;
}
template <> TL_DEVICE float remainder<float>(float a, float b, int fmod) {
  float r = fmodf(a, b);
  if (fmod) {
    return r;
  }
  if (r != 0) {
    return (r < 0) != (b < 0) ? r + b : r;
  }
  return copysignf(0.0f, b);
}
template <> TL_DEVICE double remainder<double>(double a, double b, int fmod) {
  double r = ::fmod(a, b);
  if (fmod) {
    return r;
  }
  if (r != 0) {
    return (r < 0) != (b < 0) ? r + b : r;
  }
  return copysign(0.0, b);
}

/// Whether `b` is an integer 0 (a float 0 divides to NaN, as on the CPU).
TL_DEVICE bool zeroDivisor(int b) { return b == 0; }
TL_DEVICE bool zeroDivisor(long long b) { return b == 0; }
TL_DEVICE bool zeroDivisor(float) { return false; }
TL_DEVICE bool zeroDivisor(double) { return false; }

template <typename T>
TL_DEVICE void mod(const T *a, const T *b, T *y, long long total, Broadcast2 s,
                   int fmod, ErrorRecord *error, int site) {
  for (long long i = globalThread(); i < total; i += gridThreads()) {
    long long rest = i, oa = 0, ob = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      long long c = rest % s.extent[d];
      rest /= s.extent[d];
      oa += c * s.aStride[d];
      ob += c * s.bStride[d];
    }
    T divisor = b[ob];
    if (zeroDivisor(divisor)) {
      reportError(error, kModByZero, site, 0, ob, 0);
    }
    y[i] = remainder<T>(a[oa], divisor, fmod);
  }
}

template <typename T> TL_DEVICE void sign(const T *x, T *y, long long total) {
  for (long long i = globalThread(); i < total; i += gridThreads()) {
    T v = x[i];
    y[i] = v > T(0) ? T(1) : v < T(0) ? T(-1) : v;
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
TL_GLOBAL void tailor_gather_strided_u128(const tl::U128 *x,
                                          tl::U128 *y, long long total,
                                          tl::move::Gather g) {
  tl::move::gatherStrided<tl::U128>(x, y, total, g);
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
TL_COPY_ROWS_ENTRY(tl::U128, u128)

// Suffixed with the ids' type, then the unit the rows move in.
#define TL_EMBEDDING_ENTRY(I, U, SUFFIX)                                       \
  TL_GLOBAL void tailor_embedding_##SUFFIX(                                    \
      const U *table, const I *ids, U *y, long long n, long long vocab,        \
      long long units, tl::ErrorRecord *error, int site) {                     \
    tl::move::embedding<I, U>(table, ids, y, n, vocab, units, error, site);    \
  }                                                                            \
  TL_REGISTER(tailor_embedding_##SUFFIX)

TL_EMBEDDING_ENTRY(int, tl::u16, i32_u16)
TL_EMBEDDING_ENTRY(int, tl::u32, i32_u32)
TL_EMBEDDING_ENTRY(int, tl::U128, i32_u128)
TL_EMBEDDING_ENTRY(long long, tl::u16, i64_u16)
TL_EMBEDDING_ENTRY(long long, tl::u32, i64_u32)
TL_EMBEDDING_ENTRY(long long, tl::U128, i64_u128)

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

#define TL_INDEX_GATHER_ENTRIES(U, SUFFIX)                                     \
  TL_GLOBAL void tailor_gather_elements_##SUFFIX(                              \
      const U *x, const void *indices, int indices64, U *y, long long total,   \
      tl::move::ElementIndex s, tl::ErrorRecord *error, int site) {            \
    tl::move::gatherElements<U>(x, indices, indices64, y, total, s, error,     \
                                site);                                         \
  }                                                                            \
  TL_REGISTER(tailor_gather_elements_##SUFFIX)                                 \
  TL_GLOBAL void tailor_gather_nd_##SUFFIX(                                    \
      const U *x, const void *indices, int indices64, U *y, long long total,   \
      tl::move::TupleIndex t, tl::ErrorRecord *error, int site) {              \
    tl::move::gatherND<U>(x, indices, indices64, y, total, t, error, site);    \
  }                                                                            \
  TL_REGISTER(tailor_gather_nd_##SUFFIX)

TL_INDEX_GATHER_ENTRIES(unsigned char, u8)
TL_INDEX_GATHER_ENTRIES(tl::u16, u16)
TL_INDEX_GATHER_ENTRIES(tl::u32, u32)
TL_INDEX_GATHER_ENTRIES(tl::u64, u64)

// Suffixed with the reduction, then the type it computes in (none moves
// bytes, by size).
#define TL_SCATTER_ENTRIES(R, T, SUFFIX)                                       \
  TL_GLOBAL void tailor_scatter_elements_##SUFFIX(                             \
      T *y, const void *indices, int indices64, const T *updates,              \
      long long lines, tl::move::ElementIndex s, tl::ErrorRecord *error,       \
      int site) {                                                              \
    tl::move::scatterElements<R, T>(y, indices, indices64, updates, lines, s,  \
                                    error, site);                              \
  }                                                                            \
  TL_REGISTER(tailor_scatter_elements_##SUFFIX)                                \
  TL_GLOBAL void tailor_scatter_nd_##SUFFIX(                                   \
      T *y, const void *indices, int indices64, const T *updates,              \
      tl::move::TupleIndex t, tl::ErrorRecord *error, int site) {              \
    tl::move::scatterND<R, T>(y, indices, indices64, updates, t, error, site); \
  }                                                                            \
  TL_REGISTER(tailor_scatter_nd_##SUFFIX)

TL_SCATTER_ENTRIES(tl::move::kNone, unsigned char, none_u8)
TL_SCATTER_ENTRIES(tl::move::kNone, tl::u16, none_u16)
TL_SCATTER_ENTRIES(tl::move::kNone, tl::u32, none_u32)
TL_SCATTER_ENTRIES(tl::move::kNone, tl::u64, none_u64)
#define TL_SCATTER_TYPED(R, NAME)                                              \
  TL_SCATTER_ENTRIES(R, float, NAME##_f32)                                     \
  TL_SCATTER_ENTRIES(R, double, NAME##_f64)                                    \
  TL_SCATTER_ENTRIES(R, int, NAME##_i32)                                       \
  TL_SCATTER_ENTRIES(R, long long, NAME##_i64)
TL_SCATTER_TYPED(tl::move::kAdd, add)
TL_SCATTER_TYPED(tl::move::kMul, mul)
TL_SCATTER_TYPED(tl::move::kMax, max)
TL_SCATTER_TYPED(tl::move::kMin, min)

#define TL_ARITH_ENTRIES(T, A, SUFFIX)                                         \
  TL_GLOBAL void tailor_cumsum_##SUFFIX(const T *x, T *y, long long outer,     \
                                        long long n, long long inner,          \
                                        int exclusive, int reverse) {          \
    tl::move::cumsum<T, A>(x, y, outer, n, inner, exclusive, reverse);         \
  }                                                                            \
  TL_REGISTER(tailor_cumsum_##SUFFIX)                                          \
  TL_GLOBAL void tailor_mod_##SUFFIX(                                          \
      const T *a, const T *b, T *y, long long total, tl::move::Broadcast2 s,   \
      int fmod, tl::ErrorRecord *error, int site) {                            \
    tl::move::mod<T>(a, b, y, total, s, fmod, error, site);                    \
  }                                                                            \
  TL_REGISTER(tailor_mod_##SUFFIX)                                             \
  TL_GLOBAL void tailor_sign_##SUFFIX(const T *x, T *y, long long total) {     \
    tl::move::sign<T>(x, y, total);                                            \
  }                                                                            \
  TL_REGISTER(tailor_sign_##SUFFIX)

TL_ARITH_ENTRIES(float, float, f32)
TL_ARITH_ENTRIES(double, double, f64)
TL_ARITH_ENTRIES(int, tl::u32, i32)
TL_ARITH_ENTRIES(long long, tl::u64, i64)

#undef TL_ARITH_ENTRIES
#undef TL_SCATTER_TYPED
#undef TL_SCATTER_ENTRIES
#undef TL_INDEX_GATHER_ENTRIES
#undef TL_ROPE_ENTRY
#undef TL_EMBEDDING_ENTRY
#undef TL_COPY_ROWS_ENTRY
#undef TL_GATHER_ENTRIES
