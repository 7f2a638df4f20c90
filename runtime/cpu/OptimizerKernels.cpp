//===- OptimizerKernels.cpp - accumulation, global norm, optimizers -------===//
//
// The kernels of a training step that turn gradients into an update:
// gradient accumulation across micro-batches (and `zero`, which clears an
// accumulator), the global gradient norm (for clipping) and the AdamW (one
// parameter, or many in one launch) and SGD updates. All f32, dense and
// row-major like every CPU kernel.
//
// None of them depends on the thread count. Elements are independent, and
// global_norm's sum is formed in double over pieces whose bounds come from
// the shapes alone, added in a fixed order.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

#include <algorithm>
#include "runtime/cpu/VectorMath.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tailor::runtime::cpu {
namespace {

/// Operands [begin, end) are f32 and shaped like operand `begin`.
std::string expectF32Like(const KernelCall &call, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
    if (auto e = expectShape(call, i, call.operands[begin].shape); !e.empty()) {
      return e;
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// accumulate
//===----------------------------------------------------------------------===//
//
// value, target (f32, one shape): target += value, in place on target (the
// output operand). Gradient accumulation across micro-batches; elementwise,
// so chunks on the pool cannot change a bit.

std::string checkAccumulate(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  return expectF32Like(call, 0, 2);
}

TAILOR_VECTOR_CLONES void accumulateLoop(const float *value, float *target,
                                         int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    target[i] += value[i];
  }
}

std::string runAccumulate(const KernelCall &call) {
  const float *value = call.operands[0].as<float>();
  float *target = call.operands[1].as<float>();
  parallelFor(call, call.operands[0].numel(), kElementwiseGrain,
              [&](int64_t begin, int64_t end, int) {
                accumulateLoop(value + begin, target + begin, end - begin);
              });
  return "";
}

//===----------------------------------------------------------------------===//
// zero
//===----------------------------------------------------------------------===//
//
// target (any dtype and shape): every byte set to 0, in place. ZeRO-1
// clears the full gradient accumulators once they are reduce-scattered, so
// the next step accumulates from +0 (the bit pattern of +0 in every dtype).
// A memset per chunk on the pool: bytes are independent.

std::string checkZero(const KernelCall &call) {
  return expectOperandCount(call, 1);
}

std::string runZero(const KernelCall &call) {
  auto *target = static_cast<uint8_t *>(call.operands[0].data);
  int64_t bytes = static_cast<int64_t>(call.operands[0].bytes());
  parallelFor(call, bytes, kElementwiseGrain * 4,
              [&](int64_t begin, int64_t end, int) {
                std::memset(target + begin, 0,
                            static_cast<size_t>(end - begin));
              });
  return "";
}

//===----------------------------------------------------------------------===//
// global_norm
//===----------------------------------------------------------------------===//
//
// t0 ... tn-1 (f32, any shapes), out (rank-0 f32): sqrt of the sum of
// squares of every element, for gradient clipping. Each tensor is cut into
// pieces of kNormChunk elements (the last one shorter), each piece's sum of
// squares is taken in double on the pool, and the pieces are added in
// tensor and offset order, so the result depends on the shapes only. Pieces
// go out in batches of kNormBatch, whose partial sums live on the stack: the
// kernel allocates nothing however many tensors it is given.

constexpr int64_t kNormChunk = 16384;
constexpr int64_t kNormBatch = 256;

std::string checkGlobalNorm(const KernelCall &call) {
  size_t n = call.operands.size();
  if (n < 2) {
    return "expected at least 2 operands (one or more tensors and the "
           "output), got " +
           std::to_string(n);
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
  }
  return expectScalar(call, n - 1, DType::F32);
}

TAILOR_VECTOR_CLONES double sumSquares(const float *x, int64_t n) {
  double sum = 0;
  TAILOR_SIMD(reduction(+ : sum))
  for (int64_t i = 0; i < n; ++i) {
    double v = static_cast<double>(x[i]);
    sum += v * v;
  }
  return sum;
}

std::string runGlobalNorm(const KernelCall &call) {
  size_t inputs = call.operands.size() - 1;
  const float *chunkData[kNormBatch];
  int64_t chunkLength[kNormBatch];
  double partial[kNormBatch];
  double total = 0;
  size_t tensor = 0;
  int64_t offset = 0;
  while (true) {
    int64_t count = 0;
    while (count < kNormBatch && tensor < inputs) {
      const Tensor &t = call.operands[tensor];
      int64_t numel = t.numel();
      if (offset >= numel) {
        ++tensor;
        offset = 0;
        continue;
      }
      chunkData[count] = t.as<float>() + offset;
      chunkLength[count] = std::min(kNormChunk, numel - offset);
      offset += chunkLength[count];
      ++count;
    }
    if (count == 0) {
      break;
    }
    parallelFor(call, count, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t c = begin; c < end; ++c) {
        partial[c] = sumSquares(chunkData[c], chunkLength[c]);
      }
    });
    for (int64_t c = 0; c < count; ++c) {
      total += partial[c];
    }
  }
  *call.operands[inputs].as<float>() = static_cast<float>(std::sqrt(total));
  return "";
}

