//===- OpTable.cpp - the ONNX import table ---------------------------------===//
//
// Rows (domain, op type, opset range) -> builder, gathered from the op family
// files. A model imports each domain at one opset; a node is imported by the
// row whose range contains it. An op whose semantics changed across opsets
// has one row per range (see Squeeze, Split, Slice, ReduceMean).
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ImportContext.h"

#include "llvm/ADT/StringMap.h"

namespace tailor::onnx_import {

namespace {

struct Table {
  std::vector<OpImporter> rows;
  /// "domain/op" -> indices into rows.
  llvm::StringMap<llvm::SmallVector<size_t, 2>> byName;

  Table() {
    appendElementwiseImporters(rows);
    appendTensorImporters(rows);
    appendNeuralImporters(rows);
    appendIndexingImporters(rows);
    for (size_t i = 0; i < rows.size(); ++i) {
      byName[key(rows[i].domain, rows[i].opType)].push_back(i);
    }
  }

  static std::string key(llvm::StringRef domain, llvm::StringRef opType) {
    return (domain + "/" + opType).str();
  }
};

const Table &table() {
  static const Table instance;
  return instance;
}

} // namespace

llvm::ArrayRef<OpImporter> importTable() { return table().rows; }

const OpImporter *lookupImporter(llvm::StringRef domain, llvm::StringRef opType,
                                 int64_t opset) {
  const Table &t = table();
  auto it = t.byName.find(Table::key(domain, opType));
  if (it == t.byName.end()) {
    return nullptr;
  }
  for (size_t index : it->second) {
    const OpImporter &row = t.rows[index];
    if (row.sinceVersion <= opset && opset <= row.untilVersion) {
      return &row;
    }
  }
  return nullptr;
}

int64_t requiredInputs(llvm::StringRef opType, int64_t opset) {
  static const llvm::StringMap<int64_t> counts = {
      {"Add", 2}, {"Sub", 2}, {"Mul", 2}, {"Div", 2}, {"Pow", 2}, {"Mod", 2},
      {"Equal", 2}, {"Less", 2}, {"Greater", 2}, {"LessOrEqual", 2},
      {"GreaterOrEqual", 2}, {"And", 2}, {"Or", 2}, {"Xor", 2},
      {"Where", 3}, {"CastLike", 2}, {"Range", 3}, {"CumSum", 2},
      {"Expand", 2}, {"Tile", 2}, {"Gather", 2}, {"GatherND", 2}, {"MatMul", 2},
      {"Gemm", 2}, {"Einsum", 1}, {"LayerNormalization", 2},
      {"RMSNormalization", 2}, {"SimplifiedLayerNormalization", 2},
      {"Constant", 0}, {"GatherElements", 2}, {"Scatter", 3},
      {"ScatterElements", 3}, {"ScatterND", 3},
  };
  if (opType == "Reshape") {
    return opset >= 5 ? 2 : 1;
  }
  if (opType == "Slice") {
    return opset >= 10 ? 3 : 1;
  }
  auto it = counts.find(opType);
  return it == counts.end() ? 1 : it->second;
}

bool isKnownOp(llvm::StringRef domain, llvm::StringRef opType) {
  return table().byName.count(Table::key(domain, opType)) != 0;
}

} // namespace tailor::onnx_import
