//===- Communicator.h - collectives between ranks ---------------*- C++ -*-===//
//
// A plan compiled for several ranks names collectives (all-reduce,
// reduce-scatter, all-gather, broadcast) over groups of ranks; the runtime
// runs them through a Communicator. Three implementations, each a thin
// layer over a real library and nothing home-made underneath: MPI (OpenMPI)
// for CPU ranks under mpirun or SLURM, Gloo for CPU ranks under torchrun,
// NCCL for GPU ranks (bootstrapped through MPI_Bcast of the unique id, or
// under torchrun through a rendezvous on MASTER_ADDR).
//
// Every call returns "" or an error naming the call, the rank and the
// library's own message; nothing here exits the process or throws.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_COMM_COMMUNICATOR_H
#define TAILOR_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/cpu/Kernel.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tailor::runtime::comm {

/// How a reduction combines ranks' elements (the plan's Reduction).
enum class ReduceOp { Sum = 0, Avg, Max, Min };

/// Where this process sits in the launch, read from the launcher's
/// environment: OpenMPI (OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/
/// _LOCAL_SIZE), torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT) or SLURM (SLURM_PROCID, SLURM_NTASKS,
/// SLURM_LOCALID, SLURM_NTASKS_PER_NODE).
struct LaunchInfo {
  /// "mpirun", "torchrun", "slurm" or "none" (a plain single process).
  std::string launcher = "none";
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localWorldSize = 1;
  /// torchrun's rendezvous address and port ("" / 0 otherwise).
  std::string masterAddr;
  int masterPort = 0;
};

/// Reads the launch from the environment; "" or an error naming the
/// variable that is missing, malformed or inconsistent (a rank outside
/// the world, say).
std::string detectLaunch(LaunchInfo &info);

/// How the launch reads in a message: "mpirun -np 4", "torchrun,
/// WORLD_SIZE=2", "slurm, 8 tasks" or "a single process".
std::string describeLaunch(const LaunchInfo &info);

struct CollectiveCall;

/// A collective Communicator::start began and that may still be moving
/// data: until test() reports it done or wait() returns, its input must not
/// be written nor its output touched. Destroying one that is not done waits
/// for it (MPI forbids abandoning a collective's request), so destroy it
/// before its communicator.
class PendingCollective {
public:
  virtual ~PendingCollective() = default;
  /// Polls without blocking (and lets MPI progress the transfer): `done`
  /// becomes true once the collective has completed, and the result is ""
  /// or its failure; asked again after that, it repeats the same answer.
  virtual std::string test(bool &done) = 0;
  /// Blocks until the collective completes; "" or its failure.
  virtual std::string wait() = 0;
};

/// A group of ranks that run collectives together. Buffers are host memory
/// for MPI and device memory for NCCL; `stream` is the cudaStream_t NCCL
/// enqueues on (ignored by MPI, whose calls complete before returning).
/// `send == recv` runs in place where the operation allows it.
class Communicator {
public:
  virtual ~Communicator() = default;

  /// This rank's index in the group, and the group's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi", "gloo" or "nccl".
  virtual const char *backend() const = 0;

  /// recv[i] = op over ranks of send[i], `count` elements on every rank.
  virtual std::string allReduce(const void *send, void *recv, size_t count,
                                DType dtype, ReduceOp op,
                                void *stream = nullptr) = 0;
  /// recv (recvCount elements) = op over ranks of this rank's block of
  /// send (size() * recvCount elements, block r goes to rank r).
  virtual std::string reduceScatter(const void *send, void *recv,
                                    size_t recvCount, DType dtype,
                                    ReduceOp op, void *stream = nullptr) = 0;
  /// recv (size() * sendCount elements) = every rank's send, in rank order.
  virtual std::string allGather(const void *send, void *recv, size_t sendCount,
                                DType dtype, void *stream = nullptr) = 0;
  /// Block r of send (size() * count elements) goes to rank r, and block q
  /// of recv comes from rank q's block for this rank (ZeRO++'s quantized
  /// gradient reduce-scatter sends each rank its chunk this way). send and
  /// recv must not overlap. This base form answers an error naming the
  /// backend: each communicator that can run it overrides it.
  virtual std::string allToAll(const void *send, void *recv, size_t count,
                               DType dtype, void *stream = nullptr);
  /// buffer on every rank = buffer on `root`.
  virtual std::string broadcast(void *buffer, size_t count, DType dtype,
                                int root, void *stream = nullptr) = 0;
  /// Point to point (layer split across ranks): blocks until matched.
  virtual std::string send(const void *buffer, size_t count, DType dtype,
                           int peer, void *stream = nullptr) = 0;
  virtual std::string recv(void *buffer, size_t count, DType dtype, int peer,
                           void *stream = nullptr) = 0;
  /// Waits until every rank of the group arrives.
  virtual std::string barrier() = 0;

