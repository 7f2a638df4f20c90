//===- Nf4.cpp - NF4 quantization and dequantization, bitsandbytes' way ---===//
//
// Layout: the weight is one flat row-major array cut into blocks of
// `blockSize` (the last may be partial); each block keeps its fp32 absmax
// and one 4-bit code per element, two per byte, element 2j in the high
// nibble. Double quantization stores the block scales as 8-bit codes of the
// signed dynamic map, (absmax - offset) / nestedAbsmax, in blocks of
// `nestedBlockSize` scales (FORMATS.md "QLoRA NF4").
//
// Precision: everything is float32 with one rounding per step, in the order
// bitsandbytes 0.50 on the CPU rounds. That order is the point of this file:
// a QLoRA weight must dequantize here to exactly what PEFT/bitsandbytes
// trains against, and a tensor quantized here must be the one
// bitsandbytes would have written. The steps, each matched bit for bit by
// test/e2e/nf4_bitsandbytes.py:
//   - NF4 codes (bitsandbytes' default torch kernel): s = clamp(w *
//     (1 / max(absmax, 1e-38)), -1, 1), except that the partial last block
//     divides, w / max(absmax, 1e-38), and stores that clamped absmax; the
//     code is the number of midpoints (code[i] + code[i+1]) / 2 below s
//     (torch.bucketize), so a value exactly on a midpoint takes the lower
//     code. An odd tail is padded with s = 0.
//   - offset: torch's float32 mean of the block scales, whose value depends
//     on the order its cascade sum adds in (torchFloatMean below).
//   - 8-bit codes of (absmax - offset) (bitsandbytes' C++ CPU kernel): not
//     the nearest code but a 65536-entry table lookup: s = clamp(d * (1 /
//     nestedAbsmax), -1, 1) picks table slot trunc(fma((s + 1) * 0.5, 65535,
//     0.5)), and slot i holds the first code whose midpoint with the next is
//     not below 2i / 65535 - 1. A nested block whose scale is 0 gets code 0.
//     (bitsandbytes' CUDA kernel searches for the nearest code instead, so a
//     GPU-quantized checkpoint may differ in a few absmax codes; both
//     dequantize by the formula below.)
//   - dequantization: scale = map[code] * nestedAbsmax + offset (two
//     roundings), value = nf4[code] * scale.
// Serial and simple: one pass over the weight with a 4-step search per
// element, about 0.7 s to quantize a 4096 x 4096 layer on one core, done
// once per weight when a model is loaded.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Nf4.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace tailor::quant {

// bitsandbytes builds its table from these Python floats (doubles), so they
// are rounded from double to float here too.
const std::array<float, 16> kNf4Codebook = {
    static_cast<float>(-1.0),
    static_cast<float>(-0.6961928009986877),
    static_cast<float>(-0.5250730514526367),
    static_cast<float>(-0.39491748809814453),
    static_cast<float>(-0.28444138169288635),
    static_cast<float>(-0.18477343022823334),
    static_cast<float>(-0.09105003625154495),
    static_cast<float>(0.0),
    static_cast<float>(0.07958029955625534),
    static_cast<float>(0.16093020141124725),
    static_cast<float>(0.24611230194568634),
    static_cast<float>(0.33791524171829224),
    static_cast<float>(0.44070982933044434),
    static_cast<float>(0.5626170039176941),
    static_cast<float>(0.7229568362236023),
    static_cast<float>(1.0),
};

