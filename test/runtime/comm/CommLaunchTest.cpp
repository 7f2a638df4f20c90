//===- CommLaunchTest.cpp - launch detection and the rendezvous -----------===//
//
// detectLaunch against the variables OpenMPI, torchrun and SLURM set (and
// the errors for missing or inconsistent ones), and the torchrun
// rendezvous between forked processes on loopback.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/Rendezvous.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace tailor::runtime::comm;

namespace {

const char *const kLaunchVariables[] = {
    "OMPI_COMM_WORLD_RANK",   "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "RANK",                   "WORLD_SIZE",
    "LOCAL_RANK",             "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",            "MASTER_PORT",
    "SLURM_PROCID",           "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS",   "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE",  "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_TASKS_PER_NODE", "SLURM_NODEID"};

/// Sets exactly `variables` among the launch variables for one test, and
/// restores the environment afterwards.
class Environment {
public:
  explicit Environment(const std::map<std::string, std::string> &variables) {
    for (const char *name : kLaunchVariables) {
      if (const char *value = std::getenv(name)) {
        saved[name] = value;
      }
      unsetenv(name);
    }
    for (const auto &[name, value] : variables) {
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~Environment() {
    for (const char *name : kLaunchVariables) {
      unsetenv(name);
    }
    for (const auto &[name, value] : saved) {
      setenv(name.c_str(), value.c_str(), 1);
    }
  }

private:
  std::map<std::string, std::string> saved;
};

std::map<std::string, std::string> openMpi(int rank, int size) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank % 2)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
}

std::map<std::string, std::string> torchrun(int rank, int size) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(size)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(size)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"}};
}

TEST(DetectLaunch, APlainProcessIsAWorldOfOne) {
  Environment env({});
  LaunchInfo info;
  ASSERT_EQ(detectLaunch(info), "");
  EXPECT_EQ(info.launcher, "none");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.worldSize, 1);
  EXPECT_EQ(describeLaunch(info), "a single process");
}

TEST(DetectLaunch, ReadsOpenMpi) {
  Environment env(openMpi(3, 4));
  LaunchInfo info;
  ASSERT_EQ(detectLaunch(info), "");
  EXPECT_EQ(info.launcher, "mpirun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.worldSize, 4);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.localWorldSize, 2);
  EXPECT_EQ(describeLaunch(info), "mpirun -np 4");
}

TEST(DetectLaunch, ReadsTorchrun) {
  Environment env(torchrun(1, 2));
  LaunchInfo info;
  ASSERT_EQ(detectLaunch(info), "");
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.worldSize, 2);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.localWorldSize, 2);
  EXPECT_EQ(info.masterAddr, "127.0.0.1");
  EXPECT_EQ(info.masterPort, 29500);
}

TEST(DetectLaunch, ReadsSlurmWithItsCompressedTaskCounts) {
  Environment env({{"SLURM_PROCID", "5"},
                   {"SLURM_NTASKS", "7"},
                   {"SLURM_LOCALID", "1"},
                   {"SLURM_NODEID", "2"},
                   {"SLURM_TASKS_PER_NODE", "2(x3),1"}});
  LaunchInfo info;
  ASSERT_EQ(detectLaunch(info), "");
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.worldSize, 7);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.localWorldSize, 2);
}

TEST(DetectLaunch, SlurmStepCountsBeatTheAllocations) {
  Environment env({{"SLURM_PROCID", "1"},
                   {"SLURM_NTASKS", "8"},
                   {"SLURM_STEP_NUM_TASKS", "2"},
                   {"SLURM_LOCALID", "1"},
                   {"SLURM_NTASKS_PER_NODE", "2"}});
  LaunchInfo info;
  ASSERT_EQ(detectLaunch(info), "");
  EXPECT_EQ(info.worldSize, 2);
  EXPECT_EQ(info.localWorldSize, 2);
}

