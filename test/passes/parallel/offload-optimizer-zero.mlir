// RUN: tailor-opt %s --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-offload="optimizer=true" | FileCheck %s --check-prefix=ZERO2
// RUN: tailor-opt %s --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-offload="optimizer=true" --tailor-lower-to-sched="threads=2" | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-offload="optimizer=true" --tailor-overlap-collectives="move-ddp-reductions=true" 2>&1 | FileCheck %s --check-prefix=OVERLAP
// RUN: tailor-opt %s --tailor-shard="strategy=zero1 world-size=2 bucket-bytes=200" --tailor-offload="optimizer=true" | FileCheck %s --check-prefix=ZERO1
// RUN: tailor-opt %s --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-offload="optimizer=true" --tailor-lower-to-sched="threads=2" | FileCheck %s --check-prefix=ZERO3

// Optimizer offload of ZeRO's chunks (DeepSpeed's ZeRO-Offload): the
// parameters as shard-zero.mlir has them (buckets @zero.b0 = [c, b] and
// @zero.b1 = [a], two chunks of 64 elements each).

tg.param @a : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<30xf32> trainable init <"zeros", 0.0 : f64>
tg.param @c : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<4x4xf32> of @a grad
tg.state @b.grad : tensor<30xf32> of @b grad
tg.state @c.grad : tensor<4x4xf32> of @c grad
tg.state @a.m : tensor<4x4xf32> of @a exp_avg
tg.state @a.v : tensor<4x4xf32> of @a exp_avg_sq
tg.state @b.m : tensor<30xf32> of @b exp_avg
tg.state @b.v : tensor<30xf32> of @b exp_avg_sq
tg.state @c.m : tensor<4x4xf32> of @c exp_avg
tg.state @c.v : tensor<4x4xf32> of @c exp_avg_sq

// Tests that under zero2 the host states are chunk-sized and belong to the
// bucket, the chunk gradient and this rank's chunk of the bucket are copied
// to the host, the updates run there on the chunks, the masters go back into
// the bucket's chunk, and only then the buckets are all-gathered.
// ZERO2-DAG: tg.state @zero.b0.exp_avg : tensor<64xf32> of @zero.b0 exp_avg {host}
// ZERO2-DAG: tg.state @zero.b0.exp_avg_sq : tensor<64xf32> of @zero.b0 exp_avg_sq {host}
// ZERO2-DAG: tg.state @zero.b0.master : tensor<64xf32> of @zero.b0 master {host}
// ZERO2-DAG: tg.state @zero.b0.grad_host : tensor<64xf32> of @zero.b0 grad_host {host}
// ZERO2-DAG: tg.state @zero.b0.grad : tensor<64xf32> of @zero.b0 grad{{$}}
// ZERO2-LABEL: func.func @optimizer_step
// ZERO2: %[[NORM:.+]] = tg.sqrt
// ZERO2: tg.copy_state @zero.b1.grad into @zero.b1.grad_host
// ZERO2-NEXT: tg.copy_state @zero.b1 into @zero.b1.master
// ZERO2-NEXT: tg.copy_state @zero.b0.grad into @zero.b0.grad_host
// ZERO2-NEXT: tg.copy_state @zero.b0 into @zero.b0.master
// ZERO2: tg.adamw_update @zero.b1.master grad @zero.b1.grad_host moments(@zero.b1.exp_avg, @zero.b1.exp_avg_sq) {{.*}}tg.host
// ZERO2-NEXT: tg.adamw_update @zero.b0.master grad @zero.b0.grad_host {{.*}}tg.host
// ZERO2-NEXT: tg.copy_state @zero.b1.master into @zero.b1
// ZERO2-NEXT: tg.copy_state @zero.b0.master into @zero.b0
// ZERO2-NEXT: tg.all_gather_bucket @zero.b1
// ZERO2-NEXT: tg.all_gather_bucket @zero.b0
// ZERO2-NEXT: tg.zero_states [@zero.b1.grad, @zero.b0.grad]

