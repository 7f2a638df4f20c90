//===- Trainer.cpp - the training loop behind `tailor train` --------------===//

#include "runtime/train/Trainer.h"

#include "runtime/cpu/BlasCore.h"

#include "runtime/Timeline.h"

#include "runtime/MemoryCategory.h"
#include "runtime/Session.h"
#include "runtime/comm/Communicator.h"
#include "runtime/train/AtomicFile.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/PipelineSchedule.h"
#include "runtime/train/DataLoader.h"
#include "runtime/train/Progress.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstring>

namespace tailor::train {

namespace fb = tailor::plan;
namespace comm = runtime::comm;
using runtime::DType;
using runtime::LoadedPlan;
using runtime::Session;

namespace {

volatile std::sig_atomic_t stopRequested = 0;

void onStopSignal(int) { stopRequested = 1; }

/// Installs the stop handlers for SIGINT and SIGTERM; restores the old ones
/// when the run ends. The handler only sets a flag, so a second signal
/// during a checkpoint write is ignored until the loop looks again.
class SignalGuard {
public:
  explicit SignalGuard(bool install) : installed(install) {
    stopRequested = 0;
    if (!installed) {
      return;
    }
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = onStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &oldInt);
    sigaction(SIGTERM, &action, &oldTerm);
    // Progress piped into `head` must not kill a run: a closed pipe makes
    // the writes fail instead.
    struct sigaction ignore;
    std::memset(&ignore, 0, sizeof(ignore));
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &oldPipe);
  }
  ~SignalGuard() {
    if (installed) {
      sigaction(SIGINT, &oldInt, nullptr);
      sigaction(SIGTERM, &oldTerm, nullptr);
      sigaction(SIGPIPE, &oldPipe, nullptr);
    }
  }

private:
  bool installed;
  struct sigaction oldInt, oldTerm, oldPipe;
};

/// A plan binding the loop feeds or reads.
struct Slot {
  int buffer = -1;
  DType dtype = DType::F32;
  void *data = nullptr;
};

/// Finds the bindings of `entry` in `bindings`, checking each is one the
/// loop knows and has the shape and dtype it needs.
struct BindingRule {
  const char *name;
  bool required;
  std::vector<int64_t> shape;
  std::vector<DType> dtypes;
  Slot *slot;
};

std::string
bindEntry(const LoadedPlan &plan, const Session &session,
          const flatbuffers::Vector<flatbuffers::Offset<fb::Binding>> *bindings,
          int entry, const char *entryName, const char *what,
          std::vector<BindingRule> rules) {
  if (bindings) {
    for (const fb::Binding *binding : *bindings) {
      if (static_cast<int>(binding->entry()) != entry) {
        continue;
      }
      std::string name = binding->name()->str();
      BindingRule *rule = nullptr;
      for (BindingRule &candidate : rules) {
        if (name == candidate.name) {
          rule = &candidate;
        }
      }
      if (!rule) {
        return plan.name() + ": " + entryName + " " + what + " '" + name +
               "' is not one the trainer provides";
      }
      uint32_t buffer = binding->buffer();
      DType dtype = plan.bufferDType(buffer);
      std::vector<int64_t> shape = plan.bufferShape(buffer);
      bool dtypeOk = false;
      for (DType allowed : rule->dtypes) {
        dtypeOk |= allowed == dtype;
      }
      if (shape != rule->shape || !dtypeOk) {
        std::string expected = "[";
        for (size_t i = 0; i < rule->shape.size(); ++i) {
          expected += (i ? ", " : "") + std::to_string(rule->shape[i]);
        }
        return plan.name() + ": " + entryName + " " + what + " '" + name +
               "' must be " + runtime::dtypeName(rule->dtypes[0]) + expected +
               "], got " + runtime::dtypeName(dtype) + " of rank " +
               std::to_string(shape.size());
      }
      rule->slot->buffer = static_cast<int>(buffer);
      rule->slot->dtype = dtype;
      rule->slot->data = session.bufferData(buffer);
    }
  }
  for (const BindingRule &rule : rules) {
    if (rule.required && rule.slot->buffer < 0) {
      return plan.name() + ": " + entryName + " has no " + what + " '" +
             rule.name + "'";
    }
  }
  return "";
}

void writeInts(const Slot &slot, const int64_t *values, size_t count) {
  if (slot.dtype == DType::I64) {
    std::memcpy(slot.data, values, count * sizeof(int64_t));
    return;
  }
  auto *out = static_cast<int32_t *>(slot.data);
  for (size_t i = 0; i < count; ++i) {
    out[i] = static_cast<int32_t>(values[i]);
  }
}

void writeFloat(const Slot &slot, float value) {
  std::memcpy(slot.data, &value, sizeof(value));
}

float readScalar(const Slot &slot) {
  float value;
  std::memcpy(&value, slot.data, sizeof(value));
  return value;
}

class StepTracer;

class StepTracer;

} // namespace

void requestTrainingStop() { stopRequested = 1; }

int64_t dropoutSeed(uint64_t seed, int64_t step, int64_t micro) {
  uint64_t x = seed;
  for (uint64_t part :
       {static_cast<uint64_t>(step), static_cast<uint64_t>(micro)}) {
    x ^= part + 0x9e3779b97f4a7c15ull + (x << 6) + (x >> 2);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
  }
  return static_cast<int64_t>(x & INT64_MAX);
}

/// Everything one run holds: the plan bound to a session, the bindings the
/// loop feeds and reads, the data, the settings, and where the run stands.
struct TrainerRun {
  TrainOptions options;
  FILE *out;
  FILE *err;
  /// Where other ranks' (or a quiet run's) output goes; declared first so
  /// it outlives everything that may print.
  std::unique_ptr<FILE, int (*)(FILE *)> sink{nullptr, std::fclose};
  /// Where this process sits among the ranks, and the communicator the
  /// session and the loop share (declared before the session, which holds
  /// a pointer to it, so it outlives it); null on one rank.
  comm::LaunchInfo launch;
  std::unique_ptr<comm::Communicator> comm;
  int rank = 0, world = 1;
  std::shared_ptr<LoadedPlan> plan;
  std::unique_ptr<Session> session;
  const fb::Training *training = nullptr;
  int trainEntry = -1, optimizerEntry = -1;
  /// The plan's forward-only validation entry (tailor-add-eval-step), or -1:
  /// validation then runs train_step and clears the gradients it adds.
  int evalEntry = -1;
  int64_t microBatch = 0, sequenceLen = 0, accumulation = 1;
  /// This rank's first micro-batch in each global batch, and the global
  /// batch's micro-batches over every replica: rank x accumulation and
  /// accumulation x replicas, or on a cluster of mixed devices (plan 1.12)
  /// the sums of the ranks' own counts.
  int64_t firstMicro = 0, globalMicro = 1;
  Slot inputIds, labels, positionIds, seedSlot, loss, stepSlot, lr, gradNorm;
  /// train_step's `update_step`, optimizer_step's `step` (1.16: optimizer
  /// offload's host updates run during backward and compute the learning
  /// rate there).
  Slot trainStepSlot;
  /// fp16 plans (loss scaling, 1.13): train_step's `loss_scale`,
  /// optimizer_step's `inv_scale` and `found_inf`, and the scaler.
  Slot lossScale, inverseScale, foundInf;
  std::optional<LossScaler> scaler;
  Slot evalIds, evalLabels, evalPositions, evalLoss;
  /// An export's `attention_mask` input (optimum and hand-made exports
  /// take one), per entry: fed all ones. Every loader pads on the right
  /// and the models are causal, so no real token sees a pad and the pads'
  /// labels are -100: ones give the loss and gradients of the true mask.
  Slot attentionMask, evalAttentionMask, forwardAttentionMask;
  std::vector<int64_t> maskOnes;
  /// The gradient accumulators train_step adds into.
  std::vector<uint32_t> gradBuffers;
  CheckpointLayout layout;
  int64_t maxSteps = 0, saveSteps = 0, loggingSteps = 1, evalSteps = 0;
  int64_t stopAfter = -1;
  /// Null when the caller feeds each step's batch (stepWithBatch).
  std::unique_ptr<DataLoader> data, validation;
  /// The batch the caller fed for the step in progress: this rank's
  /// accumulation x micro-batch rows of sequence_len tokens (labels null:
  /// the ids, which the loss shifts).
  const int64_t *fedIds = nullptr, *fedLabels = nullptr;
  std::vector<int64_t> ids, targets;
  /// Each token's position within its example (sample packing's
  /// position_ids input); empty when the plan takes none.
  std::vector<int64_t> positions;
  /// Plans with copy steps (offload) report the bytes they move per step.
  bool hasCopies = false;
  /// A layer split's stage (plan 1.10): this rank's part, its forward entry
  /// (-1 on the last stage) and the inputs of both entries that differ
  /// from the plain step's.
  const fb::PipelineStage *pipeline = nullptr;
  int forwardEntry = -1;
  Slot forwardIds, forwardPositions, forwardSeed, forwardSlot, trainSlot;

