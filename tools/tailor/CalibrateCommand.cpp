//===- CalibrateCommand.cpp - `tailor calibrate`: measure this machine ----===//
//
// Runs every entry of a plan on this machine's CPU with each launch timed
// (Session::recordTimeline), then fits the cost model's figures to what it
// saw, on the model's own shapes:
//  - cpu_gflops_per_thread: the GEMMs' FLOPs over their seconds on one
//    thread, and cpu_parallel_efficiency: what each further thread adds
//    (from a second run at --threads);
//  - bandwidth_gbs: the elementwise kernels' bytes over their seconds;
//  - launch_overhead_us: the median time of the launches that move under
//    4 KiB and compute under 4 KFLOP (nothing but the call);
//  - efficiency_<kind> for the other kinds: the roofline time at those
//    rates (efficiency 1) over the measured time, capped to (0.01, 1].
// and writes them as a hardware file (`--hardware FILE` in compile and
// inspect). Inputs are zeros (token 0 is valid for any vocabulary) and the
// optimizer step input is 1: timing needs shapes, not data.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"

#include "compiler/CostModel.h"
#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/schema/plan_generated.h"
#include "runtime/train/AtomicFile.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
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

/// Runs every entry once untimed, then `rounds` times timed; "" or why not.
std::string timeEntries(Session &session, int rounds,
                        std::vector<Session::LaunchTiming> &timeline) {
  for (uint32_t e = 0; e < session.entryCount(); ++e) {
    if (std::string problem = session.runEntry(e); !problem.empty()) {
      return problem;
    }
  }
  if (std::string problem = session.recordTimeline(true); !problem.empty()) {
    return problem;
  }
  for (int round = 0; round < rounds; ++round) {
    for (uint32_t e = 0; e < session.entryCount(); ++e) {
      if (std::string problem = session.runEntry(e); !problem.empty()) {
        return problem;
      }
    }
  }
  timeline = session.takeTimeline();
  return "";
}

/// What the timeline says per kind, and the launch overhead.
std::map<std::string, KindTotals>
totalsByKind(const fb::Plan &p, const std::vector<Session::LaunchTiming> &timeline,
             double &overheadSeconds) {
  std::map<std::string, KindTotals> totals;
  std::vector<double> tiny;
  for (const Session::LaunchTiming &t : timeline) {
    const fb::Launch *launch = p.ops()->Get(t.step)->step_as_Launch();
    if (!launch) {
      continue; // a collective, or a wait for one: no kernel rate in it
    }
    std::string kernel = p.kernels()->Get(launch->kernel())->name()->str();
    KindTotals &k = totals[costKindOf(kernel).str()];
    double seconds = t.end - t.start;
    k.seconds += seconds;
    k.flops += launch->flops();
    k.bytes += launch->bytes();
    ++k.launches;
    if (launch->bytes() < 4096 && launch->flops() < 4096) {
      tiny.push_back(seconds);
    }
  }
  overheadSeconds = 0;
  if (!tiny.empty()) {
    std::nth_element(tiny.begin(), tiny.begin() + tiny.size() / 2, tiny.end());
    overheadSeconds = tiny[tiny.size() / 2];
  }
  return totals;
}

/// GEMM GFLOP/s the timeline shows, the launch overhead taken out.
double gemmGflops(const std::map<std::string, KindTotals> &totals,
                  double overhead) {
  auto gemm = totals.find("gemm");
  if (gemm == totals.end() || gemm->second.flops <= 0) {
    return 0;
  }
  const KindTotals &k = gemm->second;
  return k.flops /
         std::max(k.seconds - double(k.launches) * overhead, 1e-9) / 1e9;
}

