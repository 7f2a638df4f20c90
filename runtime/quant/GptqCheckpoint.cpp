//===- GptqCheckpoint.cpp - GPTQ checkpoints in safetensors ---------------===//
//
// The tensors are Gptq.h's storage sections under AutoGPTQ's names, so
// writing is a safetensors write of four views per module and reading is a
// check of dtypes and shapes followed by plain copies (or, for the runtime,
// preads at the offsets found here). The settings file is the one place
// the shared bits, group size and act order live, so every module is
// checked against it: a checkpoint whose tensors disagree with its config
// would dequantize to garbage without any error.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/GptqCheckpoint.h"

#include "runtime/train/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

namespace tailor::quant {

using nlohmann::json;

namespace {

constexpr const char *kConfigFile = "quantize_config.json";
constexpr const char *kSuffixes[] = {".qweight", ".qzeros", ".scales",
                                     ".g_idx"};

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

std::string describe(const QuantSpec &spec) {
  return "bits " + std::to_string(spec.bits) + ", group size " +
         std::to_string(spec.groupSize) + ", " + std::to_string(spec.rows) +
         " x " + std::to_string(spec.cols) + " weight";
}

/// The sections of `layout` in the order of kSuffixes.
const GptqSection *sectionsOf(const GptqLayout &layout, int index) {
  const GptqSection *sections[] = {&layout.qweight, &layout.qzeros,
                                   &layout.scales, &layout.gIdx};
  return sections[index];
}

GptqTensorLocation *locationsOf(GptqCheckpointModule &module, int index) {
  GptqTensorLocation *locations[] = {&module.qweight, &module.qzeros,
                                     &module.scales, &module.gIdx};
  return locations[index];
}

/// A missing file is `found = false` without an error; an unreadable or
/// malformed one is an error.
std::string readJsonObject(const std::string &path, json &out, bool &found) {
  std::ifstream in(path, std::ios::binary);
  found = in.is_open();
  if (!found) {
    return "";
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return path + ": cannot read";
  }
  out = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded() || !out.is_object()) {
    return path + ": not a JSON object";
  }
  return "";
}

std::string parseConfig(const json &config, const std::string &where,
                        GptqOptions &options) {
  auto integer = [&](const char *key, int &out) -> std::string {
    auto it = config.find(key);
    if (it == config.end() || !it->is_number_integer()) {
      return where + ": \"" + key + "\" is missing or not an integer";
    }
    out = it->get<int>();
    return "";
  };
  auto boolean = [&](const char *key, bool &out) -> std::string {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) {
      return "";
    }
    if (!it->is_boolean()) {
      return where + ": \"" + key + "\" is not a boolean";
    }
    out = it->get<bool>();
    return "";
  };
  auto mustBeGptq = [&](const char *key) -> std::string {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) {
      return "";
    }
    if (!it->is_string() || it->get<std::string>() != "gptq") {
      return where + ": \"" + key + "\" is " + it->dump() +
             "; tailor reads \"gptq\" checkpoints (the v1 format)";
    }
    return "";
  };
  options = GptqOptions();
  for (const std::string &error :
       {integer("bits", options.bits), integer("group_size", options.groupSize),
        boolean("desc_act", options.actOrder),
        boolean("sym", options.symmetric),
        boolean("true_sequential", options.trueSequential),
        mustBeGptq("quant_method"), mustBeGptq("checkpoint_format")}) {
    if (!error.empty()) {
      return error;
    }
  }
  bool marlin = false;
  if (std::string error = boolean("is_marlin_format", marlin);
      !error.empty() || marlin) {
    return error.empty() ? where + ": marlin-format checkpoints are not "
                                   "supported (tailor reads the v1 format)"
                         : error;
  }
  if (auto it = config.find("damp_percent");
      it != config.end() && it->is_number()) {
    options.dampPercent = it->get<double>();
  }
  if (options.bits != 2 && options.bits != 3 && options.bits != 4 &&
      options.bits != 8) {
    return where + ": \"bits\" must be 2, 3, 4 or 8, got " +
           std::to_string(options.bits);
  }
  if (options.groupSize != -1 && options.groupSize < 1) {
    return where + ": \"group_size\" must be -1 or at least 1, got " +
           std::to_string(options.groupSize);
  }
  return "";
}

} // namespace

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

