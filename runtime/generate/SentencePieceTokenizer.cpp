//===- SentencePieceTokenizer.cpp - tokenizer.model via libsentencepiece --===//

#include "runtime/generate/SentencePieceTokenizer.h"

#include <sentencepiece_processor.h>

namespace tailor::generate {

SentencePieceTokenizer::SentencePieceTokenizer(std::string file)
    : file(std::move(file)),
      processor(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<Tokenizer> SentencePieceTokenizer::load(const std::string &path,
                                                        std::string &error) {
  auto tokenizer =
      std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(path));
  auto status = tokenizer->processor->Load(path);
  if (!status.ok()) {
    error = path + ": not a SentencePiece model: " + status.ToString();
    return nullptr;
  }
  return tokenizer;
}

bool SentencePieceTokenizer::encode(std::string_view text,
                                    std::vector<int64_t> &ids,
                                    std::string &error) const {
  std::vector<int> pieces;
  auto status = processor->Encode(std::string(text), &pieces);
  if (!status.ok()) {
    error = file + ": " + status.ToString();
    return false;
  }
  ids.clear();
  if (processor->bos_id() >= 0) {
    ids.push_back(processor->bos_id());
  }
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  return true;
}

bool SentencePieceTokenizer::decode(const std::vector<int64_t> &ids,
                                    bool skipSpecial, std::string &text,
                                    std::string &error) const {
  (void)skipSpecial; // SentencePiece never writes control tokens' text
  std::vector<int> pieces;
  for (int64_t id : ids) {
    if (id < 0 || id >= size()) {
      error = file + ": token id " + std::to_string(id) +
              " is not in the vocabulary";
      return false;
    }
    pieces.push_back(static_cast<int>(id));
  }
  auto status = processor->Decode(pieces, &text);
  if (!status.ok()) {
    error = file + ": " + status.ToString();
    return false;
  }
  return true;
}

int64_t SentencePieceTokenizer::size() const {
  return processor->GetPieceSize();
}

std::string SentencePieceTokenizer::describe() const {
  return file + " (SentencePiece, " + std::to_string(size()) + " pieces)";
}

} // namespace tailor::generate
