//===- CudaKernelTable.cpp - the CUDA launcher table ----------------------===//
//
// Built once, on first use, from every family's add*CudaKernels; lookups
// happen once per launch when a session is created.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaKernelTable.h"

#include <algorithm>

namespace tailor::runtime::cuda {

const std::vector<CudaKernelDef> &cudaKernels() {
  static const std::vector<CudaKernelDef> table = [] {
    std::vector<CudaKernelDef> defs;
    addElementwiseCudaKernels(defs);
    addNormalizationCudaKernels(defs);
    addDataMovementCudaKernels(defs);
    addGradientCudaKernels(defs);
    addOptimizerCudaKernels(defs);
    addAttentionCudaKernels(defs);
    addLinearAlgebraCudaKernels(defs);
    addGenerationCudaKernels(defs);
    addCommunicationCudaKernels(defs);
    addCompressionCudaKernels(defs);
    addFusedCudaKernels(defs);
    return defs;
  }();
  return table;
}

const CudaKernelDef *findCudaKernel(std::string_view name) {
  for (const CudaKernelDef &def : cudaKernels()) {
    if (name == def.name) {
      return &def;
    }
  }
  return nullptr;
}

KernelCall withBf16AsF32(const KernelCall &call) {
  KernelCall view = call;
  for (Tensor &t : view.operands) {
    if (t.dtype == DType::BF16) {
      t.dtype = DType::F32;
    }
  }
  return view;
}

std::string checkLikeCpu(const char *name, const KernelCall &call) {
  const KernelDef *cpu = findCpuKernel(name);
  if (!cpu) {
    return std::string("no CPU kernel '") + name + "' to check against";
  }
  // Device pointers mean nothing to the CPU's checks, and with bf16 read as
  // f32 the sizes are not the buffers' (neighbours would look overlapping):
  // the view carries none; launchers check memory on the real call.
  KernelCall view = withBf16AsF32(call);
  for (Tensor &t : view.operands) {
    t.data = nullptr;
  }
  return cpu->check(view);
}

size_t widestUnit(const std::vector<uint64_t> &values) {
  for (size_t unit : {16, 8, 4, 2}) {
    if (std::all_of(values.begin(), values.end(),
                    [&](uint64_t v) { return v % unit == 0; })) {
      return unit;
    }
  }
  return 1;
}

const char *sizeSuffix(size_t bytes) {
  switch (bytes) {
  case 1:
    return "u8";
  case 2:
    return "u16";
  case 4:
    return "u32";
  case 16:
    return "u128";
  default:
    return "u64";
  }
}

} // namespace tailor::runtime::cuda
