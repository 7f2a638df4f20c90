//===- Pipelines.cpp - tailor's pass pipelines ----------------------------===//

#include "compiler/Pipelines.h"

#include "compiler/Hardware.h"
#include "compiler/Recipe.h"
#include "passes/generate/Passes.h"
#include "passes/graph/Passes.h"
#include "passes/memory/Passes.h"
#include "passes/parallel/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace tailor {

void buildGraphPipeline(mlir::OpPassManager &pm, llvm::StringRef tiePolicy) {
  mlir::OpPassManager &fn = pm.nest<mlir::func::FuncOp>();
  // --- Clean the literal import: fold reshape chains and no-op casts, merge
  // duplicate constants, so the patterns below see one canonical form.
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(mlir::createCSEPass());
  // --- Raise, innermost patterns first: activations and norms do not depend
  // on anything; linear layers before rope and attention, whose patterns
  // start from projections; embeddings last, to pair them with a tied
  // lm_head.
  fn.addPass(graph::createRaiseActivationsPass());
  fn.addPass(graph::createRaiseNormsPass());
  fn.addPass(graph::createRaiseLinearPass());
  fn.addPass(graph::createRaiseRopePass());
  fn.addPass(graph::createRaiseAttentionPass());
  fn.addPass(graph::createRaiseEmbeddingPass());
  // --- Drop what the raising left unused (mask constants, rotate-half
  // slices).
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(mlir::createCSEPass());
  // --- What raising left unannotated inside a layer (residual adds, gating
  // products) joins its layer: recomputation reasons per layer.
  fn.addPass(graph::createAssignLayersPass());
  // --- An exporter's copy of a tied embedding reads the table instead.
  graph::TieEmbeddingsPassOptions tie;
  tie.policy = tiePolicy.str();
  pm.addPass(graph::createTieEmbeddingsPass(tie));
}

ScheduleOptions scheduleOptionsFor(const HardwareSpec &hardware,
                                   llvm::StringRef precision, int64_t threads) {
  ScheduleOptions options;
  options.threads = threads;
  options.backend = hardware.backend;
  options.hardware = hardware.name;
  options.sm = hardware.sm;
  options.deviceMemory = static_cast<int64_t>(hardware.memoryBytes);
  options.worldSize = hardware.ranks();
  options.ranksPerNode = hardware.gpus;
  options.heterogeneous = hardware.heterogeneous();
  if (hardware.isCuda()) {
    // bf16 tensor cores from sm_80; before them (the T4) fp16, which
    // training must ask for with its loss scaling (checkTrainingPrecision).
    const char *half = hardware.sm >= 80 ? "bf16" : "fp16";
    options.precision = precision.empty() ? half : precision.str();
    options.gemmWorkspace = (hardware.sm >= 90 ? 32 : 4) * (int64_t(1) << 20);
  } else {
    options.precision = precision.empty() ? "fp32" : precision.str();
  }
  return options;
}

/// lower-to-sched's options for `options`.
static memory::LowerToSchedPassOptions lowerOptions(const ScheduleOptions &options) {
  memory::LowerToSchedPassOptions lower;
  lower.threads = options.threads;
  lower.backend = options.backend;
  lower.hardware = options.hardware;
  lower.sm = options.sm;
  lower.precision = options.precision;
  lower.deviceMemory = options.deviceMemory;
  lower.gemmWorkspace = options.gemmWorkspace;
  return lower;
}

void buildSchedulePipeline(mlir::OpPassManager &pm,
                           const ScheduleOptions &options) {
  buildGraphPipeline(pm);
  // --- Plan one rank: kernel selection, liveness, arena offsets.
  pm.addPass(memory::createLowerToSchedPass(lowerOptions(options)));
}

void buildLowerToSchedule(mlir::OpPassManager &pm,
                          const ScheduleOptions &options) {
  pm.addPass(memory::createLowerToSchedPass(lowerOptions(options)));
}

