//===- QuantizeCommand.cpp - `tailor quantize` (offline GPTQ) --------------===//
//
// tailor quantize MODEL.onnx --scheme gptq --calib DATA -o OUT.safetensors
//                 [--bits N] [--group-size N] [--act-order] [--damp X]
//                 [--samples N] [--seq N] [--modules LIST] [--skip LIST]
//                 [--compare-rtn] [--threads N]
//
// The one compile-time step that reads weights (DESIGN.md). It picks the
// weights tailor-quantize would store as gptq (every frozen linear weight
// but lm_head by default), then works one transformer layer at a time:
//
//   1. a forward plan of the model cut after layer L, whose outputs are the
//      inputs of layer L's linear layers (DCE drops the later layers), runs
//      on the calibration sequences; their X^T X accumulate into one GPTQ
//      Hessian per distinct input (q/k/v share one);
//   2. each weight of the layer is read from the model's data file (one
//      tensor at a time) and quantized by GPTQ against its Hessian;
//   3. only the packed result stays in memory (1/8 of the fp32 weight at
//      4 bits); the Hessians of the layer are dropped.
//
// Calibration inputs come from the float model (AutoGPTQ instead feeds each
// layer the outputs of the layers already quantized); this keeps every
// layer's calibration independent. The checkpoint is AutoGPTQ's format
// (GptqCheckpoint.h): the quantized modules under their Hugging Face names
// plus every other float tensor of the model, and quantize_config.json
// beside it. With --compare-rtn each module's reconstruction error
// ||(W - Q) X^T|| / ||W X^T|| is printed for GPTQ and for round-to-nearest at
// the same bits and group size.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"

#include "compiler/PlanWriter.h"
#include "compiler/Registration.h"
#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGQuant.h"
#include "frontends/onnx/OnnxImporter.h"
#include "passes/graph/Passes.h"
#include "passes/memory/Passes.h"
#include "compiler/Pipelines.h"
#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/quant/GptqCheckpoint.h"
#include "runtime/quant/Half.h"
#include "runtime/train/DataLoader.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <unistd.h>

namespace tailor {

namespace {

/// A weight to quantize: where its float bytes are and what it becomes.
struct Target {
  std::string param;      // the tg.param symbol
  std::string module;     // Hugging Face module path (checkpoint prefix)
  quant::QuantSpec spec;
  bool transposed = false; // the file holds W^T
  std::string file;
  uint64_t offset = 0, length = 0;
  mlir::Type element;
  int64_t layer = -1; // -1: outside the decoder layers (lm_head)
  std::vector<uint8_t> storage;
};

int fail(const llvm::Twine &message) {
  llvm::errs() << "tailor quantize: error: " << message << "\n";
  return 1;
}

/// Reads `length` bytes at `offset` of `path`; "" or the error.
std::string readBytes(const std::string &path, uint64_t offset,
                      uint64_t length, std::vector<uint8_t> &out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return "cannot open '" + path + "': " + std::strerror(errno);
  }
  out.resize(length);
  uint64_t done = 0;
  while (done < length) {
    ssize_t got = ::pread(fd, out.data() + done, length - done,
                          static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      ::close(fd);
      return "cannot read '" + path + "' at byte " +
             std::to_string(offset + done) + ": " +
             (got < 0 ? std::strerror(errno) : "unexpected end of file");
    }
    done += static_cast<uint64_t>(got);
  }
  ::close(fd);
  return "";
}

/// The float weight W [rows, cols] of `target`, read from the model file.
std::string readWeight(const Target &target, const std::string &modelDir,
                       std::vector<float> &w) {
  std::string path = llvm::sys::path::is_absolute(target.file)
                         ? target.file
                         : (modelDir + "/" + target.file);
  std::vector<uint8_t> raw;
  if (std::string problem = readBytes(path, target.offset, target.length, raw);
      !problem.empty()) {
    return "parameter '" + target.param + "': " + problem;
  }
  int64_t rows = target.spec.rows, cols = target.spec.cols;
  std::vector<float> stored(static_cast<size_t>(rows * cols));
  if (target.element.isF32()) {
    std::memcpy(stored.data(), raw.data(), raw.size());
  } else {
    for (size_t i = 0; i < stored.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, raw.data() + 2 * i, 2);
      stored[i] = target.element.isBF16() ? quant::bf16ToFloat(bits)
                                          : quant::fp16ToFloat(bits);
    }
  }
  if (!target.transposed) {
    w = std::move(stored);
    return "";
  }
  w.resize(stored.size());
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      w[r * cols + c] = stored[c * rows + r];
    }
  }
  return "";
}

