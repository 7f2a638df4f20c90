// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-insert-lora="targets=q_proj layers=1 rank=2 alpha=4" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-insert-lora="targets=q_proj variant=lora-fa rank=4 alpha=8 rslora=true dropout=0.1" | FileCheck %s --check-prefix=FA
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-insert-lora="variant=full targets=all" | FileCheck %s --check-prefix=FULL

tg.param @model.layers.0.self_attn.q_proj.weight : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128>
tg.param @model.layers.1.self_attn.q_proj.weight : tensor<8x8xf32> at #tg.external<"w.bin", offset = 128, length = 256>

// Tests that only the targeted module of the chosen layer gets an adapter,
// named and initialized as PEFT does, added as base + B(A x) * alpha / r.
// CHECK-LABEL: module attributes {tg.adapter = {alpha = 4.000000e+00 : f64, dropout = 0.000000e+00 : f64, layers = [1], modules = ["model.layers.1.self_attn.q_proj"], r = 2 : i64, target_modules = ["q_proj"], use_rslora = false, variant = "lora"}}
// CHECK-NOT: lora_A.weight : tensor<2x4xf32>
// CHECK: tg.param @model.layers.1.self_attn.q_proj.lora_A.weight : tensor<2x8xf32> trainable init <"kaiming_uniform", 2.2360679774997898 : f64>
// CHECK: tg.param @model.layers.1.self_attn.q_proj.lora_B.weight : tensor<8x2xf32> trainable init <"zeros", 0.000000e+00 : f64>
// CHECK: %[[A:[0-9]+]] = tg.param_ref @model.layers.1.self_attn.q_proj.lora_A.weight
// CHECK: %[[B:[0-9]+]] = tg.param_ref @model.layers.1.self_attn.q_proj.lora_B.weight
// CHECK: %[[LOW:[0-9]+]] = tg.linear %{{[0-9]+}}, %[[A]] {{.*}} -> tensor<2x3x2xf32>
// CHECK: %[[UP:[0-9]+]] = tg.linear %[[LOW]], %[[B]]
// CHECK: %[[S:.+]] = arith.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[SC:[0-9]+]] = tg.mul %[[UP]], %[[S]]
// CHECK: %[[Y:[0-9]+]] = tg.add %{{[0-9]+}}, %[[SC]]
// CHECK: return %[[Y]]

// Tests that LoRA-FA freezes A (no `trainable`), that rsLoRA scales by
// alpha / sqrt(r), and that dropout adds a seed input.
// FA: tg.param @model.layers.0.self_attn.q_proj.lora_A.weight : tensor<4x4xf32> init
// FA: tg.param @model.layers.0.self_attn.q_proj.lora_B.weight : tensor<8x4xf32> trainable
// FA: func.func @forward(%arg0: tensor<2x3x4xf32> {tg.name = "x"}, %[[SEED:[0-9a-z_]+]]: tensor<i64> {tg.name = "seed"})
// FA: tg.dropout %arg0, %[[SEED]] {p = 1.000000e-01 : f64, salt = 0 : i64
// FA: arith.constant dense<4.000000e+00> : tensor<f32>
// FA: tg.dropout %{{.+}}, %[[SEED]] {p = 1.000000e-01 : f64, salt = 1 : i64

// Tests that full fine-tuning adds no adapter and trains every parameter.
// FULL: tg.param @model.layers.0.self_attn.q_proj.weight : tensor<8x4xf32> trainable
// FULL: tg.param @model.layers.1.self_attn.q_proj.weight : tensor<8x8xf32> trainable
// FULL-NOT: lora_A
func.func @forward(%x: tensor<2x3x4xf32> {tg.name = "x"}) -> (tensor<2x3x8xf32> {tg.name = "y"}) {
  %w0 = tg.param_ref @model.layers.0.self_attn.q_proj.weight : tensor<8x4xf32>
  %w1 = tg.param_ref @model.layers.1.self_attn.q_proj.weight : tensor<8x8xf32>
  %h = tg.linear %x, %w0 {tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn.q_proj"} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %y = tg.linear %h, %w1 {tg.layer = 1 : i64, tg.module = "model.layers.1.self_attn.q_proj"} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

tg.param @onnx__MatMul_7 : tensor<4x8xf32> at #tg.external<"w.bin", offset = 0, length = 128>

// Tests that a renamed, pre-transposed weight records its Hugging Face name
// and layout for checkpoints of trained weights.
// CHECK-LABEL: tg.param @onnx__MatMul_7 : tensor<4x8xf32> {{.*}}{tg.export_name = "model.layers.1.self_attn.q_proj.weight", tg.export_transposed}
// CHECK: tg.param @model.layers.1.self_attn.q_proj.lora_A.weight : tensor<2x4xf32>
func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x8xf32> {
  %wt = tg.param_ref @onnx__MatMul_7 : tensor<4x8xf32>
  %w = tg.transpose %wt permutation = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %y = tg.linear %x, %w {tg.layer = 1 : i64, tg.module = "model.layers.1.self_attn.q_proj"} : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

tg.param @model.layers.1.self_attn.q_proj.weight : tensor<4x8xf32> at #tg.external<"w.bin", offset = 0, length = 128>

// Tests that a weight stored [in, out] under its own Hugging Face name
// (GPT-2's Conv1D) keeps its name and records that layout, PEFT's
// fan_in_fan_out, for adapters and their merge.
// CHECK-LABEL: tg.param @model.layers.1.self_attn.q_proj.weight : tensor<4x8xf32> {{.*}}{tg.export_fan_in_fan_out}
// CHECK: tg.param @model.layers.1.self_attn.q_proj.lora_A.weight : tensor<2x4xf32>
func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x8xf32> {
  %wt = tg.param_ref @model.layers.1.self_attn.q_proj.weight : tensor<4x8xf32>
  %w = tg.transpose %wt permutation = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %y = tg.linear %x, %w {tg.layer = 1 : i64, tg.module = "model.layers.1.self_attn.q_proj"} : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}
