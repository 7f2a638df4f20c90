//===- tailor-run.cpp - run a compiled plan on NumPy .npy files -----------===//
//
// Runtime-only forward execution: loads a plan, feeds it .npy inputs, runs it
// and writes its outputs as .npy. It links tailor_runtime and no LLVM, so argv
// is parsed by hand. Everything the user gave is checked before the (maybe
// long) run: plan, input files, dtypes, shapes, output destinations.
//
//===----------------------------------------------------------------------===//

#include "tailor/runtime.hpp"
#include "tools/tailor-run/Npy.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <new>
#include <string>
#include <vector>

#include <unistd.h>

using namespace tailor;

namespace {

constexpr const char *kUsage = R"(usage: tailor-run PLAN.tplan [options]

Runs a compiled plan once on NumPy .npy inputs and writes its outputs.

options:
  --input NAME=FILE.npy   value of plan input NAME (every input is required);
                          an integer file converts to an integer input and a
                          float file to a float input, range-checked
  --output NAME=FILE.npy  write output NAME to FILE.npy
  --output-dir DIR        write every output as DIR/NAME.npy ('/' in a name
                          becomes '_')
  --entry NAME            the entry to run (default: the first; a training
                          plan has train_step and optimizer_step); only its
                          inputs and outputs are used
  --threads N             CPU worker threads (default: the plan's or the cores)
  --repeat N              run N times and print the mean time per run to stderr
  --list                  print the plan's inputs, outputs and memory; run nothing
  -h, --help              print this help

Without --output or --output-dir, prints each output's name, dtype, shape and
first values. Outputs are written atomically: a failure leaves no partial file.
bfloat16 outputs are written as float32 (NumPy has no bfloat16).
)";

/// What the command line asked for.
struct Options {
  std::string plan;
  std::vector<std::string> inputs, outputs; // NAME=FILE, as given
  std::string outputDir;
  std::string entry;
  int threads = 0;
  int repeat = 1;
  bool timed = false;
  bool list = false;
};

int fail(const std::string &message) {
  std::fprintf(stderr, "tailor-run: error: %s\n", message.c_str());
  return 1;
}

bool parseCount(const std::string &flag, const std::string &text, int min,
                int &out, std::string &error) {
  char *end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || value < min || value > 1000000) {
    error = flag + " expects an integer >= " + std::to_string(min) + ", got '" +
            text + "'";
    return false;
  }
  out = static_cast<int>(value);
  return true;
}

bool parseArgs(int argc, char **argv, Options &opts, std::string &error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--list") {
      opts.list = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (!opts.plan.empty()) {
        error = "unexpected argument '" + arg + "' (one plan file is expected)";
        return false;
      }
      opts.plan = arg;
      continue;
    }
    // Options with a value: --flag VALUE or --flag=VALUE.
    std::string flag = arg.substr(0, arg.find('=')), value;
    if (flag != "--input" && flag != "--output" && flag != "--output-dir" &&
        flag != "--threads" && flag != "--repeat" && flag != "--entry") {
      error = "unknown option '" + arg + "' (see --help)";
      return false;
    }
    if (flag.size() < arg.size()) {
      value = arg.substr(flag.size() + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      error = flag + " needs a value";
      return false;
    }
    if (flag == "--input") {
      opts.inputs.push_back(value);
    } else if (flag == "--output") {
      opts.outputs.push_back(value);
    } else if (flag == "--output-dir") {
      opts.outputDir = value;
    } else if (flag == "--entry") {
      opts.entry = value;
    } else if (flag == "--threads") {
      if (!parseCount(flag, value, 0, opts.threads, error)) {
        return false;
      }
    } else {
      opts.timed = true;
      if (!parseCount(flag, value, 1, opts.repeat, error)) {
        return false;
      }
    }
  }
  if (opts.plan.empty()) {
    error = "no plan file given (usage: tailor-run PLAN.tplan --input "
            "NAME=FILE.npy ...; see --help)";
    return false;
  }
  return true;
}

