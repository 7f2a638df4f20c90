//===- GradientKernels.cpp - backward kernels that reduce over rows -------===//
//
// The vector-Jacobian products of linear, rms_norm, layer_norm, attention
// and embedding: each sums over rows or contracts them (the row-local ones
// are in ElementwiseGradientKernels.cpp). All f32, dense and row-major;
// operands are the incoming gradient and the saved forward tensors, then
// the gradients written, then workspace.
//
// Determinism: no result depends on the thread count, and there are no
// atomics. Row-parallel kernels reduce within a row on one thread. Sums over
// rows (norm weights, embedding tables) split the columns across workers in
// blocks of kColumnBlock, and each worker sums its columns over all rows in
// row order. Attention's dk and dv belong to one (batch, kv head) task.
//
// Precision: elementwise math in f32 as the forward kernels compute it (the
// norms recompute r, mean and rstd with the forward's f32 code); row dot
// products and the column sums of the norm weights accumulate in f64.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/AttentionKeys.h"
#include "runtime/cpu/KernelTable.h"

#include "runtime/cpu/HalfRounding.h"
#include "runtime/cpu/VectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tailor::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Shared pieces
//===----------------------------------------------------------------------===//

/// Columns per task of a column-split reduction over rows: 256 contiguous
/// bytes per row, and a stack accumulator of this many doubles.
constexpr int64_t kColumnBlock = 64;

/// The product of all extents but the last (the rows of [..., D]).
int64_t leadingRows(const Tensor &t) {
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < t.rank(); ++i) {
    rows *= t.shape[i];
  }
  return rows;
}

/// Calls fn(c0, c1) for every block of kColumnBlock of `d` columns, blocks
/// spread over the pool; `rows` sizes the work per column.
template <typename Fn>
void forColumnBlocks(const KernelCall &call, int64_t rows, int64_t d, Fn &&fn) {
  int64_t blocks = (d + kColumnBlock - 1) / kColumnBlock;
  int64_t work = std::max<int64_t>(1, rows * kColumnBlock);
  parallelFor(call, blocks, std::max<int64_t>(1, kElementwiseGrain / work),
              [&](int64_t begin, int64_t end, int) {
                for (int64_t blk = begin; blk < end; ++blk) {
                  fn(blk * kColumnBlock, std::min(d, (blk + 1) * kColumnBlock));
                }
              });
}

/// C = alpha op(A) op(B) + beta C, row-major. Empty extents are defined
/// here, since BLAS argument checks reject them.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0) {
    return;
  }
  if (k == 0) {
    if (beta == 0.0f) {
      for (int64_t i = 0; i < m; ++i) {
        std::memset(c + i * ldc, 0, n * sizeof(float));
      }
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}

//===----------------------------------------------------------------------===//
// linear_weight_grad
//===----------------------------------------------------------------------===//

// dw [N, K] (+)= alpha dy2^T x2 over the flattened rows R of dy [..., N] and
// x [..., K]: one sgemm with the rows as the contraction, reading both
// operands as stored. Precision and threading are the BLAS's.

std::string checkLinearWeightGrad(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = firstError({expectAllF32(call), expectMinRank(call, 0, 1),
                           expectMinRank(call, 1, 1), expectRank(call, 2, 2)});
      !e.empty()) {
    return e;
  }
  const auto &dy = call.operands[0].shape, &x = call.operands[1].shape;
  if (dy.size() != x.size() ||
      !std::equal(dy.begin(), dy.end() - 1, x.begin())) {
    return "leading dimensions of dy " + shapeString(dy) + " and x " +
           shapeString(x) + " differ";
  }
  int64_t accumulate = 0;
  double alpha = 1;
  return firstError(
      {expectShape(call, 2, {dy.back(), x.back()}),
       expectIntAttr(call, "accumulate", 0, 1, false, 0, accumulate),
       expectFloatAttr(call, "alpha", false, 1.0, alpha)});
}

