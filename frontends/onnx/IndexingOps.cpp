//===- IndexingOps.cpp - import of ONNX gathers, scatters and CumSum ------===//
//
// Gather, GatherElements, GatherND, Scatter/ScatterElements, ScatterND and
// CumSum. Each folds on the host when its inputs are known (exports compute
// mask positions this way) and otherwise emits the tg op whose CPU and CUDA
// kernels run it on run-time tensors. Gather keeps two cheaper forms: a
// contiguous run of known indices is a slice, and run-time token ids on axis
// 0 of a float table are a tg.embedding (what raise and autodiff expect);
// every other run-time Gather is a tg.gather_nd with the leading dims as
// batch dims.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ImportContext.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include <onnx/onnx_pb.h>

using namespace mlir;

namespace tailor::onnx_import {
namespace {

Type elementOf(Value value) { return getElementTypeOrSelf(value.getType()); }

/// The reduction attribute of ScatterElements and ScatterND: absent before
/// opset 16, none/add/mul from 16, max/min from 18.
FailureOr<tg::ScatterReduction> scatterReduction(NodeContext &ctx) {
  std::string name = ctx.attrString("reduction", "none");
  std::optional<tg::ScatterReduction> kind =
      tg::symbolizeScatterReduction(name);
  bool needs18 = kind && (*kind == tg::ScatterReduction::Max ||
                          *kind == tg::ScatterReduction::Min);
  if (!kind || (needs18 && ctx.opset() < 18) ||
      (*kind != tg::ScatterReduction::None && ctx.opset() < 16)) {
    return ctx.error() << "reduction '" << name
                       << "' is not supported at opset " << ctx.opset()
                       << " (none; add and mul from 16; max and min from 18)";
  }
  return *kind;
}

/// Fails unless input `i` holds int32 or int64 values (indices, axes).
LogicalResult expectIndices(NodeContext &ctx, size_t i) {
  ElementType type = ctx.elementType(i);
  if (type != ElementType::Int64 && type != ElementType::Int32) {
    return ctx.error() << "indices must be int32 or int64, got "
                       << elementTypeName(static_cast<int32_t>(type));
  }
  return success();
}

/// CumSum's axis: an attribute when known (normalized), else the run-time
/// one-element tensor the kernel reads.
LogicalResult cumsumAxis(NodeContext &ctx, IntegerAttr &attr, Value &value) {
  if (!ctx.isConstant(1)) {
    if (failed(expectIndices(ctx, 1))) {
      return failure();
    }
    if (product(ctx.shape(1)) != 1) {
      return ctx.error() << "axis must hold one value, got "
                         << tg::formatShape(ctx.shape(1));
    }
    FailureOr<Value> v = ctx.value(1);
    if (failed(v)) {
      return failure();
    }
    value = *v;
    return success();
  }
  FailureOr<std::vector<int64_t>> axis = ctx.constantInts(1, "axis");
  if (failed(axis)) {
    return failure();
  }
  if (axis->size() != 1) {
    return ctx.error() << "axis must hold one value, got " << axis->size();
  }
  FailureOr<int64_t> a = ctx.normalizeAxis(axis->front(), ctx.rank(0), "axis");
  if (failed(a)) {
    return failure();
  }
  attr = ctx.builder().getI64IntegerAttr(*a);
  return success();
}

/// CumSum: folded when x and the axis are known, a tg.cumsum otherwise
/// (bools sum as int64, as the fold does).
LogicalResult importCumSum(NodeContext &ctx) {
  IntegerAttr axisAttr;
  Value axisValue;
  if (failed(cumsumAxis(ctx, axisAttr, axisValue))) {
    return failure();
  }
  bool exclusive = ctx.attrInt("exclusive", 0) != 0;
  bool reverse = ctx.attrInt("reverse", 0) != 0;
  if (ctx.isConstant(0) && axisAttr) {
    FailureOr<HostTensor> x = ctx.heldConstant(0, "x");
    if (failed(x)) {
      return failure();
    }
    return ctx.setOutput(0,
                         foldCumSum(*x, axisAttr.getInt(), exclusive, reverse));
  }
  FailureOr<Value> x = ctx.value(0);
  if (failed(x)) {
    return failure();
  }
  OpBuilder &b = ctx.builder();
  if (elementOf(*x).isInteger(1)) {
    x = tg::CastOp::create(b, ctx.loc(),
                           ctx.tensorType(ctx.shape(0), ElementType::Int64), *x)
            .getResult();
  }
  auto op = tg::CumsumOp::create(b, ctx.loc(), x->getType(), *x, axisValue,
                                 axisAttr, UnitAttr(), UnitAttr());
  if (exclusive) {
    op.setExclusive(true);
  }
  if (reverse) {
    op.setReverse(true);
  }
  ctx.setOutput(0, op.getResult());
  return success();
}

/// Gather of run-time values that is not a token-embedding lookup: the
/// indices, reshaped to [1 (axis times), indices..., 1] and broadcast over
/// the data's leading dims, become a tg.gather_nd with those dims as batch
/// dims, which yields [data dims before axis, indices..., dims after] as
/// Gather does.
LogicalResult importRuntimeGather(NodeContext &ctx, int64_t axis,
                                  ArrayRef<int64_t> outDims) {
  if (failed(expectIndices(ctx, 1))) {
    return failure();
  }
  FailureOr<Value> data = ctx.value(0);
  FailureOr<Value> indices = ctx.value(1);
  if (failed(data) || failed(indices)) {
    return failure();
  }
  ArrayRef<int64_t> dd = ctx.shape(0), id = ctx.shape(1);
  SmallVector<int64_t> ones(axis, 1), spread(dd.take_front(axis));
  ones.append(id.begin(), id.end());
  ones.push_back(1);
  spread.append(id.begin(), id.end());
  spread.push_back(1);
  Value tuples = ctx.reshape(*indices, ones);
  if (ArrayRef<int64_t>(spread) != ArrayRef<int64_t>(ones)) {
    tuples = tg::BroadcastOp::create(
        ctx.builder(), ctx.loc(), ctx.tensorType(spread, elementOf(*indices)),
        tuples);
  }
  auto gathered = tg::GatherNDOp::create(
      ctx.builder(), ctx.loc(), ctx.tensorType(outDims, elementOf(*data)),
      *data, tuples, ctx.builder().getI64IntegerAttr(axis));
  ctx.setOutput(0, gathered.getResult());
  return success();
}

/// Gather: folded when both inputs are known; run-time data with constant
/// contiguous indices becomes a slice; run-time indices on axis 0 of a float
/// tensor become an embedding lookup (that is what token embeddings export
/// as); anything else a tg.gather_nd.
LogicalResult importGather(NodeContext &ctx) {
  ArrayRef<int64_t> data = ctx.shape(0);
  int64_t rank = static_cast<int64_t>(data.size());
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", 0), rank, "axis");
  if (failed(axis)) {
    return failure();
  }
  Dims indexDims(ctx.shape(1));
  Dims outDims(data.begin(), data.begin() + *axis);
  outDims.append(indexDims.begin(), indexDims.end());
  outDims.append(data.begin() + *axis + 1, data.end());

  if (ctx.isConstant(1)) {
    FailureOr<HostTensor> indices = ctx.heldConstant(1, "indices");
    if (failed(indices)) {
      return failure();
    }
    if (indices->isFloat()) {
      return ctx.error() << "indices must be integers";
    }
    HostTensor normalized = indices->castTo(ElementType::Int64);
    for (int64_t i = 0; i < normalized.size(); ++i) {
      int64_t v = normalized.getInt(i);
      if (v < -data[*axis] || v >= data[*axis]) {
        return ctx.indexOutOfRange(v, *axis, data[*axis]);
      }
      normalized.setInt(i, v < 0 ? v + data[*axis] : v);
    }
    if (ctx.isConstant(0)) {
      FailureOr<const HostTensor *> x = ctx.constant(0, "data");
      if (failed(x)) {
        return failure();
      }
      if (failed(ctx.checkFoldSize(outDims))) {
        return failure();
      }
      return ctx.setOutput(0, foldGather(**x, normalized, *axis));
    }
    // Run-time data, known indices: a contiguous run is one slice.
    bool contiguous = normalized.size() > 0;
    for (int64_t i = 1; i < normalized.size(); ++i) {
      contiguous &= normalized.getInt(i) == normalized.getInt(i - 1) + 1;
    }
    if (contiguous) {
      FailureOr<Value> x = ctx.value(0);
      if (failed(x)) {
        return failure();
      }
      SmallVector<int64_t> starts(rank, 0), ends(data), steps(rank, 1);
      starts[*axis] = normalized.getInt(0);
      ends[*axis] = normalized.getInt(0) + normalized.size();
      SmallVector<int64_t> sliceDims(data);
      sliceDims[*axis] = normalized.size();
      Type elem = getElementTypeOrSelf(x->getType());
      Value sliced = *x;
      if (ArrayRef<int64_t>(sliceDims) != data) {
        sliced = tg::SliceOp::create(ctx.builder(), ctx.loc(),
                                     ctx.tensorType(sliceDims, elem), *x,
                                     ctx.builder().getDenseI64ArrayAttr(starts),
                                     ctx.builder().getDenseI64ArrayAttr(ends),
                                     ctx.builder().getDenseI64ArrayAttr(steps));
      }
      ctx.setOutput(0, ctx.reshape(sliced, outDims));
      return success();
    }
  }
  if (*axis != 0 || !isFloatType(ctx.elementType(0))) {
    return importRuntimeGather(ctx, *axis, outDims);
  }
  FailureOr<Value> table = ctx.value(0);
  FailureOr<Value> ids = ctx.value(1);
  if (failed(table) || failed(ids)) {
    return failure();
  }
  int64_t rows = data[0];
  int64_t width = product(data.drop_front());
  Value table2d = ctx.reshape(*table, {rows, width});
  SmallVector<int64_t> lookupDims(indexDims.begin(), indexDims.end());
  lookupDims.push_back(width);
  Value lookup = tg::EmbeddingOp::create(
      ctx.builder(), ctx.loc(),
      ctx.tensorType(lookupDims, getElementTypeOrSelf(table->getType())),
      table2d, *ids);
  ctx.setOutput(0, ctx.reshape(lookup, outDims));
  return success();
}

/// Most slices a GatherND on run-time data becomes; past that, a
/// tg.gather_nd kernel with the indices as a constant.
constexpr int64_t kMaxStaticGatherRuns = 4096;

/// The rows a GatherND with compile-time index tuples of length k reads
/// from data viewed as [prod(dims[:k]), dims[k:]...], as runs [start, end)
/// of consecutive rows in the order the tuples name them.
struct GatherRuns {
  SmallVector<std::pair<int64_t, int64_t>> runs;
};

/// Reads the tuples of `indices` (checking each against `dims`) into runs;
/// fails (with the error emitted) on an index out of range.
FailureOr<GatherRuns> gatherRuns(NodeContext &ctx, const HostTensor &indices,
                                 ArrayRef<int64_t> dims) {
  ArrayRef<int64_t> id = indices.dims();
  int64_t k = id.back();
  int64_t tuples = product(id.drop_back());
  GatherRuns out;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t row = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = indices.getInt(t * k + j);
      if (v < -dims[j] || v >= dims[j]) {
        (void)ctx.indexOutOfRange(v, j, dims[j]);
        return failure();
      }
      row = row * dims[j] + (v < 0 ? v + dims[j] : v);
    }
    if (!out.runs.empty() && out.runs.back().second == row) {
      ++out.runs.back().second;
    } else {
      out.runs.push_back({row, row + 1});
    }
  }
  return out;
}

