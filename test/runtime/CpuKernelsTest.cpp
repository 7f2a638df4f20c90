//===- CpuKernelsTest.cpp - CPU kernels against naive references ----------===//
//
// Each kernel of runtime/cpu/README.md runs on small random tensors and is
// compared with a plain double-precision loop written here, at an explicit
// tolerance: 1e-5 relative (plus a small absolute floor) for f32 elementwise
// math, 1e-12 for f64, and a K-scaled bound for GEMM-based kernels. Kernels
// run on a 4-thread pool unless a test says otherwise, so the threading is
// exercised everywhere; one test checks that 4 threads and 1 give the same
// bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernel.h"
#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Uniform values in [lo, hi) of any dtype: integers rounded, booleans
/// `v > 0` (the gradient tests' overload in KernelTestUtil.h floors).
Buffer randomBuffer(DType dtype, std::vector<int64_t> shape, double lo,
                    double hi, unsigned seed) {
  Buffer b(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  bool integral = dtype == DType::I32 || dtype == DType::I64;
  for (int64_t i = 0; i < b.numel(); ++i) {
    double v = dist(rng);
    b.set(i, dtype == DType::Bool ? (v > 0) : integral ? std::round(v) : v);
  }
  return b;
}

/// Flat index into `in` (broadcast to `out`) of output element `flat`.
int64_t broadcastIndex(const std::vector<int64_t> &in,
                       const std::vector<int64_t> &out, int64_t flat) {
  int64_t index = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
    int64_t coord = flat % out[d];
    flat /= out[d];
    int64_t id = d - static_cast<int64_t>(out.size() - in.size());
    if (id >= 0) {
      if (in[id] != 1) {
        index += coord * stride;
      }
      stride *= in[id];
    }
  }
  return index;
}

/// Float tolerance per dtype for elementwise math.
double rtolFor(DType dtype) { return dtype == DType::F32 ? 1e-5 : 1e-12; }
double atolFor(DType dtype) { return dtype == DType::F32 ? 1e-6 : 1e-14; }

} // namespace

//===----------------------------------------------------------------------===//
// ThreadPool, attributes, table
//===----------------------------------------------------------------------===//

TEST(CpuThreadPoolTest, CoversEveryIndexOnceWithContiguousChunks) {
  ThreadPool pool(4);
  for (int64_t n : {1, 7, 64, 1000, 100003}) {
    for (int64_t grain : {1, 16, 5000}) {
      std::vector<std::atomic<int>> hits(n);
      std::mutex mutex;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      pool.parallelFor(n, grain, [&](int64_t begin, int64_t end, int worker) {
        EXPECT_LT(begin, end);
        EXPECT_GE(worker, 0);
        EXPECT_LT(worker, 4);
        for (int64_t i = begin; i < end; ++i) {
          hits[i].fetch_add(1);
        }
        std::lock_guard<std::mutex> lock(mutex);
        chunks.push_back({begin, end});
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i].load(), 1) << "n " << n << " grain " << grain;
      }
      for (auto [begin, end] : chunks) {
        // Chunks hold at least `grain` items unless one chunk covers all.
        EXPECT_TRUE(end - begin >= grain || chunks.size() == 1);
      }
    }
  }
}

TEST(CpuThreadPoolTest, WorkerIndicesAreExclusiveAndBounded) {
  ThreadPool pool(4);
  for (int maxWorkers : {0, 1, 2, 3}) {
    int limit = maxWorkers ? maxWorkers : 4;
    std::vector<std::atomic<int>> busy(4);
    std::atomic<bool> ok{true};
    for (int rep = 0; rep < 200; ++rep) {
      pool.parallelFor(
          64, 1,
          [&](int64_t, int64_t, int worker) {
            if (worker < 0 || worker >= limit ||
                busy[worker].fetch_add(1) != 0) {
              ok = false;
            }
            std::this_thread::yield();
            busy[worker].fetch_sub(1);
          },
          maxWorkers);
    }
    EXPECT_TRUE(ok.load()) << "maxWorkers " << maxWorkers;
  }
}

