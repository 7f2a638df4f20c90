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

def AssignLayersPass : Pass<"tailor-assign-layers", "::mlir::func::FuncOp"> {
  let summary = "gives every op inside a transformer layer its `tg.layer`";
  let description = [{
    Raising annotates the ops it builds with their layer (from the weight's
    module path); what it leaves alone (residual adds, a gate times an up
    projection, casts and shape ops of hand-written models) has none.
    Recomputation, sharding and offload reason per layer, so this pass
    fills the gaps in program order: an op without `tg.layer` and without
    a `tg.module` of its own takes the largest layer among the producers of
    its operands. Ops that read nothing layered (the embedding, position
    tables) and ops whose module is outside the layers (the final norm,
    lm_head) keep no layer: they belong to no transformer layer. Parameter,
    state and constant references are data, not work, and get none.
  }];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def KeepLayersPass : Pass<"tailor-keep-layers", "::mlir::ModuleOp"> {
  let summary = "keeps the first N transformer layers of a raised model";
  let description = [{
    The same model with fewer layers, for analyses that measure one layer
    and extrapolate (`tailor explore` on deep models): every op of layers
    `count` and up is erased, and what read the last layer's results (the
    final norm) reads the matching results of layer `count - 1` instead.
    Layers must be alike: the last layer and layer `count - 1` must hold
    the same ops in the same order, or the pass fails naming the first
    difference. Parameters only the erased layers read are erased. Runs on
    the graph (after raising and tailor-assign-layers), before training
    passes; a model with `count` layers or fewer is left as it is.
  }];
  let options = [
    Option<"count", "count", "int64_t", "2",
           "layers to keep (at least 1)">,
    Option<"function", "function", "std::string", "\"forward\"",
           "the function whose layers are cut">,
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def TieEmbeddingsPass : Pass<"tailor-tie-embeddings", "::mlir::ModuleOp"> {
  let summary = "reads a tied lm_head from the embedding table it copies";
  let description = [{
    Hugging Face ties the output projection to the input embedding (GPT-2,
    and any config with tie_word_embeddings), but the TorchScript exporter
    writes the output weight as a separate, often pre-transposed,
    initializer (`onnx::MatMul_N`). Left alone, a plan would hold the table
    twice and full fine-tuning would train two tensors that Hugging Face
    keeps equal. With `policy=auto` the pass compares 64 sampled elements of
    each candidate against the table at the transposed positions (the one
    place graph compilation reads weight bytes: a few hundred bytes, never a
    whole tensor) and ties the layer when all agree; `always` ties a layer
    named `lm_head` whose weight has the table's shape without looking;
    `never` leaves the graph as exported. A tied layer reads the table
    itself and carries `tg.tied`; the copy is dropped.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"auto\"",
           "auto, always or never">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

//===----------------------------------------------------------------------===//
// Training: forward graph -> training step. Run in this order:
// insert-lora, add-loss, autodiff, optimizer.
//===----------------------------------------------------------------------===//

def InsertLoraPass : Pass<"tailor-insert-lora", "::mlir::ModuleOp"> {
  let summary = "adds LoRA adapters to linear layers, or makes weights trainable";
  let description = [{
    For every `tg.linear` whose module path ends in one of `targets` (Hugging
    Face names: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
    down_proj; `all-linear` means every linear layer except lm_head) in one
    of `layers`, adds `y += scale * B (A dropout(x))` with new trainable
    parameters `<module>.lora_A.weight: [r, in]` (kaiming-uniform, a =
    sqrt(5), as PEFT) and `<module>.lora_B.weight: [out, r]` (zeros);
    `scale = alpha / r`, or `alpha / sqrt(r)` with `rslora`. `variant=lora-fa`
    freezes A (only B trains), so the backward pass needs only the r-wide
    `A x`, not the layer's full input. `variant=full` adds no adapter and
    makes the parameters matching `targets` (`all`: every parameter)
    trainable instead. A dropout above 0 adds an i64 `seed` input.
  }];
  let options = [
    Option<"variant", "variant", "std::string", /*default=*/"\"lora\"",
           "lora, lora-fa or full">,
    Option<"targets", "targets", "std::string", /*default=*/"\"q_proj,v_proj\"",
           "comma-separated module names, all-linear, or (full) all">,
    Option<"layers", "layers", "std::string", /*default=*/"\"\"",
           "decoder layers to adapt, e.g. 0-3,6 (empty: all)">,
    Option<"rank", "rank", "int64_t", /*default=*/"8", "LoRA rank r">,
    Option<"alpha", "alpha", "double", /*default=*/"16.0", "LoRA alpha">,
    Option<"dropout", "dropout", "double", /*default=*/"0.0",
           "dropout on the adapter input">,
    Option<"rslora", "rslora", "bool", /*default=*/"false",
           "scale by alpha / sqrt(r) (rsLoRA)">,
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "the function to adapt">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect",
                           "::mlir::arith::ArithDialect"];
}

def QuantizePass : Pass<"tailor-quantize", "::mlir::ModuleOp"> {
  let summary = "stores frozen linear-layer weights quantized";
  let description = [{
    For every `tg.linear` whose module path has one of `modules` as a
    component (`all-linear`: every linear layer) and none of `skip` (by
    default lm_head, as QLoRA keeps it; norms and embeddings are never linear
    weights), marks the frozen float weight it reads as stored in `scheme`
    (`quantized {...}` on its tg.param) and replaces its reads by
    `tg.dequantize` of the [out, in] weight. A weight stored transposed (the
    TorchScript export's `MatMul(x, W^T)`) is quantized in PyTorch's [out, in]
    layout, so NF4 blocks are those bitsandbytes makes from the Linear
    weight. Trainable weights, tied embeddings and weights with other uses
    stay as they are. Schemes: nf4 (blocks of `block-size`, optional double
    quantization of the absmax in blocks of `nested-block-size`), int8
    (per-row absmax, with `outlier-threshold` > 0 up to `outlier-columns`
    input columns kept in fp16), gptq (`bits`, `group-size`, `act-order`;
    bytes from the `checkpoint` `tailor quantize` writes, whose settings win
    and which must hold every chosen weight), bf16 and fp16. Reads
    no weight bytes: which values the codes take is decided when the
    runtime binds the weights.
  }];
  let options = [
    Option<"scheme", "scheme", "std::string", /*default=*/"\"nf4\"",
           "nf4, int8, gptq, bf16 or fp16">,
    Option<"modules", "modules", "std::string", /*default=*/"\"all-linear\"",
           "comma-separated module names to quantize, or all-linear">,
    Option<"skip", "skip", "std::string", /*default=*/"\"lm_head\"",
           "comma-separated module names to keep in full precision">,
    Option<"blockSize", "block-size", "int64_t", /*default=*/"64",
           "nf4 block size">,
    Option<"doubleQuant", "double-quant", "bool", /*default=*/"true",
           "nf4: quantize the absmax too (QLoRA's double quantization)">,
    Option<"nestedBlockSize", "nested-block-size", "int64_t", /*default=*/"256",
           "nf4 double-quantization block size">,
    Option<"bits", "bits", "int64_t", /*default=*/"4", "gptq bits: 2, 3, 4 or 8">,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"128",
           "gptq input columns per group (-1: one group)">,
    Option<"actOrder", "act-order", "bool", /*default=*/"false",
           "gptq: quantize columns in decreasing Hessian order">,
    Option<"outlierThreshold", "outlier-threshold", "double", /*default=*/"0.0",
           "int8: keep input columns whose absmax exceeds this in fp16 (0: off)">,
    Option<"outlierColumns", "outlier-columns", "int64_t", /*default=*/"0",
           "int8: storage for this many outlier columns (0: cols / 64 when "
           "outlier-threshold is set)">,
    Option<"checkpoint", "checkpoint", "std::string", /*default=*/"\"\"",
           "gptq: the checkpoint `tailor quantize` wrote (its settings "
           "override bits, group-size and act-order)">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def PackSequencesPass : Pass<"tailor-pack-sequences", "::mlir::ModuleOp"> {
  let summary = "per-example positions and document masking for sample packing";
  let description = [{
    For `sample_packing: true`, where one sequence holds several examples:
    the function gains an i64 input `position_ids [B, T]` (each token's
    position within its example), which replaces the positions 0..T-1 the
    export baked in -- the rotary tables tg.rope reads (recognized by their
    values: row t holds the angles of position t) and the rows a learned
    position embedding adds -- by gathers of their rows at position_ids, and
    becomes the `positions` operand of every tg.attention, so no token
    attends across an example. Fails, naming why, when it cannot find the
    positions or cannot mask every attention.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "the forward function">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def EmulateHalfPass : Pass<"tailor-emulate-half", "::mlir::ModuleOp"> {
  let summary = "marks every GEMM to compute as 16-bit tensor cores do";
  let description = [{
    `mixed_precision: fp16` or `bf16` on the CPU: every tg.linear,
    tg.matmul and tg.linear_weight_grad of every function (forward,
    backward, LoRA) gets `tg.fp16` or `tg.bf16` (the `format` option).
    fp16: its kernel rounds its operands to IEEE half (nearest even, inf
    beyond 65504, as a float to half conversion), sums the products in f32
    and rounds the product to half before any epilogue (bias, residual,
    accumulation into a gradient) adds it in f32. bf16: its kernel rounds
    its operands to bf16 (nearest even) and sums and writes in f32, as
    tailor's CUDA bf16 GEMMs (GemmDesc::bf16Compute). What autocast runs in
    16 bits and tailor keeps in f32: attention, the elementwise ops between
    GEMMs (rope, SwiGLU, LoRA's scaling), norms, softmax and the loss. A
    GEMM may read a frozen weight stored in its own format (tg.dequantize
    of tailor-quantize's `fp16` or `bf16` scheme, which planning then
    dequantizes whole for it); other storage schemes are refused.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"fp16\"",
           "fp16 or bf16: the rounding the marked GEMMs emulate">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def AddLossPass : Pass<"tailor-add-loss", "::mlir::ModuleOp"> {
  let summary = "causal-LM cross-entropy of the logits against shifted labels";
  let description = [{
    The function's logits `[B, T, V]` (its first result) are scored against
    a new i64 input `labels [B, T]`: token t predicts label t + 1 (the label
    shift of Hugging Face's causal-LM loss, done on the labels so the logits
    are not copied), `ignore-index` labels do not count, and the loss is the
    mean over counted tokens. The function then returns the scalar `loss`
    (and the logits too with `keep-logits`).
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "the function to score">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "label value that does not count">,
    Option<"keepLogits", "keep-logits", "bool", /*default=*/"false",
           "also return the logits">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect",
                           "::mlir::arith::ArithDialect"];
}

def AddEvalStepPass : Pass<"tailor-add-eval-step", "::mlir::ModuleOp"> {
  let summary = "a forward-only copy of the loss for validation, without dropout";
  let description = [{
    Copies `function` (the model scored by tailor-add-loss) into
    `eval_step`, which returns only the loss, with every tg.dropout replaced
    by its input (evaluation mode, as `model.eval()`) and the inputs nothing
    reads any more (the dropout seed) removed; its inputs and result are
    named `eval_<name>` (`eval_input_ids`, `eval_labels`, `eval_loss`), as a
    plan's names are unique across its entries. Autodiff and the optimizer
    leave it alone, so the plan gains an entry that computes the validation
    loss without a backward pass and without dropout.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "the scored function to copy">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def AutodiffPass : Pass<"tailor-autodiff", "::mlir::ModuleOp"> {
  let summary = "reverse-mode differentiation of a tg function";
  let description = [{
    Appends the backward pass to `function`. Training mode (default): the
    first result is a scalar f32 loss, seeded with 1, and the function also
    returns the gradient of every trainable parameter it reads, as results
    named `grad.<parameter>` carrying `tg.grad_of`. Only what reaches the
    loss from a trainable parameter is differentiated: frozen weights get no
    weight gradient, and values the backward pass does not read are not
    kept. With `cotangents`, every float result R instead takes its
    cotangent as a new input `grad.R` (a vector-Jacobian product); with
    `wrt-inputs`, float inputs X get gradients too, returned as `grad.X`.
    With `loss-scale` (fp16 training, torch.amp.GradScaler), the loss is
    seeded with a new scalar f32 input `loss_scale` instead of 1, so every
    gradient comes out scaled by it; the returned loss is not.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "the function to differentiate">,
    Option<"cotangents", "cotangents", "bool", /*default=*/"false",
           "take result cotangents as inputs instead of seeding a loss">,
    Option<"wrtInputs", "wrt-inputs", "bool", /*default=*/"false",
           "also return gradients of float inputs">,
    Option<"lossScale", "loss-scale", "bool", /*default=*/"false",
           "seed the loss with a run-time input `loss_scale` instead of 1">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect",
                           "::mlir::arith::ArithDialect"];
}

def OptimizerPass : Pass<"tailor-optimizer", "::mlir::ModuleOp"> {
  let summary = "gradient accumulation, clipping, learning-rate schedule, update";
  let description = [{
    Turns a differentiated `function` into the two entries of a training
    plan. `train_step` adds each `grad.<p>` result into a gradient
    accumulator (`tg.state`) and returns only the loss. `optimizer_step`
    takes the 1-based update count `step` and returns `lr` and `grad_norm`:
    the norm of the averaged gradients (accumulators / accumulation-steps),
    clipping to `max-grad-norm` (0: off) as torch.nn.utils.clip_grad_norm_,
    the learning rate of Hugging Face's constant, linear or cosine schedule
    with warmup at update `step - 1` of `total-steps`, and one AdamW or SGD
    update of every trainable parameter, which also zeroes its accumulator.
    With `loss-scaling` (fp16, after tailor-autodiff's `loss-scale`),
    `optimizer_step` also takes `inv_scale` (1/S) and returns `found_inf`:
    torch.amp.GradScaler's unscale, check and skip. The gradients are
    multiplied by it before the norm, clipping and the update; if any
    is inf or NaN, `found_inf` is 1 and every update op is given a NaN
    grad_scale, which the update kernels take as "skip": parameters,
    moments and AdamW's step are untouched and the accumulators are still
    zeroed. The trainer then backs the scale off (runtime/train/LossScaler.h).
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"forward\"",
           "the differentiated function">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw or sgd">,
    Option<"learningRate", "lr", "double", /*default=*/"2e-4", "peak learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "decoupled (AdamW) or L2 (SGD) weight decay">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"0.0",
           "clip the global gradient norm to this (0: no clipping)">,
    Option<"scheduler", "scheduler", "std::string", /*default=*/"\"constant\"",
           "constant, linear or cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "linear warmup updates">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"1000",
           "updates the schedule spans">,
    Option<"accumulationSteps", "accumulation-steps", "int64_t", /*default=*/"1",
           "micro-batches per update">,
    Option<"lossScaling", "loss-scaling", "bool", /*default=*/"false",
           "unscale by an `inv_scale` input and skip updates with inf/NaN "
           "gradients (fp16)">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // TAILOR_PASSES_GRAPH_PASSES_TD
