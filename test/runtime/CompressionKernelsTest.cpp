//===- CompressionKernelsTest.cpp - gradient compression kernels ----------===//
//
// The kernels of runtime/cpu/CompressionKernels.cpp against plain double
// loops written here, at explicit tolerances: 1e-6 relative (plus 1e-7
// absolute) for the products and Gram-Schmidt, exact bits for the
// elementwise error feedback and Q's fixed first values (whose first
// entries were printed by Python's integers for the end-to-end test's
// PyTorch side, test/e2e/train_powersgd.py); top-k and sign-SGD against
// sorts and loops written here, exactly where nothing rounds twice, else
// at 1e-6 relative.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

namespace {

/// Row-major [rows, cols] matrix product in double: op(a) op(b).
std::vector<double> referenceProduct(const Buffer &a, bool ta, const Buffer &b,
                                     bool tb, int64_t m, int64_t k, int64_t n) {
  int64_t aCols = a.shape[1];
  int64_t bCols = b.shape[1];
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        double x = ta ? a.at(p * aCols + i) : a.at(i * aCols + p);
        double y = tb ? b.at(j * bCols + p) : b.at(p * bCols + j);
        sum += x * y;
      }
      c[static_cast<size_t>(i * n + j)] = sum;
    }
  }
  return c;
}

} // namespace

TEST(CompressionKernelsTest, ErrorFeedbackAddsKeepsAndStoresTheResidual) {
  // Reference: g' = g + e, e' = g' (the same f32 sum), then after the
  // "all-reduce" (g'' given) e'' = e' - g''. Sizes past one pool chunk.
  int64_t n = 3 * 32768 + 5;
  Buffer grad = randomBuffer({n}, -1, 1, 1);
  Buffer error = randomBuffer({n}, -0.1, 0.1, 2);
  std::vector<float> sum(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    sum[static_cast<size_t>(i)] =
        static_cast<float>(grad.at(i)) + static_cast<float>(error.at(i));
  }
  ASSERT_EQ(runKernel("error_feedback_add", {&error, &grad}), "");
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(static_cast<float>(grad.at(i)), sum[static_cast<size_t>(i)]);
    ASSERT_EQ(static_cast<float>(error.at(i)), sum[static_cast<size_t>(i)]);
  }
  Buffer reduced = randomBuffer({n}, -1, 1, 3);
  ASSERT_EQ(runKernel("error_feedback_store", {&reduced, &error}), "");
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(static_cast<float>(error.at(i)),
              sum[static_cast<size_t>(i)] - static_cast<float>(reduced.at(i)));
  }
  Buffer shorter = randomBuffer({n - 1}, -1, 1, 4);
  EXPECT_NE(checkKernel("error_feedback_add", {&error, &shorter}), "");
}

TEST(CompressionKernelsTest, LowRankInitIsTheDocumentedFunction) {
  // The formula in 64-bit integers, and values Python printed for k = 0..5
  // ((k * 2654435761 + 12345) % 2**32 >> 8) % 2001 - 1000) / 1000.
  Buffer q(DType::F32, {7, 3});
  ASSERT_EQ(runKernel("lowrank_init", {&q}), "");
  for (int64_t k = 0; k < q.numel(); ++k) {
    uint64_t u = (static_cast<uint64_t>(k) * 2654435761ull + 12345ull) %
                 (uint64_t(1) << 32);
    int64_t v = static_cast<int64_t>((u >> 8) % 2001);
    EXPECT_EQ(static_cast<float>(q.at(k)),
              static_cast<float>(v - 1000) / 1000.0f)
        << k;
    EXPECT_EQ(static_cast<float>(q.at(k)), cpu::lowRankInitValue(k));
  }
  const double printed[] = {-0.952, 0.756, -0.368, -0.66, 0.216, -0.908};
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(static_cast<float>(q.at(k)), static_cast<float>(printed[k])) << k;
  }
}