/// ||(W - Q) X^T||_F / ||W X^T||_F from the Hessian H = 2/n X^T X:
/// ||A X^T||^2 = n/2 * sum_r a_r H a_r^T, and the n/2 cancels.
double relativeError(const quant::QuantSpec &spec, const std::vector<float> &w,
                     const uint8_t *storage, const std::vector<double> &h) {
  int64_t rows = spec.rows, cols = spec.cols;
  std::vector<float> q(static_cast<size_t>(cols));
  std::vector<double> delta(static_cast<size_t>(cols));
  double error = 0, norm = 0;
  for (int64_t r = 0; r < rows; ++r) {
    quant::dequantizeTile(spec, storage, r, r + 1, 0, cols, q.data(), cols);
    const float *wr = w.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      delta[c] = static_cast<double>(wr[c]) - q[c];
    }
    for (int64_t i = 0; i < cols; ++i) {
      const double *hi = h.data() + i * cols;
      double dh = 0, wh = 0;
      for (int64_t j = 0; j < cols; ++j) {
        dh += hi[j] * delta[j];
        wh += hi[j] * wr[j];
      }
      error += delta[i] * dh;
      norm += wr[i] * wh;
    }
  }
  return norm > 0 ? std::sqrt(error / norm) : 0.0;
}

namespace cl = llvm::cl;

/// The command line. Constructing it registers the options, so it is built
/// after the parser is reset and lives as long as the command.
struct QuantizeFlags {
  cl::OptionCategory category{"tailor quantize options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<model.onnx>"),
                             cl::Required, cl::cat(category)};
  cl::opt<std::string> output{"o", cl::desc("the checkpoint to write"),
                              cl::value_desc("out.safetensors"), cl::Required,
                              cl::cat(category)};
  cl::opt<std::string> scheme{
      "scheme", cl::desc("gptq (the one scheme that needs calibration)"),
      cl::init("gptq"), cl::cat(category)};
  cl::opt<std::string> calib{
      "calib", cl::desc("calibration tokens (any data `tailor train` reads)"),
      cl::value_desc("path"), cl::Required, cl::cat(category)};
  cl::opt<std::string> dataDType{"data-dtype",
                                 cl::desc("token type of raw .bin files"),
                                 cl::init("uint16"), cl::cat(category)};
  cl::opt<int64_t> samples{"samples", cl::desc("calibration sequences"),
                           cl::init(128), cl::cat(category)};
  cl::opt<int64_t> seq{"seq", cl::desc("tokens per calibration sequence"),
                       cl::init(512), cl::cat(category)};
  cl::opt<int> bits{"bits", cl::desc("2, 3, 4 or 8"), cl::init(4),
                    cl::cat(category)};
  cl::opt<int> groupSize{"group-size",
                         cl::desc("input columns per group (-1: one group)"),
                         cl::init(128), cl::cat(category)};
  cl::opt<bool> actOrder{
      "act-order",
      cl::desc("quantize columns by decreasing Hessian diagonal "
               "(desc_act)"),
      cl::init(false), cl::cat(category)};
  cl::opt<double> damp{"damp", cl::desc("damping, a fraction of mean(diag H)"),
                       cl::init(0.01), cl::cat(category)};
  cl::opt<std::string> modules{"modules", cl::desc("modules to quantize"),
                               cl::init("all-linear"), cl::cat(category)};
  cl::opt<std::string> skip{"skip", cl::desc("modules kept in float"),
                            cl::init("lm_head"), cl::cat(category)};
  cl::opt<bool> compareRtn{
      "compare-rtn",
      cl::desc("print each module's reconstruction error for GPTQ and "
               "round-to-nearest"),
      cl::init(false), cl::cat(category)};
  cl::opt<int> threads{"threads", cl::desc("CPU threads (0: all cores)"),
                       cl::init(0), cl::cat(category)};

  /// Parses and checks the flags; false once an error is printed.
  bool parse(int argc, const char **argv) {
    cl::HideUnrelatedOptions(category);
    if (!cl::ParseCommandLineOptions(argc, argv, "tailor quantize\n")) {
      return false;
    }
    if (scheme != "gptq") {
      fail("--scheme " + scheme +
           ": only gptq is quantized offline; nf4, int8, bf16 and fp16 "
           "are quantized by the runtime when it binds the weights "
           "(recipe key quantization)");
      return false;
    }
    if (samples < 1 || seq < 2) {
      fail("--samples must be >= 1 and --seq >= 2");
      return false;
    }
    return true;
  }
};