  /// Starts `call` and returns without waiting for its data to move: "" and
  /// `pending` set, or the failure and `pending` null (then nothing was
  /// started on any rank). The ranks start their collectives on a group in
  /// the same order, and call nothing else on this thread but Communicator
  /// and PendingCollective methods for MPI (MPI_THREAD_FUNNELED). MPI runs
  /// MPI_I* calls that progress while the caller polls test(); this base
  /// form runs the blocking call and hands back a finished one (NCCL's
  /// calls are asynchronous on their CUDA stream already). bytesSent counts
  /// it as the blocking call does, once it has completed.
  virtual std::string start(const CollectiveCall &call,
                            std::unique_ptr<PendingCollective> &pending);

  /// An all-reduce of a few values in host memory, whichever memory the
  /// backend's collectives take (NCCL stages them through the GPU), done
  /// when it returns: the trainer's loss sums and stop flags. Not counted
  /// in bytesSent, which the plan's prediction is compared with.
  virtual std::string allReduceHost(const void *send, void *recv,
                                    size_t count, DType dtype, ReduceOp op);

  /// An all-gather of host memory (recv, size() * sendCount elements, =
  /// every rank's send in rank order; send may be this rank's block of
  /// recv), whichever memory the backend's collectives take (NCCL stages
  /// it through the GPU in pieces of bounded size), done when it returns:
  /// checkpoints of sharded states. Not counted in bytesSent.
  virtual std::string allGatherHost(const void *send, void *recv,
                                    size_t sendCount, DType dtype);

  /// Waits until what this communicator enqueued on `stream` has finished,
  /// turning a peer that died or stopped answering into an error (NCCL's
  /// asynchronous errors, polled with a timeout) rather than a hang. MPI's
  /// calls complete before returning: nothing to wait for.
  virtual std::string synchronize(void *stream = nullptr);

  /// A communicator over the ranks of this group that pass the same
  /// `color`, ordered by `key` (MPI_Comm_split's semantics; NCCL's
  /// ncclCommSplit). Null with `error` set on failure.
  virtual std::unique_ptr<Communicator> split(int color, int key,
                                              std::string &error) = 0;

  /// Bytes this rank has sent so far, counted as the ring algorithms the
  /// plan's cost model assumes move them: all-reduce 2(p-1)/p n,
  /// reduce-scatter, all-gather and all-to-all (p-1)/p n (n the full
  /// buffer; an all-to-all keeps its own block), broadcast n from the
  /// root, send n. Compared with the plan's prediction.
  uint64_t bytesSent() const { return sentBytes; }

protected:
  void countSent(uint64_t bytes) { sentBytes += bytes; }

private:
  uint64_t sentBytes = 0;
};

/// The collectives a plan names, numbered as the plan's CollectiveKind.
/// Send and Recv: point to point with the rank `root` names (layer split).
/// AllToAll: block r of the input to rank r (plan 1.17).
enum class CollectiveKind {
  AllReduce = 0,
  ReduceScatter,
  AllGather,
  Broadcast,
  Send,
  Recv,
  AllToAll
};

/// One collective step as a plan gives it: element counts of both buffers
/// (reduce-scatter reads size() times what it writes, all-gather writes
/// size() times what it reads, all-to-all keeps the size), the broadcast
/// root, and the stream (GPU).
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::AllReduce;
  ReduceOp op = ReduceOp::Sum;
  const void *input = nullptr;
  void *output = nullptr;
  size_t inputElements = 0;
  size_t outputElements = 0;
  DType dtype = DType::F32;
  int root = 0;
  void *stream = nullptr;
};

/// Runs `call` on `group`: the one place a plan's collective kind becomes
/// a Communicator call (CPU sessions and the CUDA backend alike).
std::string runCollective(Communicator &group, const CollectiveCall &call);

/// The MPI communicator over MPI_COMM_WORLD (initializing MPI with
/// MPI_THREAD_FUNNELED if nobody has, and finalizing it when the last
/// communicator goes away). Errors return instead of aborting
/// (MPI_ERRORS_RETURN). Null with `error` set when MPI cannot start or the
/// world is not the launch's.
std::unique_ptr<Communicator> createMpiCommunicator(const LaunchInfo &launch,
                                                    std::string &error);

/// The Gloo communicator of CPU ranks launched by torchrun (no MPI job
/// around them): TCP pairs connected through the torchrun rendezvous
/// (MASTER_ADDR, port MASTER_PORT + 1). Null with `error` set when built
/// without Gloo or when a rank does not come.
std::unique_ptr<Communicator> createGlooCommunicator(const LaunchInfo &launch,
                                                     std::string &error);

/// The communicator of CPU ranks for `launch`: Gloo under torchrun, MPI
/// under mpirun or SLURM.
std::unique_ptr<Communicator> createCpuCommunicator(const LaunchInfo &launch,
                                                    std::string &error);

/// The NCCL communicator for GPU `launch.localRank`: the unique id comes
/// from rank 0 through MPI_Bcast (under mpirun) or the torchrun rendezvous
/// (MASTER_ADDR, port MASTER_PORT + 1). Null with `error` set when built
/// without CUDA, when no GPU is present, or when NCCL fails.
std::unique_ptr<Communicator> createNcclCommunicator(const LaunchInfo &launch,
                                                     std::string &error);

} // namespace tailor::runtime::comm

#endif // TAILOR_RUNTIME_COMM_COMMUNICATOR_H