TEST(CompressionKernelsTest, OrthogonalizeIsGramSchmidtOnColumns) {
  // Reference: classical Gram-Schmidt in double, column by column as the
  // hook does (normalize, then remove the projection from later columns);
  // the result's columns are orthonormal.
  for (int64_t cols : {int64_t(1), int64_t(2), int64_t(4)}) {
    int64_t rows = 37;
    Buffer x = randomBuffer({rows, cols}, -1, 1, 10 + unsigned(cols));
    std::vector<double> want = values(x);
    for (int64_t i = 0; i < cols; ++i) {
      double norm = 0;
      for (int64_t r = 0; r < rows; ++r) {
        norm += want[r * cols + i] * want[r * cols + i];
      }
      norm = std::sqrt(norm);
      for (int64_t r = 0; r < rows; ++r) {
        want[r * cols + i] /= norm;
      }
      for (int64_t j = i + 1; j < cols; ++j) {
        double dot = 0;
        for (int64_t r = 0; r < rows; ++r) {
          dot += want[r * cols + i] * want[r * cols + j];
        }
        for (int64_t r = 0; r < rows; ++r) {
          want[r * cols + j] -= dot * want[r * cols + i];
        }
      }
    }
    ASSERT_EQ(runKernel("orthogonalize", {&x}), "");
    expectAllNear(x, want, 1e-5, 1e-6, "cols " + std::to_string(cols));
    for (int64_t i = 0; i < cols; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        double dot = 0;
        for (int64_t r = 0; r < rows; ++r) {
          dot += x.at(r * cols + i) * x.at(r * cols + j);
        }
        EXPECT_TRUE(near(dot, i == j ? 1.0 : 0.0, 0, 1e-5)) << i << "," << j;
      }
    }
  }
  Buffer wide(DType::F32, {2, 3});
  EXPECT_NE(checkKernel("orthogonalize", {&wide}), "");
  Buffer tall(DType::F32, {3, 2});
  EXPECT_NE(checkKernel("orthogonalize", {&tall}, {floatAttr("epsilon", -1)}),
            "");
}

TEST(CompressionKernelsTest, OrthogonalizeWithEpsilonKeepsAZeroColumnFinite) {
  // The hook's orthogonalization_epsilon: a zero column divided by 0 + eps
  // stays zero instead of becoming NaN.
  Buffer x = filled(DType::F32, {3, 1}, {0, 0, 0});
  ASSERT_EQ(runKernel("orthogonalize", {&x}, {floatAttr("epsilon", 1e-8)}), "");
  expectAllNear(x, {0, 0, 0}, 0, 0, "zero column");
}

TEST(CompressionKernelsTest, LowRankMatmulComputesEachPowerSgdProduct) {
  // P = M Q, Q = M^T P and M = P Q^T on a gradient of rank 3 (read as
  // [6, 4 * 5]), against double loops at 1e-6 relative.
  Buffer grad = randomBuffer({6, 4, 5}, -1, 1, 20);
  Buffer gradMatrix = grad;
  gradMatrix.shape = {6, 20};
  int64_t r = 2;
  Buffer q = randomBuffer({20, r}, -1, 1, 21);
  Buffer p(DType::F32, {6, r});
  ASSERT_EQ(runKernel("lowrank_matmul", {&grad, &q, &p}), "");
  expectAllNear(p, referenceProduct(gradMatrix, false, q, false, 6, 20, r),
                1e-6, 1e-7, "P = M Q");
  Buffer q2(DType::F32, {20, r});
  ASSERT_EQ(runKernel("lowrank_matmul", {&grad, &p, &q2},
                      {intAttr("transpose_a", 1)}),
            "");
  expectAllNear(q2, referenceProduct(gradMatrix, true, p, false, 20, 6, r),
                1e-6, 1e-7, "Q = M^T P");
  Buffer out(DType::F32, {6, 4, 5});
  ASSERT_EQ(
      runKernel("lowrank_matmul", {&p, &q2, &out}, {intAttr("transpose_b", 1)}),
      "");
  expectAllNear(out, referenceProduct(p, false, q2, true, 6, r, 20), 1e-6, 1e-7,
                "M = P Q^T");
  EXPECT_NE(checkKernel("lowrank_matmul", {&grad, &p, &q2}), "");
}

