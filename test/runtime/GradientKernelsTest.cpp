//===- GradientKernelsTest.cpp - backward kernels that reduce over rows ---===//
//
// Each backward kernel of runtime/cpu/GradientKernels.cpp is checked twice on
// small random tensors: against a plain double-precision loop written here
// (1e-4 relative plus a small absolute floor), and against central finite
// differences of its forward kernel from the table, L = sum(dy * forward(x)),
// in f32 with a step of 1e-2 (1e-2 relative, 1e-3 absolute: the f32 forward
// and the O(h^2) truncation leave about 1e-4). Every launch runs on a
// 3-thread pool and on a 1-thread pool from the same starting outputs, and
// the two results must be the same bits; one test repeats that on shapes
// large enough that every kernel splits its work.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5;

/// Rows and the last extent of a [..., D] buffer.
std::pair<int64_t, int64_t> rowsAndDim(const Buffer &b) {
  int64_t d = b.shape.back();
  return {b.numel() / d, d};
}

} // namespace

//===----------------------------------------------------------------------===//
// linear_weight_grad, embedding_grad (linear maps)
//===----------------------------------------------------------------------===//

TEST(GradientKernelsTest, LinearWeightGrad) {
  Buffer dy = randomBuffer({2, 3, 5}, -1, 1, 1);
  Buffer x = randomBuffer({2, 3, 4}, -1, 1, 2);
  for (int accumulate : {0, 1}) {
    Buffer dw = randomBuffer({5, 4}, -1, 1, 3);
    std::vector<double> want(20);
    for (int64_t n = 0; n < 5; ++n) {
      for (int64_t k = 0; k < 4; ++k) {
        double sum = accumulate ? dw.at(n * 4 + k) : 0;
        for (int64_t r = 0; r < 6; ++r) {
          sum += dy.at(r * 5 + n) * x.at(r * 4 + k);
        }
        want[n * 4 + k] = sum;
      }
    }
    runGrad("linear_weight_grad", {&dy, &x, &dw}, 2,
            {intAttr("accumulate", accumulate)});
    expectAllNear(dw, want, kRtol, kAtol, "linear_weight_grad");
  }
  // With the scale the planner folds in: dw (+)= alpha dy^T x.
  for (int accumulate : {0, 1}) {
    Buffer dw = randomBuffer({5, 4}, -1, 1, 5);
    std::vector<double> want(20);
    for (int64_t n = 0; n < 5; ++n) {
      for (int64_t k = 0; k < 4; ++k) {
        double sum = 0;
        for (int64_t r = 0; r < 6; ++r) {
          sum += dy.at(r * 5 + n) * x.at(r * 4 + k);
        }
        want[n * 4 + k] = 0.75 * sum + (accumulate ? dw.at(n * 4 + k) : 0);
      }
    }
    runGrad("linear_weight_grad", {&dy, &x, &dw}, 2,
            {intAttr("accumulate", accumulate), floatAttr("alpha", 0.75)});
    expectAllNear(dw, want, kRtol, kAtol, "linear_weight_grad, alpha");
  }
  Buffer dw(DType::F32, {5, 4}), w = randomBuffer({5, 4}, -1, 1, 4),
                                 y(DType::F32, {2, 3, 5});
  runGrad("linear_weight_grad", {&dy, &x, &dw}, 2);
  expectMatchesFd(dw, "linear", {&x, &w, &y}, 2, 1, dy);
}

TEST(GradientKernelsTest, EmbeddingGradScatterAddsRepeatedIds) {
  int64_t vocab = 7, d = 5;
  Buffer dy = randomBuffer({2, 6, d}, -1, 1, 5);
  for (DType idType : {DType::I32, DType::I64}) {
    Buffer ids = randomBuffer({2, 6}, 0, 4, 6, idType); // ids 0..3, repeated
    for (int accumulate : {0, 1}) {
      Buffer dt = randomBuffer({vocab, d}, -1, 1, 7);
      std::vector<double> want(vocab * d, 0.0);
      for (int64_t i = 0; i < vocab * d && accumulate; ++i) {
        want[i] = dt.at(i);
      }
      for (int64_t i = 0; i < 12; ++i) {
        for (int64_t c = 0; c < d; ++c) {
          want[static_cast<int64_t>(ids.at(i)) * d + c] += dy.at(i * d + c);
        }
      }
      runGrad("embedding_grad", {&dy, &ids, &dt}, 2,
              {intAttr("accumulate", accumulate)});
      expectAllNear(dt, want, kRtol, kAtol, "embedding_grad");
      if (!accumulate) {
        Buffer table = randomBuffer({vocab, d}, -1, 1, 8);
        Buffer y(DType::F32, {2, 6, d});
        expectMatchesFd(dt, "embedding", {&table, &ids, &y}, 2, 0, dy);
      }
    }
    // A bad id names itself and its position and writes nothing.
    ids.set(9, vocab);
    Buffer dt = randomBuffer({vocab, d}, -1, 1, 9), before = dt;
    std::string error = findCpuKernel("embedding_grad")
                            ->run(makeCall({&dy, &ids, &dt}, {}, &pool3()));
    EXPECT_EQ(error, "token id 7 at position 9 is out of range [0, 7)");
    EXPECT_TRUE(dt.sameBytes(before));
  }
}

