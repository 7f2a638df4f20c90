//===- TrainerTest.cpp - the training loop on a hand-built plan -----------===//
//
// A toy LoRA "model" built with the flatbuffers API (no compiler needed):
// logits = B (A dropout(embed[ids])), cross-entropy loss, AdamW on A and B,
// two micro-batches per step. It is enough to check what the loop owns:
// metrics, checkpoints, the final adapter, stopping on request, that an
// interrupted and resumed run is bit-identical to an uninterrupted one, and
// that evaluating a validation set changes nothing in training.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"
#include "runtime/Plan.h"
#include "runtime/comm/Communicator.h"
#include "runtime/quant/QuantizedWeight.h"
#include "runtime/train/AtomicFile.h"
#include "runtime/train/DataLoader.h"
#include "runtime/train/Safetensors.h"
#include "test/runtime/train/TrainTestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cinttypes>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

using namespace tailor::train;
using namespace tailor::train::testing;
namespace fb = tailor::plan;

namespace {

constexpr int64_t kVocab = 16, kDim = 8, kRank = 4, kBatch = 2, kSeq = 4;

/// What varies between the toy plans.
struct ToyPlan {
  /// false leaves out the entries and training table, like an inference
  /// plan.
  bool training = true;
  /// LoRA dropout in train_step (and a `seed` input).
  bool dropout = true;
  /// The training table's data fields.
  flatbuffers::Optional<bool> samplePacking = flatbuffers::nullopt;
  double valSetSize = 0;
  int64_t evalSteps = 0;
  std::string name = "toy.tplan";
  /// Micro-batches per step on each rank, and the ranks the plan is for
  /// (no collectives: the toy's ranks share nothing but the loop's sums).
  int accumulation = 2;
  int worldSize = 1;
  /// ZeRO-1 over the world (plan 1.7): lora_A and lora_B form one flat
  /// bucket whose AdamW moments are sharded; optimizer_step reduce-scatters
  /// the gradient accumulators, zeroes them, updates this rank's chunk of
  /// the weights (a rank-strided view) and all-gathers them in place.
  bool zero = false;
  /// ZeRO-3 over the world (plan 1.7): lora_A and lora_B themselves are
  /// kept only as this rank's chunk of their bucket (Parameter.shard);
  /// train_step all-gathers the chunk into activations before using them,
  /// optimizer_step reduce-scatters the gradients and updates the chunk.
  bool zero3 = false;
  /// QLoRA: a frozen nf4 base weight W [kVocab, kDim] (double quantized
  /// from base.bin) beside the adapter, logits = W x + B A dropout(x).
  /// With zero3 its storage bytes are sharded in a u8 bucket of their own,
  /// all-gathered into activations before use and read by linear_quantized
  /// from a view of the gathered bytes.
  bool quantizedBase = false;
  /// Activation offload (issue 18): arenas 0-4 are Device arenas and a
  /// Host arena holds dropout(x) between forward and backward. On a copy
  /// stream, ordered by events, train_step copies it out after its last
  /// forward use, wipes it, and copies it back before the backward reads
  /// it.
  bool offload = false;
};

/// The toy's base weight W [kVocab, kDim] as QLoRA stores it.
tailor::quant::QuantSpec baseSpec() {
  tailor::quant::QuantSpec spec;
  spec.scheme = tailor::quant::Scheme::NF4;
  spec.rows = kVocab;
  spec.cols = kDim;
  return spec;
}

/// Writes the toy plan (and its embedding weights) into `dir`; returns the
/// plan path.
std::string writePlan(const std::string &dir, const ToyPlan &toy = {}) {
  bool training = toy.training;
  flatbuffers::FlatBufferBuilder b;
  struct BufferSpec {
    uint32_t arena;
    fb::DType dtype;
    std::vector<int64_t> shape;
    int alias = -1; // share another buffer's bytes
    uint64_t rankStride = 0;
  };
  auto elementBytes = [](fb::DType dtype) -> uint64_t {
    return dtype == fb::DType::I64 ? 8 : dtype == fb::DType::U8 ? 1 : 4;
  };
  // Arenas: 0 parameters, 1 gradients, 2 optimizer state, 3 activations,
  // 4 constants.
  const int64_t n = kBatch * kSeq;
  std::vector<BufferSpec> specs = {
      {0, fb::DType::F32, {kVocab, kDim}},         // 0 embed
      {0, fb::DType::F32, {kRank, kDim}},          // 1 lora_A
      {0, fb::DType::F32, {kVocab, kRank}},        // 2 lora_B
      {1, fb::DType::F32, {kRank, kDim}},          // 3 grad A
      {1, fb::DType::F32, {kVocab, kRank}},        // 4 grad B
      {2, fb::DType::F32, {kRank, kDim}},          // 5 exp_avg A
      {2, fb::DType::F32, {kRank, kDim}},          // 6 exp_avg_sq A
      {2, fb::DType::F32, {kVocab, kRank}},        // 7 exp_avg B
      {2, fb::DType::F32, {kVocab, kRank}},        // 8 exp_avg_sq B
      {3, fb::DType::I64, {kBatch, kSeq}},         // 9 input_ids
      {3, fb::DType::I64, {kBatch, kSeq}},         // 10 labels
      {3, fb::DType::I64, {}},                     // 11 seed
      {3, fb::DType::F32, {kBatch, kSeq, kDim}},   // 12 x
      {3, fb::DType::F32, {kBatch, kSeq, kDim}},   // 13 dropout(x)
      {3, fb::DType::F32, {kBatch, kSeq, kRank}},  // 14 h
      {3, fb::DType::F32, {kBatch, kSeq, kVocab}}, // 15 logits
      {3, fb::DType::F32, {n, kVocab}, 15},        // 16 logits as rows
      {3, fb::DType::I64, {n}, 10},                // 17 labels as rows
      {3, fb::DType::F32, {}},                     // 18 loss
      {3, fb::DType::F32, {n}},                    // 19 loss workspace
      {3, fb::DType::F32, {n, kVocab}},            // 20 dlogits
      {3, fb::DType::F32, {n, kDim}, 13},          // 21 dropout(x) as rows
      {3, fb::DType::F32, {n, kRank}, 14},         // 22 h as rows
      {3, fb::DType::F32, {n, kRank}},             // 23 dh
      {3, fb::DType::I64, {}},                     // 24 step
      {3, fb::DType::F32, {}},                     // 25 lr
      {3, fb::DType::F32, {}},                     // 26 grad_norm
      {4, fb::DType::F32, {}},                     // 27 dloss = 1
      {4, fb::DType::F32, {}},                     // 28 lr constant
      {4, fb::DType::F32, {}},                     // 29 grad scale = 1/2
  };
  // ZeRO: A and B lie back to back in the parameters arena and in the
  // gradients arena, which makes each pair one bucket of 96 elements.
  const int64_t bucket = kRank * kDim + kVocab * kRank;
  const int64_t chunk = bucket / toy.worldSize;
  if (toy.zero3) {
    // A and B are gathered into activations, back to back (the first
    // activation buffers, 128 and 256 bytes).
    specs[1] = {3, fb::DType::F32, {kRank, kDim}};
    specs[2] = {3, fb::DType::F32, {kVocab, kRank}};
    specs.push_back({3, fb::DType::F32, {bucket}, 1}); // 30 gathered A, B
    specs.push_back({0, fb::DType::F32, {chunk}});     // 31 the chunk
    specs.push_back({1, fb::DType::F32, {bucket}, 3}); // 32 gradients
    specs.push_back({3, fb::DType::F32, {chunk}});     // 33 reduced chunk
    specs.push_back({2, fb::DType::F32, {chunk}});     // 34 exp_avg
    specs.push_back({2, fb::DType::F32, {chunk}});     // 35 exp_avg_sq
  }
  if (toy.zero) {
    specs.push_back({0, fb::DType::F32, {bucket}, 1});    // 30 weights
    specs.push_back({0, fb::DType::F32, {chunk}, 1,       // 31 this rank's
                     static_cast<uint64_t>(chunk) * 4});  //    chunk of 30
    specs.push_back({1, fb::DType::F32, {bucket}, 3});    // 32 gradients
    specs.push_back({3, fb::DType::F32, {chunk}});        // 33 reduced chunk
    specs.push_back({2, fb::DType::F32, {chunk}});        // 34 exp_avg
    specs.push_back({2, fb::DType::F32, {chunk}});        // 35 exp_avg_sq
  }
  // QLoRA: the base weight's storage (ZeRO-3: its bucket's u8 chunk, the
  // gathered bucket and the storage's view in it), W x and B h apart, and
  // linear_quantized's workspace (enough for 64 workers).
  const tailor::quant::QuantSpec base = baseSpec();
  const int64_t baseBytes =
      static_cast<int64_t>(tailor::quant::storageBytes(base));
  const int64_t baseFlat = (baseBytes + 63) / 64 * 64;
  uint32_t baseStorage = 0, baseChunk = 0, baseOut = 0;
  if (toy.quantizedBase) {
    if (toy.zero3) {
      baseChunk = static_cast<uint32_t>(specs.size());
      specs.push_back({0, fb::DType::U8, {baseFlat / toy.worldSize}});
      specs.push_back({3, fb::DType::U8, {baseFlat}});
      specs.push_back({3, fb::DType::U8, {baseBytes}, int(baseChunk) + 1});
      baseStorage = baseChunk + 2;
    } else {
      baseStorage = static_cast<uint32_t>(specs.size());
      specs.push_back({0, fb::DType::U8, {baseBytes}});
    }
    baseOut = static_cast<uint32_t>(specs.size());
    specs.push_back({3, fb::DType::F32, {kBatch, kSeq, kVocab}}); // W x
    specs.push_back({3, fb::DType::F32, {kBatch, kSeq, kVocab}}); // B h
    specs.push_back({3, fb::DType::F32,
                     {tailor::quant::linearWorkspaceFloats(base, false, 64)}});
  }
  uint32_t offloaded = 0;
  if (toy.offload) {
    offloaded = static_cast<uint32_t>(specs.size());
    specs.push_back({5, fb::DType::F32, {kBatch, kSeq, kDim}});
  }
  std::vector<uint64_t> arenaSize(6, 0), offsets;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (const BufferSpec &spec : specs) {
    uint64_t bytes = elementBytes(spec.dtype);
    for (int64_t d : spec.shape) {
      bytes *= static_cast<uint64_t>(d);
    }
    uint64_t offset;
    if (spec.alias >= 0) {
      offset = offsets[static_cast<size_t>(spec.alias)];
    } else {
      offset = arenaSize[spec.arena];
      arenaSize[spec.arena] += (bytes + 63) / 64 * 64;
    }
    offsets.push_back(offset);
    buffers.push_back(fb::CreateBuffer(b, spec.arena, offset, bytes, spec.dtype,
                                       b.CreateVector(spec.shape),
                                       spec.rankStride));
  }
  const char *arenaNames[6] = {"parameters", "gradients", "optimizer",
                               "activations", "constants", "offload"};
  fb::Category categories[6] = {
      fb::Category::Parameters,  fb::Category::Gradients,
      fb::Category::OptimizerState, fb::Category::Activations,
      fb::Category::Constants,   fb::Category::Activations};
  std::vector<flatbuffers::Offset<fb::Arena>> arenas;
  for (int i = 0; i < (toy.offload ? 6 : 5); ++i) {
    fb::ArenaKind kind = toy.offload && i < 5 ? fb::ArenaKind::Device
                                              : fb::ArenaKind::Host;
    arenas.push_back(fb::CreateArena(
        b, b.CreateString(arenaNames[i]), kind, categories[i],
        std::max<uint64_t>(arenaSize[static_cast<size_t>(i)], 64), 64));
  }

  // Embedding weights: a fixed pattern, in a file next to the plan.
  std::vector<float> embed(static_cast<size_t>(kVocab * kDim));
  for (size_t i = 0; i < embed.size(); ++i) {
    embed[i] = std::sin(0.7f * static_cast<float>(i)) * 0.5f;
  }
  std::ofstream(dir + "/embed.bin", std::ios::binary)
      .write(reinterpret_cast<const char *>(embed.data()),
             static_cast<std::streamsize>(embed.size() * 4));
  std::vector<int32_t> world(static_cast<size_t>(toy.worldSize));
  std::iota(world.begin(), world.end(), 0);
  // ZeRO-3: both adapter weights live in the chunk, buffer 31.
  auto shard = [&](std::vector<int64_t> shape, int64_t offset) {
    return toy.zero3
               ? fb::CreateParameterShard(b, b.CreateVector(shape), offset,
                                          bucket, b.CreateVector(world))
               : flatbuffers::Offset<fb::ParameterShard>();
  };
  std::vector<flatbuffers::Offset<fb::Parameter>> params = {
      fb::CreateParameter(b, b.CreateString("model.embed_tokens.weight"), 0,
                          fb::CreateSource(b, b.CreateString("embed.bin"), 0,
                                           embed.size() * 4, fb::DType::F32)),
      fb::CreateParameter(b,
                          b.CreateString("model.layers.0.proj.lora_A.weight"),
                          toy.zero3 ? 31 : 1, 0, true,
                          fb::CreateInit(b, fb::InitKind::KaimingUniform,
                                         std::sqrt(5.0), kDim, 0, 1),
                          0, false, 0, shard({kRank, kDim}, 0)),
      fb::CreateParameter(
          b, b.CreateString("model.layers.0.proj.lora_B.weight"),
          toy.zero3 ? 31 : 2, 0, true, fb::CreateInit(b, fb::InitKind::Zeros),
          0, false, 0, shard({kVocab, kRank}, kRank * kDim))};
  if (toy.quantizedBase) {
    std::vector<float> weight(static_cast<size_t>(kVocab * kDim));
    for (size_t i = 0; i < weight.size(); ++i) {
      weight[i] = std::cos(0.3f * static_cast<float>(i)) * 0.4f;
    }
    std::ofstream(dir + "/base.bin", std::ios::binary)
        .write(reinterpret_cast<const char *>(weight.data()),
               static_cast<std::streamsize>(weight.size() * 4));
    params.push_back(fb::CreateParameter(
        b, b.CreateString("model.layers.0.proj.base_layer.weight"),
        toy.zero3 ? baseChunk : baseStorage,
        fb::CreateSource(b, b.CreateString("base.bin"), 0, weight.size() * 4,
                         fb::DType::F32),
        false, 0, 0, false,
        fb::CreateQuantization(b, b.CreateString("nf4"), kVocab, kDim),
        toy.zero3 ? fb::CreateParameterShard(
                        b, b.CreateVector(std::vector<int64_t>{baseBytes}), 0,
                        baseFlat, b.CreateVector(world))
                  : flatbuffers::Offset<fb::ParameterShard>()));
  }
  auto scalar = [&](float value) {
    return b.CreateVector(reinterpret_cast<const uint8_t *>(&value), 4);
  };
  std::vector<flatbuffers::Offset<fb::Constant>> constants = {
      fb::CreateConstant(b, 27, scalar(1.0f)),
      fb::CreateConstant(b, 28, scalar(0.05f)),
      fb::CreateConstant(
          b, 29,
          scalar(1.0f / static_cast<float>(
                            toy.accumulation *
                            (toy.zero || toy.zero3 ? toy.worldSize : 1))))};

  std::vector<std::string> kernelNames;
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  auto launch =
      [&](const std::string &kernel, std::vector<uint32_t> operands,
          std::vector<flatbuffers::Offset<fb::Attribute>> attrs = {}) {
        auto it = std::find(kernelNames.begin(), kernelNames.end(), kernel);
        uint32_t index = static_cast<uint32_t>(it - kernelNames.begin());
        if (it == kernelNames.end()) {
          kernelNames.push_back(kernel);
        }
        ops.push_back(fb::CreateOp(
            b, fb::Step::Launch,
            fb::CreateLaunch(b, index, b.CreateVector(operands),
                             b.CreateVector(attrs), 0, b.CreateString(kernel))
                .Union()));
      };
  auto intAttr = [&](const char *name, int64_t value) {
    return fb::CreateAttribute(b, b.CreateString(name), fb::AttrKind::Int,
                               value);
  };
  auto floatAttr = [&](const char *name, double value) {
    return fb::CreateAttribute(b, b.CreateString(name), fb::AttrKind::Float, 0,
                               value);
  };
  // Offload: compute (stream 0) hands buffer `from` to the copy stream
  // (1), which copies it to `to` and hands back (events `event`, +1).
  auto copyOnStream = [&](fb::CopyKind kind, uint32_t from, uint32_t to,
                          uint32_t event) {
    ops.push_back(fb::CreateOp(b, fb::Step::Record,
                               fb::CreateRecord(b, event, 0).Union()));
    ops.push_back(fb::CreateOp(b, fb::Step::Wait,
                               fb::CreateWait(b, event, 1).Union()));
    ops.push_back(fb::CreateOp(b, fb::Step::Copy,
                               fb::CreateCopy(b, kind, from, to, 1).Union()));
    ops.push_back(fb::CreateOp(b, fb::Step::Record,
                               fb::CreateRecord(b, event + 1, 1).Union()));
    ops.push_back(fb::CreateOp(b, fb::Step::Wait,
                               fb::CreateWait(b, event + 1, 0).Union()));
  };
  auto collective = [&](fb::CollectiveKind kind, uint32_t in, uint32_t out) {
    ops.push_back(fb::CreateOp(b, fb::Step::Collective,
                               fb::CreateCollective(b, kind, in, out,
                                                    b.CreateVector(world),
                                                    fb::Reduction::Sum)
                                   .Union()));
  };
  // train_step: forward, loss, backward into the accumulators (ZeRO-3
  // gathers the weights first).
  if (toy.zero3) {
    collective(fb::CollectiveKind::AllGather, 31, 30);
    if (toy.quantizedBase) {
      collective(fb::CollectiveKind::AllGather, baseChunk, baseChunk + 1);
    }
  }
  launch("embedding", {0, 9, 12});
  if (toy.dropout) {
    launch("dropout", {12, 11, 13}, {floatAttr("p", 0.25)});
  } else {
    launch("copy", {12, 13});
  }
  launch("linear", {13, 1, 14});
  if (toy.offload) {
    copyOnStream(fb::CopyKind::DeviceToHost, 13, offloaded, 0);
    launch("zero", {13});
  }
  if (toy.quantizedBase) {
    // The base weight sees x itself (LoRA's dropout is on the adapter's
    // path only) and, being frozen, needs no gradient.
    launch("linear_quantized", {12, baseStorage, baseOut, baseOut + 2},
           {fb::CreateAttribute(b, b.CreateString("scheme"),
                                fb::AttrKind::String, 0, 0, 0, 0,
                                b.CreateString("nf4")),
            intAttr("rows", kVocab), intAttr("cols", kDim)});
    launch("linear", {14, 2, baseOut + 1});
    launch("add", {baseOut, baseOut + 1, 15});
  } else {
    launch("linear", {14, 2, 15});
  }
  launch("cross_entropy", {16, 17, 18, 19});
  launch("cross_entropy_grad", {16, 17, 27, 20});
  launch("linear_weight_grad", {20, 22, 4}, {intAttr("accumulate", 1)});
  launch("linear", {20, 2, 23}, {intAttr("transpose_weight", 1)});
  if (toy.offload) {
    copyOnStream(fb::CopyKind::HostToDevice, offloaded, 13, 2);
  }
  launch("linear_weight_grad", {23, 21, 3}, {intAttr("accumulate", 1)});
  uint32_t trainOps = static_cast<uint32_t>(ops.size());
  // optimizer_step: norm, constant learning rate, AdamW.
  launch("global_norm", {3, 4, 26});
  launch("copy", {28, 25});
  std::vector<flatbuffers::Offset<fb::Attribute>> adam = {
      floatAttr("beta1", 0.9), floatAttr("beta2", 0.999),
      floatAttr("epsilon", 1e-8), floatAttr("weight_decay", 0.01)};
  if (toy.zero3) {
    collective(fb::CollectiveKind::ReduceScatter, 32, 33);
    launch("zero", {32});
    launch("adamw", {31, 33, 34, 35, 25, 24, 29}, adam);
  } else if (toy.zero) {
    collective(fb::CollectiveKind::ReduceScatter, 32, 33);
    launch("zero", {32});
    launch("adamw", {31, 33, 34, 35, 25, 24, 29}, adam);
    collective(fb::CollectiveKind::AllGather, 31, 30);
  } else {
    launch("adamw", {1, 3, 5, 6, 25, 24, 29}, adam);
    launch("adamw", {2, 4, 7, 8, 25, 24, 29}, adam);
  }
  uint32_t optimizerOps = static_cast<uint32_t>(ops.size()) - trainOps;

  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (const std::string &name : kernelNames) {
    kernels.push_back(fb::CreateKernel(
        b, b.CreateString(name), tailor::runtime::findCpuKernel(name)->arity));
  }
  uint32_t optimizerEntry = training ? 1 : 0;
  std::vector<flatbuffers::Offset<fb::Binding>> inputs = {
      fb::CreateBinding(b, b.CreateString("input_ids"), 9, 0),
      fb::CreateBinding(b, b.CreateString("labels"), 10, 0),
      fb::CreateBinding(b, b.CreateString("step"), 24, optimizerEntry)};
  if (toy.dropout) {
    inputs.push_back(fb::CreateBinding(b, b.CreateString("seed"), 11, 0));
  }
  std::vector<flatbuffers::Offset<fb::Binding>> outputs = {
      fb::CreateBinding(b, b.CreateString("loss"), 18, 0),
      fb::CreateBinding(b, b.CreateString("lr"), 25, optimizerEntry),
      fb::CreateBinding(b, b.CreateString("grad_norm"), 26, optimizerEntry)};
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Entry>>>
      entries;
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::State>>>
      states;
  flatbuffers::Offset<fb::Training> trainingTable;
  if (training) {
    entries = b.CreateVector(std::vector<flatbuffers::Offset<fb::Entry>>{
        fb::CreateEntry(b, b.CreateString("train_step"), 0, trainOps),
        fb::CreateEntry(b, b.CreateString("optimizer_step"), trainOps,
                        optimizerOps)});
    std::vector<flatbuffers::Offset<fb::State>> stateList;
    const char *names[2] = {"model.layers.0.proj.lora_A.weight",
                            "model.layers.0.proj.lora_B.weight"};
    const char *kinds[3] = {"grad", "exp_avg", "exp_avg_sq"};
    uint32_t stateBuffers[2][3] = {{3, 5, 6}, {4, 7, 8}};
    for (int p = 0; p < 2; ++p) {
      for (int k = 0; k < (toy.zero || toy.zero3 ? 1 : 3); ++k) {
        stateList.push_back(fb::CreateState(
            b, b.CreateString(std::string(names[p]) + "." + kinds[k]),
            stateBuffers[p][k], b.CreateString(names[p]),
            b.CreateString(kinds[k])));
      }
    }
    for (int k = 1; (toy.zero || toy.zero3) && k < 3; ++k) {
      auto shard = fb::CreateStateShard(
          b,
          b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{
              b.CreateString(names[0]), b.CreateString(names[1])}),
          b.CreateVector(std::vector<int64_t>{0, kRank * kDim}),
          b.CreateVector(std::vector<int64_t>{kRank * kDim, kVocab * kRank}),
          bucket, b.CreateVector(world));
      stateList.push_back(fb::CreateState(
          b, b.CreateString(std::string("zero.b0.") + kinds[k]),
          static_cast<uint32_t>(33 + k), b.CreateString("zero.b0"),
          b.CreateString(kinds[k]), shard));
    }
    states = b.CreateVector(stateList);
    auto adapter = fb::CreateAdapter(
        b, b.CreateString("lora"), kRank, 8.0, 0.25, false,
        b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{
            b.CreateString("proj")}),
        0,
        b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{
            b.CreateString("model.layers.0.proj")}));
    trainingTable = fb::CreateTraining(
        b, kBatch, kSeq, kVocab, /*shuffle=*/true, toy.accumulation,
        /*max_steps=*/6, /*seed=*/42, b.CreateString("adamw"), 0.05,
        b.CreateString("constant"), 0, 0.01, 0, /*save_steps=*/2, 1,
        b.CreateString("toy"), adapter, /*recipe=*/0, toy.samplePacking,
        /*pad_token_id=*/0, toy.valSetSize, toy.evalSteps);
  }
  std::vector<flatbuffers::Offset<fb::Stream>> streams = {
      fb::CreateStream(b, b.CreateString("compute"))};
  std::vector<flatbuffers::Offset<fb::Event>> events;
  if (toy.offload) {
    streams.push_back(fb::CreateStream(b, b.CreateString("copy")));
    for (int e = 0; e < 4; ++e) {
      events.push_back(
          fb::CreateEvent(b, b.CreateString("e" + std::to_string(e))));
    }
  }
  auto plan = fb::CreatePlan(
      b, tailor::runtime::kPlanVersion, b.CreateString("TrainerTest"),
      b.CreateString("toy"),
      fb::CreateTarget(b, fb::Backend::Cpu, b.CreateString("cpu"), 0, 2), 0,
      toy.worldSize,
      b.CreateVector(arenas), b.CreateVector(buffers), b.CreateVector(params),
      b.CreateVector(constants), b.CreateVector(kernels),
      b.CreateVector(streams), toy.offload ? b.CreateVector(events) : 0,
      b.CreateVector(ops), b.CreateVector(inputs), b.CreateVector(outputs),
      0, entries, states, trainingTable);
  b.FinishSizePrefixed(plan, fb::PlanIdentifier());
  std::string path = dir + "/" + toy.name;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(b.GetBufferPointer()),
             static_cast<std::streamsize>(b.GetSize()));
  return path;
}

