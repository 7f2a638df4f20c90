//===- Recompute.cpp - recompute activations in backward -------------------===//
//
// The policies and the rewrite are described with the pass (Passes.td). The
// pass works in three named steps: find what forward saves for backward
// (`SavedValues`), let the policy choose what to recompute (`choose*`), then
// record the choice and clone (`rewrite`). The budget policy tries its
// choices on a copy of the function and measures each with the
// activation-memory analysis, never on the function itself.
//
//===----------------------------------------------------------------------===//

#include "passes/memory/Passes.h"

#include "passes/memory/ActivationMemory.h"
#include "passes/memory/OpCost.h"
#include "passes/memory/SavedValues.h"

#include "dialects/tg/TGShapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace tailor::memory {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/memory/Passes.h.inc"
} // namespace tailor::memory

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

namespace {

constexpr StringLiteral kRecomputeAttr = tg::TGDialect::kRecomputeAttrName;
constexpr StringLiteral kRecomputedAttr = tg::TGDialect::kRecomputedAttrName;
constexpr StringLiteral kPolicyAttr = tg::TGDialect::kRecomputePolicyAttrName;

/// Saved values a policy may recompute: inside a layer, not its output.
SmallVector<Value> candidates(const SavedValues &info) {
  SmallVector<Value> list;
  for (Value value : info.saved) {
    if (!info.boundary.contains(value)) {
      list.push_back(value);
    }
  }
  return list;
}

/// The ops rebuilding `value` needs when everything in `recompute` is
/// recomputed and every other saved value is kept: its producer, and
/// recursively the producers of operands that are neither kept, free nor
/// a layer boundary (forward-only intermediates are rebuilt, not kept).
void closureOf(Value value, const SavedValues &info,
               const DenseSet<Value> &recompute,
               llvm::SetVector<Operation *> &ops) {
  Operation *producer = value.getDefiningOp();
  if (!producer || !ops.insert(producer)) {
    return;
  }
  for (Value operand : producer->getOperands()) {
    bool kept = info.free.contains(operand) ||
                info.boundary.contains(operand) ||
                !operand.getDefiningOp() ||
                !info.forward.contains(operand.getDefiningOp()) ||
                (info.saved.contains(operand) && !recompute.contains(operand));
    if (!kept) {
      closureOf(operand, info, recompute, ops);
    }
  }
}

/// GEMMs, attention and lookups: what `selective` never redoes.
bool isExpensive(Operation *op) {
  return llvm::isa<tg::LinearOp, tg::MatmulOp, tg::AttentionOp,
                   tg::EmbeddingOp, tg::CrossEntropyOp>(op);
}

DenseSet<Value> chooseFull(const SavedValues &info) {
  DenseSet<Value> recompute;
  for (Value value : candidates(info)) {
    recompute.insert(value);
  }
  return recompute;
}

/// In program order, so a value's producers are decided before it is.
DenseSet<Value> chooseSelective(const SavedValues &info) {
  DenseSet<Value> recompute;
  for (Value value : candidates(info)) {
    if (isExpensive(value.getDefiningOp())) {
      continue;
    }
    llvm::SetVector<Operation *> ops;
    closureOf(value, info, recompute, ops);
    if (llvm::none_of(ops, isExpensive)) {
      recompute.insert(value);
    }
  }
  return recompute;
}

/// Clones the recomputed values' producers before their backward readers.
class Rewriter {
public:
  Rewriter(const SavedValues &info, const DenseSet<Value> &recompute)
      : info(info), recompute(recompute) {}

  void run(Block &body) {
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (info.forward.contains(&op) || llvm::isa<func::ReturnOp>(op) ||
          op.hasAttr(kRecomputedAttr)) {
        continue;
      }
      for (OpOperand &use : op.getOpOperands()) {
        if (recompute.contains(use.get())) {
          use.set(materialize(use.get(), &op));
        }
      }
    }
  }

  /// The clones, in the order they were made.
  std::vector<Operation *> made;

private:
  /// The clone of `value`, made right before `before` on first request.
  Value materialize(Value value, Operation *before) {
    if (Value clone = clones.lookup(value)) {
      return clone;
    }
    Operation *producer = value.getDefiningOp();
    IRMapping mapping;
    for (Value operand : producer->getOperands()) {
      if (needsRebuild(operand) || rereadsParameter(operand)) {
        mapping.map(operand, materialize(operand, before));
      }
    }
    OpBuilder builder(before);
    Operation *clone = builder.clone(*producer, mapping);
    made.push_back(clone);
    clone->removeAttr(kRecomputeAttr);
    clone->setAttr(kRecomputedAttr, builder.getUnitAttr());
    for (auto [original, copy] :
         llvm::zip(producer->getResults(), clone->getResults())) {
      clones[original] = copy;
    }
    return clones.lookup(value);
  }

