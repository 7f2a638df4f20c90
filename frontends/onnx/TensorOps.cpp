//===- TensorOps.cpp - import of ONNX shape and data-movement ops ---------===//
//
// Constant, Shape, ConstantOfShape, Range, Trilu, and Reshape, Flatten,
// Squeeze, Unsqueeze, Expand, Transpose, Slice, Concat, Split (folded when
// known, tg data-movement ops otherwise; gathers, scatters and CumSum are in
// IndexingOps.cpp). This is where the shape arithmetic of an export
// disappears: with every dim bound, Shape yields a compile-time tensor and
// everything downstream of it folds.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ImportContext.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include <onnx/onnx_pb.h>

using namespace mlir;

namespace tailor::onnx_import {
namespace {

FailureOr<HostTensor> tensorFromProto(NodeContext &ctx,
                                      const onnx::TensorProto &tensor) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    return ctx.error() << "Constant holds external data, which is not supported";
  }
  llvm::Expected<HostTensor> decoded =
      decodeTensorProto(tensor, tensor.raw_data(), "tensor value");
  if (!decoded) {
    return ctx.error() << llvm::toString(decoded.takeError());
  }
  return std::move(*decoded);
}

LogicalResult importConstant(NodeContext &ctx) {
  const onnx::NodeProto &node = ctx.node();
  if (node.attribute_size() != 1) {
    return ctx.error() << "expected exactly one value attribute, got "
                       << node.attribute_size();
  }
  const onnx::AttributeProto &attr = node.attribute(0);
  llvm::StringRef name = attr.name();
  if (name == "value") {
    FailureOr<HostTensor> t = tensorFromProto(ctx, attr.t());
    if (failed(t)) {
      return failure();
    }
    return ctx.setOutput(0, std::move(*t));
  }
  if (name == "value_float") {
    return ctx.setOutput(0, HostTensor::scalarFloat(attr.f()));
  }
  if (name == "value_int") {
    return ctx.setOutput(0, HostTensor::scalarInt(attr.i()));
  }
  if (name == "value_ints") {
    return ctx.setOutput(0, HostTensor::vectorInt(std::vector<int64_t>(
                                attr.ints().begin(), attr.ints().end())));
  }
  if (name == "value_floats") {
    HostTensor t(ElementType::Float, {attr.floats_size()});
    for (int i = 0; i < attr.floats_size(); ++i) {
      t.setDouble(i, attr.floats(i));
    }
    return ctx.setOutput(0, std::move(t));
  }
  return ctx.error() << "value attribute '" << name << "' is not supported";
}

/// Shape (opset 15 adds start/end).
LogicalResult importShape(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.shape(0);
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t start = ctx.attrInt("start", 0);
  int64_t end = ctx.attrInt("end", rank);
  auto clampAxis = [&](int64_t a) {
    if (a < 0) a += rank;
    return std::clamp<int64_t>(a, 0, rank);
  };
  start = clampAxis(start);
  end = clampAxis(end);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) {
    dims.push_back(shape[i]);
  }
  return ctx.setOutput(0, HostTensor::vectorInt(dims));
}

LogicalResult importSize(NodeContext &ctx) {
  return ctx.setOutput(0, HostTensor::scalarInt(product(ctx.shape(0))));
}

LogicalResult importConstantOfShape(NodeContext &ctx) {
  FailureOr<std::vector<int64_t>> dims = ctx.constantInts(0, "shape");
  if (failed(dims)) {
    return failure();
  }
  HostTensor fill = HostTensor::scalarFloat(0.0);
  if (const onnx::AttributeProto *value = ctx.attribute("value")) {
    FailureOr<HostTensor> t = tensorFromProto(ctx, value->t());
    if (failed(t)) {
      return failure();
    }
    if (t->size() != 1) {
      return ctx.error() << "value must hold one element";
    }
    fill = std::move(*t);
  }
  for (int64_t d : *dims) {
    if (d < 0) {
      return ctx.error() << "shape has a negative dim (" << d << ")";
    }
  }
  // A splat of any size is one lazy broadcast; only the count must fit.
  if (!checkedProduct(*dims)) {
    return ctx.error() << "shape " << tg::formatShape(*dims)
                       << " has more elements than int64 can count";
  }
  llvm::Expected<HostTensor> out = foldExpand(fill.reshaped({}), *dims);
  if (!out) {
    return ctx.error() << llvm::toString(out.takeError());
  }
  return ctx.setOutput(0, std::move(*out));
}

