//===- QuantizedWeightTest.cpp - storage, quantization and tiles per scheme ===//
//
// nf4 is checked bit for bit against Nf4.h (itself checked against
// bitsandbytes by test/e2e/nf4_bitsandbytes.py): the stored sections and
// the dequantized floats. Every scheme's tiles at odd offsets must equal
// slices of the whole dequantization; int8 against its formula, error
// bound and outlier rule; bf16/fp16 against bit patterns PyTorch 2.x
// writes (`.to(torch.bfloat16)`, `.half()` on the CPU).
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/QuantizedWeight.h"
#include "test/runtime/quant/QuantTestUtil.h"

#include "runtime/quant/Gptq.h"
#include "runtime/quant/Half.h"
#include "runtime/quant/Nf4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace tailor::quant;

namespace {

using tailor::quant::test_util::normalWeights;

QuantSpec specOf(Scheme scheme, int64_t rows, int64_t cols) {
  QuantSpec spec;
  spec.scheme = scheme;
  spec.rows = rows;
  spec.cols = cols;
  return spec;
}

std::vector<uint8_t> quantize(const QuantSpec &spec, const float *w,
                              bool transposed = false) {
  EXPECT_EQ(checkSpec(spec), "");
  std::vector<uint8_t> storage(storageBytes(spec), 0xcd);
  EXPECT_EQ(quantizeInto(spec, w, transposed, storage.data()), "");
  return storage;
}

std::vector<float> dequantizeAll(const QuantSpec &spec,
                                 const std::vector<uint8_t> &storage) {
  std::vector<float> out(spec.rows * spec.cols);
  dequantizeTile(spec, storage.data(), 0, spec.rows, 0, spec.cols, out.data(),
                 spec.cols);
  return out;
}

bool sameBits(const float *a, const float *b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

std::vector<float> transposed(const std::vector<float> &w, int64_t rows,
                              int64_t cols) {
  std::vector<float> t(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      t[c * rows + r] = w[r * cols + c];
    }
  }
  return t;
}

/// gptq storage of random codes, scales, zeros and (act-order) groups.
std::vector<uint8_t> randomGptq(const QuantSpec &spec, unsigned seed) {
  std::mt19937 gen(seed);
  const int64_t groups = spec.groups();
  std::vector<uint8_t> codes(spec.rows * spec.cols);
  std::vector<float> scales(groups * spec.rows);
  std::vector<int32_t> zeros(groups * spec.rows), gIdx(spec.cols);
  const int levels = 1 << spec.bits;
  for (uint8_t &c : codes) {
    c = static_cast<uint8_t>(gen() % levels);
  }
  for (float &s : scales) {
    s = 0.001f + 0.01f * static_cast<float>(gen() % 1000) / 1000.0f;
  }
  for (int32_t &z : zeros) {
    z = 1 + static_cast<int32_t>(gen() % levels);
  }
  for (int64_t c = 0; c < spec.cols; ++c) {
    gIdx[c] = static_cast<int32_t>(spec.actOrder ? gen() % groups
                                                 : c / spec.groupSize);
  }
  std::vector<uint8_t> storage(storageBytes(spec));
  EXPECT_EQ(packGptq(spec, codes.data(), scales.data(), zeros.data(),
                     gIdx.data(), storage.data()),
            "");
  return storage;
}

} // namespace

// Tests that scheme names round-trip and unknown names are refused.
TEST(QuantizedWeightTest, SchemeNamesRoundTrip) {
  for (Scheme s : {Scheme::NF4, Scheme::Int8, Scheme::GPTQ, Scheme::BF16,
                   Scheme::FP16}) {
    Scheme parsed = Scheme::NF4;
    ASSERT_TRUE(parseScheme(schemeName(s), parsed)) << schemeName(s);
    EXPECT_EQ(parsed, s);
  }
  Scheme parsed;
  EXPECT_FALSE(parseScheme("int4", parsed));
  EXPECT_FALSE(parseScheme("NF4", parsed));
  EXPECT_STREQ(schemeName(Scheme::Int8), "int8");
}

