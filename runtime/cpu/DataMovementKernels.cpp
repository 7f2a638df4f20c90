//===- DataMovementKernels.cpp - transpose, slice, gathers, scatters, ... -===//
//
// Kernels that only move bytes, for every dtype: elements are copied as
// unsigned integers of their size, so there is one instantiation per size
// rather than per dtype, and values (NaN payloads included) pass through
// bit for bit.
//
// transpose and slice are both "write y contiguously, read x through
// strides": after merging dimensions that stay contiguous, a unit-stride
// innermost dimension becomes memcpy runs, and a transpose proper becomes
// 32 x 32 tiles so reads and writes both stay in cache. concat and split
// cut the big tensor's bytes into equal chunks for the pool, so a concat
// along axis 0 (a few huge pieces) parallelizes as well as one along the
// last axis (many small pieces). Outputs must not overlap inputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <type_traits>

namespace tailor::runtime::cpu {
namespace {

/// Bytes per parallel chunk of a plain copy: large enough to stream.
constexpr int64_t kCopyChunk = int64_t(1) << 18;

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

//===----------------------------------------------------------------------===//
// Strided gather (transpose, slice)
//===----------------------------------------------------------------------===//

/// y (contiguous, extents `ext`) = x read at `src` with element strides
/// `stride` per y dimension.
template <typename U>
void gatherStrided(const KernelCall &call, const U *src, U *y,
                   const std::vector<int64_t> &shape,
                   const std::vector<int64_t> &srcStride) {
  // Drop extent-1 dimensions; merge neighbours x also walks contiguously.
  std::vector<int64_t> ext, st;
  int64_t total = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    total *= shape[d];
    if (shape[d] == 1) {
      continue;
    }
    if (!ext.empty() && st.back() == srcStride[d] * shape[d]) {
      ext.back() *= shape[d];
      st.back() = srcStride[d];
      continue;
    }
    ext.push_back(shape[d]);
    st.push_back(srcStride[d]);
  }
  if (total == 0) {
    return;
  }
  if (ext.empty()) {
    *y = *src;
    return;
  }
  const int rank = static_cast<int>(ext.size());
  std::vector<int64_t> yStride = contiguousStrides(ext);
  // The y dimension x walks with unit stride, if it is not the innermost:
  // then this is a transpose of (that dimension, innermost) per outer index.
  int tileDim = -1;
  for (int d = 0; d + 1 < rank; ++d) {
    if (st[d] == 1 && st[rank - 1] != 1) {
      tileDim = d;
    }
  }
  if (tileDim < 0) {
    // Rows of the innermost dimension: memcpy when contiguous in x.
    int64_t inner = ext[rank - 1], innerStride = st[rank - 1];
    int64_t rows = total / inner;
    parallelFor(call, rows, std::max<int64_t>(1, kElementwiseGrain / inner),
                [&](int64_t begin, int64_t end, int) {
                  for (int64_t row = begin; row < end; ++row) {
                    int64_t rest = row, off = 0;
                    for (int d = rank - 2; d >= 0; --d) {
                      off += (rest % ext[d]) * st[d];
                      rest /= ext[d];
                    }
                    const U *s = src + off;
                    U *out = y + row * inner;
                    if (innerStride == 1) {
                      std::memcpy(out, s, inner * sizeof(U));
                    } else {
                      for (int64_t i = 0; i < inner; ++i) {
                        out[i] = s[i * innerStride];
                      }
                    }
                  }
                });
    return;
  }
  constexpr int64_t kTile = 32;
  int64_t rowsA = ext[tileDim], cols = ext[rank - 1];
  int64_t colStride = st[rank - 1], rowStride = yStride[tileDim];
  int64_t outer = total / (rowsA * cols);
  int64_t tilesA = (rowsA + kTile - 1) / kTile;
  parallelFor(call, outer * tilesA,
              std::max<int64_t>(1, kElementwiseGrain / (kTile * cols)),
              [&](int64_t begin, int64_t end, int) {
                for (int64_t task = begin; task < end; ++task) {
                  int64_t o = task / tilesA, a0 = (task % tilesA) * kTile;
                  int64_t rest = o, sOff = 0, yOff = 0;
                  for (int d = rank - 2; d >= 0; --d) {
                    if (d == tileDim) {
                      continue;
                    }
                    int64_t i = rest % ext[d];
                    rest /= ext[d];
                    sOff += i * st[d];
                    yOff += i * yStride[d];
                  }
                  int64_t a1 = std::min(rowsA, a0 + kTile);
                  for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
                    int64_t c1 = std::min(cols, c0 + kTile);
                    for (int64_t a = a0; a < a1; ++a) {
                      const U *s = src + sOff + a;
                      U *out = y + yOff + a * rowStride;
                      for (int64_t c = c0; c < c1; ++c) {
                        out[c] = s[c * colStride];
                      }
                    }
                  }
                }
              });
}