//===----------------------------------------------------------------------===//
// Top-k and EF-SignSGD (a bucket of gradients read as one flat vector)
//===----------------------------------------------------------------------===//

namespace {

/// The reference top-k of `p` (flat): positions sorted by |p| descending,
/// then position ascending, the first k kept, returned in position order.
std::vector<int64_t> referenceTopK(const std::vector<float> &p, int64_t k) {
  std::vector<int64_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::fabs(p[a]) > std::fabs(p[b]);
  });
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

/// Concatenates the buffers' elements as f32.
std::vector<float> flatOf(const std::vector<const Buffer *> &parts) {
  std::vector<float> flat;
  for (const Buffer *b : parts) {
    for (int64_t i = 0; i < b->numel(); ++i) {
      flat.push_back(static_cast<float>(b->at(i)));
    }
  }
  return flat;
}

} // namespace

TEST(CompressionKernelsTest, TopKKeepsTheLargestAndLeavesTheResidual) {
  // Reference: p = g + e (f32), the k largest |p| by a stable sort (ties:
  // the lower position), values p at them, the residual p with them zeroed;
  // exact, since nothing is rounded twice. Odd sizes over three gradients,
  // k from 1 to every entry.
  Buffer g0 = randomBuffer({5, 3}, -1, 1, 30);
  Buffer g1 = randomBuffer({7}, -1, 1, 31);
  Buffer g2 = randomBuffer({2, 2, 3}, -1, 1, 32);
  int64_t n = 15 + 7 + 12;
  for (int64_t k : {int64_t(1), int64_t(5), int64_t(17), n}) {
    Buffer e0 = randomBuffer({5, 3}, -0.5, 0.5, 33);
    Buffer e1 = randomBuffer({7}, -0.5, 0.5, 34);
    Buffer e2 = randomBuffer({2, 2, 3}, -0.5, 0.5, 35);
    std::vector<float> g = flatOf({&g0, &g1, &g2});
    std::vector<float> p = flatOf({&e0, &e1, &e2});
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] += g[i];
    }
    std::vector<int64_t> want = referenceTopK(p, k);
    Buffer values(DType::F32, {k});
    Buffer indices(DType::I32, {k});
    ASSERT_EQ(runKernel("topk_compress",
                        {&g0, &g1, &g2, &e0, &e1, &e2, &values, &indices},
                        {intAttr("members", 3)}),
              "");
    std::vector<float> residual = flatOf({&e0, &e1, &e2});
    for (int64_t j = 0; j < k; ++j) {
      ASSERT_EQ(indices.at(j), double(want[j])) << "k " << k << " pair " << j;
      ASSERT_EQ(static_cast<float>(values.at(j)), p[want[j]]);
      p[want[j]] = 0;
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(residual[i], p[i]) << "k " << k << " residual " << i;
    }
  }
}

TEST(CompressionKernelsTest, TopKBreaksTiesByPositionWithoutResidual) {
  // Equal magnitudes of either sign: the lower positions win, whatever
  // order the heap meets them in; no residual operands: the gradients are
  // read, not written.
  Buffer g = filled(DType::F32, {9}, {0.5, -1, 1, 0.25, -1, 1, 0, -0.5, 1});
  Buffer before = g;
  Buffer values(DType::F32, {4});
  Buffer indices(DType::I32, {4});
  ASSERT_EQ(runKernel("topk_compress", {&g, &values, &indices},
                      {intAttr("members", 1)}),
            "");
  expectAllNear(indices, {1, 2, 4, 5}, 0, 0, "indices");
  expectAllNear(values, {-1, 1, -1, 1}, 0, 0, "values");
  EXPECT_TRUE(g.sameBytes(before));
  // A NaN ranks above every number (sent, not hidden in the residual);
  // an infinity ties with it and the position decides.
  Buffer odd = filled(DType::F32, {5}, {1, std::nan(""), -3, INFINITY, 2});
  Buffer two(DType::F32, {2});
  Buffer twoIdx(DType::I32, {2});
  ASSERT_EQ(runKernel("topk_compress", {&odd, &two, &twoIdx},
                      {intAttr("members", 1)}),
            "");
  expectAllNear(twoIdx, {1, 3}, 0, 0, "NaN and inf first");
  EXPECT_TRUE(std::isnan(two.at(0)));
  Buffer tooMany(DType::F32, {10});
  Buffer tooManyIdx(DType::I32, {10});
  EXPECT_NE(checkKernel("topk_compress", {&g, &tooMany, &tooManyIdx},
                        {intAttr("members", 1)}),
            "");
  EXPECT_NE(checkKernel("topk_compress", {&g, &values, &indices}), "");
}

