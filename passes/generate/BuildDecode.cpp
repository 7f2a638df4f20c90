//===- BuildDecode.cpp - decode and chunked prefill steps with a KV cache -===//
//
// The forward graph, imported at seq = max_seq_len N, computes N tokens at
// once. A decode step computes one, at a run-time position, against the
// keys and values of the tokens before it kept in a cache; a prefill step
// computes a chunk of C prompt tokens at positions start..start+C-1 the
// same way. Everything but attention is per token, so each step is the
// forward graph with the sequence dim of every value set to 1 or C: the
// pass follows that axis from input_ids through each op (a reshape keeps it
// where the elements before it are the same, a transpose permutes it,
// everything else keeps it in place) and lets the verifiers reject an op
// the new shapes do not fit.
//
// Positions come from tailor-pack-sequences, run first: it replaces the
// positions 0..N-1 the export baked in (rotary tables, learned position
// rows) by gathers at a `position_ids` input, which here is the token's
// position (start + iota(C) for a chunk, clamped to N-1: the rows of a
// padded tail chunk past the cache read the last rotary row instead of
// none). Attention then writes the step's keys and values into the cache
// (rows at or past N, which only padding reaches, are dropped) and reads
// the whole cache.
//
// The mask is an additive bias computed from the positions by ordinary
// kernels (compare an iota of key indices with each query row's position,
// select -inf or 0): [1, 1, C, N], shared by every layer of one window,
// that the attention kernel already takes, so the CPU and CUDA attention
// kernels need nothing new. A `key_length` operand would let the kernel
// stop at start + C keys instead of scoring all N; with C rows per call
// the waste is (N - start - C) / N of the scores, small next to the GEMMs.
//
// Prefill returns the logits of one row per sequence, the last real one
// (the `prefill_last` input, the same for the whole batch), not [B, C, V]:
// only that row chooses the next token, and lm_head at vocab 32000 costs as
// much as a few layers per row, C times over on a padded chunk, with a
// [B, C, V] buffer besides. The row is gathered at the earliest point after
// the last attention where one value alone carries the sequence (in a
// pre-norm transformer the residual stream after the last layer's MLP; in
// a parallel block after its sum), so the final norm and lm_head run on
// one row. Gathering later would only cost more; earlier there is none.
//
//===----------------------------------------------------------------------===//

#include "passes/generate/Passes.h"

#include "passes/graph/ExportNames.h"
#include "passes/graph/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <limits>

namespace tailor::generate {
#define GEN_PASS_DEF_BUILDDECODEPASS
#include "passes/generate/Passes.h.inc"
} // namespace tailor::generate

using namespace mlir;
using namespace tailor;

namespace {

struct BuildDecodePass
    : public generate::impl::BuildDecodePassBase<BuildDecodePass> {
  using BuildDecodePassBase::BuildDecodePassBase;
  void runOnOperation() override;
};

ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<ShapedType>(value.getType()).getShape();
}

/// "layer K" or the op's module path, for messages.
std::string whereIs(Operation *op) {
  if (auto layer =
          op->getAttrOfType<IntegerAttr>(tg::TGDialect::kLayerAttrName)) {
    return "layer " + std::to_string(layer.getInt());
  }
  if (auto module =
          op->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName)) {
    return module.str();
  }
  return "the model";
}

/// Builds one step, `decode` (one token) or `prefill` (a chunk of tokens),
/// from a forward function whose positions are its `position_ids` input
/// (tailor-pack-sequences has run). Both steps share the caches: the first
/// one built declares them, the second finds them.
class StepBuilder {
public:
  /// `chunk` tokens per call: 1 builds `decode`, more builds `prefill`.
  StepBuilder(ModuleOp module, func::FuncOp forward, int64_t chunk)
      : module(module), forward(forward), builder(module.getContext()),
        chunk(chunk), rows(chunk) {}
  LogicalResult run();

