//===- CostModelTest.cpp - the roofline cost model and hardware figures ---===//

#include "compiler/CostModel.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>

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
  // Linear scaling without a size dependence (half 0): four threads are
  // four times one.
  CostTarget one = targetFor("cpu", "fp32", 1);
  one.hardware.cpuParallelEfficiency = 1;
  one.hardware.cpuParallelHalfMflop = 0;
  CostTarget four = one;
  four.threads = 4;
  LaunchWork gemm{"linear", 1e10, 1e6};
  double t1 = predictLaunchSeconds(one, gemm);
  double t4 = predictLaunchSeconds(four, gemm);
  EXPECT_NEAR(t1 - 1e-6, 4 * (t4 - 1e-6), 1e-9);
}

TEST(CostModel, SmallGemmsGainLessFromThreads) {
  // Speedup = 1 + (T - 1) e F / (F + half): at F = half each further
  // thread adds e / 2; it grows with F towards 1 + (T - 1) e.
  HardwareSpec h = targetFor("cpu").hardware;
  h.cpuParallelEfficiency = 0.8;
  h.cpuParallelHalfMflop = 50;
  EXPECT_NEAR(cpuThreadSpeedup(h, 2, 50e6), 1.4, 1e-12);
  EXPECT_NEAR(cpuThreadSpeedup(h, 1, 1e12), 1.0, 1e-12);
  double previous = 1.0;
  for (double flops : {1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11}) {
    double speedup = cpuThreadSpeedup(h, 4, flops);
    EXPECT_GT(speedup, previous) << flops;
    EXPECT_LT(speedup, 1 + 3 * 0.8) << flops;
    previous = speedup;
  }
  EXPECT_NEAR(cpuThreadSpeedup(h, 4, 1e13), 1 + 3 * 0.8, 1e-3);
  // Through the model: GFLOP/s reached on two threads grows with size,
  // while one thread's rate is the same for every size (overhead aside).
  CostTarget target{h, "fp32", 2};
  target.hardware.launchOverheadUs = 0;
  CostTarget single = target;
  single.threads = 1;
  auto rate = [](const CostTarget &t, double flops) {
    return flops / predictLaunchSeconds(t, {"linear", flops, 0});
  };
  EXPECT_LT(rate(target, 3e6), rate(target, 3e8));
  EXPECT_LT(rate(target, 3e8), rate(target, 3e10));
  EXPECT_NEAR(rate(single, 3e6), rate(single, 3e10), 1e-3 * rate(single, 3e6));
  // Only GEMMs: a norm's compute scales as a large GEMM does.
  EXPECT_NEAR(predictLaunchSeconds(target, {"rms_norm", 1e6, 0}),
              1e6 / (h.cpuGflopsPerThread * 1e9 * 1.8 * 0.7), 1e-15);
}

TEST(CostModel, BuiltInCpuTellsGemmSizesApart) {
  HardwareSpec cpu = targetFor("cpu").hardware;
  EXPECT_GT(cpu.cpuParallelHalfMflop, 0);
  EXPECT_LT(cpuThreadSpeedup(cpu, 2, 3e6), cpuThreadSpeedup(cpu, 2, 3e9));
  // A CPU file that leaves the scaling out inherits the built-in's.
  std::string path = hardwareFile("backend: cpu\ncpu_gflops_per_thread: 30\n");
  llvm::Expected<HardwareSpec> file = resolveHardware(path);
  ASSERT_TRUE(static_cast<bool>(file)) << llvm::toString(file.takeError());
  EXPECT_EQ(file->cpuParallelHalfMflop, cpu.cpuParallelHalfMflop);
  EXPECT_EQ(file->cpuParallelEfficiency, cpu.cpuParallelEfficiency);
  llvm::sys::fs::remove(path);
}

