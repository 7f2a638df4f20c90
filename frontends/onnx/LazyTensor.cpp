//===- LazyTensor.cpp - compile-time tensors computed from their index ----===//

#include "frontends/onnx/LazyTensor.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

namespace tailor::onnx_import {

using llvm::ArrayRef;

//===----------------------------------------------------------------------===//
// Affine forms and dependences
//===----------------------------------------------------------------------===//

bool AffineIndexForm::isConstant() const {
  return llvm::all_of(coef, [](int64_t c) { return c == 0; });
}

IndexDependence IndexDependence::ofForms(ArrayRef<AffineIndexForm> forms) {
  IndexDependence d;
  d.known = true;
  for (const AffineIndexForm &f : forms) {
    if (!f.isConstant()) {
      d.forms.push_back(f);
    }
  }
  return d;
}

IndexDependence IndexDependence::ofExact(AffineIndexForm form) {
  IndexDependence d = ofForms({form});
  d.exact = std::move(form);
  return d;
}

/// The smallest and largest value `form` takes over the index box `dims`,
/// or nullopt if either overflows int64.
static std::optional<std::pair<int64_t, int64_t>>
rangeOf(const AffineIndexForm &form, ArrayRef<int64_t> dims) {
  int64_t lo = form.constant, hi = form.constant;
  for (size_t a = 0; a < dims.size(); ++a) {
    int64_t extent = 0;
    if (dims[a] == 0) {
      continue;
    }
    if (__builtin_mul_overflow(form.coef[a], dims[a] - 1, &extent)) {
      return std::nullopt;
    }
    int64_t &side = extent < 0 ? lo : hi;
    if (__builtin_add_overflow(side, extent, &side)) {
      return std::nullopt;
    }
  }
  return std::make_pair(lo, hi);
}

/// a + sign * b, or nullopt on overflow.
static std::optional<AffineIndexForm>
addForms(const AffineIndexForm &a, const AffineIndexForm &b, int64_t sign) {
  AffineIndexForm out = a;
  for (size_t i = 0; i < out.coef.size(); ++i) {
    int64_t term = 0;
    if (__builtin_mul_overflow(b.coef[i], sign, &term) ||
        __builtin_add_overflow(out.coef[i], term, &out.coef[i])) {
      return std::nullopt;
    }
  }
  int64_t term = 0;
  if (__builtin_mul_overflow(b.constant, sign, &term) ||
      __builtin_add_overflow(out.constant, term, &out.constant)) {
    return std::nullopt;
  }
  return out;
}

static std::optional<AffineIndexForm> scaleForm(const AffineIndexForm &a,
                                                int64_t factor) {
  AffineIndexForm out = a;
  for (int64_t &c : out.coef) {
    if (__builtin_mul_overflow(c, factor, &c)) {
      return std::nullopt;
    }
  }
  if (__builtin_mul_overflow(out.constant, factor, &out.constant)) {
    return std::nullopt;
  }
  return out;
}

/// Operand axis a reads result axis `axis` (-1: none) as
/// `scale * index + offset`.
struct AxisMap {
  int64_t axis = -1;
  int64_t scale = 1;
  int64_t offset = 0;
};

/// Rewrites a dependence over an operand's axes as one over the result's.
static IndexDependence mapDependence(const IndexDependence &d,
                                     ArrayRef<AxisMap> map, size_t resultRank) {
  if (!d.known) {
    return d;
  }
  auto mapForm = [&](const AffineIndexForm &f) -> std::optional<AffineIndexForm> {
    AffineIndexForm out;
    out.coef.assign(resultRank, 0);
    out.constant = f.constant;
    for (size_t a = 0; a < map.size(); ++a) {
      int64_t term = 0;
      if (__builtin_mul_overflow(f.coef[a], map[a].offset, &term) ||
          __builtin_add_overflow(out.constant, term, &out.constant)) {
        return std::nullopt;
      }
      if (map[a].axis < 0) {
        continue;
      }
      int64_t &c = out.coef[map[a].axis];
      if (__builtin_mul_overflow(f.coef[a], map[a].scale, &term) ||
          __builtin_add_overflow(c, term, &c)) {
        return std::nullopt;
      }
    }
    return out;
  };
  IndexDependence out;
  out.known = true;
  for (const AffineIndexForm &f : d.forms) {
    std::optional<AffineIndexForm> m = mapForm(f);
    if (!m) {
      return IndexDependence::unknown();
    }
    if (!m->isConstant()) {
      out.forms.push_back(*m);
    }
  }
  if (d.exact) {
    std::optional<AffineIndexForm> m = mapForm(*d.exact);
    if (!m) {
      return IndexDependence::unknown();
    }
    out.exact = *m;
  }
  return out;
}

/// Axis maps of an operand of `dims` broadcast into a result of rank `rank`.
static llvm::SmallVector<AxisMap, 4> broadcastMap(ArrayRef<int64_t> dims,
                                                  size_t rank) {
  llvm::SmallVector<AxisMap, 4> map(dims.size());
  for (size_t a = 0; a < dims.size(); ++a) {
    if (dims[a] != 1) {
      map[a].axis = static_cast<int64_t>(a + rank - dims.size());
    }
  }
  return map;
}

/// Fits `values` over `dims` to an exact affine form (integers only).
static std::optional<AffineIndexForm> fitAffine(const HostTensor &t) {
  ArrayRef<int64_t> dims = t.dims();
  int64_t n = t.size();
  auto valueAt = [&](int64_t flat) -> std::optional<int64_t> {
    if (!t.isFloat()) {
      return t.getInt(flat);
    }
    double v = t.getDouble(flat);
    // Floats count when they hold integers exactly (positions cast to
    // float before a comparison).
    if (!(std::fabs(v) < 9.0e15) || v != std::floor(v)) {
      return std::nullopt;
    }
    return static_cast<int64_t>(v);
  };
  AffineIndexForm form;
  form.coef.assign(dims.size(), 0);
  if (n == 0) {
    return form;
  }
  std::optional<int64_t> first = valueAt(0);
  if (!first) {
    return std::nullopt;
  }
  form.constant = *first;
  Dims strides = rowMajorStrides(dims);
  for (size_t a = 0; a < dims.size(); ++a) {
    if (dims[a] > 1) {
      std::optional<int64_t> next = valueAt(strides[a]);
      if (!next || __builtin_sub_overflow(*next, *first, &form.coef[a])) {
        return std::nullopt;
      }
    }
  }
  if (!rangeOf(form, dims)) {
    return std::nullopt;
  }
  Dims index(dims.size(), 0);
  int64_t expected = form.constant;
  for (int64_t flat = 0; flat < n; ++flat) {
    std::optional<int64_t> v = valueAt(flat);
    if (!v || *v != expected) {
      return std::nullopt;
    }
    for (size_t a = dims.size(); a-- > 0;) {
      expected += form.coef[a];
      if (++index[a] < dims[a]) {
        break;
      }
      expected -= form.coef[a] * dims[a];
      index[a] = 0;
    }
  }
  return form;
}

/// A held tensor is exactly affine (an arange, a constant), or else some
/// function of the index along each of its non-unit axes.
static IndexDependence dependenceOfHeld(const HostTensor &t) {
  if (std::optional<AffineIndexForm> form = fitAffine(t)) {
    return IndexDependence::ofExact(*form);
  }
  if (t.isSplat()) {
    return IndexDependence::ofForms({});
  }
  llvm::SmallVector<AffineIndexForm, 2> forms;
  for (size_t a = 0; a < t.dims().size(); ++a) {
    if (t.dims()[a] > 1) {
      AffineIndexForm f;
      f.coef.assign(t.dims().size(), 0);
      f.coef[a] = 1;
      forms.push_back(std::move(f));
    }
  }
  return IndexDependence::ofForms(forms);
}

IndexDependence dependenceOf(const HostTensor &tensor) {
  if (!tensor.isLazy()) {
    return dependenceOfHeld(tensor);
  }
  const LazyTensor &expr = *tensor.lazyExpr();
  if (expr.dims() == tensor.dims()) {
    return expr.dependence();
  }
  // A reshape that only adds or drops unit axes keeps every other axis.
  llvm::SmallVector<AxisMap, 4> map(expr.dims().size());
  size_t next = 0;
  ArrayRef<int64_t> to = tensor.dims();
  for (size_t a = 0; a < expr.dims().size(); ++a) {
    if (expr.dims()[a] == 1) {
      continue;
    }
    while (next < to.size() && to[next] == 1) {
      ++next;
    }
    if (next == to.size() || to[next] != expr.dims()[a]) {
      return IndexDependence::unknown();
    }
    map[a].axis = static_cast<int64_t>(next++);
  }
  while (next < to.size() && to[next] == 1) {
    ++next;
  }
  if (next != to.size()) {
    return IndexDependence::unknown();
  }
  return mapDependence(expr.dependence(), map, to.size());
}

//===----------------------------------------------------------------------===//
// LazyTensor
//===----------------------------------------------------------------------===//

LazyTensor::LazyTensor(ElementType type, ArrayRef<int64_t> dims)
    : elementType(type), shape(dims.begin(), dims.end()) {}

LazyTensor::~LazyTensor() = default;

HostElement LazyTensor::at(int64_t flat) const {
  llvm::SmallVector<int64_t, 6> index(shape.size(), 0);
  for (size_t a = shape.size(); a-- > 0;) {
    index[a] = flat % shape[a];
    flat /= shape[a];
  }
  return atIndex(index);
}

const IndexDependence &LazyTensor::dependence() const {
  if (!cachedDependence) {
    cachedDependence = computeDependence();
  }
  return *cachedDependence;
}

HostElement LazyTensor::storeFloat(double value) const {
  if (isFloatType(elementType)) {
    return HostElement::ofFloat(storedFloat(elementType, value));
  }
  return HostElement::ofInt(storedIntFromDouble(elementType, value));
}

HostElement LazyTensor::storeInt(int64_t value) const {
  if (isFloatType(elementType)) {
    return HostElement::ofFloat(
        storedFloat(elementType, static_cast<double>(value)));
  }
  return HostElement::ofInt(storedInt(elementType, value));
}

namespace {

/// An operand read through broadcasting from the result's index.
struct Operand {
  HostTensor tensor;
  Dims strides;
  size_t resultRank = 0;
  /// A lazy operand with its expression's own dims is read by multi-index,
  /// skipping the flat index (and its divisions) between the two nodes.
  bool direct = false;

