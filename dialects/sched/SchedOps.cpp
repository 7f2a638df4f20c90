//===- SchedOps.cpp - sched dialect registration and op verifiers ---------===//

#include "dialects/sched/SchedOps.h"
#include "dialects/tg/TGQuant.h"
#include "dialects/tg/TGShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tailor::sched;

#include "dialects/sched/SchedDialect.cpp.inc"
#include "dialects/sched/SchedEnums.cpp.inc"

void SchedDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/sched/SchedOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Resolves `name` to a declaration of kind `DeclOp` in the enclosing
/// program, or reports what was expected.
template <typename DeclOp>
static FailureOr<DeclOp> lookupDeclaration(Operation *user,
                                           SymbolTableCollection &symbolTable,
                                           FlatSymbolRefAttr name,
                                           StringRef role) {
  auto decl = symbolTable.lookupNearestSymbolFrom<DeclOp>(user, name);
  if (!decl) {
    return user->emitOpError()
           << role << " " << name << " does not name a "
           << DeclOp::getOperationName() << " in the enclosing program";
  }
  return decl;
}

static int64_t bufferBytes(Value buffer) {
  return tailor::tg::byteSize(llvm::cast<ShapedType>(buffer.getType()));
}

static bool isHostArena(ArenaKind kind) {
  return kind == ArenaKind::Host || kind == ArenaKind::HostPinned;
}

//===----------------------------------------------------------------------===//
// The program and its declarations
//===----------------------------------------------------------------------===//

LogicalResult ProgramOp::verify() {
  int64_t rank = getRankAttr().getInt();
  int64_t worldSize = getWorldSizeAttr().getInt();
  if (worldSize < 1) {
    return emitOpError() << "world size must be >= 1, got " << worldSize;
  }
  if (rank < 0 || rank >= worldSize) {
    return emitOpError() << "rank " << rank << " is outside [0, " << worldSize
                         << ")";
  }
  return success();
}

LogicalResult ProgramOp::verifyRegions() {
  // Work runs in block order, so a wait must follow a record of its event;
  // otherwise the waiting stream would block forever.
  llvm::DenseSet<StringAttr> recorded;
  for (Operation &op : getBody().front()) {
    if (auto record = llvm::dyn_cast<RecordOp>(op)) {
      recorded.insert(record.getEventAttr().getAttr());
    } else if (auto wait = llvm::dyn_cast<WaitOp>(op)) {
      if (!recorded.contains(wait.getEventAttr().getAttr())) {
        return wait.emitOpError()
               << "waits on event " << wait.getEventAttr()
               << " before any sched.record of it in program order";
      }
    }
  }
  return success();
}

LogicalResult ArenaOp::verify() {
  int64_t size = getSizeAttr().getInt();
  int64_t alignment = getAlignmentAttr().getInt();
  if (size < 0) {
    return emitOpError() << "arena @" << getSymName()
                         << " has a negative size " << size;
  }
  if (alignment <= 0 || !llvm::isPowerOf2_64(alignment)) {
    return emitOpError() << "alignment of arena @" << getSymName()
                         << " must be a power of two, got " << alignment;
  }
  return success();
}

