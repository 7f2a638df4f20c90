// RUN: tailor-opt %s --split-input-file --tailor-raise-linear | FileCheck %s

tg.param @model.layers.2.mlp.up_proj.weight : tensor<8x4xf32>
tg.param @model.layers.2.mlp.up_proj.bias : tensor<8xf32>

// Tests that matmul against a transposed [out, in] parameter plus a bias
// becomes one tg.linear named after the weight.
// CHECK-LABEL: func.func @transposed_weight
func.func @transposed_weight(%x: tensor<2x3x4xf32>) -> tensor<2x3x8xf32> {
  // CHECK: %[[W:.+]] = tg.param_ref @model.layers.2.mlp.up_proj.weight
  // CHECK: %[[B:.+]] = tg.param_ref @model.layers.2.mlp.up_proj.bias
  // CHECK: %[[Y:.+]] = tg.linear %{{.+}}, %[[W]], %[[B]] {tg.layer = 2 : i64, tg.module = "model.layers.2.mlp.up_proj"}
  // CHECK-NOT: tg.matmul
  // CHECK-NOT: tg.add
  // CHECK: return %[[Y]]
  %w = tg.param_ref @model.layers.2.mlp.up_proj.weight : tensor<8x4xf32>
  %b = tg.param_ref @model.layers.2.mlp.up_proj.bias : tensor<8xf32>
  %wt = tg.transpose %w permutation = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %y = tg.matmul %x, %wt : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %z = tg.add %y, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %z : tensor<2x3x8xf32>
}

// -----

tg.param @"onnx::MatMul_7" : tensor<4x8xf32>

// Tests that a pre-transposed [in, out] weight keeps its layout behind an
// explicit transpose, and that the module path comes from the node scope.
// CHECK-LABEL: func.func @pretransposed_weight
func.func @pretransposed_weight(%x: tensor<3x4xf32>) -> tensor<3x8xf32> {
  // CHECK: %[[W:.+]] = tg.param_ref @"onnx::MatMul_7"
  // CHECK: %[[T:.+]] = tg.transpose %[[W]] permutation = [1, 0]
  // CHECK: tg.linear %{{.+}}, %[[T]] {tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn.q_proj"}
  %w = tg.param_ref @"onnx::MatMul_7" : tensor<4x8xf32>
  %y = tg.matmul %x, %w : (tensor<3x4xf32>, tensor<4x8xf32>) -> tensor<3x8xf32> loc(fused<"model.layers.0.self_attn.q_proj">["/model/layers.0/self_attn/q_proj/MatMul"])
  return %y : tensor<3x8xf32>
}
