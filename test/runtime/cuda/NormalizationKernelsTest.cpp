//===- NormalizationKernelsTest.cpp - CUDA reductions, softmax, norms -----===//
//
// Every launcher of runtime/cuda/NormalizationLaunchers.cpp against the CPU
// kernel of the same name, over shapes that reach each device path: warp
// rows, block rows (longer than a block, not a multiple of 32), columns,
// the generic reduction walk; rank-1 and rank-4 inputs; f32 at tight
// tolerance and bf16 at bf16 tolerance.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/NormalizationKernels.cu"

#include "test/runtime/cuda/CudaTestUtil.h"

#include <cmath>
#include <limits>

namespace tailor::runtime::cuda::testing {
namespace {

/// f32 sums: the CPU accumulates in f64, the GPU in f32 over a tree.
constexpr Tolerance kSumF32{1e-4, 1e-5};
constexpr Tolerance kF32{1e-6, 1e-5};
constexpr Tolerance kExact{0, 0};
/// layer_norm on inputs with a mean of 4: the f32 mean differs from the
/// CPU's in the last bit (another summation order), which shifts every
/// centred value by ~1e-6 absolute.
constexpr Tolerance kLayerNormF32{1e-5, 1e-5};
/// bf16 outputs: one rounding of an f32 result (2^-8 relative), plus the
/// absolute error of a rounded sum near zero.
constexpr Tolerance kBf16{2e-2, 1e-2};

HostTensor bf16Random(std::vector<int64_t> shape, uint64_t seed) {
  return converted(randomF32(std::move(shape), seed), DType::BF16);
}

/// x's shape with `axes` removed (or set to 1 with keep_dims).
std::vector<int64_t> reducedShape(const std::vector<int64_t> &shape,
                                  const std::vector<int64_t> &axes,
                                  bool keepDims) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool reduced =
        std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
    if (!reduced) {
      out.push_back(shape[d]);
    } else if (keepDims) {
      out.push_back(1);
    }
  }
  return out;
}

void expectReduce(TestBackend &backend, const char *kernel, HostTensor x,
                  std::vector<int64_t> axes, bool keepDims,
                  Tolerance tolerance) {
  SCOPED_TRACE(std::string(kernel) + " " + dtypeName(x.dtype));
  HostTensor y(x.dtype, reducedShape(x.shape, axes, keepDims));
  expectMatchesCpu(backend, kernel, {x, y},
                   {intsAttr("axes", axes), intAttr("keep_dims", keepDims)},
                   {1}, tolerance);
}

/// The axis sets the reduction tests cover on a [6, 5, 4, 3] input: rows
/// (trailing axes), columns (a middle or leading axis), the generic walk
/// (interleaved axes) and everything.
const std::vector<std::vector<int64_t>> kAxisSets = {
    {3}, {2, 3}, {1}, {0}, {1, 2}, {0, 2}, {1, 3}, {0, 2, 3}, {0, 1, 2, 3}};

TEST_F(CudaKernelTest, ReduceSumF32) {
  for (const auto &axes : kAxisSets) {
    for (bool keep : {false, true}) {
      expectReduce(*backend, "reduce_sum", randomF32({6, 5, 4, 3}, 1), axes,
                   keep, kSumF32);
    }
  }
  expectReduce(*backend, "reduce_sum", randomF32({1000}, 2), {0}, false,
               kSumF32);
  expectReduce(*backend, "reduce_sum", randomF32({3, 5000}, 3), {1}, true,
               kSumF32);
  expectReduce(*backend, "reduce_sum", randomF32({3, 700, 37}, 4), {1}, false,
               kSumF32);
  expectReduce(*backend, "reduce_sum", randomF32({9, 33}, 5), {1}, false,
               kSumF32);
}

TEST_F(CudaKernelTest, ReduceMeanF32) {
  for (const auto &axes : kAxisSets) {
    for (bool keep : {false, true}) {
      expectReduce(*backend, "reduce_mean", randomF32({6, 5, 4, 3}, 6), axes,
                   keep, kF32);
    }
  }
  expectReduce(*backend, "reduce_mean", randomF32({2, 3, 5000}, 7), {2}, false,
               kF32);
  expectReduce(*backend, "reduce_mean", randomF32({1, 1, 77}, 8), {2}, true,
               kF32);
}

TEST_F(CudaKernelTest, ReduceMaxF32) {
  for (const auto &axes : kAxisSets) {
    for (bool keep : {false, true}) {
      expectReduce(*backend, "reduce_max", randomF32({6, 5, 4, 3}, 9), axes,
                   keep, kExact);
    }
  }
  expectReduce(*backend, "reduce_max", randomF32({3, 5000}, 10), {1}, false,
               kExact);
  expectReduce(*backend, "reduce_max", randomF32({300}, 11), {0}, false,
               kExact);
}