/// tailor-quantize with `recipe`'s weight-format keys, storing the chosen
/// weights as `scheme`.
static void addQuantizePass(mlir::OpPassManager &pm,
                            const TrainingRecipe &recipe,
                            const std::string &scheme) {
  graph::QuantizePassOptions quantize;
  quantize.scheme = scheme;
  auto join = [](const std::vector<std::string> &names) {
    std::string list;
    for (const std::string &name : names) {
      list += (list.empty() ? "" : ",") + name;
    }
    return list;
  };
  quantize.modules = join(recipe.quantizeModules);
  quantize.skip = join(recipe.quantizeSkipModules);
  quantize.blockSize = recipe.quantBlockSize;
  quantize.doubleQuant = recipe.doubleQuant;
  quantize.bits = recipe.gptqBits;
  quantize.groupSize = recipe.gptqGroupSize;
  quantize.actOrder = recipe.gptqActOrder;
  quantize.outlierThreshold = recipe.int8OutlierThreshold;
  quantize.checkpoint = recipe.gptqCheckpoint;
  pm.addPass(graph::createQuantizePass(quantize));
}

void buildGenerationPipeline(mlir::OpPassManager &pm,
                             const ScheduleOptions &options,
                             const GenerationOptions &generation) {
  if (!generation.raised) {
    buildGraphPipeline(pm, generation.weights
                               ? generation.weights->tieWordEmbeddings
                               : "auto");
  }
  // --- Frozen weights stored as the recipe says (NF4, int8, GPTQ, 16-bit),
  // read through tg.dequantize; a bound adapter's LoRA weights stay f32
  // beside them, unmerged, as PEFT runs LoRA on a quantized base.
  if (generation.weights) {
    std::string scheme = generation.weights->quantizationScheme();
    if (!scheme.empty()) {
      addQuantizePass(pm, *generation.weights, scheme);
    }
  }
  // --- The forward graph at max_seq_len becomes one token's step and a
  // chunk of prompt tokens' step: positions read at run time, attention
  // over a KV cache.
  generate::BuildDecodePassOptions decode;
  decode.eosTokenIds = generation.eosTokenIds;
  decode.prefillChunk = generation.prefillChunk;
  pm.addPass(generate::createBuildDecodePass(decode));
  // --- Plan the entries; the caches get the kv_cache arena, which both
  // entries read and write.
  memory::LowerToSchedPassOptions lower = lowerOptions(options);
  lower.functionName = generation.prefillChunk > 1 ? "decode,prefill" : "decode";
  pm.addPass(memory::createLowerToSchedPass(lower));
}

std::string frozenWeightScheme(const TrainingRecipe &recipe,
                               const ScheduleOptions &options) {
  std::string scheme = recipe.quantizationScheme();
  bool dense = scheme.empty() && recipe.adapter != "full" &&
               recipe.quantization != "none";
  if (dense && (options.precision == "bf16" || options.precision == "fp16")) {
    scheme = options.precision;
  }
  return scheme;
}

/// Whether the CPU emulates `options.precision`'s GEMMs
/// (tailor-emulate-half): fp16 and bf16 CPU plans.
static bool emulatesHalfGemms(const ScheduleOptions &options) {
  return options.backend == "cpu" &&
         (options.precision == "fp16" || options.precision == "bf16");
}

llvm::Error checkTrainingPrecision(const TrainingRecipe &recipe,
                                   const ScheduleOptions &options) {
  const std::string &precision = options.precision;
  if (options.backend == "cuda" && options.sm < 80 && precision == "fp16" &&
      !recipe.lossScaling()) {
    return llvm::createStringError(
        options.hardware + " is sm_" + std::to_string(options.sm) +
        ", whose tensor cores have no bf16: train with 'mixed_precision: "
        "fp16' (or 'fp16: true'), which scales the loss as GradScaler does");
  }
  if (!emulatesHalfGemms(options)) {
    return llvm::Error::success();
  }
  std::string scheme = recipe.quantizationScheme();
  if (!scheme.empty() && scheme != precision) {
    return llvm::createStringError(
        "mixed_precision: " + precision + " with 'quantization: " + scheme +
        "' is not supported yet on the CPU backend (frozen weights are "
        "stored as " + precision + ", or f32 with 'quantization: none')");
  }
  return llvm::Error::success();
}

