//===- GradientRules.cpp - vector-Jacobian products of tg ops -------------===//
//
// One rule per differentiable tg op. Elementwise rules are written with tg
// ops (they fuse later); ops whose gradient is a kernel of its own (linear
// weights, norms, attention, embedding, cross-entropy, softmax, rope, SiLU,
// GELU, slices) get a dedicated gradient op. Rules reuse the primal's saved
// inputs or outputs, whichever is cheaper (exp, tanh, sigmoid use y).
//
//===----------------------------------------------------------------------===//

#include "passes/graph/GradientRules.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/TypeSwitch.h"

#include <numeric>

using namespace mlir;
using namespace tailor;

namespace tailor::graph {

static RankedTensorType tensorTypeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

static bool isFloatTensor(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return type && llvm::isa<FloatType>(type.getElementType());
}

Value zerosOf(OpBuilder &builder, Location loc, RankedTensorType type) {
  auto scalarType = RankedTensorType::get({}, type.getElementType());
  Value zero = arith::ConstantOp::create(
      builder, loc, DenseElementsAttr::get(
                        scalarType, builder.getZeroAttr(type.getElementType())));
  if (type.getRank() == 0) {
    return zero;
  }
  return tg::BroadcastOp::create(builder, loc, type, zero);
}

Value unbroadcast(OpBuilder &builder, Location loc, Value grad,
                  RankedTensorType target) {
  RankedTensorType type = tensorTypeOf(grad);
  if (type == target) {
    return grad;
  }
  ArrayRef<int64_t> from = type.getShape();
  ArrayRef<int64_t> to = target.getShape();
  int64_t lead = type.getRank() - target.getRank();
  SmallVector<int64_t> axes;
  SmallVector<int64_t> kept(from);
  for (int64_t i = 0; i < type.getRank(); ++i) {
    if (i < lead || (to[i - lead] == 1 && from[i] != 1)) {
      axes.push_back(i);
      kept[i] = 1;
    }
  }
  Value summed = grad;
  if (!axes.empty()) {
    summed = tg::ReduceSumOp::create(
        builder, loc, RankedTensorType::get(kept, type.getElementType()), grad,
        builder.getDenseI64ArrayAttr(axes), builder.getUnitAttr());
  }
  if (tensorTypeOf(summed) != target) {
    summed = tg::ReshapeOp::create(builder, loc, target, summed);
  }
  return summed;
}

namespace {
/// Emits elementwise arithmetic with NumPy broadcasting; scalars are rank-0
/// constants of the element type.
struct Emitter {
  OpBuilder &b;
  Location loc;

