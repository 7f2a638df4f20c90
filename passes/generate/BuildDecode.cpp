//===- BuildDecode.cpp - a one-token decode step with a KV cache ----------===//
//
// The forward graph, imported at seq = max_seq_len N, computes N tokens at
// once. A decode step computes one, at a run-time position, against the
// keys and values of the tokens before it kept in a cache. Everything but
// attention is per token, so the step is the forward graph with the
// sequence dim of every value set to 1: the pass follows that axis from
// input_ids through each op (a reshape keeps it where the elements before
// it are the same, a transpose permutes it, everything else keeps it in
// place) and lets the verifiers reject an op the new shapes do not fit.
//
// Positions come from tailor-pack-sequences, run first: it replaces the
// positions 0..N-1 the export baked in (rotary tables, learned position
// rows) by gathers at a `position_ids` input, which here is the token's
// position. Attention then reads the cache.
//
// The mask of the keys after `position` is an additive bias computed from
// `position` by ordinary kernels (compare an iota of key indices with it,
// select -inf or 0): a [1, 1, 1, N] tensor, shared by every layer, that
// the attention kernel already takes, so the CPU and CUDA attention kernels
// need nothing new. A `key_length` operand would let the kernel stop at
// position + 1 keys instead of scoring all N; that is the batched-prefill
// slice's concern, where the work per step matters more than here.
//
//===----------------------------------------------------------------------===//

#include "passes/generate/Passes.h"

#include "passes/graph/ExportNames.h"
#include "passes/graph/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"

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

/// Builds `decode` from a forward function whose positions are its
/// `position_ids` input (tailor-pack-sequences has run).
class DecodeBuilder {
public:
  DecodeBuilder(ModuleOp module, func::FuncOp forward)
      : module(module), forward(forward), builder(module.getContext()) {}
  LogicalResult run();

  int64_t batch = 0, maxSeqLen = 0, vocab = 0;

private:
  LogicalResult createFunction();
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
  /// The [1, 1, 1, N] bias masking the keys a query at `position` must not
  /// see: after it, and with a window, `window` or more before it.
  Value maskBias(Location loc, Type element, int64_t window);
  mlir::FailureOr<tg::StateOp> declareCache(tg::AttentionOp attention,
                                            StringRef what,
                                            RankedTensorType type,
                                            tg::StateKind kind);

  ModuleOp module;
  func::FuncOp forward, decode;
  OpBuilder builder;
  IRMapping mapping;
  /// Values of `decode` that have a sequence dim (length 1 now), by axis.
  llvm::DenseMap<Value, int64_t> seqAxis;
  Value position;
  llvm::DenseMap<std::pair<Type, int64_t>, Value> biases;
  int64_t cacheCount = 0;
};

