//===- Wire.h - ZeRO++'s wire formats by name ------------------*- C++ -*-===//
//
// ZeRO++ sends f32 chunks as symmetric integer blocks of kWireBlock
// elements: int8 (WireInt8.h; the weight gathers, qwZ, and by default the
// gradient reduce-scatters, qgZ) or int4 (WireInt4.h; qgZ only). This
// header names the formats (the `format` of tg.quantize_chunks and
// tg.dequantize_reduce, tailor-quantize-reductions' option, the recipe's
// zero_quantized_gradients_bits) and gives each one's bytes and codec, so
// the compiler and the kernels agree on sizes through one function.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_QUANT_WIRE_H
#define TAILOR_RUNTIME_QUANT_WIRE_H

#include "runtime/quant/WireInt4.h"
#include "runtime/quant/WireInt8.h"

#include <optional>
#include <string_view>

namespace tailor::quant {

enum class WireFormat { Int8, Int4 };

/// The format `name` spells ("int8" or "int4"); nullopt for anything else.
inline std::optional<WireFormat> wireFormatNamed(std::string_view name) {
  if (name == "int8") {
    return WireFormat::Int8;
  }
  if (name == "int4") {
    return WireFormat::Int4;
  }
  return std::nullopt;
}

/// The name of `format`, as wireFormatNamed reads it.
inline const char *wireFormatName(WireFormat format) {
  return format == WireFormat::Int4 ? "int4" : "int8";
}

/// The names of every format, for messages.
constexpr const char *kWireFormatNames = "int8 or int4";

/// Bytes of a chunk of `elements` (a multiple of kWireBlock) in `format`.
constexpr int64_t wireBytes(WireFormat format, int64_t elements) {
  return format == WireFormat::Int4 ? int4WireBytes(elements)
                                    : int8WireBytes(elements);
}

/// Encodes `elements` floats into `wire` (wireBytes(format, elements)).
inline void encodeWire(WireFormat format, const float *values,
                       int64_t elements, uint8_t *wire) {
  if (format == WireFormat::Int4) {
    encodeWireInt4(values, elements, wire);
  } else {
    encodeWireInt8(values, elements, wire);
  }
}

/// Adds the decoded values of a wire chunk in `format` to `sums`.
inline void accumulateWire(WireFormat format, const uint8_t *wire,
                           int64_t elements, float *sums) {
  if (format == WireFormat::Int4) {
    accumulateWireInt4(wire, elements, sums);
  } else {
    accumulateWireInt8(wire, elements, sums);
  }
}

} // namespace tailor::quant

#endif // TAILOR_RUNTIME_QUANT_WIRE_H
