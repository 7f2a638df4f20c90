//===- EmitProgram.cpp - arena offsets and the sched.program --------------===//

#include "passes/memory/PlannedProgram.h"

#include "dialects/tg/TGQuant.h"
#include "passes/graph/ExportNames.h"

#include "passes/memory/ArenaPacking.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <map>

using namespace mlir;

namespace tailor::memory {

namespace {

/// Arena sizes and the activations' packing, once every root has its
/// offset.
struct ArenaLayout {
  uint64_t paramBytes = 0;
  /// Offloaded parameters (host buckets), in pinned host memory.
  uint64_t hostParamBytes = 0;
  /// Optimizer offload's host states, and its host values packed by
  /// lifetime, in pinned host memory.
  uint64_t hostOptimizerBytes = 0;
  PackingResult hostPacking;
  uint64_t constantBytes = 0;
  uint64_t gradientBytes = 0;
  uint64_t optimizerBytes = 0;
  /// A generation plan's key and value caches.
  uint64_t kvCacheBytes = 0;
  /// A pipeline stage's received activations, one slot per micro-batch in
  /// flight (pipeline_input states).
  uint64_t pipelineInputBytes = 0;
  int64_t workspaceBytes = 0;
  PackingResult packing;

  bool training() const { return gradientBytes > 0 || optimizerBytes > 0; }
};

/// The arenas of the program being written, by what they hold.
struct ProgramArenas {
  FlatSymbolRefAttr params, hostParams, constants, activations, workspace,
      gradients, optimizer, hostOptimizer, hostActivations, kvCache,
      pipelineInputs;
};

/// Whether `state` is a generation plan's key or value cache.
static bool isKvCache(tg::StateOp state) {
  return state.getKind() == tg::StateKind::KeyCache ||
         state.getKind() == tg::StateKind::ValueCache;
}

/// Whether `state` keeps a pipeline stage's received activations.
static bool isPipelineInput(tg::StateOp state) {
  return state.getKind() == tg::StateKind::PipelineInput;
}

/// A stream beside compute and its events: `<name>.ready.N` (compute
/// reached the work) and `<name>.done.N` (the work finished).
struct AsyncLane {
  std::string name;
  FlatSymbolRefAttr stream;
  /// Works emitted so far (their events' numbers).
  unsigned next = 0;
  FlatSymbolRefAttr event(MLIRContext *context, StringRef kind,
                          unsigned index) const {
    return FlatSymbolRefAttr::get(
        context, (name + "." + kind + "." + std::to_string(index)).str());
  }
};

/// Writes one sched.program from planned roots and entries: the arenas, the
/// kernel declarations, one storage view per root (made where first needed)
/// and, per entry, its inputs, launches and outputs.
class ProgramEmitter {
public:
  ProgramEmitter(ModuleOp module, Location loc, std::vector<Root> &roots)
      : builder(module.getContext()), module(module), symbols(module),
        loc(loc), roots(roots) {}

  void emitHeader(const ArenaLayout &layout, int64_t threads, int64_t alignment,
                  const ProgramTarget &target);
  void declareKernels(const std::vector<PlannedEntry> &entries);
  /// Declares the communication stream and two events per tg.overlap
  /// collective when there are any.
  void declareOverlap(const std::vector<PlannedEntry> &entries);
  /// Declares the host stream when a launch runs on the host.
  void declareHostStream(const std::vector<PlannedEntry> &entries);
  LogicalResult checkParameterBytes();
  /// Parameters first, in declaration order of first use, then states.
  void defineParametersAndStates();
  LogicalResult emitEntries(std::vector<PlannedEntry> &entries);

private:
  Value createBuffer(MemRefType type, FlatSymbolRefAttr arena, int64_t offset,
                     int64_t size);
  FlatSymbolRefAttr stateArena(const Root &root) const;
  FlatSymbolRefAttr arenaOf(const Root &root) const;
  Value createParamView(Root &root);
  /// The view that defines `root`'s storage, made on first use.
  Value defineRoot(Root &root);
  /// The buffer an access reads or writes: its root, or a view of it.
  Value bufferFor(Access access);
  /// A sched.state's `shard` when `state` holds a chunk of a tg.bucket.
  DictionaryAttr shardOf(tg::StateOp state);
  void emitLaunch(const PlannedLaunch &launch);
  /// Gives the launches and collectives emitted into `block` after `after`
  /// (null: from its start) the launch's training steps, if it has any.
  void markSteps(const PlannedLaunch &launch, Block *block, Operation *after);
  /// A collective over its operands' roots, which must lie back to back in
  /// one arena: one buffer from the first to the end of the last; on
  /// `on` (the compute stream, or the communication stream).
  LogicalResult emitCollective(const PlannedLaunch &launch,
                               FlatSymbolRefAttr on);
  /// A copy between memories, on `on`.
  void emitCopy(const PlannedLaunch &launch, FlatSymbolRefAttr on);
  /// A collective or a copy on `lane`'s stream: that stream waits for the
  /// compute stream, runs it, and marks `done` for compute to wait on.
  LogicalResult emitOverlapped(const PlannedLaunch &launch, AsyncLane &lane,
                               unsigned index);
  /// Host launch `index`: issued on the host stream once compute reaches
  /// it and copy `lastCopy` (the entry's latest on the copy stream, if
  /// any) is done; its done event is recorded after it.
  void emitHostLaunch(const PlannedLaunch &launch, unsigned index,
                      std::optional<unsigned> lastCopy);
  void waitFor(const AsyncLane &lane, unsigned index);
  /// The program rank's ranks in `group` (rank 0's but for a pipeline
  /// stage's program, which is its first rank's).
  SmallVector<int64_t> groupRanks(tg::CommGroup group) const;

