//===- CApiTrainer.cpp - the C API's trainer over train::Trainer ----------===//
//
// tailor_trainer is a train::Trainer behind a checked handle: the options
// struct becomes TrainOptions, every std::string error becomes a status and
// tailor_last_error, and the metrics callback is a StepObserver.
//
//===----------------------------------------------------------------------===//

#include "runtime/CApiHandles.h"
#include "runtime/Status.h"
#include "runtime/train/Trainer.h"

#include <cstring>

using namespace tailor::runtime;
using tailor::train::StepMetrics;
using tailor::train::Trainer;

namespace {

/// TrainOptions from the C struct; an error for what is missing or out of
/// range.
tailor_status convertOptions(const tailor_trainer_options *in,
                             tailor::train::TrainOptions &out) {
  if (!in) {
    return fail(TAILOR_ERROR_INVALID_ARGUMENT, "options is null");
  }
  if (!in->output_dir || !*in->output_dir) {
    return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                "options.output_dir is required");
  }
  std::string dtype = in->data_dtype ? in->data_dtype : "uint16";
  if (dtype != "uint16" && dtype != "uint32") {
    return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                "options.data_dtype must be uint16 or uint32, not '" + dtype +
                    "'");
  }
  if (in->max_steps < 0 || in->num_threads < 0 || in->save_steps < -1 ||
      in->trace_steps < 0) {
    return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                "options.max_steps, num_threads and trace_steps must not be "
                "negative, and save_steps not below -1");
  }
  out.dataPath = in->data_path ? in->data_path : "";
  out.dataDType = dtype;
  out.evalDataPath = in->eval_data_path ? in->eval_data_path : "";
  out.outputDir = in->output_dir;
  out.resume = in->resume ? in->resume : "";
  out.initAdapter = in->init_adapter ? in->init_adapter : "";
  out.tracePath = in->trace_path ? in->trace_path : "";
  out.traceSteps = in->trace_steps > 0 ? in->trace_steps : 1;
  out.maxSteps = in->max_steps;
  out.saveSteps = in->save_steps;
  out.threads = in->num_threads;
  out.quiet = in->print_progress == 0;
  out.handleSignals = in->handle_signals != 0;
  return ok();
}

/// A step asked of a trainer already at max_steps.
tailor_status refuseFinished(const Trainer &t) {
  return fail(TAILOR_ERROR_INVALID_ARGUMENT,
              "the trainer is already at step " +
                  std::to_string(t.globalStep()) + ", its last (max_steps " +
                  std::to_string(t.maxSteps()) + ")");
}

tailor_train_metrics metricsOf(const StepMetrics &in) {
  tailor_train_metrics out;
  std::memset(&out, 0, sizeof(out));
  out.step = in.step;
  out.loss = in.loss;
  out.lr = in.learningRate;
  out.grad_norm = in.gradNorm;
  out.tokens_per_s = in.tokensPerSecond;
  out.seconds = in.seconds;
  out.epoch = in.epoch;
  out.has_eval_loss = in.evalLoss ? 1 : 0;
  out.eval_loss = in.evalLoss ? *in.evalLoss : 0.0;
  out.stopped = in.stopped ? 1 : 0;
  out.loss_scale = in.lossScale ? *in.lossScale : 0.0;
  out.skipped = in.skipped ? 1 : 0;
  return out;
}

/// The status of a trainer call that returned `problem`.
tailor_status outcome(const std::string &problem) {
  return problem.empty() ? ok() : fail(TAILOR_ERROR_EXECUTION, problem);
}

tailor_status createTrainer(std::shared_ptr<LoadedPlan> plan,
                            const tailor::train::TrainOptions &options,
                            tailor_trainer **trainer) {
  std::string error;
  std::unique_ptr<Trainer> created =
      Trainer::open(options, std::move(plan), error);
  if (!created) {
    return fail(TAILOR_ERROR_EXECUTION, error);
  }
  *trainer = new tailor_trainer{std::move(created), ""};
  liveTrainers().add(*trainer);
  return ok();
}

} // namespace

extern "C" {

void tailor_trainer_options_init(tailor_trainer_options *options) {
  if (!options) {
    return;
  }
  std::memset(options, 0, sizeof(*options));
  options->trace_steps = 1;
  options->save_steps = -1;
}

tailor_status tailor_trainer_create(const tailor_plan *plan,
                                    const tailor_trainer_options *options,
                                    tailor_trainer **trainer) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(plan)) {
      return badPlan(plan);
    }
    if (!trainer) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "trainer is null");
    }
    *trainer = nullptr;
    tailor::train::TrainOptions converted;
    if (tailor_status status = convertOptions(options, converted);
        status != TAILOR_OK) {
      return status;
    }
    converted.planPath = plan->plan->name();
    return createTrainer(plan->plan, converted, trainer);
  });
}

tailor_status
tailor_trainer_create_from_file(const char *plan_path,
                                const tailor_trainer_options *options,
                                tailor_trainer **trainer) {
  return guard(__func__, [&]() -> tailor_status {
    if (!plan_path || !trainer) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "plan_path and trainer must not be null");
    }
    *trainer = nullptr;
    tailor::train::TrainOptions converted;
    if (tailor_status status = convertOptions(options, converted);
        status != TAILOR_OK) {
      return status;
    }
    tailor_plan *plan = nullptr;
    if (tailor_status status = tailor_plan_load(plan_path, &plan);
        status != TAILOR_OK) {
      return status;
    }
    // The trainer shares the plan; the handle is not needed past here.
    std::shared_ptr<LoadedPlan> loaded = plan->plan;
    tailor_plan_free(plan);
    converted.planPath = plan_path;
    return createTrainer(std::move(loaded), converted, trainer);
  });
}

