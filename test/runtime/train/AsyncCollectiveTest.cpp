//===- AsyncCollectiveTest.cpp - collectives overlapping CPU compute ------===//
//
// Collectives on a second stream (`comm`, index 1) of a CPU plan, with the
// events the compiler emits around them:
//
//   record e0 on compute; wait e0 on comm; collective ... on comm;
//   record e1 on comm; ... compute launches ...; wait e1 on compute
//
// Plans are built in memory with the flatbuffers API. In one process a fake
// communicator, whose started collectives complete only when waited for
// (or after a set number of polls), shows the session's order of calls:
// the launches between start and wait run while the collective is in
// flight, the wait before the consumer completes it, stream order holds
// between collectives sharing bytes, failures name their step, and the
// timeline's slice spans the launches between. The loader's and the
// session's checks of event use come next. `AsyncRanks.*` run under mpirun
// (ctest: -np 2 and 4, label multirank) and compare the overlapped plan's
// results with those of the same plan run synchronously.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/Timeline.h"
#include "runtime/comm/Communicator.h"
#include "test/runtime/train/StepSpecTestUtil.h"
#include "test/runtime/train/ZeroTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace tailor::runtime;
using namespace tailor::train::testing;
namespace fb = tailor::plan;

namespace {

/// One step of a test plan.
/// A CPU plan of `worldSize` ranks: f32 buffers of the given element
/// counts (one activations arena, 64-byte aligned), streams compute and
/// comm, events e0..e3, and `steps` split into entries at `cuts` (entry k
/// named "e<k>"; no cuts: one entry "step").
struct AsyncPlan {
  int worldSize = 2;
  fb::DType dtype = fb::DType::F32;
  std::vector<int64_t> buffers;
  std::vector<StepSpec> steps;
  std::vector<uint32_t> cuts;
};

std::vector<uint8_t> buildPlan(const AsyncPlan &spec) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  uint64_t offset = 0;
  uint64_t element = 4; // f32 or i32
  for (int64_t count : spec.buffers) {
    uint64_t bytes = static_cast<uint64_t>(count) * element;
    buffers.push_back(
        fb::CreateBuffer(b, 0, offset, bytes, spec.dtype,
                         b.CreateVector(std::vector<int64_t>{count})));
    offset += (bytes + 63) / 64 * 64;
  }
  std::vector<flatbuffers::Offset<fb::Arena>> arenas = {fb::CreateArena(
      b, b.CreateString("activations"), fb::ArenaKind::Host,
      fb::Category::Activations, std::max<uint64_t>(offset, 64), 64)};
  const char *kernelNames[] = {"mul", "add", "zero"};
  int arities[] = {3, 3, 1};
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (int k = 0; k < 3; ++k) {
    kernels.push_back(
        fb::CreateKernel(b, b.CreateString(kernelNames[k]), arities[k]));
  }
  std::vector<int> group(static_cast<size_t>(spec.worldSize));
  for (int r = 0; r < spec.worldSize; ++r) {
    group[static_cast<size_t>(r)] = r;
  }
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  for (const StepSpec &step : spec.steps) {
    uint32_t kernel = step.kernel == "mul" ? 0 : step.kernel == "add" ? 1 : 2;
    ops.push_back(buildStep(b, step, kernel, group));
  }
  std::vector<flatbuffers::Offset<fb::Entry>> entries;
  std::vector<uint32_t> bounds = {0};
  bounds.insert(bounds.end(), spec.cuts.begin(), spec.cuts.end());
  bounds.push_back(static_cast<uint32_t>(spec.steps.size()));
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    std::string name = spec.cuts.empty() ? "step" : "e" + std::to_string(k);
    entries.push_back(fb::CreateEntry(b, b.CreateString(name), bounds[k],
                                      bounds[k + 1] - bounds[k]));
  }
  std::vector<flatbuffers::Offset<fb::Stream>> streams = {
      fb::CreateStream(b, b.CreateString("compute")),
      fb::CreateStream(b, b.CreateString("comm"))};
  std::vector<flatbuffers::Offset<fb::Event>> events;
  for (int e = 0; e < 4; ++e) {
    events.push_back(
        fb::CreateEvent(b, b.CreateString("e" + std::to_string(e))));
  }
  auto plan = fb::CreatePlan(
      b, kPlanVersion, b.CreateString("AsyncCollectiveTest"),
      b.CreateString("toy"),
      fb::CreateTarget(b, fb::Backend::Cpu, b.CreateString("cpu"), 0, 1), 0,
      spec.worldSize, b.CreateVector(arenas), b.CreateVector(buffers), 0, 0,
      b.CreateVector(kernels), b.CreateVector(streams), b.CreateVector(events),
      b.CreateVector(ops), 0, 0, 0, b.CreateVector(entries));
  b.FinishSizePrefixed(plan, fb::PlanIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(),
                              b.GetBufferPointer() + b.GetSize());
}