/// Calls fn.template operator()<U>() with U the unsigned type of `dtype`'s
/// size.
template <typename Fn> void bySize(DType dtype, Fn &&fn) {
  switch (dtypeSize(dtype)) {
  case 1:
    fn(uint8_t());
    break;
  case 2:
    fn(uint16_t());
    break;
  case 4:
    fn(uint32_t());
    break;
  default:
    fn(uint64_t());
    break;
  }
}

std::string checkSameDType2(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  return expectSameDType(call, 1, 0);
}

std::string checkTranspose(const KernelCall &call) {
  if (auto e = checkSameDType2(call); !e.empty()) {
    return e;
  }
  const Tensor &x = call.operands[0];
  std::vector<int64_t> perm;
  if (auto e = expectIntsAttr(call, "permutation", x.shape.size(), 0,
                              x.rank() - 1, perm);
      !e.empty()) {
    return e;
  }
  std::vector<bool> seen(perm.size(), false);
  std::vector<int64_t> out;
  for (int64_t p : perm) {
    if (seen[p]) {
      return "attribute 'permutation' " + shapeString(perm) +
             " is not a permutation";
    }
    seen[p] = true;
    out.push_back(x.shape[p]);
  }
  return expectShape(call, 1, out);
}

std::string runTranspose(const KernelCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  std::vector<int64_t> perm = call.attributes.getInts("permutation");
  std::vector<int64_t> xStride = contiguousStrides(x.shape), stride;
  for (int64_t p : perm) {
    stride.push_back(xStride[p]);
  }
  bySize(x.dtype, [&](auto tag) {
    using U = decltype(tag);
    gatherStrided(call, x.as<U>(), y.as<U>(), y.shape, stride);
  });
  return "";
}

std::string checkSlice(const KernelCall &call) {
  if (auto e = checkSameDType2(call); !e.empty()) {
    return e;
  }
  const Tensor &x = call.operands[0], &y = call.operands[1];
  if (auto e = expectRank(call, 1, x.rank()); !e.empty()) {
    return e;
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> starts, steps;
  if (auto e = expectIntsAttr(call, "starts", x.shape.size(), 0, kMax, starts);
      !e.empty()) {
    return e;
  }
  if (auto e = expectIntsAttr(call, "steps", x.shape.size(), 1, kMax, steps);
      !e.empty()) {
    return e;
  }
  for (size_t d = 0; d < x.shape.size(); ++d) {
    int64_t n = y.shape[d];
    // The last element read, start + (n - 1) * step, must be inside x; the
    // division form cannot overflow.
    if (n > 0 && (starts[d] >= x.shape[d] ||
                  (n - 1) > (x.shape[d] - 1 - starts[d]) / steps[d])) {
      return "slice of dimension " + std::to_string(d) + " (start " +
             std::to_string(starts[d]) + ", step " + std::to_string(steps[d]) +
             ", " + std::to_string(n) + " elements) reads past its extent " +
             std::to_string(x.shape[d]);
    }
  }
  return "";
}

std::string runSlice(const KernelCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  std::vector<int64_t> starts = call.attributes.getInts("starts");
  std::vector<int64_t> steps = call.attributes.getInts("steps");
  std::vector<int64_t> xStride = contiguousStrides(x.shape), stride;
  int64_t base = 0;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (y.shape[d] == 0) {
      return "";
    }
    base += starts[d] * xStride[d];
    stride.push_back(steps[d] * xStride[d]);
  }
  bySize(x.dtype, [&](auto tag) {
    using U = decltype(tag);
    gatherStrided(call, x.as<U>() + base, y.as<U>(), y.shape, stride);
  });
  return "";
}

//===----------------------------------------------------------------------===//
// concat, split
//===----------------------------------------------------------------------===//

/// `whole` is y for concat and x for split; `pieces` are the others, in
/// order along `axis`.
std::string checkPieces(const KernelCall &call, size_t whole, size_t firstPiece,
                        size_t pieceCount) {
  if (call.operands.size() < 2) {
    return "expected at least 2 operands, got " +
           std::to_string(call.operands.size());
  }
  const Tensor &w = call.operands[whole];
  int64_t axis = 0;
  if (auto e = expectIntAttr(call, "axis", 0, w.rank() - 1, true, 0, axis);
      !e.empty()) {
    return e;
  }
  int64_t sum = 0;
  for (size_t i = firstPiece; i < firstPiece + pieceCount; ++i) {
    if (auto e = expectSameDType(call, i, whole); !e.empty()) {
      return e;
    }
    std::vector<int64_t> expected = w.shape;
    expected[axis] =
        call.operands[i].rank() == w.rank() ? call.operands[i].shape[axis] : -1;
    if (expected[axis] < 0 || call.operands[i].shape != expected) {
      return "operand " + std::to_string(i) + " of shape " +
             shapeString(call.operands[i].shape) + " does not match " +
             shapeString(w.shape) + " outside axis " + std::to_string(axis);
    }
    sum += expected[axis];
  }
  if (sum != w.shape[axis]) {
    return "pieces add up to " + std::to_string(sum) + " along axis " +
           std::to_string(axis) + ", expected " + std::to_string(w.shape[axis]);
  }
  return "";
}

