//===- CalibrateCommand.cpp - `tailor calibrate`: measure this machine ----===//
//
// Runs every entry of a plan on this machine's CPU with each launch timed
// (Session::recordTimeline), then fits the cost model's figures to what it
// saw, on the model's own shapes:
//  - cpu_gflops_per_thread: the GEMMs' FLOPs over their seconds on one
//    thread; cpu_parallel_efficiency and cpu_parallel_half_mflop: what
//    each further thread adds to a GEMM of a given size, fitted to every
//    GEMM launch's speedup from one thread to --threads (a second run);
//  - cpu_pool_parallel_efficiency and cpu_pool_half_us: the same for the
//    thread pool's kernels (elementwise, norms, attention, loss, ...),
//    sized by their one-thread time: a launch of tens of microseconds
//    costs its hand-off to the workers about what splitting it saves;
//  - bandwidth_gbs: the elementwise kernels' bytes over their seconds;
//  - launch_overhead_us: the median time of the launches that move under
//    4 KiB and compute under 4 KFLOP (nothing but the call);
//  - efficiency_<kind> for the other kinds: the model's time for their
//    launches at those rates (efficiency 1) over the measured time, capped
//    to [0.01, 1]; efficiency_compression (capped to [0.001, 1]: scalar
//    loops reach a small share of the FMA rate) from the gradient
//    compressors' kernels timed on a bucket of their own
//    (CalibrateKernels.h);
// the rates and efficiencies from the one-thread run when --threads is
// above 1 (the scaling then says what more threads add), the launch
// overhead from the run at --threads;
// and, launched on several ranks (mpirun), the link between them:
// link_gbs and link_latency_us fitted to timed collectives
// (CalibrateLinks.h), with gpus (ranks per node) and nodes as launched;
// and writes them as a hardware file (`--hardware FILE` in compile and
// inspect). Inputs are zeros (token 0 is valid for any vocabulary) and the
// optimizer step input is 1: timing needs shapes, not data.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"
#include "tools/tailor/CalibrateKernels.h"
#include "tools/tailor/CalibrateLinks.h"

#include "compiler/CostModel.h"
#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/cpu/Kernel.h"
#include "runtime/schema/plan_generated.h"
#include "runtime/train/AtomicFile.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <thread>