/// GatherND of run-time data at compile-time indices (batch_dims 0), as
/// exporters write x[:, :, i] on a transposed tensor or, in Hugging Face's
/// masks, attention_mask[batch_idx, kv_idx] over aranges: the data is
/// viewed as rows [prod(dims[:k]), dims[k:]...], each run of consecutive
/// rows the tuples name is one slice (an identity gather is one slice of
/// everything), the slices are concatenated and reshaped to
/// indices.shape[:-1] + data.shape[k:]. Gradients flow through slice and
/// concat as usual.
LogicalResult importGatherNDOfRuntimeData(NodeContext &ctx,
                                          ArrayRef<int64_t> id,
                                          const GatherRuns &gather) {
  FailureOr<Value> data = ctx.value(0);
  if (failed(data)) {
    return failure();
  }
  ArrayRef<int64_t> dd = ctx.shape(0);
  int64_t k = id.back();
  Type elem = getElementTypeOrSelf(data->getType());
  ArrayRef<int64_t> rest = dd.drop_front(k);
  SmallVector<int64_t> rowsDims{product(dd.take_front(k))};
  rowsDims.append(rest.begin(), rest.end());
  Value rows = ctx.reshape(*data, rowsDims);
  SmallVector<Value> pieces;
  for (auto [begin, end] : gather.runs) {
    SmallVector<int64_t> starts(rowsDims.size(), 0), ends(rowsDims),
        steps(rowsDims.size(), 1);
    starts[0] = begin;
    ends[0] = end;
    SmallVector<int64_t> sliceDims(rowsDims);
    sliceDims[0] = end - begin;
    pieces.push_back(tg::SliceOp::create(
        ctx.builder(), ctx.loc(), ctx.tensorType(sliceDims, elem), rows,
        ctx.builder().getDenseI64ArrayAttr(starts),
        ctx.builder().getDenseI64ArrayAttr(ends),
        ctx.builder().getDenseI64ArrayAttr(steps)));
  }
  SmallVector<int64_t> stacked{product(id.drop_back())};
  stacked.append(rest.begin(), rest.end());
  Value all = pieces.size() == 1
                  ? pieces.front()
                  : tg::ConcatOp::create(ctx.builder(), ctx.loc(),
                                         ctx.tensorType(stacked, elem), pieces,
                                         ctx.builder().getI64IntegerAttr(0))
                        .getResult();
  SmallVector<int64_t> outDims(id.drop_back());
  outDims.append(rest.begin(), rest.end());
  ctx.setOutput(0, ctx.reshape(all, outDims));
  return success();
}

