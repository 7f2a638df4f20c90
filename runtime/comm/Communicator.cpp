//===- Communicator.cpp - launch detection and shared checks --------------===//
//
// Reads where this process sits from the launcher's environment, and the
// checks every communicator makes before handing a call to its library.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "runtime/comm/CommSupport.h"
#include "runtime/quant/Half.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <vector>

namespace tailor::runtime::comm {

namespace {

/// A collective that ran to completion when it was started.
class FinishedCollective final : public PendingCollective {
public:
  explicit FinishedCollective(std::string result) : result(std::move(result)) {}
  std::string test(bool &done) override {
    done = true;
    return result;
  }
  std::string wait() override { return result; }

private:
  std::string result;
};

} // namespace

std::string Communicator::synchronize(void *) { return ""; }

std::string Communicator::allToAll(const void *, void *, size_t, DType,
                                   void *) {
  return std::string("allToAll on rank ") + std::to_string(rank()) + " of " +
         std::to_string(size()) + ": the " + backend() +
         " communicator has no all-to-all";
}

std::string Communicator::start(const CollectiveCall &call,
                                std::unique_ptr<PendingCollective> &pending) {
  pending.reset();
  if (std::string error = runCollective(*this, call); !error.empty()) {
    return error;
  }
  pending = std::make_unique<FinishedCollective>("");
  return "";
}

std::string Communicator::allReduceHost(const void *send, void *recv,
                                        size_t count, DType dtype,
                                        ReduceOp op) {
  // Backends whose collectives take host memory (MPI) run it as any other
  // all-reduce, without counting it.
  uint64_t before = sentBytes;
  std::string error = allReduce(send, recv, count, dtype, op);
  sentBytes = before;
  return error;
}

std::string Communicator::allGatherHost(const void *send, void *recv,
                                        size_t sendCount, DType dtype) {
  uint64_t before = sentBytes;
  std::string error = allGather(send, recv, sendCount, dtype);
  sentBytes = before;
  return error;
}

namespace {

/// Parses the whole of `text` as a decimal int.
bool parseInt(const std::string &text, int &value) {
  if (text.empty()) {
    return false;
  }
  errno = 0;
  char *end = nullptr;
  long parsed = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || parsed < INT_MIN || parsed > INT_MAX) {
    return false;
  }
  value = static_cast<int>(parsed);
  return true;
}

/// Reads the environment variables of one launcher.
class EnvReader {
public:
  explicit EnvReader(std::string launcher) : launcher(std::move(launcher)) {}

  static bool has(const char *name) { return std::getenv(name) != nullptr; }

  /// Reads integer `name` into `value`; notes the first problem.
  void readInt(const char *name, int &value) {
    const char *text = std::getenv(name);
    if (!text) {
      fail(std::string(name) + " is not set");
      return;
    }
    if (!parseInt(text, value)) {
      fail(std::string(name) + "='" + text + "' is not an integer");
    }
  }
  void readString(const char *name, std::string &value) {
    const char *text = std::getenv(name);
    if (!text || !*text) {
      fail(std::string(name) + " is not set");
      return;
    }
    value = text;
  }
  void fail(const std::string &problem) {
    if (error.empty()) {
      error = launcher + " launch: " + problem;
    }
  }

  std::string launcher;
  std::string error;
};

/// SLURM's compressed per-node task counts ("2(x3),1": 2,2,2,1): the entry
/// of node `node`, or -1.
int tasksOnNode(const std::string &list, int node) {
  size_t pos = 0;
  int index = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    std::string item = list.substr(pos, comma == std::string::npos
                                            ? std::string::npos
                                            : comma - pos);
    int count = 0, repeat = 1;
    size_t paren = item.find('(');
    if (!parseInt(item.substr(0, paren), count)) {
      return -1;
    }
    if (paren != std::string::npos) {
      // "(xM)"
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 ||
          item.back() != ')' ||
          !parseInt(item.substr(paren + 2, item.size() - paren - 3), repeat)) {
        return -1;
      }
    }
    if (node < index + repeat) {
      return count;
    }
    index += repeat;
    if (comma == std::string::npos) {
      break;
    }
    pos = comma + 1;
  }
  return -1;
}

void readOpenMpi(EnvReader &env, LaunchInfo &info) {
  env.readInt("OMPI_COMM_WORLD_RANK", info.rank);
  env.readInt("OMPI_COMM_WORLD_SIZE", info.worldSize);
  env.readInt("OMPI_COMM_WORLD_LOCAL_RANK", info.localRank);
  env.readInt("OMPI_COMM_WORLD_LOCAL_SIZE", info.localWorldSize);
}

void readTorchrun(EnvReader &env, LaunchInfo &info) {
  env.readInt("RANK", info.rank);
  env.readInt("WORLD_SIZE", info.worldSize);
  env.readInt("LOCAL_RANK", info.localRank);
  env.readInt("LOCAL_WORLD_SIZE", info.localWorldSize);
  env.readString("MASTER_ADDR", info.masterAddr);
  env.readInt("MASTER_PORT", info.masterPort);
  if (env.error.empty() &&
      (info.masterPort < 1 || info.masterPort > 65534)) {
    // The NCCL rendezvous listens on MASTER_PORT + 1.
    env.fail("MASTER_PORT=" + std::to_string(info.masterPort) +
             " is not a port in 1..65534");
  }
}

