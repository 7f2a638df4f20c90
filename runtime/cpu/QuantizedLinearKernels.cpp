//===- QuantizedLinearKernels.cpp - linear layers on quantized weights ----===//
//
// `linear_quantized`: y = x W^T (+ bias), or y = x W with transpose_weight
// (the input gradient dx = dy W of the backward pass), where W[rows, cols]
// is a frozen weight in one of runtime/quant's storages (QuantizedWeight.h).
//
// Layout: x [..., K] and y [..., N] row-major f32, flattened to [M, K] and
// [M, N]; w a u8 byte range read only through quant::dequantizeTile. The
// weight is never dequantized whole. A task owns a run of output columns
// y[:, n0:n1] and walks the contraction in fixed chunks, in order: it
// dequantizes W[n0:n1, k0:k1] (or W[k0:k1, n0:n1] for y = x W) into its
// worker's slice of the workspace and accumulates x[:, k0:k1] times that
// tile into y[:, n0:n1] with sgemm (beta 1 after the first chunk, or from
// the start over a bias copied into y). Tiles are at most 512 output
// columns by 256 deep (quant::linearTiling, which linearWorkspaceFloats
// sizes): sgemm repacks the x panel of every call, so x is packed once per
// output tile and y's tile rewritten once per chunk, and 512 KiB of tile
// stays in L2 between dequantizing it and sgemm packing it.
//
// Precision: the dequantized weight is exactly quant's floats; products
// and sums are the BLAS's f32 (FMA) GEMM, as `linear`, with the sum over K
// split at the chunk boundaries. Tile shapes depend on the spec alone and
// each output element belongs to one task, so the bits do not depend on
// the thread count.
//
// Threading: tasks run on the session's pool with the BLAS held to one
// thread (ScopedBlasThreads), so dequantization is spread over the cores
// with the GEMMs and no serial step remains. Dequantizing each tile on the
// calling thread (or on the pool) and running its GEMM on two BLAS threads
// measured 5-20% slower on the 2-core Xeon this was tuned on (nf4, M = 256
// to 2048, K = N = 2048 and 4096; e.g. 23 ms against 26 ms at M = 512,
// K = N = 2048, where the dense `linear` takes 21.7 ms).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/quant/QuantizedWeight.h"

#include <cblas.h>

#include <climits>
#include <cstring>

