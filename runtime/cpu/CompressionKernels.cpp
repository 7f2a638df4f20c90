//===- CompressionKernels.cpp - PowerSGD's kernels on gradient states -----===//
//
// The compute of PyTorch's PowerSGD communication hook (powerSGD_hook.py),
// on the states tailor-compress-gradients declares (passes/parallel/
// CompressGradients.cpp): error feedback, Q's first values, Gram-Schmidt and
// the three low-rank products. Every operand is f32 and row-major; a state
// of rank > 2 is read as the matrix [shape[0], the rest], as the hook views
// a gradient. The factors are small (rows x rank, rank 1 to a few), so the
// Gram-Schmidt dots run in double (the hook's torch.sum and vector_norm run
// in f32: results agree to f32 rounding); the products go to the BLAS.
//
// Top-k and EF-SignSGD (the sections at the end) read a bucket's gradients
// as one flat vector, each gradient row-major, in the order listed.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/quant/Wire.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace tailor::runtime::cpu {

namespace {

/// Operand `index` read as a matrix: [shape[0], rest] (a scalar: 1 x 1).
std::pair<int64_t, int64_t> matrixOf(const KernelCall &call, size_t index) {
  const Tensor &t = call.operands[index];
  int64_t rows = t.rank() == 0 ? 1 : t.shape[0];
  int64_t cols = rows == 0 ? 0 : t.numel() / rows;
  return {rows, cols};
}

/// Every operand f32, and `count` of them.
std::string expectF32Operands(const KernelCall &call, size_t count) {
  if (auto e = expectOperandCount(call, count); !e.empty()) {
    return e;
  }
  return expectAllF32(call);
}

//===----------------------------------------------------------------------===//
// error_feedback_add, error_feedback_store
//===----------------------------------------------------------------------===//
//
// error_feedback_add (error, grad; same shapes): grad += error, then
// error = grad: the hook's `input_tensor.add_(error)` and the copy it keeps
// of what it sends. error_feedback_store (grad, error): error -= grad, the
// hook's `error = input_tensor_cp - input_tensor` once the bucket holds the
// decompressed average. Elementwise, in chunks on the pool.

std::string checkErrorPair(const KernelCall &call) {
  if (auto e = expectF32Operands(call, 2); !e.empty()) {
    return e;
  }
  if (call.operands[0].numel() != call.operands[1].numel()) {
    return "operands have " + std::to_string(call.operands[0].numel()) +
           " and " + std::to_string(call.operands[1].numel()) +
           " elements; expected one count";
  }
  return "";
}

std::string runErrorFeedbackAdd(const KernelCall &call) {
  float *error = call.operands[0].as<float>();
  float *grad = call.operands[1].as<float>();
  parallelFor(call, call.operands[0].numel(), kElementwiseGrain,
              [&](int64_t begin, int64_t end, int) {
                for (int64_t i = begin; i < end; ++i) {
                  grad[i] += error[i];
                  error[i] = grad[i];
                }
              });
  return "";
}

std::string runErrorFeedbackStore(const KernelCall &call) {
  const float *grad = call.operands[0].as<float>();
  float *error = call.operands[1].as<float>();
  parallelFor(call, call.operands[0].numel(), kElementwiseGrain,
              [&](int64_t begin, int64_t end, int) {
                for (int64_t i = begin; i < end; ++i) {
                  error[i] -= grad[i];
                }
              });
  return "";
}

//===----------------------------------------------------------------------===//
// lowrank_init
//===----------------------------------------------------------------------===//
//
// factor (f32, written): element k (row-major) = float(v - 1000) / 1000,
// v = ((k * 2654435761 + 12345) mod 2^32 >> 8) mod 2001. A fixed function of
// the position (tg.lowrank_init documents it), in place of the hook's
// torch.randn from a seeded generator, so a test can install the same
// values in the hook. Integer arithmetic and one f32 division: the same
// bits everywhere.

std::string checkLowRankInit(const KernelCall &call) {
  return expectF32Operands(call, 1);
}

} // namespace

float lowRankInitValue(int64_t k) {
  uint32_t u =
      static_cast<uint32_t>(static_cast<uint64_t>(k) * 2654435761u + 12345u);
  int64_t v = static_cast<int64_t>((u >> 8) % 2001u);
  return static_cast<float>(v - 1000) / 1000.0f;
}

