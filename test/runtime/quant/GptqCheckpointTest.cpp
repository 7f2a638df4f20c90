//===- GptqCheckpointTest.cpp - GPTQ checkpoints: round trip and errors ---===//
//
// Writes checkpoints with writeGptqCheckpoint (or, for broken ones, with
// the plain safetensors writer) and reads them back: every tensor's bytes
// must survive, the file locations must point at them, and each way a
// checkpoint can disagree with itself must be an error naming the file and
// tensor.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/GptqCheckpoint.h"
#include "test/runtime/quant/QuantTestUtil.h"

#include "test/runtime/train/TrainTestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fcntl.h>
#include <random>
#include <unistd.h>

using namespace tailor::quant;
using tailor::train::SafetensorsInput;
using tailor::train::testing::readFile;
using tailor::train::testing::TempDir;

namespace {

using tailor::quant::test_util::optionsFor;

QuantSpec gptqSpec(int64_t rows, int64_t cols, int bits, int groupSize,
                   bool actOrder) {
  QuantSpec spec;
  spec.scheme = Scheme::GPTQ;
  spec.rows = rows;
  spec.cols = cols;
  spec.bits = bits;
  spec.groupSize = groupSize;
  spec.actOrder = actOrder;
  return spec;
}

/// Valid storage with random codes, scales and zeros and a shuffled g_idx.
std::vector<uint8_t> randomStorage(const QuantSpec &spec, unsigned seed) {
  std::mt19937 gen(seed);
  int levels = 1 << spec.bits;
  int64_t groupCols = spec.groupSize == -1 ? spec.cols : spec.groupSize;
  int64_t groups = (spec.cols + groupCols - 1) / groupCols;
  std::uniform_int_distribution<int> code(0, levels - 1);
  std::uniform_int_distribution<int> zero(1, levels);
  std::uniform_real_distribution<float> scale(1e-3f, 0.1f);
  std::vector<uint8_t> codes(spec.rows * spec.cols);
  for (uint8_t &c : codes) {
    c = static_cast<uint8_t>(code(gen));
  }
  std::vector<float> scales(groups * spec.rows);
  std::vector<int32_t> zeros(groups * spec.rows);
  for (int64_t i = 0; i < groups * spec.rows; ++i) {
    scales[i] = scale(gen);
    zeros[i] = zero(gen);
  }
  std::vector<int32_t> gIdx(spec.cols);
  for (int64_t c = 0; c < spec.cols; ++c) {
    gIdx[c] = static_cast<int32_t>(c / groupCols);
  }
  std::shuffle(gIdx.begin(), gIdx.end(), gen);
  std::vector<uint8_t> storage(gptqStorageBytes(spec));
  EXPECT_EQ(packGptq(spec, codes.data(), scales.data(), zeros.data(),
                     gIdx.data(), storage.data()),
            "");
  return storage;
}

void writeText(const std::string &path, const std::string &text) {
  std::string error;
  ASSERT_TRUE(tailor::train::writeFileAtomically(path, text, error)) << error;
}

/// The error of opening `path`, or "" if it opened.
std::string openError(const std::string &path) {
  std::string error;
  std::unique_ptr<GptqCheckpoint> checkpoint =
      GptqCheckpoint::open(path, error);
  EXPECT_EQ(checkpoint == nullptr, !error.empty());
  return error;
}

/// A checkpoint of one 64 x 128, 4-bit, group-32 module "layer" written by
/// the plain safetensors writer with one section replaced by `replacement`
/// (or left out when its name is empty), for the error cases.
struct BrokenCheckpoint {
  TempDir dir{"gptq"};
  std::string path = dir.path + "/model.safetensors";
  QuantSpec spec = gptqSpec(64, 128, 4, 32, false);
  std::vector<uint8_t> storage = randomStorage(spec, 3);

