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

#endif // TAILOR_DIALECTS_SCHED_SCHEDOPS_H
