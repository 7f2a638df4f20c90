//===- OnnxImporter.h - ONNX ModelProto -> tg ------------------------------===//
//
// Imports an ONNX model (binary protobuf, or ONNX's textual syntax) into a
// builtin module holding one `func.func @forward` in the tg dialect. Symbolic
// dims are bound (batch, sequence, or by name) and all shape arithmetic is
// folded, so every value in the result has a static shape. Initializers
// become `tg.param` symbols that say where their bytes are; no weight bytes
// are read or copied into the IR.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_FRONTENDS_ONNX_ONNXIMPORTER_H
#define TAILOR_FRONTENDS_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace tailor::onnx_import {

struct ImportOptions {
  /// Binds symbolic batch dims (axis 0 of rank-2 integer inputs such as
  /// input_ids, and every dim whose name says "batch").
  std::optional<int64_t> batch;
  /// Binds symbolic sequence dims (axis 1 of those inputs, and names that say
  /// "seq"/"sequence").
  std::optional<int64_t> seq;
  /// Where batch and seq came from, for messages ("--batch",
  /// "micro_batch_size in the recipe"). When set, a token-id input whose
  /// batch or sequence dim is fixed to another value is an error: the model
  /// and the request disagree, and that must surface now, not at run time.
  std::string batchSource;
  std::string seqSource;
  /// Binds symbolic dims by their dim_param name; wins over batch/seq.
  llvm::StringMap<int64_t> dims;
  /// Name of the imported function.
  std::string functionName = "forward";
  /// Largest number of elements a folded compile-time tensor may have.
  int64_t maxFoldedElements = int64_t(1) << 26;
};

/// Imports the model at `path` (binary ModelProto; `.onnxtxt`/`.txt` or text
/// content starting with '<' is parsed as ONNX's textual syntax). Errors are
/// reported through the context's diagnostic engine and name the place.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxFile(mlir::MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options);

/// Same, from bytes already in memory; `path` names the model in messages
/// and anchors relative external-data locations.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxBuffer(mlir::MLIRContext &context, llvm::StringRef bytes,
                 llvm::StringRef path, const ImportOptions &options);

/// Registers the dialects the importer creates ops in.
void registerImporterDialects(mlir::MLIRContext &context);

} // namespace tailor::onnx_import

#endif // TAILOR_FRONTENDS_ONNX_ONNXIMPORTER_H
