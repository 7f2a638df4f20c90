//===- Rendezvous.cpp - bootstrap bytes over TCP under torchrun -----------===//

#include "runtime/comm/Rendezvous.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace tailor::runtime::comm {

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[4] = {'T', 'L', 'R', 'V'};
/// The most bytes one rank's rendezvousTable entry may hold (Gloo's
/// addresses are tens of bytes a peer).
constexpr uint32_t kMaxEntryBytes = 1 << 24;

/// Closes a descriptor when it goes out of scope.
struct Socket {
  int fd = -1;
  explicit Socket(int fd = -1) : fd(fd) {}
  ~Socket() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  Socket(const Socket &) = delete;
  Socket &operator=(const Socket &) = delete;
};

std::string systemFailure(const char *call, const std::string &where,
                          int line) {
  return std::string(call) + " failed for " + where + ": " +
         std::strerror(errno) + " (runtime/comm/Rendezvous.cpp:" +
         std::to_string(line) + ")";
}

/// Milliseconds left until `deadline` (0 when past).
int millisecondsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return left > 0 ? static_cast<int>(std::min<long long>(left, 1 << 30)) : 0;
}

/// Waits for `events` on `fd` until the deadline; false on timeout.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    int ready = ::poll(&entry, 1, millisecondsLeft(deadline));
    if (ready > 0) {
      return true;
    }
    if (ready == 0 || errno != EINTR) {
      return false;
    }
  }
}

/// Reads or writes exactly `size` bytes before the deadline; "" or what
/// went wrong.
std::string transfer(int fd, void *data, size_t size, bool reading,
                     Clock::time_point deadline, const std::string &where) {
  auto *bytes = static_cast<uint8_t *>(data);
  size_t done = 0;
  while (done < size) {
    if (!waitFor(fd, reading ? POLLIN : POLLOUT, deadline)) {
      return std::string("timed out ") + (reading ? "reading from " :
                                                    "writing to ") + where;
    }
    ssize_t n = reading ? ::recv(fd, bytes + done, size - done, 0)
                        : ::send(fd, bytes + done, size - done, MSG_NOSIGNAL);
    if (n == 0 && reading) {
      return where + " closed the connection";
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      return systemFailure(reading ? "recv" : "send", where, __LINE__);
    }
    done += static_cast<size_t>(n);
  }
  return "";
}

void putU32(uint8_t *out, uint32_t value) {
  uint32_t big = htonl(value);
  std::memcpy(out, &big, 4);
}

uint32_t getU32(const uint8_t *in) {
  uint32_t big;
  std::memcpy(&big, in, 4);
  return ntohl(big);
}

/// Rank 0 listens on MASTER_PORT + 1 (any address); "" or why not.
std::string listen(const LaunchInfo &launch, Socket &listener,
                   const std::string &where) {
  listener.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener.fd < 0) {
    return systemFailure("socket", where, __LINE__);
  }
  int one = 1;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(launch.masterPort + 1));
  if (::bind(listener.fd, reinterpret_cast<sockaddr *>(&address),
             sizeof(address)) != 0) {
    return systemFailure("bind", where + " (MASTER_PORT + 1)", __LINE__);
  }
  if (::listen(listener.fd, launch.worldSize) != 0) {
    return systemFailure("listen", where, __LINE__);
  }
  return "";
}

