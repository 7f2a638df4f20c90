//===- Recipe.cpp - the training recipe (YAML) ----------------------------===//

#include "compiler/Recipe.h"

#include "dialects/tg/TGOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

using namespace llvm;

namespace tailor {

namespace {

/// A recipe value: a scalar or a list of scalars, with where it came from.
struct Value {
  std::string scalar;
  std::vector<std::string> list;
  bool isList = false;
  std::string where; // "r.yaml:3:1" or "override 'lora_r=8'"
};

using Setter = std::function<Error(TrainingRecipe &, const Value &)>;

Error bad(const std::string &key, const Value &value, const Twine &expected) {
  return createStringError(inconvertibleErrorCode(),
                           value.where + ": bad value for '" + key +
                               "': expected " + expected + ", got '" +
                               (value.isList ? "[...]" : value.scalar) + "'");
}

Setter integer(int64_t TrainingRecipe::*field, int64_t min) {
  return [=](TrainingRecipe &r, const Value &v) -> Error {
    int64_t n = 0;
    if (v.isList || StringRef(v.scalar).getAsInteger(10, n) || n < min) {
      return bad("", v, "an integer >= " + Twine(min));
    }
    r.*field = n;
    return Error::success();
  };
}

Setter number(double TrainingRecipe::*field, double min, double max) {
  return [=](TrainingRecipe &r, const Value &v) -> Error {
    double x = 0;
    if (v.isList || StringRef(v.scalar).getAsDouble(x) || !(x >= min) ||
        !(x <= max)) {
      char range[64];
      std::snprintf(range, sizeof(range), "a number in [%g, %g]", min, max);
      return bad("", v, range);
    }
    r.*field = x;
    return Error::success();
  };
}

Error parseBool(const Value &v, bool &out) {
  std::optional<bool> b = StringSwitch<std::optional<bool>>(v.scalar)
                              .Cases({"true", "True", "yes"}, true)
                              .Cases({"false", "False", "no"}, false)
                              .Default(std::nullopt);
  if (v.isList || !b) {
    return bad("", v, "true or false");
  }
  out = *b;
  return Error::success();
}

Setter boolean(bool TrainingRecipe::*field) {
  return [=](TrainingRecipe &r, const Value &v) -> Error {
    return parseBool(v, r.*field);
  };
}

Setter choice(std::string TrainingRecipe::*field,
              std::vector<std::pair<std::string, std::string>> allowed) {
  return [=](TrainingRecipe &r, const Value &v) -> Error {
    std::string names;
    for (const auto &[spelling, canonical] : allowed) {
      if (!v.isList && v.scalar == spelling) {
        r.*field = canonical;
        return Error::success();
      }
      if (names.find(canonical) == std::string::npos) {
        names += (names.empty() ? "" : ", ") + canonical;
      }
    }
    return bad("", v, "one of " + names);
  };
}

Setter text(std::string TrainingRecipe::*field) {
  return [=](TrainingRecipe &r, const Value &v) -> Error {
    if (v.isList) {
      return bad("", v, "a string");
    }
    r.*field = v.scalar;
    return Error::success();
  };
}

Setter names(std::vector<std::string> TrainingRecipe::*field) {
  return [=](TrainingRecipe &r, const Value &v) -> Error {
    std::vector<std::string> values = v.list;
    if (!v.isList) {
      for (StringRef part : llvm::split(StringRef(v.scalar), ',')) {
        if (!part.trim().empty()) {
          values.push_back(part.trim().str());
        }
      }
    }
    if (values.empty()) {
      return bad("", v, "a non-empty list of module names");
    }
    r.*field = values;
    return Error::success();
  };
}

/// axolotl's `load_in_4bit` / `load_in_8bit`: true picks `scheme`.
Setter loadsQuantized(const char *scheme) {
  return [scheme](TrainingRecipe &r, const Value &v) -> Error {
    bool on = false;
    if (Error error = parseBool(v, on)) {
      return error;
    }
    if (on) {
      r.quantization = scheme;
    }
    return Error::success();
  };
}

/// axolotl's `fp16: true` / `bf16: true`: true picks that mixed precision
/// (false leaves the choice to `mixed_precision` or the target).
Setter halfPrecision(const char *precision) {
  return [precision](TrainingRecipe &r, const Value &v) -> Error {
    bool on = false;
    if (Error error = parseBool(v, on)) {
      return error;
    }
    if (on) {
      r.mixedPrecision = precision;
    }
    return Error::success();
  };
}

/// The model side: adapter, quantization, LoRA, tied embeddings.
std::map<std::string, Setter> modelSetters() {
  using R = TrainingRecipe;
  return {
      {"adapter",
       [](R &r, const Value &v) -> Error {
         // qlora is LoRA on quantized frozen weights (nf4 by default).
         r.qlora = !v.isList && v.scalar == "qlora";
         if (r.qlora) {
           r.adapter = "lora";
           return Error::success();
         }
         return choice(&R::adapter, {{"lora", "lora"},
                                     {"lora-fa", "lora-fa"},
                                     {"lora_fa", "lora-fa"},
                                     {"full", "full"},
                                     {"qlora", "qlora"}})(r, v);
       }},
      {"quantization", choice(&R::quantization, {{"nf4", "nf4"},
                                                  {"int8", "int8"},
                                                  {"gptq", "gptq"},
                                                  {"bf16", "bf16"},
                                                  {"fp16", "fp16"},
                                                  {"none", "none"}})},
      // axolotl's spellings of the bitsandbytes loaders.
      {"load_in_4bit", loadsQuantized("nf4")},
      {"load_in_8bit", loadsQuantized("int8")},
      {"double_quant", boolean(&R::doubleQuant)},
      {"bnb_4bit_use_double_quant", boolean(&R::doubleQuant)},
      {"quant_block_size", integer(&R::quantBlockSize, 32)},
      {"quantize_modules", names(&R::quantizeModules)},
      {"quantize_skip_modules", names(&R::quantizeSkipModules)},
      {"gptq_bits", integer(&R::gptqBits, 2)},
      {"gptq_group_size", integer(&R::gptqGroupSize, -1)},
      {"gptq_act_order", boolean(&R::gptqActOrder)},
      {"gptq_checkpoint", text(&R::gptqCheckpoint)},
      {"int8_outlier_threshold", number(&R::int8OutlierThreshold, 0.0, 1e9)},
      {"lora_r", integer(&R::loraR, 1)},
      {"lora_alpha", number(&R::loraAlpha, 1e-9, 1e9)},
      {"lora_dropout", number(&R::loraDropout, 0.0, 0.999)},
      {"lora_target_modules", names(&R::loraTargetModules)},
      {"lora_layers",
       [](R &r, const Value &v) -> Error {
         std::string spec = v.scalar;
         if (v.isList) {
           spec.clear();
           for (const std::string &layer : v.list) {
             spec += (spec.empty() ? "" : ",") + layer;
           }
         }
         for (char c : spec) {
           if (!llvm::isDigit(c) && c != ',' && c != '-' && c != ' ') {
             return bad("", v, "layer indexes or ranges such as 0-3,6");
           }
         }
         r.loraLayers = spec;
         return Error::success();
       }},
      {"use_rslora", boolean(&R::useRslora)},
      {"tie_word_embeddings", choice(&R::tieWordEmbeddings, {{"auto", "auto"},
                                                            {"true", "always"},
                                                            {"always", "always"},
                                                            {"false", "never"},
                                                            {"never", "never"}})},
      {"trainable_modules", names(&R::trainableModules)},
  };
}

/// The run: batch shape, precision, optimizer, schedule, data, evaluation.
std::map<std::string, Setter> trainingSetters() {
  using R = TrainingRecipe;
  return {
      {"sequence_len", integer(&R::sequenceLen, 2)},
      {"micro_batch_size", integer(&R::microBatchSize, 1)},
      {"gradient_accumulation_steps", integer(&R::gradientAccumulationSteps, 1)},
      {"mixed_precision", choice(&R::mixedPrecision, {{"bf16", "bf16"},
                                                      {"fp16", "fp16"},
                                                      {"no", "fp32"},
                                                      {"fp32", "fp32"},
                                                      {"auto", ""}})},
      // axolotl's spellings: `fp16: true` / `bf16: true`.
      {"fp16", halfPrecision("fp16")},
      {"bf16", halfPrecision("bf16")},
      {"init_scale", number(&R::initScale, 0.0, 3.4e38)},
      {"growth_factor", number(&R::growthFactor, 0.0, 3.4e38)},
      {"backoff_factor", number(&R::backoffFactor, 0.0, 3.4e38)},
      {"growth_interval", integer(&R::growthInterval, 1)},
      {"optimizer", choice(&R::optimizer, {{"adamw", "adamw"},
                                            {"adamw_torch", "adamw"},
                                            {"sgd", "sgd"}})},
      {"learning_rate", number(&R::learningRate, 0.0, 1e3)},
      {"lr_scheduler", choice(&R::lrScheduler, {{"constant", "constant"},
                                                 {"linear", "linear"},
                                                 {"cosine", "cosine"}})},
      {"warmup_steps", integer(&R::warmupSteps, 0)},
      {"max_steps", integer(&R::maxSteps, 1)},
      {"weight_decay", number(&R::weightDecay, 0.0, 1e3)},
      {"adam_beta1", number(&R::adamBeta1, 0.0, 0.999999)},
      {"adam_beta2", number(&R::adamBeta2, 0.0, 0.999999)},
      {"adam_epsilon", number(&R::adamEpsilon, 1e-30, 1.0)},
      {"momentum", number(&R::momentum, 0.0, 0.999999)},
      {"nesterov", boolean(&R::nesterov)},
      {"max_grad_norm", number(&R::maxGradNorm, 0.0, 1e9)},
      {"seed", integer(&R::seed, 0)},
      {"save_steps", integer(&R::saveSteps, 0)},
      {"logging_steps", integer(&R::loggingSteps, 1)},
      {"shuffle", boolean(&R::shuffle)},
      {"sample_packing",
       [](R &r, const Value &v) -> Error {
         bool on = false;
         if (Error error = parseBool(v, on)) {
           return error;
         }
         r.samplePacking = on;
         return Error::success();
       }},
      {"pad_token_id", integer(&R::padTokenId, 0)},
      {"val_set_size",
       [](R &r, const Value &v) -> Error {
         double x = 0;
         if (v.isList || StringRef(v.scalar).getAsDouble(x) || !(x >= 0) ||
             (x >= 1 && (x != std::floor(x) || x > 1e15))) {
           return bad("", v,
                      "a fraction in (0, 1) or a whole count of examples");
         }
         r.valSetSize = x;
         return Error::success();
       }},
      {"eval_steps", integer(&R::evalSteps, 0)},
      {"base_model", text(&R::baseModel)},
  };
}

/// Memory and placement: recomputation, sharding, offload, overlap, budgets.
std::map<std::string, Setter> memorySetters() {
  using R = TrainingRecipe;
  return {
      {"gradient_checkpointing", choice(&R::recomputePolicy,
                                        {{"false", "none"},
                                         {"none", "none"},
                                         {"False", "none"},
                                         {"true", "full"},
                                         {"True", "full"},
                                         {"full", "full"},
                                         {"selective", "selective"}})},
      {"zero_stage", choice(&R::zeroStageSharding, {{"0", "ddp"},
                                            {"1", "zero1"},
                                            {"2", "zero2"},
                                            {"3", "zero3"}})},
      {"fsdp_sharding_strategy", choice(&R::fsdpSharding,
                                        {{"NO_SHARD", "ddp"},
                                         {"SHARD_GRAD_OP", "zero2"},
                                         {"FULL_SHARD", "zero3"},
                                         {"HYBRID_SHARD", "hybrid"}})},
      {"ddp_bucket_cap_mb", number(&R::ddpBucketCapMb, 1e-3, 1e6)},
      {"reshard_after_forward", boolean(&R::reshardAfterForward)},
      {"zero_quantized_weights", boolean(&R::zeroQuantizedWeights)},
      {"zero_quantized_gradients", boolean(&R::zeroQuantizedGradients)},
      {"zero_hpz_partition_size", integer(&R::zeroHpzPartitionSize, 1)},
      {"zero_quantized_gradients_bits",
       [](R &r, const Value &v) -> Error {
         if (v.isList || (v.scalar != "8" && v.scalar != "4")) {
           return bad("", v, "8 or 4 (bits of each code on the wire)");
         }
         r.zeroQuantizedGradientsBits = v.scalar == "4" ? 4 : 8;
         return Error::success();
       }},
      {"offload_param", choice(&R::offloadParam, {{"cpu", "cpu"},
                                                   {"none", "none"}})},
      {"fsdp_offload_params", boolean(&R::fsdpOffloadParams)},
      {"offload_optimizer", choice(&R::offloadOptimizer, {{"cpu", "cpu"},
                                                         {"none", "none"}})},
      {"enable_activation_offloading", boolean(&R::activationOffloading)},
      {"overlap_comm", choice(&R::overlapComm, {{"auto", "auto"},
                                                 {"true", "true"},
                                                 {"false", "false"}})},
      {"overlap_buckets_in_flight", integer(&R::overlapBucketsInFlight, 1)},
      {"pipeline_stages", integer(&R::pipelineStages, 1)},
      {"device_map", choice(&R::deviceMap, {{"auto", "auto"}, {"none", ""}})},
      {"pipeline_schedule", choice(&R::pipelineSchedule,
                                   {{"1f1b", "1f1b"}, {"naive", "naive"}})},
      {"gradient_compression", choice(&R::gradientCompression,
                                      {{"none", "none"},
                                       {"powersgd", "powersgd"},
                                       {"acp-sgd", "acp-sgd"},
                                       {"topk", "topk"},
                                       {"signsgd", "signsgd"}})},
      {"compression_rank", integer(&R::compressionRank, 1)},
      {"compression_ratio", number(&R::compressionRatio, 0.0, 1.0)},
      {"compression_start_step", integer(&R::compressionStartStep, 0)},
      {"compression_error_feedback", boolean(&R::compressionErrorFeedback)},
      {"compression_warm_start", boolean(&R::compressionWarmStart)},
      {"compression_min_rate", number(&R::compressionMinRate, 0.0, 1e9)},
      {"activation_memory_budget",
       number(&R::activationMemoryBudget, 1e-6, 1.0)},
      {"activation_memory_budget_gib",
       number(&R::activationMemoryBudgetGib, 1e-9, 1e9)},
      {"device_memory_budget_gib",
       number(&R::deviceMemoryBudgetGib, 1e-9, 1e9)},
  };
}

/// Every recipe key and how it is read.
const std::map<std::string, Setter> &setters() {
  static const std::map<std::string, Setter> table = [] {
    std::map<std::string, Setter> all = modelSetters();
    all.merge(trainingSetters());
    all.merge(memorySetters());
    return all;
  }();
  return table;
}

/// Applies one key: value, naming the key in any error.
Error apply(TrainingRecipe &recipe, const std::string &key, const Value &value) {
  auto it = setters().find(key);
  if (it == setters().end()) {
    return createStringError(inconvertibleErrorCode(),
                             value.where + ": unknown recipe key '" + key + "'");
  }
  recipe.givenKeys.insert(key);
  if (Error error = it->second(recipe, value)) {
    std::string message = toString(std::move(error));
    // The setters leave the key out; put it in.
    size_t at = message.find("''");
    if (at != std::string::npos) {
      message.replace(at, 2, "'" + key + "'");
    }
    return createStringError(inconvertibleErrorCode(), message);
  }
  return Error::success();
}

/// Parses a YAML mapping of recipe keys from `buffer` into `recipe`.
Error applyYaml(TrainingRecipe &recipe, StringRef buffer, StringRef name,
                const std::string &overrideText) {
  SourceMgr sources;
  std::string diagnostics;
  raw_string_ostream diagStream(diagnostics);
  yaml::Stream stream(buffer, sources, /*ShowColors=*/false);
  sources.setDiagHandler(
      [](const SMDiagnostic &diag, void *context) {
        auto *os = static_cast<raw_string_ostream *>(context);
        *os << diag.getLineNo() << ":" << diag.getColumnNo() + 1 << ": "
            << diag.getMessage();
      },
      &diagStream);
  auto where = [&](yaml::Node *node) {
    if (!overrideText.empty()) {
      return "override '" + overrideText + "'";
    }
    // A node the parser gave up on may be null or lie outside the text.
    SMLoc start = node ? node->getSourceRange().Start : SMLoc();
    if (!start.isValid() || sources.FindBufferContainingLoc(start) == 0) {
      return name.str();
    }
    auto loc = sources.getLineAndColumn(start);
    return (name + ":" + Twine(loc.first) + ":" + Twine(loc.second)).str();
  };
  for (yaml::Document &document : stream) {
    yaml::Node *root = document.getRoot();
    if (!root || llvm::isa<yaml::NullNode>(root)) {
      continue;
    }
    auto *mapping = dyn_cast<yaml::MappingNode>(root);
    if (!mapping) {
      return createStringError(inconvertibleErrorCode(),
                               where(root) + ": expected a mapping of recipe "
                                             "keys");
    }
    for (yaml::KeyValueNode &entry : *mapping) {
      auto *keyNode = dyn_cast_or_null<yaml::ScalarNode>(entry.getKey());
      if (!keyNode) {
        return createStringError(inconvertibleErrorCode(),
                                 where(mapping) + ": expected a scalar key");
      }
      SmallString<32> keyStorage;
      std::string key = keyNode->getValue(keyStorage).str();
      Value value;
      value.where = where(keyNode);
      yaml::Node *node = entry.getValue();
      if (auto *scalar = dyn_cast_or_null<yaml::ScalarNode>(node)) {
        SmallString<32> storage;
        value.scalar = scalar->getValue(storage).str();
      } else if (auto *sequence = dyn_cast_or_null<yaml::SequenceNode>(node)) {
        value.isList = true;
        for (yaml::Node &item : *sequence) {
          auto *itemScalar = dyn_cast<yaml::ScalarNode>(&item);
          if (!itemScalar) {
            return createStringError(inconvertibleErrorCode(),
                                     value.where + ": '" + key +
                                         "' must be a list of scalars");
          }
          SmallString<32> storage;
          value.list.push_back(itemScalar->getValue(storage).str());
        }
      } else {
        return createStringError(inconvertibleErrorCode(),
                                 value.where + ": '" + key +
                                     "' needs a value");
      }
      if (Error error = apply(recipe, key, value)) {
        return error;
      }
    }
  }
  if (stream.failed()) {
    return createStringError(inconvertibleErrorCode(),
                             (overrideText.empty() ? name.str()
                                                   : "override '" + overrideText + "'") +
                                 ": malformed YAML at " + diagnostics);
  }
  return Error::success();
}

/// A budget key selects the budget policy; it cannot be combined with an
/// explicit `gradient_checkpointing` choice, nor with the other budget key.
Error resolveRecomputation(TrainingRecipe &recipe) {
  bool fraction = recipe.givenKeys.count("activation_memory_budget");
  bool gib = recipe.givenKeys.count("activation_memory_budget_gib");
  if (fraction && gib) {
    return createStringError(inconvertibleErrorCode(),
                             "'activation_memory_budget' and "
                             "'activation_memory_budget_gib' both set: give "
                             "one");
  }
  if (!fraction && !gib) {
    return Error::success();
  }
  if (recipe.givenKeys.count("gradient_checkpointing") &&
      recipe.recomputePolicy != "none") {
    return createStringError(
        inconvertibleErrorCode(),
        "'gradient_checkpointing: " + recipe.recomputePolicy +
            "' and '" +
            (fraction ? "activation_memory_budget"
                      : "activation_memory_budget_gib") +
            "' both choose what to recompute: give one");
  }
  recipe.recomputePolicy = "budget";
  return Error::success();
}

/// DeepSpeed's and FSDP's keys name the same choice; both may be given
/// only when they agree.
Error resolveSharding(TrainingRecipe &recipe) {
  const std::string &stage = recipe.zeroStageSharding;
  const std::string &strategy = recipe.fsdpSharding;
  if (!stage.empty() && !strategy.empty() && stage != strategy) {
    return createStringError(inconvertibleErrorCode(),
                             "'zero_stage' chooses " + stage +
                                 " but 'fsdp_sharding_strategy' chooses " +
                                 strategy + ": give one, or agree");
  }
  recipe.sharding = !stage.empty() ? stage : !strategy.empty() ? strategy
                                                                : "ddp";
  return Error::success();
}

/// What offload can place today: frozen parameters (LoRA's and QLoRA's
/// base weights) without ZeRO-3, AdamW's state with its update, whole or
/// each rank's ZeRO chunk (offload_optimizer: cpu; the pass refuses SGD by
/// name) and the saved activations (enable_activation_offloading). The
/// rest is refused by name, never ignored.
Error checkOffload(const TrainingRecipe &recipe) {
  auto notYet = [](const Twine &what) {
    return createStringError(inconvertibleErrorCode(),
                             what + " is not built yet (tailor offloads "
                                    "frozen parameters, offload_param: cpu, "
                                    "AdamW, offload_optimizer: cpu, and "
                                    "activations, "
                                    "enable_activation_offloading)");
  };
  if (recipe.offloadParams() && recipe.adapter == "full") {
    return notYet("offload with 'adapter: full' (trainable parameters, "
                  "their gradients and optimizer state in host memory)");
  }
  if (recipe.offloadParams() && recipe.sharding == "zero3") {
    return notYet("offload with zero_stage 3 / FULL_SHARD (sharded "
                  "parameters in host memory)");
  }
  return Error::success();
}

/// What gradient compression can do today: PowerSGD, ACP-SGD, top-k and
/// sign-SGD on DDP's buckets, collectives in program order. The rest is
/// refused by name.
Error checkCompression(const TrainingRecipe &recipe) {
  const std::string &method = recipe.gradientCompression;
  if (method == "none") {
    return Error::success();
  }
  if (method == "topk" && !(recipe.compressionRatio > 0.0)) {
    return createStringError(inconvertibleErrorCode(),
                             "'compression_ratio' must be in (0, 1] for "
                             "'gradient_compression: topk', got 0");
  }
  if (recipe.sharding != "ddp") {
    return createStringError(inconvertibleErrorCode(),
                             "'gradient_compression: " + method + "' with " +
                                 recipe.sharding +
                                 " sharding is not built yet (ddp only)");
  }
  if (recipe.overlapComm == "true") {
    return createStringError(
        inconvertibleErrorCode(),
        "'gradient_compression: " + method +
            "' with 'overlap_comm: true' is not built yet (compressed "
            "all-reduces run in the optimizer step)");
  }
  if (method == "acp-sgd" && !recipe.compressionWarmStart) {
    return createStringError(
        inconvertibleErrorCode(),
        "'gradient_compression: acp-sgd' reuses the previous step's factor "
        "by design: 'compression_warm_start: false' applies to powersgd "
        "only");
  }
  return Error::success();
}

/// What layer split composes with today: LoRA, QLoRA and full fine-tuning,
/// and data parallelism (ddp) over replicas of the stages when the target
/// has a multiple of the stages' ranks; ZeRO, offload, compression and
/// recomputation policies are refused by name.
Error checkPipeline(const TrainingRecipe &recipe) {
  if (recipe.givenKeys.count("pipeline_stages") && !recipe.deviceMap.empty()) {
    return createStringError(inconvertibleErrorCode(),
                             "'pipeline_stages' and 'device_map: auto' both "
                             "choose the layer split: give one");
  }
  if (recipe.pipelineStages == 1 && recipe.deviceMap.empty()) {
    return Error::success();
  }
  auto notYet = [](const Twine &what, const Twine &why = "") {
    return createStringError(inconvertibleErrorCode(),
                             "layer split (pipeline_stages / device_map) "
                             "with " + what + " is not built yet" + why);
  };
  if (recipe.sharding != "ddp") {
    return notYet(recipe.sharding + " sharding",
                  " (the replicas of a stage average their gradients as ddp "
                  "does)");
  }
  if (recipe.offloadParams() || recipe.offloadOptimizer != "none" ||
      recipe.activationOffloading) {
    return notYet("offload");
  }
  if (recipe.gradientCompression != "none") {
    return notYet("gradient compression");
  }
  if (recipe.valSetSize > 0) {
    return notYet("validation (val_set_size)");
  }
  if (recipe.recomputePolicy != "none") {
    return notYet("a recomputation policy (every stage but the last "
                  "already keeps only its input and replays its forward)");
  }
  return Error::success();
}

/// GradScaler's settings: given only with fp16 (they would do nothing
/// otherwise), and as torch.amp.GradScaler needs them: a positive finite
/// first scale, a growth above 1 and a back-off below 1. Two precisions
/// asked for at once (`fp16: true` and `bf16: true`, or either against
/// `mixed_precision`) are refused.
Error checkLossScaling(const TrainingRecipe &recipe) {
  auto error = [](const Twine &message) {
    return createStringError(inconvertibleErrorCode(), message);
  };
  bool fp16 = recipe.givenKeys.count("fp16") && recipe.mixedPrecision == "fp16";
  bool bf16 = recipe.givenKeys.count("bf16") && recipe.mixedPrecision == "bf16";
  if (recipe.givenKeys.count("fp16") && recipe.givenKeys.count("bf16") &&
      (fp16 || bf16)) {
    return error("'fp16' and 'bf16' both set: give one precision");
  }
  for (const char *key : {"init_scale", "growth_factor", "backoff_factor",
                          "growth_interval"}) {
    if (recipe.givenKeys.count(key) && !recipe.lossScaling()) {
      return error("'" + Twine(key) +
                   "' sets fp16 loss scaling, which needs 'mixed_precision: "
                   "fp16' (or 'fp16: true')");
    }
  }
  if (!(recipe.initScale > 0.0)) {
    return error("'init_scale' must be above 0");
  }
  auto text = [](double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%g", value);
    return std::string(buffer);
  };
  if (!(recipe.growthFactor > 1.0)) {
    return error("'growth_factor' must be above 1, got " +
                 text(recipe.growthFactor));
  }
  if (!(recipe.backoffFactor > 0.0 && recipe.backoffFactor < 1.0)) {
    return error("'backoff_factor' must be in (0, 1), got " +
                 text(recipe.backoffFactor));
  }
  if (!recipe.lossScaling()) {
    return Error::success();
  }
  // What loss scaling has been built and checked with: DDP, ZeRO-1/2/3 and
  // hybrid sharding (every rank decides to skip from the same all-reduced
  // gradients or all-reduced norm) and offload. Gradient compression would
  // feed inf into its error feedback, and a layer split's stages would
  // each decide alone: both need their own agreement first.
  auto notYet = [&](const Twine &what) {
    return error("fp16 loss scaling with " + what + " is not supported yet");
  };
  if (recipe.gradientCompression != "none") {
    return notYet("gradient compression");
  }
  if (recipe.pipelineStages != 1 || !recipe.deviceMap.empty()) {
    return notYet("a layer split (pipeline_stages / device_map)");
  }
  return Error::success();
}

} // namespace

Expected<TrainingRecipe> loadRecipe(StringRef path,
                                    const std::vector<std::string> &overrides) {
  TrainingRecipe recipe;
  if (!path.empty()) {
    auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
    if (!buffer) {
      return createStringError(buffer.getError(), "cannot read recipe '" + path +
                                                      "': " +
                                                      buffer.getError().message());
    }
    if (Error error = applyYaml(recipe, (*buffer)->getBuffer(), path, "")) {
      return error;
    }
    recipe.text = (*buffer)->getBuffer().str();
  }
  for (const std::string &item : overrides) {
    auto [key, value] = StringRef(item).split('=');
    if (key.trim().empty() || !StringRef(item).contains('=')) {
      return createStringError(inconvertibleErrorCode(),
                               "override '" + item + "': expected key=value");
    }
    std::string yaml = (key.trim() + ": " + value).str();
    if (Error error = applyYaml(recipe, yaml, "", item)) {
      return error;
    }
    recipe.text += "\n# override\n" + yaml + "\n";
  }
  if (recipe.optimizer == "sgd" && recipe.nesterov && recipe.momentum == 0.0) {
    return createStringError(inconvertibleErrorCode(),
                             "'nesterov' needs a 'momentum' above 0");
  }
  if (Error error = resolveSharding(recipe)) {
    return error;
  }
  if (Error error = checkOffload(recipe)) {
    return error;
  }
  if (Error error = checkCompression(recipe)) {
    return error;
  }
  if (recipe.zeroQuantizedWeights && recipe.sharding != "zero3") {
    return createStringError(
        inconvertibleErrorCode(),
        "'zero_quantized_weights' quantizes zero_stage 3 / FULL_SHARD's "
        "weight gathers, but the sharding is " + recipe.sharding);
  }
  // The width alone would quantize nothing: say so rather than ignore it
  // (an explicit `zero_quantized_gradients: false`, as explore writes for
  // configurations without reduce-scatters, turns both off).
  if (recipe.givenKeys.count("zero_quantized_gradients_bits") &&
      !recipe.givenKeys.count("zero_quantized_gradients")) {
    return createStringError(
        inconvertibleErrorCode(),
        "'zero_quantized_gradients_bits' sets the width of "
        "'zero_quantized_gradients', which the recipe does not turn on");
  }
  if (recipe.zeroHpzPartitionSize > 1 && recipe.sharding != "zero3") {
    return createStringError(
        inconvertibleErrorCode(),
        "'zero_hpz_partition_size' partitions zero_stage 3 / FULL_SHARD's "
        "gathered parameters, but the sharding is " + recipe.sharding);
  }
  if (recipe.zeroHpzPartitionSize > 1 && !recipe.reshardAfterForward) {
    return createStringError(
        inconvertibleErrorCode(),
        "'zero_hpz_partition_size' keeps a part of the forward's gathers for "
        "backward's, but with 'reshard_after_forward: false' backward "
        "gathers nothing");
  }
  if (recipe.zeroQuantizedGradients && recipe.sharding != "zero2" &&
      recipe.sharding != "zero3" && recipe.sharding != "hybrid") {
    return createStringError(
        inconvertibleErrorCode(),
        "'zero_quantized_gradients' quantizes zero_stage 2 or 3's gradient "
        "reduce-scatters (SHARD_GRAD_OP, FULL_SHARD, HYBRID_SHARD), but the "
        "sharding is " + recipe.sharding);
  }
  if (Error error = resolveRecomputation(recipe)) {
    return error;
  }
  if (Error error = checkPipeline(recipe)) {
    return error;
  }
  if (Error error = checkLossScaling(recipe)) {
    return error;
  }
  if (recipe.warmupSteps > recipe.maxSteps) {
    return createStringError(inconvertibleErrorCode(),
                             "'warmup_steps' (" + Twine(recipe.warmupSteps) +
                                 ") exceeds 'max_steps' (" +
                                 Twine(recipe.maxSteps) + ")");
  }
  return recipe;
}

Error checkGenerationRecipe(const TrainingRecipe &recipe,
                            std::vector<std::string> &ignored) {
  // The weight format: what a generation plan reads.
  static const std::set<std::string> weightKeys = {
      "quantization",          "load_in_4bit",
      "load_in_8bit",          "double_quant",
      "bnb_4bit_use_double_quant", "quant_block_size",
      "quantize_modules",      "quantize_skip_modules",
      "gptq_bits",             "gptq_group_size",
      "gptq_act_order",        "gptq_checkpoint",
      "int8_outlier_threshold", "tie_word_embeddings"};
  // Placement and precision a one-rank fp32 CPU plan cannot honour.
  static const std::set<std::string> refusedKeys = {
      "zero_stage",           "fsdp_sharding_strategy",
      "offload_param",        "fsdp_offload_params",
      "offload_optimizer",    "enable_activation_offloading",
      "pipeline_stages",      "device_map",
      "gradient_compression", "device_memory_budget_gib"};
  std::string refused;
  for (const std::string &key : recipe.givenKeys) {
    if (weightKeys.count(key)) {
      continue;
    }
    bool refuse = refusedKeys.count(key) > 0;
    // Only the values that ask for something refuse: `adapter: qlora`
    // names the weight format, `mixed_precision: fp32` is the plan's own.
    if (key == "adapter") {
      refuse = recipe.adapter == "full";
      if (recipe.qlora) {
        continue;
      }
    } else if (key == "mixed_precision" || key == "fp16" || key == "bf16") {
      refuse = recipe.mixedPrecision == "bf16" ||
               recipe.mixedPrecision == "fp16";
    }
    if (refuse) {
      refused += (refused.empty() ? "" : ", ") + key;
    } else {
      ignored.push_back(key);
    }
  }
  if (!refused.empty()) {
    return createStringError(
        inconvertibleErrorCode(),
        "--task generate: the recipe asks for " + refused +
            ", which a generation plan (one rank, in the target's "
            "precision) cannot do; it reads the weight format from a recipe "
            "(quantization, "
            "load_in_4bit, load_in_8bit, double_quant, quant_block_size, "
            "quantize_modules, quantize_skip_modules, gptq_*, "
            "int8_outlier_threshold)");
  }
  return Error::success();
}

Error attachRecipe(mlir::ModuleOp module, const TrainingRecipe &r,
                   int64_t vocabSize) {
  if (vocabSize > 0 && r.padTokenId >= vocabSize) {
    return createStringError(inconvertibleErrorCode(),
                             "'pad_token_id' " + Twine(r.padTokenId) +
                                 " is not below the model's vocabulary size " +
                                 Twine(vocabSize));
  }
  mlir::Builder b(module.getContext());
  auto i = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  auto f = [&](double v) { return b.getF64FloatAttr(v); };
  SmallVector<mlir::NamedAttribute> attrs = {
      b.getNamedAttr("micro_batch_size", i(r.microBatchSize)),
      b.getNamedAttr("sequence_len", i(r.sequenceLen)),
      b.getNamedAttr("vocab_size", i(vocabSize)),
      b.getNamedAttr("shuffle", b.getBoolAttr(r.shuffle)),
      b.getNamedAttr("gradient_accumulation_steps",
                     i(r.gradientAccumulationSteps)),
      b.getNamedAttr("max_steps", i(r.maxSteps)),
      b.getNamedAttr("seed", i(r.seed)),
      b.getNamedAttr("optimizer", b.getStringAttr(r.optimizer)),
      b.getNamedAttr("learning_rate", f(r.learningRate)),
      b.getNamedAttr("lr_scheduler", b.getStringAttr(r.lrScheduler)),
      b.getNamedAttr("warmup_steps", i(r.warmupSteps)),
      b.getNamedAttr("weight_decay", f(r.weightDecay)),
      b.getNamedAttr("max_grad_norm", f(r.maxGradNorm)),
      b.getNamedAttr("save_steps", i(r.saveSteps)),
      b.getNamedAttr("logging_steps", i(r.loggingSteps)),
      b.getNamedAttr("pad_token_id", i(r.padTokenId)),
      b.getNamedAttr("val_set_size", f(r.valSetSize)),
      b.getNamedAttr("eval_steps", i(r.evalSteps)),
      b.getNamedAttr("base_model", b.getStringAttr(r.baseModel)),
      b.getNamedAttr("recipe", b.getStringAttr(r.text)),
  };
  if (r.lossScaling()) {
    attrs.push_back(b.getNamedAttr(
        "loss_scaling",
        b.getDictionaryAttr(
            {b.getNamedAttr("init_scale", f(r.initScale)),
             b.getNamedAttr("growth_factor", f(r.growthFactor)),
             b.getNamedAttr("backoff_factor", f(r.backoffFactor)),
             b.getNamedAttr("growth_interval", i(r.growthInterval))})));
  }
  // Absent means unset: the data decides (runtime/train/DataLoader.h).
  if (r.samplePacking) {
    attrs.push_back(
        b.getNamedAttr("sample_packing", b.getBoolAttr(*r.samplePacking)));
  }
  module->setAttr(tg::TGDialect::kTrainingAttrName, b.getDictionaryAttr(attrs));
  return Error::success();
}

} // namespace tailor
