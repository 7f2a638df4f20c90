//===- SavedValues.cpp - what a training step's forward keeps for backward ===//

#include "passes/memory/SavedValues.h"

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

std::optional<int64_t> tailor::memory::layerOf(Operation *op) {
  if (auto layer = op->getAttrOfType<IntegerAttr>(tg::TGDialect::kLayerAttrName)) {
    return layer.getInt();
  }
  return std::nullopt;
}

bool tailor::memory::isDataReference(Operation *op) {
  return llvm::isa<tg::ParamRefOp, tg::StateRefOp, arith::ConstantOp>(op);
}

namespace {

/// The backward slice of the loss inside `body`.
DenseSet<Operation *> forwardOps(Block &body, Value loss) {
  DenseSet<Operation *> forward;
  SmallVector<Operation *> worklist;
  if (Operation *op = loss.getDefiningOp()) {
    worklist.push_back(op);
  }
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (op->getBlock() != &body || !forward.insert(op).second) {
      continue;
    }
    for (Value operand : op->getOperands()) {
      if (Operation *producer = operand.getDefiningOp()) {
        worklist.push_back(producer);
      }
    }
  }
  return forward;
}

/// True when a reader of `value` sits in another layer than its producer
/// (or outside the layers).
bool readAcrossLayers(Value value, const DenseSet<Operation *> &forward) {
  std::optional<int64_t> layer = layerOf(value.getDefiningOp());
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    return forward.contains(user) && layerOf(user) != layer;
  });
}

} // namespace

SavedValues tailor::memory::findSavedValues(Block &body, Value loss) {
  SavedValues info;
  info.forward = forwardOps(body, loss);
  for (Operation &op : body) {
    if (!info.forward.contains(&op)) {
      continue;
    }
    bool free = isDataReference(&op) ||
                llvm::all_of(op.getOperands(), [&](Value operand) {
                  return info.free.contains(operand);
                });
    for (Value result : op.getResults()) {
      if (free) {
        info.free.insert(result);
      } else if (!layerOf(&op) || readAcrossLayers(result, info.forward)) {
        info.boundary.insert(result);
      }
      bool readByBackward = llvm::any_of(result.getUsers(), [&](Operation *u) {
        return !info.forward.contains(u) && !llvm::isa<func::ReturnOp>(u);
      });
      if (readByBackward && !free) {
        info.saved.insert(result);
      }
    }
  }
  return info;
}

