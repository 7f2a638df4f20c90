// A CUDA program with four fused_elementwise launches: silu(x) * y twice
// (one kernel), the same program writing silu(x) too (another: other
// outputs), and x * scale + bias with Repeating inputs (a third).
sched.program @rank0 rank 0 of 1 attributes {sched.backend = "cuda", sched.sm = 90 : i64} {
  sched.arena @act device activations size 4096
  sched.stream @compute
  sched.kernel @fused_elementwise arity -1
  %x = sched.input "x" @act[0, 512] : memref<4x32xf32>
  %g = sched.input "g" @act[512, 512] : memref<4x32xf32>
  %s = sched.input "scale" @act[1024, 4] : memref<f32>
  %b = sched.input "bias" @act[1088, 128] : memref<32xf32>
  %h = sched.buffer @act[1536, 512] : memref<4x32xf32>
  %h2 = sched.buffer @act[2048, 512] : memref<4x32xf32>
  %y = sched.buffer @act[2560, 512] : memref<4x32xf32>
  %s2 = sched.buffer @act[3072, 512] : memref<4x32xf32>
  sched.launch @fused_elementwise(%x, %g, %h) on @compute with {program = "silu(x0);mul(t0,x1)", outputs = array<i64: 1>} : memref<4x32xf32>, memref<4x32xf32>, memref<4x32xf32>
  sched.launch @fused_elementwise(%h, %g, %h2) on @compute with {program = "silu(x0);mul(t0,x1)", outputs = array<i64: 1>} : memref<4x32xf32>, memref<4x32xf32>, memref<4x32xf32>
  sched.launch @fused_elementwise(%h, %g, %s2, %h2) on @compute with {program = "silu(x0);mul(t0,x1)", outputs = array<i64: 0, 1>} : memref<4x32xf32>, memref<4x32xf32>, memref<4x32xf32>, memref<4x32xf32>
  sched.launch @fused_elementwise(%h2, %s, %b, %y) on @compute with {program = "mul(x0,x1);add(t0,x2)", outputs = array<i64: 1>} : memref<4x32xf32>, memref<f32>, memref<32xf32>, memref<4x32xf32>
  sched.output "y" %y : memref<4x32xf32>
}