TEST(CompressionKernelsTest, SparseAverageScatterAddsEveryRanksPairs) {
  // Reference: zeros, then value * scale added at each position in order
  // (positions repeat across ranks), over two gradients of odd sizes;
  // 1e-7 relative (sums of at most three f32 products).
  Buffer g0 = randomBuffer({3, 3}, -1, 1, 40);
  Buffer g1 = randomBuffer({4}, -1, 1, 41);
  Buffer values = filled(DType::F32, {6}, {1, 2, 3, 4, 5, 6});
  Buffer indices = filled(DType::I32, {6}, {0, 8, 12, 0, 9, 12});
  ASSERT_EQ(runKernel("sparse_average", {&values, &indices, &g0, &g1},
                      {floatAttr("scale", 0.5)}),
            "");
  std::vector<double> want(13, 0.0);
  for (int j = 0; j < 6; ++j) {
    want[static_cast<size_t>(indices.at(j))] += values.at(j) * 0.5;
  }
  expectAllNear(g0, std::vector<double>(want.begin(), want.begin() + 9), 1e-7,
                0, "g0");
  expectAllNear(g1, std::vector<double>(want.begin() + 9, want.end()), 1e-7, 0,
                "g1");
  Buffer outside = filled(DType::I32, {6}, {0, 8, 13, 0, 9, 12});
  EXPECT_NE(runKernel("sparse_average", {&values, &outside, &g0, &g1},
                      {floatAttr("scale", 0.5)}),
            "");
}

TEST(CompressionKernelsTest, SignCompressPacksSignsScaleAndResidual) {
  // Reference: p = g + e, per gradient t scale_t = sum |p_t| / n_t in
  // double, bit i of the flat bucket set for p[i] < 0 (a zero is +),
  // residual p - scale_t * sign(p); 6 + 7 = 13 entries over two gradients
  // (two bytes, the last partly used); 1e-6 relative.
  Buffer g0 = filled(DType::F32, {2, 3}, {0.5, -1, 0, 2, -0.25, 1});
  Buffer g1 = filled(DType::F32, {7}, {-3, 0.125, 0, -0.5, 4, -2, 1});
  Buffer e0 = randomBuffer({2, 3}, -0.1, 0.1, 50);
  Buffer e1 = randomBuffer({7}, -0.1, 0.1, 51);
  e0.set(2, 0); // p = 0 exactly: sign +
  std::vector<float> p = flatOf({&g0, &g1});
  std::vector<float> e = flatOf({&e0, &e1});
  double l1[2] = {0, 0};
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] += e[i];
    l1[i < 6 ? 0 : 1] += std::fabs(double(p[i]));
  }
  double scale[2] = {l1[0] / 6.0, l1[1] / 7.0};
  Buffer signs(DType::U8, {2});
  Buffer s(DType::F32, {2});
  ASSERT_EQ(runKernel("sign_compress", {&g0, &g1, &e0, &e1, &signs, &s},
                      {intAttr("members", 2)}),
            "");
  EXPECT_TRUE(near(s.at(0), scale[0], 1e-6, 0));
  EXPECT_TRUE(near(s.at(1), scale[1], 1e-6, 0));
  std::vector<float> residual = flatOf({&e0, &e1});
  for (int64_t i = 0; i < 13; ++i) {
    bool bit = (static_cast<int>(signs.at(i / 8)) >> (i % 8)) & 1;
    EXPECT_EQ(bit, p[i] < 0) << i;
    double sign = p[i] < 0 ? -1 : 1;
    EXPECT_TRUE(near(residual[i], p[i] - scale[i < 6 ? 0 : 1] * sign, 1e-6,
                     1e-7))
        << i;
  }
  EXPECT_EQ(static_cast<int>(signs.at(1)) >> 5, 0); // unused bits stay 0
  Buffer shortSigns(DType::U8, {1});
  EXPECT_NE(checkKernel("sign_compress", {&g0, &g1, &shortSigns, &s},
                        {intAttr("members", 2)}),
            "");
  Buffer oneScale(DType::F32, {1});
  EXPECT_NE(checkKernel("sign_compress", {&g0, &g1, &signs, &oneScale},
                        {intAttr("members", 2)}),
            "");
}