LogicalResult KernelOp::verify() {
  if (getArityAttr().getInt() < -1) {
    return emitOpError() << "kernel @" << getSymName()
                         << " has arity " << getArityAttr().getInt()
                         << " (expected a count, or -1 for variadic)";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// A view's type must be a static row-major memref that fits in `size`
/// bytes at an element-aligned `offset`.
static LogicalResult verifyView(Operation *op, MemRefType type, int64_t offset,
                                int64_t size) {
  if (!type.hasStaticShape() || !type.getLayout().isIdentity()) {
    return op->emitOpError() << "expected a static, row-major memref, got "
                             << type;
  }
  int64_t bytes = tailor::tg::byteSize(type);
  if (size < bytes) {
    return op->emitOpError() << "buffer of " << size << " bytes cannot hold "
                             << type << " (" << bytes << " bytes)";
  }
  int64_t elementBytes =
      std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  if (offset < 0 || offset % elementBytes != 0) {
    return op->emitOpError()
           << "offset " << offset
           << " must be non-negative and a multiple of the " << elementBytes
           << "-byte element size";
  }
  return success();
}

/// `[offset, offset + size)` must lie inside the named arena.
static LogicalResult verifyViewInArena(Operation *op,
                                       SymbolTableCollection &symbolTable,
                                       FlatSymbolRefAttr arenaName,
                                       int64_t offset, int64_t size) {
  FailureOr<ArenaOp> arena =
      lookupDeclaration<ArenaOp>(op, symbolTable, arenaName, "arena");
  if (failed(arena)) {
    return failure();
  }
  int64_t end = offset + size;
  if (end > arena->getSizeAttr().getInt()) {
    return op->emitOpError()
           << "buffer [" << offset << ", " << end << ") overruns arena @"
           << arena->getSymName() << " of " << arena->getSizeAttr().getInt()
           << " bytes";
  }
  return success();
}

LogicalResult BufferOp::verify() {
  return verifyView(*this, getType(), getOffsetAttr().getInt(),
                    getSizeAttr().getInt());
}

ArenaOp BufferOp::lookupArena(SymbolTableCollection &symbolTable) {
  return symbolTable.lookupNearestSymbolFrom<ArenaOp>(*this, getArenaAttr());
}

LogicalResult BufferOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  int64_t stride = getRankStride().value_or(0);
  if (stride < 0) {
    return emitOpError() << "rank_stride must not be negative, got " << stride;
  }
  // The view must lie in its arena at the last position of any rank.
  int64_t positions = 1;
  if (stride > 0) {
    auto program = (*this)->getParentOfType<ProgramOp>();
    int64_t world = program ? static_cast<int64_t>(program.getWorldSize()) : 1;
    positions = getRankPeriod() ? static_cast<int64_t>(*getRankPeriod()) : world;
    if (positions < 1 || world % positions != 0) {
      return emitOpError() << "rank period " << positions
                           << " does not divide the world of " << world
                           << " ranks";
    }
  }
  return verifyViewInArena(*this, symbolTable, getArenaAttr(),
                           getOffsetAttr().getInt(),
                           (positions - 1) * stride + getSizeAttr().getInt());
}

LogicalResult ParamOp::verify() {
  if (getName().empty()) {
    return emitOpError() << "expected a parameter name";
  }
  if (getInit().has_value() != getInitValue().has_value()) {
    return emitOpError() << "parameter '" << getName()
                         << "' needs an init kind and value together";
  }
  if (getInit() && getFile()) {
    return emitOpError() << "parameter '" << getName()
                         << "' has both a file and an init";
  }
  if (getFile().has_value() !=
      (getFileOffset().has_value() && getFileLength().has_value())) {
    return emitOpError() << "parameter '" << getName()
                         << "' needs a file, an offset and a length together";
  }
  if (getQuantization().has_value() != getSourceType().has_value()) {
    return emitOpError() << "parameter '" << getName()
                         << "' needs a quantization and a source type together";
  }
  std::optional<tailor::quant::QuantSpec> spec;
  if (DictionaryAttr quant = getQuantizationAttr()) {
    FailureOr<tailor::quant::QuantSpec> parsed = tailor::tg::quantSpecFromDict(
        quant, [&] { return emitOpError() << "parameter '" << getName() << "': "; });
    if (failed(parsed)) {
      return failure();
    }
    spec = *parsed;
    auto source = llvm::dyn_cast<FloatType>(*getSourceType());
    uint64_t storage = tailor::quant::storageBytes(*spec);
    // A ZeRO-3 shard keeps a chunk of the bytes; its shape is the whole.
    uint64_t held = static_cast<uint64_t>(getType().getNumElements());
    if (DictionaryAttr shard = getShardAttr()) {
      auto shape = shard.getAs<DenseI64ArrayAttr>("shape");
      held = shape && shape.size() == 1 ? static_cast<uint64_t>(shape[0]) : 0;
    }
    if (!source || getType().getRank() != 1 ||
        !getType().getElementType().isUnsignedInteger(8) || held != storage) {
      return emitOpError() << "quantized parameter '" << getName()
                           << "' needs a float source type and a buffer of "
                           << storage << " ui8, got " << *getSourceType()
                           << " and " << getType();
    }
    if (getTrainable()) {
      return emitOpError() << "quantized parameter '" << getName()
                           << "' cannot be trainable";
    }
  }
  if (getShard() && failed(logicalBytes())) {
    return failure();
  }
  if (getFile()) {
    int64_t length = getFileLengthAttr().getInt();
    if (getFileOffsetAttr().getInt() < 0 || length < 0) {
      return emitOpError() << "parameter '" << getName()
                           << "' has a negative file offset or length";
    }
    if (spec) {
      int64_t expected = spec->rows * spec->cols *
                         (llvm::cast<FloatType>(*getSourceType()).getWidth() / 8);
      if (length != expected) {
        return emitOpError() << "quantized parameter '" << getName()
                             << "' reads " << length
                             << " bytes from its file but its float weight "
                                "holds "
                             << expected;
      }
    } else if (FailureOr<int64_t> logical = logicalBytes();
               failed(logical)) {
      return failure();
    } else if (length != *logical) {
      InFlightDiagnostic diag = emitOpError()
                                << "parameter '" << getName() << "' reads "
                                << length << " bytes from its file but ";
      if (getShard()) {
        diag << "its shard's shape holds " << *logical;
      } else {
        diag << getType() << " holds " << *logical;
      }
      return diag;
    }
  }
  return verifyView(*this, getType(), getOffsetAttr().getInt(),
                    getSizeAttr().getInt());
}

FailureOr<int64_t> ParamOp::logicalBytes() {
  DictionaryAttr shard = getShardAttr();
  if (!shard) {
    return tailor::tg::byteSize(getType());
  }
  auto shape = shard.getAs<DenseI64ArrayAttr>("shape");
  auto offset = shard.getAs<IntegerAttr>("offset");
  auto flat = shard.getAs<IntegerAttr>("flat_elements");
  auto group = shard.getAs<DenseI64ArrayAttr>("group");
  if (!shape || !offset || !flat || !group || group.empty() ||
      flat.getInt() % static_cast<int64_t>(group.size()) != 0 ||
      flat.getInt() / static_cast<int64_t>(group.size()) !=
          getType().getNumElements()) {
    return emitOpError() << "sharded parameter '" << getName()
                         << "' needs shard {shape, offset, flat_elements, "
                            "group} with a view of flat_elements / "
                            "group size elements";
  }
  int64_t numel = tailor::tg::numElements(shape.asArrayRef());
  if (offset.getInt() < 0 || offset.getInt() + numel > flat.getInt()) {
    return emitOpError() << "sharded parameter '" << getName() << "' at "
                         << offset.getInt() << " leaves its bucket of "
                         << flat.getInt() << " elements";
  }
  return tailor::tg::byteSize(
      RankedTensorType::get(shape.asArrayRef(), getType().getElementType()));
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyViewInArena(*this, symbolTable, getArenaAttr(),
                           getOffsetAttr().getInt(), getSizeAttr().getInt());
}

LogicalResult ConstantOp::verify() {
  auto valueType = llvm::cast<ShapedType>(getValue().getType());
  if (valueType.getShape() != getType().getShape() ||
      valueType.getElementType() != getType().getElementType()) {
    return emitOpError() << "value of type " << valueType
                         << " does not match the buffer " << getType();
  }
  return verifyView(*this, getType(), getOffsetAttr().getInt(),
                    getSizeAttr().getInt());
}

LogicalResult ConstantOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyViewInArena(*this, symbolTable, getArenaAttr(),
                           getOffsetAttr().getInt(), getSizeAttr().getInt());
}

