//===- TrainCommand.cpp - `tailor train` ----------------------------------===//
//
// tailor train PLAN.tplan --data PATH [--eval-data PATH]
//     [--data-dtype uint16|uint32] [--max-steps N] --output-dir DIR
//     [--resume [PATH]] [--init-adapter DIR] [--threads N] [--save-steps N]
//     [--elastic]
//
// Runs a compiled training plan through the C API's tailor_trainer
// (runtime/train/Trainer.h does the work behind it):
// per-step metrics to the terminal and DIR/metrics.jsonl, checkpoints in
// DIR/checkpoint-N, the final adapter (or model) in DIR. Ctrl-C finishes the
// step, writes a checkpoint and exits 0; `--resume` continues from it.
//
// A plan compiled for N ranks runs as `mpirun -np N tailor train ...` or
// `torchrun --nproc-per-node N --no-python tailor train ...` (a GPU a rank
// for CUDA plans): rank 0
// prints and writes, every rank's error says which rank it is ("rank 1:
// ..."), and every rank exits 1 on a launch that does not match the plan
// -- unless --elastic, which compiles the plan again for the launch
// (ElasticPlan.h) and resumes from the latest checkpoint.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"
#include "tools/tailor/ElasticPlan.h"

#include "runtime/include/tailor/runtime.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <sys/stat.h>
#include <vector>

namespace tailor {

/// `--resume` takes an optional value. llvm::cl only reads an optional value
/// written as `--resume=PATH`, so `--resume PATH` is rewritten to that unless
/// PATH is an option or the plan (a .tplan name or an existing file: a
/// checkpoint is a directory).
static std::vector<std::string> joinResumeValue(int argc, const char **argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i + 1 < args.size(); ++i) {
    if (args[i] != "--resume" && args[i] != "-resume") {
      continue;
    }
    struct stat info;
    const std::string &next = args[i + 1];
    bool isFile = ::stat(next.c_str(), &info) == 0 && !S_ISDIR(info.st_mode);
    bool isPlan = llvm::StringRef(next).ends_with(".tplan");
    if (!next.empty() && next[0] != '-' && !isFile && !isPlan) {
      args[i] = "--resume=" + next;
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    }
  }
  return args;
}

