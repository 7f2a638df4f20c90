//===- LinearAlgebraLaunchers.cpp - GEMMs and dequantizing GEMMs ----------===//
//
// linear, matmul and linear_weight_grad are cuBLASLt GEMMs described to
// LaunchContext::gemm (row-major GemmDesc; runtime/cuda/CublasLt.cpp turns
// them into column-major calls); linear_quantized and dequantize launch
// codegen/cuda/QuantizedLinearKernels.cu. Operands, attributes and
// semantics are the CPU kernels' (runtime/cpu/README.md), with these
// differences:
//   - storage: GEMM inputs are f32 or bf16, the two alike (cuBLASLt has no
//     f32 x bf16 GEMM); outputs (and linear's bias, which has y's dtype) are
//     f32, or bf16 when the inputs are bf16. linear_weight_grad's dw is
//     always f32 (the master gradient). matmul has no f64.
//     linear_quantized takes x, bias and y in f32 or bf16 independently;
//     dequantize writes f32 or bf16.
//   - precision: f32 inputs compute in f32, or in bf16 or fp16 on the
//     tensor cores when the plan asks for it (LaunchContext::halfCompute;
//     f32 sums and outputs: unlike the CPU's fp16 kernels, the product is
//     not rounded to half); the quantized tile kernel always rounds x and
//     W to bf16, its GEMM route to the format `via_gemm` names (f32
//     accumulation either way).
//   - linear with K = 0 and a bias is rejected (y would be the bias: no
//     GEMM expresses that, and no model has it).
//   - linear_quantized ignores its workspace (any rank-1 f32 tensor) and
//     needs its storage 4-byte aligned; M is at most 65535 * 128 rows.
//     With `via_gemm` (the compiler's choice on CUDA targets) it is a
//     cuBLASLt GEMM on bf16 (1) or fp16 (2) copies in its workspace
//     instead (QuantizedGemmWorkspace.h), and a bias must have y's dtype.
// matmul batches: when the batch dims of a and b walk y's batch with one
// stride each (equal, or broadcast with stride 0), one strided batched
// GEMM; otherwise one batched GEMM per run of the innermost merged batch
// dimension (cpu::BroadcastPlan). A b shared by every batch, with a laid
// out like y, is a single tall GEMM, as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"
#include "runtime/cuda/QuantizedGemmWorkspace.h"
#include "runtime/quant/Gptq.h"
#include "runtime/quant/Nf4.h"
#include "runtime/quant/QuantizedWeight.h"

#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace tailor::runtime::cuda {
namespace {

using cpu::expectDType;
using cpu::expectDTypeIn;
using cpu::expectIntAttr;
using cpu::expectMinRank;
using cpu::expectOperandCount;
using cpu::expectRank;
using cpu::expectSameDType;
using cpu::expectShape;
using cpu::firstError;
using cpu::shapeString;

const char *const kNoFunctions[] = {nullptr};

/// Inputs `a` and `b` are both f32 or both bf16; output `out` is f32, or
/// bf16 when the inputs are (the types cuBLASLt multiplies).
std::string expectGemmDTypes(const KernelCall &call, size_t a, size_t b,
                             size_t out) {
  if (auto e = firstError({expectDTypeIn(call, a, {DType::F32, DType::BF16}),
                           expectSameDType(call, b, a)});
      !e.empty()) {
    return e;
  }
  if (call.operands[a].dtype == DType::F32) {
    return expectDType(call, out, DType::F32);
  }
  return expectDTypeIn(call, out, {DType::F32, DType::BF16});
}

int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t d : v) {
    p *= d;
  }
  return p;
}

const char *bytesAt(const Tensor &t, int64_t elements) {
  return static_cast<const char *>(t.data) +
         elements * static_cast<int64_t>(dtypeSize(t.dtype));
}

/// A GEMM's inputs a, b and output c with their dtypes; f32 inputs compute
/// in bf16 when the plan says so.
GemmDesc gemmOf(const CudaCall &call, const Tensor &a, const Tensor &b,
                const Tensor &c) {
  GemmDesc desc;
  desc.a = a.data;
  desc.aType = a.dtype;
  desc.b = b.data;
  desc.bType = b.dtype;
  desc.c = c.data;
  desc.cType = c.dtype;
  desc.halfCompute = a.dtype == DType::F32 ? call.context->halfCompute()
                                            : HalfCompute::None;
  return desc;
}