float *floats(Session &session, uint32_t buffer) {
  return static_cast<float *>(session.bufferData(buffer));
}

/// What the fake communicator was asked, in order: "start <kind>",
/// "test", "complete <kind>" (when a started one completes), "sync <kind>"
/// (a blocking call).
using CallLog = std::vector<std::string>;

/// The fake's collectives compute what 2 ranks holding the same values
/// would get, from what the buffers hold when they complete: all-reduce
/// doubles, reduce-scatter doubles rank 0's block, all-gather repeats.
void fakeCollective(const comm::CollectiveCall &call) {
  const auto *in = static_cast<const float *>(call.input);
  auto *out = static_cast<float *>(call.output);
  switch (call.kind) {
  case comm::CollectiveKind::AllReduce:
  case comm::CollectiveKind::ReduceScatter:
    for (size_t i = 0; i < call.outputElements; ++i) {
      out[i] = 2 * in[i];
    }
    break;
  case comm::CollectiveKind::AllGather: {
    std::vector<float> block(in, in + call.inputElements);
    for (size_t r = 0; r < 2; ++r) {
      std::copy(block.begin(), block.end(), out + r * call.inputElements);
    }
    break;
  }
  case comm::CollectiveKind::Broadcast:
  case comm::CollectiveKind::Send:
  case comm::CollectiveKind::Recv:
  case comm::CollectiveKind::AllToAll:
    break;
  }
}

const char *kindName(comm::CollectiveKind kind) {
  const char *names[] = {"all_reduce", "reduce_scatter", "all_gather",
                         "broadcast"};
  return names[static_cast<int>(kind)];
}

/// A started collective of the fake: done after `pollsToFinish` tests (-1:
/// only when waited for), then failing with `failure` if set.
class FakePending final : public comm::PendingCollective {
public:
  FakePending(comm::CollectiveCall call, CallLog &log, int pollsToFinish,
              std::string failure)
      : call(call), log(log), pollsLeft(pollsToFinish),
        failure(std::move(failure)) {}
  std::string test(bool &done) override {
    log.push_back("test");
    if (!finished && pollsLeft >= 0 && pollsLeft-- == 0) {
      finish();
    }
    done = finished;
    return finished ? failure : "";
  }
  std::string wait() override {
    if (!finished) {
      finish();
    }
    return failure;
  }

private:
  void finish() {
    finished = true;
    fakeCollective(call);
    log.push_back(std::string("complete ") + kindName(call.kind));
  }
  comm::CollectiveCall call;
  CallLog &log;
  int pollsLeft;
  std::string failure;
  bool finished = false;
};

