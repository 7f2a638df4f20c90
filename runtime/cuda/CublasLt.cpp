//===- CublasLt.cpp - LaunchContext::gemm through cuBLASLt ----------------===//
//
// Row-major to column-major: a row-major matrix X with leading dimension ld
// is, read column-major, X^T with the same ld. So the row-major
//   C (m x n) = op(A) (m x k) op(B) (k x n)
// is the column-major
//   C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m),
// one cublasLtMatmul with B in cuBLASLt's "A" slot and A in its "B" slot,
// each keeping its own transpose flag, and D = C^T of n rows and m columns.
// The bias epilogue adds a vector along D's rows, which are our n: exactly
// GemmDesc's bias[n] broadcast over the rows of C.
//
// Types: f32 or bf16 inputs and output, f32 scale (host alpha and beta) and
// f32 accumulation; f32 inputs compute in full f32 (CUBLAS_COMPUTE_32F)
// unless the plan asks for bf16 tensor cores (CUBLAS_COMPUTE_32F_FAST_16BF).
// Batches are strided (a stride of 0 broadcasts an operand).
//
// The heuristic's algorithm is cached per shape, types, strides, pointer
// alignment and workspace size, so a training step pays for it once per
// distinct GEMM. Descriptors are cheap host objects, made per call.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CublasLt.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace tailor::runtime::cuda {

struct CublasLt::Impl {
  void *library = nullptr;
  cublasLtHandle_t handle = nullptr;

  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtGetStatusString) statusString = nullptr;
  decltype(&cublasLtMatmulDescCreate) descCreate = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) descSet = nullptr;
  decltype(&cublasLtMatmulDescDestroy) descDestroy = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layoutCreate = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layoutSet = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layoutDestroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preferenceCreate = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preferenceSet = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preferenceDestroy = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;

  std::mutex mutex;
  std::map<std::vector<int64_t>, cublasLtMatmulAlgo_t> algorithms;

  ~Impl() {
    if (handle && destroy) {
      destroy(handle);
    }
    if (library) {
      dlclose(library);
    }
  }

  /// "<call> failed: <status> (runtime/cuda/CublasLt.cpp:<line>)".
  std::string failure(const char *call, cublasStatus_t status,
                      int line) const {
    const char *text = statusString ? statusString(status) : nullptr;
    return std::string(call) + " failed: " +
           (text ? text : "status " + std::to_string(int(status))) +
           " (runtime/cuda/CublasLt.cpp:" + std::to_string(line) + ")";
  }
};

namespace {

/// Resolves `name` into `fn`; false (with `error`) when it is missing.
template <typename Fn>
bool resolve(void *library, const char *name, Fn &fn, std::string &error) {
  dlerror();
  void *symbol = dlsym(library, name);
  if (!symbol) {
    const char *why = dlerror();
    error = std::string("libcublasLt.so.13 has no ") + name + ": " +
            (why ? why : "symbol not found");
    return false;
  }
  fn = reinterpret_cast<Fn>(symbol);
  return true;
}

cudaDataType_t cudaType(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}

/// f32 accumulation; f32 inputs rounded to bf16 or fp16 on the tensor
/// cores when the plan computes in that format.
cublasComputeType_t computeTypeOf(const GemmDesc &desc) {
  const bool f32Inputs =
      desc.aType == DType::F32 && desc.bType == DType::F32;
  if (f32Inputs && desc.halfCompute == HalfCompute::BF16) {
    return CUBLAS_COMPUTE_32F_FAST_16BF;
  }
  if (f32Inputs && desc.halfCompute == HalfCompute::FP16) {
    return CUBLAS_COMPUTE_32F_FAST_16F;
  }
  return CUBLAS_COMPUTE_32F;
}

/// The largest power of two (up to 256) dividing every pointer: cuBLASLt's
/// kernels and its heuristic depend on it.
int64_t alignmentOf(std::initializer_list<const void *> pointers) {
  uintptr_t bits = 256;
  for (const void *p : pointers) {
    if (p) {
      bits |= reinterpret_cast<uintptr_t>(p);
    }
  }
  return static_cast<int64_t>(bits & (~bits + 1));
}

} // namespace

