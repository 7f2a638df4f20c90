//===- Plan.cpp - loading and verifying plan files ------------------------===//

#include "runtime/Plan.h"

#include "runtime/MemoryCategory.h"
#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/DeviceImage.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <sys/stat.h>

namespace tailor::runtime {

namespace fb = tailor::plan;

/// Streams a message and converts to std::string.
namespace {
class Message {
public:
  template <typename T> Message &operator<<(const T &value) {
    stream << value;
    return *this;
  }
  operator std::string() const { return stream.str(); }

private:
  std::ostringstream stream;
};
} // namespace

static bool isPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/// a * b, or false on overflow.
static bool checkedMul(uint64_t a, uint64_t b, uint64_t &out) {
  if (a != 0 && b > UINT64_MAX / a) {
    return false;
  }
  out = a * b;
  return true;
}

/// The flatbuffers Verifier checks a vector's length field, not that 8-byte
/// elements are 8-byte aligned; a forged file could make reads misaligned.
/// (Writers do not align empty vectors, whose data is never read.)
template <typename T>
static bool aligned(const flatbuffers::Vector<T> *vector) {
  return !vector || vector->size() == 0 ||
         reinterpret_cast<uintptr_t>(vector->data()) % alignof(T) == 0;
}

static bool validDType(fb::DType dtype) {
  auto value = static_cast<int>(dtype);
  return value >= static_cast<int>(fb::DType::MIN) &&
         value <= static_cast<int>(fb::DType::MAX);
}

bool quantSpecOf(const fb::Quantization &table, quant::QuantSpec &spec,
                 std::string &error) {
  spec = quant::QuantSpec();
  if (!quant::parseScheme(table.scheme()->str(), spec.scheme)) {
    error = Message() << "unknown quantization scheme '" << table.scheme()->str()
                      << "'";
    return false;
  }
  spec.rows = table.rows();
  spec.cols = table.cols();
  spec.blockSize = table.block_size();
  spec.doubleQuant = table.double_quant();
  spec.nestedBlockSize = table.nested_block_size();
  spec.bits = table.bits();
  spec.groupSize = table.group_size();
  spec.actOrder = table.act_order();
  spec.outlierThreshold = table.outlier_threshold();
  spec.outlierColumns = table.outlier_columns();
  error = quant::checkSpec(spec);
  return error.empty();
}

/// Bytes per element of a float dtype a quantized weight can be read from,
/// or 0.
static uint64_t floatSourceSize(fb::DType dtype) {
  switch (dtype) {
  case fb::DType::F32:
    return 4;
  case fb::DType::F16:
  case fb::DType::BF16:
    return 2;
  default:
    return 0;
  }
}

/// Records why a load failed where the caller asked to know.
static void setFailure(LoadFailure *failure, LoadFailure kind) {
  if (failure) {
    *failure = kind;
  }
}

std::unique_ptr<LoadedPlan> LoadedPlan::load(const std::string &path,
                                             const LoadOptions &options,
                                             std::string &error,
                                             LoadFailure *failure) {
  // A plan is a size-prefixed flatbuffer: [u32 length] then that many bytes.
  constexpr uint64_t kLargestPlan = uint64_t(UINT32_MAX) + 4;
  setFailure(failure, LoadFailure::Io);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    error = Message() << "cannot open plan '" << path << "': "
                      << std::strerror(errno);
    return nullptr;
  }
  if (!S_ISREG(info.st_mode)) {
    error = Message() << "cannot read plan '" << path << "': "
                      << (S_ISDIR(info.st_mode) ? "it is a directory"
                                                : "not a regular file");
    return nullptr;
  }
  if (static_cast<uint64_t>(info.st_size) > kLargestPlan) {
    setFailure(failure, LoadFailure::InvalidPlan);
    error = Message() << path << ": not a tailor plan (the file has "
                      << info.st_size << " bytes, more than the "
                      << kLargestPlan << " a plan can hold)";
    return nullptr;
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    error = Message() << "cannot open plan '" << path
                      << "': " << std::strerror(errno);
    return nullptr;
  }
  std::streamoff size = static_cast<std::streamoff>(info.st_size);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0 && !file.read(reinterpret_cast<char *>(bytes.data()), size)) {
    error = Message() << "cannot read plan '" << path << "': "
                      << std::strerror(errno);
    return nullptr;
  }
  std::string baseDir = ".";
  if (size_t slash = path.find_last_of('/'); slash != std::string::npos) {
    baseDir = slash == 0 ? "/" : path.substr(0, slash);
  }
  return loadFromMemory(bytes.data(), bytes.size(), baseDir, path, options,
                        error, failure);
}

/// Which stage of a layer split `options` asks for: its own `stage`, or
/// the stage of launch rank `rank` (ranks are stage-major), checked against
/// the plan's world; -1 with `error` set when neither fits.
static int requestedStage(const std::string &name, int stages, int world,
                          const LoadOptions &options, std::string &error) {
  int replicas = world / stages;
  std::string layout = std::to_string(world) + " ranks (" +
                       std::to_string(stages) + " pipeline stages" +
                       (replicas > 1 ? " x " + std::to_string(replicas) +
                                           " data-parallel replicas"
                                     : "") +
                       ")";
  if (options.stage >= 0) {
    return options.stage;
  }
  if (options.rank < 0) {
    error = Message() << name << ": a layer split for " << layout
                      << ": train it with mpirun -np " << world
                      << " tailor train (tailor inspect shows each stage)";
    return -1;
  }
  if (options.worldSize > 0 && options.worldSize != world) {
    error = Message() << name << " was compiled for " << layout
                      << " but launched on " << options.worldSize
                      << "; launch it with mpirun -np " << world
                      << ", or recompile it";
    return -1;
  }
  return options.rank / replicas;
}

std::unique_ptr<LoadedPlan> LoadedPlan::loadStage(const LoadedPlan &outer,
                                                  const LoadOptions &options,
                                                  std::string &error,
                                                  LoadFailure *failure) {
  int stages = pipelineStageCount(outer.root());
  int world = outer.root().world_size();
  if (world < stages || world % stages != 0) {
    error = Message() << outer.displayName << ": its " << stages
                      << " pipeline stages do not divide its world of "
                      << world << " ranks";
    return nullptr;
  }
  int replicas = world / stages;
  int index = requestedStage(outer.displayName, stages, world, options, error);
  if (index < 0) {
    return nullptr;
  }
  if (index >= stages) {
    error = Message() << outer.displayName << ": no pipeline stage "
                      << index << " (the plan has " << stages << " on "
                      << world << " ranks)";
    return nullptr;
  }
  const auto *bytes =
      outer.root().stages()->Get(static_cast<uint32_t>(index))->plan();
  LoadOptions inner = options;
  inner.stage = -1;
  inner.rank = -1;
  std::unique_ptr<LoadedPlan> stage = loadFromMemory(
      bytes->data(), bytes->size(), outer.baseDir,
      outer.displayName + " (stage " + std::to_string(index) + ")", inner,
      error, failure);
  if (!stage) {
    return nullptr;
  }
  const fb::PipelineStage *info = stage->root().pipeline();
  if (!info || info->stage() != index || info->stages() != stages ||
      info->replicas() != replicas ||
      stage->root().rank() != index * replicas ||
      stage->root().world_size() != world) {
    error = Message() << stage->displayName
                      << ": its pipeline table does not say it is stage "
                      << index << " of " << stages << " on " << world
                      << " ranks";
    return nullptr;
  }
  return stage;
}

std::unique_ptr<LoadedPlan> LoadedPlan::loadFromMemory(
    const void *data, size_t size, const std::string &baseDir,
    const std::string &displayName, const LoadOptions &options,
    std::string &error, LoadFailure *failure) {
  setFailure(failure, LoadFailure::InvalidPlan);
  std::unique_ptr<LoadedPlan> plan(new LoadedPlan());
  plan->displayName = displayName;
  plan->baseDir = baseDir.empty() ? "." : baseDir;
  if (data == nullptr && size != 0) {
    error = Message() << displayName << ": no plan bytes";
    return nullptr;
  }
  plan->storage.assign(static_cast<const uint8_t *>(data),
                       static_cast<const uint8_t *>(data) + size);
  const uint8_t *bytes = plan->storage.data();
  // Plans are size-prefixed: [u32 length][root offset]["TPLN"]..., so a
  // truncated or padded file is caught before anything is read.
  if (size < 12 || !flatbuffers::BufferHasIdentifier(
                       bytes, fb::PlanIdentifier(), /*size_prefixed=*/true)) {
    error = Message() << displayName
                      << ": not a tailor plan (expected the file identifier "
                         "'TPLN' at byte 8; the file has "
                      << size << " bytes)";
    return nullptr;
  }
  uint64_t declared = flatbuffers::ReadScalar<uint32_t>(bytes) + uint64_t(4);
  if (declared != size) {
    error = Message() << displayName << ": truncated or damaged plan (its "
                      << "header says " << declared << " bytes, the file has "
                      << size << ")";
    return nullptr;
  }
  // Depth and table limits keep a forged file from making the verifier
  // itself slow.
  flatbuffers::Verifier verifier(bytes, size, /*max_depth=*/32,
                                 /*max_tables=*/16u << 20);
  if (!fb::VerifySizePrefixedPlanBuffer(verifier)) {
    error = Message() << displayName
                      << ": corrupt plan (the flatbuffer does not verify: "
                         "truncated or damaged file)";
    return nullptr;
  }
  plan->planRoot = fb::GetSizePrefixedPlan(bytes);
  if (int stages = pipelineStageCount(*plan->planRoot); stages > 0) {
    return loadStage(*plan, options, error, failure);
  }
  std::string problem = plan->verify();
  if (!problem.empty()) {
    error = Message() << displayName << ": " << problem;
    return nullptr;
  }
  // Only once the plan itself is sound, so a damaged plan is reported as
  // one even when its weights are missing too.
  if (options.checkSourceFiles) {
    problem = plan->verifySourceFiles();
    if (!problem.empty()) {
      error = Message() << displayName << ": " << problem;
      setFailure(failure, LoadFailure::Io);
      return nullptr;
    }
  }
  return plan;
}

std::string LoadedPlan::resolveSourcePath(const std::string &file) const {
  if (!file.empty() && file[0] == '/') {
    return file;
  }
  return baseDir + "/" + file;
}

