//===- CudaOptimizerKernelsTest.cpp - CUDA optimizer kernels vs the CPU ---===//
//
// Every launcher of runtime/cuda/OptimizerLaunchers.cpp against the CPU
// kernel of the same name: accumulate (f32 and bf16 values), zero (and the
// bytes around its operand), global_norm (within an f32 ulp of the CPU and
// of the exact norm, the same bits run to run, over slices of many blocks
// and more tensors than one launch takes), and several AdamW and
// SGD steps in a row, each side carrying its own state, over the vectorized
// path with its tail and the misaligned scalar path, and adamw_multi
// against adamw per parameter. On the emulator the
// updates must agree bit for bit (same operations, same roundings); on a GPU
// CUDA's f64 pow may move AdamW's per-step constants by an ulp, so AdamW
// gets one ulp there.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/OptimizerKernels.cu"

#include "runtime/cuda/GlobalNormWorkspace.h"
#include "test/runtime/cuda/CudaTestUtil.h"

#include <cmath>
#include <cstring>

namespace tailor::runtime::cuda::testing {
namespace {

HostTensor f32Scalar(float v) {
  HostTensor t(DType::F32, {});
  *t.as<float>() = v;
  return t;
}

HostTensor i64Scalar(int64_t v) {
  HostTensor t(DType::I64, {});
  *t.as<int64_t>() = v;
  return t;
}

/// The CUDA launcher with operand i `offsets[i]` bytes past a 256-byte
/// aligned allocation (the kernels' unvectorized path when not a multiple
/// of 16), rounded up to a multiple of the operand's element size: a plan
/// never misaligns an element (an i64 step at 4 bytes is a misaligned
/// address on a GPU); the operands as left.
std::vector<HostTensor> runAtOffsets(TestBackend &backend,
                                     const std::string &kernel,
                                     std::vector<HostTensor> operands,
                                     std::vector<Attribute> attributes,
                                     const std::vector<size_t> &offsets) {
  const CudaKernelDef *def = findCudaKernel(kernel);
  CudaCall call;
  call.attributes = Attributes(std::move(attributes));
  call.context = &backend.context();
  for (size_t i = 0; i < operands.size(); ++i) {
    HostTensor &t = operands[i];
    Tensor device = t.tensor();
    size_t element = dtypeSize(t.dtype);
    size_t at = (offsets[i] + element - 1) / element * element;
    device.data = static_cast<char *>(backend.allocate(t.bytes() + at)) + at;
    backend.upload(device.data, t.data(), t.bytes());
    call.operands.push_back(device);
  }
  EXPECT_EQ(def->launch(call), "");
  EXPECT_EQ(backend.synchronize(), "");
  for (size_t i = 0; i < operands.size(); ++i) {
    backend.download(operands[i].data(), call.operands[i].data,
                     operands[i].bytes());
  }
  return operands;
}

/// runAtOffsets with every operand at `offset`.
std::vector<HostTensor> runAtOffset(TestBackend &backend,
                                    const std::string &kernel,
                                    std::vector<HostTensor> operands,
                                    std::vector<Attribute> attributes,
                                    size_t offset) {
  std::vector<size_t> offsets(operands.size(), offset);
  return runAtOffsets(backend, kernel, std::move(operands),
                      std::move(attributes), offsets);
}

/// |got - want| <= ulps * ulp(want) for every element, reporting the worst.
void expectWithinUlps(const HostTensor &got, const HostTensor &want, int ulps,
                      const std::string &what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  int64_t bad = 0, worst = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    float g = got.as<float>()[i], w = want.as<float>()[i];
    float ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
    if (!(std::fabs(g - w) <= ulps * ulp)) {
      ++bad;
      worst = worst < 0 ? i : worst;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": first at " << worst << ": cuda "
                    << (worst >= 0 ? got.at(worst) : 0) << " vs cpu "
                    << (worst >= 0 ? want.at(worst) : 0);
}

/// Bit for bit on the emulator; on a GPU an f64 pow may move a constant.
int allowedUlps(const TestBackend &backend) {
  return std::string(backend.name()) == "emulator" ? 0 : 1;
}

//===----------------------------------------------------------------------===//
// accumulate
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, AccumulateMatchesCpu) {
  HostTensor value = randomF32({5, 333}, 1), target = randomF32({5, 333}, 2);
  expectMatchesCpu(*backend, "accumulate", {value, target}, {}, {1}, {0, 0});
  expectMatchesCpu(*backend, "accumulate",
                   {converted(value, DType::BF16), target}, {}, {1}, {0, 0});
  expectMatchesCpu(*backend, "accumulate",
                   {HostTensor(DType::F32, {0}), HostTensor(DType::F32, {0})},
                   {}, {1}, {0, 0});
}

//===----------------------------------------------------------------------===//
// zero
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, ZeroMatchesCpu) {
  expectMatchesCpu(*backend, "zero", {randomF32({5, 333}, 7)}, {}, {0}, {0, 0});
  expectMatchesCpu(*backend, "zero", {randomF32({}, 8)}, {}, {0}, {0, 0});
  expectMatchesCpu(*backend, "zero", {HostTensor(DType::F32, {0})}, {}, {0},
                   {0, 0});
}

TEST_F(CudaKernelTest, ZeroClearsItsBytesAndNothingAround) {
  // Reference: every byte of the operand 0, the guard bytes around it (at
  // an odd offset into the allocation) unchanged.
  for (DType dtype : {DType::BF16, DType::F32, DType::I64}) {
    for (size_t offset : {size_t(0), size_t(6)}) {
      HostTensor target = converted(randomF32({3, 1001}, 9, 1, 2), dtype);
      std::vector<uint8_t> guard(target.bytes() + offset + 64);
      for (size_t i = 0; i < guard.size(); ++i) {
        guard[i] = static_cast<uint8_t>(0x80 | (i * 29 % 113));
      }
      void *device = backend->allocate(guard.size());
      backend->upload(device, guard.data(), guard.size());
      CudaCall call;
      call.context = &backend->context();
      Tensor operand = target.tensor();
      operand.data = static_cast<char *>(device) + offset;
      call.operands.push_back(operand);
      KernelCall check;
      check.operands = call.operands;
      ASSERT_EQ(findCudaKernel("zero")->check(check), "");
      ASSERT_EQ(findCudaKernel("zero")->launch(call), "");
      ASSERT_EQ(backend->synchronize(), "");
      std::vector<uint8_t> got(guard.size());
      backend->download(got.data(), device, got.size());
      std::vector<uint8_t> want = guard;
      std::fill(want.begin() + static_cast<std::ptrdiff_t>(offset),
                want.begin() +
                    static_cast<std::ptrdiff_t>(offset + target.bytes()),
                0);
      EXPECT_EQ(got, want) << dtypeName(dtype) << " at offset " << offset;
    }
  }
}

//===----------------------------------------------------------------------===//
// global_norm
//===----------------------------------------------------------------------===//

/// The CUDA operands of global_norm over `tensors`: the tensors, the output
/// and a workspace of the planned size whose bytes are garbage (NaN
/// patterns), so a partial the first pass fails to write shows.
std::vector<HostTensor> globalNormOperands(std::vector<HostTensor> tensors) {
  tensors.push_back(f32Scalar(-1));
  HostTensor workspace(DType::F32,
                       {globalNormWorkspaceBytes() / int64_t(sizeof(float))});
  std::memset(workspace.data(), 0xff, workspace.bytes());
  tensors.push_back(workspace);
  return tensors;
}

/// The CPU kernel's norm of `tensors` (no workspace there).
float cpuGlobalNorm(std::vector<HostTensor> tensors) {
  tensors.push_back(f32Scalar(-1));
  std::vector<HostTensor> out = runCpu("global_norm", tensors, {});
  return out.empty() ? NAN : *out.back().as<float>();
}

/// The CUDA launcher's norm of `tensors`.
float cudaGlobalNorm(TestBackend &backend, std::vector<HostTensor> tensors) {
  std::vector<HostTensor> ops = globalNormOperands(std::move(tensors));
  std::vector<HostTensor> out = runCuda(backend, "global_norm", ops, {});
  return out.size() < 2 ? NAN : *out[out.size() - 2].as<float>();
}

/// sqrt of the sum of squares in long double: what both should round.
float exactGlobalNorm(const std::vector<HostTensor> &tensors) {
  long double sum = 0;
  for (const HostTensor &t : tensors) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      long double v = t.as<float>()[i];
      sum += v * v;
    }
  }
  return static_cast<float>(std::sqrt(sum));
}

