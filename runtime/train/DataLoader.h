//===- DataLoader.h - token batches from examples or streams ---*- C++ -*-===//
//
// The trainer reads pre-tokenized data in the formats people already have
// (FORMATS.md): nanoGPT `.bin` files (raw little-endian uint16, or uint32 for
// vocabularies over 65535), llm.c shards (a 256 x int32 header, then the
// tokens), a directory or glob of those, JSONL rows of examples, and `dummy`
// (seeded random tokens, for benchmarks and smoke tests).
//
// A JSONL row is one example: `input_ids` with optional `labels` (-100 =
// ignored; labels default to the tokens: the model shifts them, as Hugging
// Face models do), or `prompt` and `completion` token lists (input_ids =
// prompt + completion, labels -100 over the prompt: loss on the completion
// only, as TRL's prompt-completion datasets).
//
// Three layouts turn data into sequences of exactly sequence_len tokens:
//  - padded (JSONL; the recipe's `sample_packing: false`): each example is
//    its own sequence, right-padded with pad_token_id whose labels are -100
//    (exact under a causal model: no real token attends to a later pad), or
//    truncated to sequence_len. Examples left with no trained token are
//    dropped; both are counted in the description and the warning.
//  - packed (JSONL; `sample_packing: true`): examples, truncated and dropped
//    as in padded, are packed greedily in file order: each sequence takes
//    the next examples while they fit, and its remainder is padding
//    (pad_token_id, labels -100). Every sequence comes with position ids
//    that restart at 0 at each example's first token (and at the padding,
//    which counts as one more example), which the plan uses both as the
//    rotary/learned positions and as document masking in attention (the
//    compiler's tailor-pack-sequences), so each example is computed
//    exactly as it would be alone. The label of each example's first token
//    is -100: the model shifts labels (token t predicts label t + 1), and
//    that label would have the previous example's last token predict this
//    example's first one. The loss is then the mean over the counted tokens
//    of the micro-batch, as padded batches give. The packing is fixed when
//    the data is opened; epochs shuffle the packed sequences.
//  - stream (binary files and dummy, which have no example boundaries; and
//    `tailor quantize`'s calibration): everything is concatenated and cut
//    into non-overlapping sequences; a trailing remainder is dropped.
// JSONL rows of exactly sequence_len tokens give the same sequences in
// every layout (and position ids 0..T-1).
//
// Each epoch visits the sequences in a permutation drawn from a seeded PRNG
// (or in file order), and a micro-batch is the next micro_batch_size
// sequences of that order, wrapping into the next epoch. A validation set
// (`val_set_size`) is a seeded choice of examples held out of training; it
// is read in order, micro-batch by micro-batch, by batchAt(). Binary files
// are memory-mapped, never read whole; every token is checked against the
// vocabulary when the data is opened, so a bad file fails before training
// starts rather than hours into it.
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

/// How data becomes sequences (see the file comment).
enum class SequenceLayout {
  /// As the data allows: JSONL examples padded, binary streams and dummy
  /// cut (the recipe leaves `sample_packing` unset).
  ByData,
  /// Each example its own padded or truncated sequence; data without
  /// example boundaries is an error (`sample_packing: false`).
  Padded,
  /// Everything concatenated and cut into sequences (calibration data,
  /// where every sequence must be full).
  Stream,
  /// Examples packed greedily into sequences, with per-example position
  /// ids (`sample_packing: true`); data without example boundaries is an
  /// error.
  Packed,
};

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
  SequenceLayout layout = SequenceLayout::ByData;
  /// The token that pads short examples (their labels are -100).
  int64_t padTokenId = 0;
  /// Examples held out of training for validation: 0 none, a fraction in
  /// (0, 1), or a whole count >= 1. Needs examples (padded layout).
  double valSetSize = 0;
  /// What the description calls the data ("" : the path).
  std::string name;
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
  /// into `inputIds` and `labels` (and, unless null, each token's position
  /// within its example into `positions`: 0..T-1 per row unless packed),
  /// and advances.
  void next(int64_t *inputIds, int64_t *labels, int64_t *positions = nullptr);
  /// Advances past `microBatches` micro-batches without reading them: the
  /// other ranks' share of a global batch (Trainer.h), so every rank's
  /// position stays the global one.
  void skip(uint64_t microBatches);

  /// The examples held out by `valSetSize`, as a loader of their own (in
  /// file order, not shuffled; it shares this loader's storage and may
  /// outlive it); null when nothing is held out.
  std::unique_ptr<DataLoader> heldOut() const;
  /// Micro-batches that cover every sequence once (the last one filled up
  /// with rows of padding whose labels are all -100); 0 for dummy data.
  uint64_t batchesPerPass() const;
  /// Writes micro-batch `batch` of a pass over the sequences in file order
  /// (for validation); does not move the position.
  void batchAt(uint64_t batch, int64_t *inputIds, int64_t *labels,
               int64_t *positions = nullptr) const;

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
  /// A run of the token stream that is one example (padded and packed
  /// layouts).
  struct Example {
    uint64_t start = 0;
    /// At most sequence_len.
    uint64_t length = 0;
    /// Longer than sequence_len in the file.
    bool truncated = false;
  };
  /// A packed sequence: examples [first, first + count) of the list.
  struct Pack {
    uint64_t first = 0;
    uint64_t count = 0;
  };

  DataLoader() = default;
  /// Reads the files; "" or the first problem.
  std::string readFiles(const std::vector<std::string> &files);
  /// Picks the layout and cuts the stream into sequences or examples.
  std::string arrange(const std::string &what);
  std::string arrangeExamples(const std::string &what);
  /// "one per sequence of 16, padded with id 0 (12.5% of the tokens)", or
  /// "packed into 3 sequences of 16, ..." when packed.
  std::string describeExamples(const std::vector<Example> &list) const;
  /// Packs `list` greedily, in order, into sequences of sequence_len.
  std::vector<Pack> packExamples(const std::vector<Example> &list) const;
  void addWarning(const std::string &text);
  /// Moves `valSetSize` examples (a seeded choice) into `held`.
  std::string holdOut(const std::string &what);
  /// Copies `count` tokens of the stream starting at token `start`.
  void copyTokens(uint64_t start, uint64_t count, int64_t *tokens,
                  int64_t *labels) const;
  /// Writes sequence `sequence` (padded if it is a short example or a
  /// pack) and, unless null, its position ids.
  void fillSequence(uint64_t sequence, int64_t *ids, int64_t *labels,
                    int64_t *positions) const;
  /// The sequence at `index` of epoch `epoch`'s order.
  uint64_t sequenceAt(uint64_t epoch, uint64_t index);

  DataOptions options;
  bool dummy = false;
  bool padded = false;
  /// Packed layout (with `padded`: examples, several per sequence).
  bool packed = false;
  std::vector<std::shared_ptr<DataSegment>> segments;
  uint64_t tokens = 0;
  uint64_t sequences = 0;
  /// Padded layout: the examples (one per sequence), and those held out.
  std::vector<Example> examples;
  std::vector<Example> held;
  /// Packed layout: the sequences, as runs of `examples`.
  std::vector<Pack> packs;
  std::string heldDescription;
  /// JSONL rows read (examples before any was left out).
  uint64_t rowsRead = 0;
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
