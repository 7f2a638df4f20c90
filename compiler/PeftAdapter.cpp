//===- PeftAdapter.cpp - compile a model with a trained PEFT adapter ------===//

#include "compiler/PeftAdapter.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Safetensors.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include "llvm/Support/Path.h"

using namespace llvm;

namespace tailor {

static Error fail(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

Expected<PeftAdapterConfig> readPeftAdapterConfig(StringRef dir) {
  train::PeftAdapterConfig read;
  std::string error;
  if (!train::readPeftAdapterConfig(dir.str(), read, error)) {
    return fail(error);
  }
  PeftAdapterConfig config;
  config.r = static_cast<int64_t>(read.r);
  config.alpha = read.alpha;
  config.useRslora = read.useRslora;
  config.targetModules = read.targetModules;
  for (int64_t layer : read.layers) {
    config.layers += (config.layers.empty() ? "" : ",") + std::to_string(layer);
  }
  if (config.targetModules.empty()) {
    return fail(dir + "/adapter_config.json: 'target_modules' names no module");
  }
  return config;
}

mlir::LogicalResult bindPeftAdapterWeights(mlir::ModuleOp module,
                                           StringRef dir) {
  SmallString<256> path(dir);
  sys::path::append(path, "adapter_model.safetensors");
  // The reader validates the header and maps the file; no tensor byte is
  // touched here: each adapter weight is bound by its offset.
  std::string error;
  std::unique_ptr<train::SafetensorsFile> file =
      train::SafetensorsFile::open(path.str().str(), error);
  if (!file) {
    return module.emitError() << error;
  }
  mlir::MLIRContext *context = module.getContext();
  int64_t bound = 0;
  for (tg::ParamOp param : module.getOps<tg::ParamOp>()) {
    StringRef name = param.getSymName();
    if (!name.ends_with(".lora_A.weight") && !name.ends_with(".lora_B.weight")) {
      continue;
    }
    std::string key = ("base_model.model." + name).str();
    const train::SafetensorsTensor *tensor = file->find(key);
    if (!tensor) {
      return module.emitError() << "'" << path << "' has no tensor '" << key
                                << "' that the adapter config asks for";
    }
    if (tensor->dtype != "F32") {
      return module.emitError() << "adapter tensor '" << key << "' is "
                                << tensor->dtype
                                << "; the CPU backend reads F32 adapters";
    }
    if (ArrayRef<int64_t>(tensor->shape) != param.getTensorType().getShape()) {
      return module.emitError()
             << "adapter tensor '" << key << "' has shape "
             << tg::formatShape(tensor->shape) << ", the model needs "
             << tg::formatShape(param.getTensorType().getShape());
    }
    param.setLocationAttr(tg::ExternalDataAttr::get(
        context, mlir::StringAttr::get(context, path), tensor->offset,
        tensor->size));
    param.removeInitAttr();
    param.setTrainable(false);
    ++bound;
  }
  if (bound == 0) {
    return module.emitError() << "no LoRA parameter to bind from '" << path
                              << "'";
  }
  return mlir::success();
}

} // namespace tailor
