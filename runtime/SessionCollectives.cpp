//===- SessionCollectives.cpp - a session's collectives between ranks -----===//
//
// A plan of several ranks is one program every rank runs; its collectives
// name rank 0's group (all ranks, the first node's ranks, or rank 0's index
// on every node). Each rank runs them on its own matching group, split
// once from the world communicator when the session gets it.
//
// On the CPU a collective on a stream other than 0 (the compute stream) is
// started nonblocking and the kernels go on; the plan's events say when
// compute needs it: a record on that stream marks everything it started so
// far, a wait on stream 0 for that event completes them. The compute stream
// is the session's own thread, so anything waiting on an event it recorded
// is satisfied already. Collectives of one stream keep their order where
// they share bytes (the later one waits for the earlier) and otherwise run
// together, as NCCL's would on one CUDA stream when they do not depend on
// each other. Every entry ends with all of them complete.
//
// A copy on any stream is a memcpy in program order: it first completes
// the collectives of its own stream it shares bytes with (stream order),
// and one of another stream it shares bytes with, which its stream has not
// waited for, is a race in the plan. Copies start nothing, so an event
// recorded after one stands for no more than before it.
//
//===----------------------------------------------------------------------===//

#include "runtime/Session.h"

#include "runtime/comm/Communicator.h"
#include "runtime/comm/GroupKind.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace tailor::runtime {

namespace fb = tailor::plan;

comm::CollectiveCall collectiveCallOf(const LoadedPlan &plan,
                                      const fb::Collective &collective) {
  comm::CollectiveCall call;
  call.kind = static_cast<comm::CollectiveKind>(collective.kind());
  call.op = static_cast<comm::ReduceOp>(collective.reduction());
  call.dtype = plan.bufferDType(collective.input());
  call.root = collective.root();
  size_t element = dtypeSize(call.dtype);
  call.inputElements = plan.bufferBytes(collective.input()) / element;
  call.outputElements = plan.bufferBytes(collective.output()) / element;
  return call;
}

Session::PreparedLaunch
Session::prepareCollective(uint32_t step,
                           const fb::Collective &collective) const {
  PreparedLaunch prepared;
  prepared.kind = PreparedLaunch::Kind::Collective;
  prepared.step = step;
  prepared.stream = collective.stream();
  prepared.origin = fb::EnumNameCollectiveKind(collective.kind());
  auto resolved = std::make_unique<PreparedCollective>();
  resolved->call = collectiveCallOf(loaded, collective);
  resolved->call.input = bufferData(collective.input());
  resolved->call.output = bufferData(collective.output());
  for (int32_t rank : *collective.group()) {
    resolved->group.push_back(rank);
  }
  std::sort(resolved->group.begin(), resolved->group.end());
  prepared.collective = std::move(resolved);
  return prepared;
}

/// The members of `rank`'s group of the same shape as the plan's `group`
/// (sorted): all ranks; a block of consecutive ranks starting at a multiple
/// of its size (a node, or a pipeline stage's replicas); or every
/// `stride`-th rank from one below `stride` (one index across nodes, or one
/// replica's pipeline stages). The color MPI_Comm_split needs is returned
/// through `color`; empty when the group has none of these shapes.
static std::vector<int> matchingGroup(const std::vector<int> &group, int rank,
                                      int worldSize, int &color) {
  int size = static_cast<int>(group.size());
  std::vector<int> members;
  if (size == 0) {
    return members;
  }
  int first = group[0];
  bool block = first % size == 0, strided = size > 1;
  int stride = size > 1 ? group[1] - group[0] : 1;
  for (int i = 0; i < size; ++i) {
    block = block && group[static_cast<size_t>(i)] == first + i;
    strided = strided && group[static_cast<size_t>(i)] == first + i * stride;
  }
  if (block && worldSize % size == 0) {
    color = rank / size;
    for (int i = 0; i < size; ++i) {
      members.push_back(color * size + i);
    }
  } else if (strided && stride > 0 && first < stride &&
             stride * size == worldSize) {
    color = rank % stride;
    for (int i = 0; i < size; ++i) {
      members.push_back(color + i * stride);
    }
  }
  return members;
}

