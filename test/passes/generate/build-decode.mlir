// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-build-decode="eos-token-ids=15" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-build-decode="eos-token-ids=15 prefill-chunk=3" | FileCheck %s --check-prefix=PREFILL

tg.param @model.embed_tokens.weight : tensor<16x4xf32>
tg.param @wq : tensor<4x4xf32>
tg.param @wk : tensor<4x4xf32>
tg.param @wv : tensor<4x4xf32>
tg.param @lm_head.weight : tensor<16x4xf32>

// Tests that a forward graph at seq 4 becomes a one-token decode step: the
// sequence dim of every value is 1, rotary rows are gathered at the run-time
// position, each attention writes its token's keys and values into its
// caches (tg.state key_cache / value_cache, [B, Hkv, 4, D]) at the position
// and reads the whole caches with the keys after the position masked by a
// bias built from it; the plan's generation record names the cache length,
// batch, vocabulary and eos ids. A linear weight the exporter renamed
// gets its Hugging Face name, so `tailor generate --adapter` finds it.
// CHECK: module attributes {tg.generation = {batch = 1 : i64, eos_token_ids = array<i64: 15>, max_seq_len = 4 : i64, vocab_size = 16 : i64}}
// CHECK: tg.param @wq : tensor<4x4xf32> {tg.export_name = "model.layers.0.self_attn.q_proj.weight"}
// CHECK: tg.param @wk : tensor<4x4xf32>{{$}}
// CHECK: tg.state @model.layers.0.self_attn.key_cache : tensor<1x1x4x4xf32> of @model.layers.0.self_attn key_cache
// CHECK: tg.state @model.layers.0.self_attn.value_cache : tensor<1x1x4x4xf32> of @model.layers.0.self_attn value_cache
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[IDS:.+]]: tensor<1x1xi64> {tg.name = "input_ids"}, %[[POS:.+]]: tensor<i64> {tg.name = "position"}) -> (tensor<1x1x16xf32> {tg.name = "logits"})
// CHECK: %[[KEYS:.+]] = arith.constant dense<{{\[\[\[\[}}0, 1, 2, 3]]]]> : tensor<1x1x1x4xi64>
// CHECK: %[[AT:.+]] = tg.reshape %[[POS]] : tensor<i64> -> tensor<1x1x1x1xi64>
// CHECK: %[[FUTURE:.+]] = tg.gt %[[KEYS]], %[[AT]]
// CHECK: %[[BIAS:.+]] = tg.select %[[FUTURE]], %{{.+}}, %{{.+}} : {{.+}} -> tensor<1x1x1x4xf32>
// CHECK: %[[ROW:.+]] = tg.reshape %[[POS]] : tensor<i64> -> tensor<1x1xi64>
// CHECK: %[[COS:.+]] = tg.embedding %{{.+}}, %[[ROW]] : (tensor<4x4xf32>, tensor<1x1xi64>) -> tensor<1x1x4xf32>
// CHECK: tg.embedding %{{.+}}, %[[IDS]] : (tensor<16x4xf32>, tensor<1x1xi64>) -> tensor<1x1x4xf32>
// CHECK: %[[RQ:.+]] = tg.rope %{{.+}}, %[[COS]], %{{.+}} : (tensor<1x1x1x4xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x1x4xf32>
// CHECK: %[[RK:.+]] = tg.rope
// CHECK: tg.cache_write %[[RK]] into @model.layers.0.self_attn.key_cache at %[[POS]] : tensor<1x1x1x4xf32>, tensor<i64>
// CHECK: tg.cache_write %{{.+}} into @model.layers.0.self_attn.value_cache at %[[POS]]
// CHECK: %[[KC:.+]] = tg.state_ref @model.layers.0.self_attn.key_cache : tensor<1x1x4x4xf32>
// CHECK: %[[VC:.+]] = tg.state_ref @model.layers.0.self_attn.value_cache : tensor<1x1x4x4xf32>
// CHECK: tg.attention %[[RQ]], %[[KC]], %[[VC]] bias %[[BIAS]] {tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn"} : (tensor<1x1x1x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x1x1x4xf32>
// CHECK: %[[LOGITS:.+]] = tg.linear %{{.+}}, %{{.+}} : (tensor<1x1x4xf32>, tensor<16x4xf32>) -> tensor<1x1x16xf32>
// CHECK: return %[[LOGITS]] : tensor<1x1x16xf32>
// CHECK-NOT: func.func @forward
// Tests that with prefill-chunk 3 a prefill step runs 3 tokens at positions
// start + iota(3), clamped to the last row of the cache (3) for a padded
// tail chunk; gathers their rotary rows; writes their keys and values into
// the caches decode reads (declared once) at the start; masks each query
// row by its own position with a [1, 1, 3, 4] bias; and, where the
// attention's result alone carries the sequence, keeps row `prefill_last`
// only, so lm_head runs on one row per sequence.
// PREFILL: tg.state @model.layers.0.self_attn.key_cache : tensor<1x1x4x4xf32>
// PREFILL-NOT: tg.state @model.layers.0.self_attn.key_cache
// PREFILL-LABEL: func.func @decode
// PREFILL-LABEL: func.func @prefill
// PREFILL-SAME: (%[[IDS:.+]]: tensor<1x3xi64> {tg.name = "prefill_input_ids"}, %[[START:.+]]: tensor<i64> {tg.name = "prefill_position"}, %[[LAST:.+]]: tensor<i64> {tg.name = "prefill_last"}) -> (tensor<1x1x16xf32> {tg.name = "prefill_logits"})
// PREFILL: %[[AT0:.+]] = tg.reshape %[[START]] : tensor<i64> -> tensor<1x1xi64>
// PREFILL: %[[IOTA:.+]] = arith.constant dense<{{\[\[}}0, 1, 2]]> : tensor<1x3xi64>
// PREFILL: %[[SUM:.+]] = tg.add %[[AT0]], %[[IOTA]] : (tensor<1x1xi64>, tensor<1x3xi64>) -> tensor<1x3xi64>
// PREFILL: %[[END:.+]] = arith.constant dense<3> : tensor<1x1xi64>
// PREFILL: %[[ROWS:.+]] = tg.min %[[SUM]], %[[END]] : (tensor<1x3xi64>, tensor<1x1xi64>) -> tensor<1x3xi64>
// PREFILL: %[[KEYS:.+]] = arith.constant dense<{{\[\[\[\[}}0, 1, 2, 3]]]]> : tensor<1x1x1x4xi64>
// PREFILL: %[[AT:.+]] = tg.reshape %[[ROWS]] : tensor<1x3xi64> -> tensor<1x1x3x1xi64>
// PREFILL: %[[FUTURE:.+]] = tg.gt %[[KEYS]], %[[AT]] : (tensor<1x1x1x4xi64>, tensor<1x1x3x1xi64>) -> tensor<1x1x3x4xi1>
// PREFILL: %[[BIAS:.+]] = tg.select %[[FUTURE]], %{{.+}}, %{{.+}} : {{.+}} -> tensor<1x1x3x4xf32>
// PREFILL: %[[COS:.+]] = tg.embedding %{{.+}}, %[[ROWS]] : (tensor<4x4xf32>, tensor<1x3xi64>) -> tensor<1x3x4xf32>
// PREFILL: tg.embedding %{{.+}}, %[[IDS]] : (tensor<16x4xf32>, tensor<1x3xi64>) -> tensor<1x3x4xf32>
// PREFILL: %[[RQ:.+]] = tg.rope %{{.+}}, %[[COS]], %{{.+}} : (tensor<1x1x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>) -> tensor<1x1x3x4xf32>
// PREFILL: %[[RK:.+]] = tg.rope
// PREFILL: tg.cache_write %[[RK]] into @model.layers.0.self_attn.key_cache at %[[START]] : tensor<1x1x3x4xf32>, tensor<i64>
// PREFILL: tg.cache_write %{{.+}} into @model.layers.0.self_attn.value_cache at %[[START]]
// PREFILL: %[[KC:.+]] = tg.state_ref @model.layers.0.self_attn.key_cache : tensor<1x1x4x4xf32>
// PREFILL: %[[VC:.+]] = tg.state_ref @model.layers.0.self_attn.value_cache : tensor<1x1x4x4xf32>
// PREFILL: %[[A:.+]] = tg.attention %[[RQ]], %[[KC]], %[[VC]] bias %[[BIAS]] {{.+}} : (tensor<1x1x3x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
// PREFILL: %[[INDEX:.+]] = tg.reshape %[[LAST]] : tensor<i64> -> tensor<1x1x1x1xi64>
// PREFILL: %[[INDICES:.+]] = tg.broadcast %[[INDEX]] : tensor<1x1x1x1xi64> -> tensor<1x1x1x4xi64>
// PREFILL: %[[ROW:.+]] = tg.gather_elements %[[A]], %[[INDICES]] axis = 2 : (tensor<1x1x3x4xf32>, tensor<1x1x1x4xi64>) -> tensor<1x1x1x4xf32>
// PREFILL: tg.transpose %[[ROW]] permutation = [0, 2, 1, 3] : tensor<1x1x1x4xf32> -> tensor<1x1x1x4xf32>
// PREFILL: %[[LOGITS:.+]] = tg.linear %{{.+}}, %{{.+}} : (tensor<1x1x4xf32>, tensor<16x4xf32>) -> tensor<1x1x16xf32>
// PREFILL: return %[[LOGITS]] : tensor<1x1x16xf32>
// PREFILL-NOT: func.func @forward
func.func @forward(%ids: tensor<1x4xi64> {tg.name = "input_ids"}) -> (tensor<1x4x16xf32> {tg.name = "logits"}) {
  %c = arith.constant dense<[[[[1.000000000e+00, 1.000000000e+00, 1.000000000e+00, 1.000000000e+00], [5.403023059e-01, 9.999500004e-01, 5.403023059e-01, 9.999500004e-01], [-4.161468365e-01, 9.998000067e-01, -4.161468365e-01, 9.998000067e-01], [-9.899924966e-01, 9.995500337e-01, -9.899924966e-01, 9.995500337e-01]]]]> : tensor<1x1x4x4xf32>
  %s = arith.constant dense<[[[[0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00], [8.414709848e-01, 9.999833334e-03, 8.414709848e-01, 9.999833334e-03], [9.092974268e-01, 1.999866669e-02, 9.092974268e-01, 1.999866669e-02], [1.411200081e-01, 2.999550020e-02, 1.411200081e-01, 2.999550020e-02]]]]> : tensor<1x1x4x4xf32>
  %cos = tg.reshape %c : tensor<1x1x4x4xf32> -> tensor<4x4xf32>
  %sin = tg.reshape %s : tensor<1x1x4x4xf32> -> tensor<4x4xf32>
  %e = tg.param_ref @model.embed_tokens.weight : tensor<16x4xf32>
  %x = tg.embedding %e, %ids : (tensor<16x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
  %wq = tg.param_ref @wq : tensor<4x4xf32>
  %wk = tg.param_ref @wk : tensor<4x4xf32>
  %wv = tg.param_ref @wv : tensor<4x4xf32>
  %q = tg.linear %x, %wq {tg.module = "model.layers.0.self_attn.q_proj"} : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
  %k = tg.linear %x, %wk : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
  %v = tg.linear %x, %wv : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
  %q4 = tg.reshape %q : tensor<1x4x4xf32> -> tensor<1x4x1x4xf32>
  %k4 = tg.reshape %k : tensor<1x4x4xf32> -> tensor<1x4x1x4xf32>
  %v4 = tg.reshape %v : tensor<1x4x4xf32> -> tensor<1x4x1x4xf32>
  %qt = tg.transpose %q4 permutation = [0, 2, 1, 3] : tensor<1x4x1x4xf32> -> tensor<1x1x4x4xf32>
  %kt = tg.transpose %k4 permutation = [0, 2, 1, 3] : tensor<1x4x1x4xf32> -> tensor<1x1x4x4xf32>
  %vt = tg.transpose %v4 permutation = [0, 2, 1, 3] : tensor<1x4x1x4xf32> -> tensor<1x1x4x4xf32>
  %rq = tg.rope %qt, %cos, %sin : (tensor<1x1x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4x4xf32>
  %rk = tg.rope %kt, %cos, %sin : (tensor<1x1x4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4x4xf32>
  %a = tg.attention %rq, %rk, %vt {causal, tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn"} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %at = tg.transpose %a permutation = [0, 2, 1, 3] : tensor<1x1x4x4xf32> -> tensor<1x4x1x4xf32>
  %ar = tg.reshape %at : tensor<1x4x1x4xf32> -> tensor<1x4x4xf32>
  %h = tg.param_ref @lm_head.weight : tensor<16x4xf32>
  %logits = tg.linear %ar, %h : (tensor<1x4x4xf32>, tensor<16x4xf32>) -> tensor<1x4x16xf32>
  return %logits : tensor<1x4x16xf32>
}

// -----

tg.param @transformer.wte.weight : tensor<16x4xf32>
tg.param @transformer.wpe.weight : tensor<8x4xf32>

// Tests that a learned position embedding (GPT-2's wpe rows 0..T-1) is read
// at the position, that a batch of 2 shares it, and that a sliding window
// also masks the keys `window` or more before the position.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x1xi64> {tg.name = "input_ids"}, %[[POS:.+]]: tensor<i64> {tg.name = "position"})
// CHECK: %[[AT:.+]] = tg.reshape %[[POS]] : tensor<i64> -> tensor<1x1x1x1xi64>
// CHECK: %[[FUTURE:.+]] = tg.gt %{{.+}}, %[[AT]]
// CHECK: %[[FIRST:.+]] = tg.sub %[[AT]], %{{.+}}
// CHECK: %[[OLD:.+]] = tg.lt %{{.+}}, %[[FIRST]]
// CHECK: %[[MASKED:.+]] = tg.select %[[OLD]], %{{.+}}, %[[FUTURE]]
// CHECK: %[[BIAS:.+]] = tg.select %[[MASKED]]
// CHECK: %[[ROW:.+]] = tg.reshape %[[POS]] : tensor<i64> -> tensor<1x1xi64>
// CHECK: %[[ROWS:.+]] = tg.broadcast %[[ROW]] : tensor<1x1xi64> -> tensor<2x1xi64>
// CHECK: tg.embedding %{{.+}}, %[[ROWS]] {tg.module = "transformer.wpe"} : (tensor<8x4xf32>, tensor<2x1xi64>) -> tensor<2x1x4xf32>
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} bias %[[BIAS]] : (tensor<2x1x1x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<2x1x1x4xf32>
// Tests that prefill broadcasts its rows' positions over a batch of 2 for
// the learned position rows, that the sliding window also masks, per query
// row, the keys `window` or more before the row's position, and that the
// last row is gathered right after the attention that alone carries the
// sequence.
// PREFILL-LABEL: func.func @prefill
// PREFILL-SAME: (%[[IDS:.+]]: tensor<2x3xi64> {tg.name = "prefill_input_ids"}, %{{.+}}: tensor<i64> {tg.name = "prefill_position"}, %[[LAST:.+]]: tensor<i64> {tg.name = "prefill_last"}) -> (tensor<2x1x16xf32> {tg.name = "prefill_logits"})
// PREFILL: %[[ROWS:.+]] = tg.min
// PREFILL: %[[AT:.+]] = tg.reshape %[[ROWS]] : tensor<1x3xi64> -> tensor<1x1x3x1xi64>
// PREFILL: %[[FUTURE:.+]] = tg.gt %{{.+}}, %[[AT]]
// PREFILL: %[[FIRST:.+]] = tg.sub %[[AT]], %{{.+}} : (tensor<1x1x3x1xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x3x1xi64>
// PREFILL: %[[OLD:.+]] = tg.lt %{{.+}}, %[[FIRST]] : (tensor<1x1x1x4xi64>, tensor<1x1x3x1xi64>) -> tensor<1x1x3x4xi1>
// PREFILL: %[[MASKED:.+]] = tg.select %[[OLD]], %{{.+}}, %[[FUTURE]]
// PREFILL: %[[BIAS:.+]] = tg.select %[[MASKED]]
// PREFILL: %[[BATCH:.+]] = tg.broadcast %[[ROWS]] : tensor<1x3xi64> -> tensor<2x3xi64>
// PREFILL: tg.embedding %{{.+}}, %[[BATCH]] {tg.module = "transformer.wpe"} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// PREFILL: %[[A:.+]] = tg.attention %{{.+}}, %{{.+}}, %{{.+}} bias %[[BIAS]] : (tensor<2x1x3x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<1x1x3x4xf32>) -> tensor<2x1x3x4xf32>
// PREFILL: tg.gather_elements %[[A]], %{{.+}} axis = 2 : (tensor<2x1x3x4xf32>, tensor<2x1x1x4xi64>) -> tensor<2x1x1x4xf32>
// PREFILL: tg.linear %{{.+}}, %{{.+}} : (tensor<2x1x4xf32>, tensor<16x4xf32>) -> tensor<2x1x16xf32>
func.func @forward(%ids: tensor<2x4xi64> {tg.name = "input_ids"}) -> (tensor<2x4x16xf32> {tg.name = "logits"}) {
  %wte = tg.param_ref @transformer.wte.weight : tensor<16x4xf32>
  %wpe = tg.param_ref @transformer.wpe.weight : tensor<8x4xf32>
  %tok = tg.embedding %wte, %ids : (tensor<16x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
  %rows = tg.slice %wpe starts = [0, 0] ends = [4, 4] steps = [1, 1] : tensor<8x4xf32> -> tensor<4x4xf32>
  %pos = tg.reshape %rows : tensor<4x4xf32> -> tensor<1x4x4xf32>
  %h = tg.add %tok, %pos : (tensor<2x4x4xf32>, tensor<1x4x4xf32>) -> tensor<2x4x4xf32>
  %x = tg.reshape %h : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
  %xt = tg.transpose %x permutation = [0, 2, 1, 3] : tensor<2x4x1x4xf32> -> tensor<2x1x4x4xf32>
  %y = tg.attention %xt, %xt, %xt {causal, window = 2 : i64} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %yt = tg.transpose %y permutation = [0, 2, 1, 3] : tensor<2x1x4x4xf32> -> tensor<2x4x1x4xf32>
  %yr = tg.reshape %yt : tensor<2x4x1x4xf32> -> tensor<2x4x4xf32>
  %logits = tg.linear %yr, %wte : (tensor<2x4x4xf32>, tensor<16x4xf32>) -> tensor<2x4x16xf32>
  return %logits : tensor<2x4x16xf32>
}

// -----

// Tests that a model whose attention was left as matmul/softmax is refused,
// naming the layer.
// expected-error @+1 {{attention not raised in model.layers.3.self_attn: no causal mask found (decode needs tg.attention to read a KV cache)}}
func.func @forward(%ids: tensor<1x4xi64> {tg.name = "input_ids"}) -> (tensor<1x4x4xf32> {tg.name = "logits"}) attributes {tg.unraised_attention = [{module = "model.layers.3.self_attn", reason = "no causal mask found"}]} {
  %x = arith.constant dense<0.0> : tensor<1x4x4xf32>
  return %x : tensor<1x4x4xf32>
}

// -----

tg.param @transformer.word_embeddings.weight : tensor<16x4xf32>
tg.param @slopes : tensor<2x1x1xf32>

// Tests that an attention bias over the key positions alone (ALiBi as the
// dynamo exporter writes BLOOM's: slopes times the key positions 0..N-1,
// computed at run time) is kept for the N cache rows and added to the
// step's mask, and that such a model gets no position_ids.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%{{.+}}: tensor<1x1xi64> {tg.name = "input_ids"}, %{{.+}}: tensor<i64> {tg.name = "position"})
// CHECK: %[[MASK:.+]] = tg.select
// CHECK: %[[ALIBI:.+]] = tg.reshape %{{.+}} : tensor<2x1x4xf32> -> tensor<1x2x1x4xf32>
// CHECK: %[[BIAS:.+]] = tg.add %[[MASK]], %[[ALIBI]] : (tensor<1x1x1x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x1x4xf32>
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} bias %[[BIAS]] : (tensor<1x2x1x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x1x2xf32>
// PREFILL-LABEL: func.func @prefill
// PREFILL: %[[MASK:.+]] = tg.select
// PREFILL: %[[ALIBI:.+]] = tg.reshape %{{.+}} : tensor<2x1x4xf32> -> tensor<1x2x1x4xf32>
// PREFILL: %[[BIAS:.+]] = tg.add %[[MASK]], %[[ALIBI]] : (tensor<1x1x3x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x3x4xf32>
// PREFILL: tg.attention %{{.+}}, %{{.+}}, %{{.+}} bias %[[BIAS]] : (tensor<1x2x3x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x2xf32>
func.func @forward(%ids: tensor<1x4xi64> {tg.name = "input_ids"}) -> (tensor<1x4x16xf32> {tg.name = "logits"}) {
  %wte = tg.param_ref @transformer.word_embeddings.weight : tensor<16x4xf32>
  %slopes = tg.param_ref @slopes : tensor<2x1x1xf32>
  %keys = arith.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32>
  %alibi = tg.mul %slopes, %keys : (tensor<2x1x1xf32>, tensor<4xf32>) -> tensor<2x1x4xf32>
  %bias = tg.reshape %alibi : tensor<2x1x4xf32> -> tensor<1x2x1x4xf32>
  %tok = tg.embedding %wte, %ids : (tensor<16x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
  %x = tg.reshape %tok : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %xt = tg.transpose %x permutation = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
  %y = tg.attention %xt, %xt, %xt bias %bias {causal} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x4x2xf32>
  %yt = tg.transpose %y permutation = [0, 2, 1, 3] : tensor<1x2x4x2xf32> -> tensor<1x4x2x2xf32>
  %yr = tg.reshape %yt : tensor<1x4x2x2xf32> -> tensor<1x4x4xf32>
  %logits = tg.linear %yr, %wte : (tensor<1x4x4xf32>, tensor<16x4xf32>) -> tensor<1x4x16xf32>
  return %logits : tensor<1x4x16xf32>
}

// -----

tg.param @transformer.wte.weight : tensor<16x4xf32>
tg.param @transformer.wpe.weight : tensor<8x4xf32>

// Tests that an export's attention_mask input (a padding bias over the keys,
// select(mask, 0, -inf)) becomes a constant of ones in the steps, which
// take input_ids and the position only, and that such a bias is not taken
// for ALiBi: the learned position rows are still read at the position.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%{{.+}}: tensor<1x1xi64> {tg.name = "input_ids"}, %[[POS:.+]]: tensor<i64> {tg.name = "position"}) -> (tensor<1x1x16xf32> {tg.name = "logits"})
// CHECK: %[[ONES:.+]] = arith.constant dense<1> : tensor<1x4xi64>
// CHECK: tg.embedding %{{.+}}, %{{.+}} {tg.module = "transformer.wpe"} : (tensor<8x4xf32>, tensor<1x1xi64>) -> tensor<1x1x4xf32>
// CHECK: tg.cast %[[ONES]] : tensor<1x4xi64> -> tensor<1x4xi1>
// CHECK-NOT: attention_mask
func.func @forward(%ids: tensor<1x4xi64> {tg.name = "input_ids"}, %mask: tensor<1x4xi64> {tg.name = "attention_mask"}) -> (tensor<1x4x16xf32> {tg.name = "logits"}) {
  %wte = tg.param_ref @transformer.wte.weight : tensor<16x4xf32>
  %wpe = tg.param_ref @transformer.wpe.weight : tensor<8x4xf32>
  %tok = tg.embedding %wte, %ids : (tensor<16x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
  %rows = tg.slice %wpe starts = [0, 0] ends = [4, 4] steps = [1, 1] : tensor<8x4xf32> -> tensor<4x4xf32>
  %pos = tg.reshape %rows : tensor<4x4xf32> -> tensor<1x4x4xf32>
  %e = tg.add %tok, %pos : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %keep = tg.cast %mask : tensor<1x4xi64> -> tensor<1x4xi1>
  %keep4 = tg.reshape %keep : tensor<1x4xi1> -> tensor<1x1x1x4xi1>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %bias = tg.select %keep4, %zero, %ninf : (tensor<1x1x1x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x1x4xf32>
  %x = tg.reshape %e : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %xt = tg.transpose %x permutation = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
  %y = tg.attention %xt, %xt, %xt bias %bias {causal} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x2xf32>
  %yt = tg.transpose %y permutation = [0, 2, 1, 3] : tensor<1x2x4x2xf32> -> tensor<1x4x2x2xf32>
  %yr = tg.reshape %yt : tensor<1x4x2x2xf32> -> tensor<1x4x4xf32>
  %logits = tg.linear %yr, %wte : (tensor<1x4x4xf32>, tensor<16x4xf32>) -> tensor<1x4x16xf32>
  return %logits : tensor<1x4x16xf32>
}

// -----

tg.param @transformer.word_embeddings.weight : tensor<16x4xf32>

// Tests that an attention bias computed from the tokens (a padding mask:
// it would see the step's tokens, not the cache's) is refused.
func.func @forward(%ids: tensor<1x4xi64> {tg.name = "input_ids"}) -> (tensor<1x4x16xf32> {tg.name = "logits"}) {
  %wte = tg.param_ref @transformer.word_embeddings.weight : tensor<16x4xf32>
  %zero = arith.constant dense<0> : tensor<i64>
  %pad = tg.eq %ids, %zero : (tensor<1x4xi64>, tensor<i64>) -> tensor<1x4xi1>
  %padf = tg.cast %pad : tensor<1x4xi1> -> tensor<1x4xf32>
  %bias = tg.reshape %padf : tensor<1x4xf32> -> tensor<1x1x1x4xf32>
  %tok = tg.embedding %wte, %ids : (tensor<16x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
  %x = tg.reshape %tok : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %xt = tg.transpose %x permutation = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
  // expected-error @+1 {{decode takes an attention bias over the key positions alone ([B or 1, H or 1, 1, 4], not computed from the tokens, as ALiBi's), but the attention in the model has 'tensor<1x1x1x1xf32>'}}
  %y = tg.attention %xt, %xt, %xt bias %bias {causal} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x2xf32>
  %yt = tg.transpose %y permutation = [0, 2, 1, 3] : tensor<1x2x4x2xf32> -> tensor<1x4x2x2xf32>
  %yr = tg.reshape %yt : tensor<1x4x2x2xf32> -> tensor<1x4x4xf32>
  %logits = tg.linear %yr, %wte : (tensor<1x4x4xf32>, tensor<16x4xf32>) -> tensor<1x4x16xf32>
  return %logits : tensor<1x4x16xf32>
}
