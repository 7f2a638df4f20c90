//===- tailor-translate.cpp - translate between IR and other formats ------===//
//
// mlir-translate for tailor: MLIR's own translations (to LLVM IR, including
// NVVM, and to C++ from emitc), which the CUDA code generator builds on, and
// `--mlir-to-tplan`, which writes a module holding a sched.program as a plan
// file, so any pipeline run by tailor-opt can end in a runnable plan.
//
//===----------------------------------------------------------------------===//

#include "compiler/PlanWriter.h"
#include "compiler/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllTranslations.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

int main(int argc, char **argv) {
  mlir::registerAllTranslations();
  mlir::TranslateFromMLIRRegistration toPlan(
      "mlir-to-tplan", "write a sched.program as a .tplan plan file",
      [](mlir::Operation *op, llvm::raw_ostream &os) -> mlir::LogicalResult {
        auto module = llvm::dyn_cast<mlir::ModuleOp>(op);
        if (!module) {
          return op->emitError() << "expected a builtin module";
        }
        // Relative weight paths stay as written (relative to the current
        // directory); tailor compile rewrites them against the plan's.
        auto bytes = tailor::serializePlan(module, ".");
        if (mlir::failed(bytes)) {
          return mlir::failure();
        }
        os.write(reinterpret_cast<const char *>(bytes->data()), bytes->size());
        return mlir::success();
      },
      [](mlir::DialectRegistry &registry) {
        tailor::registerTailorDialects(registry);
      });
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "tailor translation driver\n"));
}