std::string joinNames(const std::vector<TensorInfo> &infos) {
  std::string out;
  for (const TensorInfo &info : infos) {
    out += (out.empty() ? "'" : ", '") + info.name + "'";
  }
  return out.empty() ? "none" : out;
}

/// Splits NAME=FILE. Names may contain '=' (ONNX allows it), so the longest
/// plan name followed by '=' wins; otherwise the first '=' splits.
bool splitSpec(const std::string &flag, const std::string &spec,
               const std::vector<TensorInfo> &infos, std::string &name,
               std::string &file, std::string &error) {
  size_t split = std::string::npos;
  for (const TensorInfo &info : infos) {
    if (spec.size() > info.name.size() &&
        spec.compare(0, info.name.size(), info.name) == 0 &&
        spec[info.name.size()] == '=' &&
        (split == std::string::npos || info.name.size() > split)) {
      split = info.name.size();
    }
  }
  if (split == std::string::npos) {
    split = spec.find('=');
  }
  if (split == std::string::npos || split + 1 == spec.size()) {
    error = flag + " expects NAME=FILE.npy, got '" + spec + "'";
    return false;
  }
  name = spec.substr(0, split);
  file = spec.substr(split + 1);
  for (const TensorInfo &info : infos) {
    if (info.name == name) {
      return true;
    }
  }
  error = "the plan has no " + flag.substr(2) + " '" + name + "' (its " +
          flag.substr(2) + "s: " + joinNames(infos) + ")";
  return false;
}

/// The .npy dtype of a plan dtype; bfloat16 travels as float32.
NpyDType fileDType(tailor_dtype dtype) {
  switch (dtype) {
  case TAILOR_F64:
    return NpyDType::F64;
  case TAILOR_F16:
    return NpyDType::F16;
  case TAILOR_I64:
    return NpyDType::I64;
  case TAILOR_I32:
    return NpyDType::I32;
  case TAILOR_I16:
    return NpyDType::I16;
  case TAILOR_I8:
    return NpyDType::I8;
  case TAILOR_U8:
    return NpyDType::U8;
  case TAILOR_BOOL:
    return NpyDType::Bool;
  default:
    return NpyDType::F32;
  }
}

/// Reads the file for plan input `info` and converts it to the plan's dtype
/// (the bytes the session takes).
bool loadInput(const TensorInfo &info, const std::string &file,
               std::vector<uint8_t> &bytes, std::string &error) {
  NpyArray array;
  if (!readNpy(file, array, error)) {
    error = "input '" + info.name + "': " + error;
    return false;
  }
  std::string where = "input '" + info.name + "' from '" + file + "': ";
  if (array.shape != info.shape) {
    error = where + "expected shape " + formatShape(info.shape) + ", got " +
            formatShape(array.shape);
    return false;
  }
  NpyArray converted;
  if (!convertNpy(array, fileDType(info.dtype), converted, error)) {
    error = where + "expected " + dtypeName(info.dtype) + ", got " +
            npyDTypeName(array.dtype) +
            (error.rfind("value", 0) == 0 ? " (" + error + ")" : "");
    return false;
  }
  if (info.dtype == TAILOR_BF16) {
    bytes.resize(converted.data.size() / 2);
    for (size_t i = 0; i * 4 < converted.data.size(); ++i) {
      float value;
      std::memcpy(&value, &converted.data[i * 4], 4);
      uint16_t half = floatToBFloat16(value);
      if (std::isfinite(value) && (half & 0x7fff) == 0x7f80) {
        char text[32];
        std::snprintf(text, sizeof(text), "%.9g", value);
        error = where + "value " + text + " at index " + std::to_string(i) +
                " is out of range for bfloat16";
        return false;
      }
      std::memcpy(&bytes[i * 2], &half, 2);
    }
  } else {
    bytes = std::move(converted.data);
  }
  return true;
}

