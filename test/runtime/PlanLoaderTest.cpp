//===- PlanLoaderTest.cpp - plan verification, sessions, tampered plans ---===//
//
// Builds small plans with the flatbuffers API (no compiler needed, so this
// also runs in a runtime-only build), runs them, and checks that every kind
// of damage -- truncation, bit flips, another version, out-of-range indices,
// a lying memory report, missing weights -- is rejected with a message and
// never crashes.
//
//===----------------------------------------------------------------------===//

#include "runtime/include/tailor/runtime.h"
#include "runtime/schema/plan_generated.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace fb = tailor::plan;

namespace {

/// What a test may change before the plan is finished.
struct PlanSpec {
  uint32_t version = 100;
  std::string weightsFile = "w.bin";
  uint64_t weightsOffset = 16;
  uint64_t weightsLength = 16;
  uint64_t activationArena = 128;
  uint64_t outputOffset = 64;
  std::string kernel = "add";
  std::vector<uint32_t> operands = {0, 1, 2};
  int64_t outputDim = 4;
  uint64_t reportedActivations = 128;
  fb::Backend backend = fb::Backend::Cpu;
  int worldSize = 1;
  /// w is a trainable ZeRO-3 parameter: the one member of a bucket of 4
  /// elements over the group {0} (plan 1.7).
  bool sharded = false;
  /// The arena w lies in (1: activations, at offset 32).
  uint32_t parameterArena = 0;
  /// The stream the launch runs on (Host: optimizer offload's queue), and
  /// the arenas' kind when not the backend's usual one.
  fb::StreamKind streamKind = fb::StreamKind::Device;
  std::optional<fb::ArenaKind> arenaKind;
  /// CUDA plans: the target's SM and the device images.
  int sm = 0;
  struct Image {
    fb::DeviceCodeKind kind = fb::DeviceCodeKind::Cubin;
    std::string arch;
    int sm = 0;
    std::vector<uint8_t> bytes;
    fb::Compression compression = fb::Compression::None;
    uint64_t size = 0;
  };
  std::vector<Image> deviceCode;
};

/// y = x + w for f32[4]: x is an input, w a parameter read from a file.
std::vector<uint8_t> buildPlan(const PlanSpec &spec) {
  flatbuffers::FlatBufferBuilder b;
  // A GPU plan's launches use Device arenas only.
  fb::ArenaKind kind = spec.backend == fb::Backend::Cuda
                           ? fb::ArenaKind::Device
                           : fb::ArenaKind::Host;
  kind = spec.arenaKind.value_or(kind);
  std::vector<flatbuffers::Offset<fb::Arena>> arenas = {
      fb::CreateArena(b, b.CreateString("parameters"), kind,
                      fb::Category::Parameters, 64, 64),
      fb::CreateArena(b, b.CreateString("activations"), kind,
                      fb::Category::Activations, spec.activationArena, 64)};
  std::vector<int64_t> shape = {4};
  std::vector<int64_t> outShape = {spec.outputDim};
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers = {
      fb::CreateBuffer(b, 1, 0, 16, fb::DType::F32, b.CreateVector(shape)),
      fb::CreateBuffer(b, spec.parameterArena, spec.parameterArena ? 32 : 0, 16,
                       fb::DType::F32, b.CreateVector(shape)),
      fb::CreateBuffer(b, 1, spec.outputOffset, 16, fb::DType::F32,
                       b.CreateVector(outShape))};
  auto source = fb::CreateSource(b, b.CreateString(spec.weightsFile),
                                 spec.weightsOffset, spec.weightsLength,
                                 fb::DType::F32);
  auto shard =
      spec.sharded
          ? fb::CreateParameterShard(b, b.CreateVector(shape), 0, 4,
                                     b.CreateVector(std::vector<int>{0}))
          : flatbuffers::Offset<fb::ParameterShard>();
  std::vector<flatbuffers::Offset<fb::Parameter>> params = {fb::CreateParameter(
      b, b.CreateString("w"), 1, source, spec.sharded, 0, 0, false, 0, shard)};
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels = {
      fb::CreateKernel(b, b.CreateString(spec.kernel), 3)};
  std::vector<flatbuffers::Offset<fb::Stream>> streams = {
      fb::CreateStream(b, b.CreateString("compute"), spec.streamKind)};
  auto launch = fb::CreateLaunch(b, 0, b.CreateVector(spec.operands), 0, 0,
                                 b.CreateString("tg.add test"));
  std::vector<flatbuffers::Offset<fb::Op>> ops = {
      fb::CreateOp(b, fb::Step::Launch, launch.Union())};
  std::vector<flatbuffers::Offset<fb::Binding>> inputs = {
      fb::CreateBinding(b, b.CreateString("x"), 0)};
  std::vector<flatbuffers::Offset<fb::Binding>> outputs = {
      fb::CreateBinding(b, b.CreateString("y"), 2)};
  auto memory = fb::CreateMemory(b, 64, 0, spec.reportedActivations, 0, 0, 0,
                                 64 + spec.reportedActivations, 96);
  auto target = fb::CreateTarget(b, spec.backend, b.CreateString("cpu"),
                                 spec.sm, 2);
  std::vector<flatbuffers::Offset<fb::DeviceCode>> images;
  for (const PlanSpec::Image &image : spec.deviceCode) {
    images.push_back(fb::CreateDeviceCode(
        b, image.kind, b.CreateString(image.arch), image.sm,
        b.CreateVector(image.bytes), 0, b.CreateString("test"),
        image.compression, image.size));
  }
  auto plan = fb::CreatePlan(
      b, spec.version, b.CreateString("test"), b.CreateString("none"), target,
      0, spec.worldSize, b.CreateVector(arenas), b.CreateVector(buffers),
      b.CreateVector(params), 0, b.CreateVector(kernels),
      b.CreateVector(streams), 0, b.CreateVector(ops), b.CreateVector(inputs),
      b.CreateVector(outputs), memory, 0, 0, 0,
      images.empty() ? 0 : b.CreateVector(images));
  fb::FinishSizePrefixedPlanBuffer(b, plan);
  return std::vector<uint8_t>(b.GetBufferPointer(),
                              b.GetBufferPointer() + b.GetSize());
}

class PlanLoaderTest : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/tailor-plan-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
    // 16 bytes of padding, then w = {10, 20, 30, 40}.
    std::vector<float> data = {0, 0, 0, 0, 10, 20, 30, 40};
    std::ofstream(dir + "/w.bin", std::ios::binary)
        .write(reinterpret_cast<const char *>(data.data()), 32);
  }
  void TearDown() override {
    std::remove((dir + "/w.bin").c_str());
    rmdir(dir.c_str());
  }

  /// Loads `bytes`; returns the status and leaves the message in `error`.
  tailor_status load(const std::vector<uint8_t> &bytes, std::string &error) {
    tailor_plan *plan = nullptr;
    tailor_status status = tailor_plan_load_from_memory(
        bytes.data(), bytes.size(), dir.c_str(), &plan);
    error = tailor_last_error();
    if (status == TAILOR_OK) {
      tailor_session *session = nullptr;
      status = tailor_session_create(plan, nullptr, &session);
      error = tailor_last_error();
      tailor_session_free(session);
    }
    tailor_plan_free(plan);
    return status;
  }

  /// Loads `bytes` and creates a session on it, which must both succeed.
  void open(const std::vector<uint8_t> &bytes, tailor_plan **plan,
            tailor_session **session) {
    ASSERT_EQ(tailor_plan_load_from_memory(bytes.data(), bytes.size(),
                                           dir.c_str(), plan),
              TAILOR_OK)
        << tailor_last_error();
    ASSERT_EQ(tailor_session_create(*plan, nullptr, session), TAILOR_OK)
        << tailor_last_error();
  }

  std::string dir;
};

