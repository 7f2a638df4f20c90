//===- SimtEmulator.h - CUDA device code on the CPU ------------*- C++ -*-===//
//
// With TAILOR_SIMT_EMULATOR defined, codegen/cuda/Device.cuh includes this
// header instead of relying on nvcc, so the device files (codegen/cuda/*.cu)
// compile as host C++17 and the CPU tests run them: the CUDA keywords become
// host spellings, the builtin variables (threadIdx, blockIdx, blockDim,
// gridDim) are globals the scheduler sets, and every thread of a block runs
// as a fiber that yields only at __syncthreads() and at warp collectives
// (shuffles, votes, __syncwarp, tl::mmaBf16, tl::mmaHalf). Between those
// points a thread runs alone, so atomics are plain read-modify-writes.
//
// Why fibers and not OS threads: barriers and warp collectives then cost a
// context switch of a few nanoseconds instead of a futex wake, tests stay
// deterministic, and a barrier that can never complete is seen (no fiber can
// run) and reported as an error instead of hanging the test.
//
// What it checks beyond what a GPU would tolerate silently: a barrier some
// threads of the block never reach (because they returned early) is a
// deadlock; a warp collective whose mask excludes the calling lane or names
// lanes that do not exist is an error; shuffles that read a lane outside the
// mask get a poison value; dynamic shared memory starts as 0xCD bytes; odd
// blocks run their threads in reverse order, so a missing barrier shows up
// whichever side of it the reader is on.
//
// Limits: blocks run one after another on the calling OS thread; launches
// from several OS threads are serialized by a lock, and device code must not
// launch (no dynamic parallelism). `__shared__` is `static`: correct because
// blocks never overlap, and one variable per template instantiation, as on a
// GPU. Static shared memory keeps the previous block's values (a GPU gives
// garbage); only dynamic shared memory is poisoned.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_CUDA_SIMTEMULATOR_H
#define TAILOR_CODEGEN_CUDA_SIMTEMULATOR_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <string>
#include <type_traits>
#include <utility>

// nvcc compares signed and unsigned builtins without complaint (`threadIdx.x
// < n`); device code must build warning-free both ways, so the host compiler
// gets the same leniency in emulated translation units.
#pragma GCC diagnostic ignored "-Wsign-compare"

//===----------------------------------------------------------------------===//
// CUDA keywords as host C++.
//===----------------------------------------------------------------------===//

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
// One block runs at a time, so a function-scope static is that block's
// shared memory (one per template instantiation, as on a GPU).
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// __restrict__ is a GNU spelling g++ and clang already accept.

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1)
      : x(x), y(y), z(z) {}
};

// CUDA's vector types, with their alignment (vectorized loads rely on it).
#define TL_EMU_VECTOR2(T, name, align)                                         \
  struct alignas(align) name {                                                 \
    T x, y;                                                                    \
  };                                                                           \
  inline name make_##name(T x, T y) { return name{x, y}; }
#define TL_EMU_VECTOR4(T, name, align)                                         \
  struct alignas(align) name {                                                 \
    T x, y, z, w;                                                              \
  };                                                                           \
  inline name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }
TL_EMU_VECTOR2(float, float2, 8)
TL_EMU_VECTOR4(float, float4, 16)
TL_EMU_VECTOR2(int, int2, 8)
TL_EMU_VECTOR4(int, int4, 16)
TL_EMU_VECTOR2(unsigned, uint2, 8)
TL_EMU_VECTOR4(unsigned, uint4, 16)
TL_EMU_VECTOR2(unsigned short, ushort2, 4)
TL_EMU_VECTOR4(unsigned short, ushort4, 8)
TL_EMU_VECTOR2(double, double2, 16)
#undef TL_EMU_VECTOR2
#undef TL_EMU_VECTOR4
struct float3 {
  float x, y, z;
};
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) {
  return {x, y, z};
}

/// The builtin variables of the running thread, set by the scheduler before
/// it switches to a thread's fiber.
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
constexpr int warpSize = 32;

