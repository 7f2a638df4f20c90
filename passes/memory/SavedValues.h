//===- SavedValues.h - what a training step's forward keeps for backward -*- C++ -*-===//
//
// A pure analysis of one training-step function: the forward ops (the
// loss's backward slice), the values they make that backward reads (saved
// activations), which of those are layer boundaries, and which are free
// (made from parameters, states and constants alone). Recomputation
// (Recompute.cpp) chooses among the saved values what to rebuild;
// activation offload (passes/parallel/OffloadActivations.cpp) moves them to
// host memory between their forward and backward readers.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_MEMORY_SAVEDVALUES_H
#define TAILOR_PASSES_MEMORY_SAVEDVALUES_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <cstdint>
#include <optional>

namespace tailor::memory {

/// What the forward pass of a training step keeps for backward.
struct SavedValues {
  /// The ops the loss (result 0) is computed from.
  llvm::DenseSet<mlir::Operation *> forward;
  /// Values made from parameters, states and constants alone: never saved.
  llvm::DenseSet<mlir::Value> free;
  /// Forward values a later layer (or something outside the layers) reads,
  /// and forward values of ops outside any layer: always kept.
  llvm::DenseSet<mlir::Value> boundary;
  /// Forward values read by a backward op, in program order.
  llvm::SetVector<mlir::Value> saved;
};

/// Analyzes `body`, a training step's block whose loss is `loss`.
SavedValues findSavedValues(mlir::Block &body, mlir::Value loss);

/// A read of a parameter, a state or a constant: what free values are
/// computed from.
bool isDataReference(mlir::Operation *op);

/// The transformer layer `op` belongs to (`tg.layer`), if any.
std::optional<int64_t> layerOf(mlir::Operation *op);

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_SAVEDVALUES_H