  RankedTensorType broadcastType(Value lhs, Value rhs, Type element = {}) {
    RankedTensorType l = tensorTypeOf(lhs), r = tensorTypeOf(rhs);
    FailureOr<tg::Shape> shape = tg::broadcastShapes(
        l.getShape(), r.getShape(),
        [&] { return emitError(loc) << "internal: shapes do not broadcast"; });
    return RankedTensorType::get(*shape, element ? element : l.getElementType());
  }
  Value scalar(double value, Value like) {
    Type element = tensorTypeOf(like).getElementType();
    auto type = RankedTensorType::get({}, element);
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
  }
  template <typename OpTy> Value binary(Value lhs, Value rhs) {
    return OpTy::create(b, loc, broadcastType(lhs, rhs), lhs, rhs);
  }
  template <typename OpTy> Value compare(Value lhs, Value rhs) {
    return OpTy::create(b, loc, broadcastType(lhs, rhs, b.getI1Type()), lhs,
                        rhs);
  }
  template <typename OpTy> Value unary(Value x) {
    return OpTy::create(b, loc, x.getType(), x);
  }
  Value add(Value l, Value r) { return binary<tg::AddOp>(l, r); }
  Value sub(Value l, Value r) { return binary<tg::SubOp>(l, r); }
  Value mul(Value l, Value r) { return binary<tg::MulOp>(l, r); }
  Value div(Value l, Value r) { return binary<tg::DivOp>(l, r); }
  Value mul(Value l, double r) { return mul(l, scalar(r, l)); }
  /// `dy` where `mask`, zero elsewhere (broadcast to dy's shape).
  Value where(Value mask, Value dy) {
    return tg::SelectOp::create(b, loc, dy.getType(), mask, dy,
                                scalar(0.0, dy));
  }
};
} // namespace

bool hasGradientRule(Operation *op) {
  return llvm::isa<
      tg::NegOp, tg::AbsOp, tg::ExpOp, tg::LogOp, tg::SqrtOp, tg::RsqrtOp,
      tg::ReciprocalOp, tg::TanhOp, tg::SigmoidOp, tg::SiluOp, tg::ReluOp,
      tg::ErfOp, tg::SinOp, tg::CosOp, tg::GeluOp, tg::AddOp, tg::SubOp,
      tg::MulOp, tg::DivOp, tg::PowOp, tg::MaxOp, tg::MinOp, tg::SelectOp,
      tg::CastOp, tg::ReduceSumOp, tg::ReduceMeanOp, tg::ReduceMaxOp,
      tg::SoftmaxOp, tg::RMSNormOp, tg::LayerNormOp, tg::RopeOp,
      tg::AttentionOp, tg::EmbeddingOp, tg::CrossEntropyOp, tg::ReshapeOp,
      tg::BroadcastOp, tg::TransposeOp, tg::SliceOp, tg::ConcatOp,
      tg::SplitOp, tg::MatmulOp, tg::LinearOp, tg::DropoutOp,
      tg::GatherElementsOp, tg::ScatterElementsOp, tg::GatherNDOp,
      tg::ScatterNDOp, tg::CumsumOp, tg::ModOp, tg::SignOp>(op);
}

//===----------------------------------------------------------------------===//
// Gathers, scatters, cumsum, mod, sign
//===----------------------------------------------------------------------===//

namespace {
/// Gradients of the indexing ops: a gather's is a scatter-add of dy into
/// zeros, a scatter's reads dy back at the indices (updates) and masks the
/// overwritten elements (data, reduction none) or passes dy through (add).
/// Other scatter reductions and a float mod's divisor have no rule: they
/// fail naming the op.
struct IndexingGradients {
  OpBuilder &b;
  Location loc;
  ArrayRef<bool> needed;
  SmallVectorImpl<Value> &grads;

  bool wants(unsigned i) const { return i < needed.size() && needed[i]; }
  void set(unsigned i, Value grad) {
    if (wants(i)) {
      grads[i] = grad;
    }
  }
  tg::ScatterReductionAttr reduction(tg::ScatterReduction kind) {
    return tg::ScatterReductionAttr::get(b.getContext(), kind);
  }
  LogicalResult unsupported(Operation *op, StringRef why) {
    return op->emitError() << "cannot differentiate " << op->getName() << ": "
                           << why;
  }

  LogicalResult gatherElements(tg::GatherElementsOp op, Value dy) {
    if (!wants(0)) {
      return success();
    }
    auto data = tensorTypeOf(op.getData());
    set(0, tg::ScatterElementsOp::create(b, loc, data, zerosOf(b, loc, data),
                                         op.getIndices(), dy, op.getAxisAttr(),
                                         reduction(tg::ScatterReduction::Add)));
    return success();
  }

  LogicalResult gatherND(tg::GatherNDOp op, Value dy) {
    if (!wants(0)) {
      return success();
    }
    auto data = tensorTypeOf(op.getData());
    set(0, tg::ScatterNDOp::create(
               b, loc, data, zerosOf(b, loc, data), op.getIndices(), dy,
               reduction(tg::ScatterReduction::Add), op.getBatchDimsAttr()));
    return success();
  }

