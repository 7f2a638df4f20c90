//===- Pipelines.h - tailor's pass pipelines --------------------*- C++ -*-===//
//
// The pipelines `tailor compile --compile-to=...` runs, built in C++ so
// tailor-opt can run exactly the same thing (`--tailor-graph-pipeline`).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_PIPELINES_H
#define TAILOR_COMPILER_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace tailor {

/// Import -> graph: raise the literal ONNX graph to transformer-level tg ops
/// and clean up what the raising leaves dead.
void buildGraphPipeline(mlir::OpPassManager &pm);

/// Registers the pipelines with the global registry (for tailor-opt).
void registerTailorPipelines();

} // namespace tailor

#endif // TAILOR_COMPILER_PIPELINES_H
