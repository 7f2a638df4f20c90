//===- InspectCommand.cpp - `tailor inspect` ------------------------------===//
//
// tailor inspect PLAN.tplan [--json] [--params] [--steps]
//
// Prints what a plan holds: target, memory by category, arenas, inputs and
// outputs, parameters and the kernels it runs; for a training plan also the
// recipe it was compiled for (adapter, optimizer, batch), its entries, which
// entry each input and output belongs to, trainable versus frozen parameters
// and the optimizer state. The plan is verified exactly as the runtime
// verifies it, except that weight files need not be present.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"

#include "compiler/PipelinePrediction.h"
#include "compiler/PlanPrediction.h"
#include "compiler/ShardingFigures.h"
#include "runtime/MemoryCategory.h"
#include "runtime/Plan.h"
#include "runtime/cuda/DeviceImage.h"
#include "runtime/train/AtomicFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sys/stat.h>
#include <vector>

namespace tailor {

namespace fb = tailor::plan;
using runtime::LoadedPlan;

namespace {

std::string formatBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  if (unit == 0) {
    os << bytes << " B";
  } else {
    os << llvm::format("%.2f %s", value, units[unit]);
  }
  return out;
}

std::string formatShape(const flatbuffers::Vector<int64_t> &shape) {
  std::string out = "[";
  for (uint32_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape.Get(i));
  }
  return out + "]";
}

std::string dtypeOf(const fb::Buffer &buffer) {
  return runtime::dtypeName(static_cast<runtime::DType>(buffer.dtype()));
}

std::string formatAttribute(const fb::Attribute &attr) {
  std::string out = attr.name()->str() + "=";
  switch (attr.kind()) {
  case fb::AttrKind::Int:
    return out + std::to_string(attr.i());
  case fb::AttrKind::Float: {
    llvm::raw_string_ostream os(out);
    os << llvm::format("%g", attr.f());
    return out;
  }
  case fb::AttrKind::Ints: {
    out += "[";
    if (attr.ints()) {
      for (uint32_t i = 0; i < attr.ints()->size(); ++i) {
        out += (i ? "," : "") + std::to_string(attr.ints()->Get(i));
      }
    }
    return out + "]";
  }
  case fb::AttrKind::Floats:
    return out + "[...]";
  case fb::AttrKind::String:
    return out + (attr.s() ? attr.s()->str() : "");
  }
  return out;
}

/// A double as %g prints it: 0.01, 1, 2e-05.
std::string formatNumber(double value) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::format("%g", value);
  return out;
}

std::string join(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *list) {
  std::string out;
  if (list) {
    for (uint32_t i = 0; i < list->size(); ++i) {
      out += (i ? ", " : "") + list->Get(i)->str();
    }
  }
  return out;
}

/// Tensors and bytes of one group (trainable parameters, one state kind).
struct Tally {
  int64_t count = 0;
  uint64_t bytes = 0;
  void add(uint64_t size) {
    ++count;
    bytes += size;
  }
  llvm::json::Object toJSON() const {
    return llvm::json::Object{{"count", count},
                              {"bytes", static_cast<int64_t>(bytes)}};
  }
};

std::string formatTally(const Tally &tally) {
  std::string out =
      std::to_string(tally.count) + " tensors, " + std::to_string(tally.bytes);
  return out +
         (tally.bytes < 1024 ? " B" : " B (" + formatBytes(tally.bytes) + ")");
}

/// PyTorch's optimizer state kinds, in the order they are listed; a kind the
/// plan names that is not here follows them.
const char *kStateKinds[] = {"grad",           "exp_avg",    "exp_avg_sq",
                             "momentum_buffer", "master",     "grad_host",
                             "powersgd_error",  "powersgd_p", "powersgd_q",
                             "key_cache",       "value_cache"};

/// What each embedded image really is, read from its own headers.
struct DeviceCodeSummary {
  std::string kind, arch, module, problem;
  int sm = 0;
  size_t bytes = 0, stored = 0, functions = 0;
};

/// Everything `tailor inspect` derives from a plan (sums, tallies, what the
/// device code really holds); the JSON and text printers only format it.
struct PlanSummary {
  runtime::CategoryBytes byCategory{};
  uint64_t total = 0;
  // Parameters by source file, and whether the files are there.
  uint64_t paramBytes = 0;
  size_t paramCount = 0;
  std::map<std::string, bool> files;
  std::map<std::string, int> kernelUse;
  size_t launches = 0;
  // What a training plan adds: entries (with their launches), which entry
  // each input and output belongs to, trainable versus frozen parameters,
  // those the runtime creates, and the training state by kind. An inference
  // plan has no training table and at most one entry, and shows none of it.
  bool showEntries = false;
  std::vector<int64_t> entryLaunches;
  Tally trainable, frozen, initialized, unquantized;
  // Quantized storage per scheme: tensors, bytes (codes, scales and every
  // constant the scheme keeps) and the weights they stand for.
  std::map<std::string, std::pair<Tally, int64_t>> quantized;
  std::map<std::string, int> initKinds;
  Tally stateTotal;
  std::map<std::string, Tally> stateByKind;
  std::vector<std::string> stateKinds;
  std::string target;
  int threads = 0;
  bool gpu = false;
  std::vector<DeviceCodeSummary> deviceCode;
};

void summarizeParameters(const LoadedPlan &loaded, PlanSummary &s) {
  const fb::Plan &p = loaded.root();
  s.paramCount = p.parameters() ? p.parameters()->size() : 0;
  if (!p.parameters()) {
    return;
  }
  for (const fb::Parameter *param : *p.parameters()) {
    // The whole tensor's bytes: a ZeRO-3 parameter's buffer is its bucket's
    // chunk (the memory section says what a rank keeps).
    uint64_t bytes =
        param->shard()
            ? static_cast<uint64_t>(loaded.parameterElements(*param)) *
                  runtime::dtypeSize(loaded.bufferDType(param->buffer()))
            : loaded.bufferBytes(param->buffer());
    s.paramBytes += bytes;
    if (param->source()) {
      std::string path =
          loaded.resolveSourcePath(param->source()->file()->str());
      struct stat info;
      s.files[path] = stat(path.c_str(), &info) == 0;
    }
    (param->trainable() ? s.trainable : s.frozen).add(bytes);
    if (const fb::Quantization *quant = param->quant()) {
      auto &[tally, weights] = s.quantized[quant->scheme()->str()];
      tally.add(bytes);
      weights += quant->rows() * quant->cols();
    } else {
      s.unquantized.add(bytes);
    }
    if (!param->source()) {
      s.initialized.add(bytes);
      if (const fb::Init *init = param->init()) {
        ++s.initKinds[fb::EnumNameInitKind(init->kind())];
      }
    }
  }
}

void summarizeSteps(const fb::Plan &p, PlanSummary &s) {
  for (const fb::Op *op : *p.ops()) {
    if (const fb::Launch *launch = op->step_as_Launch()) {
      ++s.launches;
      ++s.kernelUse[p.kernels()->Get(launch->kernel())->name()->str()];
    }
  }
  const auto *entries = p.entries();
  s.showEntries =
      entries && entries->size() > 0 && (p.training() || entries->size() > 1);
  if (!entries) {
    return;
  }
  for (const fb::Entry *entry : *entries) {
    int64_t count = 0;
    for (uint32_t i = entry->first_op();
         i < entry->first_op() + entry->op_count(); ++i) {
      count += p.ops()->Get(i)->step_type() == fb::Step::Launch;
    }
    s.entryLaunches.push_back(count);
  }
}

void summarizeStates(const LoadedPlan &loaded, PlanSummary &s) {
  const fb::Plan &p = loaded.root();
  if (p.states()) {
    for (const fb::State *state : *p.states()) {
      uint64_t bytes = loaded.bufferBytes(state->buffer());
      s.stateTotal.add(bytes);
      s.stateByKind[state->kind()->str()].add(bytes);
    }
  }
  for (const char *kind : kStateKinds) {
    if (s.stateByKind.count(kind)) {
      s.stateKinds.push_back(kind);
    }
  }
  for (const auto &[kind, tally] : s.stateByKind) {
    if (!llvm::is_contained(kStateKinds, kind)) {
      s.stateKinds.push_back(kind);
    }
  }
}

