//===- Zero3RuntimeTest.cpp - ZeRO-3 parameters kept as a rank's chunk ----===//
//
// What the runtime does for ZeRO-3 parameters (plan 1.7, Parameter.shard),
// on small plans built with the flatbuffers API: the loader's checks of a
// parameter's shard and of parameters sharing a chunk buffer; binding from
// a file and from an Init, each rank getting exactly its slice of what one
// rank binds; and checkpoint slots (the whole tensors, as DDP names them)
// with their gather and scatter. `Zero3Ranks.*` gather under mpirun
// (ctest: -np 2 and 4, label multirank); in a plain run they skip.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/comm/Communicator.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Safetensors.h"
#include "test/runtime/train/TrainTestUtil.h"
#include "test/runtime/train/ZeroTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

using namespace tailor::runtime;
using namespace tailor::train;
using namespace tailor::train::testing;
namespace fb = tailor::plan;

namespace {

/// The knobs of the test plan. Parameters w f32[2, 3] (exported as
/// "model.w", transposed) and v f32[5] ("model.v") lie in one bucket of
/// `flat` = 16 elements, w at 0 and v at 7 (6 and 12..15 are padding). The
/// sharded plan keeps them as each rank's chunk (buffer 0, flat / group
/// size elements); the unsharded one as whole buffers 0 (w) and 1 (v).
/// Buffers of the sharded plan:
///   0 the chunk          parameters
///   1, 2 exp_avg and exp_avg_sq chunks (sharded states over w and v)
///   3 the whole bucket   activations (gathered by the `gather` entry)
/// The unsharded plan: 0 w, 1 v, 2..5 w.exp_avg, v.exp_avg, w.exp_avg_sq,
/// v.exp_avg_sq, 6 a scratch activation.
struct Zero3Plan {
  int worldSize = 2;
  bool sharded = true;
  /// Bind from `weights` (a file holding w then v) instead of Inits.
  std::string weights;
  std::vector<int> group; // empty: the whole world
  int64_t flat = 16;
  /// Per parameter (w, v): shard shape, offset, and overrides.
  std::vector<int64_t> wShape = {2, 3};
  int64_t wOffset = 0, vOffset = 7;
  int64_t vFlat = -1;      // v's flat_elements, when not `flat`
  std::vector<int> vGroup; // v's group, when not `group`
  bool wTrainable = true;
  bool wQuantized = false;
  int64_t chunk = -1;          // chunk elements, when not flat / group size
  uint64_t wSourceLength = 24; // bytes of w's source
  /// A third, unsharded parameter "u" on the chunk buffer.
  bool strayOnChunk = false;
  /// The sharded states' member element counts (w, v).
  std::vector<int64_t> stateNumels = {6, 5};

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

std::vector<uint8_t> buildPlan(const Zero3Plan &spec) {
  flatbuffers::FlatBufferBuilder b;
  int64_t chunk = spec.chunkElements();
  uint64_t chunkBytes = static_cast<uint64_t>(chunk) * 4;
  uint64_t flatBytes = static_cast<uint64_t>(spec.flat) * 4;
  std::vector<int> group = spec.shardGroup();
  auto buffer = [&](uint32_t arena, uint64_t offset, uint64_t bytes,
                    std::vector<int64_t> shape) {
    return fb::CreateBuffer(b, arena, offset, bytes, fb::DType::F32,
                            b.CreateVector(shape));
  };
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  if (spec.sharded) {
    buffers = {buffer(0, 0, chunkBytes, {chunk}),
               buffer(1, 0, chunkBytes, {chunk}),
               buffer(1, 128, chunkBytes, {chunk}),
               buffer(2, 0, flatBytes, {spec.flat})};
  } else {
    buffers = {buffer(0, 0, 24, {2, 3}),   buffer(0, 64, 20, {5}),
               buffer(1, 0, 24, {2, 3}),   buffer(1, 64, 20, {5}),
               buffer(1, 128, 24, {2, 3}), buffer(1, 192, 20, {5}),
               buffer(2, 0, 4, {1})};
  }
  std::vector<flatbuffers::Offset<fb::Arena>> arenas = {
      fb::CreateArena(b, b.CreateString("parameters"), fb::ArenaKind::Host,
                      fb::Category::Parameters, 128, 64),
      fb::CreateArena(b, b.CreateString("optimizer"), fb::ArenaKind::Host,
                      fb::Category::OptimizerState, 256, 64),
      fb::CreateArena(b, b.CreateString("activations"), fb::ArenaKind::Host,
                      fb::Category::Activations, 256, 64)};
  auto shard = [&](const std::vector<int64_t> &shape, int64_t offset,
                   int64_t flat, const std::vector<int> &members) {
    return fb::CreateParameterShard(b, b.CreateVector(shape), offset, flat,
                                    b.CreateVector(members));
  };
  auto source = [&](uint64_t offset, uint64_t length) {
    return spec.weights.empty()
               ? flatbuffers::Offset<fb::Source>()
               : fb::CreateSource(b, b.CreateString(spec.weights), offset,
                                  length, fb::DType::F32);
  };
  auto init = [&](fb::InitKind kind) {
    return spec.weights.empty()
               ? fb::CreateInit(b, kind, std::sqrt(5.0), 3, 0.5, 7)
               : flatbuffers::Offset<fb::Init>();
  };
  flatbuffers::Offset<fb::Quantization> quant = 0;
  if (spec.wQuantized) {
    quant = fb::CreateQuantization(b, b.CreateString("nf4"), 2, 3);
  }
  std::vector<flatbuffers::Offset<fb::Parameter>> params = {
      fb::CreateParameter(
          b, b.CreateString("w"), 0, source(0, spec.wSourceLength),
          spec.wTrainable, init(fb::InitKind::KaimingUniform),
          b.CreateString("model.w"), true, quant,
          spec.sharded ? shard(spec.wShape, spec.wOffset, spec.flat, group)
                       : flatbuffers::Offset<fb::ParameterShard>()),
      fb::CreateParameter(
          b, b.CreateString("v"), spec.sharded ? 0 : 1, source(24, 20), true,
          init(fb::InitKind::Normal), b.CreateString("model.v"), false, 0,
          spec.sharded ? shard({5}, spec.vOffset,
                               spec.vFlat >= 0 ? spec.vFlat : spec.flat,
                               spec.vGroup.empty() ? group : spec.vGroup)
                       : flatbuffers::Offset<fb::ParameterShard>())};
  if (spec.strayOnChunk) {
    params.push_back(fb::CreateParameter(b, b.CreateString("u"), 0, 0, true,
                                         fb::CreateInit(b)));
  }
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  std::vector<flatbuffers::Offset<fb::Entry>> entries;
  if (spec.sharded) {
    ops.push_back(
        fb::CreateOp(b, fb::Step::Collective,
                     fb::CreateCollective(b, fb::CollectiveKind::AllGather, 0,
                                          3, b.CreateVector(group))
                         .Union()));
    entries.push_back(fb::CreateEntry(b, b.CreateString("gather"), 0, 1));
  }
  std::vector<flatbuffers::Offset<fb::State>> states;
  const char *kinds[2] = {"exp_avg", "exp_avg_sq"};
  for (uint32_t k = 0; k < 2; ++k) {
    if (!spec.sharded) {
      const char *names[2] = {"w", "v"};
      for (uint32_t m = 0; m < 2; ++m) {
        states.push_back(fb::CreateState(
            b, b.CreateString(std::string(names[m]) + "." + kinds[k]),
            2 + 2 * k + m, b.CreateString(names[m]), b.CreateString(kinds[k])));
      }
      continue;
    }
    auto stateShard = fb::CreateStateShard(
        b,
        b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{
            b.CreateString("w"), b.CreateString("v")}),
        b.CreateVector(std::vector<int64_t>{spec.wOffset, spec.vOffset}),
        b.CreateVector(spec.stateNumels), spec.flat, b.CreateVector(group));
    states.push_back(fb::CreateState(
        b, b.CreateString(std::string("zero.b0.") + kinds[k]), 1 + k,
        b.CreateString("zero.b0"), b.CreateString(kinds[k]), stateShard));
  }
  auto plan = fb::CreatePlan(
      b, kPlanVersion, b.CreateString("Zero3RuntimeTest"),
      b.CreateString("toy"),
      fb::CreateTarget(b, fb::Backend::Cpu, b.CreateString("cpu"), 0, 1), 0,
      spec.worldSize, b.CreateVector(arenas), b.CreateVector(buffers),
      b.CreateVector(params), 0, 0,
      b.CreateVector(std::vector<flatbuffers::Offset<fb::Stream>>{
          fb::CreateStream(b, b.CreateString("compute"))}),
      0, b.CreateVector(ops), 0, 0, 0, b.CreateVector(entries),
      b.CreateVector(states), fb::CreateTraining(b, 1, 4, 16));
  b.FinishSizePrefixed(plan, fb::PlanIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(),
                              b.GetBufferPointer() + b.GetSize());
}

std::unique_ptr<LoadedPlan> load(const Zero3Plan &spec, std::string &error) {
  return loadPlanBytes(buildPlan(spec), "zero3", error);
}

/// The loader's message for `spec` ("" when it loads).
std::string loadError(const Zero3Plan &spec) {
  return loadErrorOf(buildPlan(spec), "zero3");
}

std::unique_ptr<Session> open(const LoadedPlan &plan, int rank,
                              std::string &error) {
  return openAtRank(plan, rank, error);
}

const float *floats(Session &session, uint32_t buffer) {
  return static_cast<const float *>(session.bufferData(buffer));
}

/// Writes w (6 values) then v (5) into `path`.
void writeWeights(const std::string &path) {
  std::vector<float> values(11);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = 0.25f * static_cast<float>(i) - 1.0f;
  }
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(values.data()),
             static_cast<std::streamsize>(values.size() * 4));
}

