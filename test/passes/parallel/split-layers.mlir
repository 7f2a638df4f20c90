// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-split-layers="stages=2 micro-batches=4" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-split-layers="stages=2 micro-batches=4 schedule=naive" | FileCheck %s --check-prefix=NAIVE
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-split-layers="stages=3 micro-batches=4" | FileCheck %s --check-prefix=THREE
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --pass-pipeline="builtin.module(tailor-split-layers{stages=2 micro-batches=4},builtin.module(tailor-lower-to-sched{threads=2}))" | FileCheck %s --check-prefix=SCHED


// Tests that a step of three layers splits into stages: the first two
// layers on stage 0, the last and the loss on stage 1; each stage but the
// last gets a forward entry that sends its output, and a train_step that
// replays what backward needs of the forward, receives the gradient and
// accumulates; the last receives the activation, computes the loss and
// sends the input's gradient back; each stage updates its own parameters
// and the clipping norm is all-reduced over the stages (one rank each: no
// gradient all-reduce).
// CHECK-LABEL: module @stage0
// CHECK-SAME: tg.pipeline_stage = {first_layer = 0 : i64, last_layer = 1 : i64, micro_batches = 4 : i64, replicas = 1 : i64, schedule = "1f1b", slots = 2 : i64, stage = 0 : i64, stages = 2 : i64}
// CHECK-NOT: tg.param @w2
// CHECK-LABEL: func.func @pipeline_forward
// CHECK-SAME: {tg.name = "forward_input"}
// CHECK: %[[H0:.+]] = tg.linear
// CHECK: %[[H1:.+]] = tg.linear %[[H0]]
// CHECK-NEXT: tg.send %[[H1]] to 1
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {tg.name = "input"}
// CHECK-NEXT: %[[G:.+]] = tg.recv from 1 : tensor<2x4xf32>
// CHECK: %[[R0:.+]] = tg.linear
// CHECK-NOT: tg.linear %[[R0]]
// CHECK: %[[GW1:.+]] = tg.linear_weight_grad %[[G]], %[[R0]]
// CHECK: tg.accumulate %[[GW1]] into @w1.grad
// CHECK: tg.accumulate {{.+}} into @w0.grad
// CHECK-NOT: tg.send
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: tg.all_reduce_states
// CHECK: %[[LOCAL:.+]] = tg.global_norm
// CHECK: %[[SQ:.+]] = tg.mul %[[LOCAL]], %[[LOCAL]]
// CHECK: %[[SUM:.+]] = tg.all_reduce %[[SQ]] sum over stages
// CHECK: tg.sqrt %[[SUM]]
// CHECK: tg.sgd_update @w0
// CHECK: tg.sgd_update @w1
// CHECK-NOT: tg.sgd_update
// CHECK-LABEL: module @stage1
// CHECK-SAME: slots = 0 : i64, stage = 1 : i64
// CHECK-NOT: func.func @pipeline_forward
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {tg.name = "labels"}
// CHECK-NEXT: %[[H:.+]] = tg.recv from 0 : tensor<2x4xf32>
// CHECK: tg.linear %[[H]]
// CHECK: tg.cross_entropy
// CHECK: %[[BACK:.+]] = tg.linear {{.+}}tg.layer = 2
// CHECK-NEXT: tg.send %[[BACK]] to 0
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK: tg.sgd_update @w2
// NAIVE-LABEL: module @stage0
// NAIVE-SAME: schedule = "naive", slots = 1 : i64
// THREE-LABEL: module @stage1
// THREE-SAME: slots = 2 : i64, stage = 1 : i64
// THREE: tg.state @pipeline.input.0 : tensor<2x2x4xf32> of @pipeline.input.0 pipeline_input
// THREE-LABEL: func.func @pipeline_forward
// THREE-SAME: {tg.name = "forward_slot"}
// THREE-NEXT: %[[IN:.+]] = tg.recv from 0
// THREE-NEXT: tg.slot_write %[[IN]] into @pipeline.input.0 at %{{.+}}
// THREE: tg.send %{{.+}} to 2
// THREE-LABEL: func.func @train_step
// THREE-SAME: {tg.name = "slot"}
// THREE-NEXT: tg.slot_read @pipeline.input.0 at
// THREE-NEXT: tg.recv from 2
// THREE: tg.send %{{.+}} to 0
// SCHED-LABEL: sched.program @rank0 rank 0 of 2
// SCHED: sched.arena @p2p_outbox device workspace
// SCHED: sched.collective send {{.+}} group [0, 1] root 1
// SCHED: sched.collective recv {{.+}} group [0, 1] root 1
// SCHED: sched.collective all_reduce {{.+}} reduce sum group [0, 1]
// SCHED-LABEL: sched.program @rank1 rank 1 of 2
module {
  tg.param @w0 : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
  tg.param @w1 : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
  tg.param @w2 : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
  tg.state @w0.grad : tensor<4x4xf32> of @w0 grad
  tg.state @w1.grad : tensor<4x4xf32> of @w1 grad
  tg.state @w2.grad : tensor<4x4xf32> of @w2 grad
  func.func @train_step(%x: tensor<2x4xf32> {tg.name = "input"}, %labels: tensor<2xi64> {tg.name = "labels"}) -> (tensor<f32> {tg.name = "loss"}) {
    %one = arith.constant dense<1.0> : tensor<f32>
    %w0 = tg.param_ref @w0 {tg.layer = 0 : i64} : tensor<4x4xf32>
    %h0 = tg.linear %x, %w0 {tg.layer = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %w1 = tg.param_ref @w1 {tg.layer = 1 : i64} : tensor<4x4xf32>
    %h1 = tg.linear %h0, %w1 {tg.layer = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %w2 = tg.param_ref @w2 {tg.layer = 2 : i64} : tensor<4x4xf32>
    %h2 = tg.linear %h1, %w2 {tg.layer = 2 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %loss = tg.cross_entropy %h2, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    %g2 = tg.cross_entropy_grad %h2, %labels, %one : (tensor<2x4xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x4xf32>
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
    %norm = tg.global_norm %g0, %g1, %g2 : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<f32>
    tg.sgd_update @w0 grad @w0.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
    tg.sgd_update @w1 grad @w1.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
    tg.sgd_update @w2 grad @w2.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
    return %lr, %norm : tensor<f32>, tensor<f32>
  }
}

// -----


// Tests that more stages than transformer layers are refused.
// expected-error @below {{stages need at least as many transformer layers; the model has 1}}
module {
  tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
  tg.state @w.grad : tensor<4x4xf32> of @w grad
  func.func @train_step(%x: tensor<2x4xf32> {tg.name = "input"}, %labels: tensor<2xi64> {tg.name = "labels"}) -> (tensor<f32> {tg.name = "loss"}) {
    %one = arith.constant dense<1.0> : tensor<f32>
    %w = tg.param_ref @w {tg.layer = 0 : i64} : tensor<4x4xf32>
    %h = tg.linear %x, %w {tg.layer = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %loss = tg.cross_entropy %h, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}) {
    %lr = arith.constant dense<0.1> : tensor<f32>
    return %lr : tensor<f32>
  }
}
