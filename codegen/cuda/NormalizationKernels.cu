//===- NormalizationKernels.cu - reductions, softmax, norms ---*- CUDA -*-===//
//
// Device code of runtime/cuda/NormalizationLaunchers.cpp. Every kernel reads
// its storage type (f32 or bf16 through tl::load, or i32/i64 for integer
// reductions) and computes in f32 (or 64-bit integers), like the CPU
// kernels in runtime/cpu/{Reduction,Normalization}Kernels.cpp it must match.
//
// Layout: the launchers reduce every case to rows of contiguous elements
// ([rows, len]) or to columns ([outer, len, inner] with the reduced or
// normalized axis in the middle), so the kernels only see those two shapes
// plus one generic odometer walk for reductions over interleaved axes.
// Rows go to one warp (short rows, several per block) or one block (long
// rows); columns go to one thread each so a warp reads 32 neighbouring
// columns of a row with one coalesced transaction.
//
// Precision: f32 accumulation with a fixed shuffle tree (deterministic for
// a given launch shape; no atomics); integer sums wrap in 64 bits, a mean
// of integers truncates toward zero; max keeps NaN once seen (torch.max).
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

namespace tl::norm {

/// Per-thread elements the norm kernels keep in registers: rows up to
/// 8 * blockDim.x (4096 at the launchers' 512 threads; 1024 threads cannot
/// have the registers this needs) read x from memory once.
constexpr int kCached = 8;
/// Reductions over columns split the reduced extent over this many rows of
/// threads (blockDim.y), each warp covering 32 neighbouring columns.
constexpr int kColumnWarps = 8;
/// Merged dimensions of the generic reduction walk.
constexpr int kMaxRank = 8;

TL_DEVICE float negInf() { return bitsFloat(0xff800000u); }

/// max that keeps a NaN once seen, so the combination order does not matter.
TL_DEVICE float maxNan(float acc, float v) {
  return (v != v || v > acc) ? v : acc;
}

TL_DEVICE float shflXor(float v, int offset) {
  return __shfl_xor_sync(kFullMask, v, offset);
}
TL_DEVICE long long shflXor(long long v, int offset) {
  u32 lo = __shfl_xor_sync(kFullMask, u32(u64(v)), offset);
  u32 hi = __shfl_xor_sync(kFullMask, u32(u64(v) >> 32), offset);
  return (long long)((u64(hi) << 32) | lo);
}
TL_DEVICE u64 shflXor(u64 v, int offset) {
  return u64(shflXor((long long)v, offset));
}

//===----------------------------------------------------------------------===//
// Reductions: an accumulator per storage type and op.
//===----------------------------------------------------------------------===//

enum Op { kSum = 0, kMean = 1, kMax = 2 };

/// Float storage (f32, bf16): an f32 accumulator.
template <int O, typename T> struct Reducer {
  typedef float Acc;
  static TL_DEVICE Acc identity() { return O == kMax ? negInf() : 0.0f; }
  static TL_DEVICE Acc read(const T *x, i64 i) { return load(x, i); }
  static TL_DEVICE Acc combine(Acc a, Acc b) {
    return O == kMax ? maxNan(a, b) : a + b;
  }
  static TL_DEVICE void write(T *y, i64 i, Acc acc, long long count) {
    store(y, i, O == kMean ? acc / float(count) : acc);
  }
};

/// Integer sums and means: 64-bit wrapping accumulation, as the CPU does.
template <int O, typename T> struct IntSumReducer {
  typedef u64 Acc;
  static TL_DEVICE Acc identity() { return 0; }
  static TL_DEVICE Acc read(const T *x, i64 i) { return u64((long long)x[i]); }
  static TL_DEVICE Acc combine(Acc a, Acc b) { return a + b; }
  static TL_DEVICE void write(T *y, i64 i, Acc acc, long long count) {
    if (O == kMean) {
      y[i] = count ? T((long long)acc / count) : T(0);
    } else {
      y[i] = T((long long)acc);
    }
  }
};

template <typename T> struct IntMaxReducer {
  typedef long long Acc;
  static TL_DEVICE Acc identity() { return -9223372036854775807LL - 1; }
  static TL_DEVICE Acc read(const T *x, i64 i) { return (long long)x[i]; }
  static TL_DEVICE Acc combine(Acc a, Acc b) { return b > a ? b : a; }
  static TL_DEVICE void write(T *y, i64 i, Acc acc, long long) {
    y[i] = T(acc);
  }
};

template <> struct Reducer<kSum, int> : IntSumReducer<kSum, int> {};
template <> struct Reducer<kMean, int> : IntSumReducer<kMean, int> {};
template <> struct Reducer<kMax, int> : IntMaxReducer<int> {};
template <> struct Reducer<kSum, long long> : IntSumReducer<kSum, long long> {};
template <>
struct Reducer<kMean, long long> : IntSumReducer<kMean, long long> {};
template <> struct Reducer<kMax, long long> : IntMaxReducer<long long> {};

template <typename R> TL_DEVICE typename R::Acc warpReduce(typename R::Acc v) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    v = R::combine(v, shflXor(v, offset));
  }
  return v;
}

