// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-quantize-gathers | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-quantize-gathers --tailor-overlap-collectives | FileCheck %s --check-prefix=PREFETCH
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-quantize-gathers --tailor-overlap-collectives --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-quantize-gathers | FileCheck %s --check-prefix=ZERO2
// RUN: not tailor-opt %s --tailor-quantize-gathers="format=int4" 2>&1 | FileCheck %s --check-prefix=BAD


tg.param @a : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<30xf32> trainable init <"zeros", 0.0 : f64>
tg.param @c : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @e : tensor<4x4xf32> init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<4x4xf32> of @a grad
tg.state @b.grad : tensor<30xf32> of @b grad
tg.state @c.grad : tensor<4x4xf32> of @c grad
tg.state @a.m : tensor<4x4xf32> of @a exp_avg
tg.state @a.v : tensor<4x4xf32> of @a exp_avg_sq
tg.state @b.m : tensor<30xf32> of @b exp_avg
tg.state @b.v : tensor<30xf32> of @b exp_avg_sq
tg.state @c.m : tensor<4x4xf32> of @c exp_avg
tg.state @c.v : tensor<4x4xf32> of @c exp_avg_sq

// Tests that every ZeRO-3 gather of f32 parameters (trainable and frozen)
// sends int8 wire chunks (64 elements + 4 bytes of scale per block of 64:
// 68 bytes a chunk of 64) and is decoded right after it, the decoded bucket
// taking every read, and that the decision is recorded with the sharding.
// CHECK: tg.parallel = {quantized_gathers = "int8"
// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[W0:.+]] = tg.gather_bucket @zero.b1 {wire = "int8"} : tensor<136xui8>
// CHECK-NEXT: %[[D0:.+]] = tg.dequantize_gathered %[[W0]] chunk 64 shards 2 : tensor<136xui8> -> tensor<128xf32>
// CHECK-NEXT: tg.bucket_member %[[D0]][0]
// CHECK: %[[W1:.+]] = tg.gather_bucket @zero.f0 {wire = "int8"} : tensor<136xui8>
// CHECK-NEXT: %[[D1:.+]] = tg.dequantize_gathered %[[W1]] chunk 64 shards 2
// CHECK-NEXT: tg.bucket_member %[[D1]][0]
// CHECK: tg.gather_bucket @zero.b1 {wire = "int8"}
// CHECK-NOT: tg.gather_bucket @{{.+}} :
// CHECK-LABEL: func.func @optimizer_step

// Tests that prefetching moves the gathers (issued a bucket ahead) and
// leaves each decode where compute first reads the bucket.
// PREFETCH-LABEL: func.func @train_step
// PREFETCH-NEXT: %[[W0:.+]] = tg.gather_bucket @zero.b1 {tg.overlap, wire = "int8"}
// PREFETCH-NEXT: %[[W1:.+]] = tg.gather_bucket @zero.f0 {tg.overlap, wire = "int8"}
// PREFETCH-NEXT: %[[D0:.+]] = tg.dequantize_gathered %[[W0]]
// PREFETCH-NEXT: tg.bucket_member %[[D0]][0]
// PREFETCH-NEXT: tg.mul
// PREFETCH-NEXT: tg.gather_bucket @zero.b1 {tg.overlap, wire = "int8"}
// PREFETCH-NEXT: %[[D1:.+]] = tg.dequantize_gathered %[[W1]]

// Tests that planning encodes this rank's chunk on the compute stream,
// gathers the 68-byte wire chunks on the communication stream, and decodes
// the gathered 136 bytes once compute waits for them.
// SCHED: sched.entry "train_step"
// SCHED: sched.launch @quantize_wire_int8(%{{.+}}, %[[Q:.+]]) on @compute {{.*}}: memref<64xf32>, memref<68xui8>
// SCHED: sched.collective all_gather %[[Q]] to %[[G:.+]] group [0, 1] on @comm : memref<68xui8> to memref<136xui8>
// SCHED: sched.wait @comm.done.0 on @compute
// SCHED: sched.launch @dequantize_wire_int8(%[[G]], %{{.+}}) on @compute with {chunk = 64 : i64} {{.*}}: memref<136xui8>, memref<128xf32>

// Tests that without ZeRO-3's parameter gathers there is nothing to
// quantize: ZeRO-2's all-gathers of updated chunks stay f32.
// ZERO2-NOT: wire
// ZERO2-NOT: quantized_gathers
// ZERO2-NOT: tg.dequantize_gathered

// BAD: format must be int8, got 'int4'
func.func @train_step(%x: tensor<30xf32>, %y: tensor<4x4xf32>) -> tensor<f32> {
  %a = tg.param_ref @a : tensor<4x4xf32>
  %e = tg.param_ref @e : tensor<4x4xf32>
  %h = tg.mul %y, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %o = tg.add %h, %e : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %one = arith.constant dense<1.0> : tensor<f32>
  %d = tg.cross_entropy_grad %o, %t, %one : (tensor<4x4xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x4xf32>
  %ga = tg.mul %d, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  tg.accumulate %ga into @a.grad : tensor<4x4xf32>
  %gb = tg.mul %x, %x : (tensor<30xf32>, tensor<30xf32>) -> tensor<30xf32>
  %gc = tg.mul %y, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  tg.accumulate %gc into @c.grad : tensor<4x4xf32>
  tg.accumulate %gb into @b.grad : tensor<30xf32>
  %s = tg.reduce_sum %gb axes = [0] : tensor<30xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @optimizer_step(%step: tensor<i64>) -> (tensor<f32>, tensor<f32>) {
  %lr = arith.constant dense<0.01> : tensor<f32>
  %ga = tg.state_ref @a.grad : tensor<4x4xf32>
  %gb = tg.state_ref @b.grad : tensor<30xf32>
  %gc = tg.state_ref @c.grad : tensor<4x4xf32>
  %norm = tg.global_norm %ga, %gb, %gc : (tensor<4x4xf32>, tensor<30xf32>, tensor<4x4xf32>) -> tensor<f32>
  tg.adamw_update @a grad @a.grad moments(@a.m, @a.v) lr %lr step %step scale %norm {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @b grad @b.grad moments(@b.m, @b.v) lr %lr step %step scale %norm {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @c grad @c.grad moments(@c.m, @c.v) lr %lr step %step scale %norm {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr, %norm : tensor<f32>, tensor<f32>
}
