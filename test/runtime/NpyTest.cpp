//===- NpyTest.cpp - tailor-run's .npy reader, writer and conversions -----===//

#include "tools/tailor-run/Npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace tailor;

namespace {

std::vector<uint8_t> bytesOf(const std::string &s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

NpyArray fromInts(NpyDType dtype, std::vector<int64_t> shape,
                  const std::vector<int64_t> &values) {
  NpyArray wide = NpyArray::zeros(NpyDType::I64, std::move(shape));
  std::memcpy(wide.data.data(), values.data(), wide.data.size());
  NpyArray out;
  std::string error;
  EXPECT_TRUE(convertNpy(wide, dtype, out, error)) << error;
  return out;
}

NpyArray fromDoubles(NpyDType dtype, std::vector<int64_t> shape,
                     const std::vector<double> &values) {
  NpyArray wide = NpyArray::zeros(NpyDType::F64, std::move(shape));
  std::memcpy(wide.data.data(), values.data(), wide.data.size());
  NpyArray out;
  std::string error;
  EXPECT_TRUE(convertNpy(wide, dtype, out, error)) << error;
  return out;
}

NpyArray boolArray(std::vector<int64_t> shape, const std::vector<uint8_t> &v) {
  NpyArray array = NpyArray::zeros(NpyDType::Bool, std::move(shape));
  array.data = v;
  return array;
}

/// One array of every supported dtype, shape (2, 3); the NumPy cross-check
/// below builds the same arrays in Python.
std::vector<std::pair<std::string, NpyArray>> sampleArrays() {
  std::vector<int64_t> shape = {2, 3};
  std::vector<double> floats = {-1.0, 0.5, 2.0, -3.25, 100.0, 7.0};
  return {
      {"f32", fromDoubles(NpyDType::F32, shape, floats)},
      {"f64",
       fromDoubles(NpyDType::F64, shape, {0.1, -1e300, 5e-324, 2, 3, 4})},
      {"f16", fromDoubles(NpyDType::F16, shape, floats)},
      {"i64", fromInts(NpyDType::I64, shape,
                       {std::numeric_limits<int64_t>::min(), -1, 0, 1, 42,
                        std::numeric_limits<int64_t>::max()})},
      {"i32", fromInts(NpyDType::I32, shape,
                       {-2147483648, -7, 0, 9, 1000, 2147483647})},
      {"i16", fromInts(NpyDType::I16, shape, {-32768, -1, 0, 1, 300, 32767})},
      {"i8", fromInts(NpyDType::I8, shape, {-128, -1, 0, 1, 42, 127})},
      {"u8", fromInts(NpyDType::U8, shape, {0, 1, 2, 128, 200, 255})},
      {"b1", boolArray(shape, {1, 0, 1, 1, 0, 0})},
  };
}

/// Builds a .npy image by hand: magic, version, header length, header, data.
std::vector<uint8_t> image(int major, const std::string &header,
                           size_t dataBytes = 0, int minor = 0) {
  std::vector<uint8_t> out = bytesOf("\x93NUMPY");
  out.push_back(uint8_t(major));
  out.push_back(uint8_t(minor));
  size_t lengthBytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < lengthBytes; ++i) {
    out.push_back(uint8_t(header.size() >> (8 * i)));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + dataBytes, 0xab);
  return out;
}

std::string parseError(const std::vector<uint8_t> &bytes) {
  NpyArray array;
  std::string error;
  EXPECT_FALSE(parseNpy(bytes.data(), bytes.size(), "bad.npy", array, error));
  return error;
}

class NpyFiles : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/npytest.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir + "'";
    (void)std::system(command.c_str());
  }
  std::string dir;
};

TEST(Npy, RoundTripsEveryDType) {
  for (const auto &[name, array] : sampleArrays()) {
    std::vector<uint8_t> bytes = serializeNpy(array);
    NpyArray back;
    std::string error;
    ASSERT_TRUE(parseNpy(bytes.data(), bytes.size(), name, back, error))
        << error;
    EXPECT_EQ(back.dtype, array.dtype) << name;
    EXPECT_EQ(back.shape, array.shape) << name;
    EXPECT_EQ(back.data, array.data) << name;
  }
}