  /// Shared by both scatters: `gather` reads dy at the indices, `maskData`
  /// scatters zeros into dy where updates landed.
  template <typename GatherFn, typename MaskFn>
  LogicalResult scatter(Operation *op, tg::ScatterReduction kind, Value dy,
                        GatherFn &&gather, MaskFn &&maskData) {
    if (kind != tg::ScatterReduction::None &&
        kind != tg::ScatterReduction::Add) {
      if (wants(0) || wants(2)) {
        return unsupported(op, "only scatters with reduction none or add have "
                               "a gradient rule");
      }
      return success();
    }
    if (wants(0)) {
      set(0, kind == tg::ScatterReduction::Add ? dy : maskData());
    }
    if (wants(2)) {
      set(2, gather());
    }
    return success();
  }
};
} // namespace

/// Gradients of the indexing ops; `dy` is the result's cotangent.
static LogicalResult emitIndexingGradient(OpBuilder &b, Operation *op, Value dy,
                                          ArrayRef<bool> needed,
                                          SmallVectorImpl<Value> &grads) {
  Location loc = op->getLoc();
  IndexingGradients g{b, loc, needed, grads};
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tg::GatherElementsOp gather) {
        return g.gatherElements(gather, dy);
      })
      .Case([&](tg::GatherNDOp gather) { return g.gatherND(gather, dy); })
      .Case([&](tg::ScatterElementsOp scatter) {
        auto updates = tensorTypeOf(scatter.getUpdates());
        return g.scatter(
            op, scatter.getReduction(), dy,
            [&] {
              return tg::GatherElementsOp::create(b, loc, updates, dy,
                                                  scatter.getIndices(),
                                                  scatter.getAxisAttr());
            },
            [&] {
              return tg::ScatterElementsOp::create(
                  b, loc, dy.getType(), dy, scatter.getIndices(),
                  zerosOf(b, loc, updates), scatter.getAxisAttr(),
                  g.reduction(tg::ScatterReduction::None));
            });
      })
      .Case([&](tg::ScatterNDOp scatter) {
        auto updates = tensorTypeOf(scatter.getUpdates());
        return g.scatter(
            op, scatter.getReduction(), dy,
            [&] {
              return tg::GatherNDOp::create(b, loc, updates, dy,
                                            scatter.getIndices(),
                                            scatter.getBatchDimsAttr());
            },
            [&] {
              return tg::ScatterNDOp::create(
                  b, loc, dy.getType(), dy, scatter.getIndices(),
                  zerosOf(b, loc, updates),
                  g.reduction(tg::ScatterReduction::None),
                  scatter.getBatchDimsAttr());
            });
      })
      .Case([&](tg::CumsumOp cumsum) {
        if (!g.wants(0)) {
          return success();
        }
        // The transpose of a running sum is the running sum the other way.
        auto grad = tg::CumsumOp::create(
            b, loc, dy.getType(), dy, cumsum.getAxisValue(),
            cumsum.getAxisAttr(), UnitAttr(), UnitAttr());
        grad.setExclusive(cumsum.getExclusive());
        grad.setReverse(!cumsum.getReverse());
        g.set(0, grad);
        return success();
      })
      .Case([&](tg::ModOp mod) -> LogicalResult {
        // a - b * floor(a / b) (or trunc): d/da is 1 almost everywhere.
        if (g.wants(1)) {
          return g.unsupported(op, "there is no gradient rule for its "
                                   "divisor");
        }
        if (g.wants(0)) {
          g.set(0, unbroadcast(b, loc, dy, tensorTypeOf(mod.getLhs())));
        }
        return success();
      })
      .Case([&](tg::SignOp) { return success(); }) // zero almost everywhere
      .Default([&](Operation *) {
        return op->emitError()
               << "internal: " << op->getName() << " is not an indexing op";
      });
}

/// `dy` broadcast back to the shape of a reduction's input, as if the
/// reduced dims had been kept.
static Value expandReduced(OpBuilder &b, Location loc, Value dy,
                           RankedTensorType input, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(input.getShape());
  for (int64_t axis : axes) {
    kept[axis] = 1;
  }
  auto keptType = RankedTensorType::get(kept, input.getElementType());
  Value reshaped = dy;
  if (tensorTypeOf(dy) != keptType) {
    reshaped = tg::ReshapeOp::create(b, loc, keptType, dy);
  }
  if (keptType == input) {
    return reshaped;
  }
  return tg::BroadcastOp::create(b, loc, input, reshaped);
}

