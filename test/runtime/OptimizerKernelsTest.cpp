//===- OptimizerKernelsTest.cpp - accumulation, norm, optimizer kernels ---===//
//
// The kernels of runtime/cpu/OptimizerKernels.cpp against plain double loops
// written here, at explicit tolerances (1e-6 relative for the optimizers over
// several steps), plus golden values printed by PyTorch 2.x
// (torch.optim.AdamW / SGD with foreach=False) that pin the operation order.
// Kernels run on a 3-thread pool unless a test says otherwise; one test
// checks that 3 threads and 1 give the same bits.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

namespace {

/// Every f32 element of `got` within `maxUlps` units in the last place of
/// `want` rounded to f32 (0: the same bits).
void expectUlpsEqual(const Buffer &got, const std::vector<double> &want,
                     int64_t maxUlps, const std::string &what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  auto ordered = [](float f) {
    int32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    return bits < 0 ? int64_t(INT32_MIN) - bits : int64_t(bits);
  };
  for (int64_t i = 0; i < got.numel(); ++i) {
    auto g = static_cast<float>(got.at(i));
    auto w = static_cast<float>(want[i]);
    EXPECT_LE(std::abs(ordered(g) - ordered(w)), maxUlps)
        << what << " element " << i << ": got " << g << ", want " << w;
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// zero, accumulate, global_norm
//===----------------------------------------------------------------------===//

TEST(OptimizerKernelsTest, ZeroClearsEveryByteOfItsOperandAndNoMore) {
  // Reference: a byte array of the operand's size, every byte 0. The
  // operand lies inside a larger allocation whose guard bytes on both sides
  // must stay as they were; sizes cover one element, one pool chunk's edge
  // and several chunks with a tail, for dtypes of 1, 2, 4 and 8 bytes.
  for (DType dtype : {DType::U8, DType::BF16, DType::F32, DType::I64}) {
    for (int64_t n : {int64_t(1), int64_t(32768), int64_t(3 * 65536 + 7)}) {
      size_t bytes = static_cast<size_t>(n) * dtypeSize(dtype);
      std::vector<uint64_t> storage((bytes + 7) / 8 + 2);
      auto *raw = reinterpret_cast<uint8_t *>(storage.data());
      for (size_t i = 0; i < storage.size() * 8; ++i) {
        raw[i] = static_cast<uint8_t>(0x80 | (i * 37 % 127));
      }
      std::vector<uint8_t> before(raw, raw + storage.size() * 8);
      KernelCall call;
      Tensor target;
      target.data = raw + 8;
      target.dtype = dtype;
      target.shape = {n};
      call.operands.push_back(target);
      call.pool = &pool3();
      const KernelDef *zero = findCpuKernel("zero");
      ASSERT_NE(zero, nullptr);
      ASSERT_EQ(zero->check(call), "");
      ASSERT_EQ(zero->run(call), "");
      std::vector<uint8_t> want = before;
      std::fill(want.begin() + 8, want.begin() + 8 + bytes, 0);
      ASSERT_EQ(std::vector<uint8_t>(raw, raw + storage.size() * 8), want)
          << dtypeName(dtype) << " x " << n;
    }
  }
}

TEST(OptimizerKernelsTest, ZeroTakesOneOperandOfAnyShape) {
  Buffer scalarTarget = randomBuffer({}, 1, 2, 73);
  ASSERT_EQ(runKernel("zero", {&scalarTarget}), "");
  EXPECT_EQ(scalarTarget.at(0), 0.0);
  Buffer a(DType::F32, {2, 3}), b(DType::F32, {2, 3});
  EXPECT_EQ(checkKernel("zero", {&a, &b}), "expected 1 operands, got 2");
}


TEST(OptimizerKernelsTest, AccumulateAddsIntoTarget) {
  Buffer value = randomBuffer({3, 70001}, -1, 1, 71);
  Buffer target = randomBuffer({3, 70001}, -1, 1, 72);
  Buffer before = target;
  ASSERT_EQ(runKernel("accumulate", {&value, &target}), "");
  for (int64_t i = 0; i < value.numel(); ++i) {
    ASSERT_EQ(static_cast<float>(target.at(i)),
              static_cast<float>(before.at(i)) +
                  static_cast<float>(value.at(i)))
        << "element " << i;
  }
}

TEST(OptimizerKernelsTest, GlobalNormOverSeveralTensors) {
  // A rank-0 tensor, an empty one, one below a chunk and one long enough to
  // span several batches of chunks.
  std::vector<Buffer> tensors;
  tensors.push_back(scalar(DType::F32, -3));
  tensors.push_back(Buffer(DType::F32, {0, 5}));
  tensors.push_back(randomBuffer({17, 33}, -2, 2, 81));
  tensors.push_back(randomBuffer({16384 * 300 + 5}, -1, 1, 82));
  tensors.push_back(randomBuffer({4, 4}, -10, 10, 83));
  double sum = 0;
  std::vector<Buffer *> ops;
  for (Buffer &t : tensors) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      sum += t.at(i) * t.at(i);
    }
    ops.push_back(&t);
  }
  Buffer out(DType::F32, {});
  ops.push_back(&out);
  ASSERT_EQ(runKernel("global_norm", ops), "");
  EXPECT_TRUE(near(out.at(0), std::sqrt(sum), 1e-6, 0));

  Buffer single = filled(DType::F32, {2}, {3, 4});
  ASSERT_EQ(runKernel("global_norm", {&single, &out}), "");
  EXPECT_EQ(out.at(0), 5.0);
}

//===----------------------------------------------------------------------===//
// adamw
//===----------------------------------------------------------------------===//

namespace {

struct AdamWConfig {
  double lr, beta1, beta2, eps, weightDecay, gradScale;
};

std::vector<Attribute> adamwAttrs(const AdamWConfig &c) {
  return {floatAttr("beta1", c.beta1), floatAttr("beta2", c.beta2),
          floatAttr("epsilon", c.eps),
          floatAttr("weight_decay", c.weightDecay)};
}

/// The golden tests' data, a sequence with 16-bit fractions that the
/// Python script generating the expected values computes exactly alike:
/// scale * (((i * 40503 + s * 7919 + 12345) mod 65536) / 32768 - 1).
Buffer goldenInput(int64_t n, int64_t s, double scale) {
  Buffer b(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i) {
    b.set(i,
          scale * (static_cast<double>((i * 40503 + s * 7919 + 12345) % 65536) /
                       32768.0 -
                   1.0));
  }
  return b;
}

} // namespace

TEST(OptimizerKernelsTest, AdamWFiveStepsMatchDoubleReference) {
  // beta1 = 0.3 takes torch's other lerp formula (weight 0.7 >= 0.5).
  for (AdamWConfig c : {AdamWConfig{1e-3, 0.9, 0.999, 1e-8, 0.0, 1.0},
                        AdamWConfig{3e-3, 0.9, 0.95, 1e-6, 0.1, 0.25},
                        AdamWConfig{1e-2, 0.3, 0.99, 1e-8, 0.01, 1.0}}) {
    int64_t n = 20011;
    Buffer param = randomBuffer({n}, -1, 1, 91);
    Buffer expAvg(DType::F32, {n}), expAvgSq(DType::F32, {n});
    Buffer lr = scalar(DType::F32, c.lr);
    Buffer gradScale = scalar(DType::F32, c.gradScale);
    std::vector<double> p = values(param), m(n, 0.0), v(n, 0.0);
    double lrValue = lr.at(0);
    for (int64_t step = 1; step <= 5; ++step) {
      Buffer grad = randomBuffer({n}, -1, 1, 100 + step);
      Buffer stepBuf = scalar(DType::I64, static_cast<double>(step));
      double bc1 = 1 - std::pow(c.beta1, step);
      double bc2 = 1 - std::pow(c.beta2, step);
      for (int64_t i = 0; i < n; ++i) {
        double g = grad.at(i) * gradScale.at(0);
        p[i] *= 1 - lrValue * c.weightDecay;
        m[i] += (1 - c.beta1) * (g - m[i]);
        v[i] = v[i] * c.beta2 + (1 - c.beta2) * g * g;
        double denom = std::sqrt(v[i]) / std::sqrt(bc2) + c.eps;
        p[i] += -(lrValue / bc1) * m[i] / denom;
      }
      ASSERT_EQ(runKernel("adamw",
                          {&param, &grad, &expAvg, &expAvgSq, &lr, &stepBuf,
                           &gradScale},
                          adamwAttrs(c)),
                "");
      std::string what =
          "beta1 " + std::to_string(c.beta1) + " step " + std::to_string(step);
      // 1e-6 relative, with absolute floors for results that cancel (a
      // parameter near 0, exp_avg = lerp of terms up to |g| <= 1): 1e-6 of
      // one update (~lr) and 1e-7 (~2 f32 ulps of 1).
      expectAllNear(param, p, 1e-6, 1e-6 * c.lr, what + " param");
      expectAllNear(expAvg, m, 1e-6, 1e-7, what + " exp_avg");
      expectAllNear(expAvgSq, v, 1e-6, 1e-12, what + " exp_avg_sq");
      expectAllNear(grad, std::vector<double>(n, 0.0), 0, 0, what + " grad");
    }
  }
}

TEST(OptimizerKernelsTest, AdamWMatchesTorch) {
  // torch.optim.AdamW(lr=2**-7, betas=(0.9, 0.999), eps=1e-8,
  // weight_decay=0.1, foreach=False), three steps on goldenInput's data,
  // printed by PyTorch 2.x. The kernel mirrors torch's operation order, so
  // the one difference left is torch's (MKL) sqrt, which can be an ulp off
  // the correctly rounded one; on these values it is not, and every element
  // matches bit for bit.
  const int64_t n = 32;
  Buffer param = goldenInput(n, 0, 1.5);
  Buffer expAvg(DType::F32, {n}), expAvgSq(DType::F32, {n});
  Buffer lr = scalar(DType::F32, 1.0 / 128);
  Buffer gradScale = scalar(DType::F32, 1);
  for (int64_t step = 1; step <= 3; ++step) {
    Buffer grad = goldenInput(n, step, 2);
    Buffer stepBuf = scalar(DType::I64, static_cast<double>(step));
    ASSERT_EQ(runKernel("adamw",
                        {&param, &grad, &expAvg, &expAvgSq, &lr, &stepBuf,
                         &gradScale},
                        adamwAttrs({0, 0.9, 0.999, 1e-8, 0.1, 1})),
              "");
  }
  expectUlpsEqual(param,
                  {-0.914016247,  0.912643254,  -0.248035982, -1.34726715,
                   0.463921636,   -0.653368473, 1.20963728,   0.0206589475,
                   -1.07883334,   0.732033789,  -0.39691928,  1.47909617,
                   0.290118188,   -0.813687503, 1.01422131,   -0.145830736,
                   -1.24481273,   0.566057384,  -0.556346774, 1.31234539,
                   0.123303927,   -0.97714448,  0.849215567,  -0.31157586,
                   -1.41127241,   0.400188535,  -0.714578271, 1.11576545,
                   -0.0433667563, -1.14253271,  0.668234289,  -0.458952188},
                  0, "param");
  expectUlpsEqual(expAvg,
                  {-0.0666549057, -0.156713918,  0.189227059,   -0.224831969,
                   0.0451090075,  0.0310499892,  -0.383009017,  0.286931962,
                   -0.127127081,  0.142813891,   0.128754884,   -0.285304129,
                   0.384636849,   -0.0294221826, -0.119481213,  0.226459771,
                   -0.187599257,  0.0823417455,  0.068282716,   -0.34577632,
                   0.324164659,   -0.0898943543, -0.179953352,  0.165987611,
                   -0.248071417,  0.0218695719,  0.00781055167, -0.0822484717,
                   0.263692498,   -0.150366515,  0.119574457,   0.105515443},
                  0, "exp_avg");
  expectUlpsEqual(
      expAvgSq,
      {0.000700929202, 0.00793327484,  0.0017908765,   0.00269988668,
       0.00748936413,  0.000486431411, 0.00674088905,  0.00361686805,
       0.00122403144,  0.00847156718,  0.00105106551,  0.00400367659,
       0.0062219915,   0.00052730809,  0.0075983326,   0.00239483151,
       0.00204559625,  0.00777177373,  0.00060971675,  0.0056059286,
       0.00451772939,  0.000866647169, 0.00819968432,  0.00147125719,
       0.00316562271,  0.00737044262,  0.000466830272, 0.00737653393,
       0.00311192963,  0.00150444848,  0.00816732738,  0.000846145209},
      0, "exp_avg_sq");
}

TEST(OptimizerKernelsTest, AdamWRejectsStepZero) {
  Buffer param(DType::F32, {4}), grad(DType::F32, {4}), m(DType::F32, {4}),
      v(DType::F32, {4});
  Buffer lr = scalar(DType::F32, 1e-3), step = scalar(DType::I64, 0),
         scale = scalar(DType::F32, 1);
  EXPECT_EQ(runKernel("adamw", {&param, &grad, &m, &v, &lr, &step, &scale},
                      adamwAttrs({0, 0.9, 0.999, 1e-8, 0, 1})),
            "adamw step is 0, expected a 1-based update count");
}

//===----------------------------------------------------------------------===//
// sgd
//===----------------------------------------------------------------------===//

TEST(OptimizerKernelsTest, SgdThreeStepsMatchDoubleReference) {
  struct Config {
    double momentum, weightDecay;
    int64_t nesterov;
    double gradScale;
  };
  for (Config c : {Config{0, 0, 0, 1}, Config{0, 0.05, 0, 0.5},
                   Config{0.9, 0, 0, 1}, Config{0.9, 0, 1, 1},
                   Config{0.8, 0.01, 1, 0.5}, Config{0.9, 0.01, 0, 1}}) {
    int64_t n = 40009;
    Buffer param = randomBuffer({n}, -1, 1, 111);
    // With momentum 0 the buffer must come back untouched.
    Buffer buf = c.momentum == 0
                     ? filled(DType::F32, {n}, std::vector<double>(n, 7.0))
                     : Buffer(DType::F32, {n});
    Buffer before = buf;
    Buffer lr = scalar(DType::F32, 0.05);
    Buffer gradScale = scalar(DType::F32, c.gradScale);
    std::vector<double> p = values(param), b(n, 0.0);
    for (int step = 0; step < 3; ++step) {
      Buffer grad = randomBuffer({n}, -1, 1, 120 + step);
      for (int64_t i = 0; i < n; ++i) {
        double g = grad.at(i) * c.gradScale + c.weightDecay * p[i];
        if (c.momentum != 0) {
          b[i] = c.momentum * b[i] + g;
          g = c.nesterov ? g + c.momentum * b[i] : b[i];
        }
        p[i] -= lr.at(0) * g;
      }
      ASSERT_EQ(runKernel("sgd", {&param, &grad, &buf, &lr, &gradScale},
                          {floatAttr("momentum", c.momentum),
                           floatAttr("weight_decay", c.weightDecay),
                           intAttr("nesterov", c.nesterov)}),
                "");
      std::string what = "momentum " + std::to_string(c.momentum) +
                         " nesterov " + std::to_string(c.nesterov) + " wd " +
                         std::to_string(c.weightDecay) + " step " +
                         std::to_string(step);
      // 1e-6 relative, with absolute floors for results that cancel: the
      // buffer sums terms up to |g| / (1 - momentum) ~ 3, the update is
      // lr times that.
      expectAllNear(param, p, 1e-6, 1e-7, what);
      expectAllNear(grad, std::vector<double>(n, 0.0), 0, 0, what + " grad");
      if (c.momentum != 0) {
        expectAllNear(buf, b, 1e-6, 5e-7, what + " buffer");
      } else {
        EXPECT_TRUE(buf.sameBytes(before)) << what;
      }
    }
  }
}

TEST(OptimizerKernelsTest, SgdMatchesTorch) {
  // torch.optim.SGD(lr=0.05, momentum=0.9, weight_decay=0.3, nesterov=True,
  // foreach=False) on AdamWMatchesTorch's data. A large weight decay and an
  // lr that is not a power of two make every fused multiply-add show.
  const int64_t n = 32;
  Buffer param = goldenInput(n, 0, 1.5);
  Buffer buf(DType::F32, {n});
  Buffer lr = scalar(DType::F32, 0.05);
  Buffer gradScale = scalar(DType::F32, 1);
  for (int64_t step = 1; step <= 3; ++step) {
    Buffer grad = goldenInput(n, step, 2);
    ASSERT_EQ(
        runKernel("sgd", {&param, &grad, &buf, &lr, &gradScale},
                  {floatAttr("momentum", 0.9), floatAttr("weight_decay", 0.3),
                   intAttr("nesterov", 1)}),
        "");
  }
  expectUlpsEqual(param,
                  {-0.681696951, 0.896156311,  -0.427059293, -0.839104772,
                   0.207578406,  -0.584467232, 1.65060067,   -0.329829514,
                   -0.741875052, 0.30480814,   -0.487237364, 1.74783051,
                   -0.232599735, -0.644645274, 0.933207989,  -0.390007585,
                   -0.802053154, 0.244630069,  -0.547415495, 1.68765247,
                   -0.292777807, -0.704823375, 0.873029768,  -0.450185716,
                   -0.862231374, 0.184451967,  -0.607593596, 0.970259666,
                   -0.352955908, -0.765001416, 0.281681716,  -0.510363817},
                  0, "param");
  expectUlpsEqual(buf, {-1.34229994, -0.906149089, 1.68354189,   -3.21276712,
                        0.709383845, -0.186925173, -2.72882295,  2.83891678,
                        -2.05739236, 1.86475861,   0.968449652,  -1.5734483,
                        3.99429154,  -0.902017474, -0.465866506, 2.12382436,
                        -2.77248478, 1.14966619,   0.253357321,  -2.2885406,
                        3.27919912,  -1.61710978,  -1.18095875,  1.40873206,
                        -3.48757672, 0.434573889,  -0.461734951, -0.0255841017,
                        2.56410694,  -2.33220196,  1.58994877,   0.693639815},
                  0, "momentum_buffer");
}

//===----------------------------------------------------------------------===//
// Threads, table, checks
//===----------------------------------------------------------------------===//

TEST(OptimizerKernelsTest, ThreeThreadsMatchOneThreadBitForBit) {
  int64_t e = 300007;
  expectSameBitsOnOneAndThreeThreads(
      "accumulate",
      {randomBuffer({e}, -1, 1, 134), randomBuffer({e}, -1, 1, 135)});
  expectSameBitsOnOneAndThreeThreads(
      "global_norm", {randomBuffer({e * 17}, -1, 1, 136),
                      randomBuffer({e}, -1, 1, 137), Buffer(DType::F32, {})});
  expectSameBitsOnOneAndThreeThreads(
      "adamw",
      {randomBuffer({e}, -1, 1, 138), randomBuffer({e}, -1, 1, 139),
       randomBuffer({e}, -0.1, 0.1, 140), randomBuffer({e}, 0, 0.01, 141),
       scalar(DType::F32, 1e-3), scalar(DType::I64, 3),
       scalar(DType::F32, 0.5)},
      adamwAttrs({0, 0.9, 0.999, 1e-8, 0.01, 1}));
  expectSameBitsOnOneAndThreeThreads(
      "sgd",
      {randomBuffer({e}, -1, 1, 142), randomBuffer({e}, -1, 1, 143),
       randomBuffer({e}, -1, 1, 144), scalar(DType::F32, 1e-2),
       scalar(DType::F32, 1)},
      {floatAttr("momentum", 0.9), floatAttr("weight_decay", 0.01),
       intAttr("nesterov", 1)});
}

TEST(OptimizerKernelsTest, KernelsAreRegisteredWithTheirArity) {
  std::vector<std::pair<const char *, int>> kernels = {
      {"accumulate", 2}, {"global_norm", -1}, {"adamw", 7}, {"sgd", 5},
      {"zero", 1}};
  for (auto [name, arity] : kernels) {
    const KernelDef *def = findCpuKernel(name);
    ASSERT_NE(def, nullptr) << name;
    EXPECT_EQ(def->arity, arity) << name;
  }
}

TEST(OptimizerKernelsTest, CheckRejectsMalformedLaunches) {
  Buffer x(DType::F32, {3, 5}), yBad(DType::F32, {15});
  Buffer a(DType::F32, {3, 5}), ad(DType::F64, {3, 5});
  EXPECT_EQ(checkKernel("accumulate", {&x, &a}), "");
  EXPECT_EQ(checkKernel("accumulate", {&x, &ad}),
            "operand 1 must be f32, got f64");
  EXPECT_EQ(checkKernel("accumulate", {&x, &yBad}),
            "operand 1 must have shape [3, 5], got [15]");

  Buffer norm(DType::F32, {}), normBad(DType::F32, {1});
  EXPECT_EQ(checkKernel("global_norm", {&x, &a, &norm}), "");
  EXPECT_EQ(checkKernel("global_norm", {&norm}),
            "expected at least 2 operands (one or more tensors and the "
            "output), got 1");
  EXPECT_EQ(checkKernel("global_norm", {&x, &ad, &norm}),
            "operand 1 must be f32, got f64");
  EXPECT_EQ(checkKernel("global_norm", {&x, &normBad}),
            "operand 1 must have shape [], got [1]");

  Buffer p(DType::F32, {6}), g(DType::F32, {6}), m(DType::F32, {6}),
      v(DType::F32, {6}), vBad(DType::F32, {7}), lr(DType::F32, {}),
      step(DType::I64, {}), stepF(DType::F32, {}), scale(DType::F32, {});
  std::vector<Attribute> adamw = adamwAttrs({0, 0.9, 0.999, 1e-8, 0.01, 1});
  EXPECT_EQ(checkKernel("adamw", {&p, &g, &m, &v, &lr, &step, &scale}, adamw),
            "");
  EXPECT_EQ(
      checkKernel("adamw", {&p, &g, &m, &vBad, &lr, &step, &scale}, adamw),
      "operand 3 must have shape [6], got [7]");
  EXPECT_EQ(checkKernel("adamw", {&p, &g, &m, &v, &lr, &stepF, &scale}, adamw),
            "operand 5 must be i64, got f32");
  EXPECT_EQ(checkKernel("adamw", {&p, &g, &m, &v, &p, &step, &scale}, adamw),
            "operand 4 must have shape [], got [6]");
  EXPECT_EQ(checkKernel("adamw", {&p, &g, &m, &v, &lr, &step}, adamw),
            "expected 7 operands, got 6");
  EXPECT_EQ(checkKernel("adamw", {&p, &g, &m, &v, &lr, &step, &scale},
                        {floatAttr("beta1", 0.9), floatAttr("beta2", 0.999),
                         floatAttr("epsilon", 1e-8)}),
            "missing float attribute 'weight_decay'");
  EXPECT_EQ(checkKernel("adamw", {&p, &g, &m, &v, &lr, &step, &scale},
                        adamwAttrs({0, 0.9, 1.0, 1e-8, 0, 1})),
            "attribute 'beta2' is 1, expected a value in [0, 1)");
  EXPECT_EQ(checkKernel("adamw", {&p, &g, &m, &v, &lr, &step, &scale},
                        adamwAttrs({0, 0.9, 0.999, -1e-8, 0, 1})),
            "attribute 'epsilon' is -1e-08, expected a value >= 0");

  std::vector<Attribute> sgd = {floatAttr("momentum", 0.9),
                                floatAttr("weight_decay", 0)};
  EXPECT_EQ(checkKernel("sgd", {&p, &g, &m, &lr, &scale}, sgd), "");
  EXPECT_EQ(checkKernel("sgd", {&p, &g, &vBad, &lr, &scale}, sgd),
            "operand 2 must have shape [6], got [7]");
  EXPECT_EQ(checkKernel("sgd", {&p, &g, &m, &step, &scale}, sgd),
            "operand 3 must be f32, got i64");
  EXPECT_EQ(checkKernel("sgd", {&p, &g, &m, &lr, &scale},
                        {floatAttr("momentum", 0), floatAttr("weight_decay", 0),
                         intAttr("nesterov", 1)}),
            "attribute 'nesterov' needs a non-zero 'momentum'");
  EXPECT_EQ(checkKernel("sgd", {&p, &g, &m, &lr, &scale},
                        {floatAttr("momentum", 0.9),
                         floatAttr("weight_decay", 0), intAttr("nesterov", 2)}),
            "attribute 'nesterov' is 2, expected a value in [0, 1]");
}
