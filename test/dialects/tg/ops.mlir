// RUN: tailor-opt %s --split-input-file | tailor-opt --split-input-file | FileCheck %s
// RUN: tailor-opt %s --split-input-file --mlir-print-op-generic | tailor-opt --split-input-file | FileCheck %s

// Tests that parameters round-trip with shape, trainability and byte location.
// CHECK-LABEL: tg.param @model.embed_tokens.weight : tensor<128x64xf32> at #tg.external<"model.onnx.data", offset = 0, length = 32768>
// CHECK: tg.param @lm_head.weight : tensor<128x64xbf16> at #tg.initializer<"model.onnx", "lm_head.weight">
// CHECK: tg.param @"onnx::MatMul_7" : tensor<64x64xf32> trainable
// CHECK-LABEL: func.func @param_refs
// CHECK: %[[W:.+]] = tg.param_ref @model.embed_tokens.weight : tensor<128x64xf32>
// CHECK: return %[[W]]
tg.param @model.embed_tokens.weight : tensor<128x64xf32> at #tg.external<"model.onnx.data", offset = 0, length = 32768>
tg.param @lm_head.weight : tensor<128x64xbf16> at #tg.initializer<"model.onnx", "lm_head.weight">
tg.param @"onnx::MatMul_7" : tensor<64x64xf32> trainable
func.func @param_refs() -> tensor<128x64xf32> {
  %0 = tg.param_ref @model.embed_tokens.weight : tensor<128x64xf32>
  return %0 : tensor<128x64xf32>
}

// -----

