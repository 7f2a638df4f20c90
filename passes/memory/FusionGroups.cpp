//===- FusionGroups.cpp - chains of elementwise ops as one launch ---------===//
//
// A walk in block order: an elementwise op joins the group of the
// elementwise ops whose results it reads (all of one shape, f32), and a
// group runs where its last member is. That is legal when nothing between
// a member and the group's end needs the member's result, writes over it,
// or writes over what a member reads (the GEMM epilogues and in-place
// kernels Fusions.cpp decided). Groups are capped at kMaxMembers ops so a
// generated kernel stays small. Ops the other fusions took (folded scales
// and sums, in-place results) are never members.
//
// Cost: each op looks at its operands' groups and at the users of the
// members of those groups, which the cap bounds: linear in the block.
//
//===----------------------------------------------------------------------===//

#include "passes/memory/Fusions.h"

#include "runtime/cpu/FusedProgram.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tailor::memory {

namespace {

using runtime::fused::Op;

constexpr size_t kMaxMembers = 16;

/// The program op of a tg op that can join a group.
std::optional<Op> fusedOpOf(Operation *op) {
  auto gelu = [](tg::GeluApproximation approximation, Op exact, Op tanh) {
    return approximation == tg::GeluApproximation::Tanh ? tanh : exact;
  };
  return llvm::TypeSwitch<Operation *, std::optional<Op>>(op)
      .Case([](tg::NegOp) { return Op::Neg; })
      .Case([](tg::AbsOp) { return Op::Abs; })
      .Case([](tg::ExpOp) { return Op::Exp; })
      .Case([](tg::LogOp) { return Op::Log; })
      .Case([](tg::SqrtOp) { return Op::Sqrt; })
      .Case([](tg::RsqrtOp) { return Op::Rsqrt; })
      .Case([](tg::ReciprocalOp) { return Op::Reciprocal; })
      .Case([](tg::TanhOp) { return Op::Tanh; })
      .Case([](tg::SigmoidOp) { return Op::Sigmoid; })
      .Case([](tg::SiluOp) { return Op::Silu; })
      .Case([](tg::ReluOp) { return Op::Relu; })
      .Case([](tg::ErfOp) { return Op::Erf; })
      .Case([&](tg::GeluOp g) {
        return gelu(g.getApproximation(), Op::Gelu, Op::GeluTanh);
      })
      .Case([](tg::AddOp) { return Op::Add; })
      .Case([](tg::SubOp) { return Op::Sub; })
      .Case([](tg::MulOp) { return Op::Mul; })
      .Case([](tg::DivOp) { return Op::Div; })
      .Case([](tg::SiluGradOp) { return Op::SiluGrad; })
      .Case([&](tg::GeluGradOp g) {
        return gelu(g.getApproximation(), Op::GeluGrad, Op::GeluTanhGrad);
      })
      .Default([](Operation *) { return std::nullopt; });
}

bool isStaticF32(Type type) {
  auto ranked = llvm::dyn_cast<RankedTensorType>(type);
  return ranked && ranked.hasStaticShape() && ranked.getElementType().isF32();
}

/// An operand shape a fused kernel reads: the result's, or one repeating
/// along its leading dimensions (leading 1s dropped, a suffix of it).
bool readableAs(Type operand, Type result) {
  if (operand == result) {
    return true;
  }
  if (!isStaticF32(operand)) {
    return false;
  }
  ArrayRef<int64_t> in = llvm::cast<RankedTensorType>(operand).getShape();
  ArrayRef<int64_t> out = llvm::cast<RankedTensorType>(result).getShape();
  while (!in.empty() && in.front() == 1) {
    in = in.drop_front();
  }
  return in.size() <= out.size() && in == out.take_back(in.size());
}

/// The value of a one-element f32 constant, which a program inlines.
std::optional<float> inlineConstant(Value value) {
  std::optional<double> constant = oneElementConstant(value);
  if (!constant || !getElementTypeOrSelf(value.getType()).isF32()) {
    return std::nullopt;
  }
  return static_cast<float>(*constant);
}

class GroupBuilder {
public:
  GroupBuilder(Block &body, Fusions &fusions) : fusions(fusions) {
    recordOverwrites(body);
  }

