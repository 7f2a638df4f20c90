//===- GenerationPlanTest.cpp - the loader's checks of a prefill entry ----===//
//
// A hand-built generation plan (flatbuffers API, no compiler): max_seq_len
// 16, batch 1, vocab 4, a `decode` entry and a `prefill` entry whose
// bindings (prefill_input_ids [1, C] i64, prefill_position and
// prefill_last i64 scalars, prefill_logits [1, 1, 4] f32) the loader
// checks, since tailor_generator runs the entry by those names and shapes.
// Each damage is refused with a message naming the binding; a plan without
// a prefill entry (before it existed, or --prefill-chunk 1) still loads.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/schema/plan_generated.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace tailor::runtime;
namespace fb = tailor::plan;

namespace {

/// What the hand-built plan's prefill entry looks like.
struct PrefillShape {
  bool entry = true;
  int64_t chunk = 4;
  fb::DType idsType = fb::DType::I64;
  int64_t logitsVocab = 4;
  /// Leaves prefill_last out.
  bool withLast = true;
  /// The entry prefill_logits is bound to (1: prefill).
  uint32_t logitsEntry = 1;
};

/// Buffers 0..2: decode's input_ids [1, 1], position [], logits [1, 1, 4];
/// 3..6: prefill's ids [1, C], position, last, logits; 64 bytes apart in
/// one activation arena. Entries: decode, then prefill (no ops: the
/// loader's checks are what is tested).
std::vector<uint8_t> buildPlan(const PrefillShape &shape) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<std::pair<fb::DType, std::vector<int64_t>>> specs = {
      {fb::DType::I64, {1, 1}},
      {fb::DType::I64, {}},
      {fb::DType::F32, {1, 1, 4}},
      {shape.idsType, {1, shape.chunk}},
      {fb::DType::I64, {}},
      {fb::DType::I64, {}},
      {fb::DType::F32, {1, 1, shape.logitsVocab}}};
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  uint64_t offset = 0;
  for (const auto &[dtype, dims] : specs) {
    uint64_t bytes = dtype == fb::DType::I64 ? 8 : 4;
    for (int64_t d : dims) {
      bytes *= static_cast<uint64_t>(d);
    }
    buffers.push_back(fb::CreateBuffer(b, 0, offset, bytes, dtype,
                                       b.CreateVector(dims)));
    offset += (bytes + 63) / 64 * 64;
  }
  std::vector<flatbuffers::Offset<fb::Arena>> arenas = {fb::CreateArena(
      b, b.CreateString("activations"), fb::ArenaKind::Host,
      fb::Category::Activations, offset, 64)};
  auto binding = [&](const char *name, uint32_t buffer, uint32_t entry) {
    return fb::CreateBinding(b, b.CreateString(name), buffer, entry);
  };
  std::vector<flatbuffers::Offset<fb::Binding>> inputs = {
      binding("input_ids", 0, 0), binding("position", 1, 0)};
  std::vector<flatbuffers::Offset<fb::Binding>> outputs = {
      binding("logits", 2, 0)};
  std::vector<flatbuffers::Offset<fb::Entry>> entries = {
      fb::CreateEntry(b, b.CreateString("decode"), 0, 0)};
  if (shape.entry) {
    inputs.push_back(binding("prefill_input_ids", 3, 1));
    inputs.push_back(binding("prefill_position", 4, 1));
    if (shape.withLast) {
      inputs.push_back(binding("prefill_last", 5, 1));
    }
    outputs.push_back(binding("prefill_logits", 6, shape.logitsEntry));
    entries.push_back(fb::CreateEntry(b, b.CreateString("prefill"), 0, 0));
  }
  std::vector<int64_t> eos = {};
  auto generation = fb::CreateGeneration(b, 16, 1, 4, b.CreateVector(eos));
  auto target =
      fb::CreateTarget(b, fb::Backend::Cpu, b.CreateString("cpu"), 0, 1);
  auto arenaVector = b.CreateVector(arenas);
  auto bufferVector = b.CreateVector(buffers);
  auto kernels = b.CreateVector(std::vector<flatbuffers::Offset<fb::Kernel>>{});
  auto streams = b.CreateVector(std::vector<flatbuffers::Offset<fb::Stream>>{
      fb::CreateStream(b, b.CreateString("compute"))});
  auto ops = b.CreateVector(std::vector<flatbuffers::Offset<fb::Op>>{});
  auto inputVector = b.CreateVector(inputs);
  auto outputVector = b.CreateVector(outputs);
  auto entryVector = b.CreateVector(entries);
  auto memory = fb::CreateMemory(b, 0, 0, offset, 0, 0, 0, offset, 0);
  auto producer = b.CreateString("GenerationPlanTest");
  auto model = b.CreateString("none");
  fb::PlanBuilder plan(b);
  plan.add_version(kPlanVersion);
  plan.add_producer(producer);
  plan.add_model(model);
  plan.add_target(target);
  plan.add_arenas(arenaVector);
  plan.add_buffers(bufferVector);
  plan.add_kernels(kernels);
  plan.add_streams(streams);
  plan.add_ops(ops);
  plan.add_inputs(inputVector);
  plan.add_outputs(outputVector);
  plan.add_memory(memory);
  plan.add_entries(entryVector);
  plan.add_generation(generation);
  fb::FinishSizePrefixedPlanBuffer(b, plan.Finish());
  return std::vector<uint8_t>(b.GetBufferPointer(),
                              b.GetBufferPointer() + b.GetSize());
}