namespace {

std::string runLowRankInit(const KernelCall &call) {
  float *factor = call.operands[0].as<float>();
  int64_t n = call.operands[0].numel();
  for (int64_t k = 0; k < n; ++k) {
    factor[k] = lowRankInitValue(k);
  }
  return "";
}

//===----------------------------------------------------------------------===//
// orthogonalize
//===----------------------------------------------------------------------===//
//
// factor (f32 [rows, cols], cols <= rows, in place), attribute `epsilon`
// (>= 0, default 0): the hook's _orthogonalize_gram_schmidt. Column i is
// divided by its norm (+ epsilon); its projection is then taken out of
// every later column. A zero column with epsilon 0 becomes NaN, as in the
// hook (which recommends epsilon 1e-8 then). Columns are strided (row-major
// [rows, cols]); cols is the approximation rank, so the loops are short
// and serial.

std::string checkOrthogonalize(const KernelCall &call) {
  if (auto e = expectF32Operands(call, 1); !e.empty()) {
    return e;
  }
  if (auto e = expectRank(call, 0, 2); !e.empty()) {
    return e;
  }
  if (call.operands[0].shape[1] > call.operands[0].shape[0]) {
    return "operand 0 is " + shapeString(call.operands[0].shape) +
           ": more columns than rows cannot be orthonormal";
  }
  double epsilon = 0;
  if (auto e = expectFloatAttr(call, "epsilon", false, 0.0, epsilon);
      !e.empty()) {
    return e;
  }
  return epsilon < 0 ? "attribute 'epsilon' must not be negative" : "";
}

std::string runOrthogonalize(const KernelCall &call) {
  float *x = call.operands[0].as<float>();
  int64_t rows = call.operands[0].shape[0];
  int64_t cols = call.operands[0].shape[1];
  double epsilon = call.attributes.getFloat("epsilon", 0.0);
  for (int64_t i = 0; i < cols; ++i) {
    double squares = 0;
    for (int64_t r = 0; r < rows; ++r) {
      squares += double(x[r * cols + i]) * double(x[r * cols + i]);
    }
    float norm = static_cast<float>(std::sqrt(squares));
    float divisor = epsilon == 0 ? norm : norm + static_cast<float>(epsilon);
    for (int64_t r = 0; r < rows; ++r) {
      x[r * cols + i] /= divisor;
    }
    for (int64_t j = i + 1; j < cols; ++j) {
      double dot = 0;
      for (int64_t r = 0; r < rows; ++r) {
        dot += double(x[r * cols + i]) * double(x[r * cols + j]);
      }
      float d = static_cast<float>(dot);
      for (int64_t r = 0; r < rows; ++r) {
        x[r * cols + j] -= d * x[r * cols + i];
      }
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// lowrank_matmul
//===----------------------------------------------------------------------===//
//
// a, b, c (f32, each read as a matrix), attributes transpose_a and
// transpose_b (0 or 1): c = op(a) op(b), overwritten. PowerSGD's P = M Q,
// Q = M^T P and M = P Q^T, the hook's torch.bmm calls, as one sgemm (which
// threads itself; setBlasThreads sets how many).

std::string checkLowRankMatmul(const KernelCall &call) {
  if (auto e = expectF32Operands(call, 3); !e.empty()) {
    return e;
  }
  int64_t ta = 0;
  int64_t tb = 0;
  if (auto e = expectIntAttr(call, "transpose_a", 0, 1, false, 0, ta);
      !e.empty()) {
    return e;
  }
  if (auto e = expectIntAttr(call, "transpose_b", 0, 1, false, 0, tb);
      !e.empty()) {
    return e;
  }
  auto [ar, ac] = matrixOf(call, 0);
  auto [br, bc] = matrixOf(call, 1);
  auto [cr, cc] = matrixOf(call, 2);
  int64_t m = ta ? ac : ar;
  int64_t k = ta ? ar : ac;
  int64_t kb = tb ? bc : br;
  int64_t n = tb ? br : bc;
  if (k != kb || cr != m || cc != n) {
    return "shapes do not chain: " + std::to_string(m) + "x" +
           std::to_string(k) + " times " + std::to_string(kb) + "x" +
           std::to_string(n) + " into " + std::to_string(cr) + "x" +
           std::to_string(cc);
  }
  return "";
}

std::string runLowRankMatmul(const KernelCall &call) {
  bool ta = call.attributes.getInt("transpose_a", 0) != 0;
  bool tb = call.attributes.getInt("transpose_b", 0) != 0;
  auto [ar, ac] = matrixOf(call, 0);
  auto [br, bc] = matrixOf(call, 1);
  auto [cr, cc] = matrixOf(call, 2);
  int64_t k = ta ? ar : ac;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, static_cast<int>(cr),
              static_cast<int>(cc), static_cast<int>(k), 1.0f,
              call.operands[0].as<float>(), static_cast<int>(ac),
              call.operands[1].as<float>(), static_cast<int>(bc), 0.0f,
              call.operands[2].as<float>(), static_cast<int>(cc));
  (void)br;
  return "";
}

//===----------------------------------------------------------------------===//
// A bucket read as one flat vector
//===----------------------------------------------------------------------===//

/// Operands [first, first + count) as consecutive parts of one flat f32
/// vector: part i covers flat positions [starts[i], starts[i + 1]).
struct FlatBucket {
  std::vector<float *> parts;
  std::vector<int64_t> starts = {0};

  FlatBucket(const KernelCall &call, size_t first, size_t count) {
    for (size_t i = first; i < first + count; ++i) {
      parts.push_back(call.operands[i].as<float>());
      starts.push_back(starts.back() + call.operands[i].numel());
    }
  }
  int64_t size() const { return starts.back(); }
  /// The part holding flat position `at` (0 <= at < size()).
  size_t partOf(int64_t at) const {
    return static_cast<size_t>(
        std::upper_bound(starts.begin(), starts.end(), at) - starts.begin() -
        1);
  }
  /// Calls fn(flat position, gradient pointer, residual pointer or null)
  /// for every element in order.
  template <typename Fn>
  void forEach(const FlatBucket *residual, Fn &&fn) const {
    for (size_t p = 0; p < parts.size(); ++p) {
      for (int64_t i = 0, n = starts[p + 1] - starts[p]; i < n; ++i) {
        fn(starts[p] + i, parts[p] + i,
           residual ? residual->parts[p] + i : nullptr);
      }
    }
  }
};

/// A compressor's operands: `members` gradients, as many residuals or
/// none, then the two outputs `out0` and `out1` (1-D). Stores whether
/// there are residuals.
std::string checkCompressor(const KernelCall &call, DType out0, DType out1,
                            int64_t &members, bool &residual) {
  if (auto e = expectIntAttr(call, "members", 1,
                             std::numeric_limits<int32_t>::max(), true, 0,
                             members);
      !e.empty()) {
    return e;
  }
  size_t m = static_cast<size_t>(members);
  if (call.operands.size() != m + 2 && call.operands.size() != 2 * m + 2) {
    return "expected " + std::to_string(m) + " gradients, optionally as many "
           "residuals, then two outputs; got " +
           std::to_string(call.operands.size()) + " operands";
  }
  residual = call.operands.size() == 2 * m + 2;
  size_t outputs = call.operands.size() - 2;
  int64_t elements = 0;
  for (size_t i = 0; i < outputs; ++i) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
    if (i < m) {
      elements += call.operands[i].numel();
    } else if (call.operands[i].numel() != call.operands[i - m].numel()) {
      return "residual " + std::to_string(i - m) + " has " +
             std::to_string(call.operands[i].numel()) +
             " elements, its gradient " +
             std::to_string(call.operands[i - m].numel());
    }
  }
  if (elements >= (int64_t(1) << 31)) {
    return "the bucket holds " + std::to_string(elements) +
           " elements; i32 positions reach 2^31";
  }
  return firstError({expectDType(call, outputs, out0),
                     expectDType(call, outputs + 1, out1),
                     expectRank(call, outputs, 1),
                     expectRank(call, outputs + 1, 1)});
}

/// The gathered inputs (operands 0 and 1, 1-D, of `in0` and `in1`), then
/// at least one f32 gradient.
std::string checkAverager(const KernelCall &call, DType in0, DType in1) {
  if (call.operands.size() < 3) {
    return "expected two gathered inputs and at least one gradient, got " +
           std::to_string(call.operands.size()) + " operands";
  }
  for (size_t i = 2; i < call.operands.size(); ++i) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
  }
  return firstError({expectDType(call, 0, in0), expectDType(call, 1, in1),
                     expectRank(call, 0, 1), expectRank(call, 1, 1)});
}

//===----------------------------------------------------------------------===//
// topk_compress, sparse_average
//===----------------------------------------------------------------------===//
//
// topk_compress (grads..., [residuals...], values f32 [k], indices i32 [k];
// attribute `members`): Aji and Heafield's gradient dropping ("Sparse
// Communication for Distributed Gradient Descent", 2017) with a fixed k
// per bucket instead of their threshold, the selection of Lin et al.'s DGC
// without its momentum correction: p = grad + residual (into the
// residual), the k entries of largest |p| sent, the residual keeping p
// with those entries zeroed. The order is total (larger |p| first, then
// the lower flat position; NaN counts as larger than any number, so it is
// sent and seen rather than hidden in the residual), so every run picks
// the same entries. One serial pass keeps the best k seen in a binary
// min-heap laid out in the two outputs (O(n log k) time, no memory
// beyond the outputs: the plan accounts for every byte), then a heap
// sort puts them in increasing position.
//
// sparse_average (values f32 [m], indices i32 [m], grads...; attribute
// `scale`): every gradient zeroed, then values[j] * scale added at flat
// position indices[j], j in order (every rank gathers the same pairs, so
// every rank sums alike). A position outside the bucket is an error.

/// |x| with NaN above every number.
float magnitudeKey(float x) {
  return std::isnan(x) ? std::numeric_limits<float>::infinity() : std::fabs(x);
}

/// Whether entry (a, ia) ranks below (b, ib): smaller magnitude, or the
/// same and a later position. Infinities and NaN tie; the position decides.
bool ranksBelow(float a, int32_t ia, float b, int32_t ib) {
  float ka = magnitudeKey(a), kb = magnitudeKey(b);
  return ka < kb || (ka == kb && ia > ib);
}

/// Restores the heap property below `at` of the heap (values, indices) of
/// `size` entries, where `above(x, y)` says x belongs above y.
template <typename Above>
void siftDown(float *values, int32_t *indices, int64_t size, int64_t at,
              Above &&above) {
  while (true) {
    int64_t top = at, l = 2 * at + 1, r = l + 1;
    if (l < size && above(l, top)) {
      top = l;
    }
    if (r < size && above(r, top)) {
      top = r;
    }
    if (top == at) {
      return;
    }
    std::swap(values[at], values[top]);
    std::swap(indices[at], indices[top]);
    at = top;
  }
}

std::string checkTopK(const KernelCall &call) {
  int64_t members = 0;
  bool residual = false;
  if (auto e = checkCompressor(call, DType::F32, DType::I32, members, residual);
      !e.empty()) {
    return e;
  }
  size_t out = call.operands.size() - 2;
  int64_t k = call.operands[out].numel();
  int64_t n = 0;
  for (int64_t i = 0; i < members; ++i) {
    n += call.operands[static_cast<size_t>(i)].numel();
  }
  if (call.operands[out + 1].numel() != k || k < 1 || k > n) {
    return "expected values and indices of one length k in [1, " +
           std::to_string(n) + "], got " +
           std::to_string(call.operands[out].numel()) + " and " +
           std::to_string(call.operands[out + 1].numel());
  }
  return "";
}

std::string runTopK(const KernelCall &call) {
  size_t members = static_cast<size_t>(call.attributes.getInt("members", 0));
  bool residual = call.operands.size() == 2 * members + 2;
  size_t out = call.operands.size() - 2;
  float *values = call.operands[out].as<float>();
  int32_t *indices = call.operands[out + 1].as<int32_t>();
  int64_t k = call.operands[out].numel();
  FlatBucket grads(call, 0, members);
  std::optional<FlatBucket> residuals;
  if (residual) {
    residuals.emplace(call, members, members);
  }
  // A min-heap: the weakest kept entry at the root.
  auto weaker = [&](int64_t x, int64_t y) {
    return ranksBelow(values[x], indices[x], values[y], indices[y]);
  };
  int64_t kept = 0;
  grads.forEach(residuals ? &*residuals : nullptr,
                [&](int64_t at, float *g, float *e) {
                  float p = *g;
                  if (e) {
                    p = *e += *g;
                  }
                  auto position = static_cast<int32_t>(at);
                  if (kept < k) {
                    // Append, then sift up.
                    int64_t i = kept++;
                    values[i] = p;
                    indices[i] = position;
                    while (i > 0 && weaker(i, (i - 1) / 2)) {
                      std::swap(values[i], values[(i - 1) / 2]);
                      std::swap(indices[i], indices[(i - 1) / 2]);
                      i = (i - 1) / 2;
                    }
                  } else if (ranksBelow(values[0], indices[0], p, position)) {
                    values[0] = p;
                    indices[0] = position;
                    siftDown(values, indices, k, 0, weaker);
                  }
                });
  // Heap sort by position: a max-heap on the index, its root moved last.
  auto later = [&](int64_t x, int64_t y) { return indices[x] > indices[y]; };
  for (int64_t i = k / 2 - 1; i >= 0; --i) {
    siftDown(values, indices, k, i, later);
  }
  for (int64_t end = k - 1; end > 0; --end) {
    std::swap(values[0], values[end]);
    std::swap(indices[0], indices[end]);
    siftDown(values, indices, end, 0, later);
  }
  if (residuals) {
    for (int64_t j = 0; j < k; ++j) {
      size_t part = residuals->partOf(indices[j]);
      residuals->parts[part][indices[j] - residuals->starts[part]] = 0.0f;
    }
  }
  return "";
}

std::string checkSparseAverage(const KernelCall &call) {
  if (auto e = checkAverager(call, DType::F32, DType::I32); !e.empty()) {
    return e;
  }
  if (call.operands[0].numel() != call.operands[1].numel()) {
    return "expected values and indices of one length, got " +
           std::to_string(call.operands[0].numel()) + " and " +
           std::to_string(call.operands[1].numel());
  }
  double scale = 0;
  if (auto e = expectFloatAttr(call, "scale", true, 0.0, scale); !e.empty()) {
    return e;
  }
  return scale > 0 ? "" : "attribute 'scale' must be positive";
}

std::string runSparseAverage(const KernelCall &call) {
  const float *values = call.operands[0].as<float>();
  const int32_t *indices = call.operands[1].as<int32_t>();
  auto scale = static_cast<float>(call.attributes.getFloat("scale", 0.0));
  FlatBucket grads(call, 2, call.operands.size() - 2);
  for (size_t p = 0; p < grads.parts.size(); ++p) {
    std::fill(grads.parts[p], grads.parts[p] + (grads.starts[p + 1] -
                                                grads.starts[p]),
              0.0f);
  }
  for (int64_t j = 0, m = call.operands[0].numel(); j < m; ++j) {
    int64_t at = indices[j];
    if (at < 0 || at >= grads.size()) {
      return "pair " + std::to_string(j) + " names position " +
             std::to_string(at) + " of a bucket of " +
             std::to_string(grads.size());
    }
    size_t part = grads.partOf(at);
    grads.parts[part][at - grads.starts[part]] += values[j] * scale;
  }
  return "";
}

//===----------------------------------------------------------------------===//
// sign_compress, sign_average
//===----------------------------------------------------------------------===//
//
// sign_compress (grads..., [residuals...], signs u8 [ceil(n / 8)], scales
// f32 [m] for m gradients; attribute `members`): EF-SignSGD's compressor
// (Karimireddy et al., "Error Feedback Fixes SignSGD and other Gradient
// Compression Schemes", 2019, Algorithm 1) per gradient tensor: p = grad +
// residual (into the residual), scale_t = ||p_t||_1 / n_t (summed in
// double, rounded once), bit i mod 8 of byte i / 8 of the bucket's flat
// vector set where p[i] < 0 (sign(0) = +1: a bit has no zero), the
// residual p - scale_t * sign(p). sign_average (signs u8 [r * b], scales
// f32 [r * m], grads...): entry i of gradient t = (sum over ranks in order
// of scale_{r,t} * (+-1)) / r, in double, rounded once. Serial: one pass
// each over a bucket, and the sum's order must not depend on threads.

std::string checkSignCompress(const KernelCall &call) {
  int64_t members = 0;
  bool residual = false;
  if (auto e = checkCompressor(call, DType::U8, DType::F32, members, residual);
      !e.empty()) {
    return e;
  }
  size_t out = call.operands.size() - 2;
  int64_t n = 0;
  for (int64_t i = 0; i < members; ++i) {
    n += call.operands[static_cast<size_t>(i)].numel();
  }
  if (call.operands[out].numel() != (n + 7) / 8 ||
      call.operands[out + 1].numel() != members) {
    return "expected " + std::to_string((n + 7) / 8) + " bytes of signs and "
           "one scale per gradient for " + std::to_string(n) +
           " elements, got " +
           std::to_string(call.operands[out].numel()) + " and " +
           std::to_string(call.operands[out + 1].numel());
  }
  return "";
}

std::string runSignCompress(const KernelCall &call) {
  size_t members = static_cast<size_t>(call.attributes.getInt("members", 0));
  bool residual = call.operands.size() == 2 * members + 2;
  size_t out = call.operands.size() - 2;
  uint8_t *signs = call.operands[out].as<uint8_t>();
  float *scale = call.operands[out + 1].as<float>();
  FlatBucket grads(call, 0, members);
  std::optional<FlatBucket> residuals;
  if (residual) {
    residuals.emplace(call, members, members);
  }
  int64_t n = grads.size();
  std::fill(signs, signs + (n + 7) / 8, uint8_t(0));
  for (size_t t = 0; t < members; ++t) {
    int64_t begin = grads.starts[t], count = grads.starts[t + 1] - begin;
    const float *g = grads.parts[t];
    float *r = residuals ? residuals->parts[t] : nullptr;
    double l1 = 0;
    for (int64_t i = 0; i < count; ++i) {
      float p = r ? (r[i] += g[i]) : g[i];
      l1 += std::fabs(double(p));
    }
    auto s = static_cast<float>(count == 0 ? 0.0 : l1 / double(count));
    scale[t] = s;
    for (int64_t i = 0; i < count; ++i) {
      float p = r ? r[i] : g[i];
      bool negative = p < 0;
      if (negative) {
        signs[(begin + i) / 8] |= uint8_t(1u << ((begin + i) % 8));
      }
      if (r) {
        r[i] = p - (negative ? -s : s);
      }
    }
  }
  return "";
}

std::string checkSignAverage(const KernelCall &call) {
  if (auto e = checkAverager(call, DType::U8, DType::F32); !e.empty()) {
    return e;
  }
  int64_t n = 0;
  for (size_t i = 2; i < call.operands.size(); ++i) {
    n += call.operands[i].numel();
  }
  auto members = static_cast<int64_t>(call.operands.size() - 2);
  int64_t ranks = call.operands[1].numel() / members;
  if (ranks < 1 || call.operands[1].numel() % members != 0 ||
      call.operands[0].numel() != ranks * ((n + 7) / 8)) {
    return "expected " + std::to_string((n + 7) / 8) +
           " bytes of signs and " + std::to_string(members) +
           " scales per rank for " + std::to_string(n) + " elements, got " +
           std::to_string(call.operands[0].numel()) + " bytes and " +
           std::to_string(call.operands[1].numel()) + " scales";
  }
  return "";
}

std::string runSignAverage(const KernelCall &call) {
  const uint8_t *signs = call.operands[0].as<uint8_t>();
  const float *scales = call.operands[1].as<float>();
  FlatBucket grads(call, 2, call.operands.size() - 2);
  auto members = static_cast<int64_t>(grads.parts.size());
  int64_t ranks = call.operands[1].numel() / members;
  int64_t bytes = (grads.size() + 7) / 8;
  for (int64_t t = 0; t < members; ++t) {
    float *g = grads.parts[t];
    for (int64_t at = grads.starts[t]; at < grads.starts[t + 1]; ++at) {
      double sum = 0;
      for (int64_t r = 0; r < ranks; ++r) {
        bool negative = (signs[r * bytes + at / 8] >> (at % 8)) & 1u;
        double s = scales[r * members + t];
        sum += negative ? -s : s;
      }
      g[at - grads.starts[t]] = static_cast<float>(sum / double(ranks));
    }
  }
  return "";
}

} // namespace

