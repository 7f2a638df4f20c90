//===- TGDialect.cpp - tg dialect registration and attributes -------------===//

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGPartitionOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace tailor::tg;

#include "dialects/tg/TGDialect.cpp.inc"
#include "dialects/tg/TGEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/tg/TGAttrs.cpp.inc"

void TGDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/tg/TGAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/tg/TGOps.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/tg/TGPartitionOps.cpp.inc"
      >();
}

/// The decisions and placements an op of a function may carry: `tg.layer`
/// (the transformer layer), `tg.module`/`tg.tied` (module paths), and the
/// passes' marks (recompute, overlap, host, steps); nullopt when `name` is
/// none of them.
static std::optional<LogicalResult>
verifyOpAttribute(Operation *op, StringRef name, Attribute value) {
  if (name == TGDialect::kLayerAttrName) {
    auto layer = llvm::dyn_cast<IntegerAttr>(value);
    if (!layer || !layer.getType().isInteger() || layer.getInt() < 0) {
      return op->emitError()
             << "'" << TGDialect::kLayerAttrName
             << "' must be a non-negative integer layer index, got "
             << value;
    }
    return success();
  }
  if (name == TGDialect::kModuleAttrName || name == TGDialect::kTiedAttrName) {
    auto path = llvm::dyn_cast<StringAttr>(value);
    if (!path || path.getValue().empty()) {
      return op->emitError() << "'" << name
                             << "' must be a non-empty module path string, got "
                             << value;
    }
    return success();
  }
  if (name == TGDialect::kRecomputeAttrName || name == TGDialect::kRecomputedAttrName) {
    if (!llvm::isa<UnitAttr>(value)) {
      return op->emitError() << "'" << name << "' must be a unit attribute";
    }
    return success();
  }
  if (name == TGDialect::kOverlapAttrName) {
    if (!llvm::isa<UnitAttr>(value) ||
        !llvm::isa<ReduceScatterOp, AllReduceOp, AllReduceStatesOp,
                   AllToAllOp, GatherBucketOp, GatherPartitionOp, ToHostOp,
                   ToDeviceOp, CopyStateOp>(op)) {
      return op->emitError() << "'" << name
                             << "' must be a unit attribute on a "
                                "tg.reduce_scatter, tg.all_reduce, "
                                "tg.all_reduce_states, tg.all_to_all, "
                                "tg.gather_bucket, tg.gather_partition, "
                                "tg.to_host, tg.to_device or tg.copy_state";
    }
    return success();
  }
  if (name == TGDialect::kHostAttrName) {
    if (!llvm::isa<UnitAttr>(value) ||
        !llvm::isa<AdamWUpdateOp>(op)) {
      return op->emitError() << "'" << name
                             << "' must be a unit attribute on a "
                                "tg.adamw_update";
    }
    return success();
  }
  if (name == TGDialect::kFp16AttrName || name == TGDialect::kBf16AttrName) {
    if (!llvm::isa<UnitAttr>(value) ||
        !llvm::isa<LinearOp, MatmulOp, LinearWeightGradOp>(op)) {
      return op->emitError() << "'" << name
                             << "' must be a unit attribute on a tg.linear, "
                                "tg.matmul or tg.linear_weight_grad";
    }
    StringRef other = name == TGDialect::kFp16AttrName
                          ? TGDialect::kBf16AttrName
                          : TGDialect::kFp16AttrName;
    if (op->hasAttr(other)) {
      return op->emitError() << "a GEMM is either 'tg.fp16' or 'tg.bf16', "
                                "not both";
    }
    return success();
  }
  if (name == TGDialect::kStepsAttrName) {
    auto steps = llvm::dyn_cast<DenseI64ArrayAttr>(value);
    if (!steps || (steps.size() != 2 && steps.size() != 3) || steps[0] < 1 ||
        (steps[1] != -1 && steps[1] < steps[0]) ||
        (steps.size() == 3 && steps[2] < 1)) {
      return op->emitError() << "'" << name
                             << "' must be array<i64: first, last> or "
                                "array<i64: first, last, period> with "
                                "first >= 1, last >= first or -1 and "
                                "period >= 1, got "
                             << value;
    }
    return success();
  }
  return std::nullopt;
}

