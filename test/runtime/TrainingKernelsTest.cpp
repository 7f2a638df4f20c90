//===- TrainingKernelsTest.cpp - loss, dropout and optimizer kernels ------===//
//
// The kernels of runtime/cpu/TrainingKernels.cpp against plain double loops
// written here, at explicit tolerances (1e-5 relative for the loss and its
// gradient, 1e-6 for the optimizers over several steps), plus finite
// differences for cross_entropy_grad and a few golden values printed by
// PyTorch 2.x (torch.optim.AdamW / SGD with foreach=False, F.cross_entropy)
// that pin the operation order. Kernels run on a 3-thread pool unless a test
// says otherwise; one test checks that 3 threads and 1 give the same bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

using namespace tailor::runtime;

namespace {

/// An owned dense tensor; storage is 8-byte aligned like an arena buffer.
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
  float *f32() { return data<float>(); }
  /// Element i as a double, whatever the dtype.
  double at(int64_t i) const {
    const void *p = storage.data();
    switch (dtype) {
    case DType::F32:
      return static_cast<const float *>(p)[i];
    case DType::I32:
      return static_cast<const int32_t *>(p)[i];
    case DType::I64:
      return static_cast<double>(static_cast<const int64_t *>(p)[i]);
    default:
      return static_cast<const double *>(p)[i];
    }
  }
  void set(int64_t i, double v) {
    void *p = storage.data();
    switch (dtype) {
    case DType::F32:
      static_cast<float *>(p)[i] = static_cast<float>(v);
      break;
    case DType::I32:
      static_cast<int32_t *>(p)[i] = static_cast<int32_t>(v);
      break;
    case DType::I64:
      static_cast<int64_t *>(p)[i] = static_cast<int64_t>(v);
      break;
    default:
      static_cast<double *>(p)[i] = v;
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

Buffer randomBuffer(std::vector<int64_t> shape, double lo, double hi,
                    unsigned seed) {
  Buffer b(DType::F32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < b.numel(); ++i) {
    b.set(i, dist(rng));
  }
  return b;
}

Buffer filled(DType dtype, std::vector<int64_t> shape,
              std::vector<double> values) {
  Buffer b(dtype, std::move(shape));
  for (int64_t i = 0; i < b.numel(); ++i) {
    b.set(i, values[i]);
  }
  return b;
}

Buffer scalar(DType dtype, double value) { return filled(dtype, {}, {value}); }

Attribute intAttr(const char *name, int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.name = name;
  a.i = v;
  return a;
}
Attribute floatAttr(const char *name, double v) {
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.name = name;
  a.f = v;
  return a;
}
Attribute stringAttr(const char *name, std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::String;
  a.name = name;
  a.s = std::move(v);
  return a;
}

ThreadPool &pool3() {
  static ThreadPool pool(3);
  return pool;
}
ThreadPool &pool1() {
  static ThreadPool pool(1);
  return pool;
}

KernelCall makeCall(const std::vector<Buffer *> &operands,
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
std::string checkKernel(const char *name, const std::vector<Buffer *> &ops,
                        std::vector<Attribute> attrs = {}) {
  const KernelDef *def = findCpuKernel(name);
  if (!def) {
    return std::string("no kernel ") + name;
  }
  return def->check(makeCall(ops, std::move(attrs), nullptr));
}

/// Checks (which must pass) and runs; returns run()'s message.
std::string runKernel(const char *name, const std::vector<Buffer *> &ops,
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

/// |got - want| <= atol + rtol |want|; NaN matches NaN.
::testing::AssertionResult near(double got, double want, double rtol,
                                double atol) {
  if (std::isnan(want)
          ? std::isnan(got)
          : std::fabs(got - want) <= atol + rtol * std::fabs(want)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "got " << got << ", want " << want << " (rtol " << rtol << ", atol "
         << atol << ")";
}

void expectAllNear(const Buffer &got, const std::vector<double> &want,
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

std::vector<double> values(const Buffer &b) {
  std::vector<double> v(b.numel());
  for (int64_t i = 0; i < b.numel(); ++i) {
    v[i] = b.at(i);
  }
  return v;
}

//===----------------------------------------------------------------------===//
// Double references
//===----------------------------------------------------------------------===//

/// Per-row losses (0 for ignored rows) of logits [n, v].
std::vector<double> crossEntropyRef(const Buffer &logits, const Buffer &labels,
                                    int64_t ignore) {
  int64_t n = logits.shape[0], v = logits.shape[1];
  std::vector<double> loss(n, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    auto label = static_cast<int64_t>(labels.at(r));
    if (label == ignore) {
      continue;
    }
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < v; ++i) {
      m = std::max(m, logits.at(r * v + i));
    }
    double s = 0;
    for (int64_t i = 0; i < v; ++i) {
      s += std::exp(logits.at(r * v + i) - m);
    }
    loss[r] = m + std::log(s) - logits.at(r * v + label);
  }
  return loss;
}

/// d(sum_r w_r loss_r)/dlogits for per-row weights w.
std::vector<double> crossEntropyGradRef(const Buffer &logits,
                                        const Buffer &labels, int64_t ignore,
                                        const std::vector<double> &weights) {
  int64_t n = logits.shape[0], v = logits.shape[1];
  std::vector<double> d(n * v, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    auto label = static_cast<int64_t>(labels.at(r));
    if (label == ignore) {
      continue;
    }
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < v; ++i) {
      m = std::max(m, logits.at(r * v + i));
    }
    double s = 0;
    for (int64_t i = 0; i < v; ++i) {
      s += std::exp(logits.at(r * v + i) - m);
    }
    for (int64_t i = 0; i < v; ++i) {
      double p = std::exp(logits.at(r * v + i) - m) / s;
      d[r * v + i] = (p - (i == label ? 1.0 : 0.0)) * weights[r];
    }
  }
  return d;
}

/// Labels in [0, v) with every third row set to `ignore`.
Buffer labelsWithIgnored(DType dtype, int64_t n, int64_t v, int64_t ignore,
                         unsigned seed) {
  Buffer labels(dtype, {n});
  std::mt19937 rng(seed);
  for (int64_t r = 0; r < n; ++r) {
    labels.set(r, r % 3 == 1 ? ignore : static_cast<double>(rng() % v));
  }
  return labels;
}

int64_t countKept(const Buffer &labels, int64_t ignore) {
  int64_t count = 0;
  for (int64_t r = 0; r < labels.numel(); ++r) {
    count += static_cast<int64_t>(labels.at(r)) != ignore;
  }
  return count;
}

} // namespace

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

TEST(TrainingKernelsTest, CrossEntropyEachReductionWithIgnoredRows) {
  for (DType labelType : {DType::I32, DType::I64}) {
    for (int64_t ignore : {int64_t(-100), int64_t(3)}) {
      int64_t n = 37, v = 301;
      Buffer logits = randomBuffer({n, v}, -6, 6, 11);
      Buffer labels = labelsWithIgnored(labelType, n, v, ignore, 12);
      std::vector<double> rows = crossEntropyRef(logits, labels, ignore);
      double sum = std::accumulate(rows.begin(), rows.end(), 0.0);
      int64_t count = countKept(labels, ignore);
      ASSERT_GT(count, 0);
      std::string what = std::string("labels ") + dtypeName(labelType) +
                         " ignore " + std::to_string(ignore);

      Buffer loss(DType::F32, {}), work(DType::F32, {n});
      ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &loss, &work},
                          {intAttr("ignore_index", ignore),
                           stringAttr("reduction", "mean")}),
                "");
      EXPECT_TRUE(near(loss.at(0), sum / count, 1e-5, 0)) << what;
      // reduction defaults to mean and ignore_index to -100.
      if (ignore == -100) {
        Buffer loss2(DType::F32, {});
        ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &loss2, &work}),
                  "");
        EXPECT_TRUE(loss2.sameBytes(loss)) << what;
      }

      ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &loss, &work},
                          {intAttr("ignore_index", ignore),
                           stringAttr("reduction", "sum")}),
                "");
      EXPECT_TRUE(near(loss.at(0), sum, 1e-5, 0)) << what;

      Buffer rowLoss(DType::F32, {n});
      ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &rowLoss, &work},
                          {intAttr("ignore_index", ignore),
                           stringAttr("reduction", "none")}),
                "");
      expectAllNear(rowLoss, rows, 1e-5, 1e-6, what);
      for (int64_t r = 1; r < n; r += 3) {
        EXPECT_EQ(rowLoss.at(r), 0.0) << what << " row " << r;
      }
    }
  }
}

