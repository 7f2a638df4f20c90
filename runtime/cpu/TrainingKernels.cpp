//===- TrainingKernels.cpp - loss, dropout, accumulation, optimizers ------===//
//
// The kernels of a training step that are not the gradient of one forward
// op: cross_entropy and its gradient, dropout, gradient accumulation, the
// global gradient norm (for clipping) and the AdamW and SGD updates. All
// f32, dense and row-major like every CPU kernel.
//
// None of them depends on the thread count. Rows and elements are
// independent; the two sums over many values (cross_entropy's mean and sum,
// global_norm) are formed in double over pieces whose bounds come from the
// shapes alone, and the pieces are added in a fixed order. dropout's mask is
// a counter-based hash of (seed, salt, flat index), so the backward launch
// recomputes the forward mask from the same operands instead of storing it.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/VectorMath.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace tailor::runtime::cpu {
namespace {

/// The value of a rank-0 operand.
template <typename T> T scalarOperand(const KernelCall &call, size_t index) {
  return *call.operands[index].as<T>();
}

/// Operand `index` is a rank-0 tensor of `dtype`.
std::string expectScalar(const KernelCall &call, size_t index, DType dtype) {
  if (auto e = expectDType(call, index, dtype); !e.empty()) {
    return e;
  }
  return expectShape(call, index, {});
}

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

/// A double as printf's %g writes it: "0.9", "1e-08".
std::string formatFloat(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// Float attribute `name`, required, in [lo, hi) (NaN fails).
std::string expectFloatInRange(const KernelCall &call, const char *name,
                               double lo, double hi, double &value) {
  if (auto e = expectFloatAttr(call, name, true, 0, value); !e.empty()) {
    return e;
  }
  if (!(value >= lo && value < hi)) {
    std::string range = std::isinf(hi) ? ">= " + formatFloat(lo)
                                       : "in [" + formatFloat(lo) + ", " +
                                             formatFloat(hi) + ")";
    return std::string("attribute '") + name + "' is " + formatFloat(value) +
           ", expected a value " + range;
  }
  return "";
}

//===----------------------------------------------------------------------===//
// cross_entropy, cross_entropy_grad
//===----------------------------------------------------------------------===//
//
// logits [N, V] f32, labels [N] i32/i64, then the loss (or dloss) and the
// workspace (or dlogits). The loss is rank 0 for reduction mean and sum and
// [N] for none. Each row is logsumexp(x) - x[label], the max subtracted
// before exp and the exp-sum accumulated in double, which is torch's
// log_softmax + nll_loss up to rounding. Rows labelled ignore_index give 0
// and are not counted; the mean divides by the counted rows, and is 0 when
// there are none (torch gives NaN there, which would poison a training run
// whose batch is all padding). The per-row losses go to the workspace and
// are summed there in row order, so the sum is the same for any pool.
//
// The gradient is (softmax(x) - onehot(label)) * dloss_n, times 1 / count
// for the mean. Each row's max and exp-sum are taken before the row is
// written, so dlogits may be the logits buffer itself.

enum class Reduction { Mean, Sum, None };

/// The `reduction` attribute; absent reads as torch's default, mean.
std::string getReduction(const KernelCall &call, Reduction &reduction) {
  const Attribute *attr = call.attributes.find("reduction");
  reduction = Reduction::Mean;
  if (!attr) {
    return "";
  }
  if (attr->kind == Attribute::Kind::String) {
    if (attr->s == "mean") {
      return "";
    }
    if (attr->s == "sum") {
      reduction = Reduction::Sum;
      return "";
    }
    if (attr->s == "none") {
      reduction = Reduction::None;
      return "";
    }
  }
  return "attribute 'reduction' must be the string 'mean', 'sum' or 'none'";
}

int64_t getIgnoreIndex(const KernelCall &call) {
  return call.attributes.getInt("ignore_index", -100);
}

/// Shared by both kernels: `grad` selects dloss/dlogits for operands 2 and 3.
std::string checkCrossEntropyCall(const KernelCall &call, bool grad) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 0, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectRank(call, 0, 2); !e.empty()) {
    return e;
  }
  int64_t n = call.operands[0].shape[0];
  if (auto e = expectDTypeIn(call, 1, {DType::I32, DType::I64}); !e.empty()) {
    return e;
  }
  if (auto e = expectShape(call, 1, {n}); !e.empty()) {
    return e;
  }
  Reduction reduction;
  if (auto e = getReduction(call, reduction); !e.empty()) {
    return e;
  }
  int64_t ignore = 0;
  if (auto e = expectIntAttr(
          call, "ignore_index", std::numeric_limits<int64_t>::min(),
          std::numeric_limits<int64_t>::max(), false, -100, ignore);
      !e.empty()) {
    return e;
  }
  for (size_t i : {2, 3}) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
  }
  std::vector<int64_t> lossShape;
  if (reduction == Reduction::None) {
    lossShape = {n};
  }
  if (auto e = expectShape(call, 2, lossShape); !e.empty()) {
    return e + (reduction == Reduction::None ? " (reduction 'none')"
                                             : " (reduction 'mean' or 'sum')");
  }
  if (grad) {
    return expectShape(call, 3, call.operands[0].shape);
  }
  return expectShape(call, 3, {n});
}

