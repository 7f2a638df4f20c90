//===- QuantizedWeight.cpp - quantized weight storage, by scheme ----------===//
//
// Layouts are at the top of QuantizedWeight.h. nf4 reuses Nf4.cpp for
// quantization (so the stored bytes are bitsandbytes') and re-implements
// only its dequantization formula, per tile: each block's scale once
// (map[code] * nestedAbsmax + offset, two float roundings, as
// nf4BlockScales), then two codes per byte through a 256-entry table of
// code pairs, each times the scale. Same operations, same order, so a tile
// equals the slice of dequantizeNf4 bit for bit; this file is compiled
// with -ffp-contract=off (tailor_quant) to keep it so. int8 lives in
// Int8.cpp, gptq in Gptq.cpp; bf16 and fp16 are conversions (Half.h).
//
// Tile dequantization is the inner loop of the quantized GEMMs and is
// written to stream: no division, call or branch per element beyond the
// table lookups.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/QuantizedWeight.h"

#include "runtime/quant/Gptq.h"
#include "runtime/quant/Half.h"
#include "runtime/quant/Int8.h"
#include "runtime/quant/Nf4.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace tailor::quant {

const char *schemeName(Scheme scheme) {
  switch (scheme) {
  case Scheme::NF4:
    return "nf4";
  case Scheme::Int8:
    return "int8";
  case Scheme::GPTQ:
    return "gptq";
  case Scheme::BF16:
    return "bf16";
  case Scheme::FP16:
    return "fp16";
  }
  return "unknown";
}

bool parseScheme(std::string_view name, Scheme &scheme) {
  for (Scheme s : {Scheme::NF4, Scheme::Int8, Scheme::GPTQ, Scheme::BF16,
                   Scheme::FP16}) {
    if (name == schemeName(s)) {
      scheme = s;
      return true;
    }
  }
  return false;
}

int64_t QuantSpec::groups() const {
  if (groupSize == -1) {
    return 1;
  }
  return groupSize > 0 ? (cols + groupSize - 1) / groupSize : 0;
}

namespace {

/// Larger weights (2^31 rows or cols, 2^40 elements: 4 TiB of floats) are
/// rejected, so every byte count and offset fits comfortably in 64 bits.
constexpr int64_t kMaxExtent = int64_t(1) << 31;
constexpr int64_t kMaxElements = int64_t(1) << 40;

//===----------------------------------------------------------------------===//
// nf4
//===----------------------------------------------------------------------===//

/// Byte offsets of the nf4 sections (QuantizedWeight.h).
struct Nf4Sections {
  int64_t blocks = 0, nested = 0;
  uint64_t offset = 0, nestedAbsmax = 0, absmax = 0, codes = 0, packed = 0;
};

Nf4Sections nf4Sections(const QuantSpec &spec) {
  Nf4Sections s;
  const int64_t n = spec.rows * spec.cols;
  s.blocks = (n + spec.blockSize - 1) / spec.blockSize;
  if (spec.doubleQuant) {
    s.nested = (s.blocks + spec.nestedBlockSize - 1) / spec.nestedBlockSize;
    s.nestedAbsmax = 4;
    s.codes = s.nestedAbsmax + 4 * static_cast<uint64_t>(s.nested);
    s.packed = s.codes + static_cast<uint64_t>(s.blocks);
  } else {
    s.packed = 4 * static_cast<uint64_t>(s.blocks);
  }
  return s;
}

float loadFloat(const uint8_t *p) {
  float value;
  std::memcpy(&value, p, sizeof(value));
  return value;
}

void storeFloats(uint8_t *p, const std::vector<float> &values) {
  if (!values.empty()) {
    std::memcpy(p, values.data(), values.size() * sizeof(float));
  }
}

void quantizeNf4Into(const QuantSpec &spec, const float *w, uint8_t *storage) {
  const Nf4Quantized q = quantizeNf4(w, spec.rows * spec.cols, spec.blockSize,
                                     spec.doubleQuant, spec.nestedBlockSize);
  const Nf4Sections at = nf4Sections(spec);
  if (spec.doubleQuant) {
    std::memcpy(storage + at.offset, &q.offset, sizeof(float));
    storeFloats(storage + at.nestedAbsmax, q.nestedAbsmax);
    std::memcpy(storage + at.codes, q.absmaxCodes.data(), q.absmaxCodes.size());
  } else {
    storeFloats(storage + at.absmax, q.absmax);
  }
  std::memcpy(storage + at.packed, q.packed.data(), q.packed.size());
}

/// kNf4Codebook of a byte's two codes: high nibble first (the even element).
struct CodePair {
  float first, second;
};

const std::array<CodePair, 256> &nf4PairTable() {
  static const std::array<CodePair, 256> table = [] {
    std::array<CodePair, 256> t;
    for (int b = 0; b < 256; ++b) {
      t[b] = {kNf4Codebook[b >> 4], kNf4Codebook[b & 0x0f]};
    }
    return t;
  }();
  return table;
}

/// Dequantizes flat elements [begin, end) of an nf4 weight to dst.
class Nf4Reader {
public:
  Nf4Reader(const QuantSpec &spec, const uint8_t *storage)
      : spec(spec), storage(storage), at(nf4Sections(spec)),
        packed(storage + at.packed), pairs(nf4PairTable()),
        map(dynamicMap8Bit().data()) {
    int shift = 0;
    while ((1 << shift) < spec.blockSize) {
      ++shift;
    }
    blockShift = shift;
    if (spec.doubleQuant) {
      offset = loadFloat(storage + at.offset);
    }
  }

