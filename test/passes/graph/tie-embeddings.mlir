// Weights: a 4x3 table, a transposed copy of it (3x4), and a 4x3 tensor that
// differs from the table.
// RUN: %python -c "import numpy as n; t = n.arange(12, dtype='<f4').reshape(4, 3); b = t.copy(); b[1, 2] = -1; open('%t.bin', 'wb').write(t.tobytes() + t.T.copy().tobytes() + b.tobytes())"
// RUN: sed 's|WEIGHTS|%t.bin|' %s > %t.mlir
// RUN: tailor-opt %t.mlir --tailor-tie-embeddings | FileCheck %s
// RUN: tailor-opt %t.mlir --tailor-tie-embeddings=policy=never | FileCheck %s --check-prefix=NEVER
// RUN: tailor-opt %t.mlir --tailor-tie-embeddings=policy=always | FileCheck %s --check-prefix=ALWAYS

// Tests that a transposed copy of the embedding table (as TorchScript writes
// a tied GPT-2 lm_head) is read from the table itself and dropped, while a
// layer whose weight differs keeps it; `never` leaves both; `always` ties by
// name without reading bytes.
// CHECK-LABEL: module
// CHECK: tg.param @transformer.wte.weight
// CHECK-NOT: tg.param @onnx__MatMul_9
// CHECK: tg.param @other
// CHECK: tg.embedding
// CHECK: %[[T:[0-9]+]] = tg.param_ref @transformer.wte.weight
// CHECK: tg.linear %{{.+}}, %[[T]] {tg.module = "lm_head", tg.tied = "transformer.wte"}
// CHECK: %[[O:[0-9]+]] = tg.param_ref @other
// CHECK: tg.linear %{{.+}}, %[[O]] {tg.module = "other_head"}
// NEVER: tg.param @onnx__MatMul_9
// NEVER-NOT: tg.tied
// ALWAYS-NOT: tg.param @onnx__MatMul_9
// ALWAYS: tg.linear %{{.+}}, %{{.+}} {tg.module = "lm_head", tg.tied = "transformer.wte"}
// ALWAYS: tg.linear %{{.+}}, %{{.+}} {tg.module = "other_head"}
tg.param @transformer.wte.weight : tensor<4x3xf32> at #tg.external<"WEIGHTS", offset = 0, length = 48>
tg.param @onnx__MatMul_9 : tensor<3x4xf32> at #tg.external<"WEIGHTS", offset = 48, length = 48>
tg.param @other : tensor<4x3xf32> at #tg.external<"WEIGHTS", offset = 96, length = 48>
func.func @forward(%ids: tensor<2xi64>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %t = tg.param_ref @transformer.wte.weight : tensor<4x3xf32>
  %e = tg.embedding %t, %ids {tg.module = "transformer.wte"} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %c = tg.param_ref @onnx__MatMul_9 : tensor<3x4xf32>
  %w = tg.transpose %c permutation = [1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
  %y = tg.linear %e, %w {tg.module = "lm_head"} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %o = tg.param_ref @other : tensor<4x3xf32>
  %z = tg.linear %e, %o {tg.module = "other_head"} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  return %y, %z : tensor<2x4xf32>, tensor<2x4xf32>
}