std::string runLinearWeightGrad(const KernelCall &call) {
  const Tensor &dy = call.operands[0], &x = call.operands[1];
  int64_t n = dy.shape.back(), k = x.shape.back(), rows = leadingRows(dy);
  float beta = call.attributes.getInt("accumulate", 0) ? 1.0f : 0.0f;
  const auto alpha = static_cast<float>(call.attributes.getFloat("alpha", 1));
  sgemm(true, false, n, k, rows, alpha, dy.as<float>(), std::max<int64_t>(n, 1),
        x.as<float>(), std::max<int64_t>(k, 1), beta,
        call.operands[2].as<float>(), std::max<int64_t>(k, 1));
  return "";
}

// linear_weight_grad_fp16 / _bf16: dy, x, dw, workspace
// (tailor-emulate-half). dy and x are rounded to the format into the
// workspace and the same sgemm sums their products. fp16: into the
// workspace's last N K floats, and the product, rounded to half, is
// written to dw or added to it (`accumulate`: the gradient accumulator,
// f32, as autocast's half weight gradient is added to an f32 .grad).
// bf16: the f32 sums go to dw directly (beta 1 with `accumulate`), as a
// bf16Compute GEMM with an f32 output.

template <HalfFormat Format>
std::string checkLinearWeightGradHalf(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  KernelCall inner = call;
  inner.operands.pop_back();
  if (auto e = checkLinearWeightGrad(inner); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 3, DType::F32); !e.empty()) {
    return e;
  }
  int64_t needed = call.operands[0].numel() + call.operands[1].numel() +
                   (kRoundsProduct<Format> ? call.operands[2].numel() : 0);
  if (call.operands[3].numel() < needed) {
    return "workspace holds " + std::to_string(call.operands[3].numel()) +
           " floats, expected at least " + std::to_string(needed);
  }
  return "";
}

template <HalfFormat Format>
std::string runLinearWeightGradHalf(const KernelCall &call) {
  const Tensor &dy = call.operands[0], &x = call.operands[1];
  int64_t n = dy.shape.back(), k = x.shape.back(), rows = leadingRows(dy);
  float *dyr = call.operands[3].as<float>();
  float *xr = dyr + dy.numel();
  roundCopy<Format>(call, dy.as<float>(), dyr, dy.numel());
  roundCopy<Format>(call, x.as<float>(), xr, x.numel());
  const auto alpha = static_cast<float>(call.attributes.getFloat("alpha", 1));
  bool accumulate = call.attributes.getInt("accumulate", 0) != 0;
  float *dw = call.operands[2].as<float>();
  if constexpr (kRoundsProduct<Format>) {
    float *product = xr + x.numel();
    sgemm(true, false, n, k, rows, alpha, dyr, std::max<int64_t>(n, 1), xr,
          std::max<int64_t>(k, 1), 0.0f, product, std::max<int64_t>(k, 1));
    addRoundedProduct(call, product, dw, n, k, accumulate);
  } else {
    sgemm(true, false, n, k, rows, alpha, dyr, std::max<int64_t>(n, 1), xr,
          std::max<int64_t>(k, 1), accumulate ? 1.0f : 0.0f, dw,
          std::max<int64_t>(k, 1));
  }
  return "";
}

//===----------------------------------------------------------------------===//
// rms_norm_grad, layer_norm_grad
//===----------------------------------------------------------------------===//

// Three passes: per-row statistics into the workspace (r, or mean and rstd,
// with the forward's f32 code, so they are the values the forward used);
// the weight (and bias) gradients by column blocks; dx by rows. dx comes
// last and is elementwise after its row's dot products, so it may alias dy
// or x exactly.
//   rms:   dx = r (g - x r^2 mean(g x)),            g = dy w
//   layer: dx = rstd (g - mean(g) - xhat mean(g xhat)), xhat = (x - mean) rstd

