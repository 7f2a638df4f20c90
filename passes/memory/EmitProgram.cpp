//===- EmitProgram.cpp - arena offsets and the sched.program --------------===//

#include "passes/memory/PlannedProgram.h"

#include "passes/memory/ArenaPacking.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace tailor::memory {

static Value createBuffer(OpBuilder &builder, Location loc, MemRefType type,
                          FlatSymbolRefAttr arena, int64_t offset,
                          int64_t size) {
  return sched::BufferOp::create(builder, loc, type, arena,
                                 builder.getI64IntegerAttr(offset),
                                 builder.getI64IntegerAttr(size));
}

LogicalResult emitProgram(ModuleOp module, Location loc,
                          std::vector<Root> &roots,
                          std::vector<PlannedEntry> &entries, int64_t threads,
                          int64_t alignment, const ProgramTarget &target) {
  // --- Offsets -----------------------------------------------------------
  uint64_t align = static_cast<uint64_t>(alignment);
  if (alignment <= 0 || (align & (align - 1)) != 0) {
    return module.emitError() << "alignment must be a power of two, got "
                              << alignment;
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
  auto program = sched::ProgramOp::create(builder, loc, "rank0", 0, 1);
  program.getBody().emplaceBlock();
  builder.setInsertionPointToStart(&program.getBody().front());
  // A GPU program lives in device memory; parameters are bound through a
  // host staging copy by the runtime, which the plan does not need to name.
  sched::ArenaKind kind =
      target.isCuda() ? sched::ArenaKind::Device : sched::ArenaKind::Host;
  auto arena = [&](StringRef name, sched::ArenaCategory category,
                   uint64_t size) {
    sched::ArenaOp::create(builder, loc, name, kind, category,
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
  if (target.isCuda() && target.gemmWorkspaceBytes > 0) {
    // cuBLASLt's workspace: the runtime hands exactly this to every GEMM.
    arena("gemm_workspace", sched::ArenaCategory::Workspace,
          alignTo(static_cast<uint64_t>(target.gemmWorkspaceBytes), align));
  }
  program->setAttr("sched.threads", builder.getI64IntegerAttr(threads));
  program->setAttr("sched.backend", builder.getStringAttr(target.backend));
  if (target.isCuda()) {
    program->setAttr("sched.hardware", builder.getStringAttr(target.hardware));
    program->setAttr("sched.sm", builder.getI64IntegerAttr(target.sm));
    program->setAttr("sched.precision", builder.getStringAttr(target.precision));
    program->setAttr("sched.device_memory",
                     builder.getI64IntegerAttr(target.deviceMemory));
  }
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
      return failure();
    }
    if (llvm::isa_and_nonnull<tg::InitializerDataAttr>(
            root.param.getLocationAttr())) {
      root.param.emitError()
          << "parameter '" << root.param.getSymName()
          << "' is stored inside an ONNX text model or as typed data, which "
             "plans cannot reference by offset; use a binary model with "
             "raw_data or external data";
      return failure();
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
          initKind, initValue, root.param.getQuantAttr(),
          root.param.getQuantAttr()
                                    ? TypeAttr::get(root.param.getTensorType().getElementType())
                                    : TypeAttr());
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

  return success();
}

} // namespace tailor::memory
