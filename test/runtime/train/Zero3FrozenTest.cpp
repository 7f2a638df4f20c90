//===- Zero3FrozenTest.cpp - ZeRO-3 frozen and quantized parameters -------===//
//
// ZeRO-3 (plan 1.7, Parameter.shard) for frozen parameters: the base
// weights of a QLoRA model, quantized (their storage bytes are sharded in
// a u8 bucket), and frozen float ones (LoRA-FA's lora_A among them), on
// small plans built with the flatbuffers API. The loader's checks; binding
// at each rank of 2 and 4, which must give exactly the bytes of what one
// rank binds (nf4 with double quantization and int8 quantized from a file,
// GPTQ sections read whole, a frozen float weight and an Init); checkpoint
// and adapter slots of a sharded frozen lora_A. `Zero3FrozenRanks.*`
// gather the u8 chunks under mpirun (ctest: -np 2 and 4) and dequantize
// the gathered bytes with the `dequantize` kernel; in a plain run they
// skip.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cpu/Kernel.h"
#include "runtime/quant/Gptq.h"
#include "runtime/quant/QuantizedWeight.h"
#include "runtime/train/AtomicFile.h"
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
namespace quant = tailor::quant;

namespace {

constexpr const char *kLoraA = "model.layers.0.proj.lora_A.weight";
constexpr const char *kLoraB = "model.layers.0.proj.lora_B.weight";

/// The test model's quantized weights: q nf4 [16, 24] (double
/// quantization, its source the transpose W^T), k int8 [8, 12], g gptq
/// [8, 16] (4 bits, groups of 8, from four sections of another file).
quant::QuantSpec specQ() {
  quant::QuantSpec spec;
  spec.scheme = quant::Scheme::NF4;
  spec.rows = 16;
  spec.cols = 24;
  return spec;
}
quant::QuantSpec specK() {
  quant::QuantSpec spec;
  spec.scheme = quant::Scheme::Int8;
  spec.rows = 8;
  spec.cols = 12;
  return spec;
}
quant::QuantSpec specG() {
  quant::QuantSpec spec;
  spec.scheme = quant::Scheme::GPTQ;
  spec.rows = 8;
  spec.cols = 16;
  spec.bits = 4;
  spec.groupSize = 8;
  return spec;
}

int64_t alignUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

/// Where the members lie in their buckets' flat spaces (bytes in the u8
/// bucket, elements in the float ones).
struct Flats {
  int64_t qBytes = static_cast<int64_t>(quant::storageBytes(specQ()));
  int64_t kBytes = static_cast<int64_t>(quant::storageBytes(specK()));
  int64_t gBytes = static_cast<int64_t>(quant::storageBytes(specG()));
  int64_t qOffset = 0;
  int64_t kOffset = alignUp(qBytes, 16);
  int64_t gOffset = alignUp(kOffset + kBytes, 16);
  int64_t quantFlat = alignUp(gOffset + gBytes, 64);
  /// f f32[10] at 1, lora_A f32[2, 3] at 12 of 20; lora_B f32[4, 2] alone
  /// in a trainable bucket of 8.
  int64_t fOffset = 1, aOffset = 12, floatFlat = 20, trainFlat = 8;
};

/// The knobs of the test plan. The sharded plan's buffers:
///   0 the u8 chunk (q, k, g)   1 the f32 frozen chunk (f, lora_A)
///   2 the f32 trainable chunk (lora_B)            (parameters arena)
///   3 the gathered u8 bucket, 4 and 5 views of q's and k's bytes in it,
///   6 q dequantized, 7 k dequantized              (activations arena)
/// The unsharded plan's: 0 q, 1 k, 2 g, 3 f, 4 lora_A, 5 lora_B, and the
/// same activations at 6..
struct FrozenPlan {
  int worldSize = 2;
  bool sharded = true;
  std::string weights; // q^T, k, f as f32
  std::string gptq;    // g's qweight, qzeros, scales, g_idx
  /// Overrides that make a bad plan.
  bool qTrainable = false;
  std::vector<int64_t> qShape; // q's shard shape when not [its bytes]
  fb::DType quantDType = fb::DType::U8;
  bool aTrainable = false;
  bool fSource = true; // f without a source has nothing to bind
};

std::vector<int> worldOf(int size) {
  std::vector<int> all(static_cast<size_t>(size));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

/// Writes a FrozenPlan's flatbuffer, step by step: the buffers and arenas,
/// the parameters, the ops that dequantize the base weights, the plan.
class FrozenPlanBuilder {
public:
  explicit FrozenPlanBuilder(const FrozenPlan &spec)
      : spec(spec), w(spec.sharded ? spec.worldSize : 1),
        group(worldOf(spec.worldSize)) {}

  std::vector<uint8_t> build() {
    addBuffers();
    addParameters();
    addOps();
    return finish();
  }

private:
  /// Buffers: (arena, dtype, shape, alias into buffer 3 at a byte offset).
  struct BufferSpec {
    uint32_t arena;
    fb::DType dtype;
    std::vector<int64_t> shape;
    int64_t viewOf3 = -1;
  };

  void addBuffers() {
    std::vector<BufferSpec> specs;
    if (spec.sharded) {
      specs = {{0, spec.quantDType, {at.quantFlat / w}},
               {0, fb::DType::F32, {at.floatFlat / w}},
               {0, fb::DType::F32, {at.trainFlat / w}},
               {1, fb::DType::U8, {at.quantFlat}},
               {1, fb::DType::U8, {at.qBytes}, at.qOffset},
               {1, fb::DType::U8, {at.kBytes}, at.kOffset}};
    } else {
      specs = {{0, fb::DType::U8, {at.qBytes}}, {0, fb::DType::U8, {at.kBytes}},
               {0, fb::DType::U8, {at.gBytes}}, {0, fb::DType::F32, {10}},
               {0, fb::DType::F32, {2, 3}},      {0, fb::DType::F32, {4, 2}}};
    }
    dq = static_cast<uint32_t>(specs.size());
    specs.push_back({1, fb::DType::F32, {16, 24}});
    specs.push_back({1, fb::DType::F32, {8, 12}});
    std::vector<uint64_t> arenaSize(2, 0), offsets;
    for (const BufferSpec &s : specs) {
      uint64_t bytes = dtypeSize(static_cast<DType>(s.dtype));
      for (int64_t d : s.shape) {
        bytes *= static_cast<uint64_t>(d);
      }
      uint64_t offset;
      if (s.viewOf3 >= 0) {
        offset = offsets[3] + static_cast<uint64_t>(s.viewOf3);
      } else {
        offset = arenaSize[s.arena];
        arenaSize[s.arena] += (bytes + 63) / 64 * 64;
      }
      offsets.push_back(offset);
      buffers.push_back(fb::CreateBuffer(b, s.arena, offset, bytes, s.dtype,
                                         b.CreateVector(s.shape)));
    }
    arenas = {fb::CreateArena(b, b.CreateString("parameters"),
                              fb::ArenaKind::Host, fb::Category::Parameters,
                              arenaSize[0], 64),
              fb::CreateArena(b, b.CreateString("activations"),
                              fb::ArenaKind::Host, fb::Category::Activations,
                              arenaSize[1], 64)};
  }

  flatbuffers::Offset<fb::ParameterShard>
  shard(std::vector<int64_t> shape, int64_t offset, int64_t flat) {
    return spec.sharded
               ? fb::CreateParameterShard(b, b.CreateVector(shape), offset,
                                          flat, b.CreateVector(group))
               : flatbuffers::Offset<fb::ParameterShard>();
  }
  flatbuffers::Offset<fb::Source> source(uint64_t offset, uint64_t length) {
    return fb::CreateSource(b, b.CreateString(spec.weights), offset, length,
                            fb::DType::F32);
  }
  flatbuffers::Offset<fb::Quantization>
  quantOf(const quant::QuantSpec &q, bool transposed,
          flatbuffers::Offset<
              flatbuffers::Vector<flatbuffers::Offset<fb::Source>>>
              sections) {
    return fb::CreateQuantization(
        b, b.CreateString(quant::schemeName(q.scheme)), q.rows, q.cols,
        q.blockSize, q.doubleQuant, q.nestedBlockSize, q.bits, q.groupSize,
        q.actOrder, q.outlierThreshold, q.outlierColumns, transposed,
        sections);
  }
  /// g's sections lie in its file in order, 16 bytes apart.
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Source>>>
  gptqSections() {
    quant::GptqLayout layout = quant::gptqLayout(specG());
    std::vector<flatbuffers::Offset<fb::Source>> sections;
    uint64_t fileAt = 16;
    for (const quant::GptqSection *t :
         {&layout.qweight, &layout.qzeros, &layout.scales, &layout.gIdx}) {
      sections.push_back(fb::CreateSource(b, b.CreateString(spec.gptq),
                                          fileAt, t->bytes, fb::DType::U8));
      fileAt += t->bytes + 16;
    }
    return b.CreateVector(sections);
  }

  void addParameters() {
    uint64_t qFloats = 16 * 24 * 4, kFloats = 8 * 12 * 4;
    std::vector<int64_t> qShape = spec.qShape;
    if (qShape.empty()) {
      qShape = {at.qBytes};
    }
    params = {
        fb::CreateParameter(b, b.CreateString("q"), 0, source(0, qFloats),
                            spec.qTrainable, 0, 0, false,
                            quantOf(specQ(), true, 0),
                            shard(qShape, at.qOffset, at.quantFlat)),
        fb::CreateParameter(b, b.CreateString("k"), spec.sharded ? 0 : 1,
                            source(qFloats, kFloats), false, 0, 0, false,
                            quantOf(specK(), false, 0),
                            shard({at.kBytes}, at.kOffset, at.quantFlat)),
        fb::CreateParameter(b, b.CreateString("g"), spec.sharded ? 0 : 2, 0,
                            false, 0, 0, false,
                            quantOf(specG(), false, gptqSections()),
                            shard({at.gBytes}, at.gOffset, at.quantFlat)),
        fb::CreateParameter(
            b, b.CreateString("f"), spec.sharded ? 1 : 3,
            spec.fSource ? source(qFloats + kFloats, 40)
                         : flatbuffers::Offset<fb::Source>(),
            false, 0, 0, false, 0, shard({10}, at.fOffset, at.floatFlat)),
        fb::CreateParameter(
            b, b.CreateString(kLoraA), spec.sharded ? 1 : 4, 0,
            spec.aTrainable,
            fb::CreateInit(b, fb::InitKind::KaimingUniform, std::sqrt(5.0), 3,
                           0, 11),
            0, false, 0, shard({2, 3}, at.aOffset, at.floatFlat)),
        fb::CreateParameter(b, b.CreateString(kLoraB), spec.sharded ? 2 : 5,
                            0, true,
                            fb::CreateInit(b, fb::InitKind::Normal, 0, 0, 0.5,
                                           11),
                            0, false, 0, shard({4, 2}, 0, at.trainFlat))};
  }

  void dequantize(uint32_t storage, uint32_t out, const quant::QuantSpec &q) {
    std::vector<flatbuffers::Offset<fb::Attribute>> attrs = {
        fb::CreateAttribute(b, b.CreateString("scheme"),
                            fb::AttrKind::String, 0, 0, 0, 0,
                            b.CreateString(quant::schemeName(q.scheme))),
        fb::CreateAttribute(b, b.CreateString("rows"), fb::AttrKind::Int,
                            q.rows),
        fb::CreateAttribute(b, b.CreateString("cols"), fb::AttrKind::Int,
                            q.cols)};
    ops.push_back(fb::CreateOp(
        b, fb::Step::Launch,
        fb::CreateLaunch(b, 0,
                         b.CreateVector(std::vector<uint32_t>{storage, out}),
                         b.CreateVector(attrs), 0,
                         b.CreateString("dequantize"))
            .Union()));
  }

  /// `dequantize`: the gathered bucket (sharded) or the whole buffers,
  /// dequantized as a compiled plan does before a base weight is used.
  void addOps() {
    if (spec.sharded) {
      ops.push_back(
          fb::CreateOp(b, fb::Step::Collective,
                       fb::CreateCollective(b, fb::CollectiveKind::AllGather,
                                            0, 3, b.CreateVector(group))
                           .Union()));
      dequantize(4, dq, specQ());
      dequantize(5, dq + 1, specK());
    } else {
      dequantize(0, dq, specQ());
      dequantize(1, dq + 1, specK());
    }
  }

  std::vector<uint8_t> finish() {
    std::vector<flatbuffers::Offset<fb::Kernel>> kernels = {fb::CreateKernel(
        b, b.CreateString("dequantize"), findCpuKernel("dequantize")->arity)};
    std::vector<flatbuffers::Offset<fb::Entry>> entries = {fb::CreateEntry(
        b, b.CreateString("dequantize_base"), 0,
        static_cast<uint32_t>(ops.size()))};
    auto adapter = fb::CreateAdapter(
        b, b.CreateString("lora-fa"), 2, 4.0, 0.0, false,
        b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{
            b.CreateString("proj")}),
        0,
        b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{
            b.CreateString("model.layers.0.proj")}));
    auto training = fb::CreateTraining(
        b, 1, 4, 16, true, 1, 1, 42, b.CreateString("adamw"), 0.01,
        b.CreateString("constant"), 0, 0.0, 0, 1, 1, b.CreateString("toy"),
        adapter);
    auto plan = fb::CreatePlan(
        b, kPlanVersion, b.CreateString("Zero3FrozenTest"),
        b.CreateString("toy"),
        fb::CreateTarget(b, fb::Backend::Cpu, b.CreateString("cpu"), 0, 1), 0,
        spec.worldSize, b.CreateVector(arenas), b.CreateVector(buffers),
        b.CreateVector(params), 0, b.CreateVector(kernels),
        b.CreateVector(std::vector<flatbuffers::Offset<fb::Stream>>{
            fb::CreateStream(b, b.CreateString("compute"))}),
        0, b.CreateVector(ops), 0, 0, 0, b.CreateVector(entries), 0,
        training);
    b.FinishSizePrefixed(plan, fb::PlanIdentifier());
    return std::vector<uint8_t>(b.GetBufferPointer(),
                                b.GetBufferPointer() + b.GetSize());
  }

