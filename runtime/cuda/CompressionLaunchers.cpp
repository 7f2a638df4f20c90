//===- CompressionLaunchers.cpp - PowerSGD's kernels on gradient states ---===//
//
// Launchers of codegen/cuda/CompressionKernels.cu, with the CPU kernels'
// names, operands, attributes and checks (runtime/cpu/CompressionKernels.cpp,
// runtime/cpu/README.md): PowerSGD's and ACP-SGD's compute on a bucket's
// states. Every operand is f32; a state of rank > 2 is read as the matrix
// [shape[0], the rest], as the hook views a gradient.
//
//   - error_feedback_add, error_feedback_store, lowrank_init: a thread per
//     element.
//   - orthogonalize: one block of 512 threads for the factor (Gram-Schmidt
//     runs column after column; the rank is a few columns).
//   - lowrank_matmul: c = op(a) op(b) as one cuBLASLt GEMM in full f32
//     (never the plan's bf16 or fp16 tensor cores: the hook's products are
//     f32).
//
//   - sign_compress (grads..., [residuals...], signs, scales; `members`):
//     the signs zeroed, then per gradient one block for p and its scale
//     and a thread per byte of the signs it covers, in order on the
//     stream.
//   - sign_average (signs, scales, grads...): per gradient a thread per
//     entry.
//
// Top-k has no CUDA kernels yet: the planner refuses it on GPU targets by
// name.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"

#include <cstdint>
#include <utility>

namespace tailor::runtime::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kOrthogonalizeThreads = 512;

std::string launch1d(const CudaCall &call, const char *function, int64_t items,
                     void **args) {
  return call.context->launch(function, Dim3{blocksFor(items, kThreads), 1, 1},
                              Dim3{kThreads, 1, 1}, 0, args);
}

/// Operand `index` read as a matrix: [shape[0], rest] (a scalar: 1 x 1).
std::pair<int64_t, int64_t> matrixOf(const Tensor &t) {
  int64_t rows = t.rank() == 0 ? 1 : t.shape[0];
  int64_t cols = rows == 0 ? 0 : t.numel() / rows;
  return {rows, cols};
}

std::string checkErrorFeedbackAdd(const KernelCall &call) {
  return checkLikeCpu("error_feedback_add", call);
}

std::string launchErrorFeedbackAdd(const CudaCall &call) {
  long long n = call.operands[0].numel();
  if (n == 0) {
    return "";
  }
  void *error = call.operands[0].data, *grad = call.operands[1].data;
  void *args[] = {&error, &grad, &n};
  return launch1d(call, "tailor_error_feedback_add", n, args);
}

std::string checkErrorFeedbackStore(const KernelCall &call) {
  return checkLikeCpu("error_feedback_store", call);
}

std::string launchErrorFeedbackStore(const CudaCall &call) {
  long long n = call.operands[0].numel();
  if (n == 0) {
    return "";
  }
  const void *grad = call.operands[0].data;
  void *error = call.operands[1].data;
  void *args[] = {&grad, &error, &n};
  return launch1d(call, "tailor_error_feedback_store", n, args);
}

std::string checkLowRankInit(const KernelCall &call) {
  return checkLikeCpu("lowrank_init", call);
}

std::string launchLowRankInit(const CudaCall &call) {
  long long n = call.operands[0].numel();
  if (n == 0) {
    return "";
  }
  void *factor = call.operands[0].data;
  void *args[] = {&factor, &n};
  return launch1d(call, "tailor_lowrank_init", n, args);
}

std::string checkOrthogonalize(const KernelCall &call) {
  return checkLikeCpu("orthogonalize", call);
}

std::string launchOrthogonalize(const CudaCall &call) {
  long long rows = call.operands[0].shape[0];
  long long cols = call.operands[0].shape[1];
  if (rows == 0 || cols == 0) {
    return "";
  }
  void *factor = call.operands[0].data;
  float epsilon = static_cast<float>(call.attributes.getFloat("epsilon", 0.0));
  void *args[] = {&factor, &rows, &cols, &epsilon};
  return call.context->launch("tailor_orthogonalize", Dim3{1, 1, 1},
                              Dim3{kOrthogonalizeThreads, 1, 1}, 0, args);
}

std::string checkLowRankMatmul(const KernelCall &call) {
  return checkLikeCpu("lowrank_matmul", call);
}

std::string launchLowRankMatmul(const CudaCall &call) {
  const Tensor &a = call.operands[0], &b = call.operands[1];
  const Tensor &c = call.operands[2];
  auto [ar, ac] = matrixOf(a);
  int64_t bc = matrixOf(b).second;
  auto [cr, cc] = matrixOf(c);
  GemmDesc desc;
  desc.transA = call.attributes.getInt("transpose_a", 0) != 0;
  desc.transB = call.attributes.getInt("transpose_b", 0) != 0;
  desc.m = cr;
  desc.n = cc;
  desc.k = desc.transA ? ar : ac;
  if (desc.m == 0 || desc.n == 0) {
    return "";
  }
  if (desc.k == 0) {
    return call.context->memsetZero(c.data, size_t(cr * cc) * sizeof(float));
  }
  desc.a = a.data, desc.lda = ac;
  desc.b = b.data, desc.ldb = bc;
  desc.c = c.data, desc.ldc = cc;
  desc.halfCompute = HalfCompute::None;
  return call.context->gemm(desc);
}