namespace {

/// torch.linspace(start, end, steps, dtype=float32): a float step, then each
/// half counted from its own end with one fused multiply-add, as PyTorch's
/// CPU kernel is compiled.
std::vector<float> torchLinspace(float start, float end, int steps) {
  std::vector<float> out(steps);
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int halfway = steps / 2;
  for (int i = 0; i < steps; ++i) {
    out[i] = i < halfway
                 ? std::fma(step, static_cast<float>(i), start)
                 : std::fma(-step, static_cast<float>(steps - i - 1), end);
  }
  return out;
}

/// create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for
/// exponent i = 0..6, 2^i linearly spaced fractions in (0.1, 1) (midpoints of
/// linspace(0.1, 1, 2^i + 1)) scaled by 10^(i - 6), both signs; then 0 and 1;
/// sorted. 254 + 2 = 256 values, no padding.
std::array<float, 256> buildDynamicMap() {
  // Python's 10 ** (i - 6) as a double, then rounded to float by torch's mul.
  static const double kPowers[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) {
    std::vector<float> bounds = torchLinspace(0.1f, 1.0f, (1 << i) + 1);
    std::vector<float> means(bounds.size() - 1);
    for (size_t j = 0; j + 1 < bounds.size(); ++j) {
      means[j] = (bounds[j] + bounds[j + 1]) / 2.0f;
    }
    const float scale = static_cast<float>(kPowers[i]);
    for (float m : means) {
      data.push_back(scale * m);
    }
    for (float m : means) {
      data.push_back(-scale * m);
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  assert(data.size() == 256);
  std::sort(data.begin(), data.end());
  std::array<float, 256> map;
  std::copy(data.begin(), data.end(), map.begin());
  return map;
}

constexpr int kLutSize = 65536;

/// bitsandbytes' CPU quantization table for the dynamic map (cpu_ops.cpp
/// build_quantize_lut): slot i covers the normalized value 2i / 65535 - 1 and
/// holds the first code whose upper midpoint is not below it.
std::vector<uint8_t> buildDynamicLut() {
  const std::array<float, 256> &map = dynamicMap8Bit();
  float mids[255];
  for (int i = 0; i < 255; ++i) {
    mids[i] = 0.5f * (map[i] + map[i + 1]);
  }
  std::vector<uint8_t> lut(kLutSize);
  int code = 0;
  for (int i = 0; i < kLutSize; ++i) {
    const float value =
        (2.0f * static_cast<float>(i)) / static_cast<float>(kLutSize - 1) -
        1.0f;
    while (code < 255 && mids[code] < value) {
      ++code;
    }
    lut[i] = static_cast<uint8_t>(code);
  }
  return lut;
}

const std::vector<uint8_t> &dynamicLut() {
  static const std::vector<uint8_t> lut = buildDynamicLut();
  return lut;
}

/// The table slot of a normalized value (cpu_ops.cpp norm_to_lut_index; its
/// compiler fuses the last multiply-add). NaN, which the C++ cast leaves
/// undefined, takes slot 0 as bitsandbytes' truncating conversion gives it.
inline int lutIndex(float s) {
  s = s < -1.0f ? -1.0f : (1.0f < s ? 1.0f : s);
  const float slot = std::fma((s + 1.0f) * 0.5f, 65535.0f, 0.5f);
  return std::isnan(slot) ? 0 : static_cast<int>(slot) & 0xffff;
}

/// torch.bucketize(s, midpoints) with right=False: the number of midpoints
/// below s, by PyTorch's lower-bound search (a NaN runs off the end: 15).
inline uint8_t nf4Code(float s, const float *mids) {
  int lo = 0, hi = 15;
  while (lo < hi) {
    const int mid = lo + ((hi - lo) >> 1);
    if (!(mids[mid] >= s)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return static_cast<uint8_t>(lo);
}

/// torch.clamp(s, -1, 1), which keeps NaN.
inline float clampUnit(float s) {
  return s < -1.0f ? -1.0f : (s > 1.0f ? 1.0f : s);
}

//===----------------------------------------------------------------------===//
// PyTorch's float32 sum (aten/src/ATen/native/cpu/SumKernel.cpp, cascade_sum
// over one contiguous axis). A "row" of `width` floats is one scalar
// (width 1) or one vector register of `width` lanes; all adds are lane-wise.
//===----------------------------------------------------------------------===//

/// multi_row_sum: sums `size` rows of `nrows` elements, element (i, k) at
/// in + i * rowStride + k * colStride, into out[k * width + lane]. Partial
/// sums are carried through 4 levels every 2^max(4, ceil(log2 size) / 4)
/// rows, so only sums of similar size meet.
void multiRowSum(const float *in, int64_t rowStride, int64_t colStride,
                 int64_t size, int nrows, int width, float *out) {
  constexpr int kLevels = 4;
  int64_t ceilLog2 = 1;
  if (size > 2) {
    ceilLog2 = 0;
    for (uint64_t v = static_cast<uint64_t>(size) - 1; v; v >>= 1) {
      ++ceilLog2;
    }
  }
  const int64_t levelPower = std::max<int64_t>(4, ceilLog2 / kLevels);
  const int64_t levelStep = int64_t(1) << levelPower;
  const int64_t levelMask = levelStep - 1;
  const int rowWidth = nrows * width;
  std::vector<float> acc(static_cast<size_t>(kLevels) * rowWidth, 0.0f);
  auto accumulate = [&](int64_t i) {
    for (int k = 0; k < nrows; ++k) {
      const float *src = in + i * rowStride + k * colStride;
      float *dst = &acc[static_cast<size_t>(k) * width];
      for (int l = 0; l < width; ++l) {
        dst[l] += src[l];
      }
    }
  };
  int64_t i = 0;
  while (i + levelStep <= size) {
    for (int64_t j = 0; j < levelStep; ++j, ++i) {
      accumulate(i);
    }
    for (int j = 1; j < kLevels; ++j) {
      float *lower = &acc[static_cast<size_t>(j - 1) * rowWidth];
      float *upper = &acc[static_cast<size_t>(j) * rowWidth];
      for (int e = 0; e < rowWidth; ++e) {
        upper[e] += lower[e];
        lower[e] = 0.0f;
      }
      if ((i & (levelMask << (j * levelPower))) != 0) {
        break;
      }
    }
  }
  for (; i < size; ++i) {
    accumulate(i);
  }
  for (int j = 1; j < kLevels; ++j) {
    for (int e = 0; e < rowWidth; ++e) {
      acc[e] += acc[static_cast<size_t>(j) * rowWidth + e];
    }
  }
  std::copy(acc.begin(), acc.begin() + rowWidth, out);
}

/// row_sum: `size` rows of `width` floats `stride` apart, summed as a
/// (-1, 4) array of 4 interleaved partial sums, then the tail, then the
/// partials in order.
void rowSum(const float *in, int64_t stride, int64_t size, int width,
            float *out) {
  constexpr int kIlp = 4;
  const int64_t sizeIlp = size / kIlp;
  std::vector<float> partial(static_cast<size_t>(kIlp) * width);
  multiRowSum(in, stride * kIlp, stride, sizeIlp, kIlp, width, partial.data());
  for (int64_t i = sizeIlp * kIlp; i < size; ++i) {
    for (int l = 0; l < width; ++l) {
      partial[l] += in[i * stride + l];
    }
  }
  for (int k = 1; k < kIlp; ++k) {
    for (int l = 0; l < width; ++l) {
      partial[l] += partial[static_cast<size_t>(k) * width + l];
    }
  }
  std::copy(partial.begin(), partial.begin() + width, out);
}

/// One thread's share (vectorized_inner_sum, or the scalar row_sum when
/// there is less than a vector): vectors of `lanes`, then the scalar tail,
/// then the lanes in order.
float innerSum(const float *x, int64_t n, int lanes) {
  if (n < lanes) {
    float sum = 0.0f;
    rowSum(x, 1, n, 1, &sum);
    return sum;
  }
  const int64_t vectors = n / lanes;
  std::vector<float> lanesSum(lanes);
  rowSum(x, lanes, vectors, lanes, lanesSum.data());
  float sum = 0.0f;
  for (int64_t k = vectors * lanes; k < n; ++k) {
    sum += x[k];
  }
  for (int l = 0; l < lanes; ++l) {
    sum += lanesSum[l];
  }
  return sum;
}

} // namespace

const std::array<float, 256> &dynamicMap8Bit() {
  static const std::array<float, 256> map = buildDynamicMap();
  return map;
}

float torchFloatMean(const float *x, int64_t n, Nf4MeanOrder order) {
  // TensorIterator::parallel_reduce: serial below GRAIN_SIZE elements or on
  // one thread; otherwise OpenMP's split into min(threads, ceil(n / grain))
  // equal chunks, each summed into its own slot of a `threads`-long buffer
  // of zeros, which is then summed the same way. The output starts at 0
  // and accumulates (0 + sum). Then sum / n.
  constexpr int64_t kGrainSize = 32768;
  const int lanes = std::max(1, order.sumLanes);
  const int threads = std::max(1, order.sumThreads);
  float sum;
  if (n < kGrainSize || threads == 1) {
    sum = 0.0f + innerSum(x, n, lanes);
  } else {
    const int64_t used =
        std::min<int64_t>(threads, (n + kGrainSize - 1) / kGrainSize);
    const int64_t chunk = (n + used - 1) / used;
    std::vector<float> partial(threads, 0.0f);
    for (int64_t t = 0; t < used && t * chunk < n; ++t) {
      const int64_t begin = t * chunk;
      partial[t] =
          0.0f + innerSum(x + begin, std::min(n, begin + chunk) - begin, lanes);
    }
    sum = 0.0f + innerSum(partial.data(), threads, lanes);
  }
  return sum / static_cast<float>(n);
}

int64_t Nf4Quantized::numBlocks() const {
  return blockSize > 0 ? (numel + blockSize - 1) / blockSize : 0;
}

std::string checkNf4Params(int64_t numel, int blockSize, int nestedBlockSize) {
  if (numel < 1) {
    return "nf4 quantization needs at least one element, got " +
           std::to_string(numel);
  }
  bool known = false;
  for (int size = 32; size <= 4096; size *= 2) {
    known = known || blockSize == size;
  }
  if (!known) {
    return "nf4 block size must be one of 32, 64, 128, 256, 512, 1024, 2048, "
           "4096 (as in bitsandbytes), got " +
           std::to_string(blockSize);
  }
  if (nestedBlockSize < 1) {
    return "nf4 nested block size must be positive, got " +
           std::to_string(nestedBlockSize);
  }
  return "";
}

std::string checkNf4Quantized(const Nf4Quantized &q) {
  if (std::string error =
          checkNf4Params(q.numel, q.blockSize, q.nestedBlockSize);
      !error.empty()) {
    return error;
  }
  auto mismatch = [](const char *what, size_t got, int64_t expected) {
    return std::string("nf4 ") + what + " has " + std::to_string(got) +
           " entries, expected " + std::to_string(expected);
  };
  const int64_t blocks = q.numBlocks();
  if (static_cast<int64_t>(q.packed.size()) != (q.numel + 1) / 2) {
    return mismatch("packed", q.packed.size(), (q.numel + 1) / 2);
  }
  if (!q.doubleQuant) {
    if (static_cast<int64_t>(q.absmax.size()) != blocks) {
      return mismatch("absmax", q.absmax.size(), blocks);
    }
    return "";
  }
  if (static_cast<int64_t>(q.absmaxCodes.size()) != blocks) {
    return mismatch("absmax codes", q.absmaxCodes.size(), blocks);
  }
  const int64_t nested = (blocks + q.nestedBlockSize - 1) / q.nestedBlockSize;
  if (static_cast<int64_t>(q.nestedAbsmax.size()) != nested) {
    return mismatch("nested absmax", q.nestedAbsmax.size(), nested);
  }
  return "";
}

Nf4Quantized quantizeNf4(const float *w, int64_t numel, int blockSize,
                         bool doubleQuant, int nestedBlockSize,
                         Nf4MeanOrder meanOrder) {
  assert(checkNf4Params(numel, blockSize, nestedBlockSize).empty());
  Nf4Quantized q;
  q.numel = numel;
  q.blockSize = blockSize;
  q.nestedBlockSize = nestedBlockSize;
  q.doubleQuant = doubleQuant;
  q.packed.assign((numel + 1) / 2, 0);
  const int64_t blocks = q.numBlocks();
  std::vector<float> absmax(blocks);

  float mids[15];
  for (int i = 0; i < 15; ++i) {
    mids[i] = (kNf4Codebook[i] + kNf4Codebook[i + 1]) / 2.0f;
  }
  // torch.clamp(absmax, min=1e-38): the float nearest 1e-38 (subnormal).
  const float kMinScale = 1e-38f;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * blockSize;
    const int64_t end = std::min(numel, begin + blockSize);
    float amax = 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      const float a = std::fabs(w[i]);
      if (a > amax || std::isnan(a)) {
        amax = a; // torch.max keeps a NaN once seen
      }
    }
    const float scale =
        std::isnan(amax) || amax >= kMinScale ? amax : kMinScale;
    const bool full = end - begin == blockSize;
    // bitsandbytes keeps a full block's absmax as found but stores the
    // partial block's clamped one (an all-zero tail block stores 1e-38).
    absmax[b] = full ? amax : scale;
    const float inverse = 1.0f / scale;
    for (int64_t i = begin; i < end; ++i) {
      const float s = clampUnit(full ? w[i] * inverse : w[i] / scale);
      const uint8_t code = nf4Code(s, mids);
      q.packed[i / 2] |= (i % 2 == 0) ? static_cast<uint8_t>(code << 4) : code;
    }
  }
  if (numel % 2) {
    q.packed.back() |= nf4Code(0.0f, mids); // the pad: code 7
  }

  if (!doubleQuant) {
    q.absmax = std::move(absmax);
    return q;
  }
  q.offset = torchFloatMean(absmax.data(), blocks, meanOrder);
  for (float &a : absmax) {
    a -= q.offset;
  }
  const std::vector<uint8_t> &lut = dynamicLut();
  const int64_t nested = (blocks + nestedBlockSize - 1) / nestedBlockSize;
  q.absmaxCodes.assign(blocks, 0);
  q.nestedAbsmax.assign(nested, 0.0f);
  for (int64_t b = 0; b < nested; ++b) {
    const int64_t begin = b * nestedBlockSize;
    const int64_t end = std::min(blocks, begin + nestedBlockSize);
    float amax = 0.0f; // std::max(amax, |d|): a NaN is skipped here
    for (int64_t i = begin; i < end; ++i) {
      const float a = std::fabs(absmax[i]);
      amax = amax < a ? a : amax;
    }
    q.nestedAbsmax[b] = amax;
    if (amax == 0.0f) {
      continue; // codes stay 0
    }
    const float inverse = 1.0f / amax;
    for (int64_t i = begin; i < end; ++i) {
      q.absmaxCodes[i] = lut[lutIndex(absmax[i] * inverse)];
    }
  }
  return q;
}

std::vector<float> nf4BlockScales(const Nf4Quantized &q) {
  if (!q.doubleQuant) {
    return q.absmax;
  }
  const std::array<float, 256> &map = dynamicMap8Bit();
  std::vector<float> scales(q.absmaxCodes.size());
  for (size_t i = 0; i < scales.size(); ++i) {
    const float dequantized =
        map[q.absmaxCodes[i]] * q.nestedAbsmax[i / q.nestedBlockSize];
    scales[i] = dequantized + q.offset;
  }
  return scales;
}

void dequantizeNf4(const Nf4Quantized &q, float *out) {
  assert(checkNf4Quantized(q).empty());
  const std::vector<float> scales = nf4BlockScales(q);
  // Block sizes are even, so every block starts on a byte boundary.
  for (size_t b = 0; b < scales.size(); ++b) {
    const float scale = scales[b];
    const int64_t begin = static_cast<int64_t>(b) * q.blockSize;
    const int64_t end = std::min(q.numel, begin + q.blockSize);
    for (int64_t i = begin; i < end; i += 2) {
      const uint8_t byte = q.packed[i / 2];
      out[i] = kNf4Codebook[byte >> 4] * scale;
      if (i + 1 < end) {
        out[i + 1] = kNf4Codebook[byte & 0x0f] * scale;
      }
    }
  }
}

uint64_t nf4StorageBytes(int64_t numel, bool doubleQuant, int blockSize,
                         int nestedBlockSize) {
  if (numel <= 0 || blockSize <= 0 || nestedBlockSize <= 0) {
    return 0;
  }
  const uint64_t n = static_cast<uint64_t>(numel);
  const uint64_t blocks = (n + blockSize - 1) / blockSize;
  const uint64_t packed = (n + 1) / 2;
  if (!doubleQuant) {
    return packed + 4 * blocks;
  }
  const uint64_t nested = (blocks + nestedBlockSize - 1) / nestedBlockSize;
  return packed + blocks + 4 * nested + 4;
}

} // namespace tailor::quant