std::string checkConcat(const KernelCall &call) {
  size_t n = call.operands.size();
  return checkPieces(call, n - 1, 0, n ? n - 1 : 0);
}

std::string checkSplit(const KernelCall &call) {
  size_t n = call.operands.size();
  return checkPieces(call, 0, 1, n ? n - 1 : 0);
}

template <bool Split> std::string runPieces(const KernelCall &call) {
  size_t n = call.operands.size();
  size_t wholeIdx = Split ? 0 : n - 1, first = Split ? 1 : 0;
  size_t count = n - 1;
  const Tensor &whole = call.operands[wholeIdx];
  int64_t axis = call.attributes.getInt("axis", 0);
  int64_t outer = 1, inner = static_cast<int64_t>(dtypeSize(whole.dtype));
  for (int64_t d = 0; d < axis; ++d) {
    outer *= whole.shape[d];
  }
  for (int64_t d = axis + 1; d < whole.rank(); ++d) {
    inner *= whole.shape[d];
  }
  // Byte offset of each piece inside one row of the whole (one index of
  // the dimensions before `axis`); offsets[count] is the row size.
  std::vector<int64_t> offsets(count + 1, 0);
  for (size_t i = 0; i < count; ++i) {
    offsets[i + 1] = offsets[i] + call.operands[first + i].shape[axis] * inner;
  }
  int64_t rowBytes = offsets[count];
  int64_t total = outer * rowBytes;
  char *wholeData = static_cast<char *>(whole.data);
  parallelFor(call, (total + kCopyChunk - 1) / kCopyChunk, 1,
              [&](int64_t begin, int64_t end, int) {
                int64_t pos = begin * kCopyChunk;
                int64_t stop = std::min(total, end * kCopyChunk);
                int64_t row = pos / rowBytes, within = pos % rowBytes;
                size_t piece =
                    std::upper_bound(offsets.begin(), offsets.end(), within) -
                    offsets.begin() - 1;
                while (pos < stop) {
                  int64_t pieceBytes = offsets[piece + 1] - offsets[piece];
                  int64_t at = within - offsets[piece];
                  int64_t len = std::min(pieceBytes - at, stop - pos);
                  char *p =
                      static_cast<char *>(call.operands[first + piece].data) +
                      row * pieceBytes + at;
                  if (Split) {
                    std::memcpy(p, wholeData + pos, len);
                  } else {
                    std::memcpy(wholeData + pos, p, len);
                  }
                  pos += len;
                  within += len;
                  // Next piece; empty pieces are skipped, rows wrap.
                  while (pos < stop && within == offsets[piece + 1]) {
                    if (++piece == count) {
                      piece = 0;
                      within = 0;
                      ++row;
                    }
                  }
                }
              });
  return "";
}

//===----------------------------------------------------------------------===//
// broadcast, copy
//===----------------------------------------------------------------------===//

std::string checkBroadcast(const KernelCall &call) {
  if (auto e = checkSameDType2(call); !e.empty()) {
    return e;
  }
  return expectBroadcastsTo(call, 0, call.operands[1].shape);
}

std::string runBroadcast(const KernelCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  BroadcastPlan plan(y.shape, {&x.shape});
  bySize(x.dtype, [&](auto tag) {
    using U = decltype(tag);
    const U *src = x.as<U>();
    U *dst = y.as<U>();
    bool contiguous = plan.innerStride(0) == 1;
    parallelFor(call, y.numel(), kElementwiseGrain,
                [&](int64_t begin, int64_t end, int) {
                  plan.forEachRun(
                      begin, end,
                      [&](const auto &off, int64_t pos, int64_t len) {
                        if (contiguous) {
                          std::memcpy(dst + pos, src + off[0], len * sizeof(U));
                        } else {
                          std::fill(dst + pos, dst + pos + len, src[off[0]]);
                        }
                      });
                });
  });
  return "";
}

std::string checkCopy(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  size_t from = call.operands[0].bytes(), to = call.operands[1].bytes();
  if (from != to) {
    return "copy of " + std::to_string(from) + " bytes into " +
           std::to_string(to);
  }
  return "";
}

