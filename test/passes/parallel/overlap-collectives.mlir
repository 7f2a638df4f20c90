// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-overlap-collectives | FileCheck %s --check-prefix=ZERO2
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-overlap-collectives="in-flight=1" --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=2 bucket-bytes=200" --tailor-overlap-collectives="move-ddp-reductions=true" | FileCheck %s --check-prefix=DDP
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=2 bucket-bytes=200" --tailor-overlap-collectives="move-ddp-reductions=true" --tailor-lower-to-sched | FileCheck %s --check-prefix=DDPSCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=2 bucket-bytes=200" --tailor-overlap-collectives | FileCheck %s --check-prefix=STAY
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-overlap-collectives | FileCheck %s --check-prefix=ZERO3
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-overlap-collectives --tailor-lower-to-sched | FileCheck %s --check-prefix=ZERO3SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-overlap-collectives="prefetch=false" | FileCheck %s --check-prefix=NOPREFETCH
// RUN: not tailor-opt %s --tailor-overlap-collectives="in-flight=0" 2>&1 | FileCheck %s --check-prefix=BAD

tg.param @a : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<30xf32> trainable init <"zeros", 0.0 : f64>
tg.param @c : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @e : tensor<4x4xf32> init <"zeros", 0.0 : f64>
tg.state @a.grad : tensor<4x4xf32> of @a grad
tg.state @b.grad : tensor<30xf32> of @b grad
tg.state @c.grad : tensor<4x4xf32> of @c grad
tg.state @a.m : tensor<4x4xf32> of @a exp_avg
tg.state @a.v : tensor<4x4xf32> of @a exp_avg_sq
tg.state @b.m : tensor<30xf32> of @b exp_avg
tg.state @b.v : tensor<30xf32> of @b exp_avg_sq
tg.state @c.m : tensor<4x4xf32> of @c exp_avg
tg.state @c.v : tensor<4x4xf32> of @c exp_avg_sq

// Tests that ZeRO-2's reduce-scatters in the training step are marked for
// the communication stream and their accumulations move down by two
// buckets (here: both to the end), so each has the rest of backward to
// overlap with.
// ZERO2-LABEL: func.func @train_step
// ZERO2: %[[S1:.+]] = tg.reduce_scatter %{{.+}} avg over world shards 2 {tg.overlap}
// ZERO2-NOT: tg.accumulate
// ZERO2: %[[S0:.+]] = tg.reduce_scatter %{{.+}} avg over world shards 2 {tg.overlap}
// ZERO2: tg.reduce_sum
// ZERO2-NEXT: tg.accumulate %[[S1]] into @zero.b1.grad
// ZERO2-NEXT: tg.accumulate %[[S0]] into @zero.b0.grad
// ZERO2-NEXT: return
// ZERO2-LABEL: func.func @optimizer_step
// ZERO2-NOT: tg.overlap

// Tests that planning issues a marked collective on the communication
// stream between events, that compute waits for it right before the first
// launch that touches its buffers (with one bucket in flight: before the
// next bucket's collective, the accumulation there), and that no buffer
// between takes its bytes: the first bucket's output [1024, 256) is not
// reused before the wait.
// SCHED: sched.stream @compute
// SCHED-NEXT: sched.stream @comm
// SCHED-NEXT: sched.event @comm.ready.0
// SCHED-NEXT: sched.event @comm.done.0
// SCHED: sched.entry "train_step"
// SCHED: sched.record @comm.ready.0 on @compute
// SCHED-NEXT: sched.wait @comm.ready.0 on @comm
// SCHED-NEXT: %[[OUT:.+]] = sched.buffer @activations[1024, 256] : memref<64xf32>
// SCHED-NEXT: sched.collective reduce_scatter %{{.+}} to %[[OUT]] reduce avg group [0, 1] on @comm
// SCHED-NEXT: sched.record @comm.done.0 on @comm
// SCHED-NOT: @activations[1024
// SCHED: sched.wait @comm.done.0 on @compute
// SCHED-NEXT: sched.launch @accumulate(%[[OUT]], %{{.+}}) on @compute
// SCHED-NEXT: sched.record @comm.ready.1 on @compute
// SCHED: sched.collective reduce_scatter {{.+}} on @comm
// SCHED: sched.wait @comm.done.1 on @compute
// SCHED-NEXT: sched.launch @accumulate
// SCHED: sched.entry "optimizer_step"
// SCHED-NOT: on @comm

// Tests that with one micro-batch a step DDP's all-reduces move into the
// training step right after the last write of one of their gradients,
// marked, and leave the optimizer step; each accumulation first moves up
// to right after its gradient is made (b's above c's mul), so a bucket
// waits for its own gradients only.
// DDP-LABEL: func.func @train_step
// DDP: tg.accumulate %{{.+}} into @a.grad
// DDP-NEXT: tg.all_reduce_states [@a.grad] avg over world {tg.overlap}
// DDP-NEXT: %[[GB:.+]] = tg.mul %arg0, %arg0
// DDP-NEXT: tg.accumulate %[[GB]] into @b.grad
// DDP-NEXT: tg.mul %arg1, %arg1
// DDP-NEXT: tg.accumulate %{{.+}} into @c.grad
// DDP-NEXT: tg.all_reduce_states [@c.grad, @b.grad] avg over world {tg.overlap}
// DDP-LABEL: func.func @optimizer_step
// DDP-NOT: tg.all_reduce_states