void readSlurm(EnvReader &env, LaunchInfo &info) {
  env.readInt("SLURM_PROCID", info.rank);
  // A job step's own task count: SLURM_NTASKS is the allocation's, which a
  // step (srun -n) may use only part of.
  env.readInt(EnvReader::has("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS"
                                                     : "SLURM_NTASKS",
              info.worldSize);
  env.readInt("SLURM_LOCALID", info.localRank);
  if (EnvReader::has("SLURM_NTASKS_PER_NODE")) {
    env.readInt("SLURM_NTASKS_PER_NODE", info.localWorldSize);
    return;
  }
  const char *listName = EnvReader::has("SLURM_STEP_TASKS_PER_NODE")
                             ? "SLURM_STEP_TASKS_PER_NODE"
                             : "SLURM_TASKS_PER_NODE";
  std::string list;
  int node = 0;
  env.readString(listName, list);
  env.readInt("SLURM_NODEID", node);
  if (!env.error.empty()) {
    return;
  }
  info.localWorldSize = tasksOnNode(list, node);
  if (info.localWorldSize < 0) {
    env.fail(std::string(listName) + "='" + list + "' names no task count "
             "for SLURM_NODEID " + std::to_string(node));
  }
}

/// The checks every launcher's figures must pass.
void checkConsistent(EnvReader &env, const LaunchInfo &info,
                     const char *rankName, const char *sizeName,
                     const char *localRankName, const char *localSizeName) {
  if (!env.error.empty()) {
    return;
  }
  if (info.worldSize < 1) {
    env.fail(std::string(sizeName) + "=" + std::to_string(info.worldSize) +
             " is not a positive world size");
  } else if (info.rank < 0 || info.rank >= info.worldSize) {
    env.fail(std::string(rankName) + "=" + std::to_string(info.rank) +
             " is outside the world of " + sizeName + "=" +
             std::to_string(info.worldSize));
  } else if (info.localWorldSize < 1 ||
             info.localWorldSize > info.worldSize) {
    env.fail(std::string(localSizeName) + "=" +
             std::to_string(info.localWorldSize) + " is not in 1.." +
             sizeName + " (" + std::to_string(info.worldSize) + ")");
  } else if (info.localRank < 0 || info.localRank >= info.localWorldSize) {
    env.fail(std::string(localRankName) + "=" +
             std::to_string(info.localRank) + " is outside the node's " +
             localSizeName + "=" + std::to_string(info.localWorldSize));
  }
}

} // namespace

std::string detectLaunch(LaunchInfo &info) {
  info = LaunchInfo();
  // mpirun first: it may run inside a SLURM allocation (whose variables
  // describe the allocation, not the MPI job) or start processes that
  // inherited a torchrun-style RANK from a wrapper script. torchrun next:
  // under SLURM, its variables describe the processes it started.
  if (EnvReader::has("OMPI_COMM_WORLD_SIZE") ||
      EnvReader::has("OMPI_COMM_WORLD_RANK")) {
    EnvReader env("mpirun");
    readOpenMpi(env, info);
    checkConsistent(env, info, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
    info.launcher = "mpirun";
    return env.error;
  }
  if (EnvReader::has("WORLD_SIZE") || EnvReader::has("RANK")) {
    EnvReader env("torchrun");
    readTorchrun(env, info);
    checkConsistent(env, info, "RANK", "WORLD_SIZE", "LOCAL_RANK",
                    "LOCAL_WORLD_SIZE");
    info.launcher = "torchrun";
    return env.error;
  }
  if (EnvReader::has("SLURM_PROCID")) {
    EnvReader env("slurm");
    readSlurm(env, info);
    checkConsistent(env, info, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                    "SLURM_NTASKS_PER_NODE");
    info.launcher = "slurm";
    return env.error;
  }
  return "";
}

std::string describeLaunch(const LaunchInfo &info) {
  if (info.launcher == "none") {
    return "a single process";
  }
  std::string count = std::to_string(info.worldSize);
  if (info.launcher == "mpirun") {
    return "mpirun -np " + count;
  }
  if (info.launcher == "torchrun") {
    return "torchrun, WORLD_SIZE=" + count;
  }
  return info.launcher + ", " + count + " tasks";
}

namespace detail {

std::string checkReduction(DType dtype, ReduceOp op) {
  bool isFloat = dtype == DType::F32 || dtype == DType::F64 ||
                 dtype == DType::F16 || dtype == DType::BF16;
  if (op == ReduceOp::Avg && !isFloat) {
    return std::string("an average of ") + dtypeName(dtype) +
           " elements (only float types average; reduce with sum)";
  }
  if (dtype == DType::Bool && op == ReduceOp::Sum) {
    return "a sum of bool elements (bool reduces with max or min: or, and)";
  }
  return "";
}

uint64_t ringBytes(uint64_t bytes, int size, int hops) {
  if (size <= 1) {
    return 0;
  }
  return bytes * static_cast<uint64_t>(hops) *
         static_cast<uint64_t>(size - 1) / static_cast<uint64_t>(size);
}

void divideElements(void *data, size_t count, DType dtype, int divisor) {
  switch (dtype) {
  case DType::F32: {
    auto *x = static_cast<float *>(data);
    for (size_t i = 0; i < count; ++i) {
      x[i] /= static_cast<float>(divisor);
    }
    break;
  }
  case DType::F64: {
    auto *x = static_cast<double *>(data);
    for (size_t i = 0; i < count; ++i) {
      x[i] /= divisor;
    }
    break;
  }
  case DType::BF16:
  case DType::F16: {
    auto *x = static_cast<uint16_t *>(data);
    bool bf16 = dtype == DType::BF16;
    for (size_t i = 0; i < count; ++i) {
      float v = bf16 ? quant::bf16ToFloat(x[i]) : quant::fp16ToFloat(x[i]);
      v /= static_cast<float>(divisor);
      x[i] = bf16 ? quant::floatToBf16(v) : quant::floatToFp16(v);
    }
    break;
  }
  default:
    break; // checkReduction rejected integer averages before.
  }
}

std::string readTimeout(double &seconds) {
  seconds = 45; // collectives of a step take seconds at most
  const char *text = std::getenv("TAILOR_COMM_TIMEOUT");
  if (!text) {
    return "";
  }
  char *end = nullptr;
  double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value > 0)) {
    return std::string("TAILOR_COMM_TIMEOUT='") + text +
           "' is not a positive number of seconds";
  }
  seconds = value;
  return "";
}

