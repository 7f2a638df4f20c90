//===- PlanPrediction.cpp - a plan's predicted step time and timeline -----===//

#include "compiler/PlanPrediction.h"

#include "runtime/Plan.h"
#include "runtime/comm/GroupKind.h"
#include "runtime/quant/Wire.h"
#include "runtime/schema/plan_generated.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>

namespace tailor {

namespace fb = tailor::plan;

namespace {

/// A collective step as a work record: the larger buffer it moves, over
/// its group (workOf adds the link the group crosses).
LaunchWork collectiveWork(const fb::Plan &p, const fb::Collective &collective) {
  std::string kind = fb::EnumNameCollectiveKind(collective.kind());
  const fb::Buffer *in = p.buffers()->Get(collective.input());
  const fb::Buffer *out = p.buffers()->Get(collective.output());
  LaunchWork moved;
  moved.kernel = llvm::StringSwitch<std::string>(kind)
                     .Case("AllReduce", "all_reduce")
                     .Case("ReduceScatter", "reduce_scatter")
                     .Case("AllGather", "all_gather")
                     // Priced as an all-gather: each rank sends (p-1)/p of
                     // the buffer over p-1 steps and reduces nothing.
                     .Case("AllToAll", "all_gather")
                     .Case("Send", "p2p_send")
                     .Case("Recv", "p2p_recv")
                     .Default("broadcast");
  moved.bytes = double(std::max(in->size(), out->size()));
  moved.ranks = collective.group() ? collective.group()->size() : 1;
  return moved;
}

/// Every how many steps of its range `op` runs (plan Op.steps_period).
int64_t periodOf(const fb::Op &op) {
  return std::max<int64_t>(op.steps_period(), 1);
}

/// Whether `op` runs in training step `step` (plan Op.steps, 1.8).
bool runsIn(const fb::Op &op, int64_t step) {
  const fb::StepRange *range = op.steps();
  return !range || (step >= range->first() &&
                    (range->last() == -1 || step <= range->last()) &&
                    (step - range->first()) % periodOf(op) == 0);
}

/// The longest cycle of steps predicted (step by step, so a plan's
/// periods must repeat within it).
constexpr int64_t kMaxCycle = 64;

/// How many steps the ops that run repeat after, from steadyStep on: the
/// least common multiple of the step periods (2 for ACP-SGD's alternation,
/// 1 without periods); 0 past kMaxCycle.
int64_t cycleLength(const fb::Plan &p) {
  int64_t cycle = 1;
  for (const fb::Op *op : *p.ops()) {
    if (op->steps()) {
      int64_t period = periodOf(*op);
      if (period > kMaxCycle) {
        return 0;
      }
      cycle = std::lcm(cycle, period);
      if (cycle > kMaxCycle) {
        return 0;
      }
    }
  }
  return cycle;
}

/// The first training step from which the same ops run in every step: past
/// every step range's start and end.
int64_t steadyStep(const fb::Plan &p) {
  int64_t steady = 1;
  for (const fb::Op *op : *p.ops()) {
    if (const fb::StepRange *range = op->steps()) {
      steady = std::max({steady, range->first(), range->last() + 1});
    }
  }
  return steady;
}

/// The wire format of the chunks all-to-all op `at` sends: the format of
/// the quantize_wire_<format> launch before it (among the entry's ops from
/// `first`) that wrote its input; nullopt when no encoder wrote it (an
/// all-to-all of something other than ZeRO++'s wire chunks).
std::optional<quant::WireFormat> wireSentBy(const fb::Plan &p, uint32_t first,
                                            uint32_t at) {
  uint32_t input = p.ops()->Get(at)->step_as_Collective()->input();
  for (uint32_t i = at; i-- > first;) {
    const fb::Launch *launch = p.ops()->Get(i)->step_as_Launch();
    if (!launch || launch->operands()->size() != 2 ||
        launch->operands()->Get(1) != input) {
      continue;
    }
    llvm::StringRef kernel =
        p.kernels()->Get(launch->kernel())->name()->c_str();
    if (kernel.consume_front("quantize_wire_")) {
      return quant::wireFormatNamed(kernel.str());
    }
  }
  return std::nullopt;
}

/// What the all-to-alls of wire chunks (ZeRO++'s qgZ, int8 or int4) among
/// ops [first, first + count) that run in `step` would send more as the
/// f32 reduce-scatters they replace: each moves wire chunks of
/// quant::wireBytes(format, c) bytes for c f32 elements, both counted as
/// (p-1)/p of the buffer.
double unquantizedExtraBytes(const fb::Plan &p, uint32_t first,
                             uint32_t count, int64_t step) {
  double extra = 0;
  for (uint32_t i = first; i < first + count; ++i) {
    const fb::Op *op = p.ops()->Get(i);
    const fb::Collective *collective = op->step_as_Collective();
    if (!collective || collective->kind() != fb::CollectiveKind::AllToAll ||
        !runsIn(*op, step)) {
      continue;
    }
    std::optional<quant::WireFormat> format = wireSentBy(p, first, i);
    if (!format) {
      continue; // not a quantized reduce-scatter: the same bytes either way
    }
    double wire = double(p.buffers()->Get(collective->input())->size());
    double f32 = wire * 4.0 * double(quant::kWireBlock) /
                 double(quant::wireBytes(*format, quant::kWireBlock));
    int ranks = collective->group() ? collective->group()->size() : 1;
    extra += ringBytesSent("reduce_scatter", f32, ranks) -
             ringBytesSent("all_gather", wire, ranks);
  }
  return extra;
}

/// Adds `times` the bytes each collective of ops [first, first + count)
/// that runs in step `step` sends to `sent`, under its group's kind.
void addBytesByGroup(const fb::Plan &p, uint32_t first, uint32_t count,
                     int64_t step, double times,
                     std::map<std::string, double> &sent) {
  for (uint32_t i = first; i < first + count; ++i) {
    const fb::Op *op = p.ops()->Get(i);
    const fb::Collective *collective = op->step_as_Collective();
    if (!collective || !runsIn(*op, step)) {
      continue;
    }
    LaunchWork work = collectiveWork(p, *collective);
    if (llvm::StringRef(work.kernel).starts_with("p2p_")) {
      continue; // point-to-point sends have no group
    }
    std::vector<int> members;
    if (collective->group()) {
      members.assign(collective->group()->begin(), collective->group()->end());
    }
    std::sort(members.begin(), members.end());
    sent[runtime::comm::groupKind(members, p.world_size())] +=
        times * ringBytesSent(work.kernel, work.bytes, work.ranks);
  }
}

/// Op `i`'s work record and stream in training step `step`; false for a
/// step that does no work (a record or a wait, or an op that does not run
/// in that step).
bool workOf(const fb::Plan &p, const HardwareSpec &hardware, uint32_t i,
            int64_t step, LaunchWork &work, uint32_t &stream) {
  const fb::Op *op = p.ops()->Get(i);
  if (!runsIn(*op, step)) {
    return false;
  }
  if (const fb::Collective *collective = op->step_as_Collective()) {
    work = collectiveWork(p, *collective);
    if (collective->group()) {
      std::vector<int32_t> group(collective->group()->begin(),
                                 collective->group()->end());
      work.link = collectiveLink(hardware, group);
    }
    stream = collective->stream();
    return true;
  }
  if (const fb::Launch *launch = op->step_as_Launch()) {
    const fb::Kernel *kernel = p.kernels()->Get(launch->kernel());
    work = {kernel->name()->str(), launch->flops(), launch->bytes()};
    stream = launch->stream();
    work.onHost =
        p.streams()->Get(stream)->kind() == fb::StreamKind::Host;
    return true;
  }
  if (const fb::Copy *copy = op->step_as_Copy()) {
    static const char *names[] = {"copy_h2d", "copy_d2h", "copy_d2d",
                                  "copy_h2h"};
    work = {names[static_cast<int>(copy->kind()) & 3], 0,
            double(p.buffers()->Get(copy->target())->size())};
    stream = copy->stream();
    return true;
  }
  return false;
}

/// The launches of ops [first, first + count) that run in training step
/// `step`, as work records, in order.
std::vector<LaunchWork> launchesOf(const fb::Plan &p,
                                   const HardwareSpec &hardware, uint32_t first,
                                   uint32_t count, int64_t step) {
  std::vector<LaunchWork> work;
  for (uint32_t i = first; i < first + count; ++i) {
    LaunchWork w;
    uint32_t stream = 0;
    if (workOf(p, hardware, i, step, w, stream)) {
      work.push_back(std::move(w));
    }
  }
  return work;
}

/// Ops [first, first + count) on their streams: each stream runs its ops
/// in order, a record marks the time its stream reached it, and a wait
/// holds its stream until then. `start` and `end` per op (seconds from
/// the entry's start; a record or wait takes none).
struct StreamSchedule {
  std::vector<double> start, end;
  double seconds = 0;
  double commSeconds = 0;
  double copySeconds = 0;
};

StreamSchedule scheduleStreams(const fb::Plan &p, const CostTarget &target,
                               uint32_t first, uint32_t count, int64_t step) {
  StreamSchedule schedule;
  std::vector<double> clock(p.streams() ? p.streams()->size() : 1, 0.0);
  std::vector<double> reached(p.events() ? p.events()->size() : 0, 0.0);
  auto at = [](std::vector<double> &v, uint32_t i) -> double & {
    if (i >= v.size()) {
      v.resize(i + 1, 0.0);
    }
    return v[i];
  };
  for (uint32_t i = first; i < first + count; ++i) {
    const fb::Op *op = p.ops()->Get(i);
    LaunchWork work;
    uint32_t stream = 0;
    double begin = 0, seconds = 0;
    if (workOf(p, target.hardware, i, step, work, stream)) {
      seconds = predictLaunchSeconds(target, work);
      begin = at(clock, stream);
      if (!target.hardware.isCuda() && op->step_as_Copy()) {
        // The CPU session copies in program order on its own thread,
        // whatever the copy's stream: compute waits for it.
        begin = std::max(begin, at(clock, 0));
        at(clock, 0) = begin + seconds;
      }
      if (work.onHost && p.version() % 100 < 16) {
        // Before plan 1.16 the host's queue starts once every stream is
        // idle, and holds back everything issued after it (the runtime
        // ran it inline). From 1.16 it is a stream of its own, ordered by
        // its events (on the CPU, a thread beside the session's workers).
        for (double c : clock) {
          begin = std::max(begin, c);
        }
        std::fill(clock.begin(), clock.end(), begin + seconds);
      }
      at(clock, stream) = begin + seconds;
      if (work.ranks > 0) {
        schedule.commSeconds += seconds;
      } else if (costKindOf(work.kernel) == "host_copy") {
        schedule.copySeconds += seconds;
      }
    } else if (const fb::Record *record = op->step_as_Record()) {
      at(reached, record->event()) = at(clock, record->stream());
    } else if (const fb::Wait *wait = op->step_as_Wait()) {
      double &c = at(clock, wait->stream());
      c = std::max(c, at(reached, wait->event()));
    }
    schedule.start.push_back(begin);
    schedule.end.push_back(begin + seconds);
  }
  for (double c : clock) {
    schedule.seconds = std::max(schedule.seconds, c);
  }
  return schedule;
}

/// How many times one step runs entry `name`.
double runsPerStep(const fb::Plan &p, llvm::StringRef name) {
  if (name == "train_step" && p.training()) {
    return std::max(1, p.training()->gradient_accumulation_steps());
  }
  return 1;
}

/// A run of the plan's ops one entry owns (an inference plan without an
/// entry table: all of them, as entry 0, `forward`).
struct EntryOps {
  uint32_t index = 0;
  uint32_t first = 0;
  uint32_t count = 0;
  std::string name;
};

/// Entries in the order one step runs them, each as often as it runs.
std::vector<EntryOps> stepOrder(const fb::Plan &p) {
  std::vector<EntryOps> order;
  if (!p.entries() || p.entries()->size() == 0) {
    order.push_back({0, 0, p.ops()->size(), "forward"});
    return order;
  }
  for (uint32_t index = 0; index < p.entries()->size(); ++index) {
    const fb::Entry *e = p.entries()->Get(index);
    for (double i = 0; i < runsPerStep(p, e->name()->string_view()); ++i) {
      order.push_back({index, e->first_op(), e->op_count(), e->name()->str()});
    }
  }
  return order;
}

} // namespace

EntryPrediction predictEntry(const fb::Plan &p, const CostTarget &target,
                             llvm::StringRef name) {
  EntryPrediction entry;
  if (!p.entries()) {
    return entry;
  }
  for (const fb::Entry *e : *p.entries()) {
    if (llvm::StringRef(e->name()->str()) != name) {
      continue;
    }
    std::vector<LaunchWork> work = launchesOf(p, target.hardware, e->first_op(),
                                              e->op_count(), steadyStep(p));
    entry.seconds = 0;
    for (const LaunchWork &w : work) {
      // Point-to-point transfers are the pipeline simulation's to place.
      if (llvm::StringRef(w.kernel).starts_with("p2p_")) {
        entry.pointToPointBytes += ringBytesSent(w.kernel, w.bytes, w.ranks);
        continue;
      }
      double seconds = predictLaunchSeconds(target, w);
      entry.seconds += seconds;
      if (w.ranks > 0) {
        entry.collectiveSeconds += seconds;
        entry.collectiveBytes += ringBytesSent(w.kernel, w.bytes, w.ranks);
      }
    }
    return entry;
  }
  return entry;
}

/// A rank's device in a plan's parallel table, as a cost target with
/// `base`'s precision and threads (unless the device gives its own).
static CostTarget rankTarget(const fb::RankDevice &device,
                             const CostTarget &base);

llvm::Expected<CostTarget> costTargetOf(const fb::Plan &p,
                                        llvm::StringRef hardwareOverride) {
  CostTarget target;
  const fb::Target *t = p.target();
  std::string name = hardwareOverride.str();
  if (name.empty()) {
    name = t && t->name() ? t->name()->str() : "cpu";
  }
  if (hardwareOverride.empty() && p.parallel() && p.parallel()->ranks() &&
      p.parallel()->ranks()->size() > 0) {
    // A mixed cluster's plan carries its ranks' figures: rank 0's device
    // (with its own count) stands for the plan; predictCluster times each.
    const fb::RankDevice *first = p.parallel()->ranks()->Get(0);
    target = rankTarget(*first, target);
    target.hardware.gpus = p.world_size();
  } else {
    llvm::Expected<HardwareSpec> hardware = resolveHardware(name);
    if (!hardware) {
      return hardware.takeError();
    }
    target.hardware = std::move(*hardware);
  }
  if (t) {
    target.precision = t->precision() ? t->precision()->str() : "fp32";
    target.threads = target.hardware.threads > 0
                         ? target.hardware.threads
                         : std::max(1, t->threads());
  }
  return target;
}

PlanPrediction predictPlan(const fb::Plan &p, const CostTarget &target) {
  PlanPrediction prediction;
  if (p.version() < 105) {
    prediction.unpredictable = "the plan (format " +
                               std::to_string(p.version() / 100) + "." +
                               std::to_string(p.version() % 100) +
                               ") records no work per launch; recompile it";
    return prediction;
  }
  prediction.unpredictable = unpredictableBecause(target);
  if (!prediction.unpredictable.empty()) {
    return prediction;
  }
  if (p.pipeline() || p.stages()) {
    // A stage's step waits on its neighbours: PipelinePrediction.h
    // simulates the stages together.
    prediction.unpredictable = "a layer split's stage is predicted with the "
                               "other stages (tailor inspect)";
    return prediction;
  }
  if (target.hardware.hostLinkGBs <= 0) {
    for (const fb::Op *op : *p.ops()) {
      const fb::Copy *copy = op->step_as_Copy();
      if (copy && (copy->kind() == fb::CopyKind::HostToDevice ||
                   copy->kind() == fb::CopyKind::DeviceToHost)) {
        prediction.unpredictable = "the plan copies between host and device "
                                   "but the hardware '" +
                                   target.hardware.name +
                                   "' gives no host_link_gbs";
        return prediction;
      }
    }
  }
  if (!p.entries() || p.entries()->size() == 0) {
    // An inference plan without an entry table: its ops are the forward.
    prediction.step = predictLaunches(
        target, launchesOf(p, target.hardware, 0, p.ops()->size(), 1));
    return prediction;
  }
  int64_t steady = steadyStep(p);
  prediction.steadyFromStep = steady;
  for (const fb::Op *op : *p.ops()) {
    if (const fb::StepRange *range = op->steps()) {
      int64_t changes = range->first() > 1 ? range->first() : range->last() + 1;
      if (changes > 1 && (prediction.firstChangedStep == 0 ||
                          changes < prediction.firstChangedStep)) {
        prediction.firstChangedStep = changes;
      }
    }
  }
  // Steps whose ops alternate (ACP-SGD) are predicted as the mean over
  // one cycle of them.
  int64_t cycle = cycleLength(p);
  if (cycle == 0) {
    prediction.unpredictable = "the plan's step periods repeat only after "
                               "more than " +
                               std::to_string(kMaxCycle) + " steps";
    return prediction;
  }
  prediction.bytesSentByCycleStep.assign(cycle, 0.0);
  for (const fb::Entry *e : *p.entries()) {
    double runs = runsPerStep(p, e->name()->string_view());
    if (e->name()->string_view() == "train_step" && target.microBatches > 0) {
      runs = double(target.microBatches);
    }
    if (e->name()->string_view() == "eval_step") {
      continue; // validation is not part of a training step
    }
    for (int64_t c = 0; c < cycle; ++c) {
      std::vector<LaunchWork> work = launchesOf(
          p, target.hardware, e->first_op(), e->op_count(), steady + c);
      TimeEstimate serial = predictLaunches(target, work);
      StreamSchedule streams = scheduleStreams(
          p, target, e->first_op(), e->op_count(), steady + c);
      double share = runs / double(cycle);
      prediction.step.add(serial, share);
      prediction.step.seconds -= share * (serial.seconds - streams.seconds);
      prediction.commSeconds += share * streams.commSeconds;
      prediction.copySeconds += share * streams.copySeconds;
      prediction.hiddenSeconds += share * (serial.seconds - streams.seconds);
      for (const LaunchWork &w : work) {
        if (costKindOf(w.kernel) == "host_copy") {
          prediction.bytesCopiedPerStep += share * w.bytes;
        }
        double sent = runs * ringBytesSent(w.kernel, w.bytes, w.ranks);
        prediction.bytesSentPerStep += sent / double(cycle);
        prediction.bytesSentByCycleStep[c] += sent;
      }
      prediction.bytesSentPerStepUnquantized +=
          share * unquantizedExtraBytes(p, e->first_op(), e->op_count(),
                                        steady + c);
      addBytesByGroup(p, e->first_op(), e->op_count(), steady + c, share,
                      prediction.bytesSentByGroupPerStep);
    }
    for (const LaunchWork &w :
         launchesOf(p, target.hardware, e->first_op(), e->op_count(), 1)) {
      prediction.bytesSentPerUncompressedStep +=
          runs * ringBytesSent(w.kernel, w.bytes, w.ranks);
    }
  }
  prediction.bytesSentPerStepUnquantized += prediction.bytesSentPerStep;
  if (const fb::Training *training = p.training()) {
    prediction.tokensPerStep = double(training->micro_batch_size()) *
                               double(training->sequence_len()) *
                               runsPerStep(p, "train_step") *
                               double(std::max(1, p.world_size()));
  }
  return prediction;
}

static CostTarget rankTarget(const fb::RankDevice &device,
                             const CostTarget &base) {
  CostTarget target = base;
  HardwareSpec h;
  h.name = device.device() ? device.device()->str() : "";
  if (device.figures()) {
    for (const fb::Figure *figure : *device.figures()) {
      setHardwareFigure(h, figure->key()->string_view(), figure->value());
    }
  }
  target.threads = h.threads > 0 ? h.threads : base.threads;
  target.hardware = std::move(h);
  target.microBatches = device.micro_batches();
  return target;
}

ClusterPrediction predictCluster(const fb::Plan &p, const CostTarget &base) {
  ClusterPrediction cluster;
  if (!p.parallel() || !p.parallel()->ranks()) {
    return cluster;
  }
  int64_t even = p.training()
                     ? std::max(1, p.training()->gradient_accumulation_steps())
                     : 1;
  double slowestEven = 0;
  for (const fb::RankDevice *device : *p.parallel()->ranks()) {
    CostTarget target = rankTarget(*device, base);
    PlanPrediction own = predictPlan(p, target);
    if (!own.unpredictable.empty()) {
      cluster.unpredictable = own.unpredictable;
      cluster.ranks.clear();
      return cluster;
    }
    target.microBatches = even;
    slowestEven = std::max(slowestEven, predictPlan(p, target).step.seconds);
    cluster.ranks.push_back(
        {target.hardware.name, device->micro_batches(), own.step.seconds, 0});
    cluster.stepSeconds = std::max(cluster.stepSeconds, own.step.seconds);
    cluster.tokensPerStep = own.tokensPerStep;
  }
  for (RankPrediction &rank : cluster.ranks) {
    rank.waitSeconds = cluster.stepSeconds - rank.stepSeconds;
  }
  cluster.evenStepSeconds = slowestEven;
  return cluster;
}

namespace {

/// Bytes of `arena` held at each op of entry `e`: every buffer a launch
/// names, from its first to its last launch (the entry's inputs from its
/// start, its outputs to its end).
std::vector<uint64_t> arenaBytesOverEntry(const fb::Plan &p, const EntryOps &e,
                                          uint32_t arena) {
  uint32_t n = e.count;
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> span; // buffer -> [a, b]
  auto use = [&](uint32_t buffer, uint32_t at) {
    if (p.buffers()->Get(buffer)->arena() != arena) {
      return;
    }
    auto [it, inserted] = span.try_emplace(buffer, at, at);
    it->second.first = std::min(it->second.first, at);
    it->second.second = std::max(it->second.second, at);
  };
  for (uint32_t i = 0; i < n; ++i) {
    if (const fb::Launch *launch =
            p.ops()->Get(e.first + i)->step_as_Launch()) {
      for (uint32_t buffer : *launch->operands()) {
        use(buffer, i);
      }
    }
  }
  uint32_t entryIndex = e.index;
  auto bind = [&](const auto *bindings, uint32_t at) {
    if (!bindings) {
      return;
    }
    for (const fb::Binding *b : *bindings) {
      if (b->entry() == entryIndex) {
        use(b->buffer(), at);
      }
    }
  };
  bind(p.inputs(), 0);
  bind(p.outputs(), n == 0 ? 0 : n - 1);
  // Views (a reshape's buffer) share bytes with the buffer they view, so
  // the bytes held are the union of the live buffers' byte ranges.
  std::vector<std::vector<uint32_t>> startsAt(n), endsAfter(n);
  for (const auto &[buffer, range] : span) {
    startsAt[range.first].push_back(buffer);
    endsAfter[range.second].push_back(buffer);
  }
  std::multiset<std::pair<uint64_t, uint64_t>> active; // [begin, end)
  auto rangeOf = [&](uint32_t buffer) {
    const fb::Buffer *b = p.buffers()->Get(buffer);
    return std::make_pair(b->offset(), b->offset() + b->size());
  };
  std::vector<uint64_t> live(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t buffer : startsAt[i]) {
      active.insert(rangeOf(buffer));
    }
    uint64_t covered = 0, reach = 0;
    for (const auto &[begin, end] : active) { // sorted by begin
      if (end > reach) {
        covered += end - std::max(begin, reach);
        reach = end;
      }
    }
    live[i] = covered;
    for (uint32_t buffer : endsAfter[i]) {
      active.erase(active.find(rangeOf(buffer)));
    }
  }
  return live;
}

/// The arenas whose use changes over a step: activations and workspace.
std::vector<uint32_t> transientArenas(const fb::Plan &p) {
  std::vector<uint32_t> arenas;
  for (uint32_t i = 0; i < p.arenas()->size(); ++i) {
    fb::Category category = p.arenas()->Get(i)->category();
    if (category == fb::Category::Activations ||
        category == fb::Category::Workspace) {
      arenas.push_back(i);
    }
  }
  return arenas;
}

void writeMetadata(const fb::Plan &p, llvm::json::OStream &json) {
  auto meta = [&](llvm::StringRef what, int tid, llvm::StringRef name) {
    json.object([&] {
      json.attribute("ph", "M");
      json.attribute("name", what);
      json.attribute("pid", p.rank());
      json.attribute("tid", tid);
      json.attributeObject("args", [&] { json.attribute("name", name); });
    });
  };
  meta("process_name", 0,
       "rank " + std::to_string(p.rank()) + " (predicted)");
  if (p.streams()) {
    for (uint32_t s = 0; s < p.streams()->size(); ++s) {
      meta("thread_name", int(s) + 1,
           "stream " + p.streams()->Get(s)->name()->str());
    }
  }
}

} // namespace

