/*===- runtime.h - tailor runtime C API ----------------------------*- C -*-===*
 *
 * The runtime executes compiled plans. It links no LLVM or MLIR, so an
 * application can embed it with a C compiler and, optionally, CUDA. Every call
 * returns a tailor_status; on failure tailor_last_error() says what went
 * wrong. No call exits the process, and no C++ exception leaves the library
 * (one is caught and returned as TAILOR_ERROR_INTERNAL with its message).
 *
 * Handles (tailor_plan, tailor_session, tailor_trainer, tailor_generator,
 * tailor_tokenizer) are checked on every
 * call: NULL, a freed handle or a pointer this library did not make is
 * refused with TAILOR_ERROR_INVALID_ARGUMENT, never dereferenced. Strings
 * returned by the library are owned by it; each call says how long they
 * stay valid. tailor_last_error() is per thread.
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
#define TAILOR_RUNTIME_API_VERSION 5

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
  /**
   * A file cannot be opened, mapped or read: the plan file, or a weights
   * file a plan binds (missing, unreadable, or shorter than the bytes the
   * plan reads from it). The message names the file.
   */
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
  /** A generation plan's KV cache (tailor compile --task generate). */
  uint64_t kv_cache;
  uint64_t total;
} tailor_memory_report;

/**
 * Loads and verifies the plan file at `path`, and checks that every weights
 * file it binds exists and holds the bytes it reads (relative weight paths
 * resolve against the plan's directory). `*plan` is NULL on failure.
 * Returns TAILOR_ERROR_INVALID_ARGUMENT when `path` or `plan` is NULL;
 * TAILOR_ERROR_IO when the plan file or one of its weights files cannot be
 * opened or read, or a weights file is shorter than the plan reads (the
 * message names the file); TAILOR_ERROR_INVALID_PLAN when the file is not a
 * plan, is truncated, damaged, of another format version or inconsistent,
 * or is a layer split's plan loaded by a process no launcher (mpirun,
 * torchrun, SLURM) started or on another number of ranks than it was
 * compiled for (a damaged plan is reported as one even when its weights
 * are missing too); TAILOR_ERROR_INTERNAL when memory runs out.
 */
tailor_status tailor_plan_load(const char *path, tailor_plan **plan);

/**
 * Loads and verifies a plan held in memory (copied). Relative weight paths
 * resolve against `base_dir` (the current directory when NULL). Returns
 * what tailor_plan_load returns, TAILOR_ERROR_INVALID_ARGUMENT also for
 * NULL `data` with a nonzero `size`.
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
 *                       attention_mask i64 [micro_batch, seq] (only
 *                                  exports that take one: 1 for a token
 *                                  attention may see; tailor_trainer feeds
 *                                  ones, exact for right padding)
 *                       seed       i64 [] (only plans with LoRA dropout: a
 *                                  new value per micro-batch)
 *                       loss_scale f32 [] (only fp16 plans, format 1.13:
 *                                  the dynamic loss scale S the backward
 *                                  starts from; gradients come out S times
 *                                  the loss's)
 *                  out: loss       f32 [] (this micro-batch's mean)
 *   optimizer_step in:  step       i64 [] (the optimizer step being taken,
 *                                  counting from 1, as PyTorch's optimizer
 *                                  state and HF's global_step do: it sets
 *                                  the learning rate of the schedule and
 *                                  AdamW's bias corrections; with loss
 *                                  scaling it counts applied updates, not
 *                                  skipped steps)
 *                       inv_scale  f32 [] (only fp16 plans: 1/S, rounded
 *                                  to f32 as torch.amp.GradScaler does)
 *                  out: lr         f32 [] (the learning rate it applied)
 *                       grad_norm  f32 [] (the gradient norm before
 *                                  clipping, over all accumulated
 *                                  micro-batches)
 *                       found_inf  f32 [] (only fp16 plans: 1 when a
 *                                  gradient was inf or NaN, and the update
 *                                  was skipped -- parameters and optimizer
 *                                  state untouched, accumulators cleared;
 *                                  then back the scale off, as GradScaler's
 *                                  update() does; tailor_trainer does all
 *                                  of this itself)
 *   eval_step      (plans with a validation set) in: eval_input_ids,
 *                  eval_labels (and eval_position_ids, eval_attention_mask
 *                  where train_step has them); out: eval_loss.
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

/** The most eos ids tailor_generation_info carries. */
#define TAILOR_MAX_EOS_IDS 8

