//===- GradientBuckets.cpp - DDP's bucketed gradient all-reduce -----------===//

#include "passes/parallel/GradientBuckets.h"

#include "dialects/tg/TGShapes.h"

#include "mlir/IR/Builders.h"

namespace tailor::parallel {

using namespace mlir;

GradientBuckets bucketGradients(ModuleOp module, int64_t bucketBytes) {
  std::vector<tg::StateOp> grads;
  for (tg::StateOp state : module.getOps<tg::StateOp>()) {
    if (state.getKind() == tg::StateKind::Grad) {
      grads.push_back(state);
    }
  }
  GradientBuckets buckets;
  int64_t filled = 0;
  for (tg::StateOp state : llvm::reverse(grads)) {
    int64_t bytes = tg::byteSize(state.getTensorType());
    bool sameType =
        !buckets.empty() &&
        buckets.back().front().getTensorType().getElementType() ==
            state.getTensorType().getElementType();
    if (buckets.empty() || !sameType || filled + bytes > bucketBytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(state);
    filled += bytes;
  }
  return buckets;
}

void insertGradientAllReduces(func::FuncOp function,
                              const GradientBuckets &buckets,
                              tg::CommGroup group) {
  OpBuilder builder(function.getContext());
  builder.setInsertionPointToStart(&function.getBody().front());
  for (const std::vector<tg::StateOp> &bucket : buckets) {
    SmallVector<Attribute> names;
    for (tg::StateOp state : bucket) {
      names.push_back(FlatSymbolRefAttr::get(state.getSymNameAttr()));
    }
    tg::AllReduceStatesOp::create(builder, function.getLoc(),
                                  builder.getArrayAttr(names),
                                  tg::CommReduction::Avg, group);
  }
}

} // namespace tailor::parallel
