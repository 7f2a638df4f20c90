//===- SchedOps.h - the sched dialect and its ops ---------------*- C++ -*-===//

#ifndef TAILOR_DIALECTS_SCHED_SCHEDOPS_H
#define TAILOR_DIALECTS_SCHED_SCHEDOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/sched/SchedDialect.h.inc"
#include "dialects/sched/SchedEnums.h.inc"

#define GET_OP_CLASSES
#include "dialects/sched/SchedOps.h.inc"

namespace tailor::sched {
/// On a sched.launch or sched.collective: it runs only in the training steps
/// `array<i64: first, last>` (the entry's `step` input in [first, last];
/// last -1: no end), or `array<i64: first, last, period>` (only every
/// period-th of them, from first), the plan's Op.steps and
/// Op.steps_period. From tg.steps (tailor-compress-gradients).
inline constexpr ::llvm::StringLiteral kStepsAttrName = "sched.steps";
} // namespace tailor::sched

#endif // TAILOR_DIALECTS_SCHED_SCHEDOPS_H
