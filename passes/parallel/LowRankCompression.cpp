//===- LowRankCompression.cpp - PowerSGD and ACP-SGD on one DDP bucket ---===//
//
// What tailor-compress-gradients writes for `powersgd` and `acp-sgd` in
// place of a bucket's all-reduce; CompressGradients.cpp's file comment
// gives the algorithms, step for step.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/LowRankCompression.h"

namespace tailor::parallel {

using namespace mlir;

void runInSteps(Operation *op, int64_t first, int64_t last) {
  op->setAttr(tg::TGDialect::kStepsAttrName,
              DenseI64ArrayAttr::get(op->getContext(), {first, last}));
}

static FlatSymbolRefAttr ref(tg::StateOp state) {
  return FlatSymbolRefAttr::get(state.getSymNameAttr());
}

static void emitErrorFeedback(OpBuilder &builder, Location loc,
                              const LowRankBucket &bucket) {
  // input_tensor.add_(error); input_tensor_cp = input_tensor.clone()
  for (const LowRankMember &m : bucket.members) {
    if (m.error) {
      runInSteps(tg::AddErrorFeedbackOp::create(builder, loc, ref(m.grad),
                                           ref(m.error)),
            bucket.firstStep, -1);
    }
  }
}

/// The tensors not worth compressing, averaged as they are.
static void emitPlainReduce(OpBuilder &builder, Location loc,
                            const LowRankBucket &bucket) {
  SmallVector<Attribute> plain;
  for (const LowRankMember &m : bucket.members) {
    if (!m.p) {
      plain.push_back(ref(m.grad));
    }
  }
  if (!plain.empty()) {
    runInSteps(tg::AllReduceStatesOp::create(builder, loc,
                                        builder.getArrayAttr(plain),
                                        tg::CommReduction::Avg, bucket.group),
          bucket.firstStep, -1);
  }
}

static void emitErrorStore(OpBuilder &builder, Location loc,
                           const LowRankBucket &bucket) {
  // error = input_tensor_cp - input_tensor
  for (const LowRankMember &m : bucket.members) {
    if (m.error) {
      runInSteps(tg::StoreErrorFeedbackOp::create(builder, loc, ref(m.error),
                                             ref(m.grad)),
            bucket.firstStep, -1);
    }
  }
}

/// The hook's compressed step, from step start + 1 on.
static void emitCompressed(OpBuilder &builder, Location loc,
                           const LowRankBucket &bucket) {
  int64_t first = bucket.firstStep;
  auto from = [&](Operation *op) { runInSteps(op, first, -1); };
  SmallVector<Attribute> ps, qs;
  for (const LowRankMember &m : bucket.members) {
    if (m.p) {
      ps.push_back(ref(m.p));
      qs.push_back(ref(m.q));
    }
  }
  // (Nothing compressed: only the residual of the plain all-reduce.)
  if (!ps.empty()) {
    // Q: fixed first values (once with warm start, else every step),
    // orthogonalized; P = M Q, summed over ranks.
    for (const LowRankMember &m : bucket.members) {
      if (!m.p) {
        continue;
      }
      runInSteps(tg::LowRankInitOp::create(builder, loc, ref(m.q)), first,
            bucket.warmStart ? first : -1);
      from(tg::OrthogonalizeOp::create(builder, loc, ref(m.q),
                                       builder.getF64FloatAttr(0.0)));
      from(tg::LowRankMatmulOp::create(builder, loc, ref(m.grad), UnitAttr(),
                                       ref(m.q), UnitAttr(), ref(m.p)));
    }
    from(tg::AllReduceStatesOp::create(builder, loc, builder.getArrayAttr(ps),
                                       tg::CommReduction::Sum, bucket.group));
    // P orthogonalized; Q = M^T P, averaged over ranks.
    for (const LowRankMember &m : bucket.members) {
      if (!m.p) {
        continue;
      }
      from(tg::OrthogonalizeOp::create(builder, loc, ref(m.p),
                                       builder.getF64FloatAttr(0.0)));
      from(tg::LowRankMatmulOp::create(builder, loc, ref(m.grad),
                                       builder.getUnitAttr(), ref(m.p),
                                       UnitAttr(), ref(m.q)));
    }
    from(tg::AllReduceStatesOp::create(builder, loc, builder.getArrayAttr(qs),
                                       tg::CommReduction::Avg, bucket.group));
    // M = P Q^T.
    for (const LowRankMember &m : bucket.members) {
      if (m.p) {
        from(tg::LowRankMatmulOp::create(builder, loc, ref(m.p), UnitAttr(),
                                         ref(m.q), builder.getUnitAttr(),
                                         ref(m.grad)));
      }
    }
  }
}

/// ACP-SGD's two alternating steps (the file comment gives the variant).
static void emitAlternating(OpBuilder &builder, Location loc,
                            const LowRankBucket &bucket) {
  int64_t first = bucket.firstStep;
  auto every2From = [](Operation *op, int64_t from) {
    op->setAttr(tg::TGDialect::kStepsAttrName,
                DenseI64ArrayAttr::get(op->getContext(), {from, -1, 2}));
  };
  auto epsilon = builder.getF64FloatAttr(1e-8);
  SmallVector<Attribute> ps, qs;
  for (const LowRankMember &m : bucket.members) {
    if (m.p) {
      ps.push_back(ref(m.p));
      qs.push_back(ref(m.q));
    }
  }
  if (ps.empty()) {
    return;
  }
  // Q's first values, once.
  for (const LowRankMember &m : bucket.members) {
    if (m.p) {
      runInSteps(tg::LowRankInitOp::create(builder, loc, ref(m.q)), first, first);
    }
  }
  // P steps: P = M orth(Q), averaged over ranks; M = P Q^T.
  for (const LowRankMember &m : bucket.members) {
    if (!m.p) {
      continue;
    }
    every2From(tg::OrthogonalizeOp::create(builder, loc, ref(m.q), epsilon),
               first);
    every2From(tg::LowRankMatmulOp::create(builder, loc, ref(m.grad),
                                           UnitAttr(), ref(m.q), UnitAttr(),
                                           ref(m.p)),
               first);
  }
  every2From(tg::AllReduceStatesOp::create(builder, loc,
                                           builder.getArrayAttr(ps),
                                           tg::CommReduction::Avg, bucket.group),
             first);
  // Q steps: Q = M^T orth(P), averaged over ranks; M = P Q^T.
  for (const LowRankMember &m : bucket.members) {
    if (!m.p) {
      continue;
    }
    every2From(tg::OrthogonalizeOp::create(builder, loc, ref(m.p), epsilon),
               first + 1);
    every2From(tg::LowRankMatmulOp::create(builder, loc, ref(m.grad),
                                           builder.getUnitAttr(), ref(m.p),
                                           UnitAttr(), ref(m.q)),
               first + 1);
  }
  every2From(tg::AllReduceStatesOp::create(builder, loc,
                                           builder.getArrayAttr(qs),
                                           tg::CommReduction::Avg, bucket.group),
             first + 1);
  // M = P Q^T, in both.
  for (const LowRankMember &m : bucket.members) {
    if (m.p) {
      runInSteps(tg::LowRankMatmulOp::create(builder, loc, ref(m.p), UnitAttr(),
                                        ref(m.q), builder.getUnitAttr(),
                                        ref(m.grad)),
            first, -1);
    }
  }
}

void emitLowRankCompression(OpBuilder &builder, Location loc,
                            const LowRankBucket &bucket, bool alternating) {
  emitErrorFeedback(builder, loc, bucket);
  emitPlainReduce(builder, loc, bucket);
  if (alternating) {
    emitAlternating(builder, loc, bucket);
  } else {
    emitCompressed(builder, loc, bucket);
  }
  emitErrorStore(builder, loc, bucket);
}

} // namespace tailor::parallel
