//===- BlasCore.cpp - correct OpenBLAS's kernel choice on new CPUs --------===//
//
// OpenBLAS's DYNAMIC_ARCH selection (driver/others/dynamic.c) knows CPUs by
// family and model; an Intel model it does not list falls through to the
// SSE3 Prescott kernels even when the CPU has AVX-512 (0.3.21 on model 207,
// Emerald Rapids: 36 GFLOP/s against 250 for a 1024^3 sgemm on 2 threads).
// The library exports the two calls that make it choose again
// (gotoblas_dynamic_quit, gotoblas_dynamic_init), and the choice honours
// OPENBLAS_CORETYPE; this file uses them once, before the first GEMM and
// before MPI starts its threads (the tools call it first thing, the
// trainer before it joins its ranks, the kernel table as it is built),
// when the choice is narrower than the CPU. OpenBLAS starts its worker
// threads as it loads, and a worker still starting reads the kernel table
// the re-selection clears for a moment (a segfault in about one process
// in 700); so the workers are first joined with blas_thread_shutdown_,
// the call OpenBLAS makes itself before a fork, and its next threaded GEMM
// starts them again. A user's own OPENBLAS_CORETYPE is never overridden,
// and a library without these calls is left as it is; the report says
// which case applied.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/BlasCore.h"

#include <cstdlib>
#include <mutex>
#include <string_view>

extern "C" {
char *openblas_get_config(void);
char *openblas_get_corename(void);
// Only in DYNAMIC_ARCH builds: weak, so other builds link and skip the fix.
__attribute__((weak)) void gotoblas_dynamic_init(void);
__attribute__((weak)) void gotoblas_dynamic_quit(void);
// Joins the worker threads; the next threaded call starts them again.
__attribute__((weak)) int blas_thread_shutdown_(void);
}

namespace tailor::runtime {
namespace {

/// Vector instruction sets, narrowest first; a kernel set needs its level.
enum class VectorLevel { Sse, Avx, Avx2, Avx512, Avx512Bf16 };

const char *levelName(VectorLevel level) {
  switch (level) {
  case VectorLevel::Sse:
    return "SSE";
  case VectorLevel::Avx:
    return "AVX";
  case VectorLevel::Avx2:
    return "AVX2";
  case VectorLevel::Avx512:
    return "AVX-512";
  case VectorLevel::Avx512Bf16:
    return "AVX-512 with bf16";
  }
  return "SSE";
}

/// The level OpenBLAS's x86-64 kernel sets need, by the names
/// openblas_get_corename returns; false for a name not listed here.
bool coreLevel(std::string_view core, VectorLevel &level) {
  struct Entry {
    std::string_view name;
    VectorLevel level;
  };
  static const Entry kCores[] = {
      {"Cooperlake", VectorLevel::Avx512Bf16},
      {"SapphireRapids", VectorLevel::Avx512Bf16},
      {"SkylakeX", VectorLevel::Avx512},
      {"Haswell", VectorLevel::Avx2},
      {"Zen", VectorLevel::Avx2},
      {"Excavator", VectorLevel::Avx2},
      {"Sandybridge", VectorLevel::Avx},
      {"Bulldozer", VectorLevel::Avx},
      {"Piledriver", VectorLevel::Avx},
      {"Steamroller", VectorLevel::Avx},
      {"Prescott", VectorLevel::Sse},
      {"Core2", VectorLevel::Sse},
      {"Penryn", VectorLevel::Sse},
      {"Dunnington", VectorLevel::Sse},
      {"Nehalem", VectorLevel::Sse},
      {"Atom", VectorLevel::Sse},
      {"Nano", VectorLevel::Sse},
      {"Opteron", VectorLevel::Sse},
      {"Opteron(SSE3)", VectorLevel::Sse},
      {"Barcelona", VectorLevel::Sse},
      {"Bobcat", VectorLevel::Sse},
  };
  for (const Entry &entry : kCores) {
    if (entry.name == core) {
      level = entry.level;
      return true;
    }
  }
  return false;
}

/// The widest level the CPU offers and the OS saves the registers of
/// (libgcc's __builtin_cpu_supports checks both).
VectorLevel cpuLevel() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f") &&
                __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) {
    return VectorLevel::Avx512Bf16;
  }
  if (avx512) {
    return VectorLevel::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return VectorLevel::Avx2;
  }
  if (__builtin_cpu_supports("avx")) {
    return VectorLevel::Avx;
  }
#endif
  return VectorLevel::Sse;
}