std::string checkCrossEntropy(const KernelCall &call) {
  return checkCrossEntropyCall(call, false);
}
std::string checkCrossEntropyGrad(const KernelCall &call) {
  return checkCrossEntropyCall(call, true);
}

int64_t labelAt(const Tensor &labels, int64_t row) {
  if (labels.dtype == DType::I32) {
    return labels.as<int32_t>()[row];
  }
  return labels.as<int64_t>()[row];
}

/// Counts the rows that are not ignored, or reports the first label outside
/// [0, v). A serial scan in row order, so the error names the same row for
/// any pool; it is N integer reads next to N * V exps.
std::string countLabels(const Tensor &labels, int64_t v, int64_t ignore,
                        int64_t &count) {
  count = 0;
  int64_t n = labels.numel();
  for (int64_t r = 0; r < n; ++r) {
    int64_t label = labelAt(labels, r);
    if (label == ignore) {
      continue;
    }
    if (label < 0 || label >= v) {
      return "label " + std::to_string(label) + " at row " + std::to_string(r) +
             " is out of range [0, " + std::to_string(v) + ")";
    }
    ++count;
  }
  return "";
}

/// The row's max and its exp-sum relative to it.
TAILOR_VECTOR_CLONES void rowMaxExpSum(const float *x, int64_t v, float &max,
                                       double &sum) {
  float m = vmath::rowMax(x, v);
  double s = 0;
  TAILOR_SIMD(reduction(+ : s))
  for (int64_t i = 0; i < v; ++i) {
    s += static_cast<double>(vmath::exp(x[i] - m));
  }
  max = m;
  sum = s;
}

float crossEntropyRow(const float *x, int64_t v, int64_t label) {
  float m;
  double s;
  rowMaxExpSum(x, v, m, s);
  return static_cast<float>(static_cast<double>(m) + std::log(s) -
                            static_cast<double>(x[label]));
}

/// d = (softmax(x) - onehot(label)) * scale; d may be x.
TAILOR_VECTOR_CLONES void crossEntropyGradRow(const float *x, float *d,
                                              int64_t v, int64_t label,
                                              float scale) {
  float m;
  double s;
  rowMaxExpSum(x, v, m, s);
  float xl = x[label];
  float inv = static_cast<float>(1.0 / s);
  TAILOR_IVDEP
  for (int64_t i = 0; i < v; ++i) {
    d[i] = vmath::exp(x[i] - m) * inv * scale;
  }
  d[label] = (vmath::exp(xl - m) * inv - 1.0f) * scale;
}

