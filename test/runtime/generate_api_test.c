/*===- generate_api_test.c - the generator and tokenizer calls, from C ---===*
 *
 * Usage: generate_api_test G.tplan G1.tplan FORWARD.tplan TOKENIZER.json
 *            EXPECTED
 *
 * G.tplan is the tiny llama export compiled with `--task generate
 * --max-seq-len 16 --prefill-chunk 3`, G1.tplan the same with
 * `--prefill-chunk 1` (no prefill entry); FORWARD.tplan any non-generation
 * plan; TOKENIZER.json
 * a byte-level BPE; EXPECTED a text file: the greedy ids transformers'
 * generate gives for the prompt 5 17 42 7 (8 of them), then the ids
 * `tokenizers` gives for "Hi there" (RunGenerateApiTest.sh writes it).
 * Checks each call does what runtime.h says (greedy equals transformers,
 * a reset repeats, a seed repeats, top-k 1 is greedy, the logits' argmax is
 * the greedy token; prompts of 1 to 16 tokens through the prefill entry --
 * one chunk, several, a padded tail, a tail padded past the cache -- give
 * the logits of the token-by-token plan) and that every misuse returns a status with a message:
 * null, freed and foreign handles, sampling before a token, ids outside
 * the vocabulary, a full cache, options out of range, an adapter after the
 * first token, a plan that does not generate. Prints a line per group and
 * exits 1 if any check failed.
 *
 *===----------------------------------------------------------------------===*/

#include "tailor/runtime.h"
#include "test/runtime/c_api_checks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEW_TOKENS 8

static const int64_t kPrompt[4] = {5, 17, 42, 7};
static int64_t expectedGreedy[NEW_TOKENS];
static int64_t expectedHi[64];
static size_t expectedHiCount = 0;

/* NEW_TOKENS ids prefilled from kPrompt with `sampling`. */
static void generate(tailor_generator *generator, int64_t *out) {
  int i;
  EXPECT_OK(tailor_generator_reset(generator));
  EXPECT_OK(tailor_generator_prefill(generator, kPrompt, 4));
  for (i = 0; i < NEW_TOKENS; ++i) {
    EXPECT_OK(tailor_generator_sample(generator, &out[i]));
    if (i + 1 < NEW_TOKENS) {
      EXPECT_OK(tailor_generator_decode(generator, out[i]));
    }
  }
}

static void testGreedy(tailor_plan *plan) {
  tailor_generator *generator = NULL;
  tailor_generation_info info;
  int64_t ids[NEW_TOKENS], again[NEW_TOKENS];
  const float *logits = NULL;
  int64_t vocab = 0, best = 0, token = -1, v;
  int position = -1, i;
  EXPECT_OK(tailor_plan_generation_info(plan, &info));
  EXPECT_OK(tailor_generator_create(plan, NULL, NULL, &generator));
  /* Nothing fed yet. */
  EXPECT_INVALID(tailor_generator_sample(generator, &token));
  EXPECT_ERROR_SAYS("feed a token first");
  EXPECT_INVALID(tailor_generator_logits(generator, &logits, &vocab));
  generate(generator, ids);
  for (i = 0; i < NEW_TOKENS; ++i) {
    CHECK(ids[i] == expectedGreedy[i], "greedy ids equal transformers'");
  }
  EXPECT_OK(tailor_generator_position(generator, &position));
  CHECK(position == 4 + NEW_TOKENS - 1, "position counts the tokens fed");
  /* The last logits' argmax is the greedy choice. */
  EXPECT_OK(tailor_generator_logits(generator, &logits, &vocab));
  CHECK(vocab == info.vocab_size, "logits have the vocabulary's size");
  for (v = 1; v < vocab; ++v) {
    if (logits[v] > logits[best]) {
      best = v;
    }
  }
  CHECK(best == ids[NEW_TOKENS - 1], "greedy is the argmax");
  generate(generator, again);
  CHECK(memcmp(ids, again, sizeof(ids)) == 0, "a reset repeats the ids");
  /* The cache holds 16: 4 + 12 fit, one more does not. */
  {
    int64_t many[17] = {0};
    EXPECT_OK(tailor_generator_reset(generator));
    EXPECT_INVALID(tailor_generator_prefill(generator, many, 17));
    EXPECT_ERROR_SAYS("do not fit");
    EXPECT_OK(tailor_generator_prefill(generator, kPrompt, 4));
    EXPECT_OK(tailor_generator_prefill(generator, many, 12));
    EXPECT_INVALID(tailor_generator_decode(generator, 1));
    EXPECT_ERROR_SAYS("compile with a larger --max-seq-len");
  }
  EXPECT_OK(tailor_generator_reset(generator));
  EXPECT_INVALID(tailor_generator_decode(generator, info.vocab_size));
  EXPECT_ERROR_SAYS("outside the vocabulary");
  EXPECT_INVALID(tailor_generator_decode(generator, -1));
  EXPECT_INVALID(tailor_generator_prefill(generator, NULL, 2));
  EXPECT_OK(tailor_generator_prefill(generator, NULL, 0));
  CHECK(tailor_generator_is_eos(generator, 12345678) == 0, "not an eos id");
  tailor_generator_free(generator);
  printf("greedy: %d ids equal transformers', reset repeats, cache and "
         "vocabulary checked\n", NEW_TOKENS);
}

