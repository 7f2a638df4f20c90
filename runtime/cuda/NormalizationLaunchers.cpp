//===- NormalizationLaunchers.cpp - reduce_*, softmax, rms/layer norm -----===//
//
// Launchers of codegen/cuda/NormalizationKernels.cu. Operands, attributes
// and semantics are the CPU kernels' (runtime/cpu/README.md); the CUDA
// kernels add bf16 storage (computing in f32) and drop f64:
//   - reduce_sum, reduce_mean, reduce_max: f32, bf16, i32, i64;
//   - softmax: f32, bf16;
//   - rms_norm, layer_norm: x and y f32 or bf16 alike, the weight (and
//     bias) f32 or bf16 independently of x.
// Each check tests the dtypes itself, then runs the CPU kernel's check on a
// view of the launch with bf16 read as f32, so shape and attribute errors
// are phrased exactly as on the CPU.
//
// The launchers reduce every launch to rows ([rows, len], the axis
// contiguous) or columns ([outer, len, inner]) and pick the block shape
// from the row length: a warp per row for short rows, a block of up to
// 1024 threads (512 for the norms, which keep 8 values per thread in
// registers) for long ones.
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

/// The layout of tl::norm::ReduceWalk in the device code.
constexpr int kMaxRank = 8;
struct ReduceWalk {
  int rank;
  int reduced[kMaxRank];
  long long extent[kMaxRank];
  long long stride[kMaxRank];
};
static_assert(sizeof(ReduceWalk) == 168, "must match tl::norm::ReduceWalk");

/// Rows up to this long take one warp each in softmax (the device code's
/// 16 registers per lane) and in reductions.
constexpr int64_t kWarpRowLimit = 512;
constexpr int64_t kReduceWarpRowLimit = 1024;
/// Rows per block of the warp-per-row kernels.
constexpr unsigned kWarpRowsPerBlock = 8;
/// The norms' largest block: 8 cached floats per thread need more registers
/// than a 1024-thread block can have.
constexpr int64_t kNormMaxThreads = 512;

/// `n` rounded up to a multiple of 32, clamped to [lo, hi].
unsigned warpMultiple(int64_t n, int64_t lo, int64_t hi) {
  int64_t t = (n + 31) / 32 * 32;
  return static_cast<unsigned>(std::clamp(t, lo, hi));
}

std::string launch(const CudaCall &call, const std::string &function, Dim3 grid,
                   Dim3 block, void **args) {
  return call.context->launch(function.c_str(), grid, block, 0, args);
}

//===----------------------------------------------------------------------===//
// reduce_sum, reduce_mean, reduce_max
//===----------------------------------------------------------------------===//

enum Op { kSum, kMean, kMax };
const char *const kReduceNames[] = {"reduce_sum", "reduce_mean", "reduce_max"};

/// x's dimensions with extent-1 ones dropped and neighbours of the same
/// kind (kept or reduced) merged, as the CPU kernel groups them.
struct MergedReduce {
  std::vector<int64_t> extents;
  std::vector<bool> reduced;
  int64_t count = 1; // elements reduced into each output
  int reducedGroups() const {
    return static_cast<int>(std::count(reduced.begin(), reduced.end(), true));
  }
};

MergedReduce mergeReduce(const Tensor &x, const Attributes &attributes) {
  std::vector<bool> isReduced(x.shape.size(), false);
  MergedReduce m;
  for (int64_t a : attributes.getInts("axes")) {
    isReduced[a] = true;
    m.count *= x.shape[a];
  }
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (x.shape[d] == 1) {
      continue;
    }
    if (!m.extents.empty() && m.reduced.back() == isReduced[d]) {
      m.extents.back() *= x.shape[d];
    } else {
      m.extents.push_back(x.shape[d]);
      m.reduced.push_back(isReduced[d]);
    }
  }
  return m;
}

template <int O> std::string checkReduce(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0,
                             {DType::F32, DType::BF16, DType::I32, DType::I64});
      !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 1, 0); !e.empty()) {
    return e;
  }
  if (auto e = checkLikeCpu(kReduceNames[O], call); !e.empty()) {
    return e;
  }
  MergedReduce m = mergeReduce(call.operands[0], call.attributes);
  if (m.reducedGroups() > 1 && m.extents.size() > size_t(kMaxRank)) {
    return "reduction over interleaved axes of " +
           cpu::shapeString(call.operands[0].shape) + " needs " +
           std::to_string(m.extents.size()) +
           " dimensions after merging, at most " + std::to_string(kMaxRank) +
           " supported";
  }
  return "";
}

