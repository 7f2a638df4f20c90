//===- Session.cpp - arenas, parameter binding, execution -----------------===//

#include "runtime/Session.h"

#include "runtime/comm/Communicator.h"

#include "runtime/cuda/CudaBackend.h"

#include "runtime/include/tailor/runtime.h"
#include "runtime/quant/Gptq.h"
#include "runtime/quant/Half.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace tailor::runtime {

namespace fb = tailor::plan;

Session::~Session() {
  if (profile) {
    std::map<std::string, std::pair<double, uint64_t>> byKernel;
    double total = 0;
    for (size_t i = 0; i < launches.size(); ++i) {
      const PreparedLaunch &launch = launches[i];
      if (launch.kind == PreparedLaunch::Kind::Record ||
          launch.kind == PreparedLaunch::Kind::Wait) {
        continue;
      }
      // A started collective counts the host's time in it: starting it
      // (with its blocking agreement) and waiting for it to complete.
      std::string name =
          launch.kernel ? std::string(launch.kernel->name)
          : launch.kind == PreparedLaunch::Kind::Copy
              ? std::string(copyStepName(launch.copy.kind))
          : launch.stream == 0 ? std::string("collective")
                               : std::string("collective (started)");
      auto &entry = byKernel[name];
      entry.first += profileSeconds[i];
      entry.second += profileCalls[i];
      total += profileSeconds[i];
    }
    std::vector<std::pair<std::string, std::pair<double, uint64_t>>> rows(
        byKernel.begin(), byKernel.end());
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
      return a.second.first > b.second.first;
    });
    std::fprintf(stderr, "tailor profile (%s): %.3f s in kernels\n",
                 loaded.name().c_str(), total);
    for (const auto &[name, value] : rows) {
      std::fprintf(stderr, "  %-20s %9.3f s %5.1f%% %8llu calls\n", name.c_str(),
                   value.first, total > 0 ? 100.0 * value.first / total : 0.0,
                   static_cast<unsigned long long>(value.second));
    }
    if (profileOverlapCalls > 0) {
      std::fprintf(stderr,
                   "  started collectives: %.3f s from start to completion "
                   "over %llu calls, overlapping the kernels (not in the "
                   "total)\n",
                   profileOverlapSeconds,
                   static_cast<unsigned long long>(profileOverlapCalls));
    }
  }
  for (void *arena : arenas) {
    std::free(arena);
  }
}

void *Session::hostData(uint32_t index) const {
  const fb::Buffer *buffer = loaded.root().buffers()->Get(index);
  return static_cast<uint8_t *>(arenas[buffer->arena()]) +
         loaded.bufferOffset(index, rankValue);
}

void *Session::bufferData(uint32_t index) const {
  if (!cuda) {
    return hostData(index);
  }
#if TAILOR_ENABLE_CUDA
  // A GPU session hands out a host copy, made now and refreshed by
  // download() and by runEntry() for the entry's outputs.
  auto [it, inserted] = mirrors.try_emplace(index);
  if (inserted) {
    uint64_t bytes = loaded.root().buffers()->Get(index)->size();
    it->second.assign((bytes + 7) / 8, 0);
    cuda->download(it->second.data(), cuda->deviceBuffer(index), bytes);
  }
  return it->second.data();
#else
  return nullptr;
#endif
}

std::string Session::download(uint32_t index) {
#if TAILOR_ENABLE_CUDA
  if (cuda) {
    void *host = bufferData(index);
    return cuda->download(host, cuda->deviceBuffer(index),
                          loaded.root().buffers()->Get(index)->size());
  }
#endif
  (void)index;
  return "";
}

std::string Session::upload(uint32_t index) {
#if TAILOR_ENABLE_CUDA
  if (cuda) {
    void *host = bufferData(index);
    return cuda->upload(cuda->deviceBuffer(index), host,
                        loaded.root().buffers()->Get(index)->size());
  }
#endif
  (void)index;
  return "";
}

bool Session::onGpu() const { return cuda != nullptr; }

std::string Session::allocateArenas(bool gpu) {
  // Arenas: exactly the planned sizes (the plan's memory report is the
  // truth), zeroed so a plan never reads garbage. A GPU session allocates
  // its arenas on the device; here it stages only what the host fills
  // (parameters and constants), one arena at a time on the way up.
  const fb::Plan &p = loaded.root();
  for (const fb::Arena *arena : *p.arenas()) {
    if (gpu && arena->category() != fb::Category::Parameters &&
        arena->category() != fb::Category::Constants) {
      arenas.push_back(nullptr);
      continue;
    }
    size_t alignment = std::max<size_t>(arena->alignment(), sizeof(void *));
    size_t size = arena->size();
    void *memory = nullptr;
    if (size > 0) {
      // aligned_alloc wants a multiple of the alignment; the planner's
      // arenas already are, a hand-written plan may not be.
      size_t rounded = (size + alignment - 1) / alignment * alignment;
      memory = std::aligned_alloc(alignment, rounded);
      if (!memory) {
        return "cannot allocate arena '" + arena->name()->str() + "' (" +
               std::to_string(size) + " bytes)";
      }
      std::memset(memory, 0, size);
    }
    if (arena->name()->string_view() == "p2p_outbox") {
      outboxArena = static_cast<int64_t>(arenas.size());
    }
    arenas.push_back(memory);
    if (!gpu) {
      allocated[static_cast<size_t>(arena->category())] += size;
      (arena->kind() == fb::ArenaKind::Device ? allocatedDevice
                                              : allocatedHost) += size;
    }
  }
  return "";
}

