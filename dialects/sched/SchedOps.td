//===- SchedOps.td - the sched (schedule) dialect -----------*- tablegen -*-===//
//
// One program per rank: arenas, buffers at static offsets in them, streams,
// events, kernels, and the ordered launches, copies and collectives that make
// up a training step. It maps one-to-one onto the plan file.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_DIALECTS_SCHED_SCHEDOPS_TD
#define TAILOR_DIALECTS_SCHED_SCHEDOPS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Sched_Dialect : Dialect {
  let name = "sched";
  let cppNamespace = "::tailor::sched";
  let summary = "tailor's per-rank schedule: arenas, buffers, streams, launches";
  let description = [{
    The output of planning. A `sched.program` is what one rank executes, in
    order: buffers are views at static offsets into arenas whose sizes are the
    plan's memory figures, and every launch, copy and collective names the
    stream it runs on, with events ordering streams.
  }];
}

class Sched_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sched_Dialect, mnemonic, traits>;

def Sched_ArenaKind : I32EnumAttr<"ArenaKind", "where an arena lives", [
    I32EnumAttrCase<"Device", 0, "device">,
    I32EnumAttrCase<"HostPinned", 1, "host_pinned">,
    I32EnumAttrCase<"Host", 2, "host">
  ]> {
  let cppNamespace = "::tailor::sched";
}

def Sched_ArenaCategory : I32EnumAttr<"ArenaCategory",
    "what an arena holds (the plan's memory report sums arenas by category)", [
    I32EnumAttrCase<"Parameters", 0, "parameters">,
    I32EnumAttrCase<"Constants", 1, "constants">,
    I32EnumAttrCase<"Activations", 2, "activations">,
    I32EnumAttrCase<"Workspace", 3, "workspace">,
    I32EnumAttrCase<"OptimizerState", 4, "optimizer_state">,
    I32EnumAttrCase<"Gradients", 5, "gradients">,
    I32EnumAttrCase<"KvCache", 6, "kv_cache">
  ]> {
  let cppNamespace = "::tailor::sched";
}

def Sched_CopyKind : I32EnumAttr<"CopyKind", "direction of a copy", [
    I32EnumAttrCase<"HostToDevice", 0, "h2d">,
    I32EnumAttrCase<"DeviceToHost", 1, "d2h">,
    I32EnumAttrCase<"DeviceToDevice", 2, "d2d">,
    I32EnumAttrCase<"HostToHost", 3, "h2h">
  ]> {
  let cppNamespace = "::tailor::sched";
}

def Sched_CollectiveKind : I32EnumAttr<"CollectiveKind", "a collective", [
    I32EnumAttrCase<"AllReduce", 0, "all_reduce">,
    I32EnumAttrCase<"ReduceScatter", 1, "reduce_scatter">,
    I32EnumAttrCase<"AllGather", 2, "all_gather">,
    I32EnumAttrCase<"Broadcast", 3, "broadcast">,
    // Point to point (a pipeline stage's activations and gradients): `root`
    // names the other rank.
    I32EnumAttrCase<"Send", 4, "send">,
    I32EnumAttrCase<"Recv", 5, "recv">,
    // Block r of the input to the group's rank r (ZeRO++'s quantized
    // gradient reduce-scatter); input and output of one size.
    I32EnumAttrCase<"AllToAll", 6, "all_to_all">
  ]> {
  let cppNamespace = "::tailor::sched";
}

def Sched_Reduction : I32EnumAttr<"Reduction", "how a collective reduces", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Avg", 1, "avg">,
    I32EnumAttrCase<"Max", 2, "max">,
    I32EnumAttrCase<"Min", 3, "min">
  ]> {
  let cppNamespace = "::tailor::sched";
}

def Sched_Buffer : MemRefOf<[AnyType]>;

//===----------------------------------------------------------------------===//
// The program and its declarations
//===----------------------------------------------------------------------===//

