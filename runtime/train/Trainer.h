//===- Trainer.h - the training loop behind `tailor train` ------*- C++ -*-===//
//
// Drives a compiled training plan: each step runs the plan's `train_step`
// entry on gradient_accumulation_steps micro-batches (gradients accumulate
// inside the plan), then `optimizer_step` once. With validation data (the
// plan's val_set_size, or --eval-data), every eval_steps steps and at the
// end it also reports the validation loss, computed through `train_step`
// with the gradients it adds zeroed again, so evaluating never changes
// training. Around that loop it reads
// the data, reports progress (stdout lines in llm.c's style, a live bar on a
// terminal's stderr, DIR/metrics.jsonl), writes checkpoints, and resumes from
// them bit-identically.
//
// On several ranks (`mpirun -np N tailor train ...` or torchrun for CPU
// plans, MPI or Gloo carrying their collectives; NCCL for GPU plans, under
// mpirun or torchrun) the plan's world_size must be the launch's. A global batch is micro_batch_size x accumulation x N
// sequences, read in the order one rank with N times the accumulation
// would read them; rank r trains on micro-batches r x accumulation ..
// (r + 1) x accumulation - 1 of it (DistributedSampler semantics) and the
// loader's position stays the global one, so checkpoints resume under any
// world size. Losses (training and validation) and tokens/s are over all
// ranks, so N ranks report what one rank reports at the same global batch.
// Rank 0 alone prints progress, writes metrics.jsonl, checkpoints and the
// final weights (replicated state: its copy is the whole); the others
// print only their errors, prefixed "rank N: ". A stop request on any rank
// stops every rank after the same step.
//
// The loop is the Trainer class, which the C API's tailor_trainer drives a
// step at a time or to the end; `tailor train` and tailor-train are clients
// of that API, and runTraining is Trainer::open + Trainer::run.
//
// fp16 plans (the plan's loss_scaling) run torch.amp.GradScaler's dynamic
// loss scaling (runtime/train/LossScaler.h): each step feeds the scale,
// a step whose gradients hold an inf or NaN is skipped (reported, not an
// error: the scale backs off), and checkpoints keep the scaler's state.
// Other plans stop on a non-finite gradient norm.
//
// SIGINT and SIGTERM do not kill a run: the current step finishes, a
// checkpoint is written, and the run returns success. For deterministic
// tests, TAILOR_TRAIN_STOP_AFTER=N makes the run behave exactly as if SIGINT
// arrived during step N.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TRAIN_TRAINER_H
#define TAILOR_RUNTIME_TRAIN_TRAINER_H

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tailor::runtime {
class LoadedPlan;
} // namespace tailor::runtime

