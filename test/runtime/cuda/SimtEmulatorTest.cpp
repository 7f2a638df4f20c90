//===- SimtEmulatorTest.cpp - the SIMT emulator and the emulator backend --===//
//
// The emulator must behave like a GPU wherever kernels can tell: barriers
// order shared-memory traffic, shuffles read the lanes PTX says, tl::mmaBf16
// and tl::mmaHalf use PTX's fragment layout, and mistakes (a barrier some
// threads skip, a bad mask, an out-of-bounds write) fail the launch instead
// of hanging or passing. The small kernels below exercise one thing each;
// the GEMM tests check the emulator backend's reference GEMM against a
// naive loop.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

#include "test/runtime/cuda/CudaTestUtil.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <gtest/gtest.h>
#include <vector>

//===----------------------------------------------------------------------===//
// Test kernels.
//===----------------------------------------------------------------------===//

TL_GLOBAL void tailor_emutest_block_sum(const float *in, float *out) {
  __shared__ float scratch[32];
  float v = in[tl::globalThread()];
  float total = tl::blockSum(v, scratch);
  if (threadIdx.x == 0) {
    out[blockIdx.x] = total;
  }
  // Every thread saw the same total.
  if (total != out[blockIdx.x] && threadIdx.x != 0) {
    out[blockIdx.x] = -1.0f;
  }
}
TL_REGISTER(tailor_emutest_block_sum)

TL_GLOBAL void tailor_emutest_block_max(const float *in, float *out) {
  __shared__ float scratch[32];
  float total = tl::blockMax(in[tl::globalThread()], scratch);
  if (threadIdx.x == 0) {
    out[blockIdx.x] = total;
  }
}
TL_REGISTER(tailor_emutest_block_max)

/// Per lane: xor 5, down 3, up 2, idx (lane * 7) % 32, idx within width 8.
TL_GLOBAL void tailor_emutest_shuffles(const float *in, float *out, int *ints) {
  int t = threadIdx.x;
  float v = in[t];
  out[5 * t + 0] = __shfl_xor_sync(tl::kFullMask, v, 5);
  out[5 * t + 1] = __shfl_down_sync(tl::kFullMask, v, 3);
  out[5 * t + 2] = __shfl_up_sync(tl::kFullMask, v, 2);
  out[5 * t + 3] = __shfl_sync(tl::kFullMask, v, (t * 7) % 32);
  out[5 * t + 4] = __shfl_xor_sync(tl::kFullMask, v, 9, 8);
  ints[2 * t] = __shfl_sync(tl::kFullMask, t * 100, 31 - t % 32);
  ints[2 * t + 1] = int(__ballot_sync(tl::kFullMask, t % 3 == 0));
}
TL_REGISTER(tailor_emutest_shuffles)

TL_GLOBAL void tailor_emutest_reverse(const float *in, float *out) {
  __shared__ float buffer[1024];
  int t = threadIdx.x, n = blockDim.x;
  buffer[t] = in[tl::globalThread()];
  __syncthreads();
  out[tl::globalThread()] = buffer[n - 1 - t];
}
TL_REGISTER(tailor_emutest_reverse)

/// Reverses through dynamic shared memory; `first` gets the bits the buffer
/// held before anything wrote it.
TL_GLOBAL void tailor_emutest_dynamic_reverse(const float *in, float *out,
                                              unsigned *first) {
  float *buffer = tl::dynamicShared<float>();
  int t = threadIdx.x, n = blockDim.x;
  if (t == 0 && blockIdx.x == 0) {
    first[0] = tl::floatBits(buffer[n]);
  }
  __syncthreads();
  buffer[t] = in[tl::globalThread()];
  __syncthreads();
  out[tl::globalThread()] = buffer[n - 1 - t];
}
TL_REGISTER(tailor_emutest_dynamic_reverse)

/// The same without the barrier between the writes and the reads: a race.
TL_GLOBAL void tailor_emutest_racy_reverse(const float *in, float *out) {
  float *buffer = tl::dynamicShared<float>();
  int t = threadIdx.x, n = blockDim.x;
  buffer[t] = in[tl::globalThread()];
  out[tl::globalThread()] = buffer[n - 1 - t];
}
TL_REGISTER(tailor_emutest_racy_reverse)

TL_GLOBAL void tailor_emutest_atomics(float *sum, int *count, unsigned *bits) {
  atomicAdd(sum, 0.5f);
  atomicAdd(count, 1);
  atomicAdd(bits, 2u);
}
TL_REGISTER(tailor_emutest_atomics)

