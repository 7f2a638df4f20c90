// RUN: tailor-opt %s --tailor-autodiff --tailor-recompute="function=forward policy=budget budget-bytes=400" | FileCheck %s --check-prefix=FITS
// RUN: tailor-opt %s --verify-diagnostics --tailor-autodiff --tailor-recompute="function=forward policy=budget budget-bytes=64" | FileCheck %s --check-prefix=BELOW

tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @g : tensor<4xf32> at #tg.external<"w.bin", offset = 0, length = 16>

// Tests the budget policy on one layer that saves n (a norm: 5 FLOPs an
// element to rebuild) and h (a GEMM: 8 FLOPs an element here). Without
// recomputation the activations take 448 bytes. Under 400 bytes, rebuilding
// the cheaper n is enough and h is kept. Under 64 bytes, which even
// rebuilding both (320 bytes) misses, the pass warns with the figures and
// rebuilds both.
// FITS-LABEL: func.func @forward
// FITS-SAME: tg.recompute_policy = "budget"
// FITS: tg.rms_norm %arg0, %{{.+}} {epsilon = 1.000000e-05 : f64, tg.layer = 0 : i64, tg.recompute}
// FITS: %[[H:.+]] = tg.linear %{{.+}}, %{{.+}} {tg.layer = 0 : i64} :
// FITS: tg.silu_grad %[[H]]
// FITS: %[[N2:.+]] = tg.rms_norm %arg0, %{{.+}} {epsilon = 1.000000e-05 : f64, tg.layer = 0 : i64, tg.recomputed}
// FITS: tg.linear_weight_grad %{{.+}}, %[[N2]]
// FITS-NOT: tg.recomputed
// BELOW-LABEL: func.func @forward
// BELOW: tg.linear {{.+}}tg.recompute}
// BELOW: tg.linear {{.+}}tg.recomputed}
// expected-warning@+1 {{activation budget of 64 bytes is below what recomputing every layer reaches (320 bytes, 71.4% of 448 without recomputation); recomputing every layer}}
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<f32> {tg.name = "loss"}) {
  %w = tg.param_ref @w : tensor<4x4xf32>
  %g = tg.param_ref @g : tensor<4xf32>
  %n = tg.rms_norm %x, %g {epsilon = 1.0e-5 : f64, tg.layer = 0 : i64} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %h = tg.linear %n, %w {tg.layer = 0 : i64} : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  %s = tg.silu %h {tg.layer = 0 : i64} : tensor<3x4xf32>
  %x1 = tg.add %x, %s {tg.layer = 0 : i64} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %m = tg.rms_norm %x1, %g {epsilon = 1.0e-5 : f64, tg.layer = 1 : i64} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %l = tg.reduce_mean %m axes = [0, 1] : tensor<3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