  /// Where the run stands.
  TrainerState state;
  TrainResult result;
  /// Progress reporting, started by the first step or run (after any
  /// resume, so metrics.jsonl is cut at the right step).
  std::unique_ptr<Progress> progress;
  std::unique_ptr<StepTracer> tracer;
  /// Trainer::requestStop (any thread).
  std::atomic<bool> stop{false};

  explicit TrainerRun(const TrainOptions &options)
      : options(options), out(options.out), err(options.err) {}
  const std::string &name() const { return plan->name(); }
  /// Rank 0: the one that prints and writes.
  bool leader() const { return rank == 0; }
  /// Ranks that each train on their own data: every rank, but the stages
  /// of a layer split are one replica (plan 1.13: world / stages of them).
  int64_t replicas() const {
    return pipeline ? world / std::max(1, pipeline->stages()) : world;
  }
  /// Which of them this rank is part of: a layer split's ranks are
  /// stage-major, so replica j is ranks j, j + replicas, ...
  int64_t replica() const {
    return pipeline ? rank % std::max<int64_t>(1, replicas()) : rank;
  }
};

namespace {

using Run = TrainerRun;

std::string formatDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// Sums `count` values over the ranks, in place (nothing to do on one).
std::string sumOverRanks(Run &run, double *values, size_t count) {
  if (!run.comm) {
    return "";
  }
  return run.comm->allReduceHost(values, values, count, DType::F64,
                                 comm::ReduceOp::Sum);
}

/// Lets every rank learn whether any rank's part of `what` failed: a rank
/// that failed returns its own `problem`, the others an error saying that
/// another rank failed, so none goes on alone (rank 0 writes, the others
/// wait for it here).
std::string shareOutcome(Run &run, const std::string &problem,
                         const std::string &what) {
  double failed = problem.empty() ? 0 : 1;
  if (std::string error = sumOverRanks(run, &failed, 1); !error.empty()) {
    return problem.empty() ? error : problem;
  }
  if (!problem.empty()) {
    return problem;
  }
  if (failed > 0) {
    return what + " failed on another rank (its error says why)";
  }
  return "";
}

/// Checks the launch against the plan's world size and, on several ranks,
/// starts the communicator: MPI for CPU plans, NCCL for GPU plans. A plan
/// for one rank launched alone starts nothing (no MPI_Init).
std::string joinLaunch(Run &run) {
  // OpenBLAS's kernels are fixed before MPI starts threads that read the
  // environment the check sets for a moment (BlasCore.h).
  runtime::ensureBlasCoreMatchesCpu();
  int planWorld = run.plan->root().world_size();
  std::string launchText = comm::describeLaunch(run.launch);
  if (planWorld != run.world) {
    auto ranks = [](int n) {
      return std::to_string(n) + (n == 1 ? " rank" : " ranks");
    };
    std::string fix =
        planWorld == 1 ? "run it as a single process, or compile it for " +
                             ranks(run.world) + " (--hardware " +
                             std::to_string(run.world) + "xcpu, say)"
                       : "launch it with mpirun -np " +
                             std::to_string(planWorld) +
                             " (or torchrun --nproc-per-node " +
                             std::to_string(planWorld) +
                             " --no-python), or recompile it";
    return run.name() + " was compiled for " + ranks(planWorld) +
           " but launched on " + std::to_string(run.world) + " (" +
           launchText + "); " + fix;
  }
  if (run.world == 1) {
    return "";
  }
  const fb::Target *target = run.plan->root().target();
  bool gpu = target && target->backend() == fb::Backend::Cuda;
  std::string error;
  run.comm = gpu ? comm::createNcclCommunicator(run.launch, error)
                 : comm::createCpuCommunicator(run.launch, error);
  if (!run.comm) {
    return error;
  }
  return "";
}

/// Where this rank's micro-batches sit in each global batch: equal shares,
/// or each rank's own count on a cluster of mixed devices (the plan's
/// parallel ranks, tailor-balance-ranks), rank r after ranks 0..r-1.
void divideGlobalBatch(Run &run) {
  const fb::Parallel *parallel = run.plan->root().parallel();
  if (run.pipeline || !parallel || !parallel->ranks()) {
    run.firstMicro = firstMicroBatchOfRank(static_cast<int>(run.replica()),
                                           run.accumulation);
    run.globalMicro = run.accumulation * run.replicas();
    return;
  }
  run.firstMicro = 0;
  run.globalMicro = 0;
  for (uint32_t r = 0; r < parallel->ranks()->size(); ++r) {
    int64_t count = parallel->ranks()->Get(r)->micro_batches();
    if (static_cast<int>(r) < run.rank) {
      run.firstMicro += count;
    }
    if (static_cast<int>(r) == run.rank) {
      run.accumulation = count;
    }
    run.globalMicro += count;
  }
}

/// Loads the plan, binds it to a session and finds the two entries.
std::string openPlan(Run &run) {
  std::string error;
  if (!run.plan) {
    runtime::LoadOptions options;
    // A layer split's rank runs its own stage.
    options.rank = run.rank;
    options.worldSize = run.world;
    run.plan = LoadedPlan::load(run.options.planPath, options, error);
    if (!run.plan) {
      return error;
    }
  }
  if (std::string problem = joinLaunch(run); !problem.empty()) {
    return problem;
  }
  run.training = run.plan->root().training();
  int status = 0;
  run.session = Session::create(*run.plan, run.options.threads, error, status,
                                run.comm ? run.comm->rank() : 0);
  if (!run.session) {
    return error;
  }
  if (std::string problem = run.session->setCommunicator(run.comm.get());
      !problem.empty()) {
    return problem;
  }
  run.trainEntry = run.session->findEntry("train_step");
  run.optimizerEntry = run.session->findEntry("optimizer_step");
  run.evalEntry = run.session->findEntry("eval_step");
  run.pipeline = run.plan->root().pipeline();
  run.forwardEntry = run.session->findEntry("pipeline_forward");
  if (run.trainEntry < 0 || run.optimizerEntry < 0 || !run.training) {
    return run.name() + ": not a training plan (no " +
           (run.trainEntry < 0       ? "train_step entry"
            : run.optimizerEntry < 0 ? "optimizer_step entry"
                                     : "training section") +
           "); compile it with a recipe";
  }
  run.microBatch = run.training->micro_batch_size();
  run.sequenceLen = run.training->sequence_len();
  run.accumulation = std::max(1, run.training->gradient_accumulation_steps());
  if (run.microBatch <= 0 || run.sequenceLen <= 0) {
    return run.name() + ": micro_batch_size and sequence_len must be "
                        "positive";
  }
  divideGlobalBatch(run);
  return "";
}

/// Binds the entries' inputs and outputs, and finds the accumulators.
/// The eval_step entry's inputs and loss, when the plan has one.
std::string bindEvalEntry(Run &run) {
  if (run.evalEntry < 0) {
    return "";
  }
  const fb::Plan &root = run.plan->root();
  std::vector<int64_t> tokenShape = {run.microBatch, run.sequenceLen};
  std::vector<DType> ints = {DType::I64, DType::I32};
  if (std::string problem = bindEntry(
          *run.plan, *run.session, root.inputs(), run.evalEntry, "eval_step",
          "input",
          {{"eval_input_ids", true, tokenShape, ints, &run.evalIds},
           {"eval_labels", true, tokenShape, ints, &run.evalLabels},
           {"eval_position_ids", false, tokenShape, ints,
            &run.evalPositions},
           {"eval_attention_mask", false, tokenShape, ints,
            &run.evalAttentionMask}});
      !problem.empty()) {
    return problem;
  }
  return bindEntry(*run.plan, *run.session, root.outputs(), run.evalEntry,
                   "eval_step", "output",
                   {{"eval_loss", true, {}, {DType::F32}, &run.evalLoss}});
}

std::string bindSlots(Run &run) {
  const fb::Plan &root = run.plan->root();
  LoadedPlan &plan = *run.plan;
  Session &session = *run.session;
  std::vector<int64_t> tokenShape = {run.microBatch, run.sequenceLen};
  std::vector<DType> ints = {DType::I64, DType::I32};
  std::vector<DType> floats = {DType::F32};
  // A pipeline stage reads only the inputs its layers need; only the last
  // computes the loss.
  bool whole = !run.pipeline;
  if (std::string problem = bindEntry(
          plan, session, root.inputs(), run.trainEntry, "train_step", "input",
          {{"input_ids", whole, tokenShape, ints, &run.inputIds},
           {"labels", whole, tokenShape, ints, &run.labels},
           {"position_ids", false, tokenShape, ints, &run.positionIds},
           {"attention_mask", false, tokenShape, ints, &run.attentionMask},
           {"seed", false, {}, ints, &run.seedSlot},
           {"update_step", false, {}, ints, &run.trainStepSlot},
           {"slot", false, {}, ints, &run.trainSlot},
           {"loss_scale", false, {}, floats, &run.lossScale}});
      !problem.empty()) {
    return problem;
  }
  if (std::string problem =
          bindEntry(plan, session, root.outputs(), run.trainEntry, "train_step",
                    "output", {{"loss", whole, {}, floats, &run.loss}});
      !problem.empty()) {
    return problem;
  }
  if (run.forwardEntry >= 0) {
    if (std::string problem = bindEntry(
            plan, session, root.inputs(), run.forwardEntry,
            "pipeline_forward", "input",
            {{"forward_input_ids", false, tokenShape, ints, &run.forwardIds},
             {"forward_position_ids", false, tokenShape, ints,
              &run.forwardPositions},
             {"forward_attention_mask", false, tokenShape, ints,
              &run.forwardAttentionMask},
             {"forward_seed", false, {}, ints, &run.forwardSeed},
             {"forward_slot", false, {}, ints, &run.forwardSlot}});
        !problem.empty()) {
      return problem;
    }
  }
  if (std::string problem = bindEntry(
          plan, session, root.inputs(), run.optimizerEntry, "optimizer_step",
          "input",
          {{"step", true, {}, ints, &run.stepSlot},
           {"inv_scale", false, {}, floats, &run.inverseScale}});
      !problem.empty()) {
    return problem;
  }
  if (std::string problem =
          bindEntry(plan, session, root.outputs(), run.optimizerEntry,
                    "optimizer_step", "output",
                    {{"lr", true, {}, floats, &run.lr},
                     {"grad_norm", true, {}, floats, &run.gradNorm},
                     {"found_inf", false, {}, floats, &run.foundInf}});
      !problem.empty()) {
    return problem;
  }
  if (std::string problem = bindEvalEntry(run); !problem.empty()) {
    return problem;
  }
  if (root.states()) {
    for (const fb::State *state : *root.states()) {
      if (state->kind()->str() == "grad") {
        run.gradBuffers.push_back(state->buffer());
      }
    }
  }
  std::string error;
  if (!buildCheckpointLayout(plan, session, run.layout, error)) {
    return error;
  }
  return "";
}

/// fp16 plans: the scaler from the plan's settings, once the entries that
/// take the scale and report found_inf are bound; the others have none.
std::string readLossScaling(Run &run) {
  const fb::LossScaling *settings = run.training->loss_scaling();
  bool bound = run.lossScale.buffer >= 0 || run.inverseScale.buffer >= 0 ||
               run.foundInf.buffer >= 0;
  if (!settings) {
    return bound ? run.name() + ": the plan's entries take a loss scale but "
                                "its training section sets no loss_scaling"
                 : "";
  }
  if (run.lossScale.buffer < 0 || run.inverseScale.buffer < 0 ||
      run.foundInf.buffer < 0) {
    return run.name() + ": the plan sets loss_scaling but its entries lack " +
           (run.lossScale.buffer < 0     ? "train_step's input 'loss_scale'"
            : run.inverseScale.buffer < 0 ? "optimizer_step's input 'inv_scale'"
                                         : "optimizer_step's output "
                                           "'found_inf'");
  }
  LossScalerSettings scaling;
  scaling.initScale = settings->init_scale();
  scaling.growthFactor = settings->growth_factor();
  scaling.backoffFactor = settings->backoff_factor();
  scaling.growthInterval = settings->growth_interval();
  run.scaler.emplace(scaling);
  return "";
}

/// The step counts: the plan's, or the command line's.
std::string readSettings(Run &run) {
  const TrainOptions &options = run.options;
  const fb::Training &training = *run.training;
  if (std::string problem = readLossScaling(run); !problem.empty()) {
    return problem;
  }
  run.maxSteps = options.maxSteps > 0 ? options.maxSteps : training.max_steps();
  if (run.maxSteps <= 0) {
    return run.name() + ": the plan sets no max_steps; pass --max-steps";
  }
  run.saveSteps =
      options.saveSteps >= 0 ? options.saveSteps : training.save_steps();
  run.loggingSteps = std::max<int64_t>(1, training.logging_steps());
  run.evalSteps = training.eval_steps();
  if (run.evalSteps < 0) {
    return run.name() + ": eval_steps " + std::to_string(run.evalSteps) +
           " is negative";
  }
  run.stopAfter = options.stopAfterStep;
  if (run.stopAfter < 0) {
    if (const char *text = std::getenv("TAILOR_TRAIN_STOP_AFTER")) {
      run.stopAfter = std::strtoll(text, nullptr, 10);
    }
  }
  if (options.outputDir.empty()) {
    return "no output directory given";
  }
  return "";
}

/// No data path: the caller feeds every step's batch. Validation data
/// can still come from --eval-data; what needs the training data is refused.
std::string openFedData(Run &run, bool packing) {
  const TrainOptions &options = run.options;
  if (packing) {
    return run.name() + ": the plan packs examples (sample_packing: true), "
                        "which needs its data loader; give a data path";
  }
  if (run.training->val_set_size() > 0) {
    return run.name() + ": the plan holds out val_set_size of the training "
                        "data, which needs a data path";
  }
  if (!options.evalDataPath.empty()) {
    DataOptions dataOptions;
    dataOptions.path = options.evalDataPath;
    dataOptions.tokenDType = options.dataDType;
    dataOptions.sequenceLen = run.sequenceLen;
    dataOptions.microBatchSize = run.microBatch;
    dataOptions.vocabSize = run.training->vocab_size();
    dataOptions.padTokenId = run.training->pad_token_id();
    std::string error;
    run.validation = DataLoader::open(dataOptions, error);
    if (!run.validation) {
      return "--eval-data: " + error;
    }
  }
  if (!run.validation && run.evalSteps > 0) {
    return run.name() + ": the plan sets eval_steps " +
           std::to_string(run.evalSteps) +
           " but there is no validation data (pass an eval data path)";
  }
  return "";
}

/// Opens the training data and, if any is asked for, the validation data.
std::string openData(Run &run) {
  const TrainOptions &options = run.options;
  const fb::Training &training = *run.training;
  bool packing = training.sample_packing() && *training.sample_packing();
  if (packing && run.positionIds.buffer < 0) {
    return run.name() + ": the plan asks for sample_packing: true but its "
                        "train_step takes no position_ids (compiled by an "
                        "older tailor?); recompile it";
  }
  if (options.dataPath.empty()) {
    return openFedData(run, packing);
  }
  DataOptions dataOptions;
  dataOptions.path = options.dataPath;
  dataOptions.tokenDType = options.dataDType;
  dataOptions.sequenceLen = run.sequenceLen;
  dataOptions.microBatchSize = run.microBatch;
  dataOptions.vocabSize = training.vocab_size();
  dataOptions.shuffle = training.shuffle();
  dataOptions.seed = training.seed();
  dataOptions.layout = packing                    ? SequenceLayout::Packed
                        : training.sample_packing() ? SequenceLayout::Padded
                                                    : SequenceLayout::ByData;
  dataOptions.padTokenId = training.pad_token_id();
  dataOptions.valSetSize = training.val_set_size();
  if (dataOptions.valSetSize > 0 && !options.evalDataPath.empty()) {
    return "the plan holds out val_set_size " +
           formatDouble(dataOptions.valSetSize) +
           " of the training data and --eval-data names " +
           options.evalDataPath + "; give one";
  }
  std::string error;
  run.data = DataLoader::open(dataOptions, error);
  if (!run.data) {
    return error;
  }
  run.validation = run.data->heldOut();
  if (!options.evalDataPath.empty()) {
    dataOptions.path = options.evalDataPath;
    dataOptions.shuffle = false;
    dataOptions.valSetSize = 0;
    run.validation = DataLoader::open(dataOptions, error);
    if (!run.validation) {
      return "--eval-data: " + error;
    }
    if (run.validation->batchesPerPass() == 0) {
      return "--eval-data: " + options.evalDataPath +
             " is an endless stream; validation needs files";
    }
  }
  if (!run.validation) {
    if (run.evalSteps > 0) {
      return run.name() + ": the plan sets eval_steps " +
             std::to_string(run.evalSteps) +
             " but there is no validation data (compile with val_set_size "
             "or pass --eval-data)";
    }
    return "";
  }
  if (run.seedSlot.buffer >= 0 && run.evalEntry < 0) {
    return run.name() + ": the plan's train_step applies dropout (it takes "
                        "a seed) and the plan has no eval_step to compute "
                        "a validation loss without it; compile with "
                        "val_set_size or eval_steps (which add eval_step), "
                        "or lora_dropout 0";
  }
  if (run.trainStepSlot.buffer >= 0 && run.evalEntry < 0) {
    return run.name() + ": the plan's train_step updates the optimizer "
                        "state on the host during backward (offload_"
                        "optimizer with overlap), so it cannot compute a "
                        "validation loss; compile with val_set_size or "
                        "eval_steps, which add eval_step";
  }
  return "";
}

/// Continues the checkpoint's loss scaler (fp16 plans). A checkpoint of a
/// run without one starts the scaler afresh, and one with a scaler resumed
/// by a plan without loss scaling drops it; both say so.
std::string restoreLossScaler(Run &run, const std::string &from,
                              TrainerState &state) {
  if (!run.scaler) {
    if (state.scaler) {
      std::fprintf(run.err,
                   "tailor train: note: %s holds a loss scale; this plan "
                   "does not scale its loss (not mixed_precision: fp16)\n",
                   from.c_str());
      state.scaler.reset();
    }
    return "";
  }
  if (!state.scaler) {
    std::fprintf(run.err,
                 "tailor train: note: %s holds no loss scale; fp16 loss "
                 "scaling starts at init_scale %g\n",
                 from.c_str(), static_cast<double>(run.scaler->scale()));
    state.scaler = run.scaler->state();
    return "";
  }
  if (std::string problem = run.scaler->restore(*state.scaler);
      !problem.empty()) {
    return from + "/trainer_state.json: " + problem;
  }
  return "";
}

/// Loads the checkpoint `--resume` names (or the latest) into `state`.
std::string resumeFrom(Run &run, TrainerState &state) {
  const TrainOptions &options = run.options;
  std::string from = options.resume;
  if (from == "latest") {
    from = findLatestCheckpoint(options.outputDir);
    if (from.empty()) {
      std::fprintf(run.err,
                   "tailor train: no checkpoint in %s; starting at "
                   "step 0\n",
                   options.outputDir.c_str());
      return "";
    }
  }
  std::string error;
  if (!loadCheckpoint(run.layout, from, state, error)) {
    return error;
  }
  if (state.globalStep > run.maxSteps) {
    return from + ": the checkpoint is at step " +
           std::to_string(state.globalStep) + ", past max_steps " +
           std::to_string(run.maxSteps);
  }
  // A fed run's data position is the caller's to keep.
  if (run.data && !run.data->setPosition(state.data, error)) {
    return from + ": " + error;
  }
  if (std::string problem = restoreLossScaler(run, from, state);
      !problem.empty()) {
    return problem;
  }
  uint64_t seed = run.training->seed();
  if (state.seed != seed) {
    std::fprintf(run.err,
                 "tailor train: warning: %s was trained with seed "
                 "%" PRIu64 ", the plan has %" PRIu64 "\n",
                 from.c_str(), state.seed, seed);
    state.seed = seed;
  }
  std::fprintf(run.out, "resuming from %s (step %" PRId64 ")\n", from.c_str(),
               state.globalStep);
  return "";
}

/// Prepares the output directory, the starting weights, and resumes.
std::string startState(Run &run, TrainerState &state) {
  const TrainOptions &options = run.options;
  std::string error;
  // Rank 0 prepares the directory; the others read from it only once it
  // has (a checkpoint-N.old-PID may be renamed back, say).
  if (run.leader()) {
    if (!makeDirectories(options.outputDir, error)) {
      // error is set
    } else if (StaleTemporaries stale;
               !removeStaleTemporaries(options.outputDir, stale, error)) {
      // A run killed mid-write left temporaries no one else removes.
    } else if (!stale.empty()) {
      std::fprintf(run.err, "tailor train: %s\n",
                   stale.describe(options.outputDir).c_str());
    }
  }
  if (std::string problem =
          shareOutcome(run, error, "preparing " + options.outputDir);
      !problem.empty()) {
    return problem;
  }
  if (!options.initAdapter.empty() &&
      !loadPeftAdapter(run.layout, options.initAdapter, error)) {
    return error;
  }
  state.seed = run.training->seed();
  state.fingerprint = run.layout.fingerprint;
  if (run.scaler) {
    state.scaler = run.scaler->state();
  }
  if (options.resume.empty()) {
    if (std::string old = findLatestCheckpoint(options.outputDir);
        !old.empty()) {
      std::fprintf(run.err,
                   "tailor train: warning: starting at step 0 although %s "
                   "exists (pass --resume to continue from it)\n",
                   old.c_str());
    }
  } else if (std::string problem = resumeFrom(run, state); !problem.empty()) {
    return problem;
  }
  // What was read into host copies goes to the GPU before the first step.
  if (std::string problem = syncLayout(*run.session, run.layout, false);
      !problem.empty()) {
    return run.name() + ": " + problem;
  }
  return "";
}

/// Prints what is about to happen: the plan, the batch, the data.
void printHeader(Run &run, int64_t startStep, int64_t tokensPerStep) {
  FILE *out = run.out;
  std::string ranks =
      run.pipeline ? (run.replicas() > 1
                          ? " x " + std::to_string(run.replicas()) +
                                " replicas"
                          : "") +
                         " over " + std::to_string(run.pipeline->stages()) +
                         " pipeline stages (" +
                         run.pipeline->schedule()->str() + ")"
      : run.world > 1 ? " x " + std::to_string(run.world) + " ranks"
                      : "";
  std::string accumulation = std::to_string(run.accumulation) + " accumulation";
  const fb::Parallel *parallel = run.plan->root().parallel();
  if (!run.pipeline && parallel && parallel->ranks()) {
    // A cluster of mixed devices: each rank's own count.
    accumulation.clear();
    for (uint32_t r = 0; r < parallel->ranks()->size(); ++r) {
      accumulation += (r ? " + " : "(") +
                      std::to_string(parallel->ranks()->Get(r)->micro_batches());
    }
    accumulation += ") micro-batches";
    ranks = " by ranks of mixed speed";
  }
  std::fprintf(out,
               "training %s: %s, %" PRId64 " x %" PRId64 " tokens x %s"
               "%s = %" PRId64 " tokens/step, ",
               run.name().c_str(), run.layout.adapter.variant.c_str(),
               run.microBatch, run.sequenceLen, accumulation.c_str(),
               ranks.c_str(), tokensPerStep);
  if (startStep < run.maxSteps) {
    std::fprintf(out, "steps %" PRId64 "..%" PRId64 "\n", startStep + 1,
                 run.maxSteps);
  } else {
    std::fprintf(out, "already at step %" PRId64 "\n", run.maxSteps);
  }
  // The session allocated exactly the plan's arenas (on every rank: one
  // program), which is what `tailor inspect` reports.
  // A plan that places arenas in host memory also says how much is
  // where (device: its Device arenas, host: the others).
  uint64_t allocated = runtime::totalBytes(run.session->allocatedBytes());
  uint64_t host = run.session->allocatedHostBytes();
  std::string placed =
      host > 0 ? " (device " +
                     std::to_string(run.session->allocatedDeviceBytes()) +
                     " B, host " + std::to_string(host) + " B)"
               : "";
  std::fprintf(out, "memory %" PRIu64 " B allocated%s%s\n", allocated,
               run.world > 1 ? " per rank" : "", placed.c_str());
  std::fprintf(out, "data %s\n", run.data ? run.data->describe().c_str()
                                           : "fed by the caller, step by step");
  if (run.data && !run.data->warning().empty()) {
    std::fprintf(run.err, "tailor train: warning: %s\n",
                 run.data->warning().c_str());
  }
  if (run.validation) {
    std::fprintf(out, "validation %s; loss %s\n",
                 run.validation->describe().c_str(),
                 run.evalSteps > 0 ? ("every " + std::to_string(run.evalSteps) +
                                      " steps and at the end")
                                         .c_str()
                                   : "at the end");
    if (!run.validation->warning().empty()) {
      std::fprintf(run.err, "tailor train: warning: validation: %s\n",
                   run.validation->warning().c_str());
    }
  }
  std::fflush(out);
}

/// Where the loader writes position ids: null when the plan takes none.
int64_t *positionsOf(Run &run) {
  return run.positions.empty() ? nullptr : run.positions.data();
}

/// Writes one micro-batch into the plan's inputs.
void feed(Run &run, int64_t step, int64_t micro) {
  if (run.inputIds.buffer >= 0) {
    writeInts(run.inputIds, run.ids.data(), run.ids.size());
  }
  if (run.labels.buffer >= 0) {
    writeInts(run.labels, run.targets.data(), run.targets.size());
  }
  if (run.positionIds.buffer >= 0) {
    writeInts(run.positionIds, run.positions.data(), run.positions.size());
  }
  if (run.attentionMask.buffer >= 0) {
    writeInts(run.attentionMask, run.maskOnes.data(), run.maskOnes.size());
  }
  if (run.seedSlot.buffer >= 0) {
    int64_t seed = dropoutSeed(run.training->seed(), step, micro);
    writeInts(run.seedSlot, &seed, 1);
  }
  if (run.trainStepSlot.buffer >= 0) {
    // As optimizer_step's (applied updates; the scaler's skipped steps do
    // not count).
    int64_t update =
        step - (run.scaler ? run.scaler->state().skippedSteps : 0);
    writeInts(run.trainStepSlot, &update, 1);
  }
  if (run.scaler) {
    writeFloat(run.lossScale, run.scaler->scale());
  }
}

std::string lossNotFinite(int64_t step, double value, int64_t micro) {
  return "step " + std::to_string(step) + ": loss is " +
         (std::isnan(value) ? "nan" : "inf") + " (micro-batch " +
         std::to_string(micro) + "); stopped without a checkpoint";
}

/// Micro-batch `index` of the batch the caller fed into the plan's inputs.
void takeFedRows(Run &run, int64_t index) {
  size_t count = run.ids.size();
  size_t at = static_cast<size_t>(index) * count;
  std::copy_n(run.fedIds + at, count, run.ids.begin());
  std::copy_n((run.fedLabels ? run.fedLabels : run.fedIds) + at, count,
              run.targets.begin());
}

/// Writes micro-batch `micro` (in run.ids/targets/positions) into the
/// inputs of a pipeline stage's forward entry, with its slot.
void feedForward(Run &run, int64_t step, int64_t micro, int64_t slot) {
  if (run.forwardIds.buffer >= 0) {
    writeInts(run.forwardIds, run.ids.data(), run.ids.size());
  }
  if (run.forwardPositions.buffer >= 0) {
    writeInts(run.forwardPositions, run.positions.data(),
              run.positions.size());
  }
  if (run.forwardAttentionMask.buffer >= 0) {
    writeInts(run.forwardAttentionMask, run.maskOnes.data(),
              run.maskOnes.size());
  }
  if (run.forwardSeed.buffer >= 0) {
    int64_t seed = dropoutSeed(run.training->seed(), step, micro);
    writeInts(run.forwardSeed, &seed, 1);
  }
  if (run.forwardSlot.buffer >= 0) {
    writeInts(run.forwardSlot, &slot, 1);
  }
}

/// A layer split's stage: every stage of a data-parallel replica reads the
/// replica's micro-batches of the global batch (as a DDP rank reads its
/// own; micro-batches are numbered across the global batch, which picks
/// their dropout seeds) and runs its forwards and backwards in the plan's
/// schedule; the last stages' losses, summed over the ranks, make the
/// step's mean. Sends still in flight are completed at the end.
std::string accumulateStage(Run &run, int64_t step, double &meanLoss) {
  const fb::PipelineStage &stage = *run.pipeline;
  std::string error;
  std::vector<train::PipelineWork> work = train::pipelineSchedule(
      stage.stage(), stage.stages(), run.accumulation,
      stage.schedule()->str(), error);
  if (work.empty()) {
    return run.name() + ": " + error;
  }
  if (train::pipelineMicroBatchesInFlight(work) > std::max(1, stage.slots()) &&
      stage.stage() + 1 < stage.stages()) {
    return run.name() + ": its schedule keeps more micro-batches in flight "
                        "than the plan's " +
           std::to_string(stage.slots()) + " slots";
  }
  size_t rows = run.ids.size();
  std::vector<int64_t> ids, targets, positions;
  if (run.data) {
    run.data->skip(static_cast<uint64_t>(run.firstMicro));
  }
  for (int64_t micro = 0; micro < run.accumulation; ++micro) {
    if (run.data) {
      run.data->next(run.ids.data(), run.targets.data(), positionsOf(run));
    } else {
      takeFedRows(run, micro);
    }
    ids.insert(ids.end(), run.ids.begin(), run.ids.end());
    targets.insert(targets.end(), run.targets.begin(), run.targets.end());
    positions.insert(positions.end(), run.positions.begin(),
                     run.positions.end());
  }
  if (run.data) {
    run.data->skip(static_cast<uint64_t>(run.globalMicro - run.firstMicro -
                                         run.accumulation));
  }
  double lossSum = 0;
  for (const train::PipelineWork &unit : work) {
    size_t at = static_cast<size_t>(unit.micro) * rows;
    std::copy_n(ids.begin() + at, rows, run.ids.begin());
    std::copy_n(targets.begin() + at, rows, run.targets.begin());
    std::copy_n(positions.begin() + static_cast<ptrdiff_t>(
                                        run.positions.empty() ? 0 : at),
                run.positions.size(), run.positions.begin());
    int64_t slot = unit.micro % std::max(1, stage.slots());
    std::string what = unit.forward ? "forward" : "backward";
    int64_t global = run.firstMicro + unit.micro;
    if (unit.forward) {
      feedForward(run, step, global, slot);
    } else {
      feed(run, step, global);
      if (run.trainSlot.buffer >= 0) {
        writeInts(run.trainSlot, &slot, 1);
      }
    }
    if (std::string problem = run.session->runEntry(
            unit.forward ? run.forwardEntry : run.trainEntry);
        !problem.empty()) {
      return "step " + std::to_string(step) + ", micro-batch " +
             std::to_string(global) + " (" + what + "): " + problem;
    }
    if (!unit.forward && run.loss.buffer >= 0) {
      lossSum += readScalar(run.loss);
    }
  }
  if (std::string problem = run.session->finishSends(); !problem.empty()) {
    return "step " + std::to_string(step) + ": " + problem;
  }
  if (std::string problem = sumOverRanks(run, &lossSum, 1); !problem.empty()) {
    return "step " + std::to_string(step) + ": " + problem;
  }
  if (!std::isfinite(lossSum)) {
    return "step " + std::to_string(step) +
           ": the loss is not finite; stopped without a checkpoint";
  }
  meanLoss = lossSum / static_cast<double>(run.globalMicro);
  return "";
}

/// Runs train_step on this rank's micro-batches of the global batch of
/// `step` (micro-batches are numbered across the global batch, which picks
/// their dropout seeds too) and skips the other ranks'; the mean loss over
/// every rank's micro-batches. On several ranks every rank runs all its
/// micro-batches whatever their losses (the plan's collectives need every
/// rank), and a non-finite loss anywhere fails every rank.
std::string accumulate(Run &run, int64_t step, double &meanLoss) {
  if (run.pipeline) {
    return accumulateStage(run, step, meanLoss);
  }
  double lossSum = 0;
  double badValue = 0;
  int64_t badMicro = -1;
  int64_t first = run.firstMicro;
  if (run.data) {
    run.data->skip(static_cast<uint64_t>(first));
  }
  for (int64_t micro = first; micro < first + run.accumulation; ++micro) {
    if (run.data) {
      run.data->next(run.ids.data(), run.targets.data(), positionsOf(run));
    } else {
      takeFedRows(run, micro - first);
    }
    feed(run, step, micro);
    if (std::string problem = run.session->runEntry(run.trainEntry);
        !problem.empty()) {
      return "step " + std::to_string(step) + ", micro-batch " +
             std::to_string(micro) + ": " + problem;
    }
    float value = readScalar(run.loss);
    // With loss scaling an overflowing forward is GradScaler's skipped
    // step: its gradients are inf/NaN too, and optimizer_step finds them.
    if (!std::isfinite(value) && badMicro < 0 && !run.scaler) {
      if (!run.comm) {
        return lossNotFinite(step, value, micro);
      }
      badMicro = micro;
      badValue = value;
    }
    lossSum += value;
  }
  if (run.data) {
    run.data->skip(static_cast<uint64_t>(run.globalMicro - first -
                                         run.accumulation));
  }
  if (std::string problem = sumOverRanks(run, &lossSum, 1); !problem.empty()) {
    return "step " + std::to_string(step) + ": " + problem;
  }
  if (badMicro >= 0) {
    return lossNotFinite(step, badValue, badMicro);
  }
  if (!std::isfinite(lossSum) && !run.scaler) {
    return "step " + std::to_string(step) + ": the loss is not finite on "
           "another rank; stopped without a checkpoint";
  }
  meanLoss = lossSum / static_cast<double>(run.globalMicro);
  return "";
}

/// Label t is predicted from token t - 1 (the loss shifts the labels), so
/// a row's first label never counts: the tokens the loss averages over.
uint64_t countedTokens(const std::vector<int64_t> &labels, int64_t rows,
                       int64_t length) {
  uint64_t counted = 0;
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t t = 1; t < length; ++t) {
      counted += labels[static_cast<size_t>(row * length + t)] != -100;
    }
  }
  return counted;
}

