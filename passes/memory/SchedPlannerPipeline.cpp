//===- SchedPlannerPipeline.cpp - a pipeline stage's sends and slots ------===//
//
// tailor-split-layers' ops in a stage's program:
// - tg.recv: a new activation, filled by a point-to-point receive from the
//   peer stage's rank;
// - tg.send: a point-to-point send of the value (the runtime copies it into
//   the plan's `p2p_outbox` arena and returns at once, so a send never
//   waits for the peer's matching receive);
// - tg.slot_write / tg.slot_read: `pipeline_slot_write` and
//   `pipeline_slot_read` launches between the value and the slot of the
//   `pipeline_input` state the run-time `slot` operand names.
//
//===----------------------------------------------------------------------===//

#include "passes/memory/SchedPlanner.h"

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

LogicalResult SchedPlanner::planPipelineOp(ModuleOp module, Operation &op,
                                           PlannedEntry &entry, int64_t step) {
  if (backend == "cuda") {
    return op.emitError() << "layer split has no CUDA runtime yet: pipeline "
                             "stages run on CPU ranks (hardware Nxcpu)";
  }
  PlannedCollective p2p;
  p2p.inPlace = false;
  if (auto recv = llvm::dyn_cast<tg::RecvOp>(op)) {
    Root root = makeRoot(Home::Activation, memrefFor(recv.getType()));
    root.first = root.last = step;
    rootOf[recv.getResult()] = newRoot(std::move(root));
    p2p.kind = sched::CollectiveKind::Recv;
    p2p.peer = static_cast<int64_t>(recv.getPeer());
    PlannedLaunch launch;
    launch.op = &op;
    launch.origin = originOf(&op);
    launch.collective = p2p;
    launch.operands = {accessOf(recv.getResult()), accessOf(recv.getResult())};
    entry.launches.push_back(std::move(launch));
    return success();
  }
  if (auto send = llvm::dyn_cast<tg::SendOp>(op)) {
    if (failed(useAt(send.getValue(), step))) {
      return op.emitError() << "cannot plan this send";
    }
    p2p.kind = sched::CollectiveKind::Send;
    p2p.peer = static_cast<int64_t>(send.getPeer());
    PlannedLaunch launch;
    launch.op = &op;
    launch.origin = originOf(&op);
    launch.collective = p2p;
    launch.operands = {accessOf(send.getValue()), accessOf(send.getValue())};
    entry.launches.push_back(std::move(launch));
    return success();
  }
  if (auto write = llvm::dyn_cast<tg::SlotWriteOp>(op)) {
    FailureOr<unsigned> state = stateRoot(module, write, write.getStateAttr());
    if (failed(state) || failed(useAt(write.getValue(), step)) ||
        failed(useAt(write.getSlot(), step))) {
      return write.emitError() << "cannot plan this slot write";
    }
    entry.launches.push_back(launchOf(
        write, "pipeline_slot_write", 3,
        {accessOf(write.getValue()), accessOf(write.getSlot()),
         whole(*state)}));
    return success();
  }
  auto read = llvm::cast<tg::SlotReadOp>(op);
  FailureOr<unsigned> state = stateRoot(module, read, read.getStateAttr());
  if (failed(state) || failed(useAt(read.getSlot(), step))) {
    return read.emitError() << "cannot plan this slot read";
  }
  Root root = makeRoot(Home::Activation, memrefFor(read.getType()));
  root.first = root.last = step;
  rootOf[read.getResult()] = newRoot(std::move(root));
  entry.launches.push_back(launchOf(
      read, "pipeline_slot_read", 3,
      {whole(*state), accessOf(read.getSlot()), accessOf(read.getResult())}));
  return success();
}
