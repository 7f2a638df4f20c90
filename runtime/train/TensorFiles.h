//===- TensorFiles.h - tensor slots to and from files -----------*- C++ -*-===//
//
// What checkpoints and PEFT adapters share: the file names, the safetensors
// name of each dtype, and the checked copy between a file's tensors and
// session memory. Internal to the trainer library.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TRAIN_TENSORFILES_H
#define TAILOR_RUNTIME_TRAIN_TENSORFILES_H

#include "runtime/train/Checkpoint.h"
#include "runtime/train/Safetensors.h"

#include <string>
#include <vector>

namespace tailor::train::detail {

constexpr const char *kAdapterConfigFile = "adapter_config.json";
constexpr const char *kAdapterModelFile = "adapter_model.safetensors";
/// PEFT's prefix for adapter weights in adapter_model.safetensors.
constexpr const char *kPeftPrefix = "base_model.model.";

/// "F32", "BF16", ... for a plan dtype.
const char *safetensorsDType(runtime::DType dtype);
/// "[2, 4]".
std::string formatShape(const std::vector<int64_t> &shape);

/// `slots` as safetensors inputs named `prefix` + their file names.
std::vector<SafetensorsInput> inputsOf(const std::vector<TensorSlot> &slots,
                                       const std::string &prefix);

/// Checks that `file` holds exactly `slots` (named `prefix` + file name)
/// with their file shapes, and their dtypes unless `toF32` lets F16, BF16
/// and F64 convert into f32 slots. Errors name the file and tensor.
bool checkTensors(const SafetensorsFile &file,
                  const std::vector<TensorSlot> &slots,
                  const std::string &prefix, bool toF32, std::string &error);

/// Copies (transposing and converting as needed) after checkTensors passed.
void copyTensors(const SafetensorsFile &file,
                 const std::vector<TensorSlot> &slots,
                 const std::string &prefix);

/// A whole text file; false and an error naming it if it cannot be read.
bool readTextFile(const std::string &path, std::string &text,
                  std::string &error);

} // namespace tailor::train::detail

#endif // TAILOR_RUNTIME_TRAIN_TENSORFILES_H
