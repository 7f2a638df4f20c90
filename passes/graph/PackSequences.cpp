//===- PackSequences.cpp - per-example positions and document masking -----===//
//
// With `sample_packing: true` one sequence holds several examples. Each must
// see the positions it would see alone (0, 1, ... from its first token) and
// attend to its own tokens only, as varlen flash-attention users get. An
// export that takes `position_ids` itself computes its positions from that
// input: the trainer feeds the per-example positions there, and the pass
// only hands it to attention. Otherwise the forward function gains an
// input `position_ids: [B, T]` (i64), which:
//   - replaces the positions 0..T-1 the export baked in. The importer folds
//     Range/arange and everything computed from it, so what is left of them
//     is data: the rotary tables tg.rope reads (constants whose row t holds
//     the angles of position t) and the rows [0, T) of a learned position
//     embedding (GPT-2's wpe, a slice of the table added to the token
//     embeddings). A rotary table is recognized by its values: row 0 is the
//     angle 0 (sin 0, cos = the attention scaling) and every row is the one
//     before rotated by row 1, which is what "row t is position t" means
//     for angles t * inv_freq whatever the scaling scheme. A table that
//     dynamo's export computes at run time (cos and sin of inv_freq times a
//     constant of the positions) is recognized by its dataflow instead
//     (PositionRows.h). Both kinds, and the position rows, become
//     run-time gathers of their rows at position_ids (tg.embedding): the
//     same numbers an example gets on its own, since no position of a
//     packed example reaches T;
//   - becomes the `positions` of every tg.attention (document masking: a
//     query sees the keys of its own example only).
// Anything the pass cannot account for is an error rather than a packing
// that silently lets examples see each other or shifts their positions:
// no positions found, a rotary table that is not one of positions 0..T-1,
// a table read by something other than tg.rope, attention left unraised or
// not causal.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"
#include "passes/graph/PositionRows.h"
#include "passes/graph/RaiseUtils.h"

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace tailor::graph {
#define GEN_PASS_DEF_PACKSEQUENCESPASS
#include "passes/graph/Passes.h.inc"
} // namespace tailor::graph

using namespace mlir;
using namespace tailor;

namespace {

struct PackSequencesPass
    : public graph::impl::PackSequencesPassBase<PackSequencesPass> {
  using PackSequencesPassBase::PackSequencesPassBase;
  void runOnOperation() override;
};

ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<ShapedType>(value.getType()).getShape();
}

/// A [rows, columns] matrix of a constant's values, in double.
struct Table {
  int64_t rows = 0, columns = 0;
  std::vector<double> values;
  /// Relative precision of the element type the values were stored in.
  double epsilon = 0;
  double at(int64_t r, int64_t c) const { return values[r * columns + c]; }
};

/// The axis of the T rows when `shape` keeps them whole in row-major order
/// (ones, then t, then anything); -1 otherwise.
int64_t rowAxis(ArrayRef<int64_t> shape, int64_t t) {
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] != 1) {
      return shape[axis] == t ? static_cast<int64_t>(axis) : -1;
    }
  }
  return -1;
}

/// The constant behind `value`, read as T rows, through reshapes and
/// broadcasts that keep its rows whole (an interleaved table's widening);
/// fails with why.
FailureOr<Table> constantRows(Value value, int64_t t, std::string &why) {
  while (true) {
    int64_t axis = rowAxis(shapeOf(value), t);
    if (axis < 0) {
      why = "its rows are not the " + std::to_string(t) + " positions";
      return failure();
    }
    Operation *op = value.getDefiningOp();
    if (auto reshape = llvm::dyn_cast_or_null<tg::ReshapeOp>(op)) {
      value = reshape.getInput();
      continue;
    }
    if (auto broadcast = llvm::dyn_cast_or_null<tg::BroadcastOp>(op)) {
      // Only dims after the rows may grow: the row axis stays where it is.
      Value input = broadcast.getInput();
      if (shapeOf(input).size() != shapeOf(value).size() ||
          rowAxis(shapeOf(input), t) != axis) {
        why = "a broadcast moves or makes its rows";
        return failure();
      }
      value = input;
      continue;
    }
    break;
  }
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseFPElementsAttr>(constant.getValue())
                        : DenseFPElementsAttr();
  if (!dense) {
    why = "it is not computed from a constant (the export's positions)";
    return failure();
  }
  Table table;
  table.rows = t;
  table.columns = dense.getNumElements() / t;
  table.values.reserve(dense.getNumElements());
  for (const APFloat &v : dense.getValues<APFloat>()) {
    table.values.push_back(v.convertToDouble());
  }
  const llvm::fltSemantics &semantics =
      llvm::cast<FloatType>(dense.getElementType()).getFloatSemantics();
  table.epsilon = std::ldexp(1.0, 1 - static_cast<int>(
                                          llvm::APFloat::semanticsPrecision(
                                              semantics)));
  return table;
}

