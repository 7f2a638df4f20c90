//===- CudaTestUtil.cpp - the CUDA kernel test harness --------------------===//
//
// The "emulator" backend and the comparison of every launcher with its CPU
// kernel. Device memory on the emulator is host memory with a canary zone
// on each side, checked after every enqueued operation, so a kernel that
// writes out of bounds fails the launch that did it rather than corrupting
// a neighbouring tensor silently.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/cuda/CudaTestUtil.h"

#include "codegen/cuda/SimtEmulator.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

namespace tailor::runtime::cuda::testing {

namespace {

//===----------------------------------------------------------------------===//
// Scalar conversions (round to nearest even, as Device.cuh and PyTorch).
//===----------------------------------------------------------------------===//

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return uint16_t((u >> 16) | 0x40u);
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float bf16ToFloat(uint16_t h) { return bitsFloat(uint32_t(h) << 16); }

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) {
    return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    float m = float(mantissa) * 5.9604644775390625e-8f;
    return sign ? -m : m;
  }
  return bitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t floatToHalf(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    return uint16_t(sign | 0x7e00u);
  }
  if (abs >= 0x477ff000u) { // rounds to >= 65520: infinity
    return uint16_t(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) { // below the smallest normal: subnormal or zero
    float a = bitsFloat(abs);
    // Multiples of 2^-24, rounded to nearest even by the FPU.
    float scaled = std::nearbyint(a * 16777216.0f);
    return uint16_t(sign | uint16_t(scaled));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return uint16_t(sign | uint16_t((rounded - 0x38000000u) >> 13));
}

double readElement(DType dtype, const void *data, int64_t i) {
  switch (dtype) {
  case DType::F32:
    return static_cast<const float *>(data)[i];
  case DType::F64:
    return static_cast<const double *>(data)[i];
  case DType::F16:
    return halfToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::I64:
    return double(static_cast<const int64_t *>(data)[i]);
  case DType::I32:
    return static_cast<const int32_t *>(data)[i];
  case DType::I16:
    return static_cast<const int16_t *>(data)[i];
  case DType::I8:
    return static_cast<const int8_t *>(data)[i];
  case DType::U8:
  case DType::Bool:
    return static_cast<const uint8_t *>(data)[i];
  }
  return 0;
}

void writeElement(DType dtype, void *data, int64_t i, double v) {
  switch (dtype) {
  case DType::F32:
    static_cast<float *>(data)[i] = float(v);
    return;
  case DType::F64:
    static_cast<double *>(data)[i] = v;
    return;
  case DType::F16:
    static_cast<uint16_t *>(data)[i] = floatToHalf(float(v));
    return;
  case DType::BF16:
    static_cast<uint16_t *>(data)[i] = floatToBf16(float(v));
    return;
  case DType::I64:
    static_cast<int64_t *>(data)[i] = int64_t(v);
    return;
  case DType::I32:
    static_cast<int32_t *>(data)[i] = int32_t(v);
    return;
  case DType::I16:
    static_cast<int16_t *>(data)[i] = int16_t(v);
    return;
  case DType::I8:
    static_cast<int8_t *>(data)[i] = int8_t(v);
    return;
  case DType::U8:
    static_cast<uint8_t *>(data)[i] = uint8_t(v);
    return;
  case DType::Bool:
    static_cast<uint8_t *>(data)[i] = v != 0;
    return;
  }
}

int64_t readInt(DType dtype, const void *data, int64_t i) {
  if (dtype == DType::I64) {
    return static_cast<const int64_t *>(data)[i];
  }
  return int64_t(readElement(dtype, data, i));
}

void writeInt(DType dtype, void *data, int64_t i, int64_t v) {
  switch (dtype) {
  case DType::I64:
    static_cast<int64_t *>(data)[i] = v;
    return;
  case DType::I32:
    static_cast<int32_t *>(data)[i] = int32_t(v);
    return;
  case DType::I16:
    static_cast<int16_t *>(data)[i] = int16_t(v);
    return;
  case DType::I8:
    static_cast<int8_t *>(data)[i] = int8_t(v);
    return;
  case DType::Bool:
    static_cast<uint8_t *>(data)[i] = v != 0;
    return;
  default:
    static_cast<uint8_t *>(data)[i] = uint8_t(v);
    return;
  }
}

uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string indexString(const std::vector<int64_t> &shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t extent = std::max<int64_t>(shape[d], 1);
    index[d] = flat % extent;
    flat /= extent;
  }
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d) {
    text += (d ? ", " : "") + std::to_string(index[d]);
  }
  return text + "]";
}