//===----------------------------------------------------------------------===//
// rms_norm_grad, layer_norm_grad
//===----------------------------------------------------------------------===//

TEST(GradientKernelsTest, RmsNormGrad) {
  double eps = 1e-5;
  Buffer x = randomBuffer({2, 3, 8}, -2, 2, 13);
  Buffer w = randomBuffer({8}, 0.5, 1.5, 14);
  Buffer dy = randomBuffer({2, 3, 8}, -1, 1, 15);
  Buffer dx(DType::F32, x.shape), dw(DType::F32, {8}), ws(DType::F32, {6});
  auto [rows, d] = rowsAndDim(x);
  std::vector<double> wantDx(x.numel()), wantDw(d, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0, gx = 0;
    for (int64_t i = 0; i < d; ++i) {
      ms += x.at(r * d + i) * x.at(r * d + i) / d;
      gx += dy.at(r * d + i) * w.at(i) * x.at(r * d + i) / d;
    }
    double rr = 1 / std::sqrt(ms + eps);
    for (int64_t i = 0; i < d; ++i) {
      double xi = x.at(r * d + i), dyi = dy.at(r * d + i);
      wantDx[r * d + i] = rr * (dyi * w.at(i) - xi * rr * rr * gx);
      wantDw[i] += dyi * xi * rr;
    }
  }
  std::vector<Attribute> attrs = {floatAttr("epsilon", eps)};
  runGrad("rms_norm_grad", {&dy, &x, &w, &dx, &dw, &ws}, 3, attrs);
  expectAllNear(dx, wantDx, kRtol, kAtol, "rms_norm_grad dx");
  expectAllNear(dw, wantDw, kRtol, kAtol, "rms_norm_grad dw");
  Buffer y(DType::F32, x.shape);
  expectMatchesFd(dx, "rms_norm", {&x, &w, &y}, 2, 0, dy, attrs);
  expectMatchesFd(dw, "rms_norm", {&x, &w, &y}, 2, 1, dy, attrs);
  // dx may overwrite dy in place.
  Buffer inPlace = dy;
  runGrad("rms_norm_grad", {&inPlace, &x, &w, &inPlace, &dw, &ws}, 3, attrs);
  EXPECT_TRUE(inPlace.sameBytes(dx));
}

TEST(GradientKernelsTest, LayerNormGrad) {
  double eps = 1e-5;
  Buffer x = randomBuffer({5, 12}, -2, 3, 16);
  Buffer w = randomBuffer({12}, 0.5, 1.5, 17);
  Buffer b = randomBuffer({12}, -1, 1, 18);
  Buffer dy = randomBuffer({5, 12}, -1, 1, 19);
  Buffer dx(DType::F32, x.shape), dw(DType::F32, {12}), db(DType::F32, {12});
  Buffer ws(DType::F32, {10});
  auto [rows, d] = rowsAndDim(x);
  std::vector<double> wantDx(x.numel()), wantDw(d, 0.0), wantDb(d, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0, g = 0, gx = 0;
    for (int64_t i = 0; i < d; ++i) {
      mean += x.at(r * d + i) / d;
    }
    for (int64_t i = 0; i < d; ++i) {
      var += (x.at(r * d + i) - mean) * (x.at(r * d + i) - mean) / d;
    }
    double rstd = 1 / std::sqrt(var + eps);
    for (int64_t i = 0; i < d; ++i) {
      double gi = dy.at(r * d + i) * w.at(i);
      g += gi / d;
      gx += gi * (x.at(r * d + i) - mean) * rstd / d;
    }
    for (int64_t i = 0; i < d; ++i) {
      double xhat = (x.at(r * d + i) - mean) * rstd, dyi = dy.at(r * d + i);
      wantDx[r * d + i] = rstd * (dyi * w.at(i) - g - xhat * gx);
      wantDw[i] += dyi * xhat;
      wantDb[i] += dyi;
    }
  }
  std::vector<Attribute> attrs = {floatAttr("epsilon", eps)};
  runGrad("layer_norm_grad", {&dy, &x, &w, &dx, &dw, &db, &ws}, 3, attrs);
  expectAllNear(dx, wantDx, kRtol, kAtol, "layer_norm_grad dx");
  expectAllNear(dw, wantDw, kRtol, kAtol, "layer_norm_grad dw");
  expectAllNear(db, wantDb, kRtol, kAtol, "layer_norm_grad db");
  Buffer y(DType::F32, x.shape);
  for (size_t wrt : {0, 1, 2}) {
    Buffer &got = wrt == 0 ? dx : wrt == 1 ? dw : db;
    expectMatchesFd(got, "layer_norm", {&x, &w, &b, &y}, 3, wrt, dy, attrs);
  }
}

