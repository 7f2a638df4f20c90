//===- GlooCommunicator.cpp - CPU collectives over Gloo under torchrun ----===//
//
// CPU ranks launched by torchrun have no MPI job around them (OpenMPI joins
// separately started processes only through an ompi-server, and then hangs
// in MPI_Finalize), so they communicate through Gloo, the collective
// library PyTorch's own CPU backend uses (Debian's libgloo). Gloo's TCP
// pairs connect through a key-value store; ours is filled by one exchange:
// each rank sets its own addresses, and the first wait all-gathers every
// rank's entries, over the torchrun rendezvous (Rendezvous.h) for the
// world and over the parent communicator for a split.
//
// As with MPI, every collective first all-reduces its description (count,
// dtype, operation, root) so that ranks that disagree, or a rank whose
// arguments failed their checks, return an error instead of entering a
// collective the others skip. Gloo's exceptions (a peer that closed its
// connection, a timeout) become errors naming the call and the rank; the
// timeout is TAILOR_COMM_TIMEOUT (45 s by default).
//
// Gloo's current API has no reduce-scatter: it is an all-reduce of the
// whole input of which this rank keeps its block, which moves twice what a
// ring reduce-scatter would. bf16 and fp16 reduce through reduction
// functions that widen to float and round back, as the MPI communicator's
// operations do. bytesSent counts the nominal ring bytes of the plan's
// cost model (Communicator.h), as for MPI.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "runtime/comm/CommSupport.h"
#include "runtime/comm/Rendezvous.h"
#include "runtime/quant/Half.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

namespace tailor::runtime::comm {

namespace {

/// How long the first connection may take (ranks start at different
/// times; torchrun starts them together, a slow node may not).
constexpr double kStartupTimeout = 300;

/// The slot of point-to-point messages, apart from every collective's
/// (Gloo's collectives build theirs from prefixes 0x01..0x08).
constexpr uint64_t kPointToPointSlot = 0x7a00000000000000ull;

using Entries = std::vector<std::vector<uint8_t>>;

/// Gives every rank of a group every rank's entry (this rank's is `mine`):
/// the torchrun rendezvous for the world, an all-gather over the parent
/// for a split. "" or why not.
using Exchange =
    std::function<std::string(std::vector<uint8_t> mine, Entries &all)>;

/// A Gloo context whose TCP pairs connect after one exchange of addresses
/// (what gloo::rendezvous::Context::connectFullMesh does through a
/// key-value store, in two rounds of keys this library's version sets and
/// waits for, which no store of ours would need to serve).
class MeshContext final : public gloo::Context {
public:
  using gloo::Context::Context;

  /// Creates a pair per peer on `device`, exchanges their addresses and
  /// connects each; throws what Gloo throws.
  void connect(const Exchange &exchange,
               const std::shared_ptr<gloo::transport::Device> &device) {
    auto pairs = device->createContext(rank, size);
    pairs->setTimeout(getTimeout());
    // This rank's entry: the address of its pair with each peer, in rank
    // order, every address Gloo's fixed size.
    std::vector<uint8_t> mine;
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) {
        std::vector<char> address = pairs->createPair(peer)->address().bytes();
        mine.insert(mine.end(), address.begin(), address.end());
      }
    }
    Entries all;
    if (std::string problem = exchange(mine, all); !problem.empty()) {
      throw std::runtime_error(problem);
    }
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) {
        continue;
      }
      const std::vector<uint8_t> &theirs = all[static_cast<size_t>(peer)];
      size_t each = theirs.size() / static_cast<size_t>(size - 1);
      if (each == 0 || theirs.size() % static_cast<size_t>(size - 1) != 0) {
        throw std::runtime_error("rank " + std::to_string(peer) + " sent " +
                                 std::to_string(theirs.size()) +
                                 " address bytes for " +
                                 std::to_string(size - 1) + " peers");
      }
      // Peers list their pairs in rank order, skipping themselves.
      size_t slot = static_cast<size_t>(rank < peer ? rank : rank - 1);
      pairs->getPair(peer)->connect(std::vector<char>(
          theirs.begin() + static_cast<std::ptrdiff_t>(slot * each),
          theirs.begin() + static_cast<std::ptrdiff_t>((slot + 1) * each)));
    }
    device_ = device;
    transportContext_ = std::move(pairs);
  }
};