/* Prefill in chunks of 3 against the plan without a prefill entry: the
 * logits after prompts of every length up to the cache (one chunk, several,
 * padded tails, the last chunk's padding past the cache at 16) and after a
 * decode step that follows, and the greedy ids. */
static void testPrefill(tailor_plan *plan, tailor_plan *decodeOnly) {
  tailor_generation_info info, info1;
  tailor_generator *chunked = NULL, *stepped = NULL;
  int64_t prompt[16], ids[NEW_TOKENS];
  const float *a = NULL, *b = NULL;
  int64_t vocab = 0, n, v;
  double worst = 0;
  int position = -1, i;
  EXPECT_OK(tailor_plan_generation_info(plan, &info));
  EXPECT_OK(tailor_plan_generation_info(decodeOnly, &info1));
  CHECK(info.prefill_chunk == 3, "the plan's prefill chunk is 3");
  CHECK(info1.prefill_chunk == 0, "--prefill-chunk 1 has no prefill entry");
  for (i = 0; i < 16; ++i) {
    prompt[i] = (37 * i + 11) % info.vocab_size;
  }
  EXPECT_OK(tailor_generator_create(plan, NULL, NULL, &chunked));
  EXPECT_OK(tailor_generator_create(decodeOnly, NULL, NULL, &stepped));
  for (n = 1; n <= 16; ++n) {
    EXPECT_OK(tailor_generator_reset(chunked));
    EXPECT_OK(tailor_generator_reset(stepped));
    EXPECT_OK(tailor_generator_prefill(chunked, prompt, (size_t)n));
    EXPECT_OK(tailor_generator_prefill(stepped, prompt, (size_t)n));
    EXPECT_OK(tailor_generator_position(chunked, &position));
    CHECK(position == n, "prefill advances the position by the prompt");
    for (i = 0; i < 2 && (i == 0 || n < 16); ++i) {
      if (i == 1) { /* a decode step after the prefilled prompt */
        EXPECT_OK(tailor_generator_decode(chunked, 3));
        EXPECT_OK(tailor_generator_decode(stepped, 3));
      }
      EXPECT_OK(tailor_generator_logits(chunked, &a, &vocab));
      EXPECT_OK(tailor_generator_logits(stepped, &b, NULL));
      for (v = 0; a && b && v < vocab; ++v) {
        double d = fabs((double)a[v] - (double)b[v]);
        worst = d > worst || d != d ? d : worst;
      }
    }
  }
  CHECK(worst <= 1e-5, "prefill logits equal token by token's to 1e-5");
  generate(chunked, ids);
  for (i = 0; i < NEW_TOKENS; ++i) {
    CHECK(ids[i] == expectedGreedy[i], "greedy ids after prefill");
  }
  tailor_generator_free(chunked);
  tailor_generator_free(stepped);
  printf("prefill: chunks of 3 for prompts of 1..16 (tails padded, past "
         "the cache at 16) match token by token, max |diff| %.2e; greedy "
         "ids equal transformers'\n", worst);
}

