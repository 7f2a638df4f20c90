//===- CublasLt.h - LaunchContext::gemm through cuBLASLt --------*- C++ -*-===//
//
// The real GPU session's GEMMs: a GemmDesc (row-major, runtime/cuda/
// CudaKernel.h) becomes one cublasLtMatmul. libcublasLt.so.13 is opened
// with dlopen on first use, so the runtime links no CUDA library and a
// machine without the toolkit loads it fine as long as no CUDA plan runs.
//
// Built only with TAILOR_ENABLE_CUDA (it needs the toolkit's headers).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_CUBLASLT_H
#define TAILOR_RUNTIME_CUDA_CUBLASLT_H

#include "runtime/cuda/CudaKernel.h"

#include <cstddef>
#include <memory>
#include <string>

namespace tailor::runtime::cuda {

/// One cuBLASLt handle with its library, and the heuristic's choice of
/// algorithm per GEMM shape. Not thread-safe beyond the algorithm cache:
/// a session enqueues its GEMMs from one thread.
class CublasLt {
public:
  /// Loads libcublasLt.so.13 and creates a handle; null with `error` set
  /// ("cannot load libcublasLt.so.13: <dlerror>", a missing symbol, or the
  /// failed cublasLtCreate).
  static std::unique_ptr<CublasLt> create(std::string &error);

  /// Enqueues `desc` on `stream` (a cudaStream_t) with up to
  /// `workspaceBytes` of device scratch at `workspace`; returns "" or the
  /// failed call with its cuBLAS status. Empty GEMMs (m, n or batch 0) do
  /// nothing; k = 0 is rejected (launchers handle it with a memset).
  std::string gemm(const GemmDesc &desc, void *workspace,
                   size_t workspaceBytes, void *stream);

  ~CublasLt();
  CublasLt(const CublasLt &) = delete;
  CublasLt &operator=(const CublasLt &) = delete;

private:
  struct Impl;
  explicit CublasLt(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_CUBLASLT_H
