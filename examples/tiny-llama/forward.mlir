// A 2-layer Llama-architecture forward pass in tg (hidden 64,
// 4 query heads, 2 kv heads, head dim 16, MLP 128, vocab 256;
// batch 1, sequence 16, f32). Written by test/generators/gen_tg_llama.py.
// Weights are tg.param symbols pointing into an external data file, as the
// ONNX importer produces them; the IR carries no weight bytes.

tg.param @model.embed_tokens.weight : tensor<256x64xf32> at #tg.external<"model.onnx.data", offset = 0, length = 65536>
tg.param @model.layers.0.input_layernorm.weight : tensor<64xf32> at #tg.external<"model.onnx.data", offset = 65536, length = 256>
tg.param @model.layers.0.self_attn.q_proj.weight : tensor<64x64xf32> at #tg.external<"model.onnx.data", offset = 69632, length = 16384>
tg.param @model.layers.0.self_attn.k_proj.weight : tensor<32x64xf32> at #tg.external<"model.onnx.data", offset = 86016, length = 8192>
tg.param @model.layers.0.self_attn.v_proj.weight : tensor<32x64xf32> at #tg.external<"model.onnx.data", offset = 94208, length = 8192>
tg.param @model.layers.0.self_attn.o_proj.weight : tensor<64x64xf32> at #tg.external<"model.onnx.data", offset = 102400, length = 16384>
tg.param @model.layers.0.post_attention_layernorm.weight : tensor<64xf32> at #tg.external<"model.onnx.data", offset = 118784, length = 256>
tg.param @model.layers.0.mlp.gate_proj.weight : tensor<128x64xf32> at #tg.external<"model.onnx.data", offset = 122880, length = 32768>
tg.param @model.layers.0.mlp.up_proj.weight : tensor<128x64xf32> at #tg.external<"model.onnx.data", offset = 155648, length = 32768>
tg.param @model.layers.0.mlp.down_proj.weight : tensor<64x128xf32> at #tg.external<"model.onnx.data", offset = 188416, length = 32768>
tg.param @model.layers.1.input_layernorm.weight : tensor<64xf32> at #tg.external<"model.onnx.data", offset = 221184, length = 256>
tg.param @model.layers.1.self_attn.q_proj.weight : tensor<64x64xf32> at #tg.external<"model.onnx.data", offset = 225280, length = 16384>
tg.param @model.layers.1.self_attn.k_proj.weight : tensor<32x64xf32> at #tg.external<"model.onnx.data", offset = 241664, length = 8192>
tg.param @model.layers.1.self_attn.v_proj.weight : tensor<32x64xf32> at #tg.external<"model.onnx.data", offset = 249856, length = 8192>
tg.param @model.layers.1.self_attn.o_proj.weight : tensor<64x64xf32> at #tg.external<"model.onnx.data", offset = 258048, length = 16384>
tg.param @model.layers.1.post_attention_layernorm.weight : tensor<64xf32> at #tg.external<"model.onnx.data", offset = 274432, length = 256>
tg.param @model.layers.1.mlp.gate_proj.weight : tensor<128x64xf32> at #tg.external<"model.onnx.data", offset = 278528, length = 32768>
tg.param @model.layers.1.mlp.up_proj.weight : tensor<128x64xf32> at #tg.external<"model.onnx.data", offset = 311296, length = 32768>
tg.param @model.layers.1.mlp.down_proj.weight : tensor<64x128xf32> at #tg.external<"model.onnx.data", offset = 344064, length = 32768>
tg.param @model.norm.weight : tensor<64xf32> at #tg.external<"model.onnx.data", offset = 376832, length = 256>
tg.param @lm_head.weight : tensor<256x64xf32> at #tg.external<"model.onnx.data", offset = 380928, length = 65536>

