//===- KernelTable.h - helpers shared by the CPU kernel files ---*- C++ -*-===//
//
// Private to runtime/cpu: each kernel file appends its KernelDefs to the table
// through one add*Kernels function, and shares the operand checks (which
// phrase every error the same way), the broadcast walker (binary kernels,
// matmul batches, `broadcast`) and the BLAS thread guard.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_KERNELTABLE_H
#define TAILOR_RUNTIME_CPU_KERNELTABLE_H

#include "runtime/cpu/Kernel.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tailor::quant {
struct QuantSpec;
} // namespace tailor::quant

namespace tailor::runtime::cpu {

void addElementwiseKernels(std::vector<KernelDef> &table);
void addBinaryKernels(std::vector<KernelDef> &table);
void addFusedKernels(std::vector<KernelDef> &table);
void addReductionKernels(std::vector<KernelDef> &table);
void addNormalizationKernels(std::vector<KernelDef> &table);
void addLinearAlgebraKernels(std::vector<KernelDef> &table);
void addTransformerKernels(std::vector<KernelDef> &table);
void addDataMovementKernels(std::vector<KernelDef> &table);
void addIndexingKernels(std::vector<KernelDef> &table);
void addGradientKernels(std::vector<KernelDef> &table);
void addElementwiseGradientKernels(std::vector<KernelDef> &table);
void addLossKernels(std::vector<KernelDef> &table);
void addOptimizerKernels(std::vector<KernelDef> &table);
void addCompressionKernels(std::vector<KernelDef> &table);
void addGenerationKernels(std::vector<KernelDef> &table);
void addPipelineKernels(std::vector<KernelDef> &table);
/// lowrank_init's value at row-major position k (CompressionKernels.cpp).
float lowRankInitValue(int64_t k);

//===----------------------------------------------------------------------===//
// Checks. Each returns "" or a lowercase message naming the operand or
// attribute; kernels return the first non-empty one.
//===----------------------------------------------------------------------===//

/// "[2, 3, 4]".
std::string shapeString(const std::vector<int64_t> &shape);

/// "expected 3 operands, got 2".
std::string expectOperandCount(const KernelCall &call, size_t count);
/// Accepts between `min` and `max` operands.
std::string expectOperandCount(const KernelCall &call, size_t min, size_t max);
/// "operand 1 must be f32, got i64".
std::string expectDType(const KernelCall &call, size_t index, DType dtype);
/// "operand 1 must be f32 or f64, got i64" for any list of dtypes.
std::string expectDTypeIn(const KernelCall &call, size_t index,
                          std::initializer_list<DType> dtypes);
/// Operand `index` has the dtype of operand `like`.
std::string expectSameDType(const KernelCall &call, size_t index, size_t like);
/// Every operand f32.
std::string expectAllF32(const KernelCall &call);
/// The common check of an f32/f64 map x -> y: two operands, a float input,
/// and an output of the same dtype and shape.
std::string expectFloatMap(const KernelCall &call);
/// "operand 2 must have shape [2, 3], got [3, 2]".
std::string expectShape(const KernelCall &call, size_t index,
                        const std::vector<int64_t> &shape);
/// "operand 0 must have rank 4, got 3".
std::string expectRank(const KernelCall &call, size_t index, int64_t rank);
std::string expectMinRank(const KernelCall &call, size_t index, int64_t rank);
/// Operand `index` is a rank-0 tensor of `dtype`.
std::string expectScalar(const KernelCall &call, size_t index, DType dtype);
/// Operand `index` broadcasts to `shape` under NumPy rules.
std::string expectBroadcastsTo(const KernelCall &call, size_t index,
                               const std::vector<int64_t> &shape);
/// Whether `from` broadcasts to `to` (right-aligned; each extent equal or 1).
bool broadcastsTo(const std::vector<int64_t> &from,
                  const std::vector<int64_t> &to);

/// Int attribute `name` in [lo, hi]; absent reads as `fallback` when
/// `required` is false. Stores it in `value`.
std::string expectIntAttr(const KernelCall &call, const char *name, int64_t lo,
                          int64_t hi, bool required, int64_t fallback,
                          int64_t &value);
/// Float (or int) attribute `name`; absent reads as `fallback` when
/// `required` is false.
std::string expectFloatAttr(const KernelCall &call, const char *name,
                            bool required, double fallback, double &value);
/// Float attribute `name`, required, in [lo, hi) (NaN fails):
/// "attribute 'p' is 1, expected a value in [0, 1)".
std::string expectFloatInRange(const KernelCall &call, const char *name,
                               double lo, double hi, double &value);
/// Ints attribute `name` with exactly `size` entries each in [lo, hi].
std::string expectIntsAttr(const KernelCall &call, const char *name,
                           size_t size, int64_t lo, int64_t hi,
                           std::vector<int64_t> &value);
/// The GEMM epilogue attributes of linear and linear_quantized: `alpha`
/// (float), `accumulate` and `addend` (0/1). `seeded`: the launch has an
/// operand 2 (a bias, or with `addend` a residual); a bias excludes
/// accumulating, and `addend` needs that operand. Stores `addend`.
std::string expectGemmEpilogue(const KernelCall &call, bool seeded,
                               int64_t &addend);
/// Operands from `firstOutput` on share no byte with any other operand
/// (null data, as when a plan is only verified, is not checked): for
/// kernels that copy with memcpy, which must never overlap, whatever a
/// plan file says.
std::string expectOutputsApart(const KernelCall &call, size_t firstOutput);
/// The first non-empty message of checks already evaluated: each must be
/// safe to run once the checks before the list have passed.
std::string firstError(std::initializer_list<std::string> errors);

/// The value of a rank-0 operand (one that expectScalar accepted).
template <typename T> T scalarOperand(const KernelCall &call, size_t index) {
  return *call.operands[index].as<T>();
}

//===----------------------------------------------------------------------===//
// Pieces one kernel file lends another.
//===----------------------------------------------------------------------===//

/// Sets the BLAS to `threads` threads for the guard's lifetime and restores
/// the previous count after (LinearAlgebraKernels.cpp). Kernels that call
/// the BLAS from several pool workers at once hold one with 1 thread, so
/// the BLAS neither oversubscribes the cores nor serializes the calls on
/// its own thread pool.
class ScopedBlasThreads {
public:
  explicit ScopedBlasThreads(int threads);
  ~ScopedBlasThreads();
  ScopedBlasThreads(const ScopedBlasThreads &) = delete;
  ScopedBlasThreads &operator=(const ScopedBlasThreads &) = delete;

private:
  int previous;
};

/// A quantized launch's weight and direction (`linear_quantized`,
/// `dequantize`), decoded from its attributes (the names of
/// runtime/cpu/README.md; absent ones take QuantSpec's defaults; flags are
/// true when nonzero) and checked with quant::checkSpec
/// (QuantizedLinearKernels.cpp; the CUDA launchers decode the same way).
std::string decodeQuantizedLaunch(const KernelCall &call,
                                  quant::QuantSpec &spec,
                                  bool &transposeWeight);

/// dx = y (dy - dot(dy, y)) for one row of `n`: the softmax VJP
/// (ElementwiseGradientKernels.cpp), which attention_grad also applies to
/// its probability blocks. The dot product accumulates in f64; dx may be dy.
void softmaxGradRow(const float *y, const float *dy, float *dx, int64_t n);

//===----------------------------------------------------------------------===//
// Broadcast walking.
//===----------------------------------------------------------------------===//

/// The index space of an output with up to three inputs broadcast into it,
/// after dropping extent-1 dimensions and merging dimensions every operand
/// walks contiguously: `[8, 1, 4096] + [4096]` becomes one [8, 4096] walk
/// with strides {4096, 1} and {0, 1}. The innermost stride of each input is
/// then 0 (broadcast) or 1 (contiguous), which is what the inner loops
/// specialize on.
struct BroadcastPlan {
  static constexpr int kMaxInputs = 3;
  std::vector<int64_t> extents;
  /// strides[d][i]: elements input i advances per step of dimension d.
  std::vector<std::array<int64_t, kMaxInputs>> strides;

