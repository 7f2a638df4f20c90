// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-lower-to-sched="threads=2" | FileCheck %s

tg.param @w : tensor<8x4xf32> at #tg.external<"weights.bin", offset = 0, length = 128>
tg.param @g : tensor<8xf32> at #tg.external<"weights.bin", offset = 128, length = 32>

// Tests that a chain of ops becomes launches whose buffers share memory when
// their lifetimes do not overlap: h is dead once n exists, so s takes h's
// bytes; the input stays intact for the whole run (callers may run again);
// parameters are laid out back to back; the arena sizes are the memory
// figures, here equal to the live-bytes lower bound. Each launch records its
// work for the cost model: the 3x4 by 8x4 linear does 2*3*8*4 FLOPs and
// moves 48 + 128 + 96 bytes.
// CHECK-LABEL: sched.program @rank0 rank 0 of 1
// CHECK-SAME: sched.activations_live_bytes = 320
// CHECK: sched.arena @parameters device parameters size 192 align 64
// CHECK: sched.arena @constants device constants size 0 align 64
// CHECK: sched.arena @activations device activations size 320 align 64
// CHECK: sched.arena @workspace device workspace size 0 align 64
// CHECK: sched.kernel @linear arity -1
// CHECK: sched.kernel @rms_norm arity 3
// CHECK: sched.kernel @silu arity 2
// CHECK: %[[W:.+]] = sched.param "w" @parameters[0, 128] from "weights.bin"[0, 128] : memref<8x4xf32>
// CHECK: %[[G:.+]] = sched.param "g" @parameters[128, 32] from "weights.bin"[128, 32] : memref<8xf32>
// CHECK: %[[X:.+]] = sched.input "x" @activations[256, 48] : memref<3x4xf32>
// CHECK: %[[H:.+]] = sched.buffer @activations[[[HOFF:[0-9]+]], 96] : memref<3x8xf32>
// CHECK: sched.launch @linear(%[[X]], %[[W]], %[[H]]) on @compute {bytes = 2.720000e+02 : f64, flops = 1.920000e+02 : f64, origin = "tg.linear model.q"}
// CHECK: %[[N:.+]] = sched.buffer @activations[{{[0-9]+}}, 96] : memref<3x8xf32>
// CHECK: sched.launch @rms_norm(%[[H]], %[[G]], %[[N]]) on @compute with {epsilon = 1.000000e-05 : f64}
// CHECK: %[[S:.+]] = sched.buffer @activations[[[HOFF]], 96] : memref<3x8xf32>
// CHECK: sched.launch @silu(%[[N]], %[[S]])
// CHECK: sched.output "y" %[[S]]
// CHECK-NOT: func.func
// CHECK-NOT: tg.param
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<3x8xf32> {tg.name = "y"}) {
  %w = tg.param_ref @w : tensor<8x4xf32>
  %g = tg.param_ref @g : tensor<8xf32>
  %h = tg.linear %x, %w {tg.module = "model.q"} : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  %n = tg.rms_norm %h, %g {epsilon = 1.0e-5 : f64} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %s = tg.silu %n : tensor<3x8xf32>
  return %s : tensor<3x8xf32>
}

// -----

tg.param @wt : tensor<4x8xf32> at #tg.external<"w.bin", offset = 0, length = 128>

// Tests that a transposed weight feeding only linear layers is read in place
// (transpose_weight) instead of copied by a launch every step.
// CHECK-LABEL: sched.program @rank0
// CHECK-NOT: sched.kernel @transpose
// CHECK: %[[W:.+]] = sched.param "wt" @parameters[0, 128] from "w.bin"[0, 128] : memref<4x8xf32>
// CHECK: sched.launch @linear(%{{.+}}, %[[W]], %{{.+}}) on @compute with {transpose_weight = 1 : i64}
// CHECK-NOT: sched.launch @transpose
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %wt = tg.param_ref @wt : tensor<4x8xf32>
  %w = tg.transpose %wt permutation = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %y = tg.linear %x, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests that reshapes are views (no launch) that keep their root alive, that