  const FrozenPlan &spec;
  int64_t w;
  std::vector<int> group;
  Flats at;
  flatbuffers::FlatBufferBuilder b;
  /// The first of the two dequantized outputs' buffers.
  uint32_t dq = 0;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  std::vector<flatbuffers::Offset<fb::Arena>> arenas;
  std::vector<flatbuffers::Offset<fb::Parameter>> params;
  std::vector<flatbuffers::Offset<fb::Op>> ops;
};

std::vector<uint8_t> buildPlan(const FrozenPlan &spec) {
  return FrozenPlanBuilder(spec).build();
}

std::unique_ptr<LoadedPlan> load(const FrozenPlan &spec, std::string &error) {
  return loadPlanBytes(buildPlan(spec), "zero3-frozen", error);
}

std::string loadError(const FrozenPlan &spec) {
  return loadErrorOf(buildPlan(spec), "zero3-frozen");
}

template <typename T>
void writeFile(const std::string &path, const std::vector<T> &values) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(T)));
}

/// The files of the test model in `dir`: weights.bin (q^T, k and f as f32)
/// and gptq.bin (g's storage as four sections, 16 bytes apart, with g_idx
/// `badGroup` at column 5 when it is not -1).
FrozenPlan withFiles(const std::string &dir, int64_t badGroup = -1) {
  std::vector<float> values(16 * 24 + 8 * 12 + 10);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = std::sin(0.37f * static_cast<float>(i)) *
                (1.0f + 0.01f * static_cast<float>(i % 29));
  }
  values[16 * 24 + 7] = 6.0f; // an int8 row with a large absmax
  FrozenPlan spec;
  spec.weights = dir + "/weights.bin";
  writeFile(spec.weights, values);
  quant::QuantSpec g = specG();
  std::vector<uint8_t> storage(quant::storageBytes(g));
  EXPECT_EQ(quant::rtnQuantize(g, values.data(), storage.data()), "");
  quant::GptqLayout layout = quant::gptqLayout(g);
  if (badGroup >= 0) {
    int32_t bad = static_cast<int32_t>(badGroup);
    std::memcpy(storage.data() + layout.gIdx.offset + 5 * 4, &bad, 4);
  }
  std::vector<uint8_t> file(16, 0xAB);
  for (const quant::GptqSection *t :
       {&layout.qweight, &layout.qzeros, &layout.scales, &layout.gIdx}) {
    file.insert(file.end(), storage.begin() + t->offset,
                storage.begin() + t->offset + t->bytes);
    file.insert(file.end(), 16, 0xCD);
  }
  spec.gptq = dir + "/gptq.bin";
  writeFile(spec.gptq, file);
  return spec;
}

