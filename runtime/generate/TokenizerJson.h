//===- TokenizerJson.h - byte-level BPE from tokenizer.json -----*- C++ -*-===//

#ifndef TAILOR_RUNTIME_GENERATE_TOKENIZERJSON_H
#define TAILOR_RUNTIME_GENERATE_TOKENIZERJSON_H

#include "runtime/generate/Tokenizer.h"

#include <nlohmann/json_fwd.hpp>
#include <unicode/uversion.h>

#include <optional>
#include <unordered_map>

U_NAMESPACE_BEGIN
class Normalizer2;
U_NAMESPACE_END

namespace tailor::generate {

/// A Hugging Face tokenizer.json whose model is a byte-level BPE
/// (TokenizerJson.cpp says which parts of the format it reads).
class ByteLevelBpe : public Tokenizer {
public:
  /// Reads `path`; null with `error` naming the file and what it cannot
  /// use.
  static std::unique_ptr<Tokenizer> load(const std::string &path,
                                         std::string &error);
  ~ByteLevelBpe() override;

  bool encode(std::string_view text, std::vector<int64_t> &ids,
              std::string &error) const override;
  bool decode(const std::vector<int64_t> &ids, bool skipSpecial,
              std::string &text, std::string &error) const override;
  int64_t size() const override;
  std::string describe() const override;

private:
  struct AddedToken {
    std::string content;
    int64_t id = 0;
    bool special = false, lstrip = false, rstrip = false, singleWord = false;
  };
  struct Splitter;

  explicit ByteLevelBpe(std::string file);
  bool fail(std::string &error, const std::string &what) const;
  bool loadModel(const nlohmann::json &model, std::string &error);
  bool loadAddedTokens(const nlohmann::json &root, std::string &error);
  bool loadNormalizer(const nlohmann::json &normalizer, std::string &error);
  bool loadPreTokenizer(const nlohmann::json &pre, std::string &error);
  bool loadPostProcessor(const nlohmann::json &post, std::string &error);
  bool addSplitter(const std::string &regex, std::string &error);

  bool findAdded(std::string_view text, size_t from, size_t &token,
                 size_t &begin, size_t &end) const;
  bool encodeText(const std::string &text, std::vector<int64_t> &ids,
                  std::string &error) const;
  std::vector<std::string> preTokenize(const std::string &text) const;
  bool encodeWord(const std::string &piece, std::vector<int64_t> &ids,
                  std::string &error) const;

  std::string file;
  std::unordered_map<std::string, int64_t> vocab;
  /// Token text by id (byte-level stand-ins; added tokens as written).
  std::vector<std::string> idToToken;
  /// "left right" -> merge rank.
  std::unordered_map<std::string, int> mergeRanks;
  bool ignoreMerges = false;
  std::vector<AddedToken> addedTokens;
  std::unordered_map<int64_t, size_t> addedById;
  const icu::Normalizer2 *nfc = nullptr;
  /// Split regexes in order; ByteLevel's own (use_regex) at byteLevelRegex.
  std::vector<std::unique_ptr<Splitter>> splitters;
  std::optional<size_t> byteLevelRegex;
  bool byteLevel = false;
  bool addPrefixSpace = false;
  /// The post-processor template's special ids around the text.
  std::vector<int64_t> prefixIds, suffixIds;
};

} // namespace tailor::generate

#endif // TAILOR_RUNTIME_GENERATE_TOKENIZERJSON_H
