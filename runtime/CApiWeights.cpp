//===- CApiWeights.cpp - the C API's parameters, states and weights -------===//
//
// Listing a plan's parameters and training states by logical name, and
// writing weights into a session from caller memory, a safetensors file or a
// PEFT adapter. Every write is checked whole before a byte is written.
//
//===----------------------------------------------------------------------===//

#include "runtime/CApiHandles.h"
#include "runtime/Status.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Safetensors.h"
#include "runtime/train/TensorFiles.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

using namespace tailor::runtime;
namespace fb = tailor::plan;
using tailor::train::SafetensorsFile;
using tailor::train::SafetensorsTensor;
using tailor::train::TensorSlot;

namespace {

/// The logical shape of a parameter: the float weight's for a quantized
/// one ([rows, cols] as PyTorch's Linear holds it), the whole tensor's for
/// a ZeRO-3 one.
std::vector<int64_t> parameterShape(const LoadedPlan &plan,
                                    const fb::Parameter &param) {
  if (param.shard()) {
    return {param.shard()->shape()->begin(), param.shard()->shape()->end()};
  }
  if (const fb::Quantization *quant = param.quant()) {
    return {quant->rows(), quant->cols()};
  }
  return plan.bufferShape(param.buffer());
}

DType parameterDType(const LoadedPlan &plan, const fb::Parameter &param) {
  return param.quant() ? DType::F32 : plan.bufferDType(param.buffer());
}

uint64_t denseBytes(DType dtype, const std::vector<int64_t> &shape) {
  uint64_t bytes = dtypeSize(dtype);
  for (int64_t d : shape) {
    bytes *= static_cast<uint64_t>(d);
  }
  return bytes;
}

/// Fills a rank and a TAILOR_MAX_RANK shape array, refusing larger ranks.
tailor_status fillShape(const std::string &what,
                        const std::vector<int64_t> &shape, int &rank,
                        int64_t *out) {
  if (shape.size() > TAILOR_MAX_RANK) {
    return fail(TAILOR_ERROR_INVALID_PLAN,
                what + " has rank " + std::to_string(shape.size()) +
                    ", more than " + std::to_string(TAILOR_MAX_RANK));
  }
  rank = static_cast<int>(shape.size());
  std::memset(out, 0, sizeof(int64_t) * TAILOR_MAX_RANK);
  std::copy(shape.begin(), shape.end(), out);
  return ok();
}

const fb::Parameter *findParameter(const LoadedPlan &plan,
                                   std::string_view name) {
  if (const auto *params = plan.root().parameters()) {
    for (const fb::Parameter *param : *params) {
      if (param->name()->string_view() == name) {
        return param;
      }
    }
  }
  return nullptr;
}

/// The parameter whose plan name or Hugging Face (export) name is `name`.
const fb::Parameter *findParameterByFileName(const LoadedPlan &plan,
                                             std::string_view name) {
  if (const auto *params = plan.root().parameters()) {
    for (const fb::Parameter *param : *params) {
      if (param->name()->string_view() == name ||
          (param->export_name() &&
           param->export_name()->string_view() == name)) {
        return param;
      }
    }
  }
  return nullptr;
}

/// Why `param` cannot be written from outside, or "".
std::string unwritable(const fb::Parameter &param) {
  std::string name = param.name()->str();
  if (param.quant()) {
    return "parameter '" + name + "' is stored quantized (" +
           param.quant()->scheme()->str() +
           "); it is bound from its source when the session is created";
  }
  if (param.shard()) {
    return "parameter '" + name +
           "' is sharded over ranks (ZeRO-3); no session holds it whole";
  }
  return "";
}

/// A session tensor slot for writable parameter `param`, in the file's
/// layout (transposed when the plan holds the transpose).
TensorSlot slotOf(Session &session, const fb::Parameter &param,
                  const std::string &fileName) {
  TensorSlot slot;
  slot.name = param.name()->str();
  slot.exportName = fileName == slot.name ? "" : fileName;
  slot.dtype = session.plan().bufferDType(param.buffer());
  slot.shape = session.plan().bufferShape(param.buffer());
  slot.data = session.bufferData(param.buffer());
  slot.buffer = param.buffer();
  slot.transposed = param.export_transposed() && slot.shape.size() == 2;
  return slot;
}

/// Refreshes the host copies of `buffers` (GPU sessions) before a
/// read-modify-write, or writes them back after one.
tailor_status syncBuffers(Session &session,
                          const std::vector<uint32_t> &buffers, bool toHost) {
  for (uint32_t buffer : buffers) {
    std::string problem =
        toHost ? session.download(buffer) : session.upload(buffer);
    if (!problem.empty()) {
      return fail(TAILOR_ERROR_INTERNAL, problem);
    }
  }
  return ok();
}

/// IO for a file that cannot be opened or read, else a malformed file.
tailor_status fileError(const std::string &error) {
  bool io = error.find("cannot open") != std::string::npos ||
            error.find("cannot map") != std::string::npos ||
            error.find("cannot read") != std::string::npos ||
            error.find("No such file") != std::string::npos ||
            error.find("is a directory") != std::string::npos;
  return fail(io ? TAILOR_ERROR_IO : TAILOR_ERROR_INVALID_ARGUMENT, error);
}

/// One LoRA pair of an adapter, merged into its base weight.
struct LoraMerge {
  const fb::Parameter *base = nullptr;
  const SafetensorsTensor *a = nullptr;
  const SafetensorsTensor *b = nullptr;
  std::string module;
  /// The Hugging Face weight is [in, out] (fan_in_fan_out: GPT-2's
  /// Conv1D), so B A lands on it transposed.
  bool fanInFanOut = false;
};

/// W += scale * B A, in double, as PEFT's merge does in f32 (to f32
/// rounding). B A is [out, in]; the file holds W as [out, in] (Linear), or
/// as [in, out] with fan_in_fan_out (GPT-2's Conv1D, which takes
/// (B A)^T); the plan holds the file's layout or its transpose.
void mergeLora(const LoraMerge &merge, Session &session, double scale) {
  int64_t rank = merge.a->shape[0], in = merge.a->shape[1];
  int64_t out = merge.b->shape[0];
  std::vector<float> a(static_cast<size_t>(rank * in));
  std::vector<float> b(static_cast<size_t>(out * rank));
  tailor::train::convertToF32(*merge.a, a.data());
  tailor::train::convertToF32(*merge.b, b.data());
  auto *w = static_cast<float *>(session.bufferData(merge.base->buffer()));
  // Whether the plan's buffer is [in, out].
  bool transposed = merge.base->export_transposed() != merge.fanInFanOut;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double sum = 0;
      for (int64_t k = 0; k < rank; ++k) {
        sum += static_cast<double>(b[static_cast<size_t>(o * rank + k)]) *
               a[static_cast<size_t>(k * in + i)];
      }
      size_t at = static_cast<size_t>(transposed ? i * out + o : o * in + i);
      w[at] = static_cast<float>(w[at] + scale * sum);
    }
  }
}

} // namespace

