//===- DataLoader.h - packed, shuffled token batches ------------*- C++ -*-===//
//
// The trainer reads pre-tokenized data in the formats people already have
// (FORMATS.md): nanoGPT `.bin` files (raw little-endian uint16, or uint32 for
// vocabularies over 65535), llm.c shards (a 256 x int32 header, then the
// tokens), a directory or glob of those, JSONL rows with `input_ids` and
// optional `labels` (-100 = ignored), and `dummy` (seeded random tokens, for
// benchmarks and smoke tests).
//
// Everything is concatenated into one token stream (labels default to the
// tokens: the model shifts them, as Hugging Face models do) and cut into
// non-overlapping sequences of exactly sequence_len tokens; a trailing
// remainder is dropped. Each epoch visits the sequences in a permutation
// drawn from a seeded PRNG (or in file order), and a micro-batch is the next
// micro_batch_size sequences of that order, wrapping into the next epoch.
// Binary files are memory-mapped, never read whole; every token is checked
// against the vocabulary when the data is opened, so a bad file fails before
// training starts rather than hours into it.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TRAIN_DATALOADER_H
#define TAILOR_RUNTIME_TRAIN_DATALOADER_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tailor::train {

/// A run of the token stream (one file); defined in DataLoader.cpp.
struct DataSegment;

struct DataOptions {
  /// A file, a directory (its `.bin`/`.jsonl` files; only those whose name
  /// contains "train" if any does, so llm.c's and nanoGPT's validation
  /// files stay out), a glob, or "dummy".
  std::string path;
  /// Element type of raw `.bin` files: "uint16" (nanoGPT) or "uint32".
  /// llm.c shards carry their own in the header.
  std::string tokenDType = "uint16";
  int64_t sequenceLen = 0;
  int64_t microBatchSize = 1;
  /// Token ids must lie in [0, vocabSize); 0 skips the check (files only).
  int64_t vocabSize = 0;
  bool shuffle = true;
  uint64_t seed = 0;
};

/// Where the loader is: the next sequence is number `index` (0-based) of
/// epoch `epoch`'s order. Saving and restoring it continues the exact same
/// batch sequence.
struct DataPosition {
  uint64_t epoch = 0;
  uint64_t index = 0;
};

class DataLoader {
public:
  /// Opens and validates the data; null and an error naming the file (and
  /// line or token position) on failure.
  static std::unique_ptr<DataLoader> open(const DataOptions &options,
                                          std::string &error);
  ~DataLoader();
  DataLoader(const DataLoader &) = delete;
  DataLoader &operator=(const DataLoader &) = delete;

  /// Writes the next micro-batch, micro_batch_size x sequence_len row-major,
  /// into `inputIds` and `labels`, and advances.
  void next(int64_t *inputIds, int64_t *labels);

  DataPosition position() const { return pos; }
  /// Moves to `position` (from a checkpoint); fails if it does not fit this
  /// data.
  bool setPosition(DataPosition position, std::string &error);

  /// Sequences in one epoch; 0 for the endless `dummy` source.
  uint64_t sequencesPerEpoch() const { return sequences; }
  /// Epochs completed, with the fraction of the current one.
  double epochProgress() const;
  /// One line for the log: what was read and how it was packed.
  std::string describe() const { return description; }
  /// Something about the data worth a warning, or "".
  std::string warning() const { return warningText; }

private:
  DataLoader() = default;
  /// Copies `count` tokens of the stream starting at token `start`.
  void copyTokens(uint64_t start, uint64_t count, int64_t *tokens,
                  int64_t *labels) const;
  /// The sequence at `index` of epoch `epoch`'s order.
  uint64_t sequenceAt(uint64_t epoch, uint64_t index);

  DataOptions options;
  bool dummy = false;
  std::vector<std::unique_ptr<DataSegment>> segments;
  uint64_t tokens = 0;
  uint64_t sequences = 0;
  DataPosition pos;
  std::vector<uint64_t> order;
  uint64_t orderEpoch = UINT64_MAX;
  std::string description;
  std::string warningText;
};

/// The permutation of [0, n) that shuffling uses for `seed`: Fisher-Yates
/// over std::mt19937_64 with an unbiased bounded draw, written out so every
/// standard library gives the same order.
std::vector<uint64_t> shuffledOrder(uint64_t n, uint64_t seed);

} // namespace tailor::train

#endif // TAILOR_RUNTIME_TRAIN_DATALOADER_H