TEST(Npy, WritesNumPysVersion1Layout) {
  NpyArray array = NpyArray::zeros(NpyDType::F32, {2, 3});
  std::vector<uint8_t> bytes = serializeNpy(array);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[7], 0);
  size_t headerLength = bytes[8] | (bytes[9] << 8);
  EXPECT_EQ((10 + headerLength) % 64, 0u);
  EXPECT_EQ(bytes.size(), 10 + headerLength + 24);
  std::string header(bytes.begin() + 10, bytes.begin() + 10 + headerLength);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2, 3), }",
                         0),
            0u);
  EXPECT_EQ(header.back(), '\n');
}

TEST(Npy, HandlesScalarsOneDimensionAndEmptyArrays) {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{}, {5}, {0}, {3, 0, 2}}) {
    NpyArray array = NpyArray::zeros(NpyDType::I32, shape);
    std::vector<uint8_t> bytes = serializeNpy(array);
    std::string text(bytes.begin(), bytes.end());
    if (shape.size() == 1) {
      EXPECT_NE(text.find("(" + std::to_string(shape[0]) + ",)"),
                std::string::npos);
    }
    NpyArray back;
    std::string error;
    ASSERT_TRUE(parseNpy(bytes.data(), bytes.size(), "x", back, error))
        << error;
    EXPECT_EQ(back.shape, shape);
    EXPECT_EQ(back.data.size(), array.data.size());
  }
}

TEST(Npy, ReadsVersions2And3AndLiteralVariants) {
  // Other quoting, spacing, trailing commas and Python 2's 'L' suffix.
  const char *headers[] = {
      "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 2), }\n",
      "{\"shape\": (2,2), \"descr\": \"<i2\", \"fortran_order\": False}",
      "{'descr':'<i2','fortran_order':False,'shape':(2L, 2L,)}   \n",
  };
  for (int major = 1; major <= 3; ++major) {
    for (const char *header : headers) {
      std::vector<uint8_t> bytes = image(major, header, 8);
      NpyArray array;
      std::string error;
      ASSERT_TRUE(parseNpy(bytes.data(), bytes.size(), "x", array, error))
          << "version " << major << " " << header << ": " << error;
      EXPECT_EQ(array.dtype, NpyDType::I16);
      EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 2}));
      EXPECT_EQ(array.data, std::vector<uint8_t>(8, 0xab));
    }
  }
  // One-byte types have no byte order; '=' is the little-endian host's.
  for (const char *descr : {"<u1", "=u1", ">u1", "|u1"}) {
    std::vector<uint8_t> bytes =
        image(1,
              std::string("{'descr': '") + descr +
                  "', 'fortran_order': False, 'shape': (1,)}",
              1);
    NpyArray array;
    std::string error;
    EXPECT_TRUE(parseNpy(bytes.data(), bytes.size(), "x", array, error))
        << descr << ": " << error;
  }
}

