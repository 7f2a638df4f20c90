//===- GradientKernels.cu - backward kernels, dropout, loss ----*- CUDA -*-===//
//
// Device code of the gradient family (runtime/cuda/GradientLaunchers.cpp):
// the VJPs of silu, gelu, softmax, rope, rms_norm, layer_norm, slice and
// embedding, dropout, cross_entropy and its gradient. Semantics, operand
// order and attributes are the CPU kernels' (runtime/cpu/README.md); the
// tests compare every entry point with them.
//
// Storage: activations (x, dy, dx, logits, ...) are T = float or tl::bf16,
// read and written through tl::load / tl::store; all arithmetic is f32.
// Norm weights are W = float or bf16; statistics, weight gradients, the
// embedding table's gradient and losses are f32. Sums that cross rows (dw,
// db, the loss's mean) accumulate in f64 like the CPU kernels, in an order
// fixed by the launch shape alone, so a run gives the same bits on every
// GPU. The one exception is embedding_grad, which scatters with atomicAdd.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"
#include "codegen/cuda/ElementwiseMath.cuh"

namespace tl {
namespace grad {

constexpr float kLowest = -3.402823466e38f;

TL_DEVICE float quietNan() { return bitsFloat(0x7fc00000u); }

/// Sum of a double over a block whose blockDim.x is a power of two up to
/// 1024, as a tree in shared memory: a fixed order, so the same bits on
/// every run. `scratch` holds blockDim.x doubles; ends with a barrier.
TL_DEVICE double blockSumDouble(double v, double *scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      scratch[threadIdx.x] += scratch[threadIdx.x + half];
    }
    __syncthreads();
  }
  double total = scratch[0];
  __syncthreads();
  return total;
}

/// Integer sum over a block (blockDim.x a multiple of 32): every thread
/// gets the total. `scratch` holds 32 ints; ends with a barrier.
TL_DEVICE int blockSumInt(int v, int *scratch) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  if (threadIdx.x % kWarpSize == 0) {
    scratch[threadIdx.x / kWarpSize] = v;
  }
  __syncthreads();
  int total = 0;
  for (unsigned w = 0; w < blockDim.x / kWarpSize; ++w) {
    total += scratch[w];
  }
  __syncthreads();
  return total;
}

/// Folds (om, os) into the running (m, s) of an online softmax, where s is
/// the exp-sum relative to m. A side whose max is the new max needs no exp,
/// which also keeps two empty sides (kLowest, 0) from computing exp(0 * inf).
TL_DEVICE void mergeMaxSum(float &m, float &s, float om, float os) {
  float nm = om > m ? om : m;
  s = (m == nm ? s : s * expf(m - nm)) + (om == nm ? os : os * expf(om - nm));
  m = nm;
}

/// The max and exp-sum of row `x` of `v` elements, merged over the block
/// (blockDim.x a multiple of 32): every thread gets both. One pass with an
/// online rescale, so the row is read once.
template <typename T>
TL_DEVICE void rowMaxExpSum(const T *x, i64 v, float &max, float &sum) {
  __shared__ float sharedMax[32], sharedSum[32];
  float m = kLowest, s = 0.0f;
  for (i64 i = threadIdx.x; i < v; i += blockDim.x) {
    float xi = load(x, i);
    if (xi > m) {
      s = s * expf(m - xi) + 1.0f;
      m = xi;
    } else {
      s += expf(xi - m);
    }
  }
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    float om = __shfl_xor_sync(kFullMask, m, offset);
    float os = __shfl_xor_sync(kFullMask, s, offset);
    mergeMaxSum(m, s, om, os);
  }
  if (threadIdx.x % kWarpSize == 0) {
    sharedMax[threadIdx.x / kWarpSize] = m;
    sharedSum[threadIdx.x / kWarpSize] = s;
  }
  __syncthreads();
  m = sharedMax[0];
  s = sharedSum[0];
  for (unsigned w = 1; w < blockDim.x / kWarpSize; ++w) {
    mergeMaxSum(m, s, sharedMax[w], sharedSum[w]);
  }
  __syncthreads();
  max = m;
  sum = s;
}

//===----------------------------------------------------------------------===//
// silu_grad, gelu_grad
//===----------------------------------------------------------------------===//

// x, dy, dx [n] alike; dx = dy f'(x) with f' the exact derivative of the
// forward formula (the CPU kernel's), one element per thread of a grid-
// stride loop: coalesced, and memory-bound even with erff/tanhf. f' comes
// from ElementwiseMath.cuh, shared with the generated fused kernels.

