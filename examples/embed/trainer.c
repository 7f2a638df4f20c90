/*===- trainer.c - training with checkpoints from a C application --------===*
 *
 * The C API's trainer (tailor_trainer_*) does what `tailor train` does --
 * which is itself a client of these calls: read the data, run the plan's
 * steps, follow its schedule, write metrics.jsonl, checkpoints and the final
 * adapter (or model). An application drives it a step at a time or to the
 * end with a callback, and decides when to stop, checkpoint and resume:
 *
 *   1. train until step STOP (the callback returns non-zero there: the
 *      trainer writes OUTPUT_DIR/checkpoint-STOP and returns),
 *   2. free that trainer, as a process that ends would,
 *   3. a new trainer resumes from the latest checkpoint and trains to the
 *      plan's max_steps, then writes the final weights into OUTPUT_DIR.
 *
 * The losses of the resumed half are bit for bit those of an uninterrupted
 * run (test/tools/embed-trainer.test checks it against `tailor train`).
 *
 * Usage: tailor-embed-trainer PLAN.tplan DATA OUTPUT_DIR STOP
 *
 *===----------------------------------------------------------------------===*/

#include "tailor/runtime.h"

#include <stdio.h>
#include <stdlib.h>

static int check(tailor_status status, const char *what) {
  if (status != TAILOR_OK) {
    fprintf(stderr, "tailor-embed-trainer: %s: %s\n", what,
            tailor_last_error());
    return 0;
  }
  return 1;
}

/* Prints each step; asks to stop after step *stop_at. */
static int on_step(const tailor_train_metrics *metrics, void *user_data) {
  const int64_t *stop_at = (const int64_t *)user_data;
  printf("step %lld loss %.9g lr %.9g grad_norm %.9g\n",
         (long long)metrics->step, metrics->loss, metrics->lr,
         metrics->grad_norm);
  return metrics->step == *stop_at;
}

/* Creates a trainer, resuming from the latest checkpoint if `resume`. */
static tailor_trainer *create(tailor_plan *plan, const char *data,
                              const char *output_dir, int resume) {
  tailor_trainer_options options;
  tailor_trainer *trainer = NULL;
  tailor_trainer_options_init(&options);
  options.data_path = data;
  options.output_dir = output_dir;
  options.resume = resume ? "latest" : NULL;
  options.save_steps = 0; /* only the checkpoints this program asks for */
  options.handle_signals = 1;
  if (!check(tailor_trainer_create(plan, &options, &trainer),
             "creating the trainer")) {
    return NULL;
  }
  return trainer;
}

int main(int argc, char **argv) {
  tailor_plan *plan = NULL;
  tailor_trainer *trainer = NULL;
  tailor_trainer_state state;
  int64_t stop_at, never = -1;
  int result = 1;

  if (argc != 5 || (stop_at = atoll(argv[4])) <= 0) {
    fprintf(stderr, "usage: tailor-embed-trainer PLAN.tplan DATA OUTPUT_DIR "
                    "STOP\n");
    return 1;
  }
  if (!check(tailor_plan_load(argv[1], &plan), "loading the plan")) {
    return 1;
  }
  /* 1. Train until the callback stops the run after step STOP. */
  if (!(trainer = create(plan, argv[2], argv[3], 0)) ||
      !check(tailor_trainer_run(trainer, on_step, &stop_at), "training") ||
      !check(tailor_trainer_get_state(trainer, &state), "state")) {
    goto done;
  }
  printf("stopped at step %lld of %lld: %s\n", (long long)state.step,
         (long long)state.max_steps, tailor_trainer_last_checkpoint(trainer));
  /* 2. As if the process ended here. */
  tailor_trainer_free(trainer);
  /* 3. Resume from the checkpoint and train to the end. */
  if (!(trainer = create(plan, argv[2], argv[3], 1)) ||
      !check(tailor_trainer_get_state(trainer, &state), "state")) {
    goto done;
  }
  printf("resumed at step %lld\n", (long long)state.step);
  if (!check(tailor_trainer_run(trainer, on_step, &never), "training") ||
      !check(tailor_trainer_get_state(trainer, &state), "state")) {
    goto done;
  }
  printf("done: step %lld, %s written to %s\n", (long long)state.step,
         state.trains_adapter ? "adapter" : "model", argv[3]);
  result = 0;
done:
  tailor_trainer_free(trainer);
  tailor_plan_free(plan);
  return result;
}