  /// The scale of block b: as nf4BlockScales computes it.
  float blockScale(int64_t b) const {
    if (!spec.doubleQuant) {
      return loadFloat(storage + at.absmax + 4 * b);
    }
    const float nested =
        loadFloat(storage + at.nestedAbsmax + 4 * (b / spec.nestedBlockSize));
    const float dequantized = map[storage[at.codes + b]] * nested;
    return dequantized + offset;
  }

  void read(int64_t begin, int64_t end, float *dst) const {
    int64_t i = begin;
    while (i < end) {
      const int64_t block = i >> blockShift;
      const int64_t blockEnd = std::min(end, (block + 1) << blockShift);
      const float scale = blockScale(block);
      if (i & 1) { // a block's odd start: the low nibble of its byte
        *dst++ = kNf4Codebook[packed[i >> 1] & 0x0f] * scale;
        ++i;
      }
      const int64_t bytes = (blockEnd - i) >> 1;
      const uint8_t *src = packed + (i >> 1);
      // Four bytes per step (a block holds at least 16): the unrolled
      // loop runs about twice as fast as the plain one.
      int64_t j = 0;
      for (; j + 4 <= bytes; j += 4) {
        for (int u = 0; u < 4; ++u) {
          const CodePair pair = pairs[src[j + u]];
          dst[2 * (j + u)] = pair.first * scale;
          dst[2 * (j + u) + 1] = pair.second * scale;
        }
      }
      for (; j < bytes; ++j) {
        const CodePair pair = pairs[src[j]];
        dst[2 * j] = pair.first * scale;
        dst[2 * j + 1] = pair.second * scale;
      }
      dst += 2 * bytes;
      i += 2 * bytes;
      if (i < blockEnd) { // an odd end: the high nibble
        *dst++ = kNf4Codebook[packed[i >> 1] >> 4] * scale;
        ++i;
      }
    }
  }

private:
  const QuantSpec &spec;
  const uint8_t *storage;
  Nf4Sections at;
  const uint8_t *packed;
  const std::array<CodePair, 256> &pairs;
  const float *map;
  int blockShift = 0;
  float offset = 0.0f;
};

void dequantizeNf4Tile(const QuantSpec &spec, const uint8_t *storage,
                       int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                       float *out, int64_t ld) {
  const Nf4Reader reader(spec, storage);
  if (c0 == 0 && c1 == spec.cols && ld == spec.cols) {
    // Whole rows into a dense tile: one flat run, split only at blocks.
    reader.read(r0 * spec.cols, r1 * spec.cols, out);
    return;
  }
  for (int64_t r = r0; r < r1; ++r) {
    reader.read(r * spec.cols + c0, r * spec.cols + c1, out + (r - r0) * ld);
  }
}

//===----------------------------------------------------------------------===//
// bf16 and fp16
//===----------------------------------------------------------------------===//

void quantizeHalfInto(const QuantSpec &spec, const float *w, bool transposed,
                      uint8_t *storage) {
  const bool bf16 = spec.scheme == Scheme::BF16;
  for (int64_t r = 0; r < spec.rows; ++r) {
    for (int64_t c = 0; c < spec.cols; ++c) {
      const float value = transposed ? w[c * spec.rows + r] : w[r * spec.cols + c];
      const uint16_t bits = bf16 ? floatToBf16(value) : floatToFp16(value);
      std::memcpy(storage + 2 * (r * spec.cols + c), &bits, 2);
    }
  }
}

template <bool BF16>
void dequantizeHalfTile(const QuantSpec &spec, const uint8_t *storage,
                        int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        float *out, int64_t ld) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t *src = storage + 2 * (r * spec.cols + c0);
    float *dst = out + (r - r0) * ld;
    for (int64_t c = 0; c < c1 - c0; ++c) {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * c, 2);
      dst[c] = BF16 ? bf16ToFloat(bits) : fp16ToFloat(bits);
    }
  }
}

