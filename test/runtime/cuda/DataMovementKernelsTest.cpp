//===- DataMovementKernelsTest.cpp - CUDA transpose, slice, ..., rope -----===//
//
// Every launcher of runtime/cuda/DataMovementLaunchers.cpp against the CPU
// kernel of the same name. Byte-moving kernels must match bit for bit for
// every element size (1, 2, 4, 8 bytes) and reach both gather paths
// (strided and tiled) and every copy unit; rope covers both layouts, both
// table shapes and mixed f32/bf16 storage. The gathers, scatters (every
// reduction, repeated indices), cumsum, mod and sign run at odd sizes and
// must match the CPU kernels exactly (mod within f32 ulps: the device's
// fmodf), with negative indices. A bad id or index, and mod by an integer
// 0, must set the device error record (value, position, bound, the step),
// stay inside the tensors, and fail the launch with the CPU kernel's
// message; good ones must leave the record clear.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/DataMovementKernels.cu"

#include "test/runtime/cuda/CudaTestUtil.h"

#include <cstring>

namespace tailor::runtime::cuda::testing {
namespace {

constexpr Tolerance kExact{0, 0};
constexpr Tolerance kF32{1e-6, 1e-6};
constexpr Tolerance kBf16{1e-2, 1e-2};

/// A tensor of `dtype` with distinct-looking values (bit patterns for the
/// integer and bool types, bf16-rounded floats for bf16).
HostTensor sample(DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  switch (dtype) {
  case DType::F32:
    return randomF32(std::move(shape), seed);
  case DType::BF16:
    return converted(randomF32(std::move(shape), seed), DType::BF16);
  case DType::Bool:
    return converted(randomInts(std::move(shape), seed, 0, 2), DType::Bool);
  case DType::U8:
    return converted(randomInts(std::move(shape), seed, 0, 256), DType::U8);
  case DType::I32:
    return randomInts(std::move(shape), seed, -100000, 100000, DType::I32);
  default:
    return randomInts(std::move(shape), seed, -(int64_t(1) << 40),
                      int64_t(1) << 40, DType::I64);
  }
}

/// One dtype per element size, plus bf16.
const DType kDTypes[] = {DType::U8, DType::BF16, DType::F32, DType::I64,
                         DType::Bool};

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

void expectTranspose(TestBackend &backend, HostTensor x,
                     std::vector<int64_t> perm) {
  SCOPED_TRACE(std::string("transpose ") + dtypeName(x.dtype));
  std::vector<int64_t> shape;
  for (int64_t p : perm) {
    shape.push_back(x.shape[p]);
  }
  expectMatchesCpu(backend, "transpose", {x, HostTensor(x.dtype, shape)},
                   {intsAttr("permutation", perm)}, {1}, kExact);
}

TEST_F(CudaKernelTest, TransposeTwoDims) {
  // Tiled: sizes below, at and beyond one 32 x 32 tile.
  for (DType dtype : kDTypes) {
    expectTranspose(*backend, sample(dtype, {67, 45}, 1), {1, 0});
    expectTranspose(*backend, sample(dtype, {32, 32}, 2), {1, 0});
    expectTranspose(*backend, sample(dtype, {3, 100}, 3), {1, 0});
  }
  expectTranspose(*backend, sample(DType::F32, {1, 40}, 4), {1, 0});
}

TEST_F(CudaKernelTest, TransposeFourDims) {
  for (DType dtype : kDTypes) {
    // [B, H, T, D] -> [B, T, H, D]: rows of D, the strided path.
    expectTranspose(*backend, sample(dtype, {2, 3, 5, 7}, 5), {0, 2, 1, 3});
    // The same with runs that widen to 4-, 8- or 16-byte units.
    expectTranspose(*backend, sample(dtype, {2, 3, 5, 16}, 5), {0, 2, 1, 3});
    expectTranspose(*backend, sample(dtype, {2, 3, 5, 4}, 5), {0, 2, 1, 3});
    // The last two swapped per (B, H): tiled with outer dimensions.
    expectTranspose(*backend, sample(dtype, {2, 3, 40, 33}, 6), {0, 1, 3, 2});
    // Full reversal: x's unit-stride dimension lands first in y.
    expectTranspose(*backend, sample(dtype, {4, 3, 5, 6}, 7), {3, 2, 1, 0});
  }
  expectTranspose(*backend, sample(DType::F32, {2, 3, 5, 7}, 8), {1, 3, 0, 2});
  expectTranspose(*backend, sample(DType::F32, {2, 3, 5, 7}, 9), {2, 0, 3, 1});
  // Identity and extent-1 dimensions merge away.
  expectTranspose(*backend, sample(DType::F32, {2, 1, 5, 7}, 10), {0, 1, 2, 3});
  expectTranspose(*backend, sample(DType::F32, {2, 1, 5, 1}, 11), {3, 2, 1, 0});
  expectTranspose(*backend, sample(DType::F32, {9}, 12), {0});
}

//===----------------------------------------------------------------------===//
// slice
//===----------------------------------------------------------------------===//

void expectSlice(TestBackend &backend, HostTensor x,
                 std::vector<int64_t> starts, std::vector<int64_t> steps,
                 std::vector<int64_t> shape) {
  SCOPED_TRACE(std::string("slice ") + dtypeName(x.dtype));
  expectMatchesCpu(backend, "slice", {x, HostTensor(x.dtype, shape)},
                   {intsAttr("starts", starts), intsAttr("steps", steps)}, {1},
                   kExact);
}

TEST_F(CudaKernelTest, Slice) {
  for (DType dtype : kDTypes) {
    expectSlice(*backend, sample(dtype, {10, 12, 9}, 20), {1, 0, 2}, {2, 3, 1},
                {4, 4, 7});
    expectSlice(*backend, sample(dtype, {10, 12, 9}, 21), {0, 5, 0}, {1, 1, 1},
                {10, 7, 9});
    expectSlice(*backend, sample(dtype, {100}, 22), {3}, {7}, {14});
    expectSlice(*backend, sample(dtype, {2, 3, 8, 16}, 23), {1, 0, 1, 0},
                {1, 2, 3, 2}, {1, 2, 3, 8});
  }
  // Empty result.
  expectSlice(*backend, sample(DType::F32, {4, 5}, 24), {0, 0}, {1, 1}, {0, 5});
}

//===----------------------------------------------------------------------===//
// concat, split
//===----------------------------------------------------------------------===//

/// Three pieces along `axis` of a tensor shaped `shape` (the pieces split
/// the axis into sizes `parts`), concatenated and split back.
void expectPieces(TestBackend &backend, DType dtype, std::vector<int64_t> shape,
                  int64_t axis, std::vector<int64_t> parts, uint64_t seed) {
  SCOPED_TRACE(std::string("axis ") + std::to_string(axis) + " " +
               dtypeName(dtype));
  std::vector<HostTensor> concat;
  std::vector<size_t> pieceIndices;
  std::vector<HostTensor> split = {sample(dtype, shape, seed)};
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<int64_t> s = shape;
    s[axis] = parts[i];
    concat.push_back(sample(dtype, s, seed + 1 + i));
    split.push_back(HostTensor(dtype, s));
    pieceIndices.push_back(i + 1);
  }
  concat.push_back(HostTensor(dtype, shape));
  expectMatchesCpu(backend, "concat", concat, {intAttr("axis", axis)},
                   {parts.size()}, kExact);
  expectMatchesCpu(backend, "split", split, {intAttr("axis", axis)},
                   pieceIndices, kExact);
}

TEST_F(CudaKernelTest, ConcatAndSplit) {
  for (DType dtype : kDTypes) {
    // Outer axis: contiguous pieces, plain copies.
    expectPieces(*backend, dtype, {9, 5, 4}, 0, {2, 3, 4}, 30);
    // Middle and last axes: row copies in every unit width.
    expectPieces(*backend, dtype, {3, 9, 4}, 1, {2, 3, 4}, 31);
    expectPieces(*backend, dtype, {4, 3, 13}, 2, {5, 1, 7}, 32);
    expectPieces(*backend, dtype, {2, 6, 32}, 2, {8, 16, 8}, 33);
  }
  // An empty piece, and a rank-1 whole.
  expectPieces(*backend, DType::F32, {4, 9}, 1, {4, 0, 5}, 34);
  expectPieces(*backend, DType::F32, {12}, 0, {5, 4, 3}, 35);
}

//===----------------------------------------------------------------------===//
// broadcast, copy
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, Broadcast) {
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    auto expect = [&](std::vector<int64_t> from, std::vector<int64_t> to) {
      expectMatchesCpu(*backend, "broadcast",
                       {sample(dtype, from, 40), HostTensor(dtype, to)}, {},
                       {1}, kExact);
    };
    expect({3, 1, 5}, {2, 3, 4, 5});
    expect({1}, {7, 3});
    expect({4, 1}, {4, 37}); // a column spread: the tiled path
    expect({6}, {5, 6});
    expect({2, 3}, {2, 3});
  }
}

