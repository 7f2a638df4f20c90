//===- OpCost.cpp - the work one tg op does: FLOPs and bytes moved --------===//

#include "passes/memory/OpCost.h"

#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;

namespace tailor::memory {

namespace {

double elementsOf(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape()) {
    return 0;
  }
  return static_cast<double>(tg::numElements(type.getShape()));
}

double bytesOf(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape()) {
    return 0;
  }
  return static_cast<double>(tg::byteSize(type));
}

int64_t lastDim(Value value) {
  auto type = llvm::cast<ShapedType>(value.getType());
  return type.getRank() == 0 ? 1 : type.getShape().back();
}

/// Forward attention FLOPs: QK^T and PV over every (query, key) pair, half
/// of them under a causal mask.
double attentionFlops(Value query, Value key, Value value, bool causal) {
  auto q = llvm::cast<ShapedType>(query.getType()).getShape();
  auto k = llvm::cast<ShapedType>(key.getType()).getShape();
  double pairs = static_cast<double>(q[0]) * q[1] * q[2] * k[2];
  double flops = 2 * pairs * (q[3] + lastDim(value));
  return causal ? flops / 2 : flops;
}

/// FLOPs of `op` by kind.
double flopsOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case([](tg::LinearOp linear) {
        return 2 * elementsOf(linear.getResult()) *
               static_cast<double>(lastDim(linear.getInput()));
      })
      .Case([](tg::MatmulOp matmul) {
        return 2 * elementsOf(matmul.getResult()) *
               static_cast<double>(lastDim(matmul.getLhs()));
      })
      .Case([](tg::LinearWeightGradOp grad) {
        // [out, in] each summed over every leading row.
        double rows = elementsOf(grad.getInput()) /
                      static_cast<double>(lastDim(grad.getInput()));
        return 2 * elementsOf(grad.getResult()) * rows;
      })
      .Case([](tg::AttentionOp attention) {
        return attentionFlops(attention.getQuery(), attention.getKey(),
                              attention.getValue(), attention.getCausal());
      })
      .Case([](tg::AttentionGradOp grad) {
        return 2.5 * attentionFlops(grad.getQuery(), grad.getKey(),
                                    grad.getValue(), grad.getCausal());
      })
      .Case<tg::RMSNormOp, tg::LayerNormOp, tg::SoftmaxOp>(
          [](Operation *norm) { return 5 * elementsOf(norm->getResult(0)); })
      .Case<tg::RMSNormGradOp, tg::LayerNormGradOp, tg::SoftmaxGradOp>(
          [](Operation *grad) { return 10 * elementsOf(grad->getOperand(1)); })
      .Case<tg::CrossEntropyOp, tg::CrossEntropyGradOp>(
          [](Operation *loss) { return 5 * elementsOf(loss->getOperand(0)); })
      // ZeRO++'s qgZ, as the planner counts it for either wire format: a
      // pass for each block's absmax, then a scale and a round per element;
      // a multiply-add per element received. Bytes follow the wire types.
      .Case([](tg::QuantizeChunksOp encode) {
        return 3 * elementsOf(encode.getInput());
      })
      .Case([](tg::DequantizeReduceOp reduce) {
        return 2 * static_cast<double>(reduce.getChunk()) *
               static_cast<double>(reduce.getShards());
      })
      .Default([](Operation *other) {
        double elements = 0;
        for (Value result : other->getResults()) {
          elements += elementsOf(result);
        }
        return elements;
      });
}

} // namespace

OpCost costOf(Operation *op) {
  if (llvm::isa<tg::ParamRefOp, tg::StateRefOp, arith::ConstantOp,
                tg::ReshapeOp>(op)) {
    return {};
  }
  OpCost cost;
  cost.flops = flopsOf(op);
  if (auto embedding = llvm::dyn_cast<tg::EmbeddingOp>(op)) {
    // A gather: the ids, the rows they name (at most the whole table) and
    // the output, not the table (at 134M, 98 MB against 0.5 MB of rows).
    double result = bytesOf(embedding.getResult());
    cost.bytes = bytesOf(embedding.getIds()) +
                 std::min(bytesOf(embedding.getTable()), result) + result;
    return cost;
  }
  for (Value operand : op->getOperands()) {
    cost.bytes += bytesOf(operand);
  }
  for (Value result : op->getResults()) {
    cost.bytes += bytesOf(result);
  }
  return cost;
}

} // namespace tailor::memory
