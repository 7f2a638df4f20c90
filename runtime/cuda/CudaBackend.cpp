//===- CudaBackend.cpp - arenas, streams and launches on a GPU ------------===//
//
// The plan's memory figures are the truth on the GPU as on the CPU: each
// Device arena is one cudaMalloc of exactly its planned size, and nothing
// else is allocated on the device except what the CUDA runtime and
// cuBLASLt keep for themselves (cuBLASLt's scratch is the plan's
// gemm_workspace arena) and the device context's 32-byte error record
// (DeviceContext.h). HostPinned arenas are cudaHostAlloc'd, Host ones
// aligned host allocations; only copy steps and launches on a Host stream
// touch them (the loader keeps every other launch and the collectives on
// Device arenas). A Host stream's launches are CPU kernels
// (runtime/cpu) with a pool of their own: optimizer offload's AdamW. From
// plan 1.16 each is a CUDA host function on the host stream's CUDA stream
// (cudaLaunchHostFunc), so it runs after the events that stream waits for
// while the other streams go on; before, it ran on this thread once every
// stream had drained.
//
// Steps run in plan order, each on its plan stream: launches through their
// launchers (runtime/cuda/*Launchers.cpp), copies with cudaMemcpyAsync,
// records and waits with events. An entry ends by synchronizing every
// stream, which is where asynchronous failures surface;
// TAILOR_CUDA_SYNC=1 synchronizes after every step to name the failing one.
// Then the device error record is read back (32 bytes): a kernel that met a
// bad index (a token id, a label, a gather index) or an integer divisor 0
// wrote it there with its step, and the entry fails with that step and the
// CPU kernel's message.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackend.h"

#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/DeviceContext.h"
#include "runtime/cuda/DeviceImage.h"
#include "runtime/cuda/FusedLaunchers.h"
#include "runtime/Session.h"
#include "runtime/comm/Communicator.h"
#include "runtime/include/tailor/runtime.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <cstring>
#include <sstream>
#include <thread>

namespace tailor::runtime::cuda {

namespace fb = tailor::plan;

namespace {
struct PreparedLaunch {
  const CudaKernelDef *kernel = nullptr;
  CudaCall call;
  /// A launch on a Host stream (optimizer offload): a CPU kernel over host
  /// arenas, run in the host stream's order (plan 1.16; before, once every
  /// stream had finished the work before it). What went wrong, written by
  /// the CUDA host function that ran it, read once its stream is synced.
  const KernelDef *hostKernel = nullptr;
  KernelCall hostCall;
  std::string hostFailure;
  std::string origin;
  uint32_t stream = 0;
};
} // namespace

/// GPU time per step, measured with CUDA events (TAILOR_PROFILE=1).
struct GpuProfile {
  bool enabled = false;
  /// Per plan op: start and stop events (created on first use), the
  /// milliseconds summed over runs and the runs.
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events;
  std::vector<double> milliseconds;
  std::vector<uint64_t> calls;
  /// Ops timed by the runSteps in flight, read once its streams are idle.
  std::vector<uint32_t> pending;
  /// Per op, what the report calls it: kernel name and origin.
  std::vector<std::pair<std::string, std::string>> names;