TEST_F(CudaKernelTest, Copy) {
  for (DType dtype : kDTypes) {
    HostTensor x = sample(dtype, {5, 7}, 50);
    expectMatchesCpu(*backend, "copy", {x, HostTensor(dtype, {35})}, {}, {1},
                     kExact);
  }
  EXPECT_EQ(
      checkCuda("copy",
                {HostTensor(DType::F32, {4}), HostTensor(DType::I64, {4})}, {}),
      "copy of 16 bytes into 32");
}

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, Embedding) {
  // Row sizes that move in 16-, 4- and 2-byte units.
  for (int64_t d : {64, 37, 6}) {
    for (DType table : {DType::F32, DType::BF16}) {
      for (DType ids : {DType::I32, DType::I64}) {
        SCOPED_TRACE(std::string("d ") + std::to_string(d) + " " +
                     dtypeName(table) + " " + dtypeName(ids));
        expectMatchesCpu(*backend, "embedding",
                         {sample(table, {50, d}, 60),
                          randomInts({3, 5}, 61, 0, 50, ids),
                          HostTensor(table, {3, 5, d})},
                         {}, {2}, kExact);
      }
    }
  }
}

/// `values` as an index tensor of `dtype`.
HostTensor indexTensor(std::vector<int64_t> shape, std::vector<int64_t> values,
                       DType dtype) {
  HostTensor t(DType::I64, std::move(shape));
  std::memcpy(t.data(), values.data(), values.size() * sizeof(int64_t));
  return converted(t, dtype);
}