std::string runCopy(const KernelCall &call) {
  const char *src = static_cast<const char *>(call.operands[0].data);
  char *dst = static_cast<char *>(call.operands[1].data);
  int64_t total = static_cast<int64_t>(call.operands[0].bytes());
  if (src == dst) {
    return "";
  }
  parallelFor(call, (total + kCopyChunk - 1) / kCopyChunk, 1,
              [&](int64_t begin, int64_t end, int) {
                int64_t b0 = begin * kCopyChunk;
                int64_t b1 = std::min(total, end * kCopyChunk);
                std::memcpy(dst + b0, src + b0, b1 - b0);
              });
  return "";
}

//===----------------------------------------------------------------------===//
// gather_elements, scatter_elements, gather_nd, scatter_nd, cumsum
//===----------------------------------------------------------------------===//
//
// Indices are i32 or i64 and may be negative (counted from the end). Every
// launch first checks all of its indices on the pool and fails, naming the
// kernel, the first bad position and its value, before anything is written;
// the loops after it only normalize. Scatters copy data to the output and
// then apply updates in index order from one thread per output fiber (the
// elements one update line can reach), so repeated indices combine in a
// fixed order without atomics: the result is the same for any thread count,
// and the CUDA kernels follow the same order.

/// Calls fn(I()) with I the indices' element type.
template <typename Fn> void byIndexType(DType dtype, Fn &&fn) {
  if (dtype == DType::I32) {
    fn(int32_t());
  } else {
    fn(int64_t());
  }
}

/// Calls fn(T()) with T the arithmetic type of `dtype` (f32, f64, i32, i64).
template <typename Fn> void byValueType(DType dtype, Fn &&fn) {
  switch (dtype) {
  case DType::F32:
    fn(float());
    break;
  case DType::F64:
    fn(double());
    break;
  case DType::I32:
    fn(int32_t());
    break;
  default:
    fn(int64_t());
    break;
  }
}

/// The first position p of `indices` (in row-major order) whose value is
/// outside [-extent(p), extent(p)), or -1.
template <typename I, typename ExtentFn>
int64_t firstBadIndex(const KernelCall &call, const Tensor &indices,
                      ExtentFn &&extent) {
  std::atomic<int64_t> first{std::numeric_limits<int64_t>::max()};
  const I *idx = indices.as<I>();
  parallelFor(call, indices.numel(), kElementwiseGrain,
              [&](int64_t begin, int64_t end, int) {
                for (int64_t p = begin; p < end; ++p) {
                  int64_t n = extent(p), v = static_cast<int64_t>(idx[p]);
                  if (v < -n || v >= n) {
                    int64_t seen = first.load();
                    while (p < seen && !first.compare_exchange_weak(seen, p)) {
                    }
                    return;
                  }
                }
              });
  int64_t p = first.load();
  return p == std::numeric_limits<int64_t>::max() ? -1 : p;
}

/// Checks every index against its extent; "" or the error naming `kernel`.
template <typename ExtentFn>
std::string checkIndexValues(const KernelCall &call, const char *kernel,
                             const Tensor &indices, ExtentFn &&extent) {
  int64_t bad = -1, value = 0;
  byIndexType(indices.dtype, [&](auto tag) {
    using I = decltype(tag);
    bad = firstBadIndex<I>(call, indices, extent);
    value = bad >= 0 ? static_cast<int64_t>(indices.as<I>()[bad]) : 0;
  });
  if (bad < 0) {
    return "";
  }
  return std::string(kernel) + ": index " + std::to_string(value) +
         " at position " + std::to_string(bad) + " is out of range [" +
         std::to_string(-extent(bad)) + ", " + std::to_string(extent(bad)) +
         ")";
}

inline int64_t normalizeIndex(int64_t v, int64_t n) {
  return v < 0 ? v + n : v;
}

/// data, indices (i32/i64) of the data's rank, no larger outside `axis`.
std::string checkElementIndices(const KernelCall &call, int64_t &axis) {
  const Tensor &data = call.operands[0], &indices = call.operands[1];
  if (auto e = firstError({expectMinRank(call, 0, 1),
                           expectDTypeIn(call, 1, {DType::I32, DType::I64}),
                           expectRank(call, 1, data.rank())});
      !e.empty()) {
    return e;
  }
  if (auto e = expectIntAttr(call, "axis", 0, data.rank() - 1, true, 0, axis);
      !e.empty()) {
    return e;
  }
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d != axis && indices.shape[d] > data.shape[d]) {
      return "indices " + shapeString(indices.shape) +
             " are larger than data " + shapeString(data.shape) +
             " outside axis " + std::to_string(axis);
    }
  }
  return "";
}

std::string checkGatherElements(const KernelCall &call) {
  int64_t axis = 0;
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = checkElementIndices(call, axis); !e.empty()) {
    return e;
  }
  return firstError({expectSameDType(call, 2, 0),
                     expectShape(call, 2, call.operands[1].shape)});
}

