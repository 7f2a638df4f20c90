//===- LowerToSched.cpp - plan one rank: tg -> sched ----------------------===//
//
// Kernel selection, execution order, buffer lifetimes and arena offsets for
// a single rank (see the pass description in Passes.td). Everything is
// decided from shapes and dtypes; no weight byte is read.
//
//===----------------------------------------------------------------------===//

#include "passes/memory/Passes.h"

#include "codegen/CpuKernels.h"
#include "dialects/tg/TGShapes.h"
#include "passes/memory/ArenaPacking.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

namespace tailor::memory {
#define GEN_PASS_DEF_LOWERTOSCHEDPASS
#include "passes/memory/Passes.h.inc"
} // namespace tailor::memory

using namespace mlir;
using namespace tailor;

namespace {

/// Where a root buffer lives. Views (reshapes) share their root's storage.
enum class Home { Input, Param, Constant, Activation, State };

/// A piece of storage: one input, parameter, constant or kernel result.
struct Root {
  Home home = Home::Activation;
  MemRefType type;
  int64_t bytes = 0;
  /// Live range in steps (op positions in the function), inclusive.
  int64_t first = 0;
  int64_t last = 0;
  uint64_t offset = 0;
  tg::ParamOp param;
  tg::StateOp state;
  Attribute constant;
  std::string inputName;
  /// Set once the sched op that defines the storage has been emitted.
  Value view;
};

/// Bytes a plan stores for `type`: booleans take a byte each.
static int64_t storageBytes(ShapedType type) {
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return tg::numElements(type.getShape()) * std::max<int64_t>(1, bits / 8);
}

static Root makeRoot(Home home, MemRefType type) {
  Root root;
  root.home = home;
  root.type = type;
  root.bytes = storageBytes(type);
  return root;
}

static MemRefType memrefFor(Type tensorType) {
  auto shaped = llvm::cast<RankedTensorType>(tensorType);
  return MemRefType::get(shaped.getShape(), shaped.getElementType());
}

static uint64_t alignTo(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

static Value createBuffer(OpBuilder &builder, Location loc, MemRefType type,
                          FlatSymbolRefAttr arena, int64_t offset,
                          int64_t size) {
  return sched::BufferOp::create(builder, loc, type, arena,
                                 builder.getI64IntegerAttr(offset),
                                 builder.getI64IntegerAttr(size));
}

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
  return origin;
}

/// A launch operand: a root's storage seen with one tensor type (a
/// reshape's view shares its root's bytes).
struct Access {
  unsigned root;
  MemRefType type;
};

/// One planned kernel launch (or output copy).
struct PlannedLaunch {
  Operation *op = nullptr; // null for an output copy
  codegen::CpuKernelChoice choice;
  SmallVector<Access> operands; // inputs then results
  std::string origin;
};

/// One planned function: an entry of the program.
struct PlannedEntry {
  std::string name;
  SmallVector<unsigned> inputs; // roots, in argument order
  SmallVector<PlannedLaunch> launches;
  SmallVector<std::pair<std::string, Access>> outputs;
};

struct LowerToSchedPass
    : public memory::impl::LowerToSchedPassBase<LowerToSchedPass> {
  using LowerToSchedPassBase::LowerToSchedPassBase;

  void runOnOperation() override;

private:
  unsigned newRoot(Root root) {
    roots.push_back(std::move(root));
    return roots.size() - 1;
  }
  void touch(Value value, int64_t step) {
    Root &root = roots[rootOf.lookup(value)];
    root.last = std::max(root.last, step);
  }
  Access accessOf(Value value) {
    return {rootOf.lookup(value), memrefFor(value.getType())};
  }

  /// The root of a declared parameter or state, made on first use.
  FailureOr<unsigned> paramRoot(ModuleOp module, Operation *user,
                                FlatSymbolRefAttr name);
  FailureOr<unsigned> stateRoot(ModuleOp module, Operation *user,
                                FlatSymbolRefAttr name);
  /// Plans one function into `entry`, numbering its steps from `step`.
  LogicalResult planFunction(ModuleOp module, func::FuncOp func,
                             PlannedEntry &entry, int64_t &step);

  std::vector<Root> roots;
  DenseMap<Value, unsigned> rootOf;
  llvm::StringMap<unsigned> symbolRoots;
  DenseMap<Attribute, unsigned> constantRoots;
};

} // namespace

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
  Root root = makeRoot(Home::Param, memrefFor(param.getType()));
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

