//===- CApi.cpp - the runtime's C API over LoadedPlan and Session ---------===//

#include "runtime/CApiHandles.h"
#include "runtime/MemoryCategory.h"
#include "runtime/Status.h"
#include "runtime/comm/Communicator.h"

#include <cstring>
#include <optional>

using namespace tailor::runtime;
namespace fb = tailor::plan;

static_assert(kMaxPlanRank == TAILOR_MAX_RANK,
              "tailor_tensor_info must hold every rank a plan may have");

namespace tailor::runtime {

void LiveHandles::add(const void *handle) {
  std::lock_guard<std::mutex> lock(mutex);
  handles.insert(handle);
}

bool LiveHandles::remove(const void *handle) {
  std::lock_guard<std::mutex> lock(mutex);
  return handles.erase(handle) == 1;
}

bool LiveHandles::contains(const void *handle) {
  std::lock_guard<std::mutex> lock(mutex);
  return handles.count(handle) == 1;
}

// Never destroyed: a handle freed during static destruction still finds
// its registry.
LiveHandles &livePlans() {
  static LiveHandles *handles = new LiveHandles();
  return *handles;
}

LiveHandles &liveSessions() {
  static LiveHandles *handles = new LiveHandles();
  return *handles;
}

LiveHandles &liveTrainers() {
  static LiveHandles *handles = new LiveHandles();
  return *handles;
}

tailor_status badPlan(const tailor_plan *plan) {
  return fail(TAILOR_ERROR_INVALID_ARGUMENT,
              plan ? "plan is not a live tailor_plan (freed already, or not "
                     "made by tailor_plan_load)"
                   : "plan is null");
}

tailor_status badSession(const tailor_session *session) {
  return fail(TAILOR_ERROR_INVALID_ARGUMENT,
              session ? "session is not a live tailor_session (freed "
                        "already, or not made by tailor_session_create)"
                      : "session is null");
}

tailor_status badTrainer(const tailor_trainer *trainer) {
  return fail(TAILOR_ERROR_INVALID_ARGUMENT,
              trainer ? "trainer is not a live tailor_trainer (freed "
                        "already, or not made by tailor_trainer_create)"
                      : "trainer is null");
}

tailor_plan *newPlanHandle(std::unique_ptr<LoadedPlan> loaded) {
  auto *handle = new tailor_plan{std::shared_ptr<LoadedPlan>(std::move(loaded)),
                                 {}};
  handle->states = listStates(*handle->plan);
  livePlans().add(handle);
  return handle;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

/// Describes the tensor named `name` held in plan buffer `buffer`.
tailor_status fillBufferInfo(const LoadedPlan &plan,
                             const flatbuffers::String *name, uint32_t buffer,
                             tailor_tensor_info *info) {
  if (!info) {
    return fail(TAILOR_ERROR_INVALID_ARGUMENT, "info is null");
  }
  std::vector<int64_t> shape = plan.bufferShape(buffer);
  // The verifier bounds every rank by kMaxPlanRank; info->shape holds
  // TAILOR_MAX_RANK, so check rather than write past it.
  if (shape.size() > TAILOR_MAX_RANK) {
    return fail(TAILOR_ERROR_INVALID_PLAN,
                "tensor '" + name->str() + "' has rank " +
                    std::to_string(shape.size()) + ", more than " +
                    std::to_string(TAILOR_MAX_RANK));
  }
  info->name = name->c_str();
  info->dtype = static_cast<tailor_dtype>(plan.bufferDType(buffer));
  info->rank = static_cast<int>(shape.size());
  std::memset(info->shape, 0, sizeof(info->shape));
  std::copy(shape.begin(), shape.end(), info->shape);
  info->bytes = plan.bufferBytes(buffer);
  return ok();
}

} // namespace tailor::runtime

static tailor_status fillInfo(const LoadedPlan &plan,
                              const fb::Binding &binding,
                              tailor_tensor_info *info) {
  return fillBufferInfo(plan, binding.name(), binding.buffer(), info);
}

static const fb::Binding *findBinding(
    const flatbuffers::Vector<flatbuffers::Offset<fb::Binding>> *bindings,
    const char *name) {
  if (!bindings || !name) {
    return nullptr;
  }
  for (const fb::Binding *binding : *bindings) {
    if (binding->name()->string_view() == name) {
      return binding;
    }
  }
  return nullptr;
}

static tailor_memory_report reportOf(const CategoryBytes &bytes) {
  auto of = [&](fb::Category category) {
    return bytes[static_cast<size_t>(category)];
  };
  tailor_memory_report report;
  report.parameters = of(fb::Category::Parameters);
  report.constants = of(fb::Category::Constants);
  report.activations = of(fb::Category::Activations);
  report.workspace = of(fb::Category::Workspace);
  report.optimizer_state = of(fb::Category::OptimizerState);
  report.gradients = of(fb::Category::Gradients);
  report.kv_cache = of(fb::Category::KvCache);
  report.total = totalBytes(bytes);
  return report;
}

namespace {

/// How plans load through the C API: a layer split's plan as the stage of
/// this process's rank when a launcher (mpirun, torchrun, SLURM) says
/// which, so every rank of the job loads its own part.
LoadOptions launchLoadOptions() {
  LoadOptions options;
  comm::LaunchInfo launch;
  if (comm::detectLaunch(launch).empty() && launch.launcher != "none") {
    options.rank = launch.rank;
    options.worldSize = launch.worldSize;
  }
  return options;
}

/// A file that cannot be read is the caller's to fix (a path, a copy that
/// left the weights behind); anything else is the plan's.
tailor_status loadStatus(LoadFailure failure) {
  return failure == LoadFailure::Io ? TAILOR_ERROR_IO
                                    : TAILOR_ERROR_INVALID_PLAN;
}

} // namespace

extern "C" {

tailor_status tailor_plan_load(const char *path, tailor_plan **plan) {
  return guard(__func__, [&]() -> tailor_status {
    if (!path || !plan) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "path and plan must not be null");
    }
    *plan = nullptr;
    std::string error;
    LoadFailure failure = LoadFailure::InvalidPlan;
    std::unique_ptr<LoadedPlan> loaded =
        LoadedPlan::load(path, launchLoadOptions(), error, &failure);
    if (!loaded) {
      return fail(loadStatus(failure), error);
    }
    *plan = newPlanHandle(std::move(loaded));
    return ok();
  });
}

