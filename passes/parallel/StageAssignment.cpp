//===- StageAssignment.cpp - which pipeline stage runs each op ------------===//
//
// See StageAssignment.h. Boundaries: an exact search over every split of
// the layers into consecutive runs, minimizing the busiest stage's FLOPs
// (OpCost.h). Ops: an op runs on its layer's stage; one without a layer on
// the latest stage among its operands'; a gradient op that reads nothing
// but a later stage's values runs there (so one tensor crosses).
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/StageAssignment.h"

#include "dialects/tg/TGOps.h"
#include "compiler/CostModel.h"
#include "passes/memory/OpCost.h"
#include "passes/parallel/ClusterAttr.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <algorithm>
#include <vector>

namespace tailor::parallel {

using namespace mlir;

std::optional<int64_t> layerOf(Operation *op) {
  if (auto layer =
          op->getAttrOfType<IntegerAttr>(tg::TGDialect::kLayerAttrName)) {
    return layer.getInt();
  }
  return std::nullopt;
}

namespace {

/// Per layer, the FLOPs of its forward and backward ops (OpCost.h), and
/// those of the ops after the last layer (final norm, head, loss, and
/// their gradients), which the last stage runs.
struct LayerCosts {
  std::vector<double> forward, backward;
  double head = 0;
};

LayerCosts layerCosts(func::FuncOp train, int64_t layers) {
  LayerCosts costs;
  costs.forward.assign(static_cast<size_t>(layers), 0.0);
  costs.backward.assign(static_cast<size_t>(layers), 0.0);
  DenseSet<Value> backward;
  bool pastLayers = false;
  for (Operation &op : train.getBody().front().without_terminator()) {
    bool isBackward = llvm::isa<tg::CrossEntropyGradOp>(op) ||
                      llvm::any_of(op.getOperands(), [&](Value v) {
                        return backward.contains(v);
                      });
    if (isBackward) {
      backward.insert(op.getResults().begin(), op.getResults().end());
    }
    double flops = memory::costOf(&op).flops;
    std::optional<int64_t> layer = layerOf(&op);
    if (layer && *layer >= 0 && *layer < layers) {
      pastLayers = *layer == layers - 1;
      (isBackward ? costs.backward : costs.forward)[*layer] += flops;
    } else if (pastLayers || isBackward) {
      costs.head += layer ? 0 : flops;
    }
  }
  return costs;
}

} // namespace

LogicalResult StageAssignment::chooseBoundaries(func::FuncOp train,
                                                 int64_t stages,
                                                 ArrayRef<double> weights) {
  int64_t maxLayer = -1;
  train.walk([&](Operation *op) {
    if (std::optional<int64_t> layer = layerOf(op)) {
      maxLayer = std::max(maxLayer, *layer);
    }
  });
  layers = maxLayer + 1;
  if (layers < stages) {
    return train->getParentOp()->emitError() << "tailor-split-layers: " << stages
                              << " stages need at least as many transformer "
                                 "layers; the model has "
                              << layers;
  }
  // Consecutive layers per stage so the busiest stage does the least work:
  // a stage's work is its layers' forward and backward, its forward once
  // more on every stage but the last (the replay), and the head on the
  // last. Exact over every split (layers x stages is small). On devices
  // of different speeds a stage's work counts in its device's time (its
  // weight: seconds per FLOP relative to stage 0's).
  LayerCosts costs = layerCosts(train, layers);
  auto cost = [&](int64_t stage, int64_t first, int64_t end) {
    double work = stage == stages - 1 ? costs.head : 0;
    for (int64_t l = first; l < end; ++l) {
      work += costs.forward[l] * (stage == stages - 1 ? 1 : 2) +
              costs.backward[l];
    }
    return weights.empty() ? work : work * weights[static_cast<size_t>(stage)];
  };
  // best[s][e]: the least busiest-stage work placing layers [0, e) on
  // stages [0, s]; from[s][e]: where stage s then starts.
  size_t rows = static_cast<size_t>(stages), cols = layers + 1;
  std::vector<std::vector<double>> best(rows, std::vector<double>(cols, 1e300));
  std::vector<std::vector<int64_t>> from(rows, std::vector<int64_t>(cols, 0));
  for (int64_t e = 1; e <= layers; ++e) {
    best[0][e] = cost(0, 0, e);
  }
  for (int64_t s = 1; s < stages; ++s) {
    for (int64_t e = s + 1; e <= layers; ++e) {
      for (int64_t first = s; first < e; ++first) {
        double busiest = std::max(best[s - 1][first], cost(s, first, e));
        if (busiest < best[s][e]) {
          best[s][e] = busiest;
          from[s][e] = first;
        }
      }
    }
  }
  firstLayers.assign(rows, 0);
  for (int64_t s = stages - 1, end = layers; s > 0; --s) {
    firstLayers[s] = from[s][end];
    end = firstLayers[s];
  }
  return success();
}

int64_t StageAssignment::stageOfLayer(int64_t layer) const {
  int64_t stage = 0;
  for (size_t s = 0; s < firstLayers.size(); ++s) {
    if (layer >= firstLayers[s]) {
      stage = static_cast<int64_t>(s);
    }
  }
  return stage;
}

LogicalResult StageAssignment::assignStages(func::FuncOp train) {
  int64_t next = 0;
  for (Operation &op : train.getBody().front().without_terminator()) {
    position[&op] = next++;
    bool isBackward = llvm::isa<tg::CrossEntropyGradOp>(op);
    bool free = !layerOf(&op) && (isMemoryEffectFree(&op) ||
                                  llvm::isa<tg::ParamRefOp>(op));
    int64_t latest = -1, earliest = INT64_MAX;
    for (Value operand : op.getOperands()) {
      isBackward |= backward.contains(operand);
      int64_t from = stageOf(operand);
      free &= from < 0;
      latest = std::max(latest, from);
      earliest = std::min(earliest, from);
    }
    if (isBackward) {
      backwardOps.insert(&op);
      for (Value result : op.getResults()) {
        backward.insert(result);
      }
    }
    if (free && !isBackward) {
      stage[&op] = -1;
      continue;
    }
    int64_t placed = latest;
    if (std::optional<int64_t> layer = layerOf(&op)) {
      int64_t own = stageOfLayer(*layer);
      if (!isBackward && latest > own) {
        return op.emitError() << "tailor-split-layers: layer " << *layer
                              << " reads a value of stage " << latest
                              << ", after its own stage " << own;
      }
      // A gradient op that reads nothing but a later stage's values (the
      // sum of a layer output's gradients from both of the next layer's
      // branches) runs there: one tensor crosses instead of several. Not
      // one that also reads a weight or constant, which would move this
      // layer's work (and weights) to that stage.
      bool laterOnly = isBackward && earliest == latest && latest > own &&
                       isMemoryEffectFree(&op);
      placed = laterOnly ? latest : own;
    }
    stage[&op] = std::max<int64_t>(placed, 0);
  }
  return success();
}

FailureOr<StageAssignment>
StageAssignment::build(func::FuncOp train, int64_t stages,
                       llvm::ArrayRef<double> stageWeights) {
  StageAssignment assignment;
  if (failed(assignment.chooseBoundaries(train, stages, stageWeights)) ||
      failed(assignment.assignStages(train))) {
    return failure();
  }
  return assignment;
}

FailureOr<SmallVector<double>> stageWeightsOf(ModuleOp module,
                                              int64_t stages) {
  if (!module->hasAttr(kClusterAttrName)) {
    return SmallVector<double>();
  }
  FailureOr<std::vector<HardwareSpec>> ranks = clusterRanks(module);
  if (failed(ranks)) {
    return failure();
  }
  if (static_cast<int64_t>(ranks->size()) != stages) {
    return module.emitError()
           << "tailor-split-layers: tg.cluster has " << ranks->size()
           << " ranks for " << stages
           << " stages (a layer split over mixed devices runs one stage "
              "per rank)";
  }
  SmallVector<double> weights;
  LaunchWork gemm{"linear", 1e12, 0};
  for (const HardwareSpec &device : *ranks) {
    CostTarget target{device, device.isCuda() ? "bf16" : "fp32",
                      std::max<int64_t>(1, device.threads)};
    if (std::string why = unpredictableBecause(target); !why.empty()) {
      return module.emitError() << "tailor-split-layers: a stage's device ("
                                << device.name << ") cannot be timed: "
                                << why;
    }
    weights.push_back(predictLaunchSeconds(target, gemm));
  }
  double first = weights.front();
  for (double &w : weights) {
    w /= first;
  }
  return weights;
}

} // namespace tailor::parallel
