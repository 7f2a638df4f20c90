// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload="optimizer=true" --tailor-overlap-collectives="move-ddp-reductions=true" --tailor-overlap-host-updates | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-offload="optimizer=true" --tailor-overlap-collectives="move-ddp-reductions=true" --tailor-overlap-host-updates --tailor-lower-to-sched="threads=2" | FileCheck %s --check-prefix=SCHED

tg.param @a : tensor<8x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<5xf32> trainable init <"zeros", 0.0 : f64>
tg.param @c : tensor<6xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<8x4xf32> of @a grad
tg.state @b.grad : tensor<5xf32> of @b grad
tg.state @c.grad : tensor<6xf32> of @c grad
tg.state @a.exp_avg : tensor<8x4xf32> of @a exp_avg
tg.state @b.exp_avg : tensor<5xf32> of @b exp_avg
tg.state @c.exp_avg : tensor<6xf32> of @c exp_avg
tg.state @a.exp_avg_sq : tensor<8x4xf32> of @a exp_avg_sq
tg.state @b.exp_avg_sq : tensor<5xf32> of @b exp_avg_sq
tg.state @c.exp_avg_sq : tensor<6xf32> of @c exp_avg_sq

// Tests that without clipping (the scale is a constant) every host update
// whose copies are in the training step moves there: the learning rate's
// schedule is cloned at its start from a new `update_step` input and
// brought to the host; layer 1's two updates go back to back after layer
// 1's last copy, layer 0's after its own; the optimizer step keeps the
// norm, the copies back and the zeroing, and no host scalars.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[STEP:[^:]+]]: tensor<i64> {tg.name = "update_step"}
// CHECK: %[[F:.+]] = tg.cast %[[STEP]] : tensor<i64> -> tensor<f32>
// CHECK: %[[LR:.+]] = tg.mul %[[F]], %{{.+}}
// CHECK: %[[HLR:.+]] = tg.to_host %[[LR]] : tensor<f32>
// CHECK: %[[HSTEP:.+]] = tg.to_host %[[STEP]] : tensor<i64>
// CHECK: %[[HSCALE:.+]] = tg.to_host %{{.+}} : tensor<f32>
// CHECK: tg.accumulate %{{.+}} into @a.grad
// CHECK: tg.copy_state @a into @a.master {tg.overlap}
// CHECK: tg.accumulate %{{.+}} into @b.grad
// CHECK: tg.copy_state @b into @b.master {tg.overlap}
// CHECK-NEXT: tg.adamw_update @a.master grad @a.grad_host {{.*}} lr %[[HLR]] step %[[HSTEP]] scale %[[HSCALE]]
// CHECK-NEXT: tg.adamw_update @b.master grad @b.grad_host
// CHECK: tg.accumulate %{{.+}} into @c.grad
// CHECK: tg.copy_state @c into @c.master {tg.overlap}
// CHECK-NEXT: tg.adamw_update @c.master grad @c.grad_host
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: tg.to_host
// CHECK-NOT: tg.adamw_update
// CHECK: tg.global_norm
// CHECK: tg.copy_state @a.master into @a
// CHECK: tg.zero_states

