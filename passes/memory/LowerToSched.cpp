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
enum class Home { Input, Param, Constant, Activation };

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

  std::vector<Root> roots;
  DenseMap<Value, unsigned> rootOf;
};

} // namespace

void LowerToSchedPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto func = module.lookupSymbol<func::FuncOp>(functionName);
  if (!func) {
    module.emitError() << "no function @" << functionName << " to plan";
    return signalPassFailure();
  }
  if (!func.getBody().hasOneBlock()) {
    func.emitError() << "expected a single-block function to plan";
    return signalPassFailure();
  }
  Block &body = func.getBody().front();
  if (!module.getOps<sched::ProgramOp>().empty()) {
    module.emitError() << "the module already holds a sched.program";
    return signalPassFailure();
  }
  roots.clear();
  rootOf.clear();

  // --- Roots and lifetimes, in program order ---------------------------
  SmallVector<std::string> inputNames;
  for (BlockArgument arg : body.getArguments()) {
    if (!llvm::isa<RankedTensorType>(arg.getType()) ||
        !llvm::cast<ShapedType>(arg.getType()).hasStaticShape()) {
      func.emitError() << "input " << arg.getArgNumber()
                       << " has no static shape; compile with --batch/--seq "
                          "or --dim";
      return signalPassFailure();
    }
    Root root = makeRoot(Home::Input, memrefFor(arg.getType()));
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tg.name");
    root.inputName = name ? name.str() : "input" + std::to_string(arg.getArgNumber());
    rootOf[arg] = newRoot(std::move(root));
  }

  // Exporters that pre-transpose Linear weights leave `transpose(W)` feeding
  // tg.linear; the linear kernel reads W as stored instead (attribute
  // `transpose_weight`), so no launch copies a weight every step.
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

  llvm::StringMap<unsigned> paramRoots;
  DenseMap<Attribute, unsigned> constantRoots;
  SmallVector<PlannedLaunch> launches;
  int64_t step = 0;
  func::ReturnOp ret;
  for (Operation &op : body) {
    ++step;
    if (auto r = llvm::dyn_cast<func::ReturnOp>(op)) {
      ret = r;
      break;
    }
    if (auto ref = llvm::dyn_cast<tg::ParamRefOp>(op)) {
      auto [it, inserted] = paramRoots.try_emplace(ref.getName(), 0);
      if (inserted) {
        auto param = module.lookupSymbol<tg::ParamOp>(ref.getNameAttr());
        if (!param) {
          ref.emitError() << "parameter " << ref.getNameAttr()
                          << " is not declared";
          return signalPassFailure();
        }
        Root root = makeRoot(Home::Param, memrefFor(param.getType()));
        root.param = param;
        it->second = newRoot(std::move(root));
      }
      rootOf[ref.getResult()] = it->second;
      continue;
    }
    if (auto constant = llvm::dyn_cast<arith::ConstantOp>(op)) {
      auto value = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!value || !llvm::isa<RankedTensorType>(constant.getType())) {
        constant.emitError() << "only dense tensor constants can be planned";
        return signalPassFailure();
      }
      if (!codegen::isCpuElementType(value.getElementType())) {
        constant.emitError() << "the CPU backend has no " << value.getElementType()
                             << " constants";
        return signalPassFailure();
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
    if (op.getNumRegions() != 0) {
      op.emitError() << "ops with regions cannot be planned";
      return signalPassFailure();
    }
    FailureOr<codegen::CpuKernelChoice> choice =
        codegen::selectCpuKernel(&op, threads);
    if (failed(choice)) {
      return signalPassFailure();
    }
    PlannedLaunch launch{&op, std::move(*choice), {}, originOf(&op)};
    SmallVector<Value> operands(op.getOperands());
    if (auto linear = llvm::dyn_cast<tg::LinearOp>(op)) {
      Operation *weight = linear.getWeight().getDefiningOp();
      if (weight && foldedTransposes.contains(weight)) {
        operands[1] = weight->getOperand(0);
        launch.choice.attributes.set(
            "transpose_weight", IntegerAttr::get(IntegerType::get(&getContext(), 64), 1));
      }
    }
    for (Value operand : operands) {
      if (!rootOf.count(operand)) {
        op.emitError() << "operand defined outside the planned function";
        return signalPassFailure();
      }
      touch(operand, step);
      launch.operands.push_back(accessOf(operand));
    }
    for (Value result : op.getResults()) {
      auto type = llvm::dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.hasStaticShape()) {
        op.emitError() << "result has no static shape";
        return signalPassFailure();
      }
      Root root = makeRoot(Home::Activation, memrefFor(type));
      root.first = root.last = step;
      rootOf[result] = newRoot(std::move(root));
      launch.operands.push_back(accessOf(result));
    }
    launches.push_back(std::move(launch));
  }
  if (!ret) {
    func.emitError() << "the function has no return";
    return signalPassFailure();
  }

  // --- Outputs: live to the end; each needs storage of its own -----------
  // An output that is an input, a parameter, a constant or another output's
  // storage is copied into a fresh buffer, so callers can read every output
  // independently and inputs stay untouched.
  int64_t endStep = step + 1;
  SmallVector<std::pair<std::string, Access>> outputs;
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
      launches.push_back({nullptr, std::move(copy), {stored, copied},
                          "output copy of " + outputName});
      stored = copied;
    }
    roots[rootIndex].last = endStep;
    outputs.emplace_back(outputName, stored);
  }
  // Inputs stay intact for the whole run, so a caller can set them once and
  // run the plan again.
  for (Root &root : roots) {
    if (root.home == Home::Input) {
      root.last = endStep;
    }
  }

  // --- Offsets -----------------------------------------------------------
  uint64_t align = static_cast<uint64_t>(alignment);
  if (alignment <= 0 || (align & (align - 1)) != 0) {
    module.emitError() << "alignment must be a power of two, got " << alignment;
    return signalPassFailure();
  }
  uint64_t paramBytes = 0, constantBytes = 0;
  std::vector<memory::LiveBuffer> live;
  std::vector<unsigned> liveRoots;
  for (auto [index, root] : llvm::enumerate(roots)) {
    switch (root.home) {
    case Home::Param:
      root.offset = paramBytes;
      paramBytes = alignTo(paramBytes + root.bytes, align);
      break;
    case Home::Constant:
      root.offset = constantBytes;
      constantBytes = alignTo(constantBytes + root.bytes, align);
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
  for (const PlannedLaunch &launch : launches) {
    workspaceBytes = std::max(workspaceBytes, launch.choice.workspaceBytes);
  }
  workspaceBytes = alignTo(workspaceBytes, align);

  // --- Emit the program ----------------------------------------------------
  OpBuilder builder(module.getContext());
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = func.getLoc();
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
  program->setAttr("sched.threads", builder.getI64IntegerAttr(threads));
  program->setAttr("sched.activations_live_bytes",
                   builder.getI64IntegerAttr(packing.liveBytesLowerBound));
  sched::StreamOp::create(builder, loc, "compute");
  auto stream = FlatSymbolRefAttr::get(builder.getContext(), "compute");
  llvm::StringMap<int64_t> kernels;
  for (const PlannedLaunch &launch : launches) {
    auto [it, inserted] = kernels.try_emplace(launch.choice.kernel,
                                              launch.choice.arity);
    if (inserted) {
      sched::KernelOp::create(builder, loc, launch.choice.kernel,
                              launch.choice.arity);
    }
  }

  // Storage-defining views: inputs and parameters first, in order.
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
      StringAttr file;
      IntegerAttr fileOffset, fileLength;
      if (auto external = llvm::dyn_cast_or_null<tg::ExternalDataAttr>(
              root.param.getLocationAttr())) {
        file = external.getFile();
        fileOffset = builder.getI64IntegerAttr(external.getOffset());
        fileLength = builder.getI64IntegerAttr(external.getLength());
      }
      root.view = sched::ParamOp::create(
          builder, root.param.getLoc(), root.type,
          builder.getStringAttr(root.param.getSymName()), paramsArena,
          builder.getI64IntegerAttr(offset),
          builder.getI64IntegerAttr(root.bytes), file, fileOffset, fileLength,
          root.param.getTrainable() ? builder.getUnitAttr() : UnitAttr());
      break;
    }
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
  for (Root &root : roots) {
    if (root.home == Home::Input || root.home == Home::Param) {
      defineRoot(root);
    }
  }
  for (Root &root : roots) {
    if (root.home == Home::Param && !root.param.getLocation() &&
        !root.param.getTrainable()) {
      root.param.emitError() << "parameter '" << root.param.getSymName()
                             << "' has no bytes to bind (no data location)";
      return signalPassFailure();
    }
    if (root.home == Home::Param &&
        llvm::isa_and_nonnull<tg::InitializerDataAttr>(
            root.param.getLocationAttr())) {
      root.param.emitError()
          << "parameter '" << root.param.getSymName()
          << "' is stored inside an ONNX text model or as typed data, which "
             "plans cannot reference by offset; use a binary model with "
             "raw_data or external data";
      return signalPassFailure();
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
                                        : activationsArena;
      view = createBuffer(builder, loc, type, arenaName,
                          static_cast<int64_t>(root.offset), root.bytes);
    }
    return view;
  };

  for (PlannedLaunch &launch : launches) {
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
        builder, launchLoc, FlatSymbolRefAttr::get(builder.getContext(),
                                                   launch.choice.kernel),
        args, stream, attrs, builder.getStringAttr(launch.origin),
        DenseI64ArrayAttr(), DenseI64ArrayAttr());
  }
  for (auto &[name, access] : outputs) {
    sched::OutputOp::create(builder, loc, name, bufferFor(access));
  }

  // The program replaces the function and the parameter declarations.
  func.erase();
  for (tg::ParamOp param : llvm::make_early_inc_range(module.getOps<tg::ParamOp>())) {
    param.erase();
  }
}