// Tests the gptq group count, including the partial last group and -1.
TEST(QuantizedWeightTest, GroupsCountsPartialGroups) {
  QuantSpec spec = specOf(Scheme::GPTQ, 64, 300);
  spec.groupSize = 128;
  EXPECT_EQ(spec.groups(), 3);
  spec.groupSize = -1;
  EXPECT_EQ(spec.groups(), 1);
  spec.groupSize = 300;
  EXPECT_EQ(spec.groups(), 1);
}

// Tests each scheme's byte count against its layout's formula.
TEST(QuantizedWeightTest, StorageBytesFollowTheLayouts) {
  const uint64_t n = 4096 * 4096;
  QuantSpec nf4 = specOf(Scheme::NF4, 4096, 4096);
  EXPECT_EQ(storageBytes(nf4),
            n / 2 + n / 64 + 4 * ((n / 64 + 255) / 256) + 4);
  nf4.doubleQuant = false;
  EXPECT_EQ(storageBytes(nf4), n / 2 + 4 * (n / 64));
  // 7 x 9 = 63 elements: 32 packed bytes, one partial block.
  QuantSpec odd = specOf(Scheme::NF4, 7, 9);
  EXPECT_EQ(storageBytes(odd), 32u + 1 + 4 + 4);
  odd.doubleQuant = false;
  EXPECT_EQ(storageBytes(odd), 32u + 4);

  QuantSpec int8 = specOf(Scheme::Int8, 300, 500);
  EXPECT_EQ(storageBytes(int8), 4u * 300 + 300 * 500);
  int8.outlierThreshold = 6.0f;
  int8.outlierColumns = 7;
  EXPECT_EQ(storageBytes(int8), 4u * 300 + 300 * 500 + 4 * 7 + 2 * 300 * 7);

  EXPECT_EQ(storageBytes(specOf(Scheme::BF16, 3, 5)), 30u);
  EXPECT_EQ(storageBytes(specOf(Scheme::FP16, 3, 5)), 30u);

  // 4 bits, groups of 128 over 256 columns: qweight [32, 64] i32, qzeros
  // [2, 8] i32, scales [2, 64] f16, g_idx [256] i32.
  QuantSpec gptq = specOf(Scheme::GPTQ, 64, 256);
  EXPECT_EQ(storageBytes(gptq), 32u * 64 * 4 + 2 * 8 * 4 + 2 * 64 * 2 + 256 * 4);
  EXPECT_EQ(storageBytes(gptq), gptqStorageBytes(gptq));
}

// Tests that checkSpec names what is wrong for every scheme.
TEST(QuantizedWeightTest, CheckSpecExplainsWhatIsWrong) {
  EXPECT_EQ(checkSpec(specOf(Scheme::NF4, 64, 64)), "");
  EXPECT_EQ(checkSpec(specOf(Scheme::BF16, 1, 1)), "");
  EXPECT_EQ(checkSpec(specOf(Scheme::NF4, 0, 64)),
            "quantized weight needs rows and cols >= 1, got [0, 64]");
  EXPECT_NE(checkSpec(specOf(Scheme::FP16, int64_t(1) << 32, 2))
                .find("too large"),
            std::string::npos);

  QuantSpec nf4 = specOf(Scheme::NF4, 64, 64);
  nf4.blockSize = 48;
  EXPECT_NE(checkSpec(nf4).find("nf4 block size must be one of 32, 64"),
            std::string::npos)
      << checkSpec(nf4);

  QuantSpec int8 = specOf(Scheme::Int8, 8, 16);
  int8.outlierThreshold = -1.0f;
  EXPECT_EQ(checkSpec(int8),
            "int8 outlier threshold must be finite and >= 0, got -1");
  int8.outlierThreshold = 6.0f;
  EXPECT_EQ(checkSpec(int8),
            "int8 outlier threshold 6 needs outlier columns >= 1 to keep "
            "outliers in");
  int8.outlierColumns = 17;
  EXPECT_EQ(checkSpec(int8), "int8 outlier columns must be in [0, 16] (the "
                             "weight's cols), got 17");
  int8.outlierColumns = 2;
  EXPECT_EQ(checkSpec(int8), "");
  int8.outlierThreshold = 0.0f;
  EXPECT_EQ(checkSpec(int8),
            "int8 outlier columns (2) need an outlier threshold > 0");

  QuantSpec gptq = specOf(Scheme::GPTQ, 64, 256);
  EXPECT_EQ(checkSpec(gptq), "");
  gptq.bits = 5;
  EXPECT_EQ(checkSpec(gptq), checkGptqSpec(gptq));
  EXPECT_NE(checkSpec(gptq), "");
}