TEST_F(CudaKernelTest, EmbeddingReportsAnOutOfRangeId) {
  HostTensor table = randomF32({10, 8}, 62, 1, 2); // no zeros
  HostTensor y = randomF32({4, 8}, 63);
  for (DType dtype : {DType::I32, DType::I64}) {
    for (int64_t bad : {int64_t(10), int64_t(-1)}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " id " +
                   std::to_string(bad));
      HostTensor ids = indexTensor({4}, {0, 3, bad, 9}, dtype);
      // The bad id's row is zero (nothing read outside the table), the
      // others are copied.
      std::vector<HostTensor> out = {table, ids, y};
      runCudaForError(*backend, "embedding", out, {}, 7);
      for (int64_t i = 0; i < 4; ++i) {
        int64_t id = i == 0 ? 0 : i == 1 ? 3 : 9;
        for (int64_t j = 0; j < 8; ++j) {
          float want = i == 2 ? 0.0f : table.as<float>()[id * 8 + j];
          EXPECT_EQ(out[2].as<float>()[i * 8 + j], want)
              << "row " << i << " column " << j;
        }
      }
      expectDeviceError(*backend, "embedding", {table, ids, y}, {},
                        {tl::kEmbeddingId, 7, bad, 2, 10});
      // The CPU kernel fails the same launch with the same message.
      EXPECT_EQ(cpuRunError("embedding", {table, ids, y}, {}),
                describeDeviceError({tl::kEmbeddingId, 7, bad, 2, 10}));
    }
  }
  EXPECT_EQ(describeDeviceError({tl::kEmbeddingId, 7, -1, 2, 10}),
            "token id -1 at position 2 is out of range [0, 10)");
}