/// Visits every line of `shape` along `axis`: fn(base coordinates' offset
/// in `a`, offset in `b`) for strides `aStride`, `bStride` over the dims
/// other than `axis`, lines [begin, end) in row-major order.
template <typename Fn>
void forEachLine(const std::vector<int64_t> &shape, int64_t axis,
                 const std::vector<int64_t> &aStride,
                 const std::vector<int64_t> &bStride, int64_t begin,
                 int64_t end, Fn &&fn) {
  for (int64_t line = begin; line < end; ++line) {
    int64_t rest = line, a = 0, b = 0;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (d == axis) {
        continue;
      }
      int64_t c = rest % shape[d];
      rest /= shape[d];
      a += c * aStride[d];
      b += c * bStride[d];
    }
    fn(a, b);
  }
}

std::string runGatherElements(const KernelCall &call) {
  const Tensor &data = call.operands[0], &indices = call.operands[1],
               &out = call.operands[2];
  int64_t axis = call.attributes.getInt("axis", 0);
  int64_t n = data.shape[axis];
  if (auto e = checkIndexValues(call, "gather_elements", indices,
                                [n](int64_t) { return n; });
      !e.empty()) {
    return e;
  }
  int64_t len = indices.shape[axis];
  if (len == 0 || out.numel() == 0) {
    return "";
  }
  std::vector<int64_t> dStride = contiguousStrides(data.shape);
  std::vector<int64_t> iStride = contiguousStrides(indices.shape);
  int64_t lines = indices.numel() / len;
  bySize(data.dtype, [&](auto utag) {
    using U = decltype(utag);
    byIndexType(indices.dtype, [&](auto itag) {
      using I = decltype(itag);
      const U *x = data.as<U>();
      U *y = out.as<U>();
      const I *idx = indices.as<I>();
      parallelFor(call, lines, std::max<int64_t>(1, kElementwiseGrain / len),
                  [&](int64_t begin, int64_t end, int) {
                    forEachLine(indices.shape, axis, dStride, iStride, begin,
                                end, [&](int64_t dBase, int64_t iBase) {
                                  for (int64_t k = 0; k < len; ++k) {
                                    int64_t at = iBase + k * iStride[axis];
                                    int64_t v = normalizeIndex(idx[at], n);
                                    y[at] = x[dBase + v * dStride[axis]];
                                  }
                                });
                  });
    });
  });
  return "";
}

enum class Reduce { None, Add, Mul, Max, Min };

/// The reduction attribute of the scatters.
std::string decodeReduction(const KernelCall &call, DType dtype, Reduce &r) {
  std::string name = call.attributes.getString("reduction", "none");
  static const std::pair<const char *, Reduce> kNames[] = {
      {"none", Reduce::None},
      {"add", Reduce::Add},
      {"mul", Reduce::Mul},
      {"max", Reduce::Max},
      {"min", Reduce::Min}};
  for (const auto &[text, kind] : kNames) {
    if (name == text) {
      r = kind;
      bool arithmetic = dtype == DType::F32 || dtype == DType::F64 ||
                        dtype == DType::I32 || dtype == DType::I64;
      if (kind != Reduce::None && !arithmetic) {
        return "reduction '" + name +
               "' needs f32, f64, i32 or i64 data, got " + dtypeName(dtype);
      }
      return "";
    }
  }
  return "attribute 'reduction' is '" + name +
         "', expected none, add, mul, max or min";
}

template <Reduce R, typename T> inline T combine(T old, T update) {
  if constexpr (R == Reduce::Add) {
    // Integers wrap (unsigned arithmetic: no undefined overflow).
    if constexpr (std::is_integral_v<T>) {
      using UT = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<UT>(old) + static_cast<UT>(update));
    } else {
      return old + update;
    }
  } else if constexpr (R == Reduce::Mul) {
    if constexpr (std::is_integral_v<T>) {
      using UT = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<UT>(old) * static_cast<UT>(update));
    } else {
      return old * update;
    }
  } else if constexpr (R == Reduce::Max) {
    return old < update ? update : old;
  } else if constexpr (R == Reduce::Min) {
    return update < old ? update : old;
  } else {
    return update;
  }
}

/// Calls fn(T(), std::integral_constant<Reduce, R>()) for the launch's
/// element type and reduction (None moves bytes, as unsigned integers).
template <typename Fn> void byReduction(DType dtype, Reduce r, Fn &&fn) {
  auto typed = [&](auto tag) {
    switch (r) {
    case Reduce::Add:
      fn(tag, std::integral_constant<Reduce, Reduce::Add>());
      break;
    case Reduce::Mul:
      fn(tag, std::integral_constant<Reduce, Reduce::Mul>());
      break;
    case Reduce::Max:
      fn(tag, std::integral_constant<Reduce, Reduce::Max>());
      break;
    case Reduce::Min:
      fn(tag, std::integral_constant<Reduce, Reduce::Min>());
      break;
    case Reduce::None:
      break;
    }
  };
  if (r == Reduce::None) {
    bySize(dtype, [&](auto tag) {
      fn(tag, std::integral_constant<Reduce, Reduce::None>());
    });
  } else {
    byValueType(dtype, typed);
  }
}