/// The bucket's flat space as the unsharded plan at one rank binds it:
/// w at 0, v at 7, zero padding.
std::vector<float> referenceFlat(const std::string &weights) {
  Zero3Plan unsharded;
  unsharded.sharded = false;
  unsharded.worldSize = 1;
  unsharded.weights = weights;
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(unsharded, error);
  EXPECT_NE(plan, nullptr) << error;
  std::unique_ptr<Session> session = open(*plan, 0, error);
  EXPECT_NE(session, nullptr) << error;
  std::vector<float> flat(16, 0.0f);
  if (session) {
    std::memcpy(flat.data(), floats(*session, 0), 24);
    std::memcpy(flat.data() + 7, floats(*session, 1), 20);
  }
  return flat;
}

} // namespace

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

TEST(Zero3Loader, AcceptsShardedParametersAndTheirStates) {
  EXPECT_EQ(loadError(Zero3Plan()), "");
  Zero3Plan four;
  four.worldSize = 4;
  EXPECT_EQ(loadError(four), "");
  Zero3Plan one;
  one.worldSize = 1;
  EXPECT_EQ(loadError(one), "");
  Zero3Plan node;
  node.worldSize = 4;
  node.group = {0, 1};
  EXPECT_EQ(loadError(node), "");
  Zero3Plan unsharded;
  unsharded.sharded = false;
  EXPECT_EQ(loadError(unsharded), "");
  TempDir dir("zero3");
  Zero3Plan file;
  file.weights = dir.path + "/weights.bin";
  writeWeights(file.weights);
  EXPECT_EQ(loadError(file), "");
}

