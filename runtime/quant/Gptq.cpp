//===- Gptq.cpp - AutoGPTQ's packed storage: packing and tiles ----------===//
//
// Layout: Gptq.h. Codes and zero points are fields of little-endian bit
// streams of int32 words (qweight's stream for output r runs down column r,
// stride rows words; a group's qzeros stream runs along its row), so one
// field reader serves every bit width, 3 included. Words are read and
// written with memcpy: storage has no alignment promise beyond bytes, and
// safetensors, like every host tailor runs on, is little-endian.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Gptq.h"
#include "runtime/quant/Half.h"

#include <cmath>
#include <cstring>

namespace tailor::quant {

namespace {

int64_t groupCount(const QuantSpec &spec) {
  return spec.groupSize == -1
             ? 1
             : (spec.cols + spec.groupSize - 1) / spec.groupSize;
}

uint32_t loadWord(const uint8_t *words, int64_t index) {
  uint32_t word;
  std::memcpy(&word, words + 4 * index, 4);
  return word;
}

void orWord(uint8_t *words, int64_t index, uint32_t bits) {
  uint32_t word = loadWord(words, index) | bits;
  std::memcpy(words + 4 * index, &word, 4);
}

/// Field `index` of a bit stream whose k-th word is words[k * stride].
uint32_t readField(const uint8_t *words, int64_t stride, int64_t index,
                   int bits) {
  int64_t bit = index * bits;
  int64_t word = bit >> 5;
  int shift = static_cast<int>(bit & 31);
  uint64_t value = loadWord(words, word * stride);
  if (shift + bits > 32) {
    value |= static_cast<uint64_t>(loadWord(words, (word + 1) * stride)) << 32;
  }
  return static_cast<uint32_t>(value >> shift) & ((1u << bits) - 1);
}

void writeField(uint8_t *words, int64_t stride, int64_t index, int bits,
                uint32_t value) {
  int64_t bit = index * bits;
  int64_t word = bit >> 5;
  int shift = static_cast<int>(bit & 31);
  uint64_t shifted = static_cast<uint64_t>(value) << shift;
  orWord(words, word * stride, static_cast<uint32_t>(shifted));
  if (shift + bits > 32) {
    orWord(words, (word + 1) * stride, static_cast<uint32_t>(shifted >> 32));
  }
}

} // namespace

std::string checkGptqSpec(const QuantSpec &spec) {
  if (spec.scheme != Scheme::GPTQ) {
    return "not a gptq spec";
  }
  int bits = spec.bits;
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8) {
    return "gptq bits must be 2, 3, 4 or 8, got " + std::to_string(bits);
  }
  if (spec.groupSize != -1 && spec.groupSize < 1) {
    return "gptq group size must be -1 or at least 1, got " +
           std::to_string(spec.groupSize);
  }
  if (spec.rows < 1 || spec.cols < 1) {
    return "gptq weight must have at least one row and column, got " +
           std::to_string(spec.rows) + " x " + std::to_string(spec.cols);
  }
  int64_t unit = bits == 3 ? 32 : 32 / bits;
  std::string packing = bits == 3 ? "32 codes per 3 int32 words"
                                  : std::to_string(unit) + " codes per int32";
  std::string why =
      "gptq at " + std::to_string(bits) + " bits packs " + packing + ": ";
  if (spec.cols % unit != 0) {
    return why + "cols (in features) must be a multiple of " +
           std::to_string(unit) + ", got " + std::to_string(spec.cols);
  }
  if (spec.rows % unit != 0) {
    return why + "rows (out features, packed in qzeros) must be a multiple " +
           "of " + std::to_string(unit) + ", got " + std::to_string(spec.rows);
  }
  return "";
}

GptqLayout gptqLayout(const QuantSpec &spec) {
  int64_t groups = groupCount(spec);
  int64_t weightWords = spec.cols * spec.bits / 32;
  int64_t zeroWords = spec.rows * spec.bits / 32;
  GptqLayout layout;
  layout.qweight = {0,
                    static_cast<uint64_t>(weightWords * spec.rows) * 4,
                    "I32",
                    {weightWords, spec.rows}};
  layout.qzeros = {layout.qweight.bytes,
                   static_cast<uint64_t>(groups * zeroWords) * 4,
                   "I32",
                   {groups, zeroWords}};
  layout.scales = {layout.qzeros.offset + layout.qzeros.bytes,
                   static_cast<uint64_t>(groups * spec.rows) * 2,
                   "F16",
                   {groups, spec.rows}};
  layout.gIdx = {layout.scales.offset + layout.scales.bytes,
                 static_cast<uint64_t>(spec.cols) * 4,
                 "I32",
                 {spec.cols}};
  return layout;
}

uint64_t gptqStorageBytes(const QuantSpec &spec) {
  GptqLayout layout = gptqLayout(spec);
  return layout.gIdx.offset + layout.gIdx.bytes;
}

