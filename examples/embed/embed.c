/*===- embed.c - embedding a compiled plan in a C application ------------===*
 *
 * The whole life of a plan in an application, in C99 against tailor/runtime.h:
 *
 *   1. tailor_plan_load: read and verify the .tplan file (no LLVM involved).
 *   2. Ask the plan what it takes and gives: inputs, outputs, memory.
 *   3. tailor_session_create: allocate the arenas, map the weights.
 *   4. tailor_session_set_input, tailor_session_run, tailor_session_output.
 *   5. Free the session, then the plan.
 *
 * Every call returns a tailor_status; on failure tailor_last_error() says
 * why, and the runtime never exits the process: the application decides.
 *
 * Usage: tailor-embed-example PLAN.tplan
 *
 *===----------------------------------------------------------------------===*/

#include "tailor/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Token ids stay below this so the pattern is valid for any real vocabulary. */
#define TOKEN_MODULUS 97

static const char *dtype_name(tailor_dtype dtype) {
  static const char *const names[] = {
      "float32", "float64", "float16", "bfloat16", "int64",
      "int32",   "int16",   "int8",    "uint8",    "bool"};
  return (unsigned)dtype < sizeof(names) / sizeof(names[0]) ? names[dtype]
                                                            : "unknown";
}

static void print_tensor(const char *prefix, const tailor_tensor_info *info) {
  int d;
  printf("%s%s: %s [", prefix, info->name, dtype_name(info->dtype));
  for (d = 0; d < info->rank; ++d) {
    printf("%s%lld", d ? ", " : "", (long long)info->shape[d]);
  }
  printf("] (%llu bytes)\n", (unsigned long long)info->bytes);
}

static void print_memory(const char *title, const tailor_memory_report *m) {
  const double mib = 1024.0 * 1024.0;
  printf("%s: %.2f MiB (parameters %.2f, activations %.2f, workspace %.2f)\n",
         title, m->total / mib, m->parameters / mib, m->activations / mib,
         m->workspace / mib);
}

/* Reports a failed call and tells main to exit with 1. */
static int failed(const char *what) {
  fprintf(stderr, "tailor-embed-example: %s failed: %s\n", what,
          tailor_last_error());
  return 1;
}

/*
 * Fills one input. input_ids gets a deterministic token pattern, so two runs
 * (or two machines) can compare checksums; attention_mask gets ones; any
 * other input stays zero. Integer inputs are int64 or int32, as the plan says.
 */
static int fill_input(const tailor_tensor_info *info, void *data) {
  size_t count = 1, i;
  int d, is_ids = strcmp(info->name, "input_ids") == 0;
  int is_mask = strcmp(info->name, "attention_mask") == 0;
  for (d = 0; d < info->rank; ++d) {
    count *= (size_t)info->shape[d];
  }
  memset(data, 0, (size_t)info->bytes);
  if (!is_ids && !is_mask) {
    return 0;
  }
  if (info->dtype != TAILOR_I64 && info->dtype != TAILOR_I32) {
    fprintf(stderr, "tailor-embed-example: %s is %s, expected int64 or int32\n",
            info->name, dtype_name(info->dtype));
    return 1;
  }
  for (i = 0; i < count; ++i) {
    /* i runs row-major over [batch, seq], so each row gets its own tokens. */
    int64_t value =
        is_mask ? 1 : (int64_t)((i * 7 + i / 3 + 1) % TOKEN_MODULUS);
    if (info->dtype == TAILOR_I64) {
      ((int64_t *)data)[i] = value;
    } else {
      ((int32_t *)data)[i] = (int32_t)value;
    }
  }
  return 0;
}

/*
 * Prints what a language model's logits say: for logits [batch, seq, vocab]
 * the argmax token of the last position of each row, and a checksum of all
 * values (a sum in double, to compare runs).
 */
