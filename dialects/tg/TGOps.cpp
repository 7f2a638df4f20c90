//===- TGOps.cpp - tg op verifiers and folders ----------------------------===//

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGQuant.h"
#include "dialects/tg/TGShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace tailor::tg;

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

static llvm::ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<ShapedType>(value.getType()).getShape();
}

static Type elementTypeOf(Value value) {
  return llvm::cast<ShapedType>(value.getType()).getElementType();
}

/// Checks a result's shape against the shape its op's rule computed.
static LogicalResult verifyResultShape(Operation *op, Value result,
                                       llvm::ArrayRef<int64_t> expected) {
  llvm::ArrayRef<int64_t> actual = shapeOf(result);
  if (!shapesCompatible(actual, expected)) {
    return op->emitOpError()
           << "result shape " << formatShape(actual)
           << " does not match the expected " << formatShape(expected);
  }
  return success();
}

/// Checks that every value has the element type of the first one.
static LogicalResult verifySameElementType(Operation *op,
                                           llvm::ArrayRef<Value> values,
                                           llvm::ArrayRef<StringRef> names) {
  Type expected = elementTypeOf(values.front());
  for (auto [value, name] : llvm::zip_equal(values, names)) {
    if (elementTypeOf(value) != expected) {
      return op->emitOpError()
             << "expected " << name << " to have element type " << expected
             << " (as " << names.front() << "), got " << elementTypeOf(value);
    }
  }
  return success();
}

