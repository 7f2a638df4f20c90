//===- PlannedProgram.h - one rank's planned storage and launches -*- C++ -*-===//
//
// What tailor-lower-to-sched decides before it writes IR: the roots of
// storage (inputs, parameters, states, constants, kernel results) with their
// lifetimes, and per entry the launches with their operands. EmitProgram.cpp
// assigns offsets and writes the sched.program from it.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_MEMORY_PLANNEDPROGRAM_H
#define TAILOR_PASSES_MEMORY_PLANNEDPROGRAM_H

#include "codegen/CpuKernels.h"
#include "passes/memory/ArenaPacking.h"
#include "dialects/sched/SchedOps.h"
#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace tailor::memory {

/// Where a root buffer lives. Views (reshapes) share their root's storage.
enum class Home { Input, Param, Constant, Activation, State };

/// A piece of storage: one input, parameter, state, constant or kernel
/// result.
struct Root {
  Home home = Home::Activation;
  mlir::MemRefType type;
  int64_t bytes = 0;
  /// Live range in steps (op positions, one timeline through every entry),
  /// inclusive.
  int64_t first = 0;
  int64_t last = 0;
  uint64_t offset = 0;
  tg::ParamOp param;
  tg::StateOp state;
  mlir::Attribute constant;
  std::string inputName;
  /// A ZeRO bucket's flat parameters (Home::Param without `param`): its
  /// members are roots placed inside it.
  tg::BucketOp bucket;
  /// A root placed inside another (a bucket member): that root, and the
  /// byte offset in it. It takes no arena space of its own.
  std::optional<unsigned> within;
  uint64_t withinOffset = 0;
  /// A ZeRO-3 member parameter: kept only as this rank's chunk of this
  /// bucket (its root is the chunk, shared with the bucket's root), at
  /// `shardOffset` elements of the bucket's flat space.
  tg::BucketOp shardOf;
  int64_t shardOffset = 0;
  /// In host memory: an offloaded parameter (a `tg.bucket ... host` and
  /// its members, in the host parameter arena, copied to the device to be
  /// read), a `host` state (optimizer offload's, in the host optimizer
  /// arena) or a tg.to_host value (in the host activation arena).
  bool host = false;
  /// Set once the sched op that defines the storage has been emitted.
  mlir::Value view;
};

/// Bytes a plan stores for `type`. Booleans take a byte each (the runtime's
/// Bool); every other element type packs, ceil(elements * bits / 8), so a
/// 4-bit tensor of N elements takes ceil(N / 2) bytes, not N.
inline int64_t storageBytes(mlir::ShapedType type) {
  if (type.getElementType().isInteger(1)) {
    return tg::numElements(type.getShape());
  }
  return tg::byteSize(type);
}

inline Root makeRoot(Home home, mlir::MemRefType type) {
  Root root;
  root.home = home;
  root.type = type;
  root.bytes = storageBytes(type);
  return root;
}

inline mlir::MemRefType memrefFor(mlir::Type tensorType) {
  auto shaped = llvm::cast<mlir::RankedTensorType>(tensorType);
  return mlir::MemRefType::get(shaped.getShape(), shaped.getElementType());
}

/// A launch operand: a root's storage seen with one tensor type (a
/// reshape's view shares its root's bytes).
struct Access {
  unsigned root;
  mlir::MemRefType type;
  /// A rank-dependent view: on rank r it starts
  /// `(r mod rankPeriod) * rankStride` bytes into the root (rankPeriod 0:
  /// the world size). This rank's chunk of a ZeRO bucket.
  int64_t rankStride = 0;
  int64_t rankPeriod = 0;
  /// A view at this many bytes into the root (a member of a gathered
  /// ZeRO-3 bucket).
  int64_t byteOffset = 0;
};

/// A collective in place of a kernel: it reduces its operands, roots
/// placed back to back, as one buffer over a group of ranks.
struct PlannedCollective {
  sched::CollectiveKind kind = sched::CollectiveKind::AllReduce;
  sched::Reduction reduction = sched::Reduction::Avg;
  tg::CommGroup group = tg::CommGroup::World;
  /// In place over its operands' roots back to back (DDP's buckets), or
  /// from operands[0] into operands[1].
  bool inPlace = true;
  /// tg.overlap: issued on the communication stream; the compute stream
  /// waits for it before launch `waitBefore` of the entry (none: at the
  /// entry's end), the first that touches one of its roots.
  bool overlap = false;
  std::optional<size_t> waitBefore;
  /// Send and Recv: the other rank.
  std::optional<int64_t> peer;
};