  int64_t batch = 0, maxSeqLen = 0, vocab = 0;

private:
  bool isPrefill() const { return chunk > 1; }
  /// The step's input or output name: prefill's carry a prefix, since a
  /// plan's bindings are named across its entries.
  std::string nameOf(StringRef name) const {
    return isPrefill() ? "prefill_" + name.str() : name.str();
  }
  LogicalResult createFunction();
  /// The [1, C] positions of the step's rows: start + iota(C) clamped to
  /// N - 1 (decode: the position itself).
  Value rowPositions(Location loc);
  /// The axis of `value`'s sequence dim, if it has one.
  std::optional<int64_t> axisOf(Value value) const {
    auto it = seqAxis.find(value);
    return it == seqAxis.end() ? std::nullopt : std::optional(it->second);
  }
  /// Where the sequence dim of `op`'s results is (`axis` is one of its
  /// operands'), or an error naming the op.
  FailureOr<int64_t> resultAxis(Operation *op, Value result, Value operand,
                                int64_t axis);
  LogicalResult cloneOp(Operation &op);
  LogicalResult rewriteAttention(tg::AttentionOp attention);
  /// The [1, 1, C, N] bias masking the keys each query row must not see:
  /// after its position, and with a window, `window` or more before it.
  Value maskBias(Location loc, Type element, int64_t window);
  /// The model's own bias of `attention` in the step (null without one),
  /// which must lie over the key positions alone (ALiBi as dynamo exports
  /// it: slopes times the key positions 0..N-1, computed at run time): the
  /// forward graph imported at N computes it for exactly the N cache rows,
  /// and every query row reads the same. Anything else is an error.
  FailureOr<Value> keyOnlyBias(tg::AttentionOp attention);
  /// `mask` + `modelBias`, broadcast: the one bias the kernel takes.
  Value addBias(Location loc, Value mask, Value modelBias);
  mlir::FailureOr<tg::StateOp> declareCache(tg::AttentionOp attention,
                                            StringRef what,
                                            RankedTensorType type,
                                            tg::StateKind kind);
  /// Prefill: replaces the step's value of `original` by its row
  /// `prefill_last` (the sequence dim becomes 1 from here on).
  void gatherLastRow(Value original, Location loc);
  /// Prefill: after cloning op `index` of the forward graph, gathers the
  /// last row once a single value carries the sequence (see the top).
  void updateLive(Operation &op, int64_t index,
                  const llvm::DenseMap<Value, int64_t> &lastUse);

  ModuleOp module;
  func::FuncOp forward, step;
  OpBuilder builder;
  IRMapping mapping;
  /// Rows of the sequence per call (1: decode), and the rows the values
  /// being cloned have (prefill: 1 after the last row was gathered).
  int64_t chunk, rows;
  /// Values of the step that have a sequence dim, by axis.
  llvm::DenseMap<Value, int64_t> seqAxis;
  Value position, last, positions;
  llvm::DenseMap<std::pair<Type, int64_t>, Value> biases;
  int64_t cacheCount = 0;
  /// Prefill: forward values whose step values carry all C rows and are
  /// used later; the index of the last attention.
  llvm::SmallSetVector<Value, 8> live;
  int64_t lastAttention = -1;
  bool gathered = false;
  llvm::StringSet<> declared;
};

Value StepBuilder::rowPositions(Location loc) {
  Type i64 = builder.getI64Type();
  auto rowType = RankedTensorType::get({1, chunk}, i64);
  Value start = tg::ReshapeOp::create(
      builder, loc, RankedTensorType::get({1, 1}, i64), position);
  if (!isPrefill()) {
    return start;
  }
  SmallVector<int64_t> iota(chunk);
  for (int64_t r = 0; r < chunk; ++r) {
    iota[r] = r;
  }
  Value offsets = arith::ConstantOp::create(
      builder, loc, DenseElementsAttr::get(rowType, ArrayRef<int64_t>(iota)));
  Value unclamped = tg::AddOp::create(builder, loc, rowType, start, offsets);
  Value lastRow = arith::ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(RankedTensorType::get({1, 1}, i64),
                             ArrayRef<int64_t>{maxSeqLen - 1}));
  return tg::MinOp::create(builder, loc, rowType, unclamped, lastRow);
}