TEST_F(PlanLoaderTest, RunsAndAllocatesExactlyThePredictedPeak) {
  tailor_plan *plan = nullptr;
  tailor_session *session = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(buildPlan({}), &plan, &session));

  tailor_memory_report predicted, allocated;
  ASSERT_EQ(tailor_plan_memory(plan, &predicted), TAILOR_OK);
  ASSERT_EQ(tailor_session_memory(session, &allocated), TAILOR_OK);
  EXPECT_EQ(predicted.total, 192u);
  EXPECT_EQ(allocated.total, predicted.total);
  EXPECT_EQ(allocated.parameters, predicted.parameters);
  EXPECT_EQ(allocated.activations, predicted.activations);

  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  ASSERT_EQ(tailor_session_set_input(session, "x", TAILOR_F32, shape, 1, x,
                                     sizeof(x)),
            TAILOR_OK)
      << tailor_last_error();
  ASSERT_EQ(tailor_session_run(session), TAILOR_OK) << tailor_last_error();
  const void *data = nullptr;
  tailor_tensor_info info;
  ASSERT_EQ(tailor_session_output(session, "y", &data, &info), TAILOR_OK);
  const float *y = static_cast<const float *>(data);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.shape[0], 4);
  EXPECT_FLOAT_EQ(y[0], 11);
  EXPECT_FLOAT_EQ(y[3], 44);

  // Wrong input shape and dtype are argument errors naming the input.
  int64_t badShape[1] = {5};
  EXPECT_EQ(tailor_session_set_input(session, "x", TAILOR_F32, badShape, 1, x,
                                     sizeof(x)),
            TAILOR_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tailor_last_error()).find("input 'x' has shape [4]"),
            std::string::npos);
  EXPECT_EQ(tailor_session_set_input(session, "x", TAILOR_I32, shape, 1, x,
                                     sizeof(x)),
            TAILOR_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tailor_session_set_input(session, "nope", TAILOR_F32, shape, 1, x,
                                     sizeof(x)),
            TAILOR_ERROR_INVALID_ARGUMENT);

  // Parameters are written through tailor_session_tensor; on the CPU the
  // upload is a no-op and the next run sees the new weight.
  void *w = nullptr;
  ASSERT_EQ(tailor_session_tensor(session, "w", &w, nullptr), TAILOR_OK);
  static_cast<float *>(w)[0] = 100;
  EXPECT_EQ(tailor_session_tensor_upload(session, "w"), TAILOR_OK);
  EXPECT_EQ(tailor_session_tensor_upload(session, "nope"),
            TAILOR_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(tailor_session_run(session), TAILOR_OK) << tailor_last_error();
  ASSERT_EQ(tailor_session_output(session, "y", &data, &info), TAILOR_OK);
  EXPECT_FLOAT_EQ(static_cast<const float *>(data)[0], 101);
  tailor_session_free(session);
  tailor_plan_free(plan);
}