/// Sets the accumulators to +0 (on a GPU through the host copies).
std::string zeroAccumulators(Session &session,
                             const std::vector<uint32_t> &buffers) {
  for (uint32_t buffer : buffers) {
    uint64_t bytes = session.plan().bufferBytes(buffer);
    std::memset(session.bufferData(buffer), 0, bytes);
    if (std::string problem = session.upload(buffer); !problem.empty()) {
      return problem;
    }
  }
  return "";
}

/// The validation loss: train_step over every validation micro-batch,
/// weighted by the tokens each counts, so it is the mean over every counted
/// token of the set (what the Hugging Face causal-LM loss gives for the
/// whole set as one batch), not a mean of batch means. train_step also adds
/// gradients; it runs right after an optimizer step, which leaves every
/// accumulator at exactly +0, so zeroing them afterwards restores the
/// training state bit for bit.
/// One validation micro-batch (already in run.ids/targets/positions):
/// through eval_step when the plan has it, else through train_step.
std::string runValidationBatch(Run &run, int64_t step) {
  if (run.evalEntry < 0) {
    if (run.trainStepSlot.buffer >= 0) {
      // (openData refuses it first; fed data reaches here.)
      return "the plan's train_step updates the optimizer state on the "
             "host during backward, so it cannot compute a validation "
             "loss; compile with val_set_size or eval_steps, which add "
             "eval_step";
    }
    feed(run, step, 0);
    return run.session->runEntry(run.trainEntry);
  }
  writeInts(run.evalIds, run.ids.data(), run.ids.size());
  writeInts(run.evalLabels, run.targets.data(), run.targets.size());
  if (run.evalPositions.buffer >= 0) {
    writeInts(run.evalPositions, run.positions.data(), run.positions.size());
  }
  if (run.evalAttentionMask.buffer >= 0) {
    writeInts(run.evalAttentionMask, run.maskOnes.data(),
              run.maskOnes.size());
  }
  return run.session->runEntry(run.evalEntry);
}