// Tests that planning runs the training step's joined updates on the host
// stream, each after compute and the copy stream reach it, and that
// compute waits for both only at the end of the step (nothing after them
// touches their buffers).
// SCHED-LABEL: sched.entry "train_step"
// SCHED: sched.record @host.ready.0 on @compute
// SCHED-NEXT: sched.wait @host.ready.0 on @host
// SCHED-NEXT: sched.wait @host_copy.done.{{[0-9]+}} on @host
// SCHED-NEXT: sched.launch @adamw_multi({{.*}}) on @host {{.*}}origin = "tg.adamw_update (2 parameters)"
// SCHED-NEXT: sched.record @host.done.0 on @host
// SCHED: sched.launch @adamw({{.*}}) on @host
// SCHED-NEXT: sched.record @host.done.1 on @host
// SCHED-NEXT: sched.wait @host.done.0 on @compute
// SCHED-NEXT: sched.wait @host.done.1 on @compute
// SCHED: sched.entry "optimizer_step"
// SCHED-NOT: on @host
// SCHED: sched.output "lr"
func.func @train_step(%x: tensor<8x4xf32> {tg.name = "x"}, %y: tensor<5xf32> {tg.name = "y"}, %z: tensor<6xf32> {tg.name = "z"}) {
  %ya = tg.neg %x {tg.layer = 1 : i64} : tensor<8x4xf32>
  tg.accumulate %ya into @a.grad : tensor<8x4xf32>
  %yb = tg.neg %y {tg.layer = 1 : i64} : tensor<5xf32>
  tg.accumulate %yb into @b.grad : tensor<5xf32>
  %yc = tg.neg %z {tg.layer = 0 : i64} : tensor<6xf32>
  tg.accumulate %yc into @c.grad : tensor<6xf32>
  return
}
func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}, tensor<f32> {tg.name = "grad_norm"}) {
  %base = arith.constant dense<1.0e-3> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %f = tg.cast %step : tensor<i64> -> tensor<f32>
  %lr = tg.mul %f, %base : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %ga = tg.state_ref @a.grad : tensor<8x4xf32>
  %gb = tg.state_ref @b.grad : tensor<5xf32>
  %gc = tg.state_ref @c.grad : tensor<6xf32>
  %norm = tg.global_norm %ga, %gb, %gc : (tensor<8x4xf32>, tensor<5xf32>, tensor<6xf32>) -> tensor<f32>
  tg.adamw_update @a grad @a.grad moments(@a.exp_avg, @a.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @b grad @b.grad moments(@b.exp_avg, @b.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @c grad @c.grad moments(@c.exp_avg, @c.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr, %norm : tensor<f32>, tensor<f32>
}

// -----

tg.param @a : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<4xf32> of @a grad
tg.state @a.exp_avg : tensor<4xf32> of @a exp_avg
tg.state @a.exp_avg_sq : tensor<4xf32> of @a exp_avg_sq

// Tests that with gradient clipping (the scale reads the global norm, so
// the last gradient of the step) the update stays after backward, said in
// a remark, and the training step gains no input.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%{{[^:]+}}: tensor<4xf32> {tg.name = "x"})
// CHECK-NOT: tg.adamw_update
// CHECK-LABEL: func.func @optimizer_step
// CHECK: tg.to_host
// CHECK: tg.adamw_update @a.master
func.func @train_step(%x: tensor<4xf32> {tg.name = "x"}) {
  tg.accumulate %x into @a.grad : tensor<4xf32>
  return
}
func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}) {
  %lr = arith.constant dense<1.0e-3> : tensor<f32>
  %ga = tg.state_ref @a.grad : tensor<4xf32>
  %norm = tg.global_norm %ga : (tensor<4xf32>) -> tensor<f32>
  %scale = tg.div %lr, %norm : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // expected-remark @+1 {{tailor-overlap-host-updates: stays in @optimizer_step: a scalar it reads cannot be computed during backward: it depends on 'tg.state_ref', which reads the training state (clipping's norm needs every gradient of the step)}}
  tg.adamw_update @a grad @a.grad moments(@a.exp_avg, @a.exp_avg_sq) lr %lr step %step scale %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr : tensor<f32>
}

// -----

tg.param @a : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<4xf32> of @a grad
tg.state @b.grad : tensor<4xf32> of @b grad
tg.state @a.exp_avg : tensor<4xf32> of @a exp_avg
tg.state @a.exp_avg_sq : tensor<4xf32> of @a exp_avg_sq
tg.state @b.exp_avg : tensor<4xf32> of @b exp_avg
tg.state @b.exp_avg_sq : tensor<4xf32> of @b exp_avg_sq

// Tests that an update whose gradient the training step never makes (its
// copies stay in the optimizer step) stays too, said in a remark, while
// the other moves.
// CHECK-LABEL: func.func @train_step
// CHECK: tg.adamw_update @a.master
// CHECK-LABEL: func.func @optimizer_step
// CHECK: tg.adamw_update @b.master
func.func @train_step(%x: tensor<4xf32> {tg.name = "x"}) {
  tg.accumulate %x into @a.grad : tensor<4xf32>
  return
}
func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}) {
  %lr = arith.constant dense<1.0e-3> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  tg.adamw_update @a grad @a.grad moments(@a.exp_avg, @a.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  // expected-remark @+1 {{tailor-overlap-host-updates: stays in @optimizer_step: its copies to the host are not in @train_step}}
  tg.adamw_update @b grad @b.grad moments(@b.exp_avg, @b.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr : tensor<f32>
}