  Operand(const HostTensor &t, ArrayRef<int64_t> resultDims)
      : tensor(t), strides(broadcastStrides(t.dims(), resultDims)),
        resultRank(resultDims.size()),
        direct(t.isLazy() && t.lazyExpr()->dims() == t.dims()) {}

  HostElement at(ArrayRef<int64_t> index) const {
    if (direct) {
      ArrayRef<int64_t> dims = tensor.dims();
      size_t offset = index.size() - dims.size();
      llvm::SmallVector<int64_t, 6> inner(dims.size());
      for (size_t a = 0; a < dims.size(); ++a) {
        inner[a] = dims[a] == 1 ? 0 : index[a + offset];
      }
      return tensor.lazyExpr()->atIndex(inner);
    }
    int64_t flat = 0;
    for (size_t a = 0; a < index.size(); ++a) {
      flat += index[a] * strides[a];
    }
    return tensor.isFloat() ? HostElement::ofFloat(tensor.getDouble(flat))
                            : HostElement::ofInt(tensor.getInt(flat));
  }
  IndexDependence dependence() const {
    return mapDependence(dependenceOf(tensor),
                         broadcastMap(tensor.dims(), resultRank), resultRank);
  }
};

/// The union of what several operands depend on (exact forms dropped).
IndexDependence unionOf(ArrayRef<IndexDependence> parts) {
  llvm::SmallVector<AffineIndexForm, 4> forms;
  for (const IndexDependence &d : parts) {
    if (!d.known) {
      return IndexDependence::unknown();
    }
    llvm::append_range(forms, d.forms);
  }
  return IndexDependence::ofForms(forms);
}

/// Whether an exact form over `dims` stays exact once stored as `type`.
bool fitsExactly(const AffineIndexForm &form, ArrayRef<int64_t> dims,
                 ElementType type) {
  std::optional<std::pair<int64_t, int64_t>> range = rangeOf(form, dims);
  if (!range) {
    return false;
  }
  auto [lo, hi] = *range;
  switch (type) {
  case ElementType::Int64: return true;
  case ElementType::Int32: return lo >= INT32_MIN && hi <= INT32_MAX;
  case ElementType::Int16: return lo >= INT16_MIN && hi <= INT16_MAX;
  case ElementType::Int8: return lo >= INT8_MIN && hi <= INT8_MAX;
  case ElementType::UInt8: return lo >= 0 && hi <= UINT8_MAX;
  case ElementType::UInt16: return lo >= 0 && hi <= UINT16_MAX;
  case ElementType::UInt32: return lo >= 0 && hi <= UINT32_MAX;
  case ElementType::UInt64: return lo >= 0;
  case ElementType::Bool: return lo >= 0 && hi <= 1;
  case ElementType::Float: return lo >= -(1 << 24) && hi <= (1 << 24);
  case ElementType::Double: return lo >= -(int64_t(1) << 53) && hi <= (int64_t(1) << 53);
  case ElementType::Float16: return lo >= -2048 && hi <= 2048;
  case ElementType::BFloat16: return lo >= -256 && hi <= 256;
  }
  return false;
}

/// An exact result of an op, kept only if the result type holds it exactly.
IndexDependence exactOrForms(std::optional<AffineIndexForm> form,
                             ArrayRef<int64_t> dims, ElementType type,
                             ArrayRef<IndexDependence> fallback) {
  if (form && fitsExactly(*form, dims, type)) {
    return IndexDependence::ofExact(*form);
  }
  return unionOf(fallback);
}

class BinaryNode final : public LazyTensor {
public:
  BinaryNode(BinaryFn fn, const HostTensor &a, const HostTensor &b,
             ArrayRef<int64_t> dims)
      : LazyTensor(isComparison(fn) ? ElementType::Bool : a.type(), dims),
        fn(fn), lhs(a, dims), rhs(b, dims),
        floatMath(a.isFloat() || b.isFloat()) {}

