//===- DataMovementLaunchers.cpp - transpose, slice, concat, ..., rope ----===//
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
//   - embedding: table and y f32 or bf16 alike, ids i32 or i64. The kernel
//     cannot report a bad id, so the launcher relies on the trainer, which
//     checks every id against the vocabulary on the host before uploading
//     a batch; an id outside [0, V) that gets here anyway yields a zero row
//     (never a read outside the table) where the CPU kernel reports a run
//     error.
//   - rope: x and y f32 or bf16 alike, cos and sin f32 or bf16 alike.
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

/// "u8", "u16", "u32", "u64": the unit a dtype moves in.
const char *sizeSuffix(size_t bytes) {
  switch (bytes) {
  case 1:
    return "u8";
  case 2:
    return "u16";
  case 4:
    return "u32";
  case 16:
    return "u128";
  default:
    return "u64";
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

/// The widest unit (16, 8, 4, 2 or 1 bytes) dividing every value.
size_t widestUnit(const std::vector<uint64_t> &values) {
  for (size_t unit : {16, 8, 4, 2}) {
    bool fits = true;
    for (uint64_t v : values) {
      fits = fits && v % unit == 0;
    }
    if (fits) {
      return unit;
    }
  }
  return 1;
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

std::string checkTranspose(const KernelCall &call) {
  if (auto e = checkLikeCpu("transpose", call); !e.empty()) {
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
  if (auto e = checkLikeCpu("slice", call); !e.empty()) {
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
  if (auto e = checkLikeCpu("broadcast", call); !e.empty()) {
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
  return checkLikeCpu("concat", call);
}
std::string checkSplit(const KernelCall &call) {
  return checkLikeCpu("split", call);
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

std::string checkCopy(const KernelCall &call) { return checkLikeCpu("copy", call); }

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
  void *args[] = {&pt, &pi, &py, &n, &vocab, &units};
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
}

} // namespace tailor::runtime::cuda
