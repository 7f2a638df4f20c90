//===- RaiseUtils.cpp - matching helpers shared by the raising passes -----===//

#include "passes/graph/RaiseUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <deque>

using namespace mlir;

namespace tailor::graph {

llvm::ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

Value biasAddOf(Value value, int64_t size) {
  if (!value.hasOneUse()) {
    return nullptr;
  }
  auto add = llvm::dyn_cast<tg::AddOp>(*value.getUsers().begin());
  if (!add || add.getType() != value.getType()) {
    return nullptr;
  }
  Value other = add.getLhs() == value ? add.getRhs() : add.getLhs();
  if (!paramRefOf(other) || shapeOf(other) != llvm::ArrayRef<int64_t>{size}) {
    return nullptr;
  }
  return other;
}

std::optional<double> splatValue(Value value) {
  value = skipCasts(value);
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat()) {
    return std::nullopt;
  }
  Type elem = attr.getElementType();
  if (llvm::isa<FloatType>(elem)) {
    return attr.getSplatValue<APFloat>().convertToDouble();
  }
  if (elem.isInteger()) {
    return static_cast<double>(attr.getSplatValue<APInt>().getSExtValue());
  }
  return std::nullopt;
}

bool isSplat(Value value, double expected) {
  std::optional<double> v = splatValue(value);
  return v && std::fabs(*v - expected) <= 1e-4 * std::max(1.0, std::fabs(expected));
}

Value skipCasts(Value value) {
  while (auto cast = value.getDefiningOp<tg::CastOp>()) {
    Type from = getElementTypeOrSelf(cast.getInput().getType());
    Type to = getElementTypeOrSelf(cast.getType());
    if (llvm::isa<FloatType>(from) != llvm::isa<FloatType>(to)) {
      break;
    }
    value = cast.getInput();
  }
  return value;
}

tg::ParamRefOp paramRefOf(Value value) {
  return skipCasts(value).getDefiningOp<tg::ParamRefOp>();
}

std::optional<std::string> modulePathFromParamName(llvm::StringRef name) {
  for (llvm::StringRef suffix : {".weight", ".bias"}) {
    if (name.ends_with(suffix)) {
      llvm::StringRef path = name.drop_back(suffix.size());
      if (!path.empty() && !path.contains("::") && !path.contains('/')) {
        return path.str();
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> modulePathFromLoc(Location loc, unsigned dropLast) {
  // The importer attaches the module scope as FusedLoc metadata.
  StringAttr scope;
  loc->walk([&](Location inner) {
    if (auto fused = llvm::dyn_cast<FusedLoc>(inner)) {
      scope = llvm::dyn_cast_or_null<StringAttr>(fused.getMetadata());
    }
    return scope ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (!scope || scope.getValue().empty()) {
    return std::nullopt;
  }
  llvm::StringRef path = scope.getValue();
  for (unsigned i = 0; i < dropLast; ++i) {
    size_t dot = path.rfind('.');
    if (dot == llvm::StringRef::npos) {
      return std::nullopt;
    }
    path = path.take_front(dot);
  }
  return path.str();
}

std::optional<int64_t> layerOfPath(llvm::StringRef path) {
  llvm::SmallVector<llvm::StringRef> parts;
  path.split(parts, '.');
  for (size_t i = 1; i < parts.size(); ++i) {
    int64_t index = 0;
    if (!parts[i].getAsInteger(10, index) && index >= 0) {
      return index;
    }
  }
  return std::nullopt;
}

void annotate(Operation *op, std::optional<std::string> modulePath) {
  if (!modulePath) {
    return;
  }
  Builder b(op->getContext());
  op->setAttr(tg::TGDialect::kModuleAttrName, b.getStringAttr(*modulePath));
  if (std::optional<int64_t> layer = layerOfPath(*modulePath)) {
    op->setAttr(tg::TGDialect::kLayerAttrName, b.getI64IntegerAttr(*layer));
  }
}

/// Breadth-first over producers, at most `limit` ops.
static Operation *nearestAnnotated(Value value, unsigned limit = 64) {
  std::deque<Value> queue{value};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!queue.empty() && seen.size() < limit) {
    Operation *op = queue.front().getDefiningOp();
    queue.pop_front();
    if (!op || !seen.insert(op).second) {
      continue;
    }
    if (op->hasAttr(tg::TGDialect::kModuleAttrName)) {
      return op;
    }
    for (Value operand : op->getOperands()) {
      queue.push_back(operand);
    }
  }
  return nullptr;
}

std::optional<int64_t> nearestLayer(Value value) {
  if (Operation *op = nearestAnnotated(value)) {
    if (auto layer = op->getAttrOfType<IntegerAttr>(tg::TGDialect::kLayerAttrName)) {
      return layer.getInt();
    }
  }
  return std::nullopt;
}

std::optional<std::string> nearestParentModule(Value value) {
  Operation *op = nearestAnnotated(value);
  if (!op) {
    return std::nullopt;
  }
  llvm::StringRef path =
      op->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName).getValue();
  size_t dot = path.rfind('.');
  if (dot == llvm::StringRef::npos) {
    return std::nullopt;
  }
  return path.take_front(dot).str();
}

} // namespace tailor::graph
