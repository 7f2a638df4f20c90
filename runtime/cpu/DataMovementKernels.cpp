//===- DataMovementKernels.cpp - transpose, slice, concat, split, ... -----===//
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
#include "runtime/cpu/TensorLayout.h"

#include <cstring>
#include <limits>

namespace tailor::runtime::cpu {
namespace {

/// Bytes per parallel chunk of a plain copy: large enough to stream.
constexpr int64_t kCopyChunk = int64_t(1) << 18;

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

/// `Check`, then: the outputs (operands from FirstOutput on) share no byte
/// with the inputs or with each other. These kernels move data with
/// memcpy; a tampered plan that passes verification otherwise must not make
/// them copy between overlapping ranges.
template <std::string (*Check)(const KernelCall &),
          size_t (*FirstOutput)(const KernelCall &)>
std::string checkApart(const KernelCall &call) {
  if (auto e = Check(call); !e.empty()) {
    return e;
  }
  return expectOutputsApart(call, FirstOutput(call));
}

size_t afterFirst(const KernelCall &) { return 1; }
size_t lastOnly(const KernelCall &call) {
  return call.operands.empty() ? 0 : call.operands.size() - 1;
}

} // namespace

void addDataMovementKernels(std::vector<KernelDef> &table) {
  table.push_back({"transpose", 2, checkApart<checkTranspose, afterFirst>,
                   runTranspose});
  table.push_back({"slice", 2, checkApart<checkSlice, afterFirst>, runSlice});
  table.push_back(
      {"concat", -1, checkApart<checkConcat, lastOnly>, runPieces<false>});
  table.push_back(
      {"split", -1, checkApart<checkSplit, afterFirst>, runPieces<true>});
  table.push_back({"broadcast", 2, checkApart<checkBroadcast, afterFirst>,
                   runBroadcast});
  table.push_back({"copy", 2, checkApart<checkCopy, afterFirst>, runCopy});
}

} // namespace tailor::runtime::cpu
