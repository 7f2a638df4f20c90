//===- QuantizedLinearKernelsTest.cpp - linear_quantized against a reference ===//
//
// The reference dequantizes the whole weight with quant::dequantizeTile
// (tested against bitsandbytes' arithmetic in test/runtime/quant) and
// multiplies in double. The kernel's f32 GEMM then differs by rounding
// only: |y - ref| <= 1e-5 (sum_k |x| |w| + |bias|) + 1e-6. Shapes are
// chosen so tiles are partial and split nf4 blocks, with several tasks
// for the 3-thread pool; every scheme runs both directions, with and
// without bias, on 3-D inputs. A disabled test times the kernel against
// the dense `linear` (run it with --gtest_also_run_disabled_tests).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernel.h"
#include "test/runtime/quant/QuantTestUtil.h"
#include "runtime/quant/Gptq.h"
#include "runtime/quant/QuantizedWeight.h"
#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;
using tailor::quant::QuantSpec;
using tailor::quant::Scheme;

namespace {

using tailor::quant::test_util::normalWeights;

/// A quantized weight: its spec and storage bytes.
struct Weight {
  QuantSpec spec;
  std::vector<uint8_t> storage;
};

/// `scheme` storage of a random [rows, cols] weight: quantized from normal
/// values, or for gptq packed from random codes, scales, zeros and groups.
Weight makeWeight(Scheme scheme, int64_t rows, int64_t cols, unsigned seed,
                  bool variant = false) {
  Weight w;
  w.spec.scheme = scheme;
  w.spec.rows = rows;
  w.spec.cols = cols;
  w.spec.doubleQuant = !variant;
  if (scheme == Scheme::Int8 && variant) {
    w.spec.outlierThreshold = 0.2f;
    w.spec.outlierColumns = 3;
  }
  if (scheme == Scheme::GPTQ && variant) {
    w.spec.bits = 3;
    w.spec.actOrder = true;
  }
  w.storage = tailor::quant::test_util::randomStorage(w.spec, seed);
  return w;
}

std::vector<Attribute> attributesOf(const QuantSpec &spec,
                                    bool transposeWeight) {
  return {stringAttr("scheme", tailor::quant::schemeName(spec.scheme)),
          intAttr("rows", spec.rows),
          intAttr("cols", spec.cols),
          intAttr("block_size", spec.blockSize),
          intAttr("double_quant", spec.doubleQuant),
          intAttr("nested_block_size", spec.nestedBlockSize),
          intAttr("bits", spec.bits),
          intAttr("group_size", spec.groupSize),
          intAttr("act_order", spec.actOrder),
          floatAttr("outlier_threshold", spec.outlierThreshold),
          intAttr("outlier_columns", spec.outlierColumns),
          intAttr("transpose_weight", transposeWeight)};
}

Buffer storageBuffer(const std::vector<uint8_t> &bytes) {
  Buffer b(DType::U8, {static_cast<int64_t>(bytes.size())});
  std::memcpy(b.data<uint8_t>(), bytes.data(), bytes.size());
  return b;
}

/// One launch's operands: x [2, 3, K], storage, (bias [N]), y [2, 3, N],
/// workspace for `workers`.
struct Launch {
  Buffer x, w, bias, y, workspace;
  bool withBias;

  Launch(const Weight &weight, bool transposeWeight, bool withBias,
         int64_t workers, unsigned seed)
      : x(randomBuffer({2, 3, transposeWeight ? weight.spec.rows
                                              : weight.spec.cols},
                       -1, 1, seed)),
        w(storageBuffer(weight.storage)),
        bias(randomBuffer({transposeWeight ? weight.spec.cols
                                           : weight.spec.rows},
                          -1, 1, seed + 1)),
        y(DType::F32,
          {2, 3, transposeWeight ? weight.spec.cols : weight.spec.rows}),
        workspace(DType::F32, {tailor::quant::linearWorkspaceFloats(
                                  weight.spec, transposeWeight, workers)}),
        withBias(withBias) {}

