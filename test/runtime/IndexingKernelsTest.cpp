//===- IndexingKernelsTest.cpp - CPU gathers, scatters, cumsum, mod, sign -===//
//
// Each kernel against the ONNX operator documentation's examples where it
// has them (onnx/docs/Operators.md), small hand-checked cases, a naive
// reference on random data at odd sizes with negative indices, and its run
// errors: an index outside [-n, n) and an integer mod by zero fail naming
// the kernel, with the output untouched. Results must be exact (these kernels only move or
// combine values in a fixed order).
//
//===----------------------------------------------------------------------===//

#include "test/runtime/KernelTestUtil.h"

#include <random>

namespace tailor::runtime::testing {
namespace {

std::vector<int64_t> strides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    s[d] = s[d + 1] * shape[d + 1];
  }
  return s;
}

/// Coordinates of flat index i in `shape`.
std::vector<int64_t> coords(int64_t i, const std::vector<int64_t> &shape) {
  std::vector<int64_t> c(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
  return c;
}

int64_t offsetOf(const std::vector<int64_t> &c, const std::vector<int64_t> &s) {
  int64_t off = 0;
  for (size_t d = 0; d < c.size(); ++d) {
    off += c[d] * s[d];
  }
  return off;
}

/// Random indices in [-n, n).
Buffer randomIndices(std::vector<int64_t> shape, int64_t n, unsigned seed,
                     DType dtype) {
  return randomBuffer(std::move(shape), static_cast<double>(-n),
                      static_cast<double>(n), seed, dtype);
}

TEST(CpuIndexingTest, GatherElementsDocExampleAndReference) {
  // GatherElements example 1: axis 1.
  Buffer data = filled(DType::F32, {2, 2}, {1, 2, 3, 4});
  Buffer idx = filled(DType::I64, {2, 2}, {0, 0, 1, 0});
  Buffer y(DType::F32, {2, 2});
  ASSERT_EQ(
      runKernel("gather_elements", {&data, &idx, &y}, {intAttr("axis", 1)}),
      "");
  expectAllNear(y, {1, 1, 4, 3}, 0, 0, "gather_elements doc");

  // Random, every axis, negative indices, indices smaller than data.
  std::vector<int64_t> shape{3, 5, 7}, ishape{2, 4, 6};
  Buffer x = randomBuffer(shape, -10, 10, 1);
  for (int64_t axis = 0; axis < 3; ++axis) {
    std::vector<int64_t> is = ishape;
    is[axis] = 9; // longer than the data along the axis: repeats
    for (DType dtype : {DType::I32, DType::I64}) {
      Buffer i = randomIndices(is, shape[axis], 2 + axis, dtype);
      Buffer out(DType::F32, is);
      ASSERT_EQ(
          runKernel("gather_elements", {&x, &i, &out}, {intAttr("axis", axis)}),
          "");
      std::vector<double> want;
      for (int64_t e = 0; e < i.numel(); ++e) {
        std::vector<int64_t> c = coords(e, is);
        int64_t v = static_cast<int64_t>(i.at(e));
        c[axis] = v < 0 ? v + shape[axis] : v;
        want.push_back(x.at(offsetOf(c, strides(shape))));
      }
      expectAllNear(out, want, 0, 0,
                    "gather_elements axis " + std::to_string(axis));
    }
  }
}

/// The naive scatter_elements: y = data, then updates in flat order.
std::vector<double> scatterElementsReference(const Buffer &data,
                                             const Buffer &idx,
                                             const Buffer &upd, int64_t axis,
                                             const std::string &reduction) {
  std::vector<double> y = values(data);
  for (int64_t e = 0; e < idx.numel(); ++e) {
    std::vector<int64_t> c = coords(e, idx.shape);
    int64_t v = static_cast<int64_t>(idx.at(e));
    c[axis] = v < 0 ? v + data.shape[axis] : v;
    double &dst = y[offsetOf(c, strides(data.shape))];
    double u = upd.at(e);
    dst = reduction == "add"   ? dst + u
          : reduction == "mul" ? dst * u
          : reduction == "max" ? std::max(dst, u)
          : reduction == "min" ? std::min(dst, u)
                               : u;
  }
  return y;
}

TEST(CpuIndexingTest, ScatterElementsDocExamplesAndReductions) {
  // ScatterElements example 2 (axis 1) and the duplicate-index add example.
  Buffer data = filled(DType::F32, {1, 5}, {1, 2, 3, 4, 5});
  Buffer idx = filled(DType::I64, {1, 2}, {1, 3});
  Buffer upd = filled(DType::F32, {1, 2}, {1.1, 2.1});
  Buffer y(DType::F32, {1, 5});
  ASSERT_EQ(runKernel("scatter_elements", {&data, &idx, &upd, &y},
                      {intAttr("axis", 1)}),
            "");
  expectAllNear(y, {1, 1.1f, 3, 2.1f, 5}, 0, 0, "scatter_elements doc");
  Buffer dup = filled(DType::I64, {1, 2}, {1, 1});
  ASSERT_EQ(runKernel("scatter_elements", {&data, &dup, &upd, &y},
                      {intAttr("axis", 1), stringAttr("reduction", "add")}),
            "");
  expectAllNear(y, {1, 2 + 1.1f + 2.1f, 3, 4, 5}, 0, 1e-6,
                "scatter_elements add");

  std::vector<int64_t> shape{4, 3, 5};
  for (const char *reduction : {"none", "add", "mul", "max", "min"}) {
    for (DType dtype : {DType::F64, DType::I64, DType::I32}) {
      for (int64_t axis = 0; axis < 3; ++axis) {
        std::vector<int64_t> is{3, 2, 4};
        is[axis] = 7; // repeated indices along the axis
        Buffer d = randomBuffer(shape, -5, 5, 10 + axis, dtype);
        Buffer i = randomIndices(is, shape[axis], 20 + axis, DType::I64);
        Buffer u = randomBuffer(is, -3, 3, 30 + axis, dtype);
        Buffer out(dtype, shape);
        ASSERT_EQ(runKernel("scatter_elements", {&d, &i, &u, &out},
                            {intAttr("axis", axis),
                             stringAttr("reduction", reduction)}),
                  "");
        expectAllNear(out, scatterElementsReference(d, i, u, axis, reduction),
                      1e-12, 0,
                      std::string("scatter_elements ") + reduction + " " +
                          dtypeName(dtype) + " axis " + std::to_string(axis));
        expectSameBitsOnOneAndThreeThreads(
            "scatter_elements", {d, i, u, out},
            {intAttr("axis", axis), stringAttr("reduction", reduction)});
      }
    }
  }
}

TEST(CpuIndexingTest, GatherNDDocExamplesWithBatchDims) {
  // GatherND examples 3 and 5 (batch_dims 1).
  Buffer data = filled(DType::I32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Buffer idx = filled(DType::I64, {2, 2}, {0, 1, 1, 0});
  Buffer y(DType::I32, {2, 2});
  ASSERT_EQ(runKernel("gather_nd", {&data, &idx, &y}), "");
  expectAllNear(y, {2, 3, 4, 5}, 0, 0, "gather_nd example 3");
  Buffer idx5 = filled(DType::I64, {2, 1}, {1, 0});
  ASSERT_EQ(
      runKernel("gather_nd", {&data, &idx5, &y}, {intAttr("batch_dims", 1)}),
      "");
  expectAllNear(y, {2, 3, 4, 5}, 0, 0, "gather_nd example 5");

  // Random: batch 1, tuples of 2, negative indices, odd sizes.
  Buffer x = randomBuffer({3, 5, 7, 2}, -9, 9, 40);
  Buffer i(DType::I32, {3, 4, 2});
  Buffer fives = randomIndices({3, 4}, 5, 41, DType::I32);
  Buffer sevens = randomIndices({3, 4}, 7, 42, DType::I32);
  for (int64_t t = 0; t < 12; ++t) {
    i.set(2 * t, fives.at(t));
    i.set(2 * t + 1, sevens.at(t));
  }
  Buffer out(DType::F32, {3, 4, 2});
  ASSERT_EQ(runKernel("gather_nd", {&x, &i, &out}, {intAttr("batch_dims", 1)}),
            "");
  std::vector<double> want;
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t t = 0; t < 4; ++t) {
      int64_t p = static_cast<int64_t>(i.at((b * 4 + t) * 2));
      int64_t q = static_cast<int64_t>(i.at((b * 4 + t) * 2 + 1));
      p = p < 0 ? p + 5 : p;
      q = q < 0 ? q + 7 : q;
      for (int64_t e = 0; e < 2; ++e) {
        want.push_back(x.at(((b * 5 + p) * 7 + q) * 2 + e));
      }
    }
  }
  expectAllNear(out, want, 0, 0, "gather_nd batch 1");
}