/// Swaps the last two dims.
static Value transposeLast2(OpBuilder &b, Location loc, Value value) {
  RankedTensorType type = tensorTypeOf(value);
  int64_t rank = type.getRank();
  SmallVector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[rank - 1], shape[rank - 2]);
  return tg::TransposeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), value,
      b.getDenseI64ArrayAttr(perm));
}

static Value matmul(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  FailureOr<tg::Shape> shape = tg::matmulShape(
      tensorTypeOf(lhs).getShape(), tensorTypeOf(rhs).getShape(),
      [&] { return emitError(loc) << "internal: matmul shapes"; });
  return tg::MatmulOp::create(
      b, loc, RankedTensorType::get(*shape, tensorTypeOf(lhs).getElementType()),
      lhs, rhs);
}

//===----------------------------------------------------------------------===//
// One rule per op kind
//===----------------------------------------------------------------------===//

namespace {
/// The rules of the non-indexing ops, one `rule` overload per op kind. Each
/// reads the op's first operand `x`, first result `y` and the first result's
/// cotangent `dy`, and records operand cotangents with `set`, which skips
/// those not needed and sums away broadcast dims.
struct OpGradients {
  OpBuilder &b;
  Location loc;
  Emitter e;
  Operation *op;
  ArrayRef<Value> resultGrads;
  ArrayRef<bool> needed;
  SmallVectorImpl<Value> &operandGrads;
  Value dy, x, y;

  RankedTensorType operandType(unsigned i) {
    return tensorTypeOf(op->getOperand(i));
  }
  void set(unsigned i, Value grad) {
    if (i < needed.size() && needed[i] && grad) {
      operandGrads[i] = unbroadcast(b, loc, grad, operandType(i));
    }
  }
  LogicalResult unsupported(StringRef what) {
    return op->emitError() << "cannot differentiate " << op->getName()
                           << " with respect to its " << what;
  }

  // Elementwise unary math.
  LogicalResult rule(tg::NegOp) {
    set(0, e.unary<tg::NegOp>(dy));
    return success();
  }
  LogicalResult rule(tg::AbsOp) {
    // sign(x), with 0 at 0 as torch.abs's gradient.
    Value positive = e.where(e.compare<tg::GtOp>(x, e.scalar(0, x)), dy);
    Value negative = e.where(e.compare<tg::LtOp>(x, e.scalar(0, x)), dy);
    set(0, e.sub(positive, negative));
    return success();
  }
  LogicalResult rule(tg::ExpOp) {
    set(0, e.mul(dy, y));
    return success();
  }
  LogicalResult rule(tg::LogOp) {
    set(0, e.div(dy, x));
    return success();
  }
  LogicalResult rule(tg::SqrtOp) {
    set(0, e.div(e.mul(dy, 0.5), y));
    return success();
  }
  LogicalResult rule(tg::RsqrtOp) {
    // d(x^-1/2) = -1/2 x^-3/2 = -1/2 y^3.
    set(0, e.mul(e.mul(dy, -0.5), e.mul(e.mul(y, y), y)));
    return success();
  }
  LogicalResult rule(tg::ReciprocalOp) {
    set(0, e.mul(e.mul(dy, -1.0), e.mul(y, y)));
    return success();
  }
  LogicalResult rule(tg::TanhOp) {
    set(0, e.mul(dy, e.sub(e.scalar(1, y), e.mul(y, y))));
    return success();
  }
  LogicalResult rule(tg::SigmoidOp) {
    set(0, e.mul(dy, e.mul(y, e.sub(e.scalar(1, y), y))));
    return success();
  }
  LogicalResult rule(tg::ErfOp) {
    Value gauss = e.unary<tg::ExpOp>(e.mul(e.mul(x, x), -1.0));
    set(0, e.mul(e.mul(dy, 2.0 / std::sqrt(M_PI)), gauss));
    return success();
  }
  LogicalResult rule(tg::SinOp) {
    set(0, e.mul(dy, e.unary<tg::CosOp>(x)));
    return success();
  }
  LogicalResult rule(tg::CosOp) {
    set(0, e.mul(dy, e.mul(e.unary<tg::SinOp>(x), -1.0)));
    return success();
  }

