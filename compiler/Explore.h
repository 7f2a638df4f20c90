//===- Explore.h - the configuration space `tailor explore` searches -*- C++
//-*-===//
//
// The knobs people turn by trial and OOM, as one space: the frozen weights'
// format, the adapter, recomputation, sharding, offload (of the frozen
// weights, of AdamW and its state, of the saved activations), micro
// batch x gradient accumulation for a fixed global batch, and what the
// collectives send (DDP's gradient compression where
// tailor-compress-gradients applies: several CPU ranks under DDP, without
// offload; ZeRO++'s int8 weight gathers and gradient reduce-scatters under
// ZeRO-2/3 and hybrid sharding on CPU ranks). Each point is a set of recipe
// keys (`key=value`, as `tailor compile` takes them after the recipe), so a
// configuration explore reports is compiled by the very pipeline `tailor
// compile` runs (tools/tailor/ExploreCommand.cpp evaluates them). This file
// holds what needs no compiling: the space, `--fix`, the Pareto front, the
// configurations nearest to the recipe that fit, and the SVG plot.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_EXPLORE_H
#define TAILOR_COMPILER_EXPLORE_H

#include "compiler/Hardware.h"
#include "compiler/Recipe.h"

#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tailor::explore {

/// One point of the space.
struct Knobs {
  /// Frozen weights: fp32, bf16, int8, nf4, nf4-dq (NF4 with double
  /// quantization), gptq (when the recipe names a gptq_checkpoint). Full
  /// fine-tuning keeps fp32 masters.
  std::string weights = "fp32";
  /// lora, lora-fa or full.
  std::string adapter = "lora";
  /// gradient_checkpointing: none, selective or full; or budget-F, the
  /// budget policy at activation_memory_budget F.
  std::string recompute = "none";
  /// ddp, zero1, zero2, zero3, zero3-hpz (ZeRO-3 with ZeRO++'s node
  /// partitions of its gathers, zero_hpz_partition_size = the ranks of a
  /// node: several nodes of several CPU ranks) or hybrid (several ranks
  /// only).
  std::string sharding = "ddp";
  /// offload_param: cpu, offload_optimizer: cpu and
  /// enable_activation_offloading: true (the `offload` column shows them
  /// as "param+optimizer+activations", or "none").
  bool offloadParams = false;
  bool offloadOptimizer = false;
  bool offloadActivations = false;
  int64_t microBatch = 1;
  int64_t accumulation = 1;
  /// What the collectives send: none; DDP's gradient_compression powersgd,
  /// acp-sgd, topk or signsgd; or ZeRO++'s quantization: qgz (int8
  /// zero_quantized_gradients: zero2, zero3, hybrid), qgz-int4 (the same
  /// at zero_quantized_gradients_bits 4), qwz (int8 zero_quantized_weights:
  /// zero3), qwz+qgz and qwz+qgz-int4 (both: zero3).
  std::string compression = "none";
  /// pipeline_stages: consecutive layers split into this many stages,
  /// micro-batches in a 1F1B schedule (1: no split; several CPU ranks
  /// only). Each stage runs on `replicas` = ranks / stages data-parallel
  /// replicas (PP x DP): every micro-batch of a replica's share of the
  /// global batch passes through all stages.
  int64_t stages = 1;
  int64_t replicas = 1;
  /// zero3-hpz's partition size (the ranks of a node); 1 otherwise.
  int64_t hpzPartition = 1;

  /// Whether the sharding is ZeRO-3's (zero3 or zero3-hpz).
  bool zero3() const;
  bool operator==(const Knobs &o) const;
  /// How many knobs differ from `o` (micro batch and accumulation count as
  /// one; each kind of offload as one).
  int distance(const Knobs &o) const;
};

/// Whether a compression knob value sends ZeRO-3's weight gathers as int8
/// (qwz, qwz+qgz, qwz+qgz-int4), ZeRO's gradient reduce-scatters quantized
/// (every value with qgz), those at 4 bits (-int4), or either (a ZeRO++
/// value rather than a gradient_compression method).
bool quantizesWeights(llvm::StringRef compression);
bool quantizesGradients(llvm::StringRef compression);
bool quantizesGradientsInt4(llvm::StringRef compression);
bool isZeroQuantization(llvm::StringRef compression);

/// The knobs' names, in the order tables show them.
constexpr std::array<const char *, 8> kKnobNames = {
    "weights", "adapter",     "recompute",   "sharding",
    "offload", "micro_batch", "compression", "split"};

/// A knob's value as text (`micro_batch` as "MBxGA", `split` as "none",
/// "N stages" or "N stages x R replicas").
std::string knobValue(const Knobs &knobs, llvm::StringRef name);

