//===- TGIndexOps.cpp - verifiers of gather, scatter, cumsum and mod ------===//

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace tailor::tg;

static llvm::ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<ShapedType>(value.getType()).getShape();
}

static Type elementTypeOf(Value value) {
  return llvm::cast<ShapedType>(value.getType()).getElementType();
}

static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank) {
    return op->emitOpError() << "expected axis in [0, " << rank << ") for rank "
                             << rank << ", got " << axis;
  }
  return success();
}

static LogicalResult expectType(Operation *op, Value value, StringRef name,
                                ArrayRef<int64_t> shape, Type element) {
  if (!shapesCompatible(shapeOf(value), shape) ||
      elementTypeOf(value) != element) {
    return op->emitOpError()
           << "expected " << name << " of shape " << formatShape(shape)
           << " and element type " << element << ", got " << value.getType();
  }
  return success();
}

/// GatherElements and ScatterElements: `indices` has the data's rank and
/// no dim beyond the data's outside `axis`.
static LogicalResult verifyElementIndices(Operation *op, Value data,
                                          Value indices, int64_t axis) {
  ArrayRef<int64_t> d = shapeOf(data), i = shapeOf(indices);
  if (d.size() != i.size()) {
    return op->emitOpError() << "expected indices of the data's rank "
                             << d.size() << ", got " << formatShape(i);
  }
  if (failed(verifyAxis(op, axis, static_cast<int64_t>(d.size())))) {
    return failure();
  }
  for (size_t k = 0; k < d.size(); ++k) {
    if (static_cast<int64_t>(k) != axis && !ShapedType::isDynamic(i[k]) &&
        !ShapedType::isDynamic(d[k]) && i[k] > d[k]) {
      return op->emitOpError()
             << "expected indices " << formatShape(i) << " no larger than data "
             << formatShape(d) << " outside axis " << axis;
    }
  }
  return success();
}

LogicalResult GatherElementsOp::verify() {
  if (failed(verifyElementIndices(*this, getData(), getIndices(),
                                  static_cast<int64_t>(getAxis())))) {
    return failure();
  }
  return expectType(*this, getResult(), "result", shapeOf(getIndices()),
                    elementTypeOf(getData()));
}

LogicalResult ScatterElementsOp::verify() {
  if (failed(verifyElementIndices(*this, getData(), getIndices(),
                                  static_cast<int64_t>(getAxis()))) ||
      failed(expectType(*this, getUpdates(), "updates", shapeOf(getIndices()),
                        elementTypeOf(getData())))) {
    return failure();
  }
  return expectType(*this, getResult(), "result", shapeOf(getData()),
                    elementTypeOf(getData()));
}

/// The shape GatherND gives (and ScatterND's updates have):
/// indices[:-1] + data[b + k:].
static FailureOr<Shape> gatherNDShape(Operation *op, ArrayRef<int64_t> data,
                                      ArrayRef<int64_t> indices,
                                      int64_t batchDims) {
  int64_t r = static_cast<int64_t>(data.size());
  int64_t q = static_cast<int64_t>(indices.size());
  if (q < 1 || batchDims < 0 || batchDims >= q || batchDims > r) {
    return op->emitOpError()
           << "expected indices of rank > batch_dims " << batchDims
           << " and data of rank >= it, got " << formatShape(data) << " and "
           << formatShape(indices);
  }
  int64_t k = indices.back();
  if (ShapedType::isDynamic(k) || k < 1 || batchDims + k > r) {
    return op->emitOpError()
           << "expected index tuples of length in [1, " << r - batchDims
           << "] (the data's dims after batch_dims), got " << k;
  }
  for (int64_t d = 0; d < batchDims; ++d) {
    if (!dimsCompatible(data[d], indices[d])) {
      return op->emitOpError()
             << "expected batch dim " << d
             << " of data and indices to agree, got " << formatShape(data)
             << " and " << formatShape(indices);
    }
  }
  Shape out(indices.drop_back());
  out.append(data.begin() + batchDims + k, data.end());
  return out;
}

LogicalResult GatherNDOp::verify() {
  FailureOr<Shape> shape =
      gatherNDShape(*this, shapeOf(getData()), shapeOf(getIndices()),
                    static_cast<int64_t>(getBatchDims()));
  if (failed(shape)) {
    return failure();
  }
  return expectType(*this, getResult(), "result", *shape,
                    elementTypeOf(getData()));
}

LogicalResult ScatterNDOp::verify() {
  FailureOr<Shape> shape =
      gatherNDShape(*this, shapeOf(getData()), shapeOf(getIndices()),
                    static_cast<int64_t>(getBatchDims()));
  if (failed(shape) || failed(expectType(*this, getUpdates(), "updates", *shape,
                                         elementTypeOf(getData())))) {
    return failure();
  }
  return expectType(*this, getResult(), "result", shapeOf(getData()),
                    elementTypeOf(getData()));
}

LogicalResult CumsumOp::verify() {
  if (getAxis().has_value() == static_cast<bool>(getAxisValue())) {
    return emitOpError() << "expected either an axis attribute or a run-time "
                            "axis operand, not "
                         << (getAxis() ? "both" : "neither");
  }
  if (Value axis = getAxisValue()) {
    if (numElements(shapeOf(axis)) != 1) {
      return emitOpError() << "expected a run-time axis of one element, got "
                           << axis.getType();
    }
    return success();
  }
  return verifyAxis(*this, static_cast<int64_t>(*getAxis()),
                    static_cast<int64_t>(shapeOf(getInput()).size()));
}

LogicalResult ModOp::verify() {
  Type element = elementTypeOf(getLhs());
  if (elementTypeOf(getRhs()) != element ||
      elementTypeOf(getResult()) != element) {
    return emitOpError() << "expected operands and result of one element "
                            "type, got "
                         << getLhs().getType() << ", " << getRhs().getType()
                         << " -> " << getResult().getType();
  }
  FailureOr<Shape> shape = broadcastShapes(shapeOf(getLhs()), shapeOf(getRhs()),
                                           [&] { return emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  return expectType(*this, getResult(), "result", *shape, element);
}
