//===- Device.cuh - what every tailor CUDA kernel may use ------*- CUDA -*-===//
//
// The device code of the CUDA backend (codegen/cuda/*.cu) is compiled three
// ways, and this header is the one place that knows it:
//   - by nvcc at build time to PTX, which ptxas assembles into a cubin per
//     target SM, and `tailor compile` embeds both in plans for GPU targets;
//     it uses no host headers, so NVRTC can compile it too (for kernels
//     generated at compile time, which tailor does not make yet);
//   - by the host C++ compiler with TAILOR_SIMT_EMULATOR defined, where
//     codegen/cuda/SimtEmulator.h runs every thread of a block as a fiber,
//     so the CPU tests check indexing, barriers, shuffles and tensor-core
//     fragment layouts against the CPU kernels on a machine without a GPU.
//
// Kernels therefore use only what is declared here (plus <cuda> builtins the
// emulator provides: threadIdx, blockIdx, blockDim, gridDim, __syncthreads,
// __shfl_*_sync, atomicAdd on float, atomicCAS on int, and the float math
// functions): no cooperative groups, no cuda_bf16.h (bf16 is tl::bf16 below,
// bit-exact with PyTorch's round-to-nearest-even), no inline PTX outside
// this header.
// Every __global__ entry point is `extern "C"` and named
// `tailor_<kernel>[_<variant>]`, which is the name the runtime's launchers
// (runtime/cuda/) ask the loaded module for.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_CUDA_DEVICE_CUH
#define TAILOR_CODEGEN_CUDA_DEVICE_CUH

#ifdef TAILOR_SIMT_EMULATOR
#include "codegen/cuda/SimtEmulator.h"
#define TL_DEVICE inline
#define TL_HOST_DEVICE inline
#define TL_GLOBAL extern "C"
// Every entry point is listed once after its definition: in the emulator
// that registers it by name, as the module's symbol table does on a GPU.
#define TL_REGISTER(fn)                                                        \
  static ::tl::emu::Registrar tlRegistrar_##fn(#fn, &::tl::emu::thunk<&fn>);
#else
#define TL_REGISTER(fn)
#define TL_DEVICE __device__ __forceinline__
#define TL_HOST_DEVICE __host__ __device__ __forceinline__
#define TL_GLOBAL extern "C" __global__
#endif

#include "codegen/cuda/DeviceError.cuh"

namespace tl {

typedef unsigned int u32;
typedef unsigned short u16;
typedef long long i64;
typedef unsigned long long u64;

constexpr int kWarpSize = 32;
constexpr u32 kFullMask = 0xffffffffu;

/// 16 bytes moved as one vector load and store (the element type of the
/// data-movement kernels' widest variants).
struct alignas(16) U128 {
  u64 lo, hi;
};

//===----------------------------------------------------------------------===//
// bf16 and fp16 as raw bits: conversions round to nearest even, NaN stays NaN.
//===----------------------------------------------------------------------===//

struct bf16 {
  u16 bits;
};

TL_HOST_DEVICE u32 floatBits(float f) {
  union {
    float f;
    u32 u;
  } v;
  v.f = f;
  return v.u;
}
TL_HOST_DEVICE float bitsFloat(u32 u) {
  union {
    float f;
    u32 u;
  } v;
  v.u = u;
  return v.f;
}
TL_HOST_DEVICE float toFloat(bf16 x) { return bitsFloat(u32(x.bits) << 16); }
TL_HOST_DEVICE bf16 toBf16(float f) {
  u32 u = floatBits(f);
  bf16 r;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    r.bits = u16((u >> 16) | 0x40u); // quiet NaN
    return r;
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  r.bits = u16(u >> 16);
  return r;
}

/// IEEE half from/to float (round to nearest even), for fp16 weights.
TL_HOST_DEVICE float halfToFloat(u16 h) {
  u32 sign = u32(h & 0x8000u) << 16;
  u32 exponent = (h >> 10) & 0x1fu;
  u32 mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) {
    return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) {
      return bitsFloat(sign);
    }
    // subnormal: mantissa * 2^-24
    float m = float(mantissa) * 5.9604644775390625e-8f;
    return sign ? -m : m;
  }
  return bitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/// The IEEE half nearest `f` (ties to even), as runtime/cpu/HalfRounding.h's