/// Kernels that can add their result into an accumulator instead of
/// writing a fresh buffer (attribute `accumulate`).
static bool canAccumulateInPlace(Operation *op) {
  return llvm::isa_and_nonnull<tg::LinearWeightGradOp, tg::EmbeddingGradOp>(op);
}

LogicalResult LowerToSchedPass::planFunction(ModuleOp module, func::FuncOp func,
                                             PlannedEntry &entry,
                                             int64_t &step) {
  MLIRContext *context = module.getContext();
  if (!func.getBody().hasOneBlock()) {
    return func.emitError() << "expected a single-block function to plan";
  }
  Block &body = func.getBody().front();
  entry.name = func.getSymName().str();

  for (BlockArgument arg : body.getArguments()) {
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

  // Exporters that pre-transpose Linear weights leave `transpose(W)` feeding
  // tg.linear, and the backward pass of a linear layer multiplies by W
  // through `linear(dy, transpose(W))`; the linear kernel reads W as stored
  // instead (attribute `transpose_weight`), so no launch copies a weight.
  DenseSet<Operation *> foldedTransposes;
  for (auto transpose : body.getOps<tg::TransposeOp>()) {
    bool swap2d = transpose.getPermutation() == ArrayRef<int64_t>{1, 0};
    bool onlyLinearWeights =
        !transpose->use_empty() &&
        llvm::all_of(transpose->getUses(), [](OpOperand &use) {
          return llvm::isa<tg::LinearOp>(use.getOwner()) &&
                 use.getOperandNumber() == 1;
        });
    if (swap2d && onlyLinearWeights) {
      foldedTransposes.insert(transpose);
    }
  }
  // Weight and embedding gradients whose only use is an accumulation add
  // straight into the accumulator.
  DenseMap<Operation *, tg::AccumulateOp> accumulatedInPlace;
  for (auto accumulate : body.getOps<tg::AccumulateOp>()) {
    Operation *producer = accumulate.getValue().getDefiningOp();
    if (canAccumulateInPlace(producer) && accumulate.getValue().hasOneUse()) {
      accumulatedInPlace[producer] = accumulate;
    }
  }

  auto i64Attr = [&](int64_t v) {
    return IntegerAttr::get(IntegerType::get(context, 64), v);
  };
  auto f64Attr = [&](APFloat v) {
    return FloatAttr::get(Float64Type::get(context), v.convertToDouble());
  };
  auto launchOf = [&](Operation *op, StringRef kernel, int64_t arity,
                      ArrayRef<unsigned> operandRoots) {
    PlannedLaunch launch{op, {}, {}, originOf(op)};
    launch.choice.kernel = kernel.str();
    launch.choice.arity = arity;
    for (unsigned root : operandRoots) {
      launch.operands.push_back({root, roots[root].type});
    }
    return launch;
  };
  auto rootOfValue = [&](Value value) -> FailureOr<unsigned> {
    auto it = rootOf.find(value);
    if (it == rootOf.end()) {
      return failure();
    }
    touch(value, step);
    return it->second;
  };

  func::ReturnOp ret;
  for (Operation &op : body) {
    ++step;
    if (auto r = llvm::dyn_cast<func::ReturnOp>(op)) {
      ret = r;
      break;
    }
    if (auto ref = llvm::dyn_cast<tg::ParamRefOp>(op)) {
      FailureOr<unsigned> root = paramRoot(module, &op, ref.getNameAttr());
      if (failed(root)) {
        return failure();
      }
      rootOf[ref.getResult()] = *root;
      continue;
    }
    if (auto ref = llvm::dyn_cast<tg::StateRefOp>(op)) {
      FailureOr<unsigned> root = stateRoot(module, &op, ref.getNameAttr());
      if (failed(root)) {
        return failure();
      }
      rootOf[ref.getResult()] = *root;
      continue;
    }
    if (auto constant = llvm::dyn_cast<arith::ConstantOp>(op)) {
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
      continue;
    }
    if (auto reshape = llvm::dyn_cast<tg::ReshapeOp>(op)) {
      // A view: same storage, new shape; it extends its root's life.
      rootOf[reshape.getResult()] = rootOf.lookup(reshape.getInput());
      touch(reshape.getInput(), step);
      continue;
    }
    if (foldedTransposes.contains(&op)) {
      continue;
    }
    // --- In-place state updates ---------------------------------------------
    if (auto accumulate = llvm::dyn_cast<tg::AccumulateOp>(op)) {
      Operation *producer = accumulate.getValue().getDefiningOp();
      if (accumulatedInPlace.lookup(producer) == accumulate) {
        continue;
      }
      FailureOr<unsigned> target = stateRoot(module, &op, accumulate.getTargetAttr());
      FailureOr<unsigned> value = rootOfValue(accumulate.getValue());
      if (failed(target) || failed(value)) {
        return op.emitError() << "cannot plan this accumulation";
      }
      entry.launches.push_back(launchOf(&op, "accumulate", 2, {*value, *target}));
      continue;
    }
    if (auto adamw = llvm::dyn_cast<tg::AdamWUpdateOp>(op)) {
      SmallVector<unsigned> operands;
      for (FlatSymbolRefAttr name : {adamw.getGradAttr(), adamw.getExpAvgAttr(),
                                     adamw.getExpAvgSqAttr()}) {
        FailureOr<unsigned> root = stateRoot(module, &op, name);
        if (failed(root)) {
          return failure();
        }
        operands.push_back(*root);
      }
      FailureOr<unsigned> param = paramRoot(module, &op, adamw.getParamAttr());
      if (failed(param)) {
        return failure();
      }
      operands.insert(operands.begin(), *param);
      for (Value scalar : {adamw.getLr(), adamw.getStep(), adamw.getGradScale()}) {
        operands.push_back(*rootOfValue(scalar));
      }
      PlannedLaunch launch = launchOf(&op, "adamw", 7, operands);
      launch.choice.attributes.set("beta1", f64Attr(adamw.getBeta1()));
      launch.choice.attributes.set("beta2", f64Attr(adamw.getBeta2()));
      launch.choice.attributes.set("epsilon", f64Attr(adamw.getEpsilon()));
      launch.choice.attributes.set("weight_decay", f64Attr(adamw.getWeightDecay()));
      launch.origin = "tg.adamw_update " + adamw.getParam().str();
      entry.launches.push_back(std::move(launch));
      continue;
    }
    if (auto sgd = llvm::dyn_cast<tg::SGDUpdateOp>(op)) {
      FailureOr<unsigned> param = paramRoot(module, &op, sgd.getParamAttr());
      FailureOr<unsigned> grad = stateRoot(module, &op, sgd.getGradAttr());
      FailureOr<unsigned> buffer =
          stateRoot(module, &op, sgd.getMomentumBufferAttr());
      if (failed(param) || failed(grad) || failed(buffer)) {
        return failure();
      }
      PlannedLaunch launch =
          launchOf(&op, "sgd", 5,
                   {*param, *grad, *buffer, *rootOfValue(sgd.getLr()),
                    *rootOfValue(sgd.getGradScale())});
      launch.choice.attributes.set("momentum", f64Attr(sgd.getMomentum()));
      launch.choice.attributes.set("weight_decay", f64Attr(sgd.getWeightDecay()));
      launch.choice.attributes.set("nesterov", i64Attr(sgd.getNesterov() ? 1 : 0));
      launch.origin = "tg.sgd_update " + sgd.getParam().str();
      entry.launches.push_back(std::move(launch));
      continue;
    }
    if (op.getNumRegions() != 0) {
      return op.emitError() << "ops with regions cannot be planned";
    }
    FailureOr<codegen::CpuKernelChoice> choice =
        codegen::selectCpuKernel(&op, threads);
    if (failed(choice)) {
      return failure();
    }
    PlannedLaunch launch{&op, std::move(*choice), {}, originOf(&op)};
    SmallVector<Value> operands(op.getOperands());
    if (auto linear = llvm::dyn_cast<tg::LinearOp>(op)) {
      Operation *weight = linear.getWeight().getDefiningOp();
      if (weight && foldedTransposes.contains(weight)) {
        operands[1] = weight->getOperand(0);
        launch.choice.attributes.set("transpose_weight", i64Attr(1));
      }
    }
    for (Value operand : operands) {
      FailureOr<unsigned> root = rootOfValue(operand);
      if (failed(root)) {
        return op.emitError() << "operand defined outside the planned function";
      }
      launch.operands.push_back(accessOf(operand));
    }
    tg::AccumulateOp inPlace = accumulatedInPlace.lookup(&op);
    for (Value result : op.getResults()) {
      auto type = llvm::dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.hasStaticShape()) {
        return op.emitError() << "result has no static shape";
      }
      if (inPlace) {
        FailureOr<unsigned> target =
            stateRoot(module, inPlace, inPlace.getTargetAttr());
        if (failed(target)) {
          return failure();
        }
        rootOf[result] = *target;
        launch.choice.attributes.set("accumulate", i64Attr(1));
      } else {
        Root root = makeRoot(Home::Activation, memrefFor(type));
        root.first = root.last = step;
        rootOf[result] = newRoot(std::move(root));
      }
      launch.operands.push_back(accessOf(result));
    }
    entry.launches.push_back(std::move(launch));
  }
  if (!ret) {
    return func.emitError() << "the function has no return";
  }

  // --- Outputs: live to the end of the entry; each needs its own storage ---
  // An output that is an input, a parameter, a constant, a state or another
  // output's storage is copied into a fresh buffer, so callers can read
  // every output independently and inputs stay untouched.
  int64_t endStep = step + 1;
  DenseSet<unsigned> outputRoots;
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    auto name = func.getResultAttrOfType<StringAttr>(index, "tg.name");
    std::string outputName = name ? name.str() : "output" + std::to_string(index);
    unsigned rootIndex = rootOf.lookup(value);
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
      entry.launches.push_back({nullptr, std::move(copy), {stored, copied},
                                "output copy of " + outputName});
      stored = copied;
    }
    roots[rootIndex].last = endStep;
    entry.outputs.emplace_back(outputName, stored);
  }
  step = endStep;
  return success();
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
  roots.clear();
  rootOf.clear();
  symbolRoots.clear();
  constantRoots.clear();

  // --- Roots and lifetimes, one timeline through every entry ----------------
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

  // --- Offsets -----------------------------------------------------------
  uint64_t align = static_cast<uint64_t>(alignment);
  if (alignment <= 0 || (align & (align - 1)) != 0) {
    module.emitError() << "alignment must be a power of two, got " << alignment;
    return signalPassFailure();
  }
  uint64_t paramBytes = 0, constantBytes = 0, gradientBytes = 0,
           optimizerBytes = 0;
  std::vector<memory::LiveBuffer> live;
  std::vector<unsigned> liveRoots;
  auto place = [&](Root &root, uint64_t &arenaBytes) {
    root.offset = arenaBytes;
    arenaBytes = alignTo(arenaBytes + root.bytes, align);
  };
  for (auto [index, root] : llvm::enumerate(roots)) {
    switch (root.home) {
    case Home::Param:
      place(root, paramBytes);
      break;
    case Home::Constant:
      place(root, constantBytes);
      break;
    case Home::State:
      place(root, root.state.getKind() == tg::StateKind::Grad ? gradientBytes
                                                               : optimizerBytes);
      break;
    case Home::Input:
    case Home::Activation:
      live.push_back({root.first, root.last, static_cast<uint64_t>(root.bytes), 0});
      liveRoots.push_back(index);
      break;
    }
  }
  memory::PackingResult packing = memory::packBuffers(live, align);
  for (auto [buffer, index] : llvm::zip(live, liveRoots)) {
    roots[index].offset = buffer.offset;
  }
  int64_t workspaceBytes = 0;
  for (const PlannedEntry &entry : entries) {
    for (const PlannedLaunch &launch : entry.launches) {
      workspaceBytes = std::max(workspaceBytes, launch.choice.workspaceBytes);
    }
  }
  workspaceBytes = alignTo(workspaceBytes, align);
  bool training = gradientBytes > 0 || optimizerBytes > 0;

  // --- Emit the program ----------------------------------------------------
  OpBuilder builder(module.getContext());
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = funcs.front().getLoc();
  auto program = sched::ProgramOp::create(builder, loc, "rank0", 0, 1);
  program.getBody().emplaceBlock();
  builder.setInsertionPointToStart(&program.getBody().front());
  auto arena = [&](StringRef name, sched::ArenaCategory category,
                   uint64_t size) {
    sched::ArenaOp::create(builder, loc, name, sched::ArenaKind::Host, category,
                           static_cast<int64_t>(size), alignment);
    return FlatSymbolRefAttr::get(builder.getContext(), name);
  };
  FlatSymbolRefAttr paramsArena =
      arena("parameters", sched::ArenaCategory::Parameters, paramBytes);
  FlatSymbolRefAttr constantsArena =
      arena("constants", sched::ArenaCategory::Constants, constantBytes);
  FlatSymbolRefAttr activationsArena = arena(
      "activations", sched::ArenaCategory::Activations, packing.arenaBytes);
  FlatSymbolRefAttr workspaceArena = arena(
      "workspace", sched::ArenaCategory::Workspace, workspaceBytes);
  FlatSymbolRefAttr gradientsArena, optimizerArena;
  if (training) {
    gradientsArena =
        arena("gradients", sched::ArenaCategory::Gradients, gradientBytes);
    optimizerArena = arena("optimizer_state",
                           sched::ArenaCategory::OptimizerState, optimizerBytes);
  }
  program->setAttr("sched.threads", builder.getI64IntegerAttr(threads));
  program->setAttr("sched.activations_live_bytes",
                   builder.getI64IntegerAttr(packing.liveBytesLowerBound));
  sched::StreamOp::create(builder, loc, "compute");
  auto stream = FlatSymbolRefAttr::get(builder.getContext(), "compute");
  llvm::StringMap<int64_t> kernels;
  for (const PlannedEntry &entry : entries) {
    for (const PlannedLaunch &launch : entry.launches) {
      auto [it, inserted] = kernels.try_emplace(launch.choice.kernel,
                                                launch.choice.arity);
      if (inserted) {
        sched::KernelOp::create(builder, loc, launch.choice.kernel,
                                launch.choice.arity);
      }
    }
  }

  for (Root &root : roots) {
    if (root.home != Home::Param) {
      continue;
    }
    auto init = root.param.getInitAttr();
    if (!root.param.getLocation() && !init) {
      root.param.emitError() << "parameter '" << root.param.getSymName()
                             << "' has no bytes to bind (no data location "
                                "and no init)";
      return signalPassFailure();
    }
    if (llvm::isa_and_nonnull<tg::InitializerDataAttr>(
            root.param.getLocationAttr())) {
      root.param.emitError()
          << "parameter '" << root.param.getSymName()
          << "' is stored inside an ONNX text model or as typed data, which "
             "plans cannot reference by offset; use a binary model with "
             "raw_data or external data";
      return signalPassFailure();
    }
  }

  // Storage-defining views, made where first needed.
  auto defineRoot = [&](Root &root) -> Value {
    if (root.view) {
      return root.view;
    }
    int64_t offset = static_cast<int64_t>(root.offset);
    switch (root.home) {
    case Home::Input:
      root.view = sched::InputOp::create(
          builder, loc, root.type, builder.getStringAttr(root.inputName),
          activationsArena, builder.getI64IntegerAttr(offset),
          builder.getI64IntegerAttr(root.bytes));
      break;
    case Home::Param: {
      StringAttr file, initKind;
      IntegerAttr fileOffset, fileLength;
      FloatAttr initValue;
      if (auto external = llvm::dyn_cast_or_null<tg::ExternalDataAttr>(
              root.param.getLocationAttr())) {
        file = external.getFile();
        fileOffset = builder.getI64IntegerAttr(external.getOffset());
        fileLength = builder.getI64IntegerAttr(external.getLength());
      } else if (tg::InitAttr init = root.param.getInitAttr()) {
        initKind = init.getKind();
        initValue = builder.getF64FloatAttr(init.getValue().getValueAsDouble());
      }
      root.view = sched::ParamOp::create(
          builder, root.param.getLoc(), root.type,
          builder.getStringAttr(root.param.getSymName()), paramsArena,
          builder.getI64IntegerAttr(offset),
          builder.getI64IntegerAttr(root.bytes), file, fileOffset, fileLength,
          root.param.getTrainable() ? builder.getUnitAttr() : UnitAttr(),
          initKind, initValue);
      for (StringRef name : {tg::TGDialect::kExportNameAttrName,
                             tg::TGDialect::kExportTransposedAttrName}) {
        if (Attribute attr = root.param->getAttr(name)) {
          root.view.getDefiningOp()->setAttr(name, attr);
        }
      }
      break;
    }
    case Home::State:
      root.view = sched::StateOp::create(
          builder, root.state.getLoc(), root.type,
          builder.getStringAttr(root.state.getSymName()),
          root.state.getKind() == tg::StateKind::Grad ? gradientsArena
                                                      : optimizerArena,
          builder.getI64IntegerAttr(offset),
          builder.getI64IntegerAttr(root.bytes),
          builder.getStringAttr(root.state.getParameter()),
          builder.getStringAttr(tg::stringifyStateKind(root.state.getKind())));
      break;
    case Home::Constant:
      root.view = sched::ConstantOp::create(
          builder, loc, root.type, constantsArena,
          builder.getI64IntegerAttr(offset),
          builder.getI64IntegerAttr(root.bytes),
          llvm::cast<ElementsAttr>(root.constant));
      break;
    case Home::Activation:
      root.view = createBuffer(builder, loc, root.type, activationsArena,
                               offset, root.bytes);
      break;
    }
    return root.view;
  };
  // Parameters first, in declaration order of first use, then states.
  for (Root &root : roots) {
    if (root.home == Home::Param) {
      defineRoot(root);
    }
  }
  for (Root &root : roots) {
    if (root.home == Home::State) {
      defineRoot(root);
    }
  }

  // The buffer an access reads or writes: its root, or a view of it.
  DenseMap<std::pair<unsigned, Type>, Value> views;
  auto bufferFor = [&](Access access) -> Value {
    Value &view = views[{access.root, access.type}];
    if (view) {
      return view;
    }
    Root &root = roots[access.root];
    MemRefType type = access.type;
    view = defineRoot(root);
    if (type != root.type) {
      FlatSymbolRefAttr arenaName =
          root.home == Home::Param      ? paramsArena
          : root.home == Home::Constant ? constantsArena
          : root.home == Home::State
              ? (root.state.getKind() == tg::StateKind::Grad ? gradientsArena
                                                             : optimizerArena)
              : activationsArena;
      view = createBuffer(builder, loc, type, arenaName,
                          static_cast<int64_t>(root.offset), root.bytes);
    }
    return view;
  };

  // A lone `forward` function is the whole program; otherwise every
  // function is an entry.
  bool markEntries = entries.size() > 1 || entries.front().name != "forward";
  for (PlannedEntry &entry : entries) {
    if (markEntries) {
      sched::EntryOp::create(builder, loc, entry.name);
    }
    for (unsigned input : entry.inputs) {
      defineRoot(roots[input]);
    }
    for (PlannedLaunch &launch : entry.launches) {
      SmallVector<Value> args;
      for (Access operand : launch.operands) {
        args.push_back(bufferFor(operand));
      }
      if (launch.choice.workspaceBytes > 0) {
        auto type = MemRefType::get({launch.choice.workspaceBytes /
                                     static_cast<int64_t>(sizeof(float))},
                                    builder.getF32Type());
        args.push_back(createBuffer(builder, loc, type, workspaceArena, 0,
                                    launch.choice.workspaceBytes));
      }
      Location launchLoc = launch.op ? launch.op->getLoc() : loc;
      DictionaryAttr attrs =
          launch.choice.attributes.empty()
              ? DictionaryAttr()
              : launch.choice.attributes.getDictionary(builder.getContext());
      sched::LaunchOp::create(
          builder, launchLoc,
          FlatSymbolRefAttr::get(builder.getContext(), launch.choice.kernel),
          args, stream, attrs, builder.getStringAttr(launch.origin),
          DenseI64ArrayAttr(), DenseI64ArrayAttr());
    }
    for (auto &[name, access] : entry.outputs) {
      sched::OutputOp::create(builder, loc, name, bufferFor(access));
    }
  }

  // The program replaces the functions and the symbol declarations.
  for (func::FuncOp func : funcs) {
    func.erase();
  }
  for (Operation &op : llvm::make_early_inc_range(module.getOps())) {
    if (llvm::isa<tg::ParamOp, tg::StateOp>(op)) {
      op.erase();
    }
  }
}
