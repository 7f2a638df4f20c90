//===- DataMovementLaunchers.cpp - transpose, slice, gathers, scatters ----===//
//
// Launchers of codegen/cuda/DataMovementKernels.cu, with the CPU kernels'
// operands, attributes and semantics (runtime/cpu/README.md):
//   - transpose, slice, broadcast: any dtype. Each becomes one strided
//     gather (y contiguous, x read through per-dimension strides) after
//     dropping extent-1 dimensions and merging neighbours x walks
//     contiguously, as the CPU kernels do; a transpose proper (x's
//     unit-stride dimension is not y's innermost) takes the shared-memory
//     tiled kernel. At most 8 dimensions may remain after merging.
//   - concat, split: any dtype, any number of pieces. One launch per piece:
//     each piece is one 2-D copy (outer rows of its bytes, between its
//     pitch and the whole's), so every launch is a full-width copy in the
//     widest unit (up to 16 bytes) its pitches and pointers allow, the
//     piece count needs no cap, and a contiguous piece (outer extent 1) is
//     a plain LaunchContext::copy. Pieces are few and large in practice
//     (q/k/v, key/value caches), where a launch costs far less than the copy.
//   - copy: LaunchContext::copy.
//   - embedding: table and y f32 or bf16 alike, ids i32 or i64. An id
//     outside [0, V) yields a zero row (never a read outside the table) and
//     is reported in the device's error record, which the runtime turns
//     into the run error the CPU kernel gives when the entry synchronizes.
//   - rope: x and y f32 or bf16 alike, cos and sin f32 or bf16 alike.
//   - gather_elements, gather_nd: any dtype, indices i32 or i64, rank (and
//     tuple length) at most 8; scatter_elements, scatter_nd: any dtype with
//     reduction none, f32/f64/i32/i64 with add, mul, max or min (the output
//     starts as a copy of data); cumsum, mod, sign: f32, f64, i32, i64, with
//     integer sums and products wrapping as on the CPU. An index outside
//     [-n, n) is reported in the error record (a gather writes zero for
//     it, a scatter skips it), and so is mod by an integer 0 (which gives
//     0): the run fails as the CPU kernel's does.
// The kernels that report get the record and the launch's step as their
// last two arguments (ErrorArgs).
// Checks test the dtypes, then run the CPU kernel's check on a view of the
// launch with bf16 read as f32, so other errors read exactly as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"

#include <algorithm>
#include <cstdint>

namespace tailor::runtime::cuda {
namespace {

using cpu::expectDTypeIn;
using cpu::expectOperandCount;
using cpu::expectSameDType;

/// The layouts of tl::move::Gather and tl::move::Tiles in the device code.
constexpr int kMaxRank = 8;
struct Gather {
  int rank;
  long long extent[kMaxRank];
  long long stride[kMaxRank];
};
struct Tiles {
  int rank;
  long long extent[kMaxRank];
  long long srcStride[kMaxRank];
  long long dstStride[kMaxRank];
  long long rowsA, cols, colStride, rowStride;
};
static_assert(sizeof(Gather) == 136, "must match tl::move::Gather");
static_assert(sizeof(Tiles) == 232, "must match tl::move::Tiles");

constexpr int kTile = 32;

/// The last two arguments of a kernel that reports bad data: the device's
/// error record and the launch's step.
struct ErrorArgs {
  DeviceErrorRecord *record;
  int site;
  explicit ErrorArgs(const CudaCall &call)
      : record(call.context->errorRecord()), site(call.step) {}
};

/// "f32", "f64", "i32", "i64": the type an arithmetic kernel computes in.
const char *arithSuffix(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I32:
    return "i32";
  default:
    return "i64";
  }
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

//===----------------------------------------------------------------------===//
// Strided gather (transpose, slice, broadcast)
//===----------------------------------------------------------------------===//

/// y's extents and x's element strides per y dimension, with extent-1
/// dimensions dropped and neighbours x walks contiguously merged.
struct MergedGather {
  std::vector<int64_t> extents, strides;
};

MergedGather mergeGather(const std::vector<int64_t> &shape,
                         const std::vector<int64_t> &stride) {
  MergedGather m;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) {
      continue;
    }
    if (!m.extents.empty() && m.strides.back() == stride[d] * shape[d]) {
      m.extents.back() *= shape[d];
      m.strides.back() = stride[d];
      continue;
    }
    m.extents.push_back(shape[d]);
    m.strides.push_back(stride[d]);
  }
  return m;
}

