//===- ZeroRuntimeTest.cpp - rank-strided buffers and sharded states ------===//
//
// What the runtime does for ZeRO (plan 1.7), on small plans built with the
// flatbuffers API: the loader's checks of rank strides, of the in-place
// all-gather and of sharded states; sessions placing rank-strided buffers
// by their rank; and the checkpoint layout of a sharded state (one slot per
// member, as DDP names it) with its gather and scatter. `ZeroRanks.*` run
// the plan's collectives and the gather under mpirun (ctest: -np 2 and 4,
// label multirank); in a plain run they skip.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/comm/Communicator.h"
#include "runtime/train/Checkpoint.h"
#include "test/runtime/train/ZeroTestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

using namespace tailor::runtime;
using namespace tailor::train;
using namespace tailor::train::testing;
namespace fb = tailor::plan;

namespace {

/// The knobs of the test plan. Parameters a f32[2, 3] and b f32[5] lie in
/// one flat bucket of `flat` elements (a at 0, b at 6); each of the
/// `group`'s ranks holds flat / group.size elements of two sharded states
/// (exp_avg, exp_avg_sq). Buffers:
///   0 a, 1 b                       parameters
///   2 exp_avg chunk, 3 exp_avg_sq  optimizer state
///   4 this rank's chunk of 5       activations at 0, rank-strided
///   5 the whole bucket             activations at 0
///   6 reduce-scatter input (flat)  activations at 256
///   7 reduce-scatter output        activations at 512
/// Entries: gather (all-gather 4 -> 5 in place), scatter (reduce-scatter
/// 6 -> 7), clear (zero 6).
struct ZeroPlan {
  int worldSize = 2;
  /// Buffer 4's stride in chunks (1: the in-place form) and period.
  uint64_t strideChunks = 1;
  uint32_t period = 0;
  /// Overrides of buffer 4's stride in bytes, and its offset.
  int64_t strideBytes = -1;
  uint64_t chunkOffset = 0;
  bool gather = true;
  std::vector<int> collectiveGroup; // empty: the shard group
  /// Extra launches: kernel name and operands.
  std::vector<std::pair<std::string, std::vector<uint32_t>>> launches;
  /// The shard.
  std::vector<std::string> members = {"a", "b"};
  std::vector<int64_t> offsets = {0, 6};
  std::vector<int64_t> numels = {6, 5};
  int64_t flat = 12;
  std::vector<int> group; // empty: the whole world
  fb::DType stateDType = fb::DType::F32;
  /// Chunk elements, when not flat / group size.
  int64_t chunk = -1;