const char *reduceSuffix(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  default:
    return "f32";
  }
}

template <int O> std::string launchReduce(const CudaCall &call) {
  const Tensor &x = call.operands[0], &y = call.operands[1];
  int64_t outputs = y.numel();
  if (outputs == 0) {
    return "";
  }
  MergedReduce m = mergeReduce(x, call.attributes);
  std::string prefix = std::string("tailor_") + kReduceNames[O] + "_";
  std::string suffix = std::string("_") + reduceSuffix(x.dtype);
  const void *px = x.data;
  void *py = y.data;
  long long count = m.count;
  if (m.reducedGroups() <= 1) {
    // [A, R, C] with A or C possibly 1.
    long long a = 1, r = 1, c = 1;
    bool seenReduced = false;
    for (size_t g = 0; g < m.extents.size(); ++g) {
      long long &slot = m.reduced[g] ? r : seenReduced ? c : a;
      slot = m.extents[g];
      seenReduced = seenReduced || m.reduced[g];
    }
    if (c == 1) {
      void *args[] = {&px, &py, &a, &r, &count};
      if (r <= kReduceWarpRowLimit) {
        return launch(call, prefix + "rows" + suffix,
                      {blocksFor(a, kWarpRowsPerBlock)},
                      {32, kWarpRowsPerBlock}, args);
      }
      return launch(call, prefix + "rows" + suffix, {blocksFor(a, 1)},
                    {warpMultiple((r + 7) / 8, 128, 1024)}, args);
    }
    void *args[] = {&px, &py, &a, &r, &c, &count};
    long long tiles = a * ((c + 31) / 32);
    return launch(call, prefix + "columns" + suffix, {blocksFor(tiles, 1)},
                  {32, 8}, args);
  }
  ReduceWalk walk{};
  walk.rank = static_cast<int>(m.extents.size());
  long long stride = 1;
  for (int d = walk.rank - 1; d >= 0; --d) {
    walk.reduced[d] = m.reduced[d] ? 1 : 0;
    walk.extent[d] = m.extents[d];
    walk.stride[d] = stride;
    stride *= m.extents[d];
  }
  long long n = outputs;
  void *args[] = {&px, &py, &n, &count, &walk};
  return launch(call, prefix + "generic" + suffix, {blocksFor(n, 256)}, {256},
                args);
}

#define TL_REDUCE_FUNCTIONS(NAME)                                              \
  "tailor_" NAME "_rows_f32", "tailor_" NAME "_rows_bf16",                     \
      "tailor_" NAME "_rows_i32", "tailor_" NAME "_rows_i64",                  \
      "tailor_" NAME "_columns_f32", "tailor_" NAME "_columns_bf16",           \
      "tailor_" NAME "_columns_i32", "tailor_" NAME "_columns_i64",            \
      "tailor_" NAME "_generic_f32", "tailor_" NAME "_generic_bf16",           \
      "tailor_" NAME "_generic_i32", "tailor_" NAME "_generic_i64", nullptr

const char *const kReduceSumFunctions[] = {TL_REDUCE_FUNCTIONS("reduce_sum")};
const char *const kReduceMeanFunctions[] = {TL_REDUCE_FUNCTIONS("reduce_mean")};
const char *const kReduceMaxFunctions[] = {TL_REDUCE_FUNCTIONS("reduce_max")};
#undef TL_REDUCE_FUNCTIONS

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

std::string checkSoftmax(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 1, 0); !e.empty()) {
    return e;
  }
  return checkLikeCpu("softmax", call);
}

std::string launchSoftmax(const CudaCall &call) {
  const Tensor &x = call.operands[0];
  int64_t axis = call.attributes.getInt("axis", 0);
  long long outer = 1, len = x.shape[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d) {
    outer *= x.shape[d];
  }
  for (int64_t d = axis + 1; d < x.rank(); ++d) {
    inner *= x.shape[d];
  }
  if (len == 0 || outer == 0 || inner == 0) {
    return "";
  }
  const void *px = x.data;
  void *py = call.operands[1].data;
  std::string suffix = floatSuffix(x.dtype);
  if (inner == 1) {
    void *args[] = {&px, &py, &outer, &len};
    if (len <= kWarpRowLimit) {
      return launch(call, "tailor_softmax_warp_rows_" + suffix,
                    {blocksFor(outer, kWarpRowsPerBlock)},
                    {32, kWarpRowsPerBlock}, args);
    }
    return launch(call, "tailor_softmax_block_rows_" + suffix,
                  {blocksFor(outer, 1)},
                  {warpMultiple((len + 3) / 4, 128, 1024)}, args);
  }
  void *args[] = {&px, &py, &outer, &len, &inner};
  return launch(call, "tailor_softmax_columns_" + suffix,
                {blocksFor(outer * inner, 256)}, {256}, args);
}