func.func @forward(%input_ids: tensor<1x16xi64>, %cos: tensor<16x16xf32>, %sin: tensor<16x16xf32>) -> tensor<1x16x256xf32> {
  %1 = tg.param_ref @model.embed_tokens.weight : tensor<256x64xf32>
  %2 = tg.embedding %1, %input_ids {tg.module = "model.embed_tokens"} : (tensor<256x64xf32>, tensor<1x16xi64>) -> tensor<1x16x64xf32>
  %3 = tg.param_ref @model.layers.0.input_layernorm.weight : tensor<64xf32>
  %4 = tg.rms_norm %2, %3 {tg.layer = 0 : i64, tg.module = "model.layers.0.input_layernorm"} : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
  %5 = tg.param_ref @model.layers.0.self_attn.q_proj.weight : tensor<64x64xf32>
  %6 = tg.linear %4, %5 {tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn.q_proj"} : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
  %7 = tg.reshape %6 {tg.layer = 0 : i64} : tensor<1x16x64xf32> -> tensor<1x16x4x16xf32>
  %8 = tg.transpose %7 permutation = [0, 2, 1, 3] {tg.layer = 0 : i64} : tensor<1x16x4x16xf32> -> tensor<1x4x16x16xf32>
  %9 = tg.rope %8, %cos, %sin {tg.layer = 0 : i64} : (tensor<1x4x16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16x16xf32>
  %10 = tg.param_ref @model.layers.0.self_attn.k_proj.weight : tensor<32x64xf32>
  %11 = tg.linear %4, %10 {tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn.k_proj"} : (tensor<1x16x64xf32>, tensor<32x64xf32>) -> tensor<1x16x32xf32>
  %12 = tg.reshape %11 {tg.layer = 0 : i64} : tensor<1x16x32xf32> -> tensor<1x16x2x16xf32>
  %13 = tg.transpose %12 permutation = [0, 2, 1, 3] {tg.layer = 0 : i64} : tensor<1x16x2x16xf32> -> tensor<1x2x16x16xf32>
  %14 = tg.rope %13, %cos, %sin {tg.layer = 0 : i64} : (tensor<1x2x16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<1x2x16x16xf32>
  %15 = tg.param_ref @model.layers.0.self_attn.v_proj.weight : tensor<32x64xf32>
  %16 = tg.linear %4, %15 {tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn.v_proj"} : (tensor<1x16x64xf32>, tensor<32x64xf32>) -> tensor<1x16x32xf32>
  %17 = tg.reshape %16 {tg.layer = 0 : i64} : tensor<1x16x32xf32> -> tensor<1x16x2x16xf32>
  %18 = tg.transpose %17 permutation = [0, 2, 1, 3] {tg.layer = 0 : i64} : tensor<1x16x2x16xf32> -> tensor<1x2x16x16xf32>
  %19 = tg.attention %9, %14, %18 {causal, scale = 2.500000e-01 : f64, tg.layer = 0 : i64} : (tensor<1x4x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x4x16x16xf32>
  %20 = tg.transpose %19 permutation = [0, 2, 1, 3] {tg.layer = 0 : i64} : tensor<1x4x16x16xf32> -> tensor<1x16x4x16xf32>
  %21 = tg.reshape %20 {tg.layer = 0 : i64} : tensor<1x16x4x16xf32> -> tensor<1x16x64xf32>
  %22 = tg.param_ref @model.layers.0.self_attn.o_proj.weight : tensor<64x64xf32>
  %23 = tg.linear %21, %22 {tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn.o_proj"} : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
  %24 = tg.add %2, %23 {tg.layer = 0 : i64} : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  %25 = tg.param_ref @model.layers.0.post_attention_layernorm.weight : tensor<64xf32>
  %26 = tg.rms_norm %24, %25 {tg.layer = 0 : i64, tg.module = "model.layers.0.post_attention_layernorm"} : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
  %27 = tg.param_ref @model.layers.0.mlp.gate_proj.weight : tensor<128x64xf32>
  %28 = tg.linear %26, %27 {tg.layer = 0 : i64, tg.module = "model.layers.0.mlp.gate_proj"} : (tensor<1x16x64xf32>, tensor<128x64xf32>) -> tensor<1x16x128xf32>
  %29 = tg.param_ref @model.layers.0.mlp.up_proj.weight : tensor<128x64xf32>
  %30 = tg.linear %26, %29 {tg.layer = 0 : i64, tg.module = "model.layers.0.mlp.up_proj"} : (tensor<1x16x64xf32>, tensor<128x64xf32>) -> tensor<1x16x128xf32>
  %31 = tg.silu %28 {tg.layer = 0 : i64} : tensor<1x16x128xf32>
  %32 = tg.mul %31, %30 {tg.layer = 0 : i64} : (tensor<1x16x128xf32>, tensor<1x16x128xf32>) -> tensor<1x16x128xf32>
  %33 = tg.param_ref @model.layers.0.mlp.down_proj.weight : tensor<64x128xf32>
  %34 = tg.linear %32, %33 {tg.layer = 0 : i64, tg.module = "model.layers.0.mlp.down_proj"} : (tensor<1x16x128xf32>, tensor<64x128xf32>) -> tensor<1x16x64xf32>
  %35 = tg.add %24, %34 {tg.layer = 0 : i64} : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  %36 = tg.param_ref @model.layers.1.input_layernorm.weight : tensor<64xf32>
  %37 = tg.rms_norm %35, %36 {tg.layer = 1 : i64, tg.module = "model.layers.1.input_layernorm"} : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
  %38 = tg.param_ref @model.layers.1.self_attn.q_proj.weight : tensor<64x64xf32>
  %39 = tg.linear %37, %38 {tg.layer = 1 : i64, tg.module = "model.layers.1.self_attn.q_proj"} : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
  %40 = tg.reshape %39 {tg.layer = 1 : i64} : tensor<1x16x64xf32> -> tensor<1x16x4x16xf32>
  %41 = tg.transpose %40 permutation = [0, 2, 1, 3] {tg.layer = 1 : i64} : tensor<1x16x4x16xf32> -> tensor<1x4x16x16xf32>
  %42 = tg.rope %41, %cos, %sin {tg.layer = 1 : i64} : (tensor<1x4x16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16x16xf32>
  %43 = tg.param_ref @model.layers.1.self_attn.k_proj.weight : tensor<32x64xf32>
  %44 = tg.linear %37, %43 {tg.layer = 1 : i64, tg.module = "model.layers.1.self_attn.k_proj"} : (tensor<1x16x64xf32>, tensor<32x64xf32>) -> tensor<1x16x32xf32>
  %45 = tg.reshape %44 {tg.layer = 1 : i64} : tensor<1x16x32xf32> -> tensor<1x16x2x16xf32>
  %46 = tg.transpose %45 permutation = [0, 2, 1, 3] {tg.layer = 1 : i64} : tensor<1x16x2x16xf32> -> tensor<1x2x16x16xf32>
  %47 = tg.rope %46, %cos, %sin {tg.layer = 1 : i64} : (tensor<1x2x16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<1x2x16x16xf32>
  %48 = tg.param_ref @model.layers.1.self_attn.v_proj.weight : tensor<32x64xf32>
  %49 = tg.linear %37, %48 {tg.layer = 1 : i64, tg.module = "model.layers.1.self_attn.v_proj"} : (tensor<1x16x64xf32>, tensor<32x64xf32>) -> tensor<1x16x32xf32>
  %50 = tg.reshape %49 {tg.layer = 1 : i64} : tensor<1x16x32xf32> -> tensor<1x16x2x16xf32>
  %51 = tg.transpose %50 permutation = [0, 2, 1, 3] {tg.layer = 1 : i64} : tensor<1x16x2x16xf32> -> tensor<1x2x16x16xf32>
  %52 = tg.attention %42, %47, %51 {causal, scale = 2.500000e-01 : f64, tg.layer = 1 : i64} : (tensor<1x4x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x4x16x16xf32>
  %53 = tg.transpose %52 permutation = [0, 2, 1, 3] {tg.layer = 1 : i64} : tensor<1x4x16x16xf32> -> tensor<1x16x4x16xf32>
  %54 = tg.reshape %53 {tg.layer = 1 : i64} : tensor<1x16x4x16xf32> -> tensor<1x16x64xf32>
  %55 = tg.param_ref @model.layers.1.self_attn.o_proj.weight : tensor<64x64xf32>
  %56 = tg.linear %54, %55 {tg.layer = 1 : i64, tg.module = "model.layers.1.self_attn.o_proj"} : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
  %57 = tg.add %35, %56 {tg.layer = 1 : i64} : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  %58 = tg.param_ref @model.layers.1.post_attention_layernorm.weight : tensor<64xf32>
  %59 = tg.rms_norm %57, %58 {tg.layer = 1 : i64, tg.module = "model.layers.1.post_attention_layernorm"} : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
  %60 = tg.param_ref @model.layers.1.mlp.gate_proj.weight : tensor<128x64xf32>
  %61 = tg.linear %59, %60 {tg.layer = 1 : i64, tg.module = "model.layers.1.mlp.gate_proj"} : (tensor<1x16x64xf32>, tensor<128x64xf32>) -> tensor<1x16x128xf32>
  %62 = tg.param_ref @model.layers.1.mlp.up_proj.weight : tensor<128x64xf32>
  %63 = tg.linear %59, %62 {tg.layer = 1 : i64, tg.module = "model.layers.1.mlp.up_proj"} : (tensor<1x16x64xf32>, tensor<128x64xf32>) -> tensor<1x16x128xf32>
  %64 = tg.silu %61 {tg.layer = 1 : i64} : tensor<1x16x128xf32>
  %65 = tg.mul %64, %63 {tg.layer = 1 : i64} : (tensor<1x16x128xf32>, tensor<1x16x128xf32>) -> tensor<1x16x128xf32>
  %66 = tg.param_ref @model.layers.1.mlp.down_proj.weight : tensor<64x128xf32>
  %67 = tg.linear %65, %66 {tg.layer = 1 : i64, tg.module = "model.layers.1.mlp.down_proj"} : (tensor<1x16x128xf32>, tensor<64x128xf32>) -> tensor<1x16x64xf32>
  %68 = tg.add %57, %67 {tg.layer = 1 : i64} : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  %69 = tg.param_ref @model.norm.weight : tensor<64xf32>
  %70 = tg.rms_norm %68, %69 {tg.module = "model.norm"} : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
  %71 = tg.param_ref @lm_head.weight : tensor<256x64xf32>
  %72 = tg.linear %70, %71 {tg.module = "lm_head"} : (tensor<1x16x64xf32>, tensor<256x64xf32>) -> tensor<1x16x256xf32>
  return %72 : tensor<1x16x256xf32>
}