TEST_F(CudaKernelTest, EmbeddingIdsOfSeveralBlocksReportOneOfThem) {
  // Ids 5 and 70 bad among 300 rows: whichever block claims the record
  // first, it holds one bad id with its own position.
  HostTensor table = converted(randomF32({64, 24}, 64), DType::BF16);
  HostTensor ids = randomInts({300}, 65, 0, 64, DType::I64);
  ids.as<int64_t>()[5] = 64;
  ids.as<int64_t>()[70] = -65;
  std::vector<HostTensor> out = {table, ids,
                                 HostTensor(DType::BF16, {300, 24})};
  DeviceErrorRecord got = runCudaForError(*backend, "embedding", out, {}, 3);
  EXPECT_EQ(got.code, tl::kEmbeddingId);
  EXPECT_EQ(got.site, 3);
  EXPECT_EQ(got.bound, 64);
  EXPECT_TRUE(got.position == 5 || got.position == 70) << got.position;
  EXPECT_EQ(got.value, ids.as<int64_t>()[got.position]);
}

TEST_F(CudaKernelTest, EmbeddingChecks) {
  EXPECT_EQ(
      checkCuda("embedding",
                {HostTensor(DType::BF16, {10, 4}), HostTensor(DType::I64, {3}),
                 HostTensor(DType::F32, {3, 4})},
                {}),
      "operand 2 must be bf16 like operand 0, got f32");
  EXPECT_EQ(
      checkCuda("embedding",
                {HostTensor(DType::F32, {10, 4}), HostTensor(DType::F32, {3}),
                 HostTensor(DType::F32, {3, 4})},
                {}),
      "operand 1 must be i32 or i64, got f32");
}

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

TEST_F(CudaKernelTest, Rope) {
  const int64_t b = 2, h = 3, t = 5;
  for (int64_t d : {8, 64, 6}) {
    for (bool perBatch : {false, true}) {
      for (int64_t interleaved : {0, 1}) {
        std::vector<int64_t> table = perBatch ? std::vector<int64_t>{b, t, d}
                                              : std::vector<int64_t>{t, d};
        for (DType x : {DType::F32, DType::BF16}) {
          for (DType c : {DType::F32, DType::BF16}) {
            SCOPED_TRACE(std::string("d ") + std::to_string(d) + " per batch " +
                         std::to_string(perBatch) + " interleaved " +
                         std::to_string(interleaved) + " x " + dtypeName(x) +
                         " tables " + dtypeName(c));
            bool f32 = x == DType::F32;
            expectMatchesCpu(
                *backend, "rope",
                {sample(x, {b, h, t, d}, 70), sample(c, table, 71),
                 sample(c, table, 72), HostTensor(x, {b, h, t, d})},
                {intAttr("interleaved", interleaved)}, {3}, f32 ? kF32 : kBf16);
          }
        }
      }
    }
  }
}

TEST_F(CudaKernelTest, RopeChecks) {
  HostTensor x(DType::BF16, {1, 2, 3, 4}), c(DType::F32, {3, 4});
  EXPECT_EQ(checkCuda("rope",
                      {x, c, HostTensor(DType::BF16, {3, 4}),
                       HostTensor(DType::BF16, {1, 2, 3, 4})},
                      {}),
            "operand 2 must be f32 like operand 1, got bf16");
  EXPECT_EQ(
      checkCuda("rope", {x, c, c, HostTensor(DType::BF16, {1, 2, 3, 4})}, {}),
      "");
}

//===----------------------------------------------------------------------===//
// gather_elements, scatter_elements, gather_nd, scatter_nd, cumsum, mod, sign
//===----------------------------------------------------------------------===//

/// Random indices in [-n, n) (negative ones count from the end).
HostTensor indicesIn(std::vector<int64_t> shape, uint64_t seed, int64_t n,
                     DType dtype) {
  return randomInts(std::move(shape), seed, -n, n, dtype);
}