/// A micro-batch of padding only (labels all -100): what a rank runs when
/// the validation set has no batch left for it, so that every rank runs
/// the plan the same number of times.
void paddingBatch(Run &run) {
  std::fill(run.ids.begin(), run.ids.end(), run.training->pad_token_id());
  std::fill(run.targets.begin(), run.targets.end(), -100);
  for (size_t i = 0; i < run.positions.size(); ++i) {
    run.positions[i] = static_cast<int64_t>(i) % run.sequenceLen;
  }
}

/// On several ranks, rank r evaluates micro-batches r, r + N, ... and the
/// sums are added over the ranks.
std::string evaluate(Run &run, int64_t step, double &meanLoss) {
  // The sum of loss x counted tokens, and the counted tokens.
  double totals[2] = {0, 0};
  DataLoader &validation = *run.validation;
  uint64_t batches = validation.batchesPerPass();
  uint64_t world = static_cast<uint64_t>(run.world);
  uint64_t rounds = (batches + world - 1) / world;
  for (uint64_t round = 0; round < rounds; ++round) {
    uint64_t batch = round * world + static_cast<uint64_t>(run.rank);
    if (batch >= batches) {
      paddingBatch(run);
      if (std::string problem = runValidationBatch(run, step);
          !problem.empty()) {
        return "step " + std::to_string(step) +
               ", validation padding batch: " + problem;
      }
      continue;
    }
    validation.batchAt(batch, run.ids.data(), run.targets.data(),
                       positionsOf(run));
    if (std::string problem = runValidationBatch(run, step);
        !problem.empty()) {
      return "step " + std::to_string(step) + ", validation micro-batch " +
             std::to_string(batch) + ": " + problem;
    }
    float value = readScalar(run.evalEntry >= 0 ? run.evalLoss : run.loss);
    if (!std::isfinite(value)) {
      return "step " + std::to_string(step) + ": validation loss is " +
             (std::isnan(value) ? "nan" : "inf") + " (micro-batch " +
             std::to_string(batch) + ")";
    }
    uint64_t tokens =
        countedTokens(run.targets, run.microBatch, run.sequenceLen);
    totals[0] += static_cast<double>(value) * static_cast<double>(tokens);
    totals[1] += static_cast<double>(tokens);
  }
  if (run.evalEntry < 0) {
    if (std::string problem = zeroAccumulators(*run.session, run.gradBuffers);
        !problem.empty()) {
      return run.name() + ": " + problem;
    }
  }
  if (std::string problem = sumOverRanks(run, totals, 2); !problem.empty()) {
    return "step " + std::to_string(step) + ", validation: " + problem;
  }
  meanLoss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
  return "";
}