/// The buckets' flat spaces as the unsharded plan at one rank binds them:
/// the u8 one (q, k, g) and the frozen float one (f, lora_A).
struct ReferenceFlats {
  std::vector<uint8_t> quant;
  std::vector<float> frozen;
  std::vector<float> trainable;
};

ReferenceFlats referenceFlats(FrozenPlan spec) {
  spec.sharded = false;
  spec.worldSize = 1;
  Flats at;
  ReferenceFlats flats;
  flats.quant.assign(static_cast<size_t>(at.quantFlat), 0);
  flats.frozen.assign(static_cast<size_t>(at.floatFlat), 0.0f);
  flats.trainable.assign(static_cast<size_t>(at.trainFlat), 0.0f);
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(spec, error);
  EXPECT_NE(plan, nullptr) << error;
  if (!plan) {
    return flats;
  }
  std::unique_ptr<Session> session = openAtRank(*plan, 0, error);
  EXPECT_NE(session, nullptr) << error;
  if (!session) {
    return flats;
  }
  auto bytes = [&](uint32_t buffer) {
    return static_cast<const uint8_t *>(session->bufferData(buffer));
  };
  std::memcpy(flats.quant.data() + at.qOffset, bytes(0), at.qBytes);
  std::memcpy(flats.quant.data() + at.kOffset, bytes(1), at.kBytes);
  std::memcpy(flats.quant.data() + at.gOffset, bytes(2), at.gBytes);
  std::memcpy(flats.frozen.data() + at.fOffset, bytes(3), 40);
  std::memcpy(flats.frozen.data() + at.aOffset, bytes(4), 24);
  std::memcpy(flats.trainable.data(), bytes(5), 32);
  return flats;
}

