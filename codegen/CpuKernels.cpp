//===- CpuKernels.cpp - tg op -> CPU runtime kernel -----------------------===//

#include "codegen/CpuKernels.h"

#include "dialects/tg/TGOps.h"
#include "runtime/cuda/AttentionWorkspace.h"
#include "runtime/cuda/GlobalNormWorkspace.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;

namespace tailor::codegen {

bool isCpuElementType(Type type) {
  return type.isF32() || type.isF64() || type.isInteger(32) ||
         type.isInteger(64) || type.isInteger(1);
}

/// Query rows per attention block; the workspace holds one block of scores
/// per worker (runtime/cpu/README.md).
static constexpr int64_t kAttentionBlockRows = 64;

namespace {
/// Builds a choice with the attributes a kernel reads.
struct ChoiceBuilder {
  Operation *op;
  Builder b;
  CpuKernelChoice choice;

  ChoiceBuilder(Operation *op, StringRef kernel, int64_t arity)
      : op(op), b(op->getContext()) {
    choice.kernel = kernel.str();
    choice.arity = arity;
  }
  ChoiceBuilder &i(StringRef name, int64_t value) {
    choice.attributes.append(name, b.getI64IntegerAttr(value));
    return *this;
  }
  ChoiceBuilder &f(StringRef name, double value) {
    choice.attributes.append(name, b.getF64FloatAttr(value));
    return *this;
  }
  ChoiceBuilder &ints(StringRef name, ArrayRef<int64_t> values) {
    choice.attributes.append(name, b.getDenseI64ArrayAttr(values));
    return *this;
  }
  ChoiceBuilder &floats(StringRef name, ArrayRef<double> values) {
    choice.attributes.append(name, b.getDenseF64ArrayAttr(values));
    return *this;
  }
  ChoiceBuilder &s(StringRef name, StringRef value) {
    choice.attributes.append(name, b.getStringAttr(value));
    return *this;
  }
  CpuKernelChoice done() { return std::move(choice); }
};
} // namespace

/// tg.attention's optional masking and score biases, as the attention
/// kernels read them (runtime/cpu/AttentionKeys.h): absent attributes mean
/// none; `bias` = 1 says the launch carries the bias operand after v.
static void addAttentionMasking(ChoiceBuilder &choice,
                                std::optional<uint64_t> window,
                                std::optional<APFloat> softcap,
                                std::optional<ArrayRef<double>> alibiSlopes,
                                Value bias) {
  if (window) {
    choice.i("window", static_cast<int64_t>(*window));
  }
  if (softcap) {
    choice.f("softcap", softcap->convertToDouble());
  }
  if (alibiSlopes) {
    choice.floats("alibi_slopes", *alibiSlopes);
  }
  if (bias) {
    choice.i("bias", 1);
  }
}

/// tg.attention's document masking: `positions` names the operand that
/// holds each token's position within its example (absent: none), so the
/// kernels find it whatever other optional operands the op has.
static void addAttentionPositions(ChoiceBuilder &choice,
                                  MutableOperandRange positions) {
  if (!positions.empty()) {
    choice.i("positions", positions[0].getOperandNumber());
  }
}

/// The op's fixed arity: operands then results.
static int64_t arityOf(Operation *op) {
  return static_cast<int64_t>(op->getNumOperands() + op->getNumResults());
}

static int64_t rankOf(Value value) {
  return llvm::cast<ShapedType>(value.getType()).getRank();
}

/// The CPU choice for the gathers, scatters, cumsum, mod and sign: the
/// attributes their kernels read (runtime/cpu/README.md), reductions by
/// name.
static FailureOr<CpuKernelChoice> selectIndexingKernel(Operation *op) {
  int64_t arity = arityOf(op);
  return llvm::TypeSwitch<Operation *, FailureOr<CpuKernelChoice>>(op)
      .Case([&](tg::GatherElementsOp gather) {
        return ChoiceBuilder(op, "gather_elements", arity)
            .i("axis", static_cast<int64_t>(gather.getAxis()))
            .done();
      })
      .Case([&](tg::ScatterElementsOp scatter) {
        return ChoiceBuilder(op, "scatter_elements", arity)
            .i("axis", static_cast<int64_t>(scatter.getAxis()))
            .s("reduction",
               tg::stringifyScatterReduction(scatter.getReduction()))
            .done();
      })
      .Case([&](tg::GatherNDOp gather) {
        return ChoiceBuilder(op, "gather_nd", arity)
            .i("batch_dims", static_cast<int64_t>(gather.getBatchDims()))
            .done();
      })
      .Case([&](tg::ScatterNDOp scatter) {
        return ChoiceBuilder(op, "scatter_nd", arity)
            .s("reduction",
               tg::stringifyScatterReduction(scatter.getReduction()))
            .i("batch_dims", static_cast<int64_t>(scatter.getBatchDims()))
            .done();
      })
      .Case([&](tg::CumsumOp cumsum) {
        // Variadic: x, y, or x, axis, y when the axis is a run-time value.
        ChoiceBuilder choice(op, "cumsum", -1);
        if (std::optional<uint64_t> axis = cumsum.getAxis()) {
          choice.i("axis", static_cast<int64_t>(*axis));
        }
        return choice.i("exclusive", cumsum.getExclusive() ? 1 : 0)
            .i("reverse", cumsum.getReverse() ? 1 : 0)
            .done();
      })
      .Case([&](tg::ModOp mod) {
        return ChoiceBuilder(op, "mod", arity)
            .i("fmod", mod.getFmod() ? 1 : 0)
            .done();
      })
      .Case([&](tg::SignOp) { return ChoiceBuilder(op, "sign", arity).done(); })
      .Default([&](Operation *) -> FailureOr<CpuKernelChoice> {
        return op->emitError()
               << "internal: " << op->getName() << " is not an indexing op";
      });
}

/// A rank-relative axis counted from the front.
static int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// tg.gelu's and tg.gelu_grad's `approximate` attribute as the kernels read
/// it.
static StringRef approximateName(tg::GeluApproximation approximation) {
  return approximation == tg::GeluApproximation::Tanh ? "tanh" : "none";
}

namespace {
/// The choice for each op kind whose kernel reads attributes or a
/// workspace, one `select` overload per kind (or a shared helper for kinds
/// that differ only in name). `threads` sizes per-worker workspaces.
struct KernelSelector {
  int64_t threads;
  /// Whether the plan runs on CUDA (workspaces sized for its kernels).
  bool cuda = false;