/// The epilogue the planner folds into a GEMM: y = alpha product, or
/// y += alpha product with `accumulate` (cuBLASLt's beta = 1, y as C).
/// With `addend`, operand 2 is not a bias but a tensor of y's shape that
/// the GEMM adds (cuBLASLt's C, beta = 1): y = alpha product + addend.
void applyEpilogue(GemmDesc &desc, const CudaCall &call) {
  desc.alpha = static_cast<float>(call.attributes.getFloat("alpha", 1));
  desc.beta = call.attributes.getInt("accumulate", 0) != 0 ? 1.0f : 0.0f;
  if (call.attributes.getInt("addend", 0) != 0) {
    desc.addend = call.operands[2].data;
    desc.bias = nullptr;
    desc.beta = 1.0f;
  }
}

//===----------------------------------------------------------------------===//
// linear: y [M, N] = x [M, K] w^T (w [N, K]; w [K, N] read as stored with
// transpose_weight) + bias through the GEMM's bias epilogue.
//===----------------------------------------------------------------------===//

std::string checkLinear(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3, 4); !e.empty()) {
    return e;
  }
  const size_t count = call.operands.size();
  if (auto e = expectGemmDTypes(call, 0, 1, count - 1); !e.empty()) {
    return e;
  }
  if (count == 4) {
    if (auto e = expectSameDType(call, 2, 3); !e.empty()) {
      return e;
    }
  }
  if (auto e = checkLikeCpu("linear", call); !e.empty()) {
    return e;
  }
  if (count == 4 && call.operands[0].shape.back() == 0 &&
      call.operands[3].numel() > 0 && call.attributes.getInt("addend", 0) == 0) {
    return "linear on the GPU needs K >= 1 when it has a bias";
  }
  return "";
}

/// The shape of y [M, N] = x [M, K] w^T + bias in `desc` (w [N, K], or
/// [K, N] read as stored with `transposed`): linear's GEMM, and
/// linear_quantized's on its bf16 copies.
void shapeLinear(GemmDesc &desc, int64_t m, int64_t n, int64_t k,
                 bool transposed, const void *bias) {
  desc.m = m;
  desc.n = n;
  desc.k = k;
  desc.lda = k;
  desc.transB = !transposed;
  desc.ldb = transposed ? n : k;
  desc.ldc = n;
  desc.bias = bias;
}

std::string launchLinear(const CudaCall &call) {
  const size_t count = call.operands.size();
  const Tensor &x = call.operands[0], &w = call.operands[1];
  const Tensor &y = call.operands[count - 1];
  const bool transposed =
      call.attributes.getInt("transpose_weight", 0) != 0;
  const int64_t k = x.shape.back(), n = w.shape[transposed ? 1 : 0];
  if (y.numel() == 0) {
    return "";
  }
  if (k == 0) {
    if (call.attributes.getInt("addend", 0) != 0) {
      return call.context->copy(y.data, call.operands[2].data, y.bytes());
    }
    return call.attributes.getInt("accumulate", 0) != 0
               ? ""
               : call.context->memsetZero(y.data, y.bytes());
  }
  GemmDesc desc = gemmOf(call, x, w, y);
  shapeLinear(desc, x.numel() / k, n, k, transposed,
              count == 4 ? call.operands[2].data : nullptr);
  applyEpilogue(desc, call);
  return call.context->gemm(desc);
}

//===----------------------------------------------------------------------===//
// matmul: y[b] = a[b] b[b] with NumPy batch broadcasting.
//===----------------------------------------------------------------------===//

std::vector<int64_t> batchShape(const Tensor &t) {
  return std::vector<int64_t>(t.shape.begin(), t.shape.end() - 2);
}

std::string checkMatmul(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = expectGemmDTypes(call, 0, 1, 2); !e.empty()) {
    return e;
  }
  return checkLikeCpu("matmul", call);
}

