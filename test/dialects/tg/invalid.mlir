// RUN: tailor-opt %s --split-input-file --verify-diagnostics

// Tests that a parameter must have a static shape.
// expected-error @+1 {{parameter @w must have a static shape, got 'tensor<?x4xf32>'}}
tg.param @w : tensor<?x4xf32>

// -----

// Tests that external data must hold exactly the parameter's bytes.
// expected-error @+1 {{external data of @w holds 32 bytes, but 'tensor<4x4xf32>' needs 64}}
tg.param @w : tensor<4x4xf32> at #tg.external<"w.bin", offset = 0, length = 32>

// -----

// Tests that external data must name a file.
// expected-error @+1 {{external data of @w names no file}}
tg.param @w : tensor<4xf32> at #tg.external<"", offset = 0, length = 16>

// -----

// Tests that a parameter reference must name a tg.param.
func.func @f() {
  // expected-error @+1 {{@missing does not name a tg.param in an enclosing symbol table}}
  %0 = tg.param_ref @missing : tensor<4xf32>
  return
}

// -----

// Tests that a parameter reference must have the parameter's type.
tg.param @w : tensor<4xf32>
func.func @f() {
  // expected-error @+1 {{result type 'tensor<8xf32>' does not match parameter @w of type 'tensor<4xf32>'}}
  %0 = tg.param_ref @w : tensor<8xf32>
  return
}

// -----

// Tests that matmul needs operands of rank >= 2.
func.func @f(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{expected operands of rank >= 2, got [8] and [8, 4]}}
  %0 = tg.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that matmul's contraction dims must agree.
func.func @f(%a: tensor<2x8xf32>, %b: tensor<7x4xf32>) {
  // expected-error @+1 {{contraction dims differ: lhs [2, 8] has K = 8 but rhs [7, 4] has K = 7}}
  %0 = tg.matmul %a, %b : (tensor<2x8xf32>, tensor<7x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that matmul's batch dims must broadcast.
func.func @f(%a: tensor<3x2x8xf32>, %b: tensor<5x8x4xf32>) {
  // expected-error @+1 {{shapes [3] and [5] do not broadcast: dim 3 vs 5}}
  %0 = tg.matmul %a, %b : (tensor<3x2x8xf32>, tensor<5x8x4xf32>) -> tensor<3x2x4xf32>
  return
}

// -----

// Tests that matmul's operands share an element type.
func.func @f(%a: tensor<2x8xf32>, %b: tensor<8x4xbf16>) {
  // expected-error @+1 {{expected rhs to have element type 'f32' (as lhs), got 'bf16'}}
  %0 = tg.matmul %a, %b : (tensor<2x8xf32>, tensor<8x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that matmul's result has the computed shape.
func.func @f(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{result shape [2, 8] does not match the expected [2, 4]}}
  %0 = tg.matmul %a, %b : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that linear needs an input of rank >= 1.
func.func @f(%x: tensor<f32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{expected an input of rank >= 1}}
  %0 = tg.linear %x, %w : (tensor<f32>, tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that linear needs a 2-D weight.
func.func @f(%x: tensor<2x8xf32>, %w: tensor<4x8x1xf32>) {
  // expected-error @+1 {{expected a weight of shape [out, in], got [4, 8, 1]}}
  %0 = tg.linear %x, %w : (tensor<2x8xf32>, tensor<4x8x1xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that linear's weight is [out, in] (PyTorch layout), not [in, out].
func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{input features 8 do not match weight [8, 4] (expected [out, 8])}}
  %0 = tg.linear %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that linear's bias is [out].
func.func @f(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{expected a bias of shape [4], got [8]}}
  %0 = tg.linear %x, %w, %b : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that ODS rejects non-float operands of float-only ops.
func.func @f(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = tg.exp %x : tensor<4xi32>
  return
}

// -----

// Tests that broadcasting binary ops need one element type.
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{expected operands of one element type, got 'f32' and 'f16'}}
  %0 = tg.add %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that arithmetic keeps the operands' element type.
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{expected result element type 'f32', got 'f16'}}
  %0 = tg.mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that binary operands must broadcast.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{shapes [2, 3] and [4] do not broadcast: dim 3 vs 4}}
  %0 = tg.sub %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that a binary result has the broadcast shape.
func.func @f(%a: tensor<2x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result shape [2, 1] does not match the expected [2, 3]}}
  %0 = tg.div %a, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x1xf32>
  return
}

// -----

// Tests that comparisons produce i1.
func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = tg.eq %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that select's branches share an element type.
func.func @f(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi64>) {
  // expected-error @+1 {{expected on_false to have element type 'f32' (as on_true), got 'i64'}}
  %0 = tg.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

// Tests that select's condition broadcasts against the branches.
func.func @f(%c: tensor<3xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{shapes [3] and [4] do not broadcast: dim 3 vs 4}}
  %0 = tg.select %c, %a, %a : (tensor<3xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that cast keeps the shape.
func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = tg.cast %a : tensor<4xf32> -> tensor<8xbf16>
  return
}

// -----

// Tests that reduction axes are in range.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range [0, 2)}}
  %0 = tg.reduce_sum %x axes = [2] : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

// Tests that reduction axes are distinct.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 1 is listed twice}}
  %0 = tg.reduce_mean %x axes = [1, 1] : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

// Tests that a reduction's result drops (or keeps) exactly the reduced dims.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [2] does not match the expected [2, 1]}}
  %0 = tg.reduce_max %x axes = [1] keep_dims : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

// Tests that a reduction keeps the element type.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %0 = tg.reduce_sum %x axes = [1] : tensor<2x3xf32> -> tensor<2xf16>
  return
}

// -----

// Tests that softmax's axis is in range.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range [0, 2)}}
  %0 = tg.softmax %x axis = 2 : tensor<2x3xf32>
  return
}

