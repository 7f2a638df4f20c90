//===- CudaGradientKernelsTest.cpp - CUDA gradient kernels vs the CPU -----===//
//
// Every launcher of runtime/cuda/GradientLaunchers.cpp against the CPU
// kernel of the same name: the activation, softmax, rope, norm, slice and
// embedding gradients, dropout (its mask bit for bit) and cross-entropy with
// its gradient, on f32 at a few ulp and bf16 storage at bf16's precision,
// plus the in-place launches the plan makes (dx over dy, dlogits over
// logits), which need a hand-built launch with shared buffers. A token id
// or label out of range must set the device error record (value, position,
// bound, the step) and fail the launch with the CPU kernel's message, while
// the kernel stays inside its tensors; good ones leave the record clear.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/GradientKernels.cu"

#include "test/runtime/cuda/CudaTestUtil.h"

#include <cmath>
#include <cstring>

namespace tailor::runtime::cuda::testing {
namespace {

constexpr Tolerance kF32{1e-5, 1e-5};
/// bf16 outputs against the CPU's f32 result on the same (bf16) inputs: one
/// rounding (2^-9 relative) plus the f32 math.
constexpr Tolerance kBf16{1e-4, 1e-2};

HostTensor bf16(const HostTensor &t) { return converted(t, DType::BF16); }

HostTensor i64Tensor(std::vector<int64_t> shape, std::vector<int64_t> values) {
  HostTensor t(DType::I64, std::move(shape));
  std::memcpy(t.data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

HostTensor f32Tensor(std::vector<int64_t> shape, std::vector<float> values) {
  HostTensor t(DType::F32, std::move(shape));
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}

/// The CUDA launcher with operand i sharing the device buffer of operand
/// aliasOf[i] when that is >= 0 (in-place launches, which the harness's
/// one-buffer-per-operand runs cannot express); the operands as left.
std::vector<HostTensor> runAliased(TestBackend &backend,
                                   const std::string &kernel,
                                   std::vector<HostTensor> operands,
                                   std::vector<Attribute> attributes,
                                   std::vector<int> aliasOf) {
  const CudaKernelDef *def = findCudaKernel(kernel);
  KernelCall check;
  for (HostTensor &t : operands) {
    check.operands.push_back(t.tensor());
  }
  check.attributes = Attributes(attributes);
  EXPECT_EQ(def->check(check), "");
  CudaCall call;
  call.attributes = Attributes(std::move(attributes));
  call.context = &backend.context();
  for (size_t i = 0; i < operands.size(); ++i) {
    Tensor device = operands[i].tensor();
    if (aliasOf[i] >= 0) {
      device.data = call.operands[aliasOf[i]].data;
    } else {
      device.data = backend.allocate(std::max<size_t>(operands[i].bytes(), 1));
      backend.upload(device.data, operands[i].data(), operands[i].bytes());
    }
    call.operands.push_back(device);
  }
  EXPECT_EQ(def->launch(call), "");
  EXPECT_EQ(backend.synchronize(), "");
  for (size_t i = 0; i < operands.size(); ++i) {
    backend.download(operands[i].data(), call.operands[i].data,
                     operands[i].bytes());
  }
  return operands;
}

/// Element-wise |got - want| <= atol + rtol |want|, reporting the worst.
void expectClose(const HostTensor &got, const HostTensor &want, Tolerance tol,
                 const std::string &what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  int64_t bad = 0, worst = -1;
  double worstExcess = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.at(i), w = want.at(i);
    double excess = std::fabs(g - w) - (tol.atol + tol.rtol * std::fabs(w));
    if (!(excess <= 0) && !(std::isnan(g) && std::isnan(w))) {
      ++bad;
      if (worst < 0 || excess > worstExcess) {
        worst = i;
        worstExcess = excess;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": worst at " << worst << ": cuda "
                    << (worst >= 0 ? got.at(worst) : 0) << " vs cpu "
                    << (worst >= 0 ? want.at(worst) : 0);
}

//===----------------------------------------------------------------------===//
// silu_grad, gelu_grad
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, SiluGradMatchesCpu) {
  HostTensor x = randomF32({3, 1001}, 1, -8, 8), dy = randomF32({3, 1001}, 2);
  expectMatchesCpu(*backend, "silu_grad",
                   {x, dy, HostTensor(DType::F32, x.shape)}, {}, {2}, kF32);
  expectMatchesCpu(*backend, "silu_grad",
                   {bf16(x), bf16(dy), HostTensor(DType::BF16, x.shape)}, {},
                   {2}, kBf16);
}

TEST_F(CudaKernelTest, GeluGradMatchesCpu) {
  HostTensor x = randomF32({7, 333}, 3, -6, 6), dy = randomF32({7, 333}, 4);
  for (const char *approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    std::vector<Attribute> attrs = {stringAttr("approximate", approximate)};
    expectMatchesCpu(*backend, "gelu_grad",
                     {x, dy, HostTensor(DType::F32, x.shape)}, attrs, {2},
                     kF32);
    expectMatchesCpu(*backend, "gelu_grad",
                     {bf16(x), bf16(dy), HostTensor(DType::BF16, x.shape)},
                     attrs, {2}, kBf16);
  }
}

//===----------------------------------------------------------------------===//
// softmax_grad
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, SoftmaxGradMatchesCpuOnEveryAxis) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  for (const Case &c : {Case{{5, 1000}, 1}, Case{{9, 17}, 1},
                        Case{{3, 50, 70}, 1}, Case{{40, 3, 5}, 0}}) {
    SCOPED_TRACE(c.axis);
    HostTensor y = randomF32(c.shape, 5, 0, 1), dy = randomF32(c.shape, 6);
    std::vector<Attribute> attrs = {intAttr("axis", c.axis)};
    expectMatchesCpu(*backend, "softmax_grad",
                     {y, dy, HostTensor(DType::F32, c.shape)}, attrs, {2},
                     kF32);
    expectMatchesCpu(*backend, "softmax_grad",
                     {bf16(y), bf16(dy), HostTensor(DType::BF16, c.shape)},
                     attrs, {2}, {1e-3, 1e-2});
  }
}

//===----------------------------------------------------------------------===//
// rope_grad
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, RopeGradMatchesCpu) {
  std::vector<int64_t> shape = {2, 3, 5, 16};
  HostTensor dy = randomF32(shape, 7);
  for (bool perBatch : {false, true}) {
    std::vector<int64_t> table =
        perBatch ? std::vector<int64_t>{2, 5, 16} : std::vector<int64_t>{5, 16};
    HostTensor c = randomF32(table, 8), s = randomF32(table, 9);
    for (int interleaved : {0, 1}) {
      SCOPED_TRACE(std::to_string(perBatch) + " " +
                   std::to_string(interleaved));
      std::vector<Attribute> attrs = {intAttr("interleaved", interleaved)};
      expectMatchesCpu(*backend, "rope_grad",
                       {dy, c, s, HostTensor(DType::F32, shape)}, attrs, {3},
                       kF32);
      expectMatchesCpu(*backend, "rope_grad",
                       {bf16(dy), c, s, HostTensor(DType::BF16, shape)}, attrs,
                       {3}, kBf16);
      expectMatchesCpu(
          *backend, "rope_grad",
          {bf16(dy), bf16(c), bf16(s), HostTensor(DType::BF16, shape)}, attrs,
          {3}, kBf16);
    }
  }
}

TEST_F(CudaKernelTest, RopeGradInPlace) {
  std::vector<int64_t> shape = {1, 2, 4, 8};
  HostTensor dy = randomF32(shape, 10), c = randomF32({4, 8}, 11),
             s = randomF32({4, 8}, 12);
  std::vector<Attribute> attrs = {intAttr("interleaved", 1)};
  std::vector<HostTensor> want =
      runCpu("rope_grad", {dy, c, s, HostTensor(DType::F32, shape)}, attrs);
  std::vector<HostTensor> got = runAliased(
      *backend, "rope_grad", {dy, c, s, HostTensor(DType::F32, shape)}, attrs,
      {-1, -1, -1, 0});
  expectClose(got[3], want[3], kF32, "dx over dy");
}

//===----------------------------------------------------------------------===//
// rms_norm_grad, layer_norm_grad
//===----------------------------------------------------------------------===//

/// dy, x, w, dx, dw, (db,) workspace for rows x d.
std::vector<HostTensor> normGradOperands(bool layer, std::vector<int64_t> shape,
                                         DType act, DType weight,
                                         uint64_t seed) {
  int64_t d = shape.back(), rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    rows *= shape[i];
  }
  HostTensor dy = randomF32(shape, seed), x = randomF32(shape, seed + 1, -2, 2);
  HostTensor w = randomF32({d}, seed + 2, 0.5f, 1.5f);
  std::vector<HostTensor> ops = {converted(dy, act), converted(x, act),
                                 converted(w, weight), HostTensor(act, shape),
                                 randomF32({d}, seed + 3)};
  if (layer) {
    ops.push_back(randomF32({d}, seed + 4));
  }
  ops.push_back(HostTensor(DType::F32, {(layer ? 2 : 1) * rows + 3}));
  return ops;
}

TEST_F(CudaKernelTest, NormGradsMatchCpu) {
  for (bool layer : {false, true}) {
    const char *kernel = layer ? "layer_norm_grad" : "rms_norm_grad";
    std::vector<size_t> compared =
        layer ? std::vector<size_t>{3, 4, 5} : std::vector<size_t>{3, 4};
    std::vector<Attribute> attrs = {floatAttr("epsilon", 1e-5)};
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{4, 7, 96}, std::vector<int64_t>{3, 2100},
          std::vector<int64_t>{1, 5}}) {
      SCOPED_TRACE(std::string(kernel) + " d " + std::to_string(shape.back()));
      expectMatchesCpu(
          *backend, kernel,
          normGradOperands(layer, shape, DType::F32, DType::F32, 20), attrs,
          compared, kF32);
      for (DType weight : {DType::F32, DType::BF16}) {
        // dx is bf16; dw and db stay f32 from the same bf16 inputs.
        std::vector<HostTensor> ops =
            normGradOperands(layer, shape, DType::BF16, weight, 30);
        expectMatchesCpu(*backend, kernel, ops, attrs, {3}, kBf16);
        expectMatchesCpu(*backend, kernel, ops, attrs,
                         layer ? std::vector<size_t>{4, 5}
                               : std::vector<size_t>{4},
                         {1e-4, 1e-4});
      }
    }
  }
}

