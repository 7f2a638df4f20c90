//===- SchedPlanner.cpp - roots, lifetimes and launches of one rank --------===//

#include "passes/memory/SchedPlanner.h"

#include "dialects/tg/TGPartitionOps.h"

#include "passes/memory/Passes.h"

#include "dialects/tg/TGQuant.h"
#include "dialects/tg/TGShapes.h"
#include "passes/memory/OpCost.h"
#include "runtime/cuda/QuantizedGemmWorkspace.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tailor;
using namespace tailor::memory;

/// Bytes the runtime keeps for a pipeline stage's sends: every send of every
/// entry, once per micro-batch of the step (the outbox is drained when the
/// step ends, so no send ever waits for its receiver).
static uint64_t pipelineOutboxBytes(DictionaryAttr stage,
                                    const std::vector<PlannedEntry> &entries) {
  auto micro = stage.getAs<IntegerAttr>("micro_batches");
  uint64_t perMicroBatch = 0;
  for (const PlannedEntry &entry : entries) {
    for (const PlannedLaunch &launch : entry.launches) {
      if (launch.collective &&
          launch.collective->kind == sched::CollectiveKind::Send) {
        // The runtime starts each send's copy on a 64-byte boundary.
        auto bytes = static_cast<uint64_t>(
            storageBytes(launch.operands.front().type));
        perMicroBatch += (bytes + 63) / 64 * 64;
      }
    }
  }
  return perMicroBatch * static_cast<uint64_t>(micro ? micro.getInt() : 1);
}