std::string launchMatmul(const CudaCall &call) {
  const Tensor &ta = call.operands[0], &tb = call.operands[1],
               &ty = call.operands[2];
  const int64_t m = ta.shape[ta.rank() - 2], k = ta.shape[ta.rank() - 1];
  const int64_t n = tb.shape[tb.rank() - 1];
  const std::vector<int64_t> aBatch = batchShape(ta), bBatch = batchShape(tb),
                             yBatch = batchShape(ty);
  const int64_t batch = product(yBatch);
  if (ty.numel() == 0) {
    return "";
  }
  if (k == 0) {
    return call.context->memsetZero(ty.data, ty.bytes());
  }
  GemmDesc desc = gemmOf(call, ta, tb, ty);
  desc.m = m;
  desc.n = n;
  desc.k = k;
  desc.lda = k;
  desc.ldb = n;
  desc.ldc = n;
  if (product(bBatch) == 1 && product(aBatch) == batch) {
    desc.m = batch * m;
    return call.context->gemm(desc);
  }
  // Each run of the innermost merged batch dimension is one strided GEMM:
  // a and b advance by their (possibly zero) stride per batch.
  const cpu::BroadcastPlan plan(yBatch, {&aBatch, &bBatch});
  std::string error;
  plan.forEachRun(0, batch, [&](const auto &offsets, int64_t pos,
                                int64_t length) {
    if (!error.empty()) {
      return;
    }
    GemmDesc run = desc;
    run.a = bytesAt(ta, offsets[0] * m * k);
    run.strideA = plan.innerStride(0) * m * k;
    run.b = bytesAt(tb, offsets[1] * k * n);
    run.strideB = plan.innerStride(1) * k * n;
    run.c = const_cast<char *>(bytesAt(ty, pos * m * n));
    run.strideC = m * n;
    run.batch = length;
    error = call.context->gemm(run);
  });
  return error;
}

//===----------------------------------------------------------------------===//
// linear_weight_grad: dw [N, K] (+)= dy^T x over the flattened rows, one
// GEMM with the rows as the contraction.
//===----------------------------------------------------------------------===//

std::string checkLinearWeightGrad(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = firstError({expectDTypeIn(call, 0, {DType::F32, DType::BF16}),
                           expectSameDType(call, 1, 0),
                           expectDType(call, 2, DType::F32)});
      !e.empty()) {
    return e;
  }
  return checkLikeCpu("linear_weight_grad", call);
}

std::string launchLinearWeightGrad(const CudaCall &call) {
  const Tensor &dy = call.operands[0], &x = call.operands[1],
               &dw = call.operands[2];
  const bool accumulate = call.attributes.getInt("accumulate", 0) != 0;
  const int64_t n = dy.shape.back(), k = x.shape.back();
  if (dw.numel() == 0) {
    return "";
  }
  const int64_t rows = dy.numel() / n;
  if (rows == 0) {
    return accumulate ? "" : call.context->memsetZero(dw.data, dw.bytes());
  }
  GemmDesc desc = gemmOf(call, dy, x, dw);
  desc.transA = true;
  desc.m = n;
  desc.n = k;
  desc.k = rows;
  desc.lda = n;
  desc.ldb = k;
  desc.ldc = k;
  applyEpilogue(desc, call);
  return call.context->gemm(desc);
}

//===----------------------------------------------------------------------===//
// linear_quantized and dequantize
//===----------------------------------------------------------------------===//

/// The layouts of tl::qlinear::QuantWeight, QuantTables and GemmArgs in
/// codegen/cuda/QuantizedLinearKernels.cu (field for field).
struct QuantWeight {
  const unsigned char *storage;
  long long rows, cols;
  int scheme;
  int blockShift;
  int doubleQuant;
  int nestedBlockSize;
  long long absmaxAt;
  long long nestedAt;
  long long packedAt;
  long long scalesAt, codesAt, columnsAt, valuesAt, outlierColumns;
  int bits, groups;
  long long qzerosAt, gscalesAt, gIdxAt, zeroRowBytes;
};
static_assert(sizeof(QuantWeight) == 144, "must match tl::qlinear::QuantWeight");
struct QuantTables {
  float code[16];
  float map[256];
};
struct GemmArgs {
  const void *x;
  void *y;
  const void *bias;
  long long m, n, k;
  int transposeWeight, yBf16, biasBf16;
};
static_assert(sizeof(GemmArgs) == 64, "must match tl::qlinear::GemmArgs");