/// GatherND with run-time indices (or batch dims): a tg.gather_nd.
LogicalResult importRuntimeGatherND(NodeContext &ctx) {
  if (failed(expectIndices(ctx, 1))) {
    return failure();
  }
  ArrayRef<int64_t> dd = ctx.shape(0), id = ctx.shape(1);
  int64_t b = ctx.attrInt("batch_dims", 0);
  int64_t r = static_cast<int64_t>(dd.size());
  int64_t q = static_cast<int64_t>(id.size());
  if (q < 1 || b < 0 || b >= q || b > r || id.back() < 1 || b + id.back() > r) {
    return ctx.error() << "indices " << tg::formatShape(id)
                       << " with batch_dims " << b << " do not fit data "
                       << tg::formatShape(dd);
  }
  if (dd.take_front(b) != id.take_front(b)) {
    return ctx.error() << "batch dims of data " << tg::formatShape(dd)
                       << " and indices " << tg::formatShape(id) << " differ";
  }
  FailureOr<Value> data = ctx.value(0);
  FailureOr<Value> indices = ctx.value(1);
  if (failed(data) || failed(indices)) {
    return failure();
  }
  SmallVector<int64_t> outDims(id.drop_back());
  outDims.append(dd.begin() + b + id.back(), dd.end());
  auto gathered = tg::GatherNDOp::create(
      ctx.builder(), ctx.loc(), ctx.tensorType(outDims, elementOf(*data)),
      *data, *indices, ctx.builder().getI64IntegerAttr(b));
  ctx.setOutput(0, gathered.getResult());
  return success();
}

