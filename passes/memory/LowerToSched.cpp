//===- LowerToSched.cpp - plan one rank: tg -> sched ----------------------===//
//
// Kernel selection, execution order, buffer lifetimes and arena offsets for
// a single rank (see the pass description in Passes.td). Everything is
// decided from shapes and dtypes; no weight byte is read. The pass checks
// its options and the functions to plan; SchedPlanner (SchedPlanner.h)
// plans them.
//
//===----------------------------------------------------------------------===//

#include "passes/memory/Passes.h"

#include "passes/memory/SchedPlanner.h"

#include "dialects/tg/TGOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tailor::memory {
#define GEN_PASS_DEF_LOWERTOSCHEDPASS
#include "passes/memory/Passes.h.inc"
} // namespace tailor::memory

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

namespace {

struct LowerToSchedPass
    : public memory::impl::LowerToSchedPassBase<LowerToSchedPass> {
  using LowerToSchedPassBase::LowerToSchedPassBase;

  void runOnOperation() override;
};

/// A CPU plan's precision is its GEMMs' (tailor-emulate-half's marks):
/// fails naming the first GEMM whose mark (tg.fp16, tg.bf16 or none for
/// fp32) differs from `precision`, so the plan never records a precision
/// its kernels do not compute.
LogicalResult checkCpuGemmPrecision(ArrayRef<func::FuncOp> funcs,
                                    StringRef precision) {
  for (func::FuncOp func : funcs) {
    WalkResult result = func.walk([&](Operation *op) -> WalkResult {
      if (!llvm::isa<tg::LinearOp, tg::MatmulOp, tg::LinearWeightGradOp>(op)) {
        return WalkResult::advance();
      }
      StringRef mark = op->hasAttr(tg::TGDialect::kFp16AttrName)   ? "fp16"
                       : op->hasAttr(tg::TGDialect::kBf16AttrName) ? "bf16"
                                                                   : "fp32";
      if (mark == precision) {
        return WalkResult::advance();
      }
      op->emitError() << "a CPU plan in " << precision << " needs every GEMM "
                      << (precision == "fp32"
                              ? StringRef("unmarked")
                              : StringRef("marked by tailor-emulate-half"))
                      << ", this one computes " << mark;
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted()) {
      return failure();
    }
  }
  return success();
}

} // namespace

void LowerToSchedPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (!module.getOps<sched::ProgramOp>().empty()) {
    module.emitError() << "the module already holds a sched.program";
    return signalPassFailure();
  }
  // --- Which functions, in entry order --------------------------------------
  SmallVector<std::string> names;
  if (functionName.empty()) {
    if (module.lookupSymbol<func::FuncOp>("forward") ||
        !module.lookupSymbol<func::FuncOp>("train_step")) {
      names = {"forward"};
    } else {
      // A pipeline stage's forward entry (tailor-split-layers) comes first.
      if (module.lookupSymbol<func::FuncOp>("pipeline_forward")) {
        names.push_back("pipeline_forward");
      }
      names.append({"train_step", "optimizer_step"});
      if (module.lookupSymbol<func::FuncOp>("eval_step")) {
        names.push_back("eval_step");
      }
    }
  } else {
    for (StringRef name : llvm::split(StringRef(functionName), ',')) {
      names.push_back(name.trim().str());
    }
  }
  SmallVector<func::FuncOp> funcs;
  for (const std::string &name : names) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func) {
      module.emitError() << "no function @" << name << " to plan";
      return signalPassFailure();
    }
    funcs.push_back(func);
  }
  if (backend != "cpu" && backend != "cuda") {
    module.emitError() << "unknown backend '" << backend
                       << "' (expected cpu or cuda)";
    return signalPassFailure();
  }
  if (precision != "fp32" && precision != "bf16" && precision != "fp16") {
    module.emitError() << "unknown precision '" << precision
                       << "' (expected fp32, bf16 or fp16)";
    return signalPassFailure();
  }
  if (backend == "cuda" && sm < 75) {
    module.emitError() << "tailor's CUDA kernels need sm_75 or newer (tensor "
                          "cores); "
                       << hardware << " is sm_" << static_cast<int64_t>(sm);
    return signalPassFailure();
  }
  if (backend == "cuda" && sm < 80 && precision != "fp16") {
    module.emitError() << hardware << " is sm_" << static_cast<int64_t>(sm)
                       << ", whose tensor cores have no bf16: compile with "
                          "'mixed_precision: fp16' (or 'fp16: true'), not "
                       << precision;
    return signalPassFailure();
  }
  if (backend == "cpu" && failed(checkCpuGemmPrecision(funcs, precision))) {
    return signalPassFailure();
  }
  PlannerOptions options;
  options.backend = backend;
  options.hardware = hardware;
  options.precision = precision;
  options.threads = threads;
  options.alignment = alignment;
  options.sm = sm;
  options.deviceMemory = deviceMemory;
  options.gemmWorkspace = gemmWorkspace;
  options.deviceBudget = deviceBudget;
  if (failed(SchedPlanner(options).run(module, funcs))) {
    return signalPassFailure();
  }

  // The program replaces the functions and the symbol declarations; what
  // raising could not do stays on the module for the plan's notes.
  SmallVector<Attribute> unraised;
  for (func::FuncOp func : funcs) {
    if (auto list = func->getAttrOfType<ArrayAttr>(
            tg::TGDialect::kUnraisedAttentionAttrName)) {
      llvm::append_range(unraised, list.getValue());
    }
  }
  if (!unraised.empty()) {
    module->setAttr(tg::TGDialect::kUnraisedAttentionAttrName,
                    ArrayAttr::get(module.getContext(), unraised));
  }
  for (func::FuncOp func : funcs) {
    func.erase();
  }
  for (Operation &op : llvm::make_early_inc_range(module.getOps())) {
    if (llvm::isa<tg::ParamOp, tg::StateOp, tg::BucketOp>(op)) {
      op.erase();
    }
  }
}
