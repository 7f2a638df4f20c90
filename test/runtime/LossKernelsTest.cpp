//===- LossKernelsTest.cpp - cross_entropy and dropout kernels ------------===//
//
// The kernels of runtime/cpu/LossKernels.cpp against plain double loops
// written here, at explicit tolerances (1e-5 relative for the loss and its
// gradient), plus finite differences for cross_entropy_grad and golden
// values printed by PyTorch 2.x (F.cross_entropy). Kernels run on a 3-thread
// pool unless a test says otherwise; one test checks that 3 threads and 1
// give the same bits.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

namespace {

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

TEST(LossKernelsTest, CrossEntropyEachReductionWithIgnoredRows) {
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

TEST(LossKernelsTest, CrossEntropyAllIgnoredIsZero) {
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

TEST(LossKernelsTest, CrossEntropyIsStableForLargeLogits) {
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

TEST(LossKernelsTest, CrossEntropyMatchesTorch) {
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

TEST(LossKernelsTest, CrossEntropyRejectsOutOfRangeLabels) {
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

TEST(LossKernelsTest, CrossEntropyGradMatchesReference) {
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

TEST(LossKernelsTest, CrossEntropyGradMatchesFiniteDifferences) {
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

TEST(LossKernelsTest, CrossEntropyGradInPlaceOnLogits) {
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

TEST(LossKernelsTest, CrossEntropyGradAllIgnoredIsZero) {
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

TEST(LossKernelsTest, DropoutMaskIsReproducibleFromSeedSaltAndIndex) {
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

TEST(LossKernelsTest, DropoutScalesKeptElementsAndCopiesAtZero) {
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
// Threads, table, checks
//===----------------------------------------------------------------------===//

TEST(LossKernelsTest, ThreeThreadsMatchOneThreadBitForBit) {
  int64_t n = 1000, v = 257, e = 300007;
  Buffer logits = randomBuffer({n, v}, -8, 8, 131);
  Buffer labels = labelsWithIgnored(DType::I64, n, v, -100, 132);
  expectSameBitsOnOneAndThreeThreads(
      "cross_entropy",
      {logits, labels, Buffer(DType::F32, {}), Buffer(DType::F32, {n})},
      {stringAttr("reduction", "mean")});
  expectSameBitsOnOneAndThreeThreads(
      "cross_entropy_grad",
      {logits, labels, scalar(DType::F32, 1), Buffer(DType::F32, {n, v})},
      {stringAttr("reduction", "mean")});
  expectSameBitsOnOneAndThreeThreads("dropout",
                                     {randomBuffer({e}, -1, 1, 133),
                                      scalar(DType::I64, 9),
                                      Buffer(DType::F32, {e})},
                                     {floatAttr("p", 0.1), intAttr("salt", 4)});
}

TEST(LossKernelsTest, KernelsAreRegisteredWithTheirArity) {
  std::vector<std::pair<const char *, int>> kernels = {
      {"cross_entropy", 4}, {"cross_entropy_grad", 4}, {"dropout", 3}};
  for (auto [name, arity] : kernels) {
    const KernelDef *def = findCpuKernel(name);
    ASSERT_NE(def, nullptr) << name;
    EXPECT_EQ(def->arity, arity) << name;
  }
}

TEST(LossKernelsTest, CheckRejectsMalformedLaunches) {
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
}
