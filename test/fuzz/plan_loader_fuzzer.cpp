//===- plan_loader_fuzzer.cpp - libFuzzer target for the plan loader ------===//
//
// Feeds arbitrary bytes to the runtime's plan loader (a layer split's at
// the stage `size % 3`). Plans that load are
// also bound (when their arenas are small), at rank 0 and at the world's
// last rank, and each entry run once on zeroed inputs: whatever the loader
// accepts, every kernel's check must make safe to run on every rank.
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"
#include "runtime/Session.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  tailor::runtime::LoadOptions options;
  // A layer split's plan (1.10) loads one stage: pick one from the input,
  // so the nested plans are fuzzed too (ignored by other plans).
  options.stage = static_cast<int>(size % 3);
  auto plan = tailor::runtime::LoadedPlan::loadFromMemory(
      data, size, "/nonexistent", "<fuzz>", options, error);
  if (!plan) {
    return 0;
  }
  uint64_t arenaBytes = 0;
  for (const tailor::plan::Arena *arena : *plan->root().arenas()) {
    arenaBytes += arena->size();
  }
  if (arenaBytes > (64u << 20)) {
    return 0;
  }
  // Rank 0 and the world's last rank, whose rank-strided buffers lie
  // furthest into their arenas.
  int lastRank = plan->root().world_size() - 1;
  for (int rank : {0, lastRank}) {
    int status = 0;
    auto session =
        tailor::runtime::Session::create(*plan, 1, error, status, rank);
    if (session) {
      // Every entry: a training plan's optimizer_step too.
      for (uint32_t entry = 0; entry < session->entryCount(); ++entry) {
        (void)session->runEntry(entry);
      }
    }
    if (lastRank == 0) {
      break;
    }
  }
  return 0;
}
