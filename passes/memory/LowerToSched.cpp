//===- LowerToSched.cpp - plan one rank: tg -> sched ----------------------===//
//
// Kernel selection, execution order, buffer lifetimes and arena offsets for
// a single rank (see the pass description in Passes.td). Everything is
// decided from shapes and dtypes; no weight byte is read.
//
//===----------------------------------------------------------------------===//

#include "passes/memory/Passes.h"

#include "codegen/CpuKernels.h"
#include "dialects/tg/TGQuant.h"
#include "dialects/tg/TGShapes.h"
#include "passes/memory/Fusions.h"
#include "passes/memory/OpCost.h"
#include "passes/memory/PlannedProgram.h"
#include "runtime/cuda/QuantizedGemmWorkspace.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>

namespace tailor::memory {
#define GEN_PASS_DEF_LOWERTOSCHEDPASS
#include "passes/memory/Passes.h.inc"
} // namespace tailor::memory

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

namespace {

/// What a launch came from: the op, and the module (or node) it belongs to.
static std::string originOf(Operation *op) {
  std::string origin = op->getName().getStringRef().str();
  if (auto module = op->getAttrOfType<StringAttr>("tg.module")) {
    origin += " " + module.str();
  } else if (auto loc = llvm::dyn_cast<NameLoc>(op->getLoc())) {
    origin += " " + loc.getName().str();
  } else if (auto fused = llvm::dyn_cast<FusedLoc>(op->getLoc())) {
    for (Location inner : fused.getLocations()) {
      if (auto name = llvm::dyn_cast<NameLoc>(inner)) {
        origin += " " + name.getName().str();
        break;
      }
    }
  }
  if (op->hasAttr(tg::TGDialect::kRecomputedAttrName)) {
    origin += " (recomputed)";
  }
  return origin;
}

struct LowerToSchedPass
    : public memory::impl::LowerToSchedPassBase<LowerToSchedPass> {
  using LowerToSchedPassBase::LowerToSchedPassBase;

  void runOnOperation() override;

private:
  unsigned newRoot(Root root) {
    roots.push_back(std::move(root));
    return roots.size() - 1;
  }
  /// The root holding `value`. Planning gives every value a root when it
  /// plans the producer, so a miss is an internal error: it is reported at
  /// the value (once) and planning fails, rather than aliasing root 0.
  std::optional<unsigned> findRoot(Value value);
  /// The storage root of a tg.dequantize's weight; an error if it has none.
  FailureOr<Access> storageOf(tg::DequantizeOp dequantize);
  void touch(Value value, int64_t step) {
    if (std::optional<unsigned> root = findRoot(value)) {
      roots[*root].last = std::max(roots[*root].last, step);
    }
  }
  /// Only meaningful while findRoot finds `value`; a miss has already failed
  /// planning.
  Access accessOf(Value value) {
    Access access{findRoot(value).value_or(0), memrefFor(value.getType())};
    access.byteOffset = viewOffsets.lookup(value);
    return access;
  }

  /// The root of a declared parameter or state, made on first use.
  FailureOr<unsigned> paramRoot(ModuleOp module, Operation *user,
                                FlatSymbolRefAttr name);
  FailureOr<unsigned> stateRoot(ModuleOp module, Operation *user,
                                FlatSymbolRefAttr name);
  /// Plans one function into `entry`, numbering its steps from `step`:
  /// inputs, the fusion decisions, one step per op, then the outputs.
  LogicalResult planFunction(ModuleOp module, func::FuncOp func,
                             PlannedEntry &entry, int64_t &step);

  LogicalResult planInputs(func::FuncOp func, PlannedEntry &entry);
  /// A fusion group's one fused_elementwise launch, at its last member.
  LogicalResult planFusionGroup(const FusionGroup &group, PlannedEntry &entry,
                                int64_t step);
  /// `view` shares the storage of `of` (same bytes, its own shape); the
  /// storage lives at least to `step`.
  LogicalResult planView(Value view, Value of, int64_t step);
  /// Plans one op at `step`: a root (parameter, state, constant, view) or a
  /// launch.
  LogicalResult planOp(ModuleOp module, Operation &op, const Fusions &fusions,
                       PlannedEntry &entry, int64_t step);
  LogicalResult planDequantize(ModuleOp module, tg::DequantizeOp dequantize,
                               const Fusions &fusions, PlannedEntry &entry,
                               int64_t step);
  LogicalResult planConstant(arith::ConstantOp constant);
  /// Accumulations and optimizer updates: launches on whole states.
  LogicalResult planStateUpdate(ModuleOp module, Operation &op,
                                const Fusions &fusions, PlannedEntry &entry,
                                int64_t step);
  /// Gives the states of every gradient bucket their roots first, bucket
  /// after bucket, so each bucket's bytes are contiguous in the arena.
  LogicalResult placeBuckets(ModuleOp module);
  /// A bucket's all-reduce: a collective over its states.
  LogicalResult planAllReduce(ModuleOp module, tg::AllReduceStatesOp op,
                              PlannedEntry &entry);
  /// ZeRO buckets: one parameter root per bucket, its members placed in it
  /// at their offsets.
  LogicalResult placeShardBuckets(ModuleOp module);
  /// This rank's chunk of a bucket's flat parameters.
  Access chunkOf(tg::BucketOp bucket);
  /// The parameter operand of an update: a parameter's root, or this
  /// rank's chunk of a bucket.
  FailureOr<Access> updatedParam(ModuleOp module, Operation *update,
                                 FlatSymbolRefAttr name);
  /// ZeRO's collectives and resets: reduce-scatter, all-reduce of a value,
  /// the bucket all-gather, and zeroing states.
  LogicalResult planShardOp(ModuleOp module, Operation &op,
                            PlannedEntry &entry, int64_t step);
  /// A collective from `input` into a new activation of `result`'s type.
  LogicalResult planValueCollective(Operation &op, Value input, Value result,
                                    PlannedCollective collective,
                                    PlannedEntry &entry, int64_t step);
  /// Any other op: the CPU kernel selection's launch, its results new
  /// activations (or an accumulator written in place).
  LogicalResult planKernelLaunch(ModuleOp module, Operation &op,
                                 const Fusions &fusions, PlannedEntry &entry,
                                 int64_t step);
  LogicalResult planOutputs(func::FuncOp func, func::ReturnOp ret,
                            PlannedEntry &entry, int64_t &step);
  /// Each launch's FLOPs and bytes, for the cost model.
  void recordWork(PlannedEntry &entry);
  /// For each tg.overlap collective: the first later launch touching one of
  /// its roots (where compute waits for it), and its roots kept live until
  /// then (`endStep` when none does).
  void scheduleOverlaps(PlannedEntry &entry, int64_t endStep);
  LogicalResult proveItFits(ModuleOp module,
                            const memory::ProgramTarget &target);
  /// A launch whose operands are whole roots (states, parameters) or values
  /// seen with their own type (a reshape's view of a gradient, say).
  PlannedLaunch launchOf(Operation *op, StringRef kernel, int64_t arity,
                         ArrayRef<Access> operands);
  Access whole(unsigned root) { return Access{root, roots[root].type}; }
  /// The root of `value`, used at `step`; failure if it has none.
  FailureOr<unsigned> useAt(Value value, int64_t step);

  /// The `linear_quantized` kernel for `linear` reading `dequantize` (as W,
  /// or as W^T with `transposeWeight`); on CUDA targets through a cuBLASLt
  /// GEMM on bf16 copies (`via_gemm`, runtime/cuda/QuantizedGemmWorkspace.h).
  LogicalResult selectQuantizedLinear(tg::LinearOp linear,
                                      tg::DequantizeOp dequantize,
                                      bool transposeWeight,
                                      codegen::CpuKernelChoice &choice);

  std::vector<Root> roots;
  DenseMap<Value, unsigned> rootOf;
  /// The storage root of each tg.dequantize result.
  DenseMap<Value, Access> quantizedStorage;
  llvm::StringMap<unsigned> symbolRoots;
  /// The root of each ZeRO bucket's flat parameters (ZeRO-3: its chunk).
  llvm::StringMap<unsigned> bucketRoots;
  /// Values that are views at a byte offset into their root (members of a
  /// gathered ZeRO-3 bucket, and reshapes of them).
  DenseMap<Value, int64_t> viewOffsets;
  /// Ranks per node (tg.parallel), for chunks of buckets split per node.
  int64_t ranksPerNode = 1;
  DenseMap<Attribute, unsigned> constantRoots;
  /// CPU workers per-worker workspaces are sized for (1 on a GPU).
  int64_t workspaceThreads = 1;
  /// Set once findRoot reported a value without a root.
  bool missingRoot = false;
};

} // namespace

