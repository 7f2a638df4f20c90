//===- DeviceContext.cpp - CUDA library loading, launches, GEMMs ----------===//
//
// Built only with the CUDA toolkit. Uses the CUDA runtime's library API
// (CUDA 12+): the image is loaded once, entry points are fetched by name on
// first use and cached, and launches go through cudaLaunchKernel with the
// cudaKernel_t handle. Nothing here synchronizes: errors of enqueued work
// surface when the session synchronizes at the end of an entry.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceContext.h"

#include "runtime/cuda/CublasLt.h"

#include <cuda_runtime_api.h>

#include <cstdlib>

namespace tailor::runtime::cuda {

std::string cudaCallError(const char *call, int error) {
  auto code = static_cast<cudaError_t>(error);
  return std::string(call) + " failed: " + cudaGetErrorName(code) + " (" +
         cudaGetErrorString(code) + ")";
}

int defaultDeviceOrdinal() {
  for (const char *name : {"TAILOR_CUDA_DEVICE", "LOCAL_RANK"}) {
    if (const char *value = std::getenv(name); value && *value) {
      return std::atoi(value);
    }
  }
  return 0;
}

std::string openDevice(int ordinal, DeviceProperties &properties) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaErrorNoDevice || (error == cudaSuccess && count == 0)) {
    return "no CUDA GPU is visible to this process";
  }
  if (error == cudaErrorInsufficientDriver) {
    return "the NVIDIA driver is missing or too old for this runtime (built "
           "with CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
           std::to_string(CUDART_VERSION % 1000 / 10) + "): " +
           cudaCallError("cudaGetDeviceCount", error);
  }
  if (error != cudaSuccess) {
    return cudaCallError("cudaGetDeviceCount", error);
  }
  if (ordinal < 0 || ordinal >= count) {
    return "GPU " + std::to_string(ordinal) + " does not exist (this process "
           "sees " + std::to_string(count) + ")";
  }
  if ((error = cudaSetDevice(ordinal)) != cudaSuccess) {
    return cudaCallError("cudaSetDevice", error);
  }
  cudaDeviceProp prop;
  if ((error = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess) {
    return cudaCallError("cudaGetDeviceProperties", error);
  }
  size_t freeBytes = 0, totalBytes = 0;
  if ((error = cudaMemGetInfo(&freeBytes, &totalBytes)) != cudaSuccess) {
    return cudaCallError("cudaMemGetInfo", error);
  }
  properties.ordinal = ordinal;
  properties.name = prop.name;
  properties.sm = prop.major * 10 + prop.minor;
  properties.multiprocessors = prop.multiProcessorCount;
  properties.totalMemory = totalBytes;
  properties.freeMemory = freeBytes;
  properties.sharedPerBlockOptin = prop.sharedMemPerBlockOptin;
  return "";
}

std::unique_ptr<DeviceContext>
DeviceContext::create(const DeviceProperties &device,
                      const std::vector<Image> &images, void *gemmWorkspace,
                      size_t gemmWorkspaceBytes, HalfCompute halfCompute,
                      std::string &error) {
  std::unique_ptr<DeviceContext> context(new DeviceContext());
  context->device = device;
  context->workspace = gemmWorkspace;
  context->workspaceBytes = gemmWorkspaceBytes;
  context->half = halfCompute;
  for (const Image &image : images) {
    // The driver reads the image's own headers (ELF, or PTX text).
    cudaLibrary_t library = nullptr;
    cudaError_t status = cudaLibraryLoadData(&library, image.data, nullptr,
                                             nullptr, 0, nullptr, nullptr, 0);
    if (status != cudaSuccess) {
      error = "module '" + image.module + "': " +
              cudaCallError("cudaLibraryLoadData", status);
      return nullptr;
    }
    context->libraries.push_back(library);
  }
  // The error record: 32 bytes outside the plan's arenas (DeviceContext.h).
  void *record = nullptr;
  cudaError_t status = cudaMalloc(&record, sizeof(DeviceErrorRecord));
  if (status == cudaSuccess) {
    context->record = static_cast<DeviceErrorRecord *>(record);
    status = cudaMemset(record, 0, sizeof(DeviceErrorRecord));
  }
  if (status != cudaSuccess) {
    error = "the device error record: " +
            cudaCallError(record ? "cudaMemset" : "cudaMalloc", status);
    return nullptr;
  }
  return context;
}

