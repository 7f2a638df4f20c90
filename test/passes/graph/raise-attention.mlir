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
