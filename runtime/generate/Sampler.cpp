//===- Sampler.cpp - greedy choice and Hugging Face logits warpers --------===//
//
// The warpers follow transformers' code (generation/logits_process.py) step
// by step, in double precision: TemperatureLogitsWarper divides,
// TopKLogitsWarper removes every logit below the k-th largest (ties at the
// k-th stay), TopPLogitsWarper sorts ascending, removes the tokens whose
// cumulative probability is <= 1 - top_p and keeps the largest always.
// Removed logits are -inf, so the final softmax gives them exactly 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/generate/Sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tailor::generate {

std::string checkSamplingOptions(const SamplingOptions &options) {
  if (!std::isfinite(options.temperature) || options.temperature < 0) {
    return "temperature must be a finite number >= 0 (0: greedy), got " +
           std::to_string(options.temperature);
  }
  if (!(options.topP > 0 && options.topP <= 1)) {
    return "top_p must be in (0, 1], got " + std::to_string(options.topP);
  }
  if (options.topK < 0) {
    return "top_k must be >= 0 (0: off), got " + std::to_string(options.topK);
  }
  return "";
}

int64_t argmax(const float *logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t v = 1; v < vocab; ++v) {
    if (logits[v] > logits[best] || std::isnan(logits[best])) {
      best = v;
    }
  }
  return best;
}

namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

/// TopKLogitsWarper: -inf below the k-th largest score.
void applyTopK(std::vector<double> &scores, int64_t topK) {
  int64_t vocab = static_cast<int64_t>(scores.size());
  if (topK <= 0 || topK >= vocab) {
    return;
  }
  std::vector<double> sorted = scores;
  std::nth_element(sorted.begin(), sorted.begin() + (topK - 1), sorted.end(),
                   std::greater<double>());
  double kth = sorted[static_cast<size_t>(topK - 1)];
  for (double &score : scores) {
    if (score < kth) {
      score = kMinusInf;
    }
  }
}

/// Softmax of `scores` into `out` (-inf scores give 0).
void softmax(const std::vector<double> &scores, std::vector<double> &out) {
  double largest = *std::max_element(scores.begin(), scores.end());
  out.resize(scores.size());
  double sum = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    out[i] = scores[i] == kMinusInf ? 0.0 : std::exp(scores[i] - largest);
    sum += out[i];
  }
  for (double &p : out) {
    p /= sum;
  }
}

/// TopPLogitsWarper: ascending order, cumulative probability, -inf where it
/// is at most 1 - top_p, the largest score kept whatever happens.
void applyTopP(std::vector<double> &scores, double topP) {
  if (topP >= 1.0) {
    return;
  }
  std::vector<double> probs;
  softmax(scores, probs);
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return scores[static_cast<size_t>(a)] < scores[static_cast<size_t>(b)];
  });
  double cumulative = 0;
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    size_t index = static_cast<size_t>(order[i]);
    cumulative += probs[index];
    if (cumulative <= 1.0 - topP) {
      scores[index] = kMinusInf;
    }
  }
}

} // namespace

void warpedProbabilities(const float *logits, int64_t vocab,
                         const SamplingOptions &options,
                         std::vector<double> &probabilities) {
  probabilities.assign(static_cast<size_t>(vocab), 0.0);
  if (vocab <= 0) {
    return;
  }
  if (options.temperature == 0.0) {
    probabilities[static_cast<size_t>(argmax(logits, vocab))] = 1.0;
    return;
  }
  std::vector<double> scores(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v) {
    scores[static_cast<size_t>(v)] =
        static_cast<double>(logits[v]) / options.temperature;
  }
  applyTopK(scores, options.topK);
  applyTopP(scores, options.topP);
  softmax(scores, probabilities);
}

Sampler::Sampler(const SamplingOptions &options)
    : opts(options), engine(options.seed) {}

void Sampler::reseed(uint64_t seed) {
  opts.seed = seed;
  engine.seed(seed);
}

int64_t Sampler::next(const float *logits, int64_t vocab) {
  if (opts.temperature == 0.0) {
    return argmax(logits, vocab);
  }
  warpedProbabilities(logits, vocab, opts, probabilities);
  // 53 random bits as a double in [0, 1): the same on every standard
  // library (std::uniform_real_distribution's algorithm is not fixed).
  double u = static_cast<double>(engine() >> 11) * 0x1.0p-53;
  double cumulative = 0;
  int64_t last = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    double p = probabilities[static_cast<size_t>(v)];
    if (p <= 0) {
      continue;
    }
    cumulative += p;
    last = v;
    if (u < cumulative) {
      return v;
    }
  }
  // Rounding left the sum a hair below u: the last token with mass.
  return last;
}

} // namespace tailor::generate