/// 16 sequences of 4 tokens: 4 steps an epoch, so 6 steps cross into the
/// second (shuffled) epoch.
std::string writeData(const std::string &dir) {
  std::vector<uint16_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<uint16_t>((i * 7 + i / 5) % kVocab);
  }
  std::string path = dir + "/train.bin";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * 2));
  return path;
}

/// Options that train the toy plan on its data into `dir`/`output`.
TrainOptions toyOptions(const std::string &dir, const std::string &output) {
  TrainOptions options;
  options.planPath = writePlan(dir);
  options.dataPath = writeData(dir);
  options.outputDir = dir + "/" + output;
  return options;
}

struct TrainRun {
  std::string error;
  TrainResult result;
  std::string out;
  std::string err;
};

std::string readAll(FILE *file) {
  std::string text;
  std::rewind(file);
  char line[512];
  while (std::fgets(line, sizeof(line), file)) {
    text += line;
  }
  return text;
}

TrainRun train(TrainOptions options) {
  TrainRun run;
  FILE *out = std::tmpfile();
  FILE *err = std::tmpfile();
  options.out = out;
  options.err = err;
  options.threads = 2;
  run.error = runTraining(options, run.result);
  run.out = readAll(out);
  run.err = readAll(err);
  std::fclose(out);
  std::fclose(err);
  return run;
}

