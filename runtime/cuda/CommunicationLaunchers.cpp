//===- CommunicationLaunchers.cpp - ZeRO++'s int8 wire chunks -------------===//
//
// Launchers of codegen/cuda/CommunicationKernels.cu, with the CPU kernels'
// names, operands, attributes and checks (runtime/cpu/CompressionKernels.cpp,
// runtime/cpu/README.md): what ZeRO++'s quantized weight gathers and
// gradient reduce-scatters put on the wire and take off it.
//
//   - quantize_wire_int8: values f32 [s x c], wire u8 [s x (c + c / 16)],
//     `chunk` c (default the whole input); a warp per block of 64.
//   - dequantize_wire_int8: wires u8 [s x (c + c / 16)], values f32
//     [s x c], `chunk` c; a thread per value.
//   - dequantize_reduce_wire_int8: wires u8 [s x (c + c / 16)], sums f32
//     [c], `chunk` c, `average` 0 or 1; a thread per value of the chunk.
//   - quantize_wire_int4, dequantize_reduce_wire_int4: the same over int4
//     wire chunks of c / 2 + c / 16 bytes (qgZ at 4 bits).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"
#include "runtime/quant/Wire.h"

#include <cstdint>

namespace tailor::runtime::cuda {
namespace {

constexpr unsigned kThreads = 256;

std::string launch1d(const CudaCall &call, const char *function, int64_t items,
                     void **args) {
  return call.context->launch(function, Dim3{blocksFor(items, kThreads), 1, 1},
                              Dim3{kThreads, 1, 1}, 0, args);
}

/// The kernel names and device entry points of one wire format.
template <quant::WireFormat F> struct WireKernels;
template <> struct WireKernels<quant::WireFormat::Int8> {
  static constexpr const char *quantize = "quantize_wire_int8";
  static constexpr const char *reduce = "dequantize_reduce_wire_int8";
  static constexpr const char *quantizeEntry = "tailor_quantize_wire_int8";
  static constexpr const char *reduceEntry =
      "tailor_dequantize_reduce_wire_int8";
};
template <> struct WireKernels<quant::WireFormat::Int4> {
  static constexpr const char *quantize = "quantize_wire_int4";
  static constexpr const char *reduce = "dequantize_reduce_wire_int4";
  static constexpr const char *quantizeEntry = "tailor_quantize_wire_int4";
  static constexpr const char *reduceEntry =
      "tailor_dequantize_reduce_wire_int4";
};

template <quant::WireFormat F>
std::string checkQuantizeWire(const KernelCall &call) {
  return checkLikeCpu(WireKernels<F>::quantize, call);
}

template <quant::WireFormat F>
std::string launchQuantizeWire(const CudaCall &call) {
  long long n = call.operands[0].numel();
  long long chunk = call.attributes.getInt("chunk", n);
  long long blocks = n / quant::kWireBlock;
  if (blocks == 0) {
    return "";
  }
  const void *values = call.operands[0].data;
  void *wire = call.operands[1].data;
  void *args[] = {&values, &wire, &chunk, &blocks};
  // A warp per block of 64 values.
  return launch1d(call, WireKernels<F>::quantizeEntry, blocks * 32, args);
}

std::string checkDequantizeWire(const KernelCall &call) {
  return checkLikeCpu("dequantize_wire_int8", call);
}

std::string launchDequantizeWire(const CudaCall &call) {
  long long total = call.operands[1].numel();
  long long chunk = call.attributes.getInt("chunk", 0);
  if (total == 0) {
    return "";
  }
  const void *wire = call.operands[0].data;
  void *values = call.operands[1].data;
  void *args[] = {&wire, &values, &chunk, &total};
  return launch1d(call, "tailor_dequantize_wire_int8", total, args);
}

template <quant::WireFormat F>
std::string checkDequantizeReduceWire(const KernelCall &call) {
  return checkLikeCpu(WireKernels<F>::reduce, call);
}

template <quant::WireFormat F>
std::string launchDequantizeReduceWire(const CudaCall &call) {
  long long chunk = call.operands[1].numel();
  long long shards = call.operands[0].numel() / quant::wireBytes(F, chunk);
  int average = call.attributes.getInt("average", 0) != 0 ? 1 : 0;
  const void *wire = call.operands[0].data;
  void *sums = call.operands[1].data;
  void *args[] = {&wire, &sums, &chunk, &shards, &average};
  return launch1d(call, WireKernels<F>::reduceEntry, chunk, args);
}

const char *const kQuantizeWireInt8Functions[] = {
    WireKernels<quant::WireFormat::Int8>::quantizeEntry, nullptr};
const char *const kQuantizeWireInt4Functions[] = {
    WireKernels<quant::WireFormat::Int4>::quantizeEntry, nullptr};
const char *const kDequantizeWireFunctions[] = {"tailor_dequantize_wire_int8",
                                                nullptr};
const char *const kDequantizeReduceWireInt8Functions[] = {
    WireKernels<quant::WireFormat::Int8>::reduceEntry, nullptr};
const char *const kDequantizeReduceWireInt4Functions[] = {
    WireKernels<quant::WireFormat::Int4>::reduceEntry, nullptr};

} // namespace

void addCommunicationCudaKernels(std::vector<CudaKernelDef> &table) {
  using quant::WireFormat;
  table.push_back({"quantize_wire_int8", 2, checkQuantizeWire<WireFormat::Int8>,
                   launchQuantizeWire<WireFormat::Int8>,
                   kQuantizeWireInt8Functions});
  table.push_back({"quantize_wire_int4", 2, checkQuantizeWire<WireFormat::Int4>,
                   launchQuantizeWire<WireFormat::Int4>,
                   kQuantizeWireInt4Functions});
  table.push_back({"dequantize_wire_int8", 2, checkDequantizeWire,
                   launchDequantizeWire, kDequantizeWireFunctions});
  table.push_back({"dequantize_reduce_wire_int8", 2,
                   checkDequantizeReduceWire<WireFormat::Int8>,
                   launchDequantizeReduceWire<WireFormat::Int8>,
                   kDequantizeReduceWireInt8Functions});
  table.push_back({"dequantize_reduce_wire_int4", 2,
                   checkDequantizeReduceWire<WireFormat::Int4>,
                   launchDequantizeReduceWire<WireFormat::Int4>,
                   kDequantizeReduceWireInt4Functions});
}

} // namespace tailor::runtime::cuda