TEST(CompressionKernelsTest, SignAverageIsTheMeanOfScaledSigns) {
  // Three ranks' signs (4 + 5 = 9 entries: two bytes each) and scales (two
  // per rank, one per gradient); reference the mean over ranks of
  // scale_{r,t} * (+-1) in double; 1e-6 relative.
  Buffer signs = filled(DType::U8, {6}, {0x0f, 0x01, 0xaa, 0x00, 0xff, 0x01});
  Buffer scales = filled(DType::F32, {6}, {0.5, 3, 0.25, 1, 2, 0.125});
  Buffer g0(DType::F32, {4});
  Buffer g1(DType::F32, {5});
  ASSERT_EQ(runKernel("sign_average", {&signs, &scales, &g0, &g1}), "");
  std::vector<double> want(9, 0.0);
  for (int64_t i = 0; i < 9; ++i) {
    for (int64_t r = 0; r < 3; ++r) {
      bool bit = (static_cast<int>(signs.at(r * 2 + i / 8)) >> (i % 8)) & 1;
      want[i] += (bit ? -1 : 1) * scales.at(r * 2 + (i < 4 ? 0 : 1)) / 3.0;
    }
  }
  expectAllNear(g0, std::vector<double>(want.begin(), want.begin() + 4), 1e-6,
                0, "g0");
  expectAllNear(g1, std::vector<double>(want.begin() + 4, want.end()), 1e-6, 0,
                "g1");
  Buffer fourScales = filled(DType::F32, {4}, {1, 1, 1, 1});
  EXPECT_NE(checkKernel("sign_average", {&signs, &fourScales, &g0, &g1}), "");
}

