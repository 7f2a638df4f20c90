//===- PositionRows.cpp - tables computed row by row from positions -------===//
//
// The trace behind checkRowsFromPositions (PositionRows.h): each value is
// visited with the axis its T rows lie on. An operand whose extent there is
// 1 (or that lacks the axis, right-aligned as NumPy broadcasting aligns) is
// the same in every row, whatever computes it (inv_freq, a scaling factor);
// one with T rows must itself be computed row by row; the only leaf with
// rows is the constant of the positions. Any other op -- a reduction, a
// softmax, a slice, a gather, a matmul over the rows -- could mix rows or
// reorder them, and fails the check naming it.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/PositionRows.h"

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace tailor::graph {
namespace {

ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<ShapedType>(value.getType()).getShape();
}

/// The axis of the T rows when `shape` has only ones before it; -1 else.
int64_t leadingRowAxis(ArrayRef<int64_t> shape, int64_t t) {
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] != 1) {
      return shape[axis] == t ? static_cast<int64_t>(axis) : -1;
    }
  }
  return -1;
}

class RowTrace {
public:
  explicit RowTrace(int64_t t) : t(t) {}

  LogicalResult trace(Value value, int64_t axis);

  bool sawPositions = false;
  std::string why;

private:
  LogicalResult fail(Operation *op, const std::string &what) {
    why = what + (op ? " ('" + op->getName().getStringRef().str() + "')"
                     : std::string());
    return failure();
  }
  LogicalResult positions(arith::ConstantOp constant, int64_t axis);
  LogicalResult sameInEveryRow(Value value);
  LogicalResult elementwise(Operation *op, int64_t axis);
  LogicalResult reshaped(tg::ReshapeOp reshape, int64_t axis);

  int64_t t;
  llvm::DenseSet<std::pair<Value, int64_t>> done;
};

/// Whether `constant` holds the positions 0..T-1 along `axis`, with ones
/// on every other axis.
bool isPositions(arith::ConstantOp constant, int64_t t, int64_t axis) {
  auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
  ArrayRef<int64_t> shape = shapeOf(constant.getResult());
  if (!dense || axis >= static_cast<int64_t>(shape.size()) ||
      shape[axis] != t || dense.getNumElements() != t) {
    return false;
  }
  int64_t expected = 0;
  if (llvm::isa<FloatType>(dense.getElementType())) {
    return llvm::all_of(dense.getValues<APFloat>(), [&](const APFloat &v) {
      return v.convertToDouble() == static_cast<double>(expected++);
    });
  }
  if (llvm::isa<IntegerType>(dense.getElementType())) {
    return llvm::all_of(dense.getValues<APInt>(), [&](const APInt &v) {
      return v.getSExtValue() == expected++;
    });
  }
  return false;
}

/// A constant on the rows' path must be the positions 0..T-1 themselves.
LogicalResult RowTrace::positions(arith::ConstantOp constant, int64_t axis) {
  if (!isPositions(constant, t, axis)) {
    return fail(constant, "a constant that is not the positions 0.." +
                              std::to_string(t - 1));
  }
  sawPositions = true;
  return success();
}

/// An operand broadcast over the rows is the same in every row, but it
/// must not be computed from the positions either (a sum over them would
/// differ for a shorter example): fails if its computation reads them.
LogicalResult RowTrace::sameInEveryRow(Value value) {
  SmallVector<Value> stack = {value};
  llvm::DenseSet<Value> seen;
  while (!stack.empty()) {
    Value v = stack.pop_back_val();
    Operation *op = v.getDefiningOp();
    if (!op || !seen.insert(v).second) {
      continue;
    }
    if (auto constant = llvm::dyn_cast<arith::ConstantOp>(op)) {
      ArrayRef<int64_t> shape = shapeOf(constant.getResult());
      for (size_t axis = 0; axis < shape.size(); ++axis) {
        if (isPositions(constant, t, axis)) {
          return fail(value.getDefiningOp(),
                      "a value broadcast over the rows but computed from "
                      "the positions");
        }
      }
    }
    llvm::append_range(stack, op->getOperands());
  }
  return success();
}

/// NumPy broadcasting: operands right-aligned with the result.
LogicalResult RowTrace::elementwise(Operation *op, int64_t axis) {
  int64_t rank = shapeOf(op->getResult(0)).size();
  for (Value operand : op->getOperands()) {
    ArrayRef<int64_t> shape = shapeOf(operand);
    int64_t aligned = axis - (rank - static_cast<int64_t>(shape.size()));
    if (aligned < 0 || shape[aligned] == 1) {
      if (failed(sameInEveryRow(operand))) {
        return failure();
      }
      continue;
    }
    if (shape[aligned] != t || failed(trace(operand, aligned))) {
      return failure();
    }
  }
  return success();
}

