//===- SamplerTest.cpp - greedy choice and the logits warpers -------------===//
//
// generate::warpedProbabilities against distributions computed here by hand
// (softmax of logits / T, top-k and top-p sets worked out on small
// vectors), the options' refusals, seeded draws that repeat, and a
// chi-square test of many draws against the warped probabilities.
//
//===----------------------------------------------------------------------===//

#include "runtime/generate/Sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace tailor::generate;

namespace {

constexpr double kTolerance = 1e-12;

std::vector<double> softmaxOf(const std::vector<double> &x) {
  double largest = x[0];
  for (double v : x) {
    largest = std::max(largest, v);
  }
  std::vector<double> out;
  double sum = 0;
  for (double v : x) {
    out.push_back(std::exp(v - largest));
    sum += out.back();
  }
  for (double &v : out) {
    v /= sum;
  }
  return out;
}

SamplingOptions sampling(double temperature, int64_t topK = 0,
                         double topP = 1.0, uint64_t seed = 0) {
  SamplingOptions options;
  options.temperature = temperature;
  options.topK = topK;
  options.topP = topP;
  options.seed = seed;
  return options;
}

void expectNear(const std::vector<double> &got,
                const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], kTolerance) << "index " << i;
  }
}

} // namespace

TEST(SamplerTest, GreedyIsTheFirstLargestLogit) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(argmax(logits.data(), 4), 1);
  std::vector<double> probs;
  warpedProbabilities(logits.data(), 4, sampling(0.0), probs);
  expectNear(probs, {0, 1, 0, 0});
  Sampler sampler(sampling(0.0, 0, 1.0, 9));
  EXPECT_EQ(sampler.next(logits.data(), 4), 1);
}

TEST(SamplerTest, TemperatureDividesTheLogits) {
  std::vector<float> logits = {1.0f, 2.0f, 0.25f, -3.0f};
  std::vector<double> probs;
  warpedProbabilities(logits.data(), 4, sampling(0.7), probs);
  expectNear(probs, softmaxOf({1.0 / 0.7, 2.0 / 0.7, 0.25 / 0.7, -3.0 / 0.7}));
}

TEST(SamplerTest, TopKKeepsTheKLargestAndTiesAtTheKth) {
  std::vector<float> logits = {1.0f, 4.0f, 3.0f, 0.0f, 3.0f};
  std::vector<double> probs;
  warpedProbabilities(logits.data(), 5, sampling(1.0, 2), probs);
  // Both 3.0s tie with the 2nd largest: transformers keeps scores >= it.
  std::vector<double> kept = softmaxOf({4.0, 3.0, 3.0});
  expectNear(probs, {0, kept[0], kept[1], 0, kept[2]});
  // k above the vocabulary keeps everything.
  warpedProbabilities(logits.data(), 5, sampling(1.0, 50), probs);
  expectNear(probs, softmaxOf({1, 4, 3, 0, 3}));
}

TEST(SamplerTest, TopPRemovesTheTailWhoseMassIsAtMostOneMinusP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: ascending cumulative 0.05, 0.2,
  // 0.5, 1. With p = 0.8, tokens whose cumulative is <= 0.2 go.
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                               std::log(0.05f)};
  std::vector<double> probs;
  warpedProbabilities(logits.data(), 4, sampling(1.0, 0, 0.8), probs);
  // (0.5 / 0.8 and 0.3 / 0.8, from the float logits themselves.)
  std::vector<double> kept = softmaxOf({logits[0], logits[1]});
  expectNear(probs, {kept[0], kept[1], 0, 0});
  // A tiny p keeps the largest token alone.
  warpedProbabilities(logits.data(), 4, sampling(1.0, 0, 1e-6), probs);
  expectNear(probs, {1, 0, 0, 0});
}

TEST(SamplerTest, TopKRunsBeforeTopP) {
  // Top-k 3 renormalises 0.4, 0.3, 0.2 (of 0.4, 0.3, 0.2, 0.1) to 4/9,
  // 3/9, 2/9; then top-p 0.7 removes 2/9 (cumulative 2/9 <= 0.3), leaving
  // 4/7 and 3/7.
  std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f),
                               std::log(0.1f)};
  std::vector<double> probs;
  warpedProbabilities(logits.data(), 4, sampling(1.0, 3, 0.7), probs);
  std::vector<double> kept = softmaxOf({logits[0], logits[1]});
  expectNear(probs, {kept[0], kept[1], 0, 0});
}

TEST(SamplerTest, RefusesOptionsOutOfRange) {
  EXPECT_EQ(checkSamplingOptions(sampling(0.0)), "");
  EXPECT_EQ(checkSamplingOptions(sampling(1.0, 5, 0.9)), "");
  EXPECT_NE(checkSamplingOptions(sampling(-0.5)).find("temperature"),
            std::string::npos);
  EXPECT_NE(checkSamplingOptions(sampling(NAN)).find("temperature"),
            std::string::npos);
  EXPECT_NE(checkSamplingOptions(sampling(1.0, -1)).find("top_k"),
            std::string::npos);
  EXPECT_NE(checkSamplingOptions(sampling(1.0, 0, 0.0)).find("top_p"),
            std::string::npos);
  EXPECT_NE(checkSamplingOptions(sampling(1.0, 0, 1.5)).find("top_p"),
            std::string::npos);
}

TEST(SamplerTest, ASeedRepeatsItsDraws) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = std::sin(float(i) * 1.3f);
  }
  auto draw = [&](uint64_t seed) {
    Sampler sampler(sampling(1.0, 0, 1.0, seed));
    std::vector<int64_t> ids;
    for (int i = 0; i < 40; ++i) {
      ids.push_back(sampler.next(logits.data(), 50));
    }
    return ids;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
  Sampler sampler(sampling(1.0, 0, 1.0, 7));
  std::vector<int64_t> first = draw(7);
  sampler.next(logits.data(), 50);
  sampler.reseed(7);
  EXPECT_EQ(sampler.next(logits.data(), 50), first[0]);
}

TEST(SamplerTest, DrawsFollowTheWarpedProbabilities) {
  // Eight tokens, top-k 6 and top-p 0.95 leave a handful with mass; 40000
  // draws against them. Pearson's statistic over the kept tokens (df <= 5)
  // stays under 20.5 (p = 0.001) for a correct sampler; filtered tokens
  // must never be drawn.
  std::vector<float> logits = {0.1f, 1.2f,  -0.4f, 0.8f,
                               2.0f, -2.0f, 0.0f,  1.5f};
  SamplingOptions options = sampling(0.9, 6, 0.95, 1234);
  std::vector<double> probs;
  warpedProbabilities(logits.data(), 8, options, probs);
  Sampler sampler(options);
  const int draws = 40000;
  std::vector<int> counts(8, 0);
  for (int i = 0; i < draws; ++i) {
    ++counts[static_cast<size_t>(sampler.next(logits.data(), 8))];
  }
  double chiSquare = 0;
  int kept = 0;
  for (size_t v = 0; v < 8; ++v) {
    if (probs[v] == 0) {
      EXPECT_EQ(counts[v], 0) << "filtered token " << v << " was drawn";
      continue;
    }
    ++kept;
    double expected = probs[v] * draws;
    chiSquare += (counts[v] - expected) * (counts[v] - expected) / expected;
  }
  EXPECT_GE(kept, 4);
  EXPECT_LT(chiSquare, 20.5) << "draws do not follow the probabilities";
}
