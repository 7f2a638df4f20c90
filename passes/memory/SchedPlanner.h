//===- SchedPlanner.h - lower-to-sched's planner: tg -> planned entries -*- C++ -*-===//
//
// The state and steps of planning one rank (the pass in LowerToSched.cpp
// checks its options and hands the functions here): roots and lifetimes
// (SchedPlanner.cpp), accumulations, optimizer updates and collectives
// (SchedPlannerCollectives.cpp), and the work, overlap and memory proof of
// the planned program (SchedPlannerWork.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_PASSES_MEMORY_SCHEDPLANNER_H
#define TAILOR_PASSES_MEMORY_SCHEDPLANNER_H

#include "codegen/CpuKernels.h"
#include "dialects/tg/TGOps.h"
#include "passes/memory/Fusions.h"
#include "passes/memory/PlannedProgram.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>
#include <vector>

namespace tailor::memory {

/// The pass options planning reads (Passes.td, tailor-lower-to-sched).
struct PlannerOptions {
  std::string backend = "cpu";
  std::string hardware = "cpu";
  std::string precision = "fp32";
  int64_t threads = 8;
  int64_t alignment = 64;
  int64_t sm = 0;
  int64_t deviceMemory = 0;
  int64_t gemmWorkspace = 0;
  int64_t deviceBudget = 0;
};

/// What a launch came from: the op, and the module (or node) it belongs to.
std::string originOf(mlir::Operation *op);

inline mlir::IntegerAttr i64AttrOf(mlir::MLIRContext *context, int64_t v) {
  return mlir::IntegerAttr::get(mlir::IntegerType::get(context, 64), v);
}

inline mlir::FloatAttr f64AttrOf(mlir::MLIRContext *context, llvm::APFloat v) {
  return mlir::FloatAttr::get(mlir::Float64Type::get(context), v.convertToDouble());
}

/// Whether `op` is one of tailor-compress-gradients' ops, which
/// planCompressionOp plans and whose work it counts.
bool isCompressionOp(mlir::Operation *op);

/// Plans the functions of one rank into the module's sched.program.
class SchedPlanner {
public:
  explicit SchedPlanner(const PlannerOptions &options);
  /// Plans `funcs` (in entry order), emits the program and proves that it
  /// fits; the functions stay for the caller to erase.
  mlir::LogicalResult run(mlir::ModuleOp module,
                          llvm::ArrayRef<mlir::func::FuncOp> funcs);

private:
  // The options, under the names the pass gives them.
  std::string backend, hardware, precision;
  int64_t threads, alignment, sm, deviceMemory, gemmWorkspace, deviceBudget;

  unsigned newRoot(Root root) {
    roots.push_back(std::move(root));
    return roots.size() - 1;
  }
  /// The root holding `value`. Planning gives every value a root when it
  /// plans the producer, so a miss is an internal error: it is reported at
  /// the value (once) and planning fails, rather than aliasing root 0.
  std::optional<unsigned> findRoot(mlir::Value value);
  /// The storage root of a tg.dequantize's weight; an error if it has none.
  mlir::FailureOr<Access> storageOf(tg::DequantizeOp dequantize);
  void touch(mlir::Value value, int64_t step) {
    if (std::optional<unsigned> root = findRoot(value)) {
      roots[*root].last = std::max(roots[*root].last, step);
    }
  }
  /// Only meaningful while findRoot finds `value`; a miss has already failed
  /// planning.
  Access accessOf(mlir::Value value) {
    Access access{findRoot(value).value_or(0), memrefFor(value.getType())};
    access.byteOffset = viewOffsets.lookup(value);
    return access;
  }

  /// The root of a declared parameter or state, made on first use.
  mlir::FailureOr<unsigned> paramRoot(mlir::ModuleOp module, mlir::Operation *user,
                                mlir::FlatSymbolRefAttr name);
  mlir::FailureOr<unsigned> stateRoot(mlir::ModuleOp module, mlir::Operation *user,
                                mlir::FlatSymbolRefAttr name);
  /// Plans one function into `entry`, numbering its steps from `step`:
  /// inputs, the fusion decisions, one step per op, then the outputs.
  mlir::LogicalResult planFunction(mlir::ModuleOp module, mlir::func::FuncOp func,
                             PlannedEntry &entry, int64_t &step);

