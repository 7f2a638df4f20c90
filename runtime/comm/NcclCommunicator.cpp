//===- NcclCommunicator.cpp - collectives over NCCL on GPUs ---------------===//
//
// One NCCL communicator per process, on GPU LOCAL_RANK. The unique id
// travels from rank 0 by MPI_Bcast (mpirun, or srun with MPI) or by the
// torchrun rendezvous (Rendezvous.h). Communicators are nonblocking
// (ncclConfig_t::blocking = 0): every NCCL call that answers ncclInProgress
// is polled through ncclCommGetAsyncError until it finishes, and
// synchronize() polls the stream and the communicator's asynchronous error
// together, each with a deadline, so a peer that died ends in
// ncclCommAbort and an error naming this rank, never a hang.
//
// Timeouts: TAILOR_COMM_TIMEOUT seconds (default 45) for a collective to
// finish, and at least 300 s for start-up, when ranks may still be loading
// their plans.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#if TAILOR_ENABLE_CUDA

#include "runtime/comm/CommSupport.h"
#include "runtime/comm/Rendezvous.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace tailor::runtime::comm {

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kStartupTimeout = 300;


std::string where(int line) {
  return " (runtime/comm/NcclCommunicator.cpp:" + std::to_string(line) + ")";
}

std::string cudaFailure(const char *call, int rank, cudaError_t code,
                        int line) {
  return std::string(call) + " failed on rank " + std::to_string(rank) +
         ": " + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) +
         ")" + where(line);
}

/// NCCL's type for `dtype`; false for those it has none for (i16).
bool ncclType(DType dtype, ncclDataType_t &type) {
  switch (dtype) {
  case DType::F32:
    type = ncclFloat32;
    return true;
  case DType::F64:
    type = ncclFloat64;
    return true;
  case DType::F16:
    type = ncclFloat16;
    return true;
  case DType::BF16:
    type = ncclBfloat16;
    return true;
  case DType::I64:
    type = ncclInt64;
    return true;
  case DType::I32:
    type = ncclInt32;
    return true;
  case DType::I8:
    type = ncclInt8;
    return true;
  case DType::U8:
  case DType::Bool: // 0/1 bytes: max is or, min is and.
    type = ncclUint8;
    return true;
  case DType::I16:
    return false;
  }
  return false;
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return ncclSum;
  case ReduceOp::Avg:
    return ncclAvg;
  case ReduceOp::Max:
    return ncclMax;
  case ReduceOp::Min:
    return ncclMin;
  }
  return ncclSum;
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(int rank, int size, double timeout)
      : rankIndex(rank), sizeValue(size), timeout(timeout) {}
  ~NcclCommunicator() override;

  /// Runs ncclCommInitRankConfig (or, with `parent`, ncclCommSplit) and
  /// waits for it; "" or the error.
  std::string init(const ncclUniqueId &id);
  std::string initSplit(ncclComm_t parent, int color, int key,
                        bool &excluded);
  void keepAlive(std::unique_ptr<Communicator> bootstrap) {
    mpi = std::move(bootstrap);
  }

  int rank() const override { return rankIndex; }
  int size() const override { return sizeValue; }
  const char *backend() const override { return "nccl"; }

  std::string allReduce(const void *send, void *recv, size_t count,
                        DType dtype, ReduceOp op, void *stream) override;
  std::string reduceScatter(const void *send, void *recv, size_t recvCount,
                            DType dtype, ReduceOp op, void *stream) override;
  std::string allGather(const void *send, void *recv, size_t sendCount,
                        DType dtype, void *stream) override;
  std::string allToAll(const void *send, void *recv, size_t count,
                       DType dtype, void *stream) override;
  std::string broadcast(void *buffer, size_t count, DType dtype, int root,
                        void *stream) override;
  std::string send(const void *buffer, size_t count, DType dtype, int peer,
                   void *stream) override;
  std::string recv(void *buffer, size_t count, DType dtype, int peer,
                   void *stream) override;
  std::string barrier() override;
  std::string allReduceHost(const void *send, void *recv, size_t count,
                            DType dtype, ReduceOp op) override;
  std::string allGatherHost(const void *send, void *recv, size_t sendCount,
                            DType dtype) override;
  std::string synchronize(void *stream) override;
  std::unique_ptr<Communicator> split(int color, int key,
                                      std::string &error) override;

