//===- PipelinePrediction.cpp - a layer split's step, stages together -----===//
//
// See PipelinePrediction.h. The simulation keeps, per stage, the time its
// queue is free and walks the stages' work lists together: a unit starts
// when its stage is free and what it receives has arrived (a forward: the
// previous stage's forward of the micro-batch plus the transfer; a
// backward: the next stage's backward plus the transfer; the last stage's
// train_step, both forward and backward: the previous stage's forward).
//
//===----------------------------------------------------------------------===//

#include "compiler/PipelinePrediction.h"

#include "compiler/PlanPrediction.h"
#include "runtime/schema/plan_generated.h"
#include "runtime/train/PipelineSchedule.h"

#include <algorithm>
#include <map>

namespace tailor {

namespace fb = tailor::plan;

double PipelinePrediction::bubble() const {
  if (stepSeconds <= 0 || busySeconds.empty()) {
    return 0;
  }
  double busy = 0;
  for (double b : busySeconds) {
    busy += b;
  }
  return 1 - busy / (double(busySeconds.size()) * stepSeconds);
}

namespace {

/// One stage's units and their predicted times.
struct StageTimes {
  std::vector<train::PipelineWork> work;
  double forward = 0, backward = 0, optimizer = 0;
  /// Of the optimizer, its collectives, and the bytes they send.
  double optimizerCollectives = 0, collectiveBytes = 0;
  /// Bytes of each message it sends forward (per micro-batch) and back.
  double forwardBytes = 0, backwardBytes = 0;
};

/// Seconds to move `bytes` from rank `from` to rank `to` (neighbouring
/// stages of one replica), over the link between them (collectiveLink).
double transferSeconds(const CostTarget &target, double bytes, int32_t from,
                       int32_t to) {
  if (bytes <= 0) {
    return 0;
  }
  const HardwareSpec &h = target.hardware;
  LinkFigures link = collectiveLink(h, {from, to});
  return bytes / (link.gbs * 1e9 * efficiencyOf(h, "comm")) +
         link.latencyUs * 1e-6;
}

std::string stageTimes(const fb::Plan &p, const CostTarget &target,
                       StageTimes &times) {
  const fb::PipelineStage &stage = *p.pipeline();
  std::string error;
  times.work = train::pipelineSchedule(stage.stage(), stage.stages(),
                                       stage.micro_batches(),
                                       stage.schedule()->str(), error);
  if (times.work.empty()) {
    return error;
  }
  bool last = stage.stage() + 1 == stage.stages();
  EntryPrediction backward = predictEntry(p, target, "train_step");
  // The last stage sends its input's gradient from train_step; the others
  // send theirs from train_step too, and their output from the forward.
  times.backward = backward.seconds;
  times.backwardBytes = backward.pointToPointBytes;
  if (!last) {
    EntryPrediction forward = predictEntry(p, target, "pipeline_forward");
    times.forward = forward.seconds;
    times.forwardBytes = forward.pointToPointBytes;
  }
  EntryPrediction optimizer = predictEntry(p, target, "optimizer_step");
  times.optimizer = optimizer.seconds;
  times.optimizerCollectives = optimizer.collectiveSeconds;
  times.collectiveBytes = optimizer.collectiveBytes;
  if (times.backward < 0 || times.optimizer < 0 || times.forward < 0) {
    return "stage " + std::to_string(stage.stage()) +
           " lacks train_step, optimizer_step or pipeline_forward";
  }
  return "";
}

} // namespace

PipelinePrediction
predictPipeline(const std::vector<const fb::Plan *> &stages,
                const CostTarget &target,
                const std::vector<CostTarget> &stageTargets) {
  PipelinePrediction prediction;
  prediction.unpredictable = unpredictableBecause(target);
  if (!prediction.unpredictable.empty()) {
    return prediction;
  }
  int count = static_cast<int>(stages.size());
  std::vector<StageTimes> times(stages.size());
  for (int s = 0; s < count; ++s) {
    if (!stages[s]->pipeline()) {
      prediction.unpredictable = "not a layer split's stage";
      return prediction;
    }
    const CostTarget &own = static_cast<size_t>(s) < stageTargets.size()
                                ? stageTargets[static_cast<size_t>(s)]
                                : target;
    prediction.unpredictable = unpredictableBecause(own);
    if (prediction.unpredictable.empty()) {
      prediction.unpredictable = stageTimes(*stages[s], own, times[s]);
    }
    if (!prediction.unpredictable.empty()) {
      return prediction;
    }
  }
  // (stage, forward?, micro-batch) -> when its result left the stage.
  std::map<std::tuple<int, bool, int64_t>, double> finished;
  std::vector<size_t> next(stages.size(), 0);
  std::vector<double> clock(stages.size(), 0.0);
  prediction.busySeconds.assign(stages.size(), 0.0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < count; ++s) {
      if (next[s] == times[s].work.size()) {
        continue;
      }
      train::PipelineWork unit = times[s].work[next[s]];
      bool last = s == count - 1;
      // What the unit receives, from which stage, and how long it travels.
      bool fromPrevious = unit.forward || last;
      int from = fromPrevious ? s - 1 : s + 1;
      double ready = 0;
      if (from >= 0 && from < count) {
        auto it = finished.find({from, fromPrevious, unit.micro});
        if (it == finished.end()) {
          continue; // not sent yet
        }
        double bytes = fromPrevious ? times[from].forwardBytes
                                    : times[from].backwardBytes;
        // Replica 0's ranks: stage s runs on rank s * replicas.
        int32_t replicas = std::max(1, stages[s]->pipeline()->replicas());
        ready = it->second +
                transferSeconds(target, bytes, from * replicas, s * replicas);
      }
      double seconds = unit.forward ? times[s].forward : times[s].backward;
      double start = std::max(clock[s], ready);
      clock[s] = start + seconds;
      prediction.busySeconds[s] += seconds;
      finished[{s, unit.forward, unit.micro}] = clock[s];
      if (last) {
        finished[{s, true, unit.micro}] = clock[s];
      }
      ++next[s];
      progress = true;
    }
  }
  for (int s = 0; s < count; ++s) {
    if (next[s] != times[s].work.size()) {
      prediction.unpredictable = "the stages' schedules wait on each other";
      return prediction;
    }
  }
  // The optimizer steps start together (their norm is all-reduced); each
  // starts with its replicas' gradient all-reduce, part of its time.
  double end = *std::max_element(clock.begin(), clock.end());
  double optimizer = 0;
  for (int s = 0; s < count; ++s) {
    optimizer = std::max(optimizer, times[s].optimizer);
    prediction.busySeconds[s] += times[s].optimizer;
    prediction.collectiveSeconds.push_back(times[s].optimizerCollectives);
    double micro = double(stages[s]->pipeline()->micro_batches());
    prediction.bytesSent.push_back(
        micro * (times[s].forwardBytes + times[s].backwardBytes) +
        times[s].collectiveBytes);
  }
  prediction.stepSeconds = end + optimizer;
  prediction.replicas = std::max(1, stages[0]->pipeline()->replicas());
  if (const fb::Training *training = stages[0]->training()) {
    prediction.tokensPerStep =
        double(training->micro_batch_size()) *
        double(training->sequence_len()) *
        double(std::max(1, training->gradient_accumulation_steps())) *
        double(prediction.replicas);
  }
  return prediction;
}

PipelinePrediction predictLayerSplit(const fb::Plan &outer,
                                     const CostTarget &target) {
  std::vector<const fb::Plan *> stages;
  if (outer.stages()) {
    for (const fb::StagePlan *stage : *outer.stages()) {
      stages.push_back(fb::GetSizePrefixedPlan(stage->plan()->data()));
    }
  }
  std::vector<CostTarget> stageTargets;
  const HardwareSpec &h = target.hardware;
  for (int64_t r = 0; h.heterogeneous() && r < h.ranks(); ++r) {
    CostTarget own = target;
    own.hardware = h.rankDevice(r);
    own.threads = own.hardware.threads > 0 ? own.hardware.threads
                                           : target.threads;
    stageTargets.push_back(std::move(own));
  }
  return predictPipeline(stages, target, stageTargets);
}

} // namespace tailor