// an output which is an input gets its own copy, and that constants land in
// the constants arena.
// CHECK-LABEL: sched.program @rank0
// CHECK: sched.arena @constants device constants size 64
// CHECK: %[[X:.+]] = sched.input "input0" @activations[0, 24] : memref<2x3xf32>
// CHECK: %[[C:.+]] = sched.constant @constants[0, 12] dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32> : memref<3xf32>
// CHECK: %[[S:.+]] = sched.buffer @activations[{{[0-9]+}}, 24] : memref<2x3xf32>
// CHECK: sched.launch @add(%[[X]], %[[C]], %[[S]])
// CHECK-NOT: output copy of output0
// CHECK: %[[CP:.+]] = sched.buffer @activations[{{[0-9]+}}, 24] : memref<2x3xf32>
// CHECK: sched.launch @copy(%[[X]], %[[CP]]) on @compute {bytes = 4.800000e+01 : f64, flops = 0.000000e+00 : f64, origin = "output copy of output1"}
// CHECK: %[[V:.+]] = sched.buffer @activations[{{[0-9]+}}, 24] : memref<6xf32>
// CHECK: sched.output "output0" %[[V]]
// CHECK: sched.output "output1" %[[CP]]
func.func @forward(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<2x3xf32>) {
  %c = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %s = tg.add %x, %c : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %v = tg.reshape %s : tensor<2x3xf32> -> tensor<6xf32>
  return %v, %x : tensor<6xf32>, tensor<2x3xf32>
}

// -----

