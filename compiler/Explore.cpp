//===- Explore.cpp - the configuration space `tailor explore` searches ----===//

#include "compiler/Explore.h"

#include "compiler/Pipelines.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>

using llvm::createStringError;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;

namespace tailor::explore {

bool quantizesWeights(StringRef compression) {
  return compression.starts_with("qwz");
}

bool quantizesGradients(StringRef compression) {
  return compression.contains("qgz");
}

bool quantizesGradientsInt4(StringRef compression) {
  return quantizesGradients(compression) && compression.ends_with("-int4");
}

bool isZeroQuantization(StringRef compression) {
  return quantizesWeights(compression) || quantizesGradients(compression);
}

bool Knobs::zero3() const {
  return sharding == "zero3" || sharding == "zero3-hpz";
}

bool Knobs::operator==(const Knobs &o) const {
  return weights == o.weights && adapter == o.adapter &&
         recompute == o.recompute && sharding == o.sharding &&
         offloadParams == o.offloadParams &&
         offloadOptimizer == o.offloadOptimizer &&
         offloadActivations == o.offloadActivations &&
         microBatch == o.microBatch &&
         accumulation == o.accumulation && compression == o.compression &&
         stages == o.stages && replicas == o.replicas;
}

int Knobs::distance(const Knobs &o) const {
  return (weights != o.weights) + (adapter != o.adapter) +
         (recompute != o.recompute) + (sharding != o.sharding) +
         (offloadParams != o.offloadParams) +
         (offloadOptimizer != o.offloadOptimizer) +
         (offloadActivations != o.offloadActivations) +
         (microBatch != o.microBatch) + (compression != o.compression) +
         (stages != o.stages);
}

std::string knobValue(const Knobs &k, StringRef name) {
  if (name == "weights") {
    return k.weights;
  }
  if (name == "adapter") {
    return k.adapter;
  }
  if (name == "recompute") {
    return k.recompute;
  }
  if (name == "sharding") {
    return k.sharding;
  }
  if (name == "offload") {
    std::string text;
    for (auto [on, what] : {std::pair<bool, const char *>{k.offloadParams,
                                                          "param"},
                            {k.offloadOptimizer, "optimizer"},
                            {k.offloadActivations, "activations"}}) {
      if (on) {
        text += (text.empty() ? "" : "+") + std::string(what);
      }
    }
    return text.empty() ? "none" : text;
  }
  if (name == "compression") {
    return k.compression;
  }
  if (name == "split") {
    if (k.stages == 1) {
      return "none";
    }
    return std::to_string(k.stages) + " stages" +
           (k.replicas > 1 ? " x " + std::to_string(k.replicas) + " replicas"
                           : "");
  }
  return std::to_string(k.microBatch) + "x" + std::to_string(k.accumulation);
}

//===----------------------------------------------------------------------===//
// Knobs as recipe keys
//===----------------------------------------------------------------------===//

namespace {

using KeyList = std::vector<std::pair<std::string, std::string>>;

void addWeightKeys(const Knobs &k, KeyList &keys) {
  if (k.adapter == "full" || k.weights == "fp32") {
    keys.push_back({"quantization", "none"});
    return;
  }
  if (k.weights == "nf4" || k.weights == "nf4-dq") {
    keys.push_back({"quantization", "nf4"});
    keys.push_back({"double_quant", k.weights == "nf4-dq" ? "true" : "false"});
    return;
  }
  keys.push_back({"quantization", k.weights});
}

/// DeepSpeed's stage, and FSDP's name when the base recipe used that key
/// (both must agree).
void addShardingKeys(const Knobs &k, const TrainingRecipe &base,
                     KeyList &keys) {
  static const std::map<std::string, std::pair<const char *, const char *>>
      kSpellings = {{"ddp", {"0", "NO_SHARD"}},
                    {"zero1", {"1", nullptr}},
                    {"zero2", {"2", "SHARD_GRAD_OP"}},
                    {"zero3", {"3", "FULL_SHARD"}},
                    {"zero3-hpz", {"3", "FULL_SHARD"}},
                    {"hybrid", {nullptr, "HYBRID_SHARD"}}};
  auto [stage, fsdp] = kSpellings.at(k.sharding);
  bool baseFsdp = base.givenKeys.count("fsdp_sharding_strategy") != 0;
  if (stage && (!fsdp || !baseFsdp || base.givenKeys.count("zero_stage"))) {
    keys.push_back({"zero_stage", stage});
  }
  if (fsdp && (!stage || baseFsdp)) {
    keys.push_back({"fsdp_sharding_strategy", fsdp});
  }
  // ZeRO++'s int8 weight gathers and gradient reduce-scatters: the
  // compression knob's choice, and `false` over a base recipe's `true`
  // where the point does not quantize.
  bool weights = quantizesWeights(k.compression);
  if (weights || base.zeroQuantizedWeights) {
    keys.push_back({"zero_quantized_weights", weights ? "true" : "false"});
  }
  bool gradients = quantizesGradients(k.compression);
  if (gradients || base.zeroQuantizedGradients) {
    keys.push_back({"zero_quantized_gradients", gradients ? "true" : "false"});
  }
  // Their width: 4 bits where the point says so, 8 over a recipe's 4.
  bool int4 = quantizesGradientsInt4(k.compression);
  if (gradients && (int4 || base.zeroQuantizedGradientsBits == 4)) {
    keys.push_back({"zero_quantized_gradients_bits", int4 ? "4" : "8"});
  }
  // hpZ's node partitions of ZeRO-3's gathers: zero3-hpz's size, and 1
  // (off) over a recipe's where a point does not partition.
  if (k.sharding == "zero3-hpz" || base.zeroHpzPartitionSize > 1) {
    keys.push_back(
        {"zero_hpz_partition_size",
         std::to_string(k.sharding == "zero3-hpz" ? k.hpzPartition : 1)});
  }
}

} // namespace

std::vector<std::pair<std::string, std::string>>
recipeKeys(const Knobs &k, const TrainingRecipe &base) {
  KeyList keys;
  keys.push_back({"adapter", k.adapter});
  addWeightKeys(k, keys);
  if (StringRef(k.recompute).starts_with("budget-")) {
    // The budget policy: recompute the cheapest FLOPs per byte until the
    // activation peak is this fraction of no recomputation's.
    keys.push_back({"gradient_checkpointing", "false"});
    keys.push_back({"activation_memory_budget",
                    StringRef(k.recompute).drop_front(7).str()});
  } else {
    keys.push_back({"gradient_checkpointing",
                    k.recompute == "none" ? "false"
                    : k.recompute == "full" ? "true"
                                            : k.recompute});
  }
  addShardingKeys(k, base, keys);
  keys.push_back({"offload_param", k.offloadParams ? "cpu" : "none"});
  if (base.givenKeys.count("fsdp_offload_params")) {
    keys.push_back({"fsdp_offload_params", k.offloadParams ? "true" : "false"});
  }
  keys.push_back({"offload_optimizer", k.offloadOptimizer ? "cpu" : "none"});
  keys.push_back({"enable_activation_offloading",
                  k.offloadActivations ? "true" : "false"});
  keys.push_back({"micro_batch_size", std::to_string(k.microBatch)});
  keys.push_back({"gradient_accumulation_steps", std::to_string(k.accumulation)});
  // Only when either side compresses, so plain configurations keep the
  // keys they had.
  std::string method =
      isZeroQuantization(k.compression) ? "none" : k.compression;
  if (method != "none" || base.gradientCompression != "none") {
    keys.push_back({"gradient_compression", method});
  }
  // Only when either side splits; device_map: auto would choose a split of
  // its own, so a base that used it is told none.
  if (k.stages > 1 || base.givenKeys.count("pipeline_stages") ||
      !base.deviceMap.empty()) {
    if (!base.deviceMap.empty()) {
      keys.push_back({"device_map", "none"});
    }
    keys.push_back({"pipeline_stages", std::to_string(k.stages)});
  }
  return keys;
}

//===----------------------------------------------------------------------===//
// The space
//===----------------------------------------------------------------------===//

/// The recompute knob of an activation budget `fraction` ("budget-0.5").
static std::string budgetKnob(double fraction) {
  std::string text;
  llvm::raw_string_ostream(text) << "budget-" << llvm::format("%g", fraction);
  return text;
}

Knobs knobsOf(const TrainingRecipe &r, const HardwareSpec &hardware) {
  Knobs k;
  k.adapter = r.adapter;
  std::string scheme = frozenWeightScheme(
      r, scheduleOptionsFor(hardware, r.mixedPrecision, /*threads=*/1));
  if (r.adapter == "full" || scheme.empty()) {
    k.weights = "fp32";
  } else if (scheme == "nf4") {
    k.weights = r.doubleQuant ? "nf4-dq" : "nf4";
  } else {
    k.weights = scheme;
  }
  k.recompute = r.recomputePolicy;
  if (r.recomputePolicy == "budget" && r.activationMemoryBudget > 0) {
    k.recompute = budgetKnob(r.activationMemoryBudget);
  }
  k.sharding = r.sharding;
  if (r.sharding == "zero3" && r.zeroHpzPartitionSize > 1) {
    k.sharding = "zero3-hpz";
    k.hpzPartition = r.zeroHpzPartitionSize;
  }
  k.offloadParams = r.offloadParams();
  k.offloadOptimizer = r.offloadOptimizer == "cpu";
  k.offloadActivations = r.activationOffloading;
  k.microBatch = r.microBatchSize;
  k.accumulation = r.gradientAccumulationSteps;
  k.compression = r.gradientCompression;
  if (r.zeroQuantizedWeights || r.zeroQuantizedGradients) {
    k.compression = r.zeroQuantizedWeights && r.zeroQuantizedGradients
                        ? "qwz+qgz"
                    : r.zeroQuantizedWeights ? "qwz"
                                             : "qgz";
    if (r.zeroQuantizedGradients && r.zeroQuantizedGradientsBits == 4) {
      k.compression += "-int4";
    }
  }
  k.stages = r.deviceMap == "auto" ? hardware.ranks() : r.pipelineStages;
  k.replicas = k.stages > 1 ? std::max<int64_t>(1, hardware.ranks() / k.stages)
                            : 1;
  return k;
}

bool Space::compressible(const Knobs &k) {
  return k.sharding == "ddp" && !k.offloadParams && !k.offloadOptimizer &&
         !k.offloadActivations;
}

bool Space::applies(StringRef method, const Knobs &k) {
  if (method == "none") {
    return true;
  }
  if (quantizesWeights(method)) {
    return k.zero3();
  }
  if (quantizesGradients(method)) {
    return k.sharding == "zero2" || k.zero3() || k.sharding == "hybrid";
  }
  return compressible(k);
}

void Space::addCompressions(const Knobs &k, std::vector<Knobs> &all) const {
  for (const std::string &method : compression) {
    if (!applies(method, k)) {
      continue;
    }
    Knobs c = k;
    c.compression = method;
    all.push_back(std::move(c));
  }
}

void Space::addOffloads(const Knobs &base, std::vector<Knobs> &all) const {
  for (bool params : offloadParams) {
    // Parameter offload places frozen weights of unsharded parameters.
    if (params && (base.adapter == "full" || base.zero3())) {
      continue;
    }
    for (bool optimizer : offloadOptimizer) {
      for (bool activations : offloadActivations) {
        Knobs k = base;
        k.offloadParams = params;
        k.offloadOptimizer = optimizer;
        k.offloadActivations = activations;
        addCompressions(k, all);
      }
    }
  }
}

void Space::addSplit(const Knobs &base, int64_t split,
                     std::vector<Knobs> &all) const {
  if (base.sharding != "ddp" || base.recompute != "none" ||
      !llvm::is_contained(offloadParams, false) ||
      !llvm::is_contained(offloadOptimizer, false) ||
      !llvm::is_contained(offloadActivations, false) ||
      !llvm::is_contained(compression, "none")) {
    return;
  }
  Knobs k = base;
  k.stages = split;
  k.replicas = dataParallel / split;
  k.accumulation = globalBatch / (k.microBatch * k.replicas);
  all.push_back(std::move(k));
}

std::vector<Knobs> Space::enumerate() const {
  std::vector<Knobs> all;
  for (int64_t mb : microBatches) {
    for (const std::string &adapter : adapters) {
      for (const std::string &weights : weights) {
        // Full fine-tuning trains fp32 masters of every weight.
        if (adapter == "full" && weights != "fp32") {
          continue;
        }
        for (const std::string &recompute : this->recompute) {
          for (const std::string &sharding : this->sharding) {
            Knobs k;
            k.weights = weights;
            k.adapter = adapter;
            k.recompute = recompute;
            k.sharding = sharding;
            if (sharding == "zero3-hpz") {
              k.hpzPartition = ranksPerNode;
            }
            k.microBatch = mb;
            k.accumulation = globalBatch / (mb * dataParallel);
            for (int64_t split : stages) {
              if (split == 1) {
                addOffloads(k, all);
              } else {
                addSplit(k, split, all);
              }
            }
          }
        }
      }
    }
  }
  return all;
}

namespace {

/// `--fix` keys: the knob's own name, or the recipe key people know, with
/// the recipe's spellings of the value.
struct FixedKnob {
  std::string knob;
  std::string value;
};

Expected<FixedKnob> parseFix(StringRef text) {
  auto [key, value] = text.split('=');
  key = key.trim();
  value = value.trim();
  if (key.empty() || value.empty()) {
    return createStringError("--fix expects key=value, got '" + text + "'");
  }
  std::string v = value.str();
  if (key == "quantization" || key == "weights") {
    v = llvm::StringSwitch<std::string>(value)
            .Case("none", "fp32")
            .Case("nf4-dq", "nf4-dq")
            .Default(v);
    return FixedKnob{"weights", v};
  }
  if (key == "adapter" && value == "qlora") {
    return createStringError("--fix adapter=qlora: fix adapter=lora and "
                             "weights=nf4 (or nf4-dq)");
  }
  if (key == "gradient_checkpointing" || key == "recompute") {
    v = llvm::StringSwitch<std::string>(value)
            .Cases({"true", "full"}, "full")
            .Cases({"false", "none"}, "none")
            .Default(v);
    return FixedKnob{"recompute", v};
  }
  if (key == "zero_stage") {
    if (value.size() != 1 || value[0] < '0' || value[0] > '3') {
      return createStringError("--fix zero_stage must be 0..3, got '" +
                               value + "'");
    }
    return FixedKnob{"sharding", value == "0" ? "ddp" : "zero" + v};
  }
  if (key == "fsdp_sharding_strategy" || key == "sharding") {
    v = llvm::StringSwitch<std::string>(value)
            .Case("NO_SHARD", "ddp")
            .Case("SHARD_GRAD_OP", "zero2")
            .Case("FULL_SHARD", "zero3")
            .Case("HYBRID_SHARD", "hybrid")
            .Default(v);
    return FixedKnob{"sharding", v};
  }
  if (key == "offload_param" || key == "offload" ||
      key == "fsdp_offload_params") {
    v = llvm::StringSwitch<std::string>(value)
            .Cases({"cpu", "param", "true"}, "on")
            .Cases({"none", "false"}, "off")
            .Default(v);
    return FixedKnob{"offload_param", v};
  }
  if (key == "offload_optimizer") {
    v = llvm::StringSwitch<std::string>(value)
            .Cases({"cpu", "true"}, "on")
            .Cases({"none", "false"}, "off")
            .Default(v);
    return FixedKnob{"offload_optimizer", v};
  }
  if (key == "enable_activation_offloading" ||
      key == "offload_activations") {
    v = llvm::StringSwitch<std::string>(value)
            .Cases({"true", "cpu"}, "on")
            .Cases({"false", "none"}, "off")
            .Default(v);
    return FixedKnob{"offload_activations", v};
  }
  if (key == "micro_batch_size" || key == "micro_batch") {
    return FixedKnob{"micro_batch", v};
  }
  if (key == "adapter") {
    return FixedKnob{"adapter", v};
  }
  if (key == "gradient_compression" || key == "compression") {
    return FixedKnob{"compression", v};
  }
  if (key == "pipeline_stages" || key == "split") {
    return FixedKnob{"split", value == "none" ? "1" : v};
  }
  return createStringError(
      "--fix " + key +
      ": not a knob (weights/quantization, adapter, recompute/"
      "gradient_checkpointing, sharding/zero_stage/fsdp_sharding_strategy, "
      "offload/offload_param, offload_optimizer, offload_activations/"
      "enable_activation_offloading, micro_batch/micro_batch_size, "
      "compression/gradient_compression, split/pipeline_stages)");
}

/// Narrows `values` to the one `fixed` names, checking it is a value the
/// knob can take here.
template <typename T>
Error pin(std::vector<T> &values, const T &value, StringRef knob,
          StringRef text) {
  if (!llvm::is_contained(values, value)) {
    return createStringError("--fix " + knob + "=" + text +
                             ": not a value this knob takes here");
  }
  values = {value};
  return Error::success();
}

Error applyFix(Space &space, const FixedKnob &fix) {
  if (fix.knob == "weights") {
    if (fix.value == "gptq" && !llvm::is_contained(space.weights, "gptq")) {
      return createStringError(
          "--fix weights=gptq: the recipe names no gptq_checkpoint (`tailor "
          "quantize MODEL.onnx --scheme gptq --calib DATA -o "
          "CKPT.safetensors` writes one)");
    }
    return pin(space.weights, fix.value, fix.knob, fix.value);
  }
  if (fix.knob == "adapter") {
    return pin(space.adapters, fix.value, fix.knob, fix.value);
  }
  if (fix.knob == "recompute") {
    double fraction = 0;
    StringRef value(fix.value);
    if (value.consume_front("budget-")) {
      if (value.getAsDouble(fraction) || fraction <= 0 || fraction > 1) {
        return createStringError("--fix recompute=" + fix.value +
                                 ": a budget is a fraction in (0, 1]");
      }
      space.recompute = {budgetKnob(fraction)};
      return Error::success();
    }
    return pin(space.recompute, fix.value, fix.knob, fix.value);
  }
  if (fix.knob == "sharding") {
    return pin(space.sharding, fix.value, fix.knob, fix.value);
  }
  if (fix.knob == "compression") {
    return pin(space.compression, fix.value, fix.knob, fix.value);
  }
  if (fix.knob == "split") {
    int64_t split = 0;
    if (StringRef(fix.value).getAsInteger(10, split) || split < 1) {
      return createStringError("--fix pipeline_stages must be a positive "
                               "integer or none, got '" + fix.value + "'");
    }
    return pin(space.stages, split, fix.knob, fix.value);
  }
  for (auto [knob, values] :
       {std::pair<const char *, std::vector<bool> *>{"offload_param",
                                                     &space.offloadParams},
        {"offload_optimizer", &space.offloadOptimizer},
        {"offload_activations", &space.offloadActivations}}) {
    if (fix.knob != knob) {
      continue;
    }
    if (fix.value != "on" && fix.value != "off") {
      return createStringError("--fix " + fix.knob + "=" + fix.value +
                               ": expected cpu/true or none/false");
    }
    return pin(*values, fix.value == "on", fix.knob, fix.value);
  }
  int64_t mb = 0;
  if (StringRef(fix.value).getAsInteger(10, mb) || mb < 1) {
    return createStringError("--fix micro_batch_size must be a positive "
                             "integer, got '" + fix.value + "'");
  }
  if (!llvm::is_contained(space.microBatches, mb)) {
    return createStringError(
        "--fix micro_batch_size=" + fix.value +
        ": the global batch of " + std::to_string(space.globalBatch) +
        " over " + std::to_string(space.dataParallel) +
        " rank(s) does not split into micro batches of that size");
  }
  space.microBatches = {mb};
  return Error::success();
}

} // namespace

Expected<Space> makeSpace(const TrainingRecipe &base,
                          const HardwareSpec &hardware, int64_t globalBatch,
                          const std::vector<std::string> &fixed) {
  Space space;
  space.dataParallel = hardware.ranks();
  // A layer split's data parallelism is its replicas: ranks / stages.
  Knobs given = knobsOf(base, hardware);
  space.globalBatch =
      globalBatch > 0 ? globalBatch
                      : base.microBatchSize * base.gradientAccumulationSteps *
                            (given.stages > 1 ? given.replicas
                                              : space.dataParallel);
  if (space.globalBatch % space.dataParallel != 0) {
    return createStringError(
        "the global batch of " + std::to_string(space.globalBatch) +
        " sequences does not split over " +
        std::to_string(space.dataParallel) + " ranks");
  }
  const int64_t perRank = space.globalBatch / space.dataParallel;
  for (int64_t mb = 1; mb <= perRank && mb <= 64; mb *= 2) {
    if (perRank % mb == 0) {
      space.microBatches.push_back(mb);
    }
  }
  if (perRank % base.microBatchSize == 0 &&
      !llvm::is_contained(space.microBatches, base.microBatchSize)) {
    space.microBatches.push_back(base.microBatchSize);
    llvm::sort(space.microBatches);
  }
  space.weights = {"fp32", "bf16", "int8", "nf4", "nf4-dq"};
  // GPTQ needs its calibrated checkpoint (`tailor quantize` writes it, the
  // one offline step that reads weights): a knob only when the recipe
  // names one.
  if (!base.gptqCheckpoint.empty()) {
    space.weights.push_back("gptq");
  }
  space.adapters = {"lora", "lora-fa", "full"};
  space.recompute = {"none", "selective", "full"};
  if (base.recomputePolicy == "budget" && base.activationMemoryBudget > 0 &&
      !llvm::is_contained(space.recompute,
                          budgetKnob(base.activationMemoryBudget))) {
    space.recompute.push_back(budgetKnob(base.activationMemoryBudget));
  }
  space.sharding = {"ddp"};
  if (space.dataParallel > 1) {
    space.sharding = {"ddp", "zero1", "zero2", "zero3"};
    // ZeRO++'s hpZ keeps each node's part of ZeRO-3's gathered weights for
    // backward, on CPU ranks (its CUDA path has not run on a GPU yet), with
    // the recipe's reshard_after_forward it needs.
    if (hardware.nodes > 1 && hardware.gpus > 1 && !hardware.isCuda() &&
        !hardware.heterogeneous() && base.reshardAfterForward) {
      space.sharding.push_back("zero3-hpz");
      space.ranksPerNode = hardware.gpus;
    }
    if (hardware.nodes > 1) {
      space.sharding.push_back("hybrid");
    }
  }
  space.offloadParams = {false, true};
  space.offloadOptimizer = {false, true};
  space.offloadActivations = {false, true};
  // Gradient compression rewrites DDP's bucket all-reduces of several
  // ranks, on CPU ranks and not while they overlap backward (Recipe.cpp
  // refuses overlap_comm: true with it). Not offered on GPUs: top-k has
  // no CUDA kernels, and the others' have not run on a GPU yet
  // (CudaCompressionKernelsTest runs them on the SIMT emulator).
  if (space.dataParallel > 1 && !hardware.isCuda() &&
      base.overlapComm != "true") {
    llvm::append_values(space.compression, "powersgd", "acp-sgd", "topk",
                        "signsgd");
  }
  // ZeRO++'s int8 gathers and reduce-scatters, for the shardings that
  // gather weights or scatter gradients (Space::applies), on CPU ranks:
  // their CUDA kernels have run on the SIMT emulator only so far.
  if (space.dataParallel > 1 && !hardware.isCuda()) {
    llvm::append_values(space.compression, "qgz", "qgz-int4", "qwz", "qwz+qgz",
                        "qwz+qgz-int4");
  }
  // Layer split, on CPU ranks (the runtime's pipeline has no CUDA path
  // yet): any stage count that divides the ranks, the rest replicas of each
  // stage; mixed clusters balance a stage per rank, without replicas.
  if (space.dataParallel > 1 && !hardware.isCuda()) {
    for (int64_t split = 2; split <= space.dataParallel; ++split) {
      if (space.dataParallel % split == 0 &&
          (split == space.dataParallel || !hardware.heterogeneous())) {
        space.stages.push_back(split);
      }
    }
  }
  for (const std::string &text : fixed) {
    Expected<FixedKnob> fix = parseFix(text);
    if (!fix) {
      return fix.takeError();
    }
    if (Error error = applyFix(space, *fix)) {
      return error;
    }
  }
  return space;
}

//===----------------------------------------------------------------------===//
// Choosing
//===----------------------------------------------------------------------===//

std::vector<size_t> paretoFront(const std::vector<Evaluation> &all) {
  std::vector<size_t> fitting;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].fits) {
      fitting.push_back(i);
    }
  }
  // Fastest first; a point joins the front when it needs less memory than
  // every faster one.
  llvm::stable_sort(fitting, [&](size_t a, size_t b) {
    if (all[a].stepSeconds != all[b].stepSeconds) {
      return all[a].stepSeconds < all[b].stepSeconds;
    }
    return all[a].devicePeakBytes < all[b].devicePeakBytes;
  });
  std::vector<size_t> front;
  int64_t least = std::numeric_limits<int64_t>::max();
  for (size_t i : fitting) {
    if (all[i].devicePeakBytes < least) {
      front.push_back(i);
      least = all[i].devicePeakBytes;
    }
  }
  return front;
}

