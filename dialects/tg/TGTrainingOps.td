//===- TGTrainingOps.td - tg ops of the training step -------*- tablegen -*-===//
//
// What turns a forward graph into a training step: the gradient ops that
// `tailor-autodiff` emits, dropout, the training state (gradient
// accumulators and optimizer moments) and the in-place optimizer updates
// that `tailor-optimizer` emits. Gradient ops are value ops like the
// forward ones; state is held by `tg.state` symbols, read by
// `tg.state_ref` and written only by the update ops, which carry memory
// effects so nothing reorders them.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_DIALECTS_TG_TGTRAININGOPS_TD
#define TAILOR_DIALECTS_TG_TGTRAININGOPS_TD

//===----------------------------------------------------------------------===//
// Gradients of forward ops
//===----------------------------------------------------------------------===//

def TG_LinearWeightGradOp : TG_Op<"linear_weight_grad", [Pure]> {
  let summary = "gradient of tg.linear's weight: dy^T x over all rows";
  let description = [{
    `dy: [..., out]`, `x: [..., in]` (the same leading dims) ->
    `[out, in]`, the sum over every leading position of the outer product.
  }];
  let arguments = (ins TG_FloatTensor:$output_grad, TG_FloatTensor:$input);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $output_grad `,` $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_RMSNormGradOp : TG_Op<"rms_norm_grad", [Pure]> {
  let summary = "gradients of tg.rms_norm for its input and weight";
  let arguments = (ins TG_FloatTensor:$output_grad, TG_FloatTensor:$input,
                       TG_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs TG_FloatTensor:$input_grad, TG_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $output_grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_LayerNormGradOp : TG_Op<"layer_norm_grad", [Pure]> {
  let summary = "gradients of tg.layer_norm for its input, weight and bias";
  let arguments = (ins TG_FloatTensor:$output_grad, TG_FloatTensor:$input,
                       TG_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs TG_FloatTensor:$input_grad, TG_FloatTensor:$weight_grad,
                      TG_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $output_grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_AttentionGradOp : TG_Op<"attention_grad",
                               [Pure, AttrSizedOperandSegments]> {
  let summary = "gradients of tg.attention for query, key and value";
  let description = [{
    Recomputes the attention probabilities block by block (nothing T x S is
    saved by the forward op), with tg.attention's shapes, attributes and
    optional additive `bias` (read, not differentiated) and `positions`
    (document masking; no gradient).
  }];
  let arguments = (ins TG_FloatTensor:$output_grad, TG_FloatTensor:$query,
                       TG_FloatTensor:$key, TG_FloatTensor:$value,
                       Optional<TG_FloatTensor>:$bias,
                       Optional<TG_IndexTensor>:$positions,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap,
                       OptionalAttr<DenseF64ArrayAttr>:$alibi_slopes);
  let results = (outs TG_FloatTensor:$query_grad, TG_FloatTensor:$key_grad,
                      TG_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $output_grad `,` $query `,` $key `,` $value (`bias` $bias^)?
    (`positions` $positions^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_EmbeddingGradOp : TG_Op<"embedding_grad", [Pure]> {
  let summary = "gradient of tg.embedding's table: scatter-add of rows";
  let arguments = (ins TG_FloatTensor:$output_grad, TG_IndexTensor:$ids);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $output_grad `,` $ids attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_CrossEntropyGradOp : TG_Op<"cross_entropy_grad", [Pure]> {
  let summary = "gradient of tg.cross_entropy for its logits";
  let description = [{
    `(softmax(logits) - onehot(label)) * dloss`, divided by the number of
    counted labels for `mean`; rows with `ignore_index` are zero.
  }];
  let arguments = (ins TG_FloatTensor:$logits, TG_IndexTensor:$labels,
      RankedTensorOf<[F32]>:$loss_grad,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<TG_LossReductionAttr,
                        "::tailor::tg::LossReduction::Mean">:$reduction);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $loss_grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_SoftmaxGradOp : TG_Op<"softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of tg.softmax from its output: y * (dy - sum(dy * y))";
  let arguments = (ins TG_FloatTensor:$output, TG_FloatTensor:$output_grad,
                       I64Attr:$axis);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $output `,` $output_grad `axis` `=` $axis attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def TG_RopeGradOp : TG_Op<"rope_grad", [Pure]> {
  let summary = "gradient of tg.rope for its input (the transposed rotation)";
  let arguments = (ins TG_FloatTensor:$output_grad, TG_FloatTensor:$cos,
                       TG_FloatTensor:$sin, UnitAttr:$interleaved);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $output_grad `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_SiluGradOp : TG_Op<"silu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of tg.silu: dy * s * (1 + x * (1 - s)), s = sigmoid(x)";
  let arguments = (ins TG_FloatTensor:$input, TG_FloatTensor:$output_grad);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = "$input `,` $output_grad attr-dict `:` type($result)";
}

def TG_GeluGradOp : TG_Op<"gelu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "gradient of tg.gelu (exact or tanh-approximated)";
  let arguments = (ins TG_FloatTensor:$input, TG_FloatTensor:$output_grad,
      DefaultValuedAttr<TG_GeluApproximationAttr,
                        "::tailor::tg::GeluApproximation::None">:$approximation);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = "$input `,` $output_grad attr-dict `:` type($result)";
}

def TG_SliceGradOp : TG_Op<"slice_grad", [Pure, SameOperandsAndResultElementType]> {
  let summary = "gradient of tg.slice: dy scattered into zeros of the input shape";
  let arguments = (ins TG_Tensor:$output_grad, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = [{
    $output_grad `starts` `=` $starts `steps` `=` $steps attr-dict `:`
    type($output_grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TG_DropoutOp : TG_Op<"dropout", [Pure]> {
  let summary = "inverted dropout with a counter-based mask";
  let description = [{
    Keeps element i when `uniform(hash(seed, salt, i)) >= p` and scales it
    by 1 / (1 - p). The mask depends only on (seed, salt, i), so the
    backward pass applies the same op with the same seed to the gradient.
    `salt` tells dropout sites apart.
  }];
  let arguments = (ins TG_FloatTensor:$input, RankedTensorOf<[I64]>:$seed,
                       F64Attr:$p, I64Attr:$salt);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $seed attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training state and optimizer updates
//===----------------------------------------------------------------------===//

def TG_StateKind : I32EnumAttr<"StateKind", "what a state tensor holds", [
      I32EnumAttrCase<"Grad", 0, "grad">,
      I32EnumAttrCase<"ExpAvg", 1, "exp_avg">,
      I32EnumAttrCase<"ExpAvgSq", 2, "exp_avg_sq">,
      I32EnumAttrCase<"MomentumBuffer", 3, "momentum_buffer">,
      // Optimizer offload (tailor-offload's optimizer option): the host's
      // copy of a parameter, which the host optimizer updates and copies
      // back, and the host's copy of its gradient. Both are refreshed from
      // the device every step, so checkpoints never save them.
      I32EnumAttrCase<"Master", 4, "master">,
      I32EnumAttrCase<"GradHost", 5, "grad_host">,
      I32EnumAttrCase<"PowerSGDError", 6, "powersgd_error">,
      I32EnumAttrCase<"PowerSGDP", 7, "powersgd_p">,
      I32EnumAttrCase<"PowerSGDQ", 8, "powersgd_q">,
      // Generation (tailor-build-decode): one attention layer's keys or
      // values, [B, Hkv, max_seq_len, D], kept across decode calls.
      I32EnumAttrCase<"KeyCache", 9, "key_cache">,
      I32EnumAttrCase<"ValueCache", 10, "value_cache">,
      // Layer split (tailor-split-layers): what a pipeline stage received
      // from the stage before for each micro-batch in flight, [slots, ...],
      // kept from its forward to its backward.
      I32EnumAttrCase<"PipelineInput", 11, "pipeline_input">
    ]> {
  let cppNamespace = "::tailor::tg";
}

def TG_StateOp : TG_Op<"state", [Symbol]> {
  let summary = "a training state tensor, zero at the start, kept across steps";
  let description = [{
    A gradient accumulator or an optimizer moment (PyTorch's names) of one
    trainable parameter, or of this rank's chunk of a `tg.bucket`.
    Checkpoints key it by (parameter, kind), a bucket's by its members.

    ```mlir
    tg.state @grad.model.norm.weight : tensor<64xf32> of @model.norm.weight grad
    ```

    `host`: kept in host memory (tailor-offload's decision); only updates
    that run on the host (`tg.host`) and copies touch it.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyRankedTensor>:$type,
                       FlatSymbolRefAttr:$parameter, TG_StateKind:$kind,
                       UnitAttr:$host);
  let assemblyFormat = "$sym_name `:` $type `of` $parameter $kind attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def TG_StateRefOp : TG_Op<"state_ref", [
    MemoryEffects<[MemRead]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the current value of a state tensor";
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def TG_AccumulateOp : TG_Op<"accumulate", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "adds a value into a state tensor, in place";
  let arguments = (ins FlatSymbolRefAttr:$target, TG_FloatTensor:$value);
  let assemblyFormat = "$value `into` $target attr-dict `:` type($value)";
}

def TG_GlobalNormOp : TG_Op<"global_norm", [Pure]> {
  let summary = "sqrt of the sum of squares of every element of every operand";
  let arguments = (ins Variadic<TG_FloatTensor>:$inputs);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

def TG_AdamWUpdateOp : TG_Op<"adamw_update", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "one AdamW step on a parameter, in place (torch.optim.AdamW)";
  let description = [{
    With `g = grad * grad_scale`: decoupled weight decay
    `p *= 1 - lr * weight_decay`, moments `m = b1 m + (1 - b1) g`,
    `v = b2 v + (1 - b2) g^2`, then
    `p -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)`.
    The gradient accumulator is zeroed for the next step. `lr`, `step`
    (1-based, i64) and `grad_scale` are scalars. `param` may name a
    `tg.bucket`: the update then runs on this rank's chunk of its members,
    with states of the bucket; or a parameter's `master` state (optimizer
    offload): the update then runs on that host copy, with states of the
    parameter, and with `tg.host` it runs on the host. A non-finite
    `grad_scale` skips the step (fp16 loss scaling found an inf/NaN
    gradient): only the accumulator is zeroed. (Loss scaling is planned for
    the CPU backend only; CUDA plans never carry it.)
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$grad,
                       FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$exp_avg_sq,
                       RankedTensorOf<[F32]>:$lr, RankedTensorOf<[I64]>:$step,
                       RankedTensorOf<[F32]>:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       F64Attr:$weight_decay);
  let assemblyFormat = [{
    $param `grad` $grad `moments` `(` $exp_avg `,` $exp_avg_sq `)`
    `lr` $lr `step` $step `scale` $grad_scale attr-dict `:`
    type($lr) `,` type($step) `,` type($grad_scale)
  }];
}

def TG_SGDUpdateOp : TG_Op<"sgd_update", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "one SGD step with momentum on a parameter, in place (torch.optim.SGD)";
  let description = [{
    With `g = grad * grad_scale + weight_decay * p`: `buf = momentum * buf + g`,
    `p -= lr * (nesterov ? g + momentum * buf : buf)` (dampening 0; without
    momentum `p -= lr * g`, and there is no buffer: torch.optim.SGD keeps
    none either). The gradient accumulator is zeroed. A non-finite
    `grad_scale` skips the step, as for tg.adamw_update.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$grad,
                       OptionalAttr<FlatSymbolRefAttr>:$momentum_buffer,
                       RankedTensorOf<[F32]>:$lr,
                       RankedTensorOf<[F32]>:$grad_scale, F64Attr:$momentum,
                       F64Attr:$weight_decay, UnitAttr:$nesterov);
  let assemblyFormat = [{
    $param `grad` $grad (`momentum_buffer` $momentum_buffer^)? `lr` $lr
    `scale` $grad_scale attr-dict `:` type($lr) `,` type($grad_scale)
  }];
}

//===----------------------------------------------------------------------===//
// Data parallelism (passes/parallel/Shard.cpp writes these)
//===----------------------------------------------------------------------===//

def TG_CommReduction : I32EnumAttr<"CommReduction",
    "how a collective combines ranks", [
      I32EnumAttrCase<"Sum", 0, "sum">,
      I32EnumAttrCase<"Avg", 1, "avg">
    ]> {
  let cppNamespace = "::tailor::tg";
}

def TG_CommGroup : I32EnumAttr<"CommGroup", "the ranks a collective spans", [
      I32EnumAttrCase<"World", 0, "world">,
      I32EnumAttrCase<"Node", 1, "node">,
      I32EnumAttrCase<"CrossNode", 2, "cross_node">,
      I32EnumAttrCase<"Replicas", 3, "replicas">,
      I32EnumAttrCase<"Stages", 4, "stages">
    ]> {
  let cppNamespace = "::tailor::tg";
}

def TG_AllReduceStatesOp : TG_Op<"all_reduce_states", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reduces state tensors over a group of ranks, in place";
  let description = [{
    One bucket of DDP's gradient all-reduce: every listed state (all of one
    element type) becomes the reduction over the ranks of `group` (`world`:
    every rank; `node`: the ranks of this rank's node; `cross_node`: the
    ranks with this rank's index on the other nodes; in a layer split's
    stage, `replicas`: the ranks that hold the same stage, its data-parallel
    replicas, and `stages`: the ranks of this rank's pipeline, one replica's
    stages). Planning places a
    bucket's states back to back, so it runs as one collective.

    ```mlir
    tg.all_reduce_states [@w.grad, @b.grad] avg over world
    ```
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$states,
                       TG_CommReduction:$reduction, TG_CommGroup:$group);
  let assemblyFormat = "$states $reduction `over` $group attr-dict";
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// Gradient compression (passes/parallel/CompressGradients.cpp writes these)
//===----------------------------------------------------------------------===//

def TG_AddErrorFeedbackOp : TG_Op<"add_error_feedback", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "adds last step's compression residual to a gradient";
  let description = [{
    PowerSGD's error feedback, first half: `grad += error; error = grad`
    (both states of one type). After the compressed all-reduce,
    `tg.store_error_feedback` leaves in `error` what compression lost.

    ```mlir
    tg.add_error_feedback @w.grad from @w.powersgd_error
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$grad, FlatSymbolRefAttr:$error);
  let assemblyFormat = "$grad `from` $error attr-dict";
}

def TG_StoreErrorFeedbackOp : TG_Op<"store_error_feedback", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "keeps what compression lost: error -= grad";
  let description = [{
    PowerSGD's error feedback, second half: `error` holds the gradient this
    rank sent (after `tg.add_error_feedback`), `grad` what the compressed
    all-reduce gave back; their difference is added to the next step's
    gradient.

    ```mlir
    tg.store_error_feedback @w.powersgd_error minus @w.grad
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$error, FlatSymbolRefAttr:$grad);
  let assemblyFormat = "$error `minus` $grad attr-dict";
}

def TG_LowRankInitOp : TG_Op<"lowrank_init", [
    MemoryEffects<[MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "fills a 2-D low-rank factor with fixed pseudo-random values";
  let description = [{
    PowerSGD's first Q, a deterministic function of the position only (so
    a test can give PyTorch's hook the same values): element `k` of the
    row-major `[rows, rank]` state is `float(v - 1000) / 1000` (one f32
    division) with `u = (k * 2654435761 + 12345) mod 2^32` and
    `v = (u >> 8) mod 2001`: a value in [-1, 1] with three decimals.

    ```mlir
    tg.lowrank_init @w.powersgd_q
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$factor);
  let assemblyFormat = "$factor attr-dict";
}

def TG_OrthogonalizeOp : TG_Op<"orthogonalize", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Gram-Schmidt on the columns of a 2-D state, in place";
  let description = [{
    Column by column, as PyTorch's PowerSGD hook
    (`_orthogonalize_gram_schmidt`): the column is divided by its norm
    (plus `epsilon`), then its projection is subtracted from every later
    column.

    ```mlir
    tg.orthogonalize @w.powersgd_p
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$factor,
                       DefaultValuedAttr<F64Attr, "0.0">:$epsilon);
  let assemblyFormat = "$factor attr-dict";
}

def TG_LowRankMatmulOp : TG_Op<"lowrank_matmul", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a product of two states into a third: c = op(a) op(b)";
  let description = [{
    Each state is read as a matrix: a state of rank > 2 as
    `[shape[0], product of the rest]` (PowerSGD's view of a gradient).
    `transpose_a` / `transpose_b` take the transposed view. PowerSGD's
    `P = M Q`, `Q = M^T P` and `M = P Q^T`.

    ```mlir
    tg.lowrank_matmul @w.grad transposed, @w.powersgd_p into @w.powersgd_q
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$a, UnitAttr:$transpose_a,
                       FlatSymbolRefAttr:$b, UnitAttr:$transpose_b,
                       FlatSymbolRefAttr:$c);
  let assemblyFormat = [{
    $a (`transposed` $transpose_a^)? `,` $b (`transposed` $transpose_b^)?
    `into` $c attr-dict
  }];
}

def TG_AllGatherOp : TG_Op<"all_gather", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "every rank's 1-D tensor, gathered in rank order";
  let description = [{
    The communicator's all-gather over `group`: the result (1-D, `n * p`
    elements for p ranks in the group) holds the input (1-D, `n`) of the
    rank at group position i at `[i n, (i + 1) n)`. Top-k's values and
    indices, sign-SGD's bits and scales (tailor-compress-gradients). Not
    `Pure`: collectives are ordered.

    ```mlir
    %all = tg.all_gather %v over world : tensor<8xf32> -> tensor<32xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, I32, UI8]>:$input,
                       TG_CommGroup:$group);
  let results = (outs RankedTensorOf<[F32, I32, UI8]>:$result);
  let assemblyFormat = [{
    $input `over` $group attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TG_TopKCompressOp : TG_Op<"topk_compress", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the k largest-magnitude entries of a bucket of gradients";
  let description = [{
    The gradients (f32 states) are read as one flat vector, in the order
    listed, each row-major. With `residual` (error feedback, one state of
    the same type per gradient): `p = grad + residual` first. The k = the
    results' length entries of largest |p| (ties: the lower flat index;
    NaN counts as largest) go to `values` (p's entries) and `indices` (flat
    positions, i32), in increasing index order; the residual keeps p with
    the sent entries zeroed. The gradients are not written.

    ```mlir
    %v, %i = tg.topk_compress [@w.grad, @b.grad] residual [@w.e, @b.e] : tensor<4xf32>, tensor<4xi32>
    ```
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$grads,
                       OptionalAttr<FlatSymbolRefArrayAttr>:$residuals);
  let results = (outs RankedTensorOf<[F32]>:$values,
                      RankedTensorOf<[I32]>:$indices);
  let assemblyFormat = [{
    $grads (`residual` $residuals^)? attr-dict `:` type($values) `,`
    type($indices)
  }];
  let hasVerifier = 1;
}

def TG_SparseAverageOp : TG_Op<"sparse_average", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "gradients set to the scaled scatter-add of (value, index) pairs";
  let description = [{
    Every gradient of the bucket (read as one flat vector, as
    `tg.topk_compress` does) becomes zero, then `values[j] * scale` is added
    at flat position `indices[j]` for j in order: every rank's top-k,
    gathered, averaged with `scale = 1 / ranks`.

    ```mlir
    tg.sparse_average %v, %i into [@w.grad, @b.grad] scale 2.5e-01 : tensor<16xf32>, tensor<16xi32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$values,
                       RankedTensorOf<[I32]>:$indices,
                       FlatSymbolRefArrayAttr:$grads, F64Attr:$scale);
  let assemblyFormat = [{
    $values `,` $indices `into` $grads `scale` $scale attr-dict `:`
    type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
}

def TG_SignCompressOp : TG_Op<"sign_compress", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a bucket of gradients as packed signs and one scale";
  let description = [{
    EF-SignSGD's compressor (Karimireddy et al. 2019), per gradient
    tensor: with `residual`, `p = grad + residual` first; `scale` holds one
    `||p_t||_1 / n_t` per gradient t (of n_t entries); `signs` (ui8,
    ceil(n / 8) bytes for the bucket's n entries, read as one flat vector
    as for `tg.topk_compress`) holds bit `i mod 8` (least significant
    first) of byte `i / 8` set where `p[i] < 0` (so sign(0) = +1, as a bit
    has no zero); the residual becomes `p - scale_t * sign(p)`. The
    gradients are not written.

    ```mlir
    %s, %c = tg.sign_compress [@w.grad] residual [@w.e] : tensor<2xui8>, tensor<1xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$grads,
                       OptionalAttr<FlatSymbolRefArrayAttr>:$residuals);
  let results = (outs RankedTensorOf<[UI8]>:$signs,
                      RankedTensorOf<[F32]>:$scale);
  let assemblyFormat = [{
    $grads (`residual` $residuals^)? attr-dict `:` type($signs) `,`
    type($scale)
  }];
  let hasVerifier = 1;
}

def TG_SignAverageOp : TG_Op<"sign_average", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "gradients set to the mean of every rank's scaled signs";
  let description = [{
    `signs` and `scales` hold p ranks' `tg.sign_compress` results back to
    back (gathered; m scales per rank for m gradients): entry i of gradient
    t (the bucket one flat vector) becomes `(1 / p) sum_r scales[r m + t] *
    (bit i of rank r's signs ? -1 : 1)`, summed in rank order.

    ```mlir
    tg.sign_average %s, %c into [@w.grad] : tensor<8xui8>, tensor<4xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[UI8]>:$signs,
                       RankedTensorOf<[F32]>:$scales,
                       FlatSymbolRefArrayAttr:$grads);
  let assemblyFormat = [{
    $signs `,` $scales `into` $grads attr-dict `:` type($signs) `,`
    type($scales)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Sharded optimizer state and gradients (ZeRO-1/2; Shard.cpp writes these)
//===----------------------------------------------------------------------===//

def TG_BucketOp : TG_Op<"bucket", [
    Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "trainable parameters laid out flat and cut into one chunk per rank";
  let description = [{
    DeepSpeed's flat partition: the member parameters lie in one flat space
    of `size` elements, member i's elements (row-major) at
    `[offsets[i], offsets[i] + numel)`, the rest zero padding. The space is
    cut into `shards` equal chunks, one per rank of `group` in rank order.
    States `of` a bucket hold this rank's chunk (`size / shards` elements);
    an update on a bucket updates this rank's chunk of its members, and
    `tg.all_gather_bucket` gives every rank every chunk. Planning keeps the
    members in this layout in memory. With `sharded_params` (ZeRO-3) a rank
    keeps only its chunk of the members' values: functions read them
    through `tg.gather_bucket` and `tg.bucket_member`, and the update writes
    the chunk.

    With `host` (offload, `tailor-offload`) the members' values live in
    host memory, whole (one shard, `sharded_params`): a `tg.gather_bucket`
    copies them to the device.

    ```mlir
    tg.bucket @zero.b0 [@head, @table] offsets [0, 832] size 1664 over world
        shards 2 : f32
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       FlatSymbolRefArrayAttr:$members,
                       DenseI64ArrayAttr:$offsets, I64Attr:$size,
                       TG_CommGroup:$group, I64Attr:$shards,
                       TypeAttr:$element_type, UnitAttr:$sharded_params,
                       UnitAttr:$host);
  let assemblyFormat = [{
    $sym_name $members `offsets` $offsets `size` $size `over` $group
    `shards` $shards (`sharded_params` $sharded_params^)? (`host` $host^)?
    attr-dict `:` $element_type
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Elements of one rank's chunk.
    int64_t getChunkElements() {
      return static_cast<int64_t>(getSize() / getShards());
    }
    /// The type of a state that holds one chunk.
    ::mlir::RankedTensorType getChunkType() {
      return ::mlir::RankedTensorType::get({getChunkElements()},
                                           getElementType());
    }
  }];
}

def TG_ReduceScatterOp : TG_Op<"reduce_scatter", [
    MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "reduces a flat tensor over ranks; each rank keeps its chunk";
  let description = [{
    The input (1-D, `shards` chunks) is reduced over the ranks of `group`;
    the rank at position p of the group gets chunk p. Collectives are
    ordered (every rank issues them in the same order), so this is not
    `Pure`.
  }];
  let arguments = (ins TG_FloatTensor:$input, TG_CommReduction:$reduction,
                       TG_CommGroup:$group, I64Attr:$shards);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $input $reduction `over` $group `shards` $shards attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TG_AllReduceOp : TG_Op<"all_reduce", [
    MemoryEffects<[MemRead, MemWrite]>, SameOperandsAndResultType]> {
  let summary = "reduces a tensor over the ranks of a group";
  let description = [{
    Every rank gets the reduction of every rank's input (the sum of the
    ranks' squared gradient norms, say, when gradients are sharded).
  }];
  let arguments = (ins TG_FloatTensor:$input, TG_CommReduction:$reduction,
                       TG_CommGroup:$group);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $input $reduction `over` $group attr-dict `:` type($input)
  }];
}

def TG_AllGatherBucketOp : TG_Op<"all_gather_bucket", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "gives every rank every rank's chunk of a bucket's parameters";
  let description = [{
    After each rank updated its chunk of the bucket's flat parameters, the
    chunks are gathered in place so every rank holds all of them again.
  }];
  let arguments = (ins FlatSymbolRefAttr:$bucket);
  let assemblyFormat = "$bucket attr-dict";
}

def TG_ZeroStatesOp : TG_Op<"zero_states", [
    MemoryEffects<[MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "sets state tensors to zero";
  let description = [{
    Gradient accumulators that no update zeroes (ZeRO-1 keeps whole
    gradients on every rank and updates from their reduce-scattered chunk).
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$states);
  let assemblyFormat = "$states attr-dict";
  let hasVerifier = 1;
}

def TG_CopyStateOp : TG_Op<"copy_state", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "copies a parameter or state tensor into another, whole";
  let description = [{
    Optimizer offload's moves between memories: a gradient into its host
    copy, a parameter into its `master` state and the updated master back.
    Source and target are `tg.param`s or `tg.state`s of one type, one of
    them in host memory (a `host` state), the other not; a `tg.bucket` of
    trainable parameters (ZeRO) stands for this rank's chunk of it.

    ```mlir
    tg.copy_state @w.grad into @w.grad_host
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$source, FlatSymbolRefAttr:$target);
  let assemblyFormat = "$source `into` $target attr-dict";
}

def TG_ToHostOp : TG_Op<"to_host", [MemoryEffects<[MemRead]>,
    SameOperandsAndResultType]> {
  let summary = "a device value copied into host memory";
  let description = [{
    The scalars a host update reads (learning rate, step, clipping scale),
    computed on the device; and activation offload's saved activations,
    which `tg.to_device` brings back for backward. Not `Pure`: the copy
    stays where it is put.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def TG_ToDeviceOp : TG_Op<"to_device", [MemoryEffects<[MemRead]>,
    SameOperandsAndResultType]> {
  let summary = "a host value copied back into device memory";
  let description = [{
    Activation offload's return trip: a saved activation that `tg.to_host`
    moved out after its last forward reader comes back before its first
    backward reader. Not `Pure`: the copy stays where it is put.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def TG_GatherBucketOp : TG_Op<"gather_bucket", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a ZeRO-3 or offloaded bucket's parameters, flat, on the device";
  let description = [{
    The members' current values laid out flat (`tg.bucket`'s layout), from
    the chunks every rank of the bucket's group keeps (or, for a `host`
    bucket, copied from host memory); a transient that `tg.bucket_member`
    views take the parameters from. Collectives and copies are ordered, so
    this is not `Pure`.

    With `wire = "int8"` (ZeRO++'s quantized weight gather, qwZ) each rank
    quantizes its f32 chunk in blocks of 64 elements to int8 codes and one
    f32 scale per block before the gather, and the result is every rank's
    wire chunk in rank order (`ui8`, `tg::int8WireBytes(chunk)` bytes each:
    the codes, then the scales), which `tg.dequantize_gathered` decodes.
  }];
  let arguments = (ins FlatSymbolRefAttr:$bucket, OptionalAttr<StrAttr>:$wire);
  // Floats, or a bucket of quantized weights' stored bytes (ui8), or the
  // int8 wire chunks.
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$bucket attr-dict `:` type($result)";
}

def TG_DequantizeGatheredOp : TG_Op<"dequantize_gathered", [Pure]> {
  let summary = "the f32 bucket of ZeRO++'s int8 wire chunks";
  let description = [{
    Decodes `tg.gather_bucket`'s int8 wire result: for each of the
    `shards` chunks of `chunk` elements, element i is code i times the
    scale of its block of 64 (symmetric: code = round(x / scale), scale =
    absmax / 127). Every rank decodes every chunk, its own included, so all
    ranks compute with the same weights.

    ```mlir
    %w = tg.dequantize_gathered %q chunk 832 shards 2
        : tensor<1768xui8> -> tensor<1664xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[UI8]>:$input, I64Attr:$chunk,
                       I64Attr:$shards);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $input `chunk` $chunk `shards` $shards attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def TG_QuantizeChunksOp : TG_Op<"quantize_chunks", [Pure]> {
  let summary = "a flat f32 tensor as ZeRO++'s wire chunks, one per rank";
  let description = [{
    ZeRO++'s quantized gradient reduce-scatter (qgZ): the input's `shards`
    chunks of `chunk` elements are each encoded on their own in blocks of
    64, so the chunk a `tg.all_to_all` sends to rank r decodes without the
    others. `format` is the wire (runtime/quant/Wire.h): `int8` (the
    default: a code a byte then one f32 scale per block,
    `quant::int8WireBytes(chunk)` bytes) or `int4` (two codes a byte in
    [-7, 7], then the scales: `quant::int4WireBytes(chunk)` bytes).

    ```mlir
    %q = tg.quantize_chunks %g chunk 64 shards 2
        : tensor<128xf32> -> tensor<136xui8>
    %q4 = tg.quantize_chunks %g chunk 64 shards 2 format "int4"
        : tensor<128xf32> -> tensor<72xui8>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$input, I64Attr:$chunk,
                       I64Attr:$shards,
                       DefaultValuedStrAttr<StrAttr, "int8">:$format);
  let results = (outs RankedTensorOf<[UI8]>:$result);
  let assemblyFormat = [{
    $input `chunk` $chunk `shards` $shards (`format` $format^)? attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TG_AllToAllOp : TG_Op<"all_to_all", [
    MemoryEffects<[MemRead, MemWrite]>, SameOperandsAndResultType]> {
  let summary = "sends block r of a flat tensor to the group's rank r";
  let description = [{
    The input (1-D, `shards` equal blocks, one per rank of `group`) is
    exchanged: block r goes to the rank at position r of the group, and
    block q of the result is what the rank at position q sent this rank.
    ZeRO++'s qgZ sends each rank its int8 gradient chunk this way (a ring
    reduce-scatter would quantize again at every hop). Collectives are
    ordered, so this is not `Pure`.
  }];
  let arguments = (ins AnyRankedTensor:$input, TG_CommGroup:$group,
                       I64Attr:$shards);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `over` $group `shards` $shards attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def TG_DequantizeReduceOp : TG_Op<"dequantize_reduce", [Pure]> {
  let summary = "reduces ZeRO++'s wire chunks from every rank in f32";
  let description = [{
    The end of qgZ: the input is `shards` wire chunks of `chunk` elements
    in `format` (`int8`, the default, or `int4`, as `tg.quantize_chunks`
    wrote them: each rank's quantized share for this rank, in rank order,
    as `tg.all_to_all` delivers them); each is decoded and the result is
    their sum, or with `avg` their mean, accumulated in f32 in rank order
    (every rank reduces its own chunk the same way).

    ```mlir
    %c = tg.dequantize_reduce %r avg chunk 64 shards 2
        : tensor<136xui8> -> tensor<64xf32>
    %c4 = tg.dequantize_reduce %r4 avg chunk 64 shards 2 format "int4"
        : tensor<72xui8> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[UI8]>:$input,
                       TG_CommReduction:$reduction, I64Attr:$chunk,
                       I64Attr:$shards,
                       DefaultValuedStrAttr<StrAttr, "int8">:$format);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $input $reduction `chunk` $chunk `shards` $shards (`format` $format^)?
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TG_BucketMemberOp : TG_Op<"bucket_member", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "the elements [offset, offset + numel) of a flat tensor, reshaped";
  let description = [{
    A view, never a copy: one member parameter out of a gathered bucket.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$offset);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `[` $offset `]` attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Generation
//===----------------------------------------------------------------------===//

def TG_CacheWriteOp : TG_Op<"cache_write", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "writes a step's keys or values into a KV cache, in place";
  let description = [{
    `value: [B, H, C, D]` (C tokens: 1 for a decode step, the chunk for a
    prefill step) goes to `cache[:, :, position + c, :]` of the
    `key_cache` or `value_cache` state `cache: [B, H, N, D]`, C <= N;
    `position` is an i64 scalar read at run time (the step's first token
    index), so the kernel checks 0 <= position < N when it runs, and drops
    the rows at or past N (only a padded tail chunk of a prompt reaches
    them). Ordered with the cache's readers (`tg.state_ref`), so this is
    not `Pure`.

    ```mlir
    tg.cache_write %k into @kv.model.layers.0.self_attn.key at %position
        : tensor<1x2x1x16xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$cache, TG_FloatTensor:$value,
                       TG_IndexTensor:$position);
  let assemblyFormat = [{
    $value `into` $cache `at` $position attr-dict `:` type($value) `,`
    type($position)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Layer split across ranks (tailor-split-layers)
//===----------------------------------------------------------------------===//

def TG_SendOp : TG_Op<"send", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "sends a value to the rank of another pipeline stage";
  let description = [{
    Point to point: the activations a stage hands to the next one, or the
    gradient it hands back. Sends and receives between two ranks match in
    program order, so the two stages list them in the same order. Not
    `Pure`: it is a side effect that must stay where it is.

    ```mlir
    tg.send %h to 1 : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, I64Attr:$peer);
  let assemblyFormat = "$value `to` $peer attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def TG_RecvOp : TG_Op<"recv", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "receives a value from the rank of another pipeline stage";
  let arguments = (ins I64Attr:$peer);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "`from` $peer attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def TG_SlotWriteOp : TG_Op<"slot_write", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "writes a value into one slot of a pipeline_input state";
  let description = [{
    `state: [slots, ...shape]`, `value: [...shape]`; `slot` is an i64
    scalar read at run time (which micro-batch in flight), checked against
    `slots` when the kernel runs.

    ```mlir
    tg.slot_write %h into @pipeline.input.0 at %slot
        : tensor<2x16x64xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$state, AnyRankedTensor:$value,
                       TG_IndexTensor:$slot);
  let assemblyFormat = [{
    $value `into` $state `at` $slot attr-dict `:` type($value) `,`
    type($slot)
  }];
}

def TG_SlotReadOp : TG_Op<"slot_read", [
    MemoryEffects<[MemRead]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads one slot of a pipeline_input state";
  let arguments = (ins FlatSymbolRefAttr:$state, TG_IndexTensor:$slot);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $state `at` $slot attr-dict `:` type($slot) `->` type($result)
  }];
}

#endif // TAILOR_DIALECTS_TG_TGTRAININGOPS_TD
