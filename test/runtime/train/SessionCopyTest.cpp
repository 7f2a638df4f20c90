//===- SessionCopyTest.cpp - arena kinds and copy steps in the runtime ----===//
//
// Placement (issue 18): a plan's arenas have kinds (Device, HostPinned,
// Host) and `Copy` steps move tensors between them on any stream. On the
// CPU every kind is ordinary host memory, but each arena is its own
// allocation, the session reports bytes per side (device: Device arenas,
// host: the others), and a copy is a memcpy at its place in program order.
//
// Plans are built in memory with the flatbuffers API: f32 buffers packed
// into named arenas, launches of mul/add/zero, copies, records and waits on
// two streams (compute, copy). The tests check that values sent device ->
// host -> device between launches (on compute, or on the copy stream with
// events) give the bits of the same plan without the copies, that
// bytesCopied counts exactly the host<->device bytes, the allocation split,
// the timeline's and the profile's copy slices, rank-strided copies, and
// every loader error (sizes, kinds against arenas, streams, overlap, and a
// GPU plan's launches and collectives on host arenas).
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/Timeline.h"
#include "runtime/comm/Communicator.h"
#include "test/runtime/train/StepSpecTestUtil.h"
#include "test/runtime/train/TrainTestUtil.h"
#include "test/runtime/train/ZeroTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace tailor::runtime;
using namespace tailor::train::testing;
namespace fb = tailor::plan;

namespace {

/// One step of a test plan.
/// An f32 buffer of `count` elements in arena `arena`, packed after the
/// arena's previous buffers (64-byte aligned) unless `offset` >= 0; `size`
/// 0 is its tensor's bytes.
struct BufferSpec {
  uint32_t arena = 0;
  int64_t count = 0;
  int64_t offset = -1;
  uint64_t size = 0;
  uint64_t rankStride = 0;
};

struct ArenaSpec {
  std::string name;
  fb::ArenaKind kind = fb::ArenaKind::Device;
};

/// A plan of arenas, buffers and steps on streams compute (0) and copy
/// (1) with events e0..e3, one entry "step".
struct CopyPlan {
  fb::Backend backend = fb::Backend::Cpu;
  int sm = 0;
  /// CUDA plans: one device image.
  fb::DeviceCodeKind imageKind = fb::DeviceCodeKind::Ptx;
  std::string imageArch;
  std::vector<uint8_t> image;
  int worldSize = 1;
  std::vector<ArenaSpec> arenas = {{"compute", fb::ArenaKind::Device},
                                   {"offload", fb::ArenaKind::Host},
                                   {"pinned", fb::ArenaKind::HostPinned}};
  std::vector<BufferSpec> buffers;
  std::vector<StepSpec> steps;
  /// Adds stream 2, a Host stream (optimizer offload's; plan 1.16: it runs
  /// beside the others, on a thread of its own).
  bool hostStream = false;
};

std::vector<uint8_t> buildPlan(const CopyPlan &spec) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<uint64_t> arenaSize(spec.arenas.size(), 0);
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (const BufferSpec &buffer : spec.buffers) {
    uint64_t bytes = static_cast<uint64_t>(buffer.count) * 4;
    uint64_t size = buffer.size ? buffer.size : bytes;
    uint64_t offset = static_cast<uint64_t>(buffer.offset);
    uint64_t extent =
        size + buffer.rankStride * static_cast<uint64_t>(spec.worldSize - 1);
    if (buffer.offset < 0) {
      offset = arenaSize[buffer.arena];
    }
    arenaSize[buffer.arena] = std::max(arenaSize[buffer.arena],
                                       (offset + extent + 63) / 64 * 64);
    buffers.push_back(fb::CreateBuffer(
        b, buffer.arena, offset, size, fb::DType::F32,
        b.CreateVector(std::vector<int64_t>{buffer.count}),
        buffer.rankStride));
  }
  std::vector<flatbuffers::Offset<fb::Arena>> arenas;
  for (size_t a = 0; a < spec.arenas.size(); ++a) {
    arenas.push_back(fb::CreateArena(
        b, b.CreateString(spec.arenas[a].name), spec.arenas[a].kind,
        fb::Category::Activations, std::max<uint64_t>(arenaSize[a], 64), 64));
  }
  std::vector<std::string> kernelNames;
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  std::vector<int> group(static_cast<size_t>(spec.worldSize));
  for (int r = 0; r < spec.worldSize; ++r) {
    group[static_cast<size_t>(r)] = r;
  }
  for (const StepSpec &step : spec.steps) {
    uint32_t kernel = 0;
    if (step.kind == StepSpec::Launch) {
      auto it = std::find(kernelNames.begin(), kernelNames.end(), step.kernel);
      kernel = static_cast<uint32_t>(it - kernelNames.begin());
      if (it == kernelNames.end()) {
        kernelNames.push_back(step.kernel);
      }
    }
    ops.push_back(buildStep(b, step, kernel, group, "tg.test"));
  }
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (const std::string &name : kernelNames) {
    kernels.push_back(fb::CreateKernel(b, b.CreateString(name),
                                       name == "zero" ? 1 : 3));
  }
  std::vector<flatbuffers::Offset<fb::Stream>> streams = {
      fb::CreateStream(b, b.CreateString("compute")),
      fb::CreateStream(b, b.CreateString("copy"))};
  if (spec.hostStream) {
    streams.push_back(fb::CreateStream(b, b.CreateString("host"),
                                       fb::StreamKind::Host));
  }
  std::vector<flatbuffers::Offset<fb::Event>> events;
  for (int e = 0; e < 4; ++e) {
    events.push_back(
        fb::CreateEvent(b, b.CreateString("e" + std::to_string(e))));
  }
  std::vector<flatbuffers::Offset<fb::Entry>> entries = {fb::CreateEntry(
      b, b.CreateString("step"), 0, static_cast<uint32_t>(ops.size()))};
  std::vector<flatbuffers::Offset<fb::DeviceCode>> images;
  if (!spec.image.empty()) {
    images.push_back(fb::CreateDeviceCode(
        b, spec.imageKind, b.CreateString(spec.imageArch), spec.sm,
        b.CreateVector(spec.image), 0, b.CreateString("test")));
  }
  auto plan = fb::CreatePlan(
      b, kPlanVersion, b.CreateString("SessionCopyTest"), b.CreateString("toy"),
      fb::CreateTarget(b, spec.backend, b.CreateString("cpu"), spec.sm, 1), 0,
      spec.worldSize, b.CreateVector(arenas), b.CreateVector(buffers), 0, 0,
      b.CreateVector(kernels), b.CreateVector(streams), b.CreateVector(events),
      b.CreateVector(ops), 0, 0, 0, b.CreateVector(entries), 0, 0,
      images.empty() ? 0 : b.CreateVector(images));
  b.FinishSizePrefixed(plan, fb::PlanIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(),
                              b.GetBufferPointer() + b.GetSize());
}