// Tests that a moved all-reduce in place on the gradients runs on the
// communication stream and compute waits for it at the end of the step.
// DDPSCHED: sched.entry "train_step"
// DDPSCHED: sched.collective all_reduce %[[G:.+]] to %[[G]] reduce avg group [0, 1] on @comm
// DDPSCHED: sched.collective all_reduce %[[H:.+]] to %[[H]] reduce avg group [0, 1] on @comm
// DDPSCHED: sched.wait @comm.done.0 on @compute
// DDPSCHED-NEXT: sched.wait @comm.done.1 on @compute
// DDPSCHED-NEXT: sched.output
// DDPSCHED: sched.entry "optimizer_step"
// DDPSCHED-NOT: sched.collective all_reduce %{{.+}} to %{{.+}} reduce avg

// Tests that without move-ddp-reductions (several micro-batches a step)
// DDP's all-reduces stay in the optimizer step, unmarked.
// STAY-LABEL: func.func @train_step
// STAY-NOT: tg.all_reduce_states
// STAY-LABEL: func.func @optimizer_step
// STAY: tg.all_reduce_states [@c.grad, @b.grad] avg over world
// STAY-NOT: tg.overlap

// Tests that ZeRO-3's gathers are issued one bucket ahead, marked: the
// frozen bucket's gather moves up to where compute starts reading the
// first one (its mul), and backward's gather of @zero.b1 to where compute
// starts reading the frozen one (its add).
// ZERO3-LABEL: func.func @train_step
// ZERO3-NEXT: %[[G0:.+]] = tg.gather_bucket @zero.b1 {tg.overlap}
// ZERO3-NEXT: %[[M0:.+]] = tg.bucket_member %[[G0]][0]
// ZERO3-NEXT: %[[G1:.+]] = tg.gather_bucket @zero.f0 {tg.overlap}
// ZERO3-NEXT: tg.mul %{{.+}}, %[[M0]]
// ZERO3-NEXT: tg.bucket_member %[[G1]][0]
// ZERO3-NEXT: tg.gather_bucket @zero.b1 {tg.overlap}
// ZERO3-NEXT: tg.add

// Tests that a prefetched gather runs on the communication stream while
// compute waits only for the one it reads: both forward gathers are issued
// before the first reader, which waits for the first alone; the mul and
// the add that read the two buckets run as one fused launch, after the
// wait for the second, and the backward gather's ready event comes where
// the mul was.
// ZERO3SCHED: sched.entry "train_step"
// ZERO3SCHED: sched.collective all_gather %{{.+}} to %[[B0:.+]] group [0, 1] on @comm
// ZERO3SCHED: sched.record @comm.ready.1 on @compute
// ZERO3SCHED: sched.collective all_gather %{{.+}} to %{{.+}} group [0, 1] on @comm
// ZERO3SCHED-NEXT: sched.record @comm.done.1 on @comm
// ZERO3SCHED-NEXT: sched.wait @comm.done.0 on @compute
// ZERO3SCHED-NEXT: sched.record @comm.ready.2 on @compute
// ZERO3SCHED: sched.collective all_gather %{{.+}} to %{{.+}} group [0, 1] on @comm
// ZERO3SCHED: sched.wait @comm.done.1 on @compute
// ZERO3SCHED: sched.launch @fused_elementwise

// Tests that prefetch=false leaves each gather right before its first
// reader, unmarked.
// NOPREFETCH-LABEL: func.func @train_step
// NOPREFETCH-NEXT: tg.gather_bucket @zero.b1 :
// NOPREFETCH-NEXT: tg.bucket_member
// NOPREFETCH-NEXT: tg.mul
// NOPREFETCH-NEXT: tg.gather_bucket @zero.f0 :

// BAD: error: tailor-overlap-collectives: in-flight must be at least 1, got 0
func.func @train_step(%x: tensor<30xf32>, %y: tensor<4x4xf32>) -> tensor<f32> {
  %a = tg.param_ref @a : tensor<4x4xf32>
  %e = tg.param_ref @e : tensor<4x4xf32>
  %h = tg.mul %y, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %o = tg.add %h, %e : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %one = arith.constant dense<1.0> : tensor<f32>
  %d = tg.cross_entropy_grad %o, %t, %one : (tensor<4x4xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x4xf32>
  %ga = tg.mul %d, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  tg.accumulate %ga into @a.grad : tensor<4x4xf32>
  %gb = tg.mul %x, %x : (tensor<30xf32>, tensor<30xf32>) -> tensor<30xf32>
  %gc = tg.mul %y, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  tg.accumulate %gc into @c.grad : tensor<4x4xf32>
  tg.accumulate %gb into @b.grad : tensor<30xf32>
  %s = tg.reduce_sum %gb axes = [0] : tensor<30xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @optimizer_step(%step: tensor<i64>) -> (tensor<f32>, tensor<f32>) {
  %lr = arith.constant dense<0.01> : tensor<f32>
  %ga = tg.state_ref @a.grad : tensor<4x4xf32>
  %gb = tg.state_ref @b.grad : tensor<30xf32>
  %gc = tg.state_ref @c.grad : tensor<4x4xf32>
  %norm = tg.global_norm %ga, %gb, %gc : (tensor<4x4xf32>, tensor<30xf32>, tensor<4x4xf32>) -> tensor<f32>
  tg.adamw_update @a grad @a.grad moments(@a.m, @a.v) lr %lr step %step scale %norm {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @b grad @b.grad moments(@b.m, @b.v) lr %lr step %step scale %norm {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  tg.adamw_update @c grad @c.grad moments(@c.m, @c.v) lr %lr step %step scale %norm {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<i64>, tensor<f32>
  return %lr, %norm : tensor<f32>, tensor<f32>
}