TEST(CostModel, CalibratedScalingRoundTripsThroughTheFile) {
  // What `tailor calibrate` writes reads back to the same figures, and the
  // figures a plan carries (hardwareFigures) rebuild them.
  std::string path = hardwareFile(
      "backend: cpu\ncpu_gflops_per_thread: 31.5\n"
      "cpu_parallel_efficiency: 0.8125\ncpu_parallel_half_mflop: 12.25\n"
      "efficiency_compression: 0.0625\n");
  llvm::Expected<HardwareSpec> h = resolveHardware(path);
  ASSERT_TRUE(static_cast<bool>(h)) << llvm::toString(h.takeError());
  EXPECT_EQ(h->cpuParallelEfficiency, 0.8125);
  EXPECT_EQ(h->cpuParallelHalfMflop, 12.25);
  EXPECT_EQ(efficiencyOf(*h, "compression"), 0.0625);
  HardwareSpec rebuilt;
  for (const auto &[key, value] : hardwareFigures(*h)) {
    EXPECT_TRUE(setHardwareFigure(rebuilt, key, value)) << key;
  }
  EXPECT_EQ(rebuilt.cpuParallelHalfMflop, 12.25);
  EXPECT_EQ(efficiencyOf(rebuilt, "compression"), 0.0625);
  EXPECT_EQ(cpuThreadSpeedup(rebuilt, 3, 1e8), cpuThreadSpeedup(*h, 3, 1e8));
  llvm::sys::fs::remove(path);
}

TEST(CostModel, PoolKernelsGainFromThreadsByLength) {
  // With calibrated pool scaling a pool kernel's time is its one-thread
  // roofline (compute at one thread's rate, bytes at one thread's
  // bandwidth) over 1 + (T - 1) e t / (t + half), t that time in us.
  HardwareSpec h = targetFor("cpu").hardware;
  h.cpuGflopsPerThread = 50;
  h.memoryBandwidthGBs = 10;
  h.launchOverheadUs = 2;
  h.cpuPoolParallelEfficiency = 0.6;
  h.cpuPoolHalfUs = 40;
  h.efficiency["elementwise"] = 1.0;
  EXPECT_NEAR(cpuPoolSpeedup(h, 2, 40e-6), 1.3, 1e-12);
  EXPECT_NEAR(cpuPoolSpeedup(h, 1, 1.0), 1.0, 1e-12);
  EXPECT_NEAR(cpuPoolSpeedup(h, 3, 1e3), 1 + 2 * 0.6, 1e-6);
  CostTarget two{h, "fp32", 2};
  // A memory-bound add of 4 MB: 400 us on one thread, sped up.
  LaunchWork add{"add", 1e5, 4e6};
  double oneThread = 4e6 / 10e9;
  EXPECT_NEAR(predictLaunchSeconds(two, add),
              oneThread / (1 + 0.6 * 400 / 440.0) + 2e-6, 1e-12);
  // Short launches gain less than long ones, GEMMs keep their own curve.
  auto gain = [&](double bytes) {
    CostTarget one = two;
    one.threads = 1;
    LaunchWork work{"add", 0, bytes};
    return (predictLaunchSeconds(one, work) - 2e-6) /
           (predictLaunchSeconds(two, work) - 2e-6);
  };
  EXPECT_LT(gain(1e5), gain(1e6));
  EXPECT_LT(gain(1e6), gain(1e8));
  CostTarget old = two;
  old.hardware.cpuPoolParallelEfficiency.reset();
  EXPECT_EQ(predictLaunchSeconds(two, {"linear", 1e9, 1e6}),
            predictLaunchSeconds(old, {"linear", 1e9, 1e6}));
  // Without the figure (older files): bytes do not gain from threads.
  EXPECT_NEAR(predictLaunchSeconds(old, add), oneThread + 2e-6, 1e-12);
}