/// Placement after recomputation: offload (frozen parameters, AdamW and
/// its state, saved activations in host memory), then the overlap of
/// collectives and host copies with compute.
static void addPlacementPasses(mlir::OpPassManager &pm,
                               const TrainingRecipe &recipe,
                               const ScheduleOptions &options,
                               int64_t bucketBytes) {
  // --- Offload: frozen parameters in host memory, copied in to be read;
  // AdamW's state in host memory, updated there; saved activations in host
  // memory between forward and backward.
  // After recomputation, so the forward ops it replays in backward read
  // backward's copy and the forward's dies with the forward.
  bool offloads = recipe.offloadParams() || recipe.offloadOptimizer == "cpu" ||
                  recipe.activationOffloading;
  if (offloads) {
    parallel::OffloadPassOptions offload;
    offload.params = recipe.offloadParams();
    offload.optimizer = recipe.offloadOptimizer == "cpu";
    offload.activations = recipe.activationOffloading;
    offload.bucketBytes = bucketBytes;
    pm.addPass(parallel::createOffloadPass(offload));
  }
  // --- Gradient collectives on the communication stream, overlapping the
  // rest of backward (DDP's all-reduces move into the step when it is one
  // micro-batch).
  bool overlap = recipe.overlapComm == "true" ||
                 (recipe.overlapComm == "auto" && options.backend == "cuda" &&
                  recipe.gradientCompression == "none");
  if ((options.worldSize > 1 || offloads) && overlap) {
    parallel::OverlapCollectivesPassOptions overlap;
    overlap.inFlight = recipe.overlapBucketsInFlight;
    // (Not on a mixed cluster: its ranks run train_step unequally often.)
    overlap.moveDdpReductions =
        recipe.gradientAccumulationSteps == 1 && !options.heterogeneous;
    pm.addPass(parallel::createOverlapCollectivesPass(overlap));
    // --- Optimizer offload: the host updates start during backward, a
    // layer at a time, once that layer's copies to the host are made.
    if (recipe.offloadOptimizer == "cpu" && overlap.moveDdpReductions) {
      pm.addPass(parallel::createOverlapHostUpdatesPass());
    }
  }
}

/// Planning of one pipeline stage (tailor-split-layers made it a nested
/// module). No recomputation pass: every stage but the last already keeps
/// only its input and replays its forward (Recipe.cpp refuses a policy).
static void addStagePasses(mlir::OpPassManager &stage,
                           const TrainingRecipe &recipe,
                           const ScheduleOptions &options, bool schedule) {
  if (!schedule) {
    return;
  }
  memory::LowerToSchedPassOptions lower = lowerOptions(options);
  lower.deviceBudget = static_cast<int64_t>(
      recipe.deviceMemoryBudgetGib * double(int64_t(1) << 30));
  stage.addPass(memory::createLowerToSchedPass(lower));
}

/// Layer split: the step cut into stages (each on world / stages ranks, its
/// data-parallel replicas, which average its gradients), then each stage
/// planned on its own.
static void addPipelinePasses(mlir::OpPassManager &pm,
                              const TrainingRecipe &recipe,
                              const ScheduleOptions &options, int64_t stages,
                              bool schedule) {
  parallel::SplitLayersPassOptions split;
  split.stages = stages;
  split.schedule = recipe.pipelineSchedule;
  split.microBatches = recipe.gradientAccumulationSteps;
  split.worldSize = options.worldSize;
  split.bucketBytes =
      static_cast<int64_t>(recipe.ddpBucketCapMb * double(int64_t(1) << 20));
  pm.addPass(parallel::createSplitLayersPass(split));
  addStagePasses(pm.nest<mlir::ModuleOp>(), recipe, options, schedule);
}