TEST(TrainingKernelsTest, CrossEntropyAllIgnoredIsZero) {
  int64_t n = 5, v = 7;
  Buffer logits = randomBuffer({n, v}, -3, 3, 1);
  // Ignored rows are skipped entirely: not even a NaN logit reaches the loss.
  logits.set(3, std::numeric_limits<double>::quiet_NaN());
  Buffer labels = filled(DType::I64, {n}, {-100, -100, -100, -100, -100});
  Buffer work(DType::F32, {n});
  for (const char *reduction : {"mean", "sum"}) {
    Buffer loss = scalar(DType::F32, 42);
    ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &loss, &work},
                        {stringAttr("reduction", reduction)}),
              "");
    EXPECT_EQ(loss.at(0), 0.0) << reduction;
  }
  Buffer rowLoss = filled(DType::F32, {n}, {1, 2, 3, 4, 5});
  ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &rowLoss, &work},
                      {stringAttr("reduction", "none")}),
            "");
  expectAllNear(rowLoss, {0, 0, 0, 0, 0}, 0, 0, "none");
}

TEST(TrainingKernelsTest, CrossEntropyIsStableForLargeLogits) {
  // exp(1000) overflows; the max-shifted form does not.
  Buffer logits =
      filled(DType::F32, {2, 3}, {1000, 1001, 1002, -1000, -1001, -1002});
  Buffer labels = filled(DType::I32, {2}, {0, 0});
  Buffer loss(DType::F32, {2}), work(DType::F32, {2});
  ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &loss, &work},
                      {stringAttr("reduction", "none")}),
            "");
  double lse = std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  expectAllNear(loss, {2 + lse, lse}, 1e-6, 0, "large logits");
}

