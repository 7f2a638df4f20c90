//===- IndexingKernels.cpp - gathers, scatters and cumsum -----------------===//
//
// gather_elements, scatter_elements, gather_nd, scatter_nd (ONNX semantics,
// batch dims too) and cumsum, for the dtypes runtime/cpu/README.md lists.
//
// Indices are i32 or i64 and may be negative (counted from the end). Every
// launch first checks all of its indices on the pool and fails, naming the
// kernel, the first bad position and its value, before anything is written;
// the loops after it only normalize. Scatters copy data to the output and
// then apply updates in index order from one thread per output fiber (the
// elements one update line can reach), so repeated indices combine in a
// fixed order without atomics: the result is the same for any thread count,
// and the CUDA kernels follow the same order.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/TensorLayout.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <type_traits>

namespace tailor::runtime::cpu {
namespace {

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

/// out = data, in chunks on the pool (skipped when out is data).
void copyData(const KernelCall &call, const Tensor &data, const Tensor &out) {
  constexpr int64_t kChunk = int64_t(1) << 18;
  const char *src = static_cast<const char *>(data.data);
  char *dst = static_cast<char *>(out.data);
  int64_t total = static_cast<int64_t>(data.bytes());
  if (src == dst) {
    return;
  }
  parallelFor(call, (total + kChunk - 1) / kChunk, 1,
              [&](int64_t begin, int64_t end, int) {
                int64_t b0 = begin * kChunk;
                int64_t b1 = std::min(total, end * kChunk);
                std::memcpy(dst + b0, src + b0, b1 - b0);
              });
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

/// cumsum's operands are x, y, or x, axis, y with the axis a one-element
/// i32/i64 tensor read at run time (the `axis` attribute is then absent).
std::string checkCumsum(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2, 3); !e.empty()) {
    return e;
  }
  const Tensor &x = call.operands[0];
  size_t y = call.operands.size() - 1;
  if (auto e = firstError(
          {expectDTypeIn(call, 0,
                         {DType::F32, DType::F64, DType::I32, DType::I64}),
           expectSameDType(call, y, 0), expectShape(call, y, x.shape),
           expectMinRank(call, 0, 1)});
      !e.empty()) {
    return e;
  }
  if (call.operands.size() == 3) {
    if (auto e = expectDTypeIn(call, 1, {DType::I32, DType::I64}); !e.empty()) {
      return e;
    }
    if (call.operands[1].numel() != 1) {
      return "operand 1 (the axis) must hold one element, got shape " +
             shapeString(call.operands[1].shape);
    }
    return "";
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
  const Tensor &x = call.operands[0], &y = call.operands.back();
  int64_t axis = call.attributes.getInt("axis", 0);
  if (call.operands.size() == 3) {
    const Tensor &a = call.operands[1];
    axis = a.dtype == DType::I32 ? *a.as<int32_t>() : *a.as<int64_t>();
    if (axis < -x.rank() || axis >= x.rank()) {
      return "cumsum: axis " + std::to_string(axis) +
             " is out of range for rank " + std::to_string(x.rank());
    }
    axis = axis < 0 ? axis + x.rank() : axis;
  }
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

void addIndexingKernels(std::vector<KernelDef> &table) {
  table.push_back(
      {"gather_elements", 3, checkGatherElements, runGatherElements});
  table.push_back(
      {"scatter_elements", 4, checkScatterElements, runScatterElements});
  table.push_back({"gather_nd", 3, checkGatherND, runGatherND});
  table.push_back({"scatter_nd", 4, checkScatterND, runScatterND});
  table.push_back({"cumsum", -1, checkCumsum, runCumsum});
}

} // namespace tailor::runtime::cpu