LogicalResult DecodeBuilder::createFunction() {
  Block &body = forward.getBody().front();
  Value inputIds, positionIds;
  for (auto [index, arg] : llvm::enumerate(body.getArguments())) {
    auto name = forward.getArgAttrOfType<StringAttr>(index, "tg.name");
    if (name && name.getValue() == "input_ids") {
      inputIds = arg;
    } else if (name && name.getValue() == "position_ids") {
      positionIds = arg;
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
  auto idsType = RankedTensorType::get({batch, 1}, i64);
  auto positionType = RankedTensorType::get({}, i64);
  auto logitsType = RankedTensorType::get(
      {batch, 1, vocab},
      llvm::cast<ShapedType>(forward.getResultTypes()[0]).getElementType());
  builder.setInsertionPoint(forward);
  decode = func::FuncOp::create(
      builder, forward.getLoc(), "decode",
      FunctionType::get(context, {idsType, positionType}, {logitsType}));
  auto named = [&](StringRef name) {
    return builder.getDictionaryAttr(
        {builder.getNamedAttr("tg.name", builder.getStringAttr(name))});
  };
  decode.setAllArgAttrs(
      ArrayRef<DictionaryAttr>{named("input_ids"), named("position")});
  decode.setResultAttrs(0, named("logits"));
  Block *entry = decode.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  position = entry->getArgument(1);
  mapping.map(inputIds, entry->getArgument(0));
  seqAxis[entry->getArgument(0)] = 1;
  // Every sequence of the batch is at the same position. Without
  // position_ids (ALiBi biases scores by key distance alone) there is none
  // to give.
  if (!positionIds) {
    return success();
  }
  Location loc = forward.getLoc();
  Value ids = tg::ReshapeOp::create(
      builder, loc, RankedTensorType::get({1, 1}, i64), position);
  if (batch != 1) {
    ids = tg::BroadcastOp::create(builder, loc, idsType, ids);
  }
  mapping.map(positionIds, ids);
  seqAxis[ids] = 1;
  return success();
}

FailureOr<int64_t> DecodeBuilder::resultAxis(Operation *op, Value result,
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

LogicalResult DecodeBuilder::cloneOp(Operation &op) {
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
    // rotary and Falcon's fused projections cut other dims) keeps its token.
    int64_t axis = seq->second;
    if (slice.getStarts()[axis] != 0 || slice.getEnds()[axis] != maxSeqLen ||
        slice.getSteps()[axis] != 1) {
      return op.emitError() << "decode cannot slice the sequence dim (axis "
                            << axis << ") in " << whereIs(&op);
    }
    SmallVector<int64_t> ends(slice.getEnds());
    ends[axis] = 1;
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
    shape[*axis] = 1;
    cloned.setType(type.clone(shape));
    seqAxis[cloned] = *axis;
  }
  return success();
}

FailureOr<tg::StateOp> DecodeBuilder::declareCache(tg::AttentionOp attention,
                                                   StringRef what,
                                                   RankedTensorType type,
                                                   tg::StateKind kind) {
  // Named after the attention module, which checkpoints and inspect show.
  auto path =
      attention->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName);
  std::string owner =
      path ? path.str() : "attention" + std::to_string(cacheCount++);
  if (module.lookupSymbol(owner + "." + what.str())) {
    return attention.emitError() << "decode found two attentions of module "
                                 << owner << " to give a KV cache";
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(decode);
  auto state = tg::StateOp::create(
      builder, attention.getLoc(), builder.getStringAttr(owner + "." + what),
      TypeAttr::get(type), FlatSymbolRefAttr::get(builder.getContext(), owner),
      tg::StateKindAttr::get(builder.getContext(), kind), UnitAttr());
  return state;
}

Value DecodeBuilder::maskBias(Location loc, Type element, int64_t window) {
  Value &bias = biases[{element, window}];
  if (bias) {
    return bias;
  }
  OpBuilder::InsertionGuard guard(builder);
  // At the top: one bias serves every layer.
  builder.setInsertionPointToStart(&decode.getBody().front());
  Type i64 = builder.getI64Type(), i1 = builder.getI1Type();
  auto keysType = RankedTensorType::get({1, 1, 1, maxSeqLen}, i64);
  auto oneType = RankedTensorType::get({1, 1, 1, 1}, i64);
  SmallVector<int64_t> iota(maxSeqLen);
  for (int64_t s = 0; s < maxSeqLen; ++s) {
    iota[s] = s;
  }
  Value keys = arith::ConstantOp::create(
      builder, loc, DenseElementsAttr::get(keysType, ArrayRef<int64_t>(iota)));
  Value at = tg::ReshapeOp::create(builder, loc, oneType, position);
  auto maskType = RankedTensorType::get({1, 1, 1, maxSeqLen}, i1);
  Value masked = tg::GtOp::create(builder, loc, maskType, keys, at);
  if (window > 0) {
    // Keys s <= position - window are outside the window.
    Value edge = arith::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(oneType, ArrayRef<int64_t>{window - 1}));
    Value first = tg::SubOp::create(builder, loc, oneType, at, edge);
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
      builder, loc, RankedTensorType::get({1, 1, 1, maxSeqLen}, element),
      masked, floatOf(-std::numeric_limits<double>::infinity()), floatOf(0.0));
  return bias;
}

LogicalResult DecodeBuilder::rewriteAttention(tg::AttentionOp attention) {
  if (!attention.getCausal()) {
    return attention.emitError()
           << "decode needs causal attention (a decoder), but the attention "
              "in "
           << whereIs(attention) << " is not causal";
  }
  if (attention.getBias()) {
    return attention.emitError()
           << "decode does not take an attention bias yet, but the attention "
              "in "
           << whereIs(attention) << " has one";
  }
  Value query = mapping.lookup(attention.getQuery());
  Value key = mapping.lookup(attention.getKey());
  Value value = mapping.lookup(attention.getValue());
  for (Value v : {query, key, value}) {
    if (axisOf(v) != std::optional<int64_t>(2)) {
      return attention.emitError()
             << "decode expected the attention in " << whereIs(attention)
             << " to read one token's [B, H, 1, D] queries, keys and values";
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
  SmallVector<int64_t> shape(resultType.getShape());
  shape[2] = 1;
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

LogicalResult DecodeBuilder::run() {
  if (failed(createFunction())) {
    return failure();
  }
  for (Operation &op : forward.getBody().front().without_terminator()) {
    if (failed(cloneOp(op))) {
      return failure();
    }
  }
  auto ret =
      llvm::cast<func::ReturnOp>(forward.getBody().front().getTerminator());
  Value logits = mapping.lookup(ret.getOperand(0));
  if (axisOf(logits) != std::optional<int64_t>(1) ||
      logits.getType() != decode.getResultTypes()[0]) {
    return forward.emitError()
           << "decode expected logits [B, 1, vocab], got " << logits.getType();
  }
  func::ReturnOp::create(builder, ret.getLoc(), logits);
  if (failed(verify(decode))) {
    return decode.emitError()
           << "the decode step does not verify (an op above depends on the "
              "sequence in a way decode cannot follow)";
  }
  forward.erase();
  return success();
}

} // namespace

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
  // model has none: ALiBi biases scores by key distance alone, the same
  // for one query at the end of the cache (a per-row constant).
  bool alibi = true;
  forward.walk(
      [&](tg::AttentionOp op) { alibi &= op.getAlibiSlopes().has_value(); });
  if (!alibi) {
    OpPassManager positions(ModuleOp::getOperationName());
    positions.addPass(graph::createPackSequencesPass());
    if (failed(runPipeline(positions, module))) {
      return signalPassFailure();
    }
  }
  DecodeBuilder decode(module, forward);
  if (failed(decode.run())) {
    return signalPassFailure();
  }
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