  mlir::LogicalResult planInputs(mlir::func::FuncOp func, PlannedEntry &entry);
  /// A fusion group's one fused_elementwise launch, at its last member.
  mlir::LogicalResult planFusionGroup(const FusionGroup &group, PlannedEntry &entry,
                                int64_t step);
  /// `view` shares the storage of `of` (same bytes, its own shape); the
  /// storage lives at least to `step`.
  mlir::LogicalResult planView(mlir::Value view, mlir::Value of, int64_t step);
  /// Plans one op at `step`: a root (parameter, state, constant, view) or a
  /// launch.
  mlir::LogicalResult planOp(mlir::ModuleOp module, mlir::Operation &op, const Fusions &fusions,
                       PlannedEntry &entry, int64_t step);
  mlir::LogicalResult planDequantize(mlir::ModuleOp module, tg::DequantizeOp dequantize,
                               const Fusions &fusions, PlannedEntry &entry,
                               int64_t step);
  mlir::LogicalResult planConstant(mlir::arith::ConstantOp constant);
  /// Accumulations and optimizer updates: launches on whole states.
  mlir::LogicalResult planStateUpdate(mlir::ModuleOp module, mlir::Operation &op,
                                const Fusions &fusions, PlannedEntry &entry,
                                int64_t step);
  /// A generation plan's tg.cache_write: the token's keys or values into
  /// the cache state at a run-time position (SchedPlannerCache.cpp).
  mlir::LogicalResult planCacheWrite(mlir::ModuleOp module,
                                     tg::CacheWriteOp write,
                                     PlannedEntry &entry, int64_t step);
  /// Layer split's tg.send, tg.recv, tg.slot_write and tg.slot_read
  /// (SchedPlannerPipeline.cpp).
  mlir::LogicalResult planPipelineOp(mlir::ModuleOp module,
                                     mlir::Operation &op, PlannedEntry &entry,
                                     int64_t step);
  /// Optimizer offload: a tg.copy_state between host and device memory.
  mlir::LogicalResult planCopyState(mlir::ModuleOp module, tg::CopyStateOp op,
                                    PlannedEntry &entry);
  /// tg.to_host (`toHost`) and tg.to_device: a copy of the operand into a
  /// new activation in the other memory.
  mlir::LogicalResult planMove(mlir::Operation *op, bool toHost,
                               PlannedEntry &entry, int64_t step);
  /// Marks `launch` (a tg.host update) to run on the host stream, checking
  /// that every operand lives in host memory.
  mlir::LogicalResult runOnHost(PlannedLaunch &launch);
  /// Gives the states of every gradient bucket their roots first, bucket
  /// after bucket, so each bucket's bytes are contiguous in the arena.
  mlir::LogicalResult placeBuckets(mlir::ModuleOp module);
  /// Gradient compression's ops (tg.add_error_feedback, tg.orthogonalize,
  /// ...): launches on whole states, their work counted from the shapes
  /// (SchedPlannerCompression.cpp).
  mlir::LogicalResult planCompressionOp(mlir::ModuleOp module,
                                        mlir::Operation &op,
                                        PlannedEntry &entry, int64_t step);
  /// Top-k's and sign-SGD's ops: launches on a bucket's states and on
  /// the values they make or gather (SchedPlannerCompression.cpp).
  mlir::LogicalResult planBucketCompressionOp(mlir::ModuleOp module,
                                              mlir::Operation &op,
                                              PlannedEntry &entry,
                                              int64_t step);
  /// The whole roots of `names` (states), appended to `operands`.
  mlir::LogicalResult appendStates(mlir::ModuleOp module, mlir::Operation *op,
                                   mlir::ArrayAttr names,
                                   llvm::SmallVectorImpl<Access> &operands);
  /// A new activation root for `result`, made at `step`.
  Access newResult(mlir::Value result, int64_t step);
  /// A bucket's all-reduce: a collective over its states.
  mlir::LogicalResult planAllReduce(mlir::ModuleOp module, tg::AllReduceStatesOp op,
                              PlannedEntry &entry);
  /// ZeRO buckets: one parameter root per bucket, its members placed in it
  /// at their offsets.
  mlir::LogicalResult placeShardBuckets(mlir::ModuleOp module);
  /// This rank's chunk of a bucket's flat parameters.
  Access chunkOf(tg::BucketOp bucket);
  /// The parameter operand of an update: a parameter's root, or this
  /// rank's chunk of a bucket.
  mlir::FailureOr<Access> updatedParam(mlir::ModuleOp module, mlir::Operation *update,
                                 mlir::FlatSymbolRefAttr name);
  /// ZeRO's collectives and resets: reduce-scatter, all-reduce of a value,
  /// the bucket all-gather, and zeroing states.
  mlir::LogicalResult planShardOp(mlir::ModuleOp module, mlir::Operation &op,
                            PlannedEntry &entry, int64_t step);
  /// ZeRO++'s int8 weight gather (tg.gather_bucket `wire`): this rank's
  /// chunk encoded into a staging buffer, then gathered; and the decode of
  /// the gathered wire chunks (tg.dequantize_gathered).
  mlir::LogicalResult planWireGather(tg::GatherBucketOp gather,
                                     tg::BucketOp bucket, PlannedEntry &entry,
                                     int64_t step);
  mlir::LogicalResult planDequantizeGathered(tg::DequantizeGatheredOp decode,
                                             PlannedEntry &entry,
                                             int64_t step);
  /// ZeRO++'s int8 or int4 gradient reduce-scatter (qgZ): the bucket
  /// gradient encoded chunk by chunk into a staging buffer of the wire
  /// chunks, and the wire chunks received by the all-to-all reduced in
  /// f32, each by its format's kernel (quantize_wire_<format>,
  /// dequantize_reduce_wire_<format>).
  mlir::LogicalResult planQuantizeChunks(tg::QuantizeChunksOp encode,
                                         PlannedEntry &entry, int64_t step);
  mlir::LogicalResult planDequantizeReduce(tg::DequantizeReduceOp reduce,
                                           PlannedEntry &entry, int64_t step);
  /// ZeRO++'s hpZ (dialects/tg/TGPartitionOps.td): a tg.secondary_partition
  /// is a copy of this rank's node part of the gathered bucket, a rank view
  /// (rank mod shards); a tg.gather_partition all-gathers the parts over
  /// the node.
  mlir::LogicalResult planPartitionOp(mlir::Operation &op, PlannedEntry &entry,
                                      int64_t step);
  /// A collective from `input` into a new activation of `result`'s type.
  mlir::LogicalResult planValueCollective(mlir::Operation &op, mlir::Value input, mlir::Value result,
                                    PlannedCollective collective,
                                    PlannedEntry &entry, int64_t step);
  /// Any other op: the CPU kernel selection's launch, its results new
  /// activations (or an accumulator written in place).
  mlir::LogicalResult planKernelLaunch(mlir::ModuleOp module, mlir::Operation &op,
                                 const Fusions &fusions, PlannedEntry &entry,
                                 int64_t step);
  mlir::LogicalResult planOutputs(mlir::func::FuncOp func, mlir::func::ReturnOp ret,
                            PlannedEntry &entry, int64_t &step);
  /// Each launch's FLOPs and bytes, for the cost model.
  void recordWork(PlannedEntry &entry);
  /// For each tg.overlap collective: the first later launch touching one of
  /// its roots (where compute waits for it), and its roots kept live until
  /// then (`endStep` when none does).
  void scheduleOverlaps(PlannedEntry &entry, int64_t endStep);
  mlir::LogicalResult proveItFits(mlir::ModuleOp module,
                            const memory::ProgramTarget &target);
  /// A launch whose operands are whole roots (states, parameters) or values
  /// seen with their own type (a reshape's view of a gradient, say).
  PlannedLaunch launchOf(mlir::Operation *op, llvm::StringRef kernel, int64_t arity,
                         llvm::ArrayRef<Access> operands);
  Access whole(unsigned root) { return Access{root, roots[root].type}; }
  /// The root of `value`, used at `step`; failure if it has none.
  mlir::FailureOr<unsigned> useAt(mlir::Value value, int64_t step);

