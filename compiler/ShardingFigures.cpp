//===- ShardingFigures.cpp - a plan's memory per trainable parameter -------===//

#include "compiler/ShardingFigures.h"

#include "runtime/MemoryCategory.h"
#include "runtime/Plan.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

namespace tailor {

namespace fb = tailor::plan;

namespace {

int64_t elementsOf(const fb::Buffer &buffer) {
  int64_t n = 1;
  for (int64_t d : *buffer.shape()) {
    n *= d;
  }
  return n;
}

/// P + G + K split as the strategy shards it, with N ranks per shard group.
void setTextbook(ShardingFigures &f) {
  double p = double(f.elementBytes), g = p;
  double k = double(f.optimizerStates * f.elementBytes);
  double n = double(f.strategy == "hybrid" ? f.ranksPerNode : f.worldSize);
  std::string ps = llvm::formatv("{0}", f.elementBytes).str();
  std::string ks = llvm::formatv("{0}", f.optimizerStates * f.elementBytes).str();
  std::string ns = llvm::formatv("{0}", int64_t(n)).str();
  if (f.strategy == "zero1") {
    f.textbookBytes = p + g + k / n;
    f.textbookFormula = ps + " + " + ps + " + " + ks + "/" + ns;
  } else if (f.strategy == "zero2" || f.strategy == "hybrid") {
    // tailor's hybrid is zero2 within each node.
    f.textbookBytes = p + (g + k) / n;
    f.textbookFormula = ps + " + (" + ps + " + " + ks + ")/" + ns;
  } else if (f.strategy == "zero3") {
    f.textbookBytes = (p + g + k) / n;
    f.textbookFormula = "(" + ps + " + " + ps + " + " + ks + ")/" + ns;
  } else {
    f.textbookBytes = p + g + k;
    f.textbookFormula = ps + " + " + ps + " + " + ks;
  }
}

} // namespace

std::optional<ShardingFigures> shardingFigures(const fb::Plan &p) {
  if (p.world_size() <= 1 || !p.parameters() || !p.states()) {
    return std::nullopt;
  }
  ShardingFigures f;
  f.worldSize = p.world_size();
  f.strategy = p.parallel() ? p.parallel()->strategy()->str() : "ddp";
  f.ranksPerNode = p.parallel() ? p.parallel()->ranks_per_node() : f.worldSize;
  double trainableBytes = 0;
  // ZeRO-3 members of a bucket share one chunk buffer: count it once.
  std::set<uint32_t> counted;
  for (const fb::Parameter *param : *p.parameters()) {
    if (!param->trainable()) {
      continue;
    }
    const fb::Buffer &buffer = *p.buffers()->Get(param->buffer());
    if (const fb::ParameterShard *shard = param->shard()) {
      int64_t n = 1;
      for (int64_t d : *shard->shape()) {
        n *= d;
      }
      f.trainableParameters += n;
    } else {
      f.trainableParameters += elementsOf(buffer);
    }
    f.elementBytes = static_cast<int64_t>(runtime::dtypeSize(
        static_cast<runtime::DType>(buffer.dtype())));
    if (counted.insert(param->buffer()).second) {
      trainableBytes += double(buffer.size());
    }
  }
  if (f.trainableParameters == 0) {
    return std::nullopt;
  }
  std::set<std::string> kinds;
  for (const fb::State *state : *p.states()) {
    if (state->kind()->string_view() != "grad") {
      kinds.insert(state->kind()->str());
    }
  }
  f.optimizerStates = static_cast<int64_t>(kinds.size());
  runtime::CategoryBytes bytes = runtime::arenaBytes(p);
  double count = double(f.trainableParameters);
  f.parameterBytes = trainableBytes / count;
  f.gradientBytes =
      double(bytes[static_cast<size_t>(fb::Category::Gradients)]) / count;
  f.optimizerBytes =
      double(bytes[static_cast<size_t>(fb::Category::OptimizerState)]) / count;
  setTextbook(f);
  return f;
}

} // namespace tailor