/// dy, x [..., D], w [D], dx, dw [D], (db [D]), workspace [>= k R].
template <bool Layer> std::string checkNormGrad(const KernelCall &call) {
  size_t count = Layer ? 7 : 6;
  if (auto e = expectOperandCount(call, count); !e.empty()) {
    return e;
  }
  if (auto e = firstError({expectAllF32(call), expectMinRank(call, 1, 1),
                           expectRank(call, count - 1, 1)});
      !e.empty()) {
    return e;
  }
  const std::vector<int64_t> &x = call.operands[1].shape;
  std::vector<int64_t> d = {x.back()};
  double eps = 0;
  if (auto e = firstError({expectShape(call, 0, x), expectShape(call, 2, d),
                           expectShape(call, 3, x), expectShape(call, 4, d),
                           Layer ? expectShape(call, 5, d) : "",
                           expectFloatAttr(call, "epsilon", true, 0, eps)});
      !e.empty()) {
    return e;
  }
  int64_t need = (Layer ? 2 : 1) * leadingRows(call.operands[1]);
  int64_t have = call.operands[count - 1].shape[0];
  if (have < need) {
    return "workspace of " + std::to_string(have) + " floats is smaller than " +
           std::to_string(need) + (Layer ? " (2 per row)" : " (1 per row)");
  }
  return eps >= 0 ? "" : "attribute 'epsilon' must be non-negative";
}

/// The forward's statistics of row x: stats[0] = r (rms), or stats[0] =
/// mean and stats[1] = rstd (layer).
TAILOR_VECTOR_CLONES void normStats(const float *x, int64_t d, float eps,
                                    bool layer, float *stats) {
  if (!layer) {
    stats[0] = 1.0f / std::sqrt(vmath::rowSumSquares(x, d, 0.0f) / d + eps);
    return;
  }
  float mean = vmath::rowSum<float>(x, d) / d;
  stats[0] = mean;
  stats[1] = 1.0f / std::sqrt(vmath::rowSumSquares(x, d, mean) / d + eps);
}

TAILOR_VECTOR_CLONES void rmsNormGradRow(const float *dy, const float *x,
                                         const float *w, float r, float *dx,
                                         int64_t d) {
  double sum = 0;
  TAILOR_SIMD(reduction(+ : sum))
  for (int64_t i = 0; i < d; ++i) {
    sum += static_cast<double>(dy[i] * w[i]) * x[i];
  }
  float c = static_cast<float>(sum / d) * r * r;
  for (int64_t i = 0; i < d; ++i) {
    dx[i] = r * (dy[i] * w[i] - x[i] * c);
  }
}

TAILOR_VECTOR_CLONES void layerNormGradRow(const float *dy, const float *x,
                                           const float *w, float mean,
                                           float rstd, float *dx, int64_t d) {
  double sumG = 0, sumGx = 0;
  TAILOR_SIMD(reduction(+ : sumG, sumGx))
  for (int64_t i = 0; i < d; ++i) {
    float g = dy[i] * w[i];
    sumG += g;
    sumGx += static_cast<double>(g) * ((x[i] - mean) * rstd);
  }
  float meanG = static_cast<float>(sumG / d);
  float meanGx = static_cast<float>(sumGx / d);
  for (int64_t i = 0; i < d; ++i) {
    float xhat = (x[i] - mean) * rstd;
    dx[i] = rstd * (dy[i] * w[i] - meanG - xhat * meanGx);
  }
}

