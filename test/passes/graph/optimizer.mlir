// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-optimizer="scheduler=cosine warmup-steps=2 total-steps=10 max-grad-norm=1.0 accumulation-steps=2 lr=0.01 weight-decay=0.1" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-optimizer="optimizer=sgd momentum=0.9 nesterov=true" | FileCheck %s --check-prefix=SGD
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-optimizer="optimizer=sgd momentum=0" | FileCheck %s --check-prefix=PLAIN

tg.param @b : tensor<8x2xf32> trainable init <"zeros", 0.0 : f64>

// Tests that gradients go into an accumulator, that train_step returns only
// the loss, and that optimizer_step averages over 2 micro-batches, clips the
// norm, follows a cosine schedule with 2 warmup updates and updates the
// parameter in place with AdamW.
// CHECK-LABEL: tg.state @b.grad : tensor<8x2xf32> of @b grad
// CHECK: tg.state @b.exp_avg : tensor<8x2xf32> of @b exp_avg
// CHECK: tg.state @b.exp_avg_sq : tensor<8x2xf32> of @b exp_avg_sq
// CHECK: func.func @train_step(%{{.+}}: tensor<8x2xf32>) -> (tensor<f32> {tg.name = "loss"})
// CHECK: tg.accumulate %{{.+}} into @b.grad : tensor<8x2xf32>
// CHECK: func.func @optimizer_step(%[[STEP:.+]]: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}, tensor<f32> {tg.name = "grad_norm"})
// CHECK: %[[G:.+]] = tg.state_ref @b.grad
// CHECK: %[[SUM:.+]] = tg.global_norm %[[G]]
// CHECK: %[[NORM:.+]] = tg.mul %[[SUM]], %{{.+}}
// CHECK: tg.min
// CHECK: %[[SCALE:.+]] = tg.mul
// CHECK: tg.cast %[[STEP]] : tensor<i64> -> tensor<f32>
// CHECK: tg.cos
// CHECK: tg.select
// CHECK: %[[LR:.+]] = tg.mul
// CHECK: tg.adamw_update @b grad @b.grad moments(@b.exp_avg, @b.exp_avg_sq) lr %[[LR]] step %[[STEP]] scale %[[SCALE]] {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK: return %[[LR]], %[[NORM]]
// SGD: tg.state @b.momentum_buffer : tensor<8x2xf32> of @b momentum_buffer
// SGD: tg.sgd_update @b grad @b.grad momentum_buffer @b.momentum_buffer lr %{{.+}} scale %{{.+}} {momentum = 9.000000e-01 : f64, nesterov, weight_decay = 0.000000e+00 : f64}
// Tests that plain SGD (momentum 0) keeps no momentum buffer, as
// torch.optim.SGD keeps none.
// PLAIN-NOT: momentum_buffer
// PLAIN: tg.sgd_update @b grad @b.grad lr %{{.+}} scale %{{.+}} {momentum = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64}
// PLAIN-NOT: momentum_buffer
func.func @forward(%g: tensor<8x2xf32>) -> (tensor<f32> {tg.name = "loss"}, tensor<8x2xf32> {tg.grad_of = @b, tg.name = "grad.b"}) {
  %l = tg.reduce_sum %g axes = [0, 1] : tensor<8x2xf32> -> tensor<f32>
  return %l, %g : tensor<f32>, tensor<8x2xf32>
}

// -----

// Tests that a function without gradients is refused.
// expected-error @below {{@forward returns no gradients; run tailor-autodiff first}}
func.func @forward(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}