  std::string begin(uint32_t op, cudaStream_t stream);
  std::string end(uint32_t op, cudaStream_t stream);
  /// Adds the elapsed times of the pending ops (their streams synchronized).
  std::string collect();
  void print(const std::string &planName) const;
};

std::string GpuProfile::begin(uint32_t op, cudaStream_t stream) {
  auto &[start, stop] = events[op];
  if (!start) {
    if (cudaError_t e = cudaEventCreate(&start); e != cudaSuccess) {
      return cudaCallError("cudaEventCreate (profile)", e);
    }
    if (cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {
      return cudaCallError("cudaEventCreate (profile)", e);
    }
  }
  cudaError_t e = cudaEventRecord(start, stream);
  return e == cudaSuccess ? "" : cudaCallError("cudaEventRecord (profile)", e);
}

std::string GpuProfile::end(uint32_t op, cudaStream_t stream) {
  pending.push_back(op);
  cudaError_t e = cudaEventRecord(events[op].second, stream);
  return e == cudaSuccess ? "" : cudaCallError("cudaEventRecord (profile)", e);
}

std::string GpuProfile::collect() {
  for (uint32_t op : pending) {
    float ms = 0;
    cudaError_t e = cudaEventElapsedTime(&ms, events[op].first, events[op].second);
    if (e != cudaSuccess) {
      pending.clear();
      return cudaCallError("cudaEventElapsedTime (profile)", e);
    }
    milliseconds[op] += ms;
    ++calls[op];
  }
  pending.clear();
  return "";
}

void GpuProfile::print(const std::string &planName) const {
  if (!enabled) {
    return;
  }
  std::map<std::string, std::pair<double, uint64_t>> byKernel;
  double total = 0;
  std::vector<uint32_t> ops;
  for (uint32_t op = 0; op < milliseconds.size(); ++op) {
    if (calls[op] == 0) {
      continue;
    }
    auto &entry = byKernel[names[op].first];
    entry.first += milliseconds[op];
    entry.second += calls[op];
    total += milliseconds[op];
    ops.push_back(op);
  }
  std::vector<std::pair<std::string, std::pair<double, uint64_t>>> rows(
      byKernel.begin(), byKernel.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  std::fprintf(stderr, "tailor profile (%s, GPU): %.3f s in kernels\n",
               planName.c_str(), total / 1e3);
  for (const auto &[name, value] : rows) {
    std::fprintf(stderr, "  %-24s %9.3f s %5.1f%% %8llu calls\n", name.c_str(),
                 value.first / 1e3, total > 0 ? 100.0 * value.first / total : 0.0,
                 static_cast<unsigned long long>(value.second));
  }
  std::sort(ops.begin(), ops.end(), [&](uint32_t a, uint32_t b) {
    return milliseconds[a] > milliseconds[b];
  });
  std::fprintf(stderr, "tailor profile: the 25 costliest steps (ms per call)\n");
  for (size_t i = 0; i < ops.size() && i < 25; ++i) {
    uint32_t op = ops[i];
    std::fprintf(stderr, "  step %-6u %-22s %9.3f  %s\n", op,
                 names[op].first.c_str(), milliseconds[op] / double(calls[op]),
                 names[op].second.c_str());
  }
}

struct Impl {
  const LoadedPlan *plan = nullptr;
  /// The rank this process is, which places rank-strided buffers.
  int rank = 0;
  DeviceProperties device;
  std::vector<void *> arenas;
  /// Each arena's kind, which says how it was allocated and is freed.
  std::vector<fb::ArenaKind> arenaKinds;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> events;
  std::unique_ptr<DeviceContext> context;
  /// The device images as loaded (decompressed), kept while loaded.
  std::deque<std::vector<uint8_t>> imageBytes;
  /// One entry per plan op; launches prepared, other steps read from the plan.
  std::vector<PreparedLaunch> launches;
  /// Workers for Host-stream launches (made when the plan has any).
  std::unique_ptr<ThreadPool> hostPool;
  bool syncEachStep = false;
  /// TAILOR_PROFILE=1: a pair of timing events around every launch and
  /// collective, read after each runSteps; the GPU time per kernel and the
  /// costliest launches are printed to stderr when the session ends.
  GpuProfile profile;

  ~Impl() {
    profile.print(plan ? plan->name() : std::string("plan"));
    for (auto &[start, stop] : profile.events) {
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    }
    context.reset();
    for (cudaEvent_t event : events) {
      cudaEventDestroy(event);
    }
    for (cudaStream_t stream : streams) {
      cudaStreamDestroy(stream);
    }
    for (size_t a = 0; a < arenas.size(); ++a) {
      if (!arenas[a]) {
        continue;
      }
      switch (arenaKinds[a]) {
      case fb::ArenaKind::Device:
        cudaFree(arenas[a]);
        break;
      case fb::ArenaKind::HostPinned:
        cudaFreeHost(arenas[a]);
        break;
      case fb::ArenaKind::Host:
        std::free(arenas[a]);
        break;
      }
    }
  }
};

namespace {
/// Why a step of CudaBackend::create failed: the C API status and the
/// message (the plan's name is prefixed later); status TAILOR_OK when it
/// did not.
struct SetupError {
  int status = TAILOR_OK;
  std::string message;
  explicit operator bool() const { return status != TAILOR_OK; }
};

/// The device code chosen for this GPU, one image per module.
struct DeviceCodeChoice {
  std::vector<DeviceContext::Image> images;
  /// "module arch, ..." for messages.
  std::string archs;
};

/// The gemm_workspace arena, if the plan has one (cuBLASLt's scratch).
struct GemmWorkspace {
  void *memory = nullptr;
  size_t bytes = 0;
};

/// The CudaBackend of one session.
class GpuBackend final : public CudaBackend {
public:
  void *deviceBuffer(uint32_t index) const override;
  std::string upload(void *device, const void *host, size_t bytes) override;
  std::string download(void *host, const void *device, size_t bytes) override;
  std::string uploadArena(uint32_t arena, const void *host) override;
  std::string runSteps(uint32_t first, uint32_t count) override;
  /// Enqueues a collective on its stream through the communicator of its
  /// group (the world's, or a sub-group's from the group resolver).
  std::string runCollective(const plan::Collective &collective);
  const CategoryBytes &allocatedBytes() const override { return allocated; }
  uint64_t allocatedDeviceBytes() const override { return deviceBytes; }
  uint64_t allocatedHostBytes() const override { return hostBytes; }
  uint64_t bytesCopied() const override { return copiedBytes; }
  const std::string &deviceDescription() const override { return description; }

  // The steps of CudaBackend::create, in order.
  /// Opens the default GPU and describes it.
  SetupError openGpu();
  /// Per module, its cubin for this GPU's SM, else the PTX the driver
  /// compiles.
  SetupError chooseDeviceCode(DeviceCodeChoice &choice);
  SetupError chooseModuleCode(const std::string &module,
                              DeviceCodeChoice &choice);
  /// Proves the Device arenas fit in free GPU memory before allocating
  /// any, then allocates and zeroes every arena by its kind.
  SetupError allocateArenas(GemmWorkspace &workspace);
  /// Allocates arena `arena` (zeroed) as its kind says into `memory`.
  SetupError allocateArena(const fb::Arena &arena, void *&memory);
  SetupError createStreamsAndEvents();
  SetupError loadDeviceCode(const DeviceCodeChoice &choice,
                            const GemmWorkspace &workspace);
  /// Resolves and checks every launch once.
  SetupError prepareLaunches();
  /// A launch on a Host stream: its CPU kernel, checked over host arenas.
  SetupError prepareHostLaunch(uint32_t i, const fb::Launch &launch,
                               PreparedLaunch &prepared);
  /// Waits for every stream, then runs a Host-stream launch.
  std::string runHostLaunch(PreparedLaunch &launch);
  /// TAILOR_PROFILE: times every launch and collective from now on.
  void startProfile();
  /// The stream a profiled step runs on; null when not profiling or the
  /// step is not timed (events: record and wait).
  cudaStream_t timedStream(const fb::Op &op, uint32_t index) const;
  /// "step 12 (embedding, model.embed_tokens)" for messages.
  std::string stepName(uint32_t i) const;
  /// Waits for every stream, then reads the device error record: "" or the
  /// first failure, naming the step a kernel reported bad data in.
  std::string finishSteps(uint32_t first, uint32_t count);

  std::unique_ptr<Impl> impl;
  CategoryBytes allocated{};
  uint64_t deviceBytes = 0;
  uint64_t hostBytes = 0;
  uint64_t copiedBytes = 0;
  std::string description;
};
} // namespace

std::string GpuBackend::runCollective(const plan::Collective &collective) {
  const LoadedPlan &plan = *impl->plan;
  if (!comm) {
    return "the plan runs collectives over " +
           std::to_string(plan.root().world_size()) +
           " ranks but the session has no communicator";
  }
  comm::Communicator *group = comm;
  if (static_cast<int>(collective.group()->size()) != comm->size()) {
    std::vector<int> members(collective.group()->begin(),
                             collective.group()->end());
    std::sort(members.begin(), members.end());
    if (!groups) {
      return "no communicator for a group of " +
             std::to_string(members.size()) + " ranks";
    }
    if (std::string problem = groups(members, group); !problem.empty()) {
      return problem;
    }
  }
  comm::CollectiveCall call = collectiveCallOf(plan, collective);
  call.input = deviceBuffer(collective.input());
  call.output = deviceBuffer(collective.output());
  call.stream = impl->streams[collective.stream()];
  return comm::runCollective(*group, call);
}

static std::string bytesText(uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%llu bytes (%.2f GiB)",
                static_cast<unsigned long long>(bytes),
                static_cast<double>(bytes) / double(1ull << 30));
  return text;
}

SetupError GpuBackend::openGpu() {
  const fb::Plan &p = impl->plan->root();
  int ordinal = defaultDeviceOrdinal();
  if (std::string problem = openDevice(ordinal, impl->device);
      !problem.empty()) {
    return {TAILOR_ERROR_UNAVAILABLE,
            "the plan targets CUDA (" + p.target()->name()->str() + ", sm_" +
                std::to_string(p.target()->sm()) + ") but " + problem};
  }
  description = impl->device.name + " (GPU " + std::to_string(ordinal) +
                ", sm_" + std::to_string(impl->device.sm) + ")";
  return {};
}

SetupError GpuBackend::chooseDeviceCode(DeviceCodeChoice &choice) {
  const fb::Plan &p = impl->plan->root();
  std::vector<std::string> modules;
  for (const fb::DeviceCode *code : *p.device_code()) {
    std::string module = code->module_name() ? code->module_name()->str() : "";
    if (std::find(modules.begin(), modules.end(), module) == modules.end()) {
      modules.push_back(module);
    }
  }
  for (const std::string &module : modules) {
    if (SetupError error = chooseModuleCode(module, choice)) {
      return error;
    }
  }
  return {};
}

SetupError GpuBackend::chooseModuleCode(const std::string &module,
                                        DeviceCodeChoice &choice) {
  const fb::Plan &p = impl->plan->root();
  Impl &m = *impl;
  // The newest cubin that runs on this GPU (a mixed cluster's plan carries
  // one per device kind), else the PTX.
  std::vector<const fb::DeviceCode *> cubins;
  std::vector<CubinCandidate> candidates;
  const fb::DeviceCode *ptx = nullptr;
  std::string built;
  for (const fb::DeviceCode *code : *p.device_code()) {
    std::string name = code->module_name() ? code->module_name()->str() : "";
    if (name != module) {
      continue;
    }
    if (code->kind() == fb::DeviceCodeKind::Cubin) {
      built += (built.empty() ? "" : ", ") + code->arch()->str();
      cubins.push_back(code);
      candidates.push_back({code->sm(), code->arch()->str().back() == 'a'});
    } else if (code->kind() == fb::DeviceCodeKind::Ptx &&
               ptxRunsOn(code->sm(), m.device.sm) &&
               (!ptx || code->sm() > ptx->sm())) {
      ptx = code;
    }
  }
  int best = bestCubin(candidates, m.device.sm);
  const fb::DeviceCode *chosen = best >= 0 ? cubins[size_t(best)] : ptx;
  if (!chosen) {
    return {TAILOR_ERROR_UNAVAILABLE,
            "no device code of module '" + module + "' for " + description +
                " (the plan carries " + built +
                "); recompile it with --hardware for this GPU"};
  }
  m.imageBytes.emplace_back();
  if (std::string problem = deviceCodeBytes(*chosen, m.imageBytes.back());
      !problem.empty()) {
    return {TAILOR_ERROR_INVALID_PLAN,
            "device code " + chosen->arch()->str() + ": " + problem};
  }
  choice.images.push_back(
      {module, m.imageBytes.back().data(), m.imageBytes.back().size()});
  choice.archs +=
      (choice.archs.empty() ? "" : ", ") + module + " " + chosen->arch()->str();
  return {};
}

SetupError GpuBackend::allocateArenas(GemmWorkspace &workspace) {
  const fb::Plan &p = impl->plan->root();
  Impl &m = *impl;
  // Only Device arenas take GPU memory; host ones are the host's.
  uint64_t needed = 0;
  for (const fb::Arena *arena : *p.arenas()) {
    if (arena->kind() == fb::ArenaKind::Device) {
      needed += arena->size();
    }
  }
  if (needed > m.device.freeMemory) {
    return {TAILOR_ERROR_UNAVAILABLE,
            "the plan needs " + bytesText(needed) + " of GPU memory; " +
                description + " has " + bytesText(m.device.freeMemory) +
                " free of " + bytesText(m.device.totalMemory)};
  }
  for (const fb::Arena *arena : *p.arenas()) {
    void *memory = nullptr;
    SetupError failure = allocateArena(*arena, memory);
    // Recorded even on failure, so the Impl frees what was allocated.
    m.arenas.push_back(memory);
    m.arenaKinds.push_back(arena->kind());
    if (failure) {
      return failure;
    }
    allocated[static_cast<size_t>(arena->category())] += arena->size();
    (arena->kind() == fb::ArenaKind::Device ? deviceBytes : hostBytes) +=
        arena->size();
    if (arena->name()->string_view() == "gemm_workspace") {
      workspace.memory = memory;
      workspace.bytes = arena->size();
    }
  }
  return {};
}

SetupError GpuBackend::allocateArena(const fb::Arena &arena, void *&memory) {
  memory = nullptr;
  size_t size = arena.size();
  if (size == 0) {
    return {};
  }
  std::string where = "arena '" + arena.name()->str() + "' (" +
                      bytesText(size) + ", " +
                      fb::EnumNameArenaKind(arena.kind()) + ")";
  cudaError_t e = cudaSuccess;
  switch (arena.kind()) {
  case fb::ArenaKind::Device:
    if ((e = cudaMalloc(&memory, size)) != cudaSuccess) {
      memory = nullptr;
      return {TAILOR_ERROR_UNAVAILABLE, "cannot allocate " + where + " on " +
                                            description + ": " +
                                            cudaCallError("cudaMalloc", e)};
    }
    if ((e = cudaMemset(memory, 0, size)) != cudaSuccess) {
      return {TAILOR_ERROR_INTERNAL, cudaCallError("cudaMemset", e)};
    }
    return {};
  case fb::ArenaKind::HostPinned:
    if ((e = cudaHostAlloc(&memory, size, cudaHostAllocPortable)) !=
        cudaSuccess) {
      memory = nullptr;
      return {TAILOR_ERROR_UNAVAILABLE,
              "cannot allocate " + where + " in pinned host memory: " +
                  cudaCallError("cudaHostAlloc", e)};
    }
    break;
  case fb::ArenaKind::Host: {
    // aligned_alloc wants a multiple of the alignment.
    size_t alignment = std::max<size_t>(arena.alignment(), sizeof(void *));
    memory = std::aligned_alloc(alignment,
                                (size + alignment - 1) / alignment * alignment);
    if (!memory) {
      return {TAILOR_ERROR_UNAVAILABLE,
              "cannot allocate " + where + " in host memory"};
    }
    break;
  }
  }
  std::memset(memory, 0, size);
  return {};
}

SetupError GpuBackend::createStreamsAndEvents() {
  const fb::Plan &p = impl->plan->root();
  Impl &m = *impl;
  uint32_t streamCount = p.streams() ? p.streams()->size() : 0;
  for (uint32_t i = 0; i < std::max<uint32_t>(streamCount, 1); ++i) {
    cudaStream_t stream = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      return {TAILOR_ERROR_INTERNAL,
              cudaCallError("cudaStreamCreateWithFlags", e)};
    }
    m.streams.push_back(stream);
  }
  if (p.events()) {
    for (uint32_t i = 0; i < p.events()->size(); ++i) {
      cudaEvent_t event = nullptr;
      cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
      if (e != cudaSuccess) {
        return {TAILOR_ERROR_INTERNAL,
                cudaCallError("cudaEventCreateWithFlags", e)};
      }
      m.events.push_back(event);
    }
  }
  return {};
}

SetupError GpuBackend::loadDeviceCode(const DeviceCodeChoice &choice,
                                      const GemmWorkspace &workspace) {
  const fb::Plan &p = impl->plan->root();
  std::string problem;
  std::string_view precision =
      p.target()->precision() ? p.target()->precision()->string_view() : "";
  HalfCompute half = halfComputeOf(precision);
  impl->context =
      DeviceContext::create(impl->device, choice.images, workspace.memory,
                            workspace.bytes, half, problem);
  if (!impl->context) {
    return {TAILOR_ERROR_INTERNAL, "cannot load its device code (" +
                                       choice.archs + ") on " + description +
                                       ": " + problem};
  }
  return {};
}

SetupError GpuBackend::prepareLaunches() {
  const LoadedPlan &plan = *impl->plan;
  const fb::Plan &p = plan.root();
  Impl &m = *impl;
  const auto &ops = *p.ops();
  m.launches.resize(ops.size());
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const fb::Launch *launch = ops.Get(i)->step_as_Launch();
    if (!launch) {
      continue;
    }
    PreparedLaunch &prepared = m.launches[i];
    const fb::Kernel *kernel = p.kernels()->Get(launch->kernel());
    if (p.streams()->Get(launch->stream())->kind() == fb::StreamKind::Host) {
      if (SetupError failure = prepareHostLaunch(i, *launch, prepared)) {
        return failure;
      }
      continue;
    }
    prepared.kernel = findCudaKernel(kernel->name()->string_view());
    prepared.origin = launch->origin() ? launch->origin()->str() : "";
    prepared.stream = launch->stream();
    KernelCall check;
    for (uint32_t operand : *launch->operands()) {
      Tensor tensor;
      tensor.data = deviceBuffer(operand);
      tensor.dtype = plan.bufferDType(operand);
      tensor.shape = plan.bufferShape(operand);
      check.operands.push_back(tensor);
    }
    check.attributes = decodeLaunchAttributes(*launch);
    std::string message = prepared.kernel->check(check);
    // The entry points of the plan's precision (fp16 plans: the fp16
    // attention module's), as the plan writer embedded them.
    for (const char *const *f =
             deviceFunctions(*prepared.kernel, m.context->halfCompute());
         message.empty() && f && *f; ++f) {
      if (!m.context->hasFunction(*f)) {
        message = std::string("the device code has no function '") + *f + "'";
      }
    }
    // fused_elementwise's function is generated for its program.
    if (message.empty() && kernel->name()->string_view() == "fused_elementwise") {
      std::string function =
          fusedLaunchFunction(check.operands, check.attributes);
      if (!m.context->hasFunction(function.c_str())) {
        message = "the device code has no generated function '" + function +
                  "' for its program (compile the plan again)";
      }
    }
    if (!message.empty()) {
      std::ostringstream text;
      text << "step " << i << " (" << kernel->name()->str()
           << (prepared.origin.empty() ? "" : ", " + prepared.origin)
           << "): " << message;
      return {TAILOR_ERROR_INVALID_PLAN, text.str()};
    }
    prepared.call.operands = std::move(check.operands);
    prepared.call.attributes = std::move(check.attributes);
    prepared.call.context = m.context.get();
    prepared.call.step = static_cast<int>(i);
  }
  return {};
}

