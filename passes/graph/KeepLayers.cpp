//===- KeepLayers.cpp - the first N transformer layers of a model ---------===//

#include "passes/graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"

#include <map>

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_KEEPLAYERSPASS
#include "passes/graph/Passes.h.inc"

namespace {

std::optional<int64_t> layerOf(Operation *op) {
  if (auto attr =
          op->getAttrOfType<IntegerAttr>(tg::TGDialect::kLayerAttrName)) {
    return attr.getInt();
  }
  return std::nullopt;
}

/// Whether `a` and `b` are the same op up to their layer and module names.
bool alike(Operation *a, Operation *b) {
  return a->getName() == b->getName() &&
         a->getNumOperands() == b->getNumOperands() &&
         a->getResultTypes() == b->getResultTypes();
}

struct KeepLayersPass : public impl::KeepLayersPassBase<KeepLayersPass> {
  using KeepLayersPassBase::KeepLayersPassBase;

  void runOnOperation() override;

private:
  /// Points what reads layer `last` from outside the cut layers at the
  /// matching results of layer `count - 1`.
  LogicalResult rewireExits(const std::map<int64_t, SmallVector<Operation *>> &
                                layers,
                            int64_t last);
  /// Erases the params no op references any more.
  void eraseUnreadParams(ModuleOp module);
};

LogicalResult KeepLayersPass::rewireExits(
    const std::map<int64_t, SmallVector<Operation *>> &layers, int64_t last) {
  const SmallVector<Operation *> &from = layers.at(last);
  const SmallVector<Operation *> &to = layers.at(count - 1);
  if (from.size() != to.size()) {
    return from.front()->emitError()
           << "tailor-keep-layers: layer " << last << " has " << from.size()
           << " ops, layer " << count - 1 << " " << to.size()
           << ": the layers are not alike";
  }
  for (size_t i = 0; i < from.size(); ++i) {
    if (!alike(from[i], to[i])) {
      return from[i]->emitError()
             << "tailor-keep-layers: op " << i << " of layer " << last
             << " is not op " << i << " of layer " << count - 1 << " ('"
             << to[i]->getName() << "'): the layers are not alike";
    }
    for (unsigned r = 0; r < from[i]->getNumResults(); ++r) {
      from[i]->getResult(r).replaceUsesWithIf(
          to[i]->getResult(r), [&](OpOperand &use) {
            std::optional<int64_t> user = layerOf(use.getOwner());
            return !user || *user < count;
          });
    }
  }
  return success();
}

void KeepLayersPass::eraseUnreadParams(ModuleOp module) {
  llvm::DenseSet<StringAttr> read;
  if (std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(&module.getBodyRegion())) {
    for (const SymbolTable::SymbolUse &use : *uses) {
      read.insert(use.getSymbolRef().getRootReference());
    }
  }
  for (tg::ParamOp param :
       llvm::make_early_inc_range(module.getOps<tg::ParamOp>())) {
    if (!read.contains(param.getSymNameAttr())) {
      param.erase();
    }
  }
}

void KeepLayersPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (count < 1) {
    module.emitError() << "tailor-keep-layers: count must be at least 1, got "
                       << static_cast<int64_t>(count);
    return signalPassFailure();
  }
  auto func = module.lookupSymbol<func::FuncOp>(function);
  if (!func) {
    module.emitError() << "tailor-keep-layers: no function @" << function;
    return signalPassFailure();
  }
  std::map<int64_t, SmallVector<Operation *>> layers;
  for (Operation &op : func.getBody().front()) {
    if (std::optional<int64_t> layer = layerOf(&op)) {
      layers[*layer].push_back(&op);
    }
  }
  if (layers.empty() || layers.rbegin()->first < count) {
    return;
  }
  if (!layers.count(count - 1)) {
    func.emitError() << "tailor-keep-layers: the model has no layer "
                     << count - 1;
    return signalPassFailure();
  }
  if (failed(rewireExits(layers, layers.rbegin()->first))) {
    return signalPassFailure();
  }
  // Erase the cut layers last op first, then what only they read (weight
  // references, their transposes).
  for (auto it = layers.rbegin(); it != layers.rend() && it->first >= count;
       ++it) {
    for (Operation *op : llvm::reverse(it->second)) {
      if (!op->use_empty()) {
        op->emitError() << "tailor-keep-layers: a result of layer "
                        << it->first << " is read outside the cut layers";
        return signalPassFailure();
      }
      op->erase();
    }
  }
  Block &body = func.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
    if (op.use_empty() && op.getNumResults() > 0 && isMemoryEffectFree(&op)) {
      op.erase();
    }
  }
  eraseUnreadParams(module);
}

} // namespace

} // namespace tailor::graph
