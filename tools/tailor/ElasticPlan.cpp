//===- ElasticPlan.cpp - a training plan for the world a launch has -------===//

#include "tools/tailor/ElasticPlan.h"

#include "compiler/Hardware.h"
#include "runtime/comm/Communicator.h"
#include "runtime/schema/plan_generated.h"
#include "runtime/train/AtomicFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace tailor {

namespace fb = tailor::plan;
using llvm::createStringError;
using llvm::Expected;
using llvm::StringRef;

Expected<ElasticRecord> readElasticRecord(const std::string &planPath) {
  auto file = llvm::MemoryBuffer::getFile(planPath, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file) {
    return createStringError(planPath + ": " + file.getError().message());
  }
  const auto *bytes =
      reinterpret_cast<const uint8_t *>((*file)->getBufferStart());
  flatbuffers::Verifier verifier(bytes, (*file)->getBufferSize());
  if (!fb::VerifySizePrefixedPlanBuffer(verifier)) {
    return createStringError(planPath + ": not a tailor plan (or a corrupt "
                                        "one)");
  }
  const fb::Plan *p = fb::GetSizePrefixedPlan(bytes);
  const fb::Training *training = p->training();
  if (!training) {
    return createStringError(planPath + ": not a training plan");
  }
  ElasticRecord record;
  record.stages = p->stages() ? static_cast<int>(p->stages()->size()) : 0;
  record.worldSize = p->world_size();
  record.microBatchSize = training->micro_batch_size();
  record.accumulation = training->gradient_accumulation_steps();
  if (training->compile_arguments()) {
    for (const flatbuffers::String *arg : *training->compile_arguments()) {
      record.compileArguments.push_back(arg->str());
    }
  }
  if (training->compile_directory()) {
    record.compileDirectory = training->compile_directory()->str();
  }
  return record;
}

Expected<std::string> resizedHardware(const std::string &spec, int world) {
  if (llvm::sys::fs::exists(spec)) {
    return createStringError(
        "the plan was compiled for the hardware file '" + spec +
        "', a fixed cluster; --elastic resizes built-in targets (4xcpu, "
        "2x2xcpu, 8xh100): compile for the new world by hand");
  }
  Expected<HardwareSpec> hardware = resolveHardware(spec);
  if (!hardware) {
    return hardware.takeError();
  }
  // The name without its counts: "2x2xcpu" -> "cpu".
  StringRef name(spec);
  for (int counts = 0; counts < 2; ++counts) {
    auto [count, rest] = name.split('x');
    if (rest.empty() || count.empty() ||
        !llvm::all_of(count, llvm::isDigit)) {
      break;
    }
    name = rest;
  }
  if (hardware->nodes <= 1) {
    return world == 1 ? name.str() : std::to_string(world) + "x" + name.str();
  }
  if (world % hardware->gpus != 0) {
    return createStringError(
        "the plan's cluster " + spec + " has nodes of " +
        std::to_string(hardware->gpus) + " ranks; " + std::to_string(world) +
        " ranks do not make whole nodes of that size");
  }
  return std::to_string(world / hardware->gpus) + "x" +
         std::to_string(hardware->gpus) + "x" + name.str();
}

namespace {

/// Whether `arg` is the option `name` ("-o", "--hardware", in either
/// spelling), and whether its value is attached ("--hardware=2xcpu").
bool isOption(StringRef arg, StringRef name, bool &attached) {
  if (!arg.consume_front("-")) {
    return false;
  }
  arg.consume_front("-");
  attached = arg.starts_with((name + "=").str());
  return arg == name || attached;
}

} // namespace

std::vector<std::string>
dropOptions(const std::vector<std::string> &args,
            llvm::ArrayRef<llvm::StringRef> names,
            std::map<std::string, std::string> *values) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    bool attached = false;
    const StringRef *name = llvm::find_if(
        names, [&](StringRef n) { return isOption(args[i], n, attached); });
    if (name == names.end()) {
      kept.push_back(args[i]);
      continue;
    }
    std::string value = attached ? StringRef(args[i]).split('=').second.str()
                        : i + 1 < args.size() ? args[i + 1]
                                              : "";
    if (values) {
      (*values)[name->str()] = value;
    }
    i += attached ? 0 : 1;
  }
  return kept;
}