SetupError GpuBackend::prepareHostLaunch(uint32_t i, const fb::Launch &launch,
                                         PreparedLaunch &prepared) {
  Impl &m = *impl;
  const LoadedPlan &plan = *m.plan;
  std::string_view name =
      plan.root().kernels()->Get(launch.kernel())->name()->string_view();
  prepared.origin = launch.origin() ? launch.origin()->str() : "";
  prepared.stream = launch.stream();
  prepared.hostKernel = findCpuKernel(name);
  if (!m.hostPool) {
    m.hostPool = std::make_unique<ThreadPool>(
        std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  }
  std::string message;
  if (!prepared.hostKernel) {
    message = "the CPU backend has no kernel '" + std::string(name) +
              "' for the host stream";
  } else {
    for (uint32_t operand : *launch.operands()) {
      Tensor tensor;
      tensor.data = deviceBuffer(operand); // a host arena (the loader checked)
      tensor.dtype = plan.bufferDType(operand);
      tensor.shape = plan.bufferShape(operand);
      prepared.hostCall.operands.push_back(std::move(tensor));
    }
    prepared.hostCall.attributes = decodeLaunchAttributes(launch);
    prepared.hostCall.pool = m.hostPool.get();
    message = prepared.hostKernel->check(prepared.hostCall);
  }
  if (message.empty()) {
    return {};
  }
  return {TAILOR_ERROR_INVALID_PLAN,
          "step " + std::to_string(i) + " (" + std::string(name) +
              " on the host" +
              (prepared.origin.empty() ? "" : ", " + prepared.origin) +
              "): " + message};
}

/// A Host-stream launch run by CUDA when its stream reaches it (on CUDA's
/// own thread: it calls no CUDA API).
static void CUDART_CB runQueuedHostLaunch(void *data) {
  auto *launch = static_cast<PreparedLaunch *>(data);
  std::string problem = launch->hostKernel->run(launch->hostCall);
  if (!problem.empty() && launch->hostFailure.empty()) {
    launch->hostFailure = std::move(problem);
  }
}

std::string GpuBackend::runHostLaunch(PreparedLaunch &launch) {
  if (impl->plan->root().version() % 100 >= 16) {
    // 1.16: the host stream is a stream like the others; its launch runs
    // after the events it waits for, while the other streams go on.
    cudaError_t e = cudaLaunchHostFunc(impl->streams[launch.stream],
                                       &runQueuedHostLaunch, &launch);
    return e == cudaSuccess ? "" : cudaCallError("cudaLaunchHostFunc", e);
  }
  // Before 1.16 the host's queue comes after everything issued before it,
  // on every stream (the copies of its operands to host memory among them).
  for (cudaStream_t stream : impl->streams) {
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
      return cudaCallError("cudaStreamSynchronize (before a host launch)", e);
    }
  }
  return launch.hostKernel->run(launch.hostCall);
}

