// RUN: tailor-opt %s --split-input-file --verify-diagnostics --tailor-overlap-host-updates

// Tests that the pass says what it needs.
// expected-error @+1 {{tailor-overlap-host-updates: no function @optimizer_step}}
module {
  func.func @train_step() {
    return
  }
}