/// The CUDA norm is within one f32 ulp of the CPU kernel's and of the
/// exact one (the f64 sums differ far below f32 rounding), and two runs
/// give the same bits.
void checkGlobalNorm(TestBackend &backend,
                     const std::vector<HostTensor> &tensors) {
  float cuda = cudaGlobalNorm(backend, tensors);
  float cpu = cpuGlobalNorm(tensors);
  float exact = exactGlobalNorm(tensors);
  float ulp = std::nextafter(exact, INFINITY) - exact;
  EXPECT_LE(std::fabs(cuda - cpu), ulp) << "cuda " << cuda << " cpu " << cpu;
  EXPECT_LE(std::fabs(cuda - exact), ulp)
      << "cuda " << cuda << " exact " << exact;
  float again = cudaGlobalNorm(backend, tensors);
  EXPECT_EQ(std::memcmp(&cuda, &again, sizeof(float)), 0)
      << "run to run: " << cuda << " then " << again;
}

TEST_F(CudaKernelTest, GlobalNormMatchesCpu) {
  // Odd sizes, a scalar and an empty tensor among them.
  checkGlobalNorm(*backend, {randomF32({1001}, 3), randomF32({3, 7}, 4),
                             randomF32({}, 5), HostTensor(DType::F32, {0}),
                             randomF32({40000}, 6, -3, 3)});
  // One element: most blocks' slices are empty.
  checkGlobalNorm(*backend, {randomF32({1}, 7)});
  // Nothing at all: 0.
  EXPECT_EQ(cudaGlobalNorm(*backend, {HostTensor(DType::F32, {0})}), 0.0f);
}