// Rows: x [rows, len] -> y [rows]. blockDim is either (32, rowsPerBlock),
// a warp per row for short rows, or (threads, 1), a block per row with the
// warps' partials combined through shared memory. Threads stride over the
// row so each warp load is one contiguous segment.
template <int O, typename T>
TL_DEVICE void reduceRows(const T *x, T *y, long long rows, long long len,
                          long long count) {
  typedef Reducer<O, T> R;
  typedef typename R::Acc Acc;
  __shared__ Acc partial[32];
  const int warps = blockDim.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  // Every thread of a block runs the same trips (the barriers below need
  // that), so the loop walks the block's first row.
  for (long long first = i64(blockIdx.x) * blockDim.y; first < rows;
       first += i64(gridDim.x) * blockDim.y) {
    long long row = first + threadIdx.y;
    Acc acc = R::identity();
    if (row < rows) {
      const T *xr = x + row * len;
      for (long long i = threadIdx.x; i < len; i += blockDim.x) {
        acc = R::combine(acc, R::read(xr, i));
      }
    }
    acc = warpReduce<R>(acc);
    if (warps > 1) {
      if (lane == 0) {
        partial[warp] = acc;
      }
      __syncthreads();
      acc = partial[0];
      for (int w = 1; w < warps; ++w) {
        acc = R::combine(acc, partial[w]);
      }
      __syncthreads();
    }
    if (threadIdx.x == 0 && row < rows) {
      R::write(y, row, acc, count);
    }
  }
}

// Columns: x [outer, len, inner] -> y [outer, inner]. Block (32, 8): the
// 32 threads of a warp take neighbouring columns, the 8 warps split the
// reduced extent, and shared memory combines the 8 partials of a column
// in a fixed order.
template <int O, typename T>
TL_DEVICE void reduceColumns(const T *x, T *y, long long outer, long long len,
                             long long inner, long long count) {
  typedef Reducer<O, T> R;
  typedef typename R::Acc Acc;
  __shared__ Acc partial[kColumnWarps][kWarpSize + 1];
  const long long tiles = (inner + kWarpSize - 1) / kWarpSize;
  for (long long task = blockIdx.x; task < outer * tiles; task += gridDim.x) {
    long long o = task / tiles;
    long long c = (task % tiles) * kWarpSize + threadIdx.x;
    Acc acc = R::identity();
    if (c < inner) {
      const T *xo = x + o * len * inner + c;
      for (long long l = threadIdx.y; l < len; l += blockDim.y) {
        acc = R::combine(acc, R::read(xo, l * inner));
      }
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < inner) {
      for (int w = 1; w < int(blockDim.y); ++w) {
        acc = R::combine(acc, partial[w][threadIdx.x]);
      }
      R::write(y, o * inner + c, acc, count);
    }
    __syncthreads();
  }
}

/// x's merged dimensions for the generic walk: extents, element strides
/// and which are reduced. Passed by value.
struct ReduceWalk {
  int rank;
  int reduced[kMaxRank];
  long long extent[kMaxRank];
  long long stride[kMaxRank];
};

// Interleaved kept and reduced axes ([A, R1, B, R2]): one thread per output
// walks its reduced elements with an odometer. No lowering produces this
// for a hot op, so it favours simplicity over coalescing.
template <int O, typename T>
TL_DEVICE void reduceGeneric(const T *x, T *y, long long outputs,
                             long long count, ReduceWalk walk) {
  typedef Reducer<O, T> R;
  for (long long o = globalThread(); o < outputs; o += gridThreads()) {
    long long rest = o, base = 0;
    for (int d = walk.rank - 1; d >= 0; --d) {
      if (!walk.reduced[d]) {
        base += (rest % walk.extent[d]) * walk.stride[d];
        rest /= walk.extent[d];
      }
    }
    long long index[kMaxRank];
    for (int d = 0; d < kMaxRank; ++d) {
      index[d] = 0;
    }
    typename R::Acc acc = R::identity();
    long long offset = base;
    for (long long k = 0; k < count; ++k) {
      acc = R::combine(acc, R::read(x, offset));
      for (int d = walk.rank - 1; d >= 0; --d) {
        if (!walk.reduced[d]) {
          continue;
        }
        offset += walk.stride[d];
        if (++index[d] < walk.extent[d]) {
          break;
        }
        offset -= index[d] * walk.stride[d];
        index[d] = 0;
      }
    }
    R::write(y, o, acc, count);
  }
}

} // namespace tl::norm