std::vector<DeviceCodeSummary> summarizeDeviceCode(const fb::Plan &p) {
  std::vector<DeviceCodeSummary> deviceCode;
  if (!p.device_code()) {
    return deviceCode;
  }
  for (const fb::DeviceCode *code : *p.device_code()) {
    DeviceCodeSummary summary;
    bool ptx = code->kind() == fb::DeviceCodeKind::Ptx;
    summary.kind = ptx ? "ptx" : "cubin";
    summary.arch = code->arch()->str();
    summary.module = code->module_name() ? code->module_name()->str() : "";
    summary.stored = code->image()->size();
    runtime::cuda::DeviceImageInfo info;
    std::vector<uint8_t> bytes;
    summary.problem = runtime::deviceCodeBytes(*code, bytes);
    summary.bytes = bytes.size();
    if (summary.problem.empty()) {
      summary.problem =
          ptx ? runtime::cuda::readPtx(bytes.data(), bytes.size(), info)
              : runtime::cuda::readCubin(bytes.data(), bytes.size(), info);
    }
    summary.sm = info.sm;
    summary.functions = info.functions.size();
    deviceCode.push_back(std::move(summary));
  }
  return deviceCode;
}

PlanSummary summarize(const LoadedPlan &loaded) {
  const fb::Plan &p = loaded.root();
  PlanSummary s;
  s.byCategory = runtime::arenaBytes(p);
  s.total = runtime::totalBytes(s.byCategory);
  summarizeParameters(loaded, s);
  summarizeSteps(p, s);
  summarizeStates(loaded, s);
  s.target =
      p.target() && p.target()->name() ? p.target()->name()->str() : "cpu";
  s.threads = p.target() ? p.target()->threads() : 0;
  s.gpu = p.target() && p.target()->backend() == fb::Backend::Cuda;
  s.deviceCode = summarizeDeviceCode(p);
  return s;
}

/// The entry an input or output belongs to.
std::string entryOf(const fb::Plan &p, const fb::Binding &binding) {
  const auto *entries = p.entries();
  if (entries && binding.entry() < entries->size()) {
    return entries->Get(binding.entry())->name()->str();
  }
  return "forward";
}

//===----------------------------------------------------------------------===//
// --json
//===----------------------------------------------------------------------===//

llvm::json::Array shapeJson(const fb::Buffer &buffer) {
  llvm::json::Array shape;
  for (int64_t d : *buffer.shape()) {
    shape.push_back(d);
  }
  return shape;
}

llvm::json::Object targetJson(const fb::Plan &p, const PlanSummary &s) {
  llvm::json::Object target{
      {"backend", fb::EnumNameBackend(p.target() ? p.target()->backend()
                                                 : fb::Backend::Cpu)},
      {"name", s.target},
      {"threads", s.threads}};
  target["precision"] = p.target() && p.target()->precision()
                            ? p.target()->precision()->str()
                            : "fp32";
  if (s.gpu) {
    target["sm"] = p.target()->sm();
    target["device_memory"] = static_cast<int64_t>(p.target()->device_memory());
  }
  return target;
}

llvm::json::Array deviceCodeJson(const PlanSummary &s) {
  llvm::json::Array codes;
  for (const DeviceCodeSummary &code : s.deviceCode) {
    codes.push_back(llvm::json::Object{
        {"module", code.module},
        {"kind", code.kind},
        {"arch", code.arch},
        {"stored_bytes", static_cast<int64_t>(code.stored)},
        {"sm", code.sm},
        {"bytes", static_cast<int64_t>(code.bytes)},
        {"functions", static_cast<int64_t>(code.functions)},
        {"readable", code.problem.empty()},
    });
  }
  return codes;
}

llvm::json::Object memoryJson(const fb::Plan &p, const PlanSummary &s) {
  llvm::json::Object mem;
  for (size_t c = 0; c < runtime::kMemoryCategoryCount; ++c) {
    mem[runtime::kMemoryCategoryNames[c]] =
        static_cast<int64_t>(s.byCategory[c]);
  }
  mem["total"] = static_cast<int64_t>(s.total);
  mem["activations_live_bytes"] = static_cast<int64_t>(
      p.memory() ? p.memory()->activations_live_bytes() : 0);
  return mem;
}

llvm::json::Array arenasJson(const fb::Plan &p) {
  llvm::json::Array arenas;
  for (const fb::Arena *arena : *p.arenas()) {
    arenas.push_back(llvm::json::Object{
        {"name", arena->name()->str()},
        {"kind", fb::EnumNameArenaKind(arena->kind())},
        {"category",
         runtime::kMemoryCategoryNames[static_cast<size_t>(arena->category())]},
        {"size", static_cast<int64_t>(arena->size())},
        {"alignment", static_cast<int64_t>(arena->alignment())}});
  }
  return arenas;
}

llvm::json::Array bindingsJson(
    const fb::Plan &p, const PlanSummary &s,
    const flatbuffers::Vector<flatbuffers::Offset<fb::Binding>> *list) {
  llvm::json::Array out;
  if (!list) {
    return out;
  }
  for (const fb::Binding *binding : *list) {
    const fb::Buffer &buffer = *p.buffers()->Get(binding->buffer());
    llvm::json::Object item{{"name", binding->name()->str()},
                            {"dtype", dtypeOf(buffer)},
                            {"shape", shapeJson(buffer)}};
    if (s.showEntries) {
      item["entry"] = entryOf(p, *binding);
    }
    out.push_back(std::move(item));
  }
  return out;
}

llvm::json::Array parametersJson(const LoadedPlan &loaded) {
  const fb::Plan &p = loaded.root();
  llvm::json::Array params;
  if (!p.parameters()) {
    return params;
  }
  for (const fb::Parameter *param : *p.parameters()) {
    const fb::Buffer &buffer = *p.buffers()->Get(param->buffer());
    llvm::json::Object entry{{"name", param->name()->str()},
                             {"dtype", dtypeOf(buffer)},
                             {"shape", shapeJson(buffer)},
                             {"trainable", param->trainable()}};
    if (const fb::Source *source = param->source()) {
      entry["file"] = source->file()->str();
      entry["offset"] = static_cast<int64_t>(source->offset());
      entry["length"] = static_cast<int64_t>(source->length());
    }
    if (const fb::Init *init = param->init(); init && !param->source()) {
      entry["init"] = fb::EnumNameInitKind(init->kind());
    }
    if (const fb::Quantization *quant = param->quant()) {
      entry["quantization"] = llvm::json::Object{
          {"scheme", quant->scheme()->str()},
          {"rows", quant->rows()},
          {"cols", quant->cols()},
          {"storage_bytes",
           static_cast<int64_t>(loaded.bufferBytes(param->buffer()))}};
    }
    params.push_back(std::move(entry));
  }
  return params;
}

/// The parameter summary, quantization, entries and states of `s` that a
/// plan has, added to `root`.
void addTalliesJson(llvm::json::Object &root, const fb::Plan &p,
                    const PlanSummary &s) {
  if (p.training() || s.trainable.count) {
    llvm::json::Object summary =
        Tally{static_cast<int64_t>(s.paramCount), s.paramBytes}.toJSON();
    summary["trainable"] = s.trainable.toJSON();
    summary["frozen"] = s.frozen.toJSON();
    summary["runtime_initialized"] = s.initialized.toJSON();
    root["parameter_summary"] = std::move(summary);
  }
  if (!s.quantized.empty()) {
    llvm::json::Object schemes;
    for (const auto &[scheme, entry] : s.quantized) {
      llvm::json::Object tally = entry.first.toJSON();
      tally["weights"] = entry.second;
      schemes[scheme] = std::move(tally);
    }
    root["quantization"] =
        llvm::json::Object{{"schemes", std::move(schemes)},
                           {"unquantized", s.unquantized.toJSON()}};
  }
  if (s.showEntries) {
    llvm::json::Array list;
    for (uint32_t i = 0; i < p.entries()->size(); ++i) {
      const fb::Entry *entry = p.entries()->Get(i);
      list.push_back(llvm::json::Object{
          {"name", entry->name()->str()},
          {"first_op", static_cast<int64_t>(entry->first_op())},
          {"op_count", static_cast<int64_t>(entry->op_count())},
          {"launches", s.entryLaunches[i]}});
    }
    root["entries"] = std::move(list);
  }
  if (s.stateTotal.count) {
    llvm::json::Object states = s.stateTotal.toJSON();
    llvm::json::Object kinds;
    for (const std::string &kind : s.stateKinds) {
      kinds[kind] = s.stateByKind.at(kind).toJSON();
    }
    states["kinds"] = std::move(kinds);
    root["states"] = std::move(states);
  }
}

