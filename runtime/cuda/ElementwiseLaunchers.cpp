//===- ElementwiseLaunchers.cpp - unary, binary, select and cast on CUDA --===//
//
// Launches codegen/cuda/ElementwiseKernels.cu. Operands, attributes and
// semantics are the CPU kernels' (runtime/cpu/ElementwiseKernels.cpp and
// BinaryKernels.cpp); the dtypes differ: float maps take f32 or bf16 (f64
// has no GPU path), binary ops f32, bf16, i32 and i64, comparisons also
// bool, cast any pair of f32, bf16, i32, i64 and bool; all operands of a
// map or binary op share one dtype, as on the CPU.
//
// Broadcasts are collapsed with the CPU's BroadcastPlan and run as rows
// (the outer dimensions) by columns (the innermost) on 2-D blocks sized to
// the row: no division per element, 16-byte packs when every row starts
// aligned. Select also accepts f64 and the other dtypes, since it only
// moves bytes. Integer division by zero, a run error on the CPU, gives 0
// and is reported in the device's error record by a pass over the divisors
// launched before the division (integer div only), which the runtime turns
// into the run error when the entry synchronizes.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace tailor::runtime::cuda {
namespace {

using cpu::BroadcastPlan;
using cpu::expectBroadcastsTo;
using cpu::expectDType;
using cpu::expectDTypeIn;
using cpu::expectOperandCount;
using cpu::expectSameDType;
using cpu::expectShape;

/// Mirrors tl::ew::Walk in the device code: the collapsed space as rows
/// (the outer dimensions, innermost first) by columns (the innermost).
constexpr int kMaxOuterRank = 7;
struct BroadcastWalk {
  int64_t rows = 1, cols = 1, vec = 0, rank = 0;
  int64_t extents[kMaxOuterRank] = {};
  int64_t strides[3][kMaxOuterRank] = {};
  int64_t colStride[3] = {0, 0, 0};
};
static_assert(sizeof(BroadcastWalk) == (4 + 4 * kMaxOuterRank + 3) * 8,
              "BroadcastWalk must match tl::ew::Walk");

constexpr unsigned kBlock = 256;

bool aligned(const void *p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

std::string entry(const char *kernel, const char *variant, const char *type) {
  std::string name = std::string("tailor_") + kernel;
  if (*variant) {
    name += std::string("_") + variant;
  }
  return name + "_" + type;
}

/// A collapsed broadcast deeper than the strided walk takes; "" if it fits.
std::string checkWalkRank(const KernelCall &call, size_t output) {
  const Tensor &y = call.operands[output];
  BroadcastPlan plan = output == 2
                           ? BroadcastPlan(y.shape, {&call.operands[0].shape,
                                                     &call.operands[1].shape})
                           : BroadcastPlan(y.shape, {&call.operands[0].shape,
                                                     &call.operands[1].shape,
                                                     &call.operands[2].shape});
  if (plan.extents.size() > size_t(kMaxOuterRank + 1)) {
    return "the broadcast to " + cpu::shapeString(y.shape) + " needs " +
           std::to_string(plan.extents.size()) +
           " dimensions after merging, at most " +
           std::to_string(kMaxOuterRank + 1) + " are supported on cuda";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Flat maps: unary, gelu, is_nan, cast.
//===----------------------------------------------------------------------===//

/// y[i] = f(x[i]) through `function`; `pack` elements per aligned access.
std::string launchFlat(const CudaCall &call, const std::string &function,
                       int64_t pack) {
  const Tensor &x = call.operands[0];
  const Tensor &y = call.operands[1];
  long long n = x.numel();
  if (n == 0) {
    return "";
  }
  int vec = aligned(x.data, pack * dtypeSize(x.dtype)) &&
            aligned(y.data, pack * dtypeSize(y.dtype));
  int64_t slots = vec ? n / pack + (n % pack ? 1 : 0) : n;
  const void *px = x.data;
  void *py = y.data;
  void *args[] = {&px, &py, &n, &vec};
  return call.context->launch(function.c_str(), {blocksFor(slots, kBlock)},
                              {kBlock}, 0, args);
}

/// 16-byte packs for float maps.
int64_t floatPack(DType dtype) { return 16 / int64_t(dtypeSize(dtype)); }

std::string checkFloatMap(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 1, 0); !e.empty()) {
    return e;
  }
  return expectShape(call, 1, call.operands[0].shape);
}

constexpr const char *kUnaryNames[] = {
    "neg",  "abs",     "exp",  "log",  "sqrt", "rsqrt", "reciprocal",
    "tanh", "sigmoid", "silu", "relu", "erf",  "sin",   "cos"};

template <int Op> std::string launchUnary(const CudaCall &call) {
  DType t = call.operands[0].dtype;
  return launchFlat(call, entry(kUnaryNames[Op], "", dtypeName(t)),
                    floatPack(t));
}

std::string checkGelu(const KernelCall &call) {
  if (auto e = checkFloatMap(call); !e.empty()) {
    return e;
  }
  // Absent reads as PyTorch's default, exact GELU.
  const Attribute *attr = call.attributes.find("approximate");
  if (attr && (attr->kind != Attribute::Kind::String ||
               (attr->s != "none" && attr->s != "tanh"))) {
    return "attribute 'approximate' must be the string 'none' or 'tanh'";
  }
  return "";
}

std::string launchGelu(const CudaCall &call) {
  DType t = call.operands[0].dtype;
  bool tanh = call.attributes.getString("approximate", "none") == "tanh";
  return launchFlat(call, entry(tanh ? "gelu_tanh" : "gelu", "", dtypeName(t)),
                    floatPack(t));
}

std::string checkIsNan(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::BF16}); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 1, DType::Bool); !e.empty()) {
    return e;
  }
  return expectShape(call, 1, call.operands[0].shape);
}