TEST_F(CudaKernelTest, NormGradsInPlace) {
  // dx over dy (and over x): the column sums must read them before dx is
  // written.
  for (bool layer : {false, true}) {
    const char *kernel = layer ? "layer_norm_grad" : "rms_norm_grad";
    std::vector<Attribute> attrs = {floatAttr("epsilon", 1e-6)};
    std::vector<HostTensor> ops =
        normGradOperands(layer, {33, 80}, DType::F32, DType::F32, 40);
    std::vector<HostTensor> want = runCpu(kernel, ops, attrs);
    for (int alias : {0, 1}) {
      SCOPED_TRACE(std::string(kernel) + " alias " + std::to_string(alias));
      std::vector<int> aliasOf(ops.size(), -1);
      aliasOf[3] = alias;
      std::vector<HostTensor> got =
          runAliased(*backend, kernel, ops, attrs, aliasOf);
      expectClose(got[3], want[3], kF32, "dx");
      expectClose(got[4], want[4], kF32, "dw");
      if (layer) {
        expectClose(got[5], want[5], kF32, "db");
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// slice_grad
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, SliceGradMatchesCpu) {
  std::vector<Attribute> attrs = {intsAttr("starts", {1, 2, 0}),
                                  intsAttr("steps", {2, 3, 1})};
  HostTensor dy = randomF32({2, 4, 9}, 50);
  // dx starts as garbage: the launcher must zero it.
  HostTensor dx = randomF32({5, 12, 9}, 51);
  expectMatchesCpu(*backend, "slice_grad", {dy, dx}, attrs, {1}, kF32);
  expectMatchesCpu(*backend, "slice_grad", {bf16(dy), bf16(dx)}, attrs, {1},
                   kBf16);
  expectMatchesCpu(*backend, "slice_grad",
                   {HostTensor(DType::F32, {}), randomF32({}, 52)},
                   {intsAttr("starts", {}), intsAttr("steps", {})}, {1}, kF32);
}

//===----------------------------------------------------------------------===//
// embedding_grad
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, EmbeddingGradMatchesCpuWithRepeatedIds) {
  // 64 tokens over a vocabulary of 10: every id repeats.
  HostTensor dy = randomF32({4, 16, 70}, 60);
  HostTensor table = randomF32({10, 70}, 61);
  for (DType idType : {DType::I32, DType::I64}) {
    HostTensor ids = randomInts({4, 16}, 62, 0, 10, idType);
    for (int accumulate : {0, 1}) {
      SCOPED_TRACE(accumulate);
      std::vector<Attribute> attrs = {intAttr("accumulate", accumulate)};
      expectMatchesCpu(*backend, "embedding_grad", {dy, ids, table}, attrs, {2},
                       kF32);
      expectMatchesCpu(*backend, "embedding_grad", {bf16(dy), ids, table},
                       attrs, {2}, kF32);
    }
  }
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, DropoutMaskIsTheCpuMaskBitForBit) {
  // x has no zeros, so y == 0 exactly where an element was dropped.
  HostTensor x = randomF32({7, 1013}, 70, 0.5f, 2.0f);
  for (double p : {0.1, 0.5, 0.9}) {
    for (int64_t salt : {0, 7, -3}) {
      SCOPED_TRACE(std::to_string(p) + " salt " + std::to_string(salt));
      std::vector<Attribute> attrs = {floatAttr("p", p), intAttr("salt", salt)};
      HostTensor seed = i64Tensor({}, {int64_t(0x1234567890abcdefLL) + salt});
      // f32: y is x * (1 / (1 - p)) or 0 on both sides, so bit for bit.
      expectMatchesCpu(*backend, "dropout",
                       {x, seed, HostTensor(DType::F32, x.shape)}, attrs, {2},
                       {0, 0});
      std::vector<HostTensor> want =
          runCpu("dropout", {x, seed, HostTensor(DType::F32, x.shape)}, attrs);
      std::vector<HostTensor> got =
          runCuda(*backend, "dropout",
                  {bf16(x), seed, HostTensor(DType::BF16, x.shape)}, attrs);
      int64_t mismatched = 0, dropped = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        dropped += want[2].at(i) == 0;
        mismatched += (got[2].at(i) == 0) != (want[2].at(i) == 0);
      }
      EXPECT_EQ(mismatched, 0);
      EXPECT_NEAR(double(dropped) / double(x.numel()), p, 0.03);
      expectClose(got[2], want[2], kBf16, "bf16 kept values");
    }
  }
}

TEST_F(CudaKernelTest, DropoutWithZeroPCopies) {
  HostTensor x = randomF32({333}, 71);
  expectMatchesCpu(*backend, "dropout",
                   {x, i64Tensor({}, {5}), HostTensor(DType::F32, x.shape)},
                   {floatAttr("p", 0.0)}, {2}, {0, 0});
}

//===----------------------------------------------------------------------===//
// cross_entropy, cross_entropy_grad
//===----------------------------------------------------------------------===//

/// Labels in [0, v) with rows 1 and 4 (when present) set to ignore_index.
HostTensor labelsFor(int64_t n, int64_t v, DType dtype, uint64_t seed) {
  HostTensor labels = randomInts({n}, seed, 0, v, DType::I64);
  for (int64_t r : {1, 4}) {
    if (r < n) {
      labels.as<int64_t>()[r] = -100;
    }
  }
  return converted(labels, dtype);
}

TEST_F(CudaKernelTest, CrossEntropyMatchesCpu) {
  for (int64_t v : {int64_t(1000), int64_t(50257)}) {
    int64_t n = v == 1000 ? 9 : 3;
    HostTensor logits = randomF32({n, v}, 80, -6, 6);
    for (DType labelType : {DType::I32, DType::I64}) {
      HostTensor labels = labelsFor(n, v, labelType, 81);
      for (const char *reduction : {"mean", "sum", "none"}) {
        SCOPED_TRACE(std::to_string(v) + " " + reduction);
        std::vector<Attribute> attrs = {stringAttr("reduction", reduction)};
        std::vector<int64_t> lossShape;
        if (std::string(reduction) == "none") {
          lossShape = {n};
        }
        expectMatchesCpu(*backend, "cross_entropy",
                         {logits, labels, randomF32(lossShape, 82),
                          HostTensor(DType::F32, {n})},
                         attrs, {2}, kF32);
        expectMatchesCpu(*backend, "cross_entropy",
                         {bf16(logits), labels, randomF32(lossShape, 82),
                          HostTensor(DType::F32, {n})},
                         attrs, {2}, kF32);
      }
    }
  }
}

TEST_F(CudaKernelTest, CrossEntropyOfOnlyIgnoredRowsIsZero) {
  HostTensor logits = randomF32({2, 37}, 83);
  HostTensor labels = i64Tensor({2}, {7, 7});
  std::vector<Attribute> attrs = {intAttr("ignore_index", 7)};
  expectMatchesCpu(
      *backend, "cross_entropy",
      {logits, labels, f32Tensor({}, {123.0f}), HostTensor(DType::F32, {2})},
      attrs, {2}, {0, 0});
  expectMatchesCpu(
      *backend, "cross_entropy_grad",
      {logits, labels, f32Tensor({}, {1.0f}), randomF32({2, 37}, 84)}, attrs,
      {3}, {0, 0});
}

TEST_F(CudaKernelTest, CrossEntropyGradMatchesCpu) {
  for (int64_t v : {int64_t(1000), int64_t(50257)}) {
    // 70 rows of 1000 are more than the mean's grid (4 emulated SMs x 16
    // blocks), so blocks loop over rows.
    int64_t n = v == 1000 ? 70 : 3;
    HostTensor logits = randomF32({n, v}, 85, -6, 6);
    for (DType labelType : {DType::I32, DType::I64}) {
      HostTensor labels = labelsFor(n, v, labelType, 86);
      for (const char *reduction : {"mean", "sum", "none"}) {
        SCOPED_TRACE(std::to_string(v) + " " + reduction);
        std::vector<Attribute> attrs = {stringAttr("reduction", reduction)};
        HostTensor dloss = std::string(reduction) == "none"
                               ? randomF32({n}, 87, 0.5f, 2.0f)
                               : f32Tensor({}, {0.75f});
        // Probabilities are ~1/V: the absolute tolerance scales with them.
        Tolerance tol{1e-5 / double(v), 1e-5};
        expectMatchesCpu(
            *backend, "cross_entropy_grad",
            {logits, labels, dloss, HostTensor(DType::F32, {n, v})}, attrs, {3},
            tol);
        expectMatchesCpu(
            *backend, "cross_entropy_grad",
            {bf16(logits), labels, dloss, HostTensor(DType::BF16, {n, v})},
            attrs, {3}, {1e-3 / double(v), 1e-2});
      }
    }
  }
}

TEST_F(CudaKernelTest, CrossEntropyGradInPlace) {
  int64_t n = 6, v = 300;
  HostTensor logits = randomF32({n, v}, 88, -4, 4);
  HostTensor labels = labelsFor(n, v, DType::I64, 89);
  std::vector<Attribute> attrs = {stringAttr("reduction", "mean")};
  std::vector<HostTensor> ops = {logits, labels, f32Tensor({}, {1.0f}),
                                 HostTensor(DType::F32, {n, v})};
  std::vector<HostTensor> want = runCpu("cross_entropy_grad", ops, attrs);
  std::vector<HostTensor> got =
      runAliased(*backend, "cross_entropy_grad", ops, attrs, {-1, -1, -1, 0});
  expectClose(got[3], want[3], {1e-8, 1e-5}, "dlogits over logits");
}

//===----------------------------------------------------------------------===//
// Bad ids and labels: the device error record
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, EmbeddingGradReportsAnOutOfRangeId) {
  HostTensor dy = randomF32({4, 6}, 90);
  HostTensor table = randomF32({10, 6}, 91);
  for (DType idType : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(idType));
    HostTensor ids = converted(i64Tensor({4}, {1, 12, 3, 0}), idType);
    std::vector<Attribute> attrs = {intAttr("accumulate", 0)};
    // The bad token adds nothing anywhere; the others land in their rows.
    std::vector<HostTensor> out = {dy, ids, table};
    runCudaForError(*backend, "embedding_grad", out, attrs, 21);
    for (int64_t row = 0; row < 10; ++row) {
      int64_t token = row == 1 ? 0 : row == 3 ? 2 : row == 0 ? 3 : -1;
      for (int64_t c = 0; c < 6; ++c) {
        float want = token < 0 ? 0.0f : dy.as<float>()[token * 6 + c];
        EXPECT_EQ(out[2].as<float>()[row * 6 + c], want)
            << "row " << row << " column " << c;
      }
    }
    DeviceErrorRecord want{tl::kEmbeddingGradId, 21, 12, 1, 10};
    expectDeviceError(*backend, "embedding_grad", {bf16(dy), ids, table},
                      attrs, want);
    EXPECT_EQ(cpuRunError("embedding_grad", {dy, ids, table}, attrs),
              describeDeviceError(want));
  }
  EXPECT_EQ(describeDeviceError({tl::kEmbeddingGradId, 21, 12, 1, 10}),
            "token id 12 at position 1 is out of range [0, 10)");
}