/// Whether `cos` and `sin` hold the rotary angles of positions 0..T-1,
/// scaled: row 0 is (a, 0) and row t + 1 is row t rotated by row 1, up to
/// the rounding of angles t * f in the stored precision; fails with why.
LogicalResult checkRotaryRows(const Table &cos, const Table &sin,
                              std::string &why) {
  if (cos.columns != sin.columns) {
    why = "its cos and sin tables differ in width";
    return failure();
  }
  auto message = [&](const char *what, int64_t row, int64_t column) {
    why = std::string(what) + " (row " + std::to_string(row) + ", column " +
          std::to_string(column) + ")";
    return failure();
  };
  for (int64_t c = 0; c < cos.columns; ++c) {
    double a = cos.at(0, c);
    if (!(a > 0) || std::abs(sin.at(0, c)) > 4 * cos.epsilon * a) {
      return message("row 0 is not the angle 0 of position 0", 0, c);
    }
    double c1 = cos.rows > 1 ? cos.at(1, c) : a;
    double s1 = cos.rows > 1 ? sin.at(1, c) : 0;
    for (int64_t t = 1; t + 1 < cos.rows; ++t) {
      // Each stored angle t * f is rounded on its own: the error grows with t.
      double tolerance =
          std::min(0.1, cos.epsilon * (80.0 + 8.0 * static_cast<double>(t))) *
          a;
      double ct = cos.at(t, c), st = sin.at(t, c);
      if (std::abs(cos.at(t + 1, c) - (ct * c1 - st * s1) / a) > tolerance ||
          std::abs(sin.at(t + 1, c) - (st * c1 + ct * s1) / a) > tolerance) {
        return message("row t + 1 is not row t advanced by one position", t + 1,
                       c);
      }
    }
  }
  return success();
}

/// Whether `value` is rows [0, t) of a parameter table [P, D], in order
/// (GPT-2's wpe gathered at arange(t), which import and canonicalization
/// turn into a slice), seen through a reshape; returns the table.
Value positionEmbeddingTable(Value value, int64_t t) {
  if (auto reshape = value.getDefiningOp<tg::ReshapeOp>()) {
    value = reshape.getInput();
  }
  auto slice = value.getDefiningOp<tg::SliceOp>();
  if (!slice || !slice.getInput().getDefiningOp<tg::ParamRefOp>()) {
    return nullptr;
  }
  ArrayRef<int64_t> table = shapeOf(slice.getInput());
  if (table.size() != 2 ||
      slice.getStarts() != ArrayRef<int64_t>({0, 0}) ||
      slice.getSteps() != ArrayRef<int64_t>({1, 1}) ||
      slice.getEnds() != ArrayRef<int64_t>({t, table[1]})) {
    return nullptr;
  }
  return slice.getInput();
}

/// The pass's work on one function.
class Packer {
public:
  Packer(func::FuncOp func) : func(func), builder(func.getContext()) {}
  LogicalResult run();

private:
  LogicalResult findAttention();
  /// The function's own `position_ids` input ([B, T] i64), or null.
  Value givenPositionIds();
  void addPositionIds();
  LogicalResult checkPositionTables(Value cos, Value sin, std::string &why);
  LogicalResult replaceRotaryTables(bool &found);
  LogicalResult replacePositionEmbeddings(bool &found);
  /// `table` gathered at position_ids: [B, T, D].
  Value gather(Value table, Location loc);

  func::FuncOp func;
  OpBuilder builder;
  SmallVector<tg::AttentionOp> attentions;
  int64_t batch = 0, seq = 0;
  Value positionIds;
};

Value Packer::givenPositionIds() {
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, "tg.name");
    Value arg = func.getArgument(i);
    if (name && name.getValue() == "position_ids" &&
        shapeOf(arg) == ArrayRef<int64_t>({batch, seq}) &&
        getElementTypeOrSelf(arg.getType()).isInteger(64)) {
      return arg;
    }
  }
  return nullptr;
}