//===----------------------------------------------------------------------===//
// attention_grad
//===----------------------------------------------------------------------===//

namespace {

struct AttentionCase {
  int64_t b, hq, hkv, t, s, d, dv;
  bool causal;
  int64_t window = 0;  // keys in a sliding window (0: none)
  double softcap = 0;  // c * tanh(score / c) (0: none)
  std::vector<double> slopes = {}; // ALiBi, one per query head (empty: none)
  const Buffer *bias = nullptr;    // additive [b0, b1, b2, b3] (null: none)
};

/// The bias element of (bi, h, t, s) broadcast from c.bias's shape.
double biasAt(const AttentionCase &c, int64_t bi, int64_t h, int64_t t,
              int64_t s) {
  if (!c.bias) {
    return 0;
  }
  const std::vector<int64_t> &b = c.bias->shape;
  int64_t index[4] = {bi, h, t, s}, flat = 0;
  for (int i = 0; i < 4; ++i) {
    flat = flat * b[i] + (b[i] == 1 ? 0 : index[i]);
  }
  return c.bias->at(flat);
}

/// dq, dk, dv of attention in double: the softmax VJP per query row.
std::vector<std::vector<double>>
attentionGradRef(const AttentionCase &c, const Buffer &dout, const Buffer &q,
                 const Buffer &k, const Buffer &v, double scale) {
  std::vector<double> dq(q.numel(), 0.0), dk(k.numel(), 0.0),
      dv(v.numel(), 0.0);
  for (int64_t bi = 0; bi < c.b; ++bi) {
    for (int64_t h = 0; h < c.hq; ++h) {
      int64_t kvh = bi * c.hkv + h / (c.hq / c.hkv), bh = bi * c.hq + h;
      for (int64_t t = 0; t < c.t; ++t) {
        int64_t n =
            c.causal ? std::clamp(t + 1 + c.s - c.t, int64_t(0), c.s) : c.s;
        int64_t from = c.window > 0 ? std::max<int64_t>(0, n - c.window) : 0;
        std::vector<double> p(n), dp(n), capGrad(n, 1.0);
        double m = -std::numeric_limits<double>::infinity(), sum = 0, dot = 0;
        for (int64_t s = from; s < n; ++s) {
          p[s] = 0;
          for (int64_t i = 0; i < c.d; ++i) {
            p[s] += scale * q.at((bh * c.t + t) * c.d + i) *
                    k.at((kvh * c.s + s) * c.d + i);
          }
          if (c.softcap > 0) {
            double th = std::tanh(p[s] / c.softcap);
            p[s] = c.softcap * th;
            capGrad[s] = 1 - th * th;
          }
          if (!c.slopes.empty()) {
            p[s] += c.slopes[h] * static_cast<double>(s - t - (c.s - c.t));
          }
          p[s] += biasAt(c, bi, h, t, s);
          m = std::max(m, p[s]);
        }
        for (int64_t s = from; s < n; ++s) {
          p[s] = std::exp(p[s] - m);
          sum += p[s];
        }
        for (int64_t s = from; s < n; ++s) {
          p[s] /= sum;
          dp[s] = 0;
          for (int64_t j = 0; j < c.dv; ++j) {
            double g = dout.at((bh * c.t + t) * c.dv + j);
            dv[(kvh * c.s + s) * c.dv + j] += p[s] * g;
            dp[s] += g * v.at((kvh * c.s + s) * c.dv + j);
          }
          dot += p[s] * dp[s];
        }
        for (int64_t s = from; s < n; ++s) {
          double ds = scale * p[s] * (dp[s] - dot) * capGrad[s];
          for (int64_t i = 0; i < c.d; ++i) {
            dq[(bh * c.t + t) * c.d + i] +=
                ds * k.at((kvh * c.s + s) * c.d + i);
            dk[(kvh * c.s + s) * c.d + i] +=
                ds * q.at((bh * c.t + t) * c.d + i);
          }
        }
      }
    }
  }
  return {dq, dk, dv};
}

} // namespace