tailor_status tailor_plan_load_from_memory(const void *data, size_t size,
                                           const char *base_dir,
                                           tailor_plan **plan) {
  return guard(__func__, [&]() -> tailor_status {
    if (!plan || (!data && size)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "data and plan must not be null");
    }
    *plan = nullptr;
    std::string error;
    LoadFailure failure = LoadFailure::InvalidPlan;
    std::unique_ptr<LoadedPlan> loaded = LoadedPlan::loadFromMemory(
        data, size, base_dir ? base_dir : ".", "<memory>", launchLoadOptions(),
        error, &failure);
    if (!loaded) {
      return fail(loadStatus(failure), error);
    }
    *plan = newPlanHandle(std::move(loaded));
    return ok();
  });
}

void tailor_plan_free(tailor_plan *plan) {
  guardValue(__func__, 0, [&] {
    if (plan && !livePlans().remove(plan)) {
      badPlan(plan);
      return 0;
    }
    delete plan;
    return 0;
  });
}

int tailor_plan_input_count(const tailor_plan *plan) {
  return guardValue(__func__, 0, [&]() -> int {
    if (!isLive(plan)) {
      badPlan(plan);
      return 0;
    }
    if (!plan->plan->root().inputs()) {
      return 0;
    }
    return static_cast<int>(plan->plan->root().inputs()->size());
  });
}

