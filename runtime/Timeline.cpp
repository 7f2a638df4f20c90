//===- Timeline.cpp - measured launches as a Chrome/Perfetto trace --------===//

#include "runtime/Timeline.h"

#include "runtime/schema/plan_generated.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tailor::runtime {

namespace fb = tailor::plan;

namespace {

/// `text` as a JSON string literal.
std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// The name of the entry holding op `step`.
std::string entryOf(const fb::Plan &p, uint32_t step) {
  if (p.entries()) {
    for (const fb::Entry *e : *p.entries()) {
      if (step >= e->first_op() && step < e->first_op() + e->op_count()) {
        return e->name()->str();
      }
    }
  }
  return "forward";
}

/// A collective's name in traces: the cost model's (all_reduce, ...).
std::string collectiveName(fb::CollectiveKind kind) {
  switch (kind) {
  case fb::CollectiveKind::AllReduce:
    return "all_reduce";
  case fb::CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case fb::CollectiveKind::AllGather:
    return "all_gather";
  case fb::CollectiveKind::Broadcast:
    return "broadcast";
  case fb::CollectiveKind::Send:
    return "send";
  case fb::CollectiveKind::Recv:
    return "recv";
  case fb::CollectiveKind::AllToAll:
    return "all_to_all";
  }
  return "collective";
}

/// One complete slice for `timing`: a kernel launch, a collective, a copy
/// or a wait that blocked.
std::string sliceOf(const fb::Plan &p, const Session::LaunchTiming &timing) {
  const fb::Op *op = p.ops()->Get(timing.step);
  std::string kernel, origin;
  uint32_t stream = 0;
  if (const fb::Launch *launch = op->step_as_Launch()) {
    kernel = p.kernels()->Get(launch->kernel())->name()->str();
    origin = launch->origin() ? launch->origin()->str() : "";
    stream = launch->stream();
  } else if (const fb::Collective *collective = op->step_as_Collective()) {
    // Named as the cost model names collectives (all_reduce, ...).
    kernel = collectiveName(collective->kind());
    origin = std::to_string(p.buffers()->Get(collective->input())->size()) +
             " B in, " +
             std::to_string(p.buffers()->Get(collective->output())->size()) +
             " B out over " +
             std::to_string(collective->group() ? collective->group()->size()
                                                : 1) +
             " ranks";
    stream = collective->stream();
    if (stream != 0) {
      origin += ", started nonblocking: the slice runs to its completion";
    }
  } else if (const fb::Copy *copy = op->step_as_Copy()) {
    // Named by direction (copy_h2d, ...), on its stream's track: the CPU
    // runs it as a memcpy where the plan places it.
    kernel = copyStepName(copy->kind());
    origin = std::to_string(p.buffers()->Get(copy->source())->size()) +
             " B, buffer " + std::to_string(copy->source()) + " to buffer " +
             std::to_string(copy->target());
    stream = copy->stream();
  } else if (const fb::Wait *wait = op->step_as_Wait()) {
    // Only a wait that blocked has a slice: the time its stream stood
    // still for the collectives behind the event.
    kernel = "wait";
    uint32_t event = wait->event();
    origin = "event " + (p.events() && event < p.events()->size()
                             ? p.events()->Get(event)->name()->str()
                             : std::to_string(event));
    stream = wait->stream();
  } else {
    kernel = fb::EnumNameStep(op->step_type());
  }
  char numbers[160];
  std::snprintf(numbers, sizeof(numbers),
                "\"pid\": %d, \"tid\": %u, \"ts\": %.3f, \"dur\": %.3f",
                p.rank(), stream + 1, timing.start * 1e6,
                (timing.end - timing.start) * 1e6);
  return "{\"ph\": \"X\", \"name\": " + quoted(kernel) +
         ", \"cat\": " + quoted(entryOf(p, timing.step)) + ", " + numbers +
         ", \"args\": {\"origin\": " + quoted(origin) +
         ", \"step\": " + std::to_string(timing.step) + "}}";
}

std::string metadata(const fb::Plan &p) {
  std::string out = "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " +
                    std::to_string(p.rank()) +
                    ", \"tid\": 0, \"args\": {\"name\": " +
                    quoted("rank " + std::to_string(p.rank()) + " (measured)") +
                    "}}";
  if (p.streams()) {
    for (uint32_t s = 0; s < p.streams()->size(); ++s) {
      out += ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " +
             std::to_string(p.rank()) + ", \"tid\": " + std::to_string(s + 1) +
             ", \"args\": {\"name\": " +
             quoted("stream " + p.streams()->Get(s)->name()->str()) + "}}";
    }
  }
  return out;
}

} // namespace

std::string writeMeasuredTrace(const LoadedPlan &plan,
                               const std::vector<MeasuredStep> &steps,
                               const std::string &path) {
  const fb::Plan &p = plan.root();
  std::string temporary = path + ".tmp";
  FILE *file = std::fopen(temporary.c_str(), "w");
  if (!file) {
    return "cannot write '" + path + "': " + std::strerror(errno);
  }
  std::fprintf(file, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n%s",
               metadata(p).c_str());
  for (const MeasuredStep &step : steps) {
    if (step.launches.empty()) {
      continue;
    }
    std::fprintf(file,
                 ",\n{\"ph\": \"i\", \"s\": \"p\", \"name\": \"step %lld\", "
                 "\"pid\": %d, \"tid\": 0, \"ts\": %.3f}",
                 static_cast<long long>(step.step), p.rank(),
                 step.launches.front().start * 1e6);
    for (const Session::LaunchTiming &timing : step.launches) {
      std::fprintf(file, ",\n%s", sliceOf(p, timing).c_str());
    }
  }
  std::fprintf(file, "\n]}\n");
  bool failed = std::ferror(file) != 0;
  failed |= std::fclose(file) != 0;
  if (failed || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return "cannot write '" + path + "': " + std::strerror(errno);
  }
  return "";
}

} // namespace tailor::runtime
