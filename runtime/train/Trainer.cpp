//===- Trainer.cpp - the training loop behind `tailor train` --------------===//

#include "runtime/train/Trainer.h"

#include "runtime/Session.h"
#include "runtime/train/AtomicFile.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/DataLoader.h"
#include "runtime/train/Progress.h"

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstring>

namespace tailor::train {

namespace fb = tailor::plan;
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

float readScalar(const Slot &slot) {
  float value;
  std::memcpy(&value, slot.data, sizeof(value));
  return value;
}

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

std::string runTraining(const TrainOptions &options, TrainResult &result) {
  result = TrainResult();
  FILE *out = options.out;
  FILE *err = options.err;

  // --- The plan and its entries ----------------------------------------------
  std::string error;
  std::unique_ptr<LoadedPlan> plan =
      LoadedPlan::load(options.planPath, runtime::LoadOptions(), error);
  if (!plan) {
    return error;
  }
  const fb::Plan &root = plan->root();
  const fb::Training *training = root.training();
  int status = 0;
  std::unique_ptr<Session> session =
      Session::create(*plan, options.threads, error, status);
  if (!session) {
    return error;
  }
  int trainEntry = session->findEntry("train_step");
  int optimizerEntry = session->findEntry("optimizer_step");
  if (trainEntry < 0 || optimizerEntry < 0 || !training) {
    return plan->name() + ": not a training plan (no " +
           (trainEntry < 0       ? "train_step entry"
            : optimizerEntry < 0 ? "optimizer_step entry"
                                 : "training section") +
           "); compile it with a recipe";
  }
  int64_t microBatch = training->micro_batch_size();
  int64_t sequenceLen = training->sequence_len();
  int64_t accumulation = std::max(1, training->gradient_accumulation_steps());
  if (microBatch <= 0 || sequenceLen <= 0) {
    return plan->name() + ": micro_batch_size and sequence_len must be "
                          "positive";
  }
  Slot inputIds, labels, seedSlot, loss, stepSlot, lr, gradNorm;
  std::vector<int64_t> tokenShape = {microBatch, sequenceLen};
  std::vector<DType> ints = {DType::I64, DType::I32};
  std::vector<DType> floats = {DType::F32};
  if (std::string problem = bindEntry(
          *plan, *session, root.inputs(), trainEntry, "train_step", "input",
          {{"input_ids", true, tokenShape, ints, &inputIds},
           {"labels", true, tokenShape, ints, &labels},
           {"seed", false, {}, ints, &seedSlot}});
      !problem.empty()) {
    return problem;
  }
  if (std::string problem =
          bindEntry(*plan, *session, root.outputs(), trainEntry, "train_step",
                    "output", {{"loss", true, {}, floats, &loss}});
      !problem.empty()) {
    return problem;
  }
  if (std::string problem = bindEntry(*plan, *session, root.inputs(),
                                      optimizerEntry, "optimizer_step", "input",
                                      {{"step", true, {}, ints, &stepSlot}});
      !problem.empty()) {
    return problem;
  }
  if (std::string problem =
          bindEntry(*plan, *session, root.outputs(), optimizerEntry,
                    "optimizer_step", "output",
                    {{"lr", true, {}, floats, &lr},
                     {"grad_norm", true, {}, floats, &gradNorm}});
      !problem.empty()) {
    return problem;
  }
  CheckpointLayout layout;
  if (!buildCheckpointLayout(*plan, *session, layout, error)) {
    return error;
  }

  int64_t maxSteps =
      options.maxSteps > 0 ? options.maxSteps : training->max_steps();
  if (maxSteps <= 0) {
    return plan->name() + ": the plan sets no max_steps; pass --max-steps";
  }
  int64_t saveSteps =
      options.saveSteps >= 0 ? options.saveSteps : training->save_steps();
  int64_t loggingSteps = std::max<int64_t>(1, training->logging_steps());
  int64_t stopAfter = options.stopAfterStep;
  if (stopAfter < 0) {
    if (const char *text = std::getenv("TAILOR_TRAIN_STOP_AFTER")) {
      stopAfter = std::strtoll(text, nullptr, 10);
    }
  }
  if (options.outputDir.empty()) {
    return "no output directory given";
  }

  // --- Data, starting weights, resuming --------------------------------------
  DataOptions dataOptions;
  dataOptions.path = options.dataPath;
  dataOptions.tokenDType = options.dataDType;
  dataOptions.sequenceLen = sequenceLen;
  dataOptions.microBatchSize = microBatch;
  dataOptions.vocabSize = training->vocab_size();
  dataOptions.shuffle = training->shuffle();
  dataOptions.seed = training->seed();
  std::unique_ptr<DataLoader> data = DataLoader::open(dataOptions, error);
  if (!data) {
    return error;
  }
  if (!makeDirectories(options.outputDir, error)) {
    return error;
  }
  // A run killed mid-write left temporaries no one else removes.
  StaleTemporaries stale;
  if (!removeStaleTemporaries(options.outputDir, stale, error)) {
    return error;
  }
  if (!stale.empty()) {
    std::fprintf(err, "tailor train: %s\n",
                 stale.describe(options.outputDir).c_str());
  }
  if (!options.initAdapter.empty() &&
      !loadPeftAdapter(layout, options.initAdapter, error)) {
    return error;
  }
  // What was read into host copies goes to the GPU before the first step.
  auto pushToDevice = [&]() { return syncLayout(*session, layout, false); };
  TrainerState state;
  state.seed = training->seed();
  state.fingerprint = layout.fingerprint;
  if (options.resume.empty()) {
    if (std::string old = findLatestCheckpoint(options.outputDir);
        !old.empty()) {
      std::fprintf(err,
                   "tailor train: warning: starting at step 0 although %s "
                   "exists (pass --resume to continue from it)\n",
                   old.c_str());
    }
  } else {
    std::string from = options.resume;
    if (from == "latest") {
      from = findLatestCheckpoint(options.outputDir);
      if (from.empty()) {
        std::fprintf(err,
                     "tailor train: no checkpoint in %s; starting at "
                     "step 0\n",
                     options.outputDir.c_str());
      }
    }
    if (!from.empty()) {
      if (!loadCheckpoint(layout, from, state, error)) {
        return error;
      }
      if (state.globalStep > maxSteps) {
        return from + ": the checkpoint is at step " +
               std::to_string(state.globalStep) + ", past max_steps " +
               std::to_string(maxSteps);
      }
      if (!data->setPosition(state.data, error)) {
        return from + ": " + error;
      }
      if (state.seed != training->seed()) {
        std::fprintf(err,
                     "tailor train: warning: %s was trained with seed "
                     "%" PRIu64 ", the plan has %" PRIu64 "\n",
                     from.c_str(), state.seed, training->seed());
        state.seed = training->seed();
      }
      std::fprintf(out, "resuming from %s (step %" PRId64 ")\n", from.c_str(),
                   state.globalStep);
    }
  }
  if (std::string problem = pushToDevice(); !problem.empty()) {
    return plan->name() + ": " + problem;
  }
  result.startStep = result.finalStep = state.globalStep;
  int64_t tokensPerStep = microBatch * sequenceLen * accumulation;
  Progress progress(out, err, state.globalStep, maxSteps, tokensPerStep);
  if (!progress.openMetrics(options.outputDir + "/" + kMetricsFile, error)) {
    return error;
  }

  std::fprintf(out,
               "training %s: %s, %" PRId64 " x %" PRId64 " tokens x %" PRId64
               " accumulation = %" PRId64 " tokens/step, ",
               plan->name().c_str(), layout.adapter.variant.c_str(), microBatch,
               sequenceLen, accumulation, tokensPerStep);
  if (state.globalStep < maxSteps) {
    std::fprintf(out, "steps %" PRId64 "..%" PRId64 "\n", state.globalStep + 1,
                 maxSteps);
  } else {
    std::fprintf(out, "already at step %" PRId64 "\n", maxSteps);
  }
  std::fprintf(out, "data %s\n", data->describe().c_str());
  if (!data->warning().empty()) {
    std::fprintf(err, "tailor train: warning: %s\n", data->warning().c_str());
  }
  std::fflush(out);

  // --- The loop --------------------------------------------------------------
  // (Returning early destroys `progress`, which erases the bar first.)
  SignalGuard signals(options.handleSignals);
  std::vector<int64_t> ids(static_cast<size_t>(microBatch * sequenceLen));
  std::vector<int64_t> targets(ids.size());
  for (int64_t step = state.globalStep + 1; step <= maxSteps; ++step) {
    auto start = std::chrono::steady_clock::now();
    double lossSum = 0;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      data->next(ids.data(), targets.data());
      writeInts(inputIds, ids.data(), ids.size());
      writeInts(labels, targets.data(), targets.size());
      if (seedSlot.buffer >= 0) {
        int64_t seed = dropoutSeed(training->seed(), step, micro);
        writeInts(seedSlot, &seed, 1);
      }
      if (std::string problem = session->runEntry(trainEntry);
          !problem.empty()) {
        return "step " + std::to_string(step) + ", micro-batch " +
               std::to_string(micro) + ": " + problem;
      }
      float value = readScalar(loss);
      if (!std::isfinite(value)) {
        return "step " + std::to_string(step) + ": loss is " +
               (std::isnan(value) ? "nan" : "inf") + " (micro-batch " +
               std::to_string(micro) + "); stopped without a checkpoint";
      }
      lossSum += value;
    }
    writeInts(stepSlot, &step, 1);
    if (std::string problem = session->runEntry(optimizerEntry);
        !problem.empty()) {
      return "step " + std::to_string(step) + ", optimizer step: " + problem;
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    double stepLoss = lossSum / static_cast<double>(accumulation);
    double stepLr = readScalar(lr);
    double stepNorm = readScalar(gradNorm);
    if (!std::isfinite(stepNorm)) {
      return "step " + std::to_string(step) + ": gradient norm is " +
             (std::isnan(stepNorm) ? "nan" : "inf") +
             "; stopped without a checkpoint";
    }
    state.globalStep = result.finalStep = step;
    state.data = data->position();
    result.lastLoss = stepLoss;
    bool log = step % loggingSteps == 0 || step == maxSteps ||
               step == result.startStep + 1;
    if (log) {
      state.logHistory.push_back({step, stepLoss, stepLr, stepNorm});
    }
    progress.step({step, stepLoss, stepLr, stepNorm, seconds,
                   data->epochProgress(), log});

    // The flag is read once: a signal after this point (during the write,
    // say) only sets it again, and the next step sees it.
    bool stop = stopRequested != 0 || step == stopAfter;
    if ((saveSteps > 0 && step % saveSteps == 0) || step == maxSteps || stop) {
      if (std::string problem = syncLayout(*session, layout, true);
          !problem.empty()) {
        return plan->name() + ": " + problem;
      }
      if (!saveCheckpoint(layout, state, options.outputDir, error)) {
        return error;
      }
      result.lastCheckpoint = checkpointPath(options.outputDir, step);
    }
    if (stop && step < maxSteps) {
      progress.clearBar();
      result.interrupted = true;
      std::fprintf(out, "interrupted: checkpoint written to %s\n",
                   result.lastCheckpoint.c_str());
      std::fflush(out);
      return "";
    }
  }
  progress.clearBar();

  // The final weights directly in the output directory, so
  // PeftModel.from_pretrained(model, DIR) loads them.
  if (std::string problem = syncLayout(*session, layout, true);
      !problem.empty()) {
    return plan->name() + ": " + problem;
  }
  if (!writeModelFiles(layout, options.outputDir, error)) {
    return error;
  }
  if (result.lastCheckpoint.empty()) {
    // Resumed at max_steps: the checkpoint already exists.
    result.lastCheckpoint = checkpointPath(options.outputDir, result.finalStep);
  }
  std::fprintf(out, "done: step %" PRId64 ", %s written to %s\n",
               result.finalStep,
               layout.adapter.isAdapter() ? "adapter" : "model",
               options.outputDir.c_str());
  std::fflush(out);
  return "";
}

} // namespace tailor::train