std::string formatDouble(double v, int digits = 9) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.*g", digits, v);
  return text;
}

//===----------------------------------------------------------------------===//
// The emulator backend.
//===----------------------------------------------------------------------===//

/// Bytes of canary on each side of an allocation; a multiple of 256 keeps
/// every allocation 256-byte aligned, as cudaMalloc's are.
constexpr size_t kCanaryBytes = 256;
constexpr unsigned char kCanary = 0xa5;

class EmulatorBackend;

class EmulatorContext : public LaunchContext {
public:
  explicit EmulatorContext(EmulatorBackend &backend) : backend(backend) {}
  std::string launch(const char *function, Dim3 grid, Dim3 block,
                     size_t sharedBytes, void **args) override;
  std::string gemm(const GemmDesc &desc) override;
  std::string memsetZero(void *device, size_t bytes) override;
  std::string copy(void *target, const void *source, size_t bytes) override;
  int multiprocessors() const override { return 4; }
  int sm() const override { return 90; }
  HalfCompute halfCompute() const override { return half; }
  DeviceErrorRecord *errorRecord() override { return record; }
  std::string takeErrorRecord(DeviceErrorRecord &out) override {
    std::memcpy(&out, record, sizeof(out));
    if (out.code != tl::kNoError) {
      std::memset(record, 0, sizeof(*record));
    }
    return "";
  }

  HalfCompute half = HalfCompute::None;
  /// The error record, in a canary-guarded allocation of the backend.
  DeviceErrorRecord *record = nullptr;
  /// The running launcher's device functions at the precision (null: any).
  const char *const *allowed = nullptr;
  const char *launcher = nullptr;

private:
  EmulatorBackend &backend;
};

class EmulatorBackend : public TestBackend {
public:
  EmulatorBackend() : ctx(*this) {
    ctx.record = static_cast<DeviceErrorRecord *>(
        allocate(sizeof(DeviceErrorRecord)));
  }
  ~EmulatorBackend() override {
    for (Allocation &a : allocations) {
      std::free(a.base);
    }
  }
  const char *name() const override { return "emulator"; }
  void *allocate(size_t bytes) override {
    size_t body = (bytes + kCanaryBytes - 1) / kCanaryBytes * kCanaryBytes;
    size_t total = body + 2 * kCanaryBytes;
    auto *base = static_cast<unsigned char *>(std::aligned_alloc(256, total));
    if (!base) {
      return nullptr;
    }
    std::memset(base, kCanary, total);
    std::memset(base + kCanaryBytes, 0, bytes);
    allocations.push_back({base, base + kCanaryBytes, bytes, total});
    return base + kCanaryBytes;
  }
  void upload(void *device, const void *host, size_t bytes) override {
    if (bytes) {
      std::memcpy(device, host, bytes);
    }
  }
  void download(void *host, const void *device, size_t bytes) override {
    if (bytes) {
      std::memcpy(host, device, bytes);
    }
  }
  LaunchContext &context() override { return ctx; }
  void setHalfCompute(HalfCompute format) override { ctx.half = format; }
  std::string synchronize() override {
    std::string error = std::move(pending);
    pending.clear();
    return error;
  }

  /// Whether [p, p + bytes) lies inside one allocation.
  bool contains(const void *p, size_t bytes) const {
    auto *q = static_cast<const unsigned char *>(p);
    for (const Allocation &a : allocations) {
      if (q >= a.data && q + bytes <= a.data + a.bytes) {
        return true;
      }
    }
    return false;
  }