//===----------------------------------------------------------------------===//
// quantize_wire_int8/int4, dequantize_wire_int8, dequantize_reduce_wire_int8/int4
//===----------------------------------------------------------------------===//
//
// ZeRO++'s quantized weight gather and gradient reduce-scatter
// (runtime/quant/Wire.h). quantize_wire_int8 (values f32 [s x c], wire
// u8 [s x (c + c / 16)]; attribute `chunk` c, default the whole input):
// each chunk of c elements in blocks of 64, its codes then its scales, so
// each chunk decodes alone (qwZ: this rank's one chunk; qgZ: a chunk per
// destination rank). dequantize_wire_int8 (wires u8 [s x (chunk + chunk /
// 16)], values f32 [s x chunk]; attribute `chunk`): every rank's wire chunk
// decoded in rank order. dequantize_reduce_wire_int8 (wires u8 [s x (c + c
// / 16)], sums f32 [c]; `chunk` c, `average` 0 or 1): the s chunks decoded
// and summed in f32 in rank order, then divided by s for an average (as
// the f32 reduce-scatter's average divides its sum). The int4 pair (qgZ
// at 4 bits, WireInt4.h) is the same with wire chunks of c / 2 + c / 16
// bytes: one template per kernel, instantiated per format, so both sizes
// come from quant::wireBytes. Serial: a chunk is a bucket's share, and one
// pass over it is memory-bound.

