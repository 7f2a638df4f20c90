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

namespace tailor {

namespace {

using runtime::Attribute;
using runtime::DType;
using runtime::KernelCall;
using runtime::Tensor;

/// The bucket's buffers, each kernel's operands pointing into them.
struct Bucket {
  const int64_t n, members, kept, ranks;
  std::vector<float> grads = std::vector<float>(n);
  std::vector<float> residuals = std::vector<float>(n, 0.0f);
  std::vector<float> values = std::vector<float>(ranks * kept);
  std::vector<int32_t> indices = std::vector<int32_t>(ranks * kept);
  std::vector<uint8_t> signs = std::vector<uint8_t>(ranks * n / 8);
  std::vector<float> scales = std::vector<float>(ranks * members);
  uint64_t state = 0x9e3779b97f4a7c15ull;

  explicit Bucket(const CompressionBucket &shape)
      : n(shape.elements), members(shape.members),
        kept(std::max<int64_t>(
            1, int64_t(double(shape.elements) * shape.ratio))),
        ranks(shape.ranks) {}

  /// New gradients in [-1, 1), from a 64-bit LCG.
  void refill() {
    for (float &g : grads) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      g = float(double(state >> 40) / double(1ull << 24) * 2.0 - 1.0);
    }
  }
  /// The members' tensors of `data` (grads or residuals).
  void addMembers(KernelCall &call, std::vector<float> &data) {
    for (int64_t m = 0; m < members; ++m) {
      call.operands.push_back(
          Tensor{data.data() + m * (n / members), DType::F32,
                 {n / members}});
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
  const int64_t n = b.n, members = b.members,
                kept = b.kept, ranks = b.ranks;
  std::vector<std::pair<const char *, KernelCall>> calls(4);
  KernelCall &topk = calls[0].second;
  calls[0].first = "topk_compress";
  b.addMembers(topk, b.grads);
  b.addMembers(topk, b.residuals);
  topk.operands.push_back(Tensor{b.values.data(), DType::F32, {kept}});
  topk.operands.push_back(Tensor{b.indices.data(), DType::I32, {kept}});
  topk.attributes = runtime::Attributes({intAttr("members", members)});
  KernelCall &sparse = calls[1].second;
  calls[1].first = "sparse_average";
  sparse.operands.push_back(
      Tensor{b.values.data(), DType::F32, {ranks * kept}});
  sparse.operands.push_back(
      Tensor{b.indices.data(), DType::I32, {ranks * kept}});
  b.addMembers(sparse, b.grads);
  sparse.attributes = runtime::Attributes({floatAttr("scale", 0.5)});
  KernelCall &sign = calls[2].second;
  calls[2].first = "sign_compress";
  b.addMembers(sign, b.grads);
  b.addMembers(sign, b.residuals);
  sign.operands.push_back(Tensor{b.signs.data(), DType::U8, {n / 8}});
  sign.operands.push_back(Tensor{b.scales.data(), DType::F32, {members}});
  sign.attributes = runtime::Attributes({intAttr("members", members)});
  KernelCall &average = calls[3].second;
  calls[3].first = "sign_average";
  average.operands.push_back(
      Tensor{b.signs.data(), DType::U8, {ranks * n / 8}});
  average.operands.push_back(
      Tensor{b.scales.data(), DType::F32, {ranks * members}});
  b.addMembers(average, b.grads);
  return calls;
}

/// Fills the other ranks' places of the gathered buffers, as the
/// all-gather between the kernels would: their own signs (independent
/// bits: the average's per-rank select must not learn a copy's pattern)
/// and this rank's pairs at other positions (their scattered adds land
/// elsewhere), with this rank's scales and values.
void gather(Bucket &b, bool signs) {
  for (int64_t r = 1; r < b.ranks; ++r) {
    if (signs) {
      for (int64_t i = 0; i < b.n / 8; ++i) {
        b.state = b.state * 6364136223846793005ull + 1442695040888963407ull;
        b.signs[size_t(r * b.n / 8 + i)] = uint8_t(b.state >> 56);
      }
      std::copy_n(b.scales.begin(), b.members,
                  b.scales.begin() + r * b.members);
    } else {
      int64_t shift = r * b.n / b.ranks;
      for (int64_t j = 0; j < b.kept; ++j) {
        b.values[size_t(r * b.kept + j)] = b.values[size_t(j)];
        b.indices[size_t(r * b.kept + j)] =
            int32_t((b.indices[size_t(j)] + shift) % b.n);
      }
    }
  }
}

} // namespace

std::string timeCompressionKernels(const CompressionBucket &shape, int rounds,
                                   std::vector<TimedLaunch> &launches) {
  if (shape.members < 1 || shape.elements < 8 * shape.members ||
      shape.elements % 8 != 0 ||
      shape.elements % shape.members != 0 || shape.ranks < 1 ||
      !(shape.ratio > 0 && shape.ratio <= 1)) {
    return "a bucket of " + std::to_string(shape.elements) + " elements in " +
           std::to_string(shape.members) + " tensors, " +
           std::to_string(shape.ranks) +
           " ranks: expected a multiple of 8 elements split evenly, ranks "
           "of at least 1 and a ratio in (0, 1]";
  }
  Bucket bucket(shape);
  const int64_t n = bucket.n, members = bucket.members,
                kept = bucket.kept, ranks = bucket.ranks;
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
        name, double(n), double(i == 1 ? ranks * kept : kept),
        members, i == 3 ? ranks : 1, i == 0 || i == 2);
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
        gather(bucket, i == 2);
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
