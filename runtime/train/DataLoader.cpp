//===- DataLoader.cpp - token batches from examples or streams ------------===//

#include "runtime/train/DataLoader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <glob.h>
#include <limits>
#include <random>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tailor::train {

using nlohmann::json;

/// llm.c's shard headers: 256 int32s, [0] magic, [1] version, [2] tokens.
constexpr int32_t kShardMagicGpt2 = 20240520;   // version 1, uint16 tokens
constexpr int32_t kShardMagicLlama3 = 20240801; // version 7, uint32 tokens
constexpr uint64_t kShardHeaderBytes = 256 * 4;
/// The label value that the loss ignores (PyTorch's ignore_index).
constexpr int64_t kIgnoreIndex = -100;

struct DataSegment {
  std::string path;
  /// The first token of the segment in the whole stream.
  uint64_t start = 0;
  uint64_t count = 0;
  /// Mapped files: 2 or 4 bytes per token at `data` (labels = tokens).
  const uint8_t *data = nullptr;
  unsigned elementSize = 0;
  /// A headerless file read as uint16 (nanoGPT's format).
  bool raw16 = false;
  void *mapping = nullptr;
  size_t mappingSize = 0;
  /// JSONL files: parsed ids and labels, and where each row (example)
  /// starts in them.
  std::vector<int64_t> ownedTokens;
  std::vector<int64_t> ownedLabels;
  std::vector<uint64_t> rowStarts;
  bool jsonl = false;

  ~DataSegment() {
    if (mapping) {
      ::munmap(mapping, mappingSize);
    }
  }
};

DataLoader::~DataLoader() = default;

static uint64_t splitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<uint64_t> shuffledOrder(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> order(n);
  for (uint64_t i = 0; i < n; ++i) {
    order[i] = i;
  }
  // std::uniform_int_distribution differs between libstdc++ and libc++;
  // this draw (reject the lowest (2^64 - bound) % bound values) does not.
  std::mt19937_64 rng(seed);
  for (uint64_t i = n; i > 1; --i) {
    uint64_t threshold = (0 - i) % i;
    uint64_t x = rng();
    while (x < threshold) {
      x = rng();
    }
    std::swap(order[i - 1], order[x % i]);
  }
  return order;
}

//===----------------------------------------------------------------------===//
// Finding and opening files
//===----------------------------------------------------------------------===//

static bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The files `path` names, in stream order.
static bool listFiles(const std::string &path, std::vector<std::string> &files,
                      std::string &error) {
  if (path.find_first_of("*?[") != std::string::npos) {
    glob_t matches;
    if (::glob(path.c_str(), GLOB_ERR, nullptr, &matches) == 0) {
      for (size_t i = 0; i < matches.gl_pathc; ++i) {
        files.push_back(matches.gl_pathv[i]);
      }
    }
    ::globfree(&matches);
    if (files.empty()) {
      error = path + ": no files match";
      return false;
    }
    std::sort(files.begin(), files.end());
    return true;
  }
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  if (!S_ISDIR(info.st_mode)) {
    files.push_back(path);
    return true;
  }
  DIR *dir = ::opendir(path.c_str());
  if (!dir) {
    error = path + ": cannot list: " + std::strerror(errno);
    return false;
  }
  std::vector<std::string> names;
  while (struct dirent *entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (endsWith(name, ".bin") || endsWith(name, ".jsonl")) {
      names.push_back(name);
    }
  }
  ::closedir(dir);
  // llm.c writes *_train_*.bin and *_val_*.bin side by side, nanoGPT
  // train.bin and val.bin: training on a directory means its training files.
  bool anyTrain = std::any_of(names.begin(), names.end(), [](const auto &n) {
    return n.find("train") != std::string::npos;
  });
  for (const std::string &name : names) {
    if (!anyTrain || name.find("train") != std::string::npos) {
      files.push_back(path + "/" + name);
    }
  }
  if (files.empty()) {
    error = path + ": the directory holds no .bin or .jsonl files";
    return false;
  }
  std::sort(files.begin(), files.end());
  return true;
}

