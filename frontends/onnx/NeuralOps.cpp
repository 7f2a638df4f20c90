//===- NeuralOps.cpp - import of ONNX matmul, reduction and norm ops ------===//
//
// MatMul, Gemm, Einsum, Softmax, ReduceSum/Mean/Max/Min, LayerNormalization,
// RMSNormalization and ONNX Runtime's SimplifiedLayerNormalization. The
// importer stays literal here (a Gemm is transposes, a matmul and adds);
// recognizing linear layers is the raising passes' job, so one pattern set
// serves every exporter.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ImportContext.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include "llvm/ADT/StringExtras.h"

#include <onnx/onnx_pb.h>

using namespace mlir;

namespace tailor::onnx_import {
namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getShape();
}

Value transpose(NodeContext &ctx, Value v, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    identity &= perm[i] == static_cast<int64_t>(i);
  }
  if (identity) {
    return v;
  }
  SmallVector<int64_t> dims;
  for (int64_t p : perm) {
    dims.push_back(shapeOf(v)[p]);
  }
  return tg::TransposeOp::create(
      ctx.builder(), ctx.loc(),
      ctx.tensorType(dims, getElementTypeOrSelf(v.getType())), v,
      ctx.builder().getDenseI64ArrayAttr(perm));
}

FailureOr<Value> matmul(NodeContext &ctx, Value a, Value b) {
  FailureOr<tg::Shape> shape =
      tg::matmulShape(shapeOf(a), shapeOf(b), ctx.shapeErrorFn());
  if (failed(shape)) {
    return failure();
  }
  return Value(tg::MatmulOp::create(
      ctx.builder(), ctx.loc(),
      ctx.tensorType(*shape, getElementTypeOrSelf(a.getType())), a, b));
}

/// MatMul with NumPy semantics for 1-D operands.
LogicalResult importMatMul(NodeContext &ctx) {
  if (ctx.rank(0) == 0 || ctx.rank(1) == 0) {
    return ctx.error() << "operands must have rank >= 1";
  }
  if (ctx.allConstant()) {
    FailureOr<const HostTensor *> a = ctx.constant(0, "A");
    FailureOr<const HostTensor *> b = ctx.constant(1, "B");
    if (failed(a) || failed(b)) {
      return failure();
    }
    HostTensor a2 = (*a)->rank() == 1 ? (*a)->reshaped({1, (*a)->dims()[0]}) : **a;
    HostTensor b2 = (*b)->rank() == 1 ? (*b)->reshaped({(*b)->dims()[0], 1}) : **b;
    llvm::Expected<Dims> batch =
        broadcastDims(a2.dims().drop_back(2), b2.dims().drop_back(2));
    if (!batch) {
      return ctx.error() << llvm::toString(batch.takeError());
    }
    batch->push_back(a2.dims()[a2.rank() - 2]);
    batch->push_back(b2.dims().back());
    if (failed(ctx.checkFoldSize(*batch))) {
      return failure();
    }
    llvm::Expected<HostTensor> out = foldMatmul(a2, b2);
    if (!out) {
      return ctx.error() << llvm::toString(out.takeError());
    }
    Dims dims(out->dims());
    if ((*b)->rank() == 1) dims.pop_back();
    if ((*a)->rank() == 1) dims.erase(dims.end() - ((*b)->rank() == 1 ? 1 : 2));
    return ctx.setOutput(0, out->reshaped(dims));
  }
  FailureOr<Value> a = ctx.value(0);
  FailureOr<Value> b = ctx.value(1);
  if (failed(a) || failed(b)) {
    return failure();
  }
  bool aVector = ctx.rank(0) == 1, bVector = ctx.rank(1) == 1;
  Value lhs = aVector ? ctx.reshape(*a, {1, shapeOf(*a)[0]}) : *a;
  Value rhs = bVector ? ctx.reshape(*b, {shapeOf(*b)[0], 1}) : *b;
  FailureOr<Value> product = matmul(ctx, lhs, rhs);
  if (failed(product)) {
    return failure();
  }
  SmallVector<int64_t> dims(shapeOf(*product));
  if (bVector) dims.pop_back();
  if (aVector) dims.erase(dims.end() - (bVector ? 1 : 2));
  ctx.setOutput(0, ctx.reshape(*product, dims));
  return success();
}

