//===- DeviceError.cuh - bad data a kernel found, for the host -*- CUDA -*-===//
//
// Kernels that read indices from run-time tensors (token ids, labels,
// gather/scatter indices, the KV cache's write position) or divide by
// run-time integers meet values the CPU kernels reject with a run error. A
// kernel cannot return an error, so it records the first one in a small
// ErrorRecord in device memory (one per device context, allocated next to
// the plan's arenas: 32 bytes the plan does not count) and carries on
// memory-safely (a gather writes zero, a scatter skips the update, a loss
// is NaN, the KV cache write writes nothing). The runtime copies the record
// back where it synchronizes anyway (the end of an entry), turns a set one
// into the failing step's error and clears it (runtime/cuda/DeviceError.h).
//
// The first failing thread claims the record with atomicCAS on `code`
// (first error wins, later ones and other kernels leave it alone) and then
// fills the rest; the host reads it only after the work has finished. Which
// thread is first is up to the GPU's schedule: the position is that of a bad
// index, not necessarily of the lowest one, which the CPU kernels name.
//
// Plain C++ with no host headers: the device code (nvcc, NVRTC, the SIMT
// emulator) and the runtime's host code both include it.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_CUDA_DEVICEERROR_CUH
#define TAILOR_CODEGEN_CUDA_DEVICEERROR_CUH

namespace tl {

/// What went wrong. Index codes check [-bound, bound), id and label codes
/// [0, bound); the host phrases each as the CPU kernel does.
enum ErrorCode : int {
  kNoError = 0,
  /// embedding: token id `value` at `position` of ids outside [0, bound).
  kEmbeddingId = 1,
  /// embedding_grad: the same.
  kEmbeddingGradId = 2,
  /// cross_entropy: label `value` at row `position` outside [0, bound).
  kCrossEntropyLabel = 3,
  /// cross_entropy_grad: the same.
  kCrossEntropyGradLabel = 4,
  /// gather_elements: index `value` at `position` of the indices outside
  /// [-bound, bound).
  kGatherElementsIndex = 5,
  /// scatter_elements: the same.
  kScatterElementsIndex = 6,
  /// gather_nd: the same, `position` counting tuple components.
  kGatherNdIndex = 7,
  /// scatter_nd: the same.
  kScatterNdIndex = 8,
  /// mod: an integer divisor 0 at element `position` of the divisor.
  kModByZero = 9,
  /// div: the same.
  kDivByZero = 10,
  /// kv_cache_write: the position `value` (an i64 scalar operand) outside
  /// the cache's [0, bound) rows; `position` is 0 (there is only one).
  kKvCachePosition = 11,
};

/// The device's error record: all zero while nothing went wrong. `site` is
/// what the launcher passed the kernel (the plan step of the launch, -1
/// when there is none), so the host can name the step.
struct ErrorRecord {
  int code;
  int site;
  long long value;
  long long position;
  long long bound;
};

} // namespace tl

#endif // TAILOR_CODEGEN_CUDA_DEVICEERROR_CUH