CublasLt::CublasLt(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}

CublasLt::~CublasLt() = default;

std::unique_ptr<CublasLt> CublasLt::create(std::string &error) {
  auto impl = std::make_unique<Impl>();
  impl->library = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!impl->library) {
    const char *why = dlerror();
    error = std::string("cannot load libcublasLt.so.13: ") +
            (why ? why : "unknown error");
    return nullptr;
  }
  Impl &i = *impl;
  void *lib = i.library;
  if (!resolve(lib, "cublasLtCreate", i.create, error) ||
      !resolve(lib, "cublasLtDestroy", i.destroy, error) ||
      !resolve(lib, "cublasLtGetStatusString", i.statusString, error) ||
      !resolve(lib, "cublasLtMatmulDescCreate", i.descCreate, error) ||
      !resolve(lib, "cublasLtMatmulDescSetAttribute", i.descSet, error) ||
      !resolve(lib, "cublasLtMatmulDescDestroy", i.descDestroy, error) ||
      !resolve(lib, "cublasLtMatrixLayoutCreate", i.layoutCreate, error) ||
      !resolve(lib, "cublasLtMatrixLayoutSetAttribute", i.layoutSet, error) ||
      !resolve(lib, "cublasLtMatrixLayoutDestroy", i.layoutDestroy, error) ||
      !resolve(lib, "cublasLtMatmulPreferenceCreate", i.preferenceCreate,
               error) ||
      !resolve(lib, "cublasLtMatmulPreferenceSetAttribute", i.preferenceSet,
               error) ||
      !resolve(lib, "cublasLtMatmulPreferenceDestroy", i.preferenceDestroy,
               error) ||
      !resolve(lib, "cublasLtMatmulAlgoGetHeuristic", i.heuristic, error) ||
      !resolve(lib, "cublasLtMatmul", i.matmul, error)) {
    return nullptr;
  }
  if (cublasStatus_t s = i.create(&i.handle); s != CUBLAS_STATUS_SUCCESS) {
    error = i.failure("cublasLtCreate", s, __LINE__);
    i.handle = nullptr;
    return nullptr;
  }
  return std::unique_ptr<CublasLt>(new CublasLt(std::move(impl)));
}

