//===- GradientLaunchers.cpp - backward kernels, dropout, cross-entropy ---===//
//
// Launchers of codegen/cuda/GradientKernels.cu. Operands, attributes and
// semantics are the CPU kernels' (runtime/cpu/README.md); the CUDA kernels
// add bf16 storage for activations (computing in f32):
//   - silu_grad, gelu_grad, softmax_grad, slice_grad, dropout: every float
//     operand f32 or bf16, all alike;
//   - rope_grad: dy and dx alike, cos and sin alike, each f32 or bf16;
//   - rms_norm_grad, layer_norm_grad: dy, x, dx alike, w independently;
//     dw, db and the workspace f32;
//   - embedding_grad: dy f32 or bf16, dtable f32;
//   - cross_entropy, cross_entropy_grad: logits (and dlogits, alike) f32 or
//     bf16, loss, dloss and the workspace f32.
// Each check tests the dtypes itself, then runs the CPU kernel's check on a
// view of the launch with bf16 read as f32, so every other error is phrased
// exactly as on the CPU.
//
// Where the CPU kernels report bad data at run time (an embedding id or a
// label out of range), the kernels report it in the device's error record
// (their last two arguments: the record and the launch's step), which the
// runtime turns into the same run error when the entry synchronizes;
// meanwhile embedding_grad skips such ids and cross_entropy gives NaN for
// such rows, touching nothing outside their tensors.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"

#include <algorithm>
#include <cmath>

namespace tailor::runtime::cuda {
namespace {

using cpu::expectDTypeIn;
using cpu::expectSameDType;

/// Threads of the elementwise (grid-stride) kernels.
constexpr unsigned kElementwiseThreads = 256;
/// The layout of tl::grad::SliceMap in the device code.
constexpr int kMaxSliceRank = 8;
struct SliceMap {
  int rank;
  long long extent[kMaxSliceRank];
  long long stride[kMaxSliceRank];
  long long base;
};
static_assert(sizeof(SliceMap) == 144, "must match tl::grad::SliceMap");
/// The norm gradients' column-sum kernel: 32 columns x 32 warps.
constexpr unsigned kNormWeightThreads = 1024;
constexpr int64_t kNormColumns = 32;
/// cross_entropy's reduction: one block of this many threads.
constexpr unsigned kReduceThreads = 1024;
/// Most blocks a row-per-block grid gets (grid-stride loops do the rest).
constexpr int64_t kMaxRowBlocks = int64_t(1) << 30;

const char *intSuffix(DType dtype) {
  return dtype == DType::I32 ? "i32" : "i64";
}

/// Threads of a block that owns one row of `n`: a power of two (the double
/// tree sums need one), about 8 to 16 elements per thread for long rows.
unsigned rowThreads(int64_t n) {
  return n <= 256     ? 64
         : n <= 1024  ? 128
         : n <= 4096  ? 256
         : n <= 16384 ? 512
                      : 1024;
}

unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, kMaxRowBlocks));
}

/// Operands in each group are f32 or bf16 and alike within the group (the
/// first operand of a group sets it); then the CPU kernel's check on the
/// f32 view. Operands the groups do not name must pass the CPU check as
/// they are. A launch with too few operands goes straight to the CPU check,
/// which reports the count.
std::string
checkFloatGroups(const char *kernel, const KernelCall &call,
                 std::initializer_list<std::initializer_list<size_t>> groups) {
  const KernelDef *cpu = findCpuKernel(kernel);
  for (const auto &group : groups) {
    for (size_t index : group) {
      if (index >= call.operands.size()) {
        return cpu->check(call);
      }
    }
  }
  for (const auto &group : groups) {
    size_t first = *group.begin();
    for (size_t index : group) {
      if (auto e = expectDTypeIn(call, index, {DType::F32, DType::BF16});
          !e.empty()) {
        return e;
      }
      if (auto e = expectSameDType(call, index, first); !e.empty()) {
        return e;
      }
    }
  }
  // bf16 where no group allows it fails the CPU check's f32 test: keep it
  // bf16 in the view for those operands.
  KernelCall view = withBf16AsF32(call);
  for (size_t i = 0; i < call.operands.size(); ++i) {
    bool grouped = false;
    for (const auto &group : groups) {
      grouped |= std::find(group.begin(), group.end(), i) != group.end();
    }
    if (!grouped) {
      view.operands[i].dtype = call.operands[i].dtype;
    }
  }
  return cpu->check(view);
}

