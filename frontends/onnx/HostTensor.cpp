//===- HostTensor.cpp - compile-time tensors the importer folds -----------===//

#include "frontends/onnx/HostTensor.h"

#include <limits>
#include "frontends/onnx/LazyTensor.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <cmath>
#include <cstring>

namespace tailor::onnx_import {

using llvm::ArrayRef;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

bool isSupportedElementType(int32_t dataType) {
  switch (static_cast<ElementType>(dataType)) {
  case ElementType::Float:
  case ElementType::UInt8:
  case ElementType::Int8:
  case ElementType::UInt16:
  case ElementType::Int16:
  case ElementType::Int32:
  case ElementType::Int64:
  case ElementType::Bool:
  case ElementType::Float16:
  case ElementType::Double:
  case ElementType::UInt32:
  case ElementType::UInt64:
  case ElementType::BFloat16:
    return true;
  }
  return false;
}

bool isFloatType(ElementType type) {
  return type == ElementType::Float || type == ElementType::Float16 ||
         type == ElementType::Double || type == ElementType::BFloat16;
}

int64_t elementByteSize(ElementType type) {
  switch (type) {
  case ElementType::UInt8:
  case ElementType::Int8:
  case ElementType::Bool:
    return 1;
  case ElementType::UInt16:
  case ElementType::Int16:
  case ElementType::Float16:
  case ElementType::BFloat16:
    return 2;
  case ElementType::Float:
  case ElementType::Int32:
  case ElementType::UInt32:
    return 4;
  case ElementType::Int64:
  case ElementType::Double:
  case ElementType::UInt64:
    return 8;
  }
  return 0;
}

llvm::StringRef elementTypeName(int32_t dataType) {
  static const char *names[] = {
      "UNDEFINED", "FLOAT",   "UINT8",  "INT8",       "UINT16",    "INT16",
      "INT32",     "INT64",   "STRING", "BOOL",       "FLOAT16",   "DOUBLE",
      "UINT32",    "UINT64",  "COMPLEX64", "COMPLEX128", "BFLOAT16",
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
      "UINT4", "INT4", "FLOAT4E2M1"};
  if (dataType >= 0 &&
      dataType < static_cast<int32_t>(sizeof(names) / sizeof(names[0]))) {
    return names[dataType];
  }
  return "UNKNOWN";
}

std::optional<int64_t> checkedProduct(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
      return std::nullopt;
    }
  }
  return n;
}

/// The element count of `dims`, saturating: a count int64 cannot hold (or a
/// negative extent) reads as INT64_MAX, which fails every size limit it is
/// compared with, instead of wrapping into a small one.
int64_t product(ArrayRef<int64_t> dims) {
  if (llvm::is_contained(dims, 0)) {
    return 0;
  }
  return checkedProduct(dims).value_or(std::numeric_limits<int64_t>::max());
}

HostTensor HostTensor::lazyOf(std::shared_ptr<const LazyTensor> expr,
                              ArrayRef<int64_t> dims) {
  HostTensor t;
  t.elementType = expr->type();
  t.shape.assign(dims.begin(), dims.end());
  t.lazyElements = product(dims);
  t.lazy = std::move(expr);
  return t;
}

double HostTensor::lazyDouble(int64_t index) const {
  return lazy->at(index).asDouble();
}

int64_t HostTensor::lazyInt(int64_t index) const {
  return lazy->at(index).asInt();
}

HostTensor HostTensor::materialized() const {
  if (!lazy) {
    return *this;
  }
  HostTensor out(elementType, shape);
  // Walk the expression's own index space in row-major order (the same
  // order as the flat index): no division per element.
  llvm::ArrayRef<int64_t> dims = lazy->dims();
  llvm::SmallVector<int64_t, 6> index(dims.size(), 0);
  for (int64_t i = 0, n = size(); i < n; ++i) {
    HostElement e = lazy->atIndex(index);
    if (isFloat()) {
      out.floats[i] = e.asDouble();
    } else {
      out.ints[i] = e.asInt();
    }
    for (size_t a = dims.size(); a-- > 0;) {
      if (++index[a] < dims[a]) {
        break;
      }
      index[a] = 0;
    }
  }
  return out;
}

