//===- TGDialect.td - the tg (training graph) dialect -------*- tablegen -*-===//
//
// The dialect, its attributes and the base classes its ops derive from.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_DIALECTS_TG_TGDIALECT_TD
#define TAILOR_DIALECTS_TG_TGDIALECT_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def TG_Dialect : Dialect {
  let name = "tg";
  let cppNamespace = "::tailor::tg";
  let summary = "tailor's training graph: value-semantics ops on builtin tensors";
  let description = [{
    The forward graph of a model, and later its whole training step, at the
    level kernels want (linear, rms_norm, rope, attention, ...). Weights are
    `tg.param` symbols that hold shape, dtype and where the bytes live; the IR
    never carries weight bytes. Any op may carry `tg.layer` (the transformer
    layer it belongs to, the unit recomputation, sharding and offload reason
    about) and `tg.module` (the Hugging Face module path of its weight).
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Name of the discardable attribute holding an op's transformer layer.
    static constexpr ::llvm::StringLiteral kLayerAttrName = "tg.layer";
    /// Name of the discardable attribute holding an op's HF module path.
    static constexpr ::llvm::StringLiteral kModuleAttrName = "tg.module";
    /// tailor-recompute's decision: on a forward op whose results backward
    /// recomputes (unit), on the recomputing clones (unit), and on the
    /// training step, the policy (a string).
    static constexpr ::llvm::StringLiteral kRecomputeAttrName = "tg.recompute";
    static constexpr ::llvm::StringLiteral kRecomputedAttrName = "tg.recomputed";
    static constexpr ::llvm::StringLiteral kRecomputePolicyAttrName =
        "tg.recompute_policy";
    /// On the builtin module: what tailor-recompute chose, for the plan's
    /// notes ({policy, tensors, ops, flops, activation_bytes,
    /// activation_bytes_without}).
    static constexpr ::llvm::StringLiteral kRecomputeSummaryAttrName =
        "tg.recompute_summary";
    /// On the builtin module: the model file the graph was imported from
    /// (external data locations are resolved against its folder).
    static constexpr ::llvm::StringLiteral kSourceAttrName = "tg.source";
    /// On a linear layer whose weight is an embedding table: that
    /// embedding's module path (tied input/output embeddings).
    static constexpr ::llvm::StringLiteral kTiedAttrName = "tg.tied";
    /// On the builtin module: what tailor-insert-lora did (variant, r,
    /// alpha, dropout, use_rslora, target_modules, layers, modules).
    static constexpr ::llvm::StringLiteral kAdapterAttrName = "tg.adapter";
    /// On the builtin module: the training recipe the plan carries.
    static constexpr ::llvm::StringLiteral kTrainingAttrName = "tg.training";
    /// On a tg.param: its Hugging Face name (`<module>.weight`) when the
    /// exporter renamed it (TorchScript's onnx::MatMul_N), for checkpoints.
    static constexpr ::llvm::StringLiteral kExportNameAttrName = "tg.export_name";
    /// On a function (raise-attention) and then the builtin module
    /// (lowering): the attention-like regions left as kernels, an array of
    /// {module, reason} dictionaries that become the plan's notes.
    static constexpr ::llvm::StringLiteral kUnraisedAttentionAttrName =
        "tg.unraised_attention";
    /// tailor-overlap-collectives' decision, on a gradient collective or a
    /// ZeRO-3 gather (unit): planning issues it on the communication
    /// stream.
    static constexpr ::llvm::StringLiteral kOverlapAttrName = "tg.overlap";
    /// tailor-offload's optimizer decision, on an optimizer update (unit):
    /// it runs on the host, on host states.
    static constexpr ::llvm::StringLiteral kHostAttrName = "tg.host";
    /// tailor-emulate-half's decision with format fp16, on a GEMM
    /// (tg.linear, tg.matmul, tg.linear_weight_grad; unit): its operands
    /// and its product are rounded to IEEE half, its sums kept in f32 (fp16
    /// tensor cores).
    static constexpr ::llvm::StringLiteral kFp16AttrName = "tg.fp16";
    /// tailor-emulate-half's decision with format bf16, on a GEMM (as
    /// tg.fp16): its operands are rounded to bf16, its sums and result
    /// kept in f32 (bf16 tensor cores with f32 accumulation).
    static constexpr ::llvm::StringLiteral kBf16AttrName = "tg.bf16";
    /// On a tg.param: stored as the transpose of the Hugging Face tensor.
    static constexpr ::llvm::StringLiteral kExportTransposedAttrName =
        "tg.export_transposed";
    /// On an op of a function with a `step` input (optimizer_step): the op
    /// runs only in the steps `[first, last]` (1-based, as the step input;
    /// last -1: no end), `array<i64: first, last>`, or only in every
    /// period-th of them (first, first + period, ...), `array<i64: first,
    /// last, period>`. Gradient compression's warm-up and compressed phases,
    /// and ACP-SGD's alternating P and Q steps (tailor-compress-gradients).
    static constexpr ::llvm::StringLiteral kStepsAttrName = "tg.steps";
    /// tailor-compress-gradients' decision, on the builtin module: the
    /// method and its settings (a dictionary).
    static constexpr ::llvm::StringLiteral kCompressionAttrName =
        "tg.compression";
    /// tailor-build-decode's record, on the builtin module: what decoding
    /// needs (max_seq_len, batch, vocab_size, eos_token_ids), for the
    /// plan's Generation table.
    static constexpr ::llvm::StringLiteral kGenerationAttrName =
        "tg.generation";
    /// tailor-split-layers' decision, on the builtin module that holds the
    /// stages (stages, schedule, micro_batches, first_layers), and on each
    /// stage's nested module what it is (stage, stages, first_layer,
    /// last_layer, slots).
    static constexpr ::llvm::StringLiteral kPipelineAttrName = "tg.pipeline";
    static constexpr ::llvm::StringLiteral kPipelineStageAttrName =
        "tg.pipeline_stage";
    /// On the builtin module: a heterogeneous cluster's devices, one per
    /// rank: name, and ranks, an array of dictionaries of device, node
    /// and figures (passes/parallel/ClusterAttr.h).
    static constexpr ::llvm::StringLiteral kClusterAttrName = "tg.cluster";
    /// tailor-balance-ranks' decision, on the builtin module: each rank's
    /// micro-batches per step ({global_micro_batches, micro_batches,
    /// micro_batch_seconds}).
    static constexpr ::llvm::StringLiteral kBalanceAttrName = "tg.balance";
  }];
}

