//===- TokenizerJson.cpp - Hugging Face tokenizer.json, byte-level BPE ----===//
//
// What the `tokenizers` library does for GPT-2, Llama-3 and Qwen2 files,
// step by step:
//   1. added tokens (special or not) are cut out of the text first, the
//      leftmost longest match winning (lstrip / rstrip take the blanks
//      beside a match, single_word needs no word character beside it);
//   2. the rest is normalized (none, or NFC through ICU);
//   3. pre-tokenized: Split regexes (behavior Isolated), then ByteLevel
//      (a prefix space per piece when add_prefix_space, GPT-2's regex when
//      use_regex, then each byte as its printable stand-in character);
//   4. each piece becomes BPE symbols, merged lowest rank first (the whole
//      piece at once when ignore_merges and the vocabulary has it);
//   5. the post-processor's single template adds its special tokens.
// Regexes run on ICU's engine, whose syntax covers the Oniguruma patterns
// these files use (\p{L}, \p{N}, (?i:...), (?!\S)). Decoding maps the
// stand-in characters back to bytes.
//
//===----------------------------------------------------------------------===//

#include "runtime/generate/TokenizerJson.h"

#include <nlohmann/json.hpp>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>

namespace tailor::generate {
namespace {

using nlohmann::json;

/// GPT-2's pre-tokenizer regex (ByteLevel with use_regex).
constexpr const char *kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// The UTF-8 encoding of code point `c`.
std::string utf8(uint32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

/// GPT-2's bytes_to_unicode: each byte's printable stand-in, as UTF-8.
const std::vector<std::string> &byteStandIns() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> out(256);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      out[b] = utf8(printable ? b : next++);
    }
    return out;
  }();
  return table;
}

/// The inverse: stand-in character (UTF-8) -> byte.
const std::unordered_map<std::string, uint8_t> &standInBytes() {
  static const std::unordered_map<std::string, uint8_t> table = [] {
    std::unordered_map<std::string, uint8_t> out;
    for (int b = 0; b < 256; ++b) {
      out[byteStandIns()[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);
    }
    return out;
  }();
  return table;
}

/// The length of the UTF-8 character starting with byte `lead` (1 for a
/// stray continuation byte).
size_t utf8Length(unsigned char lead) {
  return lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}

std::string fromUnicode(const icu::UnicodeString &text, int32_t begin,
                        int32_t end) {
  std::string out;
  text.tempSubStringBetween(begin, end).toUTF8String(out);
  return out;
}

bool isWordByte(unsigned char c) {
  return std::isalnum(c) || c == '_' || c >= 0x80;
}

} // namespace

/// A regex a Split (or ByteLevel) pre-tokenizer cuts pieces with.
struct ByteLevelBpe::Splitter {
  std::unique_ptr<icu::RegexPattern> pattern;
};

ByteLevelBpe::ByteLevelBpe(std::string file) : file(std::move(file)) {}
ByteLevelBpe::~ByteLevelBpe() = default;

std::string ByteLevelBpe::describe() const {
  return file + " (byte-level BPE, " + std::to_string(idToToken.size()) +
         " tokens)";
}

int64_t ByteLevelBpe::size() const {
  return static_cast<int64_t>(idToToken.size());
}

bool ByteLevelBpe::fail(std::string &error, const std::string &what) const {
  error = file + ": " + what;
  return false;
}

bool ByteLevelBpe::addSplitter(const std::string &regex, std::string &error) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse;
  auto splitter = std::make_unique<Splitter>();
  splitter->pattern.reset(icu::RegexPattern::compile(
      icu::UnicodeString::fromUTF8(regex), 0, parse, status));
  if (U_FAILURE(status)) {
    return fail(error, "pre_tokenizer regex '" + regex +
                           "' does not compile: " + u_errorName(status));
  }
  splitters.push_back(std::move(splitter));
  return true;
}

