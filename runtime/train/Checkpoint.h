//===- Checkpoint.h - checkpoints, PEFT adapters, resuming ------*- C++ -*-===//
//
// A checkpoint is DIR/checkpoint-<step>/ (FORMATS.md, the Hugging Face
// Trainer's layout) holding
//   adapter_config.json + adapter_model.safetensors   (LoRA plans: a PEFT
//       adapter, loadable with PeftModel.from_pretrained), or
//   model.safetensors                                 (full fine-tuning,
//       Hugging Face names; with the base model's config.json where the
//       plan's base model is a local model directory, loadable with
//       from_pretrained),
//   optimizer.safetensors  every state tensor as `<parameter>.<kind>`,
//   trainer_state.json     step, data position, seed, plan fingerprint and
//                          the loss history.
// Tensors are keyed by logical names, not by buffers, so a checkpoint
// outlives a recompiled plan as long as the trainable tensors agree (which
// the fingerprint checks). The directory is written under a temporary name
// and renamed whole; trainer_state.json is what marks it complete.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TRAIN_CHECKPOINT_H
#define TAILOR_RUNTIME_TRAIN_CHECKPOINT_H

#include "runtime/Plan.h"
#include "runtime/train/DataLoader.h"
#include "runtime/train/LossScaler.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tailor::runtime {
class Session;
} // namespace tailor::runtime

namespace tailor::train {

/// The per-step metrics file in an output directory (one JSON object a line).
constexpr const char *kMetricsFile = "metrics.jsonl";

/// A tensor in session memory that checkpoints save and restore.
struct TensorSlot {
  /// The plan's name: a parameter name, or `<parameter>.<kind>` for states.
  std::string name;
  runtime::DType dtype = runtime::DType::F32;
  std::vector<int64_t> shape;
  void *data = nullptr;
  /// The plan buffer behind `data` (a GPU session's host copy of it).
  uint32_t buffer = 0;
  /// The name in model files when it differs from `name`: the Hugging Face
  /// name of a weight an exporter renamed (Parameter.export_name).
  std::string exportName = "";
  /// The plan holds the transpose of the Hugging Face 2-D weight
  /// (Parameter.export_transposed); files hold the Hugging Face layout.
  bool transposed = false;
  /// A member of a sharded state or a ZeRO-3 parameter: its index in
  /// CheckpointLayout::shards (`data` then lies in that flat host copy,
  /// `buffer` is the chunk); -1 otherwise.
  int shard = -1;
  /// A layer split's slot of another stage (plan 1.10): that stage, `data`
  /// in CheckpointLayout::stageCopies; -1 for this rank's own.
  int stage = -1;

  uint64_t bytes() const;
  const std::string &fileName() const {
    return exportName.empty() ? name : exportName;
  }
  /// The shape as files store it.
  std::vector<int64_t> fileShape() const;
};

/// The PEFT LoraConfig a plan's adapter corresponds to.
struct AdapterInfo {
  /// "lora", "lora-fa" or "full".
  std::string variant = "lora";
  int64_t r = 0;
  double alpha = 0;
  double dropout = 0;
  bool useRslora = false;
  /// PEFT's fan_in_fan_out: the adapted weights are [in, out] in Hugging
  /// Face's files (GPT-2's Conv1D; Parameter.export_fan_in_fan_out).
  bool fanInFanOut = false;
  /// Short module names (q_proj, v_proj, ...).
  std::vector<std::string> targetModules;
  /// Adapted decoder layers; empty means all.
  std::vector<int64_t> layers;
  std::string baseModel;

  bool isAdapter() const { return variant != "full"; }
};

/// A state or a bucket of parameters sharded over ranks (ZeRO, plan 1.7):
/// this rank holds chunk `position` of a flat space whose members' logical
/// tensors are the layout's slots (`<member>.<kind>` for a state, the
/// parameters' names for ZeRO-3 parameters). Their data point into `flat`,
/// a host copy of the whole space that syncLayout gathers from every
/// rank's chunk and scatters back to this rank's.
struct ShardedState {
  /// The state's name in the plan (a parameter bucket: its first member's
  /// name), and its buffer (this rank's chunk).
  std::string name;
  uint32_t buffer = 0;
  /// What errors call it: "sharded state 'NAME'" or "sharded parameter
  /// 'NAME'".
  std::string what;
  runtime::DType dtype = runtime::DType::F32;
  /// Rank 0's group (sorted), as the plan names it; this rank's position
  /// in its own group of that shape, which is the chunk it holds.
  std::vector<int> group;
  int position = 0;
  uint64_t chunkElements = 0;
  /// The flat space's flat_elements, 8-byte aligned; padding stays 0.
  std::vector<uint64_t> flat;

