//===- ClusterFileTest.cpp - hardware files with mixed devices ------------===//

#include "compiler/CostModel.h"
#include "compiler/Hardware.h"

#include <gtest/gtest.h>

using namespace tailor;

namespace {

HardwareSpec parse(const std::string &text) {
  llvm::Expected<HardwareSpec> h = parseHardwareYaml(text, "lab.yaml");
  EXPECT_TRUE(static_cast<bool>(h)) << llvm::toString(h.takeError());
  return h ? *h : HardwareSpec();
}

std::string errorOf(const std::string &text) {
  llvm::Expected<HardwareSpec> h = parseHardwareYaml(text, "lab.yaml");
  if (h) {
    return "(parsed)";
  }
  return llvm::toString(h.takeError());
}

constexpr const char *kLab = R"(name: lab
nodes:
  - name: box0
    devices:
      - {kind: rtx4090, count: 2}
  - name: box1
    devices:
      - sm: 86
        memory_gib: 20
        bf16_tflops: 71
        fp32_tflops: 35.6
        bandwidth_gbs: 936
        link_gbs: 32
links:
  - {nodes: [box0, box1], kind: 10gbe, gbs: 1.25, latency_us: 30}
)";

} // namespace

TEST(ClusterFile, NodesListMixedDevicesInRankOrder) {
  HardwareSpec h = parse(kLab);
  ASSERT_TRUE(h.heterogeneous());
  EXPECT_EQ(h.name, "lab");
  EXPECT_EQ(h.ranks(), 3);
  EXPECT_EQ(h.rankDevice(0).name, "rtx4090");
  EXPECT_EQ(h.rankDevice(1).node, 0);
  EXPECT_EQ(h.rankDevice(2).node, 1);
  EXPECT_EQ(h.rankDevice(2).nodeName, "box1");
  EXPECT_EQ(h.rankDevice(2).sm, 86);
  EXPECT_TRUE(h.rankDevice(2).isCuda());
  EXPECT_EQ(h.rankDevice(2).bf16Tflops, 71);
  // The plan as a whole: the lowest SM, the smallest memory, and every
  // collective at the slowest hop (the 10 GbE link, not PCIe).
  EXPECT_EQ(h.sm, 86);
  EXPECT_EQ(h.memoryBytes, 20ull << 30);
  EXPECT_EQ(h.linkGBs, 1.25);
  EXPECT_EQ(h.linkLatencyUs, 30);
  EXPECT_EQ(h.rankDevice(0).linkGBs, 1.25);
  ASSERT_EQ(h.links.size(), 1u);
  EXPECT_EQ(h.links[0].kind, "10gbe");
  // Uneven nodes (2 and 1): one group for hybrid's purposes.
  EXPECT_EQ(h.nodes * h.gpus, 3);
}

TEST(ClusterFile, CpuSpeedScalesRatesAndThreadsAreKept) {
  HardwareSpec h = parse("nodes:\n"
                         "  - devices:\n"
                         "      - {kind: cpu, threads: 1}\n"
                         "      - {kind: cpu, count: 2, threads: 1, speed: 0.5}\n");
  ASSERT_EQ(h.ranks(), 3);
  HardwareSpec cpu = *resolveHardware("cpu");
  EXPECT_EQ(h.rankDevice(0).cpuGflopsPerThread, cpu.cpuGflopsPerThread);
  EXPECT_EQ(h.rankDevice(1).cpuGflopsPerThread, cpu.cpuGflopsPerThread / 2);
  EXPECT_EQ(h.rankDevice(2).memoryBandwidthGBs, cpu.memoryBandwidthGBs / 2);
  EXPECT_EQ(h.rankDevice(2).launchOverheadUs, cpu.launchOverheadUs * 2);
  EXPECT_EQ(h.rankDevice(2).threads, 1);
  EXPECT_EQ(h.rankDevice(2).speed, 0.5);
  // Half the rates: a GEMM takes twice as long.
  LaunchWork gemm{"linear", 1e9, 1e6};
  double whole = predictLaunchSeconds({h.rankDevice(0), "fp32", 1}, gemm);
  double half = predictLaunchSeconds({h.rankDevice(1), "fp32", 1}, gemm);
  EXPECT_NEAR(half, 2 * whole, 1e-12);
}

