//===- Int8.h - LLM.int8 row-wise weights with fp16 outlier columns -*- C++ -*-===//
//
// The int8 scheme of QuantizedWeight.h: one absmax scale per output row and
// one int8 code per weight, with bitsandbytes' arithmetic
// (`int8_vectorwise_quant` / `int8_vectorwise_dequant`, 0.50's default
// torch kernels):
//
//   scales[r] = max_c |W[r, c]|                       (fp32)
//   m[r]      = (1 / scales[r]) * 127                 two roundings
//   q[r, c]   = round(W[r, c] * m[r])                 ties to even, fp32
//   W'[r, c]  = (float(q[r, c]) * scales[r]) * c127   two roundings
//
// with c127 = 7.874015718698502e-3 rounded to float (bitsandbytes'
// multiplier for 1/127). m[r] is how torch evaluates bitsandbytes'
// `127.0 / row_stats` (Tensor.__rtruediv__ is `reciprocal() * 127`), not
// the correctly rounded 127 / scales[r]: the two differ in the last bit
// for about a quarter of the rows, enough to move a code whose scaled
// value lies that close to a half. So bytes written here equal bitsandbytes'
// `int8_vectorwise_quant` of the same float32 tensor, and dequantize as
// its `int8_vectorwise_dequant` does, bit for bit. (bnb's Linear8bitLt
// first rounds the weight to fp16; quantizing fp16-rounded floats here
// reproduces that too.) A row of zeros gets scale 0 and codes 0 (bnb
// divides by zero there).
//
// Outlier columns (outlierThreshold t > 0, k = outlierColumns slots): an
// input column c is an outlier when max_r |W[r, c]| > t. The k largest
// outliers by that absmax (ties to the lower column) are kept: their
// indices, ascending, fill the first slots of `columns` (the rest hold
// -1), W[:, c] is stored in fp16 (Half.h's rounding), their int8 codes are
// 0, and they do not count in the row absmax. Further outliers are
// quantized like any column. This is LLM.int8's decomposition applied to
// the weight's input columns, chosen once from the weight; bitsandbytes
// itself decomposes activations, elementwise and with |a| >= t.
//
// Inputs are expected finite.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_QUANT_INT8_H
#define TAILOR_RUNTIME_QUANT_INT8_H

#include "runtime/quant/QuantizedWeight.h"

#include <cstdint>
#include <string>

namespace tailor::quant {

/// "" or what is wrong with the int8 fields of `spec`: a finite threshold
/// >= 0, outlier columns in [0, cols], and either both set or neither.
std::string checkInt8Spec(const QuantSpec &spec);

/// scales f32[rows] | q i8[rows * cols], plus columns i32[k] | values
/// f16[rows * k] with k = outlierColumns > 0.
uint64_t int8StorageBytes(const QuantSpec &spec);

/// Quantizes row-major w[rows, cols] into `storage` (int8StorageBytes).
void quantizeInt8Into(const QuantSpec &spec, const float *w,
                      uint8_t *storage);

/// dequantizeTile for int8 storage.
void dequantizeInt8Tile(const QuantSpec &spec, const uint8_t *storage,
                        int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        float *out, int64_t ld);

} // namespace tailor::quant

#endif // TAILOR_RUNTIME_QUANT_INT8_H