TL_DEVICE float geluDerivative(float x, int tanhApprox) {
  return tanhApprox ? math::geluTanhDerivative(x) : math::geluDerivative(x);
}

template <typename T>
TL_DEVICE void siluGrad(const T *x, const T *dy, T *dx, i64 n) {
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    store(dx, i, load(dy, i) * math::siluDerivative(load(x, i)));
  }
}

template <typename T>
TL_DEVICE void geluGrad(const T *x, const T *dy, T *dx, i64 n, int tanhApprox) {
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    store(dx, i, load(dy, i) * geluDerivative(load(x, i), tanhApprox));
  }
}

} // namespace grad
} // namespace tl

TL_GLOBAL void tailor_silu_grad_f32(const float *x, const float *dy, float *dx,
                                    long long n) {
  tl::grad::siluGrad(x, dy, dx, n);
}
TL_REGISTER(tailor_silu_grad_f32)
TL_GLOBAL void tailor_silu_grad_bf16(const tl::bf16 *x, const tl::bf16 *dy,
                                     tl::bf16 *dx, long long n) {
  tl::grad::siluGrad(x, dy, dx, n);
}
TL_REGISTER(tailor_silu_grad_bf16)
TL_GLOBAL void tailor_gelu_grad_f32(const float *x, const float *dy, float *dx,
                                    long long n, int tanhApprox) {
  tl::grad::geluGrad(x, dy, dx, n, tanhApprox);
}
TL_REGISTER(tailor_gelu_grad_f32)
TL_GLOBAL void tailor_gelu_grad_bf16(const tl::bf16 *x, const tl::bf16 *dy,
                                     tl::bf16 *dx, long long n,
                                     int tanhApprox) {
  tl::grad::geluGrad(x, dy, dx, n, tanhApprox);
}
TL_REGISTER(tailor_gelu_grad_bf16)

namespace tl {
namespace grad {

//===----------------------------------------------------------------------===//
// softmax_grad
//===----------------------------------------------------------------------===//

// dx = y (dy - sum_axis(dy y)); dx may alias dy.
// Last axis (`rows`): one block per row of `len`, the dot product as per-
// thread f32 partials and a block sum; each thread then rewrites exactly
// the elements it read, so aliasing is safe.
// Other axes (`columns`): the tensor is [outer, len, inner] and one thread
// owns one (outer, inner) column, walking len with stride inner, so a warp
// reads 32 consecutive floats per step; the dot product is f64 per thread.

template <typename T>
TL_DEVICE void softmaxGradRows(const T *y, const T *dy, T *dx, i64 rows,
                               i64 len) {
  __shared__ float scratch[32];
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *yr = y + row * len, *dyr = dy + row * len;
    T *dxr = dx + row * len;
    float partial = 0.0f;
    for (i64 i = threadIdx.x; i < len; i += blockDim.x) {
      partial += load(yr, i) * load(dyr, i);
    }
    float c = blockSum(partial, scratch);
    for (i64 i = threadIdx.x; i < len; i += blockDim.x) {
      store(dxr, i, load(yr, i) * (load(dyr, i) - c));
    }
  }
}

template <typename T>
TL_DEVICE void softmaxGradColumns(const T *y, const T *dy, T *dx, i64 outer,
                                  i64 len, i64 inner) {
  for (i64 col = globalThread(); col < outer * inner; col += gridThreads()) {
    i64 base = (col / inner) * len * inner + col % inner;
    double sum = 0.0;
    for (i64 l = 0; l < len; ++l) {
      sum += double(load(y, base + l * inner)) * load(dy, base + l * inner);
    }
    float c = float(sum);
    for (i64 l = 0; l < len; ++l) {
      i64 at = base + l * inner;
      store(dx, at, load(y, at) * (load(dy, at) - c));
    }
  }
}

} // namespace grad
} // namespace tl

TL_GLOBAL void tailor_softmax_grad_rows_f32(const float *y, const float *dy,
                                            float *dx, long long rows,
                                            long long len) {
  tl::grad::softmaxGradRows(y, dy, dx, rows, len);
}
TL_REGISTER(tailor_softmax_grad_rows_f32)
TL_GLOBAL void tailor_softmax_grad_rows_bf16(const tl::bf16 *y,
                                             const tl::bf16 *dy, tl::bf16 *dx,
                                             long long rows, long long len) {
  tl::grad::softmaxGradRows(y, dy, dx, rows, len);
}
TL_REGISTER(tailor_softmax_grad_rows_bf16)
TL_GLOBAL void tailor_softmax_grad_columns_f32(const float *y, const float *dy,
                                               float *dx, long long outer,
                                               long long len, long long inner) {
  tl::grad::softmaxGradColumns(y, dy, dx, outer, len, inner);
}
TL_REGISTER(tailor_softmax_grad_columns_f32)
TL_GLOBAL void tailor_softmax_grad_columns_bf16(const tl::bf16 *y,
                                                const tl::bf16 *dy,
                                                tl::bf16 *dx, long long outer,
                                                long long len,
                                                long long inner) {
  tl::grad::softmaxGradColumns(y, dy, dx, outer, len, inner);
}
TL_REGISTER(tailor_softmax_grad_columns_bf16)

