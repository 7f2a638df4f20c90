//===- TGQuant.h - quantization specs as MLIR attributes --------*- C++ -*-===//
//
// A quantized parameter's scheme travels through the compiler as one
// dictionary with the same keys everywhere: `quant` on tg.param,
// `quantization` on sched.param, and the attributes of a `linear_quantized`
// or `dequantize` launch (runtime/cpu/README.md). Keys: scheme (string),
// rows, cols (the weight as PyTorch's Linear stores it, [out, in]),
// block_size, double_quant, nested_block_size (nf4), bits, group_size,
// act_order (gptq), outlier_threshold (f64), outlier_columns (int8),
// source_transposed (the model file stores W^T, as TorchScript exports of
// Linear layers do), checkpoint and module (gptq: the file holding the
// quantized bytes, and the module name they are under). Absent keys take runtime/quant's defaults.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_DIALECTS_TG_TGQUANT_H
#define TAILOR_DIALECTS_TG_TGQUANT_H

#include "runtime/quant/QuantizedWeight.h"
#include "runtime/quant/Wire.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"

namespace tailor::tg {

// ZeRO++'s wire chunks: int8 (tg.gather_bucket `wire`), int8 or int4
// (tg.quantize_chunks and tg.dequantize_reduce `format`).
using quant::int8WireBytes;
using quant::kWireBlock;
using quant::WireFormat;
using quant::wireBytes;
using quant::kWireFormatNames;
using quant::wireFormatName;
using quant::wireFormatNamed;

/// The spec a quantization dictionary describes, checked with
/// quant::checkSpec; errors go through `emitError`.
mlir::FailureOr<quant::QuantSpec>
quantSpecFromDict(mlir::DictionaryAttr dict,
                  llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// The bytes a quantized parameter stores, as a 1-D `ui8` tensor; an
/// error through `emitError` when its quantization is malformed.
mlir::FailureOr<mlir::RankedTensorType>
quantizedStorageType(mlir::DictionaryAttr dict,
                     llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// Whether the dictionary says the source tensor is stored transposed.
bool quantSourceTransposed(mlir::DictionaryAttr dict);

/// The dictionary of `spec` (every key written out).
mlir::DictionaryAttr quantSpecToDict(mlir::MLIRContext *context,
                                     const quant::QuantSpec &spec,
                                     bool sourceTransposed);

} // namespace tailor::tg

#endif // TAILOR_DIALECTS_TG_TGQUANT_H
