//===- user_files_fuzzer.cpp - libFuzzer target for the files users write -===//
//
// The first byte picks what the rest is handed to, as a file a user gives
// tailor: a training recipe (YAML, `--recipe`), a hardware or cluster file
// (YAML, `--hardware FILE`), a safetensors file (adapters, checkpoints,
// `--init-adapter`), or a tokenizer.json (`tailor generate --tokenizer`),
// which then encodes and decodes a fixed text. Each must answer with an
// error or a result, never a crash. The readers take paths, so the input
// is written to a file in the fuzzer's temporary directory first.
//
//===----------------------------------------------------------------------===//

#include "compiler/Hardware.h"
#include "compiler/Recipe.h"
#include "runtime/generate/Tokenizer.h"
#include "runtime/train/Safetensors.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/// `data` written to a per-process file ending in `suffix`; "" on failure.
std::string writeInput(const uint8_t *data, size_t size, const char *suffix) {
  std::string path = "/tmp/tailor-fuzz-" + std::to_string(::getpid()) + suffix;
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file) {
    return "";
  }
  bool ok = std::fwrite(data, 1, size, file) == size;
  ok = std::fclose(file) == 0 && ok;
  return ok ? path : "";
}

void fuzzRecipe(const uint8_t *data, size_t size) {
  std::string path = writeInput(data, size, ".yaml");
  if (path.empty()) {
    return;
  }
  // With an override too, so both readers of values run.
  llvm::Expected<tailor::TrainingRecipe> recipe =
      tailor::loadRecipe(path, {"learning_rate=1e-4"});
  if (!recipe) {
    llvm::consumeError(recipe.takeError());
  }
  std::remove(path.c_str());
}

void fuzzHardware(const uint8_t *data, size_t size) {
  std::string path = writeInput(data, size, ".hw.yaml");
  if (path.empty()) {
    return;
  }
  llvm::Expected<tailor::HardwareSpec> hardware = tailor::resolveHardware(path);
  if (!hardware) {
    llvm::consumeError(hardware.takeError());
  }
  std::remove(path.c_str());
}

void fuzzSafetensors(const uint8_t *data, size_t size) {
  std::string error;
  auto file = tailor::train::SafetensorsFile::fromMemory(data, size, "<fuzz>",
                                                         error);
  if (!file) {
    return;
  }
  // Read every tensor that converts, as binding an adapter does.
  for (const auto &[name, tensor] : file->tensors()) {
    uint64_t elements = 1;
    for (int64_t dim : tensor.shape) {
      elements *= static_cast<uint64_t>(dim);
    }
    if (elements > (1u << 20)) {
      continue;
    }
    std::vector<float> values(elements);
    (void)tailor::train::convertToF32(tensor, values.data());
  }
}

void fuzzTokenizer(const uint8_t *data, size_t size) {
  std::string path = writeInput(data, size, "-tokenizer.json");
  if (path.empty()) {
    return;
  }
  std::string error;
  auto tokenizer = tailor::generate::Tokenizer::open(path, error);
  std::remove(path.c_str());
  if (!tokenizer) {
    return;
  }
  std::vector<int64_t> ids;
  if (tokenizer->encode("Hello, wörld! 1234 <s> \xF0\x9F\x98\x80", ids,
                        error)) {
    std::string text;
    (void)tokenizer->decode(ids, /*skipSpecial=*/false, text, error);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const uint8_t *rest = data + 1;
  size_t restSize = size - 1;
  switch (data[0] % 4) {
  case 0: fuzzRecipe(rest, restSize); break;
  case 1: fuzzHardware(rest, restSize); break;
  case 2: fuzzSafetensors(rest, restSize); break;
  default: fuzzTokenizer(rest, restSize); break;
  }
  return 0;
}
