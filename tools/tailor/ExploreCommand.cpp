//===- ExploreCommand.cpp - `tailor explore` -------------------------------===//
//
// tailor explore MODEL.onnx [--recipe R.yaml] [key=value ...]
//                [--hardware CLUSTER] [--budget-gib X] [--global-batch N]
//                [--fix key=value ...] [--top K [-o DIR]] [--json]
//                [--plot F.svg] [--all]
//
// Compiles every configuration of the space compiler/Explore.h describes
// with the pipeline `tailor compile` runs (Compile.h), reads each plan's
// per-rank memory and the cost model's step time, and prints the Pareto
// front of what fits, the best marked, whether the recipe as given fits
// and, if not, the nearest configurations that do. Every figure is the
// compiled plan's own (no extrapolation): `tailor compile` of a row gives
// the same peak. The memory proof is left to the end: each configuration
// compiles without it, so one that does not fit still has its figures.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"
#include "tools/tailor/Compile.h"

#include "compiler/Explore.h"
#include "compiler/PipelinePrediction.h"
#include "compiler/PlanPrediction.h"
#include "compiler/PlanWriter.h"
#include "compiler/Pipelines.h"
#include "compiler/Registration.h"
#include "passes/graph/Passes.h"
#include "passes/memory/Passes.h"
#include "runtime/MemoryCategory.h"
#include "runtime/schema/plan_generated.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <set>
#include <tuple>

