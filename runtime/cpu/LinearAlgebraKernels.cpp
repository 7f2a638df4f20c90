//===- LinearAlgebraKernels.cpp - matmul and linear through OpenBLAS ------===//
//
// Layout: row-major throughout. `linear` keeps PyTorch's weight layout
// w [N, K] and asks sgemm for x w^T directly (Trans on the second operand),
// so weights are never transposed or copied. Precision: the BLAS's f32/f64
// GEMM (f32 products and sums in f32 with FMA, as PyTorch's CPU addmm).
//
// Threading: a large GEMM runs on the BLAS's own threads (setBlasThreads).
// A batch of small GEMMs (per-head matmuls) instead runs one GEMM per pool
// worker with the BLAS single-threaded: small GEMMs do not spread well over
// BLAS threads, and OpenBLAS serializes concurrent multithreaded calls.
//
// `linear_fp16` and `matmul_fp16` (tailor-emulate-half, format fp16): what
// an fp16 tensor core computes, emulated. Their last operand is a
// workspace: the operands are rounded to half (HalfRounding.h) while being
// copied there, the same f32 GEMM sums the products, and the product is
// rounded to half as the epilogue writes it (bias, residual or
// accumulation added in f32 after the rounding, as autocast adds an f32
// value to a half product). `linear_bf16` and `matmul_bf16` (format bf16)
// are the same templates with bf16 rounding of the operands and no
// rounding of the product: f32 sums written as f32 (CUDA's bf16Compute
// GEMMs), so their workspace holds the rounded operands only. The weight is
// re-rounded on every launch (a no-op on a frozen weight stored as bf16 or
// fp16 and dequantized whole, Fusions.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

#include "runtime/cpu/BlasCore.h"
#include "runtime/cpu/HalfRounding.h"
#include "runtime/cpu/VectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

// Declared by OpenBLAS's cblas.h but not by the reference CBLAS header.
extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace tailor::runtime {

void setBlasThreads(int threads) {
  ensureBlasCoreMatchesCpu();
  openblas_set_num_threads(std::max(1, threads));
}

} // namespace tailor::runtime

namespace tailor::runtime::cpu {

ScopedBlasThreads::ScopedBlasThreads(int threads)
    : previous(openblas_get_num_threads()) {
  if (previous != threads) {
    openblas_set_num_threads(threads);
  }
}

ScopedBlasThreads::~ScopedBlasThreads() {
  if (openblas_get_num_threads() != previous) {
    openblas_set_num_threads(previous);
  }
}

namespace {

/// Below this many multiply-adds per GEMM, a batched matmul spreads its
/// GEMMs over the pool rather than over BLAS threads.
constexpr int64_t kSmallGemm = int64_t(1) << 21;

/// C[m, n] = alpha A B (+ beta C), row-major, with optional transposed B.
/// Empty K still defines C (as beta C), which BLAS argument checks reject.
template <typename T>
void gemm(bool transB, int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
          const T *b, int64_t ldb, T beta, T *c, int64_t ldc,
          T alpha = T(1)) {
  if (m == 0 || n == 0) {
    return;
  }
  if (k == 0) {
    if (beta == T(0)) {
      for (int64_t i = 0; i < m; ++i) {
        std::memset(c + i * ldc, 0, n * sizeof(T));
      }
    }
    return;
  }
  CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, alpha, a, lda, b,
                ldb, beta, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, alpha, a, lda, b,
                ldb, beta, c, ldc);
  }
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

std::vector<int64_t> batchShape(const Tensor &t) {
  return std::vector<int64_t>(t.shape.begin(), t.shape.end() - 2);
}

int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t d : v) {
    p *= d;
  }
  return p;
}

std::string checkMatmul(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::F64}); !e.empty()) {
    return e;
  }
  for (size_t i : {1, 2}) {
    if (auto e = expectSameDType(call, i, 0); !e.empty()) {
      return e;
    }
    if (auto e = expectMinRank(call, i, 2); !e.empty()) {
      return e;
    }
  }
  if (auto e = expectMinRank(call, 0, 2); !e.empty()) {
    return e;
  }
  const Tensor &a = call.operands[0], &b = call.operands[1],
               &y = call.operands[2];
  int64_t m = a.shape[a.rank() - 2], k = a.shape[a.rank() - 1];
  int64_t kb = b.shape[b.rank() - 2], n = b.shape[b.rank() - 1];
  if (k != kb) {
    return "contraction extents differ: a " + shapeString(a.shape) + ", b " +
           shapeString(b.shape);
  }
  std::vector<int64_t> out = batchShape(y);
  if (!broadcastsTo(batchShape(a), out) || !broadcastsTo(batchShape(b), out)) {
    return "batch dimensions of a " + shapeString(a.shape) + " and b " +
           shapeString(b.shape) + " do not broadcast to y's " +
           shapeString(out);
  }
  out.push_back(m);
  out.push_back(n);
  return expectShape(call, 2, out);
}

