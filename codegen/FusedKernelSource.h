//===- FusedKernelSource.h - CUDA C++ for fused programs ----*- C++ -*-===//
//
// The CUDA backend runs a `fused_elementwise` launch (runtime/cpu/
// FusedProgram.h) with a kernel generated from its program text at compile
// time: this writes that kernel as CUDA C++ in the vocabulary of the
// hand-written ones (codegen/cuda/Device.cuh, ElementwiseMath.cuh), which
// codegen/FusedKernelCompiler.cpp compiles with NVRTC and the CPU tests
// compile for the SIMT emulator.
//
// The entry point, named fusedFunctionName(text, outputs, kinds), takes in
// order:
//   1. `const float *xI` for each input I (the launch's operands before
//      its outputs);
//   2. `float *yO` for each output O;
//   3. `long long pI` for each Repeating input I, in input order: its
//      element count (input I is read at `index mod pI`);
//   4. `long long n`, the element count of every output.
// Any 1-D grid covers n (grid-stride loops); when every input is Full the
// kernel moves packs of four, so runtime/cuda/FusedLaunchers.cpp sizes
// the grid by packs then (256-thread blocks).
//
// No LLVM here: the build-time generator of the emulator tests links it.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_CODEGEN_FUSEDKERNELSOURCE_H
#define TAILOR_CODEGEN_FUSEDKERNELSOURCE_H

#include "runtime/cpu/FusedProgram.h"

#include <string>
#include <string_view>
#include <vector>

namespace tailor::codegen {

/// One kernel a plan needs: a program's text (as the launch's `program`
/// attribute spells it) and how each of its inputs is read.
struct FusedKernelRequest {
  std::string text;
  std::vector<int64_t> outputs;
  std::vector<runtime::fused::InputKind> kinds;
};

/// The CUDA C++ of one entry point computing `program` (parsed from
/// `text`) over inputs read as `kinds` (one per input), followed by
/// TL_REGISTER of its name; no includes (see fusedTranslationUnit).
std::string
fusedKernelSource(const runtime::fused::Program &program, std::string_view text,
                  const std::vector<runtime::fused::InputKind> &kinds);

/// One translation unit holding the kernels of `requests` (each parsed and
/// checked; equal requests are written once) after the includes they need.
/// Returns "" or what is wrong with a request, naming its program.
std::string
fusedTranslationUnit(const std::vector<FusedKernelRequest> &requests,
                     std::string &source);

/// The kinds of a launch's inputs: Full when an input has `outputNumel`
/// elements, Repeating otherwise.
std::vector<runtime::fused::InputKind>
fusedInputKinds(const std::vector<int64_t> &inputNumels, int64_t outputNumel);

} // namespace tailor::codegen

#endif // TAILOR_CODEGEN_FUSEDKERNELSOURCE_H
