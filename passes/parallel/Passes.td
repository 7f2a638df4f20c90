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
    - `zero1` (DeepSpeed stage 1): trainable parameters are grouped, in the
      same order and sizes, into `tg.bucket`s laid out flat and cut into one
      chunk per rank. Each rank keeps its chunk of the optimizer moments;
      `optimizer_step` reduce-scatters each bucket's whole accumulated
      gradients (average) into a chunk accumulator, updates its chunk of the
      parameters and all-gathers them. The clipping norm sums the ranks'
      squared chunk norms.
    - `zero2` (stage 2, FSDP's SHARD_GRAD_OP): as zero1, and gradients are
      reduce-scattered in `train_step` as soon as a bucket's last gradient
      of the micro-batch exists, so only chunks are accumulated.
    - `zero3` (stage 3, FSDP's FULL_SHARD): as zero2, and the trainable
      parameters themselves are kept only as chunks (`tg.bucket ...
      sharded_params`). `train_step` and `eval_step` read them from a
      `tg.gather_bucket` made right before their first read, again before
      backward (`reshard-after-forward`), through `tg.bucket_member`
      views; the update writes the chunk, and nothing is gathered after it.
    - `hybrid` (FSDP's HYBRID_SHARD without sharded parameters): zero2
      within each node (`ranks-per-node` ranks), one replica per node; the
      chunk gradients are averaged across nodes before the update.

    The decision is recorded on the module before anything is rewritten:
    `tg.parallel = {ranks_per_node, strategy, world_size}`. With a world of
    one rank the pass records it and changes nothing.
  }];
  let options = [
    Option<"strategy", "strategy", "std::string", /*default=*/"\"ddp\"",
           "ddp, zero1, zero2, zero3 or hybrid">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "ranks in the world">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"0",
           "ranks on one node (0: all of them)">,
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"25 * 1024 * 1024",
           "most bytes of gradients one collective carries">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true",
           "zero3: gather the parameters again for backward instead of "
           "keeping the forward's gather (FSDP2's reshard_after_forward)">,
    Option<"function", "function", "std::string",
           /*default=*/"\"optimizer_step\"",
           "the function that consumes the accumulated gradients">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // TAILOR_PASSES_PARALLEL_PASSES_TD
