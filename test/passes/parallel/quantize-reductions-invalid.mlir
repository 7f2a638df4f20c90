// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-quantize-reductions

// Tests that a reduce-scatter whose chunk is not whole blocks of 64 is
// refused rather than left f32.
func.func @train_step(%g: tensor<64xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{tailor-quantize-reductions: cannot send this reduce-scatter as int8: its chunk of 32 elements is not whole blocks of 64}}
  %c = tg.reduce_scatter %g avg over world shards 2 : tensor<64xf32> -> tensor<32xf32>
  return %c : tensor<32xf32>
}

// -----

// Tests that a reduce-scatter of bf16 gradients is refused.
func.func @train_step(%g: tensor<128xbf16>) -> tensor<64xbf16> {
  // expected-error @+1 {{tailor-quantize-reductions: cannot send this reduce-scatter as int8: its elements are not f32}}
  %c = tg.reduce_scatter %g avg over world shards 2 : tensor<128xbf16> -> tensor<64xbf16>
  return %c : tensor<64xbf16>
}