TEST_F(CudaKernelTest, GatherElementsEveryAxisAndSize) {
  // Odd sizes, indices smaller than the data outside the axis.
  std::vector<int64_t> shape{3, 7, 5};
  for (DType dtype : kDTypes) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      for (DType index : {DType::I32, DType::I64}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " axis " +
                     std::to_string(axis) + " " + dtypeName(index));
        std::vector<int64_t> is{2, 5, 3};
        is[axis] = 9;
        expectMatchesCpu(*backend, "gather_elements",
                         {sample(dtype, shape, 70 + axis),
                          indicesIn(is, 71 + axis, shape[axis], index),
                          HostTensor(dtype, is)},
                         {intAttr("axis", axis)}, {2}, kExact);
      }
    }
  }
}

TEST_F(CudaKernelTest, ScatterElementsEveryReduction) {
  std::vector<int64_t> shape{4, 3, 5};
  for (const char *reduction : {"none", "add", "mul", "max", "min"}) {
    bool typed = std::string(reduction) != "none";
    for (DType dtype :
         typed ? std::vector<DType>{DType::F32, DType::I64, DType::I32}
               : std::vector<DType>{DType::U8, DType::BF16, DType::F32,
                                    DType::I64}) {
      for (int64_t axis = 0; axis < 3; ++axis) {
        SCOPED_TRACE(std::string(reduction) + " " + dtypeName(dtype) +
                     " axis " + std::to_string(axis));
        std::vector<int64_t> is{3, 2, 5};
        is[axis] = 7; // repeated indices combine in order
        HostTensor updates = dtype == DType::I32
                                 ? randomInts(is, 81 + axis, -4, 5, DType::I32)
                                 : sample(dtype, is, 81 + axis);
        expectMatchesCpu(
            *backend, "scatter_elements",
            {sample(dtype, shape, 80 + axis),
             indicesIn(is, 82 + axis, shape[axis], DType::I64), updates,
             HostTensor(dtype, shape)},
            {intAttr("axis", axis), stringAttr("reduction", reduction)}, {3},
            kExact);
      }
    }
  }
}

TEST_F(CudaKernelTest, GatherNDWithBatchDims) {
  for (DType dtype : kDTypes) {
    for (int64_t batch : {0, 1}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " batch_dims " +
                   std::to_string(batch));
      // data [3, 5, 7, 3], tuples of 2 after the batch dims.
      std::vector<int64_t> shape{3, 5, 7, 3};
      HostTensor indices(DType::I64, batch ? std::vector<int64_t>{3, 4, 2}
                                           : std::vector<int64_t>{6, 2});
      HostTensor first =
          indicesIn({indices.numel() / 2}, 90, shape[batch], DType::I64);
      HostTensor second =
          indicesIn({indices.numel() / 2}, 91, shape[batch + 1], DType::I64);
      for (int64_t t = 0; t < indices.numel() / 2; ++t) {
        indices.as<int64_t>()[2 * t] = first.as<int64_t>()[t];
        indices.as<int64_t>()[2 * t + 1] = second.as<int64_t>()[t];
      }
      std::vector<int64_t> out =
          batch ? std::vector<int64_t>{3, 4, 3} : std::vector<int64_t>{6, 7, 3};
      expectMatchesCpu(
          *backend, "gather_nd",
          {sample(dtype, shape, 92), indices, HostTensor(dtype, out)},
          {intAttr("batch_dims", batch)}, {2}, kExact);
    }
  }
}

TEST_F(CudaKernelTest, ScatterNDEveryReductionInOrder) {
  for (const char *reduction : {"none", "add", "mul", "max", "min"}) {
    for (DType dtype : {DType::F32, DType::I64}) {
      for (int64_t batch : {0, 1}) {
        SCOPED_TRACE(std::string(reduction) + " " + dtypeName(dtype) +
                     " batch_dims " + std::to_string(batch));
        // data [3, 9, 5]; 11 tuples of 1 per batch (repeats likely).
        std::vector<int64_t> shape{3, 9, 5};
        std::vector<int64_t> is = batch ? std::vector<int64_t>{3, 11, 1}
                                        : std::vector<int64_t>{11, 1};
        std::vector<int64_t> us = batch ? std::vector<int64_t>{3, 11, 5}
                                        : std::vector<int64_t>{11, 9, 5};
        expectMatchesCpu(
            *backend, "scatter_nd",
            {sample(dtype, shape, 100),
             indicesIn(is, 101, shape[batch], DType::I32),
             sample(dtype, us, 102), HostTensor(dtype, shape)},
            {stringAttr("reduction", reduction), intAttr("batch_dims", batch)},
            {3}, kExact);
      }
    }
  }
}

