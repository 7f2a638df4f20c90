//===- RawDataOffsets.cpp - scan initializer raw_data byte ranges ---------===//

#include "frontends/onnx/RawDataOffsets.h"

namespace tailor::onnx_import {

namespace {

// Field numbers from onnx.proto.
constexpr uint64_t kModelGraph = 7;
constexpr uint64_t kGraphInitializer = 5;
constexpr uint64_t kTensorName = 8;
constexpr uint64_t kTensorRawData = 9;

/// A cursor over protobuf wire format; every read checks bounds.
struct WireReader {
  const uint8_t *data;
  uint64_t size;
  uint64_t pos = 0;

  bool atEnd() const { return pos >= size; }

  bool varint(uint64_t &value) {
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= size) {
        return false;
      }
      uint8_t byte = data[pos++];
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) {
        return true;
      }
    }
    return false;
  }

  /// Reads a field key; for length-delimited fields also the payload range.
  bool field(uint64_t &number, uint64_t &wireType, uint64_t &begin,
             uint64_t &length) {
    uint64_t key;
    if (!varint(key)) {
      return false;
    }
    number = key >> 3;
    wireType = key & 7;
    switch (wireType) {
    case 0: {
      uint64_t ignored;
      return varint(ignored);
    }
    case 1:
      if (size - pos < 8) {
        return false;
      }
      pos += 8;
      return true;
    case 5:
      if (size - pos < 4) {
        return false;
      }
      pos += 4;
      return true;
    case 2:
      if (!varint(length) || length > size - pos) {
        return false;
      }
      begin = pos;
      pos += length;
      return true;
    default:
      return false; // groups are not used by onnx.proto
    }
  }
};

} // namespace

llvm::StringMap<std::pair<uint64_t, uint64_t>>
findRawDataOffsets(llvm::StringRef model) {
  llvm::StringMap<std::pair<uint64_t, uint64_t>> offsets;
  const auto *base = reinterpret_cast<const uint8_t *>(model.data());
  WireReader top{base, model.size()};
  uint64_t number, wireType, begin = 0, length = 0;
  while (!top.atEnd() && top.field(number, wireType, begin, length)) {
    if (number != kModelGraph || wireType != 2) {
      continue;
    }
    WireReader graph{base + begin, length};
    uint64_t graphBase = begin;
    uint64_t gNumber, gType, gBegin = 0, gLength = 0;
    while (!graph.atEnd() && graph.field(gNumber, gType, gBegin, gLength)) {
      if (gNumber != kGraphInitializer || gType != 2) {
        continue;
      }
      WireReader tensor{base + graphBase + gBegin, gLength};
      uint64_t tensorBase = graphBase + gBegin;
      uint64_t tNumber, tType, tBegin = 0, tLength = 0;
      llvm::StringRef name;
      std::pair<uint64_t, uint64_t> raw{0, 0};
      bool hasRaw = false;
      while (!tensor.atEnd() && tensor.field(tNumber, tType, tBegin, tLength)) {
        if (tType != 2) {
          continue;
        }
        if (tNumber == kTensorName) {
          name = model.substr(tensorBase + tBegin, tLength);
        } else if (tNumber == kTensorRawData) {
          raw = {tensorBase + tBegin, tLength};
          hasRaw = true;
        }
      }
      if (hasRaw && !name.empty()) {
        offsets[name] = raw;
      }
    }
  }
  return offsets;
}

} // namespace tailor::onnx_import
