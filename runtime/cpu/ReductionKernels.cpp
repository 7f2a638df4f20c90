//===- ReductionKernels.cpp - reduce_sum, reduce_mean, reduce_max ---------===//
//
// Layout: a reduction sees x as [A, R, C] (outer kept, reduced, inner kept
// extents) once extent-1 dimensions are dropped and neighbours merged; that
// covers every single-axis and every contiguous multi-axis reduction. Rows
// (C = 1) reduce contiguous memory; columns (C > 1) accumulate whole rows of
// C into a block of accumulators, so both stream x once. Other axis sets
// take a generic odometer walk.
//
// Precision: f32 sums accumulate in f64 (better than torch's cascade f32
// sum, and free for memory-bound loops); integer sums wrap in 64 bits and
// a mean of integers truncates toward zero; max propagates NaN. The
// reduction order is fixed by the code, never by the thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/VectorMath.h"

#include <type_traits>

namespace tailor::runtime::cpu {
namespace {

using vmath::maxNan;

enum class Reduce { Sum, Mean, Max };

/// x's extents and which of them are reduced, before any merging.
struct ReduceShape {
  std::vector<int64_t> extents;
  std::vector<bool> reduced;
  int64_t count = 1; // elements reduced into each output
};

ReduceShape reduceShape(const KernelCall &call) {
  ReduceShape rs;
  rs.extents = call.operands[0].shape;
  rs.reduced.assign(rs.extents.size(), false);
  for (int64_t a : call.attributes.getInts("axes")) {
    rs.reduced[a] = true;
    rs.count *= rs.extents[a];
  }
  return rs;
}

template <Reduce Op> std::string checkReduce(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0,
                             {DType::F32, DType::F64, DType::I32, DType::I64});
      !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 1, 0); !e.empty()) {
    return e;
  }
  const Attribute *axes = call.attributes.find("axes");
  if (!axes || axes->kind != Attribute::Kind::Ints) {
    return "missing ints attribute 'axes'";
  }
  int64_t rank = call.operands[0].rank();
  for (size_t i = 0; i < axes->ints.size(); ++i) {
    int64_t a = axes->ints[i];
    if (a < 0 || a >= rank || (i && a <= axes->ints[i - 1])) {
      return "attribute 'axes' must be sorted distinct axes in [0, " +
             std::to_string(rank) + "), got " + shapeString(axes->ints);
    }
  }
  int64_t keepDims = 0;
  if (auto e = expectIntAttr(call, "keep_dims", 0, 1, false, 0, keepDims);
      !e.empty()) {
    return e;
  }
  ReduceShape rs = reduceShape(call);
  std::vector<int64_t> out;
  for (size_t d = 0; d < rs.extents.size(); ++d) {
    if (!rs.reduced[d]) {
      out.push_back(rs.extents[d]);
    } else if (keepDims) {
      out.push_back(1);
    }
  }
  if (auto e = expectShape(call, 1, out); !e.empty()) {
    return e;
  }
  if (Op == Reduce::Max && rs.count == 0 && call.operands[1].numel() > 0) {
    return "reduce_max over an empty axis";
  }
  return "";
}

/// What an output accumulates: T itself for max, SumAcc<T> for sums.
template <Reduce Op, typename T>
using Acc = std::conditional_t<Op == Reduce::Max, T, vmath::SumAcc<T>>;

template <Reduce Op, typename T> constexpr Acc<Op, T> identity() {
  return Op == Reduce::Max ? Acc<Op, T>(vmath::lowest<T>()) : Acc<Op, T>(0);
}

template <Reduce Op, typename T>
inline Acc<Op, T> combine(Acc<Op, T> acc, Acc<Op, T> v) {
  if constexpr (Op == Reduce::Max) {
    return maxNan(acc, v);
  } else {
    return acc + v;
  }
}

/// The output value of an accumulator over `count` elements.
template <Reduce Op, typename T>
inline T finish(Acc<Op, T> acc, int64_t count) {
  if constexpr (Op == Reduce::Mean) {
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(acc / static_cast<double>(count));
    } else {
      // Truncates toward zero; an empty mean of ints reads 0.
      return count ? static_cast<T>(static_cast<int64_t>(acc) / count) : T(0);
    }
  } else {
    return static_cast<T>(acc);
  }
}

template <Reduce Op, typename T>
inline Acc<Op, T> reduceRun(const T *x, int64_t n) {
  if constexpr (Op == Reduce::Max) {
    return vmath::rowMax(x, n);
  } else {
    return vmath::rowSum<Acc<Op, T>>(x, n);
  }
}

/// y[i] = reduce(x[i, 0..r)) for rows [begin, end).
template <Reduce Op, typename T>
TAILOR_VECTOR_CLONES void reduceRows(const T *x, T *y, int64_t begin,
                                     int64_t end, int64_t r, int64_t count) {
  for (int64_t i = begin; i < end; ++i) {
    y[i] = finish<Op, T>(reduceRun<Op>(x + i * r, r), count);
  }
}

/// partial[k] = reduce(block k of x) for fixed-size blocks [begin, end).
template <Reduce Op, typename T>
TAILOR_VECTOR_CLONES void reduceBlocks(const T *x, int64_t n,
                                       Acc<Op, T> *partial, int64_t begin,
                                       int64_t end) {
  for (int64_t k = begin; k < end; ++k) {
    int64_t off = k * kElementwiseGrain;
    partial[k] = reduceRun<Op>(x + off, std::min(kElementwiseGrain, n - off));
  }
}