/// roundToHalf rounds: inf from 65520 up, subnormals below 2^-14, NaN quiet.
TL_HOST_DEVICE u16 floatToHalf(float f) {
  u32 u = floatBits(f);
  u16 sign = u16((u >> 16) & 0x8000u);
  u32 magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    return u16(sign | 0x7e00u);
  }
  if (magnitude >= 0x477ff000u) { // rounds to 65520 or more: infinity
    return u16(sign | 0x7c00u);
  }
  if (magnitude < 0x38800000u) { // below 2^-14: a multiple of 2^-24
    // (|f| + 0.5) - 0.5 rounds to 2^-24 steps, ties to even (f32 spacing
    // in [0.5, 1) is 2^-24); the steps are the subnormal's mantissa.
    float steps = ((bitsFloat(magnitude) + 0.5f) - 0.5f) * 16777216.0f;
    return u16(sign | u16(steps));
  }
  u32 rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return u16(sign | u16((rounded - 0x38000000u) >> 13));
}

//===----------------------------------------------------------------------===//
// Loads and stores that convert: kernels are written once over `float`
// arithmetic and instantiated per storage type (float, bf16, and f16
// where fp16 plans need it: IEEE half as raw bits).
//===----------------------------------------------------------------------===//

struct f16 {
  u16 bits;
};

TL_DEVICE float load(const float *p, i64 i) { return p[i]; }
TL_DEVICE float load(const bf16 *p, i64 i) { return toFloat(p[i]); }
TL_DEVICE float load(const f16 *p, i64 i) { return halfToFloat(p[i].bits); }
TL_DEVICE void store(float *p, i64 i, float v) { p[i] = v; }
TL_DEVICE void store(bf16 *p, i64 i, float v) { p[i] = toBf16(v); }
TL_DEVICE void store(f16 *p, i64 i, float v) { p[i].bits = floatToHalf(v); }

//===----------------------------------------------------------------------===//
// Dynamic shared memory: the launch's `sharedBytes`, 16-byte aligned. Kernels
// ask for it through this function (never `extern __shared__` themselves) so
// the emulator can hand each block its own buffer.
//===----------------------------------------------------------------------===//

#ifndef TAILOR_SIMT_EMULATOR
template <typename T> TL_DEVICE T *dynamicShared() {
  extern __shared__ __align__(16) unsigned char tlDynamicShared[];
  return reinterpret_cast<T *>(tlDynamicShared);
}
#endif

//===----------------------------------------------------------------------===//
// Indexing and reductions.
//===----------------------------------------------------------------------===//

/// This thread's index in a 1-D grid, as 64 bits (tensors exceed 2^31).
TL_DEVICE i64 globalThread() {
  return i64(blockIdx.x) * blockDim.x + threadIdx.x;
}
/// Threads in a 1-D grid: the stride of grid-stride loops.
TL_DEVICE i64 gridThreads() { return i64(gridDim.x) * blockDim.x; }

TL_DEVICE float warpSum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  return v;
}
TL_DEVICE float warpMax(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    float o = __shfl_xor_sync(kFullMask, v, offset);
    v = o > v ? o : v;
  }
  return v;
}

/// Sum over a block of up to 1024 threads (blockDim.x a multiple of 32);
/// every thread gets the total. `scratch` holds 32 floats of shared memory;
/// the call ends with a barrier, so scratch can be reused right after.
TL_DEVICE float blockSum(float v, float *scratch) {
  int lane = threadIdx.x % kWarpSize;
  int warp = threadIdx.x / kWarpSize;
  int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warpSum(v);
  if (lane == 0) {
    scratch[warp] = v;
  }
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) {
    total += scratch[w];
  }
  __syncthreads();
  return total;
}
TL_DEVICE float blockMax(float v, float *scratch) {
  int lane = threadIdx.x % kWarpSize;
  int warp = threadIdx.x / kWarpSize;
  int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warpMax(v);
  if (lane == 0) {
    scratch[warp] = v;
  }
  __syncthreads();
  float total = scratch[0];
  for (int w = 1; w < warps; ++w) {
    total = scratch[w] > total ? scratch[w] : total;
  }
  __syncthreads();
  return total;
}