std::unique_ptr<Session> Session::create(const LoadedPlan &plan, int threads,
                                         std::string &error, int &status,
                                         int rank) {
  std::unique_ptr<Session> session(new Session(plan));
  const fb::Plan &p = plan.root();
  if (rank < 0 || rank >= p.world_size()) {
    error = plan.name() + ": rank " + std::to_string(rank) +
            " is outside the plan's world of " +
            std::to_string(p.world_size());
    status = TAILOR_ERROR_INVALID_ARGUMENT;
    return nullptr;
  }
  session->rankValue = rank;
  bool gpu = p.target() && p.target()->backend() == fb::Backend::Cuda;
  if (gpu) {
#if TAILOR_ENABLE_CUDA
    session->cuda = cuda::CudaBackend::create(plan, rank, error, status);
    if (!session->cuda) {
      return nullptr;
    }
#else
    error = plan.name() + ": the plan targets CUDA (" +
            p.target()->name()->str() + ", sm_" +
            std::to_string(p.target()->sm()) +
            ") but this runtime was built without CUDA";
    status = TAILOR_ERROR_UNAVAILABLE;
    return nullptr;
#endif
  }

  if (std::string problem = session->allocateArenas(gpu); !problem.empty()) {
    error = plan.name() + ": " + problem;
    status = TAILOR_ERROR_INTERNAL;
    return nullptr;
  }

  if (const auto *constants = p.constants()) {
    for (const fb::Constant *constant : *constants) {
      std::memcpy(session->hostData(constant->buffer()),
                  constant->data()->data(), constant->data()->size());
    }
  }
  if (std::string problem = session->bindParameters(); !problem.empty()) {
    error = plan.name() + ": " + problem;
    status = TAILOR_ERROR_IO;
    return nullptr;
  }
  if (std::string problem = session->initializeParameters(); !problem.empty()) {
    error = plan.name() + ": " + problem;
    status = TAILOR_ERROR_INVALID_PLAN;
    return nullptr;
  }
  if (gpu) {
    if (std::string problem = session->uploadToDevice(); !problem.empty()) {
      error = plan.name() + ": " + problem;
      status = TAILOR_ERROR_INTERNAL;
      return nullptr;
    }
  }
  // The CUDA backend profiles itself (with CUDA events).
  if (const char *flag = std::getenv("TAILOR_PROFILE");
      !gpu && flag && *flag && std::string(flag) != "0") {
    session->profile = true;
  }
  if (const auto *entries = p.entries(); entries && entries->size() > 0) {
    for (const fb::Entry *entry : *entries) {
      session->entries.push_back(
          {entry->name()->str(), entry->first_op(), entry->op_count()});
    }
  } else {
    session->entries.push_back(
        {"forward", 0, static_cast<uint32_t>(p.ops()->size())});
  }

  if (gpu) {
    for (uint32_t i = 0; i < p.ops()->size(); ++i) {
      if (p.ops()->Get(i)->steps()) {
        error = plan.name() + ": step " + std::to_string(i) +
                " runs in some training steps only (gradient compression), "
                "which the CUDA backend does not support yet";
        status = TAILOR_ERROR_INVALID_PLAN;
        return nullptr;
      }
    }
    return session; // the CudaBackend prepared its launches
  }
  if (threads <= 0) {
    threads = static_cast<int>(std::thread::hardware_concurrency());
    if (p.target() && p.target()->threads() > 0) {
      threads = std::min(threads, p.target()->threads());
    }
  }
  threads = std::max(threads, 1);
  session->pool = std::make_unique<ThreadPool>(threads);
  setBlasThreads(threads);
  // From format 1.16 the Host stream runs beside the others (plan.fbs).
  bool hostStream =
      p.streams() && std::any_of(p.streams()->begin(), p.streams()->end(),
                                 [](const fb::Stream *stream) {
                                   return stream->kind() == fb::StreamKind::Host;
                                 });
  if (hostStream && p.version() % 100 >= 16) {
    session->hostPool = std::make_unique<ThreadPool>(threads);
    session->hostQueue = std::make_unique<HostQueue>();
  }

  // Launches: resolve kernels and tensors once; every kernel checks its
  // launch now, so run() never meets a malformed one.
  if (std::string problem = session->prepareSteps(); !problem.empty()) {
    error = plan.name() + ": " + problem;
    status = TAILOR_ERROR_INVALID_PLAN;
    return nullptr;
  }
  session->profileSeconds.assign(session->launches.size(), 0.0);
  session->profileCalls.assign(session->launches.size(), 0);
  session->startedOn.assign(p.streams() ? p.streams()->size() : 0, 0);
  session->marks.assign(p.events() ? p.events()->size() : 0, EventMark());
  return session;
}