HostTensor::HostTensor(ElementType type, ArrayRef<int64_t> dims)
    : elementType(type), shape(dims.begin(), dims.end()) {
  if (isFloat()) {
    floats.assign(product(dims), 0.0);
  } else {
    ints.assign(product(dims), 0);
  }
}

HostTensor HostTensor::scalarInt(int64_t value, ElementType type) {
  HostTensor t(type, {});
  t.setInt(0, value);
  return t;
}

HostTensor HostTensor::scalarFloat(double value, ElementType type) {
  HostTensor t(type, {});
  t.setDouble(0, value);
  return t;
}

HostTensor HostTensor::vectorInt(ArrayRef<int64_t> values) {
  HostTensor t(ElementType::Int64, {static_cast<int64_t>(values.size())});
  t.ints.assign(values.begin(), values.end());
  return t;
}

/// Rounds `value` as storing it in `type` would.
static double roundTo(ElementType type, double value) {
  switch (type) {
  case ElementType::Float:
    return static_cast<double>(static_cast<float>(value));
  case ElementType::Float16:
  case ElementType::BFloat16: {
    llvm::APFloat f(value);
    bool lost = false;
    f.convert(type == ElementType::Float16 ? llvm::APFloat::IEEEhalf()
                                           : llvm::APFloat::BFloat(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
              &lost);
    return f.convertToDouble();
  }
  default:
    return value;
  }
}

/// Wraps `value` into the range of integer `type` (two's complement).
static int64_t wrapTo(ElementType type, int64_t value) {
  switch (type) {
  case ElementType::Bool:
    return value != 0;
  case ElementType::Int8:
    return static_cast<int8_t>(value);
  case ElementType::UInt8:
    return static_cast<uint8_t>(value);
  case ElementType::Int16:
    return static_cast<int16_t>(value);
  case ElementType::UInt16:
    return static_cast<uint16_t>(value);
  case ElementType::Int32:
    return static_cast<int32_t>(value);
  case ElementType::UInt32:
    return static_cast<uint32_t>(value);
  default:
    return value;
  }
}

double storedFloat(ElementType type, double value) {
  return roundTo(type, value);
}

int64_t storedIntFromDouble(ElementType type, double value) {
  if (type == ElementType::Bool) {
    return value != 0.0;
  }
  if (std::isnan(value)) {
    return 0;
  }
  // Saturate before converting: casting an out-of-range double is undefined.
  double clamped = std::fmax(std::fmin(value, 9.2e18), -9.2e18);
  return wrapTo(type, static_cast<int64_t>(clamped));
}

int64_t storedInt(ElementType type, int64_t value) {
  return wrapTo(type, value);
}

void HostTensor::setDouble(int64_t index, double value) {
  assert(!lazy && "a lazy tensor has no storage to write");
  if (isFloat()) {
    floats[index] = storedFloat(elementType, value);
  } else {
    ints[index] = storedIntFromDouble(elementType, value);
  }
}

void HostTensor::setInt(int64_t index, int64_t value) {
  assert(!lazy && "a lazy tensor has no storage to write");
  if (isFloat()) {
    floats[index] = storedFloat(elementType, static_cast<double>(value));
  } else {
    ints[index] = storedInt(elementType, value);
  }
}

std::vector<int64_t> HostTensor::toInts() const {
  if (lazy) {
    std::vector<int64_t> out(size());
    for (int64_t i = 0; i < size(); ++i) {
      out[i] = getInt(i);
    }
    return out;
  }
  if (!isFloat()) {
    return ints;
  }
  std::vector<int64_t> out(floats.size());
  for (size_t i = 0; i < floats.size(); ++i) {
    out[i] = static_cast<int64_t>(floats[i]);
  }
  return out;
}

HostTensor HostTensor::reshaped(ArrayRef<int64_t> dims) const {
  HostTensor t = *this;
  t.shape.assign(dims.begin(), dims.end());
  return t;
}

HostTensor HostTensor::castTo(ElementType type) const {
  // A held tensor stays held: it already fits the folding limit.
  if (lazy) {
    return lazyCast(*this, type);
  }
  HostTensor t(type, shape);
  int64_t n = size();
  for (int64_t i = 0; i < n; ++i) {
    if (isFloat()) {
      t.setDouble(i, floats[i]);
    } else {
      t.setInt(i, ints[i]);
    }
  }
  return t;
}

bool HostTensor::isSplat() const {
  if (lazy) {
    return materialized().isSplat();
  }
  if (isFloat()) {
    for (double v : floats) {
      if (!(v == floats.front()) &&
          !(std::isnan(v) && std::isnan(floats.front()))) {
        return false;
      }
    }
    return true;
  }
  for (int64_t v : ints) {
    if (v != ints.front()) {
      return false;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

static double halfToDouble(uint16_t bits, bool bfloat) {
  llvm::APFloat f(bfloat ? llvm::APFloat::BFloat() : llvm::APFloat::IEEEhalf(),
                  llvm::APInt(16, bits));
  bool lost = false;
  f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return f.convertToDouble();
}

llvm::Expected<HostTensor>
decodeTensorData(int32_t dataType, ArrayRef<int64_t> dims,
                 llvm::StringRef rawData, ArrayRef<float> floatData,
                 ArrayRef<int64_t> int64Data, ArrayRef<int32_t> int32Data,
                 ArrayRef<double> doubleData, llvm::StringRef what) {
  if (!isSupportedElementType(dataType)) {
    return makeError(llvm::formatv("{0}: element type {1} is not supported",
                                   what, elementTypeName(dataType)));
  }
  for (int64_t d : dims) {
    if (d < 0) {
      return makeError(llvm::formatv("{0}: negative dim {1}", what, d));
    }
  }
  ElementType type = static_cast<ElementType>(dataType);
  HostTensor t(type, dims);
  int64_t n = t.size();
  int64_t itemSize = elementByteSize(type);
  if (!rawData.empty()) {
    if (static_cast<int64_t>(rawData.size()) != n * itemSize) {
      return makeError(llvm::formatv(
          "{0}: raw_data holds {1} bytes, but {2} elements of {3} need {4}",
          what, rawData.size(), n, elementTypeName(dataType), n * itemSize));
    }
    const char *p = rawData.data();
    using namespace llvm::support;
    for (int64_t i = 0; i < n; ++i, p += itemSize) {
      switch (type) {
      case ElementType::Float: {
        uint32_t bits = endian::read32le(p);
        float f;
        std::memcpy(&f, &bits, 4);
        t.setDouble(i, f);
        break;
      }
      case ElementType::Double: {
        uint64_t bits = endian::read64le(p);
        double f;
        std::memcpy(&f, &bits, 8);
        t.setDouble(i, f);
        break;
      }
      case ElementType::Float16:
      case ElementType::BFloat16:
        t.setDouble(i, halfToDouble(endian::read16le(p),
                                    type == ElementType::BFloat16));
        break;
      case ElementType::Int64:
      case ElementType::UInt64:
        t.setInt(i, static_cast<int64_t>(endian::read64le(p)));
        break;
      case ElementType::Int32:
        t.setInt(i, static_cast<int32_t>(endian::read32le(p)));
        break;
      case ElementType::UInt32:
        t.setInt(i, endian::read32le(p));
        break;
      case ElementType::Int16:
        t.setInt(i, static_cast<int16_t>(endian::read16le(p)));
        break;
      case ElementType::UInt16:
        t.setInt(i, endian::read16le(p));
        break;
      case ElementType::Int8:
        t.setInt(i, static_cast<int8_t>(*p));
        break;
      case ElementType::UInt8:
      case ElementType::Bool:
        t.setInt(i, static_cast<uint8_t>(*p));
        break;
      }
    }
    return t;
  }
  // Typed fields: float_data (FLOAT), int64_data (INT64), double_data
  // (DOUBLE), int32_data (everything 32 bits or narrower, halves as bits).
  auto checkCount = [&](int64_t have) -> llvm::Error {
    if (have != n) {
      return makeError(llvm::formatv(
          "{0}: holds {1} values, but its dims {2} need {3}", what, have,
          llvm::make_range(dims.begin(), dims.end()), n));
    }
    return llvm::Error::success();
  };
  switch (type) {
  case ElementType::Float:
    if (auto err = checkCount(floatData.size())) {
      return err;
    }
    for (int64_t i = 0; i < n; ++i) {
      t.setDouble(i, floatData[i]);
    }
    break;
  case ElementType::Double:
    if (auto err = checkCount(doubleData.size())) {
      return err;
    }
    for (int64_t i = 0; i < n; ++i) {
      t.setDouble(i, doubleData[i]);
    }
    break;
  case ElementType::Int64:
  case ElementType::UInt64:
    if (auto err = checkCount(int64Data.size())) {
      return err;
    }
    for (int64_t i = 0; i < n; ++i) {
      t.setInt(i, int64Data[i]);
    }
    break;
  case ElementType::Float16:
  case ElementType::BFloat16:
    if (auto err = checkCount(int32Data.size())) {
      return err;
    }
    for (int64_t i = 0; i < n; ++i) {
      t.setDouble(i, halfToDouble(static_cast<uint16_t>(int32Data[i]),
                                  type == ElementType::BFloat16));
    }
    break;
  default:
    if (auto err = checkCount(int32Data.size())) {
      return err;
    }
    for (int64_t i = 0; i < n; ++i) {
      t.setInt(i, int32Data[i]);
    }
    break;
  }
  return t;
}

//===----------------------------------------------------------------------===//
// Folding kernels
//===----------------------------------------------------------------------===//

llvm::Expected<Dims> broadcastDims(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Dims out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return makeError(llvm::formatv(
          "shapes [{0}] and [{1}] do not broadcast (dim {2}: {3} vs {4})",
          llvm::make_range(a.begin(), a.end()),
          llvm::make_range(b.begin(), b.end()), i, da, db));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// Strides of `dims` (row-major) as seen from a broadcast result of rank
/// `rank`: broadcast dims get stride 0.
Dims broadcastStrides(ArrayRef<int64_t> dims, ArrayRef<int64_t> outDims) {
  size_t rank = outDims.size();
  Dims strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    size_t o = i + (rank - dims.size());
    strides[o] = dims[i] == 1 ? 0 : stride;
    stride *= dims[i];
  }
  return strides;
}

/// Calls `body(outIndex, offsets...)` for every element of `outDims`, where
/// each offset indexes one operand through its broadcast strides.
template <size_t N, typename Fn>
static void forEachBroadcast(ArrayRef<int64_t> outDims,
                             const std::array<Dims, N> &strides, Fn body) {
  size_t rank = outDims.size();
  int64_t total = product(outDims);
  Dims index(rank, 0);
  std::array<int64_t, N> offsets{};
  for (int64_t flat = 0; flat < total; ++flat) {
    body(flat, offsets);
    for (size_t d = rank; d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) {
        offsets[k] += strides[k][d];
      }
      if (index[d] < outDims[d]) {
        break;
      }
      for (size_t k = 0; k < N; ++k) {
        offsets[k] -= strides[k][d] * outDims[d];
      }
      index[d] = 0;
    }
  }
}

bool isComparison(BinaryFn fn) {
  switch (fn) {
  case BinaryFn::Equal:
  case BinaryFn::Less:
  case BinaryFn::Greater:
  case BinaryFn::LessOrEqual:
  case BinaryFn::GreaterOrEqual:
  case BinaryFn::And:
  case BinaryFn::Or:
  case BinaryFn::Xor:
    return true;
  default:
    return false;
  }
}

/// Comparisons and logic, alike on doubles and int64s; nullopt for the
/// arithmetic ops.
template <typename T>
static std::optional<T> compareOrLogic(BinaryFn fn, T x, T y) {
  switch (fn) {
  case BinaryFn::Equal: return x == y;
  case BinaryFn::Less: return x < y;
  case BinaryFn::Greater: return x > y;
  case BinaryFn::LessOrEqual: return x <= y;
  case BinaryFn::GreaterOrEqual: return x >= y;
  case BinaryFn::And: return (x != 0) && (y != 0);
  case BinaryFn::Or: return (x != 0) || (y != 0);
  case BinaryFn::Xor: return (x != 0) != (y != 0);
  default: return std::nullopt;
  }
}

double binaryFloat(BinaryFn fn, double x, double y) {
  if (std::optional<double> r = compareOrLogic(fn, x, y)) {
    return *r;
  }
  switch (fn) {
  case BinaryFn::Add: return x + y;
  case BinaryFn::Sub: return x - y;
  case BinaryFn::Mul: return x * y;
  case BinaryFn::Div: return x / y;
  case BinaryFn::Pow: return std::pow(x, y);
  case BinaryFn::Max: return std::fmax(x, y);
  case BinaryFn::Min: return std::fmin(x, y);
  case BinaryFn::Mod: {
    // Integer-style Mod takes the divisor's sign; FMod the dividend's.
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) {
      r += y;
    }
    return r;
  }
  case BinaryFn::FMod: return std::fmod(x, y);
  default: return 0; // comparisons and logic: above
  }
}

int64_t binaryInt(BinaryFn fn, int64_t x, int64_t y) {
  if (std::optional<int64_t> r = compareOrLogic(fn, x, y)) {
    return *r;
  }
  auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
  switch (fn) {
  case BinaryFn::Add: return wrap(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
  case BinaryFn::Sub: return wrap(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
  case BinaryFn::Mul: return wrap(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
  // Integer division by zero has no defined result; ONNX leaves it
  // unspecified, so fold to 0 rather than trap.
  case BinaryFn::Div: return y == 0 ? 0 : (x == INT64_MIN && y == -1 ? x : x / y);
  case BinaryFn::Mod: {
    // ONNX Mod with fmod=0 takes the divisor's sign (Python semantics).
    if (y == 0 || (x == INT64_MIN && y == -1)) {
      return 0;
    }
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      r += y;
    }
    return r;
  }
  case BinaryFn::FMod: return (y == 0 || (x == INT64_MIN && y == -1)) ? 0 : x % y;
  case BinaryFn::Pow:
    return storedIntFromDouble(ElementType::Int64,
                               std::pow(static_cast<double>(x), static_cast<double>(y)));
  case BinaryFn::Max: return std::max(x, y);
  case BinaryFn::Min: return std::min(x, y);
  default: return 0; // comparisons and logic: above
  }
}

llvm::Expected<HostTensor> foldBinary(BinaryFn fn, const HostTensor &a,
                                      const HostTensor &b) {
  llvm::Expected<Dims> dims = broadcastDims(a.dims(), b.dims());
  if (!dims) {
    return dims.takeError();
  }
  if (product(*dims) > kLazyFoldElements) {
    return lazyBinary(fn, a, b, *dims);
  }
  ElementType resultType = isComparison(fn) ? ElementType::Bool : a.type();
  HostTensor out(resultType, *dims);
  std::array<Dims, 2> strides = {broadcastStrides(a.dims(), *dims),
                                 broadcastStrides(b.dims(), *dims)};
  bool floatMath = a.isFloat() || b.isFloat();
  forEachBroadcast<2>(*dims, strides, [&](int64_t i, auto &off) {
    if (floatMath) {
      out.setDouble(i, binaryFloat(fn, a.getDouble(off[0]), b.getDouble(off[1])));
    } else {
      out.setInt(i, binaryInt(fn, a.getInt(off[0]), b.getInt(off[1])));
    }
  });
  return out;
}

ElementType unaryResultType(UnaryFn fn, ElementType input) {
  bool boolResult =
      fn == UnaryFn::Not || fn == UnaryFn::IsNaN || fn == UnaryFn::IsInf;
  return boolResult ? ElementType::Bool : input;
}

std::optional<int64_t> unaryInt(UnaryFn fn, int64_t x) {
  switch (fn) {
  case UnaryFn::Neg: return -x;
  case UnaryFn::Abs: return x < 0 ? -x : x;
  case UnaryFn::Relu: return x < 0 ? 0 : x;
  case UnaryFn::Not: return x == 0;
  case UnaryFn::Sign: return (x > 0) - (x < 0);
  case UnaryFn::IsNaN:
  case UnaryFn::IsInf: return 0;
  case UnaryFn::Floor:
  case UnaryFn::Ceil: return x;
  default: return std::nullopt;
  }
}

double unaryFloat(UnaryFn fn, double x) {
  switch (fn) {
  case UnaryFn::Neg: return -x;
  case UnaryFn::Abs: return std::fabs(x);
  case UnaryFn::Sqrt: return std::sqrt(x);
  case UnaryFn::Exp: return std::exp(x);
  case UnaryFn::Log: return std::log(x);
  case UnaryFn::Sin: return std::sin(x);
  case UnaryFn::Cos: return std::cos(x);
  case UnaryFn::Tanh: return std::tanh(x);
  case UnaryFn::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
  case UnaryFn::Erf: return std::erf(x);
  case UnaryFn::Relu: return x < 0 ? 0 : x;
  case UnaryFn::Reciprocal: return 1.0 / x;
  case UnaryFn::Not: return x == 0;
  case UnaryFn::Floor: return std::floor(x);
  case UnaryFn::Ceil: return std::ceil(x);
  case UnaryFn::Sign: return (x > 0) - (x < 0);
  case UnaryFn::IsNaN: return std::isnan(x);
  case UnaryFn::IsInf: return std::isinf(x);
  }
  return 0;
}

HostTensor foldUnary(UnaryFn fn, const HostTensor &a) {
  if (a.isLazy() || a.size() > kLazyFoldElements) {
    return lazyUnary(fn, a);
  }
  HostTensor out(unaryResultType(fn, a.type()), a.dims());
  for (int64_t i = 0, n = a.size(); i < n; ++i) {
    if (!a.isFloat()) {
      if (std::optional<int64_t> r = unaryInt(fn, a.getInt(i))) {
        out.setInt(i, *r);
        continue;
      }
    }
    out.setDouble(i, unaryFloat(fn, a.getDouble(i)));
  }
  return out;
}

llvm::Expected<HostTensor> foldWhere(const HostTensor &condition,
                                     const HostTensor &onTrue,
                                     const HostTensor &onFalse) {
  llvm::Expected<Dims> ab = broadcastDims(condition.dims(), onTrue.dims());
  if (!ab) {
    return ab.takeError();
  }
  llvm::Expected<Dims> dims = broadcastDims(*ab, onFalse.dims());
  if (!dims) {
    return dims.takeError();
  }
  if (product(*dims) > kLazyFoldElements) {
    return lazyWhere(condition, onTrue, onFalse, *dims);
  }
  HostTensor out(onTrue.type(), *dims);
  std::array<Dims, 3> strides = {broadcastStrides(condition.dims(), *dims),
                                 broadcastStrides(onTrue.dims(), *dims),
                                 broadcastStrides(onFalse.dims(), *dims)};
  forEachBroadcast<3>(*dims, strides, [&](int64_t i, auto &off) {
    const HostTensor &pick = condition.getInt(off[0]) ? onTrue : onFalse;
    int64_t at = condition.getInt(off[0]) ? off[1] : off[2];
    if (out.isFloat()) {
      out.setDouble(i, pick.getDouble(at));
    } else {
      out.setInt(i, pick.getInt(at));
    }
  });
  return out;
}

llvm::Expected<HostTensor> foldExpand(const HostTensor &input,
                                      ArrayRef<int64_t> dims) {
  // Expand broadcasts both ways: the result is broadcast(input, dims).
  llvm::Expected<Dims> outDims = broadcastDims(input.dims(), dims);
  if (!outDims) {
    return outDims.takeError();
  }
  if (product(*outDims) > kLazyFoldElements) {
    return lazyBroadcast(input, *outDims);
  }
  HostTensor out(input.type(), *outDims);
  std::array<Dims, 1> strides = {broadcastStrides(input.dims(), *outDims)};
  forEachBroadcast<1>(*outDims, strides, [&](int64_t i, auto &off) {
    if (out.isFloat()) {
      out.setDouble(i, input.getDouble(off[0]));
    } else {
      out.setInt(i, input.getInt(off[0]));
    }
  });
  return out;
}

/// Copies element `from` of `src` to element `to` of `dst` (same type).
static void copyElement(HostTensor &dst, int64_t to, const HostTensor &src,
                        int64_t from) {
  if (dst.isFloat()) {
    dst.setDouble(to, src.getDouble(from));
  } else {
    dst.setInt(to, src.getInt(from));
  }
}

Dims rowMajorStrides(ArrayRef<int64_t> dims) {
  Dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) {
    strides[i - 1] = strides[i] * dims[i];
  }
  return strides;
}

HostTensor foldTranspose(const HostTensor &input, ArrayRef<int64_t> perm) {
  if (input.isLazy() || input.size() > kLazyFoldElements) {
    return lazyTranspose(input, perm);
  }
  Dims outDims;
  Dims inStrides = rowMajorStrides(input.dims());
  Dims strides;
  for (int64_t p : perm) {
    outDims.push_back(input.dims()[p]);
    strides.push_back(inStrides[p]);
  }
  HostTensor out(input.type(), outDims);
  std::array<Dims, 1> s = {strides};
  forEachBroadcast<1>(outDims, s, [&](int64_t i, auto &off) {
    copyElement(out, i, input, off[0]);
  });
  return out;
}

HostTensor foldSlice(const HostTensor &input, ArrayRef<int64_t> starts,
                     ArrayRef<int64_t> steps, ArrayRef<int64_t> resultDims) {
  if (product(resultDims) > kLazyFoldElements) {
    return lazySlice(input, starts, steps, resultDims);
  }
  HostTensor out(input.type(), resultDims);
  Dims inStrides = rowMajorStrides(input.dims());
  int64_t base = 0;
  Dims strides;
  for (size_t d = 0; d < resultDims.size(); ++d) {
    base += starts[d] * inStrides[d];
    strides.push_back(steps[d] * inStrides[d]);
  }
  std::array<Dims, 1> s = {strides};
  forEachBroadcast<1>(resultDims, s, [&](int64_t i, auto &off) {
    copyElement(out, i, input, base + off[0]);
  });
  return out;
}

HostTensor foldConcat(ArrayRef<const HostTensor *> inputs, int64_t axis) {
  Dims outDims(inputs.front()->dims().begin(), inputs.front()->dims().end());
  outDims[axis] = 0;
  for (const HostTensor *t : inputs) {
    outDims[axis] += t->dims()[axis];
  }
  HostTensor out(inputs.front()->type(), outDims);
  int64_t outer = product(ArrayRef<int64_t>(outDims).take_front(axis));
  int64_t inner = product(ArrayRef<int64_t>(outDims).drop_front(axis + 1));
  int64_t to = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor *t : inputs) {
      int64_t chunk = t->dims()[axis] * inner;
      for (int64_t k = 0; k < chunk; ++k) {
        copyElement(out, to++, *t, o * chunk + k);
      }
    }
  }
  return out;
}

HostTensor foldGather(const HostTensor &data, const HostTensor &indices,
                      int64_t axis) {
  ArrayRef<int64_t> dd = data.dims();
  Dims outDims(dd.begin(), dd.begin() + axis);
  outDims.append(indices.dims().begin(), indices.dims().end());
  outDims.append(dd.begin() + axis + 1, dd.end());
  HostTensor out(data.type(), outDims);
  int64_t outer = product(dd.take_front(axis));
  int64_t inner = product(dd.drop_front(axis + 1));
  int64_t count = indices.size();
  int64_t to = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < count; ++k) {
      int64_t row = indices.getInt(k);
      for (int64_t j = 0; j < inner; ++j) {
        copyElement(out, to++, data, (o * dd[axis] + row) * inner + j);
      }
    }
  }
  return out;
}