/// The calibrated CPU description from the measured totals at `threads`,
/// with the GEMM rate of one thread measured apart (`singleGflops`; 0 when
/// `threads` is 1).
HardwareSpec fitHardware(const std::map<std::string, KindTotals> &totals,
                         double overhead, int threads, double singleGflops) {
  HardwareSpec h;
  h.name = "calibrated";
  h.backend = "cpu";
  h.launchOverheadUs = overhead * 1e6;
  auto busy = [&](const KindTotals &k) {
    return std::max(k.seconds - double(k.launches) * overhead, 1e-9);
  };
  double parallel = gemmGflops(totals, overhead);
  h.cpuGflopsPerThread = threads > 1 && singleGflops > 0 ? singleGflops : parallel;
  h.cpuParallelEfficiency =
      threads > 1 && singleGflops > 0
          ? std::clamp((parallel / singleGflops - 1.0) / double(threads - 1),
                       0.0, 1.0)
          : 1.0;
  double peak = h.cpuGflopsPerThread *
                (1.0 + double(threads - 1) * h.cpuParallelEfficiency);
  auto streaming = totals.find("elementwise");
  h.memoryBandwidthGBs = streaming != totals.end() && streaming->second.bytes > 0
                             ? streaming->second.bytes / busy(streaming->second) / 1e9
                             : 0;
  for (const auto &[kind, k] : totals) {
    if (kind == "gemm" || kind == "elementwise") {
      h.efficiency[kind] = 1.0;
      continue;
    }
    double ideal = std::max(k.flops / std::max(peak * 1e9, 1.0),
                            k.bytes / std::max(h.memoryBandwidthGBs * 1e9, 1.0));
    h.efficiency[kind] = std::clamp(ideal / busy(k), 0.01, 1.0);
  }
  return h;
}

/// Times every launch of `plan` at `threads`, `rounds` times, into
/// per-kind totals; false with a message when it cannot.
bool measure(const LoadedPlan &plan, int threads, int rounds,
             std::map<std::string, KindTotals> &totals, double &overhead) {
  std::string error;
  int status = 0;
  std::unique_ptr<Session> session =
      Session::create(plan, threads, error, status);
  if (!session) {
    llvm::errs() << "tailor calibrate: error: " << error << "\n";
    return false;
  }
  fillInputs(plan.root(), *session);
  std::vector<Session::LaunchTiming> timeline;
  if (std::string problem = timeEntries(*session, rounds, timeline);
      !problem.empty()) {
    llvm::errs() << "tailor calibrate: error: " << problem << "\n";
    return false;
  }
  totals = totalsByKind(plan.root(), timeline, overhead);
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
  os << llvm::format("cpu_parallel_efficiency: %.4f\n",
                     h.cpuParallelEfficiency);
  os << llvm::format("bandwidth_gbs: %.4f\n", h.memoryBandwidthGBs);
  os << llvm::format("launch_overhead_us: %.4f\n", h.launchOverheadUs);
  for (const auto &[kind, efficiency] : h.efficiency) {
    os << "efficiency_" << kind << llvm::format(": %.4f\n", efficiency);
  }
  return text;
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
  std::map<std::string, KindTotals> totals;
  double overhead = 0;
  if (!measure(*plan, useThreads, rounds, totals, overhead)) {
    return 1;
  }
  // GEMMs do not scale linearly in threads: one thread measured apart gives
  // the rate each further thread adds.
  double singleGflops = 0;
  if (useThreads > 1) {
    std::map<std::string, KindTotals> single;
    double singleOverhead = 0;
    if (!measure(*plan, 1, rounds, single, singleOverhead)) {
      return 1;
    }
    singleGflops = gemmGflops(single, singleOverhead);
  }
  HardwareSpec fitted = fitHardware(totals, overhead, useThreads, singleGflops);
  std::string yaml = hardwareYaml(fitted, useThreads, planPath);
  for (const auto &[kind, k] : totals) {
    llvm::errs() << llvm::format(
        "calibrate: %-11s %6lld launches %9.3f ms per round\n", kind.c_str(),
        static_cast<long long>(k.launches / rounds), 1e3 * k.seconds / rounds);
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