namespace tl::emu {

using Thunk = void (*)(void **args);

//===----------------------------------------------------------------------===//
// The kernel registry: TL_REGISTER(fn) adds fn under its name.
//===----------------------------------------------------------------------===//

template <typename Fn> struct Unpacker;
template <typename... P> struct Unpacker<void (*)(P...)> {
  static constexpr size_t arity = sizeof...(P);
  template <auto F, size_t... I>
  static void call(void **args, std::index_sequence<I...>) {
    F(*static_cast<std::remove_cv_t<std::remove_reference_t<P>> *>(args[I])...);
  }
};
template <typename... P>
struct Unpacker<void (*)(P...) noexcept> : Unpacker<void (*)(P...)> {};

/// Calls F with args[i] read as its i-th parameter, as cudaLaunchKernel
/// reads a kernel's argument array.
template <auto F> void thunk(void **args) {
  using Fn = decltype(F);
  Unpacker<Fn>::template call<F>(
      args, std::make_index_sequence<Unpacker<Fn>::arity>());
}

struct Registrar {
  Registrar(const char *name, Thunk fn);
};

/// The entry point registered as `name`, or null.
Thunk findKernel(const char *name);

/// Runs fn over `grid` blocks of `block` threads with `sharedBytes` of
/// dynamic shared memory; returns "" or what went wrong (a deadlock, a bad
/// collective, __trap(), an invalid launch configuration). Blocks run in
/// order on the calling thread.
std::string launch(Thunk fn, dim3 grid, dim3 block, size_t sharedBytes,
                   void **args);

/// "" or why CUDA would refuse the configuration (cudaLaunchKernel's
/// synchronous errors); launch() checks it too.
std::string checkLaunch(dim3 grid, dim3 block, size_t sharedBytes);

//===----------------------------------------------------------------------===//
// What the device-side builtins call.
//===----------------------------------------------------------------------===//

enum class WarpOp : uint8_t {
  Sync,
  ShflIdx,
  ShflUp,
  ShflDown,
  ShflXor,
  Ballot,
  Any,
  All,
  Mma,
  MmaHalf
};

/// The running block's dynamic shared memory.
extern unsigned char *dynamicSharedBase;

void syncThreads();
/// A warp collective: every lane of `mask` arrives with its own value and
/// argument, and each gets back the op's result.
uint64_t warpCollective(WarpOp op, unsigned mask, uint64_t value, int arg,
                        int width);
/// One lane's part of an mma: `half` says the fragments hold IEEE halves
/// (tl::mmaHalf) rather than bf16 (tl::mmaBf16).
void mma(float c[4], const unsigned a[4], const unsigned b[2], bool half);
[[noreturn]] void trap(const char *what);

template <typename T> uint64_t toBits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T> T fromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

} // namespace tl::emu

namespace tl {
/// The running block's dynamic shared memory (the launch's sharedBytes,
/// 16-byte aligned, initially 0xCD bytes: a GPU does not clear it).
template <typename T> inline T *dynamicShared() {
  return reinterpret_cast<T *>(::tl::emu::dynamicSharedBase);
}
/// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32 over the warp (Device.cuh
/// documents the fragments): every lane of a full warp must call it.
inline void mmaBf16(float c[4], const unsigned a[4], const unsigned b[2]) {
  ::tl::emu::mma(c, a, b, /*half=*/false);
}
/// mma.sync.m16n8k16.row.col.f32.f16.f16.f32: the same fragments holding
/// IEEE halves (what sm_75's two m16n8k8 compute too).
inline void mmaHalf(float c[4], const unsigned a[4], const unsigned b[2]) {
  ::tl::emu::mma(c, a, b, /*half=*/true);
}
} // namespace tl

//===----------------------------------------------------------------------===//
// Synchronization, shuffles and votes.
//===----------------------------------------------------------------------===//

inline void __syncthreads() { ::tl::emu::syncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::tl::emu::warpCollective(::tl::emu::WarpOp::Sync, mask, 0, 0, 32);
}

#define TL_EMU_SHUFFLES(T)                                                     \
  inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {    \
    return ::tl::emu::fromBits<T>(                                             \
        ::tl::emu::warpCollective(::tl::emu::WarpOp::ShflIdx, mask,            \
                                  ::tl::emu::toBits(var), srcLane, width));    \
  }                                                                            \
  inline T __shfl_up_sync(unsigned mask, T var, unsigned delta,                \
                          int width = 32) {                                    \
    return ::tl::emu::fromBits<T>(                                             \
        ::tl::emu::warpCollective(::tl::emu::WarpOp::ShflUp, mask,             \
                                  ::tl::emu::toBits(var), int(delta), width)); \
  }                                                                            \
  inline T __shfl_down_sync(unsigned mask, T var, unsigned delta,              \
                            int width = 32) {                                  \
    return ::tl::emu::fromBits<T>(                                             \
        ::tl::emu::warpCollective(::tl::emu::WarpOp::ShflDown, mask,           \
                                  ::tl::emu::toBits(var), int(delta), width)); \
  }                                                                            \
  inline T __shfl_xor_sync(unsigned mask, T var, int laneMask,                 \
                           int width = 32) {                                   \
    return ::tl::emu::fromBits<T>(                                             \
        ::tl::emu::warpCollective(::tl::emu::WarpOp::ShflXor, mask,            \
                                  ::tl::emu::toBits(var), laneMask, width));   \
  }
