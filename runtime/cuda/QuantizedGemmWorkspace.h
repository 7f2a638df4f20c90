//===- QuantizedGemmWorkspace.h - linear_quantized's GEMM route -*- C++ -*-===//
//
// On CUDA targets the compiler runs a frozen (quantized or 16-bit) linear
// layer as a cuBLASLt GEMM on bf16 copies rather than through the
// dequantizing tile kernel, which reaches a fifth of the tensor cores'
// rate: the launch carries `via_gemm = 1` and a workspace this header
// sizes. The runtime (runtime/cuda/LinearAlgebraLaunchers.cpp) rounds x to
// bf16 there (when x is f32) and dequantizes W to bf16 there (unless it is
// stored as bf16), then multiplies. That is what bitsandbytes does for
// QLoRA training; the precision is the tile kernel's (x and W rounded to
// bf16, f32 accumulation). One rule, read by the launcher and by the
// compiler (passes/memory/LowerToSched.cpp, selectQuantizedLinear).
// Header-only, no CUDA, so both sides include it.
//
// Workspace layout (bytes): x as bf16 [M, K] first (when x is f32), then
// at the next multiple of 256 W as bf16 [rows, cols] (unless stored bf16).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_QUANTIZEDGEMMWORKSPACE_H
#define TAILOR_RUNTIME_CUDA_QUANTIZEDGEMMWORKSPACE_H

#include "runtime/quant/QuantizedWeight.h"

#include <cstdint>

namespace tailor::runtime::cuda {

/// Where the GEMM route puts its bf16 copies in the workspace.
struct QuantizedGemmLayout {
  int64_t xBytes = 0;       // bf16 x at offset 0 (0: x is already bf16)
  int64_t weightOffset = 0; // bf16 W at this offset
  int64_t weightBytes = 0;  // (0: W is stored as bf16)
  int64_t totalBytes() const { return weightOffset + weightBytes; }
};

inline QuantizedGemmLayout quantizedGemmLayout(const quant::QuantSpec &spec,
                                               int64_t xElements,
                                               bool xIsF32) {
  QuantizedGemmLayout layout;
  layout.xBytes = xIsF32 ? 2 * xElements : 0;
  layout.weightOffset = (layout.xBytes + 255) / 256 * 256;
  layout.weightBytes =
      spec.scheme == quant::Scheme::BF16 ? 0 : 2 * spec.rows * spec.cols;
  return layout;
}

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_QUANTIZEDGEMMWORKSPACE_H