std::string runCrossEntropy(const KernelCall &call) {
  const Tensor &logits = call.operands[0];
  const Tensor &labels = call.operands[1];
  int64_t n = logits.shape[0], v = logits.shape[1];
  Reduction reduction;
  (void)getReduction(call, reduction);
  int64_t ignore = getIgnoreIndex(call);
  int64_t count = 0;
  if (auto e = countLabels(labels, v, ignore, count); !e.empty()) {
    return e;
  }
  const float *x = logits.as<float>();
  float *loss = call.operands[2].as<float>();
  float *rowLoss =
      reduction == Reduction::None ? loss : call.operands[3].as<float>();
  int64_t grain =
      std::max<int64_t>(1, kTranscendentalGrain / std::max<int64_t>(v, 1));
  parallelFor(call, n, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t label = labelAt(labels, r);
      rowLoss[r] =
          label == ignore ? 0.0f : crossEntropyRow(x + r * v, v, label);
    }
  });
  if (reduction == Reduction::None) {
    return "";
  }
  double sum = 0;
  for (int64_t r = 0; r < n; ++r) {
    sum += static_cast<double>(rowLoss[r]);
  }
  if (reduction == Reduction::Mean) {
    sum = count ? sum / static_cast<double>(count) : 0.0;
  }
  *loss = static_cast<float>(sum);
  return "";
}

std::string runCrossEntropyGrad(const KernelCall &call) {
  const Tensor &logits = call.operands[0];
  const Tensor &labels = call.operands[1];
  int64_t n = logits.shape[0], v = logits.shape[1];
  Reduction reduction;
  (void)getReduction(call, reduction);
  int64_t ignore = getIgnoreIndex(call);
  int64_t count = 0;
  if (auto e = countLabels(labels, v, ignore, count); !e.empty()) {
    return e;
  }
  const float *x = logits.as<float>();
  const float *dloss = call.operands[2].as<float>();
  float *dx = call.operands[3].as<float>();
  // The per-row factor for mean and sum; none reads dloss[r].
  float scale = dloss[0];
  if (reduction == Reduction::Mean && count > 0) {
    scale = static_cast<float>(static_cast<double>(dloss[0]) /
                               static_cast<double>(count));
  }
  int64_t grain =
      std::max<int64_t>(1, kTranscendentalGrain / std::max<int64_t>(v, 1));
  parallelFor(call, n, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t label = labelAt(labels, r);
      if (label == ignore) {
        std::fill(dx + r * v, dx + (r + 1) * v, 0.0f);
        continue;
      }
      float rowScale = reduction == Reduction::None ? dloss[r] : scale;
      crossEntropyGradRow(x + r * v, dx + r * v, v, label, rowScale);
    }
  });
  return "";
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//
//
// x, seed (rank-0 i64), y like x; attributes p in [0, 1) and salt. Element i
// is kept when its uniform draw u(seed, salt, i) is >= p, and then scaled by
// 1 / (1 - p); y = x * (keep ? scale : 0), so NaN and the sign of zero
// propagate as in torch's `input * mask / (1 - p)`. The draw is SplitMix64
// (Steele et al.) at counter i of a stream whose key mixes seed and salt:
// stateless, so any chunking of the index range gives the same mask and the
// backward pass gets it back by running this kernel on dy with the same seed
// and salt. u takes the top 53 bits, and u >= p is compared in integers as
// bits >= ceil(p * 2^53), exact because the scaling is a power of two. y may
// alias x; p == 0 copies.

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

/// SplitMix64's output function (Stafford's Mix13).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t dropoutKey(int64_t seed, int64_t salt) {
  return mix64(mix64(static_cast<uint64_t>(seed)) ^
               (static_cast<uint64_t>(salt) * kGoldenGamma + 1));
}

TAILOR_VECTOR_CLONES void dropoutLoop(const float *x, float *y, int64_t begin,
                                      int64_t end, uint64_t key,
                                      uint64_t threshold, float scale) {
  TAILOR_IVDEP
  for (int64_t i = begin; i < end; ++i) {
    uint64_t bits = mix64(key + static_cast<uint64_t>(i) * kGoldenGamma);
    y[i] = x[i] * ((bits >> 11) >= threshold ? scale : 0.0f);
  }
}

std::string checkDropout(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 0, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectScalar(call, 1, DType::I64); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 2, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectShape(call, 2, call.operands[0].shape); !e.empty()) {
    return e;
  }
  double p = 0;
  if (auto e = expectFloatInRange(call, "p", 0.0, 1.0, p); !e.empty()) {
    return e;
  }
  int64_t salt = 0;
  return expectIntAttr(call, "salt", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max(), false, 0, salt);
}

