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

/// On a tg.param (and the sched.param lowered from it): the Hugging Face
/// tensor is [in, out] (GPT-2's Conv1D), PEFT's fan_in_fan_out; the plan's
/// Parameter.export_fan_in_fan_out.
constexpr llvm::StringLiteral kExportFanInFanOutAttrName =
    "tg.export_fan_in_fan_out";

/// Sets tg.export_name (and tg.export_transposed) on the parameters of
/// every untied tg.linear whose name is not `<tg.module>.weight` / `.bias`,
/// and tg.export_fan_in_fan_out on a `<tg.module>.weight` the linear reads
/// transposed (stored [in, out] as Hugging Face stores it).
void recordExportNames(mlir::ModuleOp module);

} // namespace tailor::graph

#endif // TAILOR_PASSES_GRAPH_EXPORTNAMES_H