/// c = a op b over `n` elements of T.
template <typename T, int Op>
void combine(void *c, const void *a, const void *b, size_t n) {
  auto *out = static_cast<T *>(c);
  const auto *x = static_cast<const T *>(a);
  const auto *y = static_cast<const T *>(b);
  for (size_t i = 0; i < n; ++i) {
    out[i] = Op == 0 ? static_cast<T>(x[i] + y[i])
                     : (Op == 1 ? std::max(x[i], y[i]) : std::min(x[i], y[i]));
  }
}

/// The same over 16-bit floats, widened to float and rounded back.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float), int Op>
void combineHalf(void *c, const void *a, const void *b, size_t n) {
  auto *out = static_cast<uint16_t *>(c);
  const auto *x = static_cast<const uint16_t *>(a);
  const auto *y = static_cast<const uint16_t *>(b);
  for (size_t i = 0; i < n; ++i) {
    float u = Widen(x[i]), v = Widen(y[i]);
    out[i] = Narrow(Op == 0 ? u + v : (Op == 1 ? std::max(u, v) : std::min(u, v)));
  }
}

using Combine = void (*)(void *, const void *, const void *, size_t);

template <int Op> Combine combineFor(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return combine<float, Op>;
  case DType::F64:
    return combine<double, Op>;
  case DType::I64:
    return combine<int64_t, Op>;
  case DType::I32:
    return combine<int32_t, Op>;
  case DType::I16:
    return combine<int16_t, Op>;
  case DType::I8:
    return combine<int8_t, Op>;
  case DType::U8:
  case DType::Bool: // max is or, min is and; checkReduction refuses sums
    return combine<uint8_t, Op>;
  case DType::BF16:
    return combineHalf<quant::bf16ToFloat, quant::floatToBf16, Op>;
  case DType::F16:
    return combineHalf<quant::fp16ToFloat, quant::floatToFp16, Op>;
  }
  return nullptr;
}

/// The reduction function of `op` (an average sums, then divides).
Combine reductionOf(DType dtype, ReduceOp op) {
  if (op == ReduceOp::Max) {
    return combineFor<1>(dtype);
  }
  if (op == ReduceOp::Min) {
    return combineFor<2>(dtype);
  }
  return combineFor<0>(dtype);
}

/// The local address a peer reaches this host by: the one the kernel picks
/// to route towards MASTER_ADDR (no packet is sent), so ranks on several
/// nodes advertise an address the others can connect to.
std::string addressTowards(const std::string &host, std::string &error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo *found = nullptr;
  if (int code = ::getaddrinfo(host.c_str(), "9", &hints, &found); code != 0) {
    error = "getaddrinfo failed for MASTER_ADDR '" + host +
            "': " + gai_strerror(code);
    return "";
  }
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  bool ok = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &length) ==
                0;
  ::freeaddrinfo(found);
  if (fd >= 0) {
    ::close(fd);
  }
  char text[INET_ADDRSTRLEN] = {};
  if (!ok || !::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text))) {
    error = "no local address routes to MASTER_ADDR '" + host +
            "': " + std::strerror(errno);
    return "";
  }
  return text;
}

class GlooCommunicator final : public Communicator {
public:
  GlooCommunicator(std::shared_ptr<gloo::Context> context,
                   std::shared_ptr<gloo::transport::Device> device,
                   double timeout)
      : context(std::move(context)), device(std::move(device)),
        timeout(timeout) {}