constexpr int64_t kTile = 128;
constexpr unsigned kThreads = 256;
constexpr int64_t kMaxGridY = 65535;

/// "" when operand `index` is a u8 [storageBytes(spec)] weight storage.
std::string expectStorage(const KernelCall &call, size_t index,
                          const quant::QuantSpec &spec) {
  if (auto e = firstError(
          {expectDType(call, index, DType::U8), expectRank(call, index, 1)});
      !e.empty()) {
    return e;
  }
  const uint64_t bytes = quant::storageBytes(spec);
  const int64_t have = call.operands[index].shape[0];
  if (static_cast<uint64_t>(have) != bytes) {
    return "weight storage has " + std::to_string(have) + " bytes, expected " +
           std::to_string(bytes) + " for a " +
           quant::schemeName(spec.scheme) + " [" + std::to_string(spec.rows) +
           ", " + std::to_string(spec.cols) + "] weight";
  }
  return "";
}

/// The device's view of a weight: section offsets from runtime/quant's
/// layouts (QuantizedWeight.h).
QuantWeight weightOf(const quant::QuantSpec &spec, const void *storage) {
  QuantWeight w{};
  w.storage = static_cast<const unsigned char *>(storage);
  w.rows = spec.rows;
  w.cols = spec.cols;
  w.scheme = static_cast<int>(spec.scheme);
  switch (spec.scheme) {
  case quant::Scheme::NF4: {
    int shift = 0;
    while ((1 << shift) < spec.blockSize) {
      ++shift;
    }
    w.blockShift = shift;
    w.doubleQuant = spec.doubleQuant ? 1 : 0;
    w.nestedBlockSize = spec.nestedBlockSize;
    const int64_t blocks =
        (spec.rows * spec.cols + spec.blockSize - 1) / spec.blockSize;
    if (spec.doubleQuant) {
      // offset f32 | nestedAbsmax f32[nested] | codes u8[blocks] | packed
      const int64_t nested =
          (blocks + spec.nestedBlockSize - 1) / spec.nestedBlockSize;
      w.nestedAt = 4;
      w.absmaxAt = 4 + 4 * nested;
      w.packedAt = w.absmaxAt + blocks;
    } else {
      w.absmaxAt = 0;
      w.packedAt = 4 * blocks;
    }
    break;
  }
  case quant::Scheme::Int8:
    // scales f32[rows] | q i8[rows * cols] | columns i32[k] | values f16
    w.scalesAt = 0;
    w.codesAt = 4 * spec.rows;
    w.columnsAt = w.codesAt + spec.rows * spec.cols;
    w.valuesAt = w.columnsAt + 4 * spec.outlierColumns;
    w.outlierColumns = spec.outlierColumns;
    break;
  case quant::Scheme::GPTQ: {
    const quant::GptqLayout layout = quant::gptqLayout(spec);
    w.bits = spec.bits;
    w.groups = static_cast<int>(spec.groups());
    w.qzerosAt = static_cast<long long>(layout.qzeros.offset);
    w.gscalesAt = static_cast<long long>(layout.scales.offset);
    w.gIdxAt = static_cast<long long>(layout.gIdx.offset);
    w.zeroRowBytes = layout.qzeros.shape[1] * 4;
    break;
  }
  case quant::Scheme::BF16:
  case quant::Scheme::FP16:
    break;
  }
  return w;
}

QuantTables tablesOf() {
  QuantTables t{};
  for (int i = 0; i < 16; ++i) {
    t.code[i] = quant::kNf4Codebook[i];
  }
  const std::array<float, 256> &map = quant::dynamicMap8Bit();
  for (int i = 0; i < 256; ++i) {
    t.map[i] = map[i];
  }
  return t;
}

bool wordAligned(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 3u) == 0;
}

/// The copies' format `via_gemm` names (QuantizedGemmWorkspace.h), or why
/// it names none.
std::string routeFormatOf(const Attributes &attributes,
                          GemmRouteFormat &format) {
  const int64_t viaGemm = attributes.getInt("via_gemm", 0);
  if (!gemmRouteFormatOf(viaGemm, format)) {
    return "linear_quantized: via_gemm must be 1 (bf16 copies) or 2 (fp16 "
           "copies), got " +
           std::to_string(viaGemm);
  }
  return "";
}

