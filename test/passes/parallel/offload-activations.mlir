// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff="function=train_step" --tailor-offload="activations=true activation-min-bytes=0" | FileCheck %s
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff="function=train_step" --tailor-offload="activations=true activation-min-bytes=64" | FileCheck %s --check-prefix=MIN
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff="function=train_step" --tailor-offload="activations=true activation-min-bytes=0" --tailor-lower-to-sched="threads=2" | FileCheck %s --check-prefix=SCHED
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff="function=train_step" --tailor-offload="activations=true activation-min-bytes=0" --tailor-overlap-collectives | FileCheck %s --check-prefix=OVERLAP
// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-autodiff="function=train_step" --tailor-offload="activations=true activation-min-bytes=0" --tailor-overlap-collectives --tailor-lower-to-sched="backend=cuda sm=90 hardware=h100 threads=2" | FileCheck %s --check-prefix=STREAMS

tg.param @w : tensor<4x4xf32> trainable init <"zeros", 0.0 : f64>
tg.param @g : tensor<4xf32> at #tg.external<"w.bin", offset = 0, length = 16>

// Tests that every activation forward saves for backward (the norm n and
// the GEMM output h of layer 0, the layer output x1) goes to the host after
// its last forward reader and comes back right before its first backward
// reader, which reads the copy; the copies take their neighbours' layer;
// the input x (not an op's result) stays.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[N:.+]] = tg.rms_norm %arg0
// CHECK-NEXT: %[[H:.+]] = tg.linear %[[N]]
// CHECK-NEXT: %[[NH:.+]] = tg.to_host %[[N]] {tg.layer = 0 : i64}
// CHECK-NEXT: %[[S:.+]] = tg.silu %[[H]]
// CHECK-NEXT: %[[HH:.+]] = tg.to_host %[[H]] {tg.layer = 0 : i64}
// CHECK-NEXT: %[[X1:.+]] = tg.add %arg0, %[[S]]
// CHECK-NEXT: tg.rms_norm %[[X1]]
// CHECK-NEXT: %[[X1H:.+]] = tg.to_host %[[X1]] {tg.layer = 0 : i64}
// CHECK: %[[X1D:.+]] = tg.to_device %[[X1H]] {tg.layer = 1 : i64}
// CHECK-NEXT: %{{.+}}, %{{.+}} = tg.rms_norm_grad %{{.+}}, %[[X1D]]
// CHECK-NEXT: %[[HD:.+]] = tg.to_device %[[HH]] {tg.layer = 0 : i64}
// CHECK-NEXT: tg.silu_grad %[[HD]]
// CHECK-NEXT: %[[ND:.+]] = tg.to_device %[[NH]] {tg.layer = 0 : i64}
// CHECK-NEXT: tg.linear_weight_grad %{{.+}}, %[[ND]]
// CHECK-NOT: tg.to_host
// CHECK: return

// Tests that activations under `activation-min-bytes` (48 bytes each here)
// stay on the device.
// MIN-LABEL: func.func @train_step
// MIN-NOT: tg.to_host
// MIN: return

// Tests that planning gives the host copies their own pinned arena, packed
// by lifetime, and lowers the moves to d2h and h2d copies.
// SCHED-LABEL: sched.program @rank0
// SCHED: sched.arena @activations_host host_pinned activations size 192
// SCHED: sched.copy d2h %{{.+}} to %[[NH:.+]] on @compute
// SCHED: sched.copy h2d %[[NH]] to %{{.+}} on @compute
// Tests that with overlap every copy is marked and layer 0's returns move
// up to where backward starts reading layer 1's, one layer ahead.
// OVERLAP-LABEL: func.func @train_step
// OVERLAP-COUNT-3: tg.to_host {{.*}}tg.overlap
// OVERLAP: tg.to_device %{{.+}} {tg.layer = 1 : i64, tg.overlap}
// OVERLAP-NEXT: tg.to_device %{{.+}} {tg.layer = 0 : i64, tg.overlap}
// OVERLAP-NEXT: tg.to_device %{{.+}} {tg.layer = 0 : i64, tg.overlap}
// OVERLAP-NEXT: tg.rms_norm_grad

// Tests that planning puts the marked copies on the copy stream, between
// events: compute records where the copy may start and waits for it.
// STREAMS-LABEL: sched.program @rank0
// STREAMS: sched.stream @host_copy
// STREAMS: sched.record @host_copy.ready.0 on @compute
// STREAMS-NEXT: sched.wait @host_copy.ready.0 on @host_copy
// STREAMS: sched.copy d2h %{{.+}} to %{{.+}} on @host_copy
// STREAMS-NEXT: sched.record @host_copy.done.0 on @host_copy
// STREAMS: sched.wait @host_copy.done.0 on @compute
// STREAMS: sched.copy h2d %{{.+}} to %{{.+}} on @host_copy
func.func @train_step(%x: tensor<3x4xf32> {tg.name = "x"}) -> (tensor<f32> {tg.name = "loss"}) {
  %w = tg.param_ref @w : tensor<4x4xf32>
  %g = tg.param_ref @g : tensor<4xf32>
  %n = tg.rms_norm %x, %g {epsilon = 1.0e-5 : f64, tg.layer = 0 : i64} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %h = tg.linear %n, %w {tg.layer = 0 : i64} : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  %s = tg.silu %h {tg.layer = 0 : i64} : tensor<3x4xf32>
  %x1 = tg.add %x, %s {tg.layer = 0 : i64} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %m = tg.rms_norm %x1, %g {epsilon = 1.0e-5 : f64, tg.layer = 1 : i64} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %l = tg.reduce_mean %m axes = [0, 1] : tensor<3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @optimizer_step(%step: tensor<i64> {tg.name = "step"}) -> (tensor<i64> {tg.name = "step_out"}) {
  return %step : tensor<i64>
}