  /// "" or which allocation had a canary overwritten (and restores them, so
  /// one stray write is reported once).
  std::string checkCanaries() {
    for (Allocation &a : allocations) {
      unsigned char *end = a.data + a.bytes;
      unsigned char *limit = a.base + a.total;
      for (unsigned char *p = a.base; p < limit; ++p) {
        if (p == a.data) {
          p = end;
          if (p >= limit) {
            break;
          }
        }
        if (*p != kCanary) {
          long long offset =
              p < a.data ? -(long long)(a.data - p) : (long long)(p - a.data);
          std::string message = "out-of-bounds write at byte offset " +
                                std::to_string(offset) + " of a " +
                                std::to_string(a.bytes) + "-byte device buffer";
          std::memset(a.base, kCanary, size_t(a.data - a.base));
          std::memset(end, kCanary, size_t(limit - end));
          return message;
        }
      }
    }
    return "";
  }

  /// Records an asynchronous error for synchronize(), as a GPU would.
  void note(const std::string &error) {
    if (pending.empty() && !error.empty()) {
      pending = error;
    }
  }

  EmulatorContext ctx;

private:
  struct Allocation {
    unsigned char *base;
    unsigned char *data;
    size_t bytes;
    size_t total;
  };
  std::vector<Allocation> allocations;
  std::string pending;
};

std::string EmulatorContext::launch(const char *function, Dim3 grid, Dim3 block,
                                    size_t sharedBytes, void **args) {
  std::string name = function ? function : "(null)";
  if (allowed) {
    bool listed = false;
    for (const char *const *f = allowed; *f; ++f) {
      listed = listed || name == *f;
    }
    if (!listed) {
      return "launcher '" + std::string(launcher) + "' launches '" + name +
             "', which its functions list does not name";
    }
  }
  tl::emu::Thunk fn = tl::emu::findKernel(name.c_str());
  if (!fn) {
    return "no device function '" + name +
           "' in the emulator: include its .cu in the test";
  }
  // A bad configuration fails the launch call itself, as on a GPU; what
  // goes wrong inside the kernel shows at the next synchronization.
  if (std::string error =
          tl::emu::checkLaunch(dim3(grid.x, grid.y, grid.z),
                               dim3(block.x, block.y, block.z), sharedBytes);
      !error.empty()) {
    return name + ": " + error;
  }
  std::string error =
      tl::emu::launch(fn, dim3(grid.x, grid.y, grid.z),
                      dim3(block.x, block.y, block.z), sharedBytes, args);
  if (error.empty()) {
    error = backend.checkCanaries();
  }
  // A GPU reports a kernel's faults at the next synchronization.
  if (!error.empty()) {
    backend.note(name + ": " + error);
  }
  return "";
}