LogicalResult StepBuilder::createFunction() {
  Block &body = forward.getBody().front();
  Value inputIds, positionIds, attentionMask;
  for (auto [index, arg] : llvm::enumerate(body.getArguments())) {
    auto name = forward.getArgAttrOfType<StringAttr>(index, "tg.name");
    if (name && name.getValue() == "input_ids") {
      inputIds = arg;
    } else if (name && name.getValue() == "position_ids") {
      positionIds = arg;
    } else if (name && name.getValue() == "attention_mask" &&
               shapeOf(arg).size() == 2) {
      attentionMask = arg;
    } else {
      std::string what = name ? name.str() : "#" + llvm::utostr(index);
      return forward.emitError()
             << "decode takes input_ids only, but @" << forward.getSymName()
             << " has input " << what;
    }
  }
  if (!inputIds || shapeOf(inputIds).size() != 2 ||
      forward.getNumResults() != 1) {
    return forward.emitError() << "decode needs @" << forward.getSymName()
                               << "(input_ids [B, N], position_ids) -> logits";
  }
  batch = shapeOf(inputIds)[0];
  maxSeqLen = shapeOf(inputIds)[1];
  ArrayRef<int64_t> logits =
      llvm::cast<ShapedType>(forward.getResultTypes()[0]).getShape();
  if (logits.size() != 3 || logits[1] != maxSeqLen) {
    return forward.emitError() << "decode needs logits [B, N, vocab], got "
                               << forward.getResultTypes()[0];
  }
  vocab = logits[2];

  MLIRContext *context = module.getContext();
  Type i64 = builder.getI64Type();
  auto idsType = RankedTensorType::get({batch, chunk}, i64);
  auto scalarType = RankedTensorType::get({}, i64);
  auto logitsType = RankedTensorType::get(
      {batch, 1, vocab},
      llvm::cast<ShapedType>(forward.getResultTypes()[0]).getElementType());
  SmallVector<Type> inputs = {idsType, scalarType};
  auto named = [&](StringRef name) {
    return builder.getDictionaryAttr(
        {builder.getNamedAttr("tg.name", builder.getStringAttr(name))});
  };
  SmallVector<DictionaryAttr> inputNames = {named(nameOf("input_ids")),
                                            named(nameOf("position"))};
  if (isPrefill()) {
    inputs.push_back(scalarType);
    inputNames.push_back(named(nameOf("last")));
  }
  builder.setInsertionPoint(forward);
  step = func::FuncOp::create(
      builder, forward.getLoc(), isPrefill() ? "prefill" : "decode",
      FunctionType::get(context, inputs, {logitsType}));
  step.setAllArgAttrs(inputNames);
  step.setResultAttrs(0, named(nameOf("logits")));
  Block *entry = step.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  position = entry->getArgument(1);
  if (isPrefill()) {
    last = entry->getArgument(2);
  }
  mapping.map(inputIds, entry->getArgument(0));
  seqAxis[entry->getArgument(0)] = 1;
  // An export's attention_mask (optimum's, Hugging Face's padding mask
  // over the keys): the cache holds no padding, as every sequence of the
  // batch is at the same positions, so it is all ones over the N keys.
  if (attentionMask) {
    auto maskType = llvm::cast<RankedTensorType>(attentionMask.getType());
    Attribute one = IntegerAttr::get(maskType.getElementType(), 1);
    mapping.map(attentionMask,
                arith::ConstantOp::create(
                    builder, forward.getLoc(),
                    DenseElementsAttr::get(maskType, one)));
  }
  // Every sequence of the batch is at the same positions. Without
  // position_ids (ALiBi biases scores by key distance alone) the model has
  // none to read, but prefill's mask still needs them.
  Location loc = forward.getLoc();
  if (!positionIds) {
    if (isPrefill()) {
      positions = rowPositions(loc);
    }
    return success();
  }
  positions = rowPositions(loc);
  Value ids = positions;
  if (batch != 1) {
    ids = tg::BroadcastOp::create(builder, loc, idsType, ids);
  }
  mapping.map(positionIds, ids);
  seqAxis[ids] = 1;
  return success();
}

