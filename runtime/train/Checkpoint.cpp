//===- Checkpoint.cpp - checkpoint layout, saving, loading, resuming ------===//

#include "runtime/train/Checkpoint.h"

#include "runtime/Session.h"
#include "runtime/train/AtomicFile.h"
#include "runtime/train/Safetensors.h"
#include "runtime/train/TensorFiles.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <fstream>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <map>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace tailor::train {

namespace fb = tailor::plan;
using nlohmann::json;
using runtime::DType;
using namespace detail;

constexpr const char *kFullModelFile = "model.safetensors";
constexpr const char *kOptimizerFile = "optimizer.safetensors";
constexpr const char *kTrainerStateFile = "trainer_state.json";

static bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

static bool isLoraWeight(const std::string &name) {
  return endsWith(name, ".lora_A.weight") || endsWith(name, ".lora_B.weight");
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

void computeFingerprint(CheckpointLayout &layout) {
  // FNV-1a over sorted "kind name dtype shape" lines: stable across runs and
  // compilers, and independent of buffer placement.
  std::vector<std::string> lines;
  auto add = [&](const char *kind, const TensorSlot &slot) {
    lines.push_back(std::string(kind) + " " + slot.name + " " +
                    safetensorsDType(slot.dtype) + " " +
                    formatShape(slot.shape));
  };
  for (const TensorSlot &slot : layout.parameters) {
    add("parameter", slot);
  }
  for (const std::vector<TensorSlot> *slots :
       {&layout.states, &layout.gradients}) {
    for (const TensorSlot &slot : *slots) {
      add("state", slot);
    }
  }
  std::sort(lines.begin(), lines.end());
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const std::string &line : lines) {
    for (unsigned char c : line + "\n") {
      hash = (hash ^ c) * 0x100000001b3ull;
    }
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(hash));
  layout.fingerprint = text;
}

/// The slots of sharded state `state`: one per member, named and shaped as
/// the member's unsharded state, pointing into the state's flat host copy,
/// which the layout keeps.
static bool addShardedState(const runtime::LoadedPlan &plan,
                            const runtime::Session &session,
                            const fb::State &state, CheckpointLayout &layout,
                            std::string &error) {
  const fb::StateShard &shard = *state.shard();
  auto sharded = std::make_unique<ShardedState>();
  sharded->name = state.name()->str();
  sharded->what = "sharded state '" + sharded->name + "'";
  sharded->buffer = state.buffer();
  sharded->dtype = plan.bufferDType(state.buffer());
  sharded->group.assign(shard.group()->begin(), shard.group()->end());
  std::sort(sharded->group.begin(), sharded->group.end());
  sharded->position = session.groupPosition(sharded->group);
  if (sharded->position < 0) {
    error = plan.name() + ": sharded state '" + sharded->name +
            "': its group of ranks is neither a node nor one index across "
            "nodes, so this rank cannot tell which chunk it holds";
    return false;
  }
  size_t element = runtime::dtypeSize(sharded->dtype);
  sharded->chunkElements = plan.bufferBytes(state.buffer()) / element;
  uint64_t flatBytes = static_cast<uint64_t>(shard.flat_elements()) * element;
  sharded->flat.assign((flatBytes + 7) / 8, 0);
  std::map<std::string, const fb::Parameter *> parameters;
  for (const fb::Parameter *param : *plan.root().parameters()) {
    parameters[param->name()->str()] = param;
  }
  auto *flat = reinterpret_cast<uint8_t *>(sharded->flat.data());
  for (uint32_t k = 0; k < shard.members()->size(); ++k) {
    std::string member = shard.members()->Get(k)->str();
    TensorSlot slot;
    slot.name = member + "." + state.kind()->str();
    slot.dtype = sharded->dtype;
    slot.shape = plan.parameterShape(*parameters.at(member));
    slot.data = flat + static_cast<uint64_t>(shard.offsets()->Get(k)) * element;
    slot.buffer = state.buffer();
    slot.shard = static_cast<int>(layout.shards.size());
    layout.states.push_back(std::move(slot));
  }
  layout.shards.push_back(std::move(sharded));
  return true;
}