/// A layer's calibration taps: the distinct inputs of its linear layers, as
/// results of the cut forward function. Lowering replaces the function, so
/// their widths and the weights each feeds are kept here.
struct LayerTaps {
  std::vector<int64_t> cols;
  std::vector<std::vector<size_t>> weights;
};

/// Quantizes the chosen weights one transformer layer at a time (the steps
/// in the file comment). Every step prints its own error and returns false.
class GptqQuantizer {
public:
  GptqQuantizer(mlir::MLIRContext &context, const QuantizeFlags &flags,
                mlir::ModuleOp model)
      : context(context), flags(flags), model(model) {
    options.bits = flags.bits;
    options.groupSize = flags.groupSize;
    options.actOrder = flags.actOrder;
    options.dampPercent = flags.damp;
    options.trueSequential = false;
    modelDir = llvm::sys::path::parent_path(flags.input).str();
    if (modelDir.empty()) {
      modelDir = ".";
    }
  }

  /// The weights tailor-quantize would store as gptq, grouped by layer.
  bool chooseTargets();
  /// Reads the calibration sequences once and prints what will be done.
  bool readCalibration();
  /// Runs every layer's calibration and quantizes its weights.
  bool quantizeLayers();
  /// Writes the AutoGPTQ checkpoint and quantize_config.json.
  bool writeCheckpoint();

private:
  bool quantizeLayer(int64_t layer, const std::vector<size_t> &members);
  /// Makes `cut`'s forward return the inputs of the linear layers of
  /// `members`; no taps when none of them is reached.
  bool cutAtLinearInputs(mlir::ModuleOp cut, const std::vector<size_t> &members,
                         LayerTaps &taps);
  /// Lowers the cut forward to a plan and loads it.
  std::unique_ptr<runtime::LoadedPlan> planCalibration(mlir::ModuleOp cut,
                                                       int64_t layer);
  /// Runs the plan on every calibration sequence, accumulating one Hessian
  /// per tap.
  bool accumulateHessians(const runtime::LoadedPlan &plan,
                          const LayerTaps &taps,
                          std::vector<quant::GptqHessian> &hessians);
  /// GPTQ-quantizes each tap's weights against its Hessian.
  bool quantizeWeights(const LayerTaps &taps,
                       const std::vector<quant::GptqHessian> &hessians);
  /// With --compare-rtn: prints the GPTQ and round-to-nearest errors.
  bool compareWithRtn(const Target &target, const std::vector<float> &w,
                      const std::vector<double> &h);

  mlir::MLIRContext &context;
  const QuantizeFlags &flags;
  mlir::ModuleOp model;
  quant::GptqOptions options;
  std::string modelDir;
  std::string planDir;
  std::vector<Target> targets;
  std::map<int64_t, std::vector<size_t>> byLayer;
  std::vector<std::vector<int64_t>> sequences;
};

