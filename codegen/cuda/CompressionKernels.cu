//===- CompressionKernels.cu - PowerSGD's kernels on gradient states *- CUDA -*-===//
//
// Device code of runtime/cuda/CompressionLaunchers.cpp, the CUDA side of the
// PowerSGD and ACP-SGD kernels in runtime/cpu/CompressionKernels.cpp (the
// compute of PyTorch's PowerSGD communication hook). The three low-rank
// products are GEMMs (the launchers hand them to cuBLASLt in full f32);
// what is here:
//
//   - error_feedback_add (error, grad): grad += error, then error = grad; a
//     thread per element.
//   - error_feedback_store (grad, error): error -= grad; a thread per
//     element.
//   - lowrank_init (factor): element k = (v - 1000) / 1000 with v = ((k *
//     2654435761 + 12345) mod 2^32 >> 8) mod 2001: integer arithmetic and
//     one IEEE division, the CPU's bits.
//   - orthogonalize (factor [rows, cols], epsilon): the hook's Gram-Schmidt,
//     one block for the whole factor (cols is the approximation rank, a
//     few; rows is a gradient's first dimension). Column by column: its
//     norm from a sum of squares in double, the column divided by it (plus
//     epsilon), then its projection taken out of every later column, the
//     dot in double. Sums run in another order than the CPU's serial loop,
//     so results agree to f32 rounding, not bit for bit; products and
//     differences are rounded apart (no FMA), as the CPU computes them.
//   - sign_compress (EF-SignSGD), per gradient of the bucket: one block
//     forms p = grad + residual (into the residual) and its scale ||p||_1
//     / n (double sum, rounded once); then a thread per byte of the
//     bucket's sign bits the gradient covers sets the bits of its negative
//     entries and leaves p - scale * sign(p) in the residual. The launches
//     of one bucket run in order on one stream, so a byte two gradients
//     share is written by one thread at a time.
//   - sign_average, per gradient: a thread per entry sums every rank's
//     scale * (+-1) in rank order in double and divides by the ranks, the
//     CPU's arithmetic exactly.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

namespace tl::compress {

/// Threads of orthogonalize's one block.
constexpr int kOrthogonalizeThreads = 512;

TL_DEVICE void errorFeedbackAdd(float *error, float *grad, i64 n) {
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    const float sum = __fadd_rn(grad[i], error[i]);
    grad[i] = sum;
    error[i] = sum;
  }
}

TL_DEVICE void errorFeedbackStore(const float *grad, float *error, i64 n) {
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    error[i] = __fsub_rn(error[i], grad[i]);
  }
}

TL_DEVICE void lowRankInit(float *factor, i64 n) {
  for (i64 k = globalThread(); k < n; k += gridThreads()) {
    const u32 u = u32(u64(k) * 2654435761ull + 12345ull);
    const i64 v = i64((u >> 8) % 2001u);
    factor[k] = float(v - 1000) / 1000.0f;
  }
}

/// The sum of every thread's `v` over the block, in double; every thread
/// gets it. `scratch` holds a double per warp.
TL_DEVICE double blockSumDouble(double v, double *scratch) {
  const int lane = int(threadIdx.x % kWarpSize);
  const int warp = int(threadIdx.x / kWarpSize);
  const int warps = int((blockDim.x + kWarpSize - 1) / kWarpSize);
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  if (lane == 0) {
    scratch[warp] = v;
  }
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < warps; ++w) {
    total += scratch[w];
  }
  __syncthreads();
  return total;
}

/// The Gram-Schmidt of x [rows, cols] (row-major) in place, by one block.
TL_DEVICE void orthogonalize(float *x, i64 rows, i64 cols, float epsilon) {
  __shared__ double scratch[kOrthogonalizeThreads / kWarpSize];
  const i64 step = blockDim.x;
  for (i64 i = 0; i < cols; ++i) {
    double squares = 0.0;
    for (i64 r = threadIdx.x; r < rows; r += step) {
      const double value = double(x[r * cols + i]);
      squares += value * value;
    }
    squares = blockSumDouble(squares, scratch);
    const float norm = float(sqrt(squares));
    const float divisor = epsilon == 0.0f ? norm : __fadd_rn(norm, epsilon);
    for (i64 r = threadIdx.x; r < rows; r += step) {
      x[r * cols + i] = __fdiv_rn(x[r * cols + i], divisor);
    }
    __syncthreads();
    for (i64 j = i + 1; j < cols; ++j) {
      double dot = 0.0;
      for (i64 r = threadIdx.x; r < rows; r += step) {
        dot += double(x[r * cols + i]) * double(x[r * cols + j]);
      }
      const float d = float(blockSumDouble(dot, scratch));
      for (i64 r = threadIdx.x; r < rows; r += step) {
        x[r * cols + j] =
            __fsub_rn(x[r * cols + j], __fmul_rn(d, x[r * cols + i]));
      }
      __syncthreads();
    }
  }
}

