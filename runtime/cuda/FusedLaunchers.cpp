//===- FusedLaunchers.cpp - fused_elementwise on the GPU ------------------===//
//
// Launches the kernel `tailor compile` generated for a fused_elementwise
// launch's program (codegen/FusedKernelSource.cpp, compiled by NVRTC into
// the plan's module "fused"). Operands and attributes are the CPU kernel's
// (runtime/cpu/FusedProgram.h): inputs then outputs, `program` and
// `outputs`. Every operand is f32 (the generated kernels load and store
// f32; bf16 storage would be another kernel name and pointer type).
//
// The kernel's arguments, in the order FusedKernelSource.h documents:
// input pointers, output pointers, the element count of each Repeating
// input, the outputs' element count. It is a grid-stride loop: 256-thread
// blocks, blocksFor's grid over the elements, or over packs of four when
// every input is Full (the kernel's vector loop).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/FusedLaunchers.h"

#include "runtime/cpu/FusedProgram.h"
#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"

namespace tailor::runtime::cuda {

namespace {

/// Threads of the grid-stride loop.
constexpr unsigned kFusedThreads = 256;

/// How many of `operands` are outputs, by the `outputs` attribute; 0 when
/// it is missing or leaves no input count that makes sense.
size_t outputCount(const std::vector<Tensor> &operands,
                   const Attributes &attributes) {
  const Attribute *outputs = attributes.find("outputs");
  if (!outputs || outputs->kind != Attribute::Kind::Ints ||
      outputs->ints.empty() || outputs->ints.size() >= operands.size()) {
    return 0;
  }
  return outputs->ints.size();
}

std::string checkFused(const KernelCall &call) {
  for (size_t i = 0; i < call.operands.size(); ++i) {
    if (call.operands[i].dtype != DType::F32) {
      return "operand " + std::to_string(i) +
             " must be f32: the CUDA backend generates fused kernels for "
             "f32 only";
    }
  }
  return checkLikeCpu("fused_elementwise", call);
}

std::string launchFused(const CudaCall &call) {
  const size_t outputs = outputCount(call.operands, call.attributes);
  std::string function = fusedLaunchFunction(call.operands, call.attributes);
  if (function.empty()) {
    return "a fused_elementwise launch without its 'program' and 'outputs'";
  }
  const size_t inputs = call.operands.size() - outputs;
  long long n = call.operands[inputs].numel();
  if (n == 0) {
    return "";
  }
  std::vector<const void *> pointers;
  std::vector<long long> periods;
  for (const Tensor &operand : call.operands) {
    pointers.push_back(operand.data);
  }
  for (size_t i = 0; i < inputs; ++i) {
    if (call.operands[i].numel() != n) {
      periods.push_back(call.operands[i].numel());
    }
  }
  // Every input Full: the kernel's vector loop takes four elements a thread.
  const int64_t items = periods.empty() ? (n + 3) / 4 : n;
  std::vector<void *> args;
  for (const void *&pointer : pointers) {
    args.push_back(&pointer);
  }
  for (long long &period : periods) {
    args.push_back(&period);
  }
  args.push_back(&n);
  return call.context->launch(function.c_str(),
                              Dim3{blocksFor(items, kFusedThreads), 1, 1},
                              Dim3{kFusedThreads, 1, 1}, 0, args.data());
}

} // namespace

std::string fusedLaunchFunction(const std::vector<Tensor> &operands,
                                const Attributes &attributes) {
  const Attribute *program = attributes.find("program");
  const size_t outputs = outputCount(operands, attributes);
  if (!program || program->kind != Attribute::Kind::String || outputs == 0) {
    return "";
  }
  const size_t inputs = operands.size() - outputs;
  const int64_t n = operands[inputs].numel();
  std::vector<fused::InputKind> kinds;
  for (size_t i = 0; i < inputs; ++i) {
    kinds.push_back(operands[i].numel() == n ? fused::InputKind::Full
                                             : fused::InputKind::Repeating);
  }
  return fused::fusedFunctionName(program->s, attributes.getInts("outputs"),
                                  kinds);
}

void addFusedCudaKernels(std::vector<CudaKernelDef> &table) {
  // No fixed function list: the session asks for fusedLaunchFunction's.
  table.push_back({"fused_elementwise", -1, checkFused, launchFused, nullptr});
}

} // namespace tailor::runtime::cuda