DType LoadedPlan::bufferDType(uint32_t buffer) const {
  return static_cast<DType>(planRoot->buffers()->Get(buffer)->dtype());
}

std::vector<int64_t> LoadedPlan::bufferShape(uint32_t buffer) const {
  const auto *shape = planRoot->buffers()->Get(buffer)->shape();
  return std::vector<int64_t>(shape->begin(), shape->end());
}

uint64_t LoadedPlan::bufferBytes(uint32_t buffer) const {
  uint64_t count = dtypeSize(bufferDType(buffer));
  for (int64_t d : bufferShape(buffer)) {
    count *= static_cast<uint64_t>(d);
  }
  return count;
}

std::vector<int64_t>
LoadedPlan::parameterShape(const fb::Parameter &param) const {
  if (const fb::ParameterShard *shard = param.shard()) {
    return std::vector<int64_t>(shard->shape()->begin(), shard->shape()->end());
  }
  return bufferShape(param.buffer());
}

uint64_t LoadedPlan::parameterElements(const fb::Parameter &param) const {
  uint64_t count = 1;
  for (int64_t d : parameterShape(param)) {
    count *= static_cast<uint64_t>(d);
  }
  return count;
}

uint64_t rankOffset(const fb::Buffer &buffer, int rank, int worldSize) {
  if (buffer.rank_stride() == 0) {
    return buffer.offset();
  }
  uint32_t period = buffer.rank_period() == 0
                        ? static_cast<uint32_t>(worldSize)
                        : buffer.rank_period();
  return buffer.offset() +
         static_cast<uint64_t>(static_cast<uint32_t>(rank) % period) *
             buffer.rank_stride();
}

uint64_t LoadedPlan::bufferOffset(uint32_t buffer, int rank) const {
  return rankOffset(*planRoot->buffers()->Get(buffer), rank,
                    planRoot->world_size());
}