  std::vector<int> shardGroup() const {
    if (!group.empty()) {
      return group;
    }
    std::vector<int> all(static_cast<size_t>(worldSize));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  int64_t chunkElements() const {
    return chunk >= 0 ? chunk
                      : flat / static_cast<int64_t>(shardGroup().size());
  }
};

std::vector<uint8_t> buildPlan(const ZeroPlan &spec) {
  flatbuffers::FlatBufferBuilder b;
  int64_t chunk = spec.chunkElements();
  uint64_t chunkBytes = static_cast<uint64_t>(chunk) * 4;
  uint64_t stateBytes = static_cast<uint64_t>(chunk) *
                        (spec.stateDType == fb::DType::F32 ? 4 : 2);
  uint64_t flatBytes = static_cast<uint64_t>(spec.flat) * 4;
  std::vector<int> collectiveGroup =
      spec.collectiveGroup.empty() ? spec.shardGroup() : spec.collectiveGroup;
  uint64_t scatteredBytes = flatBytes / collectiveGroup.size();
  std::vector<flatbuffers::Offset<fb::Arena>> arenas = {
      fb::CreateArena(b, b.CreateString("parameters"), fb::ArenaKind::Host,
                      fb::Category::Parameters, 128, 64),
      fb::CreateArena(b, b.CreateString("optimizer"), fb::ArenaKind::Host,
                      fb::Category::OptimizerState, 256, 64),
      fb::CreateArena(b, b.CreateString("activations"), fb::ArenaKind::Host,
                      fb::Category::Activations, 1024, 64)};
  auto buffer = [&](uint32_t arena, uint64_t offset, uint64_t bytes,
                    fb::DType dtype, std::vector<int64_t> shape,
                    uint64_t stride = 0, uint32_t period = 0) {
    return fb::CreateBuffer(b, arena, offset, bytes, dtype,
                            b.CreateVector(shape), stride, period);
  };
  uint64_t stride = spec.strideBytes >= 0
                        ? static_cast<uint64_t>(spec.strideBytes)
                        : spec.strideChunks * chunkBytes;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers = {
      buffer(0, 0, 24, fb::DType::F32, {2, 3}),
      buffer(0, 64, 20, fb::DType::F32, {5}),
      buffer(1, 0, stateBytes, spec.stateDType, {chunk}),
      buffer(1, 128, stateBytes, spec.stateDType, {chunk}),
      buffer(2, spec.chunkOffset, chunkBytes, fb::DType::F32, {chunk}, stride,
             spec.period),
      buffer(2, 0, flatBytes, fb::DType::F32, {spec.flat}),
      buffer(2, 256, flatBytes, fb::DType::F32, {spec.flat}),
      buffer(2, 512, scatteredBytes, fb::DType::F32,
             {static_cast<int64_t>(scatteredBytes / 4)})};
  auto zeros = [&] { return fb::CreateInit(b, fb::InitKind::Zeros); };
  std::vector<flatbuffers::Offset<fb::Parameter>> params = {
      fb::CreateParameter(b, b.CreateString("a"), 0, 0, true, zeros()),
      fb::CreateParameter(b, b.CreateString("b"), 1, 0, true, zeros())};
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels = {
      fb::CreateKernel(b, b.CreateString("zero"), 1),
      fb::CreateKernel(b, b.CreateString("accumulate"), 2)};
  auto collective = [&](fb::CollectiveKind kind, uint32_t in, uint32_t out) {
    return fb::CreateOp(b, fb::Step::Collective,
                        fb::CreateCollective(b, kind, in, out,
                                             b.CreateVector(collectiveGroup),
                                             fb::Reduction::Sum)
                            .Union());
  };
  auto launch = [&](uint32_t kernel, std::vector<uint32_t> operands) {
    return fb::CreateOp(
        b, fb::Step::Launch,
        fb::CreateLaunch(b, kernel, b.CreateVector(operands)).Union());
  };
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  std::vector<flatbuffers::Offset<fb::Entry>> entries;
  auto entry = [&](const char *name, uint32_t first) {
    entries.push_back(fb::CreateEntry(b, b.CreateString(name), first,
                                      static_cast<uint32_t>(ops.size()) -
                                          first));
  };
  if (spec.gather) {
    ops.push_back(collective(fb::CollectiveKind::AllGather, 4, 5));
  }
  entry("gather", 0);
  uint32_t first = static_cast<uint32_t>(ops.size());
  ops.push_back(collective(fb::CollectiveKind::ReduceScatter, 6, 7));
  entry("scatter", first);
  first = static_cast<uint32_t>(ops.size());
  ops.push_back(launch(0, {6}));
  for (const auto &[kernel, operands] : spec.launches) {
    ops.push_back(launch(kernel == "zero" ? 0 : 1, operands));
  }
  entry("clear", first);
  std::vector<flatbuffers::Offset<fb::State>> states;
  const char *kinds[2] = {"exp_avg", "exp_avg_sq"};
  for (uint32_t k = 0; k < 2; ++k) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> members;
    for (const std::string &member : spec.members) {
      members.push_back(b.CreateString(member));
    }
    auto shard = fb::CreateStateShard(
        b, b.CreateVector(members), b.CreateVector(spec.offsets),
        b.CreateVector(spec.numels), spec.flat,
        b.CreateVector(spec.shardGroup()));
    states.push_back(fb::CreateState(
        b, b.CreateString(std::string("zero.b0.") + kinds[k]), 2 + k,
        b.CreateString("zero.b0"), b.CreateString(kinds[k]), shard));
  }
  auto training = fb::CreateTraining(b, 1, 4, 16);
  auto plan = fb::CreatePlan(
      b, kPlanVersion, b.CreateString("ZeroRuntimeTest"),
      b.CreateString("toy"),
      fb::CreateTarget(b, fb::Backend::Cpu, b.CreateString("cpu"), 0, 1), 0,
      spec.worldSize, b.CreateVector(arenas), b.CreateVector(buffers),
      b.CreateVector(params), 0, b.CreateVector(kernels),
      b.CreateVector(std::vector<flatbuffers::Offset<fb::Stream>>{
          fb::CreateStream(b, b.CreateString("compute"))}),
      0, b.CreateVector(ops), 0, 0, 0, b.CreateVector(entries),
      b.CreateVector(states), training);
  b.FinishSizePrefixed(plan, fb::PlanIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(),
                              b.GetBufferPointer() + b.GetSize());
}

std::unique_ptr<LoadedPlan> load(const ZeroPlan &spec, std::string &error) {
  return loadPlanBytes(buildPlan(spec), "zero", error);
}

/// The loader's message for `spec` ("" when it loads).
std::string loadError(const ZeroPlan &spec) {
  return loadErrorOf(buildPlan(spec), "zero");
}

std::unique_ptr<Session> open(const LoadedPlan &plan, int rank,
                              std::string &error) {
  return openAtRank(plan, rank, error);
}

/// Runs the plan's entry `name`; "" or why it failed.
std::string runEntry(Session &session, const char *name) {
  int entry = session.findEntry(name);
  if (entry < 0) {
    return std::string("no entry ") + name;
  }
  return session.runEntry(static_cast<uint32_t>(entry));
}

float *floats(Session &session, uint32_t buffer) {
  return static_cast<float *>(session.bufferData(buffer));
}

/// A communicator that only knows its place (setCommunicator's checks).
class PlaceOnly final : public comm::Communicator {
public:
  PlaceOnly(int rank, int size) : rankValue(rank), sizeValue(size) {}
  int rank() const override { return rankValue; }
  int size() const override { return sizeValue; }
  const char *backend() const override { return "test"; }
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

private:
  int rankValue, sizeValue;
};

} // namespace

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

