//===- Hardware.h - the machines tailor compiles for ------------*- C++ -*-===//
//
// `--hardware NAME|FILE` picks the target: a name from the built-in table
// (cpu, h100, h100-pcie, h200, a100-80gb, a100-40gb, l4, a10g, rtx4090,
// rtx3090, t4, optionally prefixed by a GPU count, `2xrtx3090`) or a YAML
// file with the same fields (what `tailor calibrate` writes), or a cluster
// file whose `nodes:` list mixes devices (ClusterFile.cpp). The figures
// (../shared/FORMATS.md, dense tensor-core rates, vendor datasheets) feed
// the plan's memory proof and the cost model (compiler/CostModel.h).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_HARDWARE_H
#define TAILOR_COMPILER_HARDWARE_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tailor {

/// A link between two nodes of a cluster file.
struct ClusterLink {
  std::string from, to;
  /// "ib", "100gbe", "10gbe", "1gbe", "nvlink", "pcie" (informative).
  std::string kind;
  double gbs = 0;
  double latencyUs = 10;
};

struct HardwareSpec {
  /// The name as given ("h100", "2xrtx3090", or the file's `name`).
  std::string name;
  /// "cpu" or "cuda".
  std::string backend = "cpu";
  /// Compute capability major * 10 + minor (90 for H100); 0 on the CPU.
  int64_t sm = 0;
  /// Devices per node: GPUs, or CPU ranks (processes) for `NxCPU`; each
  /// is one rank of the plan.
  int64_t gpus = 1;
  /// Nodes of the cluster (`2x8xh100`: 2 nodes of 8); ranks are
  /// nodes * gpus.
  int64_t nodes = 1;
  /// Memory of one GPU in bytes (0: unknown, no memory proof).
  uint64_t memoryBytes = 0;
  /// Dense bf16 tensor-core rate, TFLOP/s, and memory bandwidth, GB/s.
  double bf16Tflops = 0;
  double memoryBandwidthGBs = 0;
  /// GPU-to-GPU link, GB/s per direction, and its kind ("nvlink4", "pcie4").
  double linkGBs = 0;
  std::string link;
  /// One hop's latency on that link, microseconds (the alpha of the
  /// collectives' alpha-beta cost).
  double linkLatencyUs = 10;
  /// Between the nodes of a cluster of several alike (`2x8xh100`, or a
  /// hardware file's `nodes` with `inter_node_gbs`): the link a collective
  /// crosses from one node to the next, GB/s per direction, and one hop's
  /// latency. 0: the nodes are joined as the devices within one are
  /// (linkGBs, linkLatencyUs). Built-in GPU names of several nodes give
  /// the fabric their servers usually have (resolveHardware).
  double interNodeGBs = 0;
  double interNodeLatencyUs = 0;
  /// Host-to-device copies (offload), GB/s each way: PCIe as measured with
  /// pinned memory, or on a CPU target a memcpy.
  double hostLinkGBs = 0;
  /// The host's DRAM bandwidth a multi-threaded streaming loop sustains,
  /// GB/s: what host launches (optimizer offload's AdamW) run at on a GPU
  /// machine. A CPU target's launches use memoryBandwidthGBs.
  double hostMemoryGBs = 0;
  /// Plain fp32 rate (CUDA cores, no tensor cores), TFLOP/s.
  double fp32Tflops = 0;
  /// CPU: fp32 GFLOP/s one worker thread sustains in a GEMM, and what each
  /// further thread adds, as a fraction of that (1: linear scaling), on a
  /// large GEMM. Small GEMMs spread worse over threads (the BLAS splits
  /// fewer blocks, and each call pays its threads' hand-off), so a GEMM
  /// of F FLOPs gets efficiency * F / (F + cpuParallelHalfMflop * 1e6) of
  /// each further thread: T threads reach cpuGflopsPerThread * (1 + (T -
  /// 1) * that). 0: every size scales alike.
  double cpuGflopsPerThread = 0;
  double cpuParallelEfficiency = 1;
  double cpuParallelHalfMflop = 0;
  /// CPU: what each further thread adds to a kernel of the session's
  /// thread pool (every CPU kernel but GEMMs and compression's serial
  /// loops), as a fraction of one thread, on a long one. A launch the
  /// model gives t microseconds on one thread gets cpuPoolParallelEfficiency
  /// * t / (t + cpuPoolHalfUs) of each further thread: a short launch's
  /// hand-off to the workers costs about what splitting it saves. Its
  /// memory traffic gains too (one core does not saturate the DRAM), so
  /// with this figure memoryBandwidthGBs is what one thread streams.
  /// Unset (files calibrated before it, the built-in cpu): the pool's
  /// kernels compute as a large GEMM scales and stream at
  /// memoryBandwidthGBs whatever the threads.
  std::optional<double> cpuPoolParallelEfficiency;
  double cpuPoolHalfUs = 0;
  /// Fixed cost of one kernel launch, microseconds.
  double launchOverheadUs = 0;
  /// Fraction of the peak each kind of kernel reaches (gemm, attention,
  /// norm, elementwise, loss, optimizer, copy, host_copy, comm: the
  /// collectives' share of the link, compression: gradient compressors'
  /// serial loops, of one thread's rate, reduce: the share of comm's rate
  /// all-reduce and reduce-scatter keep, their sums costing memory
  /// traffic); `tailor calibrate` measures them, defaults otherwise.
  std::map<std::string, double> efficiency;
  /// CPU ranks: the worker threads this device's rank runs (0: what the
  /// compile's `--threads` says).
  int64_t threads = 0;
  /// The device's speed relative to its kind's figures (a cluster file's
  /// `speed`: 0.5 for a rank that shares its core with another); the rates
  /// above already include it, so the cost model never reads it.
  double speed = 1;
  /// A cluster of mixed devices (a hardware file with `nodes:`): each
  /// rank's device in rank order (node by node, device by device as the
  /// file lists them), with the index of its node in `node` and its
  /// node's name in `nodeName`; empty for a homogeneous cluster, whose
  /// every rank is this spec. This spec then holds what the plan as a whole
  /// is built for: the smallest memory, the lowest SM, the slowest link.
  std::vector<HardwareSpec> rankDevices;
  int64_t node = 0;
  std::string nodeName;
  /// A mixed cluster's rank device: the link between the devices of its
  /// node as the file gives it (linkGBs and linkLatencyUs hold the
  /// cluster's slowest, what a collective over every rank runs at).
  double nodeLinkGBs = 0;
  double nodeLinkLatencyUs = 0;
  /// A cluster file's links between nodes.
  std::vector<ClusterLink> links;