// Tests that attention_grad with document masking (positions) gives each
// packed example the gradients of the reference run on it alone.
TEST(GradientKernelsTest, AttentionGradPositionsKeepPackedExamplesApart) {
  std::vector<std::vector<int64_t>> starts;
  Buffer positions = packedPositions(starts);
  const int64_t hq = 4, hkv = 2, t = 70, d = 16, dv = 8;
  Buffer q = randomBuffer({2, hq, t, d}, -1, 1, 41);
  Buffer k = randomBuffer({2, hkv, t, d}, -1, 1, 42);
  Buffer v = randomBuffer({2, hkv, t, dv}, -1, 1, 43);
  Buffer dout = randomBuffer({2, hq, t, dv}, -1, 1, 44);
  Buffer dq = randomBuffer(q.shape, -9, 9, 45),
         dk = randomBuffer(k.shape, -9, 9, 46),
         dv_ = randomBuffer(v.shape, -9, 9, 47);
  Buffer ws(DType::F32, {2 * 2 * 64 * t});
  double scale = 0.6;
  runGrad("attention_grad",
          {&dout, &q, &k, &v, &positions, &dq, &dk, &dv_, &ws}, 5,
          {intAttr("causal", 1), floatAttr("scale", scale),
           intAttr("positions", 4)},
          true);
  for (int64_t b = 0; b < 2; ++b) {
    for (size_t e = 0; e + 1 < starts[b].size(); ++e) {
      int64_t s0 = starts[b][e], len = starts[b][e + 1] - s0;
      AttentionCase alone{1, hq, hkv, len, len, d, dv, true};
      auto want = attentionGradRef(
          alone, segmentRows(dout, b, s0, len), segmentRows(q, b, s0, len),
          segmentRows(k, b, s0, len), segmentRows(v, b, s0, len), scale);
      std::string what = "packed example " + std::to_string(e) +
                         " of batch " + std::to_string(b);
      expectAllNear(segmentRows(dq, b, s0, len), want[0], kRtol, 1e-4,
                    what + " dq");
      expectAllNear(segmentRows(dk, b, s0, len), want[1], kRtol, 1e-4,
                    what + " dk");
      expectAllNear(segmentRows(dv_, b, s0, len), want[2], kRtol, 1e-4,
                    what + " dv");
    }
  }
}

TEST(GradientKernelsTest, AttentionGradGqaCausalAndPlain) {
  const AttentionCase cases[] = {
      {2, 4, 2, 70, 100, 16, 8, true}, // GQA, S > T, two row blocks
      {1, 4, 2, 5, 7, 8, 6, false},    // GQA, plain, Dv != D
      {1, 4, 2, 6, 9, 8, 8, true},     // GQA, causal, T != S
      {1, 2, 1, 80, 50, 8, 8, true},   // S < T: 30 rows see no key
      {1, 4, 2, 150, 150, 8, 8, true, 40},  // sliding window over blocks
      {1, 2, 2, 9, 12, 8, 6, true, 3, 2.0}, // window and softcap, S > T
      {1, 2, 1, 7, 7, 8, 8, false, 0, 1.5}, // softcap alone
  };
  for (const AttentionCase &c : cases) {
    std::string what = "attention_grad T " + std::to_string(c.t) + " S " +
                       std::to_string(c.s) + " causal " +
                       std::to_string(c.causal);
    Buffer q = randomBuffer({c.b, c.hq, c.t, c.d}, -1, 1, 20);
    Buffer k = randomBuffer({c.b, c.hkv, c.s, c.d}, -1, 1, 21);
    Buffer v = randomBuffer({c.b, c.hkv, c.s, c.dv}, -1, 1, 22);
    Buffer dout = randomBuffer({c.b, c.hq, c.t, c.dv}, -1, 1, 23);
    Buffer dq = randomBuffer(q.shape, -9, 9, 24),
           dk = randomBuffer(k.shape, -9, 9, 25),
           dv = randomBuffer(v.shape, -9, 9, 26);
    int64_t blocks = c.softcap > 0 ? 3 : 2;
    Buffer ws(DType::F32, {2 * blocks * 64 * c.s}); // two workers' slots
    // The plain case takes the default scale, 1 / sqrt(D).
    double scale = c.causal ? 0.6 : 1 / std::sqrt(static_cast<double>(c.d));
    std::vector<Attribute> attrs = {intAttr("causal", c.causal)};
    if (c.causal) {
      attrs.push_back(floatAttr("scale", scale));
    }
    if (c.window > 0) {
      attrs.push_back(intAttr("window", c.window));
    }
    if (c.softcap > 0) {
      attrs.push_back(floatAttr("softcap", c.softcap));
    }
    runGrad("attention_grad", {&dout, &q, &k, &v, &dq, &dk, &dv, &ws}, 4, attrs,
            true);
    auto want = attentionGradRef(c, dout, q, k, v, scale);
    expectAllNear(dq, want[0], kRtol, 1e-4, what + " dq");
    expectAllNear(dk, want[1], kRtol, 1e-4, what + " dk");
    expectAllNear(dv, want[2], kRtol, 1e-4, what + " dv");
    if (c.t * c.s > 1000) {
      continue; // finite differences on the small cases only
    }
    Buffer y(DType::F32, dout.shape), fws(DType::F32, {64 * c.s});
    std::vector<Buffer *> forward = {&q, &k, &v, &y, &fws};
    expectMatchesFd(dq, "attention", forward, 3, 0, dout, attrs);
    expectMatchesFd(dk, "attention", forward, 3, 1, dout, attrs);
    expectMatchesFd(dv, "attention", forward, 3, 2, dout, attrs);
  }
}

