//===- DeviceImageTest.cpp - which cubin a GPU runs
//------------------------===//
//
// runtime/cuda/DeviceImage.h's choice among the cubins a module carries: a
// plan for a cluster of mixed GPUs carries one per device kind, and each
// GPU runs the newest that runs on it (same major, a minor at most its
// own; an arch-specific cubin only on its exact SM).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceImage.h"

#include <gtest/gtest.h>

using namespace tailor::runtime::cuda;

TEST(DeviceImage, EachGpuRunsTheNewestCubinThatRunsOnIt) {
  // RTX 3090s (sm_86) and 4090s (sm_89): sm_80 and sm_89 cubins.
  std::vector<CubinCandidate> mixed = {{80, false}, {89, false}};
  EXPECT_EQ(bestCubin(mixed, 89), 1);
  EXPECT_EQ(bestCubin(mixed, 86), 0);
  EXPECT_EQ(bestCubin(mixed, 80), 0);
  // In the other order too.
  std::vector<CubinCandidate> reversed = {{89, false}, {80, false}};
  EXPECT_EQ(bestCubin(reversed, 89), 0);
  EXPECT_EQ(bestCubin(reversed, 86), 1);
  // H100s beside A100s: sm_90a only on sm_90; a T4 runs sm_75 alone.
  std::vector<CubinCandidate> datacenter = {
      {75, false}, {80, false}, {90, true}};
  EXPECT_EQ(bestCubin(datacenter, 90), 2);
  EXPECT_EQ(bestCubin(datacenter, 80), 1);
  EXPECT_EQ(bestCubin(datacenter, 75), 0);
  // No cubin runs: the caller falls back to the PTX.
  EXPECT_EQ(bestCubin(datacenter, 100), -1);
  EXPECT_EQ(bestCubin({{89, false}}, 86), -1);
  EXPECT_EQ(bestCubin({}, 90), -1);
}
