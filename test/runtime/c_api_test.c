/*===- c_api_test.c - every call of the C API, and its misuse, from C ----===*
 *
 * Usage: c_api_test FORWARD.tplan TRAIN.tplan WORK_DIR
 *
 * FORWARD.tplan is make_tiny_lm.py's model compiled for inference
 * (input_ids [2, 5] -> logits [2, 5, 100]; parameters table [100, 8] and
 * head [8, 100]); TRAIN.tplan the same model compiled for full fine-tuning
 * (tiny-lm-full.yaml, one micro-batch a step, no shuffling). Each check says
 * what it expects; every misuse must return a status (never crash: the
 * AddressSanitizer build of this file, runtime.c_api_test_asan, also catches
 * reads and writes out of bounds). Prints one line per group and exits 1 if
 * any check failed.
 *
 *===----------------------------------------------------------------------===*/

#include "tailor/runtime.h"
#include "test/runtime/c_api_checks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *work = NULL;
static const char *forwardPath = NULL;
static const char *trainPath = NULL;

static char *pathIn(const char *name) {
  static char buffers[8][1024];
  static int next = 0;
  char *buffer = buffers[next++ % 8];
  snprintf(buffer, sizeof(buffers[0]), "%s/%s", work, name);
  return buffer;
}

static int writeFile(const char *path, const void *data, size_t size) {
  FILE *file = fopen(path, "wb");
  if (!file) {
    return 0;
  }
  size_t written = fwrite(data, 1, size, file);
  return fclose(file) == 0 && written == size;
}

static int exists(const char *path) {
  struct stat info;
  return stat(path, &info) == 0;
}

/* A one-tensor safetensors file: `name` of `dtype` and `shape`. */
static int writeSafetensors(const char *path, const char *name,
                            const char *dtype, const int64_t *shape, int rank,
                            const void *data, size_t bytes) {
  char header[512], shapeText[128] = "";
  int i, length;
  for (i = 0; i < rank; ++i) {
    char dim[32];
    snprintf(dim, sizeof(dim), "%s%lld", i ? "," : "", (long long)shape[i]);
    strcat(shapeText, dim);
  }
  length = snprintf(header, sizeof(header),
                    "{\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],"
                    "\"data_offsets\":[0,%zu]}}",
                    name, dtype, shapeText, bytes);
  while (length % 8) {
    header[length++] = ' ';
  }
  FILE *file = fopen(path, "wb");
  if (!file) {
    return 0;
  }
  unsigned char prefix[8];
  for (i = 0; i < 8; ++i) {
    prefix[i] = (unsigned char)(((uint64_t)length >> (8 * i)) & 0xff);
  }
  int ok = fwrite(prefix, 1, 8, file) == 8 &&
           fwrite(header, 1, (size_t)length, file) == (size_t)length &&
           fwrite(data, 1, bytes, file) == bytes;
  return fclose(file) == 0 && ok;
}

/*===-- Library, plans --------------------------------------------------===*/

static void testLibrary(void) {
  int count = -1;
  tailor_status status = tailor_cuda_device_count(&count);
  CHECK(status == TAILOR_OK || status == TAILOR_ERROR_UNAVAILABLE,
        "device count answers");
  CHECK(count >= 0, "device count is set");
  EXPECT_INVALID(tailor_cuda_device_count(NULL));
  tailor_device_info info;
  CHECK(tailor_cuda_device_info(-1, &info) != TAILOR_OK, "ordinal -1");
  CHECK(tailor_cuda_device_info(count, &info) != TAILOR_OK, "ordinal past");
  CHECK(tailor_cuda_device_info(0, NULL) != TAILOR_OK, "null info");
  CHECK(strlen(tailor_version()) > 0, "a version");
  CHECK(tailor_built_with_cuda() == 0 || tailor_built_with_cuda() == 1,
        "cuda flag");
  printf("library: version %s\n", tailor_version());
}

static void testPlanLoadMisuse(void) {
  tailor_plan *plan = (tailor_plan *)1;
  EXPECT_INVALID(tailor_plan_load(NULL, &plan));
  EXPECT_INVALID(tailor_plan_load(forwardPath, NULL));
  EXPECT_STATUS(tailor_plan_load(pathIn("missing.tplan"), &plan),
                TAILOR_ERROR_IO);
  CHECK(plan == NULL, "a failed load clears *plan");
  /* A directory is not a plan: a status, no std::bad_alloc. */
  tailor_status status = tailor_plan_load(work, &plan);
  CHECK(status == TAILOR_ERROR_IO || status == TAILOR_ERROR_INVALID_PLAN,
        "a directory as plan");
  const char garbage[] = "this is not a plan, it is text of some length";
  CHECK(writeFile(pathIn("garbage.tplan"), garbage, sizeof(garbage)),
        "write garbage");
  EXPECT_STATUS(tailor_plan_load(pathIn("garbage.tplan"), &plan),
                TAILOR_ERROR_INVALID_PLAN);
  EXPECT_STATUS(
      tailor_plan_load_from_memory(garbage, sizeof(garbage), NULL, &plan),
      TAILOR_ERROR_INVALID_PLAN);
  EXPECT_INVALID(tailor_plan_load_from_memory(NULL, 16, NULL, &plan));
  EXPECT_INVALID(tailor_plan_load_from_memory(garbage, 4, NULL, NULL));
  tailor_plan_free(NULL);
  printf("plan loading: misuse refused\n");
}