TEST(CpuThreadPoolTest, ManyCallsAndNestingAndSingleThread) {
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 20000; ++rep) {
    pool.parallelFor(
        8, 1, [&](int64_t begin, int64_t end, int) { sum += end - begin; });
  }
  EXPECT_EQ(sum.load(), 8 * 20000);
  // A nested call runs inline on the calling worker instead of deadlocking.
  std::atomic<int64_t> inner{0};
  pool.parallelFor(4, 1, [&](int64_t begin, int64_t end, int) {
    pool.parallelFor(100, 1,
                     [&](int64_t b, int64_t e, int) { inner += e - b; });
  });
  EXPECT_EQ(inner.load(), 400);
  ThreadPool single(1);
  EXPECT_EQ(single.size(), 1);
  int calls = 0;
  single.parallelFor(1000, 1, [&](int64_t begin, int64_t end, int worker) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 1000);
    EXPECT_EQ(worker, 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(CpuKernelSupportTest, AttributesAndDTypes) {
  Attributes attrs({intAttr("n", 3), floatAttr("eps", 1e-6),
                    intsAttr("axes", {0, 2}), stringAttr("mode", "tanh")});
  EXPECT_EQ(attrs.getInt("n", 0), 3);
  EXPECT_EQ(attrs.getInt("eps", 7), 7);
  EXPECT_DOUBLE_EQ(attrs.getFloat("eps", 0), 1e-6);
  EXPECT_DOUBLE_EQ(attrs.getFloat("n", 0), 3.0);
  EXPECT_EQ(attrs.getInts("axes"), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(attrs.getInts("n").empty());
  EXPECT_EQ(attrs.getString("mode", "none"), "tanh");
  EXPECT_EQ(attrs.getString("absent", "none"), "none");
  EXPECT_EQ(attrs.find("absent"), nullptr);
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  EXPECT_EQ(dtypeSize(DType::Bool), 1u);
  EXPECT_STREQ(dtypeName(DType::F64), "f64");
  EXPECT_STREQ(dtypeName(DType::Bool), "bool");
  EXPECT_STREQ(dtypeName(DType::I32), "i32");
}

TEST(CpuKernelTableTest, ListsEveryReadmeKernelOnce) {
  const char *names[] = {
      "neg",        "abs",        "exp",       "log",        "sqrt",
      "rsqrt",      "reciprocal", "tanh",      "sigmoid",    "silu",
      "relu",       "erf",        "sin",       "cos",        "gelu",
      "is_nan",     "band_mask",  "add",        "sub",       "mul",        "div",
      "pow",        "max",        "min",       "eq",         "lt",
      "gt",         "select",     "cast",      "reduce_sum", "reduce_mean",
      "reduce_max", "softmax",    "matmul",    "linear",     "rms_norm",
      "layer_norm", "rope",       "attention", "embedding",  "transpose",
      "slice",      "concat",     "split",     "broadcast",  "copy",
      // Indexing (IndexingKernels.cpp, ElementwiseKernels.cpp).
      "gather_elements", "scatter_elements", "gather_nd", "scatter_nd",
      "cumsum", "mod", "sign",
      // Training (GradientKernels.cpp, ElementwiseGradientKernels.cpp,
      // LossKernels.cpp, OptimizerKernels.cpp).
      "linear_weight_grad", "rms_norm_grad", "layer_norm_grad",
      "attention_grad", "embedding_grad", "softmax_grad", "rope_grad",
      "silu_grad", "gelu_grad", "slice_grad", "cross_entropy",
      "cross_entropy_grad", "dropout", "accumulate", "global_norm", "adamw",
      "adamw_multi", "sgd", "zero",
      // Quantized weights (QuantizedLinearKernels.cpp).
      "linear_quantized", "dequantize",
      // fp16 and bf16 GEMMs (LinearAlgebraKernels.cpp, GradientKernels.cpp).
      "linear_fp16", "matmul_fp16", "linear_weight_grad_fp16", "linear_bf16",
      "matmul_bf16", "linear_weight_grad_bf16",
      // Fusion groups (FusedKernels.cpp).
      "fused_elementwise",
      // Gradient compression (CompressionKernels.cpp).
      "error_feedback_add", "error_feedback_store", "lowrank_init",
      "orthogonalize", "lowrank_matmul", "topk_compress", "sparse_average",
      "sign_compress", "sign_average",
      // ZeRO++'s int8 weight gathers and int8 or int4 gradient
      // reduce-scatters (CompressionKernels.cpp).
      "quantize_wire_int8", "dequantize_wire_int8",
      "dequantize_reduce_wire_int8", "quantize_wire_int4",
      "dequantize_reduce_wire_int4",
      // Generation (GenerationKernels.cpp).
      "kv_cache_write",
      // Layer split (PipelineKernels.cpp).
      "pipeline_slot_write", "pipeline_slot_read"};
  std::set<std::string> seen;
  for (const KernelDef &def : cpuKernels()) {
    EXPECT_TRUE(seen.insert(def.name).second) << def.name;
  }
  for (const char *name : names) {
    EXPECT_NE(findCpuKernel(name), nullptr) << name;
  }
  EXPECT_EQ(seen.size(), std::size(names));
  EXPECT_EQ(findCpuKernel("no_such_kernel"), nullptr);
  EXPECT_EQ(findCpuKernel("linear")->arity, -1);
  // q, k, v, [bias], [positions], y, workspace.
  EXPECT_EQ(findCpuKernel("attention")->arity, -1);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

namespace {

struct UnaryCase {
  const char *name;
  double (*ref)(double);
  double lo, hi; // input range
};

const UnaryCase kUnaryCases[] = {
    {"neg", [](double x) { return -x; }, -5, 5},
    {"abs", [](double x) { return std::fabs(x); }, -5, 5},
    {"exp", [](double x) { return std::exp(x); }, -80, 80},
    {"log", [](double x) { return std::log(x); }, 1e-3, 100},
    {"sqrt", [](double x) { return std::sqrt(x); }, 0, 100},
    {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, 1e-3, 100},
    {"reciprocal", [](double x) { return 1 / x; }, 0.01, 100},
    {"tanh", [](double x) { return std::tanh(x); }, -10, 10},
    {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -80, 80},
    {"silu", [](double x) { return x / (1 + std::exp(-x)); }, -20, 20},
    {"relu", [](double x) { return x < 0 ? 0.0 : x; }, -5, 5},
    {"erf", [](double x) { return std::erf(x); }, -5, 5},
    {"sin", [](double x) { return std::sin(x); }, -6, 6},
    {"cos", [](double x) { return std::cos(x); }, -6, 6},
};

/// The reference applied to the input as stored (f32 inputs are rounded).
std::vector<double> mapped(const Buffer &x, double (*fn)(double)) {
  std::vector<double> out(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) {
    out[i] = fn(x.at(i));
  }
  return out;
}

} // namespace

TEST(CpuElementwiseTest, UnaryOpsMatchLibm) {
  for (DType dtype : {DType::F32, DType::F64}) {
    for (const UnaryCase &c : kUnaryCases) {
      // 40000 elements: several chunks on the pool, with a vector tail.
      Buffer x = randomBuffer(dtype, {200, 200}, c.lo, c.hi, 1);
      Buffer y(dtype, {200, 200});
      ASSERT_EQ(runKernel(c.name, {&x, &y}), "");
      expectAllNear(y, mapped(x, c.ref), rtolFor(dtype), atolFor(dtype),
                    std::string(c.name) + " " + dtypeName(dtype));
    }
  }
}

TEST(CpuElementwiseTest, UnaryOpsHandleSpecialValues) {
  std::vector<double> specials = {kNaN,  kInf,  -kInf,  0.0,   -0.0,  88.0,
                                  -88.0, 100.0, -100.0, 1e-30, -1e-30};
  for (const UnaryCase &c : kUnaryCases) {
    Buffer x = filled(DType::F32, {11}, specials);
    Buffer y(DType::F32, {11});
    ASSERT_EQ(runKernel(c.name, {&x, &y}), "");
    for (int64_t i = 0; i < 11; ++i) {
      // Denormal results carry few significant bits (silu scales them by
      // 100), hence the absolute floor.
      double want = static_cast<float>(c.ref(x.at(i)));
      EXPECT_TRUE(near(y.at(i), want, 1e-5, 1e-40))
          << c.name << "(" << x.at(i) << ")";
    }
  }
}

TEST(CpuElementwiseTest, GeluExactAndTanh) {
  auto exact = [](double x) {
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  };
  auto tanhApprox = [](double x) {
    double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1 + std::tanh(u));
  };
  for (DType dtype : {DType::F32, DType::F64}) {
    Buffer x = randomBuffer(dtype, {3, 1000}, -8, 8, 2);
    Buffer y(dtype, {3, 1000});
    ASSERT_EQ(runKernel("gelu", {&x, &y}, {stringAttr("approximate", "none")}),
              "");
    expectAllNear(y, mapped(x, exact), rtolFor(dtype), atolFor(dtype), "gelu");
    ASSERT_EQ(runKernel("gelu", {&x, &y}, {stringAttr("approximate", "tanh")}),
              "");
    expectAllNear(y, mapped(x, tanhApprox), rtolFor(dtype), atolFor(dtype),
                  "gelu tanh");
    ASSERT_EQ(runKernel("gelu", {&x, &y}), ""); // absent: exact
    expectAllNear(y, mapped(x, exact), rtolFor(dtype), atolFor(dtype), "gelu");
  }
  Buffer x(DType::F32, {2}), y(DType::F32, {2});
  EXPECT_NE(checkKernel("gelu", {&x, &y}, {stringAttr("approximate", "fast")}),
            "");
}

TEST(CpuElementwiseTest, IsNan) {
  for (DType dtype : {DType::F32, DType::F64}) {
    Buffer x = filled(dtype, {5}, {1.0, kNaN, kInf, -kNaN, 0.0});
    Buffer y(DType::Bool, {5});
    ASSERT_EQ(runKernel("is_nan", {&x, &y}), "");
    expectAllNear(y, {0, 1, 0, 1, 0}, 0, 0, "is_nan");
  }
}

// Band masks against the definition, element by element: causal, sliding
// window, a band wider than the matrix, the complement form, every dtype,
// leading dims repeating the matrix, one and three threads.
TEST(CpuElementwiseTest, BandMask) {
  struct Case {
    int64_t lower, upper;
    double inside, outside;
  };
  const Case cases[] = {{-6, 0, 0.0, -1048576.0}, // causal, T = S
                        {-2, 0, 1.0, 0.0},     // window of 3
                        {-100, 100, 1.0, 0.0}, // everything inside
                        {1, 40, 0.0, 1.0},     // hidden above the diagonal
                        {2, 3, 5.0, -7.0}};
  for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64,
                      DType::Bool}) {
    for (const Case &c : cases) {
      if (dtype == DType::Bool && (c.inside > 1 || c.outside < 0)) {
        continue;
      }
      for (std::vector<int64_t> shape :
           {std::vector<int64_t>{7, 7}, {2, 3, 5, 9}, {1, 1, 9, 4}}) {
        Buffer y(dtype, shape);
        std::vector<Attribute> attrs = {
            intAttr("lower", c.lower), intAttr("upper", c.upper),
            floatAttr("inside", c.inside), floatAttr("outside", c.outside)};
        for (ThreadPool *pool : {&pool1(), &pool3()}) {
          ASSERT_EQ(runKernel("band_mask", {&y}, attrs, pool), "");
          int64_t rows = shape[shape.size() - 2], cols = shape.back();
          std::vector<double> want;
          for (int64_t flat = 0; flat < y.numel(); ++flat) {
            int64_t i = (flat / cols) % rows, j = flat % cols;
            bool in = c.lower <= j - i && j - i <= c.upper;
            want.push_back(in ? c.inside : c.outside);
          }
          expectAllNear(y, want, 0, 0, "band_mask");
        }
      }
    }
  }
}

TEST(CpuElementwiseTest, BandMaskChecks) {
  Buffer row(DType::F32, {8});
  std::vector<Attribute> attrs = {intAttr("lower", -7), intAttr("upper", 0),
                                  floatAttr("inside", 0),
                                  floatAttr("outside", -1)};
  EXPECT_NE(checkKernel("band_mask", {&row}, attrs), "");
  Buffer y(DType::F32, {8, 8});
  EXPECT_EQ(checkKernel("band_mask", {&y}, attrs), "");
  std::vector<Attribute> reversed = {intAttr("lower", 1), intAttr("upper", 0),
                                     floatAttr("inside", 0),
                                     floatAttr("outside", -1)};
  EXPECT_NE(checkKernel("band_mask", {&y}, reversed), "");
  EXPECT_NE(checkKernel("band_mask", {&y}, {intAttr("lower", 0)}), "");
}

namespace {

double binaryRef(const std::string &op, double a, double b, DType dtype) {
  bool integral = dtype == DType::I32 || dtype == DType::I64;
  const std::pair<const char *, double> results[] = {
      {"add", a + b},          {"sub", a - b},
      {"mul", a * b},          {"div", integral ? std::trunc(a / b) : a / b},
      {"pow", std::pow(a, b)}, {"max", std::max(a, b)},
      {"min", std::min(a, b)}, {"eq", double(a == b)},
      {"lt", double(a < b)},   {"gt", double(a > b)}};
  for (const auto &[name, value] : results) {
    if (op == name) {
      return value;
    }
  }
  ADD_FAILURE() << "no reference for " << op;
  return kNaN;
}

struct Shapes {
  std::vector<int64_t> a, b, y;
};

// Same shape, scalar, row, column, both sides, rank difference, size-1 dims
// everywhere, an empty output.
const Shapes kBroadcastCases[] = {
    {{37, 129}, {37, 129}, {37, 129}},
    {{37, 129}, {1}, {37, 129}},
    {{}, {300, 7}, {300, 7}},
    {{37, 129}, {129}, {37, 129}},
    {{37, 1}, {37, 129}, {37, 129}},
    {{37, 1}, {1, 129}, {37, 129}},
    {{3, 1, 5}, {4, 1}, {3, 4, 5}},
    {{2, 1, 3, 1}, {1, 4, 1, 6}, {2, 4, 3, 6}},
    {{1, 1, 1}, {1, 1}, {1, 1, 1}},
    {{2, 0, 3}, {3}, {2, 0, 3}},
};

} // namespace