namespace tailor {
namespace {

constexpr double kGiB = double(int64_t(1) << 30);

struct ExploreFlags {
  llvm::cl::OptionCategory category{"tailor explore options"};
  llvm::cl::opt<std::string> input{llvm::cl::Positional,
                                   llvm::cl::desc("<model.onnx>"),
                                   llvm::cl::Required, llvm::cl::cat(category)};
  llvm::cl::opt<std::string> recipePath{
      "recipe", llvm::cl::desc("the training recipe (YAML): the starting point"),
      llvm::cl::value_desc("file"), llvm::cl::cat(category)};
  llvm::cl::list<std::string> overrides{
      llvm::cl::Positional, llvm::cl::ZeroOrMore,
      llvm::cl::desc("[key=value ...] recipe overrides"),
      llvm::cl::cat(category)};
  llvm::cl::opt<std::string> hardwareName{
      "hardware",
      llvm::cl::desc("the cluster: a name (cpu, 4xcpu, 2x2xcpu, h100, "
                     "2xrtx3090, 8xh100, 2x8xh100, t4, ...) or a hardware file"),
      llvm::cl::value_desc("name|file"), llvm::cl::init("cpu"),
      llvm::cl::cat(category)};
  llvm::cl::opt<double> budgetGib{
      "budget-gib",
      llvm::cl::desc("device memory per rank a configuration may take "
                     "(default: the card's memory; none on the CPU)"),
      llvm::cl::value_desc("GiB"), llvm::cl::init(0), llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> globalBatch{
      "global-batch",
      llvm::cl::desc("sequences per optimizer step over all ranks (default: "
                     "the recipe's micro batch x accumulation x ranks)"),
      llvm::cl::value_desc("N"), llvm::cl::init(0), llvm::cl::cat(category)};
  llvm::cl::list<std::string> fixed{
      "fix",
      llvm::cl::desc("pin a knob: weights=nf4, adapter=lora, recompute=full, "
                     "sharding=zero2, offload=param, offload_optimizer=cpu, "
                     "offload_activations=true, micro_batch=2, "
                     "compression=topk (or the recipe's keys: quantization, "
                     "gradient_checkpointing, zero_stage, "
                     "fsdp_sharding_strategy, offload_param, "
                     "enable_activation_offloading, micro_batch_size, "
                     "gradient_compression); repeatable"),
      llvm::cl::value_desc("key=value"), llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> top{
      "top",
      llvm::cl::desc("with -o: write the plans of the K fastest rows"),
      llvm::cl::value_desc("K"), llvm::cl::init(0), llvm::cl::cat(category)};
  llvm::cl::opt<std::string> outputDir{
      "o", llvm::cl::desc("directory for --top's plans"),
      llvm::cl::value_desc("dir"), llvm::cl::cat(category)};
  llvm::cl::opt<bool> json{"json",
                           llvm::cl::desc("print JSON instead of tables"),
                           llvm::cl::cat(category)};
  llvm::cl::opt<bool> all{
      "all",
      llvm::cl::desc("list every configuration evaluated, not only the "
                     "Pareto front"),
      llvm::cl::cat(category)};
  llvm::cl::opt<std::string> plot{
      "plot",
      llvm::cl::desc("write an SVG scatter of memory against step time"),
      llvm::cl::value_desc("file.svg"), llvm::cl::cat(category)};
  llvm::cl::opt<std::string> extrapolate{
      "extrapolate",
      llvm::cl::desc("auto (default: for models of more than 4 layers), on "
                     "or off: compile each configuration with 2 and 3 "
                     "layers and extend every figure linearly to the "
                     "model's depth, instead of compiling it whole"),
      llvm::cl::value_desc("auto|on|off"), llvm::cl::init("auto"),
      llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> jobs{
      "jobs",
      llvm::cl::desc("configurations compiled at once, each in its own "
                     "context (default: the machine's cores)"),
      llvm::cl::value_desc("N"), llvm::cl::init(0), llvm::cl::cat(category)};
  llvm::cl::opt<int64_t> threads{
      "threads",
      llvm::cl::desc("CPU workers the plans are sized and predicted for"),
      llvm::cl::value_desc("N"), llvm::cl::init(8), llvm::cl::cat(category)};
};

int exploreError(const llvm::Twine &message) {
  llvm::errs() << "tailor explore: error: " << message << "\n";
  return 1;
}

/// Compiles configurations as `tailor compile` would, keeping one import
/// per batch shape.
class Evaluator {
public:
  Evaluator(mlir::MLIRContext &context, const ExploreFlags &flags,
            const HardwareSpec &hardware, const TrainingRecipe &base)
      : context(context), flags(flags), hardware(hardware), base(base) {}

  /// The request that compiles `knobs` (or the recipe's error).
  llvm::Expected<CompileRequest> requestFor(const explore::Knobs &knobs) const;
  /// `knobs`' figures: extrapolated from 2 and 3 layers when the search
  /// extrapolates (and not `exact`), else compiled whole.
  explore::Evaluation evaluate(const explore::Knobs &knobs,
                               int64_t budgetBytes, bool exact = false);
  /// Compiles `req` into `module`; the first error's text on failure.
  /// With `keepLayers` > 0 it starts from the raised model cut to that
  /// many layers (tailor-keep-layers).
  std::string compile(CompileRequest &req,
                      mlir::OwningOpRef<mlir::ModuleOp> &module,
                      int64_t keepLayers = 0);
  /// Decides whether to extrapolate (--extrapolate) for a model of
  /// `layers` layers, counted on the raised import of `req`.
  std::string chooseMode(CompileRequest &req);
  /// Layers the model has, and whether figures are extrapolated.
  int64_t layers = 0;
  bool extrapolating = false;

private:
  void readFigures(const std::vector<uint8_t> &bytes, const CompileRequest &req,
                   explore::Evaluation &e) const;
  /// The figures of `knobs` compiled with `keepLayers` layers (0: whole).
  explore::Evaluation measure(const explore::Knobs &knobs,
                              int64_t keepLayers);
  /// What startingModule's kRaised asks for: the import, raised.
  static constexpr int64_t kRaised = -1;
  /// The import of `req`'s batch shape (keepLayers 0), it raised
  /// (kRaised), or that cut to `keepLayers` layers; each made once.
  mlir::ModuleOp startingModule(const CompileRequest &req, int64_t keepLayers,
                                std::string &error);

  mlir::MLIRContext &context;
  const ExploreFlags &flags;
  const HardwareSpec &hardware;
  const TrainingRecipe &base;
  /// Modules by (micro batch, sequence, layers kept; 0: the import as is,
  /// kRaised: raised).
  std::map<std::tuple<int64_t, int64_t, int64_t>,
           mlir::OwningOpRef<mlir::ModuleOp>>
      imports;
};

llvm::Expected<CompileRequest>
Evaluator::requestFor(const explore::Knobs &knobs) const {
  std::vector<std::string> overrides(flags.overrides.begin(),
                                     flags.overrides.end());
  for (const auto &[key, value] : explore::recipeKeys(knobs, base)) {
    overrides.push_back(key + "=" + value);
  }
  llvm::Expected<TrainingRecipe> recipe =
      loadRecipe(flags.recipePath, overrides);
  if (!recipe) {
    return recipe.takeError();
  }
  CompileRequest req;
  req.input = flags.input;
  req.training = true;
  req.recipe = std::move(*recipe);
  req.hardware = hardware;
  req.threads = flags.threads;
  // A configuration that does not compile is a row with its error, not a
  // line on the terminal.
  req.quietPipelineFailure = true;
  // Thousands of compiles through passes tested one by one: the IR is
  // verified once, after the last pass, not after each.
  req.verifyEachPass = false;
  bindRecipeShapes(req);
  return req;
}

mlir::ModuleOp Evaluator::startingModule(const CompileRequest &req,
                                         int64_t keepLayers,
                                         std::string &error) {
  auto key = std::make_tuple(req.recipe.microBatchSize,
                             req.recipe.sequenceLen, keepLayers);
  mlir::OwningOpRef<mlir::ModuleOp> &module = imports[key];
  if (module) {
    return *module;
  }
  if (keepLayers == 0) {
    module = importModel(context, req);
    if (!module) {
      error = "the import failed";
    }
    return module ? *module : nullptr;
  }
  // The raised model (kRaised), or it cut to `keepLayers` layers; the
  // training pipeline's own raising finds nothing more to do on either.
  mlir::ModuleOp from =
      startingModule(req, keepLayers == kRaised ? 0 : kRaised, error);
  if (!from) {
    return nullptr;
  }
  module = from.clone();
  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
  if (keepLayers != kRaised) {
    graph::KeepLayersPassOptions keep;
    keep.count = keepLayers;
    pm.addPass(graph::createKeepLayersPass(keep));
  }
  // Once per module, not per configuration: compile leaves the graph
  // pipeline out (req.raised). After a cut it runs again, as it would in a
  // compile of the cut model (cleaning what the cut left unused).
  buildGraphPipeline(pm, req.recipe.tieWordEmbeddings);
  if (failed(pm.run(*module))) {
    error = keepLayers == kRaised
                ? std::string("the model does not raise")
                : "the model cannot be cut to " + std::to_string(keepLayers) +
                      " layers";
    module = nullptr;
    return nullptr;
  }
  return *module;
}

std::string Evaluator::compile(CompileRequest &req,
                               mlir::OwningOpRef<mlir::ModuleOp> &module,
                               int64_t keepLayers) {
  std::string first;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (first.empty() && diag.getSeverity() == mlir::DiagnosticSeverity::Error) {
      if (auto name = llvm::dyn_cast<mlir::NameLoc>(diag.getLocation())) {
        first = "at node '" + name.getName().str() + "': ";
      }
      first += diag.str();
    }
    return mlir::success();
  });
  std::string error;
  req.imported = startingModule(req, keepLayers == 0 ? kRaised : keepLayers,
                                error);
  req.raised = true;
  if (!req.imported) {
    return first.empty() ? error : first;
  }
  module = compileModule(context, req);
  if (!module) {
    return first.empty() ? "the pipeline failed" : first;
  }
  return "";
}

std::string Evaluator::chooseMode(CompileRequest &req) {
  std::string error;
  mlir::ModuleOp raised = startingModule(req, kRaised, error);
  if (!raised) {
    return error;
  }
  std::set<int64_t> seen;
  raised->walk([&](mlir::Operation *op) {
    if (auto layer = op->getAttrOfType<mlir::IntegerAttr>(
            tg::TGDialect::kLayerAttrName)) {
      seen.insert(layer.getInt());
    }
  });
  layers = static_cast<int64_t>(seen.size());
  extrapolating = flags.extrapolate == "on" ||
                  (flags.extrapolate == "auto" && layers > 4);
  if (extrapolating && layers < 3) {
    return "--extrapolate on needs a model of 3 layers or more, this one "
           "has " + std::to_string(layers);
  }
  return "";
}

/// One rank's plan's peaks and bytes by category into `e`.
static void readMemory(const plan::Plan &p, explore::Evaluation &e) {
  e.devicePeakBytes = e.hostPeakBytes = 0;
  for (const plan::Arena *arena : *p.arenas()) {
    (arena->kind() == plan::ArenaKind::Device ? e.devicePeakBytes
                                              : e.hostPeakBytes) +=
        static_cast<int64_t>(arena->size());
  }
  runtime::CategoryBytes categories = runtime::arenaBytes(p);
  for (size_t c = 0; c < categories.size(); ++c) {
    e.categoryBytes[c] = static_cast<int64_t>(categories[c]);
  }
}

/// A layer split's figures: the stage with the largest device peak (the
/// rank that must fit) and the pipeline's step, its stages together.
static void readSplitFigures(const plan::Plan &outer, const CostTarget &target,
                             explore::Evaluation &e) {
  explore::Evaluation largest;
  largest.devicePeakBytes = -1;
  for (const plan::StagePlan *stage : *outer.stages()) {
    explore::Evaluation one;
    readMemory(*plan::GetSizePrefixedPlan(stage->plan()->data()), one);
    if (one.devicePeakBytes > largest.devicePeakBytes) {
      largest = one;
    }
  }
  e.devicePeakBytes = largest.devicePeakBytes;
  e.hostPeakBytes = largest.hostPeakBytes;
  e.categoryBytes = largest.categoryBytes;
  // The prediction compile prints (each stage on its rank's device).
  PipelinePrediction prediction = predictLayerSplit(outer, target);
  if (!prediction.unpredictable.empty()) {
    e.error = "no predicted step time: " + prediction.unpredictable;
    return;
  }
  e.stepSeconds = prediction.stepSeconds;
  e.tokensPerSecond = prediction.stepSeconds > 0
                          ? prediction.tokensPerStep / prediction.stepSeconds
                          : 0;
}

void Evaluator::readFigures(const std::vector<uint8_t> &bytes,
                            const CompileRequest &req,
                            explore::Evaluation &e) const {
  const plan::Plan *p = plan::GetSizePrefixedPlan(bytes.data());
  CostTarget target;
  target.hardware = hardware;
  target.precision = p->target() && p->target()->precision()
                         ? p->target()->precision()->str()
                         : "fp32";
  target.threads = req.threads;
  if (p->stages() && p->stages()->size() > 0) {
    readSplitFigures(*p, target, e);
    return;
  }
  readMemory(*p, e);
  if (p->parallel() && p->parallel()->ranks()) {
    // A cluster of mixed devices: every rank runs this program with its own
    // count of micro-batches; the step is the slowest rank's, as compile
    // and inspect predict it.
    ClusterPrediction cluster = predictCluster(*p, target);
    if (!cluster.unpredictable.empty()) {
      e.error = "no predicted step time: " + cluster.unpredictable;
      return;
    }
    e.stepSeconds = cluster.stepSeconds;
    e.tokensPerSecond = cluster.stepSeconds > 0
                            ? cluster.tokensPerStep / cluster.stepSeconds
                            : 0;
    return;
  }
  PlanPrediction prediction = predictPlan(*p, target);
  if (!prediction.unpredictable.empty()) {
    e.error = "no predicted step time: " + prediction.unpredictable;
    return;
  }
  e.stepSeconds = prediction.step.seconds;
  e.tokensPerSecond = prediction.tokensPerSecond();
}

explore::Evaluation Evaluator::measure(const explore::Knobs &knobs,
                                       int64_t keepLayers) {
  explore::Evaluation e;
  e.knobs = knobs;
  llvm::Expected<CompileRequest> req = requestFor(knobs);
  if (!req) {
    e.error = llvm::toString(req.takeError());
    return e;
  }
  // Figures for every configuration, fitting or not: the proof (the card's
  // memory, the recipe's budget) is explore's to apply.
  req->hardware.memoryBytes = 0;
  req->recipe.deviceMemoryBudgetGib = 0;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  e.error = compile(*req, module, keepLayers);
  if (!e.error.empty()) {
    return e;
  }
  mlir::FailureOr<std::vector<uint8_t>> bytes =
      serializePlan(*module, ".", /*deviceCode=*/false);
  if (failed(bytes)) {
    e.error = "the plan writer failed";
    return e;
  }
  readFigures(*bytes, *req, e);
  return e;
}

/// `a` (with 2 layers) extended by (layers - 2) times the third layer's
/// increment `b - a`.
static int64_t extended(int64_t a, int64_t b, int64_t layers) {
  return a + (layers - 2) * (b - a);
}

explore::Evaluation Evaluator::evaluate(const explore::Knobs &knobs,
                                        int64_t budgetBytes, bool exact) {
  // The budget policy chooses what to recompute from the whole step's
  // peak, so its choice (and time) changes with depth: never extended.
  // Nor is a layer split: where its stage boundaries fall depends on the
  // depth. Nor is top-k: its heap's work grows as n log k, not linearly.
  const bool extend =
      extrapolating && !exact && knobs.stages == 1 &&
      !llvm::StringRef(knobs.recompute).starts_with("budget-") &&
      knobs.compression != "topk";
  explore::Evaluation e = measure(knobs, extend ? 2 : 0);
  if (extend && e.compiled()) {
    explore::Evaluation three = measure(knobs, 3);
    if (!three.compiled()) {
      return three;
    }
    double tokensPerStep = e.tokensPerSecond * e.stepSeconds;
    e.devicePeakBytes =
        extended(e.devicePeakBytes, three.devicePeakBytes, layers);
    e.hostPeakBytes = extended(e.hostPeakBytes, three.hostPeakBytes, layers);
    for (size_t c = 0; c < e.categoryBytes.size(); ++c) {
      e.categoryBytes[c] =
          extended(e.categoryBytes[c], three.categoryBytes[c], layers);
    }
    e.stepSeconds += (layers - 2) * (three.stepSeconds - e.stepSeconds);
    e.tokensPerSecond = e.stepSeconds > 0 ? tokensPerStep / e.stepSeconds : 0;
    e.extrapolated = true;
  }
  e.fits = e.compiled() && (budgetBytes <= 0 || e.devicePeakBytes <= budgetBytes);
  return e;
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

/// What the search found, for the printers.
struct Findings {
  std::vector<explore::Evaluation> all;
  std::vector<size_t> front;
  /// The recipe as given: its index in `all` (-1: outside the space).
  int64_t given = -1;
  int64_t budgetBytes = 0;
  double seconds = 0;
  /// The model's layers when figures are extrapolated (0: compiled whole),
  /// and how many configurations were then compiled whole.
  int64_t layers = 0;
  int64_t compiledWhole = 0;
};

/// Bytes as a table shows them: GiB from 1 GiB up, MiB below.
std::string sizeText(int64_t bytes) {
  if (bytes >= int64_t(1) << 30) {
    return llvm::formatv("{0:F2} GiB", bytes / kGiB).str();
  }
  return llvm::formatv("{0:F1} MiB", bytes / double(1 << 20)).str();
}

/// A knob column's width: its longest value ("param+optimizer+activations"
/// for offload).
size_t knobWidth(llvm::StringRef name) {
  return name == "offload" ? 27 : 9;
}

void printRow(llvm::raw_ostream &os, const explore::Evaluation &e,
              bool best) {
  os << llvm::format("%s %11s %11s %10.2f %11.0f",
                     best ? "*" : e.extrapolated ? "~" : " ",
                     sizeText(e.devicePeakBytes).c_str(),
                     sizeText(e.hostPeakBytes).c_str(), e.stepSeconds * 1e3,
                     e.tokensPerSecond);
  for (const char *name : explore::kKnobNames) {
    os << "  " << llvm::left_justify(explore::knobValue(e.knobs, name),
                                     knobWidth(name));
  }
  os << "\n";
}

void printHeader(llvm::raw_ostream &os) {
  os << "  device peak   host peak    step ms    tokens/s";
  for (const char *name : explore::kKnobNames) {
    os << "  " << llvm::left_justify(name, knobWidth(name));
  }
  os << "\n";
}

/// Whether the recipe as given fits; if not, by how much, where the bytes
/// go, and the nearest configurations that fit.
void printGiven(llvm::raw_ostream &os, const Findings &f) {
  if (f.given < 0) {
    os << "the recipe as given is outside the space searched\n";
    return;
  }
  const explore::Evaluation &g = f.all[f.given];
  if (!g.compiled()) {
    os << "the recipe as given does not compile: " << g.error << "\n";
  } else if (g.fits) {
    os << "the recipe as given fits: " << sizeText(g.devicePeakBytes)
       << " per rank, " << llvm::format("%.2f", g.stepSeconds * 1e3)
       << " ms a step\n";
    return;
  } else {
    os << "the recipe as given does not fit: " << sizeText(g.devicePeakBytes)
       << " per rank exceeds the budget of " << sizeText(f.budgetBytes)
       << " by " << sizeText(g.devicePeakBytes - f.budgetBytes) << " (";
    for (size_t c = 0; c < g.categoryBytes.size(); ++c) {
      os << (c ? ", " : "") << runtime::kMemoryCategoryNames[c] << " "
         << sizeText(g.categoryBytes[c]);
    }
    os << ")\n";
  }
  std::vector<size_t> near = explore::nearestFits(f.all, g.knobs, 3);
  for (size_t i : near) {
    os << "  to fit: " << explore::describeChange(g.knobs, f.all[i].knobs)
       << " (" << sizeText(f.all[i].devicePeakBytes) << ", "
       << llvm::format("%.2f", f.all[i].stepSeconds * 1e3) << " ms)\n";
  }
}

void printTables(llvm::raw_ostream &os, const Findings &f, bool all) {
  size_t fitting = llvm::count_if(f.all, [](auto &e) { return e.fits; });
  os << "explored " << f.all.size() << " configurations in "
     << llvm::format("%.1f", f.seconds) << " s: " << fitting << " fit";
  if (f.layers > 0) {
    os << " (by the extended figures)";
  }
  if (f.budgetBytes > 0) {
    os << " in " << sizeText(f.budgetBytes) << " per rank";
  }
  if (f.layers > 0) {
    os << "\n(each configuration compiled with 2 and 3 layers and extended "
          "to the model's "
       << f.layers << "; the " << f.compiledWhole
       << " shown or near the budget compiled whole)";
  }
  os << "\n\n";
  printHeader(os);
  if (all) {
    for (const explore::Evaluation &e : f.all) {
      if (e.compiled()) {
        printRow(os, e, !f.front.empty() && &e == &f.all[f.front.front()]);
      }
    }
  } else {
    for (size_t i : f.front) {
      printRow(os, f.all[i], i == f.front.front());
    }
  }
  if (f.front.empty()) {
    os << "  (nothing fits)\n";
  }
  if (all && f.layers > 0) {
    os << "  (~: extended from 2 and 3 layers)\n";
  }
  os << "\n";
  printGiven(os, f);
}

/// The recipe keys of `knobs` as a JSON object.
llvm::json::Object recipeJson(const explore::Knobs &knobs,
                              const TrainingRecipe &base) {
  llvm::json::Object keys;
  for (const auto &[key, value] : explore::recipeKeys(knobs, base)) {
    keys[key] = value;
  }
  return keys;
}

llvm::json::Object rowJson(const explore::Evaluation &e, bool best,
                           const std::string &pipeline,
                           const TrainingRecipe &base) {
  llvm::json::Object bytes;
  for (size_t c = 0; c < e.categoryBytes.size(); ++c) {
    bytes[runtime::kMemoryCategoryNames[c]] = e.categoryBytes[c];
  }
  llvm::json::Object knobs;
  for (const char *name : explore::kKnobNames) {
    knobs[name] = explore::knobValue(e.knobs, name);
  }
  llvm::json::Object row{{"best", best},
                         {"fits", e.fits},
                         {"extrapolated", e.extrapolated},
                         {"knobs", std::move(knobs)},
                         {"recipe", recipeJson(e.knobs, base)}};
  if (!e.compiled()) {
    row["error"] = e.error;
    return row;
  }
  row["device_peak_bytes"] = e.devicePeakBytes;
  row["host_peak_bytes"] = e.hostPeakBytes;
  row["bytes"] = std::move(bytes);
  row["predicted_step_seconds"] = e.stepSeconds;
  row["predicted_tokens_per_second"] = e.tokensPerSecond;
  row["pass_pipeline"] = pipeline;
  return row;
}

/// The rows to list: the front (best first), or every configuration.
std::vector<size_t> listedRows(const Findings &f, bool all) {
  if (!all) {
    return f.front;
  }
  std::vector<size_t> rows(f.all.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i] = i;
  }
  return rows;
}

} // namespace

namespace {

/// One compiling worker: its own MLIR context and caches.
struct Worker {
  std::unique_ptr<mlir::MLIRContext> context;
  std::unique_ptr<Evaluator> evaluator;
};

/// Runs `work(evaluator, i)` for i in [0, count) spread over the workers;
/// `onProgress(done)` is called from this thread as they finish.
void onWorkers(std::vector<Worker> &workers, size_t count,
               llvm::function_ref<void(Evaluator &, size_t)> work,
               llvm::function_ref<void(size_t)> onProgress = nullptr) {
  std::atomic<size_t> next{0}, done{0};
  std::vector<std::thread> threads;
  for (Worker &worker : workers) {
    threads.emplace_back([&, evaluator = worker.evaluator.get()] {
      for (size_t i = next++; i < count; i = next++) {
        work(*evaluator, i);
        ++done;
      }
    });
  }
  size_t reported = 0;
  while (onProgress && reported < count) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (size_t now = done; now != reported) {
      reported = now;
      onProgress(now);
    }
  }
  for (std::thread &thread : threads) {
    thread.join();
  }
}

/// Extrapolated figures are a first pass. A layer's parameters, gradients,
/// optimizer state and time grow linearly with depth (the figures match a
/// whole compile exactly), but the activation peak is the largest of
/// several sums that grow at different rates, so a line through 2 and 3
/// layers can miss it (by 56% with full recomputation at 12 layers, almost
/// always low; at most 1.4% high there). So everything reported is
/// compiled whole: the front, the recipe as given and its nearest fits,
/// until the front holds only whole compiles; and what an extrapolation
/// puts just over the budget (within 2%) is compiled whole too, in case it
/// does fit.
void refine(std::vector<Worker> &workers, Findings &f) {
  auto compileWhole = [&](const std::vector<size_t> &rows) {
    std::vector<size_t> pending;
    for (size_t i : rows) {
      if (f.all[i].extrapolated &&
          llvm::find(pending, i) == pending.end()) {
        pending.push_back(i);
      }
    }
    onWorkers(workers, pending.size(), [&](Evaluator &evaluator, size_t k) {
      size_t i = pending[k];
      f.all[i] = evaluator.evaluate(f.all[i].knobs, f.budgetBytes, true);
    });
    f.compiledWhole += static_cast<int64_t>(pending.size());
    return !pending.empty();
  };
  std::vector<size_t> nearBudget;
  for (size_t i = 0; i < f.all.size(); ++i) {
    const explore::Evaluation &e = f.all[i];
    if (f.budgetBytes > 0 && e.compiled() && !e.fits &&
        e.devicePeakBytes <= f.budgetBytes + f.budgetBytes / 50) {
      nearBudget.push_back(i);
    }
  }
  compileWhole(nearBudget);
  while (true) {
    f.front = explore::paretoFront(f.all);
    std::vector<size_t> report = f.front;
    if (f.given >= 0) {
      report.push_back(static_cast<size_t>(f.given));
      for (size_t i : explore::nearestFits(f.all, f.all[f.given].knobs, 3)) {
        report.push_back(i);
      }
    }
    if (!compileWhole(report)) {
      return;
    }
  }
}

/// Runs the search: every configuration of `space`, spread over the
/// workers, a progress line on stderr as it goes; then, when extrapolating,
/// compiles whole what it will report (refine).
Findings search(std::vector<Worker> &workers, const explore::Space &space,
                const explore::Knobs &given, int64_t budgetBytes) {
  Findings f;
  f.budgetBytes = budgetBytes;
  std::vector<explore::Knobs> knobs = space.enumerate();
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  f.all.resize(knobs.size());
  std::atomic<size_t> fitting{0};
  const bool terminal = llvm::errs().is_displayed();
  const size_t step = std::max<size_t>(1, knobs.size() / 10);
  size_t printed = 0;
  onWorkers(
      workers, knobs.size(),
      [&](Evaluator &evaluator, size_t i) {
        f.all[i] = evaluator.evaluate(knobs[i], budgetBytes);
        fitting += f.all[i].fits;
      },
      [&](size_t done) {
        if (!terminal && done / step == printed / step &&
            done != knobs.size()) {
          return;
        }
        printed = done;
        llvm::errs() << (terminal ? "\r" : "") << "tailor explore: " << done
                     << "/" << knobs.size() << " configurations, " << fitting
                     << " fit, " << llvm::format("%.1f", elapsed()) << " s"
                     << (terminal ? "" : "\n");
      });
  if (terminal) {
    llvm::errs() << "\n";
  }
  for (size_t i = 0; i < knobs.size(); ++i) {
    if (knobs[i] == given) {
      f.given = static_cast<int64_t>(i);
    }
  }
  f.front = explore::paretoFront(f.all);
  if (workers.front().evaluator->extrapolating) {
    f.layers = workers.front().evaluator->layers;
    refine(workers, f);
  }
  f.seconds = elapsed();
  return f;
}

/// --top K -o DIR: the K fastest rows' plans (with device code), and the
/// recipe keys of each beside it.
int writeTopPlans(Evaluator &evaluator, const Findings &f,
                  const ExploreFlags &flags) {
  if (std::error_code ec = llvm::sys::fs::create_directories(flags.outputDir)) {
    return exploreError("cannot create '" + flags.outputDir +
                        "': " + ec.message());
  }
  for (size_t rank = 0; rank < f.front.size() &&
                        rank < static_cast<size_t>(flags.top);
       ++rank) {
    const explore::Evaluation &e = f.all[f.front[rank]];
    llvm::Expected<CompileRequest> req = evaluator.requestFor(e.knobs);
    if (!req) {
      return exploreError(llvm::toString(req.takeError()));
    }
    mlir::OwningOpRef<mlir::ModuleOp> module;
    std::string error = evaluator.compile(*req, module);
    if (!error.empty()) {
      return exploreError("row " + llvm::Twine(rank + 1) + ": " + error);
    }
    std::string path =
        (flags.outputDir + "/top-" + llvm::Twine(rank + 1) + ".tplan").str();
    auto bytes = serializePlan(*module, flags.outputDir);
    if (failed(bytes)) {
      return exploreError("row " + llvm::Twine(rank + 1) +
                          ": the plan writer failed");
    }
    std::error_code ec;
    llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
    if (ec) {
      return exploreError("cannot write '" + path + "': " + ec.message());
    }
    out.os().write(reinterpret_cast<const char *>(bytes->data()),
                   bytes->size());
    out.keep();
    llvm::errs() << "tailor explore: wrote " << path << " (";
    for (const char *name : explore::kKnobNames) {
      llvm::errs() << (name == explore::kKnobNames.front() ? "" : ", ")
                   << name << " " << explore::knobValue(e.knobs, name);
    }
    llvm::errs() << ")\n";
  }
  return 0;
}

int writeText(const std::string &path, const std::string &text) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    return exploreError("cannot write '" + path + "': " + ec.message());
  }
  out.os() << text;
  out.keep();
  return 0;
}

