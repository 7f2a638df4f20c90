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