  std::string write(int section, SafetensorsInput replacement) {
    GptqLayout layout = gptqLayout(spec);
    const GptqSection *sections[] = {&layout.qweight, &layout.qzeros,
                                     &layout.scales, &layout.gIdx};
    const char *names[] = {"layer.qweight", "layer.qzeros", "layer.scales",
                           "layer.g_idx"};
    std::vector<SafetensorsInput> inputs;
    for (int i = 0; i < 4; ++i) {
      if (i == section) {
        if (!replacement.name.empty()) {
          inputs.push_back(replacement);
        }
        continue;
      }
      inputs.push_back({names[i], sections[i]->dtype, sections[i]->shape,
                        storage.data() + sections[i]->offset,
                        sections[i]->bytes});
    }
    std::string error;
    EXPECT_TRUE(tailor::train::writeSafetensors(path, inputs, error)) << error;
    writeText(dir.path + "/quantize_config.json",
              R"({"bits": 4, "group_size": 32, "desc_act": false})");
    return openError(path);
  }
};

} // namespace

// Tests that a written checkpoint reads back with identical bytes for
// every tensor, at the file offsets it reports, with AutoGPTQ's config.
TEST(GptqCheckpointTest, RoundTrip) {
  TempDir dir("gptq");
  std::string path = dir.path + "/model.safetensors";
  QuantSpec up = gptqSpec(64, 96, 3, 32, true);
  QuantSpec down = gptqSpec(96, 64, 3, 32, true);
  std::vector<uint8_t> upStorage = randomStorage(up, 1);
  std::vector<uint8_t> downStorage = randomStorage(down, 2);
  std::vector<float> norm(96, 0.5f);
  GptqOptions options = optionsFor(up);
  options.dampPercent = 0.1;
  options.symmetric = false;
  ASSERT_EQ(writeGptqCheckpoint(
                path,
                {{"model.layers.0.mlp.up_proj", up, upStorage.data()},
                 {"model.layers.0.mlp.down_proj", down, downStorage.data()}},
                options,
                {{"model.norm.weight", "F32", {96}, norm.data(), 96 * 4}}),
            "");
  EXPECT_EQ(readFile(dir.path + "/quantize_config.json"),
            "{\n"
            "  \"bits\": 3,\n"
            "  \"group_size\": 32,\n"
            "  \"damp_percent\": 0.1,\n"
            "  \"desc_act\": true,\n"
            "  \"static_groups\": false,\n"
            "  \"sym\": false,\n"
            "  \"true_sequential\": true,\n"
            "  \"model_name_or_path\": null,\n"
            "  \"model_file_base_name\": \"model\",\n"
            "  \"quant_method\": \"gptq\",\n"
            "  \"checkpoint_format\": \"gptq\"\n"
            "}\n");

  std::string error;
  std::unique_ptr<GptqCheckpoint> checkpoint =
      GptqCheckpoint::open(path, error);
  ASSERT_TRUE(checkpoint) << error;
  EXPECT_EQ(checkpoint->options().bits, 3);
  EXPECT_EQ(checkpoint->options().groupSize, 32);
  EXPECT_TRUE(checkpoint->options().actOrder);
  EXPECT_FALSE(checkpoint->options().symmetric);
  EXPECT_EQ(checkpoint->options().dampPercent, 0.1);
  ASSERT_EQ(checkpoint->modules().size(), 2u);
  EXPECT_EQ(checkpoint->modules()[0].name, "model.layers.0.mlp.down_proj");
  EXPECT_TRUE(checkpoint->file().find("model.norm.weight"));
  EXPECT_EQ(checkpoint->find("model.norm"), nullptr);

  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  for (const auto &[name, spec, storage] :
       {std::tuple(std::string("model.layers.0.mlp.up_proj"), up, &upStorage),
        std::tuple(std::string("model.layers.0.mlp.down_proj"), down,
                   &downStorage)}) {
    SCOPED_TRACE(name);
    const GptqCheckpointModule *module = checkpoint->find(name);
    ASSERT_TRUE(module);
    EXPECT_EQ(module->spec.rows, spec.rows);
    EXPECT_EQ(module->spec.cols, spec.cols);
    EXPECT_TRUE(module->spec.actOrder);
    EXPECT_EQ(module->scales.name, name + ".scales");
    EXPECT_EQ(module->scales.dtype, "F16");
    EXPECT_EQ(module->qweight.shape,
              (std::vector<int64_t>{spec.cols * 3 / 32, spec.rows}));
    std::vector<uint8_t> read(gptqStorageBytes(spec), 0xee);
    ASSERT_EQ(checkpoint->readStorage(*module, read.data()), "");
    EXPECT_EQ(read, *storage);
    // What the runtime does: pread each section to its place.
    std::vector<uint8_t> preadStorage(gptqStorageBytes(spec), 0xee);
    for (const GptqTensorLocation *location :
         {&module->qweight, &module->qzeros, &module->scales, &module->gIdx}) {
      ASSERT_EQ(::pread(fd, preadStorage.data() + location->storageOffset,
                        location->bytes,
                        static_cast<off_t>(location->fileOffset)),
                static_cast<ssize_t>(location->bytes))
          << location->name;
    }
    EXPECT_EQ(preadStorage, *storage);
  }
  ::close(fd);
}

