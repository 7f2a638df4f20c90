//===- ExportNames.h - Hugging Face names of renamed weights ----*- C++ -*-===//
//
// TorchScript exports rename the weights of linear layers (onnx::MatMul_N,
// stored as the transpose). Checkpoints and adapters name them as Hugging
// Face does, `<module>.weight` in [out, in]: tailor-insert-lora (training
// plans) and tailor-build-decode (generation plans, so an adapter merges
// at load) record those names on the parameters.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_GRAPH_EXPORTNAMES_H
#define TAILOR_PASSES_GRAPH_EXPORTNAMES_H

#include "mlir/IR/BuiltinOps.h"

namespace tailor::graph {

/// Sets tg.export_name (and tg.export_transposed) on the parameters of
/// every untied tg.linear whose name is not `<tg.module>.weight` / `.bias`.
void recordExportNames(mlir::ModuleOp module);

} // namespace tailor::graph

#endif // TAILOR_PASSES_GRAPH_EXPORTNAMES_H