// Tests that a CPU plan's launch on a host stream (optimizer offload's
// queue, over host arenas) runs like any other.
TEST_F(PlanLoaderTest, RunsHostStreamLaunchesOverHostArenas) {
  PlanSpec spec;
  spec.streamKind = fb::StreamKind::Host;
  tailor_plan *plan = nullptr;
  tailor_session *session = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(buildPlan(spec), &plan, &session));
  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  ASSERT_EQ(tailor_session_set_input(session, "x", TAILOR_F32, shape, 1, x,
                                     sizeof(x)),
            TAILOR_OK);
  ASSERT_EQ(tailor_session_run(session), TAILOR_OK) << tailor_last_error();
  const void *data = nullptr;
  ASSERT_EQ(tailor_session_output(session, "y", &data, nullptr), TAILOR_OK);
  EXPECT_FLOAT_EQ(static_cast<const float *>(data)[3], 44);
  tailor_session_free(session);
  tailor_plan_free(plan);
}

// Tests that the handles survive the common misuse with a status, not a
// crash: a session outlives the plan it was made from (it shares it), a
// handle freed twice or never made is refused and named in the message,
// and freeing one is a no-op that leaves a message.
TEST_F(PlanLoaderTest, HandlesSurviveMisuse) {
  tailor_plan *plan = nullptr;
  tailor_session *session = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(buildPlan({}), &plan, &session));
  tailor_plan_free(plan); // before the session: the session keeps the plan
  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  ASSERT_EQ(tailor_session_set_input(session, "x", TAILOR_F32, shape, 1, x,
                                     sizeof(x)),
            TAILOR_OK)
      << tailor_last_error();
  ASSERT_EQ(tailor_session_run(session), TAILOR_OK) << tailor_last_error();
  const void *data = nullptr;
  ASSERT_EQ(tailor_session_output(session, "y", &data, nullptr), TAILOR_OK);
  EXPECT_FLOAT_EQ(static_cast<const float *>(data)[3], 44);

  // The freed plan is no plan any more.
  tailor_tensor_info info;
  EXPECT_EQ(tailor_plan_input_info(plan, 0, &info),
            TAILOR_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tailor_last_error()).find("not a live tailor_plan"),
            std::string::npos)
      << tailor_last_error();
  EXPECT_EQ(tailor_plan_input_count(plan), 0);
  EXPECT_EQ(tailor_plan_entry_name(plan, 0), nullptr);
  tailor_session *other = nullptr;
  EXPECT_EQ(tailor_session_create(plan, nullptr, &other),
            TAILOR_ERROR_INVALID_ARGUMENT);
  tailor_plan_free(plan); // twice: refused, not a double delete
  EXPECT_NE(std::string(tailor_last_error()).find("not a live tailor_plan"),
            std::string::npos);

  tailor_session_free(session);
  EXPECT_EQ(tailor_session_run(session), TAILOR_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tailor_last_error()).find("not a live tailor_session"),
            std::string::npos)
      << tailor_last_error();
  EXPECT_EQ(tailor_session_set_input(session, "x", TAILOR_F32, shape, 1, x,
                                     sizeof(x)),
            TAILOR_ERROR_INVALID_ARGUMENT);
  tailor_session_free(session); // twice
  EXPECT_NE(std::string(tailor_last_error()).find("not a live tailor_session"),
            std::string::npos);

  // Pointers the library never made.
  int stray = 0;
  auto *foreignPlan = reinterpret_cast<tailor_plan *>(&stray);
  auto *foreignSession = reinterpret_cast<tailor_session *>(&stray);
  tailor_memory_report report;
  EXPECT_EQ(tailor_plan_memory(foreignPlan, &report),
            TAILOR_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tailor_session_memory(foreignSession, &report),
            TAILOR_ERROR_INVALID_ARGUMENT);
  tailor_plan_free(foreignPlan);
  tailor_session_free(foreignSession);
  EXPECT_EQ(stray, 0);
  tailor_plan_free(nullptr);
  tailor_session_free(nullptr);
}

