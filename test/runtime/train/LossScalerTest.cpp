//===- LossScalerTest.cpp - GradScaler's state machine --------------------===//
//
// runtime/train/LossScaler.h against torch.amp.GradScaler's update rule
// (`_amp_update_scale_`): the sequences below are what PyTorch 2.x prints
// for the same found_inf flags (init_scale 2**24, growth_factor 2,
// backoff_factor 0.5, growth_interval 3; and non-power-of-two factors, whose
// f32 rounding of a double product the scaler must reproduce).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/LossScaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using tailor::train::LossScaler;
using tailor::train::LossScalerSettings;
using tailor::train::LossScalerState;

namespace {

TEST(LossScalerTest, BacksOffOnInfAndGrowsAfterTheInterval) {
  LossScalerSettings settings{16777216.0, 2.0, 0.5, 3};
  LossScaler scaler(settings);
  // Two overflows, then three clean steps (growth), one overflow, ...
  std::vector<bool> foundInf = {true, true, false, false, false,
                                true, false, false, false, false};
  std::vector<float> scales = {16777216, 8388608, 4194304, 4194304, 4194304,
                               8388608,  4194304, 4194304, 4194304, 8388608};
  std::vector<int64_t> trackers = {0, 0, 1, 2, 0, 0, 1, 2, 0, 1};
  for (size_t i = 0; i < foundInf.size(); ++i) {
    EXPECT_EQ(scaler.scale(), scales[i]) << "step " << i + 1;
    EXPECT_EQ(scaler.inverseScale(), 1.0f / scales[i]);
    scaler.update(foundInf[i]);
    EXPECT_EQ(scaler.state().growthTracker, trackers[i]) << "step " << i + 1;
  }
  EXPECT_EQ(scaler.state().skippedSteps, 3);
}

TEST(LossScalerTest, RoundsProductsToFloatAndKeepsAFiniteScale) {
  // growth 1.1, back-off 0.3 from 1000: f32(f32 * double) each time, as
  // torch's kernel computes on a float tensor with double factors.
  LossScaler scaler(LossScalerSettings{1000.0, 1.1, 0.3, 1});
  float expected = 1000.0f;
  for (bool inf : {false, false, true, false, true, true, false}) {
    scaler.update(inf);
    expected = static_cast<float>(static_cast<double>(expected) *
                                  (inf ? 0.3 : 1.1));
    EXPECT_EQ(scaler.scale(), expected);
  }
  // A growth that would overflow f32 leaves the scale where it is.
  LossScaler big(LossScalerSettings{3e38, 2.0, 0.5, 1});
  big.update(false);
  EXPECT_EQ(big.scale(), 3e38f);
  EXPECT_EQ(big.state().growthTracker, 0);
}

TEST(LossScalerTest, RestoresOnlyAStateItCanContinue) {
  LossScaler scaler(LossScalerSettings{65536.0, 2.0, 0.5, 2000});
  EXPECT_EQ(scaler.restore(LossScalerState{1024.0f, 17, 3}), "");
  EXPECT_EQ(scaler.scale(), 1024.0f);
  EXPECT_EQ(scaler.state().growthTracker, 17);
  EXPECT_EQ(scaler.state().skippedSteps, 3);
  EXPECT_NE(scaler.restore(LossScalerState{0.0f, 0, 0}), "");
  EXPECT_NE(scaler.restore(
                LossScalerState{std::numeric_limits<float>::infinity(), 0, 0}),
            "");
  EXPECT_NE(scaler.restore(LossScalerState{2.0f, 2000, 0}), "");
  EXPECT_NE(scaler.restore(LossScalerState{2.0f, 0, -1}), "");
  // A failed restore changes nothing.
  EXPECT_EQ(scaler.scale(), 1024.0f);
}

} // namespace
