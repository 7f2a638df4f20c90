// RUN: tailor-opt %s --split-input-file --tailor-shard="strategy=zero1 world-size=2 bucket-bytes=200" | FileCheck %s --check-prefix=ZERO1
// RUN: tailor-opt %s --split-input-file --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" | FileCheck %s --check-prefix=ZERO2
// RUN: tailor-opt %s --split-input-file --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --tailor-shard="strategy=hybrid world-size=4 ranks-per-node=2 bucket-bytes=200" --tailor-lower-to-sched | FileCheck %s --check-prefix=HYBRID
// RUN: tailor-opt %s --split-input-file --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" | FileCheck %s --check-prefix=ZERO3
// RUN: tailor-opt %s --split-input-file --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200 defer-param-reads=true" --tailor-gather-params="bucket-bytes=200" | FileCheck %s --check-prefix=ZERO3
// RUN: tailor-opt %s --split-input-file --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200 defer-param-reads=true" | FileCheck %s --check-prefix=DEFER
// RUN: not tailor-opt %s --split-input-file --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-gather-params 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: tailor-opt %s --split-input-file --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200 reshard-after-forward=false" | FileCheck %s --check-prefix=KEEP
// RUN: tailor-opt %s --split-input-file --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED3

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

// Tests that zero1 groups the parameters into flat buckets from the last
// gradient back (c and b: 64 + 120 bytes; a would make 248 > 200, so it
// starts the next), members at 64-element boundaries, each bucket padded
// to two chunks of 64 elements, keeps whole gradients in train_step, and in
// optimizer_step reduce-scatters each bucket into its chunk accumulator,
// zeroes the whole gradients, takes the norm over the ranks' chunks, runs one
// update per bucket on this rank's chunk and gathers the chunks.
// ZERO1: tg.bucket @zero.b0 [@c, @b] offsets [0, 64] size 128 over world shards 2 : f32
// ZERO1: tg.state @zero.b0.grad : tensor<64xf32> of @zero.b0 grad
// ZERO1: tg.state @zero.b0.exp_avg : tensor<64xf32> of @zero.b0 exp_avg
// ZERO1: tg.bucket @zero.b1 [@a] offsets [0] size 128 over world shards 2 : f32
// ZERO1-NOT: tg.state @a.m
// ZERO1-LABEL: func.func @train_step
// ZERO1: tg.accumulate %{{.+}} into @b.grad
// ZERO1-LABEL: func.func @optimizer_step
// ZERO1: %[[C:.+]] = tg.state_ref @c.grad
// ZERO1: %[[FLAT:.+]] = tg.concat
// ZERO1: %[[CHUNK:.+]] = tg.reduce_scatter %[[FLAT]] avg over world shards 2 : tensor<128xf32> -> tensor<64xf32>
// ZERO1: tg.accumulate %[[CHUNK]] into @zero.b0.grad
// ZERO1: tg.zero_states [@c.grad, @b.grad]
// ZERO1: tg.reduce_scatter %{{.+}} avg over world shards 2 : tensor<128xf32> -> tensor<64xf32>
// ZERO1: tg.zero_states [@a.grad]
// ZERO1: %[[LOCAL:.+]] = tg.global_norm %{{.+}}, %{{.+}} : (tensor<64xf32>, tensor<64xf32>) -> tensor<f32>
// ZERO1: %[[SQ:.+]] = tg.mul %[[LOCAL]], %[[LOCAL]]
// ZERO1: %[[SUM:.+]] = tg.all_reduce %[[SQ]] sum over world
// ZERO1: %[[NORM:.+]] = tg.sqrt %[[SUM]]
// ZERO1-NOT: tg.adamw_update @a
// ZERO1: tg.adamw_update @zero.b1 grad @zero.b1.grad moments(@zero.b1.exp_avg, @zero.b1.exp_avg_sq) lr %{{.+}} step %{{.+}} scale %[[NORM]]
// ZERO1-NEXT: tg.all_gather_bucket @zero.b1
// ZERO1: tg.adamw_update @zero.b0 grad @zero.b0.grad
// ZERO1-NEXT: tg.all_gather_bucket @zero.b0
// ZERO1: return %{{.+}}, %[[NORM]]
// Tests that zero2 keeps no whole gradients: each bucket is flattened and
// reduce-scattered into its chunk accumulator right after its last
// gradient's producer (@a's bucket before @b's gradient is computed), not
// where the accumulations were.
// ZERO2-NOT: tg.state @b.grad
// ZERO2-LABEL: func.func @train_step
// ZERO2: tg.cross_entropy_grad
// ZERO2-NEXT: %[[BA:.+]] = tg.mul
// ZERO2-NEXT: %[[FA:.+]] = tg.reshape %[[BA]]
// ZERO2: %[[A:.+]] = tg.reduce_scatter %{{.+}} avg over world shards 2
// ZERO2-NEXT: tg.accumulate %[[A]] into @zero.b1.grad
// ZERO2-NEXT: %[[G:.+]] = tg.mul %arg0, %arg0
// ZERO2-NOT: tg.accumulate %[[G]] into @b.grad
// ZERO2: %[[FLAT:.+]] = tg.concat %{{.+}}, %{{.+}}, %[[G]], %{{.+}} axis = 0 : (tensor<16xf32>, tensor<48xf32>, tensor<30xf32>, tensor<34xf32>) -> tensor<128xf32>
// ZERO2: %[[CHUNK:.+]] = tg.reduce_scatter %[[FLAT]] avg over world shards 2
// ZERO2: tg.accumulate %[[CHUNK]] into @zero.b0.grad : tensor<64xf32>
// ZERO2-LABEL: func.func @optimizer_step
// ZERO2-NOT: tg.reduce_scatter
// ZERO2: tg.all_reduce
// ZERO2: tg.adamw_update @zero.b1
// ZERO2: tg.adamw_update @zero.b0
// SCHED: sched.program @rank0 rank 0 of 2
// SCHED: %[[B0:.+]] = sched.buffer @parameters[0, 512] : memref<128xf32>
// SCHED: sched.param "c" @parameters[0, 64]
// SCHED: sched.param "b" @parameters[256, 120]
// SCHED: sched.state "zero.b0.grad" @gradients[{{[0-9]+}}, 256] of "zero.b0" kind "grad" shard {flat_elements = 128 : i64, group = array<i64: 0, 1>, members = ["c", "b"], numels = array<i64: 16, 30>, offsets = array<i64: 0, 64>}
// SCHED: sched.collective reduce_scatter %{{.+}} to %{{.+}} reduce avg group [0, 1] on @compute : memref<128xf32> to memref<64xf32>
// SCHED: sched.collective all_reduce %{{.+}} to %{{.+}} reduce sum group [0, 1] on @compute : memref<f32> to memref<f32>
// SCHED: %[[CHUNK0:.+]] = sched.buffer @parameters[0, 256] rank_stride 256 : memref<64xf32>
// SCHED: sched.launch @adamw(%[[CHUNK0]],
// SCHED: sched.collective all_gather %[[CHUNK0]] to %[[B0]] group [0, 1] on @compute : memref<64xf32> to memref<128xf32>
// Tests that hybrid sharding cuts the buckets over each node (chunks at a
// rank stride of period 2), averages the chunk gradients across the nodes
// before the update, and sums the squared norm over the node only.
// HYBRID: sched.program @rank0 rank 0 of 4
// HYBRID: sched.collective reduce_scatter %{{.+}} to %{{.+}} reduce avg group [0, 1] on @compute : memref<128xf32> to memref<64xf32>
// HYBRID-LABEL: sched.entry "optimizer_step"
// HYBRID: sched.collective all_reduce %[[G:.+]] to %[[G]] reduce avg group [0, 2] on @compute : memref<64xf32>
// HYBRID: sched.collective all_reduce %{{.+}} to %{{.+}} reduce sum group [0, 1] on @compute : memref<f32>
// HYBRID: %[[CHUNK:.+]] = sched.buffer @parameters[{{[0-9]+}}, 256] rank_stride 256 period 2 : memref<64xf32>
// HYBRID: sched.collective all_gather %[[CHUNK]] to %{{.+}} group [0, 1]
// Tests that zero3 keeps the parameters (frozen ones too, in buckets of
// their own: @e) only as chunks: train_step reads
// them through a gather of their bucket made right before the first read
// and views of it, again for the reads from the loss gradient on, the
// update writes the chunk and nothing gathers after it; lowered, the
// members share the chunk, carry their place in the bucket, and their reads
// are views at offsets into the gathered buffer.
// ZERO3: tg.bucket @zero.b0 [@c, @b] offsets [0, 64] size 128 over world shards 2 sharded_params : f32
// ZERO3: tg.bucket @zero.f0 [@e] offsets [0] size 128 over world shards 2 sharded_params : f32
// ZERO3-LABEL: func.func @train_step
// ZERO3-NOT: tg.param_ref
// ZERO3: %[[F:.+]] = tg.gather_bucket @zero.b1 : tensor<128xf32>
// ZERO3: %[[A:.+]] = tg.bucket_member %[[F]][0] : tensor<128xf32> -> tensor<4x4xf32>
// ZERO3: tg.mul %{{.+}}, %[[A]]
// ZERO3: %[[FE:.+]] = tg.gather_bucket @zero.f0 : tensor<128xf32>
// ZERO3: %[[E:.+]] = tg.bucket_member %[[FE]][0] : tensor<128xf32> -> tensor<4x4xf32>
// ZERO3: tg.add %{{.+}}, %[[E]]
// ZERO3: tg.cross_entropy_grad
// ZERO3: %[[F2:.+]] = tg.gather_bucket @zero.b1 : tensor<128xf32>
// ZERO3: %[[A2:.+]] = tg.bucket_member %[[F2]][0]
// ZERO3: tg.mul %{{.+}}, %[[A2]]
// ZERO3-LABEL: func.func @optimizer_step
// ZERO3: tg.adamw_update @zero.b1
// ZERO3-NOT: tg.all_gather_bucket
// KEEP-LABEL: func.func @train_step
// KEEP-COUNT-1: tg.gather_bucket @zero.b1
// KEEP-NOT: tg.gather_bucket @zero.b1
// SCHED3: %[[CHUNK:.+]] = sched.buffer @parameters[0, 256] : memref<64xf32>
// SCHED3: sched.param "c" @parameters[0, 256] trainable init "zeros"(0.000000e+00) shard {flat_elements = 128 : i64, group = array<i64: 0, 1>, offset = 0 : i64, shape = array<i64: 4, 4>} : memref<64xf32>
// SCHED3: sched.param "b" @parameters[0, 256] trainable init "zeros"(0.000000e+00) shard {flat_elements = 128 : i64, group = array<i64: 0, 1>, offset = 64 : i64, shape = array<i64: 30>} : memref<64xf32>
// SCHED3: sched.collective all_gather %{{.+}} to %[[FLAT:.+]] group [0, 1] on @compute : memref<64xf32> to memref<128xf32>
// SCHED3: sched.launch @adamw_multi({{.*}}%[[CHUNK]],
// Tests that with defer-param-reads zero3 leaves the parameters' reads
// (tailor-gather-params makes them after recomputation, giving the same
// program as above) and forms no frozen bucket yet.
// DEFER-NOT: tg.bucket @zero.f0
// DEFER-LABEL: func.func @train_step
// DEFER: tg.param_ref @a
// DEFER-NOT: tg.gather_bucket
// TWICE: error: tailor-gather-params: the parameter reads are gathered already

func.func @train_step(%x: tensor<30xf32>, %y: tensor<4x4xf32>) -> tensor<f32> {
  %pa = tg.param_ref @a : tensor<4x4xf32>
  %pe = tg.param_ref @e : tensor<4x4xf32>
  %ya = tg.mul %y, %pa : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %fa = tg.add %ya, %pe : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %logits = tg.reshape %fa : tensor<4x4xf32> -> tensor<4x4xf32>
  %labels = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %one = arith.constant dense<1.0> : tensor<f32>
  %dl = tg.cross_entropy_grad %logits, %labels, %one : (tensor<4x4xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x4xf32>
  %ba = tg.mul %dl, %pa : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g = tg.mul %x, %x : (tensor<30xf32>, tensor<30xf32>) -> tensor<30xf32>
  tg.accumulate %g into @b.grad : tensor<30xf32>
  tg.accumulate %ba into @a.grad : tensor<4x4xf32>
  %h = tg.mul %y, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  tg.accumulate %h into @c.grad : tensor<4x4xf32>
  %s = tg.reduce_sum %g axes = [0] : tensor<30xf32> -> tensor<f32>
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