std::string launch(const CudaCall &call, const std::string &function,
                   unsigned grid, unsigned block, void **args) {
  return call.context->launch(function.c_str(), Dim3{grid, 1, 1},
                              Dim3{block, 1, 1}, 0, args);
}

//===----------------------------------------------------------------------===//
// silu_grad, gelu_grad
//===----------------------------------------------------------------------===//

std::string checkSiluGrad(const KernelCall &call) {
  return checkFloatGroups("silu_grad", call, {{0, 1, 2}});
}
std::string checkGeluGrad(const KernelCall &call) {
  return checkFloatGroups("gelu_grad", call, {{0, 1, 2}});
}

std::string launchSiluGrad(const CudaCall &call) {
  const Tensor &x = call.operands[0];
  const void *xp = x.data, *dy = call.operands[1].data;
  void *dx = call.operands[2].data;
  long long n = x.numel();
  if (n == 0) {
    return "";
  }
  void *args[] = {&xp, &dy, &dx, &n};
  return launch(call, std::string("tailor_silu_grad_") + floatSuffix(x.dtype),
                blocksFor(n, kElementwiseThreads), kElementwiseThreads, args);
}

std::string launchGeluGrad(const CudaCall &call) {
  const Tensor &x = call.operands[0];
  const void *xp = x.data, *dy = call.operands[1].data;
  void *dx = call.operands[2].data;
  long long n = x.numel();
  int tanhApprox =
      call.attributes.getString("approximate", "none") == "tanh" ? 1 : 0;
  if (n == 0) {
    return "";
  }
  void *args[] = {&xp, &dy, &dx, &n, &tanhApprox};
  return launch(call, std::string("tailor_gelu_grad_") + floatSuffix(x.dtype),
                blocksFor(n, kElementwiseThreads), kElementwiseThreads, args);
}

//===----------------------------------------------------------------------===//
// softmax_grad
//===----------------------------------------------------------------------===//

std::string checkSoftmaxGrad(const KernelCall &call) {
  return checkFloatGroups("softmax_grad", call, {{0, 1, 2}});
}

std::string launchSoftmaxGrad(const CudaCall &call) {
  const Tensor &y = call.operands[0];
  const void *yp = y.data, *dy = call.operands[1].data;
  void *dx = call.operands[2].data;
  int64_t axis = call.attributes.getInt("axis", 0);
  long long outer = 1, len = y.shape[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d) {
    outer *= y.shape[d];
  }
  for (int64_t d = axis + 1; d < y.rank(); ++d) {
    inner *= y.shape[d];
  }
  if (len == 0 || outer * inner == 0) {
    return "";
  }
  const char *suffix = floatSuffix(y.dtype);
  if (inner == 1) {
    void *args[] = {&yp, &dy, &dx, &outer, &len};
    return launch(call, std::string("tailor_softmax_grad_rows_") + suffix,
                  rowBlocks(outer), rowThreads(len), args);
  }
  void *args[] = {&yp, &dy, &dx, &outer, &len, &inner};
  return launch(call, std::string("tailor_softmax_grad_columns_") + suffix,
                blocksFor(outer * inner, kElementwiseThreads),
                kElementwiseThreads, args);
}

//===----------------------------------------------------------------------===//
// rope_grad
//===----------------------------------------------------------------------===//

std::string checkRopeGrad(const KernelCall &call) {
  return checkFloatGroups("rope_grad", call, {{0, 3}, {1, 2}});
}