  /// Puts `op` in a group if it can join one (or start one).
  void visit(Operation *op);
  /// The groups of two or more members, with their programs.
  void finish();

private:
  bool joinable(Operation *op) const;
  /// Whether `members` (ending with `last`) may run as one launch at `last`.
  bool legal(ArrayRef<Operation *> members, Operation *last) const;
  void recordOverwrites(Block &body);
  void writeProgram(FusionGroup &group) const;

  Fusions &fusions;
  /// Groups under construction; merged ones are left empty.
  std::vector<SmallVector<Operation *>> building;
  DenseMap<Operation *, unsigned> buildingOf;
  /// The earliest op that writes over the buffer of a value (through
  /// views): a GEMM adding into it, a kernel writing its result over it.
  DenseMap<Value, Operation *> overwrittenBy;
  /// The earliest GEMM that reads a value as its addend, before the sum
  /// that reads it in the IR.
  DenseMap<Value, Operation *> readEarlyBy;
};

void GroupBuilder::recordOverwrites(Block &body) {
  auto note = [&](Value value, Operation *writer) {
    Operation *&first = overwrittenBy[storageOwner(value)];
    if (!first || writer->isBeforeInBlock(first)) {
      first = writer;
    }
  };
  for (auto &[gemm, epilogue] : fusions.gemmEpilogues) {
    if (epilogue.into) {
      note(epilogue.into, gemm);
    }
    if (epilogue.addend) {
      Operation *&first = readEarlyBy[storageOwner(epilogue.addend)];
      if (!first || gemm->isBeforeInBlock(first)) {
        first = gemm;
      }
    }
  }
  for (auto &[op, operand] : fusions.resultOverOperand) {
    note(op->getOperand(operand), op);
  }
  (void)body;
}

bool GroupBuilder::joinable(Operation *op) const {
  if (!fusedOpOf(op) || op->getNumResults() != 1 ||
      !isStaticF32(op->getResult(0).getType()) ||
      fusions.foldedScales.contains(op) || fusions.foldedAdds.contains(op) ||
      fusions.resultOverOperand.contains(op)) {
    return false;
  }
  Type result = op->getResult(0).getType();
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    return readableAs(operand.getType(), result);
  });
}

bool GroupBuilder::legal(ArrayRef<Operation *> members, Operation *last) const {
  if (members.size() > kMaxMembers) {
    return false;
  }
  DenseSet<Operation *> inGroup(members.begin(), members.end());
  auto overwrittenBefore = [&](Value value) {
    Operation *writer = overwrittenBy.lookup(storageOwner(value));
    return writer && writer->isBeforeInBlock(last);
  };
  for (Operation *member : members) {
    if (member == last) {
      continue;
    }
    Value result = member->getResult(0);
    // Its result exists only at `last`: nobody may need it earlier, and
    // nothing may write over it before then.
    for (Operation *user : result.getUsers()) {
      if (!inGroup.contains(user) && !last->isBeforeInBlock(user)) {
        return false;
      }
    }
    Operation *earlyReader = readEarlyBy.lookup(result);
    if (overwrittenBefore(result) ||
        (earlyReader && !last->isBeforeInBlock(earlyReader))) {
      return false;
    }
    // It reads its inputs at `last`: they must still hold what it read.
    // Optimizer states change in place (accumulations), so only `last`
    // itself may read them.
    for (Value operand : member->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (llvm::isa_and_nonnull<tg::StateRefOp>(producer) ||
          (!inGroup.contains(producer) && overwrittenBefore(operand))) {
        return false;
      }
    }
  }
  return true;
}

