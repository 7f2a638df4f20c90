//===- EmulateHalf.cpp - fp16 or bf16 tensor-core GEMMs, decided per op --===//
//
// `mixed_precision: fp16` or `bf16` on the CPU: the decision that a GEMM
// computes as a 16-bit tensor core does is recorded on the op (tg.fp16 or
// tg.bf16) before lowering, so a lit test sees it; the CPU kernels honour
// it (runtime/cpu/HalfRounding.h). Everything else stays f32: trainable
// and master weights, accumulators, optimizer state, norms, softmax and
// loss. Frozen linear weights may be stored in the GEMM's format
// (tailor-quantize's `fp16` or `bf16` scheme, which the training pipeline
// picks as Hugging Face loads torch_dtype=float16 or bfloat16): their
// values are what the GEMM rounds to anyway, so planning dequantizes them
// whole for the marked GEMM (Fusions.cpp) instead of fusing the
// dequantization into an f32 GEMM.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"

#include "dialects/tg/TGOps.h"

namespace tailor::graph {
#define GEN_PASS_DEF_EMULATEHALFPASS
#include "passes/graph/Passes.h.inc"
} // namespace tailor::graph

using namespace mlir;
using namespace tailor;

namespace {

struct EmulateHalfPass
    : public graph::impl::EmulateHalfPassBase<EmulateHalfPass> {
  using EmulateHalfPassBase::EmulateHalfPassBase;
  void runOnOperation() override;
};

/// Whether every frozen weight `op` reads (a tg.dequantize, directly or
/// through a transpose) is stored as `format`; an error on `op` if not.
LogicalResult checkWeightStorage(Operation *op, StringRef format) {
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
    if (!scheme || scheme.getValue() != format) {
      return op->emitError()
             << format << " GEMMs on weights stored as "
             << (scheme ? scheme.getValue() : "?")
             << " are not supported yet (frozen weights may be stored as "
             << format << ", or f32 with 'quantization: none')";
    }
  }
  return success();
}

} // namespace

void EmulateHalfPass::runOnOperation() {
  ModuleOp module = getOperation();
  StringRef mark;
  if (format == "fp16") {
    mark = tg::TGDialect::kFp16AttrName;
  } else if (format == "bf16") {
    mark = tg::TGDialect::kBf16AttrName;
  } else {
    module.emitError() << "tailor-emulate-half: unknown format '" << format
                       << "' (expected fp16 or bf16)";
    return signalPassFailure();
  }
  UnitAttr unit = UnitAttr::get(&getContext());
  WalkResult result = module.walk([&](Operation *op) -> WalkResult {
    if (!llvm::isa<tg::LinearOp, tg::MatmulOp, tg::LinearWeightGradOp>(op)) {
      return WalkResult::advance();
    }
    if (failed(checkWeightStorage(op, format))) {
      return WalkResult::interrupt();
    }
    op->setAttr(mark, unit);
    return WalkResult::advance();
  });
  if (result.wasInterrupted()) {
    signalPassFailure();
  }
}