std::unique_ptr<CudaBackend>
CudaBackend::create(const LoadedPlan &plan, int rank, std::string &error,
                    int &status) {
  std::unique_ptr<GpuBackend> backend(new GpuBackend());
  backend->impl = std::make_unique<Impl>();
  backend->impl->plan = &plan;
  backend->impl->rank = rank;
  auto failWith = [&](const SetupError &failure) {
    status = failure.status;
    error = plan.name() + ": " + failure.message;
    return nullptr;
  };
  DeviceCodeChoice code;
  GemmWorkspace workspace;
  if (SetupError failure = backend->openGpu()) {
    return failWith(failure);
  }
  if (SetupError failure = backend->chooseDeviceCode(code)) {
    return failWith(failure);
  }
  if (SetupError failure = backend->allocateArenas(workspace)) {
    return failWith(failure);
  }
  if (SetupError failure = backend->createStreamsAndEvents()) {
    return failWith(failure);
  }
  if (SetupError failure = backend->loadDeviceCode(code, workspace)) {
    return failWith(failure);
  }
  if (SetupError failure = backend->prepareLaunches()) {
    return failWith(failure);
  }
  if (const char *flag = std::getenv("TAILOR_CUDA_SYNC");
      flag && *flag && std::string(flag) != "0") {
    backend->impl->syncEachStep = true;
  }
  if (const char *flag = std::getenv("TAILOR_PROFILE");
      flag && *flag && std::string(flag) != "0") {
    backend->startProfile();
  }
  return backend;
}

