//===- SessionCollectives.cpp - a session's collectives between ranks -----===//
//
// A plan of several ranks is one program every rank runs; its collectives
// name rank 0's group (all ranks, the first node's ranks, or rank 0's index
// on every node). Each rank runs them on its own matching group, split
// once from the world communicator when the session gets it.
//
//===----------------------------------------------------------------------===//

#include "runtime/Session.h"

#include "runtime/comm/Communicator.h"

#include <algorithm>

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
  prepared.step = step;
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

/// The members of `rank`'s group of the same shape as rank 0's `group`
/// (sorted): all ranks; a block of consecutive ranks from 0 (a node); or
/// every `stride`-th rank from 0 (one index across nodes). The color
/// MPI_Comm_split needs is returned through `color`; empty when the group
/// has none of these shapes.
static std::vector<int> matchingGroup(const std::vector<int> &group, int rank,
                                      int worldSize, int &color) {
  int size = static_cast<int>(group.size());
  std::vector<int> members;
  bool block = true, strided = size > 1;
  int stride = size > 1 ? group[1] - group[0] : 1;
  for (int i = 0; i < size; ++i) {
    block = block && group[static_cast<size_t>(i)] == i;
    strided = strided && group[static_cast<size_t>(i)] == i * stride;
  }
  if (block && worldSize % size == 0) {
    color = rank / size;
    for (int i = 0; i < size; ++i) {
      members.push_back(color * size + i);
    }
  } else if (strided && stride > 0 && stride * size == worldSize) {
    color = rank % stride;
    for (int i = 0; i < size; ++i) {
      members.push_back(color + i * stride);
    }
  }
  return members;
}

/// Rank 0's groups of ranks the plan names, sorted, each with what names it
/// ("step 7", "sharded state 'zero.b0.exp_avg'"), in plan order: its
/// collectives' (CPU or GPU), then its sharded states', then its sharded
/// parameters' (which checkpoints gather).
static std::vector<std::pair<std::vector<int>, std::string>>
namedGroups(const fb::Plan &p) {
  std::vector<std::pair<std::vector<int>, std::string>> groups;
  auto add = [&](const flatbuffers::Vector<int32_t> &group,
                 std::string what) {
    std::vector<int> members(group.begin(), group.end());
    std::sort(members.begin(), members.end());
    groups.emplace_back(std::move(members), std::move(what));
  };
  const auto &ops = *p.ops();
  for (uint32_t i = 0; i < ops.size(); ++i) {
    if (const fb::Collective *collective = ops.Get(i)->step_as_Collective()) {
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
                                       comm::Communicator *&result) {
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

int Session::groupPosition(const std::vector<int> &group) const {
  int color = 0;
  std::vector<int> members =
      matchingGroup(group, rankValue, loaded.root().world_size(), color);
  auto it = std::find(members.begin(), members.end(), rankValue);
  return it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

std::string Session::runCollective(const PreparedCollective &collective) {
  comm::Communicator *group = nullptr;
  if (std::string problem = groupCommunicator(collective.group, group);
      !problem.empty()) {
    return problem;
  }
  return comm::runCollective(*group, collective.call);
}

} // namespace tailor::runtime