/// Checks ids against the vocabulary: a max reduction (which vectorizes),
/// and a search for the culprit only when it fails.
template <typename T>
static std::string checkVocabulary(const T *ids, uint64_t count,
                                   int64_t vocabSize, const std::string &path) {
  if (vocabSize <= 0 ||
      static_cast<uint64_t>(vocabSize) >
          static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    return "";
  }
  T largest = 0;
  for (uint64_t i = 0; i < count; ++i) {
    largest = std::max(largest, ids[i]);
  }
  if (static_cast<int64_t>(largest) < vocabSize) {
    return "";
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (static_cast<int64_t>(ids[i]) >= vocabSize) {
      return path + ": token " + std::to_string(ids[i]) + " at position " +
             std::to_string(i) + " is not below the vocabulary size " +
             std::to_string(vocabSize);
    }
  }
  return "";
}

/// Maps a nanoGPT .bin file or an llm.c shard into `segment`.
static std::string openBinary(const std::string &path,
                              const DataOptions &options,
                              DataSegment &segment) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return path + ": cannot open: " + std::strerror(errno);
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return path + ": not a regular file";
  }
  uint64_t size = static_cast<uint64_t>(info.st_size);
  if (size > 0) {
    segment.mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (segment.mapping == MAP_FAILED) {
      segment.mapping = nullptr;
      std::string message = path + ": cannot map: " + std::strerror(errno);
      ::close(fd);
      return message;
    }
    segment.mappingSize = size;
  }
  ::close(fd);
  const uint8_t *bytes = static_cast<const uint8_t *>(segment.mapping);

  int32_t header[3] = {0, 0, 0};
  if (size >= kShardHeaderBytes) {
    std::memcpy(header, bytes, sizeof(header));
  }
  uint64_t dataOffset = 0;
  if (header[0] == kShardMagicGpt2 || header[0] == kShardMagicLlama3) {
    bool gpt2 = header[0] == kShardMagicGpt2;
    int32_t version = gpt2 ? 1 : 7;
    if (header[1] != version) {
      return path + ": llm.c shard version " + std::to_string(header[1]) +
             " is not the expected " + std::to_string(version);
    }
    segment.elementSize = gpt2 ? 2 : 4;
    dataOffset = kShardHeaderBytes;
    uint64_t held = (size - dataOffset) / segment.elementSize;
    if (header[2] < 0 || (size - dataOffset) % segment.elementSize != 0 ||
        static_cast<uint64_t>(header[2]) != held) {
      return path + ": llm.c header says " + std::to_string(header[2]) +
             " tokens but the file holds " + std::to_string(size - dataOffset) +
             " bytes of tokens";
    }
  } else {
    segment.elementSize = options.tokenDType == "uint32" ? 4 : 2;
    segment.raw16 = segment.elementSize == 2;
    if (size % segment.elementSize != 0) {
      return path + ": file size " + std::to_string(size) +
             " is not a multiple of " + std::to_string(segment.elementSize) +
             " (" + options.tokenDType + " tokens)";
    }
  }
  segment.data = bytes + dataOffset;
  segment.count = (size - dataOffset) / segment.elementSize;
  // The vocabulary scan reads the file once front to back; training then
  // reads sequence-sized pieces, in a random order when shuffling.
  if (size > 0) {
    ::madvise(segment.mapping, size, MADV_SEQUENTIAL);
  }
  std::string problem =
      segment.elementSize == 2
          ? checkVocabulary(reinterpret_cast<const uint16_t *>(segment.data),
                            segment.count, options.vocabSize, path)
          : checkVocabulary(reinterpret_cast<const uint32_t *>(segment.data),
                            segment.count, options.vocabSize, path);
  if (size > 0) {
    ::madvise(segment.mapping, size,
              options.shuffle ? MADV_RANDOM : MADV_NORMAL);
  }
  return problem;
}