namespace tailor::runtime {

std::vector<StateEntry> listStates(const LoadedPlan &plan) {
  std::vector<StateEntry> entries;
  const auto *states = plan.root().states();
  if (!states) {
    return entries;
  }
  for (const fb::State *state : *states) {
    std::string kind = state->kind()->str();
    DType dtype = plan.bufferDType(state->buffer());
    const fb::StateShard *shard = state->shard();
    if (!shard) {
      entries.push_back({state->name()->str(), state->parameter()->str(), kind,
                         dtype, plan.bufferShape(state->buffer()), false});
      continue;
    }
    for (uint32_t i = 0; i < shard->members()->size(); ++i) {
      std::string member = shard->members()->Get(i)->str();
      const fb::Parameter *param = findParameter(plan, member);
      std::vector<int64_t> shape =
          param ? parameterShape(plan, *param)
                : std::vector<int64_t>{shard->numels()->Get(i)};
      entries.push_back(
          {member + "." + kind, member, kind, dtype, std::move(shape), true});
    }
  }
  return entries;
}

} // namespace tailor::runtime

extern "C" {

int tailor_plan_parameter_count(const tailor_plan *plan) {
  return guardValue(__func__, 0, [&]() -> int {
    if (!isLive(plan)) {
      badPlan(plan);
      return 0;
    }
    const auto *params = plan->plan->root().parameters();
    return params ? static_cast<int>(params->size()) : 0;
  });
}

tailor_status tailor_plan_parameter_info(const tailor_plan *plan, int index,
                                         tailor_parameter_info *info) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(plan)) {
      return badPlan(plan);
    }
    if (!info) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "info is null");
    }
    if (index < 0 || index >= tailor_plan_parameter_count(plan)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "no parameter " + std::to_string(index) + " (the plan has " +
                      std::to_string(tailor_plan_parameter_count(plan)) + ")");
    }
    const LoadedPlan &loaded = *plan->plan;
    const fb::Parameter &param =
        *loaded.root().parameters()->Get(static_cast<uint32_t>(index));
    std::vector<int64_t> shape = parameterShape(loaded, param);
    if (tailor_status status =
            fillShape("parameter '" + param.name()->str() + "'", shape,
                      info->rank, info->shape);
        status != TAILOR_OK) {
      return status;
    }
    info->name = param.name()->c_str();
    info->file_name =
        param.export_name() ? param.export_name()->c_str() : info->name;
    DType dtype = parameterDType(loaded, param);
    info->dtype = static_cast<tailor_dtype>(dtype);
    info->bytes = denseBytes(dtype, shape);
    info->trainable = param.trainable() ? 1 : 0;
    info->quantized = param.quant() ? 1 : 0;
    info->sharded = param.shard() ? 1 : 0;
    // A quantized weight is stored as Linear's [out, in]; its source file
    // may hold the transpose (TorchScript's MatMul weights).
    bool sourceTransposed = param.quant() && param.quant()->source_transposed();
    info->transposed = param.export_transposed() || sourceTransposed ? 1 : 0;
    return ok();
  });
}

