//===- TGTrainingOps.cpp - verifiers of gradient, state and update ops ----===//

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGQuant.h"
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

/// Checks that `value` has exactly `expected`'s shape and element type.
static LogicalResult expectLike(Operation *op, Value value, StringRef name,
                                Value expected, StringRef expectedName) {
  if (!shapesCompatible(shapeOf(value), shapeOf(expected)) ||
      elementTypeOf(value) != elementTypeOf(expected)) {
    return op->emitOpError()
           << "expected " << name << " to have the type of " << expectedName
           << " (" << expected.getType() << "), got " << value.getType();
  }
  return success();
}

static LogicalResult expectScalar(Operation *op, Value value, StringRef name) {
  if (!shapeOf(value).empty()) {
    return op->emitOpError() << "expected " << name
                             << " to be a scalar (rank 0), got "
                             << formatShape(shapeOf(value));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringAttr kind, FloatAttr value) {
  if (kind != "zeros" && kind != "kaiming_uniform" && kind != "normal") {
    return emitError() << "unknown init kind '" << kind.getValue()
                       << "' (expected zeros, kaiming_uniform or normal)";
  }
  if (kind == "normal" && !(value.getValueAsDouble() > 0.0)) {
    return emitError() << "a normal init needs a positive std, got "
                       << value.getValueAsDouble();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

LogicalResult LinearWeightGradOp::verify() {
  llvm::ArrayRef<int64_t> dy = shapeOf(getOutputGrad());
  llvm::ArrayRef<int64_t> x = shapeOf(getInput());
  if (dy.size() < 1 || dy.size() != x.size() ||
      !shapesCompatible(dy.drop_back(), x.drop_back())) {
    return emitOpError() << "expected output_grad [..., out] and input "
                            "[..., in] with the same leading dims, got "
                         << formatShape(dy) << " and " << formatShape(x);
  }
  Shape expected = {dy.back(), x.back()};
  if (!shapesCompatible(shapeOf(getResult()), expected)) {
    return emitOpError() << "result shape " << formatShape(shapeOf(getResult()))
                         << " does not match the expected "
                         << formatShape(expected);
  }
  return success();
}

/// Shared by the norm gradients: dy like x, weight [D], grads like their
/// primal.
static LogicalResult verifyNormGrad(Operation *op, Value dy, Value x,
                                    Value weight, ValueRange results) {
  if (failed(expectLike(op, dy, "output_grad", x, "input"))) {
    return failure();
  }
  llvm::ArrayRef<int64_t> input = shapeOf(x);
  if (input.empty() || shapeOf(weight).size() != 1 ||
      !dimsCompatible(shapeOf(weight)[0], input.back())) {
    return op->emitOpError() << "expected weight of shape [" << 
           (input.empty() ? 0 : input.back()) << "], got "
           << formatShape(shapeOf(weight));
  }
  if (failed(expectLike(op, results[0], "input_grad", x, "input"))) {
    return failure();
  }
  for (Value grad : results.drop_front()) {
    if (failed(expectLike(op, grad, "weight and bias grads", weight,
                          "weight"))) {
      return failure();
    }
  }
  return success();
}

LogicalResult RMSNormGradOp::verify() {
  return verifyNormGrad(*this, getOutputGrad(), getInput(), getWeight(),
                        getResults());
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getOutputGrad(), getInput(), getWeight(),
                        getResults());
}

LogicalResult AttentionGradOp::verify() {
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
  if (!shapesCompatible(shapeOf(getOutputGrad()), *shape)) {
    return emitOpError() << "expected output_grad of shape "
                         << formatShape(*shape) << ", got "
                         << formatShape(shapeOf(getOutputGrad()));
  }
  if (failed(expectLike(*this, getQueryGrad(), "query_grad", getQuery(),
                        "query")) ||
      failed(expectLike(*this, getKeyGrad(), "key_grad", getKey(), "key")) ||
      failed(expectLike(*this, getValueGrad(), "value_grad", getValue(),
                        "value"))) {
    return failure();
  }
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  llvm::ArrayRef<int64_t> table = shapeOf(getResult());
  if (table.size() != 2) {
    return emitOpError() << "expected a [vocab, dim] result, got "
                         << formatShape(table);
  }
  FailureOr<Shape> shape = embeddingShape(table, shapeOf(getIds()),
                                          [&] { return emitOpError(); });
  if (failed(shape)) {
    return failure();
  }
  if (!shapesCompatible(shapeOf(getOutputGrad()), *shape)) {
    return emitOpError() << "expected output_grad of shape "
                         << formatShape(*shape) << ", got "
                         << formatShape(shapeOf(getOutputGrad()));
  }
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  llvm::ArrayRef<int64_t> logits = shapeOf(getLogits());
  if (logits.size() != 2 || shapeOf(getLabels()).size() != 1 ||
      !dimsCompatible(shapeOf(getLabels())[0], logits[0])) {
    return emitOpError() << "expected logits [tokens, vocab] and labels "
                            "[tokens], got "
                         << formatShape(logits) << " and "
                         << formatShape(shapeOf(getLabels()));
  }
  Shape lossShape;
  if (getReduction() == LossReduction::None) {
    lossShape.push_back(logits[0]);
  }
  if (!shapesCompatible(shapeOf(getLossGrad()), lossShape)) {
    return emitOpError() << "expected loss_grad of shape "
                         << formatShape(lossShape) << ", got "
                         << formatShape(shapeOf(getLossGrad()));
  }
  return expectLike(*this, getResult(), "result", getLogits(), "logits");
}

LogicalResult SoftmaxGradOp::verify() {
  int64_t rank = static_cast<int64_t>(shapeOf(getOutput()).size());
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0 || axis >= rank) {
    return emitOpError() << "axis " << axis << " is out of range for rank "
                         << rank;
  }
  if (failed(expectLike(*this, getOutputGrad(), "output_grad", getOutput(),
                        "output"))) {
    return failure();
  }
  return expectLike(*this, getResult(), "result", getOutput(), "output");
}

LogicalResult RopeGradOp::verify() {
  llvm::ArrayRef<int64_t> dy = shapeOf(getOutputGrad());
  if (dy.size() != 4 || (dy[3] != ShapedType::kDynamic && dy[3] % 2 != 0)) {
    return emitOpError() << "expected output_grad [batch, heads, seq, even "
                            "head_dim], got "
                         << formatShape(dy);
  }
  llvm::ArrayRef<int64_t> cos = shapeOf(getCos());
  Shape perSequence = {dy[2], dy[3]};
  Shape perBatch = {dy[0], dy[2], dy[3]};
  if (cos != shapeOf(getSin()) || (!shapesCompatible(cos, perSequence) &&
                                   !shapesCompatible(cos, perBatch))) {
    return emitOpError() << "expected cos and sin of shape "
                         << formatShape(perSequence) << " or "
                         << formatShape(perBatch);
  }
  return expectLike(*this, getResult(), "result", getOutputGrad(),
                    "output_grad");
}

LogicalResult SliceGradOp::verify() {
  llvm::ArrayRef<int64_t> dy = shapeOf(getOutputGrad());
  llvm::ArrayRef<int64_t> input = shapeOf(getResult());
  if (getStarts().size() != input.size() || getSteps().size() != input.size() ||
      dy.size() != input.size()) {
    return emitOpError() << "expected starts, steps and output_grad of rank "
                         << input.size();
  }
  for (size_t i = 0; i < input.size(); ++i) {
    int64_t start = getStarts()[i], step = getSteps()[i];
    if (step < 1 || start < 0 ||
        (dy[i] > 0 && start + (dy[i] - 1) * step >= input[i])) {
      return emitOpError() << "dim " << i << ": " << dy[i]
                           << " elements from " << start << " by " << step
                           << " do not fit in " << input[i];
    }
  }
  return success();
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0)) {
    return emitOpError() << "expected a dropout probability in [0, 1), got "
                         << p;
  }
  if (failed(expectScalar(*this, getSeed(), "seed"))) {
    return failure();
  }
  return expectLike(*this, getResult(), "result", getInput(), "input");
}

