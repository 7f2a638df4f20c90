//===- CudaCommunicationKernelsTest.cpp - ZeRO++'s wire chunks on CUDA
//-----===//
//
// quantize_wire_int8, dequantize_wire_int8 and dequantize_reduce_wire_int8,
// and the int4 pair quantize_wire_int4 and dequantize_reduce_wire_int4
// (runtime/cuda/CommunicationLaunchers.cpp) against the CPU kernels
// (runtime/cpu/CompressionKernels.cpp), bit for bit: one chunk (qwZ) and
// several (qgZ, a chunk per rank), chunks of one block and of many, values
// spanning orders of magnitude (so blocks get different scales), an
// all-zero block (scale 0, codes 0), values on a rounding tie, the average
// and the plain sum, and wire buffers at odd byte offsets (scales are read
// and written a byte at a time). The encode's bytes are decoded by the
// other two kernels too, so a wrong layout cannot hide on both sides.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/CommunicationKernels.cu"

#include "test/runtime/cuda/CudaTestUtil.h"

#include "runtime/quant/Wire.h"

#include <cmath>

namespace tailor::runtime::cuda::testing {
namespace {

constexpr Tolerance kExact{0, 0};

/// Values of `chunks` x `chunk` with a magnitude per block from 1e-6 to
/// 1e3, block 1 all zeros, and two values on a code's rounding tie.
HostTensor gradients(int64_t chunks, int64_t chunk, uint64_t seed) {
  HostTensor t = randomF32({chunks * chunk}, seed);
  float *x = t.as<float>();
  int64_t blocks = chunks * chunk / quant::kWireBlock;
  for (int64_t b = 0; b < blocks; ++b) {
    float magnitude = std::pow(10.0f, float(b % 10) - 6.0f);
    for (int64_t i = 0; i < quant::kWireBlock; ++i) {
      x[b * quant::kWireBlock + i] *= magnitude;
    }
  }
  if (blocks > 1) {
    for (int64_t i = 0; i < quant::kWireBlock; ++i) {
      x[quant::kWireBlock + i] = 0.0f;
    }
  }
  // Block 0 with absmax 127: scale 1, so 2.5 and -3.5 are ties (even: 2, -4).
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -3.5f;
  return t;
}

HostTensor wire(int64_t chunks, int64_t chunk) {
  return HostTensor(DType::U8, {chunks * quant::int8WireBytes(chunk)});
}

struct WireCase {
  int64_t chunks, chunk;
};

const WireCase kCases[] = {{1, 64},  {1, 640},  {2, 64},
                           {3, 192}, {4, 1024}, {5, 320}};

TEST_F(CudaKernelTest, QuantizeWireInt8MatchesCpu) {
  uint64_t seed = 1;
  for (const WireCase &c : kCases) {
    SCOPED_TRACE(std::to_string(c.chunks) + " chunks of " +
                 std::to_string(c.chunk));
    expectMatchesCpu(
        *backend, "quantize_wire_int8",
        {gradients(c.chunks, c.chunk, seed++), wire(c.chunks, c.chunk)},
        {intAttr("chunk", c.chunk)}, {1}, kExact);
  }
  // Without `chunk`: the whole input is one chunk.
  expectMatchesCpu(*backend, "quantize_wire_int8",
                   {gradients(1, 256, seed), wire(1, 256)}, {}, {1}, kExact);
}

TEST_F(CudaKernelTest, DequantizeWireInt8MatchesCpu) {
  uint64_t seed = 11;
  for (const WireCase &c : kCases) {
    SCOPED_TRACE(std::to_string(c.chunks) + " chunks of " +
                 std::to_string(c.chunk));
    std::vector<HostTensor> encoded =
        runCpu("quantize_wire_int8",
               {gradients(c.chunks, c.chunk, seed++), wire(c.chunks, c.chunk)},
               {intAttr("chunk", c.chunk)});
    ASSERT_EQ(encoded.size(), 2u);
    expectMatchesCpu(*backend, "dequantize_wire_int8",
                     {encoded[1], HostTensor(DType::F32, {c.chunks * c.chunk})},
                     {intAttr("chunk", c.chunk)}, {1}, kExact);
  }
}

TEST_F(CudaKernelTest, DequantizeReduceWireInt8MatchesCpu) {
  uint64_t seed = 21;
  for (const WireCase &c : kCases) {
    for (int64_t average : {0, 1}) {
      SCOPED_TRACE(std::to_string(c.chunks) + " ranks' chunks of " +
                   std::to_string(c.chunk) + ", average " +
                   std::to_string(average));
      std::vector<HostTensor> encoded = runCpu(
          "quantize_wire_int8",
          {gradients(c.chunks, c.chunk, seed++), wire(c.chunks, c.chunk)},
          {intAttr("chunk", c.chunk)});
      ASSERT_EQ(encoded.size(), 2u);
      expectMatchesCpu(*backend, "dequantize_reduce_wire_int8",
                       {encoded[1], randomF32({c.chunk}, seed++)},
                       {intAttr("chunk", c.chunk), intAttr("average", average)},
                       {1}, kExact);
    }
  }
}

HostTensor wireInt4(int64_t chunks, int64_t chunk) {
  return HostTensor(DType::U8, {chunks * quant::int4WireBytes(chunk)});
}

// Tests the int4 pair the same way: the encoder's bytes (nibbles and
// scales) and the reduction of several ranks' chunks, summed and
// averaged, bit for bit; at odd offsets too.
TEST_F(CudaKernelTest, WireInt4MatchesCpu) {
  uint64_t seed = 41;
  for (const WireCase &c : kCases) {
    SCOPED_TRACE(std::to_string(c.chunks) + " chunks of " +
                 std::to_string(c.chunk));
    HostTensor values = gradients(c.chunks, c.chunk, seed++);
    std::vector<Attribute> attributes = {intAttr("chunk", c.chunk)};
    expectMatchesCpu(*backend, "quantize_wire_int4",
                     {values, wireInt4(c.chunks, c.chunk)}, attributes, {1},
                     kExact);
    std::vector<HostTensor> encoded =
        runCpu("quantize_wire_int4", {values, wireInt4(c.chunks, c.chunk)},
               attributes);
    ASSERT_EQ(encoded.size(), 2u);
    for (int64_t average : {0, 1}) {
      std::vector<Attribute> reduce = {intAttr("chunk", c.chunk),
                                       intAttr("average", average)};
      expectMatchesCpu(*backend, "dequantize_reduce_wire_int4",
                       {encoded[1], randomF32({c.chunk}, seed++)}, reduce, {1},
                       kExact);
    }
  }
  // A block whose absmax is 7 has scale 1: 0.5 and -1.5 are ties (even: 0
  // and -2), 6.6 rounds to 7.
  HostTensor ties = randomF32({64}, 51);
  ties.as<float>()[0] = 7.0f;
  ties.as<float>()[1] = 0.5f;
  ties.as<float>()[2] = -1.5f;
  ties.as<float>()[3] = 6.6f;
  expectMatchesCpu(*backend, "quantize_wire_int4", {ties, wireInt4(1, 64)},
                   {intAttr("chunk", 64)}, {1}, kExact);
  std::vector<HostTensor> shifted =
      runShifted(*backend, "quantize_wire_int4", {ties, wireInt4(1, 64)},
                 {intAttr("chunk", 64)}, 3);
  std::vector<HostTensor> want = runCpu(
      "quantize_wire_int4", {ties, wireInt4(1, 64)}, {intAttr("chunk", 64)});
  ASSERT_EQ(shifted.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  expectSameBits(shifted[1], want[1]);
}

// Tests that wire buffers at odd byte offsets encode and decode the same
// bytes and values (scales straddle 4-byte boundaries there).
TEST_F(CudaKernelTest, WireChunksAtOddOffsetsMatchCpu) {
  const int64_t chunks = 3, chunk = 128;
  HostTensor values = gradients(chunks, chunk, 31);
  std::vector<Attribute> attributes = {intAttr("chunk", chunk)};
  std::vector<HostTensor> want =
      runCpu("quantize_wire_int8", {values, wire(chunks, chunk)}, attributes);
  ASSERT_EQ(want.size(), 2u);
  std::vector<HostTensor> got =
      runShifted(*backend, "quantize_wire_int8", {values, wire(chunks, chunk)},
                 attributes, 1);
  ASSERT_EQ(got.size(), 2u);
  expectSameBits(got[1], want[1]);

  std::vector<HostTensor> decoded = runShifted(
      *backend, "dequantize_wire_int8",
      {want[1], HostTensor(DType::F32, {chunks * chunk})}, attributes, 1);
  std::vector<HostTensor> reference =
      runCpu("dequantize_wire_int8",
             {want[1], HostTensor(DType::F32, {chunks * chunk})}, attributes);
  ASSERT_EQ(decoded.size(), 2u);
  ASSERT_EQ(reference.size(), 2u);
  expectSameBits(decoded[1], reference[1]);

  attributes.push_back(intAttr("average", 1));
  std::vector<HostTensor> reduced =
      runShifted(*backend, "dequantize_reduce_wire_int8",
                 {want[1], HostTensor(DType::F32, {chunk})}, attributes, 1);
  std::vector<HostTensor> sums =
      runCpu("dequantize_reduce_wire_int8",
             {want[1], HostTensor(DType::F32, {chunk})}, attributes);
  ASSERT_EQ(reduced.size(), 2u);
  ASSERT_EQ(sums.size(), 2u);
  expectSameBits(reduced[1], sums[1]);
}

// Tests that the CUDA launchers refuse what the CPU kernels refuse, with
// their words: a chunk that is not whole blocks, a wire of the wrong size.
TEST(CudaCommunicationChecks, RefuseWhatTheCpuRefuses) {
  EXPECT_NE(checkCuda("quantize_wire_int8",
                      {HostTensor(DType::F32, {96}), wire(1, 96)},
                      {intAttr("chunk", 96)}),
            "");
  EXPECT_NE(
      checkCuda("dequantize_wire_int8",
                {HostTensor(DType::U8, {10}), HostTensor(DType::F32, {64})},
                {intAttr("chunk", 64)}),
      "");
  EXPECT_NE(checkCuda("dequantize_reduce_wire_int8",
                      {wire(2, 64), HostTensor(DType::F32, {64})}, {}),
            "");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