/// p = grad (+ residual, stored there) over `n` entries, by one block;
/// thread 0 writes the scale ||p||_1 / n.
TL_DEVICE void signScale(const float *grad, float *residual, float *scale,
                         i64 n) {
  __shared__ double scratch[kOrthogonalizeThreads / kWarpSize];
  double l1 = 0.0;
  for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
    float p = grad[i];
    if (residual) {
      p = __fadd_rn(residual[i], grad[i]);
      residual[i] = p;
    }
    l1 += fabs(double(p));
  }
  l1 = blockSumDouble(l1, scratch);
  if (threadIdx.x == 0) {
    *scale = n == 0 ? 0.0f : float(l1 / double(n));
  }
}

/// The sign bits of flat positions [begin, begin + n) from p (the residual
/// when there is one, else the gradient), and the residual's update.
TL_DEVICE void signPack(const float *p, float *residual, const float *scale,
                        unsigned char *signs, i64 begin, i64 n) {
  const float s = *scale;
  const i64 first = begin / 8, last = (begin + n - 1) / 8;
  for (i64 b = first + globalThread(); b <= last; b += gridThreads()) {
    unsigned bits = 0;
    for (int k = 0; k < 8; ++k) {
      const i64 at = 8 * b + k - begin;
      if (at < 0 || at >= n) {
        continue;
      }
      const bool negative = p[at] < 0.0f;
      bits |= negative ? 1u << k : 0u;
      if (residual) {
        residual[at] = __fsub_rn(p[at], negative ? -s : s);
      }
    }
    signs[b] = (unsigned char)(signs[b] | bits);
  }
}

/// Entry `begin + i` of gradient `member`: the ranks' scale * sign summed
/// in rank order (double), divided by the ranks.
TL_DEVICE void signAverage(const unsigned char *signs, const float *scales,
                           float *grad, i64 begin, i64 n, i64 member,
                           i64 members, i64 ranks, i64 bytes) {
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    const i64 at = begin + i;
    double sum = 0.0;
    for (i64 r = 0; r < ranks; ++r) {
      const bool negative = (signs[r * bytes + at / 8] >> (at % 8)) & 1u;
      const double s = double(scales[r * members + member]);
      sum += negative ? -s : s;
    }
    grad[i] = float(sum / double(ranks));
  }
}

} // namespace tl::compress

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

TL_GLOBAL void tailor_error_feedback_add(float *error, float *grad,
                                         tl::i64 n) {
  tl::compress::errorFeedbackAdd(error, grad, n);
}
TL_REGISTER(tailor_error_feedback_add)

TL_GLOBAL void tailor_error_feedback_store(const float *grad, float *error,
                                           tl::i64 n) {
  tl::compress::errorFeedbackStore(grad, error, n);
}
TL_REGISTER(tailor_error_feedback_store)

TL_GLOBAL void tailor_lowrank_init(float *factor, tl::i64 n) {
  tl::compress::lowRankInit(factor, n);
}
TL_REGISTER(tailor_lowrank_init)

TL_GLOBAL void tailor_orthogonalize(float *factor, tl::i64 rows, tl::i64 cols,
                                    float epsilon) {
  tl::compress::orthogonalize(factor, rows, cols, epsilon);
}
TL_REGISTER(tailor_orthogonalize)

TL_GLOBAL void tailor_sign_scale(const float *grad, float *residual,
                                 float *scale, tl::i64 n) {
  tl::compress::signScale(grad, residual, scale, n);
}
TL_REGISTER(tailor_sign_scale)

TL_GLOBAL void tailor_sign_pack(const float *p, float *residual,
                                const float *scale, unsigned char *signs,
                                tl::i64 begin, tl::i64 n) {
  tl::compress::signPack(p, residual, scale, signs, begin, n);
}
TL_REGISTER(tailor_sign_pack)

TL_GLOBAL void tailor_sign_average(const unsigned char *signs,
                                   const float *scales, float *grad,
                                   tl::i64 begin, tl::i64 n, tl::i64 member,
                                   tl::i64 members, tl::i64 ranks,
                                   tl::i64 bytes) {
  tl::compress::signAverage(signs, scales, grad, begin, n, member, members,
                            ranks, bytes);
}
TL_REGISTER(tailor_sign_average)