namespace tl {
namespace grad {

//===----------------------------------------------------------------------===//
// rope_grad
//===----------------------------------------------------------------------===//

// dy, dx [B, H, T, D] (T storage), cos, sin [T, D] or [B, T, D] (C storage).
// The transpose of rope's per-pair rotation (see the CPU kernel):
//   dx[i] = dy[i] c[i] + dy[j] s[j],   dx[j] = dy[j] c[j] - dy[i] s[i]
// with j = i + 1 (interleaved) or i + D/2. One thread per pair reads both
// elements before writing them, so dx may alias dy; consecutive threads take
// consecutive pairs, so loads are coalesced in either layout.

template <typename T, typename C>
TL_DEVICE void ropeGrad(const T *dy, const C *cosT, const C *sinT, T *dx,
                        i64 heads, i64 t, i64 d, int perBatch, int interleaved,
                        i64 pairs) {
  i64 half = d / 2;
  for (i64 p = globalThread(); p < pairs; p += gridThreads()) {
    i64 row = p / half, q = p % half;
    i64 ti = row % t, bi = row / (heads * t);
    i64 table = ((perBatch ? bi * t : 0) + ti) * d;
    i64 i = interleaved ? 2 * q : q;
    i64 j = interleaved ? i + 1 : i + half;
    float a = load(dy, row * d + i), b = load(dy, row * d + j);
    float ci = load(cosT, table + i), cj = load(cosT, table + j);
    float si = load(sinT, table + i), sj = load(sinT, table + j);
    store(dx, row * d + i, a * ci + b * sj);
    store(dx, row * d + j, b * cj - a * si);
  }
}

} // namespace grad
} // namespace tl

#define TL_ROPE_GRAD_ENTRY(name, T, C)                                         \
  TL_GLOBAL void name(const T *dy, const C *cosT, const C *sinT, T *dx,        \
                      long long heads, long long t, long long d, int perBatch, \
                      int interleaved, long long pairs) {                      \
    tl::grad::ropeGrad(dy, cosT, sinT, dx, heads, t, d, perBatch, interleaved, \
                       pairs);                                                 \
  }
TL_ROPE_GRAD_ENTRY(tailor_rope_grad_f32_f32, float, float)
TL_REGISTER(tailor_rope_grad_f32_f32)
TL_ROPE_GRAD_ENTRY(tailor_rope_grad_f32_bf16, float, tl::bf16)
TL_REGISTER(tailor_rope_grad_f32_bf16)
TL_ROPE_GRAD_ENTRY(tailor_rope_grad_bf16_f32, tl::bf16, float)
TL_REGISTER(tailor_rope_grad_bf16_f32)
TL_ROPE_GRAD_ENTRY(tailor_rope_grad_bf16_bf16, tl::bf16, tl::bf16)
TL_REGISTER(tailor_rope_grad_bf16_bf16)
#undef TL_ROPE_GRAD_ENTRY