  int rank() const override { return context->rank; }
  int size() const override { return context->size; }
  const char *backend() const override { return "gloo"; }

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

private:
  std::string prefix(const char *what) const {
    return std::string(what) + " on rank " + std::to_string(rank()) + " of " +
           std::to_string(size()) + ": ";
  }
  std::chrono::milliseconds timeoutMs() const {
    return std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
  }
  /// Runs `body` (Gloo calls), turning an exception into an error.
  std::string guarded(const char *what, const std::function<void()> &body);
  /// The MPI communicator's agreement (see the file comment): "" when
  /// every rank may enter `what`.
  std::string agree(const char *what, size_t count, DType dtype, int op,
                    int root, const std::string &problem);
  /// In-place all-reduce of `count` elements at `data`, no agreement.
  void allReduceInPlace(void *data, size_t count, DType dtype, ReduceOp op);
  /// Every rank's `bytes` bytes at `in`, in rank order into `out`; no
  /// agreement, no count (throws what Gloo throws).
  void gatherBytes(const void *in, size_t bytes, void *out);
  std::string checkPeer(const char *what, int peer, const char *role) const {
    if (peer < 0 || peer >= size()) {
      return prefix(what) + role + " " + std::to_string(peer) +
             " is not a rank of the group";
    }
    return "";
  }

  std::shared_ptr<gloo::Context> context;
  std::shared_ptr<gloo::transport::Device> device;
  double timeout;
};

std::string GlooCommunicator::guarded(const char *what,
                                      const std::function<void()> &body) {
  try {
    body();
  } catch (const std::exception &e) {
    return prefix(what) + "gloo: " + e.what();
  }
  return "";
}

void GlooCommunicator::allReduceInPlace(void *data, size_t count, DType dtype,
                                        ReduceOp op) {
  gloo::AllreduceOptions options(context);
  // Typed by element size, so Gloo cuts its segments between elements and
  // hands the reduction function element counts.
  switch (dtypeSize(dtype)) {
  case 8:
    options.setOutput(static_cast<int64_t *>(data), count);
    break;
  case 4:
    options.setOutput(static_cast<int32_t *>(data), count);
    break;
  case 2:
    options.setOutput(static_cast<uint16_t *>(data), count);
    break;
  default:
    options.setOutput(static_cast<uint8_t *>(data), count);
    break;
  }
  options.setReduceFunction(reductionOf(dtype, op));
  options.setTimeout(timeoutMs());
  gloo::allreduce(options);
}

void GlooCommunicator::gatherBytes(const void *in, size_t bytes, void *out) {
  gloo::AllgatherOptions options(context);
  options.setInput(static_cast<uint8_t *>(const_cast<void *>(in)), bytes);
  options.setOutput(static_cast<uint8_t *>(out),
                    bytes * static_cast<size_t>(size()));
  options.setTimeout(timeoutMs());
  gloo::allgather(options);
}

std::string GlooCommunicator::agree(const char *what, size_t count,
                                    DType dtype, int op, int root,
                                    const std::string &problem) {
  if (size() == 1) {
    return problem;
  }
  detail::Agreement agreement({{"element count", static_cast<int64_t>(count)},
                               {"dtype", static_cast<int64_t>(dtype)},
                               {"operation", op},
                               {"root", root}},
                              !problem.empty());
  if (std::string error = guarded(what,
                                  [&] {
                                    allReduceInPlace(agreement.extremes(),
                                                     agreement.count(),
                                                     DType::I64,
                                                     ReduceOp::Max);
                                  });
      !error.empty()) {
    return error;
  }
  return problem.empty() ? agreement.verdict(prefix(what)) : problem;
}