TEST(ZeroLoader, AcceptsRankStridesTheInPlaceGatherAndShards) {
  EXPECT_EQ(loadError(ZeroPlan()), "");
  ZeroPlan four;
  four.worldSize = 4;
  EXPECT_EQ(loadError(four), "");
  ZeroPlan one;
  one.worldSize = 1;
  EXPECT_EQ(loadError(one), "");
  // A node of 2 in a world of 4: period 2, the node's group.
  ZeroPlan node;
  node.worldSize = 4;
  node.group = {0, 1};
  node.period = 2;
  EXPECT_EQ(loadError(node), "");
}

TEST(ZeroLoader, RejectsRankStridesOutsideTheArenaOrOffTheWorld) {
  ZeroPlan period;
  period.worldSize = 4;
  period.period = 3;
  period.gather = false;
  EXPECT_TRUE(mentions(loadError(period), "buffer 4 has rank period 3, which "
                                          "does not divide the world size 4"));
  ZeroPlan beyond;
  beyond.gather = false;
  beyond.strideBytes = 1024 - 24 + 4; // rank 1's view ends 4 bytes out
  EXPECT_TRUE(mentions(loadError(beyond), "buffer 4 [0, +24) with rank stride "
                                          "1004 lies outside arena "
                                          "'activations'"));
  beyond.strideBytes = 1000; // ends exactly at the arena's end
  EXPECT_EQ(loadError(beyond), "");
  ZeroPlan huge;
  huge.gather = false;
  huge.strideBytes = int64_t(1) << 62;
  huge.worldSize = 8;
  EXPECT_TRUE(mentions(loadError(huge), "lies outside arena"));
  ZeroPlan odd;
  odd.gather = false;
  odd.strideBytes = 6;
  EXPECT_TRUE(mentions(loadError(odd), "buffer 4 rank stride 6 is not a whole "
                                       "number of its 4-byte elements"));
}

