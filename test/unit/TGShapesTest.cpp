//===- TGShapesTest.cpp - unit tests of the tg shape rules ----------------===//

#include "dialects/tg/TGShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <functional>

using namespace mlir;
using namespace tailor::tg;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

/// Runs shape rules in a context whose diagnostics are captured, so a test
/// can check both the failure and its message.
class ShapeRules : public ::testing::Test {
protected:
  ShapeRules()
      : handler(&context, [this](Diagnostic &diag) {
          lastError = diag.str();
          return success();
        }) {}

  /// A function_ref must not outlive its callable, so the callable is a member.
  EmitErrorFn emitter() { return emitFn; }

  MLIRContext context;
  ScopedDiagnosticHandler handler;
  std::string lastError;
  std::function<InFlightDiagnostic()> emitFn = [this] {
    return emitError(UnknownLoc::get(&context));
  };
};

TEST_F(ShapeRules, BroadcastAlignsFromTheRight) {
  auto shape = broadcastShapes({2, 1, 4}, {3, 1}, emitter());
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (Shape{2, 3, 4}));
}

TEST_F(ShapeRules, BroadcastKeepsDynamicDimsAgainstOne) {
  auto shape = broadcastShapes({kDyn, 8}, {1, 8}, emitter());
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (Shape{kDyn, 8}));
}

TEST_F(ShapeRules, BroadcastRejectsMismatchedDims) {
  EXPECT_TRUE(failed(broadcastShapes({2, 3}, {4}, emitter())));
  EXPECT_EQ(lastError, "shapes [2, 3] and [4] do not broadcast: dim 3 vs 4");
}

TEST_F(ShapeRules, MatmulBroadcastsBatchDims) {
  auto shape = matmulShape({4, 1, 8, 16}, {3, 16, 32}, emitter());
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (Shape{4, 3, 8, 32}));
}

TEST_F(ShapeRules, MatmulRejectsContractionMismatch) {
  EXPECT_TRUE(failed(matmulShape({8, 16}, {15, 4}, emitter())));
  EXPECT_NE(lastError.find("has K = 16"), std::string::npos) << lastError;
}

TEST_F(ShapeRules, LinearUsesTorchWeightLayout) {
  Shape bias = {128};
  auto shape = linearShape({2, 7, 64}, {128, 64}, ArrayRef<int64_t>(bias),
                           emitter());
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (Shape{2, 7, 128}));
  EXPECT_TRUE(failed(linearShape({2, 7, 64}, {64, 128}, std::nullopt,
                                 emitter())));
}

TEST_F(ShapeRules, ReduceKeepsOrDropsDims) {
  EXPECT_EQ(*reduceShape({2, 3, 4}, {1}, true, emitter()), (Shape{2, 1, 4}));
  EXPECT_EQ(*reduceShape({2, 3, 4}, {0, 2}, false, emitter()), (Shape{3}));
  EXPECT_TRUE(failed(reduceShape({2, 3}, {1, 1}, false, emitter())));
  EXPECT_EQ(lastError, "axis 1 is listed twice");
}

TEST_F(ShapeRules, TransposePermutesAndValidates) {
  EXPECT_EQ(*transposeShape({2, 3, 4}, {2, 0, 1}, emitter()),
            (Shape{4, 2, 3}));
  EXPECT_TRUE(failed(transposeShape({2, 3, 4}, {0, 0, 1}, emitter())));
}

TEST_F(ShapeRules, SliceRoundsStridedLengthsUp) {
  EXPECT_EQ(*sliceShape({10, 6}, {1, 0}, {10, 6}, {2, 3}, emitter()),
            (Shape{5, 2}));
  EXPECT_TRUE(failed(sliceShape({10}, {0}, {11}, {1}, emitter())));
}

TEST_F(ShapeRules, ConcatSumsTheAxis) {
  SmallVector<Shape> inputs = {{2, 3}, {2, 5}};
  EXPECT_EQ(*concatShape(inputs, 1, emitter()), (Shape{2, 8}));
  inputs = {{2, 3}, {4, 3}};
  EXPECT_TRUE(failed(concatShape(inputs, 1, emitter())));
  EXPECT_TRUE(failed(concatShape({}, 0, emitter())));
  EXPECT_EQ(lastError, "expected at least one input");
}

TEST_F(ShapeRules, SplitChecksTheSum) {
  auto pieces = splitShapes({4, 12}, 1, {4, 8}, emitter());
  ASSERT_TRUE(succeeded(pieces));
  EXPECT_EQ((*pieces)[1], (Shape{4, 8}));
  EXPECT_TRUE(failed(splitShapes({4, 12}, 1, {4, 4}, emitter())));
  EXPECT_EQ(lastError, "split sizes sum to 8 but dim 1 is 12");
}

TEST_F(ShapeRules, AttentionAllowsGroupedQueryHeads) {
  auto shape = attentionShape({1, 32, 128, 64}, {1, 8, 128, 64},
                              {1, 8, 128, 64}, emitter());
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (Shape{1, 32, 128, 64}));
  EXPECT_TRUE(failed(attentionShape({1, 32, 128, 64}, {1, 5, 128, 64},
                                    {1, 5, 128, 64}, emitter())));
  EXPECT_NE(lastError.find("multiple of kv heads (5)"), std::string::npos);
}

TEST_F(ShapeRules, ByteSizePacksSubByteTypes) {
  Builder b(&context);
  EXPECT_EQ(byteSize(RankedTensorType::get({4096, 4096}, b.getBF16Type())),
            4096 * 4096 * 2);
  EXPECT_EQ(byteSize(RankedTensorType::get({3}, b.getIntegerType(4))), 2);
  EXPECT_EQ(byteSize(RankedTensorType::get({kDyn}, b.getF32Type())), kDyn);
}

} // namespace