  // Activations.
  LogicalResult rule(tg::SiluOp) {
    set(0, tg::SiluGradOp::create(b, loc, x.getType(), x, dy));
    return success();
  }
  LogicalResult rule(tg::GeluOp gelu) {
    set(0, tg::GeluGradOp::create(b, loc, x.getType(), x, dy,
                                  gelu.getApproximationAttr()));
    return success();
  }
  LogicalResult rule(tg::ReluOp) {
    set(0, e.where(e.compare<tg::GtOp>(x, e.scalar(0, x)), dy));
    return success();
  }

  // Elementwise binary and ternary.
  LogicalResult rule(tg::AddOp) {
    set(0, dy);
    set(1, dy);
    return success();
  }
  LogicalResult rule(tg::SubOp) {
    set(0, dy);
    if (needed[1]) {
      set(1, e.unary<tg::NegOp>(dy));
    }
    return success();
  }
  LogicalResult rule(tg::MulOp mul) {
    if (needed[0]) {
      set(0, e.mul(dy, mul.getRhs()));
    }
    if (needed[1]) {
      set(1, e.mul(dy, mul.getLhs()));
    }
    return success();
  }
  LogicalResult rule(tg::DivOp div) {
    Value g = e.div(dy, div.getRhs());
    set(0, g);
    if (needed[1]) {
      set(1, e.unary<tg::NegOp>(e.mul(g, y)));
    }
    return success();
  }
  LogicalResult rule(tg::PowOp pow) {
    Value a = pow.getLhs(), p = pow.getRhs();
    if (needed[0]) {
      Value lowered = e.binary<tg::PowOp>(a, e.sub(p, e.scalar(1, p)));
      set(0, e.mul(dy, e.mul(p, lowered)));
    }
    if (needed[1]) {
      set(1, e.mul(dy, e.mul(y, e.unary<tg::LogOp>(a))));
    }
    return success();
  }
  LogicalResult rule(tg::MaxOp max) { return minMax(max, /*isMax=*/true); }
  LogicalResult rule(tg::MinOp min) { return minMax(min, /*isMax=*/false); }
  LogicalResult minMax(Operation *minmax, bool isMax) {
    // The winner takes dy; ties split it evenly (torch.maximum/minimum).
    Value a = minmax->getOperand(0), c = minmax->getOperand(1);
    Value aWins = isMax ? e.compare<tg::GtOp>(a, c) : e.compare<tg::LtOp>(a, c);
    Value cWins = isMax ? e.compare<tg::LtOp>(a, c) : e.compare<tg::GtOp>(a, c);
    Value half = e.where(e.compare<tg::EqOp>(a, c), e.mul(dy, 0.5));
    if (needed[0]) {
      set(0, e.add(e.where(aWins, dy), half));
    }
    if (needed[1]) {
      set(1, e.add(e.where(cWins, dy), half));
    }
    return success();
  }
  LogicalResult rule(tg::SelectOp select) {
    Value zero = e.scalar(0, dy);
    if (needed[1]) {
      set(1, tg::SelectOp::create(b, loc, dy.getType(), select.getCondition(),
                                  dy, zero));
    }
    if (needed[2]) {
      set(2, tg::SelectOp::create(b, loc, dy.getType(), select.getCondition(),
                                  zero, dy));
    }
    return success();
  }
  LogicalResult rule(tg::CastOp) {
    set(0, tg::CastOp::create(b, loc, x.getType(), dy));
    return success();
  }

