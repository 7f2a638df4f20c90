//===- Timeline.h - measured launches as a Chrome/Perfetto trace -*- C++ -*-===//
//
// `tailor train --trace measured.json --trace-steps N` records every launch
// of the first N steps (Session::recordTimeline) and writes them in the
// format of `tailor inspect --trace` (the predicted timeline), so the two
// open side by side in ui.perfetto.dev: one process per rank, one track per
// stream, a slice per launch named by its kernel with its origin, the
// entry as the category, and a marker at the start of each step. A
// collective started on another stream than compute (`comm`) is one slice
// on that stream's track from its start to its completion, beside the
// compute it overlapped; a wait that blocked the compute stream is a slice
// `wait` on compute's track; a copy is a slice `copy_h2d`, `copy_d2h`,
// `copy_d2d` or `copy_h2h` on its stream's track.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TIMELINE_H
#define TAILOR_RUNTIME_TIMELINE_H

#include "runtime/Session.h"

#include <string>
#include <vector>

namespace tailor::runtime {

/// The launches of one training step, as they ran.
struct MeasuredStep {
  int64_t step = 0;
  std::vector<Session::LaunchTiming> launches;
};

/// Writes `steps` of `plan` as trace JSON to `path` (through a temporary,
/// renamed when complete); "" or why it could not.
std::string writeMeasuredTrace(const LoadedPlan &plan,
                               const std::vector<MeasuredStep> &steps,
                               const std::string &path);

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_TIMELINE_H