/* The bytes of the file at `path` (malloc'd, into `size`), or NULL. */
static void *readFile(const char *path, size_t *size) {
  FILE *file = fopen(path, "rb");
  if (!file) {
    return NULL;
  }
  fseek(file, 0, SEEK_END);
  long length = ftell(file);
  fseek(file, 0, SEEK_SET);
  void *bytes = length > 0 ? malloc((size_t)length) : NULL;
  if (bytes && fread(bytes, 1, (size_t)length, file) != (size_t)length) {
    free(bytes);
    bytes = NULL;
  }
  fclose(file);
  *size = bytes ? (size_t)length : 0;
  return bytes;
}

/* A plan loaded from memory answers as the one loaded from the file. */
static void testPlanFromMemory(void) {
  size_t size = 0;
  void *bytes = readFile(forwardPath, &size);
  CHECK(bytes != NULL, "read the forward plan");
  if (!bytes) {
    return;
  }
  /* Weights resolve against the plan's directory. */
  tailor_plan *plan = NULL;
  EXPECT_OK(tailor_plan_load_from_memory(bytes, size, work, &plan));
  free(bytes);
  CHECK(tailor_plan_input_count(plan) == 1, "one input from memory");
  tailor_plan_free(plan);
}

/* A plan copied without its weights (lm.onnx stays behind in WORK) is an
 * I/O error naming the weights file, from a file and from memory: the plan
 * is sound, the caller has to bring the weights. */
static void testPlanWithoutWeights(void) {
  size_t size = 0;
  void *bytes = readFile(forwardPath, &size);
  CHECK(bytes != NULL, "read the forward plan");
  if (!bytes) {
    return;
  }
  const char *dir = pathIn("miss");
  char planPath[1100], weightsPath[1100];
  snprintf(planPath, sizeof(planPath), "%s/forward.tplan", dir);
  snprintf(weightsPath, sizeof(weightsPath), "'%s/lm.onnx'", dir);
  CHECK(mkdir(dir, 0755) == 0, "make WORK/miss");
  CHECK(writeFile(planPath, bytes, size), "copy the plan alone");
  tailor_plan *plan = (tailor_plan *)1;
  EXPECT_STATUS(tailor_plan_load(planPath, &plan), TAILOR_ERROR_IO);
  CHECK(strstr(tailor_last_error(), weightsPath) != NULL,
        "the error names the missing weights file");
  CHECK(plan == NULL, "a failed load clears *plan");
  EXPECT_STATUS(tailor_plan_load_from_memory(bytes, size, dir, &plan),
                TAILOR_ERROR_IO);
  CHECK(strstr(tailor_last_error(), weightsPath) != NULL,
        "the error names the missing weights file (from memory)");
  free(bytes);
  printf("plan loading: missing weights are an I/O error naming the file\n");
}

static void testPlanQueries(tailor_plan *plan) {
  tailor_tensor_info info;
  CHECK(tailor_plan_input_count(plan) == 1, "one input");
  CHECK(tailor_plan_output_count(plan) == 1, "one output");
  EXPECT_OK(tailor_plan_input_info(plan, 0, &info));
  CHECK(strcmp(info.name, "input_ids") == 0 && info.dtype == TAILOR_I64 &&
            info.rank == 2 && info.shape[0] == 2 && info.shape[1] == 5 &&
            info.bytes == 80,
        "input_ids i64 [2, 5]");
  EXPECT_OK(tailor_plan_output_info(plan, 0, &info));
  CHECK(strcmp(info.name, "logits") == 0 && info.rank == 3 &&
            info.shape[2] == 100,
        "logits [2, 5, 100]");
  EXPECT_INVALID(tailor_plan_input_info(plan, 1, &info));
  EXPECT_INVALID(tailor_plan_input_info(plan, -1, &info));
  EXPECT_INVALID(tailor_plan_output_info(plan, 1, &info));
  EXPECT_INVALID(tailor_plan_input_info(plan, 0, NULL));
  CHECK(tailor_plan_entry_count(plan) == 1, "one entry");
  CHECK(strcmp(tailor_plan_entry_name(plan, 0), "forward") == 0, "forward");
  CHECK(tailor_plan_entry_name(plan, 1) == NULL, "no entry 1");
  CHECK(tailor_plan_input_entry(plan, 0) == 0, "input entry");
  CHECK(tailor_plan_output_entry(plan, 0) == 0, "output entry");
  CHECK(tailor_plan_input_entry(plan, 5) == -1, "no input 5");
  CHECK(tailor_plan_output_entry(plan, -2) == -1, "no output -2");
  tailor_memory_report report;
  EXPECT_OK(tailor_plan_memory(plan, &report));
  CHECK(report.total > 0 && report.parameters == 2 * 3200,
        "plan memory: two 3200-byte parameters");
  EXPECT_INVALID(tailor_plan_memory(plan, NULL));
}

