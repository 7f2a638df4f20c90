//===- ArenaPackingTest.cpp - the interval-packing allocator --------------===//

#include "passes/memory/ArenaPacking.h"

#include <gtest/gtest.h>

#include <random>

using tailor::memory::LiveBuffer;
using tailor::memory::packBuffers;

namespace {

/// No two buffers that share a step may share a byte.
void expectNoConflicts(const std::vector<LiveBuffer> &buffers,
                       uint64_t alignment, uint64_t arena) {
  for (size_t i = 0; i < buffers.size(); ++i) {
    const LiveBuffer &a = buffers[i];
    EXPECT_EQ(a.offset % alignment, 0u);
    EXPECT_LE(a.offset + a.size, arena);
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const LiveBuffer &b = buffers[j];
      bool timeOverlap = a.first <= b.last && b.first <= a.last;
      bool memoryOverlap = a.offset < b.offset + b.size && b.offset < a.offset + a.size;
      EXPECT_FALSE(timeOverlap && memoryOverlap && a.size && b.size)
          << "buffers " << i << " and " << j << " collide";
    }
  }
}

TEST(ArenaPacking, ChainReusesDeadBuffers) {
  // A chain a -> b -> c -> d: only neighbours are live together.
  std::vector<LiveBuffer> buffers = {
      {0, 1, 100, 0}, {1, 2, 100, 0}, {2, 3, 100, 0}, {3, 4, 100, 0}};
  auto result = packBuffers(buffers, 64);
  EXPECT_EQ(result.liveBytesLowerBound, 256u);
  EXPECT_EQ(result.arenaBytes, 256u);
  expectNoConflicts(buffers, 64, result.arenaBytes);
}

TEST(ArenaPacking, DisjointLifetimesShareOffsetZero) {
  std::vector<LiveBuffer> buffers = {{0, 0, 512, 0}, {1, 1, 256, 0}, {2, 2, 1024, 0}};
  auto result = packBuffers(buffers, 64);
  EXPECT_EQ(result.arenaBytes, 1024u);
  for (const LiveBuffer &b : buffers) {
    EXPECT_EQ(b.offset, 0u);
  }
}

TEST(ArenaPacking, EmptyAndZeroSized) {
  std::vector<LiveBuffer> none;
  EXPECT_EQ(packBuffers(none, 64).arenaBytes, 0u);
  std::vector<LiveBuffer> zero = {{0, 3, 0, 0}, {1, 2, 0, 0}};
  EXPECT_EQ(packBuffers(zero, 64).arenaBytes, 0u);
}

TEST(ArenaPacking, RandomProgramsStayValidAndNearTheBound) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<LiveBuffer> buffers;
    for (int i = 0; i < 300; ++i) {
      int64_t first = rng() % 400;
      int64_t length = (rng() % 10 == 0) ? rng() % 200 : rng() % 6;
      buffers.push_back({first, first + length, 1 + rng() % 100000, 0});
    }
    auto result = packBuffers(buffers, 256);
    expectNoConflicts(buffers, 256, result.arenaBytes);
    EXPECT_GE(result.arenaBytes, result.liveBytesLowerBound);
    // Greedy-by-size stays well within 2x of the bound on such inputs.
    EXPECT_LE(result.arenaBytes, 2 * result.liveBytesLowerBound);
  }
}

} // namespace
