// REQUIRES: cuda-build
// RUN: rm -rf %t && mkdir -p %t
// RUN: tailor-translate --mlir-to-tplan %s --split-input-file --verify-diagnostics -o %t/plan.tplan
// RUN: tailor-translate --mlir-to-tplan %S/Inputs/fused-two-launches.mlir -o %t/two.tplan
// RUN: tailor inspect %t/two.tplan | FileCheck %s

// Tests that a CUDA plan's fused_elementwise launches get one generated
// kernel per distinct program, outputs and input layout (two launches of
// one program share it; the same program writing other outputs does not),
// compiled by NVRTC into the module "fused": a cubin for the target's SM
// and PTX, next to the prebuilt families.
// CHECK: target: cuda (cuda, sm_90
// CHECK-DAG: device code: fused ptx compute_80 (3 kernels, {{[0-9]+}} bytes
// CHECK-DAG: device code: fused cubin sm_90a (3 kernels, {{[0-9]+}} bytes

// Tests that a fused program the CUDA backend cannot run is refused when
// the plan is written, naming the launch's clause.
sched.program @rank0 rank 0 of 1 attributes {sched.backend = "cuda", sched.sm = 90 : i64} {
  sched.arena @act device activations size 1024
  sched.stream @compute
  sched.kernel @fused_elementwise arity -1
  %x = sched.buffer @act[0, 64] : memref<16xf32>
  %y = sched.buffer @act[64, 64] : memref<16xf32>
  // expected-error @+1 {{fused_elementwise: program clause 1 'cos(t0)' has no op 'cos'}}
  sched.launch @fused_elementwise(%x, %y) on @compute with {program = "exp(x0);cos(t0)", outputs = array<i64: 1>} : memref<16xf32>, memref<16xf32>
}

// -----

// Tests that a fused launch without its outputs is refused, not guessed.
sched.program @rank0 rank 0 of 1 attributes {sched.backend = "cuda", sched.sm = 90 : i64} {
  sched.arena @act device activations size 1024
  sched.stream @compute
  sched.kernel @fused_elementwise arity -1
  %x = sched.buffer @act[0, 64] : memref<16xf32>
  %y = sched.buffer @act[64, 64] : memref<16xf32>
  // expected-error @+1 {{a fused_elementwise launch needs a string 'program' and an i64 array 'outputs'}}
  sched.launch @fused_elementwise(%x, %y) on @compute with {program = "exp(x0)"} : memref<16xf32>, memref<16xf32>
}
