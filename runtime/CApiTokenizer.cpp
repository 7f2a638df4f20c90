//===- CApiTokenizer.cpp - the C API's tokenizers -------------------------===//
//
// tailor_tokenizer is a generate::Tokenizer behind a checked handle, with
// the buffers its encode and decode results live in until the next call.
//
//===----------------------------------------------------------------------===//

#include "runtime/CApiHandles.h"
#include "runtime/Status.h"
#include "runtime/generate/Tokenizer.h"

#include <filesystem>

using namespace tailor::runtime;

struct tailor_tokenizer {
  std::unique_ptr<tailor::generate::Tokenizer> tokenizer;
  std::vector<int64_t> ids;
  std::string text;
};

namespace {

LiveHandles &liveTokenizers() {
  static LiveHandles *handles = new LiveHandles();
  return *handles;
}

bool isLiveTokenizer(const tailor_tokenizer *tokenizer) {
  return tokenizer && liveTokenizers().contains(tokenizer);
}

tailor_status badTokenizer(const tailor_tokenizer *tokenizer) {
  return fail(TAILOR_ERROR_INVALID_ARGUMENT,
              tokenizer ? "tokenizer is not a live tailor_tokenizer (freed "
                          "already, or not made by tailor_tokenizer_load)"
                        : "tokenizer is null");
}

} // namespace

extern "C" {

tailor_status tailor_tokenizer_load(const char *path,
                                    tailor_tokenizer **tokenizer) {
  return guard(__func__, [&]() -> tailor_status {
    if (!path || !tokenizer) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "path and tokenizer must not be null");
    }
    *tokenizer = nullptr;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return fail(TAILOR_ERROR_IO, std::string(path) + ": no such file");
    }
    std::string error;
    auto loaded = tailor::generate::Tokenizer::open(path, error);
    if (!loaded) {
      return fail(error.find("cannot be opened") != std::string::npos
                      ? TAILOR_ERROR_IO
                      : TAILOR_ERROR_INVALID_ARGUMENT,
                  error);
    }
    *tokenizer = new tailor_tokenizer{std::move(loaded), {}, {}};
    liveTokenizers().add(*tokenizer);
    return ok();
  });
}

void tailor_tokenizer_free(tailor_tokenizer *tokenizer) {
  guardValue(__func__, 0, [&] {
    if (tokenizer && !liveTokenizers().remove(tokenizer)) {
      badTokenizer(tokenizer);
      return 0;
    }
    delete tokenizer;
    return 0;
  });
}

int64_t tailor_tokenizer_size(const tailor_tokenizer *tokenizer) {
  return guardValue(__func__, int64_t(0), [&]() -> int64_t {
    if (!isLiveTokenizer(tokenizer)) {
      badTokenizer(tokenizer);
      return 0;
    }
    return tokenizer->tokenizer->size();
  });
}

tailor_status tailor_tokenizer_encode(tailor_tokenizer *tokenizer,
                                      const char *text, size_t length,
                                      const int64_t **ids, size_t *count) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLiveTokenizer(tokenizer)) {
      return badTokenizer(tokenizer);
    }
    if ((!text && length) || !ids || !count) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "null argument");
    }
    std::string error;
    if (!tokenizer->tokenizer->encode(
            std::string_view(text ? text : "", length), tokenizer->ids,
            error)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, error);
    }
    *ids = tokenizer->ids.data();
    *count = tokenizer->ids.size();
    return ok();
  });
}

tailor_status tailor_tokenizer_decode(tailor_tokenizer *tokenizer,
                                      const int64_t *ids, size_t count,
                                      int skip_special, const char **text,
                                      size_t *length) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLiveTokenizer(tokenizer)) {
      return badTokenizer(tokenizer);
    }
    if ((!ids && count) || !text || !length) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "null argument");
    }
    std::string error;
    std::vector<int64_t> list(ids, ids + count);
    if (!tokenizer->tokenizer->decode(list, skip_special != 0, tokenizer->text,
                                      error)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, error);
    }
    *text = tokenizer->text.c_str();
    *length = tokenizer->text.size();
    return ok();
  });
}

} // extern "C"