TEST(CompressionKernelsTest, WireInt8EncodesBlocksAndDecodesEveryRank) {
  // ZeRO++'s weight gather: three ranks' chunks of 128 elements (two blocks
  // of 64 each), one of them all zero; each rank's wire chunk is 128 codes
  // then two f32 scales (136 bytes). Reference: scale = absmax / 127, code
  // = round(x / scale); decoded within half a step (scale / 2) of the
  // value, every block's absmax exactly, a zero block exactly zero.
  const int64_t chunk = 128, ranks = 3, wire = 136;
  std::vector<Buffer> chunks;
  for (int64_t r = 0; r < ranks; ++r) {
    chunks.push_back(randomBuffer({chunk}, -2, 2, 60 + static_cast<int>(r)));
  }
  for (int64_t i = 0; i < 64; ++i) {
    chunks[1].set(64 + i, 0); // rank 1's second block: zeros
  }
  Buffer gathered(DType::U8, {ranks * wire});
  for (int64_t r = 0; r < ranks; ++r) {
    Buffer one(DType::U8, {wire});
    ASSERT_EQ(runKernel("quantize_wire_int8", {&chunks[r], &one}, {}), "");
    for (int64_t i = 0; i < wire; ++i) {
      gathered.set(r * wire + i, one.at(i));
    }
  }
  Buffer decoded(DType::F32, {ranks * chunk});
  ASSERT_EQ(runKernel("dequantize_wire_int8", {&gathered, &decoded},
                      {intAttr("chunk", chunk)}),
            "");
  for (int64_t r = 0; r < ranks; ++r) {
    for (int64_t b = 0; b < 2; ++b) {
      double absmax = 0;
      for (int64_t i = 0; i < 64; ++i) {
        absmax = std::max(absmax, std::fabs(chunks[r].at(b * 64 + i)));
      }
      double step = absmax / 127.0;
      for (int64_t i = 0; i < 64; ++i) {
        double x = chunks[r].at(b * 64 + i);
        double y = decoded.at(r * chunk + b * 64 + i);
        EXPECT_LE(std::fabs(y - x), step / 2 * (1 + 1e-6) + 1e-12)
            << "rank " << r << " element " << b * 64 + i;
        if (std::fabs(x) == absmax) {
          EXPECT_TRUE(near(std::fabs(y), absmax, 1e-6, 0));
        }
      }
    }
  }
  for (int64_t i = 64; i < 128; ++i) {
    EXPECT_EQ(decoded.at(chunk + i), 0.0);
  }
  // Sizes that do not follow the chunk and its blocks are refused.
  Buffer shortWire(DType::U8, {wire - 1});
  EXPECT_NE(checkKernel("quantize_wire_int8", {&chunks[0], &shortWire}, {}),
            "");
  Buffer oddChunk = randomBuffer({100}, -1, 1, 70);
  Buffer oddWire(DType::U8, {106});
  EXPECT_NE(checkKernel("quantize_wire_int8", {&oddChunk, &oddWire}, {}), "");
  EXPECT_NE(checkKernel("dequantize_wire_int8", {&gathered, &decoded},
                        {intAttr("chunk", 96)}),
            "");
  Buffer fewer(DType::F32, {2 * chunk});
  EXPECT_NE(checkKernel("dequantize_wire_int8", {&gathered, &fewer},
                        {intAttr("chunk", chunk)}),
            "");
}

