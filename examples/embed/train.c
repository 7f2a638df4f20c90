/*===- train.c - driving a compiled training plan from a C application ---===*
 *
 * A training plan has two entries: "train_step" (forward, backward and
 * gradient accumulation over one micro-batch: inputs input_ids and labels,
 * output loss) and "optimizer_step" (clipping, learning rate, update: input
 * step, outputs lr and grad_norm). An application that embeds tailor runs
 * them itself, with its own data, in C99 against tailor/runtime.h:
 *
 *   for each step: set input_ids and labels, run train_step (once per
 *   micro-batch the plan accumulates; this example compiles with one),
 *   set step, run optimizer_step, read loss, lr and grad_norm.
 *
 * Weights and optimizer moments live in the session between runs; at the
 * end the example reads one trained tensor back with tailor_session_tensor
 * (how an application would save it).
 *
 * Tokens come from a fixed stream, stream[k] = (7k + k/3 + 1) % 97, cut into
 * sequences of the plan's length, so `tailor train` on the same stream
 * written as a .bin file (shuffle off) sees the same batches.
 *
 * Usage: tailor-embed-train PLAN.tplan STEPS [TENSOR]
 *
 *===----------------------------------------------------------------------===*/

#include "tailor/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(tailor_status status, const char *what) {
  if (status != TAILOR_OK) {
    fprintf(stderr, "tailor-embed-train: %s: %s\n", what, tailor_last_error());
    return 0;
  }
  return 1;
}

static int64_t token(int64_t k) { return (7 * k + k / 3 + 1) % 97; }

/* Reads a scalar float output. */
static int read_scalar(tailor_session *session, const char *name,
                       float *value) {
  const void *data = NULL;
  if (!check(tailor_session_output(session, name, &data, NULL), name)) {
    return 0;
  }
  memcpy(value, data, sizeof(float));
  return 1;
}

int main(int argc, char **argv) {
  tailor_plan *plan = NULL;
  tailor_session *session = NULL;
  tailor_tensor_info ids_info;
  int64_t *ids = NULL;
  int64_t batch, seq, step, steps, k, count;
  int i, found = 0, result = 1;

  if (argc < 3 || (steps = atoll(argv[2])) <= 0) {
    fprintf(stderr, "usage: tailor-embed-train PLAN.tplan STEPS [TENSOR]\n");
    return 1;
  }
  if (!check(tailor_plan_load(argv[1], &plan), "loading the plan")) {
    return 1;
  }
  for (i = 0; i < tailor_plan_entry_count(plan); ++i) {
    found += strcmp(tailor_plan_entry_name(plan, i), "train_step") == 0;
  }
  if (!found) {
    fprintf(stderr, "tailor-embed-train: %s is not a training plan\n", argv[1]);
    goto done;
  }
  /* The micro-batch shape is the shape of input_ids. */
  for (i = 0; i < tailor_plan_input_count(plan); ++i) {
    if (check(tailor_plan_input_info(plan, i, &ids_info), "input info") &&
        strcmp(ids_info.name, "input_ids") == 0) {
      break;
    }
  }
  if (i == tailor_plan_input_count(plan) || ids_info.rank != 2 ||
      ids_info.dtype != TAILOR_I64) {
    fprintf(stderr, "tailor-embed-train: expected an i64 input_ids [B, T]\n");
    goto done;
  }
  batch = ids_info.shape[0];
  seq = ids_info.shape[1];
  if (!check(tailor_session_create(plan, NULL, &session), "creating a session")) {
    goto done;
  }
  ids = (int64_t *)malloc((size_t)(batch * seq) * sizeof(int64_t));
  if (!ids) {
    goto done;
  }
  printf("training %s: %lld x %lld tokens per step\n", argv[1],
         (long long)batch, (long long)seq);
  for (step = 1; step <= steps; ++step) {
    float loss, lr, norm;
    for (k = 0; k < batch * seq; ++k) {
      ids[k] = token((step - 1) * batch * seq + k);
    }
    /* Labels are the tokens themselves: the plan shifts them. */
    if (!check(tailor_session_set_input(session, "input_ids", TAILOR_I64,
                                        ids_info.shape, 2, ids,
                                        ids_info.bytes), "input_ids") ||
        !check(tailor_session_set_input(session, "labels", TAILOR_I64,
                                        ids_info.shape, 2, ids,
                                        ids_info.bytes), "labels") ||
        !check(tailor_session_run_entry(session, "train_step"), "train_step") ||
        !read_scalar(session, "loss", &loss) ||
        !check(tailor_session_set_input(session, "step", TAILOR_I64, NULL, 0,
                                        &step, sizeof(step)), "step") ||
        !check(tailor_session_run_entry(session, "optimizer_step"),
               "optimizer_step") ||
        !read_scalar(session, "lr", &lr) ||
        !read_scalar(session, "grad_norm", &norm)) {
      goto done;
    }
    printf("step %lld loss %.9g lr %.9g grad_norm %.9g\n", (long long)step,
           loss, lr, norm);
  }
  if (argc > 3) {
    void *data = NULL;
    tailor_tensor_info info;
    double sum = 0;
    if (!check(tailor_session_tensor(session, argv[3], &data, &info),
               argv[3])) {
      goto done;
    }
    count = (int64_t)(info.bytes / sizeof(float));
    for (k = 0; k < count; ++k) {
      sum += fabs((double)((const float *)data)[k]);
    }
    printf("%s: %lld values, sum |w| = %.9g\n", argv[3], (long long)count, sum);
  }
  result = 0;
done:
  free(ids);
  tailor_session_free(session);
  tailor_plan_free(plan);
  return result;
}