/// A pipeline stage's plan with data-parallel replicas (1.13): its two
/// groups, the stage's replicas (consecutive ranks) and one replica's
/// stages (every replicas-th rank), as the plan's rank names them; none
/// otherwise. Every stage's plan splits them first and in this order, so
/// the ranks of different stages take part in the same splits.
static std::vector<std::pair<std::vector<int>, std::string>>
pipelineGroups(const fb::Plan &p) {
  std::vector<std::pair<std::vector<int>, std::string>> groups;
  const fb::PipelineStage *stage = p.pipeline();
  if (!stage || stage->replicas() <= 1) {
    return groups;
  }
  int replicas = stage->replicas();
  std::vector<int> sameStage, pipeline;
  for (int j = 0; j < replicas; ++j) {
    sameStage.push_back(p.rank() + j);
  }
  for (int r = p.rank() % replicas; r < p.world_size(); r += replicas) {
    pipeline.push_back(r);
  }
  groups.emplace_back(std::move(sameStage), "the replicas of a stage");
  groups.emplace_back(std::move(pipeline), "the stages of a replica");
  return groups;
}

/// The groups of ranks the plan names, sorted, each with what names it
/// ("step 7", "sharded state 'zero.b0.exp_avg'"), in plan order: its
/// collectives' (CPU or GPU), then its sharded states', then its sharded
/// parameters' (which checkpoints gather).
static std::vector<std::pair<std::vector<int>, std::string>>
namedGroups(const fb::Plan &p) {
  std::vector<std::pair<std::vector<int>, std::string>> groups =
      pipelineGroups(p);
  auto add = [&](const flatbuffers::Vector<int32_t> &group,
                 std::string what) {
    std::vector<int> members(group.begin(), group.end());
    std::sort(members.begin(), members.end());
    groups.emplace_back(std::move(members), std::move(what));
  };
  const auto &ops = *p.ops();
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const fb::Collective *collective = ops.Get(i)->step_as_Collective();
    // Point to point goes over the world, to the rank it names.
    if (collective && collective->kind() != fb::CollectiveKind::Send &&
        collective->kind() != fb::CollectiveKind::Recv) {
      add(*collective->group(), "step " + std::to_string(i));
    }
  }
  if (p.states()) {
    for (const fb::State *state : *p.states()) {
      if (state->shard()) {
        add(*state->shard()->group(),
            "sharded state '" + state->name()->str() + "'");
      }
    }
  }
  if (p.parameters()) {
    for (const fb::Parameter *param : *p.parameters()) {
      if (param->shard()) {
        add(*param->shard()->group(),
            "sharded parameter '" + param->name()->str() + "'");
      }
    }
  }
  return groups;
}

std::string Session::setCommunicator(comm::Communicator *communicator) {
  comm = communicator;
  subgroups.clear();
#if TAILOR_ENABLE_CUDA
  if (cuda) {
    cuda->setCommunicator(communicator);
    cuda->setGroupResolver(
        [this](const std::vector<int> &group, comm::Communicator *&result) {
          return groupCommunicator(group, result);
        });
  }
#endif
  int world = loaded.root().world_size();
  if (!comm) {
    return "";
  }
  if (comm->size() != world) {
    return loaded.name() + " was compiled for " + std::to_string(world) +
           " ranks but the communicator has " + std::to_string(comm->size());
  }
  if (comm->rank() != rankValue) {
    return loaded.name() + ": the session runs as rank " +
           std::to_string(rankValue) + " but the communicator is rank " +
           std::to_string(comm->rank());
  }
  // Split every sub-group now, in plan order, so all ranks take part in
  // each split together.
  for (const auto &[group, what] : namedGroups(loaded.root())) {
    if (static_cast<int>(group.size()) == world) {
      continue;
    }
    int color = 0;
    std::vector<int> members = matchingGroup(group, comm->rank(), world, color);
    if (members.empty()) {
      return what + ": its group of ranks is neither a node nor one index "
                    "across nodes, so ranks other than 0 cannot tell their "
                    "own";
    }
    if (subgroups.count(members)) {
      continue;
    }
    std::string error;
    std::unique_ptr<comm::Communicator> split =
        comm->split(color, comm->rank(), error);
    if (!split) {
      return what + ": cannot form its group of ranks: " + error;
    }
    subgroups[members] = std::move(split);
  }
  return "";
}

