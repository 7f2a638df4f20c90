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

#include "runtime/MemoryCategory.h"
#include "runtime/Plan.h"
#include "runtime/cuda/DeviceImage.h"

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
const char *kStateKinds[] = {"grad", "exp_avg", "exp_avg_sq",
                             "momentum_buffer"};

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
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(
          argc, argv, "tailor inspect: show what a plan holds\n",
          &llvm::errs())) {
    return 1;
  }

  std::string error;
  runtime::LoadOptions options;
  options.checkSourceFiles = false;
  std::unique_ptr<LoadedPlan> loaded = LoadedPlan::load(input, options, error);
  if (!loaded) {
    llvm::errs() << "tailor inspect: error: " << error << "\n";
    return 1;
  }
  const fb::Plan &p = loaded->root();
  const auto &buffers = *p.buffers();
  const fb::Memory *memory = p.memory();
  runtime::CategoryBytes byCategory = runtime::arenaBytes(p);
  uint64_t total = runtime::totalBytes(byCategory);

  // Parameters by source file, and whether the files are there.
  uint64_t paramBytes = 0;
  size_t paramCount = p.parameters() ? p.parameters()->size() : 0;
  std::map<std::string, bool> files;
  if (p.parameters()) {
    for (const fb::Parameter *param : *p.parameters()) {
      paramBytes += loaded->bufferBytes(param->buffer());
      if (param->source()) {
        std::string path = loaded->resolveSourcePath(param->source()->file()->str());
        struct stat info;
        files[path] = stat(path.c_str(), &info) == 0;
      }
    }
  }
  std::map<std::string, int> kernelUse;
  size_t launches = 0;
  for (const fb::Op *op : *p.ops()) {
    if (const fb::Launch *launch = op->step_as_Launch()) {
      ++launches;
      ++kernelUse[p.kernels()->Get(launch->kernel())->name()->str()];
    }
  }
  // What a training plan adds: entries (with their launches), which entry
  // each input and output belongs to, trainable versus frozen parameters,
  // those the runtime creates, and the training state by kind. An inference
  // plan has no training table and at most one entry, and shows none of it.
  const fb::Training *training = p.training();
  const auto *entries = p.entries();
  bool showEntries =
      entries && entries->size() > 0 && (training || entries->size() > 1);
  auto entryOf = [&](const fb::Binding &binding) -> std::string {
    if (entries && binding.entry() < entries->size()) {
      return entries->Get(binding.entry())->name()->str();
    }
    return "forward";
  };
  std::vector<int64_t> entryLaunches;
  if (entries) {
    for (const fb::Entry *entry : *entries) {
      int64_t count = 0;
      for (uint32_t i = entry->first_op();
           i < entry->first_op() + entry->op_count(); ++i) {
        count += p.ops()->Get(i)->step_type() == fb::Step::Launch;
      }
      entryLaunches.push_back(count);
    }
  }
  Tally trainable, frozen, initialized, unquantized;
  // Quantized storage per scheme: tensors, bytes (codes, scales and every
  // constant the scheme keeps) and the weights they stand for.
  std::map<std::string, std::pair<Tally, int64_t>> quantized;
  std::map<std::string, int> initKinds;
  if (p.parameters()) {
    for (const fb::Parameter *param : *p.parameters()) {
      uint64_t bytes = loaded->bufferBytes(param->buffer());
      (param->trainable() ? trainable : frozen).add(bytes);
      if (const fb::Quantization *quant = param->quant()) {
        auto &[tally, weights] = quantized[quant->scheme()->str()];
        tally.add(bytes);
        weights += quant->rows() * quant->cols();
      } else {
        unquantized.add(bytes);
      }
      if (!param->source()) {
        initialized.add(bytes);
        if (const fb::Init *init = param->init()) {
          ++initKinds[fb::EnumNameInitKind(init->kind())];
        }
      }
    }
  }
  Tally stateTotal;
  std::map<std::string, Tally> stateByKind;
  if (p.states()) {
    for (const fb::State *state : *p.states()) {
      uint64_t bytes = loaded->bufferBytes(state->buffer());
      stateTotal.add(bytes);
      stateByKind[state->kind()->str()].add(bytes);
    }
  }
  std::vector<std::string> stateKinds;
  for (const char *kind : kStateKinds) {
    if (stateByKind.count(kind)) {
      stateKinds.push_back(kind);
    }
  }
  for (const auto &[kind, tally] : stateByKind) {
    if (!llvm::is_contained(kStateKinds, kind)) {
      stateKinds.push_back(kind);
    }
  }

  std::string target = p.target() && p.target()->name() ? p.target()->name()->str() : "cpu";
  int threads = p.target() ? p.target()->threads() : 0;
  bool gpu = p.target() && p.target()->backend() == fb::Backend::Cuda;
  // What each embedded image really is, read from its own headers.
  struct DeviceCodeSummary {
    std::string kind, arch, module, problem;
    int sm = 0;
    size_t bytes = 0, stored = 0, functions = 0;
  };
  std::vector<DeviceCodeSummary> deviceCode;
  if (p.device_code()) {
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
  }

  if (json) {
    llvm::json::Object root;
    root["plan"] = input;
    root["version"] = std::to_string(p.version() / 100) + "." +
                      std::to_string(p.version() % 100);
    root["producer"] = p.producer() ? p.producer()->str() : "";
    root["model"] = p.model() ? p.model()->str() : "";
    llvm::json::Object targetJson{
        {"backend", fb::EnumNameBackend(p.target() ? p.target()->backend()
                                                   : fb::Backend::Cpu)},
        {"name", target},
        {"threads", threads}};
    if (gpu) {
      targetJson["sm"] = p.target()->sm();
      targetJson["precision"] =
          p.target()->precision() ? p.target()->precision()->str() : "fp32";
      targetJson["device_memory"] =
          static_cast<int64_t>(p.target()->device_memory());
    }
    root["target"] = std::move(targetJson);
    llvm::json::Array codes;
    for (const DeviceCodeSummary &code : deviceCode) {
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
    root["device_code"] = std::move(codes);
    root["rank"] = p.rank();
    root["world_size"] = p.world_size();
    llvm::json::Object mem;
    for (size_t c = 0; c < runtime::kMemoryCategoryCount; ++c) {
      mem[runtime::kMemoryCategoryNames[c]] = static_cast<int64_t>(byCategory[c]);
    }
    mem["total"] = static_cast<int64_t>(total);
    mem["activations_live_bytes"] =
        static_cast<int64_t>(memory ? memory->activations_live_bytes() : 0);
    root["memory"] = std::move(mem);
    llvm::json::Array arenas;
    for (const fb::Arena *arena : *p.arenas()) {
      arenas.push_back(llvm::json::Object{
          {"name", arena->name()->str()},
          {"kind", fb::EnumNameArenaKind(arena->kind())},
          {"category", runtime::kMemoryCategoryNames[static_cast<int>(arena->category())]},
          {"size", static_cast<int64_t>(arena->size())},
          {"alignment", static_cast<int64_t>(arena->alignment())}});
    }
    root["arenas"] = std::move(arenas);
    auto bindings = [&](const auto *list) {
      llvm::json::Array out;
      if (list) {
        for (const fb::Binding *binding : *list) {
          const fb::Buffer &buffer = *buffers.Get(binding->buffer());
          llvm::json::Array shape;
          for (int64_t d : *buffer.shape()) {
            shape.push_back(d);
          }
          llvm::json::Object item{{"name", binding->name()->str()},
                                  {"dtype", dtypeOf(buffer)},
                                  {"shape", std::move(shape)}};
          if (showEntries) {
            item["entry"] = entryOf(*binding);
          }
          out.push_back(std::move(item));
        }
      }
      return out;
    };
    root["inputs"] = bindings(p.inputs());
    root["outputs"] = bindings(p.outputs());
    llvm::json::Array params;
    if (p.parameters()) {
      for (const fb::Parameter *param : *p.parameters()) {
        const fb::Buffer &buffer = *buffers.Get(param->buffer());
        llvm::json::Array shape;
        for (int64_t d : *buffer.shape()) {
          shape.push_back(d);
        }
        llvm::json::Object entry{{"name", param->name()->str()},
                                 {"dtype", dtypeOf(buffer)},
                                 {"shape", std::move(shape)},
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
               static_cast<int64_t>(loaded->bufferBytes(param->buffer()))}};
        }
        params.push_back(std::move(entry));
      }
    }
    root["parameters"] = std::move(params);
    if (training || trainable.count) {
      llvm::json::Object summary =
          Tally{static_cast<int64_t>(paramCount), paramBytes}.toJSON();
      summary["trainable"] = trainable.toJSON();
      summary["frozen"] = frozen.toJSON();
      summary["runtime_initialized"] = initialized.toJSON();
      root["parameter_summary"] = std::move(summary);
    }
    if (!quantized.empty()) {
      llvm::json::Object schemes;
      for (const auto &[scheme, entry] : quantized) {
        llvm::json::Object tally = entry.first.toJSON();
        tally["weights"] = entry.second;
        schemes[scheme] = std::move(tally);
      }
      root["quantization"] = llvm::json::Object{
          {"schemes", std::move(schemes)},
          {"unquantized", unquantized.toJSON()}};
    }
    if (showEntries) {
      llvm::json::Array list;
      for (uint32_t i = 0; i < entries->size(); ++i) {
        const fb::Entry *entry = entries->Get(i);
        list.push_back(llvm::json::Object{
            {"name", entry->name()->str()},
            {"first_op", static_cast<int64_t>(entry->first_op())},
            {"op_count", static_cast<int64_t>(entry->op_count())},
            {"launches", entryLaunches[i]}});
      }
      root["entries"] = std::move(list);
    }
    if (stateTotal.count) {
      llvm::json::Object states = stateTotal.toJSON();
      llvm::json::Object kinds;
      for (const std::string &kind : stateKinds) {
        kinds[kind] = stateByKind[kind].toJSON();
      }
      states["kinds"] = std::move(kinds);
      root["states"] = std::move(states);
    }
    if (training) {
      auto strings = [](const auto *list) {
        llvm::json::Array out;
        if (list) {
          for (const flatbuffers::String *value : *list) {
            out.push_back(value->str());
          }
        }
        return out;
      };
      auto str = [](const flatbuffers::String *value) {
        return value ? value->str() : std::string();
      };
      llvm::json::Object t{{"micro_batch_size", training->micro_batch_size()},
                           {"sequence_len", training->sequence_len()},
                           {"vocab_size", training->vocab_size()},
                           {"shuffle", training->shuffle()},
                           {"gradient_accumulation_steps",
                            training->gradient_accumulation_steps()},
                           {"max_steps", training->max_steps()},
                           {"seed", training->seed()},
                           {"optimizer", str(training->optimizer())},
                           {"learning_rate", training->learning_rate()},
                           {"lr_scheduler", str(training->lr_scheduler())},
                           {"warmup_steps", training->warmup_steps()},
                           {"weight_decay", training->weight_decay()},
                           {"max_grad_norm", training->max_grad_norm()},
                           {"save_steps", training->save_steps()},
                           {"logging_steps", training->logging_steps()},
                           {"base_model", str(training->base_model())},
                           {"recipe", str(training->recipe())}};
      if (const fb::Adapter *adapter = training->adapter()) {
        llvm::json::Array layers;
        if (adapter->layers()) {
          for (int32_t layer : *adapter->layers()) {
            layers.push_back(layer);
          }
        }
        t["adapter"] = llvm::json::Object{
            {"variant", adapter->variant()->str()},
            {"r", adapter->r()},
            {"alpha", adapter->alpha()},
            {"dropout", adapter->dropout()},
            {"use_rslora", adapter->use_rslora()},
            {"target_modules", strings(adapter->target_modules())},
            {"layers", std::move(layers)},
            {"modules", strings(adapter->modules())},
            {"module_count",
             static_cast<int64_t>(
                 adapter->modules() ? adapter->modules()->size() : 0)}};
      }
      root["training"] = std::move(t);
    }
    llvm::json::Object kernels;
    for (const auto &[name, count] : kernelUse) {
      kernels[name] = count;
    }
    root["kernels"] = std::move(kernels);
    root["steps"] = static_cast<int64_t>(p.ops()->size());
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(root)))
                 << "\n";
    return 0;
  }

  llvm::raw_ostream &os = llvm::outs();
  os << "plan: " << input << " (format " << p.version() / 100 << "."
     << p.version() % 100 << ", " << (p.producer() ? p.producer()->str() : "?")
     << ")\n";
  os << "model: " << (p.model() ? p.model()->str() : "") << "\n";
  if (gpu) {
    os << "target: " << target << " (cuda, sm_" << p.target()->sm() << ", "
       << (p.target()->precision() ? p.target()->precision()->str() : "fp32")
       << " compute), rank " << p.rank() << " of " << p.world_size() << "\n";
    for (const DeviceCodeSummary &code : deviceCode) {
      os << "device code: " << code.module << " " << code.kind << " "
         << code.arch << " (" << code.functions << " kernels, " << code.bytes
         << " bytes, " << code.stored << " stored"
         << (code.problem.empty() ? "" : ", unreadable: " + code.problem)
         << ")\n";
    }
  } else {
    os << "target: " << target << ", rank " << p.rank() << " of "
       << p.world_size() << ", workspaces for " << threads << " threads\n";
  }
  if (training) {
    os << "training:\n";
    const fb::Adapter *adapter = training->adapter();
    std::string variant = adapter ? adapter->variant()->str() : "full";
    if (variant == "full") {
      // Full fine-tuning still names the modules whose weights train.
      std::string targets = adapter ? join(adapter->target_modules()) : "";
      os << "  adapter: none, full fine-tuning of "
         << (targets.empty() ? "all" : targets) << "\n";
    } else {
      // PEFT scales the adapter's output by alpha / r, or alpha / sqrt(r)
      // with rsLoRA.
      double r = std::max(adapter->r(), 1);
      double scale =
          adapter->alpha() / (adapter->use_rslora() ? std::sqrt(r) : r);
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
    os << "  optimizer: "
       << (training->optimizer() ? training->optimizer()->str() : "?")
       << ", lr " << formatNumber(training->learning_rate()) << ", "
       << (training->lr_scheduler() ? training->lr_scheduler()->str() : "?")
       << " schedule, warmup " << training->warmup_steps() << ", max steps "
       << training->max_steps() << "\n";
    int64_t accumulation = std::max(1, training->gradient_accumulation_steps());
    os << "  batch: " << training->micro_batch_size() << " x "
       << training->sequence_len() << " tokens x " << accumulation
       << " accumulation = "
       << training->micro_batch_size() * int64_t(training->sequence_len()) *
              accumulation
       << " tokens/step\n";
    os << "  max_grad_norm "
       << (training->max_grad_norm() > 0
               ? formatNumber(training->max_grad_norm())
               : std::string("off"))
       << ", weight decay " << formatNumber(training->weight_decay())
       << ", seed " << training->seed() << "\n";
  }
  os << "memory:\n";
  for (size_t c = 0; c < runtime::kMemoryCategoryCount; ++c) {
    // Inference plans have no optimizer state or gradients: say nothing.
    if (byCategory[c] == 0 &&
        c > static_cast<size_t>(fb::Category::Workspace)) {
      continue;
    }
    os << llvm::format("  %-16s %14llu B", runtime::kMemoryCategoryNames[c],
                       static_cast<unsigned long long>(byCategory[c]));
    if (byCategory[c] >= 1024) {
      os << "  " << formatBytes(byCategory[c]);
    }
    if (c == 2 && memory) {
      os << "  (live lower bound "
         << formatBytes(memory->activations_live_bytes()) << ")";
    }
    os << "\n";
  }
  os << llvm::format("  %-16s %14llu B", "total",
                     static_cast<unsigned long long>(total));
  if (total >= 1024) {
    os << "  " << formatBytes(total);
  }
  os << "\n";
  os << "arenas:\n";
  for (const fb::Arena *arena : *p.arenas()) {
    os << "  " << arena->name()->str() << ": "
       << fb::EnumNameArenaKind(arena->kind()) << ", "
       << runtime::kMemoryCategoryNames[static_cast<int>(arena->category())] << ", "
       << arena->size() << " B, align " << arena->alignment() << "\n";
  }
  if (showEntries) {
    os << "entries:\n";
    for (uint32_t i = 0; i < entries->size(); ++i) {
      const fb::Entry *entry = entries->Get(i);
      os << llvm::format("  %-16s %6lld launches", entry->name()->c_str(),
                         static_cast<long long>(entryLaunches[i]));
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
    if (list) {
      for (const fb::Binding *binding : *list) {
        const fb::Buffer &buffer = *buffers.Get(binding->buffer());
        os << "  " << binding->name()->str() << ": " << dtypeOf(buffer) << " "
           << formatShape(*buffer.shape());
        if (showEntries) {
          os << "  (" << entryOf(*binding) << ")";
        }
        os << "\n";
      }
    }
  }
  os << "parameters: " << paramCount << " tensors, " << paramBytes << " B ("
     << formatBytes(paramBytes) << ") from " << files.size() << " file(s)\n";
  if (training || trainable.count) {
    os << "  trainable: " << formatTally(trainable) << "\n";
    os << "  frozen: " << formatTally(frozen) << "\n";
    if (initialized.count) {
      os << "  initialized by the runtime: " << formatTally(initialized);
      for (auto it = initKinds.begin(); it != initKinds.end(); ++it) {
        os << (it == initKinds.begin() ? "; " : ", ") << it->first << " "
           << it->second;
      }
      os << "\n";
    }
  }
  for (const auto &[scheme, entry] : quantized) {
    const auto &[tally, weights] = entry;
    os << "  quantized " << scheme << ": " << formatTally(tally) << " for "
       << weights << " weights ("
       << llvm::format("%.4f", 8.0 * static_cast<double>(tally.bytes) /
                                   static_cast<double>(weights))
       << " bits per weight, scales and constants included)\n";
  }
  if (!quantized.empty()) {
    os << "  not quantized: " << formatTally(unquantized) << "\n";
  }
  for (const auto &[path, present] : files) {
    os << "  " << path << (present ? "" : " (missing)") << "\n";
  }
  if (listParams && p.parameters()) {
    for (const fb::Parameter *param : *p.parameters()) {
      const fb::Buffer &buffer = *buffers.Get(param->buffer());
      os << "  " << param->name()->str() << ": " << dtypeOf(buffer) << " "
         << formatShape(*buffer.shape());
      if (const fb::Source *source = param->source()) {
        os << " at " << source->file()->str() << "[" << source->offset()
           << ", +" << source->length() << "]";
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
  if (stateTotal.count) {
    os << "states: " << formatTally(stateTotal);
    for (size_t i = 0; i < stateKinds.size(); ++i) {
      const Tally &tally = stateByKind[stateKinds[i]];
      os << (i ? ", " : "; ") << stateKinds[i] << " " << tally.count << " ("
         << formatBytes(tally.bytes) << ")";
    }
    os << "\n";
  }
  os << "kernels: " << kernelUse.size() << " kinds, " << launches
     << " launches\n";
  for (const auto &[name, count] : kernelUse) {
    os << llvm::format("  %-14s %d\n", name.c_str(), count);
  }
  if (listSteps) {
    os << "steps:\n";
    for (uint32_t i = 0; i < p.ops()->size(); ++i) {
      const fb::Op *op = p.ops()->Get(i);
      os << "  " << i << ": ";
      if (const fb::Launch *launch = op->step_as_Launch()) {
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
        if (launch->origin() && launch->origin()->size()) {
          os << "  # " << launch->origin()->str();
        }
      } else {
        os << fb::EnumNameStep(op->step_type());
      }
      os << "\n";
    }
  }
  return 0;
}

} // namespace tailor