template <bool Layer> std::string runNormGrad(const KernelCall &call) {
  const float *dy = call.operands[0].as<float>();
  const float *x = call.operands[1].as<float>();
  const float *w = call.operands[2].as<float>();
  float *dx = call.operands[3].as<float>();
  float *dw = call.operands[4].as<float>();
  float *db = Layer ? call.operands[5].as<float>() : nullptr;
  float *stats = call.operands[Layer ? 6 : 5].as<float>();
  constexpr int64_t kStats = Layer ? 2 : 1;
  int64_t d = call.operands[1].shape.back();
  int64_t rows = leadingRows(call.operands[1]);
  float eps = static_cast<float>(call.attributes.getFloat("epsilon", 0));
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (d + 1));
  parallelFor(call, rows, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      normStats(x + r * d, d, eps, Layer, stats + r * kStats);
    }
  });
  forColumnBlocks(call, rows, d, [&](int64_t c0, int64_t c1) {
    double accW[kColumnBlock] = {}, accB[kColumnBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float *dyr = dy + r * d, *xr = x + r * d, *st = stats + r * kStats;
      for (int64_t c = c0; c < c1; ++c) {
        double xhat = Layer ? static_cast<double>(xr[c] - st[0]) * st[1]
                            : static_cast<double>(xr[c]) * st[0];
        accW[c - c0] += dyr[c] * xhat;
        if constexpr (Layer) {
          accB[c - c0] += dyr[c];
        }
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dw[c] = static_cast<float>(accW[c - c0]);
      if constexpr (Layer) {
        db[c] = static_cast<float>(accB[c - c0]);
      }
    }
  });
  parallelFor(call, rows, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float *st = stats + r * kStats;
      if constexpr (Layer) {
        layerNormGradRow(dy + r * d, x + r * d, w, st[0], st[1], dx + r * d, d);
      } else {
        rmsNormGradRow(dy + r * d, x + r * d, w, st[0], dx + r * d, d);
      }
    }
  });
  return "";
}

//===----------------------------------------------------------------------===//
// attention_grad
//===----------------------------------------------------------------------===//

// Backward of `attention` by recomputation, in the forward's blocks of 64
// query rows. Per block of query head h and its kv head:
//   P  = softmax(scale Q K^T), masked entries 0    sgemm + row pass
//   dV += P^T dO                                   sgemm
//   dP = dO V^T                                    sgemm
//   dS = P (dP - rowsum(dP P))                     row pass, in place in dP
//   dQ = scale dS K,  dK += scale dS^T Q           sgemm, sgemm
// The unit of parallel work is one (batch, kv head) with all its query
// heads, so its dk and dv rows are written by one worker in one order: no
// cross-worker reduction, and the same bits for any thread count. Causal
// blocks compute only the keys their last row sees; a row that sees no key
// has P = 0 and so zero gradients. The P and dP blocks (64 x S each) live
// in the worker's workspace slot. As in the forward, the BLAS is held at
// one thread while pool workers call it concurrently.

constexpr int64_t kBlockRows = 64;

/// Operands: dout, q, k, v, [bias,] [positions,] dq, dk, dv, workspace.
struct AttentionGradShape {
  int64_t b, hq, hkv, t, s, d, dv;
};

AttentionGradShape attentionGradShape(const KernelCall &call) {
  const auto &q = call.operands[1].shape, &k = call.operands[2].shape,
             &v = call.operands[3].shape;
  return {q[0], q[1], k[1], q[2], k[2], q[3], v[3]};
}

/// Score-sized blocks per worker: probabilities and their gradients, and
/// the softcap's derivative when there is one.
int64_t attentionGradBlocks(const KernelCall &call) {
  return call.attributes.getFloat("softcap", 0) > 0 ? 3 : 2;
}

/// Index of dq: after dout, q, k, v and the bias and positions operands if
/// any (dk, dv and the workspace follow it).
size_t attentionGradOutputs(const KernelCall &call) {
  return 4 + hasBiasOperand(call) +
         (call.attributes.find("positions") != nullptr);
}

