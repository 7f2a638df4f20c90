//===- Gptq.h - GPTQ quantization in AutoGPTQ's layout ----------*- C++ -*-===//
//
// GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for
// Generative Pre-trained Transformers") quantizes W[rows, cols] (rows = out
// features, cols = in features) one input column at a time, spreading each
// column's rounding error over the columns not yet quantized through the
// inverse Hessian of the layer-wise loss ||W X^T - Q X^T||^2. Declared
// here: the algorithm (AutoGPTQ's `GPTQ.fasterquant` with its
// `Quantizer.find_params`) and a round-to-nearest baseline
// (GptqQuantize.cpp), and the storage both write (Gptq.cpp), which is
// AutoGPTQ's `QuantLinear.pack` layout ("v1", the `checkpoint_format:
// "gptq"` of AutoGPTQ, GPTQModel and transformers):
//
//   qweight  i32[cols * bits / 32, rows]   codes packed along cols
//   qzeros   i32[groups, rows * bits / 32] zero points minus one, packed
//                                          along rows
//   scales   f16[groups, rows]
//   g_idx    i32[cols]                     group of each input column
//
// Packing: for output r, the codes of columns 0, 1, 2, ... form one
// little-endian bit stream through qweight[0, r], qweight[1, r], ...; code c
// occupies bits [c * bits, (c + 1) * bits). At 2, 4 and 8 bits a code never
// straddles two words; at 3 bits, 32 codes fill 3 words and codes 10 and 21
// straddle (exactly AutoGPTQ's 3-bit pack). qzeros packs (zero - 1) of
// rows r = 0, 1, ... the same way along each group's row.
//
// Value: W[r, c] = scale[g, r] * (q[c, r] - zero[g, r]) with g = g_idx[c],
// where zero is the stored qzero plus one -- the v1 convention, kept for
// compatibility with the checkpoints already published (GPTQModel's "v2"
// format stores the zero itself; it is not this one).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_QUANT_GPTQ_H
#define TAILOR_RUNTIME_QUANT_GPTQ_H

#include "runtime/quant/QuantizedWeight.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tailor::quant {

/// One section of gptq storage: where it starts in the storage, how long it
/// is, and the safetensors dtype ("I32" or "F16") and shape a checkpoint
/// gives it.
struct GptqSection {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  const char *dtype = "I32";
  std::vector<int64_t> shape;
};

/// The four sections of gptq storage, back to back in this order.
struct GptqLayout {
  GptqSection qweight;
  GptqSection qzeros;
  GptqSection scales;
  GptqSection gIdx;
};

/// "" or what is wrong with a gptq spec: bits 2, 3, 4 or 8; group size -1
/// or at least 1; rows and cols at least 1; and the divisibility packing
/// needs. At 2, 4 and 8 bits both cols and rows must be multiples of
/// 32 / bits (whole int32 words of codes and of zeros); at 3 bits both must
/// be multiples of 32 (32 codes fill 3 words). cols need not be a multiple
/// of the group size (the last group is then partial, as in AutoGPTQ).
std::string checkGptqSpec(const QuantSpec &spec);

/// The sections of the storage for `spec` (which must pass checkGptqSpec).
/// Every section starts 4-byte aligned: rows is even, so the f16 scales
/// end on a multiple of 4.
GptqLayout gptqLayout(const QuantSpec &spec);

/// Bytes of gptq storage for `spec`: qweight i32[cols*bits/32, rows] |
/// qzeros i32[groups, rows*bits/32] | scales f16[groups, rows] | g_idx
/// i32[cols]. At 3 bits that is AutoGPTQ's cols/32*3 qweight rows and
/// rows/32*3 qzeros words per group.
uint64_t gptqStorageBytes(const QuantSpec &spec);

/// "" or what makes filled storage unusable: a g_idx entry outside
/// [0, groups). Storage read from a checkpoint must pass it before
/// dequantizeGptqTile reads it (which indexes scales by g_idx unchecked).
std::string checkGptqStorage(const QuantSpec &spec, const uint8_t *storage);

/// Writes W[r0:r1, c0:c1] as floats to out (row stride ld >= c1 - c0):
/// float(scale[g_idx[c], r]) * (q[c, r] - zero[g_idx[c], r]), with zero the
/// stored qzero + 1 (AutoGPTQ's v1 convention). The product of an fp16
/// scale and a difference of at most 9 bits is exact in float, so a tile is
/// bit-identical to the same slice of a whole dequantization; rounding it to
/// fp16 gives what AutoGPTQ's torch path computes.
void dequantizeGptqTile(const QuantSpec &spec, const uint8_t *storage,
                        int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        float *out, int64_t ld);

