//===- Passes.td - liveness, recomputation, memory planning -*- tablegen -*-===//

#ifndef TAILOR_PASSES_MEMORY_PASSES_TD
#define TAILOR_PASSES_MEMORY_PASSES_TD

include "mlir/Pass/PassBase.td"

def RecomputePass : Pass<"tailor-recompute", "::mlir::ModuleOp"> {
  let summary = "recomputes activations in backward instead of keeping them";
  let description = [{
    Activation checkpointing on the training step. The forward ops are
    those the loss is computed from; a forward value read by a backward op
    is *saved* (kept from forward to backward). The policy picks saved
    values to recompute instead; each is cloned, with whatever it needs
    that is not kept, right before its first backward reader, and the
    backward readers use the clone, so the original dies at the end of
    forward. Recomputation never crosses a layer: a value a later layer
    reads (the residual stream), and everything outside the layers, is
    kept. Parameters, constants and what is made from them alone
    (transposed or dequantized weights) are never saved.

    - `none`: keep everything;
    - `full`: keep each layer's inputs only and recompute the rest of the
      layer (HF's `gradient_checkpointing: true`);
    - `selective`: recompute what is cheap and large -- norms, rotary,
      activations, elementwise, dropout -- and keep what GEMMs, attention
      and embeddings made (Megatron-LM's choice): a saved value is
      recomputed when rebuilding it needs no such op;
    - `budget`: the activation peak (passes/memory/ActivationMemory.h) must
      come under `budget-fraction` of the no-recompute peak, or under
      `budget-bytes`. Saved values, grouped by their place in the layer
      (the same tensor of every layer), are recomputed in increasing order
      of recompute FLOPs per byte freed (passes/memory/OpCost.h) until the
      peak fits; a budget below what `full` reaches is a warning and
      `full`'s choice.

    The decision is recorded before the rewrite: every forward op whose
    results are recomputed carries `tg.recompute`, the function
    `tg.recompute_policy`, and the clones `tg.recomputed`. Recomputed ops
    are the same kernels on the same inputs, so losses and gradients are
    bit-identical to `none`.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"train_step\"",
           "the training step to rewrite">,
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"",
           "none, full, selective or budget">,
    Option<"budgetFraction", "budget-fraction", "double", /*default=*/"0",
           "budget: the activation peak as a fraction of no recomputation's">,
    Option<"budgetBytes", "budget-bytes", "int64_t", /*default=*/"0",
           "budget: the activation peak in bytes">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

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
           "or train_step,optimizer_step and eval_step when there is one)">,
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
           "fp32, bf16 (GEMMs and attention round inputs to bf16 for the "
           "tensor cores, accumulating in f32; cpu: the GEMMs "
           "tailor-emulate-half marked tg.bf16), or fp16 (cpu: the GEMMs "
           "tailor-emulate-half marked tg.fp16 round to half)">,
    Option<"deviceMemory", "device-memory", "int64_t", /*default=*/"0",
           "cuda: the GPU's memory in bytes; a program that does not fit "
           "in it less 512 MiB for the CUDA context is an error (0: no "
           "check)">,
    Option<"gemmWorkspace", "gemm-workspace", "int64_t", /*default=*/"0",
           "cuda: bytes of GEMM-library workspace to plan">,
    Option<"deviceBudget", "device-budget", "int64_t", /*default=*/"0",
           "the most bytes of device arenas the program may take, on any "
           "target (0: none but the GPU's memory); over it is an error "
           "naming the excess">
  ];
  let dependentDialects = ["::tailor::sched::SchedDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // TAILOR_PASSES_MEMORY_PASSES_TD