  std::vector<Buffer *> operands() {
    if (withBias) {
      return {&x, &w, &bias, &y, &workspace};
    }
    return {&x, &w, &y, &workspace};
  }
};

/// Checks y against x W^T (or x W) + bias in double, W dequantized whole.
void expectMatchesReference(const Weight &weight, bool transposeWeight,
                            const Launch &launch) {
  const QuantSpec &spec = weight.spec;
  std::vector<float> dense(spec.rows * spec.cols);
  tailor::quant::dequantizeTile(spec, weight.storage.data(), 0, spec.rows, 0,
                                spec.cols, dense.data(), spec.cols);
  const int64_t k = transposeWeight ? spec.rows : spec.cols;
  const int64_t n = transposeWeight ? spec.cols : spec.rows;
  const int64_t m = launch.x.numel() / k;
  int failures = 0;
  for (int64_t i = 0; i < m && failures < 5; ++i) {
    for (int64_t j = 0; j < n && failures < 5; ++j) {
      double sum = launch.withBias ? launch.bias.at(j) : 0.0;
      double magnitude = std::fabs(sum);
      for (int64_t p = 0; p < k; ++p) {
        const double wv =
            transposeWeight ? dense[p * spec.cols + j] : dense[j * spec.cols + p];
        const double term = launch.x.at(i * k + p) * wv;
        sum += term;
        magnitude += std::fabs(term);
      }
      const double got = launch.y.at(i * n + j);
      if (!(std::fabs(got - sum) <= 1e-5 * magnitude + 1e-6)) {
        ADD_FAILURE() << "y[" << i << ", " << j << "] = " << got
                      << ", reference " << sum << " (sum |x w| " << magnitude
                      << ")";
        ++failures;
      }
    }
  }
}

const KernelDef &kernel() {
  const KernelDef *def = findCpuKernel("linear_quantized");
  EXPECT_NE(def, nullptr);
  return *def;
}

} // namespace

// Tests every scheme, both directions, with and without bias, on 3-D
// inputs, against the double reference; and that 1 and 3 threads give the
// same bits. The shapes give several tasks, partial output tiles and
// contraction chunks (QuantizedWeightTest pins the tiling), and tiles that
// start mid nf4 block and, at odd cols, on an odd nibble:
//   [1056, 288]   x W^T: 3 tasks of 352 rows, depth 2 x 144;
//                 x W: 1 task, depth 4 x 224 + 160
//   [160, 1312]   x W^T: 1 task, depth 5 x 224 + 192;
//                 x W: 3 tasks of 448, 448, 416 columns
//   [75, 1001]    x W^T: depth 3 x 256 + 233; x W: tasks of 512 and 489
//                 (not gptq, whose packing needs multiples of 32)
TEST(QuantizedLinearKernelsTest, MatchesDequantizedReferenceForEveryScheme) {
  struct Shape {
    int64_t rows, cols;
  };
  unsigned seed = 100;
  for (Scheme scheme : {Scheme::NF4, Scheme::Int8, Scheme::GPTQ, Scheme::BF16,
                        Scheme::FP16}) {
    for (bool variant : {false, true}) {
      if (variant && (scheme == Scheme::BF16 || scheme == Scheme::FP16)) {
        continue;
      }
      for (Shape shape : {Shape{1056, 288}, Shape{160, 1312}, Shape{75, 1001}}) {
        if (scheme == Scheme::GPTQ && shape.cols % 32) {
          continue;
        }
        const Weight weight =
            makeWeight(scheme, shape.rows, shape.cols, ++seed, variant);
        for (bool transposeWeight : {false, true}) {
          for (bool withBias : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << tailor::quant::schemeName(scheme) << " variant "
                         << variant << " [" << shape.rows << ", "
                         << shape.cols << "] transpose " << transposeWeight
                         << " bias " << withBias);
            const auto attrs = attributesOf(weight.spec, transposeWeight);
            Launch three(weight, transposeWeight, withBias, 3, ++seed);
            ASSERT_EQ(runKernel("linear_quantized", three.operands(), attrs,
                                &pool3()),
                      "");
            expectMatchesReference(weight, transposeWeight, three);
            Launch one = three;
            std::fill(one.y.data<float>(),
                      one.y.data<float>() + one.y.numel(), 0.0f);
            ASSERT_EQ(runKernel("linear_quantized", one.operands(), attrs,
                                &pool1()),
                      "");
            EXPECT_TRUE(one.y.sameBytes(three.y))
                << "1 and 3 threads give different bits";
          }
        }
      }
    }
  }
}

