/*===- chat.c - a chat loop over a generation plan, in C -----------------===*
 *
 * Reads a line from stdin, feeds its tokens to the model, streams the
 * model's reply, and waits for the next line, the conversation growing in
 * the plan's KV cache (when it is full, the generator starts afresh):
 *
 *   1. tailor_plan_load + tailor_generator_create (a session of its own,
 *      greedy or sampling options), tailor_generator_apply_adapter;
 *   2. tailor_tokenizer_load: the model's tokenizer.json / tokenizer.model;
 *   3. per line: tailor_tokenizer_encode, tailor_generator_prefill, then
 *      tailor_generator_sample / tailor_generator_decode until an eos id,
 *      --max-new-tokens or a full cache, each reply token's text printed
 *      as soon as it is whole UTF-8.
 *
 * Usage: tailor-embed-chat G.tplan TOKENIZER [--adapter DIR]
 *            [--temperature T] [--top-p P] [--top-k K] [--seed S]
 *            [--max-new-tokens N]
 * TOKENIZER may be "-" for none: lines are then token ids ("1 2 3"; a
 * line with another word is reported and skipped) and the reply is ids.
 * Compile G.tplan with
 * `tailor compile MODEL.onnx --task generate --max-seq-len N`.
 *
 *===----------------------------------------------------------------------===*/

#include "tailor/runtime.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 4096
#define MAX_TOKENS 4096

static int fail(const char *what) {
  fprintf(stderr, "chat: %s: %s\n", what, tailor_last_error());
  return 1;
}

/* Bytes of text[0, length) up to its last whole UTF-8 character. */
static size_t complete_utf8(const char *text, size_t length) {
  size_t back;
  for (back = 1; back <= 4 && back <= length; ++back) {
    unsigned char c = (unsigned char)text[length - back];
    size_t need;
    if ((c & 0xC0) == 0x80) {
      continue;
    }
    need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? length - back : length;
  }
  return length;
}

/* The prompt ids of one line, encoded. Returns the count, or -1. */
static long encode_ids(tailor_tokenizer *tokenizer, const char *line,
                       int64_t *ids, size_t capacity) {
  const int64_t *encoded = NULL;
  size_t count = 0;
  if (tailor_tokenizer_encode(tokenizer, line, strlen(line), &encoded,
                              &count) != TAILOR_OK) {
    return -1;
  }
  if (count > capacity) {
    count = capacity;
  }
  memcpy(ids, encoded, count * sizeof(int64_t));
  return (long)count;
}

/* The prompt ids of one line without a tokenizer: decimal ids separated by
 * spaces. Returns the count, or -1 after saying what is wrong with line
 * `number` (the first word that is not an id). */
static long parse_ids(const char *line, long number, int64_t *ids,
                      size_t capacity) {
  size_t count = 0;
  for (;;) {
    const char *word, *end;
    char *parsed = NULL;
    long long id;
    while (isspace((unsigned char)*line)) {
      ++line;
    }
    if (!*line) {
      return (long)count;
    }
    if (count >= capacity) {
      fprintf(stderr, "chat: line %ld has more than %zu ids\n", number,
              capacity);
      return -1;
    }
    word = line;
    for (end = word; *end && !isspace((unsigned char)*end); ++end) {
    }
    errno = 0;
    id = strtoll(word, &parsed, 10);
    if (parsed != end || errno == ERANGE) {
      fprintf(stderr, "chat: line %ld: '%.*s' is not a token id (without "
                      "a tokenizer, a line is ids separated by spaces)\n",
              number, (int)(end - word), word);
      return -1;
    }
    ids[count++] = id;
    line = end;
  }
}

/* Generates and prints one reply after the tokens already fed, feeding
 * each reply token back into the cache while it has room. */
static int reply(tailor_generator *generator, tailor_tokenizer *tokenizer,
                 int max_seq_len, int max_new_tokens) {
  static int64_t generated[MAX_TOKENS];
  size_t count = 0, printed = 0;
  int position = 0;
  for (;;) {
    int64_t token;
    if (tailor_generator_sample(generator, &token) != TAILOR_OK) {
      return fail("sample");
    }
    generated[count++] = token;
    if (tokenizer) {
      const char *text = NULL;
      size_t length = 0, ready;
      if (tailor_tokenizer_decode(tokenizer, generated, count, 1, &text,
                                  &length) != TAILOR_OK) {
        return fail("decode");
      }
      ready = complete_utf8(text, length);
      if (ready > printed) {
        fwrite(text + printed, 1, ready - printed, stdout);
        printed = ready;
      }
    } else {
      printf("%s%lld", count > 1 ? " " : "", (long long)token);
    }
    fflush(stdout);
    /* Every token of the reply, the last one too, goes into the cache, so
     * the next line follows the whole reply. When the cache is full the
     * token cannot go in: the reply ends, and the next line starts a new
     * conversation (main resets the generator). */
    if (tailor_generator_position(generator, &position) != TAILOR_OK) {
      return fail("position");
    }
    if (position >= max_seq_len) {
      break;
    }
    if (tailor_generator_decode(generator, token) != TAILOR_OK) {
      return fail("decode step");
    }
    if (tailor_generator_is_eos(generator, token) ||
        (int)count >= max_new_tokens || count >= MAX_TOKENS) {
      break;
    }
  }
  printf("\n");
  return 0;
}