// Tests that matmul and linear (with and without bias) round-trip.
// CHECK-LABEL: func.func @linear_algebra
// CHECK-SAME: (%[[A:.+]]: tensor<2x8x16xf32>, %[[B:.+]]: tensor<16x4xf32>, %[[W:.+]]: tensor<32x16xf32>, %[[BIAS:.+]]: tensor<32xf32>)
// CHECK: tg.matmul %[[A]], %[[B]] : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
// CHECK: tg.linear %[[A]], %[[W]] : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
// CHECK: tg.linear %[[A]], %[[W]], %[[BIAS]] {tg.layer = 3 : i64, tg.module = "model.layers.3.mlp.up_proj"} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
func.func @linear_algebra(%a: tensor<2x8x16xf32>, %b: tensor<16x4xf32>, %w: tensor<32x16xf32>, %bias: tensor<32xf32>) {
  %0 = tg.matmul %a, %b : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  %1 = tg.linear %a, %w : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %2 = tg.linear %a, %w, %bias {tg.layer = 3 : i64, tg.module = "model.layers.3.mlp.up_proj"} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

// Tests that every unary elementwise op round-trips.
// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xbf16>)
// CHECK: tg.neg %[[X]] : tensor<4x8xbf16>
// CHECK: tg.abs %[[X]]
// CHECK: tg.exp %[[X]]
// CHECK: tg.log %[[X]]
// CHECK: tg.sqrt %[[X]]
// CHECK: tg.rsqrt %[[X]]
// CHECK: tg.reciprocal %[[X]]
// CHECK: tg.tanh %[[X]]
// CHECK: tg.sigmoid %[[X]]
// CHECK: tg.silu %[[X]]
// CHECK: tg.relu %[[X]]
// CHECK: tg.erf %[[X]]
// CHECK: tg.sin %[[X]]
// CHECK: tg.cos %[[X]]
// CHECK: tg.gelu %[[X]] : tensor<4x8xbf16>
// CHECK: tg.gelu %[[X]] {approximation = #tg.gelu_approximation<tanh>} : tensor<4x8xbf16>
func.func @unary(%x: tensor<4x8xbf16>) {
  %0 = tg.neg %x : tensor<4x8xbf16>
  %1 = tg.abs %x : tensor<4x8xbf16>
  %2 = tg.exp %x : tensor<4x8xbf16>
  %3 = tg.log %x : tensor<4x8xbf16>
  %4 = tg.sqrt %x : tensor<4x8xbf16>
  %5 = tg.rsqrt %x : tensor<4x8xbf16>
  %6 = tg.reciprocal %x : tensor<4x8xbf16>
  %7 = tg.tanh %x : tensor<4x8xbf16>
  %8 = tg.sigmoid %x : tensor<4x8xbf16>
  %9 = tg.silu %x : tensor<4x8xbf16>
  %10 = tg.relu %x : tensor<4x8xbf16>
  %11 = tg.erf %x : tensor<4x8xbf16>
  %12 = tg.sin %x : tensor<4x8xbf16>
  %13 = tg.cos %x : tensor<4x8xbf16>
  %14 = tg.gelu %x : tensor<4x8xbf16>
  %15 = tg.gelu %x {approximation = #tg.gelu_approximation<tanh>} : tensor<4x8xbf16>
  return
}

// -----

// Tests that broadcasting binary ops, comparisons, select and cast round-trip.
// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[A:.+]]: tensor<2x1x8xf32>, %[[B:.+]]: tensor<3x1xf32>, %[[I:.+]]: tensor<4xi64>)
// CHECK: tg.add %[[A]], %[[B]] : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
// CHECK: tg.sub %[[A]], %[[B]]
// CHECK: tg.mul %[[A]], %[[B]]
// CHECK: tg.div %[[A]], %[[B]]
// CHECK: tg.pow %[[A]], %[[B]]
// CHECK: tg.max %[[A]], %[[B]]
// CHECK: tg.min %[[A]], %[[B]]
// CHECK: %[[EQ:.+]] = tg.eq %[[A]], %[[B]] : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xi1>
// CHECK: tg.lt %[[A]], %[[B]]
// CHECK: tg.gt %[[I]], %[[I]] : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
// CHECK: tg.select %[[EQ]], %[[A]], %[[B]] : (tensor<2x3x8xi1>, tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
// CHECK: tg.cast %[[A]] : tensor<2x1x8xf32> -> tensor<2x1x8xbf16>
func.func @binary(%a: tensor<2x1x8xf32>, %b: tensor<3x1xf32>, %i: tensor<4xi64>) {
  %0 = tg.add %a, %b : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
  %1 = tg.sub %a, %b : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
  %2 = tg.mul %a, %b : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
  %3 = tg.div %a, %b : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
  %4 = tg.pow %a, %b : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
  %5 = tg.max %a, %b : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
  %6 = tg.min %a, %b : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
  %7 = tg.eq %a, %b : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xi1>
  %8 = tg.lt %a, %b : (tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xi1>
  %9 = tg.gt %i, %i : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  %10 = tg.select %7, %a, %b : (tensor<2x3x8xi1>, tensor<2x1x8xf32>, tensor<3x1xf32>) -> tensor<2x3x8xf32>
  %11 = tg.cast %a : tensor<2x1x8xf32> -> tensor<2x1x8xbf16>
  return
}

// -----

// Tests that reductions, softmax and the normalizations round-trip.
// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x8xf32>, %[[W:.+]]: tensor<8xf32>)
// CHECK: tg.reduce_sum %[[X]] axes = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
// CHECK: tg.reduce_mean %[[X]] axes = [2] keep_dims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
// CHECK: tg.reduce_max %[[X]] axes = [0, 2] : tensor<2x4x8xf32> -> tensor<4xf32>
// CHECK: tg.softmax %[[X]] axis = 2 : tensor<2x4x8xf32>
// CHECK: tg.rms_norm %[[X]], %[[W]] {epsilon = 1.000000e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK: tg.rms_norm %[[X]], %[[W]] : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK: tg.layer_norm %[[X]], %[[W]], %[[W]] : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK: tg.layer_norm %[[X]], %[[W]] {epsilon = 3.125000e-02 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
func.func @reductions(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) {
  %0 = tg.reduce_sum %x axes = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
  %1 = tg.reduce_mean %x axes = [2] keep_dims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %2 = tg.reduce_max %x axes = [0, 2] : tensor<2x4x8xf32> -> tensor<4xf32>
  %3 = tg.softmax %x axis = 2 : tensor<2x4x8xf32>
  %4 = tg.rms_norm %x, %w {epsilon = 1.0e-5 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %5 = tg.rms_norm %x, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %6 = tg.layer_norm %x, %w, %w : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %7 = tg.layer_norm %x, %w {epsilon = 3.125e-2 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Tests that rope, grouped-query causal attention, embedding and
// cross-entropy round-trip.
// CHECK-LABEL: func.func @transformer
// CHECK-SAME: (%[[Q:.+]]: tensor<1x8x16x32xf32>, %[[K:.+]]: tensor<1x2x16x32xf32>, %[[COS:.+]]: tensor<16x32xf32>, %[[TABLE:.+]]: tensor<100x32xf32>, %[[IDS:.+]]: tensor<1x16xi64>, %[[LOGITS:.+]]: tensor<16x100xf32>, %[[LABELS:.+]]: tensor<16xi64>)
// CHECK: tg.rope %[[Q]], %[[COS]], %[[COS]] : (tensor<1x8x16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<1x8x16x32xf32>
// CHECK: tg.rope %[[K]], %[[COS]], %[[COS]] {interleaved}
// CHECK: tg.attention %[[Q]], %[[K]], %[[K]] {causal} : (tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> tensor<1x8x16x32xf32>
// CHECK: tg.attention %[[Q]], %[[K]], %[[K]] {scale = 1.250000e-01 : f64}
// CHECK: tg.embedding %[[TABLE]], %[[IDS]] : (tensor<100x32xf32>, tensor<1x16xi64>) -> tensor<1x16x32xf32>
// CHECK: tg.cross_entropy %[[LOGITS]], %[[LABELS]] : (tensor<16x100xf32>, tensor<16xi64>) -> tensor<f32>
// CHECK: tg.cross_entropy %[[LOGITS]], %[[LABELS]] {ignore_index = 0 : i64, reduction = #tg.loss_reduction<none>} : (tensor<16x100xf32>, tensor<16xi64>) -> tensor<16xf32>
func.func @transformer(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x32xf32>, %cos: tensor<16x32xf32>, %table: tensor<100x32xf32>, %ids: tensor<1x16xi64>, %logits: tensor<16x100xf32>, %labels: tensor<16xi64>) {
  %0 = tg.rope %q, %cos, %cos : (tensor<1x8x16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<1x8x16x32xf32>
  %1 = tg.rope %k, %cos, %cos {interleaved} : (tensor<1x2x16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<1x2x16x32xf32>
  %2 = tg.attention %q, %k, %k {causal} : (tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> tensor<1x8x16x32xf32>
  %3 = tg.attention %q, %k, %k {scale = 0.125 : f64} : (tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> tensor<1x8x16x32xf32>
  %4 = tg.embedding %table, %ids : (tensor<100x32xf32>, tensor<1x16xi64>) -> tensor<1x16x32xf32>
  %5 = tg.cross_entropy %logits, %labels : (tensor<16x100xf32>, tensor<16xi64>) -> tensor<f32>
  %6 = tg.cross_entropy %logits, %labels {ignore_index = 0 : i64, reduction = #tg.loss_reduction<none>} : (tensor<16x100xf32>, tensor<16xi64>) -> tensor<16xf32>
  return
}

// -----

// Tests that attention's ALiBi slopes and additive bias operand (broadcast
// over heads and queries) round-trip, on the forward and gradient ops.
// CHECK-LABEL: func.func @attention_biases
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x8x16xf32>, %[[B:.+]]: tensor<2x1x1x8xf32>)
// CHECK: %[[Y:.+]] = tg.attention %[[Q]], %[[Q]], %[[Q]] bias %[[B]] {alibi_slopes = array<f64: 2.500000e-01, 6.250000e-02, 1.562500e-02, 3.906250e-03>, causal} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x16xf32>
// CHECK: tg.attention_grad %[[Y]], %[[Q]], %[[Q]], %[[Q]] bias %[[B]] {causal}
// CHECK: tg.attention_grad %[[Y]], %[[Q]], %[[Q]], %[[Q]] {alibi_slopes = array<f64: 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00>} :
func.func @attention_biases(%q: tensor<2x4x8x16xf32>, %b: tensor<2x1x1x8xf32>) {
  %y = tg.attention %q, %q, %q bias %b {causal, alibi_slopes = array<f64: 0.25, 0.0625, 0.015625, 0.00390625>} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x16xf32>
  %g:3 = tg.attention_grad %y, %q, %q, %q bias %b {causal} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x1x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
  %h:3 = tg.attention_grad %y, %q, %q, %q {alibi_slopes = array<f64: 1.0, 1.0, 1.0, 1.0>} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
  return
}

// -----

// Tests that the data-movement ops round-trip.
// CHECK-LABEL: func.func @data_movement
// CHECK-SAME: (%[[X:.+]]: tensor<2x6x8xf32>)
// CHECK: tg.reshape %[[X]] : tensor<2x6x8xf32> -> tensor<12x8xf32>
// CHECK: tg.transpose %[[X]] permutation = [0, 2, 1] : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
// CHECK: tg.slice %[[X]] starts = [0, 1, 0] ends = [2, 6, 8] steps = [1, 2, 4] : tensor<2x6x8xf32> -> tensor<2x3x2xf32>
// CHECK: tg.concat %[[X]], %[[X]] axis = 1 : (tensor<2x6x8xf32>, tensor<2x6x8xf32>) -> tensor<2x12x8xf32>
// CHECK: tg.split %[[X]] axis = 2 sizes = [2, 6] : (tensor<2x6x8xf32>) -> (tensor<2x6x2xf32>, tensor<2x6x6xf32>)
func.func @data_movement(%x: tensor<2x6x8xf32>) {
  %0 = tg.reshape %x : tensor<2x6x8xf32> -> tensor<12x8xf32>
  %1 = tg.transpose %x permutation = [0, 2, 1] : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %2 = tg.slice %x starts = [0, 1, 0] ends = [2, 6, 8] steps = [1, 2, 4] : tensor<2x6x8xf32> -> tensor<2x3x2xf32>
  %3 = tg.concat %x, %x axis = 1 : (tensor<2x6x8xf32>, tensor<2x6x8xf32>) -> tensor<2x12x8xf32>
  %4:2 = tg.split %x axis = 2 sizes = [2, 6] : (tensor<2x6x8xf32>) -> (tensor<2x6x2xf32>, tensor<2x6x6xf32>)
  return
}

// -----

// Tests that broadcast and is_nan round-trip.
// CHECK-LABEL: func.func @broadcast_is_nan
func.func @broadcast_is_nan(%x: tensor<2x1x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x4xi1>) {
  // CHECK: tg.broadcast %{{.+}} : tensor<2x1x4xf32> -> tensor<2x3x4xf32>
  %0 = tg.broadcast %x : tensor<2x1x4xf32> -> tensor<2x3x4xf32>
  // CHECK: tg.is_nan %{{.+}} : tensor<2x1x4xf32> -> tensor<2x1x4xi1>
  %1 = tg.is_nan %x : tensor<2x1x4xf32> -> tensor<2x1x4xi1>
  return %0, %1 : tensor<2x3x4xf32>, tensor<2x1x4xi1>
}

// -----

// Tests that band_mask round-trips for an additive f32 mask and an i1
// keep-mask.
// CHECK-LABEL: func.func @band_mask
func.func @band_mask() -> (tensor<1x1x8x8xf32>, tensor<8x8xi1>) {
  // CHECK: tg.band_mask {inside = 0.000000e+00 : f64, lower = -7 : i64, outside = -3.4028234663852886E+38 : f64, upper = 0 : i64} : tensor<1x1x8x8xf32>
  %0 = tg.band_mask {inside = 0.0 : f64, lower = -7 : i64, outside = -3.4028234663852886E+38 : f64, upper = 0 : i64} : tensor<1x1x8x8xf32>
  // CHECK: tg.band_mask {inside = 1.000000e+00 : f64, lower = -3 : i64, outside = 0.000000e+00 : f64, upper = 0 : i64} : tensor<8x8xi1>
  %1 = tg.band_mask {inside = 1.0 : f64, lower = -3 : i64, outside = 0.0 : f64, upper = 0 : i64} : tensor<8x8xi1>
  return %0, %1 : tensor<1x1x8x8xf32>, tensor<8x8xi1>
}

// -----

// Tests that the element gathers and scatters round-trip, with the default
// reduction elided and others printed.
// CHECK-LABEL: func.func @element_gather_scatter
// CHECK-SAME: (%[[D:.+]]: tensor<3x4xf32>, %[[I:.+]]: tensor<2x4xi64>, %[[U:.+]]: tensor<2x4xf32>)
func.func @element_gather_scatter(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  // CHECK: tg.gather_elements %[[D]], %[[I]] axis = 0 : (tensor<3x4xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
  %0 = tg.gather_elements %d, %i axis = 0 : (tensor<3x4xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
  // CHECK: tg.scatter_elements %[[D]], %[[I]], %[[U]] axis = 0 : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  %1 = tg.scatter_elements %d, %i, %u axis = 0 : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  // CHECK: tg.scatter_elements %[[D]], %[[I]], %[[U]] axis = 0 {reduction = #tg.scatter_reduction<max>} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  %2 = tg.scatter_elements %d, %i, %u axis = 0 {reduction = #tg.scatter_reduction<max>} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0, %1, %2 : tensor<2x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Tests that gather_nd (with batch dims) and scatter_nd round-trip.
// CHECK-LABEL: func.func @nd_gather_scatter
// CHECK-SAME: (%[[D:.+]]: tensor<2x5x3xf32>, %[[I:.+]]: tensor<2x4x1xi32>, %[[J:.+]]: tensor<4x2xi64>, %[[U:.+]]: tensor<4x3xf32>)
func.func @nd_gather_scatter(%d: tensor<2x5x3xf32>, %i: tensor<2x4x1xi32>, %j: tensor<4x2xi64>, %u: tensor<4x3xf32>) -> (tensor<2x4x3xf32>, tensor<2x5x3xf32>) {
  // CHECK: tg.gather_nd %[[D]], %[[I]] {batch_dims = 1 : i64} : (tensor<2x5x3xf32>, tensor<2x4x1xi32>) -> tensor<2x4x3xf32>
  %0 = tg.gather_nd %d, %i {batch_dims = 1 : i64} : (tensor<2x5x3xf32>, tensor<2x4x1xi32>) -> tensor<2x4x3xf32>
  // CHECK: tg.scatter_nd %[[D]], %[[J]], %[[U]] {reduction = #tg.scatter_reduction<add>} : (tensor<2x5x3xf32>, tensor<4x2xi64>, tensor<4x3xf32>) -> tensor<2x5x3xf32>
  %1 = tg.scatter_nd %d, %j, %u {reduction = #tg.scatter_reduction<add>} : (tensor<2x5x3xf32>, tensor<4x2xi64>, tensor<4x3xf32>) -> tensor<2x5x3xf32>
  return %0, %1 : tensor<2x4x3xf32>, tensor<2x5x3xf32>
}

// -----

// Tests that cumsum (axis attribute or run-time axis), mod and sign
// round-trip with their flags.
// CHECK-LABEL: func.func @cumsum_mod_sign
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xi64>, %[[Y:.+]]: tensor<8xi64>, %[[F:.+]]: tensor<2x8xf32>)
func.func @cumsum_mod_sign(%x: tensor<2x8xi64>, %y: tensor<8xi64>, %f: tensor<2x8xf32>) -> (tensor<2x8xi64>, tensor<2x8xf32>, tensor<2x8xi64>, tensor<2x8xf32>, tensor<2x8xi64>, tensor<2x8xf32>) {
  // CHECK: tg.cumsum %[[X]] axis = 1 : tensor<2x8xi64>
  %0 = tg.cumsum %x axis = 1 : tensor<2x8xi64>
  // CHECK: tg.cumsum %[[F]] axis = 0 exclusive reverse : tensor<2x8xf32>
  %1 = tg.cumsum %f axis = 0 exclusive reverse : tensor<2x8xf32>
  // CHECK: tg.cumsum %[[F]], %{{.+}} : tensor<i64> reverse : tensor<2x8xf32>
  %a = arith.constant dense<-1> : tensor<i64>
  %5 = tg.cumsum %f, %a : tensor<i64> reverse : tensor<2x8xf32>
  // CHECK: tg.mod %[[X]], %[[Y]] : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %2 = tg.mod %x, %y : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  // CHECK: tg.mod %[[F]], %[[F]] fmod : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %3 = tg.mod %f, %f fmod : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: tg.sign %[[X]] : tensor<2x8xi64>
  %4 = tg.sign %x : tensor<2x8xi64>
  return %0, %1, %2, %3, %4, %5 : tensor<2x8xi64>, tensor<2x8xf32>, tensor<2x8xi64>, tensor<2x8xf32>, tensor<2x8xi64>, tensor<2x8xf32>
}

// -----

// Tests that attention and its gradient round-trip with document-masking
// positions, alone and after a bias.
// CHECK-LABEL: func.func @packed_attention
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x8x16xf32>, %[[K:.+]]: tensor<2x2x8x16xf32>, %[[P:.+]]: tensor<2x8xi64>, %[[B:.+]]: tensor<1x1x1x8xf32>)
// CHECK: %[[Y:.+]] = tg.attention %[[Q]], %[[K]], %[[K]] positions %[[P]] {causal} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x8xi64>) -> tensor<2x4x8x16xf32>
// CHECK: tg.attention %[[Q]], %[[K]], %[[K]] bias %[[B]] positions %[[P]] {causal}
// CHECK: tg.attention_grad %[[Y]], %[[Q]], %[[K]], %[[K]] positions %[[P]] {causal, window = 4 : i64}
func.func @packed_attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %p: tensor<2x8xi64>, %b: tensor<1x1x1x8xf32>) {
  %y = tg.attention %q, %k, %k positions %p {causal} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x8xi64>) -> tensor<2x4x8x16xf32>
  %z = tg.attention %q, %k, %k bias %b positions %p {causal} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<1x1x1x8xf32>, tensor<2x8xi64>) -> tensor<2x4x8x16xf32>
  %dq, %dk, %dv = tg.attention_grad %y, %q, %k, %k positions %p {causal, window = 4 : i64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x8xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  return
}

// -----

// Tests that a ZeRO bucket, its chunk states, the sharded update and the
// collectives round-trip.
// CHECK: tg.bucket @zero.b0 [@w, @v] offsets [0, 64] size 128 over world shards 2 : f32
// CHECK: tg.state @zero.b0.grad : tensor<64xf32> of @zero.b0 grad
// CHECK-LABEL: func.func @zero_step
// CHECK: %[[CHUNK:.+]] = tg.reduce_scatter %{{.+}} avg over world shards 2 : tensor<128xf32> -> tensor<64xf32>
// CHECK: %[[SUM:.+]] = tg.all_reduce %{{.+}} sum over world : tensor<f32>
// CHECK: tg.adamw_update @zero.b0 grad @zero.b0.grad moments(@zero.b0.exp_avg, @zero.b0.exp_avg_sq)
// CHECK: tg.all_gather_bucket @zero.b0
// CHECK: tg.zero_states [@w.grad]
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @v : tensor<8xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<4x4xf32> of @w grad
tg.bucket @zero.b0 [@w, @v] offsets [0, 64] size 128 over world shards 2 : f32
tg.state @zero.b0.grad : tensor<64xf32> of @zero.b0 grad
tg.state @zero.b0.exp_avg : tensor<64xf32> of @zero.b0 exp_avg
tg.state @zero.b0.exp_avg_sq : tensor<64xf32> of @zero.b0 exp_avg_sq
func.func @zero_step(%flat: tensor<128xf32>, %n: tensor<f32>, %step: tensor<i64>) {
  %chunk = tg.reduce_scatter %flat avg over world shards 2 : tensor<128xf32> -> tensor<64xf32>
  tg.accumulate %chunk into @zero.b0.grad : tensor<64xf32>
  %sum = tg.all_reduce %n sum over world : tensor<f32>
  tg.adamw_update @zero.b0 grad @zero.b0.grad moments(@zero.b0.exp_avg, @zero.b0.exp_avg_sq) lr %sum step %step scale %sum {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.all_gather_bucket @zero.b0
  tg.zero_states [@w.grad]
  return
}

// -----

// Tests that a pipeline stage's collectives over its data-parallel replicas
// and over one replica's stages round-trip.
// CHECK-LABEL: func.func @stage_step
// CHECK: tg.all_reduce_states [@w.grad] avg over replicas
// CHECK: tg.all_reduce %{{.+}} sum over stages : tensor<f32>
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<4x4xf32> of @w grad
func.func @stage_step(%n: tensor<f32>) -> tensor<f32> {
  tg.all_reduce_states [@w.grad] avg over replicas
  %sum = tg.all_reduce %n sum over stages : tensor<f32>
  return %sum : tensor<f32>
}

// -----

// Tests that gradient compression's state ops (PowerSGD) round-trip with
// their states, transposes and step ranges (ACP-SGD's with a period).
// CHECK-LABEL: func.func @powersgd_step
// CHECK: tg.add_error_feedback @w.grad from @w.powersgd_error {tg.steps = array<i64: 4, -1>}
// CHECK: tg.lowrank_init @w.powersgd_q {tg.steps = array<i64: 4, 4>}
// CHECK: tg.orthogonalize @w.powersgd_q {tg.steps = array<i64: 4, -1, 2>}
// CHECK: tg.lowrank_matmul @w.grad, @w.powersgd_q into @w.powersgd_p
// CHECK: tg.orthogonalize @w.powersgd_p {epsilon = 1.000000e-08 : f64}
// CHECK: tg.lowrank_matmul @w.grad transposed, @w.powersgd_p into @w.powersgd_q
// CHECK: tg.lowrank_matmul @w.powersgd_p, @w.powersgd_q transposed into @w.grad
// CHECK: tg.store_error_feedback @w.powersgd_error minus @w.grad
tg.param @w : tensor<16x8xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<16x8xf32> of @w grad
tg.state @w.powersgd_error : tensor<16x8xf32> of @w powersgd_error
tg.state @w.powersgd_p : tensor<16x1xf32> of @w powersgd_p
tg.state @w.powersgd_q : tensor<8x1xf32> of @w powersgd_q
func.func @powersgd_step(%step: tensor<i64>) {
  tg.add_error_feedback @w.grad from @w.powersgd_error {tg.steps = array<i64: 4, -1>}
  tg.lowrank_init @w.powersgd_q {tg.steps = array<i64: 4, 4>}
  tg.orthogonalize @w.powersgd_q {tg.steps = array<i64: 4, -1, 2>}
  tg.lowrank_matmul @w.grad, @w.powersgd_q into @w.powersgd_p
  tg.orthogonalize @w.powersgd_p {epsilon = 1.0e-8 : f64}
  tg.lowrank_matmul @w.grad transposed, @w.powersgd_p into @w.powersgd_q
  tg.lowrank_matmul @w.powersgd_p, @w.powersgd_q transposed into @w.grad
  tg.store_error_feedback @w.powersgd_error minus @w.grad
  return
}

// -----

// Tests that top-k's and sign-SGD's ops round-trip: the compressors over a
// bucket with and without residuals, the value all-gather, and the two
// averages into the bucket's gradients.
// CHECK-LABEL: func.func @sparse_step
// CHECK: %[[V:.+]], %[[I:.+]] = tg.topk_compress [@w.grad, @b.grad] residual [@w.powersgd_error, @b.powersgd_error] : tensor<3xf32>, tensor<3xi32>
// CHECK: %[[AV:.+]] = tg.all_gather %[[V]] over world : tensor<3xf32> -> tensor<6xf32>
// CHECK: %[[AI:.+]] = tg.all_gather %[[I]] over world : tensor<3xi32> -> tensor<6xi32>
// CHECK: tg.sparse_average %[[AV]], %[[AI]] into [@w.grad, @b.grad] scale 5.000000e-01 : tensor<6xf32>, tensor<6xi32>
// CHECK: %[[S:.+]], %[[C:.+]] = tg.sign_compress [@w.grad, @b.grad] : tensor<3xui8>, tensor<2xf32>
// CHECK: tg.sign_average %{{.+}}, %{{.+}} into [@w.grad, @b.grad] : tensor<6xui8>, tensor<4xf32>
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<4x4xf32> of @w grad
tg.state @b.grad : tensor<4xf32> of @b grad
tg.state @w.powersgd_error : tensor<4x4xf32> of @w powersgd_error
tg.state @b.powersgd_error : tensor<4xf32> of @b powersgd_error
func.func @sparse_step() {
  %v, %i = tg.topk_compress [@w.grad, @b.grad] residual [@w.powersgd_error, @b.powersgd_error] : tensor<3xf32>, tensor<3xi32>
  %av = tg.all_gather %v over world : tensor<3xf32> -> tensor<6xf32>
  %ai = tg.all_gather %i over world : tensor<3xi32> -> tensor<6xi32>
  tg.sparse_average %av, %ai into [@w.grad, @b.grad] scale 0.5 : tensor<6xf32>, tensor<6xi32>
  %s, %c = tg.sign_compress [@w.grad, @b.grad] : tensor<3xui8>, tensor<2xf32>
  %as = tg.all_gather %s over world : tensor<3xui8> -> tensor<6xui8>
  %ac = tg.all_gather %c over world : tensor<2xf32> -> tensor<4xf32>
  tg.sign_average %as, %ac into [@w.grad, @b.grad] : tensor<6xui8>, tensor<4xf32>
  return
}

// -----

// Tests that a decode step's KV cache states and their writes round-trip.
// CHECK: tg.state @attn.key_cache : tensor<1x2x8x4xf32> of @attn key_cache
// CHECK-LABEL: func.func @decode_step
// CHECK: tg.cache_write %{{.+}} into @attn.key_cache at %{{.+}} : tensor<1x2x1x4xf32>, tensor<i64>
// CHECK: tg.state_ref @attn.key_cache : tensor<1x2x8x4xf32>
tg.state @attn.key_cache : tensor<1x2x8x4xf32> of @attn key_cache
func.func @decode_step(%k: tensor<1x2x1x4xf32>, %position: tensor<i64>) -> tensor<1x2x8x4xf32> {
  tg.cache_write %k into @attn.key_cache at %position : tensor<1x2x1x4xf32>, tensor<i64>
  %cache = tg.state_ref @attn.key_cache : tensor<1x2x8x4xf32>
  return %cache : tensor<1x2x8x4xf32>
}

// -----

// Tests that a pipeline stage's sends, receives and input slots round-trip.
// CHECK: tg.state @pipeline.input.0 : tensor<2x3x4xf32> of @pipeline.input.0 pipeline_input
// CHECK-LABEL: func.func @stage_forward
// CHECK: %[[IN:.+]] = tg.recv from 0 : tensor<3x4xf32>
// CHECK: tg.slot_write %[[IN]] into @pipeline.input.0 at %{{.+}} : tensor<3x4xf32>, tensor<i64>
// CHECK: tg.slot_read @pipeline.input.0 at %{{.+}} : tensor<i64> -> tensor<3x4xf32>
// CHECK: tg.send %[[IN]] to 2 : tensor<3x4xf32>
tg.state @pipeline.input.0 : tensor<2x3x4xf32> of @pipeline.input.0 pipeline_input
func.func @stage_forward(%slot: tensor<i64>) -> tensor<3x4xf32> {
  %in = tg.recv from 0 : tensor<3x4xf32>
  tg.slot_write %in into @pipeline.input.0 at %slot : tensor<3x4xf32>, tensor<i64>
  %back = tg.slot_read @pipeline.input.0 at %slot : tensor<i64> -> tensor<3x4xf32>
  tg.send %in to 2 : tensor<3x4xf32>
  return %back : tensor<3x4xf32>
}

// -----

// Tests that ZeRO++'s quantized gradient reduce-scatter round-trips: the
// chunks encoded, exchanged and reduced.
// CHECK-LABEL: func.func @qgz
// CHECK: %[[Q:.+]] = tg.quantize_chunks %{{.+}} chunk 64 shards 2 : tensor<128xf32> -> tensor<136xui8>
// CHECK: %[[X:.+]] = tg.all_to_all %[[Q]] over node shards 2 : tensor<136xui8>
// CHECK: tg.dequantize_reduce %[[X]] avg chunk 64 shards 2 : tensor<136xui8> -> tensor<64xf32>
func.func @qgz(%g: tensor<128xf32>) -> tensor<64xf32> {
  %q = tg.quantize_chunks %g chunk 64 shards 2 : tensor<128xf32> -> tensor<136xui8>
  %x = tg.all_to_all %q over node shards 2 : tensor<136xui8>
  %r = tg.dequantize_reduce %x avg chunk 64 shards 2 : tensor<136xui8> -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

// Tests that the int4 wire round-trips with its format (72 bytes: two
// chunks of 32 code bytes and a scale), and int8's default stays unprinted.
// CHECK-LABEL: func.func @qgz_int4
// CHECK: %[[Q:.+]] = tg.quantize_chunks %{{.+}} chunk 64 shards 2 format "int4" : tensor<128xf32> -> tensor<72xui8>
// CHECK: %[[X:.+]] = tg.all_to_all %[[Q]] over world shards 2 : tensor<72xui8>
// CHECK: tg.dequantize_reduce %[[X]] sum chunk 64 shards 2 format "int4" : tensor<72xui8> -> tensor<64xf32>
// CHECK: tg.quantize_chunks %{{.+}} chunk 64 shards 2 : tensor<128xf32> -> tensor<136xui8>
func.func @qgz_int4(%g: tensor<128xf32>) -> tensor<64xf32> {
  %q = tg.quantize_chunks %g chunk 64 shards 2 format "int4" : tensor<128xf32> -> tensor<72xui8>
  %x = tg.all_to_all %q over world shards 2 : tensor<72xui8>
  %r = tg.dequantize_reduce %x sum chunk 64 shards 2 format "int4" : tensor<72xui8> -> tensor<64xf32>
  %q8 = tg.quantize_chunks %g chunk 64 shards 2 format "int8" : tensor<128xf32> -> tensor<136xui8>
  return %r : tensor<64xf32>
}

// -----

// Tests that ZeRO++'s hpZ ops round-trip: a rank's node part of a gathered
// bucket, and the bucket all-gathered from the parts within the node.
// CHECK-LABEL: func.func @hpz
// CHECK: %[[S:.+]] = tg.secondary_partition %{{.+}} shards 2 : tensor<256xf32> -> tensor<128xf32>
// CHECK: tg.gather_partition %[[S]] of @zero.b0 over node shards 2 : tensor<128xf32> -> tensor<256xf32>
tg.param @p : tensor<200xf32> trainable init <"zeros", 0.0 : f64>
tg.bucket @zero.b0 [@p] offsets [0] size 256 over world shards 4 sharded_params : f32
func.func @hpz(%w: tensor<256xf32>) -> tensor<256xf32> {
  %s = tg.secondary_partition %w shards 2 : tensor<256xf32> -> tensor<128xf32>
  %g = tg.gather_partition %s of @zero.b0 over node shards 2 : tensor<128xf32> -> tensor<256xf32>
  return %g : tensor<256xf32>
}
