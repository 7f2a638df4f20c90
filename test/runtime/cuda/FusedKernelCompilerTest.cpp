//===- FusedKernelCompilerTest.cpp - fused kernels through NVRTC ---------===//
//
// What `tailor compile` does for a plan's fused_elementwise launches, short
// of a GPU: the kernel source FusedKernelSource.cpp writes (one line per
// instruction, constants that read back exactly, the documented parameter
// order), and NVRTC compiling the FusedKernelCorpus.h kernels as one
// translation unit to a cubin for sm_90a and PTX for compute_80 whose
// symbol tables (read back by runtime/cuda/DeviceImage.cpp) hold every
// generated entry point. Compile errors come back with NVRTC's log.
//
//===----------------------------------------------------------------------===//

#include "codegen/FusedKernelCompiler.h"
#include "codegen/FusedKernelSource.h"
#include "runtime/cuda/DeviceImage.h"
#include "test/runtime/cuda/FusedKernelCorpus.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tailor::codegen {
namespace {

using runtime::fused::InputKind;

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    n *= d;
  }
  return n;
}

std::vector<FusedKernelRequest> corpusRequests() {
  std::vector<FusedKernelRequest> requests;
  for (const auto &c : runtime::cuda::testing::fusedCorpus()) {
    std::vector<int64_t> numels;
    for (const auto &shape : c.inputShapes) {
      numels.push_back(numelOf(shape));
    }
    requests.push_back({c.program, c.outputs,
                        fusedInputKinds(numels, numelOf(c.outputShape))});
  }
  return requests;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(FusedKernelSource, WritesOneLinePerInstruction) {
  FusedKernelRequest request{"silu(x0);mul(t0,x1);add(t1,-0.5);div(t2,7)",
                             {1, 3},
                             {InputKind::Full, InputKind::Repeating}};
  std::string source;
  ASSERT_EQ(fusedTranslationUnit({request}, source), "");
  std::string name =
      runtime::fused::fusedFunctionName(request.text, request.outputs,
                                          request.kinds);
  EXPECT_TRUE(
      contains(source, "#include \"codegen/cuda/ElementwiseMath.cuh\""));
  EXPECT_TRUE(contains(source, "TL_GLOBAL void " + name +
                                   "(const float *x0, const float *x1, "
                                   "float *y0, float *y1, long long p1, "
                                   "long long n) {"))
      << source;
  EXPECT_TRUE(contains(source, "const float a1 = tl::load(x1, r1);"));
  EXPECT_TRUE(contains(source, "const float t0 = tl::math::silu(a0);"));
  EXPECT_TRUE(contains(source, "const float t1 = tl::math::mul(t0, a1);"));
  EXPECT_TRUE(contains(source, "const float t2 = tl::math::add(t1, (-0.5f));"));
  EXPECT_TRUE(contains(source, "const float t3 = tl::math::div(t2, 7.0f);"));
  EXPECT_TRUE(contains(source, "tl::store(y0, i, t1);"));
  EXPECT_TRUE(contains(source, "tl::store(y1, i, t3);"));
  EXPECT_TRUE(contains(source, "TL_REGISTER(" + name + ")"));
}

TEST(FusedKernelSource, MovesPacksOfFourWhenEveryInputIsFull) {
  FusedKernelRequest full{"silu(x0);mul(t0,x1)",
                          {1},
                          {InputKind::Full, InputKind::Full}};
  std::string source;
  ASSERT_EQ(fusedTranslationUnit({full}, source), "");
  EXPECT_TRUE(contains(source, "if (tl::fused::aligned16(x0) && "
                               "tl::fused::aligned16(x1) && "
                               "tl::fused::aligned16(y0)) {"))
      << source;
  EXPECT_TRUE(contains(source, "const tl::fused::Pack4 v1 = "
                               "tl::fused::loadPack(x1, j);"));
  EXPECT_TRUE(contains(source, "w0.v[l] = t1;"));
  EXPECT_TRUE(contains(source, "tl::fused::storePack(y0, j, w0);"));
  // A Repeating input: the scalar loop alone.
  FusedKernelRequest bias{"silu(x0);mul(t0,x1)",
                          {1},
                          {InputKind::Full, InputKind::Repeating}};
  ASSERT_EQ(fusedTranslationUnit({bias}, source), "");
  EXPECT_FALSE(contains(source, "loadPack")) << source;
}

TEST(FusedKernelSource, WritesConstantsThatReadBackExactly) {
  // 0.1f needs nine digits; an infinity goes by its bits.
  FusedKernelRequest request{"mul(x0,0.1);add(t0,inf)", {1}, {InputKind::Full}};
  std::string source;
  ASSERT_EQ(fusedTranslationUnit({request}, source), "");
  EXPECT_TRUE(contains(source, "tl::math::mul(a0, 0.100000001f)")) << source;
  EXPECT_TRUE(contains(source, "tl::math::add(t0, tl::bitsFloat(0x7f800000u))"))
      << source;
}

TEST(FusedKernelSource, WritesEachKernelOnceAndTellsOutputsApart) {
  FusedKernelRequest a{"exp(x0);neg(t0)", {1}, {InputKind::Full}};
  std::string source;
  ASSERT_EQ(fusedTranslationUnit({a, a}, source), "");
  EXPECT_EQ(source.find("TL_GLOBAL"), source.rfind("TL_GLOBAL"));
  // One program writing other outputs is another kernel, named apart.
  FusedKernelRequest b{"exp(x0);neg(t0)", {0, 1}, {InputKind::Full}};
  ASSERT_EQ(fusedTranslationUnit({a, b}, source), "");
  EXPECT_NE(source.find("TL_GLOBAL"), source.rfind("TL_GLOBAL"));
  EXPECT_NE(runtime::fused::fusedFunctionName(a.text, a.outputs, a.kinds),
            runtime::fused::fusedFunctionName(b.text, b.outputs, b.kinds));
  FusedKernelRequest bad{"exp(x1)", {0}, {InputKind::Full}};
  EXPECT_EQ(fusedTranslationUnit({bad}, source),
            "fused program 'exp(x1)': program clause 0 'exp(x1)' argument "
            "'x1' names no input (the launch has 1)");
}

TEST(FusedKernelCompiler, CompilesTheCorpusToCubinAndPtx) {
  std::vector<FusedKernelRequest> requests = corpusRequests();
  std::string source;
  ASSERT_EQ(fusedTranslationUnit(requests, source), "");
  FusedDeviceCode code;
  std::string problem = compileFusedKernels(source, "sm_90a", code);
  if (!fusedKernelCompilerAvailable()) {
    EXPECT_NE(problem.find("built without the CUDA toolkit"), std::string::npos)
        << problem;
    GTEST_SKIP() << problem;
  }
  ASSERT_EQ(problem, "");
  runtime::cuda::DeviceImageInfo cubin, ptx;
  ASSERT_EQ(
      runtime::cuda::readCubin(code.cubin.data(), code.cubin.size(), cubin),
      "");
  ASSERT_EQ(
      runtime::cuda::readPtx(reinterpret_cast<const uint8_t *>(code.ptx.data()),
                             code.ptx.size(), ptx),
      "");
  EXPECT_EQ(code.cubinArch, "sm_90a");
  EXPECT_EQ(code.ptxArch, "compute_80");
  EXPECT_EQ(cubin.sm, 90);
  EXPECT_EQ(ptx.sm, 80);
  for (const FusedKernelRequest &request : requests) {
    std::string name =
        runtime::fused::fusedFunctionName(request.text, request.outputs,
                                          request.kinds);
    SCOPED_TRACE(request.text);
    EXPECT_TRUE(std::binary_search(cubin.functions.begin(),
                                   cubin.functions.end(), name));
    EXPECT_TRUE(
        std::binary_search(ptx.functions.begin(), ptx.functions.end(), name));
  }
}

TEST(FusedKernelCompiler, ReportsCompileErrorsWithTheLog) {
  if (!fusedKernelCompilerAvailable()) {
    GTEST_SKIP() << "this tailor has no NVRTC";
  }
  FusedDeviceCode code;
  std::string problem =
      compileFusedKernels("#include \"codegen/cuda/Device.cuh\"\nTL_GLOBAL "
                          "void k() { undeclared(); }\n",
                          "sm_80", code);
  EXPECT_NE(problem.find("NVRTC cannot compile the fused kernels for sm_80"),
            std::string::npos)
      << problem;
  EXPECT_NE(problem.find("undeclared"), std::string::npos) << problem;
  EXPECT_NE(compileFusedKernels("", "compute_80", code)
                .find("not a GPU "
                      "architecture"),
            std::string::npos);
}

} // namespace
} // namespace tailor::codegen
