// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-emulate-half | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-emulate-half=format=fp16 | FileCheck %s
// RUN: not tailor-opt %s --split-input-file --tailor-emulate-half=format=bf16 2>%t.err | FileCheck %s --check-prefix=BF16
// RUN: FileCheck %s --check-prefix=BF16ERR < %t.err
// RUN: not tailor-opt %s --split-input-file --tailor-emulate-half=format=fp8 2>&1 | FileCheck %s --check-prefix=FORMAT
// FORMAT: tailor-emulate-half: unknown format 'fp8' (expected fp16 or bf16)

tg.param @w : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128>

// Tests that every GEMM (linear, matmul, linear_weight_grad) is marked to
// compute as fp16 tensor cores do, and that nothing else is.
// CHECK-LABEL: func.func @train_step
// CHECK: tg.linear %{{.+}}, %{{.+}} {tg.fp16}
// CHECK: tg.matmul %{{.+}}, %{{.+}} {tg.fp16}
// CHECK: tg.linear_weight_grad %{{.+}}, %{{.+}} {tg.fp16}
// CHECK-NOT: tg.fp16
// CHECK: return
// Tests that with format=bf16 the same GEMMs are marked tg.bf16 instead.
// BF16-LABEL: func.func @train_step
// BF16: tg.linear %{{.+}}, %{{.+}} {tg.bf16}
// BF16: tg.matmul %{{.+}}, %{{.+}} {tg.bf16}
// BF16: tg.linear_weight_grad %{{.+}}, %{{.+}} {tg.bf16}
// BF16-NOT: tg.bf16
// BF16-NOT: tg.fp16
// BF16: return
func.func @train_step(%x: tensor<3x4xf32>, %m: tensor<4x8xf32>, %d: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x8xf32>, tensor<8x4xf32>) {
  %w = tg.param_ref @w : tensor<8x4xf32>
  %y = tg.linear %x, %w : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  %z = tg.matmul %x, %m : (tensor<3x4xf32>, tensor<4x8xf32>) -> tensor<3x8xf32>
  %g = tg.linear_weight_grad %d, %x : (tensor<3x8xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  %s = tg.silu %y : tensor<3x8xf32>
  return %s, %z, %g : tensor<3x8xf32>, tensor<3x8xf32>, tensor<8x4xf32>
}

// -----

tg.param @q : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128> quantized {cols = 4 : i64, rows = 8 : i64, scheme = "fp16", source_transposed = false}

// Tests that a GEMM may read a frozen weight stored as half (directly, and
// through the transpose of the input gradient's GEMM).
// CHECK-LABEL: func.func @half_weight
// CHECK: tg.linear %{{.+}}, %{{.+}} {tg.fp16}
// CHECK: tg.linear %{{.+}}, %{{.+}} {tg.fp16}
// Tests that a bf16 GEMM refuses a weight stored as fp16.
// BF16ERR: bf16 GEMMs on weights stored as fp16 are not supported yet (frozen weights may be stored as bf16, or f32 with 'quantization: none')
func.func @half_weight(%x: tensor<3x4xf32>, %dy: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x4xf32>) {
  %w = tg.dequantize @q : tensor<8x4xf32>
  %y = tg.linear %x, %w : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  %t = tg.transpose %w permutation = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %dx = tg.linear %dy, %t : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  return %y, %dx : tensor<3x8xf32>, tensor<3x4xf32>
}

// -----

tg.param @n : tensor<8x64xf32> at #tg.external<"w.bin", offset = 0, length = 2048> quantized {scheme = "nf4", rows = 8, cols = 64, source_transposed = false}

// Tests that a GEMM on a weight stored as NF4 is refused by name.
// BF16ERR: bf16 GEMMs on weights stored as nf4 are not supported yet
func.func @nf4_weight(%x: tensor<3x64xf32>) -> tensor<3x8xf32> {
  %w = tg.dequantize @n : tensor<8x64xf32>
  // expected-error @below {{fp16 GEMMs on weights stored as nf4 are not supported yet}}
  %y = tg.linear %x, %w : (tensor<3x64xf32>, tensor<8x64xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

tg.param @b : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128> quantized {cols = 4 : i64, rows = 8 : i64, scheme = "bf16", source_transposed = false}

// Tests that a bf16 GEMM may read a frozen weight stored as bf16 (directly,
// and through the transpose of the input gradient's GEMM), and that an
// fp16 GEMM refuses it.
// BF16-LABEL: func.func @bf16_weight
// BF16: tg.linear %{{.+}}, %{{.+}} {tg.bf16}
// BF16: tg.linear %{{.+}}, %{{.+}} {tg.bf16}
func.func @bf16_weight(%x: tensor<3x4xf32>, %dy: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x4xf32>) {
  %w = tg.dequantize @b : tensor<8x4xf32>
  // expected-error @below {{fp16 GEMMs on weights stored as bf16 are not supported yet}}
  %y = tg.linear %x, %w : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  %t = tg.transpose %w permutation = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %dx = tg.linear %dy, %t : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  return %y, %dx : tensor<3x8xf32>, tensor<3x4xf32>
}
