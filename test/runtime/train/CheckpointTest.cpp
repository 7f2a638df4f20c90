//===- CheckpointTest.cpp - checkpoints, atomic writes, PEFT adapters -----===//
//
// Layouts are built by hand over plain vectors (no plan needed): what is
// tested is the file contract -- names, atomicity, rejection of anything
// that does not match, and which checkpoint counts as the latest.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/train/TrainTestUtil.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/AtomicFile.h"
#include "runtime/train/Safetensors.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace tailor::train;
using namespace tailor::train::testing;
using tailor::runtime::DType;

namespace {

std::vector<std::string> listDir(const std::string &path) {
  std::vector<std::string> names;
  if (DIR *dir = ::opendir(path.c_str())) {
    while (struct dirent *entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") {
        names.push_back(name);
      }
    }
    ::closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

const char *kA = "model.layers.0.self_attn.q_proj.lora_A.weight";
const char *kB = "model.layers.0.self_attn.q_proj.lora_B.weight";

/// A LoRA layout (r = 2, in = out = 4) with AdamW moments, over vectors.
struct Model {
  std::vector<float> a = std::vector<float>(8), b = std::vector<float>(8);
  std::vector<float> moments[4] = {std::vector<float>(8), std::vector<float>(8),
                                   std::vector<float>(8),
                                   std::vector<float>(8)};
  CheckpointLayout layout;

  explicit Model(float base, const std::string &variant = "lora") {
    fill(base);
    layout.adapter.variant = variant;
    layout.adapter.r = 2;
    layout.adapter.alpha = 16;
    layout.adapter.dropout = 0.05;
    layout.adapter.targetModules = {"q_proj", "v_proj"};
    layout.adapter.baseModel = "tiny-llama";
    layout.parameters = {{kA, DType::F32, {2, 4}, a.data()},
                         {kB, DType::F32, {4, 2}, b.data()}};
    const char *kinds[2] = {"exp_avg", "exp_avg_sq"};
    for (int i = 0; i < 4; ++i) {
      std::string param = i < 2 ? kA : kB;
      std::vector<int64_t> shape =
          i < 2 ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{4, 2};
      layout.states.push_back(
          {param + "." + kinds[i % 2], DType::F32, shape, moments[i].data()});
    }
    computeFingerprint(layout);
  }
  void fill(float base) {
    for (size_t i = 0; i < 8; ++i) {
      a[i] = base + static_cast<float>(i);
      b[i] = -base - static_cast<float>(i);
      for (int m = 0; m < 4; ++m) {
        moments[m][i] =
            base * static_cast<float>(m + 1) + 0.5f * static_cast<float>(i);
      }
    }
  }
};

TrainerState stateAt(int64_t step, const CheckpointLayout &layout) {
  TrainerState state;
  state.globalStep = step;
  state.data = {2, 5};
  state.seed = 42;
  state.fingerprint = layout.fingerprint;
  state.logHistory = {{1, 2.5, 1e-4, 0.75, std::nullopt},
                      {step, 2.25, 2e-4, 0.5, 2.75}};
  return state;
}

TEST(Checkpoint, SavesPeftAdapterOptimizerAndStateAtomically) {
  TempDir dir;
  Model model(1.0f);
  std::string error;
  ASSERT_TRUE(
      saveCheckpoint(model.layout, stateAt(10, model.layout), dir.path, error))
      << error;
  // Only the final directory: no temporary or old directory left behind.
  EXPECT_EQ(listDir(dir.path), std::vector<std::string>{"checkpoint-10"});
  std::string ck = dir.path + "/checkpoint-10";
  EXPECT_EQ(listDir(ck), (std::vector<std::string>{
                             "adapter_config.json", "adapter_model.safetensors",
                             "optimizer.safetensors", "trainer_state.json"}));
  auto adapter =
      SafetensorsFile::open(ck + "/adapter_model.safetensors", error);
  ASSERT_TRUE(adapter) << error;
  EXPECT_EQ(adapter->metadata().at("format"), "pt");
  const SafetensorsTensor *a =
      adapter->find(std::string("base_model.model.") + kA);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->dtype, "F32");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(std::memcmp(a->data, model.a.data(), 32), 0);
  auto optimizer = SafetensorsFile::open(ck + "/optimizer.safetensors", error);
  ASSERT_TRUE(optimizer) << error;
  EXPECT_TRUE(optimizer->find(std::string(kB) + ".exp_avg_sq"));
  EXPECT_EQ(optimizer->tensors().size(), 4u);

  std::string config = readFile(ck + "/adapter_config.json");
  for (const char *expected :
       {"\"peft_type\": \"LORA\"", "\"task_type\": \"CAUSAL_LM\"", "\"r\": 2",
        "\"lora_alpha\": 16,", "\"bias\": \"none\"", "\"use_dora\": false",
        "\"fan_in_fan_out\": false", "\"inference_mode\": true",
        "\"layers_to_transform\": null", "\"rank_pattern\": {}",
        "\"base_model_name_or_path\": \"tiny-llama\"",
        "\"modules_to_save\": null", "\"use_rslora\": false",
        "\"init_lora_weights\": true"}) {
    EXPECT_NE(config.find(expected), std::string::npos) << expected << "\n"
                                                        << config;
  }
  EXPECT_NE(config.find("\"q_proj\",\n    \"v_proj\""), std::string::npos)
      << config;
}

// An adapter of weights Hugging Face stores [in, out] (GPT-2's Conv1D,
// Parameter.export_fan_in_fan_out) says fan_in_fan_out, as PEFT writes it.
TEST(Checkpoint, AdapterConfigSaysFanInFanOut) {
  AdapterInfo adapter;
  adapter.r = 4;
  adapter.alpha = 8;
  adapter.targetModules = {"c_attn", "c_proj"};
  EXPECT_NE(adapterConfigJson(adapter).find("\"fan_in_fan_out\": false"),
            std::string::npos);
  adapter.fanInFanOut = true;
  std::string config = adapterConfigJson(adapter);
  EXPECT_NE(config.find("\"fan_in_fan_out\": true"), std::string::npos)
      << config;
}

TEST(Checkpoint, LoadRestoresTensorsAndState) {
  TempDir dir;
  Model model(1.0f);
  std::string error;
  ASSERT_TRUE(
      saveCheckpoint(model.layout, stateAt(7, model.layout), dir.path, error))
      << error;
  model.fill(99.0f);
  TrainerState state;
  ASSERT_TRUE(
      loadCheckpoint(model.layout, dir.path + "/checkpoint-7", state, error))
      << error;
  Model expected(1.0f);
  EXPECT_EQ(model.a, expected.a);
  EXPECT_EQ(model.b, expected.b);
  for (int m = 0; m < 4; ++m) {
    EXPECT_EQ(model.moments[m], expected.moments[m]);
  }
  EXPECT_EQ(state.globalStep, 7);
  EXPECT_EQ(state.data.epoch, 2u);
  EXPECT_EQ(state.data.index, 5u);
  EXPECT_EQ(state.seed, 42u);
  ASSERT_EQ(state.logHistory.size(), 2u);
  EXPECT_EQ(state.logHistory[1].loss, 2.25);
  EXPECT_EQ(state.logHistory[0].learningRate, 1e-4);
  // The validation loss of the steps that measured one, as HF's eval_loss.
  EXPECT_FALSE(state.logHistory[0].evalLoss);
  EXPECT_EQ(state.logHistory[1].evalLoss, std::optional<double>(2.75));
}

// Tests that gradient accumulators, zero at every optimizer-step boundary
// where checkpoints are taken, are not saved, count in the fingerprint as
// before, and that a checkpoint written with them (before they were left
// out) still loads.
TEST(Checkpoint, GradientsAreNotSavedAndOldCheckpointsWithThemLoad) {
  TempDir dir;
  Model model(1.0f);
  std::vector<float> gradA(8, 0.0f), gradB(8, 0.0f);
  model.layout.gradients = {
      {std::string(kA) + ".grad", DType::F32, {2, 4}, gradA.data()},
      {std::string(kB) + ".grad", DType::F32, {4, 2}, gradB.data()}};
  computeFingerprint(model.layout);
  // The layout that saved them with the moments, and its fingerprint.
  Model oldModel(1.0f);
  CheckpointLayout &old = oldModel.layout;
  old.states.insert(old.states.end(), model.layout.gradients.begin(),
                    model.layout.gradients.end());
  computeFingerprint(old);
  EXPECT_EQ(old.fingerprint, model.layout.fingerprint);

  std::string error;
  ASSERT_TRUE(
      saveCheckpoint(model.layout, stateAt(3, model.layout), dir.path, error))
      << error;
  auto optimizer = SafetensorsFile::open(
      dir.path + "/checkpoint-3/optimizer.safetensors", error);
  ASSERT_TRUE(optimizer) << error;
  EXPECT_EQ(optimizer->tensors().size(), 4u); // the moments only
  EXPECT_FALSE(optimizer->find(std::string(kA) + ".grad"));

  ASSERT_TRUE(saveCheckpoint(old, stateAt(4, old), dir.path, error)) << error;
  model.fill(99.0f);
  TrainerState state;
  ASSERT_TRUE(
      loadCheckpoint(model.layout, dir.path + "/checkpoint-4", state, error))
      << error;
  EXPECT_EQ(model.a, Model(1.0f).a);
  EXPECT_EQ(state.globalStep, 4);
}

TEST(Checkpoint, ReplacesAnExistingCheckpointWhole) {
  TempDir dir;
  Model first(1.0f), second(5.0f);
  std::string error;
  ASSERT_TRUE(
      saveCheckpoint(first.layout, stateAt(3, first.layout), dir.path, error));
  ASSERT_TRUE(
      saveCheckpoint(second.layout, stateAt(3, second.layout), dir.path, error))
      << error;
  EXPECT_EQ(listDir(dir.path), std::vector<std::string>{"checkpoint-3"});
  Model target(0.0f);
  TrainerState state;
  ASSERT_TRUE(
      loadCheckpoint(target.layout, dir.path + "/checkpoint-3", state, error));
  EXPECT_EQ(target.a, second.a);
}

TEST(Checkpoint, FailedSaveKeepsTheOldCheckpointAndLeavesNoTemporary) {
  TempDir dir;
  Model model(1.0f);
  std::string error;
  ASSERT_TRUE(
      saveCheckpoint(model.layout, stateAt(4, model.layout), dir.path, error));
  std::string before =
      readFile(dir.path + "/checkpoint-4/adapter_model.safetensors");
  Model broken(2.0f);
  broken.layout.states.push_back(broken.layout.states[0]); // duplicate name
  EXPECT_FALSE(saveCheckpoint(broken.layout, stateAt(4, broken.layout),
                              dir.path, error));
  EXPECT_NE(error.find("optimizer.safetensors"), std::string::npos) << error;
  EXPECT_EQ(listDir(dir.path), std::vector<std::string>{"checkpoint-4"});
  EXPECT_EQ(readFile(dir.path + "/checkpoint-4/adapter_model.safetensors"),
            before);
  // Nowhere to write: an error, nothing created.
  EXPECT_FALSE(saveCheckpoint(model.layout, stateAt(5, model.layout),
                              dir.path + "/missing/dir", error));
  EXPECT_EQ(listDir(dir.path), std::vector<std::string>{"checkpoint-4"});
}

TEST(Checkpoint, LoadRejectsMismatchesNamingFileAndTensor) {
  TempDir dir;
  Model saved(1.0f);
  std::string error;
  ASSERT_TRUE(
      saveCheckpoint(saved.layout, stateAt(2, saved.layout), dir.path, error));
  std::string ck = dir.path + "/checkpoint-2";
  TrainerState state;

  // A plan with one more parameter: missing tensor.
  Model more(3.0f);
  std::vector<float> extra(4, 1.0f);
  more.layout.parameters.push_back(
      {"model.layers.1.self_attn.q_proj.lora_A.weight",
       DType::F32,
       {2, 2},
       extra.data()});
  computeFingerprint(more.layout);
  EXPECT_FALSE(loadCheckpoint(more.layout, ck, state, error));
  EXPECT_NE(error.find(ck + "/adapter_model.safetensors: missing tensor "
                            "'base_model.model.model.layers.1.self_attn."
                            "q_proj.lora_A.weight'"),
            std::string::npos)
      << error;
  // Nothing was written into the tensors by the failed load.
  EXPECT_EQ(more.a, Model(3.0f).a);

  // Wrong shape.
  Model reshaped(3.0f);
  reshaped.layout.parameters[1].shape = {2, 4};
  computeFingerprint(reshaped.layout);
  EXPECT_FALSE(loadCheckpoint(reshaped.layout, ck, state, error));
  EXPECT_NE(error.find("tensor 'base_model.model." + std::string(kB) +
                       "' has shape [4, 2], expected [2, 4]"),
            std::string::npos)
      << error;

  // Wrong dtype of an optimizer state.
  Model retyped(3.0f);
  retyped.layout.states[0].dtype = DType::I32;
  computeFingerprint(retyped.layout);
  EXPECT_FALSE(loadCheckpoint(retyped.layout, ck, state, error));
  EXPECT_NE(error.find(ck + "/optimizer.safetensors: tensor '" +
                       std::string(kA) + ".exp_avg' is F32, expected I32"),
            std::string::npos)
      << error;

  // A plan with fewer tensors: the file has one it does not know.
  Model fewer(3.0f);
  fewer.layout.states.pop_back();
  computeFingerprint(fewer.layout);
  EXPECT_FALSE(loadCheckpoint(fewer.layout, ck, state, error));
  EXPECT_NE(error.find("has no counterpart in the plan"), std::string::npos)
      << error;

  // Same tensors, different fingerprint (a tampered trainer state).
  Model same(3.0f);
  same.layout.fingerprint = "0123456789abcdef";
  EXPECT_FALSE(loadCheckpoint(same.layout, ck, state, error));
  EXPECT_NE(error.find("trainer_state.json: plan fingerprint"),
            std::string::npos)
      << error;

  // Corrupt files.
  std::ofstream(ck + "/optimizer.safetensors") << "garbage";
  EXPECT_FALSE(loadCheckpoint(saved.layout, ck, state, error));
  EXPECT_NE(error.find(ck + "/optimizer.safetensors: "), std::string::npos)
      << error;
  std::ofstream(ck + "/trainer_state.json") << "{\"global_step\": ";
  EXPECT_FALSE(loadCheckpoint(saved.layout, ck, state, error));
  EXPECT_NE(error.find(ck + "/trainer_state.json: not a JSON object"),
            std::string::npos)
      << error;
  EXPECT_FALSE(
      loadCheckpoint(saved.layout, dir.path + "/checkpoint-99", state, error));
  EXPECT_NE(error.find("checkpoint-99/trainer_state.json: cannot open"),
            std::string::npos)
      << error;
}

TEST(Checkpoint, LatestIgnoresIncompleteCheckpoints) {
  TempDir dir;
  Model model(1.0f);
  std::string error;
  EXPECT_EQ(findLatestCheckpoint(dir.path), "");
  for (int64_t step : {5, 9, 10, 15, 20}) {
    ASSERT_TRUE(saveCheckpoint(model.layout, stateAt(step, model.layout),
                               dir.path, error))
        << error;
  }
  // 20: no trainer state; 15: a truncated one; a leftover temporary of 30.
  ::unlink((dir.path + "/checkpoint-20/trainer_state.json").c_str());
  std::ofstream(dir.path + "/checkpoint-15/trainer_state.json") << "{\"glob";
  ASSERT_TRUE(makeDirectories(dir.path + "/checkpoint-30.tmp-12345", error));
  std::ofstream(dir.path + "/checkpoint-30.tmp-12345/trainer_state.json")
      << readFile(dir.path + "/checkpoint-10/trainer_state.json");
  ASSERT_TRUE(makeDirectories(dir.path + "/checkpoint-x", error));
  // Numeric, not lexicographic: 10 beats 9.
  EXPECT_EQ(findLatestCheckpoint(dir.path), dir.path + "/checkpoint-10");
  EXPECT_EQ(findLatestCheckpoint(dir.path + "/none"), "");
}

TEST(Checkpoint, StaleTemporariesGoAndCheckpointsStay) {
  TempDir dir;
  Model model(1.0f);
  std::string error;
  for (int64_t step : {2, 4, 8}) {
    ASSERT_TRUE(saveCheckpoint(model.layout, stateAt(step, model.layout),
                               dir.path, error))
        << error;
  }
  std::string four = readFile(dir.path + "/checkpoint-4/trainer_state.json");
  std::string dead = std::to_string(deadProcessId());
  std::string self = std::to_string(::getpid());
  std::string d = dir.path + "/";
  // What a writer killed mid-write leaves: temporaries of a checkpoint
  // (this pid's too: pids are reused, and this run writes nothing yet), of
  // the files written beside them, and checkpoints moved aside to be
  // replaced. checkpoint-8 was being replaced when the writer died between
  // its two renames: its .old copy is the only one.
  ASSERT_EQ(::rename((d + "checkpoint-8").c_str(),
                     (d + "checkpoint-8.old-" + dead).c_str()),
            0);
  plantDirectory(d + "checkpoint-6.tmp-" + dead, "adapter_model.safetensors",
                 "partial");
  plantDirectory(d + "checkpoint-4.tmp-" + self, "trainer_state.json", four);
  plantDirectory(d + "checkpoint-2.old-" + dead, "trainer_state.json", "old");
  plantDirectory(d + "checkpoint-9", "adapter_model.safetensors", "x");
  plantDirectory(d + "checkpoint-9.old-" + dead, "trainer_state.json", "x");
  plantDirectory(d + "checkpoint-10.tmp-1", "trainer_state.json", "x");
  std::ofstream(d + ".metrics.jsonl.tmp-" + dead + "-0") << "{}";
  std::ofstream(d + ".adapter_model.safetensors.tmp-" + dead + "-3") << "x";
  // Not the writer's: names it never makes, or temporaries of other files.
  std::vector<std::string> unrelated = {
      "notes.tmp", "checkpoint-3.tmp", "data.tmp-" + dead,
      ".train.bin.tmp-" + dead + "-0", "checkpoint-x.tmp-" + dead,
      "checkpoint-5.tmp-" + dead + "-1"};
  for (const std::string &name : unrelated) {
    std::ofstream(d + name) << "keep";
  }

  StaleTemporaries found;
  ASSERT_TRUE(removeStaleTemporaries(dir.path, found, error)) << error;
  std::vector<std::string> expected = {"checkpoint-10.tmp-1", "checkpoint-2",
                                       "checkpoint-4", "checkpoint-8",
                                       "checkpoint-9",
                                       "checkpoint-9.old-" + dead};
  expected.insert(expected.end(), unrelated.begin(), unrelated.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(listDir(dir.path), expected);
  EXPECT_EQ(readFile(d + "checkpoint-4/trainer_state.json"), four);
  EXPECT_EQ(found.removed,
            (std::vector<std::string>{
                "checkpoint-2.old-" + dead,
                ".adapter_model.safetensors.tmp-" + dead + "-3",
                ".metrics.jsonl.tmp-" + dead + "-0", "checkpoint-4.tmp-" + self,
                "checkpoint-6.tmp-" + dead}));
  EXPECT_EQ(found.restored,
            std::vector<std::string>{"checkpoint-8.old-" + dead});
  EXPECT_EQ(found.kept,
            (std::vector<std::string>{
                "checkpoint-9.old-" + dead + " (checkpoint-9 is incomplete)",
                "checkpoint-10.tmp-1 (process 1 is running)"}));
  std::string line = found.describe(dir.path);
  EXPECT_EQ(line.find("temporaries of an interrupted write in " + dir.path +
                      ": removed checkpoint-2.old-" + dead),
            0u)
      << line;
  EXPECT_NE(line.find("; restored checkpoint-8.old-" + dead + "; kept "),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;

  // The restored checkpoint is the latest and loads.
  EXPECT_EQ(findLatestCheckpoint(dir.path), d + "checkpoint-8");
  TrainerState state;
  ASSERT_TRUE(loadCheckpoint(model.layout, d + "checkpoint-8", state, error))
      << error;
  EXPECT_EQ(state.globalStep, 8);

  // Nothing left to do the second time; a missing directory holds nothing.
  ASSERT_TRUE(removeStaleTemporaries(dir.path, found, error)) << error;
  EXPECT_TRUE(found.removed.empty() && found.restored.empty());
  ASSERT_TRUE(removeStaleTemporaries(d + "none", found, error)) << error;
  EXPECT_TRUE(found.empty());
}

TEST(Checkpoint, FullFineTuningWritesModelSafetensors) {
  TempDir dir;
  Model model(1.0f, "full");
  model.layout.parameters[0].name = "model.embed_tokens.weight";
  // An exporter's renamed, transposed Linear weight: files hold the Hugging
  // Face name and [out, in] layout.
  model.layout.parameters[1].name = "onnx::MatMul_7";
  model.layout.parameters[1].exportName = "model.layers.0.mlp.up_proj.weight";
  model.layout.parameters[1].transposed = true;
  computeFingerprint(model.layout);
  std::string error;
  ASSERT_TRUE(
      saveCheckpoint(model.layout, stateAt(1, model.layout), dir.path, error))
      << error;
  std::string ck = dir.path + "/checkpoint-1";
  EXPECT_EQ(listDir(ck), (std::vector<std::string>{"model.safetensors",
                                                   "optimizer.safetensors",
                                                   "trainer_state.json"}));
  auto weights = SafetensorsFile::open(ck + "/model.safetensors", error);
  ASSERT_TRUE(weights) << error;
  EXPECT_TRUE(weights->find("model.embed_tokens.weight"));
  const SafetensorsTensor *up =
      weights->find("model.layers.0.mlp.up_proj.weight");
  ASSERT_TRUE(up);
  EXPECT_EQ(up->shape, (std::vector<int64_t>{2, 4})); // plan holds [4, 2]
  std::vector<float> file(8);
  std::memcpy(file.data(), up->data, 32);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 4; ++c) {
      EXPECT_EQ(file[static_cast<size_t>(r * 4 + c)],
                model.b[static_cast<size_t>(c * 2 + r)]);
    }
  }
  TrainerState state;
  model.fill(0.0f);
  ASSERT_TRUE(loadCheckpoint(model.layout, ck, state, error)) << error;
  EXPECT_EQ(model.a, Model(1.0f).a);
  EXPECT_EQ(model.b, Model(1.0f).b);
  EXPECT_FALSE(loadPeftAdapter(model.layout, ck, error));
}

// Tests that a full fine-tune's checkpoint carries the base model's
// config.json when `base_model` is a local Hugging Face directory, so
// transformers' from_pretrained loads it.
TEST(Checkpoint, FullFineTuningCopiesTheBaseConfig) {
  TempDir dir, base;
  const std::string config = "{\"model_type\": \"llama\", \"hidden_size\": 4}\n";
  std::ofstream(base.path + "/config.json") << config;
  Model model(1.0f, "full");
  model.layout.adapter.baseModel = base.path;
  computeFingerprint(model.layout);
  std::string error;
  ASSERT_TRUE(
      saveCheckpoint(model.layout, stateAt(2, model.layout), dir.path, error))
      << error;
  EXPECT_EQ(readFile(dir.path + "/checkpoint-2/config.json"), config);
}

/// Writes a PEFT-style adapter directory for `model`'s two weights with
/// `dtype` data and the given config.
void writeAdapter(const std::string &dir, const std::string &config,
                  const std::string &dtype, const std::vector<uint16_t> &a,
                  const std::vector<uint16_t> &b) {
  std::string error;
  ASSERT_TRUE(makeDirectories(dir, error)) << error;
  std::ofstream(dir + "/adapter_config.json") << config;
  ASSERT_TRUE(writeSafetensors(
      dir + "/adapter_model.safetensors",
      {{std::string("base_model.model.") + kA, dtype, {2, 4}, a.data(), 16},
       {std::string("base_model.model.") + kB, dtype, {4, 2}, b.data(), 16}},
      error))
      << error;
}

TEST(Checkpoint, LoadsPeftAdaptersConvertingHalfPrecision) {
  TempDir dir;
  std::string good = R"({"peft_type": "LORA", "r": 2, "lora_alpha": 16,
                         "use_rslora": false, "target_modules": ["q_proj"]})";
  std::vector<uint16_t> a(8, 0x3c00), b(8, 0xc000); // f16 1.0, -2.0
  writeAdapter(dir.path + "/f16", good, "F16", a, b);
  Model model(0.0f);
  std::string error;
  ASSERT_TRUE(loadPeftAdapter(model.layout, dir.path + "/f16", error)) << error;
  EXPECT_EQ(model.a, std::vector<float>(8, 1.0f));
  EXPECT_EQ(model.b, std::vector<float>(8, -2.0f));
  std::vector<uint16_t> bfA(8, 0x3f80), bfB(8, 0x4040); // bf16 1.0, 3.0
  writeAdapter(dir.path + "/bf16", good, "BF16", bfA, bfB);
  ASSERT_TRUE(loadPeftAdapter(model.layout, dir.path + "/bf16", error))
      << error;
  EXPECT_EQ(model.b, std::vector<float>(8, 3.0f));

  writeAdapter(dir.path + "/r4", R"({"r": 4, "lora_alpha": 16})", "F16", a, b);
  EXPECT_FALSE(loadPeftAdapter(model.layout, dir.path + "/r4", error));
  EXPECT_NE(error.find("r4/adapter_config.json: r 4 and lora_alpha 16 do not "
                       "match the plan's r 2"),
            std::string::npos)
      << error;
  writeAdapter(dir.path + "/rs",
               R"({"r": 2, "lora_alpha": 16, "use_rslora": true})", "F16", a,
               b);
  EXPECT_FALSE(loadPeftAdapter(model.layout, dir.path + "/rs", error));
  EXPECT_NE(error.find("use_rslora is true"), std::string::npos) << error;
  writeAdapter(dir.path + "/dora",
               R"({"r": 2, "lora_alpha": 16, "use_dora": true})", "F16", a, b);
  EXPECT_FALSE(loadPeftAdapter(model.layout, dir.path + "/dora", error));

  // Shapes must match; I64 weights are not converted.
  std::string error2;
  ASSERT_TRUE(makeDirectories(dir.path + "/shape", error2));
  std::ofstream(dir.path + "/shape/adapter_config.json") << good;
  std::vector<float> wide(16);
  ASSERT_TRUE(writeSafetensors(
      dir.path + "/shape/adapter_model.safetensors",
      {{std::string("base_model.model.") + kA, "F32", {4, 4}, wide.data(), 64},
       {std::string("base_model.model.") + kB, "F32", {4, 2}, wide.data(), 32}},
      error2));
  EXPECT_FALSE(loadPeftAdapter(model.layout, dir.path + "/shape", error));
  EXPECT_NE(error.find("shape/adapter_model.safetensors: tensor "
                       "'base_model.model." +
                       std::string(kA) + "' has shape [4, 4], expected [2, 4]"),
            std::string::npos)
      << error;
  EXPECT_FALSE(loadPeftAdapter(model.layout, dir.path + "/absent", error));
  EXPECT_NE(error.find("absent/adapter_config.json: cannot open"),
            std::string::npos)
      << error;
}