/**
 * What decoding needs of a generation plan (`tailor compile --task
 * generate`). Its entry "decode" takes `input_ids` i64 [batch, 1] and
 * `position` i64 [] (the token's index in the KV cache, in
 * [0, max_seq_len)) and returns `logits` f32 [batch, 1, vocab_size]. The
 * cache persists across runs of the session: run decode once per prompt
 * token at positions 0, 1, ... then once per generated token.
 *
 * A plan compiled with `--prefill-chunk C` (C > 1; 64 by default) also has
 * an entry "prefill": `prefill_input_ids` i64 [batch, C] (a chunk of the
 * prompt, padded after its last real token with any id in the vocabulary),
 * `prefill_position` i64 [] (the chunk's first position) and
 * `prefill_last` i64 [] (the row of its last real token, in [0, C)); it
 * writes the chunk's keys and values at positions position..position+C-1
 * and returns `prefill_logits` f32 [batch, 1, vocab_size], the logits of
 * row `prefill_last`. Rows a padded chunk writes past its last real token
 * are overwritten by the tokens decoded there and never read before.
 */
typedef struct tailor_generation_info {
  int max_seq_len;
  int batch;
  int64_t vocab_size;
  /** Ids that end generation (the model's config.json); 0 when unknown. */
  int eos_count;
  int64_t eos_token_ids[TAILOR_MAX_EOS_IDS];
  /** Prompt tokens per run of the "prefill" entry; 0 when the plan has
   *  none (plans compiled before it, or with --prefill-chunk 1). */
  int prefill_chunk;
} tailor_generation_info;

/**
 * Fills `info` for a generation plan; TAILOR_ERROR_INVALID_ARGUMENT for any
 * other plan (the message says it is not one).
 */
tailor_status tailor_plan_generation_info(const tailor_plan *plan,
                                          tailor_generation_info *info);

typedef struct tailor_session_options {
  /** CPU worker threads; 0 picks the plan's target threads or the cores. */
  int num_threads;
} tailor_session_options;

/**
 * Allocates the plan's arenas and binds its parameters. `options` may be
 * NULL. Fails with TAILOR_ERROR_IO when a weights file cannot be opened or
 * read or is short; tailor_plan_load checked them, so this is a file
 * removed, truncated or replaced since the plan was loaded.
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
 * exp_avg_sq or momentum_buffer; see tailor_state_info for the others)
 * and fills `info` if not NULL. The memory
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

/*===----------------------------------------------------------------------===*
 * Parameters and training state by name
 *
 * A plan's parameters (weights) and training states (gradient accumulators,
 * optimizer moments) are listed by their logical, unsharded names, the names
 * checkpoints use. Thread rules as for the plan: any thread, concurrently.
 *===----------------------------------------------------------------------===*/

/** A parameter of a plan. */
typedef struct tailor_parameter_info {
  /** The plan's name (e.g. model.layers.0.self_attn.q_proj.weight). Owned
   *  by the plan; valid until tailor_plan_free. */
  const char *name;
  /** The name in Hugging Face files (safetensors, adapters): `name` unless
   *  the exporter renamed the weight. Owned by the plan, as `name`. */
  const char *file_name;
  /** Element type and logical shape as the plan computes with it. */
  tailor_dtype dtype;
  int rank;
  int64_t shape[TAILOR_MAX_RANK];
  /** Bytes of the dense row-major tensor of that shape and dtype. */
  uint64_t bytes;
  /** 1 if training updates it (LoRA weights; every weight in full
   *  fine-tuning), else 0. */
  int trainable;
  /** 1 if the plan stores it quantized (NF4, int8, GPTQ): it is bound
   *  from its source file when the session is created and cannot be
   *  written through the calls below. */
  int quantized;
  /** 1 if it is sharded over ranks (ZeRO-3): no session holds it whole. */
  int sharded;
  /** 1 if the plan holds the transpose of the file's 2-D tensor (shape is
   *  the plan's; files hold [shape[1], shape[0]]). */
  int transposed;
} tailor_parameter_info;

