// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="rank=1 start-step=3" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="rank=1 start-step=3 warm-start=false error-feedback=false" | FileCheck %s --check-prefix=COLD
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="rank=1 start-step=0" | FileCheck %s --check-prefix=NOWARM
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="rank=1 start-step=3" --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="method=acp-sgd rank=1 start-step=3" | FileCheck %s --check-prefix=ACP
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="method=acp-sgd rank=1 start-step=3" --tailor-lower-to-sched | FileCheck %s --check-prefix=ACPSCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="method=topk ratio=0.05 start-step=3" | FileCheck %s --check-prefix=TOPK
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="method=topk ratio=0.05 start-step=3" --tailor-lower-to-sched | FileCheck %s --check-prefix=TOPKSCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="method=signsgd start-step=3" | FileCheck %s --check-prefix=SIGN
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=4" --tailor-compress-gradients="method=signsgd start-step=0 error-feedback=false" --tailor-lower-to-sched | FileCheck %s --check-prefix=SIGNSCHED

tg.param @w : tensor<16x8xf32> trainable init <"zeros", 0.0 : f64>
tg.param @b : tensor<8xf32> trainable init <"zeros", 0.0 : f64>
tg.param @v : tensor<2x2xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<16x8xf32> of @w grad
tg.state @b.grad : tensor<8xf32> of @b grad
tg.state @v.grad : tensor<2x2xf32> of @v grad

