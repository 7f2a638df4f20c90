//===- RaiseUtils.h - matching helpers shared by the raising passes -------===//
//
// Constant matching, looking through no-op casts and reshapes, and naming:
// the Hugging Face module path of a weight and the transformer layer index
// that every raised op records.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_GRAPH_RAISEUTILS_H
#define TAILOR_PASSES_GRAPH_RAISEUTILS_H

#include "dialects/tg/TGOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

#include <optional>
#include <string>

namespace tailor::graph {

/// The value of a splat constant (any shape), if `value` is one.
std::optional<double> splatValue(mlir::Value value);
/// Whether `value` is a splat constant within 1e-4 relative of `expected`.
bool isSplat(mlir::Value value, double expected);

/// The parameter `value` reads, looking through casts (an fp16 export casts
/// weights to fp32 before use).
tg::ParamRefOp paramRefOf(mlir::Value value);

/// Strips tg.cast ops that keep the element type family (float -> float).
mlir::Value skipCasts(mlir::Value value);

/// If `value`'s only use adds a [size] parameter without changing its type
/// (a bias), returns that parameter value.
mlir::Value biasAddOf(mlir::Value value, int64_t size);

/// Shape of a ranked tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value value);

/// Module path from a parameter name: "model.layers.0.mlp.up_proj.weight"
/// -> "model.layers.0.mlp.up_proj". None for names that are not module paths
/// ("onnx::MatMul_77", "val_3").
std::optional<std::string> modulePathFromParamName(llvm::StringRef name);
/// Module path of the PyTorch module an op was exported from (the importer
/// keeps it as FusedLoc metadata: "model.layers.0.self_attn.q_proj");
/// `dropLast` trailing components are removed.
std::optional<std::string> modulePathFromLoc(mlir::Location loc,
                                             unsigned dropLast = 0);
/// The transformer layer in a module path ("model.layers.3.mlp" -> 3).
std::optional<int64_t> layerOfPath(llvm::StringRef path);

/// Sets tg.module (if known) and tg.layer (if the path has one) on `op`.
void annotate(mlir::Operation *op, std::optional<std::string> modulePath);

/// The tg.layer of the nearest annotated op among `value`'s producers
/// (searched breadth-first, a bounded number of steps).
std::optional<int64_t> nearestLayer(mlir::Value value);

/// The module path of `op`'s nearest annotated producer, cut back to the
/// parent ("model.layers.0.self_attn.q_proj" -> "model.layers.0.self_attn").
std::optional<std::string> nearestParentModule(mlir::Value value);

} // namespace tailor::graph

#endif // TAILOR_PASSES_GRAPH_RAISEUTILS_H
