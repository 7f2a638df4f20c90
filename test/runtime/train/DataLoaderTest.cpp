//===- DataLoaderTest.cpp - formats, examples, padding, splits, resuming --===//

#include "test/runtime/train/TrainTestUtil.h"
#include "runtime/train/DataLoader.h"
#include "runtime/train/Trainer.h"
#include "runtime/train/AtomicFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace tailor::train;
using namespace tailor::train::testing;

namespace {

void writeBytes(const std::string &path, const void *data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char *>(data),
            static_cast<std::streamsize>(size));
}

template <typename T>
void writeTokens(const std::string &path, const std::vector<T> &tokens) {
  writeBytes(path, tokens.data(), tokens.size() * sizeof(T));
}

/// An llm.c shard: the 256 x int32 header, then the tokens.
template <typename T>
void writeShard(const std::string &path, const std::vector<T> &tokens,
                int32_t magic, int32_t version, int32_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count < 0 ? static_cast<int32_t>(tokens.size()) : count;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(header.data()), 1024);
  out.write(reinterpret_cast<const char *>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * sizeof(T)));
}

std::vector<uint16_t> iota16(size_t n, uint16_t start = 0) {
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i) {
    tokens[i] = static_cast<uint16_t>(start + i);
  }
  return tokens;
}

DataOptions options(const std::string &path, int64_t seq, int64_t batch,
                    bool shuffle = false, int64_t vocab = 1000) {
  DataOptions o;
  o.path = path;
  o.sequenceLen = seq;
  o.microBatchSize = batch;
  o.vocabSize = vocab;
  o.shuffle = shuffle;
  o.seed = 7;
  return o;
}

struct Batch {
  std::vector<int64_t> ids, labels;
  bool operator==(const Batch &other) const {
    return ids == other.ids && labels == other.labels;
  }
  bool operator!=(const Batch &other) const { return !(*this == other); }
};

Batch next(DataLoader &loader, const DataOptions &o) {
  Batch batch;
  batch.ids.resize(static_cast<size_t>(o.sequenceLen * o.microBatchSize));
  batch.labels.resize(batch.ids.size());
  loader.next(batch.ids.data(), batch.labels.data());
  return batch;
}

std::unique_ptr<DataLoader> openOk(const DataOptions &o) {
  std::string error;
  auto loader = DataLoader::open(o, error);
  EXPECT_TRUE(loader) << error;
  return loader;
}

std::string openError(const DataOptions &o) {
  std::string error;
  auto loader = DataLoader::open(o, error);
  return loader ? "" : error;
}