// Tests that the kernel agrees with the dense `linear` kernel on the
// dequantized weight, whose GEMM it tiles.
TEST(QuantizedLinearKernelsTest, AgreesWithDenseLinear) {
  const Weight weight = makeWeight(Scheme::NF4, 300, 200, 7);
  std::vector<float> dense(300 * 200);
  tailor::quant::dequantizeTile(weight.spec, weight.storage.data(), 0, 300, 0,
                                200, dense.data(), 200);
  for (bool transposeWeight : {false, true}) {
    Launch launch(weight, transposeWeight, true, 3, 9);
    ASSERT_EQ(runKernel("linear_quantized", launch.operands(),
                        attributesOf(weight.spec, transposeWeight)),
              "");
    Buffer w(DType::F32, {300, 200});
    std::memcpy(w.data<float>(), dense.data(), dense.size() * sizeof(float));
    Buffer y(DType::F32, launch.y.shape);
    ASSERT_EQ(runKernel("linear", {&launch.x, &w, &launch.bias, &y},
                        {intAttr("transpose_weight", transposeWeight)}),
              "");
    expectAllNear(launch.y, values(y), 1e-5, 1e-5, "linear_quantized");
  }
}

// Tests the GEMM epilogue the planner folds in (y = alpha x W^T, or
// y += alpha x W^T onto what y holds) against the dense linear kernel's,
// and that a bias cannot be combined with accumulating.
TEST(QuantizedLinearKernelsTest, EpilogueScalesAndAccumulates) {
  const Weight weight = makeWeight(Scheme::NF4, 300, 200, 8);
  std::vector<float> dense(300 * 200);
  tailor::quant::dequantizeTile(weight.spec, weight.storage.data(), 0, 300, 0,
                                200, dense.data(), 200);
  Buffer w(DType::F32, {300, 200});
  std::memcpy(w.data<float>(), dense.data(), dense.size() * sizeof(float));
  for (bool transposeWeight : {false, true}) {
    for (int accumulate : {0, 1}) {
      Launch launch(weight, transposeWeight, false, 3, 11);
      launch.y = randomBuffer(launch.y.shape, -1, 1, 12);
      Buffer y = randomBuffer(launch.y.shape, -1, 1, 12);
      std::vector<Attribute> attributes =
          attributesOf(weight.spec, transposeWeight);
      attributes.push_back(intAttr("accumulate", accumulate));
      attributes.push_back(floatAttr("alpha", 0.625));
      ASSERT_EQ(runKernel("linear_quantized", launch.operands(), attributes),
                "");
      ASSERT_EQ(runKernel("linear", {&launch.x, &w, &y},
                          {intAttr("transpose_weight", transposeWeight),
                           intAttr("accumulate", accumulate),
                           floatAttr("alpha", 0.625)}),
                "");
      expectAllNear(launch.y, values(y), 1e-5, 1e-5,
                    "linear_quantized epilogue");
    }
  }
  // With `addend`: operand 2 is a residual of y's shape.
  for (bool transposeWeight : {false, true}) {
    Launch launch(weight, transposeWeight, false, 3, 14);
    Buffer residual = randomBuffer(launch.y.shape, -1, 1, 15);
    Buffer y(DType::F32, launch.y.shape);
    std::vector<Attribute> attributes =
        attributesOf(weight.spec, transposeWeight);
    attributes.push_back(intAttr("addend", 1));
    ASSERT_EQ(runKernel("linear_quantized",
                        {&launch.x, &launch.w, &residual, &launch.y,
                         &launch.workspace},
                        attributes),
              "");
    ASSERT_EQ(runKernel("linear", {&launch.x, &w, &residual, &y},
                        {intAttr("transpose_weight", transposeWeight),
                         intAttr("addend", 1)}),
              "");
    expectAllNear(launch.y, values(y), 1e-5, 1e-5,
                  "linear_quantized with an addend");
  }
  Launch biased(weight, false, true, 3, 13);
  std::vector<Attribute> attributes = attributesOf(weight.spec, false);
  attributes.push_back(intAttr("accumulate", 1));
  EXPECT_NE(checkKernel("linear_quantized", biased.operands(), attributes), "");
}

// Tests that an MLIR BoolAttr's true, which reaches the plan as -1, reads
// as true for the flag attributes.
TEST(QuantizedLinearKernelsTest, FlagsAcceptAnyNonzeroInt) {
  const Weight weight = makeWeight(Scheme::NF4, 16, 64, 3);
  Launch launch(weight, false, false, 1, 4);
  auto attrs = attributesOf(weight.spec, false);
  for (Attribute &a : attrs) {
    if (a.name == "double_quant") {
      a.i = -1;
    }
  }
  EXPECT_EQ(checkKernel("linear_quantized", launch.operands(), attrs), "");
}

