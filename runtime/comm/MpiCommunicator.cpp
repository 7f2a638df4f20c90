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
// start() runs the same checks and agreement, blocking, then the
// nonblocking MPI_I* call, and hands back a PendingCollective over its
// request. The agreement stays blocking on purpose: it must be over on every
// rank before any rank enters the data collective, since a collective the
// ranks entered with different counts hangs or truncates at completion, and
// then its error would never be reported. Agreeing nonblockingly and
// starting the data call once that completes would need every rank to start
// its collectives in one order on the communicator whichever agreement
// happened to finish first, which per-request polling cannot promise. The
// price is one all-reduce of 16 integers per collective, taken where the
// ranks run the same program in step anyway. The agreement also compares
// the form (blocking or started): MPI never matches the two.
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

/// What is left once a collective's data has moved: scaling an average,
/// and counting the bytes it sent.
struct Completion {
  void *averaged = nullptr; // null unless the reduction was Avg
  size_t count = 0;
  DType dtype = DType::F32;
  uint64_t bytes = 0;
};

class MpiCommunicator;

/// A collective started with an MPI_I* call: its request, and the
/// completion step it runs once, when MPI_Test or MPI_Wait finds it done.
class MpiPending final : public PendingCollective {
public:
  MpiPending(MpiCommunicator &owner, const char *call, MPI_Request request,
             const Completion &completion)
      : owner(owner), call(call), request(request), completion(completion) {}
  ~MpiPending() override;
  std::string test(bool &done) override;
  std::string wait() override;

private:
  /// Records the outcome of MPI_Test or MPI_Wait, the first time it says
  /// the request is over (or failed).
  void settle(const char *how, int code, bool over, int line);

  MpiCommunicator &owner;
  const char *call;
  MPI_Request request;
  Completion completion;
  bool finished = false;
  std::string result;
};

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
  std::string allToAll(const void *send, void *recv, size_t count,
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
  std::string start(const CollectiveCall &call,
                    std::unique_ptr<PendingCollective> &pending) override;

  /// Scales an average and counts the bytes: the last step of every
  /// collective, blocking or started.
  void complete(const Completion &completion);
  std::string prefix(const char *what) const {
    return std::string(what) + " on rank " + std::to_string(rankIndex) +
           " of " + std::to_string(sizeValue) + ": ";
  }

private:
  /// The checks and the agreement of each collective (`started`: the
  /// nonblocking form), shared by the blocking calls and start(): "" when
  /// every rank may enter it, with what completing it takes in
  /// `completion`.
  std::string admitAllReduce(const void *send, void *recv, size_t count,
                             DType dtype, ReduceOp op, bool started,
                             Completion &completion);
  std::string admitReduceScatter(const void *send, void *recv,
                                 size_t recvCount, DType dtype, ReduceOp op,
                                 bool started, Completion &completion);
  /// Also moves a block given at recv's start to this rank's place.
  std::string admitAllGather(const void *send, void *recv, size_t sendCount,
                             DType dtype, bool started, bool &inPlace,
                             Completion &completion);
  std::string admitAllToAll(const void *send, void *recv, size_t count,
                            DType dtype, bool started, Completion &completion);
  std::string admitBroadcast(void *buffer, size_t count, DType dtype,
                             int root, bool started, Completion &completion);

  /// "" or why `count` elements cannot go through one MPI call (MPI counts
  /// are ints).
  std::string checkCount(const char *what, size_t count) const;
  std::string checkPeer(const char *what, int peer, const char *role) const;
  /// "" when every rank calls `what` with the same count, dtype, op and
  /// root and none found a `problem` of its own; else an error on every
  /// rank (a rank's own problem, or what differs).
  std::string agree(const char *what, size_t count, DType dtype, int op,
                    int root, bool started, const std::string &problem);

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
                                   bool started, const std::string &problem) {
  if (sizeValue == 1) {
    return problem;
  }
  detail::Agreement agreement(
      {{"element count", static_cast<int64_t>(count)},
       {"dtype", static_cast<int64_t>(dtype)},
       {"operation", op},
       {"root", root},
       {"form (0 blocking, 1 started nonblocking)", started ? 1 : 0}},
      !problem.empty());
  TAILOR_MPI(MPI_Allreduce, MPI_IN_PLACE, agreement.extremes(),
             agreement.count(), MPI_INT64_T, MPI_MAX, comm);
  return problem.empty() ? agreement.verdict(prefix(what)) : problem;
}

