// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-quantize | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-quantize="scheme=int8 outlier-threshold=6 modules=up_proj,q_proj" | FileCheck %s --check-prefix=INT8
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-quantize="scheme=gptq bits=4 group-size=16 act-order=true" | FileCheck %s --check-prefix=GPTQ

tg.param @model.layers.0.self_attn.q_proj.weight : tensor<32x32xf32> at #tg.external<"w.bin", offset = 0, length = 4096>
tg.param @"onnx::MatMul_7" : tensor<32x64xf32> at #tg.external<"w.bin", offset = 4096, length = 8192>
tg.param @model.layers.0.self_attn.q_proj.lora_B.weight : tensor<32x2xf32> trainable init #tg.init<"zeros", 0.0>
tg.param @lm_head.weight : tensor<10x64xf32> at #tg.external<"w.bin", offset = 12288, length = 2560>

// Tests that nf4 (the default, with double quantization) marks the frozen
// weights of every linear layer but lm_head, and that a weight the file
// stores transposed is quantized in PyTorch's [out, in] layout with its
// transpose gone; trainable adapters are left alone.
// CHECK-LABEL: tg.param @model.layers.0.self_attn.q_proj.weight : tensor<32x32xf32> at #tg.external<"w.bin", offset = 0, length = 4096> quantized {block_size = 64 : i64, cols = 32 : i64, double_quant = true, nested_block_size = 256 : i64, rows = 32 : i64, scheme = "nf4", source_transposed = false}
// CHECK: tg.param @"onnx::MatMul_7" : tensor<32x64xf32> {{.*}} quantized {{{.*}}cols = 32 : i64, {{.*}}rows = 64 : i64, scheme = "nf4", source_transposed = true}
// CHECK: tg.param @model.layers.0.self_attn.q_proj.lora_B.weight : tensor<32x2xf32> trainable init <"zeros", 0.000000e+00 : f64>{{$}}
// CHECK: tg.param @lm_head.weight : tensor<10x64xf32> at #tg.external<"w.bin", offset = 12288, length = 2560>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.+]] = tg.dequantize @model.layers.0.self_attn.q_proj.weight : tensor<32x32xf32>
// CHECK: tg.linear %arg0, %[[Q]]
// CHECK: tg.param_ref @model.layers.0.self_attn.q_proj.lora_B.weight
// CHECK-NOT: tg.transpose
// CHECK: %[[U:.+]] = tg.dequantize @"onnx::MatMul_7" : tensor<64x32xf32>
// CHECK-NOT: tg.transpose
// CHECK: tg.linear %{{.+}}, %[[U]]
// CHECK: %[[H:.+]] = tg.param_ref @lm_head.weight
// CHECK: tg.linear %{{.+}}, %[[H]]

// Tests that int8 follows the modules list and reserves outlier columns
// (cols / 64, at least one).
// INT8-LABEL: tg.param @model.layers.0.self_attn.q_proj.weight {{.*}} quantized {cols = 32 : i64, outlier_columns = 1 : i64, outlier_threshold = 6.000000e+00 : f64, rows = 32 : i64, scheme = "int8", source_transposed = false}
// INT8: tg.param @"onnx::MatMul_7" {{.*}} quantized {cols = 32 : i64, outlier_columns = 1 : i64