DeviceContext::~DeviceContext() {
  if (record) {
    cudaFree(record);
  }
  for (void *library : libraries) {
    cudaLibraryUnload(static_cast<cudaLibrary_t>(library));
  }
}

std::string DeviceContext::takeErrorRecord(DeviceErrorRecord &out) {
  cudaError_t status =
      cudaMemcpy(&out, record, sizeof(out), cudaMemcpyDeviceToHost);
  if (status != cudaSuccess) {
    return cudaCallError("cudaMemcpy (the device error record)", status);
  }
  if (out.code == tl::kNoError) {
    return "";
  }
  status = cudaMemset(record, 0, sizeof(DeviceErrorRecord));
  return status == cudaSuccess
             ? ""
             : cudaCallError("cudaMemset (the device error record)", status);
}

bool DeviceContext::hasFunction(const char *function) {
  if (functions.count(function)) {
    return true;
  }
  for (void *library : libraries) {
    cudaKernel_t kernel = nullptr;
    if (cudaLibraryGetKernel(&kernel, static_cast<cudaLibrary_t>(library),
                             function) == cudaSuccess) {
      functions[function].kernel = kernel;
      return true;
    }
    cudaGetLastError(); // not in this module: clear the error
  }
  return false;
}

std::string DeviceContext::launch(const char *function, Dim3 grid, Dim3 block,
                                  size_t sharedBytes, void **args) {
  if (!hasFunction(function)) {
    return std::string("the plan's device code has no function '") + function +
           "'";
  }
  Function &f = functions[function];
  auto kernel = reinterpret_cast<const void *>(f.kernel);
  if (sharedBytes > f.sharedLimit) {
    // Above 48 KiB a kernel must opt in to its dynamic shared memory.
    if (sharedBytes > device.sharedPerBlockOptin) {
      return std::string(function) + " asks for " +
             std::to_string(sharedBytes) + " bytes of shared memory; " +
             device.name + " allows " +
             std::to_string(device.sharedPerBlockOptin);
    }
    cudaError_t status = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(sharedBytes));
    if (status != cudaSuccess) {
      return cudaCallError("cudaFuncSetAttribute", status) + " for " + function;
    }
    f.sharedLimit = sharedBytes;
  }
  cudaError_t status = cudaLaunchKernel(
      kernel, dim3(grid.x, grid.y, grid.z), dim3(block.x, block.y, block.z),
      args, sharedBytes, static_cast<cudaStream_t>(current));
  if (status != cudaSuccess) {
    return cudaCallError("cudaLaunchKernel", status) + " for " + function;
  }
  return "";
}

std::string DeviceContext::gemm(const GemmDesc &desc) {
  if (!blas) {
    std::string error;
    blas = CublasLt::create(error);
    if (!blas) {
      return error;
    }
  }
  return blas->gemm(desc, workspace, workspaceBytes, current);
}

std::string DeviceContext::memsetZero(void *target, size_t bytes) {
  cudaError_t status =
      cudaMemsetAsync(target, 0, bytes, static_cast<cudaStream_t>(current));
  return status == cudaSuccess ? "" : cudaCallError("cudaMemsetAsync", status);
}

std::string DeviceContext::copy(void *target, const void *source, size_t bytes) {
  if (target == source || bytes == 0) {
    return "";
  }
  cudaError_t status =
      cudaMemcpyAsync(target, source, bytes, cudaMemcpyDeviceToDevice,
                      static_cast<cudaStream_t>(current));
  return status == cudaSuccess ? "" : cudaCallError("cudaMemcpyAsync", status);
}

} // namespace tailor::runtime::cuda
