// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-insert-lora="targets=k_proj layers=0-1,3"

// Tests that targets matching no linear layer are an error naming them.
// expected-error @+1 {{no linear layer matches targets 'k_proj' in layers '0-1,3'}}
module {
  tg.param @w : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128>
  func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x8xf32> {
    %w = tg.param_ref @w : tensor<8x4xf32>
    %y = tg.linear %x, %w {tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn.q_proj"} : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
    return %y : tensor<3x8xf32>
  }
}
