//===- PipelineKernels.cpp - a pipeline stage's slots of received inputs --===//
//
// Layer split keeps what a stage received for each micro-batch in flight in
// a `pipeline_input` state [slots, ...shape]: pipeline_slot_write copies the
// value [...shape] into slot `slot`, pipeline_slot_read copies it back out.
// One contiguous memcpy each (a slot is one row-major block). The slot is
// data (the trainer's micro-batch place), so it is checked when the kernel
// runs: one outside [0, slots) is an error naming it, never an access
// outside the state. Bytes are copied as they are, any element type.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

#include <cstring>

namespace tailor::runtime::cpu {
namespace {

/// `slots` [S, ...shape] and `value` [...shape] of one element type.
std::string checkSlotShapes(const KernelCall &call, const Tensor &slots,
                            const Tensor &value) {
  if (std::string e = expectScalar(call, 1, DType::I64); !e.empty()) {
    return e;
  }
  if (slots.dtype != value.dtype || slots.rank() != value.rank() + 1 ||
      !std::equal(value.shape.begin(), value.shape.end(),
                  slots.shape.begin() + 1)) {
    return "expected slots of the value's element type and shape " +
           shapeString(value.shape) + " behind a leading slot dimension, got " +
           shapeString(slots.shape);
  }
  return "";
}

/// The byte offset of slot `call.operands[1]` in `slots`, or an error.
std::string slotOffset(const KernelCall &call, const Tensor &slots,
                       size_t bytes, size_t &offset) {
  int64_t slot = *call.operands[1].as<int64_t>();
  if (slot < 0 || slot >= slots.shape[0]) {
    return "slot " + std::to_string(slot) + " is outside [0, " +
           std::to_string(slots.shape[0]) + ")";
  }
  offset = static_cast<size_t>(slot) * bytes;
  return "";
}

std::string checkSlotWrite(const KernelCall &call) {
  if (std::string e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  return checkSlotShapes(call, call.operands[2], call.operands[0]);
}

std::string runSlotWrite(const KernelCall &call) {
  const Tensor &value = call.operands[0];
  const Tensor &slots = call.operands[2];
  size_t bytes = value.bytes();
  size_t offset = 0;
  if (std::string e = slotOffset(call, slots, bytes, offset); !e.empty()) {
    return e;
  }
  std::memcpy(static_cast<uint8_t *>(slots.data) + offset, value.data, bytes);
  return "";
}

std::string checkSlotRead(const KernelCall &call) {
  if (std::string e = expectOperandCount(call, 3); !e.empty()) {
    return e;
  }
  return checkSlotShapes(call, call.operands[0], call.operands[2]);
}

std::string runSlotRead(const KernelCall &call) {
  const Tensor &slots = call.operands[0];
  const Tensor &value = call.operands[2];
  size_t bytes = value.bytes();
  size_t offset = 0;
  if (std::string e = slotOffset(call, slots, bytes, offset); !e.empty()) {
    return e;
  }
  std::memcpy(value.data, static_cast<const uint8_t *>(slots.data) + offset,
              bytes);
  return "";
}

} // namespace

void addPipelineKernels(std::vector<KernelDef> &table) {
  table.push_back({"pipeline_slot_write", 3, checkSlotWrite, runSlotWrite});
  table.push_back({"pipeline_slot_read", 3, checkSlotRead, runSlotRead});
}

} // namespace tailor::runtime::cpu
