//===- SentencePieceTokenizer.h - tokenizer.model --------------*- C++ -*-===//

#ifndef TAILOR_RUNTIME_GENERATE_SENTENCEPIECETOKENIZER_H
#define TAILOR_RUNTIME_GENERATE_SENTENCEPIECETOKENIZER_H

#include "runtime/generate/Tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
} // namespace sentencepiece

namespace tailor::generate {

/// A SentencePiece model (BPE or unigram) through libsentencepiece. Encoding
/// prepends the model's BOS id when it has one, as transformers'
/// LlamaTokenizer (add_bos_token) does for the models that ship these
/// files; decoding leaves control tokens (BOS, EOS) out.
class SentencePieceTokenizer : public Tokenizer {
public:
  static std::unique_ptr<Tokenizer> load(const std::string &path,
                                         std::string &error);
  ~SentencePieceTokenizer() override;

  bool encode(std::string_view text, std::vector<int64_t> &ids,
              std::string &error) const override;
  bool decode(const std::vector<int64_t> &ids, bool skipSpecial,
              std::string &text, std::string &error) const override;
  int64_t size() const override;
  std::string describe() const override;

private:
  explicit SentencePieceTokenizer(std::string file);

  std::string file;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor;
};

} // namespace tailor::generate

#endif // TAILOR_RUNTIME_GENERATE_SENTENCEPIECETOKENIZER_H