llvm::json::Array stringsJson(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *list) {
  llvm::json::Array out;
  if (list) {
    for (const flatbuffers::String *value : *list) {
      out.push_back(value->str());
    }
  }
  return out;
}

llvm::json::Object adapterJson(const fb::Adapter &adapter) {
  llvm::json::Array layers;
  if (adapter.layers()) {
    for (int32_t layer : *adapter.layers()) {
      layers.push_back(layer);
    }
  }
  return llvm::json::Object{
      {"variant", adapter.variant()->str()},
      {"r", adapter.r()},
      {"alpha", adapter.alpha()},
      {"dropout", adapter.dropout()},
      {"use_rslora", adapter.use_rslora()},
      {"target_modules", stringsJson(adapter.target_modules())},
      {"layers", std::move(layers)},
      {"modules", stringsJson(adapter.modules())},
      {"module_count", static_cast<int64_t>(
                           adapter.modules() ? adapter.modules()->size() : 0)}};
}

llvm::json::Object trainingJson(const fb::Training &training) {
  auto str = [](const flatbuffers::String *value) {
    return value ? value->str() : std::string();
  };
  llvm::json::Object t{
      {"micro_batch_size", training.micro_batch_size()},
      {"sequence_len", training.sequence_len()},
      {"vocab_size", training.vocab_size()},
      {"shuffle", training.shuffle()},
      {"gradient_accumulation_steps", training.gradient_accumulation_steps()},
      {"max_steps", training.max_steps()},
      {"seed", training.seed()},
      {"optimizer", str(training.optimizer())},
      {"learning_rate", training.learning_rate()},
      {"lr_scheduler", str(training.lr_scheduler())},
      {"warmup_steps", training.warmup_steps()},
      {"weight_decay", training.weight_decay()},
      {"max_grad_norm", training.max_grad_norm()},
      {"save_steps", training.save_steps()},
      {"logging_steps", training.logging_steps()},
      {"sample_packing", training.sample_packing()
                             ? llvm::json::Value(*training.sample_packing())
                             : llvm::json::Value(nullptr)},
      {"pad_token_id", training.pad_token_id()},
      {"val_set_size", training.val_set_size()},
      {"eval_steps", training.eval_steps()},
      {"base_model", str(training.base_model())},
      {"recipe", str(training.recipe())}};
  if (training.compile_arguments()) {
    llvm::json::Array args;
    for (const flatbuffers::String *arg : *training.compile_arguments()) {
      args.push_back(arg->str());
    }
    t["compile_arguments"] = std::move(args);
    t["compile_directory"] = str(training.compile_directory());
  }
  if (const fb::Adapter *adapter = training.adapter()) {
    t["adapter"] = adapterJson(*adapter);
  }
  if (const fb::LossScaling *scaling = training.loss_scaling()) {
    t["loss_scaling"] = llvm::json::Object{
        {"init_scale", scaling->init_scale()},
        {"growth_factor", scaling->growth_factor()},
        {"backoff_factor", scaling->backoff_factor()},
        {"growth_interval", scaling->growth_interval()}};
  }
  return t;
}

/// The plan's notes: attention regions left as kernels, and why.
llvm::json::Array notesJson(const fb::Plan &p) {
  llvm::json::Array notes;
  if (p.notes()) {
    for (const fb::Note *note : *p.notes()) {
      auto str = [](const flatbuffers::String *s) {
        return s ? s->str() : std::string();
      };
      notes.push_back(llvm::json::Object{{"kind", str(note->kind())},
                                         {"module", str(note->module_path())},
                                         {"message", str(note->message())}});
    }
  }
  return notes;
}

/// What `--hardware` (or the plan's own target) predicts.
struct PredictionView {
  std::string hardware;
  PlanPrediction prediction;
  /// A cluster of mixed devices: each rank's step (no ranks otherwise).
  ClusterPrediction cluster;
};

llvm::json::Object predictionJson(const PredictionView &view) {
  const PlanPrediction &prediction = view.prediction;
  llvm::json::Object byKind;
  for (const auto &[kind, seconds] : prediction.step.secondsByKind) {
    byKind[kind] = seconds;
  }
  llvm::json::Object out{{"hardware", view.hardware}};
  if (!prediction.unpredictable.empty()) {
    out["unpredictable"] = prediction.unpredictable;
    return out;
  }
  out["step_seconds"] = prediction.step.seconds;
  out["tokens_per_step"] = prediction.tokensPerStep;
  out["tokens_per_second"] = prediction.tokensPerSecond();
  out["seconds_by_kind"] = std::move(byKind);
  out["comm_seconds"] = prediction.commSeconds;
  out["copy_seconds"] = prediction.copySeconds;
  out["hidden_seconds"] = prediction.hiddenSeconds;
  return out;
}

/// A mixed cluster's rank `r`: its device, micro-batches, own step and wait
/// (predicted_step_seconds is its own; every rank's step then lasts the
/// slowest's).
void addClusterRank(llvm::json::Object &rank, const ClusterPrediction &cluster,
                    size_t r) {
  const RankPrediction &own = cluster.ranks[r];
  bool known = cluster.unpredictable.empty();
  rank["device"] = own.device;
  rank["micro_batches"] = own.microBatches;
  rank["predicted_step_seconds"] =
      known ? llvm::json::Value(own.stepSeconds) : nullptr;
  rank["predicted_wait_seconds"] =
      known ? llvm::json::Value(own.waitSeconds) : nullptr;
  rank["predicted_tokens_per_second"] =
      known && cluster.stepSeconds > 0
          ? llvm::json::Value(cluster.tokensPerStep / cluster.stepSeconds)
          : nullptr;
}

/// ZeRO++'s hpZ: the bytes of the secondary partitions train_step keeps
/// from the forward's gathers to the backward's (the outputs of its
/// tg.secondary_partition copies, all alive at the turn to backward);
/// 0 without hpZ.
int64_t hpzSecondaryBytes(const fb::Plan &p) {
  int64_t bytes = 0;
  if (!p.entries()) {
    return 0;
  }
  for (const fb::Entry *e : *p.entries()) {
    if (e->name()->string_view() != "train_step") {
      continue;
    }
    for (uint32_t i = e->first_op(); i < e->first_op() + e->op_count(); ++i) {
      const fb::Launch *launch = p.ops()->Get(i)->step_as_Launch();
      if (launch && launch->origin() && launch->operands()->size() == 2 &&
          llvm::StringRef(launch->origin()->str())
              .starts_with("tg.secondary_partition")) {
        bytes += static_cast<int64_t>(
            p.buffers()->Get(launch->operands()->Get(1))->size());
      }
    }
  }
  return bytes;
}