/// Writes a checkpoint of the run's state into `outputDir`. Every rank
/// brings the layout to the host (sharded states are gathered from all of
/// them); rank 0 writes it, the others wait until it has (or failed).
std::string checkpoint(Run &run, const std::string &outputDir) {
  const TrainerState &state = run.state;
  std::string error;
  if (std::string problem = syncLayout(*run.session, run.layout, true);
      !problem.empty()) {
    error = run.name() + ": " + problem;
  } else if (run.leader() && makeDirectories(outputDir, error)) {
    // Replicated tensors, and the gathered sharded states: rank 0's copy is
    // the whole.
    saveCheckpoint(run.layout, state, outputDir, error);
  }
  if (std::string problem =
          shareOutcome(run, error,
                       "step " + std::to_string(state.globalStep) +
                           ": writing the checkpoint");
      !problem.empty()) {
    return problem;
  }
  run.result.lastCheckpoint = checkpointPath(outputDir, state.globalStep);
  return "";
}

/// Writes the current weights into `dir` (created if needed), so
/// PeftModel.from_pretrained(model, DIR) loads them.
std::string exportWeights(Run &run, const std::string &dir) {
  std::string error;
  // Every rank takes part (syncLayout gathers sharded states); rank 0
  // writes the weights.
  if (std::string problem = syncLayout(*run.session, run.layout, true);
      !problem.empty()) {
    error = run.name() + ": " + problem;
  } else if (run.leader() && makeDirectories(dir, error)) {
    writeModelFiles(run.layout, dir, error);
  }
  return shareOutcome(run, error, "writing the weights to " + dir);
}

