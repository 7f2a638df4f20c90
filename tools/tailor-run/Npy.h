//===- Npy.h - NumPy .npy files: read, write, convert -----------*- C++ -*-===//
//
// The .npy format (numpy.lib.format): a magic string, a version, a header
// that is a Python dict literal {'descr': ..., 'fortran_order': ...,
// 'shape': (...)}, then the raw array. We read versions 1.0, 2.0 and 3.0 and
// write 1.0, as NumPy does. Only little-endian, C-order, plain numeric dtypes
// are supported; anything else is rejected with a message naming the file.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TOOLS_TAILOR_RUN_NPY_H
#define TAILOR_TOOLS_TAILOR_RUN_NPY_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tailor {

/// The element types a .npy file may hold here.
enum class NpyDType { F32, F64, F16, I64, I32, I16, I8, U8, Bool };

/// The NumPy descr string ("<f4", "|b1").
const char *npyDescr(NpyDType dtype);
/// The NumPy dtype name ("float32", "bool").
const char *npyDTypeName(NpyDType dtype);
/// Bytes per element.
size_t npyDTypeSize(NpyDType dtype);

/// The most dimensions a file may have (NumPy 2's limit).
constexpr int kNpyMaxRank = 64;

/// A dense, C-order array: little-endian elements in `data`.
struct NpyArray {
  NpyDType dtype = NpyDType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  /// The product of the shape (1 for a scalar).
  int64_t numElements() const;
  /// An array of `shape` filled with zeros.
  static NpyArray zeros(NpyDType dtype, std::vector<int64_t> shape);
};

/// Parses a .npy image held in memory. On failure returns false and sets
/// `error` to a message that starts with `name` (the file's path).
bool parseNpy(const uint8_t *bytes, size_t size, const std::string &name,
              NpyArray &array, std::string &error);

/// Reads the .npy file at `path` (see parseNpy).
bool readNpy(const std::string &path, NpyArray &array, std::string &error);

/// The bytes of `array` as a version 1.0 .npy file.
std::vector<uint8_t> serializeNpy(const NpyArray &array);

/// Writes `array` to `path` atomically: into a temporary file in the same
/// folder, then renamed over `path`, so a failure leaves any existing file
/// untouched and never a partial one.
bool writeNpy(const std::string &path, const NpyArray &array,
              std::string &error);

/// Converts `in` to `dtype`: between integer types (each value range-checked)
/// and between float types (finite values must stay finite; NaN and infinity
/// carry over). Same-type conversion copies. Bool converts only to bool. On a
/// value out of range, returns false and `error` names its flat index.
bool convertNpy(const NpyArray &in, NpyDType dtype, NpyArray &out,
                std::string &error);

/// IEEE binary16 to float (exact).
float halfToFloat(uint16_t half);
/// A float or double to IEEE binary16, rounding to nearest even (overflow
/// gives infinity).
uint16_t floatToHalf(double value);

/// bfloat16 (the top half of a float32), which NumPy lacks: a plan's bfloat16
/// inputs and outputs travel as float32 files.
uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(uint16_t value);

/// Formats a shape as "[2, 3]" ("[]" for a scalar).
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace tailor

#endif // TAILOR_TOOLS_TAILOR_RUN_NPY_H