/// Ids index a table of tokens: no vocabulary has 2^24 of them (the largest
/// published ones hold about 256k), and a larger id would only allocate.
constexpr int64_t kMaxTokenId = int64_t(1) << 24;

/// `value` as a token id: an integer in [0, kMaxTokenId) (a float or an
/// out-of-range number is not one; converting it would be undefined).
static bool readTokenId(const json &value, int64_t &id) {
  if (value.is_number_unsigned()) {
    uint64_t wide = value.get<uint64_t>();
    id = wide < uint64_t(kMaxTokenId) ? int64_t(wide) : -1;
  } else {
    id = value.is_number_integer() ? value.get<int64_t>() : -1;
  }
  return id >= 0 && id < kMaxTokenId;
}

/// The error for an id `value` of `what` that readTokenId refused.
static std::string badId(const std::string &what, const json &value) {
  return what + " has id " + value.dump() + ", not an integer in [0, " +
         std::to_string(kMaxTokenId) + ")";
}

bool ByteLevelBpe::loadModel(const json &model, std::string &error) {
  std::string type = model.value("type", "");
  if (type != "BPE") {
    return fail(error, "model type '" + type +
                           "' is not supported (byte-level BPE only)");
  }
  if (model.value("byte_fallback", false)) {
    return fail(error, "a BPE model with byte_fallback (SentencePiece-style, "
                       "not byte-level) is not supported");
  }
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() &&
        !model[key].get<std::string>().empty()) {
      return fail(error, std::string("BPE ") + key + " is not supported");
    }
  }
  if (model.contains("dropout") && model["dropout"].is_number() &&
      model["dropout"].get<double>() > 0) {
    return fail(error, "BPE dropout is not supported");
  }
  ignoreMerges = model.value("ignore_merges", false);
  for (const auto &[token, id] : model.at("vocab").items()) {
    int64_t value = 0;
    if (!readTokenId(id, value)) {
      return fail(error, badId("vocab token '" + token + "'", id));
    }
    vocab[token] = value;
    if (value >= static_cast<int64_t>(idToToken.size())) {
      idToToken.resize(static_cast<size_t>(value) + 1);
    }
    idToToken[static_cast<size_t>(value)] = token;
  }
  int rank = 0;
  for (const json &merge : model.at("merges")) {
    std::string left, right;
    if (merge.is_string()) {
      std::string text = merge.get<std::string>();
      size_t space = text.find(' ');
      if (space == std::string::npos) {
        return fail(error, "merge '" + text + "' is not 'left right'");
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else {
      left = merge.at(0).get<std::string>();
      right = merge.at(1).get<std::string>();
    }
    mergeRanks.emplace(left + ' ' + right, rank++);
  }
  return true;
}

bool ByteLevelBpe::loadAddedTokens(const json &root, std::string &error) {
  if (!root.contains("added_tokens")) {
    return true;
  }
  for (const json &token : root["added_tokens"]) {
    AddedToken added;
    added.content = token.at("content").get<std::string>();
    if (!readTokenId(token.at("id"), added.id)) {
      return fail(error, badId("added token", token.at("id")));
    }
    added.special = token.value("special", false);
    added.lstrip = token.value("lstrip", false);
    added.rstrip = token.value("rstrip", false);
    added.singleWord = token.value("single_word", false);
    if (added.content.empty()) {
      return fail(error,
                  "added token " + std::to_string(added.id) + " is empty");
    }
    if (added.id >= static_cast<int64_t>(idToToken.size())) {
      idToToken.resize(static_cast<size_t>(added.id) + 1);
    }
    idToToken[static_cast<size_t>(added.id)] = added.content;
    addedById[added.id] = addedTokens.size();
    addedTokens.push_back(std::move(added));
  }
  return true;
}

bool ByteLevelBpe::loadNormalizer(const json &normalizer, std::string &error) {
  if (normalizer.is_null()) {
    return true;
  }
  std::string type = normalizer.value("type", "");
  if (type == "Sequence") {
    for (const json &inner : normalizer.at("normalizers")) {
      if (!loadNormalizer(inner, error)) {
        return false;
      }
    }
    return true;
  }
  if (type != "NFC") {
    return fail(error, "normalizer type '" + type +
                           "' is not supported (none or NFC)");
  }
  UErrorCode status = U_ZERO_ERROR;
  nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) {
    return fail(error,
                std::string("ICU's NFC normalizer: ") + u_errorName(status));
  }
  return true;
}