TEST(Zero3Loader, RejectsShardsThatAreNotTensorsInTheirBucket) {
  // Frozen and quantized parameters are sharded too (Zero3FrozenTest), in
  // buckets of their own kind.
  Zero3Plan frozen;
  frozen.wTrainable = false;
  EXPECT_TRUE(mentions(loadError(frozen),
                       "trainable parameter 'v' shares buffer 0 with frozen "
                       "parameter 'w'"));
  Zero3Plan quantized;
  quantized.wQuantized = true;
  EXPECT_TRUE(mentions(loadError(quantized),
                       "sharded quantized parameter 'w' needs a u8 chunk "
                       "buffer and a shard shape of [12]"));
  Zero3Plan scalar;
  scalar.wShape = {};
  EXPECT_TRUE(mentions(loadError(scalar), "sharded parameter 'w' has a shard "
                                          "shape of rank 0"));
  Zero3Plan empty;
  empty.wShape = {2, 0};
  EXPECT_TRUE(mentions(loadError(empty), "sharded parameter 'w' has a bad "
                                         "shard dim 0"));
  Zero3Plan negative;
  negative.wShape = {-2, -3};
  EXPECT_TRUE(mentions(loadError(negative), "has a bad shard dim -2"));
  Zero3Plan chunks;
  chunks.chunk = 7; // 2 x 7 != 16
  EXPECT_TRUE(mentions(loadError(chunks),
                       "sharded parameter 'w' has 16 flat elements, not its "
                       "2 ranks' chunks of 7 (buffer 0)"));
  Zero3Plan odd;
  odd.flat = 15;
  odd.chunk = 7;
  EXPECT_TRUE(mentions(loadError(odd), "has 15 flat elements, not its 2 "
                                       "ranks' chunks of 7"));
  Zero3Plan outside;
  outside.vOffset = 12;
  EXPECT_TRUE(mentions(loadError(outside),
                       "sharded parameter 'v' at [12, +5) leaves the flat "
                       "space of 16 elements"));
  Zero3Plan before;
  before.wOffset = -1;
  EXPECT_TRUE(mentions(loadError(before), "sharded parameter 'w' at [-1, +6)"));
  Zero3Plan stranger;
  stranger.group = {0, 2};
  EXPECT_TRUE(mentions(loadError(stranger),
                       "sharded parameter 'w' names rank 2 twice or outside "
                       "the world of 2"));
  Zero3Plan noZero;
  noZero.worldSize = 4;
  noZero.group = {2, 3};
  EXPECT_TRUE(mentions(loadError(noZero), "sharded parameter 'w' names a "
                                          "group without rank 0"));
}