std::string Session::uploadToDevice() {
#if TAILOR_ENABLE_CUDA
  // Up to the device; the staging copies go.
  for (uint32_t a = 0; a < arenas.size(); ++a) {
    if (!arenas[a]) {
      continue;
    }
    std::string problem = cuda->uploadArena(a, arenas[a]);
    std::free(arenas[a]);
    arenas[a] = nullptr;
    if (!problem.empty()) {
      return problem;
    }
  }
  allocated = cuda->allocatedBytes();
  allocatedDevice = cuda->allocatedDeviceBytes();
  allocatedHost = cuda->allocatedHostBytes();
  return "";
#else
  return "this runtime was built without CUDA";
#endif
}

std::string Session::prepareSteps() {
  const fb::Plan &p = loaded.root();
  const auto &ops = *p.ops();
  // A record or a wait, as the CPU session keeps it.
  auto eventStep = [](PreparedLaunch::Kind kind, uint32_t step,
                      uint32_t stream, uint32_t event) {
    PreparedLaunch prepared;
    prepared.kind = kind;
    prepared.step = step;
    prepared.stream = stream;
    prepared.event = event;
    return prepared;
  };
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const fb::Op *op = ops.Get(i);
    if (const fb::Collective *collective = op->step_as_Collective()) {
      launches.push_back(prepareCollective(i, *collective));
    } else if (const fb::Copy *copy = op->step_as_Copy()) {
      launches.push_back(prepareCopy(i, *copy));
    } else if (const fb::Record *record = op->step_as_Record()) {
      launches.push_back(eventStep(PreparedLaunch::Kind::Record, i,
                                   record->stream(), record->event()));
    } else if (const fb::Wait *wait = op->step_as_Wait()) {
      launches.push_back(eventStep(PreparedLaunch::Kind::Wait, i,
                                   wait->stream(), wait->event()));
    } else if (const fb::Launch *launch = op->step_as_Launch()) {
      if (std::string problem = prepareKernelLaunch(i, *launch);
          !problem.empty()) {
        return problem;
      }
    }
    if (std::string problem = prepareStepRange(i, launches.back());
        !problem.empty()) {
      return problem;
    }
  }
  return "";
}

std::string Session::prepareStepRange(uint32_t i, PreparedLaunch &prepared) {
  const fb::Plan &p = loaded.root();
  const fb::StepRange *range = p.ops()->Get(i)->steps();
  if (!range) {
    return "";
  }
  std::string where = "step " + std::to_string(i);
  if (range->first() < 1 ||
      (range->last() != -1 && range->last() < range->first())) {
    return where + ": step range [" + std::to_string(range->first()) + ", " +
           std::to_string(range->last()) +
           "] is malformed (first >= 1, last >= first or -1)";
  }
  int64_t period = p.ops()->Get(i)->steps_period();
  if (period < 0) {
    return where + ": step period " + std::to_string(period) +
           " is negative (0 or 1: every step of the range)";
  }
  // The entry the op belongs to, and its `step` input.
  for (uint32_t e = 0; e < entries.size(); ++e) {
    if (i < entries[e].first || i >= entries[e].first + entries[e].count) {
      continue;
    }
    if (p.inputs()) {
      for (const fb::Binding *input : *p.inputs()) {
        if (input->entry() == e && input->name()->string_view() == "step" &&
            loaded.bufferDType(input->buffer()) == DType::I64 &&
            loaded.bufferBytes(input->buffer()) == sizeof(int64_t)) {
          prepared.stepValue =
              static_cast<const int64_t *>(bufferData(input->buffer()));
          prepared.firstStep = range->first();
          prepared.lastStep = range->last();
          prepared.stepPeriod = std::max<int64_t>(period, 1);
          return "";
        }
      }
    }
    return where + ": runs in training steps [" +
           std::to_string(range->first()) + ", " +
           std::to_string(range->last()) + "] but entry '" + entries[e].name +
           "' has no i64 `step` input to tell them";
  }
  return where + ": has a step range but belongs to no entry";
}