FailureOr<int64_t> StepBuilder::resultAxis(Operation *op, Value result,
                                           Value operand, int64_t axis) {
  ArrayRef<int64_t> in = shapeOf(operand), out = shapeOf(result);
  auto product = [](ArrayRef<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) {
      n *= d;
    }
    return n;
  };
  if (llvm::isa<tg::ReshapeOp>(op)) {
    // The sequence dim stays whole where the elements before it agree.
    int64_t before = product(in.take_front(axis));
    for (size_t a = 0; a < out.size(); ++a) {
      if (out[a] == maxSeqLen && product(out.take_front(a)) == before) {
        return static_cast<int64_t>(a);
      }
    }
  } else if (auto transpose = llvm::dyn_cast<tg::TransposeOp>(op)) {
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    for (size_t a = 0; a < permutation.size(); ++a) {
      if (permutation[a] == axis) {
        return static_cast<int64_t>(a);
      }
    }
  } else if (llvm::isa<tg::EmbeddingOp>(op) &&
             operand == llvm::cast<tg::EmbeddingOp>(op).getIds()) {
    return axis;
  } else {
    // Elementwise, norms, linear layers, ...: the axis stays in place,
    // counted from the right (broadcasting aligns trailing dims).
    int64_t a = axis + static_cast<int64_t>(out.size()) -
                static_cast<int64_t>(in.size());
    if (a >= 0 && a < static_cast<int64_t>(out.size()) && out[a] == maxSeqLen) {
      return a;
    }
  }
  return op->emitError() << "decode cannot follow the sequence dim (axis "
                         << axis << " of " << operand.getType()
                         << ") through this op in " << whereIs(op);
}

