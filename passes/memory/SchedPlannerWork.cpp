//===- SchedPlannerWork.cpp - work, overlaps and the memory proof ----------===//

#include "passes/memory/SchedPlanner.h"
#include "passes/memory/SavedValues.h"

#include "passes/memory/Passes.h"

#include "dialects/tg/TGQuant.h"
#include "passes/memory/OpCost.h"
#include "runtime/cuda/QuantizedGemmWorkspace.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

void SchedPlanner::scheduleOverlaps(PlannedEntry &entry,
                                        int64_t endStep) {
  for (size_t i = 0; i < entry.launches.size(); ++i) {
    PlannedLaunch &launch = entry.launches[i];
    bool overlapped = (launch.collective && launch.collective->overlap) ||
                      (launch.copy && launch.copy->overlap) || launch.host;
    if (!overlapped) {
      continue;
    }
    llvm::SmallDenseSet<unsigned> touched;
    for (Access operand : launch.operands) {
      touched.insert(operand.root);
    }
    // An eviction (activation offload's tg.to_host) is next used only in
    // backward: it completes by the time compute leaves its layer, so its
    // device bytes are free again soon after.
    std::optional<int64_t> evictedLayer;
    if (launch.op && llvm::isa<tg::ToHostOp>(launch.op)) {
      evictedLayer = layerOf(launch.op).value_or(-1);
    }
    int64_t until = endStep;
    for (size_t j = i + 1; j < entry.launches.size(); ++j) {
      const PlannedLaunch &later = entry.launches[j];
      if (launch.host && later.host) {
        continue; // the host stream runs its launches in order
      }
      bool leavesLayer = evictedLayer && later.op &&
                         layerOf(later.op).value_or(-1) != *evictedLayer;
      if (leavesLayer ||
          llvm::any_of(later.operands, [&](Access operand) {
            return touched.contains(operand.root);
          })) {
        (launch.host         ? launch.hostWaitBefore
         : launch.collective ? launch.collective->waitBefore
                             : launch.copy->waitBefore) = j;
        until = entry.launches[j].step;
        break;
      }
    }
    // In flight until the wait: nothing else may take its bytes.
    for (unsigned root : touched) {
      roots[root].last = std::max(roots[root].last, until);
    }
  }
}

/// What linear_quantized's GEMM route (via_gemm) moves besides the GEMM:
/// the packed weight read, then the bf16 copies of x and W written and
/// read back (runtime/cuda/QuantizedGemmWorkspace.h).
static double viaGemmBytes(const PlannedLaunch &launch) {
  auto viaGemm = llvm::dyn_cast_or_null<IntegerAttr>(
      launch.choice.attributes.get("via_gemm"));
  if (!viaGemm || viaGemm.getInt() == 0 || launch.operands.size() < 2) {
    return 0;
  }
  // The scheme's own keys (selectQuantizedLinear wrote them, checked).
  NamedAttrList keys = launch.choice.attributes;
  // The launch's own keys (its layout and GEMM epilogue) are not the
  // scheme's.
  for (StringRef launchKey : {"transpose_weight", "via_gemm", "accumulate",
                               "alpha", "addend"}) {
    keys.erase(launchKey);
  }
  FailureOr<quant::QuantSpec> spec = tg::quantSpecFromDict(
      keys.getDictionary(launch.op->getContext()),
      [&] { return launch.op->emitError(); });
  if (failed(spec)) {
    return 0;
  }
  auto x = llvm::cast<MemRefType>(launch.operands[0].type);
  runtime::cuda::GemmRouteFormat format;
  if (!runtime::cuda::gemmRouteFormatOf(viaGemm.getInt(), format)) {
    return 0;
  }
  runtime::cuda::QuantizedGemmLayout layout = runtime::cuda::quantizedGemmLayout(
      *spec, x.getNumElements(), x.getElementType().isF32(), format);
  return double(storageBytes(launch.operands[1].type)) +
         2.0 * double(layout.xBytes + layout.weightBytes);
}