TEST(DetectLaunch, MpirunBeatsTorchrunAndSlurm) {
  auto variables = openMpi(1, 2);
  for (const auto &entry : torchrun(0, 8)) {
    variables.insert(entry);
  }
  variables["SLURM_PROCID"] = "0";
  variables["SLURM_NTASKS"] = "16";
  Environment env(variables);
  LaunchInfo info;
  ASSERT_EQ(detectLaunch(info), "");
  EXPECT_EQ(info.launcher, "mpirun");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.worldSize, 2);
}

TEST(DetectLaunch, TorchrunBeatsSlurm) {
  auto variables = torchrun(1, 2);
  variables["SLURM_PROCID"] = "0";
  variables["SLURM_NTASKS"] = "1";
  Environment env(variables);
  LaunchInfo info;
  ASSERT_EQ(detectLaunch(info), "");
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.worldSize, 2);
}

/// The error detectLaunch gives for `variables`.
std::string launchError(const std::map<std::string, std::string> &variables) {
  Environment env(variables);
  LaunchInfo info;
  return detectLaunch(info);
}

TEST(DetectLaunch, ErrorsNameTheVariable) {
  auto missing = torchrun(0, 2);
  missing.erase("LOCAL_WORLD_SIZE");
  EXPECT_EQ(launchError(missing),
            "torchrun launch: LOCAL_WORLD_SIZE is not set");

  auto malformed = torchrun(0, 2);
  malformed["WORLD_SIZE"] = "2x";
  EXPECT_EQ(launchError(malformed),
            "torchrun launch: WORLD_SIZE='2x' is not an integer");

  auto outside = openMpi(0, 2);
  outside["OMPI_COMM_WORLD_RANK"] = "2";
  EXPECT_EQ(launchError(outside),
            "mpirun launch: OMPI_COMM_WORLD_RANK=2 is outside the world of "
            "OMPI_COMM_WORLD_SIZE=2");

  auto local = openMpi(1, 2);
  local["OMPI_COMM_WORLD_LOCAL_RANK"] = "2";
  EXPECT_EQ(launchError(local),
            "mpirun launch: OMPI_COMM_WORLD_LOCAL_RANK=2 is outside the "
            "node's OMPI_COMM_WORLD_LOCAL_SIZE=2");

  auto zero = torchrun(0, 2);
  zero["WORLD_SIZE"] = "0";
  EXPECT_EQ(launchError(zero),
            "torchrun launch: WORLD_SIZE=0 is not a positive world size");

  auto port = torchrun(0, 2);
  port["MASTER_PORT"] = "65535";
  EXPECT_EQ(launchError(port), "torchrun launch: MASTER_PORT=65535 is not a "
                               "port in 1..65534");

  EXPECT_EQ(launchError({{"SLURM_PROCID", "0"},
                         {"SLURM_NTASKS", "2"},
                         {"SLURM_LOCALID", "0"},
                         {"SLURM_NODEID", "3"},
                         {"SLURM_TASKS_PER_NODE", "2(x2)"}}),
            "slurm launch: SLURM_TASKS_PER_NODE='2(x2)' names no task count "
            "for SLURM_NODEID 3");
}

/// A free TCP port on loopback whose successor is free too (the rendezvous
/// listens on MASTER_PORT + 1).
int freePort() {
  for (int port = 20000 + getpid() % 20000; port < 65000; port += 2) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port + 1));
    bool ok = bind(fd, reinterpret_cast<sockaddr *>(&address),
                   sizeof(address)) == 0;
    close(fd);
    if (ok) {
      return port;
    }
  }
  return -1;
}

