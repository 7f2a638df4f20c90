// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-split-layers="stages=2 micro-batches=4" | FileCheck %s

// Stage boundaries on a cluster of mixed devices (tg.cluster): each
// stage's work is weighted by its rank's time per FLOP (a large GEMM by the
// cost model, relative to stage 0's), recorded as stage_weights.

// Tests that a stage 0 at a quarter of stage 1's speed keeps only the
// first layer (on equal devices it takes layers 0 and 1, as the next case
// and split-layers.mlir show).
// CHECK: tg.pipeline = {first_layers = array<i64: 0, 1>, micro_batches = 4 : i64, replicas = 1 : i64, schedule = "1f1b", stage_weights = array<f64: 1.000000e+00, 2.500000e-01>, stages = 2 : i64}
// CHECK-LABEL: module @stage0
// CHECK-SAME: first_layer = 0 : i64, last_layer = 0 : i64
// CHECK-LABEL: module @stage1
// CHECK-SAME: first_layer = 1 : i64, last_layer = 2 : i64
module attributes {
  tg.cluster = {name = "mixed", ranks = [
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 15.0 : f64, bandwidth_gbs = 5.0 : f64, speed = 0.25 : f64},
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 60.0 : f64, bandwidth_gbs = 20.0 : f64}]}} {
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

// Tests that equal devices split as without a cluster.
// CHECK: tg.pipeline = {first_layers = array<i64: 0, 2>, {{.*}}stage_weights = array<f64: 1.000000e+00, 1.000000e+00>
// CHECK-LABEL: module @stage0
// CHECK-SAME: first_layer = 0 : i64, last_layer = 1 : i64
module attributes {
  tg.cluster = {name = "mixed", ranks = [
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 60.0 : f64, bandwidth_gbs = 20.0 : f64},
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 60.0 : f64, bandwidth_gbs = 20.0 : f64}]}} {
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

// Tests that a cluster whose rank count is not the stage count is refused.
// expected-error @below {{tailor-split-layers: tg.cluster has 3 ranks for 2 stages}}
module attributes {
  tg.cluster = {name = "mixed", ranks = [
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 60.0 : f64, bandwidth_gbs = 20.0 : f64},
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 60.0 : f64, bandwidth_gbs = 20.0 : f64},
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 60.0 : f64}]}} {
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