std::string expectMergedRank(const MergedGather &m) {
  if (m.extents.size() > size_t(kMaxRank)) {
    return "the copy needs " + std::to_string(m.extents.size()) +
           " dimensions after merging, at most " + std::to_string(kMaxRank) +
           " supported";
  }
  return "";
}

/// y (contiguous, `shape`) = x at element offset sum(index * stride).
std::string launchGather(const CudaCall &call, const void *x, void *y,
                         size_t elementSize, const std::vector<int64_t> &shape,
                         const std::vector<int64_t> &stride) {
  long long total = 1;
  for (int64_t e : shape) {
    total *= e;
  }
  if (total == 0) {
    return "";
  }
  MergedGather m = mergeGather(shape, stride);
  if (auto e = expectMergedRank(m); !e.empty()) {
    return e;
  }
  const int rank = static_cast<int>(m.extents.size());
  if (rank > 0 && m.strides[rank - 1] == 1) {
    // Runs contiguous in x and y move in the widest unit (up to 16 bytes)
    // that divides the run, every other stride and both addresses:
    // [B, H, T, D] -> [B, T, H, D] in bf16 then copies 16 bytes a thread.
    std::vector<uint64_t> values = {uint64_t(m.extents[rank - 1]) * elementSize,
                                    reinterpret_cast<uintptr_t>(x),
                                    reinterpret_cast<uintptr_t>(y)};
    for (int d = 0; d + 1 < rank; ++d) {
      values.push_back(uint64_t(m.strides[d]) * elementSize);
    }
    size_t unit = widestUnit(values);
    if (unit > elementSize) {
      int64_t factor = static_cast<int64_t>(unit / elementSize);
      m.extents[rank - 1] /= factor;
      for (int d = 0; d + 1 < rank; ++d) {
        m.strides[d] /= factor;
      }
      total /= factor;
      elementSize = unit;
    }
  }
  std::string suffix = sizeSuffix(elementSize);
  // The y dimension x walks with unit stride, if it is not the innermost.
  int tileDim = -1;
  for (int d = 0; d + 1 < rank; ++d) {
    if (m.strides[d] == 1 && m.strides[rank - 1] != 1) {
      tileDim = d;
    }
  }
  if (tileDim < 0) {
    Gather g{};
    g.rank = rank;
    for (int d = 0; d < rank; ++d) {
      g.extent[d] = m.extents[d];
      g.stride[d] = m.strides[d];
    }
    void *args[] = {&x, &y, &total, &g};
    return call.context->launch(("tailor_gather_strided_" + suffix).c_str(),
                                {blocksFor(total, 256)}, {256}, 0, args);
  }
  std::vector<int64_t> yStride = contiguousStrides(m.extents);
  Tiles t{};
  long long outer = 1;
  for (int d = 0; d + 1 < rank; ++d) {
    if (d == tileDim) {
      continue;
    }
    t.extent[t.rank] = m.extents[d];
    t.srcStride[t.rank] = m.strides[d];
    t.dstStride[t.rank] = yStride[d];
    ++t.rank;
    outer *= m.extents[d];
  }
  t.rowsA = m.extents[tileDim];
  t.cols = m.extents[rank - 1];
  t.colStride = m.strides[rank - 1];
  t.rowStride = yStride[tileDim];
  long long tiles =
      outer * ((t.rowsA + kTile - 1) / kTile) * ((t.cols + kTile - 1) / kTile);
  void *args[] = {&x, &y, &t};
  return call.context->launch(("tailor_gather_tiled_" + suffix).c_str(),
                              {blocksFor(tiles, 1)}, {kTile, 8}, 0, args);
}

#define TL_GATHER_FUNCTIONS                                                    \
  "tailor_gather_strided_u8", "tailor_gather_strided_u16",                     \
      "tailor_gather_strided_u32", "tailor_gather_strided_u64",                \
      "tailor_gather_strided_u128", "tailor_gather_tiled_u8",                  \
      "tailor_gather_tiled_u16", "tailor_gather_tiled_u32",                    \
      "tailor_gather_tiled_u64", nullptr
const char *const kGatherFunctions[] = {TL_GATHER_FUNCTIONS};
#undef TL_GATHER_FUNCTIONS