std::string launchRopeGrad(const CudaCall &call) {
  const Tensor &dy = call.operands[0], &cosT = call.operands[1];
  long long heads = dy.shape[1], t = dy.shape[2], d = dy.shape[3];
  long long pairs = dy.numel() / 2;
  if (pairs == 0) {
    return "";
  }
  const void *dyp = dy.data, *cp = cosT.data, *sp = call.operands[2].data;
  void *dx = call.operands[3].data;
  int perBatch = cosT.rank() == 3 ? 1 : 0;
  int interleaved = call.attributes.getInt("interleaved", 0) != 0 ? 1 : 0;
  void *args[] = {&dyp, &cp, &sp,       &dx,          &heads,
                  &t,   &d,  &perBatch, &interleaved, &pairs};
  return launch(call,
                std::string("tailor_rope_grad_") + floatSuffix(dy.dtype) + "_" +
                    floatSuffix(cosT.dtype),
                blocksFor(pairs, kElementwiseThreads), kElementwiseThreads,
                args);
}

//===----------------------------------------------------------------------===//
// rms_norm_grad, layer_norm_grad
//===----------------------------------------------------------------------===//

// Statistics and dx by rows, dw (and db) by column blocks; when dx aliases
// dy or x the column sums must read them first, so the rows kernel runs
// twice (statistics, then dx) around them.

template <bool Layer> std::string checkNormGrad(const KernelCall &call) {
  return checkFloatGroups(Layer ? "layer_norm_grad" : "rms_norm_grad", call,
                          {{0, 1, 3}, {2}});
}

template <bool Layer> std::string launchNormGrad(const CudaCall &call) {
  const char *name = Layer ? "layer_norm" : "rms_norm";
  const Tensor &dyT = call.operands[0], &xT = call.operands[1],
               &wT = call.operands[2];
  const void *dy = dyT.data, *x = xT.data, *w = wT.data;
  void *dx = call.operands[3].data, *dw = call.operands[4].data;
  void *db = Layer ? call.operands[5].data : nullptr;
  void *stats = call.operands[Layer ? 6 : 5].data;
  long long d = xT.shape.back();
  if (d == 0) {
    return "";
  }
  long long rows = xT.numel() / d;
  float eps = static_cast<float>(call.attributes.getFloat("epsilon", 0));
  std::string rowsFn = std::string("tailor_") + name + "_grad_rows_" +
                       floatSuffix(xT.dtype) + "_" + floatSuffix(wT.dtype);
  unsigned rowGrid = rowBlocks(rows), rowBlock = rowThreads(d);
  bool aliased = dx == dy || dx == x;

  auto rowsPass = [&](int mode) -> std::string {
    if (rows == 0) {
      return "";
    }
    void *args[] = {&dy, &x, &w, &dx, &stats, &rows, &d, &eps, &mode};
    return launch(call, rowsFn, rowGrid, rowBlock, args);
  };
  auto weightsPass = [&]() -> std::string {
    std::string fn = std::string("tailor_") + name + "_grad_weights_" +
                     floatSuffix(xT.dtype);
    unsigned grid = rowBlocks((d + kNormColumns - 1) / kNormColumns);
    if (Layer) {
      void *args[] = {&dy, &x, &stats, &dw, &db, &rows, &d};
      return launch(call, fn, grid, kNormWeightThreads, args);
    }
    void *args[] = {&dy, &x, &stats, &dw, &rows, &d};
    return launch(call, fn, grid, kNormWeightThreads, args);
  };

  if (auto e = rowsPass(aliased ? 0 : 1); !e.empty()) {
    return e;
  }
  if (auto e = weightsPass(); !e.empty()) {
    return e;
  }
  return aliased ? rowsPass(2) : "";
}

//===----------------------------------------------------------------------===//
// slice_grad
//===----------------------------------------------------------------------===//