bool GptqQuantizer::chooseTargets() {
  mlir::OwningOpRef<mlir::ModuleOp> chosen = model.clone();
  mlir::PassManager pm(&context);
  graph::QuantizePassOptions quantize;
  quantize.scheme = "gptq";
  quantize.modules = flags.modules;
  quantize.skip = flags.skip;
  quantize.bits = flags.bits;
  quantize.groupSize = flags.groupSize;
  quantize.actOrder = flags.actOrder;
  pm.addPass(graph::createQuantizePass(quantize));
  if (failed(pm.run(*chosen))) {
    fail("cannot choose the weights to quantize");
    return false;
  }
  // Each weight's transformer layer and Hugging Face module path (the
  // linear layer's, which exports that rename weights keep).
  std::map<std::string, int64_t> layers;
  std::map<std::string, std::string> paths;
  chosen->walk([&](tg::LinearOp linear) {
    if (auto dequantize =
            linear.getWeight().getDefiningOp<tg::DequantizeOp>()) {
      auto layer = linear->getAttrOfType<mlir::IntegerAttr>(
          tg::TGDialect::kLayerAttrName);
      layers[dequantize.getName().str()] = layer ? layer.getInt() : -1;
      if (auto path = linear->getAttrOfType<mlir::StringAttr>(
              tg::TGDialect::kModuleAttrName)) {
        paths[dequantize.getName().str()] = path.str();
      }
    }
  });
  for (tg::ParamOp param : chosen->getOps<tg::ParamOp>()) {
    mlir::DictionaryAttr dict = param.getQuantAttr();
    auto external =
        llvm::dyn_cast_or_null<tg::ExternalDataAttr>(param.getLocationAttr());
    if (!dict || !external) {
      continue;
    }
    Target target;
    target.param = param.getSymName().str();
    llvm::StringRef hfName = param.getSymName();
    hfName.consume_back(".weight");
    target.module =
        paths.count(target.param) ? paths[target.param] : hfName.str();
    target.spec =
        *tg::quantSpecFromDict(dict, [&] { return param.emitError(); });
    target.transposed = tg::quantSourceTransposed(dict);
    target.file = external.getFile().str();
    target.offset = external.getOffset();
    target.length = external.getLength();
    target.element = param.getTensorType().getElementType();
    target.layer = layers.count(target.param) ? layers[target.param] : -1;
    targets.push_back(std::move(target));
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    // Outside the layers (lm_head) comes last.
    byLayer[targets[i].layer < 0 ? INT64_MAX : targets[i].layer].push_back(i);
  }
  return true;
}

bool GptqQuantizer::readCalibration() {
  train::DataOptions dataOptions;
  dataOptions.path = flags.calib;
  dataOptions.tokenDType = flags.dataDType;
  dataOptions.sequenceLen = flags.seq;
  dataOptions.microBatchSize = 1;
  dataOptions.shuffle = false;
  // GPTQ wants full sequences of real tokens: examples are concatenated,
  // never padded.
  dataOptions.layout = train::SequenceLayout::Stream;
  std::string error;
  auto loader = train::DataLoader::open(dataOptions, error);
  if (!loader) {
    fail(error);
    return false;
  }
  sequences.resize(static_cast<size_t>(flags.samples));
  std::vector<int64_t> labels(static_cast<size_t>(flags.seq));
  for (auto &tokens : sequences) {
    tokens.resize(static_cast<size_t>(flags.seq));
    loader->next(tokens.data(), labels.data());
  }
  llvm::outs() << "tailor quantize: " << targets.size() << " weights in "
               << byLayer.size() << " groups, GPTQ " << flags.bits
               << "-bit, group " << flags.groupSize
               << (flags.actOrder ? ", act-order" : "") << "; " << flags.samples
               << " calibration sequences of " << flags.seq << " tokens from "
               << loader->describe() << "\n";
  return true;
}

bool GptqQuantizer::quantizeLayers() {
  planDir = llvm::sys::path::parent_path(flags.output).str();
  if (!planDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(planDir)) {
      fail("cannot create '" + planDir + "': " + ec.message());
      return false;
    }
  }
  for (auto &[layer, members] : byLayer) {
    if (!quantizeLayer(layer, members)) {
      return false;
    }
  }
  return true;
}

bool GptqQuantizer::quantizeLayer(int64_t layer,
                                  const std::vector<size_t> &members) {
  // The plan whose outputs are this layer's linear inputs.
  mlir::OwningOpRef<mlir::ModuleOp> cut = model.clone();
  LayerTaps taps;
  if (!cutAtLinearInputs(*cut, members, taps)) {
    return false;
  }
  if (taps.cols.empty()) {
    return true;
  }
  std::unique_ptr<runtime::LoadedPlan> plan = planCalibration(*cut, layer);
  if (!plan) {
    return false;
  }
  std::vector<quant::GptqHessian> hessians;
  if (!accumulateHessians(*plan, taps, hessians) ||
      !quantizeWeights(taps, hessians)) {
    return false;
  }
  llvm::outs() << "  layer "
               << (layer == INT64_MAX ? std::string("(none)")
                                      : std::to_string(layer))
               << ": " << members.size() << " weights quantized\n";
  return true;
}