/** A training state: `<parameter>.<kind>`, kind grad, exp_avg, exp_avg_sq
 *  or momentum_buffer (PyTorch's names); with optimizer offload, master and
 *  grad_host (host copies of the parameter and its gradient, refreshed
 *  every step: reading them between steps shows the last step's values,
 *  and checkpoints leave them out); with PowerSGD, powersgd_error,
 *  powersgd_p and powersgd_q. */
typedef struct tailor_state_info {
  /** Owned by the plan; valid until tailor_plan_free. */
  const char *name;
  /** The parameter it belongs to, and its kind (owned by the plan). */
  const char *parameter;
  const char *kind;
  tailor_dtype dtype;
  int rank;
  int64_t shape[TAILOR_MAX_RANK];
  uint64_t bytes;
  /** 1 if the plan shards it over ranks (ZeRO): tailor_session_tensor
   *  refuses it; checkpoints hold it whole. */
  int sharded;
} tailor_state_info;

/** The number of parameters, or 0 (and a last error) for a bad plan. */
int tailor_plan_parameter_count(const tailor_plan *plan);

/** Describes parameter `index` (0 <= index < count). Fails with
 *  TAILOR_ERROR_INVALID_ARGUMENT for a bad plan, index or NULL info. */
tailor_status tailor_plan_parameter_info(const tailor_plan *plan, int index,
                                         tailor_parameter_info *info);

/** The number of training states (0 for an inference plan), one per
 *  logical tensor (a sharded state counts each member). */
int tailor_plan_state_count(const tailor_plan *plan);

/** Describes state `index`; fails as tailor_plan_parameter_info. */
tailor_status tailor_plan_state_info(const tailor_plan *plan, int index,
                                     tailor_state_info *info);

/**
 * Copies a parameter's weights from caller memory into the session
 * (`bytes` bytes of `dtype`, `shape`, row-major, in the plan's layout: see
 * tailor_parameter_info). Everything is checked before anything is written;
 * TAILOR_ERROR_INVALID_ARGUMENT names the mismatch (no such parameter,
 * another dtype, shape or byte count, a quantized or sharded parameter). On
 * a GPU session the device copy is updated too. Call it between runs.
 */
tailor_status tailor_session_set_parameter(tailor_session *session,
                                           const char *name,
                                           tailor_dtype dtype,
                                           const int64_t *shape, int rank,
                                           const void *data, size_t bytes);

/**
 * Loads parameters from the safetensors file at `path`, chosen at run time.
 * Each tensor of the file must name a parameter (its plan name or its
 * file_name), with the parameter's shape (the file's layout: transposed
 * parameters are transposed on the way in) and dtype; F16, BF16 and F64
 * tensors are also accepted for F32 parameters (converted). Parameters the
 * file does not name keep their weights. Nothing is written unless every
 * tensor checks. `*loaded` (may be NULL) receives the number of parameters
 * written. TAILOR_ERROR_IO: the file cannot be opened or read;
 * TAILOR_ERROR_INVALID_ARGUMENT: a malformed file, or a tensor whose name,
 * shape or dtype does not fit (the message names the tensor).
 */
tailor_status tailor_session_load_safetensors(tailor_session *session,
                                              const char *path, int *loaded);

