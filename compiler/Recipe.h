//===- Recipe.h - the training recipe (YAML) --------------------*- C++ -*-===//
//
// What `tailor compile --recipe r.yaml key=value ...` reads: axolotl and
// torchtune style keys (../shared/FORMATS.md) for the adapter, the batch,
// the optimizer and the schedule. Unknown keys and bad values are errors
// that name the key, the file and the line.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_RECIPE_H
#define TAILOR_COMPILER_RECIPE_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tailor {

struct TrainingRecipe {
  // --- adapter
  std::string adapter = "lora"; // lora, lora-fa, full
  int64_t loraR = 8;
  double loraAlpha = 16.0;
  double loraDropout = 0.0;
  std::vector<std::string> loraTargetModules = {"q_proj", "v_proj"};
  std::string loraLayers; // "0-3,6"; empty: all
  bool useRslora = false;
  /// Whether the output projection shares the embedding table: auto
  /// (compare sampled values), always (a layer named lm_head) or never.
  std::string tieWordEmbeddings = "auto";
  /// Full fine-tuning: parameters to train ("all", or module names).
  std::vector<std::string> trainableModules = {"all"};
  // --- quantization of frozen weights (tailor-quantize)
  /// "" (none), nf4, int8, gptq, bf16 or fp16. `adapter: qlora` means lora
  /// with nf4 unless `quantization` says otherwise.
  std::string quantization;
  bool qlora = false;
  bool doubleQuant = true;
  int64_t quantBlockSize = 64;
  std::vector<std::string> quantizeModules = {"all-linear"};
  std::vector<std::string> quantizeSkipModules = {"lm_head"};
  int64_t gptqBits = 4;
  int64_t gptqGroupSize = 128;
  bool gptqActOrder = false;
  /// The checkpoint `tailor quantize` wrote (its settings win).
  std::string gptqCheckpoint;
  double int8OutlierThreshold = 0.0;

