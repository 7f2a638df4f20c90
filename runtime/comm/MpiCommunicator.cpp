//===- MpiCommunicator.cpp - collectives over OpenMPI ---------------------===//
//
// Each Communicator call is one MPI call on a communicator of our own (a
// duplicate of MPI_COMM_WORLD, or a split of it) whose error handler is
// MPI_ERRORS_RETURN, so a failure comes back as a message naming the call,
// the rank and MPI_Error_string's text instead of aborting the job.
//
// MPI has no bf16 or fp16 type: those reduce through user operations
// (MPI_Op_create, MPI's own mechanism) over 2-byte elements, which widen
// each pair of operands to float, combine them and round back to nearest
// even, as NCCL's half-precision reductions do. The result therefore rounds
// once per combining step of MPI's algorithm; an average is the 16-bit sum
// scaled and rounded once more. Bool reduces as bytes: max is or, min is and.
//
// MPI does not promise to notice ranks that disagree on a collective's
// count, type or root: OpenMPI answers MPI_ERR_TRUNCATE on some ranks and
// leaves others waiting forever. So every collective first all-reduces its
// description (16 integers; microseconds next to a gradient bucket), and
// every rank returns an error when they differ, or when one of them found
// its arguments wrong: then no rank enters a collective the others skip.
//
// bytesSent counts the nominal bytes of the ring algorithms the plan's cost
// model assumes (Communicator.h), not what OpenMPI's own choice of
// algorithm (recursive doubling, binomial trees, ...) moves.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "runtime/comm/CommSupport.h"
#include "runtime/quant/Half.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