/// y = a b over the shapes of operands 0 to 2, reading a and b from the
/// given pointers (the operands, or their half-rounded copies).
template <typename T>
void runMatmulTyped(const KernelCall &call, const T *a, const T *b) {
  const Tensor &ta = call.operands[0], &tb = call.operands[1],
               &ty = call.operands[2];
  int64_t m = ta.shape[ta.rank() - 2], k = ta.shape[ta.rank() - 1];
  int64_t n = tb.shape[tb.rank() - 1];
  std::vector<int64_t> aBatch = batchShape(ta), bBatch = batchShape(tb),
                       yBatch = batchShape(ty);
  int64_t batch = product(yBatch);
  T *y = ty.as<T>();
  if (batch == 0) {
    return;
  }
  // A shared b with a's batch laid out like y's is one tall GEMM.
  if (product(bBatch) == 1 && product(aBatch) == batch) {
    gemm<T>(false, batch * m, n, k, a, std::max<int64_t>(k, 1), b,
            std::max<int64_t>(n, 1), T(0), y, std::max<int64_t>(n, 1));
    return;
  }
  BroadcastPlan plan(yBatch, {&aBatch, &bBatch});
  auto runBatches = [&](int64_t begin, int64_t end, int) {
    plan.forEachRun(begin, end, [&](const auto &off, int64_t pos, int64_t len) {
      for (int64_t i = 0; i < len; ++i) {
        const T *ai = a + (off[0] + i * plan.innerStride(0)) * m * k;
        const T *bi = b + (off[1] + i * plan.innerStride(1)) * k * n;
        gemm<T>(false, m, n, k, ai, std::max<int64_t>(k, 1), bi,
                std::max<int64_t>(n, 1), T(0), y + (pos + i) * m * n,
                std::max<int64_t>(n, 1));
      }
    });
  };
  if (call.pool && call.pool->size() > 1 && m * n * k < kSmallGemm) {
    ScopedBlasThreads single(1);
    parallelFor(call, batch, 1, runBatches);
  } else {
    runBatches(0, batch, 0);
  }
}

std::string runMatmul(const KernelCall &call) {
  if (call.operands[0].dtype == DType::F32) {
    runMatmulTyped<float>(call, call.operands[0].as<float>(),
                          call.operands[1].as<float>());
  } else {
    runMatmulTyped<double>(call, call.operands[0].as<double>(),
                           call.operands[1].as<double>());
  }
  return "";
}

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

std::string checkLinear(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3, 4); !e.empty()) {
    return e;
  }
  size_t count = call.operands.size();
  for (size_t i = 0; i < count; ++i) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
  }
  if (auto e = expectMinRank(call, 0, 1); !e.empty()) {
    return e;
  }
  if (auto e = expectRank(call, 1, 2); !e.empty()) {
    return e;
  }
  const Tensor &x = call.operands[0], &w = call.operands[1];
  // `transpose_weight`: the weight is stored [K, N] (exporters that
  // pre-transpose nn.Linear weights); the GEMM reads it as stored.
  int64_t transposed = 0;
  if (auto e =
          expectIntAttr(call, "transpose_weight", 0, 1, false, 0, transposed);
      !e.empty()) {
    return e;
  }
  int64_t addend = 0;
  if (auto e = expectGemmEpilogue(call, count == 4, addend); !e.empty()) {
    return e;
  }
  int64_t k = x.shape.back(), n = w.shape[transposed ? 1 : 0];
  if (w.shape[transposed ? 0 : 1] != k) {
    return "weight " + shapeString(w.shape) + " does not match input " +
           shapeString(x.shape) + ": expected " +
           (transposed ? "[" + std::to_string(k) + ", N]"
                       : "[N, " + std::to_string(k) + "]");
  }
  std::vector<int64_t> out = x.shape;
  out.back() = n;
  if (count == 4) {
    // A bias [N], or with `addend` a tensor of y's shape.
    if (auto e = expectShape(call, 2, addend ? out : std::vector<int64_t>{n});
        !e.empty()) {
      return e;
    }
  }
  return expectShape(call, count - 1, out);
}