// Tests that check() rejects what cannot run: wrong storage size, shapes,
// dtypes, operand count, too small a workspace, bad attributes.
TEST(QuantizedLinearKernelsTest, CheckRejectsInconsistentLaunches) {
  const Weight weight = makeWeight(Scheme::NF4, 64, 128, 5);
  const auto attrs = attributesOf(weight.spec, false);
  Launch good(weight, false, true, 3, 6);
  EXPECT_EQ(kernel().check(makeCall(good.operands(), attrs, &pool3())), "");

  Launch storage = good;
  storage.w = Buffer(DType::U8, {good.w.numel() + 1});
  EXPECT_EQ(checkKernel("linear_quantized", storage.operands(), attrs),
            "weight storage has " + std::to_string(good.w.numel() + 1) +
                " bytes, expected " + std::to_string(good.w.numel()) +
                " for a nf4 [64, 128] weight");

  Launch input = good;
  input.x = Buffer(DType::F32, {2, 3, 64});
  EXPECT_EQ(checkKernel("linear_quantized", input.operands(), attrs),
            "input [2, 3, 64] does not match the [64, 128] weight: expected "
            "last extent 128 (cols)");
  // The same x fits the transposed direction, whose output is [..., 128].
  EXPECT_NE(checkKernel("linear_quantized", input.operands(),
                        attributesOf(weight.spec, true)),
            "");

  Launch output = good;
  output.y = Buffer(DType::F32, {6, 64});
  EXPECT_EQ(checkKernel("linear_quantized", output.operands(), attrs),
            "operand 3 must have shape [2, 3, 64], got [6, 64]");

  Launch bias = good;
  bias.bias = Buffer(DType::F32, {128});
  EXPECT_EQ(checkKernel("linear_quantized", bias.operands(), attrs),
            "operand 2 must have shape [64], got [128]");

  Launch dtype = good;
  dtype.w = Buffer(DType::F32, {good.w.numel()});
  EXPECT_EQ(checkKernel("linear_quantized", dtype.operands(), attrs),
            "operand 1 must be u8, got f32");

  EXPECT_EQ(checkKernel("linear_quantized", {&good.x, &good.w, &good.y}, attrs),
            "expected 4 to 5 operands, got 3");

  // Sized for one worker, launched on three (a weight of 3 row tiles).
  const Weight tall = makeWeight(Scheme::NF4, 1200, 64, 5);
  const auto tallAttrs = attributesOf(tall.spec, false);
  Launch small(tall, false, true, 1, 6);
  const int64_t one = small.workspace.numel();
  const int64_t three =
      tailor::quant::linearWorkspaceFloats(tall.spec, false, 3);
  ASSERT_EQ(three, 3 * one);
  EXPECT_EQ(checkKernel("linear_quantized", small.operands(), tallAttrs), "");
  EXPECT_EQ(kernel().check(makeCall(small.operands(), tallAttrs, &pool3())),
            "workspace has " + std::to_string(one) +
                " floats, expected at least " + std::to_string(three) +
                " (3 workers)");
  small.workspace = Buffer(DType::F32, {one - 1});
  EXPECT_NE(checkKernel("linear_quantized", small.operands(), tallAttrs), "");

  auto without = [&](const char *name) {
    std::vector<Attribute> out;
    for (const Attribute &a : attrs) {
      if (a.name != name) {
        out.push_back(a);
      }
    }
    return out;
  };
  EXPECT_EQ(checkKernel("linear_quantized", good.operands(), without("rows")),
            "missing int attribute 'rows'");
  EXPECT_EQ(checkKernel("linear_quantized", good.operands(), without("scheme")),
            "missing string attribute 'scheme'");
  auto renamed = attrs;
  renamed[0].s = "int4";
  EXPECT_EQ(checkKernel("linear_quantized", good.operands(), renamed),
            "attribute 'scheme' is 'int4', expected nf4, int8, gptq, bf16 or "
            "fp16");
  auto blocks = attrs;
  blocks[3].i = 48; // block_size
  EXPECT_EQ(checkKernel("linear_quantized", good.operands(), blocks).rfind(
                "weight: nf4 block size must be one of", 0),
            0u);
}