/// Elements per buffer: odd, so no copy is a round number of lines.
constexpr int64_t kCount = 37;
constexpr uint64_t kBytes = kCount * 4;

/// Buffers of the round-trip plans: 0 a, 1 b, 2 c, 3 d, 4 e (compute, a
/// Device arena), 5 h (Host), 6 p (HostPinned), 7 c2 (compute).
std::vector<BufferSpec> roundTripBuffers() {
  return {{0, kCount}, {0, kCount}, {0, kCount}, {0, kCount},
          {0, kCount}, {1, kCount}, {2, kCount}, {0, kCount}};
}

/// c = a * b; d = c + a; e = d * c. With `copies`, c makes a round trip
/// between the launches that read it: device -> host -> pinned -> device
/// (c wiped in between), then device -> device and back (wiped again).
/// `stream` 1 puts the copies on the copy stream, ordered by events: the
/// copy stream waits for compute before each copy, compute for it after.
CopyPlan roundTripPlan(bool copies, uint32_t stream = 0) {
  CopyPlan spec;
  spec.buffers = roundTripBuffers();
  auto &steps = spec.steps;
  // Copies on the copy stream: compute's work so far first, then the copy,
  // then compute waits for it (events e0/e1 before, e2/e3 after).
  auto onCopyStream = [&](std::vector<StepSpec> body, uint32_t before,
                          uint32_t after) {
    if (stream != 0) {
      steps.push_back(record(before, 0));
      steps.push_back(wait(before, stream));
    }
    steps.insert(steps.end(), body.begin(), body.end());
    if (stream != 0) {
      steps.push_back(record(after, stream));
      steps.push_back(wait(after, 0));
    }
  };
  steps.push_back(launch("mul", {0, 1, 2}));
  if (copies) {
    onCopyStream({copy(fb::CopyKind::DeviceToHost, 2, 5, stream)}, 0, 2);
    steps.push_back(launch("zero", {2}));
    onCopyStream({copy(fb::CopyKind::HostToHost, 5, 6, stream),
                  copy(fb::CopyKind::HostToDevice, 6, 2, stream)},
                 1, 3);
  }
  steps.push_back(launch("add", {2, 0, 3}));
  if (copies) {
    onCopyStream({copy(fb::CopyKind::DeviceToDevice, 2, 7, stream)}, 0, 2);
    steps.push_back(launch("zero", {2}));
    onCopyStream({copy(fb::CopyKind::DeviceToDevice, 7, 2, stream)}, 1, 3);
  }
  steps.push_back(launch("mul", {3, 2, 4}));
  return spec;
}

