//===- CApiGenerate.cpp - the C API's generator and sampling --------------===//
//
// tailor_generator drives a generation plan's `decode` entry (and its
// `prefill` entry for runs of prompt tokens, when the plan has one) through
// a session of its own, made and used through the public session calls (so
// their checks and messages apply), and chooses tokens with
// generate::Sampler. Its logits are copied out of the session after each
// token, so sampling and tailor_generator_logits never read an arena a
// later run overwrote.
//
//===----------------------------------------------------------------------===//

#include "runtime/CApiHandles.h"
#include "runtime/Status.h"
#include "runtime/generate/Sampler.h"

#include <algorithm>

using namespace tailor::runtime;
using tailor::generate::SamplingOptions;

struct tailor_generator {
  tailor_session *session = nullptr; // owned
  tailor_generation_info info{};
  tailor::generate::Sampler sampler{SamplingOptions{}};
  /// Row 0 of the last token's logits; empty before the first token.
  std::vector<float> logits;
  int64_t position = 0;
};

namespace {

LiveHandles &liveGenerators() {
  static LiveHandles *handles = new LiveHandles();
  return *handles;
}

bool isLiveGenerator(const tailor_generator *generator) {
  return generator && liveGenerators().contains(generator);
}

tailor_status badGenerator(const tailor_generator *generator) {
  return fail(TAILOR_ERROR_INVALID_ARGUMENT,
              generator ? "generator is not a live tailor_generator (freed "
                          "already, or not made by tailor_generator_create)"
                        : "generator is null");
}

/// SamplingOptions from the C struct, checked.
tailor_status convertSampling(const tailor_sampling_options *in,
                              SamplingOptions &out) {
  out = SamplingOptions{};
  if (in) {
    out.temperature = in->temperature;
    out.topK = in->top_k;
    out.topP = in->top_p;
    out.seed = in->seed;
  }
  std::string why = tailor::generate::checkSamplingOptions(out);
  return why.empty() ? ok() : fail(TAILOR_ERROR_INVALID_ARGUMENT, why);
}

/// Copies row 0 of output `name` (f32 [batch, 1, vocab]) as the logits
/// after the last token fed.
tailor_status copyLogits(tailor_generator &g, const char *name) {
  const void *data = nullptr;
  tailor_tensor_info info;
  if (tailor_status status = tailor_session_output(g.session, name, &data,
                                                   &info);
      status != TAILOR_OK) {
    g.logits.clear();
    return status;
  }
  if (info.dtype != TAILOR_F32 || info.rank < 1 ||
      info.shape[info.rank - 1] != g.info.vocab_size) {
    g.logits.clear();
    return fail(TAILOR_ERROR_INVALID_PLAN,
                std::string("the plan's ") + name + " are not f32 [..., " +
                    std::to_string(g.info.vocab_size) + "]");
  }
  const float *row = static_cast<const float *>(data);
  g.logits.assign(row, row + g.info.vocab_size);
  return ok();
}

/// Sets the i64 scalar input `name`.
tailor_status setScalar(tailor_generator &g, const char *name, int64_t value) {
  return tailor_session_set_input(g.session, name, TAILOR_I64, nullptr, 0,
                                  &value, sizeof(int64_t));
}

/// Runs decode once for `token` at the generator's position and copies row
/// 0 of the logits.
tailor_status feedOne(tailor_generator &g, int64_t token) {
  std::vector<int64_t> ids(static_cast<size_t>(g.info.batch), token);
  int64_t shape[2] = {g.info.batch, 1};
  tailor_status status =
      tailor_session_set_input(g.session, "input_ids", TAILOR_I64, shape, 2,
                               ids.data(), ids.size() * sizeof(int64_t));
  if (status == TAILOR_OK) {
    status = setScalar(g, "position", g.position);
  }
  if (status == TAILOR_OK) {
    status = tailor_session_run_entry(g.session, "decode");
  }
  if (status != TAILOR_OK) {
    g.logits.clear();
    return status; // the session call left its message
  }
  if ((status = copyLogits(g, "logits")) == TAILOR_OK) {
    ++g.position;
  }
  return status;
}

/// Runs prefill once for `count` tokens (1 <= count <= the chunk) at the
/// generator's position, the chunk padded with id 0 after them, and copies
/// the logits of the last. The padding's keys and values land in cache rows
/// the next tokens overwrite before any query can see them (a query masks
/// the keys after its position), or past the cache, where they are dropped.
tailor_status feedChunk(tailor_generator &g, const int64_t *ids,
                        size_t count) {
  const size_t chunk = static_cast<size_t>(g.info.prefill_chunk);
  std::vector<int64_t> rows(static_cast<size_t>(g.info.batch) * chunk, 0);
  for (size_t b = 0; b < static_cast<size_t>(g.info.batch); ++b) {
    std::copy(ids, ids + count, rows.begin() + b * chunk);
  }
  int64_t shape[2] = {g.info.batch, g.info.prefill_chunk};
  tailor_status status = tailor_session_set_input(
      g.session, "prefill_input_ids", TAILOR_I64, shape, 2, rows.data(),
      rows.size() * sizeof(int64_t));
  if (status == TAILOR_OK) {
    status = setScalar(g, "prefill_position", g.position);
  }
  if (status == TAILOR_OK) {
    status = setScalar(g, "prefill_last", static_cast<int64_t>(count) - 1);
  }
  if (status == TAILOR_OK) {
    status = tailor_session_run_entry(g.session, "prefill");
  }
  if (status != TAILOR_OK) {
    g.logits.clear();
    return status;
  }
  if ((status = copyLogits(g, "prefill_logits")) == TAILOR_OK) {
    g.position += static_cast<int64_t>(count);
  }
  return status;
}

} // namespace

