//===- PipelineSchedule.h - the order a pipeline stage runs its work -*- C++ -*-===//
//
// A layer split's stage runs, per step, one forward and one backward per
// micro-batch (tailor-split-layers: `pipeline_forward`, then `train_step`,
// which replays the forward and runs the backward; the last stage's
// `train_step` is both). In what order decides how long stages sit idle:
//
// - naive (Hugging Face's device_map="auto" split): one micro-batch goes
//   through every stage and back before the next starts, so one stage works
//   at a time;
// - 1f1b (PipeDream-Flush, Megatron's default): stage s first runs the
//   forwards of min(stages - s - 1, micro_batches) micro-batches, then
//   alternates one forward and one backward, then drains the backwards; at
//   most stages - s micro-batches are in flight on it, so its saved inputs
//   need that many slots.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TRAIN_PIPELINESCHEDULE_H
#define TAILOR_RUNTIME_TRAIN_PIPELINESCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace tailor::train {

/// One unit of a stage's work: micro-batch `micro`'s forward
/// (`pipeline_forward`) or its backward (`train_step`).
struct PipelineWork {
  bool forward = false;
  int64_t micro = 0;
};

/// Stage `stage` of `stages`' work for one step of `microBatches`, in order,
/// for `schedule` "1f1b" or "naive"; the last stage has backwards only (its
/// train_step runs the forward too). Empty, with `error` set, for an
/// unknown schedule or a stage outside [0, stages).
std::vector<PipelineWork> pipelineSchedule(int stage, int stages,
                                           int64_t microBatches,
                                           const std::string &schedule,
                                           std::string &error);

/// The most micro-batches in flight (forward run, backward not yet) on the
/// stage over `work`: what its slots must hold.
int64_t pipelineMicroBatchesInFlight(const std::vector<PipelineWork> &work);

} // namespace tailor::train

#endif // TAILOR_RUNTIME_TRAIN_PIPELINESCHEDULE_H
