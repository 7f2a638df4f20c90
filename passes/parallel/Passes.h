//===- Passes.h - sharding, placement, gradient compression -----*- C++ -*-===//

#ifndef TAILOR_PASSES_PARALLEL_PASSES_H
#define TAILOR_PASSES_PARALLEL_PASSES_H

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tailor::parallel {

#define GEN_PASS_DECL
#include "passes/parallel/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/parallel/Passes.h.inc"

} // namespace tailor::parallel

#endif // TAILOR_PASSES_PARALLEL_PASSES_H
