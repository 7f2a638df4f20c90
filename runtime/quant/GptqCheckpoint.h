//===- GptqCheckpoint.h - GPTQ checkpoints, AutoGPTQ's way ------*- C++ -*-===//
//
// A GPTQ checkpoint, as AutoGPTQ, GPTQModel (format "gptq") and
// transformers/optimum write it: one safetensors file holding, for every
// quantized Linear module <m>,
//
//   <m>.qweight  I32 [cols * bits / 32, rows]
//   <m>.qzeros   I32 [groups, rows * bits / 32]
//   <m>.scales   F16 [groups, rows]
//   <m>.g_idx    I32 [cols]
//
// (Gptq.h's storage sections, byte for byte), any other tensors of the
// model as they are (embeddings, norms, biases), and beside it a
// quantize_config.json with the settings every module shares:
//
//   {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": false,
//    "static_groups": false, "sym": true, "true_sequential": true,
//    "model_name_or_path": null, "model_file_base_name": "model",
//    "quant_method": "gptq", "checkpoint_format": "gptq"}
//
// The reader takes those settings from quantize_config.json, or from the
// "quantization_config" of config.json where transformers put them. It
// reads one file (a sharded checkpoint is read shard by shard) and only
// checkpoint_format "gptq": GPTQModel's "gptq_v2" stores zero points
// without the minus one, and "marlin" reorders the codes.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_QUANT_GPTQCHECKPOINT_H
#define TAILOR_RUNTIME_QUANT_GPTQCHECKPOINT_H

#include "runtime/quant/Gptq.h"
#include "runtime/train/Safetensors.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tailor::quant {

/// One quantized module to write: the name prefix of its four tensors and
/// its gptq storage (gptqStorageBytes(spec) bytes, borrowed until the write
/// returns).
struct GptqModuleTensors {
  std::string name;
  QuantSpec spec;
  const uint8_t *storage = nullptr;
};

/// Writes `modules` (and `extraTensors`, the model's unquantized tensors)
/// to the safetensors file `path`, and quantize_config.json from `options`
/// in the same directory, each atomically (temporary file and rename).
/// Every module must pass checkGptqSpec and checkGptqStorage and share the
/// options' bits, group size and act order. Returns "" or an error naming
/// the file or module.
std::string
writeGptqCheckpoint(const std::string &path,
                    const std::vector<GptqModuleTensors> &modules,
                    const GptqOptions &options,
                    std::vector<train::SafetensorsInput> extraTensors = {});

/// Reads quantize_config.json in `dir`, or else config.json's
/// "quantization_config", into `options` (bits and group_size are required;
/// desc_act, damp_percent, sym and true_sequential take GptqOptions'
/// defaults when absent). "" or an error naming the file and key.
std::string readGptqConfig(const std::string &dir, GptqOptions &options);

/// Where one of a module's tensors lies: in the checkpoint file and in the
/// module's gptq storage.
struct GptqTensorLocation {
  /// The tensor's full name ("model.layers.0.mlp.up_proj.qweight").
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  /// Byte offset in the file (safetensors header included) and length.
  uint64_t fileOffset = 0;
  uint64_t bytes = 0;
  /// Byte offset of the same section in gptq storage (Gptq.h).
  uint64_t storageOffset = 0;
};

/// A quantized module found in a checkpoint, checked against its spec.
struct GptqCheckpointModule {
  std::string name;
  QuantSpec spec;
  GptqTensorLocation qweight;
  GptqTensorLocation qzeros;
  GptqTensorLocation scales;
  GptqTensorLocation gIdx;
};

/// An open GPTQ checkpoint: its settings, every module whose four tensors
/// have the dtypes and shapes the settings imply, and the mapped file.
class GptqCheckpoint {
public:
  /// Maps the safetensors file `path`, reads the settings beside it, and
  /// finds the modules (every `<m>.qweight`). Null and an error naming the
  /// file and tensor otherwise: a missing tensor of a module, a dtype or
  /// shape that disagrees with the settings.
  static std::unique_ptr<GptqCheckpoint> open(const std::string &path,
                                              std::string &error);

  const GptqOptions &options() const { return settings; }
  /// Modules in name order.
  const std::vector<GptqCheckpointModule> &modules() const { return entries; }
  /// The module whose tensors are named `name` + ".qweight", ..., or null.
  const GptqCheckpointModule *find(const std::string &name) const;
  const train::SafetensorsFile &file() const { return *tensors; }

  /// Copies `module`'s four tensors into `storage` (gptqStorageBytes of its
  /// spec) and checks its g_idx. A caller that reads the sections from the
  /// file by their locations must call checkGptqStorage itself.
  std::string readStorage(const GptqCheckpointModule &module,
                          uint8_t *storage) const;

private:
  GptqCheckpoint() = default;

  GptqOptions settings;
  std::vector<GptqCheckpointModule> entries;
  std::unique_ptr<train::SafetensorsFile> tensors;
};

} // namespace tailor::quant

#endif // TAILOR_RUNTIME_QUANT_GPTQCHECKPOINT_H