LogicalResult Packer::findAttention() {
  if (func->hasAttr(tg::TGDialect::kUnraisedAttentionAttrName)) {
    return func.emitError()
           << "sample packing needs every attention raised to tg.attention "
              "(to mask it per example), but @"
           << func.getSymName() << " has attention left as matmul/softmax ("
           << tg::TGDialect::kUnraisedAttentionAttrName << ")";
  }
  func.walk([&](tg::AttentionOp op) { attentions.push_back(op); });
  if (attentions.empty()) {
    return func.emitError() << "sample packing found no tg.attention in @"
                            << func.getSymName() << " to mask per example";
  }
  for (tg::AttentionOp op : attentions) {
    ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
    if (!op.getCausal()) {
      return op.emitError() << "sample packing needs causal attention: a "
                               "non-causal one cannot keep examples apart";
    }
    if (op.getPositions()) {
      return op.emitError() << "attention already has positions (was "
                               "tailor-pack-sequences run twice?)";
    }
    if (ShapedType::isDynamicShape(q) || q[2] != k[2] ||
        (batch && (q[0] != batch || q[2] != seq))) {
      return op.emitError()
             << "sample packing needs static attention over one sequence "
                "(query rows = keys, the same [batch, seq] everywhere), got "
                "query "
             << q[0] << "x" << q[2] << " and " << k[2] << " keys";
    }
    batch = q[0];
    seq = q[2];
  }
  return success();
}

void Packer::addPositionIds() {
  Block &body = func.getBody().front();
  auto type = RankedTensorType::get({batch, seq}, builder.getI64Type());
  positionIds = body.addArgument(type, func.getLoc());
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i + 1 < body.getNumArguments(); ++i) {
    argAttrs.push_back(func.getArgAttrDict(i));
  }
  argAttrs.push_back(builder.getDictionaryAttr(
      {builder.getNamedAttr("tg.name", builder.getStringAttr("position_ids"))}));
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 func.getResultTypes()));
  func.setAllArgAttrs(argAttrs);
}

Value Packer::gather(Value table, Location loc) {
  ArrayRef<int64_t> shape = shapeOf(table);
  auto element = llvm::cast<ShapedType>(table.getType()).getElementType();
  builder.setInsertionPointAfterValue(table);
  if (auto arg = llvm::dyn_cast<BlockArgument>(table)) {
    builder.setInsertionPointToStart(arg.getOwner());
  }
  return tg::EmbeddingOp::create(
      builder, loc, RankedTensorType::get({batch, seq, shape[1]}, element),
      table, positionIds);
}

/// Whether row t of `cos` and `sin` is position t's: constants whose
/// values say so (TorchScript exports), or tables computed at run time from
/// the positions 0..T-1 row by row (dynamo's, PositionRows.h).
LogicalResult Packer::checkPositionTables(Value cos, Value sin,
                                          std::string &why) {
  std::string constantWhy;
  FailureOr<Table> cosRows = constantRows(cos, seq, constantWhy);
  FailureOr<Table> sinRows = succeeded(cosRows)
                                 ? constantRows(sin, seq, constantWhy)
                                 : FailureOr<Table>();
  if (succeeded(sinRows)) {
    return checkRotaryRows(*cosRows, *sinRows, why);
  }
  std::string computedWhy;
  if (succeeded(graph::checkRowsFromPositions(cos, seq, computedWhy)) &&
      succeeded(graph::checkRowsFromPositions(sin, seq, computedWhy))) {
    return success();
  }
  why = "as a constant: " + constantWhy + "; as computed: " + computedWhy;
  return failure();
}

