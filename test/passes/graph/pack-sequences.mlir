// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-pack-sequences | FileCheck %s

// Tests that rotary tables of positions 0..T-1 (Hugging Face's rotate-half
// layout, folded to constants at import) become gathers of their rows at a
// new position_ids input, shared by every rope, and that every causal
// attention is masked per example by the same positions.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x4xi64> {tg.name = "input_ids"}, %[[Q:.+]]: tensor<2x2x4x4xf32>, %[[POS:.+]]: tensor<2x4xi64> {tg.name = "position_ids"})
// CHECK: %[[COS:.+]] = tg.reshape %{{.+}} : tensor<1x1x4x4xf32> -> tensor<4x4xf32>
// CHECK: %[[GCOS:.+]] = tg.embedding %[[COS]], %[[POS]] : (tensor<4x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// CHECK: %[[SIN:.+]] = tg.reshape %{{.+}} : tensor<1x1x4x4xf32> -> tensor<4x4xf32>
// CHECK: %[[GSIN:.+]] = tg.embedding %[[SIN]], %[[POS]]
// CHECK: %[[RQ:.+]] = tg.rope %[[Q]], %[[GCOS]], %[[GSIN]] : (tensor<2x2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
// CHECK: %[[RK:.+]] = tg.rope %[[Q]], %[[GCOS]], %[[GSIN]] {interleaved}
// CHECK: tg.attention %[[RQ]], %[[RK]], %[[Q]] positions %[[POS]] {causal}
// CHECK: tg.attention %[[RQ]], %[[RK]], %[[Q]] positions %[[POS]] {causal, window = 2 : i64}
func.func @forward(%ids: tensor<2x4xi64> {tg.name = "input_ids"}, %q: tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32> {
  %c = arith.constant dense<[[[[1.000000000e+00, 1.000000000e+00, 1.000000000e+00, 1.000000000e+00], [5.403023059e-01, 9.999500004e-01, 5.403023059e-01, 9.999500004e-01], [-4.161468365e-01, 9.998000067e-01, -4.161468365e-01, 9.998000067e-01], [-9.899924966e-01, 9.995500337e-01, -9.899924966e-01, 9.995500337e-01]]]]> : tensor<1x1x4x4xf32>
  %s = arith.constant dense<[[[[0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00], [8.414709848e-01, 9.999833334e-03, 8.414709848e-01, 9.999833334e-03], [9.092974268e-01, 1.999866669e-02, 9.092974268e-01, 1.999866669e-02], [1.411200081e-01, 2.999550020e-02, 1.411200081e-01, 2.999550020e-02]]]]> : tensor<1x1x4x4xf32>
  %cos = tg.reshape %c : tensor<1x1x4x4xf32> -> tensor<4x4xf32>
  %sin = tg.reshape %s : tensor<1x1x4x4xf32> -> tensor<4x4xf32>
  %rq = tg.rope %q, %cos, %sin : (tensor<2x2x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %rk = tg.rope %q, %cos, %sin {interleaved} : (tensor<2x2x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %a = tg.attention %rq, %rk, %q {causal} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %b = tg.attention %rq, %rk, %q {causal, window = 2 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %y = tg.add %a, %b : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %y : tensor<2x2x4x4xf32>
}

// -----

tg.param @transformer.wte.weight : tensor<16x4xf32>
tg.param @transformer.wpe.weight : tensor<8x4xf32>

// Tests that a learned position embedding (GPT-2's wpe rows 0..T-1, a
// slice after import) becomes a lookup at position_ids.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%{{[a-z0-9]+}}: tensor<2x4xi64>, %[[POS:[a-z0-9]+]]: tensor<2x4xi64> {tg.name = "position_ids"})
// CHECK: %[[WPE:.+]] = tg.param_ref @transformer.wpe.weight
// CHECK: %[[TOK:.+]] = tg.embedding
// CHECK: %[[P:.+]] = tg.embedding %[[WPE]], %[[POS]] {tg.module = "transformer.wpe"} : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// CHECK: %[[H:.+]] = tg.add %[[TOK]], %[[P]] : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} positions %[[POS]] {causal}
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x1x4x4xf32> {
  %wte = tg.param_ref @transformer.wte.weight : tensor<16x4xf32>
  %wpe = tg.param_ref @transformer.wpe.weight : tensor<8x4xf32>
  %tok = tg.embedding %wte, %ids : (tensor<16x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
  %rows = tg.slice %wpe starts = [0, 0] ends = [4, 4] steps = [1, 1] : tensor<8x4xf32> -> tensor<4x4xf32>
  %pos = tg.reshape %rows : tensor<4x4xf32> -> tensor<1x4x4xf32>
  %h = tg.add %tok, %pos : (tensor<2x4x4xf32>, tensor<1x4x4xf32>) -> tensor<2x4x4xf32>
  %x = tg.reshape %h : tensor<2x4x4xf32> -> tensor<2x1x4x4xf32>
  %y = tg.attention %x, %x, %x {causal} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  return %y : tensor<2x1x4x4xf32>
}

// -----

// Tests that a model whose positions cannot be found is not packed.
// expected-error @+1 {{sample packing found no positions in @forward to restart per example}}
func.func @forward(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %y = tg.attention %x, %x, %x {causal} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}

// -----

// Tests that a non-causal attention cannot keep packed examples apart.
func.func @forward(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error @+1 {{sample packing needs causal attention}}
  %y = tg.attention %x, %x, %x : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}

// -----

// Tests that rotary tables of positions 1..T (not 0..T-1) are refused.
func.func @forward(%q: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %c = arith.constant dense<[[5.403023059e-01, 9.999500004e-01, 5.403023059e-01, 9.999500004e-01], [-4.161468365e-01, 9.998000067e-01, -4.161468365e-01, 9.998000067e-01], [-9.899924966e-01, 9.995500337e-01, -9.899924966e-01, 9.995500337e-01], [-6.536436209e-01, 9.992001067e-01, -6.536436209e-01, 9.992001067e-01]]> : tensor<4x4xf32>
  %s = arith.constant dense<[[8.414709848e-01, 9.999833334e-03, 8.414709848e-01, 9.999833334e-03], [9.092974268e-01, 1.999866669e-02, 9.092974268e-01, 1.999866669e-02], [1.411200081e-01, 2.999550020e-02, 1.411200081e-01, 2.999550020e-02], [-7.568024953e-01, 3.998933419e-02, -7.568024953e-01, 3.998933419e-02]]> : tensor<4x4xf32>
  // expected-error @+1 {{its cos/sin tables are not the rotary angles of positions 0..3 (row 0 is not the angle 0 of position 0 (row 0, column 0))}}
  %r = tg.rope %q, %c, %s : (tensor<1x1x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4x4xf32>
  %y = tg.attention %r, %r, %r {causal} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}

// -----

// Tests that tables that are not rotations of one angle per row are refused.
func.func @forward(%q: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %c = arith.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %s = arith.constant dense<0.0> : tensor<4x4xf32>
  // expected-error @+1 {{row t + 1 is not row t advanced by one position (row 3, column 0)}}
  %r = tg.rope %q, %c, %s : (tensor<1x1x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4x4xf32>
  %y = tg.attention %r, %r, %r {causal} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}

// -----

// Tests that attention left unraised (which could not be masked) is refused.
// expected-error @+1 {{sample packing needs every attention raised to tg.attention}}
func.func @forward(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> attributes {tg.unraised_attention = [{module = "model.layers.0.self_attn", reason = "mask"}]} {
  %y = tg.attention %x, %x, %x {causal} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}

// -----

// Tests that a rotary table read outside tg.rope is refused.
func.func @forward(%q: tensor<1x1x4x4xf32>) -> tensor<4x4xf32> {
  %c = arith.constant dense<[[1.000000000e+00, 1.000000000e+00, 1.000000000e+00, 1.000000000e+00], [5.403023059e-01, 9.999500004e-01, 5.403023059e-01, 9.999500004e-01], [-4.161468365e-01, 9.998000067e-01, -4.161468365e-01, 9.998000067e-01], [-9.899924966e-01, 9.995500337e-01, -9.899924966e-01, 9.995500337e-01]]> : tensor<4x4xf32>
  %s = arith.constant dense<[[0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00], [8.414709848e-01, 9.999833334e-03, 8.414709848e-01, 9.999833334e-03], [9.092974268e-01, 1.999866669e-02, 9.092974268e-01, 1.999866669e-02], [1.411200081e-01, 2.999550020e-02, 1.411200081e-01, 2.999550020e-02]]> : tensor<4x4xf32>
  %r = tg.rope %q, %c, %s : (tensor<1x1x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4x4xf32>
  %y = tg.attention %r, %r, %r {causal} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  // expected-error @+1 {{sample packing cannot give per-example positions to this op: it reads a rotary table of positions 0..3 outside tg.rope}}
  %z = tg.add %c, %s : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %z : tensor<4x4xf32>
}

// -----

// Tests that an interleaved (GPT-J) table, one angle per pair widened to
// both members by raise-rope's reshape/broadcast, is recognized through the
// widening and gathered where tg.rope reads it.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[POS:[a-z0-9]+]]: tensor<1x4xi64> {tg.name = "position_ids"}
// CHECK: %[[C:.+]] = tg.reshape %{{.+}} : tensor<4x2x2xf32> -> tensor<4x4xf32>
// CHECK: %[[GC:.+]] = tg.embedding %[[C]], %[[POS]] : (tensor<4x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
// CHECK: tg.rope %{{.+}}, %[[GC]], %{{.+}} {interleaved}
func.func @forward(%q: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %c = arith.constant dense<[[1.000000000e+00, 1.000000000e+00], [5.403023059e-01, 9.999500004e-01], [-4.161468365e-01, 9.998000067e-01], [-9.899924966e-01, 9.995500337e-01]]> : tensor<4x2xf32>
  %s = arith.constant dense<[[0.000000000e+00, 0.000000000e+00], [8.414709848e-01, 9.999833334e-03], [9.092974268e-01, 1.999866669e-02], [1.411200081e-01, 2.999550020e-02]]> : tensor<4x2xf32>
  %c1 = tg.reshape %c : tensor<4x2xf32> -> tensor<4x2x1xf32>
  %c2 = tg.broadcast %c1 : tensor<4x2x1xf32> -> tensor<4x2x2xf32>
  %cw = tg.reshape %c2 : tensor<4x2x2xf32> -> tensor<4x4xf32>
  %s1 = tg.reshape %s : tensor<4x2xf32> -> tensor<4x2x1xf32>
  %s2 = tg.broadcast %s1 : tensor<4x2x1xf32> -> tensor<4x2x2xf32>
  %sw = tg.reshape %s2 : tensor<4x2x2xf32> -> tensor<4x4xf32>
  %r = tg.rope %q, %cw, %sw {interleaved} : (tensor<1x1x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4x4xf32>
  %y = tg.attention %r, %r, %r {causal} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}

// -----

tg.param @model.rotary_emb.inv_freq : tensor<2xf32>

// Tests that rotary tables computed at run time, as the dynamo exporter
// writes them (cos and sin of inv_freq times a constant of the positions
// 0..T-1), become gathers of their rows at position_ids: their dataflow
// keeps rows apart, so row t is position t's.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[POS:[a-z0-9]+]]: tensor<2x4xi64> {tg.name = "position_ids"}
// CHECK: %[[COS:.+]] = tg.reshape %{{.+}} : tensor<1x4x4xf32> -> tensor<4x4xf32>
// CHECK: %[[GCOS:.+]] = tg.embedding %[[COS]], %[[POS]] : (tensor<4x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// CHECK: %[[SIN:.+]] = tg.reshape %{{.+}} : tensor<1x4x4xf32> -> tensor<4x4xf32>
// CHECK: %[[GSIN:.+]] = tg.embedding %[[SIN]], %[[POS]]
// CHECK: tg.rope %{{.+}}, %[[GCOS]], %[[GSIN]] : (tensor<2x2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
func.func @forward(%ids: tensor<2x4xi64> {tg.name = "input_ids"}, %q: tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32> {
  %positions = arith.constant dense<[[[0.0], [1.0], [2.0], [3.0]]]> : tensor<1x4x1xf32>
  %inv = tg.param_ref @model.rotary_emb.inv_freq : tensor<2xf32>
  %angles = tg.mul %inv, %positions : (tensor<2xf32>, tensor<1x4x1xf32>) -> tensor<1x4x2xf32>
  %both = tg.concat %angles, %angles axis = 2 : (tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x4xf32>
  %c = tg.cos %both : tensor<1x4x4xf32>
  %s = tg.sin %both : tensor<1x4x4xf32>
  %cos = tg.reshape %c : tensor<1x4x4xf32> -> tensor<4x4xf32>
  %sin = tg.reshape %s : tensor<1x4x4xf32> -> tensor<4x4xf32>
  %rq = tg.rope %q, %cos, %sin : (tensor<2x2x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %a = tg.attention %rq, %rq, %q {causal} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %a : tensor<2x2x4x4xf32>
}

// -----

tg.param @model.rotary_emb.inv_freq : tensor<2xf32>

// Tests that a computed table whose rows are mixed (here summed over the
// positions, so every row reads every position) is refused, naming the op.
func.func @forward(%ids: tensor<2x4xi64> {tg.name = "input_ids"}, %q: tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32> {
  %positions = arith.constant dense<[[[0.0], [1.0], [2.0], [3.0]]]> : tensor<1x4x1xf32>
  %inv = tg.param_ref @model.rotary_emb.inv_freq : tensor<2xf32>
  %angles = tg.mul %inv, %positions : (tensor<2xf32>, tensor<1x4x1xf32>) -> tensor<1x4x2xf32>
  %total = tg.reduce_sum %angles axes = [1] keep_dims : tensor<1x4x2xf32> -> tensor<1x1x2xf32>
  %mixed = tg.add %angles, %total : (tensor<1x4x2xf32>, tensor<1x1x2xf32>) -> tensor<1x4x2xf32>
  %both = tg.concat %mixed, %mixed axis = 2 : (tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x4xf32>
  %c = tg.cos %both : tensor<1x4x4xf32>
  %s = tg.sin %both : tensor<1x4x4xf32>
  %cos = tg.reshape %c : tensor<1x4x4xf32> -> tensor<4x4xf32>
  %sin = tg.reshape %s : tensor<1x4x4xf32> -> tensor<4x4xf32>
  // expected-error @+1 {{its cos/sin tables are not the rotary angles of positions 0..3 (as a constant: it is not computed from a constant (the export's positions); as computed: its rows are not computed from the positions alone: a value broadcast over the rows but computed from the positions ('tg.reduce_sum'))}}
  %rq = tg.rope %q, %cos, %sin : (tensor<2x2x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %a = tg.attention %rq, %rq, %q {causal} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %a : tensor<2x2x4x4xf32>
}

// -----

// Tests that an export taking position_ids itself (its rotary tables
// computed from them at run time, as optimum's decoder exports are) keeps
// its inputs: no second position_ids is added, no table is replaced, and
// every causal attention is masked per example by the export's own input.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x4xi64> {tg.name = "input_ids"}, %[[POS:.+]]: tensor<2x4xi64> {tg.name = "position_ids"}, %[[Q:.+]]: tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK-NOT: tg.embedding
// CHECK: tg.attention %{{.+}}, %{{.+}}, %[[Q]] positions %[[POS]] {causal}
func.func @forward(%ids: tensor<2x4xi64> {tg.name = "input_ids"}, %pos: tensor<2x4xi64> {tg.name = "position_ids"}, %q: tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32> {
  %p = tg.cast %pos : tensor<2x4xi64> -> tensor<2x4xf32>
  %p3 = tg.reshape %p : tensor<2x4xf32> -> tensor<2x4x1xf32>
  %freq = arith.constant dense<[1.0, 0.01, 1.0, 0.01]> : tensor<4xf32>
  %angles = tg.mul %p3, %freq : (tensor<2x4x1xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  %cos = tg.cos %angles : tensor<2x4x4xf32>
  %sin = tg.sin %angles : tensor<2x4x4xf32>
  %rq = tg.rope %q, %cos, %sin : (tensor<2x2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %a = tg.attention %rq, %rq, %q {causal} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %a : tensor<2x2x4x4xf32>
}