/**
 * Applies the PEFT LoRA adapter in directory `dir` (adapter_config.json +
 * adapter_model.safetensors, as PEFT's save_pretrained writes it) to a
 * session. A plan with LoRA parameters (a LoRA training plan, checked
 * against its r, lora_alpha and use_rslora; a forward plan compiled with
 * `tailor compile --adapter`) takes the adapter's weights as they are. A
 * plan without them has each adapted weight merged, W += scale * B A (scale
 * lora_alpha / r, or / sqrt(r) with use_rslora), as PEFT's merge_and_unload
 * does; the weight is found by its Hugging Face name (<module>.weight: the
 * parameter's name or file_name; plans of TorchScript exports record
 * file_name only when they train, so compile such forward plans with
 * --adapter instead). Merged weights must be 2-D F32, neither quantized
 * nor sharded. Nothing is
 * written unless every tensor checks. TAILOR_ERROR_IO: a file cannot be
 * read; TAILOR_ERROR_INVALID_ARGUMENT: a config or tensor that does not fit
 * the plan (the message names the file and tensor).
 */
tailor_status tailor_session_apply_adapter(tailor_session *session,
                                           const char *dir);

/*===----------------------------------------------------------------------===*
 * Training
 *
 * A tailor_trainer drives a training plan as `tailor train` does (which is a
 * client of these calls): it reads the data, runs train_step over each
 * micro-batch of a step and optimizer_step once, follows the plan's
 * learning-rate schedule, gradient accumulation, evaluation and checkpoint
 * cadence, writes OUTPUT_DIR/metrics.jsonl, checkpoints in
 * OUTPUT_DIR/checkpoint-N and the final adapter (or model) in OUTPUT_DIR.
 * A trainer is used by one thread at a time, except
 * tailor_trainer_request_stop, which any thread (or a signal handler's
 * thread, via a flag) may call at any time. Plans compiled for several ranks
 * run with one trainer per rank (mpirun / torchrun); every rank then makes
 * the same calls in the same order.
 *===----------------------------------------------------------------------===*/

typedef struct tailor_trainer tailor_trainer;

/** How to train. Fill it with tailor_trainer_options_init, then set what
 *  differs. Strings are copied by tailor_trainer_create. */
typedef struct tailor_trainer_options {
  /** Training data: a nanoGPT .bin or llm.c shard, a directory or glob of
   *  them, a .jsonl file, or "dummy"; NULL (or "") when the caller feeds
   *  every step's batch with tailor_trainer_step_batch. */
  const char *data_path;
  /** Token type of raw .bin files: "uint16" (NULL) or "uint32". */
  const char *data_dtype;
  /** Validation data, read like data_path; NULL for none (or the plan's
   *  val_set_size held out of the training data). */
  const char *eval_data_path;
  /** Where checkpoints, metrics.jsonl and the final weights go (required;
   *  created if missing). */
  const char *output_dir;
  /** NULL starts fresh; "latest" resumes from the newest complete
   *  checkpoint in output_dir (fresh if none); else a checkpoint
   *  directory. */
  const char *resume;
  /** A PEFT adapter directory whose weights start the LoRA parameters, or
   *  NULL. */
  const char *init_adapter;
  /** Writes the measured timeline of the first trace_steps steps
   *  (Chrome/Perfetto JSON) to this file; NULL for none. */
  const char *trace_path;
  int64_t trace_steps;
  /** Steps to train to; 0 takes the plan's max_steps. */
  int64_t max_steps;
  /** Checkpoint every this many steps; -1 takes the plan's save_steps, 0
   *  saves only at the end (and on a stop). */
  int64_t save_steps;
  /** CPU worker threads; 0 lets the runtime choose. */
  int num_threads;
  /** 1: progress lines on stdout, a live bar and notes on stderr, as
   *  `tailor train` prints them; 0 (default): print nothing. */
  int print_progress;
  /** 1: SIGINT and SIGTERM during tailor_trainer_run stop the run after the
   *  current step (with a checkpoint) instead of killing the process; the
   *  previous handlers are restored when it returns. 0 (default): leave
   *  signals alone. */
  int handle_signals;
} tailor_trainer_options;

