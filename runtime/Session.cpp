//===- Session.cpp - arenas, parameter binding, execution -----------------===//

#include "runtime/Session.h"

#include "runtime/include/tailor/runtime.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace tailor::runtime {

namespace fb = tailor::plan;

Session::~Session() {
  for (void *arena : arenas) {
    std::free(arena);
  }
}

void *Session::bufferData(uint32_t index) const {
  const fb::Buffer *buffer = loaded.root().buffers()->Get(index);
  return static_cast<uint8_t *>(arenas[buffer->arena()]) + buffer->offset();
}

static Attributes decodeAttributes(const fb::Launch &launch) {
  std::vector<Attribute> attrs;
  if (const auto *list = launch.attributes()) {
    for (const fb::Attribute *a : *list) {
      Attribute attr;
      attr.name = a->name()->str();
      switch (a->kind()) {
      case fb::AttrKind::Int:
        attr.kind = Attribute::Kind::Int;
        attr.i = a->i();
        break;
      case fb::AttrKind::Float:
        attr.kind = Attribute::Kind::Float;
        attr.f = a->f();
        break;
      case fb::AttrKind::Ints:
        attr.kind = Attribute::Kind::Ints;
        if (a->ints()) {
          attr.ints.assign(a->ints()->begin(), a->ints()->end());
        }
        break;
      case fb::AttrKind::Floats:
        attr.kind = Attribute::Kind::Floats;
        if (a->floats()) {
          attr.floats.assign(a->floats()->begin(), a->floats()->end());
        }
        break;
      case fb::AttrKind::String:
        attr.kind = Attribute::Kind::String;
        attr.s = a->s() ? a->s()->str() : "";
        break;
      }
      attrs.push_back(std::move(attr));
    }
  }
  return Attributes(std::move(attrs));
}

std::unique_ptr<Session> Session::create(const LoadedPlan &plan, int threads,
                                         std::string &error, int &status) {
  std::unique_ptr<Session> session(new Session(plan));
  const fb::Plan &p = plan.root();

  // Arenas: exactly the planned sizes (the plan's memory report is the
  // truth), zeroed so a plan never reads garbage.
  for (const fb::Arena *arena : *p.arenas()) {
    size_t alignment = std::max<size_t>(arena->alignment(), sizeof(void *));
    size_t size = arena->size();
    void *memory = nullptr;
    if (size > 0) {
      // aligned_alloc wants a multiple of the alignment; the planner's
      // arenas already are, a hand-written plan may not be.
      size_t rounded = (size + alignment - 1) / alignment * alignment;
      memory = std::aligned_alloc(alignment, rounded);
      if (!memory) {
        std::ostringstream message;
        message << plan.name() << ": cannot allocate arena '"
                << arena->name()->str() << "' (" << size << " bytes)";
        error = message.str();
        status = TAILOR_ERROR_INTERNAL;
        return nullptr;
      }
      std::memset(memory, 0, size);
    }
    session->arenas.push_back(memory);
    session->allocated[static_cast<int>(arena->category())] += size;
  }

  if (const auto *constants = p.constants()) {
    for (const fb::Constant *constant : *constants) {
      std::memcpy(session->bufferData(constant->buffer()),
                  constant->data()->data(), constant->data()->size());
    }
  }
  if (std::string problem = session->bindParameters(); !problem.empty()) {
    error = plan.name() + ": " + problem;
    status = TAILOR_ERROR_IO;
    return nullptr;
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

  // Launches: resolve kernels and tensors once; every kernel checks its
  // launch now, so run() never meets a malformed one.
  const auto &ops = *p.ops();
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const fb::Launch *launch = ops.Get(i)->step_as_Launch();
    if (!launch) {
      continue;
    }
    PreparedLaunch prepared;
    const fb::Kernel *kernel = p.kernels()->Get(launch->kernel());
    prepared.kernel = findCpuKernel(kernel->name()->string_view());
    prepared.origin = launch->origin() ? launch->origin()->str() : "";
    for (uint32_t operand : *launch->operands()) {
      Tensor tensor;
      tensor.data = session->bufferData(operand);
      tensor.dtype = plan.bufferDType(operand);
      tensor.shape = plan.bufferShape(operand);
      prepared.call.operands.push_back(std::move(tensor));
    }
    prepared.call.attributes = decodeAttributes(*launch);
    prepared.call.pool = session->pool.get();
    if (std::string problem = prepared.kernel->check(prepared.call);
        !problem.empty()) {
      std::ostringstream message;
      message << plan.name() << ": step " << i << " ("
              << kernel->name()->str()
              << (prepared.origin.empty() ? "" : ", " + prepared.origin)
              << "): " << problem;
      error = message.str();
      status = TAILOR_ERROR_INVALID_PLAN;
      return nullptr;
    }
    session->launches.push_back(std::move(prepared));
  }
  return session;
}

/// Maps each source file once and copies every parameter's bytes into its
/// buffer. The mapping is dropped afterwards: the arenas hold the weights.
std::string Session::bindParameters() {
  const fb::Plan &p = loaded.root();
  if (!p.parameters()) {
    return "";
  }
  std::map<std::string, std::vector<const fb::Parameter *>> byFile;
  for (const fb::Parameter *param : *p.parameters()) {
    if (param->source()) {
      byFile[loaded.resolveSourcePath(param->source()->file()->str())]
          .push_back(param);
    }
  }
  for (const auto &[path, params] : byFile) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return "cannot open weights file '" + path + "': " + std::strerror(errno);
    }
    struct stat info;
    if (fstat(fd, &info) != 0) {
      std::string message = "cannot stat weights file '" + path + "': " +
                            std::strerror(errno);
      ::close(fd);
      return message;
    }
    uint64_t fileSize = static_cast<uint64_t>(info.st_size);
    void *mapped = nullptr;
    if (fileSize > 0) {
      mapped = mmap(nullptr, fileSize, PROT_READ, MAP_PRIVATE, fd, 0);
      if (mapped == MAP_FAILED) {
        std::string message = "cannot map weights file '" + path + "': " +
                              std::strerror(errno);
        ::close(fd);
        return message;
      }
      madvise(mapped, fileSize, MADV_SEQUENTIAL);
    }
    ::close(fd);
    std::string problem;
    for (const fb::Parameter *param : params) {
      const fb::Source *source = param->source();
      // The file may have changed since the plan was loaded.
      if (source->offset() > fileSize ||
          source->length() > fileSize - source->offset()) {
        problem = "parameter '" + param->name()->str() + "': bytes [" +
                  std::to_string(source->offset()) + ", " +
                  std::to_string(source->offset() + source->length()) +
                  ") lie outside '" + path + "' (" + std::to_string(fileSize) +
                  " bytes)";
        break;
      }
      std::memcpy(bufferData(param->buffer()),
                  static_cast<const uint8_t *>(mapped) + source->offset(),
                  source->length());
    }
    if (mapped) {
      munmap(mapped, fileSize);
    }
    if (!problem.empty()) {
      return problem;
    }
  }
  return "";
}

std::string Session::run() {
  for (size_t i = 0; i < launches.size(); ++i) {
    const PreparedLaunch &launch = launches[i];
    std::string problem = launch.kernel->run(launch.call);
    if (!problem.empty()) {
      return "launch " + std::to_string(i) + " (" + launch.kernel->name +
             (launch.origin.empty() ? "" : ", " + launch.origin) +
             "): " + problem;
    }
  }
  return "";
}

} // namespace tailor::runtime
