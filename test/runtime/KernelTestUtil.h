//===- KernelTestUtil.h - buffers and launches for CPU kernel tests -------===//
//
// Shared by the GoogleTest files of the training kernels: owned tensors,
// attributes, launches through the kernel table, tolerance checks, and the
// gradient files' two checks of a backward kernel (3 threads against 1, and
// central finite differences of its forward kernel).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TEST_RUNTIME_KERNELTESTUTIL_H
#define TAILOR_TEST_RUNTIME_KERNELTESTUTIL_H

#include "runtime/cpu/Kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace tailor::runtime::testing {

/// An owned dense tensor of any runtime dtype (bool and 8-bit types are read
/// as bytes); storage is 8-byte aligned like an arena buffer.
class Buffer {
public:
  Buffer(DType dtype, std::vector<int64_t> shape)
      : dtype(dtype), shape(std::move(shape)),
        storage((numel() * dtypeSize(dtype) + 7) / 8 + 1, 0) {}

  int64_t numel() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                           std::multiplies<int64_t>());
  }
  Tensor tensor() const {
    Tensor t;
    t.data = const_cast<uint64_t *>(storage.data());
    t.dtype = dtype;
    t.shape = shape;
    return t;
  }
  template <typename T> T *data() {
    return reinterpret_cast<T *>(storage.data());
  }
  /// Element i as a double, whatever the dtype.
  double at(int64_t i) const {
    const void *p = storage.data();
    switch (dtype) {
    case DType::F32:
      return static_cast<const float *>(p)[i];
    case DType::F64:
      return static_cast<const double *>(p)[i];
    case DType::I32:
      return static_cast<const int32_t *>(p)[i];
    case DType::I64:
      return static_cast<double>(static_cast<const int64_t *>(p)[i]);
    default:
      return static_cast<const uint8_t *>(p)[i];
    }
  }
  void set(int64_t i, double v) {
    void *p = storage.data();
    switch (dtype) {
    case DType::F32:
      static_cast<float *>(p)[i] = static_cast<float>(v);
      break;
    case DType::F64:
      static_cast<double *>(p)[i] = v;
      break;
    case DType::I32:
      static_cast<int32_t *>(p)[i] = static_cast<int32_t>(v);
      break;
    case DType::I64:
      static_cast<int64_t *>(p)[i] = static_cast<int64_t>(v);
      break;
    default:
      static_cast<uint8_t *>(p)[i] = static_cast<uint8_t>(v);
      break;
    }
  }
  bool sameBytes(const Buffer &other) const {
    return numel() == other.numel() &&
           std::memcmp(storage.data(), other.storage.data(),
                       numel() * dtypeSize(dtype)) == 0;
  }

  DType dtype;
  std::vector<int64_t> shape;

private:
  std::vector<uint64_t> storage;
};

/// Uniform values in [lo, hi) drawn from `seed`; integer dtypes get their
/// floor.
inline Buffer randomBuffer(std::vector<int64_t> shape, double lo, double hi,
                           unsigned seed, DType dtype = DType::F32) {
  Buffer b(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < b.numel(); ++i) {
    double v = dist(rng);
    b.set(i, dtype == DType::F32 ? v : std::floor(v));
  }
  return b;
}

inline Buffer filled(DType dtype, std::vector<int64_t> shape,
                     std::vector<double> values) {
  Buffer b(dtype, std::move(shape));
  for (int64_t i = 0; i < b.numel(); ++i) {
    b.set(i, values[i]);
  }
  return b;
}

inline Buffer scalar(DType dtype, double value) {
  return filled(dtype, {}, {value});
}

inline std::vector<double> values(const Buffer &b) {
  std::vector<double> v(b.numel());
  for (int64_t i = 0; i < b.numel(); ++i) {
    v[i] = b.at(i);
  }
  return v;
}

inline Attribute intAttr(const char *name, int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.name = name;
  a.i = v;
  return a;
}
inline Attribute floatAttr(const char *name, double v) {
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.name = name;
  a.f = v;
  return a;
}
inline Attribute intsAttr(const char *name, std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.name = name;
  a.ints = std::move(v);
  return a;
}
inline Attribute stringAttr(const char *name, std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::String;
  a.name = name;
  a.s = std::move(v);
  return a;
}

