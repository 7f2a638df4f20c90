//===- Safetensors.cpp - reading and writing .safetensors files -----------===//

#include "runtime/train/Safetensors.h"

#include "runtime/train/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tailor::train {

using nlohmann::json;

/// The reference reader refuses headers over 100 MB: such a file is an
/// attack or a mistake, and parsing it would take the machine's memory.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

size_t safetensorsDTypeSize(std::string_view dtype) {
  static const std::pair<std::string_view, size_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  for (const auto &[name, size] : kSizes) {
    if (name == dtype) {
      return size;
    }
  }
  return 0;
}

uint64_t SafetensorsTensor::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) {
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

static std::string jsonQuoted(const std::string &text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string &path,
                                                       std::string &error) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->displayName = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return nullptr;
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    error = path + ": not a regular file";
    ::close(fd);
    return nullptr;
  }
  uint64_t size = static_cast<uint64_t>(info.st_size);
  const uint8_t *data = nullptr;
  if (size > 0) {
    void *mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      error = path + ": cannot map: " + std::strerror(errno);
      ::close(fd);
      return nullptr;
    }
    file->mapping = mapped;
    file->mappingSize = size;
    data = static_cast<const uint8_t *>(mapped);
  }
  ::close(fd);
  if (std::string problem = file->parse(data, size); !problem.empty()) {
    error = path + ": " + problem;
    return nullptr;
  }
  return file;
}

std::unique_ptr<SafetensorsFile>
SafetensorsFile::fromMemory(const void *data, size_t size,
                            const std::string &displayName,
                            std::string &error) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->displayName = displayName;
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  file->owned.assign(bytes, bytes + size);
  if (std::string problem = file->parse(file->owned.data(), size);
      !problem.empty()) {
    error = displayName + ": " + problem;
    return nullptr;
  }
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping) {
    ::munmap(mapping, mappingSize);
  }
}

const SafetensorsTensor *SafetensorsFile::find(const std::string &name) const {
  auto it = entries.find(name);
  return it == entries.end() ? nullptr : &it->second;
}

/// Reads a JSON number that must be a non-negative integer.
static bool readUnsigned(const json &value, uint64_t &out) {
  if (!value.is_number_unsigned()) {
    return false;
  }
  out = value.get<uint64_t>();
  return true;
}