namespace tailor {

namespace fb = tailor::plan;
using runtime::LoadedPlan;
using runtime::Session;

namespace {

/// Seconds, FLOPs and bytes of one kernel kind, summed over launches.
struct KindTotals {
  double seconds = 0;
  double flops = 0;
  double bytes = 0;
  int64_t launches = 0;
};

/// What one timed run of the plan at some thread count saw.
struct Measurement {
  /// Per step index of the plan's program; only kernel launches.
  std::map<uint32_t, TimedLaunch> launches;
  /// Kernels timed apart from the plan (CalibrateKernels.h).
  std::vector<TimedLaunch> apart;
  std::map<std::string, KindTotals> totals;
  /// The times of the launches that do (almost) nothing, and their median.
  std::vector<double> tiny;
  double overhead = 0;
};

/// Zeros every input of the plan; a rank-0 integer input (the optimizer's
/// step) gets 1.
void fillInputs(const fb::Plan &p, Session &session) {
  if (!p.inputs()) {
    return;
  }
  for (const fb::Binding *input : *p.inputs()) {
    const fb::Buffer *buffer = p.buffers()->Get(input->buffer());
    void *data = session.bufferData(input->buffer());
    std::memset(data, 0, buffer->size());
    if (buffer->shape()->size() == 0 && buffer->dtype() == fb::DType::I64) {
      *static_cast<int64_t *>(data) = 1;
    }
  }
}

/// Runs every entry of `session` once; "" or why not.
std::string runEntries(Session &session) {
  for (uint32_t e = 0; e < session.entryCount(); ++e) {
    if (std::string problem = session.runEntry(e); !problem.empty()) {
      return problem;
    }
  }
  return "";
}

/// What the timeline says per launch and per kind, and the launch overhead.
void summarize(const fb::Plan &p,
               const std::vector<Session::LaunchTiming> &timeline,
               Measurement &m) {
  for (const Session::LaunchTiming &t : timeline) {
    const fb::Launch *launch = p.ops()->Get(t.step)->step_as_Launch();
    if (!launch) {
      continue; // a collective, or a wait for one: no kernel rate in it
    }
    std::string kernel = p.kernels()->Get(launch->kernel())->name()->str();
    double seconds = t.end - t.start;
    TimedLaunch &record = m.launches[t.step];
    record.work.kernel = kernel;
    record.work.flops = launch->flops();
    record.work.bytes = launch->bytes();
    record.seconds += seconds;
    record.fastest = std::min(record.fastest, seconds);
    ++record.runs;
    KindTotals &k = m.totals[costKindOf(kernel).str()];
    k.seconds += seconds;
    k.flops += launch->flops();
    k.bytes += launch->bytes();
    ++k.launches;
    if (launch->bytes() < 4096 && launch->flops() < 4096) {
      m.tiny.push_back(seconds);
    }
  }
  if (!m.tiny.empty()) {
    std::vector<double> tiny = m.tiny;
    std::nth_element(tiny.begin(), tiny.begin() + tiny.size() / 2, tiny.end());
    m.overhead = tiny[tiny.size() / 2];
  }
}

/// Seconds of `runs` launches with the launch overhead taken out.
double busySeconds(double seconds, double runs, double overhead) {
  return std::max(seconds - runs * overhead, 1e-9);
}

/// GEMM GFLOP/s the measurement shows, the launch overhead taken out.
double gemmGflops(const Measurement &m) {
  auto gemm = m.totals.find("gemm");
  if (gemm == m.totals.end() || gemm->second.flops <= 0) {
    return 0;
  }
  const KindTotals &k = gemm->second;
  return k.flops / busySeconds(k.seconds, double(k.launches), m.overhead) /
         1e9;
}

/// One launch's gain from threads: what each further thread added, as a
/// fraction of one thread, at its size, weighted by its one-thread time
/// (what it weighs in a step).
struct ScalingPoint {
  double size, gain, weight;
};

/// The launches of both measurements that `keep` selects, as scaling
/// points sized by `sizeOf(launch, one-thread busy seconds)`. Each
/// launch's fastest round: on a shared machine the others' load only ever
/// slows a round down.
template <typename Keep, typename SizeOf>
std::vector<ScalingPoint> scalingPoints(const Measurement &single,
                                        const Measurement &parallel,
                                        int threads, Keep keep, SizeOf sizeOf) {
  std::vector<ScalingPoint> points;
  for (const auto &[step, one] : single.launches) {
    auto many = parallel.launches.find(step);
    if (!keep(one) || many == parallel.launches.end()) {
      continue;
    }
    double t1 = busySeconds(one.fastest, 1, single.overhead);
    double tn = busySeconds(many->second.fastest, 1, parallel.overhead);
    points.push_back(
        {sizeOf(one, t1), (t1 / tn - 1.0) / double(threads - 1), t1});
  }
  return points;
}

/// The (efficiency, half size) of gain = efficiency * size / (size +
/// half) that fits `points` best in the weighted least squares sense: for
/// each half on a grid (0, and `lowest` up over `decades` decades in
/// tenths of a decade) the best efficiency in [0, 1]; the best pair wins.
std::pair<double, double>
fitSpeedupCurve(const std::vector<ScalingPoint> &points, double lowest,
                int decades) {
  std::pair<double, double> best = {1.0, 0.0};
  double bestError = std::numeric_limits<double>::infinity();
  for (int i = -1; i <= 10 * decades; ++i) {
    double half = i < 0 ? 0 : lowest * std::pow(10.0, i / 10.0);
    auto shareOf = [&](const ScalingPoint &p) {
      return half > 0 ? p.size / (p.size + half) : 1.0;
    };
    double gainTimesShare = 0, shareSquared = 0;
    for (const ScalingPoint &p : points) {
      gainTimesShare += p.weight * p.gain * shareOf(p);
      shareSquared += p.weight * shareOf(p) * shareOf(p);
    }
    double efficiency =
        shareSquared > 0 ? std::clamp(gainTimesShare / shareSquared, 0.0, 1.0)
                         : 1.0;
    double error = 0;
    for (const ScalingPoint &p : points) {
      double miss = p.gain - efficiency * shareOf(p);
      error += p.weight * miss * miss;
    }
    if (error < bestError) {
      bestError = error;
      best = {efficiency, half};
    }
  }
  return best;
}

/// Fits the thread scaling of `h` to the speedup each launch of the plan
/// shows from one thread (`single`) to `threads` (`parallel`): the GEMMs'
/// (cpu_parallel_efficiency, cpu_parallel_half_mflop; sizes in FLOPs, 1
/// KFLOP to 100 GFLOP) and the thread pool's kernels'
/// (cpu_pool_parallel_efficiency, cpu_pool_half_us; sizes their
/// one-thread time, 0.1 us to 10 s).
void fitThreadScaling(HardwareSpec &h, const Measurement &single,
                      const Measurement &parallel, int threads) {
  auto isGemm = [](const TimedLaunch &l) {
    return costKindOf(l.work.kernel) == "gemm" && l.work.flops > 0;
  };
  auto flopsOf = [](const TimedLaunch &l, double) { return l.work.flops; };
  auto [gemmEfficiency, gemmHalf] = fitSpeedupCurve(
      scalingPoints(single, parallel, threads, isGemm, flopsOf), 1e3, 8);
  h.cpuParallelEfficiency = gemmEfficiency;
  h.cpuParallelHalfMflop = gemmHalf / 1e6;
  auto onPool = [](const TimedLaunch &l) {
    return isCpuPoolKind(costKindOf(l.work.kernel));
  };
  auto microseconds = [](const TimedLaunch &, double t1) { return t1 * 1e6; };
  std::vector<ScalingPoint> pool =
      scalingPoints(single, parallel, threads, onPool, microseconds);
  if (pool.empty()) {
    return; // no pool kernel to measure: the plan's model stays
  }
  auto [poolEfficiency, poolHalf] = fitSpeedupCurve(pool, 0.1, 8);
  h.cpuPoolParallelEfficiency = poolEfficiency;
  h.cpuPoolHalfUs = poolHalf;
}

/// The streaming bandwidth `m` shows, GB/s: the elementwise kernels'
/// bytes over their busy seconds (0 without any).
double streamingGBs(const Measurement &m) {
  auto streaming = m.totals.find("elementwise");
  if (streaming == m.totals.end() || streaming->second.bytes <= 0) {
    return 0;
  }
  const KindTotals &k = streaming->second;
  return k.bytes / busySeconds(k.seconds, double(k.launches), m.overhead) / 1e9;
}

/// Sets efficiency_<kind> of `h` for every kind but gemm and elementwise
/// (1: their rates are the measured ones): the model's time for `m`'s
/// launches and `apart`'s (with `apartOverhead` a launch) at efficiency 1 on
/// `threads` threads over what they took, capped to [0.01, 1] ([0.001, 1] for
/// compression).
void fitEfficiencies(HardwareSpec &h, const Measurement &m, int threads,
                     const std::vector<TimedLaunch> &apart,
                     double apartOverhead) {
  CostTarget ideal{h, "fp32", threads};
  ideal.hardware.launchOverheadUs = 0;
  for (const std::string &kind : costKernelKinds()) {
    ideal.hardware.efficiency[kind] = 1.0;
  }
  std::map<std::string, double> idealSeconds, busy;
  auto add = [&](const TimedLaunch &launch, double overhead) {
    std::string kind = costKindOf(launch.work.kernel).str();
    // Compression's efficiency derates its operations only (its bytes
    // stream at the bandwidth): its ideal is its compute.
    LaunchWork work = launch.work;
    if (kind == "compression") {
      work.bytes = 0;
    }
    idealSeconds[kind] +=
        double(launch.runs) * predictLaunchSeconds(ideal, work);
    busy[kind] += busySeconds(launch.seconds, double(launch.runs), overhead);
  };
  for (const auto &[step, launch] : m.launches) {
    add(launch, m.overhead);
  }
  for (const TimedLaunch &launch : apart) {
    add(launch, apartOverhead);
  }
  for (const auto &[kind, seconds] : busy) {
    h.efficiency[kind] =
        kind == "gemm" || kind == "elementwise"
            ? 1.0
            : std::clamp(idealSeconds[kind] / seconds,
                         kind == "compression" ? 1e-3 : 0.01, 1.0);
  }
}

/// The calibrated CPU description from the measurement at `threads`, and
/// when `threads` > 1 the one at one thread (`single`, else null). With
/// `single`, the rates and efficiencies are one thread's and the thread
/// scaling is fitted to the two; the launch overhead is `m`'s.
HardwareSpec fitHardware(const Measurement &m, int threads,
                         const Measurement *single) {
  HardwareSpec h;
  h.name = "calibrated";
  h.backend = "cpu";
  h.launchOverheadUs = m.overhead * 1e6;
  const Measurement &base = single ? *single : m;
  h.cpuGflopsPerThread = gemmGflops(base);
  h.cpuParallelEfficiency = 1.0;
  h.cpuParallelHalfMflop = 0;
  h.memoryBandwidthGBs = streamingGBs(base);
  if (single) {
    fitThreadScaling(h, *single, m, threads);
  }
  fitEfficiencies(h, base, single ? 1 : threads, m.apart, m.overhead);
  return h;
}

/// Times every launch of `plan` at each of `threads`, `rounds` times, into
/// one measurement per count; false with a message when it cannot. The
/// counts take turns round by round (the BLAS set to each in turn), so a
/// change in the machine's load weighs on all alike.
bool measure(const LoadedPlan &plan, const std::vector<int> &threads,
             int rounds, std::vector<Measurement> &measurements) {
  std::vector<std::unique_ptr<Session>> sessions;
  auto fail = [](const std::string &problem) {
    llvm::errs() << "tailor calibrate: error: " << problem << "\n";
    return false;
  };
  for (int count : threads) {
    std::string error;
    int status = 0;
    sessions.push_back(Session::create(plan, count, error, status));
    if (!sessions.back()) {
      return fail(error);
    }
    fillInputs(plan.root(), *sessions.back());
  }
  measurements.assign(threads.size(), Measurement());
  // One round untimed (pages touched, caches warm), then `rounds` timed.
  for (int round = -1; round < rounds; ++round) {
    for (size_t i = 0; i < sessions.size(); ++i) {
      runtime::setBlasThreads(threads[i]);
      if (std::string problem = sessions[i]->recordTimeline(round >= 0);
          !problem.empty()) {
        return fail(problem);
      }
      if (std::string problem = runEntries(*sessions[i]); !problem.empty()) {
        return fail(problem);
      }
      summarize(plan.root(), sessions[i]->takeTimeline(), measurements[i]);
    }
  }
  return true;
}

/// The hardware file `tailor compile/inspect --hardware` read back.
std::string hardwareYaml(const HardwareSpec &h, int threads,
                         const std::string &planPath) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "# tailor calibrate on " << planPath << " with " << threads
     << " threads\n";
  os << "name: " << h.name << "\nbackend: cpu\n";
  os << llvm::format("cpu_gflops_per_thread: %.4f\n", h.cpuGflopsPerThread);
  if (threads > 1) {
    os << llvm::format("cpu_parallel_efficiency: %.4f\n",
                       h.cpuParallelEfficiency);
    os << llvm::format("cpu_parallel_half_mflop: %.4f\n",
                       h.cpuParallelHalfMflop);
    if (h.cpuPoolParallelEfficiency) {
      os << "# the rates below are one thread's; the pool's kernels gain "
            "from threads as\n# cpu_pool_parallel_efficiency and "
            "cpu_pool_half_us say\n";
      os << llvm::format("cpu_pool_parallel_efficiency: %.4f\n",
                         *h.cpuPoolParallelEfficiency);
      os << llvm::format("cpu_pool_half_us: %.4f\n", h.cpuPoolHalfUs);
    }
  } else {
    os << "# one thread: the built-in cpu's thread scaling applies\n";
  }
  os << llvm::format("bandwidth_gbs: %.4f\n", h.memoryBandwidthGBs);
  os << llvm::format("launch_overhead_us: %.4f\n", h.launchOverheadUs);
  if (h.ranks() > 1) {
    os << "gpus: " << h.gpus << "\nnodes: " << h.nodes << "\n";
    os << llvm::format("link_gbs: %.4f\n", h.linkGBs);
    os << llvm::format("link_latency_us: %.4f\n", h.linkLatencyUs);
  }
  for (const auto &[kind, efficiency] : h.efficiency) {
    os << "efficiency_" << kind << llvm::format(": %.4f\n", efficiency);
  }
  return text;
}

/// The communicator of a launch on several ranks (null on one): MPI, as
/// CPU plans train. "" or why there is none.
std::string joinRanks(runtime::comm::LaunchInfo &launch,
                      std::unique_ptr<runtime::comm::Communicator> &group) {
  if (std::string e = runtime::comm::detectLaunch(launch); !e.empty()) {
    return e;
  }
  if (launch.worldSize == 1) {
    return "";
  }
  if (launch.worldSize % launch.localWorldSize != 0) {
    return runtime::comm::describeLaunch(launch) +
           " does not split into nodes of equal rank counts";
  }
  std::string error;
  group = runtime::comm::createCpuCommunicator(launch, error);
  return group ? "" : error;
}

/// Times the collectives on `group` and puts the fitted link into `h` (the
/// ranks as launched, efficiency_comm 1: the fit is the link as used).
/// Rank 0 prints each size against the fit. "" or the failure.
std::string calibrateLinks(runtime::comm::Communicator &group,
                           const runtime::comm::LaunchInfo &launch, int rounds,
                           HardwareSpec &h) {
  std::vector<CollectiveSample> samples;
  if (std::string e = timeCollectives(group, std::max(rounds, 3), samples);
      !e.empty()) {
    return e;
  }
  LinkFit link = fitLink(samples);
  h.gpus = launch.localWorldSize;
  h.nodes = launch.worldSize / launch.localWorldSize;
  h.linkGBs = link.gbs;
  h.linkLatencyUs = link.latencyUs;
  h.link = "calibrated";
  h.efficiency["comm"] = 1.0;
  h.efficiency["reduce"] = link.reduceEfficiency;
  if (group.rank() != 0) {
    return "";
  }
  std::vector<double> errors;
  for (const CollectiveSample &s : samples) {
    double model = linkSeconds(link, s);
    errors.push_back(std::fabs(model - s.seconds) / s.seconds);
    llvm::errs() << llvm::format(
        "calibrate: %-14s %8.0f KiB on %d ranks %9.3f ms, link model %9.3f "
        "ms\n",
        s.kind.c_str(), s.bytes / 1024, s.ranks, 1e3 * s.seconds, 1e3 * model);
  }
  std::sort(errors.begin(), errors.end());
  llvm::errs() << llvm::format(
      "calibrate: link between %d ranks: %.3f GB/s, %.2f us a ring step, "
      "summing collectives at %.2f of the bandwidth (sizes off by %.0f%% "
      "median, %.0f%% worst)\n",
      group.size(), link.gbs, link.latencyUs, link.reduceEfficiency,
      100 * errors[errors.size() / 2], 100 * errors.back());
  return "";
}

} // namespace