float *floats(Session &session, uint32_t buffer) {
  return static_cast<float *>(session.bufferData(buffer));
}

/// Values whose products round (so a lost or stale copy shows in the bits).
void fillInputs(Session &session) {
  for (uint32_t buffer : {0u, 1u}) {
    float *data = floats(session, buffer);
    for (int64_t i = 0; i < kCount; ++i) {
      data[i] = 0.1f * static_cast<float>(i + 1) + 0.37f * buffer - 1.3f;
    }
  }
}

/// A loaded plan and a session of it.
struct Opened {
  std::unique_ptr<LoadedPlan> plan;
  std::unique_ptr<Session> session;
};

std::string open(const CopyPlan &spec, Opened &out, int rank = 0) {
  std::string error;
  out.plan = loadPlanBytes(buildPlan(spec), "copies", error);
  if (!out.plan) {
    return error;
  }
  out.session = openAtRank(*out.plan, rank, error);
  return error;
}

} // namespace

//===----------------------------------------------------------------------===//
// Running copies on the CPU
//===----------------------------------------------------------------------===//

TEST(SessionCopy, RoundTripsThroughHostArenasGiveTheSameBits) {
  for (uint32_t stream : {0u, 1u}) {
    SCOPED_TRACE("copies on stream " + std::to_string(stream));
    Opened plain, placed;
    ASSERT_EQ(open(roundTripPlan(false), plain), "");
    ASSERT_EQ(open(roundTripPlan(true, stream), placed), "");
    fillInputs(*plain.session);
    fillInputs(*placed.session);
    ASSERT_EQ(plain.session->runEntry(0), "");
    ASSERT_EQ(placed.session->runEntry(0), "");
    for (uint32_t buffer : {2u, 3u, 4u}) {
      EXPECT_EQ(std::memcmp(floats(*plain.session, buffer),
                            floats(*placed.session, buffer), kBytes),
                0)
          << "buffer " << buffer;
    }
    // The copies really went through the host arenas.
    EXPECT_EQ(std::memcmp(floats(*placed.session, 5),
                          floats(*plain.session, 2), kBytes),
              0);
    EXPECT_EQ(std::memcmp(floats(*placed.session, 6),
                          floats(*plain.session, 2), kBytes),
              0);
    // e = d * c read the restored c, not the wiped one: not all zero.
    EXPECT_NE(floats(*placed.session, 4)[5], 0.0f);
  }
}

/// Host-stream plans: c = a * b on compute, copied to the host (h); on the
/// host stream p = h * h, ordered after compute by e0 and followed by e1;
/// compute copies p back into c (after waiting for e1 when `waits`) and
/// computes e = c + a.
CopyPlan hostStreamPlan(bool waits) {
  CopyPlan spec;
  spec.hostStream = true;
  spec.buffers = roundTripBuffers();
  spec.steps = {launch("mul", {0, 1, 2}),
                copy(fb::CopyKind::DeviceToHost, 2, 5),
                record(0, 0),
                wait(0, 2),
                launch("mul", {5, 5, 6}, 2),
                record(1, 2)};
  if (waits) {
    spec.steps.push_back(wait(1, 0));
  }
  spec.steps.push_back(copy(fb::CopyKind::HostToDevice, 6, 2));
  spec.steps.push_back(launch("add", {2, 0, 4}));
  return spec;
}