extern "C" {

void tailor_sampling_options_init(tailor_sampling_options *options) {
  if (options) {
    *options = tailor_sampling_options{0.0, 0, 1.0, 0};
  }
}

tailor_status
tailor_sampling_probabilities(const float *logits, int64_t vocab_size,
                              const tailor_sampling_options *options,
                              double *probabilities) {
  return guard(__func__, [&]() -> tailor_status {
    if (!logits || !options || !probabilities) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "logits, options and probabilities must not be null");
    }
    if (vocab_size < 1) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "vocab_size must be at least 1, got " +
                      std::to_string(vocab_size));
    }
    SamplingOptions converted;
    if (tailor_status status = convertSampling(options, converted);
        status != TAILOR_OK) {
      return status;
    }
    std::vector<double> warped;
    tailor::generate::warpedProbabilities(logits, vocab_size, converted,
                                          warped);
    std::copy(warped.begin(), warped.end(), probabilities);
    return ok();
  });
}

tailor_status tailor_generator_create(
    const tailor_plan *plan, const tailor_session_options *session_options,
    const tailor_sampling_options *sampling, tailor_generator **generator) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(plan)) {
      return badPlan(plan);
    }
    if (!generator) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "generator is null");
    }
    *generator = nullptr;
    SamplingOptions converted;
    tailor_status status = convertSampling(sampling, converted);
    if (status != TAILOR_OK) {
      return status;
    }
    auto created = std::make_unique<tailor_generator>();
    if ((status = tailor_plan_generation_info(plan, &created->info)) !=
            TAILOR_OK ||
        (status = tailor_session_create(plan, session_options,
                                        &created->session)) != TAILOR_OK) {
      return status;
    }
    created->sampler = tailor::generate::Sampler(converted);
    *generator = created.release();
    liveGenerators().add(*generator);
    return ok();
  });
}

void tailor_generator_free(tailor_generator *generator) {
  guardValue(__func__, 0, [&] {
    if (generator && !liveGenerators().remove(generator)) {
      badGenerator(generator);
      return 0;
    }
    if (generator) {
      tailor_session_free(generator->session);
      delete generator;
    }
    return 0;
  });
}

tailor_status tailor_generator_apply_adapter(tailor_generator *generator,
                                             const char *dir) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLiveGenerator(generator)) {
      return badGenerator(generator);
    }
    if (generator->position != 0) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "an adapter must be applied before the first token (the "
                  "cache holds " +
                      std::to_string(generator->position) +
                      "); call tailor_generator_reset first");
    }
    return tailor_session_apply_adapter(generator->session, dir);
  });
}