/// metrics.jsonl without the timing fields, which differ between runs.
std::vector<std::string> losses(const std::string &dir) {
  std::vector<std::string> rows;
  std::istringstream in(readFile(dir + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    rows.push_back(line.substr(0, line.find(",\"tokens_per_s\"")));
  }
  return rows;
}

TEST(Trainer, TrainsWritesMetricsCheckpointsAndTheAdapter) {
  TempDir dir;
  TrainOptions options = toyOptions(dir.path, "out");
  TrainRun run = train(options);
  ASSERT_EQ(run.error, "");
  EXPECT_EQ(run.result.finalStep, 6);
  EXPECT_FALSE(run.result.interrupted);
  std::vector<std::string> rows = losses(options.outputDir);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].rfind("{\"step\":1,\"loss\":", 0), 0u) << rows[0];
  EXPECT_NE(run.out.find("step 6/6 | loss "), std::string::npos) << run.out;
  for (const char *file :
       {"/checkpoint-2/trainer_state.json",
        "/checkpoint-4/optimizer.safetensors",
        "/checkpoint-6/adapter_model.safetensors", "/adapter_config.json",
        "/adapter_model.safetensors"}) {
    EXPECT_NE(readFile(options.outputDir + file), "") << file;
  }
  // Training moved the weights: the final adapter differs from step 2's.
  EXPECT_NE(
      readFile(options.outputDir + "/adapter_model.safetensors"),
      readFile(options.outputDir + "/checkpoint-2/adapter_model.safetensors"));
  EXPECT_EQ(
      readFile(options.outputDir + "/adapter_model.safetensors"),
      readFile(options.outputDir + "/checkpoint-6/adapter_model.safetensors"));
}