static void testSampling(tailor_plan *plan) {
  tailor_sampling_options options;
  tailor_generator *a = NULL, *b = NULL;
  int64_t first[NEW_TOKENS], second[NEW_TOKENS], other[NEW_TOKENS];
  float logits[5] = {1.0f, 3.0f, 2.0f, 0.5f, 2.0f};
  double probs[5], sum = 0;
  int i;
  tailor_sampling_options_init(&options);
  CHECK(options.temperature == 0 && options.top_k == 0 && options.top_p == 1,
        "init gives greedy options");
  options.temperature = 1.2;
  options.top_p = 0.95;
  options.seed = 99;
  EXPECT_OK(tailor_generator_create(plan, NULL, &options, &a));
  EXPECT_OK(tailor_generator_create(plan, NULL, &options, &b));
  generate(a, first);
  generate(b, second);
  CHECK(memcmp(first, second, sizeof(first)) == 0, "a seed repeats");
  options.seed = 100;
  EXPECT_OK(tailor_generator_set_sampling(b, &options));
  generate(b, other);
  CHECK(memcmp(first, other, sizeof(first)) != 0, "another seed differs");
  options.top_k = 1;
  EXPECT_OK(tailor_generator_set_sampling(b, &options));
  generate(b, other);
  for (i = 0; i < NEW_TOKENS; ++i) {
    CHECK(other[i] == expectedGreedy[i], "top-k 1 is greedy");
  }
  /* Options out of range. */
  options.top_k = 0;
  options.temperature = -1;
  EXPECT_INVALID(tailor_generator_set_sampling(b, &options));
  EXPECT_ERROR_SAYS("temperature");
  options.temperature = NAN;
  EXPECT_INVALID(tailor_generator_set_sampling(b, &options));
  options.temperature = 1;
  options.top_p = 0;
  EXPECT_INVALID(tailor_generator_set_sampling(b, &options));
  EXPECT_ERROR_SAYS("top_p");
  options.top_p = 1;
  options.top_k = -3;
  EXPECT_INVALID(tailor_generator_set_sampling(b, &options));
  EXPECT_ERROR_SAYS("top_k");
  tailor_generator *none = NULL;
  EXPECT_INVALID(tailor_generator_create(plan, NULL, &options, &none));
  CHECK(none == NULL, "no generator on failure");
  EXPECT_INVALID(tailor_generator_set_sampling(b, NULL));
  /* The warped distribution. */
  options.top_k = 2;
  options.temperature = 1;
  EXPECT_OK(tailor_sampling_probabilities(logits, 5, &options, probs));
  for (i = 0; i < 5; ++i) {
    sum += probs[i];
  }
  CHECK(fabs(sum - 1) < 1e-12, "probabilities sum to 1");
  CHECK(probs[0] == 0 && probs[3] == 0 && probs[1] > probs[2] &&
            probs[2] == probs[4],
        "top-k 2 keeps the largest and the ties at the 2nd");
  EXPECT_INVALID(tailor_sampling_probabilities(logits, 0, &options, probs));
  EXPECT_INVALID(tailor_sampling_probabilities(NULL, 5, &options, probs));
  tailor_generator_free(a);
  tailor_generator_free(b);
  printf("sampling: a seed repeats, another differs, top-k 1 is greedy, "
         "options out of range refused\n");
}

static void testMisuse(tailor_plan *plan, tailor_plan *forward) {
  tailor_generator *generator = NULL, *freed = NULL;
  int64_t token;
  int position;
  int dummy = 0;
  tailor_generator *foreign = (tailor_generator *)&dummy;
  EXPECT_INVALID(tailor_generator_create(forward, NULL, NULL, &generator));
  EXPECT_ERROR_SAYS("not a generation plan");
  CHECK(generator == NULL, "no generator for a forward plan");
  EXPECT_INVALID(tailor_generator_create(NULL, NULL, NULL, &generator));
  EXPECT_INVALID(tailor_generator_create(plan, NULL, NULL, NULL));
  EXPECT_OK(tailor_generator_create(plan, NULL, NULL, &freed));
  tailor_generator_free(freed);
  EXPECT_INVALID(tailor_generator_sample(freed, &token));
  EXPECT_ERROR_SAYS("not a live tailor_generator");
  EXPECT_INVALID(tailor_generator_prefill(foreign, kPrompt, 1));
  EXPECT_INVALID(tailor_generator_decode(NULL, 1));
  EXPECT_ERROR_SAYS("generator is null");
  EXPECT_INVALID(tailor_generator_position(freed, &position));
  EXPECT_INVALID(tailor_generator_reset(foreign));
  EXPECT_INVALID(tailor_generator_apply_adapter(freed, "."));
  CHECK(tailor_generator_is_eos(freed, 1) == 0, "is_eos of a freed handle");
  tailor_generator_free(foreign); /* refused, with a message; no crash */
  tailor_generator_free(NULL);
  /* An adapter after the first token. */
  EXPECT_OK(tailor_generator_create(plan, NULL, NULL, &generator));
  EXPECT_OK(tailor_generator_prefill(generator, kPrompt, 1));
  EXPECT_INVALID(tailor_generator_apply_adapter(generator, "."));
  EXPECT_ERROR_SAYS("before the first token");
  EXPECT_OK(tailor_generator_reset(generator));
  CHECK(tailor_generator_apply_adapter(generator, "/nonexistent") !=
            TAILOR_OK,
        "a missing adapter directory");
  EXPECT_INVALID(tailor_generator_sample(generator, NULL));
  tailor_generator_free(generator);
  printf("misuse: null, freed and foreign generators, forward plans and "
         "late adapters refused\n");
}

