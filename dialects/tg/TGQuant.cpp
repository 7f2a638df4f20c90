//===- TGQuant.cpp - quantization specs as MLIR attributes ----------------===//

#include "dialects/tg/TGQuant.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace tailor::tg {

FailureOr<RankedTensorType>
quantizedStorageType(DictionaryAttr dict,
                     llvm::function_ref<InFlightDiagnostic()> emitError) {
  FailureOr<quant::QuantSpec> spec = quantSpecFromDict(dict, emitError);
  if (failed(spec)) {
    return failure();
  }
  return RankedTensorType::get(
      {static_cast<int64_t>(quant::storageBytes(*spec))},
      IntegerType::get(dict.getContext(), 8, IntegerType::Unsigned));
}

FailureOr<quant::QuantSpec>
quantSpecFromDict(DictionaryAttr dict,
                  llvm::function_ref<InFlightDiagnostic()> emitError) {
  quant::QuantSpec spec;
  auto scheme = dict.getAs<StringAttr>("scheme");
  if (!scheme || !quant::parseScheme(scheme.getValue(), spec.scheme)) {
    return emitError() << "quantization needs a scheme (nf4, int8, gptq, bf16 "
                          "or fp16), got "
                       << dict.get("scheme");
  }
  static constexpr StringLiteral kKnown[] = {
      "scheme", "rows", "cols", "block_size", "double_quant",
      "nested_block_size", "bits", "group_size", "act_order",
      "outlier_threshold", "outlier_columns", "source_transposed",
      "checkpoint", "module"};
  for (NamedAttribute entry : dict) {
    if (!llvm::is_contained(kKnown, entry.getName().getValue())) {
      return emitError() << "unknown quantization key '"
                         << entry.getName().getValue() << "'";
    }
  }
  bool ok = true;
  auto integer = [&](StringRef key, auto &field) {
    if (Attribute attr = dict.get(key)) {
      auto value = llvm::dyn_cast<IntegerAttr>(attr);
      if (!value) {
        ok = false;
        emitError() << "quantization key '" << key << "' must be an integer";
        return;
      }
      field = static_cast<std::remove_reference_t<decltype(field)>>(
          value.getValue().getSExtValue());
    }
  };
  auto flag = [&](StringRef key, bool &field) {
    if (Attribute attr = dict.get(key)) {
      auto value = llvm::dyn_cast<BoolAttr>(attr);
      if (!value) {
        ok = false;
        emitError() << "quantization key '" << key << "' must be true or false";
        return;
      }
      field = value.getValue();
    }
  };
  integer("rows", spec.rows);
  integer("cols", spec.cols);
  integer("block_size", spec.blockSize);
  flag("double_quant", spec.doubleQuant);
  integer("nested_block_size", spec.nestedBlockSize);
  integer("bits", spec.bits);
  integer("group_size", spec.groupSize);
  flag("act_order", spec.actOrder);
  integer("outlier_columns", spec.outlierColumns);
  if (Attribute attr = dict.get("outlier_threshold")) {
    auto value = llvm::dyn_cast<FloatAttr>(attr);
    if (!value) {
      return emitError() << "quantization key 'outlier_threshold' must be a "
                            "float";
    }
    spec.outlierThreshold = static_cast<float>(value.getValueAsDouble());
  }
  bool transposed = false;
  flag("source_transposed", transposed);
  if (!ok) {
    return failure();
  }
  if (std::string problem = quant::checkSpec(spec); !problem.empty()) {
    return emitError() << problem;
  }
  return spec;
}

bool quantSourceTransposed(DictionaryAttr dict) {
  auto value = dict.getAs<BoolAttr>("source_transposed");
  return value && value.getValue();
}

DictionaryAttr quantSpecToDict(MLIRContext *context,
                               const quant::QuantSpec &spec,
                               bool sourceTransposed) {
  Builder b(context);
  NamedAttrList attrs;
  attrs.append("scheme", b.getStringAttr(quant::schemeName(spec.scheme)));
  attrs.append("rows", b.getI64IntegerAttr(spec.rows));
  attrs.append("cols", b.getI64IntegerAttr(spec.cols));
  switch (spec.scheme) {
  case quant::Scheme::NF4:
    attrs.append("block_size", b.getI64IntegerAttr(spec.blockSize));
    attrs.append("double_quant", b.getBoolAttr(spec.doubleQuant));
    attrs.append("nested_block_size", b.getI64IntegerAttr(spec.nestedBlockSize));
    break;
  case quant::Scheme::GPTQ:
    attrs.append("bits", b.getI64IntegerAttr(spec.bits));
    attrs.append("group_size", b.getI64IntegerAttr(spec.groupSize));
    attrs.append("act_order", b.getBoolAttr(spec.actOrder));
    break;
  case quant::Scheme::Int8:
    attrs.append("outlier_threshold", b.getF64FloatAttr(spec.outlierThreshold));
    attrs.append("outlier_columns", b.getI64IntegerAttr(spec.outlierColumns));
    break;
  case quant::Scheme::BF16:
  case quant::Scheme::FP16:
    break;
  }
  attrs.append("source_transposed", b.getBoolAttr(sourceTransposed));
  return attrs.getDictionary(context);
}

} // namespace tailor::tg