  // --- Forward ops.
  FailureOr<CpuKernelChoice> select(tg::BandMaskOp band) {
    return ChoiceBuilder(band, "band_mask", arityOf(band))
        .i("lower", band.getLowerDiagonal())
        .i("upper", band.getUpperDiagonal())
        .f("inside", band.getInside().convertToDouble())
        .f("outside", band.getOutside().convertToDouble())
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::GeluOp gelu) {
    return ChoiceBuilder(gelu, "gelu", arityOf(gelu))
        .s("approximate", approximateName(gelu.getApproximation()))
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::ReduceSumOp op) { return reduce(op); }
  FailureOr<CpuKernelChoice> select(tg::ReduceMeanOp op) { return reduce(op); }
  FailureOr<CpuKernelChoice> select(tg::ReduceMaxOp op) { return reduce(op); }
  /// Reductions: the kernel is named like the op and reads sorted,
  /// non-negative axes.
  FailureOr<CpuKernelChoice> reduce(Operation *op) {
    auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
    int64_t rank = rankOf(op->getOperand(0));
    SmallVector<int64_t> normalized;
    for (int64_t axis : axes.asArrayRef()) {
      normalized.push_back(normalizeAxis(axis, rank));
    }
    llvm::sort(normalized);
    return ChoiceBuilder(op, op->getName().stripDialect(), arityOf(op))
        .ints("axes", normalized)
        .i("keep_dims", op->hasAttr("keep_dims") ? 1 : 0)
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::SoftmaxOp softmax) {
    return ChoiceBuilder(softmax, "softmax", arityOf(softmax))
        .i("axis", normalizeAxis(softmax.getAxis(), rankOf(softmax.getInput())))
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::LinearOp linear) {
    return gemm(linear, "linear", -1);
  }
  FailureOr<CpuKernelChoice> select(tg::MatmulOp matmul) {
    return gemm(matmul, "matmul", arityOf(matmul));
  }
  FailureOr<CpuKernelChoice> select(tg::LinearWeightGradOp grad) {
    return gemm(grad, "linear_weight_grad", arityOf(grad));
  }
  /// A GEMM, or with tailor-emulate-half's mark its `_fp16` or `_bf16`
  /// kernel, which takes one more operand: a workspace for its two factors
  /// rounded to the format and, for fp16, for its product, which is
  /// rounded before the epilogue adds it (the op's operands and result: a
  /// bias counts, a residual folded in later does not need to).
  FailureOr<CpuKernelChoice> gemm(Operation *op, StringRef kernel,
                                  int64_t arity) {
    bool fp16 = op->hasAttr(tg::TGDialect::kFp16AttrName);
    bool bf16 = op->hasAttr(tg::TGDialect::kBf16AttrName);
    if (!fp16 && !bf16) {
      return ChoiceBuilder(op, kernel, arity).done();
    }
    StringRef format = fp16 ? "fp16" : "bf16";
    if (cuda) {
      return op->emitError() << "emulated " << format
                             << " GEMMs are for the CPU backend (CUDA plans "
                                "compute bf16 on tensor cores)";
    }
    int64_t floats = 0;
    for (Value operand : op->getOperands()) {
      floats += llvm::cast<ShapedType>(operand.getType()).getNumElements();
    }
    if (fp16) {
      floats += llvm::cast<ShapedType>(op->getResult(0).getType())
                    .getNumElements();
    }
    ChoiceBuilder choice(op, (kernel + "_" + format).str(),
                         arity < 0 ? -1 : arity + 1);
    choice.choice.workspaceBytes =
        std::max<int64_t>(floats, 1) * static_cast<int64_t>(sizeof(float));
    return choice.done();
  }
  FailureOr<CpuKernelChoice> select(tg::RMSNormOp norm) {
    return ChoiceBuilder(norm, "rms_norm", arityOf(norm))
        .f("epsilon", norm.getEpsilon().convertToDouble())
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::LayerNormOp norm) {
    return ChoiceBuilder(norm, "layer_norm", -1)
        .f("epsilon", norm.getEpsilon().convertToDouble())
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::RopeOp rope) {
    return ChoiceBuilder(rope, "rope", arityOf(rope))
        .i("interleaved", rope.getInterleaved() ? 1 : 0)
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::AttentionOp attention) {
    auto query = llvm::cast<ShapedType>(attention.getQuery().getType());
    auto key = llvm::cast<ShapedType>(attention.getKey().getType());
    int64_t headDim = query.getShape().back();
    int64_t keys = key.getShape()[2];
    double scale = attention.getScale()
                       ? attention.getScale()->convertToDouble()
                       : 1.0 / std::sqrt(static_cast<double>(headDim));
    // Variadic: q, k, v, [bias], [positions], y, workspace.
    ChoiceBuilder choice(attention, "attention", -1);
    choice.i("causal", attention.getCausal() ? 1 : 0).f("scale", scale);
    addAttentionMasking(choice, attention.getWindow(), attention.getSoftcap(),
                        attention.getAlibiSlopes(), attention.getBias());
    addAttentionPositions(choice, attention.getPositionsMutable());
    choice.choice.workspaceBytes = std::max<int64_t>(threads, 1) *
                                   kAttentionBlockRows * keys *
                                   static_cast<int64_t>(sizeof(float));
    return choice.done();
  }
  FailureOr<CpuKernelChoice> select(tg::TransposeOp transpose) {
    return ChoiceBuilder(transpose, "transpose", arityOf(transpose))
        .ints("permutation", transpose.getPermutation())
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::SliceOp slice) {
    return ChoiceBuilder(slice, "slice", arityOf(slice))
        .ints("starts", slice.getStarts())
        .ints("steps", slice.getSteps())
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::ConcatOp concat) {
    return ChoiceBuilder(concat, "concat", -1)
        .i("axis", normalizeAxis(concat.getAxis(), rankOf(concat.getResult())))
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::SplitOp split) {
    return ChoiceBuilder(split, "split", -1)
        .i("axis", normalizeAxis(split.getAxis(), rankOf(split.getInput())))
        .done();
  }

