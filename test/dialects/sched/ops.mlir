// RUN: tailor-opt %s --split-input-file | tailor-opt --split-input-file | FileCheck %s
// RUN: tailor-opt %s --split-input-file --mlir-print-op-generic | tailor-opt --split-input-file | FileCheck %s

// Tests that a one-rank program with arenas, streams, events, kernels,
// buffers, launches and copies round-trips.
// CHECK-LABEL: sched.program @rank0 rank 0 of 1 {
// CHECK: sched.arena @params device parameters size 4096
// CHECK: sched.arena @staging host_pinned activations size 4096 align 64
// CHECK: sched.arena @spill host activations size 1024
// CHECK: sched.stream @compute
// CHECK: sched.stream @copy
// CHECK: sched.event @weights_ready
// CHECK: sched.kernel @rms_norm_fwd arity 3
// CHECK: sched.kernel @barrier arity 0
// CHECK: %[[HOST:.+]] = sched.buffer @staging[0, 1024] : memref<16x16xf32>
// CHECK: %[[W:.+]] = sched.buffer @params[0, 1024] : memref<16x16xf32>
// CHECK: %[[X:.+]] = sched.buffer @params[1024, 1024] : memref<16x16xf32>
// CHECK: %[[NW:.+]] = sched.buffer @params[2048, 64] : memref<16xf32>
// CHECK: sched.copy h2d %[[HOST]] to %[[W]] on @copy : memref<16x16xf32> to memref<16x16xf32>
// CHECK: sched.record @weights_ready on @copy
// CHECK: sched.wait @weights_ready on @compute
// CHECK: sched.launch @rms_norm_fwd(%[[X]], %[[NW]], %[[W]]) on @compute {block = array<i64: 256, 1, 1>, grid = array<i64: 16, 1, 1>} : memref<16x16xf32>, memref<16xf32>, memref<16x16xf32>
// CHECK: sched.copy d2h %[[W]] to %[[HOST]] on @copy
// CHECK: sched.launch @barrier() on @compute
// CHECK-NOT: :
// CHECK: }
sched.program @rank0 rank 0 of 1 {
  sched.arena @params device parameters size 4096
  sched.arena @staging host_pinned activations size 4096 align 64
  sched.arena @spill host activations size 1024
  sched.stream @compute
  sched.stream @copy
  sched.event @weights_ready
  sched.kernel @rms_norm_fwd arity 3
  sched.kernel @barrier arity 0
  %host = sched.buffer @staging[0, 1024] : memref<16x16xf32>
  %w = sched.buffer @params[0, 1024] : memref<16x16xf32>
  %x = sched.buffer @params[1024, 1024] : memref<16x16xf32>
  %nw = sched.buffer @params[2048, 64] : memref<16xf32>
  sched.copy h2d %host to %w on @copy : memref<16x16xf32> to memref<16x16xf32>
  sched.record @weights_ready on @copy
  sched.wait @weights_ready on @compute
  sched.launch @rms_norm_fwd(%x, %nw, %w) on @compute {grid = array<i64: 16, 1, 1>, block = array<i64: 256, 1, 1>} : memref<16x16xf32>, memref<16xf32>, memref<16x16xf32>
  sched.copy d2h %w to %host on @copy : memref<16x16xf32> to memref<16x16xf32>
  sched.launch @barrier() on @compute
}

// -----

// Tests that every collective kind round-trips in a 2-rank program.
// CHECK-LABEL: sched.program @rank1 rank 1 of 2 {
// CHECK: %[[G:.+]] = sched.buffer @grads[0, 4096] : memref<1024xf32>
// CHECK: %[[S:.+]] = sched.buffer @grads[4096, 2048] : memref<512xf32>
// CHECK: sched.collective all_reduce %[[G]] to %[[G]] reduce avg group [0, 1] on @comm : memref<1024xf32> to memref<1024xf32>
// CHECK: sched.collective reduce_scatter %[[G]] to %[[S]] reduce sum group [0, 1] on @comm : memref<1024xf32> to memref<512xf32>
// CHECK: sched.collective all_gather %[[S]] to %[[G]] group [0, 1] on @comm : memref<512xf32> to memref<1024xf32>
// CHECK: sched.collective broadcast %[[G]] to %[[G]] group [0, 1] root 0 on @comm : memref<1024xf32> to memref<1024xf32>
// CHECK: sched.collective all_to_all %[[W:.+]] to %[[R:.+]] group [0, 1] on @comm : memref<136xui8> to memref<136xui8>
sched.program @rank1 rank 1 of 2 {
  sched.arena @grads device activations size 8192
  sched.stream @comm
  %g = sched.buffer @grads[0, 4096] : memref<1024xf32>
  %s = sched.buffer @grads[4096, 2048] : memref<512xf32>
  %w = sched.buffer @grads[6144, 136] : memref<136xui8>
  %r = sched.buffer @grads[6400, 136] : memref<136xui8>
  sched.collective all_reduce %g to %g reduce avg group [0, 1] on @comm : memref<1024xf32> to memref<1024xf32>
  sched.collective reduce_scatter %g to %s reduce sum group [0, 1] on @comm : memref<1024xf32> to memref<512xf32>
  sched.collective all_gather %s to %g group [0, 1] on @comm : memref<512xf32> to memref<1024xf32>
  sched.collective broadcast %g to %g group [0, 1] root 0 on @comm : memref<1024xf32> to memref<1024xf32>
  sched.collective all_to_all %w to %r group [0, 1] on @comm : memref<136xui8> to memref<136xui8>
}