def Sched_ProgramOp : Sched_Op<"program", [
    Symbol, SymbolTable, IsolatedFromAbove, NoTerminator, SingleBlock,
    NoRegionArguments]> {
  let summary = "what one rank executes, in order";
  let description = [{
    Holds the rank's declarations (arenas, streams, events, kernels) and its
    ordered work. `rank` is this program's rank in a world of `world_size`.

    ```mlir
    sched.program @rank0 rank 0 of 1 {
      sched.arena @activations device activations size 1048576
      sched.stream @compute
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$rank,
                       I64Attr:$world_size);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `rank` $rank `of` $world_size attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Sched_ArenaOp : Sched_Op<"arena", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "a block of memory allocated once, holding buffers at offsets";
  let arguments = (ins SymbolNameAttr:$sym_name, Sched_ArenaKind:$kind,
                       Sched_ArenaCategory:$category, I64Attr:$size,
                       DefaultValuedAttr<I64Attr, "256">:$alignment);
  let assemblyFormat = [{
    $sym_name $kind $category `size` $size (`align` $alignment^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_StreamOp : Sched_Op<"stream", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "an in-order queue of work (a CUDA stream, a CPU worker queue)";
  let description = [{
    `host`: the host's own queue (optimizer offload's updates): its launches
    run on the CPU over host arenas, after the device work issued before
    them has finished.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, UnitAttr:$host);
  let assemblyFormat = "$sym_name attr-dict";
}

def Sched_EventOp : Sched_Op<"event", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "a point in one stream that other streams can wait for";
  let arguments = (ins SymbolNameAttr:$sym_name);
  let assemblyFormat = "$sym_name attr-dict";
}

def Sched_KernelOp : Sched_Op<"kernel", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "a kernel the program launches, and how many buffers it takes";
  let description = [{
    The symbol is the kernel's name in the backend's kernel table. `arity`
    is the number of buffers every launch passes, or -1 for a variadic kernel
    (concat, split, linear with or without a bias).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$arity);
  let assemblyFormat = "$sym_name `arity` $arity attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Buffers and work
//===----------------------------------------------------------------------===//

def Sched_BufferOp : Sched_Op<"buffer", [
    Pure, HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a view of `size` bytes at `offset` in an arena";
  let description = [{
    `size` may exceed the bytes of the view's type (padding the planner
    keeps), never fall short of them; `offset` is aligned to the element
    size; `[offset, offset + size)` lies inside the arena.

    With `rank_stride`, the view is rank-dependent: on rank r it starts at
    `offset + (r mod period) * rank_stride` (`period` defaults to the
    program's world size), and it lies inside the arena on every rank --
    this rank's chunk of a ZeRO bucket, say.

    ```mlir
    %chunk = sched.buffer @parameters [0, 3328] rank_stride 3328
        : memref<832xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$arena, I64Attr:$offset,
                       I64Attr:$size, OptionalAttr<I64Attr>:$rank_stride,
                       OptionalAttr<I64Attr>:$rank_period);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = [{
    $arena `[` $offset `,` $size `]`
    (`rank_stride` $rank_stride^ (`period` $rank_period^)?)?
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The arena this buffer lives in, or null if the symbol is unresolved.
    ArenaOp lookupArena(::mlir::SymbolTableCollection &symbolTable);
  }];
}

def Sched_ParamOp : Sched_Op<"param", [
    Pure, HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a parameter's buffer, and where the runtime binds it from";
  let description = [{
    A view like `sched.buffer` holding parameter `name` (its logical,
    unsharded name). `from` gives the file, offset and length of its bytes;
    without it the runtime creates the values (adapters, for instance).

    ```mlir
    %w = sched.param "model.norm.weight" @parameters [0, 256]
        from "model.onnx" [1024, 256] : memref<64xf32>
    ```

    A quantized parameter's buffer holds the bytes of its scheme
    (`quantized {...}`, keys in dialects/tg/TGQuant.h) as `ui8`; its file
    bytes are the float weight, of element type `source_type`, which the
    runtime quantizes when it binds them.

    A ZeRO-3 parameter carries `shard = {shape, offset, flat_elements,
    group}` (the plan's ParameterShard): the view is this rank's chunk of
    its bucket, shared with the bucket's other members, and the parameter
    (of `shape`) lies at `offset` of the bucket's flat space.
  }];
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$arena,
                       I64Attr:$offset, I64Attr:$size,
                       OptionalAttr<StrAttr>:$file,
                       OptionalAttr<I64Attr>:$file_offset,
                       OptionalAttr<I64Attr>:$file_length,
                       UnitAttr:$trainable,
                       OptionalAttr<StrAttr>:$init,
                       OptionalAttr<F64Attr>:$init_value,
                       OptionalAttr<DictionaryAttr>:$quantization,
                       OptionalAttr<TypeAttr>:$source_type,
                       OptionalAttr<DictionaryAttr>:$shard);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = [{
    $name $arena `[` $offset `,` $size `]`
    (`from` $file^ `[` $file_offset `,` $file_length `]`)?
    (`trainable` $trainable^)? (`init` $init^ `(` $init_value `)`)?
    (`quantized` $quantization^ `source` $source_type)?
    (`shard` $shard^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes of the parameter's whole tensor: the view's, or a ZeRO-3
    /// shard's `shape`; an error when the shard is malformed.
    ::mlir::FailureOr<int64_t> logicalBytes();
  }];
}

def Sched_ConstantOp : Sched_Op<"constant", [
    Pure, HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a compile-time constant the plan carries, in an arena";
  let arguments = (ins FlatSymbolRefAttr:$arena, I64Attr:$offset,
                       I64Attr:$size, ElementsAttr:$value);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = [{
    $arena `[` $offset `,` $size `]` $value attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Sched_StateOp : Sched_Op<"state", [
    Pure, HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a training state buffer (gradient accumulator, optimizer moment)";
  let description = [{
    A view like `sched.buffer` that outlives every run: zero when the
    session starts, saved and restored by checkpoints under (`parameter`,
    `kind`). A state sharded over ranks (ZeRO) names its bucket as
    `parameter` and carries `shard = {members, offsets, numels,
    flat_elements, group}` (the plan's StateShard): this rank's chunk of
    the members laid out flat.

    ```mlir
    %g = sched.state "model.norm.weight.grad" @gradients [0, 256]
        of "model.norm.weight" kind "grad" : memref<64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$arena,
                       I64Attr:$offset, I64Attr:$size, StrAttr:$parameter,
                       StrAttr:$kind, OptionalAttr<DictionaryAttr>:$shard);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = [{
    $name $arena `[` $offset `,` $size `]` `of` $parameter `kind` $kind
    (`shard` $shard^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Sched_EntryOp : Sched_Op<"entry", [HasParent<"ProgramOp">]> {
  let summary = "starts a named entry point: the steps, inputs and outputs after it";
  let description = [{
    A training program has `train_step` and `optimizer_step`; the runtime
    runs an entry's steps, up to the next `sched.entry`, on request. A
    program without entries has one, `forward`.
  }];
  let arguments = (ins StrAttr:$name);
  let assemblyFormat = "$name attr-dict";
}

def Sched_InputOp : Sched_Op<"input", [
    Pure, HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a buffer the caller fills before each run, by name";
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$arena,
                       I64Attr:$offset, I64Attr:$size);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = [{
    $name $arena `[` $offset `,` $size `]` attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Sched_OutputOp : Sched_Op<"output", [HasParent<"ProgramOp">]> {
  let summary = "names a buffer the caller reads after a run";
  let arguments = (ins StrAttr:$name, Sched_Buffer:$buffer);
  let assemblyFormat = "$name $buffer attr-dict `:` type($buffer)";
}

def Sched_LaunchOp : Sched_Op<"launch", [
    HasParent<"ProgramOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs a kernel on buffers, on a stream";
  let description = [{
    `kernel_attrs` are the kernel's parameters (axes, epsilon, ...), which
    the plan carries per launch; `origin` names the op it came from;
    `flops` and `bytes` are the work it does (passes/memory/OpCost.h), which
    the cost model turns into time.
  }];
  let arguments = (ins FlatSymbolRefAttr:$kernel, Variadic<Sched_Buffer>:$args,
                       FlatSymbolRefAttr:$stream,
                       OptionalAttr<DictionaryAttr>:$kernel_attrs,
                       OptionalAttr<StrAttr>:$origin,
                       OptionalAttr<DenseI64ArrayAttr>:$grid,
                       OptionalAttr<DenseI64ArrayAttr>:$block,
                       OptionalAttr<F64Attr>:$flops,
                       OptionalAttr<F64Attr>:$bytes);
  let assemblyFormat = [{
    $kernel `(` $args `)` `on` $stream (`with` $kernel_attrs^)?
    attr-dict (`:` type($args)^)?
  }];
  let hasVerifier = 1;
}

def Sched_CopyOp : Sched_Op<"copy", [
    HasParent<"ProgramOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "copies bytes between buffers (h2d, d2h, d2d, h2h) on a stream";
  let arguments = (ins Sched_CopyKind:$kind, Sched_Buffer:$source,
                       Sched_Buffer:$target, FlatSymbolRefAttr:$stream);
  let assemblyFormat = [{
    $kind $source `to` $target `on` $stream attr-dict `:` type($source) `to`
    type($target)
  }];
  let hasVerifier = 1;
}

def Sched_CollectiveOp : Sched_Op<"collective", [
    HasParent<"ProgramOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a collective over a group of ranks (NCCL or MPI underneath)";
  let description = [{
    With `p` ranks in `group`: all_reduce and broadcast keep the size;
    reduce_scatter leaves each rank `1/p` of the input; all_gather makes the
    output `p` times the input; all_to_all keeps the size (block r of the
    input goes to the group's rank r). all_reduce and reduce_scatter name a
    reduction; broadcast names a root rank in the group. send and recv
    (layer split) move the input to, or the output from, the rank `root`
    names; their group is the two ranks.
  }];
  let arguments = (ins Sched_CollectiveKind:$kind, Sched_Buffer:$input,
                       Sched_Buffer:$output, DenseI64ArrayAttr:$group,
                       OptionalAttr<Sched_Reduction>:$reduction,
                       OptionalAttr<I64Attr>:$root,
                       FlatSymbolRefAttr:$stream);
  let assemblyFormat = [{
    $kind $input `to` $output (`reduce` $reduction^)? `group` $group
    (`root` $root^)? `on` $stream attr-dict `:` type($input) `to` type($output)
  }];
  let hasVerifier = 1;
}

def Sched_RecordOp : Sched_Op<"record", [
    HasParent<"ProgramOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "marks an event when the stream reaches this point";
  let arguments = (ins FlatSymbolRefAttr:$event, FlatSymbolRefAttr:$stream);
  let assemblyFormat = "$event `on` $stream attr-dict";
}

def Sched_WaitOp : Sched_Op<"wait", [
    HasParent<"ProgramOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "holds a stream until an event has been reached";
  let arguments = (ins FlatSymbolRefAttr:$event, FlatSymbolRefAttr:$stream);
  let assemblyFormat = "$event `on` $stream attr-dict";
}

#endif // TAILOR_DIALECTS_SCHED_SCHEDOPS_TD
