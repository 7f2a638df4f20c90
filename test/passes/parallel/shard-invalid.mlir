// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-shard="strategy=ddp world-size=2"

// Tests that a world of several ranks needs a step that consumes gradients.
// expected-error @below {{tailor-shard: no function @optimizer_step}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

