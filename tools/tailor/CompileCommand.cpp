//===- CompileCommand.cpp - `tailor compile` -------------------------------===//
//
// tailor compile MODEL.onnx [--batch N] [--seq N] [--dim NAME=N] [--threads N]
//                [--compile-to=import|graph|schedule|plan] [--emit=mlir|plan]
//                -o OUT
//
// Imports the model, runs the pipeline up to the requested stage and writes
// the result. The output file is written only when everything succeeded
// (ToolOutputFile removes a partial file), so a failed compile never
// replaces a good output.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"

#include "compiler/Pipelines.h"
#include "compiler/PlanWriter.h"
#include "compiler/Registration.h"
#include "frontends/onnx/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace tailor {

namespace {

enum class Stage { Import, Graph, Schedule, Plan };
enum class Emit { Default, Mlir, Plan };

/// Prints diagnostics as `tailor compile: error: ...`, naming the ONNX node
/// when the location carries one.
void printDiagnostic(mlir::Diagnostic &diag) {
  llvm::raw_ostream &os = llvm::errs();
  os << "tailor compile: ";
  switch (diag.getSeverity()) {
  case mlir::DiagnosticSeverity::Error: os << "error: "; break;
  case mlir::DiagnosticSeverity::Warning: os << "warning: "; break;
  case mlir::DiagnosticSeverity::Note: os << "note: "; break;
  case mlir::DiagnosticSeverity::Remark: os << "remark: "; break;
  }
  if (auto name = llvm::dyn_cast<mlir::NameLoc>(diag.getLocation())) {
    os << "at node '" << name.getName().getValue() << "': ";
  }
  os << diag.str() << "\n";
  for (mlir::Diagnostic &note : diag.getNotes()) {
    os << "  note: " << note.str() << "\n";
  }
}

} // namespace

int runCompile(int argc, const char **argv) {
  namespace cl = llvm::cl;
  cl::ResetCommandLineParser();
  cl::OptionCategory category("tailor compile options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<model.onnx>"),
                             cl::Required, cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("output file ('-' for stdout)"),
                              cl::value_desc("file"), cl::init("-"),
                              cl::cat(category));
  cl::opt<int64_t> batch("batch", cl::desc("bind symbolic batch dims to N"),
                         cl::value_desc("N"), cl::init(0), cl::cat(category));
  cl::opt<int64_t> seq("seq", cl::desc("bind symbolic sequence dims to N"),
                       cl::value_desc("N"), cl::init(0), cl::cat(category));
  cl::list<std::string> dims(
      "dim", cl::desc("bind the symbolic dim NAME to N (repeatable)"),
      cl::value_desc("NAME=N"), cl::cat(category));
  cl::opt<Stage> compileTo(
      "compile-to", cl::desc("stop after this stage"), cl::init(Stage::Plan),
      cl::values(clEnumValN(Stage::Import, "import",
                            "the literal ONNX graph in tg, static shapes"),
                 clEnumValN(Stage::Graph, "graph",
                            "raised: linear, rms_norm, rope, attention, ..."),
                 clEnumValN(Stage::Schedule, "schedule",
                            "the per-rank sched.program (arenas, launches)"),
                 clEnumValN(Stage::Plan, "plan",
                            "the plan file the runtime runs (the default)")),
      cl::cat(category));
  cl::opt<Emit> emit(
      "emit",
      cl::desc("output format (default: plan for --compile-to=plan, mlir "
               "otherwise)"),
      cl::init(Emit::Default),
      cl::values(clEnumValN(Emit::Mlir, "mlir", "textual MLIR"),
                 clEnumValN(Emit::Plan, "plan", "a .tplan file")),
      cl::cat(category));
  cl::opt<int64_t> threads(
      "threads",
      cl::desc("CPU workers the plan sizes per-worker workspaces for"),
      cl::value_desc("N"), cl::init(8), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(
          argc, argv, "tailor compile: compile an ONNX model\n", &llvm::errs())) {
    return 1;
  }

  if (threads < 1 || threads > 1024) {
    llvm::errs() << "tailor compile: error: --threads must be in [1, 1024], "
                    "got "
                 << threads << "\n";
    return 1;
  }
  Emit format = emit;
  if (format == Emit::Default) {
    format = compileTo == Stage::Plan ? Emit::Plan : Emit::Mlir;
  }
  if (format == Emit::Plan && compileTo != Stage::Plan) {
    llvm::errs() << "tailor compile: error: --emit=plan needs "
                    "--compile-to=plan\n";
    return 1;
  }

  onnx_import::ImportOptions options;
  if (batch.getNumOccurrences()) {
    if (batch <= 0) {
      llvm::errs() << "tailor compile: error: --batch must be positive, got "
                   << batch << "\n";
      return 1;
    }
    options.batch = batch;
  }
  if (seq.getNumOccurrences()) {
    if (seq <= 0) {
      llvm::errs() << "tailor compile: error: --seq must be positive, got "
                   << seq << "\n";
      return 1;
    }
    options.seq = seq;
  }
  for (const std::string &binding : dims) {
    auto [name, value] = llvm::StringRef(binding).split('=');
    int64_t n = 0;
    if (name.empty() || value.getAsInteger(10, n) || n <= 0) {
      llvm::errs() << "tailor compile: error: --dim expects NAME=N with a "
                      "positive N, got '"
                   << binding << "'\n";
      return 1;
    }
    options.dims[name] = n;
  }

  mlir::DialectRegistry registry;
  registerTailorDialects(registry);
  mlir::MLIRContext context(registry);
  context.disableMultithreading();
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    printDiagnostic(diag);
    return mlir::success();
  });

  auto module = onnx_import::importOnnxFile(context, input, options);
  if (failed(module)) {
    return 1;
  }
  if (compileTo != Stage::Import) {
    mlir::PassManager pm(&context);
    const char *what = "graph";
    if (compileTo == Stage::Graph) {
      buildGraphPipeline(pm);
    } else {
      ScheduleOptions scheduleOptions;
      scheduleOptions.threads = threads;
      buildSchedulePipeline(pm, scheduleOptions);
      what = "schedule";
    }
    if (failed(pm.run(**module))) {
      llvm::errs() << "tailor compile: error: the " << what
                   << " pipeline failed on '" << input << "'\n";
      return 1;
    }
  }

  std::vector<uint8_t> planBytes;
  if (format == Emit::Plan) {
    llvm::SmallString<256> directory(
        output == "-" ? llvm::StringRef(".")
                      : llvm::sys::path::parent_path(output));
    auto bytes = serializePlan(**module, directory);
    if (failed(bytes)) {
      return 1;
    }
    planBytes = std::move(*bytes);
  }

  std::error_code ec;
  llvm::ToolOutputFile out(output, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "tailor compile: error: cannot write '" << output
                 << "': " << ec.message() << "\n";
    return 1;
  }
  if (format == Emit::Plan) {
    out.os().write(reinterpret_cast<const char *>(planBytes.data()),
                   planBytes.size());
  } else {
    (*module)->print(out.os());
    out.os() << "\n";
  }
  out.os().flush();
  if (out.os().has_error()) {
    llvm::errs() << "tailor compile: error: writing '" << output
                 << "' failed: " << out.os().error().message() << "\n";
    out.os().clear_error();
    return 1;
  }
  out.keep();
  return 0;
}

} // namespace tailor
