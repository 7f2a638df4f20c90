//===- Passes.h - liveness, recomputation, memory planning ------*- C++ -*-===//

#ifndef TAILOR_PASSES_MEMORY_PASSES_H
#define TAILOR_PASSES_MEMORY_PASSES_H

#include "dialects/sched/SchedOps.h"
#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tailor::memory {

#define GEN_PASS_DECL
#include "passes/memory/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/memory/Passes.h.inc"

/// Device bytes a GPU plan leaves outside its arenas for the CUDA context,
/// cuBLASLt's handle and the loaded modules (the memory proof's reserve).
inline constexpr int64_t kCudaContextReserveBytes = int64_t(512) << 20;

/// The words tailor-lower-to-sched's memory proof puts in its error when
/// the device arenas exceed the card or the budget; `tailor compile` reads
/// them to retry a budgeted recipe with the frozen parameters offloaded.
inline constexpr llvm::StringLiteral kDeviceMemoryExceeded =
    " of device memory but ";

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_PASSES_H