/// The `chunk` attribute of a wire kernel (c, whole blocks of 64) and the
/// number of chunks `elements` floats make; "" or what is wrong.
static std::string wireChunks(const KernelCall &call, bool required,
                              int64_t elements, int64_t &chunk,
                              int64_t &chunks) {
  if (auto e = expectIntAttr(call, "chunk", quant::kWireBlock,
                             int64_t(1) << 40, required, elements, chunk);
      !e.empty()) {
    return e;
  }
  if (chunk <= 0 || chunk % quant::kWireBlock != 0 || elements % chunk != 0) {
    return "expected chunks of whole blocks of " +
           std::to_string(quant::kWireBlock) + " dividing " +
           std::to_string(elements) + " elements, got chunk " +
           std::to_string(chunk);
  }
  chunks = elements / chunk;
  return "";
}

template <quant::WireFormat Format>
std::string checkQuantizeWire(const KernelCall &call) {
  if (auto e = firstError({expectOperandCount(call, 2),
                           expectDType(call, 0, DType::F32),
                           expectDType(call, 1, DType::U8)});
      !e.empty()) {
    return e;
  }
  int64_t n = call.operands[0].numel(), chunk = 0, chunks = 0;
  if (auto e = wireChunks(call, false, n, chunk, chunks); !e.empty()) {
    return e;
  }
  int64_t wire = quant::wireBytes(Format, chunk);
  if (call.operands[1].numel() != chunks * wire) {
    return "expected " + std::to_string(chunks) + " " +
           quant::wireFormatName(Format) + " wire chunks of " +
           std::to_string(wire) + " bytes for " +
           std::to_string(n) + " elements, got " +
           std::to_string(call.operands[1].numel()) + " bytes";
  }
  return expectOutputsApart(call, 1);
}