TEST(Trainer, OffloadedActivationsTrainBitIdenticallyAndCountTheCopies) {
  TempDir dir;
  TrainOptions plain = toyOptions(dir.path, "plain");
  ToyPlan toy;
  toy.offload = true;
  toy.name = "offload.tplan";
  TrainOptions offload = plain;
  offload.planPath = writePlan(dir.path, toy);
  offload.outputDir = dir.path + "/offload";
  TrainRun plainRun = train(plain);
  TrainRun offloadRun = train(offload);
  ASSERT_EQ(plainRun.error, "");
  ASSERT_EQ(offloadRun.error, "");
  // dropout(x) went to the host and back between forward and backward (it
  // was wiped on the device meanwhile): the same losses and adapter bits.
  EXPECT_EQ(losses(offload.outputDir), losses(plain.outputDir));
  EXPECT_EQ(readFile(offload.outputDir + "/adapter_model.safetensors"),
            readFile(plain.outputDir + "/adapter_model.safetensors"));
  // Per step: 2 micro-batches, each copying its 256 bytes out and back.
  std::istringstream metrics(readFile(offload.outputDir + "/metrics.jsonl"));
  std::string line;
  int rows = 0;
  while (std::getline(metrics, line)) {
    EXPECT_NE(line.find(",\"bytes_copied\":1024"), std::string::npos) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 6);
  EXPECT_EQ(readFile(plain.outputDir + "/metrics.jsonl").find("bytes_copied"),
            std::string::npos);
  // The memory line: its total as before, and where it lies.
  uint64_t total = 0, device = 0, host = 0;
  size_t at = offloadRun.out.find("memory ");
  ASSERT_NE(at, std::string::npos) << offloadRun.out;
  ASSERT_EQ(std::sscanf(offloadRun.out.c_str() + at,
                        "memory %" SCNu64 " B allocated (device %" SCNu64
                        " B, host %" SCNu64 " B)",
                        &total, &device, &host),
            3)
      << offloadRun.out;
  EXPECT_EQ(host, 256u);
  EXPECT_EQ(device + host, total);
  at = plainRun.out.find("memory ");
  ASSERT_NE(at, std::string::npos);
  // The plain toy's arenas are Host arenas (as CPU plans were before
  // placement): all of it on the host side.
  std::string rest = std::to_string(total - host);
  EXPECT_EQ(plainRun.out.substr(at, plainRun.out.find('\n', at) - at),
            "memory " + rest + " B allocated (device 0 B, host " + rest +
                " B)");
}

TEST(Trainer, InterruptedAndResumedRunIsBitIdentical) {
  TempDir dir;
  TrainOptions options = toyOptions(dir.path, "straight");
  ASSERT_EQ(train(options).error, "");

  options.outputDir = dir.path + "/resumed";
  options.stopAfterStep = 3; // as if SIGINT arrived during step 3
  TrainRun first = train(options);
  ASSERT_EQ(first.error, "");
  EXPECT_TRUE(first.result.interrupted);
  EXPECT_EQ(first.result.finalStep, 3);
  EXPECT_NE(first.out.find("interrupted: checkpoint written to " +
                           options.outputDir + "/checkpoint-3"),
            std::string::npos)
      << first.out;
  EXPECT_EQ(readFile(options.outputDir + "/adapter_model.safetensors"), "");

  options.stopAfterStep = -1;
  options.resume = "latest";
  TrainRun second = train(options);
  ASSERT_EQ(second.error, "");
  EXPECT_EQ(second.result.startStep, 3);
  EXPECT_EQ(second.result.finalStep, 6);
  for (const char *file :
       {"/adapter_model.safetensors", "/checkpoint-6/optimizer.safetensors",
        "/checkpoint-6/adapter_model.safetensors"}) {
    EXPECT_EQ(readFile(dir.path + "/straight" + file),
              readFile(options.outputDir + file))
        << file;
  }
  EXPECT_EQ(losses(dir.path + "/straight"), losses(options.outputDir));

  // Resuming from an earlier checkpoint drops the later metrics first.
  options.resume = options.outputDir + "/checkpoint-4";
  options.maxSteps = 5;
  TrainRun third = train(options);
  ASSERT_EQ(third.error, "");
  std::vector<std::string> rows = losses(options.outputDir);
  std::vector<std::string> straight = losses(dir.path + "/straight");
  straight.resize(5);
  EXPECT_EQ(rows, straight);
}

