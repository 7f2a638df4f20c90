//===- CudaBackend.h - a plan's arenas and steps on a GPU -------*- C++ -*-===//
//
// What a Session holds when its plan targets CUDA: the device, the plan's
// arenas allocated exactly as planned by kind (Device with cudaMalloc --
// the GEMM workspace is one of them --, HostPinned with cudaHostAlloc,
// Host as aligned host memory), the plan's streams and events, the device
// code loaded once, and every launch checked and resolved to its launcher.
// Parameters and constants are filled on the host by the Session (the same
// binding code as the CPU backend) and uploaded arena by arena (a memcpy
// into a host arena).
//
// The header needs no CUDA headers; the implementation is built only with
// the toolkit (TAILOR_ENABLE_CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_CUDABACKEND_H
#define TAILOR_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/MemoryCategory.h"
#include "runtime/Plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tailor::runtime::comm {
class Communicator;
} // namespace tailor::runtime::comm

namespace tailor::runtime::cuda {

class CudaBackend {
public:
  /// Opens the GPU (defaultDeviceOrdinal()), picks the plan's device code
  /// for its SM, checks that the arenas fit in free memory, allocates them
  /// (zeroed), loads the code and prepares every launch. On failure returns
  /// null with `error` naming the plan, the GPU and what is missing, and
  /// `status` a tailor_status. `rank` places the plan's rank-strided
  /// buffers. Defined only in CUDA builds.
  static std::unique_ptr<CudaBackend> create(const LoadedPlan &plan, int rank,
                                             std::string &error, int &status);
  virtual ~CudaBackend() = default;

  /// The address of buffer `index` (on this rank): device memory for a
  /// Device arena, host memory (pinned or not) for the others.
  virtual void *deviceBuffer(uint32_t index) const = 0;
  /// Synchronous copies between host memory and a buffer's bytes (which
  /// may be in a host arena: the direction is taken from the addresses).
  virtual std::string upload(void *device, const void *host, size_t bytes) = 0;
  virtual std::string download(void *host, const void *device,
                               size_t bytes) = 0;
  /// Copies `host` (the arena's full size) into arena `arena`: to the
  /// device, or a memcpy into a host arena.
  virtual std::string uploadArena(uint32_t arena, const void *host) = 0;

  /// Enqueues plan steps [first, first + count) on their streams, then waits
  /// for all of them; "" or the failure (the step when it is known).
  virtual std::string runSteps(uint32_t first, uint32_t count) = 0;

  /// The communicator (NCCL) the plan's collectives run on, over the
  /// whole world; null until a multi-rank session sets it.
  void setCommunicator(comm::Communicator *communicator) {
    comm = communicator;
  }

  /// How a collective over part of the world (rank 0's `group`, as the
  /// plan names it) finds this rank's communicator: the session's
  /// sub-groups, split from the world when it got its communicator.
  using GroupResolver = std::function<std::string(
      const std::vector<int> &group, comm::Communicator *&result)>;
  void setGroupResolver(GroupResolver resolver) {
    groups = std::move(resolver);
  }

  /// Bytes allocated per category (arenas of every kind), as the CPU
  /// session reports them.
  virtual const CategoryBytes &allocatedBytes() const = 0;
  /// Bytes of the Device arenas (GPU memory), and of the Host and
  /// HostPinned ones (host memory).
  virtual uint64_t allocatedDeviceBytes() const = 0;
  virtual uint64_t allocatedHostBytes() const = 0;
  /// Bytes of the HostToDevice and DeviceToHost copy steps enqueued so far.
  virtual uint64_t bytesCopied() const = 0;
  /// "NVIDIA H100 80GB HBM3 (GPU 0, sm_90)".
  virtual const std::string &deviceDescription() const = 0;

protected:
  comm::Communicator *comm = nullptr;
  GroupResolver groups;
};

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_CUDABACKEND_H