std::optional<unsigned> LowerToSchedPass::findRoot(Value value) {
  auto it = rootOf.find(value);
  if (it != rootOf.end()) {
    return it->second;
  }
  if (!missingRoot) {
    missingRoot = true;
    InFlightDiagnostic diag = mlir::emitError(value.getLoc())
                              << "internal error: ";
    if (auto result = llvm::dyn_cast<OpResult>(value)) {
      diag << "result " << result.getResultNumber() << " of '"
           << result.getOwner()->getName() << "'";
    } else {
      diag << "block argument "
           << llvm::cast<BlockArgument>(value).getArgNumber();
    }
    diag << " has no planned storage";
  }
  return std::nullopt;
}

FailureOr<Access> LowerToSchedPass::storageOf(tg::DequantizeOp dequantize) {
  auto it = quantizedStorage.find(dequantize.getResult());
  if (it == quantizedStorage.end()) {
    return dequantize.emitError()
           << "internal error: the quantized weight "
           << dequantize.getNameAttr() << " has no planned storage";
  }
  return it->second;
}

FailureOr<unsigned> LowerToSchedPass::paramRoot(ModuleOp module,
                                                Operation *user,
                                                FlatSymbolRefAttr name) {
  auto [it, inserted] = symbolRoots.try_emplace(name.getValue(), 0);
  if (!inserted) {
    return it->second;
  }
  auto param = module.lookupSymbol<tg::ParamOp>(name);
  if (!param) {
    symbolRoots.erase(it);
    return user->emitError() << "parameter " << name << " is not declared";
  }
  MemRefType type = memrefFor(param.getType());
  if (DictionaryAttr quant = param.getQuantAttr()) {
    // Quantized storage: the scheme's bytes, seen as a byte array.
    FailureOr<quant::QuantSpec> spec = tg::quantSpecFromDict(
        quant, [&] { return param.emitError() << "@" << param.getSymName() << ": "; });
    if (failed(spec)) {
      symbolRoots.erase(it);
      return failure();
    }
    type = MemRefType::get(
        {static_cast<int64_t>(quant::storageBytes(*spec))},
        IntegerType::get(module.getContext(), 8, IntegerType::Unsigned));
  }
  Root root = makeRoot(Home::Param, type);
  root.param = param;
  it->second = newRoot(std::move(root));
  return it->second;
}

FailureOr<unsigned> LowerToSchedPass::stateRoot(ModuleOp module,
                                                Operation *user,
                                                FlatSymbolRefAttr name) {
  auto [it, inserted] = symbolRoots.try_emplace(name.getValue(), 0);
  if (!inserted) {
    return it->second;
  }
  auto state = module.lookupSymbol<tg::StateOp>(name);
  if (!state) {
    symbolRoots.erase(it);
    return user->emitError() << "state " << name << " is not declared";
  }
  Root root = makeRoot(Home::State, memrefFor(state.getType()));
  root.state = state;
  it->second = newRoot(std::move(root));
  return it->second;
}

LogicalResult
LowerToSchedPass::selectQuantizedLinear(tg::LinearOp linear,
                                        tg::DequantizeOp dequantize,
                                        bool transposeWeight,
                                        codegen::CpuKernelChoice &choice) {
  auto param = SymbolTable::lookupNearestSymbolFrom<tg::ParamOp>(
      dequantize, dequantize.getNameAttr());
  if (!param) {
    return dequantize.emitError() << "parameter " << dequantize.getNameAttr()
                                  << " is not declared";
  }
  DictionaryAttr quant = param.getQuantAttr();
  FailureOr<quant::QuantSpec> spec = tg::quantSpecFromDict(
      quant, [&] { return dequantize.emitError(); });
  if (failed(spec)) {
    return failure();
  }
  choice.kernel = "linear_quantized";
  choice.arity = -1;
  // Every key written out, so the kernel never relies on defaults.
  NamedAttrList attributes(
      tg::quantSpecToDict(dequantize.getContext(), *spec, false).getValue());
  attributes.erase("source_transposed");
  attributes.set("transpose_weight",
                 IntegerAttr::get(IntegerType::get(dequantize.getContext(), 64),
                                  transposeWeight ? 1 : 0));
  choice.attributes = attributes;
  choice.workspaceBytes =
      quant::linearWorkspaceFloats(*spec, transposeWeight, workspaceThreads) *
      static_cast<int64_t>(sizeof(float));
  if (backend == "cuda") {
    // The GEMM route's bias is the cuBLASLt epilogue's: y's dtype, as tg's
    // linear has it.
    auto input = llvm::cast<RankedTensorType>(linear.getInput().getType());
    const runtime::cuda::QuantizedGemmLayout layout =
        runtime::cuda::quantizedGemmLayout(*spec, input.getNumElements(),
                                           input.getElementType().isF32());
    choice.attributes.set(
        "via_gemm",
        IntegerAttr::get(IntegerType::get(dequantize.getContext(), 64), 1));
    choice.workspaceBytes = std::max(
        choice.workspaceBytes,
        static_cast<int64_t>(llvm::alignTo(layout.totalBytes(), 4)));
  }
  return success();
}