/// "" when the plan loads, else the loader's message.
std::string load(const PrefillShape &shape) {
  std::vector<uint8_t> bytes = buildPlan(shape);
  std::string error;
  std::unique_ptr<LoadedPlan> plan = LoadedPlan::loadFromMemory(
      bytes.data(), bytes.size(), "/tmp", "test.tplan", LoadOptions(), error);
  return plan ? "" : error;
}

} // namespace

TEST(GenerationPlanTest, LoadsAPlanWithAndWithoutAPrefillEntry) {
  EXPECT_EQ(load({}), "");
  PrefillShape none;
  none.entry = false;
  EXPECT_EQ(load(none), "");
  PrefillShape whole;
  whole.chunk = 16; // as long as the cache
  EXPECT_EQ(load(whole), "");
}

TEST(GenerationPlanTest, RefusesAChunkOutsideTheCache) {
  PrefillShape one;
  one.chunk = 1;
  EXPECT_NE(load(one).find("the prefill chunk 1 is outside [2, max_seq_len "
                           "16]"),
            std::string::npos)
      << load(one);
  PrefillShape longer;
  longer.chunk = 17;
  EXPECT_NE(load(longer).find("the prefill chunk 17 is outside"),
            std::string::npos)
      << load(longer);
}

TEST(GenerationPlanTest, RefusesBindingsOfTheWrongKind) {
  PrefillShape ints;
  ints.idsType = fb::DType::I32;
  EXPECT_NE(load(ints).find("prefill input 'prefill_input_ids' is I32 [1, "
                            "4], expected I64 of rank 2"),
            std::string::npos)
      << load(ints);
  PrefillShape vocab;
  vocab.logitsVocab = 5;
  EXPECT_NE(load(vocab).find("prefill output 'prefill_logits' is F32 [1, 1, "
                             "5]"),
            std::string::npos)
      << load(vocab);
  PrefillShape noLast;
  noLast.withLast = false;
  EXPECT_NE(load(noLast).find("the prefill entry has no input "
                              "'prefill_last'"),
            std::string::npos)
      << load(noLast);
  PrefillShape elsewhere;
  elsewhere.logitsEntry = 0;
  EXPECT_NE(load(elsewhere).find("the prefill entry has no output "
                                 "'prefill_logits'"),
            std::string::npos)
      << load(elsewhere);
}