std::string GlooCommunicator::allReduce(const void *send, void *recv,
                                        size_t count, DType dtype, ReduceOp op,
                                        void *) {
  size_t bytes = count * dtypeSize(dtype);
  std::string problem = detail::checkReduction(dtype, op);
  if (!problem.empty()) {
    problem = prefix("allReduce") + "cannot reduce " + problem;
  } else if (send != recv && detail::overlaps(send, bytes, recv, bytes)) {
    problem = prefix("allReduce") + "send and recv overlap without being "
                                    "the same buffer";
  }
  if (std::string error =
          agree("allReduce", count, dtype, static_cast<int>(op), 0, problem);
      !error.empty()) {
    return error;
  }
  if (send != recv && bytes > 0) {
    std::memcpy(recv, send, bytes);
  }
  if (std::string error = guarded(
          "allReduce", [&] { allReduceInPlace(recv, count, dtype, op); });
      !error.empty()) {
    return error;
  }
  if (op == ReduceOp::Avg) {
    detail::divideElements(recv, count, dtype, size());
  }
  countSent(detail::ringBytes(bytes, size(), 2));
  return "";
}

std::string GlooCommunicator::reduceScatter(const void *send, void *recv,
                                            size_t recvCount, DType dtype,
                                            ReduceOp op, void *) {
  size_t blockBytes = recvCount * dtypeSize(dtype);
  size_t totalBytes = blockBytes * static_cast<size_t>(size());
  std::string problem = detail::checkReduction(dtype, op);
  if (!problem.empty()) {
    problem = prefix("reduceScatter") + "cannot reduce " + problem;
  } else if (send != recv &&
             detail::overlaps(send, totalBytes, recv, blockBytes)) {
    problem = prefix("reduceScatter") + "send and recv overlap without "
                                        "being the same buffer";
  }
  if (std::string error = agree("reduceScatter", recvCount, dtype,
                                static_cast<int>(op), 0, problem);
      !error.empty()) {
    return error;
  }
  // In place (send == recv), as MPI's: the whole input at recv, this
  // rank's block left at its start.
  std::vector<uint8_t> whole(static_cast<const uint8_t *>(send),
                             static_cast<const uint8_t *>(send) + totalBytes);
  if (std::string error = guarded("reduceScatter",
                                  [&] {
                                    allReduceInPlace(whole.data(),
                                                     recvCount * size(), dtype,
                                                     op);
                                  });
      !error.empty()) {
    return error;
  }
  std::memcpy(recv, whole.data() + blockBytes * rank(), blockBytes);
  if (op == ReduceOp::Avg) {
    detail::divideElements(recv, recvCount, dtype, size());
  }
  countSent(detail::ringBytes(totalBytes, size(), 1));
  return "";
}

std::string GlooCommunicator::allGather(const void *send, void *recv,
                                        size_t sendCount, DType dtype,
                                        void *) {
  size_t blockBytes = sendCount * dtypeSize(dtype);
  size_t totalBytes = blockBytes * static_cast<size_t>(size());
  auto *ownBlock = static_cast<uint8_t *>(recv) + blockBytes * rank();
  // In place as MPI's and NCCL's: this rank's block at its place, or at
  // recv's start (send == recv).
  bool inPlace = send == ownBlock || send == recv;
  std::string problem;
  if (!inPlace && detail::overlaps(send, blockBytes, recv, totalBytes)) {
    problem = prefix("allGather") + "send overlaps recv without being this "
                                    "rank's block of it or its start";
  }
  if (std::string error = agree("allGather", sendCount, dtype, -1, 0, problem);
      !error.empty()) {
    return error;
  }
  // Gloo copies the input to its place in the output first: give it a
  // copy when the input already lies in the output.
  std::vector<uint8_t> block(static_cast<const uint8_t *>(send),
                             static_cast<const uint8_t *>(send) + blockBytes);
  if (std::string error = guarded("allGather",
                                  [&] {
                                    gatherBytes(block.data(), blockBytes,
                                                recv);
                                  });
      !error.empty()) {
    return error;
  }
  countSent(detail::ringBytes(totalBytes, size(), 1));
  return "";
}

