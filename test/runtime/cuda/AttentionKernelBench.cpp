//===- AttentionKernelBench.cpp - time the CUDA attention kernels ---------===//
//
// A micro-benchmark of runtime/cuda/AttentionLaunchers.cpp on a GPU, with
// no compiler and no plan: the attention forward and the attention_grad
// launches (attention_grad_stats, attention_grad_kv, attention_grad_kv_sum
// when the key-major pass is split, attention_grad_q), each timed on its
// own with CUDA events, on the device code the kernel tests load
// (codegen/cuda in the build, or TAILOR_CUDA_MODULE_DIR).
//
//   AttentionKernelBench [--warmup N] [--reps N] [--sweep]
//                        [--backend cuda|emulator] [--compute bf16|fp16]
//                        [SHAPE...]
//
// SHAPE is a built-in name (tinyllama, llama7b, gqa-b4; the default is all
// three) or B,HQ,HKV,T,S,D[,DV][,causal|full][,bf16|f32][,splits=N]
// (default causal bf16; splits forces attention_grad's kv_splits). --sweep
// also runs every other divisor of the GQA group as kv_splits, to check
// the rule of runtime/cuda/AttentionWorkspace.h. --compute picks the
// tensor cores' format (bf16, the default, as fp32 and bf16 plans; fp16 as
// fp16 plans, the module attention_fp16), and fp16 runs every shape with
// f32 storage, which is what fp16 plans keep. Per launch it prints the
// mean ms and TFLOP/s (matmul FLOPs, causal counted as half), and per shape
// one line for scripts:
//   KERNELBENCH name=tinyllama splits=8 fwd_ms=... stats_ms=... kv_ms=...
//       kv_sum_ms=... q_ms=... bwd_ms=... fwd_tflops=... bwd_tflops=...
//       compute=bf16
// where bwd_tflops counts the backward as 2.5 forwards (FlashAttention's
// convention), so it compares with published figures.
//
// `--backend emulator` runs the same code on the SIMT emulator with host
// timers (tiny shapes only: a smoke test of this program). Without a GPU
// the cuda backend exits with status 2 and says why.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/AttentionFp16Kernels.cu"
#include "codegen/cuda/AttentionKernels.cu"