/// What the builtin module (or a function) records about the whole step:
/// compression, recomputation, sharding, the source, the generation
/// record, the adapter and recipe, what was not raised; nullopt when `name`
/// is none of them.
static std::optional<LogicalResult>
verifyStepAttribute(Operation *op, StringRef name, Attribute value) {
  if (name == TGDialect::kCompressionAttrName) {
    auto dict = llvm::dyn_cast<DictionaryAttr>(value);
    if (!llvm::isa<ModuleOp>(op) || !dict ||
        !dict.getAs<StringAttr>("method")) {
      return op->emitError() << "'" << name
                             << "' must be a dictionary with a method on a "
                                "builtin module";
    }
    return success();
  }
  if (name == TGDialect::kRecomputeSummaryAttrName) {
    auto summary = llvm::dyn_cast<DictionaryAttr>(value);
    if (!llvm::isa<ModuleOp>(op) || !summary ||
        !summary.getAs<StringAttr>("policy")) {
      return op->emitError() << "'" << name
                             << "' must be a dictionary with a policy on a "
                                "builtin module";
    }
    return success();
  }
  if (name == TGDialect::kRecomputePolicyAttrName) {
    auto policy = llvm::dyn_cast<StringAttr>(value);
    if (op->getName().getStringRef() != "func.func" || !policy ||
        !llvm::is_contained({"none", "full", "selective", "budget"},
                            policy.getValue())) {
      return op->emitError() << "'" << name
                             << "' must be none, full, selective or budget "
                                "on a function";
    }
    return success();
  }
  // tailor-shard's decision (passes/parallel/Shard.cpp): the world the
  // step is split over and how.
  if (name == "tg.parallel") {
    auto dict = llvm::dyn_cast<DictionaryAttr>(value);
    if (!llvm::isa<ModuleOp>(op) || !dict ||
        !dict.getAs<IntegerAttr>("world_size") ||
        !dict.getAs<IntegerAttr>("ranks_per_node") ||
        !dict.getAs<StringAttr>("strategy")) {
      return op->emitError() << "'" << name
                             << "' must be a dictionary of world_size, "
                                "ranks_per_node and strategy on a builtin "
                                "module";
    }
    return success();
  }
  if (name == TGDialect::kSourceAttrName) {
    if (!llvm::isa<ModuleOp>(op) || !llvm::isa<StringAttr>(value)) {
      return op->emitError() << "'" << TGDialect::kSourceAttrName
                             << "' must be a model file path on a builtin module";
    }
    return success();
  }
  if (name == TGDialect::kGenerationAttrName) {
    auto dict = llvm::dyn_cast<DictionaryAttr>(value);
    if (!llvm::isa<ModuleOp>(op) || !dict ||
        !dict.getAs<IntegerAttr>("max_seq_len") ||
        !dict.getAs<IntegerAttr>("batch") ||
        !dict.getAs<IntegerAttr>("vocab_size") ||
        !dict.getAs<DenseI64ArrayAttr>("eos_token_ids")) {
      return op->emitError() << "'" << name
                             << "' must be a dictionary of max_seq_len, "
                                "batch, vocab_size and eos_token_ids on a "
                                "builtin module";
    }
    return success();
  }
  if (name == TGDialect::kPipelineAttrName ||
      name == TGDialect::kPipelineStageAttrName) {
    auto dict = llvm::dyn_cast<DictionaryAttr>(value);
    bool stage = name == TGDialect::kPipelineStageAttrName;
    bool complete =
        dict && dict.getAs<IntegerAttr>("stages") &&
        (stage ? dict.getAs<IntegerAttr>("stage") &&
                     dict.getAs<IntegerAttr>("slots")
               : dict.getAs<StringAttr>("schedule") &&
                     dict.getAs<DenseI64ArrayAttr>("first_layers"));
    if (!llvm::isa<ModuleOp>(op) || !complete) {
      return op->emitError() << "'" << name << "' must be a dictionary of "
                             << (stage ? "stage, stages and slots"
                                       : "stages, schedule and first_layers")
                             << " on a builtin module";
    }
    // Data-parallel replicas of every stage (absent: one).
    if (Attribute replicas = dict.get("replicas")) {
      auto count = llvm::dyn_cast<IntegerAttr>(replicas);
      if (!count || count.getInt() < 1) {
        return op->emitError() << "'" << name
                               << "' replicas must be a positive integer";
      }
    }
    return success();
  }
  if (name == TGDialect::kClusterAttrName ||
      name == TGDialect::kBalanceAttrName) {
    auto dict = llvm::dyn_cast<DictionaryAttr>(value);
    bool cluster = name == TGDialect::kClusterAttrName;
    auto ranks = dict ? dict.getAs<ArrayAttr>("ranks") : ArrayAttr();
    bool complete =
        dict && (cluster ? ranks && llvm::all_of(ranks, [](Attribute rank) {
          return llvm::isa<DictionaryAttr>(rank);
        })
                         : dict.getAs<IntegerAttr>("global_micro_batches") &&
                               dict.getAs<DenseI64ArrayAttr>("micro_batches"));
    if (!llvm::isa<ModuleOp>(op) || !complete) {
      return op->emitError() << "'" << name << "' must be a dictionary of "
                             << (cluster ? "ranks (an array of dictionaries)"
                                         : "global_micro_batches and "
                                           "micro_batches")
                             << " on a builtin module";
    }
    return success();
  }
  if (name == TGDialect::kAdapterAttrName || name == TGDialect::kTrainingAttrName) {
    if (!llvm::isa<ModuleOp>(op) ||
        !llvm::isa<DictionaryAttr>(value)) {
      return op->emitError() << "'" << name
                             << "' must be a dictionary on a builtin module";
    }
    return success();
  }
  if (name == TGDialect::kUnraisedAttentionAttrName) {
    auto list = llvm::dyn_cast<ArrayAttr>(value);
    bool entries = list && llvm::all_of(list, [](Attribute entry) {
      auto dict = llvm::dyn_cast<DictionaryAttr>(entry);
      return dict && dict.getAs<StringAttr>("module") &&
             dict.getAs<StringAttr>("reason");
    });
    bool place = llvm::isa<ModuleOp>(op) ||
                 op->getName().getStringRef() == "func.func";
    if (!place || !entries) {
      return op->emitError()
             << "'" << name
             << "' must be an array of {module, reason} strings on a "
                "function or builtin module";
    }
    return success();
  }
  return std::nullopt;
}