/// The per-rank contract other programs read (README, "inspect --json"):
/// device and host peak bytes, bytes per category, predicted step time and
/// tokens per second (null when the target cannot be predicted).
llvm::json::Array ranksJson(const fb::Plan &p, const PlanSummary &s,
                            const PredictionView &view) {
  int64_t device = 0, host = 0;
  for (const fb::Arena *arena : *p.arenas()) {
    (arena->kind() == fb::ArenaKind::Device ? device : host) +=
        static_cast<int64_t>(arena->size());
  }
  llvm::json::Object bytes;
  for (size_t c = 0; c < runtime::kMemoryCategoryCount; ++c) {
    bytes[runtime::kMemoryCategoryNames[c]] =
        static_cast<int64_t>(s.byCategory[c]);
  }
  bool known = view.prediction.unpredictable.empty();
  llvm::json::Object bytesByGroup;
  for (const auto &[group, sent] : view.prediction.bytesSentByGroupPerStep) {
    bytesByGroup[group] = sent;
  }
  // Every rank of a data-parallel plan runs the same program: the same
  // figures, once per rank (but for a mixed cluster's own step times).
  llvm::json::Array ranks;
  for (int r = 0; r < std::max(1, p.world_size()); ++r) {
    llvm::json::Object rank{
        {"rank", r},
        {"device_peak_bytes", device},
        {"host_peak_bytes", host},
        {"bytes", llvm::json::Object(bytes)},
        {"predicted_step_seconds",
         known ? llvm::json::Value(view.prediction.step.seconds) : nullptr},
        {"predicted_tokens_per_second",
         known ? llvm::json::Value(view.prediction.tokensPerSecond())
               : nullptr},
        {"predicted_bytes_sent_per_step",
         known ? llvm::json::Value(view.prediction.bytesSentPerStep)
               : nullptr},
        {"predicted_bytes_copied_per_step",
         known ? llvm::json::Value(view.prediction.bytesCopiedPerStep)
               : nullptr},
        // Gradient compression: the same before it starts (the step
        // figures above are from predicted_steady_from_step on).
        {"predicted_bytes_sent_per_uncompressed_step",
         known ? llvm::json::Value(
                     view.prediction.bytesSentPerUncompressedStep)
               : nullptr},
        // ZeRO++'s int8 gradient all-to-alls sent as f32 reduce-scatters.
        {"predicted_bytes_sent_per_step_unquantized",
         known ? llvm::json::Value(
                     view.prediction.bytesSentPerStepUnquantized)
               : nullptr},
        {"predicted_steady_from_step", view.prediction.steadyFromStep},
        // Per kind of group (runtime/comm/GroupKind.h), as metrics.jsonl's
        // bytes_sent_by_group.
        {"predicted_bytes_sent_by_group_per_step",
         known ? llvm::json::Value(llvm::json::Object(bytesByGroup))
               : nullptr},
        // ZeRO++'s hpZ: the parts kept from forward to backward (in the
        // activation bytes above).
        {"hpz_secondary_bytes", hpzSecondaryBytes(p)},
        // Steps whose ops alternate (ACP-SGD): each step of one cycle
        // from predicted_steady_from_step (the per-step figure is their
        // mean); one value otherwise.
        {"predicted_bytes_sent_per_cycle_step",
         known ? llvm::json::Value(llvm::json::Array(
                     view.prediction.bytesSentByCycleStep))
               : nullptr}};
    if (static_cast<size_t>(r) < view.cluster.ranks.size()) {
      addClusterRank(rank, view.cluster, static_cast<size_t>(r));
    }
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

/// A mixed cluster's balance: the step every rank takes (the slowest
/// rank's), the longest wait, and the even split's step.
llvm::json::Value balanceJson(const ClusterPrediction &cluster) {
  if (cluster.ranks.empty() || !cluster.unpredictable.empty()) {
    return nullptr;
  }
  int64_t global = 0, slowest = 0;
  for (size_t r = 0; r < cluster.ranks.size(); ++r) {
    global += cluster.ranks[r].microBatches;
    if (cluster.ranks[r].stepSeconds >=
        cluster.ranks[static_cast<size_t>(slowest)].stepSeconds) {
      slowest = static_cast<int64_t>(r);
    }
  }
  return llvm::json::Object{
      {"global_micro_batches", global},
      {"predicted_step_seconds", cluster.stepSeconds},
      {"slowest_rank", slowest},
      {"predicted_max_wait_seconds", cluster.maxWaitSeconds()},
      {"predicted_even_split_step_seconds", cluster.evenStepSeconds}};
}

/// printSharding's figures for --json (null for one rank).
llvm::json::Value shardingJson(const fb::Plan &p) {
  std::optional<ShardingFigures> f = shardingFigures(p);
  if (!f) {
    return nullptr;
  }
  return llvm::json::Object{
      {"strategy", f->strategy},
      {"world_size", f->worldSize},
      {"ranks_per_node", f->ranksPerNode},
      {"trainable_parameters", f->trainableParameters},
      {"bytes_per_trainable_parameter",
       llvm::json::Object{{"parameters", f->parameterBytes},
                          {"gradients", f->gradientBytes},
                          {"optimizer_state", f->optimizerBytes},
                          {"total", f->total()}}},
      {"textbook_bytes_per_trainable_parameter", f->textbookBytes},
      {"textbook_formula", f->textbookFormula}};
}

llvm::json::Object planJson(const LoadedPlan &loaded, const PlanSummary &s,
                            const std::string &input,
                            const PredictionView &view) {
  const fb::Plan &p = loaded.root();
  llvm::json::Object root;
  root["plan"] = input;
  root["version"] = std::to_string(p.version() / 100) + "." +
                    std::to_string(p.version() % 100);
  root["producer"] = p.producer() ? p.producer()->str() : "";
  root["model"] = p.model() ? p.model()->str() : "";
  root["target"] = targetJson(p, s);
  root["device_code"] = deviceCodeJson(s);
  root["rank"] = p.rank();
  root["world_size"] = p.world_size();
  root["memory"] = memoryJson(p, s);
  root["sharding"] = shardingJson(p);
  root["arenas"] = arenasJson(p);
  root["inputs"] = bindingsJson(p, s, p.inputs());
  root["outputs"] = bindingsJson(p, s, p.outputs());
  root["parameters"] = parametersJson(loaded);
  addTalliesJson(root, p, s);
  if (const fb::Training *training = p.training()) {
    root["training"] = trainingJson(*training);
  }
  llvm::json::Object kernels;
  for (const auto &[name, count] : s.kernelUse) {
    kernels[name] = count;
  }
  root["kernels"] = std::move(kernels);
  root["steps"] = static_cast<int64_t>(p.ops()->size());
  root["notes"] = notesJson(p);
  root["prediction"] = predictionJson(view);
  root["ranks"] = ranksJson(p, s, view);
  root["balance"] = balanceJson(view.cluster);
  if (const fb::PipelineStage *stage = p.pipeline()) {
    // A stage's program is its own ranks' only: its replicas' (stage-major
    // ranks, plan 1.13), each with its place in the layout.
    int64_t replicas = std::max(1, stage->replicas());
    llvm::json::Array own;
    for (llvm::json::Value &rank : *root.getArray("ranks")) {
      llvm::json::Object &object = *rank.getAsObject();
      int64_t index = *object.getInteger("rank");
      if (index / replicas == stage->stage()) {
        object["stage"] = stage->stage();
        object["replica"] = index % replicas;
        own.push_back(std::move(rank));
      }
    }
    root["ranks"] = std::move(own);
    root["pipeline_stage"] = llvm::json::Object{
        {"stage", stage->stage()},
        {"stages", stage->stages()},
        {"replicas", replicas},
        {"first_layer", stage->first_layer()},
        {"last_layer", stage->last_layer()},
        {"slots", stage->slots()},
        {"micro_batches", stage->micro_batches()},
        {"schedule", stage->schedule()->str()}};
  }
  return root;
}

void printJson(const LoadedPlan &loaded, const PlanSummary &s,
               const std::string &input, const PredictionView &view) {
  llvm::outs() << llvm::formatv(
                      "{0:2}",
                      llvm::json::Value(planJson(loaded, s, input, view)))
               << "\n";
}

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

void printTarget(llvm::raw_ostream &os, const fb::Plan &p, const PlanSummary &s,
                 const std::string &input) {
  os << "plan: " << input << " (format " << p.version() / 100 << "."
     << p.version() % 100 << ", " << (p.producer() ? p.producer()->str() : "?")
     << ")\n";
  os << "model: " << (p.model() ? p.model()->str() : "") << "\n";
  if (p.training() && p.training()->compile_arguments()) {
    // What tailor train --elastic compiles again for another world size.
    os << "compiled with: tailor compile";
    for (const flatbuffers::String *arg : *p.training()->compile_arguments()) {
      os << " " << arg->str();
    }
    os << " (in " << (p.training()->compile_directory()
                          ? p.training()->compile_directory()->str()
                          : "?")
       << ")\n";
  }
  if (!s.gpu) {
    std::string precision = p.target() && p.target()->precision()
                                ? p.target()->precision()->str()
                                : "fp32";
    os << "target: " << s.target;
    if (precision == "fp16") {
      os << " (fp16 GEMMs emulated: operands and products rounded to half, "
            "f32 sums)";
    } else if (precision == "bf16") {
      os << " (bf16 GEMMs emulated: operands rounded to bf16, f32 sums and "
            "results)";
    } else if (precision != "fp32") {
      os << " (" << precision << ")";
    }
    os << ", rank " << p.rank() << " of " << p.world_size()
       << ", workspaces for " << s.threads << " threads\n";
    return;
  }
  os << "target: " << s.target << " (cuda, sm_" << p.target()->sm() << ", "
     << (p.target()->precision() ? p.target()->precision()->str() : "fp32")
     << " compute), rank " << p.rank() << " of " << p.world_size() << "\n";
  for (const DeviceCodeSummary &code : s.deviceCode) {
    os << "device code: " << code.module << " " << code.kind << " " << code.arch
       << " (" << code.functions << " kernels, " << code.bytes << " bytes, "
       << code.stored << " stored"
       << (code.problem.empty() ? "" : ", unreadable: " + code.problem)
       << ")\n";
  }
}

void printAdapter(llvm::raw_ostream &os, const fb::Adapter *adapter) {
  std::string variant = adapter ? adapter->variant()->str() : "full";
  if (variant == "full") {
    // Full fine-tuning still names the modules whose weights train.
    std::string targets = adapter ? join(adapter->target_modules()) : "";
    os << "  adapter: none, full fine-tuning of "
       << (targets.empty() ? "all" : targets) << "\n";
    return;
  }
  // PEFT scales the adapter's output by alpha / r, or alpha / sqrt(r) with
  // rsLoRA.
  double r = std::max(adapter->r(), 1);
  double scale = adapter->alpha() / (adapter->use_rslora() ? std::sqrt(r) : r);
  os << "  adapter: " << variant << ", r " << adapter->r() << ", alpha "
     << formatNumber(adapter->alpha()) << " (scale " << formatNumber(scale)
     << "), dropout " << formatNumber(adapter->dropout()) << ", rsLoRA "
     << (adapter->use_rslora() ? "on" : "off") << "\n";
  os << "  target modules: " << join(adapter->target_modules());
  if (adapter->layers() && adapter->layers()->size()) {
    os << " in layers ";
    for (uint32_t i = 0; i < adapter->layers()->size(); ++i) {
      os << (i ? ", " : "") << adapter->layers()->Get(i);
    }
  }
  os << " (adapters on "
     << (adapter->modules() ? adapter->modules()->size() : 0)
     << " module(s))\n";
}

void printTraining(llvm::raw_ostream &os, const fb::Training &training,
                   int32_t worldSize) {
  os << "training:\n";
  printAdapter(os, training.adapter());
  os << "  optimizer: "
     << (training.optimizer() ? training.optimizer()->str() : "?") << ", lr "
     << formatNumber(training.learning_rate()) << ", "
     << (training.lr_scheduler() ? training.lr_scheduler()->str() : "?")
     << " schedule, warmup " << training.warmup_steps() << ", max steps "
     << training.max_steps() << "\n";
  int64_t accumulation = std::max(1, training.gradient_accumulation_steps());
  int64_t ranks = std::max(1, worldSize);
  os << "  batch: " << training.micro_batch_size() << " x "
     << training.sequence_len() << " tokens x " << accumulation
     << " accumulation"
     << (ranks > 1 ? " x " + std::to_string(ranks) + " ranks" : "") << " = "
     << training.micro_batch_size() * int64_t(training.sequence_len()) *
            accumulation * ranks
     << " tokens/step\n";
  os << "  max_grad_norm "
     << (training.max_grad_norm() > 0 ? formatNumber(training.max_grad_norm())
                                      : std::string("off"))
     << ", weight decay " << formatNumber(training.weight_decay()) << ", seed "
     << training.seed() << "\n";
  if (const fb::LossScaling *scaling = training.loss_scaling()) {
    // The scale in full when whole (2**24 reads better as 16777216).
    double scale = scaling->init_scale();
    std::string initScale =
        scale >= 1 && scale < 1e15 && scale == std::floor(scale)
            ? std::to_string(static_cast<int64_t>(scale))
            : formatNumber(scale);
    os << "  fp16 loss scaling (GradScaler): init_scale " << initScale
       << ", growth_factor "
       << formatNumber(scaling->growth_factor()) << ", backoff_factor "
       << formatNumber(scaling->backoff_factor()) << ", growth_interval "
       << scaling->growth_interval() << "\n";
  }
  flatbuffers::Optional<bool> packing = training.sample_packing();
  os << "  data: sample_packing "
     << (!packing   ? "unset (JSONL: one padded example per sequence; token "
                      "streams: cut)"
         : *packing ? "true (examples packed: positions restart and attention "
                      "stays within each example)"
                    : "false (one padded example per sequence)")
     << ", pad_token_id " << training.pad_token_id() << ", shuffle "
     << (training.shuffle() ? "on" : "off") << "\n";
  os << "  validation: val_set_size " << formatNumber(training.val_set_size())
     << ", eval_steps " << training.eval_steps()
     << (training.eval_steps() > 0 ? "" : " (only at the end)") << "\n";
}

/// `bytes` right-aligned, then in binary units when that reads better.
void printByteCount(llvm::raw_ostream &os, const char *name, uint64_t bytes) {
  os << llvm::format("  %-16s %14llu B", name,
                     static_cast<unsigned long long>(bytes));
  if (bytes >= 1024) {
    os << "  " << formatBytes(bytes);
  }
}

void printMemory(llvm::raw_ostream &os, const fb::Plan &p,
                 const PlanSummary &s) {
  os << "memory:\n";
  for (size_t c = 0; c < runtime::kMemoryCategoryCount; ++c) {
    // Inference plans have no optimizer state or gradients: say nothing.
    if (s.byCategory[c] == 0 &&
        c > static_cast<size_t>(fb::Category::Workspace)) {
      continue;
    }
    printByteCount(os, runtime::kMemoryCategoryNames[c], s.byCategory[c]);
    if (c == static_cast<size_t>(fb::Category::Activations) && p.memory()) {
      os << "  (live lower bound "
         << formatBytes(p.memory()->activations_live_bytes()) << ")";
    }
    os << "\n";
  }
  printByteCount(os, "total", s.total);
  os << "\n";
  os << "arenas:\n";
  for (const fb::Arena *arena : *p.arenas()) {
    os << "  " << arena->name()->str() << ": "
       << fb::EnumNameArenaKind(arena->kind()) << ", "
       << runtime::kMemoryCategoryNames[static_cast<size_t>(arena->category())]
       << ", " << arena->size() << " B, align " << arena->alignment() << "\n";
  }
}

/// Memory per trainable parameter on each rank, next to the ZeRO paper's
/// figure for the plan's strategy.
void printSharding(llvm::raw_ostream &os, const fb::Plan &p) {
  std::optional<ShardingFigures> f = shardingFigures(p);
  if (!f) {
    return;
  }
  os << "sharding: " << f->strategy << " over " << f->worldSize << " ranks, "
     << f->ranksPerNode << " per node\n";
  os << llvm::format("  per trainable parameter (%lld of %lld bytes, %lld "
                     "optimizer states) on each rank: parameters %.2f B, "
                     "gradients %.2f B, optimizer state %.2f B = %.2f B\n",
                     static_cast<long long>(f->trainableParameters),
                     static_cast<long long>(f->elementBytes),
                     static_cast<long long>(f->optimizerStates),
                     f->parameterBytes, f->gradientBytes, f->optimizerBytes,
                     f->total());
  os << "  the ZeRO paper's figure for " << f->strategy
     << " in these precisions: " << f->textbookFormula << " = "
     << llvm::format("%.2f B", f->textbookBytes)
     << " (the rest: alignment padding";
  if (f->strategy == "zero1") {
    os << ", and the reduce-scattered gradient chunk";
  }
  os << ")\n";
  if (int64_t secondary = hpzSecondaryBytes(p)) {
    os << "  hpZ: each rank keeps " << secondary
       << " B of its node's parts of the forward's gathers until backward, "
          "which gathers them within the node of "
       << f->ranksPerNode << " ranks\n";
  }
}

void printEntriesAndBindings(llvm::raw_ostream &os, const fb::Plan &p,
                             const PlanSummary &s) {
  if (s.showEntries) {
    os << "entries:\n";
    for (uint32_t i = 0; i < p.entries()->size(); ++i) {
      const fb::Entry *entry = p.entries()->Get(i);
      os << llvm::format("  %-16s %6lld launches", entry->name()->c_str(),
                         static_cast<long long>(s.entryLaunches[i]));
      if (entry->op_count()) {
        os << " (steps " << entry->first_op() << ".."
           << entry->first_op() + entry->op_count() - 1 << ")";
      }
      os << "\n";
    }
  }
  for (auto [title, list] : {std::make_pair("inputs", p.inputs()),
                             std::make_pair("outputs", p.outputs())}) {
    os << title << ":\n";
    if (!list) {
      continue;
    }
    for (const fb::Binding *binding : *list) {
      const fb::Buffer &buffer = *p.buffers()->Get(binding->buffer());
      os << "  " << binding->name()->str() << ": " << dtypeOf(buffer) << " "
         << formatShape(*buffer.shape());
      if (s.showEntries) {
        os << "  (" << entryOf(p, *binding) << ")";
      }
      os << "\n";
    }
  }
}

void printParameterSummary(llvm::raw_ostream &os, const fb::Plan &p,
                           const PlanSummary &s) {
  os << "parameters: " << s.paramCount << " tensors, " << s.paramBytes << " B ("
     << formatBytes(s.paramBytes) << ") from " << s.files.size()
     << " file(s)\n";
  if (p.training() || s.trainable.count) {
    os << "  trainable: " << formatTally(s.trainable) << "\n";
    os << "  frozen: " << formatTally(s.frozen) << "\n";
    if (s.initialized.count) {
      os << "  initialized by the runtime: " << formatTally(s.initialized);
      for (auto it = s.initKinds.begin(); it != s.initKinds.end(); ++it) {
        os << (it == s.initKinds.begin() ? "; " : ", ") << it->first << " "
           << it->second;
      }
      os << "\n";
    }
  }
  for (const auto &[scheme, entry] : s.quantized) {
    const auto &[tally, weights] = entry;
    os << "  quantized " << scheme << ": " << formatTally(tally) << " for "
       << weights << " weights ("
       << llvm::format("%.4f", 8.0 * static_cast<double>(tally.bytes) /
                                   static_cast<double>(weights))
       << " bits per weight, scales and constants included)\n";
  }
  if (!s.quantized.empty()) {
    os << "  not quantized: " << formatTally(s.unquantized) << "\n";
  }
  for (const auto &[path, present] : s.files) {
    os << "  " << path << (present ? "" : " (missing)") << "\n";
  }
}

/// --params: one line per parameter.
void printParameterList(llvm::raw_ostream &os, const fb::Plan &p) {
  if (!p.parameters()) {
    return;
  }
  for (const fb::Parameter *param : *p.parameters()) {
    const fb::Buffer &buffer = *p.buffers()->Get(param->buffer());
    const fb::ParameterShard *shard = param->shard();
    os << "  " << param->name()->str() << ": " << dtypeOf(buffer) << " "
       << formatShape(shard ? *shard->shape() : *buffer.shape());
    if (shard) {
      os << " (ZeRO-3: at " << shard->offset() << " of a bucket of "
         << shard->flat_elements() << " elements; this rank keeps "
         << formatShape(*buffer.shape()) << ")";
    }
    if (const fb::Source *source = param->source()) {
      os << " at " << source->file()->str() << "[" << source->offset() << ", +"
         << source->length() << "]";
    }
    if (const fb::Init *init = param->init(); init && !param->source()) {
      os << " init " << fb::EnumNameInitKind(init->kind());
    }
    if (const fb::Quantization *quant = param->quant()) {
      os << " quantized " << quant->scheme()->str() << " [" << quant->rows()
         << ", " << quant->cols() << "]";
    }
    os << (param->trainable() ? " trainable" : "") << "\n";
  }
}

void printStatesAndKernels(llvm::raw_ostream &os, const PlanSummary &s) {
  if (s.stateTotal.count) {
    os << "states: " << formatTally(s.stateTotal);
    for (size_t i = 0; i < s.stateKinds.size(); ++i) {
      const Tally &tally = s.stateByKind.at(s.stateKinds[i]);
      os << (i ? ", " : "; ") << s.stateKinds[i] << " " << tally.count << " ("
         << formatBytes(tally.bytes) << ")";
    }
    os << "\n";
  }
  os << "kernels: " << s.kernelUse.size() << " kinds, " << s.launches
     << " launches\n";
  for (const auto &[name, count] : s.kernelUse) {
    os << llvm::format("  %-14s %d\n", name.c_str(), count);
  }
}

/// " in steps A..B" for an op that runs in some training steps only
/// (gradient compression), else "".
std::string stepsNote(const fb::Op &op) {
  const fb::StepRange *range = op.steps();
  if (!range) {
    return "";
  }
  std::string note =
      " in steps " + std::to_string(range->first()) + ".." +
      (range->last() == -1 ? std::string() : std::to_string(range->last()));
  if (op.steps_period() > 1) {
    note += " every " + std::to_string(op.steps_period());
  }
  return note;
}

/// --steps: one line per step, launches with their operands and attributes.
void printSteps(llvm::raw_ostream &os, const fb::Plan &p) {
  const auto &buffers = *p.buffers();
  os << "steps:\n";
  for (uint32_t i = 0; i < p.ops()->size(); ++i) {
    const fb::Op *op = p.ops()->Get(i);
    os << "  " << i << ": ";
    if (const fb::Collective *collective = op->step_as_Collective()) {
      const fb::Buffer *in = buffers.Get(collective->input());
      const fb::Buffer *out = buffers.Get(collective->output());
      bool reduces = collective->kind() == fb::CollectiveKind::AllReduce ||
                     collective->kind() == fb::CollectiveKind::ReduceScatter;
      os << fb::EnumNameCollectiveKind(collective->kind()) << "(";
      if (reduces) {
        os << fb::EnumNameReduction(collective->reduction()) << ", ";
      }
      os << "%" << collective->input() << ":" << dtypeOf(*in)
         << formatShape(*in->shape()) << ", " << in->size() << " B";
      if (collective->output() != collective->input()) {
        os << " -> %" << collective->output() << ":" << dtypeOf(*out)
           << formatShape(*out->shape());
      }
      if (in->rank_stride() != 0) {
        os << ", this rank's chunk";
      }
      os << ") over ranks [";
      for (uint32_t j = 0; j < collective->group()->size(); ++j) {
        os << (j ? ", " : "") << collective->group()->Get(j);
      }
      os << "]" << stepsNote(*op) << "\n";
      continue;
    }
    const fb::Launch *launch = op->step_as_Launch();
    if (!launch) {
      os << fb::EnumNameStep(op->step_type()) << "\n";
      continue;
    }
    os << p.kernels()->Get(launch->kernel())->name()->str() << "(";
    for (uint32_t j = 0; j < launch->operands()->size(); ++j) {
      uint32_t b = launch->operands()->Get(j);
      os << (j ? ", " : "") << "%" << b << ":" << dtypeOf(*buffers.Get(b))
         << formatShape(*buffers.Get(b)->shape());
    }
    os << ")";
    if (launch->attributes()) {
      for (const fb::Attribute *attr : *launch->attributes()) {
        os << " " << formatAttribute(*attr);
      }
    }
    os << stepsNote(*op);
    if (launch->origin() && launch->origin()->size()) {
      os << "  # " << launch->origin()->str();
    }
    os << "\n";
  }
}

/// The plan's notes: what recomputation chose, and attention regions left
/// as kernels, and why (nothing when there is nothing to say).
void printNotes(llvm::raw_ostream &os, const fb::Plan &p) {
  if (!p.notes()) {
    return;
  }
  auto str = [](const flatbuffers::String *s) {
    return s ? s->str() : std::string();
  };
  std::vector<const fb::Note *> unraised;
  for (const fb::Note *note : *p.notes()) {
    if (str(note->kind()) == "recompute") {
      os << "recompute: " << str(note->message()) << "\n";
    } else {
      unraised.push_back(note);
    }
  }
  if (unraised.empty()) {
    return;
  }
  os << "attention not raised (runs as matmul + softmax over a T x S score "
        "tensor): "
     << unraised.size() << "\n";
  for (const fb::Note *note : unraised) {
    std::string where = str(note->module_path());
    os << "  " << (where.empty() ? "(unknown module)" : where) << ": "
       << str(note->message()) << "\n";
  }
}

/// A mixed cluster: each rank's micro-batches, own step and wait.
void printBalance(llvm::raw_ostream &os, const ClusterPrediction &cluster) {
  if (cluster.ranks.empty()) {
    return;
  }
  if (!cluster.unpredictable.empty()) {
    os << "balance: unknown (" << cluster.unpredictable << ")\n";
    return;
  }
  os << llvm::format("balance: ranks of mixed devices, micro-batches by "
                     "predicted speed; step %.3f ms (an even split: %.3f "
                     "ms), longest wait %.3f ms\n",
                     cluster.stepSeconds * 1e3, cluster.evenStepSeconds * 1e3,
                     cluster.maxWaitSeconds() * 1e3);
  for (auto [r, rank] : llvm::enumerate(cluster.ranks)) {
    os << llvm::format("  rank %zu (%s): %lld micro-batches, predicted %.3f "
                       "ms, waits %.3f ms\n",
                       r, rank.device.c_str(),
                       static_cast<long long>(rank.microBatches),
                       rank.stepSeconds * 1e3, rank.waitSeconds * 1e3);
  }
}

/// One line: the predicted step time, its largest parts, tokens/s.
void printPrediction(llvm::raw_ostream &os, const PredictionView &view) {
  const PlanPrediction &prediction = view.prediction;
  if (!prediction.unpredictable.empty()) {
    os << "predicted step: unknown on " << view.hardware << " ("
       << prediction.unpredictable << ")\n";
    return;
  }
  os << llvm::format("predicted step: %.3f ms on %s",
                     prediction.step.seconds * 1e3, view.hardware.c_str());
  std::vector<std::pair<double, std::string>> parts;
  double serial = 0; // the kinds' shares are of the time run one by one
  for (const auto &[kind, seconds] : prediction.step.secondsByKind) {
    parts.push_back({seconds, kind});
    serial += seconds;
  }
  llvm::sort(parts, [](const auto &a, const auto &b) { return a > b; });
  const char *sep = " (";
  for (const auto &[seconds, kind] : parts) {
    os << sep << kind << " "
       << llvm::format("%.0f%%", 100.0 * seconds / serial);
    sep = ", ";
  }
  os << (parts.empty() ? "" : ")");
  if (prediction.tokensPerStep > 0) {
    os << llvm::format(", %.0f tokens/s", prediction.tokensPerSecond());
  }
  os << "\n";
  if (prediction.bytesCopiedPerStep > 0) {
    os << llvm::format("offload: %.2f MiB copied between host and device per "
                       "step, %.3f ms\n",
                       prediction.bytesCopiedPerStep / double(1 << 20),
                       prediction.copySeconds * 1e3);
  }
  if (prediction.bytesSentPerStep > 0) {
    os << llvm::format("communication: %.2f MiB sent per rank per step (as "
                       "ring collectives move them), %.3f ms\n",
                       prediction.bytesSentPerStep / double(1 << 20),
                       prediction.commSeconds * 1e3);
  }
  if (prediction.bytesSentByGroupPerStep.size() > 1) {
    os << "  by group:";
    for (const auto &[group, sent] : prediction.bytesSentByGroupPerStep) {
      os << " " << group << llvm::format(" %.0f B", sent);
    }
    os << "\n";
  }
  if (prediction.bytesSentPerUncompressedStep != prediction.bytesSentPerStep) {
    os << llvm::format("compression: from step %lld, %.1f KiB sent per rank "
                       "per step; %.1f KiB before (%.1fx)\n",
                       static_cast<long long>(prediction.firstChangedStep),
                       prediction.bytesSentPerStep / 1024.0,
                       prediction.bytesSentPerUncompressedStep / 1024.0,
                       prediction.bytesSentPerStep > 0
                           ? prediction.bytesSentPerUncompressedStep /
                                 prediction.bytesSentPerStep
                           : 0.0);
  }
  if (prediction.bytesSentPerStepUnquantized != prediction.bytesSentPerStep &&
      prediction.bytesSentPerStep > 0) {
    os << llvm::format("quantized gradients: %.1f KiB sent per rank per "
                       "step; %.1f KiB with f32 reduce-scatters (%.2fx)\n",
                       prediction.bytesSentPerStep / 1024.0,
                       prediction.bytesSentPerStepUnquantized / 1024.0,
                       prediction.bytesSentPerStepUnquantized /
                           prediction.bytesSentPerStep);
  }
  double async = prediction.commSeconds + prediction.copySeconds;
  if (async > 0) {
    os << llvm::format("overlap: %.3f ms of collectives and copies run beside "
                       "compute (%.0f%% of them)\n",
                       prediction.hiddenSeconds * 1e3,
                       100.0 * prediction.hiddenSeconds / async);
  }
  printBalance(os, view.cluster);
}

/// Optimizer offload: where the host's launches run, per entry (in
/// train_step they start during backward, tailor-overlap-host-updates).
void printHostLaunches(llvm::raw_ostream &os, const fb::Plan &p) {
  if (!p.streams() || !p.entries()) {
    return;
  }
  std::vector<std::string> parts;
  for (const fb::Entry *entry : *p.entries()) {
    int count = 0;
    for (uint32_t i = entry->first_op();
         i < entry->first_op() + entry->op_count(); ++i) {
      const fb::Launch *launch = p.ops()->Get(i)->step_as_Launch();
      count += launch && p.streams()->Get(launch->stream())->kind() ==
                             fb::StreamKind::Host;
    }
    if (count > 0) {
      parts.push_back(std::to_string(count) + " in " + entry->name()->str() +
                      (entry->name()->string_view() == "train_step"
                           ? " (during backward)"
                           : ""));
    }
  }
  if (!parts.empty()) {
    os << "host launches:";
    for (size_t i = 0; i < parts.size(); ++i) {
      os << (i ? ", " : " ") << parts[i];
    }
    os << "\n";
  }
}

void printText(const LoadedPlan &loaded, const PlanSummary &s,
               const std::string &input, bool listParams, bool listSteps,
               const PredictionView &view) {
  const fb::Plan &p = loaded.root();
  llvm::raw_ostream &os = llvm::outs();
  printTarget(os, p, s, input);
  if (const fb::Training *training = p.training()) {
    // The stages of a layer split are one data-parallel replica, of
    // `replicas` (plan 1.13).
    printTraining(os, *training,
                  p.pipeline() ? std::max(1, p.pipeline()->replicas())
                               : p.world_size());
  }
  printMemory(os, p, s);
  printSharding(os, p);
  printPrediction(os, view);
  printHostLaunches(os, p);
  printEntriesAndBindings(os, p, s);
  printParameterSummary(os, p, s);
  if (listParams) {
    printParameterList(os, p);
  }
  printStatesAndKernels(os, s);
  printNotes(os, p);
  if (listSteps) {
    printSteps(os, p);
  }
}

/// Writes the predicted timeline to `path` atomically; 1 with a message
/// when it cannot.
int writeTrace(const LoadedPlan &loaded, const CostTarget &target,
               const std::string &path) {
  std::string text, error;
  llvm::raw_string_ostream out(text);
  writePredictedTrace(loaded.root(), target, out);
  if (!train::writeFileAtomically(path, text, error)) {
    llvm::errs() << "tailor inspect: error: " << error << "\n";
    return 1;
  }
  return 0;
}

/// A layer split: each stage's plan, in text one after the other, in JSON
/// one document whose `stages` are the stages' documents and whose `ranks`
/// are their ranks (the contract's per-rank figures, one rank a stage).
/// Each stage's view of the pipeline's prediction: the step every stage
/// shares, the stage's own bytes sent.
std::vector<PredictionView>
stageViews(const std::vector<std::unique_ptr<LoadedPlan>> &stages,
           const std::string &hardware, PipelinePrediction &pipeline) {
  const fb::Plan &first = stages.front()->root();
  std::vector<PredictionView> views(stages.size());
  llvm::Expected<CostTarget> target = costTargetOf(first, hardware);
  std::vector<const fb::Plan *> plans;
  for (const std::unique_ptr<LoadedPlan> &loaded : stages) {
    plans.push_back(&loaded->root());
  }
  if (target) {
    pipeline = predictPipeline(plans, *target);
  } else {
    pipeline.unpredictable = llvm::toString(target.takeError());
  }
  for (size_t s = 0; s < stages.size(); ++s) {
    PredictionView &view = views[s];
    view.hardware = target ? target->hardware.name : "?";
    view.prediction.unpredictable = pipeline.unpredictable;
    if (pipeline.unpredictable.empty()) {
      view.prediction.step.seconds = pipeline.stepSeconds;
      view.prediction.tokensPerStep = pipeline.tokensPerStep;
      view.prediction.bytesSentPerStep = pipeline.bytesSent[s];
      view.prediction.bytesSentPerUncompressedStep = pipeline.bytesSent[s];
      view.prediction.bytesSentByCycleStep = {pipeline.bytesSent[s]};
    }
  }
  return views;
}

/// "ranks 2-3" (or "rank 1"): the ranks that run `stage`.
std::string stageRanks(const fb::PipelineStage &stage) {
  int replicas = std::max(1, stage.replicas());
  int first = stage.stage() * replicas;
  if (replicas == 1) {
    return "rank " + std::to_string(first);
  }
  return "ranks " + std::to_string(first) + "-" +
         std::to_string(first + replicas - 1) + ", its " +
         std::to_string(replicas) + " data-parallel replicas";
}

int inspectStages(const std::vector<std::unique_ptr<LoadedPlan>> &stages,
                  const std::string &input, bool json,
                  const std::string &hardware) {
  llvm::json::Array documents, ranks;
  PipelinePrediction pipeline;
  std::vector<PredictionView> views = stageViews(stages, hardware, pipeline);
  for (size_t index = 0; index < stages.size(); ++index) {
    const std::unique_ptr<LoadedPlan> &loaded = stages[index];
    PlanSummary summary = summarize(*loaded);
    const PredictionView &view = views[index];
    const fb::PipelineStage &stage = *loaded->root().pipeline();
    if (!json) {
      llvm::outs() << "== pipeline stage " << stage.stage() << " of "
                   << stage.stages() << " (" << stageRanks(stage)
                   << "): layers " << stage.first_layer() << "-"
                   << stage.last_layer() << ", " << stage.slots()
                   << " input slots, " << stage.schedule()->str()
                   << " schedule over " << stage.micro_batches()
                   << " micro-batches";
      if (pipeline.unpredictable.empty()) {
        llvm::outs() << llvm::format(
            "; busy %.3f ms of the predicted %.3f ms step",
            pipeline.busySeconds[index] * 1e3, pipeline.stepSeconds * 1e3);
        if (stage.replicas() > 1) {
          llvm::outs() << llvm::format(
              ", %.3f ms of it the all-reduces over the replicas and stages",
              pipeline.collectiveSeconds[index] * 1e3);
        }
      }
      llvm::outs() << "\n";
      printText(*loaded, summary, input, false, false, view);
      llvm::outs() << "\n";
      continue;
    }
    llvm::json::Object document = planJson(*loaded, summary, input, view);
    for (llvm::json::Value &rank : *document.getArray("ranks")) {
      ranks.push_back(rank);
    }
    documents.push_back(std::move(document));
  }
  const fb::Plan &first = stages.front()->root();
  int64_t replicas = std::max(1, first.pipeline()->replicas());
  if (!json) {
    llvm::outs() << "layout: " << stages.size() << " pipeline stages x "
                 << replicas << " data-parallel replica"
                 << (replicas > 1 ? "s" : "") << " on " << first.world_size()
                 << " ranks (stage-major: stage s on ranks s x " << replicas
                 << " + replica)\n";
  }
  if (!json && pipeline.unpredictable.empty()) {
    llvm::outs() << llvm::format(
        "pipeline: predicted step %.3f ms, bubble %.1f%% of the stages' "
        "time\n",
        pipeline.stepSeconds * 1e3, pipeline.bubble() * 100);
  }
  if (json) {
    llvm::json::Array busy, collectives, layout;
    for (double seconds : pipeline.busySeconds) {
      busy.push_back(seconds);
    }
    for (double seconds : pipeline.collectiveSeconds) {
      collectives.push_back(seconds);
    }
    for (size_t s = 0; s < stages.size(); ++s) {
      llvm::json::Array own;
      for (int64_t j = 0; j < replicas; ++j) {
        own.push_back(static_cast<int64_t>(s) * replicas + j);
      }
      layout.push_back(std::move(own));
    }
    llvm::json::Object root{
        {"plan", input},
        {"world_size", static_cast<int64_t>(first.world_size())},
        {"stages", std::move(documents)},
        {"ranks", std::move(ranks)},
        {"pipeline",
         llvm::json::Object{
             {"replicas", replicas},
             {"ranks_by_stage", std::move(layout)},
             {"predicted_step_seconds",
              pipeline.unpredictable.empty()
                  ? llvm::json::Value(pipeline.stepSeconds)
                  : nullptr},
             {"predicted_busy_seconds", std::move(busy)},
             {"predicted_collective_seconds", std::move(collectives)},
             {"predicted_bubble", pipeline.unpredictable.empty()
                                      ? llvm::json::Value(pipeline.bubble())
                                      : nullptr},
             {"unpredictable", pipeline.unpredictable}}}};
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(root)))
                 << "\n";
  }
  return 0;
}

} // namespace

