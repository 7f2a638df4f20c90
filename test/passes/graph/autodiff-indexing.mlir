// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff="cotangents=true wrt-inputs=true" | FileCheck %s

// Tests that gather_elements' data gradient scatter-adds the cotangent into
// zeros at the same indices.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[I:[^:]+]]: tensor<2x4xi64> {tg.name = "i"}, %[[DZ:[^:]+]]: tensor<2x4xf32> {tg.name = "grad.z"}
// CHECK: %[[ZERO:.+]] = tg.broadcast %{{.+}} : tensor<f32> -> tensor<3x4xf32>
// CHECK: %[[DX:.+]] = tg.scatter_elements %[[ZERO]], %[[I]], %[[DZ]] axis = 1 {reduction = #tg.scatter_reduction<add>}
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}, %i: tensor<2x4xi64> {tg.name = "i"}) -> (tensor<2x4xf32> {tg.name = "z"}) {
  %g = tg.gather_elements %x, %i axis = 1 : (tensor<3x4xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

// Tests that a batched gather_nd's gradient is a batched scatter_nd add.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[I:[^:]+]]: tensor<2x4x1xi64> {tg.name = "i"}, %[[DZ:[^:]+]]: tensor<2x4x3xf32> {tg.name = "grad.z"}
// CHECK: %[[ZERO:.+]] = tg.broadcast %{{.+}} : tensor<f32> -> tensor<2x5x3xf32>
// CHECK: %[[DX:.+]] = tg.scatter_nd %[[ZERO]], %[[I]], %[[DZ]] {batch_dims = 1 : i64, reduction = #tg.scatter_reduction<add>}
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<2x5x3xf32> {tg.name = "x"}, %i: tensor<2x4x1xi64> {tg.name = "i"}) -> (tensor<2x4x3xf32> {tg.name = "z"}) {
  %g = tg.gather_nd %x, %i {batch_dims = 1 : i64} : (tensor<2x5x3xf32>, tensor<2x4x1xi64>) -> tensor<2x4x3xf32>
  return %g : tensor<2x4x3xf32>
}

// -----

// Tests that a scatter (none) masks the overwritten data elements and reads
// the updates' gradient back with a gather.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[I:[^:]+]]: tensor<2x4xi64> {tg.name = "i"}, %{{[^:]+}}: tensor<2x4xf32> {tg.name = "u"}, %[[DZ:[^:]+]]: tensor<3x4xf32> {tg.name = "grad.z"}
// CHECK-DAG: %[[ZERO:.+]] = tg.broadcast %{{.+}} : tensor<f32> -> tensor<2x4xf32>
// CHECK-DAG: %[[DX:.+]] = tg.scatter_elements %[[DZ]], %[[I]], %[[ZERO]] axis = 0 :
// CHECK-DAG: %[[DU:.+]] = tg.gather_elements %[[DZ]], %[[I]] axis = 0 :
// CHECK: return %{{.+}}, %[[DX]], %[[DU]]
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}, %i: tensor<2x4xi64> {tg.name = "i"}, %u: tensor<2x4xf32> {tg.name = "u"}) -> (tensor<3x4xf32> {tg.name = "z"}) {
  %s = tg.scatter_elements %x, %i, %u axis = 0 : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %s : tensor<3x4xf32>
}

// -----

// Tests that a scatter_nd add passes the data's cotangent through and
// gathers the updates'.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[I:[^:]+]]: tensor<4x1xi64> {tg.name = "i"}, %{{[^:]+}}: tensor<4x3xf32> {tg.name = "u"}, %[[DZ:[^:]+]]: tensor<5x3xf32> {tg.name = "grad.z"}
// CHECK: %[[DU:.+]] = tg.gather_nd %[[DZ]], %[[I]] :
// CHECK: return %{{.+}}, %[[DZ]], %[[DU]]
func.func @forward(%x: tensor<5x3xf32> {tg.name = "x"}, %i: tensor<4x1xi64> {tg.name = "i"}, %u: tensor<4x3xf32> {tg.name = "u"}) -> (tensor<5x3xf32> {tg.name = "z"}) {
  %s = tg.scatter_nd %x, %i, %u {reduction = #tg.scatter_reduction<add>} : (tensor<5x3xf32>, tensor<4x1xi64>, tensor<4x3xf32>) -> tensor<5x3xf32>
  return %s : tensor<5x3xf32>
}

// -----

// Tests that cumsum's gradient is the cumsum in the other direction, with
// the same exclusivity.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[DZ:[^:]+]]: tensor<2x8xf32> {tg.name = "grad.z"}
// CHECK: %[[DX:.+]] = tg.cumsum %[[DZ]] axis = 1 exclusive : tensor<2x8xf32>
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<2x8xf32> {tg.name = "x"}) -> (tensor<2x8xf32> {tg.name = "z"}) {
  %c = tg.cumsum %x axis = 1 exclusive reverse : tensor<2x8xf32>
  return %c : tensor<2x8xf32>
}

// -----

// Tests that a cumsum along a run-time axis differentiates along the same
// run-time axis.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[A:[^:]+]]: tensor<i64> {tg.name = "a"}, %[[DZ:[^:]+]]: tensor<2x8xf32> {tg.name = "grad.z"}
// CHECK: %[[DX:.+]] = tg.cumsum %[[DZ]], %[[A]] : tensor<i64> reverse : tensor<2x8xf32>
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<2x8xf32> {tg.name = "x"}, %a: tensor<i64> {tg.name = "a"}) -> (tensor<2x8xf32> {tg.name = "z"}) {
  %c = tg.cumsum %x, %a : tensor<i64> : tensor<2x8xf32>
  return %c : tensor<2x8xf32>
}

// -----

// Tests that a float mod passes the cotangent to its dividend (summed back
// to its shape); its divisor here is a constant.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[DZ:[^:]+]]: tensor<2x4xf32> {tg.name = "grad.z"}
// CHECK: %[[SUM:.+]] = tg.reduce_sum %[[DZ]] axes = [0] keep_dims
// CHECK: %[[DX:.+]] = tg.reshape %[[SUM]] : tensor<1x4xf32> -> tensor<4xf32>
// CHECK: return %{{.+}}, %[[DX]]
func.func @forward(%x: tensor<4xf32> {tg.name = "x"}) -> (tensor<2x4xf32> {tg.name = "z"}) {
  %c = arith.constant dense<[[1.5, 2.0, -3.0, 0.5], [4.0, -1.0, 2.5, 3.0]]> : tensor<2x4xf32>
  %m = tg.mod %x, %c fmod : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %m : tensor<2x4xf32>
}

// -----

// Tests that sign's gradient is zero: nothing flows back through it.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<2x4xf32> {tg.name = "z"}, tensor<2x4xf32> {tg.name = "grad.y"})
// CHECK: %[[S:.+]] = tg.sign
// CHECK-NOT: tg.sign
// CHECK: %[[ZERO:.+]] = tg.broadcast %{{.+}} : tensor<f32> -> tensor<2x4xf32>
// CHECK: return %[[S]], %[[ZERO]]
func.func @forward(%y: tensor<2x4xf32> {tg.name = "y"}) -> (tensor<2x4xf32> {tg.name = "z"}) {
  %s = tg.sign %y : tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}