// Tests that quantizeInto refuses gptq (which needs calibration) and specs
// that fail checkSpec, writing nothing.
TEST(QuantizedWeightTest, QuantizeIntoRefusesGptqAndBadSpecs) {
  std::vector<float> w(64 * 256, 0.5f);
  std::vector<uint8_t> storage(1 << 20, 0xab);
  EXPECT_EQ(quantizeInto(specOf(Scheme::GPTQ, 64, 256), w.data(), false,
                         storage.data()),
            "gptq weights need calibration: run `tailor quantize`");
  QuantSpec bad = specOf(Scheme::NF4, 64, 256);
  bad.blockSize = 3;
  EXPECT_NE(quantizeInto(bad, w.data(), false, storage.data()), "");
  for (uint8_t b : storage) {
    ASSERT_EQ(b, 0xab);
  }
}

// Tests that nf4 storage holds exactly quantizeNf4's sections and
// dequantizes to exactly dequantizeNf4's floats, with and without double
// quantization, from a row-major or a transposed source, with partial
// blocks and several nested blocks.
TEST(QuantizedWeightTest, Nf4MatchesNf4hBitForBit) {
  struct Case {
    int64_t rows, cols;
    int blockSize, nested;
  };
  for (Case c : {Case{64, 64, 64, 256}, Case{7, 9, 64, 256},
                 Case{33, 130, 64, 3}, Case{5, 3, 32, 2},
                 Case{40, 200, 128, 5}}) {
    for (bool doubleQuant : {true, false}) {
      for (bool trans : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << c.rows << "x" << c.cols << " block " << c.blockSize
                     << " dq " << doubleQuant << " transposed " << trans);
        QuantSpec spec = specOf(Scheme::NF4, c.rows, c.cols);
        spec.blockSize = c.blockSize;
        spec.nestedBlockSize = c.nested;
        spec.doubleQuant = doubleQuant;
        const int64_t n = c.rows * c.cols;
        std::vector<float> w = normalWeights(n, 0.02f, 11);
        std::vector<uint8_t> storage =
            trans ? quantize(spec, transposed(w, c.rows, c.cols).data(), true)
                  : quantize(spec, w.data());

        Nf4Quantized q =
            quantizeNf4(w.data(), n, c.blockSize, doubleQuant, c.nested);
        std::vector<uint8_t> expected;
        auto append = [&](const void *p, size_t bytes) {
          const uint8_t *b = static_cast<const uint8_t *>(p);
          expected.insert(expected.end(), b, b + bytes);
        };
        if (doubleQuant) {
          append(&q.offset, 4);
          append(q.nestedAbsmax.data(), 4 * q.nestedAbsmax.size());
          append(q.absmaxCodes.data(), q.absmaxCodes.size());
        } else {
          append(q.absmax.data(), 4 * q.absmax.size());
        }
        append(q.packed.data(), q.packed.size());
        EXPECT_EQ(storage, expected);

        std::vector<float> want(n);
        dequantizeNf4(q, want.data());
        std::vector<float> got = dequantizeAll(spec, storage);
        EXPECT_TRUE(sameBits(got.data(), want.data(), n));
      }
    }
  }
}

