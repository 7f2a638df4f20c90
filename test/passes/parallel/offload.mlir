// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload="params=true bucket-bytes=200" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload="params=true bucket-bytes=200" --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload="params=true bucket-bytes=200" --tailor-overlap-collectives --tailor-lower-to-sched | FileCheck %s --check-prefix=PREFETCH
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload | FileCheck %s --check-prefix=OFF

tg.param @a : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @w0 : tensor<4x4xf32> init <"zeros", 0.0 : f64>
tg.param @w1 : tensor<4x4xf32> init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<4x4xf32> of @a grad
tg.state @a.m : tensor<4x4xf32> of @a exp_avg
tg.state @a.v : tensor<4x4xf32> of @a exp_avg_sq

// Tests that the frozen parameters go into host buckets, one per layer
// (w0's reader is layer 0, w1's layer 1), read through a gather (a copy to
// the device) before the forward's reads and again before backward's, and
// that the trainable parameter stays.
// CHECK: tg.bucket @offload.f0 [@w0] offsets [0] size 64 over world shards 1 sharded_params host : f32
// CHECK: tg.bucket @offload.f1 [@w1] offsets [0] size 64 over world shards 1 sharded_params host : f32
// CHECK-LABEL: func.func @train_step
// CHECK: tg.param_ref @a
// CHECK: %[[F0:.+]] = tg.gather_bucket @offload.f0 : tensor<64xf32>
// CHECK-NEXT: %[[W0:.+]] = tg.bucket_member %[[F0]][0] : tensor<64xf32> -> tensor<4x4xf32>
// CHECK-NEXT: tg.mul %{{.+}}, %[[W0]]
// CHECK: tg.gather_bucket @offload.f1
// CHECK: tg.cross_entropy_grad
// CHECK: tg.gather_bucket @offload.f1
// CHECK: tg.gather_bucket @offload.f0
// CHECK-NOT: tg.param_ref @w

// Tests that planning puts the host buckets in a pinned host arena and
// lowers each gather to a host-to-device copy into a transient.
// SCHED: sched.arena @parameters device parameters size 64
// SCHED-NEXT: sched.arena @parameters_host host_pinned parameters size 512
// SCHED: sched.param "w0" @parameters_host[0, 64]
// SCHED: sched.entry "train_step"
// SCHED: sched.copy h2d %{{.+}} to %{{.+}} on @compute : memref<64xf32> to memref<64xf32>

// Tests that with overlap the copies are prefetched one bucket ahead on a
// copy stream, ordered by events.
// PREFETCH: sched.stream @host_copy
// PREFETCH: sched.copy h2d %{{.+}} to %{{.+}} on @host_copy
// PREFETCH-NEXT: sched.record @host_copy.done.0 on @host_copy
// PREFETCH: sched.wait @host_copy.done.0 on @compute

// Tests that without params=true nothing moves.
// OFF-NOT: tg.bucket
// OFF: tg.param_ref @w0
func.func @train_step(%x: tensor<4x4xf32>) -> tensor<f32> {
  %a = tg.param_ref @a : tensor<4x4xf32>
  %w0 = tg.param_ref @w0 : tensor<4x4xf32>
  %w1 = tg.param_ref @w1 : tensor<4x4xf32>
  %h = tg.mul %x, %w0 {tg.layer = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %h2 = tg.mul %h, %a {tg.layer = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %o = tg.mul %h2, %w1 {tg.layer = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %one = arith.constant dense<1.0> : tensor<f32>
  %d = tg.cross_entropy_grad %o, %t, %one : (tensor<4x4xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x4xf32>
  %d1 = tg.mul %d, %w1 {tg.layer = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %ga = tg.mul %d1, %h {tg.layer = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  tg.accumulate %ga into @a.grad : tensor<4x4xf32>
  %d0 = tg.mul %d1, %w0 {tg.layer = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = tg.reduce_sum %d0 axes = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @optimizer_step(%step: tensor<i64>) -> tensor<f32> {
  %lr = arith.constant dense<0.01> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  tg.adamw_update @a grad @a.grad moments(@a.m, @a.v) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr : tensor<f32>
}
