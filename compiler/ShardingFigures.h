//===- ShardingFigures.h - a plan's memory per trainable parameter -*- C++ -*-===//
//
// How a data-parallel plan spends memory on each trainable parameter, per
// rank and per category (the parameter itself, gradients, optimizer
// state), next to the ZeRO paper's figure for the same strategy in the
// plan's own precisions: DDP keeps P + G + K bytes, ZeRO-1 P + G + K/N,
// ZeRO-2 P + (G + K)/N, ZeRO-3 (P + G + K)/N, with P and G the bytes of a
// parameter and of its gradient and K those of its optimizer state (hybrid:
// ZeRO-2's with N the ranks of a node).
// `tailor inspect` prints them; they read the plan only.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_SHARDINGFIGURES_H
#define TAILOR_COMPILER_SHARDINGFIGURES_H

#include <cstdint>
#include <optional>
#include <string>

namespace tailor {
namespace plan {
struct Plan;
} // namespace plan

struct ShardingFigures {
  std::string strategy;
  int64_t worldSize = 1;
  int64_t ranksPerNode = 1;
  int64_t trainableParameters = 0;
  /// Bytes of one trainable parameter's value, and how many optimizer
  /// states (moments) each has.
  int64_t elementBytes = 4;
  int64_t optimizerStates = 0;
  /// Per rank, per trainable parameter.
  double parameterBytes = 0;
  double gradientBytes = 0;
  double optimizerBytes = 0;
  double total() const { return parameterBytes + gradientBytes + optimizerBytes; }
  /// The ZeRO paper's figure for `strategy`, and how it is made
  /// ("4 + (4 + 8)/2").
  double textbookBytes = 0;
  std::string textbookFormula;
};

/// The figures of a training plan of several ranks; none otherwise.
std::optional<ShardingFigures> shardingFigures(const plan::Plan &p);

} // namespace tailor

#endif // TAILOR_COMPILER_SHARDINGFIGURES_H
