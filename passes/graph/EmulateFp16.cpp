//===- EmulateFp16.cpp - fp16 tensor-core GEMMs, decided per op ----------===//
//
// `mixed_precision: fp16` on the CPU: the decision that a GEMM computes as
// an fp16 tensor core does is recorded on the op (tg.fp16) before
// lowering, so a lit test sees it; the CPU kernels honour it
// (runtime/cpu/HalfRounding.h). Everything else stays f32: trainable and
// master weights, accumulators, optimizer state, norms, softmax and loss.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"

#include "dialects/tg/TGOps.h"

namespace tailor::graph {
#define GEN_PASS_DEF_EMULATEFP16PASS
#include "passes/graph/Passes.h.inc"
} // namespace tailor::graph

using namespace mlir;
using namespace tailor;

namespace {

struct EmulateFp16Pass
    : public graph::impl::EmulateFp16PassBase<EmulateFp16Pass> {
  using EmulateFp16PassBase::EmulateFp16PassBase;
  void runOnOperation() override;
};

} // namespace

void EmulateFp16Pass::runOnOperation() {
  ModuleOp module = getOperation();
  UnitAttr unit = UnitAttr::get(&getContext());
  WalkResult result = module.walk([&](Operation *op) -> WalkResult {
    if (!llvm::isa<tg::LinearOp, tg::MatmulOp, tg::LinearWeightGradOp>(op)) {
      return WalkResult::advance();
    }
    for (Value operand : op->getOperands()) {
      if (operand.getDefiningOp<tg::DequantizeOp>()) {
        op->emitError() << "fp16 GEMMs on quantized weights are not "
                           "supported yet (give 'quantization: none' with "
                           "'mixed_precision: fp16')";
        return WalkResult::interrupt();
      }
    }
    op->setAttr(tg::TGDialect::kFp16AttrName, unit);
    return WalkResult::advance();
  });
  if (result.wasInterrupted()) {
    signalPassFailure();
  }
}
