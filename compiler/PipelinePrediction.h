//===- PipelinePrediction.h - a layer split's step, stages together -*- C++ -*-===//
//
// A pipeline stage's step is not its own work: it waits for its neighbours'
// activations and gradients. The prediction runs every stage's schedule
// (runtime/train/PipelineSchedule.h, the trainer's own) over the cost
// model's time of each unit -- one run of `pipeline_forward` or
// `train_step` of that stage's plan -- with each message's transfer over
// the link in between, then the optimizer step: the step time, each
// stage's busy time and the bubble. With data-parallel replicas of the
// stages (plan 1.13) every replica runs the same schedule at once; the
// optimizer step then starts with the all-reduce of the stage's gradients
// over its replicas, which the step adds.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_PIPELINEPREDICTION_H
#define TAILOR_COMPILER_PIPELINEPREDICTION_H

#include "compiler/CostModel.h"

#include <string>
#include <vector>

namespace tailor {
namespace plan {
struct Plan;
} // namespace plan

struct PipelinePrediction {
  /// Empty when predicted; otherwise why not.
  std::string unpredictable;
  double stepSeconds = 0;
  /// Per stage: seconds of its own work in a step (forwards, backwards,
  /// optimizer), and the bytes each of its ranks sends (point to point and
  /// collectives).
  std::vector<double> busySeconds;
  std::vector<double> bytesSent;
  /// Per stage: of its optimizer step, the collectives' seconds: the
  /// all-reduce of its gradients over its replicas (none with one) and the
  /// clipping norm's over the stages.
  std::vector<double> collectiveSeconds;
  /// Data-parallel replicas of every stage (1 without).
  int64_t replicas = 1;
  /// Over every replica.
  double tokensPerStep = 0;
  /// The share of the stages' time spent waiting: 1 - mean busy / step.
  double bubble() const;
};

/// `stages[s]` is stage s's plan (plan 1.10 PipelineStage), run on
/// `target`, or on a cluster of mixed devices on `stageTargets[s]` (its
/// rank's device; `target` then times the links).
PipelinePrediction
predictPipeline(const std::vector<const plan::Plan *> &stages,
                const CostTarget &target,
                const std::vector<CostTarget> &stageTargets = {});

/// The same for a layer split's plan file as compile writes it (`outer`,
/// whose `stages` hold the stage plans): on a cluster of mixed devices
/// (`target.hardware.heterogeneous()`) each stage on its rank's device,
/// with that device's threads or else `target.threads`.
PipelinePrediction predictLayerSplit(const plan::Plan &outer,
                                     const CostTarget &target);

} // namespace tailor

#endif // TAILOR_COMPILER_PIPELINEPREDICTION_H
