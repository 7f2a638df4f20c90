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


//===----------------------------------------------------------------------===//
// Raising: literal ONNX graphs -> transformer-level tg ops. Every raised op
// records its transformer layer (`tg.layer`) and the Hugging Face module path
// of its weight (`tg.module`), from the parameter name when it is a module
// path and from the ONNX node's scope name otherwise.
//===----------------------------------------------------------------------===//

def RaiseLinearPass : Pass<"tailor-raise-linear", "::mlir::func::FuncOp"> {
  let summary = "matmul against a (transposed) parameter, plus bias -> tg.linear";
  let description = [{
    `matmul(x, transpose(W))` with `W: [out, in]` (nn.Linear, Gemm with
    transB) becomes `linear(x, W)`; `matmul(x, W)` with `W: [in, out]`
    (exporters that pre-transpose weights, GPT-2's Conv1D) becomes
    `linear(x, transpose(W))`. A following `add` of a `[out]` parameter
    becomes the bias.
  }];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def RaiseNormsPass : Pass<"tailor-raise-norms", "::mlir::func::FuncOp"> {
  let summary = "decomposed RMSNorm and LayerNorm -> tg.rms_norm, tg.layer_norm";
  let description = [{
    RMSNorm: `w * (x * 1/sqrt(mean(x^2) + eps))` in its exported spellings
    (Reciprocal, Div, Rsqrt; Pow or Mul for the square). LayerNorm:
    `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * w + b` (exports
    before opset 17).
  }];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def RaiseActivationsPass : Pass<"tailor-raise-activations", "::mlir::func::FuncOp"> {
  let summary = "x*sigmoid(x) -> tg.silu; erf and tanh GELU forms -> tg.gelu";
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def RaiseRopePass : Pass<"tailor-raise-rope", "::mlir::func::FuncOp"> {
  let summary = "x*cos + rotate_half(x)*sin -> tg.rope";
  let description = [{
    `rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2])` on the last dim of
    `x: [B, H, T, D]`; `cos`/`sin` broadcast as `[B|1, 1, T, D]` and are
    reshaped to the `[T, D]` / `[B, T, D]` tables tg.rope takes.
  }];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def RaiseAttentionPass : Pass<"tailor-raise-attention", "::mlir::func::FuncOp"> {
  let summary = "softmax(q k^T * scale + mask) v -> tg.attention";
  let description = [{
    Recognizes the scale as a multiply or divide of the scores or of q and
    k^T separately (the SDPA export), a compile-time causal mask added to
    the scores or selected with `where`, and grouped-query key/value heads
    repeated by reshape/broadcast (which tg.attention does natively).
  }];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def RaiseEmbeddingPass : Pass<"tailor-raise-embedding", "::mlir::func::FuncOp"> {
  let summary = "annotates embeddings and detects a tied lm_head";
  let description = [{
    Gives each tg.embedding its module path, and marks a tg.linear whose
    weight is the embedding table itself (tied input and output embeddings)
    with `tg.tied` naming the embedding module.
  }];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

#endif // TAILOR_PASSES_GRAPH_PASSES_TD