std::string launchIsNan(const CudaCall &call) {
  DType t = call.operands[0].dtype;
  return launchFlat(call, entry("is_nan", "", dtypeName(t)), floatPack(t));
}

std::string checkCast(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  for (size_t i : {0, 1}) {
    if (auto e = expectDTypeIn(
            call, i,
            {DType::F32, DType::BF16, DType::I32, DType::I64, DType::Bool});
        !e.empty()) {
      return e;
    }
  }
  return checkLikeCpu("cast", call);
}

std::string launchCast(const CudaCall &call) {
  // Four elements per access whatever the types (kCastPack in the device
  // code): 16 bytes of f32, 8 of bf16, 4 of bool.
  return launchFlat(call,
                    entry("cast", dtypeName(call.operands[0].dtype),
                          dtypeName(call.operands[1].dtype)),
                    4);
}

//===----------------------------------------------------------------------===//
// Broadcasting: binary ops, comparisons, select.
//===----------------------------------------------------------------------===//

/// The rows x columns form of a collapsed space. Packs of `pack` elements
/// are used when y and every input read as packs (column stride 1) start
/// each row aligned; a single row may end in a partial pack.
BroadcastWalk walkOf(const BroadcastPlan &plan, int64_t pack,
                     std::initializer_list<const Tensor *> inputs,
                     const Tensor &y) {
  BroadcastWalk w;
  const int rank = static_cast<int>(plan.extents.size());
  const int outer = rank - 1;
  w.cols = plan.extents[outer];
  w.rank = outer;
  for (int d = 0; d < outer; ++d) {
    w.extents[d] = plan.extents[outer - 1 - d];
    w.rows *= w.extents[d];
    for (int i = 0; i < 3; ++i) {
      w.strides[i][d] = plan.strides[outer - 1 - d][i];
    }
  }
  for (int i = 0; i < 3; ++i) {
    w.colStride[i] = plan.strides[outer][i];
  }
  bool vec = pack > 1 && aligned(y.data, pack * dtypeSize(y.dtype)) &&
             (w.rows == 1 || w.cols % pack == 0);
  int i = 0;
  for (const Tensor *t : inputs) {
    if (w.colStride[i]) {
      vec = vec && aligned(t->data, pack * dtypeSize(t->dtype));
      for (int d = 0; d < outer && w.rows > 1; ++d) {
        vec = vec && w.strides[i][d] % pack == 0;
      }
    }
    ++i;
  }
  w.vec = vec;
  return w;
}