/// Rank 0 of a world of 2, in one process.
class FakeWorld final : public comm::Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char *backend() const override { return "fake"; }
  std::string allReduce(const void *send, void *recv, size_t count, DType,
                        comm::ReduceOp, void *) override {
    return sync(comm::CollectiveKind::AllReduce, send, recv, count, count);
  }
  std::string reduceScatter(const void *send, void *recv, size_t count, DType,
                            comm::ReduceOp, void *) override {
    return sync(comm::CollectiveKind::ReduceScatter, send, recv, 2 * count,
                count);
  }
  std::string allGather(const void *send, void *recv, size_t count, DType,
                        void *) override {
    return sync(comm::CollectiveKind::AllGather, send, recv, count, 2 * count);
  }
  std::string broadcast(void *buffer, size_t count, DType, int,
                        void *) override {
    return sync(comm::CollectiveKind::Broadcast, buffer, buffer, count, count);
  }
  std::string send(const void *, size_t, DType, int, void *) override {
    return "unused";
  }
  std::string recv(void *, size_t, DType, int, void *) override {
    return "unused";
  }
  std::string barrier() override { return "unused"; }
  std::unique_ptr<Communicator> split(int, int, std::string &error) override {
    error = "unused";
    return nullptr;
  }
  std::string
  start(const comm::CollectiveCall &call,
        std::unique_ptr<comm::PendingCollective> &pending) override {
    log.push_back(std::string("start ") + kindName(call.kind));
    if (!startFailure.empty()) {
      return startFailure;
    }
    pending = std::make_unique<FakePending>(call, log, pollsToFinish,
                                            completionFailure);
    return "";
  }

  CallLog log;
  int pollsToFinish = -1;
  std::string startFailure, completionFailure;

private:
  std::string sync(comm::CollectiveKind kind, const void *send, void *recv,
                   size_t in, size_t out) {
    comm::CollectiveCall call;
    call.kind = kind;
    call.input = send;
    call.output = recv;
    call.inputElements = in;
    call.outputElements = out;
    fakeCollective(call);
    log.push_back(std::string("sync ") + kindName(kind));
    return "";
  }
};

/// Buffers of the overlap plans: 0 g (all-reduced in place), 1 x, 2 y,
/// 3 z (compute between), 4 h (reduce-scattered into 5 hs), 6 w (gathered
/// into 7 ag), 8 out = g * x, 9 out2 = hs + w, 10 out3 = ag + x.
AsyncPlan overlapPlan(int worldSize, bool overlapped) {
  int64_t n = 4 * worldSize, chunk = 4;
  AsyncPlan spec;
  spec.worldSize = worldSize;
  spec.buffers = {n, n, n, n, n, chunk, chunk, n, n, chunk, n};
  uint32_t comm = overlapped ? 1 : 0;
  spec.steps.push_back(launch("mul", {1, 2, 3}));
  if (overlapped) {
    spec.steps.push_back(record(0, 0));
    spec.steps.push_back(wait(0, 1));
  }
  spec.steps.push_back(collective(fb::CollectiveKind::AllReduce, 0, 0, comm));
  spec.steps.push_back(
      collective(fb::CollectiveKind::ReduceScatter, 4, 5, comm));
  spec.steps.push_back(collective(fb::CollectiveKind::AllGather, 6, 7, comm));
  if (overlapped) {
    spec.steps.push_back(record(1, 1));
  }
  // The rest of backward: compute that touches none of the collectives'
  // outputs.
  spec.steps.push_back(launch("add", {3, 1, 2}));
  spec.steps.push_back(launch("mul", {2, 3, 1}));
  spec.steps.push_back(launch("add", {1, 2, 3}));
  if (overlapped) {
    spec.steps.push_back(wait(1, 0));
  }
  spec.steps.push_back(launch("mul", {0, 1, 8}));
  spec.steps.push_back(launch("add", {5, 6, 9}));
  spec.steps.push_back(launch("add", {7, 1, 10}));
  return spec;
}

/// Fills the inputs of overlapPlan with values whose sums over ranks are
/// exact in f32 (any order of summation gives the same bits).
void fillInputs(Session &session, const AsyncPlan &spec, int rank) {
  for (uint32_t buffer : {0u, 1u, 2u, 4u, 6u}) {
    float *data = floats(session, buffer);
    for (int64_t i = 0; i < spec.buffers[buffer]; ++i) {
      data[i] = static_cast<float>((rank + 1) * ((i + buffer) % 7)) * 0.5f +
                0.25f * static_cast<float>(buffer);
    }
  }
}

