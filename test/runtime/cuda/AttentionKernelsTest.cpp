//===- AttentionKernelsTest.cpp - CUDA attention kernels vs the CPU -------===//
//
// attention and attention_grad (runtime/cuda/AttentionLaunchers.cpp) against
// the CPU kernels: self attention (T = S) and cross/cached attention (T < S,
// the causal offset), rows that see no key (causal with T > S), grouped
// query heads and not, every head-dim class (32, 64, 96, 128, with D != Dv
// and dims below the class), sequence lengths that are not multiples of the
// 64-row tile, f32 and bf16 storage, both places the backward keeps its
// statistics (workspace, dq rows), empty shapes, determinism, and the
// checks' messages; sliding windows (smaller than T, spanning tiles, with
// the causal offset), soft-capping, ALiBi slopes and additive bias operands
// (full and broadcast, f32 and bf16), forward and backward, odd T/S/D and
// grouped heads; the backward's key-major pass split over each kv head's
// query heads (groups of 1, 2, 8, the rule's slices and forced ones, with
// every masking), and the rule itself (runtime/cuda/AttentionWorkspace.h).
//
// Every test but the checks runs twice (AttentionTest's parameter): with
// the bf16 tensor cores of fp32 and bf16 plans (HalfCompute::None) and with
// the fp16 ones of fp16 plans (HalfCompute::FP16, module attention_fp16),
// where bf16 storage must be refused.
//
// Tolerance: the device kernels multiply bf16-rounded operands on the
// tensor cores (f32 accumulation), the CPU computes in f32, so results on
// O(1) data agree to about 1e-2; inputs are uniform in [-2, 2] so the
// softmax is peaked but not saturated. The same tolerance holds with a
// softcap (tanh is 1-Lipschitz) and with additive biases of O(1): ALiBi
// slopes below 1 over distances under 40 shift scores by the same f32
// values on both sides, and a bias is added after the bf16 product. dk
// and dv of a GQA group above 2 heads sum more rounded terms: their atol
// grows with sqrt(group / 2) (2.8e-2 for groups of 4, 4e-2 for 8; the
// unsplit key-major pass shows the same errors, AttentionGradSplitMasking).
// IEEE half keeps 3 more mantissa bits (a unit roundoff of 2^-11 against
// bf16's 2^-8): over these cases the worst absolute errors with fp16
// compute are 1.2e-3 forward and 1.9e-3 / 3.5e-3 / 2.7e-3 for dq / dk / dv
// (4.8e-3 for dk with a group of 8), against 1.1e-2 and 1.8e-2 / 2.4e-2 /
// 3.0e-2 with bf16 (3.3e-2 with a group of 8); the same figures on the
// emulator and on an H200. So fp16 compute gets kFp16Compute, 4 times
// tighter than bf16's, with the same growth for GQA groups.
// TAILOR_ATTENTION_ERRORS=1 prints each case's worst absolute error per
// output.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/AttentionFp16Kernels.cu"
#include "codegen/cuda/AttentionKernels.cu"