namespace tl {
namespace grad {

//===----------------------------------------------------------------------===//
// rms_norm_grad, layer_norm_grad
//===----------------------------------------------------------------------===//

// dy, x, dx [rows, D] (T), w [D] (W), dw (and db) [D] f32, workspace f32
// with r (rms) or mean and rstd (layer) per row. Two kernels:
//   - `rows`, one block per row: the forward's statistics (f32, the CPU's
//     formulas: sum x, then sum (x - mean)^2) and/or dx, from per-thread f32
//     partials and block sums:
//       rms:   dx = r (g - x r^2 mean(g x)),                  g = dy w
//       layer: dx = rstd (g - mean(g) - xhat mean(g xhat)),   xhat = (x - mean)
//       rstd
//     `mode` 0 stores the statistics only, 1 stores them and writes dx, 2
//     reads them and writes dx;
//   - `weights`, the column sums dw = sum_rows dy xhat (db = sum_rows dy):
//     a block owns 32 columns and has 32 warps; lane l takes column c0 + l
//     and warp w rows w, w + 32, ..., so each warp reads 128 contiguous
//     bytes per row, and the 32 per-warp f64 partials of a column are added
//     in warp order. The order depends on the shapes only (deterministic),
//     and there are no atomics and no partials in global memory: the plan's
//     workspace holds exactly the statistics.
// dw reads dy and x, so it runs before dx is written when dx aliases dy or
// x (the launcher then runs rows mode 0, weights, rows mode 2); otherwise
// rows mode 1 then weights.

constexpr int kNormColumns = 32;
constexpr int kNormRowLanes = 32;

template <bool Layer, typename T, typename W>
TL_DEVICE void normGradRows(const T *dy, const T *x, const W *w, T *dx,
                            float *stats, i64 rows, i64 d, float eps,
                            int mode) {
  __shared__ float scratch[32];
  constexpr int kStats = Layer ? 2 : 1;
  float invD = 1.0f / float(d);
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * d, *dyr = dy + row * d;
    float mean = 0.0f, rstd;
    if (mode == 2) {
      mean = Layer ? stats[row * kStats] : 0.0f;
      rstd = stats[row * kStats + kStats - 1];
    } else {
      if (Layer) {
        float partial = 0.0f;
        for (i64 i = threadIdx.x; i < d; i += blockDim.x) {
          partial += load(xr, i);
        }
        mean = blockSum(partial, scratch) / float(d);
      }
      float partial = 0.0f;
      for (i64 i = threadIdx.x; i < d; i += blockDim.x) {
        float c = load(xr, i) - mean;
        partial += c * c;
      }
      rstd = 1.0f / sqrtf(blockSum(partial, scratch) / float(d) + eps);
      if (threadIdx.x == 0) {
        if (Layer) {
          stats[row * kStats] = mean;
        }
        stats[row * kStats + kStats - 1] = rstd;
      }
    }
    if (mode == 0) {
      continue;
    }
    float sumG = 0.0f, sumGx = 0.0f;
    for (i64 i = threadIdx.x; i < d; i += blockDim.x) {
      float g = load(dyr, i) * load(w, i);
      if (Layer) {
        sumG += g;
        sumGx += g * ((load(xr, i) - mean) * rstd);
      } else {
        sumGx += g * load(xr, i);
      }
    }
    float meanGx = blockSum(sumGx, scratch) * invD;
    float meanG = Layer ? blockSum(sumG, scratch) * invD : 0.0f;
    T *dxr = dx + row * d;
    if (Layer) {
      for (i64 i = threadIdx.x; i < d; i += blockDim.x) {
        float xhat = (load(xr, i) - mean) * rstd;
        store(dxr, i,
              rstd * (load(dyr, i) * load(w, i) - meanG - xhat * meanGx));
      }
    } else {
      float c = meanGx * rstd * rstd;
      for (i64 i = threadIdx.x; i < d; i += blockDim.x) {
        store(dxr, i, rstd * (load(dyr, i) * load(w, i) - load(xr, i) * c));
      }
    }
  }
}

/// blockDim.x = kNormColumns * kNormRowLanes; one block per 32 columns.
template <bool Layer, typename T>
TL_DEVICE void normGradWeights(const T *dy, const T *x, const float *stats,
                               float *dw, float *db, i64 rows, i64 d) {
  __shared__ double sharedW[kNormRowLanes][kNormColumns];
  __shared__ double sharedB[kNormRowLanes][kNormColumns];
  constexpr int kStats = Layer ? 2 : 1;
  int lane = threadIdx.x % kNormColumns, warp = threadIdx.x / kNormColumns;
  for (i64 c0 = i64(blockIdx.x) * kNormColumns; c0 < d;
       c0 += i64(gridDim.x) * kNormColumns) {
    i64 c = c0 + lane;
    double accW = 0.0, accB = 0.0;
    if (c < d) {
      for (i64 r = warp; r < rows; r += kNormRowLanes) {
        const float *st = stats + r * kStats;
        float xv = load(x, r * d + c), dyv = load(dy, r * d + c);
        double xhat = Layer ? double(xv - st[0]) * st[1] : double(xv) * st[0];
        accW += dyv * xhat;
        if (Layer) {
          accB += dyv;
        }
      }
    }
    sharedW[warp][lane] = accW;
    sharedB[warp][lane] = accB;
    __syncthreads();
    if (warp == 0 && c < d) {
      double sumW = 0.0, sumB = 0.0;
      for (int k = 0; k < kNormRowLanes; ++k) {
        sumW += sharedW[k][lane];
        sumB += sharedB[k][lane];
      }
      dw[c] = float(sumW);
      if (Layer) {
        db[c] = float(sumB);
      }
    }
    __syncthreads();
  }
}

} // namespace grad
} // namespace tl