LogicalResult importRange(NodeContext &ctx) {
  FailureOr<const HostTensor *> start = ctx.constant(0, "start");
  FailureOr<const HostTensor *> limit = ctx.constant(1, "limit");
  FailureOr<const HostTensor *> delta = ctx.constant(2, "delta");
  if (failed(start) || failed(limit) || failed(delta)) {
    return failure();
  }
  if ((*start)->size() != 1 || (*limit)->size() != 1 || (*delta)->size() != 1) {
    return ctx.error() << "start, limit and delta must be scalars";
  }
  double s = (*start)->getDouble(0), l = (*limit)->getDouble(0),
         d = (*delta)->getDouble(0);
  if (d == 0) {
    return ctx.error() << "delta is 0";
  }
  double count = std::ceil((l - s) / d);
  // Past 2^62 (or NaN) no count is foldable, and converting it to int64
  // would overflow: say so instead (found by the fuzzer).
  if (!(count < 4.6e18)) {
    return ctx.error() << "start " << s << ", limit " << l << " and delta "
                       << d << " make " << count
                       << " elements, more than can be folded";
  }
  int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  if (failed(ctx.checkFoldSize({n}))) {
    return failure();
  }
  HostTensor out((*start)->type(), {n});
  for (int64_t i = 0; i < n; ++i) {
    if (out.isFloat()) {
      out.setDouble(i, s + static_cast<double>(i) * d);
    } else {
      out.setInt(i, (*start)->getInt(0) + i * (*delta)->getInt(0));
    }
  }
  return ctx.setOutput(0, std::move(out));
}

/// Trilu of a run-time tensor: select(band, x, 0) with the kept triangle a
/// generated band mask (upper: col - row >= k; lower: col - row <= k).
LogicalResult importRuntimeTrilu(NodeContext &ctx, bool upper, int64_t k) {
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  ArrayRef<int64_t> shape = ctx.shape(0);
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  // The diagonals a matrix has are [-(rows - 1), cols - 1]; clamping k to
  // just outside them keeps every bound representable.
  int64_t diagonal = std::clamp<int64_t>(k, -rows, cols);
  int64_t lower = upper ? diagonal : std::min<int64_t>(-rows, diagonal);
  int64_t upperBound = upper ? std::max<int64_t>(cols, diagonal) : diagonal;
  OpBuilder &b = ctx.builder();
  Value keep = tg::BandMaskOp::create(
      b, ctx.loc(), ctx.tensorType(shape.take_back(2), b.getI1Type()), lower,
      upperBound, 1.0, 0.0);
  ctx.setOutput(0, tg::SelectOp::create(b, ctx.loc(), x->getType(), keep, *x,
                                        ctx.scalarLike(*x, 0.0)));
  return success();
}

LogicalResult importTrilu(NodeContext &ctx) {
  if (ctx.rank(0) < 2) {
    return ctx.error() << "input must have rank >= 2";
  }
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    FailureOr<std::vector<int64_t>> kv = ctx.constantInts(1, "k");
    if (failed(kv)) {
      return failure();
    }
    k = kv->empty() ? 0 : kv->front();
  }
  bool upper = ctx.attrInt("upper", 1) != 0;
  if (!ctx.isConstant(0)) {
    return importRuntimeTrilu(ctx, upper, k);
  }
  FailureOr<const HostTensor *> x = ctx.constant(0, "input");
  if (failed(x)) {
    return failure();
  }
  return ctx.setOutput(0, foldTrilu(**x, upper, k));
}

