//===- LossScaler.cpp - fp16 dynamic loss scaling (GradScaler) ------------===//

#include "runtime/train/LossScaler.h"

#include <cmath>

namespace tailor::train {

LossScaler::LossScaler(const LossScalerSettings &settings)
    : settings(settings) {
  current.scale = static_cast<float>(settings.initScale);
}

float LossScaler::inverseScale() const {
  return static_cast<float>(1.0 / static_cast<double>(current.scale));
}

void LossScaler::update(bool foundInf) {
  if (foundInf) {
    current.scale = static_cast<float>(static_cast<double>(current.scale) *
                                       settings.backoffFactor);
    current.growthTracker = 0;
    ++current.skippedSteps;
    return;
  }
  int64_t successful = current.growthTracker + 1;
  if (successful == settings.growthInterval) {
    auto grown = static_cast<float>(static_cast<double>(current.scale) *
                                    settings.growthFactor);
    if (std::isfinite(grown)) {
      current.scale = grown;
    }
    current.growthTracker = 0;
  } else {
    current.growthTracker = successful;
  }
}

std::string LossScaler::restore(const LossScalerState &state) {
  if (!std::isfinite(state.scale) || !(state.scale > 0.0f)) {
    return "loss scale " + std::to_string(state.scale) +
           " is not a finite positive number";
  }
  if (state.growthTracker < 0 ||
      state.growthTracker >= settings.growthInterval ||
      state.skippedSteps < 0) {
    return "growth tracker " + std::to_string(state.growthTracker) +
           " or skipped steps " + std::to_string(state.skippedSteps) +
           " out of range (growth_interval " +
           std::to_string(settings.growthInterval) + ")";
  }
  current = state;
  return "";
}

} // namespace tailor::train
