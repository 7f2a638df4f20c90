//===- CudaArch.h - which PTX goes with which cubin -------------*- C++ -*-===//
//
// Header-only and LLVM-free, so the NVRTC codegen library (which links no
// LLVM) and the embedded-image selection share one rule.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_CUDAARCH_H
#define TAILOR_CODEGEN_CUDAARCH_H

#include <string>
#include <string_view>

namespace tailor::codegen {

/// The PTX that goes with a cubin for `cubinArch` ("sm_75" -> "compute_75",
/// anything newer -> "compute_80"): the virtual architecture its module was
/// compiled for (codegen/cuda/CMakeLists.txt, tailor_ptx_arch_for).
inline std::string ptxArchFor(std::string_view cubinArch) {
  if (cubinArch.substr(0, 3) == "sm_") {
    cubinArch.remove_prefix(3);
  }
  int sm = 0, digits = 0;
  for (char c : cubinArch) {
    if (c < '0' || c > '9' || digits == 3) {
      break;
    }
    sm = 10 * sm + (c - '0');
    ++digits;
  }
  return digits > 0 && sm < 80 ? "compute_75" : "compute_80";
}

} // namespace tailor::codegen

#endif // TAILOR_CODEGEN_CUDAARCH_H