TEST(DataLoader, NanoGptBinPacksSequencesAndDropsTheRemainder) {
  TempDir dir;
  std::string path = dir.path + "/train.bin";
  writeTokens(path, iota16(10)); // 2 sequences of 4, 2 tokens dropped
  DataOptions o = options(path, 4, 1);
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  EXPECT_EQ(loader->sequencesPerEpoch(), 2u);
  EXPECT_NE(loader->describe().find("2 dropped"), std::string::npos);
  Batch a = next(*loader, o), b = next(*loader, o), c = next(*loader, o);
  EXPECT_EQ(a.ids, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(a.labels, a.ids); // labels default to the tokens
  EXPECT_EQ(b.ids, (std::vector<int64_t>{4, 5, 6, 7}));
  // Tokens 8, 9 never appear: the next epoch starts over.
  EXPECT_EQ(c.ids, a.ids);
  EXPECT_EQ(loader->position().epoch, 1u);
}

TEST(DataLoader, MicroBatchesWrapIntoTheNextEpoch) {
  TempDir dir;
  std::string path = dir.path + "/d.bin";
  writeTokens(path, iota16(9)); // 3 sequences of 3
  DataOptions o = options(path, 3, 2);
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  next(*loader, o);
  Batch second = next(*loader, o);
  EXPECT_EQ(second.ids, (std::vector<int64_t>{6, 7, 8, 0, 1, 2}));
  EXPECT_EQ(loader->position().epoch, 1u);
  EXPECT_EQ(loader->position().index, 1u);
}

TEST(DataLoader, Uint32BinNeedsTheOption) {
  TempDir dir;
  std::string path = dir.path + "/big.bin";
  writeTokens(path, std::vector<uint32_t>{70000, 1, 2, 99999});
  DataOptions o = options(path, 2, 1, false, 100000);
  o.tokenDType = "uint32";
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  EXPECT_EQ(next(*loader, o).ids, (std::vector<int64_t>{70000, 1}));
  EXPECT_EQ(next(*loader, o).ids, (std::vector<int64_t>{2, 99999}));
  EXPECT_EQ(loader->warning(), "");
  // Read as uint16 the same bytes pass every check: only a warning can
  // point at the mistake.
  o.tokenDType = "uint16";
  loader = openOk(o);
  ASSERT_TRUE(loader);
  EXPECT_NE(loader->warning().find("--data-dtype uint32"), std::string::npos);
}

TEST(DataLoader, LlmcShards) {
  TempDir dir;
  std::string gpt2 = dir.path + "/gpt2.bin";
  writeShard(gpt2, iota16(8, 100), 20240520, 1);
  DataOptions o = options(gpt2, 4, 1);
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  EXPECT_EQ(next(*loader, o).ids, (std::vector<int64_t>{100, 101, 102, 103}));

  std::string llama = dir.path + "/llama.bin";
  writeShard(llama, std::vector<uint32_t>{128000, 5, 6, 7}, 20240801, 7);
  o = options(llama, 4, 1, false, 128256);
  loader = openOk(o);
  ASSERT_TRUE(loader);
  EXPECT_EQ(next(*loader, o).ids, (std::vector<int64_t>{128000, 5, 6, 7}));

  std::string lying = dir.path + "/lying.bin";
  writeShard(lying, iota16(8), 20240520, 1, 9);
  std::string error = openError(options(lying, 4, 1));
  EXPECT_NE(error.find("lying.bin: llm.c header says 9 tokens"),
            std::string::npos)
      << error;
  std::string version = dir.path + "/version.bin";
  writeShard(version, iota16(8), 20240520, 3);
  error = openError(options(version, 4, 1));
  EXPECT_NE(error.find("version.bin: llm.c shard version 3"), std::string::npos)
      << error;
}

TEST(DataLoader, DirectoryAndGlobConcatenateSortedFiles) {
  TempDir dir;
  writeShard(dir.path + "/fw_train_000002.bin", iota16(3, 20), 20240520, 1);
  writeShard(dir.path + "/fw_train_000001.bin", iota16(3, 10), 20240520, 1);
  writeShard(dir.path + "/fw_val_000000.bin", iota16(3, 500), 20240520, 1);
  DataOptions o = options(dir.path, 2, 3);
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  // Sorted, concatenated (a sequence spans the two files), validation
  // shard left out.
  EXPECT_EQ(next(*loader, o).ids,
            (std::vector<int64_t>{10, 11, 12, 20, 21, 22}));
  EXPECT_EQ(loader->sequencesPerEpoch(), 3u);

  o = options(dir.path + "/fw_*_00000[01].bin", 2, 3);
  loader = openOk(o);
  ASSERT_TRUE(loader);
  EXPECT_EQ(next(*loader, o).ids,
            (std::vector<int64_t>{10, 11, 12, 500, 501, 502}));
  EXPECT_NE(openError(options(dir.path + "/nothing*.bin", 2, 1))
                .find("no files match"),
            std::string::npos);
}

TEST(DataLoader, JsonlRowsWithAndWithoutLabels) {
  TempDir dir;
  std::string path = dir.path + "/rows.jsonl";
  std::ofstream(path)
      << "{\"input_ids\": [1, 2, 3], \"labels\": [-100, 2, 3]}\n"
      << "\n"
      << "{\"input_ids\": [4, 5, 6], \"extra\": \"x\"}\n";
  DataOptions o = options(path, 3, 2);
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  Batch batch = next(*loader, o);
  EXPECT_EQ(batch.ids, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(batch.labels, (std::vector<int64_t>{-100, 2, 3, 4, 5, 6}));
}

TEST(DataLoader, JsonlErrorsNameFileAndLine) {
  TempDir dir;
  struct Case {
    const char *text;
    const char *message;
  };
  std::vector<Case> cases = {
      {"{\"input_ids\": [1, 2]}\n{\"input_ids\": [1,\n",
       "rows.jsonl:2: not a JSON object"},
      {"[1, 2]\n", "rows.jsonl:1: not a JSON object"},
      {"{\"labels\": [1]}\n",
       "rows.jsonl:1: the row has neither 'input_ids' nor 'prompt' and "
       "'completion'"},
      {"{\"input_ids\": 3}\n", "rows.jsonl:1: 'input_ids' is not an array"},
      {"{\"input_ids\": [1], \"prompt\": [2], \"completion\": [3]}\n",
       "rows.jsonl:1: the row has both 'input_ids' and "
       "'prompt'/'completion'; give one or the other"},
      {"{\"input_ids\": [1]}\n{\"completion\": [3]}\n",
       "rows.jsonl:2: 'completion' without 'prompt'"},
      {"{\"prompt\": [3]}\n", "rows.jsonl:1: 'prompt' without 'completion'"},
      {"{\"prompt\": [1], \"completion\": [2], \"labels\": [1, 2]}\n",
       "rows.jsonl:1: 'labels' cannot go with 'prompt' and 'completion'"},
      {"{\"prompt\": [1], \"completion\": [2, 1000]}\n",
       "rows.jsonl:1: 'completion'[1] = 1000 is not in [0, 1000)"},
      {"{\"input_ids\": [1, 2.5]}\n",
       "rows.jsonl:1: 'input_ids'[1] is not an integer"},
      {"{\"input_ids\": [1, 2], \"labels\": [1]}\n",
       "rows.jsonl:1: 'labels' has 1 entries but 'input_ids' has 2"},
      {"{\"input_ids\": [1, 1000]}\n",
       "rows.jsonl:1: 'input_ids'[1] = 1000 is not in [0, 1000)"},
      {"{\"input_ids\": [-1]}\n", "rows.jsonl:1: 'input_ids'[0] = -1"},
      {"{\"input_ids\": [1], \"labels\": [-5]}\n",
       "rows.jsonl:1: 'labels'[0] = -5"},
  };
  for (const Case &c : cases) {
    std::string path = dir.path + "/rows.jsonl";
    std::ofstream(path) << c.text;
    std::string error = openError(options(path, 1, 1));
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.text << " -> " << error;
  }
}

TEST(DataLoader, RejectsBadTokensAndShortFiles) {
  TempDir dir;
  std::string path = dir.path + "/bad.bin";
  std::vector<uint16_t> tokens = iota16(16);
  tokens[13] = 50257;
  writeTokens(path, tokens);
  std::string error = openError(options(path, 4, 1, false, 50257));
  EXPECT_NE(error.find("bad.bin: token 50257 at position 13 is not below the "
                       "vocabulary size 50257"),
            std::string::npos)
      << error;

  std::string shortPath = dir.path + "/short.bin";
  writeTokens(shortPath, iota16(5));
  error = openError(options(shortPath, 8, 1));
  EXPECT_NE(error.find("short.bin: 5 tokens, fewer than one sequence of 8"),
            std::string::npos)
      << error;

  std::string odd = dir.path + "/odd.bin";
  writeBytes(odd, "abc", 3);
  error = openError(options(odd, 1, 1));
  EXPECT_NE(error.find("odd.bin: file size 3 is not a multiple of 2"),
            std::string::npos)
      << error;

  error = openError(options(dir.path + "/missing.bin", 1, 1));
  EXPECT_NE(error.find("missing.bin: cannot open"), std::string::npos) << error;
}

TEST(DataLoader, ShufflingIsASeededPermutationPerEpoch) {
  std::vector<uint64_t> order = shuffledOrder(10, 42);
  std::vector<uint64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(sorted[i], i);
  }
  EXPECT_EQ(order, shuffledOrder(10, 42));
  EXPECT_NE(order, shuffledOrder(10, 43));
  // Pinned: checkpoints resume into this order, so it must not change
  // between versions (std::mt19937_64 itself is fixed by the standard).
  EXPECT_EQ(order, (std::vector<uint64_t>{1, 7, 9, 0, 3, 8, 4, 2, 5, 6}));

  TempDir dir;
  std::string path = dir.path + "/d.bin";
  writeTokens(path, iota16(64)); // 16 sequences of 4
  DataOptions o = options(path, 4, 1, /*shuffle=*/true);
  auto first = openOk(o);
  auto second = openOk(o);
  ASSERT_TRUE(first && second);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int64_t> starts;
    std::vector<int64_t> seen;
    for (int i = 0; i < 16; ++i) {
      Batch a = next(*first, o);
      EXPECT_EQ(a, next(*second, o));
      EXPECT_EQ(a.ids[0] % 4, 0);
      EXPECT_EQ(a.ids[3], a.ids[0] + 3); // sequences stay whole
      starts.insert(a.ids[0]);
      seen.push_back(a.ids[0]);
    }
    EXPECT_EQ(starts.size(), 16u) << "epoch " << epoch;
    std::vector<int64_t> fileOrder = seen;
    std::sort(fileOrder.begin(), fileOrder.end());
    EXPECT_NE(seen, fileOrder);
  }
}