std::string Session::prepareKernelLaunch(uint32_t i, const fb::Launch &launch) {
  const fb::Plan &p = loaded.root();
  const fb::Kernel *kernel = p.kernels()->Get(launch.kernel());
  bool hostStream =
      p.streams()->Get(launch.stream())->kind() == fb::StreamKind::Host;
  if (launch.stream() != 0 && !hostStream) {
    // The CPU computes on the session's own thread: other streams carry
    // collectives and copies only, but for the host's queue (optimizer
    // offload), which on the CPU is that same thread.
    return "step " + std::to_string(i) + " (" + kernel->name()->str() +
           ") runs on stream '" +
           p.streams()->Get(launch.stream())->name()->str() + "' (" +
           std::to_string(launch.stream()) +
           "), but a CPU plan launches kernels on stream 0 and host "
           "streams only (other streams carry collectives and copies)";
  }
  PreparedLaunch prepared;
  prepared.step = i;
  prepared.stream = launch.stream();
  prepared.onHostStream = hostStream;
  prepared.kernel = findCpuKernel(kernel->name()->string_view());
  prepared.origin = launch.origin() ? launch.origin()->str() : "";
  for (uint32_t operand : *launch.operands()) {
    Tensor tensor;
    tensor.data = bufferData(operand);
    tensor.dtype = loaded.bufferDType(operand);
    tensor.shape = loaded.bufferShape(operand);
    prepared.call.operands.push_back(std::move(tensor));
  }
  prepared.call.attributes = decodeLaunchAttributes(launch);
  prepared.call.pool =
      hostStream && hostQueue ? hostPool.get() : pool.get();
  if (std::string problem = prepared.kernel->check(prepared.call);
      !problem.empty()) {
    return "step " + std::to_string(i) + " (" + kernel->name()->str() +
           (prepared.origin.empty() ? "" : ", " + prepared.origin) +
           "): " + problem;
  }
  launches.push_back(std::move(prepared));
  return "";
}

/// Reads `length` bytes at `offset` of `fd` into `target`; "" or the error.
static std::string readFully(int fd, const std::string &path,
                             const std::string &param, uint64_t offset,
                             uint64_t length, uint8_t *target) {
  uint64_t done = 0;
  while (done < length) {
    ssize_t got = ::pread(fd, target + done, length - done,
                          static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return "parameter '" + param + "': cannot read '" + path + "' at byte " +
             std::to_string(offset + done) + ": " +
             (got < 0 ? std::strerror(errno) : "unexpected end of file");
    }
    done += static_cast<uint64_t>(got);
  }
  return "";
}

/// Widens `count` little-endian f16 or bf16 values to float.
static void widenToFloat(fb::DType dtype, const uint8_t *bytes, int64_t count,
                         float *out) {
  for (int64_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes + 2 * i, 2);
    out[i] = dtype == fb::DType::BF16 ? quant::bf16ToFloat(bits)
                                      : quant::fp16ToFloat(bits);
  }
}

std::string Session::ownedElements(const fb::Parameter &param,
                                   OwnedElements &owned) const {
  owned = OwnedElements();
  const fb::ParameterShard *shard = param.shard();
  if (!shard) {
    owned.count = loaded.parameterElements(param);
    return "";
  }
  std::vector<int> group(shard->group()->begin(), shard->group()->end());
  std::sort(group.begin(), group.end());
  int position = groupPosition(group);
  if (position < 0) {
    return "sharded parameter '" + param.name()->str() +
           "': its group of ranks is neither a node nor one index across "
           "nodes, so this rank cannot tell which chunk it holds";
  }
  // Chunk p holds flat elements [p*C, (p+1)*C); the member lies at
  // [offset, offset + numel). Their intersection is what this rank binds.
  uint64_t chunk = loaded.bufferBytes(param.buffer()) /
                   dtypeSize(loaded.bufferDType(param.buffer()));
  uint64_t begin = static_cast<uint64_t>(position) * chunk;
  uint64_t offset = static_cast<uint64_t>(shard->offset());
  uint64_t lo = std::max(begin, offset);
  uint64_t hi =
      std::min(begin + chunk, offset + loaded.parameterElements(param));
  if (hi > lo) {
    owned.first = lo - offset;
    owned.count = hi - lo;
    owned.target = lo - begin;
  }
  return "";
}

/// Opens weights file `path` for binding: its descriptor and size, or the
/// error.
static std::string openWeights(const std::string &path, int &fd,
                               uint64_t &fileSize) {
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return "cannot open weights file '" + path + "': " + std::strerror(errno);
  }
  struct stat info;
  if (fstat(fd, &info) != 0) {
    std::string message =
        "cannot stat weights file '" + path + "': " + std::strerror(errno);
    ::close(fd);
    fd = -1;
    return message;
  }
  fileSize = static_cast<uint64_t>(info.st_size);
  // pread straight into the arenas: the bytes pass through the page cache
  // only, so binding never holds a second copy of the weights in this
  // process (an mmap would count every page in the resident set).
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return "";
}