int runCalibrate(int argc, const char **argv) {
  namespace cl = llvm::cl;
  cl::ResetCommandLineParser();
  cl::OptionCategory category("tailor calibrate options");
  cl::opt<std::string> planPath(cl::Positional, cl::desc("<plan.tplan>"),
                                cl::Required, cl::cat(category));
  cl::opt<std::string> output("o",
                              cl::desc("hardware file to write (default: "
                                       "print it)"),
                              cl::value_desc("hw.yaml"), cl::cat(category));
  cl::opt<int> threads("threads",
                       cl::desc("CPU worker threads (default: the plan's)"),
                       cl::value_desc("n"), cl::init(0), cl::cat(category));
  cl::opt<int> rounds("rounds", cl::desc("timed runs of every entry"),
                      cl::value_desc("n"), cl::init(3), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "tailor calibrate: measure this machine for the cost model\n",
          &llvm::errs())) {
    return 1;
  }
  if (rounds < 1 || threads < 0) {
    llvm::errs() << "tailor calibrate: error: --rounds must be at least 1 "
                    "and --threads not negative\n";
    return 1;
  }
  runtime::comm::LaunchInfo launch;
  std::unique_ptr<runtime::comm::Communicator> group;
  if (std::string e = joinRanks(launch, group); !e.empty()) {
    llvm::errs() << "tailor calibrate: error: " << e << "\n";
    return 1;
  }
  std::string error;
  std::unique_ptr<LoadedPlan> plan =
      LoadedPlan::load(planPath, runtime::LoadOptions(), error);
  if (!plan) {
    llvm::errs() << "tailor calibrate: error: " << error << "\n";
    return 1;
  }
  const fb::Plan &p = plan->root();
  if (p.version() < 105) {
    llvm::errs() << "tailor calibrate: error: " << planPath
                 << " records no work per launch (plan format before 1.5); "
                    "recompile it\n";
    return 1;
  }
  int useThreads = threads > 0 ? int(threads)
                               : std::max(1, p.target() ? p.target()->threads() : 1);
  // GEMMs do not scale linearly in threads, and small ones least: the same
  // launches on one thread give what each further thread adds, by size.
  std::vector<int> counts = {useThreads};
  if (useThreads > 1) {
    counts.push_back(1);
  }
  std::vector<Measurement> measurements;
  if (!measure(*plan, counts, rounds, measurements)) {
    return 1;
  }
  Measurement &measurement = measurements.front();
  const Measurement *single = useThreads > 1 ? &measurements.back() : nullptr;
  if (std::string problem = timeCompressionKernels(CompressionBucket(), rounds,
                                                   measurement.apart);
      !problem.empty()) {
    llvm::errs() << "tailor calibrate: error: timing the compression "
                    "kernels: "
                 << problem << "\n";
    return 1;
  }
  HardwareSpec fitted =
      fitHardware(measurement, useThreads, single);
  if (group) {
    if (std::string e = calibrateLinks(*group, launch, rounds, fitted);
        !e.empty()) {
      llvm::errs() << "tailor calibrate: error: timing the collectives: " << e
                   << "\n";
      return 1;
    }
    if (group->rank() != 0) {
      return 0; // rank 0 reports and writes the file
    }
  }
  std::string yaml = hardwareYaml(fitted, useThreads, planPath);
  for (const auto &[kind, k] : measurement.totals) {
    llvm::errs() << llvm::format(
        "calibrate: %-11s %6lld launches %9.3f ms per round\n", kind.c_str(),
        static_cast<long long>(k.launches / rounds), 1e3 * k.seconds / rounds);
  }
  for (const TimedLaunch &launch : measurement.apart) {
    llvm::errs() << llvm::format(
        "calibrate: %-14s on its own bucket %9.3f ms a launch\n",
        launch.work.kernel.c_str(), 1e3 * launch.seconds / double(launch.runs));
  }
  llvm::errs() << llvm::format(
      "calibrate: gemm speedup on %d threads: %.2fx at 1 MFLOP, %.2fx at 100 "
      "MFLOP, %.2fx at 10 GFLOP\n",
      useThreads, cpuThreadSpeedup(fitted, useThreads, 1e6),
      cpuThreadSpeedup(fitted, useThreads, 1e8),
      cpuThreadSpeedup(fitted, useThreads, 1e10));
  if (fitted.cpuPoolParallelEfficiency) {
    llvm::errs() << llvm::format(
        "calibrate: pool kernel speedup on %d threads: %.2fx at 20 us, "
        "%.2fx at 200 us, %.2fx at 2 ms\n",
        useThreads, cpuPoolSpeedup(fitted, useThreads, 20e-6),
        cpuPoolSpeedup(fitted, useThreads, 200e-6),
        cpuPoolSpeedup(fitted, useThreads, 2e-3));
  }
  if (single) {
    // What one speedup for every size (the model without
    // cpu_parallel_half_mflop) makes of the same runs: for comparison.
    double ratio =
        gemmGflops(measurement) / std::max(gemmGflops(*single), 1e-9);
    llvm::errs() << llvm::format(
        "calibrate: one gemm speedup for every size would be %.2fx: "
        "cpu_parallel_efficiency %.4f\n",
        ratio, std::clamp((ratio - 1.0) / double(useThreads - 1), 0.0, 1.0));
  }
  if (output.empty()) {
    llvm::outs() << yaml;
    return 0;
  }
  if (!train::writeFileAtomically(output, yaml, error)) {
    llvm::errs() << "tailor calibrate: error: " << error << "\n";
    return 1;
  }
  return 0;
}

} // namespace tailor