/// Appends the JSON array of integer ids `row[key]` to `out`; "" or the
/// problem, naming the key and index.
static std::string readIds(const json &row, const char *key,
                           std::vector<int64_t> &out, int64_t vocabSize,
                           bool isLabels) {
  auto it = row.find(key);
  if (it == row.end() || !it->is_array()) {
    return std::string("'") + key + "' is not an array";
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json &value = (*it)[i];
    if (!value.is_number_integer()) {
      return std::string("'") + key + "'[" + std::to_string(i) +
             "] is not an integer";
    }
    int64_t id = value.is_number_unsigned()
                     ? static_cast<int64_t>(
                           std::min<uint64_t>(value.get<uint64_t>(), INT64_MAX))
                     : value.get<int64_t>();
    bool ignored = isLabels && id == kIgnoreIndex;
    if (!ignored && (id < 0 || (vocabSize > 0 && id >= vocabSize))) {
      return std::string("'") + key + "'[" + std::to_string(i) +
             "] = " + std::to_string(id) + " is not in [0, " +
             std::to_string(vocabSize) + ")" + (isLabels ? " or -100" : "");
    }
    out.push_back(id);
  }
  return "";
}

/// Appends an `input_ids` row (optional `labels`) to `segment`.
static std::string readInputIdsRow(const json &row, int64_t vocabSize,
                                   DataSegment &segment) {
  size_t before = segment.ownedTokens.size();
  if (std::string problem =
          readIds(row, "input_ids", segment.ownedTokens, vocabSize, false);
      !problem.empty()) {
    return problem;
  }
  size_t added = segment.ownedTokens.size() - before;
  if (!row.contains("labels")) {
    segment.ownedLabels.insert(segment.ownedLabels.end(),
                               segment.ownedTokens.begin() + before,
                               segment.ownedTokens.end());
    return "";
  }
  if (std::string problem =
          readIds(row, "labels", segment.ownedLabels, vocabSize, true);
      !problem.empty()) {
    return problem;
  }
  if (segment.ownedLabels.size() != segment.ownedTokens.size()) {
    return "'labels' has " +
           std::to_string(segment.ownedLabels.size() - before) +
           " entries but 'input_ids' has " + std::to_string(added);
  }
  return "";
}

/// Appends a `prompt` + `completion` row to `segment`: the loss is on the
/// completion only, so the prompt's labels are -100.
static std::string readPromptCompletionRow(const json &row, int64_t vocabSize,
                                           DataSegment &segment) {
  for (const char *key : {"prompt", "completion"}) {
    if (!row.contains(key)) {
      return std::string("'") + (key[0] == 'p' ? "completion" : "prompt") +
             "' without '" + key + "'";
    }
  }
  if (row.contains("labels")) {
    return "'labels' cannot go with 'prompt' and 'completion' (the "
           "completion is what is trained)";
  }
  size_t before = segment.ownedTokens.size();
  if (std::string problem =
          readIds(row, "prompt", segment.ownedTokens, vocabSize, false);
      !problem.empty()) {
    return problem;
  }
  segment.ownedLabels.insert(segment.ownedLabels.end(),
                             segment.ownedTokens.size() - before, kIgnoreIndex);
  size_t middle = segment.ownedTokens.size();
  if (std::string problem =
          readIds(row, "completion", segment.ownedTokens, vocabSize, false);
      !problem.empty()) {
    return problem;
  }
  segment.ownedLabels.insert(segment.ownedLabels.end(),
                             segment.ownedTokens.begin() + middle,
                             segment.ownedTokens.end());
  return "";
}

/// Appends one JSONL row (one example) to `segment`, or leaves it as it
/// was and says what is wrong with the row.
static std::string readRow(const json &row, int64_t vocabSize,
                           DataSegment &segment) {
  bool ids = row.contains("input_ids");
  bool promptCompletion = row.contains("prompt") || row.contains("completion");
  if (ids && promptCompletion) {
    return "the row has both 'input_ids' and 'prompt'/'completion'; give one "
           "or the other";
  }
  if (!ids && !promptCompletion) {
    return "the row has neither 'input_ids' nor 'prompt' and 'completion'";
  }
  uint64_t start = segment.ownedTokens.size();
  std::string problem = ids ? readInputIdsRow(row, vocabSize, segment)
                            : readPromptCompletionRow(row, vocabSize, segment);
  if (!problem.empty()) {
    return problem;
  }
  segment.rowStarts.push_back(start);
  return "";
}

