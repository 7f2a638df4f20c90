//===- OverlapHostUpdates.cpp - host AdamW started during backward --------===//
//
// tailor-overlap-host-updates (Passes.td): optimizer offload's host updates
// move from the optimizer step into the training step, one group per
// transformer layer right after the layer's last gradient copy to the host,
// so the host updates layer L while the device computes the gradients of
// the layers before it (ZeRO-Offload's overlap of the CPU optimizer with
// backward). The scalars the updates read are cloned at the start of the
// training step, computed from its `update_step` input (the optimizer's
// `step`); an update whose scalars need more (the clipping norm, fp16's
// scaler) stays after backward.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>

namespace tailor::parallel {

#define GEN_PASS_DEF_OVERLAPHOSTUPDATESPASS
#include "passes/parallel/Passes.h.inc"

using namespace mlir;

namespace {

/// The argument of `f` named `name` (tg.name), or null.
BlockArgument argumentNamed(func::FuncOp f, StringRef name) {
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto attr = f.getArgAttrOfType<StringAttr>(i, "tg.name");
    if (attr && attr.getValue() == name) {
      return f.getArgument(i);
    }
  }
  return nullptr;
}

/// Whether `op` names a symbol (a state, a parameter): it reads or writes
/// what the training step changes.
bool namesSymbol(Operation *op) {
  for (NamedAttribute attr : op->getAttrs()) {
    bool found = false;
    attr.getValue().walk([&](SymbolRefAttr) { found = true; });
    if (found) {
      return true;
    }
  }
  return false;
}

/// The ops `value` is computed from in its block, in program order, if
/// they are pure arithmetic on `step` and constants (tg.to_host allowed);
/// failure with the reason otherwise.
FailureOr<SmallVector<Operation *>> portableSlice(Value value,
                                                  BlockArgument step,
                                                  std::string &why) {
  llvm::SetVector<Operation *> slice;
  SmallVector<Value> work = {value};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
      if (arg != step) {
        why = "it reads an input other than `step`";
        return failure();
      }
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (slice.contains(def)) {
      continue;
    }
    bool pure = isMemoryEffectFree(def) || llvm::isa<tg::ToHostOp>(def);
    if (!pure || def->getNumRegions() > 0 || namesSymbol(def)) {
      why = "it depends on '" + def->getName().getStringRef().str() +
            "', which reads the training state (clipping's norm needs "
            "every gradient of the step)";
      return failure();
    }
    slice.insert(def);
    llvm::append_range(work, def->getOperands());
  }
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  return ordered;
}

struct OverlapHostUpdatesPass
    : public impl::OverlapHostUpdatesPassBase<OverlapHostUpdatesPass> {
  using OverlapHostUpdatesPassBase::OverlapHostUpdatesPassBase;

  void runOnOperation() override;

private:
  /// An update that moves, the later of its two copies in the step, and
  /// the optimizer's ops its scalars are computed from (program order).
  struct Movable {
    tg::AdamWUpdateOp update;
    Operation *anchor;
    SmallVector<Operation *> slice;
  };
  /// The host updates of `optimizer` whose copies are both in `step` and
  /// whose scalars are portable; remarks on the others.
  SmallVector<Movable> findMovable(func::FuncOp step, func::FuncOp optimizer);
  /// The training step's `update_step` input (the optimizer's `step`:
  /// plan inputs have names unique across entries), added when it has none.
  BlockArgument stepInputOf(func::FuncOp step, Type type);
  /// Clones the scalars of `movable` at the start of `step`, mapping the
  /// optimizer's `step` argument to the training step's, and points each
  /// moved update at the clones.
  void cloneScalars(ArrayRef<Movable> movable, func::FuncOp step,
                    BlockArgument optimizerStep, BlockArgument trainStep);
  /// Moves the updates after their copies, one group per layer.
  void placeByLayer(ArrayRef<Movable> movable, func::FuncOp step);
};