/// Sets output 0 to input 0 with new dims (folded or a tg.reshape).
LogicalResult reshapeTo(NodeContext &ctx, ArrayRef<int64_t> dims) {
  if (product(dims) != product(ctx.shape(0))) {
    return ctx.error() << "cannot reshape " << tg::formatShape(ctx.shape(0))
                       << " (" << product(ctx.shape(0)) << " elements) to "
                       << tg::formatShape(dims) << " (" << product(dims)
                       << " elements)";
  }
  if (ctx.isConstant(0)) {
    FailureOr<const HostTensor *> x = ctx.constant(0, "data");
    if (failed(x)) {
      return failure();
    }
    return ctx.setOutput(0, (*x)->reshaped(dims));
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  ctx.setOutput(0, ctx.reshape(*x, dims));
  return success();
}

LogicalResult importReshape(NodeContext &ctx) {
  SmallVector<int64_t> target;
  if (ctx.opset() < 5) {
    std::optional<std::vector<int64_t>> attr = ctx.attrInts("shape");
    target.assign(attr->begin(), attr->end());
  } else {
    FailureOr<std::vector<int64_t>> shape = ctx.constantInts(1, "shape");
    if (failed(shape)) {
      return failure();
    }
    target.assign(shape->begin(), shape->end());
  }
  ArrayRef<int64_t> in = ctx.shape(0);
  bool allowZero = ctx.attrInt("allowzero", 0) != 0;
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowZero) {
      if (i >= in.size()) {
        return ctx.error() << "shape entry " << i
                           << " is 0 (copy the input dim) but the input "
                           << tg::formatShape(in) << " has no dim " << i;
      }
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (inferred >= 0) {
        return ctx.error() << "shape " << tg::formatShape(target)
                           << " has more than one -1";
      }
      inferred = static_cast<int64_t>(i);
      continue;
    }
    if (target[i] < 0) {
      return ctx.error() << "shape has an invalid dim " << target[i];
    }
    known *= target[i];
  }
  if (inferred >= 0) {
    int64_t total = product(in);
    if (known == 0 || total % known != 0) {
      return ctx.error() << "cannot reshape " << tg::formatShape(in)
                         << " to " << tg::formatShape(target);
    }
    target[inferred] = total / known;
  }
  return reshapeTo(ctx, target);
}

LogicalResult importFlatten(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.shape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = ctx.attrInt("axis", 1);
  if (axis < 0) {
    axis += rank;
  }
  if (axis < 0 || axis > rank) {
    return ctx.error() << "axis " << ctx.attrInt("axis", 1)
                       << " is out of range for rank " << rank;
  }
  return reshapeTo(ctx, {product(in.take_front(axis)),
                         product(in.drop_front(axis))});
}

/// Axes from the attribute (before `inputSince`) or from input 1.
FailureOr<std::optional<std::vector<int64_t>>>
axesOf(NodeContext &ctx, int64_t inputSince) {
  if (ctx.opset() < inputSince) {
    return ctx.attrInts("axes");
  }
  if (!ctx.hasInput(1)) {
    return std::optional<std::vector<int64_t>>();
  }
  FailureOr<std::vector<int64_t>> axes = ctx.constantInts(1, "axes");
  if (failed(axes)) {
    return failure();
  }
  return std::optional<std::vector<int64_t>>(*axes);
}

LogicalResult importSqueeze(NodeContext &ctx) {
  auto axes = axesOf(ctx, 13);
  if (failed(axes)) {
    return failure();
  }
  ArrayRef<int64_t> in = ctx.shape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  SmallVector<bool> drop(rank, false);
  if (*axes) {
    for (int64_t a : **axes) {
      FailureOr<int64_t> axis = ctx.normalizeAxis(a, rank, "axis");
      if (failed(axis)) {
        return failure();
      }
      if (in[*axis] != 1) {
        return ctx.error() << "cannot squeeze dim " << *axis << " of "
                           << tg::formatShape(in) << ": it is " << in[*axis]
                           << ", not 1";
      }
      drop[*axis] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) {
      drop[i] = in[i] == 1;
    }
  }
  SmallVector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!drop[i]) {
      out.push_back(in[i]);
    }
  }
  return reshapeTo(ctx, out);
}

