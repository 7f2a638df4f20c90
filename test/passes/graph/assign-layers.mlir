// RUN: tailor-opt %s --split-input-file --tailor-assign-layers | FileCheck %s

tg.param @e : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128>
tg.param @w0 : tensor<4x4xf32> at #tg.external<"w.bin", offset = 128, length = 64>
tg.param @w1 : tensor<4x4xf32> at #tg.external<"w.bin", offset = 192, length = 64>
tg.param @n : tensor<4xf32> at #tg.external<"w.bin", offset = 256, length = 16>

// Tests that ops raising left unannotated join the largest layer among
// their operands' producers (the residual add of layer 0 joins layer 0, the
// one of layer 1 joins layer 1), while the embedding (it reads nothing
// layered), parameter references, and the final norm (a module outside the
// layers) get no layer.
// CHECK-LABEL: func.func @forward
// CHECK: %[[E:.+]] = tg.embedding %{{.+}}, %arg0 {tg.module = "model.embed_tokens"}
// CHECK: %[[H0:.+]] = tg.linear %[[E]], %{{.+}} {tg.layer = 0 : i64, tg.module = "model.layers.0.mlp"}
// CHECK: %[[R0:.+]] = tg.add %[[E]], %[[H0]] {tg.layer = 0 : i64}
// CHECK: %[[H1:.+]] = tg.linear %[[R0]], %{{.+}} {tg.layer = 1 : i64, tg.module = "model.layers.1.mlp"}
// CHECK: %[[R1:.+]] = tg.add %[[R0]], %[[H1]] {tg.layer = 1 : i64}
// CHECK: tg.rms_norm %[[R1]], %{{.+}} {epsilon = 1.000000e-05 : f64, tg.module = "model.norm"}
// CHECK-NOT: tg.layer
// CHECK: return
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %e = tg.param_ref @e : tensor<8x4xf32>
  %w0 = tg.param_ref @w0 : tensor<4x4xf32>
  %w1 = tg.param_ref @w1 : tensor<4x4xf32>
  %n = tg.param_ref @n : tensor<4xf32>
  %x = tg.embedding %e, %ids {tg.module = "model.embed_tokens"} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %h0 = tg.linear %x, %w0 {tg.layer = 0 : i64, tg.module = "model.layers.0.mlp"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %r0 = tg.add %x, %h0 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %h1 = tg.linear %r0, %w1 {tg.layer = 1 : i64, tg.module = "model.layers.1.mlp"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %r1 = tg.add %r0, %h1 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = tg.rms_norm %r1, %n {epsilon = 1.0e-5 : f64, tg.module = "model.norm"} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}