void GpuBackend::startProfile() {
  Impl &m = *impl;
  const fb::Plan &p = m.plan->root();
  GpuProfile &profile = m.profile;
  size_t ops = p.ops()->size();
  profile.enabled = true;
  profile.events.assign(ops, {nullptr, nullptr});
  profile.milliseconds.assign(ops, 0.0);
  profile.calls.assign(ops, 0);
  profile.names.resize(ops);
  for (uint32_t i = 0; i < ops; ++i) {
    const PreparedLaunch &launch = m.launches[i];
    if (launch.kernel) {
      profile.names[i] = {launch.kernel->name, launch.origin};
    } else if (p.ops()->Get(i)->step_type() == fb::Step::Collective) {
      profile.names[i] = {"collective", ""};
    } else if (const fb::Copy *copy = p.ops()->Get(i)->step_as_Copy()) {
      profile.names[i] = {copyStepName(copy->kind()), ""};
    }
  }
}

void *GpuBackend::deviceBuffer(uint32_t index) const {
  const fb::Buffer *buffer = impl->plan->root().buffers()->Get(index);
  return static_cast<uint8_t *>(impl->arenas[buffer->arena()]) +
         impl->plan->bufferOffset(index, impl->rank);
}

// cudaMemcpyDefault (unified addressing) takes the direction from the
// addresses: a buffer of a host arena is copied host to host.
std::string GpuBackend::upload(void *device, const void *host, size_t bytes) {
  cudaError_t e = cudaMemcpy(device, host, bytes, cudaMemcpyDefault);
  return e == cudaSuccess ? "" : cudaCallError("cudaMemcpy (host to device)", e);
}