void MpiCommunicator::complete(const Completion &completion) {
  if (completion.averaged) {
    detail::divideElements(completion.averaged, completion.count,
                           completion.dtype, sizeValue);
  }
  countSent(completion.bytes);
}

std::string MpiCommunicator::admitAllReduce(const void *send, void *recv,
                                            size_t count, DType dtype,
                                            ReduceOp op, bool started,
                                            Completion &completion) {
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
  completion = {op == ReduceOp::Avg ? recv : nullptr, count, dtype,
                detail::ringBytes(bytes, sizeValue, 2)};
  return agree("allReduce", count, dtype, static_cast<int>(op), 0, started,
               problem);
}

std::string MpiCommunicator::allReduce(const void *send, void *recv,
                                       size_t count, DType dtype, ReduceOp op,
                                       void *) {
  Completion completion;
  if (std::string error =
          admitAllReduce(send, recv, count, dtype, op, false, completion);
      !error.empty()) {
    return error;
  }
  TAILOR_MPI(MPI_Allreduce, send == recv ? MPI_IN_PLACE : send, recv,
             static_cast<int>(count), mpiType(dtype), mpiOp(dtype, op), comm);
  complete(completion);
  return "";
}

std::string MpiCommunicator::admitReduceScatter(const void *send, void *recv,
                                                size_t recvCount, DType dtype,
                                                ReduceOp op, bool started,
                                                Completion &completion) {
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
  completion = {op == ReduceOp::Avg ? recv : nullptr, recvCount, dtype,
                detail::ringBytes(blockBytes * sizeValue, sizeValue, 1)};
  return agree("reduceScatter", recvCount, dtype, static_cast<int>(op), 0,
               started, problem);
}

std::string MpiCommunicator::reduceScatter(const void *send, void *recv,
                                           size_t recvCount, DType dtype,
                                           ReduceOp op, void *) {
  Completion completion;
  if (std::string error = admitReduceScatter(send, recv, recvCount, dtype, op,
                                             false, completion);
      !error.empty()) {
    return error;
  }
  // In place, MPI reads the whole input from recv and leaves this rank's
  // block at its start.
  TAILOR_MPI(MPI_Reduce_scatter_block, send == recv ? MPI_IN_PLACE : send,
             recv, static_cast<int>(recvCount), mpiType(dtype),
             mpiOp(dtype, op), comm);
  complete(completion);
  return "";
}

std::string MpiCommunicator::admitAllGather(const void *send, void *recv,
                                            size_t sendCount, DType dtype,
                                            bool started, bool &inPlace,
                                            Completion &completion) {
  size_t blockBytes = sendCount * dtypeSize(dtype);
  char *ownBlock = static_cast<char *>(recv) + blockBytes * rankIndex;
  // In place is MPI's (and NCCL's) form, this rank's block already at its
  // place in recv, or send == recv: the block at recv's start, moved to its
  // place first (the blocks are disjoint unless this is rank 0).
  inPlace = send == ownBlock || send == recv;
  std::string problem =
      checkCount("allGather", sendCount * static_cast<size_t>(sizeValue));
  if (problem.empty() && !inPlace &&
      detail::overlaps(send, blockBytes, recv, blockBytes * sizeValue)) {
    problem = prefix("allGather") + "send overlaps recv without being this "
                                    "rank's block of it or its start";
  }
  completion = {nullptr, 0, dtype,
                detail::ringBytes(blockBytes * sizeValue, sizeValue, 1)};
  if (std::string error =
          agree("allGather", sendCount, dtype, -1, 0, started, problem);
      !error.empty()) {
    return error;
  }
  if (send == recv && send != ownBlock) {
    std::memmove(ownBlock, send, blockBytes);
  }
  return "";
}