/// Expects `spec` to be rejected with a message containing `needle`.
#define EXPECT_REJECTED(spec, status, needle)                                  \
  do {                                                                         \
    std::string error;                                                         \
    EXPECT_EQ(load(buildPlan(spec), error), status) << error;                  \
    EXPECT_NE(error.find(needle), std::string::npos) << error;                 \
  } while (0)

TEST_F(PlanLoaderTest, ShardedParametersHaveNoWholeTensorInTheCApi) {
  // One rank's chunk of a ZeRO-3 bucket of one member is the whole tensor:
  // the plan binds and runs as the unsharded one does, but the C API does
  // not hand out a parameter that is sharded.
  PlanSpec spec;
  spec.sharded = true;
  tailor_plan *plan = nullptr;
  tailor_session *session = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(buildPlan(spec), &plan, &session));
  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  ASSERT_EQ(tailor_session_set_input(session, "x", TAILOR_F32, shape, 1, x,
                                     sizeof(x)),
            TAILOR_OK);
  ASSERT_EQ(tailor_session_run(session), TAILOR_OK) << tailor_last_error();
  const void *data = nullptr;
  ASSERT_EQ(tailor_session_output(session, "y", &data, nullptr), TAILOR_OK);
  EXPECT_FLOAT_EQ(static_cast<const float *>(data)[3], 44);
  void *w = nullptr;
  EXPECT_EQ(tailor_session_tensor(session, "w", &w, nullptr),
            TAILOR_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tailor_last_error())
                .find("parameter 'w' is sharded over ranks (ZeRO-3)"),
            std::string::npos)
      << tailor_last_error();
  EXPECT_EQ(tailor_session_tensor_upload(session, "w"),
            TAILOR_ERROR_INVALID_ARGUMENT);
  tailor_session_free(session);
  tailor_plan_free(plan);
}