std::string LoadedPlan::verifyDeviceCode() const {
  const fb::Plan &p = *planRoot;
  if (p.target()->sm() < 75) {
    return Message() << "the plan targets sm_" << p.target()->sm()
                     << "; tailor's CUDA kernels need sm_75 or newer";
  }
  std::string_view precision = p.target()->precision()
                                   ? p.target()->precision()->string_view()
                                   : std::string_view();
  if (p.target()->sm() < 80 && precision != "fp16") {
    return Message() << "the plan targets sm_" << p.target()->sm()
                     << " in "
                     << (precision.empty() ? std::string("fp32")
                                           : std::string(precision))
                     << "; below sm_80 tailor's CUDA kernels compute fp16 "
                        "only (no bf16 tensor cores)";
  }
  if (!p.device_code() || p.device_code()->size() == 0) {
    return Message() << "the plan targets CUDA (sm_" << p.target()->sm()
                     << ") but carries no device code";
  }
  // Every device function any launcher of the plan may ask for at the
  // plan's precision.
  cuda::HalfCompute half = cuda::halfComputeOf(
      p.target()->precision() ? p.target()->precision()->string_view() : "");
  std::vector<std::string> needed;
  if (p.kernels()) {
    for (const fb::Kernel *kernel : *p.kernels()) {
      if (const cuda::CudaKernelDef *def =
              cuda::findCudaKernel(kernel->name()->string_view())) {
        for (const char *const *f = cuda::deviceFunctions(*def, half); f && *f;
             ++f) {
          needed.push_back(*f);
        }
      }
    }
  }
  // What the target GPU runs without compiling: the cubins for its SM.
  std::vector<std::string> targetFunctions;
  for (const fb::DeviceCode *code : *p.device_code()) {
    std::string arch = code->arch()->str();
    cuda::DeviceImageInfo info;
    bool ptx = code->kind() == fb::DeviceCodeKind::Ptx;
    if (!ptx && code->kind() != fb::DeviceCodeKind::Cubin) {
      return Message() << "device code '" << arch << "' has an unknown kind";
    }
    std::vector<uint8_t> bytes;
    std::string problem = deviceCodeBytes(*code, bytes);
    if (problem.empty()) {
      problem = ptx ? cuda::readPtx(bytes.data(), bytes.size(), info)
                    : cuda::readCubin(bytes.data(), bytes.size(), info);
    }
    if (!problem.empty()) {
      return Message() << "device code '" << arch << "' is unusable: "
                       << problem;
    }
    if (info.sm != code->sm()) {
      return Message() << "device code '" << arch << "' claims sm "
                       << code->sm() << " but is built for " << info.sm;
    }
    if (!ptx && cuda::cubinRunsOn(code->sm(), arch.back() == 'a',
                                  p.target()->sm())) {
      targetFunctions.insert(targetFunctions.end(), info.functions.begin(),
                             info.functions.end());
    }
  }
  std::sort(targetFunctions.begin(), targetFunctions.end());
  for (const std::string &function : needed) {
    if (!std::binary_search(targetFunctions.begin(), targetFunctions.end(),
                            function)) {
      return Message() << "the plan targets sm_" << p.target()->sm()
                       << " but no cubin for it has the entry point '"
                       << function << "'";
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Verification: one named check per part of the plan, in the order the
// parts refer to each other (arenas before the buffers in them, buffers
// before what names them). Each returns "" or the first problem.
//===----------------------------------------------------------------------===//

/// Ranks a plan may name (a guard against absurd group sizes).
static constexpr int32_t kMaxWorldSize = 65536;

/// The format version, and the rank this runtime can run.
static std::string verifyFormat(const fb::Plan &p) {
  if (p.version() / 100 != kPlanVersion / 100) {
    return Message() << "plan format version " << p.version() / 100 << "."
                     << p.version() % 100 << " is not readable by this runtime"
                     << " (it reads " << kPlanVersion / 100
                     << ".x); recompile the plan with a matching tailor";
  }
  if (p.world_size() < 1 || p.rank() < 0 || p.rank() >= p.world_size()) {
    return Message() << "rank " << p.rank() << " is outside world size "
                     << p.world_size();
  }
  if (p.world_size() > kMaxWorldSize) {
    return Message() << "the plan is for " << p.world_size()
                     << " ranks; this runtime runs at most " << kMaxWorldSize;
  }
  if (const fb::PipelineStage *stage = p.pipeline()) {
    // A stage's ranks are stage-major (1.13): its first is stage x replicas.
    int64_t replicas = stage->replicas();
    if (replicas < 1 || stage->stages() < 1 ||
        int64_t(stage->stages()) * replicas != p.world_size() ||
        int64_t(stage->stage()) * replicas != p.rank()) {
      return Message() << "pipeline stage " << stage->stage() << " of "
                       << stage->stages() << " with " << replicas
                       << " replicas does not fit rank " << p.rank()
                       << " of world size " << p.world_size();
    }
  }
  if (p.parallel() && p.parallel()->ranks()) {
    // A mixed cluster's ranks (1.12): one each, each with some work.
    const auto &ranks = *p.parallel()->ranks();
    if (static_cast<int64_t>(ranks.size()) != p.world_size()) {
      return Message() << "the plan's parallel table lists " << ranks.size()
                       << " ranks' devices for a world of " << p.world_size();
    }
    for (uint32_t r = 0; r < ranks.size(); ++r) {
      if (ranks.Get(r)->micro_batches() < 1) {
        return Message() << "rank " << r << " of the plan's parallel table runs "
                         << ranks.Get(r)->micro_batches()
                         << " micro-batches a step (at least 1 expected)";
      }
    }
  }
  if (p.target() && p.target()->backend() != fb::Backend::Cuda &&
      p.target()->backend() != fb::Backend::Cpu) {
    return Message() << "the plan targets backend "
                     << static_cast<int>(p.target()->backend())
                     << ", which this runtime does not know";
  }
  return "";
}

/// Arenas, and the memory report they must add up to.
static std::string verifyArenas(const fb::Plan &p) {
  const auto &arenas = *p.arenas();
  CategoryBytes byCategory{};
  for (uint32_t i = 0; i < arenas.size(); ++i) {
    const fb::Arena *arena = arenas.Get(i);
    auto category = static_cast<int>(arena->category());
    if (!isMemoryCategory(category)) {
      return Message() << "arena " << i << " has an unknown category "
                       << category;
    }
    auto kind = static_cast<int>(arena->kind());
    if (kind < 0 || kind > static_cast<int>(fb::ArenaKind::MAX)) {
      return Message() << "arena '" << arena->name()->str()
                       << "' has an unknown kind " << kind;
    }
    if (!isPowerOfTwo(arena->alignment()) || arena->alignment() > 4096) {
      return Message() << "arena '" << arena->name()->str()
                       << "' has alignment " << arena->alignment()
                       << " (expected a power of two up to 4096)";
    }
    if (arena->size() > (uint64_t(1) << 48)) {
      return Message() << "arena '" << arena->name()->str() << "' claims "
                       << arena->size() << " bytes";
    }
    byCategory[static_cast<size_t>(category)] += arena->size();
  }
  const fb::Memory *memory = p.memory();
  if (!memory) {
    return "";
  }
  CategoryBytes reported = reportedBytes(*memory);
  for (size_t c = 0; c < kMemoryCategoryCount; ++c) {
    if (reported[c] != byCategory[c]) {
      return Message() << "the memory report says "
                       << fb::EnumNamesCategory()[c] << " = " << reported[c]
                       << " bytes but its arenas hold " << byCategory[c];
    }
  }
  uint64_t total = totalBytes(reported);
  if (memory->total() != total) {
    return Message() << "the memory report's total " << memory->total()
                     << " is not the sum of its categories (" << total << ")";
  }
  return "";
}

/// The rank positions a buffer's view moves over: its rank period, or the
/// world size for period 0 (verifyRankStride has checked it divides it).
static uint32_t rankPositions(const fb::Plan &p, const fb::Buffer &buffer) {
  return buffer.rank_period() == 0
             ? static_cast<uint32_t>(p.world_size())
             : std::min<uint32_t>(buffer.rank_period(),
                                  static_cast<uint32_t>(p.world_size()));
}

/// Buffer `i`'s rank stride (plan 1.7): a period that divides the world, a
/// stride of whole elements, and a view inside the arena on every rank.
static std::string verifyRankStride(const fb::Plan &p, uint32_t i) {
  const fb::Buffer *buffer = p.buffers()->Get(i);
  uint32_t period = buffer->rank_period();
  if (period != 0 && static_cast<uint32_t>(p.world_size()) % period != 0) {
    return Message() << "buffer " << i << " has rank period " << period
                     << ", which does not divide the world size "
                     << p.world_size();
  }
  uint64_t stride = buffer->rank_stride();
  if (stride == 0) {
    return "";
  }
  size_t element = dtypeSize(static_cast<DType>(buffer->dtype()));
  if (stride % element != 0) {
    return Message() << "buffer " << i << " rank stride " << stride
                     << " is not a whole number of its " << element
                     << "-byte elements";
  }
  const fb::Arena *arena = p.arenas()->Get(buffer->arena());
  uint64_t lastPosition = rankPositions(p, *buffer) - 1;
  uint64_t shift = 0;
  if (!checkedMul(lastPosition, stride, shift) ||
      shift > arena->size() - buffer->offset() - buffer->size()) {
    return Message() << "buffer " << i << " [" << buffer->offset() << ", +"
                     << buffer->size() << ") with rank stride " << stride
                     << " lies outside arena '" << arena->name()->str()
                     << "' of " << arena->size() << " bytes at rank position "
                     << lastPosition;
  }
  return "";
}

/// Buffer `i`: inside its arena, with a shape that fits its size.
static std::string verifyBuffer(const fb::Plan &p, uint32_t i) {
  const auto &arenas = *p.arenas();
  const fb::Buffer *buffer = p.buffers()->Get(i);
  if (buffer->arena() >= arenas.size()) {
    return Message() << "buffer " << i << " names arena " << buffer->arena()
                     << " of " << arenas.size();
  }
  if (!validDType(buffer->dtype())) {
    return Message() << "buffer " << i << " has an unknown element type "
                     << static_cast<int>(buffer->dtype());
  }
  const fb::Arena *arena = arenas.Get(buffer->arena());
  if (buffer->offset() > arena->size() ||
      buffer->size() > arena->size() - buffer->offset()) {
    return Message() << "buffer " << i << " [" << buffer->offset() << ", +"
                     << buffer->size() << ") lies outside arena '"
                     << arena->name()->str() << "' of " << arena->size()
                     << " bytes";
  }
  if (!aligned(buffer->shape())) {
    return Message() << "buffer " << i << " has a misaligned shape";
  }
  if (buffer->shape()->size() > kMaxPlanRank) {
    return Message() << "buffer " << i << " has rank "
                     << buffer->shape()->size() << " (at most " << kMaxPlanRank
                     << ")";
  }
  uint64_t bytes = dtypeSize(static_cast<DType>(buffer->dtype()));
  for (int64_t d : *buffer->shape()) {
    if (d < 0 || !checkedMul(bytes, static_cast<uint64_t>(d), bytes)) {
      return Message() << "buffer " << i << " has a bad dim " << d;
    }
  }
  if (bytes > buffer->size()) {
    return Message() << "buffer " << i << " holds " << bytes
                     << " bytes of tensor in " << buffer->size() << " bytes";
  }
  size_t element = dtypeSize(static_cast<DType>(buffer->dtype()));
  if (buffer->offset() % element != 0) {
    return Message() << "buffer " << i << " offset " << buffer->offset()
                     << " is not aligned to its " << element
                     << "-byte elements";
  }
  return verifyRankStride(p, i);
}

static std::string verifyBuffers(const fb::Plan &p) {
  for (uint32_t i = 0; i < p.buffers()->size(); ++i) {
    if (std::string problem = verifyBuffer(p, i); !problem.empty()) {
      return problem;
    }
  }
  return "";
}

/// The elements of buffer `buffer`'s tensor.
static uint64_t bufferElements(const fb::Plan &p, uint32_t buffer) {
  uint64_t count = 1;
  for (int64_t d : *p.buffers()->Get(buffer)->shape()) {
    count *= static_cast<uint64_t>(d); // verifyBuffer bounded the product
  }
  return count;
}

/// The elements of `param`'s logical tensor: its shard's shape (ZeRO-3)
/// or its buffer's.
static uint64_t parameterElementsOf(const fb::Plan &p,
                                    const fb::Parameter &param) {
  if (const fb::ParameterShard *shard = param.shard()) {
    uint64_t count = 1;
    for (int64_t d : *shard->shape()) {
      count *= static_cast<uint64_t>(d); // verifyParameterShard bounded it
    }
    return count;
  }
  return bufferElements(p, param.buffer());
}

/// A group of ranks (a collective's, a sharded state's): some ranks, each
/// in the world once. `what` names its owner in the message.
static std::string verifyGroup(const fb::Plan &p,
                               const flatbuffers::Vector<int32_t> *group,
                               const std::string &what) {
  if (!group || group->size() == 0 || !aligned(group)) {
    return Message() << what << " has no group of ranks";
  }
  std::vector<bool> seen(static_cast<size_t>(p.world_size()), false);
  for (int32_t rank : *group) {
    if (rank < 0 || rank >= p.world_size() || seen[static_cast<size_t>(rank)]) {
      return Message() << what << " names rank " << rank
                       << " twice or outside the world of " << p.world_size();
    }
    seen[static_cast<size_t>(rank)] = true;
  }
  return "";
}

/// The group of a sharded state or parameter (plan 1.7): valid as for a
/// collective, and rank 0's own (rank 0 is in it), as plans name groups.
static std::string verifyShardGroup(const fb::Plan &p,
                                    const flatbuffers::Vector<int32_t> *group,
                                    const std::string &what) {
  if (std::string problem = verifyGroup(p, group, what); !problem.empty()) {
    return problem;
  }
  if (std::find(group->begin(), group->end(), 0) == group->end()) {
    return Message() << what << " names a group without rank 0 (plans name "
                     << "rank 0's group)";
  }
  return "";
}

/// A ZeRO-3 parameter's shard (plan 1.7): a tensor of a positive element
/// count lying inside a flat space that is exactly group.size chunks of its
/// buffer. Trainable and frozen parameters are sharded alike; a quantized
/// one shards its storage bytes (verifyQuantizedParameter checks the
/// shape against its scheme).
static std::string verifyParameterShard(const LoadedPlan &plan,
                                        const fb::Parameter &param) {
  const fb::Plan &p = plan.root();
  const fb::ParameterShard &shard = *param.shard();
  std::string what = "sharded parameter '" + param.name()->str() + "'";
  const auto *shape = shard.shape();
  if (!aligned(shape) || shape->size() == 0 || shape->size() > kMaxPlanRank) {
    return Message() << what << " has a shard shape of rank " << shape->size()
                     << " (expected 1 to " << kMaxPlanRank << ")";
  }
  uint64_t numel = 1;
  for (int64_t d : *shape) {
    if (d <= 0 || !checkedMul(numel, static_cast<uint64_t>(d), numel) ||
        numel > (uint64_t(1) << 48)) {
      return Message() << what << " has a bad shard dim " << d;
    }
  }
  if (std::string problem = verifyShardGroup(p, shard.group(), what);
      !problem.empty()) {
    return problem;
  }
  uint64_t ranks = shard.group()->size();
  uint64_t chunk = bufferElements(p, param.buffer());
  uint64_t flat = 0;
  if (shard.flat_elements() <= 0 || !checkedMul(chunk, ranks, flat) ||
      flat != static_cast<uint64_t>(shard.flat_elements())) {
    return Message() << what << " has " << shard.flat_elements()
                     << " flat elements, not its " << ranks
                     << " ranks' chunks of " << chunk << " (buffer "
                     << param.buffer() << ")";
  }
  if (shard.offset() < 0 || static_cast<uint64_t>(shard.offset()) > flat ||
      numel > flat - static_cast<uint64_t>(shard.offset())) {
    return Message() << what << " at [" << shard.offset() << ", +" << numel
                     << ") leaves the flat space of " << flat << " elements";
  }
  return "";
}

/// Parameters that share a buffer: only sharded ones of one bucket (the
/// same flat space and group, all trainable or all frozen, all quantized
/// or none) at disjoint ranges of it.
static std::string verifySharedChunks(const fb::Plan &p) {
  std::map<uint32_t, std::vector<const fb::Parameter *>> byBuffer;
  for (const fb::Parameter *param : *p.parameters()) {
    byBuffer[param->buffer()].push_back(param);
  }
  for (auto &[buffer, params] : byBuffer) {
    bool anySharded = std::any_of(params.begin(), params.end(),
                                  [](auto *q) { return q->shard(); });
    if (params.size() < 2 || !anySharded) {
      continue;
    }
    // The first sharded one in plan order is the bucket's reference.
    const fb::Parameter *reference = *std::find_if(
        params.begin(), params.end(), [](auto *q) { return q->shard(); });
    std::sort(params.begin(), params.end(), [](auto *x, auto *y) {
      bool xs = x->shard(), ys = y->shard();
      if (xs != ys || !xs) {
        return xs < ys; // unsharded ones first
      }
      return x->shard()->offset() < y->shard()->offset();
    });
    const fb::ParameterShard *first = reference->shard();
    std::vector<int32_t> group(first->group()->begin(), first->group()->end());
    std::sort(group.begin(), group.end());
    int64_t end = 0;
    for (const fb::Parameter *param : params) {
      const fb::ParameterShard *shard = param->shard();
      std::vector<int32_t> own;
      if (shard) {
        own.assign(shard->group()->begin(), shard->group()->end());
        std::sort(own.begin(), own.end());
      }
      if (!shard || shard->flat_elements() != first->flat_elements() ||
          own != group) {
        return Message() << "parameter '" << param->name()->str()
                         << "' shares buffer " << buffer
                         << " with sharded parameter '"
                         << reference->name()->str()
                         << "' but is not a member of the same bucket (the "
                            "same flat space and group)";
      }
      if (param->trainable() != reference->trainable() ||
          (param->quant() != nullptr) != (reference->quant() != nullptr)) {
        auto kind = [](const fb::Parameter *q) {
          return std::string(q->trainable() ? "trainable" : "frozen") +
                 (q->quant() ? " quantized" : "");
        };
        return Message() << kind(param) << " parameter '"
                         << param->name()->str() << "' shares buffer "
                         << buffer << " with " << kind(reference)
                         << " parameter '" << reference->name()->str()
                         << "' (a bucket holds trainable, frozen or "
                            "quantized parameters, never a mix)";
      }
      int64_t numel = 1;
      for (int64_t d : *shard->shape()) {
        numel *= d; // verifyParameterShard bounded the product
      }
      if (shard->offset() < end) {
        return Message() << "sharded parameter '" << param->name()->str()
                         << "' at [" << shard->offset() << ", +" << numel
                         << ") overlaps another member of buffer " << buffer;
      }
      end = shard->offset() + numel;
    }
  }
  return "";
}

/// The file ranges a parameter is bound from: a quantized parameter's
/// sections (GPTQ) when it has them, else its source (none when the runtime
/// creates it).
static std::vector<const fb::Source *>
parameterReads(const fb::Parameter &param) {
  if (const fb::Quantization *table = param.quant()) {
    if (const auto *sections = table->sections()) {
      return std::vector<const fb::Source *>(sections->begin(),
                                             sections->end());
    }
  }
  if (const fb::Source *source = param.source()) {
    return {source};
  }
  return {};
}

/// A quantized parameter: its storage buffer, and the file bytes it is read
/// from (GPTQ's sections, or the float weight).
static std::string verifyQuantizedParameter(const LoadedPlan &plan,
                                            const fb::Parameter &param,
                                            const fb::Quantization &table) {
  std::string name = param.name()->str();
  quant::QuantSpec spec;
  std::string problem;
  if (!quantSpecOf(table, spec, problem)) {
    return Message() << "parameter '" << name << "': " << problem;
  }
  uint64_t storage = quant::storageBytes(spec);
  bool u8 =
      plan.root().buffers()->Get(param.buffer())->dtype() == fb::DType::U8;
  if (const fb::ParameterShard *shard = param.shard()) {
    // ZeRO-3 shards the storage bytes: the bucket's chunk is u8 and the
    // member is the whole storage, [storage] bytes.
    if (!u8 || shard->shape()->size() != 1 ||
        static_cast<uint64_t>(shard->shape()->Get(0)) != storage) {
      return Message() << "sharded quantized parameter '" << name
                       << "' needs a u8 chunk buffer and a shard shape of ["
                       << storage << "] (its storage bytes)";
    }
  } else if (!u8 || plan.bufferBytes(param.buffer()) != storage) {
    return Message() << "quantized parameter '" << name << "' needs a "
                     << storage << "-byte u8 buffer";
  }
  if (param.trainable() || param.init()) {
    return Message() << "quantized parameter '" << name
                     << "' cannot be trainable or initialized";
  }
  if (const auto *sections = table.sections()) {
    uint64_t total = 0;
    for (const fb::Source *section : *sections) {
      if (section->offset() > UINT64_MAX - section->length() ||
          section->length() > storage - std::min(total, storage)) {
        return Message() << "quantized parameter '" << name
                         << "': its sections exceed " << storage << " bytes";
      }
      total += section->length();
    }
    if (total != storage) {
      return Message() << "quantized parameter '" << name
                       << "': its sections hold " << total
                       << " bytes, its storage " << storage;
    }
    return "";
  }
  const fb::Source *source = param.source();
  uint64_t element = source ? floatSourceSize(source->dtype()) : 0;
  uint64_t expected = 0;
  if (element == 0 ||
      !checkedMul(static_cast<uint64_t>(spec.rows),
                  static_cast<uint64_t>(spec.cols), expected) ||
      !checkedMul(expected, element, expected) ||
      source->length() != expected) {
    return Message() << "quantized parameter '" << name
                     << "' needs an f32, f16 or bf16 source of " << spec.rows
                     << " x " << spec.cols << " elements";
  }
  return "";
}

/// Bytes [offset, offset + length) of `read` lie inside its file, which
/// can be opened: a problem here is the file's (missing, unreadable,
/// shorter than the plan expects), not the plan's.
static std::string verifySourceFile(const LoadedPlan &plan,
                                    const std::string &name,
                                    const fb::Source &read) {
  std::string path = plan.resolveSourcePath(read.file()->str());
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    return Message() << "parameter '" << name << "': cannot open '" << path
                     << "': " << std::strerror(errno);
  }
  uint64_t fileSize = static_cast<uint64_t>(info.st_size);
  if (read.offset() + read.length() > fileSize) {
    return Message() << "parameter '" << name << "': bytes [" << read.offset()
                     << ", " << read.offset() + read.length()
                     << ") lie outside '" << path << "' (" << fileSize
                     << " bytes)";
  }
  return "";
}

/// A parameter: its buffer, what fills it (file bytes, quantized storage,
/// or the runtime), and the file ranges it reads.
static std::string verifyParameter(const LoadedPlan &plan,
                                   const fb::Parameter &param) {
  std::string name = param.name()->str();
  uint32_t bufferCount = plan.root().buffers()->size();
  if (param.buffer() >= bufferCount) {
    return Message() << "parameter '" << name << "' names buffer "
                     << param.buffer() << " of " << bufferCount;
  }
  if (param.shard()) {
    if (std::string problem = verifyParameterShard(plan, param);
        !problem.empty()) {
      return problem;
    }
  }
  const fb::Source *source = param.source();
  if (const fb::Quantization *table = param.quant()) {
    if (std::string problem = verifyQuantizedParameter(plan, param, *table);
        !problem.empty()) {
      return problem;
    }
  } else if (!source) {
    // The runtime creates it (an adapter weight, say): it needs an init,
    // unless it trains from zero-filled memory.
    if (!param.trainable() && !param.init()) {
      return Message() << "parameter '" << name
                       << "' has no source, no init and is not trainable";
    }
    return "";
  } else {
    if (source->dtype() !=
        plan.root().buffers()->Get(param.buffer())->dtype()) {
      return Message() << "parameter '" << name
                       << "' is stored as another dtype than its buffer;"
                          " conversion on load is not supported yet";
    }
    // A sharded parameter's source is the whole tensor, not its chunk.
    uint64_t bytes = plan.parameterElements(param) *
                     dtypeSize(plan.bufferDType(param.buffer()));
    if (source->length() != bytes) {
      return Message() << "parameter '" << name << "' source length "
                       << source->length() << " does not match its " << bytes
                       << "-byte " << (param.shard() ? "tensor" : "buffer");
    }
  }
  for (const fb::Source *read : parameterReads(param)) {
    if (read->offset() > UINT64_MAX - read->length()) {
      return Message() << "parameter '" << name << "' source range overflows";
    }
  }
  return "";
}

/// A CUDA plan's buffer that the host fills (a parameter's or a
/// constant's, `what`): in a parameters or constants arena, the only ones a
/// GPU session stages on the host before they go to the device.
static std::string verifyStagedArena(const fb::Plan &p, uint32_t buffer,
                                     const std::string &what) {
  bool gpu = p.target() && p.target()->backend() == fb::Backend::Cuda;
  const fb::Arena *arena = p.arenas()->Get(p.buffers()->Get(buffer)->arena());
  if (!gpu || arena->category() == fb::Category::Parameters ||
      arena->category() == fb::Category::Constants) {
    return "";
  }
  return Message() << what << " lies in arena '" << arena->name()->str()
                   << "' (" << fb::EnumNameCategory(arena->category())
                   << "); a CUDA plan's parameters and constants must lie in "
                      "parameters or constants arenas, which the runtime "
                      "fills on the host";
}

/// Parameters, then constants: valid buffers holding the right bytes.
static std::string verifyParametersAndConstants(const LoadedPlan &plan) {
  const fb::Plan &p = plan.root();
  if (const auto *params = p.parameters()) {
    for (const fb::Parameter *param : *params) {
      if (std::string problem = verifyParameter(plan, *param);
          !problem.empty()) {
        return problem;
      }
      if (std::string problem = verifyStagedArena(
              p, param->buffer(), "parameter '" + param->name()->str() + "'");
          !problem.empty()) {
        return problem;
      }
    }
    if (std::string problem = verifySharedChunks(p); !problem.empty()) {
      return problem;
    }
  }
  const auto *constants = p.constants();
  uint32_t bufferCount = p.buffers()->size();
  for (uint32_t i = 0; constants && i < constants->size(); ++i) {
    const fb::Constant *constant = constants->Get(i);
    if (constant->buffer() >= bufferCount) {
      return Message() << "constant " << i << " names buffer "
                       << constant->buffer() << " of " << bufferCount;
    }
    if (constant->data()->size() != plan.bufferBytes(constant->buffer())) {
      return Message() << "constant " << i << " carries "
                       << constant->data()->size() << " bytes for a "
                       << plan.bufferBytes(constant->buffer())
                       << "-byte buffer";
    }
    if (std::string problem = verifyStagedArena(p, constant->buffer(),
                                                Message() << "constant " << i);
        !problem.empty()) {
      return problem;
    }
  }
  return "";
}

/// Every kernel is one this runtime's backend has, with its arity, which
/// goes into `arities`.
static std::string verifyKernels(const fb::Plan &p, bool gpu,
                                 std::vector<int> &arities) {
  uint32_t kernelCount = p.kernels() ? p.kernels()->size() : 0;
  for (uint32_t i = 0; i < kernelCount; ++i) {
    const fb::Kernel *kernel = p.kernels()->Get(i);
    int expected = 0;
    if (gpu) {
      const cuda::CudaKernelDef *def =
          cuda::findCudaKernel(kernel->name()->string_view());
      if (!def) {
        return Message() << "kernel '" << kernel->name()->str()
                         << "' is not known to this runtime's CUDA backend";
      }
      expected = def->arity;
    } else {
      const KernelDef *def = findCpuKernel(kernel->name()->string_view());
      if (!def) {
        return Message() << "kernel '" << kernel->name()->str()
                         << "' is not known to this runtime";
      }
      expected = def->arity;
    }
    if (kernel->arity() != expected) {
      return Message() << "kernel '" << kernel->name()->str() << "' has arity "
                       << kernel->arity() << " in the plan but " << expected
                       << " in this runtime";
    }
    arities.push_back(kernel->arity());
  }
  return "";
}

/// Whether byte ranges [a, a + aSize) and [b, b + bSize) are disjoint.
static bool disjoint(uint64_t a, uint64_t aSize, uint64_t b, uint64_t bSize) {
  return a + aSize <= b || b + bSize <= a;
}

/// The bytes a buffer's view covers on some rank: from its offset to the
/// end of its view at the last rank position.
static uint64_t rankExtent(const fb::Plan &p, const fb::Buffer &buffer) {
  return (rankPositions(p, buffer) - 1) * buffer.rank_stride() + buffer.size();
}

/// Whether buffers `x` and `y` are, on every rank, the same bytes or
/// disjoint (rank-strided views are compared rank by rank where their
/// extents meet).
static bool sameOrDisjoint(const fb::Plan &p, const fb::Buffer &x,
                           const fb::Buffer &y) {
  if (x.arena() != y.arena()) {
    return true;
  }
  if (x.rank_stride() == 0 && y.rank_stride() == 0) {
    return (x.offset() == y.offset() && x.size() == y.size()) ||
           disjoint(x.offset(), x.size(), y.offset(), y.size());
  }
  if (disjoint(x.offset(), rankExtent(p, x), y.offset(), rankExtent(p, y))) {
    return true;
  }
  for (int rank = 0; rank < p.world_size(); ++rank) {
    uint64_t a = rankOffset(x, rank, p.world_size());
    uint64_t b = rankOffset(y, rank, p.world_size());
    if (!(a == b && x.size() == y.size()) &&
        !disjoint(a, x.size(), b, y.size())) {
      return false;
    }
  }
  return true;
}

/// Whether buffers `x` and `y` share no byte on any rank (memcpy's rule).
static bool disjointOnEveryRank(const fb::Plan &p, const fb::Buffer &x,
                                const fb::Buffer &y) {
  if (x.arena() != y.arena() ||
      disjoint(x.offset(), rankExtent(p, x), y.offset(), rankExtent(p, y))) {
    return true;
  }
  for (int rank = 0; rank < p.world_size(); ++rank) {
    if (!disjoint(rankOffset(x, rank, p.world_size()), x.size(),
                  rankOffset(y, rank, p.world_size()), y.size())) {
      return false;
    }
  }
  return true;
}

/// A launch's operands either are the same bytes (an op written in place
/// over its input, or one buffer passed twice) or do not overlap at all,
/// on every rank: kernels copy between operands with memcpy, which a
/// partial overlap would make undefined. The planner never places live
/// operands so.
static std::string verifyOperandOverlap(const fb::Plan &p, uint32_t i,
                                        const fb::Launch &launch) {
  const auto &operands = *launch.operands();
  for (uint32_t a = 0; a < operands.size(); ++a) {
    const fb::Buffer *x = p.buffers()->Get(operands[a]);
    for (uint32_t b = a + 1; b < operands.size(); ++b) {
      const fb::Buffer *y = p.buffers()->Get(operands[b]);
      if (!sameOrDisjoint(p, *x, *y)) {
        return Message() << "step " << i << " passes buffers " << operands[a]
                         << " and " << operands[b]
                         << ", which partly overlap in arena "
                         << x->arena();
      }
    }
  }
  return "";
}

/// The in-place all-gather (ZeRO's parameter gather): the input is this
/// rank's block of the output, a view at the output's offset strided by
/// its own size, whose rank position is the rank's position in its group
/// (the world, period 0, or a node of ranks 0..size-1, period size).
static bool isInPlaceAllGather(const fb::Plan &p,
                               const fb::Collective &collective,
                               const fb::Buffer &in, const fb::Buffer &out) {
  const auto &group = *collective.group();
  uint32_t period =
      in.rank_period() == 0 ? static_cast<uint32_t>(p.world_size())
                            : in.rank_period();
  if (collective.kind() != fb::CollectiveKind::AllGather ||
      in.arena() != out.arena() || in.offset() != out.offset() ||
      out.rank_stride() != 0 || in.rank_stride() != in.size() ||
      period != group.size() || in.size() * group.size() != out.size()) {
    return false;
  }
  std::vector<int32_t> members(group.begin(), group.end());
  std::sort(members.begin(), members.end());
  for (uint32_t k = 0; k < members.size(); ++k) {
    if (members[k] != static_cast<int32_t>(k)) {
      return false;
    }
  }
  return true;
}

/// A collective's input and output: the same buffer (in place), disjoint
/// on every rank, the in-place all-gather, or a reduce-scatter whose output
/// is the start of its input (MPI_IN_PLACE's form, which both communicators
/// run).
static std::string verifyCollectiveOverlap(const fb::Plan &p, uint32_t i,
                                           const fb::Collective &collective) {
  const fb::Buffer *in = p.buffers()->Get(collective.input());
  const fb::Buffer *out = p.buffers()->Get(collective.output());
  bool reduceScatterInPlace =
      collective.kind() == fb::CollectiveKind::ReduceScatter &&
      in->arena() == out->arena() && in->offset() == out->offset() &&
      in->rank_stride() == 0 && out->rank_stride() == 0;
  if (reduceScatterInPlace || isInPlaceAllGather(p, collective, *in, *out) ||
      sameOrDisjoint(p, *in, *out)) {
    return "";
  }
  return Message() << "step " << i << " ("
                   << fb::EnumNameCollectiveKind(collective.kind())
                   << ") reads buffer " << collective.input()
                   << " and writes buffer " << collective.output()
                   << ", which partly overlap in arena " << in->arena()
                   << " (only the same buffer, the in-place all-gather and "
                      "the in-place reduce-scatter may overlap)";
}

/// Whether arena kind `kind` is host memory (pinned or not).
static bool isHostKind(fb::ArenaKind kind) {
  return kind == fb::ArenaKind::Host || kind == fb::ArenaKind::HostPinned;
}

/// A launch on a Host stream (optimizer offload's) runs a CPU kernel on
/// the host: every operand must be in a host arena, on a GPU plan too.
static std::string verifyHostLaunch(const fb::Plan &p, uint32_t i,
                                    const fb::Launch &launch) {
  if (p.streams()->Get(launch.stream())->kind() != fb::StreamKind::Host) {
    return "";
  }
  for (uint32_t operand : *launch.operands()) {
    const fb::Arena *arena = p.arenas()->Get(p.buffers()->Get(operand)->arena());
    if (!isHostKind(arena->kind())) {
      return Message() << "step " << i << " runs on host stream '"
                       << p.streams()->Get(launch.stream())->name()->str()
                       << "' but uses buffer " << operand << " in arena '"
                       << arena->name()->str() << "' ("
                       << fb::EnumNameArenaKind(arena->kind())
                       << "); host launches read host arenas only";
    }
  }
  return "";
}

/// Step `i`, a launch: a known kernel on a known stream, as many valid
/// buffers as the kernel takes (in host arenas on a Host stream),
/// attributes the runtime can read.
static std::string verifyLaunch(const fb::Plan &p, uint32_t i,
                                const fb::Launch &launch,
                                const std::vector<int> &arities) {
  uint32_t kernelCount = static_cast<uint32_t>(arities.size());
  uint32_t streamCount = p.streams() ? p.streams()->size() : 0;
  uint32_t bufferCount = p.buffers()->size();
  if (launch.kernel() >= kernelCount) {
    return Message() << "step " << i << " launches kernel " << launch.kernel()
                     << " of " << kernelCount;
  }
  if (launch.stream() >= streamCount) {
    return Message() << "step " << i << " runs on stream " << launch.stream()
                     << " of " << streamCount;
  }
  int arity = arities[launch.kernel()];
  if (arity >= 0 && launch.operands()->size() != static_cast<uint32_t>(arity)) {
    return Message() << "step " << i << " passes " << launch.operands()->size()
                     << " buffers to '"
                     << p.kernels()->Get(launch.kernel())->name()->str()
                     << "', which takes " << arity;
  }
  for (uint32_t operand : *launch.operands()) {
    if (operand >= bufferCount) {
      return Message() << "step " << i << " uses buffer " << operand << " of "
                       << bufferCount;
    }
  }
  if (std::string problem = verifyOperandOverlap(p, i, launch);
      !problem.empty()) {
    return problem;
  }
  if (std::string problem = verifyHostLaunch(p, i, launch); !problem.empty()) {
    return problem;
  }
  if (const auto *attrs = launch.attributes()) {
    for (const fb::Attribute *attr : *attrs) {
      if (!aligned(attr->ints()) || !aligned(attr->floats())) {
        return Message() << "step " << i << " attribute '"
                         << attr->name()->str() << "' is misaligned";
      }
      auto kind = static_cast<int>(attr->kind());
      if (kind < 0 || kind > static_cast<int>(fb::AttrKind::MAX)) {
        return Message() << "step " << i << " attribute '"
                         << attr->name()->str() << "' has unknown kind";
      }
    }
  }
  return "";
}

/// Step `i`, a collective: known buffers of one element type whose sizes
/// fit the kind over its group (all_reduce and broadcast keep the size,
/// reduce_scatter leaves 1/p, all_gather makes p times, all_to_all keeps
/// the size in blocks of one per rank), a group of
/// distinct ranks of the world, a known reduction and stream.
static std::string verifyCollective(const fb::Plan &p, uint32_t i,
                                    const fb::Collective &collective) {
  uint32_t bufferCount = p.buffers()->size();
  uint32_t streamCount = p.streams() ? p.streams()->size() : 0;
  if (collective.input() >= bufferCount || collective.output() >= bufferCount ||
      collective.stream() >= streamCount) {
    return Message() << "step " << i
                     << " (collective) names a buffer or stream out of range";
  }
  auto kind = static_cast<int>(collective.kind());
  auto reduction = static_cast<int>(collective.reduction());
  if (kind < 0 || kind > static_cast<int>(fb::CollectiveKind::MAX) ||
      reduction < 0 || reduction > static_cast<int>(fb::Reduction::MAX)) {
    return Message() << "step " << i
                     << " (collective) has an unknown kind or reduction";
  }
  const auto *group = collective.group();
  if (std::string problem = verifyGroup(
          p, group, Message() << "step " << i << " (collective)");
      !problem.empty()) {
    return problem;
  }
  const fb::Buffer *in = p.buffers()->Get(collective.input());
  const fb::Buffer *out = p.buffers()->Get(collective.output());
  uint64_t ranks = group->size();
  uint64_t inBytes = in->size(), outBytes = out->size();
  bool fits = false;
  switch (collective.kind()) {
  case fb::CollectiveKind::AllReduce:
  case fb::CollectiveKind::Broadcast:
    fits = inBytes == outBytes;
    break;
  case fb::CollectiveKind::ReduceScatter:
    fits = inBytes / ranks == outBytes && inBytes % ranks == 0;
    break;
  case fb::CollectiveKind::AllGather:
    fits = outBytes / ranks == inBytes && outBytes % ranks == 0;
    break;
  case fb::CollectiveKind::AllToAll:
    fits = inBytes == outBytes && inBytes % ranks == 0;
    break;
  case fb::CollectiveKind::Send:
  case fb::CollectiveKind::Recv: {
    // Between this plan's rank and the other rank of a pair, `root`.
    // With data-parallel replicas of the stages (1.13) the peer is named
    // in replica 0, the plan's own.
    int other = collective.root();
    int replicas = p.pipeline() ? std::max(1, p.pipeline()->replicas()) : 1;
    bool pair = ranks == 2 && other != p.rank() && other % replicas == 0 &&
                (group->Get(0) == other || group->Get(1) == other) &&
                (group->Get(0) == p.rank() || group->Get(1) == p.rank());
    if (!pair) {
      return Message() << "step " << i << " ("
                       << fb::EnumNameCollectiveKind(collective.kind())
                       << ") must name a group of this plan's rank "
                       << p.rank() << " and its peer, root " << other;
    }
    fits = inBytes == outBytes;
    break;
  }
  }
  if (!fits || in->dtype() != out->dtype()) {
    return Message() << "step " << i << " ("
                     << fb::EnumNameCollectiveKind(collective.kind())
                     << ") moves " << inBytes << " bytes into " << outBytes
                     << " over " << ranks
                     << " ranks, which do not fit, or changes the element "
                        "type";
  }
  return verifyCollectiveOverlap(p, i, collective);
}

/// "buffer 3 (arena 'offload', Host)": how copy errors name a buffer.
static std::string describeBuffer(const fb::Plan &p, uint32_t index) {
  const fb::Arena *arena = p.arenas()->Get(p.buffers()->Get(index)->arena());
  return Message() << "buffer " << index << " (arena '"
                   << arena->name()->str() << "', "
                   << fb::EnumNameArenaKind(arena->kind()) << ")";
}

/// Step `i`, a copy: valid buffers and stream, a known kind whose
/// direction matches the arenas' kinds (host means Host or HostPinned),
/// source and target of one size (the views' `size` and the tensors'
/// bytes, which is what moves) that do not overlap on any rank.
static std::string verifyCopy(const fb::Plan &p, uint32_t i,
                              const fb::Copy &copy) {
  uint32_t bufferCount = p.buffers()->size();
  uint32_t streamCount = p.streams() ? p.streams()->size() : 0;
  auto kind = static_cast<int>(copy.kind());
  if (kind < 0 || kind > static_cast<int>(fb::CopyKind::MAX)) {
    return Message() << "step " << i << " (copy) has an unknown kind " << kind;
  }
  std::string what = Message() << "step " << i << " (copy "
                               << fb::EnumNameCopyKind(copy.kind()) << ")";
  if (copy.source() >= bufferCount || copy.target() >= bufferCount) {
    return Message() << what << " names buffers " << copy.source() << " and "
                     << copy.target() << " of " << bufferCount;
  }
  if (copy.stream() >= streamCount) {
    return Message() << what << " runs on stream " << copy.stream() << " of "
                     << streamCount;
  }
  const fb::Buffer *source = p.buffers()->Get(copy.source());
  const fb::Buffer *target = p.buffers()->Get(copy.target());
  bool sourceHost = isHostKind(p.arenas()->Get(source->arena())->kind());
  bool targetHost = isHostKind(p.arenas()->Get(target->arena())->kind());
  bool wantSourceHost = copy.kind() == fb::CopyKind::HostToDevice ||
                        copy.kind() == fb::CopyKind::HostToHost;
  bool wantTargetHost = copy.kind() == fb::CopyKind::DeviceToHost ||
                        copy.kind() == fb::CopyKind::HostToHost;
  if (sourceHost != wantSourceHost || targetHost != wantTargetHost) {
    return Message() << what << " copies "
                     << describeBuffer(p, copy.source()) << " to "
                     << describeBuffer(p, copy.target()) << ", but it needs a "
                     << (wantSourceHost ? "host" : "device") << " source and a "
                     << (wantTargetHost ? "host" : "device")
                     << " target (host: Host or HostPinned)";
  }
  uint64_t sourceBytes = bufferElements(p, copy.source()) *
                         dtypeSize(static_cast<DType>(source->dtype()));
  uint64_t targetBytes = bufferElements(p, copy.target()) *
                         dtypeSize(static_cast<DType>(target->dtype()));
  if (source->size() != target->size() || sourceBytes != targetBytes) {
    return Message() << what << " copies buffer " << copy.source() << " ("
                     << source->size() << " bytes, a tensor of " << sourceBytes
                     << ") into buffer " << copy.target() << " ("
                     << target->size() << " bytes, a tensor of " << targetBytes
                     << "); a copy needs buffers of one size";
  }
  if (!disjointOnEveryRank(p, *source, *target)) {
    return Message() << what << " copies buffer " << copy.source()
                     << " into buffer " << copy.target()
                     << ", which overlap in arena '"
                     << p.arenas()->Get(source->arena())->name()->str() << "'";
  }
  return "";
}

/// On a GPU plan, step `i` (a launch or a collective) may touch only
/// buffers in Device arenas: kernels and NCCL read device memory, and only
/// copies (and launches on a Host stream) cross to the host.
static std::string verifyDeviceOperands(const fb::Plan &p, bool gpu,
                                        uint32_t i, const fb::Op &op) {
  if (!gpu) {
    return "";
  }
  std::vector<uint32_t> buffers;
  std::string what;
  if (const fb::Launch *launch = op.step_as_Launch()) {
    if (p.streams()->Get(launch->stream())->kind() == fb::StreamKind::Host) {
      return ""; // verifyHostLaunch: host arenas only
    }
    buffers.assign(launch->operands()->begin(), launch->operands()->end());
    what = Message() << "step " << i << " ("
                     << p.kernels()->Get(launch->kernel())->name()->str()
                     << (launch->origin() ? ", " + launch->origin()->str()
                                          : std::string())
                     << ")";
  } else if (const fb::Collective *collective = op.step_as_Collective()) {
    buffers = {collective->input(), collective->output()};
    what = Message() << "step " << i << " ("
                     << fb::EnumNameCollectiveKind(collective->kind()) << ")";
  }
  for (uint32_t buffer : buffers) {
    fb::ArenaKind kind =
        p.arenas()->Get(p.buffers()->Get(buffer)->arena())->kind();
    if (kind != fb::ArenaKind::Device) {
      return Message() << what << " uses " << describeBuffer(p, buffer)
                       << " on a GPU, where kernels and collectives run on "
                          "Device arenas only (a copy must bring it to the "
                          "device first)";
    }
  }
  return "";
}

/// Every step: launches, copies, collectives, and records and waits on
/// known events and streams; on a GPU, launches and collectives touch only
/// device arenas.
static std::string verifySteps(const fb::Plan &p, bool gpu,
                               const std::vector<int> &arities) {
  uint32_t streamCount = p.streams() ? p.streams()->size() : 0;
  uint32_t eventCount = p.events() ? p.events()->size() : 0;
  const auto &ops = *p.ops();
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const fb::Op *op = ops.Get(i);
    switch (op->step_type()) {
    case fb::Step::Launch:
      if (std::string problem =
              verifyLaunch(p, i, *op->step_as_Launch(), arities);
          !problem.empty()) {
        return problem;
      }
      if (std::string problem = verifyDeviceOperands(p, gpu, i, *op);
          !problem.empty()) {
        return problem;
      }
      break;
    case fb::Step::Record:
    case fb::Step::Wait: {
      uint32_t event = op->step_type() == fb::Step::Record
                           ? op->step_as_Record()->event()
                           : op->step_as_Wait()->event();
      uint32_t stream = op->step_type() == fb::Step::Record
                            ? op->step_as_Record()->stream()
                            : op->step_as_Wait()->stream();
      if (event >= eventCount || stream >= streamCount) {
        return Message() << "step " << i << " names event " << event
                         << " / stream " << stream << " out of range";
      }
      break;
    }
    case fb::Step::Collective:
      if (std::string problem =
              verifyCollective(p, i, *op->step_as_Collective());
          !problem.empty()) {
        return problem;
      }
      if (std::string problem = verifyDeviceOperands(p, gpu, i, *op);
          !problem.empty()) {
        return problem;
      }
      break;
    case fb::Step::Copy:
      if (std::string problem = verifyCopy(p, i, *op->step_as_Copy());
          !problem.empty()) {
        return problem;
      }
      break;
    default:
      return Message() << "step " << i << " has an unknown kind "
                       << static_cast<int>(op->step_type());
    }
  }
  return "";
}

/// Entries: named, unique, inside the step list. Sets `entryCount` (1 for
/// a plan without entries, whose steps are one entry).
static std::string verifyEntries(const fb::Plan &p, uint32_t &entryCount) {
  entryCount = 1;
  const auto *entries = p.entries();
  if (!entries) {
    return "";
  }
  entryCount = std::max<uint32_t>(entries->size(), 1);
  uint32_t opCount = p.ops()->size();
  std::set<std::string> names;
  for (uint32_t i = 0; i < entries->size(); ++i) {
    const fb::Entry *entry = entries->Get(i);
    if (entry->name()->size() == 0 ||
        !names.insert(entry->name()->str()).second) {
      return Message() << "entry " << i << " has an empty or repeated name";
    }
    if (static_cast<uint64_t>(entry->first_op()) + entry->op_count() >
        opCount) {
      return Message() << "entry '" << entry->name()->str()
                       << "' covers steps [" << entry->first_op() << ", "
                       << static_cast<uint64_t>(entry->first_op()) +
                              entry->op_count()
                       << ") of " << opCount;
    }
  }
  return "";
}

/// The steps [first, first + count) of entry `entry`, which run in order
/// from a fresh start: every wait names an event that a step of the same
/// entry recorded before it (on the CPU a wait otherwise stands for
/// nothing, and on a GPU for whatever an earlier run left behind).
static std::string verifyEventOrder(const fb::Plan &p, const std::string &entry,
                                    uint32_t first, uint32_t count) {
  const auto &ops = *p.ops();
  std::vector<bool> recorded(p.events() ? p.events()->size() : 0, false);
  for (uint32_t i = first; i < first + count; ++i) {
    const fb::Op *op = ops.Get(i);
    if (const fb::Record *record = op->step_as_Record()) {
      recorded[record->event()] = true;
    } else if (const fb::Wait *wait = op->step_as_Wait()) {
      if (!recorded[wait->event()]) {
        return Message() << "step " << i << " waits on stream "
                         << wait->stream() << " for event " << wait->event()
                         << " ('"
                         << p.events()->Get(wait->event())->name()->str()
                         << "'), which no step of entry '" << entry
                         << "' records before it";
      }
    }
  }
  return "";
}

/// The event discipline of every entry (verifyEventOrder); runs after
/// verifySteps and verifyEntries checked the indices.
static std::string verifyEvents(const fb::Plan &p) {
  const auto *entries = p.entries();
  if (!entries || entries->size() == 0) {
    return verifyEventOrder(p, "forward", 0, p.ops()->size());
  }
  for (const fb::Entry *entry : *entries) {
    if (std::string problem =
            verifyEventOrder(p, entry->name()->str(), entry->first_op(),
                             entry->op_count());
        !problem.empty()) {
      return problem;
    }
  }
  return "";
}

/// A sharded state's members (plan 1.7): parameters of the plan of the
/// state's element type, each at its own ascending range of the flat space,
/// which is exactly group.size chunks of the state's buffer.
static std::string verifyStateShard(const fb::Plan &p, const fb::State &state) {
  const fb::StateShard &shard = *state.shard();
  std::string what = "sharded state '" + state.name()->str() + "'";
  const auto &members = *shard.members();
  const auto &offsets = *shard.offsets();
  const auto &numels = *shard.numels();
  if (!aligned(shard.offsets()) || !aligned(shard.numels()) ||
      members.size() == 0 || offsets.size() != members.size() ||
      numels.size() != members.size()) {
    return Message() << what << " needs one offset and one element count "
                     << "for each of its " << members.size() << " members";
  }
  if (std::string problem = verifyShardGroup(p, shard.group(), what);
      !problem.empty()) {
    return problem;
  }
  const fb::Buffer *buffer = p.buffers()->Get(state.buffer());
  uint64_t chunk = bufferElements(p, state.buffer());
  uint64_t flat = 0;
  if (shard.flat_elements() < 0 ||
      !checkedMul(chunk, shard.group()->size(), flat) ||
      flat != static_cast<uint64_t>(shard.flat_elements())) {
    return Message() << what << " has " << shard.flat_elements()
                     << " flat elements, not its " << shard.group()->size()
                     << " ranks' chunks of " << chunk;
  }
  std::map<std::string, const fb::Parameter *> parameters;
  if (p.parameters()) {
    for (const fb::Parameter *param : *p.parameters()) {
      parameters[param->name()->str()] = param;
    }
  }
  int64_t end = 0;
  for (uint32_t k = 0; k < members.size(); ++k) {
    std::string member = members.Get(k)->str();
    auto it = parameters.find(member);
    if (it == parameters.end()) {
      return Message() << what << ": member '" << member
                       << "' is not a parameter of the plan";
    }
    uint32_t memberBuffer = it->second->buffer();
    if (p.buffers()->Get(memberBuffer)->dtype() != buffer->dtype()) {
      return Message() << what << ": member '" << member
                       << "' has another element type than the state";
    }
    int64_t offset = offsets[k], numel = numels[k];
    uint64_t logical = parameterElementsOf(p, *it->second);
    if (numel < 0 || static_cast<uint64_t>(numel) != logical) {
      return Message() << what << ": member '" << member << "' counts " << numel
                       << " elements, its parameter has " << logical;
    }
    if (offset < end || offset > shard.flat_elements() ||
        numel > shard.flat_elements() - offset) {
      return Message() << what << ": member '" << member << "' at ["
                       << offset << ", +" << numel
                       << ") overlaps the one before it or leaves the flat "
                          "space of "
                       << shard.flat_elements() << " elements";
    }
    end = offset + numel;
  }
  return "";
}

/// Binding `name` of entry `entry` among `bindings`: `dtype` and `shape`
/// (a -1 dim is any size); "" or what differs.
static std::string
expectBinding(const fb::Plan &p,
              const flatbuffers::Vector<flatbuffers::Offset<fb::Binding>> *list,
              const char *what, std::string_view name, uint32_t entry,
              fb::DType dtype, const std::vector<int64_t> &shape) {
  const fb::Binding *found = nullptr;
  for (uint32_t i = 0; list && i < list->size(); ++i) {
    if (list->Get(i)->name()->string_view() == name) {
      found = list->Get(i);
    }
  }
  if (!found || found->entry() != entry) {
    return Message() << "generation: the prefill entry has no " << what
                     << " '" << name << "'";
  }
  const fb::Buffer *buffer = p.buffers()->Get(found->buffer());
  bool same = buffer->dtype() == dtype && buffer->shape()->size() == shape.size();
  for (size_t i = 0; same && i < shape.size(); ++i) {
    same = shape[i] < 0 || buffer->shape()->Get(i) == shape[i];
  }
  if (!same) {
    Message message;
    message << "generation: prefill " << what << " '" << name << "' is "
            << fb::EnumNameDType(buffer->dtype()) << " [";
    for (size_t i = 0; i < buffer->shape()->size(); ++i) {
      message << (i ? ", " : "") << buffer->shape()->Get(i);
    }
    message << "], expected " << fb::EnumNameDType(dtype) << " of rank "
            << shape.size();
    return message;
  }
  return "";
}

/// The `prefill` entry (when there is one): its chunk of [batch, C] ids,
/// 1 < C <= max_seq_len, its start and last-row scalars and logits
/// [batch, 1, vocab].
static std::string verifyPrefill(const fb::Plan &p, uint32_t entry) {
  const fb::Generation &g = *p.generation();
  std::string problem = expectBinding(p, p.inputs(), "input",
                                      "prefill_input_ids", entry,
                                      fb::DType::I64, {g.batch(), -1});
  for (const char *scalar : {"prefill_position", "prefill_last"}) {
    if (problem.empty()) {
      problem = expectBinding(p, p.inputs(), "input", scalar, entry,
                              fb::DType::I64, {});
    }
  }
  if (problem.empty()) {
    problem = expectBinding(p, p.outputs(), "output", "prefill_logits", entry,
                            fb::DType::F32, {g.batch(), 1, g.vocab_size()});
  }
  if (!problem.empty()) {
    return problem;
  }
  for (const fb::Binding *binding : *p.inputs()) {
    if (binding->name()->string_view() == "prefill_input_ids") {
      int64_t chunk = p.buffers()->Get(binding->buffer())->shape()->Get(1);
      if (chunk < 2 || chunk > g.max_seq_len()) {
        return Message() << "generation: the prefill chunk " << chunk
                         << " is outside [2, max_seq_len " << g.max_seq_len()
                         << "]";
      }
    }
  }
  return "";
}

/// A generation plan (1.9): positive sizes, eos ids inside the vocabulary,
/// the `decode` entry `tailor generate` runs, and a `prefill` entry's
/// bindings when it has one.
static std::string verifyGeneration(const fb::Plan &p) {
  const fb::Generation *generation = p.generation();
  if (!generation) {
    return "";
  }
  if (generation->max_seq_len() <= 0 || generation->batch() <= 0 ||
      generation->vocab_size() <= 0) {
    return Message() << "generation: max_seq_len " << generation->max_seq_len()
                     << ", batch " << generation->batch() << " and vocab_size "
                     << generation->vocab_size() << " must be positive";
  }
  if (const auto *eos = generation->eos_token_ids()) {
    for (int64_t id : *eos) {
      if (id < 0 || id >= generation->vocab_size()) {
        return Message() << "generation: eos token id " << id
                         << " is outside the vocabulary [0, "
                         << generation->vocab_size() << ")";
      }
    }
  }
  bool decode = false;
  std::optional<uint32_t> prefill;
  if (const auto *entries = p.entries()) {
    for (uint32_t i = 0; i < entries->size(); ++i) {
      std::string_view name = entries->Get(i)->name()->string_view();
      decode |= name == "decode";
      if (name == "prefill") {
        prefill = i;
      }
    }
  }
  if (!decode) {
    return "generation: the plan has no decode entry";
  }
  return prefill ? verifyPrefill(p, *prefill) : "";
}

/// Training state: uniquely named buffers in a gradients or optimizer-state
/// arena; sharded states' members as verifyStateShard says.
static std::string verifyStates(const fb::Plan &p) {
  const auto *states = p.states();
  if (!states) {
    return "";
  }
  const auto &buffers = *p.buffers();
  std::set<std::string> names;
  for (const fb::State *state : *states) {
    if (state->buffer() >= buffers.size()) {
      return Message() << "state '" << state->name()->str() << "' names buffer "
                       << state->buffer() << " of " << buffers.size();
    }
    fb::Category category =
        p.arenas()->Get(buffers.Get(state->buffer())->arena())->category();
    bool cache = state->kind()->string_view() == "key_cache" ||
                 state->kind()->string_view() == "value_cache";
    // A pipeline stage's received inputs are activations kept across
    // entries (plan 1.10).
    bool received = state->kind()->string_view() == "pipeline_input";
    if (cache      ? category != fb::Category::KvCache
        : received ? category != fb::Category::Activations
                   : category != fb::Category::Gradients &&
                         category != fb::Category::OptimizerState) {
      return Message() << "state '" << state->name()->str()
                       << (cache      ? "' lives outside the kv_cache arena"
                           : received ? "' lives outside the activation arenas"
                                      : "' lives outside the gradients and "
                                        "optimizer-state arenas");
    }
    if (!names.insert(state->name()->str()).second) {
      return Message() << "two states are called '" << state->name()->str()
                       << "'";
    }
    if (state->shard()) {
      if (std::string problem = verifyStateShard(p, *state);
          !problem.empty()) {
        return problem;
      }
    }
  }
  return "";
}

/// Inputs and outputs: valid buffers, unique names, known entries.
static std::string verifyBindings(const fb::Plan &p, uint32_t entryCount) {
  const auto &buffers = *p.buffers();
  for (const auto *bindings : {p.inputs(), p.outputs()}) {
    if (!bindings) {
      continue;
    }
    std::set<std::string> names;
    for (const fb::Binding *binding : *bindings) {
      if (binding->buffer() >= buffers.size()) {
        return Message() << "'" << binding->name()->str() << "' names buffer "
                         << binding->buffer() << " of " << buffers.size();
      }
      if (buffers.Get(binding->buffer())->shape()->size() > kMaxPlanRank) {
        return Message() << "'" << binding->name()->str()
                         << "' has too high a rank";
      }
      if (binding->entry() >= entryCount) {
        return Message() << "'" << binding->name()->str()
                         << "' belongs to entry " << binding->entry() << " of "
                         << entryCount;
      }
      if (!names.insert(binding->name()->str()).second) {
        return Message() << "two inputs or outputs are called '"
                         << binding->name()->str() << "'";
      }
    }
  }
  return "";
}

/// fp16 loss scaling (1.13): GradScaler's settings as it accepts them, in
/// an fp16 plan (CPU or CUDA), the only one that scales its loss.
static std::string verifyLossScaling(const fb::Plan &p) {
  const fb::LossScaling *scaling =
      p.training() ? p.training()->loss_scaling() : nullptr;
  if (!scaling) {
    return "";
  }
  std::string_view precision =
      p.target() && p.target()->precision()
          ? p.target()->precision()->string_view()
          : std::string_view();
  if (precision != "fp16") {
    return Message() << "the plan scales its loss (fp16 loss scaling) but "
                        "its precision is "
                     << (precision.empty() ? std::string("fp32")
                                           : std::string(precision))
                     << ", not fp16";
  }
  if (!(scaling->init_scale() > 0.0) || !std::isfinite(scaling->init_scale()) ||
      !(scaling->growth_factor() > 1.0) ||
      !std::isfinite(scaling->growth_factor()) ||
      !(scaling->backoff_factor() > 0.0 && scaling->backoff_factor() < 1.0) ||
      scaling->growth_interval() < 1) {
    return Message() << "the plan's loss scaling is out of range (init_scale "
                     << scaling->init_scale() << ", growth_factor "
                     << scaling->growth_factor() << ", backoff_factor "
                     << scaling->backoff_factor() << ", growth_interval "
                     << scaling->growth_interval()
                     << "; expected a finite scale above 0, growth above 1, "
                        "back-off in (0, 1), interval >= 1)";
  }
  return "";
}

/// The compute precision a kernel gives its GEMMs on the CPU ("fp32",
/// "fp16", "bf16"), or "" for a kernel that is no model GEMM.
static std::string_view cpuGemmPrecision(std::string_view kernel) {
  for (std::string_view gemm :
       {"linear", "matmul", "linear_weight_grad", "linear_quantized"}) {
    if (kernel == gemm) {
      return "fp32";
    }
    if (kernel.size() == gemm.size() + 5 &&
        kernel.substr(0, gemm.size()) == gemm &&
        kernel[gemm.size()] == '_') {
      std::string_view suffix = kernel.substr(gemm.size() + 1);
      if (suffix == "fp16" || suffix == "bf16") {
        return suffix;
      }
    }
  }
  return "";
}

/// A CUDA plan's frozen-weight GEMMs multiply copies in its precision's
/// 16-bit format: fp16 copies (via_gemm = 2) in fp16 plans, bf16 ones
/// (via_gemm = 1) in the others.
static std::string verifyCudaGemmRoutes(const fb::Plan &p,
                                        std::string_view precision) {
  const int64_t expected = precision == "fp16" ? 2 : 1;
  const auto &ops = *p.ops();
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const fb::Launch *launch = ops.Get(i)->step_as_Launch();
    if (!launch || p.kernels()->Get(launch->kernel())->name()->string_view() !=
                       "linear_quantized") {
      continue;
    }
    int64_t viaGemm = decodeLaunchAttributes(*launch).getInt("via_gemm", 0);
    if (viaGemm != 0 && viaGemm != expected) {
      return Message() << "the plan's precision is " << std::string(precision)
                       << " but step " << i
                       << " (linear_quantized) multiplies "
                       << (viaGemm == 2 ? "fp16" : "bf16")
                       << " copies (via_gemm = " << viaGemm << ")";
    }
  }
  return "";
}