/// Parses a JSONL file into `segment`: one object (example) per line.
static std::string openJsonl(const std::string &path,
                             const DataOptions &options, DataSegment &segment) {
  segment.jsonl = true;
  std::ifstream file(path);
  if (!file) {
    return path + ": cannot open: " + std::strerror(errno);
  }
  std::string line;
  for (uint64_t lineNumber = 1; std::getline(file, line); ++lineNumber) {
    std::string where = path + ":" + std::to_string(lineNumber) + ": ";
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      continue;
    }
    json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.is_object()) {
      return where + "not a JSON object";
    }
    if (std::string problem = readRow(row, options.vocabSize, segment);
        !problem.empty()) {
      return where + problem;
    }
  }
  if (file.bad()) {
    return path + ": read error";
  }
  segment.count = segment.ownedTokens.size();
  return "";
}

//===----------------------------------------------------------------------===//
// DataLoader
//===----------------------------------------------------------------------===//

/// Checks the options that do not depend on the data; "" or the problem.
static std::string checkOptions(const DataOptions &options) {
  if (options.sequenceLen <= 0 || options.microBatchSize <= 0) {
    return "sequence_len and micro_batch_size must be positive";
  }
  if (options.tokenDType != "uint16" && options.tokenDType != "uint32") {
    return "unknown token dtype '" + options.tokenDType +
           "' (expected uint16 or uint32)";
  }
  double size = options.valSetSize;
  if (!(size >= 0) || (size >= 1 && size != std::floor(size)) || size > 1e15) {
    char text[64];
    std::snprintf(text, sizeof(text), "%g", size);
    return std::string("val_set_size ") + text +
           " is neither a fraction in (0, 1) nor a whole count of examples";
  }
  if (options.padTokenId < 0 ||
      (options.vocabSize > 0 && options.padTokenId >= options.vocabSize)) {
    return "pad_token_id " + std::to_string(options.padTokenId) +
           " is not a token id in [0, " + std::to_string(options.vocabSize) +
           ")";
  }
  return "";
}

std::unique_ptr<DataLoader> DataLoader::open(const DataOptions &options,
                                             std::string &error) {
  std::unique_ptr<DataLoader> loader(new DataLoader());
  loader->options = options;
  if (std::string problem = checkOptions(options); !problem.empty()) {
    error = problem;
    return nullptr;
  }
  if (options.path == "dummy") {
    if (options.vocabSize <= 0) {
      error = "dummy data needs the plan's vocab_size";
      return nullptr;
    }
    bool examplesNeeded = options.layout == SequenceLayout::Padded ||
                          options.layout == SequenceLayout::Packed;
    if (examplesNeeded || options.valSetSize > 0) {
      error = std::string("dummy data is an endless token stream without "
                          "examples, so ") +
              (options.valSetSize > 0 ? "it has none to hold out for "
                                        "val_set_size"
               : options.layout == SequenceLayout::Packed
                   ? "sample_packing: true (examples packed with their own "
                     "positions) cannot apply"
                   : "sample_packing: false (one example per sequence) "
                     "cannot apply");
      return nullptr;
    }
    loader->dummy = true;
    loader->description = "dummy: random tokens below " +
                          std::to_string(options.vocabSize) + ", seed " +
                          std::to_string(options.seed);
    return loader;
  }

  std::vector<std::string> files;
  if (!listFiles(options.path, files, error)) {
    return nullptr;
  }
  if (std::string problem = loader->readFiles(files); !problem.empty()) {
    error = problem;
    return nullptr;
  }
  std::string what =
      !options.name.empty() ? options.name
      : files.size() == 1
          ? files[0]
          : options.path + " (" + std::to_string(files.size()) + " files)";
  if (std::string problem = loader->arrange(what); !problem.empty()) {
    error = problem;
    return nullptr;
  }
  return loader;
}

