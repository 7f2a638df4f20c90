// RUN: tailor-opt %s --tailor-autodiff="cotangents=true wrt-inputs=true" | FileCheck %s --check-prefix=VJP

// Tests the vector-Jacobian product mode: the cotangent of z is an input,
// the gradients of both inputs are outputs, and the broadcast operand's
// gradient is summed back to its shape.
// VJP-LABEL: func.func @forward
// VJP-SAME: %[[X:[^:]+]]: tensor<2x3xf32> {tg.name = "x"}, %[[Y:[^:]+]]: tensor<3xf32> {tg.name = "y"}, %[[DZ:[^:]+]]: tensor<2x3xf32> {tg.name = "grad.z"}
// VJP-SAME: -> (tensor<2x3xf32> {tg.name = "z"}, tensor<2x3xf32> {tg.name = "grad.x"}, tensor<3xf32> {tg.name = "grad.y"})
// VJP: %[[T:.+]] = tg.tanh
// VJP: %[[T2:.+]] = tg.mul %[[T]], %[[T]]
// VJP: %[[D:.+]] = tg.mul %[[DZ]], %{{.+}}
// VJP: %[[DX:.+]] = tg.mul %[[D]], %[[Y]]
// VJP: %[[DYF:.+]] = tg.mul %[[D]], %[[X]]
// VJP: %[[DYS:.+]] = tg.reduce_sum %[[DYF]] axes = [0] keep_dims
// VJP: %[[DY:.+]] = tg.reshape %[[DYS]] : tensor<1x3xf32> -> tensor<3xf32>
// VJP: return %[[T]], %[[DX]], %[[DY]]
func.func @forward(%x: tensor<2x3xf32> {tg.name = "x"}, %y: tensor<3xf32> {tg.name = "y"}) -> (tensor<2x3xf32> {tg.name = "z"}) {
  %m = tg.mul %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %t = tg.tanh %m : tensor<2x3xf32>
  return %t : tensor<2x3xf32>
}
