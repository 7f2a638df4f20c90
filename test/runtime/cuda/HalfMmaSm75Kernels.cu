//===- HalfMmaSm75Kernels.cu - tl::mmaHalf and packHalf as sm_75 runs them ===//
//
// Test kernels that nvcc builds for compute_75 alone (the module
// half_mma_sm75: PTX that the driver compiles for whatever GPU runs the
// test), so Device.cuh's sm_75 paths -- two m16n8k8 mmas per tl::mmaHalf,
// one cvt.rn.f16.f32 per value in tl::packHalf -- run on the GPUs tailor
// is tested on before any T4 runs them. HalfMmaSm75Test.cpp includes this
// file too, for the emulator.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"

/// One warp: D (16 x 8) = A (16 x 16) B (16 x 8) + C, all row-major, A and
/// B as half bits, loaded into the fragments as Device.cuh documents them;
/// `arch` gets the __CUDA_ARCH__ the code was built for (0 on the host).
TL_GLOBAL void tailor_test_mma_half_sm75(const tl::u16 *A, const tl::u16 *B,
                                         const float *C, float *D, int *arch) {
  int lane = threadIdx.x % tl::kWarpSize;
  int g = lane / 4, t = lane % 4;
  tl::u32 a[4], b[2];
  for (int r = 0; r < 4; ++r) {
    int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
    a[r] = tl::u32(A[row * 16 + col]) | (tl::u32(A[row * 16 + col + 1]) << 16);
  }
  for (int r = 0; r < 2; ++r) {
    int k = 2 * t + 8 * r;
    b[r] = tl::u32(B[k * 8 + g]) | (tl::u32(B[(k + 1) * 8 + g]) << 16);
  }
  float c[4];
  for (int e = 0; e < 4; ++e) {
    c[e] = C[(g + 8 * (e >> 1)) * 8 + 2 * t + (e & 1)];
  }
  tl::mmaHalf(c, a, b);
  for (int e = 0; e < 4; ++e) {
    D[(g + 8 * (e >> 1)) * 8 + 2 * t + (e & 1)] = c[e];
  }
  if (lane == 0) {
#ifdef __CUDA_ARCH__
    *arch = __CUDA_ARCH__;
#else
    *arch = 0;
#endif
  }
}
TL_REGISTER(tailor_test_mma_half_sm75)

/// out[i] = packHalf(in[2 i], in[2 i + 1]) for i < n (a grid-stride loop).
TL_GLOBAL void tailor_test_pack_half_sm75(const float *in, tl::u32 *out,
                                          int n) {
  for (tl::i64 i = tl::globalThread(); i < n; i += tl::gridThreads()) {
    out[i] = tl::packHalf(in[2 * i], in[2 * i + 1]);
  }
}
TL_REGISTER(tailor_test_pack_half_sm75)