/// The row-major [rows, cols] copy of a transposed source w[cols, rows],
/// in cache-sized blocks.
std::vector<float> untranspose(const float *w, int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 64;
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t rb = 0; rb < rows; rb += kBlock) {
    for (int64_t cb = 0; cb < cols; cb += kBlock) {
      const int64_t re = std::min(rows, rb + kBlock);
      const int64_t ce = std::min(cols, cb + kBlock);
      for (int64_t c = cb; c < ce; ++c) {
        for (int64_t r = rb; r < re; ++r) {
          out[r * cols + c] = w[c * rows + r];
        }
      }
    }
  }
  return out;
}

} // namespace

std::string checkSpec(const QuantSpec &spec) {
  if (spec.rows < 1 || spec.cols < 1) {
    return "quantized weight needs rows and cols >= 1, got [" +
           std::to_string(spec.rows) + ", " + std::to_string(spec.cols) + "]";
  }
  if (spec.rows > kMaxExtent || spec.cols > kMaxExtent ||
      spec.rows * spec.cols > kMaxElements) {
    return "quantized weight [" + std::to_string(spec.rows) + ", " +
           std::to_string(spec.cols) + "] is too large (at most 2^31 rows or " +
           "cols and 2^40 elements)";
  }
  switch (spec.scheme) {
  case Scheme::NF4:
    return checkNf4Params(spec.rows * spec.cols, spec.blockSize,
                          spec.nestedBlockSize);
  case Scheme::Int8:
    return checkInt8Spec(spec);
  case Scheme::GPTQ:
    return checkGptqSpec(spec);
  case Scheme::BF16:
  case Scheme::FP16:
    return "";
  }
  return "unknown quantization scheme " +
         std::to_string(static_cast<int>(spec.scheme));
}

uint64_t storageBytes(const QuantSpec &spec) {
  const int64_t n = spec.rows * spec.cols;
  switch (spec.scheme) {
  case Scheme::NF4:
    return nf4StorageBytes(n, spec.doubleQuant, spec.blockSize,
                           spec.nestedBlockSize);
  case Scheme::Int8:
    return int8StorageBytes(spec);
  case Scheme::GPTQ:
    return gptqStorageBytes(spec);
  case Scheme::BF16:
  case Scheme::FP16:
    return 2 * static_cast<uint64_t>(n);
  }
  return 0;
}

