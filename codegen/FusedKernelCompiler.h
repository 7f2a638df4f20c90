//===- FusedKernelCompiler.h - NVRTC for fused kernels ------*- C++ -*-===//
//
// `tailor compile` turns the fused elementwise kernels of a plan
// (FusedKernelSource.h, one translation unit) into device code with NVRTC,
// the CUDA toolkit's runtime compiler, twice: PTX for compute_80 (which the
// driver can JIT for any newer GPU) and a cubin for the target's SM, as
// nvcc and ptxas do for the hand-written families at build time
// (codegen/cuda/CMakeLists.txt). Device.cuh (with the DeviceError.cuh it
// includes) and ElementwiseMath.cuh reach NVRTC as in-memory headers
// embedded in tailor when it is built, so compiling needs no source tree,
// and no GPU.
//
// No LLVM here. Without CUDA in the build the compiler is absent and says
// so.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_FUSEDKERNELCOMPILER_H
#define TAILOR_CODEGEN_FUSEDKERNELCOMPILER_H

#include <cstdint>
#include <string>
#include <vector>

namespace tailor::codegen {

/// The images of one translation unit.
struct FusedDeviceCode {
  /// The architecture of `cubin` ("sm_90a") and of `ptx` ("compute_80").
  std::string cubinArch, ptxArch;
  std::vector<uint8_t> cubin;
  /// PTX text, without a terminating NUL.
  std::string ptx;
};

/// Whether this tailor was built with NVRTC.
bool fusedKernelCompilerAvailable();

/// Compiles `source` (CUDA C++ that includes codegen/cuda/Device.cuh and
/// ElementwiseMath.cuh) to a cubin for `cubinArch` ("sm_75", "sm_80",
/// "sm_89", "sm_90a") and to PTX for the virtual architecture that goes
/// with it (ptxArchFor: compute_75 or compute_80). Returns "" or what failed: the
/// NVRTC call and its error, with the compiler's log when there is one, or
/// that this tailor has no NVRTC.
std::string compileFusedKernels(const std::string &source,
                                const std::string &cubinArch,
                                FusedDeviceCode &code);

} // namespace tailor::codegen

#endif // TAILOR_CODEGEN_FUSEDKERNELCOMPILER_H