LogicalResult Packer::replaceRotaryTables(bool &found) {
  llvm::DenseMap<Value, Value> gathered;
  SmallVector<tg::RopeOp> ropes;
  func.walk([&](tg::RopeOp op) { ropes.push_back(op); });
  for (tg::RopeOp rope : ropes) {
    std::string why;
    Value cos = rope.getCos(), sin = rope.getSin();
    if (shapeOf(cos).size() != 2 || shapeOf(cos)[0] != seq) {
      return rope.emitError()
             << "sample packing needs rotary tables of shape [" << seq
             << ", head_dim] (one row per position) to gather at "
                "position_ids, got "
             << cos.getType();
    }
    if (failed(checkPositionTables(cos, sin, why))) {
      return rope.emitError() << "sample packing cannot give this rotary "
                                 "embedding per-example positions: its "
                                 "cos/sin tables are not the rotary angles "
                                 "of positions 0.."
                              << seq - 1 << " (" << why << ")";
    }
    for (Value table : {cos, sin}) {
      if (gathered.count(table)) {
        continue;
      }
      for (Operation *user : table.getUsers()) {
        if (!llvm::isa<tg::RopeOp>(user)) {
          return user->emitError()
                 << "sample packing cannot give per-example positions to "
                    "this op: it reads a rotary table of positions 0.."
                 << seq - 1 << " outside tg.rope";
        }
      }
      gathered[table] = gather(table, rope.getLoc());
    }
    rope.getCosMutable().assign(gathered[cos]);
    rope.getSinMutable().assign(gathered[sin]);
    found = true;
  }
  return success();
}

LogicalResult Packer::replacePositionEmbeddings(bool &found) {
  SmallVector<std::pair<OpOperand *, Value>> uses;
  func.walk([&](tg::AddOp add) {
    for (OpOperand &operand : add->getOpOperands()) {
      Value other = add->getOperand(1 - operand.getOperandNumber());
      if (!other.getDefiningOp<tg::EmbeddingOp>()) {
        continue;
      }
      if (Value table = positionEmbeddingTable(operand.get(), seq)) {
        uses.push_back({&operand, table});
      }
    }
  });
  llvm::SetVector<Value> replaced;
  for (auto [operand, table] : uses) {
    auto add = llvm::cast<tg::AddOp>(operand->getOwner());
    replaced.insert(operand->get());
    if (shapeOf(add.getResult()) != ArrayRef<int64_t>({batch, seq,
                                                       shapeOf(table)[1]})) {
      return add.emitError() << "sample packing expected the position "
                                "embedding added to [" << batch << ", " << seq
                             << ", dim] token embeddings";
    }
    builder.setInsertionPoint(add);
    auto element = llvm::cast<ShapedType>(table.getType()).getElementType();
    auto lookup = tg::EmbeddingOp::create(
        builder, add.getLoc(),
        RankedTensorType::get({batch, seq, shapeOf(table)[1]}, element), table,
        positionIds);
    // The table's module, as raising names embeddings (wpe.weight -> wpe).
    if (std::optional<std::string> path = graph::modulePathFromParamName(
            table.getDefiningOp<tg::ParamRefOp>().getName())) {
      lookup->setAttr("tg.module", builder.getStringAttr(*path));
    }
    operand->set(lookup);
    found = true;
  }
  // Rows 0..T-1 read anywhere else would keep the packed positions.
  for (Value rows : replaced) {
    if (!rows.use_empty()) {
      return (*rows.user_begin())->emitError()
             << "sample packing cannot give per-example positions to this "
                "op: it reads the position embedding of positions 0.."
             << seq - 1;
    }
  }
  return success();
}

LogicalResult Packer::run() {
  if (failed(findAttention())) {
    return failure();
  }
  // An export that takes position_ids computes its positions from them
  // already (Hugging Face's forward with position_ids, optimum's decoder
  // exports): the trainer feeds the restarting positions there, and they
  // only need to reach attention.
  if (Value given = givenPositionIds()) {
    positionIds = given;
    for (tg::AttentionOp op : attentions) {
      op.getPositionsMutable().assign(positionIds);
    }
    return success();
  }
  addPositionIds();
  bool rotary = false, learned = false;
  if (failed(replaceRotaryTables(rotary)) ||
      failed(replacePositionEmbeddings(learned))) {
    return failure();
  }
  if (!rotary && !learned) {
    return func.emitError()
           << "sample packing found no positions in @" << func.getSymName()
           << " to restart per example: no tg.rope and no position "
              "embedding (rows 0.."
           << seq - 1
           << " of a table added to the token embeddings); packing without "
              "them would give examples the wrong positions";
  }
  for (tg::AttentionOp op : attentions) {
    op.getPositionsMutable().assign(positionIds);
  }
  return success();
}

} // namespace

void PackSequencesPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto func = module.lookupSymbol<func::FuncOp>(function);
  if (!func || func.isExternal() || !func.getBody().hasOneBlock()) {
    module.emitError() << "no single-block function @" << function
                       << " to pack sequences for";
    return signalPassFailure();
  }
  if (failed(Packer(func).run())) {
    signalPassFailure();
  }
}