#define TL_NORM_GRAD_ROWS_ENTRY(name, Layer, T, W)                             \
  TL_GLOBAL void name(const T *dy, const T *x, const W *w, T *dx,              \
                      float *stats, long long rows, long long d, float eps,    \
                      int mode) {                                              \
    tl::grad::normGradRows<Layer>(dy, x, w, dx, stats, rows, d, eps, mode);    \
  }
TL_NORM_GRAD_ROWS_ENTRY(tailor_rms_norm_grad_rows_f32_f32, false, float, float)
TL_REGISTER(tailor_rms_norm_grad_rows_f32_f32)
TL_NORM_GRAD_ROWS_ENTRY(tailor_rms_norm_grad_rows_f32_bf16, false, float,
                        tl::bf16)
TL_REGISTER(tailor_rms_norm_grad_rows_f32_bf16)
TL_NORM_GRAD_ROWS_ENTRY(tailor_rms_norm_grad_rows_bf16_f32, false, tl::bf16,
                        float)
TL_REGISTER(tailor_rms_norm_grad_rows_bf16_f32)
TL_NORM_GRAD_ROWS_ENTRY(tailor_rms_norm_grad_rows_bf16_bf16, false, tl::bf16,
                        tl::bf16)
TL_REGISTER(tailor_rms_norm_grad_rows_bf16_bf16)
TL_NORM_GRAD_ROWS_ENTRY(tailor_layer_norm_grad_rows_f32_f32, true, float, float)
TL_REGISTER(tailor_layer_norm_grad_rows_f32_f32)
TL_NORM_GRAD_ROWS_ENTRY(tailor_layer_norm_grad_rows_f32_bf16, true, float,
                        tl::bf16)
TL_REGISTER(tailor_layer_norm_grad_rows_f32_bf16)
TL_NORM_GRAD_ROWS_ENTRY(tailor_layer_norm_grad_rows_bf16_f32, true, tl::bf16,
                        float)
TL_REGISTER(tailor_layer_norm_grad_rows_bf16_f32)
TL_NORM_GRAD_ROWS_ENTRY(tailor_layer_norm_grad_rows_bf16_bf16, true, tl::bf16,
                        tl::bf16)
TL_REGISTER(tailor_layer_norm_grad_rows_bf16_bf16)
#undef TL_NORM_GRAD_ROWS_ENTRY

TL_GLOBAL void tailor_rms_norm_grad_weights_f32(const float *dy, const float *x,
                                                const float *stats, float *dw,
                                                long long rows, long long d) {
  tl::grad::normGradWeights<false>(dy, x, stats, dw, nullptr, rows, d);
}
TL_REGISTER(tailor_rms_norm_grad_weights_f32)
TL_GLOBAL void tailor_rms_norm_grad_weights_bf16(const tl::bf16 *dy,
                                                 const tl::bf16 *x,
                                                 const float *stats, float *dw,
                                                 long long rows, long long d) {
  tl::grad::normGradWeights<false>(dy, x, stats, dw, nullptr, rows, d);
}
TL_REGISTER(tailor_rms_norm_grad_weights_bf16)
TL_GLOBAL void tailor_layer_norm_grad_weights_f32(const float *dy,
                                                  const float *x,
                                                  const float *stats, float *dw,
                                                  float *db, long long rows,
                                                  long long d) {
  tl::grad::normGradWeights<true>(dy, x, stats, dw, db, rows, d);
}
TL_REGISTER(tailor_layer_norm_grad_weights_f32)
TL_GLOBAL void
tailor_layer_norm_grad_weights_bf16(const tl::bf16 *dy, const tl::bf16 *x,
                                    const float *stats, float *dw, float *db,
                                    long long rows, long long d) {
  tl::grad::normGradWeights<true>(dy, x, stats, dw, db, rows, d);
}
TL_REGISTER(tailor_layer_norm_grad_weights_bf16)

