//===- SplitLayersEntry.cpp - a pipeline stage's entries ------------------===//
//
// tailor-split-layers (SplitLayers.cpp): one stage's `train_step` or
// `pipeline_forward`, cloned from the unsplit step with what crosses to
// other stages received first and sent last.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/LayerSplitter.h"

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace tailor::parallel::split {

namespace {

/// Builds one stage's entry: `train_step` (forwardOnly false) or
/// `pipeline_forward`.
class EntryBuilder {
public:
  /// `prefix` goes before the names of the entry's inputs: a plan's
  /// inputs have names unique over its entries (`forward_input_ids`).
  EntryBuilder(OpBuilder &builder, func::FuncOp source, func::FuncOp target,
               StringRef prefix)
      : builder(builder), source(source), target(target),
        prefix(prefix.str()) {}

  /// The value `value` of the unsplit step has in the entry: mapped,
  /// cloned (free ops and arguments on first use) or received.
  Value materialize(Value value);
  IRMapping mapping;
  /// The entry's `slot` argument (made on first use).
  Value slot();

private:
  Value argument(BlockArgument arg);
  OpBuilder &builder;
  func::FuncOp source, target;
  std::string prefix;
  Value slotArg;
  /// The input's attributes with its name prefixed.
  DictionaryAttr renamed(DictionaryAttr attrs, StringRef fallback);
};

DictionaryAttr EntryBuilder::renamed(DictionaryAttr attrs, StringRef fallback) {
  NamedAttrList list(attrs);
  auto name = attrs ? attrs.getAs<StringAttr>("tg.name") : StringAttr();
  list.set("tg.name", builder.getStringAttr(
                          prefix + (name ? name.str() : fallback.str())));
  return list.getDictionary(builder.getContext());
}

Value EntryBuilder::argument(BlockArgument arg) {
  Block &body = target.getBody().front();
  unsigned index = body.getNumArguments();
  if (slotArg) {
    index -= 1; // keep `slot` last
  }
  DictionaryAttr attrs =
      renamed(source.getArgAttrDict(arg.getArgNumber()),
              "input" + std::to_string(arg.getArgNumber()));
  if (failed(target.insertArgument(index, arg.getType(), attrs,
                                   arg.getLoc()))) {
    return Value();
  }
  return body.getArgument(index);
}

Value EntryBuilder::slot() {
  if (!slotArg) {
    Block &body = target.getBody().front();
    auto type = RankedTensorType::get({}, builder.getI64Type());
    unsigned index = body.getNumArguments();
    (void)target.insertArgument(index, type,
                                renamed(DictionaryAttr(), "slot"),
                                target.getLoc());
    slotArg = body.getArgument(index);
  }
  return slotArg;
}

Value EntryBuilder::materialize(Value value) {
  if (Value mapped = mapping.lookupOrNull(value)) {
    return mapped;
  }
  if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
    Value made = argument(arg);
    mapping.map(value, made);
    return made;
  }
  Operation *def = value.getDefiningOp();
  // Only free ops are left unmapped: clone them (and what they read) here.
  for (Value operand : def->getOperands()) {
    materialize(operand);
  }
  Operation *clone = builder.clone(*def, mapping);
  (void)clone;
  return mapping.lookup(value);
}

} // namespace

FailureOr<func::FuncOp> LayerSplitter::buildStepFunction(ModuleOp into,
                                                         int64_t stage,
                                                         bool forwardOnly) {
  builder.setInsertionPointToEnd(into.getBody());
  StringRef name = forwardOnly ? kForward : kTrain;
  bool last = stage == stages - 1;
  SmallVector<Type> results;
  SmallVector<DictionaryAttr> resultAttrs;
  Value loss = train.getBody().front().getTerminator()->getOperand(0);
  bool returnsLoss = !forwardOnly && map.stageOf(loss) == stage;
  if (returnsLoss) {
    results.push_back(loss.getType());
    resultAttrs.push_back(train.getResultAttrDict(0));
  }
  auto func = func::FuncOp::create(
      builder, train.getLoc(), name,
      builder.getFunctionType(TypeRange(), results));
  if (returnsLoss) {
    func.setResAttrsAttr(builder.getArrayAttr({resultAttrs[0]}));
  }
  for (NamedAttribute attr : train->getDiscardableAttrs()) {
    func->setAttr(attr.getName(), attr.getValue());
  }
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);
  EntryBuilder entry(builder, train, func,
                     forwardOnly ? "forward_" : "");

  SmallVector<std::pair<Value, int64_t>> incoming, outgoing;
  crossings(stage, forwardOnly, incoming, outgoing);
  // Receives first. A stage with a forward entry received its inputs there
  // and kept them in slots, which train_step reads back.
  unsigned slotIndex = 0;
  for (auto [value, from] : incoming) {
    auto type = llvm::cast<RankedTensorType>(value.getType());
    bool gradient = map.backward.contains(value);
    if (gradient ? from < stage : from > stage) {
      return value.getDefiningOp()->emitError()
             << "tailor-split-layers: stage " << stage << " reads "
             << (gradient ? "a gradient" : "an activation") << " of stage "
             << from << ", which a pipeline does not hand that way";
    }
    bool fromSlot = !forwardOnly && !last && !gradient;
    Value received;
    std::string state = "pipeline.input." + std::to_string(slotIndex);
    if (fromSlot) {
      received = tg::SlotReadOp::create(builder, value.getLoc(), type,
                                        state, entry.slot());
      ++slotIndex;
    } else {
      received = tg::RecvOp::create(builder, value.getLoc(), type, from);
      if (forwardOnly) {
        tg::SlotWriteOp::create(builder, value.getLoc(), state, received,
                                entry.slot());
        ++slotIndex;
      }
    }
    entry.mapping.map(value, received);
  }
  // The stage's ops, in the unsplit order.
  for (Operation &op : train.getBody().front().without_terminator()) {
    if (!inEntry(&op, stage, forwardOnly)) {
      continue;
    }
    for (Value operand : op.getOperands()) {
      entry.materialize(operand);
    }
    builder.clone(op, entry.mapping);
  }
  // Sends last.
  for (auto [value, to] : outgoing) {
    tg::SendOp::create(builder, value.getLoc(), entry.materialize(value), to);
  }
  SmallVector<Value> returned;
  if (returnsLoss) {
    returned.push_back(entry.mapping.lookup(loss));
  }
  func::ReturnOp::create(builder, train.getLoc(), returned);
  {
    // Forward ops whose results nothing here reads (a forward entry's that
    // feed no send, a replayed forward's that backward does not need: the
    // stage's output, say) are not run.
    bool erased = true;
    while (erased) {
      erased = false;
      for (Operation &op :
           llvm::make_early_inc_range(llvm::reverse(body->getOperations()))) {
        if (isOpTriviallyDead(&op)) {
          op.erase();
          erased = true;
        }
      }
    }
  }
  return func;
}

} // namespace tailor::parallel::split