std::string MpiCommunicator::allGather(const void *send, void *recv,
                                       size_t sendCount, DType dtype, void *) {
  Completion completion;
  bool inPlace = false;
  if (std::string error = admitAllGather(send, recv, sendCount, dtype, false,
                                         inPlace, completion);
      !error.empty()) {
    return error;
  }
  TAILOR_MPI(MPI_Allgather, inPlace ? MPI_IN_PLACE : send,
             static_cast<int>(sendCount), mpiType(dtype), recv,
             static_cast<int>(sendCount), mpiType(dtype), comm);
  complete(completion);
  return "";
}

std::string MpiCommunicator::admitAllToAll(const void *send, void *recv,
                                           size_t count, DType dtype,
                                           bool started,
                                           Completion &completion) {
  size_t totalBytes = count * dtypeSize(dtype) * static_cast<size_t>(sizeValue);
  std::string problem =
      checkCount("allToAll", count * static_cast<size_t>(sizeValue));
  if (problem.empty() &&
      detail::overlaps(send, totalBytes, recv, totalBytes)) {
    problem = prefix("allToAll") + "send and recv overlap";
  }
  completion = {nullptr, 0, dtype,
                detail::ringBytes(totalBytes, sizeValue, 1)};
  return agree("allToAll", count, dtype, -1, 0, started, problem);
}

std::string MpiCommunicator::allToAll(const void *send, void *recv,
                                      size_t count, DType dtype, void *) {
  Completion completion;
  if (std::string error =
          admitAllToAll(send, recv, count, dtype, false, completion);
      !error.empty()) {
    return error;
  }
  TAILOR_MPI(MPI_Alltoall, send, static_cast<int>(count), mpiType(dtype),
             recv, static_cast<int>(count), mpiType(dtype), comm);
  complete(completion);
  return "";
}

std::string MpiCommunicator::admitBroadcast(void *, size_t count, DType dtype,
                                            int root, bool started,
                                            Completion &completion) {
  std::string problem = checkPeer("broadcast", root, "root");
  if (problem.empty()) {
    problem = checkCount("broadcast", count);
  }
  completion = {nullptr, 0, dtype,
                rankIndex == root && sizeValue > 1 ? count * dtypeSize(dtype)
                                                   : 0};
  return agree("broadcast", count, dtype, -1, root, started, problem);
}

std::string MpiCommunicator::broadcast(void *buffer, size_t count, DType dtype,
                                       int root, void *) {
  Completion completion;
  if (std::string error =
          admitBroadcast(buffer, count, dtype, root, false, completion);
      !error.empty()) {
    return error;
  }
  TAILOR_MPI(MPI_Bcast, buffer, static_cast<int>(count), mpiType(dtype), root,
             comm);
  complete(completion);
  return "";
}