/// The target's precision is one this runtime computes: fp32, fp16 or bf16,
/// on the CPU and on CUDA, and the plan's GEMMs all compute it (a plan never
/// runs in another precision than it says).
static std::string verifyPrecision(const fb::Plan &p, bool gpu) {
  std::string_view precision = "fp32";
  if (p.target() && p.target()->precision() &&
      !p.target()->precision()->string_view().empty()) {
    precision = p.target()->precision()->string_view();
  }
  bool known =
      precision == "fp32" || precision == "bf16" || precision == "fp16";
  if (!known) {
    return Message() << "the plan's precision '" << std::string(precision)
                     << "' is not one the " << (gpu ? "CUDA" : "CPU")
                     << " backend computes (expected fp32, bf16 or fp16)";
  }
  if (gpu) {
    return verifyCudaGemmRoutes(p, precision);
  }
  if (!p.kernels()) {
    return "";
  }
  for (const fb::Kernel *kernel : *p.kernels()) {
    std::string_view name =
        kernel->name() ? kernel->name()->string_view() : std::string_view();
    std::string_view gemm = cpuGemmPrecision(name);
    if (!gemm.empty() && gemm != precision) {
      return Message() << "the plan's precision is " << std::string(precision)
                       << " but its kernel '" << std::string(name)
                       << "' computes " << std::string(gemm);
    }
  }
  return "";
}

