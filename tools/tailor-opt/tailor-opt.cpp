//===- tailor-opt.cpp - run tailor's passes on textual IR -----------------===//
//
// mlir-opt with tailor's dialects and passes: every pass runs alone here, so
// lit can test it on small IR, and people can run any pipeline by hand.
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  tailor::registerTailorDialects(registry);
  tailor::registerTailorPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tailor optimizer driver\n", registry));
}
