// RUN: tailor-translate --mlir-to-llvmir %s | FileCheck %s

// Tests that tailor-translate carries MLIR's LLVM IR translation, which the
// CUDA code generator builds on.
// CHECK-LABEL: define i32 @add
// CHECK: add i32
llvm.func @add(%a: i32, %b: i32) -> i32 {
  %0 = llvm.add %a, %b : i32
  llvm.return %0 : i32
}