/// The index of the first timeline slice of `step`, or -1.
int sliceOf(const std::vector<Session::LaunchTiming> &timeline, uint32_t step) {
  for (size_t i = 0; i < timeline.size(); ++i) {
    if (timeline[i].step == step) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

/// A loaded plan and a rank-0 session of it on `world`.
struct Opened {
  std::unique_ptr<LoadedPlan> plan;
  std::unique_ptr<Session> session;
};

std::string open(const AsyncPlan &spec, comm::Communicator *world, int rank,
                 Opened &out) {
  std::string error;
  out.plan = loadPlanBytes(buildPlan(spec), "async", error);
  if (!out.plan) {
    return error;
  }
  out.session = openAtRank(*out.plan, rank, error);
  if (!out.session) {
    return error;
  }
  return out.session->setCommunicator(world);
}

} // namespace

//===----------------------------------------------------------------------===//
// One process, a fake communicator
//===----------------------------------------------------------------------===//

TEST(AsyncSession, LaunchesRunWhileTheCollectivesAreInFlight) {
  FakeWorld world;
  AsyncPlan spec = overlapPlan(2, true);
  Opened opened;
  ASSERT_EQ(open(spec, &world, 0, opened), "");
  fillInputs(*opened.session, spec, 0);
  ASSERT_EQ(opened.session->runEntry(0), "");
  // Started together, polled before each of the three launches between
  // (three collectives each time), completed by the wait, before the
  // consumers (which the fake cannot see, but their results show).
  CallLog expected = {"start all_reduce", "start reduce_scatter",
                      "start all_gather"};
  for (int launch = 0; launch < 3; ++launch) {
    expected.insert(expected.end(), {"test", "test", "test"});
  }
  expected.insert(expected.end(),
                  {"complete all_reduce", "complete reduce_scatter",
                   "complete all_gather"});
  EXPECT_EQ(world.log, expected);
}

TEST(AsyncSession, TheWaitBeforeTheConsumerIsHonored) {
  FakeWorld world;
  AsyncPlan spec = overlapPlan(2, true);
  Opened async, sync;
  ASSERT_EQ(open(spec, &world, 0, async), "");
  ASSERT_EQ(open(overlapPlan(2, false), &world, 0, sync), "");
  fillInputs(*async.session, spec, 0);
  fillInputs(*sync.session, spec, 0);
  ASSERT_EQ(async.session->runEntry(0), "");
  ASSERT_EQ(sync.session->runEntry(0), "");
  // The synchronous plan ran the same collectives blocking.
  EXPECT_EQ(std::count(world.log.begin(), world.log.end(), "sync all_reduce"),
            1);
  for (uint32_t buffer = 0; buffer < spec.buffers.size(); ++buffer) {
    size_t bytes = static_cast<size_t>(spec.buffers[buffer]) * 4;
    EXPECT_EQ(std::memcmp(floats(*async.session, buffer),
                          floats(*sync.session, buffer), bytes),
              0)
        << "buffer " << buffer;
  }
  // out = (2 g) * x: the consumer read the completed all-reduce.
  const float *out = floats(*async.session, 8);
  const float *x = floats(*async.session, 1);
  const float *g = floats(*async.session, 0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out[i], g[i] * x[i]) << "element " << i;
  }
  AsyncPlan fresh = overlapPlan(2, true);
  Opened again;
  ASSERT_EQ(open(fresh, &world, 0, again), "");
  fillInputs(*again.session, fresh, 0);
  float g0 = floats(*again.session, 0)[1];
  ASSERT_EQ(again.session->runEntry(0), "");
  EXPECT_EQ(floats(*again.session, 0)[1], 2 * g0);
}

