//===- SchedPlannerCompression.cpp - gradient compression's state ops -----===//
//
// tailor-compress-gradients' ops (PowerSGD) as launches on whole states:
// each is one CPU kernel of runtime/cpu/CompressionKernels.cpp, with its
// work counted here from the states' shapes (the ops have no values for
// OpCost to read).
//
//===----------------------------------------------------------------------===//

#include "passes/memory/SchedPlanner.h"

#include "dialects/tg/TGShapes.h"

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

/// Bytes of a whole f32 state `access`.
static double stateBytes(const Access &access) {
  return double(storageBytes(access.type));
}

/// Rows and columns of a state read as a matrix ([shape[0], rest]).
static std::pair<double, double> matrixOf(const Access &access) {
  MemRefType type = access.type;
  double rows = type.getRank() == 0 ? 1 : double(type.getDimSize(0));
  double cols = rows == 0 ? 0 : double(type.getNumElements()) / rows;
  return {rows, cols};
}

LogicalResult SchedPlanner::planCompressionOp(ModuleOp module, Operation &op,
                                              PlannedEntry &entry) {
  if (backend == "cuda") {
    return op.emitError() << "gradient compression has no CUDA kernels yet: "
                             "it runs on CPU ranks (hardware cpu)";
  }
  MLIRContext *context = module.getContext();
  auto state = [&](FlatSymbolRefAttr name) -> FailureOr<Access> {
    FailureOr<unsigned> root = stateRoot(module, &op, name);
    if (failed(root)) {
      return failure();
    }
    return whole(*root);
  };
  PlannedLaunch launch;
  if (auto add = llvm::dyn_cast<tg::AddErrorFeedbackOp>(op)) {
    FailureOr<Access> error = state(add.getErrorAttr());
    FailureOr<Access> grad = state(add.getGradAttr());
    if (failed(error) || failed(grad)) {
      return failure();
    }
    launch = launchOf(&op, "error_feedback_add", 2, {*error, *grad});
    launch.bytes = 4 * stateBytes(*grad);
  } else if (auto store = llvm::dyn_cast<tg::StoreErrorFeedbackOp>(op)) {
    FailureOr<Access> grad = state(store.getGradAttr());
    FailureOr<Access> error = state(store.getErrorAttr());
    if (failed(error) || failed(grad)) {
      return failure();
    }
    launch = launchOf(&op, "error_feedback_store", 2, {*grad, *error});
    launch.bytes = 3 * stateBytes(*grad);
  } else if (auto init = llvm::dyn_cast<tg::LowRankInitOp>(op)) {
    FailureOr<Access> factor = state(init.getFactorAttr());
    if (failed(factor)) {
      return failure();
    }
    launch = launchOf(&op, "lowrank_init", 1, {*factor});
    launch.bytes = stateBytes(*factor);
  } else if (auto orth = llvm::dyn_cast<tg::OrthogonalizeOp>(op)) {
    FailureOr<Access> factor = state(orth.getFactorAttr());
    if (failed(factor)) {
      return failure();
    }
    launch = launchOf(&op, "orthogonalize", 1, {*factor});
    launch.choice.attributes.set("epsilon",
                                 f64AttrOf(context, orth.getEpsilon()));
    auto [rows, cols] = matrixOf(*factor);
    launch.flops = 4 * rows * cols * cols;
    launch.bytes = 2 * cols * stateBytes(*factor);
  } else {
    auto product = llvm::cast<tg::LowRankMatmulOp>(op);
    FailureOr<Access> a = state(product.getAAttr());
    FailureOr<Access> b = state(product.getBAttr());
    FailureOr<Access> c = state(product.getCAttr());
    if (failed(a) || failed(b) || failed(c)) {
      return failure();
    }
    launch = launchOf(&op, "lowrank_matmul", 3, {*a, *b, *c});
    launch.choice.attributes.set(
        "transpose_a", i64AttrOf(context, product.getTransposeA() ? 1 : 0));
    launch.choice.attributes.set(
        "transpose_b", i64AttrOf(context, product.getTransposeB() ? 1 : 0));
    auto [rows, cols] = matrixOf(*c);
    auto [ar, ac] = matrixOf(*a);
    double inner = product.getTransposeA() ? ar : ac;
    launch.flops = 2 * rows * cols * inner;
    launch.bytes = stateBytes(*a) + stateBytes(*b) + stateBytes(*c);
  }
  entry.launches.push_back(std::move(launch));
  return success();
}
