//===- StepRangeTest.cpp - ops that run in some training steps only -------===//
//
// Plan format 1.8's Op.steps (gradient compression's warm-up and compressed
// phases): a hand-built plan (flatbuffers API, no compiler) whose entry
// "optimizer_step" takes an i64 `step` input and runs `accumulate` launches
// with and without step ranges (and periods, ACP-SGD's alternation). The
// session runs an op only while the step is in its range (every period-th
// step of it), and refuses, naming the op, a malformed range and a
// range in an entry without a `step` input.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/schema/plan_generated.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace tailor::runtime;
namespace fb = tailor::plan;

namespace {

/// One `accumulate` launch (one += delta) and the steps it runs in.
struct RangedOp {
  std::optional<std::pair<int64_t, int64_t>> steps;
  /// Op.steps_period: every period-th step of the range.
  int64_t period = 1;
};

/// Buffers: 0 step (i64 scalar), 1 delta (f32[1]), 2 sum (f32[1]); one
/// arena; one entry over every op; `stepName` names input 0.
std::vector<uint8_t> buildPlan(const std::vector<RangedOp> &ranged,
                               const std::string &stepName = "step") {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Arena>> arenas = {
      fb::CreateArena(b, b.CreateString("state"), fb::ArenaKind::Host,
                      fb::Category::OptimizerState, 192, 64)};
  std::vector<int64_t> scalar = {};
  std::vector<int64_t> one = {1};
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers = {
      fb::CreateBuffer(b, 0, 0, 8, fb::DType::I64, b.CreateVector(scalar)),
      fb::CreateBuffer(b, 0, 64, 4, fb::DType::F32, b.CreateVector(one)),
      fb::CreateBuffer(b, 0, 128, 4, fb::DType::F32, b.CreateVector(one))};
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels = {
      fb::CreateKernel(b, b.CreateString("accumulate"), 2)};
  std::vector<flatbuffers::Offset<fb::Stream>> streams = {
      fb::CreateStream(b, b.CreateString("compute"))};
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  std::vector<uint32_t> operands = {1, 2};
  for (const RangedOp &op : ranged) {
    auto launch = fb::CreateLaunch(b, 0, b.CreateVector(operands), 0, 0,
                                   b.CreateString("test"));
    std::optional<fb::StepRange> range;
    if (op.steps) {
      range = fb::StepRange(op.steps->first, op.steps->second);
    }
    ops.push_back(fb::CreateOp(b, fb::Step::Launch, launch.Union(),
                               range ? &*range : nullptr, op.period));
  }
  std::vector<flatbuffers::Offset<fb::Binding>> inputs = {
      fb::CreateBinding(b, b.CreateString(stepName), 0, 0),
      fb::CreateBinding(b, b.CreateString("delta"), 1, 0)};
  std::vector<flatbuffers::Offset<fb::Entry>> entries = {
      fb::CreateEntry(b, b.CreateString("optimizer_step"), 0,
                      static_cast<uint32_t>(ops.size()))};
  auto memory = fb::CreateMemory(b, 0, 0, 0, 0, 192, 0, 192, 0);
  auto target =
      fb::CreateTarget(b, fb::Backend::Cpu, b.CreateString("cpu"), 0, 1);
  auto plan = fb::CreatePlan(
      b, kPlanVersion, b.CreateString("test"), b.CreateString("none"), target,
      0, 1, b.CreateVector(arenas), b.CreateVector(buffers), 0, 0,
      b.CreateVector(kernels), b.CreateVector(streams), 0, b.CreateVector(ops),
      b.CreateVector(inputs), 0, memory, b.CreateVector(entries));
  fb::FinishSizePrefixedPlanBuffer(b, plan);
  return std::vector<uint8_t>(b.GetBufferPointer(),
                              b.GetBufferPointer() + b.GetSize());
}

/// Loads `bytes` and opens a session; "" or the loader's or session's
/// message.
std::string open(const std::vector<uint8_t> &bytes,
                 std::unique_ptr<LoadedPlan> &plan,
                 std::unique_ptr<Session> &session) {
  std::string error;
  plan = LoadedPlan::loadFromMemory(bytes.data(), bytes.size(), "/tmp",
                                    "test.tplan", LoadOptions(), error);
  if (!plan) {
    return error;
  }
  int status = 0;
  session = Session::create(*plan, 1, error, status);
  return session ? "" : error;
}

} // namespace

