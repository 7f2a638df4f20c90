//===- SchedPlannerCompression.cpp - gradient compression's state ops -----===//
//
// tailor-compress-gradients' ops (PowerSGD) as launches on whole states:
// each is one CPU kernel of runtime/cpu/CompressionKernels.cpp, with its
// work counted here from the states' shapes (the ops have no values for
// OpCost to read). Top-k's and sign-SGD's ops read a bucket's states and
// make (or read) activations: the compressed bucket, and every rank's
// copy of it after the all-gather (a tg.all_gather, planned as the
// communicator's out-of-place all-gather).
//
//===----------------------------------------------------------------------===//

#include "passes/memory/SchedPlanner.h"

#include "compiler/CostModel.h"
#include "dialects/tg/TGShapes.h"

#include <algorithm>
#include <cmath>

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

bool tailor::memory::isCompressionOp(Operation *op) {
  return llvm::isa<tg::AddErrorFeedbackOp, tg::StoreErrorFeedbackOp,
                   tg::LowRankInitOp, tg::OrthogonalizeOp, tg::LowRankMatmulOp,
                   tg::AllGatherOp, tg::TopKCompressOp, tg::SparseAverageOp,
                   tg::SignCompressOp, tg::SignAverageOp>(op);
}

LogicalResult SchedPlanner::appendStates(ModuleOp module, Operation *op,
                                         ArrayAttr names,
                                         SmallVectorImpl<Access> &operands) {
  if (!names) {
    return success();
  }
  for (Attribute name : names) {
    FailureOr<unsigned> root =
        stateRoot(module, op, llvm::cast<FlatSymbolRefAttr>(name));
    if (failed(root)) {
      return failure();
    }
    operands.push_back(whole(*root));
  }
  return success();
}

Access SchedPlanner::newResult(Value result, int64_t step) {
  Root root = makeRoot(Home::Activation, memrefFor(result.getType()));
  root.first = root.last = step;
  rootOf[result] = newRoot(std::move(root));
  return accessOf(result);
}

/// Elements of the states `operands` [first, first + count).
static double elementsOf(ArrayRef<Access> operands, size_t first,
                         size_t count) {
  double n = 0;
  for (size_t i = first; i < first + count; ++i) {
    n += double(operands[i].type.getNumElements());
  }
  return n;
}

LogicalResult SchedPlanner::planBucketCompressionOp(ModuleOp module,
                                                    Operation &op,
                                                    PlannedEntry &entry,
                                                    int64_t step) {
  MLIRContext *context = module.getContext();
  if (auto gather = llvm::dyn_cast<tg::AllGatherOp>(op)) {
    PlannedCollective collective;
    collective.kind = sched::CollectiveKind::AllGather;
    collective.group = gather.getGroup();
    return planValueCollective(op, gather.getInput(), gather.getResult(),
                               collective, entry, step);
  }
  SmallVector<Access> operands;
  PlannedLaunch launch;
  if (llvm::isa<tg::TopKCompressOp, tg::SignCompressOp>(op)) {
    // grads, [residuals], then the two results; the work is the cost
    // model's account of the kernel's loops (compressionWork).
    bool topk = llvm::isa<tg::TopKCompressOp>(op);
    auto grads = op.getAttrOfType<ArrayAttr>("grads");
    auto residuals = op.getAttrOfType<ArrayAttr>("residuals");
    if (failed(appendStates(module, &op, grads, operands)) ||
        failed(appendStates(module, &op, residuals, operands))) {
      return failure();
    }
    operands.push_back(newResult(op.getResult(0), step));
    operands.push_back(newResult(op.getResult(1), step));
    launch = launchOf(&op, topk ? "topk_compress" : "sign_compress", -1,
                      operands);
    launch.choice.attributes.set("members", i64AttrOf(context, grads.size()));
    double n = elementsOf(operands, 0, grads.size());
    double k = double(operands[operands.size() - 2].type.getNumElements());
    LaunchWork work = compressionWork(launch.choice.kernel, n, k,
                                      int64_t(grads.size()), 1,
                                      residuals != nullptr);
    launch.flops = work.flops;
    launch.bytes = work.bytes;
  } else {
    // The gathered pair, then the grads: every gradient written once,
    // plus one scattered add per pair (top-k) or a pass over every rank's
    // signs (sign-SGD); the work is compressionWork's.
    bool topk = llvm::isa<tg::SparseAverageOp>(op);
    for (Value input : op.getOperands()) {
      if (failed(useAt(input, step))) {
        return op.emitError() << "operand defined outside the planned "
                                 "function";
      }
      operands.push_back(accessOf(input));
    }
    if (failed(appendStates(module, &op, op.getAttrOfType<ArrayAttr>("grads"),
                            operands))) {
      return failure();
    }
    launch = launchOf(&op, topk ? "sparse_average" : "sign_average", -1,
                      operands);
    double n = elementsOf(operands, 2, operands.size() - 2);
    double pairs = double(operands[0].type.getNumElements());
    double ranks = double(operands[1].type.getNumElements()) /
                   double(operands.size() - 2);
    if (auto average = llvm::dyn_cast<tg::SparseAverageOp>(op)) {
      launch.choice.attributes.set("scale",
                                   f64AttrOf(context, average.getScale()));
    }
    auto members = int64_t(operands.size() - 2);
    LaunchWork work =
        compressionWork(launch.choice.kernel, n, pairs, members,
                        int64_t(std::lround(ranks)), false);
    launch.flops = work.flops;
    launch.bytes = work.bytes;
  }
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult SchedPlanner::planCompressionOp(ModuleOp module, Operation &op,
                                              PlannedEntry &entry,
                                              int64_t step) {
  // PowerSGD's, ACP-SGD's and sign-SGD's kernels have CUDA versions
  // (runtime/cuda/CompressionLaunchers.cpp); top-k's selection does not
  // yet.
  if (backend == "cuda" &&
      llvm::isa<tg::TopKCompressOp, tg::SparseAverageOp>(op)) {
    return op.emitError() << "gradient_compression: topk has no CUDA "
                             "kernels yet: it runs on CPU ranks (hardware "
                             "cpu); powersgd, acp-sgd and signsgd compile for "
                             "GPUs";
  }
  if (llvm::isa<tg::AllGatherOp, tg::TopKCompressOp, tg::SparseAverageOp,
                tg::SignCompressOp, tg::SignAverageOp>(op)) {
    return planBucketCompressionOp(module, op, entry, step);
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