/// out = data, on the pool (skipped when out is data).
void copyData(const KernelCall &call, const Tensor &data, const Tensor &out) {
  KernelCall copy;
  copy.operands = {data, out};
  copy.pool = call.pool;
  runCopy(copy);
}

std::string checkScatterElements(const KernelCall &call) {
  int64_t axis = 0;
  Reduce r = Reduce::None;
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  if (auto e = checkElementIndices(call, axis); !e.empty()) {
    return e;
  }
  return firstError({expectSameDType(call, 2, 0),
                     expectShape(call, 2, call.operands[1].shape),
                     expectSameDType(call, 3, 0),
                     expectShape(call, 3, call.operands[0].shape),
                     decodeReduction(call, call.operands[0].dtype, r)});
}

std::string runScatterElements(const KernelCall &call) {
  const Tensor &data = call.operands[0], &indices = call.operands[1],
               &updates = call.operands[2], &out = call.operands[3];
  int64_t axis = call.attributes.getInt("axis", 0);
  int64_t n = data.shape[axis];
  Reduce r = Reduce::None;
  if (auto e = firstError({decodeReduction(call, data.dtype, r),
                           checkIndexValues(call, "scatter_elements", indices,
                                            [n](int64_t) { return n; })});
      !e.empty()) {
    return e;
  }
  copyData(call, data, out);
  int64_t len = indices.shape[axis];
  if (len == 0 || indices.numel() == 0) {
    return "";
  }
  std::vector<int64_t> dStride = contiguousStrides(data.shape);
  std::vector<int64_t> iStride = contiguousStrides(indices.shape);
  int64_t lines = indices.numel() / len;
  byReduction(data.dtype, r, [&](auto vtag, auto rtag) {
    using T = decltype(vtag);
    constexpr Reduce R = decltype(rtag)::value;
    byIndexType(indices.dtype, [&](auto itag) {
      using I = decltype(itag);
      T *y = out.as<T>();
      const T *u = updates.as<T>();
      const I *idx = indices.as<I>();
      parallelFor(call, lines, std::max<int64_t>(1, kElementwiseGrain / len),
                  [&](int64_t begin, int64_t end, int) {
                    forEachLine(indices.shape, axis, dStride, iStride, begin,
                                end, [&](int64_t dBase, int64_t iBase) {
                                  for (int64_t k = 0; k < len; ++k) {
                                    int64_t at = iBase + k * iStride[axis];
                                    int64_t v = normalizeIndex(idx[at], n);
                                    T &dst = y[dBase + v * dStride[axis]];
                                    dst = combine<R>(dst, u[at]);
                                  }
                                });
                  });
    });
  });
  return "";
}

/// GatherND's and ScatterND's index tuples: `batch` leading dims shared,
/// `tuples` tuples of length `k` per batch, each addressing a slice of
/// `slice` elements; `batchStride` data elements per batch.
struct TupleLayout {
  int64_t batch = 1, tuples = 1, k = 1, slice = 1, batchStride = 1;
};

std::string decodeTuples(const Tensor &data, const Tensor &indices, int64_t b,
                         TupleLayout &t) {
  int64_t r = data.rank(), q = indices.rank();
  if (q < 1 || b >= q || b > r) {
    return "indices " + shapeString(indices.shape) + " and data " +
           shapeString(data.shape) + " do not fit batch_dims " +
           std::to_string(b);
  }
  t.k = indices.shape.back();
  if (t.k < 1 || b + t.k > r) {
    return "index tuples of length " + std::to_string(t.k) +
           " do not fit data " + shapeString(data.shape);
  }
  t.batch = 1;
  for (int64_t d = 0; d < b; ++d) {
    if (data.shape[d] != indices.shape[d]) {
      return "batch dim " + std::to_string(d) + " differs between data " +
             shapeString(data.shape) + " and indices " +
             shapeString(indices.shape);
    }
    t.batch *= data.shape[d];
  }
  t.tuples = 1;
  for (int64_t d = b; d + 1 < q; ++d) {
    t.tuples *= indices.shape[d];
  }
  t.slice = 1;
  for (int64_t d = b + t.k; d < r; ++d) {
    t.slice *= data.shape[d];
  }
  t.batchStride = 1;
  for (int64_t d = b; d < r; ++d) {
    t.batchStride *= data.shape[d];
  }
  return "";
}