int main(int argc, char **argv) {
  tailor_sampling_options sampling;
  tailor_session_options session = {0};
  tailor_generation_info info;
  tailor_plan *plan = NULL;
  tailor_generator *generator = NULL;
  tailor_tokenizer *tokenizer = NULL;
  const char *adapter = NULL;
  int max_new_tokens = 32, i, status = 0;
  long number = 0;
  char line[MAX_LINE];
  static int64_t ids[MAX_TOKENS];

  if (argc < 3) {
    fprintf(stderr, "usage: %s G.tplan TOKENIZER|- [--adapter DIR] "
                    "[--temperature T] [--top-p P] [--top-k K] [--seed S] "
                    "[--max-new-tokens N]\n", argv[0]);
    return 2;
  }
  tailor_sampling_options_init(&sampling);
  for (i = 3; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--adapter")) {
      adapter = argv[i + 1];
    } else if (!strcmp(argv[i], "--temperature")) {
      sampling.temperature = atof(argv[i + 1]);
    } else if (!strcmp(argv[i], "--top-p")) {
      sampling.top_p = atof(argv[i + 1]);
    } else if (!strcmp(argv[i], "--top-k")) {
      sampling.top_k = atoll(argv[i + 1]);
    } else if (!strcmp(argv[i], "--seed")) {
      sampling.seed = strtoull(argv[i + 1], NULL, 10);
    } else if (!strcmp(argv[i], "--max-new-tokens")) {
      max_new_tokens = atoi(argv[i + 1]);
    } else {
      fprintf(stderr, "chat: unknown option %s\n", argv[i]);
      return 2;
    }
  }

  if (tailor_plan_load(argv[1], &plan) != TAILOR_OK ||
      tailor_plan_generation_info(plan, &info) != TAILOR_OK) {
    status = fail(argv[1]);
    goto done;
  }
  if (tailor_generator_create(plan, &session, &sampling, &generator) !=
      TAILOR_OK) {
    status = fail("generator");
    goto done;
  }
  if (adapter &&
      tailor_generator_apply_adapter(generator, adapter) != TAILOR_OK) {
    status = fail(adapter);
    goto done;
  }
  if (strcmp(argv[2], "-") != 0 &&
      tailor_tokenizer_load(argv[2], &tokenizer) != TAILOR_OK) {
    status = fail(argv[2]);
    goto done;
  }

  while (fgets(line, sizeof(line), stdin)) {
    long count;
    int position = 0;
    ++number;
    line[strcspn(line, "\r\n")] = '\0';
    if (!tokenizer) {
      /* A line that is not ids is reported and skipped (as a line the
       * cache cannot hold is); the conversation so far stays. */
      if ((count = parse_ids(line, number, ids, MAX_TOKENS)) < 0) {
        continue;
      }
    } else if ((count = encode_ids(tokenizer, line, ids, MAX_TOKENS)) < 0) {
      status = fail("encode");
      break;
    }
    if (count == 0) {
      continue;
    }
    tailor_generator_position(generator, &position);
    if (position + count >= info.max_seq_len) {
      /* The conversation outgrew the cache: start a new one. */
      tailor_generator_reset(generator);
      if (count >= info.max_seq_len) {
        fprintf(stderr, "chat: a line of %ld tokens does not fit the cache "
                        "(%d)\n", count, info.max_seq_len);
        continue;
      }
    }
    if (tailor_generator_prefill(generator, ids, (size_t)count) !=
        TAILOR_OK) {
      status = fail("prefill");
      break;
    }
    if ((status = reply(generator, tokenizer, info.max_seq_len,
                        max_new_tokens)) != 0) {
      break;
    }
  }

done:
  tailor_tokenizer_free(tokenizer);
  tailor_generator_free(generator);
  tailor_plan_free(plan);
  return status;
}
