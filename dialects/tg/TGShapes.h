//===- TGShapes.h - shape rules of tg ops -----------------------*- C++ -*-===//
//
// The shape rule of every tg op that changes shapes, in one place: the op
// verifiers check results against them and the ONNX importer infers result
// types with them. Each rule reports a failure through `emitError` with a
// message that says what was expected. Dims may be dynamic
// (ShapedType::kDynamic); a dynamic dim is compatible with any dim.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_DIALECTS_TG_TGSHAPES_H
#define TAILOR_DIALECTS_TG_TGSHAPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace tailor::tg {

using Shape = llvm::SmallVector<int64_t, 4>;
using EmitErrorFn = llvm::function_ref<mlir::InFlightDiagnostic()>;

/// Renders a shape as `[2, ?, 64]`.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// True when two dims can be equal at run time (equal, or one is dynamic).
bool dimsCompatible(int64_t a, int64_t b);

/// True when two shapes have the same rank and compatible dims.
bool shapesCompatible(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Number of elements, or ShapedType::kDynamic if any dim is dynamic.
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// Bytes a dense row-major tensor of this type occupies (sub-byte element
/// types pack: ceil(elements * bits / 8)); ShapedType::kDynamic if dynamic.
int64_t byteSize(mlir::ShapedType type);

/// NumPy broadcasting of two shapes.
mlir::FailureOr<Shape> broadcastShapes(llvm::ArrayRef<int64_t> lhs,
                                       llvm::ArrayRef<int64_t> rhs,
                                       EmitErrorFn emitError);

/// `[..., M, K] x [..., K, N] -> broadcast(...) + [M, N]`.
mlir::FailureOr<Shape> matmulShape(llvm::ArrayRef<int64_t> lhs,
                                   llvm::ArrayRef<int64_t> rhs,
                                   EmitErrorFn emitError);

/// `x: [..., in]`, `weight: [out, in]`, optional `bias: [out]` ->
/// `[..., out]`. Pass an empty `bias` when there is none.
mlir::FailureOr<Shape> linearShape(llvm::ArrayRef<int64_t> input,
                                   llvm::ArrayRef<int64_t> weight,
                                   std::optional<llvm::ArrayRef<int64_t>> bias,
                                   EmitErrorFn emitError);

/// Reduction over `axes` (distinct, in [0, rank)), keeping size-1 dims if
/// `keepDims`.
mlir::FailureOr<Shape> reduceShape(llvm::ArrayRef<int64_t> input,
                                   llvm::ArrayRef<int64_t> axes, bool keepDims,
                                   EmitErrorFn emitError);

/// Result dim i is input dim `permutation[i]`.
mlir::FailureOr<Shape> transposeShape(llvm::ArrayRef<int64_t> input,
                                      llvm::ArrayRef<int64_t> permutation,
                                      EmitErrorFn emitError);

/// Static strided slice, one (start, end, step) per dim with
/// 0 <= start <= end <= dim and step >= 1.
mlir::FailureOr<Shape> sliceShape(llvm::ArrayRef<int64_t> input,
                                  llvm::ArrayRef<int64_t> starts,
                                  llvm::ArrayRef<int64_t> ends,
                                  llvm::ArrayRef<int64_t> steps,
                                  EmitErrorFn emitError);

/// Concatenation along `axis`: ranks equal, other dims equal.
mlir::FailureOr<Shape> concatShape(llvm::ArrayRef<Shape> inputs, int64_t axis,
                                   EmitErrorFn emitError);

/// The pieces of `input` cut along `axis` into `sizes`.
mlir::FailureOr<llvm::SmallVector<Shape>>
splitShapes(llvm::ArrayRef<int64_t> input, int64_t axis,
            llvm::ArrayRef<int64_t> sizes, EmitErrorFn emitError);

/// `table: [V, D]`, `ids: [...]` -> `[..., D]`.
mlir::FailureOr<Shape> embeddingShape(llvm::ArrayRef<int64_t> table,
                                      llvm::ArrayRef<int64_t> ids,
                                      EmitErrorFn emitError);

/// `q: [B, Hq, T, D]`, `k: [B, Hkv, S, D]`, `v: [B, Hkv, S, Dv]` ->
/// `[B, Hq, T, Dv]`, with Hq a multiple of Hkv.
mlir::FailureOr<Shape> attentionShape(llvm::ArrayRef<int64_t> query,
                                      llvm::ArrayRef<int64_t> key,
                                      llvm::ArrayRef<int64_t> value,
                                      EmitErrorFn emitError);

} // namespace tailor::tg

#endif // TAILOR_DIALECTS_TG_TGSHAPES_H
