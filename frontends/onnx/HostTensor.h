//===- HostTensor.h - compile-time tensors the importer folds -------------===//
//
// A HostTensor is a small tensor whose values are known while importing:
// Constant nodes, integer initializers, and everything computed from them
// (the shape arithmetic of an export: Shape -> Gather -> Concat -> Reshape,
// Range/Trilu causal masks, rotary position tables). Folding these on the host
// is what makes the imported program fully static.
//
// Values are kept as doubles (float types) or int64 (integer and bool types),
// whatever the ONNX element type; float32 results are rounded to float after
// every operation so folded values equal what a float32 kernel computes.
//
// A fold whose result would exceed kLazyFoldElements (a T x S mask at long
// context) does not hold its values: it returns a lazy tensor, an expression
// over the element index (LazyTensor.h) that computes any element on demand.
// Lazy tensors read like held ones (getDouble/getInt), so every fold accepts
// them; the importer turns a lazy causal or banded mask into a tg.band_mask
// instead of ever materializing it.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_FRONTENDS_ONNX_HOSTTENSOR_H
#define TAILOR_FRONTENDS_ONNX_HOSTTENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tailor::onnx_import {

using Dims = llvm::SmallVector<int64_t, 4>;

/// ONNX element types (TensorProto.DataType numbers) the importer handles.
enum class ElementType : int32_t {
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
};

/// Whether `dataType` (a TensorProto.DataType number) is one we import.
bool isSupportedElementType(int32_t dataType);
bool isFloatType(ElementType type);
/// Size of one element in bytes (raw_data layout).
int64_t elementByteSize(ElementType type);
/// ONNX's name for the type ("FLOAT", "INT64", ...), for messages.
llvm::StringRef elementTypeName(int32_t dataType);

/// The element count of `dims`, saturating at INT64_MAX (see HostTensor.cpp).
int64_t product(llvm::ArrayRef<int64_t> dims);
/// The element count of `dims`, or nullopt if it overflows int64 (or a dim
/// is negative).
std::optional<int64_t> checkedProduct(llvm::ArrayRef<int64_t> dims);

/// Folds whose result has more elements than this return a lazy tensor.
constexpr int64_t kLazyFoldElements = int64_t(1) << 16;

class LazyTensor;

class HostTensor {
public:
  HostTensor() = default;
  HostTensor(ElementType type, llvm::ArrayRef<int64_t> dims);

  static HostTensor scalarInt(int64_t value, ElementType type = ElementType::Int64);
  static HostTensor scalarFloat(double value, ElementType type = ElementType::Float);
  static HostTensor vectorInt(llvm::ArrayRef<int64_t> values);

  /// A tensor of `dims` whose values `expr` computes (its element count
  /// must equal product(dims): `dims` may reshape the expression's own).
  static HostTensor lazyOf(std::shared_ptr<const LazyTensor> expr,
                           llvm::ArrayRef<int64_t> dims);

  ElementType type() const { return elementType; }
  bool isFloat() const { return isFloatType(elementType); }
  llvm::ArrayRef<int64_t> dims() const { return shape; }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t size() const {
    if (lazy) {
      return lazyElements;
    }
    return static_cast<int64_t>(isFloat() ? floats.size() : ints.size());
  }
  /// Whether the values are computed on demand rather than held.
  bool isLazy() const { return lazy != nullptr; }
  /// The expression of a lazy tensor (null when the values are held).
  const std::shared_ptr<const LazyTensor> &lazyExpr() const { return lazy; }

  double getDouble(int64_t index) const {
    if (lazy) {
      return lazyDouble(index);
    }
    return isFloat() ? floats[index] : static_cast<double>(ints[index]);
  }
  int64_t getInt(int64_t index) const {
    if (lazy) {
      return lazyInt(index);
    }
    return isFloat() ? static_cast<int64_t>(floats[index]) : ints[index];
  }
  /// Stores `value` converted to this tensor's type (rounded for float32,
  /// truncated for integers, 0/1 for bool).
  void setDouble(int64_t index, double value);
  void setInt(int64_t index, int64_t value);

  /// All values as int64 (the form shape inputs are read in).
  std::vector<int64_t> toInts() const;
  /// The held values (not for lazy tensors: materialize them first).
  const std::vector<double> &floatData() const { return floats; }
  const std::vector<int64_t> &intData() const { return ints; }
  /// The same tensor with its values held (a copy; evaluates a lazy tensor
  /// element by element, so callers check size() first).
  HostTensor materialized() const;

  /// Same values, new dims (the element count must match).
  HostTensor reshaped(llvm::ArrayRef<int64_t> dims) const;
  /// Converts every element to `type` (ONNX Cast semantics).
  HostTensor castTo(ElementType type) const;

  /// Whether every element equals the first.
  bool isSplat() const;

private:
  double lazyDouble(int64_t index) const;
  int64_t lazyInt(int64_t index) const;

