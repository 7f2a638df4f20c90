// RUN: tailor-opt %s --split-input-file --tailor-lower-to-sched="backend=cuda sm=90 hardware=h100 threads=2" | FileCheck %s --check-prefixes=CUDA,ALL
// RUN: tailor-opt %s --split-input-file --tailor-lower-to-sched="threads=2" | FileCheck %s --check-prefixes=CPU,ALL

tg.param @a : tensor<8x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<5xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<8x4xf32> of @a grad
tg.state @b.grad : tensor<5xf32> of @b grad

// Tests that global_norm's workspace follows the backend: on CUDA the first
// pass's 1024 f64 partials (runtime/cuda/GlobalNormWorkspace.h), 8192
// bytes after the tensors and the output; on the CPU none.
// CUDA-LABEL: sched.program @rank0
// CUDA: sched.arena @workspace device workspace size 8192
// CUDA: %[[GA:.+]] = sched.state "a.grad"
// CUDA: %[[GB:.+]] = sched.state "b.grad"
// CUDA: %[[WS:.+]] = sched.buffer @workspace[0, 8192] : memref<2048xf32>
// CUDA: sched.launch @global_norm(%[[GA]], %[[GB]], %{{.+}}, %[[WS]]) on @compute
// CPU-LABEL: sched.program @rank0
// CPU: sched.arena @workspace device workspace size 0
// CPU: %[[GA:.+]] = sched.state "a.grad"
// CPU: %[[GB:.+]] = sched.state "b.grad"
// CPU-NOT: sched.buffer @workspace
// CPU: sched.launch @global_norm(%[[GA]], %[[GB]], %{{[^,]+}}) on @compute
func.func @forward(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "grad_norm"}) {
  %ga = tg.state_ref @a.grad : tensor<8x4xf32>
  %gb = tg.state_ref @b.grad : tensor<5xf32>
  %norm = tg.global_norm %ga, %gb : (tensor<8x4xf32>, tensor<5xf32>) -> tensor<f32>
  return %norm : tensor<f32>
}

// -----

tg.param @a : tensor<8x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<5xf32> trainable init <"zeros", 0.0 : f64>
tg.param @c : tensor<3xf32> trainable init <"zeros", 0.0 : f64>
tg.param @d : tensor<7xf32> trainable init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<8x4xf32> of @a grad
tg.state @b.grad : tensor<5xf32> of @b grad
tg.state @c.grad : tensor<3xf32> of @c grad
tg.state @d.grad : tensor<7xf32> of @d grad
tg.state @a.exp_avg : tensor<8x4xf32> of @a exp_avg
tg.state @b.exp_avg : tensor<5xf32> of @b exp_avg
tg.state @c.exp_avg : tensor<3xf32> of @c exp_avg
tg.state @d.exp_avg : tensor<7xf32> of @d exp_avg
tg.state @a.exp_avg_sq : tensor<8x4xf32> of @a exp_avg_sq
tg.state @b.exp_avg_sq : tensor<5xf32> of @b exp_avg_sq
tg.state @c.exp_avg_sq : tensor<3xf32> of @c exp_avg_sq
tg.state @d.exp_avg_sq : tensor<7xf32> of @d exp_avg_sq

// Tests that on both backends consecutive AdamW updates with the same
// hyperparameters and scalars become one adamw_multi launch (each
// parameter's four operands, then lr, step and grad_scale), that one with
// another weight decay starts a launch of its own, and that a lone update
// stays adamw.
// ALL-LABEL: sched.program @rank0
// ALL-DAG: %[[A:.+]] = sched.param "a"
// ALL-DAG: %[[B:.+]] = sched.param "b"
// ALL-DAG: %[[C:.+]] = sched.param "c"
// ALL-DAG: %[[D:.+]] = sched.param "d"
// ALL-DAG: %[[AG:.+]] = sched.state "a.grad"
// ALL-DAG: %[[BG:.+]] = sched.state "b.grad"
// ALL-DAG: %[[CG:.+]] = sched.state "c.grad"
// ALL-DAG: %[[DG:.+]] = sched.state "d.grad"
// ALL-DAG: %[[AM:.+]] = sched.state "a.exp_avg"
// ALL-DAG: %[[AV:.+]] = sched.state "a.exp_avg_sq"
// ALL-DAG: %[[BM:.+]] = sched.state "b.exp_avg"
// ALL-DAG: %[[BV:.+]] = sched.state "b.exp_avg_sq"
// ALL-DAG: %[[CM:.+]] = sched.state "c.exp_avg"
// ALL-DAG: %[[CV:.+]] = sched.state "c.exp_avg_sq"
// ALL-DAG: %[[DM:.+]] = sched.state "d.exp_avg"
// ALL-DAG: %[[DV:.+]] = sched.state "d.exp_avg_sq"
// ALL-DAG: %[[STEP:.+]] = sched.input "step"
// ALL: sched.launch @adamw_multi(%[[A]], %[[AG]], %[[AM]], %[[AV]], %[[B]], %[[BG]], %[[BM]], %[[BV]], %[[C]], %[[CG]], %[[CM]], %[[CV]], %[[LR:[^,]+]], %[[STEP]], %[[ONE:[^)]+]]) on @compute with {beta1 = 9.000000e-01 : f64, {{.*}}weight_decay = 0.000000e+00 : f64}
// ALL-NEXT: sched.launch @adamw(%[[D]], %[[DG]], %[[DM]], %[[DV]], %[[LR]], %[[STEP]], %[[ONE]]) on @compute with {{{.*}}weight_decay = 1.000000e-01 : f64}
// ALL-NOT: sched.launch @adamw
func.func @forward(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}) {
  %lr = arith.constant dense<1.0e-3> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  tg.adamw_update @a grad @a.grad moments(@a.exp_avg, @a.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @b grad @b.grad moments(@b.exp_avg, @b.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @c grad @c.grad moments(@c.exp_avg, @c.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @d grad @d.grad moments(@d.exp_avg, @d.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr : tensor<f32>
}