  // Reductions.
  LogicalResult rule(tg::ReduceSumOp sum) { return sumOrMean(sum); }
  LogicalResult rule(tg::ReduceMeanOp mean) { return sumOrMean(mean); }
  LogicalResult sumOrMean(Operation *reduce) {
    auto axes = reduce->getAttrOfType<DenseI64ArrayAttr>("axes");
    Value g = expandReduced(b, loc, dy, operandType(0), axes.asArrayRef());
    if (llvm::isa<tg::ReduceMeanOp>(reduce)) {
      int64_t count = 1;
      for (int64_t axis : axes.asArrayRef()) {
        count *= operandType(0).getDimSize(axis);
      }
      g = e.mul(g, 1.0 / static_cast<double>(count));
    }
    set(0, g);
    return success();
  }
  LogicalResult rule(tg::ReduceMaxOp reduce) {
    // Ties share the gradient evenly (torch.amax).
    ArrayRef<int64_t> axes = reduce.getAxes();
    RankedTensorType input = operandType(0);
    Value maxima = expandReduced(b, loc, y, input, axes);
    Value mask = e.compare<tg::EqOp>(x, maxima);
    Value ones = tg::CastOp::create(b, loc, input, mask);
    SmallVector<int64_t> kept(input.getShape());
    for (int64_t axis : axes) {
      kept[axis] = 1;
    }
    Value count = tg::ReduceSumOp::create(
        b, loc, RankedTensorType::get(kept, input.getElementType()), ones,
        b.getDenseI64ArrayAttr(axes), b.getUnitAttr());
    Value share = e.div(expandReduced(b, loc, dy, input, axes), count);
    set(0, e.mul(share, ones));
    return success();
  }

  // Ops whose gradient is a kernel of its own.
  LogicalResult rule(tg::SoftmaxOp softmax) {
    set(0, tg::SoftmaxGradOp::create(b, loc, y.getType(), y, dy,
                                     softmax.getAxisAttr()));
    return success();
  }
  LogicalResult rule(tg::RMSNormOp norm) {
    auto grad = tg::RMSNormGradOp::create(
        b, loc, x.getType(), norm.getWeight().getType(), dy, x,
        norm.getWeight(), norm.getEpsilonAttr());
    set(0, grad.getInputGrad());
    set(1, grad.getWeightGrad());
    return success();
  }
  LogicalResult rule(tg::LayerNormOp norm) {
    Type weightType = norm.getWeight().getType();
    auto grad = tg::LayerNormGradOp::create(b, loc, x.getType(), weightType,
                                            weightType, dy, x, norm.getWeight(),
                                            norm.getEpsilonAttr());
    set(0, grad.getInputGrad());
    set(1, grad.getWeightGrad());
    if (norm.getBias()) {
      set(2, grad.getBiasGrad());
    }
    return success();
  }
  LogicalResult rule(tg::RopeOp rope) {
    if (needed[1] || needed[2]) {
      return unsupported("cos/sin tables");
    }
    set(0, tg::RopeGradOp::create(b, loc, x.getType(), dy, rope.getCos(),
                                  rope.getSin(), rope.getInterleavedAttr()));
    return success();
  }
  LogicalResult rule(tg::AttentionOp attention) {
    // The additive bias is read again by the backward, not
    // differentiated (operand 3 when present).
    if (attention.getBias() && needed.size() > 3 && needed[3]) {
      return unsupported("additive bias (no kernel computes its gradient)");
    }
    auto grad = tg::AttentionGradOp::create(
        b, loc, attention.getQuery().getType(), attention.getKey().getType(),
        attention.getValue().getType(), dy, attention.getQuery(),
        attention.getKey(), attention.getValue(), attention.getBias(),
        attention.getPositions(), attention.getCausalAttr(),
        attention.getScaleAttr(),
        attention.getWindowAttr(), attention.getSoftcapAttr(),
        attention.getAlibiSlopesAttr());
    set(0, grad.getQueryGrad());
    set(1, grad.getKeyGrad());
    set(2, grad.getValueGrad());
    return success();
  }
  LogicalResult rule(tg::EmbeddingOp embedding) {
    set(0, tg::EmbeddingGradOp::create(b, loc, embedding.getTable().getType(),
                                       dy, embedding.getIds()));
    return success();
  }
  LogicalResult rule(tg::CrossEntropyOp loss) {
    set(0, tg::CrossEntropyGradOp::create(b, loc, loss.getLogits().getType(),
                                          loss.getLogits(), loss.getLabels(),
                                          dy, loss.getIgnoreIndexAttr(),
                                          loss.getReductionAttr()));
    return success();
  }
  LogicalResult rule(tg::DropoutOp dropout) {
    set(0, tg::DropoutOp::create(b, loc, x.getType(), dy, dropout.getSeed(),
                                 dropout.getPAttr(), dropout.getSaltAttr()));
    return success();
  }

