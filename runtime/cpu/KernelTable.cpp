//===- KernelTable.cpp - the CPU kernel table and shared checks -----------===//
//
// The table is built once, on first use, from each kernel file's
// add*Kernels; lookups happen when a session is created, once per launch, so
// a linear search over ~60 names is fine.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

#include "runtime/cpu/BlasCore.h"

#include <cmath>
#include <cstdio>

namespace tailor::runtime {

namespace cpu {
// QuantizedLinearKernels.cpp (which links tailor_quant).
void addQuantizedLinearKernels(std::vector<KernelDef> &table);
} // namespace cpu

const std::vector<KernelDef> &cpuKernels() {
  static const std::vector<KernelDef> table = [] {
    // Every kernel is found here first, so OpenBLAS's kernels are fixed
    // before any GEMM runs (and before other threads can be inside one).
    ensureBlasCoreMatchesCpu();
    std::vector<KernelDef> defs;
    cpu::addElementwiseKernels(defs);
    cpu::addBinaryKernels(defs);
    cpu::addReductionKernels(defs);
    cpu::addNormalizationKernels(defs);
    cpu::addLinearAlgebraKernels(defs);
    cpu::addTransformerKernels(defs);
    cpu::addDataMovementKernels(defs);
    cpu::addIndexingKernels(defs);
    cpu::addGradientKernels(defs);
    cpu::addElementwiseGradientKernels(defs);
    cpu::addLossKernels(defs);
    cpu::addOptimizerKernels(defs);
    cpu::addCompressionKernels(defs);
    cpu::addGenerationKernels(defs);
    cpu::addPipelineKernels(defs);
    cpu::addQuantizedLinearKernels(defs);
    cpu::addFusedKernels(defs);
    return defs;
  }();
  return table;
}

const KernelDef *findCpuKernel(std::string_view name) {
  for (const KernelDef &def : cpuKernels()) {
    if (name == def.name) {
      return &def;
    }
  }
  return nullptr;
}

} // namespace tailor::runtime

namespace tailor::runtime::cpu {

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) {
      s += ", ";
    }
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string expectOperandCount(const KernelCall &call, size_t count) {
  if (call.operands.size() == count) {
    return "";
  }
  return "expected " + std::to_string(count) + " operands, got " +
         std::to_string(call.operands.size());
}

std::string expectOperandCount(const KernelCall &call, size_t min, size_t max) {
  size_t n = call.operands.size();
  if (n >= min && n <= max) {
    return "";
  }
  return "expected " + std::to_string(min) + " to " + std::to_string(max) +
         " operands, got " + std::to_string(n);
}

std::string expectDType(const KernelCall &call, size_t index, DType dtype) {
  return expectDTypeIn(call, index, {dtype});
}

std::string expectDTypeIn(const KernelCall &call, size_t index,
                          std::initializer_list<DType> dtypes) {
  DType actual = call.operands[index].dtype;
  for (DType d : dtypes) {
    if (d == actual) {
      return "";
    }
  }
  std::string allowed;
  size_t i = 0;
  for (DType d : dtypes) {
    if (i) {
      allowed += i + 1 == dtypes.size() ? " or " : ", ";
    }
    allowed += dtypeName(d);
    ++i;
  }
  return "operand " + std::to_string(index) + " must be " + allowed + ", got " +
         dtypeName(actual);
}

std::string expectSameDType(const KernelCall &call, size_t index, size_t like) {
  DType want = call.operands[like].dtype;
  DType actual = call.operands[index].dtype;
  if (want == actual) {
    return "";
  }
  return "operand " + std::to_string(index) + " must be " + dtypeName(want) +
         " like operand " + std::to_string(like) + ", got " + dtypeName(actual);
}

std::string expectFloatMap(const KernelCall &call) {
  if (auto e = expectOperandCount(call, 2); !e.empty()) {
    return e;
  }
  if (auto e = expectDTypeIn(call, 0, {DType::F32, DType::F64}); !e.empty()) {
    return e;
  }
  if (auto e = expectSameDType(call, 1, 0); !e.empty()) {
    return e;
  }
  return expectShape(call, 1, call.operands[0].shape);
}