LogicalResult StepBuilder::cloneOp(Operation &op) {
  if (auto attention = llvm::dyn_cast<tg::AttentionOp>(op)) {
    return rewriteAttention(attention);
  }
  // The first operand with a sequence dim decides where the results have it.
  std::optional<std::pair<Value, int64_t>> seq;
  for (Value operand : op.getOperands()) {
    if (std::optional<int64_t> axis =
            axisOf(mapping.lookupOrDefault(operand))) {
      seq = {operand, *axis};
      break;
    }
  }
  Operation *clone = builder.clone(op, mapping);
  if (!seq) {
    return success();
  }
  if (auto slice = llvm::dyn_cast<tg::SliceOp>(clone)) {
    // Only a slice keeping the whole sequence ([0, N), as Phi's partial
    // rotary and Falcon's fused projections cut other dims) keeps its rows.
    int64_t axis = seq->second;
    if (slice.getStarts()[axis] != 0 || slice.getEnds()[axis] != maxSeqLen ||
        slice.getSteps()[axis] != 1) {
      return op.emitError() << "decode cannot slice the sequence dim (axis "
                            << axis << ") in " << whereIs(&op);
    }
    SmallVector<int64_t> ends(slice.getEnds());
    ends[axis] = rows;
    slice.setEnds(ends);
  }
  // Each result (a split has several) keeps the dim where its rule says.
  for (auto [result, cloned] :
       llvm::zip(op.getResults(), clone->getResults())) {
    FailureOr<int64_t> axis = resultAxis(&op, result, seq->first, seq->second);
    if (failed(axis)) {
      return failure();
    }
    auto type = llvm::cast<RankedTensorType>(result.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = rows;
    cloned.setType(type.clone(shape));
    seqAxis[cloned] = *axis;
  }
  return success();
}

FailureOr<tg::StateOp> StepBuilder::declareCache(tg::AttentionOp attention,
                                                 StringRef what,
                                                 RankedTensorType type,
                                                 tg::StateKind kind) {
  // Named after the attention module, which checkpoints and inspect show.
  auto path =
      attention->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName);
  std::string owner =
      path ? path.str() : "attention" + std::to_string(cacheCount++);
  std::string name = owner + "." + what.str();
  if (!declared.insert(name).second) {
    return attention.emitError() << "decode found two attentions of module "
                                 << owner << " to give a KV cache";
  }
  // The other step built first declared it: both read and write one cache.
  if (Operation *existing = module.lookupSymbol(name)) {
    auto state = llvm::dyn_cast<tg::StateOp>(existing);
    if (!state || state.getTensorType() != type || state.getKind() != kind) {
      return attention.emitError()
             << "the KV cache " << name << " of " << whereIs(attention)
             << " is already declared otherwise";
    }
    return state;
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(step);
  auto state = tg::StateOp::create(
      builder, attention.getLoc(), builder.getStringAttr(name),
      TypeAttr::get(type), FlatSymbolRefAttr::get(builder.getContext(), owner),
      tg::StateKindAttr::get(builder.getContext(), kind), UnitAttr());
  return state;
}

Value StepBuilder::maskBias(Location loc, Type element, int64_t window) {
  Value &bias = biases[{element, window}];
  if (bias) {
    return bias;
  }
  OpBuilder::InsertionGuard guard(builder);
  // Near the top: one bias serves every layer of a window.
  if (isPrefill()) {
    builder.setInsertionPointAfterValue(positions);
  } else {
    builder.setInsertionPointToStart(&step.getBody().front());
  }
  Type i64 = builder.getI64Type(), i1 = builder.getI1Type();
  auto keysType = RankedTensorType::get({1, 1, 1, maxSeqLen}, i64);
  auto rowsType = RankedTensorType::get({1, 1, chunk, 1}, i64);
  auto oneType = RankedTensorType::get({1, 1, 1, 1}, i64);
  SmallVector<int64_t> iota(maxSeqLen);
  for (int64_t s = 0; s < maxSeqLen; ++s) {
    iota[s] = s;
  }
  Value keys = arith::ConstantOp::create(
      builder, loc, DenseElementsAttr::get(keysType, ArrayRef<int64_t>(iota)));
  Value at = tg::ReshapeOp::create(builder, loc, rowsType,
                                   isPrefill() ? positions : position);
  auto maskType = RankedTensorType::get({1, 1, chunk, maxSeqLen}, i1);
  Value masked = tg::GtOp::create(builder, loc, maskType, keys, at);
  if (window > 0) {
    // Keys s <= position - window are outside the window.
    Value edge = arith::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(oneType, ArrayRef<int64_t>{window - 1}));
    Value first = tg::SubOp::create(builder, loc, rowsType, at, edge);
    Value old = tg::LtOp::create(builder, loc, maskType, keys, first);
    bool yes = true;
    Value never = arith::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(RankedTensorType::get({1, 1, 1, 1}, i1),
                               ArrayRef<bool>(yes)));
    masked = tg::SelectOp::create(builder, loc, maskType, old, never, masked);
  }
  auto scalarType = RankedTensorType::get({1, 1, 1, 1}, element);
  auto floatOf = [&](double v) -> Value {
    return arith::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(
            scalarType, ArrayRef<Attribute>{FloatAttr::get(element, v)}));
  };
  bias = tg::SelectOp::create(
      builder, loc, RankedTensorType::get({1, 1, chunk, maxSeqLen}, element),
      masked, floatOf(-std::numeric_limits<double>::infinity()), floatOf(0.0));
  return bias;
}

FailureOr<Value> StepBuilder::keyOnlyBias(tg::AttentionOp attention) {
  if (!attention.getBias()) {
    return Value();
  }
  Value bias = mapping.lookupOrDefault(attention.getBias());
  ArrayRef<int64_t> shape = shapeOf(bias);
  if (axisOf(bias) || shape.size() != 4 || shape[2] != 1 ||
      shape[3] != maxSeqLen) {
    return attention.emitError()
           << "decode takes an attention bias over the key positions alone "
              "([B or 1, H or 1, 1, "
           << maxSeqLen << "], not computed from the tokens, as ALiBi's), "
           << "but the attention in " << whereIs(attention) << " has "
           << bias.getType();
  }
  return bias;
}

