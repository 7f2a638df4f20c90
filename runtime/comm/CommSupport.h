//===- CommSupport.h - checks the communicators share -----------*- C++ -*-===//
//
// Internal to runtime/comm: what MPI and NCCL communicators check the same
// way before a call reaches their library, and the nominal byte counts of
// Communicator::bytesSent.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_COMM_COMMSUPPORT_H
#define TAILOR_RUNTIME_COMM_COMMSUPPORT_H

#include "runtime/comm/Communicator.h"

#include <utility>
#include <vector>

namespace tailor::runtime::comm::detail {

/// "" or what is wrong with reducing `dtype` by `op` (integer averages,
/// bool sums), phrased to follow "cannot reduce ".
std::string checkReduction(DType dtype, ReduceOp op);

/// Bytes a ring moves out of each rank for `hops` passes over a buffer of
/// `bytes` among `size` ranks: hops (p-1)/p n, rounded down (1 for
/// reduce-scatter and all-gather, 2 for all-reduce).
uint64_t ringBytes(uint64_t bytes, int size, int hops);

/// Whether two byte ranges share a byte.
bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes);

/// Divides `count` elements by `divisor` in place (an average's last
/// step; float types only, which checkReduction leaves for averages).
void divideElements(void *data, size_t count, DType dtype, int divisor);

/// TAILOR_COMM_TIMEOUT seconds, or the default (45) when unset; "" or why
/// the value is bad.
std::string readTimeout(double &seconds);

/// What every rank of a group all-reduces (with max) before entering a
/// collective, so that ranks that disagree on its description, or a rank
/// whose own checks failed, all return an error instead of entering a
/// collective the others skip. `extremes` holds (x, -x) per field and the
/// failure flag: one max over it gives every field's maximum and minimum.
class Agreement {
public:
  Agreement(std::vector<std::pair<const char *, int64_t>> fields,
            bool failedHere);
  /// What the all-reduce (max, int64) runs over, in place.
  int64_t *extremes() { return values.data(); }
  int count() const { return static_cast<int>(values.size()); }
  /// After the all-reduce: "" when every rank agrees and none failed, else
  /// the first disagreement or "another rank's call failed", after `prefix`.
  std::string verdict(const std::string &prefix) const;

private:
  std::vector<std::pair<const char *, int64_t>> fields;
  std::vector<int64_t> values;
};

/// "sum", "avg", "max", "min".
const char *opName(ReduceOp op);

} // namespace tailor::runtime::comm::detail

#endif // TAILOR_RUNTIME_COMM_COMMSUPPORT_H
