//===- AssignLayers.cpp - every op inside a layer records its layer -------===//

#include "passes/graph/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_ASSIGNLAYERSPASS
#include "passes/graph/Passes.h.inc"

namespace {

/// References to stored data: they are where tensors live, not work done
/// in a layer.
bool isDataReference(Operation *op) {
  return llvm::isa<tg::ParamRefOp, tg::StateRefOp, arith::ConstantOp>(op);
}

/// The largest layer among the producers of `op`'s operands, if any.
std::optional<int64_t> largestOperandLayer(Operation *op) {
  std::optional<int64_t> layer;
  for (Value operand : op->getOperands()) {
    Operation *producer = operand.getDefiningOp();
    if (!producer) {
      continue;
    }
    if (auto attr = producer->getAttrOfType<IntegerAttr>(
            tg::TGDialect::kLayerAttrName)) {
      layer = std::max(layer.value_or(attr.getInt()), attr.getInt());
    }
  }
  return layer;
}

struct AssignLayersPass
    : public graph::impl::AssignLayersPassBase<AssignLayersPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    Builder builder(func.getContext());
    // Program order is a topological order, so every producer is settled
    // before its users are visited.
    func.walk([&](Operation *op) {
      if (op->hasAttr(tg::TGDialect::kLayerAttrName) ||
          op->hasAttr(tg::TGDialect::kModuleAttrName) ||
          isDataReference(op) || op->getNumResults() == 0) {
        return;
      }
      if (std::optional<int64_t> layer = largestOperandLayer(op)) {
        op->setAttr(tg::TGDialect::kLayerAttrName,
                    builder.getI64IntegerAttr(*layer));
      }
    });
  }
};

} // namespace

} // namespace tailor::graph