TEST(Npy, RejectsEveryMalformedFileWithItsName) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2,), }";
  auto with = [](const std::string &descr, const std::string &order,
                 const std::string &shape) {
    return "{'descr': " + descr + ", 'fortran_order': " + order +
           ", 'shape': " + shape + "}";
  };
  struct Case {
    const char *what;
    std::vector<uint8_t> bytes;
    const char *message;
  };
  std::vector<uint8_t> truncatedLength = image(2, ok, 8);
  truncatedLength.resize(9);
  std::vector<uint8_t> longHeader = image(1, ok, 8);
  longHeader[8] = 0xff;
  longHeader[9] = 0x7f;
  std::string many = "("; // 65 dimensions of 1
  for (int i = 0; i < 65; ++i) {
    many += "1, ";
  }
  std::vector<Case> cases = {
      {"empty file", {}, "not a .npy file"},
      {"wrong magic", bytesOf("\x93NUMPZ\x01\x00"), "not a .npy file"},
      {"csv", bytesOf("1,2,3\n4,5,6\n"), "not a .npy file"},
      {"npz", bytesOf("PK\x03\x04rest"), "a .npz archive"},
      {"no version", bytesOf("\x93NUMPY\x01"), "truncated header (no version)"},
      {"version 4.0", image(4, ok, 8), "unsupported .npy version 4.0"},
      {"version 0.0", image(0, ok, 8), "unsupported .npy version 0.0"},
      {"version 1.1", image(1, ok, 8, 1), "unsupported .npy version 1.1"},
      {"no header length", truncatedLength, "no header length"},
      {"header past the end", longHeader, "runs past the end"},
      {"not a dict", image(1, "[1, 2]", 8), "not a dict"},
      {"unterminated", image(1, "{'descr': '<f4'", 8), "expected ',' or '}'"},
      {"missing descr", image(1, "{'fortran_order': False, 'shape': (2,)}", 8),
       "no 'descr' key"},
      {"missing order", image(1, "{'descr': '<f4', 'shape': (2,)}", 8),
       "no 'fortran_order' key"},
      {"missing shape", image(1, "{'descr': '<f4', 'fortran_order': False}", 8),
       "no 'shape' key"},
      {"extra key",
       image(1,
             "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "
             "'x': 1}",
             8),
       "unexpected header key 'x'"},
      {"duplicate key",
       image(1,
             "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
             "'shape': (2,)}",
             8),
       "duplicate header key 'descr'"},
      {"unquoted key", image(1, "{descr: '<f4'}", 8), "expected a quoted key"},
      {"text after dict", image(1, ok + " x", 8), "unexpected text"},
      {"fortran order", image(1, with("'<f4'", "True", "(2,)"), 8),
       "fortran_order is True"},
      {"order not bool", image(1, with("'<f4'", "0", "(2,)"), 8),
       "must be True or False"},
      {"big endian", image(1, with("'>f4'", "False", "(2,)"), 8),
       "big-endian dtype '>f4'"},
      {"complex", image(1, with("'<c8'", "False", "(2,)"), 16),
       "unsupported dtype '<c8'"},
      {"uint32", image(1, with("'<u4'", "False", "(2,)"), 8),
       "unsupported dtype '<u4'"},
      {"object", image(1, with("'|O'", "False", "(2,)"), 16),
       "unsupported dtype '|O'"},
      {"structured", image(1, with("[('a', '<f4')]", "False", "(2,)"), 8),
       "structured dtypes"},
      {"descr not a string", image(1, with("4", "False", "(2,)"), 8),
       "quoted dtype string"},
      {"shape a list", image(1, with("'<f4'", "False", "[2]"), 8),
       "must be a tuple"},
      {"shape an int in parens", image(1, with("'<f4'", "False", "(2)"), 8),
       "write (n,)"},
      {"negative dim", image(1, with("'<f4'", "False", "(-2,)"), 8),
       "negative dimension"},
      {"float dim", image(1, with("'<f4'", "False", "(2.5,)"), 8),
       "expected ',' or ')'"},
      {"empty element", image(1, with("'<f4'", "False", "(,)"), 8),
       "non-negative integers"},
      {"dim overflow",
       image(1, with("'<f4'", "False", "(99999999999999999999,)"), 8),
       "dimension too large"},
      {"size overflow",
       image(1, with("'<f4'", "False", "(4294967296, 4294967296)"), 8),
       "is too large"},
      {"too many dims", image(1, with("'<f4'", "False", many + ")"), 4),
       "more than 64 dimensions"},
      {"truncated data", image(1, ok, 7), "truncated data"},
      {"trailing data", image(1, ok, 9), "trailing bytes"},
  };
  for (const Case &c : cases) {
    std::string error = parseError(c.bytes);
    EXPECT_EQ(error.rfind("bad.npy: ", 0), 0u) << c.what << ": " << error;
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.what << ": got \"" << error << "\"";
  }
}

