//===- CudaKernelTable.h - the families of CUDA launchers -------*- C++ -*-===//
//
// Private to runtime/cuda: each launcher file appends its CudaKernelDefs to
// the table through one add*CudaKernels function (CudaKernelTable.cpp calls
// them all). The device code of a family lives in codegen/cuda/ under the
// same family name (ElementwiseLaunchers.cpp launches ElementwiseKernels.cu).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_CUDAKERNELTABLE_H
#define TAILOR_RUNTIME_CUDA_CUDAKERNELTABLE_H

#include "runtime/cuda/CudaKernel.h"

namespace tailor::runtime::cuda {

/// Unary and binary elementwise maps, select, cast, comparisons.
void addElementwiseCudaKernels(std::vector<CudaKernelDef> &table);
/// reduce_*, softmax, rms_norm, layer_norm.
void addNormalizationCudaKernels(std::vector<CudaKernelDef> &table);
/// transpose, slice, concat, split, broadcast, copy, embedding, rope.
void addDataMovementCudaKernels(std::vector<CudaKernelDef> &table);
/// The backward kernels of the above (silu_grad, gelu_grad, softmax_grad,
/// rope_grad, rms_norm_grad, layer_norm_grad, slice_grad, embedding_grad),
/// dropout, cross_entropy and its gradient.
void addGradientCudaKernels(std::vector<CudaKernelDef> &table);
/// accumulate, global_norm, adamw, sgd.
void addOptimizerCudaKernels(std::vector<CudaKernelDef> &table);
/// attention and attention_grad (flash-style, tensor cores).
void addAttentionCudaKernels(std::vector<CudaKernelDef> &table);
/// linear, matmul, linear_weight_grad (GEMMs through LaunchContext::gemm),
/// linear_quantized and dequantize (dequantizing GEMMs).
void addLinearAlgebraCudaKernels(std::vector<CudaKernelDef> &table);
/// kv_cache_write (decode and prefill steps of a generation plan).
void addGenerationCudaKernels(std::vector<CudaKernelDef> &table);
/// quantize_wire_int8, dequantize_wire_int8, dequantize_reduce_wire_int8
/// (ZeRO++'s quantized weight gathers and gradient reduce-scatters).
void addCommunicationCudaKernels(std::vector<CudaKernelDef> &table);
/// error_feedback_add, error_feedback_store, lowrank_init, orthogonalize,
/// lowrank_matmul (PowerSGD's and ACP-SGD's compute), sign_compress and
/// sign_average (EF-SignSGD's).
void addCompressionCudaKernels(std::vector<CudaKernelDef> &table);
/// fused_elementwise (kernels generated per plan; FusedLaunchers.h).
void addFusedCudaKernels(std::vector<CudaKernelDef> &table);

/// The widest unit (16, 8, 4, 2 or 1 bytes) dividing every value: what
/// the byte-moving kernels copy in, given their row sizes and pointers.
size_t widestUnit(const std::vector<uint64_t> &values);
/// "u8", "u16", "u32", "u64", "u128": the entry-point suffix of a unit of
/// `bytes` (8 for any other size).
const char *sizeSuffix(size_t bytes);

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_CUDAKERNELTABLE_H