  /// The `linear_quantized` kernel for `linear` reading `dequantize` (as W,
  /// or as W^T with `transposeWeight`); on CUDA targets through a cuBLASLt
  /// GEMM on bf16 copies (`via_gemm`, runtime/cuda/QuantizedGemmWorkspace.h).
  mlir::LogicalResult selectQuantizedLinear(tg::LinearOp linear,
                                      tg::DequantizeOp dequantize,
                                      bool transposeWeight,
                                      codegen::CpuKernelChoice &choice);

  std::vector<Root> roots;
  llvm::DenseMap<mlir::Value, unsigned> rootOf;
  /// The storage root of each tg.dequantize result.
  llvm::DenseMap<mlir::Value, Access> quantizedStorage;
  llvm::StringMap<unsigned> symbolRoots;
  /// The module's symbols by name (a lookup is a hash, not a scan of the
  /// module; the planner adds and erases no tg symbol while it runs).
  mlir::SymbolTableCollection symbols;
  /// The root of each ZeRO bucket's flat parameters (ZeRO-3: its chunk).
  llvm::StringMap<unsigned> bucketRoots;
  /// Values that are views at a byte offset into their root (members of a
  /// gathered ZeRO-3 bucket, and reshapes of them).
  llvm::DenseMap<mlir::Value, int64_t> viewOffsets;
  /// Ranks per node (tg.parallel), for chunks of buckets split per node.
  int64_t ranksPerNode = 1;
  llvm::DenseMap<mlir::Attribute, unsigned> constantRoots;
  /// CPU workers per-worker workspaces are sized for (1 on a GPU).
  int64_t workspaceThreads = 1;
  /// Set once findRoot reported a value without a root.
  bool missingRoot = false;
};

} // namespace tailor::memory

#endif // TAILOR_PASSES_MEMORY_SCHEDPLANNER_H