  OpBuilder builder;
  ModuleOp module;
  /// The tg symbols by name, read once (the program adds none of them).
  SymbolTable symbols;
  Location loc;
  std::vector<Root> &roots;
  ProgramArenas arenas;
  FlatSymbolRefAttr stream;
  /// Host launches' stream and events (declared only when used).
  AsyncLane host{"host", {}, 0};
  /// Collectives on the communication stream, copies on the copy stream
  /// (each declared only when used).
  AsyncLane comm{"comm", {}, 0}, copies{"host_copy", {}, 0};
  DenseMap<std::tuple<unsigned, Type, int64_t, int64_t>, Value> views;
  int64_t worldSize = 1;
  int64_t ranksPerNode = 1;
  int64_t rank = 0;
  int64_t replicas = 1;
};

} // namespace

/// Gives every root its arena offset: parameters, constants and states back
/// to back, inputs and activations packed by lifetime; sizes the arenas.
static ArenaLayout assignOffsets(std::vector<Root> &roots,
                                 const std::vector<PlannedEntry> &entries,
                                 uint64_t align) {
  ArenaLayout layout;
  std::vector<memory::LiveBuffer> live, hostLive;
  std::vector<unsigned> liveRoots, hostLiveRoots;
  auto place = [&](Root &root, uint64_t &arenaBytes) {
    root.offset = arenaBytes;
    arenaBytes = alignTo(arenaBytes + root.bytes, align);
  };
  for (auto [index, root] : llvm::enumerate(roots)) {
    if (root.within) {
      continue; // placed with the root that holds it, below
    }
    switch (root.home) {
    case Home::Param:
      place(root, root.host ? layout.hostParamBytes : layout.paramBytes);
      break;
    case Home::Constant:
      place(root, layout.constantBytes);
      break;
    case Home::State:
      place(root, root.host ? layout.hostOptimizerBytes
                  : isKvCache(root.state) ? layout.kvCacheBytes
                  : isPipelineInput(root.state) ? layout.pipelineInputBytes
                  : root.state.getKind() == tg::StateKind::Grad
                      ? layout.gradientBytes
                      : layout.optimizerBytes);
      break;
    case Home::Input:
    case Home::Activation:
      if (root.host) {
        hostLive.push_back(
            {root.first, root.last, static_cast<uint64_t>(root.bytes), 0});
        hostLiveRoots.push_back(index);
        break;
      }
      live.push_back(
          {root.first, root.last, static_cast<uint64_t>(root.bytes), 0});
      liveRoots.push_back(index);
      break;
    }
  }
  for (Root &root : roots) {
    if (root.within) {
      root.offset = roots[*root.within].offset + root.withinOffset;
    }
  }
  layout.packing = memory::packBuffers(live, align);
  for (auto [buffer, index] : llvm::zip(live, liveRoots)) {
    roots[index].offset = buffer.offset;
  }
  layout.hostPacking = memory::packBuffers(hostLive, align);
  for (auto [buffer, index] : llvm::zip(hostLive, hostLiveRoots)) {
    roots[index].offset = buffer.offset;
  }
  for (const PlannedEntry &entry : entries) {
    for (const PlannedLaunch &launch : entry.launches) {
      layout.workspaceBytes =
          std::max(layout.workspaceBytes, launch.choice.workspaceBytes);
    }
  }
  layout.workspaceBytes = alignTo(layout.workspaceBytes, align);
  return layout;
}

void ProgramEmitter::emitHeader(const ArenaLayout &layout, int64_t threads,
                                int64_t alignment,
                                const ProgramTarget &target) {
  uint64_t align = static_cast<uint64_t>(alignment);
  builder.setInsertionPointToEnd(module.getBody());
  // Every rank of a data-parallel world runs the same program; it is
  // written as rank 0's. A pipeline stage's is its first rank's (replica
  // 0's; its other replicas run it too).
  auto program = sched::ProgramOp::create(
      builder, loc, "rank" + std::to_string(target.rank), target.rank,
      target.worldSize);
  worldSize = target.worldSize;
  rank = target.rank;
  replicas = target.replicas;
  ranksPerNode = target.ranksPerNode;
  program.getBody().emplaceBlock();
  builder.setInsertionPointToStart(&program.getBody().front());
  // Compute memory is the device's: a GPU's, or on a CPU target the memory
  // its kernels run in (what offload moves bytes out of, so the CPU plan
  // reports device and host bytes as a GPU plan does). Parameters are
  // bound through a host staging copy by a GPU runtime, which the plan does
  // not name; offloaded ones live in pinned host memory.
  auto arena = [&](StringRef name, sched::ArenaCategory category,
                   uint64_t size,
                   sched::ArenaKind kind = sched::ArenaKind::Device) {
    sched::ArenaOp::create(builder, loc, name, kind, category,
                           static_cast<int64_t>(size), alignment);
    return FlatSymbolRefAttr::get(builder.getContext(), name);
  };
  arenas.params =
      arena("parameters", sched::ArenaCategory::Parameters, layout.paramBytes);
  if (layout.hostParamBytes > 0) {
    arenas.hostParams =
        arena("parameters_host", sched::ArenaCategory::Parameters,
              layout.hostParamBytes, sched::ArenaKind::HostPinned);
  }
  arenas.constants =
      arena("constants", sched::ArenaCategory::Constants, layout.constantBytes);
  arenas.activations = arena("activations", sched::ArenaCategory::Activations,
                             layout.packing.arenaBytes);
  arenas.workspace = arena("workspace", sched::ArenaCategory::Workspace,
                           layout.workspaceBytes);
  if (layout.training()) {
    arenas.gradients = arena("gradients", sched::ArenaCategory::Gradients,
                             layout.gradientBytes);
    arenas.optimizer =
        arena("optimizer_state", sched::ArenaCategory::OptimizerState,
              layout.optimizerBytes);
  }
  // Keys and values persist across decode calls, like training states.
  if (layout.kvCacheBytes > 0) {
    arenas.kvCache = arena("kv_cache", sched::ArenaCategory::KvCache,
                           layout.kvCacheBytes);
  }
  // Layer split: what a stage received, kept from its forward to its
  // backward, and the copies of what it sends, kept until the step ends.
  if (layout.pipelineInputBytes > 0) {
    arenas.pipelineInputs =
        arena("pipeline_inputs", sched::ArenaCategory::Activations,
              layout.pipelineInputBytes);
  }
  if (target.outboxBytes > 0) {
    arena("p2p_outbox", sched::ArenaCategory::Workspace,
          alignTo(target.outboxBytes, align));
  }
  // Optimizer offload: pinned, so the copies to and from the device run
  // asynchronously.
  if (layout.hostOptimizerBytes > 0) {
    arenas.hostOptimizer =
        arena("optimizer_state_host", sched::ArenaCategory::OptimizerState,
              layout.hostOptimizerBytes, sched::ArenaKind::HostPinned);
  }
  if (layout.hostPacking.arenaBytes > 0) {
    arenas.hostActivations =
        arena("activations_host", sched::ArenaCategory::Activations,
              layout.hostPacking.arenaBytes, sched::ArenaKind::HostPinned);
  }
  if (target.isCuda() && target.gemmWorkspaceBytes > 0) {
    // cuBLASLt's workspace: the runtime hands exactly this to every GEMM.
    arena("gemm_workspace", sched::ArenaCategory::Workspace,
          alignTo(static_cast<uint64_t>(target.gemmWorkspaceBytes), align));
  }
  program->setAttr("sched.threads", builder.getI64IntegerAttr(threads));
  program->setAttr("sched.backend", builder.getStringAttr(target.backend));
  // A CPU plan computes in f32 but for the GEMMs tailor-emulate-half marked
  // (fp16 or bf16), so only those are recorded there; the runtime checks
  // that its GEMM kernels agree (runtime/Plan.cpp).
  if (target.isCuda() || target.precision == "fp16" ||
      target.precision == "bf16") {
    program->setAttr("sched.precision",
                     builder.getStringAttr(target.precision));
  }
  if (target.isCuda()) {
    program->setAttr("sched.hardware", builder.getStringAttr(target.hardware));
    program->setAttr("sched.sm", builder.getI64IntegerAttr(target.sm));
    program->setAttr("sched.device_memory",
                     builder.getI64IntegerAttr(target.deviceMemory));
  }
  program->setAttr(
      "sched.activations_live_bytes",
      builder.getI64IntegerAttr(layout.packing.liveBytesLowerBound));
  sched::StreamOp::create(builder, loc, "compute");
  stream = FlatSymbolRefAttr::get(builder.getContext(), "compute");
}

void ProgramEmitter::declareKernels(const std::vector<PlannedEntry> &entries) {
  llvm::StringMap<int64_t> kernels;
  for (const PlannedEntry &entry : entries) {
    for (const PlannedLaunch &launch : entry.launches) {
      if (launch.collective || launch.copy) {
        continue;
      }
      auto [it, inserted] =
          kernels.try_emplace(launch.choice.kernel, launch.choice.arity);
      if (inserted) {
        sched::KernelOp::create(builder, loc, launch.choice.kernel,
                                launch.choice.arity);
      }
    }
  }
}

LogicalResult ProgramEmitter::checkParameterBytes() {
  for (Root &root : roots) {
    if (root.home != Home::Param || root.bucket) {
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
  return success();
}

Value ProgramEmitter::createBuffer(MemRefType type, FlatSymbolRefAttr arena,
                                   int64_t offset, int64_t size) {
  return sched::BufferOp::create(builder, loc, type, arena,
                                 builder.getI64IntegerAttr(offset),
                                 builder.getI64IntegerAttr(size),
                                 IntegerAttr(), IntegerAttr());
}

FlatSymbolRefAttr ProgramEmitter::stateArena(const Root &root) const {
  tg::StateOp state = root.state;
  if (root.host) {
    return arenas.hostOptimizer;
  }
  if (isKvCache(state)) {
    return arenas.kvCache;
  }
  if (isPipelineInput(state)) {
    return arenas.pipelineInputs;
  }
  return state.getKind() == tg::StateKind::Grad ? arenas.gradients
                                                : arenas.optimizer;
}

FlatSymbolRefAttr ProgramEmitter::arenaOf(const Root &root) const {
  switch (root.home) {
  case Home::Param:
    return root.host ? arenas.hostParams : arenas.params;
  case Home::Constant:
    return arenas.constants;
  case Home::State:
    return stateArena(root);
  case Home::Input:
  case Home::Activation:
    break;
  }
  return root.host ? arenas.hostActivations : arenas.activations;
}

Value ProgramEmitter::createParamView(Root &root) {
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
  DictionaryAttr quant = root.param.getQuantAttr();
  DictionaryAttr shard;
  if (root.shardOf) {
    // A quantized parameter's whole is its stored bytes.
    ArrayRef<int64_t> shape = root.param.getTensorType().getShape();
    RankedTensorType bytes;
    if (quant) {
      bytes = *tg::quantizedStorageType(quant, [&] {
        return root.param.emitError();
      });
      shape = bytes.getShape();
    }
    shard = builder.getDictionaryAttr(
        {builder.getNamedAttr("shape", builder.getDenseI64ArrayAttr(shape)),
         builder.getNamedAttr("offset",
                              builder.getI64IntegerAttr(root.shardOffset)),
         builder.getNamedAttr("flat_elements",
                              builder.getI64IntegerAttr(static_cast<int64_t>(
                                  root.shardOf.getSize()))),
         builder.getNamedAttr("group",
                              builder.getDenseI64ArrayAttr(groupRanks(
                                  root.shardOf.getGroup())))});
  }
  Value view = sched::ParamOp::create(
      builder, root.param.getLoc(), root.type,
      builder.getStringAttr(root.param.getSymName()), arenaOf(root),
      builder.getI64IntegerAttr(static_cast<int64_t>(root.offset)),
      builder.getI64IntegerAttr(root.bytes), file, fileOffset, fileLength,
      root.param.getTrainable() ? builder.getUnitAttr() : UnitAttr(), initKind,
      initValue, quant,
      quant ? TypeAttr::get(root.param.getTensorType().getElementType())
            : TypeAttr(),
      shard);
  for (StringRef name : {StringRef(tg::TGDialect::kExportNameAttrName),
                         StringRef(tg::TGDialect::kExportTransposedAttrName),
                         StringRef(graph::kExportFanInFanOutAttrName)}) {
    if (Attribute attr = root.param->getAttr(name)) {
      view.getDefiningOp()->setAttr(name, attr);
    }
  }
  return view;
}

Value ProgramEmitter::defineRoot(Root &root) {
  if (root.view) {
    return root.view;
  }
  int64_t offset = static_cast<int64_t>(root.offset);
  switch (root.home) {
  case Home::Input:
    root.view = sched::InputOp::create(
        builder, loc, root.type, builder.getStringAttr(root.inputName),
        arenas.activations, builder.getI64IntegerAttr(offset),
        builder.getI64IntegerAttr(root.bytes));
    break;
  case Home::Param:
    root.view = root.bucket
                    ? createBuffer(root.type, arenaOf(root), offset, root.bytes)
                    : createParamView(root);
    break;
  case Home::State:
    root.view = sched::StateOp::create(
        builder, root.state.getLoc(), root.type,
        builder.getStringAttr(root.state.getSymName()), stateArena(root),
        builder.getI64IntegerAttr(offset),
        builder.getI64IntegerAttr(root.bytes),
        builder.getStringAttr(root.state.getParameter()),
        builder.getStringAttr(tg::stringifyStateKind(root.state.getKind())),
        shardOf(root.state));
    break;
  case Home::Constant:
    root.view =
        sched::ConstantOp::create(builder, loc, root.type, arenas.constants,
                                  builder.getI64IntegerAttr(offset),
                                  builder.getI64IntegerAttr(root.bytes),
                                  llvm::cast<ElementsAttr>(root.constant));
    break;
  case Home::Activation:
    root.view = createBuffer(root.type, arenaOf(root), offset, root.bytes);
    break;
  }
  return root.view;
}

void ProgramEmitter::defineParametersAndStates() {
  for (Home home : {Home::Param, Home::State}) {
    for (Root &root : roots) {
      if (root.home == home) {
        defineRoot(root);
      }
    }
  }
}

Value ProgramEmitter::bufferFor(Access access) {
  Value &view =
      views[{access.root, access.type, access.rankStride, access.byteOffset}];
  if (view) {
    return view;
  }
  Root &root = roots[access.root];
  view = defineRoot(root);
  if (access.byteOffset != 0) {
    view = createBuffer(
        access.type, arenaOf(root),
        static_cast<int64_t>(root.offset) + access.byteOffset,
        storageBytes(access.type));
  } else if (access.rankStride != 0) {
    view = sched::BufferOp::create(
        builder, loc, access.type, arenaOf(root),
        builder.getI64IntegerAttr(static_cast<int64_t>(root.offset)),
        builder.getI64IntegerAttr(access.rankStride),
        builder.getI64IntegerAttr(access.rankStride),
        access.rankPeriod ? builder.getI64IntegerAttr(access.rankPeriod)
                          : IntegerAttr());
  } else if (access.type != root.type) {
    view = createBuffer(access.type, arenaOf(root),
                        static_cast<int64_t>(root.offset), root.bytes);
  }
  return view;
}

DictionaryAttr ProgramEmitter::shardOf(tg::StateOp state) {
  auto bucket = symbols.lookup<tg::BucketOp>(state.getParameter());
  if (!bucket) {
    return DictionaryAttr();
  }
  SmallVector<Attribute> members;
  SmallVector<int64_t> numels;
  for (Attribute member : bucket.getMembers()) {
    auto param = symbols.lookup<tg::ParamOp>(
        llvm::cast<FlatSymbolRefAttr>(member).getAttr());
    members.push_back(builder.getStringAttr(param.getSymName()));
    numels.push_back(tg::numElements(param.getTensorType().getShape()));
  }
  return builder.getDictionaryAttr(
      {builder.getNamedAttr("members", builder.getArrayAttr(members)),
       builder.getNamedAttr("offsets",
                            builder.getDenseI64ArrayAttr(bucket.getOffsets())),
       builder.getNamedAttr("numels", builder.getDenseI64ArrayAttr(numels)),
       builder.getNamedAttr("flat_elements",
                            builder.getI64IntegerAttr(
                                static_cast<int64_t>(bucket.getSize()))),
       builder.getNamedAttr("group", builder.getDenseI64ArrayAttr(
                                         groupRanks(bucket.getGroup())))});
}

void ProgramEmitter::markSteps(const PlannedLaunch &launch, Block *block,
                               Operation *after) {
  if (!launch.trainingSteps) {
    return;
  }
  const PlannedLaunch::StepRange &range = *launch.trainingSteps;
  SmallVector<int64_t, 3> bounds = {range.first, range.last};
  if (range.period != 1) {
    bounds.push_back(range.period);
  }
  auto steps = builder.getDenseI64ArrayAttr(bounds);
  Block::iterator it = after ? std::next(after->getIterator()) : block->begin();
  for (; it != block->end(); ++it) {
    if (llvm::isa<sched::LaunchOp, sched::CollectiveOp>(*it)) {
      it->setAttr(sched::kStepsAttrName, steps);
    }
  }
}

void ProgramEmitter::emitLaunch(const PlannedLaunch &launch) {
  SmallVector<Value> args;
  for (Access operand : launch.operands) {
    args.push_back(bufferFor(operand));
  }
  if (launch.choice.workspaceBytes > 0) {
    auto type = MemRefType::get(
        {launch.choice.workspaceBytes / static_cast<int64_t>(sizeof(float))},
        builder.getF32Type());
    args.push_back(
        createBuffer(type, arenas.workspace, 0, launch.choice.workspaceBytes));
  }
  Location launchLoc = launch.op ? launch.op->getLoc() : loc;
  DictionaryAttr attrs =
      launch.choice.attributes.empty()
          ? DictionaryAttr()
          : launch.choice.attributes.getDictionary(builder.getContext());
  sched::LaunchOp::create(
      builder, launchLoc,
      FlatSymbolRefAttr::get(builder.getContext(), launch.choice.kernel), args,
      launch.host ? host.stream : stream, attrs,
      builder.getStringAttr(launch.origin), DenseI64ArrayAttr(),
      DenseI64ArrayAttr(), builder.getF64FloatAttr(launch.flops),
      builder.getF64FloatAttr(launch.bytes));
}

SmallVector<int64_t> ProgramEmitter::groupRanks(tg::CommGroup group) const {
  SmallVector<int64_t> ranks;
  switch (group) {
  case tg::CommGroup::World:
    for (int64_t r = 0; r < worldSize; ++r) {
      ranks.push_back(r);
    }
    break;
  case tg::CommGroup::Node:
    for (int64_t r = 0; r < ranksPerNode; ++r) {
      ranks.push_back(r);
    }
    break;
  case tg::CommGroup::CrossNode:
    for (int64_t r = 0; r < worldSize; r += ranksPerNode) {
      ranks.push_back(r);
    }
    break;
  // A layer split's ranks are stage-major (tailor-split-layers): this
  // stage's replicas are the consecutive ranks from its first, this
  // replica's stages every `replicas`-th rank from its own.
  case tg::CommGroup::Replicas:
    for (int64_t r = 0; r < replicas; ++r) {
      ranks.push_back(rank - rank % replicas + r);
    }
    break;
  case tg::CommGroup::Stages:
    for (int64_t r = rank % replicas; r < worldSize; r += replicas) {
      ranks.push_back(r);
    }
    break;
  }
  return ranks;
}

void ProgramEmitter::declareOverlap(const std::vector<PlannedEntry> &entries) {
  unsigned collectives = 0, copyCount = 0;
  for (const PlannedEntry &entry : entries) {
    for (const PlannedLaunch &launch : entry.launches) {
      collectives += launch.collective && launch.collective->overlap;
      copyCount += launch.copy && launch.copy->overlap;
    }
  }
  for (auto [lane, count] : {std::pair<AsyncLane *, unsigned>{&comm, collectives},
                             {&copies, copyCount}}) {
    if (count == 0) {
      continue;
    }
    sched::StreamOp::create(builder, loc, lane->name);
    lane->stream = FlatSymbolRefAttr::get(builder.getContext(), lane->name);
    for (unsigned i = 0; i < count; ++i) {
      sched::EventOp::create(builder, loc,
                             lane->name + ".ready." + std::to_string(i));
      sched::EventOp::create(builder, loc,
                             lane->name + ".done." + std::to_string(i));
    }
  }
}

void ProgramEmitter::declareHostStream(
    const std::vector<PlannedEntry> &entries) {
  unsigned count = 0;
  for (const PlannedEntry &entry : entries) {
    count += llvm::count_if(entry.launches, [](const PlannedLaunch &launch) {
      return launch.host;
    });
  }
  if (count == 0) {
    return;
  }
  sched::StreamOp::create(builder, loc, host.name, /*host=*/true);
  host.stream = FlatSymbolRefAttr::get(builder.getContext(), host.name);
  for (unsigned i = 0; i < count; ++i) {
    sched::EventOp::create(builder, loc, host.name + ".ready." + std::to_string(i));
    sched::EventOp::create(builder, loc, host.name + ".done." + std::to_string(i));
  }
}

void ProgramEmitter::emitHostLaunch(const PlannedLaunch &launch,
                                    unsigned index,
                                    std::optional<unsigned> lastCopy) {
  MLIRContext *context = builder.getContext();
  sched::RecordOp::create(builder, loc, host.event(context, "ready", index),
                          stream);
  sched::WaitOp::create(builder, loc, host.event(context, "ready", index),
                        host.stream);
  if (lastCopy) {
    // Its operands' copies to the host may still be on the copy stream.
    sched::WaitOp::create(builder, loc, copies.event(context, "done", *lastCopy),
                          host.stream);
  }
  Block *block = builder.getInsertionBlock();
  Operation *last = block->empty() ? nullptr : &block->back();
  emitLaunch(launch);
  markSteps(launch, block, last);
  sched::RecordOp::create(builder, loc, host.event(context, "done", index),
                          host.stream);
}

void ProgramEmitter::emitCopy(const PlannedLaunch &launch,
                              FlatSymbolRefAttr on) {
  Location at = launch.op ? launch.op->getLoc() : loc;
  sched::CopyOp::create(builder, at, launch.copy->kind,
                        bufferFor(launch.operands[0]),
                        bufferFor(launch.operands[1]), on.getValue());
}

LogicalResult ProgramEmitter::emitOverlapped(const PlannedLaunch &launch,
                                             AsyncLane &lane, unsigned index) {
  MLIRContext *context = builder.getContext();
  sched::RecordOp::create(builder, loc, lane.event(context, "ready", index),
                          stream);
  sched::WaitOp::create(builder, loc, lane.event(context, "ready", index),
                        lane.stream);
  if (launch.copy) {
    emitCopy(launch, lane.stream);
  } else if (failed(emitCollective(launch, lane.stream))) {
    return failure();
  }
  sched::RecordOp::create(builder, loc, lane.event(context, "done", index),
                          lane.stream);
  return success();
}

void ProgramEmitter::waitFor(const AsyncLane &lane, unsigned index) {
  sched::WaitOp::create(builder, loc,
                        lane.event(builder.getContext(), "done", index), stream);
}

LogicalResult ProgramEmitter::emitCollective(const PlannedLaunch &launch,
                                             FlatSymbolRefAttr on) {
  const PlannedCollective &planned = *launch.collective;
  if (!planned.inPlace) {
    Value input = bufferFor(launch.operands[0]);
    Value output = bufferFor(launch.operands[1]);
    bool reduces = planned.kind == sched::CollectiveKind::AllReduce ||
                   planned.kind == sched::CollectiveKind::ReduceScatter;
    SmallVector<int64_t> group = groupRanks(planned.group);
    IntegerAttr peer;
    if (planned.peer) {
      // The peer stage's rank in this rank's replica (replica 0's here).
      int64_t peerRank = *planned.peer * replicas;
      group = {std::min(rank, peerRank), std::max(rank, peerRank)};
      peer = builder.getI64IntegerAttr(peerRank);
    }
    sched::CollectiveOp::create(
        builder, launch.op->getLoc(), planned.kind, input, output, group,
        reduces
            ? sched::ReductionAttr::get(builder.getContext(), planned.reduction)
            : sched::ReductionAttr(),
        peer, on.getValue());
    return success();
  }
  const Root &first = roots[launch.operands.front().root];
  Type element = first.type.getElementType();
  uint64_t end = first.offset;
  for (Access operand : launch.operands) {
    const Root &root = roots[operand.root];
    if (root.home != first.home || arenaOf(root) != arenaOf(first) ||
        root.type.getElementType() != element || root.offset < end) {
      return launch.op->emitError()
             << "a collective's buffers must lie back to back in one arena, "
                "in order, of one element type";
    }
    end = root.offset + static_cast<uint64_t>(root.bytes);
  }
  int64_t bytes = static_cast<int64_t>(end - first.offset);
  int64_t elementBytes = std::max<int64_t>(1, tg::byteSize(RankedTensorType::get(
                                                  {1}, element)));
  auto type = MemRefType::get({bytes / elementBytes}, element);
  Value bucket = createBuffer(type, arenaOf(first),
                              static_cast<int64_t>(first.offset), bytes);
  const PlannedCollective &collective = *launch.collective;
  sched::CollectiveOp::create(
      builder, launch.op->getLoc(), collective.kind, bucket, bucket,
      groupRanks(collective.group),
      sched::ReductionAttr::get(builder.getContext(), collective.reduction),
      IntegerAttr(), on.getValue());
  return success();
}

LogicalResult ProgramEmitter::emitEntries(std::vector<PlannedEntry> &entries) {
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
    // Overlapped work by lane and number, and the launch each is waited
    // for before (none: the entry's end).
    using Pending = std::pair<AsyncLane *, unsigned>;
    std::multimap<size_t, Pending> waitsBefore;
    SmallVector<Pending> waitsAtEnd;
    unsigned firstCopy = copies.next;
    for (auto [index, launch] : llvm::enumerate(entry.launches)) {
      auto [from, to] = waitsBefore.equal_range(index);
      for (auto it = from; it != to; ++it) {
        waitFor(*it->second.first, it->second.second);
      }
      if (launch.host) {
        unsigned number = host.next++;
        emitHostLaunch(launch, number,
                       copies.next > firstCopy
                           ? std::optional<unsigned>(copies.next - 1)
                           : std::nullopt);
        if (launch.hostWaitBefore) {
          waitsBefore.emplace(*launch.hostWaitBefore, Pending{&host, number});
        } else {
          waitsAtEnd.push_back({&host, number});
        }
        continue;
      }
      Block *block = builder.getInsertionBlock();
      Operation *last = block->empty() ? nullptr : &block->back();
      if (!launch.collective && !launch.copy) {
        emitLaunch(launch);
        markSteps(launch, block, last);
        continue;
      }
      bool overlap = launch.copy ? launch.copy->overlap
                                 : launch.collective->overlap;
      if (!overlap) {
        if (launch.copy) {
          emitCopy(launch, stream);
        } else if (failed(emitCollective(launch, stream))) {
          return failure();
        }
        markSteps(launch, block, last);
        continue;
      }
      if (launch.trainingSteps) {
        return launch.op->emitError()
               << "an overlapped collective or copy cannot run in some "
                  "steps only (tg.steps)";
      }
      AsyncLane &lane = launch.copy ? copies : comm;
      unsigned number = lane.next++;
      if (failed(emitOverlapped(launch, lane, number))) {
        return failure();
      }
      std::optional<size_t> waitBefore = launch.copy
                                             ? launch.copy->waitBefore
                                             : launch.collective->waitBefore;
      if (waitBefore) {
        waitsBefore.emplace(*waitBefore, Pending{&lane, number});
      } else {
        waitsAtEnd.push_back({&lane, number});
      }
    }
    for (auto [lane, number] : waitsAtEnd) {
      waitFor(*lane, number);
    }
    for (auto &[name, access] : entry.outputs) {
      sched::OutputOp::create(builder, loc, name, bufferFor(access));
    }
  }
  return success();
}

LogicalResult emitProgram(ModuleOp module, Location loc,
                          std::vector<Root> &roots,
                          std::vector<PlannedEntry> &entries, int64_t threads,
                          int64_t alignment, const ProgramTarget &target) {
  uint64_t align = static_cast<uint64_t>(alignment);
  if (alignment <= 0 || (align & (align - 1)) != 0) {
    return module.emitError()
           << "alignment must be a power of two, got " << alignment;
  }
  ArenaLayout layout = assignOffsets(roots, entries, align);
  ProgramEmitter emitter(module, loc, roots);
  emitter.emitHeader(layout, threads, alignment, target);
  emitter.declareOverlap(entries);
  emitter.declareHostStream(entries);
  emitter.declareKernels(entries);
  if (failed(emitter.checkParameterBytes())) {
    return failure();
  }
  emitter.defineParametersAndStates();
  return emitter.emitEntries(entries);
}

} // namespace tailor::memory
