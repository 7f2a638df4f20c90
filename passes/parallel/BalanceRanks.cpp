//===- BalanceRanks.cpp - tailor-balance-ranks: work by predicted speed ---===//
//
// A mixed cluster's ranks run the same program at different speeds; an even
// split of the global batch leaves the fast ranks waiting at the all-reduce
// for the slowest. This pass predicts one micro-batch's time on each rank's
// device and gives each rank its own count of micro-batches per step.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/ClusterAttr.h"
#include "passes/parallel/Passes.h"

#include "compiler/CostModel.h"
#include "passes/memory/OpCost.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <queue>

namespace tailor::parallel {

#define GEN_PASS_DEF_BALANCERANKSPASS
#include "passes/parallel/Passes.h.inc"

namespace {

using namespace mlir;

class BalanceRanksPass : public impl::BalanceRanksPassBase<BalanceRanksPass> {
public:
  using BalanceRanksPassBase::BalanceRanksPassBase;

  void runOnOperation() override;

private:
  LogicalResult checkStrategy(ModuleOp module, size_t ranks);
  FailureOr<std::vector<double>>
  microBatchSeconds(ModuleOp module, const std::vector<HardwareSpec> &ranks);
};

/// The work of one run of `function`: every op that does some, under its
/// kernel's name (the op's, without `tg.`), as the cost model files it.
std::vector<LaunchWork> workOf(func::FuncOp function) {
  std::vector<LaunchWork> work;
  function.walk([&](Operation *op) {
    memory::OpCost cost = memory::costOf(op);
    if (cost.flops <= 0 && cost.bytes <= 0) {
      return;
    }
    LaunchWork launch;
    StringRef name = op->getName().getStringRef();
    name.consume_front("tg.");
    launch.kernel = name.str();
    launch.flops = cost.flops;
    launch.bytes = cost.bytes;
    work.push_back(std::move(launch));
  });
  return work;
}

/// Hands out `total` micro-batches, one at a time, to the rank whose share
/// would end soonest with one more (ties: the lower rank), after one each:
/// the counts that minimize the largest count x seconds.
std::vector<int64_t> balance(const std::vector<double> &seconds,
                             int64_t total) {
  std::vector<int64_t> counts(seconds.size(), 1);
  using Next = std::pair<double, size_t>; // (finish with one more, rank)
  std::priority_queue<Next, std::vector<Next>, std::greater<Next>> queue;
  for (size_t rank = 0; rank < seconds.size(); ++rank) {
    queue.push({2 * seconds[rank], rank});
  }
  for (int64_t given = static_cast<int64_t>(seconds.size()); given < total;
       ++given) {
    size_t rank = queue.top().second;
    queue.pop();
    ++counts[rank];
    queue.push({double(counts[rank] + 1) * seconds[rank], rank});
  }
  return counts;
}

} // namespace

LogicalResult BalanceRanksPass::checkStrategy(ModuleOp module, size_t ranks) {
  auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel");
  if (!parallel) {
    return module.emitError()
           << "tailor-balance-ranks: no tg.parallel on the module "
              "(tailor-shard decides data parallelism first)";
  }
  auto world = parallel.getAs<IntegerAttr>("world_size");
  auto strategy = parallel.getAs<StringAttr>("strategy");
  if (!world || world.getInt() != static_cast<int64_t>(ranks)) {
    return module.emitError()
           << "tailor-balance-ranks: tg.parallel's world_size "
           << (world ? world.getInt() : 0) << " is not the " << ranks
           << " ranks of tg.cluster";
  }
  StringRef name = strategy ? strategy.getValue() : "";
  if (name != "ddp" && name != "zero1") {
    return module.emitError()
           << "tailor-balance-ranks: a heterogeneous cluster's ranks run "
              "uneven micro-batch counts, which '"
           << name
           << "' cannot (its collectives run in every micro-batch); use "
              "ddp or zero1 (zero_stage: 0 or 1) on a cluster of mixed "
              "devices";
  }
  if (accumulationSteps < 1) {
    return module.emitError() << "tailor-balance-ranks: accumulation-steps "
                                 "must be at least 1, got "
                              << accumulationSteps;
  }
  return success();
}

FailureOr<std::vector<double>>
BalanceRanksPass::microBatchSeconds(ModuleOp module,
                                    const std::vector<HardwareSpec> &ranks) {
  auto step = module.lookupSymbol<func::FuncOp>(function);
  if (!step) {
    return module.emitError() << "tailor-balance-ranks: no function @"
                              << function << " to time";
  }
  std::vector<LaunchWork> work = workOf(step);
  std::vector<double> seconds;
  for (auto [rank, device] : llvm::enumerate(ranks)) {
    CostTarget target;
    target.hardware = device;
    target.precision = precision;
    target.threads = device.threads > 0 ? device.threads : threads;
    if (std::string why = unpredictableBecause(target); !why.empty()) {
      return module.emitError() << "tailor-balance-ranks: rank " << rank
                                << " (" << device.name
                                << ") cannot be timed: " << why;
    }
    seconds.push_back(predictLaunches(target, work).seconds);
    if (!(seconds.back() > 0)) {
      return step.emitError() << "tailor-balance-ranks: @" << function
                              << " does no work to divide";
    }
  }
  return seconds;
}

void BalanceRanksPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<std::vector<HardwareSpec>> ranks = clusterRanks(module);
  if (failed(ranks) || failed(checkStrategy(module, ranks->size()))) {
    return signalPassFailure();
  }
  FailureOr<std::vector<double>> seconds = microBatchSeconds(module, *ranks);
  if (failed(seconds)) {
    return signalPassFailure();
  }
  int64_t total = accumulationSteps * static_cast<int64_t>(ranks->size());
  std::vector<int64_t> counts = balance(*seconds, total);
  Builder builder(module.getContext());
  SmallVector<Attribute> times;
  for (double s : *seconds) {
    times.push_back(builder.getF64FloatAttr(s));
  }
  module->setAttr(
      kBalanceAttrName,
      builder.getDictionaryAttr(
          {builder.getNamedAttr("global_micro_batches",
                                builder.getI64IntegerAttr(total)),
           builder.getNamedAttr("micro_batches",
                                builder.getDenseI64ArrayAttr(counts)),
           builder.getNamedAttr("micro_batch_seconds",
                                builder.getArrayAttr(times))}));
}

} // namespace tailor::parallel
