//===- TransformerKernels.cpp - rope, attention, embedding ----------------===//
//
// The three kernels a decoder layer needs besides GEMMs and norms, all f32
// on dense row-major tensors in the Hugging Face layouts: heads before
// tokens ([B, H, T, D]), rotary tables [T, D] or [B, T, D] holding cos and
// sin for every element (HF repeats each frequency over both halves, or
// over both members of a pair when interleaved).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/AttentionKeys.h"
#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/VectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tailor::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

// y = x * cos + rotate(x) * sin, per row of D, the order HF's
// apply_rotary_pos_emb multiplies in. rotate is rotate_half (cat(-x2, x1))
// by default and rotates adjacent pairs (GPT-J, Meta's original Llama) when
// interleaved. Each output pair is computed from both inputs at once, so y
// may alias x exactly (TAILOR_IVDEP: iterations stay independent then too).

TAILOR_VECTOR_CLONES void ropeHalfRow(const float *x, const float *c,
                                      const float *s, float *y, int64_t d) {
  int64_t half = d / 2;
  TAILOR_IVDEP
  for (int64_t i = 0; i < half; ++i) {
    float a = x[i], b = x[i + half];
    y[i] = a * c[i] - b * s[i];
    y[i + half] = b * c[i + half] + a * s[i + half];
  }
}

TAILOR_VECTOR_CLONES void ropePairRow(const float *x, const float *c,
                                      const float *s, float *y, int64_t d) {
  TAILOR_IVDEP
  for (int64_t i = 0; i < d; i += 2) {
    float a = x[i], b = x[i + 1];
    y[i] = a * c[i] - b * s[i];
    y[i + 1] = b * c[i + 1] + a * s[i + 1];
  }
}

std::string checkRope(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  for (size_t i = 0; i < 4; ++i) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
  }
  if (auto e = expectRank(call, 0, 4); !e.empty()) {
    return e;
  }
  const std::vector<int64_t> &x = call.operands[0].shape;
  int64_t b = x[0], t = x[2], d = x[3];
  if (d % 2) {
    return "head dimension " + std::to_string(d) + " must be even";
  }
  const std::vector<int64_t> &cs = call.operands[1].shape;
  if (cs != std::vector<int64_t>{t, d} && cs != std::vector<int64_t>{b, t, d}) {
    return "operand 1 must have shape " + shapeString({t, d}) + " or " +
           shapeString({b, t, d}) + ", got " + shapeString(cs);
  }
  if (auto e = expectShape(call, 2, cs); !e.empty()) {
    return e;
  }
  if (auto e = expectShape(call, 3, x); !e.empty()) {
    return e;
  }
  int64_t interleaved = 0;
  return expectIntAttr(call, "interleaved", 0, 1, false, 0, interleaved);
}