/// x's element strides per y dimension for a transpose.
std::vector<int64_t> transposeStrides(const Tensor &x,
                                      const Attributes &attributes) {
  std::vector<int64_t> xStride = contiguousStrides(x.shape);
  std::vector<int64_t> stride;
  for (int64_t p : attributes.getInts("permutation")) {
    stride.push_back(xStride[p]);
  }
  return stride;
}

/// The CPU kernel's checks, then: the outputs (operands from `firstOutput`
/// on) share no byte with any other operand, as the CPU kernels require of
/// a plan (these launchers copy whole rows too).
std::string checkMovedApart(const char *name, const KernelCall &call,
                            size_t firstOutput) {
  if (auto e = checkLikeCpu(name, call); !e.empty()) {
    return e;
  }
  return cpu::expectOutputsApart(call, firstOutput);
}

std::string checkTranspose(const KernelCall &call) {
  if (auto e = checkMovedApart("transpose", call, 1); !e.empty()) {
    return e;
  }
  return expectMergedRank(
      mergeGather(call.operands[1].shape,
                  transposeStrides(call.operands[0], call.attributes)));
}

std::string launchTranspose(const CudaCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  return launchGather(call, x.data, y.data, dtypeSize(x.dtype), y.shape,
                      transposeStrides(x, call.attributes));
}

/// x's element strides per dimension for a slice, and the first element.
std::vector<int64_t> sliceStrides(const Tensor &x, const Attributes &attributes,
                                  int64_t &base) {
  std::vector<int64_t> starts = attributes.getInts("starts");
  std::vector<int64_t> steps = attributes.getInts("steps");
  std::vector<int64_t> xStride = contiguousStrides(x.shape), stride;
  base = 0;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    base += starts[d] * xStride[d];
    stride.push_back(steps[d] * xStride[d]);
  }
  return stride;
}

std::string checkSlice(const KernelCall &call) {
  if (auto e = checkMovedApart("slice", call, 1); !e.empty()) {
    return e;
  }
  int64_t base = 0;
  return expectMergedRank(
      mergeGather(call.operands[1].shape,
                  sliceStrides(call.operands[0], call.attributes, base)));
}

std::string launchSlice(const CudaCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  if (y.numel() == 0) {
    return "";
  }
  int64_t base = 0;
  std::vector<int64_t> stride = sliceStrides(x, call.attributes, base);
  size_t size = dtypeSize(x.dtype);
  const char *src = static_cast<const char *>(x.data) + base * size;
  return launchGather(call, src, y.data, size, y.shape, stride);
}

/// x's element strides per y dimension under NumPy broadcasting: 0 where
/// x has no such dimension or extent 1.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &xs,
                                      const std::vector<int64_t> &ys) {
  std::vector<int64_t> xStride = contiguousStrides(xs);
  std::vector<int64_t> stride(ys.size(), 0);
  int64_t lead = static_cast<int64_t>(ys.size() - xs.size());
  for (int64_t d = 0; d < static_cast<int64_t>(ys.size()); ++d) {
    int64_t dx = d - lead;
    if (dx >= 0 && xs[dx] != 1) {
      stride[d] = xStride[dx];
    }
  }
  return stride;
}

std::string checkBroadcast(const KernelCall &call) {
  if (auto e = checkMovedApart("broadcast", call, 1); !e.empty()) {
    return e;
  }
  const std::vector<int64_t> &ys = call.operands[1].shape;
  return expectMergedRank(
      mergeGather(ys, broadcastStrides(call.operands[0].shape, ys)));
}

std::string launchBroadcast(const CudaCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  return launchGather(call, x.data, y.data, dtypeSize(x.dtype), y.shape,
                      broadcastStrides(x.shape, y.shape));
}

//===----------------------------------------------------------------------===//
// concat, split, copy
//===----------------------------------------------------------------------===//

const char *const kCopyRowsFunctions[] = {
    "tailor_copy_rows_u8",  "tailor_copy_rows_u16",  "tailor_copy_rows_u32",
    "tailor_copy_rows_u64", "tailor_copy_rows_u128", nullptr};

std::string checkConcat(const KernelCall &call) {
  return checkMovedApart("concat", call,
                         call.operands.empty() ? 0 : call.operands.size() - 1);
}
std::string checkSplit(const KernelCall &call) {
  return checkMovedApart("split", call, 1);
}

