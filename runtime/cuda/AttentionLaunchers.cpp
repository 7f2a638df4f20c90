//===- AttentionLaunchers.cpp - attention and attention_grad --------------===//
//
// Launchers of codegen/cuda/AttentionKernels.cuh (flash-style, tensor
// cores). Operands, attributes and semantics are the CPU kernels'
// (runtime/cpu/README.md: causal, window, softcap, alibi_slopes, and the
// optional bias operand after v when attribute `bias` is 1) with three
// differences:
//   - storage is f32 or bf16, every operand but the workspace alike;
//   - the workspace keeps its place and must be a rank-1 f32 tensor, but
//     its size is free: the forward needs none; the backward needs the
//     partial dk, dv of its split key-major pass (with GQA, see below)
//     and keeps its per-row statistics there when they fit.
//   - ALiBi slopes travel by value in the kernels' Dims: at most 256 query
//     heads with ALiBi.
// Precision (LaunchContext::halfCompute(), the plan's): the tensor cores
// multiply bf16 x bf16 -> f32 in fp32 and bf16 plans (and in tests that set
// no precision), entry points tailor_<kernel>_d<HD>_<f32|bf16> of the
// module attention; fp16 plans multiply IEEE half x half -> f32, entry
// points tailor_<kernel>_d<HD>_f32_fp16 and
// tailor_attention_grad_kv_sum_f32_fp16 of the module attention_fp16
// (CudaKernelDef::fp16Functions, so only fp16 plans embed it). fp16 plans
// keep activations f32: bf16 storage in an fp16 plan is an error at
// launch. Half overflows at 65520: a dO or dS that large gives inf or NaN
// gradients, which the plan's loss scaler sees and skips the step for.
// Head dims D and Dv up to 128 are supported (padded to the class 32, 64,
// 96 or 128 of the larger one).
//
// attention: one launch, grid (ceil(T / 64) Hq, 1, B).
// attention_grad: three or four launches in stream order,
//   1. attention_grad_stats (query-major): L = logsumexp and
//      Delta = rowsum(dO * O) per query row, into a stats buffer;
//   2. attention_grad_kv (key-major, grid (ceil(S / 64) Hkv splits, 1, B)):
//      dk, dv, or with splits > 1 each slice's f32 partial dk, dv in the
//      workspace, then attention_grad_kv_sum adds the slices in order;
//   3. attention_grad_q (query-major): dq, last because the stats buffer
//      may be dq itself.
// `splits` (runtime/cuda/AttentionWorkspace.h: a divisor of the GQA group,
// 1 without GQA or with enough blocks already) depends on the shape alone,
// so the compiler sizes the workspace for it; attribute `kv_splits` forces
// another divisor (tests, AttentionKernelBench). A workspace that cannot
// hold the partials is rejected by the check (there is no unsplit
// fallback).
// The stats buffer (2 floats per query row) is the workspace after the
// partials when it holds 2 B Hq T more floats, else the first 8 bytes of
// each dq row (needs a dq row of at least 8 bytes and a multiple of 4:
// D >= 2 in f32, D even and >= 4 in bf16); a launch where neither fits is
// rejected by the check. CUDA plans size the workspace for both
// (attentionGradWorkspaceFloats); dq's rows serve smaller workspaces.
//
// Dynamic shared memory per block (bytes), by head-dim class 32/64/96/128:
//   attention, attention_grad_stats: 10240 / 18432 / 26624 / 34816
//   attention_grad_kv:               20992 / 37376 / 53760 / 70144
//   attention_grad_q:                20480 / 36864 / 53248 / 69632
// so the backward of the 96 and 128 classes opts in above 48 KiB (sm_80+
// allows up to 163 KiB).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/AttentionWorkspace.h"
#include "runtime/cuda/CudaKernelTable.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tailor::runtime::cuda {
namespace {

using cpu::expectDType;
using cpu::expectDTypeIn;
using cpu::expectOperandCount;
using cpu::expectRank;
using cpu::expectSameDType;

constexpr int kMaxAlibiHeads = 256;

/// The layout of tl::attn::Dims in the device code.
struct Dims {
  int hq, hkv, t, s, d, dv;
  int causal;
  float scale;
  long long statsStride;
  int window;
  float softcap;
  int alibi;
  int kvSplits;
  const void *bias;
  long long biasStride[4];
  const long long *positions;
  float slopes[kMaxAlibiHeads];
};
static_assert(sizeof(Dims) == 104 + 4 * kMaxAlibiHeads,
              "must match tl::attn::Dims");

constexpr int64_t kMaxHeadDim = 128;
/// Rows (queries or keys) per block and per staged tile; threads per block.
constexpr int64_t kBlockRows = 64;
constexpr unsigned kThreads = 128;
/// gridDim.y and gridDim.z limit.
constexpr int64_t kMaxGridYZ = 65535;

struct Shape {
  int64_t b, hq, hkv, t, s, d, dv;
};

/// q, k, v are operands qi, qi + 1, qi + 2.
Shape shapeOf(const std::vector<Tensor> &operands, size_t qi) {
  const auto &q = operands[qi].shape, &k = operands[qi + 1].shape,
             &v = operands[qi + 2].shape;
  return {q[0], q[1], k[1], q[2], k[2], q[3], v[3]};
}

/// The padded head dim of the device kernels.
int64_t headClass(const Shape &a) {
  int64_t d = std::max(a.d, a.dv);
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 96 ? 96 : 128;
}

/// u32 words per staged row (tl::attn::kRowWords).
size_t rowBytes(int64_t hd) { return static_cast<size_t>(hd / 2 + 4) * 4; }

/// The entry-point suffix for storage `dtype` under the launch's tensor-core
/// format ("f32", "bf16" or "f32_fp16"), or "" after setting `error` when
/// the plan computes in fp16 on bf16 storage, or in bf16 below sm_80.
std::string entrySuffix(const CudaCall &call, DType dtype, std::string &error) {
  if (call.context->halfCompute() != HalfCompute::FP16) {
    if (call.context->sm() < 80) {
      error = "attention on sm_" + std::to_string(call.context->sm()) +
              " computes on fp16 tensor cores only (bf16 ones need sm_80), "
              "but the plan's precision is " +
              (call.context->halfCompute() == HalfCompute::None
                   ? std::string("fp32")
                   : std::string(halfComputeName(call.context->halfCompute())));
      return "";
    }
    return floatSuffix(dtype);
  }
  if (dtype == DType::BF16) {
    error = "attention on bf16 operands cannot compute on fp16 tensor cores "
            "(the plan's precision is fp16, whose attention operands are f32)";
    return "";
  }
  return "f32_fp16";
}

std::string function(const char *kernel, int64_t hd,
                     const std::string &suffix) {
  return std::string("tailor_") + kernel + "_d" + std::to_string(hd) + "_" +
         suffix;
}

/// The grid of the query-major kernels: query tiles x query heads
/// flattened into x (tl::attn::queryBlock), batches in z.
Dim3 queryGrid(const Shape &a) {
  return {static_cast<unsigned>((a.t + kBlockRows - 1) / kBlockRows * a.hq), 1,
          static_cast<unsigned>(a.b)};
}

/// The shape as runtime/cuda/AttentionWorkspace.h takes it.
AttentionGradShape gradShape(const Shape &a) {
  return {a.b, a.hq, a.hkv, a.t, a.s, a.d, a.dv};
}

/// The launch's Dims; `bias` and `positions` are those operands or null.
Dims dimsOf(const Shape &a, const Attributes &attributes, const Tensor *bias,
            const Tensor *positions) {
  Dims p{};
  p.hq = static_cast<int>(a.hq);
  p.hkv = static_cast<int>(a.hkv);
  p.t = static_cast<int>(a.t);
  p.s = static_cast<int>(a.s);
  p.d = static_cast<int>(a.d);
  p.dv = static_cast<int>(a.dv);
  p.causal = attributes.getInt("causal", 0) != 0;
  p.scale = static_cast<float>(attributes.getFloat(
      "scale", a.d > 0 ? 1.0 / std::sqrt(static_cast<double>(a.d)) : 1.0));
  p.window = static_cast<int>(attributes.getInt("window", 0));
  p.softcap = static_cast<float>(attributes.getFloat("softcap", 0));
  if (const Attribute *slopes = attributes.find("alibi_slopes")) {
    p.alibi = 1;
    for (size_t h = 0; h < slopes->floats.size(); ++h) {
      p.slopes[h] = static_cast<float>(slopes->floats[h]);
    }
  }
  if (bias) {
    p.bias = bias->data;
    long long stride = 1;
    for (int i = 3; i >= 0; --i) {
      p.biasStride[i] = bias->shape[i] == 1 ? 0 : stride;
      stride *= bias->shape[i];
    }
  }
  if (positions) {
    p.positions = positions->as<long long>();
  }
  return p;
}

/// The index of the positions operand (document masking), or -1.
int64_t positionsOperand(const Attributes &attributes) {
  return attributes.find("positions") ? attributes.getInt("positions", -1)
                                      : -1;
}

/// Whether the launch carries the bias operand.
bool withBias(const KernelCall &call) {
  return call.attributes.getInt("bias", 0) != 0;
}

/// The common part of both checks: dtypes, then the CPU kernel's check on
/// a view with bf16 read as f32 and a workspace the CPU would accept (so
/// shape and attribute errors are phrased as on the CPU), then the limits
/// of the device kernels. `count` counts the operands without a bias.
std::string checkCommon(const KernelCall &call, const char *kernel,
                        size_t count, size_t qi) {
  int64_t positions = positionsOperand(call.attributes);
  count += (withBias(call) ? 1 : 0) + (positions >= 0 ? 1 : 0);
  if (auto e = expectOperandCount(call, count); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  // The positions (i64) are checked by the CPU kernel's check below.
  for (size_t i = 1; i + 1 < count; ++i) {
    if (static_cast<int64_t>(i) == positions) {
      continue;
    }
    if (auto e = expectSameDType(call, i, 0); !e.empty()) {
      return e;
    }
  }
  size_t ws = count - 1;
  if (auto e = expectDType(call, ws, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectRank(call, ws, 1); !e.empty()) {
    return e;
  }
  for (size_t i = 0; i < ws; ++i) {
    if (static_cast<int64_t>(i) == positions) {
      continue;
    }
    if (auto e = expectRank(call, i, 4); !e.empty()) {
      return e;
    }
  }
  KernelCall view = call;
  for (size_t i = 0; i < view.operands.size(); ++i) {
    if (static_cast<int64_t>(i) != positions) {
      view.operands[i].dtype = DType::F32;
    }
  }
  Shape a = shapeOf(call.operands, qi);
  // The CPU backward wants 3 score blocks per worker with a softcap, else 2.
  int64_t blocks = call.attributes.getFloat("softcap", 0) > 0 ? 3 : 2;
  view.operands[ws].shape = {std::max<int64_t>(blocks * kBlockRows * a.s, 1)};
  if (auto e = findCpuKernel(kernel)->check(view); !e.empty()) {
    return e;
  }
  if (a.d > kMaxHeadDim || a.dv > kMaxHeadDim) {
    return "head dims " + std::to_string(a.d) + " and " + std::to_string(a.dv) +
           " must be at most " + std::to_string(kMaxHeadDim);
  }
  if (a.b > kMaxGridYZ || a.hq > kMaxGridYZ) {
    return "batch " + std::to_string(a.b) + " and query heads " +
           std::to_string(a.hq) + " must be at most " +
           std::to_string(kMaxGridYZ);
  }
  if (a.t > INT32_MAX || a.s > INT32_MAX) {
    return "sequence lengths " + std::to_string(a.t) + " and " +
           std::to_string(a.s) + " must fit in 32 bits";
  }
  // Query tiles x query heads, and key tiles x query heads (at most, in
  // attention_grad_kv), are one grid dimension.
  int64_t tiles = (std::max(a.t, a.s) + kBlockRows - 1) / kBlockRows;
  if (tiles * a.hq > INT32_MAX) {
    return "sequence tiles of 64 (" + std::to_string(tiles) +
           ") times query heads (" + std::to_string(a.hq) +
           ") must fit in 31 bits";
  }
  if (call.attributes.find("alibi_slopes") && a.hq > kMaxAlibiHeads) {
    return "ALiBi attention on CUDA takes at most " +
           std::to_string(kMaxAlibiHeads) + " query heads, got " +
           std::to_string(a.hq);
  }
  if (call.attributes.getInt("window", 0) > INT32_MAX) {
    return "a sliding window must fit in 32 bits";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

std::string checkAttention(const KernelCall &call) {
  return checkCommon(call, "attention", 5, 0);
}

std::string launchAttention(const CudaCall &call) {
  bool biased = call.attributes.getInt("bias", 0) != 0;
  int64_t positions = positionsOperand(call.attributes);
  size_t out = 3 + (biased ? 1 : 0) + (positions >= 0 ? 1 : 0);
  const Tensor &q = call.operands[0], &k = call.operands[1],
               &v = call.operands[2], &y = call.operands[out];
  if (y.numel() == 0) {
    return "";
  }
  Shape a = shapeOf(call.operands, 0);
  Dims p = dimsOf(a, call.attributes, biased ? &call.operands[3] : nullptr,
                  positions >= 0 ? &call.operands[positions] : nullptr);
  int64_t hd = headClass(a);
  std::string error, suffix = entrySuffix(call, q.dtype, error);
  if (!error.empty()) {
    return error;
  }
  const void *pq = q.data, *pk = k.data, *pv = v.data;
  void *py = y.data;
  void *args[] = {&pq, &pk, &pv, &py, &p};
  return call.context->launch(function("attention", hd, suffix).c_str(),
                              queryGrid(a), {kThreads},
                              2 * kBlockRows * rowBytes(hd), args);
}

//===----------------------------------------------------------------------===//
// attention_grad
//===----------------------------------------------------------------------===//

/// Where the backward keeps its 2 floats per query row: the workspace
/// after the partial dk, dv (`offset` floats in), or dq's rows (stride in
/// floats), or nowhere (stride 0).
struct StatsPlace {
  bool inWorkspace = false;
  int64_t stride = 0;
  int64_t offset = 0;
};

/// The slices of the key-major pass: attribute `kv_splits` if given, else
/// the rule of runtime/cuda/AttentionWorkspace.h.
int64_t kvSplitsOf(const Shape &a, const Attributes &attributes) {
  return attributes.find("kv_splits") ? attributes.getInt("kv_splits", 1)
                                      : attentionKvSplits(gradShape(a));
}

/// `out` is the index of dq (4, plus one per bias or positions operand).
StatsPlace statsPlace(const std::vector<Tensor> &operands, size_t out,
                      int64_t splits) {
  Shape a = shapeOf(operands, 1);
  int64_t rows = a.b * a.hq * a.t;
  int64_t offset = attentionGradStatsOffset(gradShape(a), splits);
  if (operands[out + 3].shape[0] >= offset + 2 * rows) {
    return {true, 2, offset};
  }
  int64_t bytes = a.d * static_cast<int64_t>(dtypeSize(operands[out].dtype));
  if (bytes >= 8 && bytes % 4 == 0) {
    return {false, bytes / 4, 0};
  }
  return {};
}

/// dq's index in attention_grad: after dout, q, k, v and the optional bias
/// and positions.
size_t gradOutputIndex(const Attributes &attributes) {
  return 4 + (attributes.getInt("bias", 0) != 0 ? 1 : 0) +
         (positionsOperand(attributes) >= 0 ? 1 : 0);
}

std::string checkAttentionGrad(const KernelCall &call) {
  if (auto e = checkCommon(call, "attention_grad", 8, 1); !e.empty()) {
    return e;
  }
  Shape a = shapeOf(call.operands, 1);
  size_t out = gradOutputIndex(call.attributes);
  int64_t floats = call.operands[out + 3].shape[0];
  if (a.s == 0) {
    return "";
  }
  AttentionGradShape shape = gradShape(a);
  int64_t splits = kvSplitsOf(a, call.attributes);
  int64_t group = a.hkv > 0 ? a.hq / a.hkv : 1;
  if (splits < 1 || group % splits != 0) {
    return "kv_splits " + std::to_string(splits) +
           " must divide the group of " + std::to_string(group) +
           " query heads per kv head";
  }
  int64_t partial = attentionKvPartialFloats(shape, splits);
  if (floats < partial) {
    return "workspace of " + std::to_string(floats) +
           " floats cannot hold the partial dk, dv of the key-major pass (" +
           std::to_string(splits) + " slices of the " + std::to_string(group) +
           " query heads of each kv head): it needs at least " +
           std::to_string(partial) + " floats, " +
           std::to_string(attentionGradStatsOffset(shape, splits) +
                          2 * a.b * a.hq * a.t) +
           " with the statistics (runtime/cuda/AttentionWorkspace.h)";
  }
  if (statsPlace(call.operands, out, splits).stride == 0) {
    return "workspace of " + std::to_string(floats) +
           " floats holds no 2 statistics for each of the " +
           std::to_string(a.b * a.hq * a.t) +
           " query rows after the partial dk, dv, and dq rows of head dim " +
           std::to_string(a.d) + " cannot hold them either";
  }
  return "";
}

/// The key-major pass: attention_grad_kv, and with several slices
/// attention_grad_kv_sum. `p` has the slices; `suffix` is entrySuffix's.
std::string launchKeyValue(const CudaCall &call, const Shape &a, Dims &p,
                           const std::string &suffix, float *partial,
                           const float *stats) {
  size_t out = gradOutputIndex(call.attributes);
  const Tensor &q = call.operands[1], &dk = call.operands[out + 1],
               &dv = call.operands[out + 2];
  const void *pdout = call.operands[0].data, *pq = q.data,
             *pk = call.operands[2].data, *pv = call.operands[3].data;
  void *pdk = dk.data, *pdv = dv.data;
  int64_t hd = headClass(a);
  void *args[] = {&pdout, &pq, &pk, &pv, &pdk, &pdv, &partial, &stats, &p};
  int64_t tiles = (a.s + kBlockRows - 1) / kBlockRows;
  Dim3 grid{static_cast<unsigned>(tiles * a.hkv * p.kvSplits), 1,
            static_cast<unsigned>(a.b)};
  if (auto e = call.context->launch(
          function("attention_grad_kv", hd, suffix).c_str(), grid, {kThreads},
          4 * kBlockRows * rowBytes(hd) + 2 * kBlockRows * sizeof(float), args);
      !e.empty() || p.kvSplits <= 1) {
    return e;
  }
  const float *cpartial = partial;
  int batch = static_cast<int>(a.b);
  void *sumArgs[] = {&cpartial, &pdk, &pdv, &batch, &p};
  constexpr unsigned kSumThreads = 256;
  return call.context->launch(
      ("tailor_attention_grad_kv_sum_" + suffix).c_str(),
      {blocksFor(dk.numel() + dv.numel(), kSumThreads)}, {kSumThreads}, 0,
      sumArgs);
}

std::string launchAttentionGrad(const CudaCall &call) {
  size_t out = gradOutputIndex(call.attributes);
  int64_t positions = positionsOperand(call.attributes);
  bool biased = call.attributes.getInt("bias", 0) != 0;
  const Tensor &dout = call.operands[0], &q = call.operands[1],
               &k = call.operands[2], &v = call.operands[3],
               &dq = call.operands[out], &dk = call.operands[out + 1],
               &dv = call.operands[out + 2],
               &workspace = call.operands[out + 3];
  Shape a = shapeOf(call.operands, 1);
  if (a.s == 0) {
    // No key: every row sees nothing, and dk, dv are empty.
    return dq.numel() ? call.context->memsetZero(dq.data, dq.bytes()) : "";
  }
  if (a.hkv == 0) {
    return "";
  }
  Dims p = dimsOf(a, call.attributes, biased ? &call.operands[4] : nullptr,
                  positions >= 0 ? &call.operands[positions] : nullptr);
  p.kvSplits = static_cast<int>(kvSplitsOf(a, call.attributes));
  StatsPlace place = statsPlace(call.operands, out, p.kvSplits);
  p.statsStride = place.stride;
  float *stats = place.inWorkspace ? workspace.as<float>() + place.offset
                                   : dq.as<float>();
  int64_t hd = headClass(a);
  std::string error, suffix = entrySuffix(call, q.dtype, error);
  if (!error.empty()) {
    return error;
  }
  size_t row = rowBytes(hd);
  const void *pdout = dout.data, *pq = q.data, *pk = k.data, *pv = v.data;
  void *pdq = dq.data;
  bool queries = a.b * a.hq * a.t > 0;
  if (queries) {
    void *args[] = {&pdout, &pq, &pk, &pv, &stats, &p};
    if (auto e = call.context->launch(
            function("attention_grad_stats", hd, suffix).c_str(),
            queryGrid(a), {kThreads}, 2 * kBlockRows * row, args);
        !e.empty()) {
      return e;
    }
  }
  if (dk.numel() + dv.numel() > 0) {
    float *partial = p.kvSplits > 1 ? workspace.as<float>() : nullptr;
    if (auto e = launchKeyValue(call, a, p, suffix, partial, stats);
        !e.empty()) {
      return e;
    }
  }
  if (queries && dq.numel() > 0) {
    const float *cstats = stats;
    void *args[] = {&pdout, &pq, &pk, &pv, &pdq, &cstats, &p};
    return call.context->launch(
        function("attention_grad_q", hd, suffix).c_str(), queryGrid(a),
        {kThreads}, 4 * kBlockRows * row, args);
  }
  return "";
}

#define TL_ATTENTION_FUNCTIONS(KERNEL)                                         \
  "tailor_" KERNEL "_d32_f32", "tailor_" KERNEL "_d64_f32",                    \
      "tailor_" KERNEL "_d96_f32", "tailor_" KERNEL "_d128_f32",               \
      "tailor_" KERNEL "_d32_bf16", "tailor_" KERNEL "_d64_bf16",              \
      "tailor_" KERNEL "_d96_bf16", "tailor_" KERNEL "_d128_bf16"
#define TL_ATTENTION_FP16_FUNCTIONS(KERNEL)                                    \
  "tailor_" KERNEL "_d32_f32_fp16", "tailor_" KERNEL "_d64_f32_fp16",          \
      "tailor_" KERNEL "_d96_f32_fp16", "tailor_" KERNEL "_d128_f32_fp16"

const char *const kAttentionFunctions[] = {TL_ATTENTION_FUNCTIONS("attention"),
                                           nullptr};
const char *const kAttentionGradFunctions[] = {
    TL_ATTENTION_FUNCTIONS("attention_grad_stats"),
    TL_ATTENTION_FUNCTIONS("attention_grad_kv"),
    TL_ATTENTION_FUNCTIONS("attention_grad_q"),
    "tailor_attention_grad_kv_sum_f32",
    "tailor_attention_grad_kv_sum_bf16",
    nullptr};
// Module attention_fp16 (fp16 plans).
const char *const kAttentionFp16Functions[] = {
    TL_ATTENTION_FP16_FUNCTIONS("attention"), nullptr};
const char *const kAttentionGradFp16Functions[] = {
    TL_ATTENTION_FP16_FUNCTIONS("attention_grad_stats"),
    TL_ATTENTION_FP16_FUNCTIONS("attention_grad_kv"),
    TL_ATTENTION_FP16_FUNCTIONS("attention_grad_q"),
    "tailor_attention_grad_kv_sum_f32_fp16", nullptr};

#undef TL_ATTENTION_FUNCTIONS
#undef TL_ATTENTION_FP16_FUNCTIONS

} // namespace

void addAttentionCudaKernels(std::vector<CudaKernelDef> &table) {
  // Variadic like the CPU kernels: the bias and document masking's
  // positions operands are optional.
  table.push_back({"attention", -1, checkAttention, launchAttention,
                   kAttentionFunctions, kAttentionFp16Functions});
  table.push_back({"attention_grad", -1, checkAttentionGrad,
                   launchAttentionGrad, kAttentionGradFunctions,
                   kAttentionGradFp16Functions});
}

} // namespace tailor::runtime::cuda