  uint64_t chunkBytes() const {
    return chunkElements * runtime::dtypeSize(dtype);
  }
  uint8_t *chunkOf(int rankPosition) {
    return reinterpret_cast<uint8_t *>(flat.data()) +
           static_cast<uint64_t>(rankPosition) * chunkBytes();
  }
};

/// What a checkpoint holds for one plan and session.
struct CheckpointLayout {
  AdapterInfo adapter;
  /// LoRA plans: every LoRA weight (frozen lora_A of LoRA-FA included, since
  /// PEFT needs it); full fine-tuning: every trainable parameter. A ZeRO-3
  /// parameter's slot is its whole logical tensor, in the flat host copy of
  /// its bucket (one shard per distinct chunk buffer), so files, the
  /// fingerprint and resuming are those of DDP.
  std::vector<TensorSlot> parameters;
  /// Gradient accumulators and optimizer moments: one slot per state, or
  /// per member of a sharded state (named as the unsharded plan names it,
  /// `<member>.<kind>`, so checkpoints move between DDP and ZeRO and
  /// between world sizes).
  std::vector<TensorSlot> states;
  /// The gradient accumulators among them, moved out of `states`: a
  /// checkpoint is taken at an optimizer-step boundary, where every one is
  /// zero (the update zeroes it), so they are not saved; they still count
  /// in the fingerprint, as they did when they were.
  std::vector<TensorSlot> gradients;
  /// The sharded states and parameter buckets whose host copies the slots
  /// above point into (owned here, never moved once built). A bucket's copy
  /// starts out holding this rank's chunk, so scattering it back before
  /// anything was read into it changes nothing.
  std::vector<std::unique_ptr<ShardedState>> shards;
  /// A layer split: its stages (0 otherwise), and the host copies of the
  /// other stages' slots (PipelineCheckpoint.cpp), never moved once built.
  int stages = 0;
  std::deque<std::vector<uint64_t>> stageCopies;
  /// A hash of the names, dtypes and shapes above.
  std::string fingerprint;
};

/// Brings the slots and session memory together. `toHost` (before a
/// checkpoint or the weights are written): GPU sessions refresh the host
/// copies of every slot, and every rank gathers the chunks of the sharded
/// states and ZeRO-3 parameter buckets into their flat host copies -- a
/// collective over each one's group, so EVERY rank calls it. Otherwise
/// (after a checkpoint or an adapter was read): GPU sessions write the host
/// copies to the device, and each shard takes its chunk from the flat copy
/// (no communication). "" or the failure; on the CPU only shards have
/// anything to do.
std::string syncLayout(runtime::Session &session, CheckpointLayout &layout,
                       bool toHost);

/// A layer split's stage (PipelineCheckpoint.cpp): adds the other stages'
/// slots to `layout`, host copies described by their ranks, so every rank's
/// layout (and fingerprint) is the whole model's. EVERY rank calls it.
std::string joinStageLayouts(const runtime::Session &session,
                             CheckpointLayout &layout);

/// Brings every stage's parameters and states into every rank's layout
/// (before a checkpoint or the weights are written). EVERY rank calls it.
std::string gatherStageSlots(const runtime::Session &session,
                             CheckpointLayout &layout);

/// One logged step.
struct LogEntry {
  int64_t step = 0;
  double loss = 0;
  double learningRate = 0;
  double gradNorm = 0;
  /// The validation loss measured after this step, if it was.
  std::optional<double> evalLoss;
};

/// Everything besides tensors that resuming needs.
struct TrainerState {
  int64_t globalStep = 0;
  DataPosition data;
  uint64_t seed = 0;
  std::string fingerprint;
  std::vector<LogEntry> logHistory;
  /// fp16 plans: the loss scaler's state (trainer_state.json's
  /// `loss_scaler`); absent for other plans.
  std::optional<LossScalerState> scaler;
};

/// Builds the layout of a training plan bound to `session`; fails for plans
/// without a `training` table or with trainable tensors a checkpoint cannot
/// name.
bool buildCheckpointLayout(const runtime::LoadedPlan &plan,
                           const runtime::Session &session,
                           CheckpointLayout &layout, std::string &error);

/// Sets `layout.fingerprint` from its tensors' names, dtypes and shapes.
void computeFingerprint(CheckpointLayout &layout);

/// Writes the model files into `dir` (each file atomically):
/// adapter_config.json + adapter_model.safetensors, or model.safetensors
/// plus, where the base model is a local directory holding one, its
/// config.json.
bool writeModelFiles(const CheckpointLayout &layout, const std::string &dir,
                     std::string &error);

/// The name of step `step`'s checkpoint directory under `outputDir`.
std::string checkpointPath(const std::string &outputDir, int64_t step);

/// Writes `checkpointPath(outputDir, state.globalStep)` atomically,
/// replacing an older directory of that name only once the new one is
/// complete.
bool saveCheckpoint(const CheckpointLayout &layout, const TrainerState &state,
                    const std::string &outputDir, std::string &error);

/// Restores the layout's tensors and `state` from the checkpoint directory
/// `dir`. Every expected tensor must be present with its dtype and shape
/// (errors name the file and tensor) and the fingerprint must match; nothing
/// is written to the tensors unless everything checks.
bool loadCheckpoint(const CheckpointLayout &layout, const std::string &dir,
                    TrainerState &state, std::string &error);

/// The checkpoint-N directory under `outputDir` with the largest N whose
/// trainer_state.json is complete, or "" if none.
std::string findLatestCheckpoint(const std::string &outputDir);

/// What removeStaleTemporaries found in an output directory (entry names).
struct StaleTemporaries {
  std::vector<std::string> removed;
  /// `checkpoint-N.old-PID` directories renamed back to `checkpoint-N`.
  std::vector<std::string> restored;
  /// Temporaries left alone, each with the reason.
  std::vector<std::string> kept;