// Tests that tiles at odd offsets and with a wider row stride equal the
// slices of the whole dequantization, and leave the stride's padding
// alone, for every scheme.
TEST(QuantizedWeightTest, TilesEqualSlicesOfTheWholeWeight) {
  const int64_t rows = 64, cols = 96;
  std::vector<float> w = normalWeights(rows * cols, 0.05f, 5);
  w[3 * cols + 17] = 3.0f; // an int8 outlier column
  std::vector<std::pair<QuantSpec, std::vector<uint8_t>>> cases;
  QuantSpec nf4 = specOf(Scheme::NF4, rows, cols);
  nf4.nestedBlockSize = 7;
  cases.push_back({nf4, quantize(nf4, w.data())});
  nf4.doubleQuant = false;
  nf4.blockSize = 32;
  cases.push_back({nf4, quantize(nf4, w.data())});
  QuantSpec int8 = specOf(Scheme::Int8, rows, cols);
  int8.outlierThreshold = 1.0f;
  int8.outlierColumns = 2;
  cases.push_back({int8, quantize(int8, w.data())});
  cases.push_back({specOf(Scheme::BF16, rows, cols),
                   quantize(specOf(Scheme::BF16, rows, cols), w.data())});
  cases.push_back({specOf(Scheme::FP16, rows, cols),
                   quantize(specOf(Scheme::FP16, rows, cols), w.data())});
  QuantSpec gptq = specOf(Scheme::GPTQ, rows, cols);
  gptq.groupSize = 32;
  cases.push_back({gptq, randomGptq(gptq, 3)});
  gptq.bits = 3;
  gptq.actOrder = true;
  cases.push_back({gptq, randomGptq(gptq, 4)});

  std::mt19937 gen(9);
  for (const auto &[spec, storage] : cases) {
    SCOPED_TRACE(schemeName(spec.scheme));
    const std::vector<float> whole = dequantizeAll(spec, storage);
    for (int trial = 0; trial < 40; ++trial) {
      int64_t r0 = gen() % rows, r1 = r0 + 1 + gen() % (rows - r0);
      int64_t c0 = gen() % cols, c1 = c0 + 1 + gen() % (cols - c0);
      const int64_t ld = c1 - c0 + 3;
      std::vector<float> tile((r1 - r0) * ld, -7.0f);
      dequantizeTile(spec, storage.data(), r0, r1, c0, c1, tile.data(), ld);
      for (int64_t r = r0; r < r1; ++r) {
        ASSERT_TRUE(sameBits(&tile[(r - r0) * ld], &whole[r * cols + c0],
                             c1 - c0))
            << "row " << r << " of tile [" << r0 << ":" << r1 << ", " << c0
            << ":" << c1 << "]";
        for (int64_t p = c1 - c0; p < ld; ++p) {
          ASSERT_EQ(tile[(r - r0) * ld + p], -7.0f);
        }
      }
    }
  }
}

// Tests int8's codes on values that pin down its rounding (ties to even)
// and its dequantization formula, (q * scale) * float(1 / 127).
TEST(QuantizedWeightTest, Int8RoundsLikeBitsandbytes) {
  // Row 0: absmax 127, so the multiplier is exactly 1 and the codes are
  // the values rounded: 62.5 -> 62 and -2.5 -> -2 (ties to even).
  // Row 1: all zeros: scale 0, codes 0. Row 2: absmax 0.5.
  std::vector<float> w = {127.0f, 62.5f, -2.5f, 3.5f,  //
                          0.0f,   0.0f,  0.0f,  0.0f,  //
                          0.5f,   -0.25f, 0.1f, 0.0f};
  QuantSpec spec = specOf(Scheme::Int8, 3, 4);
  std::vector<uint8_t> storage = quantize(spec, w.data());
  float scales[3];
  std::memcpy(scales, storage.data(), sizeof(scales));
  EXPECT_EQ(scales[0], 127.0f);
  EXPECT_EQ(scales[1], 0.0f);
  EXPECT_EQ(scales[2], 0.5f);
  const int8_t *q = reinterpret_cast<const int8_t *>(storage.data() + 12);
  std::vector<int> codes(q, q + 12);
  EXPECT_EQ(codes, (std::vector<int>{127, 62, -2, 4, 0, 0, 0, 0, 127, -64, 25,
                                     0}));
  std::vector<float> got = dequantizeAll(spec, storage);
  const float c127 = static_cast<float>(7.874015718698502e-3);
  for (int64_t i = 0; i < 12; ++i) {
    const float product = static_cast<float>(codes[i]) * scales[i / 4];
    EXPECT_EQ(got[i], product * c127) << i;
  }
}

