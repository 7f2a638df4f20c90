//===- OnnxImporter.cpp - ONNX ModelProto -> tg ----------------------------===//
//
// The graph walk: parse and check the model, bind symbolic dims, turn
// initializers into parameter symbols, order the nodes, and hand each node to
// its builder from the import table. Everything that names a place in an
// error message is formatted here.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/RawDataOffsets.h"
#include "frontends/onnx/ImportContext.h"
#include "frontends/onnx/LazyTensor.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>


using namespace mlir;

namespace tailor::onnx_import {

/// "node #7 'name'", or "node #7 producing 'out'" for an unnamed node (the
/// textual syntax, some exporters), as errors name nodes.
static std::string describeNode(const onnx::NodeProto &node, int64_t index) {
  std::string text = "node #" + std::to_string(index);
  if (!node.name().empty() || node.output_size() == 0) {
    return text + " '" + node.name() + "'";
  }
  return text + " producing '" + node.output(0) + "'";
}

namespace {

/// Initializers larger than this are never read as masks (a 4096 x 4096
/// mask; a 7B model's weights are never read at all).
constexpr int64_t kMaxStoredMaskElements = int64_t(1) << 24;

/// The default ONNX domain has two spellings.
bool isDefaultDomain(llvm::StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

llvm::StringRef displayDomain(llvm::StringRef domain) {
  return domain.empty() ? llvm::StringRef("ai.onnx") : domain;
}

} // namespace

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

class GraphImporter {
public:
  GraphImporter(MLIRContext &context, const onnx::ModelProto &model,
                llvm::StringRef path, const ImportOptions &options,
                llvm::StringMap<std::pair<uint64_t, uint64_t>> rawData = {})
      : context(context), model(model), graph(model.graph()), path(path.str()),
        options(options), builder(&context), rawDataOffsets(std::move(rawData)) {}

  FailureOr<OwningOpRef<ModuleOp>> run();

  //===--- services for NodeContext ----------------------------------------===//
  OpBuilder &getBuilder() { return builder; }
  const std::string &modelPath() const { return path; }
  int64_t maxFoldedElements() const { return options.maxFoldedElements; }
  /// The inputs whose symbolic dims this import bound, with the shapes it
  /// bound them to (`input_ids [2, 16]`); empty when every dim was fixed.
  const std::string &boundInputShapes() const { return boundShapes; }
  /// Looks up an ONNX value by name (initializers are materialized lazily).
  FailureOr<ImportedValue *> lookup(llvm::StringRef name, NodeContext &node);
  void define(llvm::StringRef name, ImportedValue value) {
    values[name] = std::move(value);
  }
  /// Reads an initializer's bytes as a compile-time tensor (only for small
  /// tensors a builder needs as constants).
  FailureOr<HostTensor> readInitializer(const onnx::TensorProto &tensor,
                                        NodeContext &node);
  Type elementType(ElementType type);
  /// Turns a compile-time tensor into a run-time value: a tg.band_mask for
  /// a causal or banded mask, a constant otherwise (at most the folding
  /// limit's elements). `node` names the place in an error (null: the
  /// graph's outputs).
  FailureOr<Value> materialize(const HostTensor &tensor, Location loc,
                               NodeContext *node);

private:
  LogicalResult checkModel();
  LogicalResult bindInputs(func::FuncOp func);
  LogicalResult checkFixedTokenShape(const onnx::ValueInfoProto &input);
  FailureOr<int64_t> bindDim(const onnx::ValueInfoProto &input, int64_t axis,
                             const onnx::TensorShapeProto_Dimension &dim,
                             int64_t rank, int32_t elemType);
  LogicalResult collectInitializers();
  FailureOr<SmallVector<int64_t>> orderNodes();
  LogicalResult importNode(int64_t index);
  LogicalResult emitOutputs(func::FuncOp func);
  LogicalResult checkTensorSizes(func::FuncOp func);
  /// An initializer that holds a causal or banded mask (a tril buffer, a
  /// mask the exporter constant-folded) is a compile-time tensor, not a
  /// parameter, so it becomes a generated mask. Reads the first row of an
  /// initializer of rank >= 2 (a weight fails there), and all of one that
  /// passes; nullopt for anything else. Inline raw_data always; external
  /// data only when every op it feeds is one a mask buffer feeds
  /// (feedsOnlyMaskOps), so weights stay unread.
  std::optional<HostTensor> readStoredMask(const onnx::TensorProto &tensor);
  /// Whether every node reading value `name` is one a mask feeds (Slice,
  /// Where, a comparison, Add, ...; through Identity), never one weights
  /// feed (MatMul, Gemm, Gather, the Transpose before a MatMul).
  bool feedsOnlyMaskOps(llvm::StringRef name, int depth);
  /// The first `length` bytes of an external initializer's data, or nullopt
  /// when its location is not a readable file inside the model's folder
  /// (a speculative read: errors are for the weights' own binding).
  std::optional<std::string> peekExternalBytes(const onnx::TensorProto &tensor,
                                               uint64_t length);
  /// The parameter symbol for initializer `tensor` (created on first use).
  FailureOr<tg::ParamOp> paramFor(const onnx::TensorProto &tensor);
  LogicalResult checkExternalData(const onnx::TensorProto &tensor,
                                  uint64_t &offset, uint64_t &length,
                                  std::string &file);
  InFlightDiagnostic modelError() {
    return mlir::emitError(UnknownLoc::get(&context)) << path << ": ";
  }

  MLIRContext &context;
  const onnx::ModelProto &model;
  const onnx::GraphProto &graph;
  std::string path;
  const ImportOptions &options;
  OpBuilder builder;
  /// Where each inline initializer's raw_data lies in the model file.
  llvm::StringMap<std::pair<uint64_t, uint64_t>> rawDataOffsets;
  ModuleOp module;