/// The next connection to `listener` before the deadline: "" with `fd` set
/// (-1 when interrupted: try again), or the failure; a timeout names the
/// ranks that have not arrived (`arrived[r]` false).
std::string acceptNext(const Socket &listener, Clock::time_point deadline,
                       const std::string &where,
                       const std::vector<bool> &arrived, int &fd) {
  fd = -1;
  if (!waitFor(listener.fd, POLLIN, deadline)) {
    std::string ranks;
    for (size_t r = 0; r < arrived.size(); ++r) {
      if (!arrived[r]) {
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    return "timed out waiting on " + where + " for rank(s) " + ranks +
           " to connect";
  }
  fd = ::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0 && errno != EINTR && errno != ECONNABORTED) {
    return systemFailure("accept", where, __LINE__);
  }
  return "";
}

std::string serve(const LaunchInfo &launch, const std::vector<uint8_t> &bytes,
                  Clock::time_point deadline) {
  int port = launch.masterPort + 1;
  std::string where = "port " + std::to_string(port);
  Socket listener;
  if (std::string problem = listen(launch, listener, where); !problem.empty()) {
    return problem;
  }
  std::vector<bool> served(static_cast<size_t>(launch.worldSize), false);
  served[0] = true;
  int missing = launch.worldSize - 1;
  std::vector<uint8_t> reply(8 + bytes.size());
  std::memcpy(reply.data(), kMagic, 4);
  putU32(reply.data() + 4, static_cast<uint32_t>(bytes.size()));
  std::memcpy(reply.data() + 8, bytes.data(), bytes.size());
  while (missing > 0) {
    Socket peer;
    if (std::string problem =
            acceptNext(listener, deadline, where, served, peer.fd);
        !problem.empty()) {
      return problem;
    }
    if (peer.fd < 0) {
      continue;
    }
    uint8_t hello[8];
    // A stray connection (a port scanner, another job) is dropped, not
    // fatal: the ranks of this job may still come.
    if (!transfer(peer.fd, hello, sizeof(hello), true, deadline, where)
             .empty() ||
        std::memcmp(hello, kMagic, 4) != 0) {
      continue;
    }
    uint32_t rank = getU32(hello + 4);
    if (rank == 0 || rank >= served.size() || served[rank]) {
      return "rank " + std::to_string(rank) + " connected to " + where +
             (rank < served.size() && rank != 0 ? " twice" : "") +
             ", which a world of " + std::to_string(launch.worldSize) +
             " does not expect (two jobs on one MASTER_PORT?)";
    }
    if (std::string problem = transfer(peer.fd, reply.data(), reply.size(),
                                       false, deadline,
                                       "rank " + std::to_string(rank));
        !problem.empty()) {
      return problem;
    }
    served[rank] = true;
    --missing;
  }
  return "";
}

/// Connects to the server, retrying while it is not listening yet.
std::string connectToServer(const LaunchInfo &launch, Socket &out,
                            Clock::time_point deadline,
                            const std::string &where) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  std::string port = std::to_string(launch.masterPort + 1);
  if (int code = ::getaddrinfo(launch.masterAddr.c_str(), port.c_str(),
                               &hints, &found);
      code != 0) {
    return "getaddrinfo failed for " + where + ": " + gai_strerror(code) +
           " (MASTER_ADDR must name an IPv4 host)";
  }
  sockaddr_in address;
  std::memcpy(&address, found->ai_addr, sizeof(address));
  ::freeaddrinfo(found);
  for (;;) {
    Socket attempt(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (attempt.fd < 0) {
      return systemFailure("socket", where, __LINE__);
    }
    if (::connect(attempt.fd, reinterpret_cast<sockaddr *>(&address),
                  sizeof(address)) == 0) {
      std::swap(out.fd, attempt.fd);
      return "";
    }
    if (errno != ECONNREFUSED && errno != ETIMEDOUT && errno != EINTR &&
        errno != ENETUNREACH && errno != EHOSTUNREACH) {
      return systemFailure("connect", where, __LINE__);
    }
    if (millisecondsLeft(deadline) == 0) {
      return "timed out connecting to rank 0 at " + where +
             " (is rank 0 running?)";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string fetch(const LaunchInfo &launch, std::vector<uint8_t> &bytes,
                  Clock::time_point deadline) {
  std::string where = "rank 0 at " + launch.masterAddr + ":" +
                      std::to_string(launch.masterPort + 1);
  Socket server;
  if (std::string problem = connectToServer(launch, server, deadline, where);
      !problem.empty()) {
    return problem;
  }
  uint8_t hello[8];
  std::memcpy(hello, kMagic, 4);
  putU32(hello + 4, static_cast<uint32_t>(launch.rank));
  if (std::string problem =
          transfer(server.fd, hello, sizeof(hello), false, deadline, where);
      !problem.empty()) {
    return problem;
  }
  uint8_t header[8];
  if (std::string problem =
          transfer(server.fd, header, sizeof(header), true, deadline, where);
      !problem.empty()) {
    return problem;
  }
  uint32_t size = getU32(header + 4);
  if (std::memcmp(header, kMagic, 4) != 0 || size != bytes.size()) {
    return where + " answered with something other than " +
           std::to_string(bytes.size()) + " rendezvous bytes";
  }
  return transfer(server.fd, bytes.data(), bytes.size(), true, deadline,
                  where);
}

/// Rank 0's side of rendezvousTable: every other rank's entry, then the
/// whole table back to each.
std::string serveTable(const LaunchInfo &launch,
                       std::vector<std::vector<uint8_t>> &table,
                       Clock::time_point deadline) {
  int port = launch.masterPort + 1;
  std::string where = "port " + std::to_string(port);
  Socket listener;
  if (std::string problem = listen(launch, listener, where); !problem.empty()) {
    return problem;
  }
  std::vector<std::unique_ptr<Socket>> peers(table.size());
  std::vector<bool> arrived(table.size(), false);
  arrived[0] = true;
  int missing = launch.worldSize - 1;
  while (missing > 0) {
    auto peer = std::make_unique<Socket>();
    if (std::string problem =
            acceptNext(listener, deadline, where, arrived, peer->fd);
        !problem.empty()) {
      return problem;
    }
    if (peer->fd < 0) {
      continue;
    }
    uint8_t hello[12];
    if (!transfer(peer->fd, hello, sizeof(hello), true, deadline, where)
             .empty() ||
        std::memcmp(hello, kMagic, 4) != 0) {
      continue; // a stray connection, as in serve()
    }
    uint32_t rank = getU32(hello + 4), size = getU32(hello + 8);
    if (rank == 0 || rank >= peers.size() || peers[rank] ||
        size > kMaxEntryBytes) {
      return "rank " + std::to_string(rank) + " connected to " + where +
             " with " + std::to_string(size) +
             " bytes, which a world of " + std::to_string(launch.worldSize) +
             " does not expect (two jobs on one MASTER_PORT?)";
    }
    table[rank].resize(size);
    if (std::string problem =
            transfer(peer->fd, table[rank].data(), size, true, deadline,
                     "rank " + std::to_string(rank));
        !problem.empty()) {
      return problem;
    }
    peers[rank] = std::move(peer);
    arrived[rank] = true;
    --missing;
  }
  std::vector<uint8_t> reply = {kMagic[0], kMagic[1], kMagic[2], kMagic[3]};
  for (const std::vector<uint8_t> &entry : table) {
    uint8_t size[4];
    putU32(size, static_cast<uint32_t>(entry.size()));
    reply.insert(reply.end(), size, size + 4);
    reply.insert(reply.end(), entry.begin(), entry.end());
  }
  for (size_t r = 1; r < peers.size(); ++r) {
    if (std::string problem =
            transfer(peers[r]->fd, reply.data(), reply.size(), false,
                     deadline, "rank " + std::to_string(r));
        !problem.empty()) {
      return problem;
    }
  }
  return "";
}

/// Every rank but 0's side of rendezvousTable.
std::string fetchTable(const LaunchInfo &launch,
                       std::vector<std::vector<uint8_t>> &table,
                       Clock::time_point deadline) {
  std::string where = "rank 0 at " + launch.masterAddr + ":" +
                      std::to_string(launch.masterPort + 1);
  Socket server;
  if (std::string problem = connectToServer(launch, server, deadline, where);
      !problem.empty()) {
    return problem;
  }
  const std::vector<uint8_t> &mine = table[launch.rank];
  std::vector<uint8_t> hello(12);
  std::memcpy(hello.data(), kMagic, 4);
  putU32(hello.data() + 4, static_cast<uint32_t>(launch.rank));
  putU32(hello.data() + 8, static_cast<uint32_t>(mine.size()));
  hello.insert(hello.end(), mine.begin(), mine.end());
  if (std::string problem = transfer(server.fd, hello.data(), hello.size(),
                                     false, deadline, where);
      !problem.empty()) {
    return problem;
  }
  uint8_t magic[4];
  if (std::string problem =
          transfer(server.fd, magic, sizeof(magic), true, deadline, where);
      !problem.empty()) {
    return problem;
  }
  if (std::memcmp(magic, kMagic, 4) != 0) {
    return where + " answered with something other than a rendezvous table";
  }
  for (std::vector<uint8_t> &entry : table) {
    uint8_t size[4];
    if (std::string problem =
            transfer(server.fd, size, sizeof(size), true, deadline, where);
        !problem.empty()) {
      return problem;
    }
    if (getU32(size) > kMaxEntryBytes) {
      return where + " sent an entry of " + std::to_string(getU32(size)) +
             " bytes, over the " + std::to_string(kMaxEntryBytes) +
             " a rendezvous entry may hold";
    }
    entry.resize(getU32(size));
    if (std::string problem = transfer(server.fd, entry.data(), entry.size(),
                                       true, deadline, where);
        !problem.empty()) {
      return problem;
    }
  }
  return "";
}

/// Runs rank 0's side (`serveSide`) or the others' (`fetchSide`) before
/// the deadline; "" or the failure, naming this rank.
template <typename Serve, typename Fetch>
std::string runRendezvous(const LaunchInfo &launch, double timeoutSeconds,
                          Serve serveSide, Fetch fetchSide) {
  if (launch.worldSize <= 1) {
    return "";
  }
  if (launch.masterAddr.empty() || launch.masterPort <= 0) {
    return "rendezvous: MASTER_ADDR and MASTER_PORT are not set";
  }
  auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(
                                     timeoutSeconds * 1000));
  std::string problem =
      launch.rank == 0 ? serveSide(deadline) : fetchSide(deadline);
  return problem.empty() ? "" : "rendezvous on rank " +
                                    std::to_string(launch.rank) + ": " +
                                    problem;
}

} // namespace

std::string rendezvousTable(const LaunchInfo &launch,
                            std::vector<std::vector<uint8_t>> &table,
                            double timeoutSeconds) {
  if (table.size() != static_cast<size_t>(launch.worldSize)) {
    return "rendezvous: a table of " + std::to_string(table.size()) +
           " entries for a world of " + std::to_string(launch.worldSize);
  }
  return runRendezvous(
      launch, timeoutSeconds,
      [&](Clock::time_point deadline) {
        return serveTable(launch, table, deadline);
      },
      [&](Clock::time_point deadline) {
        return fetchTable(launch, table, deadline);
      });
}

std::string rendezvousBytes(const LaunchInfo &launch,
                            std::vector<uint8_t> &bytes,
                            double timeoutSeconds) {
  return runRendezvous(
      launch, timeoutSeconds,
      [&](Clock::time_point deadline) { return serve(launch, bytes, deadline); },
      [&](Clock::time_point deadline) {
        return fetch(launch, bytes, deadline);
      });
}

} // namespace tailor::runtime::comm