TEST(ZeroLoader, OverlapAllowsOnlyTheInPlaceGather) {
  // Not strided: the input is the output's first chunk on every rank.
  ZeroPlan flat;
  flat.strideChunks = 0;
  EXPECT_TRUE(mentions(loadError(flat), "step 0 (AllGather) reads buffer 4 "
                                        "and writes buffer 5, which partly "
                                        "overlap"));
  // Strided by two chunks: rank 1's chunk would be past its place.
  ZeroPlan twice;
  twice.strideChunks = 2;
  twice.flat = 12;
  EXPECT_TRUE(mentions(loadError(twice), "partly overlap"));
  // A period that is not the group's.
  ZeroPlan period;
  period.worldSize = 4;
  period.period = 2;
  EXPECT_TRUE(mentions(loadError(period), "partly overlap"));
  // The node form with a group that is not ranks 0..size-1.
  ZeroPlan strided;
  strided.worldSize = 4;
  strided.group = {0, 2};
  strided.period = 2;
  EXPECT_TRUE(mentions(loadError(strided), "partly overlap"));
  // Not at the output's offset.
  ZeroPlan shifted;
  shifted.chunkOffset = 8;
  EXPECT_TRUE(mentions(loadError(shifted), "partly overlap"));
}

TEST(ZeroLoader, LaunchOperandsMustBeSameOrDisjointOnEveryRank) {
  // The chunk and the whole bucket: overlapping on every rank.
  ZeroPlan whole;
  whole.launches = {{"accumulate", {4, 5}}};
  EXPECT_TRUE(mentions(loadError(whole), "passes buffers 4 and 5, which "
                                         "partly overlap"));
  // The chunk twice: the same bytes on every rank.
  ZeroPlan twice;
  twice.launches = {{"accumulate", {4, 4}}};
  EXPECT_EQ(loadError(twice), "");
  // The chunk and the reduce-scatter output elsewhere: disjoint.
  ZeroPlan apart;
  apart.launches = {{"accumulate", {4, 7}}};
  EXPECT_EQ(loadError(apart), "");
}

TEST(ZeroLoader, RejectsShardsThatDoNotDescribeTheirMembers) {
  ZeroPlan stranger;
  stranger.members = {"a", "zz"};
  EXPECT_TRUE(mentions(loadError(stranger),
                       "sharded state 'zero.b0.exp_avg': member 'zz' is not "
                       "a parameter of the plan"));
  ZeroPlan count;
  count.numels = {6, 4};
  EXPECT_TRUE(mentions(loadError(count), "member 'b' counts 4 elements, its "
                                         "parameter has 5"));
  ZeroPlan overlap;
  overlap.offsets = {0, 5};
  EXPECT_TRUE(mentions(loadError(overlap),
                       "member 'b' at [5, +5) overlaps the one before it or "
                       "leaves the flat space of 12 elements"));
  ZeroPlan descending;
  descending.offsets = {6, 0};
  EXPECT_TRUE(mentions(loadError(descending), "overlaps the one before it"));
  ZeroPlan outside;
  outside.offsets = {0, 8};
  EXPECT_TRUE(mentions(loadError(outside), "member 'b' at [8, +5)"));
  ZeroPlan lengths;
  lengths.offsets = {0};
  EXPECT_TRUE(mentions(loadError(lengths), "needs one offset and one element "
                                           "count for each of its 2 members"));
  ZeroPlan chunks;
  chunks.gather = false;
  chunks.chunk = 5; // 2 ranks x 5 != 12
  EXPECT_TRUE(mentions(loadError(chunks), "has 12 flat elements, not its 2 "
                                          "ranks' chunks of 5"));
  ZeroPlan dtype;
  dtype.stateDType = fb::DType::F16;
  EXPECT_TRUE(mentions(loadError(dtype), "member 'a' has another element type "
                                         "than the state"));
  ZeroPlan rank;
  rank.group = {0, 5};
  rank.collectiveGroup = {0, 1};
  EXPECT_TRUE(mentions(loadError(rank), "sharded state 'zero.b0.exp_avg' names "
                                        "rank 5 twice or outside the world "
                                        "of 2"));
  ZeroPlan noZero;
  noZero.worldSize = 2;
  noZero.group = {1};
  noZero.collectiveGroup = {0, 1};
  noZero.gather = false;
  noZero.chunk = 6;
  noZero.flat = 6;
  noZero.members = {"a"};
  noZero.offsets = {0};
  noZero.numels = {6};
  EXPECT_TRUE(mentions(loadError(noZero), "names a group without rank 0"));
}