template <bool Split> std::string launchPieces(const CudaCall &call) {
  size_t n = call.operands.size();
  size_t wholeIdx = Split ? 0 : n - 1, first = Split ? 1 : 0;
  const Tensor &whole = call.operands[wholeIdx];
  int64_t axis = call.attributes.getInt("axis", 0);
  long long outer = 1;
  int64_t inner = static_cast<int64_t>(dtypeSize(whole.dtype));
  for (int64_t d = 0; d < axis; ++d) {
    outer *= whole.shape[d];
  }
  for (int64_t d = axis + 1; d < whole.rank(); ++d) {
    inner *= whole.shape[d];
  }
  int64_t wholeRow = whole.shape[axis] * inner;
  if (outer == 0 || wholeRow == 0) {
    return "";
  }
  char *wholeData = static_cast<char *>(whole.data);
  int64_t offset = 0;
  for (size_t i = first; i < first + n - 1; ++i) {
    const Tensor &piece = call.operands[i];
    int64_t pieceRow = piece.shape[axis] * inner;
    char *at = wholeData + offset;
    offset += pieceRow;
    if (pieceRow == 0) {
      continue;
    }
    void *dst = Split ? piece.data : at;
    const void *src = Split ? static_cast<const void *>(at) : piece.data;
    if (outer == 1 || pieceRow == wholeRow) {
      if (auto e = call.context->copy(dst, src, size_t(outer * pieceRow));
          !e.empty()) {
        return e;
      }
      continue;
    }
    size_t unit = widestUnit({uint64_t(pieceRow), uint64_t(wholeRow),
                              reinterpret_cast<uintptr_t>(dst),
                              reinterpret_cast<uintptr_t>(src)});
    long long cols = pieceRow / unit;
    long long piecePitch = cols, wholePitch = wholeRow / unit;
    long long srcPitch = Split ? wholePitch : piecePitch;
    long long dstPitch = Split ? piecePitch : wholePitch;
    void *args[] = {&src, &srcPitch, &dst, &dstPitch, &outer, &cols};
    std::string function = std::string("tailor_copy_rows_") + sizeSuffix(unit);
    if (auto e = call.context->launch(
            function.c_str(), {blocksFor(outer * cols, 256)}, {256}, 0, args);
        !e.empty()) {
      return e;
    }
  }
  return "";
}

std::string checkCopy(const KernelCall &call) {
  return checkMovedApart("copy", call, 1);
}

std::string launchCopy(const CudaCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  if (x.bytes() == 0 || x.data == y.data) {
    return "";
  }
  return call.context->copy(y.data, x.data, x.bytes());
}

const char *const kNoFunctions[] = {nullptr};

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

std::string checkEmbedding(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 2, 0); !e.empty()) {
    return e;
  }
  return checkLikeCpu("embedding", call);
}

std::string launchEmbedding(const CudaCall &call) {
  const Tensor &table = call.operands[0], &ids = call.operands[1];
  const Tensor &y = call.operands[2];
  long long n = ids.numel(), vocab = table.shape[0];
  uint64_t rowBytes = uint64_t(table.shape[1]) * dtypeSize(table.dtype);
  if (n == 0 || rowBytes == 0) {
    return "";
  }
  // Rows move in 16-byte units when their size and both bases allow it,
  // else in 4 or 2 bytes.
  size_t unit = widestUnit({rowBytes, reinterpret_cast<uintptr_t>(table.data),
                            reinterpret_cast<uintptr_t>(y.data)});
  unit = unit >= 16 ? 16 : unit >= 4 ? 4 : 2;
  long long units = static_cast<long long>(rowBytes / unit);
  const void *pt = table.data, *pi = ids.data;
  void *py = y.data;
  ErrorArgs error(call);
  void *args[] = {&pt,    &pi,    &py,           &n,
                  &vocab, &units, &error.record, &error.site};
  std::string function = std::string("tailor_embedding_") +
                         (ids.dtype == DType::I32 ? "i32_" : "i64_") +
                         sizeSuffix(unit);
  unsigned threads = static_cast<unsigned>(
      std::clamp<long long>((units + 31) / 32 * 32, 32, 256));
  return call.context->launch(function.c_str(), {blocksFor(n, 1)}, {threads}, 0,
                              args);
}

const char *const kEmbeddingFunctions[] = {"tailor_embedding_i32_u16",
                                           "tailor_embedding_i32_u32",
                                           "tailor_embedding_i32_u128",
                                           "tailor_embedding_i64_u16",
                                           "tailor_embedding_i64_u32",
                                           "tailor_embedding_i64_u128",
                                           nullptr};

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