std::string SafetensorsFile::parse(const uint8_t *data, uint64_t size) {
  if (size < 8) {
    return "file is " + std::to_string(size) +
           " bytes, too short for a safetensors header";
  }
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i) {
    headerSize = (headerSize << 8) | data[i];
  }
  if (headerSize > size - 8) {
    return "header length " + std::to_string(headerSize) +
           " exceeds the file size " + std::to_string(size);
  }
  if (headerSize > kMaxHeaderBytes) {
    return "header length " + std::to_string(headerSize) +
           " is over the 100 MB limit";
  }
  const char *header = reinterpret_cast<const char *>(data + 8);
  if (headerSize == 0 || header[0] != '{') {
    return "header is not a JSON object";
  }

  // nlohmann keeps the last of two equal keys; two tensors of one name are
  // a malformed file, so catch them while parsing.
  std::string duplicate;
  std::set<std::string> keys;
  json::parser_callback_t callback = [&](int depth, json::parse_event_t event,
                                         json &parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string &key = parsed.get_ref<const std::string &>();
      if (!keys.insert(key).second && duplicate.empty()) {
        duplicate = key;
      }
    }
    return true;
  };
  json root = json::parse(header, header + headerSize, callback,
                          /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return "header is not valid JSON";
  }
  if (!duplicate.empty()) {
    return "tensor " + jsonQuoted(duplicate) + " appears twice in the header";
  }

  uint64_t dataSize = size - 8 - headerSize;
  const uint8_t *dataStart = data + 8 + headerSize;
  struct Range {
    uint64_t begin, end;
    const std::string *name;
  };
  std::vector<Range> ranges;
  for (const auto &[key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) {
        return "__metadata__ is not an object";
      }
      for (const auto &[metaKey, metaValue] : value.items()) {
        if (!metaValue.is_string()) {
          return "__metadata__ value " + jsonQuoted(metaKey) +
                 " is not a string";
        }
        meta[metaKey] = metaValue.get<std::string>();
      }
      continue;
    }
    std::string where = "tensor " + jsonQuoted(key) + ": ";
    if (!value.is_object()) {
      return where + "entry is not an object";
    }
    auto dtype = value.find("dtype");
    auto shape = value.find("shape");
    auto offsets = value.find("data_offsets");
    if (dtype == value.end() || !dtype->is_string()) {
      return where + "missing or non-string dtype";
    }
    SafetensorsTensor tensor;
    tensor.dtype = dtype->get<std::string>();
    size_t elementSize = safetensorsDTypeSize(tensor.dtype);
    if (elementSize == 0) {
      return where + "unknown dtype " + jsonQuoted(tensor.dtype);
    }
    if (shape == value.end() || !shape->is_array()) {
      return where + "missing or non-array shape";
    }
    uint64_t expected = elementSize;
    for (const json &dim : *shape) {
      uint64_t extent = 0;
      if (!readUnsigned(dim, extent) || extent > INT64_MAX) {
        return where + "shape holds something other than a non-negative "
                       "integer";
      }
      if (__builtin_mul_overflow(expected, extent, &expected)) {
        return where + "shape is too large";
      }
      tensor.shape.push_back(static_cast<int64_t>(extent));
    }
    uint64_t begin = 0, end = 0;
    if (offsets == value.end() || !offsets->is_array() ||
        offsets->size() != 2 || !readUnsigned((*offsets)[0], begin) ||
        !readUnsigned((*offsets)[1], end)) {
      return where + "data_offsets must be two non-negative integers";
    }
    if (begin > end) {
      return where + "data_offsets [" + std::to_string(begin) + ", " +
             std::to_string(end) + "] end before they begin";
    }
    if (end - begin != expected) {
      return where + "data_offsets cover " + std::to_string(end - begin) +
             " bytes but shape x dtype is " + std::to_string(expected);
    }
    if (end > dataSize) {
      return where + "data_offsets end at " + std::to_string(end) +
             ", past the data section (" + std::to_string(dataSize) + " bytes)";
    }
    tensor.data = dataStart + begin;
    tensor.size = end - begin;
    tensor.offset = static_cast<uint64_t>(dataStart - data) + begin;
    auto [it, inserted] = entries.emplace(key, std::move(tensor));
    ranges.push_back({begin, end, &it->first});
  }

  // The tensors must tile the data section: no gaps, no overlaps, nothing
  // left over (the reference implementation's rule).
  std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t next = 0;
  for (const Range &range : ranges) {
    if (range.begin != next) {
      return "tensor " + jsonQuoted(*range.name) + ": data_offsets begin at " +
             std::to_string(range.begin) + ", expected " +
             std::to_string(next) +
             (range.begin < next ? " (overlaps the tensor before it)"
                                 : " (a gap before it)");
    }
    next = range.end;
  }
  if (next != dataSize) {
    return "the tensors cover " + std::to_string(next) +
           " bytes but the data section is " + std::to_string(dataSize) +
           " bytes";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

bool buildSafetensorsHeader(std::vector<SafetensorsInput> &tensors,
                            const std::map<std::string, std::string> &metadata,
                            std::string &header, std::string &error) {
  std::sort(tensors.begin(), tensors.end(),
            [](const SafetensorsInput &a, const SafetensorsInput &b) {
              return a.name < b.name;
            });
  std::string text = "{";
  if (!metadata.empty()) {
    text += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      text += (first ? "" : ",") + jsonQuoted(key) + ":" + jsonQuoted(value);
      first = false;
    }
    text += "}";
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsInput &tensor = tensors[i];
    if (tensor.name == "__metadata__" ||
        (i > 0 && tensors[i - 1].name == tensor.name)) {
      error =
          "tensor " + jsonQuoted(tensor.name) + ": duplicate or reserved name";
      return false;
    }
    size_t elementSize = safetensorsDTypeSize(tensor.dtype);
    if (elementSize == 0) {
      error = "tensor " + jsonQuoted(tensor.name) + ": unknown dtype " +
              jsonQuoted(tensor.dtype);
      return false;
    }
    uint64_t expected = elementSize;
    std::string shape = "[";
    for (size_t d = 0; d < tensor.shape.size(); ++d) {
      expected *= static_cast<uint64_t>(tensor.shape[d]);
      shape += (d ? "," : "") + std::to_string(tensor.shape[d]);
    }
    shape += "]";
    if (tensor.transposed && tensor.shape.size() != 2) {
      error = "tensor " + jsonQuoted(tensor.name) +
              ": only 2-D tensors can be written transposed";
      return false;
    }
    if (expected != tensor.size) {
      error = "tensor " + jsonQuoted(tensor.name) + ": " +
              std::to_string(tensor.size) + " bytes for a shape of " +
              std::to_string(expected);
      return false;
    }
    text += (metadata.empty() && i == 0 ? "" : ",") + jsonQuoted(tensor.name) +
            ":{\"dtype\":\"" + tensor.dtype + "\",\"shape\":" + shape +
            ",\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + tensor.size) + "]}";
    offset += tensor.size;
  }
  text += "}";
  // Padding to 8 keeps every tensor of an 8-byte-aligned file at the
  // alignment its offsets suggest, so readers may map it in place.
  text.append((8 - text.size() % 8) % 8, ' ');
  header.clear();
  uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) {
    header.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  }
  header += text;
  return true;
}

