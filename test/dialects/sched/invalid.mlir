// RUN: tailor-opt %s --split-input-file --verify-diagnostics

// Tests that a world has at least one rank.
// expected-error @+1 {{world size must be >= 1, got 0}}
sched.program @p rank 0 of 0 {
}

// -----

// Tests that a program's rank lies in its world.
// expected-error @+1 {{rank 2 is outside [0, 2)}}
sched.program @p rank 2 of 2 {
}

// -----

// Tests that declarations live inside a program.
// expected-error @+1 {{expects parent op 'sched.program'}}
sched.arena @a device activations size 16

// -----

// Tests that arena sizes are non-negative.
sched.program @p rank 0 of 1 {
  // expected-error @+1 {{arena @a has a negative size -16}}
  sched.arena @a device activations size -16
}

// -----

// Tests that arena alignment is a power of two.
sched.program @p rank 0 of 1 {
  // expected-error @+1 {{alignment of arena @a must be a power of two, got 48}}
  sched.arena @a device activations size 1024 align 48
}

// -----

// Tests that kernel arity is a count or -1 (variadic).
sched.program @p rank 0 of 1 {
  // expected-error @+1 {{kernel @k has arity -2 (expected a count, or -1 for variadic)}}
  sched.kernel @k arity -2
}

// -----

// Tests that a buffer that overruns its arena is rejected.
sched.program @p rank 0 of 1 {
  sched.arena @a device activations size 1024
  // expected-error @+1 {{buffer [512, 1536) overruns arena @a of 1024 bytes}}
  %0 = sched.buffer @a[512, 1024] : memref<256xf32>
}

// -----

// Tests that a buffer names a declared arena.
sched.program @p rank 0 of 1 {
  sched.stream @a
  // expected-error @+1 {{arena @a does not name a sched.arena in the enclosing program}}
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
}

// -----

// Tests that a buffer is large enough for its view.
sched.program @p rank 0 of 1 {
  sched.arena @a device activations size 1024
  // expected-error @+1 {{buffer of 512 bytes cannot hold 'memref<256xf32>' (1024 bytes)}}
  %0 = sched.buffer @a[0, 512] : memref<256xf32>
}

// -----

// Tests that a buffer's offset is aligned to its element size.
sched.program @p rank 0 of 1 {
  sched.arena @a device activations size 2048
  // expected-error @+1 {{offset 6 must be non-negative and a multiple of the 4-byte element size}}
  %0 = sched.buffer @a[6, 1024] : memref<256xf32>
}

// -----

// Tests that a buffer's view is static and row-major.
sched.program @p rank 0 of 1 {
  sched.arena @a device activations size 2048
  // expected-error @+1 {{expected a static, row-major memref, got 'memref<?xf32>'}}
  %0 = sched.buffer @a[0, 1024] : memref<?xf32>
}

// -----

// Tests that a launch names a declared kernel.
sched.program @p rank 0 of 1 {
  sched.stream @s
  // expected-error @+1 {{kernel @k does not name a sched.kernel in the enclosing program}}
  sched.launch @k() on @s
}

// -----

// Tests that a launch names a declared stream.
sched.program @p rank 0 of 1 {
  sched.kernel @k arity 0
  // expected-error @+1 {{stream @s does not name a sched.stream in the enclosing program}}
  sched.launch @k() on @s
}

// -----

// Tests that a launch passes as many buffers as its kernel takes.
sched.program @p rank 0 of 1 {
  sched.arena @a device activations size 1024
  sched.stream @s
  sched.kernel @k arity 2
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{kernel @k takes 2 buffers, got 1}}
  sched.launch @k(%0) on @s : memref<256xf32>
}

// -----

// Tests that launch grids are three positive sizes.
sched.program @p rank 0 of 1 {
  sched.stream @s
  sched.kernel @k arity 0
  // expected-error @+1 {{expected grid as three positive sizes (x, y, z), got [4, 0, 1]}}
  sched.launch @k() on @s {grid = array<i64: 4, 0, 1>}
}

// -----

// Tests that a copy moves equal byte counts.
sched.program @p rank 0 of 1 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  %1 = sched.buffer @a[1024, 2048] : memref<512xf32>
  // expected-error @+1 {{copies 1024 bytes into a 2048-byte target}}
  sched.copy d2d %0 to %1 on @s : memref<256xf32> to memref<512xf32>
}