LogicalResult RowTrace::reshaped(tg::ReshapeOp reshape, int64_t axis) {
  int64_t inputAxis = leadingRowAxis(shapeOf(reshape.getInput()), t);
  if (leadingRowAxis(shapeOf(reshape.getResult()), t) != axis ||
      inputAxis < 0) {
    return fail(reshape, "a reshape that does not keep rows whole");
  }
  return trace(reshape.getInput(), inputAxis);
}

LogicalResult RowTrace::trace(Value value, int64_t axis) {
  if (shapeOf(value)[axis] != t) {
    return fail(value.getDefiningOp(), "rows that are not the positions");
  }
  if (done.contains({value, axis})) {
    return success();
  }
  Operation *op = value.getDefiningOp();
  if (!op) {
    return fail(nullptr, "rows read from a function argument");
  }
  LogicalResult result = failure();
  if (auto constant = llvm::dyn_cast<arith::ConstantOp>(op)) {
    result = positions(constant, axis);
  } else if (llvm::isa<tg::NegOp, tg::AbsOp, tg::ExpOp, tg::LogOp, tg::SqrtOp,
                       tg::RsqrtOp, tg::ReciprocalOp, tg::SinOp, tg::CosOp,
                       tg::CastOp, tg::AddOp, tg::SubOp, tg::MulOp, tg::DivOp,
                       tg::PowOp, tg::MaxOp, tg::MinOp, tg::BroadcastOp>(op)) {
    result = elementwise(op, axis);
  } else if (auto concat = llvm::dyn_cast<tg::ConcatOp>(op)) {
    result = static_cast<int64_t>(concat.getAxis()) == axis
                 ? fail(op, "a concat along the positions")
                 : elementwise(op, axis);
  } else if (auto reshape = llvm::dyn_cast<tg::ReshapeOp>(op)) {
    result = reshaped(reshape, axis);
  } else if (auto transpose = llvm::dyn_cast<tg::TransposeOp>(op)) {
    result = trace(transpose.getInput(), transpose.getPermutation()[axis]);
  } else {
    result = fail(op, "an op that may mix rows");
  }
  if (succeeded(result)) {
    done.insert({value, axis});
  }
  return result;
}

} // namespace

LogicalResult checkRowsFromPositions(Value table, int64_t t,
                                     std::string &why) {
  RowTrace rows(t);
  if (failed(rows.trace(table, 0))) {
    why = "its rows are not computed from the positions alone: " + rows.why;
    return failure();
  }
  if (!rows.sawPositions) {
    why = "it does not depend on the positions";
    return failure();
  }
  return success();
}

/// The values computed from a function's arguments (the input data).
static llvm::DenseSet<Value> dataDependentValues(ModuleOp module) {
  llvm::DenseSet<Value> data;
  module.walk([&](func::FuncOp function) {
    for (Value argument : function.getArguments()) {
      data.insert(argument);
    }
    function.walk([&](Operation *op) {
      if (llvm::any_of(op->getOperands(),
                       [&](Value v) { return data.contains(v); })) {
        data.insert(op->result_begin(), op->result_end());
      }
    });
  });
  return data;
}

/// Whether a position operand: tg.rope's cos or sin, tg.attention's bias.
static bool isPositionOperand(OpOperand &use) {
  Operation *user = use.getOwner();
  if (llvm::isa<tg::RopeOp>(user)) {
    return use.getOperandNumber() == 1 || use.getOperandNumber() == 2;
  }
  auto attention = llvm::dyn_cast<tg::AttentionOp>(user);
  return attention && attention.getBias() == use.get();
}

/// Whether `start` reaches position operands and nothing that reads data.
static bool reachesOnlyPositions(Value start,
                                 const llvm::DenseSet<Value> &data) {
  bool reached = false;
  SmallVector<Value> worklist = {start};
  llvm::DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second) {
      continue;
    }
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (isPositionOperand(use)) {
        reached = true;
        continue;
      }
      if (user->getNumResults() == 0 ||
          llvm::any_of(user->getOperands(),
                       [&](Value v) { return data.contains(v); })) {
        return false;
      }
      llvm::append_range(worklist, user->getResults());
    }
  }
  return reached;
}

llvm::StringSet<> positionOnlyParameters(ModuleOp module) {
  llvm::DenseSet<Value> data = dataDependentValues(module);
  llvm::StringMap<bool> onlyPositions;
  module.walk([&](tg::ParamRefOp ref) {
    bool only = reachesOnlyPositions(ref.getResult(), data);
    auto [it, inserted] = onlyPositions.try_emplace(ref.getName(), only);
    if (!inserted) {
      it->second = it->second && only;
    }
  });
  llvm::StringSet<> names;
  for (const auto &entry : onlyPositions) {
    if (entry.second) {
      names.insert(entry.first());
    }
  }
  return names;
}

} // namespace tailor::graph