std::string runLinear(const KernelCall &call) {
  size_t count = call.operands.size();
  const Tensor &x = call.operands[0], &w = call.operands[1];
  const Tensor &y = call.operands[count - 1];
  bool transposed = call.attributes.getInt("transpose_weight", 0) != 0;
  int64_t k = x.shape.back(), n = w.shape[transposed ? 1 : 0];
  int64_t m = k ? x.numel() / k : y.numel() / std::max<int64_t>(n, 1);
  float *out = y.as<float>();
  // `accumulate`: y += alpha x w^T (GEMM epilogues the planner folds in).
  float beta = call.attributes.getInt("accumulate", 0) ? 1.0f : 0.0f;
  const auto alpha = static_cast<float>(call.attributes.getFloat("alpha", 1));
  if (count == 4 && call.attributes.getInt("addend", 0) != 0) {
    // Seed y with the addend (a residual) and accumulate into it.
    const float *addend = call.operands[2].as<float>();
    if (addend != out) {
      parallelFor(call, y.numel(), kElementwiseGrain,
                  [&](int64_t begin, int64_t end, int) {
                    std::memcpy(out + begin, addend + begin,
                                (end - begin) * sizeof(float));
                  });
    }
    beta = 1;
  } else if (count == 4 && n > 0) {
    // Seed y with the bias and accumulate into it: addmm's beta = 1.
    const float *bias = call.operands[2].as<float>();
    parallelFor(call, m, std::max<int64_t>(1, kElementwiseGrain / n),
                [&](int64_t begin, int64_t end, int) {
                  for (int64_t i = begin; i < end; ++i) {
                    std::memcpy(out + i * n, bias, n * sizeof(float));
                  }
                });
    beta = 1;
  }
  gemm<float>(!transposed, m, n, k, x.as<float>(), std::max<int64_t>(k, 1),
              w.as<float>(), std::max<int64_t>(transposed ? n : k, 1), beta,
              out, std::max<int64_t>(n, 1), alpha);
  return "";
}

//===----------------------------------------------------------------------===//
// matmul_fp16, linear_fp16, matmul_bf16, linear_bf16
//===----------------------------------------------------------------------===//

template <HalfFormat Format>
TAILOR_VECTOR_CLONES void roundLoop(const float *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = roundTo<Format>(src[i]);
  }
}

/// The call without its last operand (the workspace), for the checks the
/// f32 kernels make; used once per launch, when a session is created.
KernelCall withoutWorkspace(const KernelCall &call) {
  KernelCall inner = call;
  inner.operands.pop_back();
  return inner;
}

/// The workspace (last operand) is f32 and holds at least `needed` floats.
std::string expectHalfWorkspace(const KernelCall &call, int64_t needed) {
  size_t last = call.operands.size() - 1;
  if (auto e = expectDType(call, last, DType::F32); !e.empty()) {
    return e;
  }
  if (call.operands[last].numel() < needed) {
    return "workspace holds " + std::to_string(call.operands[last].numel()) +
           " floats, expected at least " + std::to_string(needed);
  }
  return "";
}

std::string checkMatmulHalf(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  if (auto e = checkMatmul(withoutWorkspace(call)); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 0, DType::F32); !e.empty()) {
    return e;
  }
  // The rounded a and b (an fp16 y is rounded in place).
  return expectHalfWorkspace(
      call, call.operands[0].numel() + call.operands[1].numel());
}

template <HalfFormat Format>
std::string runMatmulHalf(const KernelCall &call) {
  const Tensor &a = call.operands[0], &b = call.operands[1],
               &y = call.operands[2];
  float *ar = call.operands[3].as<float>();
  float *br = ar + a.numel();
  roundCopy<Format>(call, a.as<float>(), ar, a.numel());
  roundCopy<Format>(call, b.as<float>(), br, b.numel());
  runMatmulTyped<float>(call, ar, br);
  if constexpr (kRoundsProduct<Format>) {
    roundCopy<Format>(call, y.as<float>(), y.as<float>(), y.numel());
  }
  return "";
}

/// The rounded x and w, and for fp16 the product (y's shape).
template <HalfFormat Format>
std::string checkLinearHalf(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4, 5); !e.empty()) {
    return e;
  }
  if (auto e = checkLinear(withoutWorkspace(call)); !e.empty()) {
    return e;
  }
  size_t count = call.operands.size() - 1;
  int64_t product = kRoundsProduct<Format> ? call.operands[count - 1].numel()
                                           : 0;
  return expectHalfWorkspace(call, call.operands[0].numel() +
                                       call.operands[1].numel() + product);
}

/// What the product is added to: nothing, a bias row, a residual of y's
/// shape, or y itself.
enum class Base { None, Bias, Addend, Output };

template <Base Kind>
TAILOR_VECTOR_CLONES void addRoundedRow(const float *product,
                                        const float *base, float *out,
                                        int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    float p = roundToHalf(product[j]);
    if constexpr (Kind == Base::None) {
      out[j] = p;
    } else {
      out[j] = base[j] + p;
    }
  }
}