static void print_logits(const tailor_tensor_info *info, const float *logits) {
  size_t count = 1, i;
  double checksum = 0.0;
  int d;
  for (d = 0; d < info->rank; ++d) {
    count *= (size_t)info->shape[d];
  }
  for (i = 0; i < count; ++i) {
    checksum += logits[i];
  }
  if (info->rank == 3 && info->shape[1] > 0 && info->shape[2] > 0) {
    size_t batch = (size_t)info->shape[0], seq = (size_t)info->shape[1];
    size_t vocab = (size_t)info->shape[2], b, v;
    for (b = 0; b < batch; ++b) {
      const float *last = logits + (b * seq + seq - 1) * vocab;
      size_t best = 0;
      for (v = 1; v < vocab; ++v) {
        best = last[v] > last[best] ? v : best;
      }
      printf("  row %zu: argmax token of the last position = %zu (%g)\n", b,
             best, last[best]);
    }
  }
  printf("  checksum (sum of %zu values) = %.6f\n", count, checksum);
}

int main(int argc, char **argv) {
  tailor_plan *plan = NULL;
  tailor_session *session = NULL;
  tailor_memory_report memory;
  tailor_tensor_info info;
  const void *output = NULL;
  int i, inputs, outputs, rc = 1;

  if (argc != 2) {
    fprintf(stderr, "usage: tailor-embed-example PLAN.tplan\n");
    return 1;
  }
  printf("tailor runtime %s\n", tailor_version());

  /* 1. Load and verify the plan. */
  if (tailor_plan_load(argv[1], &plan) != TAILOR_OK) {
    return failed("tailor_plan_load");
  }

  /* 2. What the plan takes and gives; names are owned by the plan. */
  inputs = tailor_plan_input_count(plan);
  outputs = tailor_plan_output_count(plan);
  printf("inputs:\n");
  for (i = 0; i < inputs; ++i) {
    if (tailor_plan_input_info(plan, i, &info) != TAILOR_OK) {
      rc = failed("tailor_plan_input_info");
      goto done;
    }
    print_tensor("  ", &info);
  }
  printf("outputs:\n");
  for (i = 0; i < outputs; ++i) {
    if (tailor_plan_output_info(plan, i, &info) != TAILOR_OK) {
      rc = failed("tailor_plan_output_info");
      goto done;
    }
    print_tensor("  ", &info);
  }
  if (tailor_plan_memory(plan, &memory) != TAILOR_OK) {
    rc = failed("tailor_plan_memory");
    goto done;
  }
  print_memory("predicted memory", &memory);

  /* 3. A session: NULL options pick the default thread count. */
  if (tailor_session_create(plan, NULL, &session) != TAILOR_OK) {
    rc = failed("tailor_session_create");
    goto done;
  }
  if (tailor_session_memory(session, &memory) != TAILOR_OK) {
    rc = failed("tailor_session_memory");
    goto done;
  }
  print_memory("session memory", &memory);

  /* 4a. Inputs are copied into the session, so the buffer is freed at once. */
  for (i = 0; i < inputs; ++i) {
    void *data;
    tailor_status status;
    if (tailor_plan_input_info(plan, i, &info) != TAILOR_OK) {
      rc = failed("tailor_plan_input_info");
      goto done;
    }
    data = malloc(info.bytes ? (size_t)info.bytes : 1);
    if (!data) {
      fprintf(stderr, "tailor-embed-example: out of memory for %s\n",
              info.name);
      goto done;
    }
    if (fill_input(&info, data) != 0) {
      free(data);
      goto done;
    }
    status =
        tailor_session_set_input(session, info.name, info.dtype, info.shape,
                                 info.rank, data, (size_t)info.bytes);
    free(data);
    if (status != TAILOR_OK) {
      rc = failed("tailor_session_set_input");
      goto done;
    }
  }

  /* 4b. Run the plan's steps once. */
  if (tailor_session_run(session) != TAILOR_OK) {
    rc = failed("tailor_session_run");
    goto done;
  }

  /* 4c. Outputs point into the session's arenas until the next run. */
  for (i = 0; i < outputs; ++i) {
    tailor_tensor_info plan_info;
    if (tailor_plan_output_info(plan, i, &plan_info) != TAILOR_OK ||
        tailor_session_output(session, plan_info.name, &output, &info) !=
            TAILOR_OK) {
      rc = failed("tailor_session_output");
      goto done;
    }
    print_tensor("result ", &info);
    if (info.dtype == TAILOR_F32) {
      print_logits(&info, (const float *)output);
    }
  }
  rc = 0;

done:
  /* 5. Sessions go before the plan they were made from. */
  if (session) {
    tailor_session_free(session);
  }
  tailor_plan_free(plan);
  return rc;
}