namespace tailor::train {

struct TrainOptions {
  std::string planPath;
  /// A file, directory, glob or "dummy" (see DataOptions::path); empty:
  /// the caller feeds each step's batch (Trainer::stepWithBatch).
  std::string dataPath;
  /// Validation data (a file, directory or glob, read like the training
  /// data, in order); "" for none, or the plan's val_set_size held out of
  /// the training data.
  std::string evalDataPath;
  /// Element type of raw .bin token files: "uint16" or "uint32".
  std::string dataDType = "uint16";
  /// Steps to train to; 0 takes the plan's max_steps.
  int64_t maxSteps = 0;
  std::string outputDir;
  /// "" starts fresh; "latest" resumes from the newest complete checkpoint
  /// in outputDir (starting fresh if there is none); anything else is a
  /// checkpoint directory.
  std::string resume;
  /// A PEFT adapter directory whose weights start the LoRA parameters.
  std::string initAdapter;
  /// Worker threads; 0 lets the runtime choose.
  int threads = 0;
  /// Checkpoint every this many steps; -1 takes the plan's save_steps, 0
  /// saves only at the end.
  int64_t saveSteps = -1;
  /// Behave as if SIGINT arrived during this step; -1 reads
  /// TAILOR_TRAIN_STOP_AFTER from the environment (tests only).
  int64_t stopAfterStep = -1;
  /// Install SIGINT/SIGTERM handlers for the duration of Trainer::run.
  bool handleSignals = true;
  /// Where progress lines go (stdout) and the live bar and notes (stderr).
  FILE *out = stdout;
  FILE *err = stderr;
  /// Print nothing (progress, notes, warnings): `out` and `err` are
  /// ignored. metrics.jsonl is written all the same.
  bool quiet = false;
  /// Writes the launches of the first `traceSteps` steps of this run as a
  /// Chrome/Perfetto trace (runtime/Timeline.h) to this file; "" for none.
  std::string tracePath;
  int64_t traceSteps = 1;
};

struct TrainResult {
  /// The step the run started from (a resumed checkpoint's, or 0) and the
  /// last step completed.
  int64_t startStep = 0;
  int64_t finalStep = 0;
  /// Stopped early by a signal or TAILOR_TRAIN_STOP_AFTER.
  bool interrupted = false;
  /// The last checkpoint written, if any.
  std::string lastCheckpoint;
  /// The mean micro-batch loss of the last step (over every rank's
  /// micro-batches).
  double lastLoss = 0;
  /// This process's rank and the launch's world size.
  int rank = 0;
  int worldSize = 1;
};

/// The first of the `accumulation` consecutive micro-batches rank `rank`
/// trains on in each global batch (see the file comment).
inline int64_t firstMicroBatchOfRank(int rank, int64_t accumulation) {
  return static_cast<int64_t>(rank) * accumulation;
}

/// What one optimizer step reports.
struct StepMetrics {
  int64_t step = 0;
  /// The mean micro-batch loss over every rank's micro-batches.
  double loss = 0;
  double learningRate = 0;
  /// The gradient norm before clipping.
  double gradNorm = 0;
  double seconds = 0;
  /// Tokens of the global batch over `seconds`.
  double tokensPerSecond = 0;
  /// Passes over the training data so far (fractional).
  double epoch = 0;
  /// The validation loss, when this step computed it (eval_steps, or the
  /// last step).
  std::optional<double> evalLoss;
  /// fp16 plans: the loss scale this step used, and whether an inf/NaN
  /// gradient skipped its update (runtime/train/LossScaler.h).
  std::optional<double> lossScale;
  bool skipped = false;
  /// A stop was asked for (signal, requestStop, TAILOR_TRAIN_STOP_AFTER)
  /// before max_steps: a checkpoint of this step was written and a run
  /// ends here.
  bool stopped = false;
};

/// Sees each step's metrics, after the step's validation and before its
/// checkpoint decision (so it may call Trainer::requestStop).
using StepObserver = std::function<void(const StepMetrics &)>;

struct TrainerRun;

/// One training run, driven a step at a time (the C API's tailor_trainer)
/// or to the end (`tailor train`). Every call returns "" or an error that
/// names the plan, file, step or place. On several ranks every rank makes
/// the same calls in the same order (they are collective).
class Trainer {
public:
  /// Loads options.planPath unless `plan` is given, joins the launch, binds
  /// a session, opens the data, prepares the output directory and sets the
  /// starting weights (options.initAdapter, then options.resume). Null and
  /// `error` otherwise.
  static std::unique_ptr<Trainer>
  open(const TrainOptions &options, std::shared_ptr<runtime::LoadedPlan> plan,
       std::string &error);
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  /// Trains one optimizer step: gradient_accumulation_steps micro-batches,
  /// the update, validation when due, metrics.jsonl and progress, the
  /// checkpoint when due (save_steps, the last step, or a stop). Fails
  /// when already at max_steps.
  std::string step(StepMetrics &metrics, const StepObserver &observer = {});
  /// Trains one optimizer step on a batch the caller gives (a trainer
  /// opened without a data path): this rank's gradient_accumulation_steps x
  /// micro_batch_size sequences of sequence_len tokens, row-major, and
  /// their labels (null: the ids; -100 is ignored). Checked before anything
  /// runs. Checkpoints then hold no data position: resuming, the caller
  /// feeds from where it left off.
  /// Why stepWithBatch would refuse this batch before running anything (a
  /// trainer that reads a data path, a wrong shape, an id or label outside
  /// the vocabulary), or "".
  std::string checkBatch(const int64_t *inputIds, const int64_t *labels,
                         int64_t rows, int64_t sequenceLen) const;
  std::string stepWithBatch(const int64_t *inputIds, const int64_t *labels,
                            int64_t rows, int64_t sequenceLen,
                            StepMetrics &metrics,
                            const StepObserver &observer = {});
  /// Steps to max_steps, or to a stop (then the run ends after that step's
  /// checkpoint), and then writes the final weights into the output
  /// directory. With options.handleSignals, SIGINT and SIGTERM stop it.
  std::string run(const StepObserver &observer = {});
  /// The validation loss now (fails without validation data); training
  /// state is left as it was, bit for bit.
  std::string evaluate(double &loss);
  /// Writes `outputDir`/checkpoint-<step> (the run's output directory when
  /// empty); lastCheckpoint() then names it.
  std::string saveCheckpoint(const std::string &outputDir);
  /// Restores a checkpoint directory ("latest": the newest in the output
  /// directory, or none, which leaves the run as it is): weights, optimizer
  /// state, step and data position.
  std::string resume(const std::string &from);
  /// Writes the PEFT adapter (or, full fine-tuning, the model) of the
  /// current weights into `dir`, created if needed.
  std::string exportModel(const std::string &dir);
  /// exportModel into the output directory and the final "done" line.
  std::string finish();
  /// Asks the run to stop after its current (or next) step, as SIGINT
  /// does. Safe from any thread.
  void requestStop();

  /// The last completed step, and the step the run trains to.
  int64_t globalStep() const;
  int64_t maxSteps() const;
  bool finished() const { return globalStep() >= maxSteps(); }
  /// Tokens of one global batch (micro-batch x sequence x accumulation x
  /// ranks).
  int64_t tokensPerStep() const;
  /// Whether the plan trains an adapter (else the whole model).
  bool trainsAdapter() const;
  bool hasValidation() const;
  /// Whether it reads a data path (else the caller feeds its batches).
  bool readsData() const;
  const TrainResult &result() const;
  const std::string &lastCheckpoint() const;

private:
  explicit Trainer(std::unique_ptr<TrainerRun> run);
  std::unique_ptr<TrainerRun> impl;
};

/// Runs the training loop (Trainer::open, then Trainer::run); returns "" on
/// success (interrupted runs included) or an error message that names the
/// file, step or place.
std::string runTraining(const TrainOptions &options, TrainResult &result);

/// Asks a running loop to stop after its current step, as SIGINT does.
/// Async-signal-safe.
void requestTrainingStop();

/// The value fed to the plan's `seed` input (dropout) for micro-batch
/// `micro` of step `step`: a hash of the three, non-negative, so resumed
/// and uninterrupted runs draw the same masks.
int64_t dropoutSeed(uint64_t seed, int64_t step, int64_t micro);

} // namespace tailor::train

#endif // TAILOR_RUNTIME_TRAIN_TRAINER_H