/// out[i, :] = base row + half(product[i, :]) for the m rows of width n.
template <Base Kind>
void addRounded(const KernelCall &call, const float *product,
                const float *base, float *out, int64_t m, int64_t n) {
  int64_t grain = std::max<int64_t>(
      1, kElementwiseGrain / std::max<int64_t>(n, 1));
  parallelFor(call, m, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const float *row = Kind == Base::Bias   ? base
                         : Kind == Base::None ? nullptr
                                              : base + i * n;
      addRoundedRow<Kind>(product + i * n, row, out + i * n, n);
    }
  });
}

/// linear_fp16: the product, rounded to half, then the epilogue in f32.
void linearHalfEpilogue(const KernelCall &call, const float *product,
                        float *out, int64_t m, int64_t n) {
  size_t count = call.operands.size() - 1;
  if (count == 4 && call.attributes.getInt("addend", 0) != 0) {
    addRounded<Base::Addend>(call, product, call.operands[2].as<float>(), out,
                             m, n);
  } else if (count == 4) {
    addRounded<Base::Bias>(call, product, call.operands[2].as<float>(), out,
                           m, n);
  } else if (call.attributes.getInt("accumulate", 0) != 0) {
    addRounded<Base::Output>(call, product, out, out, m, n);
  } else {
    addRounded<Base::None>(call, product, nullptr, out, m, n);
  }
}

template <HalfFormat Format>
std::string runLinearHalf(const KernelCall &call) {
  size_t count = call.operands.size() - 1;
  const Tensor &x = call.operands[0], &w = call.operands[1];
  const Tensor &y = call.operands[count - 1];
  float *xr = call.operands[count].as<float>();
  float *wr = xr + x.numel();
  roundCopy<Format>(call, x.as<float>(), xr, x.numel());
  roundCopy<Format>(call, w.as<float>(), wr, w.numel());
  if constexpr (!kRoundsProduct<Format>) {
    // bf16: the f32 kernel on the rounded operands (its epilogue in f32).
    KernelCall rounded = withoutWorkspace(call);
    rounded.operands[0].data = xr;
    rounded.operands[1].data = wr;
    return runLinear(rounded);
  }
  bool transposed = call.attributes.getInt("transpose_weight", 0) != 0;
  int64_t k = x.shape.back(), n = w.shape[transposed ? 1 : 0];
  int64_t m = k ? x.numel() / k : y.numel() / std::max<int64_t>(n, 1);
  float *product = wr + w.numel();
  const auto alpha = static_cast<float>(call.attributes.getFloat("alpha", 1));
  gemm<float>(!transposed, m, n, k, xr, std::max<int64_t>(k, 1), wr,
              std::max<int64_t>(transposed ? n : k, 1), 0.0f, product,
              std::max<int64_t>(n, 1), alpha);
  linearHalfEpilogue(call, product, y.as<float>(), m, n);
  return "";
}

} // namespace

/// dw (+)= half(product) for linear_weight_grad_fp16 (GradientKernels.cpp),
/// which shares the rounding loops.
void addRoundedProduct(const KernelCall &call, const float *product,
                       float *out, int64_t rows, int64_t columns,
                       bool accumulate) {
  if (accumulate) {
    addRounded<Base::Output>(call, product, out, out, rows, columns);
  } else {
    addRounded<Base::None>(call, product, nullptr, out, rows, columns);
  }
}

template <HalfFormat Format>
void roundCopy(const KernelCall &call, const float *src, float *dst,
               int64_t n) {
  parallelFor(call, n, kElementwiseGrain, [&](int64_t begin, int64_t end, int) {
    roundLoop<Format>(src + begin, dst + begin, end - begin);
  });
}

template void roundCopy<HalfFormat::Fp16>(const KernelCall &, const float *,
                                          float *, int64_t);
template void roundCopy<HalfFormat::Bf16>(const KernelCall &, const float *,
                                          float *, int64_t);

void addLinearAlgebraKernels(std::vector<KernelDef> &table) {
  table.push_back({"matmul", 3, checkMatmul, runMatmul});
  table.push_back({"linear", -1, checkLinear, runLinear});
  table.push_back({"matmul_fp16", 4, checkMatmulHalf,
                   runMatmulHalf<HalfFormat::Fp16>});
  table.push_back({"linear_fp16", -1, checkLinearHalf<HalfFormat::Fp16>,
                   runLinearHalf<HalfFormat::Fp16>});
  table.push_back({"matmul_bf16", 4, checkMatmulHalf,
                   runMatmulHalf<HalfFormat::Bf16>});
  table.push_back({"linear_bf16", -1, checkLinearHalf<HalfFormat::Bf16>,
                   runLinearHalf<HalfFormat::Bf16>});
}

} // namespace tailor::runtime::cpu
