//===- OptimizerLaunchers.cpp - accumulate, zero, global_norm, adamw, sgd -===//
//
// Launchers of codegen/cuda/OptimizerKernels.cu. Operands, attributes and
// semantics are the CPU kernels' (runtime/cpu/README.md), with the same
// checks: everything is f32 except accumulate's value, which may be bf16.
// lr, step and grad_scale stay on the device (the schedule and the clipping
// factor are computed there), so the kernels read them and form the
// per-step constants themselves; the launchers pass only what the
// attributes fix. adamw and sgd update one parameter a launch; adamw_multi
// many (one launch per 64 of them).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"
#include "runtime/cuda/GlobalNormWorkspace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tailor::runtime::cuda {
namespace {

using cpu::expectDType;
using cpu::expectDTypeIn;
using cpu::expectRank;
using cpu::firstError;

constexpr unsigned kElementwiseThreads = 256;
/// Resident blocks per SM the update kernels get: each block computes the
/// step's constants once (f64 pow) and then loops.
constexpr int kUpdateBlocksPerSm = 8;

/// The layout of tl::opt::NormTensors in the device code, and its passes'
/// block sizes.
constexpr int kMaxNormTensors = 120;
constexpr unsigned kNormThreads = 256;
constexpr unsigned kNormFinishThreads = 1024;
struct NormTensors {
  const void *data[kMaxNormTensors];
  long long start[kMaxNormTensors + 1];
  int count;
  int carry;
};
static_assert(sizeof(NormTensors) == 1936, "must match tl::opt::NormTensors");

/// The layout of tl::opt::AdamWConfig in the device code.
struct AdamWConfig {
  double beta1, beta2, weightDecay;
  float lerpWeight, beta2f, oneMinusBeta2, epsilon;
  int smallWeight;
};
static_assert(sizeof(AdamWConfig) == 48, "must match tl::opt::AdamWConfig");

/// The layout of tl::opt::AdamWTensors in the device code, and its tiles.
constexpr int kMaxAdamWTensors = 64;
constexpr unsigned kAdamWThreads = 256;
constexpr long long kAdamWTile = 4 * kAdamWThreads;
struct AdamWTensors {
  void *param[kMaxAdamWTensors];
  void *grad[kMaxAdamWTensors];
  void *expAvg[kMaxAdamWTensors];
  void *expAvgSq[kMaxAdamWTensors];
  long long numel[kMaxAdamWTensors];
  long long tileStart[kMaxAdamWTensors + 1];
  int count;
};
static_assert(sizeof(AdamWTensors) == 3088,
              "must match tl::opt::AdamWTensors");

std::string launch(const CudaCall &call, const char *function, unsigned grid,
                   unsigned block, void **args) {
  return call.context->launch(function, Dim3{grid, 1, 1}, Dim3{block, 1, 1}, 0,
                              args);
}

/// Blocks of a streaming update over `n` elements taken 4 at a time.
unsigned updateBlocks(const CudaCall &call, int64_t n) {
  unsigned cap = static_cast<unsigned>(
      std::max(1, call.context->multiprocessors()) * kUpdateBlocksPerSm);
  return std::min(blocksFor((n + 3) / 4, kElementwiseThreads), cap);
}

//===----------------------------------------------------------------------===//
// accumulate
//===----------------------------------------------------------------------===//

std::string checkAccumulate(const KernelCall &call) {
  if (call.operands.size() != 2) {
    return findCpuKernel("accumulate")->check(call);
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  KernelCall view = call;
  view.operands[0].dtype = DType::F32;
  return findCpuKernel("accumulate")->check(view);
}

std::string launchAccumulate(const CudaCall &call) {
  const Tensor &value = call.operands[0];
  long long n = value.numel();
  if (n == 0) {
    return "";
  }
  const void *v = value.data;
  void *target = call.operands[1].data;
  void *args[] = {&v, &target, &n};
  return launch(call,
                value.dtype == DType::BF16 ? "tailor_accumulate_bf16"
                                           : "tailor_accumulate_f32",
                blocksFor(n, kElementwiseThreads), kElementwiseThreads, args);
}

//===----------------------------------------------------------------------===//
// zero
//===----------------------------------------------------------------------===//

std::string checkZero(const KernelCall &call) {
  return findCpuKernel("zero")->check(call);
}

/// cudaMemsetAsync on the launch's stream: the copy engine clears bytes
/// faster than a kernel would, and no device code is needed.
std::string launchZero(const CudaCall &call) {
  const Tensor &target = call.operands[0];
  return call.context->memsetZero(target.data, target.bytes());
}

//===----------------------------------------------------------------------===//
// global_norm
//===----------------------------------------------------------------------===//

/// t0 ... tn-1, out as the CPU kernel has them, then the f32 workspace the
/// plan sizes for the partials (GlobalNormWorkspace.h), which the CPU
/// kernel does not take.
std::string checkGlobalNorm(const KernelCall &call) {
  size_t n = call.operands.size();
  if (n < 3) {
    return "expected at least 3 operands (one or more tensors, the output "
           "and the workspace), got " +
           std::to_string(n);
  }
  const Tensor &workspace = call.operands[n - 1];
  if (workspace.shape.size() == 0) {
    return "operand " + std::to_string(n - 1) +
           " must be the workspace (rank 1), got a scalar: the plan was "
           "compiled without global_norm's CUDA workspace; recompile it";
  }
  if (auto e = firstError({expectDType(call, n - 1, DType::F32),
                           expectRank(call, n - 1, 1)});
      !e.empty()) {
    return e;
  }
  if (static_cast<int64_t>(workspace.bytes()) < globalNormWorkspaceBytes()) {
    return "global_norm needs " + std::to_string(globalNormWorkspaceBytes()) +
           " bytes of workspace, the plan gives " +
           std::to_string(workspace.bytes());
  }
  KernelCall view = call;
  view.operands.pop_back();
  return findCpuKernel("global_norm")->check(view);
}

/// Pass 1 once per batch of kMaxNormTensors tensors, each launch after the
/// first adding to the partials the previous one left; then pass 2.
std::string launchGlobalNorm(const CudaCall &call) {
  size_t inputs = call.operands.size() - 2;
  void *out = call.operands[inputs].data;
  void *partials = call.operands[inputs + 1].data;
  if (reinterpret_cast<uintptr_t>(partials) % alignof(double) != 0) {
    return "global_norm's workspace is not 8-byte aligned";
  }
  for (size_t begin = 0; begin < inputs; begin += kMaxNormTensors) {
    NormTensors tensors = {};
    size_t end = std::min(inputs, begin + kMaxNormTensors);
    long long start = 0;
    for (size_t i = begin; i < end; ++i) {
      tensors.data[i - begin] = call.operands[i].data;
      tensors.start[i - begin] = start;
      start += call.operands[i].numel();
    }
    tensors.count = static_cast<int>(end - begin);
    tensors.start[tensors.count] = start;
    tensors.carry = begin > 0 ? 1 : 0;
    void *args[] = {&tensors, &partials};
    if (auto e = launch(call, "tailor_global_norm_partials_f32",
                        static_cast<unsigned>(kGlobalNormBlocks), kNormThreads,
                        args);
        !e.empty()) {
      return e;
    }
  }
  int count = static_cast<int>(kGlobalNormBlocks);
  void *args[] = {&partials, &count, &out};
  return launch(call, "tailor_global_norm_finish_f32", 1, kNormFinishThreads,
                args);
}

//===----------------------------------------------------------------------===//
// adamw
//===----------------------------------------------------------------------===//

std::string checkAdamW(const KernelCall &call) {
  return findCpuKernel("adamw")->check(call);
}

/// The step-independent constants, rounded as the CPU kernel rounds them.
AdamWConfig adamwConfigOf(const Attributes &attrs) {
  AdamWConfig config = {};
  config.beta1 = attrs.getFloat("beta1", 0);
  config.beta2 = attrs.getFloat("beta2", 0);
  config.weightDecay = attrs.getFloat("weight_decay", 0);
  config.lerpWeight = static_cast<float>(1.0 - config.beta1);
  config.beta2f = static_cast<float>(config.beta2);
  config.oneMinusBeta2 = static_cast<float>(1.0 - config.beta2);
  config.epsilon = static_cast<float>(attrs.getFloat("epsilon", 0));
  config.smallWeight = std::fabs(config.lerpWeight) < 0.5f ? 1 : 0;
  return config;
}

std::string launchAdamW(const CudaCall &call) {
  long long n = call.operands[0].numel();
  if (n == 0) {
    return "";
  }
  AdamWConfig config = adamwConfigOf(call.attributes);
  void *param = call.operands[0].data, *grad = call.operands[1].data;
  void *expAvg = call.operands[2].data, *expAvgSq = call.operands[3].data;
  const void *lr = call.operands[4].data, *step = call.operands[5].data;
  const void *gradScale = call.operands[6].data;
  void *args[] = {&param, &grad,      &expAvg, &expAvgSq, &lr,
                  &step,  &gradScale, &n,      &config};
  return launch(call, "tailor_adamw_f32", updateBlocks(call, n),
                kElementwiseThreads, args);
}

//===----------------------------------------------------------------------===//
// adamw_multi
//===----------------------------------------------------------------------===//

std::string checkAdamWMulti(const KernelCall &call) {
  return findCpuKernel("adamw_multi")->check(call);
}

/// One launch per batch of kMaxAdamWTensors parameters, each over the
/// batch's tiles.
std::string launchAdamWMulti(const CudaCall &call) {
  size_t scalars = call.operands.size() - 3;
  AdamWConfig config = adamwConfigOf(call.attributes);
  const void *lr = call.operands[scalars].data;
  const void *step = call.operands[scalars + 1].data;
  const void *gradScale = call.operands[scalars + 2].data;
  size_t parameters = scalars / 4;
  for (size_t begin = 0; begin < parameters; begin += kMaxAdamWTensors) {
    AdamWTensors tensors = {};
    size_t end = std::min(parameters, begin + kMaxAdamWTensors);
    long long tiles = 0;
    for (size_t i = begin; i < end; ++i) {
      size_t t = i - begin;
      tensors.param[t] = call.operands[4 * i].data;
      tensors.grad[t] = call.operands[4 * i + 1].data;
      tensors.expAvg[t] = call.operands[4 * i + 2].data;
      tensors.expAvgSq[t] = call.operands[4 * i + 3].data;
      tensors.numel[t] = call.operands[4 * i].numel();
      tensors.tileStart[t] = tiles;
      tiles += (tensors.numel[t] + kAdamWTile - 1) / kAdamWTile;
    }
    tensors.count = static_cast<int>(end - begin);
    tensors.tileStart[tensors.count] = tiles;
    if (tiles == 0) {
      continue;
    }
    unsigned cap = static_cast<unsigned>(
        std::max(1, call.context->multiprocessors()) * kUpdateBlocksPerSm);
    unsigned blocks = static_cast<unsigned>(
        std::min<long long>(tiles, static_cast<long long>(cap)));
    void *args[] = {&tensors, &lr, &step, &gradScale, &config};
    if (auto e = launch(call, "tailor_adamw_multi_f32", blocks, kAdamWThreads,
                        args);
        !e.empty()) {
      return e;
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// sgd
//===----------------------------------------------------------------------===//

std::string checkSgd(const KernelCall &call) {
  return findCpuKernel("sgd")->check(call);
}

std::string launchSgd(const CudaCall &call) {
  long long n = call.operands[0].numel();
  if (n == 0) {
    return "";
  }
  const Attributes &attrs = call.attributes;
  double momentumD = attrs.getFloat("momentum", 0);
  double weightDecayD = attrs.getFloat("weight_decay", 0);
  int mode = momentumD == 0 ? 0 : attrs.getInt("nesterov", 0) != 0 ? 2 : 1;
  int decay = weightDecayD != 0 ? 1 : 0;
  float momentum = static_cast<float>(momentumD);
  float weightDecay = static_cast<float>(weightDecayD);
  void *param = call.operands[0].data, *grad = call.operands[1].data;
  void *buf = call.operands[2].data;
  const void *lr = call.operands[3].data, *gradScale = call.operands[4].data;
  void *args[] = {&param, &grad,        &buf,      &lr,    &gradScale,
                  &n,     &weightDecay, &momentum, &decay, &mode};
  return launch(call, "tailor_sgd_f32", updateBlocks(call, n),
                kElementwiseThreads, args);
}

const char *const kAccumulateFunctions[] = {"tailor_accumulate_f32",
                                            "tailor_accumulate_bf16", nullptr};
const char *const kGlobalNormFunctions[] = {
    "tailor_global_norm_partials_f32", "tailor_global_norm_finish_f32", nullptr};
const char *const kAdamWFunctions[] = {"tailor_adamw_f32", nullptr};
const char *const kAdamWMultiFunctions[] = {"tailor_adamw_multi_f32", nullptr};
const char *const kSgdFunctions[] = {"tailor_sgd_f32", nullptr};
const char *const kNoFunctions[] = {nullptr};

} // namespace

void addOptimizerCudaKernels(std::vector<CudaKernelDef> &table) {
  table.push_back({"accumulate", 2, checkAccumulate, launchAccumulate,
                   kAccumulateFunctions});
  table.push_back({"global_norm", -1, checkGlobalNorm, launchGlobalNorm,
                   kGlobalNormFunctions});
  table.push_back({"adamw", 7, checkAdamW, launchAdamW, kAdamWFunctions});
  table.push_back({"adamw_multi", -1, checkAdamWMulti, launchAdamWMulti,
                   kAdamWMultiFunctions});
  table.push_back({"sgd", 5, checkSgd, launchSgd, kSgdFunctions});
  table.push_back({"zero", 1, checkZero, launchZero, kNoFunctions});
}

} // namespace tailor::runtime::cuda