bool ByteLevelBpe::loadPreTokenizer(const json &pre, std::string &error) {
  if (pre.is_null()) {
    return fail(error, "a byte-level BPE needs a ByteLevel pre_tokenizer; "
                       "this file has none");
  }
  std::string type = pre.value("type", "");
  if (type == "Sequence") {
    for (const json &inner : pre.at("pretokenizers")) {
      if (!loadPreTokenizer(inner, error)) {
        return false;
      }
    }
    return true;
  }
  if (byteLevel) {
    return fail(error, "pre_tokenizer '" + type +
                           "' after ByteLevel is not "
                           "supported");
  }
  if (type == "Split") {
    const json &pattern = pre.at("pattern");
    std::string behavior = pre.value("behavior", "");
    if (behavior != "Isolated" || pre.value("invert", false)) {
      return fail(error, "Split pre_tokenizer with behavior '" + behavior +
                             "' (or invert) is not supported (Isolated only)");
    }
    if (pattern.contains("Regex")) {
      return addSplitter(pattern["Regex"].get<std::string>(), error);
    }
    return addSplitter("\\Q" + pattern.at("String").get<std::string>() + "\\E",
                       error);
  }
  if (type != "ByteLevel") {
    return fail(error, "pre_tokenizer type '" + type +
                           "' is not supported (ByteLevel, Split, Sequence)");
  }
  byteLevel = true;
  addPrefixSpace = pre.value("add_prefix_space", false);
  if (pre.value("use_regex", true)) {
    byteLevelRegex = splitters.size();
    return addSplitter(kGpt2Pattern, error);
  }
  return true;
}

bool ByteLevelBpe::loadPostProcessor(const json &post, std::string &error) {
  if (post.is_null()) {
    return true;
  }
  std::string type = post.value("type", "");
  if (type == "Sequence") {
    for (const json &inner : post.at("processors")) {
      if (!loadPostProcessor(inner, error)) {
        return false;
      }
    }
    return true;
  }
  if (type == "ByteLevel") {
    return true; // offsets only
  }
  if (type != "TemplateProcessing") {
    return fail(error, "post_processor type '" + type +
                           "' is not supported (ByteLevel, "
                           "TemplateProcessing)");
  }
  bool afterSequence = false;
  for (const json &item : post.at("single")) {
    if (item.contains("Sequence")) {
      afterSequence = true;
      continue;
    }
    std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const json &special = post.at("special_tokens").at(name);
    for (const json &id : special.at("ids")) {
      int64_t value = 0;
      if (!readTokenId(id, value)) {
        return fail(error, badId("special token '" + name + "'", id));
      }
      (afterSequence ? suffixIds : prefixIds).push_back(value);
    }
  }
  return true;
}

