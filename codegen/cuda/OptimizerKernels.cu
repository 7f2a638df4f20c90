//===- OptimizerKernels.cu - accumulate, norm, optimizers ------*- CUDA -*-===//
//
// Device code of the optimizer family (runtime/cuda/OptimizerLaunchers.cpp):
// accumulate, global_norm, adamw and sgd, with the CPU kernels' semantics
// (runtime/cpu/OptimizerKernels.cpp, runtime/cpu/README.md).
//
// Gradients, parameters and optimizer state are f32 (accumulate's value may
// be bf16: an activation-precision gradient added into an f32 accumulator).
// The updates are streaming elementwise loops: grid-stride, and 16-byte
// vector accesses when every pointer is 16-byte aligned (a uniform branch),
// since AdamW moves 28 bytes per element and nothing else.
//
// A non-finite grad_scale skips the update, as on the CPU (fp16 loss
// scaling's skipped step, tailor-optimizer's `loss-scaling`): the gradient
// accumulator is zeroed for the next step and the parameter and its state
// are left as they were. Every thread reads the same scale, so the branch
// is uniform.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

namespace tl {
namespace opt {

/// Four floats moved as one 16-byte access.
struct alignas(16) Float4 {
  float v[4];
};

/// Whether `x` is finite (its exponent is not all ones).
TL_DEVICE bool finite(float x) {
  return (floatBits(x) & 0x7f800000u) != 0x7f800000u;
}

/// A skipped update's only effect: the gradient accumulator cleared.
TL_DEVICE void zeroGradient(float *grad, i64 n) {
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    grad[i] = 0.0f;
  }
}

TL_DEVICE bool aligned16(const void *p) {
  return (reinterpret_cast<unsigned long long>(p) & 15u) == 0;
}

// Rounded operations the compiler may not fuse. nvcc contracts a * b + c
// into one fma by default, which would break the bit-for-bit agreement with
// the CPU kernels (built without contraction, fusing exactly where torch
// does, with explicit fmaf). The emulator's host build has no FMA
// instructions at its baseline target, so plain operators are exact there.
#ifdef TAILOR_SIMT_EMULATOR
TL_DEVICE float mulRn(float a, float b) { return a * b; }
TL_DEVICE float addRn(float a, float b) { return a + b; }
TL_DEVICE double mulRnD(double a, double b) { return a * b; }
#else
TL_DEVICE float mulRn(float a, float b) { return __fmul_rn(a, b); }
TL_DEVICE float addRn(float a, float b) { return __fadd_rn(a, b); }
TL_DEVICE double mulRnD(double a, double b) { return __dmul_rn(a, b); }
#endif

//===----------------------------------------------------------------------===//
// accumulate
//===----------------------------------------------------------------------===//

// target (f32) += value (T), elementwise in place.

template <typename T>
TL_DEVICE void accumulate(const T *value, float *target, i64 n) {
  for (i64 i = globalThread(); i < n; i += gridThreads()) {
    target[i] += load(value, i);
  }
}

} // namespace opt
} // namespace tl

TL_GLOBAL void tailor_accumulate_f32(const float *value, float *target,
                                     long long n) {
  tl::opt::accumulate(value, target, n);
}
TL_REGISTER(tailor_accumulate_f32)
TL_GLOBAL void tailor_accumulate_bf16(const tl::bf16 *value, float *target,
                                      long long n) {
  tl::opt::accumulate(value, target, n);
}
TL_REGISTER(tailor_accumulate_bf16)

