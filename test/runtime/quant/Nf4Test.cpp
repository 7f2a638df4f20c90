//===- Nf4Test.cpp - NF4 quantization: codes, packing, scales, storage ----===//
//
// The bit-exact comparison with bitsandbytes is test/e2e/nf4_bitsandbytes.py;
// these check the properties that hold whatever the reference: nearest
// codes, nibble order, partial and zero blocks, error bounds, the storage
// formula, determinism, and PyTorch's summation order for the offset.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Nf4.h"
#include "test/runtime/quant/QuantTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace tailor::quant;

namespace {

using tailor::quant::test_util::normalWeights;

std::vector<float> dequantize(const Nf4Quantized &q) {
  std::vector<float> out(q.numel);
  dequantizeNf4(q, out.data());
  return out;
}

uint8_t codeAt(const Nf4Quantized &q, int64_t i) {
  return (i % 2 == 0) ? q.packed[i / 2] >> 4 : q.packed[i / 2] & 0x0f;
}

/// The largest distance between neighbouring NF4 codes (0.7229... to 1).
float maxNf4Gap() {
  float gap = 0.0f;
  for (int i = 0; i < 15; ++i) {
    gap = std::max(gap, kNf4Codebook[i + 1] - kNf4Codebook[i]);
  }
  return gap;
}

bool sameBits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

} // namespace

// Tests that the codebooks are bitsandbytes' (values taken from
// bitsandbytes 0.50.2's get_4bit_type('nf4') and create_dynamic_map()).
TEST(Nf4Test, Codebooks) {
  EXPECT_EQ(kNf4Codebook[0], -1.0f);
  EXPECT_EQ(kNf4Codebook[7], 0.0f);
  EXPECT_EQ(kNf4Codebook[15], 1.0f);
  EXPECT_EQ(kNf4Codebook[8], 0x1.45f5fep-4f); // 0.07958029955625534
  EXPECT_TRUE(std::is_sorted(kNf4Codebook.begin(), kNf4Codebook.end()));

  const std::array<float, 256> &map = dynamicMap8Bit();
  EXPECT_TRUE(std::adjacent_find(map.begin(), map.end(),
                                 [](float a, float b) { return !(a < b); }) ==
              map.end())
      << "the dynamic map must be strictly ascending";
  EXPECT_EQ(map[0], -0x1.fc6666p-1f); // -0.99296875 (no -1)
  EXPECT_EQ(map[1], -0x1.f53334p-1f);
  EXPECT_EQ(map[126], -0x1.27476ep-21f);
  EXPECT_EQ(map[127], 0.0f);
  EXPECT_EQ(map[128], 0x1.27476ep-21f);
  EXPECT_EQ(map[129], 0x1.b43528p-19f);
  EXPECT_EQ(map[254], 0x1.fc6666p-1f);
  EXPECT_EQ(map[255], 1.0f);
}

// Tests that element 2j is the high nibble, that a value on a midpoint takes
// the lower code and that anything past it takes the upper.
TEST(Nf4Test, PackingOrderAndTies) {
  std::vector<float> w(64, 0.0f);
  w[0] = 1.0f;  // absmax 1: the scaled values are the weights
  w[1] = -1.0f; // code 0
  w[2] = 0.0f;  // code 7
  w[3] = kNf4Codebook[13];
  const float mid = (kNf4Codebook[10] + kNf4Codebook[11]) / 2.0f;
  w[4] = mid;
  w[5] = std::nextafter(mid, 2.0f);
  Nf4Quantized q = quantizeNf4(w.data(), 64, 64, /*doubleQuant=*/false);
  ASSERT_EQ(q.packed.size(), 32u);
  EXPECT_EQ(q.packed[0], 0xF0);
  EXPECT_EQ(q.packed[1], 0x7D);
  EXPECT_EQ(q.packed[2], 0xAB);
  EXPECT_EQ(q.packed[3], 0x77);
  ASSERT_EQ(q.absmax.size(), 1u);
  EXPECT_EQ(q.absmax[0], 1.0f);
  std::vector<float> out = dequantize(q);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -1.0f);
  EXPECT_EQ(out[3], kNf4Codebook[13]);
  EXPECT_EQ(out[4], kNf4Codebook[10]);
  EXPECT_EQ(out[5], kNf4Codebook[11]);
}

