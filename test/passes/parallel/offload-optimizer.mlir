// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload="optimizer=true" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload="optimizer=true" --tailor-lower-to-sched="threads=2" | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload="optimizer=true" --tailor-lower-to-sched="backend=cuda sm=90 hardware=h100 threads=2" | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload="optimizer=true" --tailor-overlap-collectives="move-ddp-reductions=true" | FileCheck %s --check-prefix=OVERLAP

tg.param @a : tensor<8x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<5xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<8x4xf32> of @a grad
tg.state @b.grad : tensor<5xf32> of @b grad
tg.state @a.exp_avg : tensor<8x4xf32> of @a exp_avg
tg.state @b.exp_avg : tensor<5xf32> of @b exp_avg
tg.state @a.exp_avg_sq : tensor<8x4xf32> of @a exp_avg_sq
tg.state @b.exp_avg_sq : tensor<5xf32> of @b exp_avg_sq

// Tests that optimizer offload keeps the moments in host memory, adds a host
// master and gradient copy per parameter, copies the gradients and
// parameters over before the updates, brings the scalars to the host, runs
// the updates there back to back on the host copies, then copies the
// masters back and zeroes the device gradients; the norm stays on the
// device.
// CHECK-DAG: tg.state @a.exp_avg : tensor<8x4xf32> of @a exp_avg {host}
// CHECK-DAG: tg.state @a.exp_avg_sq : tensor<8x4xf32> of @a exp_avg_sq {host}
// CHECK-DAG: tg.state @a.master : tensor<8x4xf32> of @a master {host}
// CHECK-DAG: tg.state @a.grad_host : tensor<8x4xf32> of @a grad_host {host}
// CHECK-DAG: tg.state @b.master : tensor<5xf32> of @b master {host}
// CHECK-DAG: tg.state @a.grad : tensor<8x4xf32> of @a grad{{$}}
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[NORM:.+]] = tg.global_norm
// CHECK: tg.copy_state @a.grad into @a.grad_host
// CHECK-NEXT: tg.copy_state @a into @a.master
// CHECK-NEXT: tg.copy_state @b.grad into @b.grad_host
// CHECK-NEXT: tg.copy_state @b into @b.master
// CHECK-NEXT: %[[LR:.+]] = tg.to_host %{{.+}} : tensor<f32>
// CHECK-NEXT: %[[STEP:.+]] = tg.to_host %{{.+}} : tensor<i64>
// CHECK-NEXT: %[[SCALE:.+]] = tg.to_host %{{.+}} : tensor<f32>
// CHECK-NEXT: tg.adamw_update @a.master grad @a.grad_host moments(@a.exp_avg, @a.exp_avg_sq) lr %[[LR]] step %[[STEP]] scale %[[SCALE]] {{{.*}}tg.host{{.*}}}
// CHECK-NEXT: tg.adamw_update @b.master grad @b.grad_host moments(@b.exp_avg, @b.exp_avg_sq) lr %[[LR]] step %[[STEP]] scale %[[SCALE]] {{{.*}}tg.host{{.*}}}
// CHECK-NEXT: tg.copy_state @a.master into @a
// CHECK-NEXT: tg.copy_state @b.master into @b
// CHECK-NEXT: tg.zero_states [@a.grad, @b.grad]

