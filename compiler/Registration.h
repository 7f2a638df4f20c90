//===- Registration.h - what tailor's tools know ----------------*- C++ -*-===//
//
// The one list of dialects and passes tailor's tools register, so that
// tailor-opt, tailor-translate and the driver always agree.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_REGISTRATION_H
#define TAILOR_COMPILER_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"

namespace tailor {

/// Adds tailor's dialects and the upstream ones its IR uses (func, arith,
/// tensor, memref) to `registry`.
void registerTailorDialects(mlir::DialectRegistry &registry);

/// Registers tailor's passes and the upstream transforms pipelines use
/// (canonicalize, cse, symbol-dce, ...) with the global pass registry.
void registerTailorPasses();

} // namespace tailor

#endif // TAILOR_COMPILER_REGISTRATION_H