std::string EmulatorContext::gemm(const GemmDesc &d) {
  // cuBLASLt's combinations (CudaKernel.h): A and B alike in f32, bf16 or
  // f16; C in f32 or their type.
  auto typeOk = [](DType t) {
    return t == DType::F32 || t == DType::BF16 || t == DType::F16;
  };
  if (!typeOk(d.aType) || d.bType != d.aType ||
      (d.cType != DType::F32 && d.cType != d.aType)) {
    return std::string("gemm: operands must be f32, bf16 or f16, A and B "
                       "alike and C in f32 or theirs, got ") +
           dtypeName(d.aType) + " x " + dtypeName(d.bType) + " -> " +
           dtypeName(d.cType);
  }
  if (d.m < 0 || d.n < 0 || d.k < 0 || d.batch < 1) {
    return "gemm: negative extent or batch below 1";
  }
  int64_t aRows = d.transA ? d.k : d.m, aCols = d.transA ? d.m : d.k;
  int64_t bRows = d.transB ? d.n : d.k, bCols = d.transB ? d.k : d.n;
  if (d.lda < std::max<int64_t>(aCols, 1) ||
      d.ldb < std::max<int64_t>(bCols, 1) ||
      d.ldc < std::max<int64_t>(d.n, 1)) {
    return "gemm: leading dimension below the row length (lda " +
           std::to_string(d.lda) + ", ldb " + std::to_string(d.ldb) + ", ldc " +
           std::to_string(d.ldc) + ")";
  }
  if (d.bias && d.beta != 0.0f) {
    return "gemm: a bias needs beta 0";
  }
  if (d.m == 0 || d.n == 0) {
    return "";
  }
  // Every matrix of every batch must lie in one device buffer.
  auto extent = [&](int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                    DType t) {
    int64_t last = (d.batch - 1) * stride + (rows - 1) * ld + cols;
    return size_t(std::max<int64_t>(last, 0)) * dtypeSize(t);
  };
  if ((d.k > 0 && !backend.contains(
                      d.a, extent(aRows, aCols, d.lda, d.strideA, d.aType))) ||
      (d.k > 0 && !backend.contains(
                      d.b, extent(bRows, bCols, d.ldb, d.strideB, d.bType))) ||
      !backend.contains(d.c, extent(d.m, d.n, d.ldc, d.strideC, d.cType)) ||
      (d.bias && !backend.contains(d.bias, size_t(d.n) * dtypeSize(d.cType))) ||
      (d.addend &&
       !backend.contains(d.addend, extent(d.m, d.n, d.ldc, d.strideC, d.cType)))) {
    return "gemm: a matrix (with its batch strides and leading dimension) "
           "extends past its device buffer";
  }
  auto input = [&](const void *base, DType t, int64_t offset) {
    float v = float(readElement(t, base, offset));
    if (t != DType::F32) {
      return v;
    }
    switch (d.halfCompute) {
    case HalfCompute::BF16:
      return bf16ToFloat(floatToBf16(v));
    case HalfCompute::FP16:
      return halfToFloat(floatToHalf(v));
    case HalfCompute::None:
      break;
    }
    return v;
  };
  std::vector<float> a(size_t(d.m * d.k)), b(size_t(d.n * d.k));
  for (int64_t batch = 0; batch < d.batch; ++batch) {
    // op(A) as m x k and op(B)^T as n x k, so the dot products are contiguous.
    for (int64_t i = 0; i < d.m; ++i) {
      for (int64_t p = 0; p < d.k; ++p) {
        int64_t offset =
            batch * d.strideA + (d.transA ? p * d.lda + i : i * d.lda + p);
        a[size_t(i * d.k + p)] = input(d.a, d.aType, offset);
      }
    }
    for (int64_t j = 0; j < d.n; ++j) {
      for (int64_t p = 0; p < d.k; ++p) {
        int64_t offset =
            batch * d.strideB + (d.transB ? j * d.ldb + p : p * d.ldb + j);
        b[size_t(j * d.k + p)] = input(d.b, d.bType, offset);
      }
    }
    for (int64_t i = 0; i < d.m; ++i) {
      for (int64_t j = 0; j < d.n; ++j) {
        const float *ar = &a[size_t(i * d.k)];
        const float *br = &b[size_t(j * d.k)];
        double sum = 0;
        for (int64_t p = 0; p < d.k; ++p) {
          sum += double(ar[p]) * double(br[p]);
        }
        int64_t offset = batch * d.strideC + i * d.ldc + j;
        double value = double(d.alpha) * sum;
        // beta 0 never reads C, which may hold garbage (even NaN).
        if (d.beta != 0.0f) {
          value += double(d.beta) *
                   readElement(d.cType, d.addend ? d.addend : d.c, offset);
        }
        if (d.bias) {
          value += readElement(d.cType, d.bias, j);
        }
        writeElement(d.cType, d.c, offset, float(value));
      }
    }
  }
  return "";
}

std::string EmulatorContext::memsetZero(void *device, size_t bytes) {
  if (bytes == 0) {
    return "";
  }
  if (!backend.contains(device, bytes)) {
    return "memsetZero: " + std::to_string(bytes) +
           " bytes extend past their device buffer";
  }
  std::memset(device, 0, bytes);
  return "";
}

