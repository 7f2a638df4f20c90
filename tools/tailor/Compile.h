//===- Compile.h - one compile, shared by compile and explore ---*- C++ -*-===//
//
// What `tailor compile` does for one model, recipe and target, as functions
// `tailor explore` calls for every configuration it evaluates, so a
// configuration explore reports is compiled exactly as `tailor compile`
// would compile it (CompileCommand.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TOOLS_TAILOR_COMPILE_H
#define TAILOR_TOOLS_TAILOR_COMPILE_H

#include "compiler/Hardware.h"
#include "compiler/PeftAdapter.h"
#include "compiler/Recipe.h"
#include "frontends/onnx/OnnxImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace tailor {

enum class Stage { Import, Graph, Train, Schedule, Plan };
enum class Emit { Default, Mlir, Plan };

/// What one compile does, decided from the flags before anything is read.
struct CompileRequest {
  std::string input, output;
  Stage compileTo = Stage::Plan;
  Emit format = Emit::Plan;
  bool training = false;
  /// --recipe or key=value overrides were given (a training plan, or the
  /// weight format of a generation plan).
  bool recipeGiven = false;
  /// --task generate: a decode step with a KV cache of maxSeqLen tokens
  /// (the import's sequence length), stopping at eosTokenIds.
  bool generate = false;
  int64_t maxSeqLen = 0;
  /// --prefill-chunk: prompt tokens per call of the prefill entry, clamped
  /// to maxSeqLen (1: none, the prompt runs through decode).
  int64_t prefillChunk = 64;
  std::string eosTokenIds;
  TrainingRecipe recipe;
  std::string adapterDir;
  std::optional<PeftAdapterConfig> adapter;
  HardwareSpec hardware;
  int64_t threads = 8;
  onnx_import::ImportOptions importOptions;
  /// The `tailor compile` arguments and the directory they ran in, which a
  /// training plan records (tailor train --elastic compiles them again for
  /// another world size); empty when no command line made the request.
  std::vector<std::string> commandLine;
  std::string workingDirectory;
  /// --pass-pipeline: replaces the implied pipeline when not empty.
  std::string passPipeline;
  bool printIRAfterAll = false;
  /// --mlir-timing: each pass's time on stderr.
  bool timing = false;
  /// The first of two tries under a device budget: its failure is reported
  /// by the caller.
  bool quietPipelineFailure = false;
  /// Verify the IR after every pass (false: once, after the last; explore
  /// compiles thousands of configurations through tested passes).
  bool verifyEachPass = true;
  /// `imported` went through the graph pipeline already (explore's cached,
  /// raised modules): a training compile leaves it out.
  bool raised = false;
  /// When set, compileModule starts from a clone of this module (imported
  /// from `input` with these importOptions) instead of importing again.
  mlir::ModuleOp imported;
};

/// Prints a diagnostic as `TOOL: error: ...`, naming the ONNX node when
/// the location carries one.
void printDiagnostic(mlir::Diagnostic &diag,
                     llvm::raw_ostream &os = llvm::errs(),
                     llvm::StringRef tool = "tailor compile");

/// The pass pipeline `req` implies, as --print-pipeline prints it (for
/// --pass-pipeline and tailor-opt).
std::string impliedPipelineText(mlir::MLIRContext &context,
                                const CompileRequest &req);

/// The import shape of a training compile: the recipe's micro batch and
/// sequence length, remembered as the recipe's (for shape errors).
void bindRecipeShapes(CompileRequest &req);

/// Imports `req.input` with `req.importOptions`; null on failure (the
/// diagnostics say why).
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext &context,
                                              const CompileRequest &req);

/// Imports `req.input` (or clones `req.imported`) and runs the pipelines on
/// it; null on failure (the diagnostics say why).
mlir::OwningOpRef<mlir::ModuleOp> compileModule(mlir::MLIRContext &context,
                                                CompileRequest &req);

} // namespace tailor

#endif // TAILOR_TOOLS_TAILOR_COMPILE_H