// Tests that planning copies this rank's chunk of the parameters (a rank
// stride of one chunk) to the host master and back, runs the joined update
// on the host stream, then gathers the chunks; the host arena holds chunks
// only (2 buckets x 4 states x 64 x 4 bytes).
// SCHED: sched.arena @optimizer_state_host host_pinned optimizer_state size 2048
// SCHED-DAG: %[[B0:.+]] = sched.buffer @parameters[0, 512] : memref<128xf32>
// SCHED-DAG: %[[MASTER:.+]] = sched.state "zero.b0.master" @optimizer_state_host[
// SCHED: sched.entry "optimizer_step"
// SCHED: %[[CHUNK:.+]] = sched.buffer @parameters[0, 256] rank_stride 256 : memref<64xf32>
// SCHED: sched.copy d2h %[[CHUNK]] to %[[MASTER]] on @compute : memref<64xf32> to memref<64xf32>
// SCHED: sched.launch @adamw_multi({{.*}}%[[MASTER]],{{.*}} on @host
// SCHED: sched.copy h2d %[[MASTER]] to %[[CHUNK]] on @compute
// SCHED: sched.collective all_gather %[[CHUNK]] to %[[B0]] group [0, 1] on @compute : memref<64xf32> to memref<128xf32>

// Tests that with overlap (one micro-batch a step) the reduce-scatters stay
// overlapped and each chunk gradient's copy to the host, with the copy of
// this rank's chunk of the bucket's parameters, moves into the training
// step after its accumulation, deferred past the next collective.
// OVERLAP-NOT: remark
// OVERLAP-LABEL: func.func @train_step
// OVERLAP: %[[B1:.+]] = tg.reduce_scatter %{{.+}} {tg.overlap}
// OVERLAP: %[[B0:.+]] = tg.reduce_scatter %{{.+}} {tg.overlap}
// OVERLAP: tg.accumulate %[[B1]] into @zero.b1.grad
// OVERLAP-NEXT: tg.copy_state @zero.b1.grad into @zero.b1.grad_host {tg.overlap}
// OVERLAP-NEXT: tg.copy_state @zero.b1 into @zero.b1.master {tg.overlap}
// OVERLAP-NEXT: tg.accumulate %[[B0]] into @zero.b0.grad
// OVERLAP-NEXT: tg.copy_state @zero.b0.grad into @zero.b0.grad_host {tg.overlap}
// OVERLAP-NEXT: tg.copy_state @zero.b0 into @zero.b0.master {tg.overlap}
// OVERLAP-LABEL: func.func @optimizer_step
// OVERLAP-NOT: tg.copy_state @zero.b0.grad into
// OVERLAP-NOT: tg.copy_state @zero.b0 into @zero.b0.master

// Tests that under zero1 the chunk accumulators are reduce-scattered first,
// as without offload, and the copies follow.
// ZERO1-LABEL: func.func @optimizer_step
// ZERO1: tg.reduce_scatter
// ZERO1: tg.copy_state @zero.b0.grad into @zero.b0.grad_host
// ZERO1: tg.copy_state @zero.b0.master into @zero.b0
// ZERO1-NEXT: tg.all_gather_bucket @zero.b1
// ZERO1-NEXT: tg.all_gather_bucket @zero.b0

// Tests that under zero3 (the bucket is the chunk itself, nothing gathers
// after the update) the copies move the whole chunk root.
// ZERO3-LABEL: sched.entry "optimizer_step"
// ZERO3: sched.copy d2h %{{.+}} to %{{.+}} on @compute : memref<64xf32> to memref<64xf32>
// ZERO3-NEXT: sched.copy d2h %[[CHUNK:.+]] to %[[MASTER:.+]] on @compute : memref<64xf32> to memref<64xf32>
// ZERO3: sched.launch @adamw_multi({{.*}} on @host
// ZERO3: sched.copy h2d %[[MASTER]] to %[[CHUNK]] on @compute
// ZERO3-NOT: sched.collective all_gather %[[CHUNK]]
func.func @train_step(%x: tensor<30xf32>, %y: tensor<4x4xf32>) -> tensor<f32> {
  %pa = tg.param_ref @a : tensor<4x4xf32>
  %ya = tg.mul %y, %pa : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %labels = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %one = arith.constant dense<1.0> : tensor<f32>
  %dl = tg.cross_entropy_grad %ya, %labels, %one : (tensor<4x4xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x4xf32>
  %ba = tg.mul %dl, %pa : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g = tg.mul %x, %x : (tensor<30xf32>, tensor<30xf32>) -> tensor<30xf32>
  tg.accumulate %g into @b.grad : tensor<30xf32>
  tg.accumulate %ba into @a.grad : tensor<4x4xf32>
  %h = tg.mul %y, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  tg.accumulate %h into @c.grad : tensor<4x4xf32>
  %s = tg.reduce_sum %g axes = [0] : tensor<30xf32> -> tensor<f32>
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