// -----

// Tests that the planner's ops round-trip: inputs, parameters bound from a
// file, constants, kernel attributes, origins and outputs.
// CHECK-LABEL: sched.program @rank0 rank 0 of 1 {
// CHECK: %[[X:.+]] = sched.input "input_ids" @act[0, 64] : memref<1x8xi64>
// CHECK: %[[T:.+]] = sched.param "model.embed_tokens.weight" @params[0, 4096] from "model.onnx.data"[0, 4096] : memref<32x32xf32>
// CHECK: %[[A:.+]] = sched.param "lora_A" @params[4096, 1024] trainable : memref<8x32xf32>
// CHECK: %[[C:.+]] = sched.constant @consts[0, 8] dense<[1, 2]> : tensor<2xi32> : memref<2xi32>
// CHECK: %[[Y:.+]] = sched.buffer @act[64, 1024] : memref<1x8x32xf32>
// CHECK: sched.launch @embedding(%[[T]], %[[X]], %[[Y]]) on @compute with {scale = 1.000000e+00 : f64} {origin = "tg.embedding model.embed_tokens"}
// CHECK: sched.output "hidden" %[[Y]] : memref<1x8x32xf32>
sched.program @rank0 rank 0 of 1 {
  sched.arena @params host parameters size 8192
  sched.arena @consts host constants size 64
  sched.arena @act host activations size 2048
  sched.stream @compute
  sched.kernel @embedding arity 3
  %x = sched.input "input_ids" @act[0, 64] : memref<1x8xi64>
  %t = sched.param "model.embed_tokens.weight" @params[0, 4096] from "model.onnx.data"[0, 4096] : memref<32x32xf32>
  %a = sched.param "lora_A" @params[4096, 1024] trainable : memref<8x32xf32>
  %c = sched.constant @consts[0, 8] dense<[1, 2]> : tensor<2xi32> : memref<2xi32>
  %y = sched.buffer @act[64, 1024] : memref<1x8x32xf32>
  sched.launch @embedding(%t, %x, %y) on @compute with {scale = 1.0 : f64} {origin = "tg.embedding model.embed_tokens"} : memref<32x32xf32>, memref<1x8xi64>, memref<1x8x32xf32>
  sched.output "hidden" %y : memref<1x8x32xf32>
}

// -----

// Tests that a rank-dependent view (this rank's chunk of a ZeRO bucket) and
// a sharded state round-trip.
// CHECK-LABEL: sched.program @rank0 rank 0 of 4
// CHECK: %[[FLAT:.+]] = sched.buffer @params[0, 512] : memref<128xf32>
// CHECK: %[[CHUNK:.+]] = sched.buffer @params[0, 256] rank_stride 256 period 2 : memref<64xf32>
// CHECK: sched.state "zero.b0.exp_avg" @opt[0, 256] of "zero.b0" kind "exp_avg" shard {flat_elements = 128 : i64, group = array<i64: 0, 1>, members = ["w"], numels = array<i64: 100>, offsets = array<i64: 0>} : memref<64xf32>
// CHECK: sched.collective all_gather %[[CHUNK]] to %[[FLAT]] group [0, 1]
sched.program @rank0 rank 0 of 4 {
  sched.arena @params host parameters size 1024
  sched.arena @opt host optimizer_state size 256
  sched.stream @compute
  %flat = sched.buffer @params[0, 512] : memref<128xf32>
  %chunk = sched.buffer @params[0, 256] rank_stride 256 period 2 : memref<64xf32>
  %m = sched.state "zero.b0.exp_avg" @opt[0, 256] of "zero.b0" kind "exp_avg" shard {flat_elements = 128 : i64, group = array<i64: 0, 1>, members = ["w"], numels = array<i64: 100>, offsets = array<i64: 0>} : memref<64xf32>
  sched.collective all_gather %chunk to %flat group [0, 1] on @compute : memref<64xf32> to memref<128xf32>
}
