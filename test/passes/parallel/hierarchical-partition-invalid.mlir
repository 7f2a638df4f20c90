// RUN: not tailor-opt %s --tailor-shard="strategy=zero3 world-size=4 ranks-per-node=2" --tailor-hierarchical-partition="partition-size=3" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not tailor-opt %s --tailor-shard="strategy=zero3 world-size=4 ranks-per-node=2" --tailor-hierarchical-partition="partition-size=4" 2>&1 | FileCheck %s --check-prefix=NODE
// RUN: not tailor-opt %s --tailor-shard="strategy=zero3 world-size=4 ranks-per-node=2" --tailor-hierarchical-partition="partition-size=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not tailor-opt %s --tailor-shard="strategy=zero2 world-size=4 ranks-per-node=2" --tailor-hierarchical-partition="partition-size=2" 2>&1 | FileCheck %s --check-prefix=ZERO2
// RUN: not tailor-opt %s --tailor-shard="strategy=zero3 world-size=4 ranks-per-node=2" --tailor-quantize-gathers --tailor-hierarchical-partition="partition-size=2" 2>&1 | FileCheck %s --check-prefix=ORDER

// Tests that a partition size that does not divide the world is refused.
// DIVIDE: error: tailor-hierarchical-partition: partition-size (zero_hpz_partition_size) 3 does not divide the world size 4

// Tests that a partition other than the node is refused (the node is the
// group the runtime splits).
// NODE: error: tailor-hierarchical-partition: partition-size (zero_hpz_partition_size) 4 must equal the ranks per node (2): the secondary partitions are gathered within a node

// Tests that a size below 1 is refused.
// ZERO: error: tailor-hierarchical-partition: partition-size (zero_hpz_partition_size) 0 does not divide the world size 4

// Tests that hpZ without ZeRO-3's gathered parameters is refused.
// ZERO2: error: tailor-hierarchical-partition: hpZ partitions ZeRO-3's gathered parameters, but the module's sharding (tg.parallel) is zero2

// Tests that running after qwZ (whose backward gathers are int8 already)
// is refused rather than leaving them world-wide.
// ORDER: error: tailor-hierarchical-partition: this gather of @zero.b0 is quantized already; run before tailor-quantize-gathers, which then quantizes the forward's gather only

tg.param @a : tensor<2x32xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<2x32xf32> of @a grad
tg.state @a.m : tensor<2x32xf32> of @a exp_avg
tg.state @a.v : tensor<2x32xf32> of @a exp_avg_sq

func.func @train_step(%y: tensor<2x32xf32>) -> tensor<f32> {
  %a = tg.param_ref @a : tensor<2x32xf32>
  %h = tg.mul %y, %a : (tensor<2x32xf32>, tensor<2x32xf32>) -> tensor<2x32xf32>
  %t = arith.constant dense<[0, 1]> : tensor<2xi64>
  %one = arith.constant dense<1.0> : tensor<f32>
  %d = tg.cross_entropy_grad %h, %t, %one : (tensor<2x32xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x32xf32>
  %ga = tg.mul %d, %a : (tensor<2x32xf32>, tensor<2x32xf32>) -> tensor<2x32xf32>
  tg.accumulate %ga into @a.grad : tensor<2x32xf32>
  %s = tg.reduce_sum %ga axes = [0, 1] : tensor<2x32xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @optimizer_step(%step: tensor<i64>) -> (tensor<f32>, tensor<f32>) {
  %lr = arith.constant dense<0.01> : tensor<f32>
  %ga = tg.state_ref @a.grad : tensor<2x32xf32>
  %norm = tg.global_norm %ga : (tensor<2x32xf32>) -> tensor<f32>
  tg.adamw_update @a grad @a.grad moments(@a.m, @a.v) lr %lr step %step scale %norm {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr, %norm : tensor<f32>, tensor<f32>
}
