// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-quantize-reductions | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-quantize-reductions --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero3 world-size=2 bucket-bytes=200" --tailor-quantize-reductions | FileCheck %s --check-prefix=ZERO3
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-quantize-reductions --tailor-overlap-collectives | FileCheck %s --check-prefix=OVERLAP
// RUN: not tailor-opt %s --tailor-shard="strategy=ddp world-size=2 bucket-bytes=200" --tailor-quantize-reductions 2>&1 | FileCheck %s --check-prefix=DDP
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-quantize-reductions="format=int4" | FileCheck %s --check-prefix=INT4
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=zero2 world-size=2 bucket-bytes=200" --tailor-quantize-reductions="format=int4" --tailor-lower-to-sched | FileCheck %s --check-prefix=SCHED4
// RUN: not tailor-opt %s --tailor-quantize-reductions="format=int2" 2>&1 | FileCheck %s --check-prefix=BAD


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

// Tests that every ZeRO-2 gradient reduce-scatter of a bucket (128 f32,
// chunks of 64) becomes each destination rank's chunk encoded on its own
// (68 wire bytes a chunk), an all-to-all of the 136 bytes over the
// reduce-scatter's group, and the received chunks decoded and averaged
// into what the chunk accumulator takes; no reduce-scatter is left, and
// the decision is recorded with the sharding.
// CHECK: tg.parallel = {quantized_reductions = "int8"
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G0:.+]] = tg.concat
// CHECK-NEXT: %[[Q0:.+]] = tg.quantize_chunks %[[G0]] chunk 64 shards 2 : tensor<128xf32> -> tensor<136xui8>
// CHECK-NEXT: %[[X0:.+]] = tg.all_to_all %[[Q0]] over world shards 2 : tensor<136xui8>
// CHECK-NEXT: %[[R0:.+]] = tg.dequantize_reduce %[[X0]] avg chunk 64 shards 2 : tensor<136xui8> -> tensor<64xf32>
// CHECK-NEXT: tg.accumulate %[[R0]] into @zero.b1.grad
// CHECK: tg.quantize_chunks
// CHECK-NEXT: tg.all_to_all
// CHECK-NEXT: %[[R1:.+]] = tg.dequantize_reduce
// CHECK-NEXT: tg.accumulate %[[R1]] into @zero.b0.grad
// CHECK-NOT: tg.reduce_scatter
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: tg.reduce_scatter
// CHECK: tg.all_gather_bucket @zero.b1

// Tests that planning stages the wire chunks in a buffer of exactly their
// bytes, encodes them chunk by chunk, exchanges them with an all-to-all of
// the same size, and reduces the received chunks (averaged) into a chunk.
// SCHED: sched.kernel @quantize_wire_int8 arity 2
// SCHED: sched.kernel @dequantize_reduce_wire_int8 arity 2
// SCHED: sched.entry "train_step"
// SCHED: sched.launch @quantize_wire_int8(%{{.+}}, %[[Q:.+]]) on @compute with {chunk = 64 : i64} {{.*}}: memref<128xf32>, memref<136xui8>
// SCHED-NEXT: %[[X:.+]] = sched.buffer @activations[{{[0-9]+}}, 136] : memref<136xui8>
// SCHED-NEXT: sched.collective all_to_all %[[Q]] to %[[X]] group [0, 1] on @compute : memref<136xui8> to memref<136xui8>
// SCHED-NEXT: %[[R:.+]] = sched.buffer @activations[{{[0-9]+}}, 256] : memref<64xf32>
// SCHED-NEXT: sched.launch @dequantize_reduce_wire_int8(%[[X]], %[[R]]) on @compute with {average = 1 : i64, chunk = 64 : i64} {{.*}}: memref<136xui8>, memref<64xf32>
// SCHED-NEXT: sched.launch @accumulate(%[[R]], %{{.+}})
// SCHED-NOT: reduce_scatter

// Tests that ZeRO-3's gradient reduce-scatters are quantized the same way
// (its weight gathers stay f32 without tailor-quantize-gathers).
// ZERO3-LABEL: func.func @train_step
// ZERO3: tg.gather_bucket @zero.b1 : tensor<128xf32>
// ZERO3: tg.quantize_chunks
// ZERO3-NEXT: tg.all_to_all
// ZERO3-NEXT: tg.dequantize_reduce
// ZERO3-NOT: tg.reduce_scatter

