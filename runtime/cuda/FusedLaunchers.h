//===- FusedLaunchers.h - the kernel a fused launch runs ----*- C++ -*-===//
//
// A fused_elementwise launch (runtime/cpu/FusedProgram.h) runs a kernel
// generated for its program at compile time (codegen/FusedKernelSource.h),
// so, unlike the prebuilt families, its device function is not one of a
// fixed list: it follows from the launch's `program` attribute and its
// operands' shapes. The session checks, when a plan loads, that the plan's
// device code has it (runtime/cuda/CudaBackend.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_FUSEDLAUNCHERS_H
#define TAILOR_RUNTIME_CUDA_FUSEDLAUNCHERS_H

#include "runtime/cpu/Kernel.h"

#include <string>

namespace tailor::runtime::cuda {

/// The device function a fused_elementwise launch with `operands` and
/// `attributes` runs: fusedFunctionName of its program over its inputs'
/// kinds (Full when an input has the outputs' element count, else
/// Repeating). "" when the attributes do not say (the check reports why).
std::string fusedLaunchFunction(const std::vector<Tensor> &operands,
                                const Attributes &attributes);

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_FUSEDLAUNCHERS_H