std::string checkRope(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 1, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 2, 1); !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 3, 0); !e.empty()) {
    return e;
  }
  return checkLikeCpu("rope", call);
}

std::string launchRope(const CudaCall &call) {
  const Tensor &x = call.operands[0];
  long long heads = x.shape[1], tokens = x.shape[2], d = x.shape[3];
  long long pairs = x.numel() / 2;
  if (pairs == 0) {
    return "";
  }
  const void *px = x.data, *pc = call.operands[1].data,
             *ps = call.operands[2].data;
  void *py = call.operands[3].data;
  int perBatch = call.operands[1].rank() == 3 ? 1 : 0;
  int interleaved = call.attributes.getInt("interleaved", 0) != 0 ? 1 : 0;
  void *args[] = {&px,     &pc, &ps,       &py,          &heads,
                  &tokens, &d,  &perBatch, &interleaved, &pairs};
  std::string function = std::string("tailor_rope_") + floatSuffix(x.dtype) +
                         "_" + floatSuffix(call.operands[1].dtype);
  return call.context->launch(function.c_str(), {blocksFor(pairs, 256)}, {256},
                              0, args);
}

const char *const kRopeFunctions[] = {
    "tailor_rope_f32_f32", "tailor_rope_f32_bf16", "tailor_rope_bf16_f32",
    "tailor_rope_bf16_bf16", nullptr};

//===----------------------------------------------------------------------===//
// gather_elements, scatter_elements, gather_nd, scatter_nd, cumsum, mod, sign
//===----------------------------------------------------------------------===//

/// The layouts of tl::move::ElementIndex, TupleIndex and Broadcast2.
struct ElementIndex {
  int rank, axis;
  long long axisExtent;
  long long extent[kMaxRank];
  long long dataStride[kMaxRank];
  long long indexStride[kMaxRank];
};
struct TupleIndex {
  long long batch, tuples, k, slice, batchStride;
  long long dims[kMaxRank];
};
struct Broadcast2 {
  int rank;
  long long extent[kMaxRank];
  long long aStride[kMaxRank];
  long long bStride[kMaxRank];
};
static_assert(sizeof(ElementIndex) == 208, "must match tl::move::ElementIndex");
static_assert(sizeof(TupleIndex) == 104, "must match tl::move::TupleIndex");
static_assert(sizeof(Broadcast2) == 200, "must match tl::move::Broadcast2");

/// "none_u32", "add_f32", ...: the scatter entry point's suffix.
std::string scatterSuffix(const CudaCall &call, DType dtype) {
  std::string reduction = call.attributes.getString("reduction", "none");
  if (reduction == "none") {
    return std::string("none_") + sizeSuffix(dtypeSize(dtype));
  }
  return reduction + "_" + arithSuffix(dtype);
}

std::string expectRankAtMost(const KernelCall &call, size_t index) {
  if (call.operands[index].rank() <= kMaxRank) {
    return "";
  }
  return "operand " + std::to_string(index) + " has rank " +
         std::to_string(call.operands[index].rank()) + ", at most " +
         std::to_string(kMaxRank) + " supported";
}

/// The CUDA scatters compute reductions in f32, f64, i32 and i64 (bf16 only
/// moves, with reduction none).
std::string expectScatterDType(const KernelCall &call) {
  std::string reduction = call.attributes.getString("reduction", "none");
  if (reduction == "none") {
    return "";
  }
  return expectDTypeIn(call, 0,
                       {DType::F32, DType::F64, DType::I32, DType::I64});
}

std::string checkGatherElements(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = expectRankAtMost(call, 1); !e.empty()) {
    return e;
  }
  return checkLikeCpu("gather_elements", call);
}

std::string checkScatterElements(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  if (auto e = cpu::firstError(
          {expectRankAtMost(call, 1), expectScatterDType(call)});
      !e.empty()) {
    return e;
  }
  return checkLikeCpu("scatter_elements", call);
}

ElementIndex elementIndex(const Tensor &data, const Tensor &indices,
                          int64_t axis) {
  ElementIndex s{};
  s.rank = static_cast<int>(indices.rank());
  s.axis = static_cast<int>(axis);
  s.axisExtent = data.shape[axis];
  std::vector<int64_t> dStride = contiguousStrides(data.shape);
  std::vector<int64_t> iStride = contiguousStrides(indices.shape);
  for (int d = 0; d < s.rank; ++d) {
    s.extent[d] = indices.shape[d];
    s.dataStride[d] = dStride[d];
    s.indexStride[d] = iStride[d];
  }
  return s;
}