TEST(AsyncSession, CollectivesDoneEarlyAreNotWaitedForAgain) {
  FakeWorld world;
  world.pollsToFinish = 0; // done at the first poll
  AsyncPlan spec = overlapPlan(2, true);
  Opened opened;
  ASSERT_EQ(open(spec, &world, 0, opened), "");
  fillInputs(*opened.session, spec, 0);
  ASSERT_EQ(opened.session->runEntry(0), "");
  // Polled once each, before the first launch between; never again.
  CallLog expected = {"start all_reduce",        "start reduce_scatter",
                      "start all_gather",        "test",
                      "complete all_reduce",     "test",
                      "complete reduce_scatter", "test",
                      "complete all_gather"};
  EXPECT_EQ(world.log, expected);
}

TEST(AsyncSession, TheTimelineSpansTheLaunchesBetween) {
  FakeWorld world;
  AsyncPlan spec = overlapPlan(2, true);
  Opened opened;
  ASSERT_EQ(open(spec, &world, 0, opened), "");
  fillInputs(*opened.session, spec, 0);
  ASSERT_EQ(opened.session->recordTimeline(true), "");
  ASSERT_EQ(opened.session->runEntry(0), "");
  std::vector<Session::LaunchTiming> timeline = opened.session->takeTimeline();
  // Steps: 3 all-reduce (comm), 7..9 the launches between, 10 the wait.
  int collective = sliceOf(timeline, 3), first = sliceOf(timeline, 7),
      last = sliceOf(timeline, 9), waited = sliceOf(timeline, 10);
  ASSERT_GE(collective, 0);
  ASSERT_GE(first, 0);
  ASSERT_GE(last, 0);
  ASSERT_GE(waited, 0) << "a wait that blocked has its slice";
  const Session::LaunchTiming &span = timeline[static_cast<size_t>(collective)];
  EXPECT_LE(span.start, timeline[static_cast<size_t>(first)].start);
  EXPECT_GE(span.end, timeline[static_cast<size_t>(last)].end);
  // In start order, so a step's first slice begins it.
  EXPECT_LT(collective, first);
  // Records and unblocked waits have no slice.
  EXPECT_EQ(sliceOf(timeline, 1), -1);
  EXPECT_EQ(sliceOf(timeline, 2), -1);

  // In the trace: the collective on comm's track (tid 2), the wait on
  // compute's (tid 1).
  std::string path = ::testing::TempDir() + "async_trace.json";
  ASSERT_EQ(writeMeasuredTrace(*opened.plan, {{0, timeline}}, path), "");
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  std::string trace = text.str();
  EXPECT_TRUE(mentions(trace, "\"name\": \"stream comm\""));
  EXPECT_TRUE(mentions(trace, "{\"ph\": \"X\", \"name\": \"all_reduce\", "
                              "\"cat\": \"step\", \"pid\": 0, \"tid\": 2"));
  EXPECT_TRUE(mentions(trace, "started nonblocking"));
  EXPECT_TRUE(mentions(trace, "{\"ph\": \"X\", \"name\": \"wait\", "
                              "\"cat\": \"step\", \"pid\": 0, \"tid\": 1"));
  EXPECT_TRUE(mentions(trace, "\"origin\": \"event e1\""));
  std::remove(path.c_str());
}

TEST(AsyncSession, CollectivesOfAStreamSharingBytesKeepTheirOrder) {
  FakeWorld world;
  AsyncPlan spec;
  spec.buffers = {8, 8, 8, 16};
  spec.steps = {record(0, 0), wait(0, 1),
                collective(fb::CollectiveKind::AllReduce, 0, 0, 1),
                // Reads what the all-reduce writes: after it, on its stream.
                collective(fb::CollectiveKind::AllGather, 0, 3, 1),
                // Shares nothing: runs alongside.
                collective(fb::CollectiveKind::AllReduce, 1, 1, 1),
                record(1, 1), launch("zero", {2}), wait(1, 0)};
  Opened opened;
  ASSERT_EQ(open(spec, &world, 0, opened), "");
  std::fill(floats(*opened.session, 0), floats(*opened.session, 0) + 8, 3.0f);
  ASSERT_EQ(opened.session->runEntry(0), "");
  CallLog expected = {"start all_reduce",
                      "complete all_reduce",
                      "start all_gather",
                      "start all_reduce",
                      "test",
                      "test",
                      "complete all_gather",
                      "complete all_reduce"};
  EXPECT_EQ(world.log, expected);
  // The gather saw the reduced values.
  EXPECT_EQ(floats(*opened.session, 3)[15], 6.0f);
}