TEST_F(CudaKernelTest, CrossEntropyReportsAnOutOfRangeLabel) {
  const int64_t n = 3, v = 37;
  HostTensor logits = randomF32({n, v}, 92, -3, 3);
  for (int64_t bad : {v, int64_t(-2)}) {
    for (DType labelType : {DType::I32, DType::I64}) {
      SCOPED_TRACE(std::string(dtypeName(labelType)) + " label " +
                   std::to_string(bad));
      // Row 2 is ignored (-100), row 1 holds the bad label.
      HostTensor labels = converted(i64Tensor({n}, {5, bad, -100}), labelType);
      std::vector<Attribute> mean = {stringAttr("reduction", "mean")};
      std::vector<HostTensor> forward = {logits, labels,
                                         HostTensor(DType::F32, {}),
                                         HostTensor(DType::F32, {n})};
      std::vector<HostTensor> out = forward;
      runCudaForError(*backend, "cross_entropy", out, mean, 30);
      EXPECT_TRUE(std::isnan(out[2].at(0))) << "the mean loss";
      DeviceErrorRecord want{tl::kCrossEntropyLabel, 30, bad, 1, v};
      expectDeviceError(*backend, "cross_entropy", forward, mean, want);
      EXPECT_EQ(cpuRunError("cross_entropy", forward, mean),
                describeDeviceError(want));

      // The gradient: the bad row is NaN, the others are finite.
      std::vector<HostTensor> backward = {logits, labels,
                                          f32Tensor({}, {1.0f}),
                                          HostTensor(DType::F32, {n, v})};
      out = backward;
      runCudaForError(*backend, "cross_entropy_grad", out, mean, 31);
      for (int64_t i = 0; i < n * v; ++i) {
        EXPECT_EQ(std::isnan(out[3].at(i)), i / v == 1) << "element " << i;
      }
      want = {tl::kCrossEntropyGradLabel, 31, bad, 1, v};
      expectDeviceError(*backend, "cross_entropy_grad", backward, mean, want);
      EXPECT_EQ(cpuRunError("cross_entropy_grad", backward, mean),
                describeDeviceError(want));
    }
  }
  EXPECT_EQ(describeDeviceError({tl::kCrossEntropyLabel, 30, 37, 1, 37}),
            "label 37 at row 1 is out of range [0, 37)");
}