TEST(ClusterFile, FiguresRoundTripThroughTheirKeys) {
  HardwareSpec h = parse(kLab);
  for (int64_t rank = 0; rank < h.ranks(); ++rank) {
    const HardwareSpec &device = h.rankDevice(rank);
    HardwareSpec rebuilt;
    for (const auto &[key, value] : hardwareFigures(device)) {
      EXPECT_TRUE(setHardwareFigure(rebuilt, key, value)) << key;
    }
    EXPECT_EQ(hardwareFigures(rebuilt), hardwareFigures(device));
    EXPECT_EQ(rebuilt.backend, device.backend);
  }
  HardwareSpec spec;
  EXPECT_FALSE(setHardwareFigure(spec, "tflops", 1));
}

TEST(ClusterFile, FlatFilesStayHomogeneous) {
  HardwareSpec h = parse("backend: cpu\ngpus: 2\nnodes: 2\n");
  EXPECT_FALSE(h.heterogeneous());
  EXPECT_EQ(h.ranks(), 4);
  EXPECT_EQ(&h.rankDevice(3), &h);
}

TEST(ClusterFile, ErrorsNameTheFileLineAndKey) {
  EXPECT_NE(errorOf("nodes:\n  - devices:\n      - {kind: cpu, cores: 2}\n")
                .find("lab.yaml:3:21: unknown key 'cores'"),
            std::string::npos);
  EXPECT_NE(errorOf("nodes:\n  - devices:\n      - {kind: tpu}\n")
                .find("lab.yaml:3:16: unknown device kind 'tpu'"),
            std::string::npos);
  EXPECT_NE(errorOf("nodes:\n  - devices:\n      - {kind: cpu, count: 0}\n")
                .find("lab.yaml:3:28: bad value for 'count'"),
            std::string::npos);
  EXPECT_NE(errorOf("nodes:\n  - name: a\n    devices: [{kind: cpu}]\n"
                    "  - name: b\n    devices: [{kind: cpu}]\n")
                .find("node 'a' has no link"),
            std::string::npos);
  EXPECT_NE(errorOf("nodes:\n  - name: a\n    devices: [{kind: cpu}]\n"
                    "links:\n  - {nodes: [a, c], gbs: 1}\n")
                .find("lab.yaml:5:6: link to unknown node 'c'"),
            std::string::npos);
  EXPECT_NE(errorOf("nodes:\n  - devices: [{kind: cpu}, {kind: h100}]\n")
                .find("one plan runs on one backend"),
            std::string::npos);
  EXPECT_NE(errorOf("bf16_tflops: 3\nnodes:\n  - devices: [{kind: cpu}]\n")
                .find("lab.yaml:1:1: 'bf16_tflops' beside `nodes:`"),
            std::string::npos);
  EXPECT_NE(errorOf("nodes:\n  - name: a\n    devices: [{kind: cpu}]\n"
                    "  - name: a\n    devices: [{kind: cpu}]\n")
                .find("node name 'a' is used twice"),
            std::string::npos);
}

// Tests that a mixed cluster's collectives and stage-to-stage transfers are
// priced at the links they cross: within box0 at its RTX 4090s' PCIe link,
// between the boxes at the file's 10 GbE link, a ring over all three at
// the slower; a rank's own spec (no topology) at the cluster's slowest.
TEST(ClusterFile, HopsRunAtTheLinksTheyCross) {
  HardwareSpec h = parse(kLab);
  ASSERT_TRUE(h.heterogeneous());
  LinkFigures inBox = collectiveLink(h, {0, 1});
  EXPECT_DOUBLE_EQ(inBox.gbs, h.rankDevice(0).nodeLinkGBs);
  EXPECT_GT(inBox.gbs, 10);
  LinkFigures across = collectiveLink(h, {1, 2});
  EXPECT_DOUBLE_EQ(across.gbs, 1.25);
  EXPECT_DOUBLE_EQ(across.latencyUs, 30);
  LinkFigures ring = collectiveLink(h, {0, 1, 2});
  EXPECT_DOUBLE_EQ(ring.gbs, 1.25);
  EXPECT_DOUBLE_EQ(ring.latencyUs, 30);
  EXPECT_DOUBLE_EQ(collectiveLink(h.rankDevice(0), {0, 1}).gbs, 1.25);
  // A rank outside the cluster: the slowest link, not a crash.
  EXPECT_DOUBLE_EQ(collectiveLink(h, {0, 7}).gbs, h.linkGBs);
}