TEST(CostModel, PoolScalingRoundTripsAndOlderFilesReadAsBefore) {
  std::string path = hardwareFile(
      "backend: cpu\ncpu_gflops_per_thread: 31.5\n"
      "cpu_pool_parallel_efficiency: 0.5625\ncpu_pool_half_us: 37.5\n");
  llvm::Expected<HardwareSpec> h = resolveHardware(path);
  ASSERT_TRUE(static_cast<bool>(h)) << llvm::toString(h.takeError());
  ASSERT_TRUE(h->cpuPoolParallelEfficiency.has_value());
  EXPECT_EQ(*h->cpuPoolParallelEfficiency, 0.5625);
  EXPECT_EQ(h->cpuPoolHalfUs, 37.5);
  HardwareSpec rebuilt;
  for (const auto &[key, value] : hardwareFigures(*h)) {
    EXPECT_TRUE(setHardwareFigure(rebuilt, key, value)) << key;
  }
  ASSERT_TRUE(rebuilt.cpuPoolParallelEfficiency.has_value());
  EXPECT_EQ(cpuPoolSpeedup(rebuilt, 2, 1e-4), cpuPoolSpeedup(*h, 2, 1e-4));
  llvm::sys::fs::remove(path);
  // A file from before the figure: no pool scaling, and none in a plan's
  // figures either.
  path = hardwareFile("backend: cpu\ncpu_gflops_per_thread: 31.5\n");
  h = resolveHardware(path);
  ASSERT_TRUE(static_cast<bool>(h)) << llvm::toString(h.takeError());
  EXPECT_FALSE(h->cpuPoolParallelEfficiency.has_value());
  for (const auto &[key, value] : hardwareFigures(*h)) {
    EXPECT_NE(key, "cpu_pool_parallel_efficiency");
  }
  llvm::sys::fs::remove(path);
  // A half length without the gain it shapes, or a gain above 1: errors.
  for (const char *text :
       {"backend: cpu\ncpu_pool_half_us: 20\n",
        "backend: cpu\ncpu_pool_parallel_efficiency: 1.5\n"}) {
    path = hardwareFile(text);
    h = resolveHardware(path);
    ASSERT_FALSE(static_cast<bool>(h)) << text;
    std::string message = llvm::toString(h.takeError());
    EXPECT_NE(message.find("cpu_pool_"), std::string::npos) << message;
    llvm::sys::fs::remove(path);
  }
}