  bool empty() const {
    return removed.empty() && restored.empty() && kept.empty();
  }
  /// One line for the terminal ("" when empty).
  std::string describe(const std::string &outputDir) const;
};

/// Cleans what a killed checkpoint writer leaves in `outputDir`, and
/// nothing else: `checkpoint-N.tmp-PID` directories and the temporaries of
/// the files the trainer writes there (`.metrics.jsonl.tmp-PID-K`, the final
/// model files) are removed; a `checkpoint-N.old-PID` directory is removed
/// when `checkpoint-N` is complete and renamed back when it is missing (it
/// is then the only copy). Temporaries of another running process are kept.
/// A missing `outputDir` holds nothing stale.
bool removeStaleTemporaries(const std::string &outputDir,
                            StaleTemporaries &found, std::string &error);

/// What adapter_config.json says about the graph an adapter needs.
struct PeftAdapterConfig {
  double r = 0;
  double alpha = 0;
  bool useRslora = false;
  bool useDora = false;
  /// fan_in_fan_out: the adapted weights are stored [in, out] (GPT-2's
  /// Conv1D), so a merge adds (B A)^T.
  bool fanInFanOut = false;
  /// Module names (q_proj, ...) or a single "all-linear".
  std::vector<std::string> targetModules;
  /// layers_to_transform; empty means every layer.
  std::vector<int64_t> layers;
};

/// Reads DIR/adapter_config.json (a LORA adapter with numeric r and
/// lora_alpha); false and an error naming the file and key otherwise.
bool readPeftAdapterConfig(const std::string &dir, PeftAdapterConfig &config,
                           std::string &error);

/// Loads a PEFT adapter directory (adapter_config.json +
/// adapter_model.safetensors) as the starting LoRA weights: r, lora_alpha
/// and use_rslora must agree with the plan and every LoRA weight must be
/// present with its shape (F16, BF16 and F64 are converted to f32).
bool loadPeftAdapter(const CheckpointLayout &layout, const std::string &dir,
                     std::string &error);

/// PEFT's config for `adapter` (the adapter_config.json text).
std::string adapterConfigJson(const AdapterInfo &adapter);

} // namespace tailor::train

#endif // TAILOR_RUNTIME_TRAIN_CHECKPOINT_H