//===----------------------------------------------------------------------===//
// State and updates
//===----------------------------------------------------------------------===//

LogicalResult StateOp::verify() {
  if (!getTensorType().hasStaticShape()) {
    return emitOpError() << "state @" << getSymName()
                         << " must have a static shape";
  }
  return success();
}

/// Looks up a tg.state, checking that it has `type` when one is given.
static FailureOr<StateOp> lookupState(Operation *op,
                                      SymbolTableCollection &symbols,
                                      FlatSymbolRefAttr name, Type type) {
  auto state = symbols.lookupNearestSymbolFrom<StateOp>(op, name);
  if (!state) {
    return op->emitOpError() << name << " does not name a tg.state";
  }
  if (type && state.getType() != type) {
    return op->emitOpError() << "state " << name << " has type "
                             << state.getType() << ", expected " << type;
  }
  return state;
}

LogicalResult StateRefOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return lookupState(*this, symbols, getNameAttr(), getType());
}

LogicalResult AccumulateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return lookupState(*this, symbols, getTargetAttr(), getValue().getType());
}

LogicalResult AllReduceStatesOp::verify() {
  if (getStates().empty()) {
    return emitOpError() << "expected at least one state";
  }
  return success();
}

LogicalResult
AllReduceStatesOp::verifySymbolUses(SymbolTableCollection &symbols) {
  Type element;
  for (Attribute name : getStates()) {
    FailureOr<StateOp> state = lookupState(
        *this, symbols, llvm::cast<FlatSymbolRefAttr>(name), Type());
    if (failed(state)) {
      return failure();
    }
    Type type = state->getTensorType().getElementType();
    if (element && type != element) {
      return emitOpError() << "state " << name << " holds " << type
                           << ", the bucket's first " << element
                           << ": a bucket is one element type";
    }
    element = type;
  }
  return success();
}