TL_EMU_SHUFFLES(int)
TL_EMU_SHUFFLES(unsigned)
TL_EMU_SHUFFLES(long)
TL_EMU_SHUFFLES(unsigned long)
TL_EMU_SHUFFLES(long long)
TL_EMU_SHUFFLES(unsigned long long)
TL_EMU_SHUFFLES(float)
TL_EMU_SHUFFLES(double)
#undef TL_EMU_SHUFFLES

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return unsigned(::tl::emu::warpCollective(::tl::emu::WarpOp::Ballot, mask,
                                            predicate != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int predicate) {
  return int(::tl::emu::warpCollective(::tl::emu::WarpOp::Any, mask,
                                       predicate != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int predicate) {
  return int(::tl::emu::warpCollective(::tl::emu::WarpOp::All, mask,
                                       predicate != 0, 0, 32));
}

//===----------------------------------------------------------------------===//
// Atomics: threads of a block never run at the same time, so plain updates.
//===----------------------------------------------------------------------===//

#define TL_EMU_ATOMIC_ADD(T)                                                   \
  inline T atomicAdd(T *address, T value) {                                    \
    T old = *address;                                                          \
    *address = old + value;                                                    \
    return old;                                                                \
  }                                                                            \
  inline T atomicExch(T *address, T value) {                                   \
    T old = *address;                                                          \
    *address = value;                                                          \
    return old;                                                                \
  }
TL_EMU_ATOMIC_ADD(int)
TL_EMU_ATOMIC_ADD(unsigned)
TL_EMU_ATOMIC_ADD(unsigned long long)
TL_EMU_ATOMIC_ADD(float)
TL_EMU_ATOMIC_ADD(double)
#undef TL_EMU_ATOMIC_ADD

#define TL_EMU_ATOMIC_INT(T)                                                   \
  inline T atomicSub(T *address, T value) {                                    \
    T old = *address;                                                          \
    *address = old - value;                                                    \
    return old;                                                                \
  }                                                                            \
  inline T atomicMax(T *address, T value) {                                    \
    T old = *address;                                                          \
    *address = old > value ? old : value;                                      \
    return old;                                                                \
  }                                                                            \
  inline T atomicMin(T *address, T value) {                                    \
    T old = *address;                                                          \
    *address = old < value ? old : value;                                      \
    return old;                                                                \
  }                                                                            \
  inline T atomicCAS(T *address, T compare, T value) {                         \
    T old = *address;                                                          \
    if (old == compare) {                                                      \
      *address = value;                                                        \
    }                                                                          \
    return old;                                                                \
  }
TL_EMU_ATOMIC_INT(int)
TL_EMU_ATOMIC_INT(unsigned)
TL_EMU_ATOMIC_INT(unsigned long long)
#undef TL_EMU_ATOMIC_INT

//===----------------------------------------------------------------------===//
// Device-only math and bit functions (expf, sqrtf, ... come from <math.h>).
//===----------------------------------------------------------------------===//

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float *s, float *c) {
  *s = std::sin(x);
  *c = std::cos(x);
}
inline void sincosf(float x, float *s, float *c) {
  *s = std::sin(x);
  *c = std::cos(x);
}
inline float __fdividef(float x, float y) { return x / y; }
inline float fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) {
  // NaN saturates to 0, as on the GPU.
  return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f;
}
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return std::fma(x, y, z); }
inline float __int_as_float(int x) {
  return ::tl::emu::fromBits<float>(unsigned(x));
}
inline int __float_as_int(float x) { return int(::tl::emu::toBits(x)); }
inline float __uint_as_float(unsigned x) {
  return ::tl::emu::fromBits<float>(x);
}
inline unsigned __float_as_uint(float x) {
  return unsigned(::tl::emu::toBits(x));
}
inline int __float2int_rn(float x) { return int(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return int(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) {
    r |= ((x >> i) & 1u) << (31 - i);
  }
  return r;
}
// Cache-hinted loads and stores, and fences: plain accesses when one thread
// runs at a time.
template <typename T> inline T __ldg(const T *p) { return *p; }
template <typename T> inline T __ldcg(const T *p) { return *p; }
template <typename T> inline T __ldcs(const T *p) { return *p; }
template <typename T> inline T __ldlu(const T *p) { return *p; }
template <typename T> inline void __stcg(T *p, T v) { *p = v; }
template <typename T> inline void __stcs(T *p, T v) { *p = v; }
template <typename T> inline void __stwt(T *p, T v) { *p = v; }
inline void __threadfence() {}
inline void __threadfence_block() {}

// CUDA's integer min/max overloads (float ones are fminf/fmaxf).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) {
  return a < b ? a : b;
}
inline unsigned long long max(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

/// Aborts the launch with an error naming the thread.
[[noreturn]] inline void __trap() { ::tl::emu::trap("__trap()"); }

#endif // TAILOR_CODEGEN_CUDA_SIMTEMULATOR_H