namespace tailor::runtime::cpu {

void addQuantizedLinearKernels(std::vector<KernelDef> &table);

/// A launch's weight and direction, decoded from its attributes (the
/// names of runtime/cpu/README.md; absent ones take QuantSpec's defaults).
/// `double_quant` and `act_order` are flags: any nonzero int is true.
std::string decodeQuantizedLaunch(const KernelCall &call,
                                  quant::QuantSpec &spec,
                                  bool &transposeWeight) {
  spec = quant::QuantSpec();
  const Attribute *scheme = call.attributes.find("scheme");
  if (!scheme || scheme->kind != Attribute::Kind::String) {
    return "missing string attribute 'scheme'";
  }
  if (!quant::parseScheme(scheme->s, spec.scheme)) {
    return "attribute 'scheme' is '" + scheme->s +
           "', expected nf4, int8, gptq, bf16 or fp16";
  }
  int64_t value = 0;
  auto field = [&](const char *name, bool required, int64_t lo, int64_t hi,
                   int64_t fallback) {
    return expectIntAttr(call, name, lo, hi, required, fallback, value);
  };
  auto asInt = [&] { return static_cast<int>(value); };
  if (auto e = field("rows", true, 1, INT64_MAX, 0); !e.empty()) {
    return e;
  }
  spec.rows = value;
  if (auto e = field("cols", true, 1, INT64_MAX, 0); !e.empty()) {
    return e;
  }
  spec.cols = value;
  if (auto e = field("block_size", false, 1, INT_MAX, spec.blockSize);
      !e.empty()) {
    return e;
  }
  spec.blockSize = asInt();
  if (auto e = field("double_quant", false, -1, 1, spec.doubleQuant);
      !e.empty()) {
    return e;
  }
  spec.doubleQuant = value != 0;
  if (auto e = field("nested_block_size", false, 1, INT_MAX,
                     spec.nestedBlockSize);
      !e.empty()) {
    return e;
  }
  spec.nestedBlockSize = asInt();
  if (auto e = field("bits", false, 1, 32, spec.bits); !e.empty()) {
    return e;
  }
  spec.bits = asInt();
  if (auto e = field("group_size", false, -1, INT_MAX, spec.groupSize);
      !e.empty()) {
    return e;
  }
  spec.groupSize = asInt();
  if (auto e = field("act_order", false, -1, 1, spec.actOrder); !e.empty()) {
    return e;
  }
  spec.actOrder = value != 0;
  double threshold = 0;
  if (auto e = expectFloatAttr(call, "outlier_threshold", false, 0, threshold);
      !e.empty()) {
    return e;
  }
  spec.outlierThreshold = static_cast<float>(threshold);
  if (auto e = field("outlier_columns", false, 0, INT64_MAX, 0); !e.empty()) {
    return e;
  }
  spec.outlierColumns = value;
  if (auto e = field("transpose_weight", false, 0, 1, 0); !e.empty()) {
    return e;
  }
  transposeWeight = value != 0;
  if (std::string problem = quant::checkSpec(spec); !problem.empty()) {
    return "weight: " + problem;
  }
  return "";
}

namespace {

using quant::QuantSpec;


/// Worker threads the kernel may use: the pool's, or 1 without a pool.
int64_t workersOf(const KernelCall &call) {
  return call.pool ? call.pool->size() : 1;
}

std::string checkLinearQuantized(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4, 5); !e.empty()) {
    return e;
  }
  QuantSpec spec;
  bool transposeWeight = false;
  if (auto e = decodeQuantizedLaunch(call, spec, transposeWeight); !e.empty()) {
    return e;
  }
  const size_t count = call.operands.size();
  const size_t out = count - 2, workspace = count - 1;
  for (size_t i = 0; i < count; ++i) {
    if (auto e = expectDType(call, i, i == 1 ? DType::U8 : DType::F32);
        !e.empty()) {
      return e;
    }
  }
  if (auto e = firstError({expectMinRank(call, 0, 1), expectRank(call, 1, 1),
                           expectRank(call, workspace, 1)});
      !e.empty()) {
    return e;
  }
  const Tensor &x = call.operands[0], &w = call.operands[1];
  const int64_t k = transposeWeight ? spec.rows : spec.cols;
  const int64_t n = transposeWeight ? spec.cols : spec.rows;
  if (x.shape.back() != k) {
    return "input " + shapeString(x.shape) + " does not match the [" +
           std::to_string(spec.rows) + ", " + std::to_string(spec.cols) +
           "] weight: expected last extent " + std::to_string(k) +
           (transposeWeight ? " (rows; transpose_weight = 1)" : " (cols)");
  }
  const uint64_t bytes = quant::storageBytes(spec);
  if (static_cast<uint64_t>(w.shape[0]) != bytes) {
    return "weight storage has " + std::to_string(w.shape[0]) +
           " bytes, expected " + std::to_string(bytes) + " for a " +
           quant::schemeName(spec.scheme) + " [" + std::to_string(spec.rows) +
           ", " + std::to_string(spec.cols) + "] weight";
  }
  int64_t addend = 0;
  if (auto e = expectGemmEpilogue(call, count == 5, addend); !e.empty()) {
    return e;
  }
  std::vector<int64_t> outShape = x.shape;
  outShape.back() = n;
  if (count == 5) {
    // A bias [N], or with `addend` a tensor of y's shape.
    if (auto e = expectShape(call, 2,
                             addend ? outShape : std::vector<int64_t>{n});
        !e.empty()) {
      return e;
    }
  }
  if (auto e = expectShape(call, out, outShape); !e.empty()) {
    return e;
  }
  const int64_t workers = workersOf(call);
  const int64_t need =
      quant::linearWorkspaceFloats(spec, transposeWeight, workers);
  if (call.operands[workspace].numel() < need) {
    return "workspace has " + std::to_string(call.operands[workspace].numel()) +
           " floats, expected at least " + std::to_string(need) + " (" +
           std::to_string(workers) + " workers)";
  }
  return "";
}

/// y[:, c0:c1] = addend[:, c0:c1] (both [m, n]; the same buffer is left
/// as it is).
void seedAddend(float *y, const float *addend, int64_t m, int64_t n,
                int64_t c0, int64_t c1) {
  if (addend == y) {
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    std::memcpy(y + i * n + c0, addend + i * n + c0, (c1 - c0) * sizeof(float));
  }
}

/// y[:, c0:c1] = bias[c0:c1] for each of the m rows (row stride n).
void seedBias(float *y, const float *bias, int64_t m, int64_t n, int64_t c0,
              int64_t c1) {
  for (int64_t i = 0; i < m; ++i) {
    std::memcpy(y + i * n + c0, bias + c0, (c1 - c0) * sizeof(float));
  }
}