/// A 2-D grid for rows of `slots` column slots: the block's x spans the row
/// (rounded up to a power of two), its y stacks rows so short rows keep the
/// block full.
void walkGeometry(const BroadcastWalk &w, int64_t slots, Dim3 &grid,
                  Dim3 &block) {
  unsigned bx = 1;
  while (bx < kBlock && int64_t(bx) < slots) {
    bx *= 2;
  }
  block = {bx, kBlock / bx, 1};
  grid.x = blocksFor(slots, bx);
  grid.y = static_cast<unsigned>(
      std::min<int64_t>((w.rows + block.y - 1) / block.y, 65535));
}

enum BinaryOp { Add, Sub, Mul, Div, Pow, Max, Min, Eq, Lt, Gt };
constexpr const char *kBinaryNames[] = {"add", "sub", "mul", "div", "pow",
                                        "max", "min", "eq",  "lt",  "gt"};

template <int Op> std::string checkBinary(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  if (Op >= Eq) {
    if (auto e = expectDTypeIn(
            call, 0,
            {DType::F32, DType::BF16, DType::I32, DType::I64, DType::Bool});
        !e.empty()) {
      return e;
    }
    if (auto e = expectDType(call, 2, DType::Bool); !e.empty()) {
      return e;
    }
  } else {
    if (auto e = expectDTypeIn(
            call, 0, {DType::F32, DType::BF16, DType::I32, DType::I64});
        !e.empty()) {
      return e;
    }
    if (auto e = expectSameDType(call, 2, 0); !e.empty()) {
      return e;
    }
  }
  if (auto e = expectSameDType(call, 1, 0); !e.empty()) {
    return e;
  }
  if (auto e = checkLikeCpu(kBinaryNames[Op], call); !e.empty()) {
    return e;
  }
  return checkWalkRank(call, 2);
}

template <int Op> std::string launchBinary(const CudaCall &call) {
  const Tensor &a = call.operands[0];
  const Tensor &b = call.operands[1];
  const Tensor &y = call.operands[2];
  if (y.numel() == 0) {
    return "";
  }
  const char *type = dtypeName(a.dtype);
  BroadcastPlan plan(y.shape, {&a.shape, &b.shape});
  // 16 input bytes to a pack.
  const int64_t pack = 16 / int64_t(dtypeSize(a.dtype));
  BroadcastWalk w = walkOf(plan, pack, {&a, &b}, y);
  int64_t slots = w.vec ? w.cols / pack + (w.cols % pack ? 1 : 0) : w.cols;
  Dim3 grid, block;
  walkGeometry(w, slots, grid, block);
  const void *pa = a.data;
  const void *pb = b.data;
  void *py = y.data;
  if (Op == Div && (a.dtype == DType::I32 || a.dtype == DType::I64)) {
    long long n = b.numel();
    DeviceErrorRecord *record = call.context->errorRecord();
    int site = call.step;
    void *check[] = {&pb, &n, &record, &site};
    if (auto e = call.context->launch(
            entry("nonzero_divisors", "", type).c_str(), {blocksFor(n, 256)},
            {256}, 0, check);
        !e.empty()) {
      return e;
    }
  }
  void *args[] = {&pa, &pb, &py, &w};
  return call.context->launch(entry(kBinaryNames[Op], "", type).c_str(), grid,
                              block, 0, args);
}

std::string checkSelect(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 4); !e.empty()) {
    return e;
  }
  if (auto e = expectDType(call, 0, DType::Bool); !e.empty()) {
    return e;
  }
  for (size_t i : {2, 3}) {
    if (auto e = expectSameDType(call, i, 1); !e.empty()) {
      return e;
    }
  }
  for (size_t i : {0, 1, 2}) {
    if (auto e = expectBroadcastsTo(call, i, call.operands[3].shape);
        !e.empty()) {
      return e;
    }
  }
  return checkWalkRank(call, 3);
}