LogicalResult GlobalNormOp::verify() {
  if (getInputs().empty()) {
    return emitOpError() << "expected at least one tensor";
  }
  return expectScalar(*this, getResult(), "result");
}

/// Checks that the states an update names exist, have `type`, and belong
/// to `owner` (a parameter or a bucket).
static LogicalResult verifyUpdateStates(Operation *op,
                                        SymbolTableCollection &symbols,
                                        FlatSymbolRefAttr owner, Type type,
                                        ArrayRef<FlatSymbolRefAttr> stateNames) {
  for (FlatSymbolRefAttr name : stateNames) {
    FailureOr<StateOp> state = lookupState(op, symbols, name, type);
    if (failed(state)) {
      return failure();
    }
    if (state->getParameter() != owner.getValue()) {
      return op->emitOpError() << "state " << name << " belongs to @"
                               << state->getParameter() << ", not " << owner;
    }
  }
  return success();
}

/// Checks an update: a trainable parameter (or a bucket of them), states
/// of its type (a chunk's) that belong to it, and scalar hyperparameters.
static LogicalResult verifyUpdate(Operation *op, SymbolTableCollection &symbols,
                                  FlatSymbolRefAttr paramName,
                                  ArrayRef<FlatSymbolRefAttr> stateNames,
                                  ValueRange scalars) {
  Type type;
  FlatSymbolRefAttr owner = paramName;
  if (auto bucket = symbols.lookupNearestSymbolFrom<BucketOp>(op, paramName)) {
    type = bucket.getChunkType();
  } else if (auto master =
                 symbols.lookupNearestSymbolFrom<StateOp>(op, paramName)) {
    // Optimizer offload: the update runs on the parameter's host copy.
    if (master.getKind() != StateKind::Master) {
      return op->emitOpError() << paramName << " is a "
                               << stringifyStateKind(master.getKind())
                               << " state; an update runs on a parameter, a "
                                  "bucket or a master state";
    }
    type = master.getType();
    owner = FlatSymbolRefAttr::get(op->getContext(), master.getParameter());
  } else if (auto param =
                 symbols.lookupNearestSymbolFrom<ParamOp>(op, paramName)) {
    if (!param.getTrainable()) {
      return op->emitOpError() << "parameter " << paramName
                               << " is not trainable";
    }
    type = param.getType();
  } else {
    return op->emitOpError() << paramName
                             << " does not name a tg.param or a tg.bucket";
  }
  if (failed(verifyUpdateStates(op, symbols, owner, type, stateNames))) {
    return failure();
  }
  for (Value scalar : scalars) {
    if (failed(expectScalar(op, scalar, "lr, step and scale"))) {
      return failure();
    }
  }
  return success();
}

LogicalResult AdamWUpdateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyUpdate(*this, symbols, getParamAttr(),
                      {getGradAttr(), getExpAvgAttr(), getExpAvgSqAttr()},
                      {getLr(), getStep(), getGradScale()});
}

LogicalResult SGDUpdateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  bool hasBuffer = static_cast<bool>(getMomentumBufferAttr());
  if (hasBuffer != (getMomentum().convertToDouble() != 0.0)) {
    return emitOpError() << (hasBuffer ? "momentum 0 keeps no momentum buffer"
                                       : "momentum needs a momentum buffer");
  }
  SmallVector<FlatSymbolRefAttr> states = {getGradAttr()};
  if (hasBuffer) {
    states.push_back(getMomentumBufferAttr());
  }
  return verifyUpdate(*this, symbols, getParamAttr(), states,
                      {getLr(), getGradScale()});
}

/// The type of a tg.param or tg.state named `name`, and whether it lives in
/// host memory (a `host` state); for a tg.bucket of trainable parameters
/// (ZeRO), this rank's chunk of it, which its update writes.
static FailureOr<std::pair<Type, bool>>
lookupCopied(Operation *op, SymbolTableCollection &symbols,
             FlatSymbolRefAttr name) {
  if (auto param = symbols.lookupNearestSymbolFrom<ParamOp>(op, name)) {
    if (param.getQuantAttr()) {
      return op->emitOpError() << "parameter " << name
                               << " is quantized; only dense tensors are "
                                  "copied whole";
    }
    return std::make_pair(Type(param.getType()), false);
  }
  if (auto state = symbols.lookupNearestSymbolFrom<StateOp>(op, name)) {
    return std::make_pair(Type(state.getType()), state.getHost());
  }
  if (auto bucket = symbols.lookupNearestSymbolFrom<BucketOp>(op, name)) {
    if (bucket.getHost()) {
      return op->emitOpError() << "bucket " << name
                               << " holds offloaded frozen parameters; only "
                                  "a bucket of trainable ones is copied";
    }
    return std::make_pair(Type(bucket.getChunkType()), false);
  }
  return op->emitOpError() << name
                           << " does not name a tg.param, tg.state or tg.bucket";
}