int tailor_plan_state_count(const tailor_plan *plan) {
  return guardValue(__func__, 0, [&]() -> int {
    if (!isLive(plan)) {
      badPlan(plan);
      return 0;
    }
    return static_cast<int>(plan->states.size());
  });
}

tailor_status tailor_plan_state_info(const tailor_plan *plan, int index,
                                     tailor_state_info *info) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(plan)) {
      return badPlan(plan);
    }
    if (!info) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "info is null");
    }
    if (index < 0 || static_cast<size_t>(index) >= plan->states.size()) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "no state " + std::to_string(index) + " (the plan has " +
                      std::to_string(plan->states.size()) + ")");
    }
    const StateEntry &entry = plan->states[static_cast<size_t>(index)];
    if (tailor_status status = fillShape("state '" + entry.name + "'",
                                         entry.shape, info->rank, info->shape);
        status != TAILOR_OK) {
      return status;
    }
    info->name = entry.name.c_str();
    info->parameter = entry.parameter.c_str();
    info->kind = entry.kind.c_str();
    info->dtype = static_cast<tailor_dtype>(entry.dtype);
    info->bytes = denseBytes(entry.dtype, entry.shape);
    info->sharded = entry.sharded ? 1 : 0;
    return ok();
  });
}

tailor_status tailor_session_set_parameter(tailor_session *session,
                                           const char *name, tailor_dtype dtype,
                                           const int64_t *shape, int rank,
                                           const void *data, size_t bytes) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    if (!name || (!data && bytes) || (!shape && rank)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "name, data and shape must not be null");
    }
    if (rank < 0 || rank > TAILOR_MAX_RANK) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("parameter '") + name + "': rank " +
                      std::to_string(rank) + " is outside [0, " +
                      std::to_string(TAILOR_MAX_RANK) + "]");
    }
    Session &s = *session->session;
    const fb::Parameter *param = findParameter(s.plan(), name);
    if (!param) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("the plan has no parameter '") + name + "'");
    }
    if (std::string problem = unwritable(*param); !problem.empty()) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, problem);
    }
    DType expected = s.plan().bufferDType(param->buffer());
    if (dtypeCode(dtype) != static_cast<int>(expected)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("parameter '") + name + "' is " +
                      dtypeName(expected) + ", got " +
                      dtypeCodeName(dtypeCode(dtype)));
    }
    std::vector<int64_t> want = s.plan().bufferShape(param->buffer());
    std::vector<int64_t> got(shape, shape + rank);
    uint64_t wantBytes = s.plan().bufferBytes(param->buffer());
    if (got != want || bytes != wantBytes) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("parameter '") + name + "' has shape " +
                      formatShape(want) + " (" + std::to_string(wantBytes) +
                      " bytes), got " + formatShape(got) + " (" +
                      std::to_string(bytes) + " bytes)");
    }
    std::memcpy(s.bufferData(param->buffer()), data, bytes);
    return syncBuffers(s, {param->buffer()}, /*toHost=*/false);
  });
}