  int64_t defaultOpset = 0;
  llvm::StringMap<int64_t> opsets;
  llvm::StringMap<ImportedValue> values;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<tg::ParamOp> params;
  llvm::StringMap<int64_t> boundDims;
  std::string boundShapes;
  /// The nodes reading each value name (built on first use).
  llvm::StringMap<SmallVector<const onnx::NodeProto *, 2>> consumers;
  llvm::StringSet<> missingDataFiles;
  /// Uses left of each value name (node inputs and graph outputs): a
  /// compile-time tensor is released when its last use is imported, so
  /// folding a 2048 x 2048 mask per layer does not keep every copy alive.
  llvm::StringMap<int64_t> remainingUses;
  /// Byte sizes of external data files, by resolved path (-1: missing).
  llvm::StringMap<int64_t> dataFileSizes;
};

//===----------------------------------------------------------------------===//
// Model checks and inputs
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::checkModel() {
  if (!model.has_graph()) {
    return modelError() << "the model has no graph";
  }
  for (const onnx::OperatorSetIdProto &opset : model.opset_import()) {
    opsets[isDefaultDomain(opset.domain()) ? "" : opset.domain()] =
        opset.version();
  }
  auto it = opsets.find("");
  if (it == opsets.end()) {
    // IR version 1-2 models may omit opset_import; ONNX then means opset 1,
    // which predates every op semantics we import.
    return modelError() << "the model does not import the default ONNX "
                           "domain (no opset_import entry for 'ai.onnx')";
  }
  defaultOpset = it->second;
  if (defaultOpset < 7 || defaultOpset > kMaxDefaultOpset) {
    return modelError() << "the model imports the default domain at opset "
                        << defaultOpset << "; tailor imports opsets 7 to "
                        << kMaxDefaultOpset;
  }
  return success();
}

Type GraphImporter::elementType(ElementType type) {
  switch (type) {
  case ElementType::Float:
    return builder.getF32Type();
  case ElementType::Float16:
    return builder.getF16Type();
  case ElementType::BFloat16:
    return builder.getBF16Type();
  case ElementType::Double:
    return builder.getF64Type();
  case ElementType::Bool:
    return builder.getI1Type();
  case ElementType::Int8:
  case ElementType::UInt8:
    return builder.getIntegerType(8);
  case ElementType::Int16:
  case ElementType::UInt16:
    return builder.getIntegerType(16);
  case ElementType::Int32:
  case ElementType::UInt32:
    return builder.getI32Type();
  case ElementType::Int64:
  case ElementType::UInt64:
    return builder.getI64Type();
  }
  return builder.getF32Type();
}

/// Whether a symbolic dim name reads as a batch or a sequence dim.
static bool namesBatch(llvm::StringRef name) {
  return name.contains_insensitive("batch");
}
static bool namesSequence(llvm::StringRef name) {
  return name.contains_insensitive("seq") ||
         name.contains_insensitive("sequence") ||
         name.contains_insensitive("token");
}

/// A token-id input ([batch, seq] integers) exported with fixed dims must
/// agree with a batch and sequence length the user asked for.
LogicalResult
GraphImporter::checkFixedTokenShape(const onnx::ValueInfoProto &input) {
  const onnx::TypeProto_Tensor &tensorType = input.type().tensor_type();
  auto elem = static_cast<ElementType>(tensorType.elem_type());
  const onnx::TensorShapeProto &shape = tensorType.shape();
  if (shape.dim_size() != 2 ||
      (elem != ElementType::Int64 && elem != ElementType::Int32)) {
    return success();
  }
  struct Want {
    std::optional<int64_t> value;
    const std::string &source;
    const char *what;
  };
  std::string disagreements;
  for (auto [axis, want] :
       llvm::enumerate(std::array<Want, 2>{
           Want{options.batch, options.batchSource, "batch"},
           Want{options.seq, options.seqSource, "sequence length"}})) {
    const onnx::TensorShapeProto_Dimension &dim = shape.dim(axis);
    if (!dim.has_dim_value() || !want.value || want.source.empty() ||
        dim.dim_value() == *want.value) {
      continue;
    }
    disagreements += (disagreements.empty() ? "" : " and ") + want.source +
                     " asks for " + want.what + " " +
                     std::to_string(*want.value);
  }
  if (disagreements.empty()) {
    return success();
  }
  std::string fixed;
  for (int i = 0; i < 2; ++i) {
    fixed += (i ? ", " : "") + (shape.dim(i).has_dim_value()
                                    ? std::to_string(shape.dim(i).dim_value())
                                    : std::string(shape.dim(i).dim_param()));
  }
  return modelError() << "input '" << input.name() << "' has fixed shape ["
                      << fixed << "], but " << disagreements
                      << "; ask for the model's shape, or export it with "
                         "dynamic batch and sequence dims";
}

FailureOr<int64_t>
GraphImporter::bindDim(const onnx::ValueInfoProto &input, int64_t axis,
                       const onnx::TensorShapeProto_Dimension &dim,
                       int64_t rank, int32_t elemType) {
  if (dim.has_dim_value()) {
    if (dim.dim_value() < 0) {
      return modelError() << "input '" << input.name() << "' dim " << axis
                          << " is negative (" << dim.dim_value() << ")";
    }
    return dim.dim_value();
  }
  std::string name = dim.has_dim_param() ? dim.dim_param() : "";
  if (!name.empty()) {
    if (auto it = options.dims.find(name); it != options.dims.end()) {
      return it->second;
    }
    if (auto it = boundDims.find(name); it != boundDims.end()) {
      return it->second;
    }
  }
  // Token-id style inputs ([batch, seq] integers) bind positionally, which
  // covers exporters that name dims s0/s1 or leave them unnamed.
  bool tokenInput =
      rank == 2 && (static_cast<ElementType>(elemType) == ElementType::Int64 ||
                    static_cast<ElementType>(elemType) == ElementType::Int32);
  std::optional<int64_t> value;
  const char *flag = nullptr;
  if (namesBatch(name) || (tokenInput && axis == 0 && !namesSequence(name))) {
    value = options.batch;
    flag = "--batch";
  } else if (namesSequence(name) || (tokenInput && axis == 1)) {
    value = options.seq;
    flag = "--seq";
  }
  if (!value) {
    InFlightDiagnostic diag = modelError();
    diag << "input '" << input.name() << "' dim " << axis << " is symbolic";
    if (!name.empty()) {
      diag << " ('" << name << "')";
    }
    if (flag) {
      diag << "; bind it with " << flag << " N";
    } else {
      diag << "; bind it with --dim " << (name.empty() ? "NAME" : name)
           << "=N";
    }
    return failure();
  }
  if (*value <= 0) {
    return modelError() << flag << " must be positive, got " << *value;
  }
  if (!name.empty()) {
    boundDims[name] = *value;
  }
  return *value;
}

LogicalResult GraphImporter::bindInputs(func::FuncOp func) {
  SmallVector<Type> argTypes;
  SmallVector<const onnx::ValueInfoProto *> inputs;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    // Old models list initializers among the inputs too; those are weights.
    if (initializers.count(input.name())) {
      continue;
    }
    if (input.name().empty()) {
      return modelError() << "a graph input has an empty name";
    }
    if (!input.type().has_tensor_type()) {
      return modelError() << "input '" << input.name()
                          << "' is not a tensor (sequences, maps and optionals "
                             "are not supported)";
    }
    const onnx::TypeProto_Tensor &tensorType = input.type().tensor_type();
    if (!isSupportedElementType(tensorType.elem_type())) {
      return modelError() << "input '" << input.name() << "' has element type "
                          << elementTypeName(tensorType.elem_type())
                          << ", which tailor does not import";
    }
    if (!tensorType.has_shape()) {
      return modelError() << "input '" << input.name()
                          << "' has no shape (its rank must be known)";
    }
    if (failed(checkFixedTokenShape(input))) {
      return failure();
    }
    SmallVector<int64_t> shape;
    int64_t rank = tensorType.shape().dim_size();
    bool symbolic = false;
    for (int64_t axis = 0; axis < rank; ++axis) {
      FailureOr<int64_t> dim = bindDim(input, axis, tensorType.shape().dim(axis),
                                       rank, tensorType.elem_type());
      if (failed(dim)) {
        return failure();
      }
      symbolic |= !tensorType.shape().dim(axis).has_dim_value();
      shape.push_back(*dim);
    }
    if (symbolic) {
      boundShapes += (boundShapes.empty() ? "" : ", ") + input.name() + " [" +
                     llvm::join(llvm::map_range(shape, [](int64_t d) {
                                  return std::to_string(d);
                                }),
                                ", ") +
                     "]";
    }
    argTypes.push_back(RankedTensorType::get(
        shape, elementType(static_cast<ElementType>(tensorType.elem_type()))));
    inputs.push_back(&input);
  }
  func.setFunctionType(builder.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (auto [i, input] : llvm::enumerate(inputs)) {
    if (values.count(input->name())) {
      return modelError() << "graph input '" << input->name()
                          << "' is declared twice";
    }
    values[input->name()] = ImportedValue{entry->getArgument(i), nullptr};
    func.setArgAttr(i, "tg.name", builder.getStringAttr(input->name()));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Initializers and parameters
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::collectInitializers() {
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    if (tensor.name().empty()) {
      return modelError() << "an initializer has an empty name";
    }
    if (!initializers.try_emplace(tensor.name(), &tensor).second) {
      return modelError() << "initializer '" << tensor.name()
                          << "' is defined twice";
    }
    if (!isSupportedElementType(tensor.data_type())) {
      return modelError() << "initializer '" << tensor.name()
                          << "' has element type "
                          << elementTypeName(tensor.data_type())
                          << ", which tailor does not import";
    }
    for (int64_t d : tensor.dims()) {
      if (d < 0) {
        return modelError() << "initializer '" << tensor.name()
                            << "' has a negative dim (" << d << ")";
      }
    }
  }
  for (const onnx::SparseTensorProto &sparse : graph.sparse_initializer()) {
    return modelError() << "sparse initializer '" << sparse.values().name()
                        << "' is not supported";
  }
  return success();
}

static bool isExternal(const onnx::TensorProto &tensor) {
  return tensor.data_location() == onnx::TensorProto::EXTERNAL;
}

LogicalResult GraphImporter::checkExternalData(const onnx::TensorProto &tensor,
                                               uint64_t &offset,
                                               uint64_t &length,
                                               std::string &file) {
  std::string location;
  std::optional<uint64_t> offsetValue, lengthValue;
  auto parseNumber = [&](const std::string &key, const std::string &text,
                         std::optional<uint64_t> &out) -> LogicalResult {
    uint64_t number = 0;
    if (llvm::StringRef(text).getAsInteger(10, number)) {
      return modelError() << "initializer '" << tensor.name()
                          << "': external data " << key << " '" << text
                          << "' is not a non-negative decimal integer";
    }
    out = number;
    return success();
  };
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      if (failed(parseNumber("offset", entry.value(), offsetValue))) {
        return failure();
      }
    } else if (entry.key() == "length") {
      if (failed(parseNumber("length", entry.value(), lengthValue))) {
        return failure();
      }
    }
  }
  if (location.empty()) {
    return modelError() << "initializer '" << tensor.name()
                        << "' is marked EXTERNAL but has no 'location'";
  }
  if (llvm::sys::path::is_absolute(location) ||
      llvm::StringRef(location).contains("..")) {
    return modelError() << "initializer '" << tensor.name()
                        << "': external data location '" << location
                        << "' must be a relative path inside the model's "
                           "folder";
  }
  int64_t itemSize =
      elementByteSize(static_cast<ElementType>(tensor.data_type()));
  uint64_t expected = 1;
  for (int64_t d : tensor.dims()) {
    // Guard the product: a forged dim must not overflow the byte count.
    if (d != 0 && expected > (UINT64_MAX / 16) / static_cast<uint64_t>(d)) {
      return modelError() << "initializer '" << tensor.name()
                          << "' is too large (dims overflow)";
    }
    expected *= static_cast<uint64_t>(d);
  }
  expected *= static_cast<uint64_t>(itemSize);
  offset = offsetValue.value_or(0);
  if (lengthValue && *lengthValue != expected) {
    return modelError() << "initializer '" << tensor.name()
                        << "': external data length " << *lengthValue
                        << " does not match its dims and type ("
                        << expected << " bytes)";
  }
  length = expected;