TEST_F(CudaKernelTest, GlobalNormOverSlicesOfManyBlocks) {
  // ~600 elements per block of the first pass, each slice crossing tensor
  // boundaries somewhere, and values far apart in magnitude.
  checkGlobalNorm(*backend,
                  {randomF32({333, 1001}, 8, -1e-3f, 1e-3f),
                   randomF32({262147}, 9, -40, 40), randomF32({17}, 10)});
}

TEST_F(CudaKernelTest, GlobalNormOverMoreTensorsThanOneLaunchTakes) {
  // 250 tensors, some empty: three first-pass launches, each after the
  // first adding to the partials the previous one left.
  std::vector<HostTensor> tensors;
  for (int i = 0; i < 250; ++i) {
    tensors.push_back(i % 7 == 3 ? HostTensor(DType::F32, {0})
                                 : randomF32({17 + 13 * i}, 100 + i));
  }
  checkGlobalNorm(*backend, tensors);
}

//===----------------------------------------------------------------------===//
// adamw
//===----------------------------------------------------------------------===//

struct AdamWCase {
  double beta1, beta2, epsilon, weightDecay;
};

/// Four steps from the same state on both sides, fresh gradients each step.
void checkAdamWSteps(TestBackend &backend, const AdamWCase &c, int64_t n,
                     size_t offset) {
  std::vector<Attribute> attrs = {floatAttr("beta1", c.beta1),
                                  floatAttr("beta2", c.beta2),
                                  floatAttr("epsilon", c.epsilon),
                                  floatAttr("weight_decay", c.weightDecay)};
  HostTensor param = randomF32({n}, 10, -1, 1);
  HostTensor expAvg(DType::F32, {n}), expAvgSq(DType::F32, {n});
  std::vector<HostTensor> cpu = {param, HostTensor(), expAvg, expAvgSq};
  std::vector<HostTensor> gpu = cpu;
  for (int64_t step = 1; step <= 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    HostTensor grad = randomF32({n}, 20 + step, -2, 2);
    float lr = 1e-3f * float(step);
    std::vector<HostTensor> tail = {f32Scalar(lr), i64Scalar(step),
                                    f32Scalar(0.5f)};
    auto operands = [&](const std::vector<HostTensor> &state) {
      std::vector<HostTensor> ops = {state[0], grad, state[2], state[3]};
      ops.insert(ops.end(), tail.begin(), tail.end());
      return ops;
    };
    cpu = runCpu("adamw", operands(cpu), attrs);
    gpu = offset ? runAtOffset(backend, "adamw", operands(gpu), attrs, offset)
                 : runCuda(backend, "adamw", operands(gpu), attrs);
    int ulps = allowedUlps(backend);
    expectWithinUlps(gpu[0], cpu[0], ulps, "param");
    expectWithinUlps(gpu[2], cpu[2], ulps, "exp_avg");
    expectWithinUlps(gpu[3], cpu[3], ulps, "exp_avg_sq");
    expectWithinUlps(gpu[1], HostTensor(DType::F32, {n}), 0, "zeroed grad");
  }
}