LogicalResult LowerToSchedPass::planInputs(func::FuncOp func,
                                           PlannedEntry &entry) {
  for (BlockArgument arg : func.getBody().front().getArguments()) {
    if (!llvm::isa<RankedTensorType>(arg.getType()) ||
        !llvm::cast<ShapedType>(arg.getType()).hasStaticShape()) {
      return func.emitError() << "input " << arg.getArgNumber()
                              << " has no static shape; compile with "
                                 "--batch/--seq or --dim";
    }
    Root root = makeRoot(Home::Input, memrefFor(arg.getType()));
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tg.name");
    root.inputName =
        name ? name.str() : "input" + std::to_string(arg.getArgNumber());
    rootOf[arg] = newRoot(std::move(root));
    entry.inputs.push_back(rootOf[arg]);
  }
  return success();
}

PlannedLaunch LowerToSchedPass::launchOf(Operation *op, StringRef kernel,
                                         int64_t arity,
                                         ArrayRef<Access> operands) {
  PlannedLaunch launch;
  launch.op = op;
  launch.origin = originOf(op);
  launch.choice.kernel = kernel.str();
  launch.choice.arity = arity;
  launch.operands.assign(operands.begin(), operands.end());
  return launch;
}

FailureOr<unsigned> LowerToSchedPass::useAt(Value value, int64_t step) {
  auto it = rootOf.find(value);
  if (it == rootOf.end()) {
    return failure();
  }
  touch(value, step);
  return it->second;
}

static IntegerAttr i64AttrOf(MLIRContext *context, int64_t v) {
  return IntegerAttr::get(IntegerType::get(context, 64), v);
}

static FloatAttr f64AttrOf(MLIRContext *context, APFloat v) {
  return FloatAttr::get(Float64Type::get(context), v.convertToDouble());
}

LogicalResult LowerToSchedPass::planDequantize(ModuleOp module,
                                               tg::DequantizeOp dequantize,
                                               const Fusions &fusions,
                                               PlannedEntry &entry,
                                               int64_t step) {
  Operation &op = *dequantize;
  auto param = module.lookupSymbol<tg::ParamOp>(dequantize.getNameAttr());
  if (!param) {
    return op.emitError() << "parameter " << dequantize.getNameAttr()
                          << " is not declared";
  }
  // The stored bytes: the parameter's own, or a view of a gathered
  // ZeRO-3 bucket.
  Access storage;
  if (Value bytes = dequantize.getStorage()) {
    if (failed(useAt(bytes, step))) {
      return op.emitError() << "its stored bytes are not planned";
    }
    storage = accessOf(bytes);
  } else {
    FailureOr<unsigned> root = paramRoot(module, &op, dequantize.getNameAttr());
    if (failed(root)) {
      return failure();
    }
    storage = whole(*root);
  }
  quantizedStorage[dequantize.getResult()] = storage;
  if (fusions.fusedDequantizes.contains(&op)) {
    return success(); // the GEMMs that read it dequantize per tile
  }
  // Another reader needs the whole dense weight.
  roots[storage.root].last = std::max(roots[storage.root].last, step);
  FailureOr<quant::QuantSpec> spec = tg::quantSpecFromDict(
      param.getQuantAttr(), [&] { return op.emitError(); });
  if (failed(spec)) {
    return failure();
  }
  PlannedLaunch launch = launchOf(&op, "dequantize", 2, {storage});
  launch.choice.attributes = NamedAttrList(
      tg::quantSpecToDict(module.getContext(), *spec, false).getValue());
  launch.choice.attributes.erase("source_transposed");
  Root root = makeRoot(Home::Activation, memrefFor(dequantize.getType()));
  root.first = root.last = step;
  rootOf[dequantize.getResult()] = newRoot(std::move(root));
  launch.operands.push_back(accessOf(dequantize.getResult()));
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult LowerToSchedPass::planConstant(arith::ConstantOp constant) {
  auto value = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!value || !llvm::isa<RankedTensorType>(constant.getType())) {
    return constant.emitError() << "only dense tensor constants can be planned";
  }
  if (!codegen::isCpuElementType(value.getElementType())) {
    return constant.emitError() << "the CPU backend has no "
                                << value.getElementType() << " constants";
  }
  auto [it, inserted] = constantRoots.try_emplace(value, 0);
  if (inserted) {
    Root root = makeRoot(Home::Constant, memrefFor(constant.getType()));
    root.constant = value;
    it->second = newRoot(std::move(root));
  }
  rootOf[constant.getResult()] = it->second;
  return success();
}

/// Whether `a` and `b` are the same view of the same root.
static bool sameAccess(const Access &a, const Access &b) {
  return a.root == b.root && a.type == b.type && a.rankStride == b.rankStride &&
         a.rankPeriod == b.rankPeriod && a.byteOffset == b.byteOffset;
}

/// Folds the AdamW update `next` into `last`, the launch planned just
/// before it, when `last` is an AdamW update with the same attributes and
/// the same lr, step and grad_scale: an optimizer step's consecutive
/// updates become one adamw_multi launch (param, grad, exp_avg, exp_avg_sq
/// per parameter, then the scalars), which computes each parameter's
/// update exactly as adamw does (issue 20: one launch, not one per
/// trainable tensor). Returns false, leaving both alone, otherwise.
static bool joinAdamW(PlannedLaunch &last, PlannedLaunch &&next) {
  if (last.collective || last.copy ||
      (last.choice.kernel != "adamw" && last.choice.kernel != "adamw_multi") ||
      last.choice.attributes.getAttrs() != next.choice.attributes.getAttrs()) {
    return false;
  }
  size_t scalars = last.operands.size() - 3;
  for (size_t i = 0; i < 3; ++i) {
    if (!sameAccess(last.operands[scalars + i], next.operands[4 + i])) {
      return false;
    }
  }
  last.operands.insert(last.operands.begin() + scalars, next.operands.begin(),
                       next.operands.begin() + 4);
  last.choice.kernel = "adamw_multi";
  last.choice.arity = -1;
  last.origin = "tg.adamw_update (" +
                std::to_string(last.operands.size() / 4) + " parameters)";
  return true;
}