//===----------------------------------------------------------------------===//
// Sessions
//===----------------------------------------------------------------------===//

TEST(ZeroSession, PlacesRankStridedBuffersByItsRank) {
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(ZeroPlan(), error);
  ASSERT_NE(plan, nullptr) << error;
  for (int rank : {0, 1}) {
    std::unique_ptr<Session> session = open(*plan, rank, error);
    ASSERT_NE(session, nullptr) << error;
    EXPECT_EQ(session->rank(), rank);
    auto *chunk = static_cast<char *>(session->bufferData(4));
    auto *whole = static_cast<char *>(session->bufferData(5));
    EXPECT_EQ(chunk - whole, rank * 24) << "rank " << rank;
    EXPECT_EQ(plan->bufferOffset(4, rank), static_cast<uint64_t>(rank) * 24);
    EXPECT_EQ(plan->bufferOffset(5, rank), 0u);
  }
  // A period of 1 puts every rank at the offset.
  ZeroPlan once;
  once.period = 1;
  once.gather = false;
  std::unique_ptr<LoadedPlan> periodic = load(once, error);
  ASSERT_NE(periodic, nullptr) << error;
  std::unique_ptr<Session> session = open(*periodic, 1, error);
  ASSERT_NE(session, nullptr) << error;
  EXPECT_EQ(session->bufferData(4), session->bufferData(5));
  // Launches resolve the rank's view: zero on buffer 4 at rank 1 clears
  // the second chunk of 5 only.
  ZeroPlan cleared;
  cleared.launches = {{"zero", {4}}};
  std::unique_ptr<LoadedPlan> clearing = load(cleared, error);
  ASSERT_NE(clearing, nullptr) << error;
  session = open(*clearing, 1, error);
  ASSERT_NE(session, nullptr) << error;
  float *whole = floats(*session, 5);
  std::iota(whole, whole + 12, 1.0f);
  ASSERT_EQ(runEntry(*session, "clear"), "");
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(whole[i], i < 6 ? i + 1.0f : 0.0f) << "element " << i;
  }
}

TEST(ZeroSession, RefusesARankOutsideTheWorldAndAnotherCommunicatorRank) {
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(ZeroPlan(), error);
  ASSERT_NE(plan, nullptr) << error;
  EXPECT_EQ(open(*plan, 2, error), nullptr);
  EXPECT_EQ(error, "zero: rank 2 is outside the plan's world of 2");
  std::unique_ptr<Session> session = open(*plan, 0, error);
  ASSERT_NE(session, nullptr) << error;
  PlaceOnly other(1, 2);
  EXPECT_EQ(session->setCommunicator(&other),
            "zero: the session runs as rank 0 but the communicator is rank 1");
  EXPECT_EQ(session->groupPosition({0, 1}), 0);
  session = open(*plan, 1, error);
  ASSERT_NE(session, nullptr) << error;
  EXPECT_EQ(session->groupPosition({0, 1}), 1);
}

//===----------------------------------------------------------------------===//
// Checkpoint layout
//===----------------------------------------------------------------------===//