/// indices[:-1] + data[b + k:].
std::vector<int64_t> gatherNDShape(const Tensor &data, const Tensor &indices,
                                   int64_t b) {
  std::vector<int64_t> shape(indices.shape.begin(), indices.shape.end() - 1);
  shape.insert(shape.end(), data.shape.begin() + b + indices.shape.back(),
               data.shape.end());
  return shape;
}

/// The element offset (within one batch, in units of slices) of tuple t.
template <typename I>
inline int64_t tupleOffset(const I *idx, int64_t t, const int64_t *dims,
                           int64_t k) {
  int64_t offset = 0;
  for (int64_t j = 0; j < k; ++j) {
    offset = offset * dims[j] + normalizeIndex(idx[t * k + j], dims[j]);
  }
  return offset;
}

std::string checkNDIndices(const KernelCall &call, const char *kernel,
                           const Tensor &data, const Tensor &indices,
                           int64_t b) {
  int64_t k = indices.shape.back();
  const int64_t *dims = data.shape.data() + b;
  return checkIndexValues(call, kernel, indices,
                          [dims, k](int64_t p) { return dims[p % k]; });
}

std::string checkGatherND(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  const Tensor &data = call.operands[0], &indices = call.operands[1];
  int64_t b = 0;
  TupleLayout t;
  if (auto e = firstError(
          {expectDTypeIn(call, 1, {DType::I32, DType::I64}),
           expectSameDType(call, 2, 0),
           expectIntAttr(call, "batch_dims", 0,
                         std::numeric_limits<int64_t>::max(), false, 0, b)});
      !e.empty()) {
    return e;
  }
  if (auto e = decodeTuples(data, indices, b, t); !e.empty()) {
    return e;
  }
  return expectShape(call, 2, gatherNDShape(data, indices, b));
}

std::string runGatherND(const KernelCall &call) {
  const Tensor &data = call.operands[0], &indices = call.operands[1],
               &out = call.operands[2];
  int64_t b = call.attributes.getInt("batch_dims", 0);
  TupleLayout t;
  if (auto e =
          firstError({decodeTuples(data, indices, b, t),
                      checkNDIndices(call, "gather_nd", data, indices, b)});
      !e.empty()) {
    return e;
  }
  const int64_t *dims = data.shape.data() + b;
  size_t rowBytes = static_cast<size_t>(t.slice) * dtypeSize(data.dtype);
  const char *x = static_cast<const char *>(data.data);
  char *y = static_cast<char *>(out.data);
  byIndexType(indices.dtype, [&](auto itag) {
    using I = decltype(itag);
    const I *idx = indices.as<I>();
    parallelFor(
        call, t.batch * t.tuples,
        std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, t.slice)),
        [&](int64_t begin, int64_t end, int) {
          for (int64_t g = begin; g < end; ++g) {
            int64_t base = (g / t.tuples) * t.batchStride +
                           tupleOffset(idx, g, dims, t.k) * t.slice;
            std::memcpy(y + g * rowBytes, x + base * dtypeSize(data.dtype),
                        rowBytes);
          }
        });
  });
  return "";
}

std::string checkScatterND(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  const Tensor &data = call.operands[0], &indices = call.operands[1];
  TupleLayout t;
  Reduce r = Reduce::None;
  int64_t b = 0;
  if (auto e = firstError(
          {expectDTypeIn(call, 1, {DType::I32, DType::I64}),
           expectSameDType(call, 2, 0), expectSameDType(call, 3, 0),
           expectShape(call, 3, data.shape),
           decodeReduction(call, data.dtype, r),
           expectIntAttr(call, "batch_dims", 0,
                         std::numeric_limits<int64_t>::max(), false, 0, b)});
      !e.empty()) {
    return e;
  }
  if (auto e = decodeTuples(data, indices, b, t); !e.empty()) {
    return e;
  }
  return expectShape(call, 2, gatherNDShape(data, indices, b));
}

std::string runScatterND(const KernelCall &call) {
  const Tensor &data = call.operands[0], &indices = call.operands[1],
               &updates = call.operands[2], &out = call.operands[3];
  int64_t b = call.attributes.getInt("batch_dims", 0);
  TupleLayout t;
  Reduce r = Reduce::None;
  if (auto e =
          firstError({decodeTuples(data, indices, b, t),
                      decodeReduction(call, data.dtype, r),
                      checkNDIndices(call, "scatter_nd", data, indices, b)});
      !e.empty()) {
    return e;
  }
  copyData(call, data, out);
  const int64_t *dims = data.shape.data() + b;
  // Parallel over the slice's elements; each worker applies every tuple in
  // order to its own columns (batches are disjoint, so in order too).
  byReduction(data.dtype, r, [&](auto vtag, auto rtag) {
    using T = decltype(vtag);
    constexpr Reduce R = decltype(rtag)::value;
    byIndexType(indices.dtype, [&](auto itag) {
      using I = decltype(itag);
      T *y = out.as<T>();
      const T *u = updates.as<T>();
      const I *idx = indices.as<I>();
      parallelFor(
          call, t.slice,
          std::max<int64_t>(1, kElementwiseGrain /
                                   std::max<int64_t>(1, t.batch * t.tuples)),
          [&](int64_t begin, int64_t end, int) {
            for (int64_t g = 0; g < t.batch * t.tuples; ++g) {
              T *dst = y + (g / t.tuples) * t.batchStride +
                       tupleOffset(idx, g, dims, t.k) * t.slice;
              const T *src = u + g * t.slice;
              for (int64_t e = begin; e < end; ++e) {
                dst[e] = combine<R>(dst[e], src[e]);
              }
            }
          });
    });
  });
  return "";
}