  bool needsRebuild(Value operand) const {
    Operation *producer = operand.getDefiningOp();
    if (!producer || !info.forward.contains(producer) ||
        info.free.contains(operand) || info.boundary.contains(operand)) {
      return false;
    }
    return recompute.contains(operand) || !info.saved.contains(operand);
  }

  /// A replay computes what it reads of a parameter (a transpose, a
  /// dequantized copy) again from the parameter, rather than keep the
  /// forward's copy alive until backward: ZeRO-3 then gathers the
  /// parameter again for backward and parameter offload copies it again,
  /// where the forward's copy would stay for the whole step (on the
  /// 7B-shaped graph at ZeRO-3, 19 GiB of transposed weights). Elsewhere
  /// such views are read in place, and the copy costs nothing.
  bool rereadsParameter(Value operand) {
    Operation *producer = operand.getDefiningOp();
    return producer && info.free.contains(operand) &&
           !isDataReference(producer) && readsParameter(producer);
  }

  /// Whether `op` computes from a tg.param_ref (through other ops).
  bool readsParameter(Operation *op) {
    auto [it, inserted] = parameterReaders.try_emplace(op, false);
    if (!inserted) {
      return it->second;
    }
    bool reads = llvm::isa<tg::ParamRefOp>(op) ||
                 llvm::any_of(op->getOperands(), [&](Value operand) {
                   Operation *producer = operand.getDefiningOp();
                   return producer && readsParameter(producer);
                 });
    parameterReaders[op] = reads;
    return reads;
  }

  const SavedValues &info;
  const DenseSet<Value> &recompute;
  DenseMap<Value, Value> clones;
  DenseMap<Operation *, bool> parameterReaders;
};

/// Marks the producers of everything rebuilt (the recomputed values and the
/// forward-only intermediates they need).
void recordDecision(const SavedValues &info, const DenseSet<Value> &recompute,
                    Builder &builder) {
  for (Value value : info.saved) {
    if (!recompute.contains(value)) {
      continue;
    }
    llvm::SetVector<Operation *> ops;
    closureOf(value, info, recompute, ops);
    for (Operation *op : ops) {
      op->setAttr(kRecomputeAttr, builder.getUnitAttr());
    }
  }
}

/// Applies `recompute` to `func` (its decision attributes and clones);
/// returns the clones.
std::vector<Operation *> rewrite(func::FuncOp func,
                                 const DenseSet<Value> &recompute,
                                 const SavedValues &info) {
  Builder builder(func.getContext());
  recordDecision(info, recompute, builder);
  Rewriter rewriter(info, recompute);
  rewriter.run(func.getBody().front());
  return std::move(rewriter.made);
}

/// Records what the policy chose on the module, for the plan's notes and
/// `tailor inspect`: tensors recomputed, ops and FLOPs that rebuild them,
/// and the activation arena with and without.
void recordSummary(ModuleOp module, StringRef policy, size_t tensors,
                   ArrayRef<Operation *> clones, int64_t bytesWithout,
                   int64_t bytesWith) {
  double flops = 0;
  for (Operation *clone : clones) {
    flops += costOf(clone).flops;
  }
  Builder b(module.getContext());
  module->setAttr(
      tg::TGDialect::kRecomputeSummaryAttrName,
      b.getDictionaryAttr({
          b.getNamedAttr("policy", b.getStringAttr(policy)),
          b.getNamedAttr("tensors", b.getI64IntegerAttr(int64_t(tensors))),
          b.getNamedAttr("ops", b.getI64IntegerAttr(int64_t(clones.size()))),
          b.getNamedAttr("flops", b.getF64FloatAttr(flops)),
          b.getNamedAttr("activation_bytes", b.getI64IntegerAttr(bytesWith)),
          b.getNamedAttr("activation_bytes_without",
                         b.getI64IntegerAttr(bytesWithout)),
      }));
}

struct RecomputePass
    : public memory::impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;
  void runOnOperation() override;

private:
  FailureOr<DenseSet<Value>> chooseBudget(func::FuncOp func,
                                          const SavedValues &info);
  /// The activation peak of `func` with `recompute` applied, measured on a
  /// copy.
  int64_t peakWith(func::FuncOp func, const SavedValues &info,
                   const DenseSet<Value> &recompute);
};

int64_t RecomputePass::peakWith(func::FuncOp func, const SavedValues &info,
                                const DenseSet<Value> &recompute) {
  // The copy is measured detached; values map one to one, in order.
  IRMapping mapping;
  func::FuncOp copy = func.clone(mapping);
  SavedValues copied;
  auto lookup = [&](Value v) { return mapping.lookup(v); };
  for (Operation *op : info.forward) {
    copied.forward.insert(mapping.lookup(op));
  }
  for (Value v : info.free) {
    copied.free.insert(lookup(v));
  }
  for (Value v : info.boundary) {
    copied.boundary.insert(lookup(v));
  }
  for (Value v : info.saved) {
    copied.saved.insert(lookup(v));
  }
  DenseSet<Value> copiedRecompute;
  for (Value v : recompute) {
    copiedRecompute.insert(lookup(v));
  }
  rewrite(copy, copiedRecompute, copied);
  int64_t peak = ActivationMemory(copy).arenaBytes();
  copy.erase();
  return peak;
}

