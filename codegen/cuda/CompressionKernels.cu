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