/// The slots of per-rank state `state` (PowerSGD's error feedback): one per
/// rank of the world, `<parameter>.<kind>.rank<r>`, each of the state's
/// shape, in a flat host copy of every rank's value that syncLayout gathers
/// (each rank's value is one chunk, the world the group).
static void addPerRankState(const runtime::LoadedPlan &plan,
                            const runtime::Session &session,
                            const fb::State &state, CheckpointLayout &layout) {
  auto ranks = std::make_unique<ShardedState>();
  ranks->name = state.name()->str();
  ranks->what = "per-rank state '" + ranks->name + "'";
  ranks->buffer = state.buffer();
  ranks->dtype = plan.bufferDType(state.buffer());
  int world = std::max(1, plan.root().world_size());
  for (int r = 0; r < world; ++r) {
    ranks->group.push_back(r);
  }
  ranks->position = session.rank();
  ranks->chunkElements =
      plan.bufferBytes(state.buffer()) / runtime::dtypeSize(ranks->dtype);
  ranks->flat.assign((ranks->chunkBytes() * world + 7) / 8, 0);
  // As a parameter bucket's: scattering back before anything was read into
  // the copy changes nothing.
  std::memcpy(ranks->chunkOf(ranks->position),
              session.bufferData(state.buffer()), ranks->chunkBytes());
  for (int r = 0; r < world; ++r) {
    TensorSlot slot;
    slot.name = state.parameter()->str() + "." + state.kind()->str() +
                ".rank" + std::to_string(r);
    slot.dtype = ranks->dtype;
    slot.shape = plan.bufferShape(state.buffer());
    slot.data = ranks->chunkOf(r);
    slot.buffer = state.buffer();
    slot.shard = static_cast<int>(layout.shards.size());
    layout.states.push_back(std::move(slot));
  }
  layout.shards.push_back(std::move(ranks));
}

/// The slot of ZeRO-3 parameter `param`: its whole tensor in the flat host
/// copy of its bucket, which is added to the layout with the bucket's
/// first member (holding this rank's chunk, see CheckpointLayout::shards).
/// `buckets` maps chunk buffers to their index in layout.shards.
static bool shardedParameterSlot(const runtime::LoadedPlan &plan,
                                 const runtime::Session &session,
                                 const fb::Parameter &param,
                                 CheckpointLayout &layout,
                                 std::map<uint32_t, int> &buckets,
                                 TensorSlot &slot, std::string &error) {
  const fb::ParameterShard &shard = *param.shard();
  size_t element = runtime::dtypeSize(plan.bufferDType(param.buffer()));
  auto [it, added] = buckets.try_emplace(
      param.buffer(), static_cast<int>(layout.shards.size()));
  if (added) {
    auto bucket = std::make_unique<ShardedState>();
    bucket->name = param.name()->str();
    bucket->what = "sharded parameter '" + bucket->name + "'";
    bucket->buffer = param.buffer();
    bucket->dtype = plan.bufferDType(param.buffer());
    bucket->group.assign(shard.group()->begin(), shard.group()->end());
    std::sort(bucket->group.begin(), bucket->group.end());
    bucket->position = session.groupPosition(bucket->group);
    if (bucket->position < 0) {
      error = plan.name() + ": " + bucket->what +
              ": its group of ranks is neither a node nor one index across "
              "nodes, so this rank cannot tell which chunk it holds";
      return false;
    }
    bucket->chunkElements = plan.bufferBytes(param.buffer()) / element;
    uint64_t flatBytes = static_cast<uint64_t>(shard.flat_elements()) * element;
    bucket->flat.assign((flatBytes + 7) / 8, 0);
    std::memcpy(bucket->chunkOf(bucket->position),
                session.bufferData(param.buffer()), bucket->chunkBytes());
    layout.shards.push_back(std::move(bucket));
  }
  ShardedState &bucket = *layout.shards[static_cast<size_t>(it->second)];
  slot.name = param.name()->str();
  slot.dtype = bucket.dtype;
  slot.shape = plan.parameterShape(param);
  slot.data = reinterpret_cast<uint8_t *>(bucket.flat.data()) +
              static_cast<uint64_t>(shard.offset()) * element;
  slot.buffer = param.buffer();
  slot.shard = it->second;
  return true;
}

