//===- CudaDeviceCode.h - the device code tailor embeds in plans -*- C++ -*-===//
//
// The CUDA kernels (codegen/cuda/*Kernels.cu) are compiled by nvcc when
// tailor is built, into a cubin per supported SM and one PTX, and linked
// into the compiler as data (CudaDeviceImages.S, generated), one module per
// kernel family. A plan for a GPU target carries, for the modules it uses,
// the cubin of its SM plus the PTX, so nothing compiles when the plan runs.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_CUDADEVICECODE_H
#define TAILOR_CODEGEN_CUDADEVICECODE_H

#include "llvm/ADT/ArrayRef.h"
#include "codegen/CudaArch.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tailor::codegen {

/// One embedded image: its module (a kernel family, "attention"), nvcc's
/// architecture name ("sm_90a", "compute_80") and its bytes (a cubin, or
/// PTX text).
struct CudaDeviceImage {
  llvm::StringRef module;
  llvm::StringRef arch;
  llvm::ArrayRef<uint8_t> bytes;
  bool isPtx() const { return arch.starts_with("compute_"); }
};

/// Every image this tailor was built with (empty without the CUDA toolkit).
std::vector<CudaDeviceImage> cudaDeviceImages();

/// The images of cubin architecture `arch` ("sm_90a") and the PTX that goes
/// with it (ptxArchFor), for every module. Fails with a message when this tailor was built without
/// CUDA or has no cubin for `arch`.
bool selectCudaDeviceImages(llvm::StringRef arch,
                            std::vector<CudaDeviceImage> &images,
                            std::string &error);

} // namespace tailor::codegen

#endif // TAILOR_CODEGEN_CUDADEVICECODE_H
