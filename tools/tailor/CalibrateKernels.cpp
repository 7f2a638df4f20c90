//===- CalibrateKernels.cpp - compression kernels timed on their own ------===//
//
// The compressors' kernels are serial loops whose time depends on the data
// (top-k's heap takes in more entries when large magnitudes come late), so
// the bucket holds pseudo-random values in no order, as gradients are from
// the heap's point of view, and is refilled before every round.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/CalibrateKernels.h"

#include "runtime/cpu/Kernel.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace tailor {

namespace {

using runtime::Attribute;
using runtime::DType;
using runtime::KernelCall;
using runtime::Tensor;

constexpr int64_t kElements = int64_t(1) << 22;
constexpr int64_t kMembers = 4;
constexpr int64_t kKept = kElements / 100;
constexpr int64_t kRanks = 2;

/// The bucket's buffers, each kernel's operands pointing into them.
struct Bucket {
  std::vector<float> grads = std::vector<float>(kElements);
  std::vector<float> residuals = std::vector<float>(kElements, 0.0f);
  std::vector<float> values = std::vector<float>(kRanks * kKept);
  std::vector<int32_t> indices = std::vector<int32_t>(kRanks * kKept);
  std::vector<uint8_t> signs = std::vector<uint8_t>(kRanks * kElements / 8);
  std::vector<float> scales = std::vector<float>(kRanks * kMembers);
  uint64_t state = 0x9e3779b97f4a7c15ull;

  /// New gradients in [-1, 1), from a 64-bit LCG.
  void refill() {
    for (float &g : grads) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      g = float(double(state >> 40) / double(1ull << 24) * 2.0 - 1.0);
    }
  }
  /// The members' tensors of `data` (grads or residuals).
  void addMembers(KernelCall &call, std::vector<float> &data) {
    for (int64_t m = 0; m < kMembers; ++m) {
      call.operands.push_back(
          Tensor{data.data() + m * (kElements / kMembers), DType::F32,
                 {kElements / kMembers}});
    }
  }
};

Attribute intAttr(const char *name, int64_t value) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.name = name;
  a.i = value;
  return a;
}

Attribute floatAttr(const char *name, double value) {
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.name = name;
  a.f = value;
  return a;
}

/// The four launches of one compressed bucket, in the order a step runs
/// them; every rank's gathered part is this rank's (the kernels' work does
/// not depend on whose it is).
std::vector<std::pair<const char *, KernelCall>> launchesOf(Bucket &b) {
  std::vector<std::pair<const char *, KernelCall>> calls(4);
  KernelCall &topk = calls[0].second;
  calls[0].first = "topk_compress";
  b.addMembers(topk, b.grads);
  b.addMembers(topk, b.residuals);
  topk.operands.push_back(Tensor{b.values.data(), DType::F32, {kKept}});
  topk.operands.push_back(Tensor{b.indices.data(), DType::I32, {kKept}});
  topk.attributes = runtime::Attributes({intAttr("members", kMembers)});
  KernelCall &sparse = calls[1].second;
  calls[1].first = "sparse_average";
  sparse.operands.push_back(
      Tensor{b.values.data(), DType::F32, {kRanks * kKept}});
  sparse.operands.push_back(
      Tensor{b.indices.data(), DType::I32, {kRanks * kKept}});
  b.addMembers(sparse, b.grads);
  sparse.attributes = runtime::Attributes({floatAttr("scale", 0.5)});
  KernelCall &sign = calls[2].second;
  calls[2].first = "sign_compress";
  b.addMembers(sign, b.grads);
  b.addMembers(sign, b.residuals);
  sign.operands.push_back(Tensor{b.signs.data(), DType::U8, {kElements / 8}});
  sign.operands.push_back(Tensor{b.scales.data(), DType::F32, {kMembers}});
  sign.attributes = runtime::Attributes({intAttr("members", kMembers)});
  KernelCall &average = calls[3].second;
  calls[3].first = "sign_average";
  average.operands.push_back(
      Tensor{b.signs.data(), DType::U8, {kRanks * kElements / 8}});
  average.operands.push_back(
      Tensor{b.scales.data(), DType::F32, {kRanks * kMembers}});
  b.addMembers(average, b.grads);
  return calls;
}

/// Copies this rank's part of the gathered buffers to the other ranks'
/// places, as the all-gather between the kernels would.
void gather(Bucket &b, int64_t first, int64_t count, bool signs) {
  for (int64_t r = 1; r < kRanks; ++r) {
    if (signs) {
      std::memcpy(b.signs.data() + r * kElements / 8, b.signs.data(),
                  kElements / 8);
      std::memcpy(b.scales.data() + r * kMembers, b.scales.data(),
                  kMembers * sizeof(float));
    } else {
      std::memcpy(b.values.data() + r * count, b.values.data() + first,
                  count * sizeof(float));
      std::memcpy(b.indices.data() + r * count, b.indices.data() + first,
                  count * sizeof(int32_t));
    }
  }
}

} // namespace

std::string timeCompressionKernels(int rounds,
                                   std::vector<TimedLaunch> &launches) {
  Bucket bucket;
  std::vector<std::pair<const char *, KernelCall>> calls = launchesOf(bucket);
  std::vector<TimedLaunch> timed(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const char *name = calls[i].first;
    const runtime::KernelDef *def = runtime::findCpuKernel(name);
    if (!def) {
      return std::string("the runtime has no kernel '") + name + "'";
    }
    if (std::string problem = def->check(calls[i].second); !problem.empty()) {
      return std::string(name) + ": " + problem;
    }
    timed[i].work = compressionWork(
        name, double(kElements), double(i == 1 ? kRanks * kKept : kKept),
        kMembers, i == 3 ? kRanks : 1, i == 0 || i == 2);
  }
  // One round untimed (pages touched, caches warm), then `rounds` timed.
  // Each compressor gets fresh gradients (the averages overwrite them).
  for (int round = -1; round < rounds; ++round) {
    for (size_t i = 0; i < calls.size(); ++i) {
      if (i == 0 || i == 2) {
        bucket.refill();
      }
      const runtime::KernelDef *def = runtime::findCpuKernel(calls[i].first);
      auto start = std::chrono::steady_clock::now();
      if (std::string problem = def->run(calls[i].second); !problem.empty()) {
        return std::string(calls[i].first) + ": " + problem;
      }
      std::chrono::duration<double> took =
          std::chrono::steady_clock::now() - start;
      if (i == 0 || i == 2) {
        gather(bucket, 0, kKept, i == 2);
      }
      if (round >= 0) {
        timed[i].seconds += took.count();
        timed[i].fastest = std::min(timed[i].fastest, took.count());
        ++timed[i].runs;
      }
    }
  }
  launches.insert(launches.end(), timed.begin(), timed.end());
  return "";
}

} // namespace tailor