std::string checkSliceGrad(const KernelCall &call) {
  if (auto e = checkFloatGroups("slice_grad", call, {{0, 1}}); !e.empty()) {
    return e;
  }
  if (call.operands[1].rank() > kMaxSliceRank) {
    return "slice_grad of rank " + std::to_string(call.operands[1].rank()) +
           " exceeds the cuda kernel's " + std::to_string(kMaxSliceRank);
  }
  return "";
}

std::string launchSliceGrad(const CudaCall &call) {
  const Tensor &dyT = call.operands[0], &dxT = call.operands[1];
  if (auto e = call.context->memsetZero(dxT.data, dxT.bytes()); !e.empty()) {
    return e;
  }
  long long n = dyT.numel();
  if (n == 0) {
    return "";
  }
  std::vector<int64_t> starts = call.attributes.getInts("starts");
  std::vector<int64_t> steps = call.attributes.getInts("steps");
  SliceMap map = {};
  map.rank = static_cast<int>(dxT.rank());
  int64_t extent = 1;
  for (int i = map.rank - 1; i >= 0; --i) {
    map.extent[i] = dyT.shape[i];
    map.stride[i] = steps[i] * extent;
    map.base += starts[i] * extent;
    extent *= dxT.shape[i];
  }
  const void *dy = dyT.data;
  void *dx = dxT.data;
  void *args[] = {&dy, &dx, &n, &map};
  return launch(call,
                std::string("tailor_slice_grad_") + floatSuffix(dyT.dtype),
                blocksFor(n, kElementwiseThreads), kElementwiseThreads, args);
}

//===----------------------------------------------------------------------===//
// embedding_grad
//===----------------------------------------------------------------------===//

std::string checkEmbeddingGrad(const KernelCall &call) {
  return checkFloatGroups("embedding_grad", call, {{0}});
}