/// The GEMM route's operands: its format, its workspace and a bias of y's
/// dtype (the cuBLASLt epilogue's). fp16 copies take x in f32 and write y
/// in f32 (cuBLASLt multiplies fp16 into f32 or fp16 only).
std::string checkThroughGemm(const KernelCall &call,
                             const quant::QuantSpec &spec) {
  const size_t count = call.operands.size();
  const Tensor &x = call.operands[0], &y = call.operands[count - 2];
  const Tensor &workspace = call.operands[count - 1];
  GemmRouteFormat format;
  if (auto e = routeFormatOf(call.attributes, format); !e.empty()) {
    return e;
  }
  if (format == GemmRouteFormat::FP16 &&
      (x.dtype != DType::F32 || y.dtype != DType::F32)) {
    return std::string("linear_quantized through fp16 copies (via_gemm = "
                       "2) needs x and y in f32, got x ") +
           dtypeName(x.dtype) + " and y " + dtypeName(y.dtype);
  }
  if (count == 5 && call.operands[2].dtype != y.dtype) {
    return "linear_quantized with via_gemm needs the bias in y's dtype (" +
           std::string(dtypeName(y.dtype)) + "), got " +
           dtypeName(call.operands[2].dtype);
  }
  const int64_t needed =
      quantizedGemmLayout(spec, x.numel(), x.dtype == DType::F32, format)
          .totalBytes();
  if (workspace.bytes() < static_cast<size_t>(needed)) {
    return "linear_quantized with via_gemm needs " + std::to_string(needed) +
           " bytes of workspace, the plan gives " +
           std::to_string(workspace.bytes());
  }
  return "";
}

std::string checkLinearQuantized(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4, 5); !e.empty()) {
    return e;
  }
  quant::QuantSpec spec;
  bool transposeWeight = false;
  if (auto e = cpu::decodeQuantizedLaunch(call, spec, transposeWeight);
      !e.empty()) {
    return e;
  }
  const size_t count = call.operands.size();
  const size_t out = count - 2, workspace = count - 1;
  for (size_t i : {size_t(0), out}) {
    if (auto e = expectDTypeIn(call, i, {DType::F32, DType::BF16});
        !e.empty()) {
      return e;
    }
  }
  if (count == 5) {
    if (auto e = expectDTypeIn(call, 2, {DType::F32, DType::BF16});
        !e.empty()) {
      return e;
    }
  }
  if (auto e = firstError({expectDType(call, workspace, DType::F32),
                           expectMinRank(call, 0, 1),
                           expectRank(call, workspace, 1),
                           expectStorage(call, 1, spec)});
      !e.empty()) {
    return e;
  }
  const Tensor &x = call.operands[0];
  const int64_t k = transposeWeight ? spec.rows : spec.cols;
  const int64_t n = transposeWeight ? spec.cols : spec.rows;
  if (x.shape.back() != k) {
    return "input " + shapeString(x.shape) + " does not match the [" +
           std::to_string(spec.rows) + ", " + std::to_string(spec.cols) +
           "] weight: expected last extent " + std::to_string(k) +
           (transposeWeight ? " (rows; transpose_weight = 1)" : " (cols)");
  }
  std::vector<int64_t> outShape = x.shape;
  outShape.back() = n;
  if (auto e = expectShape(call, out, outShape); !e.empty()) {
    return e;
  }
  if (count == 5) {
    // A bias [N], or with `addend` a residual of y's shape.
    const bool addend = call.attributes.getInt("addend", 0) != 0;
    if (auto e = expectShape(call, 2, addend ? outShape : std::vector<int64_t>{n});
        !e.empty()) {
      return e;
    }
  }
  const int64_t m = x.numel() / k;
  if (call.attributes.getInt("via_gemm", 0) != 0) {
    return checkThroughGemm(call, spec);
  }
  if ((m + kTile - 1) / kTile > kMaxGridY) {
    return "linear_quantized on the GPU supports at most " +
           std::to_string(kMaxGridY * kTile) + " rows of x, got " +
           std::to_string(m);
  }
  return "";
}

