// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-add-eval-step | FileCheck %s

tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>

// Tests that the scored function is copied into @eval_step, which returns
// only the loss, passes dropout's input through (evaluation mode) and no
// longer takes the dropout seed, its names prefixed with eval_ (a plan's
// names are unique across entries), while @forward is left as it was.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.+}}: tensor<i64> {tg.name = "seed"}
// CHECK: tg.dropout
// CHECK: return %{{.+}}, %{{.+}} : tensor<f32>, tensor<3x4xf32>
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: (%[[X:.+]]: tensor<3x4xf32> {tg.name = "eval_x"}) -> (tensor<f32> {tg.name = "eval_loss"})
// CHECK-NOT: tg.dropout
// CHECK: %[[H:.+]] = tg.linear %[[X]], %{{.+}}
// CHECK: %[[L:.+]] = tg.reduce_mean %[[H]]
// CHECK: return %[[L]] : tensor<f32>
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}, %seed: tensor<i64> {tg.name = "seed"}) -> (tensor<f32> {tg.name = "loss"}, tensor<3x4xf32> {tg.name = "logits"}) {
  %w = tg.param_ref @w : tensor<4x4xf32>
  %d = tg.dropout %x, %seed {p = 0.5 : f64, salt = 0 : i64} : (tensor<3x4xf32>, tensor<i64>) -> tensor<3x4xf32>
  %h = tg.linear %d, %w : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  %l = tg.reduce_mean %h axes = [0, 1] : tensor<3x4xf32> -> tensor<f32>
  return %l, %h : tensor<f32>, tensor<3x4xf32>
}

// -----

// Tests that a module without the scored function is an error.
// expected-error @below {{tailor-add-eval-step: no function 'forward' returning a loss}}
module {
  func.func @other() {
    return
  }
}