void tailor_trainer_free(tailor_trainer *trainer) {
  guardValue(__func__, 0, [&] {
    if (trainer && !liveTrainers().remove(trainer)) {
      badTrainer(trainer);
      return 0;
    }
    delete trainer;
    return 0;
  });
}

tailor_status tailor_trainer_step(tailor_trainer *trainer,
                                  tailor_train_metrics *metrics) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(trainer)) {
      return badTrainer(trainer);
    }
    Trainer &t = *trainer->trainer;
    if (!t.readsData()) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "the trainer has no data_path: feed each step's batch with "
                  "tailor_trainer_step_batch");
    }
    if (t.finished()) {
      return refuseFinished(t);
    }
    StepMetrics step;
    if (std::string problem = t.step(step); !problem.empty()) {
      return fail(TAILOR_ERROR_EXECUTION, problem);
    }
    if (metrics) {
      *metrics = metricsOf(step);
    }
    return ok();
  });
}

tailor_status tailor_trainer_step_batch(tailor_trainer *trainer,
                                        const int64_t *input_ids,
                                        const int64_t *labels, int64_t rows,
                                        int64_t sequence_len,
                                        tailor_train_metrics *metrics) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(trainer)) {
      return badTrainer(trainer);
    }
    Trainer &t = *trainer->trainer;
    if (std::string problem =
            t.checkBatch(input_ids, labels, rows, sequence_len);
        !problem.empty()) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, problem);
    }
    if (t.finished()) {
      return refuseFinished(t);
    }
    StepMetrics step;
    if (std::string problem =
            t.stepWithBatch(input_ids, labels, rows, sequence_len, step);
        !problem.empty()) {
      return fail(TAILOR_ERROR_EXECUTION, problem);
    }
    if (metrics) {
      *metrics = metricsOf(step);
    }
    return ok();
  });
}

tailor_status tailor_trainer_run(tailor_trainer *trainer,
                                 tailor_train_callback callback,
                                 void *user_data) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(trainer)) {
      return badTrainer(trainer);
    }
    Trainer &t = *trainer->trainer;
    if (!t.readsData()) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "the trainer has no data_path to run on: feed each step's "
                  "batch with tailor_trainer_step_batch");
    }
    tailor::train::StepObserver observer;
    if (callback) {
      observer = [&](const StepMetrics &step) {
        tailor_train_metrics metrics = metricsOf(step);
        if (callback(&metrics, user_data) != 0) {
          t.requestStop();
        }
      };
    }
    return outcome(t.run(observer));
  });
}

tailor_status tailor_trainer_evaluate(tailor_trainer *trainer,
                                      double *eval_loss) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(trainer)) {
      return badTrainer(trainer);
    }
    if (!eval_loss) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "eval_loss is null");
    }
    Trainer &t = *trainer->trainer;
    if (!t.hasValidation()) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "the trainer has no validation data (compile with "
                  "val_set_size or set eval_data_path)");
    }
    return outcome(t.evaluate(*eval_loss));
  });
}

tailor_status tailor_trainer_save_checkpoint(tailor_trainer *trainer,
                                             const char *output_dir) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(trainer)) {
      return badTrainer(trainer);
    }
    return outcome(
        trainer->trainer->saveCheckpoint(output_dir ? output_dir : ""));
  });
}

const char *tailor_trainer_last_checkpoint(const tailor_trainer *trainer) {
  return guardValue<const char *>(__func__, nullptr, [&]() -> const char * {
    if (!isLive(trainer)) {
      badTrainer(trainer);
      return nullptr;
    }
    auto *mutableTrainer = const_cast<tailor_trainer *>(trainer);
    mutableTrainer->lastCheckpoint = trainer->trainer->lastCheckpoint();
    return mutableTrainer->lastCheckpoint.c_str();
  });
}

tailor_status tailor_trainer_resume(tailor_trainer *trainer,
                                    const char *checkpoint) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(trainer)) {
      return badTrainer(trainer);
    }
    if (!checkpoint || !*checkpoint) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "checkpoint must name a directory or be \"latest\"");
    }
    return outcome(trainer->trainer->resume(checkpoint));
  });
}

tailor_status tailor_trainer_export(tailor_trainer *trainer, const char *dir) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(trainer)) {
      return badTrainer(trainer);
    }
    if (!dir || !*dir) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "dir must name a directory");
    }
    return outcome(trainer->trainer->exportModel(dir));
  });
}

tailor_status tailor_trainer_request_stop(tailor_trainer *trainer) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(trainer)) {
      return badTrainer(trainer);
    }
    trainer->trainer->requestStop();
    return ok();
  });
}

tailor_status tailor_trainer_get_state(const tailor_trainer *trainer,
                                       tailor_trainer_state *state) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(trainer)) {
      return badTrainer(trainer);
    }
    if (!state) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "state is null");
    }
    const Trainer &t = *trainer->trainer;
    state->step = t.globalStep();
    state->max_steps = t.maxSteps();
    state->tokens_per_step = t.tokensPerStep();
    state->trains_adapter = t.trainsAdapter() ? 1 : 0;
    state->has_validation = t.hasValidation() ? 1 : 0;
    state->interrupted = t.result().interrupted ? 1 : 0;
    return ok();
  });
}

} // extern "C"
