//===- CalibrateLinks.h - collective bandwidth and latency between ranks -*- C++ -*-===//
//
// `mpirun -np N tailor calibrate ...`: after the kernels, every rank times
// all-reduce, reduce-scatter and all-gather of f32 buffers from 4 KiB to
// 16 MiB over the communicator the trainer uses (MPI between CPU ranks),
// and the cost model's alpha-beta ring formulas are fitted to the slowest
// rank's times: one latency per ring step (link_latency_us), one
// bandwidth for the bytes each rank sends (link_gbs) and the share of it
// the summing collectives keep (efficiency_reduce: their sums cost memory
// traffic, as much as the copy between CPU ranks), so that compile and
// explore price a plan's collectives on this machine's own links.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TOOLS_TAILOR_CALIBRATELINKS_H
#define TAILOR_TOOLS_TAILOR_CALIBRATELINKS_H

#include "runtime/comm/Communicator.h"

#include <string>
#include <vector>

namespace tailor {

/// One collective at one size: the slowest rank's median seconds.
struct CollectiveSample {
  std::string kind;
  double bytes = 0;
  int ranks = 0;
  double seconds = 0;
};

/// Times every collective kind at each size on `group` (`rounds` timed
/// calls after one untimed, every rank the same calls in the same order).
/// "" or the communicator's failure.
std::string timeCollectives(runtime::comm::Communicator &group, int rounds,
                            std::vector<CollectiveSample> &samples);

/// The link as the cost model reads it: link_gbs, link_latency_us and
/// efficiency_reduce, the share of that bandwidth the collectives that sum
/// (all-reduce, reduce-scatter) keep.
struct LinkFit {
  double gbs = 0;
  double latencyUs = 0;
  double reduceEfficiency = 1;
};

/// Least squares, relative to each time (small messages count as much as
/// large ones), of seconds = hops * latency + ringBytesSent / bandwidth,
/// the bandwidth times efficiency_reduce for the collectives that sum; a
/// fit with a negative latency is refitted with none.
LinkFit fitLink(const std::vector<CollectiveSample> &samples);

/// What the fitted link predicts for `sample`, seconds.
double linkSeconds(const LinkFit &link, const CollectiveSample &sample);

} // namespace tailor

#endif // TAILOR_TOOLS_TAILOR_CALIBRATELINKS_H