TEST(DataLoader, PositionRestoresTheSameBatches) {
  TempDir dir;
  std::string path = dir.path + "/d.bin";
  writeTokens(path, iota16(40)); // 10 sequences of 4
  for (bool shuffle : {false, true}) {
    DataOptions o = options(path, 4, 3, shuffle);
    auto loader = openOk(o);
    ASSERT_TRUE(loader);
    for (int i = 0; i < 3; ++i) {
      next(*loader, o);
    }
    DataPosition saved = loader->position();
    std::vector<Batch> expected;
    for (int i = 0; i < 5; ++i) { // crosses into epochs 1 and 2
      expected.push_back(next(*loader, o));
    }
    auto resumed = openOk(o);
    std::string error;
    ASSERT_TRUE(resumed->setPosition(saved, error)) << error;
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(next(*resumed, o), expected[static_cast<size_t>(i)])
          << "shuffle " << shuffle << " batch " << i;
    }
    EXPECT_FALSE(resumed->setPosition({0, 10}, error));
    EXPECT_NE(error.find("does not fit"), std::string::npos) << error;
  }
}

TEST(DataLoader, RanksReadTheirShareOfTheOneRankBatches) {
  // What the trainer does on N ranks with A micro-batches each: rank r
  // skips r x A micro-batches, reads A, skips the rest of the global
  // batch. Together the ranks must read exactly what one rank reading
  // N x A micro-batches a step reads, in order, across shuffled epochs,
  // and every rank's position must stay the one rank's.
  TempDir dir;
  std::string path = dir.path + "/d.bin";
  writeTokens(path, iota16(44)); // 11 sequences of 4: epochs cut batches
  for (std::string source : {path, std::string("dummy")}) {
    for (int world : {2, 3}) {
      const int64_t accumulation = 2;
      DataOptions o = options(source, 4, 2, /*shuffle=*/true, 50);
      auto single = openOk(o);
      std::vector<std::unique_ptr<DataLoader>> ranks;
      for (int r = 0; r < world; ++r) {
        ranks.push_back(openOk(o));
      }
      for (int step = 0; step < 7; ++step) {
        for (int r = 0; r < world; ++r) {
          DataLoader &rank = *ranks[static_cast<size_t>(r)];
          int64_t first = tailor::train::firstMicroBatchOfRank(r, accumulation);
          rank.skip(static_cast<uint64_t>(first));
          for (int64_t micro = 0; micro < accumulation; ++micro) {
            ASSERT_EQ(next(rank, o), next(*single, o))
                << source << " world " << world << " step " << step
                << " rank " << r << " micro " << micro;
          }
          rank.skip(static_cast<uint64_t>((world - r - 1) * accumulation));
        }
        for (const auto &rank : ranks) {
          EXPECT_EQ(rank->position().epoch, single->position().epoch);
          EXPECT_EQ(rank->position().index, single->position().index);
        }
      }
    }
  }
}