/// Threads beyond `active` return before a barrier the others wait at.
TL_GLOBAL void tailor_emutest_early_exit(float *out, int active) {
  if (int(threadIdx.x) >= active) {
    return;
  }
  out[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = 2.0f;
}
TL_REGISTER(tailor_emutest_early_exit)

/// Lane `missing` skips a full-warp shuffle.
TL_GLOBAL void tailor_emutest_missing_lane(float *out, int missing) {
  if (int(threadIdx.x) == missing) {
    return;
  }
  out[threadIdx.x] = __shfl_xor_sync(tl::kFullMask, 1.0f, 1);
}
TL_REGISTER(tailor_emutest_missing_lane)

/// Even lanes shuffle while odd lanes wait at __syncwarp: a GPU hangs or
/// returns garbage; the emulator must say where each lane waits.
TL_GLOBAL void tailor_emutest_divergent_collectives(float *out) {
  if (threadIdx.x % 2 == 0) {
    out[threadIdx.x] = __shfl_xor_sync(tl::kFullMask, 1.0f, 2);
  } else {
    __syncwarp();
  }
}
TL_REGISTER(tailor_emutest_divergent_collectives)

/// Lanes 0-15 wait at a shuffle of the full warp while 16-31 are at a
/// barrier: neither can complete.
TL_GLOBAL void tailor_emutest_shuffle_vs_barrier(float *out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = __shfl_xor_sync(tl::kFullMask, 1.0f, 1);
  }
  __syncthreads();
}
TL_REGISTER(tailor_emutest_shuffle_vs_barrier)

struct EmuTestShape {
  int rows;
  long long cols;
  float scale;
};

/// Kernel arguments of every kind a launcher packs: pointers, scalars of
/// each width, and a small struct by value.
TL_GLOBAL void tailor_emutest_arguments(double *out, EmuTestShape shape,
                                        long long big, unsigned u, float f,
                                        const int *p) {
  out[0] = shape.rows;
  out[1] = double(shape.cols);
  out[2] = shape.scale;
  out[3] = double(big);
  out[4] = u;
  out[5] = f;
  out[6] = p[1];
}
TL_REGISTER(tailor_emutest_arguments)

/// Vector loads through CUDA's aligned vector types.
TL_GLOBAL void tailor_emutest_vector_types(const float *in, float *out) {
  float4 v = reinterpret_cast<const float4 *>(in)[threadIdx.x];
  float2 w = make_float2(v.x + v.y, v.z + v.w);
  reinterpret_cast<float2 *>(out)[threadIdx.x] = w;
}
TL_REGISTER(tailor_emutest_vector_types)

TL_GLOBAL void tailor_emutest_bad_mask(float *out) {
  out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, 1.0f, 1);
}
TL_REGISTER(tailor_emutest_bad_mask)

/// A 48-thread block: the second warp has 16 lanes and shuffles with them.
TL_GLOBAL void tailor_emutest_partial_warp(const float *in, float *out) {
  int t = threadIdx.x;
  unsigned mask = t < 32 ? tl::kFullMask : 0x0000ffffu;
  out[t] = __shfl_xor_sync(mask, in[t], 1);
  __syncwarp(mask);
}
TL_REGISTER(tailor_emutest_partial_warp)

TL_GLOBAL void tailor_emutest_trap(float *out) {
  if (threadIdx.x == 3) {
    __trap();
  }
  out[threadIdx.x] = 1.0f;
}
TL_REGISTER(tailor_emutest_trap)

/// Writes one float past the end of `out` (n elements).
TL_GLOBAL void tailor_emutest_out_of_bounds(float *out, int n) {
  out[n] = 1.0f;
}
TL_REGISTER(tailor_emutest_out_of_bounds)

/// Every thread writes its coordinates, for 3-D grids and blocks.
TL_GLOBAL void tailor_emutest_indices(unsigned *out) {
  unsigned block =
      blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned thread =
      threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  unsigned linear = block * threads + thread;
  out[4 * linear + 0] = threadIdx.x | (threadIdx.y << 8) | (threadIdx.z << 16);
  out[4 * linear + 1] = blockIdx.x | (blockIdx.y << 8) | (blockIdx.z << 16);
  out[4 * linear + 2] = blockDim.x | (blockDim.y << 8) | (blockDim.z << 16);
  out[4 * linear + 3] = gridDim.x | (gridDim.y << 8) | (gridDim.z << 16);
}
TL_REGISTER(tailor_emutest_indices)

/// One mma on raw fragments: lane l holds a[4 l..], b[2 l..], c[4 l..];
/// bf16 or (`half`) IEEE half fragments.
template <bool half>
TL_DEVICE void mmaFragments(const tl::u32 *a, const tl::u32 *b, float *c) {
  int lane = threadIdx.x;
  tl::u32 fa[4], fb[2];
  float fc[4];
  for (int i = 0; i < 4; ++i) {
    fa[i] = a[4 * lane + i];
    fc[i] = c[4 * lane + i];
  }
  fb[0] = b[2 * lane];
  fb[1] = b[2 * lane + 1];
  if (half) {
    tl::mmaHalf(fc, fa, fb);
  } else {
    tl::mmaBf16(fc, fa, fb);
  }
  for (int i = 0; i < 4; ++i) {
    c[4 * lane + i] = fc[i];
  }
}
TL_GLOBAL void tailor_emutest_mma_fragments(const tl::u32 *a, const tl::u32 *b,
                                            float *c) {
  mmaFragments<false>(a, b, c);
}
TL_REGISTER(tailor_emutest_mma_fragments)
TL_GLOBAL void tailor_emutest_mma_half_fragments(const tl::u32 *a,
                                                 const tl::u32 *b, float *c) {
  mmaFragments<true>(a, b, c);
}
TL_REGISTER(tailor_emutest_mma_half_fragments)