Expected<std::vector<std::string>>
elasticCompileArguments(const ElasticRecord &record, int world,
                        const std::string &output, int64_t &accumulation) {
  if (record.compileArguments.empty()) {
    return createStringError(
        "the plan records no compile command (plans before format 1.11, and "
        "those tailor explore writes, do not): compile it again with tailor "
        "compile");
  }
  std::vector<std::string> overrides;
  if (record.stages > 0 && record.worldSize != record.stages) {
    return createStringError(
        "elastic training of a layer split with data-parallel replicas (" +
        std::to_string(record.stages) + " stages on " +
        std::to_string(record.worldSize) + " ranks) is not built yet");
  }
  if (record.stages > 0) {
    // A layer split without replicas has no data parallelism: every
    // micro-batch passes all stages, so the world only changes the stage
    // count.
    accumulation = record.accumulation;
    overrides = {"device_map=none", "pipeline_stages=" + std::to_string(world)};
  } else {
    int64_t perStep = record.accumulation * record.worldSize;
    if (perStep % world != 0) {
      return createStringError(
          "the global batch of " +
          std::to_string(perStep * record.microBatchSize) +
          " sequences (micro batch " + std::to_string(record.microBatchSize) +
          " x accumulation " + std::to_string(record.accumulation) + " x " +
          std::to_string(record.worldSize) + " ranks) does not split over " +
          std::to_string(world) + " ranks");
    }
    accumulation = perStep / world;
    overrides = {"gradient_accumulation_steps=" + std::to_string(accumulation)};
  }
  std::map<std::string, std::string> values;
  std::vector<std::string> args =
      dropOptions(record.compileArguments, {"o", "hardware"}, &values);
  Expected<std::string> resized = resizedHardware(
      values.count("hardware") ? values["hardware"] : "cpu", world);
  if (!resized) {
    return resized.takeError();
  }
  args.push_back("--hardware");
  args.push_back(*resized);
  // Positional overrides apply in order: these come last and win.
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.push_back("-o");
  args.push_back(output);
  return args;
}

namespace {

/// Runs `tailor compile ARGS` in `directory` (this executable), its output
/// to `log`; "" or why it failed.
std::string runCompile(const std::vector<std::string> &args,
                       const std::string &directory, const std::string &log) {
  std::string self = llvm::sys::fs::getMainExecutable(
      nullptr, reinterpret_cast<void *>(&readElasticRecord));
  if (self.empty()) {
    return "cannot find the tailor executable to compile with";
  }
  std::vector<StringRef> argv = {self, "compile"};
  argv.insert(argv.end(), args.begin(), args.end());
  llvm::SmallString<256> before;
  if (llvm::sys::fs::current_path(before)) {
    return "cannot read the current directory";
  }
  // The recorded arguments are relative to where compile ran.
  if (std::error_code ec = llvm::sys::fs::set_current_path(directory)) {
    return "cannot enter " + directory +
           " (where the plan was compiled): " + ec.message();
  }
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                          StringRef(log)};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(self, argv, std::nullopt, redirects,
                                         0, 0, &message);
  (void)llvm::sys::fs::set_current_path(before);
  if (status != 0) {
    return "tailor compile failed" +
           (message.empty() ? std::string() : " (" + message + ")") +
           "; its output is in " + log;
  }
  return "";
}

} // namespace

Expected<std::string> planForLaunch(const std::string &planPath,
                                    const std::string &outputDir) {
  runtime::comm::LaunchInfo launch;
  if (std::string problem = runtime::comm::detectLaunch(launch); !problem.empty()) {
    return createStringError(problem);
  }
  Expected<ElasticRecord> record = readElasticRecord(planPath);
  if (!record) {
    return record.takeError();
  }
  if (record->worldSize == launch.worldSize) {
    return planPath;
  }
  auto fail = [&](const llvm::Twine &why) {
    std::string rank = launch.worldSize > 1
                           ? "rank " + std::to_string(launch.rank) + ": "
                           : "";
    return createStringError(rank + planPath + " was compiled for " +
                             std::to_string(record->worldSize) +
                             " ranks and launched on " +
                             std::to_string(launch.worldSize) +
                             "; --elastic cannot compile it again: " + why);
  };
  llvm::SmallString<256> dir(outputDir);
  if (std::error_code ec = llvm::sys::fs::make_absolute(dir)) {
    return fail(outputDir + ": " + ec.message());
  }
  llvm::sys::path::append(dir, "elastic",
                          "world-" + std::to_string(launch.worldSize));
  std::string error;
  if (!train::makeDirectories(dir.str().str(), error)) {
    return fail(error);
  }
  std::string rank = "rank-" + std::to_string(launch.rank);
  std::string output = (dir + "/" + rank + ".tplan").str();
  int64_t accumulation = 0;
  Expected<std::vector<std::string>> args =
      elasticCompileArguments(*record, launch.worldSize, output, accumulation);
  if (!args) {
    return fail(llvm::toString(args.takeError()));
  }
  if (std::string problem = runCompile(*args, record->compileDirectory,
                                       (dir + "/" + rank + ".log").str());
      !problem.empty()) {
    return fail(problem);
  }
  if (launch.rank == 0) {
    llvm::errs() << "tailor train: " << planPath << " is for "
                 << record->worldSize << " ranks, launched on "
                 << launch.worldSize << ": compiled it again for "
                 << launch.worldSize;
    if (record->stages > 0) {
      llvm::errs() << " (a layer split of " << launch.worldSize
                   << " stages)";
    } else {
      llvm::errs() << " (gradient accumulation " << accumulation
                   << " keeps the global batch of "
                   << accumulation * launch.worldSize * record->microBatchSize
                   << " sequences)";
    }
    llvm::errs() << ": " << output << "\n";
  }
  return output;
}

} // namespace tailor