#include "runtime/cuda/AttentionWorkspace.h"
#include "test/runtime/cuda/CudaTestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tailor::runtime::cuda::testing {
namespace {

constexpr Tolerance kBf16Compute{2e-2, 2e-2};
constexpr Tolerance kFp16Compute{5e-3, 5e-3};

/// The tolerance of the tensor-core format `backend` computes in.
Tolerance computeTolerance(TestBackend &backend) {
  return backend.context().halfCompute() == HalfCompute::FP16 ? kFp16Compute
                                                              : kBf16Compute;
}

struct Case {
  int64_t b, hq, hkv, t, s, d, dv;
  bool causal;
  DType dtype = DType::F32;
  /// Backward workspace in floats; 0 picks one that holds the partials
  /// and the statistics (what a CUDA plan gives), -1 one that holds only
  /// the partials (the statistics go to dq's rows).
  int64_t workspace = 0;
  /// Slices of the key-major pass (attribute kv_splits; 0: the rule).
  int64_t kvSplits = 0;
  /// Sliding window in keys (0: none) and soft cap (0: none).
  int64_t window = 0;
  double softcap = 0;
  /// ALiBi slopes, one per query head (empty: none).
  std::vector<double> slopes = {};
  /// Shape of the additive bias operand (empty: none).
  std::vector<int64_t> bias = {};
  /// Document masking: the lengths of the packed examples, repeated along
  /// each row of T tokens (empty: none).
  std::vector<int64_t> documents = {};
};

Attribute floatsAttr(const char *name, std::vector<double> values) {
  Attribute a;
  a.kind = Attribute::Kind::Floats;
  a.name = name;
  a.floats = std::move(values);
  return a;
}

HostTensor input(std::vector<int64_t> shape, uint64_t seed, DType dtype) {
  HostTensor t = randomF32(std::move(shape), seed, -2.0f, 2.0f);
  return dtype == DType::F32 ? t : converted(t, dtype);
}

std::vector<Attribute> attributesOf(const Case &c) {
  std::vector<Attribute> attrs = {
      intAttr("causal", c.causal ? 1 : 0),
      floatAttr("scale", 1.0 / std::sqrt(double(std::max<int64_t>(c.d, 1))))};
  if (c.window > 0) {
    attrs.push_back(intAttr("window", c.window));
  }
  if (c.softcap > 0) {
    attrs.push_back(floatAttr("softcap", c.softcap));
  }
  if (!c.slopes.empty()) {
    attrs.push_back(floatsAttr("alibi_slopes", c.slopes));
  }
  if (!c.bias.empty()) {
    attrs.push_back(intAttr("bias", 1));
  }
  if (c.kvSplits > 0) {
    attrs.push_back(intAttr("kv_splits", c.kvSplits));
  }
  return attrs;
}

AttentionGradShape gradShapeOf(const Case &c) {
  return {c.b, c.hq, c.hkv, c.t, c.s, c.d, c.dv};
}

/// The key-major pass's slices for the case.
int64_t splitsOf(const Case &c) {
  return c.kvSplits > 0 ? c.kvSplits : attentionKvSplits(gradShapeOf(c));
}

/// The attributes of the forward (`backward` 0) or backward (1), with the
/// positions operand's index when the case packs documents.
std::vector<Attribute> attributesOf(const Case &c, size_t backward) {
  std::vector<Attribute> attrs = attributesOf(c);
  if (!c.documents.empty()) {
    attrs.push_back(intAttr(
        "positions", static_cast<int64_t>(3 + backward + (c.bias.empty() ? 0 : 1))));
  }
  return attrs;
}

/// Index of the first output: after q, k, v (after dout, q, k, v in the
/// backward, `backward` = 1), the bias and the positions operands if any.
size_t outputIndex(const Case &c, size_t backward = 0) {
  return 3 + backward + (c.bias.empty() ? 0 : 1) +
         (c.documents.empty() ? 0 : 1);
}

/// Appends the positions operand (i64 [B, T]: each token's place in its
/// example, the examples' lengths cycling) when the case packs documents.
void addPositions(std::vector<HostTensor> &ops, const Case &c) {
  if (c.documents.empty()) {
    return;
  }
  HostTensor positions(DType::I64, {c.b, c.t});
  int64_t *p = positions.as<int64_t>();
  for (int64_t b = 0; b < c.b; ++b) {
    size_t document = static_cast<size_t>(b) % c.documents.size();
    int64_t within = 0;
    for (int64_t t = 0; t < c.t; ++t) {
      if (within == c.documents[document]) {
        document = (document + 1) % c.documents.size();
        within = 0;
      }
      p[b * c.t + t] = within++;
    }
  }
  ops.push_back(positions);
}

/// Appends the bias operand (uniform in [-1, 1]) when the case has one.
void addBias(std::vector<HostTensor> &ops, const Case &c) {
  if (!c.bias.empty()) {
    HostTensor t = randomF32(c.bias, 9, -1.0f, 1.0f);
    ops.push_back(c.dtype == DType::F32 ? t : converted(t, c.dtype));
  }
}

std::vector<HostTensor> forwardOperands(const Case &c) {
  std::vector<HostTensor> ops = {input({c.b, c.hq, c.t, c.d}, 1, c.dtype),
                                 input({c.b, c.hkv, c.s, c.d}, 2, c.dtype),
                                 input({c.b, c.hkv, c.s, c.dv}, 3, c.dtype)};
  addBias(ops, c);
  addPositions(ops, c);
  ops.push_back(HostTensor(c.dtype, {c.b, c.hq, c.t, c.dv}));
  ops.push_back(HostTensor(DType::F32, {std::max<int64_t>(64 * c.s, 1)}));
  return ops;
}

std::vector<HostTensor> backwardOperands(const Case &c) {
  // The CPU wants a positive multiple of 2 (3 with a softcap) x 64 x S
  // floats.
  int64_t slot = std::max<int64_t>((c.softcap > 0 ? 3 : 2) * 64 * c.s, 1);
  int64_t w = c.workspace;
  if (w <= 0) {
    AttentionGradShape shape = gradShapeOf(c);
    int64_t splits = splitsOf(c);
    int64_t need = w == 0 ? attentionGradStatsOffset(shape, splits) +
                                2 * c.b * c.hq * c.t
                          : attentionKvPartialFloats(shape, splits);
    w = std::max<int64_t>((need + slot - 1) / slot, 1) * slot;
  }
  std::vector<HostTensor> ops = {input({c.b, c.hq, c.t, c.dv}, 4, c.dtype),
                                 input({c.b, c.hq, c.t, c.d}, 1, c.dtype),
                                 input({c.b, c.hkv, c.s, c.d}, 2, c.dtype),
                                 input({c.b, c.hkv, c.s, c.dv}, 3, c.dtype)};
  addBias(ops, c);
  addPositions(ops, c);
  ops.push_back(HostTensor(c.dtype, {c.b, c.hq, c.t, c.d}));
  ops.push_back(HostTensor(c.dtype, {c.b, c.hkv, c.s, c.d}));
  ops.push_back(HostTensor(c.dtype, {c.b, c.hkv, c.s, c.dv}));
  ops.push_back(HostTensor(DType::F32, {w}));
  return ops;
}

/// Prints, with TAILOR_ATTENTION_ERRORS set, the worst absolute error of
/// each `compared` output of the launch against the CPU kernel.
void reportErrors(TestBackend &backend, const std::string &kernel,
                  const std::vector<HostTensor> &operands,
                  const std::vector<Attribute> &attributes,
                  const std::vector<size_t> &compared, const Case &c) {
  if (!std::getenv("TAILOR_ATTENTION_ERRORS")) {
    return;
  }
  std::vector<HostTensor> want = runCpu(kernel, operands, attributes);
  std::vector<HostTensor> got = runCuda(backend, kernel, operands, attributes);
  if (want.empty() || got.empty()) {
    return;
  }
  std::string line = std::string(halfComputeName(
                         backend.context().halfCompute())) +
                     " " + kernel + " [" + std::to_string(c.b) + "," +
                     std::to_string(c.hq) + "," + std::to_string(c.hkv) +
                     "," + std::to_string(c.t) + "," + std::to_string(c.s) +
                     "," + std::to_string(c.d) + "," + std::to_string(c.dv) +
                     (c.causal ? ",causal" : "") + "]";
  for (size_t index : compared) {
    double worst = 0;
    for (int64_t i = 0; i < got[index].numel(); ++i) {
      worst = std::max(worst, std::fabs(got[index].at(i) - want[index].at(i)));
    }
    char figure[32];
    std::snprintf(figure, sizeof(figure), " %.2e", worst);
    line += figure;
  }
  std::printf("attention error: %s\n", line.c_str());
}

/// Expects the launch to be refused when the backend computes in fp16 and
/// the storage is bf16 (true then), else nothing (false).
bool expectFp16RefusesBf16(TestBackend &backend, const std::string &kernel,
                           const Case &c, std::vector<HostTensor> operands,
                           std::vector<Attribute> attributes) {
  if (backend.context().halfCompute() != HalfCompute::FP16 ||
      c.dtype != DType::BF16) {
    return false;
  }
  EXPECT_EQ(cudaLaunchError(backend, kernel, std::move(operands),
                            std::move(attributes)),
            "CUDA launcher '" + kernel +
                "' failed: attention on bf16 operands cannot compute on fp16 "
                "tensor cores (the plan's precision is fp16, whose attention "
                "operands are f32)");
  return true;
}

void expectForward(TestBackend &backend, const Case &c) {
  std::vector<HostTensor> ops = forwardOperands(c);
  std::vector<Attribute> attrs = attributesOf(c, 0);
  if (expectFp16RefusesBf16(backend, "attention", c, ops, attrs)) {
    return;
  }
  reportErrors(backend, "attention", ops, attrs, {outputIndex(c)}, c);
  expectMatchesCpu(backend, "attention", ops, attrs, {outputIndex(c)},
                   computeTolerance(backend));
}

void expectBackward(TestBackend &backend, const Case &c) {
  size_t out = outputIndex(c, 1);
  std::vector<HostTensor> ops = backwardOperands(c);
  std::vector<Attribute> attrs = attributesOf(c, 1);
  if (expectFp16RefusesBf16(backend, "attention_grad", c, ops, attrs)) {
    return;
  }
  // dk and dv sum over every query head of the group: their rounding
  // errors grow like the square root of the group beyond 2 heads.
  Tolerance tolerance = computeTolerance(backend);
  int64_t group = c.hkv > 0 ? c.hq / c.hkv : 1;
  if (group > 2) {
    tolerance.atol *= std::sqrt(double(group) / 2.0);
  }
  reportErrors(backend, "attention_grad", ops, attrs, {out, out + 1, out + 2},
               c);
  expectMatchesCpu(backend, "attention_grad", ops, attrs,
                   {out, out + 1, out + 2}, tolerance);
}

/// The attention tests, run with the tensor cores of bf16 and fp32 plans
/// (HalfCompute::None) and of fp16 plans (HalfCompute::FP16).
class AttentionTest : public CudaKernelTest,
                      public ::testing::WithParamInterface<HalfCompute> {
protected:
  void SetUp() override {
    CudaKernelTest::SetUp();
    if (backend) {
      backend->setHalfCompute(GetParam());
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Compute, AttentionTest,
                         ::testing::Values(HalfCompute::None,
                                           HalfCompute::FP16),
                         [](const auto &info) {
                           return info.param == HalfCompute::FP16
                                      ? std::string("fp16")
                                      : std::string("bf16");
                         });

/// BLOOM's ALiBi slopes for `heads` heads (a power of two):
/// 2^(-8 (h + 1) / heads).
std::vector<double> alibiSlopes(int64_t heads) {
  std::vector<double> slopes;
  for (int64_t h = 0; h < heads; ++h) {
    slopes.push_back(std::pow(2.0, -8.0 * double(h + 1) / double(heads)));
  }
  return slopes;
}

/// A case with a window, softcap, slopes or bias set on `base`.
Case with(Case base, int64_t window, double softcap,
          std::vector<double> slopes = {}, std::vector<int64_t> bias = {}) {
  base.window = window;
  base.softcap = softcap;
  base.slopes = std::move(slopes);
  base.bias = std::move(bias);
  return base;
}

//===----------------------------------------------------------------------===//
// Forward.
//===----------------------------------------------------------------------===//

// Tests self attention with grouped query heads, causal, T off the tile.
TEST_P(AttentionTest, AttentionSelfCausalGqa) {
  expectForward(*backend, {2, 4, 2, 37, 37, 64, 64, true});
}

// Tests two query tiles, equal heads, no mask, the 32 class.
TEST_P(AttentionTest, AttentionSelfFullD32) {
  expectForward(*backend, {2, 2, 2, 100, 100, 32, 32, false});
}

// Tests T < S: causal rows see S - T more keys than their index.
TEST_P(AttentionTest, AttentionCausalOffsetD128) {
  expectForward(*backend, {2, 4, 2, 37, 100, 128, 128, true});
}

// Tests T < S without a mask, several key tiles.
TEST_P(AttentionTest, AttentionCrossFullGqa) {
  expectForward(*backend, {1, 4, 1, 20, 130, 64, 64, false});
}

// Tests T > S causal: the first T - S rows see no key and get zeros.
TEST_P(AttentionTest, AttentionRowsWithoutKeys) {
  expectForward(*backend, {2, 2, 1, 100, 30, 32, 32, true});
}

// Tests D != Dv and dims below their class (80 -> 96, 40 -> 64).
TEST_P(AttentionTest, AttentionUnevenHeadDims) {
  expectForward(*backend, {1, 2, 2, 50, 70, 80, 48, true});
  expectForward(*backend, {1, 2, 1, 33, 33, 40, 24, false});
  expectForward(*backend, {1, 1, 1, 17, 17, 7, 5, true});
}

// Tests bf16 storage.
TEST_P(AttentionTest, AttentionBf16) {
  expectForward(*backend, {2, 4, 2, 37, 37, 64, 64, true, DType::BF16});
  expectForward(*backend, {1, 2, 2, 20, 70, 128, 128, false, DType::BF16});
  expectForward(*backend, {1, 2, 1, 100, 30, 32, 32, true, DType::BF16});
}

// Tests the default scale, 1 / sqrt(D), forward and backward.
TEST_P(AttentionTest, AttentionDefaultScale) {
  Case c{1, 2, 1, 20, 20, 48, 48, true};
  expectMatchesCpu(*backend, "attention", forwardOperands(c),
                   {intAttr("causal", 1)}, {3}, computeTolerance(*backend));
  expectMatchesCpu(*backend, "attention_grad", backwardOperands(c),
                   {intAttr("causal", 1)}, {4, 5, 6},
                   computeTolerance(*backend));
}

// Tests empty shapes: no key gives zeros, no query nothing.
TEST_P(AttentionTest, AttentionEmpty) {
  expectForward(*backend, {1, 2, 1, 5, 0, 32, 32, false});
  expectForward(*backend, {1, 2, 1, 0, 5, 32, 32, true});
  expectForward(*backend, {0, 2, 1, 5, 5, 32, 32, true});
}

//===----------------------------------------------------------------------===//
// Backward.
//===----------------------------------------------------------------------===//

// Tests self attention with grouped query heads, causal, T off the tile.
TEST_P(AttentionTest, AttentionGradSelfCausalGqa) {
  expectBackward(*backend, {2, 4, 2, 37, 37, 64, 64, true});
}

// Tests two query and key tiles, equal heads, no mask, the 32 class.
TEST_P(AttentionTest, AttentionGradSelfFullD32) {
  expectBackward(*backend, {2, 2, 2, 100, 100, 32, 32, false});
}

// Tests T < S causal with the 128 class (above 48 KiB of shared memory).
TEST_P(AttentionTest, AttentionGradCausalOffsetD128) {
  expectBackward(*backend, {1, 4, 2, 37, 100, 128, 128, true});
}

// Tests T < S without a mask, all query heads on one kv head.
TEST_P(AttentionTest, AttentionGradCrossFullGqa) {
  expectBackward(*backend, {1, 4, 1, 20, 130, 64, 64, false});
}

// Tests T > S causal: rows that see no key get zero dq and add nothing to
// dk, dv; key tiles that no query sees get zeros.
TEST_P(AttentionTest, AttentionGradRowsWithoutKeys) {
  expectBackward(*backend, {2, 2, 1, 100, 30, 32, 32, true});
}

// Tests the statistics kept in dq's rows: the workspace holds the partial
// dk, dv of the split key-major pass but not 2 floats per query row after
// them; and without GQA (no partials) a workspace of 2 x 64 x S floats.
TEST_P(AttentionTest, AttentionGradStatsInDq) {
  expectBackward(*backend, {2, 4, 2, 100, 8, 32, 32, true, DType::F32, -1});
  expectBackward(*backend, {2, 4, 2, 100, 8, 64, 32, false, DType::BF16, -1});
  expectBackward(*backend, {2, 2, 2, 100, 8, 32, 32, true, DType::F32, -1});
}

// Tests the key-major pass split over the query heads of each kv head
// (GQA): groups of 1, 2 and 8; the rule's slices (one per query head at
// these sizes) and forced ones (kv_splits: one slice of a group of 8, 2 of
// 8 with 4 heads each, 4 of 8); causal and not, T and S off the tile, D 64
// and 128, f32 and bf16.
TEST_P(AttentionTest, AttentionGradSplitKeyValue) {
  expectBackward(*backend, {1, 2, 2, 70, 70, 64, 64, true});
  expectBackward(*backend, {2, 4, 2, 67, 67, 64, 64, true, DType::BF16});
  expectBackward(*backend, {1, 8, 1, 100, 100, 64, 64, true});
  expectBackward(*backend, {1, 8, 1, 33, 90, 128, 128, false});
  Case forced{1, 8, 1, 100, 100, 64, 64, true};
  for (int64_t splits : {1, 2, 4}) {
    forced.kvSplits = splits;
    expectBackward(*backend, forced);
  }
  Case wide{2, 8, 2, 45, 45, 128, 128, false, DType::BF16};
  wide.kvSplits = 2;
  expectBackward(*backend, wide);
}

// Tests the split key-major pass with a softcap, a window, ALiBi, a bias
// operand and packed documents.
TEST_P(AttentionTest, AttentionGradSplitMasking) {
  expectBackward(*backend,
                 with({1, 8, 1, 70, 70, 64, 64, true}, 20, 1.5, alibiSlopes(8)));
  Case biased = with({2, 8, 2, 37, 37, 32, 32, true}, 0, 0, {}, {2, 8, 37, 37});
  expectBackward(*backend, biased);
  biased.kvSplits = 1;
  expectBackward(*backend, biased);
  Case packed{1, 8, 2, 70, 70, 64, 64, true, DType::BF16};
  packed.documents = {30, 9, 50};
  packed.kvSplits = 2;
  expectBackward(*backend, packed);
}

// Tests the rule that picks the slices (runtime/cuda/AttentionWorkspace.h)
// and the workspace a CUDA plan asks for, on the benchmark's shapes.
TEST(AttentionWorkspaceTest, SplitRule) {
  // TinyLlama, batch 1 x 2048: 32 key tiles x 4 kv heads = 128 blocks.
  AttentionGradShape tiny{1, 32, 4, 2048, 2048, 64, 64};
  EXPECT_EQ(attentionKvSplits(tiny), 8);
  EXPECT_EQ(attentionKvPartialFloats(tiny, 8), 4 * 8 * 2048 * 128);
  EXPECT_EQ(attentionGradWorkspaceFloats(tiny),
            4 * 8 * 2048 * 128 + 2 * 32 * 2048);
  // Llama-7B: no GQA, no partials.
  AttentionGradShape llama{1, 32, 32, 2048, 2048, 128, 128};
  EXPECT_EQ(attentionKvSplits(llama), 1);
  EXPECT_EQ(attentionGradWorkspaceFloats(llama), 2 * 32 * 2048);
  // Batch 4 x 1024, 8 kv heads of 4 query heads: 512 blocks, 2 slices.
  EXPECT_EQ(attentionKvSplits({4, 32, 8, 1024, 1024, 64, 64}), 2);
  // Enough blocks already: one slice.
  EXPECT_EQ(attentionKvSplits({8, 32, 8, 4096, 4096, 128, 128}), 1);
  // A group of 6: wanting 2 or 3 slices takes them, wanting 4 takes the
  // next divisor, 6, and wanting more than 6 takes 6.
  EXPECT_EQ(attentionKvSplits({1, 12, 2, 16384, 16384, 64, 64}), 2);
  EXPECT_EQ(attentionKvSplits({1, 12, 2, 12800, 12800, 64, 64}), 3);
  EXPECT_EQ(attentionKvSplits({1, 12, 2, 8192, 8192, 64, 64}), 6);
  EXPECT_EQ(attentionKvSplits({1, 12, 2, 4096, 4096, 64, 64}), 6);
  // The statistics start at a multiple of 64 floats (72 partials here).
  EXPECT_EQ(attentionGradStatsOffset({1, 2, 1, 3, 3, 7, 5}, 2), 128);
}

// Tests D != Dv and dims below their class.
TEST_P(AttentionTest, AttentionGradUnevenHeadDims) {
  expectBackward(*backend, {1, 2, 2, 50, 70, 80, 48, true});
  expectBackward(*backend, {1, 2, 1, 33, 33, 40, 24, false});
  expectBackward(*backend, {1, 1, 1, 17, 17, 7, 5, true});
}

// Tests bf16 storage.
TEST_P(AttentionTest, AttentionGradBf16) {
  expectBackward(*backend, {2, 4, 2, 37, 37, 64, 64, true, DType::BF16});
  expectBackward(*backend, {1, 2, 2, 20, 70, 128, 128, false, DType::BF16});
  expectBackward(*backend, {1, 2, 1, 100, 30, 32, 32, true, DType::BF16});
}

// Tests empty shapes: no key zeroes dq, no query zeroes dk and dv.
TEST_P(AttentionTest, AttentionGradEmpty) {
  Case noKey{1, 2, 1, 5, 0, 32, 32, false};
  std::vector<HostTensor> ops = backwardOperands(noKey);
  std::fill(ops[4].storage.begin(), ops[4].storage.end(), ~uint64_t(0));
  expectMatchesCpu(*backend, "attention_grad", ops, attributesOf(noKey),
                   {4, 5, 6}, computeTolerance(*backend));
  Case noQuery{1, 2, 1, 0, 5, 32, 32, true};
  ops = backwardOperands(noQuery);
  std::fill(ops[5].storage.begin(), ops[5].storage.end(), ~uint64_t(0));
  std::fill(ops[6].storage.begin(), ops[6].storage.end(), ~uint64_t(0));
  expectMatchesCpu(*backend, "attention_grad", ops, attributesOf(noQuery),
                   {4, 5, 6}, computeTolerance(*backend));
}

// Tests that the backward gives the same bits twice (no atomics).
TEST_P(AttentionTest, AttentionGradDeterministic) {
  Case c{1, 4, 2, 70, 70, 32, 32, true};
  std::vector<HostTensor> a =
      runCuda(*backend, "attention_grad", backwardOperands(c), attributesOf(c));
  std::vector<HostTensor> b =
      runCuda(*backend, "attention_grad", backwardOperands(c), attributesOf(c));
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  for (size_t i = 4; i < 7; ++i) {
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].bytes()), 0)
        << "operand " << i;
  }
}