// fan_in_fan_out (PEFT writes true for GPT-2's Conv1D layers) is read for the
// merge at load; absent is false, and a flag that is not a boolean is
// refused rather than read as false.
TEST(Checkpoint, ReadsPeftAdapterFlags) {
  TempDir dir;
  std::string error;
  auto read = [&](const std::string &name, const std::string &config,
                  PeftAdapterConfig &out) {
    std::string path = dir.path + "/" + name;
    EXPECT_TRUE(makeDirectories(path, error)) << error;
    std::ofstream(path + "/adapter_config.json") << config;
    return readPeftAdapterConfig(path, out, error);
  };
  PeftAdapterConfig config;
  ASSERT_TRUE(read("conv1d",
                   R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8,
                       "fan_in_fan_out": true})",
                   config))
      << error;
  EXPECT_TRUE(config.fanInFanOut);
  ASSERT_TRUE(read("linear", R"({"r": 4, "lora_alpha": 8})", config))
      << error;
  EXPECT_FALSE(config.fanInFanOut);
  EXPECT_FALSE(read("string",
                    R"({"r": 4, "lora_alpha": 8, "fan_in_fan_out": "true"})",
                    config));
  EXPECT_NE(error.find("string/adapter_config.json: fan_in_fan_out is string, "
                       "expected a boolean"),
            std::string::npos)
      << error;
  EXPECT_FALSE(read("rslora",
                    R"({"r": 4, "lora_alpha": 8, "use_rslora": null})",
                    config));
  EXPECT_NE(error.find("use_rslora is null, expected a boolean"),
            std::string::npos)
      << error;
}