std::string checkAttentionGrad(const KernelCall &call) {
  size_t dq = attentionGradOutputs(call), ws = dq + 3;
  if (auto e = expectOperandCount(call, ws + 1); !e.empty()) {
    return e;
  }
  bool documents = call.attributes.find("positions") != nullptr;
  for (size_t i = 0; i <= ws; ++i) {
    if (documents && i == dq - 1) {
      continue; // the positions: checkAttentionPositions
    }
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
    if (auto e = expectRank(call, i, i == ws ? 1 : 4); !e.empty()) {
      return e;
    }
  }
  AttentionGradShape a = attentionGradShape(call);
  std::vector<int64_t> qShape = {a.b, a.hq, a.t, a.d},
                       kShape = {a.b, a.hkv, a.s, a.d},
                       vShape = {a.b, a.hkv, a.s, a.dv};
  if (auto e = firstError(
          {expectShape(call, 0, {a.b, a.hq, a.t, a.dv}),
           expectShape(call, 2, kShape), expectShape(call, 3, vShape),
           expectShape(call, dq, qShape), expectShape(call, dq + 1, kShape),
           expectShape(call, dq + 2, vShape),
           checkAttentionPositions(call, 1, dq)});
      !e.empty()) {
    return e;
  }
  if (hasBiasOperand(call)) {
    if (auto e = checkBiasOperand(call, 4, {a.b, a.hq, a.t, a.s});
        !e.empty()) {
      return e;
    }
  }
  if (a.hkv == 0 ? a.hq != 0 : a.hq % a.hkv != 0) {
    return "query heads (" + std::to_string(a.hq) +
           ") must be a multiple of key/value heads (" + std::to_string(a.hkv) +
           ")";
  }
  if (auto e = checkAttentionMasking(call, a.hq); !e.empty()) {
    return e;
  }
  int64_t blocks = attentionGradBlocks(call);
  int64_t w = call.operands[ws].shape[0], slot = blocks * kBlockRows * a.s;
  if (slot > 0 && (w < slot || w % slot != 0)) {
    return "workspace of " + std::to_string(w) +
           " floats must be a positive multiple of " + std::to_string(blocks) +
           " x 64 x " + std::to_string(a.s) + " floats";
  }
  return "";
}

/// Rows of the [rows, width] score block (keys from `first` on) become
/// probabilities in place: row r over the keys it sees, capped first when
/// there is a softcap (the cap's derivative, 1 - (capped / c)^2, goes to
/// `capGrad`, same layout) and then biased (ALiBi, bias operand: constants
/// to q and k, so no derivative) for query head h of batch bi, and 0
/// elsewhere.
TAILOR_VECTOR_CLONES void softmaxBlock(float *p, int64_t rows, int64_t width,
                                       const AttentionKeys &visible,
                                       int64_t bi, int64_t h, int64_t t0,
                                       int64_t first, float *capGrad) {
  for (int64_t r = 0; r < rows; ++r) {
    float *row = p + r * width;
    int64_t begin = visible.first(t0 + r) - first;
    int64_t n = visible.limit(t0 + r) - first - begin;
    std::memset(row, 0, begin * sizeof(float));
    visible.capRow(row + begin, n);
    if (capGrad) {
      float *g = capGrad + r * width;
      for (int64_t i = 0; i < width; ++i) {
        float c = (i >= begin && i < begin + n) ? row[i] / visible.softcap : 0;
        g[i] = 1.0f - c * c;
      }
    }
    if (n > 0 && visible.hasScoreBias()) {
      visible.biasRow(row + begin, bi, h, t0 + r, first + begin, n);
    }
    if (n > 0) {
      float *seen = row + begin;
      float inv = expVisibleRow(seen, n);
      for (int64_t i = 0; i < n; ++i) {
        seen[i] *= inv;
      }
    }
    std::memset(row + begin + n, 0, (width - begin - n) * sizeof(float));
  }
}