/// `--trace`: the launches of the run's first steps, written once
/// `traceSteps` are in.
class StepTracer {
public:
  explicit StepTracer(Run &run) : run(run) {}
  std::string start() {
    return !active() ? "" : run.session->recordTimeline(true);
  }
  /// Called after a step's optimizer entry; writes the trace when done.
  std::string stepDone(int64_t step) {
    if (!active() || finished) {
      return "";
    }
    steps.push_back({step, run.session->takeTimeline()});
    if (int64_t(steps.size()) < std::max<int64_t>(1, run.options.traceSteps) &&
        step < run.maxSteps) {
      return "";
    }
    finished = true;
    (void)run.session->recordTimeline(false);
    return runtime::writeMeasuredTrace(*run.plan, steps, run.options.tracePath);
  }
  /// Drops what ran outside a step (validation).
  void discard() {
    if (active()) {
      (void)run.session->takeTimeline();
    }
  }

private:
  /// Rank 0 alone records (every rank would write the same file).
  bool active() const { return !run.options.tracePath.empty() && run.leader(); }

  Run &run;
  std::vector<runtime::MeasuredStep> steps;
  bool finished = false;
};

/// Starts progress reporting (the metrics file, the header) once, before
/// the first step a run reports.
std::string startProgress(Run &run) {
  if (run.progress) {
    return "";
  }
  int64_t tokensPerStep = run.microBatch * run.sequenceLen * run.globalMicro;
  run.progress = std::make_unique<Progress>(
      run.out, run.err, run.state.globalStep, run.maxSteps, tokensPerStep);
  std::string error;
  if (run.leader() &&
      !run.progress->openMetrics(run.options.outputDir + "/" + kMetricsFile,
                                 error)) {
    // (The others stop at the next checkpoint's shared outcome at the
    // latest; under mpirun, rank 0's exit ends the job first.)
    run.progress.reset();
    return error;
  }
  printHeader(run, run.state.globalStep, tokensPerStep);
  return "";
}