/** Sets every field to its default (see each field); no-op for NULL. */
void tailor_trainer_options_init(tailor_trainer_options *options);

/** What one optimizer step reports (also a line of metrics.jsonl). */
typedef struct tailor_train_metrics {
  /** The step just taken, counting from 1. */
  int64_t step;
  /** Mean micro-batch loss of the step (over every rank's micro-batches). */
  double loss;
  /** Learning rate applied, and the gradient norm before clipping. */
  double lr;
  double grad_norm;
  double tokens_per_s;
  double seconds;
  /** Passes over the training data so far. */
  double epoch;
  /** 1 when this step computed the validation loss (eval_steps, or the
   *  last step), which is then eval_loss. */
  int has_eval_loss;
  double eval_loss;
  /** 1 when a stop was requested: this step's checkpoint was written and
   *  tailor_trainer_run returns after it. */
  int stopped;
  /** fp16 plans (mixed_precision: fp16, dynamic loss scaling as
   *  torch.amp.GradScaler): the loss scale this step used (0 for other
   *  plans), and 1 when an inf/NaN gradient skipped its update (the scale
   *  then backs off; not an error). */
  double loss_scale;
  int skipped;
} tailor_train_metrics;

/** Where a trainer stands. */
typedef struct tailor_trainer_state {
  /** The last completed step (0 before the first) and the last step. */
  int64_t step;
  int64_t max_steps;
  /** Tokens per optimizer step (micro-batch x sequence x accumulation x
   *  ranks). */
  int64_t tokens_per_step;
  /** 1 if the plan trains an adapter (checkpoints are PEFT adapters), 0
   *  for full fine-tuning. */
  int trains_adapter;
  /** 1 if there is validation data (tailor_trainer_evaluate works). */
  int has_validation;
  /** 1 once a stop ended a run early. */
  int interrupted;
} tailor_trainer_state;

/**
 * Called after each step of tailor_trainer_run with its metrics (valid
 * during the call) and the caller's pointer. Returning non-zero asks the run
 * to stop after this step (a checkpoint is written), as
 * tailor_trainer_request_stop does. It must not call other tailor_trainer_*
 * functions on the same trainer except tailor_trainer_request_stop.
 */
typedef int (*tailor_train_callback)(const tailor_train_metrics *metrics,
                                     void *user_data);

/**
 * Creates a trainer for training plan `plan` (the trainer shares the plan:
 * it may be freed first). It binds a session, opens the data, prepares
 * output_dir, loads init_adapter, then resumes if asked. Fails with
 * TAILOR_ERROR_INVALID_ARGUMENT for a bad plan handle, NULL options, a
 * missing output_dir, a bad data_dtype or a negative count,
 * and TAILOR_ERROR_EXECUTION for anything the run refuses (an inference
 * plan, unreadable data, a checkpoint that does not fit): the message names
 * the file or place.
 */
tailor_status tailor_trainer_create(const tailor_plan *plan,
                                    const tailor_trainer_options *options,
                                    tailor_trainer **trainer);

/** tailor_trainer_create for the plan file at `plan_path` (loaded and
 *  verified; errors as tailor_plan_load, then as tailor_trainer_create). */
tailor_status tailor_trainer_create_from_file(
    const char *plan_path, const tailor_trainer_options *options,
    tailor_trainer **trainer);

/** Frees a trainer (NULL is fine); a pointer that is not a live trainer is
 *  left alone with a message, as for plans. Writes nothing. */
void tailor_trainer_free(tailor_trainer *trainer);

/**
 * Trains one optimizer step: train_step over gradient_accumulation_steps
 * micro-batches, optimizer_step, validation when due, a line of
 * metrics.jsonl, a checkpoint when due (save_steps, the last step, or a
 * requested stop). Fills `metrics` (may be NULL). Fails with
 * TAILOR_ERROR_INVALID_ARGUMENT when already at max_steps, and
 * TAILOR_ERROR_EXECUTION when the step fails (a non-finite loss, a kernel
 * error, a checkpoint that cannot be written).
 */