TEST(AsyncSession, CollectivesOnTheComputeStreamStaySynchronous) {
  FakeWorld world;
  AsyncPlan spec = overlapPlan(2, false);
  Opened opened;
  ASSERT_EQ(open(spec, &world, 0, opened), "");
  ASSERT_EQ(opened.session->runEntry(0), "");
  CallLog expected = {"sync all_reduce", "sync reduce_scatter",
                      "sync all_gather"};
  EXPECT_EQ(world.log, expected);
}

TEST(AsyncSession, UnwaitedCollectivesCompleteAtTheEndOfTheEntry) {
  FakeWorld world;
  AsyncPlan spec;
  spec.buffers = {8, 8};
  spec.steps = {collective(fb::CollectiveKind::AllReduce, 0, 0, 1),
                launch("zero", {1})};
  Opened opened;
  ASSERT_EQ(open(spec, &world, 0, opened), "");
  std::fill(floats(*opened.session, 0), floats(*opened.session, 0) + 8, 1.5f);
  ASSERT_EQ(opened.session->runEntry(0), "");
  EXPECT_EQ(world.log.back(), "complete all_reduce");
  EXPECT_EQ(floats(*opened.session, 0)[7], 3.0f);
}

TEST(AsyncSession, AFailingCollectiveIsReportedWithItsStep) {
  FakeWorld world;
  world.completionFailure = "allReduce on rank 0 of 2: the link broke";
  Opened opened;
  ASSERT_EQ(open(overlapPlan(2, true), &world, 0, opened), "");
  std::string error = opened.session->runEntry(0);
  EXPECT_TRUE(mentions(error, "step 10 (wait for event 1): collective step 3 "
                              "(collective on stream 1, AllReduce): allReduce "
                              "on rank 0 of 2: the link broke"));
  // Failing at a poll stops the entry at once, every collective completed.
  world.log.clear();
  world.pollsToFinish = 0;
  error = opened.session->runEntry(0);
  EXPECT_TRUE(mentions(error, "step 3 (collective on stream 1, AllReduce): "
                              "allReduce on rank 0 of 2: the link broke"));
  EXPECT_EQ(std::count(world.log.begin(), world.log.end(), "start all_gather"),
            1);
  EXPECT_EQ(world.log.back(), "complete all_gather");
  // Failing at the end of the entry.
  world.pollsToFinish = -1;
  AsyncPlan tail;
  tail.buffers = {8};
  tail.steps = {collective(fb::CollectiveKind::AllReduce, 0, 0, 1)};
  Opened unwaited;
  ASSERT_EQ(open(tail, &world, 0, unwaited), "");
  EXPECT_TRUE(mentions(unwaited.session->runEntry(0),
                       "step 0 (collective on stream 1, AllReduce): allReduce "
                       "on rank 0 of 2: the link broke (completed at the end "
                       "of the entry)"));
  // Failing to start.
  world.completionFailure.clear();
  world.startFailure = "allReduce on rank 0 of 2: cannot reduce an average "
                       "of i32 elements";
  EXPECT_TRUE(mentions(unwaited.session->runEntry(0),
                       "step 0 (collective on stream 1, AllReduce): allReduce "
                       "on rank 0 of 2: cannot reduce an average"));
}