int runTrain(int argc, const char **argv) {
  namespace cl = llvm::cl;
  cl::ResetCommandLineParser();
  cl::OptionCategory category("tailor train options");
  cl::opt<std::string> planPath(cl::Positional, cl::desc("<plan.tplan>"),
                                cl::Required, cl::cat(category));
  cl::opt<std::string> data(
      "data",
      cl::desc("training data: a nanoGPT .bin or llm.c shard, a directory or "
               "glob of them, a .jsonl file (input_ids and labels, or prompt "
               "and completion), or 'dummy'"),
      cl::value_desc("path"), cl::Required, cl::cat(category));
  cl::opt<std::string> evalData(
      "eval-data",
      cl::desc("validation data, read like --data: its loss is reported "
               "every eval_steps steps and at the end (instead of the "
               "plan's val_set_size)"),
      cl::value_desc("path"), cl::cat(category));
  cl::opt<std::string> dataDType(
      "data-dtype", cl::desc("token type of raw .bin files: uint16 or uint32"),
      cl::value_desc("type"), cl::init("uint16"), cl::cat(category));
  cl::opt<int64_t> maxSteps(
      "max-steps",
      cl::desc("optimizer steps to train to (default: the plan's)"),
      cl::value_desc("n"), cl::init(0), cl::cat(category));
  cl::opt<std::string> outputDir(
      "output-dir",
      cl::desc("where checkpoints, metrics.jsonl and the final adapter go"),
      cl::value_desc("dir"), cl::Required, cl::cat(category));
  cl::opt<std::string> resume(
      "resume",
      cl::desc("continue from a checkpoint: the latest in --output-dir, or "
               "PATH"),
      cl::value_desc("path"), cl::ValueOptional, cl::cat(category));
  cl::opt<std::string> initAdapter(
      "init-adapter",
      cl::desc("start the LoRA weights from a PEFT adapter directory"),
      cl::value_desc("dir"), cl::cat(category));
  cl::opt<int> threads("threads",
                       cl::desc("CPU worker threads (default: all cores)"),
                       cl::value_desc("n"), cl::init(0), cl::cat(category));
  cl::opt<int64_t> saveSteps(
      "save-steps",
      cl::desc("checkpoint every N steps (default: the plan's; 0: only at "
               "the end)"),
      cl::value_desc("n"), cl::init(-1), cl::cat(category));
  cl::opt<std::string> trace(
      "trace",
      cl::desc("write the measured timeline of the first steps "
               "(Chrome/Perfetto trace JSON, as tailor inspect --trace "
               "writes the predicted one) to this file"),
      cl::value_desc("file.json"), cl::cat(category));
  cl::opt<int64_t> traceSteps("trace-steps",
                              cl::desc("steps --trace records (default 1)"),
                              cl::value_desc("n"), cl::init(1),
                              cl::cat(category));
  cl::opt<bool> elastic(
      "elastic",
      cl::desc("on a launch of another world size than the plan's, compile "
               "the plan again for it (keeping the global batch) and resume "
               "from the latest checkpoint in --output-dir"),
      cl::cat(category));
  cl::HideUnrelatedOptions(category);

  std::vector<std::string> args = joinResumeValue(argc, argv);
  std::vector<const char *> argPointers;
  for (const std::string &arg : args) {
    argPointers.push_back(arg.c_str());
  }
  if (!cl::ParseCommandLineOptions(
          static_cast<int>(argPointers.size()), argPointers.data(),
          "tailor train: run a compiled training plan\n", &llvm::errs())) {
    return 1;
  }
  if (dataDType != "uint16" && dataDType != "uint32") {
    llvm::errs() << "tailor train: error: --data-dtype must be uint16 or "
                    "uint32, not '"
                 << dataDType << "'\n";
    return 1;
  }
  if (traceSteps < 1) {
    llvm::errs() << "tailor train: error: --trace-steps must be at least 1\n";
    return 1;
  }
  if (maxSteps < 0 || threads < 0 || saveSteps < -1) {
    llvm::errs() << "tailor train: error: --max-steps, --threads and "
                    "--save-steps must not be negative\n";
    return 1;
  }

  std::string runPlan = planPath;
  if (elastic) {
    llvm::Expected<std::string> launched = planForLaunch(planPath, outputDir);
    if (!launched) {
      llvm::errs() << "tailor train: error: "
                   << llvm::toString(launched.takeError()) << "\n";
      return 1;
    }
    runPlan = *launched;
  }

  // A client of the C API (runtime/include/tailor/runtime.h), as any
  // application embedding the trainer is.
  tailor_trainer_options options;
  tailor_trainer_options_init(&options);
  options.data_path = data.c_str();
  options.eval_data_path = evalData.empty() ? nullptr : evalData.c_str();
  options.data_dtype = dataDType.c_str();
  options.max_steps = maxSteps;
  options.output_dir = outputDir.c_str();
  std::string resumeFrom;
  if (resume.getNumOccurrences() > 0 || elastic) {
    // --elastic continues from what the last membership committed.
    resumeFrom = resume.empty() ? "latest" : resume.getValue();
    options.resume = resumeFrom.c_str();
  }
  options.init_adapter = initAdapter.empty() ? nullptr : initAdapter.c_str();
  options.num_threads = threads;
  options.save_steps = saveSteps;
  options.trace_path = trace.empty() ? nullptr : trace.c_str();
  options.trace_steps = traceSteps;
  options.print_progress = 1;
  options.handle_signals = 1;
  // llvm::outs() buffers separately from stdio; flush it so nothing the
  // trainer prints overtakes it.
  llvm::outs().flush();
  tailor_trainer *trainer = nullptr;
  tailor_status status =
      tailor_trainer_create_from_file(runPlan.c_str(), &options, &trainer);
  if (status == TAILOR_OK) {
    status = tailor_trainer_run(trainer, nullptr, nullptr);
  }
  if (status != TAILOR_OK) {
    llvm::errs() << "tailor train: error: " << tailor_last_error() << "\n";
  }
  tailor_trainer_free(trainer);
  return status == TAILOR_OK ? 0 : 1;
}

} // namespace tailor