std::string runRope(const KernelCall &call) {
  const Tensor &tx = call.operands[0];
  int64_t b = tx.shape[0], h = tx.shape[1], t = tx.shape[2], d = tx.shape[3];
  if (d == 0) {
    return "";
  }
  const float *x = tx.as<float>();
  const float *cosT = call.operands[1].as<float>();
  const float *sinT = call.operands[2].as<float>();
  float *y = call.operands[3].as<float>();
  bool perBatch = call.operands[1].rank() == 3;
  bool interleaved = call.attributes.getInt("interleaved", 0) != 0;
  parallelFor(call, b * h * t, std::max<int64_t>(1, kElementwiseGrain / d),
              [&](int64_t begin, int64_t end, int) {
                for (int64_t row = begin; row < end; ++row) {
                  int64_t ti = row % t, bi = row / (h * t);
                  int64_t table = ((perBatch ? bi * t : 0) + ti) * d;
                  if (interleaved) {
                    ropePairRow(x + row * d, cosT + table, sinT + table,
                                y + row * d, d);
                  } else {
                    ropeHalfRow(x + row * d, cosT + table, sinT + table,
                                y + row * d, d);
                  }
                }
              });
  return "";
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

// Scaled dot-product attention with grouped KV heads, exact (not online)
// softmax per query row, in blocks of kBlockRows query rows per (batch, head):
//   scores[r, s] = scale * q[t0 + r] . k[s]    one sgemm (q K^T)
//   p = exp(scores - rowmax), masked entries 0 one vectorized pass per row
//   y[t0 + r] = (p V)[r] / rowsum              one sgemm, then a row scale
// The score block lives in the calling worker's workspace slot (64 x S
// floats), so memory stays O(S) per worker rather than O(T S) per head.
// With causal masking, row t sees keys s <= t + (S - T), and with a sliding
// window of W also only s > t + (S - T) - W, and with document masking
// only the keys of the row's own example (AttentionKeys); a block
// computes only the keys from its first row's first to its last row's
// limit, so about half the square is skipped (all but a band with a
// window). A row that sees no key (S < T) gets zeros. A softcap c caps the
// scaled scores as c * tanh(s / c) before the softmax (Gemma-2); ALiBi
// slopes and the optional bias operand (q, k, v, bias, y, workspace) are
// then added to the visible scores of each row (AttentionKeys::biasRow), so
// neither costs a T x S tensor beyond what the caller's bias holds.
//
// Precision: all f32, as PyTorch's math SDPA on f32 inputs; masked keys are
// skipped rather than added as -inf, which gives the same probabilities.
// scale defaults to 1 / sqrt(D).
//
// The dot products go through sgemm rather than a hand loop: a 64-row block
// against S keys is a real GEMM and OpenBLAS's packed kernels beat anything
// auto-vectorized. Blocks run in parallel on the pool, each calling sgemm
// from its own thread, so the BLAS is held at one thread meanwhile (its own
// threads would oversubscribe the cores, and OpenBLAS serializes concurrent
// multithreaded GEMMs).

constexpr int64_t kBlockRows = 64;

struct AttentionShape {
  int64_t b, hq, hkv, t, s, d, dv;
};

AttentionShape attentionShape(const KernelCall &call) {
  const auto &q = call.operands[0].shape, &k = call.operands[1].shape,
             &v = call.operands[2].shape;
  return {q[0], q[1], k[1], q[2], k[2], q[3], v[3]};
}

/// Operands: q, k, v, [bias,] [positions,] y, workspace (y and the
/// workspace are always the last two).
std::string checkAttention(const KernelCall &call) {
  bool withBias = hasBiasOperand(call);
  bool documents = call.attributes.find("positions") != nullptr;
  size_t count = 5 + withBias + documents, y = count - 2, ws = count - 1;
  if (auto e = expectOperandCount(call, count); !e.empty()) {
    return e;
  }
  for (size_t i = 0; i < count; ++i) {
    if (documents && i == y - 1) {
      continue; // the positions: checkAttentionPositions
    }
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
    if (auto e = expectRank(call, i, i == ws ? 1 : 4); !e.empty()) {
      return e;
    }
  }
  AttentionShape a = attentionShape(call);
  if (auto e = expectShape(call, 1, {a.b, a.hkv, a.s, a.d}); !e.empty()) {
    return e;
  }
  if (auto e = expectShape(call, 2, {a.b, a.hkv, a.s, a.dv}); !e.empty()) {
    return e;
  }
  if (auto e = expectShape(call, y, {a.b, a.hq, a.t, a.dv}); !e.empty()) {
    return e;
  }
  if (auto e = checkAttentionPositions(call, 0, y); !e.empty()) {
    return e;
  }
  if (withBias) {
    if (auto e = checkBiasOperand(call, 3, {a.b, a.hq, a.t, a.s});
        !e.empty()) {
      return e;
    }
  }
  if (a.hkv == 0 ? a.hq != 0 : a.hq % a.hkv != 0) {
    return "query heads (" + std::to_string(a.hq) +
           ") must be a multiple of key/value heads (" + std::to_string(a.hkv) +
           ")";
  }
  int64_t w = call.operands[ws].shape[0];
  if (a.s > 0 && w < kBlockRows * a.s) {
    return "workspace of " + std::to_string(w) + " floats holds no 64 x " +
           std::to_string(a.s) + " score block";
  }
  return checkAttentionMasking(call, a.hq);
}

/// Turns each row of the [rows, keys] score block (keys from `first` on)
/// into unnormalized probabilities in place: exp(s - rowmax) over the keys
/// row r may see, [keys.first(t0 + r), keys.limit(t0 + r)), capped first
/// when softcap > 0 and then biased (ALiBi, bias operand) for query head h
/// of batch bi, and 0 elsewhere. inv[r] gets 1 / rowsum, or 0 for a
/// row that sees no key, the bias hiding all it could see included (its
/// output is then zeros).
TAILOR_VECTOR_CLONES void expScores(float *scores, int64_t rows, int64_t width,
                                    const AttentionKeys &visible, int64_t bi,
                                    int64_t h, int64_t t0, int64_t first,
                                    float *inv) {
  for (int64_t r = 0; r < rows; ++r) {
    float *row = scores + r * width;
    int64_t begin = visible.first(t0 + r) - first;
    int64_t n = visible.limit(t0 + r) - first - begin;
    std::memset(row, 0, begin * sizeof(float));
    visible.capRow(row + begin, n);
    if (n > 0 && visible.hasScoreBias()) {
      visible.biasRow(row + begin, bi, h, t0 + r, first + begin, n);
    }
    inv[r] = expVisibleRow(row + begin, n);
    std::memset(row + begin + std::max<int64_t>(n, 0), 0,
                (width - begin - std::max<int64_t>(n, 0)) * sizeof(float));
  }
}

/// y[r, :] *= inv[r]: the softmax normalization, applied to P V.
TAILOR_VECTOR_CLONES void scaleRows(float *y, int64_t rows, int64_t dv,
                                    const float *inv) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dv; ++i) {
      y[r * dv + i] *= inv[r];
    }
  }
}