Value StepBuilder::addBias(Location loc, Value mask, Value modelBias) {
  ArrayRef<int64_t> a = shapeOf(mask), b = shapeOf(modelBias);
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < a.size(); ++d) {
    shape.push_back(std::max(a[d], b[d]));
  }
  auto type = llvm::cast<RankedTensorType>(mask.getType()).clone(shape);
  return tg::AddOp::create(builder, loc, type, mask, modelBias);
}

LogicalResult StepBuilder::rewriteAttention(tg::AttentionOp attention) {
  if (!attention.getCausal()) {
    return attention.emitError()
           << "decode needs causal attention (a decoder), but the attention "
              "in "
           << whereIs(attention) << " is not causal";
  }
  FailureOr<Value> modelBias = keyOnlyBias(attention);
  if (failed(modelBias)) {
    return failure();
  }
  Value query = mapping.lookup(attention.getQuery());
  Value key = mapping.lookup(attention.getKey());
  Value value = mapping.lookup(attention.getValue());
  for (Value v : {query, key, value}) {
    if (axisOf(v) != std::optional<int64_t>(2)) {
      return attention.emitError()
             << "decode expected the attention in " << whereIs(attention)
             << " to read [B, H, " << rows
             << ", D] queries, keys and values of the step's tokens";
    }
  }
  Location loc = attention.getLoc();
  auto cacheType = [&](Value v) {
    auto type = llvm::cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[2] = maxSeqLen;
    return type.clone(shape);
  };
  FailureOr<tg::StateOp> keyState = declareCache(
      attention, "key_cache", cacheType(key), tg::StateKind::KeyCache);
  FailureOr<tg::StateOp> valueState = declareCache(
      attention, "value_cache", cacheType(value), tg::StateKind::ValueCache);
  if (failed(keyState) || failed(valueState)) {
    return failure();
  }
  tg::StateOp keys = *keyState, values = *valueState;
  auto symbol = [&](tg::StateOp state) {
    return FlatSymbolRefAttr::get(state.getSymNameAttr());
  };
  tg::CacheWriteOp::create(builder, loc, symbol(keys), key, position);
  tg::CacheWriteOp::create(builder, loc, symbol(values), value, position);
  Value keyCache =
      tg::StateRefOp::create(builder, loc, keys.getTensorType(), symbol(keys));
  Value valueCache = tg::StateRefOp::create(
      builder, loc, values.getTensorType(), symbol(values));
  int64_t window = attention.getWindow().value_or(0);
  auto resultType = llvm::cast<RankedTensorType>(attention.getType());
  Value bias = maskBias(loc, resultType.getElementType(), window);
  if (*modelBias) {
    bias = addBias(loc, bias, *modelBias);
  }
  SmallVector<int64_t> shape(resultType.getShape());
  shape[2] = rows;
  auto decoded = tg::AttentionOp::create(
      builder, loc, resultType.clone(shape), query, keyCache, valueCache, bias,
      /*causal=*/UnitAttr(), attention.getScaleAttr(), IntegerAttr(),
      attention.getSoftcapAttr(), attention.getAlibiSlopesAttr());
  for (StringRef name :
       {tg::TGDialect::kLayerAttrName, tg::TGDialect::kModuleAttrName}) {
    if (Attribute attr = attention->getAttr(name)) {
      decoded->setAttr(name, attr);
    }
  }
  mapping.map(attention.getResult(), decoded.getResult());
  seqAxis[decoded.getResult()] = 2;
  return success();
}