/// GatherND: folded when both inputs are known; known indices into
/// run-time data become slices (few enough tuples, no batch dims); the rest
/// a tg.gather_nd.
LogicalResult importGatherND(NodeContext &ctx) {
  if (!ctx.isConstant(0) && ctx.isConstant(1) &&
      ctx.attrInt("batch_dims", 0) == 0) {
    FailureOr<HostTensor> indices = ctx.heldConstant(1, "indices");
    if (failed(indices)) {
      return failure();
    }
    ArrayRef<int64_t> dd = ctx.shape(0), id = indices->dims();
    int64_t k = id.empty() ? 0 : id.back();
    if (id.empty() || k < 1 || k > static_cast<int64_t>(dd.size())) {
      return ctx.error() << "index tuples of length " << k
                         << " do not fit data " << tg::formatShape(dd);
    }
    FailureOr<GatherRuns> runs = gatherRuns(ctx, *indices, dd);
    if (failed(runs)) {
      return failure();
    }
    if (static_cast<int64_t>(runs->runs.size()) <= kMaxStaticGatherRuns) {
      return importGatherNDOfRuntimeData(ctx, id, *runs);
    }
  }
  if (!ctx.allConstant()) {
    return importRuntimeGatherND(ctx);
  }
  FailureOr<const HostTensor *> data = ctx.constant(0, "data");
  FailureOr<const HostTensor *> indices = ctx.constant(1, "indices");
  if (failed(data) || failed(indices)) {
    return failure();
  }
  ArrayRef<int64_t> dd = (*data)->dims(), id = (*indices)->dims();
  int64_t b = ctx.attrInt("batch_dims", 0);
  if (id.empty() || b < 0 || b >= static_cast<int64_t>(id.size()) ||
      b > static_cast<int64_t>(dd.size())) {
    return ctx.error() << "invalid batch_dims " << b << " for data "
                       << tg::formatShape(dd) << " and indices "
                       << tg::formatShape(id);
  }
  int64_t k = id.back();
  int64_t r = static_cast<int64_t>(dd.size());
  if (k < 1 || b + k > r) {
    return ctx.error() << "index tuples of length " << k << " do not fit data "
                       << tg::formatShape(dd);
  }
  for (int64_t i = 0; i < b; ++i) {
    if (dd[i] != id[i]) {
      return ctx.error() << "batch dim " << i
                         << " differs between data and indices";
    }
  }
  Dims outDims(id.begin(), id.end() - 1);
  outDims.append(dd.begin() + b + k, dd.end());
  if (failed(ctx.checkFoldSize(outDims))) {
    return failure();
  }
  HostTensor out((*data)->type(), outDims);
  int64_t batch = product(dd.take_front(b));
  int64_t tuples = product(id.drop_back()) / std::max<int64_t>(batch, 1);
  int64_t slice = product(dd.drop_front(b + k));
  int64_t batchStride = product(dd.drop_front(b));
  int64_t to = 0;
  for (int64_t bi = 0; bi < std::max<int64_t>(batch, 1); ++bi) {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t dim = dd[b + j];
        int64_t v = (*indices)->getInt((bi * tuples + t) * k + j);
        if (v < -dim || v >= dim) {
          return ctx.indexOutOfRange(v, b + j, dim);
        }
        offset = offset * dim + (v < 0 ? v + dim : v);
      }
      int64_t base = bi * batchStride + offset * slice;
      for (int64_t e = 0; e < slice; ++e, ++to) {
        if (out.isFloat()) {
          out.setDouble(to, (*data)->getDouble(base + e));
        } else {
          out.setInt(to, (*data)->getInt(base + e));
        }
      }
    }
  }
  return ctx.setOutput(0, std::move(out));
}