/// Copies a session output into an array a .npy file can hold.
NpyArray toArray(const OutputView &view) {
  const TensorInfo &info = view.info;
  NpyArray array = NpyArray::zeros(fileDType(info.dtype), info.shape);
  const auto *src = static_cast<const uint8_t *>(view.data);
  if (info.dtype == TAILOR_BF16) {
    for (size_t i = 0; i * 4 < array.data.size(); ++i) {
      uint16_t half;
      std::memcpy(&half, src + i * 2, 2);
      float value = bfloat16ToFloat(half);
      std::memcpy(&array.data[i * 4], &value, 4);
    }
  } else if (!array.data.empty()) {
    std::memcpy(array.data.data(), src, array.data.size());
  }
  return array;
}

/// Formats element `i` of `array`.
std::string formatElement(const NpyArray &array, int64_t i) {
  const uint8_t *p = array.data.data() + i * npyDTypeSize(array.dtype);
  auto load = [p](auto value) {
    std::memcpy(&value, p, sizeof(value));
    return value;
  };
  char buffer[32];
  switch (array.dtype) {
  case NpyDType::F32:
    std::snprintf(buffer, sizeof(buffer), "%g", load(0.0f));
    break;
  case NpyDType::F64:
    std::snprintf(buffer, sizeof(buffer), "%g", load(0.0));
    break;
  case NpyDType::F16:
    std::snprintf(buffer, sizeof(buffer), "%g", halfToFloat(load(uint16_t())));
    break;
  case NpyDType::Bool:
    return *p ? "True" : "False";
  case NpyDType::I64:
    return std::to_string(load(int64_t()));
  case NpyDType::I32:
    return std::to_string(load(int32_t()));
  case NpyDType::I16:
    return std::to_string(load(int16_t()));
  case NpyDType::I8:
    return std::to_string(load(int8_t()));
  case NpyDType::U8:
    return std::to_string(load(uint8_t()));
  }
  return buffer;
}

/// Prints "NAME: DTYPE SHAPE = [v0, v1, ...]" with the first few values.
void printSummary(const std::string &name, const NpyArray &array,
                  tailor_dtype dtype) {
  constexpr int64_t kShown = 8;
  int64_t n = array.numElements();
  std::string values;
  for (int64_t i = 0; i < n && i < kShown; ++i) {
    values += (i ? ", " : "") + formatElement(array, i);
  }
  std::printf("%s: %s %s = [%s%s]\n", name.c_str(), dtypeName(dtype),
              formatShape(array.shape).c_str(), values.c_str(),
              n > kShown ? ", ..." : "");
}

void printList(const Plan &plan) {
  auto print = [](const char *title, const std::vector<TensorInfo> &infos) {
    std::printf("%s:\n", title);
    for (const TensorInfo &info : infos) {
      std::printf("  %s: %s %s\n", info.name.c_str(), dtypeName(info.dtype),
                  formatShape(info.shape).c_str());
    }
  };
  print("inputs", plan.inputs());
  print("outputs", plan.outputs());
  if (auto memory = plan.memory()) {
    auto mib = [](uint64_t bytes) { return double(bytes) / (1 << 20); };
    std::printf("memory: %.1f MiB (parameters %.1f, constants %.1f, "
                "activations %.1f, workspace %.1f, optimizer state %.1f, "
                "gradients %.1f)\n",
                mib(memory->total), mib(memory->parameters),
                mib(memory->constants), mib(memory->activations),
                mib(memory->workspace), mib(memory->optimizer_state),
                mib(memory->gradients));
  }
}

/// The entry to run (--entry, else the first) and the inputs and outputs
/// that belong to it.
struct EntryTensors {
  std::string entry;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
};