std::string CublasLt::gemm(const GemmDesc &desc, void *workspace,
                           size_t workspaceBytes, void *stream) {
  Impl &i = *impl;
  if (desc.m == 0 || desc.n == 0 || desc.batch == 0) {
    return "";
  }
  if (desc.k <= 0 || desc.m < 0 || desc.n < 0 || desc.batch < 0) {
    return "cublasLt gemm needs m, n, batch >= 0 and k >= 1, got m " +
           std::to_string(desc.m) + ", n " + std::to_string(desc.n) +
           ", k " + std::to_string(desc.k) + ", batch " +
           std::to_string(desc.batch);
  }
  if (desc.bias && desc.beta != 0.0f) {
    return "cublasLt gemm: a bias needs beta 0";
  }
  if (desc.batch > INT32_MAX) {
    return "cublasLt gemm: batch " + std::to_string(desc.batch) +
           " exceeds 2^31 - 1";
  }
  const cublasComputeType_t compute = computeTypeOf(desc);
  // cuBLASLt's A is our B and its B our A (see the file comment).
  const cublasOperation_t opL = desc.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opR = desc.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint64_t lRows = desc.transB ? desc.k : desc.n;
  const uint64_t lCols = desc.transB ? desc.n : desc.k;
  const uint64_t rRows = desc.transA ? desc.m : desc.k;
  const uint64_t rCols = desc.transA ? desc.k : desc.m;

  // The descriptors of this call, destroyed whatever path it leaves by.
  struct Descriptors {
    Impl &impl;
    cublasLtMatmulDesc_t matmul = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t preference = nullptr;
    ~Descriptors() {
      if (preference) {
        impl.preferenceDestroy(preference);
      }
      for (cublasLtMatrixLayout_t layout : {a, b, c}) {
        if (layout) {
          impl.layoutDestroy(layout);
        }
      }
      if (matmul) {
        impl.descDestroy(matmul);
      }
    }
  } d{i};
  cublasStatus_t s;
#define TAILOR_LT(call, ...)                                                   \
  if ((s = i.call(__VA_ARGS__)) != CUBLAS_STATUS_SUCCESS) {                    \
    return i.failure("cublasLt" #call, s, __LINE__);                           \
  }
  TAILOR_LT(descCreate, &d.matmul, compute, CUDA_R_32F);
  TAILOR_LT(descSet, d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &opL, sizeof(opL));
  TAILOR_LT(descSet, d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &opR, sizeof(opR));
  if (desc.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const int32_t biasType = cudaType(desc.cType);
    TAILOR_LT(descSet, d.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
              sizeof(epilogue));
    TAILOR_LT(descSet, d.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &desc.bias,
              sizeof(desc.bias));
    TAILOR_LT(descSet, d.matmul, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
              &biasType, sizeof(biasType));
  }
  TAILOR_LT(layoutCreate, &d.a, cudaType(desc.bType), lRows, lCols, desc.ldb);
  TAILOR_LT(layoutCreate, &d.b, cudaType(desc.aType), rRows, rCols, desc.lda);
  TAILOR_LT(layoutCreate, &d.c, cudaType(desc.cType), desc.n, desc.m,
            desc.ldc);
  if (desc.batch > 1) {
    const int32_t count = static_cast<int32_t>(desc.batch);
    const int64_t strides[3] = {desc.strideB, desc.strideA, desc.strideC};
    const cublasLtMatrixLayout_t layouts[3] = {d.a, d.b, d.c};
    for (int l = 0; l < 3; ++l) {
      TAILOR_LT(layoutSet, layouts[l], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                &count, sizeof(count));
      TAILOR_LT(layoutSet, layouts[l],
                CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[l],
                sizeof(strides[l]));
    }
  }

  // The algorithm: cached per everything the heuristic looks at.
  const std::vector<int64_t> key = {
      desc.transA,
      desc.transB,
      desc.m,
      desc.n,
      desc.k,
      desc.lda,
      desc.ldb,
      desc.ldc,
      desc.strideA,
      desc.strideB,
      desc.strideC,
      desc.batch,
      static_cast<int64_t>(desc.aType),
      static_cast<int64_t>(desc.bType),
      static_cast<int64_t>(desc.cType),
      desc.bias != nullptr,
      static_cast<int64_t>(compute),
      desc.beta != 0.0f,
      desc.addend != nullptr,
      alignmentOf({desc.a, desc.b, desc.c, desc.bias, desc.addend}),
      static_cast<int64_t>(workspaceBytes)};
  cublasLtMatmulAlgo_t algorithm;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(i.mutex);
    auto found = i.algorithms.find(key);
    if (found != i.algorithms.end()) {
      algorithm = found->second;
      cached = true;
    }
  }
  if (!cached) {
    const uint64_t maxWorkspace = workspace ? workspaceBytes : 0;
    TAILOR_LT(preferenceCreate, &d.preference);
    TAILOR_LT(preferenceSet, d.preference,
              CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &maxWorkspace,
              sizeof(maxWorkspace));
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    TAILOR_LT(heuristic, i.handle, d.matmul, d.a, d.b, d.c, d.c, d.preference,
              1, &result, &found);
    if (found < 1) {
      return "cublasLtMatmulAlgoGetHeuristic found no algorithm for a " +
             std::to_string(desc.m) + " x " + std::to_string(desc.n) + " x " +
             std::to_string(desc.k) + " GEMM (batch " +
             std::to_string(desc.batch) + ")";
    }
    algorithm = result.algo;
    std::lock_guard<std::mutex> lock(i.mutex);
    i.algorithms.emplace(key, algorithm);
  }

  const float alpha = desc.alpha, beta = desc.beta;
  const void *c = desc.addend ? desc.addend : desc.c;
  TAILOR_LT(matmul, i.handle, d.matmul, &alpha, desc.b, d.a, desc.a, d.b,
            &beta, c, d.c, desc.c, d.c, &algorithm, workspace,
            workspace ? workspaceBytes : 0,
            static_cast<cudaStream_t>(stream));
#undef TAILOR_LT
  return "";
}

} // namespace tailor::runtime::cuda