static void testPlanNames(tailor_plan *plan) {
  tailor_parameter_info param;
  tailor_state_info state;
  int i, table = 0, head = 0;
  CHECK(tailor_plan_parameter_count(plan) == 2, "two parameters");
  for (i = 0; i < tailor_plan_parameter_count(plan); ++i) {
    EXPECT_OK(tailor_plan_parameter_info(plan, i, &param));
    CHECK(param.dtype == TAILOR_F32 && param.rank == 2 && !param.trainable &&
              !param.quantized && !param.sharded && param.bytes == 3200,
          "an f32 [*, *] frozen parameter");
    table += strcmp(param.name, "table") == 0 && param.shape[0] == 100 &&
             strcmp(param.file_name, "table") == 0;
    head += strcmp(param.name, "head") == 0 && param.shape[0] == 8 &&
            param.shape[1] == 100;
  }
  CHECK(table == 1 && head == 1, "table [100, 8] and head [8, 100]");
  EXPECT_INVALID(tailor_plan_parameter_info(plan, 2, &param));
  EXPECT_INVALID(tailor_plan_parameter_info(plan, -1, &param));
  EXPECT_INVALID(tailor_plan_parameter_info(plan, 0, NULL));
  CHECK(tailor_plan_state_count(plan) == 0, "an inference plan has no state");
  EXPECT_INVALID(tailor_plan_state_info(plan, 0, &state));
  printf("plan queries: inputs, outputs, entries, memory, parameters\n");
}

/*===-- Sessions ---------------------------------------------------------===*/

static int64_t token(int64_t k) { return (7 * k + k / 3 + 1) % 97; }

/* Sets input_ids to the example tokens and runs; the logits or NULL. */
static const float *runForward(tailor_session *session) {
  int64_t ids[10], shape[2] = {2, 5};
  int k;
  const void *logits = NULL;
  for (k = 0; k < 10; ++k) {
    ids[k] = token(k);
  }
  EXPECT_OK(tailor_session_set_input(session, "input_ids", TAILOR_I64, shape,
                                     2, ids, sizeof(ids)));
  EXPECT_OK(tailor_session_run(session));
  EXPECT_OK(tailor_session_output(session, "logits", &logits, NULL));
  return (const float *)logits;
}

static void testSetInputMisuse(tailor_session *session) {
  int64_t ids[10] = {0}, shape[2] = {2, 5}, wrong[2] = {5, 2};
  int64_t big[TAILOR_MAX_RANK + 4] = {0};
  EXPECT_INVALID(tailor_session_set_input(session, "nope", TAILOR_I64, shape,
                                          2, ids, sizeof(ids)));
  EXPECT_INVALID(tailor_session_set_input(session, "input_ids", TAILOR_F32,
                                          shape, 2, ids, sizeof(ids)));
  EXPECT_INVALID(tailor_session_set_input(session, "input_ids",
                                          (tailor_dtype)77, shape, 2, ids,
                                          sizeof(ids)));
  EXPECT_ERROR_SAYS("dtype 77");
  EXPECT_INVALID(tailor_session_set_input(session, "input_ids", TAILOR_I64,
                                          wrong, 2, ids, sizeof(ids)));
  EXPECT_INVALID(tailor_session_set_input(session, "input_ids", TAILOR_I64,
                                          shape, 2, ids, sizeof(ids) - 8));
  EXPECT_INVALID(tailor_session_set_input(session, "input_ids", TAILOR_I64,
                                          big, TAILOR_MAX_RANK + 1, ids,
                                          sizeof(ids)));
  EXPECT_INVALID(tailor_session_set_input(session, "input_ids", TAILOR_I64,
                                          shape, -1, ids, sizeof(ids)));
  EXPECT_INVALID(tailor_session_set_input(session, NULL, TAILOR_I64, shape, 2,
                                          ids, sizeof(ids)));
  EXPECT_INVALID(tailor_session_set_input(session, "input_ids", TAILOR_I64,
                                          shape, 2, NULL, sizeof(ids)));
  EXPECT_INVALID(tailor_session_set_input(session, "input_ids", TAILOR_I64,
                                          NULL, 2, ids, sizeof(ids)));
  /* A token id outside the table is an execution error, not a crash. */
  ids[3] = 1000;
  EXPECT_OK(tailor_session_set_input(session, "input_ids", TAILOR_I64, shape,
                                     2, ids, sizeof(ids)));
  EXPECT_STATUS(tailor_session_run(session), TAILOR_ERROR_EXECUTION);
}

static void testOutputsAndTensors(tailor_session *session) {
  const void *data = NULL;
  void *tensor = NULL;
  tailor_tensor_info info;
  CHECK(runForward(session) != NULL, "runs again after a failed run");
  EXPECT_INVALID(tailor_session_output(session, "nope", &data, NULL));
  EXPECT_INVALID(tailor_session_output(session, "logits", NULL, NULL));
  EXPECT_OK(tailor_session_output(session, "logits", &data, &info));
  CHECK(info.bytes == 2 * 5 * 100 * 4, "logits bytes");
  EXPECT_OK(tailor_session_tensor(session, "head", &tensor, &info));
  CHECK(info.rank == 2 && info.shape[1] == 100, "head tensor");
  EXPECT_INVALID(tailor_session_tensor(session, "nope", &tensor, NULL));
  EXPECT_INVALID(tailor_session_tensor(session, "head", NULL, NULL));
  EXPECT_OK(tailor_session_tensor_upload(session, "head"));
  EXPECT_INVALID(tailor_session_tensor_upload(session, "nope"));
  EXPECT_INVALID(tailor_session_tensor_upload(session, NULL));
  EXPECT_OK(tailor_session_run_entry(session, "forward"));
  EXPECT_INVALID(tailor_session_run_entry(session, "train_step"));
  EXPECT_INVALID(tailor_session_run_entry(session, NULL));
  tailor_memory_report report;
  EXPECT_OK(tailor_session_memory(session, &report));
  CHECK(report.parameters == 2 * 3200, "session parameters");
  EXPECT_INVALID(tailor_session_memory(session, NULL));
}

