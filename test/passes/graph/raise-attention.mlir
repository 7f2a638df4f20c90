// RUN: tailor-opt %s --split-input-file --tailor-raise-attention | FileCheck %s

// Tests that softmax(q k^T / sqrt(D) + causal band) v becomes a causal
// tg.attention and the generated mask goes with it.
// CHECK-LABEL: func.func @causal_band
// CHECK-SAME: (%[[Q:.+]]: tensor<1x2x8x4xf32>, %[[K:.+]]: tensor<1x2x8x4xf32>, %[[V:.+]]: tensor<1x2x8x4xf32>)
// CHECK: %[[OUT:.+]] = tg.attention %[[Q]], %[[K]], %[[V]] {causal}
// CHECK-NOT: tg.softmax
// CHECK: return %[[OUT]]
func.func @causal_band(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %m = tg.band_mask {inside = 0.0 : f64, lower = -7 : i64, outside = -3.4028234663852886E+38 : f64, upper = 0 : i64} : tensor<1x1x8x8xf32>
  %masked = tg.add %scaled, %m : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<1x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that a keep-mask given as its complement (hidden above the diagonal)
// through a broadcast and a select of -inf is causal too.
// CHECK-LABEL: func.func @causal_keep_mask
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} {causal}
// CHECK-NOT: tg.select
func.func @causal_keep_mask(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %hidden = tg.band_mask {inside = 0.0 : f64, lower = 1 : i64, outside = 1.0 : f64, upper = 7 : i64} : tensor<8x8xi1>
  %keep = tg.broadcast %hidden : tensor<8x8xi1> -> tensor<1x2x8x8xi1>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %masked = tg.select %keep, %scaled, %ninf : (tensor<1x2x8x8xi1>, tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<1x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that a band that allows every key is no mask at all, and that a
// scale other than 1/sqrt(D) is kept.
// CHECK-LABEL: func.func @full_band
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} {scale = 2.500000e-01 : f64}
func.func @full_band(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %c = arith.constant dense<0.25> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %m = tg.band_mask {inside = 0.0 : f64, lower = -7 : i64, outside = -1.0E+9 : f64, upper = 7 : i64} : tensor<1x1x8x8xf32>
  %masked = tg.add %m, %scaled : (tensor<1x1x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<1x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that a sliding window (keys more than 3 back hidden) becomes
// tg.attention's window: 4 keys, the diagonal included.
// CHECK-LABEL: func.func @window_band
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 1.000000e+00 : f64, window = 4 : i64}
// CHECK-NOT: tg.band_mask
func.func @window_band(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %m = tg.band_mask {inside = 0.0 : f64, lower = -3 : i64, outside = -3.4028234663852886E+38 : f64, upper = 0 : i64} : tensor<1x1x8x8xf32>
  %masked = tg.add %s, %m : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<1x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests Gemma-2's soft-capping, tanh(scores / c) * c before the mask, with
// a sliding window of 2 keys.
// CHECK-LABEL: func.func @softcap_window
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, softcap = 5.000000e+01 : f64, window = 2 : i64}
// CHECK-NOT: tg.tanh
func.func @softcap_window(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %half : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %cap = arith.constant dense<50.0> : tensor<f32>
  %d = tg.div %scaled, %cap : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %th = tg.tanh %d : tensor<1x2x8x8xf32>
  %capped = tg.mul %th, %cap : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %m = tg.band_mask {inside = 0.0 : f64, lower = -1 : i64, outside = -1.0E+9 : f64, upper = 0 : i64} : tensor<1x1x8x8xf32>
  %masked = tg.add %capped, %m : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<1x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that a constant causal mask (hand-written IR, or an export's stored
// buffer) is still classified from its values.
// CHECK-LABEL: func.func @constant_causal
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} {causal}
func.func @constant_causal(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x2x4xf32>, %v: tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x1x2x4xf32> -> tensor<1x1x4x2xf32>
  %s = tg.matmul %q, %kt : (tensor<1x1x2x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x2x2xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<1x1x2x2xf32>, tensor<f32>) -> tensor<1x1x2x2xf32>
  %m = arith.constant dense<[[0.0, -1.0E+9], [0.0, 0.0]]> : tensor<2x2xf32>
  %masked = tg.add %scaled, %m : (tensor<1x1x2x2xf32>, tensor<2x2xf32>) -> tensor<1x1x2x2xf32>
  %p = tg.softmax %masked axis = 3 : tensor<1x1x2x2xf32>
  %o = tg.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  return %o : tensor<1x1x2x4xf32>
}

// -----

// Tests masked_fill's form, where(hidden, -inf, scores), with the hidden
// entries above the diagonal (nanoGPT's tril buffer compared to 0).
// CHECK-LABEL: func.func @causal_masked_fill
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} {causal}
func.func @causal_masked_fill(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %hidden = tg.band_mask {inside = 0.0 : f64, lower = -7 : i64, outside = 1.0 : f64, upper = 0 : i64} : tensor<1x1x8x8xi1>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %masked = tg.select %hidden, %ninf, %scaled : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<1x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that a compile-time bias affine in the key index with one slope per
// head is ALiBi: MPT's slope * (s - (S - 1)) (head 0) and BLOOM's slope * s
// (head 1) differ by a per-row constant only, so both read as slopes.
// CHECK-LABEL: func.func @alibi_causal
// CHECK-SAME: (%[[Q:.+]]: tensor<1x2x8x4xf32>, %[[K:.+]]: tensor<1x2x8x4xf32>, %[[V:.+]]: tensor<1x2x8x4xf32>)
// CHECK: %[[OUT:.+]] = tg.attention %[[Q]], %[[K]], %[[V]] {alibi_slopes = array<f64: 5.000000e-01, 2.500000e-01>, causal}
// CHECK-NOT: arith.constant dense<{{\[}}
// CHECK: return %[[OUT]]
func.func @alibi_causal(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %alibi = arith.constant dense<[[[[-3.5, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0]], [[0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]]]]> : tensor<1x2x1x8xf32>
  %biased = tg.add %scaled, %alibi : (tensor<1x2x8x8xf32>, tensor<1x2x1x8xf32>) -> tensor<1x2x8x8xf32>
  %m = tg.band_mask {inside = 0.0 : f64, lower = -7 : i64, outside = -3.4028234663852886E+38 : f64, upper = 0 : i64} : tensor<1x1x8x8xf32>
  %masked = tg.add %biased, %m : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<1x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests BLOOM's form: baddbmm(alibi, q, k^T) on flattened heads [B*H, T, S]
// (alibi [B*H, 1, S] = slope_h * s), reshaped to [B, H, T, S] for the
// causal mask and the softmax, then bmm with v on flattened heads again.
// The flattened q, k, v are read through their reshapes and the result is
// flattened back.
// CHECK-LABEL: func.func @bloom_flat_heads
// CHECK-SAME: (%[[Q:.+]]: tensor<2x2x4x4xf32>, %[[K:.+]]: tensor<2x2x4x4xf32>, %[[V:.+]]: tensor<2x2x4x4xf32>)
// CHECK: %[[OUT:.+]] = tg.attention %[[Q]], %[[K]], %[[V]] {alibi_slopes = array<f64: 2.500000e-01, 6.250000e-02>, causal}
// CHECK: %[[FLAT:.+]] = tg.reshape %[[OUT]] : tensor<2x2x4x4xf32> -> tensor<4x4x4xf32>
// CHECK-NOT: tg.softmax
// CHECK: return %[[FLAT]]
func.func @bloom_flat_heads(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>, %v: tensor<2x2x4x4xf32>) -> tensor<4x4x4xf32> {
  %q3 = tg.reshape %q : tensor<2x2x4x4xf32> -> tensor<4x4x4xf32>
  %k3 = tg.reshape %k : tensor<2x2x4x4xf32> -> tensor<4x4x4xf32>
  %kt = tg.transpose %k3 permutation = [0, 2, 1] : tensor<4x4x4xf32> -> tensor<4x4x4xf32>
  %v3 = tg.reshape %v : tensor<2x2x4x4xf32> -> tensor<4x4x4xf32>
  %s = tg.matmul %q3, %kt : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<4x4x4xf32>, tensor<f32>) -> tensor<4x4x4xf32>
  %alibi = arith.constant dense<[[[0.0, 0.25, 0.5, 0.75]], [[0.0, 0.0625, 0.125, 0.1875]], [[0.0, 0.25, 0.5, 0.75]], [[0.0, 0.0625, 0.125, 0.1875]]]> : tensor<4x1x4xf32>
  %biased = tg.add %scaled, %alibi : (tensor<4x4x4xf32>, tensor<4x1x4xf32>) -> tensor<4x4x4xf32>
  %s4 = tg.reshape %biased : tensor<4x4x4xf32> -> tensor<2x2x4x4xf32>
  %m = tg.band_mask {inside = 0.0 : f64, lower = -3 : i64, outside = -3.4028234663852886E+38 : f64, upper = 0 : i64} : tensor<2x1x4x4xf32>
  %masked = tg.add %s4, %m : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = tg.softmax %masked axis = 3 : tensor<2x2x4x4xf32>
  %p3 = tg.reshape %p : tensor<2x2x4x4xf32> -> tensor<4x4x4xf32>
  %o = tg.matmul %p3, %v3 : (tensor<4x4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  return %o : tensor<4x4x4xf32>
}

// -----

// Tests that a bias read at run time (a padding mask the caller computes,
// [B, 1, 1, S]) becomes tg.attention's bias operand next to the causal band.
// CHECK-LABEL: func.func @runtime_bias
// CHECK-SAME: (%[[Q:.+]]: tensor<2x2x8x4xf32>, %[[K:.+]]: tensor<2x2x8x4xf32>, %[[V:.+]]: tensor<2x2x8x4xf32>, %[[PAD:.+]]: tensor<2x1x1x8xf32>)
// CHECK: %[[OUT:.+]] = tg.attention %[[Q]], %[[K]], %[[V]] bias %[[PAD]] {causal}
// CHECK-NOT: tg.add
// CHECK: return %[[OUT]]
func.func @runtime_bias(%q: tensor<2x2x8x4xf32>, %k: tensor<2x2x8x4xf32>, %v: tensor<2x2x8x4xf32>, %pad: tensor<2x1x1x8xf32>) -> tensor<2x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<2x2x8x4xf32> -> tensor<2x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<2x2x8x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x8x8xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<2x2x8x8xf32>, tensor<f32>) -> tensor<2x2x8x8xf32>
  %m = tg.band_mask {inside = 0.0 : f64, lower = -7 : i64, outside = -3.4028234663852886E+38 : f64, upper = 0 : i64} : tensor<1x1x8x8xf32>
  %causal = tg.add %scaled, %m : (tensor<2x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %masked = tg.add %causal, %pad : (tensor<2x2x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<2x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<2x2x8x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
  return %o : tensor<2x2x8x4xf32>
}

// -----

// Tests that a compile-time bias that is neither a mask nor ALiBi (not
// affine in the key index) becomes the bias operand, reshaped to rank 4.
// CHECK-LABEL: func.func @constant_bias
// CHECK: %[[B:.+]] = arith.constant dense<{{.+}}> : tensor<2x2xf32>
// CHECK: %[[B4:.+]] = tg.reshape %[[B]] : tensor<2x2xf32> -> tensor<1x1x2x2xf32>
// CHECK: tg.attention %{{.+}}, %{{.+}}, %{{.+}} bias %[[B4]] : (
func.func @constant_bias(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x2x4xf32>, %v: tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x1x2x4xf32> -> tensor<1x1x4x2xf32>
  %s = tg.matmul %q, %kt : (tensor<1x1x2x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x2x2xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<1x1x2x2xf32>, tensor<f32>) -> tensor<1x1x2x2xf32>
  %b = arith.constant dense<[[0.0, 1.0], [3.0, 0.5]]> : tensor<2x2xf32>
  %biased = tg.add %b, %scaled : (tensor<2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %p = tg.softmax %biased axis = 3 : tensor<1x1x2x2xf32>
  %o = tg.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  return %o : tensor<1x1x2x4xf32>
}

// -----

// Tests that a boolean mask read at run time is still left unraised (a
// select, not an additive bias) and recorded with its reason.
// CHECK-LABEL: func.func @runtime_keep_mask
// CHECK-SAME: tg.unraised_attention = [{module = "", reason = "the mask is neither causal (with or without a sliding window) nor empty"}]
// CHECK: tg.softmax
// CHECK-NOT: tg.attention
func.func @runtime_keep_mask(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %keep: tensor<1x1x8x8xi1>) -> tensor<1x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %masked = tg.select %keep, %s, %ninf : (tensor<1x1x8x8xi1>, tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<1x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that Hugging Face's mask of a padded batch, an additive
// select(and(causal band, padding over the keys), 0, -big) from an
// attention_mask input, splits into a causal tg.attention and a bias over
// the keys alone: select(padding, 0, -big) of [B, 1, 1, S].
// CHECK-LABEL: func.func @causal_and_key_padding
// CHECK-SAME: (%[[Q:.+]]: tensor<2x2x8x4xf32>, %[[K:.+]]: tensor<2x2x8x4xf32>, %[[V:.+]]: tensor<2x2x8x4xf32>, %[[MASK:.+]]: tensor<2x8xi64>)
// CHECK: %[[KEEP:.+]] = tg.reshape
// CHECK: %[[BIAS:.+]] = tg.select %[[KEEP]], %{{.+}}, %{{.+}} : (tensor<2x1x1x8xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1x8xf32>
// CHECK: %[[OUT:.+]] = tg.attention %[[Q]], %[[K]], %[[V]] bias %[[BIAS]] {causal}
// CHECK-NOT: tg.softmax
// CHECK: return %[[OUT]]
func.func @causal_and_key_padding(%q: tensor<2x2x8x4xf32>, %k: tensor<2x2x8x4xf32>, %v: tensor<2x2x8x4xf32>, %mask: tensor<2x8xi64>) -> tensor<2x2x8x4xf32> {
  %kt = tg.transpose %k permutation = [0, 1, 3, 2] : tensor<2x2x8x4xf32> -> tensor<2x2x4x8xf32>
  %s = tg.matmul %q, %kt : (tensor<2x2x8x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x8x8xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %scaled = tg.mul %s, %c : (tensor<2x2x8x8xf32>, tensor<f32>) -> tensor<2x2x8x8xf32>
  %band = tg.band_mask {inside = 1.0 : f64, lower = -7 : i64, outside = 0.0 : f64, upper = 0 : i64} : tensor<1x1x8x8xi1>
  %bools = tg.cast %mask : tensor<2x8xi64> -> tensor<2x8xi1>
  %keep = tg.reshape %bools : tensor<2x8xi1> -> tensor<2x1x1x8xi1>
  %false = arith.constant dense<false> : tensor<i1>
  %both = tg.select %band, %keep, %false : (tensor<1x1x8x8xi1>, tensor<2x1x1x8xi1>, tensor<i1>) -> tensor<2x1x8x8xi1>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %big = arith.constant dense<-3.4028234663852886E+38> : tensor<f32>
  %bias = tg.select %both, %zero, %big : (tensor<2x1x8x8xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x8x8xf32>
  %masked = tg.add %scaled, %bias : (tensor<2x2x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %p = tg.softmax %masked axis = 3 : tensor<2x2x8x8xf32>
  %o = tg.matmul %p, %v : (tensor<2x2x8x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
  return %o : tensor<2x2x8x4xf32>
}
