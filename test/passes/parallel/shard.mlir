// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4 bucket-bytes=100" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=1" | FileCheck %s --check-prefix=ONE
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4 bucket-bytes=100" --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED

tg.param @a : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @c : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<4x4xf32> of @a grad
tg.state @b.grad : tensor<4xf32> of @b grad
tg.state @c.grad : tensor<4x4xf32> of @c grad
tg.state @a.m : tensor<4x4xf32> of @a momentum_buffer
tg.state @b.m : tensor<4xf32> of @b momentum_buffer
tg.state @c.m : tensor<4x4xf32> of @c momentum_buffer

// Tests that ddp averages the gradients over the world before the
// optimizer reads them, in buckets of at most 100 bytes filled from the
// last gradient back (c and b: 64 + 16 bytes; a would make 144, so it
// starts the next), and records the decision on the module. Planning
// makes each bucket one all_reduce over contiguous gradient bytes (c at 0,
// b right after it, a at the next 64-byte boundary) of every rank.
// CHECK: module attributes {tg.parallel = {ranks_per_node = 4 : i64, strategy = "ddp", world_size = 4 : i64}}
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: tg.all_reduce_states [@c.grad, @b.grad] avg over world
// CHECK-NEXT: tg.all_reduce_states [@a.grad] avg over world
// CHECK: tg.sgd_update @a
// ONE: module attributes {tg.parallel = {ranks_per_node = 1 : i64, strategy = "ddp", world_size = 1 : i64}}
// ONE-LABEL: func.func @optimizer_step
// ONE-NOT: tg.all_reduce_states
// SCHED: sched.program @rank0 rank 0 of 4
// SCHED: %[[CB:.+]] = sched.buffer @gradients[0, 80] : memref<20xf32>
// SCHED: sched.collective all_reduce %[[CB]] to %[[CB]] reduce avg group [0, 1, 2, 3] on @compute
// SCHED: %[[A:.+]] = sched.buffer @gradients[128, 64] : memref<16xf32>
// SCHED: sched.collective all_reduce %[[A]] to %[[A]] reduce avg group [0, 1, 2, 3] on @compute
// SCHED: sched.launch @sgd
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> {
  %g = tg.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  tg.accumulate %g into @b.grad : tensor<4xf32>
  %s = tg.reduce_sum %g axes = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @optimizer_step(%lr: tensor<f32>) -> tensor<f32> {
  %one = arith.constant dense<1.0> : tensor<f32>
  tg.sgd_update @a grad @a.grad momentum_buffer @a.m lr %lr scale %one {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  tg.sgd_update @b grad @b.grad momentum_buffer @b.m lr %lr scale %one {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  tg.sgd_update @c grad @c.grad momentum_buffer @c.m lr %lr scale %one {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  return %lr : tensor<f32>
}

