// RUN: tailor-opt %s --split-input-file --tailor-raise-norms | FileCheck %s

tg.param @model.layers.0.input_layernorm.weight : tensor<8xf32>

// Tests Llama's RMSNorm, w * (x * rsqrt(mean(x^2) + eps)) with x^2 as
// pow(x, 2), becomes one tg.rms_norm keeping eps.
// CHECK-LABEL: func.func @rms_pow_rsqrt
// CHECK: %[[W:.+]] = tg.param_ref @model.layers.0.input_layernorm.weight
// CHECK: %[[Y:.+]] = tg.rms_norm %{{.+}}, %[[W]] {epsilon = 9.9999999747524271E-7 : f64, tg.layer = 0 : i64, tg.module = "model.layers.0.input_layernorm"}
// CHECK-NOT: tg.rsqrt
// CHECK: return %[[Y]]
func.func @rms_pow_rsqrt(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %w = tg.param_ref @model.layers.0.input_layernorm.weight : tensor<8xf32>
  %two = arith.constant dense<2.0> : tensor<f32>
  %sq = tg.pow %x, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %m = tg.reduce_mean %sq axes = [2] keep_dims : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %eps = arith.constant dense<1.0E-6> : tensor<f32>
  %v = tg.add %m, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %r = tg.rsqrt %v : tensor<2x3x1xf32>
  %n = tg.mul %x, %r : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y = tg.mul %w, %n : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

tg.param @model.norm.weight : tensor<8xf32>

// Tests the x / sqrt(mean(x * x) + eps) spelling, named after its weight.
// CHECK-LABEL: func.func @rms_div_sqrt
// CHECK: tg.rms_norm %{{.+}}, %{{.+}} {epsilon = 9.9999997473787516E-6 : f64, tg.module = "model.norm"}
// CHECK-NOT: tg.sqrt
func.func @rms_div_sqrt(%x: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %w = tg.param_ref @model.norm.weight : tensor<8xf32>
  %sq = tg.mul %x, %x : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %m = tg.reduce_mean %sq axes = [1] keep_dims : tensor<3x8xf32> -> tensor<3x1xf32>
  %eps = arith.constant dense<1.0E-5> : tensor<f32>
  %v = tg.add %m, %eps : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %s = tg.sqrt %v : tensor<3x1xf32>
  %n = tg.div %x, %s : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %y = tg.mul %n, %w : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

// Tests that a mean over another axis than the last is not a norm.
// CHECK-LABEL: func.func @wrong_axis
// CHECK-NOT: tg.rms_norm
func.func @wrong_axis(%x: tensor<3x8xf32>, %w: tensor<8xf32>) -> tensor<3x8xf32> {
  %sq = tg.mul %x, %x : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %m = tg.reduce_mean %sq axes = [0] keep_dims : tensor<3x8xf32> -> tensor<1x8xf32>
  %eps = arith.constant dense<1.0E-5> : tensor<f32>
  %v = tg.add %m, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %r = tg.rsqrt %v : tensor<1x8xf32>
  %n = tg.mul %x, %r : (tensor<3x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  %y = tg.mul %n, %w : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}