/// Gemm: alpha * op(A) op(B) + beta * C, all 2-D.
LogicalResult importGemm(NodeContext &ctx) {
  if (ctx.rank(0) != 2 || ctx.rank(1) != 2) {
    return ctx.error() << "A and B must be 2-D, got "
                       << tg::formatShape(ctx.shape(0)) << " and "
                       << tg::formatShape(ctx.shape(1));
  }
  FailureOr<Value> a = ctx.value(0);
  FailureOr<Value> b = ctx.value(1);
  if (failed(a) || failed(b)) {
    return failure();
  }
  Value lhs = ctx.attrInt("transA", 0) ? transpose(ctx, *a, {1, 0}) : *a;
  Value rhs = ctx.attrInt("transB", 0) ? transpose(ctx, *b, {1, 0}) : *b;
  FailureOr<Value> y = matmul(ctx, lhs, rhs);
  if (failed(y)) {
    return failure();
  }
  double alpha = ctx.attrFloat("alpha", 1.0), beta = ctx.attrFloat("beta", 1.0);
  if (alpha != 1.0) {
    *y = tg::MulOp::create(ctx.builder(), ctx.loc(), y->getType(), *y,
                           ctx.scalarLike(*y, alpha));
  }
  if (ctx.hasInput(2) && beta != 0.0) {
    FailureOr<Value> c = ctx.value(2);
    if (failed(c)) {
      return failure();
    }
    Value bias = *c;
    if (beta != 1.0) {
      bias = tg::MulOp::create(ctx.builder(), ctx.loc(), bias.getType(), bias,
                               ctx.scalarLike(bias, beta));
    }
    FailureOr<tg::Shape> shape =
        tg::broadcastShapes(shapeOf(*y), shapeOf(bias), ctx.shapeErrorFn());
    if (failed(shape)) {
      return failure();
    }
    *y = tg::AddOp::create(ctx.builder(), ctx.loc(),
                           ctx.tensorType(*shape, getElementTypeOrSelf(y->getType())),
                           *y, bias);
  }
  ctx.setOutput(0, *y);
  return success();
}

