//===- QuantizedWeight.h - how a plan stores a quantized weight -*- C++ -*-===//
//
// A frozen 2-D weight W[rows, cols] (PyTorch's Linear layout: rows = out
// features, cols = in features) stored in one of tailor's schemes, as one
// contiguous byte range of the parameter arena. The compiler sizes the
// range with storageBytes() from shapes only; the runtime fills it when it
// binds weights (quantizeInto, from the model's float weights, streaming one
// tensor at a time) or copies pre-quantized sections into it (a GPTQ
// checkpoint); kernels read it through dequantizeTile, a tile at a time,
// never materializing the whole dense weight.
//
// Storage layouts (sections back to back, in this order; every fp32 section
// comes first so it stays 4-byte aligned from an aligned start):
//
//   nf4, double quant   offset f32 | nestedAbsmax f32[ceil(nb / nested)]
//                       | absmaxCodes u8[nb] | packed u8[ceil(n / 2)]
//   nf4, plain          absmax f32[nb] | packed u8[ceil(n / 2)]
//       (n = rows * cols, nb = ceil(n / blockSize); blocks run over the
//        flattened row-major weight, exactly as bitsandbytes' (Nf4.h))
//   int8                scales f32[rows] | q i8[rows * cols]
//       (per-row absmax: W[r, c] = q[r, c] * scales[r] / 127), and with
//        outlier decomposition (outlierColumns = k > 0) then
//                       columns i32[k] | values f16[rows * k]
//       (up to k input columns kept in fp16, column-major by kept column,
//        their int8 codes zero; unused column slots hold -1; Int8.h has
//        the exact arithmetic, bitsandbytes' int8_vectorwise_quant)
//   gptq                qweight i32[cols * bits / 32, rows]
//                       | qzeros i32[groups, rows * bits / 32]
//                       | scales f16[groups, rows] | g_idx i32[cols]
//       (the layout of AutoGPTQ / GPTQModel checkpoints; Gptq.h)
//   bf16, fp16          W as 16-bit floats, row-major
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_QUANT_QUANTIZEDWEIGHT_H
#define TAILOR_RUNTIME_QUANT_QUANTIZEDWEIGHT_H

#include <cstdint>
#include <string>
#include <string_view>

namespace tailor::quant {

enum class Scheme : uint8_t { NF4, Int8, GPTQ, BF16, FP16 };

/// "nf4", "int8", "gptq", "bf16", "fp16".
const char *schemeName(Scheme scheme);
/// The scheme called `name`; false for an unknown name.
bool parseScheme(std::string_view name, Scheme &scheme);

/// Everything that fixes a quantized weight's storage and arithmetic.
struct QuantSpec {
  Scheme scheme = Scheme::NF4;
  int64_t rows = 0;
  int64_t cols = 0;
  // nf4
  int blockSize = 64;
  bool doubleQuant = true;
  int nestedBlockSize = 256;
  // gptq
  int bits = 4;
  /// Input columns per group; -1 means one group per row (all columns).
  int groupSize = 128;
  bool actOrder = false;
  // int8
  /// Columns whose absmax exceeds this are kept in fp16 (0: no outliers).
  float outlierThreshold = 0.0f;
  /// Storage reserved for outlier columns (at most this many are kept: the
  /// largest by absmax, when more exceed the threshold).
  int64_t outlierColumns = 0;

  /// Number of GPTQ groups: ceil(cols / groupSize), or 1 for groupSize -1.
  int64_t groups() const;
};

/// Returns "" when `spec` describes a storable weight, else what is wrong
/// ("gptq bits must be 2, 3, 4 or 8, got 5").
std::string checkSpec(const QuantSpec &spec);

/// Bytes of the storage described above; `spec` must pass checkSpec.
uint64_t storageBytes(const QuantSpec &spec);

/// Quantizes W (rows * cols floats, row-major; or its transpose, cols *
/// rows, when `transposed`) into `storage` (storageBytes(spec) bytes).
/// Every scheme except gptq, which needs calibration data (Gptq.h); returns
/// "" or what is wrong.
std::string quantizeInto(const QuantSpec &spec, const float *w, bool transposed,
                         uint8_t *storage);

/// Writes W[r0:r1, c0:c1] as floats to out (row stride `ld` >= c1 - c0),
/// bit-identical to dequantizing the whole weight and slicing. The GEMM
/// kernels call it per tile.
void dequantizeTile(const QuantSpec &spec, const uint8_t *storage, int64_t r0,
                    int64_t r1, int64_t c0, int64_t c1, float *out, int64_t ld);

/// How the `linear_quantized` CPU kernel cuts W into the tiles it
/// dequantizes and multiplies (runtime/cpu/QuantizedLinearKernels.cpp):
/// each task owns a run of output columns (rows of W for y = x W^T, columns
/// of W for y = x W) and walks the contraction in fixed chunks. A function
/// of the spec alone, so the sums each output element gets, and hence the
/// result's bits, never depend on the thread count.
struct LinearTiling {
  /// Rows and columns of W in one dequantized tile (the last tile of each
  /// way may be smaller).
  int64_t tileRows = 0;
  int64_t tileCols = 0;
  /// Tasks the kernel spreads over workers: ceil(N / output tile).
  int64_t tasks = 0;

  int64_t tileFloats() const { return tileRows * tileCols; }
};

/// The tiling of `spec` (which must pass checkSpec) for y = x W^T
/// (`transposeWeight` false) or y = x W.
LinearTiling linearTiling(const QuantSpec &spec, bool transposeWeight);

/// Floats of workspace the `linear_quantized` CPU kernel needs for this
/// weight with `workers` threads: one tile per worker that can get a task,
/// min(workers, tasks) * tileFloats. The compiler sizes the plan's
/// workspace with it, so the two must agree.
int64_t linearWorkspaceFloats(const QuantSpec &spec, bool transposeWeight,
                              int64_t workers);

} // namespace tailor::quant

#endif // TAILOR_RUNTIME_QUANT_QUANTIZEDWEIGHT_H
