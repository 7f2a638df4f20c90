//===- compression_kernels.cpp - compression kernels: priced vs timed -----===//
//
// The gradient compressors' CPU kernels (top-k, sparse average, sign
// compress, sign average) timed on buckets of several sizes, top-k ratios
// and rank counts, beside the cost model's price for each launch on a
// hardware file (`tailor calibrate -o FILE` fits efficiency_compression on
// one bucket, 2^22 elements, ratio 0.01, two ranks; the other rows show
// how the price carries to other shapes):
//
//   tailor-bench-compression HARDWARE [ROUNDS]
//
// Prints one row per kernel and bucket: milliseconds measured (mean over
// ROUNDS, default 3), predicted, and predicted / measured.
//
//===----------------------------------------------------------------------===//

#include "compiler/CostModel.h"
#include "tools/tailor/CalibrateKernels.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace tailor;

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: tailor-bench-compression HARDWARE [ROUNDS]\n");
    return 1;
  }
  int rounds = argc == 3 ? std::atoi(argv[2]) : 3;
  if (rounds < 1) {
    std::fprintf(stderr, "tailor-bench-compression: error: ROUNDS must be a "
                         "positive number, got '%s'\n",
                 argv[2]);
    return 1;
  }
  llvm::Expected<HardwareSpec> hardware = resolveHardware(argv[1]);
  if (!hardware) {
    std::fprintf(stderr, "tailor-bench-compression: error: %s\n",
                 llvm::toString(hardware.takeError()).c_str());
    return 1;
  }
  CostTarget target{*hardware, "fp32", 1};
  std::printf("%-15s %9s %7s %5s %10s %10s %8s\n", "kernel", "elements",
              "ratio", "ranks", "measured", "predicted", "pred/meas");
  const CompressionBucket buckets[] = {
      {int64_t(1) << 20, 4, 0.01, 2},  {int64_t(1) << 22, 4, 0.01, 2},
      {int64_t(1) << 24, 16, 0.01, 2}, {int64_t(1) << 22, 4, 0.001, 2},
      {int64_t(1) << 22, 4, 0.1, 2},   {int64_t(1) << 22, 4, 0.01, 4},
      {int64_t(1) << 22, 4, 0.01, 8}};
  for (const CompressionBucket &bucket : buckets) {
    std::vector<TimedLaunch> launches;
    if (std::string problem = timeCompressionKernels(bucket, rounds, launches);
        !problem.empty()) {
      std::fprintf(stderr, "tailor-bench-compression: error: %s\n",
                   problem.c_str());
      return 1;
    }
    for (const TimedLaunch &launch : launches) {
      double measured = launch.seconds / double(launch.runs);
      double predicted = predictLaunchSeconds(target, launch.work);
      std::printf("%-15s %9lld %7g %5lld %8.2fms %8.2fms %8.2f\n",
                  launch.work.kernel.c_str(),
                  static_cast<long long>(bucket.elements), bucket.ratio,
                  static_cast<long long>(bucket.ranks), 1e3 * measured,
                  1e3 * predicted, predicted / measured);
    }
  }
  return 0;
}