std::vector<size_t> nearestFits(const std::vector<Evaluation> &all,
                                const Knobs &given, size_t count) {
  std::vector<size_t> fitting;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].fits && !(all[i].knobs == given)) {
      fitting.push_back(i);
    }
  }
  llvm::stable_sort(fitting, [&](size_t a, size_t b) {
    int da = all[a].knobs.distance(given), db = all[b].knobs.distance(given);
    if (da != db) {
      return da < db;
    }
    return all[a].stepSeconds < all[b].stepSeconds;
  });
  if (fitting.size() > count) {
    fitting.resize(count);
  }
  return fitting;
}

std::string describeChange(const Knobs &from, const Knobs &to) {
  std::string text;
  for (const char *name : kKnobNames) {
    std::string a = knobValue(from, name), b = knobValue(to, name);
    if (a != b) {
      text += (text.empty() ? "" : ", ") + std::string(name) + " " + a +
              " -> " + b;
    }
  }
  return text.empty() ? "no change" : text;
}

//===----------------------------------------------------------------------===//
// The plot
//===----------------------------------------------------------------------===//

namespace {

/// Axis bounds and the mapping from data to pixels.
struct PlotFrame {
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1; // GiB, ms
  double left = 84, top = 40, width = 630, height = 380;
  double px(double gib) const { return left + (gib - x0) / (x1 - x0) * width; }
  double py(double ms) const {
    return top + height - (ms - y0) / (y1 - y0) * height;
  }
};

constexpr double kGiB = double(int64_t(1) << 30);

/// `text` with XML's special characters escaped.
std::string xmlEscaped(StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

PlotFrame frameFor(const std::vector<Evaluation> &all, int64_t budgetBytes) {
  PlotFrame f;
  double maxGib = budgetBytes > 0 ? budgetBytes / kGiB : 0, maxMs = 0;
  double minMs = std::numeric_limits<double>::max();
  for (const Evaluation &e : all) {
    if (!e.compiled()) {
      continue;
    }
    maxGib = std::max(maxGib, e.devicePeakBytes / kGiB);
    maxMs = std::max(maxMs, e.stepSeconds * 1e3);
    minMs = std::min(minMs, e.stepSeconds * 1e3);
  }
  if (maxMs <= 0) {
    minMs = 0;
    maxMs = 1;
  }
  f.x1 = maxGib > 0 ? maxGib * 1.08 : 1;
  f.y0 = std::max(0.0, minMs - (maxMs - minMs) * 0.08);
  f.y1 = maxMs + (maxMs - minMs) * 0.08 + 1e-9;
  return f;
}

void plotAxes(llvm::raw_ostream &os, const PlotFrame &f) {
  os << llvm::format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                     "height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n",
                     f.left, f.top, f.width, f.height);
  for (int i = 0; i <= 5; ++i) {
    double gib = f.x0 + (f.x1 - f.x0) * i / 5;
    double ms = f.y0 + (f.y1 - f.y0) * i / 5;
    os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                       "text-anchor=\"middle\">%.1f</text>\n",
                       f.px(gib), f.top + f.height + 16, gib);
    os << llvm::format(ms >= 100 ? "<text x=\"%.1f\" y=\"%.1f\" "
                                   "font-size=\"11\" "
                                   "text-anchor=\"end\">%.0f</text>\n"
                                 : "<text x=\"%.1f\" y=\"%.1f\" "
                                   "font-size=\"11\" "
                                   "text-anchor=\"end\">%.3g</text>\n",
                       f.left - 6, f.py(ms) + 4, ms);
  }
  os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
                     "text-anchor=\"middle\">device peak per rank "
                     "(GiB)</text>\n",
                     f.left + f.width / 2, f.top + f.height + 34);
  os << llvm::format("<text x=\"16\" y=\"%.1f\" font-size=\"12\" "
                     "text-anchor=\"middle\" transform=\"rotate(-90 16 "
                     "%.1f)\">predicted step (ms)</text>\n",
                     f.top + f.height / 2, f.top + f.height / 2);
}

} // namespace