TEST(Zero3Loader, OnlyMembersOfOneBucketShareAChunkBuffer) {
  Zero3Plan overlap;
  overlap.vOffset = 4;
  EXPECT_TRUE(mentions(loadError(overlap),
                       "sharded parameter 'v' at [4, +5) overlaps another "
                       "member of buffer 0"));
  Zero3Plan otherFlat;
  otherFlat.vFlat = 32;
  otherFlat.chunk = 8;
  EXPECT_TRUE(mentions(loadError(otherFlat), "sharded parameter 'v' has 32 "
                                             "flat elements"));
  Zero3Plan otherGroup;
  otherGroup.worldSize = 4;
  otherGroup.group = {0, 1};
  otherGroup.vGroup = {0, 2};
  EXPECT_TRUE(mentions(loadError(otherGroup),
                       "parameter 'v' shares buffer 0 with sharded parameter "
                       "'w' but is not a member of the same bucket"));
  Zero3Plan stray;
  stray.strayOnChunk = true;
  EXPECT_TRUE(mentions(loadError(stray),
                       "parameter 'u' shares buffer 0 with sharded parameter "
                       "'w'"));
}

TEST(Zero3Loader, SourcesAndStatesCountTheWholeTensor) {
  TempDir dir("zero3");
  Zero3Plan shortSource;
  shortSource.weights = dir.path + "/weights.bin";
  writeWeights(shortSource.weights);
  shortSource.wSourceLength = 16;
  EXPECT_TRUE(mentions(loadError(shortSource),
                       "parameter 'w' source length 16 does not match its "
                       "24-byte tensor"));
  Zero3Plan states;
  states.stateNumels = {8, 5};
  EXPECT_TRUE(mentions(loadError(states),
                       "sharded state 'zero.b0.exp_avg': member 'w' counts 8 "
                       "elements, its parameter has 6"));
}

//===----------------------------------------------------------------------===//
// Binding
//===----------------------------------------------------------------------===//

