// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=4 ranks-per-node=2 bucket-bytes=200" --tailor-hierarchical-partition="partition-size=2" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=4 ranks-per-node=2 bucket-bytes=200" --tailor-hierarchical-partition="partition-size=2" --tailor-overlap-collectives | FileCheck %s --check-prefix=PREFETCH
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=4 ranks-per-node=2 bucket-bytes=200" --tailor-hierarchical-partition="partition-size=2" --tailor-quantize-gathers | FileCheck %s --check-prefix=QWZ
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=4 ranks-per-node=2 bucket-bytes=200" --tailor-hierarchical-partition="partition-size=2" --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=4 ranks-per-node=2 bucket-bytes=200" --tailor-hierarchical-partition="partition-size=1" | FileCheck %s --check-prefix=OFF

// Tests that the decision is recorded with the sharding, that each bucket
// gathered for forward and backward keeps its node part (1/2 of it) where
// compute first reads the forward's gather, that backward's gather becomes
// an all-gather of the parts within the node, and that a bucket only the
// forward reads (@e's) keeps nothing.
// CHECK: tg.parallel = {hpz_partition_size = 2 : i64, ranks_per_node = 2 : i64, strategy = "zero3", world_size = 4 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G0:.+]] = tg.gather_bucket @zero.b1 : tensor<[[N0:[0-9]+]]xf32>
// CHECK: %[[S0:.+]] = tg.secondary_partition %[[G0]] shards 2 : tensor<[[N0]]xf32> -> tensor<[[P0:[0-9]+]]xf32>
// CHECK-NEXT: tg.mul
// CHECK: tg.gather_bucket @zero.f0
// CHECK-NOT: tg.secondary_partition
// CHECK: tg.add
// CHECK: tg.cross_entropy_grad
// CHECK: %[[B0:.+]] = tg.gather_partition %[[S0]] of @zero.b1 over node shards 2 : tensor<[[P0]]xf32> -> tensor<[[N0]]xf32>
// CHECK-NEXT: tg.bucket_member %[[B0]][0]
// CHECK-NOT: tg.gather_bucket
// CHECK-LABEL: func.func @optimizer_step

// Tests that prefetching issues the next gather where compute first reads
// the one before (the part kept, then compute), backward's node gathers
// included.
// PREFETCH-LABEL: func.func @train_step
// PREFETCH-NEXT: %[[G0:.+]] = tg.gather_bucket @zero.b1 {tg.overlap}
// PREFETCH: %[[G1:.+]] = tg.gather_bucket @zero.f0 {tg.overlap}
// PREFETCH-NEXT: tg.secondary_partition %[[G0]]
// PREFETCH: tg.gather_partition %{{.+}} of @zero.b1 over node shards 2 {tg.overlap}

// Tests that with qwZ only the forward's world-wide gathers go int8, and
// the part kept is of the decoded f32 bucket, gathered in f32 in the node.
// QWZ: tg.parallel = {hpz_partition_size = 2 : i64, quantized_gathers = "int8"
// QWZ-LABEL: func.func @train_step
// QWZ: %[[W0:.+]] = tg.gather_bucket @zero.b1 {wire = "int8"}
// QWZ-NEXT: %[[D0:.+]] = tg.dequantize_gathered %[[W0]]
// QWZ: tg.secondary_partition %[[D0]] shards 2
// QWZ: tg.gather_partition %{{.+}} of @zero.b1 over node shards 2 : tensor<{{[0-9]+}}xf32>
// QWZ-NOT: tg.gather_bucket @zero.b1 {wire

// Tests that planning copies this rank's node part (a view at rank mod 2
// times the part's bytes into the gathered bucket) into a buffer of its
// own and all-gathers the parts over the first node's ranks.
// SCHED: sched.entry "train_step"
// SCHED: sched.launch @copy(%{{.+}}, %[[P:.+]]) on @compute
// SCHED: sched.collective all_gather %[[P]] to %{{.+}} group [0, 1] on @compute

// Tests that a partition of one rank per node changes nothing.
// OFF-NOT: hpz_partition_size
// OFF-NOT: tg.secondary_partition
// OFF-NOT: tg.gather_partition

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
