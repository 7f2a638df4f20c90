//===- ActivationMemory.cpp - bytes of activations alive over a step ------===//

#include "passes/memory/ActivationMemory.h"

#include "dialects/tg/TGOps.h"
#include "passes/memory/ArenaPacking.h"
#include "passes/memory/Fusions.h"
#include "passes/memory/PlannedProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <map>

using namespace mlir;

namespace tailor::memory {

namespace {

/// Follows the planner's rules for where each value's bytes live.
class BufferTracker {
public:
  BufferTracker(const Fusions &fusions, int64_t alignment)
      : fusions(fusions), alignment(alignment) {}

  /// Records what `op` at `step` reads and makes.
  void visit(Operation &op, int64_t step);
  /// Function results live to `endStep`; results that are not activations
  /// of their own, or repeat one, get a copy (as planOutputs makes).
  void visitReturn(func::ReturnOp ret, int64_t step, int64_t endStep);

  std::vector<ActivationBuffer> buffers;

private:
  void read(Value value, int64_t step) {
    auto it = bufferOf.find(value);
    if (it != bufferOf.end()) {
      buffers[it->second].last = std::max(buffers[it->second].last, step);
    }
  }
  void make(Value value, int64_t step) {
    auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
    if (!type || !type.hasStaticShape()) {
      return;
    }
    int64_t bytes = storageBytes(type);
    bytes = (bytes + alignment - 1) / alignment * alignment;
    bufferOf[value] = buffers.size();
    buffers.push_back({value, bytes, step, step});
  }

  const Fusions &fusions;
  int64_t alignment;
  DenseMap<Value, size_t> bufferOf;
};

void BufferTracker::visit(Operation &op, int64_t step) {
  if (llvm::isa<tg::ParamRefOp, tg::StateRefOp, arith::ConstantOp>(op) ||
      fusions.foldedTransposes.contains(&op) ||
      fusions.fusedDequantizes.contains(&op)) {
    return;
  }
  if (auto group = fusions.groupOf.find(&op); group != fusions.groupOf.end()) {
    // One launch at the last member: it reads the group's inputs and
    // makes its outputs; values inside the group have no buffer.
    const FusionGroup &fused = fusions.groups[group->second];
    if (&op == fused.members.back()) {
      for (Value input : fused.inputs) {
        read(input, step);
      }
      for (Value output : fused.outputs) {
        make(output, step);
      }
    }
    return;
  }
  auto scale = fusions.foldedScales.find(&op);
  if (scale != fusions.foldedScales.end() && !scale->second.intoProducer) {
    return; // its readers read the scaled tensor
  }
  if (auto add = fusions.foldedAdds.find(&op); add != fusions.foldedAdds.end()) {
    // A view of the buffer a GEMM wrote the sum into.
    read(add->second, step);
    auto it = bufferOf.find(add->second);
    if (it != bufferOf.end()) {
      bufferOf[op.getResult(0)] = it->second;
    }
    return;
  }
  for (Value operand : op.getOperands()) {
    read(fusions.readValue(operand), step);
  }
  auto gemm = fusions.gemmEpilogues.find(&op);
  if (gemm != fusions.gemmEpilogues.end() && gemm->second.addend) {
    read(gemm->second.addend, step); // the residual it adds
  }
  // Views of another buffer: reshapes, products a GEMM scaled, sums a GEMM
  // added into its addend, and that GEMM's result.
  Value viewed;
  if (auto reshape = llvm::dyn_cast<tg::ReshapeOp>(op)) {
    viewed = reshape.getInput();
  } else if (scale != fusions.foldedScales.end()) {
    viewed = scale->second.source;
  } else if (gemm != fusions.gemmEpilogues.end()) {
    viewed = gemm->second.into;
  }
  if (viewed) {
    auto it = bufferOf.find(viewed);
    if (it != bufferOf.end()) {
      bufferOf[op.getResult(0)] = it->second;
    }
    return;
  }
  if (llvm::isa<tg::AccumulateOp, tg::AdamWUpdateOp, tg::SGDUpdateOp>(op) ||
      fusions.accumulatedInPlace.contains(&op)) {
    return; // updates states where they are
  }
  if (auto over = fusions.resultOverOperand.find(&op);
      over != fusions.resultOverOperand.end()) {
    auto it = bufferOf.find(op.getOperand(over->second));
    if (it != bufferOf.end()) {
      bufferOf[op.getResult(0)] = it->second;
    }
    return;
  }
  for (Value result : op.getResults()) {
    make(result, step);
  }
}

void BufferTracker::visitReturn(func::ReturnOp ret, int64_t step,
                                int64_t endStep) {
  DenseSet<size_t> outputs;
  for (Value value : ret.getOperands()) {
    auto it = bufferOf.find(value);
    if (it != bufferOf.end() && outputs.insert(it->second).second) {
      buffers[it->second].last = endStep;
      continue;
    }
    read(value, step);
    make(value, step);
    buffers.back().last = endStep;
  }
}

} // namespace

ActivationMemory::ActivationMemory(func::FuncOp func, int64_t alignment) {
  if (func.isExternal() || !func.getBody().hasOneBlock()) {
    return;
  }
  Block &body = func.getBody().front();
  Fusions fusions = decideFusions(body);
  BufferTracker tracker(fusions, alignment);
  int64_t step = 0;
  for (Operation &op : body) {
    if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
      tracker.visitReturn(ret, step, step + 1);
      break;
    }
    tracker.visit(op, step);
    ++step;
  }
  all = std::move(tracker.buffers);
  // Sweep: +bytes where a buffer starts, -bytes after its last reader.
  std::map<int64_t, int64_t> delta;
  for (const ActivationBuffer &buffer : all) {
    delta[buffer.first] += buffer.bytes;
    delta[buffer.last + 1] -= buffer.bytes;
  }
  int64_t live = 0;
  for (auto [at, change] : delta) {
    live += change;
    if (live > peak) {
      peak = live;
      peakAt = at;
    }
  }
  std::vector<LiveBuffer> packed;
  packed.reserve(all.size());
  for (const ActivationBuffer &buffer : all) {
    packed.push_back({buffer.first, buffer.last,
                      static_cast<uint64_t>(buffer.bytes), 0});
  }
  arena = static_cast<int64_t>(
      packBuffers(packed, static_cast<uint64_t>(alignment)).arenaBytes);
}

} // namespace tailor::memory
