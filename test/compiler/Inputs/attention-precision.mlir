// A CUDA program with one attention launch (f32 storage) whose precision
// the RUN lines substitute for PRECISION.
sched.program @rank0 rank 0 of 1 attributes {sched.backend = "cuda", sched.sm = 90 : i64, sched.precision = "PRECISION"} {
  sched.arena @act device activations size 8192
  sched.stream @compute
  sched.kernel @attention arity -1
  %q = sched.input "q" @act[0, 2048] : memref<1x2x8x32xf32>
  %k = sched.input "k" @act[2048, 1024] : memref<1x1x8x32xf32>
  %v = sched.input "v" @act[3072, 1024] : memref<1x1x8x32xf32>
  %y = sched.buffer @act[4096, 2048] : memref<1x2x8x32xf32>
  %ws = sched.buffer @act[6144, 4] : memref<1xf32>
  sched.launch @attention(%q, %k, %v, %y, %ws) on @compute with {causal = 1 : i64, scale = 0.25 : f64} : memref<1x2x8x32xf32>, memref<1x1x8x32xf32>, memref<1x1x8x32xf32>, memref<1x2x8x32xf32>, memref<1xf32>
  sched.output "y" %y : memref<1x2x8x32xf32>
}