TEST_F(PlanLoaderTest, RejectsSemanticDamage) {
  PlanSpec spec;
  spec.version = 200;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "plan format version 2.0 is not readable");
  spec = {};
  spec.outputOffset = 120;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "buffer 2 [120, +16) lies outside arena 'activations'");
  spec = {};
  spec.kernel = "frobnicate";
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "kernel 'frobnicate' is not known");
  spec = {};
  spec.operands = {0, 1, 7};
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN, "step 0 uses buffer 7 of 3");
  spec = {};
  spec.operands = {0, 1};
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN, "passes 2 buffers to 'add'");
  spec = {};
  spec.outputDim = 5;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN, "holds 20 bytes of tensor in 16");
  spec = {};
  spec.outputDim = 2;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN, "step 0 (add, tg.add test)");
  spec = {};
  spec.reportedActivations = 64;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "the memory report says Activations = 64 bytes but its "
                  "arenas hold 128");
  spec = {};
  spec.weightsLength = 12;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "source length 12 does not match its 16-byte buffer");
  spec = {};
  spec.backend = fb::Backend::Cuda;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "the plan targets sm_0; tailor's CUDA kernels need sm_75");
  spec = {};
  // A launch on a host stream (1.8) runs a CPU kernel: host arenas only.
  spec.streamKind = fb::StreamKind::Host;
  spec.arenaKind = fb::ArenaKind::Device;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "step 0 runs on host stream 'compute' but uses buffer 0 in "
                  "arena 'activations' (Device); host launches read host "
                  "arenas only");
  spec = {};
  // Plans of several ranks load (1.6); an absurd or empty world does not.
  spec.worldSize = 70000;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "the plan is for 70000 ranks; this runtime runs at most "
                  "65536");
  spec = {};
  spec.worldSize = 0;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "rank 0 is outside world size 0");
}

TEST_F(PlanLoaderTest, MissingOrShortWeightsAreIoErrors) {
  // The plan is sound; the file it binds is not there or not whole, which
  // the caller fixes by putting the weights back, not by recompiling.
  PlanSpec spec;
  spec.weightsFile = "missing.bin";
  EXPECT_REJECTED(spec, TAILOR_ERROR_IO,
                  "parameter 'w': cannot open '" + dir + "/missing.bin'");
  spec = {};
  spec.weightsOffset = 24;
  EXPECT_REJECTED(spec, TAILOR_ERROR_IO,
                  "parameter 'w': bytes [24, 40) lie outside '" + dir +
                      "/w.bin' (32 bytes)");
  // A damaged plan is reported as one even when its weights are missing.
  spec = {};
  spec.weightsFile = "missing.bin";
  spec.kernel = "frobnicate";
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "kernel 'frobnicate' is not known");
}

TEST_F(PlanLoaderTest, RejectsTruncationAtEveryLength) {
  std::vector<uint8_t> bytes = buildPlan({});
  for (size_t length = 0; length < bytes.size(); ++length) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + length);
    std::string error;
    EXPECT_EQ(load(cut, error), TAILOR_ERROR_INVALID_PLAN) << length;
    EXPECT_FALSE(error.empty());
  }
}

