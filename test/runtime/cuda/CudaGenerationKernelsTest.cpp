//===- CudaGenerationKernelsTest.cpp - the CUDA KV cache write ------------===//
//
// kv_cache_write (runtime/cuda/GenerationLaunchers.cpp) against the CPU
// kernel (runtime/cpu/GenerationKernels.cpp), bit for bit: every element
// size (1, 2, 4, 8 bytes, bf16 and f32 among them), rows of odd sizes and
// of 16-byte multiples (every copy unit), decode (C = 1) and prefill
// chunks (C > 1), one crossing the cache's end (its last rows dropped),
// and unaligned pointers. The cache starts with distinct values, so rows
// the write must leave alone are compared too. A position outside [0, N)
// must set the device error record (the position, N, the step), write
// nothing, and fail with the CPU kernel's message.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/GenerationKernels.cu"

#include "test/runtime/cuda/CudaTestUtil.h"

namespace tailor::runtime::cuda::testing {
namespace {

constexpr Tolerance kExact{0, 0};

/// Distinct-looking values of `dtype` (bf16 holds bf16-rounded floats).
HostTensor sample(DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  switch (dtype) {
  case DType::F32:
    return randomF32(std::move(shape), seed);
  case DType::BF16:
    return converted(randomF32(std::move(shape), seed), DType::BF16);
  case DType::U8:
    return converted(randomInts(std::move(shape), seed, 0, 256), DType::U8);
  default:
    return randomInts(std::move(shape), seed, -(int64_t(1) << 40),
                      int64_t(1) << 40, DType::I64);
  }
}

HostTensor positionTensor(int64_t position) {
  HostTensor t(DType::I64, {});
  t.as<int64_t>()[0] = position;
  return t;
}

const DType kDTypes[] = {DType::U8, DType::BF16, DType::F32, DType::I64};

struct WriteCase {
  int64_t batch, heads, chunk, length, d, position;
};

std::string describe(const WriteCase &c, DType dtype) {
  return std::string(dtypeName(dtype)) + " B " + std::to_string(c.batch) +
         " H " + std::to_string(c.heads) + " C " + std::to_string(c.chunk) +
         " N " + std::to_string(c.length) + " D " + std::to_string(c.d) +
         " position " + std::to_string(c.position);
}

std::vector<HostTensor> operandsOf(const WriteCase &c, DType dtype,
                                   uint64_t seed) {
  return {sample(dtype, {c.batch, c.heads, c.chunk, c.d}, seed),
          positionTensor(c.position),
          sample(dtype, {c.batch, c.heads, c.length, c.d}, seed + 1)};
}

TEST_F(CudaKernelTest, KvCacheWriteMatchesCpu) {
  // Decode (C = 1) at the first, a middle and the last row; prefill chunks
  // inside the cache, ending exactly at it, and crossing it (rows dropped).
  // D = 5 moves odd rows (1- or 2-byte units), 8 and 64 wider ones.
  const WriteCase cases[] = {
      {1, 1, 1, 7, 5, 0},  {2, 3, 1, 11, 8, 4},  {2, 3, 1, 11, 64, 10},
      {1, 2, 4, 13, 5, 0}, {2, 3, 4, 11, 8, 7},  {2, 1, 6, 9, 64, 2},
      {2, 3, 4, 11, 5, 9}, {1, 2, 8, 10, 8, 5},  {3, 2, 8, 8, 64, 7},
  };
  uint64_t seed = 1;
  for (const WriteCase &c : cases) {
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(describe(c, dtype));
      expectMatchesCpu(*backend, "kv_cache_write", operandsOf(c, dtype, seed),
                       {}, {2}, kExact);
      seed += 2;
    }
  }
}

TEST_F(CudaKernelTest, KvCacheWriteCrossingTheEndDropsItsTail) {
  // Checked against an index loop too: rows position..N-1 take the chunk's
  // first N - position rows, every other row keeps its value.
  const WriteCase c{2, 3, 5, 9, 6, 6};
  std::vector<HostTensor> operands = operandsOf(c, DType::F32, 40);
  std::vector<HostTensor> out =
      runCuda(*backend, "kv_cache_write", operands, {});
  ASSERT_EQ(out.size(), 3u);
  const float *value = operands[0].as<float>();
  const float *before = operands[2].as<float>();
  const float *after = out[2].as<float>();
  for (int64_t h = 0; h < c.batch * c.heads; ++h) {
    for (int64_t n = 0; n < c.length; ++n) {
      for (int64_t k = 0; k < c.d; ++k) {
        int64_t at = (h * c.length + n) * c.d + k;
        float want = n >= c.position
                         ? value[(h * c.chunk + n - c.position) * c.d + k]
                         : before[at];
        ASSERT_EQ(after[at], want) << "head " << h << " row " << n;
      }
    }
  }
}

TEST_F(CudaKernelTest, KvCacheWriteUnalignedPointers) {
  // Pointers one element past a 16-byte boundary: narrower units.
  for (DType dtype : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dtypeName(dtype));
    const WriteCase c{2, 2, 3, 7, 8, 5};
    std::vector<HostTensor> operands = operandsOf(c, dtype, 50);
    std::vector<HostTensor> got =
        runShifted(*backend, "kv_cache_write", operands, {}, 1);
    std::vector<HostTensor> want = runCpu("kv_cache_write", operands, {});
    ASSERT_EQ(got.size(), 3u);
    ASSERT_EQ(want.size(), 3u);
    if (dtype == DType::BF16) {
      want[2] = converted(want[2], DType::BF16);
    }
    expectSameBits(got[2], want[2]);
  }
}

