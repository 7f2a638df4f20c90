//===- Tokenizer.cpp - opening a tokenizer file; streaming text -----------===//

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

size_t completeUtf8Prefix(std::string_view text) {
  // Walk back over at most three continuation bytes to the last lead byte;
  // keep it only if its character is whole.
  size_t end = text.size();
  for (size_t back = 1; back <= 4 && back <= end; ++back) {
    unsigned char c = static_cast<unsigned char>(text[end - back]);
    if ((c & 0xC0) == 0x80) {
      continue; // continuation byte
    }
    size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return length > back ? end - back : end;
  }
  return end;
}

bool TextStream::push(int64_t id, std::string &piece, std::string &error) {
  ids.push_back(id);
  if (!tokenizer.decode(ids, /*skipSpecial=*/true, decoded, error)) {
    return false;
  }
  size_t ready = completeUtf8Prefix(decoded);
  piece = ready > emitted ? decoded.substr(emitted, ready - emitted) : "";
  emitted = std::max(emitted, ready);
  return true;
}

bool TextStream::finish(std::string &piece, std::string &error) {
  (void)error;
  piece = decoded.size() > emitted ? decoded.substr(emitted) : "";
  emitted = decoded.size();
  return true;
}

} // namespace tailor::generate
