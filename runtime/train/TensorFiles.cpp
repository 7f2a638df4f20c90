//===- TensorFiles.cpp - tensor slots to and from files -------------------===//

#include "runtime/train/TensorFiles.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace tailor::train {

using runtime::DType;

uint64_t TensorSlot::bytes() const {
  uint64_t n = runtime::dtypeSize(dtype);
  for (int64_t d : shape) {
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

std::vector<int64_t> TensorSlot::fileShape() const {
  if (transposed && shape.size() == 2) {
    return {shape[1], shape[0]};
  }
  return shape;
}

namespace detail {

const char *safetensorsDType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F64:
    return "F64";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I64:
    return "I64";
  case DType::I32:
    return "I32";
  case DType::I16:
    return "I16";
  case DType::I8:
    return "I8";
  case DType::U8:
    return "U8";
  case DType::Bool:
    return "BOOL";
  }
  return "?";
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

std::vector<SafetensorsInput> inputsOf(const std::vector<TensorSlot> &slots,
                                       const std::string &prefix) {
  std::vector<SafetensorsInput> inputs;
  for (const TensorSlot &slot : slots) {
    inputs.push_back({prefix + slot.fileName(), safetensorsDType(slot.dtype),
                      slot.fileShape(), slot.data, slot.bytes(),
                      slot.transposed});
  }
  return inputs;
}

/// Checks that `file` holds exactly `slots` (names prefixed by `prefix`)
/// with their shapes, and their dtypes unless `toF32` allows conversion.
bool checkTensors(const SafetensorsFile &file,
                  const std::vector<TensorSlot> &slots,
                  const std::string &prefix, bool toF32, std::string &error) {
  std::set<std::string> expected;
  for (const TensorSlot &slot : slots) {
    std::string name = prefix + slot.fileName();
    expected.insert(name);
    const SafetensorsTensor *tensor = file.find(name);
    if (!tensor) {
      error = file.name() + ": missing tensor '" + name + "'";
      return false;
    }
    if (tensor->shape != slot.fileShape()) {
      error = file.name() + ": tensor '" + name + "' has shape " +
              formatShape(tensor->shape) + ", expected " +
              formatShape(slot.fileShape());
      return false;
    }
    bool convertible = toF32 && slot.dtype == DType::F32 &&
                       (tensor->dtype == "F16" || tensor->dtype == "BF16" ||
                        tensor->dtype == "F64");
    if (tensor->dtype != safetensorsDType(slot.dtype) && !convertible) {
      error = file.name() + ": tensor '" + name + "' is " + tensor->dtype +
              ", expected " + safetensorsDType(slot.dtype);
      return false;
    }
  }
  for (const auto &[name, tensor] : file.tensors()) {
    if (!expected.count(name)) {
      error = file.name() + ": tensor '" + name +
              "' has no counterpart in the plan";
      return false;
    }
  }
  return true;
}

void copyTensors(const SafetensorsFile &file,
                 const std::vector<TensorSlot> &slots,
                 const std::string &prefix) {
  for (const TensorSlot &slot : slots) {
    const SafetensorsTensor *tensor = file.find(prefix + slot.fileName());
    if (slot.transposed) {
      // File [rows, cols] into the plan's [cols, rows]; dtypes match here
      // (only adapters, never transposed, convert).
      uint64_t rows = static_cast<uint64_t>(tensor->shape[0]);
      uint64_t cols = static_cast<uint64_t>(tensor->shape[1]);
      size_t element = runtime::dtypeSize(slot.dtype);
      auto *out = static_cast<uint8_t *>(slot.data);
      for (uint64_t r = 0; r < rows; ++r) {
        for (uint64_t c = 0; c < cols; ++c) {
          std::memcpy(out + (c * rows + r) * element,
                      tensor->data + (r * cols + c) * element, element);
        }
      }
    } else if (tensor->dtype == safetensorsDType(slot.dtype)) {
      std::memcpy(slot.data, tensor->data, tensor->size);
    } else {
      convertToF32(*tensor, static_cast<float *>(slot.data));
    }
  }
}

bool readTextFile(const std::string &path, std::string &text,
                  std::string &error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::stringstream buffer;
  buffer << file.rdbuf();
  if (file.bad()) {
    error = path + ": read error";
    return false;
  }
  text = buffer.str();
  return true;
}

} // namespace detail
} // namespace tailor::train