TEST_F(CudaKernelTest, AdamWMatchesCpuOverSteps) {
  // beta1 0.9 takes torch's small-weight lerp, 0.3 the other formula.
  for (const AdamWCase &c :
       {AdamWCase{0.9, 0.999, 1e-8, 0.01}, AdamWCase{0.3, 0.5, 1e-6, 0.0}}) {
    SCOPED_TRACE("beta1 " + std::to_string(c.beta1));
    checkAdamWSteps(*backend, c, 1001, 0);
    checkAdamWSteps(*backend, c, 37, 4);
  }
}

//===----------------------------------------------------------------------===//
// adamw_multi
//===----------------------------------------------------------------------===//

/// Four steps of adamw_multi over parameters of `sizes` (operand group i at
/// byte offset `offsets[i]`), against adamw per parameter: the CUDA
/// launch bit for bit with the CUDA adamw (the same element update and
/// constants) on every backend, the CPU adamw_multi bit for bit with the
/// CPU adamw, and CUDA against the CPU as adamw is.
void checkAdamWMultiSteps(TestBackend &backend, const AdamWCase &c,
                          const std::vector<int64_t> &sizes,
                          const std::vector<size_t> &offsets) {
  std::vector<Attribute> attrs = {floatAttr("beta1", c.beta1),
                                  floatAttr("beta2", c.beta2),
                                  floatAttr("epsilon", c.epsilon),
                                  floatAttr("weight_decay", c.weightDecay)};
  size_t k = sizes.size();
  // Per parameter: param, grad (refilled each step), exp_avg, exp_avg_sq.
  std::vector<HostTensor> state;
  for (size_t i = 0; i < k; ++i) {
    state.push_back(randomF32({sizes[i]}, 200 + i, -1, 1));
    state.push_back(HostTensor());
    state.push_back(HostTensor(DType::F32, {sizes[i]}));
    state.push_back(HostTensor(DType::F32, {sizes[i]}));
  }
  std::vector<HostTensor> cpuSingle = state, cudaSingle = state,
                          cpuMulti = state, cudaMulti = state;
  for (int64_t step = 1; step <= 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<HostTensor> tail = {f32Scalar(1e-3f * float(step)),
                                    i64Scalar(step), f32Scalar(0.5f)};
    std::vector<HostTensor> grads;
    for (size_t i = 0; i < k; ++i) {
      grads.push_back(randomF32({sizes[i]}, 1000 * step + i, -2, 2));
    }
    for (size_t i = 0; i < k; ++i) {
      std::vector<HostTensor> one = {cpuSingle[4 * i], grads[i],
                                     cpuSingle[4 * i + 2],
                                     cpuSingle[4 * i + 3]};
      one.insert(one.end(), tail.begin(), tail.end());
      std::vector<HostTensor> cpu = runCpu("adamw", one, attrs);
      one[0] = cudaSingle[4 * i];
      one[2] = cudaSingle[4 * i + 2];
      one[3] = cudaSingle[4 * i + 3];
      std::vector<HostTensor> gpu = runCuda(backend, "adamw", one, attrs);
      ASSERT_EQ(cpu.size(), 7u);
      ASSERT_EQ(gpu.size(), 7u);
      for (size_t j : {0, 1, 2, 3}) {
        cpuSingle[4 * i + j] = cpu[j];
        cudaSingle[4 * i + j] = gpu[j];
      }
    }
    auto multiOperands = [&](std::vector<HostTensor> s) {
      for (size_t i = 0; i < k; ++i) {
        s[4 * i + 1] = grads[i];
      }
      s.insert(s.end(), tail.begin(), tail.end());
      return s;
    };
    std::vector<HostTensor> cpu =
        runCpu("adamw_multi", multiOperands(cpuMulti), attrs);
    std::vector<size_t> at;
    for (size_t i = 0; i < k; ++i) {
      at.insert(at.end(), 4, offsets[i]);
    }
    at.insert(at.end(), 3, 0);
    std::vector<HostTensor> gpu = runAtOffsets(
        backend, "adamw_multi", multiOperands(cudaMulti), attrs, at);
    ASSERT_EQ(cpu.size(), 4 * k + 3);
    ASSERT_EQ(gpu.size(), 4 * k + 3);
    int ulps = allowedUlps(backend);
    for (size_t i = 0; i < 4 * k; ++i) {
      std::string what = "parameter " + std::to_string(i / 4) + " operand " +
                         std::to_string(i % 4);
      expectWithinUlps(cpu[i], cpuSingle[i], 0, "cpu " + what);
      expectWithinUlps(gpu[i], cudaSingle[i], 0, "cuda " + what);
      expectWithinUlps(gpu[i], cpuSingle[i], ulps, "cuda vs cpu " + what);
    }
    cpuMulti.assign(cpu.begin(), cpu.begin() + 4 * k);
    cudaMulti.assign(gpu.begin(), gpu.begin() + 4 * k);
  }
}