/* set_parameter: checked, then the weights are the caller's. */
static void testSetParameter(tailor_session *session) {
  static float head[800], table[800];
  int64_t shape[2] = {8, 100}, wrong[2] = {100, 8};
  int i;
  for (i = 0; i < 800; ++i) {
    head[i] = 0.5f;
  }
  EXPECT_INVALID(tailor_session_set_parameter(session, "nope", TAILOR_F32,
                                              shape, 2, head, sizeof(head)));
  EXPECT_ERROR_SAYS("no parameter 'nope'");
  EXPECT_INVALID(tailor_session_set_parameter(session, "head", TAILOR_F16,
                                              shape, 2, head, sizeof(head)));
  EXPECT_ERROR_SAYS("is f32");
  EXPECT_INVALID(tailor_session_set_parameter(session, "head", TAILOR_F32,
                                              wrong, 2, head, sizeof(head)));
  EXPECT_ERROR_SAYS("[8, 100]");
  EXPECT_INVALID(tailor_session_set_parameter(
      session, "head", TAILOR_F32, shape, 2, head, sizeof(head) - 4));
  EXPECT_INVALID(tailor_session_set_parameter(session, "head", TAILOR_F32,
                                              shape, 9, head, sizeof(head)));
  EXPECT_INVALID(tailor_session_set_parameter(session, "head", TAILOR_F32,
                                              shape, 2, NULL, sizeof(head)));
  EXPECT_INVALID(tailor_session_set_parameter(session, "head",
                                              (tailor_dtype)77, shape, 2,
                                              head, sizeof(head)));
  EXPECT_OK(tailor_session_set_parameter(session, "head", TAILOR_F32, shape, 2,
                                         head, sizeof(head)));
  /* head all 0.5: every logit of a token is 0.5 * sum of its embedding. */
  void *tableData = NULL;
  EXPECT_OK(tailor_session_tensor(session, "table", &tableData, NULL));
  memcpy(table, tableData, sizeof(table));
  const float *logits = runForward(session);
  if (logits) {
    int bad = 0;
    for (i = 0; i < 10; ++i) {
      double sum = 0;
      int c;
      for (c = 0; c < 8; ++c) {
        sum += table[token(i) * 8 + c];
      }
      bad += fabs(logits[i * 100 + 42] - 0.5 * sum) > 1e-5 * (1 + fabs(sum));
    }
    CHECK(bad == 0, "logits follow the bound head");
  }
}

/* load_safetensors: names, shapes and dtypes checked; values land. */
static void testLoadSafetensors(tailor_session *session) {
  static float zeros[800], head[800];
  int64_t shape[2] = {8, 100}, wrong[2] = {100, 8};
  int loaded = -1, i;
  for (i = 0; i < 800; ++i) {
    head[i] = (float)i / 800.0f;
  }
  CHECK(writeSafetensors(pathIn("head.safetensors"), "head", "F32", shape, 2,
                         head, sizeof(head)),
        "write head.safetensors");
  CHECK(writeSafetensors(pathIn("wrong-shape.safetensors"), "head", "F32",
                         wrong, 2, zeros, sizeof(zeros)),
        "write");
  CHECK(writeSafetensors(pathIn("unknown.safetensors"), "lm_head.weight",
                         "F32", shape, 2, zeros, sizeof(zeros)),
        "write");
  CHECK(writeSafetensors(pathIn("wrong-dtype.safetensors"), "head", "I32",
                         shape, 2, zeros, sizeof(zeros)),
        "write");
  EXPECT_INVALID(tailor_session_load_safetensors(
      session, pathIn("wrong-shape.safetensors"), &loaded));
  EXPECT_ERROR_SAYS("shape");
  EXPECT_INVALID(tailor_session_load_safetensors(
      session, pathIn("unknown.safetensors"), &loaded));
  EXPECT_ERROR_SAYS("lm_head.weight");
  EXPECT_INVALID(tailor_session_load_safetensors(
      session, pathIn("wrong-dtype.safetensors"), &loaded));
  EXPECT_ERROR_SAYS("I32");
  EXPECT_INVALID(tailor_session_load_safetensors(
      session, pathIn("garbage.tplan"), &loaded));
  EXPECT_STATUS(tailor_session_load_safetensors(
                    session, pathIn("missing.safetensors"), &loaded),
                TAILOR_ERROR_IO);
  CHECK(tailor_session_load_safetensors(session, work, &loaded) != TAILOR_OK,
        "a directory as safetensors");
  EXPECT_INVALID(tailor_session_load_safetensors(session, NULL, &loaded));
  EXPECT_OK(tailor_session_load_safetensors(
      session, pathIn("head.safetensors"), &loaded));
  CHECK(loaded == 1, "one parameter loaded");
  void *data = NULL;
  EXPECT_OK(tailor_session_tensor(session, "head", &data, NULL));
  CHECK(data && memcmp(data, head, sizeof(head)) == 0,
        "the file's head is the session's");
  EXPECT_OK(tailor_session_load_safetensors(
      session, pathIn("head.safetensors"), NULL));
}