//===----------------------------------------------------------------------===//
// adamw, sgd
//===----------------------------------------------------------------------===//
//
// Both reproduce torch.optim's single-tensor (for-loop) implementation on
// f32 tensors operation for operation: the per-step constants are Python
// floats there, so they are doubles here, rounded to f32 where torch hands
// them to a tensor op; every tensor op is an f32 operation. Where
// PyTorch's vectorized CPU kernels compute a multiply-add with one rounding
// (lerp, add with alpha, addcmul) this code calls std::fma, and nowhere
// else: the section is compiled without floating-point contraction so the
// compiler fuses nothing torch does not. Checked against torch 2.x on
// AVX-512 this agrees bit for bit except where torch's (MKL) sqrt is one ulp
// off the correctly rounded one. `grad` is the gradient accumulator: it is
// scaled by grad_scale (1 / micro-batches, or a clipping factor) on read
// and zeroed after the update, ready for the next accumulation. (The
// baseline clone calls libm's fma per element; the x86-64-v3 one, which
// every AVX2 machine runs, vectorizes it.)
//
// A non-finite grad_scale skips the update (torch.amp.GradScaler's skipped
// step, tailor-optimizer's `loss-scaling`): the accumulator is zeroed for
// the next step and the parameter and its state are left as they were.

// Clang's pragma holds to the end of the file, which has nothing else to
// fuse; GCC's is popped after sgd.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

/// Per-step constants of one AdamW update, as torch rounds them.
struct AdamWStep {
  float decay;         // 1 - lr * weight_decay
  float lerpWeight;    // 1 - beta1
  float beta2;         // beta2
  float oneMinusBeta2; // 1 - beta2
  float negStepSize;   // -lr / (1 - beta1^step)
  float bias2Sqrt;     // sqrt(1 - beta2^step)
  float epsilon;
  float gradScale;
};

/// torch's lerp picks its formula by the weight: start + w (end - start)
/// below 0.5, end - (end - start)(1 - w) above, each one fused multiply-add
/// in the vectorized kernel.
template <bool SmallWeight>
TAILOR_VECTOR_CLONES void adamwLoop(float *param, float *grad, float *expAvg,
                                    float *expAvgSq, int64_t n,
                                    const AdamWStep &s) {
  const float decay = s.decay, w = s.lerpWeight, b2 = s.beta2,
              c2 = s.oneMinusBeta2, negStep = s.negStepSize,
              bias2 = s.bias2Sqrt, eps = s.epsilon, gs = s.gradScale;
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * gs;
    float p = param[i] * decay;
    float m = expAvg[i];
    if constexpr (SmallWeight) {
      m = std::fma(w, g - m, m);
    } else {
      m = std::fma(w - 1.0f, g - m, g);
    }
    float v = std::fma(c2 * g, g, expAvgSq[i] * b2);
    float denom = std::sqrt(v) / bias2 + eps;
    param[i] = p + negStep * m / denom;
    expAvg[i] = m;
    expAvgSq[i] = v;
    grad[i] = 0.0f;
  }
}