HostTensor foldTrilu(const HostTensor &input, bool upper, int64_t k) {
  if (input.isLazy() || input.size() > kLazyFoldElements) {
    return lazyTrilu(input, upper, k);
  }
  HostTensor out = input;
  ArrayRef<int64_t> d = input.dims();
  int64_t rows = d[d.size() - 2], cols = d[d.size() - 1];
  int64_t matrices = product(d.drop_back(2));
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep) {
          out.setInt((m * rows + i) * cols + j, 0);
        }
      }
    }
  }
  return out;
}

HostTensor foldReduce(ReduceFn fn, const HostTensor &input,
                      ArrayRef<int64_t> axes, bool keepDims) {
  ArrayRef<int64_t> d = input.dims();
  llvm::SmallVector<bool, 4> reduced(d.size(), false);
  for (int64_t a : axes) {
    reduced[a] = true;
  }
  Dims keptDims, outDims;
  for (size_t i = 0; i < d.size(); ++i) {
    keptDims.push_back(reduced[i] ? 1 : d[i]);
    if (!reduced[i] || keepDims) {
      outDims.push_back(keptDims.back());
    }
  }
  std::vector<double> acc(product(keptDims),
                          fn == ReduceFn::Max   ? -INFINITY
                          : fn == ReduceFn::Min ? INFINITY
                          : fn == ReduceFn::Prod ? 1.0
                                                 : 0.0);
  std::array<Dims, 1> strides = {broadcastStrides(keptDims, d)};
  forEachBroadcast<1>(d, strides, [&](int64_t i, auto &off) {
    double v = input.getDouble(i);
    double &a = acc[off[0]];
    switch (fn) {
    case ReduceFn::Sum:
    case ReduceFn::Mean: a += v; break;
    case ReduceFn::Max: a = std::fmax(a, v); break;
    case ReduceFn::Min: a = std::fmin(a, v); break;
    case ReduceFn::Prod: a *= v; break;
    }
  });
  HostTensor out(input.type(), outDims);
  int64_t count = product(d) / std::max<int64_t>(1, product(keptDims));
  for (size_t i = 0; i < acc.size(); ++i) {
    out.setDouble(i, fn == ReduceFn::Mean ? acc[i] / count : acc[i]);
  }
  return out;
}

