//===- AttentionFp16Kernels.cu - attention with fp16 tensor cores ---------===//
//
// The module "attention_fp16": the kernels of AttentionKernels.cuh
// computing on IEEE half tensor cores (HalfFormat) for f32 storage, which
// is what fp16 plans keep activations in (mixed_precision: fp16; the
// launchers pick these when LaunchContext::halfCompute() is FP16). A module
// of its own so bf16 and fp32 plans do not embed it, and complete (with
// its own attention_grad_kv_sum) so fp16 plans need no other attention
// module. Entry points tailor_<kernel>_d<HD>_f32_fp16 and
// tailor_attention_grad_kv_sum_f32_fp16.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/AttentionKernels.cuh"

TL_ATTENTION_SUM_ENTRY_POINT(f32_fp16, float)

TL_ATTENTION_ENTRY_POINTS(32, f32_fp16, float, tl::attn::HalfFormat)
TL_ATTENTION_ENTRY_POINTS(64, f32_fp16, float, tl::attn::HalfFormat)
TL_ATTENTION_ENTRY_POINTS(96, f32_fp16, float, tl::attn::HalfFormat)
TL_ATTENTION_ENTRY_POINTS(128, f32_fp16, float, tl::attn::HalfFormat)
