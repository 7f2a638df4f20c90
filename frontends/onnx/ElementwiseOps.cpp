//===- ElementwiseOps.cpp - import of ONNX elementwise ops ----------------===//
//
// Unary and broadcasting binary ops (Mod and Sign on ints too), Where,
// Cast, Clip, Gelu. Each folds on the host when its inputs are compile-time
// tensors and emits the matching tg op otherwise. Logic ops and comparisons
// tg has no run-time form for (And, Not, LessOrEqual, ...) only ever appear
// in mask arithmetic, which folds.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ImportContext.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <onnx/onnx_pb.h>

#include <cmath>

using namespace mlir;

namespace tailor::onnx_import {
namespace {

/// Input `i` as a run-time value of element type `like`'s (constants are
/// converted first, so `x + 1` with an int64 literal works on a float `x`
/// only when ONNX's own typing allows it; we convert for Pow exponents).
FailureOr<Value> valueAs(NodeContext &ctx, size_t i, ElementType type) {
  if (ctx.isConstant(i) && ctx.elementType(i) != type) {
    FailureOr<const HostTensor *> host = ctx.constant(i, "operand");
    if (failed(host)) {
      return failure();
    }
    return ctx.materialize((*host)->castTo(type));
  }
  return ctx.value(i);
}

template <typename OpTy>
Value createBinary(NodeContext &ctx, Value lhs, Value rhs,
                   ArrayRef<int64_t> shape, Type elem) {
  return OpTy::create(ctx.builder(), ctx.loc(), ctx.tensorType(shape, elem),
                      lhs, rhs);
}

/// A bool constant shaped [] for broadcasting.
Value boolScalar(NodeContext &ctx, bool value) {
  auto type = RankedTensorType::get({}, ctx.builder().getI1Type());
  return arith::ConstantOp::create(
      ctx.builder(), ctx.loc(),
      DenseElementsAttr::get(type, ctx.builder().getBoolAttr(value)));
}

/// The comparisons and logic tg spells with eq, lt, gt and select (all of
/// which have CPU and CUDA kernels): a <= b is lt(a, b) or eq(a, b) (false
/// on NaN, as ONNX says); And/Or are selects on bools; Xor is not(eq).
FailureOr<Value> buildRuntimeLogic(NodeContext &ctx, BinaryFn fn, Value lhs,
                                   Value rhs, ArrayRef<int64_t> shape) {
  OpBuilder &b = ctx.builder();
  Type boolType = b.getI1Type();
  RankedTensorType type = ctx.tensorType(shape, boolType);
  auto select = [&](Value c, Value x, Value y) -> Value {
    return tg::SelectOp::create(b, ctx.loc(), type, c, x, y);
  };
  auto notOf = [&](Value v) -> Value {
    return tg::EqOp::create(b, ctx.loc(), type, v, boolScalar(ctx, false));
  };
  if (fn == BinaryFn::LessOrEqual || fn == BinaryFn::GreaterOrEqual) {
    Value strict = fn == BinaryFn::LessOrEqual
                       ? Value(tg::LtOp::create(b, ctx.loc(), type, lhs, rhs))
                       : Value(tg::GtOp::create(b, ctx.loc(), type, lhs, rhs));
    Value equal = tg::EqOp::create(b, ctx.loc(), type, lhs, rhs);
    return select(strict, boolScalar(ctx, true), equal);
  }
  if (getElementTypeOrSelf(lhs.getType()) != boolType) {
    return ctx.error() << "expected bool operands, got "
                       << getElementTypeOrSelf(lhs.getType());
  }
  switch (fn) {
  case BinaryFn::And: return select(lhs, rhs, boolScalar(ctx, false));
  case BinaryFn::Or: return select(lhs, boolScalar(ctx, true), rhs);
  default:
    return notOf(tg::EqOp::create(b, ctx.loc(), type, lhs, rhs));
  }
}

/// Emits `fn(lhs, rhs)` at run time; fails for ops tg has no form for.
FailureOr<Value> buildRuntimeBinary(NodeContext &ctx, BinaryFn fn, Value lhs,
                                    Value rhs) {
  auto lt = llvm::cast<RankedTensorType>(lhs.getType());
  auto rt = llvm::cast<RankedTensorType>(rhs.getType());
  FailureOr<tg::Shape> shape =
      tg::broadcastShapes(lt.getShape(), rt.getShape(), ctx.shapeErrorFn());
  if (failed(shape)) {
    return failure();
  }
  if (lt.getElementType() != rt.getElementType()) {
    return ctx.error() << "operands have different element types ("
                       << lt.getElementType() << " and " << rt.getElementType()
                       << ")";
  }
  Type elem = lt.getElementType();
  Type boolType = ctx.builder().getI1Type();
  switch (fn) {
  case BinaryFn::Add: return createBinary<tg::AddOp>(ctx, lhs, rhs, *shape, elem);
  case BinaryFn::Sub: return createBinary<tg::SubOp>(ctx, lhs, rhs, *shape, elem);
  case BinaryFn::Mul: return createBinary<tg::MulOp>(ctx, lhs, rhs, *shape, elem);
  case BinaryFn::Div: return createBinary<tg::DivOp>(ctx, lhs, rhs, *shape, elem);
  case BinaryFn::Pow: return createBinary<tg::PowOp>(ctx, lhs, rhs, *shape, elem);
  case BinaryFn::Max: return createBinary<tg::MaxOp>(ctx, lhs, rhs, *shape, elem);
  case BinaryFn::Min: return createBinary<tg::MinOp>(ctx, lhs, rhs, *shape, elem);
  case BinaryFn::Equal: return createBinary<tg::EqOp>(ctx, lhs, rhs, *shape, boolType);
  case BinaryFn::Less: return createBinary<tg::LtOp>(ctx, lhs, rhs, *shape, boolType);
  case BinaryFn::Greater: return createBinary<tg::GtOp>(ctx, lhs, rhs, *shape, boolType);
  case BinaryFn::LessOrEqual:
  case BinaryFn::GreaterOrEqual:
  case BinaryFn::And:
  case BinaryFn::Or:
  case BinaryFn::Xor:
    return buildRuntimeLogic(ctx, fn, lhs, rhs, *shape);
  default:
    return ctx.error() << "is only supported on compile-time inputs (mask "
                          "arithmetic), but an input is computed at run time";
  }
}

template <BinaryFn Fn>
LogicalResult importBinary(NodeContext &ctx) {
  if (ctx.numInputs() != 2 || !ctx.hasInput(0) || !ctx.hasInput(1)) {
    return ctx.error() << "expected 2 inputs, got " << ctx.numInputs();
  }
  if (ctx.allConstant()) {
    FailureOr<const HostTensor *> a = ctx.constant(0, "A");
    FailureOr<const HostTensor *> b = ctx.constant(1, "B");
    if (failed(a) || failed(b)) {
      return failure();
    }
    llvm::Expected<HostTensor> out = foldBinary(Fn, **a, **b);
    if (!out) {
      return ctx.error() << llvm::toString(out.takeError());
    }
    return ctx.setOutput(0, std::move(*out));
  }
  // The side that is a constant takes the other side's element type (Pow's
  // exponent may legally differ; for the rest ONNX requires equal types).
  ElementType lhsType = ctx.isConstant(0) ? ctx.elementType(1) : ctx.elementType(0);
  ElementType rhsType = ctx.isConstant(1) ? ctx.elementType(0) : ctx.elementType(1);
  if (Fn == BinaryFn::Pow && !ctx.isConstant(1)) {
    rhsType = ctx.elementType(1);
  }
  FailureOr<Value> lhs = valueAs(ctx, 0, lhsType);
  FailureOr<Value> rhs = valueAs(ctx, 1, rhsType);
  if (failed(lhs) || failed(rhs)) {
    return failure();
  }
  if (Fn == BinaryFn::Pow &&
      getElementTypeOrSelf(lhs->getType()) != getElementTypeOrSelf(rhs->getType())) {
    *rhs = tg::CastOp::create(
        ctx.builder(), ctx.loc(),
        ctx.tensorType(llvm::cast<RankedTensorType>(rhs->getType()).getShape(),
                       getElementTypeOrSelf(lhs->getType())),
        *rhs);
  }
  FailureOr<Value> result = buildRuntimeBinary(ctx, Fn, *lhs, *rhs);
  if (failed(result)) {
    return failure();
  }
  ctx.setOutput(0, *result);
  return success();
}

/// Sum, Max, Min, Mean take any number of inputs (>= 1).
template <BinaryFn Fn, bool IsMean = false>
LogicalResult importVariadic(NodeContext &ctx) {
  if (ctx.numInputs() == 0) {
    return ctx.error() << "expected at least one input";
  }
  if (ctx.allConstant()) {
    FailureOr<const HostTensor *> first = ctx.constant(0, "input 0");
    if (failed(first)) {
      return failure();
    }
    HostTensor acc = **first;
    for (size_t i = 1; i < ctx.numInputs(); ++i) {
      FailureOr<const HostTensor *> next = ctx.constant(i, "input");
      if (failed(next)) {
        return failure();
      }
      llvm::Expected<HostTensor> out = foldBinary(Fn, acc, **next);
      if (!out) {
        return ctx.error() << llvm::toString(out.takeError());
      }
      acc = std::move(*out);
    }
    if (IsMean) {
      llvm::Expected<HostTensor> out = foldBinary(
          BinaryFn::Div, acc,
          HostTensor::scalarFloat(static_cast<double>(ctx.numInputs()), acc.type()));
      if (!out) {
        return ctx.error() << llvm::toString(out.takeError());
      }
      acc = std::move(*out);
    }
    return ctx.setOutput(0, std::move(acc));
  }
  ElementType type = ElementType::Float;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.isConstant(i)) {
      type = ctx.elementType(i);
    }
  }
  FailureOr<Value> acc = valueAs(ctx, 0, type);
  if (failed(acc)) {
    return failure();
  }
  for (size_t i = 1; i < ctx.numInputs(); ++i) {
    FailureOr<Value> next = valueAs(ctx, i, type);
    if (failed(next)) {
      return failure();
    }
    acc = buildRuntimeBinary(ctx, Fn, *acc, *next);
    if (failed(acc)) {
      return failure();
    }
  }
  if (IsMean) {
    acc = buildRuntimeBinary(
        ctx, BinaryFn::Div, *acc,
        ctx.scalarLike(*acc, static_cast<double>(ctx.numInputs())));
    if (failed(acc)) {
      return failure();
    }
  }
  ctx.setOutput(0, *acc);
  return success();
}

