//===- CostModelTest.cpp - the roofline cost model and hardware figures ---===//

#include "compiler/CostModel.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace tailor;

namespace {

CostTarget targetFor(llvm::StringRef name, llvm::StringRef precision = "fp32",
                     int64_t threads = 1) {
  llvm::Expected<HardwareSpec> hardware = resolveHardware(name);
  EXPECT_TRUE(static_cast<bool>(hardware)) << llvm::toString(hardware.takeError());
  CostTarget target;
  target.hardware = *hardware;
  target.precision = precision.str();
  target.threads = threads;
  return target;
}

/// Writes `text` to a temporary YAML file and returns its path.
std::string hardwareFile(llvm::StringRef text) {
  llvm::SmallString<128> path;
  EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("hw", "yaml", path));
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  out << text;
  return path.str().str();
}

TEST(CostModel, KernelKinds) {
  EXPECT_EQ(costKindOf("linear"), "gemm");
  EXPECT_EQ(costKindOf("linear_quantized"), "gemm");
  EXPECT_EQ(costKindOf("linear_weight_grad"), "gemm");
  EXPECT_EQ(costKindOf("attention_grad"), "attention");
  EXPECT_EQ(costKindOf("rms_norm_grad"), "norm");
  EXPECT_EQ(costKindOf("cross_entropy_grad"), "loss");
  EXPECT_EQ(costKindOf("adamw"), "optimizer");
  EXPECT_EQ(costKindOf("copy"), "copy");
  EXPECT_EQ(costKindOf("silu"), "elementwise");
}

TEST(CostModel, ComputeBoundGemmUsesTensorCoresUnderBf16) {
  // 4096^3 GEMM: 1.37e11 FLOPs, ~100 MB moved: compute-bound on an H100.
  LaunchWork gemm{"linear", 2.0 * 4096 * 4096 * 4096, 3.0 * 4096 * 4096 * 2};
  double bf16 = predictLaunchSeconds(targetFor("h100", "bf16"), gemm);
  EXPECT_NEAR(bf16, gemm.flops / (989e12 * 0.7) + 4e-6, 1e-9);
  double fp32 = predictLaunchSeconds(targetFor("h100", "fp32"), gemm);
  EXPECT_NEAR(fp32, gemm.flops / (67e12 * 0.7) + 4e-6, 1e-9);
}

TEST(CostModel, MemoryBoundKernelsUseBandwidth) {
  LaunchWork add{"add", 1e6, 12e6};
  double t = predictLaunchSeconds(targetFor("a100-80gb"), add);
  EXPECT_NEAR(t, 12e6 / (2040e9 * 0.7) + 4e-6, 1e-12);
}

TEST(CostModel, CpuComputeScalesWithThreads) {
  LaunchWork gemm{"linear", 1e10, 1e6};
  double one = predictLaunchSeconds(targetFor("cpu", "fp32", 1), gemm);
  double four = predictLaunchSeconds(targetFor("cpu", "fp32", 4), gemm);
  EXPECT_NEAR(one - 1e-6, 4 * (four - 1e-6), 1e-9);
}

TEST(CostModel, SumsLaunchesByKind) {
  CostTarget target = targetFor("cpu", "fp32", 2);
  std::vector<LaunchWork> launches = {
      {"linear", 1e9, 1e6}, {"linear", 1e9, 1e6}, {"silu", 1e6, 8e6}};
  TimeEstimate estimate = predictLaunches(target, launches);
  double gemm = 2 * predictLaunchSeconds(target, launches[0]);
  double silu = predictLaunchSeconds(target, launches[2]);
  EXPECT_NEAR(estimate.seconds, gemm + silu, 1e-12);
  EXPECT_NEAR(estimate.secondsByKind["gemm"], gemm, 1e-12);
  EXPECT_NEAR(estimate.secondsByKind["elementwise"], silu, 1e-12);
  TimeEstimate twice;
  twice.add(estimate, 2);
  EXPECT_NEAR(twice.seconds, 2 * estimate.seconds, 1e-12);
}

TEST(CostModel, CalibratedFileOverridesEfficiencies) {
  std::string path = hardwareFile("backend: cpu\ncpu_gflops_per_thread: 10\n"
                                  "bandwidth_gbs: 5\nefficiency_gemm: 0.5\n"
                                  "launch_overhead_us: 0\n");
  llvm::Expected<HardwareSpec> hardware = resolveHardware(path);
  ASSERT_TRUE(static_cast<bool>(hardware)) << llvm::toString(hardware.takeError());
  EXPECT_EQ(efficiencyOf(*hardware, "gemm"), 0.5);
  EXPECT_EQ(efficiencyOf(*hardware, "norm"), 0.7); // the default
  CostTarget target{*hardware, "fp32", 2};
  EXPECT_NEAR(predictLaunchSeconds(target, {"linear", 1e10, 0}),
              1e10 / (2 * 10e9 * 0.5), 1e-12);
  llvm::sys::fs::remove(path);
}