TEST(Trainer, ResumeRemovesOnlyTheTemporariesOfAKilledWriter) {
  TempDir dir;
  TrainOptions options = toyOptions(dir.path, "straight");
  ASSERT_EQ(train(options).error, "");

  // A run killed with SIGKILL while writing checkpoint-6 after saving 2 and
  // 4 (and once before, while writing 4 and rewriting the metrics).
  options.outputDir = dir.path + "/killed";
  options.maxSteps = 4;
  ASSERT_EQ(train(options).error, "");
  std::string out = options.outputDir + "/";
  std::string four = readFile(out + "checkpoint-4/adapter_model.safetensors");
  std::string dead = std::to_string(deadProcessId());
  plantDirectory(out + "checkpoint-6.tmp-" + dead, "adapter_model.safetensors",
                 "partial");
  plantDirectory(out + "checkpoint-4.tmp-" + dead, "optimizer.safetensors",
                 "partial");
  std::ofstream(out + ".metrics.jsonl.tmp-" + dead + "-0") << "{";
  std::ofstream(out + "notes.tmp") << "mine";
  plantDirectory(out + "checkpoint-7.tmp", "notes", "mine");

  options.maxSteps = 6;
  options.resume = "latest";
  TrainRun resumed = train(options);
  ASSERT_EQ(resumed.error, "");
  EXPECT_EQ(resumed.result.startStep, 4);
  std::string line = "tailor train: temporaries of an interrupted write in " +
                     options.outputDir + ": removed .metrics.jsonl.tmp-" +
                     dead + "-0, checkpoint-4.tmp-" + dead +
                     ", checkpoint-6.tmp-" + dead + "\n";
  EXPECT_NE(resumed.err.find(line), std::string::npos) << resumed.err;
  for (const std::string &name :
       {"checkpoint-6.tmp-" + dead, "checkpoint-4.tmp-" + dead,
        ".metrics.jsonl.tmp-" + dead + "-0"}) {
    struct stat info;
    EXPECT_NE(::lstat((out + name).c_str(), &info), 0) << name;
  }
  EXPECT_EQ(readFile(out + "notes.tmp"), "mine");
  EXPECT_EQ(readFile(out + "checkpoint-7.tmp/notes"), "mine");
  EXPECT_EQ(readFile(out + "checkpoint-4/adapter_model.safetensors"), four);
  // The resumed run ends where an uninterrupted one does.
  for (const char *file :
       {"adapter_model.safetensors", "checkpoint-6/optimizer.safetensors"}) {
    EXPECT_EQ(readFile(dir.path + "/straight/" + file), readFile(out + file))
        << file;
  }

  // Starting fresh cleans too; with nothing stale it says nothing.
  std::ofstream(out + ".adapter_config.json.tmp-" + dead + "-2") << "{";
  options.resume = "";
  TrainRun fresh = train(options);
  ASSERT_EQ(fresh.error, "");
  EXPECT_NE(fresh.err.find("removed .adapter_config.json.tmp-" + dead + "-2"),
            std::string::npos)
      << fresh.err;
  options.resume = "latest";
  TrainRun again = train(options);
  ASSERT_EQ(again.error, "");
  EXPECT_EQ(again.err.find("temporaries"), std::string::npos) << again.err;
}

TEST(Trainer, StopsOnSigint) {
  TempDir dir;
  TrainOptions options = toyOptions(dir.path, "out");
  options.maxSteps = 100000000; // never reached: the signal stops it
  options.saveSteps = 0;
  std::atomic<bool> done{false};
  std::thread signaller([&] {
    // Once a step is logged the handler is surely installed.
    while (!done && readFile(options.outputDir + "/metrics.jsonl").empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!done) {
      std::raise(SIGINT);
    }
  });
  TrainRun run = train(options);
  done = true;
  signaller.join();
  ASSERT_EQ(run.error, "");
  EXPECT_TRUE(run.result.interrupted);
  EXPECT_NE(readFile(run.result.lastCheckpoint + "/trainer_state.json"), "");
}