//===----------------------------------------------------------------------===//
// Windows, soft-capping, ALiBi and bias operands.
//===----------------------------------------------------------------------===//

// Tests sliding windows smaller than T: GQA, odd T and D, one tile and
// several (a window of 40 over 150 keys skips whole key tiles), and T < S.
TEST_P(AttentionTest, AttentionWindow) {
  expectForward(*backend, with({2, 4, 2, 37, 37, 40, 24, true}, 5, 0));
  expectForward(*backend, with({1, 2, 1, 150, 150, 32, 32, true}, 40, 0));
  expectForward(*backend, with({1, 4, 2, 37, 100, 64, 64, true}, 9, 0));
  expectForward(*backend, with({1, 2, 2, 33, 33, 7, 5, true}, 1, 0));
}

// Tests soft-capping alone, with a window, and in bf16.
TEST_P(AttentionTest, AttentionSoftcap) {
  expectForward(*backend, with({2, 4, 2, 37, 37, 40, 24, false}, 0, 1.5));
  expectForward(*backend, with({1, 4, 2, 70, 70, 64, 64, true}, 17, 2.0));
  expectForward(*backend,
                with({1, 2, 1, 37, 37, 32, 32, true, DType::BF16}, 0, 1.5));
}

// Tests ALiBi slopes: causal with GQA, T < S, no mask, with a window and a
// softcap.
TEST_P(AttentionTest, AttentionAlibi) {
  expectForward(*backend,
                with({2, 4, 2, 37, 37, 40, 24, true}, 0, 0, alibiSlopes(4)));
  expectForward(*backend,
                with({1, 4, 4, 20, 70, 32, 32, true}, 0, 0, alibiSlopes(4)));
  expectForward(*backend, with({1, 2, 1, 33, 33, 64, 64, false}, 0, 0,
                               {0.3, -0.05}));
  expectForward(*backend,
                with({1, 4, 2, 70, 70, 32, 32, true}, 20, 2.0, alibiSlopes(4)));
}

