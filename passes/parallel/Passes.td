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
           "the function that consumes the accumulated gradients">,
    Option<"deferParamReads", "defer-param-reads", "bool",
           /*default=*/"false",
           "zero3: leave the parameter reads (and the frozen buckets) to "
           "tailor-gather-params, run after recomputation">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect",
                           "::mlir::arith::ArithDialect"];
}

def OverlapCollectivesPass : Pass<"tailor-overlap-collectives",
                                  "::mlir::ModuleOp"> {
  let summary = "lets gradient collectives run while the rest of backward does";
  let description = [{
    A scheduling decision on the data-parallel training step (after
    `tailor-shard` and recomputation, before planning). Each gradient
    collective of `function` (ZeRO-2/3 and hybrid's `tg.reduce_scatter`,
    or ZeRO++ qgZ's `tg.all_to_all` in its place, `tg.all_reduce` of a
    value) is marked `tg.overlap`: planning issues it
    on the communication stream right after the bucket's last gradient,
    with events ordering it against the compute stream, and the compute
    stream waits for it only before the first launch that touches its
    buffers. To give it something to overlap with, its consumers (the
    `tg.accumulate` into the bucket's chunk, after qgZ's
    `tg.dequantize_reduce`) move down to just before the
    collective `in-flight` buckets later (or to the end of the function):
    at most `in-flight` buckets are in flight at once, which bounds the
    activation bytes the overlap keeps alive (planning counts them).

    With `move-ddp-reductions` (set when a step is one micro-batch, so
    `train_step` runs once per `optimizer_step`), DDP's
    `tg.all_reduce_states` move from the start of `optimizer_step` into
    `function`, right after the last op that writes one of their states,
    and are marked too: DDP's overlap of the all-reduce with backward. With
    several micro-batches they stay where they are (one reduction per
    step, after the last micro-batch).

    ZeRO-3's `tg.gather_bucket`s of `function` (with `prefetch`) are issued
    one ahead: each but the first moves up to where compute starts reading
    the one before it, all marked, so the communication stream gathers
    bucket k + 1 while compute reads bucket k (FSDP's forward and backward prefetch of one;
    two gathered buckets are alive at once, and planning counts them).

    Consumers only move past ops that do not touch their state; one that
    cannot move stays and its collective is not marked (no overlap, said
    in a remark).
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"train_step\"",
           "the function whose collectives overlap its compute">,
    Option<"optimizerFunction", "optimizer-function", "std::string",
           /*default=*/"\"optimizer_step\"",
           "the function DDP's reductions start (move-ddp-reductions)">,
    Option<"inFlight", "in-flight", "int64_t", /*default=*/"2",
           "most gradient buckets in flight at once (>= 1)">,
    Option<"moveDdpReductions", "move-ddp-reductions", "bool",
           /*default=*/"false",
           "move DDP's all-reduces into `function` (one micro-batch a step)">,
    Option<"prefetch", "prefetch", "bool", /*default=*/"true",
           "zero3: gather the next bucket while the current one is used">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def OverlapHostUpdatesPass : Pass<"tailor-overlap-host-updates",
                                  "::mlir::ModuleOp"> {
  let summary = "starts optimizer offload's host updates during backward";
  let description = [{
    ZeRO-Offload's overlap of the CPU optimizer with backward (after
    `tailor-overlap-collectives` has moved each parameter's copies to the
    host into `function`, right after its gradient is final; one
    micro-batch a step). Each host `tg.adamw_update` of
    `optimizer-function` whose two host copies (its gradient and its
    master) are in `function` moves there too, together with the
    scalars it reads (learning rate, step, clipping scale, brought to the
    host by `tg.to_host`), cloned at the start of `function`, which gains
    an i64 input `update_step` they are computed from (the optimizer's
    `step`; a plan's input names are unique across its entries).

    The updates of one transformer layer (the `tg.layer` of the backward
    op before their copies) go back to back after the layer's last copy,
    so planning joins them into one host launch per layer, started while
    backward goes on through the layers before it; planning orders it by
    events after the copies and before the first op that touches its
    buffers.

    An update whose scalars read anything but the optimizer's `step` and
    constants stays where it is, said in a remark: with gradient clipping
    the scale needs the global gradient norm (the last gradient of the
    step), and fp16's scaler its inverse scale and overflow check. So do
    updates whose copies stayed (a gradient a collective reduces).
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"train_step\"",
           "the training step the updates move into">,
    Option<"optimizerFunction", "optimizer-function", "std::string",
           /*default=*/"\"optimizer_step\"",
           "the function the host updates are in">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def OffloadPass : Pass<"tailor-offload", "::mlir::ModuleOp"> {
  let summary = "places tensors in host memory, copied to the device to be used";
  let description = [{
    Offload decisions on the training step (after `tailor-shard` and
    `tailor-recompute`, so the forward ops replayed in backward read the
    backward's copy; before `tailor-overlap-collectives`, which prefetches
    the copies).

    - `params` (`offload_param: cpu`, `fsdp_offload_params: true`): every
      frozen parameter the step reads (LoRA's and QLoRA's base weights; a
      quantized one as its stored bytes) goes into `offload.fN` buckets of
      at most `bucket-bytes` that live whole in host memory
      (`tg.bucket ... host`). Each function reads them through a
      `tg.gather_bucket` (a host-to-device copy into a transient) before
      the forward's reads and again before the backward's, and
      `tg.bucket_member` views; the device holds at most the buckets in
      use.
    - `optimizer` (`offload_optimizer: cpu`, ZeRO-Offload's placement):
      AdamW's moments become `host` states and each update runs on the host
      (`tg.host`) on host copies of the gradient (`grad_host`) and of the
      parameter (`master`), made by `tg.copy_state` before the updates and
      copied back after; `tg.to_host` brings the scalars over
      (OffloadOptimizer.cpp). Under ZeRO the update of a bucket's chunk
      gets chunk-sized host states, its copies move this rank's chunk, and
      the bucket's all-gather follows the copy back. SGD is refused.
    - `activations` (`enable_activation_offloading: true`, torchtune's):
      every activation of at least `activation-min-bytes` that the forward
      of `train_step` saves for backward (after recomputation) is copied to
      host memory (`tg.to_host`) after its last forward reader and back
      (`tg.to_device`) before its first backward reader, which reads the
      copy (OffloadActivations.cpp).

    Planning puts host buckets in the `parameters_host` arena (pinned host
    memory) and lowers each gather to a `sched.copy h2d`; host states go to
    `optimizer_state_host`, host values to `activations_host`, and host
    updates onto the `host` stream.
  }];
  let options = [
    Option<"params", "params", "bool", /*default=*/"false",
           "frozen parameters in host memory">,
    Option<"optimizer", "optimizer", "bool", /*default=*/"false",
           "AdamW's state in host memory and its update on the host">,
    Option<"activations", "activations", "bool", /*default=*/"false",
           "saved activations in host memory between forward and backward">,
    Option<"activationMinBytes", "activation-min-bytes", "int64_t",
           /*default=*/"1024",
           "smallest saved activation moved to the host (torchtune's "
           "min_offload_size)">,
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"25 * 1024 * 1024",
           "most bytes one host bucket (and so one copy) holds">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def GatherParamsPass : Pass<"tailor-gather-params", "::mlir::ModuleOp"> {
  let summary = "ZeRO-3's reads of sharded parameters through gathers, after recomputation";
  let description = [{
    The second half of `zero3` when `tailor-shard` ran with
    `defer-param-reads` (the training pipeline does): the frozen parameters
    go into buckets of their own, and every read of a sharded parameter
    goes through a `tg.gather_bucket` before the forward's reads and
    another before the backward's (`reshard-after-forward`). Run after
    `tailor-recompute`, the forward ops it replays in backward read the
    backward's gather, so the forward's dies with the forward. A module
    not sharded with zero3 is left alone.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"25 * 1024 * 1024",
           "most bytes of frozen parameters one bucket holds">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true",
           "gather the parameters again for backward">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def HierarchicalPartitionPass : Pass<"tailor-hierarchical-partition",
                                     "::mlir::ModuleOp"> {
  let summary = "ZeRO++'s hierarchical partitions (hpZ): backward gathers within the node";
  let description = [{
    For every device bucket of sharded parameters that the training step
    gathers twice (ZeRO-3 with `reshard_after_forward`: once for the
    forward, again for backward), a `tg.secondary_partition` where compute
    first reads the forward's gather keeps this rank's part of the gathered
    bucket by its position in the node (size / `partition-size` elements),
    and the backward's `tg.gather_bucket` becomes a `tg.gather_partition`
    of those parts over the node: the backward's gathers cross no node, and
    each rank keeps 1 / `partition-size` of every such bucket from forward
    to backward. `partition-size` (DeepSpeed's `zero_hpz_partition_size`)
    must divide the world size and equal the ranks per node (the secondary
    group is the node). The decision is recorded first, as
    `hpz_partition_size` in `tg.parallel`. Run after `tailor-gather-params`
    and before `tailor-quantize-gathers`, which then quantizes only the
    forward's world-wide gathers and the parts keep the decoded f32 values.
  }];
  let options = [
    Option<"partitionSize", "partition-size", "int64_t", /*default=*/"1",
           "ranks of the secondary partition group (the ranks per node)">,
    Option<"function", "function", "std::string", /*default=*/"\"train_step\"",
           "the training step whose backward gathers go within the node">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def QuantizeGathersPass : Pass<"tailor-quantize-gathers", "::mlir::ModuleOp"> {
  let summary = "ZeRO++'s quantized weight gathers (qwZ) for ZeRO-3's buckets";
  let description = [{
    Every `tg.gather_bucket` of a device bucket of sharded f32 parameters
    (ZeRO-3's trainable and frozen float weights) sends int8 on the wire:
    the gather gets `wire = "int8"` and the wire chunks' type, and a
    `tg.dequantize_gathered` right after it decodes the f32 bucket for the
    gather's readers (runtime/quant/WireInt8.h: blocks of 64, one f32 scale
    each; 3.76x fewer bytes than f32). The decision is also recorded on the
    module (`quantized_gathers` in `tg.parallel`). Quantized frozen weights' stored bytes
    and offloaded buckets are left alone. Run after `tailor-gather-params`
    and before `tailor-overlap-collectives` (which then prefetches the
    gathers and leaves the decodes where compute reads them).
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"int8\"",
           "the wire format of weight gathers: int8">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def QuantizeReductionsPass : Pass<"tailor-quantize-reductions",
                                   "::mlir::ModuleOp"> {
  let summary = "ZeRO++'s quantized gradient reduce-scatter (qgZ)";
  let description = [{
    Every `tg.reduce_scatter` (ZeRO-2's and ZeRO-3's gradient buckets,
    f32, chunks of whole blocks of 64) becomes a `tg.quantize_chunks` that
    encodes each destination rank's chunk as its own wire chunk in
    `format` (runtime/quant/Wire.h: blocks of 64, one f32 scale each;
    `int8` codes, 3.76x fewer bytes than f32, or `int4` codes two a byte,
    7.1x fewer), a `tg.all_to_all` that sends chunk r to rank r, and a
    `tg.dequantize_reduce` that decodes the chunks received and reduces
    them (sum, then the reduce-scatter's average) in f32 into what the
    reduce-scatter gave. An all-to-all rather than a ring reduce-scatter,
    which would quantize again at every hop. The decision is recorded on
    the module (`quantized_reductions` in `tg.parallel`: the format). A
    reduce-scatter that cannot be quantized (not f32, a chunk not whole
    blocks) is an error, and so are a module without any and a format
    other than int8 or int4. Run after `tailor-shard` and before
    `tailor-overlap-collectives`, which then starts the all-to-alls on the
    communication stream and defers each decode with the accumulation it
    feeds.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"int8\"",
           "the wire format of gradient reduce-scatters: int8 or int4">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def CompressGradientsPass : Pass<"tailor-compress-gradients",
                                 "::mlir::ModuleOp"> {
  let summary = "compresses DDP's gradient all-reduces (PowerSGD, ACP-SGD, "
                "top-k, sign-SGD)";
  let description = [{
    Records the decision on the module (`tg.compression`) and rewrites each
    DDP bucket's `tg.all_reduce_states` in `function` into PyTorch's
    PowerSGD communication hook (powerSGD_hook.py), step for step:

    - the bucket's plain all-reduce stays for the first `start-step`
      steps (`tg.steps = [1, start]`, the hook's `start_powerSGD_iter`);
    - from step `start + 1` (`tg.steps = [start + 1, -1]`): the residual of
      the last step is added to every gradient (`error-feedback`); vectors
      and matrices too small to gain (`(n + m) r min-compression-rate >=
      n m`) are all-reduced as they are; every other gradient M, read as
      `[shape[0], rest]`, becomes `P = M Q` (Q orthogonalized), P summed
      over ranks and orthogonalized, `Q = M^T P` averaged over ranks, and
      `M = P Q^T`; the error keeps what the rank sent minus what it got.

    P, Q and the error are new states (`powersgd_p`, `powersgd_q`,
    `powersgd_error` of each parameter), so checkpoints keep them. Q's
    first values (`tg.lowrank_init`) are a fixed function of the position;
    with `warm-start` they are set once, in step `start + 1`, and Q carries
    over; without, in every compressed step. Buckets keep their gradients
    uncompressed ones first, so the uncompressed all-reduce is the
    bucket's prefix, in place.

    `method=acp-sgd` (ACP-SGD, Zhang et al. 2023) keeps the warm-up, the
    error feedback and the uncompressed all-reduce, and alternates the two
    factors: in steps `start + 1, start + 3, ...` (`tg.steps = [start + 1,
    -1, 2]`) Q is orthogonalized, `P = M Q` averaged over ranks and
    `M = P Q^T`; in steps `start + 2, start + 4, ...` P is orthogonalized,
    `Q = M^T P` averaged over ranks and `M = P Q^T`. Each step all-reduces
    one factor per bucket; Q's first values are set once, in step
    `start + 1`.

    `method=topk` and `method=signsgd` (SparseCompression.cpp names the
    variants: Aji and Heafield's top-k with a fixed k, EF-SignSGD) keep the
    warm-up and, from step `start + 1`, compress the bucket as one flat
    vector with error feedback (`powersgd_error` states, as PowerSGD's):
    `tg.topk_compress` keeps `ceil(ratio n)` entries, `tg.sign_compress`
    one bit an entry and a scale per tensor; both are gathered from every rank
    (`tg.all_gather`) and averaged into the gradients
    (`tg.sparse_average`, `tg.sign_average`).
  }];
  let options = [
    Option<"method", "method", "std::string", /*default=*/"\"powersgd\"",
           "the compression: powersgd, acp-sgd, topk or signsgd">,
    Option<"ratio", "ratio", "double", /*default=*/"0.01",
           "topk: the fraction of each bucket's entries a rank sends, in "
           "(0, 1]">,
    Option<"rank", "rank", "int64_t", /*default=*/"1",
           "the rank of the approximation (matrix_approximation_rank)">,
    Option<"startStep", "start-step", "int64_t", /*default=*/"1000",
           "uncompressed steps before compression starts "
           "(start_powerSGD_iter)">,
    Option<"errorFeedback", "error-feedback", "bool", /*default=*/"true",
           "add what compression lost to the next step's gradient">,
    Option<"warmStart", "warm-start", "bool", /*default=*/"true",
           "keep Q from step to step">,
    Option<"minCompressionRate", "min-compression-rate", "double",
           /*default=*/"2.0",
           "compress a gradient only when it shrinks more than this">,
    Option<"function", "function", "std::string",
           /*default=*/"\"optimizer_step\"",
           "the function whose all-reduces are compressed (it takes the "
           "step)">
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

def SplitLayersPass : Pass<"tailor-split-layers", "::mlir::ModuleOp"> {
  let summary = "cuts the training step into pipeline stages (x data-parallel replicas)";
  let description = [{
    Layer split (HF's `device_map="auto"`, DeepSpeed's pipeline stages):
    consecutive transformer layers on consecutive ranks, activations sent
    forward and their gradients back with `tg.send` / `tg.recv`
    (SplitLayers.cpp says how ops are placed and why). The decision goes on
    the module (`tg.pipeline = {stages, schedule, micro_batches,
    first_layers}`); the step becomes one nested module per stage
    (`module @stageN`, `tg.pipeline_stage`), which the rest of the
    training pipeline then plans as that rank's program:

    - every stage but the last: `pipeline_forward` (receive, keep in a
      `pipeline_input` slot, forward, send) and `train_step` (read the
      slot, forward again, receive the gradient, backward, send the input's
      gradient back); both take `slot`, the micro-batch's place among those
      in flight (`min(stages - stage, micro_batches)` slots for `1f1b`,
      one for `naive`);
    - the last stage: `train_step` (receive, forward, loss, backward, send);
    - each stage's `optimizer_step` updates its own parameters; the
      clipping norm is the square root of the all-reduced sum of the
      stages' squared norms (`over stages`).

    With world-size a multiple of stages, each stage has world-size /
    stages data-parallel replicas (stage-major ranks: a stage's replicas
    are consecutive ranks); its gradients are averaged over them with DDP's
    buckets (`tg.all_reduce_states ... avg over replicas`), and
    `replicas` goes into `tg.pipeline` and `tg.pipeline_stage`.

    Refused by name: validation entries, an already sharded step, tied
    trainable parameters on two stages, fewer layers than stages.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1",
           "pipeline stages (ranks); 1 leaves the step alone">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "1f1b or naive: how many micro-batches a stage keeps in flight">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "micro-batches per step (gradient_accumulation_steps)">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"0",
           "ranks of the target cluster, a multiple of stages: stages x "
           "data-parallel replicas (0: take stages)">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "with replicas, the most bytes of gradients one all-reduce "
           "carries (ddp_bucket_cap_mb)">,
  ];
  let dependentDialects = ["::tailor::tg::TGDialect",
                           "::mlir::func::FuncDialect"];
}

def BalanceRanksPass : Pass<"tailor-balance-ranks", "::mlir::ModuleOp"> {
  let summary = "gives each rank of a mixed cluster its own micro-batch count";
  let description = [{
    On a heterogeneous cluster (the module's `tg.cluster`, one device per
    rank) data parallelism divides each optimizer step's micro-batches by
    predicted speed: the cost model times one `train_step` micro-batch on
    each rank's device (the work of every op, passes/memory/OpCost.h), and
    the step's `accumulation-steps` x ranks micro-batches are handed out
    one at a time to the rank that would finish its share soonest with one
    more (every rank gets at least one), which minimizes the slowest rank's
    accumulation time. The global batch is kept exactly.

    Each rank accumulates the gradients of its own micro-batches; the
    all-reduce averages the ranks' sums over the world and the update
    divides by `accumulation-steps`, so the gradient is the sum over the
    global batch divided by its count of micro-batches (world 1's at the
    same global batch) however unevenly the ranks split it.

    The decision: `tg.balance = {global_micro_batches, micro_batches =
    array<i64: ...>, micro_batch_seconds = [...]}` on the module. Only
    `ddp` and `zero1`, whose collectives run once per optimizer step, take
    uneven counts: other strategies (tg.parallel) are refused by name.
  }];
  let options = [
    Option<"accumulationSteps", "accumulation-steps", "int64_t",
           /*default=*/"1",
           "the recipe's micro-batches per rank and step: the step has this "
           "many times the ranks">,
    Option<"threads", "threads", "int64_t", /*default=*/"1",
           "CPU threads of a rank whose device does not say">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "fp32 or bf16, as the plan computes">,
    Option<"function", "function", "std::string",
           /*default=*/"\"train_step\"", "the micro-batch's function">,
  ];
  let dependentDialects = ["::tailor::tg::TGDialect"];
}

#endif // TAILOR_PASSES_PARALLEL_PASSES_TD