/* apply_adapter: bad directories and adapters that do not fit. */
static void testApplyAdapterMisuse(tailor_session *session) {
  static float a[2 * 100], b[8 * 2];
  int64_t aShape[2] = {2, 100}, bShape[2] = {8, 2};
  const char config[] =
      "{\"peft_type\": \"LORA\", \"r\": 2, \"lora_alpha\": 4}";
  EXPECT_INVALID(tailor_session_apply_adapter(session, NULL));
  EXPECT_STATUS(tailor_session_apply_adapter(session, pathIn("no-adapter")),
                TAILOR_ERROR_IO);
  mkdir(pathIn("adapter"), 0755);
  CHECK(writeFile(pathIn("adapter/adapter_config.json"), config,
                  sizeof(config) - 1),
        "write adapter config");
  /* A config without weights. */
  EXPECT_STATUS(tailor_session_apply_adapter(session, pathIn("adapter")),
                TAILOR_ERROR_IO);
  /* lora_A alone, for a module the plan does not have. */
  CHECK(writeSafetensors(pathIn("adapter/adapter_model.safetensors"),
                         "base_model.model.proj.lora_A.weight", "F32", aShape,
                         2, a, sizeof(a)),
        "write adapter");
  EXPECT_INVALID(tailor_session_apply_adapter(session, pathIn("adapter")));
  EXPECT_ERROR_SAYS("lora_B");
  CHECK(writeSafetensors(pathIn("adapter/adapter_model.safetensors"),
                         "base_model.model.head.lora_B.weight", "F32", bShape,
                         2, b, sizeof(b)),
        "write adapter");
  EXPECT_INVALID(tailor_session_apply_adapter(session, pathIn("adapter")));
}

static void testSessions(void) {
  tailor_plan *plan = NULL;
  tailor_session *session = NULL;
  tailor_session_options options = {-1};
  EXPECT_OK(tailor_plan_load(forwardPath, &plan));
  if (!plan) {
    return;
  }
  testPlanQueries(plan);
  testPlanNames(plan);
  EXPECT_INVALID(tailor_session_create(plan, &options, &session));
  EXPECT_INVALID(tailor_session_create(plan, NULL, NULL));
  EXPECT_INVALID(tailor_session_create(NULL, NULL, &session));
  options.num_threads = 2;
  EXPECT_OK(tailor_session_create(plan, &options, &session));
  if (!session) {
    tailor_plan_free(plan);
    return;
  }
  CHECK(runForward(session) != NULL, "a forward run");
  testSetInputMisuse(session);
  testOutputsAndTensors(session);
  testSetParameter(session);
  testLoadSafetensors(session);
  testApplyAdapterMisuse(session);
  /* The session keeps the plan alive: freeing the plan first is fine. */
  tailor_plan_free(plan);
  CHECK(runForward(session) != NULL, "runs after tailor_plan_free");
  /* Freed and foreign handles are refused, never dereferenced. */
  EXPECT_INVALID(tailor_plan_input_info(plan, 0, NULL));
  CHECK(tailor_plan_input_count(plan) == 0, "a freed plan counts 0");
  tailor_plan_free(plan); /* again: left alone with a message */
  EXPECT_ERROR_SAYS("not a live tailor_plan");
  tailor_session_free(session);
  EXPECT_INVALID(tailor_session_run(session));
  EXPECT_ERROR_SAYS("not a live tailor_session");
  tailor_session_free(session);
  int foreign[16] = {0};
  EXPECT_INVALID(tailor_session_run((tailor_session *)foreign));
  EXPECT_INVALID(tailor_plan_memory((tailor_plan *)foreign, NULL));
  EXPECT_INVALID(tailor_session_set_parameter((tailor_session *)foreign,
                                              "head", TAILOR_F32, NULL, 0,
                                              NULL, 0));
  EXPECT_INVALID(
      tailor_session_load_safetensors((tailor_session *)foreign, "x", NULL));
  EXPECT_INVALID(tailor_session_apply_adapter(NULL, "x"));
  CHECK(tailor_plan_parameter_count((tailor_plan *)foreign) == 0,
        "foreign plan");
  CHECK(tailor_plan_state_count(NULL) == 0, "null plan");
  printf("sessions: inputs, outputs, tensors, parameters from memory, "
         "safetensors and adapters; freed and foreign handles refused\n");
}

/*===-- Training ---------------------------------------------------------===*/

/* The token stream of examples/embed as a nanoGPT .bin file. */
static void writeTokens(const char *path, int count) {
  unsigned short *tokens = malloc(sizeof(unsigned short) * (size_t)count);
  int k;
  for (k = 0; k < count; ++k) {
    tokens[k] = (unsigned short)token(k);
  }
  CHECK(writeFile(path, tokens, sizeof(unsigned short) * (size_t)count),
        "write tokens");
  free(tokens);
}

static tailor_trainer_options optionsFor(const char *output) {
  tailor_trainer_options options;
  tailor_trainer_options_init(&options);
  options.data_path = pathIn("tokens.bin");
  options.output_dir = output;
  options.num_threads = 2;
  return options;
}