std::unique_ptr<Tokenizer> ByteLevelBpe::load(const std::string &path,
                                              std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot be opened";
    return nullptr;
  }
  json root = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    error = path + ": not a JSON object";
    return nullptr;
  }
  auto tokenizer = std::unique_ptr<ByteLevelBpe>(new ByteLevelBpe(path));
  // at() and get() throw on a missing key or a wrong type: the message says
  // which, and the file is named with it.
  try {
    if (!root.contains("model") ||
        !tokenizer->loadModel(root["model"], error) ||
        !tokenizer->loadAddedTokens(root, error) ||
        !tokenizer->loadNormalizer(root.value("normalizer", json()), error) ||
        !tokenizer->loadPreTokenizer(root.value("pre_tokenizer", json()),
                                     error) ||
        !tokenizer->loadPostProcessor(root.value("post_processor", json()),
                                      error)) {
      if (error.empty()) {
        error = path + ": no model";
      }
      return nullptr;
    }
    std::string decoder = root.contains("decoder") && !root["decoder"].is_null()
                              ? root["decoder"].value("type", "")
                              : "";
    if (decoder != "ByteLevel") {
      error = path + ": decoder type '" + decoder +
              "' is not supported (ByteLevel)";
      return nullptr;
    }
  } catch (const json::exception &e) {
    error = path + ": " + e.what();
    return nullptr;
  }
  if (!tokenizer->byteLevel) {
    error = path + ": the pre_tokenizer has no ByteLevel step (only "
                   "byte-level BPE tokenizer.json files are supported)";
    return nullptr;
  }
  return tokenizer;
}

