// RUN: tailor-opt %s --tailor-split-layers="stages=2 micro-batches=4 world-size=4" | FileCheck %s
// RUN: tailor-opt %s --tailor-split-layers="stages=2 micro-batches=4 world-size=4 bucket-bytes=64" | FileCheck %s --check-prefix=BUCKETS
// RUN: tailor-opt %s --pass-pipeline="builtin.module(tailor-split-layers{stages=2 micro-batches=4 world-size=4},builtin.module(tailor-lower-to-sched{threads=2}))" | FileCheck %s --check-prefix=SCHED
// RUN: not tailor-opt %s --tailor-split-layers="stages=2 micro-batches=4 world-size=3" 2>&1 | FileCheck %s --check-prefix=ODD

// Tests that 4 ranks over 2 stages give each stage 2 data-parallel
// replicas: the decision (replicas) on the module and on each stage, the
// stage's world of 4 ranks, and DDP's bucketed average of each stage's own
// gradients over its replicas at the start of its optimizer step, before
// the clipping norm, which is summed over one replica's stages.
// CHECK: tg.pipeline = {first_layers = array<i64: 0, 2>, micro_batches = 4 : i64, replicas = 2 : i64, schedule = "1f1b", stages = 2 : i64}
// CHECK-LABEL: module @stage0
// CHECK-SAME: tg.parallel = {ranks_per_node = 4 : i64, strategy = "pipeline", world_size = 4 : i64}
// CHECK-SAME: replicas = 2 : i64, schedule = "1f1b", slots = 2 : i64, stage = 0 : i64, stages = 2 : i64}
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: tg.all_reduce_states [@w1.grad, @w0.grad] avg over replicas
// CHECK-NEXT: arith.constant
// CHECK: %[[LOCAL:.+]] = tg.global_norm
// CHECK: %[[SQ:.+]] = tg.mul %[[LOCAL]], %[[LOCAL]]
// CHECK: tg.all_reduce %[[SQ]] sum over stages
// CHECK: tg.sgd_update @w0
// CHECK-LABEL: module @stage1
// CHECK-SAME: stage = 1 : i64
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: tg.all_reduce_states [@w3.grad, @w2.grad] avg over replicas
// CHECK-NOT: @w0.grad
// CHECK: tg.all_reduce %{{.+}} sum over stages

// Tests that the buckets follow bucket-bytes as tailor-shard's do: one
// 64-byte gradient each, the last layer's first.
// BUCKETS-LABEL: module @stage0
// BUCKETS-LABEL: func.func @optimizer_step
// BUCKETS-NEXT: tg.all_reduce_states [@w1.grad] avg over replicas
// BUCKETS-NEXT: tg.all_reduce_states [@w0.grad] avg over replicas

// Tests that each stage's program is its first rank's, of the whole world:
// stage 1's is rank 2's; its sends and receives name the peer stage's rank
// in the same replica (0, with 2 in one group), its gradient all-reduce
// its replicas (ranks 2 and 3), its norm's all-reduce its pipeline (0, 2).
// SCHED-LABEL: sched.program @rank0 rank 0 of 4
// SCHED: sched.collective send {{.+}} group [0, 2] root 2
// SCHED: sched.collective recv {{.+}} group [0, 2] root 2
// SCHED: sched.collective all_reduce {{.+}} reduce avg group [0, 1]
// SCHED: sched.collective all_reduce {{.+}} reduce sum group [0, 2]
// SCHED-LABEL: sched.program @rank2 rank 2 of 4
// SCHED: sched.collective recv {{.+}} group [0, 2] root 0
// SCHED: sched.collective send {{.+}} group [0, 2] root 0
// SCHED: sched.collective all_reduce {{.+}} reduce avg group [2, 3]
// SCHED: sched.collective all_reduce {{.+}} reduce sum group [0, 2]