/// Verifies a NumPy-broadcasting binary op: operands of one element type and
/// a result of the broadcast shape (and of the operands' element type, unless
/// the op is a comparison, whose i1 result ODS already checks).
template <typename OpTy>
static LogicalResult verifyBroadcastBinary(OpTy op, bool isComparison) {
  if (elementTypeOf(op.getLhs()) != elementTypeOf(op.getRhs())) {
    return op.emitOpError() << "expected operands of one element type, got "
                            << elementTypeOf(op.getLhs()) << " and "
                            << elementTypeOf(op.getRhs());
  }
  if (!isComparison &&
      elementTypeOf(op.getResult()) != elementTypeOf(op.getLhs())) {
    return op.emitOpError()
           << "expected result element type " << elementTypeOf(op.getLhs())
           << ", got " << elementTypeOf(op.getResult());
  }
  FailureOr<Shape> shape = broadcastShapes(
      shapeOf(op.getLhs()), shapeOf(op.getRhs()),
      [&] { return op.emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  return verifyResultShape(op, op.getResult(), *shape);
}

#define TG_BINARY_VERIFIER(OP, IS_COMPARISON)                                  \
  LogicalResult OP::verify() {                                                 \
    return verifyBroadcastBinary(*this, IS_COMPARISON);                        \
  }
TG_BINARY_VERIFIER(AddOp, false)
TG_BINARY_VERIFIER(SubOp, false)
TG_BINARY_VERIFIER(MulOp, false)
TG_BINARY_VERIFIER(DivOp, false)
TG_BINARY_VERIFIER(PowOp, false)
TG_BINARY_VERIFIER(MaxOp, false)
TG_BINARY_VERIFIER(MinOp, false)
TG_BINARY_VERIFIER(EqOp, true)
TG_BINARY_VERIFIER(LtOp, true)
TG_BINARY_VERIFIER(GtOp, true)
#undef TG_BINARY_VERIFIER

/// Verifies a reduction: axes valid and the result shape they imply.
template <typename OpTy>
static LogicalResult verifyReduction(OpTy op) {
  FailureOr<Shape> shape =
      reduceShape(shapeOf(op.getInput()), op.getAxes(), op.getKeepDims(),
                  [&] { return op.emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  return verifyResultShape(op, op.getResult(), *shape);
}

LogicalResult ReduceSumOp::verify() { return verifyReduction(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduction(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduction(*this); }

/// Checks that a normalization weight (or bias) is `[D]` for input `[..., D]`.
static LogicalResult verifyNormParameter(Operation *op, Value input,
                                         Value parameter, StringRef name) {
  llvm::ArrayRef<int64_t> shape = shapeOf(input);
  if (shape.empty()) {
    return op->emitOpError() << "expected an input of rank >= 1";
  }
  llvm::ArrayRef<int64_t> parameterShape = shapeOf(parameter);
  if (parameterShape.size() != 1 ||
      !dimsCompatible(parameterShape[0], shape.back())) {
    return op->emitOpError()
           << "expected " << name << " of shape [" << shape.back()
           << "] (the input's last dim), got " << formatShape(parameterShape);
  }
  return success();
}

static LogicalResult verifyEpsilon(Operation *op, double epsilon) {
  if (!(epsilon >= 0.0)) {
    return op->emitOpError() << "expected a non-negative epsilon, got "
                             << epsilon;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  RankedTensorType type = getTensorType();
  if (!type.hasStaticShape()) {
    return emitOpError() << "parameter @" << getSymName()
                         << " must have a static shape, got " << type;
  }
  if (auto external =
          llvm::dyn_cast_if_present<ExternalDataAttr>(getLocationAttr())) {
    int64_t expected = byteSize(type);
    if (external.getLength() != static_cast<uint64_t>(expected)) {
      return emitOpError() << "external data of @" << getSymName() << " holds "
                           << external.getLength() << " bytes, but " << type
                           << " needs " << expected;
    }
    if (external.getFile().getValue().empty()) {
      return emitOpError() << "external data of @" << getSymName()
                           << " names no file";
    }
  }
  if (DictionaryAttr quant = getQuantAttr()) {
    FailureOr<quant::QuantSpec> spec = quantSpecFromDict(quant, [&] {
      return emitOpError() << "parameter @" << getSymName() << ": ";
    });
    if (failed(spec)) {
      return failure();
    }
    if (getTrainable()) {
      return emitOpError() << "parameter @" << getSymName()
                           << " is trainable and cannot be stored quantized";
    }
    bool transposed = quantSourceTransposed(quant);
    if (type.getRank() != 2 || !llvm::isa<FloatType>(type.getElementType()) ||
        type.getDimSize(transposed ? 1 : 0) != spec->rows ||
        type.getDimSize(transposed ? 0 : 1) != spec->cols) {
      return emitOpError() << "parameter @" << getSymName() << " of type "
                           << type << " cannot hold a quantized [" << spec->rows
                           << ", " << spec->cols << "] weight"
                           << (transposed ? " stored transposed" : "");
    }
  }
  return success();
}

/// The tg.param that `user` (a param_ref or dequantize) names, or an error
/// on `user`.
static FailureOr<ParamOp> lookupParam(Operation *user,
                                      SymbolTableCollection &symbolTable,
                                      FlatSymbolRefAttr name) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(user, name);
  if (!param) {
    return user->emitOpError()
           << name << " does not name a tg.param in an enclosing symbol table";
  }
  return param;
}

LogicalResult
DequantizeOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> found = lookupParam(*this, symbolTable, getNameAttr());
  if (failed(found)) {
    return failure();
  }
  ParamOp param = *found;
  DictionaryAttr quant = param.getQuantAttr();
  if (!quant) {
    return emitOpError() << "parameter @" << getName()
                         << " is not quantized; read it with tg.param_ref";
  }
  auto rows = quant.getAs<IntegerAttr>("rows");
  auto cols = quant.getAs<IntegerAttr>("cols");
  auto type = llvm::cast<RankedTensorType>(getType());
  if (!rows || !cols || type.getRank() != 2 ||
      type.getDimSize(0) != rows.getInt() ||
      type.getDimSize(1) != cols.getInt() ||
      type.getElementType() != param.getTensorType().getElementType()) {
    return emitOpError() << "result type " << type
                         << " does not match the quantized weight @"
                         << getName() << " ([" << (rows ? rows.getInt() : 0)
                         << ", " << (cols ? cols.getInt() : 0) << "] of "
                         << param.getTensorType().getElementType() << ")";
  }
  if (Value storage = getStorage()) {
    FailureOr<RankedTensorType> bytes =
        quantizedStorageType(quant, [&] { return emitOpError(); });
    if (failed(bytes)) {
      return failure();
    }
    if (storage.getType() != *bytes) {
      return emitOpError() << "reads @" << getName() << "'s bytes from "
                           << storage.getType() << ", expected " << *bytes;
    }
  }
  return success();
}

LogicalResult
ParamRefOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<ParamOp> found = lookupParam(*this, symbolTable, getNameAttr());
  if (failed(found)) {
    return failure();
  }
  ParamOp param = *found;
  if (param.getQuantAttr()) {
    return emitOpError() << "parameter @" << getName()
                         << " is stored quantized; read it with tg.dequantize";
  }
  if (param.getType() != getType()) {
    return emitOpError() << "result type " << getType()
                         << " does not match parameter @" << getName()
                         << " of type " << param.getType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  if (failed(verifySameElementType(*this, {getLhs(), getRhs(), getResult()},
                                   {"lhs", "rhs", "result"}))) {
    return failure();
  }
  FailureOr<Shape> shape = matmulShape(shapeOf(getLhs()), shapeOf(getRhs()),
                                       [&] { return emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), *shape);
}

LogicalResult LinearOp::verify() {
  llvm::SmallVector<Value> values = {getInput(), getWeight(), getResult()};
  llvm::SmallVector<StringRef> names = {"input", "weight", "result"};
  std::optional<llvm::ArrayRef<int64_t>> biasShape;
  if (getBias()) {
    values.push_back(getBias());
    names.push_back("bias");
    biasShape = shapeOf(getBias());
  }
  if (failed(verifySameElementType(*this, values, names))) {
    return failure();
  }
  FailureOr<Shape> shape =
      linearShape(shapeOf(getInput()), shapeOf(getWeight()), biasShape,
                  [&] { return emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), *shape);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  // -(-x) == x exactly in IEEE arithmetic.
  if (auto inner = getInput().getDefiningOp<NegOp>()) {
    return inner.getInput();
  }
  return {};
}

LogicalResult SelectOp::verify() {
  if (failed(verifySameElementType(
          *this, {getOnTrue(), getOnFalse(), getResult()},
          {"on_true", "on_false", "result"}))) {
    return failure();
  }
  auto emit = [&] { return emitOpError(); };
  FailureOr<Shape> values =
      broadcastShapes(shapeOf(getOnTrue()), shapeOf(getOnFalse()), emit);
  if (failed(values)) {
    return failure();
  }
  FailureOr<Shape> shape =
      broadcastShapes(shapeOf(getCondition()), *values, emit);
  if (failed(shape)) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), *shape);
}

void BandMaskOp::build(OpBuilder &builder, OperationState &state, Type type,
                       int64_t lower, int64_t upper, double inside,
                       double outside) {
  build(builder, state, type, builder.getI64IntegerAttr(lower),
        builder.getI64IntegerAttr(upper), builder.getF64FloatAttr(inside),
        builder.getF64FloatAttr(outside));
}

LogicalResult BandMaskOp::verify() {
  auto type = llvm::cast<RankedTensorType>(getType());
  if (type.getRank() < 2) {
    return emitOpError() << "expected a result of rank >= 2 (rows and "
                            "columns), got "
                         << formatShape(type.getShape());
  }
  if (getLowerDiagonal() > getUpperDiagonal()) {
    return emitOpError() << "expected lower <= upper, got " << getLowerDiagonal()
                         << " > " << getUpperDiagonal();
  }
  Type element = type.getElementType();
  for (auto [name, value] : {std::pair("inside", getInside().convertToDouble()),
                             std::pair("outside", getOutside().convertToDouble())}) {
    if (std::isnan(value)) {
      return emitOpError() << name << " must not be NaN";
    }
    if (element.isInteger(1) && value != 0.0 && value != 1.0) {
      return emitOpError() << "expected " << name
                           << " to be 0 or 1 for an i1 mask, got " << value;
    }
    if (element.isInteger() && value != std::floor(value)) {
      return emitOpError() << "expected an integer " << name << " for "
                           << element << ", got " << value;
    }
  }
  if (!element.isIntOrFloat()) {
    return emitOpError() << "expected an integer or float element type, got "
                         << element;
  }
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  int64_t rank = shapeOf(getInput()).size();
  int64_t axis = getAxisAttr().getInt();
  if (axis < 0 || axis >= rank) {
    return emitOpError() << "axis " << axis << " is out of range [0, "
                         << rank << ")";
  }
  return success();
}

LogicalResult RMSNormOp::verify() {
  if (failed(verifySameElementType(*this,
                                   {getInput(), getWeight(), getResult()},
                                   {"input", "weight", "result"})) ||
      failed(verifyNormParameter(*this, getInput(), getWeight(), "weight")) ||
      failed(verifyEpsilon(*this, getEpsilon().convertToDouble()))) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), shapeOf(getInput()));
}

LogicalResult LayerNormOp::verify() {
  llvm::SmallVector<Value> values = {getInput(), getWeight(), getResult()};
  llvm::SmallVector<StringRef> names = {"input", "weight", "result"};
  if (getBias()) {
    values.push_back(getBias());
    names.push_back("bias");
  }
  if (failed(verifySameElementType(*this, values, names)) ||
      failed(verifyNormParameter(*this, getInput(), getWeight(), "weight")) ||
      (getBias() &&
       failed(verifyNormParameter(*this, getInput(), getBias(), "bias"))) ||
      failed(verifyEpsilon(*this, getEpsilon().convertToDouble()))) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), shapeOf(getInput()));
}