/// lr, step and grad_scale at operands `scalars` ... `scalars` + 2, and the
/// attributes, as adamw and adamw_multi share them.
std::string checkAdamWScalars(const KernelCall &call, size_t scalars) {
  if (auto e = expectScalar(call, scalars, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectScalar(call, scalars + 1, DType::I64); !e.empty()) {
    return e;
  }
  if (auto e = expectScalar(call, scalars + 2, DType::F32); !e.empty()) {
    return e;
  }
  double value = 0;
  for (const char *beta : {"beta1", "beta2"}) {
    if (auto e = expectFloatInRange(call, beta, 0.0, 1.0, value); !e.empty()) {
      return e;
    }
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (const char *name : {"epsilon", "weight_decay"}) {
    if (auto e = expectFloatInRange(call, name, 0.0, kInf, value); !e.empty()) {
      return e;
    }
  }
  return "";
}

std::string checkAdamW(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 7); !e.empty()) {
    return e;
  }
  if (auto e = expectF32Like(call, 0, 4); !e.empty()) {
    return e;
  }
  return checkAdamWScalars(call, 4);
}

/// The step's constants from the attributes and the scalars at operands
/// `scalars` ... `scalars` + 2 (lr, step, grad_scale); "" or why not.
std::string adamwStepOf(const KernelCall &call, size_t scalars,
                        AdamWStep &s) {
  int64_t step = scalarOperand<int64_t>(call, scalars + 1);
  if (step < 1) {
    return "adamw step is " + std::to_string(step) +
           ", expected a 1-based update count";
  }
  const Attributes &attrs = call.attributes;
  double beta1 = attrs.getFloat("beta1", 0);
  double beta2 = attrs.getFloat("beta2", 0);
  double lr = scalarOperand<float>(call, scalars);
  double biasCorrection1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  double biasCorrection2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  s.decay = static_cast<float>(1.0 - lr * attrs.getFloat("weight_decay", 0));
  s.lerpWeight = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.oneMinusBeta2 = static_cast<float>(1.0 - beta2);
  s.negStepSize = static_cast<float>(-(lr / biasCorrection1));
  // Python's `bias_correction2 ** 0.5`.
  s.bias2Sqrt = static_cast<float>(std::pow(biasCorrection2, 0.5));
  s.epsilon = static_cast<float>(attrs.getFloat("epsilon", 0));
  s.gradScale = scalarOperand<float>(call, scalars + 2);
  return "";
}

/// One parameter's update: param, grad, exp_avg, exp_avg_sq at operands
/// `first` ... `first` + 3.
void updateAdamW(const KernelCall &call, size_t first, const AdamWStep &s) {
  float *param = call.operands[first].as<float>();
  float *grad = call.operands[first + 1].as<float>();
  float *expAvg = call.operands[first + 2].as<float>();
  float *expAvgSq = call.operands[first + 3].as<float>();
  bool small = std::fabs(s.lerpWeight) < 0.5f;
  parallelFor(call, call.operands[first].numel(), kTranscendentalGrain,
              [&](int64_t begin, int64_t end, int) {
                if (small) {
                  adamwLoop<true>(param + begin, grad + begin, expAvg + begin,
                                  expAvgSq + begin, end - begin, s);
                } else {
                  adamwLoop<false>(param + begin, grad + begin, expAvg + begin,
                                   expAvgSq + begin, end - begin, s);
                }
              });
}

/// A skipped step's only effect: the accumulator at operand `index` is
/// cleared.
void zeroGradient(const KernelCall &call, size_t index) {
  std::memset(call.operands[index].data, 0, call.operands[index].bytes());
}

std::string runAdamW(const KernelCall &call) {
  if (!std::isfinite(scalarOperand<float>(call, 6))) {
    zeroGradient(call, 1);
    return "";
  }
  AdamWStep s;
  if (auto e = adamwStepOf(call, 4, s); !e.empty()) {
    return e;
  }
  updateAdamW(call, 0, s);
  return "";
}

