//===- NpyConvert.cpp - element type conversions for .npy arrays ----------===//
//
// tailor-run feeds a plan the dtype it declares; a file of a wider or narrower
// type of the same kind (int64 for int32, float64 for float32) is converted
// here, with every value range-checked rather than silently wrapped.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor-run/Npy.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "NpyConvert.cpp assumes a little-endian host"
#endif

namespace tailor {

float halfToFloat(uint16_t half) {
  uint32_t sign = uint32_t(half & 0x8000) << 16;
  uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  }
  uint32_t bits = exponent == 31
                      ? sign | 0x7f800000u | (mantissa << 13)
                      : sign | ((exponent + 112) << 23) | (mantissa << 13);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Rounds from double directly (a float32 step could double-round ties).
uint16_t floatToHalf(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 48) & 0x8000);
  uint64_t abs = bits & 0x7fffffffffffffffull;
  if (abs >= 0x7ff0000000000000ull) {
    // Infinity, or NaN (kept quiet, with the top payload bits).
    return abs == 0x7ff0000000000000ull
               ? sign | 0x7c00
               : sign | 0x7e00 | static_cast<uint16_t>((abs >> 42) & 0x3ff);
  }
  double magnitude = std::fabs(value);
  if (magnitude >= 65520.0) {
    return sign | 0x7c00;
  }
  if (magnitude < 0x1p-14) {
    // Subnormal in half: count 2^-24 units; 1024 units is the smallest normal.
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 0x1p24));
  }
  int exponent = static_cast<int>(abs >> 52) - 1023 + 15;
  uint64_t mantissa = abs & 0xfffffffffffffull;
  uint32_t half = (uint32_t(exponent) << 10) | uint32_t(mantissa >> 42);
  uint64_t rest = mantissa & ((1ull << 42) - 1);
  // Round to nearest even; a carry into the exponent is still correct.
  if (rest > (1ull << 41) || (rest == (1ull << 41) && (half & 1))) {
    ++half;
  }
  return sign | static_cast<uint16_t>(half);
}

uint16_t floatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40); // quiet NaN
  }
  // Round to nearest even on the 16 dropped bits; a carry is still correct.
  bits += 0x7fffu + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float bfloat16ToFloat(uint16_t value) {
  uint32_t bits = uint32_t(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

namespace {

bool isInteger(NpyDType t) {
  return t == NpyDType::I64 || t == NpyDType::I32 || t == NpyDType::I16 ||
         t == NpyDType::I8 || t == NpyDType::U8;
}
bool isFloat(NpyDType t) {
  return t == NpyDType::F64 || t == NpyDType::F32 || t == NpyDType::F16;
}

template <typename T> T load(const uint8_t *p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}
template <typename T> void store(uint8_t *p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

int64_t loadInt(NpyDType t, const uint8_t *p) {
  switch (t) {
  case NpyDType::I64:
    return load<int64_t>(p);
  case NpyDType::I32:
    return load<int32_t>(p);
  case NpyDType::I16:
    return load<int16_t>(p);
  case NpyDType::I8:
    return load<int8_t>(p);
  default:
    return load<uint8_t>(p);
  }
}

double loadFloat(NpyDType t, const uint8_t *p) {
  switch (t) {
  case NpyDType::F64:
    return load<double>(p);
  case NpyDType::F32:
    return load<float>(p);
  default:
    return halfToFloat(load<uint16_t>(p));
  }
}

// Stores `v` as a T if it fits.
template <typename T> bool storeInt(uint8_t *p, int64_t v) {
  if (v < int64_t(std::numeric_limits<T>::min()) ||
      v > int64_t(std::numeric_limits<T>::max())) {
    return false;
  }
  store<T>(p, static_cast<T>(v));
  return true;
}

bool storeInt(NpyDType t, uint8_t *p, int64_t v) {
  switch (t) {
  case NpyDType::I64:
    return storeInt<int64_t>(p, v);
  case NpyDType::I32:
    return storeInt<int32_t>(p, v);
  case NpyDType::I16:
    return storeInt<int16_t>(p, v);
  case NpyDType::I8:
    return storeInt<int8_t>(p, v);
  default:
    return storeInt<uint8_t>(p, v);
  }
}

// Stores `v` if it is NaN, infinite or within the finite range of `t`.
bool storeFloat(NpyDType t, uint8_t *p, double v) {
  double max = t == NpyDType::F32   ? std::numeric_limits<float>::max()
               : t == NpyDType::F16 ? 65504.0
                                    : std::numeric_limits<double>::max();
  if (std::isfinite(v) && std::fabs(v) > max) {
    return false;
  }
  if (t == NpyDType::F64) {
    store<double>(p, v);
  } else if (t == NpyDType::F32) {
    store<float>(p, static_cast<float>(v));
  } else {
    store<uint16_t>(p, floatToHalf(v));
  }
  return true;
}

} // namespace

bool convertNpy(const NpyArray &in, NpyDType dtype, NpyArray &out,
                std::string &error) {
  if (in.dtype == dtype) {
    out = in;
    return true;
  }
  bool ints = isInteger(in.dtype) && isInteger(dtype);
  bool floats = isFloat(in.dtype) && isFloat(dtype);
  if (!ints && !floats) {
    error = std::string("cannot convert ") + npyDTypeName(in.dtype) + " to " +
            npyDTypeName(dtype);
    return false;
  }
  NpyArray result = NpyArray::zeros(dtype, in.shape);
  size_t inSize = npyDTypeSize(in.dtype), outSize = npyDTypeSize(dtype);
  int64_t n = in.numElements();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *src = in.data.data() + i * inSize;
    uint8_t *dst = result.data.data() + i * outSize;
    std::string value;
    if (ints) {
      int64_t v = loadInt(in.dtype, src);
      if (storeInt(dtype, dst, v)) {
        continue;
      }
      value = std::to_string(v);
    } else {
      double v = loadFloat(in.dtype, src);
      if (storeFloat(dtype, dst, v)) {
        continue;
      }
      char buffer[32];
      std::snprintf(buffer, sizeof(buffer), "%.9g", v);
      value = buffer;
    }
    error = "value " + value + " at index " + std::to_string(i) +
            " is out of range for " + npyDTypeName(dtype);
    return false;
  }
  out = std::move(result);
  return true;
}

} // namespace tailor