std::vector<std::string>
ByteLevelBpe::preTokenize(const std::string &text) const {
  std::vector<std::string> pieces{text};
  for (size_t s = 0; s <= splitters.size(); ++s) {
    // ByteLevel's prefix space goes on each piece before its own regex
    // (or, without one, after the last Split).
    bool byteLevelStep =
        byteLevelRegex ? s == *byteLevelRegex : s == splitters.size();
    if (byteLevelStep && addPrefixSpace) {
      for (std::string &piece : pieces) {
        if (piece.empty() || piece[0] != ' ') {
          piece.insert(piece.begin(), ' ');
        }
      }
    }
    if (s == splitters.size()) {
      break;
    }
    std::vector<std::string> next;
    for (const std::string &piece : pieces) {
      icu::UnicodeString unicode = icu::UnicodeString::fromUTF8(piece);
      UErrorCode status = U_ZERO_ERROR;
      std::unique_ptr<icu::RegexMatcher> matcher(
          splitters[s]->pattern->matcher(unicode, status));
      int32_t last = 0;
      while (U_SUCCESS(status) && matcher->find(status)) {
        int32_t begin = matcher->start(status), end = matcher->end(status);
        if (begin > last) {
          next.push_back(fromUnicode(unicode, last, begin));
        }
        if (end > begin) {
          next.push_back(fromUnicode(unicode, begin, end));
        }
        last = end;
      }
      if (last < unicode.length()) {
        next.push_back(fromUnicode(unicode, last, unicode.length()));
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

bool ByteLevelBpe::encodeWord(const std::string &piece,
                              std::vector<int64_t> &ids,
                              std::string &error) const {
  std::vector<std::string> symbols;
  std::string whole;
  for (unsigned char byte : piece) {
    symbols.push_back(byteStandIns()[byte]);
    whole += symbols.back();
  }
  if (ignoreMerges) {
    if (auto found = vocab.find(whole); found != vocab.end()) {
      ids.push_back(found->second);
      return true;
    }
  }
  while (symbols.size() > 1) {
    int bestRank = std::numeric_limits<int>::max();
    size_t best = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto found = mergeRanks.find(symbols[i] + ' ' + symbols[i + 1]);
      if (found != mergeRanks.end() && found->second < bestRank) {
        bestRank = found->second;
        best = i;
      }
    }
    if (bestRank == std::numeric_limits<int>::max()) {
      break;
    }
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  for (const std::string &symbol : symbols) {
    auto found = vocab.find(symbol);
    if (found == vocab.end()) {
      return fail(error, "the vocabulary has no token for the byte-level "
                         "symbol '" +
                             symbol + "'");
    }
    ids.push_back(found->second);
  }
  return true;
}

bool ByteLevelBpe::encodeText(const std::string &text,
                              std::vector<int64_t> &ids,
                              std::string &error) const {
  if (text.empty()) {
    return true;
  }
  std::string normalized = text;
  if (nfc) {
    UErrorCode status = U_ZERO_ERROR;
    icu::UnicodeString unicode =
        nfc->normalize(icu::UnicodeString::fromUTF8(text), status);
    if (U_FAILURE(status)) {
      return fail(error, std::string("NFC failed: ") + u_errorName(status));
    }
    normalized.clear();
    unicode.toUTF8String(normalized);
  }
  for (const std::string &piece : preTokenize(normalized)) {
    if (!encodeWord(piece, ids, error)) {
      return false;
    }
  }
  return true;
}

/// The leftmost longest added-token match at or after `from`: its token
/// index and the span it covers (with lstrip / rstrip blanks).
bool ByteLevelBpe::findAdded(std::string_view text, size_t from, size_t &token,
                             size_t &begin, size_t &end) const {
  for (size_t at = from; at < text.size(); ++at) {
    size_t bestLength = 0;
    for (size_t t = 0; t < addedTokens.size(); ++t) {
      const AddedToken &added = addedTokens[t];
      if (added.content.size() <= bestLength ||
          text.compare(at, added.content.size(), added.content) != 0) {
        continue;
      }
      size_t after = at + added.content.size();
      if (added.singleWord &&
          ((at > 0 && isWordByte(static_cast<unsigned char>(text[at - 1]))) ||
           (after < text.size() &&
            isWordByte(static_cast<unsigned char>(text[after]))))) {
        continue;
      }
      bestLength = added.content.size();
      token = t;
    }
    if (bestLength) {
      begin = at;
      end = at + bestLength;
      const AddedToken &added = addedTokens[token];
      while (added.lstrip && begin > from &&
             std::isspace(static_cast<unsigned char>(text[begin - 1]))) {
        --begin;
      }
      while (added.rstrip && end < text.size() &&
             std::isspace(static_cast<unsigned char>(text[end]))) {
        ++end;
      }
      return true;
    }
  }
  return false;
}

bool ByteLevelBpe::encode(std::string_view text, std::vector<int64_t> &ids,
                          std::string &error) const {
  ids.assign(prefixIds.begin(), prefixIds.end());
  size_t from = 0;
  size_t token = 0, begin = 0, end = 0;
  while (findAdded(text, from, token, begin, end)) {
    if (!encodeText(std::string(text.substr(from, begin - from)), ids, error)) {
      return false;
    }
    ids.push_back(addedTokens[token].id);
    from = end;
  }
  if (!encodeText(std::string(text.substr(from)), ids, error)) {
    return false;
  }
  ids.insert(ids.end(), suffixIds.begin(), suffixIds.end());
  return true;
}

bool ByteLevelBpe::decode(const std::vector<int64_t> &ids, bool skipSpecial,
                          std::string &text, std::string &error) const {
  text.clear();
  for (int64_t id : ids) {
    if (id < 0 || id >= size() || idToToken[static_cast<size_t>(id)].empty()) {
      return fail(error, "token id " + std::to_string(id) +
                             " is not in the vocabulary");
    }
    auto added = addedById.find(id);
    if (added != addedById.end() && skipSpecial &&
        addedTokens[added->second].special) {
      continue;
    }
    // Every character back to its byte; one that stands for no byte (an
    // added token's own text) as its UTF-8 bytes, as tokenizers does.
    const std::string &token = idToToken[static_cast<size_t>(id)];
    for (size_t i = 0; i < token.size();) {
      size_t length = std::min(utf8Length(static_cast<unsigned char>(token[i])),
                               token.size() - i);
      std::string character = token.substr(i, length);
      auto byte = standInBytes().find(character);
      if (byte != standInBytes().end()) {
        text += static_cast<char>(byte->second);
      } else {
        text += character;
      }
      i += length;
    }
  }
  return true;
}

} // namespace tailor::generate