  HostElement atIndex(ArrayRef<int64_t> index) const override {
    HostElement x = lhs.at(index), y = rhs.at(index);
    if (floatMath) {
      return storeFloat(binaryFloat(fn, x.asDouble(), y.asDouble()));
    }
    return storeInt(binaryInt(fn, x.asInt(), y.asInt()));
  }

protected:
  IndexDependence computeDependence() const override {
    IndexDependence a = lhs.dependence(), b = rhs.dependence();
    if (!a.known || !b.known) {
      return IndexDependence::unknown();
    }
    if (!a.exact || !b.exact) {
      return unionOf({a, b});
    }
    switch (fn) {
    case BinaryFn::Equal:
    case BinaryFn::Less:
    case BinaryFn::Greater:
    case BinaryFn::LessOrEqual:
    case BinaryFn::GreaterOrEqual: {
      // Comparing two exact integers is a function of their difference.
      std::optional<AffineIndexForm> diff = addForms(*a.exact, *b.exact, -1);
      if (!diff) {
        return unionOf({a, b});
      }
      return IndexDependence::ofForms({*diff});
    }
    default:
      break;
    }
    // Arithmetic stays exact only in integer types.
    if (floatMath) {
      return unionOf({a, b});
    }
    std::optional<AffineIndexForm> result;
    if (fn == BinaryFn::Add) {
      result = addForms(*a.exact, *b.exact, 1);
    } else if (fn == BinaryFn::Sub) {
      result = addForms(*a.exact, *b.exact, -1);
    } else if (fn == BinaryFn::Mul && a.exact->isConstant()) {
      result = scaleForm(*b.exact, a.exact->constant);
    } else if (fn == BinaryFn::Mul && b.exact->isConstant()) {
      result = scaleForm(*a.exact, b.exact->constant);
    }
    return exactOrForms(result, dims(), type(), {a, b});
  }

private:
  BinaryFn fn;
  Operand lhs, rhs;
  bool floatMath;
};

class UnaryNode final : public LazyTensor {
public:
  UnaryNode(UnaryFn fn, const HostTensor &a)
      : LazyTensor(unaryResultType(fn, a.type()), a.dims()), fn(fn),
        input(a, a.dims()) {}