  // --- Training: gradients, loss, dropout, norms of gradients.
  FailureOr<CpuKernelChoice> select(tg::GeluGradOp gelu) {
    return ChoiceBuilder(gelu, "gelu_grad", arityOf(gelu))
        .s("approximate", approximateName(gelu.getApproximation()))
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::RMSNormGradOp op) {
    return normGrad(op, /*perRow=*/1);
  }
  FailureOr<CpuKernelChoice> select(tg::LayerNormGradOp op) {
    return normGrad(op, /*perRow=*/2);
  }
  /// The workspace holds `perRow` statistics per row: 1/rms, or mean and
  /// 1/std.
  FailureOr<CpuKernelChoice> normGrad(Operation *op, int64_t perRow) {
    auto input = llvm::cast<ShapedType>(op->getOperand(1).getType());
    int64_t rows = input.getNumElements() / input.getShape().back();
    ChoiceBuilder choice(op, op->getName().stripDialect(), arityOf(op) + 1);
    choice.f("epsilon",
             op->getAttrOfType<FloatAttr>("epsilon").getValueAsDouble());
    choice.choice.workspaceBytes =
        std::max<int64_t>(1, rows * perRow) * sizeof(float);
    return choice.done();
  }
  FailureOr<CpuKernelChoice> select(tg::AttentionGradOp grad) {
    auto query = llvm::cast<ShapedType>(grad.getQuery().getType());
    auto key = llvm::cast<ShapedType>(grad.getKey().getType());
    int64_t keys = key.getShape()[2];
    double scale =
        grad.getScale()
            ? grad.getScale()->convertToDouble()
            : 1.0 / std::sqrt(static_cast<double>(query.getShape().back()));
    // Variadic: dout, q, k, v, [bias], [positions], dq, dk, dv, workspace.
    ChoiceBuilder choice(grad, "attention_grad", -1);
    choice.i("causal", grad.getCausal() ? 1 : 0).f("scale", scale);
    addAttentionMasking(choice, grad.getWindow(), grad.getSoftcap(),
                        grad.getAlibiSlopes(), grad.getBias());
    addAttentionPositions(choice, grad.getPositionsMutable());
    if (cuda) {
      // The key-major pass's partial dk, dv and the statistics
      // (runtime/cuda/AttentionWorkspace.h).
      auto value = llvm::cast<ShapedType>(grad.getValue().getType());
      runtime::cuda::AttentionGradShape shape{
          query.getShape()[0], query.getShape()[1], key.getShape()[1],
          query.getShape()[2], keys,                query.getShape()[3],
          value.getShape()[3]};
      choice.choice.workspaceBytes =
          std::max<int64_t>(
              runtime::cuda::attentionGradWorkspaceFloats(shape), 1) *
          static_cast<int64_t>(sizeof(float));
      return choice.done();
    }
    // Per worker: one 64 x S block of probabilities, one of their
    // gradients, and with a softcap one of the cap's derivative.
    int64_t blocks = grad.getSoftcap() ? 3 : 2;
    choice.choice.workspaceBytes = std::max<int64_t>(threads, 1) * blocks *
                                   kAttentionBlockRows * keys *
                                   static_cast<int64_t>(sizeof(float));
    return choice.done();
  }
  FailureOr<CpuKernelChoice> select(tg::CrossEntropyOp op) {
    return crossEntropy(op, /*forward=*/true);
  }
  FailureOr<CpuKernelChoice> select(tg::CrossEntropyGradOp op) {
    return crossEntropy(op, /*forward=*/false);
  }
  /// The loss and its gradient read the same attributes; the forward also
  /// has a workspace of per-row losses, summed in a fixed order.
  FailureOr<CpuKernelChoice> crossEntropy(Operation *op, bool forward) {
    auto reduction = op->getAttrOfType<tg::LossReductionAttr>("reduction");
    tg::LossReduction kind =
        reduction ? reduction.getValue() : tg::LossReduction::Mean;
    int64_t ignore = -100;
    if (auto attr = op->getAttrOfType<IntegerAttr>("ignore_index")) {
      ignore = attr.getInt();
    }
    int64_t arity = arityOf(op);
    ChoiceBuilder choice(op, op->getName().stripDialect(),
                         forward ? arity + 1 : arity);
    choice.i("ignore_index", ignore)
        .s("reduction", tg::stringifyLossReduction(kind));
    if (forward) {
      auto logits = llvm::cast<ShapedType>(op->getOperand(0).getType());
      choice.choice.workspaceBytes =
          std::max<int64_t>(1, logits.getShape()[0]) * sizeof(float);
    }
    return choice.done();
  }
  FailureOr<CpuKernelChoice> select(tg::SoftmaxGradOp grad) {
    return ChoiceBuilder(grad, "softmax_grad", arityOf(grad))
        .i("axis", static_cast<int64_t>(grad.getAxis()))
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::RopeGradOp rope) {
    return ChoiceBuilder(rope, "rope_grad", arityOf(rope))
        .i("interleaved", rope.getInterleaved() ? 1 : 0)
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::SliceGradOp slice) {
    return ChoiceBuilder(slice, "slice_grad", arityOf(slice))
        .ints("starts", slice.getStarts())
        .ints("steps", slice.getSteps())
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::DropoutOp dropout) {
    return ChoiceBuilder(dropout, "dropout", arityOf(dropout))
        .f("p", dropout.getP().convertToDouble())
        .i("salt", dropout.getSalt())
        .done();
  }
  FailureOr<CpuKernelChoice> select(tg::GlobalNormOp norm) {
    ChoiceBuilder choice(norm, "global_norm", -1);
    if (cuda) {
      // The first pass's per-block partials
      // (runtime/cuda/GlobalNormWorkspace.h); the CPU kernel needs none.
      choice.choice.workspaceBytes = runtime::cuda::globalNormWorkspaceBytes();
    }
    return choice.done();
  }
};
} // namespace

/// Fails naming the op when an operand or result has an element type no
/// CPU kernel computes on.
static LogicalResult checkCpuElementTypes(Operation *op) {
  for (Type type : llvm::concat<Type>(op->getOperandTypes(),
                                      op->getResultTypes())) {
    Type element = getElementTypeOrSelf(type);
    if (!isCpuElementType(element)) {
      return op->emitError() << "the CPU backend has no kernel for "
                             << op->getName() << " on " << element
                             << " (it computes on f32, f64, i32, i64 and i1)";
    }
  }
  return success();
}

FailureOr<CpuKernelChoice> selectCpuKernel(Operation *op, int64_t threads,
                                           bool cuda) {
  if (failed(checkCpuElementTypes(op))) {
    return failure();
  }
  KernelSelector selector{threads, cuda};
  return llvm::TypeSwitch<Operation *, FailureOr<CpuKernelChoice>>(op)
      // Kernels named like the op that read no attributes.
      .Case<tg::NegOp, tg::AbsOp, tg::ExpOp, tg::LogOp, tg::SqrtOp, tg::RsqrtOp,
            tg::ReciprocalOp, tg::TanhOp, tg::SigmoidOp, tg::SiluOp, tg::ReluOp,
            tg::ErfOp, tg::SinOp, tg::CosOp, tg::IsNanOp, tg::AddOp, tg::SubOp,
            tg::MulOp, tg::DivOp, tg::PowOp, tg::MaxOp, tg::MinOp, tg::EqOp,
            tg::LtOp, tg::GtOp, tg::SelectOp, tg::CastOp, tg::EmbeddingOp,
            tg::BroadcastOp, tg::SiluGradOp, tg::EmbeddingGradOp>(
          [&](Operation *) -> FailureOr<CpuKernelChoice> {
            return ChoiceBuilder(op, op->getName().stripDialect(), arityOf(op))
                .done();
          })
      .Case<tg::BandMaskOp, tg::GeluOp, tg::ReduceSumOp, tg::ReduceMeanOp,
            tg::ReduceMaxOp, tg::SoftmaxOp, tg::LinearOp, tg::RMSNormOp,
            tg::LayerNormOp, tg::RopeOp, tg::AttentionOp, tg::TransposeOp,
            tg::SliceOp, tg::ConcatOp, tg::SplitOp, tg::GeluGradOp,
            tg::RMSNormGradOp, tg::LayerNormGradOp, tg::AttentionGradOp,
            tg::CrossEntropyOp, tg::CrossEntropyGradOp, tg::SoftmaxGradOp,
            tg::RopeGradOp, tg::SliceGradOp, tg::DropoutOp, tg::GlobalNormOp,
            tg::MatmulOp, tg::LinearWeightGradOp>(
          [&](auto kind) { return selector.select(kind); })
      // Gathers, scatters, cumsum, mod and sign on run-time tensors.
      .Case<tg::GatherElementsOp, tg::ScatterElementsOp, tg::GatherNDOp,
            tg::ScatterNDOp, tg::CumsumOp, tg::ModOp, tg::SignOp>(
          [&](Operation *) { return selectIndexingKernel(op); })
      .Default([&](Operation *) -> FailureOr<CpuKernelChoice> {
        return op->emitError() << "the CPU backend has no kernel for "
                               << op->getName();
      });
}

} // namespace tailor::codegen
