//===- Passes.h - passes over the training graph ----------------*- C++ -*-===//

#ifndef TAILOR_PASSES_GRAPH_PASSES_H
#define TAILOR_PASSES_GRAPH_PASSES_H

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tailor::graph {

#define GEN_PASS_DECL
#include "passes/graph/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/graph/Passes.h.inc"

} // namespace tailor::graph

#endif // TAILOR_PASSES_GRAPH_PASSES_H