std::string runAttention(const KernelCall &call) {
  AttentionShape a = attentionShape(call);
  const float *q = call.operands[0].as<float>();
  const float *k = call.operands[1].as<float>();
  const float *v = call.operands[2].as<float>();
  bool withBias = hasBiasOperand(call);
  size_t count = call.operands.size();
  const Tensor &out = call.operands[count - 2], &ws = call.operands[count - 1];
  float *y = out.as<float>();
  float *workspace = ws.as<float>();
  if (out.numel() == 0) {
    return "";
  }
  if (std::string e = checkPositionValues(call); !e.empty()) {
    return e;
  }
  AttentionKeys all = attentionKeys(call, a.t, a.s,
                                    withBias ? &call.operands[3] : nullptr);
  float scale = static_cast<float>(call.attributes.getFloat(
      "scale", a.d > 0 ? 1.0 / std::sqrt(static_cast<double>(a.d)) : 1.0));
  int64_t slotSize = kBlockRows * a.s;
  int64_t slots = a.s > 0 ? ws.shape[0] / slotSize : int64_t(1) << 30;
  int64_t group = a.hq / a.hkv;
  int64_t blocks = (a.t + kBlockRows - 1) / kBlockRows;
  int64_t tasks = a.b * a.hq * blocks;
  int maxWorkers = static_cast<int>(std::min<int64_t>(slots, 1 << 30));

  auto runBlocks = [&](int64_t begin, int64_t end, int worker) {
    float *scores = workspace + worker * slotSize;
    float inv[kBlockRows];
    for (int64_t task = begin; task < end; ++task) {
      int64_t blk = task % blocks, bh = task / blocks;
      int64_t bi = bh / a.hq, h = bh % a.hq;
      int64_t t0 = blk * kBlockRows;
      int64_t rows = std::min(kBlockRows, a.t - t0);
      const float *qp = q + (bh * a.t + t0) * a.d;
      int64_t kvHead = bi * a.hkv + h / group;
      AttentionKeys visible = all.atBatch(bi);
      // The block's keys: from its rows' first to its last row's limit
      // (rows see later keys as t grows).
      int64_t first = visible.blockFirst(t0, rows);
      int64_t keys = visible.limit(t0 + rows - 1) - first;
      const float *kp = k + (kvHead * a.s + first) * a.d;
      const float *vp = v + (kvHead * a.s + first) * a.dv;
      float *yp = y + (bh * a.t + t0) * a.dv;
      if (keys <= 0 || a.dv == 0) {
        std::memset(yp, 0, rows * a.dv * sizeof(float));
        continue;
      }
      if (a.d > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, a.d,
                    scale, qp, a.d, kp, a.d, 0.0f, scores, keys);
      } else {
        std::memset(scores, 0, rows * keys * sizeof(float));
      }
      expScores(scores, rows, keys, visible, bi, h, t0, first, inv);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, a.dv, keys,
                  1.0f, scores, keys, vp, a.dv, 0.0f, yp, a.dv);
      scaleRows(yp, rows, a.dv, inv);
    }
  };

  bool parallel =
      call.pool && call.pool->size() > 1 && maxWorkers > 1 && tasks > 1;
  if (parallel) {
    ScopedBlasThreads single(1);
    call.pool->parallelFor(tasks, 1, runBlocks, maxWorkers);
  } else {
    runBlocks(0, tasks, 0);
  }
  return "";
}

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

