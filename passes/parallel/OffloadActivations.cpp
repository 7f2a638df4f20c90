//===- OffloadActivations.cpp - saved activations in host memory ----------===//
//
// tailor-offload's `activations` decision (torchtune's
// enable_activation_offloading): every activation the forward of
// `train_step` saves for backward (passes/memory/SavedValues.h) -- after
// recomputation, so only what is really kept -- of at least `min-bytes`
// goes to host memory after its last forward reader (`tg.to_host`) and
// comes back right before its first backward reader (`tg.to_device`),
// which then reads the copy. Between the two its device bytes are free, so
// the device holds a layer's activations at a time instead of all of them;
// the host holds the rest in the pinned `activations_host` arena, packed by
// lifetime.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/ZeroSharding.h"

#include "passes/memory/SavedValues.h"

#include "dialects/tg/TGShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tailor::parallel {

using namespace mlir;

namespace {

/// Where `value`'s readers sit: the last forward one and the first of the
/// rest (backward), by position in the block; false when backward reads it
/// before forward is done with it (then it stays on the device).
bool readersOf(Value value, const memory::SavedValues &info,
               const DenseMap<Operation *, int64_t> &position,
               Operation *&lastForward, Operation *&firstBackward) {
  lastForward = value.getDefiningOp();
  firstBackward = nullptr;
  for (Operation *user : value.getUsers()) {
    if (info.forward.contains(user)) {
      if (position.lookup(user) > position.lookup(lastForward)) {
        lastForward = user;
      }
    } else if (!llvm::isa<func::ReturnOp>(user) &&
               (!firstBackward ||
                position.lookup(user) < position.lookup(firstBackward))) {
      firstBackward = user;
    }
  }
  return firstBackward &&
         position.lookup(firstBackward) > position.lookup(lastForward);
}

} // namespace

LogicalResult offloadActivations(ModuleOp module, const ZeroOptions &options,
                                 int64_t minBytes) {
  auto func = module.lookupSymbol<func::FuncOp>(options.trainFunction);
  if (!func) {
    return module.emitError() << "tailor-offload: no function @"
                              << options.trainFunction
                              << ": activation offload places a training "
                                 "step's activations (compile with a recipe)";
  }
  if (!func.getBody().hasOneBlock() || func.getNumResults() == 0) {
    return func.emitError() << "tailor-offload: expected a single-block "
                               "training step whose first result is the loss";
  }
  Block &body = func.getBody().front();
  memory::SavedValues info =
      memory::findSavedValues(body, body.getTerminator()->getOperand(0));
  DenseMap<Operation *, int64_t> position;
  for (auto [index, op] : llvm::enumerate(body)) {
    position[&op] = static_cast<int64_t>(index);
  }
  OpBuilder builder(module.getContext());
  for (Value value : info.saved) {
    auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
    Operation *lastForward = nullptr, *firstBackward = nullptr;
    if (!type || !type.hasStaticShape() || tg::byteSize(type) < minBytes ||
        !readersOf(value, info, position, lastForward, firstBackward)) {
      continue;
    }
    builder.setInsertionPointAfter(lastForward);
    auto onHost = tg::ToHostOp::create(builder, value.getLoc(), value);
    builder.setInsertionPoint(firstBackward);
    auto back = tg::ToDeviceOp::create(builder, value.getLoc(), onHost);
    // Each copy belongs to the layer of the op next to it.
    for (auto [copy, beside] : {std::pair<Operation *, Operation *>{
                                    onHost, value.getDefiningOp()},
                                {back, firstBackward}}) {
      if (Attribute layer = beside->getAttr(tg::TGDialect::kLayerAttrName)) {
        copy->setAttr(tg::TGDialect::kLayerAttrName, layer);
      }
    }
    value.replaceUsesWithIf(back, [&](OpOperand &use) {
      Operation *user = use.getOwner();
      return user != onHost &&
             !info.forward.contains(user) && !llvm::isa<func::ReturnOp>(user);
    });
  }
  return success();
}

} // namespace tailor::parallel