bool chooseEntry(const Plan &plan, const Options &opts, EntryTensors &chosen,
                 std::string &error) {
  std::vector<std::string> entries = plan.entries();
  std::string entry = opts.entry.empty() ? entries.front() : opts.entry;
  auto entryIt = std::find(entries.begin(), entries.end(), entry);
  if (entryIt == entries.end()) {
    std::string known;
    for (const std::string &name : entries) {
      known += (known.empty() ? "" : ", ") + name;
    }
    error = "the plan has no entry '" + entry + "' (it has: " + known + ")";
    return false;
  }
  int entryIndex = static_cast<int>(entryIt - entries.begin());
  auto ofEntry = [&](std::vector<TensorInfo> infos) {
    infos.erase(std::remove_if(infos.begin(), infos.end(),
                               [&](const TensorInfo &info) {
                                 return info.entry != entryIndex;
                               }),
                infos.end());
    return infos;
  };
  chosen.entry = entry;
  chosen.inputs = ofEntry(plan.inputs());
  chosen.outputs = ofEntry(plan.outputs());
  return true;
}

/// Every plan input exactly once, read and converted up front.
bool readInputs(const Options &opts, const std::vector<TensorInfo> &inputInfos,
                std::vector<std::vector<uint8_t>> &inputBytes,
                std::string &error) {
  std::map<std::string, std::string> inputFiles;
  for (const std::string &spec : opts.inputs) {
    std::string name, file;
    if (!splitSpec("--input", spec, inputInfos, name, file, error)) {
      return false;
    }
    if (!inputFiles.emplace(name, file).second) {
      error = "input '" + name + "' is given twice";
      return false;
    }
  }
  inputBytes.resize(inputInfos.size());
  for (size_t i = 0; i < inputInfos.size(); ++i) {
    auto it = inputFiles.find(inputInfos[i].name);
    if (it == inputFiles.end()) {
      error = "missing --input " + inputInfos[i].name +
              "=FILE.npy (the plan's inputs: " + joinNames(inputInfos) + ")";
      return false;
    }
    if (!loadInput(inputInfos[i], it->second, inputBytes[i], error)) {
      return false;
    }
  }
  return true;
}

/// Where outputs go: (output name, destination path) pairs, each path
/// claimed once and its folder checked before running.
class Destinations {
public:
  std::vector<std::pair<std::string, std::string>> list;

  bool add(const std::string &name, const std::string &path,
           std::string &error) {
    auto [it, added] = byPath.emplace(path, name);
    if (!added) {
      error = "'" + path + "' would receive both output '" + it->second +
              "' and output '" + name + "'";
      return false;
    }
    // A missing or read-only folder is found now, not after the run.
    std::string folder = std::filesystem::path(path).parent_path().string();
    folder = folder.empty() ? "." : folder;
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec) ||
        ::access(folder.c_str(), W_OK) != 0) {
      error = "cannot write output '" + name + "' to '" + path + "': '" +
              folder + "' is not a writable folder";
      return false;
    }
    list.emplace_back(name, path);
    return true;
  }

private:
  std::map<std::string, std::string> byPath;
};

/// The destinations of --output NAME=FILE and of every output under
/// --output-dir.
bool chooseDestinations(const Options &opts,
                        const std::vector<TensorInfo> &outputInfos,
                        Destinations &destinations, std::string &error) {
  for (const std::string &spec : opts.outputs) {
    std::string name, file;
    if (!splitSpec("--output", spec, outputInfos, name, file, error) ||
        !destinations.add(name, file, error)) {
      return false;
    }
  }
  if (opts.outputDir.empty()) {
    return true;
  }
  std::error_code ec;
  std::filesystem::create_directories(opts.outputDir, ec);
  if (ec || !std::filesystem::is_directory(opts.outputDir)) {
    error = "--output-dir '" + opts.outputDir + "': cannot create the folder" +
            (ec ? ": " + ec.message() : "");
    return false;
  }
  for (const TensorInfo &info : outputInfos) {
    std::string file = info.name.empty() ? "_" : info.name;
    for (char &c : file) {
      c = c == '/' ? '_' : c;
    }
    if (!destinations.add(info.name, opts.outputDir + "/" + file + ".npy",
                          error)) {
      return false;
    }
  }
  return true;
}

