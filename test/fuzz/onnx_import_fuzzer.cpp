//===- onnx_import_fuzzer.cpp - libFuzzer target for the ONNX importer ----===//
//
// Feeds arbitrary bytes to the importer as a binary ModelProto. Whatever the
// input, the importer must return (success or a diagnostic), never crash,
// hang or read out of bounds. Seeds: test/fuzz/corpus (small valid models).
// Built by `make fuzz` with clang's -fsanitize=fuzzer,address,undefined.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext context;
  context.disableMultithreading();
  // Diagnostics are the expected outcome for most inputs: swallow them.
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) {
    return mlir::success();
  });
  tailor::onnx_import::ImportOptions options;
  options.batch = 1;
  options.seq = 4;
  // Keep folded tensors small so a forged Range or ConstantOfShape cannot
  // exhaust memory (the limit itself is what is being exercised).
  options.maxFoldedElements = 1 << 16;
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  // The path names a binary model in a folder without external data files.
  (void)tailor::onnx_import::importOnnxBuffer(context, bytes,
                                              "/nonexistent/fuzz.onnx", options);
  return 0;
}
