//===- Quantize.cpp - frozen linear weights stored quantized --------------===//
//
// Chooses which weights are stored quantized and rewrites their reads into
// tg.dequantize (see the pass description in Passes.td). The choice is made
// per linear layer, by module path, and applies to a weight only when every
// read of it is the weight of a linear layer: a weight that is also an
// embedding table (tied embeddings) or feeds anything else keeps its float
// storage, since the other reader would need the whole dense tensor.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGQuant.h"
#include "runtime/quant/GptqCheckpoint.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

namespace tailor::graph {
#define GEN_PASS_DEF_QUANTIZEPASS
#include "passes/graph/Passes.h.inc"
} // namespace tailor::graph

using namespace mlir;
using namespace tailor;

namespace {

/// True when dotted `path` has `name` as one of its components.
bool hasPathComponent(StringRef path, StringRef name) {
  SmallVector<StringRef> parts;
  path.split(parts, '.');
  return llvm::is_contained(parts, name);
}

/// True for the `lora_A` / `lora_B` weights tailor-insert-lora declares.
bool isLoraWeight(StringRef name) {
  return name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight");
}

SmallVector<std::string> splitList(StringRef list) {
  SmallVector<StringRef> parts;
  list.split(parts, ',', -1, /*KeepEmpty=*/false);
  SmallVector<std::string> names;
  for (StringRef part : parts) {
    names.push_back(part.trim().str());
  }
  return names;
}

/// How one read of a weight reaches the linear layers: the param_ref, and
/// the transpose between it and them when the file stores W^T.
struct WeightRead {
  tg::ParamRefOp ref;
  tg::TransposeOp transpose;
};

/// The linear weights that may be stored quantized, found by walking the
/// module: candidates by parameter, with the Hugging Face module path of
/// their linear layer and every read of them.
struct Candidates {
  llvm::MapVector<StringAttr, tg::ParamOp> params;
  /// Parameters that also feed something else, or an unselected layer.
  DenseSet<StringAttr> rejected;
  /// What checkpoints name each candidate, also when the exporter renamed
  /// the weight.
  DenseMap<StringAttr, StringAttr> modulePaths;
  llvm::MapVector<StringAttr, SmallVector<WeightRead>> reads;
};

struct QuantizePass : public graph::impl::QuantizePassBase<QuantizePass> {
  using QuantizePassBase::QuantizePassBase;
  void runOnOperation() override;

private:
  /// The spec every weight starts from: the options, or a GPTQ
  /// checkpoint's settings (opened into `checkpointFile`).
  FailureOr<quant::QuantSpec>
  baseSpec(ModuleOp module,
           std::unique_ptr<quant::GptqCheckpoint> &checkpointFile);
  /// Weights of the linear layers `modules` selects and `skip` does not.
  void findCandidates(ModuleOp module, Candidates &found);
  /// Keeps a candidate only if every read of it is a linear layer's weight.
  void collectReads(ModuleOp module, Candidates &found);
  /// The `quant` dictionary of `param` as `spec`, with its checkpoint
  /// entry when there is one.
  FailureOr<DictionaryAttr> quantAttr(tg::ParamOp param,
                                      const quant::QuantSpec &spec,
                                      bool transposed, StringAttr modulePath,
                                      quant::GptqCheckpoint *checkpointFile);
};

} // namespace

/// The read of a linear layer's weight: `param_ref` directly ([out, in]) or
/// through a 2-D transpose (the file holds [in, out]); null otherwise.
static WeightRead weightReadOf(tg::LinearOp linear) {
  Value weight = linear.getWeight();
  WeightRead read;
  if (auto transpose = weight.getDefiningOp<tg::TransposeOp>()) {
    if (transpose.getPermutation() != ArrayRef<int64_t>{1, 0}) {
      return {};
    }
    read.transpose = transpose;
    weight = transpose.getInput();
  }
  read.ref = weight.getDefiningOp<tg::ParamRefOp>();
  return read.ref ? read : WeightRead{};
}

/// True when every use of `value` is the weight operand of a tg.linear.
static bool onlyLinearWeights(Value value) {
  return !value.use_empty() && llvm::all_of(value.getUses(), [](OpOperand &use) {
    return llvm::isa<tg::LinearOp>(use.getOwner()) &&
           use.getOperandNumber() == 1;
  });
}