/// GatherElements of known data and indices, on the host.
FailureOr<HostTensor> foldGatherElements(NodeContext &ctx,
                                         const HostTensor &data,
                                         const HostTensor &indices,
                                         int64_t axis) {
  ArrayRef<int64_t> dd = data.dims(), id = indices.dims();
  if (failed(ctx.checkFoldSize(id))) {
    return failure();
  }
  HostTensor out(data.type(), id);
  int64_t rank = static_cast<int64_t>(id.size());
  for (int64_t i = 0; i < out.size(); ++i) {
    int64_t rest = i, offset = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t coord = rest % id[d];
      rest /= id[d];
      if (d == axis) {
        coord = indices.getInt(i);
        if (coord < -dd[d] || coord >= dd[d]) {
          return ctx.indexOutOfRange(coord, d, dd[d]);
        }
        coord = coord < 0 ? coord + dd[d] : coord;
      }
      offset += coord * stride;
      stride *= dd[d];
    }
    if (out.isFloat()) {
      out.setDouble(i, data.getDouble(offset));
    } else {
      out.setInt(i, data.getInt(offset));
    }
  }
  return out;
}

/// Checks GatherElements/ScatterElements operand shapes; returns the axis.
FailureOr<int64_t> elementsAxis(NodeContext &ctx) {
  if (failed(expectIndices(ctx, 1))) {
    return failure();
  }
  ArrayRef<int64_t> dd = ctx.shape(0), id = ctx.shape(1);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", 0), ctx.rank(0), "axis");
  if (failed(axis)) {
    return failure();
  }
  bool fits = dd.size() == id.size();
  for (size_t d = 0; fits && d < dd.size(); ++d) {
    fits = static_cast<int64_t>(d) == *axis || id[d] <= dd[d];
  }
  if (!fits) {
    return ctx.error() << "indices " << tg::formatShape(id)
                       << " must have the rank of data " << tg::formatShape(dd)
                       << " and no larger dims outside axis " << *axis;
  }
  return *axis;
}