/// packHalf of each pair (in[2 i], in[2 i + 1]), one thread per pair.
TL_GLOBAL void tailor_emutest_pack_half(const float *in, tl::u32 *out, int n) {
  int i = int(tl::globalThread());
  if (i < n) {
    out[i] = tl::packHalf(in[2 * i], in[2 * i + 1]);
  }
}
TL_REGISTER(tailor_emutest_pack_half)

TL_DEVICE tl::u32 pairBits(tl::bf16 lo, tl::bf16 hi) {
  return tl::u32(lo.bits) | (tl::u32(hi.bits) << 16);
}

/// D (16 x 8) = A (16 x 16, row-major) B (16 x 8, row-major) + C, loading
/// the fragments the way a GEMM kernel would.
TL_GLOBAL void tailor_emutest_mma_matrix(const tl::bf16 *A, const tl::bf16 *B,
                                         const float *C, float *D) {
  int lane = threadIdx.x % 32;
  int g = lane / 4, t = lane % 4;
  tl::u32 a[4], b[2];
  a[0] = pairBits(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
  a[1] = pairBits(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
  a[2] = pairBits(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
  a[3] = pairBits(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
  b[0] = pairBits(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
  b[1] = pairBits(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
  float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t],
                C[(g + 8) * 8 + 2 * t + 1]};
  tl::mmaBf16(c, a, b);
  D[g * 8 + 2 * t] = c[0];
  D[g * 8 + 2 * t + 1] = c[1];
  D[(g + 8) * 8 + 2 * t] = c[2];
  D[(g + 8) * 8 + 2 * t + 1] = c[3];
}
TL_REGISTER(tailor_emutest_mma_matrix)

namespace tailor::runtime::cuda::testing {
namespace {

std::string run(const char *name, dim3 grid, dim3 block, size_t shared,
                std::vector<void *> args) {
  tl::emu::Thunk fn = tl::emu::findKernel(name);
  if (!fn) {
    return std::string("not registered: ") + name;
  }
  return tl::emu::launch(fn, grid, block, shared, args.data());
}

std::vector<float> ramp(int n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) {
    v[i] = scale * float((i * 37) % 101) - 50.0f;
  }
  return v;
}

//===----------------------------------------------------------------------===//
// Scheduling, barriers and shared memory.
//===----------------------------------------------------------------------===//

TEST(SimtEmulator, BlockSumAndMax) {
  const int blocks = 3;
  for (int threads : {32, 256, 1024}) {
    std::vector<float> in = ramp(blocks * threads, 0.25f);
    std::vector<float> sums(blocks), maxes(blocks);
    const float *pin = in.data();
    float *psum = sums.data(), *pmax = maxes.data();
    ASSERT_EQ(run("tailor_emutest_block_sum", dim3(blocks), dim3(threads), 0,
                  {&pin, &psum}),
              "");
    ASSERT_EQ(run("tailor_emutest_block_max", dim3(blocks), dim3(threads), 0,
                  {&pin, &pmax}),
              "");
    for (int b = 0; b < blocks; ++b) {
      double sum = 0;
      float max = in[b * threads];
      for (int i = 0; i < threads; ++i) {
        sum += in[b * threads + i];
        max = std::max(max, in[b * threads + i]);
      }
      EXPECT_NEAR(sums[b], sum, 1e-3) << threads << " threads, block " << b;
      EXPECT_EQ(maxes[b], max) << threads << " threads, block " << b;
    }
  }
}

TEST(SimtEmulator, SyncthreadsOrdersSharedMemory) {
  const int threads = 512, blocks = 4;
  std::vector<float> in = ramp(blocks * threads), out(blocks * threads);
  const float *pin = in.data();
  float *pout = out.data();
  ASSERT_EQ(run("tailor_emutest_reverse", dim3(blocks), dim3(threads), 0,
                {&pin, &pout}),
            "");
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < threads; ++t) {
      ASSERT_EQ(out[b * threads + t], in[b * threads + threads - 1 - t]);
    }
  }
}

TEST(SimtEmulator, DynamicSharedMemoryIsPerBlockAndUninitialized) {
  const int threads = 128, blocks = 3;
  std::vector<float> in = ramp(blocks * threads), out(blocks * threads);
  unsigned first = 0;
  const float *pin = in.data();
  float *pout = out.data();
  unsigned *pfirst = &first;
  ASSERT_EQ(run("tailor_emutest_dynamic_reverse", dim3(blocks), dim3(threads),
                (threads + 1) * sizeof(float), {&pin, &pout, &pfirst}),
            "");
  EXPECT_EQ(first, 0xcdcdcdcdu);
  for (int i = 0; i < blocks * threads; ++i) {
    int b = i / threads, t = i % threads;
    ASSERT_EQ(out[i], in[b * threads + threads - 1 - t]);
  }
}

// Without the barrier some reads see the poisoned buffer: even blocks run
// thread 0 first, odd blocks thread n-1 first, so a missing barrier shows in
// both directions.
TEST(SimtEmulator, MissingBarrierIsVisible) {
  const int threads = 64, blocks = 2;
  std::vector<float> in = ramp(blocks * threads), out(blocks * threads);
  const float *pin = in.data();
  float *pout = out.data();
  ASSERT_EQ(run("tailor_emutest_racy_reverse", dim3(blocks), dim3(threads),
                threads * sizeof(float), {&pin, &pout}),
            "");
  for (int b = 0; b < blocks; ++b) {
    int wrong = 0;
    for (int t = 0; t < threads; ++t) {
      wrong += out[b * threads + t] != in[b * threads + threads - 1 - t];
    }
    EXPECT_EQ(wrong, threads / 2) << "block " << b;
  }
}

TEST(SimtEmulator, Atomics) {
  float sum = 1.0f;
  int count = 0;
  unsigned bits = 7;
  float *psum = &sum;
  int *pcount = &count;
  unsigned *pbits = &bits;
  ASSERT_EQ(run("tailor_emutest_atomics", dim3(5), dim3(96), 0,
                {&psum, &pcount, &pbits}),
            "");
  EXPECT_EQ(sum, 1.0f + 0.5f * 480);
  EXPECT_EQ(count, 480);
  EXPECT_EQ(bits, 7u + 2 * 480);
}

TEST(SimtEmulator, ThreeDimensionalIndices) {
  dim3 grid(3, 2, 2), block(8, 4, 2);
  const int total = 12 * 64;
  std::vector<unsigned> out(4 * total, 0xffffffffu);
  unsigned *pout = out.data();
  ASSERT_EQ(run("tailor_emutest_indices", grid, block, 0, {&pout}), "");
  int i = 0;
  for (unsigned bz = 0; bz < 2; ++bz) {
    for (unsigned by = 0; by < 2; ++by) {
      for (unsigned bx = 0; bx < 3; ++bx) {
        for (unsigned tz = 0; tz < 2; ++tz) {
          for (unsigned ty = 0; ty < 4; ++ty) {
            for (unsigned tx = 0; tx < 8; ++tx, ++i) {
              ASSERT_EQ(out[4 * i], tx | (ty << 8) | (tz << 16)) << i;
              ASSERT_EQ(out[4 * i + 1], bx | (by << 8) | (bz << 16)) << i;
              ASSERT_EQ(out[4 * i + 2], 8u | (4u << 8) | (2u << 16));
              ASSERT_EQ(out[4 * i + 3], 3u | (2u << 8) | (2u << 16));
            }
          }
        }
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Warp collectives.
//===----------------------------------------------------------------------===//

TEST(SimtEmulator, Shuffles) {
  const int threads = 64; // two warps: lanes never cross a warp
  std::vector<float> in = ramp(threads), out(5 * threads);
  std::vector<int> ints(2 * threads);
  const float *pin = in.data();
  float *pout = out.data();
  int *pints = ints.data();
  ASSERT_EQ(run("tailor_emutest_shuffles", dim3(1), dim3(threads), 0,
                {&pin, &pout, &pints}),
            "");
  for (int t = 0; t < threads; ++t) {
    int warp = t / 32 * 32, lane = t % 32;
    EXPECT_EQ(out[5 * t + 0], in[warp + (lane ^ 5)]) << t;
    EXPECT_EQ(out[5 * t + 1], in[lane + 3 < 32 ? t + 3 : t]) << t;
    EXPECT_EQ(out[5 * t + 2], in[lane >= 2 ? t - 2 : t]) << t;
    EXPECT_EQ(out[5 * t + 3], in[warp + (lane * 7) % 32]) << t;
    // Width 8: xor 9 leaves the 8-lane segment, so each lane keeps its own.
    int segment = lane / 8 * 8, j = lane ^ 9;
    bool inside = j >= segment && j < segment + 8;
    EXPECT_EQ(out[5 * t + 4], in[warp + (inside ? j : lane)]) << t;
    EXPECT_EQ(ints[2 * t], (warp + 31 - lane) * 100) << t;
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l) {
      ballot |= (warp + l) % 3 == 0 ? 1u << l : 0u;
    }
    EXPECT_EQ(unsigned(ints[2 * t + 1]), ballot) << t;
  }
}

TEST(SimtEmulator, PartialLastWarp) {
  const int threads = 48;
  std::vector<float> in = ramp(threads), out(threads);
  const float *pin = in.data();
  float *pout = out.data();
  ASSERT_EQ(run("tailor_emutest_partial_warp", dim3(1), dim3(threads), 0,
                {&pin, &pout}),
            "");
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(out[t], in[t ^ 1]) << t;
  }
  // The full mask names lanes the 40-thread block's second warp lacks.
  std::vector<float> small(40);
  float *psmall = small.data();
  int none = -1;
  std::string error = run("tailor_emutest_missing_lane", dim3(1), dim3(40), 0,
                          {&psmall, &none});
  EXPECT_NE(error.find("missing from the last warp"), std::string::npos)
      << error;
}

//===----------------------------------------------------------------------===//
// Errors instead of hangs.
//===----------------------------------------------------------------------===//

TEST(SimtEmulator, EarlyExitBeforeBarrierIsAnError) {
  std::vector<float> out(128);
  float *pout = out.data();
  int active = 64;
  std::string error =
      run("tailor_emutest_early_exit", dim3(2), dim3(128), 0, {&pout, &active});
  EXPECT_NE(error.find("deadlock in block (0, 0, 0)"), std::string::npos)
      << error;
  EXPECT_NE(error.find("64 threads wait at __syncthreads() but 64 threads"),
            std::string::npos)
      << error;
  // With every thread active the same kernel is fine.
  active = 128;
  EXPECT_EQ(
      run("tailor_emutest_early_exit", dim3(2), dim3(128), 0, {&pout, &active}),
      "");
  EXPECT_EQ(out[127], 2.0f);
}

TEST(SimtEmulator, MissingLaneIsAnError) {
  std::vector<float> out(32);
  float *pout = out.data();
  int missing = 7;
  std::string error = run("tailor_emutest_missing_lane", dim3(1), dim3(32), 0,
                          {&pout, &missing});
  EXPECT_NE(error.find("deadlock"), std::string::npos) << error;
  EXPECT_NE(error.find("lane 7 has exited"), std::string::npos) << error;
}

TEST(SimtEmulator, DivergentCollectivesAreAnError) {
  std::vector<float> out(32);
  float *pout = out.data();
  std::string error = run("tailor_emutest_divergent_collectives", dim3(1),
                          dim3(32), 0, {&pout});
  EXPECT_NE(error.find("lanes of mask 0xffffffff meet at __syncwarp and "
                       "__shfl_xor_sync"),
            std::string::npos)
      << error;
  error =
      run("tailor_emutest_shuffle_vs_barrier", dim3(1), dim3(32), 0, {&pout});
  EXPECT_NE(error.find("lane 16 waits at __syncthreads()"), std::string::npos)
      << error;
}

TEST(SimtEmulator, KernelArguments) {
  double out[7] = {};
  double *pout = out;
  EmuTestShape shape{3, 1ll << 40, 0.25f};
  long long big = -(1ll << 50);
  unsigned u = 0xfffffff0u;
  float f = -1.5f;
  int values[2] = {7, 11};
  const int *p = values;
  ASSERT_EQ(run("tailor_emutest_arguments", dim3(1), dim3(1), 0,
                {&pout, &shape, &big, &u, &f, &p}),
            "");
  EXPECT_EQ(out[0], 3.0);
  EXPECT_EQ(out[1], double(1ll << 40));
  EXPECT_EQ(out[2], 0.25);
  EXPECT_EQ(out[3], double(-(1ll << 50)));
  EXPECT_EQ(out[4], double(0xfffffff0u));
  EXPECT_EQ(out[5], -1.5);
  EXPECT_EQ(out[6], 11.0);
}

TEST(SimtEmulator, VectorTypes) {
  static_assert(alignof(float4) == 16 && sizeof(float4) == 16);
  static_assert(alignof(float2) == 8 && alignof(ushort4) == 8);
  alignas(16) float in[4 * 32];
  float out[2 * 32];
  for (int i = 0; i < 4 * 32; ++i) {
    in[i] = float(i);
  }
  const float *pin = in;
  float *pout = out;
  ASSERT_EQ(
      run("tailor_emutest_vector_types", dim3(1), dim3(32), 0, {&pin, &pout}),
      "");
  for (int i = 0; i < 2 * 32; ++i) {
    EXPECT_EQ(out[i], float(4 * i + 1));
  }
}

TEST(SimtEmulator, MaskExcludingTheCallerIsAnError) {
  std::vector<float> out(32);
  float *pout = out.data();
  std::string error =
      run("tailor_emutest_bad_mask", dim3(1), dim3(32), 0, {&pout});
  EXPECT_NE(error.find("excludes the calling lane"), std::string::npos)
      << error;
  // The emulator recovers: the next launch runs normally.
  std::vector<float> in = ramp(32), res(32);
  const float *pin = in.data();
  float *pres = res.data();
  EXPECT_EQ(run("tailor_emutest_reverse", dim3(1), dim3(32), 0, {&pin, &pres}),
            "");
  EXPECT_EQ(res[0], in[31]);
}

TEST(SimtEmulator, TrapIsAnError) {
  std::vector<float> out(32);
  float *pout = out.data();
  std::string error = run("tailor_emutest_trap", dim3(2), dim3(32), 0, {&pout});
  EXPECT_EQ(error, "block (0, 0, 0) thread (3, 0, 0): __trap() called");
}

TEST(SimtEmulator, InvalidLaunchConfigurations) {
  std::vector<float> out(32);
  float *pout = out.data();
  EXPECT_NE(run("tailor_emutest_trap", dim3(1), dim3(2048), 0, {&pout}), "");
  EXPECT_NE(run("tailor_emutest_trap", dim3(0), dim3(32), 0, {&pout}), "");
  EXPECT_NE(run("tailor_emutest_trap", dim3(1), dim3(32), 1 << 20, {&pout}),
            "");
  EXPECT_EQ(tl::emu::findKernel("tailor_emutest_nonexistent"), nullptr);
}

//===----------------------------------------------------------------------===//
// Tensor cores.
//===----------------------------------------------------------------------===//

float bf16Value(tl::u32 pair, int half) {
  return tl::bitsFloat((pair >> (16 * half)) << 16);
}
float halfValue(tl::u32 pair, int half) {
  return tl::halfToFloat(tl::u16(pair >> (16 * half)));
}

/// Runs `kernel` (an mma on raw fragments) on random fragments whose 16-bit
/// values `random16` makes, and expects the result computed per element of
/// D by finding where the documented layout puts each element of A, B and
/// C, with `value` decoding a pair's halves.
void expectDocumentedMmaLayout(const char *kernel,
                               const std::function<tl::u16()> &random16,
                               float (*value)(tl::u32, int)) {
  std::vector<tl::u32> a(128), b(64);
  std::vector<float> c(128);
  for (auto &v : a) {
    v = tl::u32(random16()) | (tl::u32(random16()) << 16);
  }
  for (auto &v : b) {
    v = tl::u32(random16()) | (tl::u32(random16()) << 16);
  }
  for (int i = 0; i < 128; ++i) {
    c[i] = float((i * 37) % 200 - 100) / 8.0f;
  }
  auto A = [&](int i, int k) {
    int lane = 4 * (i % 8) + (k % 8) / 2;
    int reg = (i >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
    return value(a[4 * lane + reg], k % 2);
  };
  auto B = [&](int k, int j) {
    int lane = 4 * j + (k % 8) / 2;
    return value(b[2 * lane + (k >= 8 ? 1 : 0)], k % 2);
  };
  auto slot = [](int i, int j) { // index of C/D element (i, j) in c
    int lane = 4 * (i % 8) + j / 2;
    return 4 * lane + (i >= 8 ? 2 : 0) + j % 2;
  };
  std::vector<double> expected(128);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      double sum = c[slot(i, j)];
      for (int k = 0; k < 16; ++k) {
        sum += double(A(i, k)) * double(B(k, j));
      }
      expected[slot(i, j)] = sum;
    }
  }
  const tl::u32 *pa = a.data(), *pb = b.data();
  float *pc = c.data();
  ASSERT_EQ(run(kernel, dim3(1), dim3(32), 0, {&pa, &pb, &pc}), "");
  for (int s = 0; s < 128; ++s) {
    EXPECT_NEAR(c[s], expected[s], 1e-4 * (1 + std::fabs(expected[s]))) << s;
  }
}

/// A linear congruential generator: the tests' fragments.
std::function<uint32_t()> lcg(uint32_t seed) {
  return [state = seed]() mutable {
    state = state * 1664525u + 1013904223u;
    return state;
  };
}

// Random fragments, and the expected result computed per element of D by
// finding where the documented layout puts each element of A, B and C.
TEST(SimtEmulator, MmaMatchesTheDocumentedLayout) {
  auto next = lcg(12345);
  expectDocumentedMmaLayout(
      "tailor_emutest_mma_fragments",
      [&] {
        return tl::toBf16(float(int(next() >> 8) % 2001 - 1000) / 256.0f).bits;
      },
      bf16Value);
}

// The same with IEEE half fragments (tl::mmaHalf): values of 11
// significant bits, which bf16 cannot hold, and subnormals (below 2^-14),
// so a decoder that read them as bf16, or flushed subnormals, fails.
TEST(SimtEmulator, MmaHalfMatchesTheDocumentedLayout) {
  auto next = lcg(777);
  int count = 0;
  expectDocumentedMmaLayout(
      "tailor_emutest_mma_half_fragments",
      [&] {
        float v = float(int(next() >> 8) % 4001 - 2000) / 1024.0f;
        if (++count % 7 == 0) { // a subnormal half: k 2^-24, |k| < 1024
          v = float(int(next() >> 8) % 2047 - 1023) * 5.9604644775390625e-8f;
        }
        tl::u16 bits = tl::floatToHalf(v);
        EXPECT_EQ(tl::halfToFloat(bits), v) << "not a half: " << v;
        return bits;
      },
      halfValue);
}

// packHalf rounds as floatToHalf does: ties to even, inf from 65520,
// subnormals, signed zeros; and lo goes to the low half.
TEST(SimtEmulator, PackHalfRoundsToNearestEven) {
  std::vector<float> in = {1.0f,
                           -2.0f,
                           1.0f + 1.0f / 2048.0f, // tie: to 1
                           1.0f + 3.0f / 2048.0f, // tie: to 1 + 2^-9
                           65504.0f,
                           65519.0f, // below the midpoint: 65504
                           65520.0f, // the midpoint: inf
                           -1e6f,
                           5.9604644775390625e-8f, // 2^-24
                           2.9802322387695312e-8f, // 2^-25: tie to 0
                           -0.0f,
                           0.333333333f};
  std::vector<tl::u16> want = {0x3c00, 0xc000, 0x3c00, 0x3c02, 0x7bff, 0x7bff,
                               0x7c00, 0xfc00, 0x0001, 0x0000, 0x8000, 0x3555};
  int n = int(in.size()) / 2;
  std::vector<tl::u32> out(n, 0xdeadbeefu);
  const float *pin = in.data();
  tl::u32 *pout = out.data();
  ASSERT_EQ(run("tailor_emutest_pack_half", dim3(1), dim3(32), 0,
                {&pin, &pout, &n}),
            "");
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(out[i] & 0xffffu, want[2 * i]) << in[2 * i];
    EXPECT_EQ(out[i] >> 16, want[2 * i + 1]) << in[2 * i + 1];
  }
}

TEST(SimtEmulator, MmaComputesAMatrixProduct) {
  std::vector<tl::bf16> A(16 * 16), B(16 * 8);
  std::vector<float> C(16 * 8), D(16 * 8, -1.0f);
  for (int i = 0; i < 256; ++i) {
    A[i] = tl::toBf16(std::sin(0.37f * float(i)));
  }
  for (int i = 0; i < 128; ++i) {
    B[i] = tl::toBf16(std::cos(0.11f * float(i) + 0.5f));
    C[i] = 0.01f * float(i) - 0.5f;
  }
  const tl::bf16 *pA = A.data(), *pB = B.data();
  const float *pC = C.data();
  float *pD = D.data();
  ASSERT_EQ(run("tailor_emutest_mma_matrix", dim3(1), dim3(32), 0,
                {&pA, &pB, &pC, &pD}),
            "");
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      double sum = C[i * 8 + j];
      for (int k = 0; k < 16; ++k) {
        sum += double(tl::toFloat(A[i * 16 + k])) *
               double(tl::toFloat(B[k * 8 + j]));
      }
      EXPECT_NEAR(D[i * 8 + j], sum, 1e-5) << i << ", " << j;
    }
  }
  // A partial warp cannot issue an mma.
  std::string error = run("tailor_emutest_mma_matrix", dim3(1), dim3(16), 0,
                          {&pA, &pB, &pC, &pD});
  EXPECT_NE(error.find("full warp"), std::string::npos) << error;
}

//===----------------------------------------------------------------------===//
// The emulator backend: out-of-bounds writes and the reference GEMM.
//===----------------------------------------------------------------------===//

TEST(EmulatorBackend, OutOfBoundsWriteFailsTheLaunch) {
  std::string why;
  std::unique_ptr<TestBackend> backend = makeBackend(why);
  if (!backend || std::string(backend->name()) != "emulator") {
    GTEST_SKIP() << "the emulator backend is not selected";
  }
  auto *out = static_cast<float *>(backend->allocate(10 * sizeof(float)));
  int n = 10;
  void *args[] = {&out, &n};
  EXPECT_EQ(backend->context().launch("tailor_emutest_out_of_bounds", Dim3{1},
                                      Dim3{1}, 0, args),
            "");
  std::string error = backend->synchronize();
  EXPECT_NE(error.find("out-of-bounds write at byte offset 40"),
            std::string::npos)
      << error;
  EXPECT_EQ(backend->synchronize(), "");
  // A bad configuration fails the call itself, as cudaLaunchKernel does.
  EXPECT_NE(backend->context().launch("tailor_emutest_out_of_bounds", Dim3{1},
                                      Dim3{2048}, 0, args),
            "");
  EXPECT_EQ(backend->context().launch("tailor_emutest_nonexistent", Dim3{1},
                                      Dim3{1}, 0, args),
            "no device function 'tailor_emutest_nonexistent' in the "
            "emulator: include its .cu in the test");
}

/// C = alpha op(A) op(B) + beta C + bias, naively in double, per batch.
std::vector<double> naiveGemm(const GemmDesc &d, const HostTensor &a,
                              const HostTensor &b, const HostTensor &c,
                              const HostTensor *bias) {
  std::vector<double> out(size_t(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i) {
    out[size_t(i)] = c.at(i);
  }
  auto round = [&](double v, DType t) {
    return d.halfCompute == HalfCompute::BF16 && t == DType::F32
               ? double(tl::toFloat(tl::toBf16(float(v))))
               : v;
  };
  for (int64_t batch = 0; batch < d.batch; ++batch) {
    for (int64_t i = 0; i < d.m; ++i) {
      for (int64_t j = 0; j < d.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < d.k; ++p) {
          double x = a.at(batch * d.strideA +
                          (d.transA ? p * d.lda + i : i * d.lda + p));
          double y = b.at(batch * d.strideB +
                          (d.transB ? j * d.ldb + p : p * d.ldb + j));
          sum += round(x, d.aType) * round(y, d.bType);
        }
        size_t o = size_t(batch * d.strideC + i * d.ldc + j);
        out[o] = d.alpha * sum + d.beta * out[o] + (bias ? bias->at(j) : 0.0);
      }
    }
  }
  return out;
}

struct GemmCase {
  bool transA, transB;
  int64_t batch;
  float alpha, beta;
  bool bias;
  DType type;
  bool bf16Compute;
};

class GemmReferenceTest : public CudaKernelTest,
                          public ::testing::WithParamInterface<GemmCase> {};

TEST_P(GemmReferenceTest, MatchesNaiveLoop) {
  const GemmCase &p = GetParam();
  GemmDesc d;
  d.transA = p.transA;
  d.transB = p.transB;
  d.m = 5;
  d.n = 7;
  d.k = 9;
  d.batch = p.batch;
  d.alpha = p.alpha;
  d.beta = p.beta;
  d.halfCompute = p.bf16Compute ? HalfCompute::BF16 : HalfCompute::None;
  // Leading dimensions wider than the rows, to catch ld/stride mix-ups.
  int64_t aRows = p.transA ? d.k : d.m, aCols = p.transA ? d.m : d.k;
  int64_t bRows = p.transB ? d.n : d.k, bCols = p.transB ? d.k : d.n;
  d.lda = aCols + 2;
  d.ldb = bCols + 3;
  d.ldc = d.n + 1;
  d.strideA = aRows * d.lda + 4;
  d.strideB = bRows * d.ldb;
  d.strideC = d.m * d.ldc + 2;
  d.aType = d.bType = d.cType = p.type;
  HostTensor a = converted(randomF32({d.batch * d.strideA}, 1), p.type);
  HostTensor b = converted(randomF32({d.batch * d.strideB}, 2), p.type);
  HostTensor c = converted(randomF32({d.batch * d.strideC}, 3), p.type);
  HostTensor bias = converted(randomF32({d.n}, 4), p.type);
  std::vector<double> want = naiveGemm(d, a, b, c, p.bias ? &bias : nullptr);

  auto upload = [&](const HostTensor &t) {
    void *device = backend->allocate(t.bytes());
    backend->upload(device, t.data(), t.bytes());
    return device;
  };
  d.a = upload(a);
  d.b = upload(b);
  d.c = upload(c);
  d.bias = p.bias ? upload(bias) : nullptr;
  backend->setHalfCompute(p.bf16Compute ? HalfCompute::BF16
                                         : HalfCompute::None);
  ASSERT_EQ(backend->context().gemm(d), "");
  ASSERT_EQ(backend->synchronize(), "");
  HostTensor got(p.type, c.shape);
  backend->download(got.data(), d.c, got.bytes());
  // cuBLASLt's bf16 compute (CUBLAS_COMPUTE_32F_FAST_16BF) rounds f32
  // inputs to bf16 on a GPU (the emulator multiplies them whole): bf16's
  // tolerance then, as seen on an H200 (1.1e-4 off at k = 9).
  double tolerance = p.type == DType::BF16 || p.bf16Compute ? 1e-2 : 1e-5;
  for (int64_t i = 0; i < got.numel(); ++i) {
    // bf16 outputs are the double result rounded once.
    double w = p.type == DType::BF16
                   ? double(tl::toFloat(tl::toBf16(float(want[size_t(i)]))))
                   : want[size_t(i)];
    ASSERT_NEAR(got.at(i), w, tolerance * (1 + std::fabs(w)))
        << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GemmReferenceTest,
    ::testing::Values(
        GemmCase{false, false, 1, 1.0f, 0.0f, false, DType::F32, false},
        GemmCase{true, false, 1, 1.0f, 0.0f, false, DType::F32, false},
        GemmCase{false, true, 1, 1.0f, 0.0f, false, DType::F32, false},
        GemmCase{true, true, 3, 0.5f, 0.0f, false, DType::F32, false},
        GemmCase{false, true, 2, 1.0f, 1.0f, false, DType::F32, false},
        GemmCase{true, false, 2, 2.0f, -0.5f, false, DType::F32, true},
        GemmCase{false, false, 2, 1.0f, 0.0f, true, DType::F32, false},
        GemmCase{false, true, 2, 1.0f, 0.0f, true, DType::BF16, false},
        GemmCase{true, true, 1, 1.0f, 1.0f, false, DType::BF16, true}));

TEST_F(CudaKernelTest, GemmRejectsBadDescriptions) {
  GemmDesc d;
  d.m = d.n = d.k = 4;
  d.lda = d.ldb = d.ldc = 4;
  void *buffer = backend->allocate(16 * sizeof(float));
  d.a = d.b = d.c = buffer;
  d.lda = 3;
  EXPECT_NE(backend->context().gemm(d), "");
  d.lda = 4;
  d.bias = buffer;
  d.beta = 1.0f;
  EXPECT_NE(backend->context().gemm(d), "");
}

//===----------------------------------------------------------------------===//
// Host tensors.
//===----------------------------------------------------------------------===//

TEST(HostTensor, ConversionsRoundToNearestEven) {
  HostTensor f(DType::F32, {4});
  f.as<float>()[0] = 1.0f + 1.0f / 256; // tie: rounds down to 1
  f.as<float>()[1] = 1.0f + 3.0f / 256; // tie: rounds up to 1 + 2^-6
  f.as<float>()[2] = -2.5f;
  f.as<float>()[3] = 65504.0f;
  HostTensor b = converted(f, DType::BF16);
  EXPECT_EQ(b.at(0), 1.0);
  EXPECT_EQ(b.at(1), 1.0 + 4.0 / 256);
  EXPECT_EQ(b.at(2), -2.5);
  HostTensor h = converted(f, DType::F16);
  EXPECT_EQ(h.at(2), -2.5);
  EXPECT_EQ(h.at(3), 65504.0);
  HostTensor ids = randomInts({100}, 7, -3, 5, DType::I32);
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_GE(ids.at(i), -3);
    EXPECT_LT(ids.at(i), 5);
  }
  HostTensor wide = converted(ids, DType::I64);
  EXPECT_EQ(wide.as<int64_t>()[17], ids.as<int32_t>()[17]);
  HostTensor r = randomF32({1000}, 9, 2.0f, 3.0f);
  for (int64_t i = 0; i < 1000; ++i) {
    ASSERT_GE(r.at(i), 2.0);
    ASSERT_LT(r.at(i), 3.0);
  }
}

} // namespace
} // namespace tailor::runtime::cuda::testing
