// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff

// Tests that training mode needs a scalar loss as the first result.
// expected-error @below {{@forward must return a scalar float loss first (run tailor-add-loss), or differentiate with cotangents}}
func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %t = tg.tanh %x : tensor<2x3xf32>
  return %t : tensor<2x3xf32>
}

// -----

// Tests that a gradient the rules cannot give is an error naming the op.
tg.param @c : tensor<4x8xf32> trainable init <"zeros", 0.0 : f64>
func.func @forward(%x: tensor<1x1x4x8xf32>, %s: tensor<4x8xf32>) -> tensor<f32> {
  %c = tg.param_ref @c : tensor<4x8xf32>
  // expected-error @below {{cannot differentiate tg.rope with respect to its cos/sin tables}}
  %r = tg.rope %x, %c, %s : (tensor<1x1x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<1x1x4x8xf32>
  %l = tg.reduce_sum %r axes = [0, 1, 2, 3] : tensor<1x1x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an attention bias on the trainable path is an error: the
// attention kernels do not compute its gradient.
tg.param @bias : tensor<1x1x4x4xf32> trainable init <"zeros", 0.0 : f64>
func.func @forward(%x: tensor<1x2x4x8xf32>) -> tensor<f32> {
  %b = tg.param_ref @bias : tensor<1x1x4x4xf32>
  // expected-error @below {{cannot differentiate tg.attention with respect to its additive bias (no kernel computes its gradient)}}
  %y = tg.attention %x, %x, %x bias %b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32>
  %l = tg.reduce_sum %y axes = [0, 1, 2, 3] : tensor<1x2x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a scatter whose reduction has no gradient rule is an error
// naming the op, not a silently cut gradient.
tg.param @c : tensor<5x3xf32> trainable init <"zeros", 0.0 : f64>
func.func @forward(%i: tensor<4x1xi64>, %u: tensor<4x3xf32>) -> tensor<f32> {
  %c = tg.param_ref @c : tensor<5x3xf32>
  // expected-error @below {{cannot differentiate tg.scatter_nd: only scatters with reduction none or add have a gradient rule}}
  %s = tg.scatter_nd %c, %i, %u {reduction = #tg.scatter_reduction<max>} : (tensor<5x3xf32>, tensor<4x1xi64>, tensor<4x3xf32>) -> tensor<5x3xf32>
  %l = tg.reduce_sum %s axes = [0, 1] : tensor<5x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a float mod's divisor has no gradient rule: an error naming it.
tg.param @c : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %c = tg.param_ref @c : tensor<4xf32>
  // expected-error @below {{cannot differentiate tg.mod: there is no gradient rule for its divisor}}
  %m = tg.mod %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = tg.reduce_sum %m axes = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