TEST_F(CudaKernelTest, ReduceMaxKeepsNan) {
  HostTensor x = randomF32({4, 1500}, 12);
  x.as<float>()[1500 + 777] = std::numeric_limits<float>::quiet_NaN();
  expectReduce(*backend, "reduce_max", x, {1}, false, kExact);
  HostTensor c = randomF32({40, 6}, 13);
  c.as<float>()[6 * 17 + 2] = std::numeric_limits<float>::quiet_NaN();
  expectReduce(*backend, "reduce_max", c, {0}, false, kExact);
}

TEST_F(CudaKernelTest, ReduceBf16) {
  for (const auto &axes : kAxisSets) {
    for (const char *kernel : {"reduce_sum", "reduce_mean", "reduce_max"}) {
      expectReduce(*backend, kernel, bf16Random({6, 5, 4, 3}, 14), axes, false,
                   kBf16);
    }
  }
  for (const char *kernel : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    expectReduce(*backend, kernel, bf16Random({3, 2000}, 15), {1}, true,
                 {kernel == std::string("reduce_sum") ? 0.5 : 2e-2, 1e-2});
  }
}

TEST_F(CudaKernelTest, ReduceIntegers) {
  for (DType dtype : {DType::I32, DType::I64}) {
    for (const auto &axes : kAxisSets) {
      for (const char *kernel : {"reduce_sum", "reduce_mean", "reduce_max"}) {
        expectReduce(*backend, kernel,
                     randomInts({6, 5, 4, 3}, 16, -1000, 1000, dtype), axes,
                     false, kExact);
      }
    }
    for (const char *kernel : {"reduce_sum", "reduce_mean", "reduce_max"}) {
      expectReduce(*backend, kernel,
                   randomInts({2, 3000}, 17, -100000, 100000, dtype), {1},
                   false, kExact);
    }
  }
  // i32 sums wrap as the CPU's (64-bit accumulation, truncated).
  expectReduce(*backend, "reduce_sum",
               randomInts({4, 100}, 18, 2000000000, 2100000000, DType::I32),
               {1}, false, kExact);
}

TEST_F(CudaKernelTest, ReduceRejectsF64) {
  HostTensor x(DType::F64, {4, 5}), y(DType::F64, {4});
  EXPECT_EQ(checkCuda("reduce_sum", {x, y}, {intsAttr("axes", {1})}),
            "operand 0 must be f32, bf16, i32 or i64, got f64");
}

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

void expectSoftmax(TestBackend &backend, HostTensor x, int64_t axis,
                   Tolerance tolerance) {
  SCOPED_TRACE("softmax axis " + std::to_string(axis) + " " +
               dtypeName(x.dtype));
  HostTensor y(x.dtype, x.shape);
  expectMatchesCpu(backend, "softmax", {x, y}, {intAttr("axis", axis)}, {1},
                   tolerance);
}

TEST_F(CudaKernelTest, SoftmaxLastAxis) {
  // Warp rows (up to 512), block rows beyond, rank 1 and rank 4.
  for (int64_t len : {1, 7, 32, 37, 512, 513, 5000}) {
    expectSoftmax(*backend, randomF32({3, len}, 20, -4, 4), 1, kF32);
    expectSoftmax(*backend, bf16Random({3, len}, 21), 1, kBf16);
  }
  expectSoftmax(*backend, randomF32({100}, 22, -4, 4), 0, kF32);
  expectSoftmax(*backend, randomF32({2, 3, 4, 33}, 23, -4, 4), 3, kF32);
  expectSoftmax(*backend, bf16Random({2, 3, 4, 33}, 24), 3, kBf16);
}

TEST_F(CudaKernelTest, SoftmaxMiddleAxis) {
  expectSoftmax(*backend, randomF32({4, 50, 24}, 25, -4, 4), 1, kF32);
  expectSoftmax(*backend, randomF32({50, 7}, 26, -4, 4), 0, kF32);
  expectSoftmax(*backend, randomF32({2, 3, 40, 5}, 27, -4, 4), 1, kF32);
  expectSoftmax(*backend, randomF32({2, 3, 40, 5}, 28, -4, 4), 2, kF32);
  expectSoftmax(*backend, bf16Random({4, 50, 24}, 29), 1, kBf16);
  expectSoftmax(*backend, bf16Random({2, 3, 40, 5}, 30), 0, kBf16);
}

TEST_F(CudaKernelTest, SoftmaxMaskedRows) {
  // -inf entries (attention masks) give 0; a fully masked row gives NaN on
  // both backends, as exp(-inf - -inf) does.
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t len : {40, 2000}) {
    HostTensor x = randomF32({3, len}, 31, -4, 4);
    float *p = x.as<float>();
    for (int64_t i = 0; i < len; i += 3) {
      p[i] = -inf; // row 0: every third masked, including the first
    }
    for (int64_t i = 0; i < len; ++i) {
      p[len + i] = -inf; // row 1: all masked
    }
    expectSoftmax(*backend, x, 1, kF32);
    HostTensor c = randomF32({len, 3}, 32, -4, 4);
    for (int64_t i = 0; i < len; i += 2) {
      c.as<float>()[i * 3 + 1] = -inf;
    }
    expectSoftmax(*backend, c, 0, kF32);
  }
}