// adamw_multi: (param, grad, exp_avg, exp_avg_sq) for each of k >= 1
// parameters, then lr, step, grad_scale; adamw's attributes. One launch
// for every parameter of an optimizer step that shares the
// hyperparameters (the compiler groups consecutive tg.adamw_update ops):
// each parameter's update is adamw's, with the same constants, so the bits
// are the per-parameter launches'. On the CPU it saves little; on CUDA one
// launch replaces k.

std::string checkAdamWMulti(const KernelCall &call) {
  size_t n = call.operands.size();
  if (n < 7 || (n - 3) % 4 != 0) {
    return "expected 4 operands per parameter (param, grad, exp_avg, "
           "exp_avg_sq) and then lr, step and grad_scale, got " +
           std::to_string(n);
  }
  for (size_t first = 0; first + 3 < n; first += 4) {
    if (auto e = expectF32Like(call, first, first + 4); !e.empty()) {
      return e;
    }
  }
  return checkAdamWScalars(call, n - 3);
}

/// Elements [begin, end) of the parameters of adamw_multi laid end to end
/// (`starts[k]`: where parameter k begins in that order): each piece is
/// updated with the loop adamw runs, so the bits are adamw's.
void updateAdamWRange(const KernelCall &call, const std::vector<int64_t> &starts,
                      int64_t begin, int64_t end, const AdamWStep &s) {
  bool small = std::fabs(s.lerpWeight) < 0.5f;
  size_t k = static_cast<size_t>(
      std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin() -
      1);
  for (; begin < end; ++k) {
    int64_t offset = begin - starts[k];
    int64_t stop = std::min(end, starts[k + 1]);
    float *param = call.operands[4 * k].as<float>() + offset;
    float *grad = call.operands[4 * k + 1].as<float>() + offset;
    float *expAvg = call.operands[4 * k + 2].as<float>() + offset;
    float *expAvgSq = call.operands[4 * k + 3].as<float>() + offset;
    if (small) {
      adamwLoop<true>(param, grad, expAvg, expAvgSq, stop - begin, s);
    } else {
      adamwLoop<false>(param, grad, expAvg, expAvgSq, stop - begin, s);
    }
    begin = stop;
  }
}

std::string runAdamWMulti(const KernelCall &call) {
  size_t scalars = call.operands.size() - 3;
  if (!std::isfinite(scalarOperand<float>(call, scalars + 2))) {
    for (size_t first = 0; first < scalars; first += 4) {
      zeroGradient(call, first + 1);
    }
    return "";
  }
  AdamWStep s;
  if (auto e = adamwStepOf(call, scalars, s); !e.empty()) {
    return e;
  }
  // One parallel loop over every parameter's elements end to end, not one
  // per parameter: a LoRA step updates hundreds of small tensors, where a
  // dispatch per tensor would cost more than the update.
  std::vector<int64_t> starts = {0};
  for (size_t first = 0; first < scalars; first += 4) {
    starts.push_back(starts.back() + call.operands[first].numel());
  }
  parallelFor(call, starts.back(), kTranscendentalGrain,
              [&](int64_t begin, int64_t end, int) {
                updateAdamWRange(call, starts, begin, end, s);
              });
  return "";
}

/// How sgd uses its momentum buffer.
enum class Momentum { Off, Plain, Nesterov };

/// torch: grad.add(param, alpha=weight_decay); buf.mul_(momentum)
/// .add_(grad) (two roundings); grad.add(buf, alpha=momentum) for Nesterov;
/// param.add_(grad, alpha=-lr). Each add with alpha is one fma.
template <bool Decay, Momentum Mode>
TAILOR_VECTOR_CLONES void sgdLoop(float *param, float *grad, float *buf,
                                  int64_t n, float lr, float weightDecay,
                                  float momentum, float gradScale) {
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * gradScale;
    if constexpr (Decay) {
      g = std::fma(param[i], weightDecay, g);
    }
    if constexpr (Mode != Momentum::Off) {
      float b = buf[i] * momentum + g;
      buf[i] = b;
      if constexpr (Mode == Momentum::Nesterov) {
        g = std::fma(b, momentum, g);
      } else {
        g = b;
      }
    }
    param[i] = std::fma(g, -lr, param[i]);
    grad[i] = 0.0f;
  }
}