std::string quantizeInto(const QuantSpec &spec, const float *w, bool transposed,
                         uint8_t *storage) {
  if (std::string problem = checkSpec(spec); !problem.empty()) {
    return problem;
  }
  if (spec.scheme == Scheme::GPTQ) {
    return "gptq weights need calibration: run `tailor quantize`";
  }
  if (spec.scheme == Scheme::BF16 || spec.scheme == Scheme::FP16) {
    quantizeHalfInto(spec, w, transposed, storage);
    return "";
  }
  // nf4 blocks and int8 rows run over W[rows, cols] row-major, as
  // bitsandbytes quantizes a Linear weight: undo a transposed source first.
  std::vector<float> rowMajor;
  if (transposed) {
    rowMajor = untranspose(w, spec.rows, spec.cols);
    w = rowMajor.data();
  }
  if (spec.scheme == Scheme::NF4) {
    quantizeNf4Into(spec, w, storage);
  } else {
    quantizeInt8Into(spec, w, storage);
  }
  return "";
}

void dequantizeTile(const QuantSpec &spec, const uint8_t *storage, int64_t r0,
                    int64_t r1, int64_t c0, int64_t c1, float *out,
                    int64_t ld) {
  if (r0 >= r1 || c0 >= c1) {
    return;
  }
  switch (spec.scheme) {
  case Scheme::NF4:
    dequantizeNf4Tile(spec, storage, r0, r1, c0, c1, out, ld);
    return;
  case Scheme::Int8:
    dequantizeInt8Tile(spec, storage, r0, r1, c0, c1, out, ld);
    return;
  case Scheme::GPTQ:
    dequantizeGptqTile(spec, storage, r0, r1, c0, c1, out, ld);
    return;
  case Scheme::BF16:
    dequantizeHalfTile<true>(spec, storage, r0, r1, c0, c1, out, ld);
    return;
  case Scheme::FP16:
    dequantizeHalfTile<false>(spec, storage, r0, r1, c0, c1, out, ld);
    return;
  }
}

//===----------------------------------------------------------------------===//
// Tiling of the linear_quantized kernel
//===----------------------------------------------------------------------===//

namespace {

/// Output columns per task and contraction depth per tile, at most. Each
/// task multiplies all of x by its tiles, and sgemm packs the x panel it is
/// given on every call, so x is packed ceil(N / out) times in all, while
/// y's tile is read and written ceil(K / depth) times. 512 x 256 floats
/// (512 KiB) stays in L2 from dequantization to sgemm's packing, and 512
/// output columns leave a 2048-wide layer 4 tasks to spread.
constexpr int64_t kMaxOutTile = 512;
constexpr int64_t kMaxDepthTile = 256;
/// Tile extents are multiples of this (sgemm's register blocking).
constexpr int64_t kTileStep = 16;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The piece length that cuts `extent` into about equal pieces of at most
/// `most` (a multiple of kTileStep): the even share rounded up to
/// kTileStep, so only the last piece is shorter.
int64_t evenTile(int64_t extent, int64_t most) {
  const int64_t pieces = ceilDiv(extent, most);
  return std::min(extent, ceilDiv(ceilDiv(extent, pieces), kTileStep) *
                              kTileStep);
}

} // namespace

LinearTiling linearTiling(const QuantSpec &spec, bool transposeWeight) {
  // y = x W^T contracts over W's cols; y = x W over its rows.
  const int64_t n = transposeWeight ? spec.cols : spec.rows;
  const int64_t k = transposeWeight ? spec.rows : spec.cols;
  const int64_t outTile = evenTile(n, kMaxOutTile);
  const int64_t depthTile = evenTile(k, kMaxDepthTile);
  LinearTiling t;
  t.tileRows = transposeWeight ? depthTile : outTile;
  t.tileCols = transposeWeight ? outTile : depthTile;
  t.tasks = ceilDiv(n, outTile);
  return t;
}

int64_t linearWorkspaceFloats(const QuantSpec &spec, bool transposeWeight,
                              int64_t workers) {
  const LinearTiling t = linearTiling(spec, transposeWeight);
  return std::min(std::max<int64_t>(workers, 1), t.tasks) * t.tileFloats();
}

} // namespace tailor::quant
