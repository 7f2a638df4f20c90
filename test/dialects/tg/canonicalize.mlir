// RUN: tailor-opt %s --split-input-file --canonicalize | FileCheck %s

// Tests that a double negation folds away.
// CHECK-LABEL: func.func @neg_neg
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NOT: tg.neg
// CHECK: return %[[X]]
func.func @neg_neg(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tg.neg %x : tensor<4xf32>
  %1 = tg.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Tests that a cast to the same type folds away.
// CHECK-LABEL: func.func @noop_cast
// CHECK-SAME: (%[[X:.+]]: tensor<4xbf16>)
// CHECK-NOT: tg.cast
// CHECK: return %[[X]]
func.func @noop_cast(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = tg.cast %x : tensor<4xbf16> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// Tests that a round-trip through two casts is kept (it rounds).
// CHECK-LABEL: func.func @rounding_casts
// CHECK: tg.cast
// CHECK: tg.cast
func.func @rounding_casts(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tg.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %1 = tg.cast %0 : tensor<4xbf16> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Tests that chained reshapes collapse into one and identity reshapes vanish.
// CHECK-LABEL: func.func @reshapes
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[R:.+]] = tg.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK-NOT: tg.reshape
// CHECK: return %[[R]], %[[X]]
func.func @reshapes(%x: tensor<2x3x4xf32>) -> (tensor<24xf32>, tensor<2x3x4xf32>) {
  %0 = tg.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = tg.reshape %0 : tensor<6x4xf32> -> tensor<24xf32>
  %2 = tg.reshape %x : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %1, %2 : tensor<24xf32>, tensor<2x3x4xf32>
}

// -----

// Tests that transposes compose, and cancel when they compose to identity.
// CHECK-LABEL: func.func @transposes
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[T:.+]] = tg.transpose %[[X]] permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NOT: tg.transpose
// CHECK: return %[[T]], %[[X]]
func.func @transposes(%x: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = tg.transpose %x permutation = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = tg.transpose %0 permutation = [2, 1, 0] : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  %2 = tg.transpose %x permutation = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %3 = tg.transpose %2 permutation = [0, 2, 1] : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  return %1, %3 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// Tests that whole-tensor slices and single-input concats fold away.
// CHECK-LABEL: func.func @identity_data_movement
// CHECK-SAME: (%[[X:.+]]: tensor<2x6xf32>)
// CHECK-NOT: tg.slice
// CHECK-NOT: tg.concat
// CHECK: return %[[X]], %[[X]]
func.func @identity_data_movement(%x: tensor<2x6xf32>) -> (tensor<2x6xf32>, tensor<2x6xf32>) {
  %0 = tg.slice %x starts = [0, 0] ends = [2, 6] steps = [1, 1] : tensor<2x6xf32> -> tensor<2x6xf32>
  %1 = tg.concat %x axis = 0 : (tensor<2x6xf32>) -> tensor<2x6xf32>
  return %0, %1 : tensor<2x6xf32>, tensor<2x6xf32>
}

// -----

// Tests that a real slice is kept.
// CHECK-LABEL: func.func @real_slice
// CHECK: tg.slice
func.func @real_slice(%x: tensor<2x6xf32>) -> tensor<2x3xf32> {
  %0 = tg.slice %x starts = [0, 0] ends = [2, 6] steps = [1, 2] : tensor<2x6xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
