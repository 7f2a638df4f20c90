//===- GroupKind.h - what a group of ranks is, in a word --------*- C++ -*-===//
//
// The names under which metrics.jsonl (`bytes_sent_by_group`) and
// `tailor inspect` (`predicted_bytes_sent_by_group_per_step`) count the
// bytes each group of ranks carried, so the two can be compared.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_COMM_GROUPKIND_H
#define TAILOR_RUNTIME_COMM_GROUPKIND_H

#include <cstddef>
#include <vector>

namespace tailor::runtime::comm {

/// "world" for all `world` ranks; "node" for a block of consecutive ranks
/// (a node, or a pipeline stage's replicas); "cross_node" for every
/// stride-th rank (one index across nodes); "other" otherwise. `members`
/// are sorted.
inline const char *groupKind(const std::vector<int> &members, int world) {
  if (static_cast<int>(members.size()) == world) {
    return "world";
  }
  bool block = members.size() > 1, strided = members.size() > 1;
  int stride = members.size() > 1 ? members[1] - members[0] : 0;
  for (size_t i = 1; i < members.size(); ++i) {
    block = block && members[i] == members[i - 1] + 1;
    strided = strided && members[i] == members[i - 1] + stride;
  }
  return block ? "node" : strided ? "cross_node" : "other";
}

} // namespace tailor::runtime::comm

#endif // TAILOR_RUNTIME_COMM_GROUPKIND_H
