//===- PeftAdapter.h - compile a model with a trained PEFT adapter -*- C++ -*-===//
//
// `tailor compile MODEL.onnx --adapter DIR` applies a PEFT LoRA adapter
// (adapter_config.json + adapter_model.safetensors, ../shared/FORMATS.md)
// to an inference plan: the config picks the layers and the scaling, and
// the adapter tensors are bound from the safetensors file by offset, like
// the model's own weights (only the header is read at compile time).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_PEFTADAPTER_H
#define TAILOR_COMPILER_PEFTADAPTER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace tailor {

/// The parts of adapter_config.json that shape the graph.
struct PeftAdapterConfig {
  int64_t r = 0;
  double alpha = 0;
  bool useRslora = false;
  std::vector<std::string> targetModules;
  std::string layers; // "0,1,3"; empty: all
};

/// Reads DIR/adapter_config.json; errors name the file and the key.
llvm::Expected<PeftAdapterConfig> readPeftAdapterConfig(llvm::StringRef dir);

/// Points every `<module>.lora_{A,B}.weight` parameter at its tensor in
/// DIR/adapter_model.safetensors (and freezes it); errors name the tensor.
mlir::LogicalResult bindPeftAdapterWeights(mlir::ModuleOp module,
                                           llvm::StringRef dir);

} // namespace tailor

#endif // TAILOR_COMPILER_PEFTADAPTER_H