void GroupBuilder::visit(Operation *op) {
  if (!joinable(op)) {
    return;
  }
  // The groups of the elementwise ops it reads, of its own type.
  SmallVector<unsigned> candidates;
  for (Value operand : op->getOperands()) {
    Operation *producer = operand.getDefiningOp();
    auto it = buildingOf.find(producer);
    if (it != buildingOf.end() && operand.getType() == op->getResult(0).getType() &&
        !llvm::is_contained(candidates, it->second)) {
      candidates.push_back(it->second);
    }
  }
  // All of them at once, else the first that may take it, else alone.
  SmallVector<unsigned> chosen;
  SmallVector<Operation *> merged;
  for (unsigned id : candidates) {
    merged.append(building[id].begin(), building[id].end());
  }
  merged.push_back(op);
  if (candidates.size() > 1) {
    llvm::sort(merged, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
  }
  if (!candidates.empty() && legal(merged, op)) {
    chosen = candidates;
  } else {
    for (unsigned id : candidates) {
      SmallVector<Operation *> one(building[id]);
      one.push_back(op);
      if (legal(one, op)) {
        chosen = {id};
        merged = std::move(one);
        break;
      }
    }
  }
  if (chosen.empty()) {
    buildingOf[op] = building.size();
    building.push_back({op});
    return;
  }
  unsigned into = chosen.front();
  for (unsigned id : chosen) {
    building[id].clear();
  }
  building[into] = std::move(merged);
  for (Operation *member : building[into]) {
    buildingOf[member] = into;
  }
}

void GroupBuilder::writeProgram(FusionGroup &group) const {
  runtime::fused::Program program;
  DenseMap<Value, uint32_t> instructionOf, inputOf;
  DenseSet<Operation *> inGroup(group.members.begin(), group.members.end());
  for (Operation *member : group.members) {
    runtime::fused::Instruction instruction;
    instruction.op = *fusedOpOf(member);
    for (auto [i, operand] : llvm::enumerate(member->getOperands())) {
      runtime::fused::Arg &arg = instruction.args[i];
      if (auto it = instructionOf.find(operand); it != instructionOf.end()) {
        arg.kind = runtime::fused::Arg::Kind::Value;
        arg.index = it->second;
      } else if (std::optional<float> constant = inlineConstant(operand)) {
        arg.kind = runtime::fused::Arg::Kind::Constant;
        arg.constant = *constant;
      } else {
        auto [it2, inserted] = inputOf.try_emplace(operand, group.inputs.size());
        if (inserted) {
          group.inputs.push_back(operand);
        }
        arg.kind = runtime::fused::Arg::Kind::Input;
        arg.index = it2->second;
      }
    }
    Value result = member->getResult(0);
    instructionOf[result] = program.instructions.size();
    bool readOutside = llvm::any_of(result.getUsers(), [&](Operation *user) {
      return !inGroup.contains(user);
    });
    if (readOutside) {
      group.outputs.push_back(result);
      group.outputInstructions.push_back(program.instructions.size());
    }
    program.instructions.push_back(instruction);
  }
  group.program = runtime::fused::printProgram(program);
}

void GroupBuilder::finish() {
  for (SmallVector<Operation *> &members : building) {
    if (members.size() < 2) {
      continue;
    }
    FusionGroup group;
    group.members = std::move(members);
    writeProgram(group);
    for (Operation *member : group.members) {
      fusions.groupOf[member] = fusions.groups.size();
    }
    fusions.groups.push_back(std::move(group));
  }
}

} // namespace

bool isFusableElementwise(Operation *op) { return fusedOpOf(op).has_value(); }

void decideFusionGroups(Block &body, Fusions &fusions) {
  GroupBuilder builder(body, fusions);
  for (Operation &op : body) {
    builder.visit(&op);
  }
  builder.finish();
}

} // namespace tailor::memory