std::string GlooCommunicator::allToAll(const void *send, void *recv,
                                       size_t count, DType dtype, void *) {
  size_t totalBytes = count * dtypeSize(dtype) * static_cast<size_t>(size());
  std::string problem;
  if (detail::overlaps(send, totalBytes, recv, totalBytes)) {
    problem = prefix("allToAll") + "send and recv overlap";
  }
  if (std::string error = agree("allToAll", count, dtype, -1, 0, problem);
      !error.empty()) {
    return error;
  }
  if (totalBytes == 0) {
    return "";
  }
  if (std::string error = guarded(
          "allToAll",
          [&] {
            // As bytes: Gloo moves blocks of totalBytes / size() bytes.
            gloo::AlltoallOptions options(context);
            options.setInput(
                static_cast<uint8_t *>(const_cast<void *>(send)), totalBytes);
            options.setOutput(static_cast<uint8_t *>(recv), totalBytes);
            options.setTimeout(timeoutMs());
            gloo::alltoall(options);
          });
      !error.empty()) {
    return error;
  }
  countSent(detail::ringBytes(totalBytes, size(), 1));
  return "";
}

std::string GlooCommunicator::broadcast(void *buffer, size_t count,
                                        DType dtype, int root, void *) {
  std::string problem = checkPeer("broadcast", root, "root");
  if (std::string error = agree("broadcast", count, dtype, -1, root, problem);
      !error.empty()) {
    return error;
  }
  size_t bytes = count * dtypeSize(dtype);
  if (std::string error = guarded("broadcast",
                                  [&] {
                                    gloo::BroadcastOptions options(context);
                                    options.setOutput(
                                        static_cast<uint8_t *>(buffer), bytes);
                                    options.setRoot(root);
                                    options.setTimeout(timeoutMs());
                                    gloo::broadcast(options);
                                  });
      !error.empty()) {
    return error;
  }
  countSent(rank() == root && size() > 1 ? bytes : 0);
  return "";
}

std::string GlooCommunicator::send(const void *buffer, size_t count,
                                   DType dtype, int peer, void *) {
  if (std::string problem = checkPeer("send", peer, "peer");
      !problem.empty()) {
    return problem;
  }
  size_t bytes = count * dtypeSize(dtype);
  if (std::string error = guarded("send",
                                  [&] {
                                    auto unbound = context->createUnboundBuffer(
                                        const_cast<void *>(buffer), bytes);
                                    unbound->send(peer, kPointToPointSlot);
                                    unbound->waitSend(timeoutMs());
                                  });
      !error.empty()) {
    return error;
  }
  countSent(bytes);
  return "";
}

std::string GlooCommunicator::recv(void *buffer, size_t count, DType dtype,
                                   int peer, void *) {
  if (std::string problem = checkPeer("recv", peer, "peer");
      !problem.empty()) {
    return problem;
  }
  // Gloo refuses a message whose size differs from the buffer's.
  return guarded("recv", [&] {
    auto unbound =
        context->createUnboundBuffer(buffer, count * dtypeSize(dtype));
    unbound->recv(peer, kPointToPointSlot);
    unbound->waitRecv(timeoutMs());
  });
}

std::string GlooCommunicator::barrier() {
  return guarded("barrier", [&] {
    gloo::BarrierOptions options(context);
    options.setTimeout(timeoutMs());
    gloo::barrier(options);
  });
}

