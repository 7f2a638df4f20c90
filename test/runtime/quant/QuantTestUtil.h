//===- QuantTestUtil.h - helpers shared by the quantization tests -*- C++ -*-===//

#ifndef TAILOR_TEST_RUNTIME_QUANT_QUANTTESTUTIL_H
#define TAILOR_TEST_RUNTIME_QUANT_QUANTTESTUTIL_H

#include "runtime/quant/Gptq.h"

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

} // namespace tailor::quant::test_util

#endif // TAILOR_TEST_RUNTIME_QUANT_QUANTTESTUTIL_H