// -----

// Tests that a copy's direction matches where its buffers live.
sched.program @p rank 0 of 1 {
  sched.arena @dev device activations size 4096
  sched.stream @s
  %0 = sched.buffer @dev[0, 1024] : memref<256xf32>
  %1 = sched.buffer @dev[1024, 1024] : memref<256xf32>
  // expected-error @+1 {{h2d copy expects a host source, but it is in device arena @dev}}
  sched.copy h2d %0 to %1 on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that a stream cannot wait on an event not yet recorded.
sched.program @p rank 0 of 1 {
  sched.stream @s
  sched.event @e
  // expected-error @+1 {{waits on event @e before any sched.record of it in program order}}
  sched.wait @e on @s
  sched.record @e on @s
}

// -----

// Tests that record names a declared event.
sched.program @p rank 0 of 1 {
  sched.stream @s
  // expected-error @+1 {{event @e does not name a sched.event in the enclosing program}}
  sched.record @e on @s
}

// -----

// Tests that wait names a declared stream.
sched.program @p rank 0 of 1 {
  sched.stream @s
  sched.event @e
  sched.record @e on @s
  // expected-error @+1 {{stream @t does not name a sched.stream in the enclosing program}}
  sched.wait @e on @t
}

// -----

// Tests that a collective's group is non-empty.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{expected a non-empty group of ranks}}
  sched.collective all_reduce %0 to %0 reduce sum group [] on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that group ranks lie in the world.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{group rank 2 is outside [0, 2)}}
  sched.collective all_reduce %0 to %0 reduce sum group [0, 2] on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that group ranks are distinct.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{group lists rank 0 twice}}
  sched.collective all_reduce %0 to %0 reduce sum group [0, 0] on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that a rank only joins collectives of groups it belongs to.
sched.program @p rank 0 of 4 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{group [2, 3] does not contain this program's rank 0}}
  sched.collective all_reduce %0 to %0 reduce sum group [2, 3] on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that all_reduce names its reduction.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{all_reduce needs reduction}}
  sched.collective all_reduce %0 to %0 group [0, 1] on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that all_gather takes no reduction.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  %1 = sched.buffer @a[1024, 2048] : memref<512xf32>
  // expected-error @+1 {{all_gather takes no reduction}}
  sched.collective all_gather %0 to %1 reduce sum group [0, 1] on @s : memref<256xf32> to memref<512xf32>
}

// -----

// Tests that broadcast names a root.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{broadcast needs root}}
  sched.collective broadcast %0 to %0 group [0, 1] on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that only broadcast takes a root.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{all_reduce takes no root}}
  sched.collective all_reduce %0 to %0 reduce sum group [0, 1] root 0 on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that a broadcast root belongs to the group.
sched.program @p rank 0 of 4 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{root 3 is not in the group}}
  sched.collective broadcast %0 to %0 group [0, 1] root 3 on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that collectives keep the element type.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  %1 = sched.buffer @a[1024, 1024] : memref<512xbf16>
  // expected-error @+1 {{input and output element types differ: 'f32' vs 'bf16'}}
  sched.collective all_reduce %0 to %1 reduce sum group [0, 1] on @s : memref<256xf32> to memref<512xbf16>
}

// -----

// Tests that reduce_scatter's input divides among the ranks.
sched.program @p rank 0 of 3 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  %1 = sched.buffer @a[1024, 340] : memref<85xf32>
  // expected-error @+1 {{reduce_scatter input of 1024 bytes does not divide among 3 ranks}}
  sched.collective reduce_scatter %0 to %1 reduce sum group [0, 1, 2] on @s : memref<256xf32> to memref<85xf32>
}

// -----

// Tests that all_gather's output is p times its input.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 1024] : memref<256xf32>
  // expected-error @+1 {{all_gather over 2 ranks of 1024 input bytes needs an output of 2048 bytes, got 1024}}
  sched.collective all_gather %0 to %0 group [0, 1] on @s : memref<256xf32> to memref<256xf32>
}

// -----

// Tests that a parameter's file range must hold exactly its tensor.
sched.program @p rank 0 of 1 {
  sched.arena @a host parameters size 1024
  // expected-error @+1 {{parameter 'w' reads 100 bytes from its file but 'memref<4x8xf32>' holds 128}}
  %w = sched.param "w" @a[0, 128] from "w.bin"[0, 100] : memref<4x8xf32>
}