std::string launchGatherElements(const CudaCall &call) {
  const Tensor &data = call.operands[0], &indices = call.operands[1],
               &out = call.operands[2];
  long long total = out.numel();
  if (total == 0) {
    return "";
  }
  ElementIndex s =
      elementIndex(data, indices, call.attributes.getInt("axis", 0));
  const void *px = data.data, *pi = indices.data;
  void *py = out.data;
  int indices64 = indices.dtype == DType::I64 ? 1 : 0;
  ErrorArgs error(call);
  void *args[] = {&px,    &pi, &indices64,     &py,
                  &total, &s,  &error.record, &error.site};
  std::string function = std::string("tailor_gather_elements_") +
                         sizeSuffix(dtypeSize(data.dtype));
  return call.context->launch(function.c_str(), {blocksFor(total, 256)}, {256},
                              0, args);
}

/// out = data (in stream order), unless they are one buffer.
std::string copyToOutput(const CudaCall &call, const Tensor &data,
                         const Tensor &out) {
  if (data.data == out.data || data.bytes() == 0) {
    return "";
  }
  return call.context->copy(out.data, data.data, data.bytes());
}

std::string launchScatterElements(const CudaCall &call) {
  const Tensor &data = call.operands[0], &indices = call.operands[1],
               &updates = call.operands[2], &out = call.operands[3];
  if (auto e = copyToOutput(call, data, out); !e.empty()) {
    return e;
  }
  int64_t axis = call.attributes.getInt("axis", 0);
  if (indices.numel() == 0) {
    return "";
  }
  long long lines = indices.numel() / indices.shape[axis];
  ElementIndex s = elementIndex(data, indices, axis);
  void *py = out.data;
  const void *pi = indices.data, *pu = updates.data;
  int indices64 = indices.dtype == DType::I64 ? 1 : 0;
  ErrorArgs error(call);
  void *args[] = {&py,    &pi, &indices64,     &pu,
                  &lines, &s,  &error.record, &error.site};
  std::string function =
      "tailor_scatter_elements_" + scatterSuffix(call, data.dtype);
  return call.context->launch(function.c_str(), {blocksFor(lines, 128)}, {128},
                              0, args);
}

/// gather_nd's and scatter_nd's tuples (shapes already checked).
TupleIndex tupleIndex(const Tensor &data, const Tensor &indices, int64_t b) {
  TupleIndex t{};
  t.k = indices.shape.back();
  t.batch = t.tuples = t.slice = t.batchStride = 1;
  for (int64_t d = 0; d < b; ++d) {
    t.batch *= data.shape[d];
  }
  for (int64_t d = b; d + 1 < indices.rank(); ++d) {
    t.tuples *= indices.shape[d];
  }
  for (int64_t d = b; d < data.rank(); ++d) {
    t.batchStride *= data.shape[d];
    if (d >= b + t.k) {
      t.slice *= data.shape[d];
    }
  }
  for (int64_t j = 0; j < t.k; ++j) {
    t.dims[j] = data.shape[b + j];
  }
  return t;
}

std::string expectTupleLength(const KernelCall &call) {
  const Tensor &indices = call.operands[1];
  if (indices.rank() == 0 || indices.shape.back() <= kMaxRank) {
    return "";
  }
  return "index tuples of length " + std::to_string(indices.shape.back()) +
         ", at most " + std::to_string(kMaxRank) + " supported";
}

std::string checkGatherND(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = expectTupleLength(call); !e.empty()) {
    return e;
  }
  return checkLikeCpu("gather_nd", call);
}

std::string checkScatterND(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  if (auto e =
          cpu::firstError({expectTupleLength(call), expectScatterDType(call)});
      !e.empty()) {
    return e;
  }
  return checkLikeCpu("scatter_nd", call);
}

std::string launchGatherND(const CudaCall &call) {
  const Tensor &data = call.operands[0], &indices = call.operands[1],
               &out = call.operands[2];
  long long total = out.numel();
  if (total == 0) {
    return "";
  }
  TupleIndex t =
      tupleIndex(data, indices, call.attributes.getInt("batch_dims", 0));
  const void *px = data.data, *pi = indices.data;
  void *py = out.data;
  int indices64 = indices.dtype == DType::I64 ? 1 : 0;
  ErrorArgs error(call);
  void *args[] = {&px,    &pi, &indices64,     &py,
                  &total, &t,  &error.record, &error.site};
  std::string function =
      std::string("tailor_gather_nd_") + sizeSuffix(dtypeSize(data.dtype));
  return call.context->launch(function.c_str(), {blocksFor(total, 256)}, {256},
                              0, args);
}