/// Whether a stop was asked for: read once per step, and cleared, so a
/// signal during the checkpoint write only stops the next step.
bool takeStopRequest(Run &run, int64_t step) {
  bool stop = stopRequested != 0 || run.stop.exchange(false) ||
              step == run.stopAfter;
  stopRequested = 0;
  return stop;
}

/// Trains step `step` (train_step over the micro-batches, optimizer_step)
/// and fills the parts of `report` the step itself measures.
std::string trainStep(Run &run, int64_t step, StepReport &report) {
  auto start = std::chrono::steady_clock::now();
  uint64_t sentBefore = run.session->bytesSent();
  std::map<std::string, uint64_t> sentByGroupBefore =
      run.session->bytesSentByGroup();
  uint64_t copiedBefore = run.session->bytesCopied();
  double stepLoss = 0;
  if (std::string problem = accumulate(run, step, stepLoss); !problem.empty()) {
    return problem;
  }
  // The plan's `step` counts applied updates: with loss scaling, skipped
  // steps do not count (the lr schedule and AdamW's bias corrections).
  int64_t update = step;
  if (run.scaler) {
    update -= run.scaler->state().skippedSteps;
    writeFloat(run.inverseScale, run.scaler->inverseScale());
  }
  writeInts(run.stepSlot, &update, 1);
  if (std::string problem = run.session->runEntry(run.optimizerEntry);
      !problem.empty()) {
    return "step " + std::to_string(step) + ", optimizer step: " + problem;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (std::string problem = run.tracer->stepDone(step); !problem.empty()) {
    return "--trace: " + problem;
  }
  double stepNorm = readScalar(run.gradNorm);
  // With loss scaling an inf/NaN gradient is a skipped step (found_inf),
  // not an error: the scaler backs off.
  bool skipped = run.scaler && readScalar(run.foundInf) != 0.0f;
  if (!std::isfinite(stepNorm) && !skipped) {
    return "step " + std::to_string(step) + ": gradient norm is " +
           (std::isnan(stepNorm) ? "nan" : "inf") +
           "; stopped without a checkpoint";
  }
  if (!std::isfinite(stepLoss) && !skipped) {
    return "step " + std::to_string(step) +
           ": the loss is not finite but no gradient is; stopped without a "
           "checkpoint";
  }
  if (run.scaler) {
    report.lossScale = run.scaler->scale();
    report.skipped = skipped;
    run.scaler->update(skipped);
    run.state.scaler = run.scaler->state();
  }
  report.step = step;
  report.loss = stepLoss;
  report.learningRate = readScalar(run.lr);
  report.gradNorm = stepNorm;
  report.seconds = seconds;
  if (run.comm) {
    report.bytesSent = run.session->bytesSent() - sentBefore;
    for (const auto &[group, bytes] : run.session->bytesSentByGroup()) {
      report.bytesSentByGroup[group] = bytes - sentByGroupBefore[group];
    }
  }
  if (run.hasCopies) {
    report.bytesCopied = run.session->bytesCopied() - copiedBefore;
  }
  return "";
}

/// One step of the loop: train, validate when due, report, then checkpoint
/// when due or asked to stop.
std::string loopStep(Run &run, StepMetrics &metrics,
                     const StepObserver &observer) {
  if (std::string problem = startProgress(run); !problem.empty()) {
    return problem;
  }
  if (!run.tracer) {
    run.tracer = std::make_unique<StepTracer>(run);
    if (std::string problem = run.tracer->start(); !problem.empty()) {
      return "--trace: " + problem;
    }
  }
  int64_t step = run.state.globalStep + 1;
  StepReport report;
  if (std::string problem = trainStep(run, step, report); !problem.empty()) {
    return problem;
  }
  report.log = step % run.loggingSteps == 0 || step == run.maxSteps ||
               step == run.result.startStep + 1;
  bool evaluating =
      run.validation && ((run.evalSteps > 0 && step % run.evalSteps == 0) ||
                         step == run.maxSteps);
  if (evaluating) {
    double evalLoss = 0;
    if (std::string problem = evaluate(run, step, evalLoss); !problem.empty()) {
      return problem;
    }
    report.evalLoss = evalLoss;
    report.log = true;
    run.tracer->discard();
  }
  TrainerState &state = run.state;
  state.globalStep = run.result.finalStep = step;
  if (run.data) {
    state.data = run.data->position();
  }
  run.result.lastLoss = report.loss;
  if (report.log) {
    state.logHistory.push_back({step, report.loss, report.learningRate,
                                report.gradNorm, report.evalLoss});
  }
  report.epoch = run.data ? run.data->epochProgress() : 0;
  run.progress->step(report);

  metrics = StepMetrics();
  metrics.step = step;
  metrics.loss = report.loss;
  metrics.learningRate = report.learningRate;
  metrics.gradNorm = report.gradNorm;
  metrics.seconds = report.seconds;
  metrics.tokensPerSecond =
      static_cast<double>(run.microBatch * run.sequenceLen * run.globalMicro) /
      std::max(report.seconds, 1e-9);
  metrics.epoch = report.epoch;
  metrics.evalLoss = report.evalLoss;
  metrics.lossScale = report.lossScale;
  metrics.skipped = report.skipped;
  if (observer) {
    observer(metrics);
  }

  bool stop = takeStopRequest(run, step);
  if (run.comm) {
    // Every rank stops after the same step, whichever was asked to.
    double anyStop = stop ? 1 : 0;
    if (std::string problem = sumOverRanks(run, &anyStop, 1);
        !problem.empty()) {
      return "step " + std::to_string(step) + ": " + problem;
    }
    stop = anyStop > 0;
  }
  if ((run.saveSteps > 0 && step % run.saveSteps == 0) ||
      step == run.maxSteps || stop) {
    if (std::string problem = checkpoint(run, run.options.outputDir);
        !problem.empty()) {
      return problem;
    }
  }
  if (stop && step < run.maxSteps) {
    run.progress->clearBar();
    run.result.interrupted = metrics.stopped = true;
    std::fprintf(run.out, "interrupted: checkpoint written to %s\n",
                 run.result.lastCheckpoint.c_str());
    std::fflush(run.out);
  }
  return "";
}

/// A fed batch must be this rank's whole step: accumulation x micro-batch
/// rows of the plan's sequence length, token ids in the vocabulary, labels
/// in it or -100 (ignored).
std::string checkFedBatch(const Run &run, const int64_t *inputIds,
                          const int64_t *labels, int64_t rows,
                          int64_t sequenceLen) {
  int64_t expected = run.accumulation * run.microBatch;
  if (!inputIds || rows != expected || sequenceLen != run.sequenceLen) {
    return run.name() + ": a step takes " + std::to_string(expected) +
           " sequences of " + std::to_string(run.sequenceLen) +
           " tokens (gradient_accumulation_steps x micro_batch_size), got " +
           (inputIds ? std::to_string(rows) + " of " +
                           std::to_string(sequenceLen)
                     : std::string("no input ids"));
  }
  int64_t vocab = run.training->vocab_size();
  size_t count = static_cast<size_t>(rows * sequenceLen);
  for (size_t i = 0; i < count; ++i) {
    bool badId = inputIds[i] < 0 || (vocab > 0 && inputIds[i] >= vocab);
    bool badLabel = labels && labels[i] != -100 &&
                    (labels[i] < 0 || (vocab > 0 && labels[i] >= vocab));
    if (badId || badLabel) {
      return run.name() + ": " + (badId ? "token id " : "label ") +
             std::to_string(badId ? inputIds[i] : labels[i]) +
             " at sequence " + std::to_string(i / sequenceLen) +
             ", position " + std::to_string(i % sequenceLen) +
             " is outside the vocabulary [0, " + std::to_string(vocab) + ")";
    }
  }
  return "";
}

/// Writes the final weights directly in the output directory and says so.
std::string finishRun(Run &run) {
  if (std::string problem = exportWeights(run, run.options.outputDir);
      !problem.empty()) {
    return problem;
  }
  TrainResult &result = run.result;
  if (result.lastCheckpoint.empty()) {
    // Resumed at max_steps: the checkpoint already exists.
    result.lastCheckpoint =
        checkpointPath(run.options.outputDir, result.finalStep);
  }
  std::fprintf(run.out, "done: step %" PRId64 ", %s written to %s\n",
               result.finalStep,
               run.layout.adapter.isAdapter() ? "adapter" : "model",
               run.options.outputDir.c_str());
  std::fflush(run.out);
  return "";
}

/// Sets up the run once the launch is known: plan, session, settings, data,
/// output directory and starting weights.
std::string openRun(Run &run) {
  for (auto stage : {openPlan, bindSlots, readSettings, openData}) {
    if (std::string problem = stage(run); !problem.empty()) {
      return problem;
    }
  }
  const auto &ops = *run.plan->root().ops();
  run.hasCopies = std::any_of(ops.begin(), ops.end(), [](const fb::Op *op) {
    return op->step_type() == fb::Step::Copy;
  });
  if (std::string problem = startState(run, run.state); !problem.empty()) {
    return problem;
  }
  run.result.startStep = run.result.finalStep = run.state.globalStep;
  run.ids.resize(static_cast<size_t>(run.microBatch * run.sequenceLen));
  run.targets.resize(run.ids.size());
  if (run.positionIds.buffer >= 0) {
    run.positions.resize(run.ids.size());
  }
  run.maskOnes.assign(run.ids.size(), 1);
  return "";
}

/// Prefixes an error with the rank on several ranks.
std::string onRank(const Run &run, std::string problem) {
  if (!problem.empty() && run.world > 1) {
    return "rank " + std::to_string(run.rank) + ": " + problem;
  }
  return problem;
}

} // namespace