std::string runLinearQuantized(const KernelCall &call) {
  QuantSpec spec;
  bool transposeWeight = false;
  if (auto e = decodeQuantizedLaunch(call, spec, transposeWeight); !e.empty()) {
    return e;
  }
  const size_t count = call.operands.size();
  const Tensor &x = call.operands[0];
  const uint8_t *w = call.operands[1].as<uint8_t>();
  const bool seedWithAddend = call.attributes.getInt("addend", 0) != 0;
  const float *seed = count == 5 ? call.operands[2].as<float>() : nullptr;
  const float *bias = seedWithAddend ? nullptr : seed;
  const float *addend = seedWithAddend ? seed : nullptr;
  float *y = call.operands[count - 2].as<float>();
  float *workspace = call.operands[count - 1].as<float>();
  const int64_t k = transposeWeight ? spec.rows : spec.cols;
  const int64_t n = transposeWeight ? spec.cols : spec.rows;
  const int64_t m = x.numel() / k;
  if (m == 0) {
    return "";
  }
  const quant::LinearTiling tiling = quant::linearTiling(spec, transposeWeight);
  const int64_t tileFloats = tiling.tileFloats();
  const float *xs = x.as<float>();
  // `accumulate`: y += alpha x W^T (GEMM epilogues the planner folds in).
  const bool accumulate = call.attributes.getInt("accumulate", 0) != 0;
  const auto alpha = static_cast<float>(call.attributes.getFloat("alpha", 1));

  // Each task owns output columns [n0, n1) and walks the contraction in
  // fixed-size chunks, in order: y[:, n0:n1] (+)= x[:, k0:k1] tile, where
  // the tile is W[n0:n1, k0:k1] (read transposed) or W[k0:k1, n0:n1].
  const int64_t outTile = transposeWeight ? tiling.tileCols : tiling.tileRows;
  const int64_t depthTile = transposeWeight ? tiling.tileRows : tiling.tileCols;
  ScopedBlasThreads single(1);
  parallelFor(
      call, tiling.tasks, 1,
      [&](int64_t begin, int64_t end, int worker) {
        float *tile = workspace + worker * tileFloats;
        for (int64_t task = begin; task < end; ++task) {
          const int64_t n0 = task * outTile;
          const int64_t n1 = std::min(n, n0 + outTile);
          float beta = accumulate ? 1.0f : 0.0f;
          if (bias) {
            seedBias(y, bias, m, n, n0, n1);
            beta = 1;
          } else if (addend) {
            seedAddend(y, addend, m, n, n0, n1);
            beta = 1;
          }
          for (int64_t k0 = 0; k0 < k; k0 += depthTile) {
            const int64_t k1 = std::min(k, k0 + depthTile);
            if (transposeWeight) {
              quant::dequantizeTile(spec, w, k0, k1, n0, n1, tile, n1 - n0);
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m,
                          n1 - n0, k1 - k0, alpha, xs + k0, k, tile, n1 - n0,
                          beta, y + n0, n);
            } else {
              quant::dequantizeTile(spec, w, n0, n1, k0, k1, tile, k1 - k0);
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n1 - n0,
                          k1 - k0, alpha, xs + k0, k, tile, k1 - k0, beta,
                          y + n0, n);
            }
            beta = 1;
          }
        }
      },
      static_cast<int>(tiling.tasks));
  return "";
}

// dequantize: the whole weight W [rows, cols] as f32, for a reader other
// than a linear layer (the linear layers themselves dequantize per tile).
// Rows are split over the pool; each row block is one dequantizeTile call.

std::string checkDequantize(const KernelCall &call) {
  QuantSpec spec;
  bool transposeWeight = false;
  if (call.operands.size() != 2) {
    return "expected 2 operands (storage, y), got " +
           std::to_string(call.operands.size());
  }
  if (std::string problem = decodeQuantizedLaunch(call, spec, transposeWeight);
      !problem.empty()) {
    return problem;
  }
  const Tensor &storage = call.operands[0];
  const Tensor &y = call.operands[1];
  if (storage.dtype != DType::U8 || storage.rank() != 1 ||
      static_cast<uint64_t>(storage.numel()) != quant::storageBytes(spec)) {
    return "operand 0 must be u8 [" + std::to_string(quant::storageBytes(spec)) +
           "] (the weight's storage)";
  }
  if (y.dtype != DType::F32 || y.rank() != 2 || y.shape[0] != spec.rows ||
      y.shape[1] != spec.cols) {
    return "operand 1 must be f32 [" + std::to_string(spec.rows) + ", " +
           std::to_string(spec.cols) + "]";
  }
  return "";
}

std::string runDequantize(const KernelCall &call) {
  QuantSpec spec;
  bool transposeWeight = false;
  if (std::string problem = decodeQuantizedLaunch(call, spec, transposeWeight);
      !problem.empty()) {
    return problem;
  }
  const auto *storage = call.operands[0].as<uint8_t>();
  float *y = call.operands[1].as<float>();
  auto rows = [&](int64_t begin, int64_t end, int) {
    quant::dequantizeTile(spec, storage, begin, end, 0, spec.cols,
                          y + begin * spec.cols, spec.cols);
  };
  if (call.pool) {
    call.pool->parallelFor(spec.rows, 16, rows);
  } else {
    rows(0, spec.rows, 0);
  }
  return "";
}

} // namespace

void addQuantizedLinearKernels(std::vector<KernelDef> &table) {
  table.push_back(
      {"linear_quantized", -1, checkLinearQuantized, runLinearQuantized});
  table.push_back({"dequantize", 2, checkDequantize, runDequantize});
}

} // namespace tailor::runtime::cpu