  HostElement atIndex(ArrayRef<int64_t> index) const override {
    HostElement x = input.at(index);
    if (!x.isFloat) {
      if (std::optional<int64_t> r = unaryInt(fn, x.i)) {
        return storeInt(*r);
      }
    }
    return storeFloat(unaryFloat(fn, x.asDouble()));
  }

protected:
  IndexDependence computeDependence() const override {
    IndexDependence d = input.dependence();
    if (d.known && d.exact && fn == UnaryFn::Neg &&
        !input.tensor.isFloat()) {
      return exactOrForms(scaleForm(*d.exact, -1), dims(), type(), {d});
    }
    return unionOf({d});
  }

private:
  UnaryFn fn;
  Operand input;
};

class CastNode final : public LazyTensor {
public:
  CastNode(const HostTensor &a, ElementType to)
      : LazyTensor(to, a.dims()), input(a, a.dims()) {}

  HostElement atIndex(ArrayRef<int64_t> index) const override {
    HostElement x = input.at(index);
    return x.isFloat ? storeFloat(x.f) : storeInt(x.i);
  }

protected:
  IndexDependence computeDependence() const override {
    IndexDependence d = input.dependence();
    if (d.known && d.exact) {
      return exactOrForms(d.exact, dims(), type(), {d});
    }
    return unionOf({d});
  }

private:
  Operand input;
};

class WhereNode final : public LazyTensor {
public:
  WhereNode(const HostTensor &c, const HostTensor &x, const HostTensor &y,
            ArrayRef<int64_t> dims)
      : LazyTensor(x.type(), dims), condition(c, dims), onTrue(x, dims),
        onFalse(y, dims) {}