/// A slot for plan buffer `buffer`, named `name`.
static TensorSlot slotFor(const runtime::LoadedPlan &plan,
                          const runtime::Session &session,
                          const std::string &name, uint32_t buffer) {
  TensorSlot slot;
  slot.name = name;
  slot.dtype = plan.bufferDType(buffer);
  slot.shape = plan.bufferShape(buffer);
  slot.data = session.bufferData(buffer);
  slot.buffer = buffer;
  return slot;
}

/// The states a checkpoint saves: one slot each, a member's of a sharded
/// one, a rank's of a per-rank one; none of the copies refreshed every
/// step.
static bool addStateSlots(const runtime::LoadedPlan &plan,
                          const runtime::Session &session,
                          CheckpointLayout &layout, std::string &error) {
  const fb::Plan &p = plan.root();
  if (!p.states()) {
    return true;
  }
  // ZeRO-1 keeps whole gradient accumulators and a chunk one the update
  // zeroes: at a step boundary the chunk holds nothing, and the whole
  // accumulators are what a checkpoint saves under the members' names.
  std::set<std::string> wholeGradients;
  for (const fb::State *state : *p.states()) {
    if (!state->shard() && state->kind()->string_view() == "grad") {
      wholeGradients.insert(state->parameter()->str());
    }
  }
  for (const fb::State *state : *p.states()) {
    const fb::StateShard *shard = state->shard();
    if (shard && state->kind()->string_view() == "grad" &&
        shard->members()->size() > 0 &&
        wholeGradients.count(shard->members()->Get(0)->str())) {
      continue;
    }
    // Optimizer offload's host copies are refreshed every step, and a
    // pipeline stage's received inputs every micro-batch.
    if (state->kind()->string_view() == "master" ||
        state->kind()->string_view() == "grad_host" ||
        state->kind()->string_view() == "pipeline_input") {
      continue;
    }
    if (shard) {
      if (!addShardedState(plan, session, *state, layout, error)) {
        return false;
      }
      continue;
    }
    if (state->per_rank()) {
      addPerRankState(plan, session, *state, layout);
      continue;
    }
    layout.states.push_back(slotFor(
        plan, session, state->parameter()->str() + "." + state->kind()->str(),
        state->buffer()));
  }
  return true;
}

/// PEFT's fan_in_fan_out for `adapter`: true when every adapted weight
/// the plan holds is [in, out] in Hugging Face's files (GPT-2's Conv1D).
/// PEFT's config has one flag; no model tailor imports mixes Conv1D and
/// Linear targets, and should one, PEFT and tailor's merge both follow each
/// module's own layout (PEFT warns), so a mixed adapter writes false.
static bool adaptsFanInFanOut(const fb::Plan &p, const fb::Adapter &adapter) {
  if (!adapter.modules() || !p.parameters()) {
    return false;
  }
  std::map<std::string, bool> inOut;
  for (const fb::Parameter *param : *p.parameters()) {
    const auto *name = param->export_name() ? param->export_name()
                                            : param->name();
    inOut[name->str()] = param->export_fan_in_fan_out();
  }
  int found = 0;
  for (const auto *module : *adapter.modules()) {
    auto it = inOut.find(module->str() + ".weight");
    if (it == inOut.end()) {
      continue; // another stage's layer (a layer split)
    }
    if (!it->second) {
      return false;
    }
    ++found;
  }
  return found > 0;
}