static void testTrainerCreateMisuse(tailor_plan *train) {
  tailor_trainer *trainer = (tailor_trainer *)1;
  tailor_trainer_options options = optionsFor(pathIn("misuse"));
  tailor_trainer_options_init(NULL);
  EXPECT_INVALID(tailor_trainer_create(train, NULL, &trainer));
  CHECK(trainer == NULL, "a failed create clears *trainer");
  EXPECT_INVALID(tailor_trainer_create(train, &options, NULL));
  EXPECT_INVALID(tailor_trainer_create(NULL, &options, &trainer));
  options = optionsFor(NULL);
  EXPECT_INVALID(tailor_trainer_create(train, &options, &trainer));
  options = optionsFor(pathIn("misuse"));
  options.data_dtype = "int8";
  EXPECT_INVALID(tailor_trainer_create(train, &options, &trainer));
  options = optionsFor(pathIn("misuse"));
  options.max_steps = -3;
  EXPECT_INVALID(tailor_trainer_create(train, &options, &trainer));
  options = optionsFor(pathIn("misuse"));
  options.data_path = pathIn("no-tokens.bin");
  EXPECT_STATUS(tailor_trainer_create(train, &options, &trainer),
                TAILOR_ERROR_EXECUTION);
  EXPECT_ERROR_SAYS("no-tokens.bin");
  options = optionsFor(pathIn("misuse"));
  options.resume = pathIn("no-checkpoint");
  EXPECT_STATUS(tailor_trainer_create(train, &options, &trainer),
                TAILOR_ERROR_EXECUTION);
  options = optionsFor(pathIn("misuse"));
  options.init_adapter = pathIn("adapter");
  EXPECT_STATUS(tailor_trainer_create(train, &options, &trainer),
                TAILOR_ERROR_EXECUTION);
  EXPECT_ERROR_SAYS("full model");
  options = optionsFor(pathIn("misuse"));
  EXPECT_STATUS(tailor_trainer_create_from_file(forwardPath, &options,
                                                &trainer),
                TAILOR_ERROR_EXECUTION);
  EXPECT_ERROR_SAYS("not a training plan");
  EXPECT_STATUS(tailor_trainer_create_from_file(pathIn("missing.tplan"),
                                                &options, &trainer),
                TAILOR_ERROR_IO);
  CHECK(tailor_trainer_create_from_file(work, &options, &trainer) != TAILOR_OK,
        "a directory as plan");
  EXPECT_INVALID(tailor_trainer_create_from_file(NULL, &options, &trainer));
  printf("trainer creation: misuse refused\n");
}

static void testTrainingNames(tailor_plan *train) {
  int i, moments = 0, trainable = 0;
  tailor_state_info state;
  tailor_parameter_info param;
  for (i = 0; i < tailor_plan_parameter_count(train); ++i) {
    EXPECT_OK(tailor_plan_parameter_info(train, i, &param));
    trainable += param.trainable;
  }
  CHECK(trainable == 2, "full fine-tuning trains both parameters");
  CHECK(tailor_plan_state_count(train) > 0, "training states");
  for (i = 0; i < tailor_plan_state_count(train); ++i) {
    EXPECT_OK(tailor_plan_state_info(train, i, &state));
    char expected[256];
    snprintf(expected, sizeof(expected), "%s.%s", state.parameter, state.kind);
    CHECK(strcmp(state.name, expected) == 0, "state named parameter.kind");
    moments += strcmp(state.kind, "exp_avg") == 0 ||
               strcmp(state.kind, "exp_avg_sq") == 0;
  }
  CHECK(moments == 4, "AdamW: two moments per parameter");
  EXPECT_INVALID(tailor_plan_state_info(train, -1, &state));
  EXPECT_INVALID(tailor_plan_state_info(train, 0, NULL));
}

typedef struct Recorded {
  int count;
  int stopAt;
  double loss[16];
  double gradNorm[16];
} Recorded;

static int record(const tailor_train_metrics *metrics, void *user) {
  Recorded *recorded = (Recorded *)user;
  if (recorded->count < 16) {
    recorded->loss[recorded->count] = metrics->loss;
    recorded->gradNorm[recorded->count] = metrics->grad_norm;
  }
  ++recorded->count;
  return metrics->step == recorded->stopAt;
}

/* An uninterrupted run to max_steps, its per-step losses. */
static void runWhole(tailor_plan *train, Recorded *whole) {
  tailor_trainer *trainer = NULL;
  tailor_trainer_options options = optionsFor(pathIn("whole"));
  tailor_trainer_state state;
  EXPECT_OK(tailor_trainer_create(train, &options, &trainer));
  EXPECT_OK(tailor_trainer_get_state(trainer, &state));
  CHECK(state.step == 0 && state.max_steps == 6 && !state.trains_adapter &&
            !state.has_validation && state.tokens_per_step == 16,
        "a fresh full fine-tuning trainer at step 0 of 6");
  whole->stopAt = -1;
  EXPECT_OK(tailor_trainer_run(trainer, record, whole));
  CHECK(whole->count == 6, "six steps reported");
  EXPECT_OK(tailor_trainer_get_state(trainer, &state));
  CHECK(state.step == 6 && !state.interrupted, "at step 6");
  CHECK(exists(pathIn("whole/model.safetensors")), "final weights written");
  CHECK(exists(pathIn("whole/metrics.jsonl")), "metrics.jsonl written");
  EXPECT_INVALID(tailor_trainer_step(trainer, NULL));
  EXPECT_ERROR_SAYS("max_steps 6");
  tailor_trainer_free(trainer);
}

