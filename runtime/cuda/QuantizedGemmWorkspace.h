//===- QuantizedGemmWorkspace.h - linear_quantized's GEMM route -*- C++ -*-===//
//
// On CUDA targets the compiler runs a frozen (quantized or 16-bit) linear
// layer as a cuBLASLt GEMM on 16-bit copies rather than through the
// dequantizing tile kernel, which reaches a fifth of the tensor cores'
// rate: the launch carries `via_gemm` and a workspace this header sizes.
// `via_gemm` names the copies' format: 1 bf16 (fp32 and bf16 plans), 2
// fp16 (fp16 plans, whose GEMMs run on the fp16 tensor cores). The runtime
// (runtime/cuda/LinearAlgebraLaunchers.cpp) rounds x to that format there
// (when x is f32) and dequantizes W to it there (unless W is stored in
// it), then multiplies. That is what bitsandbytes does for QLoRA training
// (its compute dtype); the precision is x and W rounded to the format, f32
// accumulation. One rule, read by the launcher and by the compiler
// (passes/memory/SchedPlanner.cpp, selectQuantizedLinear). Header-only, no
// CUDA, so both sides include it.
//
// Workspace layout (bytes): x in the format [M, K] first (when x is f32),
// then at the next multiple of 256 W in the format [rows, cols] (unless
// stored in it).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_QUANTIZEDGEMMWORKSPACE_H
#define TAILOR_RUNTIME_CUDA_QUANTIZEDGEMMWORKSPACE_H

#include "runtime/quant/QuantizedWeight.h"

#include <cstdint>

namespace tailor::runtime::cuda {

/// The 16-bit format of the GEMM route's copies: the launch's `via_gemm`.
enum class GemmRouteFormat : int64_t { BF16 = 1, FP16 = 2 };

/// The format `via_gemm` names, or false for a value that names none.
inline bool gemmRouteFormatOf(int64_t viaGemm, GemmRouteFormat &format) {
  if (viaGemm != 1 && viaGemm != 2) {
    return false;
  }
  format = static_cast<GemmRouteFormat>(viaGemm);
  return true;
}

/// Whether `spec` stores W in `format` already (no copy needed).
inline bool storedInFormat(const quant::QuantSpec &spec,
                           GemmRouteFormat format) {
  return (format == GemmRouteFormat::BF16 &&
          spec.scheme == quant::Scheme::BF16) ||
         (format == GemmRouteFormat::FP16 &&
          spec.scheme == quant::Scheme::FP16);
}

/// Where the GEMM route puts its 16-bit copies in the workspace.
struct QuantizedGemmLayout {
  int64_t xBytes = 0;       // x at offset 0 (0: x is already 16-bit)
  int64_t weightOffset = 0; // W at this offset
  int64_t weightBytes = 0;  // (0: W is stored in the format)
  int64_t totalBytes() const { return weightOffset + weightBytes; }
};

inline QuantizedGemmLayout quantizedGemmLayout(const quant::QuantSpec &spec,
                                               int64_t xElements, bool xIsF32,
                                               GemmRouteFormat format) {
  QuantizedGemmLayout layout;
  layout.xBytes = xIsF32 ? 2 * xElements : 0;
  layout.weightOffset = (layout.xBytes + 255) / 256 * 256;
  layout.weightBytes =
      storedInFormat(spec, format) ? 0 : 2 * spec.rows * spec.cols;
  return layout;
}

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_QUANTIZEDGEMMWORKSPACE_H