private:
  std::string prefix(const char *what) const {
    return std::string(what) + " on rank " + std::to_string(rankIndex) +
           " of " + std::to_string(sizeValue) + ": ";
  }
  /// Checks an NCCL call's result, waiting out ncclInProgress; aborts the
  /// communicator on failure.
  std::string check(ncclResult_t result, const char *call, int line,
                    double seconds);
  std::string failure(ncclResult_t result, const char *call, int line);
  /// The NCCL type to move `dtype` as, for operations that do not reduce
  /// (i16 travels as bytes); scales `count` accordingly.
  ncclDataType_t movedType(DType dtype, size_t &count) const;
  std::string reducedType(const char *what, DType dtype, ReduceOp op,
                          ncclDataType_t &type) const;
  std::string checkPeer(const char *what, int peer, const char *role) const;
  /// Grows the staging memory to at least `bytes`.
  std::string stage(size_t bytes);

  ncclComm_t comm = nullptr;
  bool aborted = false;
  int rankIndex;
  int sizeValue;
  double timeout;
  /// One int of device memory barrier() all-reduces.
  int *scratch = nullptr;
  /// Device memory allReduceHost stages its values through.
  void *staging = nullptr;
  size_t stagingBytes = 0;
  /// The MPI communicator the id came through: kept so MPI is finalized
  /// only after NCCL is done.
  std::unique_ptr<Communicator> mpi;
};