TEST(CostModel, BadScalingFiguresAreRefused) {
  for (const char *value : {"-1", "nan", "inf", "-inf", "fast", "1e400"}) {
    std::string path = hardwareFile(
        std::string("backend: cpu\ncpu_parallel_half_mflop: ") + value + "\n");
    llvm::Expected<HardwareSpec> h = resolveHardware(path);
    ASSERT_FALSE(static_cast<bool>(h)) << value;
    std::string message = llvm::toString(h.takeError());
    EXPECT_NE(message.find("bad value for 'cpu_parallel_half_mflop'"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(":2:"), std::string::npos) << message;
    llvm::sys::fs::remove(path);
  }
  std::string path =
      hardwareFile("backend: cpu\nefficiency_compression: 0\n");
  EXPECT_FALSE(static_cast<bool>(resolveHardware(path)));
  llvm::consumeError(resolveHardware(path).takeError());
  llvm::sys::fs::remove(path);
  HardwareSpec h;
  EXPECT_FALSE(setHardwareFigure(h, "cpu_parallel_half_mflop", -1));
  EXPECT_FALSE(setHardwareFigure(h, "cpu_parallel_half_mflop", NAN));
  EXPECT_FALSE(setHardwareFigure(h, "cpu_parallel_half_mflop", INFINITY));
  EXPECT_EQ(h.cpuParallelHalfMflop, 0);
}

TEST(CostModel, CompressionKernelsArePricedByWhatTheyDo) {
  EXPECT_EQ(costKindOf("topk_compress"), "compression");
  EXPECT_EQ(costKindOf("sign_average"), "compression");
  EXPECT_EQ(costKindOf("error_feedback_add"), "elementwise");
  double n = 1 << 22;
  LaunchWork topk = compressionWork("topk_compress", n, n / 100, 4, 1, true);
  LaunchWork sign = compressionWork("sign_compress", n, 0, 4, 1, true);
  // A scan plus a heap: more than the scan's operations per element, and
  // growing with k.
  EXPECT_GT(topk.flops, 5 * n);
  EXPECT_GT(compressionWork("topk_compress", n, n / 10, 4, 1, true).flops,
            topk.flops);
  EXPECT_EQ(topk.bytes, 12 * n + 8 * (n / 100));
  // Averaging signs reads every rank's bits.
  EXPECT_GT(compressionWork("sign_average", n, 0, 4, 8, false).flops,
            2 * compressionWork("sign_average", n, 0, 4, 2, false).flops);
  // Serial loops: one thread's rate at the kind's efficiency, whatever
  // the threads; compute-bound, unlike a streaming pass over the bytes.
  CostTarget one = targetFor("cpu", "fp32", 1);
  CostTarget four = targetFor("cpu", "fp32", 4);
  EXPECT_EQ(predictLaunchSeconds(one, topk), predictLaunchSeconds(four, topk));
  double rate = one.hardware.cpuGflopsPerThread * 1e9 *
                efficiencyOf(one.hardware, "compression");
  EXPECT_NEAR(predictLaunchSeconds(one, sign), sign.flops / rate + 1e-6,
              1e-12);
  LaunchWork streaming{"add", n, sign.bytes};
  EXPECT_GT(predictLaunchSeconds(one, sign),
            2 * predictLaunchSeconds(one, streaming));
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
                                  "launch_overhead_us: 0\n"
                                  "cpu_parallel_efficiency: 1\n"
                                  "cpu_parallel_half_mflop: 0\n");
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

// Tests that a collective runs at the link its group's ring crosses: within
// a node at link_gbs, across nodes at inter_node_gbs (the slower of the two
// when the ring has hops of both kinds), the latency of the slowest, and
// that built-in GPU names of several nodes carry their servers' fabric.
TEST(CostModel, CollectivesRunAtTheLinkTheirGroupCrosses) {
  HardwareSpec h = targetFor("2x2xcpu").hardware;
  h.linkGBs = 10, h.linkLatencyUs = 2;
  h.interNodeGBs = 0.125, h.interNodeLatencyUs = 50;
  LinkFigures within = collectiveLink(h, {0, 1});
  EXPECT_DOUBLE_EQ(within.gbs, 10);
  EXPECT_DOUBLE_EQ(within.latencyUs, 2);
  LinkFigures across = collectiveLink(h, {0, 2});
  EXPECT_DOUBLE_EQ(across.gbs, 0.125);
  EXPECT_DOUBLE_EQ(across.latencyUs, 50);
  LinkFigures world = collectiveLink(h, {0, 1, 2, 3});
  EXPECT_DOUBLE_EQ(world.gbs, 0.125);
  EXPECT_DOUBLE_EQ(world.latencyUs, 50);
  EXPECT_DOUBLE_EQ(collectiveLink(h, {3}).gbs, 0);
  // A hop across nodes as fast as the one within: both bound the ring.
  h.interNodeGBs = 20, h.interNodeLatencyUs = 1;
  world = collectiveLink(h, {0, 1, 2, 3});
  EXPECT_DOUBLE_EQ(world.gbs, 10);
  EXPECT_DOUBLE_EQ(world.latencyUs, 2);
  // No inter-node figure: every hop at link_gbs.
  h.interNodeGBs = 0;
  EXPECT_DOUBLE_EQ(collectiveLink(h, {0, 2}).gbs, 10);

  // The time follows: the same all-reduce across nodes is slower.
  CostTarget target = targetFor("2x2xcpu");
  target.hardware.interNodeGBs = 0.125;
  target.hardware.interNodeLatencyUs = 50;
  LaunchWork local{"all_reduce", 0, 1e6, 2};
  local.link = collectiveLink(target.hardware, {0, 1});
  LaunchWork remote = local;
  remote.link = collectiveLink(target.hardware, {0, 2});
  EXPECT_GT(predictLaunchSeconds(target, remote),
            10 * predictLaunchSeconds(target, local));

  HardwareSpec dgx = targetFor("2x8xh100").hardware;
  EXPECT_DOUBLE_EQ(dgx.interNodeGBs, 50);
  EXPECT_DOUBLE_EQ(collectiveLink(dgx, {0, 8}).gbs, 50);
  EXPECT_DOUBLE_EQ(collectiveLink(dgx, {0, 1, 2, 3, 4, 5, 6, 7}).gbs,
                   dgx.linkGBs);
  EXPECT_DOUBLE_EQ(targetFor("8xh100").hardware.interNodeGBs, 0);
  EXPECT_DOUBLE_EQ(targetFor("2x2xcpu").hardware.interNodeGBs, 0);
}