/// The budget per rank, as compile's memory proof has it: the card's memory
/// less what the CUDA context keeps (none on a CPU target), or less still
/// (--budget-gib, else the recipe's device_memory_budget_gib).
int64_t budgetOf(const ExploreFlags &flags, const TrainingRecipe &base,
                 const HardwareSpec &hardware) {
  int64_t card = 0;
  if (hardware.isCuda() && hardware.memoryBytes > 0) {
    card = static_cast<int64_t>(hardware.memoryBytes) -
           memory::kCudaContextReserveBytes;
  }
  double gibs = flags.budgetGib > 0 ? flags.budgetGib
                                    : base.deviceMemoryBudgetGib;
  int64_t asked = static_cast<int64_t>(gibs * kGiB);
  if (asked > 0 && (card == 0 || asked < card)) {
    return asked;
  }
  return card;
}

void printJson(llvm::raw_ostream &os, const Findings &f,
               mlir::MLIRContext &context, Evaluator &evaluator,
               const TrainingRecipe &base, bool all) {
  llvm::json::Array rows;
  for (size_t i : listedRows(f, all)) {
    const explore::Evaluation &e = f.all[i];
    std::string pipeline;
    if (e.compiled()) {
      if (auto req = evaluator.requestFor(e.knobs)) {
        pipeline = impliedPipelineText(context, *req);
      } else {
        llvm::consumeError(req.takeError());
      }
    }
    rows.push_back(rowJson(e, !f.front.empty() && i == f.front.front(),
                           pipeline, base));
  }
  llvm::json::Object given;
  if (f.given >= 0) {
    const explore::Evaluation &g = f.all[f.given];
    given = rowJson(g, false, "", base);
    llvm::json::Array nearest;
    for (size_t i : explore::nearestFits(f.all, g.knobs, 3)) {
      nearest.push_back(explore::describeChange(g.knobs, f.all[i].knobs));
    }
    given["nearest_fits"] = std::move(nearest);
  }
  llvm::json::Object root{
      {"evaluated", static_cast<int64_t>(f.all.size())},
      {"fitting", static_cast<int64_t>(
                      llvm::count_if(f.all, [](auto &e) { return e.fits; }))},
      {"budget_bytes", f.budgetBytes},
      {"seconds", f.seconds},
      {"layers_extrapolated_to", f.layers},
      {"compiled_whole", f.compiledWhole},
      {"rows", std::move(rows)},
      {"given", f.given >= 0 ? llvm::json::Value(std::move(given)) : nullptr}};
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}

