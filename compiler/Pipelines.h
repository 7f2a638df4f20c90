//===- Pipelines.h - tailor's pass pipelines --------------------*- C++ -*-===//
//
// The pipelines `tailor compile --compile-to=...` runs, built in C++ so
// tailor-opt can run exactly the same thing (`--tailor-graph-pipeline`).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_PIPELINES_H
#define TAILOR_COMPILER_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

#include <string>

namespace tailor {

/// Import -> graph: raise the literal ONNX graph to transformer-level tg ops,
/// clean up what the raising leaves dead, and read a tied output projection
/// from its embedding table (`tiePolicy`: auto, always or never).
void buildGraphPipeline(mlir::OpPassManager &pm,
                        llvm::StringRef tiePolicy = "auto");

/// Options of the schedule pipeline (`--tailor-schedule-pipeline`).
struct ScheduleOptions {
  /// CPU workers the plan sizes per-worker workspaces for.
  int64_t threads = 8;
  /// The target (compiler/Hardware.h): backend "cpu" or "cuda", its name,
  /// compute capability and memory (0: no memory proof).
  std::string backend = "cpu";
  std::string hardware = "cpu";
  int64_t sm = 0;
  int64_t deviceMemory = 0;
  /// "fp32", "bf16" (tensor-core compute with f32 accumulation; the CPU
  /// emulates it: tailor-emulate-half) or "fp16" (the CPU emulating fp16
  /// tensor cores: tailor-emulate-half).
  std::string precision = "fp32";
  /// Bytes of cuBLASLt workspace a GPU plan reserves.
  int64_t gemmWorkspace = 0;
  /// Ranks the training step is split over, and ranks per node
  /// (tailor-shard).
  int64_t worldSize = 1;
  int64_t ranksPerNode = 1;
  /// A cluster of mixed devices (the module carries them as tg.cluster):
  /// tailor-balance-ranks gives each rank its own micro-batch count.
  bool heterogeneous = false;
};

struct HardwareSpec;
/// Schedule options for `hardware`: a GPU target plans device arenas, a
/// GEMM workspace (32 MiB on Hopper, 4 MiB before, as cuBLAS advises) and,
/// unless `precision` says otherwise ("fp32", "bf16" or "" for the
/// target's default: bf16 on GPUs), bf16 tensor-core compute.
ScheduleOptions scheduleOptionsFor(const HardwareSpec &hardware,
                                   llvm::StringRef precision, int64_t threads);

/// Import -> schedule: the graph pipeline, then planning one rank
/// (kernels, order, lifetimes, arena offsets) into a sched.program.
void buildSchedulePipeline(mlir::OpPassManager &pm,
                           const ScheduleOptions &options);

/// Only the planning step (lower-to-sched) with `options`, for modules
/// already raised (an inference plan with a bound adapter).
void buildLowerToSchedule(mlir::OpPassManager &pm,
                          const ScheduleOptions &options);

struct TrainingRecipe;

/// Fails, naming what, when `recipe`'s precision cannot run on `options`'
/// target: fp16 (loss scaling) plans one CPU rank, fp16 and bf16 CPU plans
/// store dense frozen weights in their own format (or f32).
llvm::Error checkTrainingPrecision(const TrainingRecipe &recipe,
                                   const ScheduleOptions &options);

/// The storage scheme tailor-quantize gives the frozen weights of `recipe`
/// on `options`' target ("" for none): the recipe's quantization, else
/// bf16 with bf16 compute (as Hugging Face loads them; GPU or CPU), or
/// fp16 with fp16 compute, unless the recipe says `quantization: none` or
/// trains every weight.
std::string frozenWeightScheme(const TrainingRecipe &recipe,
                               const ScheduleOptions &options);

/// Import -> schedule of a training plan: the graph pipeline, the training
/// passes the recipe asks for (insert-lora, add-loss, autodiff, optimizer),
/// then planning one rank with its two entries.
/// With `schedule` false it stops at the training step in tg; with
/// `raised` it leaves out the graph pipeline (the module went through it).
void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainingRecipe &recipe,
                           const ScheduleOptions &options, bool schedule = true,
                           bool raised = false);

/// What a generation plan is built with (tailor compile --task generate).
struct GenerationOptions {
  /// Token ids that end generation, comma-separated ("" for none).
  std::string eosTokenIds;
  /// The module is raised already (an adapter was bound to it).
  bool raised = false;
  /// Prompt tokens per call of the `prefill` entry (clamped to the cache
  /// length); 0 or 1: no prefill entry.
  int64_t prefillChunk = 0;
  /// The recipe whose weight-format keys store the frozen weights
  /// quantized (null or no scheme: float weights).
  const TrainingRecipe *weights = nullptr;
};

/// Import -> schedule of a generation plan: the graph pipeline (unless the
/// module is raised already), the frozen linear weights stored as the
/// recipe's weight format says (tailor-quantize), the one-token decode step
/// with its KV cache and the chunked prefill (tailor-build-decode), then
/// planning the `decode` and `prefill` entries.
void buildGenerationPipeline(mlir::OpPassManager &pm,
                             const ScheduleOptions &options,
                             const GenerationOptions &generation);

/// Registers the pipelines with the global registry (for tailor-opt).
void registerTailorPipelines();

} // namespace tailor

#endif // TAILOR_COMPILER_PIPELINES_H