/// Reads bytes [skip, skip + length) of `source` (a range of the open file
/// `path` of `fileSize` bytes) into `target`, once the file is seen to
/// still hold the range (it may have changed since the plan was loaded).
static std::string readSource(int fd, const std::string &path,
                              uint64_t fileSize, const std::string &name,
                              const fb::Source &source, uint64_t skip,
                              uint64_t length, uint8_t *target) {
  if (source.offset() > fileSize ||
      source.length() > fileSize - source.offset()) {
    return "parameter '" + name + "': bytes [" +
           std::to_string(source.offset()) + ", " +
           std::to_string(source.offset() + source.length()) +
           ") lie outside '" + path + "' (" + std::to_string(fileSize) +
           " bytes)";
  }
  return readFully(fd, path, name, source.offset() + skip, length, target);
}

/// Quantizes the float weight `raw` (all of `source`'s bytes) of quantized
/// parameter `param` into `storage` (storageBytes of its scheme), widening
/// f16/bf16 or realigning f32 through `widened`.
static std::string quantizeWeight(const fb::Parameter &param,
                                  const fb::Source &source,
                                  const std::vector<uint8_t> &raw,
                                  std::vector<float> &widened,
                                  uint8_t *storage) {
  std::string name = param.name()->str();
  quant::QuantSpec spec;
  std::string problem;
  if (!quantSpecOf(*param.quant(), spec, problem)) {
    return "parameter '" + name + "': " + problem;
  }
  const float *weight = reinterpret_cast<const float *>(raw.data());
  if (source.dtype() != fb::DType::F32) {
    widened.resize(static_cast<size_t>(spec.rows * spec.cols));
    widenToFloat(source.dtype(), raw.data(), spec.rows * spec.cols,
                 widened.data());
    weight = widened.data();
  } else if (reinterpret_cast<uintptr_t>(weight) % alignof(float) != 0) {
    widened.resize(static_cast<size_t>(spec.rows * spec.cols));
    std::memcpy(widened.data(), raw.data(), raw.size());
    weight = widened.data();
  }
  problem = quant::quantizeInto(spec, weight,
                                param.quant()->source_transposed(), storage);
  return problem.empty() ? "" : "parameter '" + name + "': " + problem;
}

/// Pre-quantized bytes come from another program's file: a GPTQ group
/// index out of range would send the kernels outside the storage.
static std::string checkPrequantized(const fb::Parameter &param,
                                     const uint8_t *storage) {
  quant::QuantSpec spec;
  std::string problem;
  if (!quantSpecOf(*param.quant(), spec, problem)) {
    return "parameter '" + param.name()->str() + "': " + problem;
  }
  if (spec.scheme == quant::Scheme::GPTQ) {
    problem = quant::checkGptqStorage(spec, storage);
  }
  return problem.empty() ? "" : "parameter '" + param.name()->str() + "': " +
                                    problem;
}

std::string Session::bindShardedStorage(const fb::Parameter &param,
                                        BindScratch &scratch) {
  OwnedElements owned;
  if (std::string problem = ownedElements(param, owned); !problem.empty()) {
    return problem;
  }
  if (owned.count == 0) {
    return ""; // no byte of it in this rank's chunk
  }
  std::string name = param.name()->str();
  const fb::Quantization &quant = *param.quant();
  // The whole storage, as the unsharded parameter's buffer would hold it
  // (zeroed as the arenas are, for bytes a scheme leaves unwritten).
  scratch.storage.assign(loaded.parameterElements(param), 0);
  auto readInto = [&](const fb::Source &source, uint8_t *target) {
    std::string path = loaded.resolveSourcePath(source.file()->str());
    int fd = -1;
    uint64_t fileSize = 0;
    if (std::string problem = openWeights(path, fd, fileSize);
        !problem.empty()) {
      return problem;
    }
    std::string problem = readSource(fd, path, fileSize, name, source, 0,
                                     source.length(), target);
    ::close(fd);
    return problem;
  };
  if (const auto *sections = quant.sections()) {
    uint64_t at = 0;
    for (const fb::Source *section : *sections) {
      if (std::string problem =
              readInto(*section, scratch.storage.data() + at);
          !problem.empty()) {
        return problem;
      }
      at += section->length();
    }
    if (std::string problem =
            checkPrequantized(param, scratch.storage.data());
        !problem.empty()) {
      return problem;
    }
  } else {
    const fb::Source &source = *param.source();
    scratch.raw.resize(source.length());
    if (std::string problem = readInto(source, scratch.raw.data());
        !problem.empty()) {
      return problem;
    }
    if (std::string problem =
            quantizeWeight(param, source, scratch.raw, scratch.widened,
                           scratch.storage.data());
        !problem.empty()) {
      return problem;
    }
  }
  auto *chunk = static_cast<uint8_t *>(hostData(param.buffer()));
  std::memcpy(chunk + owned.target, scratch.storage.data() + owned.first,
              owned.count);
  return "";
}