TEST_F(NpyFiles, WritesAndReadsFiles) {
  for (const auto &[name, array] : sampleArrays()) {
    std::string path = dir + "/" + name + ".npy";
    std::string error;
    ASSERT_TRUE(writeNpy(path, array, error)) << error;
    NpyArray back;
    ASSERT_TRUE(readNpy(path, back, error)) << error;
    EXPECT_EQ(back.data, array.data) << name;
  }
}

TEST_F(NpyFiles, ReportsUnreadableFilesByName) {
  NpyArray array;
  std::string error;
  EXPECT_FALSE(readNpy(dir + "/missing.npy", array, error));
  EXPECT_NE(error.find(dir + "/missing.npy: cannot open"), std::string::npos)
      << error;
  EXPECT_FALSE(readNpy(dir, array, error));
  EXPECT_EQ(error.rfind(dir + ": ", 0), 0u) << error;
}

// A failed write leaves no temporary file and whatever was there before.
TEST_F(NpyFiles, WritesAtomically) {
  NpyArray first = NpyArray::zeros(NpyDType::U8, {3});
  NpyArray second = boolArray({2}, {1, 0});
  std::string path = dir + "/out.npy", error;
  ASSERT_TRUE(writeNpy(path, first, error)) << error;
  ASSERT_TRUE(writeNpy(path, second, error)) << error;
  NpyArray back;
  ASSERT_TRUE(readNpy(path, back, error)) << error;
  EXPECT_EQ(back.dtype, NpyDType::Bool);

  ASSERT_EQ(::mkdir((dir + "/taken").c_str(), 0755), 0);
  EXPECT_FALSE(writeNpy(dir + "/taken", first, error));
  EXPECT_NE(error.find(dir + "/taken: cannot write (rename)"),
            std::string::npos)
      << error;
  EXPECT_FALSE(writeNpy(dir + "/no/such/dir/out.npy", first, error));
  EXPECT_NE(error.find("cannot create a temporary file"), std::string::npos)
      << error;
  // Only out.npy and taken/ remain: no temporary file was left behind.
  std::string command = "test $(ls -A '" + dir + "' | wc -l) -eq 2";
  EXPECT_EQ(std::system(command.c_str()), 0);
}

#ifdef TAILOR_TEST_PYTHON
constexpr const char *kPython = TAILOR_TEST_PYTHON;
#else
constexpr const char *kPython = nullptr;
#endif

// Checks the files we wrote (sampleArrays) and writes files for us to read.
constexpr const char *kNumpyScript = R"PY(
import sys
import numpy as np
d = sys.argv[1]
f = [-1.0, 0.5, 2.0, -3.25, 100.0, 7.0]
expected = {
    'f32': np.array(f, '<f4'),
    'f64': np.array([0.1, -1e300, 5e-324, 2, 3, 4], '<f8'),
    'f16': np.array(f, '<f2'),
    'i64': np.array([-2**63, -1, 0, 1, 42, 2**63 - 1], '<i8'),
    'i32': np.array([-2**31, -7, 0, 9, 1000, 2**31 - 1], '<i4'),
    'i16': np.array([-32768, -1, 0, 1, 300, 32767], '<i2'),
    'i8': np.array([-128, -1, 0, 1, 42, 127], 'i1'),
    'u8': np.array([0, 1, 2, 128, 200, 255], 'u1'),
    'b1': np.array([1, 0, 1, 1, 0, 0], bool),
}
for name, want in expected.items():
    got = np.load(f'{d}/{name}.npy')
    want = want.reshape(2, 3)
    assert got.dtype == want.dtype, (name, got.dtype)
    assert got.shape == want.shape, (name, got.shape)
    assert np.array_equal(got, want), (name, got)