/// A CUDA plan: every device launch as its launcher checks it when a GPU
/// session is made (shapes, dtypes, attributes; no memory yet), so a plan
/// a launcher refuses fails to load on any machine, naming the step.
static std::string verifyCudaLaunches(const LoadedPlan &plan) {
  const fb::Plan &p = plan.root();
  const auto &ops = *p.ops();
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const fb::Launch *launch = ops.Get(i)->step_as_Launch();
    if (!launch ||
        p.streams()->Get(launch->stream())->kind() == fb::StreamKind::Host) {
      continue;
    }
    const fb::Kernel *kernel = p.kernels()->Get(launch->kernel());
    const cuda::CudaKernelDef *def =
        cuda::findCudaKernel(kernel->name()->string_view());
    KernelCall call;
    for (uint32_t operand : *launch->operands()) {
      Tensor tensor;
      tensor.dtype = plan.bufferDType(operand);
      tensor.shape = plan.bufferShape(operand);
      call.operands.push_back(tensor);
    }
    call.attributes = decodeLaunchAttributes(*launch);
    if (std::string message = def->check(call); !message.empty()) {
      return Message() << "step " << i << " (" << kernel->name()->str()
                       << (launch->origin() ? ", " + launch->origin()->str()
                                            : std::string())
                       << "): the CUDA backend cannot run it: " << message;
    }
  }
  return "";
}

