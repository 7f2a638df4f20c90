// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-keep-layers=count=2 | FileCheck %s
// RUN: tailor-opt %s --split-input-file --tailor-keep-layers=count=3 | FileCheck %s --check-prefix=ALL
// RUN: not tailor-opt %s --split-input-file --tailor-keep-layers=count=0 2>&1 | FileCheck %s --check-prefix=ZERO

tg.param @e : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128>
tg.param @w0 : tensor<4x4xf32> at #tg.external<"w.bin", offset = 128, length = 64>
tg.param @w1 : tensor<4x4xf32> at #tg.external<"w.bin", offset = 192, length = 64>
tg.param @w2 : tensor<4x4xf32> at #tg.external<"w.bin", offset = 256, length = 64>
tg.param @n : tensor<4xf32> at #tg.external<"w.bin", offset = 320, length = 16>

// Tests that keeping 2 of 3 layers erases layer 2's ops and the parameter
// only it read, and the final norm reads layer 1's residual instead.
// CHECK-NOT: tg.param @w2
// CHECK-LABEL: func.func @forward
// CHECK: tg.param_ref @w1
// CHECK: %[[R1:.+]] = tg.add %{{.+}}, %{{.+}} {tg.layer = 1 : i64}
// CHECK-NOT: tg.layer = 2
// CHECK: tg.rms_norm %[[R1]], %{{.+}} {epsilon = 1.000000e-05 : f64, tg.module = "model.norm"}

// Tests that a model of no more layers than kept is left as it is.
// ALL: tg.param @w2
// ALL: tg.layer = 2

// ZERO: error: tailor-keep-layers: count must be at least 1, got 0
func.func @forward(%ids: tensor<2xi64>) -> tensor<2x4xf32> {
  %e = tg.param_ref @e : tensor<8x4xf32>
  %w0 = tg.param_ref @w0 : tensor<4x4xf32>
  %w1 = tg.param_ref @w1 : tensor<4x4xf32>
  %w2 = tg.param_ref @w2 : tensor<4x4xf32>
  %n = tg.param_ref @n : tensor<4xf32>
  %x = tg.embedding %e, %ids {tg.module = "model.embed_tokens"} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %h0 = tg.linear %x, %w0 {tg.layer = 0 : i64, tg.module = "model.layers.0.mlp"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r0 = tg.add %x, %h0 {tg.layer = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h1 = tg.linear %r0, %w1 {tg.layer = 1 : i64, tg.module = "model.layers.1.mlp"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r1 = tg.add %r0, %h1 {tg.layer = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h2 = tg.linear %r1, %w2 {tg.layer = 2 : i64, tg.module = "model.layers.2.mlp"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r2 = tg.add %r1, %h2 {tg.layer = 2 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = tg.rms_norm %r2, %n {epsilon = 1.0e-5 : f64, tg.module = "model.norm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

tg.param @w0 : tensor<4x4xf32> at #tg.external<"w.bin", offset = 0, length = 64>
tg.param @w1 : tensor<4x4xf32> at #tg.external<"w.bin", offset = 64, length = 64>
tg.param @w2 : tensor<4x4xf32> at #tg.external<"w.bin", offset = 128, length = 64>

// Tests that layers that are not alike are an error naming the first
// difference.
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = tg.param_ref @w0 : tensor<4x4xf32>
  %w1 = tg.param_ref @w1 : tensor<4x4xf32>
  %w2 = tg.param_ref @w2 : tensor<4x4xf32>
  %h0 = tg.linear %x, %w0 {tg.layer = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %h1 = tg.linear %h0, %w1 {tg.layer = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-error @+1 {{tailor-keep-layers: op 0 of layer 2 is not op 0 of layer 1 ('tg.linear'): the layers are not alike}}
  %h2 = tg.mul %h1, %h1 {tg.layer = 2 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %h2 : tensor<2x4xf32>
}