// Tests additive bias operands: full [B, Hq, T, S], broadcast over heads
// and queries (a padding mask's shape), over batches, f32 and bf16, with
// ALiBi and a window.
TEST_P(AttentionTest, AttentionBias) {
  expectForward(*backend, with({2, 4, 2, 37, 37, 40, 24, true}, 0, 0, {},
                               {2, 4, 37, 37}));
  expectForward(*backend, with({2, 2, 1, 20, 70, 32, 32, false}, 0, 0, {},
                               {2, 1, 1, 70}));
  expectForward(*backend, with({2, 4, 2, 37, 37, 64, 64, true}, 7, 0,
                               alibiSlopes(4), {1, 4, 37, 37}));
  expectForward(*backend, with({1, 2, 1, 37, 37, 32, 32, true, DType::BF16},
                               0, 0, {}, {1, 2, 37, 37}));
}

// Tests the launches of a generation plan's decode and prefill steps: T = 1
// (decode) or a chunk of queries (prefill) over the whole KV cache (S = N,
// GQA), no causal flag but the additive mask tailor-build-decode makes (0
// up to each query's position, -inf after it), alone, with ALiBi and with
// a softcap; prefill chunks at the start of the cache and crossing its end.
TEST_P(AttentionTest, AttentionOverAKvCache) {
  constexpr int64_t kCache = 32;
  struct Step {
    int64_t t, position;
  };
  for (Step step : {Step{1, 0}, Step{1, 20}, Step{8, 0}, Step{8, 27}}) {
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE("T " + std::to_string(step.t) + " position " +
                   std::to_string(step.position) + " variant " +
                   std::to_string(variant));
      Case c = with({1, 4, 2, step.t, kCache, 16, 16, false}, 0,
                    variant == 2 ? 50.0 : 0.0,
                    variant == 1 ? alibiSlopes(4) : std::vector<double>{},
                    {1, 1, step.t, kCache});
      std::vector<HostTensor> ops = forwardOperands(c);
      float *mask = ops[3].as<float>();
      for (int64_t t = 0; t < step.t; ++t) {
        for (int64_t s = 0; s < kCache; ++s) {
          mask[t * kCache + s] = s <= step.position + t
                                     ? 0.0f
                                     : -std::numeric_limits<float>::infinity();
        }
      }
      expectMatchesCpu(*backend, "attention", ops, attributesOf(c, 0),
                       {outputIndex(c)}, computeTolerance(*backend));
    }
  }
}

