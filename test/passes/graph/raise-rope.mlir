// RUN: tailor-opt %s --split-input-file --tailor-raise-rope | FileCheck %s

// Tests Hugging Face's rotate-half layout: x * cos + cat(-x2, x1) * sin.
// CHECK-LABEL: func.func @rotate_half
// CHECK-SAME: (%[[X:.+]]: tensor<1x2x4x8xf32>, %[[COS:.+]]: tensor<4x8xf32>, %[[SIN:.+]]: tensor<4x8xf32>)
// CHECK: %[[Y:.+]] = tg.rope %[[X]], %[[COS]], %[[SIN]] :
// CHECK-NOT: tg.concat
// CHECK: return %[[Y]]
func.func @rotate_half(%x: tensor<1x2x4x8xf32>, %cos: tensor<4x8xf32>, %sin: tensor<4x8xf32>) -> tensor<1x2x4x8xf32> {
  %hi = tg.slice %x starts = [0, 0, 0, 4] ends = [1, 2, 4, 8] steps = [1, 1, 1, 1] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %lo = tg.slice %x starts = [0, 0, 0, 0] ends = [1, 2, 4, 4] steps = [1, 1, 1, 1] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %neg = tg.neg %hi : tensor<1x2x4x4xf32>
  %rot = tg.concat %neg, %lo axis = 3 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  %a = tg.mul %x, %cos : (tensor<1x2x4x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4x8xf32>
  %b = tg.mul %rot, %sin : (tensor<1x2x4x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4x8xf32>
  %y = tg.add %a, %b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// Tests Meta's interleaved pairs: stack(x1 c - x2 s, x1 s + x2 c) over the
// even and odd members, with one angle per pair; the tables are widened to
// both members of each pair and the stack's shape is kept by a reshape.
// CHECK-LABEL: func.func @interleaved_pairs
// CHECK-SAME: (%[[X:.+]]: tensor<1x2x4x8xf32>, %[[COS:.+]]: tensor<4x4xf32>, %[[SIN:.+]]: tensor<4x4xf32>)
// CHECK: %[[C1:.+]] = tg.reshape %[[COS]] : tensor<4x4xf32> -> tensor<4x4x1xf32>
// CHECK: %[[C2:.+]] = tg.broadcast %[[C1]] : tensor<4x4x1xf32> -> tensor<4x4x2xf32>
// CHECK: %[[C:.+]] = tg.reshape %[[C2]] : tensor<4x4x2xf32> -> tensor<4x8xf32>
// CHECK: %[[S:.+]] = tg.reshape %{{.+}} : tensor<4x4x2xf32> -> tensor<4x8xf32>
// CHECK: %[[R:.+]] = tg.rope %[[X]], %[[C]], %[[S]] {interleaved}
// CHECK: %[[Y:.+]] = tg.reshape %[[R]] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4x2xf32>
// CHECK-NOT: tg.concat
// CHECK: return %[[Y]]
func.func @interleaved_pairs(%x: tensor<1x2x4x8xf32>, %cos: tensor<4x4xf32>, %sin: tensor<4x4xf32>) -> tensor<1x2x4x4x2xf32> {
  %x1 = tg.slice %x starts = [0, 0, 0, 0] ends = [1, 2, 4, 7] steps = [1, 1, 1, 2] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %x2 = tg.slice %x starts = [0, 0, 0, 1] ends = [1, 2, 4, 8] steps = [1, 1, 1, 2] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %a = tg.mul %x1, %cos : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = tg.mul %x2, %sin : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %o1 = tg.sub %a, %b : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = tg.mul %x1, %sin : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %d = tg.mul %x2, %cos : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %o2 = tg.add %c, %d : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %u1 = tg.reshape %o1 : tensor<1x2x4x4xf32> -> tensor<1x2x4x4x1xf32>
  %u2 = tg.reshape %o2 : tensor<1x2x4x4xf32> -> tensor<1x2x4x4x1xf32>
  %y = tg.concat %u1, %u2 axis = 4 : (tensor<1x2x4x4x1xf32>, tensor<1x2x4x4x1xf32>) -> tensor<1x2x4x4x2xf32>
  return %y : tensor<1x2x4x4x2xf32>
}

// -----

// Tests that swapped sin and cos in the second half is not a rotation.
// CHECK-LABEL: func.func @not_a_rotation
// CHECK-NOT: tg.rope
func.func @not_a_rotation(%x: tensor<1x2x4x8xf32>, %cos: tensor<4x4xf32>, %sin: tensor<4x4xf32>) -> tensor<1x2x4x4x2xf32> {
  %x1 = tg.slice %x starts = [0, 0, 0, 0] ends = [1, 2, 4, 7] steps = [1, 1, 1, 2] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %x2 = tg.slice %x starts = [0, 0, 0, 1] ends = [1, 2, 4, 8] steps = [1, 1, 1, 2] : tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %a = tg.mul %x1, %cos : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = tg.mul %x2, %sin : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %o1 = tg.sub %a, %b : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = tg.mul %x1, %cos : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %d = tg.mul %x2, %sin : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %o2 = tg.add %c, %d : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %u1 = tg.reshape %o1 : tensor<1x2x4x4xf32> -> tensor<1x2x4x4x1xf32>
  %u2 = tg.reshape %o2 : tensor<1x2x4x4xf32> -> tensor<1x2x4x4x1xf32>
  %y = tg.concat %u1, %u2 axis = 4 : (tensor<1x2x4x4x1xf32>, tensor<1x2x4x4x1xf32>) -> tensor<1x2x4x4x2xf32>
  return %y : tensor<1x2x4x4x2xf32>
}
