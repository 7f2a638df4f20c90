//===- CudaTestUtil.h - CUDA launchers against the CPU kernels --*- C++ -*-===//
//
// The kernel tests of the CUDA backend run each launcher (runtime/cuda/) on
// one backend and compare what it writes with the CPU kernel of the same
// name (runtime/cpu/, the reference) on the same inputs:
//   - "emulator": device memory is host memory and the device functions are
//     codegen/cuda/*.cu compiled for the host, run by the SIMT emulator
//     (codegen/cuda/SimtEmulator.h); every machine;
//   - "cuda": a real GPU, with the cubin nvcc built for its SM; where no GPU
//     can be used every test skips with "no GPU for the cuda backend: ...".
// TAILOR_TEST_BACKEND picks one (default: emulator).
//
// A test TU includes the device files it exercises, e.g.
//   #include "codegen/cuda/NormalizationKernels.cu"
// (TAILOR_SIMT_EMULATOR is defined for it), which registers their entry
// points with the emulator.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TEST_RUNTIME_CUDA_CUDATESTUTIL_H
#define TAILOR_TEST_RUNTIME_CUDA_CUDATESTUTIL_H

#include "runtime/cpu/Kernel.h"
#include "runtime/cuda/CudaKernel.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tailor::runtime::cuda::testing {

/// Where launchers run: device memory, copies, and the LaunchContext.
class TestBackend {
public:
  virtual ~TestBackend() = default;
  virtual const char *name() const = 0;
  /// Zeroed device memory of `bytes` bytes, owned by the backend until it
  /// is destroyed.
  virtual void *allocate(size_t bytes) = 0;
  virtual void upload(void *device, const void *host, size_t bytes) = 0;
  virtual void download(void *host, const void *device, size_t bytes) = 0;
  /// The context launchers enqueue on; `halfCompute` as the plan would say.
  virtual LaunchContext &context() = 0;
  virtual void setHalfCompute(HalfCompute format) = 0;
  /// Waits for everything enqueued; "" or the first asynchronous error.
  virtual std::string synchronize() = 0;
};

/// The backend TAILOR_TEST_BACKEND names, or null with `why` set when it
/// cannot run here (tests then GTEST_SKIP() << why).
std::unique_ptr<TestBackend> makeBackend(std::string &why);

/// The "cuda" backend (CudaDeviceBackend.cpp): null with `why` starting
/// "no GPU for the cuda backend: " when none can be used.
std::unique_ptr<TestBackend> makeCudaDeviceBackend(std::string &why);

/// A host tensor of any runtime dtype (8-byte aligned storage).
struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint64_t> storage;

  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);
  int64_t numel() const;
  size_t bytes() const;
  void *data() { return storage.data(); }
  const void *data() const { return storage.data(); }
  template <typename T> T *as() { return reinterpret_cast<T *>(storage.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(storage.data());
  }
  /// Element i as a double (f32, f64, bf16, f16, integers, bool).
  double at(int64_t i) const;
  Tensor tensor();
};

/// Random f32 values, uniform in [lo, hi), seeded.
HostTensor randomF32(std::vector<int64_t> shape, uint64_t seed, float lo = -1,
                     float hi = 1);
/// Random integers in [lo, hi) as i64 (or i32), seeded.
HostTensor randomInts(std::vector<int64_t> shape, uint64_t seed, int64_t lo,
                      int64_t hi, DType dtype = DType::I64);
/// A copy converted to `dtype` (f32 <-> bf16 rounds to nearest even).
HostTensor converted(const HostTensor &tensor, DType dtype);

/// Attribute builders.
Attribute intAttr(const char *name, int64_t value);
Attribute floatAttr(const char *name, double value);
Attribute intsAttr(const char *name, std::vector<int64_t> values);
Attribute stringAttr(const char *name, std::string value);

/// How a launch compares with the CPU kernel.
struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-5;
};

