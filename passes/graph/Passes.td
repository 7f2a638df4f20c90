//===- Passes.td - passes over the training graph -----------*- tablegen -*-===//

#ifndef TAILOR_PASSES_GRAPH_PASSES_TD
#define TAILOR_PASSES_GRAPH_PASSES_TD

include "mlir/Pass/PassBase.td"

def SummarizeParamsPass : Pass<"tailor-summarize-params", "::mlir::ModuleOp"> {
  let summary = "prints how many parameters a module declares, by dtype";
  let description = [{
    Reports what a model weighs before anything is planned: tensors, elements
    and bytes per element type, how many are trainable, and where their bytes
    live (external data files, inside the model, or made at run time). Reads
    shapes only, never weight bytes. The IR is left unchanged.
  }];
  let options = [
    Option<"largest", "largest", "unsigned", /*default=*/"0",
           "also list the N largest parameters">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

#endif // TAILOR_PASSES_GRAPH_PASSES_TD
