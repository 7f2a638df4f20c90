//===- GlobalNormWorkspace.h - global_norm's CUDA workspace -----*- C++ -*-===//
//
// The CUDA global_norm (runtime/cuda/OptimizerLaunchers.cpp,
// codegen/cuda/OptimizerKernels.cu) reduces in two passes: a fixed grid of
// kGlobalNormBlocks blocks writes one f64 partial sum of squares each to the
// launch's workspace, and one block adds them. One rule, read by the
// launcher and by the compiler that sizes the plan's workspace
// (codegen/CpuKernels.cpp, select(tg::GlobalNormOp) for CUDA targets; the
// CPU kernel has none). Header-only, no dependencies, so both sides include
// it.
//
// The grid is a constant rather than a multiple of the device's SM count so
// the sum's order, and so its bits, are the same on every GPU: 1024 blocks
// of 256 threads are one wave on a 132-SM H100/H200 (8 resident per SM).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_GLOBALNORMWORKSPACE_H
#define TAILOR_RUNTIME_CUDA_GLOBALNORMWORKSPACE_H

#include <cstdint>

namespace tailor::runtime::cuda {

/// Blocks of global_norm's first pass, one f64 partial each.
constexpr int64_t kGlobalNormBlocks = 1024;

/// Bytes of workspace a CUDA global_norm launch needs: the partials.
constexpr int64_t globalNormWorkspaceBytes() {
  return kGlobalNormBlocks * static_cast<int64_t>(sizeof(double));
}

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_GLOBALNORMWORKSPACE_H