template <quant::WireFormat Format>
std::string runQuantizeWire(const KernelCall &call) {
  int64_t n = call.operands[0].numel();
  int64_t chunk = call.attributes.getInt("chunk", n);
  const float *values = call.operands[0].as<float>();
  uint8_t *wire = call.operands[1].as<uint8_t>();
  for (int64_t r = 0; r < n / chunk; ++r) {
    quant::encodeWire(Format, values + r * chunk, chunk,
                      wire + r * quant::wireBytes(Format, chunk));
  }
  return "";
}

std::string checkDequantizeWire(const KernelCall &call) {
  if (auto e = firstError({expectOperandCount(call, 2),
                           expectDType(call, 0, DType::U8),
                           expectDType(call, 1, DType::F32)});
      !e.empty()) {
    return e;
  }
  int64_t values = call.operands[1].numel(), chunk = 0, chunks = 0;
  if (auto e = wireChunks(call, true, values, chunk, chunks); !e.empty()) {
    return e;
  }
  if (call.operands[0].numel() != chunks * quant::int8WireBytes(chunk)) {
    return "expected whole wire chunks of " + std::to_string(chunk) +
           " elements (blocks of " + std::to_string(quant::kWireBlock) +
           "), got " + std::to_string(call.operands[0].numel()) +
           " bytes for " + std::to_string(values) + " elements";
  }
  return expectOutputsApart(call, 1);
}