LogicalResult CopyStateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto source = lookupCopied(*this, symbols, getSourceAttr());
  auto target = lookupCopied(*this, symbols, getTargetAttr());
  if (failed(source) || failed(target)) {
    return failure();
  }
  if (source->first != target->first) {
    return emitOpError() << "copies " << source->first << " into "
                         << target->first << "; the types must agree";
  }
  if (source->second == target->second) {
    return emitOpError() << "copies between two tensors in "
                         << (source->second ? "host" : "device")
                         << " memory; one of them must be a host state";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Sharded optimizer state and gradients
//===----------------------------------------------------------------------===//

LogicalResult BucketOp::verify() {
  if (getMembers().empty() ||
      getMembers().size() != getOffsets().size()) {
    return emitOpError() << "expected one offset per member, got "
                         << getOffsets().size() << " for "
                         << getMembers().size() << " members";
  }
  auto size = static_cast<int64_t>(getSize());
  auto shards = static_cast<int64_t>(getShards());
  if (shards < 1 || size < 1 || size % shards != 0) {
    return emitOpError() << "size " << size
                         << " must be a positive multiple of shards " << shards;
  }
  if (getHost() && (shards != 1 || !getShardedParams())) {
    return emitOpError() << "a host bucket holds its members whole "
                            "(shards 1, sharded_params); offload of sharded "
                            "parameters is not built yet";
  }
  return success();
}

LogicalResult BucketOp::verifySymbolUses(SymbolTableCollection &symbols) {
  int64_t end = 0;
  auto size = static_cast<int64_t>(getSize());
  for (auto [name, offset] : llvm::zip(getMembers(), getOffsets())) {
    auto ref = llvm::cast<FlatSymbolRefAttr>(name);
    auto param = symbols.lookupNearestSymbolFrom<ParamOp>(*this, ref);
    // Only ZeRO-3 shards frozen parameters (read, never updated).
    if (!param || (!param.getTrainable() && !getShardedParams())) {
      return emitOpError() << ref << " does not name a trainable tg.param";
    }
    auto type = llvm::cast<RankedTensorType>(param.getType());
    if (DictionaryAttr quant = param.getQuantAttr()) {
      // A quantized parameter is its stored bytes.
      FailureOr<RankedTensorType> bytes =
          quantizedStorageType(quant, [&] { return emitOpError(); });
      if (failed(bytes)) {
        return failure();
      }
      type = *bytes;
    }
    if (type.getElementType() != getElementType()) {
      return emitOpError() << "member " << ref << " holds "
                           << type.getElementType() << ", the bucket "
                           << getElementType();
    }
    int64_t numel = numElements(type.getShape());
    if (offset < end || offset + numel > size) {
      return emitOpError() << "member " << ref << " at [" << offset << ", "
                           << offset + numel << ") overlaps the one before "
                           << "or leaves the bucket's " << size
                           << " elements";
    }
    end = offset + numel;
  }
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  auto shards = static_cast<int64_t>(getShards());
  if (input.getRank() != 1 || result.getRank() != 1 ||
      input.getElementType() != result.getElementType() || shards < 1 ||
      input.getDimSize(0) != result.getDimSize(0) * shards) {
    return emitOpError() << "expected a 1-D input of " << shards
                         << " chunks of the 1-D result's type, got "
                         << input << " -> " << result;
  }
  return success();
}

LogicalResult
AllGatherBucketOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (!symbols.lookupNearestSymbolFrom<BucketOp>(*this, getBucketAttr())) {
    return emitOpError() << getBucketAttr() << " does not name a tg.bucket";
  }
  return success();
}

LogicalResult ZeroStatesOp::verify() {
  if (getStates().empty()) {
    return emitOpError() << "expected at least one state";
  }
  return success();
}

LogicalResult ZeroStatesOp::verifySymbolUses(SymbolTableCollection &symbols) {
  for (Attribute name : getStates()) {
    if (failed(lookupState(*this, symbols, llvm::cast<FlatSymbolRefAttr>(name),
                           Type()))) {
      return failure();
    }
  }
  return success();
}

LogicalResult CacheWriteOp::verify() {
  auto value = llvm::cast<RankedTensorType>(getValue().getType());
  if (value.getRank() != 4) {
    return emitOpError() << "expected the keys or values of the step's "
                            "tokens, [B, H, C, D], got "
                         << value;
  }
  if (llvm::cast<RankedTensorType>(getPosition().getType()).getRank() != 0) {
    return emitOpError() << "expected a scalar position, got "
                         << getPosition().getType();
  }
  return success();
}

