//===- QuantTestUtil.h - helpers shared by the quantization tests -*- C++ -*-===//

#ifndef TAILOR_TEST_RUNTIME_QUANT_QUANTTESTUTIL_H
#define TAILOR_TEST_RUNTIME_QUANT_QUANTTESTUTIL_H

#include "runtime/quant/Gptq.h"
#include "runtime/quant/QuantizedWeight.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tailor::quant::test_util {

/// `n` seeded draws from N(0, stddev^2): weights shaped like a layer's.
inline std::vector<float> normalWeights(int64_t n, float stddev,
                                        unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> w(n);
  for (float &x : w) {
    x = dist(gen);
  }
  return w;
}

/// GPTQ options that agree with `spec` (bits, group size, act order).
inline GptqOptions optionsFor(const QuantSpec &spec) {
  GptqOptions options;
  options.bits = spec.bits;
  options.groupSize = spec.groupSize;
  options.actOrder = spec.actOrder;
  return options;
}

/// `spec`'s storage for a random [rows, cols] weight: quantized from normal
/// values, or for gptq packed from random codes, scales, zeros and groups.
inline std::vector<uint8_t> randomStorage(const QuantSpec &spec,
                                          unsigned seed) {
  std::vector<uint8_t> storage(storageBytes(spec));
  const int64_t rows = spec.rows, cols = spec.cols;
  if (spec.scheme != Scheme::GPTQ) {
    std::vector<float> values = normalWeights(rows * cols, 0.05f, seed);
    EXPECT_EQ(quantizeInto(spec, values.data(), false, storage.data()), "");
    return storage;
  }
  std::mt19937 gen(seed);
  const int64_t groups = spec.groups();
  const int levels = 1 << spec.bits;
  std::vector<uint8_t> codes(rows * cols);
  std::vector<float> scales(groups * rows);
  std::vector<int32_t> zeros(groups * rows), gIdx(cols);
  for (uint8_t &c : codes) {
    c = static_cast<uint8_t>(gen() % levels);
  }
  for (float &s : scales) {
    s = 0.001f + 0.02f * static_cast<float>(gen() % 1000) / 1000.0f;
  }
  for (int32_t &z : zeros) {
    z = 1 + static_cast<int32_t>(gen() % levels);
  }
  for (int64_t c = 0; c < cols; ++c) {
    gIdx[c] = static_cast<int32_t>(
        spec.actOrder ? gen() % groups
                      : (spec.groupSize == -1 ? 0 : c / spec.groupSize));
  }
  EXPECT_EQ(packGptq(spec, codes.data(), scales.data(), zeros.data(),
                     gIdx.data(), storage.data()),
            "");
  return storage;
}

} // namespace tailor::quant::test_util

#endif // TAILOR_TEST_RUNTIME_QUANT_QUANTTESTUTIL_H
