//===- CudaKernelTable.cpp - the CUDA launcher table ----------------------===//
//
// Built once, on first use, from every family's add*CudaKernels; lookups
// happen once per launch when a session is created.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaKernelTable.h"

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

} // namespace tailor::runtime::cuda
