//===- SafetensorsTest.cpp - safetensors reading, writing, rejection ------===//
//
// Round trips through our writer, a file written by Python's safetensors
// package (torch), and one malformed header per rule the format states:
// each must be rejected with a message naming the file and the tensor.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/train/TrainTestUtil.h"
#include "runtime/train/Safetensors.h"
#include "runtime/train/AtomicFile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace tailor::train;
using namespace tailor::train::testing;

namespace {

/// A file with `header` as its JSON, `data` after it, and a length prefix of
/// `length` (the header's own length by default).
std::string makeFile(const std::string &header, const std::string &data,
                     int64_t length = -1) {
  uint64_t n = length < 0 ? header.size() : static_cast<uint64_t>(length);
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  }
  return out + header + data;
}

/// Parses `bytes` and returns the error ("" when it was accepted).
std::string parseError(const std::string &bytes) {
  std::string error;
  auto file = SafetensorsFile::fromMemory(bytes.data(), bytes.size(),
                                          "bad.safetensors", error);
  return file ? "" : error;
}

TEST(Safetensors, RoundTripsThroughOurWriter) {
  TempDir dir;
  std::vector<float> a = {1.5f, -2.0f, 0.25f, 7.0f, 8.0f, -9.5f};
  std::vector<int64_t> b = {-3, 1ll << 40};
  uint16_t c[3] = {0x3f80, 0xc000, 0x0000}; // bf16 1, -2, 0
  float scalar = 42.0f;
  std::vector<SafetensorsInput> inputs = {
      {"zeta.weight", "F32", {2, 3}, a.data(), 24},
      {"alpha", "I64", {2}, b.data(), 16},
      {"mid", "BF16", {3}, c, 6},
      {"empty", "F32", {0, 4}, nullptr, 0},
      {"scalar", "F32", {}, &scalar, 4}};
  std::string path = dir.path + "/t.safetensors";
  std::string error;
  ASSERT_TRUE(writeSafetensors(path, inputs, error)) << error;

  std::string bytes = readFile(path);
  uint64_t headerLength = 0;
  std::memcpy(&headerLength, bytes.data(), 8);
  EXPECT_EQ(headerLength % 8, 0u);
  // Tensors in sorted name order; metadata as PyTorch loaders expect.
  std::string header = bytes.substr(8, headerLength);
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"format\":\"pt\"},\"alpha\"", 0),
            0u)
      << header;
  EXPECT_LT(header.find("\"empty\""), header.find("\"mid\""));
  EXPECT_LT(header.find("\"scalar\""), header.find("\"zeta.weight\""));

  auto file = SafetensorsFile::open(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(file->metadata().at("format"), "pt");
  ASSERT_EQ(file->tensors().size(), 5u);
  const SafetensorsTensor *zeta = file->find("zeta.weight");
  ASSERT_TRUE(zeta);
  EXPECT_EQ(zeta->dtype, "F32");
  EXPECT_EQ(zeta->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(zeta->size, 24u);
  EXPECT_EQ(std::memcmp(zeta->data, a.data(), 24), 0);
  EXPECT_EQ(std::memcmp(file->find("alpha")->data, b.data(), 16), 0);
  EXPECT_EQ(file->find("empty")->size, 0u);
  EXPECT_TRUE(file->find("scalar")->shape.empty());
  std::vector<float> converted(3);
  ASSERT_TRUE(convertToF32(*file->find("mid"), converted.data()));
  EXPECT_EQ(converted, (std::vector<float>{1.0f, -2.0f, 0.0f}));
  EXPECT_FALSE(file->find("missing"));
}

TEST(Safetensors, WriterRejectsSizeThatDisagreesWithShape) {
  TempDir dir;
  float data[4] = {};
  std::string error;
  EXPECT_FALSE(writeSafetensors(dir.path + "/x.safetensors",
                                {{"w", "F32", {2, 3}, data, 16}}, error));
  EXPECT_NE(error.find("\"w\""), std::string::npos) << error;
  EXPECT_FALSE(writeSafetensors(dir.path + "/y.safetensors",
                                {{"w", "Q4", {2}, data, 2}}, error));
  EXPECT_NE(error.find("unknown dtype"), std::string::npos) << error;
}

// Bytes written by Python's safetensors 0.8.0 (safetensors.torch.save of
// a=f32[2,3], b=bf16[4], c=i64[2], d=f16[1,2], e=f32[0,3], metadata
// format=pt). Python orders tensors by dtype size, not by name.
TEST(Safetensors, ReadsAFileWrittenByPython) {
  std::string header =
      R"({"__metadata__":{"format":"pt"},"c":{"dtype":"I64","shape":[2],)"
      R"("data_offsets":[0,16]},"a":{"dtype":"F32","shape":[2,3],)"
      R"("data_offsets":[16,40]},"e":{"dtype":"F32","shape":[0,3],)"
      R"("data_offsets":[40,40]},"b":{"dtype":"BF16","shape":[4],)"
      R"("data_offsets":[40,48]},"d":{"dtype":"F16","shape":[1,2],)"
      R"("data_offsets":[48,52]}})"
      "       ";
  ASSERT_EQ(header.size(), 320u);
  const unsigned char data[52] = {
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x80, 0xbf, 0x00, 0x00,
      0x00, 0xbf, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f, 0x00,
      0x00, 0x80, 0x3f, 0x00, 0x00, 0xc0, 0x3f, 0xc0, 0x3f, 0x00, 0xc0,
      0x49, 0x40, 0x00, 0x00, 0x66, 0x2e, 0xff, 0xfb};
  std::string bytes =
      makeFile(header, std::string(reinterpret_cast<const char *>(data), 52));
  std::string error;
  auto file = SafetensorsFile::fromMemory(bytes.data(), bytes.size(),
                                          "python.safetensors", error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors().size(), 5u);
  std::vector<float> a(6), b(4), d(2);
  ASSERT_TRUE(convertToF32(*file->find("a"), a.data()));
  EXPECT_EQ(a, (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f}));
  ASSERT_TRUE(convertToF32(*file->find("b"), b.data()));
  EXPECT_EQ(b, (std::vector<float>{1.5f, -2.0f, 3.140625f, 0.0f}));
  ASSERT_TRUE(convertToF32(*file->find("d"), d.data()));
  EXPECT_EQ(d, (std::vector<float>{0.0999755859375f, -65504.0f}));
  int64_t c[2];
  std::memcpy(c, file->find("c")->data, 16);
  EXPECT_EQ(c[0], -1);
  EXPECT_EQ(c[1], 1ll << 40);
  EXPECT_EQ(file->find("e")->shape, (std::vector<int64_t>{0, 3}));
  EXPECT_FALSE(convertToF32(*file->find("c"), a.data()));
}