std::string Session::groupCommunicator(const std::vector<int> &group,
                                       comm::Communicator *&result) const {
  if (!comm) {
    return "the plan runs collectives over " +
           std::to_string(loaded.root().world_size()) +
           " ranks but the session has no communicator (launch it with "
           "mpirun -np " +
           std::to_string(loaded.root().world_size()) + ")";
  }
  if (static_cast<int>(group.size()) == comm->size()) {
    result = comm;
    return "";
  }
  int color = 0;
  auto it = subgroups.find(
      matchingGroup(group, comm->rank(), comm->size(), color));
  if (it == subgroups.end()) {
    return "no communicator for this group of ranks";
  }
  result = it->second.get();
  return "";
}

uint64_t Session::bytesSent() const {
  if (!comm) {
    return 0;
  }
  uint64_t total = comm->bytesSent();
  for (const auto &[members, group] : subgroups) {
    if (group.get() != comm) {
      total += group->bytesSent();
    }
  }
  return total;
}

std::map<std::string, uint64_t> Session::bytesSentByGroup() const {
  std::map<std::string, uint64_t> sent;
  if (!comm) {
    return sent;
  }
  sent["world"] = comm->bytesSent();
  for (const auto &[members, group] : subgroups) {
    if (group.get() != comm) {
      sent[comm::groupKind(members, comm->size())] += group->bytesSent();
    }
  }
  return sent;
}