//===----------------------------------------------------------------------===//
// Transformer blocks
//===----------------------------------------------------------------------===//

LogicalResult RopeOp::verify() {
  if (failed(verifySameElementType(
          *this, {getInput(), getCos(), getSin(), getResult()},
          {"input", "cos", "sin", "result"}))) {
    return failure();
  }
  llvm::ArrayRef<int64_t> input = shapeOf(getInput());
  if (input.size() != 4) {
    return emitOpError() << "expected input of rank 4 ([batch, heads, seq, "
                            "head_dim]), got "
                         << formatShape(input);
  }
  int64_t headDim = input[3];
  if (headDim != ShapedType::kDynamic && headDim % 2 != 0) {
    return emitOpError() << "expected an even head_dim, got " << headDim;
  }
  llvm::ArrayRef<int64_t> cos = shapeOf(getCos());
  if (cos != shapeOf(getSin())) {
    return emitOpError() << "cos " << formatShape(cos) << " and sin "
                         << formatShape(shapeOf(getSin()))
                         << " must have one shape";
  }
  Shape perSequence = {input[2], input[3]};
  Shape perBatch = {input[0], input[2], input[3]};
  if (!shapesCompatible(cos, perSequence) && !shapesCompatible(cos, perBatch)) {
    return emitOpError() << "expected cos and sin of shape "
                         << formatShape(perSequence) << " or "
                         << formatShape(perBatch) << ", got "
                         << formatShape(cos);
  }
  return verifyResultShape(*this, getResult(), input);
}