FailureOr<DenseSet<Value>> RecomputePass::chooseBudget(func::FuncOp func,
                                                       const SavedValues &info) {
  int64_t none = ActivationMemory(func).arenaBytes();
  int64_t target = budgetBytes > 0
                       ? budgetBytes.getValue()
                       : static_cast<int64_t>(budgetFraction * double(none));
  if (budgetBytes <= 0 && !(budgetFraction > 0 && budgetFraction <= 1)) {
    return func.emitError() << "the budget policy needs budget-fraction in "
                               "(0, 1] or budget-bytes above 0";
  }
  if (none <= target) {
    return DenseSet<Value>();
  }
  // Group the same tensor of every layer: its position among its layer's
  // forward ops, and its result number.
  std::map<int64_t, int64_t> opsSeen; // layer -> forward ops so far
  llvm::MapVector<std::pair<int64_t, unsigned>, SmallVector<Value>> groups;
  DenseMap<Operation *, int64_t> position;
  for (Operation &op : func.getBody().front()) {
    if (std::optional<int64_t> layer = layerOf(&op);
        layer && info.forward.contains(&op)) {
      position[&op] = opsSeen[*layer]++;
    }
  }
  for (Value value : candidates(info)) {
    auto result = llvm::cast<OpResult>(value);
    groups[{position.lookup(result.getOwner()), result.getResultNumber()}]
        .push_back(value);
  }
  // FLOPs to rebuild a group alone, per byte it frees.
  SmallVector<std::pair<double, SmallVector<Value>>> ranked;
  for (auto &[key, values] : groups) {
    double flops = 0, bytes = 0;
    for (Value value : values) {
      llvm::SetVector<Operation *> ops;
      DenseSet<Value> alone{value};
      closureOf(value, info, alone, ops);
      for (Operation *op : ops) {
        flops += costOf(op).flops;
      }
      bytes += double(tg::byteSize(llvm::cast<ShapedType>(value.getType())));
    }
    ranked.push_back({flops / std::max(bytes, 1.0), values});
  }
  llvm::stable_sort(ranked, [](const auto &a, const auto &b) {
    return a.first < b.first;
  });
  DenseSet<Value> recompute;
  for (auto &[ratio, values] : ranked) {
    recompute.insert(values.begin(), values.end());
    if (peakWith(func, info, recompute) <= target) {
      return recompute;
    }
  }
  int64_t reached = peakWith(func, info, recompute);
  func.emitWarning() << llvm::formatv(
      "activation budget of {0} bytes is below what recomputing every layer "
      "reaches ({1} bytes, {2:P1} of {3} without recomputation); "
      "recomputing every layer",
      target, reached, double(reached) / double(none), none);
  return recompute;
}

void RecomputePass::runOnOperation() {
  ModuleOp module = getOperation();
  auto func = module.lookupSymbol<func::FuncOp>(function);
  if (!func) {
    module.emitError() << "tailor-recompute: no function '" << function << "'";
    return signalPassFailure();
  }
  if (!func.getBody().hasOneBlock() || func.getNumResults() == 0) {
    func.emitError() << "expected a single-block training step whose first "
                        "result is the loss";
    return signalPassFailure();
  }
  Block &body = func.getBody().front();
  Value loss = body.getTerminator()->getOperand(0);
  SavedValues info = findSavedValues(body, loss);
  DenseSet<Value> recompute;
  if (policy == "full") {
    recompute = chooseFull(info);
  } else if (policy == "selective") {
    recompute = chooseSelective(info);
  } else if (policy == "budget") {
    FailureOr<DenseSet<Value>> chosen = chooseBudget(func, info);
    if (failed(chosen)) {
      return signalPassFailure();
    }
    recompute = std::move(*chosen);
  } else if (policy != "none") {
    module.emitError() << "tailor-recompute: unknown policy '" << policy
                       << "' (expected none, full, selective or budget)";
    return signalPassFailure();
  }
  func->setAttr(kPolicyAttr, StringAttr::get(&getContext(), policy));
  if (policy == "none") {
    return;
  }
  int64_t without = ActivationMemory(func).arenaBytes();
  std::vector<Operation *> clones = rewrite(func, recompute, info);
  recordSummary(module, policy, recompute.size(), clones, without,
                ActivationMemory(func).arenaBytes());
}

} // namespace
