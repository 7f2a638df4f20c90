//===- TGOps.h - the tg dialect, its attributes and ops ---------*- C++ -*-===//

#ifndef TAILOR_DIALECTS_TG_TGOPS_H
#define TAILOR_DIALECTS_TG_TGOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/tg/TGDialect.h.inc"
#include "dialects/tg/TGEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/tg/TGAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/tg/TGOps.h.inc"

namespace tailor::tg {
/// The masking attributes tg.attention and tg.attention_grad share: a
/// window needs `causal` and at least one key, a softcap must be positive.
mlir::LogicalResult verifyAttentionMasking(mlir::Operation *op, bool causal,
                                           std::optional<uint64_t> window,
                                           std::optional<llvm::APFloat> softcap);
/// tg.attention's and tg.attention_grad's optional document masking:
/// `positions` (null: none) needs `causal` and the shape [B, T] of
/// `query`'s batch and query rows.
mlir::LogicalResult verifyAttentionPositions(mlir::Operation *op,
                                             mlir::Value positions,
                                             mlir::Value query, bool causal);
/// The score biases tg.attention and tg.attention_grad share:
/// `alibiSlopes` holds one finite slope per query head, and `bias` (may be
/// null) is rank 4 with each dim equal to the scores' [B, Hq, T, S] dim or
/// 1, of the query's element type.
mlir::LogicalResult
verifyAttentionBias(mlir::Operation *op, mlir::Value query, mlir::Value key,
                    std::optional<llvm::ArrayRef<double>> alibiSlopes,
                    mlir::Value bias);
} // namespace tailor::tg

#endif // TAILOR_DIALECTS_TG_TGOPS_H