const char *const kLinearQuantizedFunctions[] = {
    "tailor_linear_quantized_nf4_f32",  "tailor_linear_quantized_nf4_bf16",
    "tailor_linear_quantized_bf16_f32", "tailor_linear_quantized_bf16_bf16",
    "tailor_linear_quantized_fp16_f32", "tailor_linear_quantized_fp16_bf16",
    "tailor_linear_quantized_any_f32",  "tailor_linear_quantized_any_bf16",
    "tailor_round_to_bf16",             "tailor_dequantize_bf16",
    "tailor_round_to_fp16",             "tailor_dequantize_fp16",
    nullptr};

/// linear_quantized with `via_gemm`: x rounded and W dequantized to the
/// route's 16-bit format in the workspace (QuantizedGemmWorkspace.h), then
/// one cuBLASLt GEMM with the bias in its epilogue.
std::string launchQuantizedThroughGemm(const CudaCall &call,
                                       const quant::QuantSpec &spec,
                                       bool transposeWeight) {
  const size_t count = call.operands.size();
  const Tensor &x = call.operands[0], &storage = call.operands[1];
  const Tensor &y = call.operands[count - 2];
  const Tensor &workspace = call.operands[count - 1];
  const int64_t k = transposeWeight ? spec.rows : spec.cols;
  const int64_t n = transposeWeight ? spec.cols : spec.rows;
  GemmRouteFormat format;
  if (auto e = routeFormatOf(call.attributes, format); !e.empty()) {
    return e;
  }
  const bool fp16 = format == GemmRouteFormat::FP16;
  const QuantizedGemmLayout layout =
      quantizedGemmLayout(spec, x.numel(), x.dtype == DType::F32, format);
  char *base = static_cast<char *>(workspace.data);
  const void *xHalf = x.data;
  if (layout.xBytes > 0) {
    const int64_t elements = x.numel();
    const void *in = x.data;
    void *out = base;
    Dim3 grid;
    grid.x = blocksFor(elements, kThreads);
    Dim3 block;
    block.x = kThreads;
    void *args[] = {&in, &out, const_cast<int64_t *>(&elements)};
    if (auto e = call.context->launch(fp16 ? "tailor_round_to_fp16"
                                           : "tailor_round_to_bf16",
                                      grid, block, 0, args);
        !e.empty()) {
      return e;
    }
    xHalf = base;
  }
  const void *wHalf = storage.data;
  if (layout.weightBytes > 0) {
    QuantWeight w = weightOf(spec, storage.data);
    QuantTables tables = tablesOf();
    void *out = base + layout.weightOffset;
    Dim3 grid;
    grid.x = blocksFor(spec.rows * spec.cols, kThreads);
    Dim3 block;
    block.x = kThreads;
    void *args[] = {&w, &tables, &out};
    if (auto e = call.context->launch(fp16 ? "tailor_dequantize_fp16"
                                           : "tailor_dequantize_bf16",
                                      grid, block, 0, args);
        !e.empty()) {
      return e;
    }
    wHalf = out;
  }
  GemmDesc desc;
  desc.a = xHalf;
  desc.aType = fp16 ? DType::F16 : DType::BF16;
  desc.b = wHalf;
  desc.bType = desc.aType;
  desc.c = y.data;
  desc.cType = y.dtype;
  shapeLinear(desc, x.numel() / k, n, k, transposeWeight,
              count == 5 ? call.operands[2].data : nullptr);
  applyEpilogue(desc, call);
  return call.context->gemm(desc);
}

