// RUN: tailor-translate --mlir-to-tplan %s --split-input-file --verify-diagnostics -o /dev/null

// Tests that a CPU program with a parameter from a file, a created
// parameter and a launch writes a plan without diagnostics.
sched.program @rank0 rank 0 of 1 attributes {sched.backend = "cpu"} {
  sched.arena @params host parameters size 256
  sched.arena @act host activations size 256
  sched.stream @compute
  sched.kernel @add arity 3
  %x = sched.input "x" @act[0, 64] : memref<16xf32>
  %w = sched.param "w" @params[0, 64] from "w.bin"[0, 64] : memref<16xf32>
  %a = sched.param "lora_A" @params[64, 64] trainable init "kaiming_uniform"(2.0) : memref<4x4xf32>
  %y = sched.buffer @act[64, 64] : memref<16xf32>
  sched.launch @add(%x, %w, %y) on @compute : memref<16xf32>, memref<16xf32>, memref<16xf32>
  sched.output "y" %y : memref<16xf32>
}

// -----

// Tests that an initializer the runtime cannot create is an error naming
// the parameter, not zeros.
sched.program @rank0 rank 0 of 1 attributes {sched.backend = "cpu"} {
  sched.arena @params host parameters size 256
  // expected-error @+1 {{parameter 'lora_A' has an unknown init 'xavier' (expected zeros, kaiming_uniform or normal)}}
  %a = sched.param "lora_A" @params[0, 64] trainable init "xavier"(1.0) : memref<4x4xf32>
}

// -----

// Tests that a program without a backend is an error, not a CPU plan.
// expected-error @+1 {{the program has no sched.backend (expected "cpu" or "cuda")}}
sched.program @rank0 rank 0 of 1 {
  sched.arena @act host activations size 256
}

// -----

// Tests that an unknown backend is an error, not a CPU plan.
// expected-error @+1 {{unknown sched.backend 'rocm' (expected cpu or cuda)}}
sched.program @rank0 rank 0 of 1 attributes {sched.backend = "rocm"} {
  sched.arena @act host activations size 256
}

// -----

// Tests that a CPU program naming a kernel the CPU backend lacks is refused
// when the plan is written, not when it is loaded.
sched.program @rank0 rank 0 of 1 attributes {sched.backend = "cpu"} {
  sched.arena @act host activations size 256
  sched.stream @compute
  // expected-error @+1 {{the CPU backend has no kernel 'frobnicate'}}
  sched.kernel @frobnicate arity 1
  %x = sched.buffer @act[0, 64] : memref<16xf32>
  sched.launch @frobnicate(%x) on @compute : memref<16xf32>
}

// -----

// Tests that a quantized weight read from a float type the plan format has
// no dtype for is an error (its source dtype was dereferenced unchecked).
sched.program @rank0 rank 0 of 1 attributes {sched.backend = "cpu"} {
  sched.arena @params host parameters size 256
  // expected-error @+1 {{the plan format has no element type 'f8E4M3FN'}}
  %w = sched.param "w" @params[0, 48] from "w.bin"[0, 32] quantized {scheme = "int8", rows = 4, cols = 8} source f8E4M3FN : memref<48xui8>
}
