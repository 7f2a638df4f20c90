//===- RaiseLinear.cpp - matmul against a parameter -> tg.linear ----------===//

#include "passes/graph/Passes.h"
#include "passes/graph/RaiseUtils.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_RAISELINEARPASS
#include "passes/graph/Passes.h.inc"

namespace {

/// matmul(x, transpose(W)) / matmul(x, W) with W a 2-D parameter.
struct MatmulToLinear : OpRewritePattern<tg::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tg::MatmulOp op,
                                PatternRewriter &rewriter) const override {
    Value rhs = op.getRhs();
    if (shapeOf(rhs).size() != 2) {
      return rewriter.notifyMatchFailure(op, "rhs is not 2-D");
    }
    Value weight;
    tg::ParamRefOp param;
    if (auto transpose = rhs.getDefiningOp<tg::TransposeOp>()) {
      // nn.Linear's [out, in] weight, transposed at the use.
      param = paramRefOf(transpose.getInput());
      if (param) {
        weight = transpose.getInput();
      }
    }
    if (!weight) {
      // A weight stored [in, out] (pre-transposed by the exporter, or a
      // Conv1D): keep its layout and say so with an explicit transpose.
      param = paramRefOf(rhs);
      if (!param) {
        return rewriter.notifyMatchFailure(op, "rhs is not a parameter");
      }
      auto type = llvm::cast<RankedTensorType>(rhs.getType());
      weight = tg::TransposeOp::create(
          rewriter, op.getLoc(),
          RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)},
                                type.getElementType()),
          rhs, rewriter.getDenseI64ArrayAttr({1, 0}));
    }
    // A bias: the matmul's only use adds a [out] parameter.
    Value bias = biasAddOf(op.getResult(), shapeOf(weight)[0]);
    Operation *replaced = bias ? *op->getUsers().begin() : op.getOperation();
    std::optional<std::string> path =
        modulePathFromParamName(param.getName());
    if (!path) {
      path = modulePathFromLoc(op.getLoc());
    }
    rewriter.setInsertionPoint(replaced);
    auto linear = tg::LinearOp::create(rewriter, op.getLoc(), op.getType(),
                                       op.getLhs(), weight, bias);
    annotate(linear, path);
    rewriter.replaceOp(replaced, linear.getResult());
    if (replaced != op.getOperation()) {
      rewriter.eraseOp(op);
    }
    return success();
  }
};

struct RaiseLinearPass : impl::RaiseLinearPassBase<RaiseLinearPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MatmulToLinear>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      signalPassFailure();
    }
  }
};

} // namespace
} // namespace tailor::graph