// Tests that int8's row multiplier is bitsandbytes' `127.0 / row_stats` as
// torch evaluates it, (1 / absmax) * 127 with two roundings, not the
// correctly rounded 127 / absmax. For absmax 3 the two are 0x1.52aaacp+5
// and 0x1.52aaaap+5; each value below is the float nearest (n + 1/2) * 3 /
// 127, whose scaled value lands on n + 1/2 (then rounds to even) with one
// multiplier and just past it with the other. The codes are the ones
// bitsandbytes 0.50's int8_vectorwise_quant writes for this row.
TEST(QuantizedWeightTest, Int8MultiplierIsReciprocalTimes127) {
  std::vector<float> w = {3.0f, 0x1.83060ep-7f, 0x1.224488p-5f,
                          0x1.e3c790p-5f, 0x1.52a54ap-4f, -0x1.224488p-5f};
  QuantSpec spec = specOf(Scheme::Int8, 1, 6);
  std::vector<uint8_t> storage = quantize(spec, w.data());
  const int8_t *q = reinterpret_cast<const int8_t *>(storage.data() + 4);
  EXPECT_EQ(std::vector<int>(q, q + 6),
            (std::vector<int>{127, 1, 2, 3, 4, -2}));
  // The correctly rounded multiplier would give 0, 1, 2, 3 (-1).
  const float rounded = 127.0f / 3.0f;
  EXPECT_NE(rounded, (1.0f / 3.0f) * 127.0f);
  EXPECT_EQ(std::nearbyint(w[1] * rounded), 0.0f);
}

// Tests int8's error bound, half a step of the row's scale, from a
// transposed source too.
TEST(QuantizedWeightTest, Int8ErrorIsHalfAStep) {
  const int64_t rows = 37, cols = 53;
  std::vector<float> w = normalWeights(rows * cols, 1.0f, 2);
  QuantSpec spec = specOf(Scheme::Int8, rows, cols);
  std::vector<uint8_t> storage = quantize(spec, w.data());
  EXPECT_EQ(quantize(spec, transposed(w, rows, cols).data(), true), storage);
  std::vector<float> got = dequantizeAll(spec, storage);
  for (int64_t r = 0; r < rows; ++r) {
    float absmax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      absmax = std::max(absmax, std::fabs(w[r * cols + c]));
    }
    for (int64_t c = 0; c < cols; ++c) {
      EXPECT_LE(std::fabs(got[r * cols + c] - w[r * cols + c]),
                absmax / 127.0f * 0.5f * 1.0001f)
          << r << ", " << c;
    }
  }
}

