//===- PlanWriter.h - sched.program -> .tplan (flatbuffers) -----*- C++ -*-===//

#ifndef TAILOR_COMPILER_PLANWRITER_H
#define TAILOR_COMPILER_PLANWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tailor {

/// Serializes the module's single sched.program as a plan file
/// (runtime/schema/plan.fbs). Weight file paths are written relative to
/// `planDirectory` (where the plan will live) when they can be, absolute
/// otherwise. Emits an error on the offending op and fails if the program
/// uses something the format cannot express. Without `deviceCode` a CUDA
/// plan carries no cubins or PTX: a plan to read figures from (`tailor
/// explore`), which the runtime refuses to run.
mlir::FailureOr<std::vector<uint8_t>>
serializePlan(mlir::ModuleOp module, llvm::StringRef planDirectory,
              bool deviceCode = true);

} // namespace tailor

#endif // TAILOR_COMPILER_PLANWRITER_H