LogicalResult StateOp::verify() {
  if (getName().empty() || getParameter().empty()) {
    return emitOpError() << "expected a state name and its parameter";
  }
  StringRef kind = getKind();
  if (!llvm::is_contained({"grad", "exp_avg", "exp_avg_sq", "momentum_buffer",
                           "master", "grad_host", "powersgd_error",
                           "powersgd_p", "powersgd_q", "key_cache",
                           "value_cache", "pipeline_input"},
                          kind)) {
    return emitOpError() << "unknown state kind '" << kind
                         << "' (expected grad, exp_avg, exp_avg_sq, "
                            "momentum_buffer, master, grad_host, "
                            "powersgd_error, powersgd_p, powersgd_q, "
                            "key_cache, value_cache or pipeline_input)";
  }
  return verifyView(*this, getType(), getOffsetAttr().getInt(),
                    getSizeAttr().getInt());
}

LogicalResult StateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyViewInArena(*this, symbolTable, getArenaAttr(),
                           getOffsetAttr().getInt(), getSizeAttr().getInt());
}

LogicalResult InputOp::verify() {
  if (getName().empty()) {
    return emitOpError() << "expected an input name";
  }
  return verifyView(*this, getType(), getOffsetAttr().getInt(),
                    getSizeAttr().getInt());
}