// Tests the outlier rule: the k columns of largest absmax above the
// threshold are kept exactly in fp16, ascending, with codes 0 and no say
// in the row scale; further outliers are quantized like any column.
TEST(QuantizedWeightTest, Int8KeepsTheLargestOutlierColumnsInFp16) {
  const int64_t rows = 6, cols = 12;
  std::vector<float> w = normalWeights(rows * cols, 0.1f, 8);
  w[2 * cols + 9] = -50.0f; // columns 9, 3, 7 exceed 10, in that order
  w[4 * cols + 3] = 30.0f;
  w[0 * cols + 7] = 12.3456f;
  QuantSpec spec = specOf(Scheme::Int8, rows, cols);
  spec.outlierThreshold = 10.0f;
  spec.outlierColumns = 2;
  std::vector<uint8_t> storage = quantize(spec, w.data());
  const uint8_t *codes = storage.data() + 4 * rows;
  int32_t columns[2];
  std::memcpy(columns, codes + rows * cols, sizeof(columns));
  EXPECT_EQ(columns[0], 3);
  EXPECT_EQ(columns[1], 9);
  std::vector<float> got = dequantizeAll(spec, storage);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c : {3, 9}) {
      EXPECT_EQ(codes[r * cols + c], 0);
      const float fp16 = fp16ToFloat(floatToFp16(w[r * cols + c]));
      EXPECT_EQ(got[r * cols + c], fp16) << r << ", " << c;
    }
    float scale;
    std::memcpy(&scale, storage.data() + 4 * r, 4);
    float absmax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      if (c != 3 && c != 9) {
        absmax = std::max(absmax, std::fabs(w[r * cols + c]));
      }
    }
    EXPECT_EQ(scale, absmax) << r;
  }
  // Column 7 was not kept: row 0's scale is its 12.3456, code 127.
  EXPECT_EQ(static_cast<int8_t>(codes[7]), 127);

  // Slots beyond the outliers found hold -1 and zero values.
  spec.outlierColumns = 5;
  storage = quantize(spec, w.data());
  int32_t five[5];
  std::memcpy(five, storage.data() + 4 * rows + rows * cols, sizeof(five));
  EXPECT_EQ(std::vector<int32_t>(five, five + 5),
            (std::vector<int32_t>{3, 7, 9, -1, -1}));
}

// Tests bf16 rounding against the bits PyTorch writes: ties to even, NaN
// as 0xffff, overflow to inf, subnormals; widening is exact.
TEST(QuantizedWeightTest, Bf16MatchesTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    float value;
    uint16_t bits;
  };
  for (Case c : {Case{1.0f, 0x3f80}, Case{1.0f + 0x1p-8f, 0x3f80},
                 Case{1.0f + 3 * 0x1p-8f, 0x3f82},
                 Case{1.0f + 0x1p-8f + 0x1p-20f, 0x3f81},
                 Case{65504.0f, 0x4780}, Case{1e-8f, 0x322c},
                 Case{0x1p-24f, 0x3380}, Case{3.0e38f, 0x7f62},
                 Case{std::numeric_limits<float>::max(), 0x7f80},
                 Case{inf, 0x7f80}, Case{-inf, 0xff80}, Case{nan, 0xffff},
                 Case{-nan, 0xffff}, Case{-0.0f, 0x8000},
                 Case{1e-40f, 0x0001}}) {
    EXPECT_EQ(floatToBf16(c.value), c.bits) << c.value;
  }
  EXPECT_EQ(bf16ToFloat(0x3f81), 1.0078125f);
  EXPECT_EQ(bf16ToFloat(0xff80), -inf);
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float value = bf16ToFloat(static_cast<uint16_t>(bits));
    if (!std::isnan(value)) {
      ASSERT_EQ(floatToBf16(value), bits);
    }
  }
}