// Times linear_quantized against the dense `linear` on the same shapes on
// a 2-thread pool (BLAS at 2 threads for the dense one), the fastest of 9
// rounds that each run every kernel once, so a noisy neighbour slows all
// alike. Run by hand:
// QuantizedLinearKernelsTest --gtest_also_run_disabled_tests
// --gtest_filter='*Timing*'
// Tests that `dequantize` writes the whole weight exactly as dequantizeTile
// does, for every scheme and thread count, and rejects a wrong output shape.
TEST(QuantizedLinearKernelsTest, DequantizeWritesTheWholeWeight) {
  for (Scheme scheme : {Scheme::NF4, Scheme::Int8, Scheme::GPTQ, Scheme::BF16,
                        Scheme::FP16}) {
    for (bool variant : {false, true}) {
      Weight weight = makeWeight(scheme, 96, 160, 11, variant);
      std::vector<float> expected(96 * 160);
      tailor::quant::dequantizeTile(weight.spec, weight.storage.data(), 0, 96,
                                    0, 160, expected.data(), 160);
      std::vector<Attribute> attrs = attributesOf(weight.spec, false);
      attrs.pop_back(); // no transpose_weight
      for (ThreadPool *pool : {&pool1(), &pool3()}) {
        Buffer w = storageBuffer(weight.storage);
        Buffer y(DType::F32, {96, 160});
        ASSERT_EQ(runKernel("dequantize", {&w, &y}, attrs, pool), "")
            << tailor::quant::schemeName(scheme);
        EXPECT_EQ(std::memcmp(y.data<float>(), expected.data(),
                              expected.size() * sizeof(float)),
                  0)
            << tailor::quant::schemeName(scheme);
      }
      Buffer w = storageBuffer(weight.storage);
      Buffer wrong(DType::F32, {160, 96});
      EXPECT_NE(findCpuKernel("dequantize")
                    ->check(makeCall({&w, &wrong}, attrs, &pool1())),
                "");
    }
  }
}

TEST(QuantizedLinearKernelsTest, DISABLED_TimingAgainstDenseLinear) {
  ThreadPool pool(2);
  setBlasThreads(2);
  struct Shape {
    int64_t m, k, n;
  };
  const std::vector<Scheme> schemes = {Scheme::NF4, Scheme::Int8, Scheme::GPTQ,
                                       Scheme::BF16, Scheme::FP16};
  for (Shape s : {Shape{256, 2048, 2048}, Shape{512, 2048, 2048},
                  Shape{2048, 2048, 2048}, Shape{512, 4096, 4096}}) {
    for (bool transposeWeight : {false, true}) {
      // W is [N, K] for y = x W^T and [K, N] for y = x W.
      const int64_t rows = transposeWeight ? s.k : s.n;
      const int64_t cols = transposeWeight ? s.n : s.k;
      Buffer x = randomBuffer({s.m, s.k}, -1, 1, 1);
      Buffer y(DType::F32, {s.m, s.n});
      Buffer dense = randomBuffer({rows, cols}, -0.05, 0.05, 2);
      std::vector<Buffer> storage, workspace;
      std::vector<KernelCall> calls = {
          makeCall({&x, &dense, &y},
                   {intAttr("transpose_weight", transposeWeight)}, &pool)};
      storage.reserve(schemes.size());
      workspace.reserve(schemes.size());
      for (Scheme scheme : schemes) {
        const Weight weight = makeWeight(scheme, rows, cols, 3);
        storage.push_back(storageBuffer(weight.storage));
        workspace.emplace_back(DType::F32,
                               std::vector<int64_t>{
                                   tailor::quant::linearWorkspaceFloats(
                                       weight.spec, transposeWeight, 2)});
        calls.push_back(makeCall({&x, &storage.back(), &y, &workspace.back()},
                                 attributesOf(weight.spec, transposeWeight),
                                 &pool));
      }
      std::vector<double> best(calls.size(), 1e30);
      for (int round = 0; round < 9; ++round) {
        for (size_t i = 0; i < calls.size(); ++i) {
          const KernelDef *def =
              findCpuKernel(i == 0 ? "linear" : "linear_quantized");
          ASSERT_EQ(def->check(calls[i]), "");
          auto start = std::chrono::steady_clock::now();
          ASSERT_EQ(def->run(calls[i]), "");
          best[i] = std::min(best[i], std::chrono::duration<double, std::milli>(
                                          std::chrono::steady_clock::now() -
                                          start)
                                          .count());
        }
      }
      std::printf("M %lld K %lld N %lld %s: linear f32 %.1f ms",
                  static_cast<long long>(s.m), static_cast<long long>(s.k),
                  static_cast<long long>(s.n),
                  transposeWeight ? "y = x W  " : "y = x W^T", best[0]);
      for (size_t i = 0; i < schemes.size(); ++i) {
        std::printf(", %s %.1f (%.2fx)", tailor::quant::schemeName(schemes[i]),
                    best[i + 1], best[i + 1] / best[0]);
      }
      std::printf("\n");
    }
  }
}