TEST(TrainingKernelsTest, CrossEntropyMatchesTorch) {
  // F.cross_entropy(logits, [2, -100, 5, 0]) printed by PyTorch.
  Buffer logits =
      filled(DType::F32, {4, 6},
             {0.399719417,  0.547636211, -1.54389703, 2.40155649,  -3.72956896,
              -5.15325546,  -1.74716592, -1.84603405, 1.23151445,  5.30249214,
              -0.249568105, 1.52611732,  3.35343552,  3.38571382,  0.424795508,
              -1.63746893,  3.46262693,  -4.60970592, -1.67305219, -1.31500423,
              3.47156024,   0.266828626, 0.797621191, -0.572044134});
  Buffer labels = filled(DType::I64, {4}, {2, -100, 5, 0});
  Buffer loss(DType::F32, {}), rows(DType::F32, {4}), work(DType::F32, {4});
  ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &loss, &work}), "");
  EXPECT_TRUE(near(loss.at(0), 6.20803881, 1e-6, 0));
  ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &loss, &work},
                      {stringAttr("reduction", "sum")}),
            "");
  EXPECT_TRUE(near(loss.at(0), 18.6241169, 1e-6, 0));
  ASSERT_EQ(runKernel("cross_entropy", {&logits, &labels, &rows, &work},
                      {stringAttr("reduction", "none")}),
            "");
  expectAllNear(rows, {4.21833849, 0, 9.12903786, 5.2767415}, 1e-6, 0, "none");
}

TEST(TrainingKernelsTest, CrossEntropyRejectsOutOfRangeLabels) {
  Buffer logits = randomBuffer({4, 10}, -1, 1, 2);
  Buffer loss(DType::F32, {}), work(DType::F32, {4});
  Buffer dlogits(DType::F32, {4, 10});
  Buffer dloss = scalar(DType::F32, 1);
  for (double bad : {10.0, -1.0}) {
    Buffer labels = filled(DType::I32, {4}, {0, -100, bad, 3});
    std::string want = "label " + std::to_string(static_cast<int>(bad)) +
                       " at row 2 is out of range [0, 10)";
    EXPECT_EQ(runKernel("cross_entropy", {&logits, &labels, &loss, &work}),
              want);
    EXPECT_EQ(
        runKernel("cross_entropy_grad", {&logits, &labels, &dloss, &dlogits}),
        want);
  }
}

//===----------------------------------------------------------------------===//
// cross_entropy_grad
//===----------------------------------------------------------------------===//

