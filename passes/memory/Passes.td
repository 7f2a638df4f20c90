//===- Passes.td - liveness, recomputation, memory planning -*- tablegen -*-===//

#ifndef TAILOR_PASSES_MEMORY_PASSES_TD
#define TAILOR_PASSES_MEMORY_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToSchedPass : Pass<"tailor-lower-to-sched", "::mlir::ModuleOp"> {
  let summary = "plans one rank: tg function -> sched.program with arena offsets";
  let description = [{
    Turns the module's tg function into the `sched.program` one rank runs:

    - kernel selection: each tg op becomes a `sched.launch` of the backend
      kernel that computes it (codegen/CpuKernels.cpp), with its attributes;
      reshapes become views of their input and cost nothing;
    - execution order: the function's (topological) order;
    - buffer lifetimes: from the first write to the last read of every value
      and of every view of it; function results live to the end;
    - static offsets: parameters and constants are laid out back to back in
      their arenas, activations are packed into one arena by interval
      packing (passes/memory/ArenaPacking.h), kernel workspaces share one
      workspace arena.

    The arena sizes are the plan's peak memory, by category. The function and
    the `tg.param` declarations are replaced by the program.
  }];
  let options = [
    Option<"functionName", "function", "std::string", /*default=*/"\"forward\"",
           "the tg function to plan">,
    Option<"threads", "threads", "int64_t", /*default=*/"8",
           "CPU workers the per-worker workspaces are sized for">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "byte alignment of every buffer and arena">
  ];
  let dependentDialects = ["::tailor::sched::SchedDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // TAILOR_PASSES_MEMORY_PASSES_TD