std::string plotSvg(const std::vector<Evaluation> &all,
                    const std::vector<size_t> &front, int64_t budgetBytes,
                    StringRef title) {
  PlotFrame f = frameFor(all, budgetBytes);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" "
        "height=\"480\" font-family=\"sans-serif\">\n"
        "<rect width=\"760\" height=\"480\" fill=\"white\"/>\n";
  os << "<text x=\"380\" y=\"22\" font-size=\"14\" text-anchor=\"middle\">"
     << xmlEscaped(title) << "</text>\n";
  plotAxes(os, f);
  for (const Evaluation &e : all) {
    if (!e.compiled()) {
      continue;
    }
    os << llvm::format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" "
                       "fill=\"%s\" fill-opacity=\"0.6\"/>\n",
                       f.px(e.devicePeakBytes / kGiB),
                       f.py(e.stepSeconds * 1e3),
                       e.fits ? "#3b7dd8" : "#bbbbbb");
  }
  std::string points;
  for (size_t i : front) {
    points += llvm::formatv("{0:F1},{1:F1} ",
                            f.px(all[i].devicePeakBytes / kGiB),
                            f.py(all[i].stepSeconds * 1e3))
                  .str();
  }
  os << "<polyline points=\"" << points
     << "\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\"/>\n";
  if (!front.empty()) {
    const Evaluation &best = all[front.front()];
    os << llvm::format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" "
                       "fill=\"none\" stroke=\"#d62728\" "
                       "stroke-width=\"2\"/>\n",
                       f.px(best.devicePeakBytes / kGiB),
                       f.py(best.stepSeconds * 1e3));
  }
  if (budgetBytes > 0) {
    double x = f.px(budgetBytes / kGiB);
    os << llvm::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                       "y2=\"%.1f\" stroke=\"#2ca02c\" "
                       "stroke-dasharray=\"5,4\"/>\n"
                       "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                       "fill=\"#2ca02c\" text-anchor=\"end\">budget "
                       "%.1f GiB</text>\n",
                       x, f.top, x, f.top + f.height, x - 4, f.top + 14,
                       budgetBytes / kGiB);
  }
  os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                     "fill=\"#555\">grey: does not fit; blue: fits; red: "
                     "Pareto front, circled: fastest</text>\n",
                     f.left, f.top + f.height + 52);
  os << "</svg>\n";
  return text;
}

} // namespace tailor::explore
