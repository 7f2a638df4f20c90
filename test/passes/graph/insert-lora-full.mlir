// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-insert-lora="variant=full targets=all" | FileCheck %s

// Tests that full fine-tuning refuses one parameter read by the norms of
// several modules (an exporter merged their identical initializers): it
// would train as one tensor with the sum of their gradients.
// expected-error @+1 {{full fine-tuning would train each of these parameters as one tensor for all the modules that read it, with the sum of their gradients (the exporter merged initializers with identical contents):}}
tg.param @model.layers.0.input_layernorm.weight : tensor<4xf32> at #tg.external<"w.bin", offset = 0, length = 16>

func.func @forward(%x: tensor<2x4xf32> {tg.name = "x"}) -> (tensor<2x4xf32> {tg.name = "y"}) {
  %g = tg.param_ref @model.layers.0.input_layernorm.weight : tensor<4xf32>
  %a = tg.rms_norm %x, %g {epsilon = 1.0e-5 : f64, tg.layer = 0 : i64, tg.module = "model.layers.0.input_layernorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %b = tg.rms_norm %a, %g {epsilon = 1.0e-5 : f64, tg.layer = 0 : i64, tg.module = "model.layers.0.post_attention_layernorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %b : tensor<2x4xf32>
}

// -----

tg.param @model.embed_tokens.weight : tensor<16x4xf32> at #tg.external<"w.bin", offset = 0, length = 256>

// Tests that a tied lm_head reading its embedding table is no merge: the
// table trains once, as transformers ties it.
// CHECK-LABEL: tg.param @model.embed_tokens.weight : tensor<16x4xf32> trainable
func.func @forward(%ids: tensor<2xi64> {tg.name = "ids"}) -> (tensor<2x16xf32> {tg.name = "logits"}) {
  %w = tg.param_ref @model.embed_tokens.weight : tensor<16x4xf32>
  %h = tg.embedding %w, %ids {tg.module = "model.embed_tokens"} : (tensor<16x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %y = tg.linear %h, %w {tg.module = "lm_head", tg.tied = "model.embed_tokens"} : (tensor<2x4xf32>, tensor<16x4xf32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}
