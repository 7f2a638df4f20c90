//===- HalfMmaSm75Test.cpp - the sm_75 paths of tl::mmaHalf and packHalf --===//
//
// tl::mmaHalf on sm_75 (the T4) is two m16n8k8 mmas over the halves of the
// m16n8k16 fragments, and tl::packHalf converts one value at a time: code
// no GPU runs until tailor meets a T4. HalfMmaSm75Kernels.cu is built as
// compute_75 PTX only (module half_mma_sm75), so on any GPU
// (TAILOR_TEST_BACKEND=cuda) the driver compiles exactly those paths, and
// these tests check them: the product against an exact one, and the
// conversions bit for bit against tl::floatToHalf (runtime/cpu's rounding).
// On the emulator they check the emulator's mmaHalf and packHalf instead.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/cuda/HalfMmaSm75Kernels.cu"

#include "test/runtime/cuda/CudaTestUtil.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace tailor::runtime::cuda::testing {
namespace {

/// Device copies of `host`, freed with the backend.
template <typename T>
void *uploaded(TestBackend &backend, const std::vector<T> &host) {
  void *device = backend.allocate(host.size() * sizeof(T));
  backend.upload(device, host.data(), host.size() * sizeof(T));
  return device;
}

/// A linear congruential generator for the tests' values.
struct Lcg {
  uint32_t state;
  uint32_t next() { return state = state * 1664525u + 1013904223u; }
};

// Tests D = A B + C against the exact product: half values of 11
// significant bits, so a wrong fragment half or a k8 step applied to the
// wrong registers changes the sums, and, on a GPU, that the code ran was
// built for sm_75.
TEST_F(CudaKernelTest, MmaHalfSm75) {
  Lcg random{7};
  std::vector<tl::u16> a(256), b(128);
  std::vector<float> c(128), d(128, -1.0f);
  for (tl::u16 &x : a) {
    x = tl::floatToHalf(float(int(random.next() >> 8) % 4001 - 2000) / 1024);
  }
  for (tl::u16 &x : b) {
    x = tl::floatToHalf(float(int(random.next() >> 8) % 4001 - 2000) / 1024);
  }
  for (int i = 0; i < 128; ++i) {
    c[i] = float(i % 17) - 8.0f;
  }
  void *pa = uploaded(*backend, a), *pb = uploaded(*backend, b),
       *pc = uploaded(*backend, c), *pd = uploaded(*backend, d);
  void *parch = uploaded(*backend, std::vector<int>{-1});
  void *args[] = {&pa, &pb, &pc, &pd, &parch};
  ASSERT_EQ(backend->context().launch("tailor_test_mma_half_sm75", {1}, {32},
                                      0, args),
            "");
  ASSERT_EQ(backend->synchronize(), "");
  int arch = -1;
  backend->download(d.data(), pd, d.size() * sizeof(float));
  backend->download(&arch, parch, sizeof(int));
  EXPECT_EQ(arch, std::string(backend->name()) == "cuda" ? 750 : 0);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      double sum = c[i * 8 + j];
      for (int k = 0; k < 16; ++k) {
        sum += double(tl::halfToFloat(a[i * 16 + k])) *
               double(tl::halfToFloat(b[k * 8 + j]));
      }
      EXPECT_NEAR(d[i * 8 + j], sum, 1e-4 * (1 + std::fabs(sum)))
          << i << ", " << j;
    }
  }
}

// Tests packHalf against floatToHalf, bit for bit, on 2^18 floats of
// random bits (every exponent: overflow to inf, subnormals, zeros) and the
// rounding edges; a NaN must stay a NaN (its payload may differ).
TEST_F(CudaKernelTest, PackHalfSm75) {
  Lcg random{11};
  const int n = 1 << 17;
  std::vector<float> in(2 * n);
  for (float &x : in) {
    uint32_t bits = random.next();
    std::memcpy(&x, &bits, sizeof(x));
  }
  const float edges[] = {65504.0f, 65519.0f, 65520.0f, -65520.0f,
                         1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                         5.9604644775390625e-8f, 2.9802322387695312e-8f,
                         6.103515625e-5f, -0.0f};
  std::memcpy(in.data(), edges, sizeof(edges));
  std::vector<tl::u32> out(n);
  void *pin = uploaded(*backend, in), *pout = uploaded(*backend, out);
  int count = n;
  void *args[] = {&pin, &pout, &count};
  ASSERT_EQ(backend->context().launch("tailor_test_pack_half_sm75", {256},
                                      {256}, 0, args),
            "");
  ASSERT_EQ(backend->synchronize(), "");
  backend->download(out.data(), pout, out.size() * sizeof(tl::u32));
  int mismatches = 0;
  for (int i = 0; i < 2 * n; ++i) {
    tl::u16 got = tl::u16(out[i / 2] >> (16 * (i % 2)));
    tl::u16 want = tl::floatToHalf(in[i]);
    bool same = std::isnan(in[i]) ? std::isnan(tl::halfToFloat(got))
                                  : got == want;
    if (!same && ++mismatches <= 5) {
      ADD_FAILURE() << "packHalf(" << in[i] << ") gave 0x" << std::hex << got
                    << ", floatToHalf 0x" << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

} // namespace
} // namespace tailor::runtime::cuda::testing