/// The recipe's adapter (LoRA and its variants, or the trainable modules
/// of full fine-tuning) inserted into the forward.
static void addAdapterPass(mlir::OpPassManager &pm,
                           const TrainingRecipe &recipe) {
  graph::InsertLoraPassOptions lora;
  lora.variant = recipe.adapter;
  std::string targets;
  for (const std::string &name : recipe.adapter == "full"
                                     ? recipe.trainableModules
                                     : recipe.loraTargetModules) {
    targets += (targets.empty() ? "" : ",") + name;
  }
  lora.targets = targets;
  lora.layers = recipe.loraLayers;
  lora.rank = recipe.loraR;
  lora.alpha = recipe.loraAlpha;
  lora.dropout = recipe.loraDropout;
  lora.rslora = recipe.useRslora;
  pm.addPass(graph::createInsertLoraPass(lora));
}

/// The step split into train_step and optimizer_step: the recipe's
/// optimizer, schedule, clipping and accumulation.
static void addOptimizerPass(mlir::OpPassManager &pm,
                             const TrainingRecipe &recipe) {
  graph::OptimizerPassOptions optimizer;
  optimizer.optimizer = recipe.optimizer;
  optimizer.learningRate = recipe.learningRate;
  optimizer.beta1 = recipe.adamBeta1;
  optimizer.beta2 = recipe.adamBeta2;
  optimizer.epsilon = recipe.adamEpsilon;
  optimizer.weightDecay = recipe.weightDecay;
  optimizer.momentum = recipe.momentum;
  optimizer.nesterov = recipe.nesterov;
  optimizer.maxGradNorm = recipe.maxGradNorm;
  optimizer.scheduler = recipe.lrScheduler;
  optimizer.warmupSteps = recipe.warmupSteps;
  optimizer.totalSteps = recipe.maxSteps;
  optimizer.accumulationSteps = recipe.gradientAccumulationSteps;
  optimizer.lossScaling = recipe.lossScaling();
  pm.addPass(graph::createOptimizerPass(optimizer));
}