namespace tl {
namespace grad {

//===----------------------------------------------------------------------===//
// slice_grad
//===----------------------------------------------------------------------===//

// dx is zeroed by the launcher (memsetZero), then each thread scatters one
// dy element to dx[base + sum_k index_k stride_k]. Steps >= 1 make the
// targets distinct, so there is no race; reads of dy are coalesced, writes
// are strided by the slice's steps.

constexpr int kMaxSliceRank = 8;

/// dy's extents and the dx element stride per step of each dy dimension.
struct SliceMap {
  int rank;
  i64 extent[kMaxSliceRank];
  i64 stride[kMaxSliceRank];
  i64 base;
};

template <typename T>
TL_DEVICE void sliceGrad(const T *dy, T *dx, i64 n, SliceMap map) {
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    i64 at = map.base, rest = i;
    for (int k = map.rank - 1; k >= 0; --k) {
      at += (rest % map.extent[k]) * map.stride[k];
      rest /= map.extent[k];
    }
    store(dx, at, load(dy, i));
  }
}

} // namespace grad
} // namespace tl

TL_GLOBAL void tailor_slice_grad_f32(const float *dy, float *dx, long long n,
                                     tl::grad::SliceMap map) {
  tl::grad::sliceGrad(dy, dx, n, map);
}
TL_REGISTER(tailor_slice_grad_f32)
TL_GLOBAL void tailor_slice_grad_bf16(const tl::bf16 *dy, tl::bf16 *dx,
                                      long long n, tl::grad::SliceMap map) {
  tl::grad::sliceGrad(dy, dx, n, map);
}
TL_REGISTER(tailor_slice_grad_bf16)

namespace tl {
namespace grad {

//===----------------------------------------------------------------------===//
// embedding_grad
//===----------------------------------------------------------------------===//

// dy [n, D] (T), ids [n] (I), dtable [V, D] f32: dtable[ids[i]] += dy[i].
// One block per token (grid-stride over tokens), threads over D, each
// element added with atomicAdd. Repeated ids make the order of additions to
// one row vary between runs, so unlike every other kernel here the result
// is not bit-reproducible (the CPU kernel splits columns instead); a
// deterministic version would sort the ids first, which needs workspace the
// plan does not give. An id outside [0, V) is reported in the error record
// (kEmbeddingGradId, DeviceError.cuh) and skipped, so nothing is written
// outside dtable; the run then fails as the CPU kernel's does. The launcher
// zeroes dtable first unless `accumulate`.

template <typename T, typename I>
TL_DEVICE void embeddingGrad(const T *dy, const I *ids, float *dtable, i64 n,
                             i64 vocab, i64 d, ErrorRecord *error, int site) {
  for (i64 token = blockIdx.x; token < n; token += gridDim.x) {
    i64 id = i64(ids[token]);
    if (id < 0 || id >= vocab) {
      if (threadIdx.x == 0) {
        reportError(error, kEmbeddingGradId, site, id, token, vocab);
      }
      continue;
    }
    float *dst = dtable + id * d;
    const T *src = dy + token * d;
    for (i64 c = threadIdx.x; c < d; c += blockDim.x) {
      atomicAdd(dst + c, load(src, c));
    }
  }
}

} // namespace grad
} // namespace tl

#define TL_EMBEDDING_GRAD_ENTRY(name, T, I)                                    \
  TL_GLOBAL void name(const T *dy, const I *ids, float *dtable, long long n,   \
                      long long vocab, long long d, tl::ErrorRecord *error,    \
                      int site) {                                              \
    tl::grad::embeddingGrad(dy, ids, dtable, n, vocab, d, error, site);        \
  }
TL_EMBEDDING_GRAD_ENTRY(tailor_embedding_grad_f32_i32, float, int)
TL_REGISTER(tailor_embedding_grad_f32_i32)
TL_EMBEDDING_GRAD_ENTRY(tailor_embedding_grad_f32_i64, float, long long)
TL_REGISTER(tailor_embedding_grad_f32_i64)
TL_EMBEDDING_GRAD_ENTRY(tailor_embedding_grad_bf16_i32, tl::bf16, int)
TL_REGISTER(tailor_embedding_grad_bf16_i32)
TL_EMBEDDING_GRAD_ENTRY(tailor_embedding_grad_bf16_i64, tl::bf16, long long)
TL_REGISTER(tailor_embedding_grad_bf16_i64)
#undef TL_EMBEDDING_GRAD_ENTRY