int tailor_plan_output_count(const tailor_plan *plan) {
  return guardValue(__func__, 0, [&]() -> int {
    if (!isLive(plan)) {
      badPlan(plan);
      return 0;
    }
    if (!plan->plan->root().outputs()) {
      return 0;
    }
    return static_cast<int>(plan->plan->root().outputs()->size());
  });
}

int tailor_plan_entry_count(const tailor_plan *plan) {
  return guardValue(__func__, 0, [&]() -> int {
    if (!isLive(plan)) {
      badPlan(plan);
      return 0;
    }
    const auto *entries = plan->plan->root().entries();
    return entries && entries->size() > 0 ? static_cast<int>(entries->size())
                                          : 1;
  });
}

const char *tailor_plan_entry_name(const tailor_plan *plan, int index) {
  return guardValue<const char *>(__func__, nullptr, [&]() -> const char * {
    if (!isLive(plan)) {
      badPlan(plan);
      return nullptr;
    }
    if (index < 0 || index >= tailor_plan_entry_count(plan)) {
      return nullptr;
    }
    const auto *entries = plan->plan->root().entries();
    if (!entries || entries->size() == 0) {
      return "forward";
    }
    return entries->Get(static_cast<uint32_t>(index))->name()->c_str();
  });
}

int tailor_plan_input_entry(const tailor_plan *plan, int index) {
  return guardValue(__func__, -1, [&]() -> int {
    if (!isLive(plan)) {
      badPlan(plan);
      return -1;
    }
    if (index < 0 || index >= tailor_plan_input_count(plan)) {
      return -1;
    }
    return static_cast<int>(plan->plan->root().inputs()->Get(index)->entry());
  });
}

int tailor_plan_output_entry(const tailor_plan *plan, int index) {
  return guardValue(__func__, -1, [&]() -> int {
    if (!isLive(plan)) {
      badPlan(plan);
      return -1;
    }
    if (index < 0 || index >= tailor_plan_output_count(plan)) {
      return -1;
    }
    return static_cast<int>(plan->plan->root().outputs()->Get(index)->entry());
  });
}

tailor_status tailor_plan_input_info(const tailor_plan *plan, int index,
                                     tailor_tensor_info *info) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(plan)) {
      return badPlan(plan);
    }
    if (index < 0 || index >= tailor_plan_input_count(plan)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "no input " + std::to_string(index));
    }
    return fillInfo(*plan->plan, *plan->plan->root().inputs()->Get(index),
                    info);
  });
}

tailor_status tailor_plan_output_info(const tailor_plan *plan, int index,
                                      tailor_tensor_info *info) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(plan)) {
      return badPlan(plan);
    }
    if (index < 0 || index >= tailor_plan_output_count(plan)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "no output " + std::to_string(index));
    }
    return fillInfo(*plan->plan, *plan->plan->root().outputs()->Get(index),
                    info);
  });
}

tailor_status tailor_plan_generation_info(const tailor_plan *plan,
                                          tailor_generation_info *info) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(plan)) {
      return badPlan(plan);
    }
    if (!info) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "info must not be null");
    }
    const fb::Generation *generation = plan->plan->root().generation();
    if (!generation) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "the plan is not a generation plan (compile it with "
                  "`tailor compile --task generate --max-seq-len N`)");
    }
    *info = tailor_generation_info{};
    info->max_seq_len = generation->max_seq_len();
    info->batch = generation->batch();
    info->vocab_size = generation->vocab_size();
    if (const auto *eos = generation->eos_token_ids()) {
      for (int64_t id : *eos) {
        if (info->eos_count < TAILOR_MAX_EOS_IDS) {
          info->eos_token_ids[info->eos_count++] = id;
        }
      }
    }
    // The prefill entry's chunk is its ids' width (the plan verifier
    // checked the binding and its entry).
    if (const fb::Binding *ids =
            findBinding(plan->plan->root().inputs(), "prefill_input_ids")) {
      info->prefill_chunk = static_cast<int>(
          plan->plan->bufferShape(ids->buffer()).back());
    }
    return ok();
  });
}

