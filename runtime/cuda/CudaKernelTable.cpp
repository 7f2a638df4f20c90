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

} // namespace tailor::runtime::cuda