TEST(SessionCopy, TheHostStreamRunsBesideComputeOrderedByItsEvents) {
  Opened opened;
  ASSERT_EQ(open(hostStreamPlan(true), opened), "");
  fillInputs(*opened.session);
  for (int run = 0; run < 3; ++run) {
    ASSERT_EQ(opened.session->runEntry(0), "");
    const float *a = floats(*opened.session, 0);
    const float *b = floats(*opened.session, 1);
    const float *e = floats(*opened.session, 4);
    for (int64_t i = 0; i < kCount; ++i) {
      float c = a[i] * b[i];
      ASSERT_EQ(e[i], c * c + a[i]) << "element " << i;
    }
  }
}

TEST(SessionCopy, ReadingAHostLaunchsOutputBeforeItsEventIsAnError) {
  // Without the wait for e1 the copy back races the host launch: the
  // session refuses it rather than read whatever is there.
  Opened opened;
  ASSERT_EQ(open(hostStreamPlan(false), opened), "");
  fillInputs(*opened.session);
  std::string problem = opened.session->runEntry(0);
  EXPECT_NE(problem.find("a host launch the compute stream has not waited "
                         "for"),
            std::string::npos)
      << problem;
}

TEST(SessionCopy, WithoutTheCopyBackTheResultDiffers) {
  // The control for the test above: the wipe alone changes the result,
  // so matching bits mean the copies restored c.
  CopyPlan spec = roundTripPlan(false);
  spec.steps.insert(spec.steps.begin() + 1, launch("zero", {2}));
  Opened plain, wiped;
  ASSERT_EQ(open(roundTripPlan(false), plain), "");
  ASSERT_EQ(open(spec, wiped), "");
  fillInputs(*plain.session);
  fillInputs(*wiped.session);
  ASSERT_EQ(plain.session->runEntry(0), "");
  ASSERT_EQ(wiped.session->runEntry(0), "");
  EXPECT_NE(std::memcmp(floats(*plain.session, 4), floats(*wiped.session, 4),
                        kBytes),
            0);
}

TEST(SessionCopy, CountsExactlyTheBytesBetweenHostAndDevice) {
  Opened opened;
  ASSERT_EQ(open(roundTripPlan(true, 1), opened), "");
  fillInputs(*opened.session);
  EXPECT_EQ(opened.session->bytesCopied(), 0u);
  // One DeviceToHost and one HostToDevice per run; HostToHost and the two
  // DeviceToDevice copies stay on one side and do not count.
  for (uint64_t run = 1; run <= 3; ++run) {
    ASSERT_EQ(opened.session->runEntry(0), "");
    EXPECT_EQ(opened.session->bytesCopied(), run * 2 * kBytes);
  }
  Opened plain;
  ASSERT_EQ(open(roundTripPlan(false), plain), "");
  ASSERT_EQ(plain.session->runEntry(0), "");
  EXPECT_EQ(plain.session->bytesCopied(), 0u);
}

TEST(SessionCopy, AllocatesEveryArenaApartAndReportsBytesPerSide) {
  Opened opened;
  ASSERT_EQ(open(roundTripPlan(true), opened), "");
  // Six 148-byte buffers in the Device arena (each padded to 192), one in
  // each host arena (192).
  EXPECT_EQ(opened.session->allocatedDeviceBytes(), 6u * 192);
  EXPECT_EQ(opened.session->allocatedHostBytes(), 2u * 192);
  EXPECT_EQ(totalBytes(opened.session->allocatedBytes()), 8u * 192);
  // Separate allocations: the host buffers lie outside the device arena.
  auto *device = static_cast<uint8_t *>(opened.session->bufferData(0));
  for (uint32_t host : {5u, 6u}) {
    auto *bytes = static_cast<uint8_t *>(opened.session->bufferData(host));
    EXPECT_TRUE(bytes + kBytes <= device || bytes >= device + 6 * 192)
        << "buffer " << host;
  }
  // A plan of Host arenas only (the CPU plans of before) is all host.
  CopyPlan allHost = roundTripPlan(false);
  allHost.arenas[0].kind = fb::ArenaKind::Host;
  Opened old;
  ASSERT_EQ(open(allHost, old), "");
  EXPECT_EQ(old.session->allocatedDeviceBytes(), 0u);
  EXPECT_EQ(old.session->allocatedHostBytes(), 8u * 192);
}