  ElementType elementType = ElementType::Float;
  Dims shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  std::shared_ptr<const LazyTensor> lazy;
  int64_t lazyElements = 0;
};

//===----------------------------------------------------------------------===//
// Element semantics, shared by the folds and the lazy tensors so both compute
// the same values.
//===----------------------------------------------------------------------===//

/// The value HostTensor stores when `value` is written to a `type` element:
/// rounded for float types, truncated and wrapped for integers, 0/1 for bool.
double storedFloat(ElementType type, double value);
int64_t storedIntFromDouble(ElementType type, double value);
int64_t storedInt(ElementType type, int64_t value);

/// Decodes a TensorProto's inline data (raw_data or the typed fields).
/// `what` names the tensor in messages.
llvm::Expected<HostTensor> decodeTensorData(int32_t dataType,
                                            llvm::ArrayRef<int64_t> dims,
                                            llvm::StringRef rawData,
                                            llvm::ArrayRef<float> floatData,
                                            llvm::ArrayRef<int64_t> int64Data,
                                            llvm::ArrayRef<int32_t> int32Data,
                                            llvm::ArrayRef<double> doubleData,
                                            llvm::StringRef what);

//===----------------------------------------------------------------------===//
// Folding kernels. Each checks its shapes and returns a message on misuse.
//===----------------------------------------------------------------------===//

/// NumPy broadcast of two shapes.
llvm::Expected<Dims> broadcastDims(llvm::ArrayRef<int64_t> a,
                                   llvm::ArrayRef<int64_t> b);

enum class BinaryFn {
  Add, Sub, Mul, Div, Pow, Max, Min, Mod, FMod,
  Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor,
};
enum class UnaryFn {
  Neg, Abs, Sqrt, Exp, Log, Sin, Cos, Tanh, Sigmoid, Erf, Relu, Reciprocal,
  Not, Floor, Ceil, Sign, IsNaN, IsInf,
};

/// Comparisons and logic give Bool; everything else keeps the lhs type.
bool isComparison(BinaryFn fn);
/// One element of a binary op, computed in double (when either side is a
/// float type) or in int64.
double binaryFloat(BinaryFn fn, double x, double y);
int64_t binaryInt(BinaryFn fn, int64_t x, int64_t y);
/// The result type of a unary op on `input`.
ElementType unaryResultType(UnaryFn fn, ElementType input);
/// One element of a unary op on an integer input, if it has an integer
/// form (nullopt: compute it in double).
std::optional<int64_t> unaryInt(UnaryFn fn, int64_t x);
double unaryFloat(UnaryFn fn, double x);

/// Row-major strides of `dims` as seen from a broadcast result `outDims`
/// (broadcast dims get stride 0).
Dims broadcastStrides(llvm::ArrayRef<int64_t> dims,
                      llvm::ArrayRef<int64_t> outDims);
Dims rowMajorStrides(llvm::ArrayRef<int64_t> dims);

/// Elementwise binary op with broadcasting; comparisons and logic give Bool,
/// everything else keeps `a`'s type.
llvm::Expected<HostTensor> foldBinary(BinaryFn fn, const HostTensor &a,
                                      const HostTensor &b);
HostTensor foldUnary(UnaryFn fn, const HostTensor &a);
llvm::Expected<HostTensor> foldWhere(const HostTensor &condition,
                                     const HostTensor &onTrue,
                                     const HostTensor &onFalse);
llvm::Expected<HostTensor> foldExpand(const HostTensor &input,
                                      llvm::ArrayRef<int64_t> dims);
HostTensor foldTranspose(const HostTensor &input,
                         llvm::ArrayRef<int64_t> permutation);
/// Static slice with normalized starts/ends/steps (steps may be negative).
HostTensor foldSlice(const HostTensor &input, llvm::ArrayRef<int64_t> starts,
                     llvm::ArrayRef<int64_t> steps,
                     llvm::ArrayRef<int64_t> resultDims);
HostTensor foldConcat(llvm::ArrayRef<const HostTensor *> inputs, int64_t axis);
/// Gather along `axis` with already-normalized (non-negative) indices.
HostTensor foldGather(const HostTensor &data, const HostTensor &indices,
                      int64_t axis);
/// Trilu: keep the lower (upper = false) or upper triangle of the last two
/// dims relative to diagonal `k`, zero elsewhere.
HostTensor foldTrilu(const HostTensor &input, bool upper, int64_t k);
enum class ReduceFn { Sum, Mean, Max, Min, Prod };
HostTensor foldReduce(ReduceFn fn, const HostTensor &input,
                      llvm::ArrayRef<int64_t> axes, bool keepDims);
/// Batched matrix product with broadcast batch dims (both rank >= 2).
llvm::Expected<HostTensor> foldMatmul(const HostTensor &a, const HostTensor &b);
HostTensor foldCumSum(const HostTensor &input, int64_t axis, bool exclusive,
                      bool reverse);

} // namespace tailor::onnx_import

#endif // TAILOR_FRONTENDS_ONNX_HOSTTENSOR_H
