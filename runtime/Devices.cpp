//===- Devices.cpp - which GPUs this process can use ----------------------===//
//
// Built with CUDA, this asks the CUDA runtime (linked statically, so only the
// driver, libcuda, must be present where the program runs). Built without,
// every query answers TAILOR_ERROR_UNAVAILABLE with a message saying so.
//
//===----------------------------------------------------------------------===//

#include "runtime/Status.h"

#include <cstdio>
#include <cstring>
#include <string>

#if TAILOR_ENABLE_CUDA
#include <cuda_runtime_api.h>
#endif

using tailor::runtime::fail;
using tailor::runtime::guard;
using tailor::runtime::ok;

extern "C" int tailor_built_with_cuda(void) { return TAILOR_ENABLE_CUDA; }

#if TAILOR_ENABLE_CUDA

/// Names a failed CUDA call the way users can search for it.
static std::string describe(const char *call, cudaError_t error) {
  return std::string(call) + " failed: " + cudaGetErrorName(error) + " (" +
         cudaGetErrorString(error) + ")";
}

extern "C" tailor_status tailor_cuda_device_count(int *count) {
  return guard(__func__, [&]() -> tailor_status {
    if (!count) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "count must not be null");
    }
    *count = 0;
    int devices = 0;
    cudaError_t error = cudaGetDeviceCount(&devices);
    if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver ||
        error == cudaErrorInitializationError) {
      // The usual answers on a machine without a (working) GPU.
      return fail(TAILOR_ERROR_UNAVAILABLE,
                  describe("cudaGetDeviceCount", error));
    }
    if (error != cudaSuccess) {
      return fail(TAILOR_ERROR_INTERNAL, describe("cudaGetDeviceCount", error));
    }
    if (devices == 0) {
      return fail(TAILOR_ERROR_UNAVAILABLE, "the CUDA driver reports no GPU");
    }
    *count = devices;
    return ok();
  });
}

extern "C" tailor_status tailor_cuda_device_info(int ordinal,
                                                 tailor_device_info *info) {
  return guard(__func__, [&]() -> tailor_status {
    if (!info) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "info must not be null");
    }
    int devices = 0;
    if (tailor_status status = tailor_cuda_device_count(&devices);
        status != TAILOR_OK) {
      return status;
    }
    if (ordinal < 0 || ordinal >= devices) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "device " + std::to_string(ordinal) + " is outside [0, " +
                      std::to_string(devices) + ")");
    }
    cudaDeviceProp properties;
    if (cudaError_t error = cudaGetDeviceProperties(&properties, ordinal);
        error != cudaSuccess) {
      return fail(TAILOR_ERROR_INTERNAL,
                  describe("cudaGetDeviceProperties", error));
    }
    std::memset(info, 0, sizeof(*info));
    info->ordinal = ordinal;
    std::snprintf(info->name, sizeof(info->name), "%s", properties.name);
    info->sm_major = properties.major;
    info->sm_minor = properties.minor;
    info->multiprocessors = properties.multiProcessorCount;
    info->total_memory_bytes = properties.totalGlobalMem;
    return ok();
  });
}

#else // !TAILOR_ENABLE_CUDA

extern "C" tailor_status tailor_cuda_device_count(int *count) {
  return guard(__func__, [&]() -> tailor_status {
    if (!count) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "count must not be null");
    }
    *count = 0;
    return fail(TAILOR_ERROR_UNAVAILABLE,
                "this runtime was built without CUDA (TAILOR_ENABLE_CUDA=OFF)");
  });
}

extern "C" tailor_status tailor_cuda_device_info(int ordinal,
                                                 tailor_device_info *info) {
  return guard(__func__, [&]() -> tailor_status {
    if (!info) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "info must not be null");
    }
    return fail(TAILOR_ERROR_UNAVAILABLE,
                "this runtime was built without CUDA (TAILOR_ENABLE_CUDA=OFF)");
  });
}

#endif // TAILOR_ENABLE_CUDA
