//===- LossScaler.h - fp16 dynamic loss scaling (GradScaler) ----*- C++ -*-===//
//
// The state machine of torch.amp.GradScaler, which a trainer of an fp16
// plan (the plan's `loss_scaling`, 1.13) runs between steps. The scale S is
// an f32, as GradScaler's `_scale` tensor: train_step seeds its backward
// with S, optimizer_step multiplies the gradients by `inv_scale`, which is
// 1/S computed as GradScaler.unscale_ does (in double, rounded to f32), and
// reports `found_inf`. After the step, update() is torch's
// `_amp_update_scale_` (aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp):
// on found_inf S *= backoff_factor and the growth tracker restarts;
// otherwise the tracker counts the step and after growth_interval clean
// steps S *= growth_factor (kept only if finite) and the tracker restarts.
// Both products are taken in double and rounded to f32, as torch's are.
// A skipped step applies no update, so the plan's `step` input (the lr
// schedule, AdamW's bias corrections) counts applied updates only, as
// PyTorch's optimizer state and Hugging Face's scheduler do.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TRAIN_LOSSSCALER_H
#define TAILOR_RUNTIME_TRAIN_LOSSSCALER_H

#include <cstdint>
#include <string>

namespace tailor::train {

/// GradScaler's constructor arguments (the plan's LossScaling table).
struct LossScalerSettings {
  double initScale = 65536.0;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;
};

/// What a checkpoint keeps of the scaler (trainer_state.json's
/// `loss_scaler`): GradScaler's state_dict's scale and _growth_tracker, and
/// how many steps were skipped so far.
struct LossScalerState {
  float scale = 65536.0f;
  int64_t growthTracker = 0;
  int64_t skippedSteps = 0;
};

/// The scaler of one run.
class LossScaler {
public:
  /// Starts at `settings.initScale` (rounded to f32, as torch.full does).
  explicit LossScaler(const LossScalerSettings &settings);

  /// The scale train_step seeds its backward with.
  float scale() const { return current.scale; }
  /// 1/scale as GradScaler computes it: in double, rounded to f32.
  float inverseScale() const;
  /// Counts the step and moves the scale (`_amp_update_scale_`).
  void update(bool foundInf);

  const LossScalerState &state() const { return current; }
  /// Restores a checkpoint's state; "" or why it is not one this scaler can
  /// continue from (a scale that is not finite and positive, a negative
  /// count, a tracker past the interval).
  std::string restore(const LossScalerState &state);

private:
  LossScalerSettings settings;
  LossScalerState current;
};

} // namespace tailor::train

#endif // TAILOR_RUNTIME_TRAIN_LOSSSCALER_H