bool writeSafetensors(const std::string &path,
                      std::vector<SafetensorsInput> tensors,
                      std::string &error) {
  std::string header;
  if (!buildSafetensorsHeader(tensors, {{"format", "pt"}}, header, error)) {
    error = path + ": " + error;
    return false;
  }
  std::unique_ptr<AtomicFile> file = AtomicFile::create(path, error);
  if (!file) {
    return false;
  }
  file->write(header);
  for (const SafetensorsInput &tensor : tensors) {
    if (!tensor.transposed) {
      file->write(tensor.data, tensor.size);
      continue;
    }
    // Out through a bounded buffer of file rows: never a second copy of a
    // whole (possibly multi-GiB) weight.
    uint64_t rows = static_cast<uint64_t>(tensor.shape[0]);
    uint64_t cols = static_cast<uint64_t>(tensor.shape[1]);
    size_t element = safetensorsDTypeSize(tensor.dtype);
    const uint8_t *in = static_cast<const uint8_t *>(tensor.data);
    uint64_t rowsPerChunk = std::max<uint64_t>(
        1, (1u << 20) / std::max<uint64_t>(1, cols * element));
    std::vector<uint8_t> chunk;
    for (uint64_t row = 0; row < rows; row += rowsPerChunk) {
      uint64_t count = std::min(rowsPerChunk, rows - row);
      chunk.resize(count * cols * element);
      for (uint64_t r = 0; r < count; ++r) {
        for (uint64_t c = 0; c < cols; ++c) {
          std::memcpy(&chunk[(r * cols + c) * element],
                      in + (c * rows + row + r) * element, element);
        }
      }
      file->write(chunk.data(), chunk.size());
    }
  }
  return file->commit(error);
}

//===----------------------------------------------------------------------===//
// Conversion
//===----------------------------------------------------------------------===//

static float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalize it, since every one is a normal float.
    int shift = 0;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ff;
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

bool convertToF32(const SafetensorsTensor &tensor, float *out) {
  uint64_t n = tensor.numel();
  // Tensors in a mapped file need not be aligned: read with memcpy.
  const uint8_t *in = tensor.data;
  if (tensor.dtype == "F32") {
    std::memcpy(out, in, n * 4);
  } else if (tensor.dtype == "F16" || tensor.dtype == "BF16") {
    bool brain = tensor.dtype == "BF16";
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, in + 2 * i, 2);
      if (brain) {
        uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&out[i], &bits, 4);
      } else {
        out[i] = halfToFloat(h);
      }
    }
  } else if (tensor.dtype == "F64") {
    for (uint64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, in + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
  } else {
    return false;
  }
  return true;
}

} // namespace tailor::train
