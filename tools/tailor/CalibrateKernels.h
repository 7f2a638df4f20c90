//===- CalibrateKernels.h - kernels calibrate times apart -------*- C++ -*-===//
//
// Most figures come from timing a plan's own launches; the gradient
// compressors' kernels run only in plans of several ranks, which calibrate
// cannot run alone, so it times them on a bucket of its own.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TOOLS_TAILOR_CALIBRATEKERNELS_H
#define TAILOR_TOOLS_TAILOR_CALIBRATEKERNELS_H

#include "compiler/CostModel.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tailor {

/// One timed launch: its work as the cost model reads it, its seconds
/// summed over `runs` runs, and the fastest run's.
struct TimedLaunch {
  LaunchWork work;
  double seconds = 0;
  int64_t runs = 0;
  double fastest = std::numeric_limits<double>::infinity();
};

/// A bucket to time the compressors on: `elements` f32 gradients (a
/// multiple of 8) in `members` equal tensors, with residuals; top-k sends
/// `ratio` of them; `ranks` ranks' parts are averaged.
struct CompressionBucket {
  int64_t elements = int64_t(1) << 22;
  int64_t members = 4;
  double ratio = 0.01;
  int64_t ranks = 2;
};

/// Times topk_compress, sparse_average, sign_compress and sign_average
/// (runtime/cpu/CompressionKernels.cpp) `rounds` times each on `bucket`,
/// their work from compressionWork; appends one record per kernel to
/// `launches`. Returns "" or what failed.
std::string timeCompressionKernels(const CompressionBucket &bucket, int rounds,
                                   std::vector<TimedLaunch> &launches);

} // namespace tailor

#endif // TAILOR_TOOLS_TAILOR_CALIBRATEKERNELS_H
