//===- ExportNames.cpp - Hugging Face names of renamed weights ------------===//

#include "passes/graph/ExportNames.h"

#include "dialects/tg/TGOps.h"

using namespace mlir;

namespace tailor::graph {

/// Records the Hugging Face name of every linear layer's weight and bias
/// whose parameter the exporter renamed, so checkpoints of trained weights
/// use the names (and the [out, in] layout) Hugging Face loads.
void recordExportNames(ModuleOp module) {
  UnitAttr unit = UnitAttr::get(module.getContext());
  module.walk([&](tg::LinearOp linear) {
    auto path =
        linear->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName);
    if (!path || linear->hasAttr(tg::TGDialect::kTiedAttrName)) {
      return;
    }
    auto annotate = [&](Value value, StringRef suffix) {
      bool transposed = false;
      if (auto transpose = value.getDefiningOp<tg::TransposeOp>()) {
        value = transpose.getInput();
        transposed = true;
      }
      tg::ParamOp param;
      if (auto ref = value.getDefiningOp<tg::ParamRefOp>()) {
        param = module.lookupSymbol<tg::ParamOp>(ref.getNameAttr());
      } else if (auto dequantize = value.getDefiningOp<tg::DequantizeOp>()) {
        // A weight stored quantized (tailor-quantize): its `quant` records
        // the file's layout, so only the name is needed.
        param = module.lookupSymbol<tg::ParamOp>(dequantize.getNameAttr());
      }
      std::string name = (path.getValue() + suffix).str();
      if (!param) {
        return;
      }
      // A parameter under its own Hugging Face name is stored as Hugging
      // Face stores it: one the linear reads transposed is [in, out] there
      // too (GPT-2's Conv1D), which an adapter's merge must know (PEFT's
      // fan_in_fan_out).
      if (param.getSymName() == name) {
        if (transposed && suffix == ".weight") {
          param->setAttr(kExportFanInFanOutAttrName, unit);
        }
        return;
      }
      param->setAttr(tg::TGDialect::kExportNameAttrName,
                     StringAttr::get(module.getContext(), name));
      if (transposed) {
        param->setAttr(tg::TGDialect::kExportTransposedAttrName, unit);
      }
    };
    annotate(linear.getWeight(), ".weight");
    if (linear.getBias()) {
      annotate(linear.getBias(), ".bias");
    }
  });
}

} // namespace tailor::graph
