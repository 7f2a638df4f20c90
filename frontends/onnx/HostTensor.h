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
//===----------------------------------------------------------------------===//

#ifndef TAILOR_FRONTENDS_ONNX_HOSTTENSOR_H
#define TAILOR_FRONTENDS_ONNX_HOSTTENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
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

int64_t product(llvm::ArrayRef<int64_t> dims);

class HostTensor {
public:
  HostTensor() = default;
  HostTensor(ElementType type, llvm::ArrayRef<int64_t> dims);

  static HostTensor scalarInt(int64_t value, ElementType type = ElementType::Int64);
  static HostTensor scalarFloat(double value, ElementType type = ElementType::Float);
  static HostTensor vectorInt(llvm::ArrayRef<int64_t> values);

  ElementType type() const { return elementType; }
  bool isFloat() const { return isFloatType(elementType); }
  llvm::ArrayRef<int64_t> dims() const { return shape; }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t size() const { return static_cast<int64_t>(isFloat() ? floats.size() : ints.size()); }

  double getDouble(int64_t index) const {
    return isFloat() ? floats[index] : static_cast<double>(ints[index]);
  }
  int64_t getInt(int64_t index) const {
    return isFloat() ? static_cast<int64_t>(floats[index]) : ints[index];
  }
  /// Stores `value` converted to this tensor's type (rounded for float32,
  /// truncated for integers, 0/1 for bool).
  void setDouble(int64_t index, double value);
  void setInt(int64_t index, int64_t value);

  /// All values as int64 (the form shape inputs are read in).
  std::vector<int64_t> toInts() const;
  const std::vector<double> &floatData() const { return floats; }
  const std::vector<int64_t> &intData() const { return ints; }

  /// Same values, new dims (the element count must match).
  HostTensor reshaped(llvm::ArrayRef<int64_t> dims) const;
  /// Converts every element to `type` (ONNX Cast semantics).
  HostTensor castTo(ElementType type) const;

  /// Whether every element equals the first.
  bool isSplat() const;

private:
  ElementType elementType = ElementType::Float;
  Dims shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;
};

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