TEST(DataLoader, DummyIsSeededUniformAndResumable) {
  DataOptions o = options("dummy", 64, 2, true, 50);
  auto a = openOk(o);
  auto b = openOk(o);
  ASSERT_TRUE(a && b);
  std::set<int64_t> values;
  for (int i = 0; i < 20; ++i) {
    Batch x = next(*a, o);
    EXPECT_EQ(x, next(*b, o));
    EXPECT_EQ(x.labels, x.ids);
    values.insert(x.ids.begin(), x.ids.end());
  }
  EXPECT_EQ(*values.begin(), 0);
  EXPECT_EQ(*values.rbegin(), 49);
  EXPECT_EQ(values.size(), 50u);
  DataPosition saved = a->position();
  Batch expected = next(*a, o);
  auto c = openOk(o);
  std::string error;
  ASSERT_TRUE(c->setPosition(saved, error)) << error;
  EXPECT_EQ(next(*c, o), expected);

  o.seed = 8;
  auto other = openOk(o);
  EXPECT_NE(next(*other, o),
            next(*openOk(options("dummy", 64, 2, true, 50)), o));
  EXPECT_NE(openError(options("dummy", 4, 1, false, 0)), "");
}

//===----------------------------------------------------------------------===//
// Examples: one per sequence, padded or truncated; prompt and completion;
// validation splits
//===----------------------------------------------------------------------===//

/// Writes `rows` (JSON objects) one a line.
std::string writeJsonl(const std::string &path,
                       const std::vector<std::string> &rows) {
  std::ofstream out(path);
  for (const std::string &row : rows) {
    out << row << "\n";
  }
  return path;
}

constexpr int64_t I = -100; // an ignored label

