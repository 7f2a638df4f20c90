//===- InspectCommand.cpp - `tailor inspect` ------------------------------===//
//
// tailor inspect PLAN.tplan [--json] [--params] [--steps]
//
// Prints what a plan holds: target, memory by category, arenas, inputs and
// outputs, parameters and the kernels it runs. The plan is verified exactly
// as the runtime verifies it, except that weight files need not be present.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"

#include "runtime/Plan.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <sys/stat.h>

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

const char *kCategoryNames[] = {"parameters", "constants", "activations",
                                "workspace", "optimizer_state", "gradients"};

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
  uint64_t byCategory[6] = {0, 0, 0, 0, 0, 0};
  for (const fb::Arena *arena : *p.arenas()) {
    byCategory[static_cast<int>(arena->category())] += arena->size();
  }
  uint64_t total = 0;
  for (uint64_t bytes : byCategory) {
    total += bytes;
  }

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
  std::string target = p.target() && p.target()->name() ? p.target()->name()->str() : "cpu";
  int threads = p.target() ? p.target()->threads() : 0;

  if (json) {
    llvm::json::Object root;
    root["plan"] = input;
    root["version"] = std::to_string(p.version() / 100) + "." +
                      std::to_string(p.version() % 100);
    root["producer"] = p.producer() ? p.producer()->str() : "";
    root["model"] = p.model() ? p.model()->str() : "";
    root["target"] = llvm::json::Object{
        {"backend", fb::EnumNameBackend(p.target() ? p.target()->backend()
                                                   : fb::Backend::Cpu)},
        {"name", target},
        {"threads", threads}};
    root["rank"] = p.rank();
    root["world_size"] = p.world_size();
    llvm::json::Object mem;
    for (int c = 0; c < 6; ++c) {
      mem[kCategoryNames[c]] = static_cast<int64_t>(byCategory[c]);
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
          {"category", kCategoryNames[static_cast<int>(arena->category())]},
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
          out.push_back(llvm::json::Object{{"name", binding->name()->str()},
                                           {"dtype", dtypeOf(buffer)},
                                           {"shape", std::move(shape)}});
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
        params.push_back(std::move(entry));
      }
    }
    root["parameters"] = std::move(params);
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
  os << "target: " << target << ", rank " << p.rank() << " of "
     << p.world_size() << ", workspaces for " << threads << " threads\n";
  os << "memory:\n";
  for (int c = 0; c < 6; ++c) {
    if (byCategory[c] == 0 && c > 3) {
      continue;
    }
    os << llvm::format("  %-16s %14llu B", kCategoryNames[c],
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
       << kCategoryNames[static_cast<int>(arena->category())] << ", "
       << arena->size() << " B, align " << arena->alignment() << "\n";
  }
  for (auto [title, list] : {std::make_pair("inputs", p.inputs()),
                             std::make_pair("outputs", p.outputs())}) {
    os << title << ":\n";
    if (list) {
      for (const fb::Binding *binding : *list) {
        const fb::Buffer &buffer = *buffers.Get(binding->buffer());
        os << "  " << binding->name()->str() << ": " << dtypeOf(buffer) << " "
           << formatShape(*buffer.shape()) << "\n";
      }
    }
  }
  os << "parameters: " << paramCount << " tensors, " << paramBytes << " B ("
     << formatBytes(paramBytes) << ") from " << files.size() << " file(s)\n";
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
      os << (param->trainable() ? " trainable" : "") << "\n";
    }
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