// Tests the backward of windows, softcaps, ALiBi and biases (the same
// shapes as the forward).
TEST_P(AttentionTest, AttentionGradWindowSoftcap) {
  expectBackward(*backend, with({2, 4, 2, 37, 37, 40, 24, true}, 5, 0));
  expectBackward(*backend, with({1, 2, 1, 150, 150, 32, 32, true}, 40, 0));
  expectBackward(*backend, with({1, 4, 2, 37, 100, 64, 64, true}, 9, 1.5));
  expectBackward(*backend, with({2, 4, 2, 37, 37, 40, 24, false}, 0, 1.5));
  expectBackward(*backend,
                 with({1, 2, 1, 37, 37, 32, 32, true, DType::BF16}, 11, 2.0));
}

// Tests the backward with ALiBi and bias operands, and the statistics in
// dq's rows.
TEST_P(AttentionTest, AttentionGradAlibiBias) {
  expectBackward(*backend,
                 with({2, 4, 2, 37, 37, 40, 24, true}, 0, 0, alibiSlopes(4)));
  expectBackward(*backend,
                 with({1, 4, 4, 20, 70, 32, 32, true}, 0, 0, alibiSlopes(4)));
  expectBackward(*backend, with({2, 4, 2, 37, 37, 64, 64, true}, 0, 0, {},
                                {2, 4, 37, 37}));
  expectBackward(*backend, with({2, 2, 1, 20, 70, 32, 32, false}, 0, 2.0,
                                alibiSlopes(2), {2, 1, 1, 70}));
  expectBackward(*backend, with({2, 4, 2, 100, 8, 32, 32, true, DType::F32,
                                 -1},
                                0, 0, alibiSlopes(4), {1, 1, 100, 8}));
}

