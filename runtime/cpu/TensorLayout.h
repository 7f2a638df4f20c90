//===- TensorLayout.h - row-major strides and element-size dispatch -*- C++ -*-===//
//
// Small helpers the data-movement and indexing kernels share: the strides of
// a contiguous row-major tensor, and a dispatch on an element's byte size
// for kernels that only move values (they move them as unsigned bits).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_TENSORLAYOUT_H
#define TAILOR_RUNTIME_CPU_TENSORLAYOUT_H

#include "runtime/cpu/Kernel.h"

#include <cstdint>
#include <vector>

namespace tailor::runtime::cpu {

/// Element strides of a contiguous row-major tensor of `shape`.
inline std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

/// Calls fn(U()) with U the unsigned type of `dtype`'s size.
template <typename Fn> void bySize(DType dtype, Fn &&fn) {
  switch (dtypeSize(dtype)) {
  case 1:
    fn(uint8_t());
    break;
  case 2:
    fn(uint16_t());
    break;
  case 4:
    fn(uint32_t());
    break;
  default:
    fn(uint64_t());
    break;
  }
}

} // namespace tailor::runtime::cpu

#endif // TAILOR_RUNTIME_CPU_TENSORLAYOUT_H
