//===- replay_main.cpp - run a libFuzzer target over files, without libFuzzer -===//
//
// `tailor-files-replay FILE...` hands each file to the fuzz target
// (user_files_fuzzer.cpp) once, so `make test` replays the seeds and past
// crash inputs of test/fuzz/files-corpus in the ordinary build: a finding
// that was fixed stays fixed.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "tailor-files-replay: cannot read %s\n", argv[i]);
      return 1;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                               std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("replayed %d inputs\n", argc - 1);
  return 0;
}