Agreement::Agreement(std::vector<std::pair<const char *, int64_t>> fields,
                     bool failedHere)
    : fields(std::move(fields)) {
  this->fields.push_back({"", failedHere ? 1 : 0});
  size_t n = this->fields.size();
  values.resize(2 * n);
  for (size_t i = 0; i < n; ++i) {
    values[i] = this->fields[i].second;
    values[n + i] = -this->fields[i].second;
  }
}

std::string Agreement::verdict(const std::string &prefix) const {
  size_t n = fields.size();
  for (size_t i = 0; i + 1 < n; ++i) {
    int64_t high = values[i], low = -values[n + i];
    if (high != low) {
      return prefix + "the ranks disagree on the " + fields[i].first +
             " (this rank " + std::to_string(fields[i].second) +
             ", others from " + std::to_string(low) + " to " +
             std::to_string(high) + ")";
    }
  }
  if (values[n - 1] != 0) {
    return prefix + "another rank's call failed its checks (its error says "
                    "why)";
  }
  return "";
}

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

const char *opName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Avg:
    return "avg";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Min:
    return "min";
  }
  return "?";
}

} // namespace detail

std::string runCollective(Communicator &group, const CollectiveCall &call) {
  switch (call.kind) {
  case CollectiveKind::AllReduce:
    return group.allReduce(call.input, call.output, call.inputElements,
                           call.dtype, call.op, call.stream);
  case CollectiveKind::ReduceScatter:
    return group.reduceScatter(call.input, call.output, call.outputElements,
                               call.dtype, call.op, call.stream);
  case CollectiveKind::AllGather:
    return group.allGather(call.input, call.output, call.inputElements,
                           call.dtype, call.stream);
  case CollectiveKind::Broadcast:
    return group.broadcast(call.output, call.outputElements, call.dtype,
                           call.root, call.stream);
  case CollectiveKind::Send:
    return group.send(call.input, call.inputElements, call.dtype, call.root,
                      call.stream);
  case CollectiveKind::Recv:
    return group.recv(call.output, call.outputElements, call.dtype, call.root,
                      call.stream);
  case CollectiveKind::AllToAll:
    if (group.size() <= 0 || call.inputElements % group.size() != 0) {
      return "allToAll: " + std::to_string(call.inputElements) +
             " elements do not divide among " + std::to_string(group.size()) +
             " ranks";
    }
    return group.allToAll(call.input, call.output,
                          call.inputElements / group.size(), call.dtype,
                          call.stream);
  }
  return "unknown collective kind " +
         std::to_string(static_cast<int>(call.kind));
}

std::unique_ptr<Communicator> createCpuCommunicator(const LaunchInfo &launch,
                                                    std::string &error) {
  return launch.launcher == "torchrun" ? createGlooCommunicator(launch, error)
                                       : createMpiCommunicator(launch, error);
}

#if !TAILOR_HAVE_GLOO
std::unique_ptr<Communicator> createGlooCommunicator(const LaunchInfo &,
                                                     std::string &error) {
  error = "this runtime was built without Gloo (Debian's libgloo-dev), which "
          "CPU ranks under torchrun communicate through: launch them with "
          "mpirun, or rebuild with libgloo-dev installed";
  return nullptr;
}
#endif

} // namespace tailor::runtime::comm
