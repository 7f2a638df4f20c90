// RUN: tailor-opt %s --split-input-file --tailor-lower-to-sched="backend=cuda sm=90 hardware=h100 threads=2" | FileCheck %s --check-prefix=CUDA
// RUN: tailor-opt %s --split-input-file --tailor-lower-to-sched="threads=2" | FileCheck %s --check-prefix=CPU

// Tests that attention_grad's workspace follows the backend: on CUDA the
// split key-major pass's partial dk, dv and the statistics
// (runtime/cuda/AttentionWorkspace.h): 4 blocks of 64 keys x kv heads want
// 1024, so the group of 4 query heads takes 4 slices, 1 x 2 x 4 x 100 x
// (16 + 16) = 25600 floats, then 2 x 8 x 100 = 1600 floats of statistics;
// on the CPU threads (2) x 2 blocks x 64 rows x 100 keys.
// CUDA-LABEL: sched.program @rank0
// CUDA: sched.arena @workspace device workspace size 108800
// CUDA: %[[WS:.+]] = sched.buffer @workspace[0, 108800] : memref<27200xf32>
// CUDA: sched.launch @attention_grad({{.+}}, %[[WS]]) on @compute
// CPU-LABEL: sched.program @rank0
// CPU: sched.arena @workspace device workspace size 102400
// CPU: %[[WS:.+]] = sched.buffer @workspace[0, 102400] : memref<25600xf32>
// CPU: sched.launch @attention_grad({{.+}}, %[[WS]]) on @compute
func.func @forward(%dy: tensor<1x8x100x16xf32>, %q: tensor<1x8x100x16xf32>, %k: tensor<1x2x100x16xf32>, %v: tensor<1x2x100x16xf32>) -> (tensor<1x8x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>) {
  %dq, %dk, %dv = tg.attention_grad %dy, %q, %k, %v {causal} : (tensor<1x8x100x16xf32>, tensor<1x8x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>) -> (tensor<1x8x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>)
  return %dq, %dk, %dv : tensor<1x8x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>
}

// -----

// Tests that without grouped query heads the CUDA workspace holds only the
// statistics: 2 x 2 heads x 100 rows.
// CUDA-LABEL: sched.program @rank0
// CUDA: sched.arena @workspace device workspace size 1600
// CUDA: sched.launch @attention_grad
// CPU-LABEL: sched.program @rank0
// CPU: sched.arena @workspace device workspace size 102400
func.func @forward(%dy: tensor<1x2x100x16xf32>, %q: tensor<1x2x100x16xf32>, %k: tensor<1x2x100x16xf32>, %v: tensor<1x2x100x16xf32>) -> (tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>) {
  %dq, %dk, %dv = tg.attention_grad %dy, %q, %k, %v {causal} : (tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>) -> (tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>)
  return %dq, %dk, %dv : tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>
}