LogicalResult tailor::tg::verifyAttentionMasking(Operation *op, bool causal,
                                     std::optional<uint64_t> window,
                                     std::optional<APFloat> softcap) {
  if (window && (static_cast<int64_t>(*window) < 1 || !causal)) {
    return op->emitOpError()
           << "expected a window of at least 1 key on a causal attention, got "
           << static_cast<int64_t>(*window)
           << (causal ? "" : " without causal");
  }
  if (softcap && !(softcap->convertToDouble() > 0.0)) {
    return op->emitOpError() << "expected a positive softcap, got "
                             << softcap->convertToDouble();
  }
  return success();
}

LogicalResult tailor::tg::verifyAttentionPositions(Operation *op,
                                                   Value positions, Value query,
                                                   bool causal) {
  if (!positions) {
    return success();
  }
  if (!causal) {
    return op->emitOpError() << "expected positions (document masking) on a "
                                "causal attention only";
  }
  ArrayRef<int64_t> q = shapeOf(query), p = shapeOf(positions);
  if (q.size() == 4 && (p.size() != 2 || !dimsCompatible(p[0], q[0]) ||
                        !dimsCompatible(p[1], q[2]))) {
    return op->emitOpError() << "expected positions of shape [" << q[0] << ", "
                             << q[2] << "] (batch, query rows), got "
                             << formatShape(p);
  }
  return success();
}

