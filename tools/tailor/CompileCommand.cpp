//===- CompileCommand.cpp - `tailor compile` -------------------------------===//
//
// tailor compile MODEL.onnx [--batch N] [--seq N] [--dim NAME=N] [--threads N]
//                [--hardware NAME|FILE] [--recipe R.yaml [key=value ...]]
//                [--compile-to=import|graph|schedule|plan] [--emit=mlir|plan]
//                -o OUT
//
// Imports the model, runs the pipeline up to the requested stage and writes
// the result. The output file is written only when everything succeeded
// (ToolOutputFile removes a partial file), so a failed compile never
// replaces a good output.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"

#include "compiler/Hardware.h"
#include "compiler/PeftAdapter.h"
#include "compiler/Pipelines.h"
#include "compiler/Recipe.h"
#include "passes/graph/Passes.h"
#include "passes/memory/Passes.h"
#include "compiler/PlanWriter.h"
#include "compiler/Registration.h"
#include "frontends/onnx/OnnxImporter.h"
#include "runtime/include/tailor/runtime.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace tailor {

/// `--hardware auto`: GPU 0 as the runtime sees it (its SM and memory).
static llvm::Expected<HardwareSpec> detectHardware() {
  tailor_device_info info;
  if (tailor_cuda_device_info(0, &info) != TAILOR_OK) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--hardware auto found no usable GPU: " +
                                       std::string(tailor_last_error()));
  }
  HardwareSpec hardware;
  hardware.name = info.name;
  hardware.backend = "cuda";
  hardware.sm = info.sm_major * 10 + info.sm_minor;
  hardware.memoryBytes = info.total_memory_bytes;
  return hardware;
}

namespace {

enum class Stage { Import, Graph, Train, Schedule, Plan };
enum class Emit { Default, Mlir, Plan };

/// Prints diagnostics as `tailor compile: error: ...`, naming the ONNX node
/// when the location carries one.
void printDiagnostic(mlir::Diagnostic &diag) {
  llvm::raw_ostream &os = llvm::errs();
  os << "tailor compile: ";
  switch (diag.getSeverity()) {
  case mlir::DiagnosticSeverity::Error: os << "error: "; break;
  case mlir::DiagnosticSeverity::Warning: os << "warning: "; break;
  case mlir::DiagnosticSeverity::Note: os << "note: "; break;
  case mlir::DiagnosticSeverity::Remark: os << "remark: "; break;
  }
  if (auto name = llvm::dyn_cast<mlir::NameLoc>(diag.getLocation())) {
    os << "at node '" << name.getName().getValue() << "': ";
  }
  os << diag.str() << "\n";
  for (mlir::Diagnostic &note : diag.getNotes()) {
    os << "  note: " << note.str() << "\n";
  }
}

/// A model exported with a fixed [batch, seq] token input decides the batch
/// shape the recipe left to its defaults (the importer has already refused
/// a shape the recipe asked for explicitly and the model does not have).
void adoptFixedTokenShape(mlir::ModuleOp module, TrainingRecipe &recipe) {
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward) {
    return;
  }
  for (mlir::Type type : forward.getFunctionType().getInputs()) {
    auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
    if (tensor && tensor.getRank() == 2 &&
        tensor.getElementType().isSignlessInteger() &&
        tensor.getElementType().getIntOrFloatBitWidth() >= 32) {
      recipe.microBatchSize = tensor.getDimSize(0);
      recipe.sequenceLen = tensor.getDimSize(1);
      return;
    }
  }
}

} // namespace