LogicalResult importGatherElements(NodeContext &ctx) {
  FailureOr<int64_t> axis = elementsAxis(ctx);
  if (failed(axis)) {
    return failure();
  }
  if (ctx.allConstant()) {
    FailureOr<HostTensor> data = ctx.heldConstant(0, "data");
    FailureOr<HostTensor> indices = ctx.heldConstant(1, "indices");
    if (failed(data) || failed(indices)) {
      return failure();
    }
    FailureOr<HostTensor> out = foldGatherElements(ctx, *data, *indices, *axis);
    if (failed(out)) {
      return failure();
    }
    return ctx.setOutput(0, std::move(*out));
  }
  FailureOr<Value> data = ctx.value(0);
  FailureOr<Value> indices = ctx.value(1);
  if (failed(data) || failed(indices)) {
    return failure();
  }
  auto gathered = tg::GatherElementsOp::create(
      ctx.builder(), ctx.loc(), ctx.tensorType(ctx.shape(1), elementOf(*data)),
      *data, *indices, ctx.builder().getI64IntegerAttr(*axis));
  ctx.setOutput(0, gathered.getResult());
  return success();
}

/// Inputs 0 (data) and 2 (updates) as run-time values of one element type,
/// and input 1 (indices).
LogicalResult scatterOperands(NodeContext &ctx, Value &data, Value &indices,
                              Value &updates) {
  if (ctx.elementType(0) != ctx.elementType(2)) {
    return ctx.error() << "data and updates have different element types";
  }
  FailureOr<Value> d = ctx.value(0);
  FailureOr<Value> i = ctx.value(1);
  FailureOr<Value> u = ctx.value(2);
  if (failed(d) || failed(i) || failed(u)) {
    return failure();
  }
  data = *d;
  indices = *i;
  updates = *u;
  return success();
}