LogicalResult tailor::tg::verifyAttentionBias(
    Operation *op, Value query, Value key,
    std::optional<ArrayRef<double>> alibiSlopes, Value bias) {
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key);
  if (q.size() != 4 || k.size() != 4) {
    return success(); // the shape check reports it
  }
  if (alibiSlopes) {
    if (static_cast<int64_t>(alibiSlopes->size()) != q[1]) {
      return op->emitOpError()
             << "expected one ALiBi slope per query head (" << q[1]
             << "), got " << alibiSlopes->size();
    }
    for (double slope : *alibiSlopes) {
      if (!std::isfinite(slope)) {
        return op->emitOpError() << "expected finite ALiBi slopes, got "
                                 << slope;
      }
    }
  }
  if (!bias) {
    return success();
  }
  if (getElementTypeOrSelf(bias.getType()) !=
      getElementTypeOrSelf(query.getType())) {
    return op->emitOpError() << "expected a bias of the query's element type "
                             << getElementTypeOrSelf(query.getType())
                             << ", got "
                             << getElementTypeOrSelf(bias.getType());
  }
  Shape scores = {q[0], q[1], q[2], k[2]};
  ArrayRef<int64_t> b = shapeOf(bias);
  bool fits = b.size() == 4;
  for (size_t i = 0; fits && i < 4; ++i) {
    fits = b[i] == 1 || b[i] == scores[i] || ShapedType::isDynamic(b[i]) ||
           ShapedType::isDynamic(scores[i]);
  }
  if (!fits) {
    return op->emitOpError()
           << "expected a bias broadcastable to the scores "
           << formatShape(scores) << " (rank 4, each dim equal or 1), got "
           << formatShape(b);
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifySameElementType(
          *this, {getQuery(), getKey(), getValue(), getResult()},
          {"query", "key", "value", "result"}))) {
    return failure();
  }
  if (std::optional<APFloat> scale = getScale();
      scale && !(scale->convertToDouble() > 0.0)) {
    return emitOpError() << "expected a positive scale, got "
                         << scale->convertToDouble();
  }
  if (failed(verifyAttentionMasking(*this, getCausal(), getWindow(),
                                    getSoftcap())) ||
      failed(verifyAttentionPositions(*this, getPositions(), getQuery(),
                                      getCausal()))) {
    return failure();
  }
  FailureOr<Shape> shape =
      attentionShape(shapeOf(getQuery()), shapeOf(getKey()),
                     shapeOf(getValue()), [&] { return emitOpError(); });
  if (failed(shape) ||
      failed(verifyAttentionBias(*this, getQuery(), getKey(),
                                 getAlibiSlopes(), getBias()))) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), *shape);
}

LogicalResult EmbeddingOp::verify() {
  if (failed(verifySameElementType(*this, {getTable(), getResult()},
                                   {"table", "result"}))) {
    return failure();
  }
  FailureOr<Shape> shape = embeddingShape(
      shapeOf(getTable()), shapeOf(getIds()), [&] { return emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), *shape);
}

