//===- tailor-translate.cpp - translate between IR and other formats ------===//
//
// mlir-translate for tailor. Today it carries MLIR's own translations (to LLVM
// IR, including NVVM, and to C++ from emitc), which the CUDA code generator
// builds on; tailor's own importers and exporters register here as they land.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllTranslations.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

int main(int argc, char **argv) {
  mlir::registerAllTranslations();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "tailor translation driver\n"));
}
