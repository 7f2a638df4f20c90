// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-quantize

// Tests that a module with nothing to quantize is an error, not a silent
// full-precision plan.
// expected-error @+1 {{no frozen linear weight matches the quantization modules 'all-linear'}}
module {
  tg.param @lm_head.weight : tensor<10x16xf32> at #tg.external<"w.bin", offset = 0, length = 640>
  func.func @forward(%u: tensor<2x16xf32>) -> tensor<2x10xf32> {
    %l = tg.param_ref @lm_head.weight : tensor<10x16xf32>
    %y = tg.linear %u, %l {tg.module = "lm_head"} : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<2x10xf32>
    return %y : tensor<2x10xf32>
  }
}

// -----

// Tests that a quantized weight cannot be read as a float tensor.
module {
  tg.param @w : tensor<8x64xf32> at #tg.external<"w.bin", offset = 0, length = 2048> quantized {scheme = "nf4", rows = 8, cols = 64, source_transposed = false}
  func.func @forward() -> tensor<8x64xf32> {
    // expected-error @+1 {{parameter @w is stored quantized; read it with tg.dequantize}}
    %a = tg.param_ref @w : tensor<8x64xf32>
    return %a : tensor<8x64xf32>
  }
}

// -----

// Tests that tg.dequantize needs a quantized parameter.
module {
  tg.param @v : tensor<8x64xf32> at #tg.external<"w.bin", offset = 2048, length = 2048>
  func.func @forward() -> tensor<8x64xf32> {
    // expected-error @+1 {{parameter @v is not quantized; read it with tg.param_ref}}
    %b = tg.dequantize @v : tensor<8x64xf32>
    return %b : tensor<8x64xf32>
  }
}

// -----

// Tests that tg.dequantize gives the weight's [rows, cols] shape.
module {
  tg.param @w : tensor<8x64xf32> at #tg.external<"w.bin", offset = 0, length = 2048> quantized {scheme = "nf4", rows = 8, cols = 64, source_transposed = false}
  func.func @forward() -> tensor<64x8xf32> {
    // expected-error @+1 {{does not match the quantized weight @w ([8, 64] of 'f32')}}
    %c = tg.dequantize @w : tensor<64x8xf32>
    return %c : tensor<64x8xf32>
  }
}

// -----

// Tests that a quantization the runtime cannot store is rejected with the
// reason, and that a trainable weight cannot be quantized.
module {
  // expected-error @+1 {{'tg.param' op parameter @w: unknown quantization key 'groups'}}
  tg.param @w : tensor<8x64xf32> quantized {scheme = "nf4", rows = 8, cols = 64, groups = 3}
}

// -----

module {
  // expected-error @+1 {{is trainable and cannot be stored quantized}}
  tg.param @w : tensor<8x64xf32> trainable quantized {scheme = "bf16", rows = 8, cols = 64}
}

// -----

module {
  // expected-error @+1 {{parameter @w of type 'tensor<8x64xf32>' cannot hold a quantized [64, 8] weight}}
  tg.param @w : tensor<8x64xf32> quantized {scheme = "fp16", rows = 64, cols = 8}
}