TEST(StepRangeTest, RunsEachOpOnlyInItsSteps) {
  // Reference: every op adds delta (1) to the sum; op 0 runs in every
  // step, op 1 in steps 1..2, op 2 from step 3 on, op 3 in step 3 only, so
  // the sum after one step counts the ops that ran in it.
  std::unique_ptr<LoadedPlan> plan;
  std::unique_ptr<Session> session;
  ASSERT_EQ(
      open(buildPlan({{}, {{{1, 2}}}, {{{3, -1}}}, {{{3, 3}}}}), plan, session),
      "");
  auto *step = static_cast<int64_t *>(session->bufferData(0));
  auto *delta = static_cast<float *>(session->bufferData(1));
  auto *sum = static_cast<float *>(session->bufferData(2));
  *delta = 1.0f;
  // Ops that run: steps 1, 2: ops 0, 1; step 3: 0, 2, 3; steps 4, 5: 0, 2.
  const float runs[] = {2, 2, 3, 2, 2};
  for (int64_t s = 1; s <= 5; ++s) {
    *sum = 0.0f;
    *step = s;
    ASSERT_EQ(session->runEntry(0), "") << "step " << s;
    EXPECT_EQ(*sum, runs[s - 1]) << "step " << s;
  }
}

TEST(StepRangeTest, RunsAPeriodicOpInEveryPeriodthStepOfItsRange) {
  // Reference: op 0 runs in every step, op 1 in steps 4, 6, 8, ... (ACP-SGD's
  // P steps), op 2 in 5, 7, 9, ... (its Q steps), op 3 in 2, 5, 8 (period
  // 3 within [2, 9]); the sum after one step counts the ops that ran.
  std::unique_ptr<LoadedPlan> plan;
  std::unique_ptr<Session> session;
  ASSERT_EQ(open(buildPlan({{},
                            {{{4, -1}}, 2},
                            {{{5, -1}}, 2},
                            {{{2, 9}}, 3}}),
                 plan, session),
            "");
  auto *step = static_cast<int64_t *>(session->bufferData(0));
  auto *delta = static_cast<float *>(session->bufferData(1));
  auto *sum = static_cast<float *>(session->bufferData(2));
  *delta = 1.0f;
  //                   1  2  3  4  5  6  7  8  9 10 11
  const float runs[] = {1, 2, 1, 2, 3, 2, 2, 3, 2, 2, 2};
  for (int64_t s = 1; s <= 11; ++s) {
    *sum = 0.0f;
    *step = s;
    ASSERT_EQ(session->runEntry(0), "") << "step " << s;
    EXPECT_EQ(*sum, runs[s - 1]) << "step " << s;
  }
}

TEST(StepRangeTest, RefusesAMalformedRangeNamingTheOp) {
  std::unique_ptr<LoadedPlan> plan;
  std::unique_ptr<Session> session;
  std::string error = open(buildPlan({{}, {{{0, -1}}}}), plan, session);
  EXPECT_NE(error.find("step 1: step range [0, -1] is malformed"),
            std::string::npos)
      << error;
  error = open(buildPlan({{{{4, 3}}}}), plan, session);
  EXPECT_NE(error.find("step 0: step range [4, 3] is malformed"),
            std::string::npos)
      << error;
  error = open(buildPlan({{}, {{{4, -1}}, -2}}), plan, session);
  EXPECT_NE(error.find("step 1: step period -2 is negative"),
            std::string::npos)
      << error;
}

TEST(StepRangeTest, RefusesARangeWithoutAStepInput) {
  std::unique_ptr<LoadedPlan> plan;
  std::unique_ptr<Session> session;
  std::string error =
      open(buildPlan({{{{2, -1}}}}, /*stepName=*/"not_step"), plan, session);
  EXPECT_NE(error.find("step 0: runs in training steps [2, -1] but entry "
                       "'optimizer_step' has no i64 `step` input"),
            std::string::npos)
      << error;
}
