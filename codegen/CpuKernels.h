//===- CpuKernels.h - which CPU runtime kernel runs a tg op -----*- C++ -*-===//
//
// The compiler's side of runtime/cpu/README.md: for each tg op, the kernel
// the CPU backend runs, the attributes it reads, and the workspace it needs.
// The two must agree; the runtime re-checks every launch when it loads a plan.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_CPUKERNELS_H
#define TAILOR_CODEGEN_CPUKERNELS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace tailor::codegen {

/// A CPU kernel chosen for an op: its operands are the op's operands, then
/// its results, then (if `workspaceBytes` > 0) one f32 workspace buffer.
struct CpuKernelChoice {
  std::string kernel;
  /// -1 when the kernel is variadic (concat, split, linear with a bias).
  int64_t arity = 0;
  mlir::NamedAttrList attributes;
  int64_t workspaceBytes = 0;
};

/// Chooses the kernel for `op`, or emits an error on `op` saying why the CPU
/// backend cannot run it. `threads` is the number of workers the plan sizes
/// per-worker workspaces for; `cuda` sizes the workspaces of kernels whose
/// CUDA launchers need other scratch than the CPU kernels (attention_grad:
/// runtime/cuda/AttentionWorkspace.h; global_norm, which has none on the
/// CPU: runtime/cuda/GlobalNormWorkspace.h).
mlir::FailureOr<CpuKernelChoice> selectCpuKernel(mlir::Operation *op,
                                                 int64_t threads,
                                                 bool cuda = false);

/// True for the element types CPU kernels compute on: f32, f64, i32, i64, i1.
bool isCpuElementType(mlir::Type type);

} // namespace tailor::codegen

#endif // TAILOR_CODEGEN_CPUKERNELS_H