#define TAILOR_NCCL(call, ...)                                                 \
  if (std::string problem_ =                                                   \
          check(call(__VA_ARGS__), #call, __LINE__, timeout);                  \
      !problem_.empty()) {                                                     \
    return problem_;                                                           \
  }
#define TAILOR_CUDA(call, ...)                                                 \
  if (cudaError_t code_ = call(__VA_ARGS__); code_ != cudaSuccess) {           \
    return cudaFailure(#call, rankIndex, code_, __LINE__);                     \
  }

NcclCommunicator::~NcclCommunicator() {
  if (comm && !aborted) {
    // Finalize flushes what is still enqueued; a dead peer turns it into
    // an abort after the timeout.
    if (!check(ncclCommFinalize(comm), "ncclCommFinalize", __LINE__, timeout)
             .empty()) {
      comm = nullptr; // check() aborted it.
    }
  }
  if (comm && !aborted) {
    ncclCommDestroy(comm);
  }
  if (scratch) {
    cudaFree(scratch);
  }
  if (staging) {
    cudaFree(staging);
  }
}

std::string NcclCommunicator::failure(ncclResult_t result, const char *call,
                                      int line) {
  std::string detail = comm ? ncclGetLastError(comm) : "";
  std::string text = std::string(call) + " failed on rank " +
                     std::to_string(rankIndex) + ": " +
                     ncclGetErrorString(result) +
                     (detail.empty() ? "" : " (" + detail + ")") + where(line);
  if (comm && !aborted) {
    ncclCommAbort(comm);
    aborted = true;
  }
  return text;
}

std::string NcclCommunicator::check(ncclResult_t result, const char *call,
                                    int line, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (result == ncclInProgress && comm) {
    if (Clock::now() > deadline) {
      std::string text = std::string(call) + " on rank " +
                         std::to_string(rankIndex) + " did not finish in " +
                         std::to_string(static_cast<int>(seconds)) +
                         " s (a peer died or stopped answering)" + where(line);
      ncclCommAbort(comm);
      aborted = true;
      return text;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ncclResult_t state = ncclSuccess;
    ncclResult_t asked = ncclCommGetAsyncError(comm, &state);
    result = asked != ncclSuccess ? asked : state;
  }
  return result == ncclSuccess ? "" : failure(result, call, line);
}

std::string NcclCommunicator::init(const ncclUniqueId &id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t result =
      ncclCommInitRankConfig(&comm, sizeValue, id, rankIndex, &config);
  if (std::string problem =
          check(result, "ncclCommInitRankConfig", __LINE__,
                std::max(timeout, kStartupTimeout));
      !problem.empty()) {
    return problem;
  }
  TAILOR_CUDA(cudaMalloc, reinterpret_cast<void **>(&scratch), sizeof(int));
  return "";
}

std::string NcclCommunicator::initSplit(ncclComm_t parent, int color, int key,
                                        bool &excluded) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t result = ncclCommSplit(parent, color, key, &comm, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    return failure(result, "ncclCommSplit", __LINE__);
  }
  // Nonblocking, the split is an operation of the parent: `comm` is filled
  // only once the parent leaves ncclInProgress (NVIDIA/nccl#1472; seen on
  // an H200: read earlier, it is null, as if this rank were left out).
  auto deadline = Clock::now() + std::chrono::duration<double>(
                                     std::max(timeout, kStartupTimeout));
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t asked = ncclCommGetAsyncError(parent, &state);
    if (asked != ncclSuccess || (state != ncclSuccess &&
                                 state != ncclInProgress)) {
      return failure(asked != ncclSuccess ? asked : state,
                     "ncclCommSplit (the parent's state)", __LINE__);
    }
    if (state == ncclSuccess) {
      break;
    }
    if (Clock::now() > deadline) {
      return prefix("split") + "ncclCommSplit did not finish in " +
             std::to_string(static_cast<int>(
                 std::max(timeout, kStartupTimeout))) +
             " s (a peer died or stopped answering)" + where(__LINE__);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // The new communicator may still be starting.
  if (std::string problem = check(comm ? ncclInProgress : ncclSuccess,
                                  "ncclCommSplit", __LINE__,
                                  std::max(timeout, kStartupTimeout));
      !problem.empty()) {
    return problem;
  }
  excluded = comm == nullptr;
  if (excluded) {
    return "";
  }
  TAILOR_NCCL(ncclCommCount, comm, &sizeValue);
  TAILOR_NCCL(ncclCommUserRank, comm, &rankIndex);
  TAILOR_CUDA(cudaMalloc, reinterpret_cast<void **>(&scratch), sizeof(int));
  return "";
}

ncclDataType_t NcclCommunicator::movedType(DType dtype, size_t &count) const {
  ncclDataType_t type = ncclUint8;
  if (!ncclType(dtype, type)) {
    count *= dtypeSize(dtype);
    type = ncclUint8;
  }
  return type;
}

std::string NcclCommunicator::reducedType(const char *what, DType dtype,
                                          ReduceOp op,
                                          ncclDataType_t &type) const {
  if (std::string problem = detail::checkReduction(dtype, op);
      !problem.empty()) {
    return prefix(what) + "cannot reduce " + problem;
  }
  if (!ncclType(dtype, type)) {
    return prefix(what) + "NCCL has no type to reduce " + dtypeName(dtype) +
           " elements in";
  }
  return "";
}

std::string NcclCommunicator::checkPeer(const char *what, int peer,
                                        const char *role) const {
  if (peer < 0 || peer >= sizeValue) {
    return prefix(what) + role + " " + std::to_string(peer) +
           " is not a rank of the group";
  }
  return "";
}

std::string NcclCommunicator::allReduce(const void *send, void *recv,
                                        size_t count, DType dtype, ReduceOp op,
                                        void *stream) {
  ncclDataType_t type;
  if (std::string problem = reducedType("allReduce", dtype, op, type);
      !problem.empty()) {
    return problem;
  }
  size_t bytes = count * dtypeSize(dtype);
  if (send != recv && detail::overlaps(send, bytes, recv, bytes)) {
    return prefix("allReduce") + "send and recv overlap without being the "
                                 "same buffer";
  }
  TAILOR_NCCL(ncclAllReduce, send, recv, count, type, ncclOp(op), comm,
              static_cast<cudaStream_t>(stream));
  countSent(detail::ringBytes(bytes, sizeValue, 2));
  return "";
}

std::string NcclCommunicator::reduceScatter(const void *send, void *recv,
                                            size_t recvCount, DType dtype,
                                            ReduceOp op, void *stream) {
  ncclDataType_t type;
  if (std::string problem = reducedType("reduceScatter", dtype, op, type);
      !problem.empty()) {
    return problem;
  }
  size_t blockBytes = recvCount * dtypeSize(dtype);
  auto cudaStream = static_cast<cudaStream_t>(stream);
  bool inPlace = send == recv;
  if (!inPlace &&
      detail::overlaps(send, blockBytes * sizeValue, recv, blockBytes)) {
    return prefix("reduceScatter") + "send and recv overlap without being "
                                     "the same buffer";
  }
  // In place (send == recv, as MPI's MPI_IN_PLACE): NCCL's in-place form
  // leaves the result in this rank's block, moved to the start after.
  void *target = inPlace ? static_cast<char *>(recv) + blockBytes * rankIndex
                         : recv;
  TAILOR_NCCL(ncclReduceScatter, send, target, recvCount, type, ncclOp(op),
              comm, cudaStream);
  if (target != recv) {
    TAILOR_CUDA(cudaMemcpyAsync, recv, target, blockBytes,
                cudaMemcpyDeviceToDevice, cudaStream);
  }
  countSent(detail::ringBytes(blockBytes * sizeValue, sizeValue, 1));
  return "";
}

std::string NcclCommunicator::allGather(const void *send, void *recv,
                                        size_t sendCount, DType dtype,
                                        void *stream) {
  size_t blockBytes = sendCount * dtypeSize(dtype);
  auto cudaStream = static_cast<cudaStream_t>(stream);
  char *ownBlock = static_cast<char *>(recv) + blockBytes * rankIndex;
  bool inPlace = send == ownBlock || send == recv;
  if (!inPlace &&
      detail::overlaps(send, blockBytes, recv, blockBytes * sizeValue)) {
    return prefix("allGather") + "send overlaps recv without being this "
                                 "rank's block of it or its start";
  }
  if (send == recv && send != ownBlock) {
    // Rank r > 0: block 0 and block r are disjoint.
    TAILOR_CUDA(cudaMemcpyAsync, ownBlock, send, blockBytes,
                cudaMemcpyDeviceToDevice, cudaStream);
  }
  size_t count = sendCount;
  ncclDataType_t type = movedType(dtype, count);
  TAILOR_NCCL(ncclAllGather, inPlace ? ownBlock : send, recv, count, type,
              comm, cudaStream);
  countSent(detail::ringBytes(blockBytes * sizeValue, sizeValue, 1));
  return "";
}

std::string NcclCommunicator::allToAll(const void *send, void *recv,
                                       size_t count, DType dtype,
                                       void *stream) {
  size_t blockBytes = count * dtypeSize(dtype);
  size_t totalBytes = blockBytes * static_cast<size_t>(sizeValue);
  if (detail::overlaps(send, totalBytes, recv, totalBytes)) {
    return prefix("allToAll") + "send and recv overlap";
  }
  // NCCL has no all-to-all call: one grouped send and receive per rank
  // (NCCL's own recipe), which NCCL runs as one operation.
  auto cudaStream = static_cast<cudaStream_t>(stream);
  size_t moved = count;
  ncclDataType_t type = movedType(dtype, moved);
  const auto *source = static_cast<const char *>(send);
  auto *target = static_cast<char *>(recv);
  TAILOR_NCCL(ncclGroupStart);
  for (int peer = 0; peer < sizeValue; ++peer) {
    size_t at = blockBytes * static_cast<size_t>(peer);
    std::string problem =
        check(ncclSend(source + at, moved, type, peer, comm, cudaStream),
              "ncclSend", __LINE__, timeout);
    if (problem.empty()) {
      problem = check(ncclRecv(target + at, moved, type, peer, comm,
                               cudaStream),
                      "ncclRecv", __LINE__, timeout);
    }
    if (!problem.empty()) {
      ncclGroupEnd();
      return problem;
    }
  }
  TAILOR_NCCL(ncclGroupEnd);
  countSent(detail::ringBytes(totalBytes, sizeValue, 1));
  return "";
}

std::string NcclCommunicator::broadcast(void *buffer, size_t count,
                                        DType dtype, int root, void *stream) {
  if (std::string problem = checkPeer("broadcast", root, "root");
      !problem.empty()) {
    return problem;
  }
  size_t bytes = count * dtypeSize(dtype);
  ncclDataType_t type = movedType(dtype, count);
  TAILOR_NCCL(ncclBroadcast, buffer, buffer, count, type, root, comm,
              static_cast<cudaStream_t>(stream));
  if (rankIndex == root && sizeValue > 1) {
    countSent(bytes);
  }
  return "";
}

std::string NcclCommunicator::send(const void *buffer, size_t count,
                                   DType dtype, int peer, void *stream) {
  if (std::string problem = checkPeer("send", peer, "peer");
      !problem.empty()) {
    return problem;
  }
  size_t bytes = count * dtypeSize(dtype);
  ncclDataType_t type = movedType(dtype, count);
  TAILOR_NCCL(ncclSend, buffer, count, type, peer, comm,
              static_cast<cudaStream_t>(stream));
  countSent(bytes);
  return "";
}

std::string NcclCommunicator::recv(void *buffer, size_t count, DType dtype,
                                   int peer, void *stream) {
  if (std::string problem = checkPeer("recv", peer, "peer");
      !problem.empty()) {
    return problem;
  }
  ncclDataType_t type = movedType(dtype, count);
  TAILOR_NCCL(ncclRecv, buffer, count, type, peer, comm,
              static_cast<cudaStream_t>(stream));
  return "";
}

std::string NcclCommunicator::barrier() {
  // NCCL has no barrier: an all-reduce of one int that every rank must
  // join, waited for.
  TAILOR_NCCL(ncclAllReduce, scratch, scratch, 1, ncclInt32, ncclSum, comm,
              nullptr);
  return synchronize(nullptr);
}

std::string NcclCommunicator::allReduceHost(const void *send, void *recv,
                                            size_t count, DType dtype,
                                            ReduceOp op) {
  ncclDataType_t type;
  if (std::string problem = reducedType("allReduceHost", dtype, op, type);
      !problem.empty()) {
    return problem;
  }
  size_t bytes = count * dtypeSize(dtype);
  if (std::string problem = stage(bytes); !problem.empty()) {
    return problem;
  }
  TAILOR_CUDA(cudaMemcpy, staging, send, bytes, cudaMemcpyHostToDevice);
  TAILOR_NCCL(ncclAllReduce, staging, staging, count, type, ncclOp(op), comm,
              nullptr);
  if (std::string problem = synchronize(nullptr); !problem.empty()) {
    return problem;
  }
  TAILOR_CUDA(cudaMemcpy, recv, staging, bytes, cudaMemcpyDeviceToHost);
  return "";
}

std::string NcclCommunicator::stage(size_t bytes) {
  if (bytes <= stagingBytes) {
    return "";
  }
  if (staging) {
    cudaFree(staging);
    staging = nullptr;
    stagingBytes = 0;
  }
  TAILOR_CUDA(cudaMalloc, &staging, bytes);
  stagingBytes = bytes;
  return "";
}

std::string NcclCommunicator::allGatherHost(const void *send, void *recv,
                                            size_t sendCount, DType dtype) {
  // A sharded state's chunk can be a large part of the GPU's memory, which
  // the plan has spent: the gather goes in pieces of at most 16 MiB a rank,
  // each in place in the staging memory, then out to its place in recv.
  constexpr size_t kPieceBytes = size_t(16) << 20;
  size_t element = dtypeSize(dtype);
  size_t piece =
      std::max<size_t>(1, std::min(sendCount, kPieceBytes / element));
  if (std::string problem = stage(piece * element * sizeValue);
      !problem.empty()) {
    return problem;
  }
  auto *staged = static_cast<char *>(staging);
  const auto *source = static_cast<const char *>(send);
  auto *target = static_cast<char *>(recv);
  for (size_t at = 0; at < sendCount; at += piece) {
    size_t count = std::min(piece, sendCount - at);
    size_t bytes = count * element;
    char *mine = staged + bytes * rankIndex;
    TAILOR_CUDA(cudaMemcpy, mine, source + at * element, bytes,
                cudaMemcpyHostToDevice);
    size_t moved = count;
    ncclDataType_t type = movedType(dtype, moved);
    TAILOR_NCCL(ncclAllGather, mine, staged, moved, type, comm, nullptr);
    if (std::string problem = synchronize(nullptr); !problem.empty()) {
      return problem;
    }
    for (int q = 0; q < sizeValue; ++q) {
      TAILOR_CUDA(cudaMemcpy,
                  target + (static_cast<size_t>(q) * sendCount + at) * element,
                  staged + bytes * static_cast<size_t>(q), bytes,
                  cudaMemcpyDeviceToHost);
    }
  }
  return "";
}

std::string NcclCommunicator::synchronize(void *stream) {
  auto cudaStream = static_cast<cudaStream_t>(stream);
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout);
  for (;;) {
    cudaError_t status = cudaStreamQuery(cudaStream);
    if (status == cudaSuccess) {
      return "";
    }
    if (status != cudaErrorNotReady) {
      return cudaFailure("cudaStreamQuery", rankIndex, status, __LINE__);
    }
    ncclResult_t state = ncclSuccess;
    ncclResult_t asked = ncclCommGetAsyncError(comm, &state);
    if (asked != ncclSuccess || (state != ncclSuccess &&
                                 state != ncclInProgress)) {
      return failure(asked != ncclSuccess ? asked : state,
                     "ncclCommGetAsyncError", __LINE__);
    }
    if (Clock::now() > deadline) {
      std::string text = prefix("synchronize") +
                         "collectives did not finish in " +
                         std::to_string(static_cast<int>(timeout)) +
                         " s (a peer died or stopped answering; "
                         "TAILOR_COMM_TIMEOUT sets the limit)" +
                         where(__LINE__);
      ncclCommAbort(comm);
      aborted = true;
      return text;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key,
                                                      std::string &error) {
  if (color < 0) {
    error = prefix("split") + "color " + std::to_string(color) +
            " is negative (every rank joins a group)";
    return nullptr;
  }
  auto part = std::make_unique<NcclCommunicator>(rankIndex, sizeValue,
                                                 timeout);
  bool excluded = false;
  error = part->initSplit(comm, color, key, excluded);
  if (error.empty() && excluded) {
    error = prefix("split") + "ncclCommSplit left this rank out";
  }
  if (!error.empty()) {
    return nullptr;
  }
  return part;
}

/// Hands rank 0's unique id to every rank; `mpi` keeps the MPI
/// communicator the id came through.
std::string shareUniqueId(const LaunchInfo &launch, ncclUniqueId &id,
                          std::unique_ptr<Communicator> &mpi, double timeout) {
  if (launch.worldSize == 1) {
    return "";
  }
  if (launch.launcher == "torchrun") {
    std::vector<uint8_t> bytes(sizeof(id.internal));
    std::memcpy(bytes.data(), id.internal, bytes.size());
    if (std::string problem =
            rendezvousBytes(launch, bytes, std::max(timeout, kStartupTimeout));
        !problem.empty()) {
      return problem;
    }
    std::memcpy(id.internal, bytes.data(), bytes.size());
    return "";
  }
  std::string error;
  mpi = createMpiCommunicator(launch, error);
  if (!mpi) {
    return "the NCCL id goes through MPI under " + describeLaunch(launch) +
           ": " + error;
  }
  return mpi->broadcast(id.internal, sizeof(id.internal), DType::U8, 0);
}

std::string createNccl(const LaunchInfo &launch,
                       std::unique_ptr<Communicator> &result) {
  double timeout = 0;
  if (std::string problem = detail::readTimeout(timeout); !problem.empty()) {
    return problem;
  }
  int rankIndex = launch.rank;
  int devices = 0;
  TAILOR_CUDA(cudaGetDeviceCount, &devices);
  if (launch.localRank >= devices) {
    return "rank " + std::to_string(rankIndex) + " is local rank " +
           std::to_string(launch.localRank) + " but this node has " +
           std::to_string(devices) + " GPU(s)";
  }
  TAILOR_CUDA(cudaSetDevice, launch.localRank);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rankIndex == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return std::string("ncclGetUniqueId failed on rank 0: ") +
             ncclGetErrorString(r) + where(__LINE__);
    }
  }
  std::unique_ptr<Communicator> mpi;
  if (std::string problem = shareUniqueId(launch, id, mpi, timeout);
      !problem.empty()) {
    return problem;
  }
  auto nccl = std::make_unique<NcclCommunicator>(launch.rank,
                                                 launch.worldSize, timeout);
  nccl->keepAlive(std::move(mpi));
  if (std::string problem = nccl->init(id); !problem.empty()) {
    return problem;
  }
  result = std::move(nccl);
  return "";
}

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(const LaunchInfo &launch,
                                                     std::string &error) {
  std::unique_ptr<Communicator> result;
  error = createNccl(launch, result);
  return error.empty() ? std::move(result) : nullptr;
}

} // namespace tailor::runtime::comm

#else // !TAILOR_ENABLE_CUDA

namespace tailor::runtime::comm {

std::unique_ptr<Communicator> createNcclCommunicator(const LaunchInfo &,
                                                     std::string &error) {
  error = "this tailor was built without CUDA (TAILOR_ENABLE_CUDA=OFF): no "
          "NCCL communicator; GPU plans need a CUDA build";
  return nullptr;
}

} // namespace tailor::runtime::comm

#endif // TAILOR_ENABLE_CUDA