#ifdef TAILOR_TEST_PYTHON
constexpr const char *kPython = TAILOR_TEST_PYTHON;
#else
constexpr const char *kPython = nullptr;
#endif

// Loads our final adapter with PEFT into a tiny Llama (q_proj is 4 x 4, so
// r = 2 gives our [2, 4] and [4, 2] weights), then saves a bf16 adapter of
// its own for us to read.
constexpr const char *kPeftScript = R"PY(
import sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from peft import LoraConfig, PeftModel, get_peft_model
ours, theirs = sys.argv[1], sys.argv[2]
def tiny():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        hidden_size=4, intermediate_size=8, num_attention_heads=1,
        num_key_value_heads=1, num_hidden_layers=1, vocab_size=16))
pm = PeftModel.from_pretrained(tiny(), ours)
config = pm.peft_config["default"]
assert config.r == 2 and config.lora_alpha == 16, config
assert set(config.target_modules) == {"q_proj"}, config.target_modules
q = pm.base_model.model.model.layers[0].self_attn.q_proj
a = q.lora_A["default"].weight.detach().flatten().tolist()
b = q.lora_B["default"].weight.detach().flatten().tolist()
assert a == [1.0 + i for i in range(8)], a
assert b == [-1.0 - i for i in range(8)], b
config = LoraConfig(r=2, lora_alpha=16, target_modules=["q_proj"])
pm = get_peft_model(tiny(), config)
q = pm.base_model.model.model.layers[0].self_attn.q_proj
with torch.no_grad():
    q.lora_A["default"].weight.copy_(torch.arange(8.0).reshape(2, 4) * 0.5)
    q.lora_B["default"].weight.copy_(-torch.arange(8.0).reshape(4, 2) - 0.25)
