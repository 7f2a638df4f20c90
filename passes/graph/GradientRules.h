//===- GradientRules.h - vector-Jacobian products of tg ops -----*- C++ -*-===//
//
// The per-op rules `tailor-autodiff` applies in reverse program order. A rule
// receives the cotangents of an op's results and emits the ops computing the
// cotangents of the operands that need one, and only those.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_GRAPH_GRADIENTRULES_H
#define TAILOR_PASSES_GRAPH_GRADIENTRULES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace tailor::graph {

/// True for ops whose float operands can carry a gradient through them (the
/// op has a rule); comparisons, casts to integers and parameter references
/// do not.
bool hasGradientRule(mlir::Operation *op);

/// Emits, at the builder's insertion point, the cotangents of `op`'s
/// operands. `resultGrads[i]` is the cotangent of result i, or null when
/// nothing flows back into it (a zero). On success `operandGrads[j]` is set
/// for every j with `needed[j]` (null only if it is structurally zero).
/// Fails with an error on `op` when a needed gradient is not supported.
mlir::LogicalResult emitGradient(mlir::OpBuilder &builder, mlir::Operation *op,
                                 llvm::ArrayRef<mlir::Value> resultGrads,
                                 llvm::ArrayRef<bool> needed,
                                 llvm::SmallVectorImpl<mlir::Value> &operandGrads);

/// The sum of `grad` over the dims that broadcasting added to reach its
/// shape from `target` (NumPy rules), reshaped to `target`.
mlir::Value unbroadcast(mlir::OpBuilder &builder, mlir::Location loc,
                        mlir::Value grad, mlir::RankedTensorType target);

/// A zero tensor of `type`, as a broadcast scalar constant (no bytes of the
/// full shape in the IR).
mlir::Value zerosOf(mlir::OpBuilder &builder, mlir::Location loc,
                    mlir::RankedTensorType type);

} // namespace tailor::graph

#endif // TAILOR_PASSES_GRAPH_GRADIENTRULES_H