// Tests ALiBi slopes and additive bias operands (full, and broadcast as a
// padding mask's [B, 1, 1, S]) against the double reference and finite
// differences of the forward kernel, with a window and a softcap too.
TEST(GradientKernelsTest, AttentionGradAlibiAndBias) {
  Buffer full = randomBuffer({2, 4, 6, 9}, -1, 1, 30);
  Buffer padding = randomBuffer({2, 1, 1, 9}, -1, 1, 31);
  std::vector<double> slopes = {0.5, 0.25, -0.125, 0.0625};
  const AttentionCase cases[] = {
      {2, 4, 2, 6, 9, 8, 6, true, 0, 0, slopes},           // ALiBi, T < S
      {2, 4, 2, 6, 9, 8, 6, false, 0, 0, {}, &full},       // full bias
      {2, 4, 2, 6, 9, 8, 6, true, 3, 2.0, slopes, &padding}, // all of them
      {1, 4, 4, 70, 70, 8, 8, true, 0, 0, slopes},         // two row blocks
  };
  for (const AttentionCase &c : cases) {
    std::string what = "attention_grad T " + std::to_string(c.t) +
                       (c.bias ? " bias" : "") +
                       (c.slopes.empty() ? "" : " alibi");
    Buffer q = randomBuffer({c.b, c.hq, c.t, c.d}, -1, 1, 20);
    Buffer k = randomBuffer({c.b, c.hkv, c.s, c.d}, -1, 1, 21);
    Buffer v = randomBuffer({c.b, c.hkv, c.s, c.dv}, -1, 1, 22);
    Buffer dout = randomBuffer({c.b, c.hq, c.t, c.dv}, -1, 1, 23);
    Buffer dq = randomBuffer(q.shape, -9, 9, 24),
           dk = randomBuffer(k.shape, -9, 9, 25),
           dv = randomBuffer(v.shape, -9, 9, 26);
    int64_t blocks = c.softcap > 0 ? 3 : 2;
    Buffer ws(DType::F32, {2 * blocks * 64 * c.s});
    double scale = 0.6;
    std::vector<Attribute> attrs = {intAttr("causal", c.causal),
                                    floatAttr("scale", scale)};
    if (c.window > 0) {
      attrs.push_back(intAttr("window", c.window));
    }
    if (c.softcap > 0) {
      attrs.push_back(floatAttr("softcap", c.softcap));
    }
    if (!c.slopes.empty()) {
      Attribute a;
      a.kind = Attribute::Kind::Floats;
      a.name = "alibi_slopes";
      a.floats = c.slopes;
      attrs.push_back(a);
    }
    Buffer bias = c.bias ? *c.bias : Buffer(DType::F32, {1});
    std::vector<Buffer *> ops = {&dout, &q, &k, &v};
    std::vector<Buffer *> forwardOps = {&q, &k, &v};
    if (c.bias) {
      attrs.push_back(intAttr("bias", 1));
      ops.push_back(&bias);
      forwardOps.push_back(&bias);
    }
    size_t out = ops.size();
    ops.insert(ops.end(), {&dq, &dk, &dv, &ws});
    runGrad("attention_grad", ops, out, attrs, true);
    auto want = attentionGradRef(c, dout, q, k, v, scale);
    expectAllNear(dq, want[0], kRtol, 1e-4, what + " dq");
    expectAllNear(dk, want[1], kRtol, 1e-4, what + " dk");
    expectAllNear(dv, want[2], kRtol, 1e-4, what + " dv");
    if (c.t * c.s > 1000) {
      continue; // finite differences on the small cases only
    }
    Buffer y(DType::F32, dout.shape), fws(DType::F32, {64 * c.s});
    size_t y0 = forwardOps.size();
    forwardOps.insert(forwardOps.end(), {&y, &fws});
    expectMatchesFd(dq, "attention", forwardOps, y0, 0, dout, attrs);
    expectMatchesFd(dk, "attention", forwardOps, y0, 1, dout, attrs);
    expectMatchesFd(dv, "attention", forwardOps, y0, 2, dout, attrs);
  }
  // A bias that does not broadcast is named.
  Buffer q(DType::F32, {1, 2, 3, 4}), bad(DType::F32, {1, 3, 3, 5});
  Buffer y(DType::F32, {1, 2, 3, 4}), fws(DType::F32, {64 * 3});
  EXPECT_EQ(checkKernel("attention", {&q, &q, &q, &bad, &y, &fws},
                        {intAttr("bias", 1)}),
            "operand 3 (bias) of shape [1, 3, 3, 5] does not broadcast to the "
            "scores [1, 2, 3, 3]");
}