/// Each rank of `worldSize` binds chunk r of every bucket, byte for byte
/// what one rank binds, padding zero.
void expectChunksOfTheReference(FrozenPlan spec, int worldSize) {
  ReferenceFlats want = referenceFlats(spec);
  spec.worldSize = worldSize;
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(spec, error);
  ASSERT_NE(plan, nullptr) << error;
  Flats at;
  auto bucketBytes = [&](uint32_t buffer) -> std::vector<uint8_t> {
    switch (buffer) {
    case 0:
      return want.quant;
    case 1:
      return {reinterpret_cast<const uint8_t *>(want.frozen.data()),
              reinterpret_cast<const uint8_t *>(want.frozen.data() +
                                                want.frozen.size())};
    default:
      return {reinterpret_cast<const uint8_t *>(want.trainable.data()),
              reinterpret_cast<const uint8_t *>(want.trainable.data() +
                                                want.trainable.size())};
    }
  };
  for (int rank = 0; rank < worldSize; ++rank) {
    std::unique_ptr<Session> session = openAtRank(*plan, rank, error);
    ASSERT_NE(session, nullptr) << error;
    for (uint32_t buffer = 0; buffer < 3; ++buffer) {
      std::vector<uint8_t> flat = bucketBytes(buffer);
      uint64_t chunk = plan->bufferBytes(buffer);
      ASSERT_EQ(chunk * static_cast<uint64_t>(worldSize), flat.size());
      const auto *got =
          static_cast<const uint8_t *>(session->bufferData(buffer));
      EXPECT_EQ(std::memcmp(got, flat.data() + rank * chunk, chunk), 0)
          << "rank " << rank << " of " << worldSize << ", buffer " << buffer;
    }
    // Padding between and after the quantized members stays zero.
    const auto *bytes = static_cast<const uint8_t *>(session->bufferData(0));
    int64_t chunk = at.quantFlat / worldSize;
    for (int64_t i = 0; i < chunk; ++i) {
      int64_t flatAt = rank * chunk + i;
      bool padding =
          (flatAt >= at.qBytes && flatAt < at.kOffset) ||
          (flatAt >= at.kOffset + at.kBytes && flatAt < at.gOffset) ||
          flatAt >= at.gOffset + at.gBytes;
      if (padding) {
        EXPECT_EQ(bytes[i], 0) << "padding byte " << flatAt;
      }
    }
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

TEST(Zero3FrozenLoader, AcceptsFrozenAndQuantizedShards) {
  TempDir dir("zero3-frozen");
  FrozenPlan spec = withFiles(dir.path);
  EXPECT_EQ(loadError(spec), "");
  for (int world : {1, 4}) {
    FrozenPlan other = spec;
    other.worldSize = world;
    EXPECT_EQ(loadError(other), "") << world << " ranks";
  }
  FrozenPlan unsharded = spec;
  unsharded.sharded = false;
  EXPECT_EQ(loadError(unsharded), "");
}

TEST(Zero3FrozenLoader, RejectsQuantizedShardsThatAreNotTheirStorage) {
  TempDir dir("zero3-frozen");
  FrozenPlan spec = withFiles(dir.path);
  Flats at;
  FrozenPlan trainable = spec;
  trainable.qTrainable = true;
  EXPECT_TRUE(mentions(loadError(trainable),
                       "quantized parameter 'q' cannot be trainable"));
  std::string needs = "sharded quantized parameter 'q' needs a u8 chunk "
                      "buffer and a shard shape of [" +
                      std::to_string(at.qBytes) + "] (its storage bytes)";
  FrozenPlan longer = spec;
  longer.qShape = {at.qBytes + 1};
  EXPECT_TRUE(mentions(loadError(longer), needs));
  FrozenPlan matrix = spec;
  matrix.qShape = {at.qBytes / 4, 4};
  EXPECT_TRUE(mentions(loadError(matrix), needs));
  FrozenPlan floats = spec;
  floats.quantDType = fb::DType::F32; // the same chunk elements, as f32
  EXPECT_TRUE(mentions(loadError(floats), needs));
}

TEST(Zero3FrozenLoader, RejectsFrozenShardsWithNothingToBindAndMixedBuckets) {
  TempDir dir("zero3-frozen");
  FrozenPlan spec = withFiles(dir.path);
  FrozenPlan empty = spec;
  empty.fSource = false;
  EXPECT_TRUE(mentions(loadError(empty), "parameter 'f' has no source, no "
                                         "init and is not trainable"));
  FrozenPlan mixed = spec;
  mixed.aTrainable = true;
  EXPECT_TRUE(mentions(loadError(mixed),
                       std::string("trainable parameter '") + kLoraA +
                           "' shares buffer 1 with frozen parameter 'f' (a "
                           "bucket holds trainable, frozen or quantized "
                           "parameters, never a mix)"));
}

//===----------------------------------------------------------------------===//
// Binding
//===----------------------------------------------------------------------===//

TEST(Zero3FrozenSession, EachRankBindsItsChunkOfTheQuantizedStorage) {
  TempDir dir("zero3-frozen");
  FrozenPlan spec = withFiles(dir.path);
  ReferenceFlats want = referenceFlats(spec);
  Flats at;
  // The reference is what one rank binds: nf4 storage that is not all
  // zero, the int8 scales of its rows, the GPTQ file's sections.
  EXPECT_NE(std::count(want.quant.begin(), want.quant.begin() + at.qBytes, 0),
            at.qBytes);
  float scale;
  std::memcpy(&scale, want.quant.data() + at.kOffset, 4);
  EXPECT_GT(scale, 0.0f);
  EXPECT_NE(want.frozen[static_cast<size_t>(at.fOffset)], 0.0f);
  EXPECT_NE(want.frozen[static_cast<size_t>(at.aOffset)], 0.0f);
  expectChunksOfTheReference(spec, 2);
  // Four ranks: chunk boundaries fall inside each member; the last chunk
  // holds the end of g and padding.
  expectChunksOfTheReference(spec, 4);
}

TEST(Zero3FrozenSession, GptqSectionsAreCheckedWhole) {
  TempDir dir("zero3-frozen");
  FrozenPlan spec = withFiles(dir.path, /*badGroup=*/7);
  Flats at;
  int64_t gIdx = static_cast<int64_t>(quant::gptqLayout(specG()).gIdx.offset);
  int64_t badByte = at.gOffset + gIdx + 5 * 4;
  std::string error;
  int failedWithoutTheByte = 0;
  for (int world : {1, 2, 4}) {
    spec.worldSize = world;
    std::unique_ptr<LoadedPlan> plan = load(spec, error);
    ASSERT_NE(plan, nullptr) << error;
    int64_t chunk = at.quantFlat / world;
    for (int rank = 0; rank < world; ++rank) {
      int64_t begin = rank * chunk, end = begin + chunk;
      bool holdsG = begin < at.gOffset + at.gBytes && end > at.gOffset;
      std::unique_ptr<Session> session = openAtRank(*plan, rank, error);
      if (!holdsG) {
        EXPECT_NE(session, nullptr) << error;
        continue;
      }
      // A rank holding any of g reads and checks its whole storage.
      EXPECT_EQ(session, nullptr) << "rank " << rank << " of " << world;
      EXPECT_TRUE(
          mentions(error, "parameter 'g': g_idx[5] is 7, outside [0, 2)"))
          << "rank " << rank << " of " << world;
      failedWithoutTheByte += badByte < begin || badByte >= end;
    }
  }
  EXPECT_GT(failedWithoutTheByte, 0);
}

//===----------------------------------------------------------------------===//
// Checkpoint layout
//===----------------------------------------------------------------------===//

TEST(Zero3FrozenCheckpoint, AFrozenLoraAIsSavedAndRestoredWhole) {
  TempDir dir("zero3-frozen");
  FrozenPlan spec = withFiles(dir.path);
  ReferenceFlats want = referenceFlats(spec);
  Flats at;
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(spec, error);
  ASSERT_NE(plan, nullptr) << error;
  std::unique_ptr<Session> session = openAtRank(*plan, 1, error);
  ASSERT_NE(session, nullptr) << error;
  CheckpointLayout layout;
  ASSERT_TRUE(buildCheckpointLayout(*plan, *session, layout, error)) << error;
  // The adapter's weights: the frozen lora_A and the trainable lora_B,
  // whole; the base weights (quantized or not) are no part of it.
  ASSERT_EQ(layout.parameters.size(), 2u);
  const TensorSlot &a = layout.parameters[0];
  EXPECT_EQ(a.name, kLoraA);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(layout.parameters[1].name, kLoraB);
  ASSERT_EQ(layout.shards.size(), 2u);
  EXPECT_EQ(layout.shards[0]->buffer, 1u);
  EXPECT_EQ(layout.shards[0]->what, std::string("sharded parameter '") +
                                        kLoraA + "'");
  EXPECT_EQ(layout.shards[1]->buffer, 2u);
  // The same fingerprint as the unsharded plan's.
  FrozenPlan unsharded = spec;
  unsharded.sharded = false;
  unsharded.worldSize = 1;
  std::unique_ptr<LoadedPlan> whole = load(unsharded, error);
  ASSERT_NE(whole, nullptr) << error;
  std::unique_ptr<Session> wholeSession = openAtRank(*whole, 0, error);
  ASSERT_NE(wholeSession, nullptr) << error;
  CheckpointLayout wholeLayout;
  ASSERT_TRUE(
      buildCheckpointLayout(*whole, *wholeSession, wholeLayout, error))
      << error;
  EXPECT_EQ(layout.fingerprint, wholeLayout.fingerprint);
  // What is read into lora_A's slot reaches this rank's chunk (flat
  // [10, 20): f's last element, padding, lora_A, padding) and nothing
  // else of it changes.
  const auto *chunk = static_cast<const float *>(session->bufferData(1));
  std::vector<float> before(chunk, chunk + 10);
  std::iota(static_cast<float *>(a.data), static_cast<float *>(a.data) + 6,
            100.0f);
  ASSERT_EQ(syncLayout(*session, layout, false), "");
  for (int i = 0; i < 10; ++i) {
    int64_t flatAt = 10 + i;
    float expected = flatAt >= at.aOffset && flatAt < at.aOffset + 6
                         ? 100.0f + static_cast<float>(flatAt - at.aOffset)
                         : before[static_cast<size_t>(i)];
    EXPECT_EQ(chunk[i], expected) << "flat element " << flatAt;
  }
  EXPECT_EQ(chunk[0], want.frozen[10]); // f's last element, kept
}

TEST(Zero3FrozenCheckpoint, AdaptersMoveBetweenShardedAndUnshardedPlans) {
  // One rank: the buckets' groups are {0}, their chunks the whole spaces.
  TempDir dir("zero3-frozen");
  FrozenPlan spec = withFiles(dir.path);
  spec.worldSize = 1;
  FrozenPlan unsharded = spec;
  unsharded.sharded = false;
  PlanWithLayout shardedOne, wholeOne;
  ASSERT_EQ(openWithLayout(buildPlan(spec), "sharded", 0, shardedOne), "");
  ASSERT_EQ(openWithLayout(buildPlan(unsharded), "whole", 0, wholeOne), "");
  Session *sharded = shardedOne.session.get();
  Session *whole = wholeOne.session.get();
  CheckpointLayout &shardedLayout = shardedOne.layout;
  CheckpointLayout &wholeLayout = wholeOne.layout;
  std::string error;
  Flats at;
  // The sharded adapter, written: lora_A gathered whole under PEFT's name.
  auto *frozen = static_cast<float *>(sharded->bufferData(1));
  for (int i = 0; i < 6; ++i) {
    frozen[at.aOffset + i] = -2.0f - static_cast<float>(i);
  }
  ASSERT_EQ(syncLayout(*sharded, shardedLayout, true), "");
  ASSERT_TRUE(makeDirectories(dir.path + "/a", error)) << error;
  ASSERT_TRUE(makeDirectories(dir.path + "/b", error)) << error;
  ASSERT_TRUE(writeModelFiles(shardedLayout, dir.path + "/a", error)) << error;
  std::unique_ptr<SafetensorsFile> file = SafetensorsFile::open(
      dir.path + "/a/adapter_model.safetensors", error);
  ASSERT_NE(file, nullptr) << error;
  const SafetensorsTensor *loraA =
      file->find("base_model.model.model.layers.0.proj.lora_A.weight");
  ASSERT_NE(loraA, nullptr);
  EXPECT_EQ(loraA->shape, (std::vector<int64_t>{2, 3}));
  float last;
  std::memcpy(&last, loraA->data + 5 * 4, 4);
  EXPECT_EQ(last, -7.0f);
  // The unsharded plan starts from it ...
  ASSERT_TRUE(loadPeftAdapter(wholeLayout, dir.path + "/a", error)) << error;
  ASSERT_EQ(syncLayout(*whole, wholeLayout, false), "");
  const auto *wholeA = static_cast<const float *>(whole->bufferData(4));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(wholeA[i], -2.0f - static_cast<float>(i));
  }
  // ... and an unsharded adapter comes back into the chunk.
  auto *wholeB = static_cast<float *>(whole->bufferData(5));
  wholeB[3] = 9.0f;
  static_cast<float *>(whole->bufferData(4))[0] = 5.0f;
  ASSERT_TRUE(writeModelFiles(wholeLayout, dir.path + "/b", error)) << error;
  ASSERT_TRUE(loadPeftAdapter(shardedLayout, dir.path + "/b", error)) << error;
  ASSERT_EQ(syncLayout(*sharded, shardedLayout, false), "");
  EXPECT_EQ(frozen[at.aOffset], 5.0f);
  EXPECT_EQ(frozen[at.aOffset + 5], -7.0f);
  EXPECT_EQ(static_cast<const float *>(sharded->bufferData(2))[3], 9.0f);
}

//===----------------------------------------------------------------------===//
// Several ranks (mpirun)
//===----------------------------------------------------------------------===//

TEST(Zero3FrozenRanks, GatheredBytesDequantizeAsTheWholeWeight) {
  comm::LaunchInfo launch;
  std::string why = comm::detectLaunch(launch);
  if (!why.empty() || launch.worldSize < 2) {
    GTEST_SKIP() << "runs under mpirun -np 2 or more";
  }
  std::unique_ptr<comm::Communicator> world =
      comm::createMpiCommunicator(launch, why);
  ASSERT_TRUE(world) << why;
  int rank = world->rank(), size = world->size();
  Flats at;
  ASSERT_EQ(at.quantFlat % size, 0);
  // Rank 0 writes the files; every rank reads them.
  std::string dir = "/tmp/tailor-zero3-frozen-ranks-" +
                    std::to_string(launch.worldSize) + "-" +
                    std::to_string(static_cast<long>(getppid()));
  FrozenPlan spec;
  if (rank == 0) {
    ASSERT_TRUE(makeDirectories(dir, why)) << why;
    spec = withFiles(dir);
  }
  ASSERT_EQ(world->barrier(), "");
  spec.weights = dir + "/weights.bin";
  spec.gptq = dir + "/gptq.bin";
  spec.worldSize = size;
  ReferenceFlats want = referenceFlats(spec);
  std::string error;
  std::unique_ptr<LoadedPlan> plan = load(spec, error);
  ASSERT_NE(plan, nullptr) << error;
  std::unique_ptr<Session> session = openAtRank(*plan, rank, error);
  ASSERT_NE(session, nullptr) << error;
  ASSERT_EQ(session->setCommunicator(world.get()), "");
  // The u8 chunks gather into the whole bucket as bytes; `dequantize`
  // reads each weight from a view at its byte offset.
  ASSERT_EQ(session->runEntry(0), "");
  const auto *gathered = static_cast<const uint8_t *>(session->bufferData(3));
  EXPECT_EQ(std::memcmp(gathered, want.quant.data(), want.quant.size()), 0);
  struct Weight {
    quant::QuantSpec spec;
    int64_t offset;
    uint32_t out;
  } weights[2] = {{specQ(), at.qOffset, 6}, {specK(), at.kOffset, 7}};
  for (const Weight &w : weights) {
    std::vector<float> expected(static_cast<size_t>(w.spec.rows * w.spec.cols));
    quant::dequantizeTile(w.spec, want.quant.data() + w.offset, 0, w.spec.rows,
                          0, w.spec.cols, expected.data(), w.spec.cols);
    const auto *got = static_cast<const float *>(session->bufferData(w.out));
    EXPECT_EQ(std::memcmp(got, expected.data(), expected.size() * 4), 0)
        << quant::schemeName(w.spec.scheme);
  }
  ASSERT_EQ(world->barrier(), "");
  if (rank == 0) {
    std::string ignored;
    removeTree(dir, ignored);
  }
  session.reset();
  world.reset();
}
