// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff="cotangents=true wrt-inputs=true" | FileCheck %s --check-prefix=VJP

tg.param @w : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128>
tg.param @a : tensor<2x4xf32> at #tg.external<"w.bin", offset = 128, length = 32>
tg.param @b : tensor<8x2xf32> trainable init <"zeros", 0.0 : f64>

// Tests that only the trainable parameter gets a gradient: the frozen base
// weight and the frozen A (LoRA-FA) get none, no input gradient is made, and
// the backward pass reads the r-wide A x instead of the layer input x, so x
// need not be kept.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {tg.name = "loss"}, tensor<8x2xf32> {tg.grad_of = @b, tg.name = "grad.b"})
// CHECK: %[[LOW:.+]] = tg.linear %arg0, %{{.+}} : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
// CHECK: %[[PRE:.+]] = tg.add
// CHECK: %[[LOSS:.+]] = tg.reduce_mean
// CHECK: %[[ONE:.+]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[MEAN:.+]] = arith.constant dense<0.0416666679> : tensor<f32>
// CHECK: %[[DS:.+]] = tg.silu_grad %[[PRE]], %{{.+}} : tensor<3x8xf32>
// CHECK: %[[DB:.+]] = tg.linear_weight_grad %[[DS]], %[[LOW]] : (tensor<3x8xf32>, tensor<3x2xf32>) -> tensor<8x2xf32>
// CHECK-NOT: tg.linear_weight_grad
// CHECK-NOT: %arg0
// CHECK: return %[[LOSS]], %[[DB]]
// VJP-LABEL: func.func @forward
// VJP-SAME: %{{.+}}: tensor<f32> {tg.name = "grad.loss"}
// VJP-SAME: tensor<8x2xf32> {tg.grad_of = @b, tg.name = "grad.b"}
// VJP: tg.linear %{{.+}}, %{{.+}} : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<f32> {tg.name = "loss"}) {
  %w = tg.param_ref @w : tensor<8x4xf32>
  %a = tg.param_ref @a : tensor<2x4xf32>
  %b = tg.param_ref @b : tensor<8x2xf32>
  %base = tg.linear %x, %w : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  %low = tg.linear %x, %a : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %up = tg.linear %low, %b : (tensor<3x2xf32>, tensor<8x2xf32>) -> tensor<3x8xf32>
  %y = tg.add %base, %up : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %s = tg.silu %y : tensor<3x8xf32>
  %l = tg.reduce_mean %s axes = [0, 1] : tensor<3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

tg.param @wq : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>

// Tests that attention's gradient op reads the forward's additive bias and
// ALiBi slopes again (the bias itself needs no gradient: a constant).
// CHECK-LABEL: func.func @forward
// CHECK: %[[M:.+]] = arith.constant dense<{{.+}}> : tensor<1x1x1x4xf32>
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} bias %[[M]] {alibi_slopes = array<f64: 5.000000e-01, 2.500000e-01>, causal}
// CHECK: tg.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} bias %[[M]] {alibi_slopes = array<f64: 5.000000e-01, 2.500000e-01>, causal}
// VJP-LABEL: func.func @forward
// VJP: tg.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} bias %{{.+}} {alibi_slopes
func.func @forward(%x: tensor<1x2x4x4xf32> {tg.name = "x"}) -> (tensor<f32> {tg.name = "loss"}) {
  %wq = tg.param_ref @wq : tensor<4x4xf32>
  %q = tg.linear %x, %wq : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = arith.constant dense<[[[[0.0, -1.0, 0.5, 0.0]]]]> : tensor<1x1x1x4xf32>
  %y = tg.attention %q, %x, %x bias %m {causal, alibi_slopes = array<f64: 0.5, 0.25>} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x4xf32>
  %l = tg.reduce_mean %y axes = [0, 1, 2, 3] : tensor<1x2x4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
