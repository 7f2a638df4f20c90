// RUN: not tailor-opt %s --tailor-shard="strategy=ddp world-size=1" --tailor-compress-gradients 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not tailor-opt %s --tailor-shard="strategy=zero2 world-size=2" --tailor-compress-gradients 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not tailor-opt %s --tailor-shard="strategy=ddp world-size=2" --tailor-compress-gradients="method=topk ratio=0" 2>&1 | FileCheck %s --check-prefix=TOPK
// RUN: not tailor-opt %s --tailor-shard="strategy=ddp world-size=2" --tailor-compress-gradients="method=randk" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tailor-opt %s --tailor-compress-gradients 2>&1 | FileCheck %s --check-prefix=UNSHARDED

// Tests that compression is refused on one rank (nothing to compress), for
// ZeRO sharding, for top-k with a ratio outside (0, 1], for an unknown
// method and before tailor-shard, each with a message that names why.
// ONE: error: tailor-compress-gradients: gradient compression needs several ranks (world size 1 has no gradient all-reduce to compress)
// ZERO: error: tailor-compress-gradients: gradient compression with "zero2" sharding is not built yet (ddp only)
// TOPK: error: tailor-compress-gradients: ratio must be in (0, 1], got 0
// UNKNOWN: error: tailor-compress-gradients: unknown gradient_compression 'randk' (powersgd, acp-sgd, topk, signsgd)
// UNSHARDED: error: tailor-compress-gradients: the module is not data parallel (run tailor-shard first)
tg.param @w : tensor<16x8xf32> trainable init <"zeros", 0.0 : f64>
tg.state @w.grad : tensor<16x8xf32> of @w grad
func.func @train_step(%g: tensor<16x8xf32>) {
  tg.accumulate %g into @w.grad : tensor<16x8xf32>
  return
}
func.func @optimizer_step(%step: tensor<i64>) {
  %lr = arith.constant dense<1.0> : tensor<f32>
  tg.sgd_update @w grad @w.grad lr %lr scale %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<f32>, tensor<f32>
  return
}
