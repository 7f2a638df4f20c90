//===- PlanPrediction.h - a plan's predicted step time and timeline -*- C++ -*-===//
//
// Reads the work each launch of a plan records (plan format 1.5) and asks
// the cost model (CostModel.h) for time: per entry, and for one training
// step (train_step once per micro-batch, then optimizer_step), with tokens
// per second. The predicted timeline is Chrome/Perfetto trace JSON: a track
// per stream with a slice per launch (named by kernel, with its origin,
// FLOPs and bytes), and a counter track per arena of the bytes its buffers
// hold over time, the peak marked. `tailor compile`, `tailor inspect` and
// its --json contract use these.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_PLANPREDICTION_H
#define TAILOR_COMPILER_PLANPREDICTION_H

#include "compiler/CostModel.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace tailor {
namespace plan {
struct Plan;
} // namespace plan

struct PlanPrediction {
  /// Empty when predicted; otherwise why not (a rate the hardware lacks, or
  /// a plan older than format 1.5 that records no work).
  std::string unpredictable;
  /// One step: every micro-batch's train_step and one optimizer_step (or
  /// the forward of an inference plan).
  TimeEstimate step;
  /// Tokens one step trains on, over all ranks (0 for an inference plan).
  double tokensPerStep = 0;
  /// Bytes each rank sends in one step's collectives, counted as ring
  /// algorithms move them (CostModel.h's ringBytesSent).
  double bytesSentPerStep = 0;
  /// Bytes each rank sends in steps steadyFromStep, steadyFromStep + 1, ...
  /// of one cycle of steps whose ops alternate (ACP-SGD: two, the P step's
  /// and the Q step's); one entry when every steady step runs the same ops.
  /// bytesSentPerStep (and the times) are the mean over the cycle.
  std::vector<double> bytesSentByCycleStep;
  /// The same for a step before gradient compression starts (plan ops with
  /// a step range, 1.8): the first step's. Equal to bytesSentPerStep
  /// without compression.
  double bytesSentPerUncompressedStep = 0;
  /// bytesSentPerStep with ZeRO++'s int8 gradient all-to-alls (qgZ) sent
  /// as the f32 reduce-scatters they replace; equal to it without them.
  double bytesSentPerStepUnquantized = 0;
  /// bytesSentPerStep per kind of group its collectives span
  /// (runtime/comm/GroupKind.h: "world", "node", "cross_node"), as
  /// metrics.jsonl's bytes_sent_by_group counts them.
  std::map<std::string, double> bytesSentByGroupPerStep;
  /// The first step from which the ops that run no longer change (1 when
  /// no op has a step range): the step bytesSentPerStep and the times are
  /// predicted for.
  int64_t steadyFromStep = 1;
  /// The first step whose ops differ from step 1's (where compression
  /// starts); 0 when every step runs the same ops.
  int64_t firstChangedStep = 0;
  /// Time in one step of collectives and of host-device copies, and how
  /// much of the work on streams beside compute runs while compute does
  /// (step.seconds already lacks it: the streams are simulated with the
  /// plan's events; the kinds in step.secondsByKind still add up to the
  /// serial time).
  double commSeconds = 0;
  double copySeconds = 0;
  double hiddenSeconds = 0;
  /// Bytes copied between host and device memory in one step (offload).
  double bytesCopiedPerStep = 0;
  double tokensPerSecond() const {
    return step.seconds > 0 ? tokensPerStep / step.seconds : 0;
  }
};

/// The target a plan was compiled for, from its own record: the built-in
/// hardware of its name (or `override` when given), its precision and
/// threads.
llvm::Expected<CostTarget> costTargetOf(const plan::Plan &p,
                                        llvm::StringRef hardwareOverride = "");

PlanPrediction predictPlan(const plan::Plan &p, const CostTarget &target);

/// One rank of a cluster of mixed devices (plan 1.12).
struct RankPrediction {
  std::string device;
  int64_t microBatches = 0;
  /// Its own step on its device: its micro-batches' train_step runs and
  /// optimizer_step (predictPlan with its count).
  double stepSeconds = 0;
  /// How long it waits for the slowest rank at the step's collectives.
  double waitSeconds = 0;
};

/// A mixed cluster's step: each rank's, and the step they all take (the
/// slowest rank's), beside the same plan with the recipe's even split
/// (gradient_accumulation_steps micro-batches each).
struct ClusterPrediction {
  /// Empty when predicted (or when the plan is not a mixed cluster's).
  std::string unpredictable;
  /// Empty for a homogeneous plan.
  std::vector<RankPrediction> ranks;
  double stepSeconds = 0;
  double evenStepSeconds = 0;
  double tokensPerStep = 0;
  double maxWaitSeconds() const {
    double wait = 0;
    for (const RankPrediction &rank : ranks) {
      wait = std::max(wait, rank.waitSeconds);
    }
    return wait;
  }
};

/// Predicts each rank of a plan's parallel table (its devices' figures and
/// counts) with `base`'s precision and threads.
ClusterPrediction predictCluster(const plan::Plan &p, const CostTarget &base);

/// One run of an entry, as a pipeline simulation places it per unit.
struct EntryPrediction {
  /// Its launches one after the other, less its point-to-point transfers;
  /// -1 when the plan has no such entry.
  double seconds = -1;
  /// Bytes its point-to-point sends carry (the simulation's to place).
  double pointToPointBytes = 0;
  /// Of `seconds`, its collectives' (a pipeline stage's all-reduces over
  /// its replicas and its norm's over the stages), and the bytes they send
  /// (ring algorithms, CostModel.h's ringBytesSent).
  double collectiveSeconds = 0;
  double collectiveBytes = 0;
};

/// One run of entry `name` of `p`.
EntryPrediction predictEntry(const plan::Plan &p, const CostTarget &target,
                             llvm::StringRef name);

/// Writes the predicted timeline of one step of `p` as trace JSON.
void writePredictedTrace(const plan::Plan &p, const CostTarget &target,
                         llvm::raw_ostream &os);

} // namespace tailor

#endif // TAILOR_COMPILER_PLANPREDICTION_H