TEST(Rendezvous, RankZeroHandsItsBytesToEveryRank) {
  const int world = 4;
  int port = freePort();
  ASSERT_GT(port, 0);
  std::vector<uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i) {
    id[i] = static_cast<uint8_t>(i * 7 + 3);
  }
  std::vector<pid_t> children;
  // Ranks 1..3 start first (they retry until rank 0 listens); each exits 0
  // only with rank 0's bytes.
  for (int rank = 1; rank < world; ++rank) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      LaunchInfo launch;
      launch.launcher = "torchrun";
      launch.rank = rank;
      launch.worldSize = world;
      launch.masterAddr = "localhost";
      launch.masterPort = port;
      std::vector<uint8_t> received(128, 0);
      std::string error = rendezvousBytes(launch, received, 20);
      _exit(error.empty() && received == id ? 0 : 1);
    }
    children.push_back(pid);
  }
  LaunchInfo launch;
  launch.launcher = "torchrun";
  launch.rank = 0;
  launch.worldSize = world;
  launch.masterAddr = "127.0.0.1";
  launch.masterPort = port;
  std::vector<uint8_t> bytes = id;
  EXPECT_EQ(rendezvousBytes(launch, bytes, 20), "");
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

/// Rank r's rendezvousTable entry: r + 1 bytes of value r * 16 (entries of
/// different sizes, an empty one impossible to confuse with a missing one).
static std::vector<uint8_t> entryOf(int rank) {
  return std::vector<uint8_t>(static_cast<size_t>(rank + 1),
                              static_cast<uint8_t>(rank * 16));
}

TEST(Rendezvous, EveryRankGetsEveryRanksEntry) {
  const int world = 4;
  int port = freePort();
  ASSERT_GT(port, 0);
  auto tableFor = [&](int rank, std::string &error) {
    LaunchInfo launch;
    launch.launcher = "torchrun";
    launch.rank = rank;
    launch.worldSize = world;
    launch.masterAddr = "127.0.0.1";
    launch.masterPort = port;
    std::vector<std::vector<uint8_t>> table(world);
    table[static_cast<size_t>(rank)] = entryOf(rank);
    error = rendezvousTable(launch, table, 20);
    return table;
  };
  auto complete = [&](const std::vector<std::vector<uint8_t>> &table) {
    for (int r = 0; r < world; ++r) {
      if (table[static_cast<size_t>(r)] != entryOf(r)) {
        return false;
      }
    }
    return true;
  };
  std::vector<pid_t> children;
  for (int rank = 1; rank < world; ++rank) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::string error;
      bool ok = complete(tableFor(rank, error));
      _exit(error.empty() && ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  std::string error;
  EXPECT_TRUE(complete(tableFor(0, error)));
  EXPECT_EQ(error, "");
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

TEST(Rendezvous, AMissingRankIsATimeoutNamingIt) {
  int port = freePort();
  ASSERT_GT(port, 0);
  LaunchInfo launch;
  launch.launcher = "torchrun";
  launch.rank = 0;
  launch.worldSize = 3;
  launch.masterAddr = "127.0.0.1";
  launch.masterPort = port;
  std::vector<uint8_t> bytes(128, 1);
  EXPECT_EQ(rendezvousBytes(launch, bytes, 0.3),
            "rendezvous on rank 0: timed out waiting on port " +
                std::to_string(port + 1) + " for rank(s) 1, 2 to connect");
  // And a rank whose rank 0 never comes.
  launch.rank = 2;
  EXPECT_EQ(rendezvousBytes(launch, bytes, 0.3),
            "rendezvous on rank 2: timed out connecting to rank 0 at rank 0 "
            "at 127.0.0.1:" +
                std::to_string(port + 1) + " (is rank 0 running?)");
}

TEST(NcclCommunicator, FailsCleanlyWithoutAGpu) {
  // Without a GPU (or without CUDA in the build) the factory returns null
  // and says why; with one it would start a world of one.
  LaunchInfo launch;
  std::string error;
  std::unique_ptr<Communicator> nccl = createNcclCommunicator(launch, error);
  if (nccl) {
    EXPECT_EQ(nccl->size(), 1);
    EXPECT_STREQ(nccl->backend(), "nccl");
    GTEST_SKIP() << "a GPU is present: NCCL started";
  }
  EXPECT_NE(error, "");
}

} // namespace
