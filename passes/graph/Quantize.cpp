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

struct QuantizePass : public graph::impl::QuantizePassBase<QuantizePass> {
  using QuantizePassBase::QuantizePassBase;
  void runOnOperation() override;
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

void QuantizePass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *context = &getContext();

  quant::QuantSpec base;
  if (!quant::parseScheme(scheme, base.scheme)) {
    module.emitError() << "unknown quantization scheme '" << scheme
                       << "' (expected nf4, int8, gptq, bf16 or fp16)";
    return signalPassFailure();
  }
  base.blockSize = static_cast<int>(blockSize);
  base.doubleQuant = doubleQuant;
  base.nestedBlockSize = static_cast<int>(nestedBlockSize);
  base.bits = static_cast<int>(bits);
  base.groupSize = static_cast<int>(groupSize);
  base.actOrder = actOrder;
  base.outlierThreshold = static_cast<float>(outlierThreshold);
  // A GPTQ checkpoint fixes the settings and must hold every weight.
  std::unique_ptr<quant::GptqCheckpoint> gptqCheckpoint;
  if (!checkpoint.empty()) {
    if (base.scheme != quant::Scheme::GPTQ) {
      module.emitError() << "a quantization checkpoint is read for gptq only, "
                            "not "
                         << scheme;
      return signalPassFailure();
    }
    std::string error;
    gptqCheckpoint = quant::GptqCheckpoint::open(checkpoint, error);
    if (!gptqCheckpoint) {
      module.emitError() << error;
      return signalPassFailure();
    }
    base.bits = gptqCheckpoint->options().bits;
    base.groupSize = gptqCheckpoint->options().groupSize;
    base.actOrder = gptqCheckpoint->options().actOrder;
  }
  SmallVector<std::string> wanted = splitList(modules);
  SmallVector<std::string> skipped = splitList(skip);
  bool allLinear = wanted.size() == 1 && wanted.front() == "all-linear";
  if (wanted.empty()) {
    module.emitError() << "no modules to quantize (modules is empty)";
    return signalPassFailure();
  }

  // --- Candidates: weights of selected linear layers, by parameter --------
  llvm::MapVector<StringAttr, tg::ParamOp> candidates;
  DenseSet<StringAttr> rejected;
  // The Hugging Face module path of each candidate's linear layer: what
  // checkpoints name it, also when the exporter renamed the weight.
  DenseMap<StringAttr, StringAttr> modulePaths;
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
      rejected.insert(name);
      return;
    }
    auto param = module.lookupSymbol<tg::ParamOp>(read.ref.getNameAttr());
    // Only weights the model file holds: adapters are made at run time.
    if (param && !param.getTrainable() && !param.getQuantAttr() &&
        llvm::isa_and_nonnull<tg::ExternalDataAttr>(param.getLocationAttr()) &&
        param.getTensorType().getRank() == 2 &&
        llvm::isa<FloatType>(param.getTensorType().getElementType())) {
      candidates.insert({name, param});
      modulePaths[name] = path;
    }
  });

  // --- Every read of a candidate must be a linear layer's weight ---------
  llvm::MapVector<StringAttr, SmallVector<WeightRead>> reads;
  module.walk([&](tg::ParamRefOp ref) {
    StringAttr name = ref.getNameAttr().getAttr();
    if (!candidates.contains(name) || rejected.contains(name)) {
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
      rejected.insert(name);
      return;
    }
    reads[name].push_back(read);
  });

  // --- Rewrite: the parameter's storage, and dequantize at each read ------
  int64_t count = 0;
  for (auto &[name, param] : candidates) {
    auto it = reads.find(name);
    if (rejected.contains(name) || it == reads.end()) {
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
    quant::QuantSpec spec = base;
    spec.rows = stored.getDimSize(transposed ? 1 : 0);
    spec.cols = stored.getDimSize(transposed ? 0 : 1);
    if (spec.scheme == quant::Scheme::Int8 && spec.outlierThreshold > 0) {
      spec.outlierColumns = outlierColumns > 0
                                ? outlierColumns
                                : std::max<int64_t>(1, spec.cols / 64);
    }
    if (std::string problem = quant::checkSpec(spec); !problem.empty()) {
      param.emitError() << "cannot quantize @" << param.getSymName() << " ["
                        << spec.rows << ", " << spec.cols << "] as " << scheme
                        << ": " << problem;
      return signalPassFailure();
    }
    DictionaryAttr dict = tg::quantSpecToDict(context, spec, transposed);
    if (gptqCheckpoint) {
      // Checkpoints name Linear modules as Hugging Face does.
      StringRef hfName = modulePaths.lookup(name).getValue();
      const quant::GptqCheckpointModule *found =
          gptqCheckpoint->find(hfName.str());
      if (!found || found->spec.rows != spec.rows ||
          found->spec.cols != spec.cols) {
        param.emitError() << "checkpoint '" << checkpoint << "' has no "
                          << "quantized module '" << hfName << "' ["
                          << spec.rows << ", " << spec.cols << "]";
        return signalPassFailure();
      }
      NamedAttrList entries(dict.getValue());
      entries.set("checkpoint", StringAttr::get(context, checkpoint));
      entries.set("module", modulePaths.lookup(name));
      dict = entries.getDictionary(context);
    }
    param.setQuantAttr(dict);
    auto weightType = RankedTensorType::get({spec.rows, spec.cols},
                                            stored.getElementType());
    for (WeightRead &read : it->second) {
      OpBuilder builder(read.ref);
      auto dequantize = tg::DequantizeOp::create(
          builder, read.ref.getLoc(), weightType, read.ref.getNameAttr());
      if (read.transpose) {
        read.transpose.getResult().replaceAllUsesWith(dequantize.getResult());
        read.transpose.erase();
      } else {
        read.ref.getResult().replaceAllUsesWith(dequantize.getResult());
      }
      read.ref.erase();
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
