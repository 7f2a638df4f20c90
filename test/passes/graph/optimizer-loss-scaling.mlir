// RUN: tailor-opt %s --tailor-optimizer="loss-scaling=true max-grad-norm=1.0 accumulation-steps=2" | FileCheck %s
// RUN: tailor-opt %s --tailor-optimizer="loss-scaling=true optimizer=sgd" | FileCheck %s --check-prefix=SGD

tg.param @b : tensor<8x2xf32> trainable init <"zeros", 0.0 : f64>

// Tests GradScaler's unscale, check and skip: optimizer_step takes
// `inv_scale`, finds an inf/NaN gradient from the norm of the scaled
// accumulators (norm * 0 is NaN exactly then), unscales the norm before
// averaging and clipping, folds inv_scale into the update's factor, gives
// the update a NaN factor (skip) on found_inf, and returns found_inf.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: %[[STEP:[^:]+]]: tensor<i64> {tg.name = "step"}, %[[INV:[^:]+]]: tensor<f32> {tg.name = "inv_scale"}
// CHECK-SAME: tensor<f32> {tg.name = "found_inf"}
// CHECK: %[[RAW:.+]] = tg.global_norm
// CHECK: %[[ZERO:.+]] = tg.mul %[[RAW]], %{{.+}}
// CHECK: %[[INF:.+]] = tg.is_nan %[[ZERO]]
// CHECK: %[[UNSCALED:.+]] = tg.mul %[[RAW]], %[[INV]]
// CHECK: %[[NORM:.+]] = tg.mul %[[UNSCALED]], %{{.+}}
// CHECK: tg.min
// CHECK: %[[FACTOR:.+]] = tg.mul %{{.+}}, %[[INV]]
// CHECK: %[[SCALE:.+]] = tg.select %[[INF]], %{{.+}}, %[[FACTOR]]
// CHECK: tg.adamw_update @b grad @b.grad moments(@b.exp_avg, @b.exp_avg_sq) lr %{{.+}} step %[[STEP]] scale %[[SCALE]]
// CHECK: %[[FOUND:.+]] = tg.cast %[[INF]] : tensor<i1> -> tensor<f32>
// CHECK: return %{{.+}}, %[[NORM]], %[[FOUND]]
// SGD-LABEL: func.func @optimizer_step
// SGD: %[[INF:.+]] = tg.is_nan
// SGD: %[[SCALE:.+]] = tg.select %[[INF]]
// SGD: tg.sgd_update @b grad @b.grad lr %{{.+}} scale %[[SCALE]]
func.func @forward(%g: tensor<8x2xf32>) -> (tensor<f32> {tg.name = "loss"}, tensor<8x2xf32> {tg.grad_of = @b, tg.name = "grad.b"}) {
  %l = tg.reduce_sum %g axes = [0, 1] : tensor<8x2xf32> -> tensor<f32>
  return %l, %g : tensor<f32>, tensor<8x2xf32>
}