tailor_status tailor_trainer_step(tailor_trainer *trainer,
                                  tailor_train_metrics *metrics);

/**
 * Trains one optimizer step on a batch the caller gives, for a trainer
 * created without a data_path: `rows` = gradient_accumulation_steps x
 * micro_batch_size sequences (this rank's, on several ranks) of
 * `sequence_len` tokens, row-major `input_ids` and `labels` (NULL: the ids,
 * as for causal LM; -100 is ignored; the loss shifts them). The arrays are
 * read during the call only. Otherwise as tailor_trainer_step; a
 * checkpoint then holds no data position (resuming, feed from where you
 * left off). Fails with TAILOR_ERROR_INVALID_ARGUMENT, before anything
 * runs, for a trainer that reads a data path, another shape, an id or label
 * outside the vocabulary, or at max_steps; TAILOR_ERROR_EXECUTION when the
 * step fails.
 */
tailor_status tailor_trainer_step_batch(tailor_trainer *trainer,
                                        const int64_t *input_ids,
                                        const int64_t *labels, int64_t rows,
                                        int64_t sequence_len,
                                        tailor_train_metrics *metrics);

/**
 * Trains to max_steps, calling `callback` (may be NULL) after each step, and
 * writes the final adapter (or model) into output_dir. A requested stop (the
 * callback, tailor_trainer_request_stop, a signal with handle_signals)
 * ends it after that step's checkpoint, with TAILOR_OK and without the
 * final weights; tailor_trainer_get_state says so. Errors as
 * tailor_trainer_step.
 */
tailor_status tailor_trainer_run(tailor_trainer *trainer,
                                 tailor_train_callback callback,
                                 void *user_data);

/**
 * The validation loss of the current weights (mean over every counted token
 * of the validation set); training state is left bit for bit as it was.
 * TAILOR_ERROR_INVALID_ARGUMENT without validation data.
 */
tailor_status tailor_trainer_evaluate(tailor_trainer *trainer,
                                      double *eval_loss);

/**
 * Writes a checkpoint of the current step into DIR/checkpoint-<step> (DIR:
 * `output_dir`, or the trainer's when NULL), atomically.
 * TAILOR_ERROR_EXECUTION when it cannot be written (the message names the
 * file).
 */
tailor_status tailor_trainer_save_checkpoint(tailor_trainer *trainer,
                                             const char *output_dir);

/**
 * The last checkpoint this trainer wrote or "" (owned by the trainer; valid
 * until the next call on it), or NULL for a bad handle.
 */
const char *tailor_trainer_last_checkpoint(const tailor_trainer *trainer);

/**
 * Restores checkpoint directory `checkpoint` ("latest": the newest in
 * output_dir): weights, optimizer state, step and data position; training
 * then continues bit-identically to a run that never stopped.
 * TAILOR_ERROR_EXECUTION when it does not fit the plan (the message names
 * the file and tensor); nothing is changed then.
 */
tailor_status tailor_trainer_resume(tailor_trainer *trainer,
                                    const char *checkpoint);

/**
 * Writes the current weights into directory `dir` (created if needed): a
 * PEFT adapter (adapter_config.json + adapter_model.safetensors, loadable
 * with PeftModel.from_pretrained) or, for full fine-tuning,
 * model.safetensors, plus a copy of config.json only when the plan's base
 * model (training.base_model in `tailor inspect --json`) is a local
 * directory holding one, as a recipe's base_model naming a save_pretrained
 * directory is; for a hub id, a file name or no base model no config.json
 * is written, and from_pretrained needs the config given apart.
 * TAILOR_ERROR_EXECUTION when it cannot be written.
 */
tailor_status tailor_trainer_export(tailor_trainer *trainer, const char *dir);