  llvm::SmallString<256> resolved(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(resolved, location);
  file = std::string(resolved);
  auto [it, inserted] = dataFileSizes.try_emplace(file, -1);
  if (inserted) {
    uint64_t size = 0;
    if (!llvm::sys::fs::file_size(file, size)) {
      it->second = static_cast<int64_t>(size);
    }
  }
  if (it->second < 0) {
    // Planning needs no bytes: import goes on, and the step that reads the
    // weights reports the missing file.
    if (missingDataFiles.insert(file).second) {
      mlir::emitWarning(UnknownLoc::get(&context))
          << path << ": external data file '" << file
          << "' is missing; the model imports for planning, but running it "
             "will need that file";
    }
    return success();
  }
  uint64_t fileSize = static_cast<uint64_t>(it->second);
  if (offset > fileSize || length > fileSize - offset) {
    return modelError() << "initializer '" << tensor.name()
                        << "': external data [" << offset << ", "
                        << offset + length << ") lies outside '" << file
                        << "' (" << fileSize << " bytes)";
  }
  return success();
}

FailureOr<tg::ParamOp> GraphImporter::paramFor(const onnx::TensorProto &tensor) {
  if (auto it = params.find(tensor.name()); it != params.end()) {
    return it->second;
  }
  SmallVector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  auto type = RankedTensorType::get(
      dims, elementType(static_cast<ElementType>(tensor.data_type())));
  Attribute location;
  if (isExternal(tensor)) {
    uint64_t offset = 0, length = 0;
    std::string file;
    if (failed(checkExternalData(tensor, offset, length, file))) {
      return failure();
    }
    location = tg::ExternalDataAttr::get(&context, builder.getStringAttr(file),
                                         offset, length);
  } else if (auto raw = rawDataOffsets.find(tensor.name());
             raw != rawDataOffsets.end() &&
             raw->second.second == tensor.raw_data().size()) {
    // Inline raw_data: the model file itself holds the bytes, at an offset
    // plans can reference like external data.
    location = tg::ExternalDataAttr::get(&context, builder.getStringAttr(path),
                                         raw->second.first, raw->second.second);
  } else {
    location = tg::InitializerDataAttr::get(&context,
                                            builder.getStringAttr(path),
                                            builder.getStringAttr(tensor.name()));
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(module.getBody(), std::prev(module.getBody()->end()));
  auto param = tg::ParamOp::create(
      builder, NameLoc::get(builder.getStringAttr(tensor.name())),
      builder.getStringAttr(tensor.name()), TypeAttr::get(type),
      /*trainable=*/nullptr, location, /*init=*/nullptr,
      /*quant=*/nullptr);
  params[tensor.name()] = param;
  return param;
}

/// Initializers that are shape data rather than weights: integers and
/// scalars stored inline. Their values are read while importing so shape
/// arithmetic folds; everything else stays a parameter.
static bool isInlineConstant(const onnx::TensorProto &tensor) {
  if (isExternal(tensor)) {
    return false;
  }
  int64_t count = product(SmallVector<int64_t>(tensor.dims().begin(),
                                               tensor.dims().end()));
  auto type = static_cast<ElementType>(tensor.data_type());
  return (!isFloatType(type) && count <= 4096) || count <= 1;
}

llvm::Expected<HostTensor> decodeTensorProto(const onnx::TensorProto &tensor,
                                             llvm::StringRef rawData,
                                             llvm::StringRef what) {
  SmallVector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  return decodeTensorData(
      tensor.data_type(), dims, rawData,
      ArrayRef<float>(tensor.float_data().data(), tensor.float_data_size()),
      ArrayRef<int64_t>(tensor.int64_data().data(), tensor.int64_data_size()),
      ArrayRef<int32_t>(tensor.int32_data().data(), tensor.int32_data_size()),
      ArrayRef<double>(tensor.double_data().data(), tensor.double_data_size()),
      what);
}

FailureOr<HostTensor>
GraphImporter::readInitializer(const onnx::TensorProto &tensor,
                               NodeContext &node) {
  SmallVector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  std::string what = "initializer '" + tensor.name() + "'";
  std::string external;
  if (isExternal(tensor)) {
    uint64_t offset = 0, length = 0;
    std::string file;
    if (failed(checkExternalData(tensor, offset, length, file))) {
      return failure();
    }
    if (length > (1u << 20)) {
      return node.error() << "needs " << what
                          << " as a compile-time constant, but it holds "
                          << length << " bytes of external data";
    }
    auto buffer = llvm::MemoryBuffer::getFileSlice(file, length, offset);
    if (!buffer) {
      return node.error() << "needs the value of " << what
                          << ", but its external data file '" << file
                          << "' cannot be read: "
                          << buffer.getError().message();
    }
    external = (*buffer)->getBuffer().str();
  }
  llvm::StringRef raw = isExternal(tensor) ? llvm::StringRef(external)
                                           : llvm::StringRef(tensor.raw_data());
  llvm::Expected<HostTensor> decoded = decodeTensorProto(tensor, raw, what);
  if (!decoded) {
    return modelError() << llvm::toString(decoded.takeError());
  }
  return std::move(*decoded);
}

/// Whether a band profile is a mask's: additive 0 / very negative, or 0/1
/// (bool, or numbers) on a triangle. An identity-like 0/1 band is not: it
/// could be a weight someone means to train.
static bool isMaskBand(const BandMask &band, int64_t rows, int64_t cols,
                       bool isBool) {
  double lo = std::min(band.inside, band.outside);
  double hi = std::max(band.inside, band.outside);
  if (hi == 0.0 && lo <= -1e4) {
    return true;
  }
  bool triangle = band.lower <= -(rows - 1) || band.upper >= cols - 1;
  return lo == 0.0 && hi == 1.0 && (isBool || triangle);
}

bool GraphImporter::feedsOnlyMaskOps(llvm::StringRef name, int depth) {
  // Ops a mask buffer feeds on its way to the scores (nanoGPT's
  // `bias[:, :, :T, :T] == 0`, an additive mask added to them); Identity
  // (torch.onnx shares equal buffers across layers) is followed.
  static const llvm::StringSet<> maskOps = {
      "Slice", "Where", "Equal", "Not", "Cast", "Less", "Greater",
      "LessOrEqual", "GreaterOrEqual", "Add", "Sub", "Expand"};
  if (consumers.empty()) {
    for (const onnx::NodeProto &node : graph.node()) {
      for (const std::string &input : node.input()) {
        consumers[input].push_back(&node);
      }
    }
  }
  auto it = consumers.find(name);
  if (it == consumers.end() || depth > 4) {
    return false;
  }
  for (const onnx::NodeProto *node : it->second) {
    if (!node->domain().empty()) {
      return false;
    }
    if (node->op_type() == "Identity") {
      if (node->output_size() != 1 ||
          !feedsOnlyMaskOps(node->output(0), depth + 1)) {
        return false;
      }
    } else if (!maskOps.contains(node->op_type())) {
      return false;
    }
  }
  return true;
}

std::optional<std::string>
GraphImporter::peekExternalBytes(const onnx::TensorProto &tensor,
                                 uint64_t length) {
  std::string location;
  uint64_t offset = 0;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" &&
               llvm::StringRef(entry.value()).getAsInteger(10, offset)) {
      return std::nullopt;
    }
  }
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      llvm::StringRef(location).contains("..")) {
    return std::nullopt;
  }
  llvm::SmallString<256> file(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(file, location);
  uint64_t size = 0;
  if (llvm::sys::fs::file_size(file, size) || offset > size ||
      length > size - offset) {
    return std::nullopt;
  }
  auto buffer = llvm::MemoryBuffer::getFileSlice(file, length, offset);
  if (!buffer) {
    return std::nullopt;
  }
  return (*buffer)->getBuffer().str();
}

std::optional<HostTensor>
GraphImporter::readStoredMask(const onnx::TensorProto &tensor) {
  SmallVector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  auto type = static_cast<ElementType>(tensor.data_type());
  std::optional<int64_t> count = checkedProduct(dims);
  bool external = isExternal(tensor);
  if (dims.size() < 2 || dims.back() < 2 || dims[dims.size() - 2] < 2 ||
      !count || *count > kMaxStoredMaskElements ||
      !isSupportedElementType(tensor.data_type()) ||
      (external ? !feedsOnlyMaskOps(tensor.name(), 0)
                : !tensor.has_raw_data())) {
    return std::nullopt;
  }
  // The first row decides cheaply: a weight has many distinct values there.
  int64_t cols = dims.back(), rows = dims[dims.size() - 2];
  int64_t width = elementByteSize(type);
  auto bytes = [&](int64_t n) -> std::optional<std::string> {
    if (external) {
      return peekExternalBytes(tensor, static_cast<uint64_t>(n));
    }
    if (tensor.raw_data().size() != static_cast<size_t>(*count * width)) {
      return std::nullopt;
    }
    return tensor.raw_data().substr(0, n);
  };
  std::optional<std::string> first = bytes(cols * width);
  if (!first) {
    return std::nullopt;
  }
  llvm::Expected<HostTensor> row =
      decodeTensorData(tensor.data_type(), {cols}, *first, {}, {}, {}, {},
                       "the first row of initializer '" + tensor.name() + "'");
  if (!row) {
    llvm::consumeError(row.takeError());
    return std::nullopt;
  }
  llvm::SmallSet<double, 4> distinct;
  for (int64_t j = 0; j < cols && distinct.size() <= 2; ++j) {
    distinct.insert(row->getDouble(j));
  }
  if (distinct.size() > 2) {
    return std::nullopt;
  }
  std::optional<std::string> all = bytes(*count * width);
  if (!all) {
    return std::nullopt;
  }
  llvm::Expected<HostTensor> whole =
      decodeTensorProto(tensor, *all, "initializer '" + tensor.name() + "'");
  if (!whole) {
    llvm::consumeError(whole.takeError());
    return std::nullopt;
  }
  std::optional<BandMask> band = detectBand(*whole);
  if (!band || !isMaskBand(*band, rows, cols, type == ElementType::Bool)) {
    return std::nullopt;
  }
  return std::move(*whole);
}

FailureOr<ImportedValue *> GraphImporter::lookup(llvm::StringRef name,
                                                NodeContext &node) {
  auto it = values.find(name);
  if (it != values.end()) {
    return &it->second;
  }
  auto init = initializers.find(name);
  if (init == initializers.end()) {
    return node.error() << "input '" << name
                        << "' is not produced by any node, initializer or "
                           "graph input";
  }
  const onnx::TensorProto &tensor = *init->second;
  ImportedValue imported;
  if (std::optional<HostTensor> mask = readStoredMask(tensor)) {
    imported.host = std::make_shared<HostTensor>(std::move(*mask));
  } else if (isInlineConstant(tensor)) {
    FailureOr<HostTensor> host = readInitializer(tensor, node);
    if (failed(host)) {
      return failure();
    }
    imported.host = std::make_shared<HostTensor>(std::move(*host));
  } else {
    FailureOr<tg::ParamOp> param = paramFor(tensor);
    if (failed(param)) {
      return failure();
    }
    // One param_ref per parameter, at the top of the function, so every
    // later use (tied embeddings included) sees the same value.
    OpBuilder::InsertionGuard guard(builder);
    Block *entry = builder.getInsertionBlock();
    while (!llvm::isa<func::FuncOp>(entry->getParentOp())) {
      entry = entry->getParentOp()->getBlock();
    }
    builder.setInsertionPointToStart(entry);
    imported.initializer = &tensor;
    imported.value = tg::ParamRefOp::create(
        builder, NameLoc::get(builder.getStringAttr(tensor.name())),
        param->getTensorType(), FlatSymbolRefAttr::get(param->getSymNameAttr()));
  }
  return &(values[name] = std::move(imported));
}

/// A dense attribute of `tensor`'s held values.
static DenseElementsAttr denseAttrOf(const HostTensor &tensor,
                                     RankedTensorType type, Builder &builder) {
  Type elem = type.getElementType();
  if (auto floatType = llvm::dyn_cast<FloatType>(elem)) {
    if (tensor.isSplat() && tensor.size() > 0) {
      return DenseElementsAttr::get(
          type, builder.getFloatAttr(floatType, tensor.getDouble(0)));
    }
    if (elem.isF32()) {
      std::vector<float> data(tensor.floatData().begin(),
                              tensor.floatData().end());
      return DenseElementsAttr::get(type, llvm::ArrayRef<float>(data));
    }
    if (elem.isF64()) {
      return DenseElementsAttr::get(type,
                                    llvm::ArrayRef<double>(tensor.floatData()));
    }
    SmallVector<APFloat> data;
    for (double v : tensor.floatData()) {
      APFloat f(v);
      bool lost = false;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &lost);
      data.push_back(f);
    }
    return DenseElementsAttr::get(type, data);
  }
  unsigned width = elem.getIntOrFloatBitWidth();
  if (tensor.isSplat() && tensor.size() > 0) {
    return DenseElementsAttr::get(
        type, builder.getIntegerAttr(elem, APInt(width, tensor.getInt(0),
                                                 /*isSigned=*/true,
                                                 /*implicitTrunc=*/true)));
  }
  SmallVector<APInt> data;
  for (int64_t v : tensor.intData()) {
    data.push_back(APInt(width, v, /*isSigned=*/true, /*implicitTrunc=*/true));
  }
  return DenseElementsAttr::get(type, data);
}