/// The recipe keys that select `knobs` on top of `base` (whose given keys
/// decide whether FSDP's spellings must be overridden too).
std::vector<std::pair<std::string, std::string>>
recipeKeys(const Knobs &knobs, const TrainingRecipe &base);

/// The values each knob may take.
struct Space {
  std::vector<std::string> weights, adapters, recompute, sharding;
  std::vector<bool> offloadParams, offloadOptimizer, offloadActivations;
  std::vector<int64_t> microBatches;
  /// Compression knob values; beyond "none" only on several CPU ranks,
  /// each point taking those that apply to it (applies()).
  std::vector<std::string> compression = {"none"};
  /// Layer splits: 1 (none), and where a split runs (CPU ranks) every
  /// stage count that divides the ranks (the rest are replicas; on mixed
  /// clusters a stage per rank only).
  std::vector<int64_t> stages = {1};
  int64_t globalBatch = 1;
  /// Ranks of a node, where zero3-hpz partitions (1: no such value).
  int64_t ranksPerNode = 1;
  /// Ranks that split the global batch (the hardware's ranks).
  int64_t dataParallel = 1;
  /// Every valid combination, in a fixed order.
  std::vector<Knobs> enumerate() const;

  /// Whether `k` (compression aside) can compress its gradients: DDP
  /// without offload (the space offers compression only on several CPU
  /// ranks, where the pass has kernels).
  static bool compressible(const Knobs &k);
  /// Whether compression value `method` applies to `k`'s sharding and
  /// offload (DDP's methods: compressible(); qgz and qgz-int4: zero2,
  /// zero3, hybrid; values with qwz: zero3).
  static bool applies(llvm::StringRef method, const Knobs &k);

private:
  /// `base` with every valid combination of offloads, appended to `all`.
  void addOffloads(const Knobs &base, std::vector<Knobs> &all) const;
  /// `k` once per compression method that applies to it.
  void addCompressions(const Knobs &k, std::vector<Knobs> &all) const;
  /// `base` split over `stages` ranks, appended to `all` when the split
  /// composes with its other knobs (no ZeRO, offload, compression or
  /// recomputation yet).
  void addSplit(const Knobs &base, int64_t stages,
                std::vector<Knobs> &all) const;
};

/// The knobs `recipe` chose (its micro batch and accumulation as given).
Knobs knobsOf(const TrainingRecipe &recipe, const HardwareSpec &hardware);

/// The space around `base` on `hardware` for `globalBatch` sequences per
/// optimizer step (0: the recipe's), with `fixed` knobs pinned (`--fix
/// key=value`: a knob name or its recipe key, e.g. weights=nf4,
/// quantization=nf4, gradient_checkpointing=true, recompute=budget-0.3,
/// zero_stage=2, offload_param=cpu, offload_optimizer=none,
/// enable_activation_offloading=false, micro_batch_size=2,
/// gradient_compression=topk).
llvm::Expected<Space> makeSpace(const TrainingRecipe &base,
                                const HardwareSpec &hardware,
                                int64_t globalBatch,
                                const std::vector<std::string> &fixed);

/// What compiling one configuration gave.
struct Evaluation {
  Knobs knobs;
  /// Empty when compiled; otherwise the compiler's first error.
  std::string error;
  int64_t devicePeakBytes = 0;
  int64_t hostPeakBytes = 0;
  /// Bytes by plan memory category (runtime/MemoryCategory.h's order).
  std::array<int64_t, 6> categoryBytes{};
  double stepSeconds = 0;
  double tokensPerSecond = 0;
  /// Whether the device peak is within the budget (and it compiled).
  bool fits = false;
  /// Whether the figures were extended from 2 and 3 layers.
  bool extrapolated = false;
  bool compiled() const { return error.empty(); }
};

/// Indices of the fitting evaluations no other fitting one beats in both
/// device peak and step time, fastest first.
std::vector<size_t> paretoFront(const std::vector<Evaluation> &all);

/// Indices of fitting evaluations nearest to `given` (fewest knobs
/// changed, then fastest), at most `count`.
std::vector<size_t> nearestFits(const std::vector<Evaluation> &all,
                                const Knobs &given, size_t count);

/// What changes from `from` to `to`, in words ("recompute none ->
/// selective, micro_batch 4x1 -> 2x2").
std::string describeChange(const Knobs &from, const Knobs &to);

/// An SVG scatter of device peak (GiB) against predicted step time (ms):
/// every compiled configuration, the Pareto front joined by a line, the
/// best marked, and the budget as a vertical line.
std::string plotSvg(const std::vector<Evaluation> &all,
                    const std::vector<size_t> &front, int64_t budgetBytes,
                    llvm::StringRef title);

} // namespace tailor::explore

#endif // TAILOR_COMPILER_EXPLORE_H