/// Runs the entry --repeat times, setting the inputs before each run
/// (outside the timing: a plan may reuse an input's memory for activations
/// once it is consumed); with --time prints the mean and min.
bool runRepeatedly(Session &session, const Options &opts,
                   const EntryTensors &tensors,
                   const std::vector<std::vector<uint8_t>> &inputBytes,
                   std::string &error) {
  using Clock = std::chrono::steady_clock;
  double totalMs = 0, minMs = 0;
  for (int run = 0; run < opts.repeat; ++run) {
    for (size_t i = 0; i < tensors.inputs.size(); ++i) {
      const TensorInfo &info = tensors.inputs[i];
      Status status =
          session.setInput(info.name, info.dtype, info.shape,
                           inputBytes[i].data(), inputBytes[i].size());
      if (!status) {
        error = "input '" + info.name + "': " + status.message();
        return false;
      }
    }
    Clock::time_point start = Clock::now();
    if (Status status = session.runEntry(tensors.entry); !status) {
      error = "run failed: " + status.message();
      return false;
    }
    double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    totalMs += ms;
    minMs = run == 0 ? ms : std::min(minMs, ms);
  }
  if (opts.timed) {
    std::fprintf(stderr, "tailor-run: %d run(s), mean %.3f ms/run (min %.3f)\n",
                 opts.repeat, totalMs / opts.repeat, minMs);
  }
  return true;
}

/// Output `name` as an array, never read past what the runtime says it
/// holds.
bool fetchOutput(Session &session, const std::string &name, NpyArray &array,
                 std::string &error) {
  Expected<OutputView> view = session.output(name);
  if (!view) {
    error = "output '" + name + "': " + view.error().message();
    return false;
  }
  const TensorInfo &info = view->info;
  uint64_t expected = dtypeSize(info.dtype);
  for (int64_t dim : info.shape) {
    expected *= uint64_t(dim);
  }
  if (info.bytes != expected || (expected && !view->data)) {
    error = "output '" + name + "': the runtime returned " +
            std::to_string(info.bytes) + " bytes for " + dtypeName(info.dtype) +
            " " + formatShape(info.shape);
    return false;
  }
  array = toArray(*view);
  return true;
}

/// Writes each destination's .npy, or with none prints a summary of every
/// output.
bool emitOutputs(Session &session, const Destinations &destinations,
                 const std::vector<TensorInfo> &outputInfos,
                 std::string &error) {
  for (const auto &[name, path] : destinations.list) {
    NpyArray array;
    if (!fetchOutput(session, name, array, error) ||
        !writeNpy(path, array, error)) {
      return false;
    }
  }
  if (destinations.list.empty()) {
    for (const TensorInfo &info : outputInfos) {
      NpyArray array;
      if (!fetchOutput(session, info.name, array, error)) {
        return false;
      }
      printSummary(info.name, array, info.dtype);
    }
  }
  return true;
}

int runMain(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  Options opts;
  std::string error;
  if (!parseArgs(argc, argv, opts, error)) {
    return fail(error);
  }

  Expected<Plan> plan = Plan::load(opts.plan);
  if (!plan) {
    const std::string &message = plan.error().message();
    return fail(message.find(opts.plan) == std::string::npos
                    ? opts.plan + ": " + message
                    : message);
  }
  if (opts.list) {
    printList(*plan);
    return 0;
  }
  EntryTensors tensors;
  std::vector<std::vector<uint8_t>> inputBytes;
  Destinations destinations;
  if (!chooseEntry(*plan, opts, tensors, error) ||
      !readInputs(opts, tensors.inputs, inputBytes, error) ||
      !chooseDestinations(opts, tensors.outputs, destinations, error)) {
    return fail(error);
  }

  Expected<Session> session = Session::create(*plan, opts.threads);
  if (!session) {
    return fail(session.error().message());
  }
  if (!runRepeatedly(*session, opts, tensors, inputBytes, error) ||
      !emitOutputs(*session, destinations, tensors.outputs, error)) {
    return fail(error);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // A closed pipe (tailor-run ... | head) is a write error, not a signal.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return runMain(argc, argv);
  } catch (const std::bad_alloc &) {
    return fail("out of memory");
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}