// Tests a partial last block (its own absmax over 5 elements) and an odd
// element count (the last low nibble is the pad, code 7).
TEST(Nf4Test, PartialLastBlock) {
  std::vector<float> w = normalWeights(69, 1.0f, 1);
  const float tail[5] = {0.5f, -0.25f, 0.0f, 0.125f, 0.5f};
  std::copy(tail, tail + 5, w.begin() + 64);
  Nf4Quantized q = quantizeNf4(w.data(), 69, 64, /*doubleQuant=*/false);
  ASSERT_EQ(q.numBlocks(), 2);
  ASSERT_EQ(q.packed.size(), 35u);
  EXPECT_EQ(q.absmax[1], 0.5f);
  // Scaled: 1, -0.5, 0, 0.25, 1 -> codes 15, 2, 7, 10, 15, then the pad.
  EXPECT_EQ(q.packed[32], 0xF2);
  EXPECT_EQ(q.packed[33], 0x7A);
  EXPECT_EQ(q.packed[34], 0xF7);
  std::vector<float> out = dequantize(q);
  EXPECT_EQ(out[64], 0.5f);
  EXPECT_EQ(out[65], kNf4Codebook[2] * 0.5f);
  EXPECT_EQ(out[67], kNf4Codebook[10] * 0.5f);
}

// Tests that all-zero blocks dequantize to exact zeros with and without
// double quantization, and that an all-zero partial block stores absmax
// 1e-38 as bitsandbytes does (a full one stores 0).
TEST(Nf4Test, ZeroBlocks) {
  std::vector<float> w(128 + 64 + 10, 0.0f);
  std::vector<float> middle = normalWeights(64, 0.02f, 2);
  std::copy(middle.begin(), middle.end(), w.begin() + 128);
  Nf4Quantized plain = quantizeNf4(w.data(), w.size(), 64, false);
  ASSERT_EQ(plain.absmax.size(), 4u);
  EXPECT_EQ(plain.absmax[0], 0.0f);
  EXPECT_EQ(plain.absmax[1], 0.0f);
  EXPECT_EQ(plain.absmax[3], 1e-38f);
  for (int64_t i = 0; i < 128; ++i) {
    EXPECT_EQ(codeAt(plain, i), 7) << "element " << i;
  }
  for (bool doubleQuant : {false, true}) {
    Nf4Quantized q = quantizeNf4(w.data(), w.size(), 64, doubleQuant);
    std::vector<float> out = dequantize(q);
    for (int64_t i : {0, 127, 192, 201}) {
      EXPECT_EQ(out[i], 0.0f) << "element " << i << " double " << doubleQuant;
    }
  }
  // An all-zero tensor of whole blocks: offset 0, nested scale 0, codes 0,
  // scales +0. (With a partial block, its 1e-38 would make them tiny.)
  std::vector<float> zeros(1024, 0.0f);
  Nf4Quantized q = quantizeNf4(zeros.data(), zeros.size());
  EXPECT_EQ(q.offset, 0.0f);
  EXPECT_EQ(q.nestedAbsmax[0], 0.0f);
  for (float x : dequantize(q)) {
    ASSERT_TRUE(sameBits(x, 0.0f));
  }
}

// Tests that every element takes the nearest code of its scaled value.
TEST(Nf4Test, NearestCode) {
  const int64_t n = 64 * 50 + 13;
  std::vector<float> w = normalWeights(n, 0.02f, 3);
  Nf4Quantized q = quantizeNf4(w.data(), n, 64, /*doubleQuant=*/false);
  for (int64_t i = 0; i < n; ++i) {
    const float absmax = q.absmax[i / 64];
    const float s = std::clamp(w[i] / absmax, -1.0f, 1.0f);
    const float chosen = std::fabs(s - kNf4Codebook[codeAt(q, i)]);
    for (float c : kNf4Codebook) {
      // 1e-6: the kernel scales by a rounded reciprocal, not by division.
      ASSERT_LE(chosen, std::fabs(s - c) + 1e-6f) << "element " << i;
    }
  }
}

// Tests the round-trip error: within half the widest code gap times the
// block scale per element (plus the scale's own error with double
// quantization), and a Gaussian's RMS relative error near NF4's ~0.1.
TEST(Nf4Test, RoundTripErrorBounds) {
  const int64_t n = 4096 * 64 + 100;
  std::vector<float> w = normalWeights(n, 0.02f, 4);
  w[12345] = 0.9f; // an outlier widens only its own block
  const float halfGap = 0.5f * maxNf4Gap();
  for (bool doubleQuant : {false, true}) {
    Nf4Quantized q = quantizeNf4(w.data(), n, 64, doubleQuant);
    ASSERT_EQ(checkNf4Quantized(q), "");
    std::vector<float> out = dequantize(q);
    std::vector<float> scales = nf4BlockScales(q);
    Nf4Quantized plain = quantizeNf4(w.data(), n, 64, false);
    double err2 = 0, ref2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t b = i / 64;
      const float absmax = plain.absmax[b];
      float bound = halfGap * absmax * (1 + 1e-6f);
      if (doubleQuant) {
        // The 8-bit map's widest gap is 0.0140625 and the table lookup adds
        // at most 2/65535 of the nested scale.
        const float nested = q.nestedAbsmax[b / 256];
        const float scaleErr = std::fabs(scales[b] - absmax);
        ASSERT_LE(scaleErr, (0.0140625f / 2 + 2.0f / 65535) * nested * 1.01f)
            << "block " << b;
        bound += scaleErr;
      }
      ASSERT_LE(std::fabs(out[i] - w[i]), bound) << "element " << i;
      err2 += double(out[i] - w[i]) * (out[i] - w[i]);
      ref2 += double(w[i]) * w[i];
    }
    const double rms = std::sqrt(err2 / ref2);
    EXPECT_GT(rms, 0.05) << "suspiciously exact";
    EXPECT_LT(rms, 0.12) << "double " << doubleQuant;
  }
}