TEST(DataLoader, JsonlExamplesArePaddedOrTruncatedOnePerSequence) {
  TempDir dir;
  std::string path = writeJsonl(
      dir.path + "/rows.jsonl",
      {"{\"input_ids\": [1, 2]}", "{\"input_ids\": [3, 4, 5, 6, 7, 8]}",
       "{\"input_ids\": [9, 10, 11], \"labels\": [-100, 10, -100]}",
       "{\"input_ids\": [12, 13, 14, 15]}"});
  DataOptions o = options(path, 4, 2);
  o.padTokenId = 99;
  o.vocabSize = 100;
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  EXPECT_EQ(loader->sequencesPerEpoch(), 4u);
  Batch a = next(*loader, o), b = next(*loader, o);
  // Pads take pad_token_id and label -100; the long example is cut at 4.
  EXPECT_EQ(a.ids, (std::vector<int64_t>{1, 2, 99, 99, 3, 4, 5, 6}));
  EXPECT_EQ(a.labels, (std::vector<int64_t>{1, 2, I, I, 3, 4, 5, 6}));
  EXPECT_EQ(b.ids, (std::vector<int64_t>{9, 10, 11, 99, 12, 13, 14, 15}));
  EXPECT_EQ(b.labels, (std::vector<int64_t>{I, 10, I, I, 12, 13, 14, 15}));
  EXPECT_EQ(next(*loader, o), a); // epoch 1 starts over
  EXPECT_NE(loader->describe().find("rows.jsonl: 4 examples, one per sequence "
                                    "of 4 (1 truncated), padded with id 99 "
                                    "(18.8% of the tokens), in file order"),
            std::string::npos)
      << loader->describe();
  EXPECT_NE(loader->warning().find("1 of 4 examples are longer than "
                                   "sequence_len 4 and were truncated (2 "
                                   "tokens cut)"),
            std::string::npos)
      << loader->warning();

  // The pad id must be a token.
  o.padTokenId = 100;
  EXPECT_NE(openError(o).find("pad_token_id 100 is not a token id in [0, "
                              "100)"),
            std::string::npos);
}

TEST(DataLoader, PromptCompletionTrainsOnTheCompletionOnly) {
  TempDir dir;
  std::string path =
      writeJsonl(dir.path + "/pc.jsonl",
                 {"{\"prompt\": [5, 6, 7], \"completion\": [8, 9]}",
                  "{\"prompt\": [], \"completion\": [1, 2, 3]}",
                  "{\"prompt\": [4, 4, 4, 4, 4], \"completion\": [3, 3]}"});
  DataOptions o = options(path, 6, 1);
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  Batch a = next(*loader, o), b = next(*loader, o);
  EXPECT_EQ(a.ids, (std::vector<int64_t>{5, 6, 7, 8, 9, 0}));
  EXPECT_EQ(a.labels, (std::vector<int64_t>{I, I, I, 8, 9, I}));
  EXPECT_EQ(b.ids, (std::vector<int64_t>{1, 2, 3, 0, 0, 0}));
  EXPECT_EQ(b.labels, (std::vector<int64_t>{1, 2, 3, I, I, I}));
  // Truncated after one completion token: it still trains on that one.
  Batch c = next(*loader, o);
  EXPECT_EQ(c.ids, (std::vector<int64_t>{4, 4, 4, 4, 4, 3}));
  EXPECT_EQ(c.labels, (std::vector<int64_t>{I, I, I, I, I, 3}));
  EXPECT_EQ(loader->sequencesPerEpoch(), 3u);

  // In the stream layout (calibration data) the same rows concatenate.
  o.layout = SequenceLayout::Stream;
  o.sequenceLen = 4;
  auto stream = openOk(o);
  ASSERT_TRUE(stream);
  Batch first = next(*stream, o);
  EXPECT_EQ(first.ids, (std::vector<int64_t>{5, 6, 7, 8}));
  EXPECT_EQ(first.labels, (std::vector<int64_t>{I, I, I, 8}));
}

TEST(DataLoader, ExamplesWithNothingToTrainAreLeftOutAndCounted) {
  TempDir dir;
  std::string path = writeJsonl(
      dir.path + "/rows.jsonl",
      {"{\"input_ids\": []}", "{\"input_ids\": [1, 2, 3]}",
       // Only the first label counts for nothing (it is never predicted).
       "{\"input_ids\": [4, 5], \"labels\": [4, -100]}",
       "{\"prompt\": [1, 2], \"completion\": []}",
       // Its completion lies past sequence_len.
       "{\"prompt\": [1, 2, 3, 4], \"completion\": [5]}"});
  DataOptions o = options(path, 4, 1);
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  EXPECT_EQ(loader->sequencesPerEpoch(), 1u);
  EXPECT_EQ(next(*loader, o).ids, (std::vector<int64_t>{1, 2, 3, 0}));
  EXPECT_NE(loader->describe().find("4 left out (nothing to train)"),
            std::string::npos)
      << loader->describe();
  EXPECT_NE(loader->warning().find("4 of 5 examples have no token to train "
                                   "on"),
            std::string::npos)
      << loader->warning();

  std::string none = writeJsonl(dir.path + "/none.jsonl",
                                {"{\"prompt\": [1], \"completion\": []}"});
  EXPECT_NE(openError(options(none, 4, 1))
                .find("none.jsonl: none of the 1 examples has a token to "
                      "train on"),
            std::string::npos);
}