LogicalResult LowerToSchedPass::planStateUpdate(ModuleOp module, Operation &op,
                                                const Fusions &fusions,
                                                PlannedEntry &entry,
                                                int64_t step) {
  MLIRContext *context = module.getContext();
  if (auto accumulate = llvm::dyn_cast<tg::AccumulateOp>(op)) {
    Operation *producer = accumulate.getValue().getDefiningOp();
    auto inPlace = fusions.accumulatedInPlace.find(producer);
    if (inPlace != fusions.accumulatedInPlace.end() &&
        inPlace->second == accumulate) {
      return success();
    }
    FailureOr<unsigned> target =
        stateRoot(module, &op, accumulate.getTargetAttr());
    if (failed(target) || failed(useAt(accumulate.getValue(), step))) {
      return op.emitError() << "cannot plan this accumulation";
    }
    entry.launches.push_back(launchOf(
        &op, "accumulate", 2,
        {accessOf(accumulate.getValue()), whole(*target)}));
    return success();
  }
  if (auto adamw = llvm::dyn_cast<tg::AdamWUpdateOp>(op)) {
    SmallVector<Access> operands;
    for (FlatSymbolRefAttr name : {adamw.getGradAttr(), adamw.getExpAvgAttr(),
                                   adamw.getExpAvgSqAttr()}) {
      FailureOr<unsigned> root = stateRoot(module, &op, name);
      if (failed(root)) {
        return failure();
      }
      operands.push_back(whole(*root));
    }
    FailureOr<Access> param = updatedParam(module, &op, adamw.getParamAttr());
    if (failed(param)) {
      return failure();
    }
    operands.insert(operands.begin(), *param);
    for (Value scalar : {adamw.getLr(), adamw.getStep(), adamw.getGradScale()}) {
      if (failed(useAt(scalar, step))) {
        return op.emitError() << "operand defined outside the planned function";
      }
      operands.push_back(accessOf(scalar));
    }
    PlannedLaunch launch = launchOf(&op, "adamw", 7, operands);
    launch.choice.attributes.set("beta1", f64AttrOf(context, adamw.getBeta1()));
    launch.choice.attributes.set("beta2", f64AttrOf(context, adamw.getBeta2()));
    launch.choice.attributes.set("epsilon",
                                 f64AttrOf(context, adamw.getEpsilon()));
    launch.choice.attributes.set("weight_decay",
                                 f64AttrOf(context, adamw.getWeightDecay()));
    launch.origin = "tg.adamw_update " + adamw.getParam().str();
    if (entry.launches.empty() ||
        !joinAdamW(entry.launches.back(), std::move(launch))) {
      entry.launches.push_back(std::move(launch));
    }
    return success();
  }
  auto sgd = llvm::cast<tg::SGDUpdateOp>(op);
  FailureOr<Access> param = updatedParam(module, &op, sgd.getParamAttr());
  FailureOr<unsigned> grad = stateRoot(module, &op, sgd.getGradAttr());
  FailureOr<unsigned> buffer =
      stateRoot(module, &op, sgd.getMomentumBufferAttr());
  if (failed(param) || failed(grad) || failed(buffer)) {
    return failure();
  }
  if (failed(useAt(sgd.getLr(), step)) ||
      failed(useAt(sgd.getGradScale(), step))) {
    return op.emitError() << "operand defined outside the planned function";
  }
  PlannedLaunch launch = launchOf(
      &op, "sgd", 5,
      {*param, whole(*grad), whole(*buffer), accessOf(sgd.getLr()),
       accessOf(sgd.getGradScale())});
  launch.choice.attributes.set("momentum",
                               f64AttrOf(context, sgd.getMomentum()));
  launch.choice.attributes.set("weight_decay",
                               f64AttrOf(context, sgd.getWeightDecay()));
  launch.choice.attributes.set("nesterov",
                               i64AttrOf(context, sgd.getNesterov() ? 1 : 0));
  launch.origin = "tg.sgd_update " + sgd.getParam().str();
  entry.launches.push_back(std::move(launch));
  return success();
}

/// The sched reduction of a tg collective.
static sched::Reduction schedReduction(tg::CommReduction reduction) {
  return reduction == tg::CommReduction::Avg ? sched::Reduction::Avg
                                             : sched::Reduction::Sum;
}

