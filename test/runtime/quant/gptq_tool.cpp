//===- gptq_tool.cpp - test driver for runtime/quant's GPTQ on .npy files -===//
//
// Test-only: packs given codes, or runs GPTQ on a given weight and Hessian,
// and writes a GPTQ checkpoint plus the dequantized weight, so
// test/e2e/gptq_reference.py can compare them with AutoGPTQ's. Links no
// LLVM, so argv is parsed by hand.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/GptqCheckpoint.h"
#include "runtime/train/AtomicFile.h"
#include "tools/tailor-run/Npy.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace tailor;

namespace {

constexpr const char *kUsage = R"(usage:
  tailor-gptq-tool pack DIR --bits B --group-size G [--act-order]
  tailor-gptq-tool quantize DIR --bits B --group-size G [--act-order]
                   [--asym] [--damp F]

pack: packs DIR/codes.npy (integers [rows, cols], 0 .. 2^B - 1),
  DIR/scales.npy (floats [groups, rows]), DIR/zeros.npy (integers
  [groups, rows], the zero points 1 .. 2^B) and DIR/g_idx.npy (integers
  [cols]).
quantize: runs GPTQ on DIR/weight.npy (floats [rows, cols]) with the
  Hessian DIR/hessian.npy (floats [cols, cols]); --damp is the fraction of
  the mean diagonal added to it (default 0.01).
Both write DIR/tailor/model.safetensors and quantize_config.json (one
module, "layer") and DIR/tailor/dequantized.npy (float32 [rows, cols]).
)";

int fail(const std::string &message) {
  std::fprintf(stderr, "tailor-gptq-tool: error: %s\n", message.c_str());
  return 1;
}

/// `name` in `dir` converted to `dtype`, with `rank` dimensions.
bool readArray(const std::string &dir, const char *name, NpyDType dtype,
               size_t rank, NpyArray &out, std::string &error) {
  std::string path = dir + "/" + name;
  NpyArray raw;
  if (!readNpy(path, raw, error)) {
    return false;
  }
  if (raw.shape.size() != rank) {
    error = path + ": expected " + std::to_string(rank) + " dimensions";
    return false;
  }
  if (!convertNpy(raw, dtype, out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

template <typename T> std::vector<T> valuesOf(const NpyArray &array) {
  std::vector<T> values(array.numElements());
  std::memcpy(values.data(), array.data.data(), array.data.size());
  return values;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || (std::strcmp(argv[1], "pack") != 0 &&
                   std::strcmp(argv[1], "quantize") != 0)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const bool pack = std::strcmp(argv[1], "pack") == 0;
  const std::string dir = argv[2];
  quant::GptqOptions options;
  options.groupSize = 0;
  options.bits = 0;
  for (int i = 3; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg == "--bits" && hasValue) {
      options.bits = std::atoi(argv[++i]);
    } else if (arg == "--group-size" && hasValue) {
      options.groupSize = std::atoi(argv[++i]);
    } else if (arg == "--damp" && hasValue) {
      options.dampPercent = std::strtod(argv[++i], nullptr);
    } else if (arg == "--act-order") {
      options.actOrder = true;
    } else if (arg == "--asym") {
      options.symmetric = false;
    } else {
      return fail("unknown or incomplete option '" + arg + "'");
    }
  }

  std::string error;
  quant::QuantSpec spec;
  spec.scheme = quant::Scheme::GPTQ;
  spec.bits = options.bits;
  spec.groupSize = options.groupSize;
  spec.actOrder = options.actOrder;
  std::vector<uint8_t> storage;
  if (pack) {
    NpyArray codes, scales, zeros, gIdx;
    if (!readArray(dir, "codes.npy", NpyDType::U8, 2, codes, error) ||
        !readArray(dir, "scales.npy", NpyDType::F32, 2, scales, error) ||
        !readArray(dir, "zeros.npy", NpyDType::I32, 2, zeros, error) ||
        !readArray(dir, "g_idx.npy", NpyDType::I32, 1, gIdx, error)) {
      return fail(error);
    }
    spec.rows = codes.shape[0];
    spec.cols = codes.shape[1];
    if (std::string bad = quant::checkGptqSpec(spec); !bad.empty()) {
      return fail(bad);
    }
    if (scales.numElements() != zeros.numElements() ||
        gIdx.numElements() != spec.cols ||
        scales.numElements() != gptqLayout(spec).scales.shape[0] * spec.rows) {
      return fail("scales, zeros or g_idx disagree with codes' shape");
    }
    storage.resize(quant::gptqStorageBytes(spec));
    error =
        quant::packGptq(spec, codes.data.data(), valuesOf<float>(scales).data(),
                        valuesOf<int32_t>(zeros).data(),
                        valuesOf<int32_t>(gIdx).data(), storage.data());
  } else {
    NpyArray weight, hessian;
    if (!readArray(dir, "weight.npy", NpyDType::F32, 2, weight, error) ||
        !readArray(dir, "hessian.npy", NpyDType::F64, 2, hessian, error)) {
      return fail(error);
    }
    spec.rows = weight.shape[0];
    spec.cols = weight.shape[1];
    if (hessian.shape != std::vector<int64_t>{spec.cols, spec.cols}) {
      return fail("hessian.npy must be [cols, cols]");
    }
    if (std::string bad = quant::checkGptqSpec(spec); !bad.empty()) {
      return fail(bad);
    }
    storage.resize(quant::gptqStorageBytes(spec));
    error = quant::gptqQuantize(spec, valuesOf<float>(weight).data(),
                                valuesOf<double>(hessian).data(), options,
                                storage.data());
  }
  if (!error.empty()) {
    return fail(error);
  }

  std::string out = dir + "/tailor";
  NpyArray dequantized = NpyArray::zeros(NpyDType::F32, {spec.rows, spec.cols});
  quant::dequantizeGptqTile(spec, storage.data(), 0, spec.rows, 0, spec.cols,
                            reinterpret_cast<float *>(dequantized.data.data()),
                            spec.cols);
  if (!train::makeDirectories(out, error) ||
      !writeNpy(out + "/dequantized.npy", dequantized, error)) {
    return fail(error);
  }
  error = quant::writeGptqCheckpoint(
      out + "/model.safetensors", {{"layer", spec, storage.data()}}, options);
  return error.empty() ? 0 : fail(error);
}
