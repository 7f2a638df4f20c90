//===- DeviceImage.h - what a cubin or PTX image holds ----------*- C++ -*-===//
//
// Plans for GPU targets embed device code (plan.fbs, DeviceCode). Before a
// plan touches a GPU, and in `tailor inspect` and the compiler's own checks,
// this reads what an image really is: a cubin's ELF header says which SM it
// was built for and its symbol table which functions it defines; PTX says
// its target and `.entry` points in text. Needs no CUDA headers or driver.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_DEVICEIMAGE_H
#define TAILOR_RUNTIME_CUDA_DEVICEIMAGE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tailor::runtime::cuda {

struct DeviceImageInfo {
  /// major * 10 + minor: 90 for sm_90 and sm_90a, 80 for compute_80.
  int sm = 0;
  /// Function (kernel) symbols the image defines, sorted.
  std::vector<std::string> functions;
};

/// Reads a cubin (an ELF file of machine EM_CUDA): the SM from its flags and
/// the function symbols. Returns "" or what is wrong with the bytes.
std::string readCubin(const uint8_t *data, size_t size, DeviceImageInfo &info);

/// Reads PTX text: `.target sm_XX` and the `.entry` names. Returns "" or
/// what is wrong.
std::string readPtx(const uint8_t *data, size_t size, DeviceImageInfo &info);

/// Whether a cubin built for `imageSm` (arch-specific `archSpecific`, as
/// sm_90a) runs on a device of compute capability `deviceSm`: same major,
/// device minor at least the image's; an arch-specific cubin only on its
/// exact SM.
bool cubinRunsOn(int imageSm, bool archSpecific, int deviceSm);

/// A cubin a module carries: its SM and whether it is arch-specific.
struct CubinCandidate {
  int sm = 0;
  bool archSpecific = false;
};

/// The index in `cubins` of the one a device of `deviceSm` runs best: the
/// newest that runs on it (cubinRunsOn), so a plan carrying sm_80 and
/// sm_89 cubins (a cluster of RTX 3090s and 4090s) runs sm_89's on a 4090
/// and sm_80's on a 3090; -1 when none runs there.
int bestCubin(const std::vector<CubinCandidate> &cubins, int deviceSm);

/// Whether PTX for virtual architecture `imageSm` can be compiled by the
/// driver for `deviceSm` (any device at least as new).
inline bool ptxRunsOn(int imageSm, int deviceSm) { return deviceSm >= imageSm; }

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_DEVICEIMAGE_H