/// Reads every parameter's bytes from its source file into its buffer,
/// quantizing those the plan stores quantized. A ZeRO-3 parameter reads
/// only the part of its source that falls in this rank's chunk; a sharded
/// quantized one is quantized (or read, GPTQ) whole, one at a time, and
/// its chunk's bytes copied out (bindShardedStorage).
std::string Session::bindParameters() {
  const fb::Plan &p = loaded.root();
  if (!p.parameters()) {
    return "";
  }
  // One read: `source` into the buffer at `target`, or (quantize) into a
  // scratch copy that is quantized into the parameter's buffer.
  // `skip` and `length`: the bytes of the source read (all of it, or the
  // part in this rank's chunk of a ZeRO-3 bucket).
  struct Read {
    const fb::Parameter *param;
    const fb::Source *source;
    uint8_t *target;
    bool quantize;
    uint64_t skip;
    uint64_t length;
  };
  std::map<std::string, std::vector<Read>> byFile;
  std::vector<const fb::Parameter *> shardedStorage;
  for (const fb::Parameter *param : *p.parameters()) {
    auto *buffer = static_cast<uint8_t *>(hostData(param->buffer()));
    const fb::Quantization *quant = param->quant();
    if (quant && param->shard()) {
      shardedStorage.push_back(param);
    } else if (quant && quant->sections()) {
      uint64_t at = 0;
      for (const fb::Source *section : *quant->sections()) {
        byFile[loaded.resolveSourcePath(section->file()->str())].push_back(
            {param, section, buffer + at, false, 0, section->length()});
        at += section->length();
      }
    } else if (const fb::Source *source = param->source()) {
      OwnedElements owned;
      if (std::string problem = ownedElements(*param, owned);
          !problem.empty()) {
        return problem;
      }
      if (param->shard() && owned.count == 0) {
        continue; // no element of it in this rank's chunk
      }
      uint64_t element = dtypeSize(loaded.bufferDType(param->buffer()));
      uint64_t length = quant ? source->length() : owned.count * element;
      byFile[loaded.resolveSourcePath(source->file()->str())].push_back(
          {param, source, buffer + owned.target * element, quant != nullptr,
           owned.first * element, length});
    }
  }
  // Quantization streams one tensor at a time: the scratch holds the largest
  // float weight once, never the whole model.
  BindScratch scratch;
  for (const auto &[path, reads] : byFile) {
    int fd = -1;
    uint64_t fileSize = 0;
    if (std::string problem = openWeights(path, fd, fileSize);
        !problem.empty()) {
      return problem;
    }
    std::string problem;
    for (const Read &read : reads) {
      const fb::Source &source = *read.source;
      std::string name = read.param->name()->str();
      if (!read.quantize) {
        problem = readSource(fd, path, fileSize, name, source, read.skip,
                             read.length, read.target);
      } else {
        scratch.raw.resize(source.length());
        problem = readSource(fd, path, fileSize, name, source, 0,
                             source.length(), scratch.raw.data());
        if (problem.empty()) {
          problem = quantizeWeight(*read.param, source, scratch.raw,
                                   scratch.widened, read.target);
        }
      }
      if (!problem.empty()) {
        break;
      }
    }
    ::close(fd);
    if (!problem.empty()) {
      return problem;
    }
  }
  for (const fb::Parameter *param : shardedStorage) {
    if (std::string problem = bindShardedStorage(*param, scratch);
        !problem.empty()) {
      return problem;
    }
  }
  for (const fb::Parameter *param : *p.parameters()) {
    const fb::Quantization *quant = param->quant();
    if (!quant || !quant->sections() || param->shard()) {
      continue; // bindShardedStorage checked the sharded ones whole
    }
    if (std::string problem = checkPrequantized(
            *param, static_cast<const uint8_t *>(hostData(param->buffer())));
        !problem.empty()) {
      return problem;
    }
  }
  return "";
}

std::string Session::run() { return runEntry(0); }

int Session::findEntry(std::string_view name) const {
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].name == name) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::string Session::recordTimeline(bool on) {
  if (on && cuda) {
    return "launch timelines are recorded on the CPU backend only (GPU "
           "launches are asynchronous)";
  }
  recording = on;
  return "";
}

std::string Session::runEntry(uint32_t index) {
  if (index >= entries.size()) {
    return "no entry " + std::to_string(index) + " (the plan has " +
           std::to_string(entries.size()) + ")";
  }
  const EntryRange &entry = entries[index];
  if (cuda) {
    return runEntryOnGpu(index);
  }
  auto byStep = [](const PreparedLaunch &launch, uint32_t step) {
    return launch.step < step;
  };
  auto begin = std::lower_bound(launches.begin(), launches.end(), entry.first,
                                byStep);
  auto end = std::lower_bound(begin, launches.end(),
                              entry.first + entry.count, byStep);
  return runSteps(static_cast<size_t>(begin - launches.begin()),
                  static_cast<size_t>(end - launches.begin()));
}

double Session::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       epoch)
      .count();
}

