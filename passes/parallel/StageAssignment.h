//===- StageAssignment.h - which pipeline stage runs each op -*- C++ -*-===//
//
// The analysis behind tailor-split-layers (SplitLayers.cpp): where the
// stage boundaries fall (consecutive layers, chosen so the busiest stage
// does the least work) and which stage runs each op of the unsplit
// train_step. It reads IR and never writes it. On a cluster of mixed
// devices each stage's work is weighted by its device's time per FLOP.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_PARALLEL_STAGEASSIGNMENT_H
#define TAILOR_PASSES_PARALLEL_STAGEASSIGNMENT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace tailor::parallel {

/// The layer an op records (`tg.layer`), if any.
std::optional<int64_t> layerOf(mlir::Operation *op);

/// Where each op of the unsplit train_step goes.
struct StageAssignment {
  /// Transformer layers, and the first layer of each stage.
  int64_t layers = 0;
  llvm::SmallVector<int64_t> firstLayers;
  /// -1: free (cloned where read): no layer, no effects, and nothing read
  /// but the step's inputs, constants and parameters.
  llvm::DenseMap<mlir::Operation *, int64_t> stage;
  /// Results that depend on the loss's gradient, and the ops that read
  /// them (backward ops, results or not: gradient accumulations).
  llvm::DenseSet<mlir::Value> backward;
  llvm::DenseSet<mlir::Operation *> backwardOps;
  /// Program position of each op, the order sends and receives follow.
  llvm::DenseMap<mlir::Operation *, int64_t> position;

  /// Boundaries and stages for `stages` stages of `train`; failure with an
  /// error on the op or module that prevents it. `stageWeights` (empty: all
  /// 1) scales each stage's work by its device's time per FLOP, so slower
  /// devices get fewer layers.
  static mlir::FailureOr<StageAssignment>
  build(mlir::func::FuncOp train, int64_t stages,
        llvm::ArrayRef<double> stageWeights = {});

  int64_t stageOf(mlir::Value value) const {
    mlir::Operation *def = value.getDefiningOp();
    if (!def) {
      return -1;
    }
    auto it = stage.find(def);
    return it == stage.end() ? -1 : it->second;
  }
  int64_t positionOf(mlir::Value value) const {
    mlir::Operation *def = value.getDefiningOp();
    return def ? position.lookup(def) : -1;
  }
  int64_t stageOfLayer(int64_t layer) const;

private:
  mlir::LogicalResult chooseBoundaries(mlir::func::FuncOp train,
                                       int64_t stages,
                                       llvm::ArrayRef<double> weights);
  mlir::LogicalResult assignStages(mlir::func::FuncOp train);
};

/// On a cluster of mixed devices (the module's tg.cluster), each stage's
/// time per FLOP relative to stage 0's: what a large GEMM takes on the rank
/// that runs the stage (stage s on rank s), by the cost model; empty
/// without a cluster; an error when its ranks are not one per stage.
mlir::FailureOr<llvm::SmallVector<double>>
stageWeightsOf(mlir::ModuleOp module, int64_t stages);

} // namespace tailor::parallel

#endif // TAILOR_PASSES_PARALLEL_STAGEASSIGNMENT_H
