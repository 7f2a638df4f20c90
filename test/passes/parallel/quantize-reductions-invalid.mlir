// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-quantize-reductions
// RUN: not tailor-opt %s --split-input-file --tailor-quantize-reductions="format=int4" 2>&1 | FileCheck %s --check-prefix=INT4
// RUN: not tailor-opt %s --split-input-file --tailor-quantize-reductions="format=int5" 2>&1 | FileCheck %s --check-prefix=FORMAT

// Tests that int4 refuses what int8 refuses, naming its format.
// INT4: error: tailor-quantize-reductions: cannot send this reduce-scatter as int4: its chunk of 32 elements is not whole blocks of 64
// INT4: error: tailor-quantize-reductions: cannot send this reduce-scatter as int4: its elements are not f32

// Tests that a format other than int8 and int4 is refused by name.
// FORMAT: error: tailor-quantize-reductions: format must be int8 or int4, got 'int5'

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