void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingRecipe &recipe,
                           const ScheduleOptions &options, bool schedule,
                           bool raised) {
  if (!raised) {
    buildGraphPipeline(pm, recipe.tieWordEmbeddings);
  }
  // --- Sample packing: per-example positions (a position_ids input) and
  // document masking in every attention, before anything reads positions.
  if (recipe.samplePacking.value_or(false)) {
    pm.addPass(graph::createPackSequencesPass());
  }
  // --- Adapters (or trainable weights), then the loss on the logits.
  addAdapterPass(pm, recipe);
  // --- Frozen weights stored quantized (QLoRA's NF4, int8, GPTQ, 16-bit).
  // With bf16 compute, frozen linear weights are kept in bf16 (as Hugging
  // Face loads them in bf16): half the bytes, read by the same tensor-core
  // GEMMs (on the CPU: the values the bf16 GEMMs round them to); trainable
  // weights stay f32 masters. With fp16 they are kept in fp16 likewise.
  std::string scheme = frozenWeightScheme(recipe, options);
  if (!scheme.empty()) {
    addQuantizePass(pm, recipe, scheme);
  }
  pm.addPass(graph::createAddLossPass());
  // --- A validation loss (val_set_size, eval_steps): a forward-only copy
  // without dropout, planned as its own entry.
  if (recipe.valSetSize > 0 || recipe.evalSteps > 0) {
    pm.addPass(graph::createAddEvalStepPass());
  }
  // --- Backward pass; fold the transposes it stacks on pre-transposed
  // weights before the optimizer splits the step.
  // With fp16, GradScaler's scaled loss: the backward starts from a
  // run-time `loss_scale` (the trainer's, runtime/train/LossScaler.h).
  graph::AutodiffPassOptions autodiff;
  autodiff.lossScale = recipe.lossScaling();
  pm.addPass(graph::createAutodiffPass(autodiff));
  pm.nest<mlir::func::FuncOp>().addPass(mlir::createCanonicalizerPass());
  pm.nest<mlir::func::FuncOp>().addPass(mlir::createCSEPass());
  addOptimizerPass(pm, recipe);
  pm.nest<mlir::func::FuncOp>().addPass(mlir::createCanonicalizerPass());
  pm.nest<mlir::func::FuncOp>().addPass(mlir::createCSEPass());
  // --- fp16 or bf16 on the CPU: every GEMM of the finished step (forward,
  // backward, LoRA) computes as 16-bit tensor cores do; the rest stays f32.
  // (CUDA plans compute bf16 on the tensor cores themselves.)
  if (emulatesHalfGemms(options)) {
    graph::EmulateHalfPassOptions half;
    half.format = options.precision;
    pm.addPass(graph::createEmulateHalfPass(half));
  }
  // --- Layer split: one nested module per pipeline stage, each planned as
  // its rank's program (the rest of this pipeline, per stage).
  int64_t stages = recipe.deviceMap == "auto" ? options.worldSize
                                              : recipe.pipelineStages;
  if (stages > 1) {
    addPipelinePasses(pm, recipe, options, stages, schedule);
    return;
  }
  // --- Data parallelism: what the ranks share (gradients averaged over the
  // world for ddp), recorded on the module for planning.
  parallel::ShardPassOptions shard;
  shard.strategy = recipe.sharding;
  shard.worldSize = options.worldSize;
  shard.ranksPerNode = options.ranksPerNode;
  shard.reshardAfterForward = recipe.reshardAfterForward;
  shard.bucketBytes =
      static_cast<int64_t>(recipe.ddpBucketCapMb * double(int64_t(1) << 20));
  // zero3's parameter reads wait until recomputation has placed its
  // replayed forward ops (tailor-gather-params, below).
  shard.deferParamReads = recipe.sharding == "zero3";
  pm.addPass(parallel::createShardPass(shard));
  // --- Gradient compression: DDP's bucket all-reduces become PowerSGD's
  // after an uncompressed warm-up (refused where not built: Recipe.cpp).
  if (recipe.gradientCompression != "none") {
    parallel::CompressGradientsPassOptions compress;
    compress.method = recipe.gradientCompression;
    compress.rank = recipe.compressionRank;
    compress.ratio = recipe.compressionRatio;
    compress.startStep = recipe.compressionStartStep;
    compress.errorFeedback = recipe.compressionErrorFeedback;
    compress.warmStart = recipe.compressionWarmStart;
    compress.minCompressionRate = recipe.compressionMinRate;
    pm.addPass(parallel::createCompressGradientsPass(compress));
  }
  // --- Recomputation, last: a CSE after it would fold the clones back.
  memory::RecomputePassOptions recompute;
  recompute.policy = recipe.recomputePolicy;
  recompute.budgetFraction = recipe.activationMemoryBudget;
  recompute.budgetBytes = static_cast<int64_t>(
      recipe.activationMemoryBudgetGib * double(int64_t(1) << 30));
  pm.addPass(memory::createRecomputePass(recompute));
  if (recipe.sharding == "zero3") {
    parallel::GatherParamsPassOptions gather;
    gather.bucketBytes = shard.bucketBytes;
    gather.reshardAfterForward = recipe.reshardAfterForward;
    pm.addPass(parallel::createGatherParamsPass(gather));
    // ZeRO++'s hpZ: backward gathers within the node, from the parts of
    // the forward's gathers each rank kept (before qwZ, which then
    // quantizes only the forward's world-wide gathers).
    if (recipe.zeroHpzPartitionSize > 1) {
      parallel::HierarchicalPartitionPassOptions hpz;
      hpz.partitionSize = recipe.zeroHpzPartitionSize;
      pm.addPass(parallel::createHierarchicalPartitionPass(hpz));
    }
    // ZeRO++'s qwZ: the weight gathers send int8 blocks.
    if (recipe.zeroQuantizedWeights) {
      pm.addPass(parallel::createQuantizeGathersPass());
    }
  }
  // ZeRO++'s qgZ: the gradient reduce-scatters send int8 (or, with
  // zero_quantized_gradients_bits: 4, int4) blocks through an all-to-all.
  // One rank has no reduce-scatter (tailor-shard leaves it unsharded), so
  // nothing to quantize.
  if (recipe.zeroQuantizedGradients && options.worldSize > 1) {
    parallel::QuantizeReductionsPassOptions reductions;
    reductions.format = recipe.quantizedGradientsFormat();
    pm.addPass(parallel::createQuantizeReductionsPass(reductions));
  }
  addPlacementPasses(pm, recipe, options, shard.bucketBytes);
  // --- A cluster of mixed devices: each rank's micro-batches per step by
  // its predicted speed, once the step's work is final.
  if (options.heterogeneous) {
    parallel::BalanceRanksPassOptions balance;
    balance.accumulationSteps = recipe.gradientAccumulationSteps;
    balance.threads = options.threads;
    balance.precision = options.precision;
    pm.addPass(parallel::createBalanceRanksPass(balance));
  }
  if (!schedule) {
    return;
  }
  // --- Plan one rank: train_step and optimizer_step share the activation
  // arena; gradients and moments get arenas of their own; the device
  // arenas must fit the card and the recipe's budget.
  memory::LowerToSchedPassOptions lower = lowerOptions(options);
  lower.deviceBudget = static_cast<int64_t>(
      recipe.deviceMemoryBudgetGib * double(int64_t(1) << 30));
  pm.addPass(memory::createLowerToSchedPass(lower));
}