TEST_F(CudaKernelTest, GatherAndScatterElementsReportABadIndex) {
  // data [3, 4] along axis 0: -3 is row 0, 3 (position 2) is out of range.
  HostTensor data = randomF32({3, 4}, 110, 1, 2);
  HostTensor updates = randomF32({1, 4}, 111, 5, 6);
  std::vector<Attribute> axis0 = {intAttr("axis", 0)};
  for (DType dtype : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(dtype));
    HostTensor indices = indexTensor({1, 4}, {0, -3, 3, 2}, dtype);
    // The gather writes zero for the bad index and nothing else changes.
    std::vector<HostTensor> out = {data, indices,
                                   HostTensor(DType::F32, {1, 4})};
    runCudaForError(*backend, "gather_elements", out, axis0, 5);
    const float *x = data.as<float>();
    EXPECT_EQ(out[2].as<float>()[0], x[0]);
    EXPECT_EQ(out[2].as<float>()[1], x[1]);
    EXPECT_EQ(out[2].as<float>()[2], 0.0f);
    EXPECT_EQ(out[2].as<float>()[3], x[2 * 4 + 3]);
    DeviceErrorRecord want{tl::kGatherElementsIndex, 5, 3, 2, 3};
    expectDeviceError(*backend, "gather_elements",
                      {data, indices, HostTensor(DType::F32, {1, 4})}, axis0,
                      want);
    EXPECT_EQ(cpuRunError("gather_elements",
                          {data, indices, HostTensor(DType::F32, {1, 4})},
                          axis0),
              describeDeviceError(want));
    // The scatter skips it.
    out = {data, indices, updates, HostTensor(DType::F32, {3, 4})};
    runCudaForError(*backend, "scatter_elements", out, axis0, 6);
    for (int64_t i = 0; i < 12; ++i) {
      float want = i == 0   ? updates.as<float>()[0]
                   : i == 1 ? updates.as<float>()[1]
                   : i == 11 ? updates.as<float>()[3]
                             : x[i];
      EXPECT_EQ(out[3].as<float>()[i], want) << "element " << i;
    }
    want = {tl::kScatterElementsIndex, 6, 3, 2, 3};
    std::vector<HostTensor> operands = {data, indices, updates,
                                        HostTensor(DType::F32, {3, 4})};
    expectDeviceError(*backend, "scatter_elements", operands, axis0, want);
    EXPECT_EQ(cpuRunError("scatter_elements", operands, axis0),
              describeDeviceError(want));
  }
  EXPECT_EQ(describeDeviceError({tl::kGatherElementsIndex, 5, 3, 2, 3}),
            "gather_elements: index 3 at position 2 is out of range [-3, 3)");
}

