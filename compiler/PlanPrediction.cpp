//===- PlanPrediction.cpp - a plan's predicted step time and timeline -----===//

#include "compiler/PlanPrediction.h"

#include "runtime/Plan.h"
#include "runtime/schema/plan_generated.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <map>
#include <set>

namespace tailor {

namespace fb = tailor::plan;

namespace {

/// The launches of ops [first, first + count) as work records, in order.
std::vector<LaunchWork> launchesOf(const fb::Plan &p, uint32_t first,
                                   uint32_t count) {
  std::vector<LaunchWork> work;
  for (uint32_t i = first; i < first + count; ++i) {
    if (const fb::Collective *collective =
            p.ops()->Get(i)->step_as_Collective()) {
      std::string kind = fb::EnumNameCollectiveKind(collective->kind());
      const fb::Buffer *in = p.buffers()->Get(collective->input());
      const fb::Buffer *out = p.buffers()->Get(collective->output());
      double bytes = double(std::max(in->size(), out->size()));
      LaunchWork moved;
      moved.kernel = llvm::StringSwitch<std::string>(kind)
                        .Case("AllReduce", "all_reduce")
                        .Case("ReduceScatter", "reduce_scatter")
                        .Case("AllGather", "all_gather")
                        .Default("broadcast");
      moved.bytes = bytes;
      moved.ranks = collective->group() ? collective->group()->size() : 1;
      work.push_back(moved);
      continue;
    }
    const fb::Launch *launch = p.ops()->Get(i)->step_as_Launch();
    if (!launch) {
      continue;
    }
    const fb::Kernel *kernel = p.kernels()->Get(launch->kernel());
    work.push_back({kernel->name()->str(), launch->flops(), launch->bytes()});
  }
  return work;
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

llvm::Expected<CostTarget> costTargetOf(const fb::Plan &p,
                                        llvm::StringRef hardwareOverride) {
  CostTarget target;
  const fb::Target *t = p.target();
  std::string name = hardwareOverride.str();
  if (name.empty()) {
    name = t && t->name() ? t->name()->str() : "cpu";
  }
  llvm::Expected<HardwareSpec> hardware = resolveHardware(name);
  if (!hardware) {
    return hardware.takeError();
  }
  target.hardware = std::move(*hardware);
  if (t) {
    target.precision = t->precision() ? t->precision()->str() : "fp32";
    target.threads = std::max(1, t->threads());
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
  if (!p.entries() || p.entries()->size() == 0) {
    // An inference plan without an entry table: its ops are the forward.
    prediction.step = predictLaunches(target, launchesOf(p, 0, p.ops()->size()));
    return prediction;
  }
  for (const fb::Entry *e : *p.entries()) {
    std::vector<LaunchWork> work = launchesOf(p, e->first_op(), e->op_count());
    double runs = runsPerStep(p, e->name()->string_view());
    if (e->name()->string_view() == "eval_step") {
      continue; // validation is not part of a training step
    }
    prediction.step.add(predictLaunches(target, work), runs);
    for (const LaunchWork &w : work) {
      prediction.bytesSentPerStep +=
          runs * ringBytesSent(w.kernel, w.bytes, w.ranks);
    }
  }
  if (const fb::Training *training = p.training()) {
    prediction.tokensPerStep = double(training->micro_batch_size()) *
                               double(training->sequence_len()) *
                               runsPerStep(p, "train_step") *
                               double(std::max(1, p.world_size()));
  }
  return prediction;
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
        for (uint32_t i = 0; i < e.count; ++i) {
          const fb::Launch *launch = p.ops()->Get(e.first + i)->step_as_Launch();
          if (!launch) {
            continue;
          }
          std::string kernel =
              p.kernels()->Get(launch->kernel())->name()->str();
          double us = 1e6 * predictLaunchSeconds(
                                target, {kernel, launch->flops(), launch->bytes()});
          json.object([&] {
            json.attribute("ph", "X");
            json.attribute("name", kernel);
            json.attribute("cat", e.name);
            json.attribute("pid", p.rank());
            json.attribute("tid", int(launch->stream()) + 1);
            json.attribute("ts", now);
            json.attribute("dur", us);
            json.attributeObject("args", [&] {
              json.attribute("origin", launch->origin() ? launch->origin()->str()
                                                        : std::string());
              json.attribute("flops", launch->flops());
              json.attribute("bytes", launch->bytes());
            });
          });
          for (size_t a = 0; a < arenas.size(); ++a) {
            json.object([&] {
              json.attribute("ph", "C");
              json.attribute("name",
                             p.arenas()->Get(arenas[a])->name()->str() + " bytes");
              json.attribute("pid", p.rank());
              json.attribute("ts", now);
              json.attributeObject("args", [&] {
                json.attribute("bytes", int64_t(live[a][i]));
              });
            });
            if (live[a][i] > peak[a]) {
              peak[a] = live[a][i];
              peakAt[a] = now;
            }
          }
          now += us;
        }
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