std::string launchSelect(const CudaCall &call) {
  const Tensor &y = call.operands[3];
  if (y.numel() == 0) {
    return "";
  }
  // Select moves elements as same-sized unsigned integers.
  const char *type = "b64";
  switch (dtypeSize(y.dtype)) {
  case 1:
    type = "b8";
    break;
  case 2:
    type = "b16";
    break;
  case 4:
    type = "b32";
    break;
  default:
    break;
  }
  BroadcastPlan plan(y.shape, {&call.operands[0].shape, &call.operands[1].shape,
                               &call.operands[2].shape});
  // Elements are moved one at a time: select is rarer than arithmetic.
  BroadcastWalk w = walkOf(plan, 1, {}, y);
  Dim3 grid, block;
  walkGeometry(w, w.cols, grid, block);
  const void *pc = call.operands[0].data;
  const void *pa = call.operands[1].data;
  const void *pb = call.operands[2].data;
  void *py = y.data;
  void *args[] = {&pc, &pa, &pb, &py, &w};
  return call.context->launch(entry("select", "", type).c_str(), grid, block, 0,
                              args);
}

//===----------------------------------------------------------------------===//
// Entry points each launcher may ask for.
//===----------------------------------------------------------------------===//

#define TL_FLOAT_FUNCTIONS(op)                                                 \
  { "tailor_" op "_f32", "tailor_" op "_bf16", nullptr }
#define TL_ARITH_FUNCTIONS(op)                                                 \
  {                                                                            \
    "tailor_" op "_f32", "tailor_" op "_bf16", "tailor_" op "_i32",            \
        "tailor_" op "_i64", nullptr                                           \
  }
#define TL_COMPARE_FUNCTIONS(op)                                               \
  {                                                                            \
    "tailor_" op "_f32", "tailor_" op "_bf16", "tailor_" op "_i32",            \
        "tailor_" op "_i64", "tailor_" op "_bool", nullptr                     \
  }
#define TL_CAST_FROM(f)                                                        \
  "tailor_cast_" f "_f32", "tailor_cast_" f "_bf16", "tailor_cast_" f "_i32",  \
      "tailor_cast_" f "_i64", "tailor_cast_" f "_bool"

const char *const kBandMaskFunctions[] = {
    "tailor_band_mask_f32", "tailor_band_mask_bf16", "tailor_band_mask_i32",
    "tailor_band_mask_i64", "tailor_band_mask_bool", nullptr};

const char *const kUnaryFunctions[][3] = {
    TL_FLOAT_FUNCTIONS("neg"),        TL_FLOAT_FUNCTIONS("abs"),
    TL_FLOAT_FUNCTIONS("exp"),        TL_FLOAT_FUNCTIONS("log"),
    TL_FLOAT_FUNCTIONS("sqrt"),       TL_FLOAT_FUNCTIONS("rsqrt"),
    TL_FLOAT_FUNCTIONS("reciprocal"), TL_FLOAT_FUNCTIONS("tanh"),
    TL_FLOAT_FUNCTIONS("sigmoid"),    TL_FLOAT_FUNCTIONS("silu"),
    TL_FLOAT_FUNCTIONS("relu"),       TL_FLOAT_FUNCTIONS("erf"),
    TL_FLOAT_FUNCTIONS("sin"),        TL_FLOAT_FUNCTIONS("cos")};
const char *const kGeluFunctions[] = {"tailor_gelu_f32", "tailor_gelu_bf16",
                                      "tailor_gelu_tanh_f32",
                                      "tailor_gelu_tanh_bf16", nullptr};
const char *const kIsNanFunctions[] = TL_FLOAT_FUNCTIONS("is_nan");
const char *const kCastFunctions[] = {
    TL_CAST_FROM("f32"), TL_CAST_FROM("bf16"), TL_CAST_FROM("i32"),
    TL_CAST_FROM("i64"), TL_CAST_FROM("bool"), nullptr};