bool GptqQuantizer::cutAtLinearInputs(mlir::ModuleOp cut,
                                      const std::vector<size_t> &members,
                                      LayerTaps &taps) {
  auto forward = cut.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward) {
    fail("the model has no forward function");
    return false;
  }
  std::map<std::string, size_t> wanted;
  for (size_t i : members) {
    wanted[targets[i].param] = i;
  }
  llvm::MapVector<mlir::Value, std::vector<size_t>> inputs;
  forward.walk([&](tg::LinearOp linear) {
    mlir::Value weight = linear.getWeight();
    if (auto transpose = weight.getDefiningOp<tg::TransposeOp>()) {
      weight = transpose.getInput();
    }
    auto ref = weight.getDefiningOp<tg::ParamRefOp>();
    if (!ref || !wanted.count(ref.getName().str())) {
      return;
    }
    inputs[linear.getInput()].push_back(wanted[ref.getName().str()]);
  });
  if (inputs.empty()) {
    return true;
  }
  mlir::Operation *ret = forward.getBody().front().getTerminator();
  mlir::OpBuilder builder(ret);
  llvm::SmallVector<mlir::Value> results;
  llvm::SmallVector<mlir::Type> resultTypes;
  for (auto &entry : inputs) {
    results.push_back(entry.first);
    resultTypes.push_back(entry.first.getType());
    taps.cols.push_back(
        llvm::cast<mlir::RankedTensorType>(entry.first.getType())
            .getShape()
            .back());
    taps.weights.push_back(entry.second);
  }
  mlir::func::ReturnOp::create(builder, ret->getLoc(), results);
  ret->erase();
  forward.setFunctionType(builder.getFunctionType(
      forward.getFunctionType().getInputs(), resultTypes));
  forward.removeResAttrsAttr();
  return true;
}

std::unique_ptr<runtime::LoadedPlan>
GptqQuantizer::planCalibration(mlir::ModuleOp cut, int64_t layer) {
  mlir::PassManager pm(&context);
  pm.addNestedPass<mlir::func::FuncOp>(mlir::createCanonicalizerPass());
  memory::LowerToSchedPassOptions lower;
  lower.threads = flags.threads > 0 ? flags.threads : 1;
  pm.addPass(memory::createLowerToSchedPass(lower));
  if (failed(pm.run(cut))) {
    fail("cannot plan the calibration forward of layer " +
         std::to_string(layer));
    return nullptr;
  }
  auto bytes = serializePlan(cut, planDir.empty() ? "." : planDir);
  if (failed(bytes)) {
    return nullptr;
  }
  std::string problem;
  auto plan = runtime::LoadedPlan::loadFromMemory(
      bytes->data(), bytes->size(), planDir.empty() ? "." : planDir,
      "calibration plan of layer " + std::to_string(layer),
      runtime::LoadOptions(), problem);
  if (!plan) {
    fail(problem);
  }
  return plan;
}

bool GptqQuantizer::accumulateHessians(
    const runtime::LoadedPlan &plan, const LayerTaps &taps,
    std::vector<quant::GptqHessian> &hessians) {
  std::string problem;
  int status = 0;
  auto session = runtime::Session::create(plan, flags.threads, problem, status);
  if (!session) {
    fail(problem);
    return false;
  }
  const auto *planInputs = plan.root().inputs();
  const auto *planOutputs = plan.root().outputs();
  if (!planInputs || planInputs->size() != 1 ||
      plan.bufferBytes(planInputs->Get(0)->buffer()) !=
          static_cast<uint64_t>(flags.seq) * sizeof(int64_t) ||
      !planOutputs || planOutputs->size() != taps.cols.size()) {
    fail("calibration needs a model whose one input is the int64 token ids");
    return false;
  }
  auto *ids =
      static_cast<int64_t *>(session->bufferData(planInputs->Get(0)->buffer()));
  for (int64_t cols : taps.cols) {
    hessians.emplace_back(cols);
  }
  for (const auto &tokens : sequences) {
    std::memcpy(ids, tokens.data(), tokens.size() * sizeof(int64_t));
    if (std::string runProblem = session->run(); !runProblem.empty()) {
      fail(runProblem);
      return false;
    }
    for (size_t t = 0; t < hessians.size(); ++t) {
      uint32_t buffer = planOutputs->Get(static_cast<uint32_t>(t))->buffer();
      int64_t cols = hessians[t].cols();
      int64_t rows =
          static_cast<int64_t>(plan.bufferBytes(buffer) / sizeof(float)) / cols;
      hessians[t].add(static_cast<const float *>(session->bufferData(buffer)),
                      rows);
    }
  }
  return true;
}

