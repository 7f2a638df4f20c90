//===- ImportContext.h - state shared by the importer and op builders -----===//
//
// The importer walks the graph in topological order and calls one builder per
// node (chosen by the import table in OpTable.cpp). A builder sees its node
// through a NodeContext: inputs as compile-time tensors (folded on the host)
// or as MLIR values, attributes, the opset, and an error helper that names
// the node. Builders fold when every input is known and emit tg ops
// otherwise.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_FRONTENDS_ONNX_IMPORTCONTEXT_H
#define TAILOR_FRONTENDS_ONNX_IMPORTCONTEXT_H

#include "frontends/onnx/HostTensor.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/TypeUtilities.h"

#include <memory>
#include <optional>

namespace onnx {
class NodeProto;
class AttributeProto;
class TensorProto;
} // namespace onnx

namespace tailor::onnx_import {

class GraphImporter;

/// What an ONNX value name stands for while importing.
struct ImportedValue {
  /// A run-time tensor (null if the value is only known at compile time).
  mlir::Value value;
  /// Compile-time contents, when known.
  std::shared_ptr<const HostTensor> host;
  /// The initializer behind a parameter, so a builder that needs a small
  /// parameter's values can still read them.
  const onnx::TensorProto *initializer = nullptr;
};

/// One node being imported.
class NodeContext {
public:
  NodeContext(GraphImporter &importer, const onnx::NodeProto &node,
              int64_t index, int64_t opset, mlir::Location loc);

  const onnx::NodeProto &node() const { return nodeProto; }
  int64_t opset() const { return opsetVersion; }
  mlir::Location loc() const { return location; }
  mlir::OpBuilder &builder();
  mlir::MLIRContext *context();

  /// Starts an error naming the node, its op, domain, opset and index.
  mlir::InFlightDiagnostic error();
  /// The error for a compile-time index outside dim `axis` of `size`; when
  /// the import bound symbolic input dims, it says the export's shape
  /// arithmetic does not hold at those shapes.
  mlir::InFlightDiagnostic indexOutOfRange(int64_t index, int64_t axis,
                                           int64_t size);

  //===--- inputs ---------------------------------------------------------===//
  size_t numInputs() const;
  /// Whether input `i` is present (ONNX marks omitted optional inputs with an
  /// empty name).
  bool hasInput(size_t i) const;
  /// Whether input `i` is known at compile time.
  bool isConstant(size_t i);
  /// Whether every present input is known at compile time.
  bool allConstant();
  /// Input `i` as a compile-time tensor; fails with a message saying the node
  /// needs `what` to be a constant.
  mlir::FailureOr<const HostTensor *> constant(size_t i, llvm::StringRef what);
  /// Input `i` as a compile-time tensor whose values are held in memory (a
  /// lazy one is evaluated); fails past the folding limit.
  mlir::FailureOr<HostTensor> heldConstant(size_t i, llvm::StringRef what);
  /// Input `i` as integers (shape-like inputs).
  mlir::FailureOr<std::vector<int64_t>> constantInts(size_t i,
                                                     llvm::StringRef what);
  /// Input `i` as a run-time value (materializes constants and parameters).
  mlir::FailureOr<mlir::Value> value(size_t i);
  /// Static shape and element type of input `i`.
  llvm::ArrayRef<int64_t> shape(size_t i);
  ElementType elementType(size_t i);
  int64_t rank(size_t i) { return static_cast<int64_t>(shape(i).size()); }

  //===--- attributes -----------------------------------------------------===//
  const onnx::AttributeProto *attribute(llvm::StringRef name) const;
  bool hasAttribute(llvm::StringRef name) const {
    return attribute(name) != nullptr;
  }
  int64_t attrInt(llvm::StringRef name, int64_t fallback) const;
  double attrFloat(llvm::StringRef name, double fallback) const;
  std::string attrString(llvm::StringRef name, llvm::StringRef fallback) const;
  std::optional<std::vector<int64_t>> attrInts(llvm::StringRef name) const;

  /// Normalizes `axis` against `rank` (negative counts from the end); fails
  /// with a message if it is out of range.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what);

  //===--- outputs --------------------------------------------------------===//
  size_t numOutputs() const;
  void setOutput(size_t i, mlir::Value value);
  /// Fails unless a folded result of `dims` fits the folding limit (and its
  /// element count fits int64): for folds that hold their result.
  mlir::LogicalResult checkFoldSize(llvm::ArrayRef<int64_t> dims);
  /// Sets a compile-time output; fails if it is larger than the folding
  /// limit.
  mlir::LogicalResult setOutput(size_t i, HostTensor tensor);

  //===--- helpers for builders -------------------------------------------===//
  mlir::RankedTensorType tensorType(llvm::ArrayRef<int64_t> shape,
                                    ElementType type);
  mlir::RankedTensorType tensorType(llvm::ArrayRef<int64_t> shape,
                                    mlir::Type elementType);
  /// Emits a reshape of `value` unless it already has `shape`.
  mlir::Value reshape(mlir::Value value, llvm::ArrayRef<int64_t> shape);
  /// Materializes a compile-time tensor as a run-time value (a constant, or
  /// a tg.band_mask for a mask); fails on tensors too large to hold.
  mlir::FailureOr<mlir::Value> materialize(const HostTensor &tensor);
  /// A scalar constant of `value`'s element type, shaped [] for broadcasting.
  mlir::Value scalarLike(mlir::Value like, double number);
  /// An error callback for the shape rules in TGShapes.h.
  std::function<mlir::InFlightDiagnostic()> shapeErrorFn();

private:
  GraphImporter &importer;
  const onnx::NodeProto &nodeProto;
  int64_t nodeIndex;
  int64_t opsetVersion;
  mlir::Location location;
};

/// Decodes a TensorProto's values; `rawData` stands in for its raw_data
/// (the bytes read from external data, or the proto's own raw_data).
llvm::Expected<HostTensor> decodeTensorProto(const onnx::TensorProto &tensor,
                                             llvm::StringRef rawData,
                                             llvm::StringRef what);

using OpBuilderFn = mlir::LogicalResult (*)(NodeContext &);

/// One row of the import table: ops of `opType` in `domain` whose model
/// opset lies in [sinceVersion, untilVersion] are imported by `build`.
struct OpImporter {
  const char *domain;
  const char *opType;
  int64_t sinceVersion;
  int64_t untilVersion;
  OpBuilderFn build;
};

/// The import table (OpTable.cpp).
llvm::ArrayRef<OpImporter> importTable();
/// The row for `opType` in `domain` at `opset`, or null.
const OpImporter *lookupImporter(llvm::StringRef domain, llvm::StringRef opType,
                                 int64_t opset);
/// How many leading inputs `opType` requires at `opset` (checked before its
/// builder runs, so builders may use those inputs unguarded).
int64_t requiredInputs(llvm::StringRef opType, int64_t opset);
/// Whether any row imports `opType` in `domain` (at some opset).
bool isKnownOp(llvm::StringRef domain, llvm::StringRef opType);

/// Builders registered by each op family file.
void appendElementwiseImporters(std::vector<OpImporter> &table);
void appendTensorImporters(std::vector<OpImporter> &table);
void appendNeuralImporters(std::vector<OpImporter> &table);
void appendIndexingImporters(std::vector<OpImporter> &table);

/// The last opset the importer knows for the default domain.
constexpr int64_t kMaxDefaultOpset = 23;

} // namespace tailor::onnx_import

#endif // TAILOR_FRONTENDS_ONNX_IMPORTCONTEXT_H