/// Connects `context` through `exchange` with the startup timeout, then
/// sets the collectives' timeout; "" or why not.
std::string connectMesh(MeshContext &context, const Exchange &exchange,
                        const std::shared_ptr<gloo::transport::Device> &device,
                        double timeout) {
  try {
    context.setTimeout(std::chrono::milliseconds(
        static_cast<int64_t>(std::max(timeout, kStartupTimeout) * 1000)));
    context.connect(exchange, device);
    context.setTimeout(
        std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
  } catch (const std::exception &e) {
    return std::string("gloo: ") + e.what();
  }
  return "";
}

std::unique_ptr<Communicator> GlooCommunicator::split(int color, int key,
                                                      std::string &error) {
  if (color < 0) {
    error = prefix("split") + "color " + std::to_string(color) +
            " is negative (every rank joins a group)";
    return nullptr;
  }
  // Every rank's (color, key), in rank order.
  std::vector<int64_t> all(2 * static_cast<size_t>(size()));
  int64_t mine[2] = {color, key};
  error = guarded("split", [&] {
    gatherBytes(mine, sizeof(mine), all.data());
  });
  if (!error.empty()) {
    return nullptr;
  }
  // The group: ranks of this color ordered by (key, rank).
  std::vector<std::pair<int64_t, int>> members;
  for (int r = 0; r < size(); ++r) {
    if (all[2 * r] == color) {
      members.push_back({all[2 * r + 1], r});
    }
  }
  std::sort(members.begin(), members.end());
  int partRank = static_cast<int>(
      std::find(members.begin(), members.end(), std::make_pair(int64_t(key),
                                                                rank())) -
      members.begin());
  // The group's addresses: every rank of the parent gathers every rank's
  // entry (sizes, then entries padded to the widest) and keeps its group's,
  // in the group's order. Every rank takes part, a group of one included.
  Exchange exchange = [this, &members](std::vector<uint8_t> mine,
                                       Entries &group) -> std::string {
    std::vector<int64_t> sizes(static_cast<size_t>(size()));
    int64_t own = static_cast<int64_t>(mine.size());
    std::string problem = guarded("split", [&] {
      gatherBytes(&own, sizeof(own), sizes.data());
    });
    if (!problem.empty()) {
      return problem;
    }
    size_t widest = static_cast<size_t>(
        std::max<int64_t>(1, *std::max_element(sizes.begin(), sizes.end())));
    mine.resize(widest);
    std::vector<uint8_t> gathered(widest * sizes.size());
    problem = guarded("split", [&] {
      gatherBytes(mine.data(), widest, gathered.data());
    });
    group.clear();
    for (size_t j = 0; j < members.size() && problem.empty(); ++j) {
      size_t r = static_cast<size_t>(members[j].second);
      auto begin = gathered.begin() + static_cast<std::ptrdiff_t>(widest * r);
      group.emplace_back(begin, begin + sizes[r]);
    }
    return problem;
  };
  auto part = std::make_shared<MeshContext>(partRank,
                                            static_cast<int>(members.size()));
  if (std::string problem = connectMesh(*part, exchange, device, timeout);
      !problem.empty()) {
    error = prefix("split") + problem;
    return nullptr;
  }
  return std::make_unique<GlooCommunicator>(part, device, timeout);
}

} // namespace

std::unique_ptr<Communicator> createGlooCommunicator(const LaunchInfo &launch,
                                                     std::string &error) {
  double timeout = 0;
  if (error = detail::readTimeout(timeout); !error.empty()) {
    return nullptr;
  }
  if (launch.masterAddr.empty() || launch.masterPort <= 0) {
    error = "gloo: MASTER_ADDR and MASTER_PORT are not set (launch with "
            "torchrun)";
    return nullptr;
  }
  std::string host = addressTowards(launch.masterAddr, error);
  if (host.empty()) {
    error = "gloo on rank " + std::to_string(launch.rank) + ": " + error;
    return nullptr;
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception &e) {
    error = "gloo on rank " + std::to_string(launch.rank) +
            ": cannot open a TCP device on " + host + ": " + e.what();
    return nullptr;
  }
  auto context = std::make_shared<MeshContext>(launch.rank, launch.worldSize);
  Exchange exchange = [&launch, timeout](std::vector<uint8_t> mine,
                                         Entries &all) {
    all.assign(static_cast<size_t>(launch.worldSize), {});
    all[static_cast<size_t>(launch.rank)] = std::move(mine);
    return rendezvousTable(launch, all, std::max(timeout, kStartupTimeout));
  };
  if (std::string problem = connectMesh(*context, exchange, device, timeout);
      !problem.empty()) {
    error = "gloo on rank " + std::to_string(launch.rank) + " of " +
            std::to_string(launch.worldSize) + ": " + problem;
    return nullptr;
  }
  return std::make_unique<GlooCommunicator>(context, device, timeout);
}

} // namespace tailor::runtime::comm