TEST(SessionCopy, RankStridedBuffersCopyThisRanksView) {
  // Two ranks: buffer 0 is each rank's chunk of a device bucket (rank
  // stride = its size); rank 1 copies its own chunk out and back.
  CopyPlan spec;
  spec.worldSize = 2;
  spec.buffers = {{0, 4, 0, 0, 16}, {1, 4}, {0, 8, 0}, {0, 4, 64}};
  spec.steps = {copy(fb::CopyKind::DeviceToHost, 0, 1),
                copy(fb::CopyKind::HostToDevice, 1, 3)};
  Opened opened;
  ASSERT_EQ(open(spec, opened, /*rank=*/1), "");
  float *bucket = floats(*opened.session, 2);
  for (int i = 0; i < 8; ++i) {
    bucket[i] = static_cast<float>(i);
  }
  ASSERT_EQ(opened.session->runEntry(0), "");
  const float *host = floats(*opened.session, 1);
  const float *back = floats(*opened.session, 3);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(host[i], static_cast<float>(4 + i));
    EXPECT_EQ(back[i], static_cast<float>(4 + i));
  }
  EXPECT_EQ(opened.session->bytesCopied(), 32u);
}

TEST(SessionCopy, TimelineHasACopySliceOnItsStreamsTrack) {
  CopyPlan spec = roundTripPlan(true, 1);
  Opened opened;
  ASSERT_EQ(open(spec, opened), "");
  fillInputs(*opened.session);
  ASSERT_EQ(opened.session->recordTimeline(true), "");
  ASSERT_EQ(opened.session->runEntry(0), "");
  std::vector<Session::LaunchTiming> timeline =
      opened.session->takeTimeline();
  std::vector<uint32_t> copySteps;
  for (uint32_t i = 0; i < spec.steps.size(); ++i) {
    if (spec.steps[i].kind == StepSpec::Copy) {
      copySteps.push_back(i);
    }
  }
  ASSERT_EQ(copySteps.size(), 5u);
  for (uint32_t step : copySteps) {
    EXPECT_TRUE(std::any_of(timeline.begin(), timeline.end(),
                            [&](const Session::LaunchTiming &timing) {
                              return timing.step == step &&
                                     timing.end >= timing.start;
                            }))
        << "step " << step;
  }
  TempDir dir("copy-trace");
  std::string path = dir.path + "/measured.json";
  MeasuredStep measured;
  measured.step = 1;
  measured.launches = timeline;
  ASSERT_EQ(writeMeasuredTrace(*opened.plan, {measured}, path), "");
  std::istringstream trace(readFile(path));
  std::map<std::string, int> slices;
  std::string line;
  while (std::getline(trace, line)) {
    for (const char *name : {"copy_h2d", "copy_d2h", "copy_d2d", "copy_h2h"}) {
      if (line.find("\"name\": \"" + std::string(name) + "\"") !=
          std::string::npos) {
        // The copy stream is stream 1, track (tid) 2.
        EXPECT_NE(line.find("\"tid\": 2,"), std::string::npos) << line;
        EXPECT_NE(line.find(std::to_string(kBytes) + " B, buffer"),
                  std::string::npos)
            << line;
        ++slices[name];
      }
    }
  }
  EXPECT_EQ(slices["copy_d2h"], 1);
  EXPECT_EQ(slices["copy_h2h"], 1);
  EXPECT_EQ(slices["copy_h2d"], 1);
  EXPECT_EQ(slices["copy_d2d"], 2);
}

TEST(SessionCopy, ProfileCountsTheCopies) {
  ::setenv("TAILOR_PROFILE", "1", 1);
  testing::internal::CaptureStderr();
  {
    Opened opened;
    std::string error = open(roundTripPlan(true, 1), opened);
    if (error.empty()) {
      fillInputs(*opened.session);
      error = opened.session->runEntry(0);
      if (error.empty()) {
        error = opened.session->runEntry(0);
      }
    }
    EXPECT_EQ(error, "");
  }
  std::string report = testing::internal::GetCapturedStderr();
  ::unsetenv("TAILOR_PROFILE");
  // Two runs: one DeviceToHost per run, two DeviceToDevice.
  auto row = [&](const std::string &name) {
    size_t at = report.find("  " + name + " ");
    return at == std::string::npos
               ? std::string()
               : report.substr(at, report.find('\n', at) - at);
  };
  EXPECT_NE(row("copy_d2h").find(" 2 calls"), std::string::npos) << report;
  EXPECT_NE(row("copy_h2d").find(" 2 calls"), std::string::npos) << report;
  EXPECT_NE(row("copy_h2h").find(" 2 calls"), std::string::npos) << report;
  EXPECT_NE(row("copy_d2d").find(" 4 calls"), std::string::npos) << report;
}