std::string checkSignCompress(const KernelCall &call) {
  return checkLikeCpu("sign_compress", call);
}

std::string launchSignCompress(const CudaCall &call) {
  size_t members = static_cast<size_t>(call.attributes.getInt("members", 0));
  bool residual = call.operands.size() == 2 * members + 2;
  size_t out = call.operands.size() - 2;
  const Tensor &signs = call.operands[out];
  if (std::string e = call.context->memsetZero(signs.data, signs.bytes());
      !e.empty()) {
    return e;
  }
  long long begin = 0;
  for (size_t t = 0; t < members; ++t) {
    long long n = call.operands[t].numel();
    if (n == 0) {
      continue;
    }
    const void *grad = call.operands[t].data;
    void *rest = residual ? call.operands[members + t].data : nullptr;
    void *scale = static_cast<float *>(call.operands[out + 1].data) + t;
    void *scaleArgs[] = {&grad, &rest, &scale, &n};
    if (std::string e = call.context->launch("tailor_sign_scale", Dim3{1, 1, 1},
                                             Dim3{kOrthogonalizeThreads, 1, 1},
                                             0, scaleArgs);
        !e.empty()) {
      return e;
    }
    const void *p = residual ? rest : grad;
    void *bits = signs.data;
    void *packArgs[] = {&p, &rest, &scale, &bits, &begin, &n};
    long long bytes = (begin + n - 1) / 8 - begin / 8 + 1;
    if (std::string e = launch1d(call, "tailor_sign_pack", bytes, packArgs);
        !e.empty()) {
      return e;
    }
    begin += n;
  }
  return "";
}

std::string checkSignAverage(const KernelCall &call) {
  return checkLikeCpu("sign_average", call);
}

std::string launchSignAverage(const CudaCall &call) {
  long long members = static_cast<long long>(call.operands.size() - 2);
  long long ranks = call.operands[1].numel() / members;
  long long total = 0;
  for (size_t t = 2; t < call.operands.size(); ++t) {
    total += call.operands[t].numel();
  }
  long long bytes = (total + 7) / 8;
  const void *signs = call.operands[0].data;
  const void *scales = call.operands[1].data;
  long long begin = 0;
  for (long long t = 0; t < members; ++t) {
    const Tensor &grad = call.operands[size_t(t) + 2];
    long long n = grad.numel();
    if (n > 0) {
      void *g = grad.data;
      void *args[] = {&signs, &scales,  &g,     &begin, &n,
                      &t,     &members, &ranks, &bytes};
      if (std::string e = launch1d(call, "tailor_sign_average", n, args);
          !e.empty()) {
        return e;
      }
    }
    begin += n;
  }
  return "";
}

const char *const kErrorFeedbackAddFunctions[] = {"tailor_error_feedback_add",
                                                  nullptr};
const char *const kErrorFeedbackStoreFunctions[] = {
    "tailor_error_feedback_store", nullptr};
const char *const kLowRankInitFunctions[] = {"tailor_lowrank_init", nullptr};
const char *const kOrthogonalizeFunctions[] = {"tailor_orthogonalize", nullptr};
const char *const kSignCompressFunctions[] = {"tailor_sign_scale",
                                              "tailor_sign_pack", nullptr};
const char *const kSignAverageFunctions[] = {"tailor_sign_average", nullptr};
const char *const kNoFunctions[] = {nullptr};

} // namespace

void addCompressionCudaKernels(std::vector<CudaKernelDef> &table) {
  table.push_back({"error_feedback_add", 2, checkErrorFeedbackAdd,
                   launchErrorFeedbackAdd, kErrorFeedbackAddFunctions});
  table.push_back({"error_feedback_store", 2, checkErrorFeedbackStore,
                   launchErrorFeedbackStore, kErrorFeedbackStoreFunctions});
  table.push_back({"lowrank_init", 1, checkLowRankInit, launchLowRankInit,
                   kLowRankInitFunctions});
  table.push_back({"orthogonalize", 1, checkOrthogonalize, launchOrthogonalize,
                   kOrthogonalizeFunctions});
  table.push_back({"lowrank_matmul", 3, checkLowRankMatmul, launchLowRankMatmul,
                   kNoFunctions});
  table.push_back({"sign_compress", -1, checkSignCompress, launchSignCompress,
                   kSignCompressFunctions});
  table.push_back({"sign_average", -1, checkSignAverage, launchSignAverage,
                   kSignAverageFunctions});
}

} // namespace tailor::runtime::cuda