std::string expectShape(const KernelCall &call, size_t index,
                        const std::vector<int64_t> &shape) {
  const std::vector<int64_t> &actual = call.operands[index].shape;
  if (actual == shape) {
    return "";
  }
  return "operand " + std::to_string(index) + " must have shape " +
         shapeString(shape) + ", got " + shapeString(actual);
}

std::string expectRank(const KernelCall &call, size_t index, int64_t rank) {
  int64_t actual = call.operands[index].rank();
  if (actual == rank) {
    return "";
  }
  return "operand " + std::to_string(index) + " must have rank " +
         std::to_string(rank) + ", got " + std::to_string(actual);
}

std::string expectMinRank(const KernelCall &call, size_t index, int64_t rank) {
  int64_t actual = call.operands[index].rank();
  if (actual >= rank) {
    return "";
  }
  return "operand " + std::to_string(index) +
         " must have rank >= " + std::to_string(rank) + ", got " +
         std::to_string(actual);
}

bool broadcastsTo(const std::vector<int64_t> &from,
                  const std::vector<int64_t> &to) {
  if (from.size() > to.size()) {
    return false;
  }
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != to[lead + i] && from[i] != 1) {
      return false;
    }
  }
  return true;
}

std::string expectBroadcastsTo(const KernelCall &call, size_t index,
                               const std::vector<int64_t> &shape) {
  const std::vector<int64_t> &actual = call.operands[index].shape;
  if (broadcastsTo(actual, shape)) {
    return "";
  }
  return "operand " + std::to_string(index) + " of shape " +
         shapeString(actual) + " does not broadcast to " + shapeString(shape);
}

std::string expectIntAttr(const KernelCall &call, const char *name, int64_t lo,
                          int64_t hi, bool required, int64_t fallback,
                          int64_t &value) {
  const Attribute *attr = call.attributes.find(name);
  if (!attr) {
    if (required) {
      return std::string("missing int attribute '") + name + "'";
    }
    value = fallback;
    return "";
  }
  if (attr->kind != Attribute::Kind::Int) {
    return std::string("attribute '") + name + "' must be an int";
  }
  if (attr->i < lo || attr->i > hi) {
    return std::string("attribute '") + name + "' is " +
           std::to_string(attr->i) + ", expected a value in [" +
           std::to_string(lo) + ", " + std::to_string(hi) + "]";
  }
  value = attr->i;
  return "";
}

std::string expectFloatAttr(const KernelCall &call, const char *name,
                            bool required, double fallback, double &value) {
  const Attribute *attr = call.attributes.find(name);
  if (!attr) {
    if (required) {
      return std::string("missing float attribute '") + name + "'";
    }
    value = fallback;
    return "";
  }
  if (attr->kind != Attribute::Kind::Float &&
      attr->kind != Attribute::Kind::Int) {
    return std::string("attribute '") + name + "' must be a float";
  }
  value = call.attributes.getFloat(name, fallback);
  return "";
}

std::string expectIntsAttr(const KernelCall &call, const char *name,
                           size_t size, int64_t lo, int64_t hi,
                           std::vector<int64_t> &value) {
  const Attribute *attr = call.attributes.find(name);
  if (!attr) {
    return std::string("missing ints attribute '") + name + "'";
  }
  if (attr->kind != Attribute::Kind::Ints) {
    return std::string("attribute '") + name + "' must be a list of ints";
  }
  if (attr->ints.size() != size) {
    return std::string("attribute '") + name + "' has " +
           std::to_string(attr->ints.size()) + " entries, expected " +
           std::to_string(size);
  }
  for (int64_t v : attr->ints) {
    if (v < lo || v > hi) {
      return std::string("attribute '") + name + "' has entry " +
             std::to_string(v) + ", expected values in [" + std::to_string(lo) +
             ", " + std::to_string(hi) + "]";
    }
  }
  value = attr->ints;
  return "";
}

