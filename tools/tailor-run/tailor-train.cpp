//===- tailor-train.cpp - run a compiled training plan, runtime only ------===//
//
// tailor-train PLAN.tplan --data PATH [--eval-data PATH]
//     [--data-dtype uint16|uint32] [--max-steps N] --output-dir DIR
//     [--resume [PATH]] [--init-adapter DIR] [--threads N] [--save-steps N]
//
// The same command as `tailor train` (tools/tailor/TrainCommand.cpp) for
// machines that have the runtime but not the compiler: a client of the C
// API's trainer (tailor_trainer_*) in libtailor_runtime, no LLVM, so argv
// is parsed by hand. Plans are compiled elsewhere and carried here.
//
//===----------------------------------------------------------------------===//

#include "runtime/include/tailor/runtime.h"
#include "runtime/train/Trainer.h" // TrainOptions: what the flags set

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include <sys/stat.h>

namespace {

constexpr const char *kUsage = R"(usage: tailor-train PLAN.tplan --data PATH --output-dir DIR [options]

Runs a compiled training plan (what `tailor train` does, without the
compiler): per-step metrics to the terminal and DIR/metrics.jsonl,
checkpoints in DIR/checkpoint-N, the final adapter (or model) in DIR.
Ctrl-C finishes the step, writes a checkpoint and exits 0.

options:
  --data PATH           training data: a nanoGPT .bin or llm.c shard, a
                        directory or glob of them, a .jsonl file (input_ids
                        and labels, or prompt and completion), or 'dummy'
                        (required)
  --eval-data PATH      validation data, read like --data: its loss is
                        reported every eval_steps steps and at the end
                        (instead of the plan's val_set_size)
  --data-dtype TYPE     token type of raw .bin files: uint16 (default) or uint32
  --max-steps N         optimizer steps to train to (default: the plan's)
  --output-dir DIR      where checkpoints, metrics.jsonl and the final adapter
                        go (required)
  --resume [PATH]       continue from a checkpoint: the latest in
                        --output-dir, or PATH
  --init-adapter DIR    start the LoRA weights from a PEFT adapter directory
  --threads N           CPU worker threads (default: all cores)
  --save-steps N        checkpoint every N steps (default: the plan's; 0:
                        only at the end)
  -h, --help            print this help
)";

int fail(const std::string &message) {
  std::fprintf(stderr, "tailor-train: error: %s\n", message.c_str());
  return 1;
}

/// Reads a non-negative integer option value.
bool parseCount(const std::string &flag, const std::string &text,
                int64_t max, int64_t &out, std::string &error) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || value < 0 || value > max) {
    error = flag + " expects a non-negative integer, got '" + text + "'";
    return false;
  }
  out = value;
  return true;
}

/// Whether the word after a bare `--resume` is its value: as in `tailor
/// train`, anything but an option or the plan (a .tplan name or an existing
/// file; a checkpoint is a directory).
bool isResumeValue(const std::string &next) {
  if (next.empty() || next[0] == '-') {
    return false;
  }
  struct stat info;
  bool isFile = ::stat(next.c_str(), &info) == 0 && !S_ISDIR(info.st_mode);
  bool isPlan = next.size() >= 6 && next.compare(next.size() - 6, 6, ".tplan") == 0;
  return !isFile && !isPlan;
}

bool parseArgs(int argc, char **argv, tailor::train::TrainOptions &options,
               std::string &error) {
  bool haveData = false, haveOutput = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      if (!options.planPath.empty()) {
        error = "unexpected argument '" + arg + "' (one plan file is expected)";
        return false;
      }
      options.planPath = arg;
      continue;
    }
    // `--flag VALUE` or `--flag=VALUE`; a single dash works too, as with
    // llvm::cl in `tailor train`.
    if (arg[1] != '-') {
      arg = "-" + arg;
    }
    size_t eq = arg.find('=');
    std::string flag = arg.substr(0, eq);
    bool inlineValue = eq != std::string::npos;
    std::string value = inlineValue ? arg.substr(eq + 1) : "";
    if (flag == "--resume") {
      if (!inlineValue && i + 1 < argc && isResumeValue(argv[i + 1])) {
        value = argv[++i];
      }
      options.resume = value.empty() ? "latest" : value;
      continue;
    }
    if (flag != "--data" && flag != "--eval-data" && flag != "--data-dtype" &&
        flag != "--max-steps" && flag != "--output-dir" &&
        flag != "--init-adapter" && flag != "--threads" &&
        flag != "--save-steps") {
      error = "unknown option '" + std::string(argv[i]) + "' (see --help)";
      return false;
    }
    if (!inlineValue) {
      if (i + 1 >= argc) {
        error = flag + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    int64_t count = 0;
    if (flag == "--data") {
      options.dataPath = value;
      haveData = true;
    } else if (flag == "--eval-data") {
      options.evalDataPath = value;
    } else if (flag == "--data-dtype") {
      if (value != "uint16" && value != "uint32") {
        error = "--data-dtype must be uint16 or uint32, not '" + value + "'";
        return false;
      }
      options.dataDType = value;
    } else if (flag == "--output-dir") {
      options.outputDir = value;
      haveOutput = true;
    } else if (flag == "--init-adapter") {
      options.initAdapter = value;
    } else if (flag == "--threads") {
      if (!parseCount(flag, value, 1 << 20, count, error)) {
        return false;
      }
      options.threads = static_cast<int>(count);
    } else if (!parseCount(flag, value, std::numeric_limits<int64_t>::max(),
                           count, error)) {
      return false;
    } else if (flag == "--max-steps") {
      options.maxSteps = count;
    } else {
      options.saveSteps = count;
    }
  }
  if (options.planPath.empty()) {
    error = "no plan file given (usage: tailor-train PLAN.tplan --data PATH "
            "--output-dir DIR; see --help)";
  } else if (!haveData || options.dataPath.empty()) {
    error = "--data is required (a token file, a .jsonl file or 'dummy')";
  } else if (!haveOutput || options.outputDir.empty()) {
    error = "--output-dir is required";
  }
  return error.empty();
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h") ||
        !std::strcmp(argv[i], "-help")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  tailor::train::TrainOptions options;
  std::string error;
  if (!parseArgs(argc, argv, options, error)) {
    return fail(error);
  }
  // A client of the C API, as `tailor train` is.
  tailor_trainer_options c;
  tailor_trainer_options_init(&c);
  auto optional = [](const std::string &text) {
    return text.empty() ? nullptr : text.c_str();
  };
  c.data_path = options.dataPath.c_str();
  c.data_dtype = options.dataDType.c_str();
  c.eval_data_path = optional(options.evalDataPath);
  c.output_dir = options.outputDir.c_str();
  c.resume = optional(options.resume);
  c.init_adapter = optional(options.initAdapter);
  c.max_steps = options.maxSteps;
  c.save_steps = options.saveSteps;
  c.num_threads = options.threads;
  c.print_progress = 1;
  c.handle_signals = 1;
  tailor_trainer *trainer = nullptr;
  tailor_status status =
      tailor_trainer_create_from_file(options.planPath.c_str(), &c, &trainer);
  if (status == TAILOR_OK) {
    status = tailor_trainer_run(trainer, nullptr, nullptr);
  }
  if (status != TAILOR_OK) {
    error = tailor_last_error();
  }
  tailor_trainer_free(trainer);
  if (!error.empty()) {
    return fail(error);
  }
  return 0;
}
