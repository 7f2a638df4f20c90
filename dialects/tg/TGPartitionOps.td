//===- TGPartitionOps.td - ZeRO++'s hierarchical partitions --*- tablegen -*-===//
//
// hpZ's two ops (passes/parallel/HierarchicalPartition.cpp writes them), in
// a file of their own so that adding them rebuilds only their users.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_DIALECTS_TG_TGPARTITIONOPS_TD
#define TAILOR_DIALECTS_TG_TGPARTITIONOPS_TD

include "dialects/tg/TGDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def TG_SecondaryPartitionOp : TG_Op<"secondary_partition", [
    MemoryEffects<[MemRead]>, SameOperandsAndResultElementType]> {
  let summary = "this rank's node-group part of a gathered ZeRO-3 bucket";
  let description = [{
    ZeRO++'s hierarchical partition (hpZ): a copy of the elements
    `[p * size / shards, (p + 1) * size / shards)` of a gathered bucket
    (1-D, `size` elements), where p is this rank's position in its node
    (rank mod `shards`, the ranks per node). Made from the forward's
    world-wide gather, it stays alive until backward, where
    `tg.gather_partition` rebuilds the bucket from the node's parts. A
    copy, not a view, so the forward's gathered bucket still dies with the
    forward; not `Pure`, so it stays where it is put.

    ```mlir
    %s = tg.secondary_partition %w shards 2 : tensor<256xf32> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$shards);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `shards` $shards attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TG_GatherPartitionOp : TG_Op<"gather_partition", [
    MemoryEffects<[MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a ZeRO-3 bucket all-gathered from its hpZ parts within the node";
  let description = [{
    The bucket's members laid out flat (`tg.bucket`'s layout, as
    `tg.gather_bucket` gives them), all-gathered over the ranks of this
    rank's node (`shards` of them) from the `tg.secondary_partition` each
    kept: part q of the result is what the rank at position q of the node
    kept. ZeRO++'s hpZ backward gather: it crosses no node. Collectives are
    ordered, so this is not `Pure`.

    ```mlir
    %w = tg.gather_partition %s of @zero.b0 over node shards 2
        : tensor<128xf32> -> tensor<256xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$bucket,
                       I64Attr:$shards);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `of` $bucket `over` `node` `shards` $shards attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // TAILOR_DIALECTS_TG_TGPARTITIONOPS_TD