/// A double as printf's %g writes it: "0.9", "1e-08".
static std::string formatFloat(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

std::string expectFloatInRange(const KernelCall &call, const char *name,
                               double lo, double hi, double &value) {
  if (auto e = expectFloatAttr(call, name, true, 0, value); !e.empty()) {
    return e;
  }
  if (!(value >= lo && value < hi)) {
    std::string range = std::isinf(hi) ? ">= " + formatFloat(lo)
                                       : "in [" + formatFloat(lo) + ", " +
                                             formatFloat(hi) + ")";
    return std::string("attribute '") + name + "' is " + formatFloat(value) +
           ", expected a value " + range;
  }
  return "";
}

std::string expectAllF32(const KernelCall &call) {
  for (size_t i = 0; i < call.operands.size(); ++i) {
    if (auto e = expectDType(call, i, DType::F32); !e.empty()) {
      return e;
    }
  }
  return "";
}

std::string expectScalar(const KernelCall &call, size_t index, DType dtype) {
  if (auto e = expectDType(call, index, dtype); !e.empty()) {
    return e;
  }
  return expectShape(call, index, {});
}

std::string expectOutputsApart(const KernelCall &call, size_t firstOutput) {
  auto range = [&](size_t i) {
    const Tensor &t = call.operands[i];
    auto begin = reinterpret_cast<uintptr_t>(t.data);
    return std::pair<uintptr_t, uintptr_t>(begin, begin + t.bytes());
  };
  for (size_t i = firstOutput; i < call.operands.size(); ++i) {
    auto [begin, end] = range(i);
    if (!call.operands[i].data || begin == end) {
      continue;
    }
    for (size_t j = 0; j < call.operands.size(); ++j) {
      auto [otherBegin, otherEnd] = range(j);
      if (j == i || !call.operands[j].data || otherBegin == otherEnd) {
        continue;
      }
      if (begin < otherEnd && otherBegin < end) {
        return "output operand " + std::to_string(i) + " overlaps operand " +
               std::to_string(j) +
               " in memory; this kernel needs its outputs apart";
      }
    }
  }
  return "";
}

std::string expectGemmEpilogue(const KernelCall &call, bool seeded,
                               int64_t &addend) {
  int64_t accumulate = 0;
  double alpha = 1;
  if (auto e = firstError(
          {expectIntAttr(call, "accumulate", 0, 1, false, 0, accumulate),
           expectIntAttr(call, "addend", 0, 1, false, 0, addend),
           expectFloatAttr(call, "alpha", false, 1.0, alpha)});
      !e.empty()) {
    return e;
  }
  if (accumulate && seeded) {
    return addend ? "a linear layer cannot both add an addend and accumulate"
                  : "a linear layer with a bias cannot accumulate into its "
                    "output";
  }
  if (addend && !seeded) {
    return "a linear layer with `addend` needs the addend as operand 2";
  }
  return "";
}

std::string firstError(std::initializer_list<std::string> errors) {
  for (const std::string &e : errors) {
    if (!e.empty()) {
      return e;
    }
  }
  return "";
}

BroadcastPlan::BroadcastPlan(
    const std::vector<int64_t> &out,
    std::initializer_list<const std::vector<int64_t> *> inputs) {
  // Right-align each input against the output and give broadcast
  // dimensions stride 0; drop output dimensions of extent 1.
  const int outRank = static_cast<int>(out.size());
  std::vector<std::array<int64_t, kMaxInputs>> full(out.size());
  int input = 0;
  for (const std::vector<int64_t> *shape : inputs) {
    const int rank = static_cast<int>(shape->size());
    int64_t stride = 1;
    for (int d = outRank - 1; d >= 0; --d) {
      int id = d - (outRank - rank);
      int64_t extent = id >= 0 ? (*shape)[id] : 1;
      full[d][input] = extent == 1 ? 0 : stride;
      stride *= extent;
    }
    ++input;
  }
  for (int i = input; i < kMaxInputs; ++i) {
    for (auto &s : full) {
      s[i] = 0;
    }
  }
  for (int d = 0; d < outRank; ++d) {
    if (out[d] == 1) {
      continue;
    }
    // Merge into the previous kept dimension when every input walks the
    // pair as one contiguous (or one broadcast) dimension.
    if (!extents.empty()) {
      bool merge = true;
      for (int i = 0; i < kMaxInputs; ++i) {
        merge &= strides.back()[i] == full[d][i] * out[d];
      }
      if (merge) {
        extents.back() *= out[d];
        strides.back() = full[d];
        continue;
      }
    }
    extents.push_back(out[d]);
    strides.push_back(full[d]);
  }
  if (extents.empty()) {
    extents.push_back(1);
    strides.push_back({0, 0, 0});
  }
}

} // namespace tailor::runtime::cpu