// Tests that overlapping marks the all-to-alls and defers each decode with
// the accumulation it feeds, two buckets in flight (the default): both
// decodes go to the end of the step.
// OVERLAP-LABEL: func.func @train_step
// OVERLAP: %[[X0:.+]] = tg.all_to_all %{{.+}} over world shards 2 {tg.overlap}
// OVERLAP-NOT: tg.dequantize_reduce
// OVERLAP: %[[X1:.+]] = tg.all_to_all %{{.+}} over world shards 2 {tg.overlap}
// OVERLAP: %[[R0:.+]] = tg.dequantize_reduce %[[X0]]
// OVERLAP-NEXT: tg.accumulate %[[R0]] into @zero.b1.grad
// OVERLAP-NEXT: %[[R1:.+]] = tg.dequantize_reduce %[[X1]]
// OVERLAP-NEXT: tg.accumulate %[[R1]] into @zero.b0.grad
// OVERLAP-NEXT: return

// Tests that DDP, whose gradients are all-reduced, has nothing to quantize.
// DDP: error: tailor-quantize-reductions: no gradient reduce-scatter to quantize (it needs ZeRO-2 or ZeRO-3's, from tailor-shard)

// Tests that format=int4 sends each chunk as int4 (36 wire bytes a block
// of 64: 32 bytes of codes, two a byte, and the f32 scale), the ops
// carrying the format, and the decision recorded as int4.
// INT4: tg.parallel = {quantized_reductions = "int4"
// INT4-LABEL: func.func @train_step
// INT4: %[[G0:.+]] = tg.concat
// INT4-NEXT: %[[Q0:.+]] = tg.quantize_chunks %[[G0]] chunk 64 shards 2 format "int4" : tensor<128xf32> -> tensor<72xui8>
// INT4-NEXT: %[[X0:.+]] = tg.all_to_all %[[Q0]] over world shards 2 : tensor<72xui8>
// INT4-NEXT: %[[R0:.+]] = tg.dequantize_reduce %[[X0]] avg chunk 64 shards 2 format "int4" : tensor<72xui8> -> tensor<64xf32>
// INT4-NEXT: tg.accumulate %[[R0]] into @zero.b1.grad
// INT4-NOT: tg.reduce_scatter
// INT4-LABEL: func.func @optimizer_step

// Tests that planning picks the int4 kernels and stages exactly the int4
// bytes: a 72-byte buffer encoded, exchanged and reduced; the work counts
// the int4 bytes (encode: the 128 floats read twice and 72 bytes written;
// reduce: 72 bytes read and the 64 sums read and written).
// SCHED4: sched.kernel @quantize_wire_int4 arity 2
// SCHED4: sched.kernel @dequantize_reduce_wire_int4 arity 2
// SCHED4-NOT: sched.kernel @quantize_wire_int8
// SCHED4: sched.entry "train_step"
// SCHED4: sched.launch @quantize_wire_int4(%{{.+}}, %[[Q:.+]]) on @compute with {chunk = 64 : i64} {bytes = 1.096000e+03 : f64, flops = 3.840000e+02 : f64, {{.*}}: memref<128xf32>, memref<72xui8>
// SCHED4-NEXT: %[[X:.+]] = sched.buffer @activations[{{[0-9]+}}, 72] : memref<72xui8>
// SCHED4-NEXT: sched.collective all_to_all %[[Q]] to %[[X]] group [0, 1] on @compute : memref<72xui8> to memref<72xui8>
// SCHED4-NEXT: %[[R:.+]] = sched.buffer @activations[{{[0-9]+}}, 256] : memref<64xf32>
// SCHED4-NEXT: sched.launch @dequantize_reduce_wire_int4(%[[X]], %[[R]]) on @compute with {average = 1 : i64, chunk = 64 : i64} {bytes = 5.840000e+02 : f64, flops = 2.560000e+02 : f64, {{.*}}: memref<72xui8>, memref<64xf32>
// SCHED4-NOT: wire_int8

// Tests that a format other than int8 and int4 is refused by name.
// BAD: tailor-quantize-reductions: format must be int8 or int4, got 'int2'
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