int runCompile(int argc, const char **argv) {
  namespace cl = llvm::cl;
  cl::ResetCommandLineParser();
  cl::OptionCategory category("tailor compile options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<model.onnx>"),
                             cl::Required, cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("output file ('-' for stdout)"),
                              cl::value_desc("file"), cl::init("-"),
                              cl::cat(category));
  cl::opt<int64_t> batch("batch", cl::desc("bind symbolic batch dims to N"),
                         cl::value_desc("N"), cl::init(0), cl::cat(category));
  cl::opt<int64_t> seq("seq", cl::desc("bind symbolic sequence dims to N"),
                       cl::value_desc("N"), cl::init(0), cl::cat(category));
  cl::list<std::string> dims(
      "dim", cl::desc("bind the symbolic dim NAME to N (repeatable)"),
      cl::value_desc("NAME=N"), cl::cat(category));
  cl::opt<Stage> compileTo(
      "compile-to", cl::desc("stop after this stage"), cl::init(Stage::Plan),
      cl::values(clEnumValN(Stage::Import, "import",
                            "the literal ONNX graph in tg, static shapes"),
                 clEnumValN(Stage::Graph, "graph",
                            "raised: linear, rms_norm, rope, attention, ..."),
                 clEnumValN(Stage::Train, "train",
                            "the training step: adapters, loss, backward, "
                            "optimizer (needs --recipe)"),
                 clEnumValN(Stage::Schedule, "schedule",
                            "the per-rank sched.program (arenas, launches)"),
                 clEnumValN(Stage::Plan, "plan",
                            "the plan file the runtime runs (the default)")),
      cl::cat(category));
  cl::opt<Emit> emit(
      "emit",
      cl::desc("output format (default: plan for --compile-to=plan, mlir "
               "otherwise)"),
      cl::init(Emit::Default),
      cl::values(clEnumValN(Emit::Mlir, "mlir", "textual MLIR"),
                 clEnumValN(Emit::Plan, "plan", "a .tplan file")),
      cl::cat(category));
  cl::opt<std::string> recipePath(
      "recipe", cl::desc("training recipe (YAML): compile a training plan"),
      cl::value_desc("file"), cl::cat(category));
  cl::list<std::string> overrides(
      cl::Positional, cl::ZeroOrMore,
      cl::desc("[key=value ...] recipe overrides"), cl::cat(category));
  cl::opt<std::string> adapterDir(
      "adapter",
      cl::desc("apply a trained PEFT LoRA adapter (a directory with "
               "adapter_config.json and adapter_model.safetensors)"),
      cl::value_desc("dir"), cl::cat(category));
  cl::opt<int64_t> threads(
      "threads",
      cl::desc("CPU workers the plan sizes per-worker workspaces for"),
      cl::value_desc("N"), cl::init(8), cl::cat(category));
  cl::opt<std::string> hardwareName(
      "hardware",
      cl::desc("the target: cpu (default), h100, h200, a100-80gb, a100-40gb, "
               "rtx4090, rtx3090, t4, a hardware YAML file, or auto (GPU 0 "
               "of this machine)"),
      cl::value_desc("name|file"), cl::init("cpu"), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(
          argc, argv, "tailor compile: compile an ONNX model\n", &llvm::errs())) {
    return 1;
  }

  if (threads < 1 || threads > 1024) {
    llvm::errs() << "tailor compile: error: --threads must be in [1, 1024], "
                    "got "
                 << threads << "\n";
    return 1;
  }
  Emit format = emit;
  if (format == Emit::Default) {
    format = compileTo == Stage::Plan ? Emit::Plan : Emit::Mlir;
  }
  if (format == Emit::Plan && compileTo != Stage::Plan) {
    llvm::errs() << "tailor compile: error: --emit=plan needs "
                    "--compile-to=plan\n";
    return 1;
  }

  bool training = !recipePath.empty() || !overrides.empty();
  if (training && !adapterDir.empty()) {
    llvm::errs() << "tailor compile: error: --adapter compiles an inference "
                    "plan; to continue training from an adapter, compile with "
                    "--recipe and pass it to `tailor train --init-adapter`\n";
    return 1;
  }
  if (compileTo == Stage::Train && !training) {
    llvm::errs() << "tailor compile: error: --compile-to=train needs --recipe\n";
    return 1;
  }
  auto hardware = hardwareName == "auto" ? detectHardware()
                                         : resolveHardware(hardwareName);
  if (!hardware) {
    llvm::errs() << "tailor compile: error: "
                 << llvm::toString(hardware.takeError()) << "\n";
    return 1;
  }
  if (hardware->gpus != 1) {
    llvm::errs() << "tailor compile: error: --hardware " << hardwareName
                 << " has " << hardware->gpus
                 << " GPUs; plans are single-rank until sharding lands "
                    "(use one GPU)\n";
    return 1;
  }
  TrainingRecipe recipe;
  if (training) {
    auto loaded = loadRecipe(recipePath, overrides);
    if (!loaded) {
      llvm::errs() << "tailor compile: error: "
                   << llvm::toString(loaded.takeError()) << "\n";
      return 1;
    }
    recipe = std::move(*loaded);
  }
  std::optional<PeftAdapterConfig> adapter;
  if (!adapterDir.empty()) {
    auto config = readPeftAdapterConfig(adapterDir);
    if (!config) {
      llvm::errs() << "tailor compile: error: "
                   << llvm::toString(config.takeError()) << "\n";
      return 1;
    }
    adapter = std::move(*config);
  }

  onnx_import::ImportOptions options;
  if (training) {
    // The recipe's batch shape, unless the command line says otherwise.
    options.batch = recipe.microBatchSize;
    options.seq = recipe.sequenceLen;
    if (recipe.givenKeys.count("micro_batch_size")) {
      options.batchSource = "the recipe's micro_batch_size";
    }
    if (recipe.givenKeys.count("sequence_len")) {
      options.seqSource = "the recipe's sequence_len";
    }
  }
  if (batch.getNumOccurrences()) {
    if (batch <= 0) {
      llvm::errs() << "tailor compile: error: --batch must be positive, got "
                   << batch << "\n";
      return 1;
    }
    options.batch = batch;
    options.batchSource = "--batch";
    recipe.microBatchSize = batch;
    recipe.givenKeys.insert("micro_batch_size");
  }
  if (seq.getNumOccurrences()) {
    if (seq <= 0) {
      llvm::errs() << "tailor compile: error: --seq must be positive, got "
                   << seq << "\n";
      return 1;
    }
    options.seq = seq;
    options.seqSource = "--seq";
    recipe.sequenceLen = seq;
    recipe.givenKeys.insert("sequence_len");
  }
  for (const std::string &binding : dims) {
    auto [name, value] = llvm::StringRef(binding).split('=');
    int64_t n = 0;
    if (name.empty() || value.getAsInteger(10, n) || n <= 0) {
      llvm::errs() << "tailor compile: error: --dim expects NAME=N with a "
                      "positive N, got '"
                   << binding << "'\n";
      return 1;
    }
    options.dims[name] = n;
  }

  mlir::DialectRegistry registry;
  registerTailorDialects(registry);
  mlir::MLIRContext context(registry);
  context.disableMultithreading();
  // Errors name the op; a dump of the whole module would bury them.
  context.printOpOnDiagnostic(false);
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    printDiagnostic(diag);
    return mlir::success();
  });

  auto module = onnx_import::importOnnxFile(context, input, options);
  if (failed(module)) {
    return 1;
  }
  if (training) {
    adoptFixedTokenShape(**module, recipe);
    // The recipe goes into the plan; the vocabulary is the logits' width.
    int64_t vocab = 0;
    if (auto forward = (*module)->lookupSymbol<mlir::func::FuncOp>("forward")) {
      auto results = forward.getFunctionType().getResults();
      if (!results.empty()) {
        if (auto logits = llvm::dyn_cast<mlir::RankedTensorType>(results[0]);
            logits && logits.getRank() == 3) {
          vocab = logits.getDimSize(2);
        }
      }
    }
    if (recipe.baseModel.empty()) {
      recipe.baseModel = llvm::sys::path::filename(input).str();
    }
    if (llvm::Error error = attachRecipe(**module, recipe, vocab)) {
      llvm::errs() << "tailor compile: error: " << input << ": "
                   << llvm::toString(std::move(error)) << "\n";
      return 1;
    }
  }
  if (adapter && compileTo != Stage::Import) {
    // Graph, then the adapter's layers with weights bound from its file.
    mlir::PassManager pm(&context);
    buildGraphPipeline(pm);
    graph::InsertLoraPassOptions lora;
    lora.rank = adapter->r;
    lora.alpha = adapter->alpha;
    lora.rslora = adapter->useRslora;
    lora.layers = adapter->layers;
    std::string targets;
    for (const std::string &name : adapter->targetModules) {
      targets += (targets.empty() ? "" : ",") + name;
    }
    lora.targets = targets;
    pm.addPass(graph::createInsertLoraPass(lora));
    if (failed(pm.run(**module)) ||
        failed(bindPeftAdapterWeights(**module, adapterDir))) {
      llvm::errs() << "tailor compile: error: cannot apply the adapter in '"
                   << adapterDir << "'\n";
      return 1;
    }
  }
  if (compileTo != Stage::Import) {
    mlir::PassManager pm(&context);
    const char *what = "graph";
    ScheduleOptions scheduleOptions =
        scheduleOptionsFor(*hardware, recipe.mixedPrecision, threads);
    if (training) {
      what = "training";
      if (compileTo == Stage::Graph) {
        buildGraphPipeline(pm, recipe.tieWordEmbeddings);
      } else if (compileTo == Stage::Train) {
        buildTrainingPipeline(pm, recipe, scheduleOptions, /*schedule=*/false);
      } else {
        buildTrainingPipeline(pm, recipe, scheduleOptions, /*schedule=*/true);
      }
    } else if (adapter) {
      what = "schedule";
      if (compileTo != Stage::Graph) {
        buildLowerToSchedule(pm, scheduleOptions);
      }
    } else if (compileTo == Stage::Graph) {
      buildGraphPipeline(pm);
    } else {
      buildSchedulePipeline(pm, scheduleOptions);
      what = "schedule";
    }
    if (failed(pm.run(**module))) {
      llvm::errs() << "tailor compile: error: the " << what
                   << " pipeline failed on '" << input << "'\n";
      return 1;
    }
  }

  std::vector<uint8_t> planBytes;
  if (format == Emit::Plan) {
    llvm::SmallString<256> directory(
        output == "-" ? llvm::StringRef(".")
                      : llvm::sys::path::parent_path(output));
    auto bytes = serializePlan(**module, directory);
    if (failed(bytes)) {
      return 1;
    }
    planBytes = std::move(*bytes);
  }

  std::error_code ec;
  llvm::ToolOutputFile out(output, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "tailor compile: error: cannot write '" << output
                 << "': " << ec.message() << "\n";
    return 1;
  }
  if (format == Emit::Plan) {
    out.os().write(reinterpret_cast<const char *>(planBytes.data()),
                   planBytes.size());
  } else {
    (*module)->print(out.os());
    out.os() << "\n";
  }
  out.os().flush();
  if (out.os().has_error()) {
    llvm::errs() << "tailor compile: error: writing '" << output
                 << "' failed: " << out.os().error().message() << "\n";
    out.os().clear_error();
    return 1;
  }
  out.keep();
  return 0;
}

} // namespace tailor