namespace {

/// Each rank of `worldSize` binds chunk r of the unsharded flat space,
/// bit for bit, padding zero.
void expectChunksOfTheReference(const std::string &weights, int worldSize) {
  std::vector<float> want = referenceFlat(weights);
  Zero3Plan spec;
  spec.worldSize = worldSize;
  spec.weights = weights;
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(spec, error);
  ASSERT_NE(plan, nullptr) << error;
  int chunk = 16 / worldSize;
  for (int rank = 0; rank < worldSize; ++rank) {
    std::unique_ptr<Session> session = open(*plan, rank, error);
    ASSERT_NE(session, nullptr) << error;
    const float *got = floats(*session, 0);
    for (int i = 0; i < chunk; ++i) {
      int at = rank * chunk + i;
      EXPECT_EQ(std::memcmp(&got[i], &want[static_cast<size_t>(at)], 4), 0)
          << "rank " << rank << " element " << i << ": " << got[i]
          << " != " << want[static_cast<size_t>(at)];
      if (at == 6 || at >= 12) {
        EXPECT_EQ(got[i], 0.0f) << "padding at " << at;
      }
    }
  }
}

} // namespace

TEST(Zero3Session, EachRankBindsItsChunkOfTheFile) {
  TempDir dir("zero3");
  std::string weights = dir.path + "/weights.bin";
  writeWeights(weights);
  std::vector<float> flat = referenceFlat(weights);
  EXPECT_EQ(flat[0], -1.0f);
  EXPECT_EQ(flat[7], 0.5f);
  expectChunksOfTheReference(weights, 2);
  // Four ranks: rank 3's chunk is all padding (nothing to read).
  expectChunksOfTheReference(weights, 4);
}

TEST(Zero3Session, EachRankDrawsItsChunkOfWhatOneRankDraws) {
  std::vector<float> flat = referenceFlat("");
  EXPECT_NE(flat[0], 0.0f);
  EXPECT_NE(flat[11], 0.0f);
  expectChunksOfTheReference("", 2);
  expectChunksOfTheReference("", 4);
}

//===----------------------------------------------------------------------===//
// Checkpoint layout
//===----------------------------------------------------------------------===//

TEST(Zero3Checkpoint, SlotsAreTheWholeTensorsWithTheUnshardedFingerprint) {
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(Zero3Plan(), error);
  ASSERT_NE(plan, nullptr) << error;
  std::unique_ptr<Session> session = open(*plan, 1, error);
  ASSERT_NE(session, nullptr) << error;
  CheckpointLayout layout;
  ASSERT_TRUE(buildCheckpointLayout(*plan, *session, layout, error)) << error;
  ASSERT_EQ(layout.parameters.size(), 2u);
  ASSERT_EQ(layout.shards.size(), 3u); // the bucket, then two states
  const ShardedState &bucket = *layout.shards[0];
  EXPECT_EQ(bucket.what, "sharded parameter 'w'");
  EXPECT_EQ(bucket.buffer, 0u);
  EXPECT_EQ(bucket.position, 1);
  EXPECT_EQ(bucket.chunkElements, 8u);
  EXPECT_EQ(bucket.flat.size() * 8, 16u * 4);
  const TensorSlot &w = layout.parameters[0];
  const TensorSlot &v = layout.parameters[1];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.fileName(), "model.w");
  EXPECT_TRUE(w.transposed);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w.fileShape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(v.fileName(), "model.v");
  EXPECT_EQ(v.shape, (std::vector<int64_t>{5}));
  auto *flat = reinterpret_cast<const uint8_t *>(bucket.flat.data());
  EXPECT_EQ(static_cast<const uint8_t *>(w.data), flat);
  EXPECT_EQ(static_cast<const uint8_t *>(v.data), flat + 7 * 4);
  EXPECT_EQ(w.shard, 0);
  EXPECT_EQ(v.shard, 0);
  // The states' members have the parameters' whole shapes.
  ASSERT_EQ(layout.states.size(), 4u);
  EXPECT_EQ(layout.states[0].name, "w.exp_avg");
  EXPECT_EQ(layout.states[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(layout.states[3].name, "v.exp_avg_sq");
  // The host copy starts with this rank's chunk (v[1..4]) and nothing
  // else, so scattering it unread changes nothing.
  const auto *values = static_cast<const float *>(v.data);
  std::vector<float> chunk(floats(*session, 0), floats(*session, 0) + 8);
  EXPECT_EQ(values[0], 0.0f);
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(values[i], chunk[static_cast<size_t>(i - 1)]);
    EXPECT_NE(values[i], 0.0f);
  }
  ASSERT_EQ(syncLayout(*session, layout, false), "");
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(floats(*session, 0)[i], chunk[static_cast<size_t>(i)]);
  }

  // The unsharded plan's layout has the same fingerprint.
  Zero3Plan unsharded;
  unsharded.sharded = false;
  std::unique_ptr<LoadedPlan> whole = load(unsharded, error);
  ASSERT_NE(whole, nullptr) << error;
  std::unique_ptr<Session> wholeSession = open(*whole, 0, error);
  ASSERT_NE(wholeSession, nullptr) << error;
  CheckpointLayout ddp;
  ASSERT_TRUE(buildCheckpointLayout(*whole, *wholeSession, ddp, error))
      << error;
  EXPECT_EQ(ddp.shards.size(), 0u);
  EXPECT_EQ(layout.fingerprint, ddp.fingerprint);

  // What a checkpoint read writes into the slots reaches this rank's
  // chunk; gathering needs the other rank.
  std::fill(static_cast<float *>(v.data), static_cast<float *>(v.data) + 5,
            3.0f);
  ASSERT_EQ(syncLayout(*session, layout, false), "");
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(floats(*session, 0)[i], i < 4 ? 3.0f : 0.0f) << "element " << i;
  }
  EXPECT_TRUE(mentions(syncLayout(*session, layout, true),
                       "sharded parameter 'w': the plan runs collectives "
                       "over 2 ranks but the session has no communicator"));
}