TEST(Trainer, ErrorsNameTheProblem) {
  TempDir dir;
  TrainOptions options;
  ToyPlan inference;
  inference.training = false;
  options.planPath = writePlan(dir.path, inference);
  options.dataPath = writeData(dir.path);
  options.outputDir = dir.path + "/out";
  EXPECT_NE(train(options).error.find("not a training plan"),
            std::string::npos);

  options.planPath = writePlan(dir.path);
  options.dataPath = dir.path + "/missing.bin";
  EXPECT_NE(train(options).error.find("missing.bin: cannot open"),
            std::string::npos);

  std::vector<uint16_t> bad(64, 3);
  bad[40] = 16;
  std::ofstream(dir.path + "/bad.bin", std::ios::binary)
      .write(reinterpret_cast<const char *>(bad.data()), 128);
  options.dataPath = dir.path + "/bad.bin";
  EXPECT_NE(train(options).error.find("bad.bin: token 16 at position 40"),
            std::string::npos);

  options.dataPath = writeData(dir.path);
  options.resume = dir.path + "/nowhere";
  EXPECT_NE(
      train(options).error.find("nowhere/trainer_state.json: cannot open"),
      std::string::npos);

  options.resume = "";
  options.maxSteps = 2;
  ASSERT_EQ(train(options).error, "");
  std::ofstream(options.outputDir + "/checkpoint-2/adapter_model.safetensors")
      << "truncated";
  options.resume = "latest";
  options.maxSteps = 4;
  TrainRun corrupt = train(options);
  EXPECT_NE(corrupt.error.find("checkpoint-2/adapter_model.safetensors: "),
            std::string::npos)
      << corrupt.error;

  options.planPath = dir.path + "/none.tplan";
  EXPECT_NE(train(options).error.find("none.tplan"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Validation loss
//===----------------------------------------------------------------------===//

/// JSONL examples of 2 to 7 tokens (sequence_len is 4: some are padded,
/// some truncated), a third of them prompt + completion. `maskFirst` gives
/// every example a first label of -100: the toy plan's loss does not shift
/// the labels as compiled plans do (token t predicts label t + 1, so the
/// first label never counts), and with the first masked both count the
/// same tokens.
std::string writeExamples(const std::string &path, int count, int salt,
                          bool maskFirst = false) {
  std::ofstream out(path);
  for (int i = 0; i < count; ++i) {
    int length = 2 + (i * 3 + salt) % 6;
    std::string ids, labels = "-100";
    for (int t = 0; t < length; ++t) {
      std::string id = std::to_string((i * 3 + t * 7 + salt) % kVocab);
      ids += (t ? ", " : "") + id;
      labels += t ? ", " + id : "";
    }
    if (i % 3 == 1) {
      out << "{\"prompt\": [" << (i + salt) % kVocab << "], \"completion\": ["
          << ids << "]}\n";
    } else if (maskFirst) {
      out << "{\"input_ids\": [" << ids << "], \"labels\": [" << labels
          << "]}\n";
    } else {
      out << "{\"input_ids\": [" << ids << "]}\n";
    }
  }
  return path;
}

/// The eval_loss of every metrics.jsonl line that has one, by step.
std::map<int64_t, double> evalLosses(const std::string &dir) {
  std::map<int64_t, double> out;
  std::istringstream in(readFile(dir + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    size_t at = line.find("\"eval_loss\":");
    if (at != std::string::npos) {
      out[std::stoll(line.substr(8))] = std::stod(line.substr(at + 12));
    }
  }
  return out;
}

TEST(Trainer, EvaluatingChangesNothingInTraining) {
  TempDir dir;
  ToyPlan plain;
  plain.dropout = false;
  TrainOptions options;
  options.planPath = writePlan(dir.path, plain);
  options.dataPath = writeExamples(dir.path + "/train.jsonl", 11, 0);
  options.outputDir = dir.path + "/plain";
  TrainRun without = train(options);
  ASSERT_EQ(without.error, "");

  ToyPlan evaluating = plain;
  evaluating.evalSteps = 2;
  evaluating.name = "eval.tplan";
  options.planPath = writePlan(dir.path, evaluating);
  options.evalDataPath =
      writeExamples(dir.path + "/val.jsonl", 5, 3, /*maskFirst=*/true);
  options.outputDir = dir.path + "/eval";
  TrainRun with = train(options);
  ASSERT_EQ(with.error, "");
  EXPECT_NE(with.out.find("validation " + options.evalDataPath +
                          ": 5 examples, one per sequence of 4"),
            std::string::npos)
      << with.out;
  EXPECT_NE(with.out.find("loss every 2 steps and at the end"),
            std::string::npos);
  EXPECT_NE(with.out.find("step 2/6 | loss "), std::string::npos);
  EXPECT_NE(with.out.find(" | eval_loss "), std::string::npos) << with.out;
  // Bit for bit: the weights, the optimizer state, every step's loss, lr
  // and norm.
  for (const char *file :
       {"/adapter_model.safetensors", "/checkpoint-4/optimizer.safetensors",
        "/checkpoint-6/optimizer.safetensors"}) {
    EXPECT_EQ(readFile(dir.path + "/plain" + file),
              readFile(options.outputDir + file))
        << file;
  }
  std::vector<std::string> rows = losses(options.outputDir);
  EXPECT_EQ(losses(dir.path + "/plain"), rows);
  std::map<int64_t, double> evals = evalLosses(options.outputDir);
  ASSERT_EQ(evals.size(), 3u);
  EXPECT_EQ(evals.begin()->first, 2);
  EXPECT_EQ(evals.rbegin()->first, 6);
  for (const auto &[step, loss] : evals) {
    EXPECT_TRUE(std::isfinite(loss) && loss > 0) << step << " " << loss;
  }
  // Training moves the weights, so the validation loss moves too.
  EXPECT_NE(evals[2], evals[6]);
  EXPECT_NE(readFile(options.outputDir + "/checkpoint-6/trainer_state.json")
                .find("\"eval_loss\""),
            std::string::npos);

  // Token-weighted: the set's loss is the mean over every counted token,
  // which is the per-example losses weighted by their counted tokens (here
  // each example evaluated alone, against the same trained weights since
  // evaluating changes nothing).
  std::vector<std::string> lines;
  {
    std::istringstream in(readFile(options.evalDataPath));
    std::string line;
    while (std::getline(in, line)) {
      lines.push_back(line);
    }
  }
  double weighted = 0, tokens = 0, unweighted = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string one = dir.path + "/one" + std::to_string(i) + ".jsonl";
    std::ofstream(one) << lines[i] << "\n";
    options.evalDataPath = one;
    options.outputDir = dir.path + "/one" + std::to_string(i);
    ASSERT_EQ(train(options).error, "");
    // Counted tokens: positions 1..3 of the (truncated) example whose label
    // is not -100 (a prompt's, or padding).
    std::vector<int64_t> ids(kBatch * kSeq), labels(kBatch * kSeq);
    DataOptions data;
    data.path = one;
    data.sequenceLen = kSeq;
    data.microBatchSize = kBatch;
    std::string error;
    auto loader = DataLoader::open(data, error);
    ASSERT_TRUE(loader) << error;
    loader->batchAt(0, ids.data(), labels.data());
    double counted = 0;
    for (int64_t t = 1; t < kSeq; ++t) {
      counted += labels[static_cast<size_t>(t)] != -100;
    }
    double loss = evalLosses(options.outputDir)[6];
    weighted += loss * counted;
    tokens += counted;
    unweighted += loss / static_cast<double>(lines.size());
  }
  EXPECT_NEAR(evals[6], weighted / tokens, 1e-6 * evals[6]);
  // The test can tell: a mean of per-example losses is another number.
  EXPECT_GT(std::abs(evals[6] - unweighted), 1e-4 * evals[6]);
}

TEST(Trainer, ValSetSizeHoldsOutExamplesOfTheTrainingData) {
  TempDir dir;
  ToyPlan plan;
  plan.dropout = false;
  plan.valSetSize = 0.25;
  TrainOptions options;
  options.planPath = writePlan(dir.path, plan);
  options.dataPath = writeExamples(dir.path + "/train.jsonl", 12, 1);
  options.outputDir = dir.path + "/out";
  TrainRun run = train(options);
  ASSERT_EQ(run.error, "");
  EXPECT_NE(run.out.find("9 examples, one per sequence of 4"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("3 held out for validation"), std::string::npos);
  EXPECT_NE(run.out.find("validation " + options.dataPath +
                         ": 3 examples held out (val_set_size 0.25, seed "
                         "42), one per sequence of 4"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("; loss at the end"), std::string::npos);
  std::map<int64_t, double> evals = evalLosses(options.outputDir);
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_EQ(evals.begin()->first, 6);

  // Both a held-out set and --eval-data: which one is meant is unclear.
  options.evalDataPath = options.dataPath;
  EXPECT_NE(train(options).error.find("the plan holds out val_set_size 0.25 "
                                      "of the training data and --eval-data "
                                      "names"),
            std::string::npos);
}

TEST(Trainer, DataAndValidationErrorsNameTheProblem) {
  TempDir dir;
  TrainOptions options;
  options.dataPath = writeExamples(dir.path + "/train.jsonl", 8, 0);
  options.outputDir = dir.path + "/out";

  // Dropout in train_step would make the validation loss random, and this
  // plan has no eval_step to compute it without.
  options.planPath = writePlan(dir.path);
  options.evalDataPath = options.dataPath;
  EXPECT_NE(train(options).error.find("the plan's train_step applies dropout "
                                      "(it takes a seed) and the plan has no "
                                      "eval_step"),
            std::string::npos);

  ToyPlan plan;
  plan.dropout = false;
  plan.evalSteps = 3;
  options.planPath = writePlan(dir.path, plan);
  options.evalDataPath = "";
  EXPECT_NE(train(options).error.find("the plan sets eval_steps 3 but there "
                                      "is no validation data"),
            std::string::npos);
  options.evalDataPath = "dummy";
  EXPECT_NE(train(options).error.find("--eval-data: dummy is an endless "
                                      "stream"),
            std::string::npos);
  options.evalDataPath = dir.path + "/missing.jsonl";
  EXPECT_NE(train(options).error.find("--eval-data: " + dir.path +
                                      "/missing.jsonl: cannot open"),
            std::string::npos);

  plan = ToyPlan();
  plan.samplePacking = true;
  options.planPath = writePlan(dir.path, plan);
  options.evalDataPath = "";
  // Packing needs a plan compiled for it (a position_ids input).
  EXPECT_NE(train(options).error.find("the plan asks for sample_packing: "
                                      "true but its train_step takes no "
                                      "position_ids"),
            std::string::npos);

  plan.samplePacking = false;
  options.planPath = writePlan(dir.path, plan);
  options.dataPath = writeData(dir.path);
  EXPECT_NE(train(options).error.find("train.bin: a binary token stream has "
                                      "no example boundaries"),
            std::string::npos);
  // Unset, the same binary data streams as it always did.
  options.planPath = writePlan(dir.path);
  EXPECT_EQ(train(options).error, "");
}

// Several ranks. ctest runs these under `mpirun -np 2` (label
// multirank); in a plain run they skip.

/// The launch these tests run in; skips unless it has two ranks.
#define TAILOR_NEED_TWO_RANKS(launch)                                          \
  tailor::runtime::comm::LaunchInfo launch;                                    \
  ASSERT_EQ(tailor::runtime::comm::detectLaunch(launch), "");                  \
  if (launch.worldSize != 2) {                                                 \
    GTEST_SKIP() << "runs under mpirun -np 2";                                 \
  }

TEST(TrainerRanks, APlanForOneRankFailsOnEveryRankOfALaunch) {
  TAILOR_NEED_TWO_RANKS(launch);
  TempDir dir;
  TrainOptions options = toyOptions(dir.path, "out");
  TrainRun run = train(options);
  EXPECT_EQ(run.error,
            "rank " + std::to_string(launch.rank) + ": " + options.planPath +
                " was compiled for 1 rank but launched on 2 "
                "(mpirun -np 2); run it as a single process, or compile it "
                "for 2 ranks (--hardware 2xcpu, say)");
  EXPECT_EQ(run.result.worldSize, 2);
  struct stat info;
  EXPECT_NE(::stat(options.outputDir.c_str(), &info), 0)
      << "nothing is written";
}

/// Hides the launch from the trainer while alive: a run in this process
/// is then a single rank's (MPI, already started, stays untouched).
class HiddenLaunch {
public:
  HiddenLaunch() {
    for (const char *name :
         {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
          "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
      if (const char *value = std::getenv(name)) {
        saved[name] = value;
        unsetenv(name);
      }
    }
  }
  ~HiddenLaunch() {
    for (const auto &[name, value] : saved) {
      setenv(name.c_str(), value.c_str(), 1);
    }
  }

private:
  std::map<std::string, std::string> saved;
};

/// `"data":{...}` of a checkpoint's trainer_state.json.
std::string dataPosition(const std::string &checkpoint) {
  std::string text = readFile(checkpoint + "/trainer_state.json");
  size_t at = text.find("\"data\"");
  return at == std::string::npos ? ""
                                 : text.substr(at, text.find('}', at) - at);
}

TEST(TrainerRanks, RanksSplitEachGlobalBatchAndOnlyRankZeroWrites) {
  TAILOR_NEED_TWO_RANKS(launch);
  std::string error;
  std::unique_ptr<tailor::runtime::comm::Communicator> world =
      tailor::runtime::comm::createMpiCommunicator(launch, error);
  ASSERT_TRUE(world) << error;
  // One directory for both ranks: rank 0's, broadcast.
  std::unique_ptr<TempDir> own;
  char shared[256] = {};
  if (launch.rank == 0) {
    own = std::make_unique<TempDir>();
    std::snprintf(shared, sizeof(shared), "%s", own->path.c_str());
  }
  ASSERT_EQ(world->broadcast(shared, sizeof(shared),
                             tailor::runtime::DType::U8, 0),
            "");
  std::string dir = shared;
  ToyPlan two;
  two.worldSize = 2;
  two.name = "two.tplan";
  ToyPlan one;
  one.accumulation = 4; // the same global batch on one rank
  one.name = "one.tplan";
  std::string twoPath, onePath;
  if (launch.rank == 0) {
    twoPath = writePlan(dir, two);
    onePath = writePlan(dir, one);
    writeData(dir);
  }
  ASSERT_EQ(world->barrier(), "");
  twoPath = dir + "/two.tplan";
  onePath = dir + "/one.tplan";
  {
    std::unique_ptr<tailor::runtime::LoadedPlan> plan =
        tailor::runtime::LoadedPlan::load(twoPath, {}, error);
    if (!plan) {
      GTEST_SKIP() << "the plan loader does not take plans for 2 ranks yet: "
                   << error;
    }
  }
  // The reference: one rank, four micro-batches a step (rank 0 only).
  TrainRun reference;
  if (launch.rank == 0) {
    HiddenLaunch hidden;
    TrainOptions options;
    options.planPath = onePath;
    options.dataPath = dir + "/train.bin";
    options.outputDir = dir + "/one";
    reference = train(options);
    ASSERT_EQ(reference.error, "");
  }
  ASSERT_EQ(world->barrier(), "");
  TrainOptions options;
  options.planPath = twoPath;
  options.dataPath = dir + "/train.bin";
  options.outputDir = dir + "/two";
  // Rank 1 alone is asked to stop after step 3: both stop there.
  options.stopAfterStep = launch.rank == 1 ? 3 : 100;
  TrainRun run = train(options);
  ASSERT_EQ(run.error, "");
  EXPECT_EQ(run.result.finalStep, 3);
  EXPECT_TRUE(run.result.interrupted);
  EXPECT_EQ(run.result.lastCheckpoint, dir + "/two/checkpoint-3");
  if (launch.rank != 0) {
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(run.err, "");
    return;
  }
  EXPECT_NE(run.out.find("2 x 4 tokens x 2 accumulation x 2 ranks = 32 "
                         "tokens/step"),
            std::string::npos)
      << run.out;
  // Step 1 starts from the same weights: the mean over both ranks'
  // micro-batches is the one-rank loss of the same four micro-batches.
  // (The toy shares no gradients, so later steps differ.)
  std::vector<std::string> rows = losses(dir + "/two");
  ASSERT_EQ(rows.size(), 3u);
  double twoLoss = std::stod(rows[0].substr(rows[0].find("\"loss\":") + 7));
  std::vector<std::string> oneRows = losses(dir + "/one");
  double oneLoss =
      std::stod(oneRows[0].substr(oneRows[0].find("\"loss\":") + 7));
  EXPECT_NEAR(twoLoss, oneLoss, 1e-6 * std::fabs(oneLoss));
  // The data position is the global one: a checkpoint resumes anywhere.
  EXPECT_NE(dataPosition(dir + "/two/checkpoint-2"), "");
  EXPECT_EQ(dataPosition(dir + "/two/checkpoint-2"),
            dataPosition(dir + "/one/checkpoint-2"));
}

/// The "loss" of each row of a run's metrics.
std::vector<double> lossValues(const std::string &dir) {
  std::vector<double> values;
  for (const std::string &row : losses(dir)) {
    values.push_back(std::stod(row.substr(row.find("\"loss\":") + 7)));
  }
  return values;
}

/// The plan fingerprint in a checkpoint's trainer_state.json.
std::string fingerprintOf(const std::string &checkpoint) {
  std::string text = readFile(checkpoint + "/trainer_state.json");
  std::string key = "\"plan_fingerprint\": \"";
  size_t at = text.find(key);
  return at == std::string::npos ? ""
                                 : text.substr(at + key.size(), 16);
}

/// A sharded toy plan trained on two ranks next to one rank at the same
/// global batch, and resumed across the strategies both ways: the one-rank
/// reference in DIR/one, the sharded run in DIR/TAG, the sharded plan
/// resuming the one-rank checkpoint 2 in DIR/TAG-from-one, and one rank
/// resuming the sharded checkpoint 4 in DIR/one-from-TAG. Every rank calls
/// it; only rank 0 trains the one-rank runs.
struct ShardedToyRuns {
  tailor::runtime::comm::LaunchInfo launch;
  std::unique_ptr<tailor::runtime::comm::Communicator> world;
  std::unique_ptr<TempDir> own;
  std::string dir;

  TrainOptions options(const std::string &plan, const std::string &out) const {
    TrainOptions o;
    o.planPath = dir + "/" + plan;
    o.dataPath = dir + "/train.bin";
    o.outputDir = dir + "/" + out;
    return o;
  }
  /// Joins the world of `launched` over MPI; "" or why not.
  std::string join(const tailor::runtime::comm::LaunchInfo &launched) {
    launch = launched;
    std::string error;
    world = tailor::runtime::comm::createMpiCommunicator(launch, error);
    return world ? "" : error;
  }
  /// A one-rank run on rank 0 (the others get an empty result).
  TrainRun alone(TrainOptions o) const {
    TrainRun run;
    if (launch.rank == 0) {
      HiddenLaunch hidden;
      run = train(std::move(o));
    }
    return run;
  }
  /// Shares rank 0's scratch directory, writes the plans and data, and
  /// runs the four trainings; "" or what failed.
  std::string run(ToyPlan sharded, const std::string &tag) {
    char shared[256] = {};
    if (launch.rank == 0) {
      own = std::make_unique<TempDir>();
      std::snprintf(shared, sizeof(shared), "%s", own->path.c_str());
    }
    if (std::string problem = world->broadcast(
            shared, sizeof(shared), tailor::runtime::DType::U8, 0);
        !problem.empty()) {
      return problem;
    }
    dir = shared;
    sharded.worldSize = 2;
    sharded.accumulation = 1;
    sharded.name = tag + ".tplan";
    ToyPlan one;
    one.name = "one.tplan";
    one.quantizedBase = sharded.quantizedBase;
    if (launch.rank == 0) {
      writePlan(dir, sharded);
      writePlan(dir, one);
      writeData(dir);
    }
    TrainRun reference;
    TrainOptions fromOne = options(sharded.name, tag + "-from-one");
    fromOne.resume = dir + "/one/checkpoint-2";
    TrainOptions fromSharded = options("one.tplan", "one-from-" + tag);
    fromSharded.resume = dir + "/" + tag + "/checkpoint-4";
    std::string problem = world->barrier();
    if (problem.empty() &&
        (problem = alone(options("one.tplan", "one")).error).empty() &&
        (problem = world->barrier()).empty()) {
      TrainRun run = train(options(sharded.name, tag));
      problem = run.error.empty() && run.result.finalStep != 6
                    ? "the sharded run stopped at step " +
                          std::to_string(run.result.finalStep)
                    : run.error;
    }
    if (problem.empty() && (problem = train(fromOne).error).empty() &&
        (problem = world->barrier()).empty() &&
        (problem = alone(fromSharded).error).empty()) {
      problem = world->barrier();
    }
    return problem;
  }
};

/// Each run ShardedToyRuns::run made under `tag` logs the losses of the
/// one-rank reference's steps it ran (a resumed run's fresh directory
/// holds the steps after its checkpoint): summed gradients are the one
/// rank's accumulated ones, so they agree (bit for bit with OpenBLAS here;
/// the bound allows another BLAS to round the accumulating GEMM
/// differently).
void expectLossesOfOneRank(const std::string &dir, const std::string &tag) {
  std::vector<double> want = lossValues(dir + "/one");
  ASSERT_EQ(want.size(), 6u);
  std::pair<std::string, size_t> runs[3] = {
      {"/" + tag, 0}, {"/" + tag + "-from-one", 2}, {"/one-from-" + tag, 4}};
  for (const auto &[out, start] : runs) {
    std::vector<double> got = lossValues(dir + out);
    ASSERT_EQ(got.size(), 6u - start) << out;
    for (size_t i = 0; i < got.size(); ++i) {
      double w = want[start + i];
      EXPECT_NEAR(got[i], w, 1e-6 * std::fabs(w))
          << out << " step " << start + i + 1;
    }
  }
}

TEST(TrainerZeroRanks, ShardsTheMomentsAndTrainsAsOneRankDoes) {
  TAILOR_NEED_TWO_RANKS(launch);
  // ZeRO-1 on two ranks, one micro-batch each; the reference: one rank,
  // two micro-batches a step (the same global batch and dropout seeds).
  ShardedToyRuns sharded;
  ASSERT_EQ(sharded.join(launch), "");
  ToyPlan zero;
  zero.zero = true;
  ASSERT_EQ(sharded.run(zero, "zero"), "");
  std::string dir = sharded.dir;
  if (launch.rank != 0) {
    return;
  }
  expectLossesOfOneRank(dir, "zero");
  // Checkpoints name the moments per parameter, as the one rank does.
  std::string optimizer =
      readFile(dir + "/zero/checkpoint-4/optimizer.safetensors");
  for (const char *name : {"model.layers.0.proj.lora_A.weight.exp_avg",
                           "model.layers.0.proj.lora_B.weight.exp_avg_sq"}) {
    EXPECT_NE(optimizer.find(name), std::string::npos) << name;
  }
  EXPECT_EQ(optimizer.find("zero.b0"), std::string::npos);
  EXPECT_NE(fingerprintOf(dir + "/zero/checkpoint-4"), "");
  EXPECT_EQ(fingerprintOf(dir + "/zero/checkpoint-4"),
            fingerprintOf(dir + "/one/checkpoint-4"));
}

/// The F32 tensors of a safetensors file, by name.
std::map<std::string, std::vector<float>> tensorsOf(const std::string &path) {
  std::map<std::string, std::vector<float>> tensors;
  std::string error;
  std::unique_ptr<SafetensorsFile> file = SafetensorsFile::open(path, error);
  EXPECT_NE(file, nullptr) << error;
  if (!file) {
    return tensors;
  }
  for (const auto &[name, tensor] : file->tensors()) {
    EXPECT_EQ(tensor.dtype, "F32") << name;
    std::vector<float> &values = tensors[name];
    values.resize(tensor.size / 4);
    std::memcpy(values.data(), tensor.data, tensor.size);
  }
  return tensors;
}

/// `got` holds the tensors of `want`, each value within 1e-6 relative
/// (bit for bit with OpenBLAS here; the bound allows another BLAS to round
/// the accumulating GEMM differently).
void expectSameTensors(const std::string &got, const std::string &want) {
  std::map<std::string, std::vector<float>> a = tensorsOf(got);
  std::map<std::string, std::vector<float>> b = tensorsOf(want);
  ASSERT_FALSE(b.empty()) << want;
  ASSERT_EQ(a.size(), b.size()) << got;
  for (const auto &[name, values] : b) {
    ASSERT_EQ(a[name].size(), values.size()) << got << ": " << name;
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(a[name][i], values[i],
                  1e-6 * std::max(1.0f, std::fabs(values[i])))
          << got << ": " << name << " element " << i;
    }
  }
}

TEST(TrainerZero3Ranks, ShardsTheWeightsAndTrainsAsOneRankDoes) {
  TAILOR_NEED_TWO_RANKS(launch);
  // ZeRO-3 on two ranks, one micro-batch each; the reference: one rank,
  // two micro-batches a step (the same global batch and dropout seeds).
  ShardedToyRuns sharded;
  ASSERT_EQ(sharded.join(launch), "");
  tailor::runtime::comm::Communicator *world = sharded.world.get();
  ToyPlan zero3;
  zero3.zero3 = true;
  ASSERT_EQ(sharded.run(zero3, "zero3"), "");
  std::string dir = sharded.dir;
  auto options = [&](const std::string &plan, const std::string &out) {
    return sharded.options(plan, out);
  };
  // Both start from the one-rank run's final adapter (--init-adapter).
  TrainOptions adaptedZero = options("zero3.tplan", "zero3-adapted");
  adaptedZero.initAdapter = dir + "/one";
  adaptedZero.maxSteps = 2;
  TrainRun adapted = train(adaptedZero);
  ASSERT_EQ(adapted.error, "");
  TrainOptions adaptedOne = options("one.tplan", "one-adapted");
  adaptedOne.initAdapter = dir + "/one";
  adaptedOne.maxSteps = 2;
  TrainRun adaptedReference = sharded.alone(adaptedOne);
  ASSERT_EQ(adaptedReference.error, "");
  ASSERT_EQ(world->barrier(), "");
  if (launch.rank != 0) {
    return;
  }
  // Each rank's update of its chunk is the one rank's update of those
  // elements, so losses and weights agree.
  expectLossesOfOneRank(dir, "zero3");
  std::vector<double> want = lossValues(dir + "/one");
  // The adapter of every run is the one rank's: the gathered whole
  // tensors under PEFT's names.
  for (const char *out : {"/zero3", "/zero3-from-one", "/one-from-zero3"}) {
    expectSameTensors(dir + out + "/adapter_model.safetensors",
                      dir + "/one/adapter_model.safetensors");
  }
  expectSameTensors(dir + "/zero3/checkpoint-4/adapter_model.safetensors",
                    dir + "/one/checkpoint-4/adapter_model.safetensors");
  EXPECT_EQ(tensorsOf(dir + "/zero3/adapter_model.safetensors")
                ["base_model.model.model.layers.0.proj.lora_A.weight"]
                    .size(),
            static_cast<size_t>(kRank * kDim));
  // Starting from an adapter: the same losses and weights.
  std::vector<double> adaptedWant = lossValues(dir + "/one-adapted");
  std::vector<double> adaptedGot = lossValues(dir + "/zero3-adapted");
  ASSERT_EQ(adaptedWant.size(), 2u);
  ASSERT_EQ(adaptedGot.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(adaptedGot[i], adaptedWant[i], 1e-6 * std::fabs(adaptedWant[i]))
        << "step " << i + 1;
  }
  // (The adapter differs from a fresh start: step 1 is not the first
  // run's step 1.)
  EXPECT_NE(adaptedWant[0], want[0]);
  expectSameTensors(dir + "/zero3-adapted/adapter_model.safetensors",
                    dir + "/one-adapted/adapter_model.safetensors");
  // Checkpoints name tensors as the one rank does.
  std::string optimizer =
      readFile(dir + "/zero3/checkpoint-4/optimizer.safetensors");
  EXPECT_NE(optimizer.find("model.layers.0.proj.lora_B.weight.exp_avg_sq"),
            std::string::npos);
  EXPECT_EQ(optimizer.find("zero.b0"), std::string::npos);
  EXPECT_NE(fingerprintOf(dir + "/zero3/checkpoint-4"), "");
  EXPECT_EQ(fingerprintOf(dir + "/zero3/checkpoint-4"),
            fingerprintOf(dir + "/one/checkpoint-4"));
}

TEST(TrainerZero3QloraRanks, ShardsTheQuantizedBaseAndTrainsAsOneRankDoes) {
  TAILOR_NEED_TWO_RANKS(launch);
  // QLoRA under ZeRO-3 on two ranks: the nf4 base weight's bytes are
  // sharded with the adapter; the reference is one rank holding it whole.
  ShardedToyRuns sharded;
  ASSERT_EQ(sharded.join(launch), "");
  tailor::runtime::comm::Communicator *world = sharded.world.get();
  ToyPlan qlora;
  qlora.zero3 = true;
  qlora.quantizedBase = true;
  ASSERT_EQ(sharded.run(qlora, "qlora"), "");
  std::string dir = sharded.dir;
  // The toy without the base, to see that the base weight counts.
  TrainRun plain;
  if (launch.rank == 0) {
    ToyPlan toy;
    toy.name = "plain.tplan";
    writePlan(dir, toy);
    plain = sharded.alone(sharded.options("plain.tplan", "plain"));
  }
  ASSERT_EQ(world->barrier(), "");
  if (launch.rank != 0) {
    return;
  }
  ASSERT_EQ(plain.error, "");
  std::vector<double> want = lossValues(dir + "/one");
  std::vector<double> without = lossValues(dir + "/plain");
  ASSERT_EQ(want.size(), 6u);
  ASSERT_EQ(without.size(), 6u);
  EXPECT_GT(std::fabs(want[0] - without[0]), 1e-3 * std::fabs(without[0]));
  expectLossesOfOneRank(dir, "qlora");
  // The adapter holds the LoRA weights only, as the one rank's does.
  for (const char *out : {"/qlora", "/qlora-from-one", "/one-from-qlora"}) {
    expectSameTensors(dir + out + "/adapter_model.safetensors",
                      dir + "/one/adapter_model.safetensors");
  }
  EXPECT_EQ(tensorsOf(dir + "/qlora/adapter_model.safetensors").size(), 2u);
  EXPECT_EQ(fingerprintOf(dir + "/qlora/checkpoint-4"),
            fingerprintOf(dir + "/one/checkpoint-4"));
}

} // namespace