namespace tailor::runtime::comm {

namespace {

/// Communicators alive in this process; MPI is finalized when the last one
/// goes, if this library initialized it.
int liveCommunicators = 0;
bool initializedHere = false;

/// "<call> failed on rank R: <MPI's text> (runtime/comm/...:<line>)".
std::string mpiFailure(const char *call, int rank, int code, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    length = std::snprintf(text, sizeof(text), "MPI error %d", code);
  }
  return std::string(call) + " failed on rank " + std::to_string(rank) +
         ": " + std::string(text, static_cast<size_t>(length)) +
         " (runtime/comm/MpiCommunicator.cpp:" + std::to_string(line) + ")";
}

#define TAILOR_MPI(call, ...)                                                  \
  if (int code_ = call(__VA_ARGS__); code_ != MPI_SUCCESS) {                   \
    return mpiFailure(#call, rankIndex, code_, __LINE__);                      \
  }

/// Reduces 16-bit floats: widen, combine, round to nearest even.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float), int Op>
void reduceHalf(void *in, void *inout, int *length, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *length; ++i) {
    float x = Widen(a[i]), y = Widen(b[i]);
    float r = Op == 0 ? x + y : Op == 1 ? std::max(x, y) : std::min(x, y);
    // max/min of a NaN is NaN, as in NCCL and PyTorch.
    if (Op != 0 && (x != x || y != y)) {
      r = x != x ? x : y;
    }
    b[i] = Narrow(r);
  }
}

/// The user operations for bf16 and fp16, created once (MPI frees them at
/// MPI_Finalize).
struct HalfOps {
  MPI_Op bf16[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op fp16[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
};
HalfOps halfOps;

/// Creates the user operations (commutative) the first time.
int createHalfOps() {
  if (halfOps.bf16[0] != MPI_OP_NULL) {
    return MPI_SUCCESS;
  }
  using quant::bf16ToFloat, quant::floatToBf16, quant::fp16ToFloat,
      quant::floatToFp16;
  MPI_User_function *functions[2][3] = {
      {reduceHalf<bf16ToFloat, floatToBf16, 0>,
       reduceHalf<bf16ToFloat, floatToBf16, 1>,
       reduceHalf<bf16ToFloat, floatToBf16, 2>},
      {reduceHalf<fp16ToFloat, floatToFp16, 0>,
       reduceHalf<fp16ToFloat, floatToFp16, 1>,
       reduceHalf<fp16ToFloat, floatToFp16, 2>}};
  for (int i = 0; i < 3; ++i) {
    if (int code = MPI_Op_create(functions[0][i], 1, &halfOps.bf16[i]);
        code != MPI_SUCCESS) {
      return code;
    }
    if (int code = MPI_Op_create(functions[1][i], 1, &halfOps.fp16[i]);
        code != MPI_SUCCESS) {
      return code;
    }
  }
  return MPI_SUCCESS;
}

/// The MPI type elements of `dtype` travel as (bool as bytes, 16-bit
/// floats as 2-byte integers the user operations interpret).
MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::F16:
  case DType::BF16:
    return MPI_UINT16_T;
  case DType::I64:
    return MPI_INT64_T;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I16:
    return MPI_INT16_T;
  case DType::I8:
    return MPI_INT8_T;
  case DType::U8:
  case DType::Bool:
    return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

/// The MPI operation reducing `dtype` by `op` (Avg sums; the caller
/// scales).
MPI_Op mpiOp(DType dtype, ReduceOp op) {
  int index = op == ReduceOp::Max ? 1 : op == ReduceOp::Min ? 2 : 0;
  if (dtype == DType::BF16) {
    return halfOps.bf16[index];
  }
  if (dtype == DType::F16) {
    return halfOps.fp16[index];
  }
  MPI_Op ops[3] = {MPI_SUM, MPI_MAX, MPI_MIN};
  return ops[index];
}

/// Divides `count` elements by `divisor` (an average's last step).
void scale(void *data, size_t count, DType dtype, int divisor) {
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

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(MPI_Comm comm, int rank, int size)
      : comm(comm), rankIndex(rank), sizeValue(size) {
    ++liveCommunicators;
  }
  ~MpiCommunicator() override;

  int rank() const override { return rankIndex; }
  int size() const override { return sizeValue; }
  const char *backend() const override { return "mpi"; }

  std::string allReduce(const void *send, void *recv, size_t count,
                        DType dtype, ReduceOp op, void *stream) override;
  std::string reduceScatter(const void *send, void *recv, size_t recvCount,
                            DType dtype, ReduceOp op, void *stream) override;
  std::string allGather(const void *send, void *recv, size_t sendCount,
                        DType dtype, void *stream) override;
  std::string broadcast(void *buffer, size_t count, DType dtype, int root,
                        void *stream) override;
  std::string send(const void *buffer, size_t count, DType dtype, int peer,
                   void *stream) override;
  std::string recv(void *buffer, size_t count, DType dtype, int peer,
                   void *stream) override;
  std::string barrier() override;
  std::unique_ptr<Communicator> split(int color, int key,
                                      std::string &error) override;

private:
  /// "" or why `count` elements cannot go through one MPI call (MPI counts
  /// are ints).
  std::string checkCount(const char *what, size_t count) const;
  std::string checkPeer(const char *what, int peer, const char *role) const;
  /// "" when every rank calls `what` with the same count, dtype, op and
  /// root and none found a `problem` of its own; else an error on every
  /// rank (a rank's own problem, or what differs).
  std::string agree(const char *what, size_t count, DType dtype, int op,
                    int root, const std::string &problem);
  std::string prefix(const char *what) const {
    return std::string(what) + " on rank " + std::to_string(rankIndex) +
           " of " + std::to_string(sizeValue) + ": ";
  }

  MPI_Comm comm;
  int rankIndex;
  int sizeValue;
};

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MPI_Comm_free(&comm);
  }
  if (--liveCommunicators == 0 && initializedHere && !finalized) {
    MPI_Finalize();
  }
}

std::string MpiCommunicator::checkCount(const char *what, size_t count) const {
  if (count > static_cast<size_t>(INT_MAX)) {
    return prefix(what) + std::to_string(count) +
           " elements exceed MPI's int count; split the buffer";
  }
  return "";
}

std::string MpiCommunicator::checkPeer(const char *what, int peer,
                                       const char *role) const {
  if (peer < 0 || peer >= sizeValue) {
    return prefix(what) + role + " " + std::to_string(peer) +
           " is not a rank of the group";
  }
  return "";
}

std::string MpiCommunicator::agree(const char *what, size_t count,
                                   DType dtype, int op, int root,
                                   const std::string &problem) {
  if (sizeValue == 1) {
    return problem;
  }
  constexpr int kFields = 5;
  const char *names[kFields] = {"element count", "dtype", "operation", "root",
                                ""};
  int64_t mine[kFields] = {static_cast<int64_t>(count),
                           static_cast<int64_t>(dtype), op, root,
                           problem.empty() ? 0 : 1};
  // One MPI_MAX over (x, -x) gives every field's maximum and minimum.
  int64_t both[2 * kFields], extremes[2 * kFields];
  for (int i = 0; i < kFields; ++i) {
    both[i] = mine[i];
    both[kFields + i] = -mine[i];
  }
  TAILOR_MPI(MPI_Allreduce, both, extremes, 2 * kFields, MPI_INT64_T, MPI_MAX,
             comm);
  if (!problem.empty()) {
    return problem;
  }
  for (int i = 0; i + 1 < kFields; ++i) {
    int64_t high = extremes[i], low = -extremes[kFields + i];
    if (high != low) {
      return prefix(what) + "the ranks disagree on the " + names[i] +
             " (this rank " + std::to_string(mine[i]) + ", others from " +
             std::to_string(low) + " to " + std::to_string(high) + ")";
    }
  }
  if (extremes[kFields - 1] != 0) {
    return prefix(what) + "another rank's call failed its checks (its "
                          "error says why)";
  }
  return "";
}

std::string MpiCommunicator::allReduce(const void *send, void *recv,
                                       size_t count, DType dtype, ReduceOp op,
                                       void *) {
  size_t bytes = count * dtypeSize(dtype);
  bool inPlace = send == recv;
  std::string problem = detail::checkReduction(dtype, op);
  if (!problem.empty()) {
    problem = prefix("allReduce") + "cannot reduce " + problem;
  } else if (problem = checkCount("allReduce", count); problem.empty() &&
             !inPlace && detail::overlaps(send, bytes, recv, bytes)) {
    problem = prefix("allReduce") + "send and recv overlap without being "
                                    "the same buffer";
  }
  if (std::string error = agree("allReduce", count, dtype,
                                static_cast<int>(op), 0, problem);
      !error.empty()) {
    return error;
  }
  TAILOR_MPI(MPI_Allreduce, inPlace ? MPI_IN_PLACE : send, recv,
             static_cast<int>(count), mpiType(dtype), mpiOp(dtype, op), comm);
  if (op == ReduceOp::Avg) {
    scale(recv, count, dtype, sizeValue);
  }
  countSent(detail::ringBytes(bytes, sizeValue, 2));
  return "";
}

std::string MpiCommunicator::reduceScatter(const void *send, void *recv,
                                           size_t recvCount, DType dtype,
                                           ReduceOp op, void *) {
  size_t blockBytes = recvCount * dtypeSize(dtype);
  bool inPlace = send == recv;
  std::string problem = detail::checkReduction(dtype, op);
  if (!problem.empty()) {
    problem = prefix("reduceScatter") + "cannot reduce " + problem;
  } else if (problem = checkCount("reduceScatter",
                                  recvCount * static_cast<size_t>(sizeValue));
             problem.empty() && !inPlace &&
             detail::overlaps(send, blockBytes * sizeValue, recv,
                              blockBytes)) {
    problem = prefix("reduceScatter") + "send and recv overlap without "
                                        "being the same buffer";
  }
  if (std::string error = agree("reduceScatter", recvCount, dtype,
                                static_cast<int>(op), 0, problem);
      !error.empty()) {
    return error;
  }
  // In place, MPI reads the whole input from recv and leaves this rank's
  // block at its start.
  TAILOR_MPI(MPI_Reduce_scatter_block, inPlace ? MPI_IN_PLACE : send, recv,
             static_cast<int>(recvCount), mpiType(dtype), mpiOp(dtype, op),
             comm);
  if (op == ReduceOp::Avg) {
    scale(recv, recvCount, dtype, sizeValue);
  }
  countSent(detail::ringBytes(blockBytes * sizeValue, sizeValue, 1));
  return "";
}

std::string MpiCommunicator::allGather(const void *send, void *recv,
                                       size_t sendCount, DType dtype, void *) {
  size_t blockBytes = sendCount * dtypeSize(dtype);
  char *ownBlock = static_cast<char *>(recv) + blockBytes * rankIndex;
  // In place is MPI's (and NCCL's) form, this rank's block already at its
  // place in recv, or send == recv: the block at recv's start, moved to its
  // place first (the blocks are disjoint unless this is rank 0).
  bool inPlace = send == ownBlock || send == recv;
  std::string problem =
      checkCount("allGather", sendCount * static_cast<size_t>(sizeValue));
  if (problem.empty() && !inPlace &&
      detail::overlaps(send, blockBytes, recv, blockBytes * sizeValue)) {
    problem = prefix("allGather") + "send overlaps recv without being this "
                                    "rank's block of it or its start";
  }
  if (std::string error = agree("allGather", sendCount, dtype, -1, 0, problem);
      !error.empty()) {
    return error;
  }
  if (send == recv && send != ownBlock) {
    std::memmove(ownBlock, send, blockBytes);
  }
  TAILOR_MPI(MPI_Allgather, inPlace ? MPI_IN_PLACE : send,
             static_cast<int>(sendCount), mpiType(dtype), recv,
             static_cast<int>(sendCount), mpiType(dtype), comm);
  countSent(detail::ringBytes(blockBytes * sizeValue, sizeValue, 1));
  return "";
}

std::string MpiCommunicator::broadcast(void *buffer, size_t count, DType dtype,
                                       int root, void *) {
  std::string problem = checkPeer("broadcast", root, "root");
  if (problem.empty()) {
    problem = checkCount("broadcast", count);
  }
  if (std::string error = agree("broadcast", count, dtype, -1, root, problem);
      !error.empty()) {
    return error;
  }
  TAILOR_MPI(MPI_Bcast, buffer, static_cast<int>(count), mpiType(dtype), root,
             comm);
  if (rankIndex == root && sizeValue > 1) {
    countSent(count * dtypeSize(dtype));
  }
  return "";
}

std::string MpiCommunicator::send(const void *buffer, size_t count,
                                  DType dtype, int peer, void *) {
  if (std::string problem = checkPeer("send", peer, "peer");
      !problem.empty()) {
    return problem;
  }
  if (std::string problem = checkCount("send", count); !problem.empty()) {
    return problem;
  }
  TAILOR_MPI(MPI_Send, buffer, static_cast<int>(count), mpiType(dtype), peer,
             0, comm);
  countSent(count * dtypeSize(dtype));
  return "";
}

std::string MpiCommunicator::recv(void *buffer, size_t count, DType dtype,
                                  int peer, void *) {
  if (std::string problem = checkPeer("recv", peer, "peer");
      !problem.empty()) {
    return problem;
  }
  if (std::string problem = checkCount("recv", count); !problem.empty()) {
    return problem;
  }
  MPI_Status status;
  TAILOR_MPI(MPI_Recv, buffer, static_cast<int>(count), mpiType(dtype), peer,
             0, comm, &status);
  int received = 0;
  MPI_Get_count(&status, mpiType(dtype), &received);
  if (static_cast<size_t>(received) != count) {
    return prefix("recv") + "expected " + std::to_string(count) +
           " elements from rank " + std::to_string(peer) + ", got " +
           std::to_string(received);
  }
  return "";
}

std::string MpiCommunicator::barrier() {
  TAILOR_MPI(MPI_Barrier, comm);
  return "";
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key,
                                                     std::string &error) {
  if (color < 0) {
    error = prefix("split") + "color " + std::to_string(color) +
            " is negative (every rank joins a group)";
    return nullptr;
  }
  MPI_Comm part = MPI_COMM_NULL;
  int partRank = 0, partSize = 0;
  auto attempt = [&]() -> std::string {
    TAILOR_MPI(MPI_Comm_split, comm, color, key, &part);
    TAILOR_MPI(MPI_Comm_set_errhandler, part, MPI_ERRORS_RETURN);
    TAILOR_MPI(MPI_Comm_rank, part, &partRank);
    TAILOR_MPI(MPI_Comm_size, part, &partSize);
    return "";
  };
  error = attempt();
  if (!error.empty()) {
    if (part != MPI_COMM_NULL) {
      MPI_Comm_free(&part);
    }
    return nullptr;
  }
  return std::make_unique<MpiCommunicator>(part, partRank, partSize);
}

/// Initializes MPI if nobody has; "" or why it cannot.
std::string startMpi(int rankIndex) {
  int initialized = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return "MPI was finalized already (the last communicator of this "
           "process went away, and MPI starts once per process)";
  }
  MPI_Initialized(&initialized);
  if (initialized) {
    return "";
  }
  int provided = 0;
  TAILOR_MPI(MPI_Init_thread, nullptr, nullptr, MPI_THREAD_FUNNELED,
             &provided);
  initializedHere = true;
  // Failures outside our communicators (MPI_Op_create, say) report on
  // MPI_COMM_WORLD: make them return too.
  TAILOR_MPI(MPI_Comm_set_errhandler, MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < MPI_THREAD_FUNNELED) {
    return "MPI_Init_thread provides thread level " +
           std::to_string(provided) + ", below MPI_THREAD_FUNNELED";
  }
  return "";
}

} // namespace

