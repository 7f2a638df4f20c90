//===- AttentionKernels.cu - attention with bf16 tensor cores -------------===//
//
// The module "attention": the kernels of AttentionKernels.cuh (layout,
// precision and the shape of the work are described there) computing on
// bf16 tensor cores, for f32 and bf16 storage: what fp32 and bf16 plans
// run. fp16 plans run the module attention_fp16 (AttentionFp16Kernels.cu).
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/AttentionKernels.cuh"

TL_ATTENTION_SUM_ENTRY_POINT(f32, float)
TL_ATTENTION_SUM_ENTRY_POINT(bf16, tl::bf16)

TL_ATTENTION_ENTRY_POINTS(32, f32, float, tl::attn::Bf16Format)
TL_ATTENTION_ENTRY_POINTS(64, f32, float, tl::attn::Bf16Format)
TL_ATTENTION_ENTRY_POINTS(96, f32, float, tl::attn::Bf16Format)
TL_ATTENTION_ENTRY_POINTS(128, f32, float, tl::attn::Bf16Format)
TL_ATTENTION_ENTRY_POINTS(32, bf16, tl::bf16, tl::attn::Bf16Format)
TL_ATTENTION_ENTRY_POINTS(64, bf16, tl::bf16, tl::attn::Bf16Format)
TL_ATTENTION_ENTRY_POINTS(96, bf16, tl::bf16, tl::attn::Bf16Format)
TL_ATTENTION_ENTRY_POINTS(128, bf16, tl::bf16, tl::attn::Bf16Format)