inline ThreadPool &pool1() {
  static ThreadPool pool(1);
  return pool;
}
inline ThreadPool &pool3() {
  static ThreadPool pool(3);
  return pool;
}
inline ThreadPool &pool4() {
  static ThreadPool pool(4);
  return pool;
}

inline KernelCall makeCall(const std::vector<Buffer *> &operands,
                           std::vector<Attribute> attrs, ThreadPool *pool) {
  KernelCall call;
  for (Buffer *b : operands) {
    call.operands.push_back(b->tensor());
  }
  call.attributes = Attributes(std::move(attrs));
  call.pool = pool;
  return call;
}

/// What check() says about this launch.
inline std::string checkKernel(const char *name,
                               const std::vector<Buffer *> &ops,
                               std::vector<Attribute> attrs = {}) {
  const KernelDef *def = findCpuKernel(name);
  if (!def) {
    return std::string("no kernel ") + name;
  }
  return def->check(makeCall(ops, std::move(attrs), nullptr));
}

/// Checks (which must pass) and runs; returns run()'s message.
inline std::string runKernel(const char *name, const std::vector<Buffer *> &ops,
                             std::vector<Attribute> attrs = {},
                             ThreadPool *pool = &pool3()) {
  const KernelDef *def = findCpuKernel(name);
  if (!def) {
    ADD_FAILURE() << "no kernel " << name;
    return "missing";
  }
  KernelCall call = makeCall(ops, std::move(attrs), pool);
  std::string error = def->check(call);
  EXPECT_EQ(error, "") << name;
  if (!error.empty()) {
    return error;
  }
  return def->run(call);
}

/// |got - want| <= atol + rtol |want|; NaN matches NaN, inf matches inf.
inline ::testing::AssertionResult near(double got, double want, double rtol,
                                       double atol) {
  if (std::isnan(want) ? std::isnan(got)
      : std::isinf(want)
          ? got == want
          : std::fabs(got - want) <= atol + rtol * std::fabs(want)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "got " << got << ", want " << want << " (rtol " << rtol << ", atol "
         << atol << ")";
}

/// Every element near() its reference; reports the first five misses.
inline void expectAllNear(const Buffer &got, const std::vector<double> &want,
                          double rtol, double atol, const std::string &what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  int failures = 0;
  for (int64_t i = 0; i < got.numel() && failures < 5; ++i) {
    auto r = near(got.at(i), want[i], rtol, atol);
    if (!r) {
      ADD_FAILURE() << what << " element " << i << ": " << r.message();
      ++failures;
    }
  }
}

/// Runs `name` on one copy of `operands` on 1 thread and on another on 3;
/// both runs must succeed and leave every operand with the same bits.
inline void
expectSameBitsOnOneAndThreeThreads(const char *name,
                                   const std::vector<Buffer> &operands,
                                   const std::vector<Attribute> &attrs = {}) {
  std::vector<Buffer> one = operands, three = operands;
  std::vector<Buffer *> oneOps, threeOps;
  for (size_t i = 0; i < one.size(); ++i) {
    oneOps.push_back(&one[i]);
    threeOps.push_back(&three[i]);
  }
  ASSERT_EQ(runKernel(name, oneOps, attrs, &pool1()), "") << name;
  ASSERT_EQ(runKernel(name, threeOps, attrs, &pool3()), "") << name;
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(one[i].sameBytes(three[i])) << name << " operand " << i;
  }
}

//===----------------------------------------------------------------------===//
// Backward kernels
//===----------------------------------------------------------------------===//

