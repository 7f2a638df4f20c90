//===- DataLoader.cpp - packed, shuffled token batches for training -------===//

#include "runtime/train/DataLoader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
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
  /// JSONL files: parsed ids and labels.
  std::vector<int64_t> ownedTokens;
  std::vector<int64_t> ownedLabels;

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

/// Reads a JSON array of integer ids; `what` names it in errors.
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

/// Parses a JSONL file into `segment`: one object per line.
static std::string openJsonl(const std::string &path,
                             const DataOptions &options, DataSegment &segment) {
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
    size_t before = segment.ownedTokens.size();
    if (std::string problem = readIds(row, "input_ids", segment.ownedTokens,
                                      options.vocabSize, false);
        !problem.empty()) {
      return where + problem;
    }
    size_t added = segment.ownedTokens.size() - before;
    if (row.contains("labels")) {
      if (std::string problem = readIds(row, "labels", segment.ownedLabels,
                                        options.vocabSize, true);
          !problem.empty()) {
        return where + problem;
      }
      if (segment.ownedLabels.size() != segment.ownedTokens.size()) {
        return where + "'labels' has " +
               std::to_string(segment.ownedLabels.size() - before) +
               " entries but 'input_ids' has " + std::to_string(added);
      }
    } else {
      segment.ownedLabels.insert(segment.ownedLabels.end(),
                                 segment.ownedTokens.begin() + before,
                                 segment.ownedTokens.end());
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

std::unique_ptr<DataLoader> DataLoader::open(const DataOptions &options,
                                             std::string &error) {
  std::unique_ptr<DataLoader> loader(new DataLoader());
  loader->options = options;
  if (options.sequenceLen <= 0 || options.microBatchSize <= 0) {
    error = "sequence_len and micro_batch_size must be positive";
    return nullptr;
  }
  if (options.tokenDType != "uint16" && options.tokenDType != "uint32") {
    error = "unknown token dtype '" + options.tokenDType +
            "' (expected uint16 or uint32)";
    return nullptr;
  }
  if (options.path == "dummy") {
    if (options.vocabSize <= 0) {
      error = "dummy data needs the plan's vocab_size";
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
  for (const std::string &path : files) {
    auto segment = std::make_unique<DataSegment>();
    segment->path = path;
    segment->start = loader->tokens;
    std::string problem = endsWith(path, ".jsonl")
                              ? openJsonl(path, options, *segment)
                              : openBinary(path, options, *segment);
    if (!problem.empty()) {
      error = problem;
      return nullptr;
    }
    loader->tokens += segment->count;
    if (segment->count > 0) {
      loader->segments.push_back(std::move(segment));
    }
  }
  uint64_t length = static_cast<uint64_t>(options.sequenceLen);
  loader->sequences = loader->tokens / length;
  // 32-bit tokens read as 16-bit ones pass every check (each high half is a
  // small id), so say so when the vocabulary suggests it.
  bool raw16 = std::any_of(loader->segments.begin(), loader->segments.end(),
                           [](const auto &s) { return s->raw16; });
  if (raw16 && options.vocabSize > 65536) {
    loader->warningText =
        "headerless .bin data is read as uint16 but the vocabulary has " +
        std::to_string(options.vocabSize) +
        " entries; pass --data-dtype uint32 if the tokens are 32-bit";
  }
  std::string what =
      files.size() == 1
          ? files[0]
          : options.path + " (" + std::to_string(files.size()) + " files)";
  if (loader->sequences == 0) {
    error = what + ": " + std::to_string(loader->tokens) +
            " tokens, fewer than one sequence of " + std::to_string(length) +
            " (sequence_len)";
    return nullptr;
  }
  loader->description =
      what + ": " + std::to_string(loader->tokens) + " tokens, " +
      std::to_string(loader->sequences) + " sequences of " +
      std::to_string(length) + " (" + std::to_string(loader->tokens % length) +
      " dropped), " + (options.shuffle ? "shuffled" : "in file order");
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

void DataLoader::next(int64_t *inputIds, int64_t *labels) {
  uint64_t length = static_cast<uint64_t>(options.sequenceLen);
  for (int64_t row = 0; row < options.microBatchSize; ++row) {
    int64_t *ids = inputIds + row * length;
    int64_t *rowLabels = labels + row * length;
    if (dummy) {
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
    uint64_t sequence = sequenceAt(pos.epoch, pos.index);
    copyTokens(sequence * length, length, ids, rowLabels);
    if (++pos.index == sequences) {
      pos.index = 0;
      ++pos.epoch;
    }
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
