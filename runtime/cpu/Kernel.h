//===- Kernel.h - the CPU backend's kernel interface ------------*- C++ -*-===//
//
// A plan's launches name kernels by string (`rms_norm`, `linear`, ...). The
// CPU backend keeps one table of them: each entry checks a launch once, when
// a session is created (operand count, dtypes, shapes, attributes), and runs
// it on every step. Kernels see dense row-major tensors in the session's
// arenas and never allocate: scratch memory is a workspace operand the plan
// sized.
//
// The operand conventions (inputs, then outputs, then workspace) are listed
// per kernel in runtime/cpu/README.md; codegen/CpuKernels.cpp is the compiler
// side that must agree with them.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_KERNEL_H
#define TAILOR_RUNTIME_CPU_KERNEL_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tailor::runtime {

/// Element types, numbered as the plan's DType (and the C API's tailor_dtype).
enum class DType : int8_t {
  F32 = 0, F64, F16, BF16, I64, I32, I16, I8, U8, Bool
};

/// Bytes per element (Bool is one byte).
size_t dtypeSize(DType dtype);
/// "f32", "i64", "bool", ...
const char *dtypeName(DType dtype);

/// A dense row-major tensor inside an arena.
struct Tensor {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) {
      n *= d;
    }
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// A launch's attributes, decoded once from the plan.
struct Attribute {
  enum class Kind { Int, Float, Ints, Floats, String } kind = Kind::Int;
  std::string name;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string s;
};

class Attributes {
public:
  Attributes() = default;
  explicit Attributes(std::vector<Attribute> attrs) : attrs(std::move(attrs)) {}

  /// The attribute called `name`, or null.
  const Attribute *find(std::string_view name) const;
  /// Typed getters with a default for absent attributes. An Int attribute
  /// reads as a float too.
  int64_t getInt(std::string_view name, int64_t fallback) const;
  double getFloat(std::string_view name, double fallback) const;
  std::vector<int64_t> getInts(std::string_view name) const;
  std::string getString(std::string_view name, std::string fallback) const;

private:
  std::vector<Attribute> attrs;
};

/// A fixed set of worker threads for data-parallel loops.
class ThreadPool {
public:
  /// `threads` >= 1 counts the calling thread: 1 runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return threadCount; }

  /// Calls fn(begin, end) over disjoint chunks covering [0, n), chunks of at
  /// least `grain` items, on up to min(size(), maxWorkers) threads; returns
  /// when all are done. `maxWorkers` 0 means size(). Each call gets a distinct
  /// `worker` index in [0, min(size(), maxWorkers)) for indexing workspaces.
  void parallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t begin, int64_t end,
                                            int worker)> &fn,
                   int maxWorkers = 0);

private:
  struct Impl;
  Impl *impl;
  int threadCount;
};

/// One launch as a kernel sees it.
struct KernelCall {
  std::vector<Tensor> operands;
  Attributes attributes;
  ThreadPool *pool = nullptr;
};

/// A CPU kernel. `check` runs once per launch when a session is created and
/// returns "" or what is wrong ("operand 2 must be f32, got i64"); `run`
/// executes it and returns "" or a data error ("token id 70000 is out of
/// range [0, 32000)"). Neither throws.
struct KernelDef {
  const char *name;
  /// Operand count, or -1 when variadic (concat, split, linear's bias).
  int arity;
  std::string (*check)(const KernelCall &call);
  std::string (*run)(const KernelCall &call);
};

/// The kernel called `name`, or null.
const KernelDef *findCpuKernel(std::string_view name);

/// Every CPU kernel, for listing and tests.
const std::vector<KernelDef> &cpuKernels();

/// Sets the thread count of the BLAS the GEMM kernels use.
void setBlasThreads(int threads);

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_CPU_KERNEL_H