/// The kernels OpenBLAS itself picks for a CPU it does not know, by level
/// (the fallback chain at the end of gotoblas_dynamic_init).
const char *coreFor(VectorLevel level) {
  switch (level) {
  case VectorLevel::Avx512Bf16:
    return "Cooperlake";
  case VectorLevel::Avx512:
    return "SkylakeX";
  case VectorLevel::Avx2:
    return "Haswell";
  case VectorLevel::Avx:
    return "Sandybridge";
  case VectorLevel::Sse:
    return "Prescott";
  }
  return "Prescott";
}

/// Makes OpenBLAS select its kernels again with OPENBLAS_CORETYPE = `core`
/// (set for the call only) and returns what it chose. No OpenBLAS thread
/// runs while the kernel table is empty: the workers are joined first.
std::string reselectCore(const char *core) {
  blas_thread_shutdown_();
  gotoblas_dynamic_quit();
  setenv("OPENBLAS_CORETYPE", core, 1);
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  return openblas_get_corename();
}

/// "OpenBLAS 0.3.21" from the config line (whose later words name the
/// kernels of the moment, which the report gives apart).
std::string libraryVersion(std::string_view config) {
  size_t first = config.find(' ');
  size_t second =
      first == config.npos ? config.npos : config.find(' ', first + 1);
  return std::string(config.substr(0, second));
}

BlasCoreReport checkBlasCore() {
  BlasCoreReport report;
  report.library = libraryVersion(openblas_get_config());
  report.detectedCore = openblas_get_corename();
  report.core = report.detectedCore;
  VectorLevel cpu = cpuLevel();
  report.cpuVectors = levelName(cpu);
#if defined(__x86_64__)
  constexpr bool kX86 = true;
#else
  constexpr bool kX86 = false;
#endif
  VectorLevel chosen;
  if (!kX86) {
    report.reason = "OpenBLAS's choice (tailor checks x86-64 CPUs only)";
  } else if (std::getenv("OPENBLAS_CORETYPE")) {
    report.reason = "set by OPENBLAS_CORETYPE";
    // Kept, but a setting narrower than the CPU costs GEMM speed: say so.
    if (coreLevel(report.detectedCore, chosen) && chosen < cpu) {
      report.reason += std::string(", narrower than this CPU's ") +
                       report.cpuVectors + "; unset, OpenBLAS would run " +
                       coreFor(cpu) + "'s";
    }
  } else if (!coreLevel(report.detectedCore, chosen)) {
    report.reason = "OpenBLAS's choice (a kernel set tailor does not rank)";
  } else if (chosen >= cpu) {
    report.reason = "OpenBLAS's choice, which uses the CPU's widest vectors";
  } else if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit ||
             !blas_thread_shutdown_) {
    report.reason = std::string("OpenBLAS's choice, narrower than the CPU's ") +
                    report.cpuVectors +
                    ", kept: this OpenBLAS has no DYNAMIC_ARCH or no "
                    "pthread server to stop while it chooses again";
  } else {
    const char *wanted = coreFor(cpu);
    report.core = reselectCore(wanted);
    report.reason = std::string("OpenBLAS chose ") + report.detectedCore +
                    " on this CPU; tailor asked for " + wanted +
                    ", the kernels of its " + report.cpuVectors + " units";
  }
  return report;
}

} // namespace

const BlasCoreReport &ensureBlasCoreMatchesCpu() {
  static std::once_flag once;
  static BlasCoreReport report;
  std::call_once(once, [] { report = checkBlasCore(); });
  return report;
}


} // namespace tailor::runtime
