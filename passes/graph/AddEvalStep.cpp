//===- AddEvalStep.cpp - a forward-only validation loss without dropout ---===//

#include "passes/graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_ADDEVALSTEPPASS
#include "passes/graph/Passes.h.inc"

namespace {

constexpr StringLiteral kEvalStep = "eval_step";

struct AddEvalStepPass
    : public graph::impl::AddEvalStepPassBase<AddEvalStepPass> {
  using AddEvalStepPassBase::AddEvalStepPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto scored = module.lookupSymbol<func::FuncOp>(function);
    if (!scored || scored.isExternal() || scored.getNumResults() == 0) {
      module.emitError() << "tailor-add-eval-step: no function '" << function
                         << "' returning a loss";
      return signalPassFailure();
    }
    if (module.lookupSymbol(kEvalStep)) {
      module.emitError() << "tailor-add-eval-step: the module already has @"
                         << kEvalStep;
      return signalPassFailure();
    }
    func::FuncOp eval = scored.clone();
    eval.setSymName(kEvalStep);
    module.insert(std::next(Block::iterator(scored)), eval);
    keepOnlyTheLoss(eval);
    removeDropout(eval);
    removeUnreadInputs(eval);
    prefixNames(eval);
  }

  /// A plan's input and output names are unique across its entries (the C
  /// API finds them by name): eval_step's are `eval_<name>`.
  static void prefixNames(func::FuncOp eval) {
    Builder b(eval.getContext());
    for (unsigned i = 0; i < eval.getNumArguments(); ++i) {
      if (auto name = eval.getArgAttrOfType<StringAttr>(i, "tg.name")) {
        eval.setArgAttr(i, "tg.name", b.getStringAttr("eval_" + name.str()));
      }
    }
    for (unsigned i = 0; i < eval.getNumResults(); ++i) {
      if (auto name = eval.getResultAttrOfType<StringAttr>(i, "tg.name")) {
        eval.setResultAttr(i, "tg.name", b.getStringAttr("eval_" + name.str()));
      }
    }
  }

  /// The loss is the first result; anything after it (kept logits) goes.
  static void keepOnlyTheLoss(func::FuncOp eval) {
    auto ret = llvm::cast<func::ReturnOp>(eval.getBody().front().getTerminator());
    unsigned extra = ret.getNumOperands() - 1;
    if (extra == 0) {
      return;
    }
    ret->eraseOperands(1, extra);
    llvm::BitVector drop(eval.getNumResults());
    drop.set(1, eval.getNumResults());
    (void)eval.eraseResults(drop);
  }

  /// Evaluation mode: dropout passes its input through.
  static void removeDropout(func::FuncOp eval) {
    eval.walk([](tg::DropoutOp dropout) {
      dropout.getResult().replaceAllUsesWith(dropout.getInput());
      dropout.erase();
    });
  }

  /// Inputs nothing reads any more (the dropout seed) are not inputs.
  static void removeUnreadInputs(func::FuncOp eval) {
    llvm::BitVector unread(eval.getNumArguments());
    for (BlockArgument arg : eval.getArguments()) {
      if (arg.use_empty()) {
        unread.set(arg.getArgNumber());
      }
    }
    (void)eval.eraseArguments(unread);
  }
};

} // namespace

} // namespace tailor::graph