// Tests that the settings may come from transformers' config.json.
TEST(GptqCheckpointTest, ConfigFromTransformersConfigJson) {
  TempDir dir("gptq");
  writeText(dir.path + "/config.json",
            R"({"model_type": "llama", "quantization_config": {"bits": 8,
                "group_size": -1, "desc_act": false, "sym": true,
                "quant_method": "gptq", "checkpoint_format": "gptq"}})");
  GptqOptions options;
  ASSERT_EQ(readGptqConfig(dir.path, options), "");
  EXPECT_EQ(options.bits, 8);
  EXPECT_EQ(options.groupSize, -1);
  EXPECT_FALSE(options.actOrder);
}

// Tests that settings tailor cannot read are errors naming the file.
TEST(GptqCheckpointTest, ConfigErrors) {
  TempDir dir("gptq");
  GptqOptions options;
  EXPECT_EQ(readGptqConfig(dir.path, options),
            dir.path + ": no quantize_config.json, nor a "
                       "\"quantization_config\" in config.json");
  std::string path = dir.path + "/quantize_config.json";
  const std::pair<const char *, std::string> cases[] = {
      {R"({"bits": 4, "group_size": 128, "checkpoint_format": "gptq_v2"})",
       ": \"checkpoint_format\" is \"gptq_v2\"; tailor reads \"gptq\" "
       "checkpoints (the v1 format)"},
      {R"({"bits": 4, "group_size": 128, "is_marlin_format": true})",
       ": marlin-format checkpoints are not supported (tailor reads the v1 "
       "format)"},
      {R"({"group_size": 128})", ": \"bits\" is missing or not an integer"},
      {R"({"bits": 6, "group_size": 128})",
       ": \"bits\" must be 2, 3, 4 or 8, got 6"},
      {R"({"bits": 4, "group_size": 0})",
       ": \"group_size\" must be -1 or at least 1, got 0"},
      {R"({"bits": 4, "group_size": 128, "desc_act": "yes"})",
       ": \"desc_act\" is not a boolean"},
      {R"([4, 128])", ": not a JSON object"},
  };
  for (const auto &[text, message] : cases) {
    writeText(path, text);
    EXPECT_EQ(readGptqConfig(dir.path, options), path + message) << text;
  }
}

