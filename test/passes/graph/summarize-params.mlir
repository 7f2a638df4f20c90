// RUN: tailor-opt %s --split-input-file --tailor-summarize-params 2>&1 >/dev/null | FileCheck %s
// RUN: tailor-opt %s --split-input-file --tailor-summarize-params="largest=2" 2>&1 >/dev/null | FileCheck %s --check-prefix=LARGEST
// RUN: tailor-opt %s --split-input-file --tailor-summarize-params | FileCheck %s --check-prefix=IR

// Tests that parameters are counted per dtype, by trainability and by where
// their bytes live, and that the IR is left unchanged.
// CHECK-LABEL: parameters: 4 tensors, 4368 elements, 8.56 KiB
// CHECK-NEXT: dtype tensors elements bytes
// CHECK-NEXT: bf16 2 4352 8704
// CHECK-NEXT: f32 2 16 64
// CHECK-NEXT: trainable: 1 tensors, 8 elements, 32 B
// CHECK-NEXT: bytes from: external data 2 (1 file), inside the model 1, made at run time 1
// LARGEST-LABEL: parameters: 4 tensors
// LARGEST: largest:
// LARGEST-NEXT: @w1 tensor<64x64xbf16> 8.00 KiB
// LARGEST-NEXT: @w2 tensor<4x64xbf16> 512 B
// IR-LABEL: func.func @uses
// IR: tg.param_ref @w1
tg.param @w1 : tensor<64x64xbf16> at #tg.external<"model.onnx.data", offset = 0, length = 8192>
tg.param @w2 : tensor<4x64xbf16> at #tg.external<"model.onnx.data", offset = 8192, length = 512>
tg.param @norm : tensor<8xf32> at #tg.initializer<"model.onnx", "norm">
tg.param @lora : tensor<8xf32> trainable
func.func @uses() -> tensor<64x64xbf16> {
  %0 = tg.param_ref @w1 : tensor<64x64xbf16>
  return %0 : tensor<64x64xbf16>
}

// -----

// Tests that a module without parameters reports zero.
// CHECK-LABEL: parameters: 0 tensors, 0 elements, 0 B
// CHECK-NEXT: dtype tensors elements bytes
// CHECK-NEXT: trainable: 0 tensors, 0 elements, 0 B
func.func @empty() {
  return
}
