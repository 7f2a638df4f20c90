//===- TGOps.td - tg dialect operations ---------------------*- tablegen -*-===//
//
// Ops of the training graph. Shapes are ranked; axes are non-negative (the
// importer normalizes ONNX's negative axes). Verifiers check every shape rule
// and say what was expected; the rules themselves live in TGShapes.cpp so the
// importer can infer result types with the same code.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_DIALECTS_TG_TGOPS_TD
#define TAILOR_DIALECTS_TG_TGOPS_TD

include "dialects/tg/TGDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def TG_ParamOp : TG_Op<"param", [Symbol]> {
  let summary = "a model parameter: name, shape, dtype, trainability, bytes";
  let description = [{
    Declares a weight by its ONNX initializer name (which keeps the module
    path, e.g. `model.layers.0.self_attn.q_proj.weight`). The IR holds no
    weight bytes: `location` says where they are, and the runtime binds them.
    A parameter without a location must be produced at run time (LoRA
    adapters, for instance, are initialized by the runtime).

    ```mlir
    tg.param @model.embed_tokens.weight : tensor<32000x4096xbf16>
        at #tg.external<"model.onnx.data", offset = 0, length = 262144000>
    tg.param @lora_A : tensor<8x4096xf32> trainable
        init #tg.init<"kaiming_uniform", 2.2360679774997898>
    ```

    A frozen 2-D weight may be stored quantized (`quantized {...}`, set by
    tailor-quantize; the keys are in dialects/tg/TGQuant.h). Its bytes at
    `location` are still the float tensor of `type`; the runtime quantizes
    them when it binds the weights, and functions read the weight only
    through `tg.dequantize`.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyRankedTensor>:$type,
                       UnitAttr:$trainable,
                       OptionalAttr<TG_DataLocationAttr>:$location,
                       OptionalAttr<TG_InitAttr>:$init,
                       OptionalAttr<DictionaryAttr>:$quant);
  let assemblyFormat = [{
    $sym_name `:` $type (`trainable` $trainable^)? (`at` $location^)?
    (`init` $init^)? (`quantized` $quant^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def TG_DequantizeOp : TG_Op<"dequantize",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the float value of a quantized parameter";
  let description = [{
    Reads quantized parameter `name` as the float weight `[rows, cols]`
    (PyTorch's Linear layout, [out, in]) its quantization describes. The
    lowering fuses it into the GEMMs that consume it, which dequantize a
    tile at a time; only other uses materialize the whole weight.

    ```mlir
    %w = tg.dequantize @model.layers.0.mlp.down_proj.weight : tensor<64x128xf32>
    ```

    With `from %bytes`, the stored bytes are read from `%bytes` (1-D `ui8`,
    the scheme's storage) rather than from the parameter's own buffer: a
    view of a gathered ZeRO-3 bucket, whose ranks each keep a chunk of the
    bytes.
  }];
  let arguments = (ins FlatSymbolRefAttr:$name,
                       Optional<RankedTensorOf<[UI8]>>:$storage);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $name (`from` $storage^ `:` type($storage))? attr-dict `:` type($result)
  }];
}

def TG_ParamRefOp : TG_Op<"param_ref",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the value of a parameter inside a function";
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def TG_MatmulOp : TG_Op<"matmul", [Pure]> {
  let summary = "batched matrix product with broadcast batch dims";
  let description = [{
    `[..., M, K] x [..., K, N] -> [..., M, N]`; the leading (batch) dims
    broadcast like NumPy. Both operands have rank >= 2 and one element type.
  }];
  let arguments = (ins TG_FloatTensor:$lhs, TG_FloatTensor:$rhs);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_LinearOp : TG_Op<"linear", [Pure]> {
  let summary = "a linear layer: y = x W^T + b";
  let description = [{
    `x: [..., in]`, `weight: [out, in]` (PyTorch's nn.Linear layout),
    optional `bias: [out]`; result `[..., out]`.
  }];
  let arguments = (ins TG_FloatTensor:$input, TG_FloatTensor:$weight,
                       Optional<TG_FloatTensor>:$bias);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class TG_UnaryFloatOp<string mnemonic, string what, list<Trait> traits = []>
    : TG_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType], traits)> {
  let summary = "elementwise " # what;
  let arguments = (ins TG_FloatTensor:$input);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def TG_NegOp : TG_UnaryFloatOp<"neg", "negation"> { let hasFolder = 1; }
def TG_AbsOp : TG_UnaryFloatOp<"abs", "absolute value">;
def TG_ExpOp : TG_UnaryFloatOp<"exp", "e^x">;
def TG_LogOp : TG_UnaryFloatOp<"log", "natural logarithm">;
def TG_SqrtOp : TG_UnaryFloatOp<"sqrt", "square root">;
def TG_RsqrtOp : TG_UnaryFloatOp<"rsqrt", "reciprocal square root">;
def TG_ReciprocalOp : TG_UnaryFloatOp<"reciprocal", "1 / x">;
def TG_TanhOp : TG_UnaryFloatOp<"tanh", "hyperbolic tangent">;
def TG_SigmoidOp : TG_UnaryFloatOp<"sigmoid", "logistic sigmoid">;
def TG_SiluOp : TG_UnaryFloatOp<"silu", "SiLU (x * sigmoid(x))">;
def TG_ReluOp : TG_UnaryFloatOp<"relu", "max(x, 0)">;
def TG_ErfOp : TG_UnaryFloatOp<"erf", "error function">;
def TG_SinOp : TG_UnaryFloatOp<"sin", "sine">;
def TG_CosOp : TG_UnaryFloatOp<"cos", "cosine">;

def TG_GeluOp : TG_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise GELU, exact (erf) or tanh-approximated";
  let arguments = (ins TG_FloatTensor:$input,
      DefaultValuedAttr<TG_GeluApproximationAttr,
                        "::tailor::tg::GeluApproximation::None">:$approximation);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class TG_BroadcastBinaryOp<string mnemonic, string what, Type operandType,
                           Type resultType, list<Trait> traits = []>
    : TG_Op<mnemonic, !listconcat([Pure], traits)> {
  let summary = "elementwise " # what # " with NumPy broadcasting";
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs resultType:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class TG_ArithBinaryOp<string mnemonic, string what, list<Trait> traits = []>
    : TG_BroadcastBinaryOp<mnemonic, what, TG_NumericTensor, TG_NumericTensor,
                           traits>;
// Comparisons read bools too (the importer spells not(x) as eq(x, false)).
class TG_CompareOp<string mnemonic, string what>
    : TG_BroadcastBinaryOp<mnemonic, what,
                           RankedTensorOf<[TG_FloatElement, TG_IndexElement, I1]>,
                           TG_BoolTensor>;

def TG_AddOp : TG_ArithBinaryOp<"add", "addition", [Commutative]>;
def TG_SubOp : TG_ArithBinaryOp<"sub", "subtraction">;
def TG_MulOp : TG_ArithBinaryOp<"mul", "multiplication", [Commutative]>;
def TG_DivOp : TG_ArithBinaryOp<"div", "division">;
def TG_PowOp : TG_ArithBinaryOp<"pow", "power">;
def TG_MaxOp : TG_ArithBinaryOp<"max", "maximum", [Commutative]>;
def TG_MinOp : TG_ArithBinaryOp<"min", "minimum", [Commutative]>;
def TG_EqOp : TG_CompareOp<"eq", "equality test">;
def TG_LtOp : TG_CompareOp<"lt", "less-than test">;
def TG_GtOp : TG_CompareOp<"gt", "greater-than test">;

def TG_IsNanOp : TG_Op<"is_nan", [Pure, SameOperandsAndResultShape]> {
  let summary = "elementwise test for NaN";
  let description = [{
    Exports of scaled_dot_product_attention zero the probabilities of fully
    masked rows with `where(is_nan(p), 0, p)`.
  }];
  let arguments = (ins TG_FloatTensor:$input);
  let results = (outs TG_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def TG_SelectOp : TG_Op<"select", [Pure]> {
  let summary = "elementwise choice with broadcasting (ONNX Where)";
  let description = [{
    Values may be bools too: the importer spells And and Or on run-time
    bools as selects (`and(a, b) = select(a, b, false)`).
  }];
  let arguments = (ins TG_BoolTensor:$condition,
                       RankedTensorOf<[TG_FloatElement, TG_IndexElement, I1]>:$on_true,
                       RankedTensorOf<[TG_FloatElement, TG_IndexElement, I1]>:$on_false);
  let results = (outs RankedTensorOf<[TG_FloatElement, TG_IndexElement, I1]>:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_BandMaskOp : TG_Op<"band_mask", [Pure]> {
  let summary = "a mask generated from indices: a band around the diagonal";
  let description = [{
    Element `(..., i, j)` of the result `[..., T, S]` is `inside` when
    `lower <= j - i <= upper` and `outside` elsewhere, for every leading
    index. A causal mask is `upper = S - T` with `lower <= -(T - 1)`; a
    sliding window of W keys also bounds `lower`; additive masks hold 0 and
    a large negative number, keep-masks (i1) 1 and 0. The importer emits it
    for every mask an export computes from shapes, so no T x S mask is ever
    stored at compile time; raise-attention turns it into attributes of
    tg.attention, and a kernel generates it where it stays.

    ```mlir
    %m = tg.band_mask {inside = 0.0 : f64, lower = -7 : i64,
                       outside = -3.4028234663852886E+38 : f64, upper = 0 : i64}
        : tensor<1x1x8x8xf32>
    ```
  }];
  let arguments = (ins I64Attr:$lower, I64Attr:$upper, F64Attr:$inside,
                       F64Attr:$outside);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "int64_t":$lower, "int64_t":$upper,
                   "double":$inside, "double":$outside)>
  ];
  let extraClassDeclaration = [{
    /// The band's diagonal bounds, signed (I64Attr reads back unsigned).
    int64_t getLowerDiagonal() { return static_cast<int64_t>(getLower()); }
    int64_t getUpperDiagonal() { return static_cast<int64_t>(getUpper()); }
  }];
  let hasVerifier = 1;
}

def TG_CastOp : TG_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "elementwise conversion to another element type";
  let arguments = (ins TG_Tensor:$input);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

class TG_ReduceOp<string mnemonic, string what>
    : TG_Op<mnemonic, [Pure, SameOperandsAndResultElementType]> {
  let summary = what # " over the given axes";
  let arguments = (ins TG_NumericTensor:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keep_dims);
  let results = (outs TG_NumericTensor:$result);
  let assemblyFormat = [{
    $input `axes` `=` $axes (`keep_dims` $keep_dims^)? attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TG_ReduceSumOp : TG_ReduceOp<"reduce_sum", "sum">;
def TG_ReduceMeanOp : TG_ReduceOp<"reduce_mean", "mean">;
def TG_ReduceMaxOp : TG_ReduceOp<"reduce_max", "maximum">;

def TG_SoftmaxOp : TG_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one axis";
  let arguments = (ins TG_FloatTensor:$input, I64Attr:$axis);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def TG_RMSNormOp : TG_Op<"rms_norm", [Pure]> {
  let summary = "RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * weight";
  let arguments = (ins TG_FloatTensor:$input, TG_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_LayerNormOp : TG_Op<"layer_norm", [Pure]> {
  let summary = "LayerNorm over the last dim, with weight and optional bias";
  let arguments = (ins TG_FloatTensor:$input, TG_FloatTensor:$weight,
                       Optional<TG_FloatTensor>:$bias,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Transformer blocks
//===----------------------------------------------------------------------===//

def TG_RopeOp : TG_Op<"rope", [Pure]> {
  let summary = "rotary position embedding (rotate-half, or interleaved pairs)";
  let description = [{
    `input: [B, H, T, D]` with even D; `cos`, `sin`: `[T, D]` or `[B, T, D]`.
    Rotate-half (Llama, Hugging Face): `x * cos + rotate_half(x) * sin` with
    `rotate_half(x) = cat(-x[D/2:], x[:D/2])`; `interleaved` rotates pairs
    (2i, 2i+1) instead (GPT-J).
  }];
  let arguments = (ins TG_FloatTensor:$input, TG_FloatTensor:$cos,
                       TG_FloatTensor:$sin, UnitAttr:$interleaved);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_AttentionOp : TG_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention, optionally causal, with GQA";
  let description = [{
    `q: [B, Hq, T, D]`, `k: [B, Hkv, S, D]`, `v: [B, Hkv, S, Dv]` with Hq a
    multiple of Hkv (grouped-query heads: query head h reads kv head
    h / (Hq / Hkv)); result `[B, Hq, T, Dv]`. `scale` defaults to
    1 / sqrt(D). `causal` masks key s for query t when s > t + (S - T);
    `window` (with `causal`) also masks the keys more than window - 1
    before that diagonal, s <= t + (S - T) - window (Mistral's and Gemma-2's
    sliding windows). `softcap` caps the scaled scores as
    softcap * tanh(scores / softcap) before masking (Gemma-2).

    The score of query t and key s, before the softmax, is
      x = scale * q[t] . k[s], capped by `softcap` if given,
          + alibi_slopes[h] * (s - t - (S - T))   with `alibi_slopes`,
          + bias[b, h, t, s]                      with a `bias` operand,
    and masked keys are left out of the softmax.

    `alibi_slopes` (ALiBi, one slope per query head, Hq entries) adds a
    bias linear in the key index. Softmax is invariant to adding a constant
    per query row, so every ALiBi form that differs by a per-row constant is
    the same attention: BLOOM's slope * s, MPT's slope * (s - (S - 1)) and
    the relative form slope * (s - t) all read as this one. The canonical
    offset is the causal diagonal, s - t - (S - T): zero at the query's own
    key and negative for earlier keys, so the added values stay small next
    to the scores whatever the sequence length (no f32 cancellation at long
    S).

    `bias` (optional) is any other additive bias of the scores (a padding
    mask read at run time, a relative-position table, ...): a rank-4 tensor
    of the result's element type whose dims [b0, b1, b2, b3] each equal the
    score dim [B, Hq, T, S] or are 1 (broadcast), checked by the verifier.
    Its gradient is not taken: autodiff rejects a trainable bias.

    `positions: [B, T]` (integer, with `causal`) is document masking for
    packed sequences: each token's position within its example, so key s
    is also masked for query t when s < t + (S - T) - positions[b, t]
    (before its example's first token): attention never crosses an
    example, and no T x S mask is materialized.
  }];
  let arguments = (ins TG_FloatTensor:$query, TG_FloatTensor:$key,
                       TG_FloatTensor:$value,
                       Optional<TG_FloatTensor>:$bias,
                       Optional<TG_IndexTensor>:$positions, UnitAttr:$causal,
                       OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap,
                       OptionalAttr<DenseF64ArrayAttr>:$alibi_slopes);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`bias` $bias^)? (`positions` $positions^)?
    attr-dict `:` functional-type(operands, results)
  }];
  // The builder without document masking (what raising creates).
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$query,
                   "::mlir::Value":$key, "::mlir::Value":$value,
                   "::mlir::Value":$bias, "::mlir::UnitAttr":$causal,
                   "::mlir::FloatAttr":$scale, "::mlir::IntegerAttr":$window,
                   "::mlir::FloatAttr":$softcap,
                   "::mlir::DenseF64ArrayAttr":$alibi_slopes), [{
      build($_builder, $_state, result, query, key, value, bias,
            /*positions=*/::mlir::Value(), causal, scale, window, softcap,
            alibi_slopes);
    }]>
  ];
  let hasVerifier = 1;
}

def TG_EmbeddingOp : TG_Op<"embedding", [Pure]> {
  let summary = "row lookup: table[ids]";
  let arguments = (ins TG_FloatTensor:$table, TG_IndexTensor:$ids);
  let results = (outs TG_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_CrossEntropyOp : TG_Op<"cross_entropy", [Pure]> {
  let summary = "softmax cross-entropy of logits against integer labels";
  let description = [{
    `logits: [N, V]` (float), `labels: [N]` (integer). Labels equal to
    `ignore_index` count neither in the sum nor in the mean's denominator.
    The result is f32: a scalar for `mean` and `sum`, `[N]` for `none`.
  }];
  let arguments = (ins TG_FloatTensor:$logits, TG_IndexTensor:$labels,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<TG_LossReductionAttr,
                        "::tailor::tg::LossReduction::Mean">:$reduction);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def TG_ReshapeOp : TG_Op<"reshape", [Pure, SameOperandsAndResultElementType]> {
  let summary = "same elements, new shape";
  let arguments = (ins TG_Tensor:$input);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def TG_BroadcastOp : TG_Op<"broadcast", [Pure, SameOperandsAndResultElementType]> {
  let summary = "broadcasts to a larger shape with NumPy rules (ONNX Expand)";
  let description = [{
    The input's dims align with the result's trailing dims; each is 1 or
    equal to the result dim. Grouped-query attention exports use it to repeat
    key/value heads.
  }];
  let arguments = (ins TG_Tensor:$input);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def TG_TransposeOp : TG_Op<"transpose", [Pure, SameOperandsAndResultElementType]> {
  let summary = "permutes dims: result dim i is input dim permutation[i]";
  let arguments = (ins TG_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = [{
    $input `permutation` `=` $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def TG_SliceOp : TG_Op<"slice", [Pure, SameOperandsAndResultElementType]> {
  let summary = "strided static slice: [start, end) with a positive step per dim";
  let arguments = (ins TG_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = [{
    $input `starts` `=` $starts `ends` `=` $ends `steps` `=` $steps attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def TG_ConcatOp : TG_Op<"concat", [Pure, SameOperandsAndResultElementType]> {
  let summary = "joins tensors along one axis";
  let arguments = (ins Variadic<TG_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = [{
    $inputs `axis` `=` $axis attr-dict `:` functional-type($inputs, $result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def TG_SplitOp : TG_Op<"split", [Pure, SameOperandsAndResultElementType]> {
  let summary = "cuts a tensor along one axis into pieces of the given sizes";
  let arguments = (ins TG_Tensor:$input, I64Attr:$axis, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<TG_Tensor>:$results);
  let assemblyFormat = [{
    $input `axis` `=` $axis `sizes` `=` $sizes attr-dict `:`
    functional-type($input, $results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Indexing and integer arithmetic on run-time tensors
//===----------------------------------------------------------------------===//

def TG_ScatterReduction : I32EnumAttr<"ScatterReduction",
    "how a scattered update combines with the value it lands on", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Add", 1, "add">,
      I32EnumAttrCase<"Mul", 2, "mul">,
      I32EnumAttrCase<"Max", 3, "max">,
      I32EnumAttrCase<"Min", 4, "min">
    ]> {
  let cppNamespace = "::tailor::tg";
  let genSpecializedAttr = 0;
}
def TG_ScatterReductionAttr
    : EnumAttr<TG_Dialect, TG_ScatterReduction, "scatter_reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def TG_GatherElementsOp : TG_Op<"gather_elements", [Pure]> {
  let summary = "reads data at per-element indices along one axis";
  let description = [{
    ONNX GatherElements (torch.gather): `data` and `indices` have one rank;
    `result[i][j][k] = data[indices[i][j][k]][j][k]` for `axis = 0` (and so
    on for other axes). The result has the indices' shape; every other dim
    of `indices` is at most the data's. Indices may be negative (counted
    from the end); kernels fail on an index outside `[-n, n)`.
  }];
  let arguments = (ins TG_Tensor:$data, TG_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_ScatterElementsOp : TG_Op<"scatter_elements", [Pure]> {
  let summary = "writes updates into a copy of data at per-element indices";
  let description = [{
    ONNX ScatterElements (torch.scatter / scatter_add / scatter_reduce): the
    result is `data` with `result[indices[i][j]][j] = updates[i][j]` for
    `axis = 0`, combined by `reduction` (none replaces; with none, repeated
    indices leave any one of their updates). `indices` and `updates` have
    one shape, of the data's rank, no larger than the data outside `axis`.
  }];
  let arguments = (ins TG_Tensor:$data, TG_IndexTensor:$indices,
                       TG_Tensor:$updates, I64Attr:$axis,
                       DefaultValuedAttr<TG_ScatterReductionAttr,
                           "::tailor::tg::ScatterReduction::None">:$reduction);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices `,` $updates `axis` `=` $axis attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_GatherNDOp : TG_Op<"gather_nd", [Pure]> {
  let summary = "reads slices of data at index tuples (ONNX GatherND)";
  let description = [{
    `data: [B..., D...]`, `indices: [B..., N..., k]` with `batch_dims` leading
    dims B shared; each k-tuple indexes the first k dims after the batch
    dims, and the result is `[B..., N..., data dims after b + k]`.
  }];
  let arguments = (ins TG_Tensor:$data, TG_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_ScatterNDOp : TG_Op<"scatter_nd", [Pure]> {
  let summary = "writes slices into a copy of data at index tuples (ONNX ScatterND)";
  let description = [{
    `indices: [B..., N..., k]` indexes the k dims of `data` after its
    `batch_dims` leading dims B (which indices share); `updates` is
    `[B..., N..., data dims after b + k]`; each slice combines by
    `reduction`, tuples applied in order. ONNX ScatterND has no batch dims;
    the gradient of a batched tg.gather_nd uses them.
  }];
  let arguments = (ins TG_Tensor:$data, TG_IndexTensor:$indices,
                       TG_Tensor:$updates,
                       DefaultValuedAttr<TG_ScatterReductionAttr,
                           "::tailor::tg::ScatterReduction::None">:$reduction,
                       DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs TG_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices `,` $updates attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_CumsumOp : TG_Op<"cumsum",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "running sum along one axis (ONNX CumSum)";
  let description = [{
    `exclusive` leaves each element out of its own sum (the first is 0);
    `reverse` sums from the end. Integer sums wrap. The axis is the `axis`
    attribute, or, when an export computes it at run time (ONNX's own
    CumSum cases feed it as a graph input), the one-element `axis_value`
    operand, which the kernel reads and checks (negative counts from the
    end); exactly one of the two is given.

    ```mlir
    %p = tg.cumsum %mask axis = 1 : tensor<2x8xi64>
    %q = tg.cumsum %x, %a : tensor<i64> exclusive : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins TG_NumericTensor:$input,
                       Optional<TG_IndexTensor>:$axis_value,
                       OptionalAttr<I64Attr>:$axis, UnitAttr:$exclusive,
                       UnitAttr:$reverse);
  let results = (outs TG_NumericTensor:$result);
  let assemblyFormat = [{
    $input (`,` $axis_value^ `:` type($axis_value))? (`axis` `=` $axis^)?
    (`exclusive` $exclusive^)? (`reverse` $reverse^)? attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
}

def TG_ModOp : TG_Op<"mod", [Pure]> {
  let summary = "elementwise remainder with NumPy broadcasting (ONNX Mod)";
  let description = [{
    Without `fmod` the remainder takes the divisor's sign (Python's `%`,
    torch.remainder); with `fmod` the dividend's (C's fmod, torch.fmod).
    An integer division by zero is a kernel error.
  }];
  let arguments = (ins TG_NumericTensor:$lhs, TG_NumericTensor:$rhs,
                       UnitAttr:$fmod);
  let results = (outs TG_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`fmod` $fmod^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TG_SignOp : TG_Op<"sign", [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise sign: -1, 0 or 1 (NaN stays NaN)";
  let arguments = (ins TG_NumericTensor:$input);
  let results = (outs TG_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

include "dialects/tg/TGTrainingOps.td"

#endif // TAILOR_DIALECTS_TG_TGOPS_TD
