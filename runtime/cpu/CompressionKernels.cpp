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
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

#include <cblas.h>

#include <cmath>

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

} // namespace

void addCompressionKernels(std::vector<KernelDef> &table) {
  table.push_back(
      {"error_feedback_add", 2, checkErrorPair, runErrorFeedbackAdd});
  table.push_back(
      {"error_feedback_store", 2, checkErrorPair, runErrorFeedbackStore});
  table.push_back({"lowrank_init", 1, checkLowRankInit, runLowRankInit});
  table.push_back({"orthogonalize", 1, checkOrthogonalize, runOrthogonalize});
  table.push_back({"lowrank_matmul", 3, checkLowRankMatmul, runLowRankMatmul});
}

} // namespace tailor::runtime::cpu
