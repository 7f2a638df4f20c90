// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-lower-to-sched="threads=2 precision=bf16" | FileCheck %s

tg.param @w : tensor<8x4xf32> at #tg.external<"weights.bin", offset = 0, length = 128>

// Tests that a bf16 CPU plan records its precision and plans the GEMMs
// tailor-emulate-half marked with their bf16 kernels, whose workspace holds
// the rounded operands (3x4 + 8x4 floats: no product, unlike fp16).
// CHECK-LABEL: sched.program @rank0 rank 0 of 1
// CHECK-SAME: sched.precision = "bf16"
// CHECK: sched.kernel @linear_bf16 arity -1
// CHECK: %[[WS:.+]] = sched.buffer @workspace[{{[0-9]+}}, 176] : memref<44xf32>
// CHECK: sched.launch @linear_bf16(%{{.+}}, %{{.+}}, %{{.+}}, %[[WS]])
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<3x8xf32> {tg.name = "y"}) {
  %w = tg.param_ref @w : tensor<8x4xf32>
  %y = tg.linear %x, %w {tg.bf16} : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

tg.param @w : tensor<8x4xf32> at #tg.external<"weights.bin", offset = 0, length = 128>

// Tests that a bf16 CPU plan refuses a GEMM left in f32 (the plan would
// say bf16 and compute f32).
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<3x8xf32> {tg.name = "y"}) {
  %w = tg.param_ref @w : tensor<8x4xf32>
  // expected-error @+1 {{a CPU plan in bf16 needs every GEMM marked by tailor-emulate-half, this one computes fp32}}
  %y = tg.linear %x, %w : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

tg.param @w : tensor<8x4xf32> at #tg.external<"weights.bin", offset = 0, length = 128>

// Tests that a bf16 CPU plan refuses an fp16 GEMM.
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<3x8xf32> {tg.name = "y"}) {
  %w = tg.param_ref @w : tensor<8x4xf32>
  // expected-error @+1 {{a CPU plan in bf16 needs every GEMM marked by tailor-emulate-half, this one computes fp16}}
  %y = tg.linear %x, %w {tg.fp16} : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}
