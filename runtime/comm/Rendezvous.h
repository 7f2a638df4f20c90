//===- Rendezvous.h - bootstrap under torchrun -----------------*- C++ -*-===//
//
// Under torchrun there is no MPI to broadcast NCCL's unique id (GPU ranks)
// or to exchange Gloo's addresses (CPU ranks), and
// torchrun's agent holds MASTER_PORT. Rank 0 listens on MASTER_PORT + 1,
// every other rank connects to MASTER_ADDR there (retrying while rank 0 is
// not up yet) and receives the id, or, for Gloo, the table of every rank's
// addresses. This is only bootstrap: the collectives themselves run in
// NCCL or Gloo.
//
// rendezvousBytes on each connection: the client sends "TLRV" and its rank
// (big-endian u32); the server answers "TLRV", the byte count (big-endian
// u32) and the bytes. rendezvousTable: the client sends "TLRV", its rank,
// its entry's byte count and the entry; once every rank has, the server
// answers each "TLRV" and every rank's (count, entry) in rank order. Every
// wait has the caller's deadline, so a rank that never comes makes an
// error naming it, not a hang.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_COMM_RENDEZVOUS_H
#define TAILOR_RUNTIME_COMM_RENDEZVOUS_H

#include "runtime/comm/Communicator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tailor::runtime::comm {

/// Hands `bytes` from rank 0 to every rank of `launch` (IPv4, on
/// launch.masterAddr, port launch.masterPort + 1). On rank 0 `bytes` is the
/// input; on the others it is replaced by rank 0's. "" or an error naming
/// the address, the call and, on rank 0, the ranks that never connected.
std::string rendezvousBytes(const LaunchInfo &launch,
                            std::vector<uint8_t> &bytes,
                            double timeoutSeconds);

/// Every rank's entry to every rank (an all-gather over the same port):
/// `table` has one entry per rank, this rank's filled in; on return every
/// entry is filled. Rank 0 gathers the others' entries, then sends each the
/// whole table. "" or an error as rendezvousBytes gives.
std::string rendezvousTable(const LaunchInfo &launch,
                            std::vector<std::vector<uint8_t>> &table,
                            double timeoutSeconds);

} // namespace tailor::runtime::comm

#endif // TAILOR_RUNTIME_COMM_RENDEZVOUS_H