std::string Session::describeStep(size_t index) const {
  const PreparedLaunch &launch = launches[index];
  std::string what;
  switch (launch.kind) {
  case PreparedLaunch::Kind::Kernel:
    what = launch.kernel->name;
    break;
  case PreparedLaunch::Kind::Collective:
    what = "collective";
    break;
  case PreparedLaunch::Kind::Copy:
    what = copyStepName(launch.copy.kind);
    break;
  case PreparedLaunch::Kind::Record:
    what = "record of event " + std::to_string(launch.event);
    break;
  case PreparedLaunch::Kind::Wait:
    what = "wait for event " + std::to_string(launch.event);
    break;
  }
  if ((launch.kind == PreparedLaunch::Kind::Collective ||
       launch.kind == PreparedLaunch::Kind::Copy) &&
      launch.stream != 0) {
    what += " on stream " + std::to_string(launch.stream);
  }
  return "step " + std::to_string(launch.step) + " (" + what +
         (launch.origin.empty() ? "" : ", " + launch.origin) + ")";
}

template <typename Body> std::string Session::timed(size_t index, Body body) {
  double started = now();
  std::string problem = body();
  double ended = now();
  if (recording) {
    timeline.push_back({launches[index].step, started, ended});
  }
  if (profile) {
    profileSeconds[index] += ended - started;
    ++profileCalls[index];
  }
  return problem;
}

std::string Session::runStep(size_t index) {
  PreparedLaunch &launch = launches[index];
  if (launch.stepValue) {
    int64_t step = *launch.stepValue;
    if (step < launch.firstStep ||
        (launch.lastStep != -1 && step > launch.lastStep) ||
        (step - launch.firstStep) % launch.stepPeriod != 0) {
      return ""; // not one of its steps
    }
  }
  switch (launch.kind) {
  case PreparedLaunch::Kind::Record:
    // The event stands for every collective its stream has started so far
    // (on stream 0, whose work is done when the step is reached: nothing).
    marks[launch.event] = {launch.stream, startedOn[launch.stream]};
    return "";
  case PreparedLaunch::Kind::Wait:
    return waitEvent(index);
  case PreparedLaunch::Kind::Copy:
    return runCopy(index);
  case PreparedLaunch::Kind::Collective:
    if (launch.stream != 0) {
      return startCollective(index);
    }
    if (std::string problem = orderAfterInFlight(index); !problem.empty()) {
      return problem;
    }
    break;
  case PreparedLaunch::Kind::Kernel:
    // Polling before each launch is what moves MPI's started collectives
    // along while the kernels run (OpenMPI progresses them inside MPI calls).
    if (std::string problem = pollInFlight(); !problem.empty()) {
      return problem;
    }
    if (std::string problem = checkNoRace(index); !problem.empty()) {
      return problem;
    }
    if (launch.onHostStream && hostQueue) {
      return submitHost(index);
    }
    if (std::string problem = checkNoHostRace(index); !problem.empty()) {
      return problem;
    }
    // Before 1.16, the host's queue runs after everything issued before it.
    if (launch.onHostStream) {
      if (std::string problem = completeAll(); !problem.empty()) {
        return describeStep(index) + ": " + problem;
      }
    }
    break;
  }
  std::string problem = timed(index, [&] {
    return launch.collective ? runCollective(*launch.collective)
                             : launch.kernel->run(launch.call);
  });
  return problem.empty() ? "" : describeStep(index) + ": " + problem;
}

Session::PreparedLaunch Session::prepareCopy(uint32_t step,
                                             const fb::Copy &copy) const {
  PreparedLaunch prepared;
  prepared.kind = PreparedLaunch::Kind::Copy;
  prepared.step = step;
  prepared.stream = copy.stream();
  prepared.copy.kind = copy.kind();
  prepared.copy.source = bufferData(copy.source());
  prepared.copy.target = bufferData(copy.target());
  // The loader checked that both tensors have this many bytes.
  prepared.copy.bytes = loaded.bufferBytes(copy.source());
  return prepared;
}

std::string Session::runCopy(size_t index) {
  // Collectives in flight go first where they share bytes with the copy
  // (those of its stream in stream order); then the copy runs at once, so
  // whatever comes after it on any stream sees it done, and a record after
  // it on its stream stands for nothing more than the collectives before.
  if (std::string problem = pollInFlight(); !problem.empty()) {
    return problem;
  }
  if (std::string problem = orderAfterInFlight(index); !problem.empty()) {
    return problem;
  }
  if (std::string problem = checkNoHostRace(index); !problem.empty()) {
    return problem;
  }
  const PreparedCopy &copy = launches[index].copy;
  timed(index, [&] {
    std::memcpy(copy.target, copy.source, copy.bytes);
    return std::string();
  });
  if (crossesHostAndDevice(copy.kind)) {
    copiedBytes += copy.bytes;
  }
  return "";
}