/// The best row as a `tailor compile` command line and its pass pipeline.
void printBest(llvm::raw_ostream &os, const Findings &f,
               mlir::MLIRContext &context, Evaluator &evaluator,
               const ExploreFlags &flags, const TrainingRecipe &base) {
  if (f.front.empty()) {
    return;
  }
  const explore::Knobs &best = f.all[f.front.front()].knobs;
  llvm::Expected<CompileRequest> req = evaluator.requestFor(best);
  if (!req) {
    llvm::consumeError(req.takeError());
    return;
  }
  os << "\nbest: tailor compile " << flags.input << " --recipe "
     << flags.recipePath << " --hardware " << flags.hardwareName;
  for (const auto &[key, value] : explore::recipeKeys(best, base)) {
    os << " " << key << "=" << value;
  }
  os << "\n  pass pipeline: " << impliedPipelineText(context, *req) << "\n";
}

/// Exit 1 when nothing fits, naming the smallest configuration found.
int reportNothingFits(const Findings &f, const explore::Knobs &given) {
  int64_t smallest = -1;
  for (const explore::Evaluation &e : f.all) {
    if (e.compiled() &&
        (smallest < 0 ||
         e.devicePeakBytes < f.all[smallest].devicePeakBytes)) {
      smallest = &e - f.all.data();
    }
  }
  if (smallest < 0) {
    return exploreError("no configuration compiled; the first error: " +
                        (f.all.empty() ? std::string("none evaluated")
                                       : f.all.front().error));
  }
  return exploreError(
      "nothing fits in " + sizeText(f.budgetBytes) +
      " per rank: the smallest is " +
      sizeText(f.all[smallest].devicePeakBytes) + " with " +
      explore::describeChange(given, f.all[smallest].knobs));
}

} // namespace

