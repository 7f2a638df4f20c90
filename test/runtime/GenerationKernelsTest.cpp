//===- GenerationKernelsTest.cpp - the KV cache write ---------------------===//
//
// kv_cache_write (runtime/cpu/GenerationKernels.cpp) against an index loop
// written here: exact bits (it only moves bytes), the other rows of the
// cache untouched, a prefill chunk's rows past the cache dropped, and
// positions outside the cache refused when it runs.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <set>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

TEST(GenerationKernelsTest, WritesOneRowPerHeadAndKeepsTheRest) {
  const int64_t b = 2, h = 3, n = 5, d = 4;
  Buffer cache = randomBuffer({b, h, n, d}, -1, 1, 7);
  Buffer before = cache;
  Buffer value = randomBuffer({b, h, 1, d}, -1, 1, 8);
  std::set<int64_t> written;
  for (int64_t position : {int64_t(0), int64_t(3), n - 1}) {
    written.insert(position);
    Buffer where = scalar(DType::I64, double(position));
    ASSERT_EQ(runKernel("kv_cache_write", {&value, &where, &cache}), "");
    for (int64_t bh = 0; bh < b * h; ++bh) {
      for (int64_t s = 0; s < n; ++s) {
        for (int64_t j = 0; j < d; ++j) {
          int64_t at = (bh * n + s) * d + j;
          double want = written.count(s) ? value.at(bh * d + j) : before.at(at);
          ASSERT_EQ(cache.at(at), want) << "head " << bh << " row " << s;
        }
      }
    }
  }
}

TEST(GenerationKernelsTest, WritesAChunkAndDropsRowsPastTheCache) {
  const int64_t b = 2, h = 3, n = 7, c = 3, d = 4;
  // Chunks at 0, 3 (the middle) and 5 (its last row, 7, falls past the
  // cache and is dropped, as a padded tail chunk's rows are).
  for (int64_t start : {int64_t(0), int64_t(3), int64_t(5), n - 1}) {
    Buffer cache = randomBuffer({b, h, n, d}, -1, 1, 9);
    Buffer before = cache;
    Buffer value = randomBuffer({b, h, c, d}, -1, 1, 10 + start);
    Buffer where = scalar(DType::I64, double(start));
    ASSERT_EQ(runKernel("kv_cache_write", {&value, &where, &cache}), "");
    for (int64_t bh = 0; bh < b * h; ++bh) {
      for (int64_t s = 0; s < n; ++s) {
        for (int64_t j = 0; j < d; ++j) {
          int64_t at = (bh * n + s) * d + j;
          bool written = s >= start && s < start + c;
          double want = written ? value.at((bh * c + s - start) * d + j)
                                : before.at(at);
          ASSERT_EQ(cache.at(at), want)
              << "start " << start << " head " << bh << " row " << s;
        }
      }
    }
  }
}

TEST(GenerationKernelsTest, RefusesPositionsOutsideTheCache) {
  Buffer cache(DType::F32, {1, 2, 4, 8});
  Buffer value(DType::F32, {1, 2, 1, 8});
  Buffer past = scalar(DType::I64, 4);
  Buffer negative = scalar(DType::I64, -1);
  const KernelDef *def = findCpuKernel("kv_cache_write");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->run(makeCall({&value, &past, &cache}, {}, &pool1())),
            "position 4 is outside the KV cache [0, 4)");
  EXPECT_EQ(def->run(makeCall({&value, &negative, &cache}, {}, &pool1())),
            "position -1 is outside the KV cache [0, 4)");
}

TEST(GenerationKernelsTest, ChecksShapesAndTypes) {
  Buffer cache(DType::F32, {1, 2, 4, 8});
  Buffer pastTheCache(DType::F32, {1, 2, 5, 8});
  Buffer chunk(DType::F32, {1, 2, 4, 8});
  Buffer otherHeads(DType::F32, {1, 1, 1, 8});
  Buffer doubles(DType::F64, {1, 2, 1, 8});
  Buffer position = scalar(DType::I64, 0);
  Buffer wrongPosition = scalar(DType::I32, 0);
  Buffer value(DType::F32, {1, 2, 1, 8});
  EXPECT_NE(checkKernel("kv_cache_write", {&pastTheCache, &position, &cache}),
            "");
  EXPECT_EQ(checkKernel("kv_cache_write", {&chunk, &position, &cache}), "");
  EXPECT_NE(checkKernel("kv_cache_write", {&otherHeads, &position, &cache}),
            "");
  EXPECT_NE(checkKernel("kv_cache_write", {&doubles, &position, &cache}), "");
  EXPECT_NE(checkKernel("kv_cache_write", {&value, &wrongPosition, &cache}),
            "");
  EXPECT_EQ(checkKernel("kv_cache_write", {&value, &position, &cache}), "");
}