FailureOr<Value> GraphImporter::materialize(const HostTensor &tensor,
                                            Location loc, NodeContext *node) {
  auto type = RankedTensorType::get(tensor.dims(), elementType(tensor.type()));
  // Masks are generated where they are used, never stored.
  if (std::optional<BandMask> band = detectBand(tensor)) {
    return tg::BandMaskOp::create(builder, loc, type, band->lower, band->upper,
                                  band->inside, band->outside)
        .getResult();
  }
  // A lazy tensor proven constant (a ConstantOfShape fill of any size) is a
  // splat.
  if (tensor.isLazy()) {
    IndexDependence dependence = dependenceOf(tensor);
    if (dependence.known && dependence.forms.empty() && tensor.size() > 0) {
      HostTensor one(tensor.type(), {});
      if (one.isFloat()) {
        one.setDouble(0, tensor.getDouble(0));
      } else {
        one.setInt(0, tensor.getInt(0));
      }
      return arith::ConstantOp::create(
                 builder, loc,
                 denseAttrOf(one,
                             RankedTensorType::get({}, type.getElementType()),
                             builder)
                     .resizeSplat(type))
          .getResult();
    }
  }
  if (tensor.size() > options.maxFoldedElements) {
    InFlightDiagnostic diag = node ? node->error() : modelError();
    return diag << "a compile-time tensor of shape "
                << tg::formatShape(tensor.dims()) << " (" << tensor.size()
                << " elements) is not a causal or banded mask, and holding it "
                   "would exceed the folding limit of "
                << options.maxFoldedElements << " elements";
  }
  HostTensor held = tensor.materialized();
  return arith::ConstantOp::create(builder, loc,
                                   denseAttrOf(held, type, builder))
      .getResult();
}