// Tests the byte count, e.g. a 7B-shaped 4096 x 4096 projection costs
// 4 + 8/64 + 32/(64*256) bits per weight plus the 4-byte offset.
TEST(Nf4Test, StorageBytes) {
  const int64_t n = 4096 * 4096;
  const double bits = 4 + 8.0 / 64 + 32.0 / (64 * 256);
  EXPECT_EQ(nf4StorageBytes(n, true), uint64_t(n * bits / 8) + 4);
  EXPECT_EQ(nf4StorageBytes(n, true), 8654852u);
  EXPECT_EQ(nf4StorageBytes(n, false), uint64_t(n / 2 + 4 * (n / 64)));
  // Odd count, partial blocks: 35 packed + 2 scales.
  EXPECT_EQ(nf4StorageBytes(69, false), 35u + 8u);
  EXPECT_EQ(nf4StorageBytes(69, true), 35u + 2u + 4u + 4u);
  EXPECT_EQ(nf4StorageBytes(64 * 257, true, 64, 256), 32u * 257 + 257 + 8 + 4);
  // The formula agrees with what quantizeNf4 produces.
  std::vector<float> w = normalWeights(64 * 300 + 7, 1.0f, 5);
  Nf4Quantized q = quantizeNf4(w.data(), w.size());
  EXPECT_EQ(nf4StorageBytes(w.size(), true), q.packed.size() +
                                                 q.absmaxCodes.size() +
                                                 4 * q.nestedAbsmax.size() + 4);
}

// Tests that quantization is a pure function of its input, and that the
// thread count PyTorch would sum with cannot matter below 32768 blocks.
TEST(Nf4Test, Deterministic) {
  std::vector<float> w = normalWeights(64 * 1000 + 3, 0.02f, 6);
  Nf4Quantized a = quantizeNf4(w.data(), w.size());
  Nf4Quantized b = quantizeNf4(w.data(), w.size(), 64, true, 256, {8, 7});
  EXPECT_EQ(a.packed, b.packed);
  EXPECT_EQ(a.absmaxCodes, b.absmaxCodes);
  EXPECT_EQ(a.nestedAbsmax, b.nestedAbsmax);
  EXPECT_TRUE(sameBits(a.offset, b.offset));
  EXPECT_EQ(dequantize(a), dequantize(b));
}

// Tests the offset's summation order against torch.mean on 100003 floats,
// whose float32 result differs with the thread count (the lanes-8 values
// are torch 2.15's own on x86-64; lanes 16 from the same algorithm).
TEST(Nf4Test, TorchMeanOrder) {
  const int64_t n = 100003;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
    x[i] = static_cast<float>(h) * 0x1p-32f *
           (1.0f + static_cast<float>(i % 7) * 100.0f);
  }
  EXPECT_EQ(torchFloatMean(x.data(), n, {8, 1}), 0x1.2cfac2p+7f);
  EXPECT_EQ(torchFloatMean(x.data(), n, {8, 2}), 0x1.2cfacp+7f);
  EXPECT_EQ(torchFloatMean(x.data(), n, {8, 3}), 0x1.2cfac2p+7f);
  EXPECT_EQ(torchFloatMean(x.data(), n, {16, 3}), 0x1.2cfacp+7f);
  // Short inputs take the scalar path.
  const float three[3] = {1.0f, 2.0f, 4.0f};
  EXPECT_EQ(torchFloatMean(three, 3, {}), 7.0f / 3.0f);
}

// Tests that bad parameters and inconsistent tensors are named.
TEST(Nf4Test, Checks) {
  EXPECT_EQ(checkNf4Params(10, 64, 256), "");
  EXPECT_NE(checkNf4Params(0, 64, 256).find("at least one element"),
            std::string::npos);
  EXPECT_NE(checkNf4Params(10, 48, 256).find("block size must be one of"),
            std::string::npos);
  EXPECT_NE(checkNf4Params(10, 64, 0).find("nested block size"),
            std::string::npos);
  std::vector<float> w = normalWeights(200, 1.0f, 7);
  Nf4Quantized q = quantizeNf4(w.data(), w.size());
  EXPECT_EQ(checkNf4Quantized(q), "");
  q.absmaxCodes.pop_back();
  EXPECT_EQ(checkNf4Quantized(q), "nf4 absmax codes has 3 entries, expected 4");
}
