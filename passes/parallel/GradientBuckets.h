//===- GradientBuckets.h - DDP's bucketed gradient all-reduce -*- C++ -*-===//
//
// The DDP machinery tailor-shard (Shard.cpp) runs on a whole step and
// tailor-split-layers (SplitLayers.cpp) on each pipeline stage whose ranks
// hold several data-parallel replicas: gradient states grouped into buckets
// in the order backward finishes them, one `tg.all_reduce_states` (avg)
// each at the start of the optimizer step.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_PARALLEL_GRADIENTBUCKETS_H
#define TAILOR_PASSES_PARALLEL_GRADIENTBUCKETS_H

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <vector>

namespace tailor::parallel {

/// Gradient states grouped into the buckets one all-reduce each carries.
using GradientBuckets = std::vector<std::vector<tg::StateOp>>;

/// The module's gradient states in buckets: backward finishes the last
/// layers' gradients first, so buckets are filled from the last declared
/// gradient back; a bucket holds one element type and at most
/// `bucketBytes` (a larger gradient is a bucket alone). Empty when nothing
/// trains.
GradientBuckets bucketGradients(mlir::ModuleOp module, int64_t bucketBytes);

/// One `tg.all_reduce_states` (avg over `group`) per bucket at the start of
/// `function` (the optimizer step), in bucket order.
void insertGradientAllReduces(mlir::func::FuncOp function,
                              const GradientBuckets &buckets,
                              tg::CommGroup group);

} // namespace tailor::parallel

#endif // TAILOR_PASSES_PARALLEL_GRADIENTBUCKETS_H
