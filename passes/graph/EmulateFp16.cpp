//===- EmulateFp16.cpp - fp16 tensor-core GEMMs, decided per op ----------===//
//
// `mixed_precision: fp16` on the CPU: the decision that a GEMM computes as
// an fp16 tensor core does is recorded on the op (tg.fp16) before
// lowering, so a lit test sees it; the CPU kernels honour it
// (runtime/cpu/HalfRounding.h). Everything else stays f32: trainable and
// master weights, accumulators, optimizer state, norms, softmax and loss.
// Frozen linear weights may be stored as IEEE half (tailor-quantize's
// `fp16` scheme, which the training pipeline picks with fp16 as Hugging
// Face loads torch_dtype=float16): their values are what the GEMM rounds
// to anyway, so planning dequantizes them whole for the marked GEMM
// (Fusions.cpp) instead of fusing the dequantization into an f32 GEMM.
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
      if (auto transpose = operand.getDefiningOp<tg::TransposeOp>()) {
        operand = transpose.getInput();
      }
      auto dequantize = operand.getDefiningOp<tg::DequantizeOp>();
      if (!dequantize) {
        continue;
      }
      auto param = SymbolTable::lookupNearestSymbolFrom<tg::ParamOp>(
          dequantize, dequantize.getNameAttr());
      DictionaryAttr quant = param ? param.getQuantAttr() : DictionaryAttr();
      auto scheme = quant ? quant.getAs<StringAttr>("scheme") : StringAttr();
      if (!scheme || scheme.getValue() != "fp16") {
        op->emitError() << "fp16 GEMMs on weights stored as "
                        << (scheme ? scheme.getValue() : "?")
                        << " are not supported yet (frozen weights may be "
                           "stored as fp16, or f32 with 'quantization: none')";
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
