//===- Hardware.h - the machines tailor compiles for ------------*- C++ -*-===//
//
// `--hardware NAME|FILE` picks the target: a name from the built-in table
// (cpu, h100, h100-pcie, h200, a100-80gb, a100-40gb, l4, a10g, rtx4090,
// rtx3090, t4, optionally prefixed by a GPU count, `2xrtx3090`) or a YAML
// file with the same fields (what `tailor calibrate` writes). The figures
// (../shared/FORMATS.md, dense tensor-core rates, vendor datasheets) feed
// the plan's memory proof and the cost model (compiler/CostModel.h).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_HARDWARE_H
#define TAILOR_COMPILER_HARDWARE_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tailor {

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
  /// further thread adds, as a fraction of that (1: linear scaling); T
  /// threads reach cpuGflopsPerThread * (1 + (T - 1) * efficiency).
  double cpuGflopsPerThread = 0;
  double cpuParallelEfficiency = 1;
  /// Fixed cost of one kernel launch, microseconds.
  double launchOverheadUs = 0;
  /// Fraction of the peak each kind of kernel reaches (gemm, attention,
  /// norm, elementwise, loss, optimizer, copy); `tailor calibrate` measures
  /// them, defaults otherwise.
  std::map<std::string, double> efficiency;

  bool isCuda() const { return backend == "cuda"; }
  int64_t ranks() const { return nodes * gpus; }
};

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
/// `2x2xcpu`: two nodes of two, `2x8xh100`), or, if `spec` names an existing file, that YAML file. Errors
/// name the unknown hardware (listing the known ones) or the file, line
/// and key.
llvm::Expected<HardwareSpec> resolveHardware(llvm::StringRef spec);

} // namespace tailor

#endif // TAILOR_COMPILER_HARDWARE_H