/// Two-operand Einsum as one batched matmul: labels in both inputs and the
/// output are batch dims, in both inputs only are contracted, in one input
/// and the output are free. Covers the contractions exporters emit
/// (rotary tables "i,j->ij", attention "bhqd,bhkd->bhqk").
LogicalResult importEinsum(NodeContext &ctx) {
  std::string equation = ctx.attrString("equation", "");
  equation.erase(std::remove(equation.begin(), equation.end(), ' '),
                 equation.end());
  size_t arrow = equation.find("->");
  if (arrow == std::string::npos || ctx.numInputs() != 2) {
    return ctx.error() << "only two-operand equations with an explicit output "
                          "are supported, got '"
                       << equation << "' with " << ctx.numInputs() << " inputs";
  }
  std::string lhsSpec = equation.substr(0, arrow);
  std::string out = equation.substr(arrow + 2);
  size_t comma = lhsSpec.find(',');
  if (comma == std::string::npos) {
    return ctx.error() << "equation '" << equation << "' needs two operands";
  }
  std::string a = lhsSpec.substr(0, comma), b = lhsSpec.substr(comma + 1);
  if (a.find('.') != std::string::npos || b.find('.') != std::string::npos) {
    return ctx.error() << "ellipsis in einsum equations is not supported";
  }
  if (static_cast<int64_t>(a.size()) != ctx.rank(0) ||
      static_cast<int64_t>(b.size()) != ctx.rank(1)) {
    return ctx.error() << "equation '" << equation
                       << "' does not match the operand ranks";
  }
  std::string batch, left, right, contracted;
  for (char c : a) {
    bool inB = b.find(c) != std::string::npos, inOut = out.find(c) != std::string::npos;
    if (inB && inOut) batch += c;
    else if (inB) contracted += c;
    else if (inOut) left += c;
    else return ctx.error() << "label '" << c << "' is summed within one operand, which is not supported";
  }
  for (char c : b) {
    bool inA = a.find(c) != std::string::npos, inOut = out.find(c) != std::string::npos;
    if (!inA && inOut) right += c;
    else if (!inA) return ctx.error() << "label '" << c << "' is summed within one operand, which is not supported";
  }
  auto dimOf = [&](const std::string &spec, ArrayRef<int64_t> shape, char c) {
    return shape[spec.find(c)];
  };
  ArrayRef<int64_t> sa = ctx.shape(0), sb = ctx.shape(1);
  for (char c : batch + contracted) {
    if (dimOf(a, sa, c) != dimOf(b, sb, c)) {
      return ctx.error() << "label '" << c << "' has size " << dimOf(a, sa, c)
                         << " in the first operand and " << dimOf(b, sb, c)
                         << " in the second";
    }
  }
  auto permFor = [](const std::string &spec, const std::string &order) {
    SmallVector<int64_t> perm;
    for (char c : order) perm.push_back(static_cast<int64_t>(spec.find(c)));
    return perm;
  };
  auto sizeOf = [&](const std::string &labels, const std::string &spec,
                    ArrayRef<int64_t> shape) {
    int64_t n = 1;
    for (char c : labels) n *= dimOf(spec, shape, c);
    return n;
  };
  FailureOr<Value> va = ctx.value(0);
  FailureOr<Value> vb = ctx.value(1);
  if (failed(va) || failed(vb)) {
    return failure();
  }
  int64_t nb = sizeOf(batch, a, sa), m = sizeOf(left, a, sa),
          k = sizeOf(contracted, a, sa), n = sizeOf(right, b, sb);
  Value lhs = ctx.reshape(transpose(ctx, *va, permFor(a, batch + left + contracted)),
                          {nb, m, k});
  Value rhs = ctx.reshape(transpose(ctx, *vb, permFor(b, batch + contracted + right)),
                          {nb, k, n});
  FailureOr<Value> product = matmul(ctx, lhs, rhs);
  if (failed(product)) {
    return failure();
  }
  std::string produced = batch + left + right;
  SmallVector<int64_t> producedDims;
  for (char c : produced) {
    producedDims.push_back(a.find(c) != std::string::npos ? dimOf(a, sa, c)
                                                          : dimOf(b, sb, c));
  }
  Value result = ctx.reshape(*product, producedDims);
  ctx.setOutput(0, transpose(ctx, result, permFor(produced, out)));
  return success();
}

/// Softmax: before opset 13 the input is coerced to 2-D at `axis` (default
/// 1) and normalized over everything from `axis` on; from 13 over one axis
/// (default -1).
LogicalResult importSoftmax(NodeContext &ctx) {
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  ArrayRef<int64_t> shape = shapeOf(*x);
  int64_t rank = static_cast<int64_t>(shape.size());
  bool coerced = ctx.opset() < 13;
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", coerced ? 1 : -1), rank, "axis");
  if (failed(axis)) {
    return failure();
  }
  Value input = *x;
  int64_t softmaxAxis = *axis;
  if (coerced && *axis != rank - 1) {
    input = ctx.reshape(*x, {product(shape.take_front(*axis)),
                             product(shape.drop_front(*axis))});
    softmaxAxis = 1;
  }
  Value result = tg::SoftmaxOp::create(ctx.builder(), ctx.loc(), input.getType(),
                                       input,
                                       ctx.builder().getI64IntegerAttr(softmaxAxis));
  ctx.setOutput(0, ctx.reshape(result, shape));
  return success();
}

