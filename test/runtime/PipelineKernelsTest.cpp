//===- PipelineKernelsTest.cpp - a pipeline stage's input slots -----------===//
//
// pipeline_slot_write and pipeline_slot_read (runtime/cpu/PipelineKernels.cpp)
// against index loops written here: exact bits (they only move bytes), the
// other slots untouched, slots outside the state refused when they run.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

TEST(PipelineKernelsTest, WritesAndReadsOneSlot) {
  const int64_t slots = 3, rows = 2, cols = 5, n = rows * cols;
  Buffer state = randomBuffer({slots, rows, cols}, -1, 1, 3);
  Buffer before = state;
  Buffer value = randomBuffer({rows, cols}, -1, 1, 4);
  Buffer slot = scalar(DType::I64, 1);
  ASSERT_EQ(runKernel("pipeline_slot_write", {&value, &slot, &state}), "");
  for (int64_t s = 0; s < slots; ++s) {
    for (int64_t i = 0; i < n; ++i) {
      double want = s == 1 ? value.at(i) : before.at(s * n + i);
      ASSERT_EQ(state.at(s * n + i), want) << "slot " << s << " element " << i;
    }
  }
  for (int64_t s = 0; s < slots; ++s) {
    Buffer read(DType::F32, {rows, cols});
    Buffer which = scalar(DType::I64, double(s));
    ASSERT_EQ(runKernel("pipeline_slot_read", {&state, &which, &read}), "");
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(read.at(i), state.at(s * n + i)) << "slot " << s;
    }
  }
}

TEST(PipelineKernelsTest, RefusesSlotsOutsideTheState) {
  Buffer state(DType::F32, {2, 4});
  Buffer value(DType::F32, {4});
  const KernelDef *write = findCpuKernel("pipeline_slot_write");
  const KernelDef *read = findCpuKernel("pipeline_slot_read");
  ASSERT_NE(write, nullptr);
  ASSERT_NE(read, nullptr);
  Buffer past = scalar(DType::I64, 2);
  Buffer negative = scalar(DType::I64, -1);
  EXPECT_EQ(write->run(makeCall({&value, &past, &state}, {}, &pool1())),
            "slot 2 is outside [0, 2)");
  EXPECT_EQ(read->run(makeCall({&state, &negative, &value}, {}, &pool1())),
            "slot -1 is outside [0, 2)");
}

TEST(PipelineKernelsTest, ChecksShapesAndTypes) {
  Buffer state(DType::F32, {2, 4});
  Buffer value(DType::F32, {4});
  Buffer longer(DType::F32, {5});
  Buffer doubles(DType::F64, {4});
  Buffer slot = scalar(DType::I64, 0);
  Buffer wrongSlot = scalar(DType::I32, 0);
  EXPECT_EQ(checkKernel("pipeline_slot_write", {&value, &slot, &state}), "");
  EXPECT_EQ(checkKernel("pipeline_slot_read", {&state, &slot, &value}), "");
  EXPECT_NE(checkKernel("pipeline_slot_write", {&longer, &slot, &state}), "");
  EXPECT_NE(checkKernel("pipeline_slot_write", {&doubles, &slot, &state}), "");
  EXPECT_NE(checkKernel("pipeline_slot_read", {&state, &wrongSlot, &value}),
            "");
}