/// y[c0 + j] = reduce over b of x[b, c0 + j] for j < width: the rows of x
/// stream through a block of accumulators.
template <Reduce Op, typename T>
TAILOR_VECTOR_CLONES void reduceColumns(const T *x, T *y, int64_t r, int64_t c,
                                        int64_t c0, int64_t width,
                                        int64_t count) {
  constexpr int64_t kBlock = 256;
  Acc<Op, T> acc[kBlock];
  for (int64_t j = 0; j < width; ++j) {
    acc[j] = identity<Op, T>();
  }
  for (int64_t b = 0; b < r; ++b) {
    const T *row = x + b * c + c0;
    for (int64_t j = 0; j < width; ++j) {
      acc[j] = combine<Op, T>(acc[j], static_cast<Acc<Op, T>>(row[j]));
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    y[c0 + j] = finish<Op, T>(acc[j], count);
  }
}

template <Reduce Op, typename T> void runReduceTyped(const KernelCall &call) {
  const T *x = call.operands[0].as<T>();
  T *y = call.operands[1].as<T>();
  ReduceShape rs = reduceShape(call);
  // Merge neighbours of the same kind, dropping extent-1 dimensions.
  std::vector<int64_t> ext;
  std::vector<bool> red;
  for (size_t d = 0; d < rs.extents.size(); ++d) {
    if (rs.extents[d] == 1) {
      continue;
    }
    if (!ext.empty() && red.back() == rs.reduced[d]) {
      ext.back() *= rs.extents[d];
    } else {
      ext.push_back(rs.extents[d]);
      red.push_back(rs.reduced[d]);
    }
  }
  if (std::count(red.begin(), red.end(), true) <= 1) {
    // [A, R, C] with A or C possibly 1.
    int64_t a = 1, r = 1, c = 1;
    bool seenReduced = false;
    for (size_t g = 0; g < ext.size(); ++g) {
      int64_t &slot = red[g] ? r : seenReduced ? c : a;
      slot = ext[g];
      seenReduced |= red[g];
    }
    if (c == 1 && a == 1 && r >= 4 * kElementwiseGrain) {
      // One long row (a norm over a whole parameter): fixed-size blocks
      // reduce in parallel and combine in block order, so the result does
      // not depend on the thread count.
      int64_t blocks = (r + kElementwiseGrain - 1) / kElementwiseGrain;
      std::vector<Acc<Op, T>> partial(blocks);
      parallelFor(call, blocks, 1, [&](int64_t begin, int64_t end, int) {
        reduceBlocks<Op>(x, r, partial.data(), begin, end);
      });
      Acc<Op, T> acc = partial[0];
      for (int64_t k = 1; k < blocks; ++k) {
        acc = combine<Op, T>(acc, partial[k]);
      }
      y[0] = finish<Op, T>(acc, rs.count);
      return;
    }
    if (c == 1) {
      int64_t grain =
          std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(r, 1));
      parallelFor(call, a, grain, [&](int64_t begin, int64_t end, int) {
        reduceRows<Op>(x, y, begin, end, r, rs.count);
      });
      return;
    }
    constexpr int64_t kBlock = 256;
    int64_t blocks = (c + kBlock - 1) / kBlock;
    int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (r * kBlock + 1));
    parallelFor(call, a * blocks, grain, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) {
        int64_t i = t / blocks, c0 = (t % blocks) * kBlock;
        reduceColumns<Op>(x + i * r * c, y + i * c, r, c, c0,
                          std::min(kBlock, c - c0), rs.count);
      }
    });
    return;
  }
  // Interleaved kept and reduced groups: walk each output's reduced
  // elements with an odometer. No lowering produces this for a hot op.
  int rank = static_cast<int>(ext.size());
  std::vector<int64_t> stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) {
    stride[d] = stride[d + 1] * ext[d + 1];
  }
  parallelFor(call, call.operands[1].numel(), 64,
              [&](int64_t begin, int64_t end, int) {
                std::vector<int64_t> idx(rank);
                for (int64_t o = begin; o < end; ++o) {
                  int64_t rest = o, base = 0;
                  for (int d = rank - 1; d >= 0; --d) {
                    if (!red[d]) {
                      base += (rest % ext[d]) * stride[d];
                      rest /= ext[d];
                    }
                  }
                  Acc<Op, T> acc = identity<Op, T>();
                  std::fill(idx.begin(), idx.end(), 0);
                  for (int64_t k = 0; k < rs.count; ++k) {
                    int64_t off = base;
                    for (int d = 0; d < rank; ++d) {
                      off += idx[d] * stride[d];
                    }
                    acc = combine<Op, T>(acc, static_cast<Acc<Op, T>>(x[off]));
                    for (int d = rank - 1; d >= 0; --d) {
                      if (red[d] && ++idx[d] < ext[d]) {
                        break;
                      }
                      idx[d] = 0;
                    }
                  }
                  y[o] = finish<Op, T>(acc, rs.count);
                }
              });
}

template <Reduce Op> std::string runReduce(const KernelCall &call) {
  switch (call.operands[0].dtype) {
  case DType::F32:
    runReduceTyped<Op, float>(call);
    break;
  case DType::F64:
    runReduceTyped<Op, double>(call);
    break;
  case DType::I32:
    runReduceTyped<Op, int32_t>(call);
    break;
  default:
    runReduceTyped<Op, int64_t>(call);
    break;
  }
  return "";
}

} // namespace

void addReductionKernels(std::vector<KernelDef> &table) {
  table.push_back(
      {"reduce_sum", 2, checkReduce<Reduce::Sum>, runReduce<Reduce::Sum>});
  table.push_back(
      {"reduce_mean", 2, checkReduce<Reduce::Mean>, runReduce<Reduce::Mean>});
  table.push_back(
      {"reduce_max", 2, checkReduce<Reduce::Max>, runReduce<Reduce::Max>});
}

} // namespace tailor::runtime::cpu
