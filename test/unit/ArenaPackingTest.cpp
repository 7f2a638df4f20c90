//===- ArenaPackingTest.cpp - the interval-packing allocator --------------===//

#include "passes/memory/ArenaPacking.h"

#include <gtest/gtest.h>

#include <algorithm>
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

/// The greedy placement written plainly: every placed buffer is checked.
std::vector<uint64_t> naiveOffsets(std::vector<LiveBuffer> buffers,
                                   uint64_t alignment) {
  auto aligned = [&](uint64_t n) {
    return (n + alignment - 1) / alignment * alignment;
  };
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size) {
      return buffers[a].size > buffers[b].size;
    }
    return buffers[a].first < buffers[b].first;
  });
  std::vector<size_t> placed;
  for (size_t index : order) {
    LiveBuffer &buffer = buffers[index];
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t other : placed) {
      const LiveBuffer &o = buffers[other];
      if (o.first <= buffer.last && buffer.first <= o.last) {
        busy.emplace_back(o.offset, o.offset + aligned(o.size));
      }
    }
    std::sort(busy.begin(), busy.end());
    uint64_t candidate = 0;
    for (const auto &[begin, end] : busy) {
      if (begin >= candidate + aligned(buffer.size)) {
        break;
      }
      candidate = std::max(candidate, end);
    }
    buffer.offset = candidate;
    placed.push_back(index);
  }
  std::vector<uint64_t> offsets;
  for (const LiveBuffer &b : buffers) {
    offsets.push_back(b.offset);
  }
  return offsets;
}

// Tests that the time index changes no placement: lifetimes from one step
// to the whole program (a training step's saved activations), offsets
// equal to checking every placed buffer.
TEST(ArenaPacking, IndexedPlacementEqualsCheckingEveryBuffer) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<LiveBuffer> buffers;
    int64_t steps = 1 + rng() % 5000;
    for (int i = 0; i < 600; ++i) {
      int64_t first = rng() % steps;
      int64_t length = 0;
      switch (rng() % 4) {
      case 0: length = rng() % 4; break;
      case 1: length = rng() % 40; break;
      case 2: length = rng() % 700; break;
      default: length = steps - first; break;
      }
      buffers.push_back({first, first + length, 1 + rng() % 5000, 0});
    }
    std::vector<uint64_t> expected = naiveOffsets(buffers, 64);
    auto result = packBuffers(buffers, 64);
    for (size_t i = 0; i < buffers.size(); ++i) {
      ASSERT_EQ(buffers[i].offset, expected[i])
          << "trial " << trial << " buffer " << i;
    }
    expectNoConflicts(buffers, 64, result.arenaBytes);
  }
}

} // namespace