LogicalResult CrossEntropyOp::verify() {
  llvm::ArrayRef<int64_t> logits = shapeOf(getLogits());
  llvm::ArrayRef<int64_t> labels = shapeOf(getLabels());
  if (logits.size() != 2) {
    return emitOpError() << "expected logits of shape [tokens, vocab], got "
                         << formatShape(logits);
  }
  if (labels.size() != 1 || !dimsCompatible(labels[0], logits[0])) {
    return emitOpError() << "expected labels of shape [" << logits[0]
                         << "] (one per row of logits), got "
                         << formatShape(labels);
  }
  Shape expected;
  if (getReduction() == LossReduction::None) {
    expected.push_back(logits[0]);
  }
  return verifyResultShape(*this, getResult(), expected);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  int64_t in = numElements(shapeOf(getInput()));
  int64_t out = numElements(shapeOf(getResult()));
  if (in != ShapedType::kDynamic && out != ShapedType::kDynamic && in != out) {
    return emitOpError() << "cannot reshape " << formatShape(shapeOf(getInput()))
                         << " (" << in << " elements) to "
                         << formatShape(shapeOf(getResult())) << " (" << out
                         << " elements)";
  }
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  // reshape(reshape(x)) == reshape(x): only the final shape matters.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

LogicalResult BroadcastOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  ArrayRef<int64_t> out = shapeOf(getResult());
  if (in.size() > out.size()) {
    return emitOpError() << "cannot broadcast " << formatShape(in)
                         << " to the lower-rank " << formatShape(out);
  }
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != 1 && !dimsCompatible(in[i], out[lead + i])) {
      return emitOpError() << "cannot broadcast " << formatShape(in) << " to "
                           << formatShape(out) << ": input dim " << i << " is "
                           << in[i] << ", expected 1 or " << out[lead + i];
    }
  }
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) {
    return getInput();
  }
  return {};
}

LogicalResult TransposeOp::verify() {
  FailureOr<Shape> shape =
      transposeShape(shapeOf(getInput()), getPermutation(),
                     [&] { return emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), *shape);
}

static bool isIdentityPermutation(llvm::ArrayRef<int64_t> permutation) {
  for (auto [i, source] : llvm::enumerate(permutation)) {
    if (static_cast<int64_t>(i) != source) {
      return false;
    }
  }
  return true;
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  if (isIdentityPermutation(getPermutation()) &&
      getInput().getType() == getType()) {
    return getInput();
  }
  // transpose(transpose(x, inner), outer) == transpose(x, inner o outer).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    llvm::ArrayRef<int64_t> innerPermutation = inner.getPermutation();
    llvm::SmallVector<int64_t> composed;
    for (int64_t source : getPermutation()) {
      composed.push_back(innerPermutation[source]);
    }
    if (isIdentityPermutation(composed) &&
        inner.getInput().getType() == getType()) {
      return inner.getInput();
    }
    getInputMutable().assign(inner.getInput());
    setPermutation(composed);
    return getResult();
  }
  return {};
}

LogicalResult SliceOp::verify() {
  FailureOr<Shape> shape =
      sliceShape(shapeOf(getInput()), getStarts(), getEnds(), getSteps(),
                 [&] { return emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), *shape);
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  // A slice that keeps everything is the input itself.
  if (getInput().getType() != getType()) {
    return {};
  }
  llvm::ArrayRef<int64_t> shape = shapeOf(getInput());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (getStarts()[i] != 0 || getSteps()[i] != 1 || getEnds()[i] != shape[i]) {
      return {};
    }
  }
  return getInput();
}

LogicalResult ConcatOp::verify() {
  llvm::SmallVector<Shape> shapes;
  for (Value input : getInputs()) {
    llvm::ArrayRef<int64_t> shape = shapeOf(input);
    shapes.emplace_back(shape.begin(), shape.end());
  }
  FailureOr<Shape> shape =
      concatShape(shapes, getAxisAttr().getInt(), [&] { return emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  return verifyResultShape(*this, getResult(), *shape);
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType()) {
    return getInputs()[0];
  }
  return {};
}

LogicalResult SplitOp::verify() {
  if (getResults().size() != getSizes().size()) {
    return emitOpError() << "expected " << getSizes().size()
                         << " results (one per size), got "
                         << getResults().size();
  }
  FailureOr<llvm::SmallVector<Shape>> pieces =
      splitShapes(shapeOf(getInput()), getAxisAttr().getInt(), getSizes(),
                  [&] { return emitOpError(); });
  if (failed(pieces)) {
    return failure();
  }
  for (auto [index, result, expected] :
       llvm::enumerate(getResults(), *pieces)) {
    if (!shapesCompatible(shapeOf(result), expected)) {
      return emitOpError() << "result " << index << " has shape "
                           << formatShape(shapeOf(result))
                           << ", expected " << formatShape(expected);
    }
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/tg/TGOps.cpp.inc"