std::string checkSgd(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 5); !e.empty()) {
    return e;
  }
  if (auto e = expectF32Like(call, 0, 3); !e.empty()) {
    return e;
  }
  for (size_t i : {3, 4}) {
    if (auto e = expectScalar(call, i, DType::F32); !e.empty()) {
      return e;
    }
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double momentum = 0, weightDecay = 0;
  if (auto e = expectFloatInRange(call, "momentum", 0.0, kInf, momentum);
      !e.empty()) {
    return e;
  }
  if (auto e = expectFloatInRange(call, "weight_decay", 0.0, kInf, weightDecay);
      !e.empty()) {
    return e;
  }
  int64_t nesterov = 0;
  if (auto e = expectIntAttr(call, "nesterov", 0, 1, false, 0, nesterov);
      !e.empty()) {
    return e;
  }
  if (nesterov && momentum == 0) {
    return "attribute 'nesterov' needs a non-zero 'momentum'";
  }
  return "";
}

template <bool Decay>
void runSgdWith(const KernelCall &call, Momentum mode, float lr,
                float weightDecay, float momentum, float gradScale) {
  float *param = call.operands[0].as<float>();
  float *grad = call.operands[1].as<float>();
  float *buf = call.operands[2].as<float>();
  parallelFor(call, call.operands[0].numel(), kElementwiseGrain,
              [&](int64_t begin, int64_t end, int) {
                float *p = param + begin, *g = grad + begin, *b = buf + begin;
                int64_t n = end - begin;
                if (mode == Momentum::Off) {
                  sgdLoop<Decay, Momentum::Off>(p, g, b, n, lr, weightDecay,
                                                momentum, gradScale);
                } else if (mode == Momentum::Plain) {
                  sgdLoop<Decay, Momentum::Plain>(p, g, b, n, lr, weightDecay,
                                                  momentum, gradScale);
                } else {
                  sgdLoop<Decay, Momentum::Nesterov>(
                      p, g, b, n, lr, weightDecay, momentum, gradScale);
                }
              });
}

std::string runSgd(const KernelCall &call) {
  const Attributes &attrs = call.attributes;
  double momentum = attrs.getFloat("momentum", 0);
  double weightDecay = attrs.getFloat("weight_decay", 0);
  Momentum mode = momentum == 0                      ? Momentum::Off
                  : attrs.getInt("nesterov", 0) != 0 ? Momentum::Nesterov
                                                     : Momentum::Plain;
  float lr = scalarOperand<float>(call, 3);
  float gradScale = scalarOperand<float>(call, 4);
  if (!std::isfinite(gradScale)) {
    zeroGradient(call, 1);
    return "";
  }
  if (weightDecay != 0) {
    runSgdWith<true>(call, mode, lr, static_cast<float>(weightDecay),
                     static_cast<float>(momentum), gradScale);
  } else {
    runSgdWith<false>(call, mode, lr, 0.0f, static_cast<float>(momentum),
                      gradScale);
  }
  return "";
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

} // namespace

void addOptimizerKernels(std::vector<KernelDef> &table) {
  table.push_back({"accumulate", 2, checkAccumulate, runAccumulate});
  table.push_back({"global_norm", -1, checkGlobalNorm, runGlobalNorm});
  table.push_back({"adamw", 7, checkAdamW, runAdamW});
  table.push_back({"adamw_multi", -1, checkAdamWMulti, runAdamWMulti});
  table.push_back({"sgd", 5, checkSgd, runSgd});
  table.push_back({"zero", 1, checkZero, runZero});
}

} // namespace tailor::runtime::cpu
