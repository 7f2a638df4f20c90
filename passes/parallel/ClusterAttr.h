//===- ClusterAttr.h - a cluster's ranks as a module attribute --*- C++ -*-===//
//
// The target is data: a heterogeneous cluster's per-rank devices live on
// the module as `tg.cluster = {name, ranks = [{device, node, <figures>}]}`,
// each rank's figures under a hardware file's keys (bf16_tflops,
// cpu_gflops_per_thread, bandwidth_gbs, threads, speed, ...; absent keys
// keep HardwareSpec's defaults), so passes and tailor-opt read the target
// from the IR, never from a global.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_PARALLEL_CLUSTERATTR_H
#define TAILOR_PASSES_PARALLEL_CLUSTERATTR_H

#include "compiler/Hardware.h"
#include "dialects/tg/TGOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <vector>

namespace tailor::parallel {

/// The module attribute that carries a cluster's ranks, and
/// tailor-balance-ranks' decision.
constexpr llvm::StringLiteral kClusterAttrName =
    tg::TGDialect::kClusterAttrName;
constexpr llvm::StringLiteral kBalanceAttrName =
    tg::TGDialect::kBalanceAttrName;

/// Records each rank's device of `hardware` (heterogeneous) on `module`.
void attachCluster(mlir::ModuleOp module, const HardwareSpec &hardware);

/// One rank's device as a dictionary of its name, node and figures.
mlir::DictionaryAttr rankDeviceAttr(mlir::Builder &builder,
                                    const HardwareSpec &device);

/// The devices of `module`'s tg.cluster, in rank order; an error on the
/// module when it has none or one is malformed.
mlir::FailureOr<std::vector<HardwareSpec>> clusterRanks(mlir::ModuleOp module);

} // namespace tailor::parallel

#endif // TAILOR_PASSES_PARALLEL_CLUSTERATTR_H