TEST(CostModel, CpuFileInheritsBuiltInFigures) {
  std::string path = hardwareFile("backend: cpu\n");
  llvm::Expected<HardwareSpec> hardware = resolveHardware(path);
  ASSERT_TRUE(static_cast<bool>(hardware)) << llvm::toString(hardware.takeError());
  EXPECT_GT(hardware->cpuGflopsPerThread, 0);
  EXPECT_EQ(unpredictableBecause({*hardware, "fp32", 1}), "");
  llvm::sys::fs::remove(path);
}

TEST(CostModel, UnknownEfficiencyKindIsAnError) {
  std::string path = hardwareFile("backend: cpu\nefficiency_warp: 0.5\n");
  llvm::Expected<HardwareSpec> hardware = resolveHardware(path);
  ASSERT_FALSE(static_cast<bool>(hardware));
  EXPECT_NE(llvm::toString(hardware.takeError()).find("unknown kernel kind"),
            std::string::npos);
  llvm::sys::fs::remove(path);
}

TEST(CostModel, GpuFileWithoutRatesIsUnpredictable) {
  std::string path = hardwareFile("backend: cuda\nsm: 90\nmemory_gib: 80\n");
  llvm::Expected<HardwareSpec> hardware = resolveHardware(path);
  ASSERT_TRUE(static_cast<bool>(hardware)) << llvm::toString(hardware.takeError());
  EXPECT_NE(unpredictableBecause({*hardware, "bf16", 1}), "");
  llvm::sys::fs::remove(path);
}

TEST(CostModel, HardwareDatabaseCoversTheTargets) {
  for (const char *name : {"h100", "h100-pcie", "h200", "a100-80gb",
                           "a100-40gb", "l4", "t4", "a10g", "rtx3090",
                           "rtx4090", "cpu"}) {
    CostTarget target = targetFor(name, "bf16");
    EXPECT_EQ(unpredictableBecause(target), "") << name;
  }
}

} // namespace

TEST(CostModel, ClustersNameNodesAndRanks) {
  CostTarget four = targetFor("4xcpu");
  EXPECT_EQ(four.hardware.ranks(), 4);
  EXPECT_EQ(four.hardware.nodes, 1);
  CostTarget nodes = targetFor("2x2xcpu");
  EXPECT_EQ(nodes.hardware.nodes, 2);
  EXPECT_EQ(nodes.hardware.gpus, 2);
  EXPECT_EQ(nodes.hardware.ranks(), 4);
  CostTarget gpus = targetFor("2x8xh100");
  EXPECT_EQ(gpus.hardware.ranks(), 16);
  EXPECT_TRUE(gpus.hardware.isCuda());
  llvm::Expected<HardwareSpec> bad = resolveHardware("0x2xcpu");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("a count in [1, 4096]"),
            std::string::npos);
}

TEST(CostModel, CollectivesFollowTheRingFormulas) {
  // FORMATS.md: all-reduce sends 2(p-1)/p n per rank, reduce-scatter and
  // all-gather (p-1)/p n.
  EXPECT_DOUBLE_EQ(ringBytesSent("all_reduce", 1000, 4), 1500);
  EXPECT_DOUBLE_EQ(ringBytesSent("reduce_scatter", 1000, 4), 750);
  EXPECT_DOUBLE_EQ(ringBytesSent("all_gather", 1000, 4), 750);
  EXPECT_DOUBLE_EQ(ringBytesSent("all_reduce", 1000, 1), 0);
  // Time: bytes over the link (times its efficiency) plus a latency per
  // ring hop, 2(p-1) of them for all-reduce.
  CostTarget h100 = targetFor("8xh100");
  LaunchWork reduce{"all_reduce", 0, 1e9, 8};
  double bandwidth = h100.hardware.linkGBs * 1e9 *
                     efficiencyOf(h100.hardware, "comm");
  double expected = 2.0 * 7 / 8 * 1e9 / bandwidth +
                    14 * h100.hardware.linkLatencyUs * 1e-6;
  EXPECT_NEAR(predictLaunchSeconds(h100, reduce), expected, 1e-12);
  EXPECT_EQ(costKindOf("all_reduce"), "comm");
}