namespace {

constexpr const char *kHardwareHelp =
    "the target: a name from the hardware database (cpu, h100, 2xrtx3090, "
    "4xcpu, ...) or a hardware file";
constexpr const char *kPrecisionHelp =
    "fp32, bf16 or fp16 (empty: the recipe's mixed_precision, else the "
    "target's default)";
constexpr const char *kThreadsHelp =
    "CPU workers the plan sizes per-worker workspaces for";

/// Options of `tailor-graph-pipeline`.
struct GraphPipelineOptions
    : mlir::PassPipelineOptions<GraphPipelineOptions> {
  Option<std::string> tieEmbeddings{
      *this, "tie-embeddings",
      llvm::cl::desc("read a tied output projection from the embedding "
                     "table: auto, always or never (tie_word_embeddings)"),
      llvm::cl::init("auto")};
};

/// The target as `tailor compile --hardware` takes it: the options the
/// schedule and training pipelines share (`Derived` is the options struct,
/// as PassPipelineOptions wants).
template <typename Derived>
struct TargetOptions : mlir::PassPipelineOptions<Derived> {
  template <typename T>
  using Option = typename mlir::PassPipelineOptions<Derived>::template Option<T>;
  Option<std::string> hardware{*this, "hardware",
                               llvm::cl::desc(kHardwareHelp),
                               llvm::cl::init("cpu")};
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc(kPrecisionHelp),
                                llvm::cl::init("")};
  Option<int64_t> threads{*this, "threads", llvm::cl::desc(kThreadsHelp),
                          llvm::cl::init(8)};
};

/// Options of `tailor-schedule-pipeline`: the target.
struct SchedulePipelineOptions : TargetOptions<SchedulePipelineOptions> {};

/// Options of `tailor-training-pipeline`: the target, and the recipe keys as
/// `tailor compile`'s `key=value` overrides take them.
struct TrainingPipelineOptions : TargetOptions<TrainingPipelineOptions> {
  ListOption<std::string> recipe{
      *this, "recipe",
      llvm::cl::desc("recipe keys, key=value, comma-separated (as tailor "
                     "compile's overrides: adapter=qlora,lora_r=16,...)")};
  Option<bool> schedule{
      *this, "schedule",
      llvm::cl::desc("plan one rank after the training passes (false: stop "
                     "at the training step in tg)"),
      llvm::cl::init(true)};
};

