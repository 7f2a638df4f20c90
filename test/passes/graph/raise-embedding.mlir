// RUN: tailor-opt %s --split-input-file --tailor-raise-embedding | FileCheck %s

tg.param @model.embed_tokens.weight : tensor<16x4xf32>

// Tests that an embedding is named after its table, and that a linear layer
// reading the same table (a tied lm_head) is marked tied to it.
// CHECK-LABEL: func.func @tied
// CHECK: tg.embedding %{{.+}}, %{{.+}} {tg.module = "model.embed_tokens"}
// CHECK: tg.linear %{{.+}}, %{{.+}} {tg.tied = "model.embed_tokens"}
func.func @tied(%ids: tensor<2x3xi64>) -> tensor<2x3x16xf32> {
  %t = tg.param_ref @model.embed_tokens.weight : tensor<16x4xf32>
  %h = tg.embedding %t, %ids : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %y = tg.linear %h, %t : (tensor<2x3x4xf32>, tensor<16x4xf32>) -> tensor<2x3x16xf32>
  return %y : tensor<2x3x16xf32>
}

// -----

tg.param @wte : tensor<16x4xf32>
tg.param @head : tensor<16x4xf32>

// Tests that a linear layer with its own weight is not tied.
// CHECK-LABEL: func.func @untied
// CHECK: tg.linear
// CHECK-NOT: tg.tied
func.func @untied(%ids: tensor<2x3xi64>) -> tensor<2x3x16xf32> {
  %t = tg.param_ref @wte : tensor<16x4xf32>
  %w = tg.param_ref @head : tensor<16x4xf32>
  %h = tg.embedding %t, %ids : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %y = tg.linear %h, %w : (tensor<2x3x4xf32>, tensor<16x4xf32>) -> tensor<2x3x16xf32>
  return %y : tensor<2x3x16xf32>
}
