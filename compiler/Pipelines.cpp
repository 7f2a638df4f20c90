//===- Pipelines.cpp - tailor's pass pipelines ----------------------------===//

#include "compiler/Pipelines.h"

#include "passes/graph/Passes.h"
#include "passes/memory/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace tailor {

void buildGraphPipeline(mlir::OpPassManager &pm) {
  mlir::OpPassManager &fn = pm.nest<mlir::func::FuncOp>();
  // --- Clean the literal import: fold reshape chains and no-op casts, merge
  // duplicate constants, so the patterns below see one canonical form.
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(mlir::createCSEPass());
  // --- Raise, innermost patterns first: activations and norms do not depend
  // on anything; linear layers before rope and attention, whose patterns
  // start from projections; embeddings last, to pair them with a tied
  // lm_head.
  fn.addPass(graph::createRaiseActivationsPass());
  fn.addPass(graph::createRaiseNormsPass());
  fn.addPass(graph::createRaiseLinearPass());
  fn.addPass(graph::createRaiseRopePass());
  fn.addPass(graph::createRaiseAttentionPass());
  fn.addPass(graph::createRaiseEmbeddingPass());
  // --- Drop what the raising left unused (mask constants, rotate-half
  // slices).
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(mlir::createCSEPass());
}

void buildSchedulePipeline(mlir::OpPassManager &pm,
                           const ScheduleOptions &options) {
  buildGraphPipeline(pm);
  // --- Plan one rank: kernel selection, liveness, arena offsets.
  memory::LowerToSchedPassOptions lower;
  lower.threads = options.threads;
  pm.addPass(memory::createLowerToSchedPass(lower));
}

void registerTailorPipelines() {
  mlir::PassPipelineRegistration<>(
      "tailor-graph-pipeline",
      "raise an imported ONNX graph to transformer-level tg ops",
      buildGraphPipeline);
  mlir::PassPipelineRegistration<>(
      "tailor-schedule-pipeline",
      "raise, then plan one rank into a sched.program",
      [](mlir::OpPassManager &pm) {
        buildSchedulePipeline(pm, ScheduleOptions());
      });
}

} // namespace tailor