#include "runtime/cuda/AttentionWorkspace.h"
#include "runtime/cuda/DeviceContext.h"
#include "test/runtime/cuda/AttentionKernelBench.h"
#include "test/runtime/cuda/CudaTestUtil.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tailor::runtime::cuda::testing {
namespace {

struct BenchShape {
  std::string name;
  int64_t b, hq, hkv, t, s, d, dv;
  bool causal = true;
  DType dtype = DType::BF16;
  /// Forced kv_splits (0: the rule).
  int64_t splits = 0;
};

const BenchShape kBuiltins[] = {
    {"tinyllama", 1, 32, 4, 2048, 2048, 64, 64},
    {"llama7b", 1, 32, 32, 2048, 2048, 128, 128},
    {"gqa-b4", 4, 32, 8, 1024, 1024, 64, 64},
};

/// Parses a SHAPE argument; "" or what is wrong.
std::string parseShape(const std::string &text, BenchShape &shape) {
  for (const BenchShape &builtin : kBuiltins) {
    if (text == builtin.name) {
      shape = builtin;
      return "";
    }
  }
  std::vector<std::string> fields;
  std::stringstream stream(text);
  for (std::string field; std::getline(stream, field, ',');) {
    fields.push_back(field);
  }
  if (fields.size() < 6) {
    return "shape '" + text +
           "' is neither a built-in name nor B,HQ,HKV,T,S,D[,DV][,causal|"
           "full][,bf16|f32][,splits=N]";
  }
  int64_t *dims[] = {&shape.b, &shape.hq, &shape.hkv, &shape.t,
                     &shape.s, &shape.d,  &shape.dv};
  size_t i = 0;
  for (; i < fields.size() && i < 7; ++i) {
    char *end = nullptr;
    long long v = std::strtoll(fields[i].c_str(), &end, 10);
    if (end == fields[i].c_str() || *end) {
      break;
    }
    *dims[i] = v;
  }
  if (i < 6) {
    return "shape '" + text + "': field " + std::to_string(i + 1) +
           " is not a number";
  }
  if (i == 6) {
    shape.dv = shape.d;
  }
  for (; i < fields.size(); ++i) {
    const std::string &f = fields[i];
    if (f == "causal" || f == "full") {
      shape.causal = f == "causal";
    } else if (f == "bf16" || f == "f32") {
      shape.dtype = f == "bf16" ? DType::BF16 : DType::F32;
    } else if (f.rfind("splits=", 0) == 0) {
      shape.splits = std::atoll(f.c_str() + 7);
    } else {
      return "shape '" + text + "': unknown field '" + f + "'";
    }
  }
  shape.name = text;
  if (shape.b <= 0 || shape.hq <= 0 || shape.hkv <= 0 || shape.t <= 0 ||
      shape.s <= 0 || shape.d <= 0 || shape.dv <= 0 ||
      shape.hq % shape.hkv != 0) {
    return "shape '" + text + "': sizes must be positive, HKV dividing HQ";
  }
  return "";
}

/// Mean device time per launched function, from CUDA events (one pair per
/// launch, read after the stream drains) or host clocks (the emulator runs
/// each launch to completion).
class LaunchTimer {
public:
  explicit LaunchTimer(bool events) : events(events) {}
  ~LaunchTimer() { drop(); }
  void begin() {
    if (events) {
      pending.push_back({});
      noteError(recordEvent(pending.back().start));
    } else {
      hostStart = std::chrono::steady_clock::now();
    }
  }
  void end(const std::string &name) {
    if (events) {
      noteError(recordEvent(pending.back().stop));
      pending.back().name = name;
    } else {
      std::chrono::duration<double, std::milli> ms =
          std::chrono::steady_clock::now() - hostStart;
      add(name, ms.count());
    }
  }
  /// Waits for the events and adds them up; "" or the first CUDA error.
  std::string collect() {
    for (Pending &p : pending) {
      float ms = 0;
      if (error.empty()) {
        noteError(elapsedMs(p.start, p.stop, ms));
      }
      add(p.name, ms);
    }
    drop();
    std::string e = error;
    error.clear();
    return e;
  }
  void clear() { totals.clear(); }
  /// Total ms and launches per function name.
  std::map<std::string, std::pair<double, int>> totals;

private:
  struct Pending {
    void *start = nullptr, *stop = nullptr;
    std::string name;
  };
  void add(const std::string &name, double ms) {
    totals[name].first += ms;
    totals[name].second += 1;
  }
  void noteError(std::string e) {
    if (error.empty()) {
      error = std::move(e);
    }
  }
  void drop() {
    for (Pending &p : pending) {
      destroyEvent(p.start);
      destroyEvent(p.stop);
    }
    pending.clear();
  }
  bool events;
  std::vector<Pending> pending;
  std::string error;
  std::chrono::steady_clock::time_point hostStart;
};

/// "tailor_attention_grad_kv_d64_bf16" (or _f32_fp16): "attention_grad_kv".
std::string kernelName(std::string function) {
  if (function.rfind("tailor_", 0) == 0) {
    function = function.substr(7);
  }
  for (const char *suffix : {"_fp16", "_bf16", "_f32"}) {
    size_t n = std::string(suffix).size();
    if (function.size() > n &&
        function.compare(function.size() - n, n, suffix) == 0) {
      function.resize(function.size() - n);
    }
  }
  size_t d = function.rfind("_d");
  if (d != std::string::npos && d + 2 < function.size() &&
      function.find_first_not_of("0123456789", d + 2) == std::string::npos) {
    function.resize(d);
  }
  return function;
}

/// Forwards to the backend's context, timing every launch.
class TimedContext final : public LaunchContext {
public:
  TimedContext(LaunchContext &inner, LaunchTimer &timer)
      : inner(inner), timer(timer) {}
  std::string launch(const char *function, Dim3 grid, Dim3 block,
                     size_t sharedBytes, void **args) override {
    timer.begin();
    std::string e = inner.launch(function, grid, block, sharedBytes, args);
    timer.end(kernelName(function));
    return e;
  }
  std::string gemm(const GemmDesc &desc) override { return inner.gemm(desc); }
  std::string memsetZero(void *device, size_t bytes) override {
    return inner.memsetZero(device, bytes);
  }
  std::string copy(void *target, const void *source, size_t bytes) override {
    return inner.copy(target, source, bytes);
  }
  int multiprocessors() const override { return inner.multiprocessors(); }
  int sm() const override { return inner.sm(); }
  HalfCompute halfCompute() const override { return inner.halfCompute(); }
  DeviceErrorRecord *errorRecord() override { return inner.errorRecord(); }
  std::string takeErrorRecord(DeviceErrorRecord &record) override {
    return inner.takeErrorRecord(record);
  }

private:
  LaunchContext &inner;
  LaunchTimer &timer;
};

struct Options {
  int warmup = 3, reps = 20;
  bool sweep = false;
  std::string backend = "cuda";
  HalfCompute compute = HalfCompute::BF16;
};

/// The launch's operands on the device (uploaded once) and attributes.
struct Prepared {
  CudaCall call;
  std::vector<HostTensor> host;
};

/// Uploads `host` and builds the call; "" or what failed.
std::string prepare(TestBackend &backend, const std::string &kernel,
                    std::vector<HostTensor> host,
                    std::vector<Attribute> attributes, Prepared &out) {
  if (std::string e = checkCuda(kernel, host, attributes); !e.empty()) {
    return kernel + " rejects the shape: " + e;
  }
  out.host = std::move(host);
  out.call = CudaCall{};
  out.call.attributes = Attributes(attributes);
  for (HostTensor &t : out.host) {
    Tensor device = t.tensor();
    device.data = backend.allocate(std::max<size_t>(t.bytes(), 1));
    if (!device.data) {
      return "cannot allocate " + std::to_string(t.bytes()) + " bytes";
    }
    backend.upload(device.data, t.data(), t.bytes());
    out.call.operands.push_back(device);
  }
  out.host.clear(); // the device copies are what runs
  return "";
}

/// Runs `call` warmup + reps times through the timed context; per-function
/// means into `ms`. "" or the failure.
std::string timeLaunches(TestBackend &backend, const std::string &kernel,
                         Prepared &prepared, const Options &options,
                         LaunchTimer &timer, TimedContext &timed,
                         std::map<std::string, double> &ms) {
  const CudaKernelDef *def = findCudaKernel(kernel);
  prepared.call.context = &timed;
  for (int i = 0; i < options.warmup + options.reps; ++i) {
    if (i == options.warmup) {
      if (std::string e = timer.collect(); !e.empty()) {
        return e;
      }
      timer.clear();
    }
    if (std::string e = def->launch(prepared.call); !e.empty()) {
      return kernel + " failed: " + e;
    }
  }
  if (std::string e = timer.collect(); !e.empty()) {
    return e;
  }
  if (std::string e = backend.synchronize(); !e.empty()) {
    return kernel + " failed: " + e;
  }
  for (const auto &[name, total] : timer.totals) {
    ms[name] = total.first / total.second;
  }
  timer.clear();
  return "";
}

HostTensor randomInput(std::vector<int64_t> shape, uint64_t seed,
                       DType dtype) {
  HostTensor t = randomF32(std::move(shape), seed, -2.0f, 2.0f);
  return dtype == DType::F32 ? t : converted(t, dtype);
}

/// Times one shape with `splits` slices (0: the rule); prints its lines.
std::string benchShape(TestBackend &backend, const BenchShape &shape,
                       int64_t splits, const Options &options,
                       LaunchTimer &timer, TimedContext &timed) {
  const BenchShape &c = shape;
  AttentionGradShape grad{c.b, c.hq, c.hkv, c.t, c.s, c.d, c.dv};
  int64_t used = splits > 0 ? splits : attentionKvSplits(grad);
  std::vector<Attribute> attrs = {
      intAttr("causal", c.causal ? 1 : 0),
      floatAttr("scale", 1.0 / std::sqrt(double(c.d)))};
  if (splits > 0) {
    attrs.push_back(intAttr("kv_splits", splits));
  }
  std::vector<HostTensor> forward = {
      randomInput({c.b, c.hq, c.t, c.d}, 1, c.dtype),
      randomInput({c.b, c.hkv, c.s, c.d}, 2, c.dtype),
      randomInput({c.b, c.hkv, c.s, c.dv}, 3, c.dtype),
      HostTensor(c.dtype, {c.b, c.hq, c.t, c.dv}),
      HostTensor(DType::F32, {1})};
  int64_t workspace = attentionGradStatsOffset(grad, used) + 2 * c.b * c.hq * c.t;
  std::vector<HostTensor> backward = {
      randomInput({c.b, c.hq, c.t, c.dv}, 4, c.dtype), forward[0], forward[1],
      forward[2], HostTensor(c.dtype, {c.b, c.hq, c.t, c.d}),
      HostTensor(c.dtype, {c.b, c.hkv, c.s, c.d}),
      HostTensor(c.dtype, {c.b, c.hkv, c.s, c.dv}),
      HostTensor(DType::F32, {workspace})};
  Prepared fwd, bwd;
  std::vector<Attribute> fwdAttrs(attrs.begin(), attrs.begin() + 2);
  if (std::string e = prepare(backend, "attention", forward, fwdAttrs, fwd);
      !e.empty()) {
    return e;
  }
  if (std::string e = prepare(backend, "attention_grad", backward, attrs, bwd);
      !e.empty()) {
    return e;
  }
  std::map<std::string, double> ms;
  if (std::string e =
          timeLaunches(backend, "attention", fwd, options, timer, timed, ms);
      !e.empty()) {
    return e;
  }
  if (std::string e = timeLaunches(backend, "attention_grad", bwd, options,
                                   timer, timed, ms);
      !e.empty()) {
    return e;
  }
  // Matmul FLOPs per (query, key) pair of one head; causal sees half.
  double pairs = double(c.b) * c.hq * c.t * c.s * (c.causal ? 0.5 : 1.0);
  double d = double(c.d), dv = double(c.dv);
  std::map<std::string, double> flops = {
      {"attention", pairs * 2 * (d + dv)},
      {"attention_grad_stats", pairs * 2 * (d + dv)},
      {"attention_grad_kv", pairs * 4 * (d + dv)},
      {"attention_grad_q", pairs * 2 * (2 * d + dv)},
      {"attention_grad_kv_sum", 0}};
  std::printf("%s: B%lld Hq%lld Hkv%lld T%lld S%lld D%lld Dv%lld %s %s, "
              "kv_splits %lld%s, %d reps after %d warm-up\n",
              c.name.c_str(), (long long)c.b, (long long)c.hq,
              (long long)c.hkv, (long long)c.t, (long long)c.s,
              (long long)c.d, (long long)c.dv, c.causal ? "causal" : "full",
              c.dtype == DType::BF16 ? "bf16" : "f32", (long long)used,
              splits > 0 ? " (forced)" : " (rule)", options.reps,
              options.warmup);
  double backwardMs = 0;
  for (const char *name : {"attention", "attention_grad_stats",
                           "attention_grad_kv", "attention_grad_kv_sum",
                           "attention_grad_q"}) {
    auto it = ms.find(name);
    if (it == ms.end()) {
      continue;
    }
    if (std::string(name) != "attention") {
      backwardMs += it->second;
    }
    double f = flops[name];
    if (f > 0) {
      std::printf("  %-22s %9.3f ms %8.1f TFLOP/s\n", name, it->second,
                  f / (it->second * 1e-3) / 1e12);
    } else {
      std::printf("  %-22s %9.3f ms\n", name, it->second);
    }
  }
  double forwardFlops = flops["attention"];
  double fwdMs = ms.count("attention") ? ms["attention"] : 0;
  std::printf("  %-22s %9.3f ms %8.1f TFLOP/s (2.5 forwards)\n",
              "attention_grad (all)", backwardMs,
              backwardMs > 0 ? 2.5 * forwardFlops / (backwardMs * 1e-3) / 1e12
                             : 0.0);
  auto get = [&](const char *name) {
    return ms.count(name) ? ms[name] : 0.0;
  };
  std::printf("KERNELBENCH name=%s splits=%lld fwd_ms=%.4f stats_ms=%.4f "
              "kv_ms=%.4f kv_sum_ms=%.4f q_ms=%.4f bwd_ms=%.4f "
              "fwd_tflops=%.1f bwd_tflops=%.1f compute=%s\n",
              c.name.c_str(), (long long)used, fwdMs,
              get("attention_grad_stats"), get("attention_grad_kv"),
              get("attention_grad_kv_sum"), get("attention_grad_q"),
              backwardMs,
              fwdMs > 0 ? forwardFlops / (fwdMs * 1e-3) / 1e12 : 0.0,
              backwardMs > 0 ? 2.5 * forwardFlops / (backwardMs * 1e-3) / 1e12
                             : 0.0,
              halfComputeName(timed.halfCompute()));
  std::fflush(stdout);
  return "";
}

int usage(const char *problem) {
  std::fprintf(stderr,
               "AttentionKernelBench: %s\nusage: AttentionKernelBench "
               "[--warmup N] [--reps N] [--sweep] [--backend cuda|emulator] "
               "[--compute bf16|fp16] [SHAPE...]\n  SHAPE: tinyllama | llama7b | gqa-b4 | "
               "B,HQ,HKV,T,S,D[,DV][,causal|full][,bf16|f32][,splits=N]\n",
               problem);
  return 1;
}

int run(int argc, char **argv) {
  Options options;
  std::vector<BenchShape> shapes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg == "--warmup" && hasValue) {
      options.warmup = std::atoi(argv[++i]);
    } else if (arg == "--reps" && hasValue) {
      options.reps = std::atoi(argv[++i]);
    } else if (arg == "--backend" && hasValue) {
      options.backend = argv[++i];
    } else if (arg == "--compute" && hasValue) {
      std::string compute = argv[++i];
      if (compute != "bf16" && compute != "fp16") {
        return usage(("unknown compute " + compute).c_str());
      }
      options.compute = halfComputeOf(compute);
    } else if (arg == "--sweep") {
      options.sweep = true;
    } else if (arg == "-h" || arg == "--help") {
      usage("times the CUDA attention kernels");
      return 0;
    } else if (!arg.empty() && arg[0] == '-') {
      return usage(("unknown option " + arg).c_str());
    } else {
      BenchShape shape;
      if (std::string e = parseShape(arg, shape); !e.empty()) {
        return usage(e.c_str());
      }
      shapes.push_back(shape);
    }
  }
  if (options.reps < 1 || options.warmup < 0) {
    return usage("--reps must be at least 1 and --warmup at least 0");
  }
  if (shapes.empty()) {
    shapes.assign(std::begin(kBuiltins), std::end(kBuiltins));
  }
  std::string why;
  std::unique_ptr<TestBackend> backend;
  bool events = options.backend == "cuda";
  if (events) {
    backend = makeCudaDeviceBackend(why);
  } else if (options.backend == "emulator") {
    setenv("TAILOR_TEST_BACKEND", "emulator", 1);
    backend = makeBackend(why);
  } else {
    return usage(("unknown backend " + options.backend).c_str());
  }
  if (!backend) {
    std::fprintf(stderr, "AttentionKernelBench: %s\n", why.c_str());
    return 2;
  }
  if (events) {
    // Launches and events on the legacy default stream, in one order.
    static_cast<DeviceContext &>(backend->context()).setStream(nullptr);
    DeviceProperties device;
    openDevice(defaultDeviceOrdinal(), device);
    std::printf("device: %s, sm_%d, %d SMs\n", device.name.c_str(), device.sm,
                device.multiprocessors);
  }
  backend->setHalfCompute(options.compute);
  if (options.compute == HalfCompute::FP16) {
    for (BenchShape &shape : shapes) {
      shape.dtype = DType::F32;
    }
  }
  LaunchTimer timer(events);
  TimedContext timed(backend->context(), timer);
  int failures = 0;
  for (const BenchShape &shape : shapes) {
    std::vector<int64_t> runs = {shape.splits};
    if (options.sweep && shape.splits == 0) {
      int64_t group = shape.hq / shape.hkv;
      int64_t rule = attentionKvSplits(
          {shape.b, shape.hq, shape.hkv, shape.t, shape.s, shape.d, shape.dv});
      for (int64_t s = 1; s <= group; ++s) {
        if (group % s == 0 && s != rule) {
          runs.push_back(s);
        }
      }
    }
    for (int64_t splits : runs) {
      if (std::string e =
              benchShape(*backend, shape, splits, options, timer, timed);
          !e.empty()) {
        std::fprintf(stderr, "AttentionKernelBench: %s: %s\n",
                     shape.name.c_str(), e.c_str());
        ++failures;
      }
    }
  }
  return failures ? 1 : 0;
}

} // namespace
} // namespace tailor::runtime::cuda::testing

int main(int argc, char **argv) {
  return tailor::runtime::cuda::testing::run(argc, argv);
}