std::string EmulatorContext::copy(void *target, const void *source,
                                  size_t bytes) {
  if (bytes == 0) {
    return "";
  }
  if (!backend.contains(target, bytes) || !backend.contains(source, bytes)) {
    return "copy: " + std::to_string(bytes) +
           " bytes extend past their device buffer";
  }
  auto *t = static_cast<unsigned char *>(target);
  auto *s = static_cast<const unsigned char *>(source);
  if (t < s + bytes && s < t + bytes) {
    return "copy: source and target overlap";
  }
  std::memcpy(target, source, bytes);
  return "";
}

//===----------------------------------------------------------------------===//
// Running a launcher.
//===----------------------------------------------------------------------===//

KernelCall hostCall(std::vector<HostTensor> &operands,
                    const std::vector<Attribute> &attributes) {
  KernelCall call;
  for (HostTensor &t : operands) {
    call.operands.push_back(t.tensor());
  }
  call.attributes = Attributes(attributes);
  return call;
}

/// Waits for `backend`, then takes its device error record into `taken`:
/// "" or the asynchronous failure. Without `taken`, a set record is the
/// failure, phrased as the runtime phrases it.
std::string finish(TestBackend &backend, DeviceErrorRecord *taken) {
  if (std::string async = backend.synchronize(); !async.empty()) {
    return async;
  }
  DeviceErrorRecord record{};
  if (std::string e = backend.context().takeErrorRecord(record); !e.empty()) {
    return e;
  }
  if (taken) {
    *taken = record;
    return "";
  }
  return describeDeviceError(record);
}

/// Runs the launcher of `kernel` on `backend` as plan step `step`, leaving
/// the results in `operands`; "" or the failure, which includes a set
/// device error record unless `taken` receives it.
std::string launchOn(TestBackend &backend, const std::string &kernel,
                     std::vector<HostTensor> &operands,
                     const std::vector<Attribute> &attributes, int step = -1,
                     DeviceErrorRecord *taken = nullptr) {
  const CudaKernelDef *def = findCudaKernel(kernel);
  if (!def) {
    return "no CUDA launcher '" + kernel + "'";
  }
  KernelCall check = hostCall(operands, attributes);
  if (def->arity >= 0 && size_t(def->arity) != operands.size()) {
    return "CUDA launcher '" + kernel + "' takes " +
           std::to_string(def->arity) + " operands, got " +
           std::to_string(operands.size());
  }
  if (std::string error = def->check(check); !error.empty()) {
    return "CUDA check of '" + kernel + "' rejects the launch: " + error;
  }
  CudaCall call;
  call.attributes = Attributes(attributes);
  call.context = &backend.context();
  call.step = step;
  for (HostTensor &t : operands) {
    Tensor device = t.tensor();
    device.data = backend.allocate(std::max<size_t>(t.bytes(), 1));
    if (!device.data) {
      return "cannot allocate " + std::to_string(t.bytes()) +
             " bytes of device memory";
    }
    backend.upload(device.data, t.data(), t.bytes());
    call.operands.push_back(device);
  }
  EmulatorBackend *emulated = std::string(backend.name()) == "emulator"
                                  ? static_cast<EmulatorBackend *>(&backend)
                                  : nullptr;
  if (emulated) {
    emulated->ctx.allowed = deviceFunctions(*def, emulated->ctx.half);
    emulated->ctx.launcher = def->name;
  }
  std::string error = def->launch(call);
  if (emulated) {
    emulated->ctx.allowed = nullptr;
    emulated->ctx.launcher = nullptr;
  }
  if (!error.empty()) {
    DeviceErrorRecord discarded{};
    finish(backend, &discarded);
    return "CUDA launcher '" + kernel + "' failed: " + error;
  }
  if (std::string async = finish(backend, taken); !async.empty()) {
    return "CUDA launch of '" + kernel + "' failed: " + async;
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    backend.download(operands[i].data(), call.operands[i].data,
                     operands[i].bytes());
  }
  return "";
}

} // namespace

//===----------------------------------------------------------------------===//
// Backends.
//===----------------------------------------------------------------------===//