TEST(AsyncSession, ComputeTouchingWhatIsInFlightIsAnError) {
  FakeWorld world;
  world.pollsToFinish = 0; // done already: the plan's order is still wrong
  AsyncPlan spec;
  spec.buffers = {8, 8, 8};
  spec.steps = {record(0, 0),
                wait(0, 1),
                collective(fb::CollectiveKind::AllReduce, 0, 0, 1),
                record(1, 1),
                launch("add", {1, 2, 2}),
                launch("mul", {1, 0, 2}), // reads g before the wait
                wait(1, 0)};
  Opened opened;
  ASSERT_EQ(open(spec, &world, 0, opened), "");
  EXPECT_TRUE(mentions(opened.session->runEntry(0),
                       "step 5 (mul): operand 1 shares bytes with the output "
                       "of step 2 (collective on stream 1, AllReduce), which "
                       "the compute stream has not waited for"));
  // A collective on the compute stream likewise.
  spec.steps[5] = collective(fb::CollectiveKind::AllReduce, 0, 0, 0);
  Opened sync;
  ASSERT_EQ(open(spec, &world, 0, sync), "");
  EXPECT_TRUE(mentions(sync.session->runEntry(0),
                       "step 5 (collective, AllReduce) shares bytes with step "
                       "2 (collective on stream 1, AllReduce), which its "
                       "stream has not waited for"));
  // After the wait, the same launch is fine.
  spec.steps[5] = wait(1, 0);
  spec.steps[6] = launch("mul", {1, 0, 2});
  Opened fixed;
  ASSERT_EQ(open(spec, &world, 0, fixed), "");
  EXPECT_EQ(fixed.session->runEntry(0), "");
}

//===----------------------------------------------------------------------===//
// Loading: event discipline, streams of a CPU plan
//===----------------------------------------------------------------------===//

TEST(AsyncLoader, AcceptsTheCompilersPattern) {
  EXPECT_EQ(loadErrorOf(buildPlan(overlapPlan(2, true)), "async"), "");
  EXPECT_EQ(loadErrorOf(buildPlan(overlapPlan(4, true)), "async"), "");
}

TEST(AsyncLoader, RejectsAWaitForAnEventNotRecordedBefore) {
  AsyncPlan spec;
  spec.buffers = {8};
  spec.steps = {wait(2, 0), record(2, 1)};
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(spec), "async"),
                       "step 0 waits on stream 0 for event 2 ('e2'), which "
                       "no step of entry 'step' records before it"));
  // Recorded by another entry: each entry starts afresh.
  spec.steps = {record(1, 1), wait(1, 0)};
  spec.cuts = {1};
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(spec), "async"),
                       "step 1 waits on stream 0 for event 1 ('e1'), which "
                       "no step of entry 'e1' records before it"));
  spec.steps = {record(7, 1)};
  spec.cuts.clear();
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(spec), "async"),
                       "step 0 names event 7 / stream 1 out of range"));
}

TEST(AsyncLoader, ACpuPlanLaunchesKernelsOnTheComputeStreamOnly) {
  AsyncPlan spec;
  spec.buffers = {8};
  spec.steps = {launch("zero", {0}, 1)};
  std::string error;
  std::unique_ptr<LoadedPlan> plan =
      loadPlanBytes(buildPlan(spec), "async", error);
  ASSERT_NE(plan, nullptr) << error;
  EXPECT_EQ(openAtRank(*plan, 0, error), nullptr);
  EXPECT_TRUE(mentions(error, "step 0 (zero) runs on stream 'comm' (1), but "
                              "a CPU plan launches kernels on stream 0 and "
                              "host streams only"));
}

//===----------------------------------------------------------------------===//
// Several ranks (mpirun)
//===----------------------------------------------------------------------===//

namespace {

/// The world communicator of an mpirun launch, or null (the test skips).
std::unique_ptr<comm::Communicator> joinWorld(std::string &why) {
  comm::LaunchInfo launch;
  why = comm::detectLaunch(launch);
  if (!why.empty() || launch.worldSize < 2) {
    why = "runs under mpirun -np 2 or more";
    return nullptr;
  }
  return comm::createMpiCommunicator(launch, why);
}

} // namespace