template <typename OpTy>
Value createUnary(NodeContext &ctx, Value input) {
  return OpTy::create(ctx.builder(), ctx.loc(), input.getType(), input);
}

template <UnaryFn Fn>
LogicalResult importUnary(NodeContext &ctx) {
  if (!ctx.hasInput(0)) {
    return ctx.error() << "expected 1 input";
  }
  if (ctx.isConstant(0)) {
    FailureOr<const HostTensor *> a = ctx.constant(0, "X");
    if (failed(a)) {
      return failure();
    }
    return ctx.setOutput(0, foldUnary(Fn, **a));
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  bool isFloat = isFloatType(ctx.elementType(0));
  Value result;
  if (isFloat) {
    switch (Fn) {
    case UnaryFn::Neg: result = createUnary<tg::NegOp>(ctx, *x); break;
    case UnaryFn::Abs: result = createUnary<tg::AbsOp>(ctx, *x); break;
    case UnaryFn::Sqrt: result = createUnary<tg::SqrtOp>(ctx, *x); break;
    case UnaryFn::Exp: result = createUnary<tg::ExpOp>(ctx, *x); break;
    case UnaryFn::Log: result = createUnary<tg::LogOp>(ctx, *x); break;
    case UnaryFn::Sin: result = createUnary<tg::SinOp>(ctx, *x); break;
    case UnaryFn::Cos: result = createUnary<tg::CosOp>(ctx, *x); break;
    case UnaryFn::Tanh: result = createUnary<tg::TanhOp>(ctx, *x); break;
    case UnaryFn::Sigmoid: result = createUnary<tg::SigmoidOp>(ctx, *x); break;
    case UnaryFn::Erf: result = createUnary<tg::ErfOp>(ctx, *x); break;
    case UnaryFn::Relu: result = createUnary<tg::ReluOp>(ctx, *x); break;
    case UnaryFn::Reciprocal: result = createUnary<tg::ReciprocalOp>(ctx, *x); break;
    case UnaryFn::IsNaN:
      result = tg::IsNanOp::create(
          ctx.builder(), ctx.loc(),
          ctx.tensorType(ctx.shape(0), ctx.builder().getI1Type()), *x);
      break;
    default: break;
    }
  }
  if (!result && Fn == UnaryFn::Sign &&
      ctx.elementType(0) != ElementType::Bool) {
    result = createUnary<tg::SignOp>(ctx, *x);
  }
  if (!result && Fn == UnaryFn::Not &&
      ctx.elementType(0) == ElementType::Bool) {
    // not x is eq(x, false): the eq kernel reads bools.
    result = tg::EqOp::create(ctx.builder(), ctx.loc(), x->getType(), *x,
                              boolScalar(ctx, false));
  }
  if (!result) {
    return ctx.error() << "has no run-time form in tailor (it folds only when "
                          "its input is known at compile time)";
  }
  ctx.setOutput(0, result);
  return success();
}

/// Mod: fmod = 0 takes the divisor's sign (Python), fmod = 1 the dividend's.
/// Folded when both inputs are known, a tg.mod otherwise.
LogicalResult importMod(NodeContext &ctx) {
  bool fmod = ctx.attrInt("fmod", 0) != 0;
  if (ctx.numInputs() != 2 || ctx.allConstant()) {
    return fmod ? importBinary<BinaryFn::FMod>(ctx)
                : importBinary<BinaryFn::Mod>(ctx);
  }
  ElementType type =
      ctx.isConstant(0) ? ctx.elementType(1) : ctx.elementType(0);
  FailureOr<Value> lhs = valueAs(ctx, 0, type);
  FailureOr<Value> rhs = valueAs(ctx, 1, type);
  if (failed(lhs) || failed(rhs)) {
    return failure();
  }
  auto lt = llvm::cast<RankedTensorType>(lhs->getType());
  auto rt = llvm::cast<RankedTensorType>(rhs->getType());
  if (lt.getElementType() != rt.getElementType()) {
    return ctx.error() << "operands have different element types ("
                       << lt.getElementType() << " and " << rt.getElementType()
                       << ")";
  }
  FailureOr<tg::Shape> shape =
      tg::broadcastShapes(lt.getShape(), rt.getShape(), ctx.shapeErrorFn());
  if (failed(shape)) {
    return failure();
  }
  auto mod = tg::ModOp::create(ctx.builder(), ctx.loc(),
                               ctx.tensorType(*shape, lt.getElementType()),
                               *lhs, *rhs);
  if (fmod) {
    mod.setFmod(true);
  }
  ctx.setOutput(0, mod.getResult());
  return success();
}

/// IsInf with detect_positive / detect_negative (compile time only).
LogicalResult importIsInf(NodeContext &ctx) {
  FailureOr<HostTensor> x = ctx.heldConstant(0, "X");
  if (failed(x)) {
    return failure();
  }
  bool positive = ctx.attrInt("detect_positive", 1) != 0;
  bool negative = ctx.attrInt("detect_negative", 1) != 0;
  HostTensor out(ElementType::Bool, x->dims());
  for (int64_t i = 0; i < out.size(); ++i) {
    double v = x->getDouble(i);
    out.setInt(i, std::isinf(v) && ((v > 0 && positive) || (v < 0 && negative)));
  }
  return ctx.setOutput(0, std::move(out));
}

LogicalResult importWhere(NodeContext &ctx) {
  if (ctx.numInputs() != 3) {
    return ctx.error() << "expected 3 inputs (condition, X, Y)";
  }
  if (ctx.allConstant()) {
    FailureOr<const HostTensor *> c = ctx.constant(0, "condition");
    FailureOr<const HostTensor *> x = ctx.constant(1, "X");
    FailureOr<const HostTensor *> y = ctx.constant(2, "Y");
    if (failed(c) || failed(x) || failed(y)) {
      return failure();
    }
    llvm::Expected<HostTensor> out = foldWhere(**c, **x, **y);
    if (!out) {
      return ctx.error() << llvm::toString(out.takeError());
    }
    return ctx.setOutput(0, std::move(*out));
  }
  ElementType type = ctx.isConstant(1) ? ctx.elementType(2) : ctx.elementType(1);
  FailureOr<Value> c = valueAs(ctx, 0, ElementType::Bool);
  FailureOr<Value> x = valueAs(ctx, 1, type);
  FailureOr<Value> y = valueAs(ctx, 2, type);
  if (failed(c) || failed(x) || failed(y)) {
    return failure();
  }
  auto shapeOf = [](Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).getShape();
  };
  FailureOr<tg::Shape> xy =
      tg::broadcastShapes(shapeOf(*x), shapeOf(*y), ctx.shapeErrorFn());
  if (failed(xy)) {
    return failure();
  }
  FailureOr<tg::Shape> shape =
      tg::broadcastShapes(shapeOf(*c), *xy, ctx.shapeErrorFn());
  if (failed(shape)) {
    return failure();
  }
  ctx.setOutput(0, tg::SelectOp::create(
                       ctx.builder(), ctx.loc(),
                       ctx.tensorType(*shape, getElementTypeOrSelf(x->getType())),
                       *c, *x, *y));
  return success();
}