std::string GpuBackend::download(void *host, const void *device, size_t bytes) {
  cudaError_t e = cudaMemcpy(host, device, bytes, cudaMemcpyDefault);
  return e == cudaSuccess ? "" : cudaCallError("cudaMemcpy (device to host)", e);
}

std::string GpuBackend::uploadArena(uint32_t arena, const void *host) {
  const fb::Arena *a = impl->plan->root().arenas()->Get(arena);
  if (a->size() == 0) {
    return "";
  }
  if (a->kind() != fb::ArenaKind::Device) {
    std::memcpy(impl->arenas[arena], host, a->size());
    return "";
  }
  return upload(impl->arenas[arena], host, a->size());
}

std::string GpuBackend::stepName(uint32_t i) const {
  const PreparedLaunch &launch = impl->launches[i];
  if (const fb::Copy *copy = impl->plan->root().ops()->Get(i)->step_as_Copy()) {
    return "step " + std::to_string(i) + " (" + copyStepName(copy->kind()) +
           ")";
  }
  if (launch.hostKernel) {
    return "step " + std::to_string(i) + " (" + launch.hostKernel->name +
           " on the host" +
           (launch.origin.empty() ? "" : ", " + launch.origin) + ")";
  }
  if (!launch.kernel) {
    return "step " + std::to_string(i);
  }
  return "step " + std::to_string(i) + " (" + launch.kernel->name +
         (launch.origin.empty() ? "" : ", " + launch.origin) + ")";
}