//===----------------------------------------------------------------------===//
// Copies beside collectives in flight
//===----------------------------------------------------------------------===//

namespace {

/// A started all-reduce of the fake: doubles its buffer (what 2 ranks
/// holding the same values get) only when waited for.
class FakePending final : public comm::PendingCollective {
public:
  explicit FakePending(comm::CollectiveCall call) : call(call) {}
  std::string test(bool &done) override {
    done = finished;
    return "";
  }
  std::string wait() override {
    if (!finished) {
      finished = true;
      auto *out = static_cast<float *>(call.output);
      const auto *in = static_cast<const float *>(call.input);
      for (size_t i = 0; i < call.outputElements; ++i) {
        out[i] = 2 * in[i];
      }
    }
    return "";
  }

private:
  comm::CollectiveCall call;
  bool finished = false;
};

/// Rank 0 of a world of 2 whose started collectives complete when waited.
class FakeWorld final : public comm::Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char *backend() const override { return "fake"; }
  std::string allReduce(const void *, void *, size_t, DType, comm::ReduceOp,
                        void *) override {
    return "unused";
  }
  std::string reduceScatter(const void *, void *, size_t, DType,
                            comm::ReduceOp, void *) override {
    return "unused";
  }
  std::string allGather(const void *, void *, size_t, DType, void *) override {
    return "unused";
  }
  std::string broadcast(void *, size_t, DType, int, void *) override {
    return "unused";
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
    pending = std::make_unique<FakePending>(call);
    return "";
  }
};

/// g (buffer 0, Device) all-reduced in place on stream 1, then `after`.
CopyPlan allReduceThen(std::vector<StepSpec> after) {
  CopyPlan spec;
  spec.worldSize = 2;
  spec.buffers = roundTripBuffers();
  StepSpec allReduce;
  allReduce.kind = StepSpec::Collective;
  allReduce.operands = {0, 0};
  allReduce.stream = 1;
  spec.steps = {record(0, 0), wait(0, 1), allReduce};
  spec.steps.insert(spec.steps.end(), after.begin(), after.end());
  return spec;
}

} // namespace

TEST(SessionCopy, ACopyOnTheCollectivesStreamRunsAfterIt) {
  // ZeRO-Offload's pattern: the reduced gradient goes to the host on the
  // stream that reduced it, then compute waits for the copy.
  CopyPlan spec =
      allReduceThen({copy(fb::CopyKind::DeviceToHost, 0, 5, 1), record(1, 1),
                     wait(1, 0), launch("add", {5, 5, 1})});
  FakeWorld world;
  Opened opened;
  ASSERT_EQ(open(spec, opened), "");
  ASSERT_EQ(opened.session->setCommunicator(&world), "");
  fillInputs(*opened.session);
  std::vector<float> g(floats(*opened.session, 0),
                       floats(*opened.session, 0) + kCount);
  ASSERT_EQ(opened.session->runEntry(0), "");
  const float *host = floats(*opened.session, 5);
  const float *sum = floats(*opened.session, 1);
  for (int64_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(host[i], 2 * g[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(sum[i], 4 * g[static_cast<size_t>(i)]) << i;
  }
  EXPECT_EQ(opened.session->bytesCopied(), kBytes);
}

TEST(SessionCopy, ACopyRacingACollectiveOfAnotherStreamIsAnError) {
  // Compute copies g while the all-reduce on stream 1 may still write it.
  CopyPlan spec = allReduceThen({copy(fb::CopyKind::DeviceToHost, 0, 5, 0)});
  FakeWorld world;
  Opened opened;
  ASSERT_EQ(open(spec, opened), "");
  ASSERT_EQ(opened.session->setCommunicator(&world), "");
  EXPECT_TRUE(mentions(opened.session->runEntry(0),
                       "step 3 (copy_d2h) shares bytes with step 2 "
                       "(collective on stream 1, AllReduce), which its "
                       "stream has not waited for"));
  // A copy of other bytes runs beside it.
  spec = allReduceThen({copy(fb::CopyKind::DeviceToHost, 1, 5, 0)});
  ASSERT_EQ(open(spec, opened), "");
  ASSERT_EQ(opened.session->setCommunicator(&world), "");
  EXPECT_EQ(opened.session->runEntry(0), "");
}

//===----------------------------------------------------------------------===//
// The loader's checks of copies and arena kinds
//===----------------------------------------------------------------------===//

/// A plan of the round-trip buffers with the one step `step`.
CopyPlan oneStep(StepSpec step) {
  CopyPlan spec;
  spec.buffers = roundTripBuffers();
  spec.steps = {std::move(step)};
  return spec;
}

TEST(SessionCopyLoader, RejectsCopiesOfOtherSizes) {
  CopyPlan spec = oneStep(copy(fb::CopyKind::DeviceToHost, 0, 5));
  spec.buffers[5].count = kCount + 1;
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(spec), "copies"),
                       "step 0 (copy DeviceToHost) copies buffer 0 (148 "
                       "bytes, a tensor of 148) into buffer 5 (152 bytes, a "
                       "tensor of 152); a copy needs buffers of one size"));
  // The same tensor in a view of another size.
  spec.buffers[5] = {1, kCount, -1, 160};
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(spec), "copies"),
                       "into buffer 5 (160 bytes, a tensor of 148)"));
}

