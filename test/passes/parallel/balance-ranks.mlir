// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-balance-ranks="accumulation-steps=4" | FileCheck %s

// Tests that a rank at half speed (a core shared by two ranks: half the
// GEMM rate, bandwidth and launch rate) gets half the micro-batches of a
// whole core: 12 per step (4 x 3 ranks) split 6 : 3 : 3, each rank's
// micro-batch time recorded.
// CHECK: tg.balance = {global_micro_batches = 12 : i64, micro_batch_seconds = [[[T0:.+]], [[T1:.+]], [[T1]]], micro_batches = array<i64: 6, 3, 3>}
// CHECK-LABEL: func.func @train_step
module attributes {
  tg.cluster = {name = "cores", ranks = [
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 60.0 : f64, bandwidth_gbs = 20.0 : f64, launch_overhead_us = 1.0 : f64, threads = 1.0 : f64},
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 30.0 : f64, bandwidth_gbs = 10.0 : f64, launch_overhead_us = 2.0 : f64, threads = 1.0 : f64, speed = 0.5 : f64},
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 30.0 : f64, bandwidth_gbs = 10.0 : f64, launch_overhead_us = 2.0 : f64, threads = 1.0 : f64, speed = 0.5 : f64}]},
  tg.parallel = {ranks_per_node = 3 : i64, strategy = "ddp", world_size = 3 : i64}} {
  func.func @train_step(%x: tensor<64x256xf32>, %w: tensor<256x256xf32>) -> tensor<64x256xf32> {
    %y = tg.linear %x, %w : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
    return %y : tensor<64x256xf32>
  }
}

// -----

// Tests that a rank's own thread count sets its speed: two threads (linear
// scaling) against one make rank 1 about twice as slow, so of 8
// micro-batches rank 1 gets 3, which end (3 x 2 = 6 of rank 0's
// micro-batch times) just before 6 of rank 0's would; and that zero1 (one
// reduce-scatter per step) takes uneven counts.
// CHECK: tg.balance = {global_micro_batches = 8 : i64, {{.*}}micro_batches = array<i64: 5, 3>}
// CHECK-LABEL: func.func @train_step
module attributes {
  tg.cluster = {name = "threads", ranks = [
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 60.0 : f64, bandwidth_gbs = 1000.0 : f64, launch_overhead_us = 0.0 : f64, threads = 2.0 : f64},
    {device = "cpu", node = 1 : i64, cpu_gflops_per_thread = 60.0 : f64, bandwidth_gbs = 1000.0 : f64, launch_overhead_us = 0.0 : f64, threads = 1.0 : f64}]},
  tg.parallel = {ranks_per_node = 1 : i64, strategy = "zero1", world_size = 2 : i64}} {
  func.func @train_step(%x: tensor<64x256xf32>, %w: tensor<256x256xf32>) -> tensor<64x256xf32> {
    %y = tg.linear %x, %w : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
    return %y : tensor<64x256xf32>
  }
}

// -----

// Tests that zero2, whose reduce-scatter runs in every micro-batch, is
// refused on a cluster of mixed devices.
// expected-error @+1 {{tailor-balance-ranks: a heterogeneous cluster's ranks run uneven micro-batch counts, which 'zero2' cannot}}
module attributes {
  tg.cluster = {name = "cores", ranks = [
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 60.0 : f64},
    {device = "cpu", node = 0 : i64, cpu_gflops_per_thread = 30.0 : f64}]},
  tg.parallel = {ranks_per_node = 2 : i64, strategy = "zero2", world_size = 2 : i64}} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Tests that the pass needs the cluster's ranks on the module.
// expected-error @+1 {{no tg.cluster = {ranks = [...]} on the module}}
module attributes {tg.parallel = {ranks_per_node = 2 : i64, strategy = "ddp", world_size = 2 : i64}} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Tests that a figure the cost model does not know is refused by name.
// expected-error @+1 {{tg.cluster: rank 0: 'tflops' is not a hardware figure}}
module attributes {
  tg.cluster = {name = "bad", ranks = [{device = "cpu", node = 0 : i64, tflops = 1.0 : f64}]},
  tg.parallel = {ranks_per_node = 1 : i64, strategy = "ddp", world_size = 1 : i64}} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