TEST_F(CudaKernelTest, AdamWMultiMatchesAdamWPerParameter) {
  // Odd sizes, an empty parameter, one spanning several tiles (1024
  // elements each), misaligned parameters among aligned ones (the scalar
  // path beside the vector one in one launch).
  std::vector<int64_t> sizes = {1001, 37, 0, 5000, 1, 2048, 4};
  std::vector<size_t> offsets = {0, 4, 0, 0, 8, 0, 12};
  for (const AdamWCase &c :
       {AdamWCase{0.9, 0.999, 1e-8, 0.01}, AdamWCase{0.3, 0.5, 1e-6, 0.0}}) {
    SCOPED_TRACE("beta1 " + std::to_string(c.beta1));
    checkAdamWMultiSteps(*backend, c, sizes, offsets);
  }
}

TEST_F(CudaKernelTest, AdamWMultiOverMoreParametersThanOneLaunchTakes) {
  // 150 parameters: three launches of at most 64.
  std::vector<int64_t> sizes;
  std::vector<size_t> offsets;
  for (int i = 0; i < 150; ++i) {
    sizes.push_back(i % 11 == 5 ? 0 : 3 + 7 * i);
    offsets.push_back(i % 3 == 1 ? 4 : 0);
  }
  checkAdamWMultiSteps(*backend, AdamWCase{0.9, 0.999, 1e-8, 0.01}, sizes,
                       offsets);
}

//===----------------------------------------------------------------------===//
// sgd
//===----------------------------------------------------------------------===//

struct SgdCase {
  double momentum, weightDecay;
  int nesterov;
};