TEST_F(CudaKernelTest, GoodIdsAndLabelsLeaveTheErrorRecordClear) {
  const int64_t n = 4, v = 9;
  HostTensor labels = i64Tensor({n}, {0, 8, -100, 3});
  HostTensor logits = randomF32({n, v}, 93);
  std::vector<std::pair<const char *, std::vector<HostTensor>>> cases = {
      {"embedding_grad",
       {randomF32({n, 5}, 94), i64Tensor({n}, {0, 8, 8, 3}),
        HostTensor(DType::F32, {v, 5})}},
      {"cross_entropy",
       {logits, labels, HostTensor(DType::F32, {}),
        HostTensor(DType::F32, {n})}},
      {"cross_entropy_grad",
       {logits, labels, f32Tensor({}, {1.0f}), HostTensor(DType::F32, {n, v})}},
  };
  for (auto &[kernel, operands] : cases) {
    DeviceErrorRecord got = runCudaForError(*backend, kernel, operands, {}, 12);
    EXPECT_EQ(got.code, tl::kNoError) << kernel;
    EXPECT_EQ(got.site, 0) << kernel;
    EXPECT_EQ(got.value, 0) << kernel;
    EXPECT_EQ(got.position, 0) << kernel;
    EXPECT_EQ(got.bound, 0) << kernel;
  }
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

TEST(GradientCudaChecks, RejectMixedOrUnsupportedDTypes) {
  HostTensor x = randomF32({4, 8}, 90);
  EXPECT_EQ(
      checkCuda("silu_grad", {x, bf16(x), HostTensor(DType::F32, {4, 8})}, {}),
      "operand 1 must be f32 like operand 0, got bf16");
  EXPECT_NE(
      checkCuda("embedding_grad",
                {x, randomInts({4}, 1, 0, 3), HostTensor(DType::BF16, {3, 8})},
                {}),
      "");
  EXPECT_EQ(checkCuda("cross_entropy",
                      {bf16(x), randomInts({4}, 1, 0, 8),
                       HostTensor(DType::F32, {}), HostTensor(DType::F32, {4})},
                      {}),
            "");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