std::string DataLoader::readFiles(const std::vector<std::string> &files) {
  for (const std::string &path : files) {
    auto segment = std::make_shared<DataSegment>();
    segment->path = path;
    segment->start = tokens;
    std::string problem = endsWith(path, ".jsonl")
                              ? openJsonl(path, options, *segment)
                              : openBinary(path, options, *segment);
    if (!problem.empty()) {
      return problem;
    }
    tokens += segment->count;
    rowsRead += segment->rowStarts.size();
    if (segment->count > 0) {
      segments.push_back(std::move(segment));
    }
  }
  // 32-bit tokens read as 16-bit ones pass every check (each high half is a
  // small id), so say so when the vocabulary suggests it.
  bool raw16 = std::any_of(segments.begin(), segments.end(),
                           [](const auto &s) { return s->raw16; });
  if (raw16 && options.vocabSize > 65536) {
    addWarning("headerless .bin data is read as uint16 but the vocabulary "
               "has " +
               std::to_string(options.vocabSize) +
               " entries; pass --data-dtype uint32 if the tokens are 32-bit");
  }
  return "";
}

void DataLoader::addWarning(const std::string &text) {
  warningText += (warningText.empty() ? "" : "; ") + text;
}

std::string DataLoader::arrange(const std::string &what) {
  const DataSegment *firstJsonl = nullptr, *firstBinary = nullptr;
  for (const auto &segment : segments) {
    const DataSegment *&first = segment->jsonl ? firstJsonl : firstBinary;
    first = first ? first : segment.get();
  }
  switch (options.layout) {
  case SequenceLayout::Stream:
    padded = false;
    break;
  case SequenceLayout::Padded:
  case SequenceLayout::Packed:
    if (firstBinary) {
      bool packing = options.layout == SequenceLayout::Packed;
      return firstBinary->path +
             ": a binary token stream has no example boundaries, so " +
             (packing ? "sample_packing: true (examples packed with their "
                        "own positions)"
                      : "sample_packing: false (one example per sequence)") +
             " cannot apply; use JSONL examples" +
             (packing ? "" : " or leave sample_packing unset");
    }
    padded = true;
    packed = options.layout == SequenceLayout::Packed;
    break;
  case SequenceLayout::ByData:
    if (firstJsonl && firstBinary) {
      return what + " mixes JSONL examples (" + firstJsonl->path +
             ") with binary token streams (" + firstBinary->path +
             "); give one kind";
    }
    padded = firstJsonl != nullptr || segments.empty();
    break;
  }
  if (padded) {
    return arrangeExamples(what);
  }
  if (options.valSetSize > 0) {
    return what + ": val_set_size needs examples to hold out, and a token "
                  "stream has none; pass validation data with --eval-data";
  }
  uint64_t length = static_cast<uint64_t>(options.sequenceLen);
  sequences = tokens / length;
  if (sequences == 0) {
    return what + ": " + std::to_string(tokens) +
           " tokens, fewer than one sequence of " + std::to_string(length) +
           " (sequence_len)";
  }
  description = what + ": " + std::to_string(tokens) + " tokens, " +
                std::to_string(sequences) + " sequences of " +
                std::to_string(length) + " (" +
                std::to_string(tokens % length) + " dropped), " +
                (options.shuffle ? "shuffled" : "in file order");
  return "";
}

/// Whether the example of `length` tokens from `labels` has a token that
/// counts in the loss: label t is predicted from token t - 1, so the first
/// label never counts.
static bool hasTrainedToken(const int64_t *labels, uint64_t length) {
  for (uint64_t i = 1; i < length; ++i) {
    if (labels[i] != kIgnoreIndex) {
      return true;
    }
  }
  return false;
}