namespace tl {
namespace grad {

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

// x, y [n] (T), seed rank-0 i64 in device memory. The mask is the CPU
// kernel's, bit for bit: element i is kept when
//   SplitMix64(key + i * gamma) >> 11 >= threshold,
//   key = mix64(mix64(seed) ^ (salt * gamma + 1)),
// all in wrapping 64-bit unsigned arithmetic, with threshold =
// ceil(p * 2^53) and scale = 1 / f32(1 - p) computed by the launcher as the
// CPU kernel does. So a GPU run and a CPU run drop the same elements, and the
// backward launch on dy recomputes the forward's mask. Every thread derives
// the key from the seed itself (two mixes, cheaper than a broadcast through
// shared memory); y may alias x.

constexpr u64 kGoldenGamma = 0x9e3779b97f4a7c15ULL;

TL_DEVICE u64 mix64(u64 z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T>
TL_DEVICE void dropout(const T *x, const i64 *seed, T *y, i64 n, i64 salt,
                       u64 threshold, float scale) {
  u64 key = mix64(mix64(u64(*seed)) ^ (u64(salt) * kGoldenGamma + 1));
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    u64 bits = mix64(key + u64(i) * kGoldenGamma);
    store(y, i, load(x, i) * ((bits >> 11) >= threshold ? scale : 0.0f));
  }
}

} // namespace grad
} // namespace tl

TL_GLOBAL void tailor_dropout_f32(const float *x, const long long *seed,
                                  float *y, long long n, long long salt,
                                  unsigned long long threshold, float scale) {
  tl::grad::dropout(x, seed, y, n, salt, threshold, scale);
}
TL_REGISTER(tailor_dropout_f32)
TL_GLOBAL void tailor_dropout_bf16(const tl::bf16 *x, const long long *seed,
                                   tl::bf16 *y, long long n, long long salt,
                                   unsigned long long threshold, float scale) {
  tl::grad::dropout(x, seed, y, n, salt, threshold, scale);
}
TL_REGISTER(tailor_dropout_bf16)

namespace tl {
namespace grad {

//===----------------------------------------------------------------------===//
// cross_entropy, cross_entropy_grad
//===----------------------------------------------------------------------===//

// logits [N, V] (T), labels [N] (I). Each row's loss is
// logsumexp(x) - x[label] with the max and exp-sum taken in one pass by an
// online rescale (f32; the CPU sums exps in f64, which agrees to ~1e-6
// relative), one block per row. Rows labelled ignore_index give 0 and are
// not counted; a label outside [0, V) that is not ignored is reported in the
// error record (kCrossEntropyLabel, kCrossEntropyGradLabel: the CPU kernels'
// run error, DeviceError.cuh) and its row gives NaN, reading nothing
// outside the row.
//   - `rows` writes the per-row losses (into the workspace for mean and
//     sum, into the loss for none);
//   - `reduce`, one block of 1024 threads, sums the row losses and counts
//     the non-ignored labels in f64 (per-thread strided sums, then a tree
//     in shared memory: a fixed order), and writes sum or sum / count
//     (0 when nothing is counted).
// The gradient kernel writes (softmax - onehot) * dloss (/ count for mean)
// per row: a first pass for the max and exp-sum, a second that rewrites
// each element from the value the same thread reads, so dlogits may alias
// logits. The mean's count is taken on the device by every block (N label
// reads), which the launcher amortizes by giving the grid at most a few
// blocks per SM and looping rows.

constexpr int kReduceThreads = 1024;

template <typename T, typename I>
TL_DEVICE void crossEntropyRows(const T *logits, const I *labels,
                                float *rowLoss, i64 n, i64 v, i64 ignore,
                                ErrorRecord *error, int site) {
  for (i64 row = blockIdx.x; row < n; row += gridDim.x) {
    i64 label = i64(labels[row]);
    if (label == ignore) {
      if (threadIdx.x == 0) {
        rowLoss[row] = 0.0f;
      }
      continue;
    }
    const T *x = logits + row * v;
    float m, s;
    rowMaxExpSum(x, v, m, s);
    if (threadIdx.x == 0) {
      if (label < 0 || label >= v) {
        reportError(error, kCrossEntropyLabel, site, label, row, v);
        rowLoss[row] = quietNan();
      } else {
        rowLoss[row] =
            float(double(m) + log(double(s)) - double(load(x, label)));
      }
    }
  }
}

template <typename I>
TL_DEVICE void crossEntropyReduce(const float *rowLoss, const I *labels,
                                  float *loss, i64 n, i64 ignore, int mean) {
  __shared__ double scratch[kReduceThreads];
  double sum = 0.0, count = 0.0;
  for (i64 r = threadIdx.x; r < n; r += blockDim.x) {
    sum += double(rowLoss[r]);
    count += i64(labels[r]) != ignore ? 1.0 : 0.0;
  }
  sum = blockSumDouble(sum, scratch);
  count = blockSumDouble(count, scratch);
  if (threadIdx.x == 0) {
    if (mean) {
      sum = count > 0.0 ? sum / count : 0.0;
    }
    *loss = float(sum);
  }
}

/// `reduction`: 0 mean, 1 sum, 2 none (dloss then has one value per row).
template <typename T, typename I>
TL_DEVICE void crossEntropyGrad(const T *logits, const I *labels,
                                const float *dloss, T *dlogits, i64 n, i64 v,
                                i64 ignore, int reduction, ErrorRecord *error,
                                int site) {
  __shared__ int countScratch[32];
  float scale = reduction == 2 ? 0.0f : dloss[0];
  if (reduction == 0) {
    int count = 0;
    for (i64 r = threadIdx.x; r < n; r += blockDim.x) {
      count += i64(labels[r]) != ignore ? 1 : 0;
    }
    count = blockSumInt(count, countScratch);
    if (count > 0) {
      scale = float(double(scale) / double(count));
    }
  }
  for (i64 row = blockIdx.x; row < n; row += gridDim.x) {
    i64 label = i64(labels[row]);
    T *d = dlogits + row * v;
    if (label == ignore) {
      for (i64 i = threadIdx.x; i < v; i += blockDim.x) {
        store(d, i, 0.0f);
      }
      continue;
    }
    const T *x = logits + row * v;
    float m, s;
    rowMaxExpSum(x, v, m, s);
    float rowScale = reduction == 2 ? dloss[row] : scale;
    if (label < 0 || label >= v) {
      if (threadIdx.x == 0) {
        reportError(error, kCrossEntropyGradLabel, site, label, row, v);
      }
      rowScale = quietNan();
    }
    float inv = 1.0f / s;
    for (i64 i = threadIdx.x; i < v; i += blockDim.x) {
      float p = expf(load(x, i) - m) * inv;
      store(d, i, (i == label ? p - 1.0f : p) * rowScale);
    }
  }
}

} // namespace grad
} // namespace tl