TEST(Zero3Checkpoint, CheckpointsMoveBetweenShardedAndUnshardedPlans) {
  // One rank: the bucket's group is {0}, its chunk the whole flat space.
  TempDir dir("zero3");
  std::string weights = dir.path + "/weights.bin";
  writeWeights(weights);
  Zero3Plan sharded;
  sharded.worldSize = 1;
  sharded.weights = weights;
  Zero3Plan unsharded = sharded;
  unsharded.sharded = false;
  std::string error;
  PlanWithLayout shardedOne, wholeOne;
  ASSERT_EQ(openWithLayout(buildPlan(sharded), "sharded", 0, shardedOne), "");
  ASSERT_EQ(openWithLayout(buildPlan(unsharded), "whole", 0, wholeOne), "");
  Session *shardedSession = shardedOne.session.get();
  Session *wholeSession = wholeOne.session.get();
  CheckpointLayout &shardedLayout = shardedOne.layout;
  CheckpointLayout &wholeLayout = wholeOne.layout;
  // Train the sharded one a little: its chunk changes in place.
  auto *chunk = static_cast<float *>(shardedSession->bufferData(0));
  for (int i = 0; i < 16; ++i) {
    if (i != 6 && i < 12) {
      chunk[i] += 10.0f;
    }
  }
  ASSERT_EQ(syncLayout(*shardedSession, shardedLayout, true), "");
  ASSERT_TRUE(makeDirectories(dir.path + "/a", error)) << error;
  ASSERT_TRUE(makeDirectories(dir.path + "/b", error)) << error;
  TrainerState state;
  state.globalStep = 3;
  state.fingerprint = shardedLayout.fingerprint;
  ASSERT_TRUE(saveCheckpoint(shardedLayout, state, dir.path + "/a", error))
      << error;
  // The model file holds the whole tensors under their export names, w
  // transposed as the Hugging Face layout has it.
  std::unique_ptr<SafetensorsFile> model = SafetensorsFile::open(
      dir.path + "/a/checkpoint-3/model.safetensors", error);
  ASSERT_NE(model, nullptr) << error;
  const SafetensorsTensor *w = model->find("model.w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{3, 2}));
  std::vector<float> want = referenceFlat(weights);
  float first;
  std::memcpy(&first, w->data + 4, 4); // file [0][1] = plan w[1][0]
  EXPECT_EQ(first, want[3] + 10.0f);
  // The unsharded plan resumes it and sees the trained values ...
  TrainerState loaded;
  ASSERT_TRUE(
      loadCheckpoint(wholeLayout, dir.path + "/a/checkpoint-3", loaded, error))
      << error;
  ASSERT_EQ(syncLayout(*wholeSession, wholeLayout, false), "");
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(floats(*wholeSession, 0)[i],
              want[static_cast<size_t>(i)] + 10.0f);
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(floats(*wholeSession, 1)[i],
              want[static_cast<size_t>(7 + i)] + 10.0f);
  }
  // ... and a checkpoint of the unsharded plan comes back into the chunk.
  auto *v = static_cast<float *>(wholeSession->bufferData(1));
  v[4] = -7.0f;
  state.globalStep = 4;
  state.fingerprint = wholeLayout.fingerprint;
  ASSERT_TRUE(saveCheckpoint(wholeLayout, state, dir.path + "/b", error))
      << error;
  ASSERT_TRUE(loadCheckpoint(shardedLayout, dir.path + "/b/checkpoint-4",
                             loaded, error))
      << error;
  std::fill(chunk, chunk + 16, 99.0f);
  ASSERT_EQ(syncLayout(*shardedSession, shardedLayout, false), "");
  for (int i = 0; i < 16; ++i) {
    float expected = i == 6 || i >= 12 ? 0.0f
                     : i == 11         ? -7.0f
                                       : want[static_cast<size_t>(i)] + 10.0f;
    EXPECT_EQ(chunk[i], expected) << "element " << i;
  }
}