std::string DataLoader::arrangeExamples(const std::string &what) {
  uint64_t length = static_cast<uint64_t>(options.sequenceLen);
  uint64_t truncated = 0, cut = 0;
  for (const auto &segment : segments) {
    const std::vector<uint64_t> &starts = segment->rowStarts;
    for (size_t row = 0; row < starts.size(); ++row) {
      uint64_t end = row + 1 < starts.size() ? starts[row + 1] : segment->count;
      uint64_t size = end - starts[row];
      bool longer = size > length;
      if (longer) {
        ++truncated;
        cut += size - length;
        size = length;
      }
      if (hasTrainedToken(segment->ownedLabels.data() + starts[row], size)) {
        examples.push_back({segment->start + starts[row], size, longer});
      }
    }
  }
  uint64_t dropped = rowsRead - examples.size();
  if (examples.empty()) {
    return what + ": none of the " + std::to_string(rowsRead) +
           " examples has a token to train on (a label other than -100 "
           "after the first position)";
  }
  if (options.valSetSize > 0) {
    if (std::string problem = holdOut(what); !problem.empty()) {
      return problem;
    }
  }
  if (packed) {
    packs = packExamples(examples);
  }
  sequences = packed ? packs.size() : examples.size();
  std::string rows = " of " + std::to_string(rowsRead) + " examples ";
  if (truncated > 0) {
    addWarning(std::to_string(truncated) + rows +
               "are longer than sequence_len " + std::to_string(length) +
               " and were truncated (" + std::to_string(cut) + " tokens cut)");
  }
  if (dropped > 0) {
    addWarning(std::to_string(dropped) + rows +
               "have no token to train on (empty, or every label after the "
               "first is -100) and were left out");
  }
  description = what + ": " + std::to_string(examples.size()) +
                " examples, " + describeExamples(examples);
  if (dropped > 0) {
    description +=
        ", " + std::to_string(dropped) + " left out (nothing to train)";
  }
  if (!held.empty()) {
    description +=
        ", " + std::to_string(held.size()) + " held out for validation";
  }
  description += options.shuffle ? ", shuffled" : ", in file order";
  return "";
}

std::string
DataLoader::describeExamples(const std::vector<Example> &list) const {
  uint64_t length = static_cast<uint64_t>(options.sequenceLen);
  uint64_t real = 0, truncated = 0;
  for (const Example &example : list) {
    real += example.length;
    truncated += example.truncated;
  }
  uint64_t count = packed ? packExamples(list).size() : list.size();
  uint64_t total = count * length;
  std::string text =
      packed ? "packed into " + std::to_string(count) + " sequences of " +
                   std::to_string(length) + " with per-example positions"
             : "one per sequence of " + std::to_string(length);
  if (truncated > 0) {
    text += " (" + std::to_string(truncated) + " truncated)";
  }
  if (real == total) {
    return text + ", no padding";
  }
  char share[32];
  std::snprintf(share, sizeof(share), "%.1f%%",
                100.0 * static_cast<double>(total - real) /
                    static_cast<double>(total));
  return text + ", padded with id " + std::to_string(options.padTokenId) +
         " (" + share + " of the tokens)";
}

std::vector<DataLoader::Pack>
DataLoader::packExamples(const std::vector<Example> &list) const {
  uint64_t length = static_cast<uint64_t>(options.sequenceLen);
  std::vector<Pack> result;
  uint64_t used = length; // no open sequence yet
  for (uint64_t i = 0; i < list.size(); ++i) {
    if (used + list[i].length > length) {
      result.push_back({i, 0});
      used = 0;
    }
    ++result.back().count;
    used += list[i].length;
  }
  return result;
}

std::string DataLoader::holdOut(const std::string &what) {
  uint64_t n = examples.size();
  double size = options.valSetSize;
  // A fraction rounds up, as datasets' train_test_split does.
  uint64_t count =
      size < 1 ? static_cast<uint64_t>(std::ceil(size * static_cast<double>(n)))
               : static_cast<uint64_t>(size);
  char text[64];
  std::snprintf(text, sizeof(text), "%g", size);
  if (count >= n) {
    return what + ": val_set_size " + text + " holds out " +
           std::to_string(count) + " of the " + std::to_string(n) +
           " examples, leaving none to train on";
  }
  // A seeded choice (its own stream, not epoch 0's order), kept in file
  // order on both sides.
  std::vector<uint64_t> order =
      shuffledOrder(n, splitMix64(options.seed ^ 0x76616c6964617465ull));
  std::vector<char> isHeld(n, 0);
  for (uint64_t i = 0; i < count; ++i) {
    isHeld[order[i]] = 1;
  }
  std::vector<Example> kept;
  for (uint64_t i = 0; i < n; ++i) {
    (isHeld[i] ? held : kept).push_back(examples[i]);
  }
  examples = std::move(kept);
  heldDescription = what + ": " + std::to_string(held.size()) +
                    " examples held out (val_set_size " + text + ", seed " +
                    std::to_string(options.seed) + "), ";
  return "";
}