  BroadcastPlan(const std::vector<int64_t> &out,
                std::initializer_list<const std::vector<int64_t> *> inputs);

  int64_t innerStride(int input) const { return strides.back()[input]; }

  /// Calls run(offsets, outOffset, length) for each maximal run of the
  /// innermost dimension inside output elements [begin, end), where
  /// offsets[i] is input i's element offset at the run's start.
  template <typename Fn>
  void forEachRun(int64_t begin, int64_t end, Fn &&run) const;
};

template <typename Fn>
void BroadcastPlan::forEachRun(int64_t begin, int64_t end, Fn &&run) const {
  const int rank = static_cast<int>(extents.size());
  // A fixed bound keeps the odometer on the stack; ranks above it take a
  // heap copy, which only pathological plans reach.
  constexpr int kStackRank = 16;
  int64_t stackIndex[kStackRank];
  std::vector<int64_t> heapIndex;
  int64_t *index = stackIndex;
  if (rank > kStackRank) {
    heapIndex.resize(rank);
    index = heapIndex.data();
  }
  std::array<int64_t, kMaxInputs> offsets{};
  int64_t rest = begin;
  for (int d = rank - 1; d >= 0; --d) {
    index[d] = rest % extents[d];
    rest /= extents[d];
    for (int i = 0; i < kMaxInputs; ++i) {
      offsets[i] += index[d] * strides[d][i];
    }
  }
  const int64_t inner = extents[rank - 1];
  int64_t pos = begin;
  while (pos < end) {
    int64_t length = std::min(inner - index[rank - 1], end - pos);
    run(offsets, pos, length);
    pos += length;
    if (pos >= end) {
      break;
    }
    // The run ended the innermost dimension: carry into the outer ones.
    for (int i = 0; i < kMaxInputs; ++i) {
      offsets[i] -= index[rank - 1] * strides[rank - 1][i];
    }
    index[rank - 1] = 0;
    for (int d = rank - 2; d >= 0; --d) {
      ++index[d];
      for (int i = 0; i < kMaxInputs; ++i) {
        offsets[i] += strides[d][i];
      }
      if (index[d] < extents[d]) {
        break;
      }
      for (int i = 0; i < kMaxInputs; ++i) {
        offsets[i] -= index[d] * strides[d][i];
      }
      index[d] = 0;
    }
  }
}

/// Elements per parallelFor chunk for streaming kernels: enough that a
/// chunk's work (tens of microseconds) dwarfs the pool's hand-off.
constexpr int64_t kElementwiseGrain = 32768;
/// The same for kernels with transcendental math per element.
constexpr int64_t kTranscendentalGrain = 8192;

/// Runs fn(begin, end, worker) over [0, n) on the call's pool, or inline
/// when it has none.
template <typename Fn>
void parallelFor(const KernelCall &call, int64_t n, int64_t grain, Fn &&fn,
                 int maxWorkers = 0) {
  if (n <= 0) {
    return;
  }
  if (!call.pool) {
    fn(int64_t(0), n, 0);
    return;
  }
  call.pool->parallelFor(n, grain, fn, maxWorkers);
}

/// Zeroes `n` floats on the pool.
inline void parallelZero(const KernelCall &call, float *p, int64_t n) {
  parallelFor(call, n, kElementwiseGrain, [&](int64_t begin, int64_t end, int) {
    std::memset(p + begin, 0, (end - begin) * sizeof(float));
  });
}

} // namespace tailor::runtime::cpu

#endif // TAILOR_RUNTIME_CPU_KERNELTABLE_H