/// AdamW reads the parameter, its gradient and both moments and writes the
/// parameter and the moments back: (param, grad, m, v) per parameter, then
/// three scalars, in adamw and adamw_multi alike. (The tg op names its
/// tensors by symbol, so costOf sees only the scalars.)
static double adamwBytes(const PlannedLaunch &launch) {
  double bytes = 0;
  size_t tensors = launch.operands.size() - 3;
  for (size_t i = 0; i < launch.operands.size(); ++i) {
    double size = double(storageBytes(launch.operands[i].type));
    bool written = i < tensors && i % 4 != 1;
    bytes += written ? 2 * size : size;
  }
  return bytes;
}

/// A GEMM that adds into its output or adds a residual (folded additions)
/// reads a tensor of its result's size too.
static double addendBytes(const PlannedLaunch &launch) {
  if (!llvm::isa<tg::LinearOp>(launch.op) ||
      (!launch.choice.attributes.get("accumulate") &&
       !launch.choice.attributes.get("addend"))) {
    return 0;
  }
  auto result = llvm::cast<RankedTensorType>(launch.op->getResult(0).getType());
  return double(storageBytes(result));
}

void SchedPlanner::recordWork(PlannedEntry &entry) {
  for (PlannedLaunch &launch : entry.launches) {
    if (launch.collective) {
      for (Access operand : launch.operands) {
        launch.bytes += double(storageBytes(operand.type));
      }
    } else if (launch.copy) { // the bytes moved
      launch.bytes = double(storageBytes(launch.operands[1].type));
    } else if (launch.choice.kernel == "zero") { // one write of the state
      launch.bytes = double(storageBytes(launch.operands[0].type));
    } else if (launch.choice.kernel == "adamw" ||
               launch.choice.kernel == "adamw_multi") {
      launch.flops = 0;
      launch.bytes = adamwBytes(launch);
    } else if (launch.workCounted ||
               launch.choice.kernel == "fused_elementwise" ||
               (launch.op && isCompressionOp(launch.op))) {
      // The group's or the compression op's work, counted when planned.
    } else if (launch.op) {
      OpCost cost = costOf(launch.op);
      launch.flops = cost.flops;
      launch.bytes = cost.bytes + viaGemmBytes(launch) + addendBytes(launch);
    } else if (!launch.operands.empty()) { // an output copy: read, write
      launch.bytes = 2.0 * double(storageBytes(launch.operands[0].type));
    }
  }
}

/// The plan is a proof that the step fits: device arenas beyond the GPU's
/// memory (less room for the CUDA context) or beyond the budget are an
/// error now, naming the excess, not an out-of-memory error at run time.
/// Host arenas (offload) do not count.
LogicalResult SchedPlanner::proveItFits(ModuleOp module,
                                            const memory::ProgramTarget &target) {
  // The CUDA context, cuBLASLt's handle and the loaded modules live
  // outside the plan's arenas: keep room for them.
  int64_t limit = 0;
  std::string what;
  auto gib = [](int64_t bytes) {
    return bytes >= int64_t(1) << 30
               ? llvm::formatv("{0:F2} GiB", bytes / double(1 << 30)).str()
               : llvm::formatv("{0:F2} MiB", bytes / double(1 << 20)).str();
  };
  if (target.isCuda() && deviceMemory > 0) {
    limit = deviceMemory - kCudaContextReserveBytes;
    what = hardware + " has " + std::to_string(deviceMemory) + " (" +
           gib(deviceMemory) +
           "), of which 512 MiB are kept for the CUDA context and libraries";
  }
  if (deviceBudget > 0 && (limit == 0 || deviceBudget < limit)) {
    limit = deviceBudget;
    what = "the budget (device_memory_budget_gib) is " +
           std::to_string(static_cast<int64_t>(deviceBudget)) + " (" +
           gib(deviceBudget) + ")";
  }
  if (limit == 0) {
    return success();
  }
  int64_t total = 0;
  for (auto program : module.getOps<sched::ProgramOp>()) {
    program.walk([&](sched::ArenaOp arena) {
      if (arena.getKind() == sched::ArenaKind::Device) {
        total += arena.getSize();
      }
    });
  }
  if (total <= limit) {
    return success();
  }
  return module.emitError()
         << "the plan needs " << total << " bytes (" << gib(total)
         << ")" << memory::kDeviceMemoryExceeded << what
         << ": it exceeds that by "
         << gib(total - limit);
}
