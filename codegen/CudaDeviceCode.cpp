//===- CudaDeviceCode.cpp - the embedded cubins and PTX -------------------===//

#include "codegen/CudaDeviceCode.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace tailor::codegen {

#if TAILOR_ENABLE_CUDA
// CudaDeviceImages.inc (generated next to CudaDeviceImages.S) expands
// TAILOR_DEVICE_IMAGE(symbol, "module", "arch") once per image; the .S file defines
// symbol_begin and symbol_end around each .incbin.
#define TAILOR_DEVICE_IMAGE(symbol, module, arch)                              \
  extern "C" const uint8_t symbol##_begin[];                                   \
  extern "C" const uint8_t symbol##_end[];
#include "codegen/CudaDeviceImages.inc"
#undef TAILOR_DEVICE_IMAGE
#endif

std::vector<CudaDeviceImage> cudaDeviceImages() {
  std::vector<CudaDeviceImage> images;
#if TAILOR_ENABLE_CUDA
#define TAILOR_DEVICE_IMAGE(symbol, module, arch)                              \
  images.push_back({module, arch,                                              \
                    llvm::ArrayRef<uint8_t>(                                   \
                              symbol##_begin,                                  \
                              static_cast<size_t>(symbol##_end -               \
                                                  symbol##_begin))});
#include "codegen/CudaDeviceImages.inc"
#undef TAILOR_DEVICE_IMAGE
#endif
  return images;
}

bool selectCudaDeviceImages(llvm::StringRef arch,
                            std::vector<CudaDeviceImage> &images,
                            std::string &error) {
  images.clear();
  std::vector<CudaDeviceImage> all = cudaDeviceImages();
  if (all.empty()) {
    error = "this tailor was built without the CUDA toolkit, so it has no "
            "device code for GPU plans (rebuild with TAILOR_ENABLE_CUDA=ON)";
    return false;
  }
  std::vector<std::string> built;
  bool found = false;
  const std::string ptxArch = ptxArchFor(std::string_view(arch.data(), arch.size()));
  for (const CudaDeviceImage &image : all) {
    if (image.arch == ptxArch || image.arch == arch) {
      images.push_back(image);
      found |= !image.isPtx();
    }
    if (!image.isPtx() && !llvm::is_contained(built, image.arch.str())) {
      built.push_back(image.arch.str());
    }
  }
  if (!found) {
    error = "no cubin for " + arch.str() + " in this tailor (built for " +
            llvm::join(built, ", ") + "; see TAILOR_CUDA_SMS)";
    return false;
  }
  return true;
}

} // namespace tailor::codegen