// -----

// Tests that a parameter view must lie inside its arena.
sched.program @p rank 0 of 1 {
  sched.arena @a host parameters size 64
  // expected-error @+1 {{buffer [0, 128) overruns arena @a of 64 bytes}}
  %w = sched.param "w" @a[0, 128] from "w.bin"[0, 128] : memref<4x8xf32>
}

// -----

// Tests that a constant's value must have the buffer's type.
sched.program @p rank 0 of 1 {
  sched.arena @a host constants size 64
  // expected-error @+1 {{value of type 'tensor<2xi64>' does not match the buffer 'memref<2xi32>'}}
  %c = sched.constant @a[0, 8] dense<[1, 2]> : tensor<2xi64> : memref<2xi32>
}

// -----

// Tests that an input must have a name.
sched.program @p rank 0 of 1 {
  sched.arena @a host activations size 64
  // expected-error @+1 {{expected an input name}}
  %x = sched.input "" @a[0, 16] : memref<4xf32>
}

// -----

// Tests that a rank-dependent view lies in its arena on every rank.
sched.program @rank0 rank 0 of 4 {
  sched.arena @params host parameters size 1024
  // expected-error @+1 {{buffer [512, 1536) overruns arena @params of 1024 bytes}}
  %chunk = sched.buffer @params[512, 256] rank_stride 256 : memref<64xf32>
}

// -----

// Tests that a rank period divides the world.
sched.program @rank0 rank 0 of 4 {
  sched.arena @params host parameters size 1024
  // expected-error @+1 {{rank period 3 does not divide the world of 4 ranks}}
  %chunk = sched.buffer @params[0, 256] rank_stride 256 period 3 : memref<64xf32>
}

// -----

// Tests that a ZeRO-3 parameter's view is one chunk of its bucket.
sched.program @rank0 rank 0 of 2 {
  sched.arena @a host parameters size 1024
  // expected-error @+1 {{sharded parameter 'w' needs shard {shape, offset, flat_elements, group} with a view of flat_elements / group size elements}}
  %w = sched.param "w" @a[0, 256] trainable init "zeros"(0.0) shard {flat_elements = 256 : i64, group = array<i64: 0, 1>, offset = 0 : i64, shape = array<i64: 4, 8>} : memref<64xf32>
}

// -----

// Tests that a ZeRO-3 parameter lies inside its bucket.
sched.program @rank0 rank 0 of 2 {
  sched.arena @a host parameters size 1024
  // expected-error @+1 {{sharded parameter 'w' at 100 leaves its bucket of 128 elements}}
  %w = sched.param "w" @a[0, 256] trainable init "zeros"(0.0) shard {flat_elements = 128 : i64, group = array<i64: 0, 1>, offset = 100 : i64, shape = array<i64: 4, 8>} : memref<64xf32>
}

// -----

// Tests that all_to_all keeps the size.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 136] : memref<136xui8>
  %1 = sched.buffer @a[256, 272] : memref<272xui8>
  // expected-error @+1 {{all_to_all over 2 ranks of 136 input bytes needs an output of 136 bytes, got 272}}
  sched.collective all_to_all %0 to %1 group [0, 1] on @s : memref<136xui8> to memref<272xui8>
}

// -----

// Tests that all_to_all's input divides into one block per rank.
sched.program @p rank 0 of 3 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 136] : memref<136xui8>
  %1 = sched.buffer @a[256, 136] : memref<136xui8>
  // expected-error @+1 {{all_to_all input of 136 bytes does not divide among 3 ranks}}
  sched.collective all_to_all %0 to %1 group [0, 1, 2] on @s : memref<136xui8> to memref<136xui8>
}

// -----

// Tests that all_to_all reduces nothing.
sched.program @p rank 0 of 2 {
  sched.arena @a device activations size 4096
  sched.stream @s
  %0 = sched.buffer @a[0, 136] : memref<136xui8>
  %1 = sched.buffer @a[256, 136] : memref<136xui8>
  // expected-error @+1 {{all_to_all takes no reduction}}
  sched.collective all_to_all %0 to %1 reduce sum group [0, 1] on @s : memref<136xui8> to memref<136xui8>
}