//===----------------------------------------------------------------------===//
// Several ranks (mpirun)
//===----------------------------------------------------------------------===//

TEST(Zero3Ranks, TheChunksGatherIntoTheWholeTensorsAndScatterBack) {
  comm::LaunchInfo launch;
  std::string why = comm::detectLaunch(launch);
  if (!why.empty() || launch.worldSize < 2) {
    GTEST_SKIP() << "runs under mpirun -np 2 or more";
  }
  std::unique_ptr<comm::Communicator> world =
      comm::createMpiCommunicator(launch, why);
  ASSERT_TRUE(world) << why;
  int rank = world->rank(), size = world->size();
  ASSERT_EQ(16 % size, 0);
  // Inits: every rank draws the same values without reading a file.
  std::vector<float> want = referenceFlat("");
  Zero3Plan spec;
  spec.worldSize = size;
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(spec, error);
  ASSERT_NE(plan, nullptr) << error;
  std::unique_ptr<Session> session = open(*plan, rank, error);
  ASSERT_NE(session, nullptr) << error;
  ASSERT_EQ(session->setCommunicator(world.get()), "");
  // The plan's own gather (what a ZeRO-3 step does before using them).
  ASSERT_EQ(
      session->runEntry(static_cast<uint32_t>(session->findEntry("gather"))),
      "");
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(floats(*session, 3)[i], want[static_cast<size_t>(i)])
        << "element " << i;
  }
  // Checkpoints: every rank gathers the whole tensors ...
  CheckpointLayout layout;
  ASSERT_TRUE(buildCheckpointLayout(*plan, *session, layout, error)) << error;
  ASSERT_EQ(syncLayout(*session, layout, true), "");
  const auto *w = static_cast<const float *>(layout.parameters[0].data);
  const auto *v = static_cast<const float *>(layout.parameters[1].data);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(w[i], want[static_cast<size_t>(i)]);
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(v[i], want[static_cast<size_t>(7 + i)]);
  }
  // ... and each takes its own chunk of what was read back.
  std::iota(const_cast<float *>(w), const_cast<float *>(w) + 6, 100.0f);
  std::iota(const_cast<float *>(v), const_cast<float *>(v) + 5, 200.0f);
  ASSERT_EQ(syncLayout(*session, layout, false), "");
  int chunk = 16 / size;
  for (int i = 0; i < chunk; ++i) {
    int at = rank * chunk + i;
    float expected = at < 6               ? 100.0f + at
                     : at >= 7 && at < 12 ? 200.0f + (at - 7)
                                          : 0.0f;
    EXPECT_EQ(floats(*session, 0)[i], expected) << "flat element " << at;
  }
  ASSERT_EQ(world->barrier(), "");
  session.reset();
  world.reset();
}