LogicalResult importUnsqueeze(NodeContext &ctx) {
  auto axes = axesOf(ctx, 13);
  if (failed(axes)) {
    return failure();
  }
  if (!*axes) {
    return ctx.error() << "missing axes";
  }
  ArrayRef<int64_t> in = ctx.shape(0);
  int64_t outRank = static_cast<int64_t>(in.size() + (*axes)->size());
  SmallVector<bool> inserted(outRank, false);
  for (int64_t a : **axes) {
    FailureOr<int64_t> axis = ctx.normalizeAxis(a, outRank, "axis");
    if (failed(axis)) {
      return failure();
    }
    if (inserted[*axis]) {
      return ctx.error() << "axis " << *axis << " is repeated";
    }
    inserted[*axis] = true;
  }
  SmallVector<int64_t> out;
  size_t next = 0;
  for (int64_t i = 0; i < outRank; ++i) {
    out.push_back(inserted[i] ? 1 : in[next++]);
  }
  return reshapeTo(ctx, out);
}

LogicalResult importExpand(NodeContext &ctx) {
  FailureOr<std::vector<int64_t>> dims = ctx.constantInts(1, "shape");
  if (failed(dims)) {
    return failure();
  }
  if (ctx.isConstant(0)) {
    FailureOr<const HostTensor *> x = ctx.constant(0, "input");
    if (failed(x)) {
      return failure();
    }
    llvm::Expected<HostTensor> out = foldExpand(**x, *dims);
    if (!out) {
      return ctx.error() << llvm::toString(out.takeError());
    }
    return ctx.setOutput(0, std::move(*out));
  }
  llvm::Expected<Dims> outDims = broadcastDims(ctx.shape(0), *dims);
  if (!outDims) {
    return ctx.error() << llvm::toString(outDims.takeError());
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  if (ArrayRef<int64_t>(*outDims) == ctx.shape(0)) {
    ctx.setOutput(0, *x);
    return success();
  }
  ctx.setOutput(0, tg::BroadcastOp::create(
                       ctx.builder(), ctx.loc(),
                       ctx.tensorType(*outDims, getElementTypeOrSelf(x->getType())),
                       *x));
  return success();
}

/// Tile(x, repeats): each axis a repeats its whole extent repeats[a] times.
/// That is x seen as [1, d0, 1, d1, ...], broadcast to [r0, d0, r1, d1, ...]
/// and merged back: one broadcast between two reshapes, at compile time or
/// at run time. When every repeated axis has extent 1 (repeat_interleave of
/// kv heads: unsqueeze, then tile the new axis) it is the broadcast alone,
/// the form raise-attention unrepeats for grouped-query attention.
LogicalResult importTile(NodeContext &ctx) {
  FailureOr<std::vector<int64_t>> repeats = ctx.constantInts(1, "repeats");
  if (failed(repeats)) {
    return failure();
  }
  ArrayRef<int64_t> in = ctx.shape(0);
  if (repeats->size() != in.size()) {
    return ctx.error() << "repeats has " << repeats->size()
                       << " entries for an input of rank " << in.size();
  }
  Dims interleaved, spread, out;
  bool onlyUnitAxes = true;
  for (size_t a = 0; a < in.size(); ++a) {
    int64_t r = (*repeats)[a];
    if (r < 0) {
      return ctx.error() << "repeats[" << a << "] is negative (" << r << ")";
    }
    int64_t extent = 0;
    if (__builtin_mul_overflow(in[a], r, &extent)) {
      return ctx.error() << "repeating dim " << a << " (" << in[a] << ") "
                         << r << " times overflows int64";
    }
    onlyUnitAxes &= r == 1 || in[a] == 1;
    interleaved.append({1, in[a]});
    spread.append({r, in[a]});
    out.push_back(extent);
  }
  if (ctx.isConstant(0)) {
    FailureOr<const HostTensor *> x = ctx.constant(0, "input");
    if (failed(x)) {
      return failure();
    }
    llvm::Expected<HostTensor> wide =
        foldExpand((*x)->reshaped(interleaved), spread);
    if (!wide) {
      return ctx.error() << llvm::toString(wide.takeError());
    }
    return ctx.setOutput(0, wide->reshaped(out));
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  Type elem = getElementTypeOrSelf(x->getType());
  if (ArrayRef<int64_t>(out) == in) {
    ctx.setOutput(0, *x);
    return success();
  }
  if (onlyUnitAxes) {
    ctx.setOutput(0, tg::BroadcastOp::create(ctx.builder(), ctx.loc(),
                                             ctx.tensorType(out, elem), *x));
    return success();
  }
  Value wide = tg::BroadcastOp::create(ctx.builder(), ctx.loc(),
                                       ctx.tensorType(spread, elem),
                                       ctx.reshape(*x, interleaved));
  ctx.setOutput(0, ctx.reshape(wide, out));
  return success();
}

LogicalResult importTranspose(NodeContext &ctx) {
  int64_t rank = ctx.rank(0);
  SmallVector<int64_t> perm;
  if (std::optional<std::vector<int64_t>> attr = ctx.attrInts("perm")) {
    perm.assign(attr->begin(), attr->end());
  } else {
    for (int64_t i = rank - 1; i >= 0; --i) {
      perm.push_back(i);
    }
  }
  FailureOr<tg::Shape> shape =
      tg::transposeShape(ctx.shape(0), perm, ctx.shapeErrorFn());
  if (failed(shape)) {
    return failure();
  }
  if (ctx.isConstant(0)) {
    FailureOr<const HostTensor *> x = ctx.constant(0, "data");
    if (failed(x)) {
      return failure();
    }
    return ctx.setOutput(0, foldTranspose(**x, perm));
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  ctx.setOutput(0, tg::TransposeOp::create(
                       ctx.builder(), ctx.loc(),
                       ctx.tensorType(*shape, getElementTypeOrSelf(x->getType())),
                       *x, ctx.builder().getDenseI64ArrayAttr(perm)));
  return success();
}

LogicalResult importSlice(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.shape(0);
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.attrInts("starts").value_or(std::vector<int64_t>());
    ends = ctx.attrInts("ends").value_or(std::vector<int64_t>());
    axes = ctx.attrInts("axes").value_or(std::vector<int64_t>());
  } else {
    FailureOr<std::vector<int64_t>> s = ctx.constantInts(1, "starts");
    FailureOr<std::vector<int64_t>> e = ctx.constantInts(2, "ends");
    if (failed(s) || failed(e)) {
      return failure();
    }
    starts = *s;
    ends = *e;
    if (ctx.hasInput(3)) {
      FailureOr<std::vector<int64_t>> a = ctx.constantInts(3, "axes");
      if (failed(a)) {
        return failure();
      }
      axes = *a;
    }
    if (ctx.hasInput(4)) {
      FailureOr<std::vector<int64_t>> st = ctx.constantInts(4, "steps");
      if (failed(st)) {
        return failure();
      }
      steps = *st;
    }
  }
  if (starts.size() != ends.size()) {
    return ctx.error() << "starts and ends differ in length (" << starts.size()
                       << " vs " << ends.size() << ")";
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) {
      axes.push_back(static_cast<int64_t>(i));
    }
  }
  if (steps.empty()) {
    steps.assign(starts.size(), 1);
  }
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return ctx.error() << "starts, ends, axes and steps must have one length";
  }
  SmallVector<int64_t> fullStarts(rank, 0), fullSteps(rank, 1), outDims(in);
  SmallVector<int64_t> fullEnds(in);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    FailureOr<int64_t> axis = ctx.normalizeAxis(axes[i], rank, "axis");
    if (failed(axis)) {
      return failure();
    }
    if (seen[*axis]) {
      return ctx.error() << "axis " << *axis << " is sliced twice";
    }
    seen[*axis] = true;
    int64_t dim = in[*axis], step = steps[i];
    if (step == 0) {
      return ctx.error() << "step for axis " << *axis << " is 0";
    }
    // ONNX clamping: negatives count from the end; starts clamp to
    // [0, dim] (step > 0) or [0, dim - 1] (step < 0); ends to [0, dim] or
    // [-1, dim - 1].
    auto norm = [&](int64_t v) {
      if (v < 0) {
        v = v < INT64_MIN / 2 ? INT64_MIN / 2 : v;
        v += dim;
      }
      return v;
    };
    int64_t s = norm(starts[i]), e = norm(ends[i]);
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    int64_t count = step > 0 ? (e - s + step - 1) / step
                             : (s - e + (-step) - 1) / (-step);
    count = std::max<int64_t>(count, 0);
    fullStarts[*axis] = s;
    fullEnds[*axis] = step > 0 ? s + count * step : e;
    fullSteps[*axis] = step;
    outDims[*axis] = count;
  }
  if (ctx.isConstant(0)) {
    FailureOr<const HostTensor *> x = ctx.constant(0, "data");
    if (failed(x)) {
      return failure();
    }
    return ctx.setOutput(0, foldSlice(**x, fullStarts, fullSteps, outDims));
  }
  for (int64_t axis = 0; axis < rank; ++axis) {
    if (fullSteps[axis] < 0) {
      return ctx.error() << "a negative step (axis " << axis
                         << ") is only supported on compile-time inputs";
    }
    // tg.slice's end is exclusive and exact; recompute it from the count.
    fullEnds[axis] = fullStarts[axis] +
                     (outDims[axis] == 0 ? 0
                                         : (outDims[axis] - 1) * fullSteps[axis] + 1);
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  if (ArrayRef<int64_t>(outDims) == in) {
    ctx.setOutput(0, *x);
    return success();
  }
  ctx.setOutput(0, tg::SliceOp::create(
                       ctx.builder(), ctx.loc(),
                       ctx.tensorType(outDims, getElementTypeOrSelf(x->getType())),
                       *x, ctx.builder().getDenseI64ArrayAttr(fullStarts),
                       ctx.builder().getDenseI64ArrayAttr(fullEnds),
                       ctx.builder().getDenseI64ArrayAttr(fullSteps)));
  return success();
}