tailor_status tailor_session_load_safetensors(tailor_session *session,
                                              const char *path, int *loaded) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    if (!path) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "path is null");
    }
    if (loaded) {
      *loaded = 0;
    }
    std::string error;
    std::unique_ptr<SafetensorsFile> file = SafetensorsFile::open(path, error);
    if (!file) {
      return fileError(error);
    }
    Session &s = *session->session;
    std::vector<TensorSlot> slots;
    for (const auto &[tensorName, tensor] : file->tensors()) {
      const fb::Parameter *param =
          findParameterByFileName(s.plan(), tensorName);
      if (!param) {
        return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                    file->name() + ": tensor '" + tensorName +
                        "' names no parameter of the plan");
      }
      if (std::string problem = unwritable(*param); !problem.empty()) {
        return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                    file->name() + ": tensor '" + tensorName + "': " + problem);
      }
      slots.push_back(slotOf(s, *param, tensorName));
      const TensorSlot &slot = slots.back();
      if (slot.transposed &&
          tensor.dtype != tailor::train::detail::safetensorsDType(slot.dtype)) {
        return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                    file->name() + ": tensor '" + tensorName + "' is " +
                        tensor.dtype + ", expected " +
                        tailor::train::detail::safetensorsDType(slot.dtype) +
                        " (a transposed parameter is not converted)");
      }
    }
    // Exactly the slots named, with their file shapes and dtypes.
    if (!tailor::train::detail::checkTensors(*file, slots, "", /*toF32=*/true,
                                             error)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, error);
    }
    tailor::train::detail::copyTensors(*file, slots, "");
    std::vector<uint32_t> buffers;
    for (const TensorSlot &slot : slots) {
      buffers.push_back(slot.buffer);
    }
    if (tailor_status status = syncBuffers(s, buffers, false);
        status != TAILOR_OK) {
      return status;
    }
    if (loaded) {
      *loaded = static_cast<int>(slots.size());
    }
    return ok();
  });
}

} // extern "C"