std::unique_ptr<TestBackend> makeBackend(std::string &why) {
  const char *env = std::getenv("TAILOR_TEST_BACKEND");
  std::string name = env && *env ? env : "emulator";
  if (name == "emulator") {
    return std::make_unique<EmulatorBackend>();
  }
  if (name == "cuda") {
    return makeCudaDeviceBackend(why);
  }
  why = "unknown TAILOR_TEST_BACKEND '" + name + "'";
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Host tensors.
//===----------------------------------------------------------------------===//

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : dtype(dtype), shape(std::move(shape)) {
  storage.assign((bytes() + 7) / 8, 0);
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    n *= d;
  }
  return n;
}

size_t HostTensor::bytes() const { return size_t(numel()) * dtypeSize(dtype); }

double HostTensor::at(int64_t i) const { return readElement(dtype, data(), i); }

Tensor HostTensor::tensor() {
  Tensor t;
  t.data = data();
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

HostTensor randomF32(std::vector<int64_t> shape, uint64_t seed, float lo,
                     float hi) {
  HostTensor t(DType::F32, std::move(shape));
  uint64_t state = seed;
  float *p = t.as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    float u = float(splitmix64(state) >> 40) * (1.0f / 16777216.0f);
    p[i] = lo + (hi - lo) * u;
    if (p[i] >= hi) { // rounding can reach hi
      p[i] = lo;
    }
  }
  return t;
}

HostTensor randomInts(std::vector<int64_t> shape, uint64_t seed, int64_t lo,
                      int64_t hi, DType dtype) {
  HostTensor t(dtype, std::move(shape));
  uint64_t state = seed;
  uint64_t range = hi > lo ? uint64_t(hi - lo) : 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    writeInt(dtype, t.data(), i, lo + int64_t(splitmix64(state) % range));
  }
  return t;
}

HostTensor converted(const HostTensor &tensor, DType dtype) {
  HostTensor t(dtype, tensor.shape);
  if (dtype == tensor.dtype) {
    t.storage = tensor.storage;
    return t;
  }
  auto integral = [](DType d) {
    return d == DType::I64 || d == DType::I32 || d == DType::I16 ||
           d == DType::I8 || d == DType::U8 || d == DType::Bool;
  };
  bool exactInts = integral(tensor.dtype) && integral(dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (exactInts) {
      // Integers convert without a trip through double's 53 bits.
      int64_t v = readInt(tensor.dtype, tensor.data(), i);
      writeInt(dtype, t.data(), i, v);
    } else {
      writeElement(dtype, t.data(), i, tensor.at(i));
    }
  }
  return t;
}

//===----------------------------------------------------------------------===//
// Attributes.
//===----------------------------------------------------------------------===//

Attribute intAttr(const char *name, int64_t value) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.name = name;
  a.i = value;
  return a;
}

Attribute floatAttr(const char *name, double value) {
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.name = name;
  a.f = value;
  return a;
}

Attribute intsAttr(const char *name, std::vector<int64_t> values) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.name = name;
  a.ints = std::move(values);
  return a;
}

Attribute stringAttr(const char *name, std::string value) {
  Attribute a;
  a.kind = Attribute::Kind::String;
  a.name = name;
  a.s = std::move(value);
  return a;
}

//===----------------------------------------------------------------------===//
// Comparisons.
//===----------------------------------------------------------------------===//

std::vector<HostTensor> runCpu(const std::string &kernel,
                               std::vector<HostTensor> operands,
                               std::vector<Attribute> attributes) {
  const KernelDef *cpu = findCpuKernel(kernel);
  if (!cpu) {
    ADD_FAILURE() << "no CPU kernel '" << kernel << "'";
    return {};
  }
  for (HostTensor &t : operands) {
    if (t.dtype == DType::BF16) {
      t = converted(t, DType::F32);
    }
  }
  ThreadPool pool(2);
  KernelCall cpuCall = hostCall(operands, attributes);
  cpuCall.pool = &pool;
  if (std::string error = cpu->check(cpuCall); !error.empty()) {
    ADD_FAILURE() << "CPU check of '" << kernel
                  << "' rejects the launch: " << error;
    return {};
  }
  if (std::string error = cpu->run(cpuCall); !error.empty()) {
    ADD_FAILURE() << "CPU kernel '" << kernel << "' failed: " << error;
    return {};
  }
  return operands;
}