LogicalResult importConcat(NodeContext &ctx) {
  if (ctx.numInputs() == 0) {
    return ctx.error() << "expected at least one input";
  }
  if (!ctx.hasAttribute("axis")) {
    return ctx.error() << "missing attribute 'axis'";
  }
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", 0), ctx.rank(0), "axis");
  if (failed(axis)) {
    return failure();
  }
  SmallVector<tg::Shape> shapes;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i)) {
      return ctx.error() << "input " << i << " is missing";
    }
    shapes.push_back(tg::Shape(ctx.shape(i)));
  }
  FailureOr<tg::Shape> shape = tg::concatShape(shapes, *axis, ctx.shapeErrorFn());
  if (failed(shape)) {
    return failure();
  }
  if (ctx.allConstant()) {
    if (failed(ctx.checkFoldSize(*shape))) {
      return failure();
    }
    SmallVector<const HostTensor *> parts;
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      FailureOr<const HostTensor *> t = ctx.constant(i, "input");
      if (failed(t)) {
        return failure();
      }
      if ((*t)->type() != (*ctx.constant(0, "input"))->type()) {
        return ctx.error() << "inputs have different element types";
      }
      parts.push_back(*t);
    }
    return ctx.setOutput(0, foldConcat(parts, *axis));
  }
  // Empty pieces (a shape concat with nothing) carry no data and are
  // dropped, unless every piece is empty: then they all stay, so the result
  // still has its (empty) shape.
  bool anyData = false;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    anyData |= product(ctx.shape(i)) != 0;
  }
  SmallVector<Value> inputs;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (anyData && product(ctx.shape(i)) == 0) {
      continue;
    }
    FailureOr<Value> v = ctx.value(i);
    if (failed(v)) {
      return failure();
    }
    inputs.push_back(*v);
  }
  if (inputs.size() == 1) {
    ctx.setOutput(0, inputs.front());
    return success();
  }
  ctx.setOutput(0, tg::ConcatOp::create(
                       ctx.builder(), ctx.loc(),
                       ctx.tensorType(*shape, getElementTypeOrSelf(inputs[0].getType())),
                       inputs, ctx.builder().getI64IntegerAttr(*axis)));
  return success();
}

