/*===- runtime.h - tailor runtime C API ----------------------------*- C -*-===*
 *
 * The runtime executes compiled plans. It links no LLVM or MLIR, so an
 * application can embed it with a C compiler and, optionally, CUDA. Every call
 * returns a tailor_status; on failure tailor_last_error() says what went
 * wrong. No call exits the process.
 *
 *===----------------------------------------------------------------------===*/

#ifndef TAILOR_RUNTIME_H
#define TAILOR_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bumped whenever a declaration below changes incompatibly. */
#define TAILOR_RUNTIME_API_VERSION 4

typedef enum tailor_status {
  TAILOR_OK = 0,
  /** A caller passed a null pointer, an out-of-range index, ... */
  TAILOR_ERROR_INVALID_ARGUMENT = 1,
  /** What was asked for does not exist here (no CUDA, no GPU, no driver). */
  TAILOR_ERROR_UNAVAILABLE = 2,
  /** A CUDA, NCCL or system call failed; the message names it. */
  TAILOR_ERROR_INTERNAL = 3,
  /** A plan file is truncated, corrupt, of another version or inconsistent. */
  TAILOR_ERROR_INVALID_PLAN = 4,
  /** A file (plan, weights) cannot be opened, mapped or read. */
  TAILOR_ERROR_IO = 5,
  /** A kernel failed while running (bad index in the data, for instance). */
  TAILOR_ERROR_EXECUTION = 6,
} tailor_status;

/** The runtime's version, e.g. "0.1.0". */
const char *tailor_version(void);

/** The message of the last failing call on this thread ("" if none). */
const char *tailor_last_error(void);

/** 1 if this runtime was built with its CUDA backend, else 0. */
int tailor_built_with_cuda(void);

/** What the runtime knows of one GPU. */
typedef struct tailor_device_info {
  int ordinal;
  char name[256];
  /** Compute capability, e.g. 9.0 for H100. */
  int sm_major;
  int sm_minor;
  int multiprocessors;
  uint64_t total_memory_bytes;
} tailor_device_info;

/**
 * Counts the CUDA GPUs this process can use. On TAILOR_ERROR_UNAVAILABLE
 * (built without CUDA, no driver, no device) *count is 0 and
 * tailor_last_error() says which.
 */
tailor_status tailor_cuda_device_count(int *count);

/** Describes GPU `ordinal` (0 <= ordinal < tailor_cuda_device_count). */
tailor_status tailor_cuda_device_info(int ordinal, tailor_device_info *info);

/*===----------------------------------------------------------------------===*
 * Plans and sessions
 *
 * A tailor_plan is a loaded, verified plan file: immutable, shareable between
 * threads. A tailor_session binds a plan to memory: it allocates exactly the
 * arenas the plan names, binds the parameters (mapping their files), and runs
 * the plan's steps. A session is used by one thread at a time.
 *===----------------------------------------------------------------------===*/

typedef struct tailor_plan tailor_plan;
typedef struct tailor_session tailor_session;

/** Element types of inputs and outputs (the plan's DType numbering). */
typedef enum tailor_dtype {
  TAILOR_F32 = 0,
  TAILOR_F64 = 1,
  TAILOR_F16 = 2,
  TAILOR_BF16 = 3,
  TAILOR_I64 = 4,
  TAILOR_I32 = 5,
  TAILOR_I16 = 6,
  TAILOR_I8 = 7,
  TAILOR_U8 = 8,
  TAILOR_BOOL = 9,
} tailor_dtype;

/** The largest rank a plan's inputs and outputs may have. */
#define TAILOR_MAX_RANK 8

/** A plan input or output: name, element type, shape. */
typedef struct tailor_tensor_info {
  /** Owned by the plan; valid until tailor_plan_free. */
  const char *name;
  tailor_dtype dtype;
  int rank;
  int64_t shape[TAILOR_MAX_RANK];
  /** Bytes of the dense row-major tensor. */
  uint64_t bytes;
} tailor_tensor_info;

/** Bytes a plan needs (or a session holds), by what they hold. */
typedef struct tailor_memory_report {
  uint64_t parameters;
  uint64_t constants;
  uint64_t activations;
  uint64_t workspace;
  uint64_t optimizer_state;
  uint64_t gradients;
  uint64_t total;
} tailor_memory_report;

/** Loads and verifies the plan file at `path`. */
tailor_status tailor_plan_load(const char *path, tailor_plan **plan);

/**
 * Loads and verifies a plan held in memory (copied). Relative weight paths
 * resolve against `base_dir` (the current directory when NULL).
 */
tailor_status tailor_plan_load_from_memory(const void *data, size_t size,
                                           const char *base_dir,
                                           tailor_plan **plan);

/**
 * Frees a plan (NULL is fine). Sessions made from it share what they need
 * of it, so they may be freed before or after it. A pointer that is not a
 * live plan (freed already, or never made by tailor_plan_load*) is left
 * alone and tailor_last_error() says so; every other call refuses such a
 * pointer with TAILOR_ERROR_INVALID_ARGUMENT, as it refuses NULL.
 */
void tailor_plan_free(tailor_plan *plan);

int tailor_plan_input_count(const tailor_plan *plan);
int tailor_plan_output_count(const tailor_plan *plan);
tailor_status tailor_plan_input_info(const tailor_plan *plan, int index,
                                     tailor_tensor_info *info);
