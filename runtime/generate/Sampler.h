//===- Sampler.h - the next token: greedy or sampled -----------*- C++ -*-===//
//
// Turns a row of logits into the next token id, as transformers' generate
// does: greedy (the first index of the largest logit, torch.argmax's
// choice) or sampling from the distribution its logits warpers leave, in
// their order -- TemperatureLogitsWarper, TopKLogitsWarper,
// TopPLogitsWarper -- then a multinomial draw from a seeded generator. No
// LLVM: the C API (tailor_generator_*, tailor_sampling_probabilities) and
// `tailor generate` share it.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_GENERATE_SAMPLER_H
#define TAILOR_RUNTIME_GENERATE_SAMPLER_H

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tailor::generate {

/// How the next token is chosen. temperature 0 is greedy; otherwise the
/// logits are divided by it, then top-k (0: off) and top-p (1: off) filter
/// them, and a token is drawn with the generator seeded by `seed`.
struct SamplingOptions {
  double temperature = 0.0;
  int64_t topK = 0;
  double topP = 1.0;
  uint64_t seed = 0;
};

/// "" when `options` are valid, else why not (a negative temperature, top_p
/// outside (0, 1], a negative top_k, or a non-finite value).
std::string checkSamplingOptions(const SamplingOptions &options);

/// The first index of the largest of `logits[0, vocab)` (NaN never wins).
int64_t argmax(const float *logits, int64_t vocab);

/// The probabilities sampling draws from: softmax of the logits warped as
/// transformers does (temperature, then top-k keeping every logit equal to
/// the k-th largest, then top-p removing the smallest tokens whose
/// cumulative probability is at most 1 - top_p, always keeping the largest
/// one). Filtered tokens get exactly 0. Greedy options (temperature 0) give
/// a one-hot vector at argmax. `options` must pass checkSamplingOptions.
void warpedProbabilities(const float *logits, int64_t vocab,
                         const SamplingOptions &options,
                         std::vector<double> &probabilities);

/// Chooses tokens from rows of logits. Sampling draws one uniform number in
/// [0, 1) per token from a mt19937_64 seeded with options.seed, so a seed
/// gives the same tokens on every machine.
class Sampler {
public:
  explicit Sampler(const SamplingOptions &options);

  /// The next token for `logits[0, vocab)`.
  int64_t next(const float *logits, int64_t vocab);

  /// Restarts the random sequence at `seed`.
  void reseed(uint64_t seed);

  const SamplingOptions &options() const { return opts; }

private:
  SamplingOptions opts;
  std::mt19937_64 engine;
  std::vector<double> probabilities;
};

} // namespace tailor::generate

#endif // TAILOR_RUNTIME_GENERATE_SAMPLER_H
