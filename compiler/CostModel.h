//===- CostModel.h - predicted step time from work and the target -*- C++ -*-===//
//
// Time is a roofline per launch: the larger of its FLOPs over the target's
// peak rate for the kernel's kind and precision, and its bytes over the
// memory bandwidth, each derated by that kind's efficiency (measured by
// `tailor calibrate`, defaults otherwise), plus a fixed launch cost. One
// stream runs its launches in order, so an entry's time is their sum. A
// training step runs train_step once per micro-batch (gradient accumulation
// steps times) and optimizer_step once.
//
// The inputs are plain records (kernel name, FLOPs, bytes), which a plan
// carries per launch (plan format 1.5) and the compiler has for every op, so
// `tailor compile`, `tailor inspect` and (later) `tailor explore` share it.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_COSTMODEL_H
#define TAILOR_COMPILER_COSTMODEL_H

#include "compiler/Hardware.h"

#include "llvm/ADT/StringRef.h"

#include <map>
#include <string>
#include <vector>

namespace tailor {

/// One launch's work, or a collective's: then `kernel` is its kind
/// (all_reduce, reduce_scatter, all_gather, broadcast), `bytes` the size
/// of the full buffer and `ranks` the group's size.
/// The link a collective's ring runs at: GB/s per direction and one hop's
/// latency in microseconds (gbs 0: the hardware's linkGBs and
/// linkLatencyUs).
struct LinkFigures {
  double gbs = 0;
  double latencyUs = 0;
};

struct LaunchWork {
  std::string kernel;
  double flops = 0;
  double bytes = 0;
  int64_t ranks = 0;
  /// A collective's link, when its group is known (collectiveLink).
  LinkFigures link = {};
  /// A launch on the plan's Host stream: a CPU kernel over host memory
  /// (on a GPU machine, at the host's bandwidth, filed under "host"; on
  /// a CPU target, like any launch).
  bool onHost = false;
};

/// The link a collective over `group` (its ranks, in ring order) runs at
/// on `h`: the slowest hop of its ring and the longest latency of them. A
/// hop between ranks of one node runs at linkGBs, one between nodes of a
/// cluster of several alike at interNodeGBs (rank r on node r / gpus; with
/// no interNodeGBs, at linkGBs too). On a mixed cluster (a cluster file) a
/// hop within a node runs at that node's devices' link (nodeLinkGBs), one
/// between nodes at the file's link between them. A group of one rank
/// crosses no link ({0, 0}). A spec of one rank's device knows no
/// topology: linkGBs.
LinkFigures collectiveLink(const HardwareSpec &h,
                           llvm::ArrayRef<int32_t> group);

/// Bytes one rank sends in a ring collective of `kind` over `ranks` ranks
/// on a buffer of `bytes` (../shared/FORMATS.md): all-reduce 2(p-1)/p n,
/// reduce-scatter and all-gather (p-1)/p n, broadcast n.
double ringBytesSent(llvm::StringRef kind, double bytes, int64_t ranks);

/// How a target runs: the hardware, the plan's precision ("fp32" or
/// "bf16") and, on the CPU, its worker threads.
struct CostTarget {
  HardwareSpec hardware;
  std::string precision = "fp32";
  int64_t threads = 1;
  /// train_step runs per step on this rank when not the plan's
  /// gradient_accumulation_steps (a mixed cluster's rank: its own count);
  /// 0: the plan's.
  int64_t microBatches = 0;
};

/// The kind the cost model files `kernel` under (one of costKernelKinds()).
llvm::StringRef costKindOf(llvm::StringRef kernel);

/// The efficiency of `kind` on `hardware`: calibrated, or the default.
double efficiencyOf(const HardwareSpec &hardware, llvm::StringRef kind);

/// How much faster `threads` CPU threads run a GEMM of `flops` FLOPs than
/// one: 1 + (threads - 1) * cpu_parallel_efficiency * F / (F + half),
/// half = cpu_parallel_half_mflop (HardwareSpec). Pure, allocates nothing.
double cpuThreadSpeedup(const HardwareSpec &hardware, int64_t threads,
                        double flops);

/// Whether launches of cost kind `kind` run on a CPU session's thread
/// pool (every kind but gemm, compression, comm and host_copy).
bool isCpuPoolKind(llvm::StringRef kind);

/// How much faster `threads` CPU threads run a thread-pool kernel the
/// model gives `oneThreadSeconds` on one thread: 1 + (threads - 1) *
/// cpu_pool_parallel_efficiency * t / (t + cpu_pool_half_us), t in
/// microseconds. `hardware` must give cpu_pool_parallel_efficiency.
double cpuPoolSpeedup(const HardwareSpec &hardware, int64_t threads,
                      double oneThreadSeconds);

/// The work of one launch of a gradient compressor's CPU kernel
/// (topk_compress, sparse_average, sign_compress, sign_average: kind
/// "compression") on a bucket of `elements` f32 gradients in `members`
/// tensors, `kept` of them sent (top-k's k; sparse_average: the gathered
/// pairs), `ranks` ranks' parts averaged (sign_average), with or without
/// residuals: its bytes, and as `flops` the scalar operations its serial
/// loops execute (CompressionKernels.cpp): top-k scans every element and
/// keeps a heap of k, sign-SGD packs and unpacks a bit per element.
LaunchWork compressionWork(llvm::StringRef kernel, double elements,
                           double kept, int64_t members, int64_t ranks,
                           bool residual);

/// Predicted seconds of one launch.
double predictLaunchSeconds(const CostTarget &target, const LaunchWork &work);

/// Predicted time of a sequence of launches, with the part of each kind.
struct TimeEstimate {
  double seconds = 0;
  std::map<std::string, double> secondsByKind;
  void add(const TimeEstimate &other, double times = 1);
};
TimeEstimate predictLaunches(const CostTarget &target,
                             const std::vector<LaunchWork> &launches);

/// Why `target` cannot be predicted (a rate the hardware does not give),
/// or "" when it can.
std::string unpredictableBecause(const CostTarget &target);

} // namespace tailor

#endif // TAILOR_COMPILER_COSTMODEL_H