namespace {

/// Whether the plan records which weights Hugging Face stores [in, out]
/// (Parameter.export_fan_in_fan_out, format 1.15).
bool recordsFanInFanOut(const LoadedPlan &plan) {
  return plan.root().version() % 100 >= 15;
}

/// Says on stderr (as PEFT warns) that adapter_config.json's fan_in_fan_out
/// disagrees with the layout of `modules`' weights, which the merge follows.
void warnFanInFanOut(const SafetensorsFile &file, bool fanInFanOut,
                     const std::vector<std::string> &modules) {
  std::string names = "'" + modules.front() + ".weight'";
  if (modules.size() > 1) {
    names += " and " + std::to_string(modules.size() - 1) + " more";
  }
  std::fprintf(stderr,
               "tailor: warning: %s: adapter_config.json says fan_in_fan_out "
               "%s, but the model stores %s %s; merging as the weights' "
               "layout requires (PEFT does the same)\n",
               file.name().c_str(), fanInFanOut ? "true" : "false",
               names.c_str(),
               fanInFanOut ? "[out, in] (Linear)" : "[in, out] (Conv1D)");
}

/// Pairs the adapter's lora_A/lora_B tensors by module and finds each
/// module's base weight; checks shapes against it. The weight's layout
/// decides whether B A lands transposed, as PEFT decides it from the module
/// type: a plan from 1.15 records it, and `fanInFanOut` (the config's flag)
/// only stands in for it in older plans.
tailor_status planMerges(const LoadedPlan &plan, const SafetensorsFile &file,
                         bool fanInFanOut, std::vector<LoraMerge> &merges) {
  const std::string prefix = tailor::train::detail::kPeftPrefix;
  bool recorded = recordsFanInFanOut(plan);
  std::vector<std::string> disagreeing, unknown;
  std::map<std::string, LoraMerge> byModule;
  for (const auto &[name, tensor] : file.tensors()) {
    std::string module =
        name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
    bool isA = module.size() > 14 &&
               module.compare(module.size() - 14, 14, ".lora_A.weight") == 0;
    bool isB = module.size() > 14 &&
               module.compare(module.size() - 14, 14, ".lora_B.weight") == 0;
    if (!isA && !isB) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  file.name() + ": tensor '" + name +
                      "' is not a LoRA weight (<module>.lora_A.weight or "
                      ".lora_B.weight)");
    }
    if (tensor.shape.size() != 2) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  file.name() + ": tensor '" + name + "' is not 2-D");
    }
    module.resize(module.size() - 14);
    LoraMerge &merge = byModule[module];
    merge.module = module;
    (isA ? merge.a : merge.b) = &tensor;
  }
  for (auto &[module, merge] : byModule) {
    if (!merge.a || !merge.b) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  file.name() + ": module '" + module + "' has lora_" +
                      (merge.a ? "A" : "B") + " but no lora_" +
                      (merge.a ? "B" : "A"));
    }
    merge.base = findParameterByFileName(plan, module + ".weight");
    if (!merge.base) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  file.name() + ": the plan has no weight '" + module +
                      ".weight' for the adapter's module '" + module + "'");
    }
    if (const fb::Quantization *quant = merge.base->quant()) {
      // W + s B A would have to be quantized again: not the weights PEFT
      // runs LoRA on (dequant(W) x + s B (A x)).
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  file.name() + ": module '" + module + "': the plan stores '" +
                      module + ".weight' quantized (" +
                      quant->scheme()->str() +
                      "), and merging LoRA into it would change the "
                      "quantized weights; compile the plan with --adapter "
                      "DIR, which keeps LoRA unmerged beside them as PEFT "
                      "runs it");
    }
    if (std::string problem = unwritable(*merge.base); !problem.empty()) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  file.name() + ": module '" + module + "': " + problem);
    }
    std::vector<int64_t> shape = plan.bufferShape(merge.base->buffer());
    if (plan.bufferDType(merge.base->buffer()) != DType::F32 ||
        shape.size() != 2) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  file.name() + ": weight '" + module +
                      ".weight' is not a 2-D f32 tensor; only those merge");
    }
    if (merge.base->export_transposed()) {
      std::swap(shape[0], shape[1]);
    }
    merge.fanInFanOut =
        recorded ? merge.base->export_fan_in_fan_out() : fanInFanOut;
    if (merge.fanInFanOut != fanInFanOut) {
      disagreeing.push_back(module);
    }
    if (!recorded && shape[0] == shape[1]) {
      unknown.push_back(module);
    }
    // B [out, r] A [r, in] must make W [out, in], or with fan_in_fan_out
    // its transpose W [in, out]. Without the plan's record, a shape that
    // fits only the other way is refused (the config's fan_in_fan_out is
    // wrong for it), and a square weight merges as the config says.
    int64_t out = shape[merge.fanInFanOut ? 1 : 0];
    int64_t in = shape[merge.fanInFanOut ? 0 : 1];
    if (merge.a->shape[0] != merge.b->shape[1] ||
        merge.b->shape[0] != out || merge.a->shape[1] != in) {
      std::string how =
          recorded ? (merge.fanInFanOut
                          ? ", transposed (the weight is [in, out], Conv1D),"
                          : " (the weight is [out, in], Linear)")
                   : (merge.fanInFanOut
                          ? ", transposed (fan_in_fan_out is true),"
                          : " (fan_in_fan_out is false)");
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  file.name() + ": module '" + module + "': lora_B " +
                      formatShape(merge.b->shape) + " x lora_A " +
                      formatShape(merge.a->shape) + how +
                      " does not make weight " + formatShape(shape));
    }
    for (const SafetensorsTensor *t : {merge.a, merge.b}) {
      if (t->dtype != "F32" && t->dtype != "F16" && t->dtype != "BF16" &&
          t->dtype != "F64") {
        return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                    file.name() + ": module '" + module +
                        "': LoRA weights are " + t->dtype +
                        ", expected a float type");
      }
    }
    merges.push_back(merge);
  }
  if (!disagreeing.empty()) {
    warnFanInFanOut(file, fanInFanOut, disagreeing);
  }
  if (!unknown.empty()) {
    // Its shape cannot show a wrong flag either: say so, not merge silently.
    std::fprintf(stderr,
                 "tailor: warning: %s: the plan (format %u.%u) does not "
                 "record whether '%s.weight'%s is stored [in, out]; merging "
                 "as adapter_config.json's fan_in_fan_out (%s) says; compile "
                 "the plan again to have the weights' layout decide\n",
                 file.name().c_str(), plan.root().version() / 100,
                 plan.root().version() % 100, unknown.front().c_str(),
                 unknown.size() > 1
                     ? (" and " + std::to_string(unknown.size() - 1) +
                        " more square weights")
                           .c_str()
                     : "",
                 fanInFanOut ? "true" : "false");
  }
  return ok();
}