// Tests document masking (sample packing): examples of several lengths
// packed along T, queries never seeing keys of an earlier example, with
// GQA, a window, ALiBi, a bias operand in front, and bf16; forward and
// backward.
TEST_P(AttentionTest, AttentionDocuments) {
  Case gqa{2, 4, 2, 37, 37, 40, 24, true};
  gqa.documents = {5, 11, 1, 20};
  expectForward(*backend, gqa);
  expectBackward(*backend, gqa);
  Case long_{1, 2, 1, 150, 150, 64, 64, true};
  long_.documents = {70, 9, 100};
  expectForward(*backend, long_);
  expectBackward(*backend, long_);
  Case mixed = with({2, 4, 2, 37, 37, 32, 32, true}, 9, 0, alibiSlopes(4),
                    {2, 4, 37, 37});
  mixed.documents = {13, 4};
  expectForward(*backend, mixed);
  expectBackward(*backend, mixed);
  Case bf16{1, 2, 1, 37, 37, 32, 32, true, DType::BF16};
  bf16.documents = {8, 30};
  expectForward(*backend, bf16);
  expectBackward(*backend, bf16);
}

//===----------------------------------------------------------------------===//
// fp16's range.
//===----------------------------------------------------------------------===//

/// Operands `indices` of `tensors` that hold an inf or NaN.
std::vector<size_t> nonFinite(const std::vector<HostTensor> &tensors,
                              std::vector<size_t> indices) {
  std::vector<size_t> bad;
  for (size_t index : indices) {
    const HostTensor &t = tensors[index];
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!std::isfinite(t.at(i))) {
        bad.push_back(index);
        break;
      }
    }
  }
  return bad;
}