// div also checks integer divisors (launchBinary).
const char *const kBinaryFunctions[][8] = {
    TL_ARITH_FUNCTIONS("add"),
    TL_ARITH_FUNCTIONS("sub"),
    TL_ARITH_FUNCTIONS("mul"),
    {"tailor_div_f32", "tailor_div_bf16", "tailor_div_i32", "tailor_div_i64",
     "tailor_nonzero_divisors_i32", "tailor_nonzero_divisors_i64", nullptr},
    TL_ARITH_FUNCTIONS("pow"),  TL_ARITH_FUNCTIONS("max"),
    TL_ARITH_FUNCTIONS("min"),  TL_COMPARE_FUNCTIONS("eq"),
    TL_COMPARE_FUNCTIONS("lt"), TL_COMPARE_FUNCTIONS("gt")};
const char *const kSelectFunctions[] = {"tailor_select_b8", "tailor_select_b16",
                                        "tailor_select_b32",
                                        "tailor_select_b64", nullptr};

#undef TL_CAST_FROM
#undef TL_COMPARE_FUNCTIONS
#undef TL_ARITH_FUNCTIONS
#undef TL_FLOAT_FUNCTIONS

//===----------------------------------------------------------------------===//
// Band mask: a mask generated from indices (runtime/cpu/ElementwiseKernels.cpp
// is the reference; bf16 is the one extra dtype).
//===----------------------------------------------------------------------===//

std::string checkBandMask(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 1); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0,
                             {DType::F32, DType::BF16, DType::I32, DType::I64,
                              DType::Bool});
      !e.empty()) {
    return e;
  }
  KernelCall view = call;
  if (view.operands[0].dtype == DType::BF16) {
    view.operands[0].dtype = DType::F32;
  }
  return findCpuKernel("band_mask")->check(view);
}

std::string launchBandMask(const CudaCall &call) {
  const Tensor &y = call.operands[0];
  long long cols = y.shape.back();
  long long rows = y.shape[y.shape.size() - 2];
  if (y.numel() == 0) {
    return "";
  }
  long long rowsTotal = y.numel() / cols;
  long long lower = call.attributes.getInt("lower", 0);
  long long upper = call.attributes.getInt("upper", 0);
  double inside = call.attributes.getFloat("inside", 0);
  double outside = call.attributes.getFloat("outside", 0);
  void *py = y.data;
  void *args[] = {&py, &rowsTotal, &rows, &cols, &lower, &upper, &inside,
                  &outside};
  Dim3 grid{blocksFor(cols, kBlock),
            static_cast<unsigned>(std::min<long long>(rowsTotal, 65535))};
  return call.context->launch(
      entry("band_mask", "", dtypeName(y.dtype)).c_str(), grid, {kBlock}, 0,
      args);
}

template <int Op> CudaKernelDef unaryDef() {
  return {kUnaryNames[Op], 2, checkFloatMap, launchUnary<Op>,
          kUnaryFunctions[Op]};
}

template <int Op> CudaKernelDef binaryDef() {
  return {kBinaryNames[Op], 3, checkBinary<Op>, launchBinary<Op>,
          kBinaryFunctions[Op]};
}

template <int... Ops>
void addUnary(std::vector<CudaKernelDef> &table,
              std::integer_sequence<int, Ops...>) {
  (table.push_back(unaryDef<Ops>()), ...);
}

template <int... Ops>
void addBinary(std::vector<CudaKernelDef> &table,
               std::integer_sequence<int, Ops...>) {
  (table.push_back(binaryDef<Ops>()), ...);
}

} // namespace

void addElementwiseCudaKernels(std::vector<CudaKernelDef> &table) {
  addUnary(table, std::make_integer_sequence<int, 14>());
  table.push_back({"gelu", 2, checkGelu, launchGelu, kGeluFunctions});
  table.push_back({"is_nan", 2, checkIsNan, launchIsNan, kIsNanFunctions});
  table.push_back({"cast", 2, checkCast, launchCast, kCastFunctions});
  addBinary(table, std::make_integer_sequence<int, 10>());
  table.push_back({"select", 4, checkSelect, launchSelect, kSelectFunctions});
  table.push_back(
      {"band_mask", 1, checkBandMask, launchBandMask, kBandMaskFunctions});
}

} // namespace tailor::runtime::cuda