// Tests that planning puts the host states in the pinned optimizer_state_host
// arena and the host scalars in activations_host, lowers the state copies
// and to_host to d2h/h2d copies, and runs the joined update on the host
// stream over host buffers only (on the CPU and on CUDA alike), ordered by
// events: after what compute issued before it, and before the copy back.
// SCHED-LABEL: sched.program @rank0
// SCHED: sched.arena @optimizer_state device optimizer_state size 0
// SCHED: sched.arena @optimizer_state_host host_pinned optimizer_state size 768
// SCHED: sched.arena @activations_host host_pinned activations size 192
// SCHED: sched.stream @compute
// SCHED: sched.stream @host {host}
// SCHED-DAG: %[[A:.+]] = sched.param "a"
// SCHED-DAG: %[[AG:.+]] = sched.state "a.grad" @gradients[
// SCHED-DAG: %[[AM:.+]] = sched.state "a.exp_avg" @optimizer_state_host[
// SCHED-DAG: %[[AMASTER:.+]] = sched.state "a.master" @optimizer_state_host[
// SCHED-DAG: %[[AGH:.+]] = sched.state "a.grad_host" @optimizer_state_host[
// SCHED: sched.launch @global_norm({{.*}} on @compute
// SCHED: sched.copy d2h %[[AG]] to %[[AGH]] on @compute
// SCHED-NEXT: sched.copy d2h %[[A]] to %[[AMASTER]] on @compute
// SCHED: sched.copy d2h %{{.+}} to %[[HLR:.+]] on @compute : memref<f32> to memref<f32>
// SCHED: sched.record @host.ready.0 on @compute
// SCHED-NEXT: sched.wait @host.ready.0 on @host
// SCHED-NEXT: sched.launch @adamw_multi(%[[AMASTER]], %[[AGH]], %[[AM]], {{.*}}) on @host
// SCHED-NEXT: sched.record @host.done.0 on @host
// SCHED-NEXT: sched.wait @host.done.0 on @compute
// SCHED-NEXT: sched.copy h2d %[[AMASTER]] to %[[A]] on @compute
// SCHED: sched.launch @zero(%[[AG]]) on @compute
// Tests that with overlap (one micro-batch a step) @a's copies to the host
// move into the training step right after its gradient's last
// accumulation, on the copy stream, and @b's (never accumulated there)
// stay in the optimizer step.
// OVERLAP-LABEL: func.func @train_step
// OVERLAP: tg.accumulate %{{.+}} into @a.grad
// OVERLAP-NEXT: tg.copy_state @a.grad into @a.grad_host {tg.overlap}
// OVERLAP-NEXT: tg.copy_state @a into @a.master {tg.overlap}
// OVERLAP-LABEL: func.func @optimizer_step
// OVERLAP-NOT: tg.copy_state @a.grad
// OVERLAP: tg.copy_state @b.grad into @b.grad_host
// OVERLAP-NOT: tg.overlap
// OVERLAP: tg.adamw_update
func.func @train_step(%x: tensor<8x4xf32> {tg.name = "x"}) {
  tg.accumulate %x into @a.grad : tensor<8x4xf32>
  return
}
func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}, tensor<f32> {tg.name = "grad_norm"}) {
  %lr = arith.constant dense<1.0e-3> : tensor<f32>
  %ga = tg.state_ref @a.grad : tensor<8x4xf32>
  %gb = tg.state_ref @b.grad : tensor<5xf32>
  %norm = tg.global_norm %ga, %gb : (tensor<8x4xf32>, tensor<5xf32>) -> tensor<f32>
  %scale = tg.div %lr, %norm : (tensor<f32>, tensor<f32>) -> tensor<f32>
  tg.adamw_update @a grad @a.grad moments(@a.exp_avg, @a.exp_avg_sq) lr %lr step %step scale %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @b grad @b.grad moments(@b.exp_avg, @b.exp_avg_sq) lr %lr step %step scale %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr, %norm : tensor<f32>, tensor<f32>
}

// -----

tg.param @a : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<4xf32> of @a grad

// Tests that SGD on the host is refused by name.
func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}) {
  %lr = arith.constant dense<1.0e-3> : tensor<f32>
  // expected-error @+1 {{offload_optimizer: SGD on the host is not built yet (AdamW is)}}
  tg.sgd_update @a grad @a.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  return %lr : tensor<f32>
}

// -----

// Tests that optimizer offload without an optimizer_step says what it needs.
// expected-error @+1 {{tailor-offload: no function @optimizer_step: optimizer offload places a training step's optimizer (compile with a recipe)}}
module {
  tg.param @a : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
}