/// Runs kernel `kernel` with `operands` (inputs, outputs and workspace, as
/// the plan orders them; outputs may hold initial values, for in-place and
/// accumulating kernels) twice: the CPU kernel on host copies, and the CUDA
/// launcher on `backend` (bf16 operands are fed to the CPU kernel as f32).
/// Then expects every operand listed in `compared` (operand indices) to
/// agree element-wise: |cuda - cpu| <= atol + rtol * |cpu|, reporting the
/// worst element. Operands not listed (workspaces) are not compared. Both
/// kernels' checks must accept the launch, and the launch must succeed.
void expectMatchesCpu(TestBackend &backend, const std::string &kernel,
                      std::vector<HostTensor> operands,
                      std::vector<Attribute> attributes,
                      std::vector<size_t> compared, Tolerance tolerance = {});

/// Runs only the CPU kernel `kernel` (bf16 operands as f32 copies, two
/// worker threads); returns the operands as it left them, or nothing after
/// failing the test on a check or run error.
std::vector<HostTensor> runCpu(const std::string &kernel,
                               std::vector<HostTensor> operands,
                               std::vector<Attribute> attributes);

/// Runs the CUDA launcher `kernel` with every device operand `shift`
/// elements past a 16-byte boundary (the unaligned paths the harness's own
/// copies never take); output `alias.first` shares input `alias.second`'s
/// buffer when they differ. Returns every operand as the launch left it.
std::vector<HostTensor> runShifted(TestBackend &backend,
                                   const std::string &kernel,
                                   std::vector<HostTensor> operands,
                                   std::vector<Attribute> attributes,
                                   size_t shift,
                                   std::pair<size_t, size_t> alias = {0, 0});

/// Expects `got` and `want` to hold the same values, element for element.
void expectSameBits(const HostTensor &got, const HostTensor &want);

/// Runs only the CUDA launcher; returns the operands as they were left.
/// Fails the test (ADD_FAILURE) on a check or launch error.
std::vector<HostTensor> runCuda(TestBackend &backend, const std::string &kernel,
                                std::vector<HostTensor> operands,
                                std::vector<Attribute> attributes);

/// Runs only the CUDA launcher as plan step `step` and returns the device
/// error record the launch left (clear when every index was in range),
/// clearing it on the device; `operands` come back as the launch left
/// them. Fails the test on a check or launch error.
DeviceErrorRecord runCudaForError(TestBackend &backend,
                                  const std::string &kernel,
                                  std::vector<HostTensor> &operands,
                                  std::vector<Attribute> attributes, int step);

/// What running the CUDA launcher fails with, "" when it succeeds: a check
/// or launch error, or the message of the device error record it set
/// (describeDeviceError, as the runtime reports it after its step name).
std::string cudaLaunchError(TestBackend &backend, const std::string &kernel,
                            std::vector<HostTensor> operands,
                            std::vector<Attribute> attributes);

/// The CPU kernel's run error for these operands ("" when it runs; bf16
/// operands as f32 copies). Fails the test when its check rejects them.
std::string cpuRunError(const std::string &kernel,
                        std::vector<HostTensor> operands,
                        std::vector<Attribute> attributes);

/// Expects a launch of `kernel` (as plan step `want.site`) whose operands
/// hold exactly one bad value to leave the device error record `want`,
/// field for field, to clear it when taken, and, launched again, to fail
/// with describeDeviceError(want).
void expectDeviceError(TestBackend &backend, const std::string &kernel,
                       std::vector<HostTensor> operands,
                       std::vector<Attribute> attributes,
                       const DeviceErrorRecord &want);

/// The CUDA launcher's check message for a launch ("" when accepted).
std::string checkCuda(const std::string &kernel, std::vector<HostTensor> operands,
                      std::vector<Attribute> attributes);

/// A fixture whose tests skip when the selected backend is unavailable.
class CudaKernelTest : public ::testing::Test {
protected:
  void SetUp() override;
  std::unique_ptr<TestBackend> backend;
};

} // namespace tailor::runtime::cuda::testing

#endif // TAILOR_TEST_RUNTIME_CUDA_CUDATESTUTIL_H
