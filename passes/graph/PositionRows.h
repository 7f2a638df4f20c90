//===- PositionRows.h - tables computed row by row from positions -*- C++ -*-===//
//
// Dynamo exports compute rotary tables at run time: cos and sin of
// inv_freq times the positions 0..T-1, which the importer folds into a
// constant while inv_freq stays a parameter. Such a table is not data the
// compiler can read, but its dataflow says what its rows are: when every
// op from the positions to the table keeps rows apart, row t is the
// model's own computation at position t, so its rows gathered at other
// positions are the computation at those positions (tailor-pack-sequences,
// and through it generation's decode steps).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_GRAPH_POSITIONROWS_H
#define TAILOR_PASSES_GRAPH_POSITIONROWS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace tailor::graph {

/// Whether row t of `table` ([T, ...], rows on axis 0) is computed from
/// position t alone: its computation reaches a constant of the positions
/// 0..T-1 (ones on every other axis), through elementwise ops, concats,
/// reshapes, transposes and broadcasts that keep rows apart, and reads
/// nothing else that varies between rows. Fails with why.
mlir::LogicalResult checkRowsFromPositions(mlir::Value table, int64_t t,
                                           std::string &why);

/// The parameters whose values reach only position computations: rotary
/// tables (tg.rope's cos and sin) and attention biases, through ops that
/// read no input data. They are module buffers an export carries as
/// initializers (a rotary inv_freq, ALiBi slopes that the dynamo exporter
/// folds into one), not weights, so full fine-tuning leaves them frozen.
llvm::StringSet<> positionOnlyParameters(mlir::ModuleOp module);

} // namespace tailor::graph

#endif // TAILOR_PASSES_GRAPH_POSITIONROWS_H
