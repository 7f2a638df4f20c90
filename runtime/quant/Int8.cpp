//===- Int8.cpp - row-wise int8 weights, bitsandbytes' arithmetic --------===//
//
// Layout and arithmetic are in Int8.h. Every step is one float32 operation
// in the order bitsandbytes' torch code spells it; this file is compiled
// with -ffp-contract=off (tailor_quant) so (q * scale) * c127 is never
// fused into one rounding. Section offsets are not 4-byte aligned after the
// codes (rows * cols bytes), so the i32 and f16 sections are read and
// written with memcpy.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Int8.h"

#include "runtime/quant/Half.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace tailor::quant {

namespace {

/// bitsandbytes' 1/127 (int8_vectorwise_dequant's Python float), as the
/// float torch multiplies a float32 tensor by.
const float kInverse127 = static_cast<float>(7.874015718698502e-3);

struct Int8Sections {
  uint64_t scales = 0, codes = 0, columns = 0, values = 0;
};

Int8Sections sectionsOf(const QuantSpec &spec) {
  Int8Sections s;
  s.codes = 4 * static_cast<uint64_t>(spec.rows);
  s.columns = s.codes + static_cast<uint64_t>(spec.rows * spec.cols);
  s.values = s.columns + 4 * static_cast<uint64_t>(spec.outlierColumns);
  return s;
}

std::string formatFloat(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

} // namespace

std::string checkInt8Spec(const QuantSpec &spec) {
  const float t = spec.outlierThreshold;
  if (!std::isfinite(t) || t < 0) {
    return "int8 outlier threshold must be finite and >= 0, got " +
           formatFloat(t);
  }
  if (spec.outlierColumns < 0 || spec.outlierColumns > spec.cols) {
    return "int8 outlier columns must be in [0, " + std::to_string(spec.cols) +
           "] (the weight's cols), got " + std::to_string(spec.outlierColumns);
  }
  if (t > 0 && spec.outlierColumns == 0) {
    return "int8 outlier threshold " + formatFloat(t) +
           " needs outlier columns >= 1 to keep outliers in";
  }
  if (t == 0 && spec.outlierColumns > 0) {
    return "int8 outlier columns (" + std::to_string(spec.outlierColumns) +
           ") need an outlier threshold > 0";
  }
  return "";
}

uint64_t int8StorageBytes(const QuantSpec &spec) {
  return sectionsOf(spec).values +
         2 * static_cast<uint64_t>(spec.rows * spec.outlierColumns);
}

void quantizeInt8Into(const QuantSpec &spec, const float *w,
                      uint8_t *storage) {
  const int64_t rows = spec.rows, cols = spec.cols, k = spec.outlierColumns;
  const Int8Sections at = sectionsOf(spec);

  // --- Outlier columns: the k largest column absmaxes above t -----------
  std::vector<int32_t> kept;
  std::vector<uint8_t> isKept(cols, 0);
  if (k > 0) {
    std::vector<float> colMax(cols, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        colMax[c] = std::max(colMax[c], std::fabs(w[r * cols + c]));
      }
    }
    std::vector<int32_t> outliers;
    for (int64_t c = 0; c < cols; ++c) {
      if (colMax[c] > spec.outlierThreshold) {
        outliers.push_back(static_cast<int32_t>(c));
      }
    }
    std::stable_sort(outliers.begin(), outliers.end(),
                     [&](int32_t a, int32_t b) { return colMax[a] > colMax[b]; });
    if (static_cast<int64_t>(outliers.size()) > k) {
      outliers.resize(k);
    }
    std::sort(outliers.begin(), outliers.end());
    kept = outliers;
    for (int32_t c : kept) {
      isKept[c] = 1;
    }
    for (int64_t j = 0; j < k; ++j) {
      const int32_t column = j < static_cast<int64_t>(kept.size()) ? kept[j] : -1;
      std::memcpy(storage + at.columns + 4 * j, &column, 4);
      for (int64_t r = 0; r < rows; ++r) {
        const uint16_t half = column < 0 ? 0 : floatToFp16(w[r * cols + column]);
        std::memcpy(storage + at.values + 2 * (j * rows + r), &half, 2);
      }
    }
  }

  // --- Rows: absmax over the int8 columns, then codes -------------------
  int8_t *codes = reinterpret_cast<int8_t *>(storage + at.codes);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = w + r * cols;
    float absmax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      if (!isKept[c]) {
        absmax = std::max(absmax, std::fabs(row[c]));
      }
    }
    std::memcpy(storage + at.scales + 4 * r, &absmax, 4);
    int8_t *q = codes + r * cols;
    if (absmax == 0.0f) {
      std::memset(q, 0, cols);
      continue;
    }
    // bitsandbytes writes `127.0 / row_stats`, which torch evaluates as
    // row_stats.reciprocal() * 127 (Tensor.__rtruediv__): two roundings.
    // One division, 127.0f / absmax, differs from it in the last bit for
    // about a quarter of the rows, and then moves codes whose scaled value
    // lies within that bit of a half (12 of the 73728 codes of the tiny
    // test Llama; e2e.int8_bitsandbytes).
    const float reciprocal = 1.0f / absmax;
    const float multiplier = reciprocal * 127.0f;
    for (int64_t c = 0; c < cols; ++c) {
      const float scaled = std::nearbyint(row[c] * multiplier);
      q[c] = isKept[c] ? 0
                       : static_cast<int8_t>(
                             std::min(127.0f, std::max(-127.0f, scaled)));
    }
  }
}

void dequantizeInt8Tile(const QuantSpec &spec, const uint8_t *storage,
                        int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        float *out, int64_t ld) {
  const Int8Sections at = sectionsOf(spec);
  const int8_t *codes = reinterpret_cast<const int8_t *>(storage + at.codes);
  for (int64_t r = r0; r < r1; ++r) {
    float scale;
    std::memcpy(&scale, storage + at.scales + 4 * r, 4);
    const int8_t *q = codes + r * spec.cols;
    float *dst = out + (r - r0) * ld - c0;
    for (int64_t c = c0; c < c1; ++c) {
      const float product = static_cast<float>(q[c]) * scale;
      dst[c] = product * kInverse127;
    }
  }
  // Kept columns: their codes are 0, so overwrite them with the fp16 copy.
  for (int64_t j = 0; j < spec.outlierColumns; ++j) {
    int32_t column;
    std::memcpy(&column, storage + at.columns + 4 * j, 4);
    if (column < 0) {
      break; // unused slots are at the end
    }
    if (column < c0 || column >= c1) {
      continue;
    }
    const uint8_t *values = storage + at.values + 2 * (j * spec.rows);
    for (int64_t r = r0; r < r1; ++r) {
      uint16_t half;
      std::memcpy(&half, values + 2 * r, 2);
      out[(r - r0) * ld + (column - c0)] = fp16ToFloat(half);
    }
  }
}

} // namespace tailor::quant