std::string LoadedPlan::verifySourceFiles() const {
  const auto *params = planRoot->parameters();
  for (uint32_t i = 0; params && i < params->size(); ++i) {
    const fb::Parameter &param = *params->Get(i);
    for (const fb::Source *read : parameterReads(param)) {
      if (std::string problem =
              verifySourceFile(*this, param.name()->str(), *read);
          !problem.empty()) {
        return problem;
      }
    }
  }
  return "";
}

std::string LoadedPlan::verify() const {
  const fb::Plan &p = *planRoot;
  if (std::string problem = verifyFormat(p); !problem.empty()) {
    return problem;
  }
  bool gpu = p.target() && p.target()->backend() == fb::Backend::Cuda;
  if (gpu) {
    if (std::string problem = verifyDeviceCode(); !problem.empty()) {
      return problem;
    }
  } else if (p.device_code() && p.device_code()->size() > 0) {
    return Message() << "a CPU plan carries device code";
  }
  std::vector<int> arities;
  uint32_t entryCount = 1;
  std::string problem = verifyArenas(p);
  if (problem.empty()) {
    problem = verifyBuffers(p);
  }
  if (problem.empty()) {
    problem = verifyParametersAndConstants(*this);
  }
  if (problem.empty()) {
    problem = verifyKernels(p, gpu, arities);
  }
  if (problem.empty()) {
    problem = verifySteps(p, gpu, arities);
  }
  if (problem.empty()) {
    problem = verifyEntries(p, entryCount);
  }
  if (problem.empty()) {
    problem = verifyEvents(p);
  }
  if (problem.empty()) {
    problem = verifyStates(p);
  }
  if (problem.empty()) {
    problem = verifyBindings(p, entryCount);
  }
  if (problem.empty()) {
    problem = verifyGeneration(p);
  }
  if (problem.empty()) {
    problem = verifyLossScaling(p);
  }
  if (problem.empty()) {
    problem = verifyPrecision(p, gpu);
  }
  if (problem.empty() && gpu) {
    problem = verifyCudaLaunches(*this);
  }
  return problem;
}