//===----------------------------------------------------------------------===//
// Node order and import
//===----------------------------------------------------------------------===//

/// The dotted PyTorch module path a node was exported from, if the exporter
/// recorded it: the TorchScript exporter names nodes by scope
/// ("/model/layers.0/self_attn/q_proj/MatMul"); the dynamo exporter keeps
/// `pkg.torch.onnx.name_scopes` metadata
/// ("['', 'model', 'model.layers.0', ..., 'model.layers.0.self_attn.q_proj', 'linear']").
static std::optional<std::string> moduleScopeOf(const onnx::NodeProto &node) {
  // NodeProto.metadata_props is field 9 (ONNX 1.16+); Debian's libonnx
  // predates it, so it arrives as an unknown field.
  const google::protobuf::UnknownFieldSet &unknown =
      node.GetReflection()->GetUnknownFields(node);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &field = unknown.field(i);
    if (field.number() != 9 ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    onnx::StringStringEntryProto entry;
    if (!entry.ParseFromString(field.length_delimited()) ||
        entry.key() != "pkg.torch.onnx.name_scopes") {
      continue;
    }
    llvm::SmallVector<llvm::StringRef> scopes;
    llvm::StringRef rest = entry.value();
    while (true) {
      size_t open = rest.find('\'');
      if (open == llvm::StringRef::npos) {
        break;
      }
      size_t close = rest.find('\'', open + 1);
      if (close == llvm::StringRef::npos) {
        break;
      }
      scopes.push_back(rest.slice(open + 1, close));
      rest = rest.drop_front(close + 1);
    }
    // The last entry names the op itself; the one before is its module.
    if (scopes.size() >= 2 && !scopes[scopes.size() - 2].empty()) {
      return scopes[scopes.size() - 2].str();
    }
    return std::nullopt;
  }
  llvm::StringRef name = node.name();
  if (!name.starts_with("/")) {
    return std::nullopt;
  }
  llvm::SmallVector<llvm::StringRef> parts;
  name.split(parts, '/', -1, /*KeepEmpty=*/false);
  if (parts.size() < 2) {
    return std::nullopt;
  }
  parts.pop_back();
  return llvm::join(parts, ".");
}

FailureOr<SmallVector<int64_t>> GraphImporter::orderNodes() {
  int64_t count = graph.node_size();
  llvm::StringMap<int64_t> producer;
  for (int64_t i = 0; i < count; ++i) {
    for (const std::string &output : graph.node(i).output()) {
      if (output.empty()) {
        continue;
      }
      if (values.count(output) || initializers.count(output)) {
        return modelError() << describeNode(graph.node(i), i) << " ("
                            << graph.node(i).op_type()
                            << ") writes '" << output
                            << "', which is already a graph input or "
                               "initializer";
      }
      auto [it, inserted] = producer.try_emplace(output, i);
      if (!inserted) {
        return modelError() << "value '" << output << "' is written by both "
                            << "node #" << it->second << " and node #" << i;
      }
    }
  }
  // Kahn's algorithm, taking ready nodes in file order so a sorted graph
  // (the usual case) keeps its order.
  std::vector<int64_t> pending(count, 0);
  std::vector<SmallVector<int64_t, 2>> users(count);
  for (int64_t i = 0; i < count; ++i) {
    for (const std::string &input : graph.node(i).input()) {
      auto it = producer.find(input);
      if (input.empty() || it == producer.end()) {
        continue; // graph inputs, initializers, or missing (reported later)
      }
      ++pending[i];
      users[it->second].push_back(i);
    }
  }
  std::vector<int64_t> ready;
  for (int64_t i = count - 1; i >= 0; --i) {
    if (pending[i] == 0) {
      ready.push_back(i);
    }
  }
  // A min-heap on the node index keeps file order among ready nodes.
  std::make_heap(ready.begin(), ready.end(), std::greater<int64_t>());
  SmallVector<int64_t> order;
  order.reserve(count);
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), std::greater<int64_t>());
    int64_t i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (int64_t user : users[i]) {
      if (--pending[user] == 0) {
        ready.push_back(user);
        std::push_heap(ready.begin(), ready.end(), std::greater<int64_t>());
      }
    }
  }
  if (static_cast<int64_t>(order.size()) != count) {
    for (int64_t i = 0; i < count; ++i) {
      if (pending[i] > 0) {
        return modelError() << "the graph has a cycle: "
                            << describeNode(graph.node(i), i) << " ("
                            << graph.node(i).op_type()
                            << ") depends on its own output";
      }
    }
  }
  return order;
}