namespace tl {
namespace opt {

//===----------------------------------------------------------------------===//
// global_norm
//===----------------------------------------------------------------------===//

// t0 ... tn-1 (f32), out (rank-0 f32), workspace: sqrt of the sum of
// squares, in two passes over a planned workspace of f64 partials
// (runtime/cuda/GlobalNormWorkspace.h):
//   1. tailor_global_norm_partials_f32: a fixed grid of kGlobalNormBlocks
//      blocks (a constant, not the device's SM count, so every GPU gives the
//      same bits). The tensors of the launch are one concatenated range of
//      elements; block b takes the b-th of kGlobalNormBlocks near-equal
//      slices of it, each thread summing squares in f64 over a block-stride
//      walk of the slice (coalesced across tensor boundaries), and the
//      block's sums are added as a tree in shared memory into partial b.
//   2. tailor_global_norm_finish_f32: one block adds the partials as a tree
//      and writes the square root, rounded to f32.
// Every order is fixed by the shapes alone, so runs give the same bits, and
// the f64 sum agrees with the CPU's (also f64, in another order) to far
// below f32 rounding. With 1024 blocks of 256 threads the first pass is one
// wave on a 132-SM GPU and streams the gradients near the memory bandwidth:
// on an H200, TinyLlama's 308 LoRA gradients (12.6M elements, three
// first-pass launches) take ~35 us a call, where the single-block kernel
// this replaces took ~3.6 ms.
//
// The tensors are passed by value in the kernel's parameters, at most
// kMaxNormTensors per launch. With more, the launcher launches pass 1 once
// per batch; each launch after the first adds its block's sum to the
// partial the previous one left (`carry`), in launch order.

constexpr int kNormThreads = 256;
constexpr int kNormFinishThreads = 1024;
constexpr int kMaxNormTensors = 120;

struct NormTensors {
  const float *data[kMaxNormTensors];
  /// start[t]: tensor t's first element in the launch's range (the
  /// launcher's prefix sum); start[count]: the range's size.
  i64 start[kMaxNormTensors + 1];
  int count;
  /// Whether the partials hold the sums of earlier launches to add to.
  int carry;
};

/// The sum of `value` over the block (blockDim.x a power of two, at most
/// `Threads`), in a fixed tree; valid in thread 0.
template <int Threads> TL_DEVICE double blockSumF64(double value) {
  __shared__ double scratch[Threads];
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      scratch[threadIdx.x] += scratch[threadIdx.x + half];
    }
    __syncthreads();
  }
  return scratch[0];
}

TL_DEVICE void globalNormPartials(const NormTensors &tensors,
                                  double *partials) {
  // Slice b of `blocks` near-equal slices: the first total % blocks slices
  // get one element more.
  i64 total = tensors.start[tensors.count];
  i64 blocks = gridDim.x, b = blockIdx.x;
  i64 base = total / blocks, extra = total % blocks;
  i64 lo = b * base + (b < extra ? b : extra);
  i64 hi = lo + base + (b < extra ? 1 : 0);
  // The last tensor starting at or before lo, by bisection: a slice meets
  // one or two tensors, and reading every tensor's bounds from the kernel
  // parameters in every thread cost more than the sum itself.
  int first = 0, past = tensors.count;
  while (past - first > 1) {
    int mid = (first + past) / 2;
    if (tensors.start[mid] <= lo) {
      first = mid;
    } else {
      past = mid;
    }
  }
  double sum = 0.0;
  for (int t = first; t < tensors.count && tensors.start[t] < hi; ++t) {
    i64 start = tensors.start[t], end = tensors.start[t + 1];
    i64 from = lo > start ? lo : start, to = hi < end ? hi : end;
    const float *x = tensors.data[t] + (from - start);
    i64 n = to - from, stride = blockDim.x, i = threadIdx.x;
    // Four loads in flight before the four additions (in element order,
    // as one at a time would add them): the walk is latency-bound else.
    for (; i + 3 * stride < n; i += 4 * stride) {
      double v0 = double(x[i]), v1 = double(x[i + stride]);
      double v2 = double(x[i + 2 * stride]), v3 = double(x[i + 3 * stride]);
      sum += v0 * v0;
      sum += v1 * v1;
      sum += v2 * v2;
      sum += v3 * v3;
    }
    for (; i < n; i += stride) {
      double v = double(x[i]);
      sum += v * v;
    }
  }
  double block = blockSumF64<kNormThreads>(sum);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = tensors.carry ? partials[blockIdx.x] + block : block;
  }
}

TL_DEVICE void globalNormFinish(const double *partials, int count,
                                float *out) {
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    sum += partials[i];
  }
  double total = blockSumF64<kNormFinishThreads>(sum);
  if (threadIdx.x == 0) {
    *out = float(sqrt(total));
  }
}

} // namespace opt
} // namespace tl

TL_GLOBAL void tailor_global_norm_partials_f32(tl::opt::NormTensors tensors,
                                               double *partials) {
  tl::opt::globalNormPartials(tensors, partials);
}
TL_REGISTER(tailor_global_norm_partials_f32)
TL_GLOBAL void tailor_global_norm_finish_f32(const double *partials, int count,
                                             float *out) {
  tl::opt::globalNormFinish(partials, count, out);
}
TL_REGISTER(tailor_global_norm_finish_f32)

