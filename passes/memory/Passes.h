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

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_PASSES_H