std::string checkCumsum(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  const Tensor &x = call.operands[0];
  if (auto e = firstError(
          {expectDTypeIn(call, 0,
                         {DType::F32, DType::F64, DType::I32, DType::I64}),
           expectSameDType(call, 1, 0), expectShape(call, 1, x.shape),
           expectMinRank(call, 0, 1)});
      !e.empty()) {
    return e;
  }
  int64_t axis = 0;
  return expectIntAttr(call, "axis", 0, x.rank() - 1, true, 0, axis);
}

/// The type a running sum of T accumulates in: T, or for integers its
/// unsigned twin, so sums wrap instead of overflowing.
template <typename T, bool = std::is_integral_v<T>> struct Accumulator {
  using type = T;
};
template <typename T> struct Accumulator<T, true> {
  using type = std::make_unsigned_t<T>;
};

/// y = running sum of x along `axis` ([outer, n, inner]): the inner dim
/// goes in chunks, each with its accumulators in a small array, so the
/// scan vectorizes across `inner` and y may alias x.
template <typename T>
void cumsum(const KernelCall &call, const T *x, T *y, int64_t outer, int64_t n,
            int64_t inner, bool exclusive, bool reverse) {
  constexpr int64_t kChunk = 256;
  using Acc = typename Accumulator<T>::type;
  int64_t chunks = (inner + kChunk - 1) / kChunk;
  parallelFor(call, outer * chunks,
              std::max<int64_t>(1, kElementwiseGrain / (n * kChunk)),
              [&](int64_t begin, int64_t end, int) {
                Acc acc[kChunk];
                for (int64_t task = begin; task < end; ++task) {
                  int64_t o = task / chunks, c0 = (task % chunks) * kChunk;
                  int64_t width = std::min(kChunk, inner - c0);
                  std::fill(acc, acc + width, Acc(0));
                  for (int64_t s = 0; s < n; ++s) {
                    int64_t i = reverse ? n - 1 - s : s;
                    int64_t at = (o * n + i) * inner + c0;
                    for (int64_t c = 0; c < width; ++c) {
                      Acc v = static_cast<Acc>(x[at + c]);
                      if (exclusive) {
                        y[at + c] = static_cast<T>(acc[c]);
                        acc[c] += v;
                      } else {
                        acc[c] += v;
                        y[at + c] = static_cast<T>(acc[c]);
                      }
                    }
                  }
                }
              });
}

std::string runCumsum(const KernelCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  int64_t axis = call.attributes.getInt("axis", 0);
  int64_t outer = 1, inner = 1, n = x.shape[axis];
  for (int64_t d = 0; d < axis; ++d) {
    outer *= x.shape[d];
  }
  for (int64_t d = axis + 1; d < x.rank(); ++d) {
    inner *= x.shape[d];
  }
  if (x.numel() == 0) {
    return "";
  }
  bool exclusive = call.attributes.getInt("exclusive", 0) != 0;
  bool reverse = call.attributes.getInt("reverse", 0) != 0;
  byValueType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    cumsum<T>(call, x.as<T>(), y.as<T>(), outer, n, inner, exclusive, reverse);
  });
  return "";
}

} // namespace

void addDataMovementKernels(std::vector<KernelDef> &table) {
  table.push_back({"transpose", 2, checkTranspose, runTranspose});
  table.push_back({"slice", 2, checkSlice, runSlice});
  table.push_back({"concat", -1, checkConcat, runPieces<false>});
  table.push_back({"split", -1, checkSplit, runPieces<true>});
  table.push_back({"broadcast", 2, checkBroadcast, runBroadcast});
  table.push_back({"copy", 2, checkCopy, runCopy});
  table.push_back(
      {"gather_elements", 3, checkGatherElements, runGatherElements});
  table.push_back(
      {"scatter_elements", 4, checkScatterElements, runScatterElements});
  table.push_back({"gather_nd", 3, checkGatherND, runGatherND});
  table.push_back({"scatter_nd", 4, checkScatterND, runScatterND});
  table.push_back({"cumsum", 2, checkCumsum, runCumsum});
}

} // namespace tailor::runtime::cpu