/* Steps one at a time, a stop from the callback, a checkpoint, a resume:
 * the losses are the uninterrupted run's, bit for bit. */
static void runInterrupted(tailor_plan *train, const Recorded *whole) {
  tailor_trainer *trainer = NULL;
  tailor_trainer_options options = optionsFor(pathIn("parts"));
  tailor_train_metrics metrics;
  tailor_trainer_state state;
  Recorded rest = {0, 4, {0}, {0}};
  options.save_steps = 0;
  EXPECT_OK(tailor_trainer_create(train, &options, &trainer));
  EXPECT_OK(tailor_trainer_step(trainer, &metrics));
  CHECK(metrics.step == 1 && metrics.loss == whole->loss[0] &&
            metrics.grad_norm == whole->gradNorm[0] && metrics.lr > 0 &&
            metrics.tokens_per_s > 0 && !metrics.has_eval_loss,
        "step 1 as the whole run's");
  double evalLoss = 0;
  EXPECT_INVALID(tailor_trainer_evaluate(trainer, &evalLoss));
  EXPECT_INVALID(tailor_trainer_evaluate(trainer, NULL));
  EXPECT_OK(tailor_trainer_save_checkpoint(trainer, NULL));
  CHECK(strstr(tailor_trainer_last_checkpoint(trainer), "parts/checkpoint-1"),
        "checkpoint-1 in the output directory");
  EXPECT_OK(tailor_trainer_save_checkpoint(trainer, pathIn("elsewhere")));
  CHECK(exists(pathIn("elsewhere/checkpoint-1/trainer_state.json")),
        "a checkpoint in another directory");
  /* The callback stops the run after step 4 (a checkpoint is written). */
  EXPECT_OK(tailor_trainer_run(trainer, record, &rest));
  CHECK(rest.count == 3 && rest.loss[2] == whole->loss[3],
        "steps 2..4 as the whole run's");
  EXPECT_OK(tailor_trainer_get_state(trainer, &state));
  CHECK(state.step == 4 && state.interrupted, "stopped at step 4");
  CHECK(exists(pathIn("parts/checkpoint-4/trainer_state.json")),
        "the stop wrote checkpoint-4");
  EXPECT_OK(tailor_trainer_export(trainer, pathIn("export-4")));
  CHECK(exists(pathIn("export-4/model.safetensors")), "exported weights");
  EXPECT_INVALID(tailor_trainer_export(trainer, NULL));
  /* request_stop: the next step stops again. */
  EXPECT_OK(tailor_trainer_request_stop(trainer));
  EXPECT_OK(tailor_trainer_step(trainer, &metrics));
  CHECK(metrics.step == 5 && metrics.stopped, "a requested stop");
  tailor_trainer_free(trainer);

  /* A new trainer resumes from checkpoint-4 and finishes as the whole run. */
  EXPECT_OK(tailor_trainer_create(train, &options, &trainer));
  EXPECT_STATUS(tailor_trainer_resume(trainer, pathIn("no-checkpoint")),
                TAILOR_ERROR_EXECUTION);
  EXPECT_INVALID(tailor_trainer_resume(trainer, NULL));
  EXPECT_OK(tailor_trainer_resume(trainer, pathIn("parts/checkpoint-4")));
  EXPECT_OK(tailor_trainer_get_state(trainer, &state));
  CHECK(state.step == 4, "resumed at step 4");
  EXPECT_OK(tailor_trainer_step(trainer, &metrics));
  CHECK(metrics.step == 5 && metrics.loss == whole->loss[4] &&
            metrics.grad_norm == whole->gradNorm[4],
        "resumed step 5 is the whole run's, bit for bit");
  EXPECT_OK(tailor_trainer_step(trainer, &metrics));
  CHECK(metrics.step == 6 && metrics.loss == whole->loss[5],
        "resumed step 6 is the whole run's, bit for bit");
  tailor_trainer_free(trainer);
  EXPECT_INVALID(tailor_trainer_step(trainer, &metrics));
  EXPECT_ERROR_SAYS("not a live tailor_trainer");
  tailor_trainer_free(trainer); /* again: left alone */
  EXPECT_INVALID(tailor_trainer_request_stop(trainer));
  CHECK(tailor_trainer_last_checkpoint(trainer) == NULL, "freed trainer");
  EXPECT_INVALID(tailor_trainer_get_state(trainer, &state));
  EXPECT_INVALID(tailor_trainer_run(trainer, NULL, NULL));
  EXPECT_INVALID(tailor_trainer_save_checkpoint(trainer, NULL));
  EXPECT_INVALID(tailor_trainer_export(trainer, "x"));
  EXPECT_INVALID(tailor_trainer_resume(trainer, "latest"));
  EXPECT_INVALID(tailor_trainer_evaluate(trainer, &evalLoss));
}