TEST(CpuElementwiseTest, BinaryOpsBroadcast) {
  for (const char *op : {"add", "sub", "mul", "div", "pow", "max", "min"}) {
    for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64}) {
      for (const Shapes &s : kBroadcastCases) {
        bool isPow = std::string(op) == "pow";
        bool isDiv = std::string(op) == "div";
        bool integral = dtype == DType::I32 || dtype == DType::I64;
        Buffer a =
            randomBuffer(dtype, s.a, isPow ? 0.5 : -50, isPow ? 3 : 50, 3);
        Buffer b = randomBuffer(dtype, s.b, isPow ? 0 : 1, isPow ? 3 : 20, 4);
        if (!isPow && !isDiv) {
          b = randomBuffer(dtype, s.b, -50, 50, 4);
        }
        Buffer y(dtype, s.y);
        ASSERT_EQ(runKernel(op, {&a, &b, &y}), "");
        std::vector<double> want(y.numel());
        for (int64_t i = 0; i < y.numel(); ++i) {
          want[i] = binaryRef(op, a.at(broadcastIndex(s.a, s.y, i)),
                              b.at(broadcastIndex(s.b, s.y, i)), dtype);
        }
        expectAllNear(y, want, integral ? 0 : rtolFor(dtype),
                      integral ? 0 : atolFor(dtype),
                      std::string(op) + " " + dtypeName(dtype) + " " +
                          ::testing::PrintToString(s.y));
      }
    }
  }
}

TEST(CpuElementwiseTest, BinaryEdgeCases) {
  // Integer division truncates toward zero; a zero divisor is a run error.
  Buffer a = filled(DType::I32, {4}, {7, -7, 7, -2147483648.0});
  Buffer b = filled(DType::I32, {4}, {2, 2, -2, -1});
  Buffer y(DType::I32, {4});
  ASSERT_EQ(runKernel("div", {&a, &b, &y}), "");
  expectAllNear(y, {3, -3, -3, -2147483648.0}, 0, 0, "div");
  Buffer zero = filled(DType::I32, {4}, {1, 0, 1, 1});
  EXPECT_EQ(runKernel("div", {&a, &zero, &y}), "integer division by zero");
  // Integer pow, negative exponents included.
  Buffer base = filled(DType::I64, {5}, {2, -3, 2, -1, 1});
  Buffer exps = filled(DType::I64, {5}, {10, 3, -1, -3, -5});
  Buffer p(DType::I64, {5});
  ASSERT_EQ(runKernel("pow", {&base, &exps, &p}), "");
  expectAllNear(p, {1024, -27, 0, -1, 1}, 0, 0, "pow");
  // max and min propagate NaN from either side.
  Buffer f = filled(DType::F32, {3}, {kNaN, 1, 2});
  Buffer g = filled(DType::F32, {3}, {1, kNaN, 3});
  Buffer m(DType::F32, {3});
  ASSERT_EQ(runKernel("max", {&f, &g, &m}), "");
  expectAllNear(m, {kNaN, kNaN, 3}, 0, 0, "max");
  ASSERT_EQ(runKernel("min", {&f, &g, &m}), "");
  expectAllNear(m, {kNaN, kNaN, 2}, 0, 0, "min");
}

TEST(CpuElementwiseTest, CompareOpsBroadcast) {
  for (const char *op : {"eq", "lt", "gt"}) {
    for (DType dtype :
         {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool}) {
      for (const Shapes &s : kBroadcastCases) {
        // Small integers so eq is sometimes true.
        Buffer a = randomBuffer(dtype, s.a, -3, 3, 5);
        Buffer b = randomBuffer(dtype, s.b, -3, 3, 6);
        if (dtype == DType::F32 || dtype == DType::F64) {
          for (Buffer *t : {&a, &b}) {
            for (int64_t i = 0; i < t->numel(); ++i) {
              t->set(i, std::round(t->at(i)));
            }
          }
        }
        Buffer y(DType::Bool, s.y);
        ASSERT_EQ(runKernel(op, {&a, &b, &y}), "");
        std::vector<double> want(y.numel());
        for (int64_t i = 0; i < y.numel(); ++i) {
          want[i] = binaryRef(op, a.at(broadcastIndex(s.a, s.y, i)),
                              b.at(broadcastIndex(s.b, s.y, i)), dtype);
        }
        expectAllNear(y, want, 0, 0, std::string(op) + " " + dtypeName(dtype));
      }
    }
  }
}

TEST(CpuElementwiseTest, SelectBroadcasts) {
  struct Case {
    std::vector<int64_t> c, a, b, y;
  };
  const Case cases[] = {
      {{50, 70}, {50, 70}, {50, 70}, {50, 70}},
      {{1, 1, 5, 7}, {1}, {2, 3, 5, 7}, {2, 3, 5, 7}}, // masked_fill shape
      {{5, 1}, {1, 7}, {}, {5, 7}},
      {{7}, {5, 7}, {5, 1}, {5, 7}},
  };
  for (DType dtype : {DType::F32, DType::I64, DType::Bool, DType::F64}) {
    for (const Case &s : cases) {
      Buffer c = randomBuffer(DType::Bool, s.c, -1, 1, 7);
      Buffer a = randomBuffer(dtype, s.a, -9, 9, 8);
      Buffer b = randomBuffer(dtype, s.b, -9, 9, 9);
      Buffer y(dtype, s.y);
      ASSERT_EQ(runKernel("select", {&c, &a, &b, &y}), "");
      std::vector<double> want(y.numel());
      for (int64_t i = 0; i < y.numel(); ++i) {
        want[i] = c.at(broadcastIndex(s.c, s.y, i))
                      ? a.at(broadcastIndex(s.a, s.y, i))
                      : b.at(broadcastIndex(s.b, s.y, i));
      }
      expectAllNear(y, want, 0, 0, std::string("select ") + dtypeName(dtype));
    }
  }
}

TEST(CpuElementwiseTest, CastBetweenAllSupportedTypes) {
  const std::vector<double> values = {0, 1.75, -1.75, 2.5, -0.0, 100, -3};
  const DType types[] = {DType::F32, DType::F64, DType::I32, DType::I64,
                         DType::Bool};
  for (DType from : types) {
    for (DType to : types) {
      Buffer x(from, {7});
      for (int64_t i = 0; i < 7; ++i) {
        x.set(i, from == DType::Bool ? values[i] != 0 : values[i]);
      }
      Buffer y(to, {7});
      ASSERT_EQ(runKernel("cast", {&x, &y}), "");
      std::vector<double> want(7);
      for (int64_t i = 0; i < 7; ++i) {
        double v = x.at(i);
        want[i] = to == DType::Bool                        ? (v != 0)
                  : (to == DType::I32 || to == DType::I64) ? std::trunc(v)
                                                           : v;
      }
      expectAllNear(y, want, 0, 0,
                    std::string(dtypeName(from)) + " to " + dtypeName(to));
    }
  }
  // NaN reads 0 and out-of-range values saturate; NaN is true.
  Buffer x = filled(DType::F32, {4}, {kNaN, 1e20, -1e20, -2147483648.0});
  Buffer i32(DType::I32, {4}), b(DType::Bool, {4});
  ASSERT_EQ(runKernel("cast", {&x, &i32}), "");
  expectAllNear(i32, {0, 2147483647.0, -2147483648.0, -2147483648.0}, 0, 0,
                "saturating cast");
  ASSERT_EQ(runKernel("cast", {&x, &b}), "");
  expectAllNear(b, {1, 1, 1, 1}, 0, 0, "cast to bool");
}

TEST(CpuElementwiseTest, FourThreadsMatchOneThreadBitForBit) {
  ThreadPool one(1);
  std::vector<int64_t> shape = {3, 257, 129};
  Buffer x = randomBuffer(DType::F32, shape, -4, 4, 10);
  Buffer row = randomBuffer(DType::F32, {129}, -4, 4, 11);
  for (const char *op : {"exp", "tanh", "silu", "gelu", "sigmoid", "erf"}) {
    Buffer y1(DType::F32, shape), y4(DType::F32, shape);
    ASSERT_EQ(runKernel(op, {&x, &y1}, {}, &one), "");
    ASSERT_EQ(runKernel(op, {&x, &y4}, {}, &pool4()), "");
    EXPECT_TRUE(y1.sameBytes(y4)) << op;
  }
  for (const char *op : {"add", "mul", "div", "max"}) {
    Buffer y1(DType::F32, shape), y4(DType::F32, shape);
    ASSERT_EQ(runKernel(op, {&x, &row, &y1}, {}, &one), "");
    ASSERT_EQ(runKernel(op, {&x, &row, &y4}, {}, &pool4()), "");
    EXPECT_TRUE(y1.sameBytes(y4)) << op;
  }
  std::vector<std::pair<const char *, std::vector<Attribute>>> rowOps = {
      {"softmax", {intAttr("axis", 2)}},
      {"softmax", {intAttr("axis", 1)}},
      {"reduce_sum", {intsAttr("axes", {2}), intAttr("keep_dims", 1)}},
  };
  for (auto &[op, attrs] : rowOps) {
    bool reduce = std::string(op) == "reduce_sum";
    std::vector<int64_t> out = reduce ? std::vector<int64_t>{3, 257, 1} : shape;
    Buffer y1(DType::F32, out), y4(DType::F32, out);
    ASSERT_EQ(runKernel(op, {&x, &y1}, attrs, &one), "");
    ASSERT_EQ(runKernel(op, {&x, &y4}, attrs, &pool4()), "");
    EXPECT_TRUE(y1.sameBytes(y4)) << op;
  }
  Buffer w = randomBuffer(DType::F32, {129}, 0.5, 1.5, 12);
  Buffer y1(DType::F32, shape), y4(DType::F32, shape);
  ASSERT_EQ(
      runKernel("rms_norm", {&x, &w, &y1}, {floatAttr("epsilon", 1e-6)}, &one),
      "");
  ASSERT_EQ(runKernel("rms_norm", {&x, &w, &y4}, {floatAttr("epsilon", 1e-6)}),
            "");
  EXPECT_TRUE(y1.sameBytes(y4)) << "rms_norm";
}