/** Asks the trainer to stop after its current (or next) step. Any thread,
 *  any time; fails only for a bad handle. */
tailor_status tailor_trainer_request_stop(tailor_trainer *trainer);

/** Fills `state` with where the trainer stands. */
tailor_status tailor_trainer_get_state(const tailor_trainer *trainer,
                                       tailor_trainer_state *state);

/*===----------------------------------------------------------------------===*
 * Generation
 *
 * A tailor_generator decodes with a generation plan (`tailor compile --task
 * generate`): it owns a session of the plan, feeds tokens through its
 * `decode` entry one position at a time (the KV cache fills as it goes) and
 * chooses next tokens greedily or by sampling as transformers' generate
 * does (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, in
 * that order, then a draw). `tailor generate` is a client of these calls.
 * A generator is used by one thread at a time; handles are checked as
 * sessions are.
 *
 * A plan compiled with --batch B decodes B copies of each token; the
 * generator reads row 0's logits.
 *===----------------------------------------------------------------------===*/

/** How the next token is chosen. Fill it with tailor_sampling_options_init
 *  (greedy), then set what differs. */
typedef struct tailor_sampling_options {
  /** 0: greedy (the first largest logit). Above 0: the logits are divided
   *  by it and the next token is drawn. Negative or non-finite: refused. */
  double temperature;
  /** Keep only logits >= the top_k-th largest before drawing; 0: all.
   *  Negative: refused. */
  int64_t top_k;
  /** Keep the fewest largest tokens whose probability sum exceeds top_p
   *  (the largest always stays); in (0, 1], 1: all. */
  double top_p;
  /** Seeds the generator's draws (mt19937_64, 53 bits per draw): a seed
   *  gives the same tokens on every machine. */
  uint64_t seed;
} tailor_sampling_options;

typedef struct tailor_generator tailor_generator;

/** Greedy options: temperature 0, top_k 0, top_p 1, seed 0. */
void tailor_sampling_options_init(tailor_sampling_options *options);

/**
 * The distribution a sampling generator draws from for one row of logits:
 * `probabilities[v]` for v < vocab_size (filtered tokens exactly 0; a
 * one-hot vector for greedy options). TAILOR_ERROR_INVALID_ARGUMENT for
 * null pointers, vocab_size < 1 or options out of range (the message says
 * which).
 */
tailor_status tailor_sampling_probabilities(
    const float *logits, int64_t vocab_size,
    const tailor_sampling_options *options, double *probabilities);

/**
 * Creates a generator over its own session of `plan` (a generation plan;
 * any other is refused with TAILOR_ERROR_INVALID_ARGUMENT).
 * `session_options` and `sampling` may be NULL (defaults; greedy). Fails
 * as tailor_session_create does.
 */
tailor_status tailor_generator_create(
    const tailor_plan *plan, const tailor_session_options *session_options,
    const tailor_sampling_options *sampling, tailor_generator **generator);

/** Frees a generator and its session (NULL is fine). */
void tailor_generator_free(tailor_generator *generator);

/**
 * Merges (or binds) the PEFT adapter in `dir` into the generator's session,
 * as tailor_session_apply_adapter does. Call it before the first token:
 * refused once tokens are in the cache.
 */
tailor_status tailor_generator_apply_adapter(tailor_generator *generator,
                                             const char *dir);

/** Replaces the sampling options and restarts the draws at their seed. */
tailor_status tailor_generator_set_sampling(
    tailor_generator *generator, const tailor_sampling_options *sampling);

/**
 * Feeds `count` tokens at the next positions of the cache (the prompt, or
 * a user's turn). Every id must be in [0, vocab_size) and the cache must
 * hold them all: both are checked before anything runs
 * (TAILOR_ERROR_INVALID_ARGUMENT, naming the id or the cache size). With a
 * plan that has a "prefill" entry, runs of 2 or more tokens go through it,
 * ceil(count / prefill_chunk) runs (the last one padded); otherwise, and
 * for a single token, the "decode" entry runs once per token. Either way
 * the logits afterwards are those after the last token.
 */