TEST(SessionCopyLoader, RejectsKindsThatDoNotMatchTheArenas) {
  struct Case {
    StepSpec step;
    const char *message;
  };
  std::vector<Case> cases = {
      {copy(fb::CopyKind::HostToDevice, 0, 2),
       "step 0 (copy HostToDevice) copies buffer 0 (arena 'compute', Device) "
       "to buffer 2 (arena 'compute', Device), but it needs a host source "
       "and a device target"},
      {copy(fb::CopyKind::DeviceToHost, 0, 2),
       "to buffer 2 (arena 'compute', Device), but it needs a device source "
       "and a host target"},
      {copy(fb::CopyKind::DeviceToDevice, 0, 6),
       "to buffer 6 (arena 'pinned', HostPinned), but it needs a device "
       "source and a device target"},
      {copy(fb::CopyKind::HostToHost, 0, 5),
       "copies buffer 0 (arena 'compute', Device) to buffer 5 (arena "
       "'offload', Host), but it needs a host source and a host target"},
      {copy(fb::CopyKind::HostToDevice, 6, 5),
       "but it needs a host source and a device target"},
  };
  for (const Case &c : cases) {
    EXPECT_TRUE(
        mentions(loadErrorOf(buildPlan(oneStep(c.step)), "copies"), c.message));
  }
  // The right kinds load.
  for (StepSpec step : {copy(fb::CopyKind::HostToDevice, 5, 0),
                        copy(fb::CopyKind::HostToDevice, 6, 0),
                        copy(fb::CopyKind::DeviceToHost, 0, 6),
                        copy(fb::CopyKind::DeviceToDevice, 0, 1),
                        copy(fb::CopyKind::HostToHost, 6, 5)}) {
    EXPECT_EQ(loadErrorOf(buildPlan(oneStep(step)), "copies"), "");
  }
}

TEST(SessionCopyLoader, RejectsBadStreamsBuffersKindsAndOverlap) {
  EXPECT_TRUE(mentions(
      loadErrorOf(buildPlan(oneStep(copy(fb::CopyKind::DeviceToHost, 0, 5, 2))),
                  "copies"),
      "step 0 (copy DeviceToHost) runs on stream 2 of 2"));
  EXPECT_TRUE(mentions(
      loadErrorOf(buildPlan(oneStep(copy(fb::CopyKind::DeviceToHost, 0, 8))),
                  "copies"),
      "step 0 (copy DeviceToHost) names buffers 0 and 8 of 8"));
  StepSpec unknown = copy(fb::CopyKind::DeviceToHost, 0, 5);
  unknown.copy = static_cast<fb::CopyKind>(9);
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(oneStep(unknown)), "copies"),
                       "step 0 (copy) has an unknown kind 9"));
  // A device-to-device copy onto a view that starts inside its source.
  CopyPlan overlap = oneStep(copy(fb::CopyKind::DeviceToDevice, 0, 8));
  overlap.buffers.push_back({0, kCount, 64});
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(overlap), "copies"),
                       "copies buffer 0 into buffer 8, which overlap in "
                       "arena 'compute'"));
  overlap.steps = {copy(fb::CopyKind::DeviceToDevice, 0, 0)};
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(overlap), "copies"),
                       "copies buffer 0 into buffer 0, which overlap"));
  CopyPlan badKind = oneStep(launch("zero", {0}));
  badKind.arenas[1].kind = static_cast<fb::ArenaKind>(7);
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(badKind), "copies"),
                       "arena 'offload' has an unknown kind 7"));
}

