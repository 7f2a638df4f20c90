//===- PipelineSchedule.cpp - the order a pipeline stage runs its work ----===//
//
// See PipelineSchedule.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/PipelineSchedule.h"

#include <algorithm>

namespace tailor::train {

std::vector<PipelineWork> pipelineSchedule(int stage, int stages,
                                           int64_t microBatches,
                                           const std::string &schedule,
                                           std::string &error) {
  std::vector<PipelineWork> work;
  if (schedule != "1f1b" && schedule != "naive") {
    error = "unknown pipeline schedule '" + schedule +
            "' (expected 1f1b or naive)";
    return work;
  }
  if (stages < 1 || stage < 0 || stage >= stages || microBatches < 1) {
    error = "stage " + std::to_string(stage) + " of " +
            std::to_string(stages) + " with " + std::to_string(microBatches) +
            " micro-batches has no schedule";
    return work;
  }
  bool last = stage == stages - 1;
  if (last || schedule == "naive") {
    for (int64_t m = 0; m < microBatches; ++m) {
      if (!last) {
        work.push_back({true, m});
      }
      work.push_back({false, m});
    }
    return work;
  }
  int64_t warmup = std::min<int64_t>(stages - stage - 1, microBatches);
  int64_t forward = 0, backward = 0;
  for (; forward < warmup; ++forward) {
    work.push_back({true, forward});
  }
  for (; forward < microBatches; ++forward, ++backward) {
    work.push_back({true, forward});
    work.push_back({false, backward});
  }
  for (; backward < microBatches; ++backward) {
    work.push_back({false, backward});
  }
  return work;
}

int64_t pipelineMicroBatchesInFlight(const std::vector<PipelineWork> &work) {
  int64_t inFlight = 0, most = 0;
  for (const PipelineWork &unit : work) {
    inFlight += unit.forward ? 1 : -1;
    most = std::max(most, inFlight);
  }
  return most;
}

} // namespace tailor::train