//===----------------------------------------------------------------------===//
// Reductions and normalization
//===----------------------------------------------------------------------===//

namespace {

/// Naive reduction over `axes` of x; `op` is sum, mean or max.
std::vector<double> reduceRef(const Buffer &x, const std::vector<int64_t> &axes,
                              const std::string &op) {
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t a : axes) {
    reduced[a] = true;
  }
  std::vector<int64_t> outShape;
  int64_t count = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (reduced[d]) {
      count *= x.shape[d];
    } else {
      outShape.push_back(x.shape[d]);
    }
  }
  int64_t outN = std::accumulate(outShape.begin(), outShape.end(), int64_t(1),
                                 std::multiplies<int64_t>());
  std::vector<double> acc(outN, op == "max" ? -kInf : 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (int64_t d = static_cast<int64_t>(x.shape.size()) - 1; d >= 0; --d) {
      int64_t c = rest % x.shape[d];
      rest /= x.shape[d];
      if (!reduced[d]) {
        o += c * stride;
        stride *= x.shape[d];
      }
    }
    acc[o] = op == "max" ? std::max(acc[o], x.at(i)) : acc[o] + x.at(i);
  }
  if (op == "mean") {
    bool integral = x.dtype == DType::I32 || x.dtype == DType::I64;
    for (double &v : acc) {
      v = integral ? std::trunc(v / count) : v / count;
    }
  }
  return acc;
}

} // namespace

TEST(CpuReductionTest, ReduceOverAxisSets) {
  struct Case {
    std::vector<int64_t> shape, axes;
  };
  const Case cases[] = {
      {{6, 50, 33}, {2}},       // rows
      {{6, 50, 33}, {0}},       // columns
      {{6, 50, 33}, {1}},       // middle
      {{6, 50, 33}, {1, 2}},    // trailing block
      {{6, 50, 33}, {0, 1}},    // leading block
      {{6, 50, 33}, {0, 2}},    // interleaved: generic walk
      {{6, 50, 33}, {0, 1, 2}}, // everything
      {{4, 1, 300}, {1}},       // extent 1
      {{5, 3, 7, 2}, {0, 2}},   // generic, rank 4
      {{3, 600}, {}},           // no axes: a copy
      {{200000}, {0}},          // one long row, reduced in blocks
  };
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    std::string kind = std::string(op).substr(7);
    for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64}) {
      for (const Case &c : cases) {
        for (int keep : {0, 1}) {
          Buffer x = randomBuffer(dtype, c.shape, -100, 100, 13);
          std::vector<int64_t> out;
          for (size_t d = 0; d < c.shape.size(); ++d) {
            bool r = std::count(c.axes.begin(), c.axes.end(), int64_t(d));
            if (!r || keep) {
              out.push_back(r ? 1 : c.shape[d]);
            }
          }
          Buffer y(dtype, out);
          ASSERT_EQ(
              runKernel(op, {&x, &y},
                        {intsAttr("axes", c.axes), intAttr("keep_dims", keep)}),
              "");
          bool integral = dtype == DType::I32 || dtype == DType::I64;
          // f32 sums accumulate in f64; only the final rounding remains.
          expectAllNear(y, reduceRef(x, c.axes, kind),
                        integral ? 0 : rtolFor(dtype),
                        integral ? 0 : atolFor(dtype),
                        std::string(op) + " " + dtypeName(dtype) + " axes " +
                            ::testing::PrintToString(c.axes));
        }
      }
    }
  }
}

TEST(CpuReductionTest, ReduceMaxPropagatesNaN) {
  Buffer x = filled(DType::F32, {2, 3}, {1, kNaN, 3, 4, 5, 6});
  Buffer y(DType::F32, {2});
  ASSERT_EQ(runKernel("reduce_max", {&x, &y}, {intsAttr("axes", {1})}), "");
  expectAllNear(y, {kNaN, 6}, 0, 0, "reduce_max");
}

TEST(CpuReductionTest, SoftmaxAlongAnyAxis) {
  for (DType dtype : {DType::F32, DType::F64}) {
    std::vector<int64_t> shape = {3, 40, 300};
    Buffer x = randomBuffer(dtype, shape, -30, 30, 14);
    x.set(5, -kInf); // a masked entry
    for (int64_t axis = 0; axis < 3; ++axis) {
      Buffer y(dtype, shape);
      ASSERT_EQ(runKernel("softmax", {&x, &y}, {intAttr("axis", axis)}), "");
      int64_t len = shape[axis], inner = 1;
      for (int64_t d = axis + 1; d < 3; ++d) {
        inner *= shape[d];
      }
      std::vector<double> want(x.numel());
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t base = (i / (len * inner)) * len * inner + i % inner;
        double m = -kInf, sum = 0;
        for (int64_t l = 0; l < len; ++l) {
          m = std::max(m, x.at(base + l * inner));
        }
        for (int64_t l = 0; l < len; ++l) {
          sum += std::exp(x.at(base + l * inner) - m);
        }
        want[i] = std::exp(x.at(i) - m) / sum;
      }
      expectAllNear(y, want, rtolFor(dtype), atolFor(dtype) * 1e-3,
                    "softmax axis " + std::to_string(axis));
    }
  }
}

TEST(CpuReductionTest, RmsNormAndLayerNorm) {
  std::vector<int64_t> shape = {4, 9, 515};
  int64_t d = 515;
  Buffer x = randomBuffer(DType::F32, shape, -3, 3, 15);
  Buffer w = randomBuffer(DType::F32, {d}, 0.5, 1.5, 16);
  Buffer b = randomBuffer(DType::F32, {d}, -1, 1, 17);
  double eps = 1e-5;
  std::vector<double> rms(x.numel()), ln(x.numel()), lnNoBias(x.numel());
  for (int64_t r = 0; r < x.numel() / d; ++r) {
    double ss = 0, mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) {
      ss += x.at(r * d + i) * x.at(r * d + i);
      mean += x.at(r * d + i);
    }
    mean /= d;
    for (int64_t i = 0; i < d; ++i) {
      var += (x.at(r * d + i) - mean) * (x.at(r * d + i) - mean);
    }
    double inv = 1 / std::sqrt(ss / d + eps),
           rstd = 1 / std::sqrt(var / d + eps);
    for (int64_t i = 0; i < d; ++i) {
      rms[r * d + i] = x.at(r * d + i) * inv * w.at(i);
      lnNoBias[r * d + i] = (x.at(r * d + i) - mean) * rstd * w.at(i);
      ln[r * d + i] = lnNoBias[r * d + i] + b.at(i);
    }
  }
  Buffer y(DType::F32, shape);
  ASSERT_EQ(runKernel("rms_norm", {&x, &w, &y}, {floatAttr("epsilon", eps)}),
            "");
  expectAllNear(y, rms, 1e-5, 1e-6, "rms_norm");
  ASSERT_EQ(
      runKernel("layer_norm", {&x, &w, &b, &y}, {floatAttr("epsilon", eps)}),
      "");
  expectAllNear(y, ln, 1e-5, 1e-5, "layer_norm");
  ASSERT_EQ(runKernel("layer_norm", {&x, &w, &y}, {floatAttr("epsilon", eps)}),
            "");
  expectAllNear(y, lnNoBias, 1e-5, 1e-5, "layer_norm without bias");
  // In place, as a planner may schedule it.
  Buffer inPlace = x;
  ASSERT_EQ(runKernel("rms_norm", {&inPlace, &w, &inPlace},
                      {floatAttr("epsilon", eps)}),
            "");
  expectAllNear(inPlace, rms, 1e-5, 1e-6, "rms_norm in place");
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

