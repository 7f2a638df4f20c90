//===- BlasCore.h - which OpenBLAS kernels the GEMMs run on ------*- C++ -*-===//
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels from the
// CPU's family and model numbers. A CPU newer than the library (Debian 12's
// OpenBLAS 0.3.21 on an Emerald Rapids Xeon, family 6 model 207) gets the
// SSE3 "Prescott" kernels: f32 GEMMs 5-7x slower than the AVX-512 kernels
// the same library carries. The check here compares the kernels OpenBLAS
// chose with the widest vector units the CPU (and its OS) offers and, when
// the choice is narrower and the user did not set OPENBLAS_CORETYPE, makes
// OpenBLAS choose again with the kernels those units run.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_BLASCORE_H
#define TAILOR_RUNTIME_CPU_BLASCORE_H

#include <string>

namespace tailor::runtime {

/// What the CPU GEMMs run on, and how that was decided.
struct BlasCoreReport {
  /// The library and its version ("OpenBLAS 0.3.21").
  std::string library;
  /// The widest vector instruction set the CPU and OS offer
  /// ("AVX-512 with bf16", "AVX-512", "AVX2", "AVX", "SSE").
  std::string cpuVectors;
  /// The kernels OpenBLAS chose on its own.
  std::string detectedCore;
  /// The kernels GEMMs run on now.
  std::string core;
  /// One line saying why `core` is what it is.
  std::string reason;
};

/// Checks OpenBLAS's kernel choice against the CPU once per process and
/// corrects a choice narrower than the CPU's vector units; later calls
/// return the same report. Call it before the first GEMM and before other
/// threads than OpenBLAS's idle ones read the environment (MPI's): it sets
/// and clears OPENBLAS_CORETYPE for the moment of the re-selection.
const BlasCoreReport &ensureBlasCoreMatchesCpu();

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_CPU_BLASCORE_H
