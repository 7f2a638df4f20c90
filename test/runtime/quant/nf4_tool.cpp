//===- nf4_tool.cpp - test driver for runtime/quant's NF4 on .npy files ---===//
//
// Test-only: quantizes a .npy weight with tailor_quant and writes every part
// of the result as .npy, so test/e2e/nf4_bitsandbytes.py can compare them
// with bitsandbytes byte for byte. Links no LLVM, so argv is parsed by hand.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Nf4.h"
#include "tools/tailor-run/Npy.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace tailor;

namespace {

constexpr const char *kUsage = R"(usage:
  tailor-nf4-tool quantize IN.npy OUT_DIR [options]
  tailor-nf4-tool maps OUT_DIR

quantize: NF4-quantizes IN.npy (any float dtype, read as float32) and writes
  OUT_DIR/packed.npy         uint8 [ceil(n/2)], element 2j in the high nibble
  OUT_DIR/absmax.npy         uint8 codes [blocks] (double quantization) or
                             float32 scales [blocks]
  OUT_DIR/nested_absmax.npy  float32 [ceil(blocks/256)] (double quantization)
  OUT_DIR/offset.npy         float32 [] (double quantization)
  OUT_DIR/dequantized.npy    float32, IN's shape
options:
  --no-double-quant   keep the block scales in fp32
  --blocksize N       elements per block: 32, 64 (default), ..., 4096
  --sum-lanes N       PyTorch's sum vector width for the offset (default 8)
  --sum-threads N     PyTorch's thread count for the offset (default 1)

maps: writes OUT_DIR/nf4_code.npy (float32 [16]) and OUT_DIR/dynamic_map.npy
  (float32 [256]), the codebooks tailor uses.
)";

int fail(const std::string &message) {
  std::fprintf(stderr, "tailor-nf4-tool: error: %s\n", message.c_str());
  return 1;
}

bool parseInt(const std::string &flag, const char *text, int min, int max,
              int &out, std::string &error) {
  char *end = nullptr;
  errno = 0;
  long value = std::strtol(text, &end, 10);
  if (!*text || *end || errno || value < min || value > max) {
    error = flag + " expects an integer in [" + std::to_string(min) + ", " +
            std::to_string(max) + "], got '" + text + "'";
    return false;
  }
  out = static_cast<int>(value);
  return true;
}

template <typename T>
NpyArray makeArray(NpyDType dtype, std::vector<int64_t> shape,
                   const T *values) {
  NpyArray array = NpyArray::zeros(dtype, std::move(shape));
  if (!array.data.empty()) {
    std::memcpy(array.data.data(), values, array.data.size());
  }
  return array;
}

bool write(const std::filesystem::path &dir, const char *name,
           const NpyArray &array, std::string &error) {
  return writeNpy((dir / name).string(), array, error);
}

int runMaps(int argc, char **argv) {
  if (argc != 3) {
    return fail("maps expects OUT_DIR");
  }
  std::filesystem::path dir = argv[2];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return fail("cannot create " + dir.string() + ": " + ec.message());
  }
  std::string error;
  if (!write(dir, "nf4_code.npy",
             makeArray(NpyDType::F32, {16}, quant::kNf4Codebook.data()),
             error) ||
      !write(dir, "dynamic_map.npy",
             makeArray(NpyDType::F32, {256}, quant::dynamicMap8Bit().data()),
             error)) {
    return fail(error);
  }
  return 0;
}

int runQuantize(int argc, char **argv) {
  std::vector<std::string> positional;
  bool doubleQuant = true;
  int blockSize = 64;
  quant::Nf4MeanOrder order;
  std::string error;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](int &out, int min, int max) {
      if (i + 1 >= argc) {
        error = arg + " expects a value";
        return false;
      }
      return parseInt(arg, argv[++i], min, max, out, error);
    };
    if (arg == "--no-double-quant") {
      doubleQuant = false;
    } else if (arg == "--blocksize") {
      if (!value(blockSize, 1, 1 << 20)) {
        return fail(error);
      }
    } else if (arg == "--sum-lanes") {
      if (!value(order.sumLanes, 1, 64)) {
        return fail(error);
      }
    } else if (arg == "--sum-threads") {
      if (!value(order.sumThreads, 1, 4096)) {
        return fail(error);
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      return fail("unknown option '" + arg + "'");
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2) {
    return fail("quantize expects IN.npy and OUT_DIR");
  }

  NpyArray input, weights;
  if (!readNpy(positional[0], input, error)) {
    return fail(error);
  }
  if (input.dtype != NpyDType::F32 && input.dtype != NpyDType::F64 &&
      input.dtype != NpyDType::F16) {
    return fail(positional[0] + ": expected a float array, got " +
                npyDTypeName(input.dtype));
  }
  if (!convertNpy(input, NpyDType::F32, weights, error)) {
    return fail(positional[0] + ": " + error);
  }
  const int64_t numel = weights.numElements();
  if (std::string bad = quant::checkNf4Params(numel, blockSize, 256);
      !bad.empty()) {
    return fail(positional[0] + ": " + bad);
  }

  std::vector<float> w(numel);
  std::memcpy(w.data(), weights.data.data(), numel * sizeof(float));
  quant::Nf4Quantized q =
      quant::quantizeNf4(w.data(), numel, blockSize, doubleQuant, 256, order);
  std::vector<float> dequantized(numel);
  quant::dequantizeNf4(q, dequantized.data());

  std::filesystem::path dir = positional[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return fail("cannot create " + dir.string() + ": " + ec.message());
  }
  const int64_t blocks = q.numBlocks();
  bool ok =
      write(dir, "packed.npy",
            makeArray(NpyDType::U8, {static_cast<int64_t>(q.packed.size())},
                      q.packed.data()),
            error) &&
      write(dir, "dequantized.npy",
            makeArray(NpyDType::F32, weights.shape, dequantized.data()), error);
  if (ok && doubleQuant) {
    ok =
        write(dir, "absmax.npy",
              makeArray(NpyDType::U8, {blocks}, q.absmaxCodes.data()), error) &&
        write(dir, "nested_absmax.npy",
              makeArray(NpyDType::F32,
                        {static_cast<int64_t>(q.nestedAbsmax.size())},
                        q.nestedAbsmax.data()),
              error) &&
        write(dir, "offset.npy", makeArray(NpyDType::F32, {}, &q.offset),
              error);
  } else if (ok) {
    ok = write(dir, "absmax.npy",
               makeArray(NpyDType::F32, {blocks}, q.absmax.data()), error);
    std::filesystem::remove(dir / "nested_absmax.npy", ec);
    std::filesystem::remove(dir / "offset.npy", ec);
  }
  if (!ok) {
    return fail(error);
  }
  const uint64_t bytes = quant::nf4StorageBytes(numel, doubleQuant, blockSize);
  std::printf("%lld elements, %lld blocks of %d, %llu bytes (%.4f bits per "
              "weight)%s\n",
              static_cast<long long>(numel), static_cast<long long>(blocks),
              blockSize, static_cast<unsigned long long>(bytes),
              8.0 * static_cast<double>(bytes) / static_cast<double>(numel),
              doubleQuant ? ", double-quantized" : "");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  if (argc >= 2 && !std::strcmp(argv[1], "quantize")) {
    return runQuantize(argc, argv);
  }
  if (argc >= 2 && !std::strcmp(argv[1], "maps")) {
    return runMaps(argc, argv);
  }
  std::fputs(kUsage, stderr);
  return 2;
}