/// A parameter's Hugging Face export name and layout; nullopt when `name`
/// is neither.
static std::optional<LogicalResult>
verifyParamAttribute(Operation *op, StringRef name, Attribute value) {
  if (name == TGDialect::kExportNameAttrName) {
    if (op->getName().stripDialect() != "param" ||
        !llvm::isa<StringAttr>(value)) {
      return op->emitError() << "'" << name
                             << "' must be a string on a tg.param or sched.param";
    }
    return success();
  }
  // graph::kExportFanInFanOutAttrName (passes/graph/ExportNames.h): the
  // Hugging Face tensor is [in, out] (GPT-2's Conv1D).
  if (name == TGDialect::kExportTransposedAttrName ||
      name == "tg.export_fan_in_fan_out") {
    if (op->getName().stripDialect() != "param" ||
        !llvm::isa<UnitAttr>(value)) {
      return op->emitError() << "'" << name
                             << "' must be a unit on a tg.param or sched.param";
    }
    return success();
  }
  return std::nullopt;
}

/// Checks the discardable `tg.*` attributes (see each helper above).
LogicalResult TGDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  for (auto verify :
       {verifyOpAttribute, verifyStepAttribute, verifyParamAttribute}) {
    if (std::optional<LogicalResult> result = verify(op, name, value)) {
      return *result;
    }
  }
  static constexpr StringRef known[] = {
      kLayerAttrName,          kModuleAttrName,       kTiedAttrName,
      kRecomputeAttrName,      kRecomputedAttrName,   kOverlapAttrName,
      kHostAttrName,           kFp16AttrName,         kBf16AttrName,
      kStepsAttrName,
      kCompressionAttrName,
      kRecomputeSummaryAttrName, kRecomputePolicyAttrName, "tg.parallel",
      kSourceAttrName,         kAdapterAttrName,      kTrainingAttrName,
      kUnraisedAttentionAttrName, kExportNameAttrName,
      kExportTransposedAttrName, "tg.export_fan_in_fan_out",
      kGenerationAttrName,     kPipelineAttrName,
      kPipelineStageAttrName,  kClusterAttrName,      kBalanceAttrName};
  return op->emitError() << "unknown tg attribute '" << name << "' (known: "
                         << llvm::join(std::begin(known), std::end(known), ", ")
                         << ")";
}