//===----------------------------------------------------------------------===//
// Threads and checks
//===----------------------------------------------------------------------===//

// Tests a padding mask over a left-padded sequence: batch entry 1's first
// kPads keys have bias -inf, so under the causal mask its first kPads query
// rows see no key at all. Those rows get zeros and zero gradients (not NaN,
// which would reach every row through P V); the other rows are what a
// finite -1e30 bias gives, whose hidden rows instead spread evenly over the
// hidden keys (their dout zeroed there, so they add nothing to dk, dv).
TEST(GradientKernelsTest, AttentionBiasHidingWholeRowsGivesZeros) {
  constexpr int64_t kB = 2, kH = 2, kT = 7, kD = 4, kPads = 3;
  const float inf = std::numeric_limits<float>::infinity();
  Buffer hiding(DType::F32, {kB, 1, 1, kT}), finite(DType::F32, {kB, 1, 1, kT});
  for (int64_t i = 0; i < kB * kT; ++i) {
    bool pad = i >= kT && i < kT + kPads;
    hiding.data<float>()[i] = pad ? -inf : 0.0f;
    finite.data<float>()[i] = pad ? -1e30f : 0.0f;
  }
  auto hidden = [&](int64_t row) { // row of [B, H, T]
    return row / (kH * kT) == 1 && row % kT < kPads;
  };
  Buffer q = randomBuffer({kB, kH, kT, kD}, -1, 1, 40);
  Buffer k = randomBuffer({kB, kH, kT, kD}, -1, 1, 41);
  Buffer v = randomBuffer({kB, kH, kT, kD}, -1, 1, 42);
  Buffer dout = randomBuffer({kB, kH, kT, kD}, -1, 1, 43);
  for (int64_t row = 0; row < kB * kH * kT; ++row) {
    for (int64_t i = 0; hidden(row) && i < kD; ++i) {
      dout.data<float>()[row * kD + i] = 0.0f;
    }
  }
  std::vector<Attribute> attrs = {intAttr("causal", 1), intAttr("bias", 1)};
  struct Result {
    Buffer y, dq, dk, dv;
  };
  auto run = [&](Buffer &bias) {
    Result r{Buffer(DType::F32, q.shape), Buffer(DType::F32, q.shape),
             Buffer(DType::F32, k.shape), Buffer(DType::F32, v.shape)};
    Buffer fws(DType::F32, {64 * kT}), ws(DType::F32, {2 * 2 * 64 * kT});
    EXPECT_EQ(runKernel("attention", {&q, &k, &v, &bias, &r.y, &fws}, attrs),
              "");
    runGrad("attention_grad",
            {&dout, &q, &k, &v, &bias, &r.dq, &r.dk, &r.dv, &ws}, 5, attrs,
            true);
    return r;
  };
  Result got = run(hiding), want = run(finite);
  for (int64_t row = 0; row < kB * kH * kT; ++row) {
    for (int64_t i = 0; i < kD; ++i) {
      int64_t at = row * kD + i;
      if (hidden(row)) {
        EXPECT_EQ(got.y.data<float>()[at], 0.0f) << "y row " << row;
        EXPECT_EQ(got.dq.data<float>()[at], 0.0f) << "dq row " << row;
      } else {
        EXPECT_EQ(got.y.data<float>()[at], want.y.data<float>()[at])
            << "y row " << row;
        EXPECT_EQ(got.dq.data<float>()[at], want.dq.data<float>()[at])
            << "dq row " << row;
      }
    }
  }
  expectAllNear(got.dk, values(want.dk), 0, 0, "dk");
  expectAllNear(got.dv, values(want.dv), 0, 0, "dv");
}