/// Reads `read`'s weight through a tg.dequantize of `weightType` instead.
static void dequantizeAt(WeightRead &read, RankedTensorType weightType) {
  OpBuilder builder(read.ref);
  auto dequantize = tg::DequantizeOp::create(
      builder, read.ref.getLoc(), weightType, read.ref.getNameAttr(),
      /*storage=*/Value());
  if (read.transpose) {
    read.transpose.getResult().replaceAllUsesWith(dequantize.getResult());
    read.transpose.erase();
  } else {
    read.ref.getResult().replaceAllUsesWith(dequantize.getResult());
  }
  read.ref.erase();
}

FailureOr<quant::QuantSpec>
QuantizePass::baseSpec(ModuleOp module,
                       std::unique_ptr<quant::GptqCheckpoint> &checkpointFile) {
  quant::QuantSpec base;
  if (!quant::parseScheme(scheme, base.scheme)) {
    return module.emitError() << "unknown quantization scheme '" << scheme
                              << "' (expected nf4, int8, gptq, bf16 or fp16)";
  }
  base.blockSize = static_cast<int>(blockSize);
  base.doubleQuant = doubleQuant;
  base.nestedBlockSize = static_cast<int>(nestedBlockSize);
  base.bits = static_cast<int>(bits);
  base.groupSize = static_cast<int>(groupSize);
  base.actOrder = actOrder;
  base.outlierThreshold = static_cast<float>(outlierThreshold);
  if (checkpoint.empty()) {
    return base;
  }
  // A GPTQ checkpoint fixes the settings and must hold every weight.
  if (base.scheme != quant::Scheme::GPTQ) {
    return module.emitError()
           << "a quantization checkpoint is read for gptq only, "
              "not "
           << scheme;
  }
  std::string error;
  checkpointFile = quant::GptqCheckpoint::open(checkpoint, error);
  if (!checkpointFile) {
    return module.emitError() << error;
  }
  base.bits = checkpointFile->options().bits;
  base.groupSize = checkpointFile->options().groupSize;
  base.actOrder = checkpointFile->options().actOrder;
  return base;
}

void QuantizePass::findCandidates(ModuleOp module, Candidates &found) {
  SmallVector<std::string> wanted = splitList(modules);
  SmallVector<std::string> skipped = splitList(skip);
  bool allLinear = wanted.size() == 1 && wanted.front() == "all-linear";
  SymbolTable symbols(module);
  module.walk([&](tg::LinearOp linear) {
    auto path =
        linear->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName);
    WeightRead read = weightReadOf(linear);
    if (!path || !read.ref || linear->hasAttr(tg::TGDialect::kTiedAttrName)) {
      return;
    }
    bool selected =
        (allLinear || llvm::any_of(wanted, [&](const std::string &name) {
           return hasPathComponent(path.getValue(), name);
         })) &&
        llvm::none_of(skipped, [&](const std::string &name) {
          return hasPathComponent(path.getValue(), name);
        });
    StringAttr name = read.ref.getNameAttr().getAttr();
    if (!selected) {
      found.rejected.insert(name);
      return;
    }
    auto param = symbols.lookup<tg::ParamOp>(read.ref.getName());
    // Only weights the model file holds: adapters are made at run time,
    // and a bound adapter's LoRA weights (an inference plan's, frozen but
    // read from the adapter file) stay f32, as PEFT keeps them.
    if (param && !param.getTrainable() && !param.getQuantAttr() &&
        !isLoraWeight(param.getSymName()) &&
        llvm::isa_and_nonnull<tg::ExternalDataAttr>(param.getLocationAttr()) &&
        param.getTensorType().getRank() == 2 &&
        llvm::isa<FloatType>(param.getTensorType().getElementType())) {
      found.params.insert({name, param});
      found.modulePaths[name] = path;
    }
  });
}