int runInspect(int argc, const char **argv) {
  namespace cl = llvm::cl;
  cl::ResetCommandLineParser();
  cl::OptionCategory category("tailor inspect options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<plan.tplan>"),
                             cl::Required, cl::cat(category));
  cl::opt<bool> json("json", cl::desc("print JSON instead of text"),
                     cl::cat(category));
  cl::opt<bool> listParams("params", cl::desc("list every parameter"),
                           cl::cat(category));
  cl::opt<bool> listSteps("steps", cl::desc("list every step"),
                          cl::cat(category));
  cl::opt<std::string> hardware(
      "hardware",
      cl::desc("predict for this hardware (a name or a hardware file, as "
               "tailor calibrate writes) instead of the plan's target"),
      cl::value_desc("name|file"), cl::cat(category));
  cl::opt<std::string> trace(
      "trace",
      cl::desc("write the predicted timeline of one step (Chrome/Perfetto "
               "trace JSON) to this file"),
      cl::value_desc("file.json"), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "tailor inspect: show what a plan holds\n",
                                   &llvm::errs())) {
    return 1;
  }

  // A layer split's plan holds one plan per stage: inspect each.
  std::vector<std::unique_ptr<LoadedPlan>> stages;
  std::string error;
  runtime::LoadOptions options;
  options.checkSourceFiles = false;
  options.stage = 0;
  for (int stage = 0, count = 1; stage < count; ++stage) {
    options.stage = stage;
    std::unique_ptr<LoadedPlan> loaded =
        LoadedPlan::load(input, options, error);
    if (!loaded) {
      llvm::errs() << "tailor inspect: error: " << error << "\n";
      return 1;
    }
    if (const fb::PipelineStage *pipeline = loaded->root().pipeline()) {
      count = pipeline->stages();
    }
    stages.push_back(std::move(loaded));
  }
  if (stages.size() > 1) {
    return inspectStages(stages, input, json, hardware);
  }
  std::unique_ptr<LoadedPlan> loaded = std::move(stages.front());
  PlanSummary summary = summarize(*loaded);
  llvm::Expected<CostTarget> target = costTargetOf(loaded->root(), hardware);
  PredictionView view;
  if (target) {
    view = {target->hardware.name, predictPlan(loaded->root(), *target), {}};
    view.cluster = predictCluster(loaded->root(), *target);
  } else if (hardware.empty() && trace.empty()) {
    // A plan compiled for a hardware file: say how to predict, show the rest.
    const fb::Target *t = loaded->root().target();
    view.hardware = t && t->name() ? t->name()->str() : "?";
    view.prediction.unpredictable =
        llvm::toString(target.takeError()) +
        "; give the hardware file with --hardware";
  } else {
    llvm::errs() << "tailor inspect: error: "
                 << llvm::toString(target.takeError()) << "\n";
    return 1;
  }
  if (!trace.empty() && writeTrace(*loaded, *target, trace) != 0) {
    return 1;
  }
  if (json) {
    printJson(*loaded, summary, input, view);
  } else {
    printText(*loaded, summary, input, listParams, listSteps, view);
  }
  return 0;
}

} // namespace tailor
