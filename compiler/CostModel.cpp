//===- CostModel.cpp - predicted step time from work and the target -------===//

#include "compiler/CostModel.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cmath>

namespace tailor {

/// What one thread's scalar, branchy loops reach of its GEMM rate (the
/// FMA units' SIMD lanes): compression's default efficiency.
constexpr double kCompressionEfficiency = 0.02;

double ringBytesSent(llvm::StringRef kind, double bytes, int64_t ranks) {
  if (ranks <= 1) {
    return 0;
  }
  double p = double(ranks);
  if (kind == "all_reduce") {
    return 2 * (p - 1) / p * bytes;
  }
  if (kind == "broadcast" || kind == "p2p_send") {
    return bytes;
  }
  if (kind == "p2p_recv") {
    return 0; // the sender counts it
  }
  return (p - 1) / p * bytes; // reduce_scatter, all_gather
}

/// A collective's time, alpha-beta over the ring: the bytes each rank
/// sends over the link's bandwidth, plus one link latency per ring step
/// (2(p-1) for all-reduce, p-1 otherwise).
static double collectiveSeconds(const CostTarget &target,
                                const LaunchWork &work) {
  const HardwareSpec &h = target.hardware;
  double p = double(work.ranks);
  double hops = (work.kernel == "all_reduce" ? 2 : 1) * (p - 1);
  double efficiency = efficiencyOf(h, "comm");
  if (work.kernel == "all_reduce" || work.kernel == "reduce_scatter") {
    efficiency *= efficiencyOf(h, "reduce"); // their sums' memory traffic
  }
  LinkFigures link =
      work.link.gbs > 0 ? work.link : LinkFigures{h.linkGBs, h.linkLatencyUs};
  double seconds = ringBytesSent(work.kernel, work.bytes, work.ranks) /
                   (link.gbs * 1e9 * efficiency);
  return seconds + hops * link.latencyUs * 1e-6;
}

/// The link between ranks `a` and `b` (both in [0, ranks)) of `h`: within
/// a node its devices' link, between nodes the link joining them.
static LinkFigures hopLink(const HardwareSpec &h, int32_t a, int32_t b) {
  LinkFigures slowest{h.linkGBs, h.linkLatencyUs};
  if (!h.heterogeneous()) {
    // rank r on node r / gpus; without inter_node_gbs, nodes are joined as
    // their devices are.
    bool across = h.gpus > 0 && a / h.gpus != b / h.gpus;
    return across && h.interNodeGBs > 0
               ? LinkFigures{h.interNodeGBs, h.interNodeLatencyUs}
               : slowest;
  }
  const HardwareSpec &da = h.rankDevice(a), &db = h.rankDevice(b);
  if (da.node == db.node) {
    if (da.nodeLinkGBs <= 0 || db.nodeLinkGBs <= 0) {
      return slowest;
    }
    return {std::min(da.nodeLinkGBs, db.nodeLinkGBs),
            std::max(da.nodeLinkLatencyUs, db.nodeLinkLatencyUs)};
  }
  for (const ClusterLink &link : h.links) {
    if ((link.from == da.nodeName && link.to == db.nodeName) ||
        (link.from == db.nodeName && link.to == da.nodeName)) {
      return {link.gbs, link.latencyUs};
    }
  }
  return slowest; // the file names no link for the pair
}

LinkFigures collectiveLink(const HardwareSpec &h,
                           llvm::ArrayRef<int32_t> group) {
  if (group.size() < 2) {
    return {};
  }
  LinkFigures ring{0, 0};
  for (size_t i = 0; i < group.size(); ++i) {
    int32_t a = group[i], b = group[(i + 1) % group.size()];
    if (a < 0 || b < 0 || a >= h.ranks() || b >= h.ranks()) {
      return {h.linkGBs, h.linkLatencyUs};
    }
    LinkFigures hop = hopLink(h, a, b);
    ring.gbs = ring.gbs == 0 ? hop.gbs : std::min(ring.gbs, hop.gbs);
    ring.latencyUs = std::max(ring.latencyUs, hop.latencyUs);
  }
  return ring;
}

llvm::StringRef costKindOf(llvm::StringRef kernel) {
  if (kernel == "all_reduce" || kernel == "reduce_scatter" ||
      kernel == "all_gather" || kernel == "broadcast" ||
      kernel.starts_with("p2p_")) {
    return "comm";
  }
  if (kernel == "topk_compress" || kernel == "sparse_average" ||
      kernel == "sign_compress" || kernel == "sign_average") {
    return "compression"; // serial scalar loops, not streaming passes
  }
  if (kernel.starts_with("linear") || kernel.starts_with("matmul") ||
      kernel == "lowrank_matmul") {
    return "gemm"; // linear, linear_quantized, linear_weight_grad, matmul
  }
  if (kernel.starts_with("attention")) {
    return "attention";
  }
  if (kernel.contains("norm") || kernel.starts_with("softmax")) {
    return "norm";
  }
  if (kernel.starts_with("cross_entropy")) {
    return "loss";
  }
  if (kernel.starts_with("adamw") || kernel.starts_with("sgd") ||
      kernel == "accumulate" || kernel == "global_norm") {
    return "optimizer";
  }
  if (kernel == "copy_h2d" || kernel == "copy_d2h") {
    return "host_copy"; // offload's copies, over the host link
  }
  if (kernel == "copy" || kernel == "dequantize" ||
      kernel.starts_with("copy_")) {
    return "copy";
  }
  return "elementwise";
}

double efficiencyOf(const HardwareSpec &hardware, llvm::StringRef kind) {
  auto it = hardware.efficiency.find(kind.str());
  if (it != hardware.efficiency.end()) {
    return it->second;
  }
  // Uncalibrated: what tuned libraries reach on large shapes (GEMMs ~70%
  // of peak, flash attention ~50%) and what streaming kernels reach of
  // the memory bandwidth (~70-80%).
  return llvm::StringSwitch<double>(kind)
      .Case("gemm", 0.7)
      .Case("attention", 0.5)
      .Case("copy", 0.8)
      .Case("compression", kCompressionEfficiency)
      .Case("reduce", 1.0) // uncalibrated: summing costs nothing extra
      .Default(0.7);
}

LaunchWork compressionWork(llvm::StringRef kernel, double elements,
                           double kept, int64_t members, int64_t ranks,
                           bool residual) {
  double n = std::max(elements, 0.0);
  double k = std::clamp(kept, 1.0, std::max(n, 1.0));
  double log2k = std::log2(std::max(k, 2.0));
  // Finding a position's tensor: a binary search over the members.
  double findPart = std::log2(double(std::max<int64_t>(members, 1))) + 1;
  LaunchWork work;
  work.kernel = kernel.str();
  // The operation counts' weights were measured on the kernels (bench/
  // compression_kernels.py): a scan's operation takes about as long as
  // any other, a heap level about 14 of them (its compares branch on data
  // in no order and mispredict, its swaps miss the cache once the heap
  // outgrows L1), an averaged rank about 10 (a bit picked, a scale
  // loaded, a double add in a dependent chain, a mispredicted select).
  if (kernel == "topk_compress") {
    // A scan (load, add the residual and store it, |p|, compare with the
    // weakest kept entry); the heap takes in k (1 + ln(n / k)) entries
    // when magnitudes come in no order, each sifted over log2(k) levels,
    // as is every entry of the final heap sort; the residual's k sent
    // entries are zeroed.
    double entered = k * (1 + std::log(std::max(n / k, 1.0)));
    work.flops = n * (residual ? 5 : 3) + (entered + k) * log2k * 14 +
                 (residual ? k * (2 + findPart) : 0);
    work.bytes = 4 * n * (residual ? 3 : 1) + 8 * k;
  } else if (kernel == "sign_compress") {
    // Two passes: p = grad + residual and its L1 norm (a chain of double
    // adds); then a bit per element and the residual p - scale * sign.
    work.flops = n * (residual ? 11 : 7);
    work.bytes = 4 * n * (residual ? 3 : 1) + n / 8 + 4 * double(members);
  } else if (kernel == "sign_average") {
    // Per element, each rank's bit picked and its scale added in double,
    // then one division.
    double r = double(std::max<int64_t>(ranks, 1));
    work.flops = n * (10 * r + 1);
    work.bytes = 4 * n + r * (n / 8 + 4 * double(members));
  } else if (kernel == "sparse_average") {
    // The bucket zeroed (a streaming store), then per gathered pair its
    // tensor found and one scattered add: a cache line read and written.
    work.flops = n / 8 + k * (4 + findPart);
    work.bytes = 4 * n + k * (8 + 128);
  } else {
    llvm_unreachable("compressionWork: not a compression kernel");
  }
  return work;
}

double cpuThreadSpeedup(const HardwareSpec &hardware, int64_t threads,
                        double flops) {
  double gain = hardware.cpuParallelEfficiency;
  double half = hardware.cpuParallelHalfMflop * 1e6;
  if (half > 0) {
    gain *= std::max(flops, 0.0) / (std::max(flops, 0.0) + half);
  }
  return 1.0 + double(std::max<int64_t>(1, threads) - 1) * gain;
}

double cpuPoolSpeedup(const HardwareSpec &hardware, int64_t threads,
                      double oneThreadSeconds) {
  if (!hardware.cpuPoolParallelEfficiency) {
    llvm_unreachable("cpuPoolSpeedup: the hardware gives no pool scaling");
  }
  double us = std::max(oneThreadSeconds, 0.0) * 1e6;
  double half = hardware.cpuPoolHalfUs;
  double gain =
      *hardware.cpuPoolParallelEfficiency * (half > 0 ? us / (us + half) : 1.0);
  return 1.0 + double(std::max<int64_t>(1, threads) - 1) * gain;
}

bool isCpuPoolKind(llvm::StringRef kind) {
  return kind != "gemm" && kind != "compression" && kind != "comm" &&
         kind != "host_copy";
}

/// Peak FLOP/s for a launch of `kind` doing `flops` at `target`'s
/// precision. On the CPU only GEMMs go to the BLAS's threads, whose
/// speedup depends on their size; without calibrated pool scaling
/// (cpu_pool_parallel_efficiency) the pool's kernels, which split their
/// rows evenly, scale as a large GEMM does.
static double peakFlops(const CostTarget &target, llvm::StringRef kind,
                        double flops) {
  const HardwareSpec &h = target.hardware;
  if (!h.isCuda()) {
    if (kind == "compression") {
      return h.cpuGflopsPerThread * 1e9; // serial loops: one thread
    }
    double speedup =
        kind == "gemm"
            ? cpuThreadSpeedup(h, target.threads, flops)
            : 1.0 + double(std::max<int64_t>(1, target.threads) - 1) *
                        h.cpuParallelEfficiency;
    return h.cpuGflopsPerThread * 1e9 * speedup;
  }
  // bf16 and fp16 run at the same dense tensor-core rate on sm_80 and
  // newer, which bf16_tflops gives.
  bool tensorCores =
      (target.precision == "bf16" || target.precision == "fp16") &&
      (kind == "gemm" || kind == "attention");
  return (tensorCores ? h.bf16Tflops : h.fp32Tflops) * 1e12;
}

double predictLaunchSeconds(const CostTarget &target, const LaunchWork &work) {
  if (work.ranks > 0) {
    return work.ranks == 1 ? 0 : collectiveSeconds(target, work);
  }
  llvm::StringRef kind = costKindOf(work.kernel);
  if (work.onHost && target.hardware.isCuda()) {
    // A CPU loop over host memory (AdamW: memory-bound), beside a GPU.
    return work.bytes / (target.hardware.hostMemoryGBs * 1e9) +
           target.hardware.launchOverheadUs * 1e-6;
  }
  double efficiency = efficiencyOf(target.hardware, kind);
  if (kind == "host_copy") {
    return work.bytes / (target.hardware.hostLinkGBs * 1e9 * efficiency) +
           target.hardware.launchOverheadUs * 1e-6;
  }
  const HardwareSpec &h = target.hardware;
  if (!h.isCuda() && h.cpuPoolParallelEfficiency && isCpuPoolKind(kind)) {
    // Calibrated pool scaling: the one-thread roofline, over the speedup
    // a launch of that length gets from the threads.
    double oneThread =
        std::max(work.flops / (h.cpuGflopsPerThread * 1e9 * efficiency),
                 work.bytes / (h.memoryBandwidthGBs * 1e9 * efficiency));
    return oneThread / cpuPoolSpeedup(h, target.threads, oneThread) +
           h.launchOverheadUs * 1e-6;
  }
  double compute =
      work.flops / (peakFlops(target, kind, work.flops) * efficiency);
  // Compression's efficiency is its scalar loops' share of the FMA rate;
  // its bytes still stream as an elementwise pass's do.
  double memoryEfficiency = kind == "compression"
                                ? efficiencyOf(target.hardware, "elementwise")
                                : efficiency;
  double memory = work.bytes / (target.hardware.memoryBandwidthGBs * 1e9 *
                                memoryEfficiency);
  // A dequantizing GEMM decodes its weight before multiplying (CUDA's
  // via_gemm route writes bf16 copies first; the CPU kernel decodes tiles):
  // the passes add up instead of overlapping.
  double seconds = work.kernel == "linear_quantized"
                       ? compute + memory
                       : std::max(compute, memory);
  return seconds + target.hardware.launchOverheadUs * 1e-6;
}

void TimeEstimate::add(const TimeEstimate &other, double times) {
  seconds += other.seconds * times;
  for (const auto &[kind, s] : other.secondsByKind) {
    secondsByKind[kind] += s * times;
  }
}

TimeEstimate predictLaunches(const CostTarget &target,
                             const std::vector<LaunchWork> &launches) {
  TimeEstimate estimate;
  for (const LaunchWork &work : launches) {
    double s = predictLaunchSeconds(target, work);
    estimate.seconds += s;
    bool besideGpu = work.onHost && target.hardware.isCuda();
    estimate.secondsByKind[besideGpu ? "host"
                                     : costKindOf(work.kernel).str()] += s;
  }
  return estimate;
}

std::string unpredictableBecause(const CostTarget &target) {
  const HardwareSpec &h = target.hardware;
  if (h.memoryBandwidthGBs <= 0) {
    return "the hardware '" + h.name + "' gives no memory bandwidth";
  }
  if (h.ranks() > 1 && h.linkGBs <= 0) {
    return "the hardware '" + h.name + "' has " + std::to_string(h.ranks()) +
           " ranks but gives no link bandwidth (link_gbs)";
  }
  if (!h.isCuda() && h.cpuGflopsPerThread <= 0) {
    return "the hardware '" + h.name + "' gives no cpu_gflops_per_thread";
  }
  if (h.isCuda() &&
      (h.fp32Tflops <= 0 ||
       ((target.precision == "bf16" || target.precision == "fp16") &&
        h.bf16Tflops <= 0))) {
    return "the hardware '" + h.name + "' gives no " +
           (h.fp32Tflops <= 0 ? "fp32_tflops" : "bf16_tflops");
  }
  return "";
}

} // namespace tailor