LogicalResult GraphImporter::importNode(int64_t index) {
  const onnx::NodeProto &node = graph.node(index);
  // (Not a ?: of "" and the std::string: that would make a temporary the
  // StringRef outlives.)
  llvm::StringRef domain = node.domain();
  if (isDefaultDomain(domain)) {
    domain = "";
  }
  auto opsetIt = opsets.find(domain);
  int64_t opset = opsetIt == opsets.end() ? 0 : opsetIt->second;
  std::string name = node.name().empty()
                         ? llvm::formatv("{0}#{1}", node.op_type(), index).str()
                         : node.name();
  Location loc = NameLoc::get(builder.getStringAttr(name),
                              FileLineColLoc::get(&context, path, 0, 0));
  // The PyTorch module the node came from rides along as the location's
  // metadata, so raising can name what it recognizes (model.layers.0.mlp).
  if (std::optional<std::string> scope = moduleScopeOf(node)) {
    loc = FusedLoc::get(&context, {loc}, builder.getStringAttr(*scope));
  }
  NodeContext ctx(*this, node, index, opset, loc);
  if (opsetIt == opsets.end()) {
    return ctx.error() << "uses domain '" << displayDomain(domain)
                       << "', which the model does not import";
  }
  const OpImporter *importer = lookupImporter(domain, node.op_type(), opset);
  if (!importer) {
    if (isKnownOp(domain, node.op_type())) {
      return ctx.error() << "this op is not supported at opset " << opset;
    }
    return ctx.error() << "unsupported op";
  }
  for (int64_t i = 0, e = node.output_size(); i < e; ++i) {
    if (node.output(i).empty() && i == 0) {
      return ctx.error() << "has no name for its first output";
    }
  }
  for (const onnx::AttributeProto &attr : node.attribute()) {
    if (attr.has_ref_attr_name() && !attr.ref_attr_name().empty()) {
      return ctx.error() << "attribute '" << attr.name()
                         << "' refers to a function attribute, which is only "
                            "valid inside a function body";
    }
  }
  int64_t required = requiredInputs(node.op_type(), opset);
  for (int64_t i = 0; i < required; ++i) {
    if (i >= node.input_size() || node.input(i).empty()) {
      return ctx.error() << "expects at least " << required
                         << " inputs, but input " << i << " is missing";
    }
  }
  if (node.output_size() == 0) {
    return ctx.error() << "has no outputs";
  }
  // Resolve every named input up front: a builder then never sees an
  // undefined value.
  for (const std::string &input : node.input()) {
    if (!input.empty() && failed(lookup(input, ctx))) {
      return failure();
    }
  }
  builder.setInsertionPointToEnd(builder.getInsertionBlock());
  if (failed(importer->build(ctx))) {
    return failure();
  }
  for (const std::string &output : node.output()) {
    if (!output.empty() && !values.count(output)) {
      return ctx.error() << "produced no value for output '" << output
                         << "' (internal error in its importer)";
    }
  }
  return success();
}

LogicalResult GraphImporter::emitOutputs(func::FuncOp func) {
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  if (graph.output_size() == 0) {
    return modelError() << "the graph has no outputs";
  }
  for (const onnx::ValueInfoProto &output : graph.output()) {
    auto it = values.find(output.name());
    Value value;
    if (it == values.end()) {
      auto init = initializers.find(output.name());
      if (init == initializers.end()) {
        return modelError() << "graph output '" << output.name()
                            << "' is not produced by any node";
      }
      FailureOr<tg::ParamOp> param = paramFor(*init->second);
      if (failed(param)) {
        return failure();
      }
      value = tg::ParamRefOp::create(builder, loc, param->getTensorType(),
                                     FlatSymbolRefAttr::get(param->getSymNameAttr()));
    } else if (it->second.value) {
      value = it->second.value;
    } else {
      FailureOr<Value> held = materialize(*it->second.host, loc, nullptr);
      if (failed(held)) {
        return failure();
      }
      value = *held;
    }
    auto type = llvm::cast<RankedTensorType>(value.getType());
    // Declared dims must agree with what the graph computes.
    if (output.type().has_tensor_type() &&
        output.type().tensor_type().has_shape()) {
      const onnx::TensorShapeProto &declared =
          output.type().tensor_type().shape();
      if (declared.dim_size() != type.getRank()) {
        return modelError() << "graph output '" << output.name()
                            << "' is declared with rank " << declared.dim_size()
                            << " but the graph computes "
                            << tg::formatShape(type.getShape());
      }
      for (int64_t axis = 0; axis < type.getRank(); ++axis) {
        const auto &dim = declared.dim(axis);
        std::optional<int64_t> expected;
        if (dim.has_dim_value()) {
          expected = dim.dim_value();
        } else if (dim.has_dim_param()) {
          if (auto bound = boundDims.find(dim.dim_param());
              bound != boundDims.end()) {
            expected = bound->second;
          }
        }
        if (expected && *expected != type.getDimSize(axis)) {
          return modelError() << "graph output '" << output.name() << "' dim "
                              << axis << " is declared " << *expected
                              << " but the graph computes "
                              << tg::formatShape(type.getShape());
        }
      }
    }
    results.push_back(value);
    resultTypes.push_back(type);
  }
  func::ReturnOp::create(builder, loc, results);
  func.setFunctionType(builder.getFunctionType(
      func.getFunctionType().getInputs(), resultTypes));
  for (auto [i, output] : llvm::enumerate(graph.output())) {
    func.setResultAttr(i, "tg.name", builder.getStringAttr(output.name()));
  }
  return success();
}

/// One tensor's bytes at most: 2^48 (256 TiB), so planning's sums over even
/// 32768 tensors stay within int64.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;

