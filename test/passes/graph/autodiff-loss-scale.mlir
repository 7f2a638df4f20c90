// RUN: tailor-opt %s --tailor-autodiff="loss-scale=true" | FileCheck %s
// RUN: not tailor-opt %s --tailor-autodiff="loss-scale=true cotangents=true" 2>&1 | FileCheck %s --check-prefix=VJP

tg.param @b : tensor<8x4xf32> trainable init <"zeros", 0.0 : f64>

// Tests that with loss-scale the backward starts from a new input
// `loss_scale` (GradScaler's scaled loss) rather than a constant 1, and that
// the loss returned stays unscaled.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[S:[^:]+]]: tensor<f32> {tg.name = "loss_scale"}
// CHECK-NOT: arith.constant dense<1.000000e+00>
// CHECK: %[[LOSS:.+]] = tg.reduce_mean
// CHECK: tg.reshape %[[S]]
// CHECK: return %[[LOSS]], %{{.+}}
// Tests that loss-scale is refused with cotangents (no loss to seed).
// VJP: loss-scale seeds a loss; it cannot be combined with cotangents
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<f32> {tg.name = "loss"}) {
  %b = tg.param_ref @b : tensor<8x4xf32>
  %y = tg.linear %x, %b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  %l = tg.reduce_mean %y axes = [0, 1] : tensor<3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
