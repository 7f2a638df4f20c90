// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff --tailor-recompute="function=forward policy=none" | FileCheck %s --check-prefix=NONE
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff --tailor-recompute="function=forward policy=full" | FileCheck %s --check-prefix=FULL
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff --tailor-recompute="function=forward policy=selective" | FileCheck %s --check-prefix=SEL
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff --tailor-recompute="function=forward policy=budget budget-fraction=1.0" | FileCheck %s --check-prefix=NONE

tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @g : tensor<4xf32> at #tg.external<"w.bin", offset = 0, length = 16>

// Tests the choice each policy makes on two layers. Layer 0 saves n (the
// norm, read by the weight gradient) and h (the GEMM output, read by
// silu_grad); its output x1 is read by layer 1, so it is kept by every
// policy, as is the input x. `none` (and a budget that already fits)
// rebuilds nothing; `full` rebuilds the whole layer from x in backward;
// `selective` rebuilds the cheap norm and keeps the GEMM output.
// NONE-LABEL: func.func @forward
// NONE-SAME: tg.recompute_policy
// NONE-NOT: tg.recompute
// NONE: return
// FULL-LABEL: func.func @forward
// FULL-SAME: tg.recompute_policy = "full"
// FULL: %[[N:.+]] = tg.rms_norm %arg0, %{{.+}} {epsilon = 1.000000e-05 : f64, tg.layer = 0 : i64, tg.recompute}
// FULL: %[[H:.+]] = tg.linear %[[N]], %{{.+}} {tg.layer = 0 : i64, tg.recompute}
// FULL: %[[S:.+]] = tg.silu %[[H]] {tg.layer = 0 : i64}
// FULL: %[[X1:.+]] = tg.add %arg0, %[[S]] {tg.layer = 0 : i64}
// FULL: tg.rms_norm_grad %{{.+}}, %[[X1]]
// FULL: %[[N2:.+]] = tg.rms_norm %arg0, %{{.+}} {epsilon = 1.000000e-05 : f64, tg.layer = 0 : i64, tg.recomputed}
// FULL: %[[H2:.+]] = tg.linear %[[N2]], %{{.+}} {tg.layer = 0 : i64, tg.recomputed}
// FULL: tg.silu_grad %[[H2]]
// FULL: tg.linear_weight_grad %{{.+}}, %[[N2]]
// FULL-NOT: tg.recomputed
// FULL: return
// SEL-LABEL: func.func @forward
// SEL-SAME: tg.recompute_policy = "selective"
// SEL: %[[N:.+]] = tg.rms_norm %arg0, %{{.+}} {epsilon = 1.000000e-05 : f64, tg.layer = 0 : i64, tg.recompute}
// SEL: %[[H:.+]] = tg.linear %[[N]], %{{.+}} {tg.layer = 0 : i64}
// SEL: tg.silu_grad %[[H]]
// SEL: %[[N2:.+]] = tg.rms_norm %arg0, %{{.+}} {epsilon = 1.000000e-05 : f64, tg.layer = 0 : i64, tg.recomputed}
// SEL: tg.linear_weight_grad %{{.+}}, %[[N2]]
// SEL-NOT: tg.recomputed
// SEL: return
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


// -----

tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>

// Tests that a replay computes its view of a parameter (the transpose a
// linear reads) again from the parameter, rather than read the forward's
// copy, which would then live until backward (a ZeRO-3 gather or an
// offloaded parameter's copy, a whole weight per linear).
// FULL-LABEL: func.func @forward
// FULL: %[[W:.+]] = tg.param_ref @w
// FULL: %[[T:.+]] = tg.transpose %[[W]] permutation = [1, 0] :
// FULL: tg.linear %arg0, %[[T]] {tg.layer = 0 : i64, tg.recompute}
// FULL: %[[T2:.+]] = tg.transpose %[[W]] permutation = [1, 0] {tg.recomputed}
// FULL: %[[H2:.+]] = tg.linear %arg0, %[[T2]] {tg.layer = 0 : i64, tg.recomputed}
// FULL: tg.silu_grad %[[H2]]
// FULL: return
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<f32> {tg.name = "loss"}) {
  %w = tg.param_ref @w : tensor<4x4xf32>
  %t = tg.transpose %w permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %h = tg.linear %x, %t {tg.layer = 0 : i64} : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  %s = tg.silu %h {tg.layer = 0 : i64} : tensor<3x4xf32>
  %x1 = tg.add %x, %s {tg.layer = 0 : i64} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %l = tg.reduce_mean %x1 axes = [0, 1] : tensor<3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
