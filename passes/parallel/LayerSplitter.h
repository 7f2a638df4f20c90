//===- LayerSplitter.h - tailor-split-layers' rewrite, shared -*- C++ -*-===//
//
// The class behind tailor-split-layers (SplitLayers.cpp explains the
// split): SplitLayers.cpp builds the stage modules, their optimizer steps
// and the pass; SplitLayersEntry.cpp builds each stage's entries
// (`train_step`, `pipeline_forward`) with their sends and receives.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_PARALLEL_LAYERSPLITTER_H
#define TAILOR_PASSES_PARALLEL_LAYERSPLITTER_H

#include "passes/parallel/StageAssignment.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <string>

namespace tailor::parallel::split {

using namespace mlir;

constexpr StringLiteral kTrain = "train_step";
constexpr StringLiteral kOptimizer = "optimizer_step";
constexpr StringLiteral kForward = "pipeline_forward";

class LayerSplitter {
public:
  /// `replicas` data-parallel replicas of every stage (stage-major ranks:
  /// stage s runs on ranks s * replicas .. s * replicas + replicas - 1),
  /// each stage's gradients averaged over its replicas in buckets of at
  /// most `bucketBytes`.
  LayerSplitter(ModuleOp module, int64_t stages, int64_t replicas,
                int64_t microBatches, StringRef schedule, int64_t bucketBytes)
      : module(module), builder(module.getContext()), stages(stages),
        replicas(replicas), microBatches(microBatches),
        schedule(schedule.str()), bucketBytes(bucketBytes) {}

  LogicalResult run();

private:
  LogicalResult checkInput();
  int64_t slotsOf(int64_t stage) const;

  LogicalResult buildStage(int64_t stage);
  void copyDeclarations(ModuleOp into);
  FailureOr<func::FuncOp> buildStepFunction(ModuleOp into, int64_t stage,
                                            bool forwardOnly);
  LogicalResult buildOptimizer(ModuleOp into, int64_t stage);
  void averageOverReplicas(ModuleOp into);
  void recordStage(ModuleOp into, int64_t stage, int64_t slots);
  void eraseUnusedDeclarations(ModuleOp into);
  LogicalResult checkTiedTrainables();

  /// Values of `stage`'s ops (forward ones only with `forwardOnly`) that
  /// other stages' ops read: incoming (defined elsewhere, read here) and
  /// outgoing (defined here, read elsewhere), each with its peer stage.
  void crossings(int64_t stage, bool forwardOnly,
                 SmallVector<std::pair<Value, int64_t>> &incoming,
                 SmallVector<std::pair<Value, int64_t>> &outgoing);
  bool inEntry(Operation *op, int64_t stage, bool forwardOnly) const;

  ModuleOp module;
  OpBuilder builder;
  int64_t stages;
  int64_t replicas;
  int64_t microBatches;
  std::string schedule;
  int64_t bucketBytes;
  func::FuncOp train, optimizer;
  StageAssignment map;
  /// The stage modules, and per trainable parameter the stages that read it.
  SmallVector<ModuleOp> stageModules;
  llvm::MapVector<StringAttr, llvm::SetVector<int64_t>> trainableReaders;
};

} // namespace tailor::parallel::split

#endif // TAILOR_PASSES_PARALLEL_LAYERSPLITTER_H
