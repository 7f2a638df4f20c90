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

bool isKnownOp(llvm::StringRef domain, llvm::StringRef opType) {
  return table().byName.count(Table::key(domain, opType)) != 0;
}

} // namespace tailor::onnx_import
