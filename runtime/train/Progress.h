//===- Progress.h - what a training run reports as it goes -----*- C++ -*-===//
//
// Three audiences: a person at a terminal (a live bar on stderr, redrawn
// with \r), logs and scripts reading stdout (one llm.c-style line per
// logged step), and programs reading DIR/metrics.jsonl (one JSON object per
// step, flushed as it is written, full float precision).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TRAIN_PROGRESS_H
#define TAILOR_RUNTIME_TRAIN_PROGRESS_H

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

namespace tailor::train {

/// One finished optimizer step.
struct StepReport {
  int64_t step = 0;
  double loss = 0;
  double learningRate = 0;
  double gradNorm = 0;
  double seconds = 0;
  double epoch = 0;
  /// Also print the stdout line (logging_steps).
  bool log = true;
  /// The validation loss measured after the step, if it was.
  std::optional<double> evalLoss;
  /// fp16 loss scaling: the scale this step's backward used, and whether
  /// an inf/NaN gradient skipped its update.
  std::optional<double> lossScale;
  bool skipped = false;
  /// On several ranks: bytes this rank's collectives sent during the step
  /// (train_step and optimizer_step, not validation), to compare with the
  /// plan's prediction.
  std::optional<uint64_t> bytesSent;
  /// The same per kind of group (Session::bytesSentByGroup).
  std::map<std::string, uint64_t> bytesSentByGroup;
  /// For a plan with copy steps: bytes its host<->device copies moved
  /// during the step (Session::bytesCopied), the same way.
  std::optional<uint64_t> bytesCopied;
};

class Progress {
public:
  /// `startStep` is the step the run resumed from (0 when fresh); the bar
  /// is drawn only when `err` is a terminal.
  Progress(FILE *out, FILE *err, int64_t startStep, int64_t maxSteps,
           int64_t tokensPerStep);
  ~Progress();
  Progress(const Progress &) = delete;
  Progress &operator=(const Progress &) = delete;

  /// Opens `path` for appending after dropping its lines past `startStep`
  /// (those of a run that went further before being resumed here).
  bool openMetrics(const std::string &path, std::string &error);
  /// Reports `report` everywhere it goes.
  void step(const StepReport &report);
  /// Erases the live bar, before other output or at the end.
  void clearBar();

private:
  FILE *out;
  FILE *err;
  FILE *metrics = nullptr;
  int64_t startStep, maxSteps, tokensPerStep;
  bool bar;
  bool drawn = false;
  int width;
  double firstSeconds = 0, timedSeconds = 0;
  int64_t timedSteps = 0;
};

/// "45s", "1m20s", "2h03m".
std::string formatDuration(double seconds);

} // namespace tailor::train

#endif // TAILOR_RUNTIME_TRAIN_PROGRESS_H