/// Runs a backward kernel on 3 threads, then again on 1 from the same
/// starting contents of the operands from `firstOut` on; both runs must
/// succeed and write the same bits (a workspace whose slots go to workers
/// by thread count aside). Leaves the 1-thread result.
inline void runGrad(const char *name, const std::vector<Buffer *> &ops,
                    size_t firstOut, const std::vector<Attribute> &attrs = {},
                    bool lastIsWorkspace = false) {
  std::vector<Buffer> start, three;
  for (size_t i = firstOut; i < ops.size(); ++i) {
    start.push_back(*ops[i]);
  }
  ASSERT_EQ(runKernel(name, ops, attrs, &pool3()), "") << name;
  for (size_t i = firstOut; i < ops.size(); ++i) {
    three.push_back(*ops[i]);
    *ops[i] = start[i - firstOut];
  }
  ASSERT_EQ(runKernel(name, ops, attrs, &pool1()), "") << name;
  for (size_t i = firstOut; i < ops.size() - lastIsWorkspace; ++i) {
    EXPECT_TRUE(ops[i]->sameBytes(three[i - firstOut]))
        << name << ": operand " << i << " differs between 3 and 1 threads";
  }
}

/// Central differences of L = sum(weight * ops[out]) after the forward
/// kernel `name`, with respect to every element of ops[wrt].
inline std::vector<double> finiteDiff(const char *name,
                                      std::vector<Buffer *> ops, size_t out,
                                      size_t wrt, const Buffer &weight,
                                      const std::vector<Attribute> &attrs) {
  constexpr double kStep = 1e-2;
  Buffer &x = *ops[wrt];
  auto loss = [&] {
    EXPECT_EQ(runKernel(name, ops, attrs, &pool1()), "") << name;
    double sum = 0;
    for (int64_t i = 0; i < weight.numel(); ++i) {
      sum += weight.at(i) * ops[out]->at(i);
    }
    return sum;
  };
  std::vector<double> grad(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) {
    double x0 = x.at(i);
    x.set(i, x0 + kStep);
    double hi = x.at(i), lossHi = loss();
    x.set(i, x0 - kStep);
    double lo = x.at(i), lossLo = loss();
    x.set(i, x0);
    grad[i] = (lossHi - lossLo) / (hi - lo);
  }
  return grad;
}

/// Expects `got` to match finite differences of the forward kernel at 1e-2
/// relative and 1e-3 absolute: the f32 forward and the O(h^2) truncation
/// leave about 1e-4.
inline void expectMatchesFd(const Buffer &got, const char *forward,
                            std::vector<Buffer *> ops, size_t out, size_t wrt,
                            const Buffer &weight,
                            const std::vector<Attribute> &attrs = {}) {
  expectAllNear(got, finiteDiff(forward, ops, out, wrt, weight, attrs), 1e-2,
                1e-3,
                std::string(forward) + " finite differences, operand " +
                    std::to_string(wrt));
}

//===----------------------------------------------------------------------===//
// Document masking (sample packing) fixtures, shared by the attention
// forward and backward tests.
//===----------------------------------------------------------------------===//

/// Rows [s0, s0 + len) of batch entry b of a [B, H, T, X] tensor, as
/// [1, H, len, X].
inline Buffer segmentRows(const Buffer &x, int64_t b, int64_t s0,
                          int64_t len) {
  int64_t h = x.shape[1], t = x.shape[2], w = x.shape[3];
  Buffer out(x.dtype, {1, h, len, w});
  for (int64_t hi = 0; hi < h; ++hi) {
    for (int64_t r = 0; r < len; ++r) {
      for (int64_t i = 0; i < w; ++i) {
        out.set((hi * len + r) * w + i,
                x.at(((b * h + hi) * t + s0 + r) * w + i));
      }
    }
  }
  return out;
}

/// Packed sequences of T = 70 (two row blocks): batch 0 holds examples of
/// 10, 50 and 10 tokens, batch 1 of 64 (a whole block) and 6. Returns the
/// [B, T] positions and each batch entry's example starts (end included).
inline Buffer packedPositions(std::vector<std::vector<int64_t>> &starts) {
  starts = {{0, 10, 60, 70}, {0, 64, 70}};
  Buffer positions(DType::I64, {2, 70});
  for (int64_t b = 0; b < 2; ++b) {
    for (size_t e = 0; e + 1 < starts[b].size(); ++e) {
      for (int64_t t = starts[b][e]; t < starts[b][e + 1]; ++t) {
        positions.set(b * 70 + t, static_cast<double>(t - starts[b][e]));
      }
    }
  }
  return positions;
}

} // namespace tailor::runtime::testing

#endif // TAILOR_TEST_RUNTIME_KERNELTESTUTIL_H
