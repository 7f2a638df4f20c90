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

// -----

tg.param @transformer.word_embeddings.weight : tensor<16x4xf32> at #tg.external<"w.bin", offset = 0, length = 256>
tg.param @unsqueeze_1 : tensor<2x1x1xf32> at #tg.external<"w.bin", offset = 256, length = 8>

// Tests that an initializer whose values reach only position computations
// (ALiBi slopes the dynamo exporter folds, times the key positions, as an
// attention bias) is a buffer that full fine-tuning leaves frozen, while
// the weights train.
// CHECK-LABEL: tg.param @transformer.word_embeddings.weight : tensor<16x4xf32> trainable
// CHECK-NOT: tg.param @unsqueeze_1 : tensor<2x1x1xf32> trainable
// CHECK: tg.param @unsqueeze_1 : tensor<2x1x1xf32> at
func.func @forward(%ids: tensor<1x4xi64> {tg.name = "input_ids"}) -> (tensor<1x2x4x2xf32> {tg.name = "y"}) {
  %wte = tg.param_ref @transformer.word_embeddings.weight : tensor<16x4xf32>
  %slopes = tg.param_ref @unsqueeze_1 : tensor<2x1x1xf32>
  %keys = arith.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32>
  %alibi = tg.mul %slopes, %keys : (tensor<2x1x1xf32>, tensor<4xf32>) -> tensor<2x1x4xf32>
  %bias = tg.reshape %alibi : tensor<2x1x4xf32> -> tensor<1x2x1x4xf32>
  %tok = tg.embedding %wte, %ids {tg.module = "transformer.word_embeddings"} : (tensor<16x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
  %x = tg.reshape %tok : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
  %xt = tg.transpose %x permutation = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
  %y = tg.attention %xt, %xt, %xt bias %bias {causal} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x4x2xf32>
  return %y : tensor<1x2x4x2xf32>
}
