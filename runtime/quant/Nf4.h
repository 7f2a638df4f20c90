//===- Nf4.h - QLoRA NF4 quantization, bitsandbytes-compatible --*- C++ -*-===//
//
// 4-bit NormalFloat (NF4) blockwise quantization of a weight, with optional
// double quantization of the block scales, bit for bit as bitsandbytes 0.50's
// CPU path computes it (`quantize_4bit(w, blocksize=64,
// compress_statistics=True, quant_type='nf4')` on a float32 tensor), and the
// matching dequantization (`dequantize_4bit`). FORMATS.md "QLoRA NF4" has the
// format; Nf4.cpp the arithmetic and why it is shaped so.
//
// Layout of a quantized tensor of `numel` elements, flattened row-major:
//   packed        ceil(numel / 2) bytes; element 2j in the high nibble of
//                 byte j, 2j+1 in the low nibble (an odd tail nibble holds
//                 code 7, i.e. 0.0)
//   absmax        one scale per block of `blockSize` elements (the last block
//                 may be partial): fp32, or with double quantization one
//                 8-bit code of the signed dynamic map per block
//   nestedAbsmax  (double quantization) one fp32 scale per `nestedBlockSize`
//                 block scales
//   offset        (double quantization) fp32 mean of the block scales, which
//                 are quantized as (absmax - offset)
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_QUANT_NF4_H
#define TAILOR_RUNTIME_QUANT_NF4_H

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tailor::quant {

/// The 16 NF4 code values (QLoRA's normal-distribution quantiles scaled to
/// [-1, 1]; index 7 is exactly 0), as bitsandbytes stores them.
extern const std::array<float, 16> kNf4Codebook;

/// bitsandbytes' signed 8-bit dynamic map (`create_dynamic_map(signed=True)`,
/// the `nested_quant_map` of a double-quantized weight): 256 ascending
/// values in [-0.99296875, 1], built once by the same float32 steps.
const std::array<float, 256> &dynamicMap8Bit();

/// How the double-quantization offset, mean(absmax), is summed. bitsandbytes
/// takes PyTorch's float32 `mean` on the CPU, whose rounding depends on the
/// order PyTorch sums in: `sumLanes` is the width of its vectorized sum
/// kernel (8 in x86-64 wheels, AVX512 machines included) and `sumThreads`
/// its thread count (torch.get_num_threads(); it matters only from 32768
/// blocks, i.e. 2M weights at block size 64). The defaults give the
/// single-threaded order, which tailor uses everywhere so a quantization
/// never depends on the machine.
struct Nf4MeanOrder {
  int sumLanes = 8;
  int sumThreads = 1;
};

/// A quantized tensor; see the layout at the top of this file.
struct Nf4Quantized {
  std::vector<uint8_t> packed;
  /// The fp32 block scales (without double quantization; empty otherwise).
  std::vector<float> absmax;
  /// With double quantization: the 8-bit codes of (absmax - offset), their
  /// fp32 scales per nested block, and the offset.
  std::vector<uint8_t> absmaxCodes;
  std::vector<float> nestedAbsmax;
  float offset = 0.0f;
  bool doubleQuant = false;
  int64_t numel = 0;
  int blockSize = 64;
  int nestedBlockSize = 256;

  /// The number of blocks (and block scales): ceil(numel / blockSize).
  int64_t numBlocks() const;
};

/// Returns "" when quantizeNf4 accepts these parameters, else a message
/// saying what was expected: numel >= 1, blockSize one of bitsandbytes'
/// 32, 64, ..., 4096, nestedBlockSize >= 1.
std::string checkNf4Params(int64_t numel, int blockSize, int nestedBlockSize);

/// Returns "" when `q` is self-consistent (every array has the length its
/// numel and block sizes imply), else a message naming the first that is not.
std::string checkNf4Quantized(const Nf4Quantized &q);

/// Quantizes `numel` floats at `w` (the parameters must pass
/// checkNf4Params). Deterministic: the same input gives the same bytes on
/// every machine. Inputs are expected finite; a NaN makes its block's scale
/// NaN and its codes 15, as in bitsandbytes.
Nf4Quantized quantizeNf4(const float *w, int64_t numel, int blockSize = 64,
                         bool doubleQuant = true, int nestedBlockSize = 256,
                         Nf4MeanOrder meanOrder = {});

/// The fp32 block scales of `q`: its absmax, or with double quantization
/// dynamicMap8Bit()[code] * nestedAbsmax[block / nestedBlockSize] + offset,
/// each step rounded to float as bitsandbytes does.
std::vector<float> nf4BlockScales(const Nf4Quantized &q);

/// Writes the q.numel dequantized values to `out`: kNf4Codebook[code] times
/// the block's scale (nf4BlockScales), equal bit for bit to bitsandbytes'
/// dequantize_4bit to float32. `q` must pass checkNf4Quantized.
void dequantizeNf4(const Nf4Quantized &q, float *out);

/// Bytes a quantized tensor of `numel` elements occupies: the packed codes
/// (ceil(numel / 2)) plus, without double quantization, 4 bytes per block
/// scale, or with it 1 byte per block scale, 4 per nested block and 4 for
/// the offset. Not counted: the two codebooks (shared constants; a
/// checkpoint repeats them per tensor as quant_map and nested_quant_map,
/// 64 + 1024 bytes) and the serialized quant-state JSON. At block sizes 64
/// and 256 that is 4 + 8/64 + 32/(64*256) bits per weight plus 4 bytes.
uint64_t nf4StorageBytes(int64_t numel, bool doubleQuant, int blockSize = 64,
                         int nestedBlockSize = 256);

/// PyTorch's CPU float32 `torch.mean` of `n` floats (n >= 1) in the order
/// `order` describes: exposed for the tests of the offset.
float torchFloatMean(const float *x, int64_t n, Nf4MeanOrder order);

} // namespace tailor::quant

#endif // TAILOR_RUNTIME_QUANT_NF4_H