TEST(CompressionKernelsTest, WireInt8ReduceSumsEveryRanksChunkForThisRank) {
  // ZeRO++'s quantized gradient reduce-scatter at 4 ranks: each rank's
  // bucket of 4 chunks of 128 is quantized chunk by chunk (`chunk`), rank d
  // receives chunk d of every rank and reduces them. Reference: the
  // received chunks decoded by dequantize_wire_int8, then summed in f32 in
  // rank order (and divided by 4 for the average): equal to the bit. Each
  // chunk's wire is its own (the same bytes as quantizing it alone), and
  // the average is within the ranks' half steps of the exact f32 one.
  const int64_t chunk = 128, ranks = 4, wire = 136;
  std::vector<Buffer> buckets, wires;
  for (int64_t r = 0; r < ranks; ++r) {
    buckets.push_back(
        randomBuffer({ranks * chunk}, -3, 3, 80 + static_cast<int>(r)));
    wires.emplace_back(DType::U8, std::vector<int64_t>{ranks * wire});
    ASSERT_EQ(runKernel("quantize_wire_int8", {&buckets[r], &wires[r]},
                        {intAttr("chunk", chunk)}),
              "");
  }
  Buffer alone(DType::F32, {chunk}), aloneWire(DType::U8, {wire});
  for (int64_t i = 0; i < chunk; ++i) {
    alone.set(i, buckets[2].at(3 * chunk + i));
  }
  ASSERT_EQ(runKernel("quantize_wire_int8", {&alone, &aloneWire}, {}), "");
  for (int64_t i = 0; i < wire; ++i) {
    ASSERT_EQ(wires[2].at(3 * wire + i), aloneWire.at(i)) << "byte " << i;
  }
  for (int64_t d = 0; d < ranks; ++d) {
    Buffer received(DType::U8, {ranks * wire});
    for (int64_t r = 0; r < ranks; ++r) {
      for (int64_t i = 0; i < wire; ++i) {
        received.set(r * wire + i, wires[r].at(d * wire + i));
      }
    }
    Buffer decoded(DType::F32, {ranks * chunk});
    ASSERT_EQ(runKernel("dequantize_wire_int8", {&received, &decoded},
                        {intAttr("chunk", chunk)}),
              "");
    Buffer sum(DType::F32, {chunk}), mean(DType::F32, {chunk});
    ASSERT_EQ(runKernel("dequantize_reduce_wire_int8", {&received, &sum},
                        {intAttr("chunk", chunk)}),
              "");
    ASSERT_EQ(runKernel("dequantize_reduce_wire_int8", {&received, &mean},
                        {intAttr("chunk", chunk), intAttr("average", 1)}),
              "");
    for (int64_t i = 0; i < chunk; ++i) {
      float reference = 0, exact = 0, halfSteps = 0;
      for (int64_t r = 0; r < ranks; ++r) {
        reference += static_cast<float>(decoded.at(r * chunk + i));
        exact += static_cast<float>(buckets[r].at(d * chunk + i));
        double absmax = 0;
        for (int64_t k = 0; k < 64; ++k) {
          absmax = std::max(
              absmax, std::fabs(buckets[r].at(d * chunk + i / 64 * 64 + k)));
        }
        halfSteps += static_cast<float>(absmax / 127.0 / 2);
      }
      ASSERT_EQ(sum.at(i), static_cast<double>(reference)) << "element " << i;
      ASSERT_EQ(mean.at(i), static_cast<double>(reference / 4.0f))
          << "element " << i;
      EXPECT_LE(std::fabs(mean.at(i) - exact / 4.0), halfSteps / 4 + 1e-6)
          << "element " << i;
    }
  }
  // The chunk is required, the bytes must be whole chunks, and the
  // average is 0 or 1.
  Buffer received(DType::U8, {ranks * wire}), sums(DType::F32, {chunk});
  EXPECT_NE(checkKernel("dequantize_reduce_wire_int8", {&received, &sums},
                        {}),
            "");
  Buffer ragged(DType::U8, {ranks * wire - 4});
  EXPECT_NE(checkKernel("dequantize_reduce_wire_int8", {&ragged, &sums},
                        {intAttr("chunk", chunk)}),
            "");
  EXPECT_NE(checkKernel("dequantize_reduce_wire_int8", {&received, &sums},
                        {intAttr("chunk", chunk), intAttr("average", 2)}),
            "");
  Buffer bucketWire(DType::U8, {ranks * wire - 1});
  EXPECT_NE(checkKernel("quantize_wire_int8", {&buckets[0], &bucketWire},
                        {intAttr("chunk", chunk)}),
            "");
}

namespace {

/// Chunk `r` of a bucket of int4 wire chunks of `chunk` elements decoded
/// here (codes two a byte, low nibble first, then the f32 scales), not
/// through runtime/quant.
std::vector<float> referenceDecodeInt4(const Buffer &wires, int64_t r,
                                       int64_t chunk) {
  int64_t bytes = chunk / 2 + chunk / 16;
  std::vector<float> out(chunk);
  for (int64_t i = 0; i < chunk; ++i) {
    auto byte = static_cast<int>(wires.at(r * bytes + i / 2));
    int bits = (byte >> (4 * (i % 2))) & 0xF;
    int code = bits >= 8 ? bits - 16 : bits;
    uint8_t raw[4];
    for (int k = 0; k < 4; ++k) {
      raw[k] = static_cast<uint8_t>(
          wires.at(r * bytes + chunk / 2 + i / 64 * 4 + k));
    }
    float scale;
    std::memcpy(&scale, raw, 4);
    out[i] = static_cast<float>(code) * scale;
  }
  return out;
}

} // namespace