  bool isCuda() const { return backend == "cuda"; }
  bool heterogeneous() const { return !rankDevices.empty(); }
  int64_t ranks() const {
    return heterogeneous() ? static_cast<int64_t>(rankDevices.size())
                           : nodes * gpus;
  }
  /// Rank `rank`'s device: its entry of rankDevices, or this spec.
  const HardwareSpec &rankDevice(int64_t rank) const {
    return heterogeneous() ? rankDevices[static_cast<size_t>(rank)] : *this;
  }
};

/// The scalar figures of `h` under the keys a hardware file uses
/// (bf16_tflops, cpu_gflops_per_thread, efficiency_gemm, sm, memory_gb,
/// threads, speed, ...), every one, so setHardwareFigure on a default spec
/// rebuilds `h`'s figures: how the module's `tg.cluster` attribute and a
/// plan carry a rank's device.
std::vector<std::pair<std::string, double>>
hardwareFigures(const HardwareSpec &h);

/// Sets the figure `key` (one of hardwareFigures' keys) of `h`; false for
/// a key it does not know, or a value that is negative, not finite, or out
/// of range for a whole-number figure (sm, threads, memory_bytes).
bool setHardwareFigure(HardwareSpec &h, llvm::StringRef key, double value);

/// Parses hardware YAML held in memory (`path` names it in errors): the
/// same forms as a hardware file.
llvm::Expected<HardwareSpec> parseHardwareYaml(llvm::StringRef text,
                                               llvm::StringRef path);

/// nvcc's architecture of the cubin tailor embeds for compute capability
/// `sm` (major * 10 + minor): "sm_90a" for 90, "sm_80" for 80 to 88
/// (Ampere's cubin runs on sm_86/87), else "sm_<sm>".
std::string cubinArchFor(int64_t sm);

/// The kinds of kernel the cost model tells apart, each with its own
/// efficiency (`efficiency_<kind>` in a hardware file).
const std::vector<std::string> &costKernelKinds();

/// The built-in names, in the order `--help` lists them.
std::vector<std::string> knownHardwareNames();

/// Resolves `--hardware`: a known name, with an optional `Nx` count of
/// devices per node and `MxNx` nodes of them (`4xcpu`: four CPU ranks,
/// `2x2xcpu`: two nodes of two, `2x8xh100`), or, if `spec` names an
/// existing file, that YAML file (a cluster file with `nodes:`). Errors
/// name the unknown hardware (listing the known ones) or the file, line
/// and key.
llvm::Expected<HardwareSpec> resolveHardware(llvm::StringRef spec);

} // namespace tailor

#endif // TAILOR_COMPILER_HARDWARE_H