/// Split: sizes from the attribute (before 13), input 1 (13+), or equal
/// parts (num_outputs from 18, else the output count).
LogicalResult importSplit(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.shape(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", 0), static_cast<int64_t>(in.size()), "axis");
  if (failed(axis)) {
    return failure();
  }
  std::vector<int64_t> sizes;
  if (ctx.opset() < 13) {
    sizes = ctx.attrInts("split").value_or(std::vector<int64_t>());
  } else if (ctx.hasInput(1)) {
    FailureOr<std::vector<int64_t>> s = ctx.constantInts(1, "split");
    if (failed(s)) {
      return failure();
    }
    sizes = *s;
  }
  int64_t dim = in[*axis];
  int64_t parts = static_cast<int64_t>(ctx.numOutputs());
  if (sizes.empty()) {
    if (ctx.opset() >= 18 && ctx.hasAttribute("num_outputs")) {
      parts = ctx.attrInt("num_outputs", parts);
    }
    if (parts <= 0) {
      return ctx.error() << "has no outputs";
    }
    // Equal parts; from opset 18 the last one may be smaller.
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i) {
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
    }
  }
  if (static_cast<int64_t>(sizes.size()) != static_cast<int64_t>(ctx.numOutputs())) {
    return ctx.error() << "splits into " << sizes.size() << " parts but has "
                       << ctx.numOutputs() << " outputs";
  }
  FailureOr<SmallVector<tg::Shape>> shapes =
      tg::splitShapes(in, *axis, sizes, ctx.shapeErrorFn());
  if (failed(shapes)) {
    return failure();
  }
  if (ctx.isConstant(0)) {
    FailureOr<const HostTensor *> x = ctx.constant(0, "input");
    if (failed(x)) {
      return failure();
    }
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      SmallVector<int64_t> starts(in.size(), 0), steps(in.size(), 1);
      starts[*axis] = offset;
      offset += sizes[i];
      if (failed(ctx.setOutput(i, foldSlice(**x, starts, steps, (*shapes)[i])))) {
        return failure();
      }
    }
    return success();
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  SmallVector<Type> types;
  for (const tg::Shape &shape : *shapes) {
    types.push_back(ctx.tensorType(shape, getElementTypeOrSelf(x->getType())));
  }
  auto split = tg::SplitOp::create(ctx.builder(), ctx.loc(), types, *x,
                                   ctx.builder().getI64IntegerAttr(*axis),
                                   ctx.builder().getDenseI64ArrayAttr(sizes));
  for (size_t i = 0; i < sizes.size(); ++i) {
    ctx.setOutput(i, split.getResult(i));
  }
  return success();
}

} // namespace