LogicalResult castTo(NodeContext &ctx, int32_t to) {
  if (!isSupportedElementType(to)) {
    return ctx.error() << "casts to " << elementTypeName(to)
                       << ", which tailor does not import";
  }
  ElementType type = static_cast<ElementType>(to);
  if (ctx.isConstant(0)) {
    FailureOr<const HostTensor *> x = ctx.constant(0, "input");
    if (failed(x)) {
      return failure();
    }
    return ctx.setOutput(0, (*x)->castTo(type));
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  RankedTensorType resultType = ctx.tensorType(ctx.shape(0), type);
  if (resultType == x->getType()) {
    ctx.setOutput(0, *x);
    return success();
  }
  ctx.setOutput(0, tg::CastOp::create(ctx.builder(), ctx.loc(), resultType, *x));
  return success();
}

LogicalResult importCast(NodeContext &ctx) {
  if (!ctx.hasAttribute("to")) {
    return ctx.error() << "missing attribute 'to'";
  }
  return castTo(ctx, static_cast<int32_t>(ctx.attrInt("to", 0)));
}

LogicalResult importCastLike(NodeContext &ctx) {
  if (!ctx.hasInput(1)) {
    return ctx.error() << "expected 2 inputs (input, target_type)";
  }
  return castTo(ctx, static_cast<int32_t>(ctx.elementType(1)));
}

/// Clip(x, min, max): bounds are attributes before opset 11, optional inputs
/// after.
LogicalResult importClip(NodeContext &ctx) {
  std::optional<double> lo, hi;
  if (ctx.opset() < 11) {
    if (ctx.hasAttribute("min")) {
      lo = ctx.attrFloat("min", 0);
    }
    if (ctx.hasAttribute("max")) {
      hi = ctx.attrFloat("max", 0);
    }
  } else {
    for (size_t i : {size_t(1), size_t(2)}) {
      if (!ctx.hasInput(i)) {
        continue;
      }
      FailureOr<const HostTensor *> bound =
          ctx.constant(i, i == 1 ? "min" : "max");
      if (failed(bound)) {
        return failure();
      }
      if ((*bound)->size() != 1) {
        return ctx.error() << (i == 1 ? "min" : "max") << " must be a scalar";
      }
      (i == 1 ? lo : hi) = (*bound)->getDouble(0);
    }
  }
  if (ctx.isConstant(0)) {
    FailureOr<HostTensor> x = ctx.heldConstant(0, "input");
    if (failed(x)) {
      return failure();
    }
    HostTensor out = std::move(*x);
    for (int64_t i = 0; i < out.size(); ++i) {
      double v = out.getDouble(i);
      if (lo && v < *lo) v = *lo;
      if (hi && v > *hi) v = *hi;
      out.setDouble(i, v);
    }
    return ctx.setOutput(0, std::move(out));
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  Value result = *x;
  auto type = result.getType();
  if (lo) {
    result = tg::MaxOp::create(ctx.builder(), ctx.loc(), type, result,
                               ctx.scalarLike(result, *lo));
  }
  if (hi) {
    result = tg::MinOp::create(ctx.builder(), ctx.loc(), type, result,
                               ctx.scalarLike(result, *hi));
  }
  ctx.setOutput(0, result);
  return success();
}

/// Gelu (opset 20): approximate = "none" | "tanh".
LogicalResult importGelu(NodeContext &ctx) {
  std::string approximate = ctx.attrString("approximate", "none");
  tg::GeluApproximation kind;
  if (approximate == "none") {
    kind = tg::GeluApproximation::None;
  } else if (approximate == "tanh") {
    kind = tg::GeluApproximation::Tanh;
  } else {
    return ctx.error() << "approximate must be 'none' or 'tanh', got '"
                       << approximate << "'";
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  ctx.setOutput(0, tg::GeluOp::create(
                       ctx.builder(), ctx.loc(), x->getType(), *x,
                       tg::GeluApproximationAttr::get(ctx.context(), kind)));
  return success();
}

LogicalResult importIdentity(NodeContext &ctx) {
  if (ctx.isConstant(0)) {
    FailureOr<const HostTensor *> x = ctx.constant(0, "input");
    if (failed(x)) {
      return failure();
    }
    return ctx.setOutput(0, **x);
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  ctx.setOutput(0, *x);
  return success();
}

} // namespace

void appendElementwiseImporters(std::vector<OpImporter> &table) {
  auto add = [&](const char *op, int64_t since, OpBuilderFn fn,
                 int64_t until = kMaxDefaultOpset) {
    table.push_back({"", op, since, until, fn});
  };
  add("Add", 7, importBinary<BinaryFn::Add>);
  add("Sub", 7, importBinary<BinaryFn::Sub>);
  add("Mul", 7, importBinary<BinaryFn::Mul>);
  add("Div", 7, importBinary<BinaryFn::Div>);
  add("Pow", 7, importBinary<BinaryFn::Pow>);
  add("Mod", 10, importMod);
  add("Equal", 7, importBinary<BinaryFn::Equal>);
  add("Less", 7, importBinary<BinaryFn::Less>);
  add("Greater", 7, importBinary<BinaryFn::Greater>);
  add("LessOrEqual", 12, importBinary<BinaryFn::LessOrEqual>);
  add("GreaterOrEqual", 12, importBinary<BinaryFn::GreaterOrEqual>);
  add("And", 7, importBinary<BinaryFn::And>);
  add("Or", 7, importBinary<BinaryFn::Or>);
  add("Xor", 7, importBinary<BinaryFn::Xor>);
  add("Max", 8, importVariadic<BinaryFn::Max>);
  add("Min", 8, importVariadic<BinaryFn::Min>);
  add("Sum", 8, importVariadic<BinaryFn::Add>);
  add("Mean", 8, importVariadic<BinaryFn::Add, /*IsMean=*/true>);
  add("Neg", 6, importUnary<UnaryFn::Neg>);
  add("Abs", 6, importUnary<UnaryFn::Abs>);
  add("Sqrt", 6, importUnary<UnaryFn::Sqrt>);
  add("Exp", 6, importUnary<UnaryFn::Exp>);
  add("Log", 6, importUnary<UnaryFn::Log>);
  add("Sin", 7, importUnary<UnaryFn::Sin>);
  add("Cos", 7, importUnary<UnaryFn::Cos>);
  add("Tanh", 6, importUnary<UnaryFn::Tanh>);
  add("Sigmoid", 6, importUnary<UnaryFn::Sigmoid>);
  add("Erf", 9, importUnary<UnaryFn::Erf>);
  add("Relu", 6, importUnary<UnaryFn::Relu>);
  add("Reciprocal", 6, importUnary<UnaryFn::Reciprocal>);
  add("Not", 1, importUnary<UnaryFn::Not>);
  add("Floor", 6, importUnary<UnaryFn::Floor>);
  add("Ceil", 6, importUnary<UnaryFn::Ceil>);
  add("Sign", 9, importUnary<UnaryFn::Sign>);
  add("IsNaN", 9, importUnary<UnaryFn::IsNaN>);
  add("IsInf", 10, importIsInf);
  add("Where", 9, importWhere);
  add("Cast", 6, importCast);
  add("CastLike", 15, importCastLike);
  add("Clip", 6, importClip);
  add("Gelu", 20, importGelu);
  add("Identity", 1, importIdentity);
}

} // namespace tailor::onnx_import