void QuantizePass::collectReads(ModuleOp module, Candidates &found) {
  module.walk([&](tg::ParamRefOp ref) {
    StringAttr name = ref.getNameAttr().getAttr();
    if (!found.params.contains(name) || found.rejected.contains(name)) {
      return;
    }
    WeightRead read{ref, {}};
    bool ok = onlyLinearWeights(ref.getResult());
    if (!ok && ref->hasOneUse()) {
      if (auto transpose =
              llvm::dyn_cast<tg::TransposeOp>(*ref->user_begin())) {
        read.transpose = transpose;
        ok = transpose.getPermutation() == ArrayRef<int64_t>{1, 0} &&
             onlyLinearWeights(transpose.getResult());
      }
    }
    if (!ok) {
      found.rejected.insert(name);
      return;
    }
    found.reads[name].push_back(read);
  });
}

FailureOr<DictionaryAttr>
QuantizePass::quantAttr(tg::ParamOp param, const quant::QuantSpec &spec,
                        bool transposed, StringAttr modulePath,
                        quant::GptqCheckpoint *checkpointFile) {
  MLIRContext *context = &getContext();
  if (std::string problem = quant::checkSpec(spec); !problem.empty()) {
    return param.emitError()
           << "cannot quantize @" << param.getSymName() << " [" << spec.rows
           << ", " << spec.cols << "] as " << scheme << ": " << problem;
  }
  DictionaryAttr dict = tg::quantSpecToDict(context, spec, transposed);
  if (!checkpointFile) {
    return dict;
  }
  // Checkpoints name Linear modules as Hugging Face does.
  StringRef hfName = modulePath.getValue();
  const quant::GptqCheckpointModule *found = checkpointFile->find(hfName.str());
  if (!found || found->spec.rows != spec.rows ||
      found->spec.cols != spec.cols) {
    return param.emitError() << "checkpoint '" << checkpoint << "' has no "
                             << "quantized module '" << hfName << "' ["
                             << spec.rows << ", " << spec.cols << "]";
  }
  NamedAttrList entries(dict.getValue());
  entries.set("checkpoint", StringAttr::get(context, checkpoint));
  entries.set("module", modulePath);
  return entries.getDictionary(context);
}

void QuantizePass::runOnOperation() {
  ModuleOp module = getOperation();
  std::unique_ptr<quant::GptqCheckpoint> checkpointFile;
  FailureOr<quant::QuantSpec> base = baseSpec(module, checkpointFile);
  if (failed(base)) {
    return signalPassFailure();
  }
  if (splitList(modules).empty()) {
    module.emitError() << "no modules to quantize (modules is empty)";
    return signalPassFailure();
  }
  Candidates found;
  findCandidates(module, found);
  collectReads(module, found);

  // --- Rewrite: the parameter's storage, and dequantize at each read ------
  int64_t count = 0;
  for (auto &[name, param] : found.params) {
    auto it = found.reads.find(name);
    if (found.rejected.contains(name) || it == found.reads.end()) {
      continue;
    }
    // All reads agree on the layout (a file holds one tensor one way).
    bool transposed = static_cast<bool>(it->second.front().transpose);
    if (llvm::any_of(it->second, [&](const WeightRead &read) {
          return static_cast<bool>(read.transpose) != transposed;
        })) {
      continue;
    }
    RankedTensorType stored = param.getTensorType();
    quant::QuantSpec spec = *base;
    spec.rows = stored.getDimSize(transposed ? 1 : 0);
    spec.cols = stored.getDimSize(transposed ? 0 : 1);
    if (spec.scheme == quant::Scheme::Int8 && spec.outlierThreshold > 0) {
      spec.outlierColumns = outlierColumns > 0
                                ? outlierColumns
                                : std::max<int64_t>(1, spec.cols / 64);
    }
    FailureOr<DictionaryAttr> dict =
        quantAttr(param, spec, transposed, found.modulePaths.lookup(name),
                  checkpointFile.get());
    if (failed(dict)) {
      return signalPassFailure();
    }
    param.setQuantAttr(*dict);
    auto weightType = RankedTensorType::get({spec.rows, spec.cols},
                                            stored.getElementType());
    for (WeightRead &read : it->second) {
      dequantizeAt(read, weightType);
    }
    ++count;
  }
  if (count == 0) {
    module.emitError() << "no frozen linear weight matches the quantization "
                          "modules '"
                       << modules << "'";
    return signalPassFailure();
  }
}