/// ScatterElements (and Scatter, its name before opset 11), always at run
/// time: exports scatter into run-time tensors.
LogicalResult importScatterElements(NodeContext &ctx) {
  if (ctx.numInputs() != 3) {
    return ctx.error() << "expected 3 inputs (data, indices, updates)";
  }
  FailureOr<int64_t> axis = elementsAxis(ctx);
  FailureOr<tg::ScatterReduction> reduction = scatterReduction(ctx);
  if (failed(axis) || failed(reduction)) {
    return failure();
  }
  if (ctx.shape(2) != ctx.shape(1)) {
    return ctx.error() << "updates " << tg::formatShape(ctx.shape(2))
                       << " must have the shape of indices "
                       << tg::formatShape(ctx.shape(1));
  }
  Value data, indices, updates;
  if (failed(scatterOperands(ctx, data, indices, updates))) {
    return failure();
  }
  OpBuilder &b = ctx.builder();
  auto scattered = tg::ScatterElementsOp::create(
      b, ctx.loc(), data.getType(), data, indices, updates,
      b.getI64IntegerAttr(*axis),
      tg::ScatterReductionAttr::get(ctx.context(), *reduction));
  ctx.setOutput(0, scattered.getResult());
  return success();
}

/// ScatterND, at run time.
LogicalResult importScatterND(NodeContext &ctx) {
  if (ctx.numInputs() != 3) {
    return ctx.error() << "expected 3 inputs (data, indices, updates)";
  }
  FailureOr<tg::ScatterReduction> reduction = scatterReduction(ctx);
  if (failed(reduction) || failed(expectIndices(ctx, 1))) {
    return failure();
  }
  ArrayRef<int64_t> dd = ctx.shape(0), id = ctx.shape(1);
  int64_t k = id.empty() ? 0 : id.back();
  if (k < 1 || k > static_cast<int64_t>(dd.size())) {
    return ctx.error() << "index tuples of length " << k << " do not fit data "
                       << tg::formatShape(dd);
  }
  SmallVector<int64_t> expected(id.drop_back());
  expected.append(dd.begin() + k, dd.end());
  if (ctx.shape(2) != ArrayRef<int64_t>(expected)) {
    return ctx.error() << "updates " << tg::formatShape(ctx.shape(2))
                       << " must have shape " << tg::formatShape(expected)
                       << " (indices[:-1] + data[k:])";
  }
  Value data, indices, updates;
  if (failed(scatterOperands(ctx, data, indices, updates))) {
    return failure();
  }
  auto scattered = tg::ScatterNDOp::create(
      ctx.builder(), ctx.loc(), data.getType(), data, indices, updates,
      tg::ScatterReductionAttr::get(ctx.context(), *reduction),
      ctx.builder().getI64IntegerAttr(0));
  ctx.setOutput(0, scattered.getResult());
  return success();
}

} // namespace

void appendIndexingImporters(std::vector<OpImporter> &table) {
  auto add = [&](const char *op, int64_t since, int64_t until, OpBuilderFn fn) {
    table.push_back({"", op, since, until, fn});
  };
  int64_t last = kMaxDefaultOpset;
  add("CumSum", 11, last, importCumSum);
  add("Gather", 1, last, importGather);
  add("GatherElements", 11, last, importGatherElements);
  add("GatherND", 11, last, importGatherND);
  // Scatter is ScatterElements' name before opset 11 (no reduction).
  add("Scatter", 9, 10, importScatterElements);
  // ScatterElements and ScatterND: reduction from 16, max/min from 18.
  add("ScatterElements", 11, last, importScatterElements);
  add("ScatterND", 11, last, importScatterND);
}

} // namespace tailor::onnx_import