std::string
writeGptqCheckpoint(const std::string &path,
                    const std::vector<GptqModuleTensors> &modules,
                    const GptqOptions &options,
                    std::vector<train::SafetensorsInput> extraTensors) {
  std::vector<train::SafetensorsInput> inputs;
  for (const GptqModuleTensors &module : modules) {
    std::string where = path + ": module '" + module.name + "'";
    if (std::string error = checkGptqSpec(module.spec); !error.empty()) {
      return where + ": " + error;
    }
    if (module.spec.bits != options.bits ||
        module.spec.groupSize != options.groupSize ||
        module.spec.actOrder != options.actOrder) {
      return where + " (" + describe(module.spec) + ", act order " +
             (module.spec.actOrder ? "on" : "off") +
             ") disagrees with the checkpoint's settings (bits " +
             std::to_string(options.bits) + ", group size " +
             std::to_string(options.groupSize) + ", act order " +
             (options.actOrder ? "on" : "off") + ")";
    }
    if (std::string error = checkGptqStorage(module.spec, module.storage);
        !error.empty()) {
      return where + ": " + error;
    }
    GptqLayout layout = gptqLayout(module.spec);
    for (int i = 0; i < 4; ++i) {
      const GptqSection *section = sectionsOf(layout, i);
      train::SafetensorsInput input;
      input.name = module.name + kSuffixes[i];
      input.dtype = section->dtype;
      input.shape = section->shape;
      input.data = module.storage + section->offset;
      input.size = section->bytes;
      inputs.push_back(std::move(input));
    }
  }
  for (train::SafetensorsInput &input : extraTensors) {
    inputs.push_back(std::move(input));
  }
  std::string error;
  if (!train::writeSafetensors(path, std::move(inputs), error)) {
    return error;
  }

  // AutoGPTQ's BaseQuantizeConfig.to_dict, in its key order; loaders find
  // the tensors by model_file_base_name + ".safetensors".
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 12 && endsWith(base, ".safetensors")) {
    base.resize(base.size() - 12);
  }
  nlohmann::ordered_json config;
  config["bits"] = options.bits;
  config["group_size"] = options.groupSize;
  config["damp_percent"] = options.dampPercent;
  config["desc_act"] = options.actOrder;
  config["static_groups"] = false;
  config["sym"] = options.symmetric;
  config["true_sequential"] = options.trueSequential;
  config["model_name_or_path"] = nullptr;
  config["model_file_base_name"] = base;
  config["quant_method"] = "gptq";
  config["checkpoint_format"] = "gptq";
  std::string configPath = train::parentDirectory(path) + "/" + kConfigFile;
  if (!train::writeFileAtomically(
          configPath,
          config.dump(2, ' ', false, json::error_handler_t::replace) + "\n",
          error)) {
    return error;
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

std::string readGptqConfig(const std::string &dir, GptqOptions &options) {
  std::string path = dir + "/" + kConfigFile;
  json config;
  bool found = false;
  if (std::string error = readJsonObject(path, config, found);
      !error.empty() || found) {
    return error.empty() ? parseConfig(config, path, options) : error;
  }
  // transformers keeps the settings in config.json instead.
  path = dir + "/config.json";
  if (std::string error = readJsonObject(path, config, found); !error.empty()) {
    return error;
  }
  auto it = found ? config.find("quantization_config") : config.end();
  if (!found || it == config.end() || !it->is_object()) {
    return dir + ": no " + kConfigFile +
           ", nor a \"quantization_config\" in config.json";
  }
  return parseConfig(*it, path + " \"quantization_config\"", options);
}

std::unique_ptr<GptqCheckpoint> GptqCheckpoint::open(const std::string &path,
                                                     std::string &error) {
  std::unique_ptr<GptqCheckpoint> checkpoint(new GptqCheckpoint());
  error = readGptqConfig(train::parentDirectory(path), checkpoint->settings);
  if (!error.empty()) {
    return nullptr;
  }
  checkpoint->tensors = train::SafetensorsFile::open(path, error);
  if (!checkpoint->tensors) {
    return nullptr;
  }
  const GptqOptions &settings = checkpoint->settings;
  for (const auto &[name, qweight] : checkpoint->tensors->tensors()) {
    if (!endsWith(name, kSuffixes[0])) {
      continue;
    }
    GptqCheckpointModule module;
    module.name = name.substr(0, name.size() - std::strlen(kSuffixes[0]));
    auto fail = [&](const std::string &tensor, const std::string &problem) {
      error = path + ": tensor '" + tensor + "' " + problem;
      return nullptr;
    };
    if (qweight.dtype != "I32" || qweight.shape.size() != 2 ||
        qweight.shape[0] * 32 % settings.bits != 0) {
      return fail(name, "is " + qweight.dtype + " " +
                            formatShape(qweight.shape) +
                            ", expected I32 [cols * " +
                            std::to_string(settings.bits) + " / 32, rows]");
    }
    module.spec.scheme = Scheme::GPTQ;
    module.spec.rows = qweight.shape[1];
    module.spec.cols = qweight.shape[0] * 32 / settings.bits;
    module.spec.bits = settings.bits;
    module.spec.groupSize = settings.groupSize;
    module.spec.actOrder = settings.actOrder;
    if (std::string problem = checkGptqSpec(module.spec); !problem.empty()) {
      return fail(name, "holds a " + std::to_string(module.spec.rows) + " x " +
                            std::to_string(module.spec.cols) +
                            " weight that gptq cannot store: " + problem);
    }
    GptqLayout layout = gptqLayout(module.spec);
    for (int i = 0; i < 4; ++i) {
      std::string tensorName = module.name + kSuffixes[i];
      const train::SafetensorsTensor *tensor =
          checkpoint->tensors->find(tensorName);
      if (!tensor) {
        return fail(tensorName,
                    "is missing (module '" + module.name + "' has a qweight)");
      }
      const GptqSection *section = sectionsOf(layout, i);
      if (tensor->dtype != section->dtype || tensor->shape != section->shape) {
        return fail(tensorName, "is " + tensor->dtype + " " +
                                    formatShape(tensor->shape) + ", expected " +
                                    section->dtype + " " +
                                    formatShape(section->shape) + " (" +
                                    describe(module.spec) + ")");
      }
      GptqTensorLocation *location = locationsOf(module, i);
      location->name = tensorName;
      location->dtype = tensor->dtype;
      location->shape = tensor->shape;
      location->fileOffset = tensor->offset;
      location->bytes = tensor->size;
      location->storageOffset = section->offset;
    }
    checkpoint->entries.push_back(std::move(module));
  }
  return checkpoint;
}

const GptqCheckpointModule *
GptqCheckpoint::find(const std::string &name) const {
  for (const GptqCheckpointModule &module : entries) {
    if (module.name == name) {
      return &module;
    }
  }
  return nullptr;
}

std::string GptqCheckpoint::readStorage(const GptqCheckpointModule &module,
                                        uint8_t *storage) const {
  for (const GptqTensorLocation *location :
       {&module.qweight, &module.qzeros, &module.scales, &module.gIdx}) {
    const train::SafetensorsTensor *tensor = tensors->find(location->name);
    std::memcpy(storage + location->storageOffset, tensor->data,
                location->bytes);
  }
  if (std::string error = checkGptqStorage(module.spec, storage);
      !error.empty()) {
    return tensors->name() + ": tensor '" + module.gIdx.name + "': " + error;
  }
  return "";
}

} // namespace tailor::quant