std::string runDequantizeWire(const KernelCall &call) {
  int64_t chunk = call.attributes.getInt("chunk", 0);
  int64_t shards = call.operands[1].numel() / chunk;
  const uint8_t *wire = call.operands[0].as<uint8_t>();
  float *values = call.operands[1].as<float>();
  for (int64_t r = 0; r < shards; ++r) {
    quant::decodeWireInt8(wire + r * quant::int8WireBytes(chunk), chunk,
                          values + r * chunk);
  }
  return "";
}

template <quant::WireFormat Format>
std::string checkDequantizeReduceWire(const KernelCall &call) {
  int64_t average = 0;
  if (auto e = firstError({expectOperandCount(call, 2),
                           expectDType(call, 0, DType::U8),
                           expectDType(call, 1, DType::F32),
                           expectIntAttr(call, "average", 0, 1, false, 0,
                                         average)});
      !e.empty()) {
    return e;
  }
  int64_t chunk = 0, one = 0;
  int64_t sums = call.operands[1].numel();
  if (auto e = wireChunks(call, true, sums, chunk, one); !e.empty()) {
    return e;
  }
  int64_t bytes = call.operands[0].numel();
  int64_t wire = quant::wireBytes(Format, chunk);
  if (one != 1 || bytes == 0 || bytes % wire != 0) {
    return std::string("expected whole ") + quant::wireFormatName(Format) +
           " wire chunks of " + std::to_string(wire) +
           " bytes reducing to the " + std::to_string(sums) +
           " elements of chunk " + std::to_string(chunk) + ", got " +
           std::to_string(bytes) + " bytes";
  }
  return expectOutputsApart(call, 1);
}