TEST(DataLoader, RowsOfSequenceLenGiveTheSameBatchesInEitherLayout) {
  TempDir dir;
  std::vector<std::string> rows;
  for (int i = 0; i < 12; ++i) {
    std::string ids;
    for (int t = 0; t < 4; ++t) {
      ids += (t ? ", " : "") + std::to_string(i * 4 + t);
    }
    rows.push_back("{\"input_ids\": [" + ids + "]}");
  }
  std::string path = writeJsonl(dir.path + "/rows.jsonl", rows);
  for (bool shuffle : {false, true}) {
    DataOptions padded = options(path, 4, 3, shuffle);
    DataOptions stream = padded;
    stream.layout = SequenceLayout::Stream;
    DataOptions explicitPadded = padded;
    explicitPadded.layout = SequenceLayout::Padded;
    auto a = openOk(padded), b = openOk(stream), c = openOk(explicitPadded);
    ASSERT_TRUE(a && b && c);
    for (int i = 0; i < 10; ++i) { // 4 batches an epoch: crosses 2 epochs
      Batch x = next(*a, padded);
      EXPECT_EQ(x, next(*b, stream)) << "shuffle " << shuffle << " " << i;
      EXPECT_EQ(x, next(*c, explicitPadded));
    }
    EXPECT_NE(a->describe().find("12 examples, one per sequence of 4, no "
                                 "padding"),
              std::string::npos)
        << a->describe();
  }
}

/// A micro-batch with position ids.
struct PackedBatch {
  std::vector<int64_t> ids, labels, positions;
};

PackedBatch nextPacked(DataLoader &loader, const DataOptions &o) {
  PackedBatch batch;
  batch.ids.resize(static_cast<size_t>(o.sequenceLen * o.microBatchSize));
  batch.labels.resize(batch.ids.size());
  batch.positions.resize(batch.ids.size());
  loader.next(batch.ids.data(), batch.labels.data(), batch.positions.data());
  return batch;
}