LogicalResult CacheWriteOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<StateOp> cache = lookupState(*this, symbols, getCacheAttr(), Type());
  if (failed(cache)) {
    return failure();
  }
  if (cache->getKind() != StateKind::KeyCache &&
      cache->getKind() != StateKind::ValueCache) {
    return emitOpError() << "state " << getCacheAttr()
                         << " is not a key_cache or value_cache";
  }
  RankedTensorType type = cache->getTensorType();
  auto value = llvm::cast<RankedTensorType>(getValue().getType());
  if (type.getRank() != 4 || type.getElementType() != value.getElementType() ||
      type.getDimSize(0) != value.getDimSize(0) ||
      type.getDimSize(1) != value.getDimSize(1) ||
      type.getDimSize(2) < value.getDimSize(2) ||
      type.getDimSize(3) != value.getDimSize(3)) {
    return emitOpError() << "cache " << getCacheAttr() << " of type " << type
                         << " cannot hold a value of type " << value;
  }
  return success();
}

LogicalResult GatherBucketOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto bucket = symbols.lookupNearestSymbolFrom<BucketOp>(*this, getBucketAttr());
  if (!bucket) {
    return emitOpError() << getBucketAttr() << " does not name a tg.bucket";
  }
  if (std::optional<StringRef> wire = getWire()) {
    if (*wire != "int8") {
      return emitOpError() << "expected wire \"int8\", got \"" << *wire
                           << "\"";
    }
    if (!bucket.getElementType().isF32() || !bucket.getShardedParams() ||
        bucket.getHost() || bucket.getChunkElements() % kWireBlock != 0) {
      return emitOpError() << "an int8 wire needs a device bucket of sharded "
                              "f32 parameters whose chunks are whole blocks "
                              "of "
                           << kWireBlock << ", got " << getBucketAttr();
    }
    auto wireType = RankedTensorType::get(
        {static_cast<int64_t>(bucket.getShards()) *
         int8WireBytes(bucket.getChunkElements())},
        IntegerType::get(getContext(), 8, IntegerType::Unsigned));
    if (getResult().getType() != wireType) {
      return emitOpError() << "expected " << wireType << " (every rank's "
                           << "int8 wire chunk), got " << getResult().getType();
    }
    return success();
  }
  auto expected = RankedTensorType::get(
      {static_cast<int64_t>(bucket.getSize())}, bucket.getElementType());
  if (getResult().getType() != expected) {
    return emitOpError() << "expected " << expected << " (the bucket's "
                         << "flat space), got " << getResult().getType();
  }
  return success();
}

LogicalResult DequantizeGatheredOp::verify() {
  int64_t chunk = static_cast<int64_t>(getChunk());
  int64_t shards = static_cast<int64_t>(getShards());
  if (chunk <= 0 || shards <= 0 || chunk % kWireBlock != 0) {
    return emitOpError() << "expected a positive chunk of whole blocks of "
                         << kWireBlock << " and positive shards, got chunk "
                         << chunk << " shards " << shards;
  }
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  if (input.getRank() != 1 || input.getDimSize(0) != shards * int8WireBytes(chunk) ||
      result.getRank() != 1 || result.getDimSize(0) != shards * chunk) {
    return emitOpError() << "expected " << shards * int8WireBytes(chunk)
                         << " wire bytes decoding to " << shards * chunk
                         << " elements, got " << input << " -> " << result;
  }
  return success();
}

/// The wire format of a qgZ op whose `chunk` and `shards` describe whole
/// blocks; the error otherwise.
static FailureOr<WireFormat> verifyWireChunks(Operation *op, int64_t chunk,
                                              int64_t shards,
                                              StringRef format) {
  std::optional<WireFormat> wire = wireFormatNamed(format);
  if (!wire) {
    return op->emitOpError() << "expected format " << kWireFormatNames
                             << ", got '" << format << "'";
  }
  if (chunk <= 0 || shards <= 0 || chunk % kWireBlock != 0) {
    return op->emitOpError()
           << "expected a positive chunk of whole blocks of " << kWireBlock
           << " and positive shards, got chunk " << chunk << " shards "
           << shards;
  }
  return *wire;
}

LogicalResult QuantizeChunksOp::verify() {
  int64_t chunk = static_cast<int64_t>(getChunk());
  int64_t shards = static_cast<int64_t>(getShards());
  FailureOr<WireFormat> format =
      verifyWireChunks(*this, chunk, shards, getFormat());
  if (failed(format)) {
    return failure();
  }
  int64_t bytes = wireBytes(*format, chunk);
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  if (input.getRank() != 1 || input.getDimSize(0) != shards * chunk ||
      result.getRank() != 1 || result.getDimSize(0) != shards * bytes) {
    return emitOpError() << "expected " << shards * chunk
                         << " elements encoding to " << shards * bytes << " "
                         << getFormat() << " wire bytes, got " << input
                         << " -> " << result;
  }
  return success();
}