/// What a launch came from: the op, and the module (or node) it belongs to.
std::string tailor::memory::originOf(Operation *op) {
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

std::optional<unsigned> SchedPlanner::findRoot(Value value) {
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

FailureOr<Access> SchedPlanner::storageOf(tg::DequantizeOp dequantize) {
  auto it = quantizedStorage.find(dequantize.getResult());
  if (it == quantizedStorage.end()) {
    return dequantize.emitError()
           << "internal error: the quantized weight "
           << dequantize.getNameAttr() << " has no planned storage";
  }
  return it->second;
}

FailureOr<unsigned> SchedPlanner::paramRoot(ModuleOp module,
                                                Operation *user,
                                                FlatSymbolRefAttr name) {
  auto [it, inserted] = symbolRoots.try_emplace(name.getValue(), 0);
  if (!inserted) {
    return it->second;
  }
  auto param = symbols.lookupSymbolIn<tg::ParamOp>(module, name);
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

FailureOr<unsigned> SchedPlanner::stateRoot(ModuleOp module,
                                                Operation *user,
                                                FlatSymbolRefAttr name) {
  auto [it, inserted] = symbolRoots.try_emplace(name.getValue(), 0);
  if (!inserted) {
    return it->second;
  }
  auto state = symbols.lookupSymbolIn<tg::StateOp>(module, name);
  if (!state) {
    symbolRoots.erase(it);
    return user->emitError() << "state " << name << " is not declared";
  }
  Root root = makeRoot(Home::State, memrefFor(state.getType()));
  root.state = state;
  root.host = state.getHost();
  it->second = newRoot(std::move(root));
  return it->second;
}

LogicalResult
SchedPlanner::selectQuantizedLinear(tg::LinearOp linear,
                                        tg::DequantizeOp dequantize,
                                        bool transposeWeight,
                                        codegen::CpuKernelChoice &choice) {
  auto param = symbols.lookupNearestSymbolFrom<tg::ParamOp>(
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
    // linear has it. fp16 plans multiply fp16 copies, the others bf16 ones.
    auto input = llvm::cast<RankedTensorType>(linear.getInput().getType());
    const runtime::cuda::GemmRouteFormat format =
        precision == "fp16" ? runtime::cuda::GemmRouteFormat::FP16
                            : runtime::cuda::GemmRouteFormat::BF16;
    const runtime::cuda::QuantizedGemmLayout layout =
        runtime::cuda::quantizedGemmLayout(*spec, input.getNumElements(),
                                           input.getElementType().isF32(),
                                           format);
    choice.attributes.set(
        "via_gemm",
        IntegerAttr::get(IntegerType::get(dequantize.getContext(), 64),
                         static_cast<int64_t>(format)));
    choice.workspaceBytes = std::max(
        choice.workspaceBytes,
        static_cast<int64_t>(llvm::alignTo(layout.totalBytes(), 4)));
  }
  return success();
}

LogicalResult SchedPlanner::planInputs(func::FuncOp func,
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

PlannedLaunch SchedPlanner::launchOf(Operation *op, StringRef kernel,
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

FailureOr<unsigned> SchedPlanner::useAt(Value value, int64_t step) {
  auto it = rootOf.find(value);
  if (it == rootOf.end()) {
    return failure();
  }
  touch(value, step);
  return it->second;
}

LogicalResult SchedPlanner::planDequantize(ModuleOp module,
                                               tg::DequantizeOp dequantize,
                                               const Fusions &fusions,
                                               PlannedEntry &entry,
                                               int64_t step) {
  Operation &op = *dequantize;
  auto param =
      symbols.lookupSymbolIn<tg::ParamOp>(module, dequantize.getNameAttr());
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

LogicalResult SchedPlanner::planConstant(arith::ConstantOp constant) {
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

LogicalResult SchedPlanner::planKernelLaunch(ModuleOp module, Operation &op,
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
  auto epilogue = fusions.gemmEpilogues.find(&op);
  if (epilogue != fusions.gemmEpilogues.end() && epilogue->second.addend) {
    // Operand 2: the residual the GEMM adds (no bias: isEpilogueGemm).
    operands.push_back(epilogue->second.addend);
    launch.choice.attributes.set("addend", i64AttrOf(context, 1));
  }
  for (Value operand : operands) {
    if (failed(useAt(operand, step))) {
      return op.emitError() << "operand defined outside the planned function";
    }
    launch.operands.push_back(accessOf(operand));
  }
  auto inPlace = fusions.accumulatedInPlace.find(&op);
  auto overOperand = fusions.resultOverOperand.find(&op);
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

LogicalResult SchedPlanner::planFusionGroup(const FusionGroup &group,
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

LogicalResult SchedPlanner::planView(Value view, Value of, int64_t step) {
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

LogicalResult SchedPlanner::planOp(ModuleOp module, Operation &op,
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
  if (auto write = llvm::dyn_cast<tg::CacheWriteOp>(op)) {
    return planCacheWrite(module, write, entry, step);
  }
  if (llvm::isa<tg::SendOp, tg::RecvOp, tg::SlotWriteOp, tg::SlotReadOp>(op)) {
    return planPipelineOp(module, op, entry, step);
  }
  if (auto copy = llvm::dyn_cast<tg::CopyStateOp>(op)) {
    return planCopyState(module, copy, entry);
  }
  if (llvm::isa<tg::ToHostOp, tg::ToDeviceOp>(op)) {
    return planMove(&op, llvm::isa<tg::ToHostOp>(op), entry, step);
  }
  if (auto reduce = llvm::dyn_cast<tg::AllReduceStatesOp>(op)) {
    return planAllReduce(module, reduce, entry);
  }
  if (isCompressionOp(&op)) {
    return planCompressionOp(module, op, entry, step);
  }
  if (llvm::isa<tg::SecondaryPartitionOp, tg::GatherPartitionOp>(op)) {
    return planPartitionOp(op, entry, step);
  }
  if (llvm::isa<tg::ReduceScatterOp, tg::AllReduceOp, tg::AllGatherBucketOp,
                tg::ZeroStatesOp, tg::GatherBucketOp, tg::BucketMemberOp,
                tg::DequantizeGatheredOp, tg::QuantizeChunksOp,
                tg::AllToAllOp, tg::DequantizeReduceOp>(op)) {
    return planShardOp(module, op, entry, step);
  }
  return planKernelLaunch(module, op, fusions, entry, step);
}

LogicalResult SchedPlanner::planOutputs(func::FuncOp func,
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

LogicalResult SchedPlanner::planFunction(ModuleOp module, func::FuncOp func,
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
  Fusions fusions = decideFusions(body);
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
    auto steps =
        op.getAttrOfType<DenseI64ArrayAttr>(tg::TGDialect::kStepsAttrName);
    for (size_t i = planned; i < entry.launches.size(); ++i) {
      entry.launches[i].step = step;
      if (steps) {
        entry.launches[i].trainingSteps =
            PlannedLaunch::StepRange{steps[0], steps[1],
                                     steps.size() == 3 ? steps[2] : 1};
      }
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

SchedPlanner::SchedPlanner(const PlannerOptions &options)
    : backend(options.backend), hardware(options.hardware),
      precision(options.precision), threads(options.threads),
      alignment(options.alignment), sm(options.sm),
      deviceMemory(options.deviceMemory), gemmWorkspace(options.gemmWorkspace),
      deviceBudget(options.deviceBudget) {}

LogicalResult SchedPlanner::run(ModuleOp module, ArrayRef<func::FuncOp> funcs) {
  // GPU kernels size their scratch per launch, not per CPU worker.
  workspaceThreads = backend == "cuda" ? 1 : threads;
  ranksPerNode = 1;
  if (auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel")) {
    ranksPerNode = parallel.getAs<IntegerAttr>("ranks_per_node").getInt();
  }

  // --- Roots and lifetimes, one timeline through every entry ----------------
  if (failed(placeShardBuckets(module)) || failed(placeBuckets(module))) {
    return failure();
  }
  std::vector<PlannedEntry> entries(funcs.size());
  int64_t step = 0;
  for (auto [func, entry] : llvm::zip(funcs, entries)) {
    if (failed(planFunction(module, func, entry, step))) {
      return failure();
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
  if (auto stage = module->getAttrOfType<DictionaryAttr>(
          tg::TGDialect::kPipelineStageAttrName)) {
    auto replicas = stage.getAs<IntegerAttr>("replicas");
    target.replicas = replicas ? replicas.getInt() : 1;
    target.rank = stage.getAs<IntegerAttr>("stage").getInt() * target.replicas;
    target.outboxBytes = pipelineOutboxBytes(stage, entries);
  }
  if (failed(memory::emitProgram(module, func::FuncOp(funcs.front()).getLoc(), roots, entries,
                                 workspaceThreads, alignment, target))) {
    return failure();
  }
  if (failed(proveItFits(module, target))) {
    return failure();
  }
  return success();
}