std::string MpiCommunicator::start(const CollectiveCall &call,
                                   std::unique_ptr<PendingCollective> &pending) {
  pending.reset();
  Completion completion;
  MPI_Request request = MPI_REQUEST_NULL;
  const char *name = "";
  std::string error;
  MPI_Datatype type = mpiType(call.dtype);
  MPI_Op op = mpiOp(call.dtype, call.op);
  switch (call.kind) {
  case CollectiveKind::AllReduce:
    name = "allReduce";
    error = admitAllReduce(call.input, call.output, call.inputElements,
                           call.dtype, call.op, true, completion);
    if (error.empty()) {
      TAILOR_MPI(MPI_Iallreduce,
                 call.input == call.output ? MPI_IN_PLACE : call.input,
                 call.output, static_cast<int>(call.inputElements), type, op,
                 comm, &request);
    }
    break;
  case CollectiveKind::ReduceScatter:
    name = "reduceScatter";
    error = admitReduceScatter(call.input, call.output, call.outputElements,
                               call.dtype, call.op, true, completion);
    if (error.empty()) {
      TAILOR_MPI(MPI_Ireduce_scatter_block,
                 call.input == call.output ? MPI_IN_PLACE : call.input,
                 call.output, static_cast<int>(call.outputElements), type, op,
                 comm, &request);
    }
    break;
  case CollectiveKind::AllGather: {
    name = "allGather";
    bool inPlace = false;
    error = admitAllGather(call.input, call.output, call.inputElements,
                           call.dtype, true, inPlace, completion);
    if (error.empty()) {
      TAILOR_MPI(MPI_Iallgather, inPlace ? MPI_IN_PLACE : call.input,
                 static_cast<int>(call.inputElements), type, call.output,
                 static_cast<int>(call.inputElements), type, comm, &request);
    }
    break;
  }
  case CollectiveKind::AllToAll: {
    name = "allToAll";
    size_t count = call.inputElements / static_cast<size_t>(sizeValue);
    if (call.inputElements % static_cast<size_t>(sizeValue) != 0 ||
        call.outputElements != call.inputElements) {
      error = prefix("allToAll") + std::to_string(call.inputElements) +
              " elements to " + std::to_string(call.outputElements) +
              " do not split into one block per rank";
      break;
    }
    error = admitAllToAll(call.input, call.output, count, call.dtype, true,
                          completion);
    if (error.empty()) {
      TAILOR_MPI(MPI_Ialltoall, call.input, static_cast<int>(count), type,
                 call.output, static_cast<int>(count), type, comm, &request);
    }
    break;
  }
  case CollectiveKind::Broadcast:
    name = "broadcast";
    error = admitBroadcast(call.output, call.outputElements, call.dtype,
                           call.root, true, completion);
    if (error.empty()) {
      TAILOR_MPI(MPI_Ibcast, call.output,
                 static_cast<int>(call.outputElements), type, call.root, comm,
                 &request);
    }
    break;
  case CollectiveKind::Send:
    name = "send";
    error = checkPeer("send", call.root, "peer");
    if (error.empty()) {
      error = checkCount("send", call.inputElements);
    }
    if (error.empty()) {
      TAILOR_MPI(MPI_Isend, call.input, static_cast<int>(call.inputElements),
                 type, call.root, 0, comm, &request);
      countSent(call.inputElements * dtypeSize(call.dtype));
    }
    break;
  case CollectiveKind::Recv:
    name = "recv";
    error = checkPeer("recv", call.root, "peer");
    if (error.empty()) {
      error = checkCount("recv", call.outputElements);
    }
    if (error.empty()) {
      TAILOR_MPI(MPI_Irecv, call.output, static_cast<int>(call.outputElements),
                 type, call.root, 0, comm, &request);
    }
    break;
  }
  if (*name == '\0') {
    return prefix("start") + "unknown collective kind " +
           std::to_string(static_cast<int>(call.kind));
  }
  if (!error.empty()) {
    return error;
  }
  pending = std::make_unique<MpiPending>(*this, name, request, completion);
  return "";
}

MpiPending::~MpiPending() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finished && !finalized) {
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
}

void MpiPending::settle(const char *how, int code, bool over, int line) {
  if (code != MPI_SUCCESS) {
    // The request's state is unknown after a failure: it is not waited for
    // again (a hang would hide this error).
    finished = true;
    result = owner.prefix(call) + "the started collective did not complete: " +
             mpiFailure(how, owner.rank(), code, line);
    return;
  }
  if (over) {
    finished = true;
    owner.complete(completion);
  }
}

std::string MpiPending::test(bool &done) {
  if (!finished) {
    int flag = 0;
    int code = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    settle("MPI_Test", code, flag != 0, __LINE__);
  }
  done = finished;
  return finished ? result : "";
}

std::string MpiPending::wait() {
  if (!finished) {
    int code = MPI_Wait(&request, MPI_STATUS_IGNORE);
    settle("MPI_Wait", code, true, __LINE__);
  }
  return result;
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