/// Byte sizes are int64 everywhere downstream (planning, arenas, the plan
/// file): a tensor whose bytes overflow it, or exceed kMaxTensorBytes, is an
/// error here, naming the input or node, not a negative arena size later.
LogicalResult GraphImporter::checkTensorSizes(func::FuncOp func) {
  auto check = [&](Value value, auto emit) -> LogicalResult {
    auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
    if (!type) {
      return success();
    }
    int64_t bits = type.getElementType().isIntOrFloat()
                       ? type.getElementType().getIntOrFloatBitWidth()
                       : 64;
    std::optional<int64_t> elements = checkedProduct(type.getShape());
    int64_t bytes = 0;
    if (!elements || __builtin_mul_overflow(*elements, (bits + 7) / 8, &bytes)) {
      return emit() << "a tensor of shape " << tg::formatShape(type.getShape())
                    << " x " << type.getElementType()
                    << " has more bytes than a 64-bit size can count";
    }
    if (bytes > kMaxTensorBytes) {
      return emit() << "a tensor of shape " << tg::formatShape(type.getShape())
                    << " x " << type.getElementType() << " holds " << bytes
                    << " bytes, over the " << kMaxTensorBytes
                    << " (256 TiB) one tensor may hold";
    }
    return success();
  };
  for (BlockArgument arg : func.getArguments()) {
    if (failed(check(arg, [&] {
          return modelError()
                 << "input '"
                 << func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      "tg.name")
                        .getValue()
                 << "': ";
        }))) {
      return failure();
    }
  }
  WalkResult walk = func.walk([&](Operation *op) {
    for (Value result : op->getResults()) {
      if (failed(check(result, [&] { return op->emitError(); }))) {
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

FailureOr<OwningOpRef<ModuleOp>> GraphImporter::run() {
  if (failed(checkModel())) {
    return failure();
  }
  OwningOpRef<ModuleOp> owned = ModuleOp::create(FileLineColLoc::get(&context, path, 0, 0));
  module = *owned;
  module->setAttr(tg::TGDialect::kSourceAttrName, builder.getStringAttr(path));
  builder.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(builder, module.getLoc(),
                                   options.functionName,
                                   builder.getFunctionType({}, {}));
  if (failed(collectInitializers()) || failed(bindInputs(func))) {
    return failure();
  }
  FailureOr<SmallVector<int64_t>> order = orderNodes();
  if (failed(order)) {
    return failure();
  }
  for (const onnx::NodeProto &node : graph.node()) {
    for (const std::string &input : node.input()) {
      ++remainingUses[input];
    }
  }
  for (const onnx::ValueInfoProto &output : graph.output()) {
    ++remainingUses[output.name()];
  }
  builder.setInsertionPointToEnd(&func.getBody().front());
  for (int64_t index : *order) {
    if (failed(importNode(index))) {
      return failure();
    }
    for (const std::string &input : graph.node(index).input()) {
      auto uses = remainingUses.find(input);
      if (uses != remainingUses.end() && --uses->second == 0) {
        auto it = values.find(input);
        if (it != values.end()) {
          it->second.host.reset();
        }
      }
    }
  }
  builder.setInsertionPointToEnd(&func.getBody().front());
  if (failed(emitOutputs(func))) {
    return failure();
  }
  // Parameters first, then the function, for readable IR.
  func->moveAfter(&module.getBody()->back());
  if (failed(checkTensorSizes(func))) {
    return failure();
  }
  if (failed(mlir::verify(*owned))) {
    return modelError() << "the imported graph does not verify (see the "
                           "errors above)";
  }
  return owned;
}

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

NodeContext::NodeContext(GraphImporter &importer, const onnx::NodeProto &node,
                         int64_t index, int64_t opset, Location loc)
    : importer(importer), nodeProto(node), nodeIndex(index),
      opsetVersion(opset), location(loc) {}

OpBuilder &NodeContext::builder() { return importer.getBuilder(); }
MLIRContext *NodeContext::context() { return builder().getContext(); }

InFlightDiagnostic NodeContext::error() {
  llvm::StringRef domain = nodeProto.domain();
  InFlightDiagnostic diag = mlir::emitError(UnknownLoc::get(context()));
  diag << importer.modelPath() << ": " << describeNode(nodeProto, nodeIndex)
       << " (op '" << nodeProto.op_type()
       << "', domain '" << displayDomain(domain) << "', opset "
       << opsetVersion << "): ";
  return diag;
}

InFlightDiagnostic NodeContext::indexOutOfRange(int64_t index, int64_t axis,
                                                int64_t size) {
  InFlightDiagnostic diag = error();
  diag << "index " << index << " is out of range for dim " << axis
       << " of size " << size;
  const std::string &bound = importer.boundInputShapes();
  if (!bound.empty()) {
    // Exporters trace shape arithmetic at their example's shape; a graph
    // whose indices hold only there fails in onnxruntime the same way.
    diag << " at the shapes this compile binds the model's symbolic dims to ("
         << bound << "): the export's shape arithmetic does not hold there "
                     "(it was likely traced at another batch or sequence "
                     "length); compile at the shape it was exported with, or "
                     "re-export with an example of this shape";
  }
  return diag;
}

size_t NodeContext::numInputs() const { return nodeProto.input_size(); }
bool NodeContext::hasInput(size_t i) const {
  return i < numInputs() && !nodeProto.input(i).empty();
}
size_t NodeContext::numOutputs() const { return nodeProto.output_size(); }

bool NodeContext::isConstant(size_t i) {
  if (!hasInput(i)) {
    return false;
  }
  FailureOr<ImportedValue *> v = importer.lookup(nodeProto.input(i), *this);
  return succeeded(v) && (*v)->host;
}

bool NodeContext::allConstant() {
  for (size_t i = 0; i < numInputs(); ++i) {
    if (hasInput(i) && !isConstant(i)) {
      return false;
    }
  }
  return true;
}

FailureOr<const HostTensor *> NodeContext::constant(size_t i,
                                                    llvm::StringRef what) {
  if (!hasInput(i)) {
    return error() << "input " << i << " (" << what << ") is missing";
  }
  FailureOr<ImportedValue *> v = importer.lookup(nodeProto.input(i), *this);
  if (failed(v)) {
    return failure();
  }
  if ((*v)->host) {
    return (*v)->host.get();
  }
  // A small parameter a builder needs as a constant (a float exponent kept
  // as an initializer, say): read its bytes now.
  if ((*v)->initializer) {
    FailureOr<HostTensor> host =
        importer.readInitializer(*(*v)->initializer, *this);
    if (failed(host)) {
      return failure();
    }
    (*v)->host = std::make_shared<HostTensor>(std::move(*host));
    return (*v)->host.get();
  }
  return error() << "input " << i << " ('" << nodeProto.input(i) << "', "
                 << what
                 << ") must be known at compile time, but it is computed at "
                    "run time";
}

LogicalResult NodeContext::checkFoldSize(ArrayRef<int64_t> dims) {
  std::optional<int64_t> n = checkedProduct(dims);
  if (!n) {
    return error() << "folding it at compile time would create a tensor of "
                      "shape "
                   << tg::formatShape(dims)
                   << ", whose element count overflows int64";
  }
  if (*n > importer.maxFoldedElements()) {
    return error() << "folding it at compile time would create " << *n
                   << " elements (limit " << importer.maxFoldedElements()
                   << ")";
  }
  return success();
}

FailureOr<HostTensor> NodeContext::heldConstant(size_t i,
                                                llvm::StringRef what) {
  FailureOr<const HostTensor *> t = constant(i, what);
  if (failed(t)) {
    return failure();
  }
  if ((*t)->isLazy() && (*t)->size() > importer.maxFoldedElements()) {
    return error() << "input " << i << " (" << what << ") would hold "
                   << (*t)->size() << " elements at compile time (limit "
                   << importer.maxFoldedElements() << ")";
  }
  return (*t)->materialized();
}

FailureOr<std::vector<int64_t>> NodeContext::constantInts(size_t i,
                                                          llvm::StringRef what) {
  FailureOr<HostTensor> t = heldConstant(i, what);
  if (failed(t)) {
    return failure();
  }
  if (t->isFloat()) {
    return error() << "input " << i << " (" << what
                   << ") must hold integers, got "
                   << elementTypeName(static_cast<int32_t>(t->type()));
  }
  return t->toInts();
}

FailureOr<Value> NodeContext::value(size_t i) {
  if (!hasInput(i)) {
    return error() << "input " << i << " is missing";
  }
  FailureOr<ImportedValue *> v = importer.lookup(nodeProto.input(i), *this);
  if (failed(v)) {
    return failure();
  }
  if (!(*v)->value) {
    FailureOr<Value> held = importer.materialize(*(*v)->host, location, this);
    if (failed(held)) {
      return failure();
    }
    (*v)->value = *held;
  }
  return (*v)->value;
}

ArrayRef<int64_t> NodeContext::shape(size_t i) {
  FailureOr<ImportedValue *> v = importer.lookup(nodeProto.input(i), *this);
  if (failed(v)) {
    return {};
  }
  if ((*v)->host) {
    return (*v)->host->dims();
  }
  return llvm::cast<RankedTensorType>((*v)->value.getType()).getShape();
}

ElementType NodeContext::elementType(size_t i) {
  FailureOr<ImportedValue *> v = importer.lookup(nodeProto.input(i), *this);
  if (failed(v)) {
    return ElementType::Float;
  }
  if ((*v)->host) {
    return (*v)->host->type();
  }
  Type elem = llvm::cast<RankedTensorType>((*v)->value.getType()).getElementType();
  if (elem.isF32()) return ElementType::Float;
  if (elem.isF16()) return ElementType::Float16;
  if (elem.isBF16()) return ElementType::BFloat16;
  if (elem.isF64()) return ElementType::Double;
  if (elem.isInteger(1)) return ElementType::Bool;
  if (elem.isInteger(8)) return ElementType::Int8;
  if (elem.isInteger(16)) return ElementType::Int16;
  if (elem.isInteger(32)) return ElementType::Int32;
  return ElementType::Int64;
}

const onnx::AttributeProto *
NodeContext::attribute(llvm::StringRef name) const {
  for (const onnx::AttributeProto &attr : nodeProto.attribute()) {
    if (attr.name() == name) {
      return &attr;
    }
  }
  return nullptr;
}

int64_t NodeContext::attrInt(llvm::StringRef name, int64_t fallback) const {
  const onnx::AttributeProto *attr = attribute(name);
  return attr ? attr->i() : fallback;
}

double NodeContext::attrFloat(llvm::StringRef name, double fallback) const {
  const onnx::AttributeProto *attr = attribute(name);
  return attr ? attr->f() : fallback;
}

std::string NodeContext::attrString(llvm::StringRef name,
                                    llvm::StringRef fallback) const {
  const onnx::AttributeProto *attr = attribute(name);
  return attr ? attr->s() : fallback.str();
}

std::optional<std::vector<int64_t>>
NodeContext::attrInts(llvm::StringRef name) const {
  const onnx::AttributeProto *attr = attribute(name);
  if (!attr) {
    return std::nullopt;
  }
  return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank,
                                              llvm::StringRef what) {
  if (axis < -rank || axis >= rank) {
    return error() << what << " " << axis << " is out of range for rank "
                   << rank;
  }
  return axis < 0 ? axis + rank : axis;
}

void NodeContext::setOutput(size_t i, Value value) {
  if (i < numOutputs() && !nodeProto.output(i).empty()) {
    importer.define(nodeProto.output(i), ImportedValue{value, nullptr});
  }
}

LogicalResult NodeContext::setOutput(size_t i, HostTensor tensor) {
  // A lazy tensor holds no values: the limit applies when it materializes.
  if (!tensor.isLazy() && tensor.size() > importer.maxFoldedElements()) {
    return error() << "folding it at compile time would create "
                   << tensor.size() << " elements (limit "
                   << importer.maxFoldedElements() << ")";
  }
  if (i < numOutputs() && !nodeProto.output(i).empty()) {
    importer.define(nodeProto.output(i),
                    ImportedValue{Value(), std::make_shared<HostTensor>(
                                               std::move(tensor))});
  }
  return success();
}

RankedTensorType NodeContext::tensorType(ArrayRef<int64_t> shape,
                                         ElementType type) {
  return RankedTensorType::get(shape, importer.elementType(type));
}

RankedTensorType NodeContext::tensorType(ArrayRef<int64_t> shape,
                                         Type elementType) {
  return RankedTensorType::get(shape, elementType);
}

Value NodeContext::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape) {
    return value;
  }
  return tg::ReshapeOp::create(builder(), location,
                               tensorType(shape, type.getElementType()), value);
}

FailureOr<Value> NodeContext::materialize(const HostTensor &tensor) {
  return importer.materialize(tensor, location, this);
}

Value NodeContext::scalarLike(Value like, double number) {
  Type elem = llvm::cast<RankedTensorType>(like.getType()).getElementType();
  auto type = RankedTensorType::get({}, elem);
  Attribute attr = llvm::isa<FloatType>(elem)
                       ? Attribute(builder().getFloatAttr(elem, number))
                       : Attribute(builder().getIntegerAttr(
                             elem, static_cast<int64_t>(number)));
  return arith::ConstantOp::create(builder(), location,
                                   DenseElementsAttr::get(type, attr));
}

std::function<InFlightDiagnostic()> NodeContext::shapeErrorFn() {
  return [this]() { return error(); };
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

void registerImporterDialects(MLIRContext &context) {
  context.loadDialect<tg::TGDialect, func::FuncDialect, arith::ArithDialect>();
}

/// Parses ONNX's text syntax; returns "" or what is wrong. libonnx's parser
/// reports most errors as a status but throws on some malformed numbers
/// (std::stol on "-inf"): no exception may leave the importer.
static std::string parseOnnxText(onnx::ModelProto &model,
                                 const std::string &text) {
  try {
    onnx::Status status = onnx::OnnxParser::Parse(model, text.c_str());
    return status.IsOK() ? std::string() : status.ErrorMessage();
  } catch (const std::exception &e) {
    return std::string("the parser failed on a malformed value (") + e.what() +
           ")";
  } catch (...) {
    return "the parser failed on a malformed value";
  }
}

static bool looksLikeText(llvm::StringRef path, llvm::StringRef bytes) {
  if (path.ends_with(".onnxtxt") || path.ends_with(".txt")) {
    return true;
  }
  return bytes.ltrim().starts_with("<");
}

FailureOr<OwningOpRef<ModuleOp>>
importOnnxBuffer(MLIRContext &context, llvm::StringRef bytes,
                 llvm::StringRef path, const ImportOptions &options) {
  registerImporterDialects(context);
  Location unknown = UnknownLoc::get(&context);
  onnx::ModelProto model;
  if (looksLikeText(path, bytes)) {
    std::string error = parseOnnxText(model, bytes.str());
    if (!error.empty()) {
      return mlir::emitError(unknown)
             << path << ": not valid ONNX text syntax: " << error;
    }
  } else {
    if (bytes.empty()) {
      return mlir::emitError(unknown) << path << ": the file is empty";
    }
    google::protobuf::io::CodedInputStream stream(
        reinterpret_cast<const uint8_t *>(bytes.data()),
        static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
    stream.SetRecursionLimit(64);
    if (bytes.size() > INT32_MAX || !model.ParseFromCodedStream(&stream) ||
        !stream.ConsumedEntireMessage()) {
      return mlir::emitError(unknown)
             << path << ": not a valid ONNX model (the protobuf does not "
                        "parse: truncated or corrupt file?)";
    }
  }
  llvm::StringMap<std::pair<uint64_t, uint64_t>> rawData;
  if (!looksLikeText(path, bytes)) {
    rawData = findRawDataOffsets(bytes);
  }
  GraphImporter importer(context, model, path, options, std::move(rawData));
  return importer.run();
}

FailureOr<OwningOpRef<ModuleOp>>
importOnnxFile(MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    return mlir::emitError(UnknownLoc::get(&context))
           << "cannot read model '" << path
           << "': " << buffer.getError().message();
  }
  return importOnnxBuffer(context, (*buffer)->getBuffer(), path, options);
}

} // namespace tailor::onnx_import