std::unique_ptr<Communicator> createMpiCommunicator(const LaunchInfo &launch,
                                                    std::string &error) {
  int rankIndex = launch.rank;
  error = startMpi(rankIndex);
  if (!error.empty()) {
    return nullptr;
  }
  MPI_Comm comm = MPI_COMM_NULL;
  int worldRank = 0, worldSize = 0;
  auto attempt = [&]() -> std::string {
    TAILOR_MPI(MPI_Comm_dup, MPI_COMM_WORLD, &comm);
    TAILOR_MPI(MPI_Comm_set_errhandler, comm, MPI_ERRORS_RETURN);
    TAILOR_MPI(MPI_Comm_rank, comm, &worldRank);
    TAILOR_MPI(MPI_Comm_size, comm, &worldSize);
    if (int code = createHalfOps(); code != MPI_SUCCESS) {
      return mpiFailure("MPI_Op_create", rankIndex, code, __LINE__);
    }
    return "";
  };
  error = attempt();
  std::unique_ptr<Communicator> result;
  if (comm != MPI_COMM_NULL) {
    // Owns the duplicate (and counts towards finalizing) from here on.
    result = std::make_unique<MpiCommunicator>(comm, worldRank, worldSize);
  }
  if (error.empty() &&
      (worldRank != launch.rank || worldSize != launch.worldSize)) {
    error = "MPI_COMM_WORLD has rank " + std::to_string(worldRank) + " of " +
            std::to_string(worldSize) + " but the launch (" +
            describeLaunch(launch) + ") says rank " +
            std::to_string(launch.rank) + " of " +
            std::to_string(launch.worldSize) +
            " (was this process started by another MPI's mpirun?)";
  }
  if (!error.empty()) {
    return nullptr;
  }
  return result;
}

} // namespace tailor::runtime::comm
