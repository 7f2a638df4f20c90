//===- GenerationLaunchers.cpp - the KV cache write -----------------------===//
//
// Launchers of codegen/cuda/GenerationKernels.cu, with the CPU kernels'
// names and operands (runtime/cpu/GenerationKernels.cpp).
//
//   - kv_cache_write: value [B, H, C, D], position (i64 scalar), cache
//     [B, H, N, D] written in place; any dtype, bytes copied in the widest
//     unit (16, 8, 4, 2 or 1 bytes) dividing the row size and both
//     pointers. The position stays on the device: the kernel reads it, and
//     one outside [0, N) sets the device error record (the run then fails
//     with the CPU kernel's message) and writes nothing. The grid covers
//     all C rows; the kernel drops those at or past N.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"

#include <algorithm>
#include <cstdint>

namespace tailor::runtime::cuda {
namespace {

std::string checkKvCacheWrite(const KernelCall &call) {
  if (auto e = cpu::expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  // The CPU check sees bf16 as f32, so it cannot tell them apart.
  if (auto e = cpu::expectSameDType(call, 2, 0); !e.empty()) {
    return e;
  }
  return checkLikeCpu("kv_cache_write", call);
}

std::string launchKvCacheWrite(const CudaCall &call) {
  const Tensor &value = call.operands[0], &cache = call.operands[2];
  long long heads = value.shape[0] * value.shape[1];
  long long chunk = value.shape[2], length = cache.shape[2];
  uint64_t rowBytes = uint64_t(value.shape[3]) * dtypeSize(value.dtype);
  if (heads == 0 || chunk == 0 || rowBytes == 0) {
    return "";
  }
  size_t unit = widestUnit({rowBytes, reinterpret_cast<uintptr_t>(value.data),
                            reinterpret_cast<uintptr_t>(cache.data)});
  long long units = static_cast<long long>(rowBytes / unit);
  const void *pv = value.data, *pp = call.operands[1].data;
  void *pc = cache.data;
  DeviceErrorRecord *record = call.context->errorRecord();
  int site = call.step;
  void *args[] = {&pv,     &pp,    &pc,     &heads, &chunk,
                  &length, &units, &record, &site};
  std::string function = std::string("tailor_kv_cache_write_") +
                         sizeSuffix(unit);
  constexpr unsigned kThreads = 256;
  return call.context->launch(function.c_str(),
                              {blocksFor(heads * chunk * units, kThreads)},
                              {kThreads}, 0, args);
}

const char *const kKvCacheWriteFunctions[] = {
    "tailor_kv_cache_write_u8",  "tailor_kv_cache_write_u16",
    "tailor_kv_cache_write_u32", "tailor_kv_cache_write_u64",
    "tailor_kv_cache_write_u128", nullptr};

} // namespace

void addGenerationCudaKernels(std::vector<CudaKernelDef> &table) {
  table.push_back({"kv_cache_write", 3, checkKvCacheWrite, launchKvCacheWrite,
                   kKvCacheWriteFunctions});
}

} // namespace tailor::runtime::cuda
