//===- SummarizeParams.cpp - tailor-summarize-params ----------------------===//
//
// Prints a parameter inventory of a module: per element type, trainability and
// byte source. The memory planner's parameter figures must agree with it.
//
//===----------------------------------------------------------------------===//

#include "passes/graph/Passes.h"
#include "dialects/tg/TGShapes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace tailor::graph {
#define GEN_PASS_DEF_SUMMARIZEPARAMSPASS
#include "passes/graph/Passes.h.inc"
} // namespace tailor::graph

using namespace mlir;
using namespace tailor;

namespace {

struct Totals {
  int64_t tensors = 0;
  int64_t elements = 0;
  int64_t bytes = 0;

  void add(int64_t elementCount, int64_t byteCount) {
    ++tensors;
    elements += elementCount;
    bytes += byteCount;
  }
};

/// Renders a byte count the way people read memory sizes (binary units).
std::string formatBytes(int64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (unit == 0) {
    os << bytes << " B";
  } else {
    os << llvm::format("%.2f %s", value, units[unit]);
  }
  return text;
}

struct SummarizeParamsPass
    : tailor::graph::impl::SummarizeParamsPassBase<SummarizeParamsPass> {
  using SummarizeParamsPassBase::SummarizeParamsPassBase;

  void runOnOperation() override {
    Totals all, trainable, external, inlined, runtimeMade;
    llvm::MapVector<Type, Totals> byElementType;
    llvm::StringSet<> files;
    llvm::SmallVector<std::pair<int64_t, tg::ParamOp>> sizes;

    getOperation().walk([&](tg::ParamOp param) {
      RankedTensorType type = param.getTensorType();
      int64_t elements = tg::numElements(type.getShape());
      int64_t bytes = tg::byteSize(type);
      all.add(elements, bytes);
      byElementType[type.getElementType()].add(elements, bytes);
      if (param.getTrainable()) {
        trainable.add(elements, bytes);
      }
      Attribute location = param.getLocationAttr();
      if (auto data = llvm::dyn_cast_if_present<tg::ExternalDataAttr>(location)) {
        external.add(elements, bytes);
        files.insert(data.getFile().getValue());
      } else if (llvm::isa_and_present<tg::InitializerDataAttr>(location)) {
        inlined.add(elements, bytes);
      } else {
        runtimeMade.add(elements, bytes);
      }
      sizes.push_back({bytes, param});
    });

    llvm::raw_ostream &os = llvm::errs();
    os << "parameters: " << all.tensors << " tensors, " << all.elements
       << " elements, " << formatBytes(all.bytes) << "\n";
    os << llvm::format("  %-8s %8s %14s %14s\n", "dtype", "tensors",
                       "elements", "bytes");
    for (auto &[type, totals] : byElementType) {
      std::string name;
      llvm::raw_string_ostream typeName(name);
      typeName << type;
      os << llvm::format("  %-8s %8lld %14lld %14lld\n", name.c_str(),
                         static_cast<long long>(totals.tensors),
                         static_cast<long long>(totals.elements),
                         static_cast<long long>(totals.bytes));
    }
    os << "  trainable: " << trainable.tensors << " tensors, "
       << trainable.elements << " elements, " << formatBytes(trainable.bytes)
       << "\n";
    os << "  bytes from: external data " << external.tensors << " ("
       << files.size() << (files.size() == 1 ? " file" : " files")
       << "), inside the model " << inlined.tensors << ", made at run time "
       << runtimeMade.tensors << "\n";

    if (largest > 0 && !sizes.empty()) {
      std::stable_sort(sizes.begin(), sizes.end(), [](auto &a, auto &b) {
        return a.first > b.first;
      });
      os << "  largest:\n";
      size_t shown = std::min<size_t>(largest, sizes.size());
      for (auto [bytes, param] : llvm::ArrayRef(sizes).take_front(shown)) {
        os << "    @" << param.getSymName() << " " << param.getType() << " "
           << formatBytes(bytes) << "\n";
      }
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