TEST_F(CudaKernelTest, GatherAndScatterNDReportABadIndex) {
  // data [3, 4], tuples (1, -4) and (2, 4): the 4 (position 3) is out of
  // the second dimension's range.
  HostTensor data = randomF32({3, 4}, 112, 1, 2);
  HostTensor updates = randomF32({2}, 113, 5, 6);
  for (DType dtype : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(dtype));
    HostTensor indices = indexTensor({2, 2}, {1, -4, 2, 4}, dtype);
    std::vector<HostTensor> out = {data, indices, HostTensor(DType::F32, {2})};
    runCudaForError(*backend, "gather_nd", out, {}, 8);
    EXPECT_EQ(out[2].as<float>()[0], data.as<float>()[1 * 4 + 0]);
    EXPECT_EQ(out[2].as<float>()[1], 0.0f);
    DeviceErrorRecord want{tl::kGatherNdIndex, 8, 4, 3, 4};
    std::vector<HostTensor> operands = {data, indices,
                                        HostTensor(DType::F32, {2})};
    expectDeviceError(*backend, "gather_nd", operands, {}, want);
    EXPECT_EQ(cpuRunError("gather_nd", operands, {}),
              describeDeviceError(want));

    out = {data, indices, updates, HostTensor(DType::F32, {3, 4})};
    runCudaForError(*backend, "scatter_nd", out, {}, 9);
    for (int64_t i = 0; i < 12; ++i) {
      float want = i == 4 ? updates.as<float>()[0] : data.as<float>()[i];
      EXPECT_EQ(out[3].as<float>()[i], want) << "element " << i;
    }
    want = {tl::kScatterNdIndex, 9, 4, 3, 4};
    operands = {data, indices, updates, HostTensor(DType::F32, {3, 4})};
    expectDeviceError(*backend, "scatter_nd", operands, {}, want);
    EXPECT_EQ(cpuRunError("scatter_nd", operands, {}),
              describeDeviceError(want));
    // Typed reductions take the same path.
    std::vector<Attribute> add = {stringAttr("reduction", "add")};
    expectDeviceError(*backend, "scatter_nd", operands, add, want);
  }
}

TEST_F(CudaKernelTest, ModByAnIntegerZeroIsReported) {
  for (DType dtype : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(dtype));
    // b broadcasts over a's rows: its element 2 is read twice.
    HostTensor a = indexTensor({2, 4}, {7, -7, 5, 9, 1, 2, 3, 4}, dtype);
    HostTensor b = indexTensor({4}, {3, -2, 0, 4}, dtype);
    std::vector<HostTensor> operands = {a, b, HostTensor(dtype, {2, 4})};
    DeviceErrorRecord want{tl::kModByZero, 4, 0, 2, 0};
    expectDeviceError(*backend, "mod", operands, {}, want);
    EXPECT_EQ(cpuRunError("mod", operands, {}), describeDeviceError(want));
  }
  // A float 0 divides to NaN, as on the CPU: nothing to report.
  std::vector<HostTensor> operands = {
      randomF32({4}, 133), HostTensor(DType::F32, {4}),
      HostTensor(DType::F32, {4})};
  EXPECT_EQ(runCudaForError(*backend, "mod", operands, {}, 4).code,
            tl::kNoError);
}

TEST_F(CudaKernelTest, GoodIndicesLeaveTheErrorRecordClear) {
  HostTensor data = randomF32({3, 4}, 114);
  HostTensor rows = indexTensor({1, 4}, {0, -3, 2, -1}, DType::I64);
  HostTensor tuples = indexTensor({2, 2}, {1, -4, 2, 3}, DType::I32);
  struct Case {
    const char *kernel;
    std::vector<HostTensor> operands;
    std::vector<Attribute> attributes;
  };
  std::vector<Case> cases = {
      {"embedding",
       {data, indexTensor({3}, {0, 2, 1}, DType::I32),
        HostTensor(DType::F32, {3, 4})},
       {}},
      {"gather_elements", {data, rows, HostTensor(DType::F32, {1, 4})},
       {intAttr("axis", 0)}},
      {"scatter_elements",
       {data, rows, randomF32({1, 4}, 115), HostTensor(DType::F32, {3, 4})},
       {intAttr("axis", 0)}},
      {"gather_nd", {data, tuples, HostTensor(DType::F32, {2})}, {}},
      {"scatter_nd",
       {data, tuples, randomF32({2}, 116), HostTensor(DType::F32, {3, 4})},
       {}},
      {"mod",
       {indexTensor({3}, {5, -5, 0}, DType::I64),
        indexTensor({3}, {3, 3, -1}, DType::I64), HostTensor(DType::I64, {3})},
       {}},
  };
  for (Case &c : cases) {
    DeviceErrorRecord got =
        runCudaForError(*backend, c.kernel, c.operands, c.attributes, 11);
    EXPECT_EQ(got.code, tl::kNoError) << c.kernel;
    EXPECT_EQ(got.site, 0) << c.kernel;
    EXPECT_EQ(got.value, 0) << c.kernel;
    EXPECT_EQ(got.position, 0) << c.kernel;
    EXPECT_EQ(got.bound, 0) << c.kernel;
  }
}