std::unique_ptr<DataLoader> DataLoader::heldOut() const {
  if (held.empty()) {
    return nullptr;
  }
  std::unique_ptr<DataLoader> loader(new DataLoader());
  loader->options = options;
  loader->options.shuffle = false;
  loader->options.valSetSize = 0;
  loader->padded = true;
  loader->packed = packed;
  loader->segments = segments;
  loader->tokens = tokens;
  loader->rowsRead = held.size();
  loader->examples = held;
  if (packed) {
    loader->packs = packExamples(held);
  }
  loader->sequences = packed ? loader->packs.size() : held.size();
  loader->description = heldDescription + describeExamples(held);
  return loader;
}

void DataLoader::copyTokens(uint64_t start, uint64_t count, int64_t *ids,
                            int64_t *labels) const {
  // The segment holding `start`: the last one that begins at or before it.
  auto it = std::upper_bound(segments.begin(), segments.end(), start,
                             [](uint64_t value, const auto &segment) {
                               return value < segment->start;
                             });
  size_t index = static_cast<size_t>(it - segments.begin()) - 1;
  while (count > 0) {
    const DataSegment &segment = *segments[index];
    uint64_t offset = start - segment.start;
    uint64_t take = std::min(count, segment.count - offset);
    if (segment.elementSize == 2) {
      const uint16_t *in = reinterpret_cast<const uint16_t *>(segment.data);
      for (uint64_t i = 0; i < take; ++i) {
        ids[i] = labels[i] = in[offset + i];
      }
    } else if (segment.elementSize == 4) {
      const uint32_t *in = reinterpret_cast<const uint32_t *>(segment.data);
      for (uint64_t i = 0; i < take; ++i) {
        ids[i] = labels[i] = in[offset + i];
      }
    } else {
      std::copy_n(segment.ownedTokens.begin() + offset, take, ids);
      std::copy_n(segment.ownedLabels.begin() + offset, take, labels);
    }
    ids += take;
    labels += take;
    start += take;
    count -= take;
    ++index;
  }
}

uint64_t DataLoader::sequenceAt(uint64_t epoch, uint64_t index) {
  if (!options.shuffle) {
    return index;
  }
  if (orderEpoch != epoch) {
    order = shuffledOrder(sequences, options.seed + epoch);
    orderEpoch = epoch;
  }
  return order[index];
}

/// Positions 0, 1, ... over `count` tokens (null: nothing to write).
static void countUp(int64_t *positions, uint64_t count) {
  for (uint64_t i = 0; positions && i < count; ++i) {
    positions[i] = static_cast<int64_t>(i);
  }
}

void DataLoader::next(int64_t *inputIds, int64_t *labels,
                      int64_t *positions) {
  uint64_t length = static_cast<uint64_t>(options.sequenceLen);
  for (int64_t row = 0; row < options.microBatchSize; ++row) {
    int64_t *ids = inputIds + row * length;
    int64_t *rowLabels = labels + row * length;
    int64_t *rowPositions = positions ? positions + row * length : nullptr;
    if (dummy) {
      countUp(rowPositions, length);
      // Counter-based, so any position can be resumed without replaying.
      uint64_t base = splitMix64(options.seed ^ 0x7461696c6f72ull);
      for (uint64_t t = 0; t < length; ++t) {
        uint64_t bits = splitMix64(base ^ splitMix64(pos.index * length + t));
        ids[t] = rowLabels[t] =
            static_cast<int64_t>((static_cast<unsigned __int128>(bits) *
                                  static_cast<uint64_t>(options.vocabSize)) >>
                                 64);
      }
      ++pos.index;
      continue;
    }
    fillSequence(sequenceAt(pos.epoch, pos.index), ids, rowLabels,
                 rowPositions);
    if (++pos.index == sequences) {
      pos.index = 0;
      ++pos.epoch;
    }
  }
}

