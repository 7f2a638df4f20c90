//===- FusedKernelsGenerate.cpp - writes the fused test kernels -----------===//
//
// Run when the tests are built: `FusedKernelsGenerate OUT.cu` writes one
// translation unit with the generated kernel of every FusedKernelCorpus.h
// case (codegen/FusedKernelSource.cpp, as `tailor compile` writes them for
// NVRTC). Exits 1 with the problem on stderr if a case does not generate.
//
//===----------------------------------------------------------------------===//

#include "codegen/FusedKernelSource.h"
#include "test/runtime/cuda/FusedKernelCorpus.h"

#include <cstdio>
#include <fstream>

using namespace tailor;

namespace {

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    n *= d;
  }
  return n;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: FusedKernelsGenerate OUT.cu\n");
    return 1;
  }
  std::vector<codegen::FusedKernelRequest> requests;
  for (const auto &c : runtime::cuda::testing::fusedCorpus()) {
    std::vector<int64_t> numels;
    for (const auto &shape : c.inputShapes) {
      numels.push_back(numelOf(shape));
    }
    requests.push_back(
        {c.program, c.outputs,
         codegen::fusedInputKinds(numels, numelOf(c.outputShape))});
  }
  std::string source;
  if (std::string problem = codegen::fusedTranslationUnit(requests, source);
      !problem.empty()) {
    std::fprintf(stderr, "FusedKernelsGenerate: %s\n", problem.c_str());
    return 1;
  }
  std::ofstream out(argv[1], std::ios::binary);
  out << source;
  out.close();
  if (!out) {
    std::fprintf(stderr, "FusedKernelsGenerate: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
