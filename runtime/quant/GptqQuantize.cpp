//===- GptqQuantize.cpp - GPTQ and round-to-nearest quantization ---------===//
//
// The algorithm follows AutoGPTQ's `GPTQ.fasterquant` (itself the GPTQ
// authors' reference) step by step, because a tailor checkpoint should be
// the one AutoGPTQ would write from the same weights and Hessian:
//   - Quantizer (`find_params`, per output row over a group's columns):
//     range [min(x, 0), max(x, 0)]; symmetric makes it [-m, m] with
//     m = max(|min|, max) only when min < 0 (an all-positive group keeps
//     [0, max], as in the reference); an all-zero range becomes [-1, 1];
//     scale = (max - min) / maxq in float; zero = (maxq + 1) / 2 when
//     symmetric, else round(-min / scale). Codes are clamp(round(w / scale)
//     + zero, 0, maxq), round-half-even like torch.round.
//   - Scales: the loop quantizes with the float32 scale and stores it
//     rounded to fp16, as the reference does. The codes are the same either
//     way: AutoGPTQ's pack recovers them as round((Q + zero * scale) /
//     fp16(scale)), which is the code exactly: |q| <= 255, and fp16's
//     relative rounding error of 2^-11 (twice, if Q is held in fp16) moves
//     it by at most 0.25. So the stored weight differs from what the error
//     feedback assumed only by that scale rounding, far below a step.
//   - One deviation: an asymmetric zero of 0 is raised to 1. The v1 format
//     stores zero - 1, and AutoGPTQ's pack of -1 sets every higher bit of
//     the int32 (the bug GPTQModel's v2 format exists for); tailor must
//     never write a checkpoint that dequantizes differently than it
//     quantized.
//   - Groups (not static): a group's scale and zero come from W's columns
//     as they stand at the start of the current 128-column block (the
//     reference reads the full W, which only receives the lazy updates at
//     block ends); with group size -1 they come from the original W once,
//     before dead columns are zeroed.
//   - Act-order: columns in order of decreasing H[i, i] (ties keep their
//     order), g_idx[perm[i]] = i / groupSize, codes stored in original
//     column order.
//   - Inverse Hessian: the reference takes chol(H), inverts it
//     (cholesky_inverse) and takes the upper Cholesky factor U of H^-1. U is
//     the inverse of H's upper-times-lower factor R (H = R R^T), unique as
//     both have a positive diagonal, so it is computed as R^-1: half the
//     work, in double, and H^-1 is never formed. The sweep then runs in
//     float32 like the reference.
// Bit-equality with AutoGPTQ is not promised (the factorization differs in
// precision), but given AutoGPTQ 0.7.1's own Hessian the cases of
// test/e2e/gptq_reference.py come out with identical scales and codes, but
// for 0.2% of the codes under act-order.
//
// Serial and plain: the factorization and the sweep are O(cols^3) and
// O(rows * cols^2), about 1 s for a 1024 x 1024 layer and 8 s for 2048 x
// 2048 on one core, once per layer; a caller with BLAS or a GPU should form
// X^T X itself for large calibration sets (GptqHessian::addGram).
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Gptq.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace tailor::quant {

namespace {

constexpr int64_t kBlockSize = 128;

/// Columns per group, the whole row for group size -1.
int64_t groupColumns(const QuantSpec &spec) {
  return spec.groupSize == -1 ? spec.cols : spec.groupSize;
}

/// GPTQ's quantizer for one output row over a range of columns.
struct RowQuantizer {
  float scale = 1.0f;
  float zero = 0.0f;
  float maxq = 15.0f;

  void fit(const float *x, int64_t n, bool symmetric) {
    float lo = 0.0f;
    float hi = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    if (symmetric) {
      hi = std::max(-lo, hi);
      if (lo < 0.0f) {
        lo = -hi;
      }
    }
    if (lo == 0.0f && hi == 0.0f) {
      lo = -1.0f;
      hi = 1.0f;
    }
    scale = (hi - lo) / maxq;
    zero = symmetric ? (maxq + 1.0f) / 2.0f
                     : std::max(1.0f, std::nearbyint(-lo / scale));
  }
  float code(float w) const {
    return std::clamp(std::nearbyint(w / scale) + zero, 0.0f, maxq);
  }
  float value(float code) const { return scale * (code - zero); }
};

/// The quantized weight in pieces, before packing.
struct Unpacked {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<int32_t> zeros;
  std::vector<int32_t> gIdx;

  explicit Unpacked(const QuantSpec &spec)
      : codes(spec.rows * spec.cols), scales(gptqLayout(spec).scales.bytes / 2),
        zeros(gptqLayout(spec).scales.bytes / 2), gIdx(spec.cols) {}
  void setGroup(const QuantSpec &spec, int64_t g, int64_t r,
                const RowQuantizer &q) {
    scales[g * spec.rows + r] = q.scale;
    zeros[g * spec.rows + r] = static_cast<int32_t>(q.zero);
  }
};

/// U, the upper-triangular factor with U^T U = H^-1, of a positive definite
/// H (n x n row-major, overwritten): -1, or the index of the pivot that
/// was not positive.
int64_t inverseHessianFactor(std::vector<double> &h, int64_t n,
                             std::vector<float> &u) {
  // R upper with H = R R^T, from the last column back, in place.
  for (int64_t j = n - 1; j >= 0; --j) {
    double *rowJ = &h[j * n];
    for (int64_t i = j; i >= 0; --i) {
      double *rowI = &h[i * n];
      double s = rowI[j];
      for (int64_t k = j + 1; k < n; ++k) {
        s -= rowI[k] * rowJ[k];
      }
      if (i == j) {
        if (!(s > 0.0)) {
          return j;
        }
        rowJ[j] = std::sqrt(s);
      } else {
        rowI[j] = s / rowJ[j];
      }
    }
  }
  // U = R^-1 by back substitution, one row at a time from the bottom.
  std::vector<double> inv(n * n, 0.0);
  for (int64_t i = n - 1; i >= 0; --i) {
    double *out = &inv[i * n];
    const double *rowR = &h[i * n];
    for (int64_t k = i + 1; k < n; ++k) {
      const double *rowU = &inv[k * n];
      for (int64_t j = k; j < n; ++j) {
        out[j] -= rowR[k] * rowU[j];
      }
    }
    double d = rowR[i];
    out[i] = 1.0;
    for (int64_t j = i; j < n; ++j) {
      out[j] /= d;
    }
  }
  u.assign(inv.begin(), inv.end());
  return -1;
}

std::string checkOptions(const QuantSpec &spec, const GptqOptions &options) {
  if (options.bits != spec.bits || options.groupSize != spec.groupSize ||
      options.actOrder != spec.actOrder) {
    return "gptq options (bits " + std::to_string(options.bits) +
           ", group size " + std::to_string(options.groupSize) +
           ", act order " + (options.actOrder ? "on" : "off") +
           ") disagree with the weight's spec (bits " +
           std::to_string(spec.bits) + ", group size " +
           std::to_string(spec.groupSize) + ", act order " +
           (spec.actOrder ? "on" : "off") + ")";
  }
  if (!(options.dampPercent >= 0.0 && options.dampPercent < 1.0)) {
    return "gptq damp percent must be in [0, 1), got " +
           std::to_string(options.dampPercent);
  }
  return "";
}

std::string checkFinite(const QuantSpec &spec, const float *w) {
  for (int64_t i = 0; i < spec.rows * spec.cols; ++i) {
    if (!std::isfinite(w[i])) {
      return "gptq weight element [" + std::to_string(i / spec.cols) + ", " +
             std::to_string(i % spec.cols) + "] is not finite";
    }
  }
  return "";
}

} // namespace

//===----------------------------------------------------------------------===//
// Hessian
//===----------------------------------------------------------------------===//

GptqHessian::GptqHessian(int64_t cols) : n(cols), h(cols * cols, 0.0) {}

double GptqHessian::startBatch(int64_t rows) {
  double keep = static_cast<double>(count) / static_cast<double>(count + rows);
  count += rows;
  for (double &v : h) {
    v *= keep;
  }
  return 2.0 / static_cast<double>(count);
}

void GptqHessian::add(const float *x, int64_t rows) {
  if (rows <= 0) {
    return;
  }
  double factor = startBatch(rows);
  // X^T X a chunk of rows at a time, the chunk transposed so each entry is a
  // contiguous dot product and H is swept once per chunk, not once per row.
  constexpr int64_t kChunk = 64;
  std::vector<double> xt(n * kChunk);
  for (int64_t first = 0; first < rows; first += kChunk) {
    int64_t m = std::min(kChunk, rows - first);
    for (int64_t k = 0; k < m; ++k) {
      for (int64_t c = 0; c < n; ++c) {
        xt[c * kChunk + k] = x[(first + k) * n + c];
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const double *xi = &xt[i * kChunk];
      for (int64_t j = i; j < n; ++j) {
        const double *xj = &xt[j * kChunk];
        double dot = 0.0;
        for (int64_t k = 0; k < m; ++k) {
          dot += xi[k] * xj[k];
        }
        h[i * n + j] += factor * dot;
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i + 1; j < n; ++j) {
      h[j * n + i] = h[i * n + j];
    }
  }
}

void GptqHessian::addGram(const double *xtx, int64_t rows) {
  if (rows <= 0) {
    return;
  }
  double factor = startBatch(rows);
  for (int64_t i = 0; i < n * n; ++i) {
    h[i] += factor * xtx[i];
  }
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

std::string gptqQuantize(const QuantSpec &spec, const float *w,
                         const double *hessian, const GptqOptions &options,
                         uint8_t *storage) {
  if (std::string error = checkGptqSpec(spec); !error.empty()) {
    return error;
  }
  if (std::string error = checkOptions(spec, options); !error.empty()) {
    return error;
  }
  if (std::string error = checkFinite(spec, w); !error.empty()) {
    return error;
  }
  const int64_t rows = spec.rows;
  const int64_t cols = spec.cols;
  const int64_t groupCols = groupColumns(spec);
  Unpacked result(spec);
  RowQuantizer quantizer;
  quantizer.maxq = static_cast<float>((1 << spec.bits) - 1);
  if (spec.groupSize == -1) {
    for (int64_t r = 0; r < rows; ++r) {
      quantizer.fit(w + r * cols, cols, options.symmetric);
      result.setGroup(spec, 0, r, quantizer);
    }
  }

  std::vector<bool> dead(cols);
  for (int64_t i = 0; i < cols; ++i) {
    dead[i] = hessian[i * cols + i] == 0.0;
  }
  auto diagonal = [&](int64_t i) {
    return dead[i] ? 1.0 : hessian[i * cols + i];
  };
  std::vector<int64_t> perm(cols);
  std::iota(perm.begin(), perm.end(), 0);
  if (options.actOrder) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return diagonal(a) > diagonal(b);
    });
  }
  // W and H with columns in quantization order, dead ones fixed up.
  std::vector<float> weight(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < cols; ++p) {
      weight[r * cols + p] = dead[perm[p]] ? 0.0f : w[r * cols + perm[p]];
    }
  }
  std::vector<double> permuted(cols * cols);
  double diagonalSum = 0.0;
  for (int64_t p = 0; p < cols; ++p) {
    for (int64_t q = 0; q < cols; ++q) {
      permuted[p * cols + q] = hessian[perm[p] * cols + perm[q]];
    }
    permuted[p * cols + p] = diagonal(perm[p]);
    diagonalSum += permuted[p * cols + p];
  }
  double damp = options.dampPercent * diagonalSum / static_cast<double>(cols);
  for (int64_t p = 0; p < cols; ++p) {
    permuted[p * cols + p] += damp;
  }
  std::vector<float> u;
  if (int64_t pivot = inverseHessianFactor(permuted, cols, u); pivot >= 0) {
    return "gptq hessian is not positive definite after damping by " +
           std::to_string(options.dampPercent) + " of its mean diagonal " +
           "(pivot " + std::to_string(pivot) +
           "); raise the damping or add calibration data";
  }

  // The sweep: each 128-column block is quantized column by column with
  // the error spread over the block's later columns at once; the rest of W
  // gets the block's errors in one product at the block's end.
  std::vector<float> block(rows * kBlockSize);
  std::vector<float> errors(rows * kBlockSize);
  std::vector<float> update(cols);
  for (int64_t i1 = 0; i1 < cols; i1 += kBlockSize) {
    int64_t i2 = std::min(i1 + kBlockSize, cols);
    int64_t count = i2 - i1;
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(&weight[r * cols + i1], count, &block[r * count]);
    }
    for (int64_t i = 0; i < count; ++i) {
      int64_t p = i1 + i;
      bool newGroup = spec.groupSize != -1 && p % groupCols == 0;
      const float *hinvRow = &u[p * cols + i1];
      float d = hinvRow[i];
      for (int64_t r = 0; r < rows; ++r) {
        if (newGroup) {
          quantizer.fit(&weight[r * cols + p], std::min(groupCols, cols - p),
                        options.symmetric);
          result.setGroup(spec, p / groupCols, r, quantizer);
        } else if (spec.groupSize != -1) {
          int64_t g = p / groupCols;
          quantizer.scale = result.scales[g * rows + r];
          quantizer.zero = static_cast<float>(result.zeros[g * rows + r]);
        } else {
          quantizer.scale = result.scales[r];
          quantizer.zero = static_cast<float>(result.zeros[r]);
        }
        float *row = &block[r * count];
        float code = quantizer.code(row[i]);
        result.codes[r * cols + perm[p]] = static_cast<uint8_t>(code);
        float error = (row[i] - quantizer.value(code)) / d;
        errors[r * count + i] = error;
        for (int64_t j = i; j < count; ++j) {
          row[j] -= error * hinvRow[j];
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(update.begin() + i2, update.end(), 0.0f);
      for (int64_t k = 0; k < count; ++k) {
        float error = errors[r * count + k];
        const float *hinvRow = &u[(i1 + k) * cols];
        for (int64_t j = i2; j < cols; ++j) {
          update[j] += error * hinvRow[j];
        }
      }
      float *row = &weight[r * cols];
      for (int64_t j = i2; j < cols; ++j) {
        row[j] -= update[j];
      }
    }
  }
  for (int64_t p = 0; p < cols; ++p) {
    result.gIdx[perm[p]] = static_cast<int32_t>(p / groupCols);
  }
  return packGptq(spec, result.codes.data(), result.scales.data(),
                  result.zeros.data(), result.gIdx.data(), storage);
}

std::string rtnQuantize(const QuantSpec &spec, const float *w, uint8_t *storage,
                        bool symmetric) {
  if (std::string error = checkGptqSpec(spec); !error.empty()) {
    return error;
  }
  if (std::string error = checkFinite(spec, w); !error.empty()) {
    return error;
  }
  const int64_t cols = spec.cols;
  const int64_t groupCols = groupColumns(spec);
  Unpacked result(spec);
  RowQuantizer quantizer;
  quantizer.maxq = static_cast<float>((1 << spec.bits) - 1);
  for (int64_t r = 0; r < spec.rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += groupCols) {
      int64_t c1 = std::min(c0 + groupCols, cols);
      quantizer.fit(w + r * cols + c0, c1 - c0, symmetric);
      result.setGroup(spec, c0 / groupCols, r, quantizer);
      for (int64_t c = c0; c < c1; ++c) {
        result.codes[r * cols + c] =
            static_cast<uint8_t>(quantizer.code(w[r * cols + c]));
      }
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    result.gIdx[c] = static_cast<int32_t>(c / groupCols);
  }
  return packGptq(spec, result.codes.data(), result.scales.data(),
                  result.zeros.data(), result.gIdx.data(), storage);
}

} // namespace tailor::quant