  HostElement atIndex(ArrayRef<int64_t> index) const override {
    HostElement picked = condition.at(index).asInt() ? onTrue.at(index)
                                                     : onFalse.at(index);
    return picked.isFloat ? storeFloat(picked.f) : storeInt(picked.i);
  }

protected:
  IndexDependence computeDependence() const override {
    return unionOf(
        {condition.dependence(), onTrue.dependence(), onFalse.dependence()});
  }

private:
  Operand condition, onTrue, onFalse;
};

class BroadcastNode final : public LazyTensor {
public:
  BroadcastNode(const HostTensor &a, ArrayRef<int64_t> dims)
      : LazyTensor(a.type(), dims), input(a, dims) {}

  HostElement atIndex(ArrayRef<int64_t> index) const override {
    return input.at(index);
  }

protected:
  IndexDependence computeDependence() const override {
    return input.dependence();
  }

private:
  Operand input;
};

/// Transpose and slice: operand axis a reads result axis map[a].axis as
/// scale * index + offset.
class AxisMapNode final : public LazyTensor {
public:
  AxisMapNode(const HostTensor &a, ArrayRef<int64_t> dims,
              llvm::SmallVector<AxisMap, 4> map)
      : LazyTensor(a.type(), dims), input(a), map(std::move(map)),
        strides(rowMajorStrides(a.dims())) {}

  HostElement atIndex(ArrayRef<int64_t> index) const override {
    int64_t flat = 0;
    for (size_t a = 0; a < map.size(); ++a) {
      int64_t i = map[a].offset;
      if (map[a].axis >= 0) {
        i += map[a].scale * index[map[a].axis];
      }
      flat += i * strides[a];
    }
    return input.isFloat() ? HostElement::ofFloat(input.getDouble(flat))
                           : HostElement::ofInt(input.getInt(flat));
  }

protected:
  IndexDependence computeDependence() const override {
    return mapDependence(dependenceOf(input), map, dims().size());
  }

private:
  HostTensor input;
  llvm::SmallVector<AxisMap, 4> map;
  Dims strides;
};

class TriluNode final : public LazyTensor {
public:
  TriluNode(const HostTensor &a, bool upper, int64_t k)
      : LazyTensor(a.type(), a.dims()), input(a, a.dims()), upper(upper),
        k(k) {}

