//===- SchedPlannerCache.cpp - a generation plan's KV cache writes --------===//
//
// tg.cache_write (tailor-build-decode) as a launch of the `kv_cache_write`
// kernel: the token's keys or values and the run-time position in, the
// whole cache state written in place. The cache's readers are tg.state_ref
// views of the same root, so program order is the only ordering needed.
//
//===----------------------------------------------------------------------===//

#include "passes/memory/SchedPlanner.h"

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

LogicalResult SchedPlanner::planCacheWrite(ModuleOp module,
                                           tg::CacheWriteOp write,
                                           PlannedEntry &entry, int64_t step) {
  FailureOr<unsigned> cache = stateRoot(module, write, write.getCacheAttr());
  if (failed(cache) || failed(useAt(write.getValue(), step)) ||
      failed(useAt(write.getPosition(), step))) {
    return write.emitError() << "cannot plan this cache write";
  }
  entry.launches.push_back(
      launchOf(write, "kv_cache_write", 3,
               {accessOf(write.getValue()), accessOf(write.getPosition()),
                whole(*cache)}));
  return success();
}
