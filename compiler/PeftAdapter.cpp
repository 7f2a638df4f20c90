//===- PeftAdapter.cpp - compile a model with a trained PEFT adapter ------===//

#include "compiler/PeftAdapter.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace tailor {

static Error fail(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

static Expected<json::Value> readJson(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    return fail("cannot read '" + path + "': " + buffer.getError().message());
  }
  Expected<json::Value> value = json::parse((*buffer)->getBuffer());
  if (!value) {
    return fail("'" + path + "' is not valid JSON: " +
                toString(value.takeError()));
  }
  return value;
}

Expected<PeftAdapterConfig> readPeftAdapterConfig(StringRef dir) {
  SmallString<256> path(dir);
  sys::path::append(path, "adapter_config.json");
  Expected<json::Value> value = readJson(path);
  if (!value) {
    return value.takeError();
  }
  const json::Object *object = value->getAsObject();
  if (!object) {
    return fail("'" + path + "' must hold a JSON object");
  }
  PeftAdapterConfig config;
  if (auto type = object->getString("peft_type"); type && *type != "LORA") {
    return fail("'" + path + "': peft_type is '" + *type +
                "'; tailor reads LORA adapters");
  }
  std::optional<int64_t> r = object->getInteger("r");
  std::optional<double> alpha = object->getNumber("lora_alpha");
  if (!r || *r <= 0 || !alpha) {
    return fail("'" + path + "': expected a positive 'r' and a 'lora_alpha'");
  }
  config.r = *r;
  config.alpha = *alpha;
  config.useRslora = object->getBoolean("use_rslora").value_or(false);
  if (object->getBoolean("use_dora").value_or(false)) {
    return fail("'" + path + "': DoRA adapters (use_dora) are not supported");
  }
  const json::Value *targets = object->get("target_modules");
  if (targets && targets->getAsString()) {
    config.targetModules.push_back(targets->getAsString()->str());
  } else if (const json::Array *list = targets ? targets->getAsArray() : nullptr) {
    for (const json::Value &item : *list) {
      if (auto name = item.getAsString()) {
        config.targetModules.push_back(name->str());
      }
    }
  }
  if (config.targetModules.empty()) {
    return fail("'" + path + "': 'target_modules' names no module");
  }
  if (const json::Array *layers = object->getArray("layers_to_transform")) {
    for (const json::Value &layer : *layers) {
      if (auto index = layer.getAsInteger()) {
        config.layers += (config.layers.empty() ? "" : ",") + std::to_string(*index);
      }
    }
  } else if (auto layer = object->getInteger("layers_to_transform")) {
    config.layers = std::to_string(*layer);
  }
  return config;
}

mlir::LogicalResult bindPeftAdapterWeights(mlir::ModuleOp module,
                                           StringRef dir) {
  SmallString<256> path(dir);
  sys::path::append(path, "adapter_model.safetensors");
  auto reportError = [&](const Twine &message) {
    return module.emitError() << message;
  };
  auto header8 = MemoryBuffer::getFileSlice(path, 8, 0);
  if (!header8) {
    return reportError("cannot read '" + path + "': " +
                       header8.getError().message());
  }
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i) {
    headerBytes = (headerBytes << 8) |
                  static_cast<uint8_t>((*header8)->getBufferStart()[i]);
  }
  auto header = MemoryBuffer::getFileSlice(path, headerBytes, 8);
  if (!header || (*header)->getBufferSize() != headerBytes) {
    return reportError("'" + path + "' has a truncated safetensors header");
  }
  Expected<json::Value> value = json::parse((*header)->getBuffer());
  if (!value || !value->getAsObject()) {
    if (!value) {
      consumeError(value.takeError());
    }
    return reportError("'" + path + "' has a malformed safetensors header");
  }
  const json::Object &tensors = *value->getAsObject();
  mlir::MLIRContext *context = module.getContext();
  int64_t bound = 0;
  for (tg::ParamOp param : module.getOps<tg::ParamOp>()) {
    StringRef name = param.getSymName();
    if (!name.ends_with(".lora_A.weight") && !name.ends_with(".lora_B.weight")) {
      continue;
    }
    std::string key = ("base_model.model." + name).str();
    const json::Object *entry = tensors.getObject(key);
    if (!entry) {
      return reportError("'" + path + "' has no tensor '" + key +
                         "' that the adapter config asks for");
    }
    auto dtype = entry->getString("dtype");
    const json::Array *shape = entry->getArray("shape");
    const json::Array *offsets = entry->getArray("data_offsets");
    if (!dtype || *dtype != "F32") {
      return reportError("adapter tensor '" + key + "' is " +
                         (dtype ? *dtype : StringRef("untyped")) +
                         "; the CPU backend reads F32 adapters");
    }
    SmallVector<int64_t> dims;
    for (const json::Value &dim : shape ? *shape : json::Array()) {
      dims.push_back(dim.getAsInteger().value_or(-1));
    }
    if (ArrayRef<int64_t>(dims) != param.getTensorType().getShape()) {
      return reportError("adapter tensor '" + key + "' has shape " +
                         tg::formatShape(dims) + ", the model needs " +
                         tg::formatShape(param.getTensorType().getShape()));
    }
    std::optional<int64_t> begin = offsets && offsets->size() == 2
                                       ? (*offsets)[0].getAsInteger()
                                       : std::nullopt;
    std::optional<int64_t> end = offsets && offsets->size() == 2
                                     ? (*offsets)[1].getAsInteger()
                                     : std::nullopt;
    int64_t bytes = tg::byteSize(param.getTensorType());
    if (!begin || !end || *begin < 0 || *end - *begin != bytes) {
      return reportError("adapter tensor '" + key + "' has bad data_offsets");
    }
    param.setLocationAttr(tg::ExternalDataAttr::get(
        context, mlir::StringAttr::get(context, path),
        static_cast<uint64_t>(8 + headerBytes + *begin),
        static_cast<uint64_t>(bytes)));
    param.removeInitAttr();
    param.setTrainable(false);
    ++bound;
  }
  if (bound == 0) {
    return reportError("no LoRA parameter to bind from '" + path + "'");
  }
  return mlir::success();
}

} // namespace tailor