tailor_status tailor_plan_output_info(const tailor_plan *plan, int index,
                                      tailor_tensor_info *info);

/**
 * Entries: named runs of steps. An inference plan has one, "forward"; a
 * training plan has "train_step" (one micro-batch: forward, backward,
 * gradient accumulation) and "optimizer_step" (clipping, learning rate,
 * update). Every input and output belongs to one entry.
 *
 * A training plan's inputs and outputs, by name:
 *   train_step     in:  input_ids  i64 [micro_batch, seq]
 *                       labels     i64 [micro_batch, seq] (-100: no loss;
 *                                  the plan shifts them as HF does)
 *                       position_ids i64 [micro_batch, seq] (only plans
 *                                  compiled for sample packing: positions
 *                                  restart at 0 in each packed example)
 *                       seed       i64 [] (only plans with LoRA dropout: a
 *                                  new value per micro-batch)
 *                  out: loss       f32 [] (this micro-batch's mean)
 *   optimizer_step in:  step       i64 [] (the optimizer step being taken,
 *                                  counting from 1, as PyTorch's optimizer
 *                                  state and HF's global_step do: it sets
 *                                  the learning rate of the schedule and
 *                                  AdamW's bias corrections)
 *                  out: lr         f32 [] (the learning rate it applied)
 *                       grad_norm  f32 [] (the gradient norm before
 *                                  clipping, over all accumulated
 *                                  micro-batches)
 *   eval_step      (plans with a validation set) in: eval_input_ids,
 *                  eval_labels (and eval_position_ids); out: eval_loss.
 * Run train_step once per micro-batch of an accumulation, then
 * optimizer_step once; tailor_plan_input_info gives exact shapes.
 */
int tailor_plan_entry_count(const tailor_plan *plan);
/** The name of entry `index`, or NULL; valid while the plan lives. */
const char *tailor_plan_entry_name(const tailor_plan *plan, int index);
/** The entry input / output `index` belongs to, or -1. */
int tailor_plan_input_entry(const tailor_plan *plan, int index);
int tailor_plan_output_entry(const tailor_plan *plan, int index);

/** The memory the plan predicts (the arenas a session will allocate). */
tailor_status tailor_plan_memory(const tailor_plan *plan,
                                 tailor_memory_report *report);

typedef struct tailor_session_options {
  /** CPU worker threads; 0 picks the plan's target threads or the cores. */
  int num_threads;
} tailor_session_options;

/**
 * Allocates the plan's arenas and binds its parameters. `options` may be
 * NULL. Fails with TAILOR_ERROR_IO when a weights file is missing or short.
 */
tailor_status tailor_session_create(const tailor_plan *plan,
                                    const tailor_session_options *options,
                                    tailor_session **session);

/**
 * Frees a session (NULL is fine). As for plans, a pointer that is not a live
 * session is left alone with a message, and refused by every other call.
 */
void tailor_session_free(tailor_session *session);

/**
 * Copies `bytes` bytes of input `name` into the session. The dtype and shape
 * must be the plan's (see tailor_plan_input_info).
 */
tailor_status tailor_session_set_input(tailor_session *session,
                                       const char *name, tailor_dtype dtype,
                                       const int64_t *shape, int rank,
                                       const void *data, size_t bytes);

/** Runs the plan's first entry once (the forward pass of an inference plan). */
tailor_status tailor_session_run(tailor_session *session);

/**
 * Runs entry `name` once. Training state (gradients, optimizer moments) and
 * parameters persist across runs; outputs stay valid until the next run.
 */
tailor_status tailor_session_run_entry(tailor_session *session,
                                       const char *name);

/**
 * Points `*data` at output `name` inside the session's arenas (valid until
 * the next run or tailor_session_free) and fills `info` if not NULL.
 */
tailor_status tailor_session_output(const tailor_session *session,
                                    const char *name, const void **data,
                                    tailor_tensor_info *info);

/**
 * Points `*data` at parameter or training-state tensor `name` inside the
 * session (a state is named `<parameter>.<kind>`, kind grad, exp_avg,
 * exp_avg_sq or momentum_buffer) and fills `info` if not NULL. The memory
 * is the session's own and writable: an application saves and restores
 * weights and optimizer moments through it between runs. Valid until
 * tailor_session_free. For a plan that runs on a GPU it is a host copy,
 * refreshed from the device by each call; after writing to it, call
 * tailor_session_tensor_upload for the GPU to see the change. A parameter
 * sharded over ranks (ZeRO-3) has no whole tensor in a session, so both
 * calls refuse it (TAILOR_ERROR_INVALID_ARGUMENT).
 */
tailor_status tailor_session_tensor(tailor_session *session, const char *name,
                                    void **data, tailor_tensor_info *info);

/**
 * Writes the host copy of parameter or state `name` (what
 * tailor_session_tensor returned) to the GPU. A no-op for CPU sessions,
 * whose tensors are the host memory itself.
 */
tailor_status tailor_session_tensor_upload(tailor_session *session,
                                           const char *name);

/** The bytes the session's arenas actually hold, by category. */
tailor_status tailor_session_memory(const tailor_session *session,
                                    tailor_memory_report *report);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TAILOR_RUNTIME_H */