std::string runAttentionGrad(const KernelCall &call) {
  AttentionGradShape a = attentionGradShape(call);
  const float *dout = call.operands[0].as<float>();
  const float *q = call.operands[1].as<float>();
  const float *k = call.operands[2].as<float>();
  const float *v = call.operands[3].as<float>();
  size_t out = attentionGradOutputs(call);
  float *dq = call.operands[out].as<float>();
  float *dk = call.operands[out + 1].as<float>();
  float *dv = call.operands[out + 2].as<float>();
  const Tensor &ws = call.operands[out + 3];
  float *workspace = ws.as<float>();
  if (a.s == 0) {
    parallelZero(call, dq, call.operands[out].numel()); // no key: zeros
    return "";
  }
  if (a.hkv == 0) {
    return "";
  }
  if (std::string e = checkPositionValues(call); !e.empty()) {
    return e;
  }
  AttentionKeys all = attentionKeys(
      call, a.t, a.s, hasBiasOperand(call) ? &call.operands[4] : nullptr);
  float scale = static_cast<float>(call.attributes.getFloat(
      "scale", a.d > 0 ? 1.0 / std::sqrt(static_cast<double>(a.d)) : 1.0));
  int64_t slotSize = attentionGradBlocks(call) * kBlockRows * a.s;
  int64_t slots = ws.shape[0] / slotSize;
  int64_t group = a.hq / a.hkv;
  int64_t tasks = a.b * a.hkv;

  auto runTasks = [&](int64_t begin, int64_t end, int worker) {
    float *p = workspace + worker * slotSize;
    float *dp = p + kBlockRows * a.s;
    float *capGrad = all.softcap > 0 ? dp + kBlockRows * a.s : nullptr;
    for (int64_t task = begin; task < end; ++task) {
      // task = bi * Hkv + kv head: the kv tensors' own head index.
      const float *kp = k + task * a.s * a.d, *vp = v + task * a.s * a.dv;
      float *dkp = dk + task * a.s * a.d, *dvp = dv + task * a.s * a.dv;
      std::memset(dkp, 0, a.s * a.d * sizeof(float));
      std::memset(dvp, 0, a.s * a.dv * sizeof(float));
      int64_t bi = task / a.hkv, kvHead = task % a.hkv;
      AttentionKeys visible = all.atBatch(bi);
      for (int64_t h = kvHead * group; h < (kvHead + 1) * group; ++h) {
        int64_t bh = bi * a.hq + h;
        for (int64_t t0 = 0; t0 < a.t; t0 += kBlockRows) {
          int64_t rows = std::min(kBlockRows, a.t - t0);
          // The block's keys [first, first + keys): from its rows' first
          // to its last row's limit.
          int64_t first = visible.blockFirst(t0, rows);
          int64_t keys = visible.limit(t0 + rows - 1) - first;
          const float *qb = q + (bh * a.t + t0) * a.d;
          const float *dob = dout + (bh * a.t + t0) * a.dv;
          float *dqb = dq + (bh * a.t + t0) * a.d;
          if (keys <= 0) {
            std::memset(dqb, 0, rows * a.d * sizeof(float));
            continue;
          }
          int64_t ld = std::max<int64_t>(a.d, 1),
                  ldv = std::max<int64_t>(a.dv, 1);
          const float *kb = kp + first * a.d, *vb = vp + first * a.dv;
          float *dkb = dkp + first * a.d, *dvb = dvp + first * a.dv;
          sgemm(false, true, rows, keys, a.d, scale, qb, ld, kb, ld, 0.0f, p,
                keys);
          softmaxBlock(p, rows, keys, visible, bi, h, t0, first, capGrad);
          sgemm(true, false, keys, a.dv, rows, 1.0f, p, keys, dob, ldv, 1.0f,
                dvb, ldv);
          sgemm(false, true, rows, keys, a.dv, 1.0f, dob, ldv, vb, ldv, 0.0f,
                dp, keys);
          for (int64_t r = 0; r < rows; ++r) {
            softmaxGradRow(p + r * keys, dp + r * keys, dp + r * keys, keys);
          }
          if (capGrad) {
            for (int64_t i = 0; i < rows * keys; ++i) {
              dp[i] *= capGrad[i];
            }
          }
          sgemm(false, false, rows, a.d, keys, scale, dp, keys, kb, ld, 0.0f,
                dqb, ld);
          sgemm(true, false, keys, a.d, rows, scale, dp, keys, qb, ld, 1.0f,
                dkb, ld);
        }
      }
    }
  };

  int maxWorkers = static_cast<int>(std::min<int64_t>(slots, 1 << 30));
  if (call.pool && call.pool->size() > 1 && maxWorkers > 1 && tasks > 1) {
    ScopedBlasThreads single(1);
    call.pool->parallelFor(tasks, 1, runTasks, maxWorkers);
  } else {
    runTasks(0, tasks, 0);
  }
  return "";
}

