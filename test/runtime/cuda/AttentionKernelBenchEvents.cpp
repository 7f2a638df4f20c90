//===- AttentionKernelBenchEvents.cpp - CUDA events for the bench ---------===//
//
// The CUDA runtime calls of AttentionKernelBench.cpp, in their own file:
// that one includes the device code for the emulator, whose stand-ins for
// CUDA's vector types clash with the toolkit's headers.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/cuda/AttentionKernelBench.h"

#include "runtime/cuda/DeviceContext.h"

#include <cuda_runtime_api.h>

namespace tailor::runtime::cuda::testing {

std::string recordEvent(void *&event) {
  auto *e = reinterpret_cast<cudaEvent_t *>(&event);
  if (!event) {
    if (cudaError_t error = cudaEventCreate(e); error != cudaSuccess) {
      return cudaCallError("cudaEventCreate", error);
    }
  }
  // The legacy default stream: the bench launches there too.
  cudaError_t error = cudaEventRecord(*e, nullptr);
  return error == cudaSuccess ? "" : cudaCallError("cudaEventRecord", error);
}

std::string elapsedMs(void *start, void *stop, float &ms) {
  auto begin = static_cast<cudaEvent_t>(start),
       end = static_cast<cudaEvent_t>(stop);
  if (cudaError_t error = cudaEventSynchronize(end); error != cudaSuccess) {
    return cudaCallError("cudaEventSynchronize", error);
  }
  cudaError_t error = cudaEventElapsedTime(&ms, begin, end);
  return error == cudaSuccess ? ""
                              : cudaCallError("cudaEventElapsedTime", error);
}

void destroyEvent(void *event) {
  if (event) {
    cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }
}

} // namespace tailor::runtime::cuda::testing