TEST(CpuLinearAlgebraTest, MatmulWithBatchBroadcast) {
  struct Case {
    std::vector<int64_t> a, b, y;
  };
  const Case cases[] = {
      {{33, 20}, {20, 17}, {33, 17}},
      {{3, 33, 20}, {20, 17}, {3, 33, 17}},       // shared b: one GEMM
      {{33, 20}, {4, 20, 17}, {4, 33, 17}},       // shared a
      {{2, 1, 5, 8}, {3, 8, 6}, {2, 3, 5, 6}},    // both broadcast
      {{2, 3, 5, 8}, {2, 3, 8, 6}, {2, 3, 5, 6}}, // per-batch
      {{4, 0}, {0, 3}, {4, 3}},                   // empty contraction
  };
  for (DType dtype : {DType::F32, DType::F64}) {
    for (const Case &c : cases) {
      Buffer a = randomBuffer(dtype, c.a, -1, 1, 18);
      Buffer b = randomBuffer(dtype, c.b, -1, 1, 19);
      Buffer y = randomBuffer(dtype, c.y, -1, 1, 20); // overwritten
      ASSERT_EQ(runKernel("matmul", {&a, &b, &y}), "");
      int64_t m = c.a[c.a.size() - 2], k = c.a.back(), n = c.b.back();
      std::vector<int64_t> yBatch(c.y.begin(), c.y.end() - 2);
      std::vector<int64_t> aBatch(c.a.begin(), c.a.end() - 2);
      std::vector<int64_t> bBatch(c.b.begin(), c.b.end() - 2);
      std::vector<double> want(y.numel());
      for (int64_t i = 0; i < y.numel(); ++i) {
        int64_t batch = i / (m * n), row = i / n % m, col = i % n;
        int64_t ab = broadcastIndex(aBatch, yBatch, batch);
        int64_t bb = broadcastIndex(bBatch, yBatch, batch);
        double s = 0;
        for (int64_t j = 0; j < k; ++j) {
          s += a.at((ab * m + row) * k + j) * b.at((bb * k + j) * n + col);
        }
        want[i] = s;
      }
      // f32 GEMM: about sqrt(K) roundings of terms bounded by 1.
      expectAllNear(y, want, 1e-5, dtype == DType::F32 ? 1e-5 : 1e-12,
                    "matmul " + ::testing::PrintToString(c.y));
    }
  }
}

TEST(CpuLinearAlgebraTest, LinearWithAndWithoutBias) {
  int64_t k = 48, n = 37;
  Buffer x = randomBuffer(DType::F32, {2, 5, k}, -1, 1, 21);
  Buffer w = randomBuffer(DType::F32, {n, k}, -1, 1, 22);
  Buffer bias = randomBuffer(DType::F32, {n}, -1, 1, 23);
  std::vector<double> want(2 * 5 * n), wantBias(2 * 5 * n);
  for (int64_t r = 0; r < 10; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) {
        s += x.at(r * k + i) * w.at(j * k + i);
      }
      want[r * n + j] = s;
      wantBias[r * n + j] = s + bias.at(j);
    }
  }
  Buffer y(DType::F32, {2, 5, n});
  ASSERT_EQ(runKernel("linear", {&x, &w, &y}), "");
  expectAllNear(y, want, 1e-5, 1e-5, "linear");
  ASSERT_EQ(runKernel("linear", {&x, &w, &bias, &y}), "");
  expectAllNear(y, wantBias, 1e-5, 1e-5, "linear with bias");
  setBlasThreads(2); // any count gives the same result
  ASSERT_EQ(runKernel("linear", {&x, &w, &bias, &y}), "");
  expectAllNear(y, wantBias, 1e-5, 1e-5, "linear, 2 BLAS threads");
  // A weight stored [K, N] (pre-transposed by the exporter) is read as is.
  Buffer wt(DType::F32, {k, n});
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < k; ++i) {
      wt.set(i * n + j, w.at(j * k + i));
    }
  }
  ASSERT_EQ(runKernel("linear", {&x, &wt, &bias, &y},
                      {intAttr("transpose_weight", 1)}),
            "");
  expectAllNear(y, wantBias, 1e-5, 1e-5, "linear, transposed weight");
  EXPECT_NE(checkKernel("linear", {&x, &w, &bias, &y},
                        {intAttr("transpose_weight", 1)}),
            "");
}

// Tests the GEMM epilogue the planner folds in: y = alpha x w^T, and
// y += alpha x w^T onto what y holds; a bias cannot be combined with it.
TEST(CpuLinearAlgebraTest, LinearEpilogueScalesAndAccumulates) {
  int64_t k = 19, n = 23;
  Buffer x = randomBuffer(DType::F32, {3, 7, k}, -1, 1, 31);
  Buffer w = randomBuffer(DType::F32, {n, k}, -1, 1, 32);
  Buffer bias = randomBuffer(DType::F32, {n}, -1, 1, 33);
  for (int accumulate : {0, 1}) {
    Buffer y = randomBuffer(DType::F32, {3, 7, n}, -1, 1, 34);
    std::vector<double> want(21 * n);
    for (int64_t r = 0; r < 21; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t i = 0; i < k; ++i) {
          s += x.at(r * k + i) * w.at(j * k + i);
        }
        want[r * n + j] = -1.5 * s + (accumulate ? y.at(r * n + j) : 0.0);
      }
    }
    ASSERT_EQ(runKernel("linear", {&x, &w, &y},
                        {intAttr("accumulate", accumulate),
                         floatAttr("alpha", -1.5)}),
              "");
    expectAllNear(y, want, 1e-5, 1e-5, "linear epilogue");
  }
  // With `addend`: y = alpha x w^T + addend (a residual the GEMM adds).
  Buffer residual = randomBuffer(DType::F32, {3, 7, n}, -1, 1, 35);
  Buffer y(DType::F32, {3, 7, n});
  std::vector<double> want(21 * n);
  for (int64_t r = 0; r < 21; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) {
        s += x.at(r * k + i) * w.at(j * k + i);
      }
      want[r * n + j] = 0.5 * s + residual.at(r * n + j);
    }
  }
  ASSERT_EQ(runKernel("linear", {&x, &w, &residual, &y},
                      {intAttr("addend", 1), floatAttr("alpha", 0.5)}),
            "");
  expectAllNear(y, want, 1e-5, 1e-5, "linear with an addend");
  EXPECT_NE(checkKernel("linear", {&x, &w, &bias, &y},
                        {intAttr("accumulate", 1)}),
            "");
  // The addend has y's shape, and excludes accumulating.
  EXPECT_NE(checkKernel("linear", {&x, &w, &bias, &y}, {intAttr("addend", 1)}),
            "");
  EXPECT_NE(checkKernel("linear", {&x, &w, &residual, &y},
                        {intAttr("addend", 1), intAttr("accumulate", 1)}),
            "");
}

//===----------------------------------------------------------------------===//
// Transformer kernels
//===----------------------------------------------------------------------===//

namespace {

std::vector<double> ropeRef(const Buffer &x, const Buffer &cosT,
                            const Buffer &sinT, bool interleaved) {
  int64_t h = x.shape[1], t = x.shape[2], d = x.shape[3];
  bool perBatch = cosT.shape.size() == 3;
  std::vector<double> out(x.numel());
  for (int64_t row = 0; row < x.numel() / d; ++row) {
    int64_t ti = row % t, bi = row / (h * t);
    int64_t table = ((perBatch ? bi * t : 0) + ti) * d;
    for (int64_t i = 0; i < d; ++i) {
      double rotated;
      if (interleaved) {
        rotated = i % 2 ? x.at(row * d + i - 1) : -x.at(row * d + i + 1);
      } else {
        rotated =
            i < d / 2 ? -x.at(row * d + i + d / 2) : x.at(row * d + i - d / 2);
      }
      out[row * d + i] =
          x.at(row * d + i) * cosT.at(table + i) + rotated * sinT.at(table + i);
    }
  }
  return out;
}

} // namespace

TEST(CpuTransformerTest, RopeBothLayoutsAndTables) {
  int64_t b = 2, h = 3, t = 5, d = 8;
  Buffer x = randomBuffer(DType::F32, {b, h, t, d}, -2, 2, 24);
  for (bool perBatch : {false, true}) {
    std::vector<int64_t> tableShape =
        perBatch ? std::vector<int64_t>{b, t, d} : std::vector<int64_t>{t, d};
    // HF tables: angle pos * inv_freq, repeated over halves (or pairs).
    for (bool interleaved : {false, true}) {
      Buffer cosT(DType::F32, tableShape), sinT(DType::F32, tableShape);
      for (int64_t i = 0; i < cosT.numel(); ++i) {
        int64_t pos = i / d % t + (perBatch ? 3 * (i / (t * d)) : 0);
        int64_t f = interleaved ? (i % d) / 2 : (i % d) % (d / 2);
        double angle = pos * std::pow(10000.0, -2.0 * f / d);
        cosT.set(i, std::cos(angle));
        sinT.set(i, std::sin(angle));
      }
      Buffer y(DType::F32, {b, h, t, d});
      ASSERT_EQ(runKernel("rope", {&x, &cosT, &sinT, &y},
                          {intAttr("interleaved", interleaved)}),
                "");
      std::vector<double> want = ropeRef(x, cosT, sinT, interleaved);
      expectAllNear(y, want, 1e-5, 1e-6, "rope");
      Buffer inPlace = x;
      ASSERT_EQ(runKernel("rope", {&inPlace, &cosT, &sinT, &inPlace},
                          {intAttr("interleaved", interleaved)}),
                "");
      expectAllNear(inPlace, want, 1e-5, 1e-6, "rope in place");
    }
  }
}