TEST(TrainingKernelsTest, CrossEntropyGradMatchesReference) {
  int64_t n = 23, v = 97, ignore = -100;
  Buffer logits = randomBuffer({n, v}, -4, 4, 21);
  Buffer labels = labelsWithIgnored(DType::I64, n, v, ignore, 22);
  int64_t count = countKept(labels, ignore);
  Buffer dlogits(DType::F32, {n, v});

  Buffer dloss = scalar(DType::F32, 0.75);
  for (const char *reduction : {"mean", "sum"}) {
    double w = 0.75 / (std::string(reduction) == "mean" ? count : 1);
    ASSERT_EQ(runKernel("cross_entropy_grad",
                        {&logits, &labels, &dloss, &dlogits},
                        {stringAttr("reduction", reduction)}),
              "");
    expectAllNear(
        dlogits,
        crossEntropyGradRef(logits, labels, ignore, std::vector<double>(n, w)),
        1e-5, 1e-7, reduction);
  }

  Buffer rowDloss = randomBuffer({n}, -2, 2, 23);
  ASSERT_EQ(runKernel("cross_entropy_grad",
                      {&logits, &labels, &rowDloss, &dlogits},
                      {stringAttr("reduction", "none")}),
            "");
  expectAllNear(dlogits,
                crossEntropyGradRef(logits, labels, ignore, values(rowDloss)),
                1e-5, 1e-7, "none");
  for (int64_t i = 1 * v; i < 2 * v; ++i) {
    ASSERT_EQ(dlogits.at(i), 0.0) << "ignored row 1";
  }
}

TEST(TrainingKernelsTest, CrossEntropyGradMatchesFiniteDifferences) {
  // Central differences of the cross_entropy kernel itself, in f32: with
  // h = 1e-2 the truncation error is ~h^2 / 6 and the rounding error
  // ~1e-7 * loss / h, both well under the tolerance.
  int64_t n = 4, v = 9;
  Buffer logits = randomBuffer({n, v}, -2, 2, 31);
  Buffer labels = filled(DType::I32, {n}, {3, 7, -100, 0});
  Buffer rowDloss = filled(DType::F32, {n}, {0.5, -1.5, 2, 1});
  struct Case {
    const char *reduction;
    Buffer *dloss;
  };
  Buffer scalarDloss = scalar(DType::F32, 1.25);
  for (Case c : {Case{"mean", &scalarDloss}, Case{"sum", &scalarDloss},
                 Case{"none", &rowDloss}}) {
    bool none = std::string(c.reduction) == "none";
    std::vector<Attribute> attrs = {stringAttr("reduction", c.reduction)};
    Buffer dlogits(DType::F32, {n, v});
    ASSERT_EQ(runKernel("cross_entropy_grad",
                        {&logits, &labels, c.dloss, &dlogits}, attrs),
              "");
    // The scalar objective whose gradient dlogits is: dloss . loss.
    auto objective = [&](Buffer &x) {
      Buffer loss(DType::F32,
                  none ? std::vector<int64_t>{n} : std::vector<int64_t>{});
      Buffer work(DType::F32, {n});
      EXPECT_EQ(runKernel("cross_entropy", {&x, &labels, &loss, &work}, attrs),
                "");
      double f = 0;
      for (int64_t r = 0; r < loss.numel(); ++r) {
        f += loss.at(r) * c.dloss->at(none ? r : 0);
      }
      return f;
    };
    const double h = 1e-2;
    for (int64_t i = 0; i < n * v; ++i) {
      Buffer plus = logits, minus = logits;
      plus.set(i, logits.at(i) + h);
      minus.set(i, logits.at(i) - h);
      double fd = (objective(plus) - objective(minus)) /
                  (static_cast<float>(logits.at(i) + h) -
                   static_cast<float>(logits.at(i) - h));
      EXPECT_TRUE(near(dlogits.at(i), fd, 0, 1e-3))
          << c.reduction << " element " << i;
    }
  }
}

TEST(TrainingKernelsTest, CrossEntropyGradInPlaceOnLogits) {
  int64_t n = 9, v = 513;
  Buffer logits = randomBuffer({n, v}, -5, 5, 41);
  Buffer labels = labelsWithIgnored(DType::I32, n, v, -100, 42);
  Buffer rowDloss = randomBuffer({n}, 0.5, 2, 43);
  for (const char *reduction : {"mean", "none"}) {
    Buffer *dloss = std::string(reduction) == "none" ? &rowDloss : nullptr;
    Buffer one = scalar(DType::F32, 1);
    if (!dloss) {
      dloss = &one;
    }
    std::vector<Attribute> attrs = {stringAttr("reduction", reduction)};
    Buffer separate(DType::F32, {n, v});
    ASSERT_EQ(runKernel("cross_entropy_grad",
                        {&logits, &labels, dloss, &separate}, attrs),
              "");
    Buffer inPlace = logits;
    ASSERT_EQ(runKernel("cross_entropy_grad",
                        {&inPlace, &labels, dloss, &inPlace}, attrs),
              "");
    EXPECT_TRUE(inPlace.sameBytes(separate)) << reduction;
  }
}