void checkSgdSteps(TestBackend &backend, const SgdCase &c, int64_t n,
                   size_t offset) {
  std::vector<Attribute> attrs = {floatAttr("momentum", c.momentum),
                                  floatAttr("weight_decay", c.weightDecay),
                                  intAttr("nesterov", c.nesterov)};
  // A zero buffer reproduces torch's first step; with momentum 0 the buffer
  // must stay untouched, so it starts as garbage there.
  HostTensor buf =
      c.momentum == 0 ? randomF32({n}, 30) : HostTensor(DType::F32, {n});
  std::vector<HostTensor> cpu = {randomF32({n}, 31), HostTensor(), buf};
  std::vector<HostTensor> gpu = cpu;
  for (int step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    HostTensor grad = randomF32({n}, 40 + step);
    auto operands = [&](const std::vector<HostTensor> &state) {
      return std::vector<HostTensor>{state[0], grad, state[2], f32Scalar(0.05f),
                                     f32Scalar(0.25f)};
    };
    cpu = runCpu("sgd", operands(cpu), attrs);
    gpu = offset ? runAtOffset(backend, "sgd", operands(gpu), attrs, offset)
                 : runCuda(backend, "sgd", operands(gpu), attrs);
    expectWithinUlps(gpu[0], cpu[0], 0, "param");
    expectWithinUlps(gpu[2], cpu[2], 0, "momentum_buffer");
    expectWithinUlps(gpu[1], HostTensor(DType::F32, {n}), 0, "zeroed grad");
  }
}

TEST_F(CudaKernelTest, SgdMatchesCpuOverSteps) {
  for (const SgdCase &c :
       {SgdCase{0, 0, 0}, SgdCase{0, 0.01, 0}, SgdCase{0.9, 0, 0},
        SgdCase{0.9, 0.01, 0}, SgdCase{0.9, 0.1, 1}}) {
    SCOPED_TRACE("momentum " + std::to_string(c.momentum) + " decay " +
                 std::to_string(c.weightDecay) + " nesterov " +
                 std::to_string(c.nesterov));
    checkSgdSteps(*backend, c, 1003, 0);
    checkSgdSteps(*backend, c, 21, 8);
  }
}

//===----------------------------------------------------------------------===//
// Skipped steps (fp16 loss scaling)
//===----------------------------------------------------------------------===//

/// `kernel` with a grad_scale of `scale` (NaN or inf: GradScaler found an
/// inf gradient) leaves every operand but the gradient as it was and zeroes
/// the gradient, on the CPU and here alike.
void expectSkipped(TestBackend &backend, const char *kernel,
                   std::vector<HostTensor> operands,
                   const std::vector<Attribute> &attrs, size_t gradIndex,
                   size_t stateCount) {
  std::vector<HostTensor> cpu = runCpu(kernel, operands, attrs);
  std::vector<HostTensor> gpu = runCuda(backend, kernel, operands, attrs);
  for (size_t i = 0; i < stateCount; ++i) {
    std::string what = std::string(kernel) + " operand " + std::to_string(i);
    if (i % 4 == gradIndex) {
      HostTensor zero(DType::F32, operands[i].shape);
      expectWithinUlps(cpu[i], zero, 0, "cpu " + what);
      expectWithinUlps(gpu[i], zero, 0, "cuda " + what);
    } else {
      expectWithinUlps(cpu[i], operands[i], 0, "cpu " + what);
      expectWithinUlps(gpu[i], operands[i], 0, "cuda " + what);
    }
  }
}