bool GptqQuantizer::quantizeWeights(
    const LayerTaps &taps, const std::vector<quant::GptqHessian> &hessians) {
  for (size_t tap = 0; tap < taps.weights.size(); ++tap) {
    const std::vector<double> &h = hessians[tap].matrix();
    for (size_t i : taps.weights[tap]) {
      Target &target = targets[i];
      std::vector<float> w;
      if (std::string problem = readWeight(target, modelDir, w);
          !problem.empty()) {
        fail(problem);
        return false;
      }
      target.storage.assign(quant::gptqStorageBytes(target.spec), 0);
      if (std::string problem = quant::gptqQuantize(
              target.spec, w.data(), h.data(), options, target.storage.data());
          !problem.empty()) {
        fail("module '" + target.module + "': " + problem);
        return false;
      }
      if (flags.compareRtn && !compareWithRtn(target, w, h)) {
        return false;
      }
    }
  }
  return true;
}

bool GptqQuantizer::compareWithRtn(const Target &target,
                                   const std::vector<float> &w,
                                   const std::vector<double> &h) {
  std::vector<uint8_t> rtn(target.storage.size());
  if (std::string problem =
          quant::rtnQuantize(target.spec, w.data(), rtn.data());
      !problem.empty()) {
    fail("module '" + target.module + "': " + problem);
    return false;
  }
  double gptqError = relativeError(target.spec, w, target.storage.data(), h);
  double rtnError = relativeError(target.spec, w, rtn.data(), h);
  llvm::outs() << llvm::format(
      "  %-40s [%lld, %lld]  ||(W-Q)X||/||WX||: "
      "gptq %.6f  rtn %.6f  (%s)\n",
      target.module.c_str(), static_cast<long long>(target.spec.rows),
      static_cast<long long>(target.spec.cols), gptqError, rtnError,
      gptqError < rtnError ? "gptq lower" : "GPTQ NOT LOWER");
  return true;
}

bool GptqQuantizer::writeCheckpoint() {
  std::vector<quant::GptqModuleTensors> written;
  for (const Target &target : targets) {
    written.push_back({target.module, target.spec, target.storage.data()});
  }
  if (std::string problem =
          quant::writeGptqCheckpoint(flags.output, written, options);
      !problem.empty()) {
    fail(problem);
    return false;
  }
  llvm::outs() << "tailor quantize: wrote " << flags.output << " ("
               << written.size() << " modules) and quantize_config.json\n";
  return true;
}

/// Imports the model at its calibration shape (batch 1, --seq tokens) and
/// runs the graph pipeline on it; null once an error is reported.
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext &context,
                                              const QuantizeFlags &flags) {
  onnx_import::ImportOptions importOptions;
  importOptions.batch = 1;
  importOptions.seq = flags.seq;
  auto imported =
      onnx_import::importOnnxFile(context, flags.input, importOptions);
  if (failed(imported)) {
    return nullptr;
  }
  mlir::OwningOpRef<mlir::ModuleOp> model = std::move(*imported);
  mlir::PassManager pm(&context);
  buildGraphPipeline(pm);
  if (failed(pm.run(*model))) {
    fail("the graph pipeline failed on '" + flags.input + "'");
    return nullptr;
  }
  return model;
}

} // namespace

int runQuantize(int argc, const char **argv) {
  cl::ResetCommandLineParser();
  QuantizeFlags flags;
  if (!flags.parse(argc, argv)) {
    return 1;
  }

  mlir::DialectRegistry registry;
  registerTailorDialects(registry);
  mlir::MLIRContext context(registry);
  context.disableMultithreading();
  context.printOpOnDiagnostic(false);
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    llvm::errs() << "tailor quantize: error: " << diag.str() << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> model = importModel(context, flags);
  if (!model) {
    return 1;
  }
  GptqQuantizer quantizer(context, flags, *model);
  if (!quantizer.chooseTargets() || !quantizer.readCalibration() ||
      !quantizer.quantizeLayers() || !quantizer.writeCheckpoint()) {
    return 1;
  }
  return 0;
}

} // namespace tailor