TEST_F(PlanLoaderTest, SurvivesBitFlips) {
  std::vector<uint8_t> bytes = buildPlan({});
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    std::vector<uint8_t> damaged = bytes;
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      damaged[rng() % damaged.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    std::string error;
    tailor_status status = load(damaged, error);
    // A flip may land in padding or a name and still load; anything else
    // must be a clean rejection with a message.
    if (status != TAILOR_OK) {
      ++rejected;
      EXPECT_FALSE(error.empty());
    }
  }
  EXPECT_GT(rejected, 1000);
}

/// The build's cubin of the elementwise kernels for sm_80 (which defines
/// add's entry points), or empty without CUDA.
static std::vector<uint8_t> elementwiseCubin() {
#ifdef TAILOR_TEST_CUDA_MODULE_DIR
  std::ifstream file(std::string(TAILOR_TEST_CUDA_MODULE_DIR) +
                         "/elementwise.sm_80.cubin",
                     std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(file)),
                              std::istreambuf_iterator<char>());
#else
  return {};
#endif
}

TEST_F(PlanLoaderTest, RejectsUnusableDeviceCode) {
  PlanSpec spec;
  spec.backend = fb::Backend::Cuda;
  spec.sm = 80;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "targets CUDA (sm_80) but carries no device code");
  spec.deviceCode = {{fb::DeviceCodeKind::Cubin, "sm_80", 80, {1, 2, 3}}};
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "device code 'sm_80' is unusable: not an ELF file");
  spec.deviceCode = {{fb::DeviceCodeKind::Cubin, "sm_80", 80,
                      std::vector<uint8_t>(200, 7), fb::Compression::Zlib, 4096}};
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "its zlib data does not decompress to the 4096 bytes");
  spec.deviceCode = {{fb::DeviceCodeKind::Ptx, "compute_80", 80,
                      {'.', 'v', 'e', 'r', 's', 'i', 'o', 'n', ' ', '8'}}};
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "PTX without a .target sm_XX directive");

  std::vector<uint8_t> cubin = elementwiseCubin();
  if (cubin.empty()) {
    GTEST_SKIP() << "built without CUDA: no cubin to check against";
  }
  spec.deviceCode = {{fb::DeviceCodeKind::Cubin, "sm_90a", 90, cubin}};
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "device code 'sm_90a' claims sm 90 but is built for 80");
  spec.sm = 90;
  spec.deviceCode = {{fb::DeviceCodeKind::Cubin, "sm_80", 80, cubin}};
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "the plan targets sm_90 but no cubin for it has the entry "
                  "point 'tailor_");
  spec.sm = 86; // Ampere runs the sm_80 cubin, which lacks softmax's code
  spec.kernel = "softmax";
  spec.operands = {0, 2};
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "the plan targets sm_86 but no cubin for it has the entry "
                  "point 'tailor_softmax_");

  // The host fills only parameters and constants arenas of a GPU plan (the
  // rest live on the device alone).
  spec.sm = 86;
  spec.kernel = "add";
  spec.operands = {0, 1, 2};
  spec.parameterArena = 1;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "parameter 'w' lies in arena 'activations' (Activations); "
                  "a CUDA plan's parameters and constants must lie in "
                  "parameters or constants arenas");

  // Every device launch passes its CUDA launcher's check when the plan
  // loads, GPU or not (y [2] is no sum of two [4]).
  spec = {};
  spec.backend = fb::Backend::Cuda;
  spec.sm = 86;
  spec.deviceCode = {{fb::DeviceCodeKind::Cubin, "sm_80", 80, cubin}};
  spec.outputDim = 2;
  EXPECT_REJECTED(spec, TAILOR_ERROR_INVALID_PLAN,
                  "step 0 (add, tg.add test): the CUDA backend cannot run "
                  "it: ");

  // A good plan gets as far as the GPU; without one, it says why.
  spec = {};
  spec.backend = fb::Backend::Cuda;
  spec.sm = 86;
  spec.deviceCode = {{fb::DeviceCodeKind::Cubin, "sm_80", 80, cubin}};
  int gpus = 0;
  if (tailor_cuda_device_count(&gpus) == TAILOR_OK && gpus > 0) {
    std::string error;
    EXPECT_EQ(load(buildPlan(spec), error), TAILOR_OK) << error;
  } else {
    EXPECT_REJECTED(spec, TAILOR_ERROR_UNAVAILABLE,
                    "the plan targets CUDA (cpu, sm_86) but ");
  }
}

