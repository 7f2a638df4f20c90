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
  return cpu ? cpu->check(withBf16AsF32(call))
             : std::string("no CPU kernel '") + name + "' to check against";
}

} // namespace tailor::runtime::cuda