tailor_status
tailor_generator_set_sampling(tailor_generator *generator,
                              const tailor_sampling_options *sampling) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLiveGenerator(generator)) {
      return badGenerator(generator);
    }
    if (!sampling) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "sampling is null");
    }
    SamplingOptions converted;
    if (tailor_status status = convertSampling(sampling, converted);
        status != TAILOR_OK) {
      return status;
    }
    generator->sampler = tailor::generate::Sampler(converted);
    return ok();
  });
}

tailor_status tailor_generator_prefill(tailor_generator *generator,
                                       const int64_t *ids, size_t count) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLiveGenerator(generator)) {
      return badGenerator(generator);
    }
    if (!ids && count) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "ids is null");
    }
    tailor_generator &g = *generator;
    for (size_t i = 0; i < count; ++i) {
      if (ids[i] < 0 || ids[i] >= g.info.vocab_size) {
        return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                    "token id " + std::to_string(ids[i]) + " (index " +
                        std::to_string(i) + ") is outside the vocabulary [0, " +
                        std::to_string(g.info.vocab_size) + ")");
      }
    }
    if (count > static_cast<size_t>(g.info.max_seq_len - g.position)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::to_string(count) +
                      " more tokens do not fit: the "
                      "cache holds " +
                      std::to_string(g.position) + " of " +
                      std::to_string(g.info.max_seq_len) +
                      " (compile with a larger --max-seq-len)");
    }
    // Two tokens or more go through prefill when the plan has it, a chunk
    // at a time; one token is a decode step.
    const size_t chunk = static_cast<size_t>(g.info.prefill_chunk);
    if (chunk > 1 && count > 1) {
      for (size_t i = 0; i < count; i += chunk) {
        size_t n = std::min(chunk, count - i);
        if (tailor_status status = feedChunk(g, ids + i, n);
            status != TAILOR_OK) {
          return status;
        }
      }
      return ok();
    }
    for (size_t i = 0; i < count; ++i) {
      if (tailor_status status = feedOne(g, ids[i]); status != TAILOR_OK) {
        return status;
      }
    }
    return ok();
  });
}

tailor_status tailor_generator_decode(tailor_generator *generator,
                                      int64_t token) {
  return tailor_generator_prefill(generator, &token, 1);
}

tailor_status tailor_generator_sample(tailor_generator *generator,
                                      int64_t *token) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLiveGenerator(generator)) {
      return badGenerator(generator);
    }
    if (!token) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "token is null");
    }
    if (generator->logits.empty()) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "no logits to sample: feed a token first "
                  "(tailor_generator_prefill)");
    }
    *token = generator->sampler.next(generator->logits.data(),
                                     generator->info.vocab_size);
    return ok();
  });
}

tailor_status tailor_generator_logits(const tailor_generator *generator,
                                      const float **logits,
                                      int64_t *vocab_size) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLiveGenerator(generator)) {
      return badGenerator(generator);
    }
    if (!logits) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "logits is null");
    }
    if (generator->logits.empty()) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "no logits yet: feed a token first "
                  "(tailor_generator_prefill)");
    }
    *logits = generator->logits.data();
    if (vocab_size) {
      *vocab_size = generator->info.vocab_size;
    }
    return ok();
  });
}

tailor_status tailor_generator_position(const tailor_generator *generator,
                                        int *position) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLiveGenerator(generator)) {
      return badGenerator(generator);
    }
    if (!position) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "position is null");
    }
    *position = static_cast<int>(generator->position);
    return ok();
  });
}

tailor_status tailor_generator_reset(tailor_generator *generator) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLiveGenerator(generator)) {
      return badGenerator(generator);
    }
    // Keys past a token's position are masked, so stale cache rows are
    // never read: resetting is forgetting the position.
    generator->position = 0;
    generator->logits.clear();
    return ok();
  });
}

int tailor_generator_is_eos(const tailor_generator *generator, int64_t token) {
  return guardValue(__func__, 0, [&] {
    if (!isLiveGenerator(generator)) {
      badGenerator(generator);
      return 0;
    }
    const tailor_generation_info &info = generator->info;
    return std::find(info.eos_token_ids, info.eos_token_ids + info.eos_count,
                     token) != info.eos_token_ids + info.eos_count
               ? 1
               : 0;
  });
}

} // extern "C"