  HostElement atIndex(ArrayRef<int64_t> index) const override {
    size_t r = index.size();
    int64_t diff = index[r - 1] - index[r - 2];
    bool keep = upper ? diff >= k : diff <= k;
    return keep ? input.at(index) : storeInt(0);
  }

protected:
  IndexDependence computeDependence() const override {
    // Trilu keeps or zeroes by col - row.
    AffineIndexForm diagonal;
    diagonal.coef.assign(dims().size(), 0);
    diagonal.coef[dims().size() - 1] = 1;
    diagonal.coef[dims().size() - 2] = -1;
    return unionOf({input.dependence(), IndexDependence::ofForms({diagonal})});
  }

private:
  Operand input;
  bool upper;
  int64_t k;
};

template <typename NodeTy, typename... Args>
HostTensor makeLazy(Args &&...args) {
  auto node = std::make_shared<const NodeTy>(std::forward<Args>(args)...);
  Dims dims(node->dims().begin(), node->dims().end());
  return HostTensor::lazyOf(std::move(node), dims);
}

} // namespace

//===----------------------------------------------------------------------===//
// Lazy folds
//===----------------------------------------------------------------------===//

HostTensor lazyBinary(BinaryFn fn, const HostTensor &a, const HostTensor &b,
                      ArrayRef<int64_t> dims) {
  return makeLazy<BinaryNode>(fn, a, b, dims);
}

HostTensor lazyUnary(UnaryFn fn, const HostTensor &a) {
  return makeLazy<UnaryNode>(fn, a);
}

HostTensor lazyCast(const HostTensor &a, ElementType type) {
  return makeLazy<CastNode>(a, type);
}

HostTensor lazyWhere(const HostTensor &condition, const HostTensor &onTrue,
                     const HostTensor &onFalse, ArrayRef<int64_t> dims) {
  return makeLazy<WhereNode>(condition, onTrue, onFalse, dims);
}

HostTensor lazyBroadcast(const HostTensor &input, ArrayRef<int64_t> dims) {
  return makeLazy<BroadcastNode>(input, dims);
}

HostTensor lazyTranspose(const HostTensor &input, ArrayRef<int64_t> perm) {
  Dims dims;
  llvm::SmallVector<AxisMap, 4> map(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    dims.push_back(input.dims()[perm[i]]);
    map[perm[i]].axis = static_cast<int64_t>(i);
  }
  return makeLazy<AxisMapNode>(input, dims, std::move(map));
}

HostTensor lazySlice(const HostTensor &input, ArrayRef<int64_t> starts,
                     ArrayRef<int64_t> steps, ArrayRef<int64_t> resultDims) {
  llvm::SmallVector<AxisMap, 4> map(resultDims.size());
  for (size_t a = 0; a < resultDims.size(); ++a) {
    map[a] = AxisMap{static_cast<int64_t>(a), steps[a], starts[a]};
  }
  return makeLazy<AxisMapNode>(input, resultDims, std::move(map));
}

HostTensor lazyTrilu(const HostTensor &input, bool upper, int64_t k) {
  return makeLazy<TriluNode>(input, upper, k);
}

//===----------------------------------------------------------------------===//
// Band masks
//===----------------------------------------------------------------------===//

/// Whether a dependence proves the values are one function of j - i over the
/// last two axes, the same for every leading index.
static bool dependsOnlyOnDiagonal(const IndexDependence &d, size_t rank) {
  if (!d.known) {
    return false;
  }
  for (const AffineIndexForm &f : d.forms) {
    for (size_t a = 0; a + 2 < rank; ++a) {
      if (f.coef[a] != 0) {
        return false;
      }
    }
    if (f.coef[rank - 2] != -f.coef[rank - 1]) {
      return false;
    }
  }
  return true;
}

/// The element as a double, if it is exactly one (and not NaN).
static std::optional<double> exactValue(const HostTensor &t, int64_t flat) {
  if (t.isFloat()) {
    double v = t.getDouble(flat);
    return std::isnan(v) ? std::nullopt : std::optional<double>(v);
  }
  int64_t v = t.getInt(flat);
  if (v > (int64_t(1) << 53) || v < -(int64_t(1) << 53)) {
    return std::nullopt;
  }
  return static_cast<double>(v);
}

/// The values along the diagonals d = j - i, from d = -(T-1) to S-1, read
/// from the first row and first column of the first matrix.
static std::optional<std::vector<double>> diagonalProfile(const HostTensor &t,
                                                          int64_t rows,
                                                          int64_t cols) {
  std::vector<double> profile;
  profile.reserve(rows + cols - 1);
  for (int64_t d = -(rows - 1); d < cols; ++d) {
    int64_t i = d < 0 ? -d : 0;
    std::optional<double> v = exactValue(t, i * cols + (i + d));
    if (!v) {
      return std::nullopt;
    }
    profile.push_back(*v);
  }
  return profile;
}

/// Checks every element of a held tensor against its diagonal's value.
static bool matchesProfile(const HostTensor &t, ArrayRef<double> profile,
                           int64_t rows, int64_t cols) {
  int64_t matrices = t.size() / (rows * cols);
  for (int64_t m = 0, flat = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j, ++flat) {
        std::optional<double> v = exactValue(t, flat);
        if (!v || *v != profile[j - i + rows - 1]) {
          return false;
        }
      }
    }
  }
  return true;
}

