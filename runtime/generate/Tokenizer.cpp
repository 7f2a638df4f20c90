//===- Tokenizer.cpp - opening a tokenizer file ---------------------------===//

#include "runtime/generate/Tokenizer.h"

#include "runtime/generate/SentencePieceTokenizer.h"
#include "runtime/generate/TokenizerJson.h"

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
  if (file.extension() == ".json") {
    return ByteLevelBpe::load(file.string(), error);
  }
  if (file.extension() == ".model") {
    return SentencePieceTokenizer::load(file.string(), error);
  }
  error = file.string() +
          ": not a tokenizer file (tokenizer.json or tokenizer.model)";
  return nullptr;
}

} // namespace tailor::generate