TEST_F(PlanLoaderTest, RejectsInputRanksOutsideTheApi) {
  tailor_plan *plan = nullptr;
  tailor_session *session = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(buildPlan({}), &plan, &session));
  float x[4] = {1, 2, 3, 4};
  // A caller's rank above TAILOR_MAX_RANK (or below 0) is refused before
  // anything reads its shape array.
  int64_t shape[TAILOR_MAX_RANK + 1] = {4, 1, 1, 1, 1, 1, 1, 1, 1};
  for (int rank : {TAILOR_MAX_RANK + 1, 1000000, -1}) {
    EXPECT_EQ(tailor_session_set_input(session, "x", TAILOR_F32, shape, rank, x,
                                       sizeof(x)),
              TAILOR_ERROR_INVALID_ARGUMENT)
        << rank;
    EXPECT_EQ(std::string(tailor_last_error()),
              "input 'x': rank " + std::to_string(rank) + " is outside [0, 8]");
  }
  EXPECT_EQ(tailor_session_set_input(session, "x", TAILOR_F32, shape, 1, x,
                                     sizeof(x)),
            TAILOR_OK)
      << tailor_last_error();
  tailor_session_free(session);
  tailor_plan_free(plan);
}

TEST_F(PlanLoaderTest, RejectsADirectoryAndAHugeFileAsPlans) {
  // A directory opens as a stream on Linux; it used to end in an uncaught
  // std::bad_alloc from its bogus size.
  tailor_plan *plan = nullptr;
  EXPECT_EQ(tailor_plan_load(dir.c_str(), &plan), TAILOR_ERROR_IO);
  EXPECT_EQ(plan, nullptr);
  EXPECT_EQ(std::string(tailor_last_error()),
            "cannot read plan '" + dir + "': it is a directory");
  // A sparse file larger than any size-prefixed plan is refused unread.
  std::string huge = dir + "/huge.tplan";
  std::ofstream(huge).close();
  ASSERT_EQ(::truncate(huge.c_str(), (int64_t(1) << 32) + 5), 0);
  EXPECT_EQ(tailor_plan_load(huge.c_str(), &plan), TAILOR_ERROR_INVALID_PLAN);
  EXPECT_NE(std::string(tailor_last_error())
                .find("huge.tplan: not a tailor plan (the file has "
                      "4294967301 bytes, more than the 4294967299"),
            std::string::npos)
      << tailor_last_error();
  std::remove(huge.c_str());
}

TEST_F(PlanLoaderTest, RejectsWrongFileIdentifierAndMissingFile) {
  std::vector<uint8_t> bytes = buildPlan({});
  bytes[8] = 'X';
  std::string error;
  EXPECT_EQ(load(bytes, error), TAILOR_ERROR_INVALID_PLAN);
  EXPECT_NE(error.find("not a tailor plan"), std::string::npos) << error;

  tailor_plan *plan = nullptr;
  EXPECT_EQ(tailor_plan_load((dir + "/absent.tplan").c_str(), &plan),
            TAILOR_ERROR_IO);
  EXPECT_NE(std::string(tailor_last_error()).find("cannot open plan"),
            std::string::npos);
}

} // namespace
