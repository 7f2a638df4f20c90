//===- PipelineScheduleTest.cpp - the order pipeline stages run -----------===//
//
// pipelineSchedule (runtime/train/PipelineSchedule.cpp): each stage runs
// every micro-batch's forward once and then its backward once; 1f1b's
// warm-up, steady state and drain, and the micro-batches it keeps in flight
// (what the plan's slots hold); a simulation of the stages' dependencies
// shows 1f1b runs in fewer rounds than naive.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <map>

using namespace tailor::train;

namespace {

std::string text(const std::vector<PipelineWork> &work) {
  std::string out;
  for (const PipelineWork &unit : work) {
    out += (unit.forward ? "F" : "B") + std::to_string(unit.micro) + " ";
  }
  return out;
}

/// Rounds until every stage is done when each unit takes one round and
/// waits for what it receives: a forward for the previous stage's forward,
/// a backward for the next stage's backward (and, on the last stage, for
/// its own stage's input).
int simulate(int stages, int64_t micro, const std::string &schedule) {
  std::vector<std::vector<PipelineWork>> work;
  std::string error;
  for (int s = 0; s < stages; ++s) {
    work.push_back(pipelineSchedule(s, stages, micro, schedule, error));
  }
  std::map<std::tuple<int, bool, int64_t>, int> done;
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  for (int round = 1; round < 1000; ++round) {
    std::vector<std::tuple<int, bool, int64_t>> finished;
    bool all = true;
    for (int s = 0; s < stages; ++s) {
      if (next[s] == work[s].size()) {
        continue;
      }
      all = false;
      PipelineWork unit = work[s][next[s]];
      bool last = s == stages - 1;
      bool ready = true;
      if (unit.forward || last) {
        ready = s == 0 || done.count({s - 1, true, unit.micro});
      }
      if (!unit.forward && !last) {
        ready = done.count({s + 1, false, unit.micro}) > 0;
      }
      if (ready) {
        finished.push_back({s, unit.forward || last, unit.micro});
        if (last) {
          finished.push_back({s, false, unit.micro});
        }
        ++next[s];
      }
    }
    if (all) {
      return round - 1;
    }
    for (auto &key : finished) {
      done[key] = round;
    }
  }
  return -1;
}

} // namespace

TEST(PipelineScheduleTest, OneForwardOneBackwardWithWarmUpAndDrain) {
  std::string error;
  EXPECT_EQ(text(pipelineSchedule(0, 3, 4, "1f1b", error)),
            "F0 F1 F2 B0 F3 B1 B2 B3 ");
  EXPECT_EQ(text(pipelineSchedule(1, 3, 4, "1f1b", error)),
            "F0 F1 B0 F2 B1 F3 B2 B3 ");
  EXPECT_EQ(text(pipelineSchedule(2, 3, 4, "1f1b", error)), "B0 B1 B2 B3 ");
  // Fewer micro-batches than the warm-up: all forwards, then backwards.
  EXPECT_EQ(text(pipelineSchedule(0, 4, 2, "1f1b", error)), "F0 F1 B0 B1 ");
  EXPECT_EQ(text(pipelineSchedule(0, 2, 3, "naive", error)),
            "F0 B0 F1 B1 F2 B2 ");
  EXPECT_TRUE(error.empty()) << error;
}

TEST(PipelineScheduleTest, InFlightMatchesThePlansSlots) {
  std::string error;
  for (int stages : {2, 3, 4}) {
    for (int64_t micro : {1, 2, 4, 8}) {
      for (int s = 0; s + 1 < stages; ++s) {
        auto work = pipelineSchedule(s, stages, micro, "1f1b", error);
        EXPECT_EQ(pipelineMicroBatchesInFlight(work),
                  std::min<int64_t>(stages - s, micro))
            << "stage " << s << " of " << stages << ", " << micro;
        EXPECT_EQ(pipelineMicroBatchesInFlight(
                      pipelineSchedule(s, stages, micro, "naive", error)),
                  1);
        // Every micro-batch forward then backward, once each.
        std::map<int64_t, int> seen;
        for (const PipelineWork &unit : work) {
          EXPECT_EQ(seen[unit.micro]++, unit.forward ? 0 : 1);
        }
        EXPECT_EQ(seen.size(), static_cast<size_t>(micro));
      }
    }
  }
}

TEST(PipelineScheduleTest, OneFOneBTakesFewerRoundsThanNaive) {
  // Naive: each micro-batch crosses every stage and back alone.
  EXPECT_EQ(simulate(2, 4, "naive"), 4 * 3);
  int oneF = simulate(2, 4, "1f1b");
  EXPECT_GT(oneF, 0);
  EXPECT_LT(oneF, simulate(2, 4, "naive"));
  EXPECT_LT(simulate(4, 8, "1f1b"), simulate(4, 8, "naive"));
}

TEST(PipelineScheduleTest, RefusesWhatItCannotOrder) {
  std::string error;
  EXPECT_TRUE(pipelineSchedule(0, 2, 4, "gpipe", error).empty());
  EXPECT_EQ(error, "unknown pipeline schedule 'gpipe' (expected 1f1b or "
                   "naive)");
  EXPECT_TRUE(pipelineSchedule(2, 2, 4, "1f1b", error).empty());
  EXPECT_TRUE(pipelineSchedule(0, 2, 0, "1f1b", error).empty());
}