LogicalResult AllToAllOp::verify() {
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  auto shards = static_cast<int64_t>(getShards());
  if (input.getRank() != 1 || shards < 1 || input.isDynamicDim(0) ||
      input.getDimSize(0) % shards != 0) {
    return emitOpError() << "expected a 1-D input of " << shards
                         << " equal blocks, got " << input;
  }
  return success();
}

LogicalResult DequantizeReduceOp::verify() {
  int64_t chunk = static_cast<int64_t>(getChunk());
  int64_t shards = static_cast<int64_t>(getShards());
  FailureOr<WireFormat> format =
      verifyWireChunks(*this, chunk, shards, getFormat());
  if (failed(format)) {
    return failure();
  }
  int64_t bytes = wireBytes(*format, chunk);
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  if (input.getRank() != 1 || input.getDimSize(0) != shards * bytes ||
      result.getRank() != 1 || result.getDimSize(0) != chunk) {
    return emitOpError() << "expected " << shards << " " << getFormat()
                         << " wire chunks of " << bytes
                         << " bytes reducing to " << chunk
                         << " elements, got " << input << " -> " << result;
  }
  return success();
}

LogicalResult BucketMemberOp::verify() {
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  auto offset = static_cast<int64_t>(getOffset());
  int64_t numel = numElements(result.getShape());
  if (input.getRank() != 1 || !result.hasStaticShape() || offset < 0 ||
      offset + numel > input.getDimSize(0)) {
    return emitOpError() << "expected " << numel << " elements at " << offset
                         << " inside a 1-D input, got " << input;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient compression
//===----------------------------------------------------------------------===//

/// A state read as a matrix: rank > 2 as [shape[0], the rest], a vector as
/// one column; `transposed` swaps the two.
static std::pair<int64_t, int64_t> matrixView(StateOp state, bool transposed) {
  RankedTensorType type = state.getTensorType();
  int64_t rows = type.getRank() == 0 ? 1 : type.getDimSize(0);
  int64_t cols = rows == 0 ? 0 : type.getNumElements() / rows;
  return transposed ? std::make_pair(cols, rows) : std::make_pair(rows, cols);
}

/// Looks up the float states `names`, all of one element type.
static FailureOr<SmallVector<StateOp>>
lookupCompressionStates(Operation *op, SymbolTableCollection &symbols,
                        ArrayRef<FlatSymbolRefAttr> names) {
  SmallVector<StateOp> states;
  for (FlatSymbolRefAttr name : names) {
    FailureOr<StateOp> state = lookupState(op, symbols, name, Type());
    if (failed(state)) {
      return failure();
    }
    Type element = state->getTensorType().getElementType();
    if (!element.isF32()) {
      return op->emitOpError() << "state " << name << " holds " << element
                               << ", expected f32 (compression works on f32 "
                                  "gradients)";
    }
    states.push_back(*state);
  }
  return states;
}

/// Checks that `a` and `b` have one type (a gradient and its error).
static LogicalResult verifyErrorPair(Operation *op,
                                     SymbolTableCollection &symbols,
                                     FlatSymbolRefAttr grad,
                                     FlatSymbolRefAttr error) {
  FailureOr<SmallVector<StateOp>> states =
      lookupCompressionStates(op, symbols, {grad, error});
  if (failed(states)) {
    return failure();
  }
  if ((*states)[0].getType() != (*states)[1].getType()) {
    return op->emitOpError()
           << "gradient " << grad << " has type " << (*states)[0].getType()
           << " but error " << error << " has " << (*states)[1].getType();
  }
  return success();
}

LogicalResult
AddErrorFeedbackOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyErrorPair(*this, symbols, getGradAttr(), getErrorAttr());
}

LogicalResult
StoreErrorFeedbackOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyErrorPair(*this, symbols, getGradAttr(), getErrorAttr());
}

/// Checks that `name` is a 2-D f32 state (a low-rank factor).
static LogicalResult verifyFactor(Operation *op, SymbolTableCollection &symbols,
                                  FlatSymbolRefAttr name) {
  FailureOr<SmallVector<StateOp>> states =
      lookupCompressionStates(op, symbols, {name});
  if (failed(states)) {
    return failure();
  }
  if ((*states)[0].getTensorType().getRank() != 2) {
    return op->emitOpError() << "factor " << name << " has type "
                             << (*states)[0].getType() << ", expected 2-D";
  }
  return success();
}

LogicalResult LowRankInitOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyFactor(*this, symbols, getFactorAttr());
}

LogicalResult
OrthogonalizeOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (getEpsilon().convertToDouble() < 0.0) {
    return emitOpError() << "epsilon must not be negative, got "
                         << getEpsilon().convertToDouble();
  }
  if (failed(verifyFactor(*this, symbols, getFactorAttr()))) {
    return failure();
  }
  auto state = symbols.lookupNearestSymbolFrom<StateOp>(*this, getFactorAttr());
  auto [rows, cols] = matrixView(state, false);
  if (cols > rows) {
    return emitOpError() << "factor " << getFactorAttr() << " has " << cols
                         << " columns but " << rows
                         << " rows: at most as many orthonormal columns as "
                            "rows exist";
  }
  return success();
}