TEST(Safetensors, ConvertsHalfSubnormalsAndSpecials) {
  // f16: smallest subnormal, -0, +inf, largest subnormal.
  uint16_t half[4] = {0x0001, 0x8000, 0x7c00, 0x03ff};
  SafetensorsTensor tensor;
  tensor.dtype = "F16";
  tensor.shape = {4};
  tensor.data = reinterpret_cast<const uint8_t *>(half);
  tensor.size = 8;
  float out[4];
  ASSERT_TRUE(convertToF32(tensor, out));
  EXPECT_EQ(out[0], 5.9604644775390625e-08f);
  EXPECT_TRUE(out[1] == 0.0f && std::signbit(out[1]));
  EXPECT_TRUE(std::isinf(out[2]) && out[2] > 0);
  EXPECT_EQ(out[3], 6.0975551605224609e-05f);
}

struct Malformed {
  const char *what;
  std::string bytes;
  const char *message;
};

TEST(Safetensors, RejectsEveryMalformedFile) {
  auto entry = [](const char *name, const char *dtype, const char *shape,
                  int begin, int end) {
    return std::string("\"") + name + "\":{\"dtype\":\"" + dtype +
           "\",\"shape\":" + shape + ",\"data_offsets\":[" +
           std::to_string(begin) + "," + std::to_string(end) + "]}";
  };
  std::string eight(8, '\0');
  std::string good = "{" + entry("w", "F32", "[2]", 0, 8) + "}";
  std::vector<Malformed> cases = {
      {"shorter than the length prefix", std::string(5, '\0'), "too short"},
      {"header longer than the file", makeFile(good, eight, 4000),
       "exceeds the file size"},
      {"header not JSON", makeFile("{\"w\":{\"dtype\":", eight),
       "not valid JSON"},
      {"header not an object", makeFile("[1,2,3]", eight), "not a JSON object"},
      {"empty header", makeFile("", ""), "not a JSON object"},
      {"trailing garbage after the JSON", makeFile(good + "xyz", eight),
       "not valid JSON"},
      {"unknown dtype",
       makeFile("{" + entry("w", "F12", "[2]", 0, 8) + "}", eight),
       "unknown dtype"},
      {"negative dimension",
       makeFile("{" + entry("w", "F32", "[-2]", 0, 8) + "}", eight),
       "non-negative integer"},
      {"fractional dimension",
       makeFile("{" + entry("w", "F32", "[2.0]", 0, 8) + "}", eight),
       "non-negative integer"},
      {"missing dtype",
       makeFile(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", eight), "dtype"},
      {"missing offsets",
       makeFile(R"({"w":{"dtype":"F32","shape":[2]}})", eight), "data_offsets"},
      {"offsets disagree with shape x dtype",
       makeFile("{" + entry("w", "F32", "[3]", 0, 8) + "}", eight),
       "shape x dtype is 12"},
      {"offsets end before they begin",
       makeFile("{" + entry("w", "F32", "[0]", 8, 0) + "}", eight),
       "end before they begin"},
      {"offsets past the data",
       makeFile("{" + entry("w", "F32", "[4]", 0, 16) + "}", eight), "past"},
      {"a gap between tensors",
       makeFile("{" + entry("a", "F32", "[1]", 0, 4) + "," +
                    entry("b", "F32", "[1]", 8, 12) + "}",
                std::string(12, '\0')),
       "a gap"},
      {"overlapping tensors",
       makeFile("{" + entry("a", "F32", "[2]", 0, 8) + "," +
                    entry("b", "F32", "[1]", 4, 8) + "}",
                eight),
       "overlaps"},
      {"data left over", makeFile(good, std::string(12, '\0')),
       "data section is 12"},
      {"a tensor named twice",
       makeFile("{" + entry("w", "F32", "[1]", 0, 4) + "," +
                    entry("w", "F32", "[1]", 4, 8) + "}",
                eight),
       "appears twice"},
      {"metadata value not a string",
       makeFile(R"({"__metadata__":{"format":1},)" +
                    entry("w", "F32", "[2]", 0, 8) + "}",
                eight),
       "__metadata__"},
      {"entry not an object", makeFile(R"({"w":[1]})", eight), "not an object"},
  };
  for (const Malformed &c : cases) {
    std::string error = parseError(c.bytes);
    EXPECT_NE(error, "") << c.what << ": accepted";
    EXPECT_NE(error.find("bad.safetensors: "), std::string::npos)
        << c.what << ": " << error;
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.what << ": " << error;
  }
  // The well-formed variant of the same file is accepted, so the cases
  // above fail for the reason they name.
  EXPECT_EQ(parseError(makeFile(good, eight)), "");
  // Per-tensor problems name the tensor.
  std::string error = parseError(
      makeFile("{" + entry("lora_B", "F32", "[3]", 0, 8) + "}", eight));
  EXPECT_NE(error.find("\"lora_B\""), std::string::npos) << error;
}

TEST(Safetensors, OpenNamesMissingFile) {
  std::string error;
  EXPECT_FALSE(SafetensorsFile::open("/nonexistent/x.safetensors", error));
  EXPECT_NE(error.find("/nonexistent/x.safetensors"), std::string::npos);
}

} // namespace
