//===- Passes.h - passes that build generation programs ---------*- C++ -*-===//

#ifndef TAILOR_PASSES_GENERATE_PASSES_H
#define TAILOR_PASSES_GENERATE_PASSES_H

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tailor::generate {

#define GEN_PASS_DECL
#include "passes/generate/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/generate/Passes.h.inc"

} // namespace tailor::generate

#endif // TAILOR_PASSES_GENERATE_PASSES_H
