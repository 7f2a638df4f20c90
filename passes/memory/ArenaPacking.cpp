//===- ArenaPacking.cpp - greedy-by-size interval packing -----------------===//

#include "passes/memory/ArenaPacking.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace tailor::memory {

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

  // Placed buffers are indexed by time bucket, so a query only visits the
  // buffers whose lifetimes share a bucket with the one being placed.
  int64_t firstStep = buffers[0].first, lastStep = buffers[0].last;
  for (const LiveBuffer &b : buffers) {
    firstStep = std::min(firstStep, b.first);
    lastStep = std::max(lastStep, b.last);
  }
  const int64_t bucketSteps = 16;
  size_t bucketCount =
      static_cast<size_t>((lastStep - firstStep) / bucketSteps + 1);
  std::vector<std::vector<size_t>> buckets(bucketCount);
  auto bucketOf = [&](int64_t step) {
    return static_cast<size_t>((step - firstStep) / bucketSteps);
  };

  std::vector<uint32_t> seenStamp(buffers.size(), 0);
  uint32_t stamp = 0;
  std::vector<std::pair<uint64_t, uint64_t>> busy; // [offset, end) in use
  for (size_t index : order) {
    LiveBuffer &buffer = buffers[index];
    uint64_t size = alignTo(buffer.size, alignment);
    ++stamp;
    busy.clear();
    for (size_t bucket = bucketOf(buffer.first);
         bucket <= bucketOf(buffer.last); ++bucket) {
      for (size_t other : buckets[bucket]) {
        if (seenStamp[other] == stamp) {
          continue;
        }
        seenStamp[other] = stamp;
        const LiveBuffer &o = buffers[other];
        if (o.first <= buffer.last && buffer.first <= o.last) {
          busy.emplace_back(o.offset, o.offset + alignTo(o.size, alignment));
        }
      }
    }
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
    for (size_t bucket = bucketOf(buffer.first);
         bucket <= bucketOf(buffer.last); ++bucket) {
      buckets[bucket].push_back(index);
    }
  }
  return result;
}

} // namespace tailor::memory