namespace {

struct AttentionCase {
  int64_t b, hq, hkv, t, s, d, dv;
  bool causal;
  int64_t slots;
  int64_t window = 0;  // keys in a sliding window (0: none)
  double softcap = 0;  // c * tanh(score / c) (0: none)
};

std::vector<double> attentionRef(const AttentionCase &c, const Buffer &q,
                                 const Buffer &k, const Buffer &v,
                                 double scale) {
  std::vector<double> out(c.b * c.hq * c.t * c.dv, 0.0);
  for (int64_t bi = 0; bi < c.b; ++bi) {
    for (int64_t h = 0; h < c.hq; ++h) {
      int64_t kvh = h / (c.hq / c.hkv);
      for (int64_t t = 0; t < c.t; ++t) {
        std::vector<double> p(c.s, 0.0);
        double m = -kInf, sum = 0;
        int64_t last = c.causal ? t + c.s - c.t : c.s - 1;
        int64_t from = c.window > 0 ? std::max<int64_t>(0, last - c.window + 1) : 0;
        for (int64_t s = from; s <= std::min(last, c.s - 1); ++s) {
          double dot = 0;
          for (int64_t i = 0; i < c.d; ++i) {
            dot += q.at(((bi * c.hq + h) * c.t + t) * c.d + i) *
                   k.at(((bi * c.hkv + kvh) * c.s + s) * c.d + i);
          }
          p[s] = dot * scale;
          if (c.softcap > 0) {
            p[s] = c.softcap * std::tanh(p[s] / c.softcap);
          }
          m = std::max(m, p[s]);
        }
        if (last < 0) {
          continue; // no visible key: zeros
        }
        for (int64_t s = from; s <= std::min(last, c.s - 1); ++s) {
          p[s] = std::exp(p[s] - m);
          sum += p[s];
        }
        for (int64_t s = from; s <= std::min(last, c.s - 1); ++s) {
          for (int64_t j = 0; j < c.dv; ++j) {
            out[((bi * c.hq + h) * c.t + t) * c.dv + j] +=
                p[s] / sum * v.at(((bi * c.hkv + kvh) * c.s + s) * c.dv + j);
          }
        }
      }
    }
  }
  return out;
}

} // namespace

TEST(CpuTransformerTest, AttentionGqaCausalAndPlain) {
  const AttentionCase cases[] = {
      {2, 4, 2, 70, 100, 16, 8, true, 3}, // GQA, S > T, two row blocks
      {1, 4, 1, 130, 130, 8, 8, true, 1}, // MQA, square, one slot
      {2, 2, 2, 5, 7, 16, 12, false, 4},  // plain MHA, Dv != D
      {1, 2, 1, 80, 50, 8, 8, true, 2},  // S < T: the first 30 rows see nothing
      {3, 6, 3, 1, 33, 16, 16, true, 4}, // decode: one query row
      // Sliding windows: rows in a block start at different keys; a window
      // wider than the sequence; S > T; with a softcap (Gemma-2).
      {2, 4, 2, 150, 150, 16, 8, true, 3, 40},
      {1, 2, 1, 70, 70, 8, 8, true, 2, 1000},
      {1, 2, 2, 70, 100, 8, 8, true, 2, 7, 2.5},
      {2, 2, 1, 9, 9, 8, 8, false, 2, 0, 1.5},
  };
  for (const AttentionCase &c : cases) {
    Buffer q = randomBuffer(DType::F32, {c.b, c.hq, c.t, c.d}, -1, 1, 25);
    Buffer k = randomBuffer(DType::F32, {c.b, c.hkv, c.s, c.d}, -1, 1, 26);
    Buffer v = randomBuffer(DType::F32, {c.b, c.hkv, c.s, c.dv}, -1, 1, 27);
    Buffer ws(DType::F32, {c.slots * 64 * c.s + 5});
    for (bool explicitScale : {false, true}) {
      double scale = explicitScale ? 0.7 : 1 / std::sqrt(double(c.d));
      std::vector<Attribute> attrs = {intAttr("causal", c.causal)};
      if (explicitScale) {
        attrs.push_back(floatAttr("scale", scale));
      }
      if (c.window > 0) {
        attrs.push_back(intAttr("window", c.window));
      }
      if (c.softcap > 0) {
        attrs.push_back(floatAttr("softcap", c.softcap));
      }
      std::vector<double> want = attentionRef(c, q, k, v, scale);
      for (ThreadPool *pool : {&pool4(), static_cast<ThreadPool *>(nullptr)}) {
        Buffer y = randomBuffer(DType::F32, {c.b, c.hq, c.t, c.dv}, -9, 9, 28);
        ASSERT_EQ(runKernel("attention", {&q, &k, &v, &y, &ws}, attrs, pool),
                  "");
        expectAllNear(y, want, 1e-4, 1e-5,
                      "attention T " + std::to_string(c.t) + " S " +
                          std::to_string(c.s));
      }
    }
  }
}


// Tests that document masking (positions) computes each packed example as
// the reference computes it alone, across row blocks, with GQA, and that
// negative positions are refused.
TEST(CpuTransformerTest, AttentionPositionsKeepPackedExamplesApart) {
  std::vector<std::vector<int64_t>> starts;
  Buffer positions = packedPositions(starts);
  const int64_t hq = 4, hkv = 2, t = 70, d = 16, dv = 8;
  Buffer q = randomBuffer(DType::F32, {2, hq, t, d}, -1, 1, 31);
  Buffer k = randomBuffer(DType::F32, {2, hkv, t, d}, -1, 1, 32);
  Buffer v = randomBuffer(DType::F32, {2, hkv, t, dv}, -1, 1, 33);
  Buffer ws(DType::F32, {3 * 64 * t});
  double scale = 0.3;
  std::vector<Attribute> attrs = {intAttr("causal", 1),
                                  floatAttr("scale", scale),
                                  intAttr("positions", 3)};
  // With a (zero) bias operand too, the positions come after it.
  Buffer zeroBias(DType::F32, {1, 1, 1, 1});
  std::vector<Attribute> biasAttrs = {intAttr("causal", 1),
                                      floatAttr("scale", scale),
                                      intAttr("bias", 1),
                                      intAttr("positions", 4)};
  for (int run = 0; run < 3; ++run) {
    ThreadPool *pool = run == 1 ? nullptr : &pool4();
    Buffer y = randomBuffer(DType::F32, {2, hq, t, dv}, -9, 9, 34);
    ASSERT_EQ(run == 2 ? runKernel("attention",
                                   {&q, &k, &v, &zeroBias, &positions, &y, &ws},
                                   biasAttrs, pool)
                       : runKernel("attention",
                                   {&q, &k, &v, &positions, &y, &ws}, attrs,
                                   pool),
              "");
    for (int64_t b = 0; b < 2; ++b) {
      for (size_t e = 0; e + 1 < starts[b].size(); ++e) {
        int64_t s0 = starts[b][e], len = starts[b][e + 1] - s0;
        AttentionCase alone{1, hq, hkv, len, len, d, dv, true, 1};
        std::vector<double> want =
            attentionRef(alone, segmentRows(q, b, s0, len),
                         segmentRows(k, b, s0, len), segmentRows(v, b, s0, len),
                         scale);
        expectAllNear(segmentRows(y, b, s0, len), want, 1e-4, 1e-5,
                      "packed example " + std::to_string(e) + " of batch " +
                          std::to_string(b));
      }
    }
  }
  // Checks: positions need causal, i64 [B, T], an operand after q, k, v.
  Buffer y(DType::F32, {2, hq, t, dv});
  Buffer wrong(DType::I64, {2, 69});
  auto check = [](std::vector<Buffer *> ops, std::vector<Attribute> a) {
    return checkKernel("attention", ops, a);
  };
  EXPECT_NE(check({&q, &k, &v, &positions, &y, &ws},
                  {intAttr("causal", 0), intAttr("positions", 3)})
                .find("attribute 'positions' needs 'causal'"),
            std::string::npos);
  EXPECT_NE(check({&q, &k, &v, &wrong, &y, &ws},
                  {intAttr("causal", 1), intAttr("positions", 3)})
                .find("operand 3 must have shape [2, 70]"),
            std::string::npos);
  EXPECT_NE(check({&q, &k, &v, &positions, &y, &ws},
                  {intAttr("causal", 1), intAttr("positions", 1)})
                .find("expected an input operand after query, key and value"),
            std::string::npos);
  positions.set(75, -1);
  EXPECT_EQ(runKernel("attention", {&q, &k, &v, &positions, &y, &ws}, attrs),
            "positions[1, 5] = -1 is negative");
}