/// The code q[c, r] (0 .. 2^bits - 1) of W[r, c].
uint32_t gptqCode(const QuantSpec &spec, const uint8_t *storage, int64_t r,
                  int64_t c);

/// The zero point of output r in group g: the stored qzero plus one.
int32_t gptqZero(const QuantSpec &spec, const uint8_t *storage, int64_t g,
                 int64_t r);

/// Packs given codes into `storage` (gptqStorageBytes(spec) bytes):
/// codes[r * cols + c] in [0, 2^bits), scales[g * rows + r] (rounded to
/// fp16 here), zeros[g * rows + r] in [1, 2^bits] (the zero point itself;
/// zero - 1 is what is stored), gIdx[c] in [0, groups). Returns "" or the
/// first value out of range. AutoGPTQ's pack, given the integer weights.
std::string packGptq(const QuantSpec &spec, const uint8_t *codes,
                     const float *scales, const int32_t *zeros,
                     const int32_t *gIdx, uint8_t *storage);

/// How gptqQuantize runs; bits, groupSize and actOrder must match the spec.
/// AutoGPTQ's `static_groups` is always false here.
struct GptqOptions {
  int bits = 4;
  /// Input columns per group; -1 for one group per row.
  int groupSize = 128;
  /// Quantize columns in order of decreasing Hessian diagonal ("desc_act").
  bool actOrder = false;
  /// Damping added to the Hessian's diagonal, as a fraction of its mean.
  double dampPercent = 0.01;
  /// zero = 2^(bits - 1) and a range symmetric about 0, else a min/max
  /// range with zero = max(1, round(-min / scale)) (GptqQuantize.cpp says
  /// why not 0).
  bool symmetric = true;
  /// Not used here; recorded in a checkpoint's quantize_config.json:
  /// whether the caller quantized a block's Linear layers one after another,
  /// calibrating each on the outputs of those already quantized.
  bool trueSequential = true;
};

/// The GPTQ Hessian H = 2/n X^T X of a Linear layer's inputs X[n, cols],
/// accumulated over calibration batches as AutoGPTQ does: a running mean
/// (H *= n_old / n_new, then H += 2 / n_new * X^T X). Kept in double: the
/// sum of many rank-k updates loses what the later Cholesky needs in
/// float. n counts rows of X (AutoGPTQ counts sequences; GPTQ's result does
/// not depend on the scale of H, as damping is relative).
class GptqHessian {
public:
  explicit GptqHessian(int64_t cols);

  /// Adds calibration inputs x[rows, cols] (row-major). Plain C++ at about
  /// rows * cols^2 / 2 multiply-adds: fine for tests and small layers.
  void add(const float *x, int64_t rows);
  /// Adds the Gram matrix X^T X (cols x cols, symmetric) of `rows`
  /// calibration inputs computed elsewhere (by BLAS, on a GPU), with the
  /// same running mean as add.
  void addGram(const double *xtx, int64_t rows);

  int64_t cols() const { return n; }
  /// Rows added so far.
  int64_t samples() const { return count; }
  /// H[cols, cols], row-major and symmetric.
  const std::vector<double> &matrix() const { return h; }

private:
  /// Rescales H for `rows` more samples; returns the weight 2 / n_new of
  /// their X^T X.
  double startBatch(int64_t rows);

  int64_t n;
  int64_t count = 0;
  std::vector<double> h;
};

/// Runs GPTQ on w[rows, cols] (row-major floats, the spec's shape) with
/// Hessian[cols, cols] and writes gptq storage (gptqStorageBytes(spec)
/// bytes). The lazy-batch, Cholesky form of the reference, block size 128;
/// dead inputs (H[i, i] == 0) get H[i, i] = 1 and W[:, i] = 0. Returns "" or
/// what went wrong (a spec or options mismatch, a Hessian not positive
/// definite even after damping).
std::string gptqQuantize(const QuantSpec &spec, const float *w,
                         const double *hessian, const GptqOptions &options,
                         uint8_t *storage);

/// Round-to-nearest at the spec's bits and group size, with GPTQ's
/// quantizer (the same min/max scale and zero-point rule) and the same
/// storage; g_idx is c / groupSize. The baseline GPTQ is measured against.
std::string rtnQuantize(const QuantSpec &spec, const float *w, uint8_t *storage,
                        bool symmetric = true);

} // namespace tailor::quant

#endif // TAILOR_RUNTIME_QUANT_GPTQ_H