LogicalResult
LowRankMatmulOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<SmallVector<StateOp>> states = lookupCompressionStates(
      *this, symbols, {getAAttr(), getBAttr(), getCAttr()});
  if (failed(states)) {
    return failure();
  }
  auto [m, k] = matrixView((*states)[0], getTransposeA());
  auto [kb, n] = matrixView((*states)[1], getTransposeB());
  auto [cm, cn] = matrixView((*states)[2], false);
  if (k != kb || cm != m || cn != n) {
    return emitOpError() << "shapes do not chain: " << m << "x" << k
                         << " times " << kb << "x" << n << " into " << cm
                         << "x" << cn;
  }
  if (getCAttr() == getAAttr() || getCAttr() == getBAttr()) {
    return emitOpError() << "the product " << getCAttr()
                         << " must not be one of its factors";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Sparse and sign compression (top-k, EF-SignSGD)
//===----------------------------------------------------------------------===//

LogicalResult AllGatherOp::verify() {
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  auto result = llvm::cast<RankedTensorType>(getResult().getType());
  if (input.getRank() != 1 || result.getRank() != 1 ||
      input.getElementType() != result.getElementType()) {
    return emitOpError() << "expected 1-D tensors of one element type, got "
                         << input << " and " << result;
  }
  int64_t n = input.getDimSize(0), gathered = result.getDimSize(0);
  if (n < 1 || gathered < n || gathered % n != 0) {
    return emitOpError() << "gathers " << n << " elements into " << gathered
                         << ": expected a positive multiple";
  }
  return success();
}

/// Elements of the flat vector a compressed bucket's gradients make (f32
/// states, each with a residual of its own type when `residuals` is set);
/// flat positions are i32, so the vector must stay below 2^31 elements.
static FailureOr<int64_t> bucketElements(Operation *op,
                                         SymbolTableCollection &symbols,
                                         ArrayAttr grads,
                                         ArrayAttr residuals) {
  int64_t total = 0;
  for (auto [i, name] : llvm::enumerate(grads)) {
    auto grad = llvm::cast<FlatSymbolRefAttr>(name);
    FailureOr<SmallVector<StateOp>> states =
        lookupCompressionStates(op, symbols, {grad});
    if (failed(states)) {
      return failure();
    }
    if (residuals && failed(verifyErrorPair(
                         op, symbols, grad,
                         llvm::cast<FlatSymbolRefAttr>(residuals[i])))) {
      return failure();
    }
    total += (*states)[0].getTensorType().getNumElements();
  }
  if (total >= (int64_t(1) << 31)) {
    return op->emitOpError() << "the bucket holds " << total
                             << " elements; i32 positions reach 2^31";
  }
  return total;
}

/// A compressed bucket's gradients, and as many residuals when given.
static LogicalResult verifyBucketLists(Operation *op, ArrayAttr grads,
                                       ArrayAttr residuals) {
  if (grads.empty()) {
    return op->emitOpError() << "expected at least one gradient";
  }
  if (residuals && residuals.size() != grads.size()) {
    return op->emitOpError() << "expected one residual per gradient, got "
                             << residuals.size() << " for " << grads.size();
  }
  return success();
}

/// Whether `a` and `b` are 1-D tensors of one length.
static bool samePairLength(Value a, Value b) {
  auto x = llvm::cast<RankedTensorType>(a.getType());
  auto y = llvm::cast<RankedTensorType>(b.getType());
  return x.getRank() == 1 && y.getRank() == 1 &&
         x.getDimSize(0) == y.getDimSize(0);
}

LogicalResult TopKCompressOp::verify() {
  if (failed(verifyBucketLists(*this, getGrads(), getResidualsAttr()))) {
    return failure();
  }
  if (!samePairLength(getValues(), getIndices()) ||
      getValues().getType().getDimSize(0) < 1) {
    return emitOpError() << "expected values and indices of one length k >= "
                            "1, got "
                         << getValues().getType() << " and "
                         << getIndices().getType();
  }
  return success();
}

LogicalResult
TopKCompressOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> n =
      bucketElements(*this, symbols, getGrads(), getResidualsAttr());
  if (failed(n)) {
    return failure();
  }
  int64_t k = getValues().getType().getDimSize(0);
  if (k > *n) {
    return emitOpError() << "keeps " << k << " entries of a bucket of " << *n;
  }
  return success();
}

LogicalResult SparseAverageOp::verify() {
  if (getGrads().empty()) {
    return emitOpError() << "expected at least one gradient";
  }
  if (!samePairLength(getValues(), getIndices())) {
    return emitOpError() << "expected values and indices of one length, got "
                         << getValues().getType() << " and "
                         << getIndices().getType();
  }
  if (!(getScale().convertToDouble() > 0.0)) {
    return emitOpError() << "scale must be positive, got "
                         << getScale().convertToDouble();
  }
  return success();
}