// Tests that attention gets a per-worker workspace: threads (2) x 64 query
// rows x S (16) keys x 4 bytes.
// CHECK-LABEL: sched.program @rank0
// CHECK: sched.arena @workspace device workspace size 8192
// CHECK: %[[WS:.+]] = sched.buffer @workspace[0, 8192] : memref<2048xf32>
// CHECK: sched.launch @attention(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[WS]]) on @compute with {causal = 1 : i64, scale = 2.500000e-01 : f64}
func.func @forward(%q: tensor<1x4x16x16xf32>, %k: tensor<1x2x16x16xf32>, %v: tensor<1x2x16x16xf32>) -> tensor<1x4x16x16xf32> {
  %y = tg.attention %q, %k, %v {causal} : (tensor<1x4x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x4x16x16xf32>
  return %y : tensor<1x4x16x16xf32>
}

// -----

// Tests that cross-entropy sums per-row losses from a workspace, so the
// loss does not depend on the thread count.
// CHECK-LABEL: sched.program @rank0
// CHECK: sched.arena @workspace device workspace size 64
// CHECK: sched.launch @cross_entropy(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) on @compute with {ignore_index = -100 : i64, reduction = "mean"}
func.func @forward(%x: tensor<4x8xf32>, %l: tensor<4xi64>) -> tensor<f32> {
  %y = tg.cross_entropy %x, %l : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// Tests that bf16 compute is rejected with the types the CPU backend has.
func.func @forward(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{the CPU backend has no kernel for tg.exp on 'bf16' (it computes on f32, f64, i32, i64 and i1)}}
  %y = tg.exp %x : tensor<4xbf16>
  return %y : tensor<4xbf16>
}

// -----

// expected-error @+1 {{no function @forward to plan}}
module {
  func.func @other() {
    return
  }
}

// -----

tg.param @w : tensor<8x4xf32> trainable at #tg.external<"w.bin", offset = 0, length = 128>
tg.param @bias : tensor<4xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<8x4xf32> of @w grad
tg.state @bias.grad : tensor<4xf32> of @bias grad
tg.state @w.exp_avg : tensor<8x4xf32> of @w exp_avg
tg.state @w.exp_avg_sq : tensor<8x4xf32> of @w exp_avg_sq

// Tests that a training module becomes one program with two entries: the
// state lives in gradients and optimizer-state arenas, a weight gradient
// adds straight into its accumulator (no buffer, `accumulate = 1`), an
// accumulation of a reshaped value reads the view with the state's shape,
// inputs of both entries keep their own bytes, and AdamW updates the
// parameter and its moments in place.
// CHECK-LABEL: sched.program @rank0
// CHECK: sched.arena @gradients device gradients size 192
// CHECK: sched.arena @optimizer_state device optimizer_state size 256
// CHECK: %[[W:.+]] = sched.param "w" @parameters[0, 128] from "w.bin"[0, 128] trainable
// CHECK: %[[WG:.+]] = sched.state "w.grad" @gradients[0, 128] of "w" kind "grad" : memref<8x4xf32>
// CHECK: %[[BG:.+]] = sched.state "bias.grad" @gradients[128, 16] of "bias" kind "grad" : memref<4xf32>
// CHECK: %[[M:.+]] = sched.state "w.exp_avg" @optimizer_state[0, 128]
// CHECK: %[[V:.+]] = sched.state "w.exp_avg_sq" @optimizer_state[128, 128]
// CHECK: sched.entry "train_step"
// CHECK: %[[X:.+]] = sched.input "x"
// CHECK: %[[DY:.+]] = sched.input "dy"
// CHECK: sched.launch @linear_weight_grad(%[[DY]], %[[X]], %[[WG]]) on @compute with {accumulate = 1 : i64}
// CHECK: %[[SUM:.+]] = sched.buffer @activations[[[OFF:[0-9]+]], 16] : memref<1x4xf32>
// CHECK: %[[FLAT:.+]] = sched.buffer @activations[[[OFF]], 16] : memref<4xf32>
// CHECK: sched.launch @accumulate(%[[FLAT]], %[[BG]]) {{.*}} : memref<4xf32>, memref<4xf32>
// CHECK: sched.output "loss"
// CHECK: sched.entry "optimizer_step"
// CHECK: %[[STEP:.+]] = sched.input "step"
// CHECK: sched.launch @adamw(%[[W]], %[[WG]], %[[M]], %[[V]], %{{.+}}, %[[STEP]], %{{.+}}) on @compute with {beta1 = 9.000000e-01 : f64
// CHECK: sched.output "lr"
func.func @train_step(%x: tensor<2x4xf32> {tg.name = "x"}, %dy: tensor<2x8xf32> {tg.name = "dy"}) -> (tensor<f32> {tg.name = "loss"}) {
  %dw = tg.linear_weight_grad %dy, %x : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
  tg.accumulate %dw into @w.grad : tensor<8x4xf32>
  %s = tg.reduce_sum %x axes = [0] keep_dims : tensor<2x4xf32> -> tensor<1x4xf32>
  %g = tg.reshape %s : tensor<1x4xf32> -> tensor<4xf32>
  tg.accumulate %g into @bias.grad : tensor<4xf32>
  %l = tg.reduce_sum %x axes = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> (tensor<f32> {tg.name = "lr"}) {
  %lr = arith.constant dense<1.0e-3> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  tg.adamw_update @w grad @w.grad moments(@w.exp_avg, @w.exp_avg_sq) lr %lr step %step scale %one {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr : tensor<f32>
}

// -----

tg.param @up : tensor<32x64xf32> at #tg.external<"weights.bin", offset = 0, length = 8192> quantized {scheme = "nf4", rows = 64, cols = 32, source_transposed = true}
tg.param @down : tensor<32x64xf32> at #tg.external<"weights.bin", offset = 8192, length = 8192> quantized {scheme = "int8", rows = 32, cols = 64}

// Tests that a quantized weight is stored as its scheme's bytes (nf4 with
// double quantization of 64 x 32: 1024 packed + 32 codes + 4 nested + 4
// offset), that linear layers read it through linear_quantized (the
// backward pass's W^T with transpose_weight) and never dequantize it whole,
// and that only a reader other than a linear layer gets a dequantize launch.
// CHECK-LABEL: sched.program
// CHECK: sched.kernel @linear_quantized
// CHECK: %[[UP:.+]] = sched.param "up" @parameters[0, 1064] from "weights.bin"[0, 8192] quantized {cols = 32 : i64, rows = 64 : i64, scheme = "nf4", source_transposed = true} source f32 : memref<1064xui8>
// CHECK: %[[DOWN:.+]] = sched.param "down" {{.*}} quantized {{{.*}}scheme = "int8"{{.*}}} source f32 : memref<2176xui8>
// CHECK: sched.launch @linear_quantized(%{{.+}}, %[[UP]], %[[Y:.+]], %{{.+}}) on @compute with {block_size = 64 : i64, cols = 32 : i64, double_quant = true, nested_block_size = 256 : i64, rows = 64 : i64, scheme = "nf4", transpose_weight = 0 : i64}
// CHECK: sched.launch @linear_quantized(%[[Y]], %[[UP]], %{{.+}}, %{{.+}}) on @compute with {{{.*}}transpose_weight = 1 : i64}
// CHECK: sched.launch @dequantize(%[[DOWN]], %[[D:.+]]) on @compute with {cols = 64 : i64, outlier_columns = 0 : i64, outlier_threshold = 0.000000e+00 : f64, rows = 32 : i64, scheme = "int8"}
// CHECK: sched.launch @exp(%[[D]]
// CHECK-NOT: sched.launch @dequantize
func.func @forward(%x: tensor<2x32xf32> {tg.name = "x"}) -> (tensor<2x32xf32> {tg.name = "dx"}, tensor<32x64xf32> {tg.name = "e"}) {
  %w = tg.dequantize @up : tensor<64x32xf32>
  %y = tg.linear %x, %w : (tensor<2x32xf32>, tensor<64x32xf32>) -> tensor<2x64xf32>
  %wt = tg.transpose %w permutation = [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %dx = tg.linear %y, %wt : (tensor<2x64xf32>, tensor<32x64xf32>) -> tensor<2x32xf32>
  %d = tg.dequantize @down : tensor<32x64xf32>
  %e = tg.exp %d : tensor<32x64xf32>
  return %dx, %e : tensor<2x32xf32>, tensor<32x64xf32>
}

// -----

tg.param @w : tensor<8x4xf32> at #tg.external<"w.bin", offset = 0, length = 128>
tg.param @a : tensor<2x4xf32> at #tg.external<"w.bin", offset = 128, length = 32>
tg.param @b : tensor<8x2xf32> at #tg.external<"w.bin", offset = 160, length = 64>

// Tests that LoRA's `base + s (x A^T) B^T` runs as GEMMs alone: the product
// by the scale becomes B's GEMM's alpha and the sum becomes that GEMM
// adding into the base layer's output, read for the last time there; no
// mul or add launch and no buffer between them.
// CHECK-LABEL: sched.program @rank0
// CHECK-NOT: sched.kernel @mul
// CHECK-NOT: sched.kernel @add
// CHECK: %[[BASE:.+]] = sched.buffer @activations[{{[0-9]+}}, 96] : memref<3x8xf32>
// CHECK: sched.launch @linear(%{{.+}}, %{{.+}}, %[[BASE]])
// CHECK: %[[H:.+]] = sched.buffer @activations[{{[0-9]+}}, 24] : memref<3x2xf32>
// CHECK: sched.launch @linear(%{{.+}}, %{{.+}}, %[[H]])
// CHECK-NEXT: sched.launch @linear(%[[H]], %{{.+}}, %[[BASE]]) on @compute with {accumulate = 1 : i64, alpha = 2.000000e+00 : f64}
// CHECK-NOT: sched.launch @mul
// CHECK-NOT: sched.launch @add
// CHECK: sched.output "y" %[[BASE]]
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<3x8xf32> {tg.name = "y"}) {
  %w = tg.param_ref @w : tensor<8x4xf32>
  %a = tg.param_ref @a : tensor<2x4xf32>
  %b = tg.param_ref @b : tensor<8x2xf32>
  %scale = arith.constant dense<2.0> : tensor<f32>
  %base = tg.linear %x, %w : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  %h = tg.linear %x, %a : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %l = tg.linear %h, %b : (tensor<3x2xf32>, tensor<8x2xf32>) -> tensor<3x8xf32>
  %s = tg.mul %l, %scale : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %y = tg.add %base, %s : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

tg.param @b : tensor<8x2xf32> at #tg.external<"w.bin", offset = 0, length = 64>
tg.state @b.grad : tensor<8x2xf32> of @b grad

// Tests that a product by a scale read only by GEMMs is applied by each of
// them (alpha) reading the unscaled tensor: LoRA's backward through B, whose
// weight gradient also adds straight into its accumulator.
// CHECK-LABEL: sched.program @rank0
// CHECK-NOT: sched.kernel @mul
// CHECK: %[[DY:.+]] = sched.input "dy"
// CHECK: sched.launch @linear(%[[DY]], %{{.+}}, %{{.+}}) on @compute with {alpha = 5.000000e-01 : f64, transpose_weight = 1 : i64}
// CHECK: sched.launch @linear_weight_grad(%[[DY]], %{{.+}}, %{{.+}}) on @compute with {accumulate = 1 : i64, alpha = 5.000000e-01 : f64}
// CHECK-NOT: sched.launch @mul
func.func @forward(%dy: tensor<3x8xf32> {tg.name = "dy"}, %h: tensor<3x2xf32> {tg.name = "h"}) -> (tensor<3x2xf32> {tg.name = "dh"}) {
  %b = tg.param_ref @b : tensor<8x2xf32>
  %scale = arith.constant dense<0.5> : tensor<f32>
  %g = tg.mul %dy, %scale : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %bt = tg.transpose %b permutation = [1, 0] : tensor<8x2xf32> -> tensor<2x8xf32>
  %dh = tg.linear %g, %bt : (tensor<3x8xf32>, tensor<2x8xf32>) -> tensor<3x2xf32>
  %db = tg.linear_weight_grad %g, %h : (tensor<3x8xf32>, tensor<3x2xf32>) -> tensor<8x2xf32>
  tg.accumulate %db into @b.grad : tensor<8x2xf32>
  return %dh : tensor<3x2xf32>
}

// -----

tg.param @w : tensor<4x4xf32> at #tg.external<"w.bin", offset = 0, length = 64>

// Tests what the GEMM epilogues leave to elementwise launches, and that
// those run as fusion groups: a sum whose addend is read again after the
// GEMM (it would see the GEMM's product) stays a sum, fused with the silu
// that makes its addend and the product after it (their values never leave
// the launch); a sum of a GEMM's product and an input, which lives on,
// becomes the GEMM reading the input as its addend (cuBLASLt's C); the
// product by a scale read by no GEMM stays a launch.
// CHECK-LABEL: sched.program @rank0
// CHECK: %[[X:.+]] = sched.input "x"
// CHECK: %[[L:.+]] = sched.buffer
// CHECK: sched.launch @linear(%[[X]], %{{.+}}, %[[L]])
// CHECK-NOT: accumulate
// CHECK: %[[T:.+]] = sched.buffer
// CHECK: sched.launch @fused_elementwise(%[[X]], %[[L]], %[[T]]) on @compute with {outputs = array<i64: 2>, program = "silu(x0);add(t0,x1);mul(t0,t1)"} {{.*}}origin = "tg.mul (+2 fused)"
// CHECK: %[[Y:.+]] = sched.buffer
// CHECK: sched.launch @linear(%[[T]], %{{.+}}, %[[X]], %[[Y]]) on @compute with {addend = 1 : i64}
// CHECK-NOT: sched.launch @add
// CHECK: %[[Z:.+]] = sched.buffer
// CHECK: sched.launch @mul(%[[Y]], %{{.+}}, %[[Z]])
// CHECK: sched.output "y" %[[Y]]
// CHECK: sched.output "z" %[[Z]]
func.func @forward(%x: tensor<2x4xf32> {tg.name = "x"}) -> (tensor<2x4xf32> {tg.name = "y"}, tensor<2x4xf32> {tg.name = "z"}) {
  %w = tg.param_ref @w : tensor<4x4xf32>
  %c = arith.constant dense<3.0> : tensor<f32>
  %a = tg.silu %x : tensor<2x4xf32>
  %l = tg.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = tg.add %a, %l : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %t = tg.mul %a, %s : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l2 = tg.linear %t, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %y = tg.add %x, %l2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = tg.mul %y, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %y, %z : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

tg.param @w : tensor<4x4xf32> at #tg.external<"w.bin", offset = 0, length = 64>
tg.param @bias : tensor<4xf32> at #tg.external<"w.bin", offset = 64, length = 16>

// Tests where a fusion group must end: a member's result read by a
// non-elementwise op before the next elementwise op (the linear needs %e
// first), so exp and the sum run as two groups; an input repeating along
// the leading dimensions (a bias) and a one-element constant join a group.
// CHECK-LABEL: sched.program @rank0
// CHECK: sched.launch @fused_elementwise({{.*}}) on @compute with {outputs = array<i64: 1>, program = "neg(x0);exp(t0)"}
// CHECK: sched.launch @linear
// CHECK: sched.launch @fused_elementwise({{.*}}) on @compute with {outputs = array<i64: 2>, program = "add(x0,x1);sub(t0,x2);mul(t1,0.5)"}
func.func @forward(%x: tensor<2x4xf32> {tg.name = "x"}) -> (tensor<2x4xf32> {tg.name = "y"}) {
  %w = tg.param_ref @w : tensor<4x4xf32>
  %b = tg.param_ref @bias : tensor<4xf32>
  %half = arith.constant dense<0.5> : tensor<1x1xf32>
  %n = tg.neg %x : tensor<2x4xf32>
  %e = tg.exp %n : tensor<2x4xf32>
  %l = tg.linear %e, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = tg.add %l, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %d = tg.sub %s, %e : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = tg.mul %d, %half : (tensor<2x4xf32>, tensor<1x1xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

tg.param @w : tensor<8x4xf32> at #tg.external<"weights.bin", offset = 0, length = 128>

// Tests that an fp32 CPU plan refuses a GEMM tailor-emulate-half marked
// (the plan would say fp32 and round to bf16).
func.func @forward(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<3x8xf32> {tg.name = "y"}) {
  %w = tg.param_ref @w : tensor<8x4xf32>
  // expected-error @+1 {{a CPU plan in fp32 needs every GEMM unmarked, this one computes bf16}}
  %y = tg.linear %x, %w {tg.bf16} : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}