TEST(DataLoader, PackedExamplesRestartPositionsAndNeverPredictAcross) {
  TempDir dir;
  std::string path = writeJsonl(
      dir.path + "/rows.jsonl",
      {"{\"input_ids\": [1, 2, 3]}", "{\"input_ids\": [4, 5]}",
       "{\"input_ids\": [6, 7, 8, 9], \"labels\": [6, -100, 8, 9]}",
       // Longer than sequence_len: truncated to 6, a sequence of its own.
       "{\"input_ids\": [10, 11, 12, 13, 14, 15, 16, 17]}",
       "{\"prompt\": [20, 21], \"completion\": [22]}",
       // Nothing to train: left out before packing.
       "{\"input_ids\": [30], \"labels\": [30]}"});
  DataOptions o = options(path, 6, 2);
  o.layout = SequenceLayout::Packed;
  o.padTokenId = 99;
  o.vocabSize = 100;
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  // [1 2 3 | 4 5] [6 7 8 9] [10..15] [20 21 22]: greedy, in file order.
  EXPECT_EQ(loader->sequencesPerEpoch(), 4u);
  PackedBatch a = nextPacked(*loader, o), b = nextPacked(*loader, o);
  EXPECT_EQ(a.ids, (std::vector<int64_t>{1, 2, 3, 4, 5, 99, //
                                         6, 7, 8, 9, 99, 99}));
  // Each example's first label is -100 (token 3 must not predict 4), pads
  // are -100.
  EXPECT_EQ(a.labels, (std::vector<int64_t>{I, 2, 3, I, 5, I, //
                                            I, I, 8, 9, I, I}));
  // Positions restart per example, and at the padding.
  EXPECT_EQ(a.positions, (std::vector<int64_t>{0, 1, 2, 0, 1, 0, //
                                               0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(b.ids, (std::vector<int64_t>{10, 11, 12, 13, 14, 15, //
                                         20, 21, 22, 99, 99, 99}));
  EXPECT_EQ(b.labels, (std::vector<int64_t>{I, 11, 12, 13, 14, 15, //
                                            I, I, 22, I, I, I}));
  EXPECT_EQ(b.positions, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, //
                                               0, 1, 2, 0, 1, 2}));
  EXPECT_NE(loader->describe().find(
                "rows.jsonl: 5 examples, packed into 4 sequences of 6 with "
                "per-example positions (1 truncated), padded with id 99 "
                "(25.0% of the tokens), 1 left out"),
            std::string::npos)
      << loader->describe();

  // Validation passes pack the same way, and fill past the end with pads.
  std::vector<int64_t> ids(12), labels(12), positions(12);
  loader->batchAt(1, ids.data(), labels.data(), positions.data());
  EXPECT_EQ(ids, b.ids);
  EXPECT_EQ(positions, b.positions);

  // Shuffled, the packs stay whole: every epoch is a permutation of them.
  o.shuffle = true;
  auto shuffled = openOk(o);
  ASSERT_TRUE(shuffled);
  std::multiset<std::vector<int64_t>> seen, want = {
      {1, 2, 3, 4, 5, 99}, {6, 7, 8, 9, 99, 99},
      {10, 11, 12, 13, 14, 15}, {20, 21, 22, 99, 99, 99}};
  for (int i = 0; i < 2; ++i) {
    PackedBatch x = nextPacked(*shuffled, o);
    seen.insert(std::vector<int64_t>(x.ids.begin(), x.ids.begin() + 6));
    seen.insert(std::vector<int64_t>(x.ids.begin() + 6, x.ids.end()));
  }
  EXPECT_EQ(seen, want);
}

TEST(DataLoader, PackedHeldOutExamplesArePackedToo) {
  TempDir dir;
  std::vector<std::string> rows;
  for (int i = 0; i < 10; ++i) {
    rows.push_back("{\"input_ids\": [" + std::to_string(i) + ", " +
                   std::to_string(i + 10) + "]}");
  }
  std::string path = writeJsonl(dir.path + "/rows.jsonl", rows);
  DataOptions o = options(path, 4, 1);
  o.layout = SequenceLayout::Packed;
  o.valSetSize = 4;
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  // 6 training examples of 2 tokens, two per sequence of 4.
  EXPECT_EQ(loader->sequencesPerEpoch(), 3u);
  auto held = loader->heldOut();
  ASSERT_TRUE(held);
  EXPECT_EQ(held->sequencesPerEpoch(), 2u);
  std::vector<int64_t> ids(4), labels(4), positions(4);
  held->batchAt(0, ids.data(), labels.data(), positions.data());
  EXPECT_EQ(positions, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(labels[0], I);
  EXPECT_EQ(labels[2], I);
  EXPECT_NE(held->describe().find("packed into 2 sequences of 4"),
            std::string::npos)
      << held->describe();
}

TEST(DataLoader, UnpackedLayoutsGivePositionsFromZero) {
  TempDir dir;
  std::string path = writeJsonl(dir.path + "/rows.jsonl",
                                {"{\"input_ids\": [1, 2]}"});
  DataOptions o = options(path, 4, 1);
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  PackedBatch a = nextPacked(*loader, o);
  EXPECT_EQ(a.positions, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(a.labels, (std::vector<int64_t>{1, 2, I, I}));
}

TEST(DataLoader, StreamsHaveNoExamplesToPadOrHoldOut) {
  TempDir dir;
  std::string bin = dir.path + "/train.bin";
  writeTokens(bin, iota16(16));
  DataOptions o = options(bin, 4, 1);
  o.layout = SequenceLayout::Padded;
  EXPECT_NE(openError(o).find("train.bin: a binary token stream has no "
                              "example boundaries, so sample_packing: false"),
            std::string::npos)
      << openError(o);
  o.layout = SequenceLayout::ByData;
  o.valSetSize = 0.5;
  EXPECT_NE(openError(o).find("val_set_size needs examples to hold out"),
            std::string::npos)
      << openError(o);

  o.layout = SequenceLayout::Packed;
  o.valSetSize = 0;
  EXPECT_NE(openError(o).find("train.bin: a binary token stream has no "
                              "example boundaries, so sample_packing: true"),
            std::string::npos)
      << openError(o);

  DataOptions dummy = options("dummy", 4, 1, false, 50);
  dummy.layout = SequenceLayout::Padded;
  EXPECT_NE(openError(dummy).find("dummy data is an endless token stream"),
            std::string::npos);
  dummy.layout = SequenceLayout::Packed;
  EXPECT_NE(openError(dummy).find("sample_packing: true (examples packed "
                                  "with their own positions) cannot apply"),
            std::string::npos)
      << openError(dummy);

  // A directory of both kinds: which one the user meant is unclear.
  writeJsonl(dir.path + "/train.jsonl", {"{\"input_ids\": [1, 2]}"});
  std::string mixed = openError(options(dir.path, 4, 1));
  EXPECT_NE(mixed.find("mixes JSONL examples"), std::string::npos) << mixed;
  DataOptions stream = options(dir.path, 2, 1);
  stream.layout = SequenceLayout::Stream;
  EXPECT_TRUE(openOk(stream));
}

/// The first ids of every sequence a loader yields in one pass (batchAt).
std::vector<int64_t> firstIds(const DataLoader &loader, const DataOptions &o) {
  std::vector<int64_t> out;
  Batch batch;
  batch.ids.resize(static_cast<size_t>(o.sequenceLen * o.microBatchSize));
  batch.labels.resize(batch.ids.size());
  for (uint64_t b = 0; b < loader.batchesPerPass(); ++b) {
    loader.batchAt(b, batch.ids.data(), batch.labels.data());
    for (int64_t row = 0; row < o.microBatchSize; ++row) {
      out.push_back(batch.ids[static_cast<size_t>(row * o.sequenceLen)]);
    }
  }
  return out;
}

TEST(DataLoader, ValSetSizeHoldsOutASeededChoiceOfExamples) {
  TempDir dir;
  std::vector<std::string> rows;
  for (int i = 0; i < 10; ++i) {
    rows.push_back("{\"input_ids\": [" + std::to_string(i + 1) + ", 50, " +
                   std::to_string(i + 1) + "]}");
  }
  std::string path = writeJsonl(dir.path + "/rows.jsonl", rows);
  DataOptions o = options(path, 4, 2, /*shuffle=*/true);
  o.padTokenId = 0;
  o.valSetSize = 0.25; // ceil(2.5) = 3 examples
  auto loader = openOk(o);
  ASSERT_TRUE(loader);
  std::unique_ptr<DataLoader> held = loader->heldOut();
  ASSERT_TRUE(held);
  EXPECT_EQ(loader->sequencesPerEpoch(), 7u);
  EXPECT_EQ(held->sequencesPerEpoch(), 3u);
  EXPECT_EQ(held->batchesPerPass(), 2u);
  EXPECT_NE(loader->describe().find("3 held out for validation"),
            std::string::npos);
  EXPECT_NE(held->describe().find("3 examples held out (val_set_size 0.25, "
                                  "seed 7)"),
            std::string::npos)
      << held->describe();

  // Held out in file order, the last batch filled with an empty row.
  std::vector<int64_t> heldIds = firstIds(*held, o);
  ASSERT_EQ(heldIds.size(), 4u);
  EXPECT_TRUE(std::is_sorted(heldIds.begin(), heldIds.begin() + 3));
  EXPECT_EQ(heldIds[3], 0);
  Batch last;
  last.ids.resize(8);
  last.labels.resize(8);
  held->batchAt(1, last.ids.data(), last.labels.data());
  EXPECT_EQ(std::vector<int64_t>(last.labels.begin() + 4, last.labels.end()),
            (std::vector<int64_t>{I, I, I, I}));

  // Training never sees a held-out example, over several epochs.
  std::set<int64_t> trained;
  for (int i = 0; i < 14; ++i) {
    Batch batch = next(*loader, o);
    trained.insert(batch.ids[0]);
    trained.insert(batch.ids[4]);
  }
  EXPECT_EQ(trained.size(), 7u);
  for (int64_t id :
       std::vector<int64_t>(heldIds.begin(), heldIds.begin() + 3)) {
    EXPECT_EQ(trained.count(id), 0u) << id;
  }

  // The same seed holds out the same examples; another seed, others.
  EXPECT_EQ(firstIds(*openOk(o)->heldOut(), o), heldIds);
  DataOptions other = o;
  other.seed = 8;
  EXPECT_NE(firstIds(*openOk(other)->heldOut(), other), heldIds);

  // A count, and the sizes that leave nothing to train on or are neither.
  DataOptions count = o;
  count.valSetSize = 2;
  EXPECT_EQ(openOk(count)->heldOut()->sequencesPerEpoch(), 2u);
  count.valSetSize = 10;
  EXPECT_NE(openError(count).find("rows.jsonl: val_set_size 10 holds out 10 "
                                  "of the 10 examples, leaving none to train "
                                  "on"),
            std::string::npos)
      << openError(count);
  count.valSetSize = 2.5;
  EXPECT_NE(openError(count).find("val_set_size 2.5 is neither a fraction in "
                                  "(0, 1) nor a whole count of examples"),
            std::string::npos);
  count.valSetSize = 0;
  EXPECT_FALSE(openOk(count)->heldOut());
}

} // namespace
