//===- LazyTensor.h - compile-time tensors computed from their index ------===//
//
// Exports build causal masks by shape arithmetic: arange(S) <= arange(T)^T,
// expanded to [B, 1, T, S], combined with and/where. At 131072 tokens such a
// mask has 1.7e10 elements, so the importer never holds it. A fold whose
// result is larger than kLazyFoldElements returns a lazy tensor instead: an
// expression tree (broadcast, elementwise, where, transpose, slice, trilu,
// cast) over the operands' values, evaluated one element at a time on demand.
//
// Each expression also says how its values depend on the element's index
// (IndexDependence): exactly an affine form c + sum_a coef[a] * index[a]
// (aranges and what adds them), or some function of a few such forms (a
// comparison of two aranges is a function of their difference). That is what
// proves a mask depends on (row, col) only through col - row, and then its
// whole content is read off one row and one column (detectBand), in time
// linear in the sequence, never quadratic.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_FRONTENDS_ONNX_LAZYTENSOR_H
#define TAILOR_FRONTENDS_ONNX_LAZYTENSOR_H

#include "frontends/onnx/HostTensor.h"

namespace tailor::onnx_import {

/// One element as HostTensor keeps it: a double for float types, an int64
/// for integer and bool types.
struct HostElement {
  bool isFloat = false;
  double f = 0;
  int64_t i = 0;

  static HostElement ofFloat(double value) { return {true, value, 0}; }
  static HostElement ofInt(int64_t value) { return {false, 0, value}; }
  double asDouble() const { return isFloat ? f : static_cast<double>(i); }
  int64_t asInt() const {
    return isFloat ? storedIntFromDouble(ElementType::Int64, f) : i;
  }
};

/// c + sum_a coef[a] * index[a] over the axes of a tensor.
struct AffineIndexForm {
  Dims coef;
  int64_t constant = 0;

  bool isConstant() const;
};

/// How a tensor's values depend on the element index.
struct IndexDependence {
  /// False: nothing is known (any element may hold anything).
  bool known = false;
  /// The value equals this form exactly (integers only).
  std::optional<AffineIndexForm> exact;
  /// The value is some function of these forms alone (empty: a constant).
  llvm::SmallVector<AffineIndexForm, 2> forms;

  static IndexDependence unknown() { return {}; }
  static IndexDependence ofForms(llvm::ArrayRef<AffineIndexForm> forms);
  static IndexDependence ofExact(AffineIndexForm form);
};

/// The base of the expression nodes: a tensor of dims() and type() whose
/// element at a row-major index is computed when asked.
class LazyTensor {
public:
  LazyTensor(ElementType type, llvm::ArrayRef<int64_t> dims);
  virtual ~LazyTensor();

  ElementType type() const { return elementType; }
  llvm::ArrayRef<int64_t> dims() const { return shape; }

  /// The element at flat row-major index `flat`.
  HostElement at(int64_t flat) const;
  /// The element at multi-index `index` (one entry per axis).
  virtual HostElement atIndex(llvm::ArrayRef<int64_t> index) const = 0;
  /// How the values depend on the index (computed once).
  const IndexDependence &dependence() const;

protected:
  virtual IndexDependence computeDependence() const = 0;
  /// Stores `value` as an element of this tensor's type would hold it.
  HostElement storeFloat(double value) const;
  HostElement storeInt(int64_t value) const;

private:
  ElementType elementType;
  Dims shape;
  /// The importer is single-threaded: a plain cache suffices.
  mutable std::optional<IndexDependence> cachedDependence;
};

//===----------------------------------------------------------------------===//
// Lazy folds (called by the folds in HostTensor.cpp when the result is large)
//===----------------------------------------------------------------------===//

HostTensor lazyBinary(BinaryFn fn, const HostTensor &a, const HostTensor &b,
                      llvm::ArrayRef<int64_t> dims);
HostTensor lazyUnary(UnaryFn fn, const HostTensor &a);
HostTensor lazyCast(const HostTensor &a, ElementType type);
HostTensor lazyWhere(const HostTensor &condition, const HostTensor &onTrue,
                     const HostTensor &onFalse, llvm::ArrayRef<int64_t> dims);
HostTensor lazyBroadcast(const HostTensor &input, llvm::ArrayRef<int64_t> dims);
HostTensor lazyTranspose(const HostTensor &input,
                         llvm::ArrayRef<int64_t> permutation);
HostTensor lazySlice(const HostTensor &input, llvm::ArrayRef<int64_t> starts,
                     llvm::ArrayRef<int64_t> steps,
                     llvm::ArrayRef<int64_t> resultDims);
HostTensor lazyTrilu(const HostTensor &input, bool upper, int64_t k);

/// How the values of `tensor` (held or lazy) depend on its index.
IndexDependence dependenceOf(const HostTensor &tensor);

//===----------------------------------------------------------------------===//
// Band masks
//===----------------------------------------------------------------------===//

/// A tensor [..., T, S] whose element (..., i, j) is `inside` when
/// lower <= j - i <= upper and `outside` elsewhere, the same for every
/// leading index: causal masks (inside = allowed up to the diagonal),
/// sliding windows, and their additive (0 / -inf) forms.
struct BandMask {
  int64_t lower = 0;
  int64_t upper = 0;
  double inside = 0;
  double outside = 0;
};

/// Recognizes a band mask. A held tensor is checked element by element; a
/// lazy one is proven to depend on (i, j) only through j - i and then read
/// along one row and one column. Splats and tensors of rank < 2 are not
/// bands.
std::optional<BandMask> detectBand(const HostTensor &tensor);

} // namespace tailor::onnx_import

#endif // TAILOR_FRONTENDS_ONNX_LAZYTENSOR_H
