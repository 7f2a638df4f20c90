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
#include "tools/tailor/Compile.h"
#include "tools/tailor/ElasticPlan.h"

#include "compiler/Hardware.h"
#include "compiler/PlanPrediction.h"
#include "runtime/schema/plan_generated.h"
#include "compiler/PeftAdapter.h"
#include "compiler/Pipelines.h"
#include "compiler/Recipe.h"
#include "passes/graph/Passes.h"
#include "passes/memory/Passes.h"
#include "compiler/PipelinePrediction.h"
#include "compiler/PlanWriter.h"
#include "compiler/Registration.h"
#include "passes/parallel/ClusterAttr.h"
#include "frontends/onnx/OnnxImporter.h"
#include "runtime/include/tailor/runtime.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

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

void printDiagnostic(mlir::Diagnostic &diag, llvm::raw_ostream &os,
                     llvm::StringRef tool) {
  os << tool << ": ";
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

namespace {

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

namespace {

/// The command line of `tailor compile`. The options register themselves
/// with llvm::cl when constructed, so one instance lives while parsing.
struct CompileFlags {
  llvm::cl::OptionCategory category{"tailor compile options"};
  llvm::cl::opt<std::string> input{llvm::cl::Positional,
                                   llvm::cl::desc("<model.onnx>"),
                                   llvm::cl::Required, llvm::cl::cat(category)};
  llvm::cl::opt<std::string> output{
      "o", llvm::cl::desc("output file ('-' for stdout)"),
      llvm::cl::value_desc("file"), llvm::cl::init("-"),
      llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> batch{
      "batch", llvm::cl::desc("bind symbolic batch dims to N"),
      llvm::cl::value_desc("N"), llvm::cl::init(0), llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> seq{
      "seq", llvm::cl::desc("bind symbolic sequence dims to N"),
      llvm::cl::value_desc("N"), llvm::cl::init(0), llvm::cl::cat(category)};
  llvm::cl::list<std::string> dims{
      "dim", llvm::cl::desc("bind the symbolic dim NAME to N (repeatable)"),
      llvm::cl::value_desc("NAME=N"), llvm::cl::cat(category)};
  llvm::cl::opt<Stage> compileTo{
      "compile-to", llvm::cl::desc("stop after this stage"),
      llvm::cl::init(Stage::Plan),
      llvm::cl::values(
          clEnumValN(Stage::Import, "import",
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
      llvm::cl::cat(category)};
  llvm::cl::opt<Emit> emit{
      "emit",
      llvm::cl::desc("output format (default: plan for --compile-to=plan, "
                     "mlir otherwise)"),
      llvm::cl::init(Emit::Default),
      llvm::cl::values(clEnumValN(Emit::Mlir, "mlir", "textual MLIR"),
                       clEnumValN(Emit::Plan, "plan", "a .tplan file")),
      llvm::cl::cat(category)};
  llvm::cl::opt<std::string> recipePath{
      "recipe",
      llvm::cl::desc("training recipe (YAML): compile a training plan (with "
                     "--task generate: the weight format of its keys)"),
      llvm::cl::value_desc("file"), llvm::cl::cat(category)};
  llvm::cl::list<std::string> overrides{
      llvm::cl::Positional, llvm::cl::ZeroOrMore,
      llvm::cl::desc("[key=value ...] recipe overrides"),
      llvm::cl::cat(category)};
  llvm::cl::opt<std::string> task{
      "task",
      llvm::cl::desc("what the plan does: forward (the default; training "
                     "with --recipe) or generate (a one-token decode step "
                     "with a KV cache, for tailor generate)"),
      llvm::cl::value_desc("forward|generate"), llvm::cl::init("forward"),
      llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> maxSeqLen{
      "max-seq-len",
      llvm::cl::desc("--task generate: tokens the KV cache holds (prompt and "
                     "generated)"),
      llvm::cl::value_desc("N"), llvm::cl::init(0), llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> prefillChunk{
      "prefill-chunk",
      llvm::cl::desc("--task generate: prompt tokens the prefill entry runs "
                     "per call (clamped to --max-seq-len; 1: no prefill "
                     "entry, the prompt runs a token at a time)"),
      llvm::cl::value_desc("C"), llvm::cl::init(64), llvm::cl::cat(category)};
  llvm::cl::opt<std::string> adapterDir{
      "adapter",
      llvm::cl::desc("apply a trained PEFT LoRA adapter (a directory with "
                     "adapter_config.json and adapter_model.safetensors)"),
      llvm::cl::value_desc("dir"), llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> threads{
      "threads",
      llvm::cl::desc("CPU workers the plan sizes per-worker workspaces for"),
      llvm::cl::value_desc("N"), llvm::cl::init(8), llvm::cl::cat(category)};
  llvm::cl::opt<std::string> passPipeline{
      "pass-pipeline",
      llvm::cl::desc("run this textual pass pipeline (as --print-pipeline "
                     "prints it, anchored on builtin.module) instead of the "
                     "one the recipe and flags imply"),
      llvm::cl::value_desc("pipeline"), llvm::cl::cat(category)};
  llvm::cl::opt<bool> printPipeline{
      "print-pipeline",
      llvm::cl::desc("print the pass pipeline the recipe and flags imply "
                     "(for tailor-opt --pass-pipeline) and exit"),
      llvm::cl::cat(category)};
  llvm::cl::opt<bool> printIRAfterAll{
      "mlir-print-ir-after-all",
      llvm::cl::desc("print the IR after every pass, to stderr"),
      llvm::cl::cat(category)};
  llvm::cl::opt<bool> timing{
      "mlir-timing",
      llvm::cl::desc("print the time each pass took, to stderr"),
      llvm::cl::cat(category)};
  llvm::cl::opt<std::string> hardwareName{
      "hardware",
      llvm::cl::desc("the target: cpu (default), h100, h100-pcie, h200, "
                     "a100-80gb, a100-40gb, l4, a10g, rtx4090, rtx3090, t4 "
                     "(NxNAME for N GPUs), a hardware YAML file (as tailor "
                     "calibrate writes, or a cluster file whose nodes: list "
                     "mixes devices), or auto (GPU 0 of this machine)"),
      llvm::cl::value_desc("name|file"), llvm::cl::init("cpu"),
      llvm::cl::cat(category)};
};

/// Prints `tailor compile: error: MESSAGE` and returns failure.
mlir::LogicalResult compileError(const llvm::Twine &message) {
  llvm::errs() << "tailor compile: error: " << message << "\n";
  return mlir::failure();
}

/// --task and --max-seq-len.
mlir::LogicalResult readTask(const CompileFlags &flags, CompileRequest &req) {
  if (flags.task != "forward" && flags.task != "generate") {
    return compileError("--task must be forward or generate, got '" +
                        flags.task + "'");
  }
  req.generate = flags.task == "generate";
  if (!req.generate) {
    if (flags.maxSeqLen.getNumOccurrences()) {
      return compileError("--max-seq-len needs --task generate");
    }
    if (flags.prefillChunk.getNumOccurrences()) {
      return compileError("--prefill-chunk needs --task generate");
    }
    return mlir::success();
  }
  if (req.compileTo == Stage::Train) {
    return compileError("--task generate has no training stage");
  }
  if (flags.maxSeqLen <= 0) {
    return compileError("--task generate needs --max-seq-len N (N > 0), the "
                        "tokens the KV cache holds");
  }
  if (flags.seq.getNumOccurrences()) {
    return compileError("--task generate takes --max-seq-len, not --seq");
  }
  req.maxSeqLen = flags.maxSeqLen;
  if (flags.prefillChunk < 1) {
    return compileError("--prefill-chunk must be at least 1 (1: no prefill "
                        "entry), got " +
                        llvm::Twine(static_cast<int64_t>(flags.prefillChunk)));
  }
  req.prefillChunk = std::min<int64_t>(flags.prefillChunk, req.maxSeqLen);
  return mlir::success();
}

/// The eos ids of the model's config.json (next to the model), if any:
/// `eos_token_id`, a number or a list; "" when there is none.
mlir::FailureOr<std::string> readEosTokenIds(llvm::StringRef model) {
  llvm::SmallString<256> path(llvm::sys::path::parent_path(model));
  llvm::sys::path::append(path, "config.json");
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    return std::string();
  }
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    return compileError(path + ": " + llvm::toString(json.takeError()));
  }
  const llvm::json::Object *config = json->getAsObject();
  const llvm::json::Value *eos = config ? config->get("eos_token_id") : nullptr;
  if (!eos || eos->kind() == llvm::json::Value::Null) {
    return std::string();
  }
  std::string ids;
  auto add = [&](const llvm::json::Value &value) -> mlir::LogicalResult {
    std::optional<int64_t> id = value.getAsInteger();
    if (!id || *id < 0) {
      return compileError(path + ": eos_token_id must be token ids");
    }
    ids += (ids.empty() ? "" : ",") + std::to_string(*id);
    return mlir::success();
  };
  if (const llvm::json::Array *list = eos->getAsArray()) {
    for (const llvm::json::Value &value : *list) {
      if (failed(add(value))) {
        return mlir::failure();
      }
    }
  } else if (failed(add(*eos))) {
    return mlir::failure();
  }
  return ids;
}

/// The output format, the training/adapter mode, and the hardware.
mlir::LogicalResult readMode(const CompileFlags &flags, CompileRequest &req) {
  if (flags.threads < 1 || flags.threads > 1024) {
    return compileError("--threads must be in [1, 1024], got " +
                        llvm::Twine(static_cast<int64_t>(flags.threads)));
  }
  req.threads = flags.threads;
  req.input = flags.input;
  req.output = flags.output;
  req.compileTo = flags.compileTo;
  req.format = flags.emit;
  if (req.format == Emit::Default) {
    req.format = req.compileTo == Stage::Plan ? Emit::Plan : Emit::Mlir;
  }
  if (req.format == Emit::Plan && req.compileTo != Stage::Plan) {
    return compileError("--emit=plan needs --compile-to=plan");
  }
  // A recipe makes a training plan, except for --task generate, which reads
  // the weight format from it.
  req.recipeGiven = !flags.recipePath.empty() || !flags.overrides.empty();
  req.training = req.recipeGiven && flags.task != "generate";
  req.adapterDir = flags.adapterDir;
  if (req.training && !req.adapterDir.empty()) {
    return compileError(
        "--adapter compiles an inference plan; to continue training from an "
        "adapter, compile with --recipe and pass it to `tailor train "
        "--init-adapter`");
  }
  if (req.compileTo == Stage::Train && !req.training) {
    return compileError("--compile-to=train needs --recipe");
  }
  if (failed(readTask(flags, req))) {
    return mlir::failure();
  }
  auto hardware = flags.hardwareName == "auto"
                      ? detectHardware()
                      : resolveHardware(flags.hardwareName);
  if (!hardware) {
    return compileError(llvm::toString(hardware.takeError()));
  }
  if (hardware->ranks() != 1 && !req.training) {
    return compileError("--hardware " + flags.hardwareName + " has " +
                        llvm::Twine(hardware->ranks()) +
                        " ranks; a plan of several ranks is a training plan "
                        "(give --recipe), inference plans run on one");
  }
  req.hardware = std::move(*hardware);
  return mlir::success();
}

/// The recipe (training) or the PEFT adapter's config (--adapter).
mlir::LogicalResult readRecipeAndAdapter(const CompileFlags &flags,
                                         CompileRequest &req) {
  if (req.recipeGiven) {
    std::vector<std::string> overrides(flags.overrides.begin(),
                                       flags.overrides.end());
    auto loaded = loadRecipe(flags.recipePath, overrides);
    if (!loaded) {
      return compileError(llvm::toString(loaded.takeError()));
    }
    req.recipe = std::move(*loaded);
    if (req.training) {
      if (llvm::Error error = checkTrainingPrecision(
              req.recipe, scheduleOptionsFor(req.hardware,
                                             req.recipe.mixedPrecision, 1))) {
        return compileError(llvm::toString(std::move(error)));
      }
    }
  }
  if (req.recipeGiven && req.generate) {
    std::vector<std::string> ignored;
    if (llvm::Error error = checkGenerationRecipe(req.recipe, ignored)) {
      return compileError(llvm::toString(std::move(error)));
    }
    if (!ignored.empty()) {
      llvm::errs() << "tailor compile: note: --task generate reads the "
                      "recipe's weight format only; it ignores "
                   << llvm::join(ignored, ", ")
                   << " (the training run's keys; an adapter's shape comes "
                      "from its adapter_config.json)\n";
    }
  }
  if (!req.adapterDir.empty()) {
    auto config = readPeftAdapterConfig(req.adapterDir);
    if (!config) {
      return compileError(llvm::toString(config.takeError()));
    }
    req.adapter = std::move(*config);
  }
  return mlir::success();
}

/// The batch shape the importer binds: the recipe's, then --batch/--seq
/// and --dim, each remembered with where it came from.
mlir::LogicalResult bindShapes(const CompileFlags &flags, CompileRequest &req) {
  onnx_import::ImportOptions &options = req.importOptions;
  TrainingRecipe &recipe = req.recipe;
  if (req.training) {
    // The recipe's batch shape, unless the command line says otherwise.
    bindRecipeShapes(req);
  }
  // --batch and --seq win over the recipe and go into it.
  auto bindFlag = [&](const llvm::cl::opt<int64_t> &flag, const char *name,
                      std::optional<int64_t> &bound, std::string &source,
                      int64_t &recipeValue,
                      const char *recipeKey) -> mlir::LogicalResult {
    if (!flag.getNumOccurrences()) {
      return mlir::success();
    }
    if (flag <= 0) {
      return compileError(llvm::Twine(name) + " must be positive, got " +
                          llvm::Twine(static_cast<int64_t>(flag)));
    }
    bound = flag;
    source = name;
    recipeValue = flag;
    recipe.givenKeys.insert(recipeKey);
    return mlir::success();
  };
  if (failed(bindFlag(flags.batch, "--batch", options.batch,
                      options.batchSource, recipe.microBatchSize,
                      "micro_batch_size")) ||
      failed(bindFlag(flags.seq, "--seq", options.seq, options.seqSource,
                      recipe.sequenceLen, "sequence_len"))) {
    return mlir::failure();
  }
  if (req.generate) {
    // The import's sequence length is the cache's: rotary tables and
    // learned positions then cover every position decode may reach.
    options.seq = req.maxSeqLen;
    options.seqSource = "--max-seq-len";
    if (!flags.batch.getNumOccurrences()) {
      options.batch = 1; // one sequence unless asked for more
    }
    mlir::FailureOr<std::string> eos = readEosTokenIds(req.input);
    if (failed(eos)) {
      return mlir::failure();
    }
    req.eosTokenIds = *eos;
  }
  for (const std::string &binding : flags.dims) {
    auto [name, value] = llvm::StringRef(binding).split('=');
    int64_t n = 0;
    if (name.empty() || value.getAsInteger(10, n) || n <= 0) {
      return compileError("--dim expects NAME=N with a positive N, got '" +
                          binding + "'");
    }
    options.dims[name] = n;
  }
  return mlir::success();
}

/// Keeps the arguments that compile `req` again (tailor train --elastic)
/// in it: all but the output and the stage and format to stop at, and but
/// --pass-pipeline when that is the
/// pipeline the arguments imply anyway (a pipeline of one's own is not
/// recorded: its text fixes the target, which a new world must change).
void recordCommandLine(mlir::MLIRContext &context, CompileRequest &req,
                       const std::vector<std::string> &args) {
  if (!req.passPipeline.empty()) {
    CompileRequest implied = req;
    implied.passPipeline.clear();
    if (impliedPipelineText(context, implied) != req.passPipeline) {
      return;
    }
  }
  // What the arguments compile to is a plan, written where the caller says.
  req.commandLine =
      dropOptions(args, {"o", "pass-pipeline", "compile-to", "emit"});
  if (llvm::SmallString<256> cwd; !llvm::sys::fs::current_path(cwd)) {
    req.workingDirectory = cwd.str().str();
  }
}

/// Adds the compile command line and its directory to the module's
/// training attributes, for the plan (tailor train --elastic).
void attachCommandLine(mlir::ModuleOp module, const CompileRequest &req) {
  if (req.commandLine.empty()) {
    return;
  }
  auto training =
      module->getAttrOfType<mlir::DictionaryAttr>(tg::TGDialect::kTrainingAttrName);
  if (!training) {
    return;
  }
  mlir::Builder b(module.getContext());
  mlir::NamedAttrList attrs(training);
  attrs.set("compile_arguments", b.getStrArrayAttr(llvm::SmallVector<llvm::StringRef>(
                                     req.commandLine.begin(), req.commandLine.end())));
  attrs.set("compile_directory", b.getStringAttr(req.workingDirectory));
  module->setAttr(tg::TGDialect::kTrainingAttrName,
                  attrs.getDictionary(module.getContext()));
}

/// The base model of a recipe without `base_model`: the ONNX model's
/// directory, made absolute (the trainer may run elsewhere), when a Hugging
/// Face config.json sits beside the model, as an export next to
/// save_pretrained's files has; else the model's file name. The trainer
/// copies a base model directory's config.json next to full fine-tuning's
/// weights, so from_pretrained loads them, and PEFT's
/// base_model_name_or_path then names a directory transformers can load.
std::string defaultBaseModel(llvm::StringRef model) {
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(model));
  if (dir.empty()) {
    dir = ".";
  }
  if (llvm::sys::fs::make_absolute(dir)) {
    return llvm::sys::path::filename(model).str();
  }
  llvm::sys::path::remove_dots(dir, /*remove_dot_dot=*/true);
  llvm::SmallString<256> config(dir);
  llvm::sys::path::append(config, "config.json");
  if (!llvm::sys::fs::is_regular_file(config)) {
    return llvm::sys::path::filename(model).str();
  }
  return dir.str().str();
}

/// Records the recipe on a training module: the model's fixed shape where
/// the recipe left it to defaults, the vocabulary (the logits' width), and
/// the base model (defaultBaseModel when the recipe names none); fails on a
/// recipe the model contradicts.
mlir::LogicalResult attachTrainingRecipe(mlir::ModuleOp module,
                                         CompileRequest &req) {
  adoptFixedTokenShape(module, req.recipe);
  int64_t vocab = 0;
  if (auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward")) {
    auto results = forward.getFunctionType().getResults();
    if (!results.empty()) {
      if (auto logits = llvm::dyn_cast<mlir::RankedTensorType>(results[0]);
          logits && logits.getRank() == 3) {
        vocab = logits.getDimSize(2);
      }
    }
  }
  if (req.recipe.baseModel.empty()) {
    req.recipe.baseModel = defaultBaseModel(req.input);
  }
  if (llvm::Error error = attachRecipe(module, req.recipe, vocab)) {
    return compileError(req.input + ": " + llvm::toString(std::move(error)));
  }
  attachCommandLine(module, req);
  return mlir::success();
}

/// --adapter: the graph, then the adapter's layers with their weights bound
/// from its safetensors file.
mlir::LogicalResult applyAdapter(mlir::ModuleOp module,
                                 const CompileRequest &req) {
  mlir::PassManager pm(module.getContext());
  buildGraphPipeline(pm);
  graph::InsertLoraPassOptions lora;
  lora.rank = req.adapter->r;
  lora.alpha = req.adapter->alpha;
  lora.rslora = req.adapter->useRslora;
  lora.layers = req.adapter->layers;
  std::string targets;
  for (const std::string &name : req.adapter->targetModules) {
    targets += (targets.empty() ? "" : ",") + name;
  }
  lora.targets = targets;
  pm.addPass(graph::createInsertLoraPass(lora));
  if (failed(pm.run(module)) ||
      failed(bindPeftAdapterWeights(module, req.adapterDir))) {
    return compileError("cannot apply the adapter in '" + req.adapterDir +
                        "'");
  }
  return mlir::success();
}

/// The pipeline from the imported graph to the requested stage, as the
/// recipe and flags imply it; returns what it is called in errors.
const char *buildImpliedPipeline(mlir::PassManager &pm,
                                 const CompileRequest &req) {
  const char *what = "graph";
  ScheduleOptions scheduleOptions = scheduleOptionsFor(
      req.hardware, req.recipe.mixedPrecision, req.threads);
  if (req.training) {
    what = "training";
    if (req.compileTo == Stage::Graph) {
      buildGraphPipeline(pm, req.recipe.tieWordEmbeddings);
    } else {
      buildTrainingPipeline(pm, req.recipe, scheduleOptions,
                            /*schedule=*/req.compileTo != Stage::Train,
                            req.raised);
    }
  } else if (req.generate) {
    what = "generation";
    if (req.compileTo == Stage::Graph) {
      if (!req.adapter) {
        buildGraphPipeline(pm);
      }
    } else {
      GenerationOptions generation;
      generation.eosTokenIds = req.eosTokenIds;
      generation.prefillChunk = req.prefillChunk;
      generation.raised = req.adapter.has_value();
      generation.weights = req.recipeGiven ? &req.recipe : nullptr;
      buildGenerationPipeline(pm, scheduleOptions, generation);
    }
  } else if (req.adapter) {
    what = "schedule";
    if (req.compileTo != Stage::Graph) {
      buildLowerToSchedule(pm, scheduleOptions);
    }
  } else if (req.compileTo == Stage::Graph) {
    buildGraphPipeline(pm);
  } else {
    buildSchedulePipeline(pm, scheduleOptions);
    what = "schedule";
  }
  return what;
}

/// Runs --pass-pipeline, or the implied pipeline, on the imported module.
mlir::LogicalResult runPipelines(mlir::ModuleOp module,
                                 const CompileRequest &req) {
  mlir::PassManager pm(module.getContext(),
                      mlir::ModuleOp::getOperationName());
  const char *what = "given";
  if (req.passPipeline.empty()) {
    what = buildImpliedPipeline(pm, req);
  } else {
    std::string message;
    llvm::raw_string_ostream errors(message);
    mlir::FailureOr<mlir::OpPassManager> parsed =
        mlir::parsePassPipeline(req.passPipeline, errors);
    if (failed(parsed)) {
      return compileError("--pass-pipeline: " + llvm::StringRef(message).trim());
    }
    if (parsed->getOpAnchorName() != mlir::ModuleOp::getOperationName() &&
        parsed->getOpAnchorName() != mlir::OpPassManager::getAnyOpAnchorName()) {
      return compileError("--pass-pipeline must be anchored on "
                          "builtin.module(...), got '" +
                          parsed->getOpAnchorName() + "'");
    }
    static_cast<mlir::OpPassManager &>(pm) = *parsed;
  }
  if (req.printIRAfterAll) {
    pm.enableIRPrinting();
  }
  if (req.timing) {
    pm.enableTiming();
  }
  pm.enableVerifier(req.verifyEachPass);
  if (failed(pm.run(module)) ||
      (!req.verifyEachPass && failed(mlir::verify(module)))) {
    if (req.quietPipelineFailure) {
      return mlir::failure();
    }
    return compileError(llvm::Twine("the ") + what + " pipeline failed on '" +
                        req.input + "'");
  }
  return mlir::success();
}

/// A layer split's line: the pipeline's predicted step and bubble.
void reportPipelinePrediction(const CompileRequest &req, const plan::Plan &p,
                              const CostTarget &target) {
  PipelinePrediction prediction = predictLayerSplit(p, target);
  llvm::errs() << "tailor compile: " << req.output << ": ";
  if (!prediction.unpredictable.empty()) {
    llvm::errs() << "no predicted step time (" << prediction.unpredictable
                 << ")\n";
    return;
  }
  llvm::errs() << llvm::format(
      "%zu pipeline stages x %lld data-parallel replica%s, predicted step "
      "%.3f ms on %s (%.0f tokens/s, bubble %.1f%%); tailor inspect shows "
      "each stage\n",
      prediction.busySeconds.size(),
      static_cast<long long>(prediction.replicas),
      prediction.replicas > 1 ? "s" : "", prediction.stepSeconds * 1e3,
      req.hardware.name.c_str(),
      prediction.tokensPerStep / prediction.stepSeconds,
      prediction.bubble() * 100);
}

/// A mixed cluster's lines: each rank's micro-batches and predicted step,
/// the global batch they add up to, and the even split's step beside it.
void reportClusterPrediction(const CompileRequest &req, const plan::Plan &p,
                             const CostTarget &target) {
  ClusterPrediction cluster = predictCluster(p, target);
  int64_t global = 0;
  for (const plan::RankDevice *rank : *p.parallel()->ranks()) {
    global += rank->micro_batches();
  }
  llvm::errs() << "tailor compile: " << req.output << ": "
               << p.world_size() << " ranks of mixed devices share each "
               << "step's " << global << " micro-batches (global batch "
               << global * p.training()->micro_batch_size()
               << " sequences, as the recipe's) by predicted speed:";
  for (const plan::RankDevice *rank : *p.parallel()->ranks()) {
    llvm::errs() << " " << rank->micro_batches();
  }
  llvm::errs() << "\n";
  if (!cluster.unpredictable.empty()) {
    llvm::errs() << "tailor compile: " << req.output
                 << ": no predicted step time (" << cluster.unpredictable
                 << ")\n";
    return;
  }
  for (auto [r, rank] : llvm::enumerate(cluster.ranks)) {
    llvm::errs() << llvm::format(
        "  rank %zu (%s): %lld micro-batches, predicted %.3f ms, waits "
        "%.3f ms\n",
        r, rank.device.c_str(), static_cast<long long>(rank.microBatches),
        rank.stepSeconds * 1e3, rank.waitSeconds * 1e3);
  }
  llvm::errs() << llvm::format(
      "tailor compile: %s: predicted step %.3f ms on %s (%.0f tokens/s); "
      "an even split would take %.3f ms\n",
      req.output.c_str(), cluster.stepSeconds * 1e3,
      req.hardware.name.c_str(), cluster.tokensPerStep / cluster.stepSeconds,
      cluster.evenStepSeconds * 1e3);
}

/// One line on stderr: what the cost model predicts for a step of the plan
/// just written, on the hardware it was compiled for.
void reportPrediction(const CompileRequest &req,
                      const std::vector<uint8_t> &planBytes) {
  const plan::Plan *p = plan::GetSizePrefixedPlan(planBytes.data());
  CostTarget target;
  target.hardware = req.hardware;
  target.precision = p->target() && p->target()->precision()
                         ? p->target()->precision()->str()
                         : "fp32";
  target.threads = req.threads;
  if (p->stages()) {
    reportPipelinePrediction(req, *p, target);
    return;
  }
  if (p->parallel() && p->parallel()->ranks()) {
    reportClusterPrediction(req, *p, target);
    return;
  }
  PlanPrediction prediction = predictPlan(*p, target);
  llvm::errs() << "tailor compile: " << req.output << ": ";
  if (!prediction.unpredictable.empty()) {
    llvm::errs() << "no predicted step time (" << prediction.unpredictable
                 << ")\n";
    return;
  }
  llvm::errs() << llvm::format("predicted step %.3f ms on %s",
                               prediction.step.seconds * 1e3,
                               req.hardware.name.c_str());
  if (prediction.tokensPerStep > 0) {
    llvm::errs() << llvm::format(" (%.0f tokens/s)",
                                 prediction.tokensPerSecond());
  }
  llvm::errs() << "; tailor inspect shows the breakdown\n";
}

/// Writes the plan or the MLIR; a file only appears once complete.
mlir::LogicalResult writeOutput(mlir::ModuleOp module,
                                const CompileRequest &req) {
  std::vector<uint8_t> planBytes;
  if (req.format == Emit::Plan) {
    llvm::SmallString<256> directory(
        req.output == "-" ? llvm::StringRef(".")
                          : llvm::sys::path::parent_path(req.output));
    auto bytes = serializePlan(module, directory);
    if (failed(bytes)) {
      return mlir::failure();
    }
    planBytes = std::move(*bytes);
  }
  std::error_code ec;
  llvm::ToolOutputFile out(req.output, ec, llvm::sys::fs::OF_None);
  if (ec) {
    return compileError("cannot write '" + req.output + "': " + ec.message());
  }
  if (req.format == Emit::Plan) {
    out.os().write(reinterpret_cast<const char *>(planBytes.data()),
                   planBytes.size());
  } else {
    module->print(out.os());
    out.os() << "\n";
  }
  out.os().flush();
  if (out.os().has_error()) {
    std::string message = out.os().error().message();
    out.os().clear_error();
    return compileError("writing '" + req.output + "' failed: " + message);
  }
  out.keep();
  if (req.format == Emit::Plan && req.output != "-") {
    reportPrediction(req, planBytes);
  }
  return mlir::success();
}

} // namespace

std::string impliedPipelineText(mlir::MLIRContext &context,
                                const CompileRequest &req) {
  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
  buildImpliedPipeline(pm, req);
  std::string text;
  llvm::raw_string_ostream os(text);
  pm.printAsTextualPipeline(os);
  return text;
}

void bindRecipeShapes(CompileRequest &req) {
  onnx_import::ImportOptions &options = req.importOptions;
  const TrainingRecipe &recipe = req.recipe;
  options.batch = recipe.microBatchSize;
  options.seq = recipe.sequenceLen;
  if (recipe.givenKeys.count("micro_batch_size")) {
    options.batchSource = "the recipe's micro_batch_size";
  }
  if (recipe.givenKeys.count("sequence_len")) {
    options.seqSource = "the recipe's sequence_len";
  }
}

mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext &context,
                                              const CompileRequest &req) {
  auto module = onnx_import::importOnnxFile(context, req.input,
                                            req.importOptions);
  if (failed(module)) {
    return nullptr;
  }
  return std::move(*module);
}

mlir::OwningOpRef<mlir::ModuleOp> compileModule(mlir::MLIRContext &context,
                                                CompileRequest &req) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      req.imported ? mlir::OwningOpRef<mlir::ModuleOp>(req.imported.clone())
                   : importModel(context, req);
  if (!module) {
    return nullptr;
  }
  if (req.training && failed(attachTrainingRecipe(*module, req))) {
    return nullptr;
  }
  // A cluster of mixed devices: each rank's device on the module, where
  // tailor-balance-ranks reads it.
  if (req.training && req.hardware.heterogeneous()) {
    parallel::attachCluster(*module, req.hardware);
  }
  if (req.adapter && req.compileTo != Stage::Import &&
      failed(applyAdapter(*module, req))) {
    return nullptr;
  }
  if (req.compileTo != Stage::Import && failed(runPipelines(*module, req))) {
    return nullptr;
  }
  return module;
}

int runCompile(int argc, const char **argv) {
  llvm::cl::ResetCommandLineParser();
  CompileFlags flags;
  llvm::cl::HideUnrelatedOptions(flags.category);
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv, "tailor compile: compile an ONNX model\n",
          &llvm::errs())) {
    return 1;
  }
  CompileRequest req;
  if (failed(readMode(flags, req)) || failed(readRecipeAndAdapter(flags, req)) ||
      failed(bindShapes(flags, req))) {
    return 1;
  }

  req.passPipeline = flags.passPipeline;
  req.printIRAfterAll = flags.printIRAfterAll;
  req.timing = flags.timing;
  if (!req.passPipeline.empty() || flags.printPipeline) {
    registerTailorPasses();
  }

  mlir::DialectRegistry registry;
  registerTailorDialects(registry);
  mlir::MLIRContext context(registry);
  context.disableMultithreading();
  if (flags.printPipeline) {
    mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
    buildImpliedPipeline(pm, req);
    pm.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  recordCommandLine(context, req,
                    std::vector<std::string>(argv + 1, argv + argc));
  // Errors name the op; a dump of the whole module would bury them.
  context.printOpOnDiagnostic(false);
  // Under a device budget the first try's diagnostics wait: if the plan
  // only missed the budget, compile offloads and tries again.
  bool mayOffload = req.training && req.compileTo != Stage::Import &&
                    req.passPipeline.empty() &&
                    req.recipe.deviceMemoryBudgetGib > 0 &&
                    !req.recipe.offloadParams();
  std::vector<std::string> held;
  bool overBudget = false;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (!mayOffload) {
      printDiagnostic(diag);
      return mlir::success();
    }
    std::string text;
    llvm::raw_string_ostream os(text);
    printDiagnostic(diag, os);
    overBudget |= diag.getSeverity() == mlir::DiagnosticSeverity::Error &&
                  llvm::StringRef(text).contains(memory::kDeviceMemoryExceeded);
    held.push_back(std::move(text));
    return mlir::success();
  });
  req.quietPipelineFailure = mayOffload;
  mlir::OwningOpRef<mlir::ModuleOp> module = compileModule(context, req);
  req.quietPipelineFailure = false;
  if (!module && mayOffload && overBudget) {
    // Said as a note: the plan that follows fits.
    llvm::StringRef first = held.front();
    first.consume_front("tailor compile: error: ");
    llvm::errs() << "tailor compile: note: without offload, " << first
                 << "tailor compile: offloading the frozen parameters to fit "
                    "(offload_param: cpu)\n";
    req.recipe.offloadParam = "cpu";
    mayOffload = false;
    module = compileModule(context, req);
  } else if (!module) {
    for (const std::string &text : held) {
      llvm::errs() << text;
    }
    if (mayOffload) {
      (void)compileError("the training pipeline failed on '" + req.input +
                         "'");
    }
  }
  if (!module) {
    return 1;
  }
  return failed(writeOutput(*module, req)) ? 1 : 0;
}

} // namespace tailor