np.save(f'{d}/np_scalar.npy', np.float64(3.25))
np.save(f'{d}/np_empty.npy', np.zeros((0, 3), np.int32))
np.save(f'{d}/np_bool.npy', np.array([True, False, True]))
np.save(f'{d}/np_f16.npy', np.array([1.5, -65504, 2**-24], np.float16))
np.save(f'{d}/np_strided.npy', np.arange(12).reshape(3, 4)[:, ::2])
for v in (2, 3):
    with open(f'{d}/np_v{v}.npy', 'wb') as out:
        np.lib.format.write_array(out, np.arange(4, dtype=np.uint8), (v, 0))
np.save(f'{d}/np_fortran.npy', np.asfortranarray(np.ones((2, 3), np.float32)))
)PY";

// Both directions against NumPy itself (skipped without the project's venv).
TEST_F(NpyFiles, AgreesWithNumPy) {
  if (!kPython ||
      std::system((std::string(kPython) + " -c 'import numpy'").c_str()) != 0) {
    GTEST_SKIP() << "no Python with NumPy";
  }
  std::string error;
  for (const auto &[name, array] : sampleArrays()) {
    ASSERT_TRUE(writeNpy(dir + "/" + name + ".npy", array, error)) << error;
  }
  std::ofstream(dir + "/check.py") << kNumpyScript;
  std::string command =
      std::string(kPython) + " '" + dir + "/check.py' '" + dir + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << "NumPy rejected our files";

  auto read = [&](const char *name) {
    NpyArray array;
    EXPECT_TRUE(readNpy(dir + "/" + name, array, error)) << error;
    return array;
  };
  NpyArray scalar = read("np_scalar.npy");
  EXPECT_EQ(scalar.dtype, NpyDType::F64);
  EXPECT_TRUE(scalar.shape.empty());
  double value;
  std::memcpy(&value, scalar.data.data(), 8);
  EXPECT_EQ(value, 3.25);
  NpyArray empty = read("np_empty.npy");
  EXPECT_EQ(empty.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(empty.data.empty());
  EXPECT_EQ(read("np_bool.npy").data, (std::vector<uint8_t>{1, 0, 1}));
  NpyArray half = read("np_f16.npy");
  ASSERT_EQ(half.dtype, NpyDType::F16);
  uint16_t halves[3];
  std::memcpy(halves, half.data.data(), 6);
  EXPECT_EQ(halfToFloat(halves[0]), 1.5f);
  EXPECT_EQ(halfToFloat(halves[1]), -65504.0f);
  EXPECT_EQ(halfToFloat(halves[2]), 0x1p-24f);
  // np.save writes a strided view in C order.
  NpyArray strided = read("np_strided.npy");
  ASSERT_EQ(strided.shape, (std::vector<int64_t>{3, 2}));
  int64_t last;
  std::memcpy(&last, strided.data.data() + 5 * 8, 8);
  EXPECT_EQ(last, 10);
  EXPECT_EQ(read("np_v2.npy").data, (std::vector<uint8_t>{0, 1, 2, 3}));
  EXPECT_EQ(read("np_v3.npy").data, (std::vector<uint8_t>{0, 1, 2, 3}));
  NpyArray fortran;
  EXPECT_FALSE(readNpy(dir + "/np_fortran.npy", fortran, error));
  EXPECT_NE(error.find("fortran_order is True"), std::string::npos) << error;
}

TEST(NpyConvert, ConvertsIntegersWithRangeChecks) {
  NpyArray wide = fromInts(NpyDType::I64, {3}, {-5, 0, 2147483647});
  NpyArray narrow;
  std::string error;
  ASSERT_TRUE(convertNpy(wide, NpyDType::I32, narrow, error)) << error;
  EXPECT_EQ(narrow.data.size(), 12u);
  int32_t values[3];
  std::memcpy(values, narrow.data.data(), 12);
  EXPECT_EQ(values[0], -5);
  EXPECT_EQ(values[2], 2147483647);

  NpyArray big = fromInts(NpyDType::I64, {2}, {1, 2147483648});
  EXPECT_FALSE(convertNpy(big, NpyDType::I32, narrow, error));
  EXPECT_EQ(error, "value 2147483648 at index 1 is out of range for int32");
  NpyArray negative = fromInts(NpyDType::I32, {1}, {-1});
  EXPECT_FALSE(convertNpy(negative, NpyDType::U8, narrow, error));
  EXPECT_EQ(error, "value -1 at index 0 is out of range for uint8");
}

TEST(NpyConvert, ConvertsFloatsKeepingNaNAndInfinity) {
  double inf = std::numeric_limits<double>::infinity();
  NpyArray wide = fromDoubles(NpyDType::F64, {4}, {0.1, -inf, NAN, 3e38});
  NpyArray narrow;
  std::string error;
  ASSERT_TRUE(convertNpy(wide, NpyDType::F32, narrow, error)) << error;
  float values[4];
  std::memcpy(values, narrow.data.data(), 16);
  EXPECT_EQ(values[0], 0.1f);
  EXPECT_TRUE(std::isinf(values[1]) && values[1] < 0);
  EXPECT_TRUE(std::isnan(values[2]));
  EXPECT_EQ(values[3], 3e38f);

  NpyArray huge = fromDoubles(NpyDType::F64, {2}, {1.0, 1e39});
  EXPECT_FALSE(convertNpy(huge, NpyDType::F32, narrow, error));
  EXPECT_EQ(error, "value 1e+39 at index 1 is out of range for float32");
  NpyArray halfMax = fromDoubles(NpyDType::F64, {1}, {65520.0});
  EXPECT_FALSE(convertNpy(halfMax, NpyDType::F16, narrow, error));
}

TEST(NpyConvert, RejectsConversionsAcrossKinds) {
  NpyArray array;
  std::string error;
  EXPECT_FALSE(convertNpy(NpyArray::zeros(NpyDType::F32, {1}), NpyDType::I64,
                          array, error));
  EXPECT_EQ(error, "cannot convert float32 to int64");
  EXPECT_FALSE(convertNpy(boolArray({1}, {1}), NpyDType::I32, array, error));
  EXPECT_EQ(error, "cannot convert bool to int32");
  EXPECT_FALSE(convertNpy(NpyArray::zeros(NpyDType::I8, {1}), NpyDType::Bool,
                          array, error));
}

// Reference points of IEEE binary16, and every half value round-trips.
TEST(NpyConvert, HalfPrecisionRoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.0), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0), 0x7c00);
  EXPECT_EQ(floatToHalf(0x1p-24), 0x0001);       // smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25), 0x0000);       // tie to even (zero)
  EXPECT_EQ(floatToHalf(0x1.8p-24), 0x0002);     // tie to even (two)
  EXPECT_EQ(floatToHalf(0x1.ffcp-15), 0x0400);   // rounds up to the min normal
  EXPECT_EQ(floatToHalf(1.0 + 0x1p-11), 0x3c00); // tie, down to even
  EXPECT_EQ(floatToHalf(1.0 + 3 * 0x1p-11), 0x3c02); // tie, up to even
  EXPECT_EQ(floatToHalf(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
  EXPECT_EQ(floatToHalf(-0.0), 0x8000);
  EXPECT_EQ(floatToHalf(std::numeric_limits<double>::infinity()), 0x7c00);
  EXPECT_EQ(floatToHalf(NAN) & 0x7e00, 0x7e00);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (!nan) {
      ASSERT_EQ(floatToHalf(halfToFloat(uint16_t(h))), h) << std::hex << h;
    }
  }
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0xfbff), -65504.0f);
}

TEST(NpyConvert, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(floatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBFloat16(-3.5f), 0xc060);
  EXPECT_EQ(floatToBFloat16(1.0f + 0x1p-8f), 0x3f80); // tie, down to even
  EXPECT_EQ(floatToBFloat16(1.0f + 0x3p-8f), 0x3f82); // tie, up to even
  EXPECT_EQ(floatToBFloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(floatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBFloat16(NAN) & 0x7fc0, 0x7fc0);
  EXPECT_EQ(bfloat16ToFloat(0xc060), -3.5f);
  EXPECT_TRUE(std::isinf(bfloat16ToFloat(0x7f80)));
}

} // namespace