tailor_status tailor_plan_memory(const tailor_plan *plan,
                                 tailor_memory_report *report) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(plan)) {
      return badPlan(plan);
    }
    if (!report) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "plan and report must not be null");
    }
    *report = reportOf(arenaBytes(plan->plan->root()));
    return ok();
  });
}

tailor_status tailor_session_create(const tailor_plan *plan,
                                    const tailor_session_options *options,
                                    tailor_session **session) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(plan)) {
      return badPlan(plan);
    }
    if (!session) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "session must not be null");
    }
    *session = nullptr;
    int threads = options ? options->num_threads : 0;
    if (threads < 0) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "num_threads must be >= 0, got " + std::to_string(threads));
    }
    std::string error;
    int status = TAILOR_OK;
    std::unique_ptr<Session> created =
        Session::create(*plan->plan, threads, error, status);
    if (!created) {
      return fail(static_cast<tailor_status>(status), error);
    }
    *session = new tailor_session{plan->plan, std::move(created)};
    liveSessions().add(*session);
    return ok();
  });
}

void tailor_session_free(tailor_session *session) {
  guardValue(__func__, 0, [&] {
    if (session && !liveSessions().remove(session)) {
      badSession(session);
      return 0;
    }
    delete session;
    return 0;
  });
}

tailor_status tailor_session_set_input(tailor_session *session,
                                       const char *name, tailor_dtype dtype,
                                       const int64_t *shape, int rank,
                                       const void *data, size_t bytes) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    if (!name || (!data && bytes) || (!shape && rank)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "null argument");
    }
    if (rank < 0 || rank > TAILOR_MAX_RANK) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("input '") + name + "': rank " +
                      std::to_string(rank) + " is outside [0, " +
                      std::to_string(TAILOR_MAX_RANK) + "]");
    }
    const LoadedPlan &plan = session->session->plan();
    const fb::Binding *binding = findBinding(plan.root().inputs(), name);
    if (!binding) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("the plan has no input '") + name + "'");
    }
    tailor_tensor_info info;
    if (tailor_status status = fillInfo(plan, *binding, &info);
        status != TAILOR_OK) {
      return status;
    }
    if (dtypeCode(dtype) != static_cast<int>(info.dtype)) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("input '") + name + "' is " +
                      dtypeName(static_cast<DType>(info.dtype)) + ", got " +
                      dtypeCodeName(dtypeCode(dtype)));
    }
    bool sameShape = rank == info.rank;
    for (int i = 0; sameShape && i < rank; ++i) {
      sameShape = shape[i] == info.shape[i];
    }
    if (!sameShape || bytes != info.bytes) {
      std::string expected, got;
      for (int i = 0; i < info.rank; ++i) {
        expected += (i ? ", " : "") + std::to_string(info.shape[i]);
      }
      for (int i = 0; i < rank; ++i) {
        got += (i ? ", " : "") + std::to_string(shape[i]);
      }
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("input '") + name + "' has shape [" + expected +
                      "] (" + std::to_string(info.bytes) + " bytes), got [" +
                      got + "] (" + std::to_string(bytes) + " bytes)");
    }
    std::memcpy(session->session->bufferData(binding->buffer()), data, bytes);
    return ok();
  });
}

tailor_status tailor_session_run(tailor_session *session) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    std::string error = session->session->run();
    if (!error.empty()) {
      return fail(TAILOR_ERROR_EXECUTION, error);
    }
    return ok();
  });
}