void StepBuilder::gatherLastRow(Value original, Location loc) {
  Value value = mapping.lookup(original);
  int64_t axis = *axisOf(value);
  auto type = llvm::cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = 1;
  // gather_elements takes an index per result element: `last` everywhere.
  Type i64 = builder.getI64Type();
  auto indexType = RankedTensorType::get(shape, i64);
  SmallVector<int64_t> ones(shape.size(), 1);
  Value index = tg::ReshapeOp::create(
      builder, loc, RankedTensorType::get(ones, i64), last);
  if (indexType.getNumElements() != 1) {
    index = tg::BroadcastOp::create(builder, loc, indexType, index);
  }
  Value row = tg::GatherElementsOp::create(builder, loc, type.clone(shape),
                                           value, index,
                                           builder.getI64IntegerAttr(axis));
  mapping.map(original, row);
  seqAxis[row] = axis;
  rows = 1;
  gathered = true;
}

void StepBuilder::updateLive(Operation &op, int64_t index,
                             const llvm::DenseMap<Value, int64_t> &lastUse) {
  for (Value operand : op.getOperands()) {
    auto it = lastUse.find(operand);
    if (it != lastUse.end() && it->second <= index) {
      live.remove(operand);
    }
  }
  for (Value result : op.getResults()) {
    if (lastUse.count(result) && axisOf(mapping.lookupOrDefault(result))) {
      live.insert(result);
    }
  }
  if (!gathered && index >= lastAttention && live.size() == 1) {
    gatherLastRow(live.front(), op.getLoc());
    live.clear();
  }
}

LogicalResult StepBuilder::run() {
  if (failed(createFunction())) {
    return failure();
  }
  Block &body = forward.getBody().front();
  // Prefill: where each forward value is last used (the return counts),
  // and the values carrying the sequence from the start.
  llvm::DenseMap<Value, int64_t> lastUse;
  int64_t count = 0;
  for (Operation &op : body) {
    for (Value operand : op.getOperands()) {
      lastUse[operand] = count;
    }
    if (llvm::isa<tg::AttentionOp>(op)) {
      lastAttention = count;
    }
    ++count;
  }
  for (Value arg : body.getArguments()) {
    if (lastUse.count(arg) && axisOf(mapping.lookupOrDefault(arg))) {
      live.insert(arg);
    }
  }
  int64_t index = 0;
  for (Operation &op : body.without_terminator()) {
    if (failed(cloneOp(op))) {
      return failure();
    }
    if (isPrefill()) {
      updateLive(op, index, lastUse);
    }
    ++index;
  }
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  Value logits = mapping.lookup(ret.getOperand(0));
  if (isPrefill() && !gathered) {
    return forward.emitError()
           << "prefill found no point after the last attention where one "
              "value alone carries the sequence, to keep each sequence's "
              "last row";
  }
  if (axisOf(logits) != std::optional<int64_t>(1) ||
      logits.getType() != step.getResultTypes()[0]) {
    return forward.emitError() << "decode expected logits [B, 1, vocab], got "
                               << logits.getType();
  }
  func::ReturnOp::create(builder, ret.getLoc(), logits);
  if (failed(verify(step))) {
    return step.emitError()
           << "the " << step.getSymName()
           << " step does not verify (an op above depends on the sequence "
              "in a way decode cannot follow)";
  }
  return success();
}

} // namespace

/// Whether `value` is computed from `arg` (a padding bias from the
/// export's attention_mask).
static bool readsArgument(Value value, Value arg) {
  SmallVector<Value> work = {value};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (v == arg) {
      return true;
    }
    if (!seen.insert(v).second || llvm::isa<BlockArgument>(v)) {
      continue;
    }
    llvm::append_range(work, v.getDefiningOp()->getOperands());
  }
  return false;
}

/// The argument of `func` named `name` (tg.name), or null.
static Value namedArgument(func::FuncOp func, StringRef name) {
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto attr = func.getArgAttrOfType<StringAttr>(i, "tg.name");
    if (attr && attr.getValue() == name) {
      return func.getArgument(i);
    }
  }
  return nullptr;
}