template <quant::WireFormat Format>
std::string runDequantizeReduceWire(const KernelCall &call) {
  int64_t chunk = call.operands[1].numel();
  int64_t wire = quant::wireBytes(Format, chunk);
  int64_t shards = call.operands[0].numel() / wire;
  const uint8_t *wires = call.operands[0].as<uint8_t>();
  float *sums = call.operands[1].as<float>();
  std::fill(sums, sums + chunk, 0.0f);
  for (int64_t r = 0; r < shards; ++r) {
    quant::accumulateWire(Format, wires + r * wire, chunk, sums);
  }
  if (call.attributes.getInt("average", 0) != 0) {
    for (int64_t i = 0; i < chunk; ++i) {
      sums[i] /= static_cast<float>(shards);
    }
  }
  return "";
}

void addCompressionKernels(std::vector<KernelDef> &table) {
  table.push_back(
      {"error_feedback_add", 2, checkErrorPair, runErrorFeedbackAdd});
  table.push_back(
      {"error_feedback_store", 2, checkErrorPair, runErrorFeedbackStore});
  table.push_back({"lowrank_init", 1, checkLowRankInit, runLowRankInit});
  table.push_back({"orthogonalize", 1, checkOrthogonalize, runOrthogonalize});
  table.push_back({"lowrank_matmul", 3, checkLowRankMatmul, runLowRankMatmul});
  table.push_back({"topk_compress", -1, checkTopK, runTopK});
  table.push_back({"sparse_average", -1, checkSparseAverage, runSparseAverage});
  table.push_back({"sign_compress", -1, checkSignCompress, runSignCompress});
  using quant::WireFormat;
  table.push_back({"quantize_wire_int8", 2, checkQuantizeWire<WireFormat::Int8>,
                   runQuantizeWire<WireFormat::Int8>});
  table.push_back({"quantize_wire_int4", 2, checkQuantizeWire<WireFormat::Int4>,
                   runQuantizeWire<WireFormat::Int4>});
  table.push_back(
      {"dequantize_wire_int8", 2, checkDequantizeWire, runDequantizeWire});
  table.push_back({"dequantize_reduce_wire_int8", 2,
                   checkDequantizeReduceWire<WireFormat::Int8>,
                   runDequantizeReduceWire<WireFormat::Int8>});
  table.push_back({"dequantize_reduce_wire_int4", 2,
                   checkDequantizeReduceWire<WireFormat::Int4>,
                   runDequantizeReduceWire<WireFormat::Int4>});
  table.push_back({"sign_average", -1, checkSignAverage, runSignAverage});
}

} // namespace tailor::runtime::cpu