TEST(ZeroCheckpoint, ShardedStatesGetOneSlotPerMemberNamedAsDdpNamesThem) {
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(ZeroPlan(), error);
  ASSERT_NE(plan, nullptr) << error;
  std::unique_ptr<Session> session = open(*plan, 1, error);
  ASSERT_NE(session, nullptr) << error;
  CheckpointLayout layout;
  ASSERT_TRUE(buildCheckpointLayout(*plan, *session, layout, error)) << error;
  ASSERT_EQ(layout.states.size(), 4u);
  ASSERT_EQ(layout.shards.size(), 2u);
  const char *names[4] = {"a.exp_avg", "b.exp_avg", "a.exp_avg_sq",
                          "b.exp_avg_sq"};
  std::vector<int64_t> shapes[2] = {{2, 3}, {5}};
  for (size_t i = 0; i < 4; ++i) {
    const TensorSlot &slot = layout.states[i];
    EXPECT_EQ(slot.name, names[i]);
    EXPECT_EQ(slot.shape, shapes[i % 2]) << slot.name;
    EXPECT_EQ(slot.dtype, DType::F32);
    EXPECT_EQ(slot.shard, static_cast<int>(i / 2));
    const ShardedState &state = *layout.shards[i / 2];
    auto *flat = reinterpret_cast<const uint8_t *>(state.flat.data());
    EXPECT_EQ(static_cast<const uint8_t *>(slot.data) - flat,
              i % 2 == 0 ? 0 : 6 * 4)
        << slot.name;
  }
  EXPECT_EQ(layout.shards[0]->name, "zero.b0.exp_avg");
  EXPECT_EQ(layout.shards[0]->position, 1);
  EXPECT_EQ(layout.shards[0]->chunkElements, 6u);
  EXPECT_EQ(layout.shards[0]->flat.size() * 8, 12u * 4);
  // The fingerprint is the one of the same tensors unsharded.
  CheckpointLayout ddp;
  for (const TensorSlot &slot : layout.parameters) {
    ddp.parameters.push_back(slot);
  }
  for (size_t i = 0; i < 4; ++i) {
    TensorSlot slot;
    slot.name = names[i];
    slot.shape = shapes[i % 2];
    ddp.states.push_back(slot);
  }
  computeFingerprint(ddp);
  EXPECT_EQ(layout.fingerprint, ddp.fingerprint);
}

TEST(ZeroCheckpoint, OneRankGathersAndScattersWithoutACommunicator) {
  ZeroPlan one;
  one.worldSize = 1;
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(one, error);
  ASSERT_NE(plan, nullptr) << error;
  std::unique_ptr<Session> session = open(*plan, 0, error);
  ASSERT_NE(session, nullptr) << error;
  CheckpointLayout layout;
  ASSERT_TRUE(buildCheckpointLayout(*plan, *session, layout, error)) << error;
  float *chunk = floats(*session, 2);
  std::iota(chunk, chunk + 12, 1.0f);
  ASSERT_EQ(syncLayout(*session, layout, true), "");
  const auto *a = static_cast<const float *>(layout.states[0].data);
  const auto *b = static_cast<const float *>(layout.states[1].data);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(a[i], i + 1.0f);
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(b[i], i + 7.0f);
  }
  // What a checkpoint read writes into the slots goes back to the state.
  std::fill(static_cast<float *>(layout.states[1].data),
            static_cast<float *>(layout.states[1].data) + 5, -2.0f);
  ASSERT_EQ(syncLayout(*session, layout, false), "");
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(chunk[i], i < 6 ? i + 1.0f : i < 11 ? -2.0f : 12.0f)
        << "element " << i;
  }
}

TEST(ZeroCheckpoint, EachRankTakesItsChunkAndGatheringNeedsTheRanks) {
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(ZeroPlan(), error);
  ASSERT_NE(plan, nullptr) << error;
  std::unique_ptr<Session> session = open(*plan, 1, error);
  ASSERT_NE(session, nullptr) << error;
  CheckpointLayout layout;
  ASSERT_TRUE(buildCheckpointLayout(*plan, *session, layout, error)) << error;
  for (const std::unique_ptr<ShardedState> &state : layout.shards) {
    auto *flat = reinterpret_cast<float *>(state->flat.data());
    std::iota(flat, flat + 12, 100.0f);
  }
  ASSERT_EQ(syncLayout(*session, layout, false), "");
  for (uint32_t buffer : {2u, 3u}) {
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(floats(*session, buffer)[i], 106.0f + i);
    }
  }
  EXPECT_TRUE(mentions(syncLayout(*session, layout, true),
                       "sharded state 'zero.b0.exp_avg': the plan runs "
                       "collectives over 2 ranks but the session has no "
                       "communicator"));
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
  std::unique_ptr<comm::Communicator> world =
      comm::createMpiCommunicator(launch, why);
  return world;
}