std::string launchScatterND(const CudaCall &call) {
  const Tensor &data = call.operands[0], &indices = call.operands[1],
               &updates = call.operands[2], &out = call.operands[3];
  if (auto e = copyToOutput(call, data, out); !e.empty()) {
    return e;
  }
  TupleIndex t =
      tupleIndex(data, indices, call.attributes.getInt("batch_dims", 0));
  if (t.slice == 0 || t.batch * t.tuples == 0) {
    return "";
  }
  void *py = out.data;
  const void *pi = indices.data, *pu = updates.data;
  int indices64 = indices.dtype == DType::I64 ? 1 : 0;
  ErrorArgs error(call);
  void *args[] = {&py, &pi, &indices64, &pu, &t, &error.record, &error.site};
  std::string function = "tailor_scatter_nd_" + scatterSuffix(call, data.dtype);
  return call.context->launch(function.c_str(), {blocksFor(t.slice, 128)},
                              {128}, 0, args);
}

std::string launchCumsum(const CudaCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  int64_t axis = call.attributes.getInt("axis", 0);
  long long outer = 1, inner = 1, n = x.shape[axis];
  for (int64_t d = 0; d < axis; ++d) {
    outer *= x.shape[d];
  }
  for (int64_t d = axis + 1; d < x.rank(); ++d) {
    inner *= x.shape[d];
  }
  if (x.numel() == 0) {
    return "";
  }
  int exclusive = call.attributes.getInt("exclusive", 0) != 0 ? 1 : 0;
  int reverse = call.attributes.getInt("reverse", 0) != 0 ? 1 : 0;
  const void *px = x.data;
  void *py = y.data;
  void *args[] = {&px, &py, &outer, &n, &inner, &exclusive, &reverse};
  std::string function = std::string("tailor_cumsum_") + arithSuffix(x.dtype);
  return call.context->launch(function.c_str(), {blocksFor(outer * inner, 128)},
                              {128}, 0, args);
}

/// cumsum and sign: f32, f64, i32 or i64 (no bf16: the CPU view would
/// read it as f32).
template <int Arity> std::string checkArithmetic(const KernelCall &call) {
  if (auto e = expectOperandCount(call, Arity); !e.empty()) {
    return e;
  }
  return expectDTypeIn(call, 0,
                       {DType::F32, DType::F64, DType::I32, DType::I64});
}

/// The axis operand of the CPU kernel's run-time form lives in device
/// memory, where the launcher (which never synchronizes) cannot read it.
std::string checkCumsum(const KernelCall &call) {
  if (call.operands.size() == 3) {
    return "cumsum with a run-time axis (operand 1) runs on the CPU backend "
           "only: the CUDA launcher needs the axis on the host";
  }
  if (auto e = checkArithmetic<2>(call); !e.empty()) {
    return e;
  }
  return checkLikeCpu("cumsum", call);
}

std::string checkSign(const KernelCall &call) {
  if (auto e = checkArithmetic<2>(call); !e.empty()) {
    return e;
  }
  return checkLikeCpu("sign", call);
}

std::string checkMod(const KernelCall &call) {
  if (auto e = checkArithmetic<3>(call); !e.empty()) {
    return e;
  }
  if (auto e = expectRankAtMost(call, 2); !e.empty()) {
    return e;
  }
  return checkLikeCpu("mod", call);
}

