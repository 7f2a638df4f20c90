//===- WireTest.cpp - ZeRO++'s int4 wire chunks and the formats by name ---===//
//
// runtime/quant/WireInt4.h against its written layout (two codes a byte,
// low nibble first, then the f32 scales) on values whose codes are known
// exactly, and against its error bound on random values: every decoded
// value within half a step (scale / 2, scale = absmax / 7) of the value,
// each block's absmax to 1e-6 relative, an all-zero block exactly zero;
// accumulation adds exactly what decoding gives. Wire.h's names and sizes
// against the two formats' own.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace tailor::quant;

namespace {

/// The signed code in nibble `high` (0 low, 1 high) of `byte`, decoded
/// here rather than through WireInt4.cpp.
int nibble(uint8_t byte, int high) {
  int bits = (byte >> (4 * high)) & 0xF;
  return bits >= 8 ? bits - 16 : bits;
}

TEST(WireInt4Test, LaysOutNibblesLowFirstThenScales) {
  // Two blocks: block 0 holds (i mod 15 - 7) / 2 (absmax 3.5, scale 0.5,
  // codes exactly i mod 15 - 7); block 1 is zero (scale 0, codes 0).
  const int64_t n = 128;
  std::vector<float> x(n, 0.0f);
  for (int64_t i = 0; i < 64; ++i) {
    x[i] = static_cast<float>(i % 15 - 7) / 2;
  }
  ASSERT_EQ(int4WireBytes(n), 72);
  std::vector<uint8_t> wire(int4WireBytes(n), 0xAA);
  encodeWireInt4(x.data(), n, wire.data());
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(nibble(wire[i / 2], i % 2), i % 15 - 7) << "element " << i;
  }
  for (int64_t j = 32; j < 64; ++j) {
    EXPECT_EQ(wire[j], 0) << "byte " << j;
  }
  float scales[2];
  std::memcpy(scales, wire.data() + 64, sizeof(scales));
  EXPECT_EQ(scales[0], 0.5f);
  EXPECT_EQ(scales[1], 0.0f);
  std::vector<float> y(n, -1.0f);
  decodeWireInt4(wire.data(), n, y.data());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(y[i], x[i]) << "element " << i;
  }
}

TEST(WireInt4Test, DecodesWithinHalfAStepAndAccumulatesTheDecoded) {
  const int64_t n = 64 * 5;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-3, 3);
  std::vector<float> x(n);
  for (float &v : x) {
    v = uniform(rng);
  }
  for (int64_t i = 128; i < 192; ++i) {
    x[i] = 0; // block 2: zeros
  }
  x[300] = -40; // block 4: one outlier sets the step
  std::vector<uint8_t> wire(int4WireBytes(n));
  encodeWireInt4(x.data(), n, wire.data());
  std::vector<float> y(n);
  decodeWireInt4(wire.data(), n, y.data());
  for (int64_t b = 0; b < n / 64; ++b) {
    double absmax = 0;
    for (int64_t i = b * 64; i < b * 64 + 64; ++i) {
      absmax = std::max(absmax, std::fabs(double(x[i])));
    }
    double step = absmax / kWireInt4Max;
    for (int64_t i = b * 64; i < b * 64 + 64; ++i) {
      EXPECT_LE(std::fabs(double(y[i]) - x[i]), step / 2 * (1 + 1e-6))
          << "element " << i;
      if (std::fabs(double(x[i])) == absmax && absmax > 0) {
        EXPECT_NEAR(std::fabs(double(y[i])), absmax, absmax * 1e-6);
      }
    }
  }
  for (int64_t i = 128; i < 192; ++i) {
    EXPECT_EQ(y[i], 0.0f);
  }
  std::vector<float> sums(n);
  for (int64_t i = 0; i < n; ++i) {
    sums[i] = static_cast<float>(i) * 0.25f;
  }
  accumulateWireInt4(wire.data(), n, sums.data());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(sums[i], static_cast<float>(i) * 0.25f + y[i]) << i;
  }
}

TEST(WireFormatTest, NamesAndSizesEachFormat) {
  EXPECT_EQ(wireFormatNamed("int8"), WireFormat::Int8);
  EXPECT_EQ(wireFormatNamed("int4"), WireFormat::Int4);
  EXPECT_EQ(wireFormatNamed("int2"), std::nullopt);
  EXPECT_EQ(wireFormatNamed(""), std::nullopt);
  EXPECT_STREQ(wireFormatName(WireFormat::Int4), "int4");
  EXPECT_STREQ(wireFormatName(WireFormat::Int8), "int8");
  // Per block of 64: int8 64 codes + 4, int4 32 codes + 4.
  EXPECT_EQ(wireBytes(WireFormat::Int8, 64), 68);
  EXPECT_EQ(wireBytes(WireFormat::Int4, 64), 36);
  EXPECT_EQ(wireBytes(WireFormat::Int4, 832), int4WireBytes(832));
  EXPECT_EQ(wireBytes(WireFormat::Int8, 832), int8WireBytes(832));
  // The codec dispatches to each format's own.
  std::vector<float> x(64);
  for (int64_t i = 0; i < 64; ++i) {
    x[i] = std::sin(static_cast<float>(i));
  }
  std::vector<uint8_t> mine(36), theirs(36);
  encodeWire(WireFormat::Int4, x.data(), 64, mine.data());
  encodeWireInt4(x.data(), 64, theirs.data());
  EXPECT_EQ(mine, theirs);
}

} // namespace