std::string runDropout(const KernelCall &call) {
  const Tensor &tx = call.operands[0];
  const float *x = tx.as<float>();
  float *y = call.operands[2].as<float>();
  double p = call.attributes.getFloat("p", 0);
  if (p == 0) {
    if (x != y) {
      std::memcpy(y, x, tx.bytes());
    }
    return "";
  }
  uint64_t key = dropoutKey(scalarOperand<int64_t>(call, 1),
                            call.attributes.getInt("salt", 0));
  auto threshold = static_cast<uint64_t>(std::ceil(std::ldexp(p, 53)));
  // torch's mask / (1 - p): the f32 division of 1 by f32(1 - p).
  float scale = 1.0f / static_cast<float>(1.0 - p);
  parallelFor(call, tx.numel(), kTranscendentalGrain,
              [&](int64_t begin, int64_t end, int) {
                dropoutLoop(x, y, begin, end, key, threshold, scale);
              });
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

std::string checkAdamW(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 7); !e.empty()) {
    return e;
  }
  if (auto e = expectF32Like(call, 0, 4); !e.empty()) {
    return e;
  }
  if (auto e = expectScalar(call, 4, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectScalar(call, 5, DType::I64); !e.empty()) {
    return e;
  }
  if (auto e = expectScalar(call, 6, DType::F32); !e.empty()) {
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

std::string runAdamW(const KernelCall &call) {
  int64_t step = scalarOperand<int64_t>(call, 5);
  if (step < 1) {
    return "adamw step is " + std::to_string(step) +
           ", expected a 1-based update count";
  }
  const Attributes &attrs = call.attributes;
  double beta1 = attrs.getFloat("beta1", 0);
  double beta2 = attrs.getFloat("beta2", 0);
  double lr = scalarOperand<float>(call, 4);
  double biasCorrection1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  double biasCorrection2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  AdamWStep s;
  s.decay = static_cast<float>(1.0 - lr * attrs.getFloat("weight_decay", 0));
  s.lerpWeight = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.oneMinusBeta2 = static_cast<float>(1.0 - beta2);
  s.negStepSize = static_cast<float>(-(lr / biasCorrection1));
  // Python's `bias_correction2 ** 0.5`.
  s.bias2Sqrt = static_cast<float>(std::pow(biasCorrection2, 0.5));
  s.epsilon = static_cast<float>(attrs.getFloat("epsilon", 0));
  s.gradScale = scalarOperand<float>(call, 6);
  float *param = call.operands[0].as<float>();
  float *grad = call.operands[1].as<float>();
  float *expAvg = call.operands[2].as<float>();
  float *expAvgSq = call.operands[3].as<float>();
  bool small = std::fabs(s.lerpWeight) < 0.5f;
  parallelFor(call, call.operands[0].numel(), kTranscendentalGrain,
              [&](int64_t begin, int64_t end, int) {
                if (small) {
                  adamwLoop<true>(param + begin, grad + begin, expAvg + begin,
                                  expAvgSq + begin, end - begin, s);
                } else {
                  adamwLoop<false>(param + begin, grad + begin, expAvg + begin,
                                   expAvgSq + begin, end - begin, s);
                }
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

void addTrainingKernels(std::vector<KernelDef> &table) {
  table.push_back({"cross_entropy", 4, checkCrossEntropy, runCrossEntropy});
  table.push_back(
      {"cross_entropy_grad", 4, checkCrossEntropyGrad, runCrossEntropyGrad});
  table.push_back({"dropout", 3, checkDropout, runDropout});
  table.push_back({"accumulate", 2, checkAccumulate, runAccumulate});
  table.push_back({"global_norm", -1, checkGlobalNorm, runGlobalNorm});
  table.push_back({"adamw", 7, checkAdamW, runAdamW});
  table.push_back({"sgd", 5, checkSgd, runSgd});
}

} // namespace tailor::runtime::cpu