std::string launchMod(const CudaCall &call) {
  const Tensor &a = call.operands[0], &b = call.operands[1],
               &y = call.operands[2];
  long long total = y.numel();
  if (total == 0) {
    return "";
  }
  Broadcast2 s{};
  s.rank = static_cast<int>(y.rank());
  // Right-aligned strides; broadcast dims read with stride 0.
  auto strides = [&](const Tensor &t, long long *out) {
    std::vector<int64_t> st = contiguousStrides(t.shape);
    int64_t lead = y.rank() - t.rank();
    for (int64_t d = 0; d < y.rank(); ++d) {
      int64_t td = d - lead;
      out[d] = td < 0 || t.shape[td] == 1 ? 0 : st[td];
    }
  };
  strides(a, s.aStride);
  strides(b, s.bStride);
  for (int d = 0; d < s.rank; ++d) {
    s.extent[d] = y.shape[d];
  }
  const void *pa = a.data, *pb = b.data;
  void *py = y.data;
  int fmod = call.attributes.getInt("fmod", 0) != 0 ? 1 : 0;
  ErrorArgs error(call);
  void *args[] = {&pa, &pb,   &py,           &total,
                  &s,  &fmod, &error.record, &error.site};
  std::string function = std::string("tailor_mod_") + arithSuffix(a.dtype);
  return call.context->launch(function.c_str(), {blocksFor(total, 256)}, {256},
                              0, args);
}

std::string launchSign(const CudaCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  long long total = x.numel();
  if (total == 0) {
    return "";
  }
  const void *px = x.data;
  void *py = y.data;
  void *args[] = {&px, &py, &total};
  std::string function = std::string("tailor_sign_") + arithSuffix(x.dtype);
  return call.context->launch(function.c_str(), {blocksFor(total, 256)}, {256},
                              0, args);
}

#define TL_SIZED(NAME) NAME "_u8", NAME "_u16", NAME "_u32", NAME "_u64"
#define TL_TYPED(NAME) NAME "_f32", NAME "_f64", NAME "_i32", NAME "_i64"
const char *const kGatherElementsFunctions[] = {
    TL_SIZED("tailor_gather_elements"), nullptr};
const char *const kGatherNDFunctions[] = {TL_SIZED("tailor_gather_nd"),
                                          nullptr};
const char *const kScatterElementsFunctions[] = {
    TL_SIZED("tailor_scatter_elements_none"),
    TL_TYPED("tailor_scatter_elements_add"),
    TL_TYPED("tailor_scatter_elements_mul"),
    TL_TYPED("tailor_scatter_elements_max"),
    TL_TYPED("tailor_scatter_elements_min"),
    nullptr};
const char *const kScatterNDFunctions[] = {
    TL_SIZED("tailor_scatter_nd_none"), TL_TYPED("tailor_scatter_nd_add"),
    TL_TYPED("tailor_scatter_nd_mul"),  TL_TYPED("tailor_scatter_nd_max"),
    TL_TYPED("tailor_scatter_nd_min"),  nullptr};
const char *const kCumsumFunctions[] = {TL_TYPED("tailor_cumsum"), nullptr};
const char *const kModFunctions[] = {TL_TYPED("tailor_mod"), nullptr};
const char *const kSignFunctions[] = {TL_TYPED("tailor_sign"), nullptr};
#undef TL_TYPED
#undef TL_SIZED

} // namespace

void addDataMovementCudaKernels(std::vector<CudaKernelDef> &table) {
  table.push_back(
      {"transpose", 2, checkTranspose, launchTranspose, kGatherFunctions});
  table.push_back({"slice", 2, checkSlice, launchSlice, kGatherFunctions});
  table.push_back(
      {"concat", -1, checkConcat, launchPieces<false>, kCopyRowsFunctions});
  table.push_back(
      {"split", -1, checkSplit, launchPieces<true>, kCopyRowsFunctions});
  table.push_back(
      {"broadcast", 2, checkBroadcast, launchBroadcast, kGatherFunctions});
  table.push_back({"copy", 2, checkCopy, launchCopy, kNoFunctions});
  table.push_back(
      {"embedding", 3, checkEmbedding, launchEmbedding, kEmbeddingFunctions});
  table.push_back({"rope", 4, checkRope, launchRope, kRopeFunctions});
  table.push_back({"gather_elements", 3, checkGatherElements,
                   launchGatherElements, kGatherElementsFunctions});
  table.push_back({"scatter_elements", 4, checkScatterElements,
                   launchScatterElements, kScatterElementsFunctions});
  table.push_back(
      {"gather_nd", 3, checkGatherND, launchGatherND, kGatherNDFunctions});
  table.push_back(
      {"scatter_nd", 4, checkScatterND, launchScatterND, kScatterNDFunctions});
  table.push_back({"cumsum", -1, checkCumsum, launchCumsum, kCumsumFunctions});
  table.push_back({"mod", 3, checkMod, launchMod, kModFunctions});
  table.push_back({"sign", 2, checkSign, launchSign, kSignFunctions});
}

} // namespace tailor::runtime::cuda