/// ReduceSum/Mean/Max/Min. `axesAsInput` marks the opsets where axes moved
/// from the attribute to input 1 (13 for ReduceSum, 18 for the others).
template <ReduceFn Fn>
LogicalResult importReduce(NodeContext &ctx, bool axesAsInput) {
  ArrayRef<int64_t> shape = ctx.shape(0);
  int64_t rank = static_cast<int64_t>(shape.size());
  std::optional<std::vector<int64_t>> axes;
  if (axesAsInput) {
    if (ctx.hasInput(1)) {
      FailureOr<std::vector<int64_t>> a = ctx.constantInts(1, "axes");
      if (failed(a)) {
        return failure();
      }
      axes = *a;
    }
  } else {
    axes = ctx.attrInts("axes");
  }
  bool keepDims = ctx.attrInt("keepdims", 1) != 0;
  if (!axes || axes->empty()) {
    if (ctx.attrInt("noop_with_empty_axes", 0)) {
      if (ctx.isConstant(0)) {
        return ctx.setOutput(0, **ctx.constant(0, "data"));
      }
      FailureOr<Value> x = ctx.value(0);
      if (failed(x)) {
        return failure();
      }
      ctx.setOutput(0, *x);
      return success();
    }
    axes = std::vector<int64_t>();
    for (int64_t i = 0; i < rank; ++i) {
      axes->push_back(i);
    }
  }
  SmallVector<int64_t> normalized;
  for (int64_t a : *axes) {
    FailureOr<int64_t> axis = ctx.normalizeAxis(a, rank, "axis");
    if (failed(axis)) {
      return failure();
    }
    if (llvm::is_contained(normalized, *axis)) {
      return ctx.error() << "axis " << *axis << " is repeated";
    }
    normalized.push_back(*axis);
  }
  llvm::sort(normalized);
  if (ctx.isConstant(0)) {
    FailureOr<HostTensor> x = ctx.heldConstant(0, "data");
    if (failed(x)) {
      return failure();
    }
    return ctx.setOutput(0, foldReduce(Fn, *x, normalized, keepDims));
  }
  FailureOr<tg::Shape> outShape =
      tg::reduceShape(shape, normalized, keepDims, ctx.shapeErrorFn());
  FailureOr<Value> x = ctx.value(0);
  if (failed(outShape) || failed(x)) {
    return failure();
  }
  OpBuilder &b = ctx.builder();
  RankedTensorType type =
      ctx.tensorType(*outShape, getElementTypeOrSelf(x->getType()));
  auto axesAttr = b.getDenseI64ArrayAttr(normalized);
  UnitAttr keep = keepDims ? b.getUnitAttr() : nullptr;
  Value result;
  switch (Fn) {
  case ReduceFn::Sum:
    result = tg::ReduceSumOp::create(b, ctx.loc(), type, *x, axesAttr, keep);
    break;
  case ReduceFn::Mean:
    result = tg::ReduceMeanOp::create(b, ctx.loc(), type, *x, axesAttr, keep);
    break;
  case ReduceFn::Max:
    result = tg::ReduceMaxOp::create(b, ctx.loc(), type, *x, axesAttr, keep);
    break;
  case ReduceFn::Min: {
    // min(x) = -max(-x)
    Value negated = tg::NegOp::create(b, ctx.loc(), x->getType(), *x);
    Value max = tg::ReduceMaxOp::create(b, ctx.loc(), type, negated, axesAttr, keep);
    result = tg::NegOp::create(b, ctx.loc(), type, max);
    break;
  }
  case ReduceFn::Prod:
    return ctx.error() << "is only supported on compile-time inputs";
  }
  ctx.setOutput(0, result);
  return success();
}

template <ReduceFn Fn, int64_t InputSince>
LogicalResult importReduceAt(NodeContext &ctx) {
  return importReduce<Fn>(ctx, ctx.opset() >= InputSince);
}