/// A two-valued profile where one value fills one contiguous run.
static std::optional<BandMask> bandOfProfile(ArrayRef<double> profile,
                                             int64_t rows) {
  auto runOf = [&](double value) -> std::optional<std::pair<int64_t, int64_t>> {
    int64_t first = -1, last = -1;
    for (int64_t k = 0; k < static_cast<int64_t>(profile.size()); ++k) {
      if (profile[k] == value) {
        if (first < 0) first = k;
        else if (last != k - 1) return std::nullopt;
        last = k;
      }
    }
    return std::make_pair(first, last);
  };
  double atZero = profile[rows - 1];
  std::optional<double> other;
  for (double v : profile) {
    if (v != atZero) {
      if (other && *other != v) {
        return std::nullopt;
      }
      other = v;
    }
  }
  if (!other) {
    return std::nullopt;
  }
  for (auto [inside, outside] : {std::pair(atZero, *other), std::pair(*other, atZero)}) {
    if (std::optional<std::pair<int64_t, int64_t>> run = runOf(inside)) {
      return BandMask{run->first - (rows - 1), run->second - (rows - 1),
                      inside, outside};
    }
  }
  return std::nullopt;
}

std::optional<BandMask> detectBand(const HostTensor &tensor) {
  ArrayRef<int64_t> dims = tensor.dims();
  if (dims.size() < 2) {
    return std::nullopt;
  }
  int64_t rows = dims[dims.size() - 2], cols = dims.back();
  // A leading dim of 0 leaves no element to read (found by the fuzzer). A
  // mask has one value per diagonal, read one by one: past kMaxDiagonals
  // (4M, beyond the context lengths people train) that walk would be the
  // hang, so such a tensor is no mask.
  constexpr int64_t kMaxDiagonals = int64_t(1) << 22;
  if (rows < 1 || cols < 1 || rows + cols < 3 || tensor.size() == 0 ||
      rows > kMaxDiagonals || cols > kMaxDiagonals) {
    return std::nullopt;
  }
  if (tensor.isLazy()) {
    IndexDependence dependence = dependenceOf(tensor);
    if (!dependsOnlyOnDiagonal(dependence, dims.size())) {
      return std::nullopt;
    }
    // Constant over the matrix (an Expand of one value): no band, and no
    // reason to walk its diagonals (found by the fuzzer: a 2^24-wide
    // Expand took 25 s under ASan).
    if (llvm::all_of(dependence.forms, [&](const AffineIndexForm &f) {
          return f.coef[dims.size() - 1] == 0;
        })) {
      return std::nullopt;
    }
  }
  std::optional<std::vector<double>> profile =
      diagonalProfile(tensor, rows, cols);
  if (!profile) {
    return std::nullopt;
  }
  if (!tensor.isLazy() && !matchesProfile(tensor, *profile, rows, cols)) {
    return std::nullopt;
  }
  return bandOfProfile(*profile, rows);
}

} // namespace tailor::onnx_import