// Tests what half's range does to the backward, which is what a loss
// scaler (GradScaler) must see to skip the step: with dO up to 40000
// (finite in half) dP = dO V reaches about 10^5 and dS, rounded to half
// for dS K and dS^T Q, passes 65504, so dq and dk get inf or NaN while dv
// (P^T dO: f32 sums of finite halves) stays finite; with dO up to 70000
// (inf in half) dv is not finite either. The CPU reference and bf16
// compute, whose range is f32's, stay finite.
TEST_P(AttentionTest, AttentionGradFp16Overflow) {
  Case c{1, 2, 1, 37, 37, 64, 64, true};
  bool fp16 = backend->context().halfCompute() == HalfCompute::FP16;
  struct Scale {
    float scale;
    std::vector<size_t> fp16NonFinite;
  };
  for (Scale s : {Scale{20000.0f, {4, 5}}, Scale{35000.0f, {4, 5, 6}}}) {
    SCOPED_TRACE("dO scale " + std::to_string(s.scale));
    std::vector<HostTensor> ops = backwardOperands(c);
    float *dout = ops[0].as<float>();
    for (int64_t i = 0; i < ops[0].numel(); ++i) {
      dout[i] *= s.scale;
    }
    std::vector<Attribute> attrs = attributesOf(c, 1);
    std::vector<HostTensor> cpu = runCpu("attention_grad", ops, attrs);
    std::vector<HostTensor> got =
        runCuda(*backend, "attention_grad", ops, attrs);
    ASSERT_FALSE(cpu.empty());
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(nonFinite(cpu, {4, 5, 6}), std::vector<size_t>{});
    EXPECT_EQ(nonFinite(got, {4, 5, 6}),
              fp16 ? s.fp16NonFinite : std::vector<size_t>{});
  }
}

