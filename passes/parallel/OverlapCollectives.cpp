//===- OverlapCollectives.cpp - gradient collectives overlap backward -----===//
//
// tailor-overlap-collectives (Passes.td): marks the gradient collectives of
// the training step `tg.overlap`, so planning issues them on the
// communication stream, and moves what consumes them down by `in-flight`
// buckets so they have backward to overlap with. With
// `move-ddp-reductions`, DDP's all-reduces first move from the optimizer
// step into the training step, after their last gradient; with `prefetch`,
// ZeRO-3's gathers are issued one bucket ahead, and activation offload's
// copies run on the copy stream: evictions beside the forward, returns one
// layer ahead of the backward that reads them.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/tg/TGPartitionOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/DenseSet.h"

namespace tailor::parallel {

#define GEN_PASS_DEF_OVERLAPCOLLECTIVESPASS
#include "passes/parallel/Passes.h.inc"

using namespace mlir;

namespace {

/// The symbols `op` names in its attributes (states, parameters,
/// buckets), leaf names.
llvm::DenseSet<StringAttr> symbolsOf(Operation *op) {
  llvm::DenseSet<StringAttr> names;
  for (NamedAttribute attr : op->getAttrs()) {
    attr.getValue().walk([&](SymbolRefAttr ref) {
      names.insert(ref.getLeafReference());
    });
  }
  return names;
}

/// Whether `op` names any of `names`.
bool touchesAny(Operation *op, const llvm::DenseSet<StringAttr> &names) {
  for (StringAttr name : symbolsOf(op)) {
    if (names.contains(name)) {
      return true;
    }
  }
  return false;
}

bool isGradientCollective(Operation *op) {
  return llvm::isa<tg::ReduceScatterOp, tg::AllReduceOp, tg::AllReduceStatesOp,
                   tg::AllToAllOp>(op);
}

struct OverlapCollectivesPass
    : public impl::OverlapCollectivesPassBase<OverlapCollectivesPass> {
  using OverlapCollectivesPassBase::OverlapCollectivesPassBase;

  void runOnOperation() override;

private:
  /// DDP: each tg.all_reduce_states of the optimizer step moves into
  /// `step`, right after the last op naming one of its states.
  void moveDdpReductionsInto(func::FuncOp step, func::FuncOp optimizer);
  /// Optimizer offload, one micro-batch a step: each parameter's copies to
  /// the host (its gradient and itself; under ZeRO a bucket's chunk of
  /// both) move from the optimizer step into `step`, right after the
  /// gradient's last accumulation, on the copy stream, so they overlap the
  /// rest of backward. A gradient a collective reduces in place (DDP's)
  /// keeps its copy where it is.
  void moveOffloadCopiesInto(func::FuncOp step, func::FuncOp optimizer);
  /// Moves each tg.accumulate up to just after its gradient is made (and
  /// after any earlier op on its state): autodiff leaves some (norm
  /// weights, a tied embedding's first half) at the end of backward, which
  /// would hold every bucket they belong to until then.
  void hoistAccumulates(func::FuncOp step);
  /// ZeRO-3: each tg.gather_bucket of `step` but the first moves up to
  /// where compute starts using the one before it, so the communication
  /// stream gathers the next bucket while compute uses the current one
  /// (FSDP's prefetch of one); all are marked.
  void prefetchGathers(func::FuncOp step);
  /// Activation offload: every tg.to_host and tg.to_device is marked; the
  /// returns of each layer move up to where backward starts reading the
  /// returns of the layer before (in program order), so at most two layers'
  /// restored activations are on the device at once.
  void overlapActivationCopies(func::FuncOp step);
  /// Moves the consumers of collective `index` of `collectives` down to
  /// the collective `inFlight` later (or the terminator); false when one
  /// cannot move (it or an op in between touches what it writes).
  bool deferConsumers(ArrayRef<Operation *> collectives, size_t index);
};

void OverlapCollectivesPass::hoistAccumulates(func::FuncOp step) {
  // One walk in program order. Each op's position (a moved accumulation
  // takes its anchor's, plus a little), the last op that named each
  // symbol, and the last gradient collective: an accumulation moves to
  // just after the latest of its producers, the last op on its state and
  // that collective.
  DenseMap<Operation *, double> position;
  DenseMap<StringAttr, Operation *> lastToucher;
  Operation *lastCollective = nullptr;
  double index = 0;
  auto later = [&](Operation *a, Operation *b) {
    if (!a) {
      return b;
    }
    return b && position.lookup(b) > position.lookup(a) ? b : a;
  };
  Block &body = step.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(body)) {
    position[&op] = ++index;
    llvm::DenseSet<StringAttr> symbols = symbolsOf(&op);
    if (auto accumulate = llvm::dyn_cast<tg::AccumulateOp>(op)) {
      Operation *anchor = lastCollective;
      for (Value operand : op.getOperands()) {
        if (Operation *def = operand.getDefiningOp();
            def && def->getBlock() == &body) {
          anchor = later(anchor, def);
        }
      }
      for (StringAttr name : symbols) {
        anchor = later(anchor, lastToucher.lookup(name));
      }
      if (!anchor) {
        op.moveBefore(&body.front());
        position[&op] = 0;
      } else if (anchor != op.getPrevNode()) {
        op.moveAfter(anchor);
        position[&op] = position[anchor] + 1e-6 * index;
      }
    }
    if (isGradientCollective(&op)) {
      lastCollective = &op;
    }
    for (StringAttr name : symbols) {
      lastToucher[name] = &op;
    }
  }
}

void OverlapCollectivesPass::moveDdpReductionsInto(func::FuncOp step,
                                                   func::FuncOp optimizer) {
  SmallVector<tg::AllReduceStatesOp> reductions(
      optimizer.getOps<tg::AllReduceStatesOp>());
  Block &body = step.getBody().front();
  for (tg::AllReduceStatesOp reduce : reductions) {
    llvm::DenseSet<StringAttr> states = symbolsOf(reduce);
    // Nothing before the reduction in the optimizer step may touch them
    // (the shard pass puts the reductions first); otherwise it stays.
    Operation *before = nullptr;
    for (Operation &op : optimizer.getBody().front()) {
      if (&op == reduce.getOperation()) {
        break;
      }
      if (!isGradientCollective(&op) && touchesAny(&op, states)) {
        before = &op;
        break;
      }
    }
    if (before) {
      reduce->emitRemark() << "tailor-overlap-collectives: stays in @"
                           << optimizer.getSymName()
                           << ": an op before it uses its states";
      continue;
    }
    Operation *last = nullptr;
    for (Operation &op : body.without_terminator()) {
      if (touchesAny(&op, states)) {
        last = &op;
      }
    }
    if (last) {
      reduce->moveAfter(last);
    } else {
      reduce->moveBefore(body.getTerminator());
    }
  }
}

void OverlapCollectivesPass::moveOffloadCopiesInto(func::FuncOp step,
                                                   func::FuncOp optimizer) {
  ModuleOp module = step->getParentOfType<ModuleOp>();
  // Names to symbols once: a scan of the module per lookup is quadratic.
  SymbolTable symbols(module);
  auto isToHost = [&](tg::CopyStateOp copy) {
    auto target = symbols.lookup<tg::StateOp>(copy.getTarget());
    return target && target.getHost();
  };
  // Gradients a collective names stay: their copy must follow it.
  llvm::DenseSet<StringAttr> reduced;
  for (func::FuncOp f : {step, optimizer}) {
    f.walk([&](Operation *op) {
      if (isGradientCollective(op)) {
        llvm::DenseSet<StringAttr> names = symbolsOf(op);
        reduced.insert(names.begin(), names.end());
      }
    });
  }
  // The last op of the step naming each symbol, found once (the copies
  // moved in below name only their own gradient, parameter and host
  // states, so these stay the last for every other gradient).
  Block &body = step.getBody().front();
  llvm::DenseMap<StringAttr, Operation *> lastNaming;
  for (Operation &op : body.without_terminator()) {
    for (StringAttr name : symbolsOf(&op)) {
      lastNaming[name] = &op;
    }
  }
  Builder builder(step.getContext());
  SmallVector<tg::CopyStateOp> copies(optimizer.getOps<tg::CopyStateOp>());
  // Each parameter's own copies to the host (its fp32 master's); under
  // ZeRO a bucket's (this rank's chunk of its parameters).
  llvm::DenseMap<StringAttr, SmallVector<tg::CopyStateOp>> paramCopies;
  for (tg::CopyStateOp copy : copies) {
    Operation *source = symbols.lookup(copy.getSourceAttr().getAttr());
    if (isToHost(copy) && llvm::isa_and_nonnull<tg::ParamOp, tg::BucketOp>(source)) {
      paramCopies[copy.getSourceAttr().getAttr()].push_back(copy);
    }
  }
  for (tg::CopyStateOp copy : copies) {
    auto source = symbols.lookup<tg::StateOp>(copy.getSource());
    if (!isToHost(copy) || !source || source.getKind() != tg::StateKind::Grad ||
        reduced.contains(source.getSymNameAttr())) {
      continue;
    }
    Operation *at = lastNaming.lookup(source.getSymNameAttr());
    if (!at) {
      continue; // the step never makes this gradient
    }
    // The parameter's own copy (the next copy_state of the same parameter)
    // travels with it.
    for (tg::CopyStateOp other :
         paramCopies.lookup(source.getParameterAttr().getAttr())) {
      other->moveAfter(at);
      other->setAttr(tg::TGDialect::kOverlapAttrName, builder.getUnitAttr());
    }
    copy->moveAfter(at);
    copy->setAttr(tg::TGDialect::kOverlapAttrName, builder.getUnitAttr());
  }
}

/// Each op of `block` by its place, counted before anything moves. Moving
/// ops one by one and asking isBeforeInBlock after each move renumbers the
/// block every time (quadratic); these places stay right for every two ops
/// that have not moved, which are the only ones compared below.
using Positions = llvm::DenseMap<Operation *, size_t>;
static Positions positionsIn(Block &block) {
  Positions positions;
  size_t next = 0;
  for (Operation &op : block) {
    positions[&op] = next++;
  }
  return positions;
}

/// The first op of `op`'s block that uses one of its results (through
/// bucket_member views too); null if none.
static Operation *firstUser(Operation *op, const Positions &positions) {
  Operation *first = nullptr;
  for (Operation *user : op->getUsers()) {
    Operation *at = user;
    if (llvm::isa<tg::BucketMemberOp>(user)) {
      at = firstUser(user, positions);
    }
    if (at && at->getBlock() == op->getBlock() &&
        (!first || positions.lookup(at) < positions.lookup(first))) {
      first = at;
    }
  }
  return first;
}

void OverlapCollectivesPass::prefetchGathers(func::FuncOp step) {
  // hpZ's backward gathers within the node (tg.gather_partition) too.
  SmallVector<Operation *> gathers;
  for (Operation &op : step.getBody().front()) {
    if (llvm::isa<tg::GatherBucketOp, tg::GatherPartitionOp>(op)) {
      gathers.push_back(&op);
    }
  }
  // Where compute starts using each gather, before anything moves: the
  // next gather is issued there, so at most two gathered buckets (the one
  // in use, the one in flight) are alive at once.
  Positions positions = positionsIn(step.getBody().front());
  SmallVector<Operation *> uses;
  for (Operation *gather : gathers) {
    uses.push_back(firstUser(gather, positions));
  }
  Builder builder(step.getContext());
  for (size_t i = 0; i < gathers.size(); ++i) {
    Operation *part = gathers[i]->getNumOperands()
                          ? gathers[i]->getOperand(0).getDefiningOp()
                          : nullptr;
    if (i > 0 && uses[i - 1] &&
        positions.lookup(uses[i - 1]) < positions.lookup(gathers[i]) &&
        (!part || positions.lookup(part) < positions.lookup(uses[i - 1]))) {
      gathers[i]->moveBefore(uses[i - 1]);
    }
    gathers[i]->setAttr(tg::TGDialect::kOverlapAttrName,
                        builder.getUnitAttr());
  }
}

void OverlapCollectivesPass::overlapActivationCopies(func::FuncOp step) {
  Builder builder(step.getContext());
  // Returns grouped by layer, in the order backward reaches them.
  SmallVector<SmallVector<tg::ToDeviceOp>> layers;
  std::optional<int64_t> current;
  for (Operation &op : step.getBody().front()) {
    if (llvm::isa<tg::ToHostOp>(op)) {
      op.setAttr(tg::TGDialect::kOverlapAttrName, builder.getUnitAttr());
    }
    auto back = llvm::dyn_cast<tg::ToDeviceOp>(op);
    if (!back) {
      continue;
    }
    back->setAttr(tg::TGDialect::kOverlapAttrName, builder.getUnitAttr());
    auto layer = back->getAttrOfType<IntegerAttr>(tg::TGDialect::kLayerAttrName);
    std::optional<int64_t> id =
        layer ? std::optional<int64_t>(layer.getInt()) : std::nullopt;
    if (layers.empty() || id != current) {
      layers.emplace_back();
      current = id;
    }
    layers.back().push_back(back);
  }
  // Only the copies back move; their users, compared here, stay.
  Positions positions = positionsIn(step.getBody().front());
  for (size_t i = 1; i < layers.size(); ++i) {
    Operation *firstUse = nullptr;
    for (tg::ToDeviceOp back : layers[i - 1]) {
      Operation *use = firstUser(back, positions);
      if (use && (!firstUse ||
                  positions.lookup(use) < positions.lookup(firstUse))) {
        firstUse = use;
      }
    }
    for (tg::ToDeviceOp back : layers[i]) {
      // Its host copy is made in forward, long before: moving up keeps it
      // after its operand.
      if (firstUse && positions.lookup(firstUse) < positions.lookup(back)) {
        back->moveBefore(firstUse);
      }
    }
  }
}

bool OverlapCollectivesPass::deferConsumers(ArrayRef<Operation *> collectives,
                                            size_t index) {
  Operation *collective = collectives[index];
  Operation *target = index + size_t(inFlight) < collectives.size()
                          ? collectives[index + size_t(inFlight)]
                          : collective->getBlock()->getTerminator();
  SmallVector<Operation *> consumers;
  auto movable = [&](Operation *user) {
    return user->getBlock() == collective->getBlock() &&
           user->isBeforeInBlock(target);
  };
  for (Operation *user : collective->getUsers()) {
    // ZeRO++'s qgZ: the decode of the all-to-all's chunks moves with the
    // accumulations it feeds (it comes first: it is before them).
    if (llvm::isa<tg::DequantizeReduceOp>(user) && movable(user)) {
      consumers.push_back(user);
      for (Operation *accumulate : user->getUsers()) {
        if (!llvm::isa<tg::AccumulateOp>(accumulate) || !movable(accumulate)) {
          return false;
        }
        consumers.push_back(accumulate);
      }
      continue;
    }
    if (!llvm::isa<tg::AccumulateOp>(user) || !movable(user)) {
      return false;
    }
    consumers.push_back(user);
  }
  // Each accumulator's state must not be named between the consumer and
  // its new place (nothing else reads or writes a bucket's chunk there).
  for (Operation *consumer : consumers) {
    llvm::DenseSet<StringAttr> written = symbolsOf(consumer);
    for (Operation *op = consumer->getNextNode(); op != target;
         op = op->getNextNode()) {
      if (touchesAny(op, written)) {
        return false;
      }
    }
  }
  llvm::sort(consumers, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  for (Operation *consumer : consumers) {
    consumer->moveBefore(target);
  }
  return true;
}

void OverlapCollectivesPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (inFlight < 1) {
    module.emitError() << "tailor-overlap-collectives: in-flight must be at "
                          "least 1, got "
                       << static_cast<int64_t>(inFlight);
    return signalPassFailure();
  }
  auto step = module.lookupSymbol<func::FuncOp>(function);
  if (!step) {
    module.emitError() << "tailor-overlap-collectives: no function @"
                       << function;
    return signalPassFailure();
  }
  if (moveDdpReductions) {
    auto optimizer = module.lookupSymbol<func::FuncOp>(optimizerFunction);
    if (!optimizer) {
      module.emitError() << "tailor-overlap-collectives: no function @"
                         << optimizerFunction;
      return signalPassFailure();
    }
    hoistAccumulates(step);
    moveDdpReductionsInto(step, optimizer);
  }
  if (prefetch) {
    prefetchGathers(step);
    overlapActivationCopies(step);
  }
  SmallVector<Operation *> collectives;
  for (Operation &op : step.getBody().front()) {
    if (isGradientCollective(&op)) {
      collectives.push_back(&op);
    }
  }
  Builder builder(module.getContext());
  for (size_t i = 0; i < collectives.size(); ++i) {
    Operation *collective = collectives[i];
    if (!llvm::isa<tg::AllReduceStatesOp>(collective) &&
        !deferConsumers(collectives, i)) {
      collective->emitRemark()
          << "tailor-overlap-collectives: its consumers cannot move; it runs "
             "on the compute stream";
      continue;
    }
    collective->setAttr(tg::TGDialect::kOverlapAttrName,
                        builder.getUnitAttr());
  }
  // Last: a gradient a collective accumulates (ZeRO-2's chunks) is copied
  // to the host after its accumulation has been deferred past the next
  // collectives, so the copy does not pin the accumulation in place.
  if (moveDdpReductions) {
    moveOffloadCopiesInto(
        step, module.lookupSymbol<func::FuncOp>(optimizerFunction));
  }
}

} // namespace

} // namespace tailor::parallel
