//===- ArenaPacking.h - static offsets for buffers with lifetimes -*- C++ -*-===//
//
// The memory planner's allocator: given buffers with sizes and live ranges
// (in schedule steps), it assigns arena offsets so that no two buffers that
// are live at the same step overlap, keeping the arena small. This is the
// offline interval-packing (dynamic storage allocation) problem; tailor uses
// greedy-by-size placement (largest first, each at the lowest offset that
// fits among the already placed buffers it overlaps in time), which is what
// production planners (TFLite's, XLA's heap simulator) found to land within a
// few percent of the live-bytes lower bound on neural networks.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_MEMORY_ARENAPACKING_H
#define TAILOR_PASSES_MEMORY_ARENAPACKING_H

#include <cstdint>
#include <vector>

namespace tailor::memory {

/// `value` rounded up to a multiple of `alignment` (non-zero).
inline uint64_t alignTo(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// One buffer to place: live from step `first` to step `last`, inclusive.
struct LiveBuffer {
  int64_t first = 0;
  int64_t last = 0;
  uint64_t size = 0;
  /// Set by packBuffers.
  uint64_t offset = 0;
};

struct PackingResult {
  /// The arena size: the largest offset + size over all buffers.
  uint64_t arenaBytes = 0;
  /// The largest sum of sizes live at one step: no packing can do better.
  uint64_t liveBytesLowerBound = 0;
};

/// Assigns `offset` for every buffer (multiples of `alignment`, a power of
/// two); sizes are rounded up to the alignment. Buffers overlapping in time
/// never overlap in memory. Runs in O(n k log k) for n buffers of which at
/// most k overlap any one buffer in time (placed buffers are indexed by
/// lifetime, so a placement visits few that do not overlap it).
PackingResult packBuffers(std::vector<LiveBuffer> &buffers, uint64_t alignment);

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_ARENAPACKING_H