std::string launchLinearQuantized(const CudaCall &call) {
  quant::QuantSpec spec;
  bool transposeWeight = false;
  KernelCall view;
  view.attributes = call.attributes;
  if (auto e = cpu::decodeQuantizedLaunch(view, spec, transposeWeight);
      !e.empty()) {
    return e;
  }
  const size_t count = call.operands.size();
  const Tensor &x = call.operands[0], &storage = call.operands[1];
  const Tensor &y = call.operands[count - 2];
  const int64_t k = transposeWeight ? spec.rows : spec.cols;
  const int64_t n = transposeWeight ? spec.cols : spec.rows;
  const int64_t m = x.numel() / k;
  if (m == 0) {
    return "";
  }
  if (!wordAligned(storage.data)) {
    return "linear_quantized needs its weight storage 4-byte aligned";
  }
  if (call.attributes.getInt("via_gemm", 0) != 0) {
    return launchQuantizedThroughGemm(call, spec, transposeWeight);
  }
  if (call.attributes.getInt("accumulate", 0) != 0 ||
      call.attributes.getInt("addend", 0) != 0 ||
      call.attributes.getFloat("alpha", 1) != 1.0) {
    return "linear_quantized applies alpha, accumulate and an addend only "
           "through the GEMM route (via_gemm = 1)";
  }
  QuantWeight w = weightOf(spec, storage.data);
  QuantTables tables = tablesOf();
  GemmArgs args{};
  args.x = x.data;
  args.y = y.data;
  args.bias = count == 5 ? call.operands[2].data : nullptr;
  args.m = m;
  args.n = n;
  args.k = k;
  args.transposeWeight = transposeWeight ? 1 : 0;
  args.yBf16 = y.dtype == DType::BF16 ? 1 : 0;
  args.biasBf16 =
      count == 5 && call.operands[2].dtype == DType::BF16 ? 1 : 0;
  std::string function = "tailor_linear_quantized_";
  switch (spec.scheme) {
  case quant::Scheme::NF4:
    function += "nf4";
    break;
  case quant::Scheme::BF16:
    function += "bf16";
    break;
  case quant::Scheme::FP16:
    function += "fp16";
    break;
  case quant::Scheme::Int8:
  case quant::Scheme::GPTQ:
    function += "any";
    break;
  }
  function += std::string("_") + floatSuffix(x.dtype);
  Dim3 grid;
  grid.x = static_cast<unsigned>((n + kTile - 1) / kTile);
  grid.y = static_cast<unsigned>((m + kTile - 1) / kTile);
  Dim3 block;
  block.x = kThreads;
  void *args3[] = {&w, &tables, &args};
  return call.context->launch(function.c_str(), grid, block, 0, args3);
}

std::string checkDequantize(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  quant::QuantSpec spec;
  bool transposeWeight = false;
  if (auto e = cpu::decodeQuantizedLaunch(call, spec, transposeWeight);
      !e.empty()) {
    return e;
  }
  return firstError({expectStorage(call, 0, spec),
                     expectDTypeIn(call, 1, {DType::F32, DType::BF16}),
                     expectShape(call, 1, {spec.rows, spec.cols})});
}

const char *const kDequantizeFunctions[] = {"tailor_dequantize_f32",
                                            "tailor_dequantize_bf16", nullptr};

std::string launchDequantize(const CudaCall &call) {
  quant::QuantSpec spec;
  bool transposeWeight = false;
  KernelCall view;
  view.attributes = call.attributes;
  if (auto e = cpu::decodeQuantizedLaunch(view, spec, transposeWeight);
      !e.empty()) {
    return e;
  }
  const Tensor &storage = call.operands[0], &y = call.operands[1];
  if (!wordAligned(storage.data)) {
    return "dequantize needs its weight storage 4-byte aligned";
  }
  QuantWeight w = weightOf(spec, storage.data);
  QuantTables tables = tablesOf();
  void *out = y.data;
  Dim3 grid;
  grid.x = blocksFor(spec.rows * spec.cols, kThreads);
  Dim3 block;
  block.x = kThreads;
  void *args[] = {&w, &tables, &out};
  return call.context->launch(y.dtype == DType::BF16
                                  ? "tailor_dequantize_bf16"
                                  : "tailor_dequantize_f32",
                              grid, block, 0, args);
}

} // namespace

void addLinearAlgebraCudaKernels(std::vector<CudaKernelDef> &table) {
  table.push_back({"linear", -1, checkLinear, launchLinear, kNoFunctions});
  table.push_back({"matmul", 3, checkMatmul, launchMatmul, kNoFunctions});
  table.push_back({"linear_weight_grad", 3, checkLinearWeightGrad,
                   launchLinearWeightGrad, kNoFunctions});
  table.push_back({"linear_quantized", -1, checkLinearQuantized,
                   launchLinearQuantized, kLinearQuantizedFunctions});
  table.push_back({"dequantize", 2, checkDequantize, launchDequantize,
                   kDequantizeFunctions});
}

} // namespace tailor::runtime::cuda
