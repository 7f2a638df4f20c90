// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-add-loss | FileCheck %s

// Tests that labels arrive as an input, are shifted by one token with an
// ignored last column (so the logits are only viewed, never copied), and
// score the flattened logits with a mean over counted tokens.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x4xi64> {tg.name = "input_ids"}, %[[LABELS:.+]]: tensor<2x4xi64> {tg.name = "labels"}) -> (tensor<f32> {tg.name = "loss"})
// CHECK: %[[LOGITS:.+]] = tg.linear
// CHECK: %[[NEXT:.+]] = tg.slice %[[LABELS]] starts = [0, 1] ends = [2, 4] steps = [1, 1]
// CHECK: %[[PAD:.+]] = arith.constant dense<-100> : tensor<2x1xi64>
// CHECK: %[[SHIFTED:.+]] = tg.concat %[[NEXT]], %[[PAD]] axis = 1
// CHECK: %[[FLAT:.+]] = tg.reshape %[[SHIFTED]] : tensor<2x4xi64> -> tensor<8xi64>
// CHECK: %[[ROWS:.+]] = tg.reshape %[[LOGITS]] : tensor<2x4x16xf32> -> tensor<8x16xf32>
// CHECK: %[[LOSS:.+]] = tg.cross_entropy %[[ROWS]], %[[FLAT]] : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: return %[[LOSS]] : tensor<f32>
func.func @forward(%ids: tensor<2x4xi64> {tg.name = "input_ids"}) -> (tensor<2x4x16xf32> {tg.name = "logits"}) {
  %t = arith.constant dense<1.0> : tensor<16x8xf32>
  %e = tg.embedding %t, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %w = arith.constant dense<0.5> : tensor<16x8xf32>
  %l = tg.linear %e, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %l : tensor<2x4x16xf32>
}

// -----

// Tests that a function without [batch, seq, vocab] logits is refused.
// expected-error @below {{expected @forward to return logits [batch, seq, vocab] with static shape first}}
func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}