#define TL_CROSS_ENTROPY_ENTRIES(suffix, T, I)                                 \
  TL_GLOBAL void tailor_cross_entropy_rows_##suffix(                           \
      const T *logits, const I *labels, float *rowLoss, long long n,           \
      long long v, long long ignore, tl::ErrorRecord *error, int site) {       \
    tl::grad::crossEntropyRows(logits, labels, rowLoss, n, v, ignore, error,   \
                               site);                                          \
  }                                                                            \
  TL_GLOBAL void tailor_cross_entropy_grad_##suffix(                           \
      const T *logits, const I *labels, const float *dloss, T *dlogits,        \
      long long n, long long v, long long ignore, int reduction,               \
      tl::ErrorRecord *error, int site) {                                      \
    tl::grad::crossEntropyGrad(logits, labels, dloss, dlogits, n, v, ignore,   \
                               reduction, error, site);                        \
  }
TL_CROSS_ENTROPY_ENTRIES(f32_i32, float, int)
TL_REGISTER(tailor_cross_entropy_rows_f32_i32)
TL_REGISTER(tailor_cross_entropy_grad_f32_i32)
TL_CROSS_ENTROPY_ENTRIES(f32_i64, float, long long)
TL_REGISTER(tailor_cross_entropy_rows_f32_i64)
TL_REGISTER(tailor_cross_entropy_grad_f32_i64)
TL_CROSS_ENTROPY_ENTRIES(bf16_i32, tl::bf16, int)
TL_REGISTER(tailor_cross_entropy_rows_bf16_i32)
TL_REGISTER(tailor_cross_entropy_grad_bf16_i32)
TL_CROSS_ENTROPY_ENTRIES(bf16_i64, tl::bf16, long long)
TL_REGISTER(tailor_cross_entropy_rows_bf16_i64)
TL_REGISTER(tailor_cross_entropy_grad_bf16_i64)
#undef TL_CROSS_ENTROPY_ENTRIES

TL_GLOBAL void tailor_cross_entropy_reduce_i32(const float *rowLoss,
                                               const int *labels, float *loss,
                                               long long n, long long ignore,
                                               int mean) {
  tl::grad::crossEntropyReduce(rowLoss, labels, loss, n, ignore, mean);
}
TL_REGISTER(tailor_cross_entropy_reduce_i32)
TL_GLOBAL void tailor_cross_entropy_reduce_i64(const float *rowLoss,
                                               const long long *labels,
                                               float *loss, long long n,
                                               long long ignore, int mean) {
  tl::grad::crossEntropyReduce(rowLoss, labels, loss, n, ignore, mean);
}
TL_REGISTER(tailor_cross_entropy_reduce_i64)