int runExplore(int argc, const char **argv) {
  llvm::cl::ResetCommandLineParser();
  ExploreFlags flags;
  llvm::cl::HideUnrelatedOptions(flags.category);
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv,
          "tailor explore: search the configurations that fit, predict the "
          "fastest\n",
          &llvm::errs())) {
    return 1;
  }
  if (flags.threads < 1 || flags.threads > 1024) {
    return exploreError("--threads must be in [1, 1024]");
  }
  if (flags.top < 0 || (flags.top > 0 && flags.outputDir.empty())) {
    return exploreError("--top K needs -o DIR (and K >= 1)");
  }
  if (flags.budgetGib < 0) {
    return exploreError("--budget-gib must not be negative");
  }
  llvm::Expected<HardwareSpec> hardware = resolveHardware(flags.hardwareName);
  if (!hardware) {
    return exploreError(llvm::toString(hardware.takeError()));
  }
  std::vector<std::string> overrides(flags.overrides.begin(),
                                     flags.overrides.end());
  llvm::Expected<TrainingRecipe> base = loadRecipe(flags.recipePath, overrides);
  if (!base) {
    return exploreError(llvm::toString(base.takeError()));
  }
  if (llvm::Error error = checkTrainingPrecision(
          *base, scheduleOptionsFor(*hardware, base->mixedPrecision, 1))) {
    return exploreError(llvm::toString(std::move(error)));
  }
  llvm::Expected<explore::Space> space = explore::makeSpace(
      *base, *hardware, flags.globalBatch, {flags.fixed.begin(),
                                            flags.fixed.end()});
  if (!space) {
    return exploreError(llvm::toString(space.takeError()));
  }
  if (flags.extrapolate != "auto" && flags.extrapolate != "on" &&
      flags.extrapolate != "off") {
    return exploreError("--extrapolate must be auto, on or off, got '" +
                        flags.extrapolate + "'");
  }
  if (flags.jobs < 0 || flags.jobs > 256) {
    return exploreError("--jobs must be in [0, 256] (0: the machine's cores)");
  }
  std::vector<explore::Knobs> all = space->enumerate();
  if (all.empty()) {
    return exploreError("--fix leaves no configuration to explore (full "
                        "fine-tuning keeps fp32 weights, parameter offload "
                        "skips full and zero3, optimizer offload needs "
                        "ddp)");
  }
  mlir::DialectRegistry registry;
  registerTailorDialects(registry);
  std::vector<Worker> workers(
      flags.jobs > 0 ? flags.jobs
                     : std::max(1u, std::thread::hardware_concurrency()));
  for (Worker &worker : workers) {
    worker.context = std::make_unique<mlir::MLIRContext>(registry);
    worker.context->disableMultithreading();
    worker.context->printOpOnDiagnostic(false);
    worker.evaluator = std::make_unique<Evaluator>(*worker.context, flags,
                                                   *hardware, *base);
    llvm::Expected<CompileRequest> req =
        worker.evaluator->requestFor(all.front());
    if (!req) {
      return exploreError(llvm::toString(req.takeError()));
    }
    if (std::string error = worker.evaluator->chooseMode(*req);
        !error.empty()) {
      return exploreError(error);
    }
  }
  mlir::MLIRContext &context = *workers.front().context;
  Evaluator &evaluator = *workers.front().evaluator;
  const int64_t budget = budgetOf(flags, *base, *hardware);
  // The recipe as given, at the global batch searched (--global-batch may
  // change its accumulation).
  explore::Knobs given = explore::knobsOf(*base, *hardware);
  if (space->globalBatch % (given.microBatch * space->dataParallel) == 0) {
    given.accumulation =
        space->globalBatch / (given.microBatch * space->dataParallel);
  }
  Findings f = search(workers, *space, given, budget);
  if (flags.json) {
    printJson(llvm::outs(), f, context, evaluator, *base, flags.all);
  } else {
    printTables(llvm::outs(), f, flags.all);
    printBest(llvm::outs(), f, context, evaluator, flags, *base);
  }
  if (!flags.plot.empty()) {
    std::string title = "tailor explore: " +
                        llvm::sys::path::filename(flags.input).str() + " on " +
                        flags.hardwareName;
    if (int rc = writeText(flags.plot, explore::plotSvg(f.all, f.front, budget,
                                                        title))) {
      return rc;
    }
  }
  if (f.front.empty()) {
    return reportNothingFits(f, given);
  }
  if (flags.top > 0) {
    return writeTopPlans(evaluator, f, flags);
  }
  return 0;
}

} // namespace tailor