std::unique_ptr<Trainer> Trainer::open(const TrainOptions &options,
                                       std::shared_ptr<LoadedPlan> plan,
                                       std::string &error) {
  comm::LaunchInfo launch;
  if (std::string problem = comm::detectLaunch(launch); !problem.empty()) {
    error = problem;
    return nullptr;
  }
  auto run = std::make_unique<TrainerRun>(options);
  run->launch = launch;
  run->rank = run->result.rank = launch.rank;
  run->world = run->result.worldSize = launch.worldSize;
  run->plan = std::move(plan);
  // Only rank 0 prints (and a quiet run not at all): the others' notes,
  // warnings and progress go to a sink, and their errors come back
  // prefixed with their rank.
  if (launch.rank != 0 || options.quiet) {
    run->sink.reset(std::fopen("/dev/null", "w"));
    if (!run->sink) {
      error = onRank(*run, std::string("cannot open /dev/null: ") +
                               std::strerror(errno));
      return nullptr;
    }
    run->out = run->err = run->sink.get();
  }
  if (std::string problem = openRun(*run); !problem.empty()) {
    error = onRank(*run, problem);
    return nullptr;
  }
  return std::unique_ptr<Trainer>(new Trainer(std::move(run)));
}

Trainer::Trainer(std::unique_ptr<TrainerRun> run) : impl(std::move(run)) {}

Trainer::~Trainer() = default;

std::string Trainer::step(StepMetrics &metrics, const StepObserver &observer) {
  Run &run = *impl;
  if (!run.data) {
    return run.name() + ": this trainer has no data path; feed each step's "
                        "batch (tailor_trainer_step_batch)";
  }
  if (finished()) {
    return run.name() + ": already at step " +
           std::to_string(run.state.globalStep) + ", the last (max_steps " +
           std::to_string(run.maxSteps) + ")";
  }
  return onRank(run, loopStep(run, metrics, observer));
}

std::string Trainer::checkBatch(const int64_t *inputIds, const int64_t *labels,
                                int64_t rows, int64_t sequenceLen) const {
  const Run &run = *impl;
  if (run.data) {
    return run.name() + ": this trainer reads its data from " +
           run.options.dataPath +
           "; fed batches need a trainer made without a data path";
  }
  return checkFedBatch(run, inputIds, labels, rows, sequenceLen);
}

std::string Trainer::stepWithBatch(const int64_t *inputIds,
                                   const int64_t *labels, int64_t rows,
                                   int64_t sequenceLen, StepMetrics &metrics,
                                   const StepObserver &observer) {
  Run &run = *impl;
  if (std::string problem = checkBatch(inputIds, labels, rows, sequenceLen);
      !problem.empty()) {
    return problem;
  }
  if (finished()) {
    return run.name() + ": already at step " +
           std::to_string(run.state.globalStep) + ", the last (max_steps " +
           std::to_string(run.maxSteps) + ")";
  }
  run.fedIds = inputIds;
  run.fedLabels = labels;
  std::string problem = onRank(run, loopStep(run, metrics, observer));
  run.fedIds = run.fedLabels = nullptr;
  return problem;
}

std::string Trainer::run(const StepObserver &observer) {
  Run &run = *impl;
  if (!run.data) {
    return run.name() + ": this trainer has no data path to run on; feed "
                        "each step's batch (tailor_trainer_step_batch)";
  }
  // (Returning early destroys the guard, which restores the handlers.)
  SignalGuard signals(run.options.handleSignals);
  if (std::string problem = startProgress(run); !problem.empty()) {
    return onRank(run, problem);
  }
  while (!finished()) {
    StepMetrics metrics;
    if (std::string problem = loopStep(run, metrics, observer);
        !problem.empty()) {
      if (run.progress) {
        run.progress->clearBar();
      }
      return onRank(run, problem);
    }
    if (metrics.stopped) {
      return "";
    }
  }
  run.progress->clearBar();
  return finish();
}

std::string Trainer::evaluate(double &loss) {
  Run &run = *impl;
  if (!run.validation) {
    return run.name() + ": no validation data (compile with val_set_size "
                        "or give eval data)";
  }
  return onRank(run, train::evaluate(run, run.state.globalStep, loss));
}

std::string Trainer::saveCheckpoint(const std::string &outputDir) {
  Run &run = *impl;
  return onRank(run, checkpoint(run, outputDir.empty() ? run.options.outputDir
                                                       : outputDir));
}

std::string Trainer::resume(const std::string &from) {
  Run &run = *impl;
  if (from.empty()) {
    return "no checkpoint given to resume from";
  }
  TrainerState state = run.state;
  run.options.resume = from;
  if (std::string problem = resumeFrom(run, state); !problem.empty()) {
    return onRank(run, problem);
  }
  run.state = std::move(state);
  if (std::string problem = syncLayout(*run.session, run.layout, false);
      !problem.empty()) {
    return onRank(run, run.name() + ": " + problem);
  }
  run.result.startStep = run.result.finalStep = run.state.globalStep;
  // Progress restarts at the resumed step (metrics.jsonl is cut there).
  run.progress.reset();
  return "";
}

std::string Trainer::exportModel(const std::string &dir) {
  if (dir.empty()) {
    return "no directory given to export the weights to";
  }
  return onRank(*impl, exportWeights(*impl, dir));
}

std::string Trainer::finish() { return onRank(*impl, finishRun(*impl)); }

void Trainer::requestStop() { impl->stop = true; }

int64_t Trainer::globalStep() const { return impl->state.globalStep; }

int64_t Trainer::maxSteps() const { return impl->maxSteps; }

int64_t Trainer::tokensPerStep() const {
  return impl->microBatch * impl->sequenceLen * impl->globalMicro;
}

bool Trainer::trainsAdapter() const { return impl->layout.adapter.isAdapter(); }

bool Trainer::hasValidation() const { return impl->validation != nullptr; }

bool Trainer::readsData() const { return impl->data != nullptr; }

const TrainResult &Trainer::result() const { return impl->result; }

const std::string &Trainer::lastCheckpoint() const {
  return impl->result.lastCheckpoint;
}

std::string runTraining(const TrainOptions &options, TrainResult &result) {
  result = TrainResult();
  // Where this process sits, also when the run fails to open (Trainer::open
  // detects the same launch).
  comm::LaunchInfo launch;
  if (comm::detectLaunch(launch).empty()) {
    result.rank = launch.rank;
    result.worldSize = launch.worldSize;
  }
  std::string error;
  std::unique_ptr<Trainer> trainer = Trainer::open(options, nullptr, error);
  if (!trainer) {
    return error;
  }
  error = trainer->run();
  result = trainer->result();
  return error;
}

} // namespace tailor::train