// Tests the entry points the launchers ask for at each precision, which
// is what the compiler embeds and the runtime checks plans for: fp16 plans
// only the module attention_fp16's (_fp16 names), the others only
// attention's; every one an entry point the device code defines.
TEST(AttentionFunctions, PerPrecision) {
  struct Expected {
    const char *kernel;
    int functions, fp16Functions;
  };
  for (Expected e : {Expected{"attention", 8, 4},
                     Expected{"attention_grad", 26, 13}}) {
    const CudaKernelDef *def = findCudaKernel(e.kernel);
    ASSERT_NE(def, nullptr) << e.kernel;
    for (HalfCompute half :
         {HalfCompute::None, HalfCompute::BF16, HalfCompute::FP16}) {
      int count = 0;
      for (const char *const *f = deviceFunctions(*def, half); f && *f; ++f) {
        std::string name = *f;
        bool fp16Entry = name.size() > 5 &&
                         name.compare(name.size() - 5, 5, "_fp16") == 0;
        EXPECT_EQ(fp16Entry, half == HalfCompute::FP16) << name;
        EXPECT_NE(tl::emu::findKernel(*f), nullptr) << name;
        ++count;
      }
      EXPECT_EQ(count, half == HalfCompute::FP16 ? e.fp16Functions
                                                 : e.functions)
          << e.kernel << " " << halfComputeName(half);
    }
  }
  EXPECT_EQ(halfComputeOf("fp16"), HalfCompute::FP16);
  EXPECT_EQ(halfComputeOf("bf16"), HalfCompute::BF16);
  EXPECT_EQ(halfComputeOf("fp32"), HalfCompute::None);
}

//===----------------------------------------------------------------------===//
// Checks.
//===----------------------------------------------------------------------===//

// Tests the messages for head dims above 128, mixed storage and a
// backward with no room for its statistics.
TEST_F(CudaKernelTest, AttentionChecks) {
  Case big{1, 1, 1, 4, 4, 160, 64, false};
  EXPECT_EQ(checkCuda("attention", forwardOperands(big), attributesOf(big)),
            "head dims 160 and 64 must be at most 128");

  Case c{1, 2, 1, 4, 4, 32, 32, false};
  std::vector<HostTensor> ops = forwardOperands(c);
  ops[1] = converted(ops[1], DType::BF16);
  EXPECT_EQ(checkCuda("attention", ops, attributesOf(c)),
            "operand 1 must be f32 like operand 0, got bf16");
  ops = forwardOperands(c);
  ops[4] = HostTensor(DType::F32, {1});
  EXPECT_EQ(checkCuda("attention", ops, attributesOf(c)), "");
  ops[4] = HostTensor(DType::BF16, {4});
  EXPECT_EQ(checkCuda("attention", ops, attributesOf(c)),
            "operand 4 must be f32, got bf16");

  // bf16 dq rows of 2 elements are 4 bytes: too small for 2 floats.
  Case tiny{1, 2, 1, 100, 1, 2, 2, false, DType::BF16, 128};
  EXPECT_EQ(
      checkCuda("attention_grad", backwardOperands(tiny), attributesOf(tiny)),
      "workspace of 128 floats holds no 2 statistics for each of the "
      "200 query rows after the partial dk, dv, and dq rows of head dim 2 "
      "cannot hold them either");
  // The split key-major pass needs its partials (2 slices here): no
  // fallback to one slice.
  Case gqa{1, 4, 2, 100, 100, 32, 32, true, DType::F32, 128};
  EXPECT_EQ(
      checkCuda("attention_grad", backwardOperands(gqa), attributesOf(gqa)),
      "workspace of 128 floats cannot hold the partial dk, dv of the "
      "key-major pass (2 slices of the 2 query heads of each kv head): it "
      "needs at least 25600 floats, 26400 with the statistics "
      "(runtime/cuda/AttentionWorkspace.h)");
  gqa.kvSplits = 3;
  EXPECT_EQ(
      checkCuda("attention_grad", backwardOperands(gqa), attributesOf(gqa)),
      "kv_splits 3 must divide the group of 2 query heads per kv head");
  EXPECT_EQ(checkCuda("attention_grad", backwardOperands(c), attributesOf(c)),
            "");

  // ALiBi slopes travel by value: at most 256 query heads.
  Case wide{1, 300, 1, 4, 4, 32, 32, true};
  EXPECT_EQ(checkCuda("attention", forwardOperands(wide),
                      attributesOf(with(wide, 0, 0, alibiSlopes(300)))),
            "ALiBi attention on CUDA takes at most 256 query heads, got 300");
  // A bias that does not broadcast, and one of another storage type.
  Case biased = with(c, 0, 0, {}, {1, 3, 4, 4});
  EXPECT_EQ(checkCuda("attention", forwardOperands(biased),
                      attributesOf(biased)),
            "operand 3 (bias) of shape [1, 3, 4, 4] does not broadcast to the "
            "scores [1, 2, 4, 4]");
  biased.bias = {1, 2, 4, 4};
  ops = forwardOperands(biased);
  ops[3] = converted(ops[3], DType::BF16);
  EXPECT_EQ(checkCuda("attention", ops, attributesOf(biased)),
            "operand 3 must be f32 like operand 0, got bf16");

  // Document masking needs causal attention and i64 positions [B, T].
  Case packed{1, 2, 1, 4, 4, 32, 32, true};
  packed.documents = {3};
  EXPECT_EQ(checkCuda("attention", forwardOperands(packed),
                      attributesOf(packed, 0)),
            "");
  ops = forwardOperands(packed);
  ops[3] = HostTensor(DType::I32, {1, 4});
  EXPECT_NE(checkCuda("attention", ops, attributesOf(packed, 0)), "");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
