//===- CudaKernel.h - the CUDA backend's kernel interface -------*- C++ -*-===//
//
// A plan for a GPU target names the same kernels, with the same operands and
// attributes, as a CPU plan (runtime/cpu/README.md): the CUDA backend keeps a
// table of launchers under those names. A launcher checks a launch once, when
// the session is created, then on every step turns its operands (device
// pointers) into a grid and the arguments of one or more device functions of
// the plan's module (codegen/cuda/*.cu, entry points `tailor_<kernel>...`),
// or into cuBLASLt GEMMs, and enqueues them on the launch's stream. It never
// synchronizes and never allocates: scratch memory is a planned workspace.
//
// Launchers talk to the GPU only through LaunchContext, so the same code runs
// against a real device (runtime/cuda/CudaSession.cpp) and against the SIMT
// emulator in the CPU tests (test/runtime/cuda/), where the device functions
// are the same source compiled for the host.
//
// This header needs no CUDA headers: it is included by code built without the
// toolkit (the emulator tests).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_CUDAKERNEL_H
#define TAILOR_RUNTIME_CUDA_CUDAKERNEL_H

#include "runtime/cpu/Kernel.h"
#include "runtime/cuda/DeviceError.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tailor::runtime::cuda {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// The 16-bit format a plan's mixed precision computes in on the tensor
/// cores (the plan's target precision): None for fp32 plans.
enum class HalfCompute : uint8_t { None, BF16, FP16 };

/// "none", "bf16" or "fp16".
inline const char *halfComputeName(HalfCompute half) {
  switch (half) {
  case HalfCompute::BF16:
    return "bf16";
  case HalfCompute::FP16:
    return "fp16";
  case HalfCompute::None:
    break;
  }
  return "none";
}

/// One GEMM in cuBLAS's column-major terms is awkward to reason about from
/// row-major tensors, so launchers describe it row-major:
///   C[b] (m x n) = alpha * op(A[b]) (m x k) * op(B[b]) (k x n) + beta * C[b]
/// where op(X) is X or X^T as `transA`/`transB` say, each matrix is
/// row-major with leading dimension `ld*` (elements between rows of the
/// stored matrix), and batch b adds b * `stride*` elements. `beta` = 1
/// accumulates into C. Inputs are f32, bf16 or f16, the two alike; the
/// output is f32 or the inputs' type (`*Type`); accumulation is always f32.
/// `halfCompute` rounds f32 inputs to bf16 or fp16 for the tensor cores (the
/// recipe's mixed precision); None computes f32 inputs in full f32.
struct GemmDesc {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  const void *a = nullptr;
  int64_t lda = 0, strideA = 0;
  DType aType = DType::F32;
  const void *b = nullptr;
  int64_t ldb = 0, strideB = 0;
  DType bType = DType::F32;
  void *c = nullptr;
  int64_t ldc = 0, strideC = 0;
  DType cType = DType::F32;
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  /// Optional bias[n] (cType) added to every row of C (beta must be 0).
  const void *bias = nullptr;
  /// The C that beta scales when it is not the output: D = alpha op(A)
  /// op(B) + beta addend, written to c (a residual added by the GEMM).
  /// Null: C is c itself.
  const void *addend = nullptr;
  HalfCompute halfCompute = HalfCompute::None;
};

/// What launchers may do. Every call enqueues on `stream` (an index into the
/// plan's streams) and returns "" or a message naming the failed call.
class LaunchContext {
public:
  virtual ~LaunchContext() = default;
  /// Launches device function `function` (an `extern "C"` entry point of the
  /// plan's module) with the kernel arguments `args` (pointers to each
  /// argument, as cudaLaunchKernel takes them).
  virtual std::string launch(const char *function, Dim3 grid, Dim3 block,
                             size_t sharedBytes, void **args) = 0;
  /// A GEMM through cuBLASLt (the emulator: a reference loop).
  virtual std::string gemm(const GemmDesc &desc) = 0;
  /// Sets `bytes` bytes at `device` to zero, in stream order.
  virtual std::string memsetZero(void *device, size_t bytes) = 0;
  /// Copies `bytes` bytes between device buffers, in stream order.
  virtual std::string copy(void *target, const void *source, size_t bytes) = 0;
  /// The device's multiprocessor count and compute capability (major*10+minor).
  virtual int multiprocessors() const = 0;
  virtual int sm() const = 0;
  /// The 16-bit tensor-core format the plan computes f32 GEMM and attention
  /// inputs in (None: full f32 GEMMs; attention then uses bf16).
  virtual HalfCompute halfCompute() const = 0;
  /// The device's error record (device memory, DeviceError.h): kernels that
  /// read run-time indices get it, with CudaCall::step, to report a bad one.
  virtual DeviceErrorRecord *errorRecord() = 0;
  /// Once everything enqueued has finished (the caller synchronized):
  /// copies the error record into `record` and, when it is set, clears it
  /// on the device. "" or the failed copy.
  virtual std::string takeErrorRecord(DeviceErrorRecord &record) = 0;
};