/// A forward plan with LoRA parameters takes the adapter's weights as they
/// are (their shapes check r; the plan holds no lora_alpha to check).
tailor_status loadLoraParameters(Session &session,
                                 const SafetensorsFile &file) {
  const std::string prefix = tailor::train::detail::kPeftPrefix;
  std::vector<TensorSlot> slots;
  for (const fb::Parameter *param : *session.plan().root().parameters()) {
    std::string name = param->name()->str();
    if (name.size() > 14 &&
        (name.compare(name.size() - 14, 14, ".lora_A.weight") == 0 ||
         name.compare(name.size() - 14, 14, ".lora_B.weight") == 0)) {
      if (std::string problem = unwritable(*param); !problem.empty()) {
        return fail(TAILOR_ERROR_INVALID_ARGUMENT, problem);
      }
      slots.push_back(slotOf(session, *param, name));
    }
  }
  std::string error;
  if (!tailor::train::detail::checkTensors(file, slots, prefix, true, error)) {
    return fail(TAILOR_ERROR_INVALID_ARGUMENT, error);
  }
  tailor::train::detail::copyTensors(file, slots, prefix);
  std::vector<uint32_t> buffers;
  for (const TensorSlot &slot : slots) {
    buffers.push_back(slot.buffer);
  }
  return syncBuffers(session, buffers, false);
}

bool hasLoraParameters(const LoadedPlan &plan) {
  if (const auto *params = plan.root().parameters()) {
    for (const fb::Parameter *param : *params) {
      std::string_view name = param->name()->string_view();
      if (name.size() > 14 &&
          name.substr(name.size() - 14) == ".lora_A.weight") {
        return true;
      }
    }
  }
  return false;
}

/// A plan without LoRA parameters: W += scale * B A for each adapted
/// weight, found by its Hugging Face name.
tailor_status mergeAdapter(Session &s, const SafetensorsFile &file,
                           const tailor::train::PeftAdapterConfig &config) {
  std::vector<LoraMerge> merges;
  if (tailor_status status =
          planMerges(s.plan(), file, config.fanInFanOut, merges);
      status != TAILOR_OK) {
    return status;
  }
  std::vector<uint32_t> buffers;
  for (const LoraMerge &merge : merges) {
    buffers.push_back(merge.base->buffer());
  }
  if (tailor_status status = syncBuffers(s, buffers, true);
      status != TAILOR_OK) {
    return status;
  }
  double scale =
      config.alpha / (config.useRslora ? std::sqrt(config.r) : config.r);
  for (const LoraMerge &merge : merges) {
    mergeLora(merge, s, scale);
  }
  return syncBuffers(s, buffers, false);
}

} // namespace

extern "C" tailor_status tailor_session_apply_adapter(tailor_session *session,
                                                      const char *dir) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    if (!dir) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "dir is null");
    }
    std::string error;
    tailor::train::PeftAdapterConfig config;
    if (!tailor::train::readPeftAdapterConfig(dir, config, error)) {
      return fileError(error);
    }
    std::unique_ptr<SafetensorsFile> file = SafetensorsFile::open(
        std::string(dir) + "/" + tailor::train::detail::kAdapterModelFile,
        error);
    if (!file) {
      return fileError(error);
    }
    Session &s = *session->session;
    if (!hasLoraParameters(s.plan())) {
      return mergeAdapter(s, *file, config);
    }
    if (s.plan().root().training()) {
      // A training plan knows its LoraConfig: r, lora_alpha and use_rslora
      // are checked against it as `tailor train --init-adapter` does.
      tailor::train::CheckpointLayout layout;
      if (!tailor::train::buildCheckpointLayout(s.plan(), s, layout, error) ||
          !tailor::train::loadPeftAdapter(layout, dir, error)) {
        return fileError(error);
      }
      if (std::string problem = tailor::train::syncLayout(s, layout, false);
          !problem.empty()) {
        return fail(TAILOR_ERROR_INTERNAL, problem);
      }
      return ok();
    }
    return loadLoraParameters(s, *file);
  });
}