pm.to(torch.bfloat16).save_pretrained(theirs)
print("peft ok")
)PY";

TEST(Checkpoint, PeftReadsOurAdapterAndWeReadPefts) {
  if (!kPython) {
    GTEST_SKIP() << "no project Python environment (.venv) to cross-check";
  }
  TempDir dir;
  Model model(1.0f);
  model.layout.adapter.targetModules = {"q_proj"};
  std::string error;
  ASSERT_TRUE(writeModelFiles(model.layout, dir.path, error)) << error;
  std::string script = dir.path + "/check.py";
  std::ofstream(script) << kPeftScript;
  std::string command = std::string(kPython) + " " + script + " " + dir.path +
                        " " + dir.path + "/theirs > " + dir.path +
                        "/log.txt 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << readFile(dir.path + "/log.txt");

  Model loaded(0.0f);
  ASSERT_TRUE(loadPeftAdapter(loaded.layout, dir.path + "/theirs", error))
      << error;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(loaded.a[i], 0.5f * static_cast<float>(i));
    EXPECT_EQ(loaded.b[i], -static_cast<float>(i) - 0.25f);
  }
}

TEST(AtomicFile, CommitReplacesAndAbandonLeavesNothing) {
  TempDir dir;
  std::string path = dir.path + "/f.txt";
  std::string error;
  ASSERT_TRUE(writeFileAtomically(path, "one", error)) << error;
  ASSERT_TRUE(writeFileAtomically(path, "two", error)) << error;
  EXPECT_EQ(readFile(path), "two");
  {
    auto file = AtomicFile::create(path, error);
    ASSERT_TRUE(file);
    file->write("partial");
    // Destroyed without commit: the old contents stay, no temporary.
  }
  EXPECT_EQ(readFile(path), "two");
  EXPECT_EQ(listDir(dir.path), std::vector<std::string>{"f.txt"});
  {
    auto tree = AtomicDirectory::create(dir.path + "/d", error);
    ASSERT_TRUE(tree);
    std::ofstream(tree->tempPath() + "/x") << "x";
  }
  EXPECT_EQ(listDir(dir.path), std::vector<std::string>{"f.txt"});
  EXPECT_FALSE(writeFileAtomically(dir.path + "/no/such/dir/f", "x", error));
  EXPECT_NE(error.find("no/such/dir/f"), std::string::npos) << error;
}

} // namespace