// A row gather: y[i, :] = table[ids[i], :]. Ids are validated in one pass
// before any row moves, so a bad id leaves y untouched and the error names
// the first offender.

std::string checkEmbedding(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 0, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 1, {DType::I32, DType::I64}); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 2, DType::F32); !e.empty()) {
    return e;
  }
  if (auto e = expectRank(call, 0, 2); !e.empty()) {
    return e;
  }
  std::vector<int64_t> out = call.operands[1].shape;
  out.push_back(call.operands[0].shape[1]);
  return expectShape(call, 2, out);
}

template <typename I> std::string runEmbeddingTyped(const KernelCall &call) {
  const Tensor &table = call.operands[0];
  int64_t vocab = table.shape[0], d = table.shape[1];
  const I *ids = call.operands[1].as<I>();
  int64_t n = call.operands[1].numel();
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return "token id " + std::to_string(ids[i]) + " at position " +
             std::to_string(i) + " is out of range [0, " +
             std::to_string(vocab) + ")";
    }
  }
  const float *src = table.as<float>();
  float *y = call.operands[2].as<float>();
  parallelFor(call, n, std::max<int64_t>(1, kElementwiseGrain / (d + 1)),
              [&](int64_t begin, int64_t end, int) {
                for (int64_t i = begin; i < end; ++i) {
                  std::memcpy(y + i * d, src + static_cast<int64_t>(ids[i]) * d,
                              d * sizeof(float));
                }
              });
  return "";
}

std::string runEmbedding(const KernelCall &call) {
  if (call.operands[1].dtype == DType::I32) {
    return runEmbeddingTyped<int32_t>(call);
  }
  return runEmbeddingTyped<int64_t>(call);
}

} // namespace

void addTransformerKernels(std::vector<KernelDef> &table) {
  table.push_back({"rope", 4, checkRope, runRope});
  // q, k, v, [bias], [positions], y, workspace: 5 to 7 operands
  // (attributes `bias` and `positions`).
  table.push_back({"attention", -1, checkAttention, runAttention});
  table.push_back({"embedding", 3, checkEmbedding, runEmbedding});
}

} // namespace tailor::runtime::cpu