//===----------------------------------------------------------------------===//
// embedding_grad
//===----------------------------------------------------------------------===//

// dtable[ids[i], :] += dy[i, :], a scatter-add. Repeated ids make a
// row-parallel split race, so the columns are split instead: each worker
// walks all tokens in order over its column block, so each element's sum
// has one fixed order. Ids are validated before anything is written.

std::string checkEmbeddingGrad(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = firstError({expectDType(call, 0, DType::F32),
                           expectDTypeIn(call, 1, {DType::I32, DType::I64}),
                           expectDType(call, 2, DType::F32),
                           expectRank(call, 2, 2)});
      !e.empty()) {
    return e;
  }
  std::vector<int64_t> dy = call.operands[1].shape;
  dy.push_back(call.operands[2].shape[1]);
  int64_t accumulate = 0;
  return firstError(
      {expectShape(call, 0, dy),
       expectIntAttr(call, "accumulate", 0, 1, false, 0, accumulate)});
}

template <typename I>
std::string runEmbeddingGradTyped(const KernelCall &call) {
  const float *dy = call.operands[0].as<float>();
  const I *ids = call.operands[1].as<I>();
  const Tensor &table = call.operands[2];
  int64_t n = call.operands[1].numel();
  int64_t vocab = table.shape[0], d = table.shape[1];
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return "token id " + std::to_string(ids[i]) + " at position " +
             std::to_string(i) + " is out of range [0, " +
             std::to_string(vocab) + ")";
    }
  }
  float *dt = table.as<float>();
  if (call.attributes.getInt("accumulate", 0) == 0) {
    parallelZero(call, dt, table.numel());
  }
  forColumnBlocks(call, n, d, [&](int64_t c0, int64_t c1) {
    for (int64_t i = 0; i < n; ++i) {
      float *dst = dt + static_cast<int64_t>(ids[i]) * d;
      const float *src = dy + i * d;
      for (int64_t c = c0; c < c1; ++c) {
        dst[c] += src[c];
      }
    }
  });
  return "";
}

std::string runEmbeddingGrad(const KernelCall &call) {
  if (call.operands[1].dtype == DType::I32) {
    return runEmbeddingGradTyped<int32_t>(call);
  }
  return runEmbeddingGradTyped<int64_t>(call);
}

} // namespace

void addGradientKernels(std::vector<KernelDef> &table) {
  table.push_back(
      {"linear_weight_grad", 3, checkLinearWeightGrad, runLinearWeightGrad});
  table.push_back({"linear_weight_grad_fp16", 4,
                   checkLinearWeightGradHalf<HalfFormat::Fp16>,
                   runLinearWeightGradHalf<HalfFormat::Fp16>});
  table.push_back({"linear_weight_grad_bf16", 4,
                   checkLinearWeightGradHalf<HalfFormat::Bf16>,
                   runLinearWeightGradHalf<HalfFormat::Bf16>});
  table.push_back(
      {"rms_norm_grad", 6, checkNormGrad<false>, runNormGrad<false>});
  table.push_back(
      {"layer_norm_grad", 7, checkNormGrad<true>, runNormGrad<true>});
  // dout, q, k, v, [bias], [positions], dq, dk, dv, workspace: 8 to 10
  // operands (attributes `bias` and `positions`).
  table.push_back({"attention_grad", -1, checkAttentionGrad, runAttentionGrad});
  table.push_back({"embedding_grad", 3, checkEmbeddingGrad, runEmbeddingGrad});
}

} // namespace tailor::runtime::cpu