int Session::groupPosition(const std::vector<int> &group) const {
  int color = 0;
  std::vector<int> members =
      matchingGroup(group, rankValue, loaded.root().world_size(), color);
  auto it = std::find(members.begin(), members.end(), rankValue);
  return it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

std::string Session::runPointToPoint(const PreparedCollective &collective) {
  if (!comm) {
    return "the plan sends to and receives from rank " +
           std::to_string(collective.call.root) +
           " but the session has no communicator (launch it with mpirun -np " +
           std::to_string(loaded.root().world_size()) + ")";
  }
  comm::CollectiveCall call = collective.call;
  // The plan names the peer in its own rank's replica (a pipeline stage's
  // first rank); this rank's replica is as far from it.
  call.root += rankValue - loaded.root().rank();
  if (call.kind == comm::CollectiveKind::Recv) {
    return comm::runCollective(*comm, call);
  }
  size_t bytes = call.inputElements * dtypeSize(call.dtype);
  uint64_t capacity =
      outboxArena < 0
          ? 0
          : loaded.root().arenas()->Get(static_cast<uint32_t>(outboxArena))
                ->size();
  if (outboxUsed + bytes > capacity) {
    return "the plan's p2p_outbox arena (" + std::to_string(capacity) +
           " bytes) cannot hold this step's sends: more micro-batches ran "
           "than the plan was compiled for";
  }
  auto *slot = static_cast<uint8_t *>(arenas[static_cast<size_t>(outboxArena)]) +
               outboxUsed;
  std::memcpy(slot, call.input, bytes);
  outboxUsed += (bytes + 63) / 64 * 64;
  call.input = slot;
  std::unique_ptr<comm::PendingCollective> pending;
  if (std::string problem = comm->start(call, pending); !problem.empty()) {
    return problem;
  }
  pendingSends.push_back(std::move(pending));
  return "";
}

std::string Session::finishSends() {
  std::string failure;
  for (std::unique_ptr<comm::PendingCollective> &pending : pendingSends) {
    if (std::string problem = pending->wait();
        !problem.empty() && failure.empty()) {
      failure = problem;
    }
  }
  pendingSends.clear();
  outboxUsed = 0;
  return failure;
}

std::string Session::runCollective(const PreparedCollective &collective) {
  if (collective.call.kind == comm::CollectiveKind::Send ||
      collective.call.kind == comm::CollectiveKind::Recv) {
    return runPointToPoint(collective);
  }
  comm::Communicator *group = nullptr;
  if (std::string problem = groupCommunicator(collective.group, group);
      !problem.empty()) {
    return problem;
  }
  return comm::runCollective(*group, collective.call);
}

/// The bytes a collective reads and those it writes.
struct Footprint {
  const uint8_t *read;
  size_t readBytes;
  const uint8_t *written;
  size_t writtenBytes;
};

static Footprint footprintOf(const comm::CollectiveCall &call) {
  size_t element = dtypeSize(call.dtype);
  return {static_cast<const uint8_t *>(call.input), call.inputElements * element,
          static_cast<const uint8_t *>(call.output),
          call.outputElements * element};
}

static bool overlap(const uint8_t *a, size_t aBytes, const uint8_t *b,
                    size_t bBytes) {
  return aBytes > 0 && bBytes > 0 && a < b + bBytes && b < a + aBytes;
}

/// Whether one of two collectives writes bytes the other reads or writes.
static bool conflict(const Footprint &x, const Footprint &y) {
  return overlap(x.written, x.writtenBytes, y.read, y.readBytes) ||
         overlap(x.written, x.writtenBytes, y.written, y.writtenBytes) ||
         overlap(y.written, y.writtenBytes, x.read, x.readBytes);
}

void Session::settle(InFlight &flight) {
  flight.done = true;
  flight.finished = now();
  if (flight.timelineSlot < timeline.size()) {
    timeline[flight.timelineSlot].end = flight.finished;
  }
  if (profile) {
    profileOverlapSeconds += flight.finished - flight.started;
    ++profileOverlapCalls;
  }
}

std::string Session::complete(InFlight &flight) {
  if (flight.done) {
    return "";
  }
  double waited = now();
  std::string problem = flight.pending->wait();
  if (profile) {
    profileSeconds[flight.launch] += now() - waited;
  }
  settle(flight);
  return problem.empty() ? "" : describeStep(flight.launch) + ": " + problem;
}

std::string Session::pollInFlight() {
  // A pipeline stage's sends: MPI moves a large message only while the
  // sender is inside the library, so the receiver would otherwise wait
  // until this rank's next receive.
  for (auto it = pendingSends.begin(); it != pendingSends.end();) {
    bool done = false;
    if (std::string problem = (*it)->test(done); !problem.empty()) {
      return "a point-to-point send: " + problem;
    }
    it = done ? pendingSends.erase(it) : std::next(it);
  }
  for (InFlight &flight : inFlight) {
    if (flight.done) {
      continue;
    }
    bool done = false;
    std::string problem = flight.pending->test(done);
    if (done) {
      settle(flight);
    }
    if (!problem.empty()) {
      return describeStep(flight.launch) + ": " + problem;
    }
  }
  return "";
}

std::string Session::orderAfterInFlight(size_t index) {
  const PreparedLaunch &launch = launches[index];
  Footprint mine =
      launch.kind == PreparedLaunch::Kind::Copy
          ? Footprint{static_cast<const uint8_t *>(launch.copy.source),
                      launch.copy.bytes,
                      static_cast<const uint8_t *>(launch.copy.target),
                      launch.copy.bytes}
          : footprintOf(launch.collective->call);
  for (InFlight &flight : inFlight) {
    const PreparedLaunch &earlier = launches[flight.launch];
    if (!conflict(mine, footprintOf(earlier.collective->call)) ||
        flight.waitedOn == static_cast<int64_t>(launch.stream)) {
      continue;
    }
    if (earlier.stream != launch.stream) {
      return describeStep(index) + " shares bytes with " +
             describeStep(flight.launch) +
             ", which its stream has not waited for (no event between "
             "them)";
    }
    if (std::string problem = complete(flight); !problem.empty()) {
      return problem;
    }
  }
  return "";
}

std::string Session::startCollective(size_t index) {
  const PreparedLaunch &launch = launches[index];
  const comm::CollectiveCall &call = launch.collective->call;
  if (std::string problem = orderAfterInFlight(index); !problem.empty()) {
    return problem;
  }
  comm::Communicator *group = nullptr;
  if (std::string problem =
          groupCommunicator(launch.collective->group, group);
      !problem.empty()) {
    return describeStep(index) + ": " + problem;
  }
  InFlight flight;
  flight.launch = index;
  flight.sequence = startedOn[launch.stream];
  flight.started = now();
  std::string problem = group->start(call, flight.pending);
  if (profile) {
    profileSeconds[index] += now() - flight.started;
    ++profileCalls[index];
  }
  if (!problem.empty()) {
    return describeStep(index) + ": " + problem;
  }
  if (recording) {
    flight.timelineSlot = timeline.size();
    timeline.push_back({launch.step, flight.started, flight.started});
  }
  ++startedOn[launch.stream];
  inFlight.push_back(std::move(flight));
  return "";
}

std::string Session::waitEvent(size_t index) {
  const PreparedLaunch &wait = launches[index];
  EventMark mark = marks[wait.event];
  if (mark.stream == 0 || mark.stream == wait.stream) {
    // Recorded on the compute stream (synchronous: its work is done), or
    // on the waiting stream itself (its own order).
    return "";
  }
  if (hostQueue && loaded.root().streams()->Get(mark.stream)->kind() ==
                       fb::StreamKind::Host) {
    // The host launches queued by then. Another stream than compute waits
    // for them through compute too: the CPU issues every stream's work in
    // program order from this thread.
    double started = now();
    bool blocked = !hostInFlight.empty() &&
                   hostInFlight.front().second <= mark.started;
    std::string problem = waitHost(mark.started);
    if (recording && blocked) {
      timeline.push_back({wait.step, started, now()});
    }
    return problem.empty() ? "" : describeStep(index) + ": " + problem;
  }
  double started = now();
  bool blocked = false;
  std::string problem;
  for (InFlight &flight : inFlight) {
    if (launches[flight.launch].stream != mark.stream ||
        flight.sequence >= mark.started) {
      continue;
    }
    blocked = blocked || !flight.done;
    flight.waitedOn = wait.stream;
    if (std::string failure = complete(flight); problem.empty()) {
      problem = failure;
    }
  }
  if (wait.stream == 0) {
    // The compute stream has caught up with them: they are no longer in
    // flight for it (a wait on another stream orders only that stream).
    inFlight.erase(std::remove_if(inFlight.begin(), inFlight.end(),
                                  [&](const InFlight &flight) {
                                    return flight.waitedOn == 0;
                                  }),
                   inFlight.end());
  }
  if (recording && blocked) {
    timeline.push_back({wait.step, started, now()});
  }
  return problem.empty() ? ""
                         : describeStep(index) + ": collective " + problem;
}

std::string Session::checkNoRace(size_t index) const {
  const PreparedLaunch &launch = launches[index];
  for (const InFlight &flight : inFlight) {
    Footprint footprint =
        footprintOf(launches[flight.launch].collective->call);
    for (size_t k = 0; k < launch.call.operands.size(); ++k) {
      const Tensor &operand = launch.call.operands[k];
      size_t bytes = static_cast<size_t>(operand.numel()) *
                     dtypeSize(operand.dtype);
      if (overlap(static_cast<const uint8_t *>(operand.data), bytes,
                  footprint.written, footprint.writtenBytes)) {
        return describeStep(index) + ": operand " + std::to_string(k) +
               " shares bytes with the output of " +
               describeStep(flight.launch) +
               ", which the compute stream has not waited for (the plan "
               "waits for it too late, or not at all)";
      }
    }
  }
  return "";
}

std::string Session::completeAll() {
  std::string problem;
  for (InFlight &flight : inFlight) {
    if (std::string failure = complete(flight);
        problem.empty() && !failure.empty()) {
      problem = failure + " (completed at the end of the entry)";
    }
  }
  inFlight.clear();
  if (hostQueue) {
    if (std::string failure = waitHost(hostQueue->submitted());
        problem.empty() && !failure.empty()) {
      problem = failure + " (completed at the end of the entry)";
    }
    for (const LaunchTiming &timing : hostTimings) {
      if (recording) {
        timeline.push_back(timing);
      }
    }
    hostTimings.clear();
  }
  return problem;
}

std::string Session::submitHost(size_t index) {
  // (The host stream runs its own launches in order: no race among them.)
  hostTimings.push_back({launches[index].step, 0, 0});
  LaunchTiming *timing = &hostTimings.back();
  uint64_t count = hostQueue->submit([this, index, timing]() -> std::string {
    PreparedLaunch &launch = launches[index];
    timing->start = now();
    std::string problem = launch.kernel->run(launch.call);
    timing->end = now();
    if (profile) {
      profileSeconds[index] += timing->end - timing->start;
      ++profileCalls[index];
    }
    return problem.empty() ? "" : describeStep(index) + ": " + problem;
  });
  // Counted as the queue counts, across entries: a record marks the count
  // a wait waits for.
  startedOn[launches[index].stream] = count;
  hostInFlight.push_back({index, count});
  return "";
}

std::string Session::waitHost(uint64_t count) {
  std::string problem = hostQueue->waitFor(count);
  hostInFlight.erase(
      std::remove_if(hostInFlight.begin(), hostInFlight.end(),
                     [&](const std::pair<size_t, uint64_t> &queued) {
                       return queued.second <= count;
                     }),
      hostInFlight.end());
  return problem;
}

std::string Session::checkNoHostRace(size_t index) const {
  if (hostInFlight.empty()) {
    return "";
  }
  // What step `index` touches: a copy's two buffers, a launch's operands.
  std::vector<std::pair<const uint8_t *, size_t>> mine;
  const PreparedLaunch &launch = launches[index];
  if (launch.kind == PreparedLaunch::Kind::Copy) {
    mine = {{static_cast<const uint8_t *>(launch.copy.source), launch.copy.bytes},
            {static_cast<const uint8_t *>(launch.copy.target), launch.copy.bytes}};
  } else {
    for (const Tensor &operand : launch.call.operands) {
      mine.push_back({static_cast<const uint8_t *>(operand.data),
                      static_cast<size_t>(operand.numel()) *
                          dtypeSize(operand.dtype)});
    }
  }
  for (auto [queued, count] : hostInFlight) {
    if (queued == index) {
      continue;
    }
    for (const Tensor &operand : launches[queued].call.operands) {
      size_t bytes = static_cast<size_t>(operand.numel()) *
                     dtypeSize(operand.dtype);
      for (auto [data, size] : mine) {
        if (overlap(data, size, static_cast<const uint8_t *>(operand.data),
                    bytes)) {
          return describeStep(index) + " shares bytes with " +
                 describeStep(queued) +
                 ", a host launch the compute stream has not waited for "
                 "(the plan waits for it too late, or not at all)";
        }
      }
    }
  }
  return "";
}

} // namespace tailor::runtime
