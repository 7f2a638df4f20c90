//===- GenerationKernels.cpp - the KV cache write of a decode/prefill step ===//
//
// kv_cache_write copies a step's keys or values, value [B, H, C, D] (C = 1
// for decode, the chunk for prefill), into rows position..position+C-1 of
// the cache [B, H, N, D]: for each of the B * H heads one contiguous run
// of rows, a memcpy (both are row-major, so a head's rows are contiguous
// in each). The position is data (the step's first token index), so it is
// checked when the kernel runs: one out of [0, N) is an error naming it,
// never a write outside the cache. Rows at or past N are dropped: only a
// prompt's padded tail chunk reaches them, and nothing reads those rows.
// Bytes are copied as they are, so any element type the plan stores works.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

#include <algorithm>
#include <cstring>

namespace tailor::runtime::cpu {
namespace {

std::string checkKvCacheWrite(const KernelCall &call) {
  if (std::string e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  const Tensor &value = call.operands[0];
  const Tensor &cache = call.operands[2];
  if (std::string e = expectScalar(call, 1, DType::I64); !e.empty()) {
    return e;
  }
  if (std::string e = expectSameDType(call, 2, 0); !e.empty()) {
    return e;
  }
  if (value.rank() != 4 || cache.rank() != 4 ||
      value.shape[2] > cache.shape[2] || value.shape[0] != cache.shape[0] ||
      value.shape[1] != cache.shape[1] || value.shape[3] != cache.shape[3]) {
    return "expected value [B, H, C, D] and cache [B, H, N, D], C <= N, got " +
           shapeString(value.shape) + " and " + shapeString(cache.shape);
  }
  return "";
}

std::string runKvCacheWrite(const KernelCall &call) {
  const Tensor &value = call.operands[0];
  const Tensor &cache = call.operands[2];
  int64_t position = *call.operands[1].as<int64_t>();
  int64_t length = cache.shape[2];
  if (position < 0 || position >= length) {
    return "position " + std::to_string(position) +
           " is outside the KV cache [0, " + std::to_string(length) + ")";
  }
  size_t row = static_cast<size_t>(value.shape[3]) * dtypeSize(value.dtype);
  int64_t chunk = value.shape[2];
  int64_t kept = std::min(chunk, length - position);
  int64_t heads = value.shape[0] * value.shape[1];
  const auto *source = static_cast<const uint8_t *>(value.data);
  auto *target = static_cast<uint8_t *>(cache.data);
  for (int64_t h = 0; h < heads; ++h) {
    std::memcpy(target + (h * length + position) * row,
                source + h * chunk * row, static_cast<size_t>(kept) * row);
  }
  return "";
}

} // namespace

void addGenerationKernels(std::vector<KernelDef> &table) {
  table.push_back({"kv_cache_write", 3, checkKvCacheWrite, runKvCacheWrite});
}

} // namespace tailor::runtime::cpu