tailor_status tailor_generator_prefill(tailor_generator *generator,
                                       const int64_t *ids, size_t count);

/** Feeds one token (the last one chosen): tailor_generator_prefill of 1. */
tailor_status tailor_generator_decode(tailor_generator *generator,
                                      int64_t token);

/**
 * Chooses the next token from the logits of the last token fed (greedy or
 * a draw, per the sampling options). Refused before any token is fed.
 * Sampling the same logits twice draws twice.
 */
tailor_status tailor_generator_sample(tailor_generator *generator,
                                      int64_t *token);

/**
 * Points `*logits` at row 0 of the last token's logits (`*vocab_size`
 * floats, owned by the generator, valid until its next prefill, decode or
 * reset). Refused before any token is fed.
 */
tailor_status tailor_generator_logits(const tailor_generator *generator,
                                      const float **logits,
                                      int64_t *vocab_size);

/** The number of tokens in the cache (the next token's position). */
tailor_status tailor_generator_position(const tailor_generator *generator,
                                        int *position);

/** Empties the cache (the next token goes to position 0); the sampling
 *  options and the draws' state stay. */
tailor_status tailor_generator_reset(tailor_generator *generator);

/** 1 if `token` is one of the plan's eos ids, else 0 (0 for a bad
 *  handle). */
int tailor_generator_is_eos(const tailor_generator *generator, int64_t token);

/*===----------------------------------------------------------------------===*
 * Tokenizers
 *
 * A tailor_tokenizer turns text into token ids and back, as the model's
 * own tokenizer does: a Hugging Face tokenizer.json with a byte-level BPE
 * model (GPT-2, Llama-3, Qwen2 style) or a SentencePiece tokenizer.model.
 * Other kinds (WordPiece, Unigram JSON, Metaspace pre-tokenizers, ...) are
 * refused, the message naming the file and the type. One thread at a time
 * per tokenizer.
 *===----------------------------------------------------------------------===*/

typedef struct tailor_tokenizer tailor_tokenizer;

/**
 * Opens `path`: tokenizer.json, tokenizer.model, or a directory holding
 * one (tokenizer.json first). TAILOR_ERROR_IO when nothing can be read
 * there; TAILOR_ERROR_INVALID_ARGUMENT for a file of a kind not supported.
 */
tailor_status tailor_tokenizer_load(const char *path,
                                    tailor_tokenizer **tokenizer);

/** Frees a tokenizer (NULL is fine). */
void tailor_tokenizer_free(tailor_tokenizer *tokenizer);

/** The number of ids the tokenizer knows (largest id + 1), or 0 and a last
 *  error for a bad handle. */
int64_t tailor_tokenizer_size(const tailor_tokenizer *tokenizer);

/**
 * The ids of `length` bytes of UTF-8 `text`, as transformers'
 * `tokenizer(text)["input_ids"]` gives them (a BOS the tokenizer adds
 * included). `*ids` points at `*count` ids owned by the tokenizer, valid
 * until its next call.
 */
tailor_status tailor_tokenizer_encode(tailor_tokenizer *tokenizer,
                                      const char *text, size_t length,
                                      const int64_t **ids, size_t *count);

/**
 * The text of `count` ids (special tokens left out when `skip_special` is
 * not 0). `*text` points at `*length` bytes owned by the tokenizer (also
 * NUL-terminated), valid until its next call. A byte-level tokenizer's ids
 * may end inside a UTF-8 character: the bytes come back as they are.
 * TAILOR_ERROR_INVALID_ARGUMENT names an id the tokenizer does not know.
 */
tailor_status tailor_tokenizer_decode(tailor_tokenizer *tokenizer,
                                      const int64_t *ids, size_t count,
                                      int skip_special, const char **text,
                                      size_t *length);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TAILOR_RUNTIME_H */