// Tests that ranks that are not a multiple of the stages are refused,
// naming both.
// ODD: error: tailor-split-layers: 3 ranks do not divide into 2 pipeline stages (the ranks must be a multiple of the stages: stages x data-parallel replicas)
module {
  tg.param @w0 : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
  tg.param @w1 : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
  tg.param @w2 : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
  tg.param @w3 : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
  tg.state @w0.grad : tensor<4x4xf32> of @w0 grad
  tg.state @w1.grad : tensor<4x4xf32> of @w1 grad
  tg.state @w2.grad : tensor<4x4xf32> of @w2 grad
  tg.state @w3.grad : tensor<4x4xf32> of @w3 grad
  func.func @train_step(%x: tensor<2x4xf32> {tg.name = "input"}, %labels: tensor<2xi64> {tg.name = "labels"}) -> (tensor<f32> {tg.name = "loss"}) {
    %one = arith.constant dense<1.0> : tensor<f32>
    %w0 = tg.param_ref @w0 {tg.layer = 0 : i64} : tensor<4x4xf32>
    %h0 = tg.linear %x, %w0 {tg.layer = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %w1 = tg.param_ref @w1 {tg.layer = 1 : i64} : tensor<4x4xf32>
    %h1 = tg.linear %h0, %w1 {tg.layer = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %w2 = tg.param_ref @w2 {tg.layer = 2 : i64} : tensor<4x4xf32>
    %h2 = tg.linear %h1, %w2 {tg.layer = 2 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %w3 = tg.param_ref @w3 {tg.layer = 3 : i64} : tensor<4x4xf32>
    %h3 = tg.linear %h2, %w3 {tg.layer = 3 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %loss = tg.cross_entropy %h3, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    %g3 = tg.cross_entropy_grad %h3, %labels, %one : (tensor<2x4xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x4xf32>
    %gw3 = tg.linear_weight_grad %g3, %h2 {tg.layer = 3 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    tg.accumulate %gw3 into @w3.grad : tensor<4x4xf32>
    %w3t = tg.transpose %w3 permutation = [1, 0] {tg.layer = 3 : i64} : tensor<4x4xf32> -> tensor<4x4xf32>
    %g2 = tg.linear %g3, %w3t {tg.layer = 3 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %gw2 = tg.linear_weight_grad %g2, %h1 {tg.layer = 2 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    tg.accumulate %gw2 into @w2.grad : tensor<4x4xf32>
    %w2t = tg.transpose %w2 permutation = [1, 0] {tg.layer = 2 : i64} : tensor<4x4xf32> -> tensor<4x4xf32>
    %g1 = tg.linear %g2, %w2t {tg.layer = 2 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %gw1 = tg.linear_weight_grad %g1, %h0 {tg.layer = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    tg.accumulate %gw1 into @w1.grad : tensor<4x4xf32>
    %w1t = tg.transpose %w1 permutation = [1, 0] {tg.layer = 1 : i64} : tensor<4x4xf32> -> tensor<4x4xf32>
    %g0 = tg.linear %g1, %w1t {tg.layer = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %gw0 = tg.linear_weight_grad %g0, %x {tg.layer = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    tg.accumulate %gw0 into @w0.grad : tensor<4x4xf32>
    return %loss : tensor<f32>
  }
  func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}, tensor<f32> {tg.name = "grad_norm"}) {
    %lr = arith.constant dense<0.1> : tensor<f32>
    %g0 = tg.state_ref @w0.grad : tensor<4x4xf32>
    %g1 = tg.state_ref @w1.grad : tensor<4x4xf32>
    %g2 = tg.state_ref @w2.grad : tensor<4x4xf32>
    %g3 = tg.state_ref @w3.grad : tensor<4x4xf32>
    %norm = tg.global_norm %g0, %g1, %g2, %g3 : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<f32>
    tg.sgd_update @w0 grad @w0.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
    tg.sgd_update @w1 grad @w1.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
    tg.sgd_update @w2 grad @w2.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
    tg.sgd_update @w3 grad @w3.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
    return %lr, %norm : tensor<f32>, tensor<f32>
  }
}
