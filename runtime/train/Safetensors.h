//===- Safetensors.h - reading and writing .safetensors files --*- C++ -*-===//
//
// The format (FORMATS.md): an 8-byte little-endian header length N, N bytes
// of JSON naming each tensor's dtype, shape and [begin, end) byte range in
// the data section that follows, and an optional "__metadata__" string map.
// The reader rejects every file the reference implementation rejects --
// header longer than the file, bad JSON, unknown dtypes, a byte range that
// disagrees with shape x dtype, gaps or overlaps between tensors, data left
// over -- because adapters and checkpoints come from other programs and a
// silently misread tensor trains garbage.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TRAIN_SAFETENSORS_H
#define TAILOR_RUNTIME_TRAIN_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tailor::train {

/// Bytes per element of a safetensors dtype ("F32", "BF16", ...), or 0 for
/// a name the reader does not know.
size_t safetensorsDTypeSize(std::string_view dtype);

/// One tensor of a file read by SafetensorsFile: its bytes stay in the file
/// object's memory.
struct SafetensorsTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  uint64_t size = 0;
  /// Where the bytes start in the file (header included), so a plan can
  /// bind the tensor by offset like any other weight.
  uint64_t offset = 0;

  /// The number of elements (product of the shape).
  uint64_t numel() const;
};

/// A validated safetensors file, memory-mapped (checkpoints of full
/// fine-tuning can be many GiB; nothing is copied until a caller does).
class SafetensorsFile {
public:
  /// Maps and validates `path`; null and an error naming the file (and the
  /// tensor, where one is at fault) otherwise.
  static std::unique_ptr<SafetensorsFile> open(const std::string &path,
                                               std::string &error);
  /// Validates a file's bytes held in memory (copied); `displayName` names it
  /// in errors.
  static std::unique_ptr<SafetensorsFile>
  fromMemory(const void *data, size_t size, const std::string &displayName,
             std::string &error);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::map<std::string, SafetensorsTensor> &tensors() const {
    return entries;
  }
  /// The tensor called `name`, or null.
  const SafetensorsTensor *find(const std::string &name) const;
  const std::map<std::string, std::string> &metadata() const { return meta; }
  const std::string &name() const { return displayName; }

private:
  SafetensorsFile() = default;
  std::string parse(const uint8_t *data, uint64_t size);

  std::string displayName;
  void *mapping = nullptr;
  size_t mappingSize = 0;
  std::vector<uint8_t> owned;
  std::map<std::string, SafetensorsTensor> entries;
  std::map<std::string, std::string> meta;
};

/// A tensor to write: `size` bytes at `data` (borrowed until the write
/// returns) holding `shape` elements of `dtype`.
struct SafetensorsInput {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  uint64_t size = 0;
  /// `data` holds the transpose of this 2-D tensor (a [shape[1], shape[0]]
  /// matrix); the writer transposes it on the way out.
  bool transposed = false;
};

/// The header (length prefix included) for `tensors` laid out in sorted name
/// order, padded with spaces to a multiple of 8; `metadata` becomes
/// "__metadata__" when not empty. Errors (a size that disagrees with the
/// shape, an unknown dtype, a duplicate name) name the tensor.
bool buildSafetensorsHeader(std::vector<SafetensorsInput> &tensors,
                            const std::map<std::string, std::string> &metadata,
                            std::string &header, std::string &error);

/// Writes `tensors` to `path` atomically, with metadata {"format": "pt"}
/// (what PyTorch-side loaders such as PEFT expect).
bool writeSafetensors(const std::string &path,
                      std::vector<SafetensorsInput> tensors,
                      std::string &error);

/// Converts one element type to f32: F32, F16, BF16 and F64 are accepted.
/// Returns false for any other dtype.
bool convertToF32(const SafetensorsTensor &tensor, float *out);

} // namespace tailor::train

#endif // TAILOR_RUNTIME_TRAIN_SAFETENSORS_H