// Tests each way the tensors can disagree with the settings or each other.
TEST(GptqCheckpointTest, TensorErrors) {
  {
    BrokenCheckpoint broken;
    EXPECT_EQ(broken.write(-1, {}), "");
  }
  {
    BrokenCheckpoint broken;
    EXPECT_EQ(broken.write(3, {}),
              broken.path + ": tensor 'layer.g_idx' is missing (module "
                            "'layer' has a qweight)");
  }
  {
    BrokenCheckpoint broken;
    std::vector<float> scales(4 * 64, 1.0f);
    EXPECT_EQ(
        broken.write(
            2,
            {"layer.scales", "F32", {4, 64}, scales.data(), scales.size() * 4}),
        broken.path + ": tensor 'layer.scales' is F32 [4, 64], expected "
                      "F16 [4, 64] (bits 4, group size 32, 64 x 128 "
                      "weight)");
  }
  {
    BrokenCheckpoint broken;
    std::vector<int32_t> zeros(2 * 8, 0);
    EXPECT_EQ(
        broken.write(
            1, {"layer.qzeros", "I32", {2, 8}, zeros.data(), zeros.size() * 4}),
        broken.path + ": tensor 'layer.qzeros' is I32 [2, 8], expected "
                      "I32 [4, 8] (bits 4, group size 32, 64 x 128 "
                      "weight)");
  }
  {
    BrokenCheckpoint broken;
    std::vector<int32_t> qweight(16 * 60, 0);
    EXPECT_EQ(broken.write(0, {"layer.qweight",
                               "I32",
                               {16, 60},
                               qweight.data(),
                               qweight.size() * 4}),
              broken.path + ": tensor 'layer.qweight' holds a 60 x 128 weight "
                            "that gptq cannot store: gptq at 4 bits packs 8 "
                            "codes per int32: rows (out features, packed in "
                            "qzeros) must be a multiple of 8, got 60");
  }
  {
    BrokenCheckpoint broken;
    std::vector<uint8_t> qweight(16 * 64 * 2, 0);
    EXPECT_EQ(
        broken.write(
            0,
            {"layer.qweight", "I16", {16, 64}, qweight.data(), qweight.size()}),
        broken.path + ": tensor 'layer.qweight' is I16 [16, 64], "
                      "expected I32 [cols * 4 / 32, rows]");
  }
  {
    // A g_idx pointing past the groups is caught when the storage is read.
    BrokenCheckpoint broken;
    std::vector<int32_t> gIdx(128, 0);
    gIdx[100] = 4;
    ASSERT_EQ(
        broken.write(
            3, {"layer.g_idx", "I32", {128}, gIdx.data(), gIdx.size() * 4}),
        "");
    std::string error;
    std::unique_ptr<GptqCheckpoint> checkpoint =
        GptqCheckpoint::open(broken.path, error);
    ASSERT_TRUE(checkpoint) << error;
    std::vector<uint8_t> storage(gptqStorageBytes(broken.spec));
    EXPECT_EQ(checkpoint->readStorage(checkpoint->modules()[0], storage.data()),
              broken.path + ": tensor 'layer.g_idx': g_idx[100] is 4, "
                            "outside [0, 4)");
  }
}

// Tests that a truncated file is refused, naming it.
TEST(GptqCheckpointTest, TruncatedFile) {
  BrokenCheckpoint broken;
  ASSERT_EQ(broken.write(-1, {}), "");
  std::string bytes = readFile(broken.path);
  writeText(broken.path, bytes.substr(0, bytes.size() - 100));
  std::string error = openError(broken.path);
  EXPECT_EQ(error.rfind(broken.path + ": ", 0), 0u) << error;
}

// Tests that the writer refuses modules that disagree with the settings or
// hold an unusable g_idx, naming the module.
TEST(GptqCheckpointTest, WriterErrors) {
  TempDir dir("gptq");
  std::string path = dir.path + "/model.safetensors";
  QuantSpec spec = gptqSpec(64, 128, 4, 32, false);
  std::vector<uint8_t> storage = randomStorage(spec, 4);
  GptqOptions options = optionsFor(spec);
  options.groupSize = 64;
  EXPECT_EQ(
      writeGptqCheckpoint(path, {{"layer", spec, storage.data()}}, options),
      path + ": module 'layer' (bits 4, group size 32, 64 x 128 weight, "
             "act order off) disagrees with the checkpoint's settings "
             "(bits 4, group size 64, act order off)");
  int32_t bad = 9;
  std::memcpy(storage.data() + gptqLayout(spec).gIdx.offset, &bad, 4);
  EXPECT_EQ(writeGptqCheckpoint(path, {{"layer", spec, storage.data()}},
                                optionsFor(spec)),
            path + ": module 'layer': g_idx[0] is 9, outside [0, 4)");
  EXPECT_EQ(readFile(path), "") << "nothing is written on error";
}
