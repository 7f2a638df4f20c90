//===- CudaOptimizerKernelsTest.cpp - CUDA optimizer kernels vs the CPU ---===//
//
// Every launcher of runtime/cuda/OptimizerLaunchers.cpp against the CPU
// kernel of the same name: accumulate (f32 and bf16 values), zero (and the
// bytes around its operand), global_norm
// (including more tensors than one launch takes), and several AdamW and
// SGD steps in a row, each side carrying its own state, over the vectorized
// path with its tail and the misaligned scalar path. On the emulator the
// updates must agree bit for bit (same operations, same roundings); on a GPU
// CUDA's f64 pow may move AdamW's per-step constants by an ulp, so AdamW
// gets one ulp there.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/OptimizerKernels.cu"

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

/// The CUDA launcher with every operand `offset` bytes past a 256-byte
/// aligned allocation (the kernels' unvectorized path when not a multiple
/// of 16), rounded up to a multiple of the operand's element size: a plan
/// never misaligns an element (an i64 step at 4 bytes is a misaligned
/// address on a GPU); the operands as left.
std::vector<HostTensor> runAtOffset(TestBackend &backend,
                                    const std::string &kernel,
                                    std::vector<HostTensor> operands,
                                    std::vector<Attribute> attributes,
                                    size_t offset) {
  const CudaKernelDef *def = findCudaKernel(kernel);
  CudaCall call;
  call.attributes = Attributes(std::move(attributes));
  call.context = &backend.context();
  for (HostTensor &t : operands) {
    Tensor device = t.tensor();
    size_t element = dtypeSize(t.dtype);
    size_t at = (offset + element - 1) / element * element;
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

TEST_F(CudaKernelTest, GlobalNormMatchesCpu) {
  std::vector<HostTensor> ops = {randomF32({1001}, 3), randomF32({3, 7}, 4),
                                 randomF32({}, 5), HostTensor(DType::F32, {0}),
                                 randomF32({40000}, 6, -3, 3)};
  ops.push_back(f32Scalar(-1));
  expectMatchesCpu(*backend, "global_norm", ops, {}, {ops.size() - 1},
                   {0, 1e-6});
}

TEST_F(CudaKernelTest, GlobalNormChainsLaunchesOverManyTensors) {
  // 130 tensors: two launches, the second adding to the first's sum.
  std::vector<HostTensor> ops;
  for (int i = 0; i < 130; ++i) {
    ops.push_back(randomF32({17 + i}, 100 + i));
  }
  ops.push_back(f32Scalar(0));
  expectMatchesCpu(*backend, "global_norm", ops, {}, {ops.size() - 1},
                   {0, 1e-6});
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
// Checks
//===----------------------------------------------------------------------===//

TEST(OptimizerCudaChecks, FollowTheCpuChecks) {
  HostTensor x = randomF32({8}, 50);
  EXPECT_EQ(checkCuda("accumulate", {converted(x, DType::BF16), x}, {}), "");
  EXPECT_EQ(checkCuda("accumulate", {x, converted(x, DType::BF16)}, {}),
            "operand 1 must be f32, got bf16");
  EXPECT_EQ(checkCuda("global_norm", {x}, {}),
            "expected at least 2 operands (one or more tensors and the "
            "output), got 1");
  EXPECT_EQ(checkCuda("sgd", {x, x, x, f32Scalar(1), f32Scalar(1)},
                      {floatAttr("momentum", 0), floatAttr("weight_decay", 0),
                       intAttr("nesterov", 1)}),
            "attribute 'nesterov' needs a non-zero 'momentum'");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