TEST(CpuTransformerTest, EmbeddingGathersAndRejectsBadIds) {
  Buffer table = randomBuffer(DType::F32, {10, 6}, -1, 1, 29);
  for (DType idType : {DType::I32, DType::I64}) {
    Buffer ids = filled(idType, {2, 3}, {0, 9, 3, 3, 7, 1});
    Buffer y(DType::F32, {2, 3, 6});
    ASSERT_EQ(runKernel("embedding", {&table, &ids, &y}), "");
    std::vector<double> want;
    for (int64_t i = 0; i < 6; ++i) {
      for (int64_t j = 0; j < 6; ++j) {
        want.push_back(table.at(static_cast<int64_t>(ids.at(i)) * 6 + j));
      }
    }
    expectAllNear(y, want, 0, 0, "embedding");
    Buffer bad = filled(idType, {2, 3}, {0, 1, 10, 2, -1, 3});
    EXPECT_EQ(runKernel("embedding", {&table, &bad, &y}),
              "token id 10 at position 2 is out of range [0, 10)");
  }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(CpuDataMovementTest, TransposeAnyPermutationAndDType) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  const Case cases[] = {
      {{70, 45}, {1, 0}},
      {{2, 33, 4, 40}, {0, 2, 1, 3}}, // [B, T, H, D] -> [B, H, T, D]
      {{3, 4, 5}, {2, 0, 1}},
      {{3, 4, 5}, {1, 2, 0}},
      {{6, 1, 7}, {2, 1, 0}},
      {{3, 4}, {0, 1}},
      {{5, 66, 67}, {0, 2, 1}}, // tiled with partial tiles
  };
  for (DType dtype : {DType::F32, DType::I64, DType::Bool, DType::I32}) {
    for (const Case &c : cases) {
      Buffer x = randomBuffer(dtype, c.shape, -100, 100, 30);
      std::vector<int64_t> out;
      for (int64_t p : c.perm) {
        out.push_back(c.shape[p]);
      }
      Buffer y(dtype, out);
      ASSERT_EQ(
          runKernel("transpose", {&x, &y}, {intsAttr("permutation", c.perm)}),
          "");
      std::vector<double> want(y.numel());
      for (int64_t i = 0; i < y.numel(); ++i) {
        // y index -> coordinates -> x coordinates (x dim perm[j] = y dim j).
        std::vector<int64_t> xc(c.shape.size());
        int64_t rest = i;
        for (int64_t j = static_cast<int64_t>(out.size()) - 1; j >= 0; --j) {
          xc[c.perm[j]] = rest % out[j];
          rest /= out[j];
        }
        int64_t xi = 0;
        for (size_t d = 0; d < c.shape.size(); ++d) {
          xi = xi * c.shape[d] + xc[d];
        }
        want[i] = x.at(xi);
      }
      expectAllNear(y, want, 0, 0,
                    "transpose " + ::testing::PrintToString(c.perm));
    }
  }
}

TEST(CpuDataMovementTest, SliceWithStartsAndSteps) {
  Buffer x = randomBuffer(DType::F32, {7, 9, 11}, -1, 1, 31);
  struct Case {
    std::vector<int64_t> starts, steps, out;
  };
  const Case cases[] = {
      {{0, 0, 0}, {1, 1, 1}, {7, 9, 11}}, {{1, 2, 3}, {1, 1, 1}, {5, 4, 8}},
      {{0, 1, 0}, {3, 2, 5}, {3, 4, 3}},  {{6, 8, 10}, {1, 1, 1}, {1, 1, 1}},
      {{2, 0, 1}, {2, 4, 1}, {2, 3, 0}},
  };
  for (const Case &c : cases) {
    Buffer y(DType::F32, c.out);
    ASSERT_EQ(
        runKernel("slice", {&x, &y},
                  {intsAttr("starts", c.starts), intsAttr("steps", c.steps)}),
        "");
    std::vector<double> want;
    for (int64_t i = 0; i < c.out[0]; ++i) {
      for (int64_t j = 0; j < c.out[1]; ++j) {
        for (int64_t l = 0; l < c.out[2]; ++l) {
          int64_t a = c.starts[0] + i * c.steps[0];
          int64_t b = c.starts[1] + j * c.steps[1];
          int64_t e = c.starts[2] + l * c.steps[2];
          want.push_back(x.at((a * 9 + b) * 11 + e));
        }
      }
    }
    expectAllNear(y, want, 0, 0, "slice");
  }
}

TEST(CpuDataMovementTest, ConcatAndSplitRoundTrip) {
  for (int64_t axis = 0; axis < 3; ++axis) {
    std::vector<int64_t> extents = {3, 0, 5, 1};
    std::vector<Buffer> pieces;
    std::vector<int64_t> whole = {4, 6, 7};
    whole[axis] = 9;
    for (size_t i = 0; i < extents.size(); ++i) {
      std::vector<int64_t> shape = whole;
      shape[axis] = extents[i];
      pieces.push_back(randomBuffer(DType::I64, shape, -99, 99, 32 + i));
    }
    Buffer y(DType::I64, whole);
    std::vector<Buffer *> ops;
    for (Buffer &p : pieces) {
      ops.push_back(&p);
    }
    ops.push_back(&y);
    ASSERT_EQ(runKernel("concat", ops, {intAttr("axis", axis)}), "");
    std::vector<double> want(y.numel());
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t inner = 1;
      for (int64_t d = axis + 1; d < 3; ++d) {
        inner *= whole[d];
      }
      int64_t outer = i / (whole[axis] * inner), at = i / inner % whole[axis];
      size_t p = 0;
      while (at >= extents[p]) {
        at -= extents[p++];
      }
      want[i] = pieces[p].at((outer * extents[p] + at) * inner + i % inner);
    }
    expectAllNear(y, want, 0, 0, "concat axis " + std::to_string(axis));
    std::vector<Buffer> back;
    for (Buffer &p : pieces) {
      back.emplace_back(DType::I64, p.shape);
    }
    std::vector<Buffer *> splitOps = {&y};
    for (Buffer &p : back) {
      splitOps.push_back(&p);
    }
    ASSERT_EQ(runKernel("split", splitOps, {intAttr("axis", axis)}), "");
    for (size_t i = 0; i < pieces.size(); ++i) {
      EXPECT_TRUE(back[i].sameBytes(pieces[i])) << "split piece " << i;
    }
  }
  // A large concat along axis 0 splits single pieces across chunks.
  Buffer a = randomBuffer(DType::F32, {300, 1000}, -1, 1, 40);
  Buffer b = randomBuffer(DType::F32, {200, 1000}, -1, 1, 41);
  Buffer y(DType::F32, {500, 1000});
  ASSERT_EQ(runKernel("concat", {&a, &b, &y}, {intAttr("axis", 0)}), "");
  Buffer a2(DType::F32, {300, 1000}), b2(DType::F32, {200, 1000});
  ASSERT_EQ(runKernel("split", {&y, &a2, &b2}, {intAttr("axis", 0)}), "");
  EXPECT_TRUE(a2.sameBytes(a));
  EXPECT_TRUE(b2.sameBytes(b));
}

// Tests that the data-movement kernels, which copy with memcpy, refuse
// outputs that overlap their inputs or each other (what a tampered plan
// that passes verification could ask for), and accept views apart.
TEST(CpuDataMovementTest, OutputsOverlappingInputsAreRefused) {
  Buffer whole = randomBuffer(DType::F32, {16}, -1, 1, 51);
  auto view = [&](int64_t offset, std::vector<int64_t> shape) {
    Tensor t = whole.tensor();
    t.data = whole.data<float>() + offset;
    t.shape = std::move(shape);
    return t;
  };
  KernelCall call;
  call.operands = {view(0, {8}), view(4, {8})}; // x[0, 8) -> y[4, 12)
  EXPECT_NE(findCpuKernel("copy")->check(call).find("overlaps operand 0"),
            std::string::npos);
  call.operands = {view(0, {8}), view(8, {8})}; // apart
  EXPECT_EQ(findCpuKernel("copy")->check(call), "");
  call.operands = {view(0, {4}), view(8, {4}), view(6, {8})};
  EXPECT_NE(findCpuKernel("concat")->check(call), "");
  call.attributes = Attributes({intAttr("axis", 0)});
  call.operands = {view(0, {8}), view(8, {4}), view(10, {4})}; // pieces meet
  EXPECT_NE(findCpuKernel("split")->check(call).find("operand 1 overlaps operand 2"),
            std::string::npos);
}

TEST(CpuDataMovementTest, BroadcastAndCopy) {
  const Shapes cases[] = {
      {{5}, {}, {3, 5}},
      {{3, 1}, {}, {3, 70000}},
      {{1}, {}, {4, 4}},
      {{2, 1, 3}, {}, {2, 4, 3}},
  };
  for (DType dtype : {DType::F32, DType::F64, DType::Bool}) {
    for (const Shapes &c : cases) {
      Buffer x = randomBuffer(dtype, c.a, -5, 5, 42);
      Buffer y(dtype, c.y);
      ASSERT_EQ(runKernel("broadcast", {&x, &y}), "");
      std::vector<double> want(y.numel());
      for (int64_t i = 0; i < y.numel(); ++i) {
        want[i] = x.at(broadcastIndex(c.a, c.y, i));
      }
      expectAllNear(y, want, 0, 0, "broadcast");
    }
  }
  Buffer x = randomBuffer(DType::F32, {600, 1000}, -1, 1, 43);
  Buffer y(DType::I32, {1000, 600}); // copy moves bytes: dtype may differ
  ASSERT_EQ(runKernel("copy", {&x, &y}), "");
  EXPECT_EQ(std::memcmp(x.tensor().data, y.tensor().data, x.numel() * 4), 0);
}

//===----------------------------------------------------------------------===//
// check() rejections
//===----------------------------------------------------------------------===//

