//===- TGDialect.cpp - tg dialect registration and attributes -------------===//

#include "dialects/tg/TGOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

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
}

/// Checks the discardable attributes any op may carry: `tg.layer` (the
/// transformer layer, a non-negative integer) and `tg.module` (a module path).
LogicalResult TGDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  if (name == kLayerAttrName) {
    auto layer = llvm::dyn_cast<IntegerAttr>(attribute.getValue());
    if (!layer || !layer.getType().isInteger() || layer.getInt() < 0) {
      return op->emitError()
             << "'" << kLayerAttrName
             << "' must be a non-negative integer layer index, got "
             << attribute.getValue();
    }
    return success();
  }
  if (name == kModuleAttrName || name == kTiedAttrName) {
    auto path = llvm::dyn_cast<StringAttr>(attribute.getValue());
    if (!path || path.getValue().empty()) {
      return op->emitError() << "'" << name
                             << "' must be a non-empty module path string, got "
                             << attribute.getValue();
    }
    return success();
  }
  if (name == kRecomputeAttrName || name == kRecomputedAttrName) {
    if (!llvm::isa<UnitAttr>(attribute.getValue())) {
      return op->emitError() << "'" << name << "' must be a unit attribute";
    }
    return success();
  }
  if (name == kOverlapAttrName) {
    if (!llvm::isa<UnitAttr>(attribute.getValue()) ||
        !llvm::isa<ReduceScatterOp, AllReduceOp, AllReduceStatesOp,
                   GatherBucketOp>(op)) {
      return op->emitError() << "'" << name
                             << "' must be a unit attribute on a "
                                "tg.reduce_scatter, tg.all_reduce, "
                                "tg.all_reduce_states or tg.gather_bucket";
    }
    return success();
  }
  if (name == kHostAttrName) {
    if (!llvm::isa<UnitAttr>(attribute.getValue()) ||
        !llvm::isa<AdamWUpdateOp>(op)) {
      return op->emitError() << "'" << name
                             << "' must be a unit attribute on a "
                                "tg.adamw_update";
    }
    return success();
  }
  if (name == kStepsAttrName) {
    auto steps = llvm::dyn_cast<DenseI64ArrayAttr>(attribute.getValue());
    if (!steps || steps.size() != 2 || steps[0] < 1 ||
        (steps[1] != -1 && steps[1] < steps[0])) {
      return op->emitError() << "'" << name
                             << "' must be array<i64: first, last> with "
                                "first >= 1 and last >= first or -1, got "
                             << attribute.getValue();
    }
    return success();
  }
  if (name == kCompressionAttrName) {
    auto dict = llvm::dyn_cast<DictionaryAttr>(attribute.getValue());
    if (!llvm::isa<ModuleOp>(op) || !dict ||
        !dict.getAs<StringAttr>("method")) {
      return op->emitError() << "'" << name
                             << "' must be a dictionary with a method on a "
                                "builtin module";
    }
    return success();
  }
  if (name == kRecomputeSummaryAttrName) {
    auto summary = llvm::dyn_cast<DictionaryAttr>(attribute.getValue());
    if (!llvm::isa<ModuleOp>(op) || !summary ||
        !summary.getAs<StringAttr>("policy")) {
      return op->emitError() << "'" << name
                             << "' must be a dictionary with a policy on a "
                                "builtin module";
    }
    return success();
  }
  if (name == kRecomputePolicyAttrName) {
    auto policy = llvm::dyn_cast<StringAttr>(attribute.getValue());
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
    auto dict = llvm::dyn_cast<DictionaryAttr>(attribute.getValue());
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
  if (name == kSourceAttrName) {
    if (!llvm::isa<ModuleOp>(op) || !llvm::isa<StringAttr>(attribute.getValue())) {
      return op->emitError() << "'" << kSourceAttrName
                             << "' must be a model file path on a builtin module";
    }
    return success();
  }
  if (name == kGenerationAttrName) {
    auto dict = llvm::dyn_cast<DictionaryAttr>(attribute.getValue());
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
  if (name == kAdapterAttrName || name == kTrainingAttrName) {
    if (!llvm::isa<ModuleOp>(op) ||
        !llvm::isa<DictionaryAttr>(attribute.getValue())) {
      return op->emitError() << "'" << name
                             << "' must be a dictionary on a builtin module";
    }
    return success();
  }
  if (name == kUnraisedAttentionAttrName) {
    auto list = llvm::dyn_cast<ArrayAttr>(attribute.getValue());
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
  if (name == kExportNameAttrName) {
    if (op->getName().stripDialect() != "param" ||
        !llvm::isa<StringAttr>(attribute.getValue())) {
      return op->emitError() << "'" << name
                             << "' must be a string on a tg.param or sched.param";
    }
    return success();
  }
  if (name == kExportTransposedAttrName) {
    if (op->getName().stripDialect() != "param" ||
        !llvm::isa<UnitAttr>(attribute.getValue())) {
      return op->emitError() << "'" << name
                             << "' must be a unit on a tg.param or sched.param";
    }
    return success();
  }
  return op->emitError() << "unknown tg attribute '" << name
                         << "' (expected '" << kLayerAttrName << "', '"
                         << kModuleAttrName << "', '" << kTiedAttrName << "' or '"
                         << kSourceAttrName << "')";
}