  /// The scheme tailor-quantize applies, or "" for none.
  std::string quantizationScheme() const {
    if (!quantization.empty()) {
      return quantization == "none" ? "" : quantization;
    }
    return qlora ? "nf4" : "";
  }
  // --- batch
  int64_t sequenceLen = 512;
  int64_t microBatchSize = 1;
  int64_t gradientAccumulationSteps = 1;
  // --- precision: "bf16" (tensor cores, f32 accumulation and master
  // weights), "fp16" (the same with IEEE half GEMMs and dynamic loss
  // scaling), "fp32", or "" for the target's default (bf16 on GPUs)
  std::string mixedPrecision;
  /// Dynamic loss scaling (fp16 only), named as torch.amp.GradScaler's
  /// arguments: the first scale, its growth after `growthInterval` steps
  /// without an inf/NaN gradient, and its back-off after one with.
  double initScale = 65536.0;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  /// Whether the run scales its loss (`mixed_precision: fp16`).
  bool lossScaling() const { return mixedPrecision == "fp16"; }
  // --- optimizer and schedule
  std::string optimizer = "adamw"; // adamw, sgd
  double learningRate = 2e-4;
  std::string lrScheduler = "constant"; // constant, linear, cosine
  int64_t warmupSteps = 0;
  int64_t maxSteps = 1000;
  double weightDecay = 0.0;
  double adamBeta1 = 0.9;
  double adamBeta2 = 0.999;
  double adamEpsilon = 1e-8;
  double momentum = 0.0;
  bool nesterov = false;
  double maxGradNorm = 1.0;
  // --- recomputation (tailor-recompute): none, full, selective or budget.
  /// `gradient_checkpointing: true|false|selective`, or a budget.
  std::string recomputePolicy = "none";
  /// `activation_memory_budget`: the activation peak as a fraction of no
  /// recomputation's (PyTorch's knob), in (0, 1]; 0 when not given.
  double activationMemoryBudget = 0;
  /// `activation_memory_budget_gib`: the activation peak in GiB; 0 when
  /// not given.
  double activationMemoryBudgetGib = 0;
  /// `device_memory_budget_gib`: the most device memory the plan may take
  /// (0: the card's); over it, compile offloads the frozen parameters if
  /// the recipe did not, and refuses with the excess if that is not enough.
  double deviceMemoryBudgetGib = 0;
  // --- data parallelism (tailor-shard), in DeepSpeed's and FSDP's words.
  /// ddp, zero1, zero2, zero3 or hybrid: from `zero_stage: 0..3` or
  /// `fsdp_sharding_strategy: NO_SHARD|SHARD_GRAD_OP|FULL_SHARD|
  /// HYBRID_SHARD`; ddp when neither is given.
  std::string sharding = "ddp";
  /// What `zero_stage` and `fsdp_sharding_strategy` chose ("" when not
  /// given); `sharding` is resolved from them.
  std::string zeroStageSharding;
  std::string fsdpSharding;
  /// `ddp_bucket_cap_mb`: most MiB of gradients one all-reduce carries.
  double ddpBucketCapMb = 25;
  /// `reshard_after_forward` (FSDP2): free gathered parameters after the
  /// forward (zero3).
  bool reshardAfterForward = true;
  /// `zero_quantized_weights` (DeepSpeed's ZeRO++ qwZ): zero3's weight
  /// gathers send int8 blocks (tailor-quantize-gathers).
  bool zeroQuantizedWeights = false;
  /// `zero_quantized_gradients` (DeepSpeed's ZeRO++ qgZ): zero2's, zero3's
  /// and hybrid's (within a node) gradient reduce-scatters send int8 blocks
  /// through an all-to-all (tailor-quantize-reductions).
  bool zeroQuantizedGradients = false;
  /// `zero_hpz_partition_size` (DeepSpeed's ZeRO++ hpZ): with more than 1,
  /// each rank keeps its node's part of zero3's forward gathers and
  /// backward gathers within the node (tailor-hierarchical-partition).
  /// Ranks of the secondary group; 1: off. Compile checks it divides the
  /// world and equals the hardware's ranks per node.
  int64_t zeroHpzPartitionSize = 1;
  /// `zero_quantized_gradients_bits`: the width of qgZ's wire codes, 8
  /// (int8, the default) or 4 (int4, the ZeRO++ paper's), apart from the
  /// weight gathers' (always int8); needs `zero_quantized_gradients`.
  int64_t zeroQuantizedGradientsBits = 8;
  /// The wire format of qgZ's chunks (runtime/quant/Wire.h): int8 or int4.
  std::string quantizedGradientsFormat() const {
    return zeroQuantizedGradientsBits == 4 ? "int4" : "int8";
  }
  /// `overlap_comm` (DeepSpeed): gradient collectives run on a
  /// communication stream while the rest of backward computes
  /// (tailor-overlap-collectives): "true", "false", or "auto" (on GPUs,
  /// whose NCCL runs beside the compute kernels; not on CPU ranks, whose
  /// communication takes the cores compute would use).
  /// `overlap_buckets_in_flight` bounds how many buckets are in flight.
  std::string overlapComm = "auto";
  /// Offload (tailor-offload): `offload_param: cpu` (DeepSpeed) or
  /// `fsdp_offload_params: true` (FSDP) put the frozen parameters in host
  /// memory; `offload_optimizer: cpu` (DeepSpeed) puts AdamW's state in
  /// host memory and runs its update there; `enable_activation_offloading`
  /// (torchtune) keeps the saved activations in host memory between
  /// forward and backward.
  std::string offloadParam = "none";
  bool fsdpOffloadParams = false;
  std::string offloadOptimizer = "none";
  bool activationOffloading = false;
  bool offloadParams() const {
    return offloadParam == "cpu" || fsdpOffloadParams;
  }
  int64_t overlapBucketsInFlight = 2;
  /// Layer split (tailor-split-layers): `pipeline_stages` consecutive
  /// groups of layers on as many ranks (1: none), or `device_map: auto`
  /// (Hugging Face) for one stage per rank of the cluster;
  /// `pipeline_schedule: 1f1b|naive` orders each step's micro-batches
  /// (`gradient_accumulation_steps`) over the stages.
  int64_t pipelineStages = 1;
  std::string deviceMap;
  std::string pipelineSchedule = "1f1b";
  // --- gradient compression (tailor-compress-gradients), in the words of
  // PyTorch's PowerSGD hook (PowerSGDState).
  /// `gradient_compression: none|powersgd|acp-sgd|topk|signsgd`.
  std::string gradientCompression = "none";
  /// `compression_ratio` (topk): the fraction of each bucket's entries a
  /// rank sends, in (0, 1].
  double compressionRatio = 0.01;
  /// `compression_rank` (matrix_approximation_rank).
  int64_t compressionRank = 1;
  /// `compression_start_step` (start_powerSGD_iter): uncompressed steps
  /// first.
  int64_t compressionStartStep = 1000;
  /// `compression_error_feedback` (use_error_feedback).
  bool compressionErrorFeedback = true;
  /// `compression_warm_start` (warm_start).
  bool compressionWarmStart = true;
  /// `compression_min_rate` (min_compression_rate).
  double compressionMinRate = 2.0;
  // --- run
  int64_t seed = 42;
  int64_t saveSteps = 0;
  int64_t loggingSteps = 1;
  bool shuffle = true;
  // --- data (runtime/train/DataLoader.h)
  /// `sample_packing`: unset lets the data decide (JSONL examples one per
  /// padded sequence, binary token streams cut); false asks for one
  /// example per sequence; true packs examples into sequences, with
  /// per-example position ids and document masking (tailor-pack-sequences).
  std::optional<bool> samplePacking;
  int64_t padTokenId = 0;
  /// Examples held out for validation: 0 none, a fraction in (0, 1), or a
  /// whole count >= 1.
  double valSetSize = 0;
  /// Validation loss every this many steps and at the end; 0: at the end.
  int64_t evalSteps = 0;
  std::string baseModel;
  /// The recipe text and overrides as given, kept in the plan.
  std::string text;
  /// The keys the file or an override set (the rest are defaults).
  std::set<std::string> givenKeys;
};

