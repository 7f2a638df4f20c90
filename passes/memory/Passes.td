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

    A training module has two functions, `train_step` and
    `optimizer_step`; each becomes an entry (`sched.entry`) of one program.
    Their activations share the activation arena (entries never run at the
    same time), inputs of every entry keep their own bytes, and the
    training state (`tg.state`) lives in a gradients and an optimizer-state
    arena. State updates run in place: `tg.accumulate` of a weight or
    embedding gradient makes that kernel add straight into the
    accumulator, and the optimizer kernels update parameters and moments
    where they are.

    The arena sizes are the plan's peak memory, by category. The functions
    and the `tg.param`/`tg.state` declarations are replaced by the program.
  }];
  let options = [
    Option<"functionName", "function", "std::string", /*default=*/"\"\"",
           "comma-separated functions to plan, in order (default: forward, "
           "or train_step,optimizer_step)">,
    Option<"threads", "threads", "int64_t", /*default=*/"8",
           "CPU workers the per-worker workspaces are sized for">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "byte alignment of every buffer and arena">,
    Option<"backend", "backend", "std::string", /*default=*/"\"cpu\"",
           "cpu or cuda: where the program's arenas live and which kernel "
           "table runs its launches">,
    Option<"hardware", "hardware", "std::string", /*default=*/"\"cpu\"",
           "the target machine's name, recorded in the plan">,
    Option<"sm", "sm", "int64_t", /*default=*/"0",
           "cuda: the target's compute capability (major * 10 + minor)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "fp32, or bf16 (GEMMs and attention round inputs to bf16 for the "
           "tensor cores, accumulating in f32)">,
    Option<"deviceMemory", "device-memory", "int64_t", /*default=*/"0",
           "cuda: the GPU's memory in bytes; a program that does not fit "
           "in it less 512 MiB for the CUDA context is an error (0: no "
           "check)">,
    Option<"gemmWorkspace", "gemm-workspace", "int64_t", /*default=*/"0",
           "cuda: bytes of GEMM-library workspace to plan">
  ];
  let dependentDialects = ["::tailor::sched::SchedDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // TAILOR_PASSES_MEMORY_PASSES_TD