LogicalResult InputOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyViewInArena(*this, symbolTable, getArenaAttr(),
                           getOffsetAttr().getInt(), getSizeAttr().getInt());
}

//===----------------------------------------------------------------------===//
// Work
//===----------------------------------------------------------------------===//

static LogicalResult verifyLaunchDims(Operation *op, StringRef name,
                                      std::optional<ArrayRef<int64_t>> dims) {
  if (!dims) {
    return success();
  }
  if (dims->size() != 3 || llvm::any_of(*dims, [](int64_t d) { return d < 1; })) {
    return op->emitOpError() << "expected " << name
                             << " as three positive sizes (x, y, z), got "
                             << tailor::tg::formatShape(*dims);
  }
  return success();
}

LogicalResult LaunchOp::verify() {
  if (failed(verifyLaunchDims(*this, "grid", getGrid())) ||
      failed(verifyLaunchDims(*this, "block", getBlock()))) {
    return failure();
  }
  return success();
}

LogicalResult LaunchOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<KernelOp> kernel = lookupDeclaration<KernelOp>(
      *this, symbolTable, getKernelAttr(), "kernel");
  if (failed(kernel) || failed(lookupDeclaration<StreamOp>(
                            *this, symbolTable, getStreamAttr(), "stream"))) {
    return failure();
  }
  int64_t arity = kernel->getArityAttr().getInt();
  if (arity >= 0 && static_cast<int64_t>(getArgs().size()) != arity) {
    return emitOpError() << "kernel @" << kernel->getSymName() << " takes "
                         << arity << " buffers, got "
                         << getArgs().size();
  }
  return success();
}

LogicalResult CopyOp::verify() {
  int64_t sourceBytes = bufferBytes(getSource());
  int64_t targetBytes = bufferBytes(getTarget());
  if (sourceBytes != targetBytes) {
    return emitOpError() << "copies " << sourceBytes << " bytes into a "
                         << targetBytes << "-byte target";
  }
  return success();
}

LogicalResult CopyOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (failed(lookupDeclaration<StreamOp>(*this, symbolTable, getStreamAttr(),
                                         "stream"))) {
    return failure();
  }
  bool sourceOnHost = getKind() == CopyKind::HostToDevice ||
                      getKind() == CopyKind::HostToHost;
  bool targetOnHost = getKind() == CopyKind::DeviceToHost ||
                      getKind() == CopyKind::HostToHost;
  auto check = [&](Value buffer, bool wantHost,
                   StringRef role) -> LogicalResult {
    auto view = buffer.getDefiningOp<BufferOp>();
    if (!view) {
      return success();
    }
    ArenaOp arena = view.lookupArena(symbolTable);
    if (!arena || isHostArena(arena.getKind()) == wantHost) {
      return success();
    }
    return emitOpError() << stringifyCopyKind(getKind()) << " copy expects a "
                         << (wantHost ? "host" : "device") << " " << role
                         << ", but it is in " << stringifyArenaKind(arena.getKind())
                         << " arena @" << arena.getSymName();
  };
  if (failed(check(getSource(), sourceOnHost, "source")) ||
      failed(check(getTarget(), targetOnHost, "target"))) {
    return failure();
  }
  return success();
}