  // Shape ops.
  LogicalResult rule(tg::ReshapeOp) {
    set(0, tg::ReshapeOp::create(b, loc, x.getType(), dy));
    return success();
  }
  LogicalResult rule(tg::BroadcastOp) {
    set(0, dy);
    return success();
  }
  LogicalResult rule(tg::TransposeOp transpose) {
    ArrayRef<int64_t> perm = transpose.getPermutation();
    // A weight stored as W^T (TorchScript's pre-transposed MatMul inputs)
    // reaches its linear through this transpose: its gradient is the weight
    // gradient with the operands swapped, x^T dy, made in the stored layout
    // rather than made as dy^T x and transposed (a second buffer the size of
    // the weight, and a pass over it). The unswapped op, left unused, is
    // removed by canonicalization.
    if (perm.size() == 2 && perm[0] == 1 && perm[1] == 0) {
      if (auto weightGrad = dy.getDefiningOp<tg::LinearWeightGradOp>()) {
        set(0, tg::LinearWeightGradOp::create(b, loc, x.getType(),
                                              weightGrad.getInput(),
                                              weightGrad.getOutputGrad()));
        return success();
      }
    }
    SmallVector<int64_t> inverse(perm.size());
    for (auto [i, p] : llvm::enumerate(perm)) {
      inverse[p] = static_cast<int64_t>(i);
    }
    set(0, tg::TransposeOp::create(b, loc, x.getType(), dy,
                                   b.getDenseI64ArrayAttr(inverse)));
    return success();
  }
  LogicalResult rule(tg::SliceOp slice) {
    set(0,
        tg::SliceGradOp::create(b, loc, x.getType(), dy, slice.getStartsAttr(),
                                slice.getStepsAttr()));
    return success();
  }
  LogicalResult rule(tg::ConcatOp concat) {
    int64_t axis = static_cast<int64_t>(concat.getAxis());
    int64_t offset = 0;
    RankedTensorType whole = tensorTypeOf(y);
    for (auto [i, piece] : llvm::enumerate(concat.getInputs())) {
      RankedTensorType type = tensorTypeOf(piece);
      if (needed[i]) {
        SmallVector<int64_t> starts(whole.getRank(), 0);
        SmallVector<int64_t> ends(whole.getShape());
        SmallVector<int64_t> steps(whole.getRank(), 1);
        starts[axis] = offset;
        ends[axis] = offset + type.getDimSize(axis);
        set(i, tg::SliceOp::create(b, loc, type, dy,
                                   b.getDenseI64ArrayAttr(starts),
                                   b.getDenseI64ArrayAttr(ends),
                                   b.getDenseI64ArrayAttr(steps)));
      }
      offset += type.getDimSize(axis);
    }
    return success();
  }
  LogicalResult rule(tg::SplitOp split) {
    SmallVector<Value> pieces;
    for (auto [result, grad] : llvm::zip(split.getResults(), resultGrads)) {
      pieces.push_back(grad ? grad : zerosOf(b, loc, tensorTypeOf(result)));
    }
    set(0,
        tg::ConcatOp::create(b, loc, x.getType(), pieces, split.getAxisAttr()));
    return success();
  }

