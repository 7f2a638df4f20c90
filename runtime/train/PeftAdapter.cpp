//===- PeftAdapter.cpp - PEFT adapter configs and starting weights --------===//
//
// The adapter_config.json a checkpoint carries (the keys PEFT's LoraConfig
// writes, FORMATS.md), and reading an adapter PEFT saved as the starting
// point of a LoRA plan.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Checkpoint.h"
#include "runtime/train/TensorFiles.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tailor::train {

using nlohmann::json;
using namespace detail;

std::string adapterConfigJson(const AdapterInfo &adapter) {
  json config;
  config["peft_type"] = "LORA";
  config["task_type"] = "CAUSAL_LM";
  config["r"] = adapter.r;
  // PEFT types lora_alpha as an int; keep it one when it is.
  if (adapter.alpha == std::floor(adapter.alpha) &&
      std::fabs(adapter.alpha) < 1e15) {
    config["lora_alpha"] = static_cast<int64_t>(adapter.alpha);
  } else {
    config["lora_alpha"] = adapter.alpha;
  }
  config["lora_dropout"] = adapter.dropout;
  config["target_modules"] = adapter.targetModules;
  config["bias"] = "none";
  config["fan_in_fan_out"] = adapter.fanInFanOut;
  config["base_model_name_or_path"] =
      adapter.baseModel.empty() ? json(nullptr) : json(adapter.baseModel);
  config["inference_mode"] = true;
  config["use_rslora"] = adapter.useRslora;
  config["use_dora"] = false;
  config["modules_to_save"] = nullptr;
  config["layers_to_transform"] =
      adapter.layers.empty() ? json(nullptr) : json(adapter.layers);
  config["layers_pattern"] = nullptr;
  config["rank_pattern"] = json::object();
  config["alpha_pattern"] = json::object();
  config["init_lora_weights"] = true;
  config["revision"] = nullptr;
  return config.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

/// Parses a JSON object file; false and an error naming the file otherwise.
static bool readJsonFile(const std::string &path, json &out,
                         std::string &error) {
  std::string text;
  if (!readTextFile(path, text, error)) {
    return false;
  }
  out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded() || !out.is_object()) {
    error = path + ": not a JSON object";
    return false;
  }
  return true;
}

bool readPeftAdapterConfig(const std::string &dir, PeftAdapterConfig &out,
                           std::string &error) {
  std::string configPath = dir + "/" + kAdapterConfigFile;
  json config;
  if (!readJsonFile(configPath, config, error)) {
    return false;
  }
  auto type = config.find("peft_type");
  if (type != config.end() && (!type->is_string() || *type != "LORA")) {
    error = configPath + ": peft_type is not LORA; tailor reads LoRA adapters";
    return false;
  }
  auto number = [&](const char *key, double &value) {
    auto it = config.find(key);
    if (it == config.end() || !it->is_number()) {
      return false;
    }
    value = it->get<double>();
    return true;
  };
  if (!number("r", out.r) || out.r <= 0 || !number("lora_alpha", out.alpha)) {
    error = configPath + ": missing or non-numeric r or lora_alpha";
    return false;
  }
  // An absent flag is false (PEFT versions before it); one of another type
  // is refused, not read as false.
  auto flag = [&](const char *key, bool &value) {
    auto it = config.find(key);
    if (it != config.end() && !it->is_boolean()) {
      error = configPath + ": " + key + " is " + it->type_name() +
              ", expected a boolean";
      return false;
    }
    value = it != config.end() && it->get<bool>();
    return true;
  };
  if (!flag("use_rslora", out.useRslora) || !flag("use_dora", out.useDora) ||
      !flag("fan_in_fan_out", out.fanInFanOut)) {
    return false;
  }
  if (out.useDora) {
    error = configPath + ": DoRA adapters (use_dora) are not supported";
    return false;
  }
  out.targetModules.clear();
  auto targets = config.find("target_modules");
  if (targets != config.end() && targets->is_string()) {
    out.targetModules.push_back(targets->get<std::string>());
  } else if (targets != config.end() && targets->is_array()) {
    for (const json &item : *targets) {
      if (item.is_string()) {
        out.targetModules.push_back(item.get<std::string>());
      }
    }
  }
  out.layers.clear();
  auto layers = config.find("layers_to_transform");
  if (layers != config.end() && layers->is_number_integer()) {
    out.layers.push_back(layers->get<int64_t>());
  } else if (layers != config.end() && layers->is_array()) {
    for (const json &item : *layers) {
      if (item.is_number_integer()) {
        out.layers.push_back(item.get<int64_t>());
      }
    }
  }
  return true;
}

bool loadPeftAdapter(const CheckpointLayout &layout, const std::string &dir,
                     std::string &error) {
  if (!layout.adapter.isAdapter()) {
    error = "the plan fine-tunes the full model; an adapter cannot "
            "initialize it";
    return false;
  }
  std::string configPath = dir + "/" + kAdapterConfigFile;
  PeftAdapterConfig config;
  if (!readPeftAdapterConfig(dir, config, error)) {
    return false;
  }
  const AdapterInfo &plan = layout.adapter;
  if (config.r != static_cast<double>(plan.r) ||
      std::fabs(config.alpha - plan.alpha) > 1e-6 * std::max(1.0, plan.alpha)) {
    std::ostringstream message;
    message << configPath << ": r " << config.r << " and lora_alpha "
            << config.alpha << " do not match the plan's r " << plan.r
            << " and lora_alpha " << plan.alpha;
    error = message.str();
    return false;
  }
  if (config.useRslora != plan.useRslora) {
    error = configPath + ": use_rslora is " +
            (config.useRslora ? "true" : "false") + " but the plan's is " +
            (plan.useRslora ? "true" : "false");
    return false;
  }
  std::unique_ptr<SafetensorsFile> weights =
      SafetensorsFile::open(dir + "/" + kAdapterModelFile, error);
  if (!weights || !checkTensors(*weights, layout.parameters, kPeftPrefix,
                                /*toF32=*/true, error)) {
    return false;
  }
  copyTensors(*weights, layout.parameters, kPeftPrefix);
  return true;
}

} // namespace tailor::train