//===----------------------------------------------------------------------===//
// Reporting bad data (DeviceError.cuh).
//===----------------------------------------------------------------------===//

/// Records a bad value unless the record already holds an error (the first
/// one wins). Kernels call it only on their unlikely path, so a loop over
/// valid data keeps its one predictable range check.
TL_DEVICE void reportError(ErrorRecord *record, int code, int site, i64 value,
                           i64 position, i64 bound) {
  if (atomicCAS(&record->code, 0, code) == 0) {
    record->site = site;
    record->value = value;
    record->position = position;
    record->bound = bound;
  }
}

//===----------------------------------------------------------------------===//
// Tensor cores: one warp-wide mma.sync m16n8k16 with 16-bit inputs (bf16 or
// IEEE half) and f32 accumulators, in PTX's fragment layout (lane =
// 4 * groupID + threadInGroup):
//   a[0..3]: pairs {A[g][2t..2t+1], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..]}
//   b[0..1]: pairs {B[2t..2t+1][g], B[2t+8..2t+9][g]}   (B is K x N)
//   c[0..3]: {C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]}
// Each u32 packs two 16-bit values, the lower-indexed element in the low
// half. The emulator computes the same layout in fp32 (SimtEmulator.h).
// bf16 needs sm_80+; half runs on sm_80+ as one m16n8k16 and on sm_75 (the
// T4) as two m16n8k8, whose fragments are the halves of the k16 ones:
// m16n8k8's a[0..1] are {A[g][2t..], A[g+8][2t..]} over k 0..7 and its b[0]
// is {B[2t..2t+1][g]}, so (a[0], a[1], b[0]) multiply k 0..7 and (a[2],
// a[3], b[1]) k 8..15 into the same accumulators.
//===----------------------------------------------------------------------===//

TL_DEVICE u32 packBf16(float lo, float hi) {
  return u32(toBf16(lo).bits) | (u32(toBf16(hi).bits) << 16);
}

/// Two floats as IEEE halves (round to nearest even, inf from 65520 up),
/// `lo` in the low 16 bits: floatToHalf's bits, but for NaN's payload (the
/// GPU's cvt gives the canonical 0x7fff).
#if defined(TAILOR_SIMT_EMULATOR) || !defined(__CUDA_ARCH__) ||               \
    __CUDA_ARCH__ < 750
TL_DEVICE u32 packHalf(float lo, float hi) {
  return u32(floatToHalf(lo)) | (u32(floatToHalf(hi)) << 16);
}
#else
TL_DEVICE u32 packHalf(float lo, float hi) {
  u32 packed;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
#else
  unsigned short l, h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(l) : "f"(lo));
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(hi));
  packed = u32(l) | (u32(h) << 16);
#endif
  return packed;
}
#endif

#ifdef TAILOR_SIMT_EMULATOR
// Defined in SimtEmulator.h: warp-collectives that gather every lane's
// fragments and compute D = A B + C in fp32 from bf16 or half bits.
#else
TL_DEVICE void mmaBf16(float c[4], const u32 a[4], const u32 b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
#else
  __trap(); // bf16 tensor cores need sm_80 or newer
#endif
}

/// D = A B + C with IEEE half A and B (the fp16 plans' tensor cores).
TL_DEVICE void mmaHalf(float c[4], const u32 a[4], const u32 b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#else
  __trap(); // half tensor cores need sm_75 or newer
#endif
}
#endif

} // namespace tl

#endif // TAILOR_CODEGEN_CUDA_DEVICE_CUH