TEST(TrainingKernelsTest, CrossEntropyGradAllIgnoredIsZero) {
  Buffer logits = randomBuffer({3, 4}, -1, 1, 5);
  Buffer labels = filled(DType::I64, {3}, {-100, -100, -100});
  Buffer dloss = scalar(DType::F32, 1);
  Buffer dlogits = randomBuffer({3, 4}, 1, 2, 6);
  ASSERT_EQ(
      runKernel("cross_entropy_grad", {&logits, &labels, &dloss, &dlogits}),
      "");
  expectAllNear(dlogits, std::vector<double>(12, 0.0), 0, 0, "all ignored");
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

namespace {

/// Runs dropout on `x` and returns y.
Buffer dropout(const Buffer &x, int64_t seed, double p, int64_t salt,
               ThreadPool *pool = &pool3()) {
  Buffer in = x, y(DType::F32, x.shape);
  Buffer seedBuf = scalar(DType::I64, static_cast<double>(seed));
  EXPECT_EQ(runKernel("dropout", {&in, &seedBuf, &y},
                      {floatAttr("p", p), intAttr("salt", salt)}, pool),
            "");
  return y;
}

/// Element i kept (y non-zero where x has no zeros).
std::vector<bool> keptMask(const Buffer &y) {
  std::vector<bool> kept(y.numel());
  for (int64_t i = 0; i < y.numel(); ++i) {
    kept[i] = y.at(i) != 0;
  }
  return kept;
}

} // namespace

TEST(TrainingKernelsTest, DropoutMaskIsReproducibleFromSeedSaltAndIndex) {
  int64_t n = 100000;
  double p = 0.3;
  Buffer x = randomBuffer({n}, 1, 2, 51);
  Buffer dy = randomBuffer({n}, -3, -1, 52);
  std::vector<bool> mask = keptMask(dropout(x, 1234, p, 7));
  // The backward pass: another tensor, the same seed and salt, the same mask.
  EXPECT_EQ(keptMask(dropout(dy, 1234, p, 7, &pool1())), mask);
  // A shorter tensor of another shape sees the same prefix: the mask is a
  // function of the flat index only.
  Buffer small = randomBuffer({10, 10}, 1, 2, 53);
  std::vector<bool> smallMask = keptMask(dropout(small, 1234, p, 7));
  EXPECT_TRUE(std::equal(smallMask.begin(), smallMask.end(), mask.begin()));

  auto differing = [&](const std::vector<bool> &other) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; ++i) {
      d += other[i] != mask[i];
    }
    return static_cast<double>(d) / n;
  };
  // Independent masks disagree on a fraction 2 p (1 - p) = 0.42.
  EXPECT_NEAR(differing(keptMask(dropout(x, 1234, p, 8))), 0.42, 0.02);
  EXPECT_NEAR(differing(keptMask(dropout(x, 1235, p, 7))), 0.42, 0.02);

  for (double q : {0.1, 0.3, 0.5, 0.9}) {
    std::vector<bool> m = keptMask(dropout(x, 99, q, 0));
    double kept = static_cast<double>(std::count(m.begin(), m.end(), true)) / n;
    // 1 - q within ~7 standard deviations (sqrt(q (1 - q) / n) <= 0.0016).
    EXPECT_NEAR(kept, 1 - q, 0.011) << "p " << q;
  }
}

TEST(TrainingKernelsTest, DropoutScalesKeptElementsAndCopiesAtZero) {
  int64_t n = 50000;
  Buffer x = randomBuffer({50, 1000}, -4, 4, 61);
  double p = 0.25;
  Buffer y = dropout(x, 5, p, 3);
  float scale = 1.0f / static_cast<float>(1.0 - p);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto xi = static_cast<float>(x.at(i));
    auto yi = static_cast<float>(y.at(i));
    if (yi != 0) {
      ASSERT_EQ(yi, xi * scale) << "element " << i;
      ++kept;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, n);
  // In place gives the same bits.
  Buffer inPlace = x;
  Buffer seed = scalar(DType::I64, 5);
  ASSERT_EQ(runKernel("dropout", {&inPlace, &seed, &inPlace},
                      {floatAttr("p", p), intAttr("salt", 3)}),
            "");
  EXPECT_TRUE(inPlace.sameBytes(y));
  // p = 0 is the identity.
  EXPECT_TRUE(dropout(x, 5, 0.0, 3).sameBytes(x));
}