#define TL_REDUCE_ENTRIES(OP, NAME, T, SUFFIX)                                 \
  TL_GLOBAL void tailor_##NAME##_rows_##SUFFIX(                                \
      const T *x, T *y, long long rows, long long len, long long count) {      \
    tl::norm::reduceRows<OP, T>(x, y, rows, len, count);                       \
  }                                                                            \
  TL_REGISTER(tailor_##NAME##_rows_##SUFFIX)                                   \
  TL_GLOBAL void tailor_##NAME##_columns_##SUFFIX(                             \
      const T *x, T *y, long long outer, long long len, long long inner,       \
      long long count) {                                                       \
    tl::norm::reduceColumns<OP, T>(x, y, outer, len, inner, count);            \
  }                                                                            \
  TL_REGISTER(tailor_##NAME##_columns_##SUFFIX)                                \
  TL_GLOBAL void tailor_##NAME##_generic_##SUFFIX(                             \
      const T *x, T *y, long long outputs, long long count,                    \
      tl::norm::ReduceWalk walk) {                                             \
    tl::norm::reduceGeneric<OP, T>(x, y, outputs, count, walk);                \
  }                                                                            \
  TL_REGISTER(tailor_##NAME##_generic_##SUFFIX)

#define TL_REDUCE_ALL_TYPES(OP, NAME)                                          \
  TL_REDUCE_ENTRIES(OP, NAME, float, f32)                                      \
  TL_REDUCE_ENTRIES(OP, NAME, tl::bf16, bf16)                                  \
  TL_REDUCE_ENTRIES(OP, NAME, int, i32)                                        \
  TL_REDUCE_ENTRIES(OP, NAME, long long, i64)

TL_REDUCE_ALL_TYPES(tl::norm::kSum, reduce_sum)
TL_REDUCE_ALL_TYPES(tl::norm::kMean, reduce_mean)
TL_REDUCE_ALL_TYPES(tl::norm::kMax, reduce_max)

#undef TL_REDUCE_ALL_TYPES
#undef TL_REDUCE_ENTRIES

namespace tl::norm {

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

/// The running (max, sum of exp(x - max)) of online softmax. -inf entries
/// contribute nothing even before a finite max is seen, so a row that
/// starts masked is fine; a NaN poisons the sum, hence the whole row, as
/// the CPU kernel's NaN-keeping max does.
struct Online {
  float m, s;
};

TL_DEVICE Online onlineAdd(Online a, float v) {
  if (v > a.m) {
    a.s = a.s * expf(a.m - v) + 1.0f; // exp(-inf) is 0 for the first entry
    a.m = v;
  } else if (a.m != negInf() || v != v) {
    a.s += expf(v - a.m);
  }
  return a;
}

TL_DEVICE Online onlineCombine(Online a, Online b) {
  float m = b.m > a.m ? b.m : a.m;
  float sa = a.m == negInf() ? (a.s != a.s ? a.s : 0.0f) : a.s * expf(a.m - m);
  float sb = b.m == negInf() ? (b.s != b.s ? b.s : 0.0f) : b.s * expf(b.m - m);
  Online r;
  r.m = m;
  r.s = sa + sb;
  return r;
}

TL_DEVICE Online warpOnline(Online v) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    Online o;
    o.m = __shfl_xor_sync(kFullMask, v.m, offset);
    o.s = __shfl_xor_sync(kFullMask, v.s, offset);
    v = onlineCombine(v, o);
  }
  return v;
}

/// Short rows (len <= 32 * kWarpRowCache = 512): one warp per row, the row
/// held in registers between the statistics and the write, 8 rows per
/// block. 16 values per lane keep the kernel near 64 registers.
constexpr int kWarpRowCache = 16;