// Tests that gptq records bits, group size and act-order.
// GPTQ-LABEL: tg.param @model.layers.0.self_attn.q_proj.weight {{.*}} quantized {act_order = true, bits = 4 : i64, cols = 32 : i64, group_size = 16 : i64, rows = 32 : i64, scheme = "gptq", source_transposed = false}
func.func @forward(%x: tensor<2x32xf32> {tg.name = "x"}) -> (tensor<2x10xf32> {tg.name = "logits"}, tensor<32x2xf32>) {
  %w = tg.param_ref @model.layers.0.self_attn.q_proj.weight : tensor<32x32xf32>
  %h = tg.linear %x, %w {tg.layer = 0 : i64, tg.module = "model.layers.0.self_attn.q_proj"} : (tensor<2x32xf32>, tensor<32x32xf32>) -> tensor<2x32xf32>
  %b = tg.param_ref @model.layers.0.self_attn.q_proj.lora_B.weight : tensor<32x2xf32>
  %wt = tg.param_ref @"onnx::MatMul_7" : tensor<32x64xf32>
  %t = tg.transpose %wt permutation = [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  %u = tg.linear %h, %t {tg.layer = 0 : i64, tg.module = "model.layers.0.mlp.up_proj"} : (tensor<2x32xf32>, tensor<64x32xf32>) -> tensor<2x64xf32>
  %l = tg.param_ref @lm_head.weight : tensor<10x64xf32>
  %y = tg.linear %u, %l {tg.module = "lm_head"} : (tensor<2x64xf32>, tensor<10x64xf32>) -> tensor<2x10xf32>
  return %y, %b : tensor<2x10xf32>, tensor<32x2xf32>
}

// -----

tg.param @model.layers.0.self_attn.q_proj.weight : tensor<32x32xf32> at #tg.external<"w.bin", offset = 0, length = 4096>
tg.param @model.layers.0.self_attn.q_proj.lora_A.weight : tensor<2x32xf32> at #tg.external<"adapter_model.safetensors", offset = 0, length = 256>
tg.param @model.layers.0.self_attn.q_proj.lora_B.weight : tensor<32x2xf32> at #tg.external<"adapter_model.safetensors", offset = 256, length = 256>

// Tests that an adapter bound to an inference plan (frozen LoRA weights
// read from the adapter file, as `--task generate --adapter` makes them)
// keeps its f32 storage beside the quantized base weight, as PEFT runs
// LoRA on a quantized layer.
// CHECK-LABEL: tg.param @model.layers.0.self_attn.q_proj.weight {{.*}} quantized
// CHECK: tg.param @model.layers.0.self_attn.q_proj.lora_A.weight : tensor<2x32xf32> at #tg.external<"adapter_model.safetensors", offset = 0, length = 256>{{$}}
// CHECK: tg.param @model.layers.0.self_attn.q_proj.lora_B.weight : tensor<32x2xf32> at #tg.external<"adapter_model.safetensors", offset = 256, length = 256>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: tg.dequantize @model.layers.0.self_attn.q_proj.weight
// CHECK: tg.param_ref @model.layers.0.self_attn.q_proj.lora_A.weight
// CHECK: tg.param_ref @model.layers.0.self_attn.q_proj.lora_B.weight
func.func @forward(%x: tensor<2x32xf32>) -> tensor<2x32xf32> {
  %w = tg.param_ref @model.layers.0.self_attn.q_proj.weight : tensor<32x32xf32>
  %y = tg.linear %x, %w {tg.module = "model.layers.0.self_attn.q_proj"} : (tensor<2x32xf32>, tensor<32x32xf32>) -> tensor<2x32xf32>
  %a = tg.param_ref @model.layers.0.self_attn.q_proj.lora_A.weight {tg.module = "model.layers.0.self_attn.q_proj"} : tensor<2x32xf32>
  %b = tg.param_ref @model.layers.0.self_attn.q_proj.lora_B.weight {tg.module = "model.layers.0.self_attn.q_proj"} : tensor<32x2xf32>
  %l = tg.linear %x, %a {tg.module = "model.layers.0.self_attn.q_proj"} : (tensor<2x32xf32>, tensor<2x32xf32>) -> tensor<2x2xf32>
  %u = tg.linear %l, %b {tg.module = "model.layers.0.self_attn.q_proj"} : (tensor<2x2xf32>, tensor<32x2xf32>) -> tensor<2x32xf32>
  %z = tg.add %y, %u : (tensor<2x32xf32>, tensor<2x32xf32>) -> tensor<2x32xf32>
  return %z : tensor<2x32xf32>
}

// -----

tg.param @model.layers.0.mlp.down_proj.weight : tensor<32x64xf32> at #tg.external<"w.bin", offset = 0, length = 8192>
tg.param @model.layers.0.mlp.up_proj.weight : tensor<64x32xf32> at #tg.external<"w.bin", offset = 8192, length = 8192>

// Tests that a weight with a reader other than a linear layer keeps its
// float storage (that reader would need the whole dense tensor), while the
// others are still quantized.
// CHECK-LABEL: tg.param @model.layers.0.mlp.down_proj.weight : tensor<32x64xf32> at #tg.external<"w.bin", offset = 0, length = 8192>{{$}}
// CHECK: tg.param @model.layers.0.mlp.up_proj.weight {{.*}} quantized
// CHECK-LABEL: func.func @forward
// CHECK: tg.param_ref @model.layers.0.mlp.down_proj.weight
// CHECK: tg.dequantize @model.layers.0.mlp.up_proj.weight
func.func @forward(%x: tensor<2x64xf32>) -> (tensor<2x32xf32>, tensor<32x64xf32>, tensor<2x64xf32>) {
  %w = tg.param_ref @model.layers.0.mlp.down_proj.weight : tensor<32x64xf32>
  %y = tg.linear %x, %w {tg.module = "model.layers.0.mlp.down_proj"} : (tensor<2x64xf32>, tensor<32x64xf32>) -> tensor<2x32xf32>
  %e = tg.exp %w : tensor<32x64xf32>
  %v = tg.param_ref @model.layers.0.mlp.up_proj.weight : tensor<64x32xf32>
  %z = tg.linear %y, %v {tg.module = "model.layers.0.mlp.up_proj"} : (tensor<2x32xf32>, tensor<64x32xf32>) -> tensor<2x64xf32>
  return %y, %e, %z : tensor<2x32xf32>, tensor<32x64xf32>, tensor<2x64xf32>
}
