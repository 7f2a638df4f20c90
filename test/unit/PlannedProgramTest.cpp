//===- PlannedProgramTest.cpp - what the planner stores for a tensor ------===//

#include "passes/memory/PlannedProgram.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using tailor::memory::storageBytes;

namespace {

TEST(StorageBytes, PacksSubByteTypesAndKeepsBooleansWhole) {
  MLIRContext context;
  Builder b(&context);
  auto tensor = [&](ArrayRef<int64_t> shape, Type element) {
    return RankedTensorType::get(shape, element);
  };
  // A 4-bit tensor of N elements takes ceil(N * 4 / 8) bytes, not N.
  EXPECT_EQ(storageBytes(tensor({64, 32}, b.getIntegerType(4))), 1024);
  EXPECT_EQ(storageBytes(tensor({7}, b.getIntegerType(4))), 4);
  EXPECT_EQ(storageBytes(tensor({3, 5}, b.getIntegerType(2))), 4);
  EXPECT_EQ(storageBytes(tensor({9}, b.getIntegerType(12))), 14);
  // Booleans are one byte each, as the runtime's Bool.
  EXPECT_EQ(storageBytes(tensor({3, 5}, b.getI1Type())), 15);
  // Whole-byte types: elements times element bytes; scalars hold one.
  EXPECT_EQ(storageBytes(tensor({3, 5}, b.getIntegerType(8, false))), 15);
  EXPECT_EQ(storageBytes(tensor({2, 8}, b.getBF16Type())), 32);
  EXPECT_EQ(storageBytes(tensor({}, b.getF32Type())), 4);
  EXPECT_EQ(storageBytes(MemRefType::get({4, 4}, b.getI64Type())), 128);
}

} // namespace