std::string GpuBackend::runSteps(uint32_t first, uint32_t count) {
  Impl &m = *impl;
  const fb::Plan &p = m.plan->root();
  for (uint32_t i = first; i < first + count; ++i) {
    const fb::Op *op = p.ops()->Get(i);
    std::string problem;
    cudaError_t e = cudaSuccess;
    cudaStream_t timed = timedStream(*op, i);
    if (timed) {
      problem = m.profile.begin(i, timed);
    }
    switch (problem.empty() ? op->step_type() : fb::Step::NONE) {
    case fb::Step::Launch: {
      PreparedLaunch &launch = m.launches[i];
      if (launch.hostKernel) {
        problem = runHostLaunch(launch);
        break;
      }
      m.context->setStream(m.streams[launch.stream]);
      problem = launch.kernel->launch(launch.call);
      break;
    }
    case fb::Step::Copy: {
      const fb::Copy *copy = op->step_as_Copy();
      uint64_t bytes = m.plan->bufferBytes(copy->source());
      e = cudaMemcpyAsync(deviceBuffer(copy->target()),
                          deviceBuffer(copy->source()), bytes,
                          cudaMemcpyDefault, m.streams[copy->stream()]);
      if (e == cudaSuccess && crossesHostAndDevice(copy->kind())) {
        copiedBytes += bytes;
      }
      break;
    }
    case fb::Step::Record: {
      const fb::Record *record = op->step_as_Record();
      e = cudaEventRecord(m.events[record->event()], m.streams[record->stream()]);
      break;
    }
    case fb::Step::Wait: {
      const fb::Wait *wait = op->step_as_Wait();
      e = cudaStreamWaitEvent(m.streams[wait->stream()], m.events[wait->event()],
                              0);
      break;
    }
    case fb::Step::Collective:
      problem = runCollective(*op->step_as_Collective());
      break;
    default:
      if (problem.empty()) {
        problem = "a step kind this runtime does not know";
      }
      break;
    }
    if (e != cudaSuccess) {
      problem = cudaCallError("enqueueing the step", e);
    }
    if (timed && problem.empty()) {
      problem = m.profile.end(i, timed);
    }
    if (problem.empty() && m.syncEachStep) {
      if ((e = cudaDeviceSynchronize()) != cudaSuccess) {
        problem = cudaCallError("cudaDeviceSynchronize", e);
      }
    }
    if (!problem.empty()) {
      // What was enqueued still runs: let it finish, so a bad index it meets
      // is not reported by the next run. This failure comes first.
      finishSteps(first, i - first);
      return stepName(i) + ": " + problem;
    }
  }
  return finishSteps(first, count);
}