void expectMatchesCpu(TestBackend &backend, const std::string &kernel,
                      std::vector<HostTensor> operands,
                      std::vector<Attribute> attributes,
                      std::vector<size_t> compared, Tolerance tolerance) {
  // The CPU reference, on f32 copies of bf16 operands.
  std::vector<HostTensor> reference = runCpu(kernel, operands, attributes);
  if (reference.empty()) {
    return;
  }

  std::vector<HostTensor> result = operands;
  if (std::string error = launchOn(backend, kernel, result, attributes);
      !error.empty()) {
    ADD_FAILURE() << error << " (backend " << backend.name() << ")";
    return;
  }

  for (size_t index : compared) {
    if (index >= operands.size()) {
      ADD_FAILURE() << "compared operand " << index << " of '" << kernel
                    << "' does not exist";
      continue;
    }
    const HostTensor &got = result[index];
    const HostTensor &want = reference[index];
    int64_t bad = 0, worst = -1;
    double worstExcess = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      double g = got.at(i), w = want.at(i);
      double excess;
      if (std::isnan(g) || std::isnan(w)) {
        excess = std::isnan(g) && std::isnan(w)
                     ? 0
                     : std::numeric_limits<double>::infinity();
      } else if (g == w) {
        excess = 0; // also equal infinities
      } else {
        double diff = std::fabs(g - w);
        double allowed = tolerance.atol + tolerance.rtol * std::fabs(w);
        excess = diff <= allowed
                     ? 0
                     : (std::isfinite(diff)
                            ? diff / allowed
                            : std::numeric_limits<double>::infinity());
      }
      if (excess > 0) {
        ++bad;
        if (worst < 0 || excess > worstExcess) {
          worst = i;
          worstExcess = excess;
        }
      }
    }
    if (bad > 0) {
      ADD_FAILURE() << "kernel '" << kernel << "' (backend " << backend.name()
                    << ") operand " << index << " (" << dtypeName(got.dtype)
                    << " " <<
          [&] {
            std::string s = "[";
            for (size_t d = 0; d < got.shape.size(); ++d) {
              s += (d ? ", " : "") + std::to_string(got.shape[d]);
            }
            return s + "]";
          }()
                    << "): " << bad << " of " << got.numel()
                    << " elements differ beyond atol "
                    << formatDouble(tolerance.atol, 3) << " + rtol "
                    << formatDouble(tolerance.rtol, 3)
                    << " * |cpu|; worst at element " << worst << " "
                    << indexString(got.shape, worst) << ": cuda "
                    << formatDouble(got.at(worst)) << " vs cpu "
                    << formatDouble(want.at(worst));
    }
  }
}

std::vector<HostTensor> runShifted(TestBackend &backend,
                                   const std::string &kernel,
                                   std::vector<HostTensor> operands,
                                   std::vector<Attribute> attributes,
                                   size_t shift,
                                   std::pair<size_t, size_t> alias) {
  const CudaKernelDef *def = findCudaKernel(kernel);
  if (!def) {
    ADD_FAILURE() << "no CUDA launcher '" << kernel << "'";
    return operands;
  }
  CudaCall call;
  call.context = &backend.context();
  call.attributes = Attributes(std::move(attributes));
  for (size_t i = 0; i < operands.size(); ++i) {
    HostTensor &t = operands[i];
    Tensor d = t.tensor();
    if (alias.first != alias.second && i == alias.first) {
      d.data = call.operands[alias.second].data;
    } else {
      char *base = static_cast<char *>(backend.allocate(t.bytes() + 16));
      d.data = base + shift * dtypeSize(t.dtype);
      backend.upload(d.data, t.data(), t.bytes());
    }
    call.operands.push_back(d);
  }
  KernelCall check;
  check.operands = call.operands;
  check.attributes = call.attributes;
  EXPECT_EQ(def->check(check), "");
  EXPECT_EQ(def->launch(call), "");
  EXPECT_EQ(finish(backend, nullptr), "");
  for (size_t i = 0; i < operands.size(); ++i) {
    backend.download(operands[i].data(), call.operands[i].data,
                     operands[i].bytes());
  }
  return operands;
}