/// Registers `arg` with options `Options`; `build` reports what it cannot
/// build (an unknown target, a bad recipe key) as an error of the pipeline.
template <typename Options>
void registerWithOptions(
    llvm::StringRef arg, llvm::StringRef description,
    std::function<llvm::Error(mlir::OpPassManager &, const Options &)> build) {
  mlir::registerPassPipeline(
      arg, description,
      [arg, build](mlir::OpPassManager &pm, llvm::StringRef text,
                   llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)>
                       errorHandler) -> mlir::LogicalResult {
        Options options;
        if (mlir::failed(options.parseFromString(text))) {
          return errorHandler(arg + ": cannot parse options '" + text + "'");
        }
        if (llvm::Error error = build(pm, options)) {
          return errorHandler(arg + ": " + llvm::toString(std::move(error)));
        }
        return mlir::success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)> handler) {
        handler(Options());
      });
}

/// The schedule options `options` names.
template <typename Options>
llvm::Expected<ScheduleOptions>
scheduleOptionsOf(const Options &options, llvm::StringRef precision = "") {
  llvm::Expected<HardwareSpec> hardware = resolveHardware(options.hardware);
  if (!hardware) {
    return hardware.takeError();
  }
  return scheduleOptionsFor(*hardware,
                            precision.empty() ? llvm::StringRef(
                                                    options.precision)
                                              : precision,
                            options.threads);
}

} // namespace

void registerTailorPipelines() {
  registerWithOptions<TrainingPipelineOptions>(
      "tailor-training-pipeline",
      "raise, add the recipe's adapter, loss, backward and optimizer, the "
      "memory and parallel passes it asks for, then plan one rank",
      [](mlir::OpPassManager &pm,
         const TrainingPipelineOptions &options) -> llvm::Error {
        llvm::Expected<ScheduleOptions> schedule = scheduleOptionsOf(options);
        if (!schedule) {
          return schedule.takeError();
        }
        llvm::Expected<TrainingRecipe> recipe = loadRecipe(
            "", std::vector<std::string>(options.recipe.begin(),
                                         options.recipe.end()));
        if (!recipe) {
          return recipe.takeError();
        }
        // The recipe's precision unless the target option gives one.
        if (options.precision.empty() && !recipe->mixedPrecision.empty()) {
          schedule = scheduleOptionsOf(options, recipe->mixedPrecision);
          if (!schedule) {
            return schedule.takeError();
          }
        }
        if (llvm::Error error = checkTrainingPrecision(*recipe, *schedule)) {
          return error;
        }
        buildTrainingPipeline(pm, *recipe, *schedule, options.schedule);
        return llvm::Error::success();
      });
  registerWithOptions<GraphPipelineOptions>(
      "tailor-graph-pipeline",
      "raise an imported ONNX graph to transformer-level tg ops",
      [](mlir::OpPassManager &pm,
         const GraphPipelineOptions &options) -> llvm::Error {
        const std::string &tie = options.tieEmbeddings;
        if (tie != "auto" && tie != "always" && tie != "never") {
          return llvm::createStringError(
              "tie-embeddings must be auto, always or never, got '" + tie +
              "'");
        }
        buildGraphPipeline(pm, tie);
        return llvm::Error::success();
      });
  registerWithOptions<SchedulePipelineOptions>(
      "tailor-schedule-pipeline",
      "raise, then plan one rank into a sched.program",
      [](mlir::OpPassManager &pm,
         const SchedulePipelineOptions &options) -> llvm::Error {
        llvm::Expected<ScheduleOptions> schedule = scheduleOptionsOf(options);
        if (!schedule) {
          return schedule.takeError();
        }
        buildSchedulePipeline(pm, *schedule);
        return llvm::Error::success();
      });
}

} // namespace tailor