//===----------------------------------------------------------------------===//
// accumulate, global_norm
//===----------------------------------------------------------------------===//

TEST(TrainingKernelsTest, AccumulateAddsIntoTarget) {
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

TEST(TrainingKernelsTest, GlobalNormOverSeveralTensors) {
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

TEST(TrainingKernelsTest, AdamWFiveStepsMatchDoubleReference) {
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

TEST(TrainingKernelsTest, AdamWMatchesTorch) {
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

TEST(TrainingKernelsTest, AdamWRejectsStepZero) {
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

TEST(TrainingKernelsTest, SgdThreeStepsMatchDoubleReference) {
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

TEST(TrainingKernelsTest, SgdMatchesTorch) {
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

TEST(TrainingKernelsTest, ThreeThreadsMatchOneThreadBitForBit) {
  struct Launch {
    const char *name;
    std::vector<Buffer> operands;
    std::vector<Attribute> attrs;
  };
  int64_t n = 1000, v = 257, e = 300007;
  Buffer logits = randomBuffer({n, v}, -8, 8, 131);
  Buffer labels = labelsWithIgnored(DType::I64, n, v, -100, 132);
  std::vector<Launch> launches;
  launches.push_back(
      {"cross_entropy",
       {logits, labels, Buffer(DType::F32, {}), Buffer(DType::F32, {n})},
       {stringAttr("reduction", "mean")}});
  launches.push_back(
      {"cross_entropy_grad",
       {logits, labels, scalar(DType::F32, 1), Buffer(DType::F32, {n, v})},
       {stringAttr("reduction", "mean")}});
  launches.push_back({"dropout",
                      {randomBuffer({e}, -1, 1, 133), scalar(DType::I64, 9),
                       Buffer(DType::F32, {e})},
                      {floatAttr("p", 0.1), intAttr("salt", 4)}});
  launches.push_back(
      {"accumulate",
       {randomBuffer({e}, -1, 1, 134), randomBuffer({e}, -1, 1, 135)},
       {}});
  launches.push_back({"global_norm",
                      {randomBuffer({e * 17}, -1, 1, 136),
                       randomBuffer({e}, -1, 1, 137), Buffer(DType::F32, {})},
                      {}});
  launches.push_back(
      {"adamw",
       {randomBuffer({e}, -1, 1, 138), randomBuffer({e}, -1, 1, 139),
        randomBuffer({e}, -0.1, 0.1, 140), randomBuffer({e}, 0, 0.01, 141),
        scalar(DType::F32, 1e-3), scalar(DType::I64, 3),
        scalar(DType::F32, 0.5)},
       adamwAttrs({0, 0.9, 0.999, 1e-8, 0.01, 1})});
  launches.push_back(
      {"sgd",
       {randomBuffer({e}, -1, 1, 142), randomBuffer({e}, -1, 1, 143),
        randomBuffer({e}, -1, 1, 144), scalar(DType::F32, 1e-2),
        scalar(DType::F32, 1)},
       {floatAttr("momentum", 0.9), floatAttr("weight_decay", 0.01),
        intAttr("nesterov", 1)}});
  for (const Launch &launch : launches) {
    std::vector<Buffer> one = launch.operands, three = launch.operands;
    std::vector<Buffer *> oneOps, threeOps;
    for (size_t i = 0; i < one.size(); ++i) {
      oneOps.push_back(&one[i]);
      threeOps.push_back(&three[i]);
    }
    ASSERT_EQ(runKernel(launch.name, oneOps, launch.attrs, &pool1()), "");
    ASSERT_EQ(runKernel(launch.name, threeOps, launch.attrs, &pool3()), "");
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_TRUE(one[i].sameBytes(three[i]))
          << launch.name << " operand " << i;
    }
  }
}

TEST(TrainingKernelsTest, KernelsAreRegisteredWithTheirArity) {
  std::vector<std::pair<const char *, int>> kernels = {
      {"cross_entropy", 4},
      {"cross_entropy_grad", 4},
      {"dropout", 3},
      {"accumulate", 2},
      {"global_norm", -1},
      {"adamw", 7},
      {"sgd", 5}};
  for (auto [name, arity] : kernels) {
    const KernelDef *def = findCpuKernel(name);
    ASSERT_NE(def, nullptr) << name;
    EXPECT_EQ(def->arity, arity) << name;
  }
}

TEST(TrainingKernelsTest, CheckRejectsMalformedLaunches) {
  Buffer logits(DType::F32, {4, 10}), logits3(DType::F32, {4, 10, 2});
  Buffer labels(DType::I64, {4}), labelsF(DType::F32, {4}),
      labels5(DType::I64, {5});
  Buffer loss(DType::F32, {}), rows(DType::F32, {4}), work(DType::F32, {4});
  Buffer dlogits(DType::F32, {4, 10}), dlogitsBad(DType::F32, {4, 9});

  EXPECT_EQ(checkKernel("cross_entropy", {&logits, &labels, &loss, &work}), "");
  EXPECT_EQ(checkKernel("cross_entropy", {&logits, &labels, &loss}),
            "expected 4 operands, got 3");
  EXPECT_EQ(checkKernel("cross_entropy", {&logits3, &labels, &loss, &work}),
            "operand 0 must have rank 2, got 3");
  EXPECT_EQ(checkKernel("cross_entropy", {&logits, &labelsF, &loss, &work}),
            "operand 1 must be i32 or i64, got f32");
  EXPECT_EQ(checkKernel("cross_entropy", {&logits, &labels5, &loss, &work}),
            "operand 1 must have shape [4], got [5]");
  EXPECT_EQ(checkKernel("cross_entropy", {&logits, &labels, &rows, &work}),
            "operand 2 must have shape [], got [4] (reduction 'mean' or "
            "'sum')");
  EXPECT_EQ(checkKernel("cross_entropy", {&logits, &labels, &loss, &work},
                        {stringAttr("reduction", "none")}),
            "operand 2 must have shape [4], got [] (reduction 'none')");
  EXPECT_EQ(checkKernel("cross_entropy", {&logits, &labels, &loss, &work},
                        {stringAttr("reduction", "avg")}),
            "attribute 'reduction' must be the string 'mean', 'sum' or 'none'");
  EXPECT_EQ(checkKernel("cross_entropy", {&logits, &labels, &loss, &work},
                        {floatAttr("ignore_index", 1.5)}),
            "attribute 'ignore_index' must be an int");
  EXPECT_EQ(
      checkKernel("cross_entropy", {&logits, &labels, &loss, &rows, &work}),
      "expected 4 operands, got 5");
  EXPECT_EQ(checkKernel("cross_entropy", {&logits, &labels, &loss, &dlogits}),
            "operand 3 must have shape [4], got [4, 10]");
  EXPECT_EQ(
      checkKernel("cross_entropy_grad", {&logits, &labels, &loss, &dlogits}),
      "");
  EXPECT_EQ(
      checkKernel("cross_entropy_grad", {&logits, &labels, &loss, &dlogitsBad}),
      "operand 3 must have shape [4, 10], got [4, 9]");

  Buffer x(DType::F32, {3, 5}), seed(DType::I64, {}), seedF(DType::F32, {}),
      seed1(DType::I64, {1}), y(DType::F32, {3, 5}), yBad(DType::F32, {15});
  EXPECT_EQ(checkKernel("dropout", {&x, &seed, &y}, {floatAttr("p", 0.1)}), "");
  EXPECT_EQ(checkKernel("dropout", {&x, &seedF, &y}, {floatAttr("p", 0.1)}),
            "operand 1 must be i64, got f32");
  EXPECT_EQ(checkKernel("dropout", {&x, &seed1, &y}, {floatAttr("p", 0.1)}),
            "operand 1 must have shape [], got [1]");
  EXPECT_EQ(checkKernel("dropout", {&x, &seed, &yBad}, {floatAttr("p", 0.1)}),
            "operand 2 must have shape [3, 5], got [15]");
  EXPECT_EQ(checkKernel("dropout", {&x, &seed, &y}),
            "missing float attribute 'p'");
  EXPECT_EQ(checkKernel("dropout", {&x, &seed, &y}, {floatAttr("p", 1)}),
            "attribute 'p' is 1, expected a value in [0, 1)");
  EXPECT_EQ(checkKernel("dropout", {&x, &seed, &y}, {floatAttr("p", -0.5)}),
            "attribute 'p' is -0.5, expected a value in [0, 1)");

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