/// A copy between memories in place of a kernel: operands[0] into
/// operands[1], whole.
struct PlannedCopy {
  sched::CopyKind kind = sched::CopyKind::HostToDevice;
  /// Issued on the copy stream, ordered by events (a prefetch); compute
  /// waits before launch `waitBefore` (none: at the entry's end).
  bool overlap = false;
  std::optional<size_t> waitBefore;
};

/// One planned kernel launch (or output copy, or collective, or copy).
struct PlannedLaunch {
  mlir::Operation *op = nullptr; // null for an output copy
  codegen::CpuKernelChoice choice;
  llvm::SmallVector<Access> operands; // inputs then results
  std::string origin;
  /// The work the launch does (passes/memory/OpCost.h); for a collective,
  /// the bytes of the buffer it reduces.
  double flops = 0;
  double bytes = 0;
  /// Set for a collective (no kernel).
  std::optional<PlannedCollective> collective;
  /// Set for a copy between memories (no kernel).
  std::optional<PlannedCopy> copy;
  /// The step (op position) it was planned at.
  int64_t step = 0;
  /// Its flops and bytes were counted when it was planned (recordWork
  /// leaves them).
  bool workCounted = false;
  /// Runs on the host stream over host memory (a tg.host update), ordered
  /// by events: after what compute and the copy stream issued before it;
  /// compute waits for it before launch `hostWaitBefore` of the entry, the
  /// first outside the host stream that touches one of its roots (none: at
  /// the entry's end).
  bool host = false;
  std::optional<size_t> hostWaitBefore;
  /// tg.steps of its op: runs only in training steps [first, last] (last
  /// -1: no end), every period-th from first; absent, every step.
  struct StepRange {
    int64_t first = 1, last = -1, period = 1;
  };
  std::optional<StepRange> trainingSteps;
};

/// One planned function: an entry of the program.
struct PlannedEntry {
  std::string name;
  llvm::SmallVector<unsigned> inputs; // roots, in argument order
  std::vector<PlannedLaunch> launches;
  llvm::SmallVector<std::pair<std::string, Access>> outputs;
};

/// The machine a program is planned for (lower-to-sched's target options).
/// A CUDA program keeps every arena in device memory and adds the GEMM
/// library's workspace as an arena of its own, so the plan's memory report
/// counts it.
struct ProgramTarget {
  std::string backend = "cpu";
  std::string hardware = "cpu";
  int64_t sm = 0;
  std::string precision = "fp32";
  int64_t deviceMemory = 0;
  int64_t gemmWorkspaceBytes = 0;
  /// Ranks the program is one of (tailor-shard's tg.world_size), and ranks
  /// per node; every rank runs the same program.
  int64_t worldSize = 1;
  int64_t ranksPerNode = 1;
  /// The program's rank: 0 for data parallelism (every rank runs rank 0's
  /// program); for a pipeline stage (tg.pipeline_stage) its first rank,
  /// stage x replicas (its replicas run it on the ranks after).
  int64_t rank = 0;
  /// A pipeline stage's data-parallel replicas: a send or receive names the
  /// peer stage's first rank (replica 0's), and the `replicas` and `stages`
  /// groups are rank 0's stage group and pipeline.
  int64_t replicas = 1;
  /// A pipeline stage's point-to-point sends: bytes of the `p2p_outbox`
  /// arena the runtime copies them into (every send of a step kept until
  /// the step ends).
  uint64_t outboxBytes = 0;
  bool isCuda() const { return backend == "cuda"; }
};

/// Assigns every root its arena offset (parameters, constants and states
/// back to back; inputs and activations packed by lifetime) and writes the
/// sched.program: arenas, kernels, storage views, and per entry its
/// inputs, launches and outputs. Fails with an error on `module`.
mlir::LogicalResult emitProgram(mlir::ModuleOp module, mlir::Location loc,
                                std::vector<Root> &roots,
                                std::vector<PlannedEntry> &entries,
                                int64_t threads, int64_t alignment,
                                const ProgramTarget &target);

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_PLANNEDPROGRAM_H