bool buildCheckpointLayout(const runtime::LoadedPlan &plan,
                           const runtime::Session &session,
                           CheckpointLayout &layout, std::string &error) {
  const fb::Plan &p = plan.root();
  const fb::Training *training = p.training();
  if (!training) {
    error = plan.name() + ": not a training plan (no training section)";
    return false;
  }
  layout = CheckpointLayout();
  AdapterInfo &adapter = layout.adapter;
  if (const fb::Adapter *a = training->adapter()) {
    adapter.variant = a->variant()->str();
    adapter.r = a->r();
    adapter.alpha = a->alpha();
    adapter.dropout = a->dropout();
    adapter.useRslora = a->use_rslora();
    // PEFT saves the resolved short names (q_proj, ...), which the module
    // paths give even when the recipe said all-linear.
    std::set<std::string> names;
    if (a->modules()) {
      for (const auto *module : *a->modules()) {
        std::string path = module->str();
        names.insert(path.substr(path.find_last_of('.') + 1));
      }
    }
    if (names.empty() && a->target_modules()) {
      for (const auto *module : *a->target_modules()) {
        names.insert(module->str());
      }
    }
    adapter.targetModules.assign(names.begin(), names.end());
    if (a->layers()) {
      adapter.layers.assign(a->layers()->begin(), a->layers()->end());
    }
    adapter.fanInFanOut = adaptsFanInFanOut(p, *a);
  } else {
    adapter.variant = "full";
  }
  if (training->base_model()) {
    adapter.baseModel = training->base_model()->str();
  }
  if (adapter.variant != "lora" && adapter.variant != "lora-fa" &&
      adapter.variant != "full") {
    error = plan.name() + ": unknown adapter variant '" + adapter.variant + "'";
    return false;
  }

  auto slotOf = [&](const std::string &name, uint32_t buffer) {
    return slotFor(plan, session, name, buffer);
  };
  std::map<uint32_t, int> buckets;
  auto parameterSlot = [&](const fb::Parameter &param, TensorSlot &slot) {
    if (param.shard()) {
      return shardedParameterSlot(plan, session, param, layout, buckets, slot,
                                  error);
    }
    slot = slotOf(param.name()->str(), param.buffer());
    return true;
  };
  if (p.parameters()) {
    for (const fb::Parameter *param : *p.parameters()) {
      std::string name = param->name()->str();
      TensorSlot slot;
      if (adapter.isAdapter()) {
        if (isLoraWeight(name)) {
          if (!parameterSlot(*param, slot)) {
            return false;
          }
          layout.parameters.push_back(std::move(slot));
        } else if (param->trainable()) {
          error = plan.name() + ": trainable parameter '" + name +
                  "' is not a LoRA weight, which a PEFT adapter cannot hold";
          return false;
        }
      } else if (param->trainable()) {
        if (!parameterSlot(*param, slot)) {
          return false;
        }
        if (param->export_name()) {
          slot.exportName = param->export_name()->str();
        }
        slot.transposed = param->export_transposed();
        if (slot.transposed && slot.shape.size() != 2) {
          error = plan.name() + ": parameter '" + name +
                  "' is marked transposed but is not 2-D";
          return false;
        }
        layout.parameters.push_back(std::move(slot));
      }
    }
  }
  if (layout.parameters.empty()) {
    error = plan.name() + ": the plan has no " +
            (adapter.isAdapter() ? "LoRA" : "trainable") + " parameters";
    return false;
  }
  if (!addStateSlots(plan, session, layout, error)) {
    return false;
  }
  // Gradient accumulators are zero where checkpoints are taken.
  auto gradient = [](const TensorSlot &slot) {
    return slot.name.size() > 5 &&
           slot.name.compare(slot.name.size() - 5, 5, ".grad") == 0;
  };
  auto firstGradient =
      std::stable_partition(layout.states.begin(), layout.states.end(),
                            [&](const TensorSlot &slot) {
                              return !gradient(slot);
                            });
  layout.gradients.assign(std::make_move_iterator(firstGradient),
                          std::make_move_iterator(layout.states.end()));
  layout.states.erase(firstGradient, layout.states.end());
  computeFingerprint(layout);
  if (p.pipeline()) {
    // Every stage's slots, which the other ranks describe.
    if (std::string problem =
            joinStageLayouts(session, layout);
        !problem.empty()) {
      error = plan.name() + ": " + problem;
      return false;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

/// A full fine-tune loads with transformers' from_pretrained when its
/// directory also holds the base model's config.json: copied from
/// `base_model` when that names a local Hugging Face model directory (the
/// recipe's, or the ONNX model's when compile found a config.json beside
/// it); where it is not, as for a hub id, there is nothing to copy.
static bool copyBaseConfig(const std::string &baseModel, const std::string &dir,
                           std::string &error) {
  if (baseModel.empty()) {
    return true;
  }
  std::ifstream config(baseModel + "/config.json", std::ios::binary);
  if (!config) {
    return true;
  }
  std::ostringstream text;
  text << config.rdbuf();
  if (!config.good() && !config.eof()) {
    error = baseModel + "/config.json: cannot be read";
    return false;
  }
  return writeFileAtomically(dir + "/config.json", text.str(), error);
}

bool writeModelFiles(const CheckpointLayout &layout, const std::string &dir,
                     std::string &error) {
  if (!layout.adapter.isAdapter()) {
    return writeSafetensors(dir + "/" + kFullModelFile,
                            inputsOf(layout.parameters, ""), error) &&
           copyBaseConfig(layout.adapter.baseModel, dir, error);
  }
  // The weights first: a reader that finds the config finds them too.
  return writeSafetensors(dir + "/" + kAdapterModelFile,
                          inputsOf(layout.parameters, kPeftPrefix), error) &&
         writeFileAtomically(dir + "/" + kAdapterConfigFile,
                             adapterConfigJson(layout.adapter), error);
}

std::string checkpointPath(const std::string &outputDir, int64_t step) {
  return outputDir + "/checkpoint-" + std::to_string(step);
}

static std::string trainerStateJson(const CheckpointLayout &layout,
                                    const TrainerState &state) {
  json root;
  root["format"] = "tailor-trainer-state";
  root["version"] = 1;
  root["global_step"] = state.globalStep;
  root["seed"] = state.seed;
  root["plan_fingerprint"] = layout.fingerprint;
  root["data"] = {{"epoch", state.data.epoch}, {"index", state.data.index}};
  json history = json::array();
  for (const LogEntry &entry : state.logHistory) {
    json item = {{"step", entry.step},
                 {"loss", entry.loss},
                 {"learning_rate", entry.learningRate},
                 {"grad_norm", entry.gradNorm}};
    if (entry.evalLoss) {
      item["eval_loss"] = *entry.evalLoss;
    }
    history.push_back(std::move(item));
  }
  root["log_history"] = std::move(history);
  if (state.scaler) {
    // The scale is an f32: a double holds it exactly.
    root["loss_scaler"] = {{"scale", static_cast<double>(state.scaler->scale)},
                           {"growth_tracker", state.scaler->growthTracker},
                           {"skipped_steps", state.scaler->skippedSteps}};
  }
  return root.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

bool saveCheckpoint(const CheckpointLayout &layout, const TrainerState &state,
                    const std::string &outputDir, std::string &error) {
  std::unique_ptr<AtomicDirectory> dir = AtomicDirectory::create(
      checkpointPath(outputDir, state.globalStep), error);
  if (!dir) {
    return false;
  }
  const std::string &temp = dir->tempPath();
  // trainer_state.json last: it is what marks a checkpoint complete.
  return writeModelFiles(layout, temp, error) &&
         writeSafetensors(temp + "/" + kOptimizerFile,
                          inputsOf(layout.states, ""), error) &&
         writeFileAtomically(temp + "/" + kTrainerStateFile,
                             trainerStateJson(layout, state), error) &&
         dir->commit(error);
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

static bool readUnsigned(const json &root, const char *key, uint64_t &out) {
  auto it = root.find(key);
  if (it == root.end() || !it->is_number_unsigned()) {
    return false;
  }
  out = it->get<uint64_t>();
  return true;
}

static bool readTrainerState(const std::string &path, TrainerState &state,
                             std::string &error) {
  std::string text;
  if (!readTextFile(path, text, error)) {
    return false;
  }
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    error = path + ": not a JSON object";
    return false;
  }
  uint64_t step = 0;
  auto data = root.find("data");
  auto fingerprint = root.find("plan_fingerprint");
  if (!readUnsigned(root, "global_step", step) ||
      !readUnsigned(root, "seed", state.seed) || data == root.end() ||
      !data->is_object() || !readUnsigned(*data, "epoch", state.data.epoch) ||
      !readUnsigned(*data, "index", state.data.index) ||
      fingerprint == root.end() || !fingerprint->is_string()) {
    error = path + ": missing or invalid global_step, seed, data or "
                   "plan_fingerprint";
    return false;
  }
  state.globalStep = static_cast<int64_t>(step);
  state.fingerprint = fingerprint->get<std::string>();
  state.scaler.reset();
  if (auto scaler = root.find("loss_scaler"); scaler != root.end()) {
    uint64_t tracker = 0, skipped = 0;
    auto scale = scaler->is_object() ? scaler->find("scale") : scaler->end();
    if (!scaler->is_object() || scale == scaler->end() ||
        !scale->is_number() ||
        !readUnsigned(*scaler, "growth_tracker", tracker) ||
        !readUnsigned(*scaler, "skipped_steps", skipped)) {
      error = path + ": invalid loss_scaler (expected scale, growth_tracker "
                     "and skipped_steps)";
      return false;
    }
    state.scaler = LossScalerState{static_cast<float>(scale->get<double>()),
                                   static_cast<int64_t>(tracker),
                                   static_cast<int64_t>(skipped)};
  }
  state.logHistory.clear();
  if (auto history = root.find("log_history");
      history != root.end() && history->is_array()) {
    for (const json &item : *history) {
      LogEntry entry;
      auto number = [&](const char *key) {
        auto it = item.find(key);
        return it != item.end() && it->is_number() ? it->get<double>() : NAN;
      };
      entry.step = static_cast<int64_t>(number("step"));
      entry.loss = number("loss");
      entry.learningRate = number("learning_rate");
      entry.gradNorm = number("grad_norm");
      if (item.contains("eval_loss")) {
        entry.evalLoss = number("eval_loss");
      }
      state.logHistory.push_back(entry);
    }
  }
  return true;
}

bool loadCheckpoint(const CheckpointLayout &layout, const std::string &dir,
                    TrainerState &state, std::string &error) {
  TrainerState loaded;
  if (!readTrainerState(dir + "/" + kTrainerStateFile, loaded, error)) {
    return false;
  }
  bool adapter = layout.adapter.isAdapter();
  std::string modelPath =
      dir + "/" + (adapter ? kAdapterModelFile : kFullModelFile);
  std::unique_ptr<SafetensorsFile> model =
      SafetensorsFile::open(modelPath, error);
  if (!model) {
    return false;
  }
  std::unique_ptr<SafetensorsFile> optimizer =
      SafetensorsFile::open(dir + "/" + kOptimizerFile, error);
  if (!optimizer) {
    return false;
  }
  // Checkpoints written before gradients were left out hold them (zero):
  // read them back as they are.
  std::vector<TensorSlot> saved = layout.states;
  if (!layout.gradients.empty() &&
      optimizer->find(layout.gradients.front().fileName())) {
    saved.insert(saved.end(), layout.gradients.begin(), layout.gradients.end());
  }
  if (!checkTensors(*model, layout.parameters, adapter ? kPeftPrefix : "",
                    /*toF32=*/false, error) ||
      !checkTensors(*optimizer, saved, "", /*toF32=*/false, error)) {
    return false;
  }
  if (loaded.fingerprint != layout.fingerprint) {
    error = dir + "/" + kTrainerStateFile + ": plan fingerprint " +
            loaded.fingerprint + " does not match this plan's " +
            layout.fingerprint + " (its trainable tensors differ)";
    return false;
  }
  copyTensors(*model, layout.parameters, adapter ? kPeftPrefix : "");
  copyTensors(*optimizer, saved, "");
  state = std::move(loaded);
  return true;
}

/// Parses `checkpoint-<N>` (N of at most 18 digits).
static std::optional<uint64_t> checkpointStep(const std::string &name) {
  const std::string prefix = "checkpoint-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) ||
      name.find_first_not_of("0123456789", prefix.size()) !=
          std::string::npos ||
      name.size() - prefix.size() > 18) {
    return std::nullopt;
  }
  return std::stoull(name.substr(prefix.size()));
}

/// Whether `path` holds a complete checkpoint of step `step`: its
/// trainer_state.json, written last, reads and names that step.
static bool isCompleteCheckpoint(const std::string &path, uint64_t step) {
  TrainerState state;
  std::string ignored;
  return readTrainerState(path + "/" + kTrainerStateFile, state, ignored) &&
         static_cast<uint64_t>(state.globalStep) == step;
}

/// The names in directory `path`; false if it cannot be listed.
static bool listDirectory(const std::string &path,
                          std::vector<std::string> &names) {
  DIR *dir = ::opendir(path.c_str());
  if (!dir) {
    return false;
  }
  while (struct dirent *entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") {
      names.push_back(std::move(name));
    }
  }
  ::closedir(dir);
  return true;
}

std::string findLatestCheckpoint(const std::string &outputDir) {
  std::vector<std::string> names;
  if (!listDirectory(outputDir, names)) {
    return "";
  }
  std::vector<std::pair<uint64_t, std::string>> candidates;
  for (const std::string &name : names) {
    if (std::optional<uint64_t> step = checkpointStep(name)) {
      candidates.emplace_back(*step, name);
    }
  }
  std::sort(candidates.rbegin(), candidates.rend());
  for (const auto &[step, name] : candidates) {
    std::string path = outputDir + "/" + name;
    if (isCompleteCheckpoint(path, step)) {
      return path;
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Stale temporaries
//===----------------------------------------------------------------------===//

/// Whether `leftover` is one the trainer's own writes into an output
/// directory create: checkpoint directories, or the files written there.
static bool isTrainerLeftover(const Leftover &leftover) {
  if (leftover.kind != Leftover::Kind::TemporaryFile) {
    return checkpointStep(leftover.target).has_value();
  }
  for (const char *file :
       {kAdapterModelFile, kAdapterConfigFile, kFullModelFile, kMetricsFile}) {
    if (leftover.target == file) {
      return true;
    }
  }
  return false;
}

/// Whether another process with id `pid` runs now (and may still be writing).
static bool isOtherLiveProcess(long pid) {
  if (pid <= 0 || pid == static_cast<long>(::getpid())) {
    return false;
  }
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

/// Settles one `checkpoint-N.old-PID`: the superseded copy goes once
/// `checkpoint-N` is complete, and comes back while it is missing.
static bool settleReplacedDirectory(const std::string &outputDir,
                                    const std::string &name,
                                    const Leftover &leftover,
                                    StaleTemporaries &found,
                                    std::string &error) {
  std::string path = outputDir + "/" + name;
  std::string target = outputDir + "/" + leftover.target;
  struct stat info;
  if (::lstat(target.c_str(), &info) != 0) {
    if (::rename(path.c_str(), target.c_str()) != 0) {
      error = path + ": cannot rename back to " + leftover.target + ": " +
              std::strerror(errno);
      return false;
    }
    found.restored.push_back(name);
    return true;
  }
  if (!isCompleteCheckpoint(target, *checkpointStep(leftover.target))) {
    found.kept.push_back(name + " (" + leftover.target + " is incomplete)");
    return true;
  }
  if (!removeTree(path, error)) {
    return false;
  }
  found.removed.push_back(name);
  return true;
}

bool removeStaleTemporaries(const std::string &outputDir,
                            StaleTemporaries &found, std::string &error) {
  found = StaleTemporaries();
  std::vector<std::string> names;
  if (!listDirectory(outputDir, names)) {
    if (errno == ENOENT) {
      return true;
    }
    error = outputDir + ": cannot list: " + std::strerror(errno);
    return false;
  }
  // Replaced directories first: one may be the only copy of a checkpoint
  // whose new version never got its name.
  std::sort(names.begin(), names.end());
  std::stable_partition(names.begin(), names.end(), [](const std::string &n) {
    std::optional<Leftover> leftover = parseLeftover(n);
    return leftover && leftover->kind == Leftover::Kind::ReplacedDirectory;
  });
  for (const std::string &name : names) {
    std::optional<Leftover> leftover = parseLeftover(name);
    if (!leftover || !isTrainerLeftover(*leftover)) {
      continue;
    }
    if (isOtherLiveProcess(leftover->pid)) {
      found.kept.push_back(name + " (process " + std::to_string(leftover->pid) +
                           " is running)");
      continue;
    }
    if (leftover->kind == Leftover::Kind::ReplacedDirectory) {
      if (!settleReplacedDirectory(outputDir, name, *leftover, found, error)) {
        return false;
      }
      continue;
    }
    if (!removeTree(outputDir + "/" + name, error)) {
      return false;
    }
    found.removed.push_back(name);
  }
  return true;
}

std::string StaleTemporaries::describe(const std::string &outputDir) const {
  if (empty()) {
    return "";
  }
  auto join = [](const std::vector<std::string> &names) {
    std::string text;
    for (const std::string &name : names) {
      text += (text.empty() ? "" : ", ") + name;
    }
    return text;
  };
  std::vector<std::string> parts;
  if (!removed.empty()) {
    parts.push_back("removed " + join(removed));
  }
  if (!restored.empty()) {
    parts.push_back("restored " + join(restored));
  }
  if (!kept.empty()) {
    parts.push_back("kept " + join(kept));
  }
  std::string line = "temporaries of an interrupted write in " + outputDir;
  for (size_t i = 0; i < parts.size(); ++i) {
    line += (i ? "; " : ": ") + parts[i];
  }
  return line;
}

/// Gathers every rank's chunk of `state` into its flat host copy over the
/// state's group (GPU: from the chunk's refreshed host copy).
static std::string gatherShard(runtime::Session &session,
                               ShardedState &state) {
  if (std::string problem = session.download(state.buffer); !problem.empty()) {
    return problem;
  }
  const void *chunk = session.bufferData(state.buffer);
  if (state.group.size() == 1) {
    std::memcpy(state.chunkOf(0), chunk, state.chunkBytes());
    return "";
  }
  runtime::comm::Communicator *group = nullptr;
  if (std::string problem = session.groupCommunicator(state.group, group);
      !problem.empty()) {
    return problem;
  }
  if (group->rank() != state.position) {
    return "the group's communicator has this rank at " +
           std::to_string(group->rank()) + ", its chunk is " +
           std::to_string(state.position);
  }
  return group->allGatherHost(chunk, state.chunkOf(0), state.chunkElements,
                              state.dtype);
}

/// Copies this rank's chunk of `state`'s flat host copy into the state (GPU:
/// its host copy, then the device).
static std::string scatterShard(runtime::Session &session,
                                ShardedState &state) {
  std::memcpy(session.bufferData(state.buffer), state.chunkOf(state.position),
              state.chunkBytes());
  return session.upload(state.buffer);
}

std::string syncLayout(runtime::Session &session, CheckpointLayout &layout,
                       bool toHost) {
  if (session.onGpu()) {
    for (const std::vector<TensorSlot> *slots :
         {&layout.parameters, &layout.states}) {
      for (const TensorSlot &slot : *slots) {
        if (slot.shard >= 0) {
          continue; // its state's chunk moves below
        }
        std::string problem = toHost ? session.download(slot.buffer)
                                     : session.upload(slot.buffer);
        if (!problem.empty()) {
          return "'" + slot.name + "': " + problem;
        }
      }
    }
  }
  for (const std::unique_ptr<ShardedState> &state : layout.shards) {
    std::string problem = toHost ? gatherShard(session, *state)
                                 : scatterShard(session, *state);
    if (!problem.empty()) {
      return state->what + ": " + problem;
    }
  }
  if (toHost && layout.stages > 0) {
    return gatherStageSlots(session, layout);
  }
  return "";
}

} // namespace tailor::train
