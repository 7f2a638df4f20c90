// RUN: tailor-opt %s --split-input-file --tailor-raise-activations | FileCheck %s

// Tests that x * sigmoid(x), in either operand order, becomes tg.silu.
// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK: %[[A:.+]] = tg.silu %[[X]]
// CHECK: %[[B:.+]] = tg.silu %[[X]]
// CHECK-NOT: tg.sigmoid
// CHECK: return %[[A]], %[[B]]
func.func @silu(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %s = tg.sigmoid %x : tensor<2x8xf32>
  %a = tg.mul %x, %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %b = tg.mul %s, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %a, %b : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Tests exact GELU, 0.5 * x * (1 + erf(x / sqrt(2))), associated as
// exporters write it: (x * 0.5) * (1 + erf(x * (1 / sqrt(2)))).
// CHECK-LABEL: func.func @gelu_erf
// CHECK: %[[Y:.+]] = tg.gelu %{{.+}} : tensor<2x8xf32>
// CHECK-NOT: tg.erf
// CHECK: return %[[Y]]
func.func @gelu_erf(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %inv = arith.constant dense<0.707106769> : tensor<f32>
  %h = arith.constant dense<0.5> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %s = tg.mul %x, %inv : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = tg.erf %s : tensor<2x8xf32>
  %p = tg.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %xh = tg.mul %x, %h : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = tg.mul %xh, %p : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests GPT-2's tanh GELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: %[[Y:.+]] = tg.gelu %{{.+}} {approximation = #tg.gelu_approximation<tanh>}
// CHECK-NOT: tg.tanh
// CHECK: return %[[Y]]
func.func @gelu_tanh(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %three = arith.constant dense<3.0> : tensor<f32>
  %c = arith.constant dense<0.044715> : tensor<f32>
  %k = arith.constant dense<0.797884583> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %h = arith.constant dense<0.5> : tensor<f32>
  %x3 = tg.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %cx3 = tg.mul %x3, %c : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %in = tg.add %x, %cx3 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %kin = tg.mul %in, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %t = tg.tanh %kin : tensor<2x8xf32>
  %p = tg.add %t, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %hx = tg.mul %h, %x : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = tg.mul %hx, %p : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests that x * sigmoid(y) of two different values stays as it is.
// CHECK-LABEL: func.func @not_silu
// CHECK-NOT: tg.silu
func.func @not_silu(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = tg.sigmoid %y : tensor<2x8xf32>
  %a = tg.mul %x, %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %a : tensor<2x8xf32>
}