TEST_F(CudaKernelTest, KvCacheWriteReportsAPositionOutsideTheCache) {
  for (int64_t bad : {int64_t(-1), int64_t(11), int64_t(40)}) {
    for (DType dtype : {DType::BF16, DType::F32}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " position " +
                   std::to_string(bad));
      const WriteCase c{2, 3, 4, 11, 8, bad};
      std::vector<HostTensor> operands = operandsOf(c, dtype, 60);
      std::vector<HostTensor> out = operands;
      DeviceErrorRecord got =
          runCudaForError(*backend, "kv_cache_write", out, {}, 9);
      EXPECT_EQ(got.code, tl::kKvCachePosition);
      EXPECT_EQ(got.site, 9);
      EXPECT_EQ(got.value, bad);
      EXPECT_EQ(got.bound, 11);
      // Nothing written.
      expectSameBits(out[2], operands[2]);
      expectDeviceError(*backend, "kv_cache_write", operands, {},
                        {tl::kKvCachePosition, 9, bad, 0, 11});
      // The CPU kernel fails the same launch with the same message.
      EXPECT_EQ(cpuRunError("kv_cache_write", operands, {}),
                describeDeviceError({tl::kKvCachePosition, 9, bad, 0, 11}));
    }
  }
  EXPECT_EQ(describeDeviceError({tl::kKvCachePosition, 2, 32, 0, 32}),
            "position 32 is outside the KV cache [0, 32)");
}

TEST_F(CudaKernelTest, KvCacheWriteGoodPositionsLeaveTheRecordClear) {
  for (int64_t position : {int64_t(0), int64_t(10)}) {
    std::vector<HostTensor> out =
        operandsOf({1, 2, 3, 11, 4, position}, DType::F32, 70);
    DeviceErrorRecord got =
        runCudaForError(*backend, "kv_cache_write", out, {}, 1);
    EXPECT_EQ(got.code, tl::kNoError) << "position " << position;
  }
}

TEST_F(CudaKernelTest, KvCacheWriteChecks) {
  // Shape and dtype errors read as the CPU kernel's.
  EXPECT_EQ(checkCuda("kv_cache_write",
                      {HostTensor(DType::BF16, {1, 2, 1, 4}), positionTensor(0),
                       HostTensor(DType::F32, {1, 2, 8, 4})},
                      {}),
            "operand 2 must be bf16 like operand 0, got f32");
  EXPECT_NE(checkCuda("kv_cache_write",
                      {HostTensor(DType::F32, {1, 2, 9, 4}), positionTensor(0),
                       HostTensor(DType::F32, {1, 2, 8, 4})},
                      {}),
            "");
  EXPECT_NE(checkCuda("kv_cache_write",
                      {HostTensor(DType::F32, {1, 2, 1, 4}),
                       HostTensor(DType::I32, {}),
                       HostTensor(DType::F32, {1, 2, 8, 4})},
                      {}),
            "");
  EXPECT_EQ(checkCuda("kv_cache_write",
                      {HostTensor(DType::BF16, {1, 2, 3, 4}), positionTensor(0),
                       HostTensor(DType::BF16, {1, 2, 8, 4})},
                      {}),
            "");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
