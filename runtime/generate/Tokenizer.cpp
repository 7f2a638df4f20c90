//===- Tokenizer.cpp - opening a tokenizer file ---------------------------===//

#include "runtime/generate/Tokenizer.h"

#if TAILOR_HAVE_TOKENIZERS
#include "runtime/generate/SentencePieceTokenizer.h"
#include "runtime/generate/TokenizerJson.h"
#endif

#include <filesystem>

namespace tailor::generate {

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::open(const std::string &path,
                                           std::string &error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file(path);
  if (fs::is_directory(file, ec)) {
    if (fs::exists(file / "tokenizer.json", ec)) {
      file /= "tokenizer.json";
    } else if (fs::exists(file / "tokenizer.model", ec)) {
      file /= "tokenizer.model";
    } else {
      error = path + ": holds neither tokenizer.json nor tokenizer.model";
      return nullptr;
    }
  }
  if (!fs::exists(file, ec)) {
    error = file.string() + ": no such file";
    return nullptr;
  }
#if TAILOR_HAVE_TOKENIZERS
  if (file.extension() == ".json") {
    return ByteLevelBpe::load(file.string(), error);
  }
  if (file.extension() == ".model") {
    return SentencePieceTokenizer::load(file.string(), error);
  }
#else
  if (file.extension() == ".json" || file.extension() == ".model") {
    error = file.string() + ": this tailor was built without tokenizers "
                            "(ICU and libsentencepiece were not found): use "
                            "token ids";
    return nullptr;
  }
#endif
  error = file.string() +
          ": not a tokenizer file (tokenizer.json or tokenizer.model)";
  return nullptr;
}

} // namespace tailor::generate