void DataLoader::skip(uint64_t microBatches) {
  uint64_t rows = microBatches * static_cast<uint64_t>(options.microBatchSize);
  if (dummy || sequences == 0) {
    pos.index += rows;
    return;
  }
  uint64_t index = pos.index + rows;
  pos.epoch += index / sequences;
  pos.index = index % sequences;
}

void DataLoader::fillSequence(uint64_t sequence, int64_t *ids,
                              int64_t *labels, int64_t *positions) const {
  uint64_t length = static_cast<uint64_t>(options.sequenceLen);
  if (!padded) {
    copyTokens(sequence * length, length, ids, labels);
    countUp(positions, length);
    return;
  }
  uint64_t used = 0;
  Pack one = {sequence, 1};
  const Pack &pack = packed ? packs[sequence] : one;
  for (uint64_t i = pack.first; i < pack.first + pack.count; ++i) {
    const Example &example = examples[i];
    copyTokens(example.start, example.length, ids + used, labels + used);
    countUp(positions ? positions + used : nullptr, example.length);
    // Label t + 1 is what token t predicts: the previous example's last
    // token must not predict this one's first. (The first label of a
    // sequence never counts anyway; padded rows keep theirs as read.)
    if (packed) {
      labels[used] = kIgnoreIndex;
    }
    used += example.length;
  }
  // Right padding: under a causal mask no real token sees a pad, and the
  // pads' labels do not count, so the loss is that of the examples alone.
  // Packed, the pads are one more example (positions from 0); one example
  // per row, the row counts 0..T-1 through them.
  std::fill(ids + used, ids + length, options.padTokenId);
  std::fill(labels + used, labels + length, kIgnoreIndex);
  if (packed) {
    countUp(positions ? positions + used : nullptr, length - used);
  } else {
    countUp(positions, length);
  }
}

uint64_t DataLoader::batchesPerPass() const {
  uint64_t batch = static_cast<uint64_t>(options.microBatchSize);
  return dummy ? 0 : (sequences + batch - 1) / batch;
}

void DataLoader::batchAt(uint64_t batch, int64_t *inputIds, int64_t *labels,
                         int64_t *positions) const {
  uint64_t length = static_cast<uint64_t>(options.sequenceLen);
  uint64_t rows = static_cast<uint64_t>(options.microBatchSize);
  for (uint64_t row = 0; row < rows; ++row) {
    int64_t *ids = inputIds + row * length;
    int64_t *rowLabels = labels + row * length;
    int64_t *rowPositions = positions ? positions + row * length : nullptr;
    uint64_t sequence = batch * rows + row;
    if (!dummy && sequence < sequences) {
      fillSequence(sequence, ids, rowLabels, rowPositions);
      continue;
    }
    // Past the last sequence: a row that counts for nothing.
    std::fill(ids, ids + length, options.padTokenId);
    std::fill(rowLabels, rowLabels + length, kIgnoreIndex);
    countUp(rowPositions, length);
  }
}

bool DataLoader::setPosition(DataPosition position, std::string &error) {
  if (dummy ? position.epoch != 0 : position.index >= sequences) {
    error = "data position (epoch " + std::to_string(position.epoch) +
            ", sequence " + std::to_string(position.index) + ") does not fit " +
            options.path + " (" + std::to_string(sequences) +
            " sequences per epoch)";
    return false;
  }
  pos = position;
  return true;
}

double DataLoader::epochProgress() const {
  if (dummy || sequences == 0) {
    return 0;
  }
  return static_cast<double>(pos.epoch) +
         static_cast<double>(pos.index) / static_cast<double>(sequences);
}

} // namespace tailor::train
