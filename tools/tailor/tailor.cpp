//===- tailor.cpp - the tailor command-line driver ------------------------===//
//
// `tailor <command> [options]`. Each command is a function taking its own
// arguments; only commands that work are listed in --help. Exit codes: 0 on
// success, 1 on a user error (message on stderr).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/BlasCore.h"
#include "runtime/include/tailor/runtime.h"
#include "tools/tailor/Commands.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char *kUsage = R"(tailor: an ahead-of-time compiler that makes LLM fine-tuning fit your GPUs

USAGE: tailor <command> [options]
       tailor --help | --version

COMMANDS:
  compile     compile an ONNX model to a plan (.tplan), or to IR with --compile-to
  inspect     show what a plan holds: memory by category, inputs, kernels
  train       run a training plan on tokenized data; checkpoints, resume
  generate    greedy decoding with a generation plan (compile --task generate)
  quantize    GPTQ-quantize a model's linear weights on calibration data
  calibrate   time a plan on this machine; write the cost model's figures
  explore     search weights x adapter x recompute x sharding x offload x batch: what fits, what is fastest
  devices     list the GPUs the runtime can use (name, SM, memory)

Run 'tailor <command> --help' for a command's options.
Related tools: tailor-opt (run passes on IR), tailor-translate.
)";

/// `tailor devices [--count]`: the CPU's vector units and the GEMM kernels
/// chosen for them, then the GPUs the runtime sees, or why none.
int runDevices(int argc, const char **argv) {
  llvm::cl::ResetCommandLineParser();
  llvm::cl::opt<bool> countOnly(
      "count", llvm::cl::desc("print only the number of usable GPUs"));
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv, "tailor devices: list the GPUs the runtime can use\n",
          &llvm::errs())) {
    return 1;
  }
  int count = 0;
  tailor_status status = tailor_cuda_device_count(&count);
  if (countOnly) {
    llvm::outs() << count << "\n";
    return 0;
  }
  const tailor::runtime::BlasCoreReport &blas =
      tailor::runtime::ensureBlasCoreMatchesCpu();
  llvm::outs() << "cpu: " << blas.cpuVectors << ", "
               << std::thread::hardware_concurrency() << " threads; GEMMs: "
               << blas.core << " kernels of " << blas.library << " ("
               << blas.reason << ")\n";
  if (status != TAILOR_OK) {
    llvm::outs() << "no usable GPU: " << tailor_last_error() << "\n";
    return 0;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    tailor_device_info info;
    if (tailor_cuda_device_info(ordinal, &info) != TAILOR_OK) {
      llvm::errs() << "tailor devices: " << tailor_last_error() << "\n";
      return 1;
    }
    llvm::outs() << llvm::format(
        "gpu %d: %s, sm_%d%d, %d SMs, %.1f GiB\n", info.ordinal, info.name,
        info.sm_major, info.sm_minor, info.multiprocessors,
        static_cast<double>(info.total_memory_bytes) / (1ull << 30));
  }
  return 0;
}

void printVersion() {
  llvm::outs() << "tailor " << TAILOR_VERSION_STRING << "\n"
               << "  MLIR/LLVM " << TAILOR_LLVM_VERSION_STRING << "\n"
               << "  runtime " << tailor_version() << ", CUDA backend "
               << (tailor_built_with_cuda() ? "built" : "not built") << "\n";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // OpenBLAS's kernels, fixed while this is the only thread that reads the
  // environment (runtime/cpu/BlasCore.h).
  tailor::runtime::ensureBlasCoreMatchesCpu();
  if (argc < 2) {
    llvm::errs() << kUsage;
    return 1;
  }
  llvm::StringRef command = argv[1];
  if (command == "--help" || command == "-help" || command == "-h" ||
      command == "help") {
    llvm::outs() << kUsage;
    return 0;
  }
  if (command == "--version" || command == "-version") {
    printVersion();
    return 0;
  }

  // A command sees "tailor <command>" as its program name, then its options.
  std::string programName = std::string("tailor ") + command.str();
  std::vector<const char *> commandArgs = {programName.c_str()};
  commandArgs.insert(commandArgs.end(), argv + 2, argv + argc);
  int commandArgc = static_cast<int>(commandArgs.size());

  if (command == "compile") {
    return tailor::runCompile(commandArgc, commandArgs.data());
  }
  if (command == "inspect") {
    return tailor::runInspect(commandArgc, commandArgs.data());
  }
  if (command == "generate") {
    return tailor::runGenerate(commandArgc, commandArgs.data());
  }
  if (command == "train") {
    return tailor::runTrain(commandArgc, commandArgs.data());
  }
  if (command == "quantize") {
    return tailor::runQuantize(commandArgc, commandArgs.data());
  }
  if (command == "calibrate") {
    return tailor::runCalibrate(commandArgc, commandArgs.data());
  }
  if (command == "explore") {
    return tailor::runExplore(commandArgc, commandArgs.data());
  }
  if (command == "devices") {
    return runDevices(commandArgc, commandArgs.data());
  }
  llvm::errs() << "tailor: unknown command '" << command
               << "' (run 'tailor --help' for the list)\n";
  return 1;
}