/// Reads a recipe file (may be empty: defaults) and applies `key=value`
/// overrides in order.
llvm::Expected<TrainingRecipe>
loadRecipe(llvm::StringRef path, const std::vector<std::string> &overrides);

/// Which keys of `recipe` a generation plan (`tailor compile --task
/// generate --recipe R.yaml`) reads: the weight format (quantization,
/// load_in_4bit / load_in_8bit, adapter: qlora, double_quant,
/// quant_block_size, quantize_modules, quantize_skip_modules, gptq_*,
/// int8_outlier_threshold). Keys of the training run (the LoRA shape, the
/// optimizer, the schedule, the batch, the data, recomputation, seeds,
/// logging) are returned in `ignored`: the same recipe that trained the
/// model compiles its generation plan, and the caller says which it
/// ignores. Keys that change how a plan is placed or computed, which a
/// generation plan (one rank, fp32) cannot honour (sharding,
/// offload, layer split, gradient compression, device budgets,
/// mixed_precision: bf16, `adapter: full`), are an error naming them.
llvm::Error checkGenerationRecipe(const TrainingRecipe &recipe,
                                  std::vector<std::string> &ignored);

/// Records the recipe on the module (`tg.training`) for the plan writer;
/// fails when the recipe does not fit the model's vocabulary of
/// `vocabSize` tokens (0: unknown).
llvm::Error attachRecipe(mlir::ModuleOp module, const TrainingRecipe &recipe,
                         int64_t vocabSize);

} // namespace tailor

#endif // TAILOR_COMPILER_RECIPE_H