void expectSameBits(const HostTensor &got, const HostTensor &want) {
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < got.numel(); ++i) {
    EXPECT_EQ(got.at(i), want.at(i)) << "element " << i;
  }
}

std::vector<HostTensor> runCuda(TestBackend &backend, const std::string &kernel,
                                std::vector<HostTensor> operands,
                                std::vector<Attribute> attributes) {
  if (std::string error = launchOn(backend, kernel, operands, attributes);
      !error.empty()) {
    ADD_FAILURE() << error << " (backend " << backend.name() << ")";
  }
  return operands;
}

DeviceErrorRecord runCudaForError(TestBackend &backend,
                                  const std::string &kernel,
                                  std::vector<HostTensor> &operands,
                                  std::vector<Attribute> attributes, int step) {
  DeviceErrorRecord record{};
  if (std::string error =
          launchOn(backend, kernel, operands, attributes, step, &record);
      !error.empty()) {
    ADD_FAILURE() << error << " (backend " << backend.name() << ")";
  }
  return record;
}

std::string cudaLaunchError(TestBackend &backend, const std::string &kernel,
                            std::vector<HostTensor> operands,
                            std::vector<Attribute> attributes) {
  return launchOn(backend, kernel, operands, attributes);
}

std::string cpuRunError(const std::string &kernel,
                        std::vector<HostTensor> operands,
                        std::vector<Attribute> attributes) {
  const KernelDef *cpu = findCpuKernel(kernel);
  if (!cpu) {
    ADD_FAILURE() << "no CPU kernel '" << kernel << "'";
    return "";
  }
  for (HostTensor &t : operands) {
    if (t.dtype == DType::BF16) {
      t = converted(t, DType::F32);
    }
  }
  ThreadPool pool(2);
  KernelCall cpuCall = hostCall(operands, attributes);
  cpuCall.pool = &pool;
  if (std::string error = cpu->check(cpuCall); !error.empty()) {
    ADD_FAILURE() << "CPU check of '" << kernel
                  << "' rejects the launch: " << error;
    return "";
  }
  return cpu->run(cpuCall);
}

void expectDeviceError(TestBackend &backend, const std::string &kernel,
                       std::vector<HostTensor> operands,
                       std::vector<Attribute> attributes,
                       const DeviceErrorRecord &want) {
  std::vector<HostTensor> copy = operands;
  DeviceErrorRecord got =
      runCudaForError(backend, kernel, copy, attributes, want.site);
  EXPECT_EQ(got.code, want.code) << kernel;
  EXPECT_EQ(got.site, want.site) << kernel;
  EXPECT_EQ(got.value, want.value) << kernel;
  EXPECT_EQ(got.position, want.position) << kernel;
  EXPECT_EQ(got.bound, want.bound) << kernel;
  // Taking the record cleared it: the next launch starts clean.
  DeviceErrorRecord after{};
  EXPECT_EQ(backend.context().takeErrorRecord(after), "");
  EXPECT_EQ(after.code, tl::kNoError) << kernel;
  EXPECT_EQ(cudaLaunchError(backend, kernel, operands, attributes),
            "CUDA launch of '" + kernel +
                "' failed: " + describeDeviceError(want));
}

std::string checkCuda(const std::string &kernel,
                      std::vector<HostTensor> operands,
                      std::vector<Attribute> attributes) {
  const CudaKernelDef *def = findCudaKernel(kernel);
  if (!def) {
    return "no CUDA launcher '" + kernel + "'";
  }
  KernelCall call = hostCall(operands, attributes);
  return def->check(call);
}

void CudaKernelTest::SetUp() {
  std::string why;
  backend = makeBackend(why);
  if (!backend) {
    GTEST_SKIP() << why;
  }
}

} // namespace tailor::runtime::cuda::testing