/// Rank r's value for element i of a flat space.
float valueOf(int rank, int i) { return 100.0f * (rank + 1) + i; }

} // namespace

TEST(ZeroRanks, TheSessionGathersInPlaceScattersAndCheckpointsShards) {
  std::string why;
  std::unique_ptr<comm::Communicator> world = joinWorld(why);
  if (!world) {
    GTEST_SKIP() << why;
  }
  int rank = world->rank(), size = world->size();
  ZeroPlan spec;
  spec.worldSize = size;
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(spec, error);
  ASSERT_NE(plan, nullptr) << error;
  std::unique_ptr<Session> session = open(*plan, rank, error);
  ASSERT_NE(session, nullptr) << error;
  ASSERT_EQ(session->setCommunicator(world.get()), "");
  int chunk = 12 / size;

  // The in-place all-gather: each rank writes its chunk through its view.
  float *mine = floats(*session, 4);
  for (int i = 0; i < chunk; ++i) {
    mine[i] = valueOf(rank, i);
  }
  ASSERT_EQ(runEntry(*session, "gather"), "");
  const float *whole = floats(*session, 5);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(whole[i], valueOf(i / chunk, i % chunk)) << "element " << i;
  }

  // Out-of-place reduce-scatter, then zero clears its input.
  float *input = floats(*session, 6);
  for (int i = 0; i < 12; ++i) {
    input[i] = valueOf(rank, i);
  }
  ASSERT_EQ(runEntry(*session, "scatter"), "");
  for (int i = 0; i < chunk; ++i) {
    float sum = 0;
    for (int r = 0; r < size; ++r) {
      sum += valueOf(r, rank * chunk + i);
    }
    EXPECT_EQ(floats(*session, 7)[i], sum) << "element " << i;
  }
  ASSERT_EQ(runEntry(*session, "clear"), "");
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(input[i], 0.0f);
  }

  // Checkpoints: every rank gathers the whole state; each takes its chunk
  // back.
  CheckpointLayout layout;
  ASSERT_TRUE(buildCheckpointLayout(*plan, *session, layout, error)) << error;
  for (uint32_t k = 0; k < 2; ++k) {
    float *state = floats(*session, 2 + k);
    for (int i = 0; i < chunk; ++i) {
      state[i] = valueOf(rank, rank * chunk + i) + 1000.0f * k;
    }
  }
  ASSERT_EQ(syncLayout(*session, layout, true), "");
  for (size_t s = 0; s < 4; ++s) {
    const TensorSlot &slot = layout.states[s];
    const auto *data = static_cast<const float *>(slot.data);
    int offset = s % 2 == 0 ? 0 : 6, count = s % 2 == 0 ? 6 : 5;
    for (int i = 0; i < count; ++i) {
      int flat = offset + i;
      EXPECT_EQ(data[i], valueOf(flat / chunk, flat) + 1000.0f * (s / 2))
          << slot.name << " element " << i;
    }
  }
  for (const std::unique_ptr<ShardedState> &state : layout.shards) {
    auto *flat = reinterpret_cast<float *>(state->flat.data());
    std::iota(flat, flat + 12, -50.0f);
  }
  ASSERT_EQ(syncLayout(*session, layout, false), "");
  for (uint32_t k = 0; k < 2; ++k) {
    for (int i = 0; i < chunk; ++i) {
      EXPECT_EQ(floats(*session, 2 + k)[i], -50.0f + rank * chunk + i);
    }
  }
  ASSERT_EQ(world->barrier(), "");
  session.reset();
  world.reset();
}