const char *const kSoftmaxFunctions[] = {"tailor_softmax_warp_rows_f32",
                                         "tailor_softmax_warp_rows_bf16",
                                         "tailor_softmax_block_rows_f32",
                                         "tailor_softmax_block_rows_bf16",
                                         "tailor_softmax_columns_f32",
                                         "tailor_softmax_columns_bf16",
                                         nullptr};

//===----------------------------------------------------------------------===//
// rms_norm, layer_norm
//===----------------------------------------------------------------------===//

/// x, w, (bias), y: x and y one float dtype, w and bias another.
std::string checkNorm(const char *kernel, const KernelCall &call,
                      size_t maxOperands) {
  if (auto e = expectOperandCount(call, 3, maxOperands); !e.empty()) {
    return e;
  }
  size_t n = call.operands.size();
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 1, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  if (n == 4) {
    if (auto e = expectSameDType(call, 2, 1); !e.empty()) {
      return e;
    }
  }
  if (auto e = expectSameDType(call, n - 1, 0); !e.empty()) {
    return e;
  }
  if (auto e = checkLikeCpu(kernel, call); !e.empty()) {
    return e;
  }
  // The device code indexes within a row in 32 bits.
  if (call.operands[0].shape.back() > INT32_MAX) {
    return "rows of " + std::to_string(call.operands[0].shape.back()) +
           " elements are too long, at most 2^31 - 1 supported";
  }
  return "";
}

std::string checkRmsNorm(const KernelCall &call) {
  return checkNorm("rms_norm", call, 3);
}
std::string checkLayerNorm(const KernelCall &call) {
  return checkNorm("layer_norm", call, 4);
}

template <bool Rms> std::string launchNorm(const CudaCall &call) {
  size_t n = call.operands.size();
  const Tensor &x = call.operands[0];
  long long d = x.shape.back();
  if (d == 0 || x.numel() == 0) {
    return "";
  }
  long long rows = x.numel() / d;
  float eps = static_cast<float>(call.attributes.getFloat("epsilon", 0));
  const void *px = x.data;
  const void *pw = call.operands[1].data;
  const void *pb = !Rms && n == 4 ? call.operands[2].data : nullptr;
  void *py = call.operands[n - 1].data;
  std::string function =
      std::string(Rms ? "tailor_rms_norm_" : "tailor_layer_norm_") +
      floatSuffix(x.dtype) + "_" + floatSuffix(call.operands[1].dtype);
  Dim3 grid{blocksFor(rows, 1)};
  Dim3 block{warpMultiple((d + 7) / 8, 64, kNormMaxThreads)};
  if constexpr (Rms) {
    void *args[] = {&px, &pw, &py, &rows, &d, &eps};
    return launch(call, function, grid, block, args);
  } else {
    void *args[] = {&px, &pw, &pb, &py, &rows, &d, &eps};
    return launch(call, function, grid, block, args);
  }
}

const char *const kRmsNormFunctions[] = {
    "tailor_rms_norm_f32_f32", "tailor_rms_norm_f32_bf16",
    "tailor_rms_norm_bf16_f32", "tailor_rms_norm_bf16_bf16", nullptr};
const char *const kLayerNormFunctions[] = {
    "tailor_layer_norm_f32_f32", "tailor_layer_norm_f32_bf16",
    "tailor_layer_norm_bf16_f32", "tailor_layer_norm_bf16_bf16", nullptr};

} // namespace

void addNormalizationCudaKernels(std::vector<CudaKernelDef> &table) {
  table.push_back({"reduce_sum", 2, checkReduce<kSum>, launchReduce<kSum>,
                   kReduceSumFunctions});
  table.push_back({"reduce_mean", 2, checkReduce<kMean>, launchReduce<kMean>,
                   kReduceMeanFunctions});
  table.push_back({"reduce_max", 2, checkReduce<kMax>, launchReduce<kMax>,
                   kReduceMaxFunctions});
  table.push_back(
      {"softmax", 2, checkSoftmax, launchSoftmax, kSoftmaxFunctions});
  table.push_back(
      {"rms_norm", 3, checkRmsNorm, launchNorm<true>, kRmsNormFunctions});
  table.push_back({"layer_norm", -1, checkLayerNorm, launchNorm<false>,
                   kLayerNormFunctions});
}

} // namespace tailor::runtime::cuda