const char *copyStepName(fb::CopyKind kind) {
  switch (kind) {
  case fb::CopyKind::HostToDevice:
    return "copy_h2d";
  case fb::CopyKind::DeviceToHost:
    return "copy_d2h";
  case fb::CopyKind::DeviceToDevice:
    return "copy_d2d";
  case fb::CopyKind::HostToHost:
    return "copy_h2h";
  }
  return "copy";
}

bool crossesHostAndDevice(fb::CopyKind kind) {
  return kind == fb::CopyKind::HostToDevice ||
         kind == fb::CopyKind::DeviceToHost;
}

Attributes decodeLaunchAttributes(const fb::Launch &launch) {
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

std::string deviceCodeBytes(const fb::DeviceCode &code,
                            std::vector<uint8_t> &bytes) {
  const auto *image = code.image();
  if (code.compression() == fb::Compression::None) {
    bytes.assign(image->begin(), image->end());
    return "";
  }
  if (code.compression() != fb::Compression::Zlib) {
    return "unknown compression " +
           std::to_string(static_cast<int>(code.compression()));
  }
  // Device images are megabytes; a claimed size beyond 1 GiB is damage.
  if (code.size() > (uint64_t(1) << 30)) {
    return "claims " + std::to_string(code.size()) + " uncompressed bytes";
  }
  bytes.resize(code.size());
  uLongf length = static_cast<uLongf>(bytes.size());
  int status = ::uncompress(bytes.data(), &length, image->data(),
                            static_cast<uLong>(image->size()));
  if (status != Z_OK || length != code.size()) {
    return "its zlib data does not decompress to the " +
           std::to_string(code.size()) + " bytes it claims";
  }
  return "";
}

} // namespace tailor::runtime