// -----

// Tests that rms_norm's weight matches the last dim.
func.func @f(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{expected weight of shape [8] (the input's last dim), got [4]}}
  %0 = tg.rms_norm %x, %w : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that normalizations need an input of rank >= 1.
func.func @f(%x: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{expected an input of rank >= 1}}
  %0 = tg.rms_norm %x, %w : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----

// Tests that epsilon is non-negative.
func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{expected a non-negative epsilon, got -1.000000e+00}}
  %0 = tg.rms_norm %x, %w {epsilon = -1.0 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that a normalization keeps the input's shape.
func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{result shape [1, 8] does not match the expected [2, 8]}}
  %0 = tg.rms_norm %x, %w : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<1x8xf32>
  return
}

// -----

// Tests that layer_norm's bias matches the last dim.
func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{expected bias of shape [8] (the input's last dim), got [2]}}
  %0 = tg.layer_norm %x, %w, %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that layer_norm's parameters share the input's element type.
func.func @f(%x: tensor<2x8xbf16>, %w: tensor<8xf32>) {
  // expected-error @+1 {{expected weight to have element type 'bf16' (as input), got 'f32'}}
  %0 = tg.layer_norm %x, %w : (tensor<2x8xbf16>, tensor<8xf32>) -> tensor<2x8xbf16>
  return
}

// -----

// Tests that rope needs a [batch, heads, seq, head_dim] input.
func.func @f(%x: tensor<8x16x32xf32>, %c: tensor<16x32xf32>) {
  // expected-error @+1 {{expected input of rank 4 ([batch, heads, seq, head_dim]), got [8, 16, 32]}}
  %0 = tg.rope %x, %c, %c : (tensor<8x16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<8x16x32xf32>
  return
}

// -----

// Tests that rope needs an even head_dim.
func.func @f(%x: tensor<1x8x16x33xf32>, %c: tensor<16x33xf32>) {
  // expected-error @+1 {{expected an even head_dim, got 33}}
  %0 = tg.rope %x, %c, %c : (tensor<1x8x16x33xf32>, tensor<16x33xf32>, tensor<16x33xf32>) -> tensor<1x8x16x33xf32>
  return
}

// -----

// Tests that rope's cos and sin share a shape.
func.func @f(%x: tensor<1x8x16x32xf32>, %c: tensor<16x32xf32>, %s: tensor<1x16x32xf32>) {
  // expected-error @+1 {{cos [16, 32] and sin [1, 16, 32] must have one shape}}
  %0 = tg.rope %x, %c, %s : (tensor<1x8x16x32xf32>, tensor<16x32xf32>, tensor<1x16x32xf32>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that rope's tables are [seq, head_dim] or [batch, seq, head_dim].
func.func @f(%x: tensor<1x8x16x32xf32>, %c: tensor<8x32xf32>) {
  // expected-error @+1 {{expected cos and sin of shape [16, 32] or [1, 16, 32], got [8, 32]}}
  %0 = tg.rope %x, %c, %c : (tensor<1x8x16x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that attention needs rank-4 q, k, v.
func.func @f(%q: tensor<8x16x32xf32>) {
  // expected-error @+1 {{expected q, k, v of rank 4 ([batch, heads, seq, head_dim]), got [8, 16, 32], [8, 16, 32], [8, 16, 32]}}
  %0 = tg.attention %q, %q, %q : (tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  return
}

// -----

// Tests that attention's batch dims agree.
func.func @f(%q: tensor<1x8x16x32xf32>, %k: tensor<2x8x16x32xf32>) {
  // expected-error @+1 {{batch dims differ: q [1, 8, 16, 32], k [2, 8, 16, 32], v [2, 8, 16, 32]}}
  %0 = tg.attention %q, %k, %k : (tensor<1x8x16x32xf32>, tensor<2x8x16x32xf32>, tensor<2x8x16x32xf32>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that k and v agree in heads and length.
func.func @f(%q: tensor<1x8x16x32xf32>, %k: tensor<1x8x16x32xf32>, %v: tensor<1x8x12x32xf32>) {
  // expected-error @+1 {{k [1, 8, 16, 32] and v [1, 8, 12, 32] must agree in kv heads and key length}}
  %0 = tg.attention %q, %k, %v : (tensor<1x8x16x32xf32>, tensor<1x8x16x32xf32>, tensor<1x8x12x32xf32>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that q and k share a head dim.
func.func @f(%q: tensor<1x8x16x32xf32>, %k: tensor<1x8x16x64xf32>) {
  // expected-error @+1 {{head dims differ: q has 32, k has 64}}
  %0 = tg.attention %q, %k, %k : (tensor<1x8x16x32xf32>, tensor<1x8x16x64xf32>, tensor<1x8x16x64xf32>) -> tensor<1x8x16x64xf32>
  return
}

// -----

// Tests that grouped-query attention needs query heads divisible by kv heads.
func.func @f(%q: tensor<1x8x16x32xf32>, %k: tensor<1x3x16x32xf32>) {
  // expected-error @+1 {{grouped-query attention needs query heads (8) to be a multiple of kv heads (3)}}
  %0 = tg.attention %q, %k, %k {causal} : (tensor<1x8x16x32xf32>, tensor<1x3x16x32xf32>, tensor<1x3x16x32xf32>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that the attention scale is positive.
func.func @f(%q: tensor<1x8x16x32xf32>) {
  // expected-error @+1 {{expected a positive scale, got 0.000000e+00}}
  %0 = tg.attention %q, %q, %q {scale = 0.0 : f64} : (tensor<1x8x16x32xf32>, tensor<1x8x16x32xf32>, tensor<1x8x16x32xf32>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that attention's result is [B, Hq, T, Dv].
func.func @f(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x32xf32>) {
  // expected-error @+1 {{result shape [1, 2, 16, 32] does not match the expected [1, 8, 16, 32]}}
  %0 = tg.attention %q, %k, %k : (tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> tensor<1x2x16x32xf32>
  return
}

// -----

// Tests that attention has one ALiBi slope per query head.
func.func @f(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x32xf32>) {
  // expected-error @+1 {{expected one ALiBi slope per query head (8), got 2}}
  %0 = tg.attention %q, %k, %k {alibi_slopes = array<f64: 0.5, 0.25>} : (tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that attention's bias broadcasts to the scores [B, Hq, T, S].
func.func @f(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x12x32xf32>, %b: tensor<1x1x16x16xf32>) {
  // expected-error @+1 {{expected a bias broadcastable to the scores [1, 8, 16, 12] (rank 4, each dim equal or 1), got [1, 1, 16, 16]}}
  %0 = tg.attention %q, %k, %k bias %b : (tensor<1x8x16x32xf32>, tensor<1x2x12x32xf32>, tensor<1x2x12x32xf32>, tensor<1x1x16x16xf32>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that attention's bias has rank 4.
func.func @f(%q: tensor<1x8x16x32xf32>, %b: tensor<16x16xf32>) {
  // expected-error @+1 {{expected a bias broadcastable to the scores [1, 8, 16, 16] (rank 4, each dim equal or 1), got [16, 16]}}
  %0 = tg.attention %q, %q, %q bias %b : (tensor<1x8x16x32xf32>, tensor<1x8x16x32xf32>, tensor<1x8x16x32xf32>, tensor<16x16xf32>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that attention's bias has the query's element type.
func.func @f(%q: tensor<1x8x16x32xf32>, %b: tensor<1x1x16x16xbf16>) {
  // expected-error @+1 {{expected a bias of the query's element type 'f32', got 'bf16'}}
  %0 = tg.attention %q, %q, %q bias %b : (tensor<1x8x16x32xf32>, tensor<1x8x16x32xf32>, tensor<1x8x16x32xf32>, tensor<1x1x16x16xbf16>) -> tensor<1x8x16x32xf32>
  return
}

// -----

// Tests that attention_grad checks its bias like attention.
func.func @f(%q: tensor<1x2x4x8xf32>, %b: tensor<1x3x4x4xf32>) {
  // expected-error @+1 {{expected a bias broadcastable to the scores [1, 2, 4, 4] (rank 4, each dim equal or 1), got [1, 3, 4, 4]}}
  %0:3 = tg.attention_grad %q, %q, %q, %q bias %b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x3x4x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

// Tests that an embedding table is [vocab, dim].
func.func @f(%t: tensor<100xf32>, %ids: tensor<4xi64>) {
  // expected-error @+1 {{expected a table of shape [vocab, dim], got [100]}}
  %0 = tg.embedding %t, %ids : (tensor<100xf32>, tensor<4xi64>) -> tensor<4x1xf32>
  return
}

// -----

// Tests that an embedding's result is ids' shape plus the row.
func.func @f(%t: tensor<100x32xf32>, %ids: tensor<4xi64>) {
  // expected-error @+1 {{result shape [4, 100] does not match the expected [4, 32]}}
  %0 = tg.embedding %t, %ids : (tensor<100x32xf32>, tensor<4xi64>) -> tensor<4x100xf32>
  return
}

// -----

// Tests that an embedding keeps the table's element type.
func.func @f(%t: tensor<100x32xbf16>, %ids: tensor<4xi64>) {
  // expected-error @+1 {{expected result to have element type 'bf16' (as table), got 'f32'}}
  %0 = tg.embedding %t, %ids : (tensor<100x32xbf16>, tensor<4xi64>) -> tensor<4x32xf32>
  return
}

// -----

// Tests that cross-entropy logits are [tokens, vocab].
func.func @f(%l: tensor<2x16x100xf32>, %y: tensor<32xi64>) {
  // expected-error @+1 {{expected logits of shape [tokens, vocab], got [2, 16, 100]}}
  %0 = tg.cross_entropy %l, %y : (tensor<2x16x100xf32>, tensor<32xi64>) -> tensor<f32>
  return
}

// -----

// Tests that cross-entropy has one label per row.
func.func @f(%l: tensor<16x100xf32>, %y: tensor<15xi64>) {
  // expected-error @+1 {{expected labels of shape [16] (one per row of logits), got [15]}}
  %0 = tg.cross_entropy %l, %y : (tensor<16x100xf32>, tensor<15xi64>) -> tensor<f32>
  return
}

// -----

// Tests that reduction=none yields one loss per token.
func.func @f(%l: tensor<16x100xf32>, %y: tensor<16xi64>) {
  // expected-error @+1 {{result shape [] does not match the expected [16]}}
  %0 = tg.cross_entropy %l, %y {reduction = #tg.loss_reduction<none>} : (tensor<16x100xf32>, tensor<16xi64>) -> tensor<f32>
  return
}

// -----

// Tests that reshape keeps the element count.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{cannot reshape [2, 6] (12 elements) to [5, 2] (10 elements)}}
  %0 = tg.reshape %x : tensor<2x6xf32> -> tensor<5x2xf32>
  return
}

// -----

// Tests that transpose's permutation covers every dim.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{expected a permutation of 2 dims, got 3}}
  %0 = tg.transpose %x permutation = [0, 1, 2] : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

// Tests that transpose's permutation is a permutation.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{permutation [1, 1] is not a permutation of [0, 2)}}
  %0 = tg.transpose %x permutation = [1, 1] : tensor<2x6xf32> -> tensor<6x6xf32>
  return
}

// -----

// Tests that transpose's result is the permuted shape.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{result shape [2, 6] does not match the expected [6, 2]}}
  %0 = tg.transpose %x permutation = [1, 0] : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

// Tests that a slice gives one start, end and step per dim.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{expected 2 starts, ends and steps (one per dim), got 1, 2 and 2}}
  %0 = tg.slice %x starts = [0] ends = [2, 6] steps = [1, 1] : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

// Tests that slice steps are positive.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{step 0 of dim 1 must be >= 1}}
  %0 = tg.slice %x starts = [0, 0] ends = [2, 6] steps = [1, 0] : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

// Tests that a slice stays inside its dim.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{slice [2, 7) of dim 1 is outside [0, 6]}}
  %0 = tg.slice %x starts = [0, 2] ends = [2, 7] steps = [1, 1] : tensor<2x6xf32> -> tensor<2x5xf32>
  return
}

// -----

// Tests that concat needs at least one input.
func.func @f() {
  // expected-error @+1 {{expected 1 or more operands, but found 0}}
  %0 = tg.concat axis = 0 : () -> tensor<2xf32>
  return
}

// -----

// Tests that concat's axis is in range.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{axis 2 is out of range [0, 2)}}
  %0 = tg.concat %x, %x axis = 2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that concat's inputs share a rank.
func.func @f(%x: tensor<2x6xf32>, %y: tensor<6xf32>) {
  // expected-error @+1 {{input 1 has rank 1, expected 2}}
  %0 = tg.concat %x, %y axis = 1 : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x12xf32>
  return
}

// -----

// Tests that concat's inputs agree off the axis.
func.func @f(%x: tensor<2x6xf32>, %y: tensor<3x6xf32>) {
  // expected-error @+1 {{input 1 has shape [3, 6], expected dim 0 = 2 as in input 0}}
  %0 = tg.concat %x, %y axis = 1 : (tensor<2x6xf32>, tensor<3x6xf32>) -> tensor<2x12xf32>
  return
}

// -----

// Tests that split has one result per size.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{expected 2 results (one per size), got 1}}
  %0 = tg.split %x axis = 1 sizes = [2, 4] : (tensor<2x6xf32>) -> tensor<2x2xf32>
  return
}

// -----

// Tests that split's axis is in range.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{axis 3 is out of range [0, 2)}}
  %0:2 = tg.split %x axis = 3 sizes = [2, 4] : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
  return
}

// -----

// Tests that split sizes are non-negative.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{split size -2 is negative}}
  %0:2 = tg.split %x axis = 1 sizes = [8, -2] : (tensor<2x6xf32>) -> (tensor<2x8xf32>, tensor<2x2xf32>)
  return
}

// -----

// Tests that split sizes add up to the dim.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{split sizes sum to 5 but dim 1 is 6}}
  %0:2 = tg.split %x axis = 1 sizes = [2, 3] : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x3xf32>)
  return
}

// -----

// Tests that each split result has its piece's shape.
func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{result 1 has shape [2, 2], expected [2, 4]}}
  %0:2 = tg.split %x axis = 1 sizes = [2, 4] : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  return
}

// -----

// Tests that tg.layer is a non-negative integer.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tg.layer' must be a non-negative integer layer index, got -1 : i64}}
  %0 = tg.exp %x {tg.layer = -1 : i64} : tensor<4xf32>
  return
}

// -----

// Tests that tg.module is a non-empty path.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tg.module' must be a non-empty module path string, got ""}}
  %0 = tg.exp %x {tg.module = ""} : tensor<4xf32>
  return
}

// -----

// Tests that unknown tg.* attributes are rejected.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{unknown tg attribute 'tg.layr' (known: tg.layer, tg.module, tg.tied,}}
  %0 = tg.exp %x {tg.layr = 1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @broadcast_bad_dim(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{cannot broadcast [2, 3] to [2, 4]: input dim 1 is 3, expected 1 or 4}}
  %0 = tg.broadcast %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that a band mask needs rows and columns.
// expected-error @+1 {{'tg.band_mask' op expected a result of rank >= 2 (rows and columns), got [8]}}
%0 = tg.band_mask {inside = 0.0 : f64, lower = -7 : i64, outside = 1.0 : f64, upper = 0 : i64} : tensor<8xf32>

// -----

// Tests that a band's bounds are ordered.
// expected-error @+1 {{'tg.band_mask' op expected lower <= upper, got 2 > 0}}
%0 = tg.band_mask {inside = 0.0 : f64, lower = 2 : i64, outside = 1.0 : f64, upper = 0 : i64} : tensor<8x8xf32>

// -----

// Tests that an i1 mask holds 0 or 1.
// expected-error @+1 {{'tg.band_mask' op expected outside to be 0 or 1 for an i1 mask, got 2}}
%0 = tg.band_mask {inside = 1.0 : f64, lower = -7 : i64, outside = 2.0 : f64, upper = 0 : i64} : tensor<8x8xi1>

// -----

// Tests that an integer mask holds integers.
// expected-error @+1 {{'tg.band_mask' op expected an integer inside for 'i64', got 5.000000e-01}}
%0 = tg.band_mask {inside = 0.5 : f64, lower = -7 : i64, outside = 0.0 : f64, upper = 0 : i64} : tensor<8x8xi64>

// -----

// Tests that gather_elements' indices have the data's rank.
func.func @gather_elements_rank(%d: tensor<3x4xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'tg.gather_elements' op expected indices of the data's rank 2, got [4]}}
  %0 = tg.gather_elements %d, %i axis = 0 : (tensor<3x4xf32>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

// Tests that gather_elements' indices fit the data outside the axis.
func.func @gather_elements_larger(%d: tensor<3x4xf32>, %i: tensor<2x5xi64>) {
  // expected-error @+1 {{'tg.gather_elements' op expected indices [2, 5] no larger than data [3, 4] outside axis 0}}
  %0 = tg.gather_elements %d, %i axis = 0 : (tensor<3x4xf32>, tensor<2x5xi64>) -> tensor<2x5xf32>
  return
}

// -----

// Tests that the axis lies inside the rank.
func.func @scatter_elements_axis(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{'tg.scatter_elements' op expected axis in [0, 2) for rank 2, got 2}}
  %0 = tg.scatter_elements %d, %i, %u axis = 2 : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return
}

// -----

// Tests that scatter_elements' updates have the indices' shape.
func.func @scatter_elements_updates(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+1 {{'tg.scatter_elements' op expected updates of shape [2, 4] and element type 'f32', got 'tensor<2x3xf32>'}}
  %0 = tg.scatter_elements %d, %i, %u axis = 0 : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x3xf32>) -> tensor<3x4xf32>
  return
}

// -----

// Tests that gather_nd's tuples fit the data after the batch dims.
func.func @gather_nd_tuple(%d: tensor<2x5xf32>, %i: tensor<2x4x2xi64>) {
  // expected-error @+1 {{'tg.gather_nd' op expected index tuples of length in [1, 1] (the data's dims after batch_dims), got 2}}
  %0 = tg.gather_nd %d, %i {batch_dims = 1 : i64} : (tensor<2x5xf32>, tensor<2x4x2xi64>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that gather_nd's result is indices[:-1] + data[b + k:].
func.func @gather_nd_result(%d: tensor<5x3xf32>, %i: tensor<4x1xi64>) {
  // expected-error @+1 {{'tg.gather_nd' op expected result of shape [4, 3] and element type 'f32', got 'tensor<4x5xf32>'}}
  %0 = tg.gather_nd %d, %i : (tensor<5x3xf32>, tensor<4x1xi64>) -> tensor<4x5xf32>
  return
}

// -----

// Tests that scatter_nd's updates are indices[:-1] + data[k:].
func.func @scatter_nd_updates(%d: tensor<5x3xf32>, %i: tensor<4x1xi64>, %u: tensor<4xf32>) {
  // expected-error @+1 {{'tg.scatter_nd' op expected updates of shape [4, 3] and element type 'f32', got 'tensor<4xf32>'}}
  %0 = tg.scatter_nd %d, %i, %u : (tensor<5x3xf32>, tensor<4x1xi64>, tensor<4xf32>) -> tensor<5x3xf32>
  return
}

// -----

// Tests that cumsum's axis lies inside the rank.
func.func @cumsum_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'tg.cumsum' op expected axis in [0, 2) for rank 2, got 3}}
  %0 = tg.cumsum %x axis = 3 : tensor<2x8xf32>
  return
}

// -----

// Tests that cumsum takes its axis once: attribute or operand.
func.func @cumsum_two_axes(%x: tensor<2x8xf32>, %a: tensor<i64>) {
  // expected-error @+1 {{'tg.cumsum' op expected either an axis attribute or a run-time axis operand, not both}}
  %0 = tg.cumsum %x, %a : tensor<i64> axis = 1 : tensor<2x8xf32>
  return
}

// -----

// Tests that cumsum needs an axis.
func.func @cumsum_no_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'tg.cumsum' op expected either an axis attribute or a run-time axis operand, not neither}}
  %0 = tg.cumsum %x : tensor<2x8xf32>
  return
}

// -----

// Tests that a run-time axis holds one element.
func.func @cumsum_axis_shape(%x: tensor<2x8xf32>, %a: tensor<2xi64>) {
  // expected-error @+1 {{'tg.cumsum' op expected a run-time axis of one element, got 'tensor<2xi64>'}}
  %0 = tg.cumsum %x, %a : tensor<2xi64> : tensor<2x8xf32>
  return
}

// -----

// Tests that mod's operands share one element type.
func.func @mod_types(%a: tensor<4xi64>, %b: tensor<4xi32>) {
  // expected-error @+1 {{'tg.mod' op expected operands and result of one element type}}
  %0 = tg.mod %a, %b : (tensor<4xi64>, tensor<4xi32>) -> tensor<4xi64>
  return
}

// -----

// Tests that mod's result has the broadcast shape.
func.func @mod_shape(%a: tensor<2x4xi64>, %b: tensor<4xi64>) {
  // expected-error @+1 {{'tg.mod' op expected result of shape [2, 4] and element type 'i64', got 'tensor<4xi64>'}}
  %0 = tg.mod %a, %b : (tensor<2x4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

// Tests that document-masking positions need a causal attention.
func.func @f(%q: tensor<2x4x8x16xf32>, %p: tensor<2x8xi64>) {
  // expected-error @+1 {{expected positions (document masking) on a causal attention only}}
  %0 = tg.attention %q, %q, %q positions %p : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x8xi64>) -> tensor<2x4x8x16xf32>
  return
}

// -----

// Tests that document-masking positions are [batch, query rows].
func.func @f(%q: tensor<2x4x8x16xf32>, %p: tensor<1x8xi64>) {
  // expected-error @+1 {{expected positions of shape [2, 8] (batch, query rows), got [1, 8]}}
  %0 = tg.attention %q, %q, %q positions %p {causal} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<1x8xi64>) -> tensor<2x4x8x16xf32>
  return
}

// -----

// Tests that the gradient's positions are checked as the forward's.
func.func @f(%q: tensor<2x4x8x16xf32>, %p: tensor<2x7xi64>) {
  // expected-error @+1 {{expected positions of shape [2, 8] (batch, query rows), got [2, 7]}}
  %0:3 = tg.attention_grad %q, %q, %q, %q positions %p {causal} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x7xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
  return
}

// -----

// Tests that a bucket's size is a whole number of chunks.
tg.param @w : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
// expected-error @+1 {{size 130 must be a positive multiple of shards 4}}
tg.bucket @zero.b0 [@w] offsets [0] size 130 over world shards 4 : f32

// -----

// Tests that bucket members do not overlap.
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @v : tensor<8xf32> trainable init <"zeros", 0.0 : f64>
// expected-error @+1 {{member @v at [8, 16) overlaps the one before or leaves the bucket's 64 elements}}
tg.bucket @zero.b0 [@w, @v] offsets [0, 8] size 64 over world shards 2 : f32

// -----

// Tests that only trainable parameters go into a bucket.
tg.param @w : tensor<4xf32> init <"zeros", 0.0 : f64>
// expected-error @+1 {{@w does not name a trainable tg.param}}
tg.bucket @zero.b0 [@w] offsets [0] size 64 over world shards 2 : f32

// -----

// Tests that a reduce-scatter's result is one chunk of its input.
func.func @f(%x: tensor<128xf32>) {
  // expected-error @+1 {{expected a 1-D input of 4 chunks of the 1-D result's type, got 'tensor<128xf32>' -> 'tensor<64xf32>'}}
  %0 = tg.reduce_scatter %x avg over world shards 4 : tensor<128xf32> -> tensor<64xf32>
  return
}

// -----

// Tests that an update on a bucket takes states of the chunk's type.
tg.param @w : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.bucket @zero.b0 [@w] offsets [0] size 64 over world shards 2 : f32
tg.state @g : tensor<64xf32> of @zero.b0 grad
tg.state @m : tensor<32xf32> of @zero.b0 exp_avg
tg.state @v : tensor<32xf32> of @zero.b0 exp_avg_sq
func.func @f(%lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{state @g has type 'tensor<64xf32>', expected 'tensor<32xf32>'}}
  tg.adamw_update @zero.b0 grad @g moments(@m, @v) lr %lr step %step scale %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return
}

// -----

// Tests that SGD with momentum needs its buffer.
tg.param @w : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @g : tensor<4xf32> of @w grad
func.func @f(%lr: tensor<f32>) {
  // expected-error @+1 {{momentum needs a momentum buffer}}
  tg.sgd_update @w grad @g lr %lr scale %lr {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  return
}

// -----

// Tests that plain SGD (momentum 0) keeps no buffer.
tg.param @w : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @g : tensor<4xf32> of @w grad
tg.state @b : tensor<4xf32> of @w momentum_buffer
func.func @f(%lr: tensor<f32>) {
  // expected-error @+1 {{momentum 0 keeps no momentum buffer}}
  tg.sgd_update @w grad @g momentum_buffer @b lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  return
}

// -----

// Tests that error feedback pairs a gradient with an error of its type.
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @g : tensor<4x4xf32> of @w grad
tg.state @e : tensor<16xf32> of @w powersgd_error
func.func @f() {
  // expected-error @+1 {{gradient @g has type 'tensor<4x4xf32>' but error @e has 'tensor<16xf32>'}}
  tg.add_error_feedback @g from @e
  return
}

// -----

// Tests that a low-rank factor is a 2-D state.
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @q : tensor<4xf32> of @w powersgd_q
func.func @f() {
  // expected-error @+1 {{factor @q has type 'tensor<4xf32>', expected 2-D}}
  tg.lowrank_init @q
  return
}

// -----

// Tests that orthogonalization needs at least as many rows as columns.
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @p : tensor<2x3xf32> of @w powersgd_p
func.func @f() {
  // expected-error @+1 {{factor @p has 3 columns but 2 rows}}
  tg.orthogonalize @p
  return
}

// -----

// Tests that a low-rank product's shapes must chain (M is read as 6 x 20).
tg.param @w : tensor<6x4x5xf32> trainable init <"zeros", 0.0 : f64>
tg.state @g : tensor<6x4x5xf32> of @w grad
tg.state @q : tensor<6x1xf32> of @w powersgd_q
tg.state @p : tensor<6x1xf32> of @w powersgd_p
func.func @f() {
  // expected-error @+1 {{shapes do not chain: 6x20 times 6x1 into 6x1}}
  tg.lowrank_matmul @g, @q into @p
  return
}

// -----

// Tests that compression works on f32 states only.
tg.param @w : tensor<4x4xbf16> trainable init <"zeros", 0.0 : f64>
tg.state @g : tensor<4x4xbf16> of @w grad
tg.state @e : tensor<4x4xbf16> of @w powersgd_error
func.func @f() {
  // expected-error @+1 {{state @g holds 'bf16', expected f32}}
  tg.add_error_feedback @g from @e
  return
}

// -----

// Tests that a step range starts at step 1 or later and ends after it.
tg.param @w : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @g : tensor<4xf32> of @w grad
func.func @f() {
  // expected-error @+1 {{'tg.steps' must be array<i64: first, last> or array<i64: first, last, period> with first >= 1}}
  tg.zero_states [@g] {tg.steps = array<i64: 0, -1>}
  return
}

// -----

// Tests that a step range's period is at least 1.
tg.param @w : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @g : tensor<4xf32> of @w grad
func.func @f() {
  // expected-error @+1 {{period >= 1, got array<i64: 4, -1, 0>}}
  tg.zero_states [@g] {tg.steps = array<i64: 4, -1, 0>}
  return
}

// -----

// Tests that a cache write takes [B, H, C, D] keys or values.
tg.state @c : tensor<1x2x8x4xf32> of @attn key_cache
func.func @f(%k: tensor<2x2x4xf32>, %p: tensor<i64>) {
  // expected-error @+1 {{expected the keys or values of the step's tokens, [B, H, C, D]}}
  tg.cache_write %k into @c at %p : tensor<2x2x4xf32>, tensor<i64>
  return
}

// -----

// Tests that a cache write's chunk is no longer than the cache.
tg.state @c : tensor<1x2x8x4xf32> of @attn key_cache
func.func @f(%k: tensor<1x2x9x4xf32>, %p: tensor<i64>) {
  // expected-error @+1 {{cache @c of type 'tensor<1x2x8x4xf32>' cannot hold a value of type 'tensor<1x2x9x4xf32>'}}
  tg.cache_write %k into @c at %p : tensor<1x2x9x4xf32>, tensor<i64>
  return
}

// -----

// Tests that a cache write goes into a key or value cache.
tg.state @g : tensor<1x2x8x4xf32> of @attn grad
func.func @f(%k: tensor<1x2x1x4xf32>, %p: tensor<i64>) {
  // expected-error @+1 {{state @g is not a key_cache or value_cache}}
  tg.cache_write %k into @g at %p : tensor<1x2x1x4xf32>, tensor<i64>
  return
}

// -----

// Tests that a cache write's value fits its cache's batch, heads and width.
tg.state @c : tensor<1x3x8x4xf32> of @attn value_cache
func.func @f(%k: tensor<1x2x1x4xf32>, %p: tensor<i64>) {
  // expected-error @+1 {{cache @c of type 'tensor<1x3x8x4xf32>' cannot hold a value of type 'tensor<1x2x1x4xf32>'}}
  tg.cache_write %k into @c at %p : tensor<1x2x1x4xf32>, tensor<i64>
  return
}

// -----

// Tests that top-k keeps at most the bucket's entries (4 x 4 and 4: 20).
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<4x4xf32> of @w grad
tg.state @b.grad : tensor<4xf32> of @b grad
func.func @f() {
  // expected-error @+1 {{keeps 21 entries of a bucket of 20}}
  %v, %i = tg.topk_compress [@w.grad, @b.grad] : tensor<21xf32>, tensor<21xi32>
  return
}

// -----

// Tests that top-k needs one residual per gradient.
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<4x4xf32> of @w grad
tg.state @b.grad : tensor<4xf32> of @w grad
func.func @f() {
  // expected-error @+1 {{expected one residual per gradient, got 1 for 2}}
  %v, %i = tg.topk_compress [@w.grad, @b.grad] residual [@w.grad] : tensor<2xf32>, tensor<2xi32>
  return
}

// -----

// Tests that sign-SGD packs 8 signs a byte (20 entries: 3 bytes).
tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<4x4xf32> of @w grad
tg.state @b.grad : tensor<4xf32> of @w grad
func.func @f() {
  // expected-error @+1 {{packs 20 signs into 2 bytes, expected 3}}
  %s, %c = tg.sign_compress [@w.grad, @b.grad] : tensor<2xui8>, tensor<2xf32>
  return
}

// -----

// Tests that an all-gather's result is a whole number of inputs.
func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{gathers 3 elements into 7: expected a positive multiple}}
  %y = tg.all_gather %x over world : tensor<3xf32> -> tensor<7xf32>
  return
}

// -----

// Tests that a slot write needs a pipeline_input state.
tg.state @g : tensor<2x4xf32> of @w grad
func.func @f(%x: tensor<4xf32>, %slot: tensor<i64>) {
  // expected-error @+1 {{state @g is not a pipeline_input}}
  tg.slot_write %x into @g at %slot : tensor<4xf32>, tensor<i64>
  return
}

// -----

// Tests that a slot holds exactly the value's shape.
tg.state @in : tensor<2x4xf32> of @in pipeline_input
func.func @f(%slot: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+1 {{does not hold slots of 'tensor<5xf32>'}}
  %x = tg.slot_read @in at %slot : tensor<i64> -> tensor<5xf32>
  return %x : tensor<5xf32>
}

// -----

// Tests that a receive needs a static shape.
func.func @f() -> tensor<?xf32> {
  // expected-error @+1 {{receives need a static shape}}
  %x = tg.recv from 1 : tensor<?xf32>
  return %x : tensor<?xf32>
}

// -----

// Tests that tg.fp16 (tailor-emulate-half's decision) sits on GEMMs only.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tg.fp16' must be a unit attribute on a tg.linear, tg.matmul or tg.linear_weight_grad}}
  %0 = tg.exp %x {tg.fp16} : tensor<4xf32>
  return
}

// -----

// Tests that tg.bf16 (tailor-emulate-half's decision) sits on GEMMs only.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'tg.bf16' must be a unit attribute on a tg.linear, tg.matmul or tg.linear_weight_grad}}
  %0 = tg.exp %x {tg.bf16} : tensor<4xf32>
  return
}

// -----

// Tests that a GEMM computes in one 16-bit format.
func.func @f(%x: tensor<3x4xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{a GEMM is either 'tg.fp16' or 'tg.bf16', not both}}
  %0 = tg.linear %x, %w {tg.fp16, tg.bf16} : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  return
}

// -----

// Tests that an int8 wire gather must give every rank's wire chunk
// (2 x (64 + 4) bytes), not the f32 bucket.
tg.param @p : tensor<128xf32> trainable init <"zeros", 0.0 : f64>
tg.bucket @b [@p] offsets [0] size 128 over world shards 2 sharded_params : f32
func.func @f() {
  // expected-error @+1 {{expected 'tensor<136xui8>' (every rank's int8 wire chunk), got 'tensor<128xf32>'}}
  %0 = tg.gather_bucket @b {wire = "int8"} : tensor<128xf32>
  return
}

// -----

// Tests that only int8 goes on the wire.
tg.param @p : tensor<128xf32> trainable init <"zeros", 0.0 : f64>
tg.bucket @b [@p] offsets [0] size 128 over world shards 2 sharded_params : f32
func.func @f() {
  // expected-error @+1 {{expected wire "int8", got "int4"}}
  %0 = tg.gather_bucket @b {wire = "int4"} : tensor<72xui8>
  return
}

// -----

// Tests that a decode's sizes follow its chunk and shards.
func.func @f(%w: tensor<130xui8>) {
  // expected-error @+1 {{expected 136 wire bytes decoding to 128 elements, got 'tensor<130xui8>' -> 'tensor<128xf32>'}}
  %0 = tg.dequantize_gathered %w chunk 64 shards 2 : tensor<130xui8> -> tensor<128xf32>
  return
}

// -----

// Tests that a decode's chunk is whole blocks of 64.
func.func @f(%w: tensor<136xui8>) {
  // expected-error @+1 {{expected a positive chunk of whole blocks of 64 and positive shards, got chunk 32 shards 4}}
  %0 = tg.dequantize_gathered %w chunk 32 shards 4 : tensor<136xui8> -> tensor<128xf32>
  return
}

// -----

// Tests that quantized chunks' bytes follow the chunk and shards
// (2 x (64 + 4)).
func.func @f(%g: tensor<128xf32>) {
  // expected-error @+1 {{expected 128 elements encoding to 136 int8 wire bytes, got 'tensor<128xf32>' -> 'tensor<128xui8>'}}
  %0 = tg.quantize_chunks %g chunk 64 shards 2 : tensor<128xf32> -> tensor<128xui8>
  return
}

// -----

// Tests that quantized chunks are whole blocks of 64.
func.func @f(%g: tensor<96xf32>) {
  // expected-error @+1 {{expected a positive chunk of whole blocks of 64 and positive shards, got chunk 48 shards 2}}
  %0 = tg.quantize_chunks %g chunk 48 shards 2 : tensor<96xf32> -> tensor<102xui8>
  return
}

// -----

// Tests that an all-to-all's input divides into one block per rank.
func.func @f(%w: tensor<135xui8>) {
  // expected-error @+1 {{expected a 1-D input of 2 equal blocks, got 'tensor<135xui8>'}}
  %0 = tg.all_to_all %w over world shards 2 : tensor<135xui8>
  return
}

// -----

// Tests that a reduction of wire chunks gives one chunk.
func.func @f(%w: tensor<136xui8>) {
  // expected-error @+1 {{expected 2 int8 wire chunks of 68 bytes reducing to 64 elements, got 'tensor<136xui8>' -> 'tensor<128xf32>'}}
  %0 = tg.dequantize_reduce %w avg chunk 64 shards 2 : tensor<136xui8> -> tensor<128xf32>
  return
}

// -----

// Tests that a reduction of wire chunks reads every rank's chunk.
func.func @f(%w: tensor<68xui8>) {
  // expected-error @+1 {{expected 2 int8 wire chunks of 68 bytes reducing to 64 elements, got 'tensor<68xui8>' -> 'tensor<64xf32>'}}
  %0 = tg.dequantize_reduce %w sum chunk 64 shards 2 : tensor<68xui8> -> tensor<64xf32>
  return
}

// -----

// Tests that int4 chunks' bytes follow the int4 wire (2 x (32 + 4)), not
// int8's.
func.func @f(%g: tensor<128xf32>) {
  // expected-error @+1 {{expected 128 elements encoding to 72 int4 wire bytes, got 'tensor<128xf32>' -> 'tensor<136xui8>'}}
  %0 = tg.quantize_chunks %g chunk 64 shards 2 format "int4" : tensor<128xf32> -> tensor<136xui8>
  return
}

// -----

// Tests that a reduction of int4 chunks reads int4 chunks.
func.func @f(%w: tensor<136xui8>) {
  // expected-error @+1 {{expected 2 int4 wire chunks of 36 bytes reducing to 64 elements, got 'tensor<136xui8>' -> 'tensor<64xf32>'}}
  %0 = tg.dequantize_reduce %w avg chunk 64 shards 2 format "int4" : tensor<136xui8> -> tensor<64xf32>
  return
}

// -----

// Tests that a wire format other than int8 and int4 is refused.
func.func @f(%g: tensor<128xf32>) {
  // expected-error @+1 {{expected format int8 or int4, got 'int2'}}
  %0 = tg.quantize_chunks %g chunk 64 shards 2 format "int2" : tensor<128xf32> -> tensor<40xui8>
  return
}

// -----

// Tests that a reduction names its wire format from the same two.
func.func @f(%w: tensor<72xui8>) {
  // expected-error @+1 {{expected format int8 or int4, got 'nf4'}}
  %0 = tg.dequantize_reduce %w avg chunk 64 shards 2 format "nf4" : tensor<72xui8> -> tensor<64xf32>
  return
}

// -----

// Tests that an hpZ part is 1/shards of the gathered bucket.
func.func @f(%w: tensor<256xf32>) {
  // expected-error @+1 {{expected the part to be 1/2 of 'tensor<256xf32>', got 'tensor<64xf32>'}}
  %0 = tg.secondary_partition %w shards 2 : tensor<256xf32> -> tensor<64xf32>
  return
}

// -----

// Tests that the node's gather of hpZ parts gives the bucket flat.
tg.param @p : tensor<200xf32> trainable init <"zeros", 0.0 : f64>
tg.bucket @b [@p] offsets [0] size 256 over world shards 4 sharded_params : f32
func.func @f(%s: tensor<64xf32>) {
  // expected-error @+1 {{expected 'tensor<256xf32>' (@b flat), got 'tensor<128xf32>'}}
  %0 = tg.gather_partition %s of @b over node shards 2 : tensor<64xf32> -> tensor<128xf32>
  return
}

// -----

// Tests that only a bucket of sharded parameters is gathered from parts.
tg.param @p : tensor<200xf32> trainable init <"zeros", 0.0 : f64>
tg.bucket @b [@p] offsets [0] size 256 over world shards 4 : f32
func.func @f(%s: tensor<128xf32>) {
  // expected-error @+1 {{expected a device bucket of sharded parameters, got @b}}
  %0 = tg.gather_partition %s of @b over node shards 2 : tensor<128xf32> -> tensor<256xf32>
  return
}