TEST_F(CudaKernelTest, SoftmaxRejectsF64) {
  HostTensor x(DType::F64, {4, 5}), y(DType::F64, {4, 5});
  EXPECT_EQ(checkCuda("softmax", {x, y}, {intAttr("axis", 1)}),
            "operand 0 must be f32 or bf16, got f64");
}

//===----------------------------------------------------------------------===//
// rms_norm, layer_norm
//===----------------------------------------------------------------------===//

/// Shapes with D under a warp, not a multiple of 32, cached in registers
/// (<= 4096) and re-read (5000), rank 1 and rank 4.
const std::vector<std::vector<int64_t>> kNormShapes = {
    {5, 16}, {4, 100}, {3, 4096}, {2, 5000}, {77}, {2, 3, 4, 40}};

HostTensor weights(int64_t d, uint64_t seed, DType dtype) {
  return converted(randomF32({d}, seed, 0.5f, 1.5f), dtype);
}

TEST_F(CudaKernelTest, RmsNormF32) {
  for (const auto &shape : kNormShapes) {
    int64_t d = shape.back();
    HostTensor x = randomF32(shape, 40, -2, 2);
    expectMatchesCpu(
        *backend, "rms_norm",
        {x, weights(d, 41, DType::F32), HostTensor(DType::F32, shape)},
        {floatAttr("epsilon", 1e-6)}, {2}, kF32);
  }
}

TEST_F(CudaKernelTest, RmsNormBf16) {
  for (const auto &shape : kNormShapes) {
    int64_t d = shape.back();
    for (DType x : {DType::F32, DType::BF16}) {
      for (DType w : {DType::F32, DType::BF16}) {
        if (x == DType::F32 && w == DType::F32) {
          continue;
        }
        SCOPED_TRACE(std::string("x ") + dtypeName(x) + " w " + dtypeName(w));
        expectMatchesCpu(*backend, "rms_norm",
                         {converted(randomF32(shape, 42, -2, 2), x),
                          weights(d, 43, w), HostTensor(x, shape)},
                         {floatAttr("epsilon", 1e-5)}, {2}, kBf16);
      }
    }
  }
}

TEST_F(CudaKernelTest, LayerNormF32) {
  for (const auto &shape : kNormShapes) {
    int64_t d = shape.back();
    // An offset mean checks the two-pass variance.
    HostTensor x = randomF32(shape, 44, 3, 5);
    expectMatchesCpu(*backend, "layer_norm",
                     {x, weights(d, 45, DType::F32), randomF32({d}, 46),
                      HostTensor(DType::F32, shape)},
                     {floatAttr("epsilon", 1e-5)}, {3}, kLayerNormF32);
    expectMatchesCpu(
        *backend, "layer_norm",
        {x, weights(d, 47, DType::F32), HostTensor(DType::F32, shape)},
        {floatAttr("epsilon", 1e-5)}, {2}, kLayerNormF32);
  }
}

TEST_F(CudaKernelTest, LayerNormBf16) {
  for (const auto &shape : kNormShapes) {
    int64_t d = shape.back();
    for (DType x : {DType::F32, DType::BF16}) {
      for (DType w : {DType::F32, DType::BF16}) {
        if (x == DType::F32 && w == DType::F32) {
          continue;
        }
        SCOPED_TRACE(std::string("x ") + dtypeName(x) + " w " + dtypeName(w));
        HostTensor in = converted(randomF32(shape, 48, -2, 2), x);
        expectMatchesCpu(*backend, "layer_norm",
                         {in, weights(d, 49, w),
                          converted(randomF32({d}, 50), w),
                          HostTensor(x, shape)},
                         {floatAttr("epsilon", 1e-5)}, {3}, kBf16);
        expectMatchesCpu(*backend, "layer_norm",
                         {in, weights(d, 51, w), HostTensor(x, shape)},
                         {floatAttr("epsilon", 1e-5)}, {2}, kBf16);
      }
    }
  }
}

TEST_F(CudaKernelTest, NormChecks) {
  HostTensor x(DType::BF16, {4, 8}), w(DType::F32, {8});
  EXPECT_EQ(checkCuda("rms_norm", {x, w, HostTensor(DType::F32, {4, 8})},
                      {floatAttr("epsilon", 1e-5)}),
            "operand 2 must be bf16 like operand 0, got f32");
  EXPECT_EQ(checkCuda("rms_norm",
                      {x, HostTensor(DType::F32, {7}),
                       HostTensor(DType::BF16, {4, 8})},
                      {floatAttr("epsilon", 1e-5)}),
            "operand 1 must have shape [8], got [7]");
  EXPECT_EQ(checkCuda("layer_norm",
                      {x, w, HostTensor(DType::BF16, {8}),
                       HostTensor(DType::BF16, {4, 8})},
                      {floatAttr("epsilon", 1e-5)}),
            "operand 2 must be f32 like operand 1, got bf16");
  EXPECT_EQ(checkCuda("rms_norm", {x, w, HostTensor(DType::BF16, {4, 8})},
                      {floatAttr("epsilon", 1e-5)}),
            "");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