namespace tl {
namespace opt {

//===----------------------------------------------------------------------===//
// adamw
//===----------------------------------------------------------------------===//

// param, grad, exp_avg, exp_avg_sq [n] f32; lr, step, grad_scale are device
// scalars (the schedule and the clipping factor are computed on the GPU), so
// the per-step constants are formed here: thread 0 of each block computes
// them in f64 exactly as the CPU kernel (torch's Python floats), rounds them
// to f32, and shares them through shared memory. The update is then the CPU
// kernel's, operation for operation, with fmaf exactly where it calls
// std::fma and rounded multiplies where nvcc would otherwise fuse: the same
// bits as the CPU except where CUDA's f64 pow (2 ulp) rounds a constant
// differently. The step must be >= 1 (the CPU kernel's run error; the
// trainer counts from 1). grad is zeroed for the next accumulation.
//
// One launch per parameter; the compiler groups an optimizer step's
// updates into adamw_multi (below) where their hyperparameters agree.

/// The step-independent constants, from the launch's attributes.
struct AdamWConfig {
  double beta1, beta2, weightDecay;
  float lerpWeight;    // 1 - beta1
  float beta2f;        // beta2
  float oneMinusBeta2; // 1 - beta2
  float epsilon;
  /// torch's lerp formula: start + w (end - start) when |w| < 0.5.
  int smallWeight;
};

struct AdamWStep {
  float decay, negStepSize, bias2Sqrt, gradScale;
};

TL_DEVICE void adamwElement(float &param, float &expAvg, float &expAvgSq,
                            float grad, const AdamWConfig &c,
                            const AdamWStep &s) {
  float g = mulRn(grad, s.gradScale);
  float p = mulRn(param, s.decay);
  float m = expAvg;
  if (c.smallWeight) {
    m = fmaf(c.lerpWeight, g - m, m);
  } else {
    m = fmaf(c.lerpWeight - 1.0f, g - m, g);
  }
  float v = fmaf(mulRn(c.oneMinusBeta2, g), g, mulRn(expAvgSq, c.beta2f));
  float denom = addRn(sqrtf(v) / s.bias2Sqrt, c.epsilon);
  param = addRn(p, mulRn(s.negStepSize, m) / denom);
  expAvg = m;
  expAvgSq = v;
}

/// The step's constants, formed by thread 0 of the block and shared: every
/// thread of the block must call it.
TL_DEVICE AdamWStep adamwStep(const float *lr, const i64 *step,
                              const float *gradScale, const AdamWConfig &c) {
  __shared__ float constants[4];
  if (threadIdx.x == 0) {
    double lrD = double(*lr), stepD = double(*step);
    double biasCorrection1 = 1.0 - pow(c.beta1, stepD);
    double biasCorrection2 = 1.0 - pow(c.beta2, stepD);
    constants[0] = float(1.0 - mulRnD(lrD, c.weightDecay));
    constants[1] = float(-(lrD / biasCorrection1));
    constants[2] = float(sqrt(biasCorrection2));
    constants[3] = *gradScale;
  }
  __syncthreads();
  AdamWStep s = {constants[0], constants[1], constants[2], constants[3]};
  return s;
}

/// The four elements of float4 number i (every pointer 16-byte aligned),
/// the gradient zeroed for the next accumulation.
TL_DEVICE void adamwFloat4(float *param, float *grad, float *expAvg,
                           float *expAvgSq, i64 i, const AdamWConfig &c,
                           const AdamWStep &s) {
  Float4 p = reinterpret_cast<const Float4 *>(param)[i];
  Float4 g = reinterpret_cast<const Float4 *>(grad)[i];
  Float4 m = reinterpret_cast<const Float4 *>(expAvg)[i];
  Float4 v = reinterpret_cast<const Float4 *>(expAvgSq)[i];
  Float4 zero = {{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    adamwElement(p.v[k], m.v[k], v.v[k], g.v[k], c, s);
  }
  reinterpret_cast<Float4 *>(param)[i] = p;
  reinterpret_cast<Float4 *>(grad)[i] = zero;
  reinterpret_cast<Float4 *>(expAvg)[i] = m;
  reinterpret_cast<Float4 *>(expAvgSq)[i] = v;
}

TL_DEVICE void adamw(float *param, float *grad, float *expAvg, float *expAvgSq,
                     const float *lr, const i64 *step, const float *gradScale,
                     i64 n, const AdamWConfig &c) {
  AdamWStep s = adamwStep(lr, step, gradScale, c);
  if (!finite(s.gradScale)) {
    zeroGradient(grad, n);
    return;
  }
  bool vector = aligned16(param) && aligned16(grad) && aligned16(expAvg) &&
                aligned16(expAvgSq);
  i64 head = 0;
  if (vector) {
    head = n / 4 * 4;
    for (i64 i = globalThread(); i < n / 4; i += gridThreads()) {
      adamwFloat4(param, grad, expAvg, expAvgSq, i, c, s);
    }
  }
  for (i64 i = head + globalThread(); i < n; i += gridThreads()) {
    adamwElement(param[i], expAvg[i], expAvgSq[i], grad[i], c, s);
    grad[i] = 0.0f;
  }
}

} // namespace opt
} // namespace tl

TL_GLOBAL void tailor_adamw_f32(float *param, float *grad, float *expAvg,
                                float *expAvgSq, const float *lr,
                                const long long *step, const float *gradScale,
                                long long n, tl::opt::AdamWConfig config) {
  tl::opt::adamw(param, grad, expAvg, expAvgSq, lr, step, gradScale, n, config);
}
TL_REGISTER(tailor_adamw_f32)

namespace tl {
namespace opt {

//===----------------------------------------------------------------------===//
// adamw_multi
//===----------------------------------------------------------------------===//

// Many parameters' AdamW updates in one launch (torch's multi-tensor
// "foreach" AdamW), for LoRA's hundreds of small tensors, where one launch
// each costs more than the update. The parameters' elements are cut into
// tiles of kAdamWTile (one Float4 per thread of a kAdamWThreads block),
// numbered tensor after tensor (`tileStart`: a tensor's first tile, the
// launcher's prefix sum), and the blocks walk the tiles grid-stride, so a
// block's tensor index only moves forward. Each element's update is adamw's
// (adamwElement with the same per-step constants), so the bits are the
// per-tensor kernel's; the vector path is taken per tensor, when its four
// pointers are 16-byte aligned, and per element the paths agree.
//
// The tensors are passed by value in the kernel's parameters, at most
// kMaxAdamWTensors per launch (the parameters stay under 4 KiB); the
// launcher launches once per batch.

constexpr int kAdamWThreads = 256;
constexpr i64 kAdamWTile = 4 * kAdamWThreads;
constexpr int kMaxAdamWTensors = 64;

struct AdamWTensors {
  float *param[kMaxAdamWTensors];
  float *grad[kMaxAdamWTensors];
  float *expAvg[kMaxAdamWTensors];
  float *expAvgSq[kMaxAdamWTensors];
  i64 numel[kMaxAdamWTensors];
  /// tileStart[t]: the first tile of tensor t; tileStart[count]: all tiles.
  i64 tileStart[kMaxAdamWTensors + 1];
  int count;
};

/// Elements [begin, begin + 4) of one tensor, clipped to n.
TL_DEVICE void adamwQuad(float *param, float *grad, float *expAvg,
                         float *expAvgSq, i64 begin, i64 n, bool vector,
                         const AdamWConfig &c, const AdamWStep &s) {
  if (vector && begin + 4 <= n) {
    i64 i = begin / 4;
    adamwFloat4(param, grad, expAvg, expAvgSq, i, c, s);
    return;
  }
  for (i64 i = begin; i < begin + 4 && i < n; ++i) {
    adamwElement(param[i], expAvg[i], expAvgSq[i], grad[i], c, s);
    grad[i] = 0.0f;
  }
}

TL_DEVICE void adamwMulti(const AdamWTensors &t, const float *lr,
                          const i64 *step, const float *gradScale,
                          const AdamWConfig &c) {
  AdamWStep s = adamwStep(lr, step, gradScale, c);
  i64 tiles = t.tileStart[t.count];
  int j = 0;
  for (i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    while (tile >= t.tileStart[j + 1]) {
      ++j;
    }
    float *param = t.param[j], *grad = t.grad[j];
    float *expAvg = t.expAvg[j], *expAvgSq = t.expAvgSq[j];
    if (!finite(s.gradScale)) {
      i64 begin = (tile - t.tileStart[j]) * kAdamWTile;
      i64 end = begin + kAdamWTile < t.numel[j] ? begin + kAdamWTile
                                                 : t.numel[j];
      for (i64 i = begin + threadIdx.x; i < end; i += blockDim.x) {
        grad[i] = 0.0f;
      }
      continue;
    }
    bool vector = aligned16(param) && aligned16(grad) && aligned16(expAvg) &&
                  aligned16(expAvgSq);
    i64 begin = (tile - t.tileStart[j]) * kAdamWTile + 4 * i64(threadIdx.x);
    adamwQuad(param, grad, expAvg, expAvgSq, begin, t.numel[j], vector, c, s);
  }
}

} // namespace opt
} // namespace tl

TL_GLOBAL void tailor_adamw_multi_f32(tl::opt::AdamWTensors tensors,
                                      const float *lr, const long long *step,
                                      const float *gradScale,
                                      tl::opt::AdamWConfig config) {
  tl::opt::adamwMulti(tensors, lr, step, gradScale, config);
}
TL_REGISTER(tailor_adamw_multi_f32)

namespace tl {
namespace opt {

//===----------------------------------------------------------------------===//
// sgd
//===----------------------------------------------------------------------===//

// param, grad, momentum_buffer [n] f32; lr and grad_scale device scalars.
// torch.optim.SGD with dampening 0, as the CPU kernel computes it:
//   g = grad * grad_scale;  g = fma(param, weight_decay, g)   (decay)
//   b = buf * momentum + g  (two roundings);  buf = b          (momentum)
//   g = fma(b, momentum, g) (nesterov) or g = b
//   param = fma(g, -lr, param);  grad = 0
// `mode`: 0 no momentum (the buffer is untouched), 1 momentum, 2 nesterov.

TL_DEVICE void sgdElement(float &param, float &buf, float grad, float lr,
                          float weightDecay, float momentum, float gradScale,
                          int decay, int mode) {
  float g = mulRn(grad, gradScale);
  if (decay) {
    g = fmaf(param, weightDecay, g);
  }
  if (mode != 0) {
    float b = addRn(mulRn(buf, momentum), g);
    buf = b;
    g = mode == 2 ? fmaf(b, momentum, g) : b;
  }
  param = fmaf(g, -lr, param);
}

TL_DEVICE void sgd(float *param, float *grad, float *buf, const float *lrP,
                   const float *gradScaleP, i64 n, float weightDecay,
                   float momentum, int decay, int mode) {
  float lr = *lrP, gradScale = *gradScaleP;
  if (!finite(gradScale)) {
    zeroGradient(grad, n);
    return;
  }
  bool vector =
      aligned16(param) && aligned16(grad) && (mode == 0 || aligned16(buf));
  i64 head = 0;
  if (vector) {
    head = n / 4 * 4;
    for (i64 i = globalThread(); i < n / 4; i += gridThreads()) {
      Float4 p = reinterpret_cast<const Float4 *>(param)[i];
      Float4 g = reinterpret_cast<const Float4 *>(grad)[i];
      Float4 b = {{0.0f, 0.0f, 0.0f, 0.0f}};
      if (mode != 0) {
        b = reinterpret_cast<const Float4 *>(buf)[i];
      }
      Float4 zero = {{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        sgdElement(p.v[k], b.v[k], g.v[k], lr, weightDecay, momentum, gradScale,
                   decay, mode);
      }
      reinterpret_cast<Float4 *>(param)[i] = p;
      reinterpret_cast<Float4 *>(grad)[i] = zero;
      if (mode != 0) {
        reinterpret_cast<Float4 *>(buf)[i] = b;
      }
    }
  }
  for (i64 i = head + globalThread(); i < n; i += gridThreads()) {
    float b = mode != 0 ? buf[i] : 0.0f;
    sgdElement(param[i], b, grad[i], lr, weightDecay, momentum, gradScale,
               decay, mode);
    grad[i] = 0.0f;
    if (mode != 0) {
      buf[i] = b;
    }
  }
}

} // namespace opt
} // namespace tl

TL_GLOBAL void tailor_sgd_f32(float *param, float *grad, float *buf,
                              const float *lr, const float *gradScale,
                              long long n, float weightDecay, float momentum,
                              int decay, int mode) {
  tl::opt::sgd(param, grad, buf, lr, gradScale, n, weightDecay, momentum, decay,
               mode);
}
TL_REGISTER(tailor_sgd_f32)