void writePredictedTrace(const fb::Plan &p, const CostTarget &target,
                         llvm::raw_ostream &os) {
  llvm::json::OStream json(os);
  std::vector<uint32_t> arenas = transientArenas(p);
  std::vector<uint64_t> peak(arenas.size(), 0);
  std::vector<double> peakAt(arenas.size(), 0);
  json.object([&] {
    json.attribute("displayTimeUnit", "ms");
    json.attributeArray("traceEvents", [&] {
      writeMetadata(p, json);
      double now = 0; // microseconds
      for (const EntryOps &e : stepOrder(p)) {
        std::vector<std::vector<uint64_t>> live;
        for (uint32_t arena : arenas) {
          live.push_back(arenaBytesOverEntry(p, e, arena));
        }
        StreamSchedule schedule =
            scheduleStreams(p, target, e.first, e.count, steadyStep(p));
        for (uint32_t i = 0; i < e.count; ++i) {
          LaunchWork work;
          uint32_t stream = 0;
          if (!workOf(p, target.hardware, e.first + i, steadyStep(p), work,
                      stream)) {
            continue;
          }
          const fb::Launch *launch = p.ops()->Get(e.first + i)->step_as_Launch();
          double ts = now + 1e6 * schedule.start[i];
          json.object([&] {
            json.attribute("ph", "X");
            json.attribute("name", work.kernel);
            json.attribute("cat", e.name);
            json.attribute("pid", p.rank());
            json.attribute("tid", int(stream) + 1);
            json.attribute("ts", ts);
            json.attribute("dur", 1e6 * (schedule.end[i] - schedule.start[i]));
            json.attributeObject("args", [&] {
              json.attribute("origin", launch && launch->origin()
                                           ? launch->origin()->str()
                                           : std::string());
              json.attribute("flops", work.flops);
              json.attribute("bytes", work.bytes);
            });
          });
          for (size_t a = 0; a < arenas.size(); ++a) {
            json.object([&] {
              json.attribute("ph", "C");
              json.attribute("name",
                             p.arenas()->Get(arenas[a])->name()->str() + " bytes");
              json.attribute("pid", p.rank());
              json.attribute("ts", ts);
              json.attributeObject("args", [&] {
                json.attribute("bytes", int64_t(live[a][i]));
              });
            });
            if (live[a][i] > peak[a]) {
              peak[a] = live[a][i];
              peakAt[a] = ts;
            }
          }
        }
        now += 1e6 * schedule.seconds;
      }
      for (size_t a = 0; a < arenas.size(); ++a) {
        json.object([&] {
          json.attribute("ph", "i");
          json.attribute("s", "p");
          json.attribute("name", "peak " +
                                     p.arenas()->Get(arenas[a])->name()->str() +
                                     " " + std::to_string(peak[a]) + " bytes");
          json.attribute("pid", p.rank());
          json.attribute("tid", 0);
          json.attribute("ts", peakAt[a]);
        });
      }
    });
  });
  os << "\n";
}

} // namespace tailor