/* Validation: evaluating between steps changes no training result. */
static void runWithValidation(tailor_plan *train, const Recorded *whole) {
  tailor_trainer *trainer = NULL;
  tailor_trainer_options options = optionsFor(pathIn("eval"));
  tailor_train_metrics metrics;
  tailor_trainer_state state;
  double first = 0, again = 0;
  options.eval_data_path = pathIn("tokens.bin");
  options.max_steps = 3;
  EXPECT_OK(tailor_trainer_create(train, &options, &trainer));
  EXPECT_OK(tailor_trainer_get_state(trainer, &state));
  CHECK(state.has_validation && state.max_steps == 3, "validation, 3 steps");
  EXPECT_OK(tailor_trainer_evaluate(trainer, &first));
  EXPECT_OK(tailor_trainer_evaluate(trainer, &again));
  CHECK(isfinite(first) && first == again, "evaluating twice agrees");
  EXPECT_OK(tailor_trainer_step(trainer, &metrics));
  CHECK(metrics.loss == whole->loss[0], "evaluating left training alone");
  EXPECT_OK(tailor_trainer_step(trainer, &metrics));
  EXPECT_OK(tailor_trainer_step(trainer, &metrics));
  CHECK(metrics.step == 3 && metrics.has_eval_loss &&
            isfinite(metrics.eval_loss),
        "the last step reports the validation loss");
  tailor_trainer_free(trainer);
}

/* One fed step: rows 2k, 2k + 1 of the example token stream. */
static tailor_status feedStep(tailor_trainer *trainer, int k, int withLabels,
                              tailor_train_metrics *metrics) {
  int64_t ids[16];
  int i;
  for (i = 0; i < 16; ++i) {
    ids[i] = token(16 * k + i);
  }
  return tailor_trainer_step_batch(trainer, ids, withLabels ? ids : NULL, 2,
                                   8, metrics);
}

/* A trainer without a data path takes the caller's batches: checked
 * before anything runs, refused to the trainers that read a path, and the
 * same batches give the same losses (labels NULL meaning the ids). */
static void runFed(tailor_plan *train) {
  tailor_trainer *fed = NULL, *again = NULL, *reader = NULL;
  tailor_trainer_options options = optionsFor(pathIn("fed"));
  tailor_train_metrics metrics, other;
  int64_t bad[16] = {0};
  int k;
  options.data_path = NULL;
  EXPECT_OK(tailor_trainer_create(train, &options, &fed));
  EXPECT_INVALID(tailor_trainer_step(fed, &metrics));
  EXPECT_ERROR_SAYS("tailor_trainer_step_batch");
  EXPECT_INVALID(tailor_trainer_run(fed, NULL, NULL));
  EXPECT_INVALID(tailor_trainer_step_batch(fed, bad, NULL, 3, 8, &metrics));
  EXPECT_ERROR_SAYS("a step takes 2 sequences of 8 tokens");
  EXPECT_INVALID(tailor_trainer_step_batch(fed, NULL, NULL, 2, 8, &metrics));
  bad[13] = 100000;
  EXPECT_INVALID(tailor_trainer_step_batch(fed, bad, NULL, 2, 8, &metrics));
  EXPECT_ERROR_SAYS("token id 100000 at sequence 1, position 5");
  options = optionsFor(pathIn("fed-again"));
  options.data_path = "";
  EXPECT_OK(tailor_trainer_create(train, &options, &again));
  for (k = 0; k < 3; ++k) {
    EXPECT_OK(feedStep(fed, k, 0, &metrics));
    EXPECT_OK(feedStep(again, k, 1, &other));
    CHECK(metrics.step == k + 1 && metrics.loss == other.loss &&
              metrics.grad_norm == other.grad_norm,
          "fed steps: the same batches give the same losses");
  }
  options = optionsFor(pathIn("reader"));
  EXPECT_OK(tailor_trainer_create(train, &options, &reader));
  EXPECT_INVALID(feedStep(reader, 0, 0, &metrics));
  EXPECT_ERROR_SAYS("reads its data from");
  tailor_trainer_free(fed);
  tailor_trainer_free(again);
  tailor_trainer_free(reader);
  printf("fed batches: checked, refused to a reader, reproducible\n");
}

static void testTraining(void) {
  tailor_plan *train = NULL;
  Recorded whole = {0, -1, {0}, {0}};
  writeTokens(pathIn("tokens.bin"), 400);
  EXPECT_OK(tailor_plan_load(trainPath, &train));
  if (!train) {
    return;
  }
  testTrainerCreateMisuse(train);
  testTrainingNames(train);
  runWhole(train, &whole);
  runInterrupted(train, &whole);
  runWithValidation(train, &whole);
  runFed(train);
  tailor_plan_free(train);
  int foreign[16] = {0};
  EXPECT_INVALID(tailor_trainer_step((tailor_trainer *)foreign, NULL));
  tailor_trainer_free((tailor_trainer *)foreign);
  EXPECT_ERROR_SAYS("not a live tailor_trainer");
  printf("training: step, run with a callback, stop, checkpoint, export, "
         "resume (bit-identical), evaluate; freed and foreign trainers "
         "refused\n");
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: c_api_test FORWARD.tplan TRAIN.tplan WORK_DIR\n");
    return 2;
  }
  forwardPath = argv[1];
  trainPath = argv[2];
  work = argv[3];
  testLibrary();
  testPlanLoadMisuse();
  testPlanFromMemory();
  testPlanWithoutWeights();
  testSessions();
  testTraining();
  if (failures) {
    fprintf(stderr, "c_api_test: %d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
