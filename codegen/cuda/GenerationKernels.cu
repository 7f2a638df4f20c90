//===- GenerationKernels.cu - the KV cache write ---------------*- CUDA -*-===//
//
// Device code of runtime/cuda/GenerationLaunchers.cpp, the CUDA side of
// runtime/cpu/GenerationKernels.cpp.
//
//   - kv_cache_write: value [B, H, C, D] (C = 1 for decode, the chunk for
//     prefill) into rows position..position+C-1 of cache [B, H, N, D].
//     Both are row-major, so head h's C rows are one contiguous run in
//     value and one in the cache, at row h * N + position. One thread per
//     unit of a row (grid-stride), units of 1 to 16 bytes as the row size
//     and both pointers allow (the launcher picks the widest), so bytes
//     pass through as they are and any dtype works with one instantiation
//     per unit size, as in DataMovementKernels.cu.
//
// The position is run-time data (an i64 scalar in device memory: the step's
// first token index, uploaded with the entry's inputs), so every thread
// reads it here rather than the host at launch time, which would need a
// synchronization per step. One outside [0, N) is reported in the device
// error record (DeviceError.cuh: kKvCachePosition, by global thread 0) and
// nothing is written; the run then fails as the CPU kernel's does. Rows at
// or past N (a prompt's padded tail chunk) are dropped, as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

namespace tl::gen {

/// cache[(h * length + position + r) * units + u] =
///   value[(h * chunk + r) * units + u] for h < heads (B * H), r < the
/// rows that fit (min(chunk, length - position)), u < units per row.
template <typename U>
TL_DEVICE void kvCacheWrite(const U *value, const i64 *positionPtr, U *cache,
                            i64 heads, i64 chunk, i64 length, i64 units,
                            ErrorRecord *error, int site) {
  const i64 position = *positionPtr;
  if (position < 0 || position >= length) {
    if (globalThread() == 0) {
      reportError(error, kKvCachePosition, site, position, 0, length);
    }
    return;
  }
  const i64 kept = chunk < length - position ? chunk : length - position;
  const i64 total = heads * kept * units;
  for (i64 i = globalThread(); i < total; i += gridThreads()) {
    const i64 u = i % units, rest = i / units;
    const i64 r = rest % kept, h = rest / kept;
    cache[(h * length + position + r) * units + u] =
        value[(h * chunk + r) * units + u];
  }
}

} // namespace tl::gen

//===----------------------------------------------------------------------===//
// Entry points, suffixed with the unit the rows move in
//===----------------------------------------------------------------------===//

#define TL_KV_CACHE_WRITE_ENTRY(U, SUFFIX)                                     \
  TL_GLOBAL void tailor_kv_cache_write_##SUFFIX(                               \
      const U *value, const tl::i64 *position, U *cache, tl::i64 heads,        \
      tl::i64 chunk, tl::i64 length, tl::i64 units, tl::ErrorRecord *error,    \
      int site) {                                                              \
    tl::gen::kvCacheWrite<U>(value, position, cache, heads, chunk, length,     \
                             units, error, site);                              \
  }                                                                            \
  TL_REGISTER(tailor_kv_cache_write_##SUFFIX)

TL_KV_CACHE_WRITE_ENTRY(unsigned char, u8)
TL_KV_CACHE_WRITE_ENTRY(tl::u16, u16)
TL_KV_CACHE_WRITE_ENTRY(tl::u32, u32)
TL_KV_CACHE_WRITE_ENTRY(tl::u64, u64)
TL_KV_CACHE_WRITE_ENTRY(tl::U128, u128)

#undef TL_KV_CACHE_WRITE_ENTRY
