//===- Tokenizer.h - text to token ids and back -----------------*- C++ -*-===//
//
// The two tokenizer files models ship with: Hugging Face `tokenizer.json`
// with a byte-level BPE model (GPT-2, Llama-3, Qwen2 style: a ByteLevel
// pre-tokenizer or a Split regex before it, merges, added and special
// tokens; TokenizerJson.cpp) and SentencePiece `tokenizer.model` (through
// libsentencepiece; SentencePieceTokenizer.cpp). Any other kind of file,
// model, normalizer or pre-tokenizer is refused with a message naming the
// file and the type. No LLVM: `tailor generate` and the C API share it.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_GENERATE_TOKENIZER_H
#define TAILOR_RUNTIME_GENERATE_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tailor::generate {

class Tokenizer {
public:
  virtual ~Tokenizer();

  /// Opens `path`: a tokenizer.json or tokenizer.model file, or a directory
  /// holding one (tokenizer.json first). Null and `error` set (naming the
  /// file, and the unsupported type) on failure.
  static std::unique_ptr<Tokenizer> open(const std::string &path,
                                         std::string &error);

  /// The ids of `text` as the model's tokenizer gives them by default
  /// (transformers' `tokenizer(text)["input_ids"]`: special tokens the
  /// tokenizer adds, such as a BOS, included). False and `error` set on
  /// failure.
  virtual bool encode(std::string_view text, std::vector<int64_t> &ids,
                      std::string &error) const = 0;

  /// The text of `ids` (transformers' `decode`; special tokens left out
  /// when `skipSpecial`). Byte-level tokens may end inside a UTF-8
  /// character: the bytes come back as they are. False and `error` set for
  /// an id the tokenizer does not know.
  virtual bool decode(const std::vector<int64_t> &ids, bool skipSpecial,
                      std::string &text, std::string &error) const = 0;

  /// The number of ids the tokenizer knows (the largest id + 1).
  virtual int64_t size() const = 0;

  /// What was loaded, e.g. "tokenizer.json (byte-level BPE)".
  virtual std::string describe() const = 0;
};

} // namespace tailor::generate

#endif // TAILOR_RUNTIME_GENERATE_TOKENIZER_H
