//===- DeviceContext.h - one GPU, one loaded module, the GEMM library -*- C++ -*-===//
//
// The real LaunchContext: a CUDA device, the plan's device code loaded as
// CUDA libraries, one per module (cudaLibraryLoadData, so the runtime needs
// only the driver and its statically linked cudart), entry points resolved
// once by name, and
// cuBLASLt (dlopen'ed on first use) for GEMMs with the plan's workspace,
// and the device error record kernels report bad indices in
// (DeviceError.h): one cudaMalloc of 32 bytes, the only device memory the
// runtime allocates outside the plan's arenas (a fixed size, like the
// CUDA runtime's own). Sessions (CudaBackend.cpp) and the GPU kernel tests
// share it.
//
// The header needs no CUDA headers: streams travel as void *.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_DEVICECONTEXT_H
#define TAILOR_RUNTIME_CUDA_DEVICECONTEXT_H

#include "runtime/cuda/CudaKernel.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tailor::runtime::cuda {

class CublasLt;

/// What the driver says of a GPU.
struct DeviceProperties {
  int ordinal = 0;
  std::string name;
  int sm = 0;
  int multiprocessors = 0;
  uint64_t totalMemory = 0;
  uint64_t freeMemory = 0;
  size_t sharedPerBlockOptin = 0;
};

/// "" or a message naming the CUDA call and its error, e.g.
/// "cudaMalloc failed: cudaErrorMemoryAllocation (out of memory)".
std::string cudaCallError(const char *call, int error);

/// Picks and initializes GPU `ordinal` (cudaSetDevice) and describes it.
/// Errors say whether there is no driver, no GPU, or no such ordinal.
std::string openDevice(int ordinal, DeviceProperties &properties);

/// The device ordinal this process should use: TAILOR_CUDA_DEVICE, else
/// LOCAL_RANK (torchrun), else 0.
int defaultDeviceOrdinal();

class DeviceContext final : public LaunchContext {
public:
  /// A module's image: a cubin, or PTX text (null-terminated).
  struct Image {
    std::string module;
    const void *data = nullptr;
    size_t bytes = 0;
  };
  /// Loads `images` (one per module) on the current device.
  /// `gemmWorkspace` (device memory, may be null) is what every GEMM may use.
  static std::unique_ptr<DeviceContext>
  create(const DeviceProperties &device, const std::vector<Image> &images,
         void *gemmWorkspace, size_t gemmWorkspaceBytes, HalfCompute halfCompute,
         std::string &error);
  ~DeviceContext() override;

  /// Launches and GEMMs go to `stream` (a cudaStream_t) until changed.
  void setStream(void *stream) { current = stream; }

  std::string launch(const char *function, Dim3 grid, Dim3 block,
                     size_t sharedBytes, void **args) override;
  std::string gemm(const GemmDesc &desc) override;
  std::string memsetZero(void *device, size_t bytes) override;
  std::string copy(void *target, const void *source, size_t bytes) override;
  int multiprocessors() const override { return device.multiprocessors; }
  int sm() const override { return device.sm; }
  HalfCompute halfCompute() const override { return half; }
  void setHalfCompute(HalfCompute format) { half = format; }
  DeviceErrorRecord *errorRecord() override { return record; }
  /// Synchronous copy back (the legacy default stream, after the caller
  /// synchronized the streams it used), then a clear when set.
  std::string takeErrorRecord(DeviceErrorRecord &out) override;

  /// Whether the loaded module defines `function`.
  bool hasFunction(const char *function);

private:
  DeviceContext() = default;
  struct Function {
    void *kernel = nullptr; // cudaKernel_t
    size_t sharedLimit = 48 * 1024;
  };
  DeviceProperties device;
  std::vector<void *> libraries; // cudaLibrary_t, one per module
  std::map<std::string, Function> functions;
  std::unique_ptr<CublasLt> blas;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  void *current = nullptr;
  HalfCompute half = HalfCompute::None;
  DeviceErrorRecord *record = nullptr; // device memory, zeroed
};

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_DEVICECONTEXT_H