llvm::Expected<HostTensor> foldMatmul(const HostTensor &a, const HostTensor &b) {
  ArrayRef<int64_t> ad = a.dims(), bd = b.dims();
  int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  if (bd[bd.size() - 2] != k) {
    return makeError(llvm::formatv("matmul inner dims differ: {0} vs {1}", k,
                                   bd[bd.size() - 2]));
  }
  llvm::Expected<Dims> batch = broadcastDims(ad.drop_back(2), bd.drop_back(2));
  if (!batch) {
    return batch.takeError();
  }
  Dims outDims = *batch;
  outDims.push_back(m);
  outDims.push_back(n);
  HostTensor out(a.type(), outDims);
  std::array<Dims, 2> strides = {broadcastStrides(ad.drop_back(2), *batch),
                                 broadcastStrides(bd.drop_back(2), *batch)};
  forEachBroadcast<2>(*batch, strides, [&](int64_t bi, auto &off) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += a.getDouble(off[0] * m * k + i * k + p) *
                 b.getDouble(off[1] * k * n + p * n + j);
        }
        out.setDouble((bi * m + i) * n + j, sum);
      }
    }
  });
  return out;
}

HostTensor foldCumSum(const HostTensor &input, int64_t axis, bool exclusive,
                      bool reverse) {
  // A running count of a boolean tensor is an integer (PyTorch's cumsum of
  // bool gives int64; some exports feed CumSum a bool).
  HostTensor out(input.type() == ElementType::Bool ? ElementType::Int64
                                                   : input.type(),
                 input.dims());
  ArrayRef<int64_t> d = input.dims();
  int64_t outer = product(d.take_front(axis));
  int64_t len = d[axis];
  int64_t inner = product(d.drop_front(axis + 1));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      double acc = 0;
      for (int64_t s = 0; s < len; ++s) {
        int64_t pos = reverse ? len - 1 - s : s;
        int64_t at = (o * len + pos) * inner + j;
        double v = input.getDouble(at);
        if (exclusive) {
          out.setDouble(at, acc);
          acc += v;
        } else {
          acc += v;
          out.setDouble(at, acc);
        }
      }
    }
  }
  return out;
}

} // namespace tailor::onnx_import