TEST(SessionCopyLoader, CpuLaunchesMayUseAnyArenaButOnlyStreamZero) {
  // On the CPU every kind is host memory: a kernel may read a Host arena.
  CopyPlan spec = oneStep(launch("add", {5, 6, 0}));
  Opened opened;
  EXPECT_EQ(open(spec, opened), "");
  spec.steps[0].stream = 1;
  std::string error = open(spec, opened);
  EXPECT_TRUE(mentions(error, "a CPU plan launches kernels on stream 0 and "
                              "host streams only (other streams carry "
                              "collectives and copies)"));
}

/// A PTX image for sm_80 without functions: enough for a CUDA plan whose
/// steps need no kernel to pass the device-code checks.
CopyPlan gpuPlan(std::vector<StepSpec> steps) {
  CopyPlan spec;
  spec.backend = fb::Backend::Cuda;
  spec.sm = 80;
  spec.imageArch = "compute_80";
  std::string ptx = ".version 8.0\n.target sm_80\n.address_size 64\n";
  spec.image.assign(ptx.begin(), ptx.end());
  spec.buffers = roundTripBuffers();
  spec.steps = std::move(steps);
  return spec;
}

TEST(SessionCopyLoader, GpuCollectivesRunOnDeviceArenasOnly) {
  EXPECT_TRUE(mentions(
      loadErrorOf(buildPlan(gpuPlan({{StepSpec::Collective, "", {5, 5}}})),
                  "gpu"),
      "step 0 (AllReduce) uses buffer 5 (arena 'offload', Host) on a GPU, "
      "where kernels and collectives run on Device arenas only"));
  EXPECT_TRUE(mentions(
      loadErrorOf(buildPlan(gpuPlan({{StepSpec::Collective, "", {0, 6}}})),
                  "gpu"),
      "uses buffer 6 (arena 'pinned', HostPinned) on a GPU"));
  // Device buffers, and copies that cross, load.
  EXPECT_EQ(loadErrorOf(buildPlan(gpuPlan({{StepSpec::Collective, "", {0, 1}},
                                           copy(fb::CopyKind::DeviceToHost, 0,
                                                5, 1),
                                           copy(fb::CopyKind::HostToDevice, 6,
                                                1, 1)})),
                        "gpu"),
            "");
}

TEST(SessionCopyLoader, GpuLaunchesRunOnDeviceArenasOnly) {
#ifdef TAILOR_TEST_CUDA_MODULE_DIR
  std::ifstream file(std::string(TAILOR_TEST_CUDA_MODULE_DIR) +
                         "/elementwise.sm_80.cubin",
                     std::ios::binary);
  std::vector<uint8_t> cubin((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>());
  ASSERT_FALSE(cubin.empty());
  CopyPlan spec = gpuPlan({launch("add", {0, 5, 1})});
  spec.imageKind = fb::DeviceCodeKind::Cubin;
  spec.imageArch = "sm_80";
  spec.image = cubin;
  EXPECT_TRUE(mentions(loadErrorOf(buildPlan(spec), "gpu"),
                       "step 0 (add, tg.test) uses buffer 5 (arena 'offload', "
                       "Host) on a GPU"));
  spec.steps = {copy(fb::CopyKind::HostToDevice, 5, 2),
                launch("add", {0, 2, 1})};
  EXPECT_EQ(loadErrorOf(buildPlan(spec), "gpu"), "");
#else
  GTEST_SKIP() << "built without CUDA: no cubin for a launch";
#endif
}
