//===- RaiseEmbedding.cpp - name embeddings, find a tied lm_head ----------===//

#include "passes/graph/Passes.h"
#include "passes/graph/RaiseUtils.h"

using namespace mlir;

namespace tailor::graph {

#define GEN_PASS_DEF_RAISEEMBEDDINGPASS
#include "passes/graph/Passes.h.inc"

namespace {

struct RaiseEmbeddingPass : impl::RaiseEmbeddingPassBase<RaiseEmbeddingPass> {
  void runOnOperation() override {
    Builder b(&getContext());
    // Parameter symbol -> module path of the embedding reading it.
    llvm::StringMap<std::string> tables;
    getOperation().walk([&](tg::EmbeddingOp op) {
      tg::ParamRefOp table = paramRefOf(op.getTable());
      // A table reshaped by the importer (Gather on a rank-2 parameter is
      // already 2-D, so this is the parameter itself in practice).
      if (!table) {
        if (auto reshape = op.getTable().getDefiningOp<tg::ReshapeOp>()) {
          table = paramRefOf(reshape.getInput());
        }
      }
      if (!table) {
        return;
      }
      std::optional<std::string> path = modulePathFromParamName(table.getName());
      if (!path) {
        path = modulePathFromLoc(op.getLoc());
      }
      annotate(op, path);
      if (path) {
        tables[table.getName()] = *path;
      }
    });
    if (tables.empty()) {
      return;
    }
    // A linear layer whose weight is an embedding table: tied embeddings.
    getOperation().walk([&](tg::LinearOp op) {
      Value weight = op.getWeight();
      tg::ParamRefOp param = paramRefOf(weight);
      if (!param) {
        if (auto transpose = weight.getDefiningOp<tg::TransposeOp>()) {
          param = paramRefOf(transpose.getInput());
        }
      }
      if (!param) {
        return;
      }
      auto it = tables.find(param.getName());
      if (it != tables.end()) {
        op->setAttr(tg::TGDialect::kTiedAttrName, b.getStringAttr(it->second));
      }
    });
  }
};

} // namespace
} // namespace tailor::graph