static void testTokenizer(const char *path) {
  tailor_tokenizer *tokenizer = NULL, *freed = NULL;
  const int64_t *ids = NULL;
  const char *text = NULL;
  size_t count = 0, length = 0, i;
  int dummy = 0;
  EXPECT_OK(tailor_tokenizer_load(path, &tokenizer));
  CHECK(tailor_tokenizer_size(tokenizer) == 256, "256 tokens");
  EXPECT_OK(tailor_tokenizer_encode(tokenizer, "Hi there", 8, &ids, &count));
  CHECK(count == expectedHiCount, "as many ids as tokenizers gives");
  for (i = 0; i < count && i < expectedHiCount; ++i) {
    CHECK(ids[i] == expectedHi[i], "the ids tokenizers gives");
  }
  EXPECT_OK(tailor_tokenizer_decode(tokenizer, ids, count, 0, &text,
                                    &length));
  CHECK(length == 8 && memcmp(text, "Hi there", 8) == 0 && text[8] == '\0',
        "decode gives the text back");
  EXPECT_OK(tailor_tokenizer_encode(tokenizer, NULL, 0, &ids, &count));
  CHECK(count == 0, "the empty text has no ids");
  {
    int64_t bad = 256;
    EXPECT_INVALID(tailor_tokenizer_decode(tokenizer, &bad, 1, 0, &text,
                                           &length));
    EXPECT_ERROR_SAYS("not in the vocabulary");
  }
  EXPECT_INVALID(tailor_tokenizer_encode(tokenizer, "x", 1, NULL, &count));
  EXPECT_STATUS(tailor_tokenizer_load("/nonexistent/tokenizer.json", &freed),
                TAILOR_ERROR_IO);
  EXPECT_INVALID(tailor_tokenizer_load(NULL, &freed));
  EXPECT_OK(tailor_tokenizer_load(path, &freed));
  tailor_tokenizer_free(freed);
  EXPECT_INVALID(tailor_tokenizer_encode(freed, "x", 1, &ids, &count));
  EXPECT_ERROR_SAYS("not a live tailor_tokenizer");
  CHECK(tailor_tokenizer_size((tailor_tokenizer *)&dummy) == 0,
        "size of a foreign handle");
  tailor_tokenizer_free((tailor_tokenizer *)&dummy);
  tailor_tokenizer_free(tokenizer);
  printf("tokenizer: encode and decode as tokenizers, bad ids and handles "
         "refused\n");
}

static int readExpected(const char *path) {
  FILE *file = fopen(path, "r");
  int i;
  long long id;
  if (!file) {
    return 0;
  }
  for (i = 0; i < NEW_TOKENS; ++i) {
    if (fscanf(file, "%lld", &id) != 1) {
      fclose(file);
      return 0;
    }
    expectedGreedy[i] = id;
  }
  while (expectedHiCount < 64 && fscanf(file, "%lld", &id) == 1) {
    expectedHi[expectedHiCount++] = id;
  }
  fclose(file);
  return expectedHiCount > 0;
}

int main(int argc, char **argv) {
  tailor_plan *plan = NULL, *decodeOnly = NULL, *forward = NULL;
  if (argc != 6) {
    fprintf(stderr, "usage: %s G.tplan G1.tplan FORWARD.tplan "
                    "TOKENIZER.json EXPECTED\n", argv[0]);
    return 2;
  }
  if (!readExpected(argv[5])) {
    fprintf(stderr, "cannot read %s\n", argv[5]);
    return 2;
  }
  EXPECT_OK(tailor_plan_load(argv[1], &plan));
  EXPECT_OK(tailor_plan_load(argv[2], &decodeOnly));
  EXPECT_OK(tailor_plan_load(argv[3], &forward));
  if (!plan || !decodeOnly || !forward) {
    return 1;
  }
  testGreedy(plan);
  testGreedy(decodeOnly);
  testPrefill(plan, decodeOnly);
  testSampling(plan);
  testMisuse(plan, forward);
  testTokenizer(argv[4]);
  tailor_plan_free(forward);
  tailor_plan_free(decodeOnly);
  tailor_plan_free(plan);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("generate_api_test: all checks passed\n");
  return 0;
}