std::string launchEmbeddingGrad(const CudaCall &call) {
  const Tensor &dyT = call.operands[0], &ids = call.operands[1],
               &table = call.operands[2];
  if (call.attributes.getInt("accumulate", 0) == 0) {
    if (auto e = call.context->memsetZero(table.data, table.bytes());
        !e.empty()) {
      return e;
    }
  }
  long long n = ids.numel(), vocab = table.shape[0], d = table.shape[1];
  if (n == 0 || d == 0) {
    return "";
  }
  const void *dy = dyT.data, *idp = ids.data;
  void *dt = table.data;
  unsigned threads = static_cast<unsigned>(
      std::clamp<int64_t>((d + 31) / 32 * 32, 32, kElementwiseThreads));
  DeviceErrorRecord *record = call.context->errorRecord();
  int site = call.step;
  void *args[] = {&dy, &idp, &dt, &n, &vocab, &d, &record, &site};
  return launch(call,
                std::string("tailor_embedding_grad_") + floatSuffix(dyT.dtype) +
                    "_" + intSuffix(ids.dtype),
                rowBlocks(n), threads, args);
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

std::string checkDropout(const KernelCall &call) {
  return checkFloatGroups("dropout", call, {{0, 2}});
}

std::string launchDropout(const CudaCall &call) {
  const Tensor &xT = call.operands[0];
  void *y = call.operands[2].data;
  double p = call.attributes.getFloat("p", 0);
  if (p == 0) {
    return xT.data == y ? "" : call.context->copy(y, xT.data, xT.bytes());
  }
  long long n = xT.numel();
  if (n == 0) {
    return "";
  }
  // The CPU kernel's constants, formed the same way.
  unsigned long long threshold =
      static_cast<unsigned long long>(std::ceil(std::ldexp(p, 53)));
  float scale = 1.0f / static_cast<float>(1.0 - p);
  long long salt = call.attributes.getInt("salt", 0);
  const void *x = xT.data, *seed = call.operands[1].data;
  void *args[] = {&x, &seed, &y, &n, &salt, &threshold, &scale};
  return launch(call, std::string("tailor_dropout_") + floatSuffix(xT.dtype),
                blocksFor(n, kElementwiseThreads), kElementwiseThreads, args);
}

//===----------------------------------------------------------------------===//
// cross_entropy, cross_entropy_grad
//===----------------------------------------------------------------------===//

/// 0 mean, 1 sum, 2 none, as the device code numbers them.
int reductionCode(const Attributes &attributes) {
  std::string r = attributes.getString("reduction", "mean");
  return r == "sum" ? 1 : r == "none" ? 2 : 0;
}

std::string checkCrossEntropy(const KernelCall &call) {
  return checkFloatGroups("cross_entropy", call, {{0}});
}
std::string checkCrossEntropyGrad(const KernelCall &call) {
  return checkFloatGroups("cross_entropy_grad", call, {{0, 3}});
}

std::string launchCrossEntropy(const CudaCall &call) {
  const Tensor &logits = call.operands[0], &labels = call.operands[1];
  long long n = logits.shape[0], v = logits.shape[1];
  long long ignore = call.attributes.getInt("ignore_index", -100);
  int reduction = reductionCode(call.attributes);
  void *loss = call.operands[2].data;
  void *rowLoss = reduction == 2 ? loss : call.operands[3].data;
  const void *x = logits.data, *lab = labels.data;
  if (n > 0) {
    DeviceErrorRecord *record = call.context->errorRecord();
    int site = call.step;
    void *args[] = {&x, &lab, &rowLoss, &n, &v, &ignore, &record, &site};
    if (auto e = launch(call,
                        std::string("tailor_cross_entropy_rows_") +
                            floatSuffix(logits.dtype) + "_" +
                            intSuffix(labels.dtype),
                        rowBlocks(n), rowThreads(v), args);
        !e.empty()) {
      return e;
    }
  }
  if (reduction == 2) {
    return "";
  }
  const void *rows = rowLoss;
  int mean = reduction == 0 ? 1 : 0;
  void *args[] = {&rows, &lab, &loss, &n, &ignore, &mean};
  return launch(call,
                std::string("tailor_cross_entropy_reduce_") +
                    intSuffix(labels.dtype),
                1, kReduceThreads, args);
}

std::string launchCrossEntropyGrad(const CudaCall &call) {
  const Tensor &logits = call.operands[0], &labels = call.operands[1];
  long long n = logits.shape[0], v = logits.shape[1];
  if (n == 0 || v == 0) {
    return "";
  }
  long long ignore = call.attributes.getInt("ignore_index", -100);
  int reduction = reductionCode(call.attributes);
  const void *x = logits.data, *lab = labels.data,
             *dloss = call.operands[2].data;
  void *dx = call.operands[3].data;
  unsigned threads = rowThreads(v);
  // Every block counts the labels for the mean, so the grid is a few
  // resident blocks per SM looping over rows rather than one block a row.
  int64_t grid = n;
  if (reduction == 0) {
    int64_t resident = std::max<int64_t>(1, 2048 / threads);
    grid = std::min<int64_t>(n, std::max(1, call.context->multiprocessors()) *
                                    resident);
  }
  DeviceErrorRecord *record = call.context->errorRecord();
  int site = call.step;
  void *args[] = {&x, &lab,    &dloss,     &dx,     &n,
                  &v, &ignore, &reduction, &record, &site};
  return launch(call,
                std::string("tailor_cross_entropy_grad_") +
                    floatSuffix(logits.dtype) + "_" + intSuffix(labels.dtype),
                rowBlocks(grid), threads, args);
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

const char *const kSiluGradFunctions[] = {"tailor_silu_grad_f32",
                                          "tailor_silu_grad_bf16", nullptr};
const char *const kGeluGradFunctions[] = {"tailor_gelu_grad_f32",
                                          "tailor_gelu_grad_bf16", nullptr};
const char *const kSoftmaxGradFunctions[] = {
    "tailor_softmax_grad_rows_f32", "tailor_softmax_grad_rows_bf16",
    "tailor_softmax_grad_columns_f32", "tailor_softmax_grad_columns_bf16",
    nullptr};
const char *const kRopeGradFunctions[] = {
    "tailor_rope_grad_f32_f32", "tailor_rope_grad_f32_bf16",
    "tailor_rope_grad_bf16_f32", "tailor_rope_grad_bf16_bf16", nullptr};
const char *const kRmsNormGradFunctions[] = {
    "tailor_rms_norm_grad_rows_f32_f32",
    "tailor_rms_norm_grad_rows_f32_bf16",
    "tailor_rms_norm_grad_rows_bf16_f32",
    "tailor_rms_norm_grad_rows_bf16_bf16",
    "tailor_rms_norm_grad_weights_f32",
    "tailor_rms_norm_grad_weights_bf16",
    nullptr};
const char *const kLayerNormGradFunctions[] = {
    "tailor_layer_norm_grad_rows_f32_f32",
    "tailor_layer_norm_grad_rows_f32_bf16",
    "tailor_layer_norm_grad_rows_bf16_f32",
    "tailor_layer_norm_grad_rows_bf16_bf16",
    "tailor_layer_norm_grad_weights_f32",
    "tailor_layer_norm_grad_weights_bf16",
    nullptr};
const char *const kSliceGradFunctions[] = {"tailor_slice_grad_f32",
                                           "tailor_slice_grad_bf16", nullptr};
const char *const kEmbeddingGradFunctions[] = {
    "tailor_embedding_grad_f32_i32", "tailor_embedding_grad_f32_i64",
    "tailor_embedding_grad_bf16_i32", "tailor_embedding_grad_bf16_i64",
    nullptr};
const char *const kDropoutFunctions[] = {"tailor_dropout_f32",
                                         "tailor_dropout_bf16", nullptr};
const char *const kCrossEntropyFunctions[] = {
    "tailor_cross_entropy_rows_f32_i32",
    "tailor_cross_entropy_rows_f32_i64",
    "tailor_cross_entropy_rows_bf16_i32",
    "tailor_cross_entropy_rows_bf16_i64",
    "tailor_cross_entropy_reduce_i32",
    "tailor_cross_entropy_reduce_i64",
    nullptr};
const char *const kCrossEntropyGradFunctions[] = {
    "tailor_cross_entropy_grad_f32_i32", "tailor_cross_entropy_grad_f32_i64",
    "tailor_cross_entropy_grad_bf16_i32", "tailor_cross_entropy_grad_bf16_i64",
    nullptr};

} // namespace

void addGradientCudaKernels(std::vector<CudaKernelDef> &table) {
  table.push_back(
      {"silu_grad", 3, checkSiluGrad, launchSiluGrad, kSiluGradFunctions});
  table.push_back(
      {"gelu_grad", 3, checkGeluGrad, launchGeluGrad, kGeluGradFunctions});
  table.push_back({"softmax_grad", 3, checkSoftmaxGrad, launchSoftmaxGrad,
                   kSoftmaxGradFunctions});
  table.push_back(
      {"rope_grad", 4, checkRopeGrad, launchRopeGrad, kRopeGradFunctions});
  table.push_back({"rms_norm_grad", 6, checkNormGrad<false>,
                   launchNormGrad<false>, kRmsNormGradFunctions});
  table.push_back({"layer_norm_grad", 7, checkNormGrad<true>,
                   launchNormGrad<true>, kLayerNormGradFunctions});
  table.push_back(
      {"slice_grad", 2, checkSliceGrad, launchSliceGrad, kSliceGradFunctions});
  table.push_back({"embedding_grad", 3, checkEmbeddingGrad, launchEmbeddingGrad,
                   kEmbeddingGradFunctions});
  table.push_back(
      {"dropout", 3, checkDropout, launchDropout, kDropoutFunctions});
  table.push_back({"cross_entropy", 4, checkCrossEntropy, launchCrossEntropy,
                   kCrossEntropyFunctions});
  table.push_back({"cross_entropy_grad", 4, checkCrossEntropyGrad,
                   launchCrossEntropyGrad, kCrossEntropyGradFunctions});
}

} // namespace tailor::runtime::cuda