TEST(DeviceErrorText, ClearAndUnknownRecords) {
  EXPECT_EQ(describeDeviceError({tl::kNoError, 0, 0, 0, 0}), "");
  // A code from newer device code is named, not dropped.
  EXPECT_EQ(describeDeviceError({42, 3, 1, 2, 5}),
            "a kernel reported error code 42, which this runtime does not "
            "know (value 1, position 2, bound 5)");
}

TEST_F(CudaKernelTest, CumsumEveryAxisAndDirection) {
  for (DType dtype : {DType::F32, DType::I64, DType::I32}) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      for (int flags = 0; flags < 4; ++flags) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " axis " +
                     std::to_string(axis) + " flags " + std::to_string(flags));
        std::vector<int64_t> shape{3, 17, 5};
        expectMatchesCpu(
            *backend, "cumsum",
            {sample(dtype, shape, 120 + axis), HostTensor(dtype, shape)},
            {intAttr("axis", axis), intAttr("exclusive", flags & 1),
             intAttr("reverse", flags >> 1)},
            {1}, kExact);
      }
    }
  }
}

TEST_F(CudaKernelTest, ModAndSign) {
  for (DType dtype : {DType::F32, DType::I64, DType::I32}) {
    for (int fmod : {0, 1}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " fmod " +
                   std::to_string(fmod));
      HostTensor a = dtype == DType::F32
                         ? randomF32({5, 1, 7}, 130, -20, 20)
                         : randomInts({5, 1, 7}, 130, -50, 50, dtype);
      // Non-zero divisors of both signs.
      HostTensor b = dtype == DType::F32 ? randomF32({3, 7}, 131, 0.5, 6)
                                         : randomInts({3, 7}, 131, 1, 9, dtype);
      for (int64_t i = 0; i < b.numel(); i += 2) {
        if (dtype == DType::F32) {
          b.as<float>()[i] = -b.as<float>()[i];
        } else if (dtype == DType::I32) {
          b.as<int32_t>()[i] = -b.as<int32_t>()[i];
        } else {
          b.as<int64_t>()[i] = -b.as<int64_t>()[i];
        }
      }
      expectMatchesCpu(*backend, "mod", {a, b, HostTensor(dtype, {5, 3, 7})},
                       {intAttr("fmod", fmod)}, {2}, kF32);
    }
    HostTensor x = dtype == DType::F32 ? randomF32({37}, 132)
                                       : randomInts({37}, 132, -3, 4, dtype);
    expectMatchesCpu(*backend, "sign", {x, HostTensor(dtype, {37})}, {}, {1},
                     kExact);
  }
}

TEST_F(CudaKernelTest, IndexingChecks) {
  // bf16 has no arithmetic here: the CPU view would read it as f32.
  EXPECT_EQ(
      checkCuda("cumsum",
                {HostTensor(DType::BF16, {4}), HostTensor(DType::BF16, {4})},
                {intAttr("axis", 0)}),
      "operand 0 must be f32, f64, i32 or i64, got bf16");
  EXPECT_EQ(
      checkCuda("scatter_nd",
                {HostTensor(DType::BF16, {4}), HostTensor(DType::I64, {2, 1}),
                 HostTensor(DType::BF16, {2}), HostTensor(DType::BF16, {4})},
                {stringAttr("reduction", "add")}),
      "operand 0 must be f32, f64, i32 or i64, got bf16");
  EXPECT_EQ(
      checkCuda("gather_nd",
                {HostTensor(DType::F32, std::vector<int64_t>(9, 1)),
                 HostTensor(DType::I64, {1, 9}), HostTensor(DType::F32, {1})},
                {}),
      "index tuples of length 9, at most 8 supported");
  EXPECT_EQ(checkCuda("cumsum",
                      {HostTensor(DType::F32, {4}), HostTensor(DType::I64, {}),
                       HostTensor(DType::F32, {4})},
                      {}),
            "cumsum with a run-time axis (operand 1) runs on the CPU backend "
            "only: the CUDA launcher needs the axis on the host");
}

} // namespace
} // namespace tailor::runtime::cuda::testing