TEST_F(CudaKernelTest, UpdatesSkipOnANonFiniteGradScale) {
  std::vector<Attribute> adamwAttrs = {
      floatAttr("beta1", 0.9), floatAttr("beta2", 0.999),
      floatAttr("epsilon", 1e-8), floatAttr("weight_decay", 0.01)};
  for (float scale : {std::nanf(""), INFINITY}) {
    SCOPED_TRACE("grad_scale " + std::to_string(scale));
    // Sizes with a vector body and a scalar tail.
    expectSkipped(*backend, "adamw",
                  {randomF32({1001}, 50), randomF32({1001}, 51),
                   randomF32({1001}, 52), randomF32({1001}, 53, 0, 1),
                   f32Scalar(1e-3f), i64Scalar(3), f32Scalar(scale)},
                  adamwAttrs, 1, 4);
    std::vector<HostTensor> multi;
    for (int64_t size : {37, 5000, 0, 4}) {
      multi.push_back(randomF32({size}, 60 + size));
      multi.push_back(randomF32({size}, 61 + size));
      multi.push_back(randomF32({size}, 62 + size));
      multi.push_back(randomF32({size}, 63 + size, 0, 1));
    }
    const size_t states = multi.size();
    multi.push_back(f32Scalar(1e-3f));
    multi.push_back(i64Scalar(3));
    multi.push_back(f32Scalar(scale));
    expectSkipped(*backend, "adamw_multi", multi, adamwAttrs, 1, states);
    // sgd's operands are (param, grad, momentum_buffer): index 1 is the
    // gradient, and i % 4 == 1 still names it for three operands.
    expectSkipped(*backend, "sgd",
                  {randomF32({1003}, 70), randomF32({1003}, 71),
                   randomF32({1003}, 72), f32Scalar(0.05f), f32Scalar(scale)},
                  {floatAttr("momentum", 0.9), floatAttr("weight_decay", 0.01),
                   intAttr("nesterov", 0)},
                  1, 3);
  }
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

TEST(OptimizerCudaChecks, FollowTheCpuChecks) {
  HostTensor x = randomF32({8}, 50);
  EXPECT_EQ(checkCuda("accumulate", {converted(x, DType::BF16), x}, {}), "");
  EXPECT_EQ(checkCuda("accumulate", {x, converted(x, DType::BF16)}, {}),
            "operand 1 must be f32, got bf16");
  EXPECT_EQ(checkCuda("global_norm", {x}, {}),
            "expected at least 3 operands (one or more tensors, the output "
            "and the workspace), got 1");
  EXPECT_EQ(checkCuda("global_norm", {x, f32Scalar(0), f32Scalar(0)}, {}),
            "operand 2 must be the workspace (rank 1), got a scalar: the plan "
            "was compiled without global_norm's CUDA workspace; recompile it");
  EXPECT_EQ(checkCuda("global_norm", {x, f32Scalar(0), x}, {}),
            "global_norm needs 8192 bytes of workspace, the plan gives 32");
  std::vector<HostTensor> norm = globalNormOperands({x, x});
  EXPECT_EQ(checkCuda("global_norm", norm, {}), "");
  norm[1] = converted(x, DType::BF16);
  EXPECT_EQ(checkCuda("global_norm", norm, {}),
            "operand 1 must be f32, got bf16");
  std::vector<Attribute> adam = {floatAttr("beta1", 0.9),
                                 floatAttr("beta2", 0.999),
                                 floatAttr("epsilon", 1e-8),
                                 floatAttr("weight_decay", 0)};
  HostTensor y = randomF32({5}, 51);
  EXPECT_EQ(checkCuda("adamw_multi",
                      {x, x, x, x, y, y, y, y, f32Scalar(1), i64Scalar(1),
                       f32Scalar(1)},
                      adam),
            "");
  EXPECT_EQ(checkCuda("adamw_multi",
                      {x, x, x, y, f32Scalar(1), i64Scalar(1), f32Scalar(1)},
                      adam),
            "operand 3 must have shape [8], got [5]");
  EXPECT_EQ(checkCuda("adamw_multi",
                      {x, x, x, x, y, f32Scalar(1), i64Scalar(1),
                       f32Scalar(1)},
                      adam),
            "expected 4 operands per parameter (param, grad, exp_avg, "
            "exp_avg_sq) and then lr, step and grad_scale, got 8");
  EXPECT_EQ(checkCuda("sgd", {x, x, x, f32Scalar(1), f32Scalar(1)},
                      {floatAttr("momentum", 0), floatAttr("weight_decay", 0),
                       intAttr("nesterov", 1)}),
            "attribute 'nesterov' needs a non-zero 'momentum'");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
