//===- Progress.cpp - what a training run reports as it goes --------------===//

#include "runtime/train/Progress.h"

#include "runtime/train/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace tailor::train {

std::string formatDuration(double seconds) {
  char text[32];
  auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600) {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", s / 3600, s / 60 % 60);
  } else if (s >= 60) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(text, sizeof(text), "%llds", s);
  }
  return text;
}

Progress::Progress(FILE *out, FILE *err, int64_t startStep, int64_t maxSteps,
                   int64_t tokensPerStep)
    : out(out), err(err), startStep(startStep), maxSteps(maxSteps),
      tokensPerStep(tokensPerStep), bar(isatty(fileno(err))),
      width(static_cast<int>(std::to_string(maxSteps).size())) {}

Progress::~Progress() {
  clearBar();
  if (metrics) {
    std::fclose(metrics);
  }
}

bool Progress::openMetrics(const std::string &path, std::string &error) {
  std::ifstream in(path);
  if (in) {
    std::string kept, line;
    while (std::getline(in, line)) {
      auto row = nlohmann::json::parse(line, nullptr, false);
      if (!row.is_discarded() && row.is_object() && row.contains("step") &&
          row["step"].is_number_integer() &&
          row["step"].get<int64_t>() <= startStep) {
        kept += line + "\n";
      }
    }
    in.close();
    if (!writeFileAtomically(path, kept, error)) {
      return false;
    }
  }
  metrics = std::fopen(path.c_str(), "a");
  if (!metrics) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  return true;
}

void Progress::clearBar() {
  if (drawn) {
    std::fputs("\r\033[K", err);
    std::fflush(err);
    drawn = false;
  }
}

void Progress::step(const StepReport &report) {
  // The first step of a run pays for page faults and warm-up: the estimate
  // leaves it out once there is another.
  if (report.step == startStep + 1) {
    firstSeconds = report.seconds;
  } else {
    timedSeconds += report.seconds;
    ++timedSteps;
  }
  double perStep = timedSteps > 0
                       ? timedSeconds / static_cast<double>(timedSteps)
                       : firstSeconds;
  std::string eta =
      formatDuration(perStep * static_cast<double>(maxSteps - report.step));
  double tokensPerSecond =
      static_cast<double>(tokensPerStep) / std::max(report.seconds, 1e-9);

  if (metrics) {
    // %.9g round-trips a float exactly; the validation loss is a double.
    // A skipped fp16 step's norm (or, if its forward overflowed, its loss)
    // is inf or nan, which JSON lacks: null.
    char norm[32] = "null", loss[32] = "null";
    if (std::isfinite(report.gradNorm)) {
      std::snprintf(norm, sizeof(norm), "%.9g", report.gradNorm);
    }
    if (std::isfinite(report.loss)) {
      std::snprintf(loss, sizeof(loss), "%.9g", report.loss);
    }
    std::fprintf(metrics,
                 "{\"step\":%" PRId64 ",\"loss\":%s,\"lr\":%.9g,"
                 "\"grad_norm\":%s,\"tokens_per_s\":%.1f,\"step_ms\":%.3f,"
                 "\"tokens\":%" PRId64 ",\"epoch\":%.6f",
                 report.step, loss, report.learningRate, norm,
                 tokensPerSecond, report.seconds * 1e3, tokensPerStep,
                 report.epoch);
    if (report.lossScale) {
      std::fprintf(metrics, ",\"loss_scale\":%.9g,\"skipped\":%s",
                   *report.lossScale, report.skipped ? "true" : "false");
    }
    if (report.evalLoss) {
      std::fprintf(metrics, ",\"eval_loss\":%.17g", *report.evalLoss);
    }
    if (report.bytesSent) {
      std::fprintf(metrics, ",\"bytes_sent\":%" PRIu64, *report.bytesSent);
      const char *separator = ",\"bytes_sent_by_group\":{";
      for (const auto &[group, bytes] : report.bytesSentByGroup) {
        std::fprintf(metrics, "%s\"%s\":%" PRIu64, separator, group.c_str(),
                     bytes);
        separator = ",";
      }
      if (!report.bytesSentByGroup.empty()) {
        std::fputs("}", metrics);
      }
    }
    if (report.bytesCopied) {
      std::fprintf(metrics, ",\"bytes_copied\":%" PRIu64,
                   *report.bytesCopied);
    }
    std::fputs("}\n", metrics);
    std::fflush(metrics);
  }
  if (report.log) {
    clearBar();
    char evalText[48] = "";
    if (report.evalLoss) {
      std::snprintf(evalText, sizeof(evalText), " | eval_loss %.6f",
                    *report.evalLoss);
    }
    // fp16 loss scaling: the scale (a power of two, usually: in full), and
    // a skipped step's norm (or loss), inf or nan, without a sign.
    char scaleText[80] = "";
    if (report.lossScale) {
      double scale = *report.lossScale;
      bool whole = scale >= 1 && scale < 1e15 && scale == std::floor(scale);
      std::snprintf(scaleText, sizeof(scaleText),
                    whole ? " | scale %.0f%s" : " | scale %g%s", scale,
                    report.skipped ? " (inf/nan grads: step skipped)" : "");
    }
    auto number = [](double value, const char *format) {
      char text[32];
      if (std::isfinite(value)) {
        std::snprintf(text, sizeof(text), format, value);
      } else {
        std::snprintf(text, sizeof(text), "%s",
                      std::isnan(value) ? "nan" : "inf");
      }
      return std::string(text);
    };
    std::fprintf(out,
                 "step %*" PRId64 "/%" PRId64 " | loss %s%s | norm %s%s | "
                 "lr %.2e | %.*f ms | %.0f tok/s | eta %s\n",
                 width, report.step, maxSteps,
                 number(report.loss, "%.6f").c_str(), evalText,
                 number(report.gradNorm, "%.4f").c_str(), scaleText,
                 report.learningRate,
                 report.seconds < 0.01 ? 2 : 0, report.seconds * 1e3,
                 tokensPerSecond, eta.c_str());
    std::fflush(out);
  }
  if (bar) {
    int filled = static_cast<int>(20 * report.step / maxSteps);
    std::fprintf(err, "\r[%s%s] %" PRId64 "/%" PRId64 " eta %s",
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(20 - filled), '.').c_str(),
                 report.step, maxSteps, eta.c_str());
    std::fflush(err);
    drawn = true;
  }
}

} // namespace tailor::train