// Tests that PowerSGD records its decision, keeps the bucket's plain
// all-reduce for steps 1-3 (the uncompressed gradients first: the vector
// @b and @v, too small to gain), and from step 4 adds the error, averages
// @v and @b as they are, and sends @w (16 x 8) as P (16 x 1, summed) and Q
// (8 x 1, averaged), Q set once (warm start) and orthogonalized, P
// orthogonalized, then keeps the residual. Lowered, each phase's
// collectives and launches carry their steps: the warm-up all-reduce of
// the whole bucket, then the uncompressed prefix, P and Q.
// CHECK: module attributes {tg.compression = {error_feedback = true, method = "powersgd", min_compression_rate = 2.000000e+00 : f64, rank = 1 : i64, start_step = 3 : i64, warm_start = true}
// CHECK-DAG: tg.state @w.powersgd_error : tensor<16x8xf32> of @w powersgd_error
// CHECK-DAG: tg.state @w.powersgd_p : tensor<16x1xf32> of @w powersgd_p
// CHECK-DAG: tg.state @w.powersgd_q : tensor<8x1xf32> of @w powersgd_q
// CHECK-DAG: tg.state @b.powersgd_error : tensor<8xf32> of @b powersgd_error
// CHECK-NOT: tg.state @b.powersgd_p
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: tg.all_reduce_states [@v.grad, @b.grad, @w.grad] avg over world {tg.steps = array<i64: 1, 3>}
// CHECK-NEXT: tg.add_error_feedback @v.grad from @v.powersgd_error {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.add_error_feedback @b.grad from @b.powersgd_error {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.add_error_feedback @w.grad from @w.powersgd_error {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.all_reduce_states [@v.grad, @b.grad] avg over world {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.lowrank_init @w.powersgd_q {tg.steps = array<i64: 4, 4>}
// CHECK-NEXT: tg.orthogonalize @w.powersgd_q {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.lowrank_matmul @w.grad, @w.powersgd_q into @w.powersgd_p {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.all_reduce_states [@w.powersgd_p] sum over world {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.orthogonalize @w.powersgd_p {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.lowrank_matmul @w.grad transposed, @w.powersgd_p into @w.powersgd_q {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.all_reduce_states [@w.powersgd_q] avg over world {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.lowrank_matmul @w.powersgd_p, @w.powersgd_q transposed into @w.grad {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.store_error_feedback @v.powersgd_error minus @v.grad {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.store_error_feedback @b.powersgd_error minus @b.grad {tg.steps = array<i64: 4, -1>}
// CHECK-NEXT: tg.store_error_feedback @w.powersgd_error minus @w.grad {tg.steps = array<i64: 4, -1>}
// CHECK: tg.sgd_update @w
// COLD-LABEL: func.func @optimizer_step
// COLD-NOT: tg.add_error_feedback
// COLD: tg.lowrank_init @w.powersgd_q {tg.steps = array<i64: 4, -1>}
// COLD-NOT: tg.store_error_feedback
// COLD: tg.sgd_update @w
// NOWARM-LABEL: func.func @optimizer_step
// NOWARM-NOT: array<i64: 1, 3>
// NOWARM-NEXT: tg.add_error_feedback @v.grad from @v.powersgd_error {tg.steps = array<i64: 1, -1>}
// SCHED-LABEL: sched.entry "optimizer_step"
// SCHED: sched.collective all_reduce %[[BUCKET:.+]] to %[[BUCKET]] reduce avg group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 1, 3>}
// SCHED: sched.launch @error_feedback_add
// SCHED-SAME: sched.steps = array<i64: 4, -1>
// SCHED: sched.collective all_reduce %[[PLAIN:.+]] to %[[PLAIN]] reduce avg group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 4, -1>}
// SCHED: sched.launch @lowrank_init
// SCHED-SAME: sched.steps = array<i64: 4, 4>
// SCHED: sched.collective all_reduce %[[P:.+]] to %[[P]] reduce sum group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 4, -1>}
// SCHED: sched.launch @orthogonalize
// SCHED: sched.collective all_reduce %[[Q:.+]] to %[[Q]] reduce avg group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 4, -1>}
// SCHED: sched.launch @lowrank_matmul
// SCHED: sched.launch @error_feedback_store
// SCHED: sched.launch @sgd
// Tests that ACP-SGD keeps PowerSGD's warm-up, error feedback and
// uncompressed all-reduce, sets Q once in step 4, and alternates: in steps
// 4, 6, ... Q is orthogonalized and P = M Q averaged (16 x 1 sent); in
// steps 5, 7, ... P is orthogonalized and Q = M^T P averaged (8 x 1 sent);
// M = P Q^T in both. Lowered, the two factor all-reduces carry period 2.
// ACP: module attributes {tg.compression = {error_feedback = true, method = "acp-sgd"
// ACP-LABEL: func.func @optimizer_step
// ACP-NEXT: tg.all_reduce_states [@v.grad, @b.grad, @w.grad] avg over world {tg.steps = array<i64: 1, 3>}
// ACP: tg.add_error_feedback @w.grad from @w.powersgd_error {tg.steps = array<i64: 4, -1>}
// ACP-NEXT: tg.all_reduce_states [@v.grad, @b.grad] avg over world {tg.steps = array<i64: 4, -1>}
// ACP-NEXT: tg.lowrank_init @w.powersgd_q {tg.steps = array<i64: 4, 4>}
// ACP-NEXT: tg.orthogonalize @w.powersgd_q {epsilon = 1.000000e-08 : f64, tg.steps = array<i64: 4, -1, 2>}
// ACP-NEXT: tg.lowrank_matmul @w.grad, @w.powersgd_q into @w.powersgd_p {tg.steps = array<i64: 4, -1, 2>}
// ACP-NEXT: tg.all_reduce_states [@w.powersgd_p] avg over world {tg.steps = array<i64: 4, -1, 2>}
// ACP-NEXT: tg.orthogonalize @w.powersgd_p {epsilon = 1.000000e-08 : f64, tg.steps = array<i64: 5, -1, 2>}
// ACP-NEXT: tg.lowrank_matmul @w.grad transposed, @w.powersgd_p into @w.powersgd_q {tg.steps = array<i64: 5, -1, 2>}
// ACP-NEXT: tg.all_reduce_states [@w.powersgd_q] avg over world {tg.steps = array<i64: 5, -1, 2>}
// ACP-NEXT: tg.lowrank_matmul @w.powersgd_p, @w.powersgd_q transposed into @w.grad {tg.steps = array<i64: 4, -1>}
// ACP-NEXT: tg.store_error_feedback @v.powersgd_error minus @v.grad {tg.steps = array<i64: 4, -1>}
// ACP-NOT: tg.all_reduce_states
// ACP: tg.sgd_update @w
// ACPSCHED-LABEL: sched.entry "optimizer_step"
// ACPSCHED: sched.collective all_reduce %[[BUCKET:.+]] to %[[BUCKET]] reduce avg group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 1, 3>}
// ACPSCHED: sched.collective all_reduce %[[PLAIN:.+]] to %[[PLAIN]] reduce avg group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 4, -1>}
// ACPSCHED: sched.launch @lowrank_init
// ACPSCHED-SAME: sched.steps = array<i64: 4, 4>
// ACPSCHED: sched.launch @orthogonalize
// ACPSCHED-SAME: sched.steps = array<i64: 4, -1, 2>
// ACPSCHED: sched.collective all_reduce %[[P:.+]] to %[[P]] reduce avg group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 4, -1, 2>}
// ACPSCHED: sched.launch @orthogonalize
// ACPSCHED-SAME: sched.steps = array<i64: 5, -1, 2>
// ACPSCHED: sched.collective all_reduce %[[Q:.+]] to %[[Q]] reduce avg group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 5, -1, 2>}
// ACPSCHED: sched.launch @lowrank_matmul
// ACPSCHED-SAME: sched.steps = array<i64: 4, -1>}
// ACPSCHED: sched.launch @error_feedback_store
// Tests that top-k keeps the warm-up, then compresses the bucket (16 x 8,
// 8 and 2 x 2: 140 entries) as one flat vector: with the residuals of
// error feedback, ceil(0.05 * 140) = 7 entries and their i32 positions per
// rank, both all-gathered (4 x 7) and averaged into the gradients
// (scale 1/4). Lowered, the two all-gathers are out of place, from the
// compressed activations into the gathered ones.
// TOPK: module attributes {tg.compression = {error_feedback = true, method = "topk", ratio = 5.000000e-02 : f64, start_step = 3 : i64}
// TOPK-DAG: tg.state @w.powersgd_error : tensor<16x8xf32> of @w powersgd_error
// TOPK-DAG: tg.state @v.powersgd_error : tensor<2x2xf32> of @v powersgd_error
// TOPK-NOT: powersgd_p
// TOPK-LABEL: func.func @optimizer_step
// TOPK-NEXT: tg.all_reduce_states [@v.grad, @b.grad, @w.grad] avg over world {tg.steps = array<i64: 1, 3>}
// TOPK-NEXT: %[[V:.+]], %[[I:.+]] = tg.topk_compress [@v.grad, @b.grad, @w.grad] residual [@v.powersgd_error, @b.powersgd_error, @w.powersgd_error] {tg.steps = array<i64: 4, -1>} : tensor<7xf32>, tensor<7xi32>
// TOPK-NEXT: %[[AV:.+]] = tg.all_gather %[[V]] over world {tg.steps = array<i64: 4, -1>} : tensor<7xf32> -> tensor<28xf32>
// TOPK-NEXT: %[[AI:.+]] = tg.all_gather %[[I]] over world {tg.steps = array<i64: 4, -1>} : tensor<7xi32> -> tensor<28xi32>
// TOPK-NEXT: tg.sparse_average %[[AV]], %[[AI]] into [@v.grad, @b.grad, @w.grad] scale 2.500000e-01 {tg.steps = array<i64: 4, -1>} : tensor<28xf32>, tensor<28xi32>
// TOPK-NOT: tg.all_reduce_states
// TOPK-NOT: tg.store_error_feedback
// TOPK: tg.sgd_update @w
// TOPKSCHED-LABEL: sched.entry "optimizer_step"
// TOPKSCHED: sched.collective all_reduce %[[BUCKET:.+]] to %[[BUCKET]] reduce avg group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 1, 3>}
// TOPKSCHED: sched.launch @topk_compress(%[[G0:[^,]+]], %[[G1:[^,]+]], %[[G2:[^,]+]], %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %[[V:[^,]+]], %[[I:[^)]+]]) on @compute with {members = 3 : i64}
// TOPKSCHED-SAME: sched.steps = array<i64: 4, -1>
// TOPKSCHED: sched.collective all_gather %[[V]] to %[[AV:.+]] group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 4, -1>} : memref<7xf32> to memref<28xf32>
// TOPKSCHED: sched.collective all_gather %[[I]] to %[[AI:.+]] group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 4, -1>} : memref<7xi32> to memref<28xi32>
// TOPKSCHED: sched.launch @sparse_average(%[[AV]], %[[AI]], %[[G0]], %[[G1]], %[[G2]]) on @compute with {scale = 2.500000e-01 : f64}
// TOPKSCHED: sched.launch @sgd
// Tests that sign-SGD keeps the warm-up, then sends the bucket's 140 signs
// as 18 bytes and one scale per gradient (3) per rank (all-gathered: 72
// bytes, 12 scales),
// averaged into the gradients, with error feedback's residuals; without
// warm-up or error feedback it starts at step 1 and reads the gradients
// only.
// SIGN: module attributes {tg.compression = {error_feedback = true, method = "signsgd", start_step = 3 : i64}
// SIGN-LABEL: func.func @optimizer_step
// SIGN-NEXT: tg.all_reduce_states [@v.grad, @b.grad, @w.grad] avg over world {tg.steps = array<i64: 1, 3>}
// SIGN-NEXT: %[[S:.+]], %[[C:.+]] = tg.sign_compress [@v.grad, @b.grad, @w.grad] residual [@v.powersgd_error, @b.powersgd_error, @w.powersgd_error] {tg.steps = array<i64: 4, -1>} : tensor<18xui8>, tensor<3xf32>
// SIGN-NEXT: %[[AS:.+]] = tg.all_gather %[[S]] over world {tg.steps = array<i64: 4, -1>} : tensor<18xui8> -> tensor<72xui8>
// SIGN-NEXT: %[[AC:.+]] = tg.all_gather %[[C]] over world {tg.steps = array<i64: 4, -1>} : tensor<3xf32> -> tensor<12xf32>
// SIGN-NEXT: tg.sign_average %[[AS]], %[[AC]] into [@v.grad, @b.grad, @w.grad] {tg.steps = array<i64: 4, -1>} : tensor<72xui8>, tensor<12xf32>
// SIGN: tg.sgd_update @w
// SIGNSCHED-LABEL: sched.entry "optimizer_step"
// SIGNSCHED-NOT: all_reduce
// SIGNSCHED: sched.launch @sign_compress(%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %[[S:[^,]+]], %[[C:[^)]+]]) on @compute with {members = 3 : i64}
// SIGNSCHED-SAME: sched.steps = array<i64: 1, -1>
// SIGNSCHED: sched.collective all_gather %[[S]] to %[[AS:.+]] group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 1, -1>} : memref<18xui8> to memref<72xui8>
// SIGNSCHED: sched.collective all_gather %[[C]] to %[[AC:.+]] group [0, 1, 2, 3] on @compute {sched.steps = array<i64: 1, -1>} : memref<3xf32> to memref<12xf32>
// SIGNSCHED: sched.launch @sign_average(%[[AS]], %[[AC]],
// SIGNSCHED: sched.launch @sgd
func.func @train_step(%x: tensor<8xf32>) -> tensor<f32> {
  %g = tg.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  tg.accumulate %g into @b.grad : tensor<8xf32>
  %s = tg.reduce_sum %g axes = [0] : tensor<8xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> tensor<f32> {
  %lr = arith.constant dense<1.0> : tensor<f32>
  tg.sgd_update @w grad @w.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  tg.sgd_update @b grad @b.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  tg.sgd_update @v grad @v.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  return %lr : tensor<f32>
}