class TG_Op<string mnemonic, list<Trait> traits = []>
    : Op<TG_Dialect, mnemonic, traits>;

class TG_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<TG_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Where a parameter's bytes live
//===----------------------------------------------------------------------===//

def TG_ExternalDataAttr : TG_Attr<"ExternalData", "external"> {
  let summary = "parameter bytes in an external data file";
  let description = [{
    ONNX external data: `length` bytes at `offset` in `file` (a path relative
    to the model), laid out like TensorProto.raw_data (little-endian,
    row-major). Example: `#tg.external<"model.onnx.data", offset = 4096,
    length = 8192>`.
  }];
  let parameters = (ins "::mlir::StringAttr":$file, "uint64_t":$offset,
                        "uint64_t":$length);
  let assemblyFormat = "`<` $file `,` `offset` `=` $offset `,` `length` `=` $length `>`";
}

def TG_InitializerDataAttr : TG_Attr<"InitializerData", "initializer"> {
  let summary = "parameter bytes stored inside the model file";
  let description = [{
    The bytes are the raw_data of the initializer `name` inside the ONNX
    model `file`. Example: `#tg.initializer<"model.onnx", "lm_head.weight">`.
  }];
  let parameters = (ins "::mlir::StringAttr":$file, "::mlir::StringAttr":$name);
  let assemblyFormat = "`<` $file `,` $name `>`";
}

def TG_DataLocationAttr : AnyAttrOf<[TG_ExternalDataAttr, TG_InitializerDataAttr]>;

def TG_InitAttr : TG_Attr<"Init", "init"> {
  let summary = "how the runtime creates a parameter that has no data";
  let description = [{
    `kind` is `zeros`, `kaiming_uniform` (`value` is torch's `a`; bound
    gain * sqrt(3 / fan_in) with fan_in the second dim, as PEFT's lora_A)
    or `normal` (`value` is the standard deviation). Example:
    `#tg.init<"kaiming_uniform", 2.2360679774997898>`.
  }];
  let parameters = (ins "::mlir::StringAttr":$kind, "::mlir::FloatAttr":$value);
  let assemblyFormat = "`<` $kind `,` $value `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def TG_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how GELU is computed", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Tanh", 1, "tanh">
    ]> {
  let cppNamespace = "::tailor::tg";
  let genSpecializedAttr = 0;
}
def TG_GeluApproximationAttr
    : EnumAttr<TG_Dialect, TG_GeluApproximation, "gelu_approximation"> {
  let assemblyFormat = "`<` $value `>`";
}

def TG_LossReduction : I32EnumAttr<"LossReduction",
    "how per-token losses are combined", [
      I32EnumAttrCase<"Mean", 0, "mean">,
      I32EnumAttrCase<"Sum", 1, "sum">,
      I32EnumAttrCase<"None", 2, "none">
    ]> {
  let cppNamespace = "::tailor::tg";
  let genSpecializedAttr = 0;
}
def TG_LossReductionAttr
    : EnumAttr<TG_Dialect, TG_LossReduction, "loss_reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def TG_FloatElement : AnyTypeOf<[F16, BF16, F32, F64]>;
def TG_IndexElement : AnyTypeOf<[I32, I64]>;

def TG_FloatTensor : RankedTensorOf<[TG_FloatElement]>;
def TG_IndexTensor : RankedTensorOf<[TG_IndexElement]>;
def TG_NumericTensor : RankedTensorOf<[TG_FloatElement, TG_IndexElement]>;
def TG_BoolTensor : RankedTensorOf<[I1]>;
def TG_Tensor : RankedTensorOf<[AnyType]>;

#endif // TAILOR_DIALECTS_TG_TGDIALECT_TD
