//===- Registration.cpp - what tailor's tools know ------------------------===//

#include "compiler/Registration.h"
#include "compiler/Pipelines.h"

#include "dialects/sched/SchedOps.h"
#include "dialects/tg/TGOps.h"
#include "passes/generate/Passes.h"
#include "passes/graph/Passes.h"
#include "passes/memory/Passes.h"
#include "passes/parallel/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/Passes.h"

namespace tailor {

void registerTailorDialects(mlir::DialectRegistry &registry) {
  registry.insert<tg::TGDialect, sched::SchedDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect,
                  mlir::memref::MemRefDialect>();
}

void registerTailorPasses() {
  mlir::registerTransformsPasses();
  graph::registerGraphPasses();
  generate::registerGeneratePasses();
  memory::registerMemoryPasses();
  parallel::registerParallelPasses();
  registerTailorPipelines();
}

} // namespace tailor