TEST(CompressionKernelsTest, WireInt4ReduceSumsEveryRanksChunkForThisRank) {
  // qgZ at 4 bits, 4 ranks: each rank's bucket of 4 chunks of 128 is
  // quantized chunk by chunk to int4 (128 / 2 codes + 2 scales = 72 bytes
  // a chunk); rank d receives chunk d of every rank and reduces them.
  // Reference: the received chunks decoded by the loop above, summed in
  // f32 in rank order (and divided by 4): equal to the bit. Every code in
  // [-7, 7], and the average within the ranks' half steps (absmax / 7 / 2)
  // of the exact f32 one.
  const int64_t chunk = 128, ranks = 4, wire = 72;
  std::vector<Buffer> buckets, wires;
  for (int64_t r = 0; r < ranks; ++r) {
    buckets.push_back(
        randomBuffer({ranks * chunk}, -3, 3, 90 + static_cast<int>(r)));
    wires.emplace_back(DType::U8, std::vector<int64_t>{ranks * wire});
    ASSERT_EQ(runKernel("quantize_wire_int4", {&buckets[r], &wires[r]},
                        {intAttr("chunk", chunk)}),
              "");
    for (int64_t i = 0; i < ranks * wire; ++i) {
      if (i % wire >= chunk / 2) {
        continue; // a scale's byte
      }
      auto byte = static_cast<int>(wires[r].at(i));
      EXPECT_NE(byte & 0xF, 8) << "rank " << r << " byte " << i;
      EXPECT_NE(byte >> 4, 8) << "rank " << r << " byte " << i;
    }
  }
  for (int64_t d = 0; d < ranks; ++d) {
    Buffer received(DType::U8, {ranks * wire});
    for (int64_t r = 0; r < ranks; ++r) {
      for (int64_t i = 0; i < wire; ++i) {
        received.set(r * wire + i, wires[r].at(d * wire + i));
      }
    }
    Buffer sum(DType::F32, {chunk}), mean(DType::F32, {chunk});
    ASSERT_EQ(runKernel("dequantize_reduce_wire_int4", {&received, &sum},
                        {intAttr("chunk", chunk)}),
              "");
    ASSERT_EQ(runKernel("dequantize_reduce_wire_int4", {&received, &mean},
                        {intAttr("chunk", chunk), intAttr("average", 1)}),
              "");
    std::vector<float> reference(chunk, 0.0f);
    for (int64_t r = 0; r < ranks; ++r) {
      std::vector<float> decoded = referenceDecodeInt4(received, r, chunk);
      for (int64_t i = 0; i < chunk; ++i) {
        reference[i] += decoded[i];
      }
    }
    for (int64_t i = 0; i < chunk; ++i) {
      float exact = 0, halfSteps = 0;
      for (int64_t r = 0; r < ranks; ++r) {
        exact += static_cast<float>(buckets[r].at(d * chunk + i));
        double absmax = 0;
        for (int64_t k = 0; k < 64; ++k) {
          absmax = std::max(
              absmax, std::fabs(buckets[r].at(d * chunk + i / 64 * 64 + k)));
        }
        halfSteps += static_cast<float>(absmax / 7.0 / 2);
      }
      ASSERT_EQ(sum.at(i), static_cast<double>(reference[i]))
          << "element " << i;
      ASSERT_EQ(mean.at(i), static_cast<double>(reference[i] / 4.0f))
          << "element " << i;
      EXPECT_LE(std::fabs(mean.at(i) - exact / 4.0), halfSteps / 4 + 1e-6)
          << "element " << i;
    }
  }
  // int8's sizes are refused by the int4 kernels, and the other way round.
  Buffer int8Wire(DType::U8, {ranks * 136}), sums(DType::F32, {chunk});
  EXPECT_NE(checkKernel("quantize_wire_int4", {&buckets[0], &int8Wire},
                        {intAttr("chunk", chunk)}),
            "");
  EXPECT_NE(checkKernel("quantize_wire_int8", {&buckets[0], &wires[0]},
                        {intAttr("chunk", chunk)}),
            "");
  Buffer ragged(DType::U8, {ranks * wire - 36});
  EXPECT_NE(checkKernel("dequantize_reduce_wire_int4", {&ragged, &sums},
                        {intAttr("chunk", chunk)}),
            "");
  EXPECT_NE(checkKernel("dequantize_reduce_wire_int4", {&wires[0], &sums},
                        {}),
            "");
}
