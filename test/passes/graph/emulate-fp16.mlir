// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-emulate-fp16 | FileCheck %s

tg.param @w : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128>

// Tests that every GEMM (linear, matmul, linear_weight_grad) is marked to
// compute as fp16 tensor cores do, and that nothing else is.
// CHECK-LABEL: func.func @train_step
// CHECK: tg.linear %{{.+}}, %{{.+}} {tg.fp16}
// CHECK: tg.matmul %{{.+}}, %{{.+}} {tg.fp16}
// CHECK: tg.linear_weight_grad %{{.+}}, %{{.+}} {tg.fp16}
// CHECK-NOT: tg.fp16
// CHECK: return
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
func.func @nf4_weight(%x: tensor<3x64xf32>) -> tensor<3x8xf32> {
  %w = tg.dequantize @n : tensor<8x64xf32>
  // expected-error @below {{fp16 GEMMs on weights stored as nf4 are not supported yet}}
  %y = tg.linear %x, %w : (tensor<3x64xf32>, tensor<8x64xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}