/// The operands the rejection cases below launch with.
struct CheckOperands {
  Buffer f4{DType::F32, {4}};
  Buffer f4b{DType::F32, {4}};
  Buffer f5{DType::F32, {5}};
  Buffer f23{DType::F32, {2, 3}};
  Buffer f32x{DType::F32, {3, 2}};
  Buffer f3{DType::F32, {3}};
  Buffer d4{DType::F64, {4}};
  Buffer i4{DType::I64, {4}};
  Buffer b4{DType::Bool, {4}};
  Buffer i32x4{DType::I32, {4}};
  Buffer q{DType::F32, {1, 4, 8, 16}};
  Buffer k{DType::F32, {1, 2, 8, 16}};
  Buffer v{DType::F32, {1, 2, 8, 16}};
  Buffer y{DType::F32, {1, 4, 8, 16}};
  Buffer k3{DType::F32, {1, 3, 8, 16}};
  Buffer v3{DType::F32, {1, 3, 8, 16}};
  Buffer ws{DType::F32, {64 * 8}};
  Buffer smallWs{DType::F32, {64 * 8 - 1}};
  Buffer cosT{DType::F32, {8, 16}};
  Buffer badCos{DType::F32, {7, 16}};
  Buffer odd{DType::F32, {1, 1, 8, 15}};
  Buffer cosOdd{DType::F32, {8, 15}};
  Buffer table{DType::F32, {10, 3}};
  Buffer ids{DType::I64, {4}};
  Buffer emb{DType::F32, {4, 3}};
  Buffer fIds{DType::F32, {4}};
  Buffer emb2{DType::F32, {4, 2}};
};

/// A launch `kernel` must reject with a message containing `expected`.
struct RejectionCase {
  const char *kernel;
  std::vector<Buffer *> ops;
  std::vector<Attribute> attrs;
  const char *expected; // a substring of the message
};

void expectRejected(const std::vector<RejectionCase> &cases) {
  for (const RejectionCase &c : cases) {
    std::string message = checkKernel(c.kernel, c.ops, c.attrs);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << c.kernel << ": got '" << message << "', expected '" << c.expected
        << "'";
    // House style: lowercase start, no final period.
    ASSERT_FALSE(message.empty()) << c.kernel;
    EXPECT_TRUE(std::islower(static_cast<unsigned char>(message[0])))
        << message;
    EXPECT_NE(message.back(), '.') << message;
  }
}

TEST(CpuKernelCheckTest, RejectsWrongArityAndDtypes) {
  CheckOperands o;
  expectRejected({
      // Arity.
      {"exp", {&o.f4}, {}, "expected 2 operands, got 1"},
      {"add", {&o.f4, &o.f4b}, {}, "expected 3 operands, got 2"},
      {"attention", {&o.q, &o.k, &o.v, &o.y}, {}, "expected 5 operands, got 4"},
      {"linear", {&o.f23}, {}, "expected 3 to 4 operands, got 1"},
      {"concat", {&o.f4}, {intAttr("axis", 0)}, "at least 2 operands"},
      // Dtypes.
      {"exp", {&o.i4, &o.i4}, {}, "operand 0 must be f32 or f64, got i64"},
      {"exp", {&o.f4, &o.d4}, {}, "operand 1 must be f32 like operand 0, got f64"},
      {"add", {&o.f4, &o.d4, &o.f4b}, {}, "operand 1 must be f32 like operand 0"},
      {"add", {&o.b4, &o.b4, &o.b4}, {}, "got bool"},
      {"eq", {&o.f4, &o.f4b, &o.f4}, {}, "operand 2 must be bool, got f32"},
      {"is_nan", {&o.f4, &o.f4b}, {}, "operand 1 must be bool"},
      {"select", {&o.f4, &o.f4, &o.f4, &o.f4}, {}, "operand 0 must be bool"},
      {"rms_norm",
       {&o.d4, &o.d4, &o.d4},
       {floatAttr("epsilon", 1e-6)},
       "must be f32"},
      {"embedding", {&o.table, &o.fIds, &o.emb}, {}, "operand 1 must be i32 or i64"},
  });
}

TEST(CpuKernelCheckTest, RejectsShapesThatDoNotFit) {
  CheckOperands o;
  expectRejected({
      {"exp", {&o.f4, &o.f5}, {}, "operand 1 must have shape [4], got [5]"},
      {"add",
       {&o.f4, &o.f5, &o.f4b},
       {},
       "operand 1 of shape [5] does not broadcast to [4]"},
      {"add", {&o.f23, &o.f3, &o.f32x}, {}, "does not broadcast to [3, 2]"},
      {"matmul", {&o.f23, &o.f23, &o.f23}, {}, "contraction extents differ"},
      {"matmul", {&o.f4, &o.f4, &o.f4}, {}, "must have rank >= 2"},
      {"linear", {&o.f23, &o.f32x, &o.f23}, {}, "does not match input"},
      {"rms_norm",
       {&o.f23, &o.f4, &o.f23},
       {floatAttr("epsilon", 1e-6)},
       "operand 1 must have shape [3]"},
      {"attention",
       {&o.q, &o.k3, &o.v3, &o.y, &o.ws},
       {},
       "must be a multiple of key/value heads"},
      {"attention", {&o.q, &o.k, &o.v, &o.f23, &o.ws}, {}, "operand 3 must have rank 4"},
      {"attention",
       {&o.q, &o.k, &o.v, &o.y, &o.smallWs},
       {},
       "holds no 64 x 8 score block"},
      {"rope",
       {&o.q, &o.badCos, &o.badCos, &o.q},
       {},
       "operand 1 must have shape [8, 16] or [1, 8, 16]"},
      {"rope", {&o.odd, &o.cosOdd, &o.cosOdd, &o.odd}, {}, "must be even"},
      {"embedding",
       {&o.table, &o.ids, &o.emb2},
       {},
       "operand 2 must have shape [4, 3]"},
      {"transpose",
       {&o.f23, &o.f23},
       {intsAttr("permutation", {1, 0})},
       "operand 1 must have shape [3, 2]"},
      {"slice",
       {&o.f23, &o.f23},
       {intsAttr("starts", {1, 0}), intsAttr("steps", {1, 1})},
       "reads past its extent 2"},
      {"concat", {&o.f23, &o.f32x, &o.f23}, {intAttr("axis", 0)}, "does not match"},
      {"concat",
       {&o.f23, &o.f23, &o.f23},
       {intAttr("axis", 1)},
       "pieces add up to 6 along axis 1, expected 3"},
      {"broadcast", {&o.f4, &o.f23}, {}, "does not broadcast"},
      {"copy", {&o.f4, &o.f5}, {}, "copy of 16 bytes into 20"},
      {"reduce_sum",
       {&o.f23, &o.f23},
       {intsAttr("axes", {1})},
       "operand 1 must have shape [2]"},
  });
}

TEST(CpuKernelCheckTest, RejectsBadAttributes) {
  CheckOperands o;
  expectRejected({
      {"softmax", {&o.f23, &o.f23}, {}, "missing int attribute 'axis'"},
      {"softmax",
       {&o.f23, &o.f23},
       {intAttr("axis", 2)},
       "attribute 'axis' is 2, expected a value in [0, 1]"},
      {"rms_norm", {&o.f4, &o.f4, &o.f4}, {}, "missing float attribute 'epsilon'"},
      {"reduce_sum", {&o.f23, &o.f3}, {}, "missing ints attribute 'axes'"},
      {"reduce_sum",
       {&o.f23, &o.f3},
       {intsAttr("axes", {1, 0})},
       "must be sorted distinct axes"},
      {"reduce_sum",
       {&o.f23, &o.f3},
       {intsAttr("axes", {0}), intAttr("keep_dims", 2)},
       "attribute 'keep_dims' is 2"},
      {"transpose",
       {&o.f23, &o.f32x},
       {intsAttr("permutation", {0, 0})},
       "is not a permutation"},
      {"transpose",
       {&o.f23, &o.f32x},
       {intsAttr("permutation", {1})},
       "has 1 entries, expected 2"},
      {"slice",
       {&o.f23, &o.f23},
       {intsAttr("starts", {0, 0}), intsAttr("steps", {1, 0})},
       "attribute 'steps' has entry 0"},
      {"attention",
       {&o.q, &o.k, &o.v, &o.y, &o.ws},
       {intAttr("causal", 2)},
       "attribute 'causal' is 2"},
      {"attention",
       {&o.q, &o.k, &o.v, &o.y, &o.ws},
       {stringAttr("scale", "x")},
       "attribute 'scale' must be a float"},
      {"rope",
       {&o.q, &o.cosT, &o.cosT, &o.q},
       {floatAttr("interleaved", 1)},
       "attribute 'interleaved' must be an int"},
      {"concat", {&o.f23, &o.f23, &o.f23}, {}, "missing int attribute 'axis'"},
      {"linear",
       {&o.f23, &o.f32x, &o.f23},
       {intAttr("transpose_weight", 2)},
       "attribute 'transpose_weight' is 2"},
  });
}

TEST(CpuKernelCheckTest, AcceptsTheSameLaunchesWellFormed) {
  CheckOperands o;
  EXPECT_EQ(checkKernel("attention", {&o.q, &o.k, &o.v, &o.y, &o.ws},
                        {intAttr("causal", 1)}),
            "");
  EXPECT_EQ(checkKernel("rope", {&o.q, &o.cosT, &o.cosT, &o.q}, {}), "");
  EXPECT_EQ(checkKernel("add", {&o.f23, &o.f3, &o.f23}), "");
  EXPECT_EQ(checkKernel("eq", {&o.i32x4, &o.i32x4, &o.b4}), "");
}
