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
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/cuda/CudaKernelTable.h"
#include "runtime/quant/WireInt8.h"

#include <cstdint>

namespace tailor::runtime::cuda {
namespace {

constexpr unsigned kThreads = 256;

std::string launch1d(const CudaCall &call, const char *function, int64_t items,
                     void **args) {
  return call.context->launch(function, Dim3{blocksFor(items, kThreads), 1, 1},
                              Dim3{kThreads, 1, 1}, 0, args);
}

std::string checkQuantizeWire(const KernelCall &call) {
  return checkLikeCpu("quantize_wire_int8", call);
}

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
  return launch1d(call, "tailor_quantize_wire_int8", blocks * 32, args);
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

std::string checkDequantizeReduceWire(const KernelCall &call) {
  return checkLikeCpu("dequantize_reduce_wire_int8", call);
}

std::string launchDequantizeReduceWire(const CudaCall &call) {
  long long chunk = call.operands[1].numel();
  long long shards = call.operands[0].numel() / quant::int8WireBytes(chunk);
  int average = call.attributes.getInt("average", 0) != 0 ? 1 : 0;
  const void *wire = call.operands[0].data;
  void *sums = call.operands[1].data;
  void *args[] = {&wire, &sums, &chunk, &shards, &average};
  return launch1d(call, "tailor_dequantize_reduce_wire_int8", chunk, args);
}

const char *const kQuantizeWireFunctions[] = {"tailor_quantize_wire_int8",
                                              nullptr};
const char *const kDequantizeWireFunctions[] = {"tailor_dequantize_wire_int8",
                                                nullptr};
const char *const kDequantizeReduceWireFunctions[] = {
    "tailor_dequantize_reduce_wire_int8", nullptr};

} // namespace

void addCommunicationCudaKernels(std::vector<CudaKernelDef> &table) {
  table.push_back({"quantize_wire_int8", 2, checkQuantizeWire,
                   launchQuantizeWire, kQuantizeWireFunctions});
  table.push_back({"dequantize_wire_int8", 2, checkDequantizeWire,
                   launchDequantizeWire, kDequantizeWireFunctions});
  table.push_back({"dequantize_reduce_wire_int8", 2, checkDequantizeReduceWire,
                   launchDequantizeReduceWire, kDequantizeReduceWireFunctions});
}

} // namespace tailor::runtime::cuda
