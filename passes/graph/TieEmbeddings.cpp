//===- TieEmbeddings.cpp - read a tied lm_head from its embedding table ---===//

#include "passes/graph/Passes.h"
#include "passes/graph/RaiseUtils.h"

#include "dialects/tg/TGShapes.h"

#include <fcntl.h>
#include <unistd.h>

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_TIEEMBEDDINGSPASS
#include "passes/graph/Passes.h.inc"

namespace {

/// Reads `size` bytes at `offset` of `file`; false if it cannot.
bool readAt(const std::string &file, uint64_t offset, void *out, size_t size) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  ssize_t got = ::pread(fd, out, size, static_cast<off_t>(offset));
  ::close(fd);
  return got == static_cast<ssize_t>(size);
}

/// True when `copy` holds `table` (transposed when `transposed`), judged on
/// 64 elements spread over the tensor by a fixed LCG. Parameters whose
/// bytes are not in a readable file never match.
bool sameValues(tg::ParamOp table, tg::ParamOp copy, bool transposed) {
  auto tableAt = llvm::dyn_cast_or_null<tg::ExternalDataAttr>(table.getLocationAttr());
  auto copyAt = llvm::dyn_cast_or_null<tg::ExternalDataAttr>(copy.getLocationAttr());
  if (!tableAt || !copyAt) {
    return false;
  }
  RankedTensorType type = table.getTensorType();
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  unsigned bytes = type.getElementType().getIntOrFloatBitWidth() / 8;
  if (bytes == 0 || bytes > 8 || rows * cols == 0) {
    return false;
  }
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int sample = 0; sample < 64; ++sample) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t index = (state >> 17) % static_cast<uint64_t>(rows * cols);
    uint64_t row = index / cols, col = index % cols;
    uint64_t copyIndex = transposed ? col * rows + row : index;
    uint64_t a = 0, b = 0;
    if (!readAt(tableAt.getFile().str(), tableAt.getOffset() + index * bytes,
                &a, bytes) ||
        !readAt(copyAt.getFile().str(), copyAt.getOffset() + copyIndex * bytes,
                &b, bytes) ||
        a != b) {
      return false;
    }
  }
  return true;
}

struct TieEmbeddingsPass : impl::TieEmbeddingsPassBase<TieEmbeddingsPass> {
  using TieEmbeddingsPassBase::TieEmbeddingsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (policy != "auto" && policy != "always" && policy != "never") {
      module.emitError() << "unknown tie policy '" << policy
                         << "' (expected auto, always or never)";
      return signalPassFailure();
    }
    if (policy == "never") {
      return;
    }
    // Embedding tables by parameter, with the module path of their lookup.
    struct Table {
      tg::ParamOp param;
      std::string path;
    };
    SmallVector<Table> tables;
    module.walk([&](tg::EmbeddingOp op) {
      tg::ParamRefOp ref = paramRefOf(op.getTable());
      auto path = op->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName);
      if (ref && path) {
        if (auto param = module.lookupSymbol<tg::ParamOp>(ref.getNameAttr())) {
          tables.push_back({param, path.str()});
        }
      }
    });
    if (tables.empty()) {
      return;
    }
    SmallVector<tg::ParamOp> dropped;
    module.walk([&](tg::LinearOp linear) {
      if (linear->hasAttr(tg::TGDialect::kTiedAttrName) || linear.getBias()) {
        return;
      }
      Value weight = linear.getWeight();
      bool transposed = false;
      tg::ParamRefOp ref = paramRefOf(weight);
      auto transpose = weight.getDefiningOp<tg::TransposeOp>();
      if (!ref && transpose) {
        ref = paramRefOf(transpose.getInput());
        transposed = true;
      }
      if (!ref) {
        return;
      }
      auto copy = module.lookupSymbol<tg::ParamOp>(ref.getNameAttr());
      auto path = linear->getAttrOfType<StringAttr>(tg::TGDialect::kModuleAttrName);
      for (Table &table : tables) {
        if (!copy || copy == table.param ||
            weight.getType() != table.param.getType()) {
          continue;
        }
        bool tie = policy == "always"
                       ? path && path.getValue().ends_with("lm_head")
                       : sameValues(table.param, copy, transposed);
        if (!tie) {
          continue;
        }
        OpBuilder builder(linear);
        auto tableRef = tg::ParamRefOp::create(
            builder, linear.getLoc(), table.param.getType(),
            table.param.getSymName());
        linear.getWeightMutable().assign(tableRef);
        linear->setAttr(tg::TGDialect::kTiedAttrName,
                        builder.getStringAttr(table.path));
        if (transpose && transpose->use_empty()) {
          transpose->erase();
        }
        if (ref->use_empty()) {
          ref->erase();
        }
        dropped.push_back(copy);
        return;
      }
    });
    // The copies are gone once nothing reads them.
    for (tg::ParamOp copy : dropped) {
      if (SymbolTable::symbolKnownUseEmpty(copy, module)) {
        copy->erase();
      }
    }
  }
};

} // namespace
} // namespace tailor::graph