void appendTensorImporters(std::vector<OpImporter> &table) {
  auto add = [&](const char *op, int64_t since, int64_t until, OpBuilderFn fn) {
    table.push_back({"", op, since, until, fn});
  };
  int64_t last = kMaxDefaultOpset;
  add("Constant", 1, last, importConstant);
  add("Shape", 1, last, importShape);
  add("Size", 1, last, importSize);
  add("ConstantOfShape", 9, last, importConstantOfShape);
  add("Range", 11, last, importRange);
  add("Trilu", 14, last, importTrilu);
  add("Reshape", 5, last, importReshape);
  add("Flatten", 1, last, importFlatten);
  // Squeeze/Unsqueeze: axes attribute before 13, an input from 13.
  add("Squeeze", 1, 12, importSqueeze);
  add("Squeeze", 13, last, importSqueeze);
  add("Unsqueeze", 1, 12, importUnsqueeze);
  add("Unsqueeze", 13, last, importUnsqueeze);
  add("Expand", 8, last, importExpand);
  add("Tile", 6, last, importTile);
  add("Transpose", 1, last, importTranspose);
  // Slice: attributes before 10, inputs from 10.
  add("Slice", 1, 9, importSlice);
  add("Slice", 10, last, importSlice);
  add("Concat", 4, last, importConcat);
  // Split: `split` attribute before 13, input from 13, num_outputs from 18.
  add("Split", 2, 12, importSplit);
  add("Split", 13, 17, importSplit);
  add("Split", 18, last, importSplit);
}

} // namespace tailor::onnx_import