/// One launch as a launcher sees it: operands are device tensors (`data` is a
/// device pointer), attributes as the plan gives them.
struct CudaCall {
  std::vector<Tensor> operands;
  Attributes attributes;
  LaunchContext *context = nullptr;
  /// The plan step of the launch, which kernels write into the error record
  /// so the runtime can name the step; -1 outside a plan (tests).
  int step = -1;
};

/// A CUDA kernel. `check` runs once per launch when a session is created
/// (it may be the CPU kernel's check when the conventions are the same) and
/// returns "" or what is wrong; `launch` enqueues the work and returns "" or
/// the failure. `functions` lists the device entry points the launcher may
/// ask for (null-terminated), so a plan's module can be checked for them
/// when it loads, and the compiler can check the embedded code.
struct CudaKernelDef {
  const char *name;
  int arity;
  std::string (*check)(const KernelCall &call);
  std::string (*launch)(const CudaCall &call);
  const char *const *functions;
  /// The entry points the launcher asks for instead of `functions` in a
  /// plan that computes in fp16 (null-terminated; null: `functions` too),
  /// so such plans embed the fp16 modules and others do not.
  const char *const *fp16Functions = nullptr;
};

/// The device entry points `def`'s launcher may ask for in a plan whose
/// tensor cores compute in `half` (what the compiler embeds and the
/// runtime checks a plan's device code for).
inline const char *const *deviceFunctions(const CudaKernelDef &def,
                                          HalfCompute half) {
  return half == HalfCompute::FP16 && def.fp16Functions ? def.fp16Functions
                                                        : def.functions;
}

/// The HalfCompute of a plan's target precision ("bf16", "fp16"; any
/// other, "fp32" included, is None).
inline HalfCompute halfComputeOf(std::string_view precision) {
  return precision == "bf16"   ? HalfCompute::BF16
         : precision == "fp16" ? HalfCompute::FP16
                               : HalfCompute::None;
}

/// The launcher for kernel `name`, or null (then the plan cannot run on CUDA).
const CudaKernelDef *findCudaKernel(std::string_view name);
/// Every CUDA launcher, for listing and tests.
const std::vector<CudaKernelDef> &cudaKernels();

/// The launch as the CPU kernel of the same name sees it: bf16 operands
/// read as f32. CUDA launchers check their own dtype rules, then run the
/// CPU kernel's check on this view, so shape and attribute errors read
/// exactly as on the CPU.
KernelCall withBf16AsF32(const KernelCall &call);
/// The CPU kernel `name`'s check on withBf16AsF32(call), without its
/// pointers ("" when accepted): shapes, dtypes and attributes only.
std::string checkLikeCpu(const char *name, const KernelCall &call);
/// The entry-point suffix of a float storage type: "bf16" or "f32".
inline const char *floatSuffix(DType dtype) {
  return dtype == DType::BF16 ? "bf16" : "f32";
}

/// Grid size for `n` independent items at `block` threads each, capped so
/// grid-stride loops cover the rest (at most 65535 * 32 blocks).
inline unsigned blocksFor(int64_t n, unsigned block) {
  int64_t blocks = (n + block - 1) / block;
  const int64_t cap = int64_t(65535) * 32;
  if (blocks > cap) {
    blocks = cap;
  }
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_CUDAKERNEL_H