  // Matrix products.
  LogicalResult rule(tg::MatmulOp mm) {
    if (needed[0]) {
      set(0, matmul(b, loc, dy, transposeLast2(b, loc, mm.getRhs())));
    }
    if (needed[1]) {
      set(1, matmul(b, loc, transposeLast2(b, loc, mm.getLhs()), dy));
    }
    return success();
  }
  LogicalResult rule(tg::LinearOp linear) {
    Value weight = linear.getWeight();
    if (needed[0]) {
      // dx = dy W: a linear layer whose weight is W^T (the lowering
      // reads W in place instead of transposing it).
      RankedTensorType w = tensorTypeOf(weight);
      auto wt = RankedTensorType::get({w.getDimSize(1), w.getDimSize(0)},
                                      w.getElementType());
      Value transposed = tg::TransposeOp::create(
          b, loc, wt, weight, b.getDenseI64ArrayAttr({1, 0}));
      SmallVector<int64_t> shape(tensorTypeOf(dy).getShape());
      shape.back() = w.getDimSize(1);
      set(0, tg::LinearOp::create(
                 b, loc, RankedTensorType::get(shape, w.getElementType()), dy,
                 transposed, Value()));
    }
    if (needed[1]) {
      set(1, tg::LinearWeightGradOp::create(b, loc, weight.getType(), dy,
                                            linear.getInput()));
    }
    if (linear.getBias() && needed[2]) {
      set(2, dy); // unbroadcast sums the leading dims
    }
    return success();
  }

  /// An op with no rule: fine unless a float operand needs a gradient.
  LogicalResult noRule() {
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      if (needed[i] && isFloatTensor(operand)) {
        return unsupported("operand " + std::to_string(i));
      }
    }
    return success();
  }
};
} // namespace

LogicalResult emitGradient(OpBuilder &b, Operation *op,
                           ArrayRef<Value> resultGrads, ArrayRef<bool> needed,
                           SmallVectorImpl<Value> &operandGrads) {
  Location loc = op->getLoc();
  operandGrads.assign(op->getNumOperands(), Value());
  Value dy = resultGrads.empty() ? Value() : resultGrads.front();
  if (!dy && op->getNumResults() == 1) {
    return success();
  }
  Value x = op->getNumOperands() ? op->getOperand(0) : Value();
  Value y = op->getNumResults() ? op->getResult(0) : Value();
  OpGradients g{
      b, loc, Emitter{b, loc}, op, resultGrads, needed, operandGrads, dy, x, y};

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<tg::NegOp, tg::AbsOp, tg::ExpOp, tg::LogOp, tg::SqrtOp, tg::RsqrtOp,
            tg::ReciprocalOp, tg::TanhOp, tg::SigmoidOp, tg::SiluOp, tg::GeluOp,
            tg::ReluOp, tg::ErfOp, tg::SinOp, tg::CosOp, tg::AddOp, tg::SubOp,
            tg::MulOp, tg::DivOp, tg::PowOp, tg::MaxOp, tg::MinOp, tg::SelectOp,
            tg::CastOp, tg::ReduceSumOp, tg::ReduceMeanOp, tg::ReduceMaxOp,
            tg::SoftmaxOp, tg::RMSNormOp, tg::LayerNormOp, tg::RopeOp,
            tg::AttentionOp, tg::EmbeddingOp, tg::CrossEntropyOp, tg::ReshapeOp,
            tg::BroadcastOp, tg::TransposeOp, tg::SliceOp, tg::ConcatOp,
            tg::SplitOp, tg::MatmulOp, tg::LinearOp, tg::DropoutOp>(
          [&](auto kind) { return g.rule(kind); })
      .Case<tg::GatherElementsOp, tg::ScatterElementsOp, tg::GatherNDOp,
            tg::ScatterNDOp, tg::CumsumOp, tg::ModOp, tg::SignOp>(
          [&](Operation *) {
            return emitIndexingGradient(b, op, dy, needed, operandGrads);
          })
      .Default([&](Operation *) { return g.noRule(); });
}

} // namespace tailor::graph