TEST(AsyncRanks, OverlappedCollectivesGiveTheSynchronousResultsAndErrors) {
  std::string why;
  std::unique_ptr<comm::Communicator> world = joinWorld(why);
  if (!world) {
    GTEST_SKIP() << why;
  }
  int rank = world->rank(), size = world->size();
  AsyncPlan asyncSpec = overlapPlan(size, true);
  AsyncPlan syncSpec = overlapPlan(size, false);
  {
    Opened async, sync;
    ASSERT_EQ(open(asyncSpec, world.get(), rank, async), "");
    ASSERT_EQ(open(syncSpec, world.get(), rank, sync), "");
    for (int run = 0; run < 3; ++run) {
      fillInputs(*async.session, asyncSpec, rank);
      fillInputs(*sync.session, syncSpec, rank);
      ASSERT_EQ(async.session->recordTimeline(true), "");
      ASSERT_EQ(async.session->runEntry(0), "");
      ASSERT_EQ(sync.session->runEntry(0), "");
      for (uint32_t buffer = 0; buffer < asyncSpec.buffers.size(); ++buffer) {
        size_t bytes = static_cast<size_t>(asyncSpec.buffers[buffer]) * 4;
        EXPECT_EQ(std::memcmp(floats(*async.session, buffer),
                              floats(*sync.session, buffer), bytes),
                  0)
            << "buffer " << buffer << " run " << run;
      }
      // The all-reduce against sums formed here.
      for (int64_t i = 0; i < asyncSpec.buffers[0]; ++i) {
        float sum = 0;
        for (int r = 0; r < size; ++r) {
          sum += static_cast<float>((r + 1) * (i % 7)) * 0.5f;
        }
        EXPECT_EQ(floats(*async.session, 0)[i], sum) << "element " << i;
      }
      // The slice of the started all-reduce begins before the launches
      // between and ends by the wait.
      std::vector<Session::LaunchTiming> timeline =
          async.session->takeTimeline();
      int collective = sliceOf(timeline, 3), first = sliceOf(timeline, 7),
          consumer = sliceOf(timeline, 11);
      ASSERT_GE(collective, 0);
      ASSERT_GE(first, 0);
      ASSERT_GE(consumer, 0);
      EXPECT_LE(timeline[static_cast<size_t>(collective)].start,
                timeline[static_cast<size_t>(first)].start);
      EXPECT_LE(timeline[static_cast<size_t>(collective)].end,
                timeline[static_cast<size_t>(consumer)].start);
    }
    // The same bytes, counted the same way.
    EXPECT_EQ(async.session->bytesSent(), sync.session->bytesSent());
    EXPECT_GT(async.session->bytesSent(), 0u);
  }

  // A collective that fails to start (an average of i32, refused on every
  // rank by the communicator's checks) names its step, and the world still
  // works. (One test: MPI starts once per process.)
  AsyncPlan bad;
  bad.worldSize = size;
  bad.dtype = fb::DType::I32;
  bad.buffers = {8};
  bad.steps = {
      record(0, 0), wait(0, 1),
      collective(fb::CollectiveKind::AllReduce, 0, 0, 1, fb::Reduction::Avg),
      record(1, 1), wait(1, 0)};
  {
    Opened opened;
    ASSERT_EQ(open(bad, world.get(), rank, opened), "");
    EXPECT_TRUE(mentions(opened.session->runEntry(0),
                         "step 2 (collective on stream 1, AllReduce): "
                         "allReduce on rank " +
                             std::to_string(rank) + " of " +
                             std::to_string(size) +
                             ": cannot reduce an average of i32"));
  }
  float one = 1, sum = 0;
  ASSERT_EQ(world->allReduce(&one, &sum, 1, DType::F32, comm::ReduceOp::Sum),
            "");
  EXPECT_EQ(sum, static_cast<float>(size));
  ASSERT_EQ(world->barrier(), "");
}
