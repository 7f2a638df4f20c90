//===- Passes.td - sharding, placement, compression --------*- tablegen -*-===//

#ifndef TAILOR_PASSES_PARALLEL_PASSES_TD
#define TAILOR_PASSES_PARALLEL_PASSES_TD

include "mlir/Pass/PassBase.td"

def ShardPass : Pass<"tailor-shard", "::mlir::ModuleOp"> {
  let summary = "makes the training step data parallel over several ranks";
  let description = [{
    Turns the one logical training step into the program every rank of a
    data-parallel world runs. Each rank runs `train_step` on its own
    micro-batches; what the ranks share is decided here.

    - `ddp`: parameters, gradients and optimizer state replicated; the
      accumulated gradients are averaged over the world at the start of
      `optimizer_step`, in buckets of at most `bucket-bytes` (DDP's
      `bucket_cap_mb`, 25 MiB by default) taken in the order backward
      finishes them (the last layer's first). Each bucket is one
      `tg.all_reduce_states`; planning places its states back to back so
      it is one collective over contiguous bytes.

    The decision is recorded on the module before anything is rewritten:
    `tg.parallel = {ranks_per_node, strategy, world_size}`. With a world of
    one rank the pass records it and changes nothing.
  }];
  let options = [
    Option<"strategy", "strategy", "std::string", /*default=*/"\"ddp\"",
           "ddp, zero1 or zero2 (zero3 and hybrid are planned, not built yet)">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "ranks in the world">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"0",
           "ranks on one node (0: all of them)">,
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"25 * 1024 * 1024",
           "most bytes of gradients one collective carries">,
    Option<"function", "function", "std::string",
           /*default=*/"\"optimizer_step\"",
           "the function that consumes the accumulated gradients">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // TAILOR_PASSES_PARALLEL_PASSES_TD