std::string GpuBackend::finishSteps(uint32_t first, uint32_t count) {
  Impl &m = *impl;
  for (cudaStream_t stream : m.streams) {
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
      return "steps " + std::to_string(first) + ".." +
             std::to_string(first + count) + " on " + description + ": " +
             cudaCallError("cudaStreamSynchronize", e) +
             " (TAILOR_CUDA_SYNC=1 names the failing step)";
    }
  }
  for (uint32_t i = first; i < first + count; ++i) {
    if (std::string failure = std::move(m.launches[i].hostFailure);
        !failure.empty()) {
      m.launches[i].hostFailure.clear();
      return stepName(i) + ": " + failure;
    }
  }
  std::string profiled = m.profile.collect();
  DeviceErrorRecord record{};
  if (std::string e = m.context->takeErrorRecord(record); !e.empty()) {
    return "steps " + std::to_string(first) + ".." +
           std::to_string(first + count) + " on " + description + ": " + e;
  }
  if (record.code != tl::kNoError) {
    bool known = record.site >= 0 &&
                 static_cast<size_t>(record.site) < m.launches.size() &&
                 m.launches[record.site].kernel;
    std::string where =
        known ? stepName(static_cast<uint32_t>(record.site))
              : "a kernel of steps " + std::to_string(first) + ".." +
                    std::to_string(first + count);
    return where + ": " + describeDeviceError(record);
  }
  return profiled;
}

cudaStream_t GpuBackend::timedStream(const fb::Op &op, uint32_t index) const {
  const Impl &m = *impl;
  if (!m.profile.enabled) {
    return nullptr;
  }
  switch (op.step_type()) {
  case fb::Step::Launch:
    // Host launches run on the host; CUDA events cannot time them.
    return m.launches[index].hostKernel ? nullptr
                                        : m.streams[m.launches[index].stream];
  case fb::Step::Copy:
    return m.streams[op.step_as_Copy()->stream()];
  case fb::Step::Collective:
    return m.streams[op.step_as_Collective()->stream()];
  default:
    return nullptr;
  }
}

} // namespace tailor::runtime::cuda
