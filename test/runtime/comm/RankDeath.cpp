//===- RankDeath.cpp - a rank killed mid-collective (for mpirun) ----------===//
//
// Under `mpirun -np N`: the last rank kills itself with SIGKILL (as
// `kill -9` would) while the others sit in all-reduces. CheckRankDeath.cmake
// runs it and checks that the whole job ends, within its timeout, with
// OpenMPI's message naming the lost rank: OpenMPI's runtime (not the
// surviving ranks) notices the dead process and tears the job down.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include <csignal>
#include <cstdio>
#include <unistd.h>

using namespace tailor::runtime;
using namespace tailor::runtime::comm;

int main() {
  LaunchInfo launch;
  std::string error = detectLaunch(launch);
  std::unique_ptr<Communicator> world;
  if (error.empty()) {
    world = createMpiCommunicator(launch, error);
  }
  if (!world) {
    std::fprintf(stderr, "RankDeath: %s\n", error.c_str());
    return 2;
  }
  if (std::string problem = world->barrier(); !problem.empty()) {
    std::fprintf(stderr, "RankDeath: %s\n", problem.c_str());
    return 2;
  }
  if (world->rank() == world->size() - 1) {
    std::raise(SIGKILL);
  }
  // The survivors keep communicating; they must not outlive the job.
  for (int step = 0;; ++step) {
    float value = 1, sum = 0;
    if (std::string problem =
            world->allReduce(&value, &sum, 1, DType::F32, ReduceOp::Sum);
        !problem.empty()) {
      std::fprintf(stderr, "rank %d: %s\n", world->rank(), problem.c_str());
      return 1;
    }
  }
}