LogicalResult CollectiveOp::verify() {
  auto program = (*this)->getParentOfType<ProgramOp>();
  int64_t worldSize = program.getWorldSizeAttr().getInt();
  int64_t programRank = program.getRankAttr().getInt();
  ArrayRef<int64_t> group = getGroup();
  if (group.empty()) {
    return emitOpError() << "expected a non-empty group of ranks";
  }
  llvm::DenseSet<int64_t> seen;
  for (int64_t rank : group) {
    if (rank < 0 || rank >= worldSize) {
      return emitOpError() << "group rank " << rank << " is outside [0, "
                           << worldSize << ")";
    }
    if (!seen.insert(rank).second) {
      return emitOpError() << "group lists rank " << rank << " twice";
    }
  }
  if (!seen.contains(programRank)) {
    return emitOpError() << "group " << tailor::tg::formatShape(group)
                         << " does not contain this program's rank "
                         << programRank;
  }

  bool reduces = getKind() == CollectiveKind::AllReduce ||
                 getKind() == CollectiveKind::ReduceScatter;
  if (reduces != getReduction().has_value()) {
    return emitOpError() << stringifyCollectiveKind(getKind())
                         << (reduces ? " needs" : " takes no")
                         << " reduction";
  }
  bool pointToPoint = getKind() == CollectiveKind::Send ||
                      getKind() == CollectiveKind::Recv;
  bool rooted = getKind() == CollectiveKind::Broadcast || pointToPoint;
  if (rooted != getRoot().has_value()) {
    return emitOpError() << stringifyCollectiveKind(getKind())
                         << (rooted ? " needs" : " takes no") << " root";
  }
  if (rooted && !seen.contains(getRootAttr().getInt())) {
    return emitOpError() << "root " << getRootAttr().getInt()
                         << " is not in the group";
  }
  if (pointToPoint &&
      (group.size() != 2 || getRootAttr().getInt() == programRank)) {
    return emitOpError() << stringifyCollectiveKind(getKind())
                         << " needs a group of this rank and the other one "
                            "(root)";
  }

  if (getInput().getType().getElementType() !=
      getOutput().getType().getElementType()) {
    return emitOpError() << "input and output element types differ: "
                         << getInput().getType().getElementType() << " vs "
                         << getOutput().getType().getElementType();
  }
  int64_t ranks = group.size();
  int64_t in = bufferBytes(getInput());
  int64_t out = bufferBytes(getOutput());
  int64_t expectedOut = in;
  if (getKind() == CollectiveKind::ReduceScatter) {
    if (in % ranks != 0) {
      return emitOpError() << "reduce_scatter input of " << in
                           << " bytes does not divide among " << ranks
                           << " ranks";
    }
    expectedOut = in / ranks;
  } else if (getKind() == CollectiveKind::AllGather) {
    expectedOut = in * ranks;
  } else if (getKind() == CollectiveKind::AllToAll && in % ranks != 0) {
    return emitOpError() << "all_to_all input of " << in
                         << " bytes does not divide among " << ranks
                         << " ranks";
  }
  if (out != expectedOut) {
    return emitOpError() << stringifyCollectiveKind(getKind()) << " over "
                         << ranks << " ranks of " << in
                         << " input bytes needs an output of " << expectedOut
                         << " bytes, got " << out;
  }
  return success();
}

LogicalResult
CollectiveOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return lookupDeclaration<StreamOp>(*this, symbolTable, getStreamAttr(),
                                     "stream");
}

/// Record and wait both name an event and the stream they act on.
static LogicalResult verifyEventOnStream(Operation *op,
                                         SymbolTableCollection &symbolTable,
                                         FlatSymbolRefAttr event,
                                         FlatSymbolRefAttr stream) {
  if (failed(lookupDeclaration<EventOp>(op, symbolTable, event, "event")) ||
      failed(lookupDeclaration<StreamOp>(op, symbolTable, stream, "stream"))) {
    return failure();
  }
  return success();
}

LogicalResult RecordOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyEventOnStream(*this, symbolTable, getEventAttr(),
                             getStreamAttr());
}

LogicalResult WaitOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyEventOnStream(*this, symbolTable, getEventAttr(),
                             getStreamAttr());
}

#define GET_OP_CLASSES
#include "dialects/sched/SchedOps.cpp.inc"
