//===- CalibrateLinks.cpp - collective bandwidth and latency between ranks ===//
//
// The sizes double from 4 KiB to 16 MiB (the buffer of the collective as a
// plan names it: the whole gradient bucket of an all-reduce, the gathered
// whole of an all-gather), so both terms of the alpha-beta cost show: the
// latency dominates the small ones, the bandwidth the large ones. Each
// size is timed `rounds` times after one warm-up call; a rank's time for
// it is the median, and the sample is the slowest rank's (a collective
// ends for the group when its last rank is done), agreed by an all-reduce
// of the times with Max.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/CalibrateLinks.h"

#include "compiler/CostModel.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tailor {

namespace comm = runtime::comm;

namespace {

constexpr size_t kSmallestBytes = size_t(4) << 10;
constexpr size_t kLargestBytes = size_t(16) << 20;
constexpr const char *kKinds[] = {"all_reduce", "reduce_scatter",
                                  "all_gather"};

/// One call of `kind` on a buffer of `elements` f32 (divisible by the
/// group's size): the plan's meaning of its size, as in SessionCollectives.
std::string callCollective(comm::Communicator &group, const std::string &kind,
                           std::vector<float> &send, std::vector<float> &recv,
                           size_t elements) {
  size_t share = elements / static_cast<size_t>(group.size());
  if (kind == "all_reduce") {
    return group.allReduce(send.data(), recv.data(), elements,
                           runtime::DType::F32, comm::ReduceOp::Sum);
  }
  if (kind == "reduce_scatter") {
    return group.reduceScatter(send.data(), recv.data(), share,
                               runtime::DType::F32, comm::ReduceOp::Sum);
  }
  return group.allGather(send.data(), recv.data(), share,
                         runtime::DType::F32);
}

/// This rank's median seconds of `rounds` calls, after a warm-up.
std::string timeOne(comm::Communicator &group, const std::string &kind,
                    size_t elements, int rounds, double &median) {
  std::vector<float> send(elements, 1.0f), recv(elements);
  std::vector<double> times;
  for (int round = -1; round < rounds; ++round) {
    if (std::string e = group.barrier(); !e.empty()) {
      return e;
    }
    auto start = std::chrono::steady_clock::now();
    if (std::string e = callCollective(group, kind, send, recv, elements);
        !e.empty()) {
      return e;
    }
    std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    if (round >= 0) {
      times.push_back(took.count());
    }
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2,
                   times.end());
  median = times[times.size() / 2];
  return "";
}

} // namespace

std::string timeCollectives(comm::Communicator &group, int rounds,
                            std::vector<CollectiveSample> &samples) {
  size_t unit = sizeof(float) * static_cast<size_t>(group.size());
  for (const char *kind : kKinds) {
    for (size_t bytes = kSmallestBytes; bytes <= kLargestBytes; bytes *= 2) {
      size_t elements = std::max<size_t>(1, bytes / unit) * group.size();
      double seconds = 0;
      if (std::string e = timeOne(group, kind, elements, rounds, seconds);
          !e.empty()) {
        return e;
      }
      double slowest = 0;
      if (std::string e = group.allReduce(&seconds, &slowest, 1,
                                          runtime::DType::F64,
                                          comm::ReduceOp::Max);
          !e.empty()) {
        return e;
      }
      samples.push_back({kind, double(elements * sizeof(float)),
                         group.size(), slowest});
    }
  }
  return "";
}

namespace {

/// The ring steps one latency is paid for (CostModel's collectiveSeconds).
double hopsOf(const CollectiveSample &s) {
  return (s.kind == "all_reduce" ? 2.0 : 1.0) * (s.ranks - 1);
}

double sentOf(const CollectiveSample &s) {
  return ringBytesSent(s.kind, s.bytes, s.ranks);
}

} // namespace

namespace {

bool reduces(const CollectiveSample &s) {
  return s.kind == "all_reduce" || s.kind == "reduce_scatter";
}

/// Solves the 3x3 system m x = v by Gaussian elimination with partial
/// pivoting; false when it is singular.
bool solve3(double m[3][3], double v[3], double x[3]) {
  for (int c = 0; c < 3; ++c) {
    int pivot = c;
    for (int r = c + 1; r < 3; ++r) {
      if (std::fabs(m[r][c]) > std::fabs(m[pivot][c])) {
        pivot = r;
      }
    }
    if (std::fabs(m[pivot][c]) < 1e-300) {
      return false;
    }
    std::swap(m[c], m[pivot]);
    std::swap(v[c], v[pivot]);
    for (int r = c + 1; r < 3; ++r) {
      double f = m[r][c] / m[c][c];
      for (int k = c; k < 3; ++k) {
        m[r][k] -= f * m[c][k];
      }
      v[r] -= f * v[c];
    }
  }
  for (int c = 2; c >= 0; --c) {
    double sum = v[c];
    for (int k = c + 1; k < 3; ++k) {
      sum -= m[c][k] * x[k];
    }
    x[c] = sum / m[c][c];
  }
  return true;
}

/// Seconds per byte sent of the samples that do (or do not) reduce, fitted
/// alone with no latency: the fallback when the full fit's latency is not
/// positive.
double perByteOf(const std::vector<CollectiveSample> &samples, bool reducing) {
  double bb = 0, bt = 0;
  for (const CollectiveSample &s : samples) {
    if (reduces(s) != reducing) {
      continue;
    }
    double w = 1.0 / std::max(s.seconds * s.seconds, 1e-18);
    bb += w * sentOf(s) * sentOf(s);
    bt += w * sentOf(s) * s.seconds;
  }
  return bb > 0 ? bt / bb : 0;
}

} // namespace

LinkFit fitLink(const std::vector<CollectiveSample> &samples) {
  // Weighted least squares (weights 1 / t^2) of
  //   t = hops a + sent g        (all-gather: moving bytes),
  //   t = hops a + sent r        (all-reduce, reduce-scatter: and summing)
  // for the latency a and the seconds per byte g and r.
  double m[3][3] = {}, v[3] = {};
  for (const CollectiveSample &s : samples) {
    double w = 1.0 / std::max(s.seconds * s.seconds, 1e-18);
    double row[3] = {hopsOf(s), reduces(s) ? 0 : sentOf(s),
                     reduces(s) ? sentOf(s) : 0};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        m[i][j] += w * row[i] * row[j];
      }
      v[i] += w * row[i] * s.seconds;
    }
  }
  double x[3] = {0, 0, 0};
  if (!solve3(m, v, x) || x[0] < 0 || x[1] <= 0 || x[2] <= 0) {
    x[0] = 0;
    x[1] = perByteOf(samples, false);
    x[2] = perByteOf(samples, true);
  }
  LinkFit fit;
  fit.latencyUs = x[0] * 1e6;
  fit.gbs = x[1] > 0 ? 1e-9 / x[1] : 0;
  fit.reduceEfficiency =
      x[1] > 0 && x[2] > 0 ? std::min(1.0, x[1] / x[2]) : 1.0;
  return fit;
}

double linkSeconds(const LinkFit &link, const CollectiveSample &sample) {
  // The cost model's own pricing, on a target holding the fitted link.
  CostTarget target;
  target.hardware.linkGBs = link.gbs;
  target.hardware.linkLatencyUs = link.latencyUs;
  target.hardware.efficiency["comm"] = 1.0;
  target.hardware.efficiency["reduce"] = link.reduceEfficiency;
  LaunchWork work;
  work.kernel = sample.kind;
  work.bytes = sample.bytes;
  work.ranks = sample.ranks;
  return predictLaunchSeconds(target, work);
}

} // namespace tailor