void BuildDecodePass::runOnOperation() {
  ModuleOp module = getOperation();
  // Hugging Face names on renamed weights: `tailor generate --adapter`
  // merges a PEFT adapter into them at load.
  graph::recordExportNames(module);
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
    module.emitError() << "no single-block function @forward to decode";
    return signalPassFailure();
  }
  // Attention left as matmul/softmax cannot read a cache.
  if (auto unraised = forward->getAttrOfType<ArrayAttr>(
          tg::TGDialect::kUnraisedAttentionAttrName)) {
    auto first = llvm::cast<DictionaryAttr>(unraised[0]);
    forward.emitError() << "attention not raised in "
                        << first.getAs<StringAttr>("module").getValue() << ": "
                        << first.getAs<StringAttr>("reason").getValue()
                        << " (decode needs tg.attention to read a KV cache)";
    return signalPassFailure();
  }
  if (forward.getOps<tg::AttentionOp>().empty()) {
    forward.emitError() << "decode found no tg.attention in @forward: a "
                           "generation plan is for decoder models, whose "
                           "attention reads a KV cache";
    return signalPassFailure();
  }
  if (prefillChunk < 0) {
    module.emitError() << "prefill-chunk must be 0 or more, got "
                       << prefillChunk;
    return signalPassFailure();
  }
  SmallVector<int64_t> eos;
  for (StringRef id : llvm::split(StringRef(eosTokenIds), ',')) {
    int64_t value = 0;
    if (id.trim().empty()) {
      continue;
    }
    if (id.trim().getAsInteger(10, value) || value < 0) {
      module.emitError() << "eos-token-ids: '" << id << "' is not a token id";
      return signalPassFailure();
    }
    eos.push_back(value);
  }
  // Positions become a run-time input (position_ids) first, unless the
  // model has none: ALiBi biases scores by key distance alone, which the
  // kernel measures from a query row's place among the rows of the call,
  // off from its true position by a constant per row (softmax ignores it);
  // a bias over the key positions alone (ALiBi as dynamo exports it) is
  // the same for every query row.
  // A bias read from the export's attention_mask is padding, not ALiBi.
  bool alibi = forward.getOps<tg::RopeOp>().empty();
  Value attentionMask = namedArgument(forward, "attention_mask");
  forward.walk([&](tg::AttentionOp op) {
    ArrayRef<int64_t> bias =
        op.getBias() ? shapeOf(op.getBias()) : ArrayRef<int64_t>();
    alibi &= op.getAlibiSlopes().has_value() ||
             (bias.size() == 4 && bias[2] == 1 &&
              !(attentionMask && readsArgument(op.getBias(), attentionMask)));
  });
  // An export that takes position_ids reads its positions already; the
  // steps set them (StepBuilder::createFunction).
  if (!alibi && !namedArgument(forward, "position_ids")) {
    OpPassManager positions(ModuleOp::getOperationName());
    positions.addPass(graph::createPackSequencesPass());
    if (failed(runPipeline(positions, module))) {
      return signalPassFailure();
    }
  }
  StepBuilder decode(module, forward, /*chunk=*/1);
  if (failed(decode.run())) {
    return signalPassFailure();
  }
  // A chunk as long as the cache at most; 1 (or 0) is decode alone.
  int64_t chunk = std::min<int64_t>(prefillChunk, decode.maxSeqLen);
  if (chunk > 1 && failed(StepBuilder(module, forward, chunk).run())) {
    return signalPassFailure();
  }
  forward.erase();
  for (int64_t id : eos) {
    if (id >= decode.vocab) {
      module.emitError() << "eos token id " << id
                         << " is outside the vocabulary [" << 0 << ", "
                         << decode.vocab << ")";
      return signalPassFailure();
    }
  }
  Builder b(module.getContext());
  module->setAttr(
      tg::TGDialect::kGenerationAttrName,
      b.getDictionaryAttr(
          {b.getNamedAttr("max_seq_len", b.getI64IntegerAttr(decode.maxSeqLen)),
           b.getNamedAttr("batch", b.getI64IntegerAttr(decode.batch)),
           b.getNamedAttr("vocab_size", b.getI64IntegerAttr(decode.vocab)),
           b.getNamedAttr("eos_token_ids", b.getDenseI64ArrayAttr(eos))}));
}