TEST(GradientKernelsTest, ThreadCountDoesNotChangeBitsOnSplitShapes) {
  // Large enough that every kernel's rows or column blocks split over the
  // pool (runGrad compares 3 threads with 1).
  Buffer x = randomBuffer({512, 384}, -2, 2, 37);
  Buffer dy = randomBuffer({512, 384}, -1, 1, 38);
  Buffer w = randomBuffer({384}, 0.5, 1.5, 39);
  Buffer dx(DType::F32, x.shape), dw(DType::F32, {384}), db(DType::F32, {384});
  Buffer ws(DType::F32, {1024});
  std::vector<Attribute> eps = {floatAttr("epsilon", 1e-6)};
  runGrad("rms_norm_grad", {&dy, &x, &w, &dx, &dw, &ws}, 3, eps);
  runGrad("layer_norm_grad", {&dy, &x, &w, &dx, &dw, &db, &ws}, 3, eps);
  Buffer ids = randomBuffer({512}, 0, 50, 40, DType::I64);
  Buffer dt = randomBuffer({50, 384}, -1, 1, 41);
  runGrad("embedding_grad", {&dy, &ids, &dt}, 2, {intAttr("accumulate", 1)});
  Buffer dw2 = randomBuffer({384, 384}, -1, 1, 42);
  runGrad("linear_weight_grad", {&dy, &x, &dw2}, 2, {intAttr("accumulate", 1)});
  AttentionCase c = {2, 4, 2, 100, 130, 16, 16, true};
  Buffer q = randomBuffer({c.b, c.hq, c.t, c.d}, -1, 1, 46);
  Buffer k = randomBuffer({c.b, c.hkv, c.s, c.d}, -1, 1, 47);
  Buffer v = randomBuffer({c.b, c.hkv, c.s, c.dv}, -1, 1, 48);
  Buffer dout = randomBuffer({c.b, c.hq, c.t, c.dv}, -1, 1, 49);
  Buffer dq(DType::F32, q.shape), dk(DType::F32, k.shape),
      dv(DType::F32, v.shape);
  Buffer aws(DType::F32, {3 * 2 * 64 * c.s});
  runGrad("attention_grad", {&dout, &q, &k, &v, &dq, &dk, &dv, &aws}, 4,
          {intAttr("causal", 1)}, true);
}

TEST(GradientKernelsTest, EmptyExtentsStillDefineOutputs) {
  // No rows, no keys or no tokens: sums over nothing are zeros.
  Buffer dy0(DType::F32, {0, 5}), x0(DType::F32, {0, 4}), w5(DType::F32, {5});
  Buffer dw = randomBuffer({5, 4}, 1, 2, 50), dx0(DType::F32, {0, 5});
  runGrad("linear_weight_grad", {&dy0, &x0, &dw}, 2);
  expectAllNear(dw, std::vector<double>(20, 0.0), 0, 0, "linear_weight_grad");
  Buffer dw5 = randomBuffer({5}, 1, 2, 51), ws0(DType::F32, {0});
  runGrad("rms_norm_grad", {&dy0, &dy0, &w5, &dx0, &dw5, &ws0}, 3,
          {floatAttr("epsilon", 1e-6)});
  expectAllNear(dw5, std::vector<double>(5, 0.0), 0, 0, "rms_norm_grad");
  Buffer ids0(DType::I32, {0}), dt = randomBuffer({3, 5}, 1, 2, 52);
  runGrad("embedding_grad", {&dy0, &ids0, &dt}, 2);
  expectAllNear(dt, std::vector<double>(15, 0.0), 0, 0, "embedding_grad");
  Buffer q = randomBuffer({1, 2, 3, 4}, -1, 1, 53),
         kv(DType::F32, {1, 1, 0, 4});
  Buffer dq = randomBuffer({1, 2, 3, 4}, 1, 2, 54),
         dk(DType::F32, {1, 1, 0, 4});
  Buffer dv(DType::F32, {1, 1, 0, 4});
  runGrad("attention_grad", {&q, &q, &kv, &kv, &dq, &dk, &dv, &ws0}, 4);
  expectAllNear(dq, std::vector<double>(24, 0.0), 0, 0, "attention_grad");
}

