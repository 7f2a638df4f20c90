//===- AttentionWorkspace.h - attention_grad's CUDA workspace ---*- C++ -*-===//
//
// How the CUDA attention_grad (runtime/cuda/AttentionLaunchers.cpp) splits
// its key-major pass and how much f32 workspace that takes: one rule, read
// by the launcher and by the compiler that sizes the plan's workspace
// (codegen/CpuKernels.cpp, select(tg::AttentionGradOp) for CUDA targets).
// Header-only, no dependencies, so both sides include it.
//
// The key-major pass (attention_grad_kv) runs one block per 64 keys of a
// (batch, kv head, slice), where a slice is `group / splits` of the kv head's
// group of query heads. With one slice the block writes dk, dv itself; with
// more, each slice writes its partial dk, dv in f32 to the workspace and
// attention_grad_kv_sum adds the slices in a fixed order (deterministic, no
// atomics). `splits` is the smallest divisor of the group that brings the
// pass to kAttentionKvTargetBlocks blocks: with GQA 8:1 at batch 1
// (TinyLlama, 4 kv heads, 2048 keys) one slice would be 128 blocks on a
// 132-SM GPU; the rule gives it 8 (1024 blocks). A launch may force
// another divisor with the attribute `kv_splits` (the compiler never sets
// it; tests and AttentionKernelBench do), and then needs its partials.
//
// Workspace layout (floats): the partials first,
//   dk partials [B, Hkv, splits, S, D], then dv partials [B, Hkv, splits, S, Dv]
// (none with one slice), then at the next multiple of 64 the statistics,
// 2 per query row [B, Hq, T], when the workspace holds them (otherwise they
// live in dq's rows; see the launcher).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_ATTENTIONWORKSPACE_H
#define TAILOR_RUNTIME_CUDA_ATTENTIONWORKSPACE_H

#include <cstdint>

namespace tailor::runtime::cuda {

/// Blocks the key-major pass aims for: several waves of ~3 resident blocks
/// on 132 SMs, so causal blocks of unequal work even out.
constexpr int64_t kAttentionKvTargetBlocks = 1024;
/// Keys per block of the key-major pass (tl::attn::kBlockRows).
constexpr int64_t kAttentionKeyRows = 64;

/// The shape of an attention_grad launch.
struct AttentionGradShape {
  int64_t b = 0, hq = 0, hkv = 0, t = 0, s = 0, d = 0, dv = 0;
};

/// Slices of each kv head's query-head group in the key-major pass (>= 1,
/// a divisor of Hq / Hkv).
inline int64_t attentionKvSplits(const AttentionGradShape &a) {
  if (a.hkv <= 0 || a.hq % a.hkv != 0) {
    return 1;
  }
  int64_t group = a.hq / a.hkv;
  int64_t blocks = (a.s + kAttentionKeyRows - 1) / kAttentionKeyRows * a.hkv *
                   (a.b > 0 ? a.b : 1);
  if (group <= 1 || blocks <= 0 || blocks >= kAttentionKvTargetBlocks) {
    return 1;
  }
  int64_t want = (kAttentionKvTargetBlocks + blocks - 1) / blocks;
  for (int64_t splits = want; splits < group; ++splits) {
    if (group % splits == 0) {
      return splits;
    }
  }
  return group;
}

/// Floats of the partial dk, dv with `splits` slices (0 with one).
inline int64_t attentionKvPartialFloats(const AttentionGradShape &a,
                                        int64_t splits) {
  return splits <= 1 ? 0 : a.b * a.hkv * splits * a.s * (a.d + a.dv);
}

/// Where the statistics start in the workspace (floats) with `splits`
/// slices.
inline int64_t attentionGradStatsOffset(const AttentionGradShape &a,
                                        int64_t splits) {
  return (attentionKvPartialFloats(a, splits) + 63) / 64 * 64;
}

/// The workspace a CUDA plan gives attention_grad (floats): the partials
/// of attentionKvSplits' slices and the statistics, so nothing lives in
/// dq's rows.
inline int64_t attentionGradWorkspaceFloats(const AttentionGradShape &a) {
  return attentionGradStatsOffset(a, attentionKvSplits(a)) +
         2 * a.b * a.hq * a.t;
}

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_ATTENTIONWORKSPACE_H