/// Why a ZeRO-3 parameter has no tensor of its own to hand out.
static std::string shardedParameterMessage(const fb::Parameter &param) {
  return "parameter '" + param.name()->str() +
         "' is sharded over ranks (ZeRO-3): this rank holds only its chunk "
         "of a bucket; checkpoints and the trainer's weight files hold the "
         "whole tensor";
}

tailor_status tailor_session_tensor(tailor_session *session, const char *name,
                                    void **data, tailor_tensor_info *info) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    if (!name || !data) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "null argument");
    }
    const LoadedPlan &plan = session->session->plan();
    const fb::Plan &root = plan.root();
    auto found = [&](const flatbuffers::String *tensorName,
                     uint32_t buffer) -> tailor_status {
      // A GPU session's tensors live on the device: refresh the host copy.
      if (std::string problem = session->session->download(buffer);
          !problem.empty()) {
        return fail(TAILOR_ERROR_INTERNAL, problem);
      }
      *data = session->session->bufferData(buffer);
      return info ? fillBufferInfo(plan, tensorName, buffer, info) : ok();
    };
    if (root.parameters()) {
      for (const fb::Parameter *param : *root.parameters()) {
        if (param->name()->string_view() == name) {
          if (param->shard()) {
            return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                        shardedParameterMessage(*param));
          }
          return found(param->name(), param->buffer());
        }
      }
    }
    if (root.states()) {
      for (const fb::State *state : *root.states()) {
        if (state->name()->string_view() == name) {
          return found(state->name(), state->buffer());
        }
      }
    }
    return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                std::string("the plan has no parameter or state '") + name +
                    "'");
  });
}

tailor_status tailor_session_tensor_upload(tailor_session *session,
                                           const char *name) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    if (!name) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "null argument");
    }
    const fb::Plan &root = session->session->plan().root();
    std::optional<uint32_t> buffer;
    if (root.parameters()) {
      for (const fb::Parameter *param : *root.parameters()) {
        if (param->name()->string_view() == name) {
          if (param->shard()) {
            return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                        shardedParameterMessage(*param));
          }
          buffer = param->buffer();
        }
      }
    }
    if (root.states()) {
      for (const fb::State *state : *root.states()) {
        if (state->name()->string_view() == name) {
          buffer = state->buffer();
        }
      }
    }
    if (!buffer) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("the plan has no parameter or state '") + name +
                      "'");
    }
    if (std::string problem = session->session->upload(*buffer);
        !problem.empty()) {
      return fail(TAILOR_ERROR_INTERNAL, problem);
    }
    return ok();
  });
}

tailor_status tailor_session_run_entry(tailor_session *session,
                                       const char *name) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    if (!name) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "session and name must not be null");
    }
    int entry = session->session->findEntry(name);
    if (entry < 0) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("the plan has no entry '") + name + "'");
    }
    std::string error =
        session->session->runEntry(static_cast<uint32_t>(entry));
    if (!error.empty()) {
      return fail(TAILOR_ERROR_EXECUTION, error);
    }
    return ok();
  });
}

tailor_status tailor_session_output(const tailor_session *session,
                                    const char *name, const void **data,
                                    tailor_tensor_info *info) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    if (!name || !data) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT, "null argument");
    }
    const LoadedPlan &plan = session->session->plan();
    const fb::Binding *binding = findBinding(plan.root().outputs(), name);
    if (!binding) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  std::string("the plan has no output '") + name + "'");
    }
    *data = session->session->bufferData(binding->buffer());
    if (info) {
      return fillInfo(plan, *binding, info);
    }
    return ok();
  });
}

tailor_status tailor_session_memory(const tailor_session *session,
                                    tailor_memory_report *report) {
  return guard(__func__, [&]() -> tailor_status {
    if (!isLive(session)) {
      return badSession(session);
    }
    if (!report) {
      return fail(TAILOR_ERROR_INVALID_ARGUMENT,
                  "session and report must not be null");
    }
    *report = reportOf(session->session->allocatedBytes());
    return ok();
  });
}

} // extern "C"