std::string checkGptqStorage(const QuantSpec &spec, const uint8_t *storage) {
  const uint8_t *gIdx = storage + gptqLayout(spec).gIdx.offset;
  int64_t groups = groupCount(spec);
  for (int64_t c = 0; c < spec.cols; ++c) {
    int32_t g = static_cast<int32_t>(loadWord(gIdx, c));
    if (g < 0 || g >= groups) {
      return "g_idx[" + std::to_string(c) + "] is " + std::to_string(g) +
             ", outside [0, " + std::to_string(groups) + ")";
    }
  }
  return "";
}

uint32_t gptqCode(const QuantSpec &spec, const uint8_t *storage, int64_t r,
                  int64_t c) {
  return readField(storage + 4 * r, spec.rows, c, spec.bits);
}

int32_t gptqZero(const QuantSpec &spec, const uint8_t *storage, int64_t g,
                 int64_t r) {
  GptqLayout layout = gptqLayout(spec);
  const uint8_t *row =
      storage + layout.qzeros.offset + g * layout.qzeros.shape[1] * 4;
  return static_cast<int32_t>(readField(row, 1, r, spec.bits)) + 1;
}

void dequantizeGptqTile(const QuantSpec &spec, const uint8_t *storage,
                        int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        float *out, int64_t ld) {
  GptqLayout layout = gptqLayout(spec);
  const uint8_t *qzeros = storage + layout.qzeros.offset;
  const uint8_t *scales = storage + layout.scales.offset;
  const uint8_t *gIdx = storage + layout.gIdx.offset;
  int64_t zeroRowBytes = layout.qzeros.shape[1] * 4;
  for (int64_t r = r0; r < r1; ++r) {
    float *outRow = out + (r - r0) * ld;
    // Consecutive columns mostly share a group (always, without act-order):
    // decode its scale and zero once per run.
    int64_t group = -1;
    float scale = 0.0f;
    int32_t zero = 0;
    for (int64_t c = c0; c < c1; ++c) {
      int64_t g = static_cast<int32_t>(loadWord(gIdx, c));
      if (g != group) {
        group = g;
        uint16_t half;
        std::memcpy(&half, scales + 2 * (g * spec.rows + r), 2);
        scale = fp16ToFloat(half);
        zero = static_cast<int32_t>(
                   readField(qzeros + g * zeroRowBytes, 1, r, spec.bits)) +
               1;
      }
      int32_t code = static_cast<int32_t>(
          readField(storage + 4 * r, spec.rows, c, spec.bits));
      outRow[c - c0] = scale * static_cast<float>(code - zero);
    }
  }
}

std::string packGptq(const QuantSpec &spec, const uint8_t *codes,
                     const float *scales, const int32_t *zeros,
                     const int32_t *gIdx, uint8_t *storage) {
  if (std::string error = checkGptqSpec(spec); !error.empty()) {
    return error;
  }
  int64_t rows = spec.rows;
  int64_t groups = groupCount(spec);
  int32_t levels = 1 << spec.bits;
  for (int64_t i = 0; i < rows * spec.cols; ++i) {
    if (codes[i] >= levels) {
      return "gptq code of [" + std::to_string(i / spec.cols) + ", " +
             std::to_string(i % spec.cols) + "] is " +
             std::to_string(codes[i]) + ", above " + std::to_string(levels - 1);
    }
  }
  for (int64_t i = 0; i < groups * rows; ++i) {
    if (zeros[i] < 1 || zeros[i] > levels) {
      return "gptq zero point of group " + std::to_string(i / rows) + ", row " +
             std::to_string(i % rows) + " is " + std::to_string(zeros[i]) +
             ", outside [1, " + std::to_string(levels) +
             "] (v1 checkpoints store zero - 1)";
    }
    if (!std::isfinite(fp16ToFloat(floatToFp16(scales[i])))) {
      return "gptq scale of group " + std::to_string(i / rows) + ", row " +
             std::to_string(i % rows) + " is not a finite fp16 number";
    }
  }
  for (int64_t c = 0; c < spec.cols; ++c) {
    if (gIdx[c] < 0 || gIdx[c] >= groups) {
      return "g_idx[" + std::to_string(c) + "] is " + std::to_string(gIdx[c]) +
             ", outside [0, " + std::to_string(groups) + ")";
    }
  }

  GptqLayout layout = gptqLayout(spec);
  std::memset(storage, 0, gptqStorageBytes(spec));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < spec.cols; ++c) {
      writeField(storage + 4 * r, rows, c, spec.bits, codes[r * spec.cols + c]);
    }
  }
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t *row =
        storage + layout.qzeros.offset + g * layout.qzeros.shape[1] * 4;
    for (int64_t r = 0; r < rows; ++r) {
      writeField(row, 1, r, spec.bits,
                 static_cast<uint32_t>(zeros[g * rows + r] - 1));
      uint16_t half = floatToFp16(scales[g * rows + r]);
      std::memcpy(storage + layout.scales.offset + 2 * (g * rows + r), &half,
                  2);
    }
  }
  std::memcpy(storage + layout.gIdx.offset, gIdx, layout.gIdx.bytes);
  return "";
}

} // namespace tailor::quant