SmallVector<OverlapHostUpdatesPass::Movable>
OverlapHostUpdatesPass::findMovable(func::FuncOp step,
                                    func::FuncOp optimizer) {
  // Each host state the step copies into, by name.
  llvm::DenseMap<StringAttr, Operation *> copyInto;
  for (auto copy : step.getOps<tg::CopyStateOp>()) {
    copyInto[copy.getTargetAttr().getAttr()] = copy;
  }
  BlockArgument optimizerStep = argumentNamed(optimizer, "step");
  SmallVector<Movable> movable;
  optimizer.walk([&](tg::AdamWUpdateOp update) {
    if (!update->hasAttr(tg::TGDialect::kHostAttrName)) {
      return;
    }
    Operation *gradCopy = copyInto.lookup(update.getGradAttr().getAttr());
    Operation *masterCopy = copyInto.lookup(update.getParamAttr().getAttr());
    if (!gradCopy || !masterCopy) {
      update->emitRemark() << "tailor-overlap-host-updates: stays in @"
                           << optimizer.getSymName()
                           << ": its copies to the host are not in @"
                           << step.getSymName();
      return;
    }
    SmallVector<Operation *> slice;
    for (Value scalar :
         {update.getLr(), update.getStep(), update.getGradScale()}) {
      std::string why;
      FailureOr<SmallVector<Operation *>> ops = failure();
      if (!optimizerStep) {
        why = "@" + optimizer.getSymName().str() + " has no `step` input";
      } else if (succeeded(ops = portableSlice(scalar, optimizerStep, why))) {
        llvm::append_range(slice, *ops);
        continue;
      }
      update->emitRemark() << "tailor-overlap-host-updates: stays in @"
                           << optimizer.getSymName()
                           << ": a scalar it reads cannot be computed "
                              "during backward: "
                           << why;
      return;
    }
    Operation *anchor = gradCopy->isBeforeInBlock(masterCopy) ? masterCopy
                                                              : gradCopy;
    llvm::sort(slice, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    slice.erase(std::unique(slice.begin(), slice.end()), slice.end());
    movable.push_back({update, anchor, std::move(slice)});
  });
  return movable;
}

BlockArgument OverlapHostUpdatesPass::stepInputOf(func::FuncOp step,
                                                  Type type) {
  if (BlockArgument existing = argumentNamed(step, "update_step")) {
    return existing;
  }
  unsigned index = step.getNumArguments();
  Builder builder(step.getContext());
  (void)step.insertArgument(
      index, type,
      builder.getDictionaryAttr(
          builder.getNamedAttr("tg.name", builder.getStringAttr("update_step"))),
      step.getLoc());
  return step.getArgument(index);
}

void OverlapHostUpdatesPass::cloneScalars(ArrayRef<Movable> movable,
                                          func::FuncOp step,
                                          BlockArgument optimizerStep,
                                          BlockArgument trainStep) {
  IRMapping mapping;
  mapping.map(optimizerStep, trainStep);
  OpBuilder builder = OpBuilder::atBlockBegin(&step.getBody().front());
  for (const Movable &m : movable) {
    for (Operation *op : m.slice) {
      if (!mapping.contains(op->getResult(0))) {
        builder.clone(*op, mapping);
      }
    }
    for (OpOperand &operand : m.update->getOpOperands()) {
      operand.set(mapping.lookupOrDefault(operand.get()));
    }
  }
}

void OverlapHostUpdatesPass::placeByLayer(ArrayRef<Movable> movable,
                                          func::FuncOp step) {
  // Each op's place and the layer of the last op at or before it that has
  // one, counted once before anything moves.
  llvm::DenseMap<Operation *, std::pair<size_t, int64_t>> where;
  int64_t layer = -1;
  size_t place = 0;
  for (Operation &op : step.getBody().front()) {
    if (auto attr = op.getAttrOfType<IntegerAttr>(tg::TGDialect::kLayerAttrName)) {
      layer = attr.getInt();
    }
    where[&op] = {place++, layer};
  }
  SmallVector<Movable> ordered(movable.begin(), movable.end());
  llvm::stable_sort(ordered, [&](const Movable &a, const Movable &b) {
    return where.lookup(a.anchor).first < where.lookup(b.anchor).first;
  });
  // Runs of anchors in one layer: the group waits for the run's last copy.
  for (size_t begin = 0; begin < ordered.size();) {
    int64_t groupLayer = where.lookup(ordered[begin].anchor).second;
    size_t end = begin + 1;
    while (end < ordered.size() &&
           where.lookup(ordered[end].anchor).second == groupLayer) {
      ++end;
    }
    Operation *last = ordered[end - 1].anchor;
    for (size_t i = begin; i < end; ++i) {
      ordered[i].update->moveAfter(last);
      last = ordered[i].update;
    }
    begin = end;
  }
}

void OverlapHostUpdatesPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto step = module.lookupSymbol<func::FuncOp>(function);
  auto optimizer = module.lookupSymbol<func::FuncOp>(optimizerFunction);
  if (!step || !optimizer) {
    module.emitError() << "tailor-overlap-host-updates: no function @"
                       << (step ? optimizerFunction : function);
    return signalPassFailure();
  }
  SmallVector<Movable> movable = findMovable(step, optimizer);
  if (movable.empty()) {
    return;
  }
  BlockArgument optimizerStep = argumentNamed(optimizer, "step");
  BlockArgument trainStep = stepInputOf(step, optimizerStep.getType());
  cloneScalars(movable, step, optimizerStep, trainStep);
  placeByLayer(movable, step);
  // The optimizer's host scalars nobody reads any more.
  SmallVector<Operation *> unused;
  optimizer.walk([&](tg::ToHostOp toHost) {
    if (toHost->use_empty()) {
      unused.push_back(toHost);
    }
  });
  for (Operation *op : unused) {
    op->erase();
  }
}

} // namespace

} // namespace tailor::parallel