template <typename T>
TL_DEVICE void softmaxWarpRows(const T *x, T *y, long long rows,
                               long long len) {
  const int lane = threadIdx.x;
  for (long long row = i64(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += i64(gridDim.x) * blockDim.y) {
    const T *xr = x + row * len;
    float v[kWarpRowCache];
    float m = negInf();
    int nan = 0;
#pragma unroll
    for (int k = 0; k < kWarpRowCache; ++k) {
      long long i = lane + k * kWarpSize;
      v[k] = i < len ? load(xr, i) : negInf();
      m = v[k] > m ? v[k] : m;
      nan |= v[k] != v[k];
    }
    m = warpMax(m);
    // A NaN anywhere makes the whole row NaN, as the CPU's rowMax does.
    nan = __shfl_xor_sync(kFullMask, nan, 16) | nan;
    nan = __shfl_xor_sync(kFullMask, nan, 8) | nan;
    nan = __shfl_xor_sync(kFullMask, nan, 4) | nan;
    nan = __shfl_xor_sync(kFullMask, nan, 2) | nan;
    nan = __shfl_xor_sync(kFullMask, nan, 1) | nan;
    if (nan) {
      m = bitsFloat(0x7fc00000u);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kWarpRowCache; ++k) {
      long long i = lane + k * kWarpSize;
      v[k] = i < len ? expf(v[k] - m) : 0.0f;
      s += v[k];
    }
    float inv = 1.0f / warpSum(s);
    T *yr = y + row * len;
#pragma unroll
    for (int k = 0; k < kWarpRowCache; ++k) {
      long long i = lane + k * kWarpSize;
      if (i < len) {
        store(yr, i, v[k] * inv);
      }
    }
  }
}

// Long rows (vocabulary-sized logits): one block per row, two passes over
// x (online max and sum, then the write) instead of three.
template <typename T>
TL_DEVICE void softmaxBlockRows(const T *x, T *y, long long rows,
                                long long len) {
  __shared__ float sm[32], ss[32];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * len;
    Online acc;
    acc.m = negInf();
    acc.s = 0.0f;
    for (long long i = threadIdx.x; i < len; i += blockDim.x) {
      acc = onlineAdd(acc, load(xr, i));
    }
    acc = warpOnline(acc);
    if (lane == 0) {
      sm[warp] = acc.m;
      ss[warp] = acc.s;
    }
    __syncthreads();
    acc.m = sm[0];
    acc.s = ss[0];
    for (int w = 1; w < warps; ++w) {
      Online o;
      o.m = sm[w];
      o.s = ss[w];
      acc = onlineCombine(acc, o);
    }
    __syncthreads();
    float inv = 1.0f / acc.s;
    T *yr = y + row * len;
    for (long long i = threadIdx.x; i < len; i += blockDim.x) {
      store(yr, i, expf(load(xr, i) - acc.m) * inv);
    }
  }
}

// A middle axis: x [outer, len, inner], one thread per (outer, column)
// walking the axis twice; neighbouring threads take neighbouring columns.
template <typename T>
TL_DEVICE void softmaxColumns(const T *x, T *y, long long outer, long long len,
                              long long inner) {
  for (long long t = globalThread(); t < outer * inner; t += gridThreads()) {
    long long o = t / inner, c = t % inner;
    const T *xc = x + o * len * inner + c;
    T *yc = y + o * len * inner + c;
    Online acc;
    acc.m = negInf();
    acc.s = 0.0f;
    for (long long l = 0; l < len; ++l) {
      acc = onlineAdd(acc, load(xc, l * inner));
    }
    float inv = 1.0f / acc.s;
    for (long long l = 0; l < len; ++l) {
      store(yc, l * inner, expf(load(xc, l * inner) - acc.m) * inv);
    }
  }
}

//===----------------------------------------------------------------------===//
// rms_norm, layer_norm
//===----------------------------------------------------------------------===//

// x [rows, d] (T), w and bias [d] (W), y like x. One block per row; each
// thread keeps its first kCached strided elements (i = threadIdx.x +
// k * blockDim.x) in registers, so a row up to kCached * blockDim.x
// elements reads x once and only the tail of a longer row is read twice
// (the second time mostly from L2). Statistics are f32 block sums, as HF
// computes them on f32 activations.

template <typename T>
TL_DEVICE void loadHead(const T *xr, int n, float v[kCached]) {
#pragma unroll
  for (int k = 0; k < kCached; ++k) {
    int i = threadIdx.x + k * blockDim.x;
    v[k] = i < n ? load(xr, i) : 0.0f;
  }
}

template <typename T, typename W>
TL_DEVICE void rmsNorm(const T *x, const W *w, T *y, long long rows,
                       long long d, float eps) {
  __shared__ float scratch[32];
  const int n = int(d); // launchers keep rows below 2^31 elements
  const int tail = kCached * blockDim.x + threadIdx.x;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * d;
    T *yr = y + row * d;
    float v[kCached];
    loadHead(xr, n, v);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      sum += v[k] * v[k];
    }
    for (int i = tail; i < n; i += blockDim.x) {
      float a = load(xr, i);
      sum += a * a;
    }
    float r = 1.0f / sqrtf(blockSum(sum, scratch) / float(d) + eps);
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      int i = threadIdx.x + k * blockDim.x;
      if (i < n) {
        store(yr, i, load(w, i) * (v[k] * r));
      }
    }
    for (int i = tail; i < n; i += blockDim.x) {
      store(yr, i, load(w, i) * (load(xr, i) * r));
    }
  }
}

