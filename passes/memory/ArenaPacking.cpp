//===- ArenaPacking.cpp - greedy-by-size interval packing -----------------===//

#include "passes/memory/ArenaPacking.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace tailor::memory {

namespace {

/// Placed buffers indexed by time, so that placing one visits the placed
/// buffers near its lifetime rather than all of them. Levels of buckets
/// 16, 128, 1024, ... steps long; a buffer goes in the one or two buckets
/// of the first level whose buckets are at least as long as its lifetime.
/// A training step's saved activations live from forward to backward: in
/// one grid of short buckets each would sit in every bucket it spans, and a
/// query would walk those copies bucket after bucket (quadratic in the
/// layers); here it meets each at most twice.
class TimeIndex {
public:
  explicit TimeIndex(const std::vector<LiveBuffer> &buffers)
      : buffers(buffers), seen(buffers.size(), 0) {
    firstStep = buffers.front().first;
    int64_t lastStep = buffers.front().last;
    for (const LiveBuffer &b : buffers) {
      firstStep = std::min(firstStep, b.first);
      lastStep = std::max(lastStep, b.last);
    }
    for (int64_t length = kFinest;; length *= kRatio) {
      levels.push_back(
          {length, std::vector<std::vector<size_t>>(
                       static_cast<size_t>((lastStep - firstStep) / length + 1))});
      if (length > lastStep - firstStep) {
        break;
      }
    }
  }

  void insert(size_t index) {
    const LiveBuffer &b = buffers[index];
    Level &level = levels[levelOf(b)];
    for (size_t k = bucket(level, b.first); k <= bucket(level, b.last); ++k) {
      level.buckets[k].push_back(index);
    }
  }

  /// Calls `visit(index)` once for every placed buffer whose buckets meet
  /// `b`'s lifetime (a superset of those that overlap it).
  template <typename Visit> void forEachNear(const LiveBuffer &b, Visit visit) {
    ++stamp;
    for (Level &level : levels) {
      for (size_t k = bucket(level, b.first); k <= bucket(level, b.last);
           ++k) {
        for (size_t other : level.buckets[k]) {
          if (seen[other] != stamp) {
            seen[other] = stamp;
            visit(other);
          }
        }
      }
    }
  }

private:
  static constexpr int64_t kFinest = 16, kRatio = 8;
  struct Level {
    int64_t length;
    std::vector<std::vector<size_t>> buckets;
  };

  size_t levelOf(const LiveBuffer &b) const {
    size_t level = 0;
    while (level + 1 < levels.size() &&
           levels[level].length < b.last - b.first + 1) {
      ++level;
    }
    return level;
  }
  size_t bucket(const Level &level, int64_t step) const {
    return static_cast<size_t>((step - firstStep) / level.length);
  }

  const std::vector<LiveBuffer> &buffers;
  std::vector<Level> levels;
  int64_t firstStep = 0;
  std::vector<uint32_t> seen;
  uint32_t stamp = 0;
};

} // namespace

PackingResult packBuffers(std::vector<LiveBuffer> &buffers,
                          uint64_t alignment) {
  PackingResult result;
  if (buffers.empty()) {
    return result;
  }

  // Lower bound: a sweep over start/end events of the aligned sizes.
  {
    std::map<int64_t, int64_t> delta;
    for (const LiveBuffer &b : buffers) {
      uint64_t size = alignTo(b.size, alignment);
      delta[b.first] += static_cast<int64_t>(size);
      delta[b.last + 1] -= static_cast<int64_t>(size);
    }
    int64_t live = 0;
    for (const auto &[step, change] : delta) {
      live += change;
      result.liveBytesLowerBound =
          std::max(result.liveBytesLowerBound, static_cast<uint64_t>(live));
    }
  }

  // Largest first; ties by earlier start, then index, for determinism.
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size) {
      return buffers[a].size > buffers[b].size;
    }
    return buffers[a].first < buffers[b].first;
  });

  TimeIndex placed(buffers);
  std::vector<std::pair<uint64_t, uint64_t>> busy; // [offset, end) in use
  for (size_t index : order) {
    LiveBuffer &buffer = buffers[index];
    uint64_t size = alignTo(buffer.size, alignment);
    busy.clear();
    placed.forEachNear(buffer, [&](size_t other) {
      const LiveBuffer &o = buffers[other];
      if (o.first <= buffer.last && buffer.first <= o.last) {
        busy.emplace_back(o.offset, o.offset + alignTo(o.size, alignment));
      }
    });
    // Lowest gap that fits among the overlapping buffers.
    std::sort(busy.begin(), busy.end());
    uint64_t candidate = 0;
    for (const auto &[begin, end] : busy) {
      if (begin >= candidate + size) {
        break;
      }
      candidate = std::max(candidate, end);
    }
    buffer.offset = candidate;
    result.arenaBytes = std::max(result.arenaBytes, candidate + size);
    placed.insert(index);
  }
  return result;
}

} // namespace tailor::memory
