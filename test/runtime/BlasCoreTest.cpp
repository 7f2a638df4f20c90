//===- BlasCoreTest.cpp - OpenBLAS runs the kernels the CPU can run ------===//
//
// OpenBLAS 0.3.21 gives a CPU it does not know (Emerald Rapids, family 6
// model 207) its SSE3 Prescott kernels; ensureBlasCoreMatchesCpu must leave
// the GEMMs on kernels as wide as the CPU's vector units, and keep the
// numbers a GEMM computes.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/BlasCore.h"

#include <gtest/gtest.h>

#include <cblas.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

extern "C" char *openblas_get_corename(void);

namespace tailor::runtime {
namespace {

TEST(BlasCoreTest, ReportsTheKernelsInUseOnce) {
  const BlasCoreReport &first = ensureBlasCoreMatchesCpu();
  const BlasCoreReport &second = ensureBlasCoreMatchesCpu();
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(first.core, std::string(openblas_get_corename()));
  EXPECT_EQ(first.library.rfind("OpenBLAS ", 0), 0u) << first.library;
  EXPECT_FALSE(first.reason.empty());
}

TEST(BlasCoreTest, KernelsAreAsWideAsTheCpu) {
  const BlasCoreReport &report = ensureBlasCoreMatchesCpu();
  const std::set<std::string> avx512 = {"SkylakeX", "Cooperlake",
                                        "SapphireRapids"};
  const std::set<std::string> avx2 = {"Haswell", "Zen", "Excavator"};
  if (std::getenv("OPENBLAS_CORETYPE")) {
    // The user's choice is kept; one narrower than the CPU is named so.
    bool narrower = report.cpuVectors.rfind("AVX-512", 0) == 0 &&
                    avx2.count(report.core);
    EXPECT_EQ(report.reason.find("narrower than this CPU's") !=
                  std::string::npos,
              narrower)
        << report.reason;
    GTEST_SKIP() << "OPENBLAS_CORETYPE chooses the kernels: " << report.core
                 << " (" << report.reason << ")";
  }
  if (report.cpuVectors.rfind("AVX-512", 0) == 0) {
    EXPECT_TRUE(avx512.count(report.core))
        << report.core << " on a CPU with " << report.cpuVectors << ": "
        << report.reason;
  } else if (report.cpuVectors == "AVX2") {
    EXPECT_TRUE(avx512.count(report.core) || avx2.count(report.core))
        << report.core << ": " << report.reason;
  }
}

/// C = A B for small-integer A and B, which every kernel computes exactly
/// in f32; the first wrong element, or "" when all match.
std::string checkExactGemm(int m, int n, int k) {
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (int i = 0; i < m * k; ++i) {
    a[i] = static_cast<float>(i % 7 - 3);
  }
  for (int i = 0; i < k * n; ++i) {
    b[i] = static_cast<float>(i % 5 - 2);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
              a.data(), k, b.data(), n, 0.0f, c.data(), n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float expected = 0;
      for (int l = 0; l < k; ++l) {
        expected += a[i * k + l] * b[l * n + j];
      }
      if (c[i * n + j] != expected) {
        return std::to_string(i) + "," + std::to_string(j);
      }
    }
  }
  return "";
}

TEST(BlasCoreTest, GemmAfterTheChoiceIsExact) {
  ensureBlasCoreMatchesCpu();
  EXPECT_EQ(checkExactGemm(37, 29, 53), "");
}

TEST(BlasCoreTest, ThreadedGemmAfterTheChoiceIsExact) {
  // The re-selection joins OpenBLAS's workers; a GEMM large enough to be
  // split must start them again and still add up.
  ensureBlasCoreMatchesCpu();
  openblas_set_num_threads(2);
  EXPECT_EQ(checkExactGemm(384, 320, 448), "");
  EXPECT_EQ(openblas_get_num_threads(), 2);
}

} // namespace
} // namespace tailor::runtime