uint64_t Session::bytesCopied() const {
#if TAILOR_ENABLE_CUDA
  if (cuda) {
    return cuda->bytesCopied();
  }
#endif
  return copiedBytes;
}

std::string Session::runSteps(size_t first, size_t last) {
  std::fill(startedOn.begin(), startedOn.end(), 0);
  std::fill(marks.begin(), marks.end(), EventMark());
  std::string problem;
  for (size_t i = first; i < last && problem.empty(); ++i) {
    problem = runStep(i);
  }
  // The entry's outputs and states are final when it returns, and MPI
  // forbids abandoning a started collective: complete them all, even after
  // a failure (whose message comes first).
  std::string drained = completeAll();
  return problem.empty() ? drained : problem;
}

std::string Session::runEntryOnGpu(uint32_t index) {
#if TAILOR_ENABLE_CUDA
  const EntryRange &entry = entries[index];
  const fb::Plan &p = loaded.root();
  // The entry's inputs go up from their host copies; the caller wrote them
  // through bufferData().
  auto bindingEntry = [&](const fb::Binding *binding) {
    return p.entries() && p.entries()->size() > 0 ? binding->entry() : 0u;
  };
  if (p.inputs()) {
    for (const fb::Binding *binding : *p.inputs()) {
      if (bindingEntry(binding) == index && mirrors.count(binding->buffer())) {
        if (std::string problem = upload(binding->buffer()); !problem.empty()) {
          return "input '" + binding->name()->str() + "': " + problem;
        }
      }
    }
  }
  if (std::string problem = cuda->runSteps(entry.first, entry.count);
      !problem.empty()) {
    return problem;
  }
  if (p.outputs()) {
    for (const fb::Binding *binding : *p.outputs()) {
      if (bindingEntry(binding) == index && mirrors.count(binding->buffer())) {
        if (std::string problem = download(binding->buffer()); !problem.empty()) {
          return "output '" + binding->name()->str() + "': " + problem;
        }
      }
    }
  }
  return "";
#else
  (void)index;
  return "this runtime was built without CUDA";
#endif
}

/// A 64-bit mix (splitmix64's finalizer): consecutive inputs give
/// independent-looking outputs.
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string Session::initializeParameters() {
  const fb::Plan &p = loaded.root();
  if (!p.parameters()) {
    return "";
  }
  for (const fb::Parameter *param : *p.parameters()) {
    const fb::Init *init = param->init();
    if (param->source() || !init) {
      continue;
    }
    std::string name = param->name()->str();
    if (plan().bufferDType(param->buffer()) != DType::F32) {
      return "parameter '" + name + "': only f32 parameters can be initialized";
    }
    // Element i of the logical tensor is drawn from (key, i) alone, so a
    // ZeRO-3 rank draws exactly its chunk's elements of what one rank
    // would draw for the whole tensor.
    OwnedElements owned;
    if (std::string problem = ownedElements(*param, owned); !problem.empty()) {
      return problem;
    }
    float *values =
        static_cast<float *>(hostData(param->buffer())) + owned.target;
    uint64_t first = owned.first, count = owned.count;
    // Seeded by the plan's seed and the name (FNV-1a), so every parameter
    // draws its own reproducible stream.
    uint64_t key = 1469598103934665603ull;
    for (char c : name) {
      key = (key ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    }
    key = mix64(key ^ mix64(init->seed()));
    auto uniform = [&](uint64_t i) {
      return static_cast<double>(mix64(key + i) >> 11) * 0x1.0p-53;
    };
    switch (init->kind()) {
    case fb::InitKind::Zeros:
      std::memset(values, 0, count * sizeof(float));
      break;
    case fb::InitKind::KaimingUniform: {
      if (init->fan_in() <= 0) {
        return "parameter '" + name + "': kaiming-uniform init needs fan_in > 0";
      }
      double a = init->a();
      double gain = std::sqrt(2.0 / (1.0 + a * a));
      double bound = std::sqrt(3.0) * gain /
                     std::sqrt(static_cast<double>(init->fan_in()));
      for (uint64_t j = 0; j < count; ++j) {
        values[j] =
            static_cast<float>((2.0 * uniform(first + j) - 1.0) * bound);
      }
      break;
    }
    case fb::InitKind::Normal:
      for (uint64_t j = 0; j < count; ++j) {
        // Box-Muller on two independent draws.
        uint64_t i = first + j;
        double u1 = std::max(uniform(2 * i), 0x1.0p-53);
        double u2 = uniform(2 * i + 1);
        values[j] =
            static_cast<float>(init->std() * std::sqrt(-2.0 * std::log(u1)) *
                               std::cos(2.0 * M_PI * u2));
      }
      break;
    default:
      return "parameter '" + name + "' has an unknown init kind " +
             std::to_string(static_cast<int>(init->kind()));
    }
  }
  return "";
}

} // namespace tailor::runtime