TEST(GradientKernelsTest, ChecksRejectMalformedLaunches) {
  Buffer f23(DType::F32, {2, 3}), f24(DType::F32, {2, 4}), f3(DType::F32, {3});
  Buffer d23(DType::F64, {2, 3}), f4(DType::F32, {4}), f43(DType::F32, {4, 3});
  Buffer f2(DType::F32, {2}), f34(DType::F32, {3, 4});
  Buffer i2(DType::I64, {2}), fIds(DType::F32, {2}), f1(DType::F32, {1});
  Buffer q(DType::F32, {1, 4, 8, 16}), k(DType::F32, {1, 2, 8, 16}),
      v(DType::F32, {1, 2, 8, 16}), k3(DType::F32, {1, 3, 8, 16});
  Buffer ws(DType::F32, {2 * 64 * 8}), oddWs(DType::F32, {3 * 64 * 8});
  Attribute eps = floatAttr("epsilon", 1e-6);
  struct Case {
    const char *kernel;
    std::vector<Buffer *> ops;
    std::vector<Attribute> attrs;
    const char *expected; // a substring of the message
  };
  const Case cases[] = {
      {"linear_weight_grad", {&f23, &f23}, {}, "expected 3 operands, got 2"},
      {"linear_weight_grad", {&d23, &f24, &f34}, {}, "operand 0 must be f32"},
      {"linear_weight_grad", {&f23, &f43, &f34}, {}, "leading dimensions"},
      {"linear_weight_grad",
       {&f23, &f24, &f43},
       {},
       "operand 2 must have shape [3, 4]"},
      {"linear_weight_grad",
       {&f23, &f24, &f34},
       {intAttr("accumulate", 2)},
       "attribute 'accumulate' is 2"},
      {"rms_norm_grad",
       {&f23, &f23, &f3, &f23, &f3, &f1},
       {eps},
       "workspace of 1 floats is smaller than 2"},
      {"rms_norm_grad",
       {&f23, &f23, &f4, &f23, &f3, &f2},
       {eps},
       "operand 2 must have shape [3]"},
      {"rms_norm_grad",
       {&f23, &f23, &f3, &f23, &f3, &f2},
       {},
       "missing float attribute 'epsilon'"},
      {"layer_norm_grad",
       {&f23, &d23, &f3, &f23, &f3, &f3, &f4},
       {eps},
       "operand 1 must be f32"},
      {"layer_norm_grad",
       {&f23, &f23, &f3, &f23, &f3, &f4, &f4},
       {eps},
       "operand 5 must have shape [3]"},
      {"layer_norm_grad",
       {&f23, &f23, &f3, &f23, &f3, &f3, &f2},
       {eps},
       "smaller than 4"},
      {"attention_grad",
       {&q, &q, &k, &v, &q, &k, &v},
       {},
       "expected 8 operands"},
      {"attention_grad",
       {&q, &q, &k3, &k3, &q, &k3, &k3, &ws},
       {},
       "must be a multiple of key/value heads"},
      {"attention_grad",
       {&q, &q, &k, &v, &q, &k3, &v, &ws},
       {},
       "operand 5 must have shape [1, 2, 8, 16]"},
      {"attention_grad",
       {&k, &q, &k, &v, &q, &k, &v, &ws},
       {},
       "operand 0 must have shape [1, 4, 8, 16]"},
      {"attention_grad",
       {&q, &q, &k, &v, &q, &k, &v, &oddWs},
       {},
       "positive multiple of 2 x 64 x 8"},
      {"attention_grad",
       {&q, &q, &k, &v, &q, &k, &v, &ws},
       {intAttr("causal", 3)},
       "attribute 'causal' is 3"},
      {"embedding_grad",
       {&f23, &fIds, &f43},
       {},
       "operand 1 must be i32 or i64"},
      {"embedding_grad",
       {&f24, &i2, &f43},
       {},
       "operand 0 must have shape [2, 3]"},
  };
  for (const Case &c : cases) {
    std::string message = checkKernel(c.kernel, c.ops, c.attrs);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << c.kernel << ": got '" << message << "', expected '" << c.expected
        << "'";
    ASSERT_FALSE(message.empty()) << c.kernel;
    EXPECT_TRUE(std::islower(static_cast<unsigned char>(message[0])))
        << message;
    EXPECT_NE(message.back(), '.') << message;
  }
  // Well-formed neighbours of the cases above pass.
  EXPECT_EQ(checkKernel("attention_grad", {&q, &q, &k, &v, &q, &k, &v, &ws}),
            "");
  EXPECT_EQ(checkKernel("linear_weight_grad", {&f23, &f24, &f34}), "");
}