LogicalResult
SparseAverageOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return bucketElements(*this, symbols, getGrads(), ArrayAttr());
}

LogicalResult SignCompressOp::verify() {
  if (failed(verifyBucketLists(*this, getGrads(), getResidualsAttr()))) {
    return failure();
  }
  auto scaleType = RankedTensorType::get(
      {static_cast<int64_t>(getGrads().size())}, Float32Type::get(getContext()));
  if (getSigns().getType().getRank() != 1 || getScale().getType() != scaleType) {
    return emitOpError() << "expected 1-D signs and a " << scaleType
                         << " scale (one per gradient), got "
                         << getSigns().getType() << " and "
                         << getScale().getType();
  }
  return success();
}

LogicalResult
SignCompressOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> n =
      bucketElements(*this, symbols, getGrads(), getResidualsAttr());
  if (failed(n)) {
    return failure();
  }
  if (getSigns().getType().getDimSize(0) != (*n + 7) / 8) {
    return emitOpError() << "packs " << *n << " signs into "
                         << getSigns().getType().getDimSize(0)
                         << " bytes, expected " << (*n + 7) / 8;
  }
  return success();
}

LogicalResult SignAverageOp::verify() {
  if (getGrads().empty()) {
    return emitOpError() << "expected at least one gradient";
  }
  auto signs = getSigns().getType();
  auto scales = getScales().getType();
  auto members = static_cast<int64_t>(getGrads().size());
  if (signs.getRank() != 1 || scales.getRank() != 1 ||
      scales.getDimSize(0) < members ||
      scales.getDimSize(0) % members != 0 ||
      signs.getDimSize(0) % (scales.getDimSize(0) / members) != 0) {
    return emitOpError() << "expected 1-D signs and scales, one scale per "
                            "gradient and rank and a whole number of bytes "
                            "per rank, got "
                         << signs << " and " << scales;
  }
  return success();
}

LogicalResult SignAverageOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> n = bucketElements(*this, symbols, getGrads(), ArrayAttr());
  if (failed(n)) {
    return failure();
  }
  int64_t ranks = getScales().getType().getDimSize(0) /
                  static_cast<int64_t>(getGrads().size());
  int64_t perRank = getSigns().getType().getDimSize(0) / ranks;
  if (perRank != (*n + 7) / 8) {
    return emitOpError() << "holds " << perRank << " bytes of signs per rank "
                         << "for a bucket of " << *n << " elements, expected "
                         << (*n + 7) / 8;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Layer split across ranks
//===----------------------------------------------------------------------===//

LogicalResult SendOp::verify() {
  if (static_cast<int64_t>(getPeer()) < 0) {
    return emitOpError() << "peer rank " << getPeer() << " is negative";
  }
  if (!llvm::cast<RankedTensorType>(getValue().getType()).hasStaticShape()) {
    return emitOpError() << "sends need a static shape, got "
                         << getValue().getType();
  }
  return success();
}

LogicalResult RecvOp::verify() {
  if (static_cast<int64_t>(getPeer()) < 0) {
    return emitOpError() << "peer rank " << getPeer() << " is negative";
  }
  if (!llvm::cast<RankedTensorType>(getResult().getType()).hasStaticShape()) {
    return emitOpError() << "receives need a static shape, got "
                         << getResult().getType();
  }
  return success();
}

/// The pipeline_input state `name` as slots of `value`: [slots, ...value];
/// the scalar slot index.
static LogicalResult verifySlotAccess(Operation *op,
                                      SymbolTableCollection &symbols,
                                      FlatSymbolRefAttr name, Type value,
                                      Value slot) {
  FailureOr<StateOp> state = lookupState(op, symbols, name, Type());
  if (failed(state)) {
    return failure();
  }
  if (state->getKind() != StateKind::PipelineInput) {
    return op->emitOpError() << "state " << name
                             << " is not a pipeline_input";
  }
  if (llvm::cast<RankedTensorType>(slot.getType()).getRank() != 0) {
    return op->emitOpError() << "expected a scalar slot, got "
                             << slot.getType();
  }
  RankedTensorType type = state->getTensorType();
  auto tensor = llvm::cast<RankedTensorType>(value);
  if (type.getRank() != tensor.getRank() + 1 ||
      type.getShape().drop_front() != tensor.getShape() ||
      type.getElementType() != tensor.getElementType()) {
    return op->emitOpError() << "state " << name << " of type " << type
                             << " does not hold slots of " << value;
  }
  return success();
}

LogicalResult SlotWriteOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifySlotAccess(*this, symbols, getStateAttr(),
                          getValue().getType(), getSlot());
}

LogicalResult SlotReadOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifySlotAccess(*this, symbols, getStateAttr(),
                          getResult().getType(), getSlot());
}