/// Shared checks of the normalization ops: they normalize over the last dim
/// only (axis = -1 or rank - 1), and the optional extra outputs (mean,
/// inverse std) must be unused.
FailureOr<Value> normInput(NodeContext &ctx) {
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  int64_t rank = ctx.rank(0);
  FailureOr<int64_t> axis = ctx.normalizeAxis(ctx.attrInt("axis", -1), rank, "axis");
  if (failed(axis)) {
    return failure();
  }
  if (*axis != rank - 1) {
    return ctx.error() << "normalizing over dims " << *axis << ".." << rank - 1
                       << " is not supported (only the last dim)";
  }
  for (size_t i = 1; i < ctx.numOutputs(); ++i) {
    if (!ctx.node().output(i).empty()) {
      return ctx.error() << "output " << i
                         << " (saved statistics) is not supported";
    }
  }
  return x;
}

LogicalResult importLayerNorm(NodeContext &ctx) {
  FailureOr<Value> x = normInput(ctx);
  FailureOr<Value> scale = ctx.value(1);
  if (failed(x) || failed(scale)) {
    return failure();
  }
  Value bias;
  if (ctx.hasInput(2)) {
    FailureOr<Value> b = ctx.value(2);
    if (failed(b)) {
      return failure();
    }
    bias = *b;
  }
  double epsilon = ctx.attrFloat("epsilon", 1e-5);
  ctx.setOutput(0, tg::LayerNormOp::create(
                       ctx.builder(), ctx.loc(), x->getType(), *x, *scale, bias,
                       ctx.builder().getF64FloatAttr(epsilon)));
  return success();
}

LogicalResult importRMSNorm(NodeContext &ctx) {
  FailureOr<Value> x = normInput(ctx);
  FailureOr<Value> scale = ctx.value(1);
  if (failed(x) || failed(scale)) {
    return failure();
  }
  double epsilon = ctx.attrFloat("epsilon", 1e-5);
  ctx.setOutput(0, tg::RMSNormOp::create(ctx.builder(), ctx.loc(), x->getType(),
                                         *x, *scale,
                                         ctx.builder().getF64FloatAttr(epsilon)));
  return success();
}

} // namespace

void appendNeuralImporters(std::vector<OpImporter> &table) {
  int64_t last = kMaxDefaultOpset;
  table.push_back({"", "MatMul", 1, last, importMatMul});
  table.push_back({"", "Gemm", 7, last, importGemm});
  table.push_back({"", "Einsum", 12, last, importEinsum});
  table.push_back({"", "Softmax", 1, 12, importSoftmax});
  table.push_back({"", "Softmax", 13, last, importSoftmax});
  // ReduceSum took axes as an input from opset 13; the others from 18.
  table.push_back({"", "ReduceSum", 1, 12, importReduceAt<ReduceFn::Sum, 13>});
  table.push_back({"", "ReduceSum", 13, last, importReduceAt<ReduceFn::Sum, 13>});
  table.push_back({"", "ReduceMean", 1, 17, importReduceAt<ReduceFn::Mean, 18>});
  table.push_back({"", "ReduceMean", 18, last, importReduceAt<ReduceFn::Mean, 18>});
  table.push_back({"", "ReduceMax", 1, 17, importReduceAt<ReduceFn::Max, 18>});
  table.push_back({"", "ReduceMax", 18, last, importReduceAt<ReduceFn::Max, 18>});
  table.push_back({"", "ReduceMin", 1, 17, importReduceAt<ReduceFn::Min, 18>});
  table.push_back({"", "ReduceMin", 18, last, importReduceAt<ReduceFn::Min, 18>});
  table.push_back({"", "ReduceProd", 1, 17, importReduceAt<ReduceFn::Prod, 18>});
  table.push_back({"", "ReduceProd", 18, last, importReduceAt<ReduceFn::Prod, 18>});
  table.push_back({"", "LayerNormalization", 17, last, importLayerNorm});
  table.push_back({"", "RMSNormalization", 23, last, importRMSNorm});
  // ONNX Runtime's transformer tools write this contrib op into the default
  // domain; it is RMSNorm.
  table.push_back({"", "SimplifiedLayerNormalization", 1, last, importRMSNorm});
  table.push_back({"com.microsoft", "SimplifiedLayerNormalization", 1, 1, importRMSNorm});
}

} // namespace tailor::onnx_import
