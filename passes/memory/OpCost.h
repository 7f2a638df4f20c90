//===- OpCost.h - the work one tg op does: FLOPs and bytes moved -*- C++ -*-===//
//
// Counted from shapes alone, per op kind: GEMMs (linear, matmul, their
// weight gradients) 2*M*N*K; attention 2*B*Hq*T*S*(D+Dv) forward, halved
// under a causal mask, and 2.5x that backward (it recomputes the scores);
// normalizations, softmax and cross-entropy a few FLOPs per element;
// every other op one FLOP per result element. Bytes are the operands read
// plus the results written. The recomputation budget ranks tensors by
// these; the cost model turns them into time with the target's figures.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_MEMORY_OPCOST_H
#define TAILOR_PASSES_MEMORY_OPCOST_H

#include "mlir/IR/Operation.h"

namespace tailor::memory {

struct OpCost {
  double flops = 0;
  double bytes = 0;
};

/// The FLOPs and bytes of `op`; zero for references to stored data
/// (parameters, states, constants) and for views (reshape).
OpCost costOf(mlir::Operation *op);

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_OPCOST_H