// Tests fp16 rounding against the bits PyTorch writes: ties to even in
// normal and subnormal range (and across into the normal range), overflow
// from 65520, NaN payloads; widening is exact, subnormals included.
TEST(QuantizedWeightTest, Fp16MatchesTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  float payloadNan;
  const uint32_t payloadBits = 0xff812345;
  std::memcpy(&payloadNan, &payloadBits, 4);
  struct Case {
    float value;
    uint16_t bits;
  };
  for (Case c : {Case{1.0f, 0x3c00}, Case{1.0f + 0x1p-8f, 0x3c04},
                 Case{1.0f + 3 * 0x1p-8f, 0x3c0c},
                 Case{1.0f + 0x1p-11f, 0x3c00},
                 Case{1.0f + 3 * 0x1p-11f, 0x3c02}, Case{65504.0f, 0x7bff},
                 Case{65519.99f, 0x7bff}, Case{65520.0f, 0x7c00},
                 Case{inf, 0x7c00}, Case{3.0e38f, 0x7c00},
                 Case{-inf, 0xfc00}, Case{1e-8f, 0x0000},
                 Case{0x1p-24f, 0x0001}, Case{0x1p-25f, 0x0000},
                 Case{3 * 0x1p-26f, 0x0001}, Case{1.5f * 0x1p-24f, 0x0002},
                 Case{2.5f * 0x1p-24f, 0x0002},
                 Case{0x1p-14f - 0x1p-25f, 0x0400}, Case{0x1p-14f, 0x0400},
                 Case{-0.0f, 0x8000}, Case{nan, 0x7e00}, Case{-nan, 0xfe00},
                 Case{payloadNan, 0xfe09}}) {
    EXPECT_EQ(floatToFp16(c.value), c.bits) << c.value;
  }
  EXPECT_EQ(fp16ToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16ToFloat(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(fp16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(fp16ToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16ToFloat(0xfc00), -inf);
  EXPECT_TRUE(std::isnan(fp16ToFloat(0x7e00)));
  EXPECT_TRUE(std::signbit(fp16ToFloat(0x8000)));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const bool quietOrNumber = (h & 0x7c00) != 0x7c00 || (h & 0x0200) ||
                               (h & 0x03ff) == 0;
    if (quietOrNumber) {
      ASSERT_EQ(floatToFp16(fp16ToFloat(h)), h) << std::hex << bits;
    }
  }
}

// Tests that bf16/fp16 storage is the row-major conversion, whichever way
// the source is laid out.
TEST(QuantizedWeightTest, HalfStorageIsRowMajor) {
  const int64_t rows = 5, cols = 3;
  std::vector<float> w = normalWeights(rows * cols, 1.0f, 4);
  for (Scheme scheme : {Scheme::BF16, Scheme::FP16}) {
    QuantSpec spec = specOf(scheme, rows, cols);
    std::vector<uint8_t> storage = quantize(spec, w.data());
    EXPECT_EQ(quantize(spec, transposed(w, rows, cols).data(), true), storage);
    for (int64_t i = 0; i < rows * cols; ++i) {
      uint16_t bits;
      std::memcpy(&bits, storage.data() + 2 * i, 2);
      EXPECT_EQ(bits, scheme == Scheme::BF16 ? floatToBf16(w[i])
                                             : floatToFp16(w[i]));
    }
  }
}

// Tests the kernel's tiling: output tiles of at most 512 and contraction
// chunks of at most 256, multiples of 16 cut about evenly, and one tile of
// workspace per worker that can get a task.
TEST(QuantizedWeightTest, LinearTilingAndWorkspace) {
  auto spec = [](int64_t rows, int64_t cols) {
    return specOf(Scheme::NF4, rows, cols);
  };
  struct Case {
    QuantSpec spec;
    bool transpose;
    int64_t out, depth, tasks;
  };
  for (Case c : {Case{spec(4096, 4096), false, 512, 256, 8},
                 Case{spec(4096, 11008), false, 512, 256, 8},
                 Case{spec(4096, 11008), true, 512, 256, 22},
                 Case{spec(768, 1000), false, 384, 256, 2},
                 Case{spec(768, 1000), true, 512, 256, 2},
                 Case{spec(1056, 288), false, 352, 144, 3},
                 Case{spec(160, 1312), true, 448, 160, 3},
                 Case{spec(5, 7), false, 5, 7, 1},
                 Case{spec(5, 7), true, 7, 5, 1}}) {
    SCOPED_TRACE(::testing::Message() << "[" << c.spec.rows << ", "
                                      << c.spec.cols << "] transpose "
                                      << c.transpose);
    const LinearTiling t = linearTiling(c.spec, c.transpose);
    EXPECT_EQ(c.transpose ? t.tileCols : t.tileRows, c.out);
    EXPECT_EQ(c.transpose ? t.tileRows : t.tileCols, c.depth);
    EXPECT_EQ(t.tasks, c.tasks);
    for (int64_t workers : {1, 2, 3, 1000000}) {
      EXPECT_EQ(linearWorkspaceFloats(c.spec, c.transpose, workers),
                std::min(workers, t.tasks) * t.tileRows * t.tileCols);
    }
  }
}