LogicalResult LowerToSchedPass::placeBuckets(ModuleOp module) {
  WalkResult walk = module.walk([&](tg::AllReduceStatesOp reduce) {
    for (Attribute name : reduce.getStates()) {
      if (failed(stateRoot(module, reduce,
                           llvm::cast<FlatSymbolRefAttr>(name)))) {
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult LowerToSchedPass::planAllReduce(ModuleOp module,
                                              tg::AllReduceStatesOp op,
                                              PlannedEntry &entry) {
  PlannedLaunch launch;
  launch.op = op;
  PlannedCollective collective;
  collective.kind = sched::CollectiveKind::AllReduce;
  collective.reduction = schedReduction(op.getReduction());
  collective.group = op.getGroup();
  collective.overlap = op->hasAttr(tg::TGDialect::kOverlapAttrName);
  launch.collective = collective;
  for (Attribute name : op.getStates()) {
    FailureOr<unsigned> root =
        stateRoot(module, op, llvm::cast<FlatSymbolRefAttr>(name));
    if (failed(root)) {
      return failure();
    }
    launch.operands.push_back(whole(*root));
  }
  launch.origin = "tg.all_reduce_states (" +
                  std::to_string(op.getStates().size()) + " gradients)";
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult LowerToSchedPass::placeShardBuckets(ModuleOp module) {
  for (tg::BucketOp bucket : module.getOps<tg::BucketOp>()) {
    // ZeRO-3 keeps one chunk; otherwise (an offloaded host bucket too:
    // one shard, every rank's own) the whole flat space.
    bool chunked = bucket.getShardedParams() && !bucket.getHost();
    MemRefType flatType =
        chunked ? memrefFor(bucket.getChunkType())
                : MemRefType::get({static_cast<int64_t>(bucket.getSize())},
                                  bucket.getElementType());
    Root flat = makeRoot(Home::Param, flatType);
    flat.bucket = bucket;
    flat.host = bucket.getHost();
    unsigned index = newRoot(std::move(flat));
    bucketRoots[bucket.getSymName()] = index;
    int64_t elementBytes = tg::byteSize(
        RankedTensorType::get({1}, bucket.getElementType()));
    for (auto [name, offset] :
         llvm::zip(bucket.getMembers(), bucket.getOffsets())) {
      FailureOr<unsigned> member =
          paramRoot(module, bucket, llvm::cast<FlatSymbolRefAttr>(name));
      if (failed(member)) {
        return failure();
      }
      Root &root = roots[*member];
      if (root.within) {
        return bucket.emitError() << name << " is in two buckets";
      }
      root.within = index;
      root.host = bucket.getHost();
      if (chunked) {
        // Its bytes are this rank's chunk, which all members share.
        root.type = flatType;
        root.bytes = storageBytes(flatType);
        root.shardOf = bucket;
        root.shardOffset = offset;
      } else {
        root.withinOffset = static_cast<uint64_t>(offset * elementBytes);
      }
    }
  }
  return success();
}

Access LowerToSchedPass::chunkOf(tg::BucketOp bucket) {
  RankedTensorType chunk = bucket.getChunkType();
  Access access{bucketRoots.lookup(bucket.getSymName()), memrefFor(chunk)};
  if (bucket.getShardedParams()) {
    return access; // the root is the chunk
  }
  access.rankStride = tg::byteSize(chunk);
  access.rankPeriod =
      bucket.getGroup() == tg::CommGroup::Node ? ranksPerNode : 0;
  return access;
}

FailureOr<Access> LowerToSchedPass::updatedParam(ModuleOp module,
                                                 Operation *update,
                                                 FlatSymbolRefAttr name) {
  if (auto bucket = module.lookupSymbol<tg::BucketOp>(name)) {
    return chunkOf(bucket);
  }
  FailureOr<unsigned> root = paramRoot(module, update, name);
  if (failed(root)) {
    return failure();
  }
  return whole(*root);
}

LogicalResult LowerToSchedPass::planValueCollective(
    Operation &op, Value input, Value result, PlannedCollective collective,
    PlannedEntry &entry, int64_t step) {
  if (failed(useAt(input, step))) {
    return op.emitError() << "operand defined outside the planned function";
  }
  Root root = makeRoot(Home::Activation, memrefFor(result.getType()));
  root.first = root.last = step;
  rootOf[result] = newRoot(std::move(root));
  PlannedLaunch launch;
  launch.op = &op;
  launch.origin = originOf(&op);
  collective.inPlace = false;
  collective.overlap = op.hasAttr(tg::TGDialect::kOverlapAttrName);
  launch.collective = collective;
  launch.operands = {accessOf(input), accessOf(result)};
  entry.launches.push_back(std::move(launch));
  return success();
}

/// A reducing collective of `kind` over `group`.
static PlannedCollective reducing(sched::CollectiveKind kind,
                                  tg::CommReduction reduction,
                                  tg::CommGroup group) {
  PlannedCollective collective;
  collective.kind = kind;
  collective.reduction = schedReduction(reduction);
  collective.group = group;
  return collective;
}

LogicalResult LowerToSchedPass::planShardOp(ModuleOp module, Operation &op,
                                            PlannedEntry &entry, int64_t step) {
  if (auto scatter = llvm::dyn_cast<tg::ReduceScatterOp>(op)) {
    return planValueCollective(
        op, scatter.getInput(), scatter.getResult(),
        reducing(sched::CollectiveKind::ReduceScatter,
                 scatter.getReduction(), scatter.getGroup()),
        entry, step);
  }
  if (auto reduce = llvm::dyn_cast<tg::AllReduceOp>(op)) {
    return planValueCollective(
        op, reduce.getInput(), reduce.getResult(),
        reducing(sched::CollectiveKind::AllReduce, reduce.getReduction(),
                 reduce.getGroup()),
        entry, step);
  }
  if (auto gather = llvm::dyn_cast<tg::AllGatherBucketOp>(op)) {
    auto bucket = module.lookupSymbol<tg::BucketOp>(gather.getBucketAttr());
    if (!bucket) {
      return op.emitError() << gather.getBucketAttr()
                            << " does not name a tg.bucket";
    }
    PlannedLaunch launch;
    launch.op = &op;
    launch.origin = originOf(&op);
    PlannedCollective collective;
    collective.kind = sched::CollectiveKind::AllGather;
    collective.group = bucket.getGroup();
    collective.inPlace = false;
    launch.collective = collective;
    Access chunk = chunkOf(bucket);
    launch.operands = {chunk, whole(chunk.root)};
    entry.launches.push_back(std::move(launch));
    return success();
  }
  if (auto gather = llvm::dyn_cast<tg::GatherBucketOp>(op)) {
    auto bucket = module.lookupSymbol<tg::BucketOp>(gather.getBucketAttr());
    if (!bucket || !bucket.getShardedParams()) {
      return op.emitError() << gather.getBucketAttr()
                            << " is not a tg.bucket of sharded parameters";
    }
    Root root = makeRoot(Home::Activation, memrefFor(gather.getType()));
    root.first = root.last = step;
    rootOf[gather.getResult()] = newRoot(std::move(root));
    PlannedLaunch launch;
    launch.op = &op;
    launch.origin = originOf(&op);
    if (bucket.getHost()) {
      // Offloaded: the whole bucket, copied to the device.
      PlannedCopy copy;
      copy.kind = sched::CopyKind::HostToDevice;
      copy.overlap = op.hasAttr(tg::TGDialect::kOverlapAttrName);
      launch.copy = copy;
      launch.operands = {whole(bucketRoots.lookup(bucket.getSymName())),
                         accessOf(gather.getResult())};
      entry.launches.push_back(std::move(launch));
      return success();
    }
    PlannedCollective collective;
    collective.kind = sched::CollectiveKind::AllGather;
    collective.group = bucket.getGroup();
    collective.inPlace = false;
    collective.overlap = op.hasAttr(tg::TGDialect::kOverlapAttrName);
    launch.collective = collective;
    launch.operands = {chunkOf(bucket), accessOf(gather.getResult())};
    entry.launches.push_back(std::move(launch));
    return success();
  }
  if (auto member = llvm::dyn_cast<tg::BucketMemberOp>(op)) {
    // A view into the gathered bucket; it extends the gather's life.
    std::optional<unsigned> input = findRoot(member.getInput());
    if (!input) {
      return failure();
    }
    auto inputType = llvm::cast<RankedTensorType>(member.getInput().getType());
    rootOf[member.getResult()] = *input;
    viewOffsets[member.getResult()] =
        viewOffsets.lookup(member.getInput()) +
        static_cast<int64_t>(member.getOffset()) *
            tg::byteSize(RankedTensorType::get({1}, inputType.getElementType()));
    touch(member.getInput(), step);
    return success();
  }
  auto zero = llvm::cast<tg::ZeroStatesOp>(op);
  for (Attribute name : zero.getStates()) {
    FailureOr<unsigned> root =
        stateRoot(module, &op, llvm::cast<FlatSymbolRefAttr>(name));
    if (failed(root)) {
      return failure();
    }
    entry.launches.push_back(launchOf(&op, "zero", 1, {whole(*root)}));
  }
  return success();
}

LogicalResult LowerToSchedPass::planKernelLaunch(ModuleOp module, Operation &op,
                                                 const Fusions &fusions,
                                                 PlannedEntry &entry,
                                                 int64_t step) {
  MLIRContext *context = module.getContext();
  if (op.getNumRegions() != 0) {
    return op.emitError() << "ops with regions cannot be planned";
  }
  FailureOr<codegen::CpuKernelChoice> choice =
      codegen::selectCpuKernel(&op, workspaceThreads, backend == "cuda");
  if (failed(choice)) {
    return failure();
  }
  PlannedLaunch launch;
  launch.op = &op;
  launch.choice = std::move(*choice);
  launch.origin = originOf(&op);
  SmallVector<Value> operands;
  for (Value operand : op.getOperands()) {
    operands.push_back(fusions.readValue(operand));
  }
  if (auto linear = llvm::dyn_cast<tg::LinearOp>(op)) {
    Operation *weight = linear.getWeight().getDefiningOp();
    bool transposeWeight = weight && fusions.foldedTransposes.contains(weight);
    if (transposeWeight) {
      operands[1] = weight->getOperand(0);
      launch.choice.attributes.set("transpose_weight", i64AttrOf(context, 1));
    }
    auto dequantize = operands[1].getDefiningOp<tg::DequantizeOp>();
    if (dequantize && fusions.fusedDequantizes.contains(dequantize)) {
      if (failed(selectQuantizedLinear(linear, dequantize, transposeWeight,
                                       launch.choice))) {
        return failure();
      }
      FailureOr<Access> storage = storageOf(dequantize);
      if (failed(storage)) {
        return failure();
      }
      roots[storage->root].last = std::max(roots[storage->root].last, step);
      launch.operands.push_back(accessOf(operands[0]));
      touch(operands[0], step);
      launch.operands.push_back(*storage);
      operands.erase(operands.begin(), operands.begin() + 2);
    }
  }
  for (Value operand : operands) {
    if (failed(useAt(operand, step))) {
      return op.emitError() << "operand defined outside the planned function";
    }
    launch.operands.push_back(accessOf(operand));
  }
  auto inPlace = fusions.accumulatedInPlace.find(&op);
  auto overOperand = fusions.resultOverOperand.find(&op);
  auto epilogue = fusions.gemmEpilogues.find(&op);
  if (epilogue != fusions.gemmEpilogues.end() && epilogue->second.alpha != 1.0) {
    launch.choice.attributes.set(
        "alpha", FloatAttr::get(Float64Type::get(context),
                                epilogue->second.alpha));
  }
  for (Value result : op.getResults()) {
    auto type = llvm::dyn_cast<RankedTensorType>(result.getType());
    if (!type || !type.hasStaticShape()) {
      return op.emitError() << "result has no static shape";
    }
    if (overOperand != fusions.resultOverOperand.end()) {
      // Written over an input read here for the last time.
      std::optional<unsigned> root =
          findRoot(op.getOperand(overOperand->second));
      if (!root) {
        return failure();
      }
      rootOf[result] = *root;
    } else if (inPlace != fusions.accumulatedInPlace.end()) {
      tg::AccumulateOp accumulate = inPlace->second;
      FailureOr<unsigned> target =
          stateRoot(module, accumulate, accumulate.getTargetAttr());
      if (failed(target)) {
        return failure();
      }
      rootOf[result] = *target;
      launch.choice.attributes.set("accumulate", i64AttrOf(context, 1));
    } else if (epilogue != fusions.gemmEpilogues.end() &&
               epilogue->second.into) {
      // Adds its product into the addend's buffer, read last here.
      if (failed(planView(result, epilogue->second.into, step))) {
        return failure();
      }
      launch.choice.attributes.set("accumulate", i64AttrOf(context, 1));
    } else {
      Root root = makeRoot(Home::Activation, memrefFor(type));
      root.first = root.last = step;
      rootOf[result] = newRoot(std::move(root));
    }
    launch.operands.push_back(accessOf(result));
  }
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult LowerToSchedPass::planFusionGroup(const FusionGroup &group,
                                                PlannedEntry &entry,
                                                int64_t step) {
  MLIRContext *context = group.members.back()->getContext();
  PlannedLaunch launch;
  launch.op = group.members.back();
  launch.choice.kernel = "fused_elementwise";
  launch.choice.arity = -1;
  launch.choice.attributes.set("program", StringAttr::get(context, group.program));
  launch.choice.attributes.set(
      "outputs", DenseI64ArrayAttr::get(context, group.outputInstructions));
  launch.origin = originOf(launch.op) + " (+" +
                  std::to_string(group.members.size() - 1) + " fused)";
  for (Operation *member : group.members) {
    launch.flops += costOf(member).flops;
  }
  for (Value input : group.inputs) {
    if (failed(useAt(input, step))) {
      return launch.op->emitError()
             << "operand defined outside the planned function";
    }
    launch.operands.push_back(accessOf(input));
    launch.bytes += double(storageBytes(llvm::cast<ShapedType>(input.getType())));
  }
  for (Value output : group.outputs) {
    Root root = makeRoot(Home::Activation,
                         memrefFor(llvm::cast<RankedTensorType>(output.getType())));
    root.first = root.last = step;
    rootOf[output] = newRoot(std::move(root));
    launch.operands.push_back(accessOf(output));
    launch.bytes += double(storageBytes(llvm::cast<ShapedType>(output.getType())));
  }
  entry.launches.push_back(std::move(launch));
  return success();
}

LogicalResult LowerToSchedPass::planView(Value view, Value of, int64_t step) {
  std::optional<unsigned> root = findRoot(of);
  if (!root) {
    return failure();
  }
  rootOf[view] = *root;
  if (int64_t offset = viewOffsets.lookup(of)) {
    viewOffsets[view] = offset;
  }
  touch(of, step);
  return success();
}

LogicalResult LowerToSchedPass::planOp(ModuleOp module, Operation &op,
                                       const Fusions &fusions,
                                       PlannedEntry &entry, int64_t step) {
  if (auto ref = llvm::dyn_cast<tg::ParamRefOp>(op)) {
    FailureOr<unsigned> root = paramRoot(module, &op, ref.getNameAttr());
    if (failed(root)) {
      return failure();
    }
    rootOf[ref.getResult()] = *root;
    return success();
  }
  if (auto dequantize = llvm::dyn_cast<tg::DequantizeOp>(op)) {
    return planDequantize(module, dequantize, fusions, entry, step);
  }
  if (auto ref = llvm::dyn_cast<tg::StateRefOp>(op)) {
    FailureOr<unsigned> root = stateRoot(module, &op, ref.getNameAttr());
    if (failed(root)) {
      return failure();
    }
    rootOf[ref.getResult()] = *root;
    return success();
  }
  if (auto constant = llvm::dyn_cast<arith::ConstantOp>(op)) {
    return planConstant(constant);
  }
  if (auto reshape = llvm::dyn_cast<tg::ReshapeOp>(op)) {
    return planView(reshape.getResult(), reshape.getInput(), step);
  }
  if (fusions.foldedTransposes.contains(&op)) {
    return success();
  }
  if (auto scale = fusions.foldedScales.find(&op);
      scale != fusions.foldedScales.end()) {
    // Applied by GEMMs: a view of the product that GEMM made, or nothing
    // (its readers read the other factor).
    return scale->second.intoProducer
               ? planView(op.getResult(0), scale->second.source, step)
               : success();
  }
  if (auto group = fusions.groupOf.find(&op); group != fusions.groupOf.end()) {
    const FusionGroup &fused = fusions.groups[group->second];
    // One launch for the group, where its last member is.
    return &op == fused.members.back()
               ? planFusionGroup(fused, entry, step)
               : success();
  }
  if (auto add = fusions.foldedAdds.find(&op); add != fusions.foldedAdds.end()) {
    return planView(op.getResult(0), add->second, step); // the GEMM added
  }
  if (llvm::isa<tg::AccumulateOp, tg::AdamWUpdateOp, tg::SGDUpdateOp>(op)) {
    return planStateUpdate(module, op, fusions, entry, step);
  }
  if (auto reduce = llvm::dyn_cast<tg::AllReduceStatesOp>(op)) {
    return planAllReduce(module, reduce, entry);
  }
  if (llvm::isa<tg::ReduceScatterOp, tg::AllReduceOp, tg::AllGatherBucketOp,
                tg::ZeroStatesOp, tg::GatherBucketOp, tg::BucketMemberOp>(op)) {
    return planShardOp(module, op, entry, step);
  }
  return planKernelLaunch(module, op, fusions, entry, step);
}

LogicalResult LowerToSchedPass::planOutputs(func::FuncOp func,
                                            func::ReturnOp ret,
                                            PlannedEntry &entry,
                                            int64_t &step) {
  // Outputs live to the end of the entry and each needs its own storage: an
  // output that is an input, a parameter, a constant, a state or another
  // output's storage is copied into a fresh buffer, so callers can read
  // every output independently and inputs stay untouched.
  int64_t endStep = step + 1;
  DenseSet<unsigned> outputRoots;
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    auto name = func.getResultAttrOfType<StringAttr>(index, "tg.name");
    std::string outputName = name ? name.str() : "output" + std::to_string(index);
    std::optional<unsigned> found = findRoot(value);
    if (!found) {
      return failure();
    }
    unsigned rootIndex = *found;
    bool needsCopy = roots[rootIndex].home != Home::Activation ||
                     !outputRoots.insert(rootIndex).second;
    Access stored = accessOf(value);
    if (needsCopy) {
      touch(value, step);
      Root root = makeRoot(Home::Activation, stored.type);
      root.first = step;
      rootIndex = newRoot(std::move(root));
      outputRoots.insert(rootIndex);
      codegen::CpuKernelChoice copy;
      copy.kernel = "copy";
      copy.arity = 2;
      Access copied{rootIndex, stored.type};
      PlannedLaunch launch;
      launch.choice = std::move(copy);
      launch.operands = {stored, copied};
      launch.origin = "output copy of " + outputName;
      entry.launches.push_back(std::move(launch));
      stored = copied;
    }
    roots[rootIndex].last = endStep;
    entry.outputs.emplace_back(outputName, stored);
  }
  step = endStep;
  return success();
}

LogicalResult LowerToSchedPass::planFunction(ModuleOp module, func::FuncOp func,
                                             PlannedEntry &entry,
                                             int64_t &step) {
  if (!func.getBody().hasOneBlock()) {
    return func.emitError() << "expected a single-block function to plan";
  }
  Block &body = func.getBody().front();
  entry.name = func.getSymName().str();
  if (failed(planInputs(func, entry))) {
    return failure();
  }
  // CUDA plans group elementwise ops once the compiler generates their
  // kernels (codegen/README.md).
  FusionOptions fusionOptions;
  fusionOptions.elementwiseGroups = backend != "cuda";
  Fusions fusions = decideFusions(body, fusionOptions);
  func::ReturnOp ret;
  for (Operation &op : body) {
    ++step;
    if (auto r = llvm::dyn_cast<func::ReturnOp>(op)) {
      ret = r;
      break;
    }
    size_t planned = entry.launches.size();
    if (failed(planOp(module, op, fusions, entry, step))) {
      return failure();
    }
    for (size_t i = planned; i < entry.launches.size(); ++i) {
      entry.launches[i].step = step;
    }
  }
  if (!ret) {
    return func.emitError() << "the function has no return";
  }
  size_t planned = entry.launches.size();
  if (failed(planOutputs(func, ret, entry, step))) {
    return failure();
  }
  for (size_t i = planned; i < entry.launches.size(); ++i) {
    entry.launches[i].step = step;
  }
  scheduleOverlaps(entry, step);
  recordWork(entry);
  return failure(missingRoot);
}

void LowerToSchedPass::scheduleOverlaps(PlannedEntry &entry,
                                        int64_t endStep) {
  for (size_t i = 0; i < entry.launches.size(); ++i) {
    PlannedLaunch &launch = entry.launches[i];
    bool overlapped = (launch.collective && launch.collective->overlap) ||
                      (launch.copy && launch.copy->overlap);
    if (!overlapped) {
      continue;
    }
    llvm::SmallDenseSet<unsigned> touched;
    for (Access operand : launch.operands) {
      touched.insert(operand.root);
    }
    int64_t until = endStep;
    for (size_t j = i + 1; j < entry.launches.size(); ++j) {
      if (llvm::any_of(entry.launches[j].operands, [&](Access operand) {
            return touched.contains(operand.root);
          })) {
        (launch.collective ? launch.collective->waitBefore
                           : launch.copy->waitBefore) = j;
        until = entry.launches[j].step;
        break;
      }
    }
    // In flight until the wait: nothing else may take its bytes.
    for (unsigned root : touched) {
      roots[root].last = std::max(roots[root].last, until);
    }
  }
}

/// What linear_quantized's GEMM route (via_gemm) moves besides the GEMM:
/// the packed weight read, then the bf16 copies of x and W written and
/// read back (runtime/cuda/QuantizedGemmWorkspace.h).
static double viaGemmBytes(const PlannedLaunch &launch) {
  auto viaGemm = llvm::dyn_cast_or_null<IntegerAttr>(
      launch.choice.attributes.get("via_gemm"));
  if (!viaGemm || viaGemm.getInt() == 0 || launch.operands.size() < 2) {
    return 0;
  }
  // The scheme's own keys (selectQuantizedLinear wrote them, checked).
  NamedAttrList keys = launch.choice.attributes;
  for (StringRef launchKey : {"transpose_weight", "via_gemm", "accumulate",
                               "alpha"}) {
    keys.erase(launchKey);
  }
  FailureOr<quant::QuantSpec> spec = tg::quantSpecFromDict(
      keys.getDictionary(launch.op->getContext()),
      [&] { return launch.op->emitError(); });
  if (failed(spec)) {
    return 0;
  }
  auto x = llvm::cast<MemRefType>(launch.operands[0].type);
  runtime::cuda::QuantizedGemmLayout layout = runtime::cuda::quantizedGemmLayout(
      *spec, x.getNumElements(), x.getElementType().isF32());
  return double(storageBytes(launch.operands[1].type)) +
         2.0 * double(layout.xBytes + layout.weightBytes);
}

/// AdamW reads the parameter, its gradient and both moments and writes the
/// parameter and the moments back: (param, grad, m, v) per parameter, then
/// three scalars, in adamw and adamw_multi alike. (The tg op names its
/// tensors by symbol, so costOf sees only the scalars.)
static double adamwBytes(const PlannedLaunch &launch) {
  double bytes = 0;
  size_t tensors = launch.operands.size() - 3;
  for (size_t i = 0; i < launch.operands.size(); ++i) {
    double size = double(storageBytes(launch.operands[i].type));
    bool written = i < tensors && i % 4 != 1;
    bytes += written ? 2 * size : size;
  }
  return bytes;
}

/// A GEMM that adds into its output (a folded addition) reads it too.
static double addendBytes(const PlannedLaunch &launch) {
  if (!llvm::isa<tg::LinearOp>(launch.op) ||
      !launch.choice.attributes.get("accumulate")) {
    return 0;
  }
  auto result = llvm::cast<RankedTensorType>(launch.op->getResult(0).getType());
  return double(storageBytes(result));
}

void LowerToSchedPass::recordWork(PlannedEntry &entry) {
  for (PlannedLaunch &launch : entry.launches) {
    if (launch.collective) {
      for (Access operand : launch.operands) {
        launch.bytes += double(storageBytes(operand.type));
      }
    } else if (launch.copy) { // the bytes moved
      launch.bytes = double(storageBytes(launch.operands[1].type));
    } else if (launch.choice.kernel == "zero") { // one write of the state
      launch.bytes = double(storageBytes(launch.operands[0].type));
    } else if (launch.choice.kernel == "adamw" ||
               launch.choice.kernel == "adamw_multi") {
      launch.flops = 0;
      launch.bytes = adamwBytes(launch);
    } else if (launch.choice.kernel == "fused_elementwise") {
      // The group's work, counted when it was planned.
    } else if (launch.op) {
      OpCost cost = costOf(launch.op);
      launch.flops = cost.flops;
      launch.bytes = cost.bytes + viaGemmBytes(launch) + addendBytes(launch);
    } else if (!launch.operands.empty()) { // an output copy: read, write
      launch.bytes = 2.0 * double(storageBytes(launch.operands[0].type));
    }
  }
}

/// The plan is a proof that the step fits: device arenas beyond the GPU's
/// memory (less room for the CUDA context) or beyond the budget are an
/// error now, naming the excess, not an out-of-memory error at run time.
/// Host arenas (offload) do not count.
LogicalResult LowerToSchedPass::proveItFits(ModuleOp module,
                                            const memory::ProgramTarget &target) {
  // The CUDA context, cuBLASLt's handle and the loaded modules live
  // outside the plan's arenas: keep room for them.
  int64_t limit = 0;
  std::string what;
  auto gib = [](int64_t bytes) {
    return bytes >= int64_t(1) << 30
               ? llvm::formatv("{0:F2} GiB", bytes / double(1 << 30)).str()
               : llvm::formatv("{0:F2} MiB", bytes / double(1 << 20)).str();
  };
  if (target.isCuda() && deviceMemory > 0) {
    limit = deviceMemory - kCudaContextReserveBytes;
    what = hardware + " has " + std::to_string(deviceMemory) + " (" +
           gib(deviceMemory) +
           "), of which 512 MiB are kept for the CUDA context and libraries";
  }
  if (deviceBudget > 0 && (limit == 0 || deviceBudget < limit)) {
    limit = deviceBudget;
    what = "the budget (device_memory_budget_gib) is " +
           std::to_string(static_cast<int64_t>(deviceBudget)) + " (" +
           gib(deviceBudget) + ")";
  }
  if (limit == 0) {
    return success();
  }
  int64_t total = 0;
  for (auto program : module.getOps<sched::ProgramOp>()) {
    program.walk([&](sched::ArenaOp arena) {
      if (arena.getKind() == sched::ArenaKind::Device) {
        total += arena.getSize();
      }
    });
  }
  if (total <= limit) {
    return success();
  }
  return module.emitError()
         << "the plan needs " << total << " bytes (" << gib(total)
         << ")" << memory::kDeviceMemoryExceeded << what
         << ": it exceeds that by "
         << gib(total - limit);
}

void LowerToSchedPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (!module.getOps<sched::ProgramOp>().empty()) {
    module.emitError() << "the module already holds a sched.program";
    return signalPassFailure();
  }
  // --- Which functions, in entry order --------------------------------------
  SmallVector<std::string> names;
  if (functionName.empty()) {
    if (module.lookupSymbol<func::FuncOp>("forward") ||
        !module.lookupSymbol<func::FuncOp>("train_step")) {
      names = {"forward"};
    } else {
      names = {"train_step", "optimizer_step"};
      if (module.lookupSymbol<func::FuncOp>("eval_step")) {
        names.push_back("eval_step");
      }
    }
  } else {
    for (StringRef name : llvm::split(StringRef(functionName), ',')) {
      names.push_back(name.trim().str());
    }
  }
  SmallVector<func::FuncOp> funcs;
  for (const std::string &name : names) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func) {
      module.emitError() << "no function @" << name << " to plan";
      return signalPassFailure();
    }
    funcs.push_back(func);
  }
  if (backend != "cpu" && backend != "cuda") {
    module.emitError() << "unknown backend '" << backend
                       << "' (expected cpu or cuda)";
    return signalPassFailure();
  }
  if (backend == "cuda" && sm < 80) {
    module.emitError() << "tailor's CUDA kernels need sm_80 or newer (bf16 "
                          "tensor cores); "
                       << hardware << " is sm_" << static_cast<int64_t>(sm);
    return signalPassFailure();
  }
  if (precision != "fp32" && precision != "bf16") {
    module.emitError() << "unknown precision '" << precision
                       << "' (expected fp32 or bf16)";
    return signalPassFailure();
  }
  // GPU kernels size their scratch per launch, not per CPU worker.
  workspaceThreads = backend == "cuda" ? 1 : threads;
  roots.clear();
  rootOf.clear();
  quantizedStorage.clear();
  symbolRoots.clear();
  bucketRoots.clear();
  viewOffsets.clear();
  constantRoots.clear();
  missingRoot = false;
  ranksPerNode = 1;
  if (auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel")) {
    ranksPerNode = parallel.getAs<IntegerAttr>("ranks_per_node").getInt();
  }

  // --- Roots and lifetimes, one timeline through every entry ----------------
  if (failed(placeShardBuckets(module)) || failed(placeBuckets(module))) {
    return signalPassFailure();
  }
  std::vector<PlannedEntry> entries(funcs.size());
  int64_t step = 0;
  for (auto [func, entry] : llvm::zip(funcs, entries)) {
    if (failed(planFunction(module, func, entry, step))) {
      return signalPassFailure();
    }
  }
  // Inputs keep their bytes for the whole program: a caller sets them once
  // and may run an entry again, or run another entry in between.
  for (Root &root : roots) {
    if (root.home == Home::Input) {
      root.first = 0;
      root.last = step;
    }
  }

  memory::ProgramTarget target;
  target.backend = backend;
  target.hardware = hardware;
  target.sm = sm;
  target.precision = precision;
  target.deviceMemory = deviceMemory;
  target.gemmWorkspaceBytes = gemmWorkspace;
  if (auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel")) {
    target.worldSize = parallel.getAs<IntegerAttr>("world_size").getInt();
    target.ranksPerNode =
        parallel.getAs<IntegerAttr>("ranks_per_node").getInt();
  }
  if (failed(memory::emitProgram(module, funcs.front().getLoc(), roots, entries,
                                 workspaceThreads, alignment, target))) {
    return signalPassFailure();
  }
  if (failed(proveItFits(module, target))) {
    return signalPassFailure();
  }

  // The program replaces the functions and the symbol declarations; what
  // raising could not do stays on the module for the plan's notes.
  SmallVector<Attribute> unraised;
  for (func::FuncOp func : funcs) {
    if (auto list = func->getAttrOfType<ArrayAttr>(
            tg::TGDialect::kUnraisedAttentionAttrName)) {
      llvm::append_range(unraised, list.getValue());
    }
  }
  if (!unraised.empty()) {
    module->setAttr(tg::TGDialect::kUnraisedAttentionAttrName,
                    ArrayAttr::get(module.getContext(), unraised));
  }
  for (func::FuncOp func : funcs) {
    func.erase();
  }
  for (Operation &op : llvm::make_early_inc_range(module.getOps())) {
    if (llvm::isa<tg::ParamOp, tg::StateOp, tg::BucketOp>(op)) {
      op.erase();
    }
  }
}