template <typename T, typename W>
TL_DEVICE void layerNorm(const T *x, const W *w, const W *b, T *y,
                         long long rows, long long d, float eps) {
  __shared__ float scratch[32];
  const int n = int(d); // launchers keep rows below 2^31 elements
  const int tail = kCached * blockDim.x + threadIdx.x;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * d;
    T *yr = y + row * d;
    float v[kCached];
    loadHead(xr, n, v);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      sum += v[k];
    }
    for (int i = tail; i < n; i += blockDim.x) {
      sum += load(xr, i);
    }
    float mean = blockSum(sum, scratch) / float(d);
    // Two passes: the variance of (x - mean), the stable form.
    float sq = 0.0f;
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      int i = threadIdx.x + k * blockDim.x;
      float c = i < n ? v[k] - mean : 0.0f;
      sq += c * c;
    }
    for (int i = tail; i < n; i += blockDim.x) {
      float c = load(xr, i) - mean;
      sq += c * c;
    }
    float rstd = 1.0f / sqrtf(blockSum(sq, scratch) / float(d) + eps);
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      int i = threadIdx.x + k * blockDim.x;
      if (i < n) {
        float o = (v[k] - mean) * rstd * load(w, i);
        store(yr, i, b ? o + load(b, i) : o);
      }
    }
    for (int i = tail; i < n; i += blockDim.x) {
      float o = (load(xr, i) - mean) * rstd * load(w, i);
      store(yr, i, b ? o + load(b, i) : o);
    }
  }
}

} // namespace tl::norm

#define TL_SOFTMAX_ENTRIES(T, SUFFIX)                                          \
  TL_GLOBAL void tailor_softmax_warp_rows_##SUFFIX(                            \
      const T *x, T *y, long long rows, long long len) {                       \
    tl::norm::softmaxWarpRows<T>(x, y, rows, len);                             \
  }                                                                            \
  TL_REGISTER(tailor_softmax_warp_rows_##SUFFIX)                               \
  TL_GLOBAL void tailor_softmax_block_rows_##SUFFIX(                           \
      const T *x, T *y, long long rows, long long len) {                       \
    tl::norm::softmaxBlockRows<T>(x, y, rows, len);                            \
  }                                                                            \
  TL_REGISTER(tailor_softmax_block_rows_##SUFFIX)                              \
  TL_GLOBAL void tailor_softmax_columns_##SUFFIX(                              \
      const T *x, T *y, long long outer, long long len, long long inner) {     \
    tl::norm::softmaxColumns<T>(x, y, outer, len, inner);                      \
  }                                                                            \
  TL_REGISTER(tailor_softmax_columns_##SUFFIX)

TL_SOFTMAX_ENTRIES(float, f32)
TL_SOFTMAX_ENTRIES(tl::bf16, bf16)

// Norm entry points are suffixed with x's storage type, then the weights'
// (a bf16 model may keep f32 norm weights, and the reverse).
#define TL_NORM_ENTRIES(T, W, SUFFIX)                                          \
  TL_GLOBAL void tailor_rms_norm_##SUFFIX(                                     \
      const T *x, const W *w, T *y, long long rows, long long d, float eps) {  \
    tl::norm::rmsNorm<T, W>(x, w, y, rows, d, eps);                            \
  }                                                                            \
  TL_REGISTER(tailor_rms_norm_##SUFFIX)                                        \
  TL_GLOBAL void tailor_layer_norm_##SUFFIX(const T *x, const W *w,            \
                                            const W *b, T *y, long long rows,  \
                                            long long d, float eps) {          \
    tl::norm::layerNorm<T, W>(x, w, b, y, rows, d, eps);                       \
  }                                                                            \
  TL_REGISTER(tailor_layer_norm_##SUFFIX)

TL_NORM_ENTRIES(float, float, f32_f32)
TL_NORM_ENTRIES(float, tl::bf16, f32_bf16)
TL_NORM_ENTRIES(tl::bf16, float, bf16_f32)
TL_NORM_ENTRIES(tl::bf16, tl::bf16, bf16_bf16)

#undef TL_NORM_ENTRIES
#undef TL_SOFTMAX_ENTRIES