TEST(CpuIndexingTest, ScatterNDDocExamplesAndOrder) {
  // ScatterND example 1 (reduction none) and example 3 (add with repeats).
  Buffer data = filled(DType::F32, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Buffer idx = filled(DType::I64, {4, 1}, {4, 3, 1, 7});
  Buffer upd = filled(DType::F32, {4}, {9, 10, 11, 12});
  Buffer y(DType::F32, {8});
  ASSERT_EQ(runKernel("scatter_nd", {&data, &idx, &upd, &y}), "");
  expectAllNear(y, {1, 11, 3, 10, 9, 6, 7, 12}, 0, 0, "scatter_nd doc");
  Buffer rep = filled(DType::I64, {2, 1}, {0, 0});
  Buffer d2 = filled(DType::I64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Buffer u2 = filled(DType::I64, {2, 3}, {10, 20, 30, 100, 200, 300});
  Buffer y2(DType::I64, {2, 3});
  ASSERT_EQ(runKernel("scatter_nd", {&d2, &rep, &u2, &y2},
                      {stringAttr("reduction", "add")}),
            "");
  expectAllNear(y2, {111, 222, 333, 4, 5, 6}, 0, 0, "scatter_nd add");
  ASSERT_EQ(runKernel("scatter_nd", {&d2, &rep, &u2, &y2},
                      {stringAttr("reduction", "none")}),
            "");
  expectAllNear(y2, {100, 200, 300, 4, 5, 6}, 0, 0, "scatter_nd last wins");
  ASSERT_EQ(runKernel("scatter_nd", {&d2, &rep, &u2, &y2},
                      {stringAttr("reduction", "min")}),
            "");
  expectAllNear(y2, {1, 2, 3, 4, 5, 6}, 0, 0, "scatter_nd min");
  // Batch dims (the gradient of a batched gather_nd): per batch.
  Buffer bidx = filled(DType::I64, {2, 2, 1}, {1, 1, 0, 2});
  Buffer bupd = filled(DType::I64, {2, 2}, {7, 8, 9, 10});
  ASSERT_EQ(
      runKernel("scatter_nd", {&d2, &bidx, &bupd, &y2},
                {stringAttr("reduction", "add"), intAttr("batch_dims", 1)}),
      "");
  expectAllNear(y2, {1, 17, 3, 13, 5, 16}, 0, 0, "scatter_nd batch add");
  Buffer big = randomBuffer({9, 33}, -1, 1, 50);
  Buffer bi = randomIndices({40, 1}, 9, 51, DType::I64);
  Buffer bu = randomBuffer({40, 33}, -1, 1, 52);
  Buffer by(DType::F32, {9, 33});
  expectSameBitsOnOneAndThreeThreads("scatter_nd", {big, bi, bu, by},
                                     {stringAttr("reduction", "add")});
}

TEST(CpuIndexingTest, IndicesOutOfRangeAreRunErrors) {
  Buffer data = randomBuffer({3, 4}, -1, 1, 60);
  Buffer bad = filled(DType::I64, {2, 4}, {0, 1, 2, -3, 0, 3, -4, 0});
  Buffer y(DType::F32, {2, 4});
  EXPECT_EQ(
      runKernel("gather_elements", {&data, &bad, &y}, {intAttr("axis", 0)}),
      "gather_elements: index 3 at position 5 is out of range [-3, 3)");
  Buffer upd = randomBuffer({2, 4}, -1, 1, 61);
  Buffer out = filled(DType::F32, {3, 4}, std::vector<double>(12, 7.0));
  EXPECT_EQ(runKernel("scatter_elements", {&data, &bad, &upd, &out},
                      {intAttr("axis", 0)}),
            "scatter_elements: index 3 at position 5 is out of range [-3, 3)");
  expectAllNear(out, std::vector<double>(12, 7.0), 0, 0, "untouched");
  Buffer tuples = filled(DType::I32, {2, 2}, {0, 3, 2, 4});
  Buffer g(DType::F32, {2});
  EXPECT_EQ(runKernel("gather_nd", {&data, &tuples, &g}),
            "gather_nd: index 4 at position 3 is out of range [-4, 4)");
  Buffer su = randomBuffer({2}, -1, 1, 62);
  EXPECT_EQ(runKernel("scatter_nd", {&data, &tuples, &su, &out}),
            "scatter_nd: index 4 at position 3 is out of range [-4, 4)");
}

TEST(CpuIndexingTest, CumsumExclusiveReverseAndWrap) {
  // CumSum's examples on [1, 2, 3, 4, 5].
  Buffer x = filled(DType::F64, {5}, {1, 2, 3, 4, 5});
  Buffer y(DType::F64, {5});
  struct Case {
    int exclusive, reverse;
    std::vector<double> want;
  };
  for (const Case &c :
       {Case{0, 0, {1, 3, 6, 10, 15}}, Case{1, 0, {0, 1, 3, 6, 10}},
        Case{0, 1, {15, 14, 12, 9, 5}}, Case{1, 1, {14, 12, 9, 5, 0}}}) {
    ASSERT_EQ(runKernel("cumsum", {&x, &y},
                        {intAttr("axis", 0), intAttr("exclusive", c.exclusive),
                         intAttr("reverse", c.reverse)}),
              "");
    expectAllNear(y, c.want, 0, 0, "cumsum");
  }
  // A middle axis with a wide inner dim (more than one accumulator chunk).
  Buffer m = randomBuffer({3, 4, 300}, -100, 100, 70, DType::I64);
  Buffer my(DType::I64, {3, 4, 300});
  ASSERT_EQ(runKernel("cumsum", {&m, &my}, {intAttr("axis", 1)}), "");
  std::vector<double> want(m.numel());
  for (int64_t o = 0; o < 3; ++o) {
    for (int64_t c = 0; c < 300; ++c) {
      double acc = 0;
      for (int64_t i = 0; i < 4; ++i) {
        acc += m.at((o * 4 + i) * 300 + c);
        want[(o * 4 + i) * 300 + c] = acc;
      }
    }
  }
  expectAllNear(my, want, 0, 0, "cumsum axis 1");
  // The run-time axis form (x, axis, y): negative counts from the end, out
  // of range is a run error.
  for (DType dtype : {DType::I32, DType::I64}) {
    Buffer axis = scalar(dtype, -2);
    Buffer ry(DType::I64, {3, 4, 300});
    ASSERT_EQ(runKernel("cumsum", {&m, &axis, &ry}), "");
    expectAllNear(ry, want, 0, 0, "cumsum run-time axis");
    Buffer bad = filled(dtype, {1}, {3});
    EXPECT_EQ(runKernel("cumsum", {&m, &bad, &ry}),
              "cumsum: axis 3 is out of range for rank 3");
  }
  // int32 sums wrap instead of overflowing.
  Buffer big = filled(DType::I32, {2}, {2147483647, 1});
  Buffer by(DType::I32, {2});
  ASSERT_EQ(runKernel("cumsum", {&big, &by}, {intAttr("axis", 0)}), "");
  expectAllNear(by, {2147483647, -2147483648.0}, 0, 0, "cumsum wraps");
}

TEST(CpuIndexingTest, ModBothSignConventions) {
  // Mod's mixed-sign examples (int64, fmod 0 and 1; float, fmod 1).
  Buffer a = filled(DType::I64, {6}, {-4, 7, 5, 4, -7, 8});
  Buffer b = filled(DType::I64, {6}, {2, -3, 8, -2, 3, 5});
  Buffer y(DType::I64, {6});
  ASSERT_EQ(runKernel("mod", {&a, &b, &y}), "");
  expectAllNear(y, {0, -2, 5, 0, 2, 3}, 0, 0, "mod fmod 0");
  ASSERT_EQ(runKernel("mod", {&a, &b, &y}, {intAttr("fmod", 1)}), "");
  expectAllNear(y, {0, 1, 5, 0, -1, 3}, 0, 0, "mod fmod 1");
  Buffer fa = filled(DType::F32, {6}, {-4.3, 7.2, 5.0, 4.3, -7.2, 8.0});
  Buffer fb = filled(DType::F32, {6}, {2.1, -3.4, 8.0, -2.1, 3.4, 5.0});
  Buffer fy(DType::F32, {6});
  ASSERT_EQ(runKernel("mod", {&fa, &fb, &fy}, {intAttr("fmod", 1)}), "");
  expectAllNear(fy, {-0.1, 0.4, 5.0, 0.1, -0.4, 3.0}, 1e-5, 1e-5,
                "mod float fmod 1");
  ASSERT_EQ(runKernel("mod", {&fa, &fb, &fy}), "");
  expectAllNear(fy, {2.0, -3.0, 5.0, -2.0, 3.0, 3.0}, 1e-5, 1e-5,
                "mod float fmod 0");
  // Broadcasting, INT_MIN % -1, and a zero divisor.
  Buffer ia = filled(DType::I32, {2, 2}, {-2147483648.0, 5, -5, 9});
  Buffer ib = filled(DType::I32, {2}, {-1, 4});
  Buffer iy(DType::I32, {2, 2});
  ASSERT_EQ(runKernel("mod", {&ia, &ib, &iy}), "");
  expectAllNear(iy, {0, 1, 0, 1}, 0, 0, "mod broadcast");
  Buffer zero = filled(DType::I32, {2}, {3, 0});
  EXPECT_EQ(runKernel("mod", {&ia, &zero, &iy}),
            "mod: integer division by zero (divisor element 1)");
}

TEST(CpuIndexingTest, SignOfFloatsAndInts) {
  Buffer x = filled(DType::F32, {4}, {-2.5, 0, 3, NAN});
  Buffer y(DType::F32, {4});
  ASSERT_EQ(runKernel("sign", {&x, &y}), "");
  expectAllNear(y, {-1, 0, 1, NAN}, 0, 0, "sign f32");
  Buffer xi = filled(DType::I64, {3}, {-7, 0, 9});
  Buffer yi(DType::I64, {3});
  ASSERT_EQ(runKernel("sign", {&xi, &yi}), "");
  expectAllNear(yi, {-1, 0, 1}, 0, 0, "sign i64");
}

TEST(CpuIndexingTest, ChecksRejectMalformedLaunches) {
  Buffer data(DType::F32, {3, 4}), idx(DType::I64, {2, 5}),
      y(DType::F32, {2, 5});
  EXPECT_EQ(
      checkKernel("gather_elements", {&data, &idx, &y}, {intAttr("axis", 0)}),
      "indices [2, 5] are larger than data [3, 4] outside axis 0");
  Buffer fidx(DType::F32, {2, 4}), fy(DType::F32, {2, 4});
  EXPECT_EQ(
      checkKernel("gather_elements", {&data, &fidx, &fy}, {intAttr("axis", 0)}),
      "operand 1 must be i32 or i64, got f32");
  Buffer i2(DType::I64, {2, 4}), u2(DType::F32, {2, 4}),
      out(DType::F32, {3, 4});
  EXPECT_EQ(checkKernel("scatter_elements", {&data, &i2, &u2, &out},
                        {intAttr("axis", 0), stringAttr("reduction", "avg")}),
            "attribute 'reduction' is 'avg', expected none, add, mul, max or "
            "min");
  Buffer bools(DType::Bool, {3, 4}), bu(DType::Bool, {2, 4}),
      bo(DType::Bool, {3, 4});
  EXPECT_EQ(checkKernel("scatter_elements", {&bools, &i2, &bu, &bo},
                        {intAttr("axis", 0), stringAttr("reduction", "add")}),
            "reduction 'add' needs f32, f64, i32 or i64 data, got bool");
  Buffer t3(DType::I64, {2, 3}), g(DType::F32, {2});
  EXPECT_EQ(checkKernel("gather_nd", {&data, &t3, &g}),
            "index tuples of length 3 do not fit data [3, 4]");
  Buffer cx(DType::F32, {3, 4}), cy(DType::F32, {3, 4});
  EXPECT_EQ(checkKernel("cumsum", {&cx, &cy}, {intAttr("axis", 2)}),
            "attribute 'axis' is 2, expected a value in [0, 1]");
}

} // namespace
} // namespace tailor::runtime::testing
