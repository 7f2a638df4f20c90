//===- StepSpecTestUtil.h - the steps of hand-built plans -------*- C++ -*-===//
//
// What AsyncCollectiveTest and SessionCopyTest share: a plan step described
// by value (a launch, a copy, a collective, a record or a wait), the
// helpers that make one, and the plan op it becomes.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TEST_RUNTIME_TRAIN_STEPSPECTESTUTIL_H
#define TAILOR_TEST_RUNTIME_TRAIN_STEPSPECTESTUTIL_H

#include "runtime/schema/plan_generated.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tailor::train::testing {

/// One step of a hand-built plan.
struct StepSpec {
  enum Kind { Launch, Copy, Collective, Record, Wait } kind = Launch;
  std::string kernel; // Launch: mul, add or zero
  std::vector<uint32_t> operands;
  plan::CopyKind copy = plan::CopyKind::HostToDevice;
  plan::CollectiveKind collective = plan::CollectiveKind::AllReduce;
  plan::Reduction reduction = plan::Reduction::Sum;
  uint32_t event = 0;
  uint32_t stream = 0;
};

inline StepSpec launch(const char *kernel, std::vector<uint32_t> operands,
                       uint32_t stream = 0) {
  StepSpec step;
  step.kernel = kernel;
  step.operands = std::move(operands);
  step.stream = stream;
  return step;
}

inline StepSpec copy(plan::CopyKind kind, uint32_t source, uint32_t target,
                     uint32_t stream = 0) {
  StepSpec step;
  step.kind = StepSpec::Copy;
  step.copy = kind;
  step.operands = {source, target};
  step.stream = stream;
  return step;
}

inline StepSpec collective(plan::CollectiveKind kind, uint32_t input,
                           uint32_t output, uint32_t stream,
                           plan::Reduction reduction = plan::Reduction::Sum) {
  StepSpec step;
  step.kind = StepSpec::Collective;
  step.collective = kind;
  step.operands = {input, output};
  step.stream = stream;
  step.reduction = reduction;
  return step;
}

inline StepSpec record(uint32_t event, uint32_t stream) {
  StepSpec step;
  step.kind = StepSpec::Record;
  step.event = event;
  step.stream = stream;
  return step;
}

inline StepSpec wait(uint32_t event, uint32_t stream) {
  StepSpec step;
  step.kind = StepSpec::Wait;
  step.event = event;
  step.stream = stream;
  return step;
}

/// The plan op of `step`: a launch of kernel `kernel` (its index in the
/// plan's kernel table) with `origin` (none when null), a collective over
/// `group`, or a copy, record or wait.
inline flatbuffers::Offset<plan::Op>
buildStep(flatbuffers::FlatBufferBuilder &b, const StepSpec &step,
          uint32_t kernel, const std::vector<int> &group,
          const char *origin = nullptr) {
  switch (step.kind) {
  case StepSpec::Launch:
    return plan::CreateOp(
        b, plan::Step::Launch,
        plan::CreateLaunch(b, kernel, b.CreateVector(step.operands), 0,
                           step.stream, origin ? b.CreateString(origin) : 0)
            .Union());
  case StepSpec::Copy:
    return plan::CreateOp(b, plan::Step::Copy,
                          plan::CreateCopy(b, step.copy, step.operands[0],
                                           step.operands[1], step.stream)
                              .Union());
  case StepSpec::Collective:
    return plan::CreateOp(
        b, plan::Step::Collective,
        plan::CreateCollective(b, step.collective, step.operands[0],
                               step.operands[1], b.CreateVector(group),
                               step.reduction, 0, step.stream)
            .Union());
  case StepSpec::Record:
    return plan::CreateOp(
        b, plan::Step::Record,
        plan::CreateRecord(b, step.event, step.stream).Union());
  case StepSpec::Wait:
    break;
  }
  return plan::CreateOp(b, plan::Step::Wait,
                        plan::CreateWait(b, step.event, step.stream).Union());
}

} // namespace tailor::train::testing

#endif // TAILOR_TEST_RUNTIME_TRAIN_STEPSPECTESTUTIL_H
