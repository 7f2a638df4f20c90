//===- MemoryCategory.h - the plan's memory categories, once ----*- C++ -*-===//
//
// Every arena holds one category of bytes (plan.fbs `Category`). The plan
// writer's memory report, the loader's check of it, the sessions' allocation
// figures, the C API's tailor_memory_report and `tailor inspect` all count
// bytes by category through this header. It is plain C++ over the generated
// schema, so the compiler includes it too without linking the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_MEMORYCATEGORY_H
#define TAILOR_RUNTIME_MEMORYCATEGORY_H

#include "runtime/schema/plan_generated.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace tailor::runtime {

/// How many memory categories a plan has.
constexpr size_t kMemoryCategoryCount =
    static_cast<size_t>(plan::Category::MAX) + 1;

/// The categories' names as tailor_memory_report's fields and `tailor inspect
/// --json` spell them, indexed by plan::Category.
constexpr std::array<const char *, kMemoryCategoryCount> kMemoryCategoryNames =
    {"parameters", "constants",       "activations", "workspace",
     "optimizer_state", "gradients", "kv_cache"};

/// Bytes by category, indexed by plan::Category.
using CategoryBytes = std::array<uint64_t, kMemoryCategoryCount>;

/// Whether `value` numbers a category (a plan read from disk may hold any).
inline bool isMemoryCategory(int value) {
  return value >= 0 && static_cast<size_t>(value) < kMemoryCategoryCount;
}

inline uint64_t totalBytes(const CategoryBytes &bytes) {
  uint64_t total = 0;
  for (uint64_t value : bytes) {
    total += value;
  }
  return total;
}

/// What a plan's memory report says, by category.
inline CategoryBytes reportedBytes(const plan::Memory &memory) {
  return {memory.parameters(),      memory.constants(),
          memory.activations(),     memory.workspace(),
          memory.optimizer_state(), memory.gradients(),
          memory.kv_cache()};
}

/// The sizes of a plan's arenas summed by category (the loader has checked
/// every category).
inline CategoryBytes arenaBytes(const plan::Plan &root) {
  CategoryBytes bytes{};
  for (const plan::Arena *arena : *root.arenas()) {
    bytes[static_cast<size_t>(arena->category())] += arena->size();
  }
  return bytes;
}

/// The memory report of `bytes`, with their total and the activations'
/// live-bytes lower bound.
inline flatbuffers::Offset<plan::Memory>
createMemoryReport(flatbuffers::FlatBufferBuilder &fbb,
                   const CategoryBytes &bytes, uint64_t activationsLiveBytes) {
  static_assert(kMemoryCategoryCount == 7,
                "the Memory table has one field per category");
  return plan::CreateMemory(fbb, bytes[0], bytes[1], bytes[2], bytes[3],
                            bytes[4], bytes[5], totalBytes(bytes),
                            activationsLiveBytes, bytes[6]);
}

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_MEMORYCATEGORY_H
